//! AMQP 0-9-1 exceptions (spec §1.2 "Constants", §2.3.6 "Exceptions"): a reply code, a reply text
//! a person can act on, and the scope the code implies. Soft errors close one channel with
//! `channel.close`; hard errors close the whole connection with `connection.close`.
//!
//! This module only describes errors; `session.rs` decides how to send them.

use std::fmt;

use amqp_codec::FrameError;
use tolk_core::CloseReason;

/// AMQP reply codes used by this front end (AMQP 0-9-1 §1.2, constants with `soft-error` or
/// `hard-error` class).
pub mod code {
    /// Normal close (`reply-success`).
    pub const REPLY_SUCCESS: u16 = 200;
    /// `basic.return`: the message could not be routed to any queue.
    pub const NO_ROUTE: u16 = 312;
    /// The broker closes the connection (shutdown, slow consumer).
    pub const CONNECTION_FORCED: u16 = 320;
    /// Soft: the client may not do this (reserved names, default exchange, internal exchange).
    pub const ACCESS_REFUSED: u16 = 403;
    /// Soft: no such queue or exchange.
    pub const NOT_FOUND: u16 = 404;
    /// Soft: the queue is exclusive to another connection.
    pub const RESOURCE_LOCKED: u16 = 405;
    /// Soft: a precondition of the method failed (inequivalent re-declare, unknown delivery tag…).
    pub const PRECONDITION_FAILED: u16 = 406;
    /// Hard: a frame could not be read (bad type, size, end octet).
    pub const FRAME_ERROR: u16 = 501;
    /// Hard: a method's arguments did not decode.
    pub const SYNTAX_ERROR: u16 = 502;
    /// Hard: a method that is not valid here (wrong channel, wrong direction, wrong phase).
    pub const COMMAND_INVALID: u16 = 503;
    /// Hard: a frame on a channel that is not open, or opening one twice.
    pub const CHANNEL_ERROR: u16 = 504;
    /// Hard: a frame of the wrong type for the channel's state (content without publish…).
    pub const UNEXPECTED_FRAME: u16 = 505;
    /// Hard: refused by configuration (vhost, channel_max, frame_max, duplicate consumer tag).
    pub const NOT_ALLOWED: u16 = 530;
    /// Hard: a feature tolk does not implement (transactions, `immediate`, …).
    pub const NOT_IMPLEMENTED: u16 = 540;
    /// Hard: the broker itself failed.
    pub const INTERNAL_ERROR: u16 = 541;
}

/// The upper-case name RabbitMQ (and most client logs) print in front of the text.
pub fn code_name(code: u16) -> &'static str {
    match code {
        code::REPLY_SUCCESS => "OK",
        code::NO_ROUTE => "NO_ROUTE",
        code::CONNECTION_FORCED => "CONNECTION_FORCED",
        code::ACCESS_REFUSED => "ACCESS_REFUSED",
        code::NOT_FOUND => "NOT_FOUND",
        code::RESOURCE_LOCKED => "RESOURCE_LOCKED",
        code::PRECONDITION_FAILED => "PRECONDITION_FAILED",
        code::FRAME_ERROR => "FRAME_ERROR",
        code::SYNTAX_ERROR => "SYNTAX_ERROR",
        code::COMMAND_INVALID => "COMMAND_INVALID",
        code::CHANNEL_ERROR => "CHANNEL_ERROR",
        code::UNEXPECTED_FRAME => "UNEXPECTED_FRAME",
        code::NOT_ALLOWED => "NOT_ALLOWED",
        code::NOT_IMPLEMENTED => "NOT_IMPLEMENTED",
        code::INTERNAL_ERROR => "INTERNAL_ERROR",
        _ => "ERROR",
    }
}

/// Whether an error closes one channel or the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Soft error: `channel.close`, the connection and its other channels carry on.
    Channel,
    /// Hard error: `connection.close`.
    Connection,
}

/// One AMQP exception, ready to be sent as `channel.close` or `connection.close`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmqpError {
    /// Reply code (see [`code`]).
    pub code: u16,
    /// `"NOT_FOUND - no queue 'x' in vhost '/'"`: code name, then what went wrong.
    pub text: String,
    /// Channel or connection.
    pub scope: Scope,
    /// Class of the method that failed (0 when no method was involved).
    pub class_id: u16,
    /// Method that failed (0 when no method was involved).
    pub method_id: u16,
    /// How the connection's end is labelled in metrics when this is a hard error.
    pub close_reason: CloseReason,
}

impl AmqpError {
    fn new(code: u16, scope: Scope, detail: impl fmt::Display) -> Self {
        AmqpError {
            code,
            text: format!("{} - {detail}", code_name(code)),
            scope,
            class_id: 0,
            method_id: 0,
            close_reason: CloseReason::ProtocolError,
        }
    }

    /// Soft 403.
    pub fn access_refused(detail: impl fmt::Display) -> Self {
        Self::new(code::ACCESS_REFUSED, Scope::Channel, detail)
    }

    /// Soft 404.
    pub fn not_found(detail: impl fmt::Display) -> Self {
        Self::new(code::NOT_FOUND, Scope::Channel, detail)
    }

    /// Soft 405.
    pub fn resource_locked(detail: impl fmt::Display) -> Self {
        Self::new(code::RESOURCE_LOCKED, Scope::Channel, detail)
    }

    /// Soft 406.
    pub fn precondition_failed(detail: impl fmt::Display) -> Self {
        Self::new(code::PRECONDITION_FAILED, Scope::Channel, detail)
    }

    /// Hard 501.
    pub fn frame_error(detail: impl fmt::Display) -> Self {
        Self::new(code::FRAME_ERROR, Scope::Connection, detail)
    }

    /// Hard 502.
    pub fn syntax_error(detail: impl fmt::Display) -> Self {
        Self::new(code::SYNTAX_ERROR, Scope::Connection, detail)
    }

    /// Hard 503.
    pub fn command_invalid(detail: impl fmt::Display) -> Self {
        Self::new(code::COMMAND_INVALID, Scope::Connection, detail)
    }

    /// Hard 504.
    pub fn channel_error(detail: impl fmt::Display) -> Self {
        Self::new(code::CHANNEL_ERROR, Scope::Connection, detail)
    }

    /// Hard 505.
    pub fn unexpected_frame(detail: impl fmt::Display) -> Self {
        Self::new(code::UNEXPECTED_FRAME, Scope::Connection, detail)
    }

    /// Hard 530.
    pub fn not_allowed(detail: impl fmt::Display) -> Self {
        Self::new(code::NOT_ALLOWED, Scope::Connection, detail)
    }

    /// Hard 540.
    pub fn not_implemented(detail: impl fmt::Display) -> Self {
        Self::new(code::NOT_IMPLEMENTED, Scope::Connection, detail)
    }

    /// Hard 541.
    pub fn internal_error(detail: impl fmt::Display) -> Self {
        Self::new(code::INTERNAL_ERROR, Scope::Connection, detail)
    }

    /// Hard 320, used when the broker ends a healthy connection.
    pub fn connection_forced(detail: impl fmt::Display) -> Self {
        Self::new(code::CONNECTION_FORCED, Scope::Connection, detail)
    }

    /// Hard 403: login refused during the handshake (the `authentication_failure_close`
    /// capability promises clients a `connection.close` rather than a dropped socket).
    pub fn auth_refused(detail: impl fmt::Display) -> Self {
        let mut e = Self::new(code::ACCESS_REFUSED, Scope::Connection, detail);
        e.close_reason = CloseReason::AuthFailed;
        e
    }

    /// Labels the connection's end as a limit breach (frame too large, too many channels…).
    pub fn limit(mut self) -> Self {
        self.close_reason = CloseReason::LimitExceeded;
        self
    }

    /// Names the method that failed, echoed in the close frame so clients can report it.
    pub fn during(mut self, class_id: u16, method_id: u16) -> Self {
        if self.class_id == 0 && self.method_id == 0 {
            self.class_id = class_id;
            self.method_id = method_id;
        }
        self
    }

    /// The reply text cut to the 255 bytes a short string can hold, on a character boundary.
    pub fn short_text(&self) -> &str {
        truncate_utf8(&self.text, 255)
    }
}

impl fmt::Display for AmqpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code, self.text)
    }
}

impl std::error::Error for AmqpError {}

/// The longest prefix of `s` that fits in `max` bytes without splitting a character.
pub fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl From<&FrameError> for AmqpError {
    /// The connection exception the spec prescribes for this framing failure.
    fn from(error: &FrameError) -> Self {
        match error {
            FrameError::TooLarge { .. } => AmqpError::frame_error(error).limit(),
            FrameError::UnknownType { .. }
            | FrameError::BadFrameEnd { .. }
            | FrameError::BadHeartbeat { .. }
            | FrameError::ShortMethod { .. }
            | FrameError::BadProtocolHeader(_) => AmqpError::frame_error(error),
            FrameError::UnknownMethod { class_id, method_id, .. } => {
                AmqpError::not_implemented(error).during(*class_id, *method_id)
            }
            FrameError::MalformedMethod { class_id, method_id, .. } => {
                AmqpError::syntax_error(error).during(*class_id, *method_id)
            }
            FrameError::MalformedHeader { .. } => AmqpError::syntax_error(error),
            FrameError::TooDeep { .. } => AmqpError::syntax_error(error).limit(),
            FrameError::PrefetchSize(_) => AmqpError::not_implemented(error).during(60, 10),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_name_the_code_and_scopes_follow_the_spec() {
        let e = AmqpError::not_found("no queue 'x' in vhost '/'");
        assert_eq!(e.text, "NOT_FOUND - no queue 'x' in vhost '/'");
        assert_eq!((e.code, e.scope), (404, Scope::Channel));
        assert_eq!(AmqpError::not_implemented("tx").scope, Scope::Connection);
        assert_eq!(AmqpError::frame_error("x").limit().close_reason, CloseReason::LimitExceeded);
        assert_eq!(AmqpError::from(&FrameError::PrefetchSize(1)).code, 540, "basic.qos prefetch-size: 540");
        let e = AmqpError::precondition_failed("x").during(60, 80).during(1, 1);
        assert_eq!((e.class_id, e.method_id), (60, 80));
    }

    #[test]
    fn long_texts_are_cut_on_a_character_boundary() {
        let e = AmqpError::not_found("é".repeat(200));
        assert!(e.short_text().len() <= 255);
        assert!(e.short_text().ends_with('é'));
    }
}
