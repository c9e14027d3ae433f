//! One connection's subscriptions (spec "SUBSCRIBE" / "UNSUBSCRIBE"): the client's ids, the
//! tags the core echoes in deliveries, ack modes, and what each subscription reads from. The
//! calls into the router live in the session; this table only keeps the books, bounded.

use std::collections::HashMap;
use std::sync::Arc;

use stomp_codec::Utf8Bytes;
use tolk_core::Queue;

use crate::error::StompError;

/// How a subscription's messages are acknowledged (spec "SUBSCRIBE" `ack` header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckMode {
    /// Written = acknowledged.
    Auto,
    /// ACK/NACK are cumulative: they settle the named message and every earlier unsettled
    /// message of the same subscription.
    Client,
    /// ACK/NACK settle exactly the named message.
    ClientIndividual,
}

impl AckMode {
    /// Reads the `ack` header; absent means `auto`.
    pub fn parse(value: Option<&str>) -> Result<AckMode, StompError> {
        match value {
            None | Some("auto") => Ok(AckMode::Auto),
            Some("client") => Ok(AckMode::Client),
            Some("client-individual") => Ok(AckMode::ClientIndividual),
            Some(other) => Err(StompError::protocol(format!(
                "unsupported ack mode '{}': use auto, client or client-individual",
                other.chars().take(64).collect::<String>()
            ))),
        }
    }

    /// Whether the client must ACK this subscription's messages.
    pub fn is_explicit(self) -> bool {
        self != AckMode::Auto
    }
}

/// SUBSCRIBE headers of other brokers' extensions that would change what is delivered. Ignoring
/// them would silently deliver something else than asked, so they are refused.
const UNSUPPORTED: &[(&str, Option<&str>, &str)] = &[
    ("selector", None, "message selectors are not supported"),
    ("activemq.subscriptionName", None, "durable topic subscriptions are not supported: use a /queue/"),
    ("durable", Some("true"), "durable topic subscriptions are not supported: use a /queue/"),
];

/// Refuses SUBSCRIBE frames that ask for an extension tolk does not implement.
pub(crate) fn check_supported(frame: &stomp_codec::Frame) -> Result<(), StompError> {
    for (name, value, why) in UNSUPPORTED {
        if let Some(found) = frame.header(name)
            && value.is_none_or(|v| found.eq_ignore_ascii_case(v))
        {
            return Err(StompError::protocol(format!("SUBSCRIBE header '{name}': {why}")));
        }
    }
    Ok(())
}

/// What a subscription reads from.
#[derive(Clone)]
pub(crate) enum Source {
    /// A filter in the common topic space (the router subscription's key).
    Topic(String),
    /// A queue this session consumes from.
    Queue(Arc<Queue>),
}

/// One live subscription.
#[derive(Clone)]
pub(crate) struct Subscription {
    /// The client's `id`, echoed as `subscription` in MESSAGE frames.
    pub id: Utf8Bytes,
    /// Ack mode.
    pub ack: AckMode,
    /// Where its messages come from.
    pub source: Source,
}

/// Subscriptions by client id and by core tag.
pub(crate) struct Subscriptions {
    by_tag: HashMap<u64, Subscription>,
    tag_of: HashMap<Utf8Bytes, u64>,
    next_tag: u64,
    max: usize,
}

impl Subscriptions {
    /// An empty table holding at most `max` subscriptions.
    pub fn new(max: usize) -> Self {
        Subscriptions { by_tag: HashMap::new(), tag_of: HashMap::new(), next_tag: 1, max }
    }

    /// Reserves a tag for a new subscription `id`, refusing a duplicate id (spec: the id must
    /// be unique within the connection) and a connection at its limit.
    pub fn reserve(&mut self, id: &str) -> Result<u64, StompError> {
        if self.tag_of.contains_key(id) {
            return Err(StompError::protocol(format!(
                "subscription id '{}' is already in use on this connection",
                id.chars().take(64).collect::<String>()
            )));
        }
        if self.by_tag.len() >= self.max {
            return Err(StompError::limit(format!("at most {} subscriptions per connection", self.max)));
        }
        let tag = self.next_tag;
        self.next_tag += 1;
        Ok(tag)
    }

    /// Records a subscription under the tag [`Subscriptions::reserve`] gave.
    pub fn insert(&mut self, tag: u64, subscription: Subscription) {
        self.tag_of.insert(subscription.id.clone(), tag);
        self.by_tag.insert(tag, subscription);
    }

    /// Removes the subscription with client id `id`.
    pub fn remove(&mut self, id: &str) -> Option<(u64, Subscription)> {
        let tag = self.tag_of.remove(id)?;
        self.by_tag.remove(&tag).map(|s| (tag, s))
    }

    /// The subscription a delivery's tag names (`None` once unsubscribed).
    pub fn get(&self, tag: u64) -> Option<&Subscription> {
        self.by_tag.get(&tag)
    }

    /// Number of subscriptions.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_tag.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(id: &str) -> Subscription {
        Subscription { id: id.into(), ack: AckMode::Auto, source: Source::Topic("t".into()) }
    }

    #[test]
    fn ids_are_unique_and_bounded() {
        let mut subs = Subscriptions::new(2);
        let a = subs.reserve("a").unwrap();
        subs.insert(a, sub("a"));
        assert!(subs.reserve("a").is_err());
        let b = subs.reserve("b").unwrap();
        assert_ne!(a, b);
        subs.insert(b, sub("b"));
        assert_eq!(subs.reserve("c").unwrap_err().reason, tolk_core::CloseReason::LimitExceeded);
        assert_eq!(subs.remove("a").map(|(t, _)| t), Some(a));
        assert!(subs.get(a).is_none());
        assert!(subs.reserve("a").is_ok());
        assert_eq!(subs.len(), 1);
    }

    #[test]
    fn extensions_that_change_delivery_are_refused() {
        use stomp_codec::{Command, Frame};
        let plain = Frame::new(Command::Subscribe).with_header("durable", "false");
        assert!(check_supported(&plain).is_ok());
        let selector = Frame::new(Command::Subscribe).with_header("selector", "a > 1");
        assert!(check_supported(&selector).unwrap_err().message.contains("selectors"));
        let durable = Frame::new(Command::Subscribe).with_header("durable", "true");
        assert!(check_supported(&durable).is_err());
    }

    #[test]
    fn ack_modes() {
        assert_eq!(AckMode::parse(None).unwrap(), AckMode::Auto);
        assert_eq!(AckMode::parse(Some("client")).unwrap(), AckMode::Client);
        assert_eq!(AckMode::parse(Some("client-individual")).unwrap(), AckMode::ClientIndividual);
        assert!(AckMode::parse(Some("Client")).is_err());
    }
}
