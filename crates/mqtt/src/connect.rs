//! The CONNECT decision, without I/O: which client id, which keep-alive, how long the session
//! lives, whether the will is acceptable, and the limits the client asked us to respect.
//! Refusals carry the CONNACK reason (lowered to a 3.1.1 return code by the codec).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use mqtt_codec::Version;
use rmqtt_codec::v5::{Connect, ConnectAckReason};
use tolk_core::topic;

use crate::config::MqttConfig;
use crate::will::Will;

/// What the broker grants a client that may connect.
#[derive(Debug)]
pub struct ConnectPlan {
    /// The client id in use (the client's own, or one we assigned).
    pub client_id: Arc<str>,
    /// Whether we chose the id (MQTT 5: returned as Assigned Client Identifier).
    pub assigned: bool,
    /// Start from a fresh session, discarding any stored one.
    pub clean_start: bool,
    /// How long the session outlives the connection.
    pub expiry: Duration,
    /// MQTT 5: the Session Expiry Interval to announce in CONNACK because we changed it.
    pub expiry_announced: Option<u32>,
    /// The keep-alive in force, in seconds (0: off), after the broker's cap; see
    /// [`keep_alive_timeout`].
    pub keep_alive: u16,
    /// MQTT 5 Server Keep Alive, when we override the client's value.
    pub server_keep_alive: Option<u16>,
    /// The will, validated.
    pub will: Option<Will>,
    /// The client's Receive Maximum: most QoS 1/2 deliveries it takes unacknowledged.
    pub client_receive_max: u16,
    /// The client's Maximum Packet Size.
    pub client_max_packet: Option<NonZeroU32>,
    /// The client's Topic Alias Maximum.
    pub client_alias_max: u16,
}

/// Silence after which a connection with `keep_alive` (seconds) is dropped: 1.5 × the
/// keep-alive (MQTT-3.1.2-24), `None` when keep-alive is off.
pub fn keep_alive_timeout(keep_alive: u16) -> Option<Duration> {
    (keep_alive > 0).then(|| Duration::from_millis(u64::from(keep_alive) * 1500))
}

/// Why a CONNECT is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Answer with this CONNACK reason, then close.
    Connack(ConnectAckReason, &'static str),
    /// Close without an answer (3.1.1 has no code for the problem).
    Close(&'static str),
}

/// Decides on a CONNECT. `assign_id` makes a unique id for a client that sent none.
pub fn plan(
    connect: &Connect,
    version: Version,
    config: &MqttConfig,
    assign_id: impl FnOnce() -> String,
) -> Result<ConnectPlan, Refusal> {
    if version == Version::V5 && connect.auth_method.is_some() {
        // Enhanced authentication (MQTT 5 §4.12) is not supported.
        return Err(Refusal::Connack(
            ConnectAckReason::BadAuthenticationMethod,
            "enhanced authentication is not supported",
        ));
    }
    let (client_id, assigned) = if connect.client_id.is_empty() {
        if version == Version::V3 && !connect.clean_start {
            // MQTT-3.1.3-8: a zero-byte id needs clean session; CONNACK 0x02.
            return Err(Refusal::Connack(
                ConnectAckReason::ClientIdentifierNotValid,
                "empty client id without clean session",
            ));
        }
        (assign_id(), true)
    } else {
        (String::from(&*connect.client_id), false)
    };
    let will = Will::from_connect(connect.last_will.clone());
    if let Some(w) = &will {
        if topic::validate_name(&w.last_will.topic).is_err() {
            return match version {
                Version::V5 => Err(Refusal::Connack(ConnectAckReason::TopicNameInvalid, "invalid will topic")),
                Version::V3 => Err(Refusal::Close("invalid will topic")),
            };
        }
        if w.last_will.is_utf8_payload == Some(true) && std::str::from_utf8(&w.last_will.message).is_err() {
            return Err(Refusal::Connack(ConnectAckReason::PayloadFormatInvalid, "will payload is not UTF-8"));
        }
    }
    let (expiry, expiry_announced) = match version {
        Version::V3 if connect.clean_start => (Duration::ZERO, None),
        Version::V3 => (config.v3_session_expiry, None),
        Version::V5 => {
            let asked = Duration::from_secs(u64::from(connect.session_expiry_interval_secs));
            if asked > config.max_session_expiry {
                let capped = u32::try_from(config.max_session_expiry.as_secs()).unwrap_or(u32::MAX - 1);
                (config.max_session_expiry, Some(capped))
            } else {
                (asked, None)
            }
        }
    };
    let mut keep_alive = connect.keep_alive;
    let mut server_keep_alive = None;
    let cap = config.max_keep_alive_secs;
    if cap > 0 && (keep_alive == 0 || keep_alive > cap) {
        // MQTT 5 clients are told (Server Keep Alive); 3.1.1 has no way to tell them, so the
        // cap only bounds how long they may stay silent: a connection asking for no keep-alive
        // cannot hold its slot forever.
        keep_alive = cap;
        server_keep_alive = (version == Version::V5).then_some(cap);
    }
    Ok(ConnectPlan {
        client_id: client_id.into(),
        assigned: assigned && version == Version::V5,
        clean_start: connect.clean_start,
        expiry,
        expiry_announced,
        keep_alive,
        server_keep_alive,
        will,
        client_receive_max: connect.receive_max.map_or(u16::MAX, |n| n.get()),
        client_max_packet: connect.max_packet_size,
        client_alias_max: connect.topic_alias_max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect(id: &str, clean: bool) -> Connect {
        Connect { client_id: id.into(), clean_start: clean, keep_alive: 10, ..Default::default() }
    }

    #[test]
    fn client_id_rules_differ_by_level() {
        let cfg = MqttConfig::default();
        let refused = plan(&connect("", false), Version::V3, &cfg, || "x".into()).unwrap_err();
        assert!(matches!(refused, Refusal::Connack(ConnectAckReason::ClientIdentifierNotValid, _)));
        let p = plan(&connect("", true), Version::V3, &cfg, || "gen".into()).unwrap();
        assert_eq!((&*p.client_id, p.assigned), ("gen", false), "3.1.1 clients are not told");
        let p = plan(&connect("", false), Version::V5, &cfg, || "gen".into()).unwrap();
        assert_eq!((&*p.client_id, p.assigned), ("gen", true));
    }

    #[test]
    fn keep_alive_is_one_and_a_half_times_and_capped_silently_for_v3() {
        let cfg = MqttConfig { max_keep_alive_secs: 5, ..MqttConfig::default() };
        let p = plan(&connect("a", true), Version::V5, &cfg, String::new).unwrap();
        assert_eq!(
            (keep_alive_timeout(p.keep_alive), p.server_keep_alive),
            (Some(Duration::from_millis(7500)), Some(5))
        );
        let p = plan(&connect("a", true), Version::V3, &cfg, String::new).unwrap();
        assert_eq!((keep_alive_timeout(p.keep_alive), p.server_keep_alive), (Some(Duration::from_millis(7500)), None));
        let mut silent = connect("a", true);
        silent.keep_alive = 0;
        let p = plan(&silent, Version::V3, &cfg, String::new).unwrap();
        assert_eq!(keep_alive_timeout(p.keep_alive), Some(Duration::from_millis(7500)), "keep-alive 0 is bounded too");
        let p = plan(&silent, Version::V3, &MqttConfig { max_keep_alive_secs: 0, ..cfg }, String::new).unwrap();
        assert_eq!(keep_alive_timeout(p.keep_alive), None, "0 lets the client choose");
    }

    #[test]
    fn session_expiry_is_capped_and_announced() {
        let cfg = MqttConfig { max_session_expiry: Duration::from_secs(100), ..MqttConfig::default() };
        let mut c = connect("a", false);
        c.session_expiry_interval_secs = u32::MAX;
        let p = plan(&c, Version::V5, &cfg, String::new).unwrap();
        assert_eq!((p.expiry, p.expiry_announced), (Duration::from_secs(100), Some(100)));
        let p = plan(&connect("a", false), Version::V3, &cfg, String::new).unwrap();
        assert_eq!(p.expiry, cfg.v3_session_expiry);
    }
}
