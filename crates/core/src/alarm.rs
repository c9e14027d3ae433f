//! Wake-ups seconds ahead for every connection, from one shared wheel instead of a timer each.
//!
//! A connection's deadline is usually far away: an MQTT keep-alive a minute and a half ahead,
//! moved later by every packet. A tokio timer kept for it costs every connection 128 bytes.
//! Here a deadline at least [`FAR`] away is a live-session slot (4 bytes) in a one-second
//! bucket: between one and two seconds before the deadline, a task shared by the router raises
//! the session's alarm through its outbox ([`crate::Wake::Alarm`]), and its driver then arms a
//! precise timer for what is left, or files the deadline again if it moved later meanwhile.
//! So a deadline is never met late on account of the wheel, and a connection whose deadline
//! keeps moving (every active one) files it once per period, not once per packet.
//!
//! The wheel's memory is bounded by the connections: a connection files again while its last
//! alarm is pending only for an earlier second, so it has at most one pending alarm per second
//! of the wheel's [`SPAN`], and usually one.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::live::LiveSessions;

/// Deadlines nearer than this get a precise timer of their connection's own.
pub(crate) const FAR: Duration = Duration::from_secs(2);

/// Seconds the wheel spans: an alarm further ahead is raised at the wheel's end, early, and
/// its driver files it again.
const SPAN: u32 = 64;

/// The router's wheel of alarms.
pub(crate) struct Alarms {
    /// Second 0. A second `s` is raised at `epoch + s`.
    epoch: Instant,
    /// The last second raised: an alarm filed for a later one is still pending.
    raised: AtomicU32,
    wheel: Mutex<Wheel>,
    live: Arc<LiveSessions>,
}

#[derive(Default)]
struct Wheel {
    /// Slots to alarm, by second modulo [`SPAN`]. Allocated with the first alarm.
    buckets: Vec<Vec<u32>>,
    /// The task that raises the buckets, while any alarm is filed: it ends when none is left,
    /// or with its runtime (a router may outlive one in tests), after which a filing starts
    /// another.
    ticker: Option<JoinHandle<()>>,
}

impl Wheel {
    /// Alarms filed and not raised yet.
    fn pending(&self) -> usize {
        self.buckets.iter().map(Vec::len).sum()
    }
}

impl Alarms {
    /// A wheel raising alarms through the outboxes kept in `live`.
    pub(crate) fn new(live: Arc<LiveSessions>) -> Self {
        Alarms { epoch: Instant::now(), raised: AtomicU32::new(0), wheel: Mutex::default(), live }
    }

    fn lock(&self) -> MutexGuard<'_, Wheel> {
        // Every change under the lock is a push, a take or a counter: a panic cannot leave the
        // wheel inconsistent.
        self.wheel.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whole seconds from the epoch to `at`.
    fn second(&self, at: Instant) -> u32 {
        at.saturating_duration_since(self.epoch).as_secs().try_into().unwrap_or(u32::MAX)
    }

    /// Files an alarm for the session in `slot` between one and two seconds before `at`, which
    /// must be at least [`FAR`] ahead, unless `filed` (the second this returned before, 0 for
    /// none) is still pending and no later. Returns the second filed, or `None` outside a tokio
    /// runtime, where nothing would raise it.
    pub(crate) fn file(self: &Arc<Self>, slot: u32, at: Instant, filed: u32) -> Option<u32> {
        let raised = self.raised.load(Ordering::Acquire);
        // At least 1: `at` is two seconds or more after now, which is after the epoch.
        let second = self.second(at).saturating_sub(1).min(raised.saturating_add(SPAN));
        if filed > raised && filed <= second {
            return Some(filed);
        }
        let mut wheel = self.lock();
        if wheel.ticker.as_ref().is_none_or(JoinHandle::is_finished) {
            let runtime = tokio::runtime::Handle::try_current().ok()?;
            wheel.ticker = Some(runtime.spawn(tick(Arc::downgrade(self))));
        }
        // Raised meanwhile past `second`: at least it is raised at the next tick.
        let second = second.max(self.raised.load(Ordering::Acquire) + 1);
        if wheel.buckets.is_empty() {
            wheel.buckets.resize_with(SPAN as usize, Vec::new);
        }
        wheel.buckets[(second % SPAN) as usize].push(slot);
        Some(second)
    }

    /// Raises every alarm filed up to now; whether any is left to raise later.
    fn raise_due(&self) -> bool {
        let now = self.second(Instant::now());
        let mut due = Vec::new();
        let left = {
            let mut wheel = self.lock();
            let raised = self.raised.load(Ordering::Acquire);
            if now > raised && !wheel.buckets.is_empty() {
                for second in raised + 1..=now.min(raised + SPAN) {
                    due.append(&mut wheel.buckets[(second % SPAN) as usize]);
                }
            }
            self.raised.store(now.max(raised), Ordering::Release);
            if wheel.pending() == 0 {
                wheel.ticker = None;
            }
            wheel.ticker.is_some()
        };
        self.live.alarm(&due);
        left
    }
}

/// Raises the wheel's alarms second by second while any is filed, or until the router is gone.
async fn tick(alarms: Weak<Alarms>) {
    loop {
        let Some(next) =
            alarms.upgrade().map(|a| a.epoch + Duration::from_secs(u64::from(a.raised.load(Ordering::Acquire)) + 1))
        else {
            return;
        };
        tokio::time::sleep_until(next.into()).await;
        match alarms.upgrade() {
            Some(alarms) if alarms.raise_due() => {}
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll};

    use tolk_metrics::{Metrics, Protocol};

    use super::*;
    use crate::budget::MemoryBudget;
    use crate::message::SessionId;
    use crate::outbox::{OutboxLimits, OutboxReceiver, Wake, outbox};

    fn open(live: &LiveSessions) -> (u32, OutboxReceiver) {
        let budget = Arc::new(MemoryBudget::new(1 << 20, Arc::new(Metrics::new())));
        let (sender, receiver) = outbox(SessionId(1), Protocol::Mqtt, OutboxLimits::count(4), budget);
        (live.insert(sender), receiver)
    }

    /// The next wake of `receiver`, which must come within five seconds.
    async fn raised(receiver: &OutboxReceiver) -> Wake {
        let wake = std::future::poll_fn(|cx| receiver.poll_wake(cx, &mut Vec::new(), 10));
        tokio::time::timeout(Duration::from_secs(5), wake).await.expect("no alarm within 5 s")
    }

    fn wake(receiver: &OutboxReceiver) -> Poll<Wake> {
        receiver.poll_wake(&mut Context::from_waker(std::task::Waker::noop()), &mut Vec::new(), 10)
    }

    #[tokio::test]
    async fn an_alarm_is_raised_between_one_and_two_seconds_before_its_deadline() {
        let live = Arc::new(LiveSessions::default());
        let alarms = Arc::new(Alarms::new(live.clone()));
        let (slot, receiver) = open(&live);
        let at = Instant::now() + Duration::from_millis(3500);
        let second = alarms.file(slot, at, 0).unwrap();
        assert_eq!(alarms.file(slot, at + Duration::from_secs(5), second), Some(second), "a later deadline keeps it");
        assert_eq!(wake(&receiver), Poll::Pending);
        assert_eq!(raised(&receiver).await, Wake::Alarm);
        let left = at.saturating_duration_since(Instant::now());
        assert!(left > Duration::from_millis(900) && left < FAR, "{left:?} before the deadline");
        assert_eq!(wake(&receiver), Poll::Pending, "raised once");
        assert_eq!(alarms.lock().pending(), 0);
    }

    #[tokio::test]
    async fn an_earlier_deadline_is_filed_again() {
        let live = Arc::new(LiveSessions::default());
        let alarms = Arc::new(Alarms::new(live.clone()));
        let (slot, receiver) = open(&live);
        let far = alarms.file(slot, Instant::now() + Duration::from_secs(30), 0).unwrap();
        let near = alarms.file(slot, Instant::now() + Duration::from_millis(2100), far).unwrap();
        assert!(near < far);
        assert_eq!(raised(&receiver).await, Wake::Alarm);
        let wheel = alarms.lock();
        assert_eq!((wheel.pending(), wheel.ticker.is_some()), (1, true), "the far one is still filed");
    }

    #[tokio::test]
    async fn a_connection_whose_deadline_keeps_moving_has_at_most_one_alarm_per_second_of_the_wheel() {
        let live = Arc::new(LiveSessions::default());
        let alarms = Arc::new(Alarms::new(live.clone()));
        let (slot, _receiver) = open(&live);
        let now = Instant::now();
        let mut filed = 0;
        // Later and later: the first alarm stays.
        for ahead in 3..1_000 {
            filed = alarms.file(slot, now + Duration::from_secs(ahead), filed).unwrap();
        }
        assert_eq!(alarms.lock().pending(), 1);
        // Earlier and earlier, a thousand times: one alarm per second of the wheel at most.
        for ahead in (3..1_000).rev() {
            filed = alarms.file(slot, now + Duration::from_secs(ahead), filed).unwrap();
        }
        assert!(alarms.lock().pending() <= SPAN as usize, "{} alarms", alarms.lock().pending());
    }

    #[test]
    fn a_wheel_that_outlives_its_runtime_ticks_in_the_next() {
        let live = Arc::new(LiveSessions::default());
        let alarms = Arc::new(Alarms::new(live.clone()));
        let (slot, receiver) = open(&live);
        let first = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        first.block_on(async { alarms.file(slot, Instant::now() + Duration::from_secs(30), 0) }).unwrap();
        drop(first);
        let next = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let wake = next.block_on(async {
            alarms.file(slot, Instant::now() + Duration::from_millis(2100), 0).unwrap();
            raised(&receiver).await
        });
        assert_eq!(wake, Wake::Alarm);
    }

    #[test]
    fn outside_a_runtime_nothing_is_filed() {
        let live = Arc::new(LiveSessions::default());
        let alarms = Arc::new(Alarms::new(live.clone()));
        let (slot, _receiver) = open(&live);
        assert_eq!(alarms.file(slot, Instant::now() + Duration::from_secs(10), 0), None);
    }
}
