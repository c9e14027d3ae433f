//! XEP-0030 service discovery: what the server and its publish-subscribe service say they are.
//! The answers are fixed text: nothing in them depends on the request but a node name.

use quick_xml::escape::escape;

/// disco#info.
pub(crate) const INFO_NS: &str = "http://jabber.org/protocol/disco#info";
/// disco#items.
pub(crate) const ITEMS_NS: &str = "http://jabber.org/protocol/disco#items";

/// The server: an IM server that answers pings and has a pubsub service among its items.
pub(crate) const SERVER_INFO: &str = concat!(
    "<query xmlns='http://jabber.org/protocol/disco#info'>",
    "<identity category='server' type='im' name='tolk'/>",
    "<feature var='http://jabber.org/protocol/disco#info'/>",
    "<feature var='http://jabber.org/protocol/disco#items'/>",
    "<feature var='urn:xmpp:ping'/></query>"
);

/// The pubsub features (XEP-0060 §10) after the identity of the service or a node.
const PUBSUB_FEATURES: &str = concat!(
    "<feature var='http://jabber.org/protocol/disco#info'/>",
    "<feature var='http://jabber.org/protocol/disco#items'/>",
    "<feature var='http://jabber.org/protocol/pubsub'/>",
    "<feature var='http://jabber.org/protocol/pubsub#auto-create'/>",
    "<feature var='http://jabber.org/protocol/pubsub#auto-subscribe'/>",
    "<feature var='http://jabber.org/protocol/pubsub#delete-nodes'/>",
    "<feature var='http://jabber.org/protocol/pubsub#item-ids'/>",
    "<feature var='http://jabber.org/protocol/pubsub#persistent-items'/>",
    "<feature var='http://jabber.org/protocol/pubsub#publish'/>",
    "<feature var='http://jabber.org/protocol/pubsub#purge-nodes'/>",
    "<feature var='http://jabber.org/protocol/pubsub#retrieve-items'/>",
    "<feature var='http://jabber.org/protocol/pubsub#retrieve-subscriptions'/>",
    "<feature var='http://jabber.org/protocol/pubsub#subscribe'/>"
);

/// The server's items: the pubsub service.
pub(crate) fn server_items(pubsub_jid: &str) -> String {
    format!("<query xmlns='{ITEMS_NS}'><item jid='{}' name='Publish-Subscribe'/></query>", escape(pubsub_jid))
}

/// The pubsub service (no `node`), or one of its nodes: every topic is a leaf node.
pub(crate) fn service_info(node: Option<&str>) -> String {
    match node {
        Some(node) => format!(
            "<query xmlns='{INFO_NS}' node='{}'><identity category='pubsub' type='leaf'/>{PUBSUB_FEATURES}</query>",
            escape(node)
        ),
        None => format!(
            "<query xmlns='{INFO_NS}'><identity category='pubsub' type='service' name='tolk topics'/>\
             {PUBSUB_FEATURES}</query>"
        ),
    }
}

/// The empty item list of the pubsub service: nodes are topics, not listed.
pub(crate) const SERVICE_ITEMS: &str = "<query xmlns='http://jabber.org/protocol/disco#items'/>";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_well_formed_and_name_every_feature() {
        let limits = xmpp_codec::Limits::default();
        for text in [SERVER_INFO.to_owned(), server_items("pubsub.d"), service_info(None), service_info(Some("a&b"))] {
            xmpp_codec::parse_document(text.as_bytes(), &limits).expect(&text);
        }
        let info = service_info(None);
        let features = ["publish", "subscribe", "retrieve-items", "purge-nodes", "delete-nodes", "auto-create"];
        for feature in features {
            assert!(info.contains(&format!("'http://jabber.org/protocol/pubsub#{feature}'")), "{feature}");
        }
        assert!(service_info(Some("a&b")).contains("node='a&amp;b'"));
    }
}
