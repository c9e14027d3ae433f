//! XEP-0060 requests as this service understands them, and the elements of its answers. Pure:
//! the session carries each request out against the core.
//!
//! A node is a topic of the common topic space, created when first used; a subscription's node
//! may be a topic filter (`a/+/c`, `a/#`), and its notifications then name the topic each item
//! was published to.

use xmpp_codec::Element;

use crate::stanza::{AppCondition, StanzaError};

/// The publish-subscribe namespace.
pub(crate) const NS: &str = "http://jabber.org/protocol/pubsub";
/// Owner requests (purge, delete).
pub(crate) const OWNER_NS: &str = "http://jabber.org/protocol/pubsub#owner";
/// Event notifications.
pub(crate) const EVENT_NS: &str = "http://jabber.org/protocol/pubsub#event";
/// Application error conditions.
const ERRORS_NS: &str = "http://jabber.org/protocol/pubsub#errors";

/// One pubsub request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// Publish an item (its payload element, if any) to a node.
    Publish { node: String, item_id: Option<String>, payload: Option<Element> },
    /// Subscribe `jid` to a node or filter.
    Subscribe { node: String, jid: String },
    /// End a subscription.
    Unsubscribe { node: String, jid: String, subid: Option<String> },
    /// The node's items: its last one, the retained message.
    Items { node: String },
    /// This client's subscriptions, on one node or all.
    Subscriptions { node: Option<String> },
    /// Create a node: every node exists already.
    Create { node: String },
    /// Remove the node's items.
    Purge { node: String },
    /// Delete the node: its item goes; the topic stays usable.
    Delete { node: String },
}

/// A request this service does not implement: `feature-not-implemented` naming it.
fn unsupported(feature: &'static str) -> StanzaError {
    let mut error = StanzaError::new("cancel", "feature-not-implemented");
    error.app = Some(AppCondition { name: "unsupported", ns: ERRORS_NS, feature: Some(feature) });
    error
}

/// A request without the `node` it needs.
fn node_required() -> StanzaError {
    StanzaError::new("modify", "bad-request").with_app("nodeid-required", ERRORS_NS)
}

fn node_of(element: &Element) -> Result<String, StanzaError> {
    match element.attr("node") {
        Some(node) if !node.is_empty() => Ok(node.to_owned()),
        _ => Err(node_required()),
    }
}

/// Reads the `<pubsub/>` child of an `iq` of `kind` (`get` or `set`).
pub(crate) fn parse(kind: &str, pubsub: &Element) -> Result<Request, StanzaError> {
    let owner = pubsub.ns == OWNER_NS;
    let mut children = pubsub.elements();
    let Some(verb) = children.next() else {
        return Err(StanzaError::bad_request("an empty pubsub request"));
    };
    let request = match (owner, kind, verb.name.as_str()) {
        (false, "set", "publish") => {
            if pubsub.child("publish-options", NS).is_some() {
                return Err(unsupported("publish-options"));
            }
            let mut items = verb.elements().filter(|e| e.is("item", NS));
            let item = items.next();
            if items.next().is_some() {
                return Err(StanzaError::bad_request("one item per publish"));
            }
            let payload = item.and_then(|item| item.elements().next().cloned());
            let item_id = item.and_then(|item| item.attr("id")).filter(|id| !id.is_empty()).map(str::to_owned);
            Request::Publish { node: node_of(verb)?, item_id, payload }
        }
        (false, "set", "subscribe") => {
            if pubsub.child("options", NS).is_some() {
                return Err(unsupported("subscription-options"));
            }
            let jid = verb
                .attr("jid")
                .ok_or_else(|| StanzaError::new("modify", "bad-request").with_app("invalid-jid", ERRORS_NS))?;
            Request::Subscribe { node: node_of(verb)?, jid: jid.to_owned() }
        }
        (false, "set", "unsubscribe") => Request::Unsubscribe {
            node: node_of(verb)?,
            jid: verb.attr("jid").unwrap_or_default().to_owned(),
            subid: verb.attr("subid").map(str::to_owned),
        },
        (false, "set", "create") => Request::Create { node: node_of(verb).map_err(|_| unsupported("instant-nodes"))? },
        (false, "get", "items") => Request::Items { node: node_of(verb)? },
        (false, "get", "subscriptions") => Request::Subscriptions { node: verb.attr("node").map(str::to_owned) },
        (true, "set", "purge") => Request::Purge { node: node_of(verb)? },
        (true, "set", "delete") => Request::Delete { node: node_of(verb)? },
        (false, _, "affiliations") => return Err(unsupported("retrieve-affiliations")),
        (false, _, "default" | "configure") | (true, _, "configure" | "default") => {
            return Err(unsupported("config-node"));
        }
        (true, _, "subscriptions" | "affiliations") => return Err(unsupported("manage-subscriptions")),
        _ => return Err(StanzaError::bad_request(format!("pubsub request '{}' of type {kind}", verb.name))),
    };
    if let Request::Create { .. } = &request
        && pubsub.child("configure", NS).is_some_and(|c| c.elements().next().is_some())
    {
        return Err(unsupported("config-node"));
    }
    Ok(request)
}

/// `<pubsub><publish node><item id/></publish></pubsub>`: the answer to a publish.
pub(crate) fn published(node: &str, item_id: &str) -> Element {
    let item = Element::new("item", NS).with_attr("id", item_id);
    Element::new("pubsub", NS).with_child(Element::new("publish", NS).with_attr("node", node).with_child(item))
}

/// One `<subscription/>` element.
pub(crate) fn subscription(node: &str, jid: &str, subid: &str, state: &str) -> Element {
    Element::new("subscription", NS)
        .with_attr("node", node)
        .with_attr("jid", jid)
        .with_attr("subid", subid)
        .with_attr("subscription", state)
}

/// The errors of XEP-0060 that the session raises.
pub(crate) mod errors {
    use super::*;

    /// The access list refuses this.
    pub fn forbidden() -> StanzaError {
        StanzaError::new("auth", "forbidden")
    }

    /// Subscribing someone other than oneself (XEP-0060 §6.1.3.1).
    pub fn invalid_jid() -> StanzaError {
        StanzaError::new("modify", "bad-request").with_app("invalid-jid", ERRORS_NS)
    }

    /// A node name that is not a topic (or filter) of the topic space.
    pub fn bad_node(why: impl std::fmt::Display) -> StanzaError {
        StanzaError::new("cancel", "not-acceptable").with_text(format!("not a topic: {why}"))
    }

    /// Unsubscribing without a subscription (§6.2.3.2).
    pub fn not_subscribed() -> StanzaError {
        StanzaError::new("cancel", "unexpected-request").with_app("not-subscribed", ERRORS_NS)
    }

    /// Too many subscriptions on this connection.
    pub fn too_many_subscriptions() -> StanzaError {
        StanzaError::new("wait", "policy-violation").with_app("too-many-subscriptions", ERRORS_NS)
    }

    /// A subscriber could not take an acknowledged publish.
    pub fn not_kept(why: impl Into<String>) -> StanzaError {
        StanzaError::new("wait", "resource-constraint").with_text(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pubsub(ns: &str, verb: Element) -> Element {
        Element::new("pubsub", ns).with_child(verb)
    }

    #[test]
    fn requests_are_read_with_their_nodes_and_items() {
        let entry = Element::new("entry", "http://www.w3.org/2005/Atom").with_text("hi");
        let publish = Element::new("publish", NS)
            .with_attr("node", "a/b")
            .with_child(Element::new("item", NS).with_attr("id", "i1").with_child(entry.clone()));
        assert_eq!(
            parse("set", &pubsub(NS, publish)),
            Ok(Request::Publish { node: "a/b".into(), item_id: Some("i1".into()), payload: Some(entry) })
        );
        let purge = Element::new("purge", OWNER_NS).with_attr("node", "a");
        assert_eq!(parse("set", &pubsub(OWNER_NS, purge)), Ok(Request::Purge { node: "a".into() }));
        let items = Element::new("items", NS);
        assert_eq!(parse("get", &pubsub(NS, items)).unwrap_err().condition, "bad-request");
        let affiliations = Element::new("affiliations", NS);
        assert_eq!(parse("get", &pubsub(NS, affiliations)).unwrap_err().condition, "feature-not-implemented");
    }
}
