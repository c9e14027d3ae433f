//! [`Decoder`]: the resumable frame parser (nats-server style). It owns the parse state of one
//! connection's inbound byte stream and nothing else: no socket, no session rules.
//!
//! How it avoids work:
//! * It never consumes bytes until a whole frame (or heart-beat) is buffered, and it remembers
//!   how far it has looked, so each byte is searched for a line end or NUL once, however the
//!   input is split.
//! * Header lines are checked (colon, NUL, UTF-8, escapes, limits) as soon as they end, and
//!   remembered as offset ranges; a frame announcing a too-large body is rejected before the
//!   body arrives.
//! * Once `content-length` is known it jumps over the body instead of scanning it.
//! * A finished frame is split off the buffer and frozen; header text and body are slices of
//!   that one allocation. Only headers that contain escapes are copied (to decode them).

use bytes::{Buf, Bytes, BytesMut};

use crate::command::Command;
use crate::error::DecodeError;
use crate::escape;
use crate::frame::Frame;
use crate::headers::Headers;
use crate::limits::Limits;
use crate::text::Utf8Bytes;
use crate::version::Version;

/// One item read from the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A complete frame.
    Frame(Frame),
    /// One EOL (`\n` or `\r\n`) between frames. Spec "Heart-beating": any data, including a
    /// bare EOL, proves the peer is alive, so the session resets its read deadline. The EOLs
    /// that may trail a frame's NUL are reported this way too.
    HeartBeat,
}

/// Where the parser stopped. Offsets are from the start of the buffer, which is always the
/// start of the frame being parsed (bytes are only consumed when a frame or EOL completes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Looking for the end of the command line; `[0, scanned)` holds no LF.
    Command { scanned: usize },
    /// Reading header lines; the current line starts at `line_start`, `[line_start, scanned)`
    /// holds no LF.
    Headers { command: Command, line_start: usize, scanned: usize },
    /// Waiting for a `content-length`-counted body and its NUL.
    FixedBody { command: Command, body_start: usize, len: usize },
    /// Looking for the NUL that ends a body without `content-length`; `[body_start, scanned)`
    /// holds no NUL.
    ScanBody { command: Command, body_start: usize, scanned: usize },
}

impl State {
    const START: State = State::Command { scanned: 0 };
}

/// A header line already validated, kept as ranges into the buffer until the frame is complete.
#[derive(Clone, Copy, Debug)]
struct RawHeader {
    name: (usize, usize),
    value: (usize, usize),
    name_escaped: bool,
    value_escaped: bool,
}

/// The per-connection STOMP frame parser.
///
/// Call [`Decoder::decode`] after every read with the connection's read buffer. The caller
/// only appends to that buffer between calls (as `tokio_util::codec::FramedRead` does); if it
/// discards the buffer, it must call [`Decoder::reset`].
///
/// Until [`Decoder::set_version`] is called, header text is taken verbatim, as for CONNECT:
/// escapes only exist once 1.1 or later has been negotiated, and CONNECT/STOMP/CONNECTED are
/// never unescaped (spec "Value Encoding").
#[derive(Clone, Debug)]
pub struct Decoder {
    limits: Limits,
    version: Option<Version>,
    state: State,
    /// Header lines of the frame in progress; reused between frames.
    headers: Vec<RawHeader>,
    /// The first `content-length` of the frame in progress (later ones are ignored, spec
    /// "Repeated Header Entries").
    content_length: Option<usize>,
    /// Whether the frame in progress has its header escapes decoded.
    unescape: bool,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl Decoder {
    /// A decoder in pre-negotiation mode with the given limits.
    pub fn new(limits: Limits) -> Self {
        Self { limits, version: None, state: State::START, headers: Vec::new(), content_length: None, unescape: false }
    }

    /// The limits this decoder enforces.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Switches header unescaping to the negotiated version's rules: none for 1.0, escapes
    /// decoded in every frame except CONNECT/STOMP/CONNECTED for 1.1 and 1.2. Takes effect
    /// from the next frame.
    pub fn set_version(&mut self, version: Version) {
        self.version = Some(version);
    }

    /// The negotiated version, `None` before [`Decoder::set_version`].
    pub fn version(&self) -> Option<Version> {
        self.version
    }

    /// Forgets the frame in progress, for a caller that has discarded its buffer.
    pub fn reset(&mut self) {
        self.state = State::START;
        self.headers.clear();
        self.content_length = None;
        self.unescape = false;
    }

    /// Reads the next frame or heart-beat from the front of `buf`.
    ///
    /// Returns `Ok(None)` when more bytes are needed (nothing is consumed), and otherwise
    /// consumes exactly the bytes of the returned item. Errors are fatal for the connection;
    /// the decoder resets itself so it never panics or loops if called again, but the stream
    /// cannot be trusted past a malformed frame.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Decoded>, DecodeError> {
        let result = self.step(buf);
        if result.is_err() {
            self.reset();
        }
        result
    }

    fn step(&mut self, buf: &mut BytesMut) -> Result<Option<Decoded>, DecodeError> {
        loop {
            match self.state {
                State::Command { scanned } => {
                    if let Some(done) = self.command_line(buf, scanned)? {
                        return Ok(done);
                    }
                }
                State::Headers { command, line_start, scanned } => {
                    if let Some(done) = self.header_line(buf, command, line_start, scanned)? {
                        return Ok(done);
                    }
                }
                State::FixedBody { command, body_start, len } => {
                    // The size check at the end of the headers bounds `end`.
                    let end = body_start.saturating_add(len);
                    let Some(&terminator) = buf.get(end) else {
                        return Ok(None);
                    };
                    if terminator != 0 {
                        return Err(DecodeError::MissingNul { content_length: len, offset: end, found: terminator });
                    }
                    return self.finish(buf, command, body_start, end).map(Some);
                }
                State::ScanBody { command, body_start, scanned } => match find(buf, scanned, 0) {
                    Some(nul) => {
                        self.check_size(nul as u64 + 1)?;
                        return self.finish(buf, command, body_start, nul).map(Some);
                    }
                    None => {
                        // No NUL yet: the whole buffer is this frame, and the NUL is still due.
                        self.check_size(buf.len() as u64 + 1)?;
                        self.state = State::ScanBody { command, body_start, scanned: buf.len() };
                        return Ok(None);
                    }
                },
            }
        }
    }

    /// Handles the command line. `Ok(Some(..))` is a result for the caller (a heart-beat or
    /// "need more"), `Ok(None)` means the state advanced and parsing continues.
    fn command_line(&mut self, buf: &mut BytesMut, scanned: usize) -> Result<Option<Option<Decoded>>, DecodeError> {
        let limit = self.limits.max_command_line;
        let Some(lf) = find(buf, scanned, b'\n') else {
            if partial_line_too_long(buf, limit) {
                return Err(DecodeError::CommandLineTooLong { limit });
            }
            self.state = State::Command { scanned: buf.len() };
            return Ok(Some(None));
        };
        let line = strip_cr(buf.get(..lf).unwrap_or_default());
        if line.is_empty() {
            buf.advance(lf + 1);
            self.state = State::START;
            return Ok(Some(Some(Decoded::HeartBeat)));
        }
        if line.len() > limit {
            return Err(DecodeError::CommandLineTooLong { limit });
        }
        let command = Command::from_bytes(line)
            .ok_or_else(|| DecodeError::UnknownCommand { command: String::from_utf8_lossy(line).into_owned() })?;
        self.headers.clear();
        self.content_length = None;
        self.unescape = command.uses_header_escapes() && self.version.is_some_and(Version::escapes_headers);
        self.state = State::Headers { command, line_start: lf + 1, scanned: lf + 1 };
        Ok(None)
    }

    /// Handles one header line or the blank line ending the headers; same return convention
    /// as [`Decoder::command_line`].
    fn header_line(
        &mut self,
        buf: &mut BytesMut,
        command: Command,
        line_start: usize,
        scanned: usize,
    ) -> Result<Option<Option<Decoded>>, DecodeError> {
        // Leniency: a NUL where a header line would start ends the frame with an empty body.
        // The spec's own DISCONNECT and RECEIPT examples omit the blank line this way.
        if buf.get(line_start) == Some(&0) {
            if let Some(content_length) = self.content_length.filter(|&len| len > 0) {
                return Err(DecodeError::UnterminatedHeaders { offset: line_start, content_length });
            }
            self.check_size(line_start as u64 + 1)?;
            return self.finish(buf, command, line_start, line_start).map(|f| Some(Some(f)));
        }

        let line_no = self.headers.len() + 2;
        let limit = self.limits.max_header_line;
        let Some(lf) = find(buf, scanned, b'\n') else {
            if partial_line_too_long(buf.get(line_start..).unwrap_or_default(), limit) {
                return Err(DecodeError::HeaderLineTooLong { line: line_no, limit });
            }
            // No LF yet: the whole buffer is this frame, and at least the NUL is still due.
            self.check_size(buf.len() as u64 + 1)?;
            self.state = State::Headers { command, line_start, scanned: buf.len() };
            return Ok(Some(None));
        };
        self.check_size(lf as u64 + 2)?;
        let line = strip_cr(buf.get(line_start..lf).unwrap_or_default());

        if line.is_empty() {
            let body_start = lf + 1;
            self.state = match self.content_length {
                Some(len) => {
                    self.check_size((body_start as u64).saturating_add(len as u64).saturating_add(1))?;
                    State::FixedBody { command, body_start, len }
                }
                None => State::ScanBody { command, body_start, scanned: body_start },
            };
            return Ok(None);
        }

        if line.len() > limit {
            return Err(DecodeError::HeaderLineTooLong { line: line_no, limit });
        }
        if self.headers.len() >= self.limits.max_headers {
            return Err(DecodeError::TooManyHeaders { limit: self.limits.max_headers });
        }
        let header = parse_header(line, line_start, line_no, self.unescape)?;
        if self.content_length.is_none() && !header.name_escaped {
            let name = slice(buf, header.name);
            if name == b"content-length" {
                let len = parse_content_length(slice(buf, header.value), line_no)?;
                // Reject an oversized announcement now rather than after buffering the body.
                self.check_size((lf as u64 + 3).saturating_add(len as u64))?;
                self.content_length = Some(len);
            }
        }
        self.headers.push(header);
        self.state = State::Headers { command, line_start: lf + 1, scanned: lf + 1 };
        Ok(None)
    }

    fn check_size(&self, at_least: u64) -> Result<(), DecodeError> {
        let limit = self.limits.max_frame_size;
        if at_least > limit as u64 {
            return Err(DecodeError::FrameTooLarge { at_least, limit });
        }
        Ok(())
    }

    /// Splits the frame ending with the NUL at `body_end` off `buf` and builds it.
    fn finish(
        &mut self,
        buf: &mut BytesMut,
        command: Command,
        body_start: usize,
        body_end: usize,
    ) -> Result<Decoded, DecodeError> {
        let raw = buf.split_to((body_end + 1).min(buf.len())).freeze();
        let mut headers = Headers::with_capacity(self.headers.len());
        for (index, header) in self.headers.iter().enumerate() {
            let line = index + 2;
            headers.push(
                text(&raw, header.name, header.name_escaped, line)?,
                text(&raw, header.value, header.value_escaped, line)?,
            );
        }
        let body = raw.slice(body_start.min(body_end)..body_end.min(raw.len()));
        self.reset();
        Ok(Decoded::Frame(Frame { command, headers, body }))
    }
}

/// Position of the first `byte` in `buf[from..]`, as an offset into `buf`.
fn find(buf: &[u8], from: usize, byte: u8) -> Option<usize> {
    buf.get(from..)?.iter().position(|&b| b == byte).map(|i| i + from)
}

/// Drops one trailing CR: STOMP 1.2 allows CRLF line ends, and accepting them from 1.0/1.1
/// peers costs nothing.
fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Whether an unterminated line is already over `limit`. One extra byte is allowed when it is
/// a CR, since that may be the first half of the CRLF ending a line of exactly `limit` bytes.
fn partial_line_too_long(partial: &[u8], limit: usize) -> bool {
    partial.len() > limit && !(partial.len() == limit + 1 && partial.last() == Some(&b'\r'))
}

fn slice(buf: &[u8], (start, end): (usize, usize)) -> &[u8] {
    buf.get(start..end).unwrap_or_default()
}

fn snippet(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes.get(..64).unwrap_or(bytes)).into_owned()
}

/// Validates a header line (without EOL) that starts at frame offset `offset` and records
/// where its name and value are.
fn parse_header(line: &[u8], offset: usize, line_no: usize, unescape: bool) -> Result<RawHeader, DecodeError> {
    let Some(colon) = line.iter().position(|&b| b == b':') else {
        return Err(DecodeError::MissingColon { line: line_no, offset, snippet: snippet(line) });
    };
    if colon == 0 {
        return Err(DecodeError::EmptyHeaderName { line: line_no, offset });
    }
    if let Some(nul) = line.iter().position(|&b| b == 0) {
        return Err(DecodeError::NulInHeader { line: line_no, offset: offset + nul });
    }
    if let Err(err) = std::str::from_utf8(line) {
        return Err(DecodeError::InvalidUtf8 { line: line_no, offset: offset + err.valid_up_to() });
    }
    let value_start = colon + 1;
    let escaped = |part: &[u8], part_offset: usize| {
        if !unescape {
            return Ok(false);
        }
        escape::check(part).map_err(|bad| DecodeError::InvalidEscape {
            line: line_no,
            offset: offset + part_offset + bad.offset,
            found: bad.found,
        })
    };
    let name_escaped = escaped(line.get(..colon).unwrap_or_default(), 0)?;
    let value_escaped = escaped(line.get(value_start..).unwrap_or_default(), value_start)?;
    Ok(RawHeader {
        name: (offset, offset + colon),
        value: (offset + value_start, offset + line.len()),
        name_escaped,
        value_escaped,
    })
}

/// Reads a `content-length` value. Spec "Header content-length": an octet count. Blanks
/// around the digits are tolerated because 1.0-era clients pad header values.
fn parse_content_length(value: &[u8], line_no: usize) -> Result<usize, DecodeError> {
    let invalid = || DecodeError::InvalidContentLength { line: line_no, value: snippet(value) };
    let digits = value.trim_ascii();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(invalid());
    }
    digits.iter().try_fold(0usize, |acc, &digit| {
        acc.checked_mul(10).and_then(|acc| acc.checked_add(usize::from(digit - b'0'))).ok_or_else(invalid)
    })
}

/// Header text from the frozen frame: a shared slice, or a decoded copy when it has escapes.
fn text(raw: &Bytes, (start, end): (usize, usize), escaped: bool, line: usize) -> Result<Utf8Bytes, DecodeError> {
    let bytes = raw.slice(start.min(raw.len())..end.min(raw.len()));
    // Already validated when the line ended; validating again keeps `Utf8Bytes` sound on its
    // own terms and costs little next to the allocation it avoids.
    let text = Utf8Bytes::from_utf8(bytes)
        .map_err(|err| DecodeError::InvalidUtf8 { line, offset: start + err.valid_up_to() })?;
    Ok(if escaped { Utf8Bytes::from(escape::unescape(&text)) } else { text })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_line_limit_allows_a_trailing_cr() {
        assert!(!partial_line_too_long(b"abcd", 4));
        assert!(!partial_line_too_long(b"abcd\r", 4));
        assert!(partial_line_too_long(b"abcde", 4));
        assert!(partial_line_too_long(b"abcd\r\r", 4));
    }

    #[test]
    fn content_length_parsing() {
        assert_eq!(parse_content_length(b"170", 2), Ok(170));
        assert_eq!(parse_content_length(b" 5 ", 2), Ok(5));
        for bad in [&b""[..], b"-1", b"1a", b"0x10", b"99999999999999999999999999"] {
            assert!(parse_content_length(bad, 2).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn resumes_without_rescanning() {
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::from(&b"SEND\ndestination:/queue/a\nfoo"[..]);
        assert_eq!(decoder.decode(&mut buf), Ok(None));
        assert_eq!(decoder.state, State::Headers { command: Command::Send, line_start: 26, scanned: 29 });
        buf.extend_from_slice(b":bar\n\nbody");
        assert_eq!(decoder.decode(&mut buf), Ok(None));
        assert_eq!(decoder.state, State::ScanBody { command: Command::Send, body_start: 35, scanned: 39 });
        buf.extend_from_slice(b"\0");
        let Ok(Some(Decoded::Frame(frame))) = decoder.decode(&mut buf) else {
            panic!("expected a frame");
        };
        assert_eq!(frame.header("foo"), Some("bar"));
        assert_eq!(&frame.body[..], b"body");
        assert!(buf.is_empty());
        assert_eq!(decoder.state, State::START);
    }
}
