//! What every client session shares and is handed on each call: the router, the topic-id
//! registry, the counters and the limits. Passed as `&mut Gateway` rather than shared behind a
//! lock, because one endpoint task drives every session (sans-IO, single owner).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tolk_core::access::Rights;
use tolk_core::auth::{Authenticator, Credentials};
use tolk_core::{CloseReason, DropReason, Protocol, Router};

use crate::config::MqttSnConfig;
use crate::registry::TopicRegistry;
use crate::stats::GatewayStats;

/// Limits a session applies, copied from the configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Tretry (§6.13).
    pub(crate) retransmit_timeout: Duration,
    /// Nretry (§6.13).
    pub(crate) retransmit_retries: u32,
    /// Messages buffered for a sleeping client.
    pub(crate) max_buffered_sleeping: usize,
    /// Largest message sent.
    pub(crate) max_message_size: usize,
    /// Subscriptions per client.
    pub(crate) max_subscriptions: usize,
    /// Offline persistent sessions are forgotten after this.
    pub(crate) session_expiry: Duration,
    /// Retained messages sent for one SUBSCRIBE (a wildcard can match many).
    pub(crate) max_retained_per_subscribe: usize,
    /// Longest will handshake, from the CONNECT.
    pub(crate) handshake_timeout: Duration,
    /// Longest silence between a CONNECT and the client's next message.
    pub(crate) first_message_timeout: Duration,
    /// Longest keep-alive granted; also the one granted for keep-alive 0.
    pub(crate) max_keep_alive: Duration,
}

/// Incoming QoS 2 messages a client may leave unreleased (no PUBREL yet). The client may have
/// only one outstanding (§6.13), so a small bound only guards against misbehaving peers.
pub(crate) const MAX_INBOUND_QOS2: usize = 16;

impl Limits {
    pub(crate) fn new(config: &MqttSnConfig, outbox_capacity: usize) -> Self {
        Limits {
            retransmit_timeout: config.retransmit.timeout,
            retransmit_retries: config.retransmit.retries,
            max_buffered_sleeping: config.max_buffered_per_sleeping_client,
            max_message_size: config.max_message_size_bytes,
            max_subscriptions: config.max_subscriptions_per_client,
            session_expiry: config.session_expiry,
            max_retained_per_subscribe: outbox_capacity.max(1),
            handshake_timeout: config.handshake_timeout,
            first_message_timeout: config.first_message_timeout,
            max_keep_alive: config.max_keep_alive,
        }
    }
}

/// State shared by the sessions of one gateway.
pub(crate) struct Gateway {
    /// The core.
    pub(crate) router: Router,
    /// Topic name ↔ registered id, global and persistent.
    pub(crate) registry: TopicRegistry,
    /// Gateway-specific counters.
    pub(crate) stats: Arc<GatewayStats>,
    /// Limits, shared with every session (120 bytes each if copied).
    pub(crate) limits: Arc<Limits>,
    /// The broker's authenticator, asked at every CONNECT.
    pub(crate) auth: Arc<dyn Authenticator>,
    /// Client id → `[auth]` user (`[mqttsn.clients.ID] user`).
    pub(crate) users: HashMap<String, String>,
}

impl Gateway {
    /// Logs a client in by its id alone (MQTT-SN has no credentials): the user configuration
    /// maps it to, or anonymous. `None` for QoS −1 publishers, which have no client id. Returns
    /// its rights, or why it is refused (counted as an `auth_failed` close).
    /// The rights of a client the store brought back (it logged in before the restart).
    pub(crate) fn rights_of(&self, client_id: &str) -> Rights {
        let user = self.users.get(client_id).map(String::as_str);
        self.auth.access(user, Some(client_id))
    }

    pub(crate) fn login(&self, client_id: Option<&str>, peer: SocketAddr) -> Result<Rights, String> {
        let user = client_id.and_then(|id| self.users.get(id)).map(String::as_str);
        let credentials = Credentials {
            protocol: Protocol::MqttSn,
            username: user,
            password: None,
            client_id,
            peer,
            proven: user.is_some(),
        };
        match self.auth.authenticate(&credentials) {
            Ok(()) => Ok(self.auth.access(user, client_id)),
            Err(why) => {
                self.router.metrics().protocol(Protocol::MqttSn).closed(CloseReason::AuthFailed);
                Err(why)
            }
        }
    }

    /// Counts one message accepted from a client.
    pub(crate) fn count_in(&self) {
        self.router.metrics().protocol(Protocol::MqttSn).messages_in.fetch_add(1, Relaxed);
    }

    /// Counts `n` messages not delivered to a client.
    pub(crate) fn count_drops(&self, reason: DropReason, n: u64) {
        self.router.metrics().protocol(Protocol::MqttSn).dropped(reason, n);
    }

    /// Counts one message not delivered to a client.
    pub(crate) fn count_drop(&self, reason: DropReason) {
        self.count_drops(reason, 1);
    }

    /// Counts one datagram dropped or refused as bad input: one that does not decode, or that
    /// its sender may not send (at all, or in its session's state). It goes into the gateway
    /// counter `which` picks and into `tolk_messages_dropped_total{reason="malformed"}`.
    pub(crate) fn count_bad_input(&self, which: impl FnOnce(&GatewayStats) -> &AtomicU64) {
        GatewayStats::bump(which(&self.stats));
        self.count_drop(DropReason::Malformed);
    }

    /// Counts one client connection that ended.
    pub(crate) fn count_closed(&self, reason: CloseReason) {
        self.router.metrics().protocol(Protocol::MqttSn).closed(reason);
    }

    /// Counts one CONNECT refused for lack of room.
    pub(crate) fn count_refused_connection(&self) {
        self.router.metrics().protocol(Protocol::MqttSn).connections_refused.fetch_add(1, Relaxed);
    }
}
