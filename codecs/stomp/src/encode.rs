//! [`Encoder`]: writes frames in the form every STOMP peer reads — LF line endings, header
//! escapes as negotiated, `content-length` on every body — and heart-beat EOLs.

use std::fmt::Write as _;

use bytes::{BufMut, BytesMut};

use crate::error::EncodeError;
use crate::escape::{self, Escaping};
use crate::frame::Frame;
use crate::version::Version;

/// Writes an EOL heart-beat (spec "Heart-beating": a heart-beat is any EOL sent between
/// frames). LF is understood by every version.
pub fn encode_heartbeat(dst: &mut BytesMut) {
    dst.put_u8(b'\n');
}

/// Frame writer for one connection. It starts in the pre-negotiation mode, in which header text
/// is written verbatim (as for STOMP 1.0 and for CONNECTED in every version); the session calls
/// [`Encoder::set_version`] once CONNECT has been answered.
#[derive(Clone, Copy, Debug, Default)]
pub struct Encoder {
    version: Option<Version>,
}

impl Encoder {
    /// An encoder in pre-negotiation mode (no escaping).
    pub fn new() -> Self {
        Self::default()
    }

    /// Switches header escaping to the negotiated version's rules (spec "Value Encoding").
    pub fn set_version(&mut self, version: Version) {
        self.version = Some(version);
    }

    /// The negotiated version, `None` before [`Encoder::set_version`].
    pub fn version(&self) -> Option<Version> {
        self.version
    }

    fn escaping_for(&self, frame: &Frame) -> Escaping {
        if !frame.command.uses_header_escapes() {
            return Escaping::Verbatim;
        }
        match self.version {
            None | Some(Version::V1_0) => Escaping::Verbatim,
            Some(Version::V1_1) => Escaping::V1_1,
            Some(Version::V1_2) => Escaping::V1_2,
        }
    }

    /// Appends `frame` to `dst`.
    ///
    /// A frame with a body always carries `content-length` (spec "Header content-length":
    /// SHOULD be included; without it a body with a NUL would be cut short). The header is
    /// appended after the caller's headers unless the caller set one, which must then match
    /// the body. On error `dst` is left as it was.
    pub fn encode(&self, frame: &Frame, dst: &mut BytesMut) -> Result<(), EncodeError> {
        let escaping = self.escaping_for(frame);
        let declared = self.check(frame, escaping)?;

        let headers_len: usize = frame.headers.iter().map(|(name, value)| name.len() + value.len() + 2).sum();
        dst.reserve(frame.command.as_str().len() + headers_len + frame.body.len() + 32);

        dst.put_slice(frame.command.as_str().as_bytes());
        dst.put_u8(b'\n');
        for (name, value) in frame.headers.iter() {
            escape::write_escaped(name, escaping, dst);
            dst.put_u8(b':');
            escape::write_escaped(value, escaping, dst);
            dst.put_u8(b'\n');
        }
        if !declared && !frame.body.is_empty() {
            // Writing into `BytesMut` cannot fail; `writeln!` formats without a temporary String.
            let _ = writeln!(dst, "content-length:{}", frame.body.len());
        }
        dst.put_u8(b'\n');
        dst.put_slice(&frame.body);
        dst.put_u8(0);
        Ok(())
    }

    /// Validates the frame before anything is written; returns whether the caller declared a
    /// `content-length` (which then matches the body).
    fn check(&self, frame: &Frame, escaping: Escaping) -> Result<bool, EncodeError> {
        for (name, value) in frame.headers.iter() {
            if name.is_empty() {
                return Err(EncodeError::EmptyHeaderName { command: frame.command });
            }
            let found = escape::unrepresentable(name, escaping, true)
                .or_else(|| escape::unrepresentable(value, escaping, false));
            if let Some(found) = found {
                return Err(EncodeError::UnrepresentableHeader {
                    command: frame.command,
                    name: name.to_string(),
                    found,
                });
            }
        }
        match frame.headers.get("content-length") {
            None => Ok(false),
            Some(declared) if declared.parse::<usize>() == Ok(frame.body.len()) => Ok(true),
            Some(declared) => Err(EncodeError::ContentLengthMismatch {
                declared: declared.chars().take(64).collect(),
                actual: frame.body.len(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;

    fn encoded(encoder: &Encoder, frame: &Frame) -> Vec<u8> {
        let mut dst = BytesMut::new();
        encoder.encode(frame, &mut dst).unwrap();
        dst.to_vec()
    }

    fn v12() -> Encoder {
        let mut encoder = Encoder::new();
        encoder.set_version(Version::V1_2);
        encoder
    }

    #[test]
    fn writes_lf_frames_with_content_length() {
        let frame = Frame::message("/queue/a", "007", "0", "hello queue a");
        assert_eq!(
            encoded(&v12(), &frame),
            b"MESSAGE\ndestination:/queue/a\nmessage-id:007\nsubscription:0\ncontent-length:13\n\nhello queue a\0"
        );
    }

    #[test]
    fn empty_body_has_no_content_length() {
        assert_eq!(encoded(&v12(), &Frame::receipt("77")), b"RECEIPT\nreceipt-id:77\n\n\0");
    }

    #[test]
    fn keeps_a_matching_caller_content_length() {
        let frame = Frame::new(Command::Message).with_header("content-length", "2").with_body("hi");
        assert_eq!(encoded(&v12(), &frame), b"MESSAGE\ncontent-length:2\n\nhi\0");
    }

    #[test]
    fn rejects_a_wrong_caller_content_length_and_writes_nothing() {
        let frame = Frame::new(Command::Message).with_header("content-length", "3").with_body("hi");
        let mut dst = BytesMut::from(&b"before"[..]);
        assert_eq!(
            v12().encode(&frame, &mut dst),
            Err(EncodeError::ContentLengthMismatch { declared: "3".into(), actual: 2 })
        );
        assert_eq!(&dst[..], b"before");
    }

    #[test]
    fn escapes_per_version_but_never_connected() {
        let frame = Frame::new(Command::Message).with_header("a:b", "x\ny\\z:\r");
        assert_eq!(encoded(&v12(), &frame), b"MESSAGE\na\\cb:x\\ny\\\\z\\c\\r\n\n\0");

        let mut v11 = Encoder::new();
        v11.set_version(Version::V1_1);
        assert!(matches!(
            v11.encode(&frame, &mut BytesMut::new()),
            Err(EncodeError::UnrepresentableHeader { found: '\r', .. })
        ));

        let connected = Frame::new(Command::Connected).with_header("server", "a:b\\c");
        assert_eq!(encoded(&v12(), &connected), b"CONNECTED\nserver:a:b\\c\n\n\0");
        let broken = Frame::new(Command::Connected).with_header("server", "a\nb");
        assert!(v12().encode(&broken, &mut BytesMut::new()).is_err());
    }

    #[test]
    fn pre_negotiation_and_1_0_write_verbatim() {
        let frame = Frame::new(Command::Error).with_header("message", "a:b\\c");
        assert_eq!(encoded(&Encoder::new(), &frame), b"ERROR\nmessage:a:b\\c\n\n\0");
        let mut v10 = Encoder::new();
        v10.set_version(Version::V1_0);
        assert_eq!(encoded(&v10, &frame), b"ERROR\nmessage:a:b\\c\n\n\0");
    }

    #[test]
    fn rejects_empty_names_and_nul() {
        let frame = Frame::new(Command::Send).with_header("", "x");
        assert!(matches!(v12().encode(&frame, &mut BytesMut::new()), Err(EncodeError::EmptyHeaderName { .. })));
        let frame = Frame::new(Command::Send).with_header("a", "x\0");
        assert!(matches!(
            v12().encode(&frame, &mut BytesMut::new()),
            Err(EncodeError::UnrepresentableHeader { found: '\0', .. })
        ));
    }

    #[test]
    fn heartbeat_is_one_lf() {
        let mut dst = BytesMut::new();
        encode_heartbeat(&mut dst);
        assert_eq!(&dst[..], b"\n");
    }
}
