//! Why a request is refused, before it becomes a SOAP fault: the WS-N fault kind and a reason
//! written for the client. Operations return `Result<_, Refusal>`; the HTTP layer writes the
//! fault in the caller's SOAP version with the right status (see [`crate::http`]).

use std::fmt;

use wsn_xml::FaultKind;

/// A refused request: which fault, and why (the `faultstring` / `Reason` and the BaseFault
/// `Description`).
///
/// Public (though not re-exported) because [`crate::translate::message_from_notification`]
/// returns it, for the translation benchmarks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The fault to send.
    pub kind: FaultKind,
    /// Human-readable reason.
    pub reason: String,
}

impl Refusal {
    /// A refusal of `kind` because of `reason`.
    pub(crate) fn new(kind: FaultKind, reason: impl Into<String>) -> Self {
        Refusal { kind, reason: reason.into() }
    }

    /// A generic client error (SOAP 1.1 `Client`, SOAP 1.2 `Sender`).
    pub(crate) fn sender(reason: impl Into<String>) -> Self {
        Refusal::new(FaultKind::Sender, reason)
    }

    /// `wsrf-r:ResourceUnknownFault`: the subscription or pull point addressed does not exist
    /// (never did, was removed, or expired).
    pub(crate) fn resource_unknown(what: &str, id: &str) -> Self {
        Refusal::new(FaultKind::ResourceUnknown, format!("no {what} {:?} (it may have expired)", shorten(id)))
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

/// Client-supplied text quoted in a reason or a log line, cut so that a hostile client cannot
/// make either large.
pub(crate) fn shorten(text: &str) -> String {
    const MAX_CHARS: usize = 120;
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(MAX_CHARS).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}
