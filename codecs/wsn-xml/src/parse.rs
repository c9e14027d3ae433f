//! Reading a request envelope: SOAP version from the Envelope namespace, WS-Addressing
//! headers, the WS-Security header ([`crate::security`]), `mustUnderstand` checks, and the
//! Body's first child dispatched on its expanded name into a [`Request`].
//!
//! Children of WS-N elements are matched by expanded name as the schemas define them
//! (`elementFormDefault="qualified"`: `wsnt:` for WS-BaseNotification, `wsn-br:` for
//! WS-BrokeredNotification, `wsa:` for addresses), in any order, extra elements ignored.

use crate::dom::{self, Document, Node, Plan};
use crate::element::XmlElement;
use crate::error::ParseError;
use crate::limits::Limits;
use crate::ns::{QName, SOAP11_ENV, SOAP12_ENV, TOLK, WSA, WSA_2004, WSN_BR, WSNT, WSSE};
use crate::operation::Operation;
use crate::request::{
    AddressingHeaders, EndpointReference, NotificationMessage, RegisterPublisher, Request, RequestEnvelope,
    RequestError, Subscribe,
};
use crate::security::{SecurityHeader, read_security};
use crate::soap::{AddressingVersion, SoapVersion};
use crate::topic::{Dialect, NamespaceBinding, TopicExpression};

/// Capture message payloads and reference parameters as self-contained elements; record the
/// namespace scope of topic elements, whose text holds QNames.
const REQUEST_PLAN: Plan = Plan {
    capture_children_of: |ns, local| match ns {
        Some(WSNT) => local == "Message",
        Some(WSA | WSA_2004) => local == "ReferenceParameters",
        _ => false,
    },
    capture_root: false,
    record_scope_of: |ns, local| match ns {
        Some(WSNT) => local == "Topic" || local == "TopicExpression",
        Some(WSN_BR) => local == "Topic",
        _ => false,
    },
};

/// Parses a SOAP 1.1 or 1.2 request envelope carrying a WS-N request.
#[allow(
    clippy::result_large_err,
    reason = "the error carries the SOAP version and headers the fault needs; it is built once per refused request"
)]
pub fn parse_request(input: &[u8], limits: &Limits) -> Result<RequestEnvelope, RequestError> {
    let fail = |error| RequestError { soap: None, addressing: AddressingHeaders::default(), operation: None, error };
    let doc = dom::parse(input, limits, &REQUEST_PLAN).map_err(|error| {
        // A limit hit inside an Envelope is still a SOAP request: answer in its version.
        let soap = dom::root_name(input, limits).and_then(|root| envelope_version(&root).ok());
        RequestError { soap, ..fail(error) }
    })?;
    let root = doc.root().ok_or(ParseError::MissingBody).map_err(fail)?;
    let soap = envelope_version(&root.qname()).map_err(fail)?;
    let env = soap.namespace();
    let mut addressing = AddressingHeaders::default();
    let mut not_understood = Vec::new();
    let mut security = None;
    let mut path = None;
    if let Some(header) = doc.child(root, env, "Header") {
        for block in doc.children(header) {
            if block.is(TOLK, "Path") {
                path = Some(block.text.trim().to_owned());
                continue;
            }
            read_header_block(&doc, soap, block, &mut addressing, &mut security, &mut not_understood);
        }
    }
    let security = security.unwrap_or_default();
    let context =
        |operation, error| RequestError { soap: Some(soap), addressing: addressing.clone(), operation, error };
    let body = doc.child(root, env, "Body").ok_or_else(|| context(None, ParseError::MissingBody))?;
    let first = doc.children(body).next().ok_or_else(|| context(None, ParseError::EmptyBody))?;
    let operation = first.ns.as_deref().and_then(|ns| Operation::from_request_element(ns, &first.local));
    let request = read_request(&doc, first, operation).map_err(|e| context(operation, e))?;
    Ok(RequestEnvelope { soap, addressing, security, not_understood, path, request })
}

pub(crate) fn envelope_version(root: &QName) -> Result<SoapVersion, ParseError> {
    if root.local_name != "Envelope" {
        return Err(ParseError::NotSoapEnvelope { found: root.clone() });
    }
    root.namespace
        .as_deref()
        .and_then(SoapVersion::from_namespace)
        .ok_or_else(|| ParseError::VersionMismatch { namespace: root.namespace.clone() })
}

/// Reads one header block (but `tolk:Path`): WS-Addressing headers and the `wsse:Security` header targeted at
/// this node are understood; any other block that is `mustUnderstand` and targeted at this
/// node is recorded as not understood.
fn read_header_block(
    doc: &Document,
    soap: SoapVersion,
    block: &Node,
    addressing: &mut AddressingHeaders,
    security: &mut Option<SecurityHeader>,
    not_understood: &mut Vec<QName>,
) {
    if let Some(version) = block.ns.as_deref().and_then(AddressingVersion::from_namespace) {
        addressing.version.get_or_insert(version);
        let text = || Some(block.text.trim().to_owned());
        match block.local.as_str() {
            "Action" => addressing.action = text(),
            "MessageID" => addressing.message_id = text(),
            "To" => addressing.to = text(),
            "ReplyTo" => {
                addressing.reply_to =
                    doc.child(block, version.namespace(), "Address").map(|a| a.text.trim().to_owned());
            }
            _ => {}
        }
        return;
    }
    let targeted = targeted(soap, block);
    if targeted && block.is(WSSE, "Security") {
        *security = Some(if security.is_some() { SecurityHeader::duplicate() } else { read_security(doc, block) });
        return;
    }
    let must = matches!(block.attr(Some(soap.namespace()), "mustUnderstand").map(str::trim), Some("1" | "true"));
    if must && targeted {
        not_understood.push(block.qname());
    }
}

/// Whether a header block is for this node: no `actor` / `role`, or the "next" one (SOAP 1.1
/// §4.2.2), or SOAP 1.2's "ultimateReceiver" (Part 1 §5.2.2).
fn targeted(soap: SoapVersion, block: &Node) -> bool {
    match soap {
        SoapVersion::V11 => {
            matches!(block.attr(Some(SOAP11_ENV), "actor"), None | Some("http://schemas.xmlsoap.org/soap/actor/next"))
        }
        SoapVersion::V12 => matches!(
            block.attr(Some(SOAP12_ENV), "role"),
            None | Some(
                "http://www.w3.org/2003/05/soap-envelope/role/next"
                    | "http://www.w3.org/2003/05/soap-envelope/role/ultimateReceiver"
            )
        ),
    }
}

fn read_request(doc: &Document, first: &Node, operation: Option<Operation>) -> Result<Request, ParseError> {
    let Some(op) = operation else {
        return Ok(Request::Unknown { namespace: first.ns.clone(), local_name: first.local.clone() });
    };
    Ok(match op {
        Operation::Notify => Request::Notify(read_notify(doc, first)?),
        Operation::Subscribe => Request::Subscribe(read_subscribe(doc, first)?),
        Operation::GetCurrentMessage => {
            let topic = doc
                .child(first, WSNT, "Topic")
                .ok_or(ParseError::MissingElement { parent: "GetCurrentMessage", element: "Topic" })?;
            Request::GetCurrentMessage { topic: read_topic(topic) }
        }
        Operation::Renew => {
            let time = doc
                .child(first, WSNT, "TerminationTime")
                .ok_or(ParseError::MissingElement { parent: "Renew", element: "TerminationTime" })?;
            Request::Renew { termination_time: read_time(time) }
        }
        Operation::Unsubscribe => Request::Unsubscribe,
        Operation::PauseSubscription => Request::PauseSubscription,
        Operation::ResumeSubscription => Request::ResumeSubscription,
        Operation::CreatePullPoint => Request::CreatePullPoint,
        Operation::GetMessages => {
            let maximum_number = doc.child(first, WSNT, "MaximumNumber").map(read_maximum_number).transpose()?;
            Request::GetMessages { maximum_number }
        }
        Operation::DestroyPullPoint => Request::DestroyPullPoint,
        Operation::RegisterPublisher => Request::RegisterPublisher(read_register_publisher(doc, first)?),
        Operation::DestroyRegistration => Request::DestroyRegistration,
    })
}

fn read_notify(doc: &Document, notify: &Node) -> Result<Vec<NotificationMessage>, ParseError> {
    let messages = doc
        .children(notify)
        .filter(|c| c.is(WSNT, "NotificationMessage"))
        .map(|m| read_notification_message(doc, m))
        .collect::<Result<Vec<_>, _>>()?;
    if messages.is_empty() {
        return Err(ParseError::MissingElement { parent: "Notify", element: "NotificationMessage" });
    }
    Ok(messages)
}

fn read_notification_message(doc: &Document, holder: &Node) -> Result<NotificationMessage, ParseError> {
    let epr = |local: &'static str| doc.child(holder, WSNT, local).map(|n| read_epr(doc, n, local)).transpose();
    let message = doc
        .child(holder, WSNT, "Message")
        .ok_or(ParseError::MissingElement { parent: "NotificationMessage", element: "Message" })?;
    Ok(NotificationMessage {
        subscription_reference: epr("SubscriptionReference")?,
        topic: doc.child(holder, WSNT, "Topic").map(read_topic),
        producer_reference: epr("ProducerReference")?,
        message: read_message(doc, message)?,
    })
}

/// The one element of `wsnt:Message`. Lenient on one point: a Message holding only text (some
/// simple publishers send that) is taken as a text payload, trimmed of the surrounding XML
/// whitespace (indentation), and wrapped.
fn read_message(doc: &Document, message: &Node) -> Result<XmlElement, ParseError> {
    let invalid = |reason: &str| ParseError::InvalidContent { element: "Message", reason: reason.to_owned() };
    let mut elements = doc.children(message);
    let has_text = !message.text.chars().all(dom::is_xml_space);
    match (elements.next(), elements.next()) {
        (Some(only), None) if !has_text => {
            only.captured.clone().map(XmlElement::from_captured).ok_or_else(|| invalid("element was not captured"))
        }
        (None, None) if has_text => {
            Ok(XmlElement::wrap_payload(message.text.trim_matches(dom::is_xml_space).as_bytes(), None))
        }
        (None, None) => Err(invalid("empty; it must hold exactly one element")),
        _ => Err(invalid("it must hold exactly one element and no text")),
    }
}

fn read_subscribe(doc: &Document, subscribe: &Node) -> Result<Subscribe, ParseError> {
    let consumer = doc
        .child(subscribe, WSNT, "ConsumerReference")
        .ok_or(ParseError::MissingElement { parent: "Subscribe", element: "ConsumerReference" })?;
    let mut topic_expressions = Vec::new();
    let mut other_filters = Vec::new();
    if let Some(filter) = doc.child(subscribe, WSNT, "Filter") {
        for f in doc.children(filter) {
            if f.is(WSNT, "TopicExpression") {
                topic_expressions.push(read_topic(f));
            } else {
                other_filters.push(f.qname());
            }
        }
    }
    let mut use_raw = false;
    let mut other_policies = Vec::new();
    if let Some(policy) = doc.child(subscribe, WSNT, "SubscriptionPolicy") {
        for p in doc.children(policy) {
            if p.is(WSNT, "UseRaw") {
                use_raw = true;
            } else {
                other_policies.push(p.qname());
            }
        }
    }
    Ok(Subscribe {
        consumer_reference: read_epr(doc, consumer, "ConsumerReference")?,
        topic_expressions,
        other_filters,
        initial_termination_time: doc.child(subscribe, WSNT, "InitialTerminationTime").and_then(read_time),
        use_raw,
        other_policies,
    })
}

fn read_register_publisher(doc: &Document, register: &Node) -> Result<RegisterPublisher, ParseError> {
    let demand = match doc.child(register, WSN_BR, "Demand").map(|d| d.text.trim()) {
        None | Some("false" | "0") => false,
        Some("true" | "1") => true,
        Some(other) => {
            return Err(ParseError::InvalidContent {
                element: "Demand",
                reason: format!("{other:?} is not an xsd:boolean"),
            });
        }
    };
    Ok(RegisterPublisher {
        publisher_reference: doc
            .child(register, WSN_BR, "PublisherReference")
            .map(|n| read_epr(doc, n, "PublisherReference"))
            .transpose()?,
        topics: doc.children(register).filter(|c| c.is(WSN_BR, "Topic")).map(read_topic).collect(),
        demand,
        initial_termination_time: doc.child(register, WSN_BR, "InitialTerminationTime").and_then(read_time),
    })
}

/// `wsa:EndpointReferenceType`: Address required, ReferenceParameters kept. Either
/// WS-Addressing namespace is accepted.
pub(crate) fn read_epr(doc: &Document, epr: &Node, name: &'static str) -> Result<EndpointReference, ParseError> {
    let child = |local| doc.child(epr, WSA, local).or_else(|| doc.child(epr, WSA_2004, local));
    let address = child("Address").ok_or(ParseError::MissingElement { parent: name, element: "Address" })?;
    let address = address.text.trim();
    if address.is_empty() {
        return Err(ParseError::InvalidContent { element: name, reason: "empty wsa:Address".into() });
    }
    let reference_parameters = child("ReferenceParameters")
        .map(|rp| doc.children(rp).filter_map(|p| p.captured.clone().map(XmlElement::from_captured)).collect())
        .unwrap_or_default();
    Ok(EndpointReference { address: address.to_owned(), reference_parameters })
}

fn read_topic(node: &Node) -> TopicExpression {
    let scope: Vec<NamespaceBinding> = node
        .scope
        .iter()
        .flatten()
        .map(|(prefix, namespace)| NamespaceBinding { prefix: prefix.clone(), namespace: namespace.clone() })
        .collect();
    TopicExpression::new(Dialect::from_uri(node.attr(None, "Dialect")), &node.text, &scope)
}

/// A nillable time element: `None` for `xsi:nil`, else its trimmed text.
fn read_time(node: &Node) -> Option<String> {
    (!node.is_nil()).then(|| node.text.trim().to_owned())
}

/// `xsd:nonNegativeInteger`, saturated to `u32`.
fn read_maximum_number(node: &Node) -> Result<u32, ParseError> {
    let text = node.text.trim();
    let digits = text.strip_prefix('+').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::InvalidContent {
            element: "MaximumNumber",
            reason: format!("{text:?} is not a non-negative integer"),
        });
    }
    Ok(digits.parse::<u32>().unwrap_or(u32::MAX))
}
