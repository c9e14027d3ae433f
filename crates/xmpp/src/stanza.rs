//! Stanza plumbing every request shares: JIDs, `iq` results and the stanza errors of RFC 6120
//! §8.3, built as [`Element`]s.

use xmpp_codec::{CLIENT_NS, Element};

/// The namespace of stanza error conditions.
const STANZAS_NS: &str = "urn:ietf:params:xml:ns:xmpp-stanzas";

/// A client's address: `local@domain/resource`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Jid {
    /// The user (the part before `@`).
    pub local: String,
    /// The server's domain.
    pub domain: String,
    /// The resource bound for this connection.
    pub resource: String,
}

impl Jid {
    /// `local@domain`: how a subscriber is named in `subscribe` requests.
    pub fn bare(&self) -> String {
        format!("{}@{}", self.local, self.domain)
    }

    /// `local@domain/resource`: where stanzas for this connection are addressed.
    pub fn full(&self) -> String {
        format!("{}@{}/{}", self.local, self.domain, self.resource)
    }
}

/// The bare part of a JID as text (`a@b/c` → `a@b`).
pub(crate) fn bare_of(jid: &str) -> &str {
    jid.split_once('/').map_or(jid, |(bare, _)| bare)
}

/// Whether a resource a client asked for may be used: 1 to 1023 bytes, no control characters
/// or spaces other than ' ' (a sufficient subset of RFC 7622's OpaqueString).
pub(crate) fn valid_resource(resource: &str) -> bool {
    !resource.is_empty() && resource.len() <= 1023 && !resource.chars().any(|c| c.is_control())
}

/// A stanza error (RFC 6120 §8.3): its type, defined condition, and an application condition
/// (XEP-0060's `pubsub#errors`) or text when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StanzaError {
    /// `cancel`, `modify`, `auth` or `wait`.
    pub kind: &'static str,
    /// The defined condition (`item-not-found`, `forbidden`…).
    pub condition: &'static str,
    /// An application-specific condition element.
    pub app: Option<AppCondition>,
    /// Human-readable text.
    pub text: Option<String>,
}

impl StanzaError {
    /// An error with no application condition.
    pub fn new(kind: &'static str, condition: &'static str) -> Self {
        StanzaError { kind, condition, app: None, text: None }
    }

    /// The request is not one this server handles (RFC 6120 §8.4).
    pub fn service_unavailable() -> Self {
        StanzaError::new("cancel", "service-unavailable")
    }

    /// The request is malformed.
    pub fn bad_request(text: impl Into<String>) -> Self {
        StanzaError::new("modify", "bad-request").with_text(text)
    }

    /// With explanatory text.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// With an application condition in `ns`.
    pub fn with_app(mut self, name: &'static str, ns: &'static str) -> Self {
        self.app = Some(AppCondition { name, ns, feature: None });
        self
    }

    /// The `<error/>` element.
    pub fn element(&self) -> Element {
        let mut error = Element::new("error", CLIENT_NS).with_attr("type", self.kind);
        error.push_child(Element::new(self.condition, STANZAS_NS));
        if let Some(text) = &self.text {
            error.push_child(Element::new("text", STANZAS_NS).with_text(text.clone()));
        }
        if let Some(app) = &self.app {
            let mut element = Element::new(app.name, app.ns);
            if let Some(feature) = app.feature {
                element.set_attr("feature", feature);
            }
            error.push_child(element);
        }
        error
    }
}

/// An application-specific error condition (XEP-0060's `pubsub#errors`): static, so that a
/// stanza error stays small.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AppCondition {
    /// Its element name.
    pub name: &'static str,
    /// Its namespace.
    pub ns: &'static str,
    /// The `feature` attribute of `<unsupported/>`.
    pub feature: Option<&'static str>,
}

/// The header of a reply to `request` (same name and id, addresses swapped), of `kind`.
fn reply(request: &Element, kind: &str, from: &str, to: &str) -> Element {
    let mut stanza = Element::new(request.name.clone(), CLIENT_NS).with_attr("type", kind);
    if let Some(id) = request.attr("id") {
        stanza.set_attr("id", id);
    }
    stanza.with_attr("from", from).with_attr("to", to)
}

/// An `iq` result to `request`, with `payload` as its child when there is one.
pub(crate) fn iq_result(request: &Element, from: &str, to: &str, payload: Option<Element>) -> Element {
    let result = reply(request, "result", from, to);
    match payload {
        Some(payload) => result.with_child(payload),
        None => result,
    }
}

/// The error reply to `request` (RFC 6120 §8.3.1: the request's type becomes `error`).
pub(crate) fn error_reply(request: &Element, from: &str, to: &str, error: &StanzaError) -> Element {
    reply(request, "error", from, to).with_child(error.element())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_their_type_condition_and_text() {
        let request = Element::new("iq", CLIENT_NS).with_attr("type", "get").with_attr("id", "7");
        let error = StanzaError::bad_request("no node").with_app("nodeid-required", "urn:x");
        let reply = error_reply(&request, "pubsub.d", "a@d/r", &error);
        let mut out = Vec::new();
        reply.write_to(&mut out, CLIENT_NS);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "<iq type='error' id='7' from='pubsub.d' to='a@d/r'><error type='modify'>\
             <bad-request xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/>\
             <text xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'>no node</text>\
             <nodeid-required xmlns='urn:x'/></error></iq>"
        );
        assert_eq!(bare_of("a@d/r/s"), "a@d");
    }
}
