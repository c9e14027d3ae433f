//! The broker's memory budget: one limit in bytes for everything that holds messages (outboxes,
//! offline sessions, named queues, retained messages, pull points), so that no client, and no
//! mix of clients, can push a 1 GB gateway into the OOM killer.
//!
//! Bytes are counted per holder: a message waiting for three subscribers counts three times.
//! That over-counts what fan-out really uses (the payload is shared), which is the safe side,
//! and it is the convention users know (Mosquitto's `max_queued_bytes` and RabbitMQ's
//! `max-length-bytes` count per client and per queue). The counts are the gauges in
//! [`tolk_metrics::MemoryGauges`], so `/metrics` shows exactly what the policy sees.
//!
//! The policy, applied by the holders: at-most-once messages are taken only while the budget
//! has room ([`MemoryBudget::try_charge`]); at-least-once messages are refused before routing
//! when the budget has no room for one more copy ([`MemoryBudget::has_room`]), and once
//! accepted are charged unconditionally ([`MemoryBudget::charge`]), so one message never
//! half-routes. Each holder releases what it charged when the message leaves it.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use tolk_metrics::{MemoryKind, Metrics};

use crate::message::Message;

/// What one held message costs beyond its payload, topic and properties: the `Message` and the
/// `Delivery` (or queue entry) around it, and the allocator's rounding. Measured sizes on
/// x86_64 are 232 and 104 bytes; a round figure keeps the arithmetic honest on 32-bit ARM too.
pub const MESSAGE_OVERHEAD: usize = 384;

/// The bytes a held copy of `message` is charged.
pub fn message_cost(message: &Message) -> usize {
    let props = &message.props;
    let props_len = props.content_type.as_ref().map_or(0, String::len)
        + props.correlation_data.as_ref().map_or(0, |c| c.len())
        + props.message_id.as_ref().map_or(0, String::len)
        + props.user.iter().map(|(k, v)| k.len() + v.len() + 48).sum::<usize>();
    MESSAGE_OVERHEAD + message.payload.len() + message.topic.len() + props_len
}

/// The broker-wide budget; one per router, shared by every holder.
pub struct MemoryBudget {
    limit: usize,
    metrics: Arc<Metrics>,
}

impl MemoryBudget {
    /// A budget of `limit` bytes, counted into `metrics`' memory gauges.
    pub fn new(limit: usize, metrics: Arc<Metrics>) -> Self {
        metrics.memory().limit.store(limit, Relaxed);
        MemoryBudget { limit, metrics }
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes held by every kind together.
    pub fn used(&self) -> usize {
        self.metrics.memory().total()
    }

    /// Whether `bytes` more fit: at-least-once publishers whose message does not are refused
    /// until something is released.
    pub fn has_room(&self, bytes: usize) -> bool {
        self.used() + bytes <= self.limit
    }

    /// Charges `bytes` to `kind` if the budget has room for them; `false` (and nothing
    /// charged) otherwise. Concurrent charges may overshoot the limit by what they add at the
    /// same instant, which is bounded by the number of worker threads times a message.
    pub fn try_charge(&self, kind: MemoryKind, bytes: usize) -> bool {
        if !self.has_room(bytes) {
            return false;
        }
        self.charge(kind, bytes);
        true
    }

    /// Charges `bytes` to `kind` whatever the budget says: for at-least-once messages already
    /// accepted, and for deliveries whose number is bounded elsewhere (consumer credit).
    #[inline]
    pub fn charge(&self, kind: MemoryKind, bytes: usize) {
        self.metrics.memory().add(kind, bytes);
    }

    /// Gives back `bytes` that `kind` charged earlier.
    #[inline]
    pub fn release(&self, kind: MemoryKind, bytes: usize) {
        if bytes > 0 {
            self.metrics.memory().sub(kind, bytes);
        }
    }

    /// The metrics the budget counts into (holders count their drops there too).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Origin, SessionId};
    use tolk_metrics::Protocol;

    #[test]
    fn try_charge_refuses_past_the_limit_and_release_gives_room_back() {
        let metrics = Arc::new(Metrics::new());
        let budget = MemoryBudget::new(1000, metrics.clone());
        assert!(budget.try_charge(MemoryKind::Outbox, 600));
        assert!(!budget.try_charge(MemoryKind::Retained, 500), "600 + 500 is over 1000");
        assert!(budget.has_room(400));
        budget.charge(MemoryKind::Queue, 500);
        assert!(!budget.has_room(0), "an accepted at-least-once message may overshoot");
        budget.release(MemoryKind::Queue, 500);
        budget.release(MemoryKind::Outbox, 600);
        assert!(budget.try_charge(MemoryKind::Retained, 1000));
        assert_eq!(metrics.memory().held(MemoryKind::Retained), 1000);
        assert_eq!(metrics.memory().limit.load(Relaxed), 1000);
    }

    #[test]
    fn cost_counts_payload_topic_and_properties() {
        let origin = Origin { protocol: Protocol::Mqtt, session: SessionId(1), client_id: "c".into() };
        let mut message = Message::new("a/b", vec![0u8; 1000], origin);
        assert_eq!(message_cost(&message), MESSAGE_OVERHEAD + 1003);
        message.props.user.push(("k".into(), "v".into()));
        assert_eq!(message_cost(&message), MESSAGE_OVERHEAD + 1003 + 50);
    }
}
