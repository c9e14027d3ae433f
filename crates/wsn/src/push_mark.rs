//! The mark every push carries (a header naming this endpoint instance, a random id per
//! process start, and the subscription it serves), so that a push arriving back at this broker
//! can be recognised as a loop (`loopmark.rs`).

use axum::http::{HeaderMap, HeaderName, HeaderValue};

use crate::ids::IdSource;

/// The header carrying the mark: `<instance id>/<subscription tag>`.
pub(crate) const HEADER: HeaderName = HeaderName::from_static("tolk-push-origin");

/// This endpoint instance's mark.
pub(crate) struct LoopMark {
    instance: String,
}

impl LoopMark {
    /// A fresh, unpredictable instance id (so another broker's pushes never look like ours).
    pub(crate) fn new(ids: &IdSource) -> Self {
        LoopMark { instance: ids.resource_id() }
    }

    /// The header value for the pushes of the subscription with core tag `tag`.
    pub(crate) fn value(&self, tag: u64) -> HeaderValue {
        HeaderValue::try_from(format!("{}/{tag}", self.instance))
            .expect("hex digits, '/' and decimal digits are valid header characters")
    }

    /// The subscription tag, when `headers` carry this instance's own mark.
    pub(crate) fn returned_tag(&self, headers: &HeaderMap) -> Option<u64> {
        let (instance, tag) = headers.get(&HEADER)?.to_str().ok()?.split_once('/')?;
        if instance == self.instance { tag.parse().ok() } else { None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_instances_mark_is_recognised() {
        let ids = IdSource::new();
        let (ours, other) = (LoopMark::new(&ids), LoopMark::new(&ids));
        let mut headers = HeaderMap::new();
        assert_eq!(ours.returned_tag(&headers), None);
        headers.insert(HEADER, ours.value(42));
        assert_eq!(ours.returned_tag(&headers), Some(42));
        assert_eq!(other.returned_tag(&headers), None);
        headers.insert(HEADER, HeaderValue::from_static("garbage"));
        assert_eq!(ours.returned_tag(&headers), None);
    }
}
