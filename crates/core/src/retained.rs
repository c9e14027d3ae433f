//! The retained-message store: the last retained message per topic, handed to new subscribers
//! (MQTT retain, WS-N GetCurrentMessage).
//!
//! Kept in a topic trie, so that a wildcard subscription walks only the branches its filter
//! reaches (`sensors/+/temp` does not visit `logs/…`) and never scans the whole store under
//! its lock. Bounded by topic count, by bytes, and by the broker's memory budget.

use std::sync::{Arc, RwLock};
use std::time::Instant;

use tolk_metrics::MemoryKind;

use crate::budget::{MemoryBudget, message_cost};
use crate::message::Message;
use crate::trie::Trie;

/// What storing a retained message did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetainOutcome {
    /// Stored (new topic or replaced).
    Stored,
    /// An empty payload removed the topic's retained message (MQTT-3.3.1-10).
    Cleared,
    /// The store is at its topic or byte limit, or the memory budget is used up; not stored.
    Full,
}

/// How much the store may hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetainedLimits {
    pub(crate) max_topics: usize,
    pub(crate) max_bytes: usize,
}

struct Store {
    messages: Trie<Arc<Message>>,
    bytes: usize,
}

/// Retained messages by topic.
pub(crate) struct RetainedStore {
    store: RwLock<Store>,
    limits: RetainedLimits,
    budget: Arc<MemoryBudget>,
}

impl RetainedStore {
    pub(crate) fn new(limits: RetainedLimits, budget: Arc<MemoryBudget>) -> Self {
        RetainedStore { store: RwLock::new(Store { messages: Trie::default(), bytes: 0 }), limits, budget }
    }

    /// Stores, replaces or (with an empty payload) clears the topic's retained message.
    pub(crate) fn store(&self, message: &Arc<Message>) -> RetainOutcome {
        let mut store = self.store.write().unwrap_or_else(|e| e.into_inner());
        // A replacement is judged on the difference, and one that does not fit leaves the old
        // message in place: the topic keeps its last value that could be kept.
        let mut old_cost = None;
        store.messages.for_each_matched_by(&message.topic, |old| old_cost = Some(message_cost(old)));
        if message.payload.is_empty() {
            if let Some(old_cost) = old_cost {
                store.messages.remove(&message.topic, |_| true);
                store.bytes -= old_cost;
                self.budget.release(MemoryKind::Retained, old_cost);
            }
            return RetainOutcome::Cleared;
        }
        let cost = message_cost(message);
        let old = old_cost.unwrap_or(0);
        let topics = store.messages.len() + usize::from(old_cost.is_none());
        if topics > self.limits.max_topics || store.bytes - old + cost > self.limits.max_bytes {
            return RetainOutcome::Full;
        }
        if cost > old {
            if !self.budget.try_charge(MemoryKind::Retained, cost - old) {
                return RetainOutcome::Full;
            }
        } else {
            self.budget.release(MemoryKind::Retained, old - cost);
        }
        store.bytes = store.bytes - old + cost;
        store.messages.upsert(&message.topic, message.clone(), |_| true);
        RetainOutcome::Stored
    }

    /// Retained messages whose topic matches `filter`, expired ones left out. The walk visits
    /// only what the filter can reach: one path for an exact filter.
    pub(crate) fn matching(&self, filter: &str) -> Vec<Arc<Message>> {
        let now = Instant::now();
        let store = self.store.read().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        store.messages.for_each_matched_by(filter, |m| {
            if !m.is_expired(now) {
                out.push(m.clone());
            }
        });
        out
    }

    pub(crate) fn len(&self) -> usize {
        self.store.read().unwrap_or_else(|e| e.into_inner()).messages.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Origin, SessionId};
    use tolk_metrics::{Metrics, Protocol};

    fn message(topic: &str, payload: &'static [u8]) -> Arc<Message> {
        let origin = Origin { protocol: Protocol::Mqtt, session: SessionId(1), client_id: "c".into() };
        Arc::new(Message::new(topic, payload, origin))
    }

    #[test]
    fn bytes_are_bounded_and_replacing_is_judged_on_the_difference() {
        let metrics = Arc::new(Metrics::new());
        let one = message_cost(&message("a/1", b"xxxx"));
        let limits = RetainedLimits { max_topics: 100, max_bytes: 2 * one };
        let store = RetainedStore::new(limits, Arc::new(MemoryBudget::new(1 << 30, metrics.clone())));
        assert_eq!(store.store(&message("a/1", b"xxxx")), RetainOutcome::Stored);
        assert_eq!(store.store(&message("a/2", b"yyyy")), RetainOutcome::Stored);
        assert_eq!(store.store(&message("a/3", b"zzzz")), RetainOutcome::Full, "over max_bytes");
        assert_eq!(store.store(&message("a/2", b"wwww")), RetainOutcome::Stored, "a replacement fits");
        assert_eq!(metrics.memory().held(MemoryKind::Retained), 2 * one);
        assert_eq!(store.matching("a/+").len(), 2);
        assert_eq!(store.matching("#").len(), 2);
        assert_eq!(store.store(&message("a/2", b"a bigger one")), RetainOutcome::Full, "over max_bytes");
        assert_eq!(&store.matching("a/2")[0].payload[..], b"wwww", "the old value stays");
        assert_eq!(metrics.memory().held(MemoryKind::Retained), 2 * one);
        assert_eq!(store.store(&message("a/1", b"")), RetainOutcome::Cleared);
        assert_eq!(metrics.memory().held(MemoryKind::Retained), one);
        assert_eq!(store.matching("a/1").len(), 0);
    }
}
