//! What the method handlers (`channel.rs`, `exchange.rs`, `queue.rs`, `basic.rs`) work with:
//! the state every connection of a front end shares, and one connection's own state. Kept
//! apart from `session.rs`, which dispatches to those handlers, so that they never import the
//! dispatcher back.

use std::collections::HashMap;
use std::sync::Arc;

use tolk_core::{Metrics, Queue, Router, Session};
use tracing::debug;

use crate::config::AmqpConfig;
use crate::exchange::ExchangeRegistry;

/// State shared by every connection of one front end.
pub struct Shared {
    /// Settings.
    pub config: AmqpConfig,
    /// The broker's exchanges.
    pub registry: ExchangeRegistry,
    /// The core.
    pub router: Router,
}

impl Shared {
    /// Shared state for a front end with `config` over `router`.
    pub fn new(config: AmqpConfig, router: Router) -> Self {
        let registry = ExchangeRegistry::new(config.max_exchanges, config.max_bindings_per_exchange);
        Shared { config, registry, router }
    }
}

/// Credentials from `connection.start-ok`, parsed for the authentication hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// `PLAIN` or `AMQPLAIN`.
    pub mechanism: String,
    /// Login name.
    pub username: String,
    /// Password (never logged).
    pub password: String,
}

/// The authentication hook. Every login is accepted for now; a later version checks
/// `credentials` against the broker's users and returns the reason for a refusal.
pub(crate) fn authenticate(credentials: &Credentials) -> Result<(), String> {
    debug!(user = %credentials.username, mechanism = %credentials.mechanism, "login accepted");
    Ok(())
}

/// Connection-wide state the method handlers work with.
pub(crate) struct Ctx {
    pub shared: Arc<Shared>,
    pub core: Session,
    /// Core consumer tag → channel it belongs to.
    pub consumers: HashMap<u64, u16>,
    pub next_core_tag: u64,
    /// Exclusive queues this connection created; deleted (and unbound) when it ends.
    pub exclusive_queues: Vec<Arc<Queue>>,
    pub client_id: Arc<str>,
    /// Whether the client understands server-sent `basic.cancel` (its capabilities table).
    pub cancel_notify: bool,
    pub frame_max: u32,
    pub metrics: Arc<Metrics>,
    /// Body bytes received for publishes not yet complete, over all channels; capped by
    /// `max_message_size_bytes` so that many channels cannot each buffer a large message.
    pub assembling: u64,
}
