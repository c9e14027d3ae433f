//! Sans-IO document layer for tolk's OASIS WS-BaseNotification 1.3 broker endpoint: SOAP 1.1
//! and 1.2 envelopes, WS-Addressing 1.0 headers, the WS-BaseNotification and
//! WS-BrokeredNotification request and response documents, SOAP faults with WS-BaseFaults
//! details, WS-Topics expressions mapped to tolk's MQTT-style topics, and `xsd:dateTime` /
//! `xsd:duration` termination times.
//!
//! XML is read and written with quick-xml; this crate is the document model on top. It knows
//! nothing of HTTP, sockets, clocks or the broker core: bytes in, values out, values in,
//! bytes out.
//!
//! - Inbound: [`parse_request`] → [`RequestEnvelope`] (or a [`RequestError`] that still
//!   knows enough to answer with a fault in the right SOAP version), with the WS-Security
//!   UsernameToken a client logs in with ([`SecurityHeader`]).
//! - Replies, for tolk's own requests to a remote broker (the WS-N bridge): [`parse_reply`].
//! - Outbound: [`write_response`], [`write_fault`], [`write_notify`],
//!   [`write_raw_notification`], [`write_request`].
//! - Topics: [`TopicExpression::to_filters`] / [`TopicExpression::to_topic`] and back with
//!   [`TopicExpression::from_topic`] / [`TopicExpression::from_filter`].
//! - Payloads: [`XmlElement::from_payload`] / [`XmlElement::to_payload`].
//!
//! Untrusted input is bounded by [`Limits`]; a DOCTYPE is refused; nothing panics on any
//! input.
#![warn(missing_docs)]

mod base64;
mod dom;
mod element;
mod error;
mod fault;
mod limits;
pub mod ns;
mod operation;
mod out;
mod parse;
mod reply;
mod request;
mod response;
mod security;
mod soap;
mod time;
mod topic;
mod write;

pub use element::{PAYLOAD_WRAPPER, Payload, PayloadForm, XML_CONTENT_TYPE, XmlElement};
pub use error::ParseError;
pub use fault::{Fault, FaultKind, write_fault};
pub use limits::Limits;
pub use ns::QName;
pub use operation::{NOTIFY_ACTION, Operation};
pub use parse::parse_request;
pub use reply::{Reply, parse_reply};
pub use request::{
    AddressingHeaders, EndpointReference, NotificationMessage, RegisterPublisher, ReplyContext, Request,
    RequestEnvelope, RequestError, Subscribe,
};
pub use response::{Response, write_empty_response, write_response};
pub use security::{PasswordType, SecurityFault, SecurityHeader, UsernameToken};
pub use soap::{AddressingVersion, SoapVersion, content_type_action};
pub use time::{TerminationTime, TimeError, format_date_time, parse_date_time, parse_duration};
pub use topic::{
    DIALECT_CONCRETE, DIALECT_FULL, DIALECT_SIMPLE, Dialect, MappedTopic, NamespaceBinding, TOPIC_PREFIX, TopicError,
    TopicExpression, decode_level, encode_level, is_ncname,
};
pub use write::{RequestHeaders, write_notify, write_raw_notification, write_request};
