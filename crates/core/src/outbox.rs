//! A session's bounded delivery queue: the router pushes, the session's task drains in batches.
//!
//! A `std::sync::Mutex` around a `VecDeque` rather than a channel because the overflow policy
//! depends on the delivery's QoS and on whether a connection is attached, and because the
//! session drains everything queued in one lock (then writes and flushes once, as nats-server
//! does). The lock is never held across an await; pushes and drains are a few instructions.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::Notify;
use tolk_metrics::Protocol;

use crate::message::{Message, QoS, SessionId};
use crate::queue::QueueAck;

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
        }
    }

    /// A retained message sent because of a new subscription allowing at most `max_qos`: the
    /// retain flag set, the guarantee the lower of the message's and the subscription's.
    pub fn retained(message: Arc<Message>, max_qos: QoS, enqueued_at: Instant) -> Self {
        let qos = message.qos.min(max_qos);
        Delivery { retain: true, ..Delivery::new(message, qos, enqueued_at) }
    }
}

/// What happened to a push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushOutcome {
    /// Queued for the session.
    Queued,
    /// Not queued: at-most-once and the outbox was full (or the session is offline).
    Dropped,
    /// Queued, but over capacity: at-least-once to a connected session whose outbox is full.
    /// The publisher should wait for room (see `Session::relieve_congestion`) before it sends
    /// more, so that a fast publisher is slowed down rather than a slow subscriber dropped.
    Congested,
    /// Not queued: at-least-once to a connected session whose outbox was full twice over (the
    /// publisher did not wait, or waited past its grace). The session is now marked as a slow
    /// consumer and its task will close the connection.
    Overflowed,
    /// The session is gone; the subscription is stale.
    Closed,
}

/// Returned by the receiver once the outbox overflowed: close the connection as a slow consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("outbox overflowed with at-least-once messages: slow consumer")]
pub struct Overflowed;

struct State {
    queue: VecDeque<Delivery>,
    /// Whether a connection is attached. Detached (offline persistent) sessions queue only
    /// at-least-once messages and drop the newest when full instead of overflowing.
    attached: bool,
    overflowed: bool,
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the receiver: something was queued, or the outbox overflowed.
    notify: Notify,
    /// Wakes congested publishers: the receiver drained the outbox below capacity.
    room: Notify,
    capacity: usize,
    session: SessionId,
    protocol: Protocol,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the deque inconsistent, so poisoning
        // carries no information here.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The sending side, held by the router's subscriptions and by queues. Cheap to clone.
#[derive(Clone)]
pub struct Outbox(Arc<Shared>);

/// The receiving side, owned by the session. Dropping it closes the outbox.
pub struct OutboxReceiver(Arc<Shared>);

/// Creates an outbox holding at most `capacity` deliveries (queue deliveries, which are bounded
/// by consumer credit instead, do not count against it).
pub fn outbox(session: SessionId, protocol: Protocol, capacity: usize) -> (Outbox, OutboxReceiver) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State { queue: VecDeque::new(), attached: true, overflowed: false, closed: false }),
        notify: Notify::new(),
        room: Notify::new(),
        capacity: capacity.max(1),
        session,
        protocol,
    });
    (Outbox(shared.clone()), OutboxReceiver(shared))
}

impl Outbox {
    /// The session this outbox belongs to.
    pub fn session(&self) -> SessionId {
        self.0.session
    }

    /// The subscriber's protocol, for metrics labels.
    pub fn protocol(&self) -> Protocol {
        self.0.protocol
    }

    /// Queues a delivery subject to capacity and QoS policy.
    pub fn push(&self, delivery: Delivery) -> PushOutcome {
        self.push_inner(delivery, false)
    }

    /// Queues a delivery whatever the capacity: used by named queues, whose in-flight count per
    /// consumer is already bounded by the consumer's credit.
    pub(crate) fn push_credited(&self, delivery: Delivery) -> PushOutcome {
        self.push_inner(delivery, true)
    }

    fn push_inner(&self, delivery: Delivery, credited: bool) -> PushOutcome {
        let mut state = self.0.lock();
        if state.closed {
            return PushOutcome::Closed;
        }
        let at_most_once = delivery.qos == QoS::AtMostOnce;
        if !credited {
            if !state.attached && at_most_once {
                return PushOutcome::Dropped;
            }
            let len = state.queue.len();
            if len >= self.0.capacity {
                if at_most_once || !state.attached {
                    return PushOutcome::Dropped;
                }
                // At-least-once to a connected session: twice the capacity is the hard limit
                // (memory stays bounded); up to it, queue and let the publisher wait for room.
                if len >= self.0.capacity * 2 || state.overflowed {
                    state.overflowed = true;
                    drop(state);
                    self.0.notify.notify_one();
                    return PushOutcome::Overflowed;
                }
                state.queue.push_back(delivery);
                return PushOutcome::Congested;
            }
        }
        let was_empty = state.queue.is_empty();
        state.queue.push_back(delivery);
        drop(state);
        if was_empty {
            self.0.notify.notify_one();
        }
        PushOutcome::Queued
    }

    /// Waits until the outbox is below capacity (or its session is gone or already a slow
    /// consumer, when waiting longer would be pointless). Cancel-safe.
    pub async fn wait_for_room(&self) {
        loop {
            let room = self.0.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let state = self.0.lock();
                if state.closed || state.overflowed || state.queue.len() < self.0.capacity {
                    return;
                }
            }
            room.await;
        }
    }

    /// Marks the session as a slow consumer: its task gets [`Overflowed`] and closes the
    /// connection. Used when a publisher's grace for this subscriber ran out.
    pub fn mark_overflowed(&self) {
        self.0.lock().overflowed = true;
        self.0.notify.notify_one();
    }

    /// Whether the receiver is gone.
    pub fn is_closed(&self) -> bool {
        self.0.lock().closed
    }
}

impl OutboxReceiver {
    /// A sending handle for subscriptions.
    pub fn outbox(&self) -> Outbox {
        Outbox(self.0.clone())
    }

    /// The owning session.
    pub fn session(&self) -> SessionId {
        self.0.session
    }

    /// Moves up to `max` queued deliveries into `into` without waiting. Returns how many.
    pub fn try_drain(&self, into: &mut Vec<Delivery>, max: usize) -> Result<usize, Overflowed> {
        let mut state = self.0.lock();
        if state.overflowed {
            return Err(Overflowed);
        }
        let before = state.queue.len();
        let n = before.min(max);
        into.extend(state.queue.drain(..n));
        let relieved = before >= self.0.capacity && before - n < self.0.capacity;
        drop(state);
        if relieved {
            self.0.room.notify_waiters();
        }
        Ok(n)
    }

    /// Waits until at least one delivery is queued, then moves up to `max` into `into`.
    /// Cancel-safe: nothing is taken unless the future completes.
    pub async fn drain(&self, into: &mut Vec<Delivery>, max: usize) -> Result<usize, Overflowed> {
        loop {
            let n = self.try_drain(into, max)?;
            if n > 0 {
                return Ok(n);
            }
            self.0.notify.notified().await;
        }
    }

    /// Number of deliveries waiting.
    pub fn len(&self) -> usize {
        self.0.lock().queue.len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Marks a connection as attached (online) or not (offline persistent session); see
    /// [`PushOutcome`] for how this changes the overflow policy. Attaching clears an overflow.
    pub fn set_attached(&self, attached: bool) {
        let mut state = self.0.lock();
        state.attached = attached;
        if attached {
            state.overflowed = false;
        }
    }

    /// Puts deliveries back at the front, in order (a connection died before writing them).
    pub fn requeue_front(&self, deliveries: impl DoubleEndedIterator<Item = Delivery>) {
        let mut state = self.0.lock();
        for d in deliveries.rev() {
            state.queue.push_front(d);
        }
        let non_empty = !state.queue.is_empty();
        drop(state);
        if non_empty {
            self.0.notify.notify_one();
        }
    }
}

impl Drop for OutboxReceiver {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.closed = true;
        // Queue deliveries still in here stay unacknowledged in their queue until the session
        // removes its consumers, which puts them back for other consumers.
        let undelivered = std::mem::take(&mut state.queue);
        drop(state);
        drop(undelivered);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Origin;

    fn delivery(qos: QoS) -> Delivery {
        let origin = Origin { protocol: Protocol::Mqtt, session: SessionId(9), client_id: "p".into() };
        Delivery::new(Arc::new(Message::new("t", "x", origin)), qos, Instant::now())
    }

    #[test]
    fn full_outbox_drops_at_most_once_and_overflows_at_least_once_at_twice_the_capacity() {
        let (tx, rx) = outbox(SessionId(1), Protocol::Mqtt, 2);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Dropped);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Congested);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Congested);
        assert_eq!(
            tx.push(delivery(QoS::AtLeastOnce)),
            PushOutcome::Overflowed,
            "twice the capacity is the hard limit"
        );
        assert_eq!(rx.try_drain(&mut Vec::new(), 10), Err(Overflowed));
    }

    #[test]
    fn detached_outbox_keeps_at_least_once_up_to_capacity_then_drops() {
        let (tx, rx) = outbox(SessionId(1), Protocol::Mqtt, 1);
        rx.set_attached(false);
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Dropped);
        assert_eq!(tx.push(delivery(QoS::ExactlyOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Dropped);
        rx.set_attached(true);
        let mut got = Vec::new();
        assert_eq!(rx.try_drain(&mut got, 10), Ok(1));
        assert_eq!(got[0].qos, QoS::ExactlyOnce);
    }

    #[test]
    fn dropped_receiver_closes_the_outbox() {
        let (tx, rx) = outbox(SessionId(1), Protocol::Stomp, 4);
        drop(rx);
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Closed);
        assert!(tx.is_closed());
    }

    #[tokio::test]
    async fn at_least_once_over_capacity_congests_then_room_wakes_the_publisher() {
        let (tx, rx) = outbox(SessionId(1), Protocol::Mqtt, 2);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Congested);
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Dropped, "at-most-once never waits");
        let waiter = tokio::spawn({
            let tx = tx.clone();
            async move { tx.wait_for_room().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "no room yet");
        assert_eq!(rx.try_drain(&mut Vec::new(), 2), Ok(2));
        waiter.await.unwrap();
        assert_eq!(rx.try_drain(&mut Vec::new(), 10), Ok(1), "the congested delivery was kept");
    }

    #[tokio::test]
    async fn drain_wakes_on_push_from_another_task() {
        let (tx, rx) = outbox(SessionId(1), Protocol::Amqp, 8);
        let pusher = tokio::spawn(async move {
            tokio::task::yield_now().await;
            tx.push(delivery(QoS::AtMostOnce))
        });
        let mut got = Vec::new();
        assert_eq!(rx.drain(&mut got, 8).await, Ok(1));
        assert_eq!(pusher.await.unwrap(), PushOutcome::Queued);
    }
}
