//! The one time base shared by every publisher and subscriber of a run. Publishers and
//! subscribers live in the same process, so a send timestamp written into the payload can be
//! compared with the receive time directly, with no clock synchronisation between hosts.

use std::time::Instant;

/// A monotonic clock whose zero is the start of the run; timestamps are nanoseconds from it.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// Starts the run's clock now.
    pub fn start() -> Self {
        Clock { start: Instant::now() }
    }

    /// Nanoseconds since the start, the unit of every timestamp carried in a payload.
    pub fn now_ns(&self) -> u64 {
        self.ns_at(Instant::now())
    }

    /// Nanoseconds from the start to `at`: open-loop publishers stamp the time a message was
    /// *scheduled*, not when it went out, so that a stalled broker shows up as latency
    /// (no coordinated omission).
    pub fn ns_at(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.start).as_nanos()).unwrap_or(u64::MAX)
    }
}
