//! XEP-0030 service discovery: what the server and its publish-subscribe service say they are.

use xmpp_codec::Element;

use crate::pubsub;

/// disco#info.
pub(crate) const INFO_NS: &str = "http://jabber.org/protocol/disco#info";
/// disco#items.
pub(crate) const ITEMS_NS: &str = "http://jabber.org/protocol/disco#items";

fn identity(category: &str, kind: &str) -> Element {
    Element::new("identity", INFO_NS).with_attr("category", category).with_attr("type", kind)
}

fn feature(var: &str) -> Element {
    Element::new("feature", INFO_NS).with_attr("var", var)
}

/// The server: an IM server that answers pings and has a pubsub service among its items.
pub(crate) fn server_info() -> Element {
    Element::new("query", INFO_NS)
        .with_child(identity("server", "im").with_attr("name", "tolk"))
        .with_child(feature(INFO_NS))
        .with_child(feature(ITEMS_NS))
        .with_child(feature("urn:xmpp:ping"))
}

/// The server's items: the pubsub service.
pub(crate) fn server_items(pubsub_jid: &str) -> Element {
    let item = Element::new("item", ITEMS_NS).with_attr("jid", pubsub_jid).with_attr("name", "Publish-Subscribe");
    Element::new("query", ITEMS_NS).with_child(item)
}

/// The pubsub service (no `node`), or one of its nodes: every topic is a leaf node.
pub(crate) fn service_info(node: Option<&str>) -> Element {
    let mut query = Element::new("query", INFO_NS);
    match node {
        Some(node) => {
            query.set_attr("node", node);
            query.push_child(identity("pubsub", "leaf"));
        }
        None => query.push_child(identity("pubsub", "service").with_attr("name", "tolk topics")),
    }
    query.push_child(feature(INFO_NS));
    query.push_child(feature(ITEMS_NS));
    query.push_child(feature(pubsub::NS));
    for name in pubsub::FEATURES {
        query.push_child(feature(&format!("{}#{name}", pubsub::NS)));
    }
    query
}
