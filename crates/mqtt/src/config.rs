//! The `[mqtt]` section of the broker configuration: where to listen and every per-connection
//! and per-session limit. Field docs are the user documentation.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Settings of the MQTT 3.1.1 / 5.0 listener. Both protocol levels share one port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MqttConfig {
    /// Start the MQTT listener.
    pub enabled: bool,
    /// Address and port to listen on (IANA port 1883).
    pub bind: SocketAddr,
    /// Address and port of the TLS listener (conventionally 8883); needs the broker's
    /// `[tls]` section. None: no TLS listener.
    pub tls_bind: Option<SocketAddr>,
    /// Serve the protocol over WebSocket at `/mqtt` on the broker's HTTP port (subprotocol `mqtt`, or `mqttv3.1`).
    pub websocket: bool,
    /// Most simultaneous MQTT connections; more are accepted and closed at once.
    pub max_connections: usize,
    /// Most simultaneous connections from one IP address, so that one host cannot take every
    /// slot. A device needs one or two; raise it for many clients behind one NAT or a load
    /// generator on one machine.
    pub max_connections_per_address: usize,
    /// Largest packet accepted from a client, fixed header included, in bytes. A bigger packet
    /// closes the connection (MQTT 5: DISCONNECT 0x95 "packet too large"). Advertised to MQTT 5
    /// clients as Maximum Packet Size.
    pub max_packet_size_bytes: u32,
    /// QoS 1 and 2 messages a client may have in flight towards the broker at once (advertised to
    /// MQTT 5 clients as Receive Maximum). A client that exceeds it is disconnected (MQTT 5:
    /// 0x93 "receive maximum exceeded").
    pub receive_maximum: u16,
    /// QoS 1 and 2 messages the broker keeps in flight towards one client before it waits for
    /// acknowledgements. An MQTT 5 client's own Receive Maximum lowers it further.
    pub max_inflight: u16,
    /// Topic aliases an MQTT 5 client may define towards the broker (advertised as Topic Alias
    /// Maximum); 0 disables inbound aliases.
    pub topic_alias_maximum: u16,
    /// Subscriptions one session may hold; more are refused in the SUBACK (MQTT 5: 0x97 "quota
    /// exceeded", 3.1.1: 0x80).
    pub max_subscriptions_per_session: usize,
    /// Client ids known at once, connected or kept offline. A new client id beyond it is refused
    /// (3.1.1: CONNACK 0x03 "server unavailable", 5: 0x97 "quota exceeded").
    pub max_sessions: usize,
    /// Longest time an offline MQTT 5 session is kept; a longer Session Expiry Interval is cut
    /// to this and the client is told in the CONNACK.
    #[serde(with = "humantime_serde")]
    pub max_session_expiry: Duration,
    /// How long an offline MQTT 3.1.1 persistent session (clean session = 0) is kept. The 3.1.1
    /// specification keeps them forever; a gateway must not, so they expire after this.
    #[serde(with = "humantime_serde")]
    pub v3_session_expiry: Duration,
    /// Longest keep-alive granted, in seconds. An MQTT 5 client asking for more (or for none)
    /// is told this value as Server Keep Alive; an MQTT 3.1.1 client cannot be told, and is
    /// closed after one and a half times this much silence. One hour bounds how long a silent
    /// socket can hold a connection slot; 0 lets clients choose, keep-alive 0 included.
    pub max_keep_alive_secs: u16,
    /// Time a new connection has to send its CONNECT before it is closed.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Time a write to a client may take before the client is dropped as a slow consumer.
    #[serde(with = "humantime_serde")]
    pub write_timeout: Duration,
}

/// IANA-registered MQTT port.
pub const fn default_port() -> u16 {
    1883
}

impl Default for MqttConfig {
    fn default() -> Self {
        MqttConfig {
            enabled: true,
            bind: SocketAddr::from(([0, 0, 0, 0], default_port())),
            tls_bind: None,
            websocket: true,
            max_connections: 10_000,
            max_connections_per_address: 100,
            max_packet_size_bytes: 1024 * 1024,
            receive_maximum: 64,
            max_inflight: 64,
            topic_alias_maximum: 32,
            max_subscriptions_per_session: 256,
            max_sessions: 50_000,
            max_session_expiry: Duration::from_secs(24 * 3600),
            v3_session_expiry: Duration::from_secs(24 * 3600),
            max_keep_alive_secs: 3600,
            connect_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
        }
    }
}
