//! A point in time in 8 bytes, for state that every connection keeps for its whole life (when
//! its client was last heard from, when its socket last took output). std's `Instant` is 16
//! bytes on Linux, seconds and nanoseconds apart; here it is nanoseconds since the process's
//! first stamp, which lasts 584 years.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The instant stamps count from: the first one asked for.
static BASE: OnceLock<Instant> = OnceLock::new();

fn base() -> Instant {
    *BASE.get_or_init(Instant::now)
}

/// An [`Instant`] in 8 bytes (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(u64);

impl Stamp {
    /// `at`, to the nanosecond. An instant before the process's first stamp counts as that
    /// stamp (at most the time between the two readings of the clock, when the first stamp is
    /// made from an instant read just before it).
    pub fn new(at: Instant) -> Self {
        let nanos = at.saturating_duration_since(base()).as_nanos();
        Stamp(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The instant it stands for.
    pub fn instant(self) -> Instant {
        base() + Duration::from_nanos(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_gives_its_instant_back_to_the_nanosecond_and_keeps_the_order() {
        let first = Stamp::new(Instant::now());
        let at = Instant::now() + Duration::from_nanos(1_234_567_891);
        assert_eq!(Stamp::new(at).instant(), at);
        assert!(Stamp::new(at) > first);
        assert_eq!(size_of::<Stamp>(), 8);
    }

    #[test]
    fn an_instant_before_the_first_stamp_counts_as_it() {
        let earliest = base().checked_sub(Duration::from_secs(1)).unwrap_or(base());
        assert_eq!(Stamp::new(earliest).instant(), base());
    }
}
