//! Message ids and the messages a connection holds unacknowledged (spec "ACK" / "NACK").
//!
//! Every MESSAGE gets the next number of the connection as its `message-id` (and, under 1.2,
//! as its `ack` id). Messages of `client` / `client-individual` subscriptions are remembered
//! here, in id order, until ACK or NACK settles them, the subscription ends, or the connection
//! closes (then the core's session clean-up puts queue messages back for redelivery).
//!
//! Settling: queue messages are acked or nacked-with-requeue in their core queue; topic
//! messages are simply forgotten, whether ACKed or NACKed, because a topic has nowhere to
//! redeliver to.

use std::collections::BTreeMap;

use tolk_core::QueueAck;

use crate::error::StompError;

/// One unacknowledged MESSAGE.
#[derive(Debug)]
struct Pending {
    /// Core tag of its subscription.
    tag: u64,
    /// The queue's settle handle; `None` for topic messages.
    queue: Option<QueueAck>,
}

/// ACK or NACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Processed: forget it.
    Ack,
    /// Refused: a queue message goes back to its queue, marked redelivered.
    Nack,
    /// Refused for good (NACK with RabbitMQ's `requeue:false`): a queue message is discarded.
    Discard,
}

/// Issued message ids and the unacknowledged ones among them.
#[derive(Debug, Default)]
pub(crate) struct Unacked {
    pending: BTreeMap<u64, Pending>,
    last_id: u64,
}

impl Unacked {
    /// The id for the next MESSAGE.
    pub fn next_id(&mut self) -> u64 {
        self.last_id += 1;
        self.last_id
    }

    /// Remembers that MESSAGE `id` of subscription `tag` awaits an ACK.
    pub fn track(&mut self, id: u64, tag: u64, queue: Option<QueueAck>) {
        self.pending.insert(id, Pending { tag, queue });
    }

    /// Number of messages awaiting an ACK.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Reads the id an ACK/NACK names. An id this connection never issued is a protocol
    /// error; an issued id that is already settled is accepted (and later ignored), because a
    /// cumulative ACK may have settled it already.
    pub fn parse_issued(&self, text: &str) -> Result<u64, StompError> {
        match text.parse::<u64>() {
            Ok(id) if id >= 1 && id <= self.last_id => Ok(id),
            _ => Err(StompError::protocol(format!(
                "no message with id '{}' was delivered on this connection",
                text.chars().take(64).collect::<String>()
            ))),
        }
    }

    /// The subscription tag of a pending message.
    pub fn tag_of(&self, id: u64) -> Option<u64> {
        self.pending.get(&id).map(|p| p.tag)
    }

    /// Settles message `id`, and with `cumulative` every earlier pending message of the same
    /// subscription too. Returns how many messages were settled (0 if `id` was not pending).
    pub fn settle(&mut self, id: u64, cumulative: bool, verdict: Verdict) -> usize {
        let Some(tag) = self.tag_of(id) else { return 0 };
        let ids: Vec<u64> = if cumulative {
            self.pending.range(..=id).filter(|(_, p)| p.tag == tag).map(|(id, _)| *id).collect()
        } else {
            vec![id]
        };
        // Newest first: a requeue puts each message at the front of its queue, so this keeps
        // the original order among the requeued ones.
        for id in ids.iter().rev() {
            if let Some(Pending { queue: Some(ack), .. }) = self.pending.remove(id) {
                match verdict {
                    Verdict::Ack => ack.ack(),
                    Verdict::Nack => ack.nack(true),
                    Verdict::Discard => ack.nack(false),
                }
            }
        }
        ids.len()
    }

    /// Forgets everything pending for a subscription that ended. Its queue messages are not
    /// settled here: cancelling the consumer in the core already put them back.
    pub fn forget_subscription(&mut self, tag: u64) {
        self.pending.retain(|_, p| p.tag != tag);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(entries: &[(u64, u64)]) -> Unacked {
        let mut u = Unacked::default();
        for &(id, tag) in entries {
            while u.last_id < id {
                u.next_id();
            }
            u.track(id, tag, None);
        }
        u
    }

    #[test]
    fn cumulative_settles_earlier_messages_of_the_same_subscription_only() {
        let mut u = with(&[(1, 10), (2, 20), (3, 10), (4, 10)]);
        assert_eq!(u.settle(3, true, Verdict::Ack), 2);
        assert_eq!(u.len(), 2, "2 (other subscription) and 4 (later) remain");
        assert_eq!(u.tag_of(2), Some(20));
        assert_eq!(u.tag_of(4), Some(10));
    }

    #[test]
    fn individual_settles_one() {
        let mut u = with(&[(1, 10), (2, 10)]);
        assert_eq!(u.settle(2, false, Verdict::Nack), 1);
        assert_eq!(u.tag_of(1), Some(10));
        assert_eq!(u.settle(2, false, Verdict::Ack), 0, "already settled");
    }

    #[test]
    fn only_issued_ids_parse() {
        let u = with(&[(1, 10), (2, 10)]);
        assert_eq!(u.parse_issued("2").unwrap(), 2);
        assert!(u.parse_issued("3").is_err());
        assert!(u.parse_issued("0").is_err());
        assert!(u.parse_issued("x").is_err());
    }

    #[test]
    fn ended_subscription_is_forgotten() {
        let mut u = with(&[(1, 10), (2, 20)]);
        u.forget_subscription(10);
        assert_eq!(u.len(), 1);
    }
}
