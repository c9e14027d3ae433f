//! What a session receives: one message on its way to one subscriber, and, for a delivery
//! from a named queue, the handle that settles it. Kept apart from the outbox that carries
//! deliveries and the queue that settles them, so that neither imports the other back.

use std::sync::Arc;
use std::time::Instant;

use crate::message::{Message, QoS};

/// One message on its way to one subscriber.
#[derive(Debug)]
pub struct Delivery {
    /// The shared message.
    pub message: Arc<Message>,
    /// Effective guarantee: `min(publisher's, subscription's)`.
    pub qos: QoS,
    /// The retain flag to send: set for retained messages sent because of a new subscription,
    /// and for live messages only when the subscription asked for retain-as-published.
    pub retain: bool,
    /// The front end's tag for the subscription that matched (see [`crate::Subscription::tag`]).
    pub tag: u64,
    /// MQTT 5 subscription identifier of the matching subscription.
    pub subscription_id: Option<u32>,
    /// When it was put in the outbox; the start of the `queue` hop.
    pub enqueued_at: Instant,
    /// Present when the delivery came from a named queue: the session must ack or nack it.
    pub ack: Option<QueueAck>,
    /// Set when this message was delivered before and not acknowledged.
    pub redelivered: bool,
    /// Its arrival number in the store when a persistent session keeps it there until its
    /// client acknowledges it ([`crate::Session::settled`]); 0: not kept.
    pub stored: u64,
}

impl Delivery {
    /// A first delivery of `message` at `qos` that no subscription produced (a pull point's,
    /// a test's): no retain flag, tag, subscription id or queue acknowledgement. Set those with
    /// struct update syntax where they apply.
    pub fn new(message: Arc<Message>, qos: QoS, enqueued_at: Instant) -> Self {
        Delivery {
            message,
            qos,
            retain: false,
            tag: 0,
            subscription_id: None,
            enqueued_at,
            ack: None,
            redelivered: false,
            stored: 0,
        }
    }

    /// A retained message sent because of a new subscription allowing at most `max_qos`: the
    /// retain flag set, the guarantee the lower of the message's and the subscription's.
    pub fn retained(message: Arc<Message>, max_qos: QoS, enqueued_at: Instant) -> Self {
        let qos = message.qos.min(max_qos);
        Delivery { retain: true, ..Delivery::new(message, qos, enqueued_at) }
    }
}

/// How a queue delivery was settled.
pub(crate) enum Settle {
    /// Processed: forget it.
    Ack,
    /// Refused: put it back at the front, marked redelivered.
    Requeue,
    /// Refused: drop it.
    Discard,
}

/// Where a queue delivery is settled: the named queue that sent it.
pub(crate) trait Settler: Send + Sync {
    /// Settles delivery `id` (an owned handle: settling may dispatch more, which needs one).
    fn settle(self: Arc<Self>, id: u64, how: Settle);
    /// The queue's name, for logs.
    fn name(&self) -> &str;
}

/// The handle a session uses to settle one queue delivery.
#[derive(Clone)]
pub struct QueueAck {
    queue: Arc<dyn Settler>,
    id: u64,
}

impl std::fmt::Debug for QueueAck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "QueueAck({}#{})", self.queue.name(), self.id)
    }
}

impl QueueAck {
    /// The handle for delivery `id` of `queue`.
    pub(crate) fn new(queue: Arc<dyn Settler>, id: u64) -> Self {
        QueueAck { queue, id }
    }

    /// The message was processed: forget it.
    pub fn ack(&self) {
        self.queue.clone().settle(self.id, Settle::Ack);
    }

    /// The message was refused: put it back (marked redelivered) or discard it.
    pub fn nack(&self, requeue: bool) {
        self.queue.clone().settle(self.id, if requeue { Settle::Requeue } else { Settle::Discard });
    }
}
