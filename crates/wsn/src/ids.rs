//! Identifiers the endpoint hands out: the last path segment of subscription and pull point
//! addresses, and `urn:uuid:` message ids for outgoing Notify.
//!
//! Subscription addresses are the only credential a WS-N client has (zeep does not echo
//! reference parameters, so the URL alone identifies the subscription), so they must not be
//! guessable from each other: each id is SipHash-1-3 of a counter under std's `RandomState`,
//! whose keys come from the operating system's random source. That is not a cryptographic
//! generator, but without the process's keys the next id cannot be predicted from earlier ones,
//! and it needs no extra dependency.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

/// Source of unpredictable ids (public for the WS-N bridge's consumer address).
pub struct IdSource {
    keys: RandomState,
    counter: AtomicU64,
}

impl IdSource {
    /// A source with fresh keys.
    #[allow(clippy::new_without_default, reason = "each source has keys of its own; a default would hide that")]
    pub fn new() -> Self {
        IdSource { keys: RandomState::new(), counter: AtomicU64::new(1) }
    }

    fn pair(&self) -> (u64, u64) {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        (self.keys.hash_one((n, 0u8)), self.keys.hash_one((n, 1u8)))
    }

    /// 128 bits as 32 lowercase hex digits: safe in a URL path segment.
    pub fn resource_id(&self) -> String {
        let (a, b) = self.pair();
        format!("{a:016x}{b:016x}")
    }

    /// A random (version 4 layout) UUID as a `urn:uuid:` URI, for `wsa:MessageID`.
    pub(crate) fn message_id(&self) -> String {
        let (a, b) = self.pair();
        let a = (a & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_4000;
        let b = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
        format!(
            "urn:uuid:{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xffff,
            b >> 48,
            b & 0xffff_ffff_ffff
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_and_url_safe() {
        let ids = IdSource::new();
        let a = ids.resource_id();
        let b = ids.resource_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        let m = ids.message_id();
        assert_eq!(m.len(), "urn:uuid:".len() + 36);
        assert_eq!(&m[23..24], "4", "version nibble: {m}");
    }
}
