//! [`StompError`]: why a session ends with an ERROR frame. Every error here is fatal for the
//! connection (STOMP 1.2 "ERROR": the server MUST close the connection after sending it); the
//! session turns it into the ERROR frame and the connection's close reason.

use std::fmt;

use stomp_codec::{DecodeError, Frame};
use tolk_core::CloseReason;

/// A protocol failure: what the client did, for the ERROR frame's `message` header and body,
/// and which close reason it counts as.
///
/// Public (though not re-exported) because [`crate::translate::message_from_send`] returns it,
/// for the translation benchmarks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StompError {
    /// Metric label and log reason.
    pub reason: CloseReason,
    /// One line for the `message` header.
    pub message: String,
    /// Extra text for the body (may be empty).
    pub detail: String,
    /// Extra headers for the ERROR frame (the `version` list of a failed negotiation).
    pub headers: Vec<(&'static str, String)>,
}

impl StompError {
    /// The client broke a protocol rule.
    pub fn protocol(message: impl Into<String>) -> Self {
        Self::new(CloseReason::ProtocolError, message)
    }

    /// The client went past a configured bound.
    pub fn limit(message: impl Into<String>) -> Self {
        Self::new(CloseReason::LimitExceeded, message)
    }

    /// The access-control list refused what the client asked for.
    pub fn not_authorized(message: impl Into<String>) -> Self {
        Self::new(CloseReason::NotAuthorized, message)
    }

    /// An error with an explicit close reason.
    pub fn new(reason: CloseReason, message: impl Into<String>) -> Self {
        StompError { reason, message: message.into(), detail: String::new(), headers: Vec::new() }
    }

    /// A required header is absent.
    pub fn missing_header(command: &str, header: &str) -> Self {
        Self::protocol(format!("{command} frame has no '{header}' header"))
    }

    /// Adds body text (builder style).
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }

    /// Adds a header to the ERROR frame (builder style).
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// The ERROR frame, answering a frame that asked for `receipt` when there is one (spec
    /// "ERROR": the server SHOULD set `receipt-id` to identify the frame that failed).
    pub fn to_frame(&self, receipt: Option<&str>) -> Frame {
        let mut frame = Frame::error(&self.message, self.detail.clone());
        for (name, value) in &self.headers {
            frame.headers.push(*name, value.as_str());
        }
        if let Some(receipt) = receipt {
            frame.headers.push("receipt-id", receipt);
        }
        frame
    }
}

impl fmt::Display for StompError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<DecodeError> for StompError {
    fn from(error: DecodeError) -> Self {
        let reason = match error {
            DecodeError::HeaderLineTooLong { .. }
            | DecodeError::TooManyHeaders { .. }
            | DecodeError::FrameTooLarge { .. } => CloseReason::LimitExceeded,
            _ => CloseReason::ProtocolError,
        };
        StompError::new(reason, format!("malformed frame: {error}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_count_as_limit_exceeded() {
        let e = StompError::from(DecodeError::TooManyHeaders { limit: 2 });
        assert_eq!(e.reason, CloseReason::LimitExceeded);
        let e = StompError::from(DecodeError::UnknownCommand { command: "FOO".into() });
        assert_eq!(e.reason, CloseReason::ProtocolError);
        assert!(e.message.contains("FOO"));
    }

    #[test]
    fn error_frame_echoes_receipt_and_extra_headers() {
        let frame = StompError::protocol("no").with_header("version", "1.2").to_frame(Some("r1"));
        assert_eq!(frame.header("message"), Some("no"));
        assert_eq!(frame.header("version"), Some("1.2"));
        assert_eq!(frame.header("receipt-id"), Some("r1"));
    }
}
