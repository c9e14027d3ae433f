//! Waits between connection attempts: doubling from `reconnect_min` to `reconnect_max`, each
//! with jitter, so that a fleet of gateways whose uplink comes back does not reconnect in step.

use std::time::Duration;

/// The wait before each next attempt.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// Starts at `min`, never above `max`.
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff { min, max: max.max(min), next: min }
    }

    /// The wait before the next attempt: the current step, less up to half of it at random;
    /// the step then doubles.
    pub fn next_wait(&mut self) -> Duration {
        let step = self.next;
        self.next = (step * 2).min(self.max);
        step.mul_f64(1.0 - fastrand::f64() / 2.0)
    }

    /// A connection worked: the next failure waits `min` again.
    pub fn reset(&mut self) {
        self.next = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap_with_jitter_and_reset() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let steps = [1, 2, 4, 5, 5];
        for step in steps {
            let wait = b.next_wait();
            let step = Duration::from_secs(step);
            assert!(wait <= step && wait >= step / 2, "{wait:?} for a step of {step:?}");
        }
        b.reset();
        assert!(b.next_wait() <= Duration::from_secs(1));
    }
}
