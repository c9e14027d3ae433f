//! A session's bounded delivery queue: the router pushes, the session's task drains in batches.
//!
//! A `std::sync::Mutex` around a `VecDeque` rather than a channel because the overflow policy
//! depends on the delivery's QoS and on whether a connection is attached, and because the
//! session drains everything queued in one lock (then writes and flushes once, as nats-server
//! does). The lock is never held across an await; pushes and drains are a few instructions.
//! The one receiver is woken through an `AtomicWaker` rather than a `Notify`: waiting then
//! needs no future of its own ([`OutboxReceiver::poll_drain`]), which every connection's task
//! would otherwise carry.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;

use tokio::sync::Notify;
use tolk_metrics::{DropReason, MemoryKind, Protocol};

use crate::budget::{MemoryBudget, message_cost};
use crate::delivery::Delivery;
use crate::message::{QoS, SessionId};
use crate::store::SessionKeeper;
use crate::transcode::Transcoder;

/// What happened to a push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushOutcome {
    /// Queued for the session.
    Queued,
    /// Not queued: at-most-once and the outbox was full twice over, or full after its
    /// publishers' grace ran out (or the session is offline; all counted as `outbox_full`), or
    /// the broker's memory budget was (`memory_full`).
    Dropped(DropReason),
    /// Not queued: at-least-once to an offline session whose queue is at its byte limit. The
    /// publisher should be told where its protocol can say so (as RabbitMQ's
    /// `overflow = reject-publish` does); the outbox counts and logs it per session.
    Refused,
    /// Queued, but over capacity: to a connected session whose outbox is full. The publisher
    /// should wait for room (see `Session::relieve_congestion`) before it sends more, so that a
    /// fast publisher is slowed down rather than a slow subscriber's messages dropped, at any
    /// QoS: TCP then holds the publisher back, as a single-threaded broker's does.
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

/// How much an outbox may hold. Counting deliveries bounds the work per drain; counting bytes
/// bounds memory, whatever the payload sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxLimits {
    /// Deliveries a connected session may have waiting before it counts as full.
    pub capacity: usize,
    /// Bytes (see [`crate::budget::message_cost`]) a connected session may have waiting
    /// before it counts as full.
    pub max_bytes: usize,
    /// Bytes an offline persistent session may keep; at-least-once messages beyond it are
    /// refused ([`PushOutcome::Refused`]). There is no count limit offline.
    pub offline_max_bytes: usize,
    /// What the bytes of a connected session count as in the memory gauges.
    pub kind: MemoryKind,
}

impl OutboxLimits {
    /// Limits by count only, for tests and holders whose bytes are bounded elsewhere.
    pub fn count(capacity: usize) -> Self {
        OutboxLimits {
            capacity,
            max_bytes: usize::MAX / 4,
            offline_max_bytes: usize::MAX / 4,
            kind: MemoryKind::Outbox,
        }
    }
}

struct State {
    queue: VecDeque<Delivery>,
    /// What the queued deliveries are charged, in bytes.
    bytes: usize,
    /// At-least-once messages refused while offline, for the log line.
    refused: u64,
    /// Whether a connection is attached. Detached (offline persistent) sessions queue only
    /// at-least-once messages and drop the newest when full instead of overflowing.
    attached: bool,
    overflowed: bool,
    closed: bool,
    /// At-least-once deliveries went over capacity since the outbox was last below it: if its
    /// publishers' grace runs out, the session is a slow consumer.
    congested_at_least_once: bool,
    /// Its publishers' grace ran out while only at-most-once deliveries were over capacity:
    /// until it is below capacity again, at-most-once deliveries beyond it are dropped
    /// rather than holding publishers back again.
    stalled: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the receiver: something was queued, the outbox overflowed, or it was signalled.
    notify: AtomicWaker,
    /// Set by [`Outbox::signal`] ([`SIGNALLED`]), [`Outbox::shut_down`] ([`SHUT_DOWN`]) and
    /// [`Outbox::alarm`] ([`ALARM`]), each taken by the receiver once (see
    /// [`OutboxReceiver::poll_wake`]).
    signals: AtomicU8,
    /// The second of the router's wheel of alarms ([`crate::alarm`]) that the receiving
    /// connection filed its far deadline for, 0 for none. Here, in the padding after
    /// `signals`, rather than in the task of every connection. Only the receiver uses it.
    alarm_filed: AtomicU32,
    /// Wakes congested publishers: the receiver drained the outbox below capacity. Boxed, and
    /// made by the first publisher that waits: few outboxes ever congest one, and 32 bytes
    /// inline would put every outbox in the next allocation class.
    room: OnceLock<Box<Notify>>,
    /// Shared by the sessions of a router (8 bytes in each outbox instead of 32).
    limits: Arc<OutboxLimits>,
    budget: Arc<MemoryBudget>,
    session: SessionId,
    protocol: Protocol,
    /// Set for a persistent session once the store is on: at-least-once deliveries are
    /// written through it as they are routed.
    keeper: OnceLock<Arc<SessionKeeper>>,
}

impl State {
    fn kind(&self, limits: &OutboxLimits) -> MemoryKind {
        if self.attached { limits.kind } else { MemoryKind::Offline }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the deque inconsistent, so poisoning
        // carries no information here.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets [`PENDING`]; called with the state's lock held, before the receiver is woken.
    fn mark_pending(&self) {
        if self.signals.load(Ordering::Relaxed) & PENDING == 0 {
            self.signals.fetch_or(PENDING, Ordering::Release);
        }
    }

    /// Wakes the publishers waiting for room ([`Outbox::wait_for_room`]): there is room, or
    /// waiting is pointless now (the outbox closed or overflowed), and each would otherwise
    /// wait out its whole grace. Called after the state's lock is released.
    fn wake_publishers(&self) {
        if let Some(room) = self.room.get() {
            room.notify_waiters();
        }
    }

    /// Whether a connected session's outbox is at its count or byte limit.
    fn is_full(&self, state: &State) -> bool {
        state.queue.len() >= self.limits.capacity || state.bytes >= self.limits.max_bytes
    }

    /// Takes the first `n` deliveries out, giving their bytes back to the budget.
    fn take(&self, state: &mut State, n: usize, into: &mut Vec<Delivery>) {
        let start = into.len();
        into.extend(state.queue.drain(..n));
        let bytes: usize = into[start..].iter().map(|d| message_cost(&d.message)).sum();
        state.bytes -= bytes;
        self.budget.release(state.kind(&self.limits), bytes);
    }
}

/// The sending side, held by the router's subscriptions and by queues. Cheap to clone.
#[derive(Clone)]
pub struct Outbox(Arc<Shared>);

/// The receiving side, owned by the session. Dropping it closes the outbox.
pub struct OutboxReceiver {
    shared: Arc<Shared>,
    /// Re-encodes payloads for this subscriber as they are taken, when a `[[transcode]]`
    /// rule serves its protocol.
    transcoder: Option<Arc<Transcoder>>,
}

/// Creates an outbox within `limits` whose bytes are charged to `budget` (queue deliveries,
/// which are bounded by consumer credit instead, do not count against the limits but are
/// charged). Front ends get theirs from [`crate::Router::open_session`] or
/// [`crate::Router::outbox`].
pub fn outbox(
    session: SessionId,
    protocol: Protocol,
    limits: impl Into<Arc<OutboxLimits>>,
    budget: Arc<MemoryBudget>,
) -> (Outbox, OutboxReceiver) {
    let mut limits = limits.into();
    if limits.capacity == 0 {
        Arc::make_mut(&mut limits).capacity = 1;
    }
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            bytes: 0,
            refused: 0,
            attached: true,
            overflowed: false,
            closed: false,
            congested_at_least_once: false,
            stalled: false,
        }),
        notify: AtomicWaker::new(),
        signals: AtomicU8::new(0),
        alarm_filed: AtomicU32::new(0),
        room: OnceLock::new(),
        limits,
        budget,
        session,
        protocol,
        keeper: OnceLock::new(),
    });
    (Outbox(shared.clone()), OutboxReceiver { shared, transcoder: None })
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

    /// Where a persistent session keeps its at-least-once deliveries, if it does.
    pub(crate) fn keeper(&self) -> Option<&SessionKeeper> {
        self.0.keeper.get().map(|k| &**k)
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
        let limits = &self.0.limits;
        let cost = message_cost(&delivery.message);
        let mut state = self.0.lock();
        if state.closed {
            return PushOutcome::Closed;
        }
        let kind = state.kind(limits);
        let at_most_once = delivery.qos == QoS::AtMostOnce;
        let mut outcome = PushOutcome::Queued;
        if !credited && !state.attached {
            // Offline persistent sessions keep at-least-once messages only, up to their bytes.
            if at_most_once {
                return PushOutcome::Dropped(DropReason::OutboxFull);
            }
            if state.bytes + cost > limits.offline_max_bytes && !state.queue.is_empty() {
                state.refused += 1;
                let refused = state.refused;
                drop(state);
                // One line at the first refusal and at every power of two after it: enough to
                // see in the log, never a flood.
                if refused.is_power_of_two() {
                    tracing::warn!(
                        session = self.0.session.0,
                        protocol = %self.0.protocol,
                        refused,
                        limit_bytes = limits.offline_max_bytes,
                        "offline session's queue is full; refusing at-least-once messages for it"
                    );
                }
                return PushOutcome::Refused;
            }
        } else if !credited {
            // Full by count, or by bytes once something is waiting (one message larger than
            // the limit still goes through an empty outbox).
            let len = state.queue.len();
            let full = len >= limits.capacity || (len > 0 && state.bytes + cost > limits.max_bytes);
            // Twice the limits is the hard limit (memory stays bounded); up to it, a delivery is
            // queued and its publisher waits for room.
            let hard = full && (len >= limits.capacity * 2 || state.bytes + cost > limits.max_bytes.saturating_mul(2));
            if at_most_once {
                if hard || (full && state.stalled) {
                    return PushOutcome::Dropped(DropReason::OutboxFull);
                }
                if !self.0.budget.try_charge(kind, cost) {
                    return PushOutcome::Dropped(DropReason::MemoryFull);
                }
                let outcome = if full { PushOutcome::Congested } else { PushOutcome::Queued };
                return self.enqueue(state, delivery, cost, outcome);
            }
            if full {
                if hard || state.overflowed {
                    state.overflowed = true;
                    self.0.mark_pending();
                    drop(state);
                    self.0.notify.wake();
                    self.0.wake_publishers();
                    return PushOutcome::Overflowed;
                }
                state.congested_at_least_once = true;
                outcome = PushOutcome::Congested;
            }
        }
        self.0.budget.charge(kind, cost);
        self.enqueue(state, delivery, cost, outcome)
    }

    /// Appends a delivery whose bytes are already charged, waking the receiver if it was idle.
    fn enqueue(
        &self,
        mut state: MutexGuard<'_, State>,
        delivery: Delivery,
        cost: usize,
        outcome: PushOutcome,
    ) -> PushOutcome {
        let was_empty = state.queue.is_empty();
        state.queue.push_back(delivery);
        state.bytes += cost;
        if was_empty {
            self.0.mark_pending();
        }
        drop(state);
        if was_empty {
            self.0.notify.wake();
        }
        outcome
    }

    /// Waits until the outbox is below capacity (or its session is gone or already a slow
    /// consumer, when waiting longer would be pointless). Cancel-safe.
    pub async fn wait_for_room(&self) {
        crate::wait::until(self.0.room.get_or_init(Box::default), || {
            let state = self.0.lock();
            state.closed || state.overflowed || !self.0.is_full(&state)
        })
        .await;
    }

    /// A publisher's grace for this subscriber ran out. With at-least-once deliveries over
    /// capacity, the session is a slow consumer: its task gets [`Overflowed`] and closes the
    /// connection. With only at-most-once ones, it stays, and loses what comes beyond its
    /// limits until it has room again.
    pub fn give_up_waiting(&self) {
        let mut state = self.0.lock();
        if state.congested_at_least_once {
            state.overflowed = true;
            self.0.mark_pending();
            drop(state);
            self.0.notify.wake();
            self.0.wake_publishers();
        } else if self.0.is_full(&state) {
            state.stalled = true;
        }
    }

    /// Whether the receiver is gone.
    pub fn is_closed(&self) -> bool {
        self.0.lock().closed
    }

    /// Tells the receiving connection something that is not a delivery (MQTT: another
    /// connection took its client id over); its driver hands it to the session
    /// ([`crate::drive::ProtocolSession::handle_signal`]). Through the outbox, which every
    /// connection watches already, rather than a channel of its own: one flag here instead of
    /// an allocation and a wait in every connection. Nothing is queued, so a full outbox is
    /// signalled as promptly as an empty one.
    pub fn signal(&self) {
        self.raise(SIGNALLED);
    }

    /// Tells the receiving connection that the broker is shutting down, through the same flag
    /// byte and waker as [`Outbox::signal`]: the router reaches every connection this way
    /// ([`crate::Router::shut_down_sessions_on`]), so that no connection keeps a wait of its own
    /// for the broker's shutdown. Taken once, as the signal is.
    pub fn shut_down(&self) {
        self.raise(SHUT_DOWN);
    }

    /// Wakes the receiving connection for the deadline it filed with the router's wheel of
    /// alarms ([`crate::alarm`]), through the same flag byte and waker. Taken once.
    pub(crate) fn alarm(&self) {
        self.raise(ALARM);
    }

    fn raise(&self, signal: u8) {
        self.0.signals.fetch_or(signal, Ordering::AcqRel);
        self.0.notify.wake();
    }
}

/// [`Outbox::signal`]'s bit in `Shared::signals`.
const SIGNALLED: u8 = 1;
/// [`Outbox::shut_down`]'s bit in `Shared::signals`.
const SHUT_DOWN: u8 = 2;
/// [`Outbox::alarm`]'s bit in `Shared::signals`.
const ALARM: u8 = 4;
/// Deliveries or an overflow wait, in `Shared::signals`: set under the state's lock when the
/// queue stops being empty or the outbox overflows, cleared under it by a drain that leaves
/// nothing. The receiver polls the outbox in every round of its connection's loop; with this
/// bit clear it learns that nothing waits without taking the lock.
const PENDING: u8 = 8;
/// The bits that are signals, taken by [`OutboxReceiver::poll_wake`] one at a time.
const SIGNALS: u8 = SIGNALLED | SHUT_DOWN | ALARM;

/// What [`OutboxReceiver::poll_wake`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// This many deliveries were moved out (at least one).
    Delivered(usize),
    /// [`Outbox::signal`] was called since the last wake.
    Signalled,
    /// [`Outbox::shut_down`] was called: the broker is shutting down.
    ShutDown,
    /// The session's deadline filed with the router's wheel of alarms is near (or moved).
    Alarm,
    /// The outbox overflowed: close the connection as a slow consumer.
    Overflowed,
}

impl OutboxReceiver {
    /// A sending handle for subscriptions.
    pub fn outbox(&self) -> Outbox {
        Outbox(self.shared.clone())
    }

    /// The owning session.
    pub fn session(&self) -> SessionId {
        self.shared.session
    }

    /// Re-encodes payloads through `transcoder` as they are taken (the router sets it on the
    /// outboxes of protocols a rule serves).
    pub(crate) fn transcode_with(&mut self, transcoder: Arc<Transcoder>) {
        self.transcoder = Some(transcoder);
    }

    /// The rules it re-encodes by, if any serve its protocol.
    pub(crate) fn transcoder(&self) -> Option<&Arc<Transcoder>> {
        self.transcoder.as_ref()
    }

    /// Writes this session's at-least-once deliveries through `keeper` from now on (a
    /// persistent session, with the store on). At most once per outbox.
    pub(crate) fn keep_with(&self, keeper: Arc<SessionKeeper>) {
        let _ = self.shared.keeper.set(keeper);
    }

    /// The session's keeper, if it is kept in the store.
    pub(crate) fn keeper(&self) -> Option<&Arc<SessionKeeper>> {
        self.shared.keeper.get()
    }

    /// Moves up to `max` queued deliveries into `into` without waiting. Returns how many.
    pub fn try_drain(&self, into: &mut Vec<Delivery>, max: usize) -> Result<usize, Overflowed> {
        if self.shared.signals.load(Ordering::Acquire) & PENDING == 0 {
            return Ok(0);
        }
        let mut state = self.shared.lock();
        if state.overflowed {
            return Err(Overflowed);
        }
        let was_full = self.shared.is_full(&state);
        let n = state.queue.len().min(max);
        let start = into.len();
        self.shared.take(&mut state, n, into);
        if state.queue.is_empty() {
            self.shared.signals.fetch_and(!PENDING, Ordering::Relaxed);
        }
        let relieved = was_full && !self.shared.is_full(&state);
        if relieved {
            state.congested_at_least_once = false;
            state.stalled = false;
        }
        drop(state);
        if relieved {
            // No one has waited yet if there is none: a publisher makes it before it looks at
            // the outbox (under the lock this drain took), so one that looks later sees room.
            self.shared.wake_publishers();
        }
        if let Some(transcoder) = &self.transcoder {
            for delivery in &mut into[start..] {
                transcoder.apply_in_place(&mut delivery.message, self.shared.protocol);
            }
        }
        Ok(n)
    }

    /// Waits until at least one delivery is queued, then moves up to `max` into `into`.
    /// Cancel-safe: nothing is taken unless the future completes.
    pub async fn drain(&self, into: &mut Vec<Delivery>, max: usize) -> Result<usize, Overflowed> {
        std::future::poll_fn(|cx| self.poll_drain(cx, into, max)).await
    }

    /// [`OutboxReceiver::drain`] as a poll: ready with what it moved (at least one delivery),
    /// or pending with the task's waker kept for the next push. Only the outbox's one receiving
    /// task may poll it (a second one would take the waker over).
    pub fn poll_drain(
        &self,
        cx: &mut Context<'_>,
        into: &mut Vec<Delivery>,
        max: usize,
    ) -> Poll<Result<usize, Overflowed>> {
        match self.try_drain(into, max) {
            Ok(0) => {}
            done => return Poll::Ready(done),
        }
        // Registered before looking again, so that a push in between is not missed.
        self.shared.notify.register(cx.waker());
        match self.try_drain(into, max) {
            Ok(0) => Poll::Pending,
            done => Poll::Ready(done),
        }
    }

    /// [`OutboxReceiver::poll_drain`], and the outbox's signals ([`Outbox::shut_down`] first,
    /// then [`Outbox::signal`], then the alarm of the router's wheel), each taken (cleared)
    /// when it is reported.
    pub fn poll_wake(&self, cx: &mut Context<'_>, into: &mut Vec<Delivery>, max: usize) -> Poll<Wake> {
        if let Some(wake) = self.take_signal() {
            return Poll::Ready(wake);
        }
        match self.poll_drain(cx, into, max) {
            Poll::Ready(Ok(n)) => Poll::Ready(Wake::Delivered(n)),
            Poll::Ready(Err(Overflowed)) => Poll::Ready(Wake::Overflowed),
            // Looked at again after the waker was registered: a signal in between is not missed.
            Poll::Pending => self.take_signal().map_or(Poll::Pending, Poll::Ready),
        }
    }

    /// The second this outbox's connection filed its far deadline for (see
    /// [`crate::alarm::Alarms::file`]), 0 for none.
    pub(crate) fn alarm_filed(&self) -> u32 {
        self.shared.alarm_filed.load(Ordering::Relaxed)
    }

    /// Keeps the second returned by [`crate::alarm::Alarms::file`].
    pub(crate) fn set_alarm_filed(&self, second: u32) {
        self.shared.alarm_filed.store(second, Ordering::Relaxed);
    }

    /// Forgets a signal not taken: one meant for a connection that ended before it looked
    /// (the session is handed to the next connection, which the signal was not meant for).
    /// A shutdown is kept: it is meant for whichever connection serves the session.
    pub fn clear_signal(&self) {
        self.shared.signals.fetch_and(!SIGNALLED, Ordering::AcqRel);
    }

    /// Takes one of the outbox's signals, the shutdown first and the alarm last, if any was
    /// given. A load first:
    /// the common answer, none, needs no write to the shared line.
    fn take_signal(&self) -> Option<Wake> {
        let signals = self.shared.signals.load(Ordering::Acquire) & SIGNALS;
        if signals == 0 {
            return None;
        }
        let (bit, wake) = if signals & SHUT_DOWN != 0 {
            (SHUT_DOWN, Wake::ShutDown)
        } else if signals & SIGNALLED != 0 {
            (SIGNALLED, Wake::Signalled)
        } else {
            (ALARM, Wake::Alarm)
        };
        (self.shared.signals.fetch_and(!bit, Ordering::AcqRel) & bit != 0).then_some(wake)
    }

    /// Number of deliveries waiting.
    pub fn len(&self) -> usize {
        self.shared.lock().queue.len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Marks a connection as attached (online) or not (offline persistent session); see
    /// [`PushOutcome`] for how this changes the overflow policy. Attaching clears an overflow.
    pub fn set_attached(&self, attached: bool) {
        let mut state = self.shared.lock();
        let (from, to) =
            (state.kind(&self.shared.limits), if attached { self.shared.limits.kind } else { MemoryKind::Offline });
        self.shared.budget.release(from, state.bytes);
        self.shared.budget.charge(to, state.bytes);
        state.attached = attached;
        if attached {
            state.overflowed = false;
        }
    }

    /// Puts deliveries back at the front, in order (a connection died before writing them).
    pub fn requeue_front(&self, deliveries: impl DoubleEndedIterator<Item = Delivery>) {
        let mut state = self.shared.lock();
        let kind = state.kind(&self.shared.limits);
        for d in deliveries.rev() {
            let cost = message_cost(&d.message);
            self.shared.budget.charge(kind, cost);
            state.bytes += cost;
            state.queue.push_front(d);
        }
        let non_empty = !state.queue.is_empty();
        if non_empty {
            self.shared.mark_pending();
        }
        drop(state);
        if non_empty {
            self.shared.notify.wake();
        }
    }
}

impl Drop for OutboxReceiver {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.closed = true;
        let mut undelivered = Vec::new();
        let n = state.queue.len();
        self.shared.take(&mut state, n, &mut undelivered);
        drop(state);
        self.shared.wake_publishers();
        // Queue deliveries stay unacknowledged in their queue until the session removes its
        // consumers, which puts them back for other consumers; the rest are lost with the
        // session, and counted.
        let lost = undelivered.iter().filter(|d| d.ack.is_none()).count() as u64;
        if lost > 0 {
            self.shared.budget.metrics().protocol(self.shared.protocol).dropped(DropReason::SessionEnded, lost);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    use crate::message::{Message, Origin};

    fn test_outbox(protocol: Protocol, limits: OutboxLimits) -> (Outbox, OutboxReceiver) {
        outbox(SessionId(1), protocol, limits, Arc::new(MemoryBudget::new(usize::MAX / 2, Default::default())))
    }

    fn delivery(qos: QoS) -> Delivery {
        let origin = Origin { protocol: Protocol::Mqtt, session: SessionId(9), client_id: "p".into() };
        Delivery::new(Arc::new(Message::new("t", "x", origin)), qos, Instant::now())
    }

    /// Every session holds one outbox: with the `Arc`'s two counts it is a 168-byte allocation,
    /// a 176-byte glibc chunk; one word more is a 192-byte one. Checked on 64-bit targets, as
    /// the Pi's aarch64 build is.
    #[test]
    fn an_outbox_fits_the_176_byte_chunk() {
        if cfg!(target_pointer_width = "64") {
            assert!(size_of::<Shared>() <= 152, "{} bytes", size_of::<Shared>());
        }
    }

    #[test]
    fn full_outbox_congests_then_drops_at_most_once_and_overflows_at_least_once_at_twice_the_capacity() {
        let (tx, rx) = test_outbox(Protocol::Mqtt, OutboxLimits::count(2));
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Congested, "the publisher waits");
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Congested);
        assert_eq!(
            tx.push(delivery(QoS::AtMostOnce)),
            PushOutcome::Dropped(DropReason::OutboxFull),
            "at-most-once beyond the hard limit is dropped"
        );
        assert_eq!(
            tx.push(delivery(QoS::AtLeastOnce)),
            PushOutcome::Overflowed,
            "twice the capacity is the hard limit"
        );
        assert_eq!(rx.try_drain(&mut Vec::new(), 10), Err(Overflowed));
    }

    #[test]
    fn a_signal_wakes_the_receiver_once_whether_or_not_deliveries_wait() {
        let (tx, rx) = test_outbox(Protocol::Mqtt, OutboxLimits::count(1));
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut got = Vec::new();
        assert_eq!(rx.poll_wake(&mut cx, &mut got, 10), Poll::Pending);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Congested);
        tx.signal();
        assert_eq!(rx.poll_wake(&mut cx, &mut got, 10), Poll::Ready(Wake::Signalled), "before a full outbox");
        assert_eq!(rx.poll_wake(&mut cx, &mut got, 10), Poll::Ready(Wake::Delivered(2)), "taken once");
        assert_eq!(rx.poll_wake(&mut cx, &mut got, 10), Poll::Pending);
        tx.signal();
        rx.clear_signal();
        assert_eq!(rx.poll_wake(&mut cx, &mut got, 10), Poll::Pending, "cleared for the next connection");
    }

    #[test]
    fn detached_outbox_keeps_at_least_once_up_to_its_bytes_then_refuses() {
        let one = message_cost(&delivery(QoS::AtLeastOnce).message);
        let limits = OutboxLimits { offline_max_bytes: 3 * one, ..OutboxLimits::count(1) };
        let metrics = Arc::new(tolk_metrics::Metrics::new());
        let (tx, rx) =
            outbox(SessionId(1), Protocol::Mqtt, limits, Arc::new(MemoryBudget::new(1 << 30, metrics.clone())));
        rx.set_attached(false);
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Dropped(DropReason::OutboxFull));
        for _ in 0..3 {
            assert_eq!(tx.push(delivery(QoS::ExactlyOnce)), PushOutcome::Queued, "no count limit offline");
        }
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Refused);
        assert_eq!(metrics.memory().held(MemoryKind::Offline), 3 * one);
        rx.set_attached(true);
        assert_eq!(metrics.memory().held(MemoryKind::Offline), 0);
        assert_eq!(metrics.memory().held(MemoryKind::Outbox), 3 * one);
        let mut got = Vec::new();
        assert_eq!(rx.try_drain(&mut got, 10), Ok(3));
        assert_eq!(got[0].qos, QoS::ExactlyOnce);
        assert_eq!(metrics.memory().total(), 0, "drained bytes are given back");
    }

    #[test]
    fn bytes_bound_a_connected_outbox_and_the_budget_drops_at_most_once() {
        let one = message_cost(&delivery(QoS::AtMostOnce).message);
        let metrics = Arc::new(tolk_metrics::Metrics::new());
        let limits = OutboxLimits { max_bytes: 2 * one, ..OutboxLimits::count(100) };
        let (tx, rx) =
            outbox(SessionId(1), Protocol::Mqtt, limits, Arc::new(MemoryBudget::new(3 * one, metrics.clone())));
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Congested, "2 messages' bytes");
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Congested);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Overflowed, "twice the bytes is the hard limit");
        let (tx2, _rx2) =
            outbox(SessionId(2), Protocol::Mqtt, limits, Arc::new(MemoryBudget::new(3 * one, metrics.clone())));
        assert_eq!(tx2.push(delivery(QoS::AtMostOnce)), PushOutcome::Dropped(DropReason::MemoryFull), "budget used up");
        drop(rx);
        assert_eq!(metrics.protocol(Protocol::Mqtt).dropped_count(DropReason::SessionEnded), 4);
        assert_eq!(metrics.memory().total(), 0);
    }

    #[test]
    fn dropped_receiver_closes_the_outbox() {
        let (tx, rx) = test_outbox(Protocol::Stomp, OutboxLimits::count(4));
        drop(rx);
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Closed);
        assert!(tx.is_closed());
    }

    #[tokio::test]
    async fn at_least_once_over_capacity_congests_then_room_wakes_the_publisher() {
        let (tx, rx) = test_outbox(Protocol::Mqtt, OutboxLimits::count(2));
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Congested);
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Congested, "at-most-once waits too");
        let waiter = tokio::spawn({
            let tx = tx.clone();
            async move { tx.wait_for_room().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "no room yet");
        assert_eq!(rx.try_drain(&mut Vec::new(), 2), Ok(2));
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "still at capacity");
        assert_eq!(rx.try_drain(&mut Vec::new(), 1), Ok(1));
        waiter.await.unwrap();
        assert_eq!(rx.try_drain(&mut Vec::new(), 10), Ok(1), "the congested deliveries were kept");
    }

    /// A subscriber that goes (it disconnected, or was closed as a slow consumer) or overflows
    /// lets its waiting publishers go on at once, instead of at the end of their grace.
    #[tokio::test]
    async fn a_closed_or_overflowed_outbox_wakes_the_publishers_waiting_for_room() {
        let (_tx, rx, waiter) = congested_with_a_publisher_waiting().await;
        drop(rx);
        tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("woken when the outbox closed").unwrap();

        let (tx, _rx, waiter) = congested_with_a_publisher_waiting().await;
        tx.give_up_waiting();
        tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("woken when it overflowed").unwrap();
    }

    /// A full outbox of capacity 1 and a publisher waiting for its room.
    async fn congested_with_a_publisher_waiting() -> (Outbox, OutboxReceiver, tokio::task::JoinHandle<()>) {
        let (tx, rx) = test_outbox(Protocol::Mqtt, OutboxLimits::count(1));
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Congested);
        let waiter = tokio::spawn({
            let tx = tx.clone();
            async move { tx.wait_for_room().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "no room yet");
        (tx, rx, waiter)
    }

    #[test]
    fn a_grace_run_out_closes_a_subscriber_only_for_at_least_once() {
        let (tx, rx) = test_outbox(Protocol::Mqtt, OutboxLimits::count(1));
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Congested);
        tx.give_up_waiting();
        assert_eq!(
            tx.push(delivery(QoS::AtMostOnce)),
            PushOutcome::Dropped(DropReason::OutboxFull),
            "stalled: dropped, and no publisher is held again"
        );
        assert_eq!(rx.try_drain(&mut Vec::new(), 10), Ok(2), "still connected");
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Congested, "room again: publishers wait again");
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Overflowed, "twice the capacity");
        let (tx, rx) = test_outbox(Protocol::Mqtt, OutboxLimits::count(1));
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Congested);
        tx.give_up_waiting();
        assert_eq!(rx.try_drain(&mut Vec::new(), 10), Err(Overflowed), "a slow consumer");
    }

    #[test]
    fn an_outbox_drained_empty_sees_what_comes_next_without_its_lock() {
        let (tx, rx) = test_outbox(Protocol::Mqtt, OutboxLimits::count(4));
        let mut got = Vec::new();
        assert_eq!(rx.try_drain(&mut got, 8), Ok(0), "nothing yet");
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Queued);
        assert_eq!(rx.try_drain(&mut got, 1), Ok(1), "one of two: the rest still waits");
        assert_eq!(rx.try_drain(&mut got, 8), Ok(1));
        assert_eq!(rx.try_drain(&mut got, 8), Ok(0), "drained empty");
        rx.requeue_front(got.drain(..));
        assert_eq!(rx.try_drain(&mut got, 8), Ok(2), "put back");
        assert_eq!(tx.push(delivery(QoS::AtMostOnce)), PushOutcome::Queued);
        assert_eq!(rx.try_drain(&mut got, 8), Ok(1), "pushed after a drain left nothing");
        rx.outbox().signal();
        assert_eq!(rx.try_drain(&mut got, 8), Ok(0), "a signal is not a delivery");
        let (tx, rx) = test_outbox(Protocol::Mqtt, OutboxLimits::count(1));
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Queued);
        assert_eq!(rx.try_drain(&mut Vec::new(), 8), Ok(1));
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Queued);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Congested);
        assert_eq!(tx.push(delivery(QoS::AtLeastOnce)), PushOutcome::Overflowed);
        assert_eq!(rx.try_drain(&mut Vec::new(), 8), Err(Overflowed), "an overflow is seen");
    }

    /// A push on another thread between the receiver's look and its registration is never
    /// missed: every delivery pushed is drained, with no wake-up lost.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_push_from_another_thread_is_missed() {
        const N: usize = 20_000;
        let (tx, rx) = test_outbox(Protocol::Mqtt, OutboxLimits::count(N));
        let pusher = tokio::spawn(async move {
            for i in 0..N {
                tx.push(delivery(QoS::AtMostOnce));
                if i % 64 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        });
        let mut got = Vec::new();
        while got.len() < N {
            let wait = rx.drain(&mut got, 16);
            tokio::time::timeout(std::time::Duration::from_secs(10), wait).await.expect("a push was missed").unwrap();
        }
        pusher.await.unwrap();
        assert_eq!(got.len(), N);
    }

    #[tokio::test]
    async fn drain_wakes_on_push_from_another_task() {
        let (tx, rx) = test_outbox(Protocol::Amqp, OutboxLimits::count(8));
        let pusher = tokio::spawn(async move {
            tokio::task::yield_now().await;
            tx.push(delivery(QoS::AtMostOnce))
        });
        let mut got = Vec::new();
        assert_eq!(rx.drain(&mut got, 8).await, Ok(1));
        assert_eq!(pusher.await.unwrap(), PushOutcome::Queued);
    }
}
