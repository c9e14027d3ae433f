//! SOAP faults in both versions, with WS-N fault details.
//!
//! - SOAP 1.1 (§4.4): `faultcode` (`soap:Client`, `soap:Server`, `soap:VersionMismatch`,
//!   `soap:MustUnderstand`), `faultstring`, `detail`.
//! - SOAP 1.2 (Part 1 §5.4): `Code/Value` (`soap:Sender`, `soap:Receiver`, …) with the WS-N
//!   fault's QName as `Subcode/Value`, `Reason/Text xml:lang="en"`, `Detail`; plus the
//!   `NotUnderstood` and `Upgrade` header blocks for MustUnderstand and VersionMismatch.
//!
//! Every WS-N fault detail element extends `wsrf-bf:BaseFaultType`: a required
//! `wsrf-bf:Timestamp`, then `wsrf-bf:Description` (the reason), then the fault's own
//! elements (`UnknownFilter`, `MinimumTime`, …) as b-2.xsd and br-2.xsd define them.
//!
//! WS-Security faults (WSS 1.0 §12) carry no detail: their code is the `wsse:` QName itself,
//! as the SOAP 1.1 `faultcode` and as the SOAP 1.2 `Subcode` under `Sender`.
//!
//! The fault's WS-Addressing Action is the WSDL default for that fault of that operation when
//! both are known, otherwise the WS-Addressing generic SOAP fault action.

use bytes::Bytes;

use crate::error::ParseError;
use crate::ns::{QName, SOAP11_ENV, SOAP12_ENV, WSN_BR, WSNT, WSRF_BF, WSRF_R, WSSE};
use crate::out::Out;
use crate::request::ReplyContext;
use crate::request::RequestError;
use crate::response::reply_headers;
use crate::security::SecurityFault;
use crate::soap::SoapVersion;
use crate::time::format_date_time;
use crate::topic::TopicError;
use crate::write::envelope;

/// What went wrong, as a SOAP fault code plus, for WS-N faults, the detail element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultKind {
    /// The Envelope namespace is not a SOAP version tolk speaks.
    VersionMismatch,
    /// Header blocks marked mustUnderstand that tolk does not understand.
    MustUnderstand {
        /// Their names (SOAP 1.2 lists them in `NotUnderstood` headers).
        headers: Vec<QName>,
    },
    /// Generic client error: not a SOAP envelope, malformed XML, unknown operation, missing
    /// required element.
    Sender,
    /// Generic server error.
    Receiver,
    /// `wsrf-r:ResourceUnknownFault`: no such subscription / pull point / registration.
    ResourceUnknown,
    /// `wsnt:SubscribeCreationFailedFault`.
    SubscribeCreationFailed,
    /// `wsnt:InvalidFilterFault`.
    InvalidFilter {
        /// The filter elements not understood (at least one, per b-2.xsd).
        unknown_filters: Vec<QName>,
    },
    /// `wsnt:TopicExpressionDialectUnknownFault`.
    TopicExpressionDialectUnknown,
    /// `wsnt:InvalidTopicExpressionFault`.
    InvalidTopicExpression,
    /// `wsnt:TopicNotSupportedFault`.
    TopicNotSupported,
    /// `wsnt:MultipleTopicsSpecifiedFault`.
    MultipleTopicsSpecified,
    /// `wsnt:InvalidProducerPropertiesExpressionFault`.
    InvalidProducerPropertiesExpression,
    /// `wsnt:InvalidMessageContentExpressionFault`.
    InvalidMessageContentExpression,
    /// `wsnt:UnrecognizedPolicyRequestFault`.
    UnrecognizedPolicyRequest {
        /// The policies not recognised.
        policies: Vec<QName>,
    },
    /// `wsnt:UnsupportedPolicyRequestFault`.
    UnsupportedPolicyRequest {
        /// The policies recognised but not supported.
        policies: Vec<QName>,
    },
    /// `wsnt:NotifyMessageNotSupportedFault`.
    NotifyMessageNotSupported,
    /// `wsnt:UnacceptableInitialTerminationTimeFault`.
    UnacceptableInitialTerminationTime {
        /// Earliest acceptable time (Unix ms).
        minimum_unix_millis: i64,
        /// Latest acceptable time (Unix ms), if bounded.
        maximum_unix_millis: Option<i64>,
    },
    /// `wsnt:UnacceptableTerminationTimeFault` (Renew).
    UnacceptableTerminationTime {
        /// Earliest acceptable time (Unix ms).
        minimum_unix_millis: i64,
        /// Latest acceptable time (Unix ms), if bounded.
        maximum_unix_millis: Option<i64>,
    },
    /// `wsnt:NoCurrentMessageOnTopicFault`.
    NoCurrentMessageOnTopic,
    /// `wsnt:UnableToGetMessagesFault`.
    UnableToGetMessages,
    /// `wsnt:UnableToDestroyPullPointFault`.
    UnableToDestroyPullPoint,
    /// `wsnt:UnableToCreatePullPointFault`.
    UnableToCreatePullPoint,
    /// `wsnt:UnableToDestroySubscriptionFault`.
    UnableToDestroySubscription,
    /// `wsnt:PauseFailedFault`.
    PauseFailed,
    /// `wsnt:ResumeFailedFault`.
    ResumeFailed,
    /// `wsn-br:PublisherRegistrationRejectedFault`.
    PublisherRegistrationRejected,
    /// `wsn-br:PublisherRegistrationFailedFault`.
    PublisherRegistrationFailed,
    /// `wsn-br:ResourceNotDestroyedFault`.
    ResourceNotDestroyed,
    /// A WS-Security fault (WSS 1.0 §12): a login refused, or a security header tolk cannot
    /// process.
    Security(SecurityFault),
}

impl FaultKind {
    /// The detail element `(namespace, local name)` of a WS-N fault; `None` for the generic
    /// SOAP faults.
    pub fn detail_element(&self) -> Option<(&'static str, &'static str)> {
        use FaultKind::*;
        Some(match self {
            VersionMismatch | MustUnderstand { .. } | Sender | Receiver | Security(_) => return None,
            ResourceUnknown => (WSRF_R, "ResourceUnknownFault"),
            SubscribeCreationFailed => (WSNT, "SubscribeCreationFailedFault"),
            InvalidFilter { .. } => (WSNT, "InvalidFilterFault"),
            TopicExpressionDialectUnknown => (WSNT, "TopicExpressionDialectUnknownFault"),
            InvalidTopicExpression => (WSNT, "InvalidTopicExpressionFault"),
            TopicNotSupported => (WSNT, "TopicNotSupportedFault"),
            MultipleTopicsSpecified => (WSNT, "MultipleTopicsSpecifiedFault"),
            InvalidProducerPropertiesExpression => (WSNT, "InvalidProducerPropertiesExpressionFault"),
            InvalidMessageContentExpression => (WSNT, "InvalidMessageContentExpressionFault"),
            UnrecognizedPolicyRequest { .. } => (WSNT, "UnrecognizedPolicyRequestFault"),
            UnsupportedPolicyRequest { .. } => (WSNT, "UnsupportedPolicyRequestFault"),
            NotifyMessageNotSupported => (WSNT, "NotifyMessageNotSupportedFault"),
            UnacceptableInitialTerminationTime { .. } => (WSNT, "UnacceptableInitialTerminationTimeFault"),
            UnacceptableTerminationTime { .. } => (WSNT, "UnacceptableTerminationTimeFault"),
            NoCurrentMessageOnTopic => (WSNT, "NoCurrentMessageOnTopicFault"),
            UnableToGetMessages => (WSNT, "UnableToGetMessagesFault"),
            UnableToDestroyPullPoint => (WSNT, "UnableToDestroyPullPointFault"),
            UnableToCreatePullPoint => (WSNT, "UnableToCreatePullPointFault"),
            UnableToDestroySubscription => (WSNT, "UnableToDestroySubscriptionFault"),
            PauseFailed => (WSNT, "PauseFailedFault"),
            ResumeFailed => (WSNT, "ResumeFailedFault"),
            PublisherRegistrationRejected => (WSN_BR, "PublisherRegistrationRejectedFault"),
            PublisherRegistrationFailed => (WSN_BR, "PublisherRegistrationFailedFault"),
            ResourceNotDestroyed => (WSN_BR, "ResourceNotDestroyedFault"),
        })
    }

    /// The SOAP 1.2 `Subcode`: the WS-N fault's detail element, or the WS-Security code.
    fn subcode(&self) -> Option<(&'static str, &'static str)> {
        match self {
            FaultKind::Security(code) => Some((WSSE, code.local_name())),
            other => other.detail_element(),
        }
    }

    /// Whether the client is at fault (SOAP 1.1 `Client`, SOAP 1.2 `Sender`). Faults about
    /// the request's content are; failures to carry out a valid request (creation,
    /// destruction, pause, resume, registration failed) are the receiver's.
    pub fn is_sender(&self) -> bool {
        use FaultKind::*;
        !matches!(
            self,
            VersionMismatch
                | MustUnderstand { .. }
                | Receiver
                | SubscribeCreationFailed
                | UnableToGetMessages
                | UnableToDestroyPullPoint
                | UnableToCreatePullPoint
                | UnableToDestroySubscription
                | PauseFailed
                | ResumeFailed
                | PublisherRegistrationFailed
                | ResourceNotDestroyed
        )
    }
}

/// A fault to send. The timestamp is passed in: this crate reads no clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The kind.
    pub kind: FaultKind,
    /// Human-readable reason (faultstring / Reason / BaseFault Description).
    pub reason: String,
    /// When it happened, Unix ms (the BaseFault Timestamp).
    pub timestamp_unix_millis: i64,
}

impl Fault {
    /// Builds a fault.
    pub fn new(kind: FaultKind, reason: impl Into<String>, timestamp_unix_millis: i64) -> Self {
        Fault { kind, reason: reason.into(), timestamp_unix_millis }
    }

    /// HTTP status of every fault answer, in both SOAP versions. SOAP 1.1 (§6.2) requires 500.
    /// SOAP 1.2 (Part 2 §7.5.1.2) suggests 400 for Sender faults, but Apache CXF, the most used
    /// WS-N client stack, reads a typed fault only from a 500 (a 400 becomes a bare HTTP
    /// error), and CXF, Axis2 and WCF servers all answer SOAP faults with 500. Requests that
    /// are not SOAP at all get 400 instead: see [`RequestError::http_status`].
    pub const HTTP_STATUS: u16 = 500;
}

impl ParseError {
    /// The fault answering this refusal: VersionMismatch for a foreign Envelope namespace,
    /// otherwise a Sender (Client) fault.
    pub fn fault_kind(&self) -> FaultKind {
        match self {
            ParseError::VersionMismatch { .. } => FaultKind::VersionMismatch,
            _ => FaultKind::Sender,
        }
    }

    /// Whether the input is not a SOAP message at all: not well-formed XML, not UTF-8, a DTD
    /// (SOAP 1.1 §3 and SOAP 1.2 Part 1 §5 forbid one), or a root element other than an
    /// Envelope. Such a request is answered `400`, not as a SOAP fault's `500`, so that an
    /// HTTP client that sent something else entirely is told so in HTTP terms.
    pub fn is_not_soap(&self) -> bool {
        matches!(
            self,
            ParseError::NotUtf8 { .. }
                | ParseError::UnsupportedEncoding { .. }
                | ParseError::Malformed { .. }
                | ParseError::Doctype { .. }
                | ParseError::UndefinedEntity { .. }
                | ParseError::UnknownPrefix { .. }
                | ParseError::NotSoapEnvelope { .. }
        )
    }
}

impl RequestError {
    /// HTTP status answering this refusal: `413` for a document over the size limit, `400`
    /// for a request that is not SOAP (see [`ParseError::is_not_soap`]) or that hit a parsing
    /// limit before showing a SOAP Envelope, and [`Fault::HTTP_STATUS`] for everything else
    /// (a SOAP envelope the broker refuses, VersionMismatch included).
    pub fn http_status(&self) -> u16 {
        match &self.error {
            ParseError::TooLarge { .. } => 413,
            e if e.is_not_soap() => 400,
            ParseError::VersionMismatch { .. } => Fault::HTTP_STATUS,
            _ if self.soap.is_none() => 400,
            _ => Fault::HTTP_STATUS,
        }
    }
}

impl TopicError {
    /// The WS-N fault answering this topic error.
    pub fn fault_kind(&self) -> FaultKind {
        match self {
            TopicError::UnknownDialect(_) => FaultKind::TopicExpressionDialectUnknown,
            TopicError::Invalid { .. } | TopicError::Unsupported { .. } | TopicError::NotConcrete { .. } => {
                FaultKind::InvalidTopicExpression
            }
            TopicError::NotRepresentable { .. } => FaultKind::Receiver,
        }
    }
}

/// Writes a fault envelope in the context's SOAP version.
pub fn write_fault(ctx: &ReplyContext, fault: &Fault) -> Bytes {
    let action = match (ctx.operation, fault.kind.detail_element()) {
        (Some(op), Some((_, name))) => op.fault_action(name),
        _ => ctx.addressing.soap_fault_action().to_owned(),
    };
    envelope(
        ctx.soap,
        ctx.addressing,
        |out, hp| {
            reply_headers(out, hp, ctx, Some(&action));
            if ctx.soap == SoapVersion::V12 {
                soap12_fault_headers(out, &fault.kind);
            }
        },
        |out| match ctx.soap {
            SoapVersion::V11 => soap11_fault(out, fault),
            SoapVersion::V12 => soap12_fault(out, fault),
        },
    )
}

/// SOAP 1.2 Part 1 §5.4.8 (NotUnderstood) and §5.4.7 (Upgrade).
fn soap12_fault_headers(out: &mut Out, kind: &FaultKind) {
    match kind {
        FaultKind::MustUnderstand { headers } => {
            for h in headers {
                let (qname, decl) = qname_text(h, "q");
                let mut attrs = vec![("qname", qname.as_str())];
                if let Some(ns) = decl {
                    attrs.push(("xmlns:q", ns));
                }
                out.empty("soap:NotUnderstood", &attrs);
            }
        }
        FaultKind::VersionMismatch => {
            out.start("soap:Upgrade", &[]);
            out.empty("soap:SupportedEnvelope", &[("qname", "s12:Envelope"), ("xmlns:s12", SOAP12_ENV)]);
            out.empty("soap:SupportedEnvelope", &[("qname", "s11:Envelope"), ("xmlns:s11", SOAP11_ENV)]);
            out.end("soap:Upgrade");
        }
        _ => {}
    }
}

/// The QName as element/attribute content with `prefix`, and the namespace to bind to it.
fn qname_text<'a>(q: &'a QName, prefix: &str) -> (String, Option<&'a str>) {
    match &q.namespace {
        Some(ns) => (format!("{prefix}:{}", q.local_name), Some(ns.as_str())),
        None => (q.local_name.clone(), None),
    }
}

fn soap11_fault(out: &mut Out, fault: &Fault) {
    out.start("soap:Fault", &[]);
    match fault.kind {
        // WSS 1.0 §12: the WS-Security code is the faultcode itself.
        FaultKind::Security(code) => {
            out.leaf("faultcode", &[("xmlns:wsse", WSSE)], &format!("wsse:{}", code.local_name()));
        }
        FaultKind::VersionMismatch => out.leaf("faultcode", &[], "soap:VersionMismatch"),
        FaultKind::MustUnderstand { .. } => out.leaf("faultcode", &[], "soap:MustUnderstand"),
        ref k if k.is_sender() => out.leaf("faultcode", &[], "soap:Client"),
        _ => out.leaf("faultcode", &[], "soap:Server"),
    }
    out.leaf("faultstring", &[], &fault.reason);
    if fault.kind.detail_element().is_some() {
        out.start("detail", &[]);
        detail(out, fault);
        out.end("detail");
    }
    out.end("soap:Fault");
}

fn soap12_fault(out: &mut Out, fault: &Fault) {
    let code = match fault.kind {
        FaultKind::VersionMismatch => "soap:VersionMismatch",
        FaultKind::MustUnderstand { .. } => "soap:MustUnderstand",
        ref k if k.is_sender() => "soap:Sender",
        _ => "soap:Receiver",
    };
    out.start("soap:Fault", &[]);
    out.start("soap:Code", &[]);
    out.leaf("soap:Value", &[], code);
    if let Some((ns, local)) = fault.kind.subcode() {
        out.start("soap:Subcode", &[]);
        // `wsse:` as WSS 1.0 §12 writes its codes; `f:` for WS-N faults.
        match fault.kind {
            FaultKind::Security(_) => out.leaf("soap:Value", &[("xmlns:wsse", ns)], &format!("wsse:{local}")),
            _ => out.leaf("soap:Value", &[("xmlns:f", ns)], &format!("f:{local}")),
        }
        out.end("soap:Subcode");
    }
    out.end("soap:Code");
    out.start("soap:Reason", &[]);
    out.leaf("soap:Text", &[("xml:lang", "en")], &fault.reason);
    out.end("soap:Reason");
    if fault.kind.detail_element().is_some() {
        out.start("soap:Detail", &[]);
        detail(out, fault);
        out.end("soap:Detail");
    }
    out.end("soap:Fault");
}

/// The WS-N fault element: BaseFaultType content, then the fault's own elements.
fn detail(out: &mut Out, fault: &Fault) {
    let Some((ns, local)) = fault.kind.detail_element() else { return };
    let name = format!("f:{local}");
    out.start(&name, &[("xmlns:f", ns), ("xmlns:wsrf-bf", WSRF_BF)]);
    out.leaf("wsrf-bf:Timestamp", &[], &format_date_time(fault.timestamp_unix_millis));
    out.leaf("wsrf-bf:Description", &[("xml:lang", "en")], &fault.reason);
    let qnames = |out: &mut Out, element: &str, names: &[QName]| {
        for q in names {
            let (text, decl) = qname_text(q, "q");
            match decl {
                Some(ns) => out.leaf(element, &[("xmlns:q", ns)], &text),
                None => out.leaf(element, &[], &text),
            }
        }
    };
    match &fault.kind {
        FaultKind::InvalidFilter { unknown_filters } => qnames(out, "f:UnknownFilter", unknown_filters),
        FaultKind::UnrecognizedPolicyRequest { policies } => qnames(out, "f:UnrecognizedPolicy", policies),
        FaultKind::UnsupportedPolicyRequest { policies } => qnames(out, "f:UnsupportedPolicy", policies),
        FaultKind::UnacceptableInitialTerminationTime { minimum_unix_millis, maximum_unix_millis }
        | FaultKind::UnacceptableTerminationTime { minimum_unix_millis, maximum_unix_millis } => {
            out.leaf("f:MinimumTime", &[], &format_date_time(*minimum_unix_millis));
            if let Some(max) = maximum_unix_millis {
                out.leaf("f:MaximumTime", &[], &format_date_time(*max));
            }
        }
        _ => {}
    }
    out.end(&name);
}
