//! A persistent session's records in the store: its [`SessionRecord`] and every at-least-once
//! delivery routed to it until its client acknowledges it. The router writes a delivery while
//! routing it, so that the publisher's acknowledgement waits for it like for any other kept
//! message; the front end forgets it on the client's acknowledgement and rewrites the record
//! when the subscriptions change.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tolk_metrics::Protocol;

use super::record::{self, SessionRecord};
use super::{Change, Durable, Space, Store, StoreError};
use crate::delivery::Delivery;

/// Keeps one persistent session in the store. Shared by the session's outbox (the router
/// writes deliveries through it) and its front end.
pub struct SessionKeeper {
    store: Arc<dyn Store>,
    /// [`record::session_key`].
    name: String,
    next_seq: AtomicU64,
    /// The session ended: nothing more is kept for it.
    ended: AtomicBool,
}

impl SessionKeeper {
    /// Keeps the session `name` ([`record::session_key`]) in `store`; `next_seq` follows the
    /// deliveries already kept (1 for a new session).
    pub fn new(store: Arc<dyn Store>, name: String, next_seq: u64) -> Self {
        SessionKeeper { store, name, next_seq: AtomicU64::new(next_seq.max(1)), ended: AtomicBool::new(false) }
    }

    /// Writes `delivery` and returns its arrival number and the commit; nothing once the
    /// session ended.
    pub(crate) fn keep(&self, delivery: &Delivery) -> Option<(u64, Durable)> {
        if self.ended.load(Ordering::Relaxed) {
            return None;
        }
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let key = record::seq_key(&self.name, seq);
        let change = Change::Put { space: Space::SessionMessages, key, value: record::encode_delivery(delivery) };
        Some((seq, self.store.commit(vec![change])))
    }

    /// Marks a kept QoS 2 delivery released: its client has it (PUBREC), so after a restart
    /// only the release (PUBREL) is sent again, never the message (MQTT-4.3.3). The commit
    /// says when the mark is on disk; the release waits for it.
    pub fn release(&self, seq: u64) -> Durable {
        if seq == 0 || self.ended.load(Ordering::Relaxed) {
            return Durable::ready(Ok(()));
        }
        let key = record::seq_key(&self.name, seq);
        self.store.commit(vec![Change::Put { space: Space::SessionMessages, key, value: record::RELEASED.to_vec() }])
    }

    /// Deletes a kept delivery (acknowledged, or not queued after all). Not waited for: a
    /// delete lost in a crash only sends the message again, which at-least-once allows.
    pub fn forget(&self, seq: u64) {
        if seq != 0 {
            let key = record::seq_key(&self.name, seq);
            drop(self.store.commit(vec![Change::Delete { space: Space::SessionMessages, key }]));
        }
    }

    /// Writes the session's record (at connect, when its subscriptions or expiry change); the
    /// commit says when it is on disk (a CONNACK waits for it).
    pub fn save(&self, session: &SessionRecord) -> Durable {
        if self.ended.load(Ordering::Relaxed) {
            return Durable::ready(Ok(()));
        }
        let change = Change::Put {
            space: Space::Sessions,
            key: self.name.as_bytes().to_vec(),
            value: record::encode_record(session),
        };
        self.store.commit(vec![change])
    }

    /// Whether the session ended ([`SessionKeeper::end`]): until then it outlives the process.
    pub fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Relaxed)
    }

    /// Deletes the session and everything kept for it (it ended), and keeps nothing more.
    pub fn end(&self) {
        if !self.ended.swap(true, Ordering::Relaxed) {
            forget_session(&*self.store, &self.name);
        }
    }
}

/// Deletes a session's record and its deliveries.
fn forget_session(store: &dyn Store, name: &str) {
    drop(store.commit(vec![
        Change::Delete { space: Space::Sessions, key: name.as_bytes().to_vec() },
        Change::DeletePrefix { space: Space::SessionMessages, prefix: record::seq_prefix(name) },
    ]));
}

/// A persistent session as the store kept it, read back at start.
pub struct KeptSession {
    /// Its client id.
    pub client_id: String,
    /// Its record: subscriptions, expiry, owner, will.
    pub record: SessionRecord,
    /// How much of its offline life is left (it counts from now for one that was connected).
    pub expires_in: Duration,
    /// What it had not acknowledged, in arrival order (expired ones dropped), marked
    /// redelivered.
    pub deliveries: Vec<Delivery>,
    /// The arrival numbers of QoS 2 deliveries its client had received but not completed
    /// ([`SessionKeeper::release`]).
    pub released: Vec<u64>,
    /// The arrival number its next delivery gets ([`crate::Session::keep_in_store`]).
    pub next_seq: u64,
}

impl KeptSession {
    /// The name it is kept under ([`record::session_key`]).
    pub fn name(&self, protocol: Protocol) -> String {
        record::session_key(protocol, &self.client_id)
    }
}

/// Every session of `protocol` the store kept (at start, before its front end serves anyone).
/// Expired sessions, and deliveries left behind by sessions that ended just before a crash,
/// are deleted rather than returned; records that cannot be read are skipped with a log line.
pub fn load_sessions(store: &dyn Store, protocol: Protocol) -> Result<Vec<KeptSession>, StoreError> {
    let prefix = record::session_key(protocol, "");
    let mut deliveries: HashMap<String, Vec<(u64, Vec<u8>)>> = HashMap::new();
    for (key, value) in store.load(Space::SessionMessages)? {
        if let Some((owner, seq)) = record::split_seq_key(&key).filter(|(owner, _)| owner.starts_with(&prefix)) {
            deliveries.entry(owner.to_owned()).or_default().push((seq, value));
        }
    }
    let mut sessions = Vec::new();
    for (key, value) in store.load(Space::Sessions)? {
        let Ok(name) = String::from_utf8(key) else { continue };
        let Some(client_id) = name.strip_prefix(&prefix) else { continue };
        let mut messages = deliveries.remove(&name).unwrap_or_default();
        let record = match record::decode_record::<SessionRecord>(&value) {
            Ok(record) => record,
            Err(e) => {
                tracing::warn!(%protocol, client_id, error = %e, "a stored session was not restored");
                continue;
            }
        };
        let expires_in = record.expires_at_ms.map_or(Duration::from_millis(record.expiry_ms), record::until_ms);
        if expires_in.is_zero() {
            forget_session(store, &name);
            continue;
        }
        messages.sort_unstable_by_key(|(seq, _)| *seq);
        let next_seq = messages.last().map_or(1, |(seq, _)| seq + 1);
        let mut expired = Vec::new();
        let released = messages.iter().filter(|(_, value)| value == record::RELEASED).map(|(seq, _)| *seq).collect();
        let deliveries = messages
            .into_iter()
            .filter(|(_, value)| value != record::RELEASED)
            .filter_map(|(seq, value)| match record::decode_delivery(&value, seq) {
                Ok(Some(delivery)) => Some(delivery),
                Ok(None) => {
                    expired.push(Change::Delete { space: Space::SessionMessages, key: record::seq_key(&name, seq) });
                    None
                }
                Err(e) => {
                    tracing::warn!(%protocol, client_id, seq, error = %e, "a stored delivery was not restored");
                    None
                }
            })
            .collect();
        if !expired.is_empty() {
            drop(store.commit(expired));
        }
        sessions.push(KeptSession {
            client_id: client_id.to_owned(),
            record,
            expires_in,
            deliveries,
            released,
            next_seq,
        });
    }
    for owner in deliveries.into_keys() {
        forget_session(store, &owner);
    }
    Ok(sessions)
}
