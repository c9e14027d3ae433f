//! Framing MQTT-SN messages out of a byte stream (a serial line to a forwarder, or TCP), for transports that
//! do not keep message boundaries the way UDP does.
//!
//! The Length field is the only framing, so this module reads it from partial input, refuses a Length over the
//! caller's limit before buffering the rest (a peer cannot make the buffer grow past the limit), and hands a
//! complete message to the datagram decoder. UDP front ends do not need this module.

use bytes::BytesMut;

use crate::decode::decode_bytes;
use crate::error::DecodeError;
use crate::header::{LONG_LENGTH_MARKER, MAX_MESSAGE_LEN, MsgType};
use crate::message::Message;

/// Default limit for [`decode_stream`]: the largest message the Length field can describe.
pub const DEFAULT_MAX_MESSAGE_LEN: usize = MAX_MESSAGE_LEN;

/// Takes one message from the front of `buf`. Returns `Ok(None)` and consumes nothing while the message is
/// incomplete; on success consumes exactly that message's octets (for an encapsulation, its header and the
/// relayed message). A Length over `max_message_len` fails as soon as the Length field is readable.
pub fn decode_stream(buf: &mut BytesMut, max_message_len: usize) -> Result<Option<Message>, DecodeError> {
    let Some(len) = frame_len(buf, 0, max_message_len, true)? else {
        return Ok(None);
    };
    if buf.len() < len {
        return Ok(None);
    }
    decode_bytes(buf.split_to(len).freeze()).map(Some)
}

/// Octets of the message starting at `start`, once enough of it is buffered to tell; `None` until then.
fn frame_len(
    buf: &[u8],
    start: usize,
    max_message_len: usize,
    follow_encapsulation: bool,
) -> Result<Option<usize>, DecodeError> {
    let Some(&first) = buf.get(start) else {
        return Ok(None);
    };
    let (declared, length_field_len) = if first == LONG_LENGTH_MARKER {
        match buf.get(start + 1..start + 3) {
            Some(&[hi, lo]) => (usize::from(u16::from_be_bytes([hi, lo])), 3),
            _ => return Ok(None),
        }
    } else {
        (usize::from(first), 1)
    };
    let minimum = length_field_len + 1;
    if declared < minimum {
        return Err(DecodeError::LengthTooSmall { offset: start, declared, minimum });
    }
    if declared > max_message_len {
        return Err(DecodeError::MessageTooLarge { offset: start, declared, limit: max_message_len });
    }
    let Some(&msg_type) = buf.get(start + length_field_len) else {
        return Ok(None);
    };
    if follow_encapsulation && msg_type == MsgType::Encapsulated.to_u8() {
        // §5.5: this Length covers only the encapsulation header; the relayed message has its own. One level
        // only: a nested encapsulation is framed by its header alone and then refused by the decoder.
        return Ok(frame_len(buf, start + declared, max_message_len, false)?.map(|inner| declared + inner));
    }
    Ok(Some(declared))
}
