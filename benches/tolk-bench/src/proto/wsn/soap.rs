//! The SOAP 1.2 documents of the WS-N client: requests written from fixed templates (Notify,
//! Subscribe, Unsubscribe), and the few answers it reads with quick-xml (an incoming Notify,
//! a SubscribeResponse, a fault's reason).
//!
//! Payloads are bytes, WS-N carries XML: as tolk does (docs/translation.md), a payload travels
//! in `<tolk:Payload xmlns:tolk="urn:tolk:wsn:1" encoding="base64">`, which tolk unwraps into
//! the exact bytes and wraps them in again for WS-N subscribers. An incoming message that is an
//! XML element instead (from a publisher that sent XML) becomes that element's source bytes;
//! namespace declarations it inherits from the envelope are not copied into them.

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use quick_xml::XmlVersion;
use quick_xml::escape::unescape;
use quick_xml::events::{BytesStart, Event};
use quick_xml::name::{Namespace, ResolveResult};
use quick_xml::reader::NsReader;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::topic;

/// Content type of SOAP 1.2 requests (RFC 3902).
pub const CONTENT_TYPE: &str = "application/soap+xml; charset=utf-8";

const WSNT: &str = "http://docs.oasis-open.org/wsn/b-2";
const TOLK: &str = "urn:tolk:wsn:1";
/// WS-Addressing 1.0 and the 2004/08 member submission, which tolk answers in kind.
const WSA: [&str; 2] = ["http://www.w3.org/2005/08/addressing", "http://schemas.xmlsoap.org/ws/2004/08/addressing"];

/// The envelope around a body; the body uses the `wsnt` and `wsa` prefixes.
fn envelope(body: &str) -> String {
    format!(
        r#"<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" xmlns:wsnt="{WSNT}" xmlns:wsa="{}"><s:Body>{body}</s:Body></s:Envelope>"#,
        WSA[0]
    )
}

/// A Notify with one message: `topic` in the Concrete dialect, the payload base64 in tolk's
/// wrapper so that binary survives.
pub fn notify(topic: &str, payload: &[u8]) -> String {
    envelope(&format!(
        r#"<wsnt:Notify><wsnt:NotificationMessage><wsnt:Topic Dialect="{}">{}</wsnt:Topic><wsnt:Message><tolk:Payload xmlns:tolk="{TOLK}" encoding="base64" contentType="application/octet-stream">{}</tolk:Payload></wsnt:Message></wsnt:NotificationMessage></wsnt:Notify>"#,
        topic::CONCRETE,
        topic::concrete(topic),
        BASE64.encode(payload)
    ))
}

/// A Notify of exactly `size` bytes (when `size` leaves room for the envelope) whose message is
/// one XML element of text, not tolk's base64 wrapper: the largest message a Notify of that
/// size can carry, for the memory attacks.
pub fn notify_filled(topic: &str, size: usize) -> String {
    let open = r#"<b:blob xmlns:b="urn:tolk-bench:attack">"#;
    let close = "</b:blob>";
    let document = |fill: &str| {
        envelope(&format!(
            r#"<wsnt:Notify><wsnt:NotificationMessage><wsnt:Topic Dialect="{}">{}</wsnt:Topic><wsnt:Message>{open}{fill}{close}</wsnt:Message></wsnt:NotificationMessage></wsnt:Notify>"#,
            topic::CONCRETE,
            topic::concrete(topic),
        ))
    };
    let fill = size.saturating_sub(document("").len());
    document(&"x".repeat(fill))
}

/// A Subscribe pushing to `consumer` (an `http://` URL) whatever matches `filter`.
pub fn subscribe(consumer: &str, filter: &str) -> String {
    let filter = match topic::expression(filter) {
        Some((dialect, text)) => {
            format!(
                r#"<wsnt:Filter><wsnt:TopicExpression Dialect="{dialect}">{text}</wsnt:TopicExpression></wsnt:Filter>"#
            )
        }
        None => String::new(),
    };
    let consumer = quick_xml::escape::escape(consumer);
    envelope(&format!(
        "<wsnt:Subscribe><wsnt:ConsumerReference><wsa:Address>{consumer}</wsa:Address></wsnt:ConsumerReference>{filter}</wsnt:Subscribe>"
    ))
}

/// An Unsubscribe, sent to the subscription's own address.
pub fn unsubscribe() -> String {
    envelope("<wsnt:Unsubscribe/>")
}

/// One NotificationMessage as a consumer received it.
#[derive(Debug, PartialEq, Eq)]
pub struct Notification {
    /// Canonical topic, when the message named one.
    pub topic: Option<String>,
    /// The payload bytes.
    pub payload: Bytes,
}

/// Whether a resolved element name is `{namespace}local`.
fn is(resolved: &ResolveResult<'_>, element: &BytesStart<'_>, namespace: &str, local: &str) -> bool {
    matches!(resolved, ResolveResult::Bound(Namespace(ns)) if *ns == namespace)
        && element.local_name().as_ref() == local
}

/// The text content of the element just started, unescaped (EOLs normalised first, as an XML
/// parser does before resolving `&#13;`).
fn text_of(reader: &mut NsReader<&[u8]>, element: &BytesStart<'_>) -> Result<String> {
    let raw = reader.read_text(element.name())?;
    Ok(unescape(&raw.xml10_content())?.into_owned())
}

/// Reads every NotificationMessage of a Notify (tolk sends one per request unless configured
/// to batch).
pub fn parse_notify(body: &[u8]) -> Result<Vec<Notification>> {
    let text = std::str::from_utf8(body).context("Notify is not UTF-8")?;
    let mut reader = NsReader::from_str(text);
    let mut found = Vec::new();
    let mut topic = None;
    loop {
        let (resolved, event) = reader.read_resolved_event()?;
        match event {
            Event::Start(e) if is(&resolved, &e, WSNT, "NotificationMessage") => topic = None,
            Event::Start(e) if is(&resolved, &e, WSNT, "Topic") => {
                topic = Some(topic::canonical(&text_of(&mut reader, &e)?));
            }
            Event::Start(e) if is(&resolved, &e, WSNT, "Message") => {
                let payload = message_content(&mut reader, body)?;
                found.push(Notification { topic: topic.take(), payload });
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if found.is_empty() {
        bail!("no wsnt:NotificationMessage with a wsnt:Message in the request");
    }
    Ok(found)
}

/// The payload inside a `wsnt:Message` whose start tag was just read; reads up to its end tag.
fn message_content(reader: &mut NsReader<&[u8]>, source: &[u8]) -> Result<Bytes> {
    let mut payload = None;
    loop {
        let before = reader.buffer_position() as usize;
        let source_since =
            |reader: &NsReader<&[u8]>| Bytes::copy_from_slice(&source[before..reader.buffer_position() as usize]);
        let (resolved, event) = reader.read_resolved_event()?;
        let content = match event {
            Event::Start(e) if is(&resolved, &e, TOLK, "Payload") => {
                let base64 = encoding_is_base64(&e)?;
                let text = text_of(reader, &e)?;
                if base64 { Bytes::from(decode_base64(&text)?) } else { Bytes::from(text) }
            }
            Event::Empty(e) if is(&resolved, &e, TOLK, "Payload") => Bytes::new(),
            Event::Start(e) => {
                reader.read_to_end(e.name())?;
                source_since(reader)
            }
            Event::Empty(_) => source_since(reader),
            Event::Text(t) if t.xml10_content().trim().is_empty() => continue,
            Event::Comment(_) | Event::PI(_) => continue,
            Event::End(_) => return payload.context("empty wsnt:Message"),
            other => bail!("unexpected {other:?} in wsnt:Message"),
        };
        if payload.replace(content).is_some() {
            bail!("wsnt:Message holds more than one element");
        }
    }
}

/// Decodes base64 text, skipping the whitespace XML Schema's `base64Binary` allows.
fn decode_base64(text: &str) -> Result<Vec<u8>> {
    let compact: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    BASE64.decode(compact).context("tolk:Payload is not valid base64")
}

/// Reads `encoding` of a `tolk:Payload`: `base64` or `text` (the default).
fn encoding_is_base64(element: &BytesStart<'_>) -> Result<bool> {
    let attribute = element.try_get_attribute("encoding")?;
    let encoding = attribute.map(|a| a.normalized_value(XmlVersion::default())).transpose()?;
    match encoding.as_deref() {
        Some("base64") => Ok(true),
        None | Some("text") => Ok(false),
        Some(other) => bail!("tolk:Payload encoding {other:?} is neither text nor base64"),
    }
}

/// The address of the subscription a SubscribeResponse created (where Unsubscribe goes).
pub fn subscription_address(body: &[u8]) -> Result<String> {
    reference_address(body, "SubscriptionReference")
}

/// The address in the `wsnt:{reference}` endpoint reference of an answer.
fn reference_address(body: &[u8], reference: &str) -> Result<String> {
    let text = std::str::from_utf8(body).context("answer is not UTF-8")?;
    let mut reader = NsReader::from_str(text);
    let mut inside = false;
    loop {
        let (resolved, event) = reader.read_resolved_event()?;
        match event {
            Event::Start(e) if is(&resolved, &e, WSNT, reference) => inside = true,
            Event::Start(e) if inside && WSA.iter().any(|ns| is(&resolved, &e, ns, "Address")) => {
                return Ok(text_of(&mut reader, &e)?.trim().to_owned());
            }
            Event::Eof => bail!("no {reference}/Address in the answer"),
            _ => {}
        }
    }
}

/// A CreatePullPoint.
pub fn create_pull_point() -> String {
    envelope("<wsnt:CreatePullPoint/>")
}

/// The address of the pull point a CreatePullPointResponse created.
pub fn pull_point_address(body: &[u8]) -> Result<String> {
    reference_address(body, "PullPoint")
}

/// A GetMessages taking at most `max` notifications.
pub fn get_messages(max: u32) -> String {
    envelope(&format!("<wsnt:GetMessages><wsnt:MaximumNumber>{max}</wsnt:MaximumNumber></wsnt:GetMessages>"))
}

/// How many NotificationMessages a GetMessagesResponse holds.
pub fn count_messages(body: &[u8]) -> Result<usize> {
    let text = std::str::from_utf8(body).context("GetMessagesResponse is not UTF-8")?;
    let mut reader = NsReader::from_str(text);
    let mut count = 0;
    loop {
        let (resolved, event) = reader.read_resolved_event()?;
        match event {
            Event::Start(e) if is(&resolved, &e, WSNT, "NotificationMessage") => {
                count += 1;
                reader.read_to_end(e.name())?;
            }
            Event::Eof => return Ok(count),
            _ => {}
        }
    }
}

/// What a SOAP fault says (SOAP 1.2 `Reason/Text`, SOAP 1.1 `faultstring`), else the start of
/// the body: for error messages.
pub fn fault_reason(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut reader = NsReader::from_str(&text);
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if matches!(e.local_name().as_ref(), "Text" | "faultstring") => {
                if let Ok(reason) = text_of(&mut reader, &e) {
                    return reason;
                }
            }
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => {}
        }
    }
    text.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::Stamp;

    /// A Notify as tolk pushes it to a consumer (the shape of wsn-xml's `write_notify`), with
    /// a binary payload in its base64 wrapper.
    fn pushed(topic: &str, payload: &[u8]) -> String {
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><soap:Envelope xmlns:soap="http://www.w3.org/2003/05/soap-envelope" xmlns:wsa="http://www.w3.org/2005/08/addressing" xmlns:wsnt="http://docs.oasis-open.org/wsn/b-2"><soap:Header><wsa:Action>http://docs.oasis-open.org/wsn/bw-2/NotificationConsumer/Notify</wsa:Action><wsa:To>http://127.0.0.1:9/c</wsa:To></soap:Header><soap:Body><wsnt:Notify><wsnt:NotificationMessage><wsnt:SubscriptionReference><wsa:Address>http://gw/wsn/subscriptions/abc</wsa:Address></wsnt:SubscriptionReference><wsnt:Topic xmlns:tns="urn:x" Dialect="http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete">tns:{}</wsnt:Topic><wsnt:Message><tolk:Payload xmlns:tolk="urn:tolk:wsn:1" encoding="base64">{}</tolk:Payload></wsnt:Message></wsnt:NotificationMessage></wsnt:Notify></soap:Body></soap:Envelope>"#,
            topic::concrete(topic),
            BASE64.encode(payload)
        )
    }

    #[test]
    fn a_stamped_binary_payload_round_trips_through_notify() {
        let stamp = Stamp { publisher: 3, seq: 0x0102_0304_0506, sent_ns: 987_654_321_012, due_ns: 987_654_321_000 };
        let payload = stamp.encode(100);
        for doc in [notify("tolkbench/0ab/burst", &payload), pushed("tolkbench/0ab/burst", &payload)] {
            let got = parse_notify(doc.as_bytes()).unwrap();
            assert_eq!(got, [Notification { topic: Some("tolkbench/0ab/burst".into()), payload: payload.clone() }]);
            assert_eq!(Stamp::decode(&got[0].payload), Some(stamp));
        }
    }

    #[test]
    fn text_payloads_embedded_elements_and_batches_are_read() {
        let doc = r#"<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" xmlns:n="http://docs.oasis-open.org/wsn/b-2"><s:Body><n:Notify>
            <n:NotificationMessage><n:Message><t:Payload xmlns:t="urn:tolk:wsn:1" encoding="text">a &amp; b&#13;</t:Payload></n:Message></n:NotificationMessage>
            <n:NotificationMessage><n:Topic>x</n:Topic><n:Message> <m:r xmlns:m="urn:m"><m:v>1</m:v></m:r> </n:Message></n:NotificationMessage>
            <n:NotificationMessage><n:Message><t:Payload xmlns:t="urn:tolk:wsn:1"/></n:Message></n:NotificationMessage>
        </n:Notify></s:Body></s:Envelope>"#;
        let got = parse_notify(doc.as_bytes()).unwrap();
        assert_eq!(got[0], Notification { topic: None, payload: Bytes::from_static(b"a & b\r") });
        assert_eq!(got[1].topic.as_deref(), Some("x"));
        assert_eq!(&got[1].payload[..], br#"<m:r xmlns:m="urn:m"><m:v>1</m:v></m:r>"#);
        assert!(got[2].payload.is_empty());
    }

    #[test]
    fn documents_without_messages_or_with_bad_payloads_are_refused() {
        let wrap = |message: &str| {
            format!(
                r#"<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" xmlns:wsnt="{WSNT}"><s:Body><wsnt:Notify><wsnt:NotificationMessage><wsnt:Message>{message}</wsnt:Message></wsnt:NotificationMessage></wsnt:Notify></s:Body></s:Envelope>"#
            )
        };
        assert!(parse_notify(envelope("<wsnt:Notify/>").as_bytes()).is_err());
        assert!(parse_notify(wrap("").as_bytes()).is_err());
        assert!(
            parse_notify(wrap(r#"<p:Payload xmlns:p="urn:tolk:wsn:1" encoding="base64">@@@@</p:Payload>"#).as_bytes())
                .is_err()
        );
        assert!(
            parse_notify(wrap(r#"<p:Payload xmlns:p="urn:tolk:wsn:1" encoding="hex">00</p:Payload>"#).as_bytes())
                .is_err()
        );
        assert!(parse_notify(wrap("<a/><b/>").as_bytes()).is_err());
        assert!(parse_notify(b"<not-closed>").is_err());
    }

    #[test]
    fn requests_carry_the_topic_and_the_consumer() {
        let doc = subscribe("http://127.0.0.1:5/c?a&b", "tolkbench/0ab/#");
        assert!(doc.contains("<wsa:Address>http://127.0.0.1:5/c?a&amp;b</wsa:Address>"));
        assert!(doc.contains(&format!(r#"Dialect="{}">tolkbench/_x0030_ab//.<"#, topic::FULL)));
        assert!(!subscribe("http://c", "#").contains("Filter"));
        assert!(unsubscribe().contains("<wsnt:Unsubscribe/>"));
    }

    #[test]
    fn filled_notifies_have_the_size_asked_and_pull_point_answers_are_read() {
        let doc = notify_filled("tolkbench/0ab/w", 4096);
        assert_eq!(doc.len(), 4096);
        let got = parse_notify(doc.as_bytes()).unwrap();
        assert!(got[0].payload.starts_with(b"<b:blob") && got[0].payload.len() > 3500);
        let created = r#"<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" xmlns:wsa="http://www.w3.org/2005/08/addressing" xmlns:wsnt="http://docs.oasis-open.org/wsn/b-2"><s:Body><wsnt:CreatePullPointResponse><wsnt:PullPoint><wsa:Address>http://127.0.0.1:8080/wsn/pullpoints/p1</wsa:Address></wsnt:PullPoint></wsnt:CreatePullPointResponse></s:Body></s:Envelope>"#;
        assert_eq!(pull_point_address(created.as_bytes()).unwrap(), "http://127.0.0.1:8080/wsn/pullpoints/p1");
        let two = envelope(&format!(
            "<wsnt:GetMessagesResponse>{m}{m}</wsnt:GetMessagesResponse>",
            m = "<wsnt:NotificationMessage><wsnt:Message><a/></wsnt:Message></wsnt:NotificationMessage>"
        ));
        assert_eq!(count_messages(two.as_bytes()).unwrap(), 2);
        assert_eq!(count_messages(envelope("<wsnt:GetMessagesResponse/>").as_bytes()).unwrap(), 0);
    }

    #[test]
    fn subscribe_responses_and_faults_are_read() {
        let response = r#"<?xml version="1.0" encoding="UTF-8"?><soap:Envelope xmlns:soap="http://www.w3.org/2003/05/soap-envelope" xmlns:wsa="http://www.w3.org/2005/08/addressing" xmlns:wsnt="http://docs.oasis-open.org/wsn/b-2"><soap:Header><wsa:Action>http://docs.oasis-open.org/wsn/bw-2/NotificationProducer/SubscribeResponse</wsa:Action></soap:Header><soap:Body><wsnt:SubscribeResponse><wsnt:SubscriptionReference><wsa:Address>http://gw:8080/wsn/subscriptions/abc</wsa:Address></wsnt:SubscriptionReference><wsnt:TerminationTime>2024-06-01T13:00:00Z</wsnt:TerminationTime></wsnt:SubscribeResponse></soap:Body></soap:Envelope>"#;
        assert_eq!(subscription_address(response.as_bytes()).unwrap(), "http://gw:8080/wsn/subscriptions/abc");
        assert!(subscription_address(envelope("").as_bytes()).is_err());
        let fault = r#"<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Body><s:Fault><s:Code><s:Value>s:Sender</s:Value></s:Code><s:Reason><s:Text xml:lang="en">bad topic &lt;x&gt;</s:Text></s:Reason></s:Fault></s:Body></s:Envelope>"#;
        assert_eq!(fault_reason(fault.as_bytes()), "bad topic <x>");
        assert_eq!(fault_reason(b"Service Unavailable"), "Service Unavailable");
    }
}
