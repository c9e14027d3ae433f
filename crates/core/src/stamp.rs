//! A point in time in 8 bytes, for state that every connection keeps for its whole life (when
//! its client was last heard from, when its socket last took output). std's `Instant` is 16
//! bytes on Linux (64-bit seconds and nanoseconds); here it is 32-bit seconds and nanoseconds
//! since the process's first stamp, which lasts 136 years. Neither way converts through a
//! 128-bit multiplication or a 64-bit division, which the 32-bit Pi build would pay for on
//! every event.

use std::num::NonZeroU32;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The instant stamps count from: the first one asked for.
static BASE: OnceLock<Instant> = OnceLock::new();

fn base() -> Instant {
    *BASE.get_or_init(Instant::now)
}

/// An [`Instant`] in 8 bytes (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp {
    /// One more than the whole seconds, so that an `Option<Stamp>` is 8 bytes too.
    secs_plus_one: NonZeroU32,
    /// Below 1,000,000,000.
    nanos: u32,
}

impl Stamp {
    /// `at`, to the nanosecond. An instant before the process's first stamp counts as that
    /// stamp (at most the time between the two readings of the clock, when the first stamp is
    /// made from an instant read just before it).
    pub fn new(at: Instant) -> Self {
        let since = at.saturating_duration_since(base());
        let secs_plus_one = u32::try_from(since.as_secs()).ok().and_then(|secs| secs.checked_add(1));
        match secs_plus_one.and_then(NonZeroU32::new) {
            Some(secs_plus_one) => Stamp { secs_plus_one, nanos: since.subsec_nanos() },
            None => Stamp { secs_plus_one: NonZeroU32::MAX, nanos: 999_999_999 },
        }
    }

    /// The instant it stands for.
    pub fn instant(self) -> Instant {
        base() + Duration::new((self.secs_plus_one.get() - 1).into(), self.nanos)
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
        assert_eq!(size_of::<Option<Stamp>>(), 8);
    }

    #[test]
    fn an_instant_before_the_first_stamp_counts_as_it() {
        let earliest = base().checked_sub(Duration::from_secs(1)).unwrap_or(base());
        assert_eq!(Stamp::new(earliest).instant(), base());
    }
}
