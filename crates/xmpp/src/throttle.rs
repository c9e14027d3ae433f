//! The stanza rate limit: a token bucket that slows a client down rather than closing it, as
//! Prosody's `mod_limits` does. While the bucket is empty the connection neither decodes what
//! it has read nor reads more (TCP then slows the client), and it picks up again when the
//! bucket has refilled.

use std::time::{Duration, Instant};

/// One connection's stanza budget.
#[derive(Debug)]
pub(crate) struct Throttle {
    /// Stanzas per second; also the bucket's size (one second's worth may come at once).
    rate: f64,
    tokens: f64,
    refilled_at: Instant,
    /// Empty until then.
    blocked_until: Option<Instant>,
}

impl Throttle {
    /// A full bucket of `rate` stanzas per second.
    pub fn new(rate: u32, now: Instant) -> Self {
        let rate = f64::from(rate);
        Throttle { rate, tokens: rate, refilled_at: now, blocked_until: None }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled_at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.rate);
        self.refilled_at = now;
    }

    /// Whether one more stanza may be read now; if not, the bucket is empty until
    /// [`Throttle::blocked_until`].
    pub fn may_take(&mut self, now: Instant) -> bool {
        if self.blocked_until.is_some_and(|until| until > now) {
            return false;
        }
        self.refill(now);
        if self.tokens >= 1.0 {
            self.blocked_until = None;
            return true;
        }
        let wait = Duration::from_secs_f64((1.0 - self.tokens) / self.rate);
        self.blocked_until = Some(now + wait);
        false
    }

    /// One stanza was read.
    pub fn take(&mut self) {
        self.tokens -= 1.0;
    }

    /// When reading may go on, while the bucket is empty.
    pub fn blocked_until(&self) -> Option<Instant> {
        self.blocked_until
    }

    /// The bucket refilled since it ran empty: what was read and left may be decoded now.
    /// True once per emptying.
    pub fn take_unblocked(&mut self, now: Instant) -> bool {
        match self.blocked_until {
            Some(until) if until <= now => {
                self.blocked_until = None;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_of_stanzas_passes_at_once_then_the_rate_holds() {
        let t0 = Instant::now();
        let mut throttle = Throttle::new(10, t0);
        for _ in 0..10 {
            assert!(throttle.may_take(t0));
            throttle.take();
        }
        assert!(!throttle.may_take(t0));
        let until = throttle.blocked_until().unwrap();
        assert_eq!(until, t0 + Duration::from_millis(100));
        assert!(!throttle.take_unblocked(t0 + Duration::from_millis(99)));
        assert!(!throttle.may_take(t0 + Duration::from_millis(99)));
        assert!(throttle.take_unblocked(until));
        assert!(!throttle.take_unblocked(until), "once per emptying");
        assert!(throttle.may_take(until));
        throttle.take();
        assert!(!throttle.may_take(until));
    }
}
