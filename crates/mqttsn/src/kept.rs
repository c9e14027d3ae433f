//! Persistent MQTT-SN sessions (clean session off) in the store (`[storage]`): the session's
//! record (its subscriptions, with the topic form each delivers in, and its offline deadline)
//! is written when it connects, subscribes, unsubscribes and goes offline; the core writes
//! every QoS 1/2 delivery to it as it is routed and deletes it when the client acknowledges
//! it. At start the endpoint reads them back with the core's `load_sessions` and parks them
//! offline as if their clients had just gone (`Endpoint::restore`, `ClientSession::restored`).
//! Registered topic ids are kept apart (`persist.rs`), as before.
//!
//! Not kept: the will, and which topic ids each client has learnt (they are registered with
//! it again before use).

use std::collections::HashMap;
use std::time::Duration;

use tolk_core::store::record::{self, SessionRecord, SubscriptionRecord};
use tolk_core::{Protocol, QoS, Session};

/// Writes a persistent session's record (`offline_for`: how long it lives on, once offline).
pub(crate) fn save(
    core: &Session,
    client_id: &str,
    subscriptions: &HashMap<(String, u64), QoS, impl std::hash::BuildHasher>,
    expiry: Duration,
    offline_for: Option<Duration>,
) {
    let Some(keeper) = core.keep_in_store(record::session_key(Protocol::MqttSn, client_id), 1) else { return };
    drop(
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
            will: None,
        }),
    );
}
