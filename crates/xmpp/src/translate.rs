//! Core messages ↔ XEP-0060 items (docs/translation.md, "XMPP").
//!
//! An item's payload is one XML element, chosen as for WS-Notification
//! ([`XmlElement::for_payload`]): an XML payload is embedded as its root element, text and
//! binary go in tolk's payload wrapper (`encoding="text"` or `"base64"`, with the content type).
//! The same wrapper is undone on the way in, so a payload that crosses XMPP comes back byte for
//! byte. The content type and user headers also travel as XEP-0131 (SHIM) headers of the
//! notification.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use quick_xml::escape::escape;
use tolk_core::{Message, Origin, QoS};
use wsn_xml::{Limits, Payload, PayloadForm, XmlElement};
use xmpp_codec::Element;

use crate::pubsub::EVENT_NS;

/// XEP-0131 headers.
const SHIM_NS: &str = "http://jabber.org/protocol/shim";

/// The core message an item published to `node` becomes.
pub(crate) fn message_from_item(
    node: String,
    item_id: &str,
    payload: Option<&Element>,
    origin: Origin,
    received_at: Instant,
) -> Message {
    let mut message = Message::received(node, Bytes::new(), origin, received_at);
    message.qos = QoS::AtLeastOnce;
    message.props.message_id = Some(item_id.to_owned());
    if let Some(element) = payload {
        // The tolk wrapper is undone straight from the parsed stanza; any other element is the
        // payload, written as a standalone document (it declares its own namespaces).
        let wrapped = element.elements().next().is_none() && element.is(wsn_xml::PAYLOAD_WRAPPER, wsn_xml::ns::TOLK);
        let unwrapped =
            wrapped.then(|| Payload::unwrap(element.attr("encoding"), element.attr("contentType"), &element.text()));
        match unwrapped.flatten() {
            Some(payload) => {
                message.payload = payload.bytes;
                message.props.content_type = payload.content_type;
                message.props.payload_utf8 = (payload.form == PayloadForm::Text).then_some(true);
            }
            None => {
                message.payload = Bytes::from(element.to_bytes());
                message.props.content_type = Some(wsn_xml::XML_CONTENT_TYPE.to_owned());
            }
        }
    }
    message
}

/// Where a notification goes and what it is called.
pub(crate) struct Envelope<'a> {
    /// The service's JID.
    pub from: &'a str,
    /// The subscriber's full JID.
    pub to: &'a str,
    /// The stanza id.
    pub id: u64,
    /// The item id: the publisher's, or one made up for messages from other protocols.
    pub item_id: &'a str,
}

/// Writes the `<message/>` that notifies a subscriber of `message`: an item with its payload,
/// or, for an empty retained message (a node purged here, or a retained message cleared by an
/// MQTT client), a `<purge/>` notification.
pub(crate) fn write_event(out: &mut Vec<u8>, message: &Message, envelope: &Envelope<'_>, limits: &Limits) {
    let Envelope { from, to, id, item_id } = envelope;
    let node = escape(&*message.topic);
    out.extend_from_slice(
        format!(
            "<message from='{}' to='{}' id='ev{id}' type='headline'><event xmlns='{EVENT_NS}'>",
            escape(*from),
            escape(*to)
        )
        .as_bytes(),
    );
    if message.payload.is_empty() && message.retain {
        out.extend_from_slice(format!("<purge node='{node}'/></event></message>").as_bytes());
        return;
    }
    out.extend_from_slice(format!("<items node='{node}'><item id='{}'", escape(*item_id)).as_bytes());
    if message.payload.is_empty() {
        out.extend_from_slice(b"/>");
    } else {
        out.push(b'>');
        XmlElement::for_payload(&message.payload, message.props.content_type.as_deref(), limits).write_embedded(out);
        out.extend_from_slice(b"</item>");
    }
    out.extend_from_slice(b"</items></event>");
    write_headers(out, message);
    out.extend_from_slice(b"</message>");
}

/// The content type and user headers as SHIM headers, when there are any.
fn write_headers(out: &mut Vec<u8>, message: &Message) {
    let props = &message.props;
    let content_type = props.content_type.as_deref().map(|ct| ("Content-Type", ct));
    let user = props.user.iter().map(|(name, value)| (name.as_str(), value.as_str()));
    let mut headers = content_type.into_iter().chain(user).filter(|(_, value)| representable(value)).peekable();
    if headers.peek().is_none() {
        return;
    }
    out.extend_from_slice(format!("<headers xmlns='{SHIM_NS}'>").as_bytes());
    for (name, value) in headers {
        out.extend_from_slice(format!("<header name='{}'>{}</header>", escape(name), escape(value)).as_bytes());
    }
    out.extend_from_slice(b"</headers>");
}

/// Whether XML 1.0 can carry `text` (no control characters other than tab and line breaks).
fn representable(text: &str) -> bool {
    !text.chars().any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
}

/// The retained messages of `node`, as the `<items/>` of an items request.
pub(crate) fn write_items(out: &mut Vec<u8>, node: &str, retained: &[Arc<Message>], limits: &Limits) {
    out.extend_from_slice(format!("<items node='{}'>", escape(node)).as_bytes());
    for message in retained {
        let id = message.props.message_id.as_deref().unwrap_or("current");
        out.extend_from_slice(format!("<item id='{}'", escape(id)).as_bytes());
        if message.payload.is_empty() {
            out.extend_from_slice(b"/>");
            continue;
        }
        out.push(b'>');
        XmlElement::for_payload(&message.payload, message.props.content_type.as_deref(), limits).write_embedded(out);
        out.extend_from_slice(b"</item>");
    }
    out.extend_from_slice(b"</items>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use tolk_core::{Protocol, SessionId};

    fn origin() -> Origin {
        Origin { protocol: Protocol::Mqtt, session: SessionId(1), client_id: "c".into() }
    }

    fn event(message: &Message) -> String {
        let mut out = Vec::new();
        let envelope = Envelope { from: "pubsub.d", to: "a@d/r", id: 3, item_id: "i&1" };
        write_event(&mut out, message, &envelope, &Limits::default());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn payloads_become_items_and_come_back_byte_for_byte() {
        let limits = Limits::default();
        let mut text = Message::new("a/b", "21.5 < 22", origin());
        text.props.content_type = Some("text/plain".into());
        text.props.user = vec![("Site-Id".into(), "s1".into())];
        let xml = event(&text);
        assert_eq!(
            xml,
            "<message from='pubsub.d' to='a@d/r' id='ev3' type='headline'><event xmlns='http://jabber.org/protocol/pubsub#event'>\
             <items node='a/b'><item id='i&amp;1'><tolk:Payload xmlns:tolk=\"urn:tolk:wsn:1\" encoding=\"text\" \
             contentType=\"text/plain\" xmlns=\"\">21.5 &lt; 22</tolk:Payload></item></items></event>\
             <headers xmlns='http://jabber.org/protocol/shim'><header name='Content-Type'>text/plain</header>\
             <header name='Site-Id'>s1</header></headers></message>"
        );
        let wrapper = XmlElement::for_payload(b"21.5 < 22", Some("text/plain"), &limits);
        let element = xmpp_codec::parse_document(wrapper.as_bytes(), &xmpp_codec::Limits::default()).unwrap();
        let back = message_from_item("a/b".into(), "i", Some(&element), origin(), Instant::now());
        assert_eq!((&back.payload[..], back.props.content_type.as_deref()), (&b"21.5 < 22"[..], Some("text/plain")));

        let mut cleared = Message::new("a/b", "", origin());
        cleared.retain = true;
        assert!(event(&cleared).contains("<purge node='a/b'/></event></message>"));
        let empty = Message::new("a/b", "", origin());
        assert!(event(&empty).contains("<item id='i&amp;1'/></items>"));
    }
}
