//! The `[stomp]` section of the broker configuration: where to listen, the heart-beat offer and
//! every per-connection limit. Field docs are the user documentation.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use stomp_codec::Limits;

/// Settings of the STOMP 1.0 / 1.1 / 1.2 listener. All versions share one port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StompConfig {
    /// Start the STOMP listener.
    pub enabled: bool,
    /// Address and port to listen on (61613 is the port STOMP brokers conventionally use).
    pub bind: SocketAddr,
    /// Address and port of the TLS listener (conventionally 61614); needs the broker's
    /// `[tls]` section. None: no TLS listener.
    pub tls_bind: Option<SocketAddr>,
    /// Serve the protocol over WebSocket at `/stomp` on the broker's HTTP port (subprotocols `v12.stomp`, `v11.stomp`, `v10.stomp`).
    pub websocket: bool,
    /// Most simultaneous STOMP connections; more are accepted and closed at once.
    pub max_connections: usize,
    /// Most simultaneous connections from one IP address, so that one host cannot take every
    /// slot. A device needs one or two; raise it for many clients behind one NAT or a load
    /// generator on one machine.
    pub max_connections_per_address: usize,
    /// Largest frame accepted from a client in bytes, from the command line to the terminating
    /// NUL (headers and body together). A bigger frame is answered with ERROR and the connection
    /// is closed.
    pub max_frame_size_bytes: usize,
    /// Most header lines in one client frame (repeats included); more → ERROR and close.
    pub max_headers: usize,
    /// Longest header line in a client frame, in bytes; longer → ERROR and close.
    pub max_header_line_bytes: usize,
    /// The broker's heart-beat offer, first number of the CONNECTED `heart-beat` header: the
    /// shortest interval at which the broker is willing to send heart-beats. The interval used is
    /// the larger of this and what the client asks for; `0s` = the broker never sends heart-beats.
    #[serde(with = "humantime_serde")]
    pub heart_beat_send: Duration,
    /// The broker's heart-beat wish, second number of the CONNECTED `heart-beat` header: the
    /// shortest interval at which the broker asks to hear from the client. The interval used is
    /// the larger of this and what the client offers (a client offering none is never checked),
    /// and a client silent for twice that interval is disconnected. A low value only matters for
    /// clients that offer to heart-beat often. `0s` = the broker asks for no heart-beats and never
    /// drops silent clients.
    #[serde(with = "humantime_serde")]
    pub heart_beat_receive: Duration,
    /// Longest a connected client may stay silent, whatever heart-beats it negotiated (none
    /// included): a silent socket cannot hold a connection slot forever. `0s` = no bound.
    #[serde(with = "humantime_serde")]
    pub max_silence: Duration,
    /// Time a new connection has to send its CONNECT (or STOMP) frame before it is closed.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Time pending output may wait without the socket taking any of it before the client is
    /// dropped as a slow consumer.
    #[serde(with = "humantime_serde")]
    pub write_timeout: Duration,
    /// Subscriptions one connection may hold; SUBSCRIBE beyond it is answered with ERROR.
    pub max_subscriptions: usize,
    /// MESSAGE frames of `client` / `client-individual` subscriptions a connection may hold
    /// unacknowledged. At the limit the broker stops sending to that connection until it acks;
    /// messages for it then wait in its outbox, whose limit (`[core] outbox_capacity`) applies.
    pub max_unacked_messages: usize,
    /// Unacknowledged messages one `client` / `client-individual` subscription to a `/queue/`
    /// may hold before the queue gives the next message to another consumer. A SUBSCRIBE may
    /// ask for a different value with the `prefetch-count` header (RabbitMQ's name), capped at
    /// `max_unacked_messages`.
    pub queue_prefetch: usize,
    /// Transactions (BEGIN without COMMIT/ABORT yet) one connection may have open at once.
    pub max_transactions: usize,
    /// SEND, ACK and NACK frames one transaction may buffer before COMMIT.
    pub max_transaction_frames: usize,
    /// Bytes of SEND bodies one transaction may buffer before COMMIT.
    pub max_transaction_bytes: usize,
}

/// The port STOMP brokers (ActiveMQ, RabbitMQ, Artemis) listen on by convention.
pub const fn default_port() -> u16 {
    61613
}

impl Default for StompConfig {
    fn default() -> Self {
        StompConfig {
            enabled: true,
            bind: SocketAddr::from(([0, 0, 0, 0], default_port())),
            tls_bind: None,
            websocket: true,
            max_connections: 10_000,
            max_connections_per_address: 100,
            max_frame_size_bytes: Limits::DEFAULT_MAX_FRAME_SIZE,
            max_headers: Limits::DEFAULT_MAX_HEADERS,
            max_header_line_bytes: Limits::DEFAULT_MAX_HEADER_LINE,
            heart_beat_send: Duration::from_secs(10),
            heart_beat_receive: Duration::from_secs(1),
            max_silence: Duration::from_secs(3600),
            connect_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
            max_subscriptions: 256,
            max_unacked_messages: 1024,
            queue_prefetch: 64,
            max_transactions: 16,
            max_transaction_frames: 1000,
            max_transaction_bytes: 4 * 1024 * 1024,
        }
    }
}

impl StompConfig {
    /// The decoder bounds this configuration asks for.
    pub fn limits(&self) -> Limits {
        Limits {
            max_frame_size: self.max_frame_size_bytes,
            max_headers: self.max_headers,
            max_header_line: self.max_header_line_bytes,
            ..Limits::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_listen_on_61613() {
        let config = StompConfig::default();
        assert_eq!(config.bind.port(), 61613);
        assert!(config.enabled);
        assert_eq!(config.limits().max_frame_size, 1024 * 1024);
    }
}
