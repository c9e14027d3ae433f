//! Notification messages ↔ core messages. The mapping rules live here and only here:
//!
//! - **Topic**: the Topic expression (Simple or Concrete, or a Full expression naming one
//!   topic) maps to the canonical topic through `wsn-xml` (`tns:a/b` → `a/b`; the namespace is
//!   not part of the core topic). Outgoing, the topic is written back as a Simple/Concrete
//!   expression in the namespace of the subscription filter that matched it.
//! - **Payload**: the one element in `wsnt:Message` becomes the payload as its XML bytes with
//!   content type `application/xml`; tolk's `tolk:Payload` wrapper is unwrapped to the bytes
//!   it carries (text or base64) and its `contentType`. Outgoing, a payload that is one XML
//!   element is embedded as is; anything else is wrapped, so binary payloads survive.
//! - **QoS**: Notify is fire-and-forget (at most once). The HTTP `202` means the broker routed
//!   the message, not that any consumer got it.
//! - Publishing to topics starting with `$` (the broker's own) is refused.

use std::time::Instant;

use tolk_core::{Message, Origin, QoS, topic};
use wsn_xml::{EndpointReference, FaultKind, Limits, NotificationMessage, PayloadForm, TopicExpression, XmlElement};

use crate::fault::{Refusal, shorten};
use crate::filter::TopicFilter;

/// The core message for one NotificationMessage of a Notify.
/// Public for the translation benchmarks (`benches/benches/translation.rs`).
pub fn message_from_notification(
    notification: &NotificationMessage,
    origin: &Origin,
    limits: &Limits,
    received_at: Instant,
) -> Result<Message, Refusal> {
    let expression = notification.topic.as_ref().ok_or_else(|| {
        Refusal::new(
            FaultKind::InvalidTopicExpression,
            "a NotificationMessage without a Topic cannot be routed: tolk routes by topic",
        )
    })?;
    let mapped = expression.to_topic().map_err(|e| Refusal::new(e.fault_kind(), e.to_string()))?;
    topic::validate_name(&mapped.topic).map_err(|e| {
        Refusal::new(
            FaultKind::InvalidTopicExpression,
            format!("topic {:?} is not usable: {e}", shorten(&mapped.topic)),
        )
    })?;
    if mapped.topic.starts_with('$') {
        return Err(Refusal::new(
            FaultKind::TopicNotSupported,
            format!("topic {:?}: topics starting with '$' are reserved for the broker", shorten(&mapped.topic)),
        ));
    }
    let payload = notification.message.to_payload(limits);
    let mut message = Message::received(mapped.topic, payload.bytes, origin.clone(), received_at);
    message.qos = QoS::AtMostOnce;
    message.props.content_type = payload.content_type;
    message.props.payload_utf8 = match payload.form {
        PayloadForm::Xml | PayloadForm::Text => Some(true),
        PayloadForm::Base64 => None,
    };
    Ok(message)
}

/// The element that carries a core payload inside `wsnt:Message` (or alone, for UseRaw): see
/// [`XmlElement::for_payload`] for when a payload is embedded as itself.
pub(crate) fn element_of(message: &Message, limits: &Limits) -> XmlElement {
    XmlElement::for_payload(&message.payload, message.props.content_type.as_deref(), limits)
}

/// The namespace to write a delivered topic in: that of the first filter matching it.
pub(crate) fn namespace_for<'a>(filters: &'a [TopicFilter], topic_name: &str) -> Option<&'a str> {
    filters.iter().find(|f| topic::matches(&f.filter, topic_name)).and_then(|f| f.namespace.as_deref())
}

/// The NotificationMessage for one message, or `None` when its topic has no WS-N form.
/// Public for the WS-N bridge (`bridges/wsn`) and the translation benchmarks
/// (`benches/benches/translation.rs`).
pub fn notification_of(
    message: &Message,
    subscription: Option<&EndpointReference>,
    namespace: Option<&str>,
    limits: &Limits,
) -> Option<NotificationMessage> {
    notification_on(&message.topic, message, subscription, namespace, limits)
}

/// The NotificationMessage for `message` on another topic (the WS-N bridge's remote topic).
pub fn notification_on(
    topic: &str,
    message: &Message,
    subscription: Option<&EndpointReference>,
    namespace: Option<&str>,
    limits: &Limits,
) -> Option<NotificationMessage> {
    let topic = TopicExpression::from_topic(topic, namespace).ok()?;
    Some(NotificationMessage {
        subscription_reference: subscription.cloned(),
        topic: Some(topic),
        producer_reference: None,
        message: element_of(message, limits),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tolk_core::{Protocol, SessionId};
    use wsn_xml::{Dialect, NamespaceBinding};

    fn origin() -> Origin {
        Origin { protocol: Protocol::Wsn, session: SessionId(1), client_id: "".into() }
    }

    fn notification(topic: &str, element: XmlElement) -> NotificationMessage {
        let scope = [NamespaceBinding { prefix: Some("t".into()), namespace: "urn:t".into() }];
        NotificationMessage {
            subscription_reference: None,
            topic: Some(TopicExpression::new(Dialect::Concrete, topic, &scope)),
            producer_reference: None,
            message: element,
        }
    }

    #[test]
    fn xml_and_wrapped_payloads_map_both_ways() {
        let limits = Limits::default();
        let xml = XmlElement::parse(b"<m:r xmlns:m=\"urn:m\">1</m:r>", &limits).unwrap();
        let m =
            message_from_notification(&notification("t:a/b", xml.clone()), &origin(), &limits, Instant::now()).unwrap();
        assert_eq!(m.topic, "a/b");
        assert_eq!(&m.payload[..], xml.as_bytes());
        assert_eq!(m.props.content_type.as_deref(), Some("application/xml"));
        assert_eq!(element_of(&m, &limits).as_bytes(), xml.as_bytes());

        let binary = [0u8, 1, 2, 0xff, b'<'];
        let wrapped = XmlElement::wrap_payload(&binary, Some("application/octet-stream"));
        let m = message_from_notification(&notification("t:bin", wrapped), &origin(), &limits, Instant::now()).unwrap();
        assert_eq!(&m.payload[..], &binary);
        assert_eq!(m.props.content_type.as_deref(), Some("application/octet-stream"));
        assert_eq!(&element_of(&m, &limits).to_payload(&limits).bytes[..], &binary);
    }

    #[test]
    fn markup_with_a_non_xml_content_type_is_wrapped_to_keep_it() {
        let limits = Limits::default();
        let mut m = Message::new("t", &b"<p>21.5 &amp; <b>up</b></p>"[..], origin());
        for (content_type, embedded) in [
            (None, true),
            (Some("application/xml"), true),
            (Some("Text/XML; charset=utf-8"), true),
            (Some("application/atom+xml"), false),
            (Some("image/svg+xml"), false),
            (Some("text/html; charset=utf-8"), false),
            (Some("text/plain"), false),
            (Some("xml"), false),
        ] {
            m.props.content_type = content_type.map(str::to_owned);
            let element = element_of(&m, &limits);
            assert_eq!(element.as_bytes() == &m.payload[..], embedded, "{content_type:?}: {}", element.as_str());
            let back = element.to_payload(&limits);
            assert_eq!(&back.bytes[..], &m.payload[..], "{content_type:?}");
            if !embedded {
                assert_eq!(back.content_type.as_deref(), content_type, "the content type survives");
            }
        }
    }

    #[test]
    fn refusals() {
        let limits = Limits::default();
        let el = XmlElement::wrap_payload(b"x", None);
        let mut n = notification("t:a", el.clone());
        n.topic = None;
        assert_eq!(
            message_from_notification(&n, &origin(), &limits, Instant::now()).unwrap_err().kind,
            FaultKind::InvalidTopicExpression
        );
        let n = notification("t:a/*", el.clone());
        assert_eq!(
            message_from_notification(&n, &origin(), &limits, Instant::now()).unwrap_err().kind,
            FaultKind::InvalidTopicExpression
        );
        let n = notification("t:_x0024_SYS/x", el);
        assert_eq!(
            message_from_notification(&n, &origin(), &limits, Instant::now()).unwrap_err().kind,
            FaultKind::TopicNotSupported
        );
    }
}
