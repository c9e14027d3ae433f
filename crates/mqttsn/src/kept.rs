//! Persistent MQTT-SN sessions (clean session off) in the store (`[storage]`): the session's
//! record (its subscriptions, with the topic form each delivers in, and its offline deadline)
//! is written when it connects, subscribes, unsubscribes and goes offline; the core writes
//! every QoS 1/2 delivery to it as it is routed and deletes it when the client acknowledges
//! it. At start the endpoint reads them back with the core's `load_sessions` and parks them
//! offline as if their clients had just gone (`Endpoint::restore`, `ClientSession::restored`).
//! Registered topic ids are kept apart (`persist.rs`), as before.
//!
//! The will is kept with the record while its client is connected. A restart that finds a
//! session whose client was connected publishes its will (the crash ended the connection
//! without a DISCONNECT); MQTT-SN has no will delay.
//!
//! Not kept: which topic ids each client has learnt (they are registered with it again before
//! use).

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use mqttsn_codec::{QoS as WireQoS, WillTopic};
use serde::{Deserialize, Serialize};
use tolk_core::store::Durable;
use tolk_core::store::record::{self, SessionRecord, SubscriptionRecord};
use tolk_core::{Protocol, QoS, Session};

/// A will as kept: WILLTOPIC's fields (the QoS as its two flag bits) and WILLMSG.
#[derive(Serialize, Deserialize)]
struct KeptWill {
    topic: String,
    qos: u8,
    retain: bool,
    payload: Vec<u8>,
}

/// A will's record, for [`save`].
pub(crate) fn encode_will(topic: &WillTopic, payload: &[u8]) -> Vec<u8> {
    let will =
        KeptWill { topic: topic.topic.clone(), qos: topic.qos.bits(), retain: topic.retain, payload: payload.to_vec() };
    record::encode_record(&will)
}

/// A kept will read back; `None` (with a log line) when it cannot be read.
pub(crate) fn decode_will(client_id: &str, bytes: &[u8]) -> Option<(WillTopic, Bytes)> {
    let will: KeptWill = match record::decode_record(bytes) {
        Ok(will) => will,
        Err(e) => {
            tracing::warn!(client_id, error = %e, "a stored will was not restored");
            return None;
        }
    };
    let topic = WillTopic { qos: WireQoS::from_bits(will.qos), retain: will.retain, topic: will.topic };
    Some((topic, Bytes::from(will.payload)))
}

/// Writes a persistent session's record (`offline_for`: how long it lives on, once offline;
/// `will`: from [`encode_will`], while its client is connected). Returns the commit, which
/// the CONNACK waits for.
pub(crate) fn save(
    core: &Session,
    client_id: &str,
    subscriptions: &HashMap<(String, u64), QoS, impl std::hash::BuildHasher>,
    expiry: Duration,
    offline_for: Option<Duration>,
    will: Option<Vec<u8>>,
) -> Option<Durable> {
    let keeper = core.keep_in_store(record::session_key(Protocol::MqttSn, client_id), 1)?;
    Some(
        keeper.save(&SessionRecord {
            expiry_ms: u64::try_from(expiry.as_millis()).unwrap_or(u64::MAX),
            expires_at_ms: offline_for.map(record::deadline_ms),
            owner: None,
            subscriptions: subscriptions
                .iter()
                .map(|((filter, tag), qos)| SubscriptionRecord {
                    filter: filter.clone(),
                    max_qos: *qos as u8,
                    no_local: false,
                    retain_as_published: false,
                    retain_handling: 0,
                    subscription_id: None,
                    tag: *tag,
                })
                .collect(),
            will,
        }),
    )
}
