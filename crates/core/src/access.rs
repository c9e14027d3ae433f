//! What a logged-in client may do: the one access-control seam for every protocol.
//!
//! The broker's [`crate::auth::Authenticator`] hands each session an [`Access`] when its client
//! logs in (none when no access-control list is configured). The core [`crate::Session`] then
//! asks it before every subscribe, publish and queue operation, and the router asks it again
//! for each message a subscription would deliver, so that a `deny` rule inside a wider `read`
//! rule holds. Front ends only turn a refusal into their protocol's error; none of them reads
//! the rules.

use std::sync::Arc;

use tolk_metrics::{Denial, Metrics, Protocol};

use crate::topic::TopicError;

/// A named resource outside the topic space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource<'a> {
    /// A named queue: an AMQP queue, a STOMP `/queue/` destination, an MQTT `$share` group
    /// (named `$share/GROUP/FILTER`).
    Queue(&'a str),
    /// An AMQP exchange other than `amq.topic` (whose routing keys are topics).
    Exchange(&'a str),
}

/// What an operation on a [`Resource`] needs, in RabbitMQ's three kinds of permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Right {
    /// Taking messages out: consume, get, purge; binding an exchange as a source.
    Read,
    /// Putting messages in: send to a queue, publish to an exchange, bind into a queue.
    Write,
    /// Creating and deleting it.
    Configure,
}

/// One client's rights, decided from its user name and client id. Implementations re-read
/// their rules when the files reload, so a SIGHUP applies to connected clients too.
pub trait Access: std::fmt::Debug + Send + Sync + 'static {
    /// May it publish to `topic`?
    fn may_publish(&self, topic: &str) -> bool;
    /// May it subscribe to `filter`? True only when every topic the filter matches is readable
    /// by some rule, so wildcards cannot reach past the client's rights; a `deny` rule inside
    /// the filter still withholds those topics ([`Access::may_read`]).
    fn may_subscribe(&self, filter: &str) -> bool;
    /// May a message on `topic` be delivered to it?
    fn may_read(&self, topic: &str) -> bool;
    /// May it do what `right` stands for to `resource`?
    fn may_use(&self, resource: Resource<'_>, right: Right) -> bool;
}

/// A session's rights: `None` means unrestricted (no access-control list configured).
pub type Rights = Option<Arc<dyn Access>>;

/// Whether `rights` allow what `ask` checks (always, without an access list); a refusal is
/// counted as `what` against `protocol`. The one place where a check is made and counted, for
/// the core session and for front ends that answer requests without one (WS-N).
pub fn permits(
    rights: &Rights,
    metrics: &Metrics,
    protocol: Protocol,
    what: Denial,
    ask: impl FnOnce(&dyn Access) -> bool,
) -> bool {
    let Some(access) = rights else { return true };
    let allowed = ask(access.as_ref());
    if !allowed {
        metrics.protocol(protocol).denied(what);
    }
    allowed
}

/// A subscription's delivery check: whose rights, and which protocol to count a withheld
/// message against.
#[derive(Clone)]
pub struct ReadCheck {
    /// The subscriber's rights.
    pub access: Arc<dyn Access>,
    /// The subscriber's protocol.
    pub protocol: Protocol,
}

/// Why a subscription or binding was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubscribeError {
    /// The filter is invalid.
    #[error(transparent)]
    Topic(#[from] TopicError),
    /// The access-control list does not let this client read everything the filter matches.
    #[error("not authorized to subscribe to '{0}'")]
    NotAuthorized(String),
}
