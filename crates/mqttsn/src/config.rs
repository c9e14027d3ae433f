//! The `[mqttsn]` section of the broker configuration: the UDP socket, gateway identity,
//! advertisement, retransmission, limits, and pre-defined topic ids. Field docs are the user
//! documentation; [`MqttSnConfig::validate`] checks what serde cannot.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tolk_core::topic;

/// Settings of the MQTT-SN 1.2 gateway (UDP).
///
/// ```toml
/// [mqttsn]
/// bind = "0.0.0.0:1884"
/// gateway_id = 1
///
/// [mqttsn.advertise]
/// enabled = true
/// address = "255.255.255.255:1884"
/// period = "15m"
///
/// [mqttsn.predefined]        # for every client
/// 1 = "sensors/temperature"
///
/// [mqttsn.clients.sensor-7]               # client id "sensor-7" logs in as user "sensors"
/// user = "sensors"
///
/// [mqttsn.clients.sensor-7.predefined]   # only for client id "sensor-7"; wins over the global table
/// 2 = "sensors/7/battery"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MqttSnConfig {
    /// Start the MQTT-SN gateway.
    pub enabled: bool,
    /// UDP address and port to listen on (MQTT-SN's customary port is 1884).
    pub bind: SocketAddr,
    /// The gateway id sent in GWINFO and ADVERTISE (MQTT-SN 1.2 §5.4.1, §5.4.3).
    pub gateway_id: u8,
    /// Most client sessions kept at once: connected, asleep, or offline with clean session off.
    /// When full, the oldest offline session is dropped to make room; when none is offline a new
    /// client gets CONNACK 0x01 "rejected: congestion".
    pub max_clients: usize,
    /// Most sessions at one IP address (any port) at once: connected (the will handshake
    /// included) or asleep; offline sessions are at no address. A CONNECT beyond it gets CONNACK
    /// 0x01 "rejected: congestion", so that one host flooding CONNECTs cannot fill
    /// `max_clients` and lock everyone else out. Default
    /// [`default_max_clients_per_address`]: 100, a hundredth of the default `max_clients`, and
    /// more sensors than one NAT router or test rig usually carries. A forwarder (§5.5) relays
    /// many wireless nodes from one address; encapsulated messages are not supported yet, and
    /// when they are, each node will count toward its forwarder's address: raise this to the
    /// largest number of nodes behind one forwarder.
    pub max_clients_per_address: usize,
    /// Longest time from a CONNECT with the Will flag to the end of its will handshake
    /// (WILLTOPICREQ, WILLTOPIC, WILLMSGREQ, WILLMSG, §6.3). Past it the half-open session is
    /// dropped (closed as `idle_timeout`). Default [`default_handshake_timeout`]: 20 s, long
    /// enough for a client to retransmit one lost message with the spec's suggested Tretry
    /// (10 to 15 s).
    #[serde(with = "humantime_serde")]
    pub handshake_timeout: Duration,
    /// Longest silence from a CONNACK to the client's first message (PUBLISH, REGISTER,
    /// SUBSCRIBE, PINGREQ...), when shorter than 1.5 × its keep-alive. A client that connected
    /// and said nothing since is lost after it (its will fires; closed as `idle_timeout`) instead
    /// of holding its session for its whole keep-alive. Default [`default_first_message_timeout`]:
    /// 60 s. Clients that wait longer after connecting must send a PINGREQ first; set it to
    /// 1.5 × `max_keep_alive` or more to turn the rule off.
    #[serde(with = "humantime_serde")]
    pub first_message_timeout: Duration,
    /// Longest keep-alive granted (§6.11). A client asking for more, or for 0 ("no
    /// supervision"), gets this one instead (MQTT-SN's CONNACK cannot tell it so): silent for
    /// 1.5 × this, it is lost like any client past its keep-alive, but closed as `idle_timeout`
    /// rather than `keepalive_timeout`. Default [`default_max_keep_alive`]: 1 hour, so that a
    /// vanished client frees its session within 90 minutes whatever it asked for.
    #[serde(with = "humantime_serde")]
    pub max_keep_alive: Duration,
    /// Largest MQTT-SN message accepted or sent, Length field included, in bytes. Bigger
    /// datagrams are dropped (and counted); a message for a subscriber that would be bigger is
    /// dropped and counted as untranslatable. The default is the largest UDP/IPv4 payload.
    pub max_message_size_bytes: usize,
    /// Kernel receive buffer asked for the gateway's UDP socket (`SO_RCVBUF`), in bytes; `0`
    /// keeps the system default. Datagrams arriving while it is full are dropped by the kernel,
    /// counted as `receive_buffer_full` and logged. Linux caps it at `net.core.rmem_max` (often
    /// 208 KiB); the gateway says at start (info) when it got less than it asked for.
    pub receive_buffer_bytes: usize,
    /// Messages kept for one sleeping client (MQTT-SN 1.2 §6.14) until it wakes up with a
    /// PINGREQ. At-most-once messages are buffered too. Beyond it, new messages for that client
    /// are dropped (counted as `queue_full`).
    pub max_buffered_per_sleeping_client: usize,
    /// Subscriptions one client may hold; more are refused with SUBACK 0x01 "rejected: congestion".
    pub max_subscriptions_per_client: usize,
    /// Topic names that may hold a gateway-assigned topic id (REGISTER). Ids are global, stable
    /// and never reused, so that they survive a restart; a new name beyond this many is refused
    /// with REGACK 0x01 "rejected: congestion". At most 65534.
    pub max_topic_ids: usize,
    /// How long the session of a client that connected with clean session off is kept after it
    /// disconnected or was lost (its subscriptions stay and at-least-once messages queue for it).
    #[serde(with = "humantime_serde")]
    pub session_expiry: Duration,
    /// Periodic ADVERTISE broadcasts (MQTT-SN 1.2 §6.1).
    pub advertise: AdvertiseConfig,
    /// Retransmission of messages the gateway sends and expects an answer to (§6.13).
    pub retransmit: RetransmitConfig,
    /// Pre-defined topic ids known to every client (§3 "pre-defined topic ids"): id = "topic".
    /// Ids 1 to 65534; topics are names without wildcards.
    pub predefined: BTreeMap<u16, String>,
    /// Per client id settings, e.g. `[mqttsn.clients.sensor-7.predefined]`.
    pub clients: BTreeMap<String, ClientConfig>,
}

/// `[mqttsn.advertise]`: the gateway announces itself with ADVERTISE every `period`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdvertiseConfig {
    /// Send ADVERTISE messages at all. Off by default: most UDP deployments configure the
    /// gateway address in the client, and broadcasts leave the host.
    pub enabled: bool,
    /// Where to send them: a broadcast or multicast address and port.
    pub address: SocketAddr,
    /// Time between two ADVERTISE messages (also sent in them as Duration, in whole seconds).
    #[serde(with = "humantime_serde")]
    pub period: Duration,
}

/// `[mqttsn.retransmit]`: the spec's Tretry and Nretry (§6.13), applied to PUBLISH (QoS 1/2),
/// PUBREL and REGISTER sent by the gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetransmitConfig {
    /// Time to wait for the client's answer before sending again (the spec suggests 10-15 s).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Retransmissions before the client is considered lost and its will is published (the spec
    /// suggests 3-5).
    pub retries: u32,
}

/// `[mqttsn.clients.<client id>]`: settings for one client id.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientConfig {
    /// Pre-defined topic ids for this client only: id = "topic". An id also in the global table
    /// means this client's topic.
    pub predefined: BTreeMap<u16, String>,
    /// The `[auth]` user this client id logs in as. MQTT-SN 1.2 carries no credentials, so the
    /// client id is the only thing to go by: the ACL's rules for this user apply to it, and it
    /// connects even with `allow_anonymous = false`. Client ids not listed are anonymous.
    /// Anyone on the network can send a CONNECT with any client id: map ids to users only on a
    /// network you trust, or behind DTLS/IPsec.
    pub user: Option<String>,
}

/// MQTT-SN's customary UDP port (not IANA-registered; Paho's gateway and most clients use it).
pub const fn default_port() -> u16 {
    1884
}

/// Largest payload of a UDP datagram over IPv4 (65535 − 8-byte UDP header − 20-byte IP header).
pub const fn default_max_message_size_bytes() -> usize {
    65_507
}

/// Default of [`MqttSnConfig::max_clients_per_address`].
pub const fn default_max_clients_per_address() -> usize {
    100
}

/// Default of [`MqttSnConfig::handshake_timeout`].
pub const fn default_handshake_timeout() -> Duration {
    Duration::from_secs(20)
}

/// Default of [`MqttSnConfig::first_message_timeout`].
pub const fn default_first_message_timeout() -> Duration {
    Duration::from_secs(60)
}

/// Default of [`MqttSnConfig::max_keep_alive`].
pub const fn default_max_keep_alive() -> Duration {
    Duration::from_secs(3600)
}

impl Default for MqttSnConfig {
    fn default() -> Self {
        MqttSnConfig {
            enabled: true,
            bind: SocketAddr::from(([0, 0, 0, 0], default_port())),
            gateway_id: 1,
            max_clients: 10_000,
            max_clients_per_address: default_max_clients_per_address(),
            handshake_timeout: default_handshake_timeout(),
            first_message_timeout: default_first_message_timeout(),
            max_keep_alive: default_max_keep_alive(),
            max_message_size_bytes: default_max_message_size_bytes(),
            receive_buffer_bytes: 1 << 20,
            max_buffered_per_sleeping_client: 100,
            max_subscriptions_per_client: 256,
            max_topic_ids: 10_000,
            session_expiry: Duration::from_secs(24 * 3600),
            advertise: AdvertiseConfig::default(),
            retransmit: RetransmitConfig::default(),
            predefined: BTreeMap::new(),
            clients: BTreeMap::new(),
        }
    }
}

impl Default for AdvertiseConfig {
    fn default() -> Self {
        AdvertiseConfig {
            enabled: false,
            address: SocketAddr::from(([255, 255, 255, 255], default_port())),
            period: Duration::from_secs(15 * 60),
        }
    }
}

impl Default for RetransmitConfig {
    fn default() -> Self {
        RetransmitConfig { timeout: Duration::from_secs(10), retries: 3 }
    }
}

/// A setting the gateway cannot run with; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mqttsn.{field}: {problem}")]
pub struct ConfigError {
    /// Dotted path of the offending setting below `[mqttsn]`.
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

impl ConfigError {
    fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        ConfigError { field: field.into(), problem: problem.into() }
    }
}

/// Smallest message the gateway must be able to send: a PUBLISH header with an empty payload in
/// the three-octet Length form, or a REGISTER with a short name.
const MIN_MESSAGE_SIZE: usize = 16;

impl MqttSnConfig {
    /// Checks limits and pre-defined topics. The broker calls it at load; `start` calls it too.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (field, value) in [
            ("max_clients", self.max_clients),
            ("max_clients_per_address", self.max_clients_per_address),
            ("max_buffered_per_sleeping_client", self.max_buffered_per_sleeping_client),
            ("max_subscriptions_per_client", self.max_subscriptions_per_client),
        ] {
            if value == 0 {
                return Err(ConfigError::new(field, "must be at least 1"));
            }
        }
        if !(MIN_MESSAGE_SIZE..=mqttsn_codec::MAX_MESSAGE_LEN).contains(&self.max_message_size_bytes) {
            return Err(ConfigError::new(
                "max_message_size_bytes",
                format!("must be between {MIN_MESSAGE_SIZE} and {}", mqttsn_codec::MAX_MESSAGE_LEN),
            ));
        }
        if self.max_topic_ids > crate::registry::MAX_TOPIC_IDS {
            return Err(ConfigError::new("max_topic_ids", format!("at most {}", crate::registry::MAX_TOPIC_IDS)));
        }
        for (field, value) in [
            ("retransmit.timeout", self.retransmit.timeout),
            ("handshake_timeout", self.handshake_timeout),
            ("first_message_timeout", self.first_message_timeout),
        ] {
            if value.is_zero() {
                return Err(ConfigError::new(field, "must be longer than 0"));
            }
        }
        if self.max_keep_alive < Duration::from_secs(1) {
            return Err(ConfigError::new("max_keep_alive", "must be at least 1s (keep-alives are whole seconds)"));
        }
        if self.advertise.enabled && self.advertise.period < Duration::from_secs(1) {
            return Err(ConfigError::new("advertise.period", "must be at least 1s"));
        }
        check_predefined("predefined", &self.predefined)?;
        for (client_id, client) in &self.clients {
            check_predefined(&format!("clients.{client_id}.predefined"), &client.predefined)?;
        }
        Ok(())
    }
}

/// Ids 0x0000 and 0xFFFF are reserved (§5.3.11); topics must be publishable names.
fn check_predefined(field: &str, table: &BTreeMap<u16, String>) -> Result<(), ConfigError> {
    for (&id, name) in table {
        if id == 0 || id == u16::MAX {
            return Err(ConfigError::new(field, format!("id {id} is reserved; use 1 to 65534")));
        }
        if let Err(e) = topic::validate_name(name) {
            return Err(ConfigError::new(format!("{field}.{id}"), format!("{name:?}: {e}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_toml_shape_parses() {
        let text = r#"
            bind = "127.0.0.1:0"
            gateway_id = 7
            max_clients_per_address = 500
            handshake_timeout = "5s"
            first_message_timeout = "2m"
            max_keep_alive = "30m"
            [advertise]
            enabled = true
            address = "239.1.2.3:1884"
            period = "30s"
            [retransmit]
            timeout = "250ms"
            retries = 2
            [predefined]
            1 = "sensors/temperature"
            [clients.sensor-7.predefined]
            2 = "sensors/7/battery"
        "#;
        let config: MqttSnConfig = toml::from_str(text).unwrap();
        assert_eq!(config.gateway_id, 7);
        assert_eq!(config.max_clients_per_address, 500);
        assert_eq!(config.handshake_timeout, Duration::from_secs(5));
        assert_eq!(config.first_message_timeout, Duration::from_secs(120));
        assert_eq!(config.max_keep_alive, Duration::from_secs(1800));
        assert_eq!(config.retransmit.timeout, Duration::from_millis(250));
        assert_eq!(config.predefined[&1], "sensors/temperature");
        assert_eq!(config.clients["sensor-7"].predefined[&2], "sensors/7/battery");
        config.validate().unwrap();
    }

    #[test]
    fn defaults_round_trip_through_toml() {
        let text = toml::to_string(&MqttSnConfig::default()).unwrap();
        let back: MqttSnConfig = toml::from_str(&text).unwrap();
        assert_eq!(back, MqttSnConfig::default());
        MqttSnConfig::default().validate().unwrap();
    }

    #[test]
    fn unknown_keys_and_bad_tables_are_refused() {
        assert!(toml::from_str::<MqttSnConfig>("gateway = 1").is_err());
        assert!(toml::from_str::<MqttSnConfig>("[clients.a]\npredef = {}").is_err());
        assert!(toml::from_str::<MqttSnConfig>("[predefined]\n70000 = \"a\"").is_err());
        let mut config = MqttSnConfig::default();
        config.predefined.insert(0, "a".into());
        assert_eq!(config.validate().unwrap_err().field, "predefined");
        config.predefined = BTreeMap::from([(3, "a/#".into())]);
        assert_eq!(config.validate().unwrap_err().field, "predefined.3");
        config.predefined.clear();
        config
            .clients
            .insert("c".into(), ClientConfig { predefined: BTreeMap::from([(u16::MAX, "x".into())]), user: None });
        assert_eq!(config.validate().unwrap_err().field, "clients.c.predefined");
    }

    #[test]
    fn limits_against_hostile_peers_must_be_usable() {
        let refused = |config: MqttSnConfig| config.validate().unwrap_err().field;
        let base = MqttSnConfig::default;
        assert_eq!(refused(MqttSnConfig { max_clients_per_address: 0, ..base() }), "max_clients_per_address");
        assert_eq!(refused(MqttSnConfig { handshake_timeout: Duration::ZERO, ..base() }), "handshake_timeout");
        assert_eq!(refused(MqttSnConfig { first_message_timeout: Duration::ZERO, ..base() }), "first_message_timeout");
        assert_eq!(refused(MqttSnConfig { max_keep_alive: Duration::from_millis(999), ..base() }), "max_keep_alive");
    }
}
