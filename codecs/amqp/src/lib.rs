//! AMQP 0-9-1 framing (spec §2.3.5, §4.2.3): the sans-IO decoder and encoder between bytes and
//! frames. Method arguments and content-header properties are parsed and written by
//! `amq-protocol`; this crate owns what a server must check before trusting that parser:
//! the frame type, the size against the negotiated `frame_max` (checked from the 7-byte header,
//! before the payload is buffered), the `0xCE` end octet, and the nesting depth of field tables
//! (amq-protocol's table parser is recursive: a 30 KB frame of nested tables overflows a 2 MB
//! thread stack and aborts the process, so deep nesting is refused before it is parsed).
//!
//! Body frames are handled here without amq-protocol so that their payload stays `Bytes`.
//! No tokio, no sockets, no clocks.

use amq_protocol::frame::{AMQPContentHeader, AMQPFrame, WriteContext, gen_frame};
use amq_protocol::protocol::{AMQPClass, BasicProperties, parse_class};
use bytes::{Buf, Bytes, BytesMut};
use thiserror::Error;

/// The protocol header a 0-9-1 client sends first, and the one a server answers a mismatch with
/// (spec §4.2.2).
pub const PROTOCOL_HEADER: [u8; 8] = *b"AMQP\x00\x00\x09\x01";

/// Frame type octets (spec §4.2.3, §1.2 constants).
const FRAME_METHOD: u8 = 1;
const FRAME_HEADER: u8 = 2;
const FRAME_BODY: u8 = 3;
const FRAME_HEARTBEAT: u8 = 8;
/// Every frame ends with this octet; anything else means the peer and we disagree on framing.
pub const FRAME_END: u8 = 0xCE;
/// Type (1) + channel (2) + size (4).
pub const FRAME_HEADER_LEN: usize = 7;
/// Header plus end octet: what `frame_max` counts on top of the payload.
pub const FRAME_OVERHEAD: usize = 8;
/// Smallest `frame_max` a peer may negotiate (spec §4.2.1 "frame-min-size" is 4096 in 0-9-1).
pub const FRAME_MIN_SIZE: u32 = 4096;
/// Deepest nesting of field tables and arrays accepted. RabbitMQ's own x-arguments nest at
/// most two levels; 32 leaves room for applications and keeps the recursive parser shallow.
pub const MAX_TABLE_DEPTH: usize = 32;

/// One decoded frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A method frame: channel and the decoded method.
    Method(u16, Box<AMQPClass>),
    /// A content header frame.
    Header(u16, Box<AMQPContentHeader>),
    /// A content body frame; the payload is not copied.
    Body(u16, Bytes),
    /// A heartbeat (channel 0 is enforced by the decoder).
    Heartbeat,
}

/// Why the byte stream is not valid AMQP framing. Each variant carries what was seen and maps
/// to the hard error the spec prescribes via [`FrameError::to_amqp`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    /// The first bytes were not `AMQP\0\0\x09\x01`.
    #[error("protocol header \"{}\" is not AMQP 0-9-1", .0.escape_ascii())]
    BadProtocolHeader(Vec<u8>),
    /// The type octet is not method, header, body or heartbeat.
    #[error("unknown frame type {frame_type} on channel {channel}")]
    UnknownType {
        /// The octet received.
        frame_type: u8,
        /// The channel it named.
        channel: u16,
    },
    /// Payload plus 8 bytes of framing exceeds the negotiated `frame_max`.
    #[error("frame of {size} payload bytes on channel {channel} exceeds frame_max {frame_max}")]
    TooLarge {
        /// Payload size announced in the frame header.
        size: u32,
        /// The channel it named.
        channel: u16,
        /// The limit in force.
        frame_max: u32,
    },
    /// The octet after the payload was not 0xCE.
    #[error("frame on channel {channel} ends with 0x{found:02x}, not 0xCE")]
    BadFrameEnd {
        /// The octet found.
        found: u8,
        /// The channel it named.
        channel: u16,
    },
    /// A heartbeat frame named a channel other than 0 or carried a payload (spec §4.2.7).
    #[error("heartbeat frame on channel {channel} with {size} payload bytes (must be channel 0, empty)")]
    BadHeartbeat {
        /// The channel it named.
        channel: u16,
        /// Its payload size.
        size: u32,
    },
    /// A method frame too short to hold class and method ids.
    #[error("method frame on channel {channel} has only {size} payload bytes")]
    ShortMethod {
        /// The channel it named.
        channel: u16,
        /// Its payload size.
        size: usize,
    },
    /// A class/method pair that AMQP 0-9-1 (with RabbitMQ's extensions) does not define.
    #[error("unknown method {class_id}.{method_id} on channel {channel}")]
    UnknownMethod {
        /// Class id.
        class_id: u16,
        /// Method id.
        method_id: u16,
        /// The channel it named.
        channel: u16,
    },
    /// The arguments of a known method did not decode (or left bytes over).
    #[error("arguments of method {class_id}.{method_id} on channel {channel} do not decode")]
    MalformedMethod {
        /// Class id.
        class_id: u16,
        /// Method id.
        method_id: u16,
        /// The channel it named.
        channel: u16,
    },
    /// A content header frame whose properties did not decode.
    #[error("content header on channel {channel} does not decode")]
    MalformedHeader {
        /// The channel it named.
        channel: u16,
    },
    /// Field tables nested deeper than [`MAX_TABLE_DEPTH`].
    #[error("field tables nested deeper than {MAX_TABLE_DEPTH} levels in a frame on channel {channel}")]
    TooDeep {
        /// The channel it named.
        channel: u16,
    },
    /// `basic.qos` with a non-zero `prefetch-size`, which tolk (like RabbitMQ) does not implement.
    /// amq-protocol drops the field, so it is checked here on the raw bytes.
    #[error("basic.qos prefetch_size {0} is not supported (only prefetch_count)")]
    PrefetchSize(u32),
}

/// Checks the protocol header as it arrives. Returns `Ok(false)` while more bytes are needed,
/// `Ok(true)` once all 8 bytes matched (and consumes them), and an error as soon as a received
/// byte differs, so a peer speaking another protocol is answered without waiting.
pub fn check_protocol_header(buf: &mut BytesMut) -> Result<bool, FrameError> {
    let n = buf.len().min(PROTOCOL_HEADER.len());
    if buf[..n] != PROTOCOL_HEADER[..n] {
        return Err(FrameError::BadProtocolHeader(buf[..n].to_vec()));
    }
    if n < PROTOCOL_HEADER.len() {
        return Ok(false);
    }
    buf.advance(PROTOCOL_HEADER.len());
    Ok(true)
}

/// Decodes one frame from the front of `buf`. Returns `Ok(None)` (consuming nothing) until a
/// whole frame is buffered; checks the type and size from the first 7 bytes so that a peer
/// cannot make the buffer grow past `frame_max`.
pub fn decode(buf: &mut BytesMut, frame_max: u32) -> Result<Option<Frame>, FrameError> {
    let Some(&frame_type) = buf.first() else { return Ok(None) };
    let channel = match (buf.get(1), buf.get(2)) {
        (Some(&a), Some(&b)) => u16::from_be_bytes([a, b]),
        _ => 0,
    };
    if !matches!(frame_type, FRAME_METHOD | FRAME_HEADER | FRAME_BODY | FRAME_HEARTBEAT) {
        return Err(FrameError::UnknownType { frame_type, channel });
    }
    let Some(size_bytes) = buf.get(3..FRAME_HEADER_LEN) else { return Ok(None) };
    let size = u32::from_be_bytes([size_bytes[0], size_bytes[1], size_bytes[2], size_bytes[3]]);
    if u64::from(size) + FRAME_OVERHEAD as u64 > u64::from(frame_max) {
        return Err(FrameError::TooLarge { size, channel, frame_max });
    }
    let total = FRAME_HEADER_LEN + size as usize + 1;
    if buf.len() < total {
        buf.reserve(total - buf.len());
        return Ok(None);
    }
    let found = buf[total - 1];
    if found != FRAME_END {
        return Err(FrameError::BadFrameEnd { found, channel });
    }
    let mut frame = buf.split_to(total);
    frame.advance(FRAME_HEADER_LEN);
    frame.truncate(size as usize);
    match frame_type {
        FRAME_METHOD => decode_method(channel, &frame).map(Some),
        FRAME_HEADER => decode_header(channel, &frame).map(Some),
        FRAME_BODY => Ok(Some(Frame::Body(channel, frame.freeze()))),
        _ if channel != 0 || size != 0 => Err(FrameError::BadHeartbeat { channel, size }),
        _ => Ok(Some(Frame::Heartbeat)),
    }
}

fn decode_method(channel: u16, payload: &[u8]) -> Result<Frame, FrameError> {
    let (Some(ids), Some(args)) = (payload.get(..4), payload.get(4..)) else {
        return Err(FrameError::ShortMethod { channel, size: payload.len() });
    };
    let class_id = u16::from_be_bytes([ids[0], ids[1]]);
    let method_id = u16::from_be_bytes([ids[2], ids[3]]);
    let Some(prefix) = table_prefix(class_id, method_id) else {
        return Err(FrameError::UnknownMethod { class_id, method_id, channel });
    };
    if let Some(prefix) = prefix
        && !nesting_within_limit(args, prefix)
    {
        return Err(FrameError::TooDeep { channel });
    }
    // basic.qos starts with the long prefetch-size (§1.8.3.1).
    if (class_id, method_id) == (60, 10)
        && let Some(prefetch_size) = read_u32(args, 0)
        && prefetch_size != 0
    {
        return Err(FrameError::PrefetchSize(prefetch_size));
    }
    match parse_class(payload) {
        Ok(([], method)) => Ok(Frame::Method(channel, Box::new(method))),
        _ => Err(FrameError::MalformedMethod { class_id, method_id, channel }),
    }
}

fn decode_header(channel: u16, payload: &[u8]) -> Result<Frame, FrameError> {
    // class (2), weight (2), body size (8), property flags (2), then content-type and
    // content-encoding (short strings, if flagged) come before the headers table.
    let flags = match payload.get(12..14) {
        Some(f) => u16::from_be_bytes([f[0], f[1]]),
        None => return Err(FrameError::MalformedHeader { channel }),
    };
    if flags & (1 << 13) != 0 {
        let mut prefix: Vec<Field> = Vec::with_capacity(2);
        if flags & (1 << 15) != 0 {
            prefix.push(Field::ShortStr);
        }
        if flags & (1 << 14) != 0 {
            prefix.push(Field::ShortStr);
        }
        if !nesting_within_limit(payload.get(14..).unwrap_or_default(), &prefix) {
            return Err(FrameError::TooDeep { channel });
        }
    }
    match amq_protocol::frame::parsing::parse_content_header(payload) {
        Ok(([], header)) => Ok(Frame::Header(channel, Box::new(header))),
        _ => Err(FrameError::MalformedHeader { channel }),
    }
}

/// A field that precedes a method's field table, for skipping to the table without parsing.
#[derive(Clone, Copy)]
enum Field {
    U8,
    U16,
    ShortStr,
    Bits,
}

/// For each method a client or server may send: `Some(None)` if it has no field table,
/// `Some(Some(fields before the table))` if it has one, `None` if the method is unknown.
fn table_prefix(class_id: u16, method_id: u16) -> Option<Option<&'static [Field]>> {
    use Field::*;
    const NONE: Option<&[Field]> = None;
    Some(match (class_id, method_id) {
        (10, 10) => Some(&[U8, U8]),
        (10, 11) => Some(&[]),
        (10, 20 | 21 | 30 | 31 | 40 | 41 | 50 | 51 | 60 | 61 | 70 | 71) => NONE,
        (20, 10 | 11 | 20 | 21 | 40 | 41) => NONE,
        (30, 10 | 11) => NONE,
        (40, 10) => Some(&[U16, ShortStr, ShortStr, Bits]),
        (40, 30 | 40) => Some(&[U16, ShortStr, ShortStr, ShortStr, Bits]),
        (40, 11 | 21 | 31 | 51 | 20) => NONE,
        (50, 10) => Some(&[U16, ShortStr, Bits]),
        (50, 20) => Some(&[U16, ShortStr, ShortStr, ShortStr, Bits]),
        (50, 50) => Some(&[U16, ShortStr, ShortStr, ShortStr]),
        (50, 11 | 21 | 30 | 31 | 40 | 41 | 51) => NONE,
        (60, 20) => Some(&[U16, ShortStr, ShortStr, Bits]),
        (60, 10 | 11 | 21 | 30 | 31 | 40 | 50 | 60 | 70 | 71 | 72 | 80 | 90 | 100 | 110 | 111 | 120) => NONE,
        (85, 10 | 11) => NONE,
        (90, 10 | 11 | 20 | 21 | 30 | 31) => NONE,
        _ => return None,
    })
}

/// Skips `prefix` and walks the field table that follows without building it, iteratively, to
/// check its nesting depth. Malformed input returns `true`: the real parser reports it.
fn nesting_within_limit(args: &[u8], prefix: &[Field]) -> bool {
    let mut pos = 0usize;
    for field in prefix {
        let skip = match field {
            Field::U8 | Field::Bits => 1,
            Field::U16 => 2,
            Field::ShortStr => match args.get(pos) {
                Some(&len) => 1 + len as usize,
                None => return true,
            },
        };
        pos += skip;
    }
    let Some(len) = read_u32(args, pos) else { return true };
    let start = pos + 4;
    let Some(end) = start.checked_add(len as usize).filter(|&e| e <= args.len()) else { return true };
    table_depth_ok(&args[start..end])
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Whether the content of a field table (no length prefix, as in an AMQPLAIN response) nests
/// within [`MAX_TABLE_DEPTH`], so that it is safe to hand to amq-protocol's recursive parser.
pub fn field_table_depth_ok(content: &[u8]) -> bool {
    table_depth_ok(content)
}

/// Walks the content of one field table (without its length prefix) with an explicit stack.
fn table_depth_ok(table: &[u8]) -> bool {
    // Each entry: (end offset of the container, whether it is a table (keys) or an array).
    let mut stack: Vec<(usize, bool)> = vec![(table.len(), true)];
    let mut pos = 0usize;
    while let Some(&(end, is_table)) = stack.last() {
        if pos >= end {
            stack.pop();
            continue;
        }
        if is_table {
            let Some(&key_len) = table.get(pos) else { return true };
            pos += 1 + key_len as usize;
        }
        let Some(&kind) = table.get(pos) else { return true };
        pos += 1;
        let fixed = match kind {
            b't' | b'b' | b'B' => 1,
            b's' | b'U' | b'u' => 2,
            b'I' | b'i' | b'f' => 4,
            b'l' | b'L' | b'd' | b'T' => 8,
            b'D' => 5,
            b'V' => 0,
            b'S' | b'x' | b'F' | b'A' => {
                let Some(len) = read_u32(table, pos) else { return true };
                let inner_start = pos + 4;
                let Some(inner_end) = inner_start.checked_add(len as usize).filter(|&e| e <= end) else { return true };
                if kind == b'F' || kind == b'A' {
                    if stack.len() >= MAX_TABLE_DEPTH {
                        return false;
                    }
                    pos = inner_start;
                    stack.push((inner_end, kind == b'F'));
                    continue;
                }
                pos = inner_end;
                continue;
            }
            _ => return true,
        };
        pos += fixed;
    }
    true
}

/// Writes frames into an output buffer. Keeps a scratch buffer because amq-protocol's writer
/// needs an owned `Vec` it can seek back in (to fill in lengths).
#[derive(Default)]
pub struct Encoder {
    scratch: Vec<u8>,
}

/// Why a frame was not written.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// amq-protocol's generator failed (cannot happen with a `Vec`, kept for completeness).
    #[error("frame generation failed: {0}")]
    Generate(String),
    /// The frame would be larger than the negotiated `frame_max` (a huge headers table).
    #[error("{what} frame of {size} bytes exceeds frame_max {frame_max}")]
    TooLarge {
        /// Which frame.
        what: &'static str,
        /// Its size including framing.
        size: usize,
        /// The limit.
        frame_max: u32,
    },
}

impl Encoder {
    fn generate(&mut self, frame: &AMQPFrame) -> Result<&[u8], EncodeError> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        match gen_frame(frame)(WriteContext::from(scratch)) {
            Ok(ctx) => {
                self.scratch = ctx.write;
                Ok(&self.scratch)
            }
            Err(e) => Err(EncodeError::Generate(e.to_string())),
        }
    }

    /// Appends a method frame.
    pub fn method(&mut self, out: &mut Vec<u8>, channel: u16, method: AMQPClass) -> Result<(), EncodeError> {
        let bytes = self.generate(&AMQPFrame::Method(channel, method))?;
        out.extend_from_slice(bytes);
        Ok(())
    }

    /// Appends a content header and the body split into frames of at most `frame_max - 8`
    /// payload bytes (spec §4.2.6). Nothing is appended if the header would not fit in a frame.
    pub fn content(
        &mut self,
        out: &mut Vec<u8>,
        channel: u16,
        properties: BasicProperties,
        body: &[u8],
        frame_max: u32,
    ) -> Result<(), EncodeError> {
        let header = AMQPContentHeader { class_id: 60, body_size: body.len() as u64, properties };
        let bytes = self.generate(&AMQPFrame::Header(channel, header))?;
        if bytes.len() > frame_max as usize {
            return Err(EncodeError::TooLarge { what: "content header", size: bytes.len(), frame_max });
        }
        out.extend_from_slice(bytes);
        let chunk = (frame_max as usize).saturating_sub(FRAME_OVERHEAD).max(1);
        for part in body.chunks(chunk) {
            out.reserve(part.len() + FRAME_OVERHEAD);
            out.push(FRAME_BODY);
            out.extend_from_slice(&channel.to_be_bytes());
            out.extend_from_slice(&(part.len() as u32).to_be_bytes());
            out.extend_from_slice(part);
            out.push(FRAME_END);
        }
        Ok(())
    }

    /// Appends a heartbeat frame.
    pub fn heartbeat(out: &mut Vec<u8>) {
        out.extend_from_slice(&[FRAME_HEARTBEAT, 0, 0, 0, 0, 0, 0, FRAME_END]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amq_protocol::protocol::{basic, channel, connection, queue};
    use amq_protocol::types::{AMQPValue, FieldTable};
    use proptest::prelude::*;

    const MAX: u32 = 131_072;

    fn encode(channel: u16, method: AMQPClass) -> Vec<u8> {
        let mut out = Vec::new();
        Encoder::default().method(&mut out, channel, method).unwrap();
        out
    }

    /// Feeds `bytes` split at every offset and expects exactly `expected` once complete.
    fn decode_split_everywhere(bytes: &[u8], expected: &Frame) {
        for cut in 0..bytes.len() {
            let mut buf = BytesMut::from(&bytes[..cut]);
            assert_eq!(decode(&mut buf, MAX), Ok(None), "cut at {cut}");
            assert_eq!(buf.len(), cut, "nothing consumed before the frame is complete");
            buf.extend_from_slice(&bytes[cut..]);
            assert_eq!(decode(&mut buf, MAX).unwrap().as_ref(), Some(expected), "cut at {cut}");
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn golden_heartbeat_and_channel_open() {
        // §4.2.7: heartbeat = type 8, channel 0, size 0, frame-end.
        decode_split_everywhere(&[8, 0, 0, 0, 0, 0, 0, 0xCE], &Frame::Heartbeat);
        // §4.2.3 + channel.open (class 20, method 10, reserved short string ""), channel 1.
        let golden = [1, 0, 1, 0, 0, 0, 5, 0, 20, 0, 10, 0, 0xCE];
        let open = Frame::Method(1, Box::new(AMQPClass::Channel(channel::AMQPMethod::Open(channel::Open {}))));
        decode_split_everywhere(&golden, &open);
        assert_eq!(encode(1, AMQPClass::Channel(channel::AMQPMethod::Open(channel::Open {}))), golden);
    }

    #[test]
    fn golden_body_and_header() {
        // §4.2.6.2: body frame type 3 carrying "hi" on channel 2.
        decode_split_everywhere(&[3, 0, 2, 0, 0, 0, 2, b'h', b'i', 0xCE], &Frame::Body(2, Bytes::from_static(b"hi")));
        // §4.2.6.1: content header, class 60, weight 0, body size 5, no properties.
        let golden = [2, 0, 1, 0, 0, 0, 14, 0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0xCE];
        let header = AMQPContentHeader { class_id: 60, body_size: 5, properties: BasicProperties::default() };
        decode_split_everywhere(&golden, &Frame::Header(1, Box::new(header)));
    }

    #[test]
    fn content_is_split_at_frame_max_minus_eight() {
        let mut out = Vec::new();
        let body = vec![7u8; 10_000];
        Encoder::default().content(&mut out, 1, BasicProperties::default(), &body, 4096).unwrap();
        let mut buf = BytesMut::from(&out[..]);
        let mut sizes = Vec::new();
        while let Some(frame) = decode(&mut buf, 4096).unwrap() {
            if let Frame::Body(_, b) = frame {
                sizes.push(b.len());
            }
        }
        assert_eq!(sizes, [4088, 4088, 1824]);
    }

    #[test]
    fn each_framing_error_is_reported_with_its_evidence() {
        let mut b = BytesMut::from(&[9u8, 0, 3][..]);
        assert_eq!(decode(&mut b, MAX), Err(FrameError::UnknownType { frame_type: 9, channel: 3 }));
        let mut b = BytesMut::from(&[3u8, 0, 1, 0, 2, 0, 0][..]);
        assert_eq!(decode(&mut b, MAX), Err(FrameError::TooLarge { size: 131_072, channel: 1, frame_max: MAX }));
        let mut b = BytesMut::from(&[3u8, 0, 1, 0, 0, 0, 1, b'x', 0xCD][..]);
        assert_eq!(decode(&mut b, MAX), Err(FrameError::BadFrameEnd { found: 0xCD, channel: 1 }));
        let mut b = BytesMut::from(&[8u8, 0, 1, 0, 0, 0, 0, 0xCE][..]);
        assert_eq!(decode(&mut b, MAX), Err(FrameError::BadHeartbeat { channel: 1, size: 0 }));
        let mut b = BytesMut::from(&[1u8, 0, 1, 0, 0, 0, 4, 0, 99, 0, 1, 0xCE][..]);
        assert_eq!(decode(&mut b, MAX), Err(FrameError::UnknownMethod { class_id: 99, method_id: 1, channel: 1 }));
        let mut b = BytesMut::from(&[1u8, 0, 1, 0, 0, 0, 2, 0, 20, 0xCE][..]);
        assert_eq!(decode(&mut b, MAX), Err(FrameError::ShortMethod { channel: 1, size: 2 }));
        // queue.declare cut short after the queue name.
        let mut b = BytesMut::from(&[1u8, 0, 1, 0, 0, 0, 7, 0, 50, 0, 10, 0, 0, 5, 0xCE][..]);
        assert_eq!(decode(&mut b, MAX), Err(FrameError::MalformedMethod { class_id: 50, method_id: 10, channel: 1 }));
        // basic.qos with prefetch_size 1.
        let mut b = BytesMut::from(&[1u8, 0, 1, 0, 0, 0, 11, 0, 60, 0, 10, 0, 0, 0, 1, 0, 0, 0, 0xCE][..]);
        assert_eq!(decode(&mut b, MAX), Err(FrameError::PrefetchSize(1)));
    }

    #[test]
    fn protocol_header_is_checked_byte_by_byte() {
        let mut b = BytesMut::from(&b"AMQ"[..]);
        assert_eq!(check_protocol_header(&mut b), Ok(false));
        b.extend_from_slice(b"P\x00\x00\x09\x01rest");
        assert_eq!(check_protocol_header(&mut b), Ok(true));
        assert_eq!(&b[..], b"rest");
        let mut b = BytesMut::from(&b"GET "[..]);
        assert!(check_protocol_header(&mut b).is_err());
        let mut b = BytesMut::from(&b"AMQP\x01\x01\x00\x09"[..]);
        assert!(check_protocol_header(&mut b).is_err());
    }

    fn nested_declare(depth: usize) -> Vec<u8> {
        let mut table: Vec<u8> = Vec::new();
        for _ in 0..depth {
            let mut outer = vec![0u8, b'F'];
            outer.extend_from_slice(&(table.len() as u32).to_be_bytes());
            outer.extend_from_slice(&table);
            table = outer;
        }
        let mut payload = vec![0, 50, 0, 10, 0, 0, 1, b'q', 0];
        payload.extend_from_slice(&(table.len() as u32).to_be_bytes());
        payload.extend_from_slice(&table);
        let mut frame = vec![1u8, 0, 1];
        frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        frame.extend_from_slice(&payload);
        frame.push(FRAME_END);
        frame
    }

    #[test]
    fn deeply_nested_tables_are_refused_before_parsing() {
        let mut ok = BytesMut::from(&nested_declare(MAX_TABLE_DEPTH - 1)[..]);
        assert!(matches!(decode(&mut ok, MAX), Ok(Some(Frame::Method(1, _)))));
        // 20 000 levels fit in 120 KB and would overflow the stack inside amq-protocol.
        let mut deep = BytesMut::from(&nested_declare(20_000)[..]);
        assert_eq!(decode(&mut deep, MAX), Err(FrameError::TooDeep { channel: 1 }));
    }

    fn any_method() -> impl Strategy<Value = AMQPClass> {
        let s = "[a-z.]{0,20}";
        prop_oneof![
            (s, any::<bool>(), any::<bool>()).prop_map(|(q, durable, exclusive)| AMQPClass::Queue(
                queue::AMQPMethod::Declare(queue::Declare {
                    queue: q.as_str().into(),
                    durable,
                    exclusive,
                    arguments: {
                        let mut t = FieldTable::default();
                        t.insert("x-max-length".into(), AMQPValue::LongInt(5));
                        t
                    },
                    ..Default::default()
                })
            )),
            (s, s, any::<bool>()).prop_map(|(e, k, mandatory)| AMQPClass::Basic(basic::AMQPMethod::Publish(
                basic::Publish {
                    exchange: e.as_str().into(),
                    routing_key: k.as_str().into(),
                    mandatory,
                    immediate: false
                }
            ))),
            (any::<u64>(), any::<bool>()).prop_map(|(delivery_tag, multiple)| AMQPClass::Basic(
                basic::AMQPMethod::Ack(basic::Ack { delivery_tag, multiple })
            )),
            (any::<u16>(), s).prop_map(|(code, text)| AMQPClass::Connection(connection::AMQPMethod::Close(
                connection::Close { reply_code: code, reply_text: text.as_str().into(), class_id: 0, method_id: 0 }
            ))),
        ]
    }

    proptest! {
        /// encode → decode is the identity for methods, and content survives splitting.
        #[test]
        fn method_round_trip(channel in 1u16..2048, method in any_method()) {
            let bytes = encode(channel, method.clone());
            let mut buf = BytesMut::from(&bytes[..]);
            prop_assert_eq!(decode(&mut buf, MAX).unwrap(), Some(Frame::Method(channel, Box::new(method))));
            prop_assert!(buf.is_empty());
        }

        #[test]
        fn content_round_trip(body in prop::collection::vec(any::<u8>(), 0..20_000)) {
            let mut out = Vec::new();
            let props = BasicProperties::default().with_content_type("text/plain".into()).with_delivery_mode(2);
            Encoder::default().content(&mut out, 3, props.clone(), &body, FRAME_MIN_SIZE).unwrap();
            let mut buf = BytesMut::from(&out[..]);
            let Some(Frame::Header(3, header)) = decode(&mut buf, FRAME_MIN_SIZE).unwrap() else { panic!("header first") };
            prop_assert_eq!(header.properties, props);
            prop_assert_eq!(header.body_size, body.len() as u64);
            let mut got = Vec::new();
            while let Some(Frame::Body(3, b)) = decode(&mut buf, FRAME_MIN_SIZE).unwrap() {
                got.extend_from_slice(&b);
            }
            prop_assert_eq!(got, body);
        }

        /// Arbitrary bytes never panic the decoder, and it never buffers past frame_max.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let mut buf = BytesMut::from(&bytes[..]);
            let _ = check_protocol_header(&mut buf.clone());
            while let Ok(Some(_)) = decode(&mut buf, FRAME_MIN_SIZE) {}
        }

        /// Method frames with arbitrary argument bytes never panic (they reach amq-protocol).
        #[test]
        fn arbitrary_method_arguments_never_panic(class in prop::sample::select(vec![10u16, 20, 40, 50, 60, 85, 90]),
                                                  method in 0u16..130, args in prop::collection::vec(any::<u8>(), 0..200)) {
            let mut payload = class.to_be_bytes().to_vec();
            payload.extend_from_slice(&method.to_be_bytes());
            payload.extend_from_slice(&args);
            let mut frame = vec![1u8, 0, 1];
            frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            frame.extend_from_slice(&payload);
            frame.push(FRAME_END);
            let _ = decode(&mut BytesMut::from(&frame[..]), MAX);
            frame[0] = FRAME_HEADER;
            let _ = decode(&mut BytesMut::from(&frame[..]), MAX);
        }
    }
}
