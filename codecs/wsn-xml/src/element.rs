//! Self-contained XML elements: the content of `wsnt:Message` and of
//! `wsa:ReferenceParameters`, and the bridge between a core message payload (bytes) and
//! the one element a WS-N `Message` must hold.
//!
//! An [`XmlElement`] is always one well-formed element whose namespace prefixes are all
//! declared on itself or inside it, so it can be embedded in any document and stored as a
//! standalone payload. The only binding it may rely on from outside is "no default
//! namespace": an element in no namespace is written without `xmlns=""`, and every writer in
//! this crate keeps the default namespace unbound around embedded elements.
//!
//! Payloads that are not such an element are wrapped in the tolk payload element:
//! ```xml
//! <tolk:Payload xmlns:tolk="urn:tolk:wsn:1" encoding="text" contentType="application/json">{"t":21.5}</tolk:Payload>
//! <tolk:Payload xmlns:tolk="urn:tolk:wsn:1" encoding="base64" contentType="application/octet-stream">AAEC</tolk:Payload>
//! ```
//! `encoding` is `text` (UTF-8 text, XML-escaped, CR written as `&#13;` so it survives) or
//! `base64` (RFC 4648, for bytes that are not UTF-8 or hold characters XML cannot carry);
//! `contentType` is optional. [`XmlElement::to_payload`] undoes the wrapping, so a payload
//! crossing a WS-N hop (tolk to tolk, or out and back) comes back byte for byte.

use bytes::Bytes;

use crate::dom::{self, Captured, Plan};
use crate::error::ParseError;
use crate::limits::Limits;
use crate::ns::{QName, TOLK};
use crate::out::Out;

/// Local name of the tolk payload wrapper element, in namespace [`TOLK`].
pub const PAYLOAD_WRAPPER: &str = "Payload";
/// Content type reported for payloads that are XML elements.
pub const XML_CONTENT_TYPE: &str = "application/xml";

/// One well-formed, self-contained XML element (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XmlElement {
    bytes: Bytes,
    name: QName,
    /// Offset just before the `>` or `/>` of the start tag, where attributes can be added.
    insert_at: usize,
}

/// How a payload was carried inside `wsnt:Message`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadForm {
    /// The payload is the XML element itself.
    Xml,
    /// The payload is UTF-8 text inside the tolk wrapper.
    Text,
    /// The payload is base64 inside the tolk wrapper.
    Base64,
}

/// A core message payload recovered from a `wsnt:Message` element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payload {
    /// The payload bytes.
    pub bytes: Bytes,
    /// Content type: the wrapper's `contentType`, or `application/xml` for an XML element.
    pub content_type: Option<String>,
    /// How it was carried.
    pub form: PayloadForm,
}

impl Payload {
    /// The payload a tolk wrapper holds, from the wrapper's `encoding` and `contentType`
    /// attributes and its text; `None` when the encoding is unknown or the base64 is broken.
    /// For a front end that has parsed the wrapper element itself (XMPP), so that a payload
    /// crossing any XML protocol unwraps by one rule.
    pub fn unwrap(encoding: Option<&str>, content_type: Option<&str>, text: &str) -> Option<Payload> {
        let (bytes, form) = match encoding {
            Some("text") => (Bytes::from(text.to_owned()), PayloadForm::Text),
            Some("base64") => (Bytes::from(crate::base64::decode(text)?), PayloadForm::Base64),
            _ => return None,
        };
        Some(Payload { bytes, content_type: content_type.map(str::to_owned), form })
    }
}

impl XmlElement {
    /// The element a parse kept whole.
    pub(crate) fn from_captured(captured: Captured) -> Self {
        let Captured { bytes, name, insert_at } = captured;
        XmlElement { bytes, name, insert_at }
    }

    /// Parses a standalone XML document holding exactly one root element (prolog and
    /// trailing comments allowed and dropped) under the same safety rules as requests.
    pub fn parse(xml: &[u8], limits: &Limits) -> Result<Self, ParseError> {
        const ROOT: Plan = Plan { capture_root: true, ..Plan::PLAIN };
        let doc = dom::parse(xml, limits, &ROOT)?;
        doc.root()
            .and_then(|root| root.captured.clone())
            .map(XmlElement::from_captured)
            .ok_or(ParseError::Malformed { offset: 0, message: "no root element".into() })
    }

    /// Turns a core payload into the one element a `wsnt:Message` holds: a well-formed XML
    /// document with one root element is embedded as that element; other UTF-8 text is
    /// escaped into a text wrapper; anything else is base64 in a wrapper.
    pub fn from_payload(payload: &[u8], content_type: Option<&str>, limits: &Limits) -> Self {
        if let Some(element) = looks_like_xml(payload).then(|| Self::parse(payload, limits).ok()).flatten() {
            return element;
        }
        Self::wrap_payload(payload, content_type)
    }

    /// The element that carries a payload published with `content_type`. A payload is
    /// embedded as the XML element it is only when nothing more specific than "XML" is known
    /// about it: no content type, `application/xml` or `text/xml`. Anything else (markup
    /// published as `text/html`, `image/svg+xml`, `application/atom+xml`, …) is wrapped, so that
    /// the wrapper's `contentType` keeps what an embedded element would lose: the consumer would
    /// otherwise see `application/xml` (the all-pairs matrix found this). Shared by every
    /// front end that carries payloads as XML (WS-Notification, XMPP).
    pub fn for_payload(payload: &[u8], content_type: Option<&str>, limits: &Limits) -> Self {
        if content_type.is_none_or(is_generic_xml) {
            Self::from_payload(payload, content_type, limits)
        } else {
            Self::wrap_payload(payload, content_type)
        }
    }

    /// Writes the element for embedding under a parent whose default namespace is bound (an
    /// XMPP stanza, where it is `jabber:client`): `xmlns=""` is declared on its root, unless
    /// the root declares a default namespace itself, so that its unprefixed names stay in no
    /// namespace (see the module docs).
    pub fn write_embedded(&self, out: &mut Vec<u8>) {
        let tag = &self.bytes[1..self.insert_at.min(self.bytes.len())];
        let name_end =
            tag.iter().position(|b| b.is_ascii_whitespace() || *b == b'/' || *b == b'>').unwrap_or(tag.len());
        let prefixed = tag[..name_end].contains(&b':');
        if self.name.namespace.is_some() && !prefixed {
            out.extend_from_slice(&self.bytes);
        } else {
            out.extend_from_slice(&self.with_extra_attributes(" xmlns=\"\""));
        }
    }

    /// Always wraps: UTF-8 text made of XML characters as `encoding="text"`, anything else
    /// as `encoding="base64"`. For payloads that must not be read as XML even if they are.
    pub fn wrap_payload(payload: &[u8], content_type: Option<&str>) -> Self {
        match std::str::from_utf8(payload) {
            Ok(text) if text.chars().all(dom::is_xml_char) => Self::wrap("text", text, content_type),
            _ => Self::wrap("base64", &crate::base64::encode(payload), content_type),
        }
    }

    fn wrap(encoding: &str, content: &str, content_type: Option<&str>) -> Self {
        let mut out = Out::new();
        let name = "tolk:Payload";
        let mut attrs = vec![("xmlns:tolk", TOLK), ("encoding", encoding)];
        if let Some(ct) = content_type {
            attrs.push(("contentType", ct));
        }
        out.start(name, &attrs);
        let insert_at = out.len().saturating_sub(1);
        out.text(content);
        out.end(name);
        XmlElement { bytes: out.into_bytes(), name: QName::new(TOLK, PAYLOAD_WRAPPER), insert_at }
    }

    /// Recovers the core payload: unwraps the tolk wrapper, or returns the element itself
    /// as `application/xml`. A wrapper that cannot be decoded is returned as XML, unchanged.
    pub fn to_payload(&self, limits: &Limits) -> Payload {
        self.unwrap_payload(limits).unwrap_or_else(|| Payload {
            bytes: self.bytes.clone(),
            content_type: Some(XML_CONTENT_TYPE.to_owned()),
            form: PayloadForm::Xml,
        })
    }

    fn unwrap_payload(&self, limits: &Limits) -> Option<Payload> {
        if !self.name.is(TOLK, PAYLOAD_WRAPPER) {
            return None;
        }
        let doc = dom::parse(&self.bytes, limits, &Plan::PLAIN).ok()?;
        let root = doc.root().filter(|r| r.children.is_empty())?;
        Payload::unwrap(root.attr(None, "encoding"), root.attr(None, "contentType"), &root.text)
    }

    /// The element's expanded name.
    pub fn name(&self) -> &QName {
        &self.name
    }

    /// The element's bytes (UTF-8).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The element's bytes as a cheap, shareable handle (what goes into a core message).
    pub fn to_bytes(&self) -> Bytes {
        self.bytes.clone()
    }

    /// The element as text. Always valid UTF-8: every constructor starts from UTF-8.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes).unwrap_or_default()
    }

    /// The element with `extra` (e.g. ` a="b"`) added to its start tag.
    pub(crate) fn with_extra_attributes(&self, extra: &str) -> Vec<u8> {
        let split = self.insert_at.min(self.bytes.len());
        let (head, tail) = self.bytes.split_at(split);
        let mut out = Vec::with_capacity(self.bytes.len() + extra.len());
        out.extend_from_slice(head);
        out.extend_from_slice(extra.as_bytes());
        out.extend_from_slice(tail);
        out
    }
}

/// `application/xml` or `text/xml` (RFC 7303), parameters and case ignored: the content types
/// an embedded element says by itself.
fn is_generic_xml(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/xml") || essence.eq_ignore_ascii_case("text/xml")
}

/// Cheap pre-check so plain text and binary skip the XML parser.
fn looks_like_xml(payload: &[u8]) -> bool {
    let body = payload.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(payload);
    body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'<')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits::default()
    }

    #[test]
    fn xml_payload_is_embedded_without_prolog() {
        let p = b"<?xml version=\"1.0\"?>\n<!-- c --><t:temp xmlns:t=\"urn:t\">21.5</t:temp>\n";
        let e = XmlElement::from_payload(p, Some("application/xml"), &limits());
        assert_eq!(e.as_str(), r#"<t:temp xmlns:t="urn:t">21.5</t:temp>"#);
        assert_eq!(e.name(), &QName::new("urn:t", "temp"));
        let back = e.to_payload(&limits());
        assert_eq!(back.form, PayloadForm::Xml);
        assert_eq!(&back.bytes[..], e.as_bytes());
    }

    #[test]
    fn embedded_elements_keep_unprefixed_names_out_of_the_parent_default_namespace() {
        let cases = [
            ("<a><b/></a>", "<a xmlns=\"\"><b/></a>"),
            ("<a/>", "<a xmlns=\"\"/>"),
            ("<t:a xmlns:t=\"urn:t\"><b/></t:a>", "<t:a xmlns:t=\"urn:t\" xmlns=\"\"><b/></t:a>"),
            ("<a xmlns=\"urn:a\"><b/></a>", "<a xmlns=\"urn:a\"><b/></a>"),
        ];
        for (payload, embedded) in cases {
            let mut out = Vec::new();
            XmlElement::parse(payload.as_bytes(), &limits()).unwrap().write_embedded(&mut out);
            assert_eq!(String::from_utf8(out).unwrap(), embedded);
        }
        let atom = XmlElement::for_payload(b"<feed/>", Some("application/atom+xml"), &limits());
        assert_eq!(atom.name(), &QName::new(TOLK, PAYLOAD_WRAPPER));
    }

    #[test]
    fn text_payload_is_wrapped_and_unwrapped_exactly() {
        let text = "a < b && c > d\r\n\"quoted\" 'single' ]]> <not/xml";
        let e = XmlElement::from_payload(text.as_bytes(), Some("text/plain; charset=\"utf-8\""), &limits());
        assert_eq!(e.name(), &QName::new(TOLK, PAYLOAD_WRAPPER));
        assert!(e.as_str().contains("&#13;"));
        let back = e.to_payload(&limits());
        assert_eq!(back.form, PayloadForm::Text);
        assert_eq!(&back.bytes[..], text.as_bytes());
        assert_eq!(back.content_type.as_deref(), Some("text/plain; charset=\"utf-8\""));
    }

    #[test]
    fn binary_payload_is_base64() {
        let data = [0u8, 1, 2, 0xFF, 0xFE, b'<'];
        let e = XmlElement::from_payload(&data, None, &limits());
        assert!(e.as_str().contains("encoding=\"base64\""));
        let back = e.to_payload(&limits());
        assert_eq!(back.form, PayloadForm::Base64);
        assert_eq!(&back.bytes[..], &data);
        assert_eq!(back.content_type, None);
        // Control characters are UTF-8 but not XML characters.
        let ctl = XmlElement::from_payload(b"a\x01b", None, &limits());
        assert_eq!(ctl.to_payload(&limits()).form, PayloadForm::Base64);
    }

    #[test]
    fn broken_xml_is_wrapped_as_text() {
        for p in ["<a>", "<a/><b/>", "<p:a/>", "<!DOCTYPE a><a/>", "", "   "] {
            let e = XmlElement::from_payload(p.as_bytes(), None, &limits());
            let back = e.to_payload(&limits());
            assert_eq!(back.form, PayloadForm::Text, "{p}");
            assert_eq!(&back.bytes[..], p.as_bytes());
        }
    }

    #[test]
    fn extra_attributes_go_into_the_start_tag() {
        let e = XmlElement::parse(b"<a x='1'><b/></a>", &limits()).unwrap();
        assert_eq!(e.with_extra_attributes(" y=\"2\""), b"<a x='1' y=\"2\"><b/></a>");
        let e = XmlElement::parse(b"<a/>", &limits()).unwrap();
        assert_eq!(e.with_extra_attributes(" y=\"2\""), b"<a y=\"2\"/>");
        let w = XmlElement::from_payload(b"hi", None, &limits());
        assert!(
            String::from_utf8(w.with_extra_attributes(" y=\"2\"")).unwrap().ends_with(" y=\"2\">hi</tolk:Payload>")
        );
    }
}
