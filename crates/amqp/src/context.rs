//! What the method handlers (`channel.rs`, `exchange.rs`, `queue.rs`, `basic.rs`) work with:
//! the state every connection of a front end shares, and one connection's own state. Kept
//! apart from `session.rs`, which dispatches to those handlers, so that they never import the
//! dispatcher back.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use tolk_core::auth::Authenticator;
use tolk_core::{AckLine, Metrics, Queue, Router, Session};

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
    /// The broker's authenticator.
    pub auth: Arc<dyn Authenticator>,
}

impl Shared {
    /// Shared state for a front end with `config` over `router`, logins checked by `auth`.
    pub fn new(config: AmqpConfig, router: Router, auth: Arc<dyn Authenticator>) -> Self {
        let registry = ExchangeRegistry::new(config.max_exchanges, config.max_bindings_per_exchange);
        registry.attach_store(&router);
        Shared { config, registry, router, auth }
    }
}

/// What `connection.start-ok` carried, parsed from its PLAIN or AMQPLAIN response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    /// `PLAIN` or `AMQPLAIN`.
    pub mechanism: String,
    /// Login name.
    pub username: String,
    /// Password (never logged).
    pub password: String,
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
    /// The client's address.
    pub peer: SocketAddr,
    /// The user a TLS client certificate names (`[tls] use_identity_as_username`); it wins
    /// over the PLAIN or AMQPLAIN login.
    pub identity: Option<Arc<str>>,
    /// Whether the client understands server-sent `basic.cancel` (its capabilities table).
    pub cancel_notify: bool,
    pub frame_max: u32,
    pub metrics: Arc<Metrics>,
    /// Body bytes received for publishes not yet complete, over all channels; capped by
    /// `max_message_size_bytes` so that many channels cannot each buffer a large message.
    pub assembling: u64,
    /// One entry per store commit the core session awaits, in publish order: the publisher
    /// confirm to send once it is durable (`None` on a channel without confirms).
    pub confirms: AckLine<Option<Confirm>>,
}

/// A publisher confirm waiting for the store (or in line behind one that is).
pub(crate) struct Confirm {
    /// The channel in confirm mode.
    pub channel: u16,
    /// The publish's sequence number (the confirm's delivery tag).
    pub seq: u64,
    /// A holder refused the message: a nack whatever the store says.
    pub nack: bool,
}
