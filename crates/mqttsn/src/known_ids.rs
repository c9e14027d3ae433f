//! The registered topic ids one client knows, so that a PUBLISH to it needs no REGISTER first.
//!
//! A sorted `Vec<u16>`: two bytes an id, nothing for a client that knows none, and ids come
//! from the gateway's one registry (`max_topic_ids`, at most 65,534), which bounds it. A
//! wildcard subscriber may come to know every id in the registry; forgetting some would cost a
//! REGISTER round trip for each message on them, which at 10,000 topics is every message.

/// The set of ids, kept sorted for binary search.
#[derive(Debug, Default)]
pub(crate) struct KnownIds(Vec<u16>);

impl KnownIds {
    /// Whether the client knows `id`.
    pub(crate) fn contains(&self, id: u16) -> bool {
        self.0.binary_search(&id).is_ok()
    }

    /// Records that the client knows `id`. Ids are handed out in rising order, so this is
    /// usually a push at the end.
    pub(crate) fn insert(&mut self, id: u16) {
        if let Err(at) = self.0.binary_search(&id) {
            self.0.insert(at, id);
        }
    }

    /// Forgets `id`: the client said it does not know it (PUBACK 0x02).
    pub(crate) fn remove(&mut self, id: u16) {
        if let Ok(at) = self.0.binary_search(&id) {
            self.0.remove(at);
        }
    }

    /// How many ids the client knows.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_every_id_in_any_order() {
        let mut known = KnownIds::default();
        for id in (1..=10_000u16).rev().step_by(2).chain((1..=10_000u16).step_by(2)) {
            known.insert(id);
        }
        known.insert(7);
        assert_eq!(known.len(), 10_000);
        assert!((1..=10_000).all(|id| known.contains(id)));
        assert!(!known.contains(10_001));
        known.remove(5_000);
        assert!(!known.contains(5_000) && known.contains(4_999) && known.len() == 9_999);
    }
}
