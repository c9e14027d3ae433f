//! [`Frame`]: one STOMP frame, plus small constructors for the frames a server writes. The
//! constructors know the spec's header names, never brokers, topics or sessions.

use bytes::Bytes;

use crate::command::Command;
use crate::headers::Headers;
use crate::heartbeat::HeartBeat;
use crate::text::Utf8Bytes;
use crate::version::Version;

/// A decoded or to-be-encoded frame (spec "STOMP Frames": command, headers, body).
///
/// The body is raw bytes: STOMP bodies may be binary and may contain NULs when a
/// `content-length` header frames them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The frame's command.
    pub command: Command,
    /// Headers in wire order; for a decoded frame, escapes are already decoded.
    pub headers: Headers,
    /// The body, without the terminating NUL.
    pub body: Bytes,
}

impl Frame {
    /// A frame with no headers and an empty body.
    pub fn new(command: Command) -> Self {
        Self { command, headers: Headers::new(), body: Bytes::new() }
    }

    /// Appends a header (builder style).
    pub fn with_header(mut self, name: impl Into<Utf8Bytes>, value: impl Into<Utf8Bytes>) -> Self {
        self.headers.push(name, value);
        self
    }

    /// Sets the body (builder style). The encoder adds the matching `content-length`.
    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Shortcut for `self.headers.get(name)`: the first occurrence wins.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)
    }

    /// CONNECTED answering a successful CONNECT/STOMP (spec "CONNECTED Frame"): `version`,
    /// `heart-beat` (the server's `sx,sy`; left out for 1.0, which has no heart-beating) and
    /// `server` (`name/version`). Add `session` with [`Frame::with_header`] if wanted.
    pub fn connected(version: Version, heart_beat: HeartBeat, server: impl Into<Utf8Bytes>) -> Self {
        let mut frame = Frame::new(Command::Connected)
            .with_header(Utf8Bytes::from_static("version"), Utf8Bytes::from_static(version.as_str()));
        if version != Version::V1_0 {
            frame = frame.with_header(Utf8Bytes::from_static("heart-beat"), heart_beat.to_string());
        }
        frame.with_header(Utf8Bytes::from_static("server"), server)
    }

    /// RECEIPT for a frame that carried `receipt:<id>` (spec "RECEIPT").
    pub fn receipt(receipt_id: impl Into<Utf8Bytes>) -> Self {
        Frame::new(Command::Receipt).with_header(Utf8Bytes::from_static("receipt-id"), receipt_id)
    }

    /// ERROR with a short `message` header and an optional detailed body (spec "ERROR"). A
    /// non-empty body gets `content-type:text/plain`; the encoder adds `content-length`.
    ///
    /// Line breaks in `message` become spaces: an ERROR may go out before the version is
    /// negotiated, when header values cannot be escaped. Add `receipt-id` with
    /// [`Frame::with_header`] when the error answers a frame that asked for a receipt.
    pub fn error(message: &str, detail: impl Into<Bytes>) -> Self {
        let message: String = message
            .chars()
            .map(|c| match c {
                '\r' | '\n' | '\0' => ' ',
                other => other,
            })
            .collect();
        let mut frame =
            Frame::new(Command::Error).with_header(Utf8Bytes::from_static("message"), message).with_body(detail);
        if !frame.body.is_empty() {
            frame = frame.with_header(Utf8Bytes::from_static("content-type"), Utf8Bytes::from_static("text/plain"));
        }
        frame
    }

    /// MESSAGE delivering `body` to a subscription (spec "MESSAGE": `destination`,
    /// `message-id` and `subscription` are required). Add `ack`, `content-type` and copied
    /// user headers with [`Frame::with_header`].
    pub fn message(
        destination: impl Into<Utf8Bytes>,
        message_id: impl Into<Utf8Bytes>,
        subscription: impl Into<Utf8Bytes>,
        body: impl Into<Bytes>,
    ) -> Self {
        Frame::new(Command::Message)
            .with_header(Utf8Bytes::from_static("destination"), destination)
            .with_header(Utf8Bytes::from_static("message-id"), message_id)
            .with_header(Utf8Bytes::from_static("subscription"), subscription)
            .with_body(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connected_carries_version_heart_beat_and_server() {
        let frame = Frame::connected(Version::V1_2, HeartBeat::new(10_000, 10_000), "tolk/0.1");
        assert_eq!(frame.command, Command::Connected);
        assert_eq!(frame.header("version"), Some("1.2"));
        assert_eq!(frame.header("heart-beat"), Some("10000,10000"));
        assert_eq!(frame.header("server"), Some("tolk/0.1"));
        let old = Frame::connected(Version::V1_0, HeartBeat::NONE, "tolk/0.1");
        assert_eq!(old.header("heart-beat"), None);
    }

    #[test]
    fn error_flattens_line_breaks_and_types_its_body() {
        let frame = Frame::error("bad\nframe", "details");
        assert_eq!(frame.header("message"), Some("bad frame"));
        assert_eq!(frame.header("content-type"), Some("text/plain"));
        assert_eq!(Frame::error("x", Bytes::new()).header("content-type"), None);
    }

    #[test]
    fn receipt_and_message_carry_required_headers() {
        assert_eq!(Frame::receipt("77").header("receipt-id"), Some("77"));
        let frame = Frame::message("/queue/a", "007", "0", "hello queue a");
        assert_eq!(frame.header("destination"), Some("/queue/a"));
        assert_eq!(frame.header("message-id"), Some("007"));
        assert_eq!(frame.header("subscription"), Some("0"));
        assert_eq!(&frame.body[..], b"hello queue a");
    }
}
