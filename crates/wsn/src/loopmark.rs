//! Loop detection, the second line of defence behind [`crate::allow`]: every push carries a
//! header naming this endpoint instance and the subscription it serves ([`crate::push_mark`]).
//! A request that arrives carrying this instance's own mark was sent by this broker to itself,
//! through something the subscribe-time check cannot see through (a reverse proxy, a NAT, a
//! port forward, a name that resolved elsewhere then). It is refused with a SOAP
//! fault, counted as `loop`, and the subscription that sent it is removed, with one warning.
//!
//! Loops through another broker (this one → another → back) are not caught here: the other
//! broker sends its own pushes, without this mark.

use tolk_core::{CloseReason, DropReason, Protocol};
use tracing::warn;
use wsn_xml::Request;

use crate::endpoint::Endpoint;
use crate::fault::{Refusal, shorten};
use crate::subscription::Consumer;

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
