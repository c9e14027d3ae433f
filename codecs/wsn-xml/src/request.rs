//! The document model of inbound requests: what a WS-N endpoint needs from each operation's
//! body, and the envelope around it. Parsing is in [`crate::parse`], writing in
//! [`crate::write`].

use crate::element::XmlElement;
use crate::error::ParseError;
use crate::ns::QName;
use crate::operation::Operation;
use crate::security::SecurityHeader;
use crate::soap::{AddressingVersion, SoapVersion};
use crate::topic::TopicExpression;

/// A WS-Addressing endpoint reference: where to send, plus the reference parameters that
/// must come back as SOAP headers on every message sent there (WS-Addressing 1.0 Core §2,
/// SOAP Binding §3.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointReference {
    /// `wsa:Address`, trimmed.
    pub address: String,
    /// Children of `wsa:ReferenceParameters`, each self-contained.
    pub reference_parameters: Vec<XmlElement>,
}

impl EndpointReference {
    /// An EPR with an address only (what tolk hands out: unique URLs, no parameters).
    pub fn new(address: impl Into<String>) -> Self {
        EndpointReference { address: address.into(), reference_parameters: Vec::new() }
    }
}

/// One `wsnt:NotificationMessage` (WS-BaseNotification 1.3 §3.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationMessage {
    /// The subscription this message is delivered for.
    pub subscription_reference: Option<EndpointReference>,
    /// The topic it was published on.
    pub topic: Option<TopicExpression>,
    /// Who produced it.
    pub producer_reference: Option<EndpointReference>,
    /// The one element inside `wsnt:Message`.
    pub message: XmlElement,
}

/// `wsnt:Subscribe` (WS-BaseNotification 1.3 §4.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    /// Where notifications go.
    pub consumer_reference: EndpointReference,
    /// Every `wsnt:TopicExpression` in the Filter. The spec ANDs filter components, so more
    /// than one means the intersection; an empty list with no other filters means "all".
    pub topic_expressions: Vec<TopicExpression>,
    /// Other Filter children (`wsnt:MessageContent`, `wsnt:ProducerProperties`, extensions),
    /// for the endpoint to refuse with InvalidFilterFault / InvalidMessageContentExpressionFault.
    pub other_filters: Vec<QName>,
    /// `wsnt:InitialTerminationTime` as written (dateTime or duration; see
    /// [`TerminationTime::parse`](crate::TerminationTime::parse)). `None` when absent or
    /// `xsi:nil`: no termination time requested.
    pub initial_termination_time: Option<String>,
    /// `wsnt:UseRaw` present in the SubscriptionPolicy: deliver bare message elements.
    pub use_raw: bool,
    /// Other SubscriptionPolicy children, for UnrecognizedPolicyRequestFault.
    pub other_policies: Vec<QName>,
}

/// `wsn-br:RegisterPublisher` (WS-BrokeredNotification 1.3 §6.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterPublisher {
    /// The publisher's own endpoint.
    pub publisher_reference: Option<EndpointReference>,
    /// Topics it will publish on.
    pub topics: Vec<TopicExpression>,
    /// Demand-based publishing requested.
    pub demand: bool,
    /// `wsn-br:InitialTerminationTime` as written.
    pub initial_termination_time: Option<String>,
}

/// An inbound request, dispatched on the expanded name of the Body's first child element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `wsnt:Notify` from a publisher: one or more messages.
    Notify(Vec<NotificationMessage>),
    /// `wsnt:Subscribe`.
    Subscribe(Subscribe),
    /// `wsnt:GetCurrentMessage`.
    GetCurrentMessage {
        /// The topic asked about.
        topic: TopicExpression,
    },
    /// `wsnt:Renew`.
    Renew {
        /// `wsnt:TerminationTime` as written; `None` for `xsi:nil` (no termination).
        termination_time: Option<String>,
    },
    /// `wsnt:Unsubscribe`.
    Unsubscribe,
    /// `wsnt:PauseSubscription`.
    PauseSubscription,
    /// `wsnt:ResumeSubscription`.
    ResumeSubscription,
    /// `wsnt:CreatePullPoint`.
    CreatePullPoint,
    /// `wsnt:GetMessages`.
    GetMessages {
        /// `wsnt:MaximumNumber`, saturated at `u32::MAX`; `None` means no limit.
        maximum_number: Option<u32>,
    },
    /// `wsnt:DestroyPullPoint`.
    DestroyPullPoint,
    /// `wsn-br:RegisterPublisher`.
    RegisterPublisher(RegisterPublisher),
    /// `wsn-br:DestroyRegistration`.
    DestroyRegistration,
    /// Anything else; the endpoint answers a Sender fault naming it.
    Unknown {
        /// Namespace of the Body's first child.
        namespace: Option<String>,
        /// Its local name.
        local_name: String,
    },
}

impl Request {
    /// The operation this request invokes; `None` for [`Request::Unknown`].
    pub fn operation(&self) -> Option<Operation> {
        Some(match self {
            Request::Notify(_) => Operation::Notify,
            Request::Subscribe(_) => Operation::Subscribe,
            Request::GetCurrentMessage { .. } => Operation::GetCurrentMessage,
            Request::Renew { .. } => Operation::Renew,
            Request::Unsubscribe => Operation::Unsubscribe,
            Request::PauseSubscription => Operation::PauseSubscription,
            Request::ResumeSubscription => Operation::ResumeSubscription,
            Request::CreatePullPoint => Operation::CreatePullPoint,
            Request::GetMessages { .. } => Operation::GetMessages,
            Request::DestroyPullPoint => Operation::DestroyPullPoint,
            Request::RegisterPublisher(_) => Operation::RegisterPublisher,
            Request::DestroyRegistration => Operation::DestroyRegistration,
            Request::Unknown { .. } => return None,
        })
    }
}

/// WS-Addressing message headers of a request. All optional: many clients send none, and
/// `To` is never checked (clients behind proxies and NAT put anything there).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressingHeaders {
    /// The WS-Addressing version used, when any WS-Addressing header was present.
    pub version: Option<AddressingVersion>,
    /// `wsa:Action`.
    pub action: Option<String>,
    /// `wsa:MessageID`; echoed as `wsa:RelatesTo` in the reply.
    pub message_id: Option<String>,
    /// `wsa:To`.
    pub to: Option<String>,
    /// `wsa:ReplyTo/wsa:Address`.
    pub reply_to: Option<String>,
}

/// A parsed request envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestEnvelope {
    /// SOAP version, from the Envelope namespace.
    pub soap: SoapVersion,
    /// WS-Addressing headers.
    pub addressing: AddressingHeaders,
    /// The WS-Security header for this node: the UsernameToken a client logs in with.
    pub security: SecurityHeader,
    /// Header blocks marked `mustUnderstand` for this node that tolk does not understand
    /// (anything but WS-Addressing and WS-Security). Non-empty means the endpoint must answer a
    /// MustUnderstand fault instead of processing (SOAP 1.1 §4.2.3, SOAP 1.2 Part 1 §5.2.3).
    pub not_understood: Vec<QName>,
    /// The `tolk:Path` header (namespace [`TOLK`](crate::ns::TOLK)): the brokers the
    /// notifications have passed through bridges, comma-separated, oldest first. tolk drops
    /// what has already passed it, so bridged brokers never loop.
    pub path: Option<String>,
    /// The request in the Body.
    pub request: Request,
}

impl RequestEnvelope {
    /// What a reply to this request needs: version, addressing version, RelatesTo, operation.
    pub fn reply_context(&self) -> ReplyContext {
        ReplyContext {
            soap: self.soap,
            addressing: self.addressing.version.unwrap_or_default(),
            relates_to: self.addressing.message_id.clone(),
            message_id: None,
            operation: self.request.operation(),
        }
    }
}

/// A refused request, with whatever was learnt before the refusal so the fault can be sent
/// in the right SOAP version and related to the right message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct RequestError {
    /// SOAP version, if the Envelope was recognised.
    pub soap: Option<SoapVersion>,
    /// WS-Addressing headers, if the Header was read.
    pub addressing: AddressingHeaders,
    /// The operation, if the Body's first child was recognised.
    pub operation: Option<Operation>,
    /// Why the request was refused.
    #[source]
    pub error: ParseError,
}

impl RequestError {
    /// Reply context for the fault; `fallback` (e.g. from the HTTP `Content-Type`, see
    /// [`SoapVersion::from_content_type`]) is used when the envelope could not be read.
    pub fn reply_context(&self, fallback: SoapVersion) -> ReplyContext {
        ReplyContext {
            soap: self.soap.unwrap_or(fallback),
            addressing: self.addressing.version.unwrap_or_default(),
            relates_to: self.addressing.message_id.clone(),
            message_id: None,
            operation: self.operation,
        }
    }
}

/// What every reply needs from its request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyContext {
    /// Answer in the request's SOAP version.
    pub soap: SoapVersion,
    /// Answer in the request's WS-Addressing version (1.0 when it used none).
    pub addressing: AddressingVersion,
    /// The request's `wsa:MessageID`, written as `wsa:RelatesTo`.
    pub relates_to: Option<String>,
    /// A `wsa:MessageID` for the reply, if the caller made one.
    pub message_id: Option<String>,
    /// The request's operation, for WSDL-specific fault actions.
    pub operation: Option<Operation>,
}

impl ReplyContext {
    /// A context with no request information, e.g. for a fault on unreadable input.
    pub fn new(soap: SoapVersion) -> Self {
        ReplyContext { soap, addressing: AddressingVersion::W3c, relates_to: None, message_id: None, operation: None }
    }
}
