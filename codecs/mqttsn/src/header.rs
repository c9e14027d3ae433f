//! The message header of MQTT-SN 1.2 §5.2: the Length field in its two forms and the MsgType octet.
//!
//! Both the decoder and the encoder go through here, so the rules "Length counts the whole message including
//! itself" and "the short form whenever it fits" live in one place.

use crate::error::DecodeError;

/// First octet that announces the three-octet Length form (§5.2.1): `0x01` followed by a 16-bit length.
pub const LONG_LENGTH_MARKER: u8 = 0x01;

/// Largest value the Length field can hold (its three-octet form); no MQTT-SN message can be longer.
pub const MAX_MESSAGE_LEN: usize = u16::MAX as usize;

/// Largest message that still uses the one-octet Length form.
pub const MAX_SHORT_MESSAGE_LEN: usize = u8::MAX as usize;

/// Message types of Table 3 (§5.2.2). Values that the table marks "reserved" have no variant, so decoding
/// them fails with [`DecodeError::UnknownMessageType`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MsgType {
    /// Layout in §5.4.1.
    Advertise = 0x00,
    /// Layout in §5.4.2.
    SearchGw = 0x01,
    /// Layout in §5.4.3.
    GwInfo = 0x02,
    /// Layout in §5.4.4.
    Connect = 0x04,
    /// Layout in §5.4.5.
    ConnAck = 0x05,
    /// Layout in §5.4.6.
    WillTopicReq = 0x06,
    /// Layout in §5.4.7.
    WillTopic = 0x07,
    /// Layout in §5.4.8.
    WillMsgReq = 0x08,
    /// Layout in §5.4.9.
    WillMsg = 0x09,
    /// Layout in §5.4.10.
    Register = 0x0A,
    /// Layout in §5.4.11.
    RegAck = 0x0B,
    /// Layout in §5.4.12.
    Publish = 0x0C,
    /// Layout in §5.4.13.
    PubAck = 0x0D,
    /// Layout in §5.4.14.
    PubComp = 0x0E,
    /// Layout in §5.4.14.
    PubRec = 0x0F,
    /// Layout in §5.4.14.
    PubRel = 0x10,
    /// Layout in §5.4.15.
    Subscribe = 0x12,
    /// Layout in §5.4.16.
    SubAck = 0x13,
    /// Layout in §5.4.17.
    Unsubscribe = 0x14,
    /// Layout in §5.4.18.
    UnsubAck = 0x15,
    /// Layout in §5.4.19.
    PingReq = 0x16,
    /// Layout in §5.4.20.
    PingResp = 0x17,
    /// Layout in §5.4.21.
    Disconnect = 0x18,
    /// Layout in §5.4.22.
    WillTopicUpd = 0x1A,
    /// Layout in §5.4.24.
    WillTopicResp = 0x1B,
    /// Layout in §5.4.23.
    WillMsgUpd = 0x1C,
    /// Layout in §5.4.25.
    WillMsgResp = 0x1D,
    /// Forwarder encapsulation, §5.5.
    Encapsulated = 0xFE,
}

impl MsgType {
    /// Looks a MsgType octet up in Table 3; `None` for the reserved values.
    pub const fn from_u8(value: u8) -> Option<MsgType> {
        Some(match value {
            0x00 => MsgType::Advertise,
            0x01 => MsgType::SearchGw,
            0x02 => MsgType::GwInfo,
            0x04 => MsgType::Connect,
            0x05 => MsgType::ConnAck,
            0x06 => MsgType::WillTopicReq,
            0x07 => MsgType::WillTopic,
            0x08 => MsgType::WillMsgReq,
            0x09 => MsgType::WillMsg,
            0x0A => MsgType::Register,
            0x0B => MsgType::RegAck,
            0x0C => MsgType::Publish,
            0x0D => MsgType::PubAck,
            0x0E => MsgType::PubComp,
            0x0F => MsgType::PubRec,
            0x10 => MsgType::PubRel,
            0x12 => MsgType::Subscribe,
            0x13 => MsgType::SubAck,
            0x14 => MsgType::Unsubscribe,
            0x15 => MsgType::UnsubAck,
            0x16 => MsgType::PingReq,
            0x17 => MsgType::PingResp,
            0x18 => MsgType::Disconnect,
            0x1A => MsgType::WillTopicUpd,
            0x1B => MsgType::WillTopicResp,
            0x1C => MsgType::WillMsgUpd,
            0x1D => MsgType::WillMsgResp,
            0xFE => MsgType::Encapsulated,
            _ => return None,
        })
    }

    /// The octet on the wire.
    pub const fn to_u8(self) -> u8 {
        self as u8
    }

    /// The name the specification uses, for log lines and error messages.
    pub const fn name(self) -> &'static str {
        match self {
            MsgType::Advertise => "ADVERTISE",
            MsgType::SearchGw => "SEARCHGW",
            MsgType::GwInfo => "GWINFO",
            MsgType::Connect => "CONNECT",
            MsgType::ConnAck => "CONNACK",
            MsgType::WillTopicReq => "WILLTOPICREQ",
            MsgType::WillTopic => "WILLTOPIC",
            MsgType::WillMsgReq => "WILLMSGREQ",
            MsgType::WillMsg => "WILLMSG",
            MsgType::Register => "REGISTER",
            MsgType::RegAck => "REGACK",
            MsgType::Publish => "PUBLISH",
            MsgType::PubAck => "PUBACK",
            MsgType::PubComp => "PUBCOMP",
            MsgType::PubRec => "PUBREC",
            MsgType::PubRel => "PUBREL",
            MsgType::Subscribe => "SUBSCRIBE",
            MsgType::SubAck => "SUBACK",
            MsgType::Unsubscribe => "UNSUBSCRIBE",
            MsgType::UnsubAck => "UNSUBACK",
            MsgType::PingReq => "PINGREQ",
            MsgType::PingResp => "PINGRESP",
            MsgType::Disconnect => "DISCONNECT",
            MsgType::WillTopicUpd => "WILLTOPICUPD",
            MsgType::WillTopicResp => "WILLTOPICRESP",
            MsgType::WillMsgUpd => "WILLMSGUPD",
            MsgType::WillMsgResp => "WILLMSGRESP",
            MsgType::Encapsulated => "Encapsulated",
        }
    }
}

/// A parsed Length field plus the MsgType octet that follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// Value of the Length field: octets from the first Length octet to the end of the message (for an
    /// encapsulation: to the end of the Wireless Node Id, §5.5).
    pub declared: usize,
    /// Octets the Length field itself took: 1 or 3.
    pub length_field_len: usize,
    /// The raw MsgType octet, not yet looked up.
    pub msg_type: u8,
}

/// Reads the header of the message that starts at `start` in `datagram` and checks that the declared Length is
/// possible at all (at least the header) and does not run past the end of the datagram.
pub(crate) fn read_header(datagram: &[u8], start: usize) -> Result<Header, DecodeError> {
    let available = datagram.len().saturating_sub(start);
    let Some(&first) = datagram.get(start) else {
        return Err(DecodeError::Truncated { message: "header", field: "Length", offset: start, needed: 1, available });
    };
    let (declared, length_field_len) = if first == LONG_LENGTH_MARKER {
        match datagram.get(start + 1..start + 3) {
            Some(&[hi, lo]) => (usize::from(u16::from_be_bytes([hi, lo])), 3),
            _ => {
                return Err(DecodeError::Truncated {
                    message: "header",
                    field: "Length (3-octet form)",
                    offset: start,
                    needed: 3,
                    available,
                });
            }
        }
    } else {
        (usize::from(first), 1)
    };
    let minimum = length_field_len + 1;
    if declared < minimum {
        return Err(DecodeError::LengthTooSmall { offset: start, declared, minimum });
    }
    if declared > available {
        return Err(DecodeError::LengthExceedsDatagram { offset: start, declared, received: available });
    }
    // `declared >= minimum` and `declared <= available`, so the MsgType octet is inside the datagram.
    let msg_type = datagram.get(start + length_field_len).copied().ok_or(DecodeError::Truncated {
        message: "header",
        field: "MsgType",
        offset: start + length_field_len,
        needed: 1,
        available: 0,
    })?;
    Ok(Header { declared, length_field_len, msg_type })
}

/// Total length of a message whose MsgType octet plus body take `after_length` octets: the one-octet form
/// when the total fits in 255, otherwise the three-octet form (§5.2.1).
pub(crate) const fn total_len(after_length: usize) -> usize {
    if after_length < MAX_SHORT_MESSAGE_LEN { after_length + 1 } else { after_length + 3 }
}

/// Writes the Length field for a message of `total` octets (as computed by [`total_len`]).
pub(crate) fn put_length(out: &mut bytes::BytesMut, total: usize) {
    use bytes::BufMut;
    match u8::try_from(total) {
        // A total of 1 is impossible (every message has a MsgType), so the short form never collides with
        // the marker; the guard only keeps a bad caller from writing an ambiguous octet.
        Ok(short) if short != LONG_LENGTH_MARKER => out.put_u8(short),
        _ => {
            out.put_u8(LONG_LENGTH_MARKER);
            // The caller has checked `total <= MAX_MESSAGE_LEN`.
            out.put_u16(u16::try_from(total).unwrap_or(u16::MAX));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_defined_type_round_trips_and_reserved_ones_are_unknown() {
        let mut defined = 0;
        for value in 0..=u8::MAX {
            match MsgType::from_u8(value) {
                Some(t) => {
                    defined += 1;
                    assert_eq!(t.to_u8(), value);
                }
                None => assert!(matches!(value, 0x03 | 0x11 | 0x19 | 0x1E..=0xFD | 0xFF)),
            }
        }
        assert_eq!(defined, 28);
    }

    #[test]
    fn short_form_up_to_255_octets_then_long_form() {
        assert_eq!(total_len(1), 2);
        assert_eq!(total_len(254), 255);
        assert_eq!(total_len(255), 258);
    }
}
