//! The endpoint's deadlines: one heap for the timers of every session.
//!
//! A session's deadline moves later with every message its client sends (the keep-alive
//! window starts again). Filing each move would leave the old deadline in the heap until it
//! came up, 1.5 keep-alive periods later: a client publishing 1,000 times a second with an
//! hour's keep-alive would pile up millions of stale entries. So a later deadline is not filed
//! at all. The earlier one fires, the session finds nothing due (its own checks compare with
//! the clock), and its next deadline is filed then. Only a deadline earlier than the filed one
//! is filed at once, which leaves the filed one stale; the endpoint skips stale entries by
//! comparing them with the entry's [`Filed`] deadline.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use crate::outbox_watch::ClientKey;

/// The deadline a session has in the heap, the one that counts for it; `None` for none.
pub(crate) type Filed = Option<Instant>;

/// Deadlines of all sessions, earliest first.
#[derive(Default)]
pub(crate) struct Deadlines {
    heap: BinaryHeap<Reverse<(Instant, ClientKey)>>,
}

impl Deadlines {
    /// Files `next` for `key` if it comes before `filed`, the deadline already filed for it
    /// (or nothing is filed); `filed` then becomes `next`.
    pub(crate) fn file(&mut self, key: ClientKey, filed: &mut Filed, next: Option<Instant>) {
        let Some(at) = next else { return };
        if filed.is_none_or(|filed| at < filed) {
            *filed = Some(at);
            self.heap.push(Reverse((at, key)));
        }
    }

    /// The earliest deadline, stale or not.
    pub(crate) fn earliest(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// Moves every deadline at or before `now` into `due`, earliest first.
    pub(crate) fn take_due(&mut self, now: Instant, due: &mut Vec<(Instant, ClientKey)>) {
        while let Some(&Reverse((at, key))) = self.heap.peek() {
            if at > now {
                break;
            }
            self.heap.pop();
            due.push((at, key));
        }
    }

    /// Entries in the heap, stale ones included.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Replaces the heap by the sessions' filed deadlines, dropping the stale entries.
    pub(crate) fn rebuild(&mut self, filed: impl Iterator<Item = (Instant, ClientKey)>) {
        self.heap = filed.map(Reverse).collect();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_deadline_that_moves_later_is_not_filed_again() {
        let start = Instant::now();
        let mut deadlines = Deadlines::default();
        let mut filed = None;
        for n in 0..100_000u64 {
            deadlines.file(7, &mut filed, Some(start + Duration::from_millis(90_000 + n)));
        }
        assert_eq!(deadlines.len(), 1, "one entry, whatever the number of moves");
        assert_eq!(filed, Some(start + Duration::from_millis(90_000)));
        assert_eq!(deadlines.earliest(), filed);
    }

    #[test]
    fn an_earlier_deadline_is_filed_and_the_one_it_replaces_is_left_stale() {
        let start = Instant::now();
        let (late, early) = (start + Duration::from_secs(60), start + Duration::from_secs(5));
        let mut deadlines = Deadlines::default();
        let mut filed = None;
        deadlines.file(1, &mut filed, Some(late));
        deadlines.file(1, &mut filed, Some(early));
        deadlines.file(1, &mut filed, None);
        assert_eq!(filed, Some(early), "nothing to file leaves the filed deadline");
        let mut due = Vec::new();
        deadlines.take_due(start + Duration::from_secs(4), &mut due);
        assert!(due.is_empty());
        deadlines.take_due(late, &mut due);
        assert_eq!(due, [(early, 1), (late, 1)], "earliest first; the endpoint skips the stale one");
        assert_eq!(deadlines.len(), 0);
    }

    #[test]
    fn a_rebuild_keeps_only_what_is_filed() {
        let start = Instant::now();
        let mut deadlines = Deadlines::default();
        let mut filed = [None, None];
        for (key, filed) in filed.iter_mut().enumerate() {
            for secs in [30, 20, 10] {
                deadlines.file(key as ClientKey, filed, Some(start + Duration::from_secs(secs)));
            }
        }
        assert_eq!(deadlines.len(), 6);
        deadlines.rebuild(filed.iter().enumerate().filter_map(|(key, f)| f.map(|at| (at, key as ClientKey))));
        assert_eq!(deadlines.len(), 2);
        assert_eq!(deadlines.earliest(), Some(start + Duration::from_secs(10)));
    }
}
