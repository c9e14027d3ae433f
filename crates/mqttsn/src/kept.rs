//! Persistent MQTT-SN sessions (clean session off) in the store (`[storage]`): the session's
//! record (its subscriptions, with the topic form each delivers in, and its offline deadline)
//! is written when it connects, subscribes, unsubscribes and goes offline; the core writes
//! every QoS 1/2 delivery to it as it is routed and deletes it when the client acknowledges
//! it. At start, [`load`] reads them back for the endpoint, which parks them offline as if
//! their clients had just gone (see `Endpoint::restore`). Registered topic ids are kept apart
//! (`persist.rs`), as before.
//!
//! Not kept: the will, and which topic ids each client has learnt (they are registered with
//! it again before use).

use std::collections::HashMap;
use std::time::Duration;

use tolk_core::store::record::{self, SessionRecord, SubscriptionRecord};
use tolk_core::store::{Change, Space, StoreError};
use tolk_core::{Delivery, Protocol, QoS, Router, Session};

/// A kept session as read back.
pub(crate) struct KeptSession {
    pub client_id: String,
    /// `(filter, tag, QoS)`.
    pub subscriptions: Vec<(String, u64, QoS)>,
    /// How much of its offline life is left.
    pub expires_in: Duration,
    /// Its deliveries not yet acknowledged, in arrival order.
    pub deliveries: Vec<Delivery>,
    /// The arrival number its next delivery gets.
    pub next_seq: u64,
}

fn name(client_id: &str) -> String {
    record::session_key(Protocol::MqttSn, client_id)
}

/// Writes a persistent session's record (`offline_for`: how long it lives on, once offline).
pub(crate) fn save(
    core: &Session,
    client_id: &str,
    subscriptions: &HashMap<(String, u64), QoS, impl std::hash::BuildHasher>,
    expiry: Duration,
    offline_for: Option<Duration>,
) {
    let Some(keeper) = core.keep_in_store(name(client_id), 1) else { return };
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

/// Every MQTT-SN session the store kept (expired ones are deleted, not returned).
pub(crate) fn load(router: &Router) -> Result<Vec<KeptSession>, StoreError> {
    let Some(store) = router.store() else { return Ok(Vec::new()) };
    let prefix = name("");
    let mut deliveries: HashMap<String, Vec<(u64, Vec<u8>)>> = HashMap::new();
    for (key, value) in store.load(Space::SessionMessages)? {
        if let Some((owner, seq)) = record::split_seq_key(&key).filter(|(owner, _)| owner.starts_with(&prefix)) {
            deliveries.entry(owner.to_owned()).or_default().push((seq, value));
        }
    }
    let mut sessions = Vec::new();
    for (key, value) in store.load(Space::Sessions)? {
        let Ok(kept_name) = String::from_utf8(key) else { continue };
        let Some(client_id) = kept_name.strip_prefix(&prefix) else { continue };
        let mut messages = deliveries.remove(&kept_name).unwrap_or_default();
        let kept = match record::decode_record::<SessionRecord>(&value) {
            Ok(kept) => kept,
            Err(e) => {
                tracing::warn!(client_id, error = %e, "a stored MQTT-SN session was not restored");
                continue;
            }
        };
        let expires_in = kept.expires_at_ms.map_or(Duration::from_millis(kept.expiry_ms), record::until_ms);
        if expires_in.is_zero() {
            forget(router, &kept_name);
            continue;
        }
        messages.sort_unstable_by_key(|(seq, _)| *seq);
        let next_seq = messages.last().map_or(1, |(seq, _)| seq + 1);
        let deliveries = messages
            .into_iter()
            .filter_map(|(seq, value)| record::decode_delivery(&value, seq).ok().flatten())
            .collect();
        let subscriptions = kept
            .subscriptions
            .into_iter()
            .filter_map(|s| Some((s.filter, s.tag, QoS::from_level(s.max_qos)?)))
            .collect();
        sessions.push(KeptSession { client_id: client_id.to_owned(), subscriptions, expires_in, deliveries, next_seq });
    }
    // Deliveries of sessions that ended just before a crash.
    for owner in deliveries.into_keys() {
        forget(router, &owner);
    }
    Ok(sessions)
}

fn forget(router: &Router, kept_name: &str) {
    if let Some(store) = router.store() {
        drop(store.commit(vec![
            Change::Delete { space: Space::Sessions, key: kept_name.as_bytes().to_vec() },
            Change::DeletePrefix { space: Space::SessionMessages, prefix: record::seq_prefix(kept_name) },
        ]));
    }
}
