//! The `[amqp]` section of the broker's configuration: listener, negotiated limits and the
//! bounds that keep one client from exhausting the gateway's memory.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// AMQP 0-9-1 front end settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AmqpConfig {
    /// Whether the AMQP listener runs at all.
    pub enabled: bool,
    /// Address and TCP port to listen on (AMQP's standard port is 5672).
    pub bind: SocketAddr,
    /// Address and port of the TLS listener (conventionally 5671); needs the broker's
    /// `[tls]` section. None: no TLS listener.
    pub tls_bind: Option<SocketAddr>,
    /// Most AMQP connections open at once; further ones are accepted and closed immediately.
    pub max_connections: usize,
    /// Most simultaneous connections from one IP address, so that one host cannot take every
    /// slot. A service needs a few; raise it for many clients behind one NAT or a load
    /// generator on one machine.
    pub max_connections_per_address: usize,
    /// Largest frame, in bytes including the 8 bytes of framing, offered to clients in
    /// `connection.tune`. Clients may choose less (not below 4096). Bodies are split into
    /// frames of at most this size; a received frame above the negotiated size closes the
    /// connection with 501 FRAME_ERROR.
    pub frame_max_bytes: u32,
    /// Most channels per connection offered in `connection.tune` (1–65535). Opening a channel
    /// numbered above the negotiated value closes the connection with 530 NOT_ALLOWED.
    pub channel_max: u16,
    /// Heartbeat interval offered in `connection.tune`, e.g. "60s" (whole seconds; "0s"
    /// disables heartbeats unless the client asks for them). The broker sends a heartbeat after
    /// half an interval of silence and drops a peer silent for two intervals.
    #[serde(with = "humantime_serde")]
    pub heartbeat: Duration,
    /// Longest a peer may stay silent, whatever heartbeat it negotiated ("0s" included), so that
    /// silent sockets cannot hold every connection slot. "0s" = no bound.
    #[serde(with = "humantime_serde")]
    pub max_silence: Duration,
    /// Time a new connection has to go from TCP accept to `connection.open-ok`, e.g. "10s".
    #[serde(with = "humantime_serde")]
    pub handshake_timeout: Duration,
    /// Largest message body accepted from a publisher, in bytes. Larger ones close the channel
    /// with 406 PRECONDITION_FAILED before the body is read into memory.
    pub max_message_size_bytes: u64,
    /// Most consumers on one channel.
    pub max_consumers_per_channel: usize,
    /// Most unacknowledged `basic.get` deliveries held by one channel (consumer deliveries are
    /// bounded by their prefetch instead).
    pub max_unacked_gets_per_channel: usize,
    /// Most exchanges in the broker, built-in ones included.
    pub max_exchanges: usize,
    /// Most bindings whose source is one exchange (bindings on `amq.topic` are router
    /// subscriptions and not counted here).
    pub max_bindings_per_exchange: usize,
}

/// RabbitMQ's default, so clients tuned for it behave the same.
fn default_frame_max() -> u32 {
    131_072
}

/// RabbitMQ's default.
fn default_channel_max() -> u16 {
    2047
}

impl Default for AmqpConfig {
    fn default() -> Self {
        AmqpConfig {
            enabled: true,
            bind: SocketAddr::from(([0, 0, 0, 0], 5672)),
            tls_bind: None,
            max_connections: 1024,
            max_connections_per_address: 100,
            max_silence: Duration::from_secs(3600),
            frame_max_bytes: default_frame_max(),
            channel_max: default_channel_max(),
            heartbeat: Duration::from_secs(60),
            handshake_timeout: Duration::from_secs(10),
            // 16 MiB: large enough for firmware images and camera stills, small enough that a
            // handful of concurrent uploads cannot exhaust a 1 GB gateway.
            max_message_size_bytes: 16 * 1024 * 1024,
            max_consumers_per_channel: 1024,
            max_unacked_gets_per_channel: 10_000,
            max_exchanges: 1024,
            max_bindings_per_exchange: 10_000,
        }
    }
}

impl AmqpConfig {
    /// The heartbeat offered in `connection.tune`, in whole seconds (the wire field is 16 bits).
    pub fn heartbeat_secs(&self) -> u16 {
        self.heartbeat.as_secs().min(u64::from(u16::MAX)) as u16
    }

    /// `frame_max_bytes` raised to the protocol minimum, so a bad setting cannot make every
    /// client fail.
    pub fn frame_max(&self) -> u32 {
        self.frame_max_bytes.max(amqp_codec::FRAME_MIN_SIZE)
    }

    /// `channel_max` with 0 ("no limit" on the wire) replaced by the largest channel number.
    pub fn channel_max(&self) -> u16 {
        if self.channel_max == 0 { u16::MAX } else { self.channel_max }
    }
}
