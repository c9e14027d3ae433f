//! Loop detection, the second line of defence behind [`crate::allow`]: every push carries a
//! header naming this endpoint instance (a random id per process start) and the subscription
//! it serves. A request that arrives carrying this instance's own mark was sent by this broker
//! to itself, through something the subscribe-time check cannot see through (a reverse proxy,
//! a NAT, a port forward, a name that resolved elsewhere then). It is refused with a SOAP
//! fault, counted as `loop`, and the subscription that sent it is removed, with one warning.
//!
//! Loops through another broker (this one → another → back) are not caught here: the other
//! broker sends its own pushes, without this mark.

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use tolk_core::{CloseReason, DropReason, Protocol};
use tracing::warn;
use wsn_xml::Request;

use crate::endpoint::Endpoint;
use crate::fault::{Refusal, shorten};
use crate::ids::IdSource;
use crate::subscription::Consumer;

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

impl Endpoint {
    /// Refuses a request this broker sent to itself: counts what it carried as `loop`, removes
    /// the subscription that sent it (warning once, since a removal happens once), and returns
    /// the fault for the sender, which is this broker's own push task.
    pub(crate) fn refuse_returned_push(&self, tag: u64, request: &Request) -> Refusal {
        let messages = match request {
            Request::Notify(messages) => messages.len(),
            _ => 1,
        };
        self.router.metrics().protocol(Protocol::Wsn).dropped(DropReason::Loop, messages as u64);
        if let Some(subscription) = self.registry.subscription_by_tag(tag)
            && self.registry.remove_subscription(&subscription.id, CloseReason::ProtocolError).is_some()
        {
            let consumer = match &subscription.consumer {
                Consumer::Push { uri, .. } => shorten(&uri.to_string()),
                Consumer::PullPoint(pp) => pp.id.clone(),
            };
            warn!(
                subscription = %subscription.id,
                %consumer,
                "notification loop: the consumer address leads back to this broker; subscription removed"
            );
        }
        Refusal::sender(
            "notification loop: this broker sent this request to itself; the subscription that sent it is removed",
        )
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
