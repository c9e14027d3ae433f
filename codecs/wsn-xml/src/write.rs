//! Writing outgoing requests: the Notify tolk sends to consumers (wrapped, or raw for
//! `UseRaw` subscriptions), and every other request for bridges and tests. Also the envelope
//! skeleton and element writers shared with responses and faults.
//!
//! Prefixes are fixed: `soap` (the envelope's version), `wsa` (WS-Addressing 1.0, always
//! declared because WS-N bodies use it), `wsa04` (headers of a 2004/08 exchange), `wsnt`,
//! and `wsn-br` / `wsrf-bf` / `wsrf-r` / `xsi` declared on the elements that need them. No
//! default namespace is ever declared, so embedded [`XmlElement`]s keep their meaning.

use bytes::Bytes;

use crate::element::XmlElement;
use crate::ns::{QName, TOLK, WSA, WSA_2004, WSN_BR, WSNT, XSI};
use crate::operation::{NOTIFY_ACTION, Operation};
use crate::out::Out;
use crate::request::{EndpointReference, NotificationMessage, RegisterPublisher, Request, Subscribe};
use crate::soap::{AddressingVersion, SoapVersion};
use crate::topic::TopicExpression;

/// WS-Addressing headers of an outgoing request.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestHeaders<'a> {
    /// Which WS-Addressing version to write.
    pub addressing: AddressingVersion,
    /// `wsa:Action`; the operation's default action when `None`.
    pub action: Option<&'a str>,
    /// `wsa:MessageID` (tolk passes a fresh `urn:uuid:`; this crate has no randomness).
    pub message_id: Option<&'a str>,
    /// Destination: `wsa:To` is its address, and its reference parameters are added as
    /// header blocks marked `wsa:IsReferenceParameter="true"` (WS-Addressing 1.0 SOAP
    /// Binding §3.1).
    pub to: Option<&'a EndpointReference>,
    /// `wsa:ReplyTo/wsa:Address`.
    pub reply_to: Option<&'a str>,
    /// `tolk:Path`: the brokers the notifications in the body have passed, comma-separated
    /// (bridges; see [`RequestEnvelope::path`](crate::RequestEnvelope::path)).
    pub path: Option<&'a str>,
}

/// Writes the envelope around `headers` and `body`. The closure for headers receives the
/// prefix bound to the addressing version.
pub(crate) fn envelope(
    soap: SoapVersion,
    addressing: AddressingVersion,
    headers: impl FnOnce(&mut Out, &str),
    body: impl FnOnce(&mut Out),
) -> Bytes {
    let mut out = Out::new();
    out.decl();
    let mut attrs = vec![("xmlns:soap", soap.namespace()), ("xmlns:wsa", WSA), ("xmlns:wsnt", WSNT)];
    let hp = match addressing {
        AddressingVersion::W3c => "wsa",
        AddressingVersion::Submission => {
            attrs.push(("xmlns:wsa04", WSA_2004));
            "wsa04"
        }
    };
    out.start("soap:Envelope", &attrs);
    out.start("soap:Header", &[]);
    headers(&mut out, hp);
    out.end("soap:Header");
    out.start("soap:Body", &[]);
    body(&mut out);
    out.end("soap:Body");
    out.end("soap:Envelope");
    out.into_bytes()
}

fn request_headers(out: &mut Out, hp: &str, h: &RequestHeaders<'_>, default_action: Option<&str>) {
    if let Some(action) = h.action.or(default_action) {
        out.leaf(&format!("{hp}:Action"), &[], action);
    }
    if let Some(id) = h.message_id {
        out.leaf(&format!("{hp}:MessageID"), &[], id);
    }
    if let Some(to) = h.to {
        out.leaf(&format!("{hp}:To"), &[], &to.address);
        let marker = match h.addressing {
            AddressingVersion::W3c => {
                " xmlns:tolkwsa=\"http://www.w3.org/2005/08/addressing\" tolkwsa:IsReferenceParameter=\"true\""
            }
            AddressingVersion::Submission => "",
        };
        for parameter in &to.reference_parameters {
            out.raw(&parameter.with_extra_attributes(marker));
        }
    }
    if let Some(reply_to) = h.reply_to {
        let name = format!("{hp}:ReplyTo");
        out.start(&name, &[]);
        out.leaf(&format!("{hp}:Address"), &[], reply_to);
        out.end(&name);
    }
    if let Some(path) = h.path {
        // Not mustUnderstand: a broker that does not know it may ignore it.
        out.leaf("tolk:Path", &[("xmlns:tolk", TOLK)], path);
    }
}

/// Writes any request (the client side: bridges to remote brokers, tests).
pub fn write_request(soap: SoapVersion, headers: &RequestHeaders<'_>, request: &Request) -> Bytes {
    let default_action = request.operation().map(Operation::request_action);
    envelope(
        soap,
        headers.addressing,
        |out, hp| request_headers(out, hp, headers, default_action.as_deref()),
        |out| request_body(out, request),
    )
}

/// Writes the Notify tolk sends to a consumer (WS-BaseNotification 1.3 §3.2), addressed to
/// its ConsumerReference, Action [`NOTIFY_ACTION`].
pub fn write_notify(
    soap: SoapVersion,
    addressing: AddressingVersion,
    consumer: &EndpointReference,
    message_id: Option<&str>,
    messages: &[NotificationMessage],
) -> Bytes {
    let headers = RequestHeaders {
        addressing,
        action: Some(NOTIFY_ACTION),
        message_id,
        to: Some(consumer),
        ..Default::default()
    };
    envelope(soap, addressing, |out, hp| request_headers(out, hp, &headers, None), |out| notify_body(out, messages))
}

/// Writes a raw notification for a `UseRaw` subscription (WS-BaseNotification 1.3 §4.2): the
/// message element alone is the Body. `headers.action` defaults to [`NOTIFY_ACTION`].
pub fn write_raw_notification(soap: SoapVersion, headers: &RequestHeaders<'_>, message: &XmlElement) -> Bytes {
    envelope(
        soap,
        headers.addressing,
        |out, hp| request_headers(out, hp, headers, Some(NOTIFY_ACTION)),
        |out| out.raw(message.as_bytes()),
    )
}

fn request_body(out: &mut Out, request: &Request) {
    match request {
        Request::Notify(messages) => notify_body(out, messages),
        Request::Subscribe(s) => subscribe_body(out, s),
        Request::GetCurrentMessage { topic: t } => {
            out.start("wsnt:GetCurrentMessage", &[]);
            topic(out, "wsnt", WSNT, "Topic", t);
            out.end("wsnt:GetCurrentMessage");
        }
        Request::Renew { termination_time } => {
            out.start("wsnt:Renew", &[]);
            nillable_time(out, "wsnt:TerminationTime", termination_time.as_deref());
            out.end("wsnt:Renew");
        }
        Request::Unsubscribe => out.empty("wsnt:Unsubscribe", &[]),
        Request::PauseSubscription => out.empty("wsnt:PauseSubscription", &[]),
        Request::ResumeSubscription => out.empty("wsnt:ResumeSubscription", &[]),
        Request::CreatePullPoint => out.empty("wsnt:CreatePullPoint", &[]),
        Request::GetMessages { maximum_number } => {
            out.start("wsnt:GetMessages", &[]);
            if let Some(n) = maximum_number {
                out.leaf("wsnt:MaximumNumber", &[], &n.to_string());
            }
            out.end("wsnt:GetMessages");
        }
        Request::DestroyPullPoint => out.empty("wsnt:DestroyPullPoint", &[]),
        Request::RegisterPublisher(r) => register_publisher_body(out, r),
        Request::DestroyRegistration => out.empty("wsn-br:DestroyRegistration", &[("xmlns:wsn-br", WSN_BR)]),
        Request::Unknown { namespace, local_name } => {
            qname_element(out, &QName { namespace: namespace.clone(), local_name: local_name.clone() });
        }
    }
}

pub(crate) fn notify_body(out: &mut Out, messages: &[NotificationMessage]) {
    out.start("wsnt:Notify", &[]);
    for m in messages {
        notification_message(out, m);
    }
    out.end("wsnt:Notify");
}

/// `wsnt:NotificationMessage`, shared by Notify and GetMessagesResponse.
pub(crate) fn notification_message(out: &mut Out, m: &NotificationMessage) {
    out.start("wsnt:NotificationMessage", &[]);
    if let Some(epr) = &m.subscription_reference {
        endpoint_reference(out, "wsnt:SubscriptionReference", epr);
    }
    if let Some(t) = &m.topic {
        topic(out, "wsnt", WSNT, "Topic", t);
    }
    if let Some(epr) = &m.producer_reference {
        endpoint_reference(out, "wsnt:ProducerReference", epr);
    }
    out.start("wsnt:Message", &[]);
    out.raw(m.message.as_bytes());
    out.end("wsnt:Message");
    out.end("wsnt:NotificationMessage");
}

fn subscribe_body(out: &mut Out, s: &Subscribe) {
    out.start("wsnt:Subscribe", &[]);
    endpoint_reference(out, "wsnt:ConsumerReference", &s.consumer_reference);
    if !s.topic_expressions.is_empty() || !s.other_filters.is_empty() {
        out.start("wsnt:Filter", &[]);
        for t in &s.topic_expressions {
            topic(out, "wsnt", WSNT, "TopicExpression", t);
        }
        for f in &s.other_filters {
            qname_element(out, f);
        }
        out.end("wsnt:Filter");
    }
    if let Some(time) = &s.initial_termination_time {
        out.leaf("wsnt:InitialTerminationTime", &[], time);
    }
    if s.use_raw || !s.other_policies.is_empty() {
        out.start("wsnt:SubscriptionPolicy", &[]);
        if s.use_raw {
            out.empty("wsnt:UseRaw", &[]);
        }
        for p in &s.other_policies {
            qname_element(out, p);
        }
        out.end("wsnt:SubscriptionPolicy");
    }
    out.end("wsnt:Subscribe");
}

fn register_publisher_body(out: &mut Out, r: &RegisterPublisher) {
    out.start("wsn-br:RegisterPublisher", &[("xmlns:wsn-br", WSN_BR)]);
    if let Some(epr) = &r.publisher_reference {
        endpoint_reference(out, "wsn-br:PublisherReference", epr);
    }
    for t in &r.topics {
        topic(out, "wsn-br", WSN_BR, "Topic", t);
    }
    if r.demand {
        out.leaf("wsn-br:Demand", &[], "true");
    }
    if let Some(time) = &r.initial_termination_time {
        out.leaf("wsn-br:InitialTerminationTime", &[], time);
    }
    out.end("wsn-br:RegisterPublisher");
}

/// A `wsa:EndpointReferenceType` element named `name` (prefix already in scope).
pub(crate) fn endpoint_reference(out: &mut Out, name: &str, epr: &EndpointReference) {
    out.start(name, &[]);
    out.leaf("wsa:Address", &[], &epr.address);
    if !epr.reference_parameters.is_empty() {
        out.start("wsa:ReferenceParameters", &[]);
        for p in &epr.reference_parameters {
            out.raw(p.as_bytes());
        }
        out.end("wsa:ReferenceParameters");
    }
    out.end(name);
}

/// A topic element `{ns}local` carrying `expr`, with the declarations its prefixes need. If
/// the expression itself binds `prefix` (the element's usual prefix) to something else, the
/// element gets a fresh prefix so that the two never clash.
pub(crate) fn topic(out: &mut Out, prefix: &str, ns: &str, local: &str, expr: &TopicExpression) {
    let taken = |p: &str| expr.namespaces.iter().any(|b| b.prefix.as_deref() == Some(p));
    let mut element_prefix = prefix.to_owned();
    let mut n = 0;
    while taken(&element_prefix) {
        element_prefix = format!("{prefix}{n}");
        n += 1;
    }
    let declaration = format!("xmlns:{element_prefix}");
    let mut attrs: Vec<(String, &str)> = Vec::with_capacity(expr.namespaces.len() + 2);
    if element_prefix != prefix {
        attrs.push((declaration, ns));
    }
    for b in &expr.namespaces {
        match b.prefix.as_deref() {
            Some("xml" | "xmlns") => {}
            Some(p) => attrs.push((format!("xmlns:{p}"), &b.namespace)),
            None => attrs.push(("xmlns".to_owned(), &b.namespace)),
        }
    }
    attrs.push(("Dialect".to_owned(), expr.dialect.uri()));
    let attrs: Vec<(&str, &str)> = attrs.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    out.leaf(&format!("{element_prefix}:{local}"), &attrs, &expr.text);
}

/// A nillable dateTime-or-duration element: text, or `xsi:nil="true"` when `None`.
pub(crate) fn nillable_time(out: &mut Out, name: &str, value: Option<&str>) {
    match value {
        Some(v) => out.leaf(name, &[], v),
        None => out.empty(name, &[("xmlns:xsi", XSI), ("xsi:nil", "true")]),
    }
}

/// An empty element with an expanded name: `<q:local xmlns:q="ns"/>`.
pub(crate) fn qname_element(out: &mut Out, q: &QName) {
    match &q.namespace {
        // The XML namespace is bound to `xml` alone, and may not be declared for another prefix.
        Some(ns) if ns == crate::ns::XML => out.empty(&format!("xml:{}", q.local_name), &[]),
        Some(ns) => out.empty(&format!("q:{}", q.local_name), &[("xmlns:q", ns)]),
        None => out.empty(&q.local_name, &[]),
    }
}
