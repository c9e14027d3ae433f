//! A persistent session's records in the store: its [`SessionRecord`] and every at-least-once
//! delivery routed to it until its client acknowledges it. The router writes a delivery while
//! routing it, so that the publisher's acknowledgement waits for it like for any other kept
//! message; the front end forgets it on the client's acknowledgement and rewrites the record
//! when the subscriptions change.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::record::{self, SessionRecord};
use super::{Change, Durable, Space, Store};
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

    /// Deletes the session and everything kept for it (it ended), and keeps nothing more.
    pub fn end(&self) {
        if self.ended.swap(true, Ordering::Relaxed) {
            return;
        }
        drop(self.store.commit(vec![
            Change::Delete { space: Space::Sessions, key: self.name.as_bytes().to_vec() },
            Change::DeletePrefix { space: Space::SessionMessages, prefix: record::seq_prefix(&self.name) },
        ]));
    }
}
