//! A log line written at most once per period. UDP peers can send as fast as they like, and a
//! log line per refused CONNECT or bad datagram would let a flood fill the disk of a Raspberry
//! Pi; with this a flood costs one line per period, carrying how many lines it stood for.
//! Knows nothing of what is logged; time is passed in.

use std::time::{Duration, Instant};

/// Time between two lines of one throttle.
pub(crate) const LOG_PERIOD: Duration = Duration::from_secs(10);

/// Decides whether one kind of log line may be written now.
#[derive(Debug, Default)]
pub(crate) struct LogThrottle {
    /// No line before this.
    quiet_until: Option<Instant>,
    /// Lines not written since the last one.
    suppressed: u64,
}

impl LogThrottle {
    /// `Some(n)` when a line may be written now, `n` being how many were held back since the
    /// previous one; `None` when this one must be held back (it is counted).
    pub(crate) fn admit(&mut self, now: Instant) -> Option<u64> {
        if self.quiet_until.is_some_and(|until| now < until) {
            self.suppressed += 1;
            return None;
        }
        self.quiet_until = Some(now + LOG_PERIOD);
        Some(std::mem::take(&mut self.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_period_with_the_count_of_the_rest() {
        let mut throttle = LogThrottle::default();
        let t0 = Instant::now();
        assert_eq!(throttle.admit(t0), Some(0));
        for i in 0..1000 {
            assert_eq!(throttle.admit(t0 + Duration::from_millis(i)), None);
        }
        assert_eq!(throttle.admit(t0 + LOG_PERIOD), Some(1000));
        assert_eq!(throttle.admit(t0 + LOG_PERIOD), None);
        assert_eq!(throttle.admit(t0 + 3 * LOG_PERIOD), Some(1));
    }
}
