//! Which topic filters this node's own subscribers want, for the cluster: it subscribes in
//! NATS to these and nothing else, so a node nobody subscribes on receives nothing.
//!
//! The router counts each filter's subscriptions and queue bindings as they come and go,
//! leaving out one owner (the cluster's own outgoing queue, bound to everything), and wakes
//! the watcher when a filter's count rises from or falls to zero.

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;
use tokio::sync::Notify;

use crate::message::SessionId;

/// The watcher's side: wait for a change, then read [`crate::Router::interest`].
#[derive(Clone)]
pub struct InterestWatch {
    changed: Arc<Notify>,
}

impl InterestWatch {
    /// Resolves once the set of wanted filters may have changed since the last call (changes
    /// in between are folded into one wake-up).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}

/// The counts, kept under the router's subscription lock.
pub(crate) struct Interest {
    counts: HashMap<String, usize, RandomState>,
    ignore: SessionId,
    changed: Arc<Notify>,
}

impl Interest {
    /// Counts every `(owner, filter)` in `existing`, except `ignore`'s.
    pub(crate) fn new<'a>(
        ignore: SessionId,
        existing: impl Iterator<Item = (SessionId, &'a str)>,
    ) -> (Interest, InterestWatch) {
        let changed = Arc::new(Notify::new());
        let mut interest = Interest { counts: HashMap::default(), ignore, changed: changed.clone() };
        for (owner, filter) in existing {
            interest.added(owner, filter);
        }
        changed.notify_one();
        (interest, InterestWatch { changed })
    }

    pub(crate) fn added(&mut self, owner: SessionId, filter: &str) {
        if owner == self.ignore {
            return;
        }
        let count = self.counts.entry(filter.to_owned()).or_default();
        *count += 1;
        if *count == 1 {
            self.changed.notify_one();
        }
    }

    pub(crate) fn removed(&mut self, owner: SessionId, filter: &str) {
        if owner == self.ignore {
            return;
        }
        let Some(count) = self.counts.get_mut(filter) else { return };
        *count -= 1;
        if *count == 0 {
            self.counts.remove(filter);
            self.changed.notify_one();
        }
    }

    /// The filters with at least one subscriber, sorted.
    pub(crate) fn filters(&self) -> Vec<String> {
        let mut filters: Vec<String> = self.counts.keys().cloned().collect();
        filters.sort_unstable();
        filters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_rise_and_fall_per_filter_and_leave_out_the_ignored_owner() {
        let (mut interest, _watch) =
            Interest::new(SessionId(9), [(SessionId(1), "a/#"), (SessionId(9), "#")].into_iter());
        assert_eq!(interest.filters(), ["a/#"]);
        interest.added(SessionId(2), "a/#");
        interest.added(SessionId(2), "b");
        interest.removed(SessionId(1), "a/#");
        assert_eq!(interest.filters(), ["a/#", "b"]);
        interest.removed(SessionId(2), "a/#");
        interest.removed(SessionId(9), "#");
        assert_eq!(interest.filters(), ["b"]);
    }
}
