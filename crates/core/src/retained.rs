//! The retained-message store: the last retained message per topic, handed to new subscribers
//! (MQTT retain, WS-N GetCurrentMessage).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use foldhash::fast::RandomState;

use crate::message::Message;
use crate::topic;

/// What storing a retained message did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetainOutcome {
    /// Stored (new topic or replaced).
    Stored,
    /// An empty payload removed the topic's retained message (MQTT-3.3.1-10).
    Cleared,
    /// The store is at its topic limit and this was a new topic; not stored.
    Full,
}

/// Retained messages by topic, bounded in count.
pub(crate) struct RetainedStore {
    messages: RwLock<HashMap<String, Arc<Message>, RandomState>>,
    max_topics: usize,
}

impl RetainedStore {
    pub(crate) fn new(max_topics: usize) -> Self {
        RetainedStore { messages: RwLock::default(), max_topics }
    }

    /// Stores, replaces or (with an empty payload) clears the topic's retained message.
    pub(crate) fn store(&self, message: &Arc<Message>) -> RetainOutcome {
        let mut map = self.messages.write().unwrap_or_else(|e| e.into_inner());
        if message.payload.is_empty() {
            map.remove(&message.topic);
            return RetainOutcome::Cleared;
        }
        if let Some(slot) = map.get_mut(&message.topic) {
            *slot = message.clone();
            return RetainOutcome::Stored;
        }
        if map.len() >= self.max_topics {
            return RetainOutcome::Full;
        }
        map.insert(message.topic.clone(), message.clone());
        RetainOutcome::Stored
    }

    /// Retained messages whose topic matches `filter`, expired ones left out. An exact filter
    /// is one lookup; a wildcard filter scans the store.
    pub(crate) fn matching(&self, filter: &str) -> Vec<Arc<Message>> {
        let now = Instant::now();
        let map = self.messages.read().unwrap_or_else(|e| e.into_inner());
        let live = |m: &&Arc<Message>| !m.is_expired(now);
        if !topic::has_wildcard(filter) {
            return map.get(filter).filter(live).cloned().into_iter().collect();
        }
        map.iter().filter(|(t, _)| topic::matches(filter, t)).map(|(_, m)| m).filter(live).cloned().collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.messages.read().unwrap_or_else(|e| e.into_inner()).len()
    }
}
