//! Named queues with competing consumers, acknowledgements and redelivery.
//!
//! One mechanism for AMQP queues, STOMP `/queue/…` destinations and MQTT `$share/…` groups:
//! messages wait in `ready` until a consumer has credit, are then pushed into that consumer's
//! outbox and remembered as unacknowledged until the consumer acks (forget), nacks (requeue at
//! the front, marked redelivered, or discard) or goes away (requeue everything it held).
//! Consumers take turns (round-robin) so a group shares the load.
//!
//! Publishers are held back before a queue that consumers drain fills up: past half its limits
//! a push says [`QueuePush::Congested`], and the publisher's connection stops reading until the
//! consumers have brought it below that mark (or the router's `slow_consumer_grace` runs out).
//! Only what arrives at a full queue is refused (`queue_full`), as for a queue nobody consumes.
//!
//! Lock order: a queue's lock may be held while pushing into an outbox, never the reverse.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use foldhash::fast::RandomState;
use tokio::sync::Notify;
use tolk_metrics::{DropReason, MemoryKind};

use crate::budget::{MemoryBudget, message_cost};
use crate::delivery::{Delivery, QueueAck, Settle, Settler};
use crate::message::{Message, QoS, SessionId};
use crate::outbox::{Outbox, PushOutcome};
use crate::store::{Change, Confirm, Durable, Space, Store, record};

/// Identifies a consumer within its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConsumerId(u64);

/// How a queue behaves; fixed at declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueOptions {
    /// Most messages waiting (ready, not counting unacknowledged). Publishing beyond it is
    /// refused and counted as `queue_full`: the publisher is told where its protocol allows.
    pub max_length: usize,
    /// Most bytes held (ready and unacknowledged, see [`crate::budget::message_cost`]), as
    /// RabbitMQ's `max-length-bytes`; beyond it publishing is refused like at `max_length`.
    /// 0 means the router's `queue_max_bytes`.
    pub max_length_bytes: usize,
    /// Delete the queue when its last consumer leaves (AMQP auto-delete, MQTT `$share` groups).
    pub auto_delete: bool,
    /// Survives restarts (AMQP `durable`, STOMP `/queue/`): with the store on, the queue, its
    /// topic bindings and its persistent (at-least-once) messages are kept on disk.
    pub durable: bool,
    /// Session that owns an exclusive queue (AMQP `exclusive`); others may not consume.
    pub exclusive_owner: Option<SessionId>,
    /// Drop at-most-once messages while nobody consumes (counted as `remote_down`): a bridge's
    /// spool keeps only what must arrive at least once while its remote is away.
    pub at_most_once_needs_consumer: bool,
    /// While switched on ([`Queue::set_confirming`]), an at-least-once message's publisher is
    /// acknowledged only when the queue's consumer settles it: the cluster's outgoing queue,
    /// whose consumer settles once JetStream has the message.
    pub confirms: bool,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            max_length: 100_000,
            max_length_bytes: 0,
            auto_delete: false,
            durable: false,
            exclusive_owner: None,
            at_most_once_needs_consumer: false,
            confirms: false,
        }
    }
}

/// What a consumer wants.
pub struct ConsumerOptions {
    /// Where its deliveries go.
    pub outbox: Outbox,
    /// Most unacknowledged deliveries at once (AMQP prefetch, MQTT receive maximum). Zero is
    /// taken as the broker's default credit, not as "unlimited", to keep memory bounded.
    pub credit: usize,
    /// Highest guarantee the consumer accepts; deliveries get `min(message, this)`.
    pub max_qos: QoS,
    /// The consumer's own tag, echoed in each delivery.
    pub tag: u64,
}

struct Waiting {
    message: Arc<Message>,
    redelivered: bool,
    /// Its arrival number in the store, or [`NOT_STORED`].
    seq: u64,
    /// Its publisher's wait, in a confirming queue.
    confirm: Option<Confirm>,
}

struct Unacked {
    message: Arc<Message>,
    consumer: ConsumerId,
    seq: u64,
    confirm: Option<Confirm>,
}

/// The `seq` of a message the store does not hold.
const NOT_STORED: u64 = 0;

struct Consumer {
    id: ConsumerId,
    options: ConsumerOptions,
    in_flight: usize,
}

#[derive(Default)]
struct State {
    ready: VecDeque<Waiting>,
    /// What the ready and unacknowledged messages are charged, in bytes.
    bytes: usize,
    unacked: HashMap<u64, Unacked, RandomState>,
    consumers: Vec<Consumer>,
    next_consumer: usize,
    next_delivery: u64,
    next_consumer_id: u64,
    /// The store arrival number of the next persistent message.
    next_seq: u64,
    /// Members that keep an auto-delete queue alive without consuming (persistent MQTT
    /// sessions waiting offline in a `$share` group).
    holds: usize,
    deleted: bool,
    /// New at-least-once messages get a [`Confirm`] ([`QueueOptions::confirms`]).
    confirming: bool,
    /// A publisher was told to wait ([`QueuePush::Congested`]) and has not been woken yet.
    congested: bool,
    /// A publisher's wait ran out while consumers did not drain the queue: publishers are not
    /// held back again until it is below its mark, and the limits refuse what does not fit.
    stalled: bool,
}

/// A named queue. Shared as `Arc<Queue>` by the router's bindings and the consumers.
pub struct Queue {
    name: Arc<str>,
    id: SessionId,
    options: QueueOptions,
    default_credit: usize,
    state: Mutex<State>,
    budget: Arc<MemoryBudget>,
    /// Where a durable queue keeps its persistent messages.
    store: Option<Arc<dyn Store>>,
    /// Wakes the publishers held back by a congested queue.
    room: Notify,
}

/// Why a push into a queue failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueuePush {
    /// Accepted (waiting or already handed to a consumer).
    Accepted,
    /// Accepted, but the queue is past half its limits while consumers drain it: its
    /// publisher should stop reading until [`Queue::wait_for_room`] returns, so that a fast
    /// publisher is slowed to its consumers' pace instead of filling the queue and being refused.
    Congested,
    /// At `max_length` or `max_length_bytes`, or the memory budget is used up; the message
    /// was not taken (counted as `queue_full` or `memory_full`).
    Full,
    /// The queue was deleted.
    Deleted,
}

impl Queue {
    pub(crate) fn new(
        name: &str,
        id: SessionId,
        options: QueueOptions,
        default_credit: usize,
        budget: Arc<MemoryBudget>,
        store: Option<Arc<dyn Store>>,
    ) -> Self {
        // The router resolves 0 to its default; a queue made directly has no byte limit.
        let options = QueueOptions {
            max_length_bytes: if options.max_length_bytes == 0 { usize::MAX / 4 } else { options.max_length_bytes },
            ..options
        };
        let store = store.filter(|_| options.durable);
        let state = Mutex::new(State { next_seq: 1, ..State::default() });
        let room = Notify::new();
        Queue { name: name.into(), id, options, default_credit: default_credit.max(1), state, budget, store, room }
    }

    /// Gives back the bytes of a message that left the queue for good, and its record.
    fn release(&self, state: &mut State, message: &Message, seq: u64) {
        let cost = message_cost(message);
        state.bytes -= cost;
        self.budget.release(MemoryKind::Queue, cost);
        self.forget(vec![seq]);
    }

    /// Deletes the records of messages that left. Not waited for: a delete lost in a crash
    /// only brings a message back, which at-least-once allows.
    fn forget(&self, seqs: Vec<u64>) {
        let Some(store) = &self.store else { return };
        let changes: Vec<Change> = seqs
            .into_iter()
            .filter(|&seq| seq != NOT_STORED)
            .map(|seq| Change::Delete { space: Space::QueueMessages, key: record::seq_key(&self.name, seq) })
            .collect();
        if !changes.is_empty() {
            drop(store.commit(changes));
        }
    }

    /// Whether the queue keeps its persistent messages on disk.
    pub fn is_stored(&self) -> bool {
        self.store.is_some()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The router id its bindings are registered under.
    pub fn id(&self) -> SessionId {
        self.id
    }

    /// The options it was declared with.
    pub fn options(&self) -> &QueueOptions {
        &self.options
    }

    /// Messages waiting for a consumer (not counting unacknowledged ones).
    pub fn ready_len(&self) -> usize {
        self.lock().ready.len()
    }

    /// Bytes its ready and unacknowledged messages are charged (see
    /// [`crate::budget::message_cost`]).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Messages delivered and not yet settled.
    pub fn unacked_len(&self) -> usize {
        self.lock().unacked.len()
    }

    /// Number of consumers.
    pub fn consumer_count(&self) -> usize {
        self.lock().consumers.len()
    }

    /// Keeps the queue alive for a member that does not consume now (see
    /// [`Queue::is_abandoned`]); undone by [`Queue::unhold`].
    pub(crate) fn hold(&self) {
        self.lock().holds += 1;
    }

    /// Ends one [`Queue::hold`].
    pub(crate) fn unhold(&self) {
        let mut state = self.lock();
        state.holds = state.holds.saturating_sub(1);
    }

    /// Whether nobody consumes from it or holds it: an auto-delete queue then goes.
    pub fn is_abandoned(&self) -> bool {
        let state = self.lock();
        state.consumers.is_empty() && state.holds == 0
    }

    /// Starts or stops confirming to publishers ([`QueueOptions::confirms`]). While it
    /// confirms, a durable queue does not write at-least-once messages to the store: the
    /// consumer's settling (JetStream's copies, for the cluster) stands for it. Stopping writes
    /// every message whose publisher still waits, and acknowledges each publisher once its
    /// message is durable here, for the consumer to take when it is back (the cluster while
    /// NATS is away).
    pub fn set_confirming(&self, on: bool) {
        let mut state = self.lock();
        state.confirming = on && self.options.confirms;
        if state.confirming {
            return;
        }
        let state = &mut *state;
        let held = state
            .ready
            .iter_mut()
            .map(|w| (&w.message, &mut w.seq, &mut w.confirm))
            .chain(state.unacked.values_mut().map(|u| (&u.message, &mut u.seq, &mut u.confirm)));
        for (message, seq, confirm) in held {
            let Some(confirm) = confirm.take() else { continue };
            match &self.store {
                Some(store) if *seq == NOT_STORED => {
                    *seq = state.next_seq;
                    state.next_seq += 1;
                    let key = record::seq_key(&self.name, *seq);
                    let value = record::encode_message(message);
                    // One commit each: the store's group commit syncs them together.
                    confirm.after(store.commit(vec![Change::Put { space: Space::QueueMessages, key, value }]));
                }
                _ => confirm.send(),
            }
        }
    }

    /// Adds a message. It goes straight to a consumer with credit if there is one. A durable
    /// queue writes a persistent message to the store first and leaves the commit in
    /// `durable`: acknowledge the publisher once it resolves.
    pub fn push(self: &Arc<Self>, message: Arc<Message>, durable: &mut Option<Durable>) -> QueuePush {
        let at_least_once = message.qos != QoS::AtMostOnce;
        let store = self.store.as_ref().filter(|_| at_least_once);
        self.enqueue(message, false, |state, message| {
            if at_least_once && state.confirming {
                // Its publisher waits until the consumer has passed it on; it is written here
                // only if the queue stops confirming first (`set_confirming`).
                let (confirm, wait) = Durable::confirmation();
                Durable::keep(durable, wait);
                return (NOT_STORED, Some(confirm));
            }
            let Some(store) = store else { return (NOT_STORED, None) };
            let seq = state.next_seq;
            state.next_seq += 1;
            let key = record::seq_key(&self.name, seq);
            let commit = store.commit(vec![Change::Put {
                space: Space::QueueMessages,
                key,
                value: record::encode_message(message),
            }]);
            Durable::keep(durable, commit);
            (seq, None)
        })
    }

    /// Puts back a message the store kept under `seq` (at start, before anyone consumes).
    /// Marked redelivered: it may have reached a consumer before the restart.
    pub(crate) fn restore(self: &Arc<Self>, message: Message, seq: u64) -> QueuePush {
        self.enqueue(Arc::new(message), true, |state, _| {
            state.next_seq = state.next_seq.max(seq + 1);
            (seq, None)
        })
    }

    /// Admits a message within the queue's limits and the budget; `keep` stores it and
    /// returns its arrival number and its publisher's wait.
    fn enqueue(
        self: &Arc<Self>,
        message: Arc<Message>,
        redelivered: bool,
        keep: impl FnOnce(&mut State, &Message) -> (u64, Option<Confirm>),
    ) -> QueuePush {
        let mut state = self.lock();
        if state.deleted {
            return QueuePush::Deleted;
        }
        let cost = message_cost(&message);
        let counters = self.budget.metrics().protocol(message.origin.protocol);
        if self.options.at_most_once_needs_consumer
            && message.qos == QoS::AtMostOnce
            && state.consumers.is_empty()
            && !redelivered
        {
            counters.dropped(DropReason::RemoteDown, 1);
            return QueuePush::Accepted;
        }
        if state.ready.len() >= self.options.max_length || state.bytes + cost > self.options.max_length_bytes {
            counters.dropped(DropReason::QueueFull, 1);
            return QueuePush::Full;
        }
        // At-most-once takes only what the budget has room for; at-least-once is refused once
        // the budget is used up, and otherwise charged whatever it costs (see `budget`).
        let charged = match message.qos {
            QoS::AtMostOnce => self.budget.try_charge(MemoryKind::Queue, cost),
            _ if !self.budget.has_room(cost) => false,
            _ => {
                self.budget.charge(MemoryKind::Queue, cost);
                true
            }
        };
        if !charged {
            counters.dropped(DropReason::MemoryFull, 1);
            return QueuePush::Full;
        }
        state.bytes += cost;
        let (seq, confirm) = keep(&mut state, &message);
        state.ready.push_back(Waiting { message, redelivered, seq, confirm });
        self.dispatch(&mut state);
        if !state.stalled && !state.consumers.is_empty() && self.past_mark(&state) {
            state.congested = true;
            return QueuePush::Congested;
        }
        QueuePush::Accepted
    }

    /// Whether the queue holds half its limits or more: the mark past which publishers wait
    /// (half, so that a consumer that keeps up again finds room before anything is refused).
    fn past_mark(&self, state: &State) -> bool {
        state.ready.len() >= self.options.max_length / 2 || state.bytes >= self.options.max_length_bytes / 2
    }

    /// Wakes the publishers held back once the queue is below its mark, deleted, or left
    /// without consumers (nobody would drain it for them).
    fn relieve(&self, state: &mut State) {
        let below = !self.past_mark(state);
        if state.congested && (below || state.deleted || state.consumers.is_empty()) {
            state.congested = false;
            self.room.notify_waiters();
        }
        if below {
            state.stalled = false;
        }
    }

    /// Returns once publishers may go on: the queue is below its mark, or nobody drains it.
    /// Cancel-safe.
    pub async fn wait_for_room(&self) {
        crate::wait::until(&self.room, || !self.lock().congested).await;
    }

    /// A publisher's grace ran out while the consumers did not drain the queue: publishers
    /// are no longer held back for it, and what exceeds its limits is refused (`queue_full`).
    pub fn give_up_waiting(&self) {
        let mut state = self.lock();
        if state.congested {
            state.congested = false;
            state.stalled = true;
            self.room.notify_waiters();
        }
    }

    /// Registers a consumer and hands it whatever is waiting, up to its credit.
    pub fn add_consumer(self: &Arc<Self>, options: ConsumerOptions) -> ConsumerId {
        let mut state = self.lock();
        state.next_consumer_id += 1;
        let id = ConsumerId(state.next_consumer_id);
        state.consumers.push(Consumer { id, options, in_flight: 0 });
        self.dispatch(&mut state);
        id
    }

    /// Removes a consumer; everything it had not acknowledged goes back to the front of the
    /// queue, in order, marked redelivered. Returns how many consumers remain.
    pub fn remove_consumer(self: &Arc<Self>, id: ConsumerId) -> usize {
        let mut state = self.lock();
        state.consumers.retain(|c| c.id != id);
        self.requeue_consumer(&mut state, id);
        self.dispatch(&mut state);
        state.consumers.len()
    }

    /// Gives a consumer more credit (e.g. AMQP basic.qos changed after consuming).
    pub fn set_credit(self: &Arc<Self>, id: ConsumerId, credit: usize) {
        let mut state = self.lock();
        if let Some(c) = state.consumers.iter_mut().find(|c| c.id == id) {
            c.options.credit = credit;
        }
        self.dispatch(&mut state);
    }

    /// Takes one waiting message for a synchronous get (AMQP basic.get). With `ack`, it stays
    /// unacknowledged under the given pseudo-consumer until settled.
    pub fn get(self: &Arc<Self>, owner: ConsumerId, ack: bool) -> Option<(Arc<Message>, bool, Option<QueueAck>)> {
        let mut state = self.lock();
        let now = Instant::now();
        let mut waiting = self.pop_live(&mut state, now)?;
        let settle = ack.then(|| {
            let id = Self::track(&mut state, &mut waiting, owner);
            QueueAck::new(self.clone(), id)
        });
        if settle.is_none() {
            self.release(&mut state, &waiting.message, waiting.seq);
            if let Some(confirm) = waiting.confirm.take() {
                confirm.send();
            }
        }
        self.relieve(&mut state);
        Some((waiting.message, waiting.redelivered, settle))
    }

    /// A consumer id for pulls ([`Queue::get`]) that is not registered for pushes.
    pub fn pull_consumer(&self) -> ConsumerId {
        let mut state = self.lock();
        state.next_consumer_id += 1;
        ConsumerId(state.next_consumer_id)
    }

    /// Puts back everything `owner` holds unacknowledged (AMQP basic.recover, a pull consumer going away).
    pub fn requeue_all(self: &Arc<Self>, owner: ConsumerId) {
        let mut state = self.lock();
        self.requeue_consumer(&mut state, owner);
        self.dispatch(&mut state);
    }

    /// Drops every waiting message; returns how many.
    pub fn purge(&self) -> usize {
        let mut state = self.lock();
        let n = state.ready.len();
        let mut seqs = Vec::with_capacity(n);
        for waiting in std::mem::take(&mut state.ready) {
            let cost = message_cost(&waiting.message);
            state.bytes -= cost;
            self.budget.release(MemoryKind::Queue, cost);
            seqs.push(waiting.seq);
        }
        self.forget(seqs);
        self.relieve(&mut state);
        n
    }

    /// Marks the queue deleted: later pushes fail, consumers get nothing more, and its stored
    /// messages are forgotten. Returns the number of messages discarded.
    pub(crate) fn mark_deleted(&self) -> usize {
        let mut state = self.lock();
        state.deleted = true;
        let n = state.ready.len() + state.unacked.len();
        let state = &mut *state;
        let seqs = state.ready.drain(..).map(|w| w.seq).chain(state.unacked.drain().map(|(_, u)| u.seq)).collect();
        self.forget(seqs);
        state.consumers.clear();
        self.budget.release(MemoryKind::Queue, std::mem::take(&mut state.bytes));
        self.relieve(state);
        n
    }

    fn settle_delivery(self: &Arc<Self>, id: u64, how: Settle) {
        let mut state = self.lock();
        let Some(unacked) = state.unacked.remove(&id) else { return };
        if let Some(c) = state.consumers.iter_mut().find(|c| c.id == unacked.consumer) {
            c.in_flight = c.in_flight.saturating_sub(1);
        }
        match how {
            Settle::Requeue => state.ready.push_front(Waiting {
                message: unacked.message,
                redelivered: true,
                seq: unacked.seq,
                confirm: unacked.confirm,
            }),
            Settle::Ack => {
                self.release(&mut state, &unacked.message, unacked.seq);
                if let Some(confirm) = unacked.confirm {
                    confirm.send();
                }
            }
            Settle::Discard => self.release(&mut state, &unacked.message, unacked.seq),
        }
        self.dispatch(&mut state);
    }

    fn requeue_consumer(&self, state: &mut State, id: ConsumerId) {
        let mut held: Vec<(u64, Unacked)> = state.unacked.extract_if(|_, u| u.consumer == id).collect();
        held.sort_unstable_by_key(|(tag, _)| std::cmp::Reverse(*tag));
        for (_, u) in held {
            state.ready.push_front(Waiting { message: u.message, redelivered: true, seq: u.seq, confirm: u.confirm });
        }
    }

    fn track(state: &mut State, waiting: &mut Waiting, consumer: ConsumerId) -> u64 {
        state.next_delivery += 1;
        let id = state.next_delivery;
        let confirm = waiting.confirm.take();
        state.unacked.insert(id, Unacked { message: waiting.message.clone(), consumer, seq: waiting.seq, confirm });
        id
    }

    fn pop_live(&self, state: &mut State, now: Instant) -> Option<Waiting> {
        while let Some(w) = state.ready.pop_front() {
            if !w.message.is_expired(now) {
                return Some(w);
            }
            self.budget.metrics().protocol(w.message.origin.protocol).dropped(DropReason::Expired, 1);
            self.release(state, &w.message, w.seq);
        }
        None
    }

    /// Hands waiting messages to consumers with credit, then wakes the publishers this made
    /// room for.
    fn dispatch(self: &Arc<Self>, state: &mut State) {
        self.hand_out(state);
        self.relieve(state);
    }

    /// Hands waiting messages to consumers with credit, taking turns.
    fn hand_out(self: &Arc<Self>, state: &mut State) {
        let now = Instant::now();
        while !state.ready.is_empty() && !state.consumers.is_empty() {
            let n = state.consumers.len();
            let Some(index) = (0..n).map(|i| (state.next_consumer + i) % n).find(|&i| {
                let c = &state.consumers[i];
                let credit = if c.options.credit == 0 { self.default_credit } else { c.options.credit };
                c.in_flight < credit
            }) else {
                return;
            };
            state.next_consumer = (index + 1) % n;
            let Some(mut waiting) = self.pop_live(state, now) else { return };
            let consumer_id = state.consumers[index].id;
            let id = Self::track(state, &mut waiting, consumer_id);
            let consumer = &mut state.consumers[index];
            let delivery = Delivery {
                qos: waiting.message.qos.min(consumer.options.max_qos),
                message: waiting.message,
                retain: false,
                tag: consumer.options.tag,
                subscription_id: None,
                enqueued_at: now,
                ack: Some(QueueAck::new(self.clone(), id)),
                redelivered: waiting.redelivered,
                stored: 0,
            };
            match consumer.options.outbox.push_credited(delivery) {
                PushOutcome::Queued => consumer.in_flight += 1,
                _ => {
                    // The consumer's session is gone without removing itself: take it out and
                    // give its messages (this one included) to the others.
                    state.consumers.remove(index);
                    self.requeue_consumer(state, consumer_id);
                }
            }
        }
    }
}

impl Settler for Queue {
    fn settle(self: Arc<Self>, id: u64, how: Settle) {
        self.settle_delivery(id, how);
    }

    fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Origin;
    use crate::outbox::{OutboxLimits, OutboxReceiver, outbox};
    use tolk_metrics::Protocol;

    fn test_budget() -> Arc<MemoryBudget> {
        Arc::new(MemoryBudget::new(usize::MAX / 2, Default::default()))
    }

    fn queue() -> Arc<Queue> {
        Arc::new(Queue::new("q", SessionId(100), QueueOptions::default(), 8, test_budget(), None))
    }

    fn msg(n: u8) -> Arc<Message> {
        let origin = Origin { protocol: Protocol::Amqp, session: SessionId(1), client_id: "p".into() };
        let mut m = Message::new("t", vec![n], origin);
        m.qos = QoS::AtLeastOnce;
        Arc::new(m)
    }

    fn consumer(q: &Arc<Queue>, credit: usize) -> (ConsumerId, OutboxReceiver) {
        let (tx, rx) = outbox(SessionId(7), Protocol::Amqp, OutboxLimits::count(4), test_budget());
        let id = q.add_consumer(ConsumerOptions { outbox: tx, credit, max_qos: QoS::ExactlyOnce, tag: 0 });
        (id, rx)
    }

    fn take(rx: &OutboxReceiver) -> Vec<Delivery> {
        let mut v = Vec::new();
        rx.try_drain(&mut v, 100).unwrap();
        v
    }

    /// Whether a publisher's wait has ended, without blocking.
    fn resolved(durable: &mut Option<Durable>) -> Option<bool> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        match std::pin::Pin::new(durable.as_mut()?).poll(&mut cx) {
            std::task::Poll::Ready(result) => Some(result.is_ok()),
            std::task::Poll::Pending => None,
        }
    }

    #[test]
    fn a_confirming_queue_acknowledges_publishers_on_settle_or_when_switched_off() {
        let options = QueueOptions { confirms: true, ..QueueOptions::default() };
        let q = Arc::new(Queue::new("c", SessionId(100), options, 8, test_budget(), None));
        let mut before = None;
        q.push(msg(0), &mut before);
        assert!(before.is_none(), "not confirming yet: nothing to wait for");
        q.set_confirming(true);
        let (mut first, mut second) = (None, None);
        q.push(msg(1), &mut first);
        q.push(msg(2), &mut second);
        let (_c, rx) = consumer(&q, 8);
        let taken = take(&rx);
        assert_eq!(resolved(&mut first), None, "waits for the consumer");
        taken[1].ack.as_ref().unwrap().ack();
        assert_eq!(resolved(&mut first), Some(true));
        taken[2].ack.as_ref().unwrap().nack(true);
        assert_eq!(resolved(&mut second), None, "requeued: still waiting");
        q.set_confirming(false);
        assert_eq!(resolved(&mut second), Some(true), "kept here: acknowledged");
    }

    /// A store that counts the records put and keeps nothing.
    #[derive(Default)]
    struct Counting(std::sync::atomic::AtomicUsize);

    impl Store for Counting {
        fn commit(&self, changes: Vec<Change>) -> Durable {
            let puts = changes.iter().filter(|c| matches!(c, Change::Put { .. })).count();
            self.0.fetch_add(puts, std::sync::atomic::Ordering::Relaxed);
            Durable::ready(Ok(()))
        }

        fn load(&self, _: crate::store::Space) -> Result<Vec<crate::store::Record>, crate::store::StoreError> {
            Ok(Vec::new())
        }
    }

    #[test]
    fn a_confirming_durable_queue_writes_only_what_is_still_held_when_it_stops_confirming() {
        let store = Arc::new(Counting::default());
        let options = QueueOptions { confirms: true, durable: true, ..QueueOptions::default() };
        let q = Arc::new(Queue::new("c", SessionId(100), options, 8, test_budget(), Some(store.clone())));
        let puts = || store.0.load(std::sync::atomic::Ordering::Relaxed);
        q.set_confirming(true);
        let (mut passed_on, mut held) = (None, None);
        q.push(msg(1), &mut passed_on);
        q.push(msg(2), &mut held);
        assert_eq!(puts(), 0, "nothing written while the consumer's settling stands for it");
        let (c, rx) = consumer(&q, 8);
        take(&rx)[0].ack.as_ref().unwrap().ack();
        assert_eq!(resolved(&mut passed_on), Some(true));
        q.remove_consumer(c);
        q.set_confirming(false);
        assert_eq!(puts(), 1, "the one still held is written");
        assert_eq!(resolved(&mut held), Some(true), "and its publisher acknowledged once durable");
        let mut after = None;
        q.push(msg(3), &mut after);
        assert_eq!(puts(), 2, "not confirming: written as any durable queue does");
    }

    #[test]
    fn consumers_take_turns_within_credit() {
        let q = queue();
        let (_a, rx_a) = consumer(&q, 2);
        let (_b, rx_b) = consumer(&q, 2);
        for n in 0..5 {
            q.push(msg(n), &mut None);
        }
        let a: Vec<u8> = take(&rx_a).iter().map(|d| d.message.payload[0]).collect();
        let b: Vec<u8> = take(&rx_b).iter().map(|d| d.message.payload[0]).collect();
        assert_eq!((a, b), (vec![0, 2], vec![1, 3]));
        assert_eq!(q.ready_len(), 1, "fifth waits for credit");
    }

    #[test]
    fn ack_frees_credit_and_nack_requeues_marked_redelivered() {
        let q = queue();
        let (_a, rx) = consumer(&q, 1);
        q.push(msg(1), &mut None);
        q.push(msg(2), &mut None);
        let first = take(&rx).pop().unwrap();
        assert!(!first.redelivered);
        first.ack.as_ref().unwrap().nack(true);
        let again = take(&rx).pop().unwrap();
        assert_eq!((again.message.payload[0], again.redelivered), (1, true));
        again.ack.as_ref().unwrap().ack();
        again.ack.as_ref().unwrap().ack(); // settling twice is harmless
        let second = take(&rx).pop().unwrap();
        assert_eq!(second.message.payload[0], 2);
        assert_eq!(q.unacked_len(), 1);
    }

    #[test]
    fn removed_consumer_hands_its_unacked_messages_to_the_others_in_order() {
        let q = queue();
        let (a, rx_a) = consumer(&q, 8);
        for n in 0..3 {
            q.push(msg(n), &mut None);
        }
        assert_eq!(take(&rx_a).len(), 3);
        let (_b, rx_b) = consumer(&q, 8);
        assert_eq!(q.remove_consumer(a), 1);
        let got: Vec<(u8, bool)> = take(&rx_b).iter().map(|d| (d.message.payload[0], d.redelivered)).collect();
        assert_eq!(got, [(0, true), (1, true), (2, true)]);
    }

    #[test]
    fn dead_consumer_is_skipped_and_message_goes_to_a_live_one() {
        let q = queue();
        let (_a, rx_a) = consumer(&q, 8);
        let (_b, rx_b) = consumer(&q, 8);
        drop(rx_a);
        q.push(msg(1), &mut None);
        assert_eq!(take(&rx_b).len(), 1);
        assert_eq!(q.consumer_count(), 1);
    }

    #[test]
    fn full_queue_refuses_and_get_pulls() {
        let q = Arc::new(Queue::new(
            "q",
            SessionId(1),
            QueueOptions { max_length: 1, ..Default::default() },
            8,
            test_budget(),
            None,
        ));
        assert_eq!(q.push(msg(1), &mut None), QueuePush::Accepted);
        assert_eq!(q.push(msg(2), &mut None), QueuePush::Full);
        let puller = q.pull_consumer();
        let (m, redelivered, ack) = q.get(puller, true).unwrap();
        assert_eq!((m.payload[0], redelivered), (1, false));
        assert!(q.get(puller, true).is_none());
        q.requeue_all(puller);
        assert_eq!(q.ready_len(), 1);
        drop(ack);
    }

    fn queue_of(max_length: usize) -> Arc<Queue> {
        let options = QueueOptions { max_length, ..Default::default() };
        Arc::new(Queue::new("q", SessionId(1), options, 8, test_budget(), None))
    }

    /// Whether `wait_for_room` has returned, without blocking.
    fn has_room(q: &Queue) -> bool {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        std::pin::pin!(q.wait_for_room()).poll(&mut cx).is_ready()
    }

    #[test]
    fn a_queue_past_half_its_length_holds_publishers_until_its_consumer_drains_it() {
        let q = queue_of(4);
        let (_c, rx) = consumer(&q, 1);
        assert_eq!(q.push(msg(1), &mut None), QueuePush::Accepted, "straight to the consumer");
        assert_eq!(q.push(msg(2), &mut None), QueuePush::Accepted);
        assert_eq!(q.push(msg(3), &mut None), QueuePush::Congested, "2 of 4 waiting");
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut wait = std::pin::pin!(q.wait_for_room());
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        assert_eq!(q.push(msg(4), &mut None), QueuePush::Congested, "still taken while publishers wait");
        take(&rx).pop().unwrap().ack.as_ref().unwrap().ack();
        assert!(wait.as_mut().poll(&mut cx).is_pending(), "2 of 4 waiting: still at the mark");
        take(&rx).pop().unwrap().ack.as_ref().unwrap().ack();
        assert!(wait.as_mut().poll(&mut cx).is_ready(), "1 of 4 waiting: below the mark");
        assert_eq!(q.push(msg(5), &mut None), QueuePush::Congested);
        let payloads: Vec<u8> = std::iter::from_fn(|| {
            let d = take(&rx).pop()?;
            d.ack.as_ref().unwrap().ack();
            Some(d.message.payload[0])
        })
        .collect();
        assert_eq!(payloads, [3, 4, 5], "nothing refused, in order");
        assert!(has_room(&q));
    }

    #[test]
    fn a_queue_nobody_consumes_refuses_when_full_without_holding_anyone() {
        let q = queue_of(4);
        for n in 1..=4 {
            assert_eq!(q.push(msg(n), &mut None), QueuePush::Accepted);
        }
        assert_eq!(q.push(msg(5), &mut None), QueuePush::Full);
        assert!(has_room(&q));
        // Held back for a consumer that then leaves: nobody drains it, so nobody waits.
        let q = queue_of(4);
        let (c, _rx) = consumer(&q, 1);
        for n in 1..=2 {
            q.push(msg(n), &mut None);
        }
        assert_eq!(q.push(msg(3), &mut None), QueuePush::Congested);
        assert!(!has_room(&q));
        q.remove_consumer(c);
        assert!(has_room(&q));
    }

    #[test]
    fn a_publisher_that_gave_up_waiting_is_refused_at_the_limit_and_held_again_once_drained() {
        let q = queue_of(4);
        let (_c, rx) = consumer(&q, 1);
        for n in 1..=2 {
            q.push(msg(n), &mut None);
        }
        assert_eq!(q.push(msg(3), &mut None), QueuePush::Congested);
        q.give_up_waiting();
        assert!(has_room(&q));
        assert_eq!(q.push(msg(4), &mut None), QueuePush::Accepted, "stalled: not held again");
        assert_eq!(q.push(msg(5), &mut None), QueuePush::Accepted);
        assert_eq!(q.push(msg(6), &mut None), QueuePush::Full);
        for _ in 0..3 {
            take(&rx).pop().unwrap().ack.as_ref().unwrap().ack();
        }
        assert_eq!(q.ready_len(), 1, "below the mark again");
        assert_eq!(q.push(msg(7), &mut None), QueuePush::Congested, "held back again");
    }
}
