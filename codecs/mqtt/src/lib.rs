//! Framing and packet codec: finds the protocol level in the first CONNECT, enforces the
//! packet-size limit on the fixed header (before the body is buffered), and hands complete
//! frames to `rmqtt-codec`.
//!
//! One packet model for both protocol levels: 3.1.1 packets are lifted into the MQTT 5 types
//! on decode and lowered on encode, so the session logic is written once. This module knows
//! nothing of sessions or the core.

use std::num::NonZeroU16;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use bytestring::ByteString;
use rmqtt_codec::error::{DecodeError, EncodeError};
use rmqtt_codec::types::{Publish, QoS};
use rmqtt_codec::v3;
use rmqtt_codec::v5::PublishProperties;
use rmqtt_codec::v5::{self, DisconnectReasonCode as Dis};
use thiserror::Error;
use tokio_util::codec::{Decoder, Encoder};

/// The packet model the session speaks (MQTT 5 shapes; 3.1.1 packets are converted).
pub type Packet = v5::Packet;

/// A PUBLISH to write, borrowing its topic and payload from the message it carries: a 3.1.1
/// delivery is written straight from the borrow, without taking (and later dropping) a
/// counted handle on each, which a fan-out's subscribers would all touch. MQTT 5's goes
/// through `rmqtt-codec`, which takes owned handles ([`PublishOut::to_owned`]).
#[derive(Debug, Clone)]
pub struct PublishOut<'a> {
    /// Duplicate delivery flag.
    pub dup: bool,
    /// Retain flag.
    pub retain: bool,
    /// Quality of service.
    pub qos: QoS,
    /// Topic name; empty when an MQTT 5 topic alias stands for it.
    pub topic: &'a ByteString,
    /// Packet identifier, for QoS 1 and 2.
    pub packet_id: Option<NonZeroU16>,
    /// The bytes, as published.
    pub payload: &'a Bytes,
    /// MQTT 5 properties; `None` for 3.1.1.
    pub properties: Option<PublishProperties>,
}

impl PublishOut<'_> {
    /// The owned packet, for `rmqtt-codec` and for a resend that outlives the borrow.
    pub fn to_owned(self) -> Publish {
        Publish {
            dup: self.dup,
            retain: self.retain,
            qos: self.qos,
            topic: self.topic.clone(),
            packet_id: self.packet_id,
            payload: self.payload.clone(),
            properties: self.properties,
        }
    }
}

/// Which MQTT protocol level a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// MQTT 3.1 (level 3, "MQIsdp") and 3.1.1 (level 4).
    V3,
    /// MQTT 5.0 (level 5).
    V5,
}

/// Why bytes from a client could not be turned into a packet.
#[derive(Debug, Error)]
pub enum CodecError {
    /// The fixed header announces more bytes than the limit (MQTT 5 §3.1.2.11.4).
    #[error("packet of {size} bytes exceeds the {max}-byte limit")]
    TooLarge {
        /// Whole packet size announced by the fixed header.
        size: u64,
        /// The configured limit.
        max: u32,
    },
    /// The Remaining Length field uses more than four bytes (MQTT-1.5.5, §2.2.3).
    #[error("remaining length field is longer than 4 bytes")]
    BadRemainingLength,
    /// The first packet was not a CONNECT (MQTT-3.1.0-1).
    #[error("first packet has type byte {0:#04x}, not CONNECT")]
    NotConnect(u8),
    /// The CONNECT's protocol name is neither "MQTT" nor "MQIsdp" (MQTT-3.1.2-1).
    #[error("protocol name {0:?} is not MQTT")]
    BadProtocolName(String),
    /// A protocol level other than 3, 4 or 5 (MQTT-3.1.2-2: answer CONNACK 0x01).
    #[error("protocol level {0} is not supported")]
    UnsupportedLevel(u8),
    /// `rmqtt-codec` refused the frame.
    #[error("malformed packet (type byte {type_byte:#04x}): {source}")]
    Malformed {
        /// First byte of the offending frame.
        type_byte: u8,
        /// What the codec found.
        source: DecodeError,
    },
    /// The packet could not be encoded.
    #[error("cannot encode packet: {0}")]
    Encode(#[from] EncodeError),
}

impl CodecError {
    /// Whether the 3.1.1 CONNECT had a zero-length client id without clean session
    /// (MQTT-3.1.3-8: CONNACK 0x02).
    pub fn is_identifier_rejected(&self) -> bool {
        matches!(self, CodecError::Malformed { source: DecodeError::InvalidClientId, .. })
    }

    /// The MQTT 5 DISCONNECT (or CONNACK) reason code that tells the client what it did wrong.
    pub fn reason_code(&self) -> Dis {
        match self {
            CodecError::TooLarge { .. } => Dis::PacketTooLarge,
            CodecError::Malformed { source, .. } => match source {
                DecodeError::InvalidTopicName => Dis::TopicNameInvalid,
                DecodeError::InvalidTopicFilter => Dis::TopicFilterInvalid,
                DecodeError::MaxSizeExceeded { .. } => Dis::PacketTooLarge,
                DecodeError::InvalidProtocol
                | DecodeError::ConnectReservedFlagSet
                | DecodeError::InvalidConnectFlags
                | DecodeError::PacketIdRequired => Dis::ProtocolError,
                _ => Dis::MalformedPacket,
            },
            CodecError::NotConnect(_) | CodecError::BadProtocolName(_) | CodecError::UnsupportedLevel(_) => {
                Dis::ProtocolError
            }
            CodecError::BadRemainingLength => Dis::MalformedPacket,
            CodecError::Encode(_) => Dis::ImplementationSpecificError,
        }
    }
}

/// Reads the fixed header: `Some((header_len, remaining_len))` once it is complete.
/// Never reads past `buf` and rejects a fifth length byte without waiting for more input.
pub fn fixed_header(buf: &[u8]) -> Result<Option<(usize, u32)>, CodecError> {
    let mut value: u32 = 0;
    for i in 0..4 {
        let Some(&byte) = buf.get(1 + i) else { return Ok(None) };
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(Some((2 + i, value)));
        }
    }
    if buf.len() > 4 { Err(CodecError::BadRemainingLength) } else { Ok(None) }
}

/// Looks at the start of a connection's first packet and says which protocol level it speaks,
/// without consuming anything. `Ok(None)` = need more bytes.
pub fn peek_version(buf: &[u8], max_packet_size: u32) -> Result<Option<(Version, u8)>, CodecError> {
    let Some(&first) = buf.first() else { return Ok(None) };
    if first != 0x10 {
        return Err(CodecError::NotConnect(first));
    }
    let Some((header_len, remaining)) = fixed_header(buf)? else { return Ok(None) };
    let body = &buf[header_len..];
    // Protocol name: u16 length + "MQTT" (3.1.1/5) or "MQIsdp" (3.1), then the level byte.
    if body.len() < 2 {
        return Ok(None);
    }
    let name_len = usize::from(u16::from_be_bytes([body[0], body[1]]));
    if name_len != 4 && name_len != 6 {
        return Err(CodecError::BadProtocolName(format!("<{name_len} bytes>")));
    }
    let Some(name) = body.get(2..2 + name_len) else { return Ok(None) };
    if name != b"MQTT" && name != b"MQIsdp" {
        return Err(CodecError::BadProtocolName(String::from_utf8_lossy(name).into_owned()));
    }
    let Some(&level) = body.get(2 + name_len) else { return Ok(None) };
    let version = match (name, level) {
        (b"MQTT", 4) | (b"MQIsdp", 3) => Version::V3,
        (b"MQTT", 5) => Version::V5,
        _ => return Err(CodecError::UnsupportedLevel(level)),
    };
    let size = header_len as u64 + u64::from(remaining);
    if size > u64::from(max_packet_size) {
        return Err(CodecError::TooLarge { size, max: max_packet_size });
    }
    Ok(Some((version, level)))
}

/// The CONNACK that refuses an unknown protocol level: 3.1.1 format, return code 0x01
/// (MQTT-3.1.2-2), which every client level can read.
pub const CONNACK_UNACCEPTABLE_PROTOCOL: [u8; 4] = [0x20, 0x02, 0x00, 0x01];

/// Decoder and encoder for one connection, fixed to its protocol level.
pub struct PacketCodec {
    max_packet_size: u32,
    level: Level,
}

/// The inner codec of the connection's level: only one of them, since it sits in every
/// connection's task.
enum Level {
    V3(v3::Codec),
    V5(v5::Codec),
}

impl PacketCodec {
    /// A codec for `version` that refuses packets larger than `max_packet_size` bytes.
    pub fn new(version: Version, max_packet_size: u32) -> Self {
        let level = match version {
            Version::V3 => Level::V3(v3::Codec::new(max_packet_size)),
            Version::V5 => Level::V5(v5::Codec::new(max_packet_size, 0)),
        };
        PacketCodec { max_packet_size, level }
    }

    /// The protocol level in use.
    pub fn version(&self) -> Version {
        match self.level {
            Level::V3(_) => Version::V3,
            Level::V5(_) => Version::V5,
        }
    }

    /// Takes one complete packet off the front of `buf`, or `Ok(None)` (nothing consumed)
    /// when more bytes are needed. The size limit is checked as soon as the fixed header is
    /// in, so an oversize packet is refused before its body is buffered.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Packet>, CodecError> {
        let Some(&type_byte) = buf.first() else { return Ok(None) };
        let Some((header_len, remaining)) = fixed_header(buf)? else { return Ok(None) };
        let size = header_len as u64 + u64::from(remaining);
        if size > u64::from(self.max_packet_size) {
            return Err(CodecError::TooLarge { size, max: self.max_packet_size });
        }
        if (buf.len() as u64) < size {
            buf.reserve(size as usize - buf.len());
            return Ok(None);
        }
        let malformed = |source| CodecError::Malformed { type_byte, source };
        // The whole frame is buffered, so the inner codec decodes it in one call and keeps no
        // partial state between calls.
        let packet = match &mut self.level {
            Level::V5(codec) => codec.decode(buf).map_err(malformed)?.map(|(p, _)| p),
            Level::V3(codec) => codec.decode(buf).map_err(malformed)?.map(|(p, _)| lift_v3(p)),
        };
        match packet {
            Some(p) => Ok(Some(p)),
            None => {
                // Cannot happen with a complete frame; drop it rather than loop on it.
                buf.advance((size as usize).min(buf.len()));
                Err(malformed(DecodeError::InvalidLength))
            }
        }
    }

    /// Decodes the first packet of a connection. For MQTT 5 a zero-length client id is legal
    /// with clean start 0 (MQTT 5 §3.1.3.1: the server assigns one), which `rmqtt-codec` refuses
    /// (it applies the 3.1.1 rule MQTT-3.1.3-8 to both levels): the clean-start bit is set for
    /// the decoder and the client's value restored afterwards.
    pub fn decode_connect(&mut self, buf: &mut BytesMut) -> Result<Option<Packet>, CodecError> {
        let Some((header_len, remaining)) = fixed_header(buf)? else { return Ok(None) };
        let complete = buf.len() as u64 >= header_len as u64 + u64::from(remaining);
        // Flags follow the protocol name (u16 length + name) and the level byte.
        let flags_at = buf
            .get(header_len..header_len + 2)
            .map(|n| header_len + 2 + usize::from(u16::from_be_bytes([n[0], n[1]])) + 1);
        let mut forced_clean = false;
        if self.version() == Version::V5
            && complete
            && let Some(flags) = flags_at.and_then(|i| buf.get_mut(i))
            && *flags & 0x02 == 0
        {
            *flags |= 0x02;
            forced_clean = true;
        }
        let mut packet = self.decode(buf)?;
        if forced_clean && let Some(Packet::Connect(c)) = packet.as_mut() {
            c.clean_start = false;
        }
        Ok(packet)
    }

    /// Appends `packet` to `out`, in the connection's protocol level. Packets that 3.1.1 has no
    /// form for (a server DISCONNECT, AUTH) write nothing. Returns the bytes written.
    pub fn encode(&mut self, packet: Packet, out: &mut BytesMut) -> Result<usize, CodecError> {
        let start = out.len();
        match &mut self.level {
            Level::V5(codec) => codec.encode(packet, out)?,
            Level::V3(codec) => {
                if let Some(p) = lower_v3(packet) {
                    codec.encode(p, out)?;
                }
            }
        }
        Ok(out.len() - start)
    }

    /// Appends a PUBLISH to `out`, in the connection's protocol level; the bytes written. The
    /// hot path of every delivery: a 3.1.1 PUBLISH is written here from its fields, byte for
    /// byte what `rmqtt-codec` writes (a test compares them), without the box its `Packet`
    /// takes per message. MQTT 5's, with its properties, goes through `rmqtt-codec`.
    pub fn encode_publish(&mut self, publish: PublishOut<'_>, out: &mut BytesMut) -> Result<usize, CodecError> {
        if let Level::V5(_) = self.level {
            return self.encode(Packet::Publish(Box::new(publish.to_owned())), out);
        }
        let id = match (publish.qos, publish.packet_id) {
            (QoS::AtMostOnce, None) => None,
            (QoS::AtMostOnce, Some(_)) => return Err(EncodeError::MalformedPacket.into()),
            (_, Some(id)) => Some(id),
            (_, None) => return Err(EncodeError::PacketIdRequired.into()),
        };
        let topic_len = u16::try_from(publish.topic.len()).map_err(|_| EncodeError::InvalidLength)?;
        let remaining = 2 + publish.topic.len() + if id.is_some() { 2 } else { 0 } + publish.payload.len();
        // The largest Remaining Length that four bytes can say (MQTT-1.5.5).
        let remaining =
            u32::try_from(remaining).ok().filter(|&n| n <= 268_435_455).ok_or(EncodeError::InvalidLength)?;
        let start = out.len();
        out.reserve(remaining as usize + 5);
        out.put_u8(0x30 | (u8::from(publish.dup) << 3) | (u8::from(publish.qos) << 1) | u8::from(publish.retain));
        let mut length = remaining;
        loop {
            let byte = (length & 0x7f) as u8;
            length >>= 7;
            if length == 0 {
                out.put_u8(byte);
                break;
            }
            out.put_u8(byte | 0x80);
        }
        out.put_u16(topic_len);
        out.put_slice(publish.topic.as_bytes());
        if let Some(id) = id {
            out.put_u16(id.get());
        }
        out.put_slice(publish.payload);
        Ok(out.len() - start)
    }
}

/// 3.1.1 → MQTT 5 shapes. Properties take their "absent" values.
fn lift_v3(packet: v3::Packet) -> Packet {
    use v3::Packet as P3;
    let ack = |packet_id| v5::PublishAck { packet_id, ..Default::default() };
    let ack2 = |packet_id| v5::PublishAck2 { packet_id, ..Default::default() };
    match packet {
        P3::Connect(c) => Packet::Connect(Box::new(v5::Connect {
            clean_start: c.clean_session,
            keep_alive: c.keep_alive,
            last_will: c.last_will.map(|w| v5::LastWill {
                qos: w.qos,
                retain: w.retain,
                topic: w.topic,
                message: w.message,
                will_delay_interval_sec: None,
                correlation_data: None,
                message_expiry_interval: None,
                content_type: None,
                user_properties: Vec::new(),
                is_utf8_payload: None,
                response_topic: None,
            }),
            client_id: c.client_id,
            username: c.username,
            password: c.password,
            ..Default::default()
        })),
        P3::Publish(p) => Packet::Publish(p),
        P3::PublishAck { packet_id } => Packet::PublishAck(ack(packet_id)),
        P3::PublishReceived { packet_id } => Packet::PublishReceived(ack(packet_id)),
        P3::PublishRelease { packet_id } => Packet::PublishRelease(ack2(packet_id)),
        P3::PublishComplete { packet_id } => Packet::PublishComplete(ack2(packet_id)),
        P3::Subscribe { packet_id, topic_filters } => Packet::Subscribe(v5::Subscribe {
            packet_id,
            id: None,
            user_properties: Vec::new(),
            topic_filters: topic_filters
                .into_iter()
                .map(|(f, qos)| (f, v5::SubscriptionOptions { qos, ..Default::default() }))
                .collect(),
        }),
        P3::Unsubscribe { packet_id, topic_filters } => {
            Packet::Unsubscribe(v5::Unsubscribe { packet_id, user_properties: Vec::new(), topic_filters })
        }
        P3::PingRequest => Packet::PingRequest,
        P3::PingResponse => Packet::PingResponse,
        P3::Disconnect => Packet::Disconnect(v5::Disconnect::default()),
        P3::ConnectAck(_) => Packet::ConnectAck(Box::default()),
        P3::SubscribeAck { packet_id, .. } => Packet::SubscribeAck(v5::SubscribeAck {
            packet_id,
            properties: Vec::new(),
            reason_string: None,
            status: Vec::new(),
        }),
        P3::UnsubscribeAck { packet_id } => Packet::UnsubscribeAck(v5::UnsubscribeAck {
            packet_id,
            properties: Vec::new(),
            reason_string: None,
            status: Vec::new(),
        }),
    }
}

/// MQTT 5 shapes → 3.1.1; `None` where 3.1.1 has no such packet.
fn lower_v3(packet: Packet) -> Option<v3::Packet> {
    use v3::Packet as P3;
    use v5::ConnectAckReason as R5;
    Some(match packet {
        Packet::ConnectAck(ack) => P3::ConnectAck(v3::ConnectAck {
            session_present: ack.session_present,
            return_code: match ack.reason_code {
                R5::Success => v3::ConnectAckReason::ConnectionAccepted,
                R5::UnsupportedProtocolVersion => v3::ConnectAckReason::UnacceptableProtocolVersion,
                R5::ClientIdentifierNotValid => v3::ConnectAckReason::IdentifierRejected,
                R5::BadUserNameOrPassword => v3::ConnectAckReason::BadUserNameOrPassword,
                R5::NotAuthorized => v3::ConnectAckReason::NotAuthorized,
                _ => v3::ConnectAckReason::ServiceUnavailable,
            },
        }),
        Packet::Publish(mut p) => {
            p.properties = None;
            P3::Publish(p)
        }
        Packet::PublishAck(a) => P3::PublishAck { packet_id: a.packet_id },
        Packet::PublishReceived(a) => P3::PublishReceived { packet_id: a.packet_id },
        Packet::PublishRelease(a) => P3::PublishRelease { packet_id: a.packet_id },
        Packet::PublishComplete(a) => P3::PublishComplete { packet_id: a.packet_id },
        Packet::SubscribeAck(a) => P3::SubscribeAck {
            packet_id: a.packet_id,
            status: a
                .status
                .into_iter()
                .map(|s| match s {
                    v5::SubscribeAckReason::GrantedQos0 => v3::SubscribeReturnCode::Success(v3::QoS::AtMostOnce),
                    v5::SubscribeAckReason::GrantedQos1 => v3::SubscribeReturnCode::Success(v3::QoS::AtLeastOnce),
                    v5::SubscribeAckReason::GrantedQos2 => v3::SubscribeReturnCode::Success(v3::QoS::ExactlyOnce),
                    _ => v3::SubscribeReturnCode::Failure,
                })
                .collect(),
        },
        Packet::UnsubscribeAck(a) => P3::UnsubscribeAck { packet_id: a.packet_id },
        Packet::PingResponse => P3::PingResponse,
        Packet::PingRequest => P3::PingRequest,
        Packet::Connect(_)
        | Packet::Subscribe(_)
        | Packet::Unsubscribe(_)
        | Packet::Disconnect(_)
        | Packet::Auth(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // MQTT 3.1.1 §3.1 figure 3.6: CONNECT with protocol name "MQTT", level 4, clean session,
    // keep alive 60, client id "ab".
    const CONNECT_V4: &[u8] = b"\x10\x0e\x00\x04MQTT\x04\x02\x00\x3c\x00\x02ab";
    // MQTT 5 §3.1: the same with level 5 and an empty property block.
    const CONNECT_V5: &[u8] = b"\x10\x0f\x00\x04MQTT\x05\x02\x00\x3c\x00\x00\x02ab";

    fn borrowed(p: &Publish) -> PublishOut<'_> {
        PublishOut {
            dup: p.dup,
            retain: p.retain,
            qos: p.qos,
            topic: &p.topic,
            packet_id: p.packet_id,
            payload: &p.payload,
            properties: p.properties.clone(),
        }
    }

    #[test]
    fn a_v3_publish_is_written_as_rmqtt_codec_writes_it() {
        let mut ours = PacketCodec::new(Version::V3, u32::MAX);
        // One to four bytes of Remaining Length, and every flag.
        for payload_len in [0, 1, 100, 125, 126, 200, 16_000, 16_379, 20_000, 2_100_000] {
            for (qos, id) in [(QoS::AtMostOnce, None), (QoS::AtLeastOnce, Some(7)), (QoS::ExactlyOnce, Some(65_535))] {
                for (dup, retain) in [(false, false), (true, false), (false, true), (true, true)] {
                    let publish = Publish {
                        dup,
                        retain,
                        qos,
                        topic: "sensors/ünit/7".into(),
                        packet_id: id.and_then(std::num::NonZeroU16::new),
                        payload: bytes::Bytes::from(vec![0xa5; payload_len]),
                        properties: None,
                    };
                    let mut theirs = BytesMut::new();
                    v3::Codec::new(u32::MAX)
                        .encode(v3::Packet::Publish(Box::new(publish.clone())), &mut theirs)
                        .unwrap();
                    let mut written = BytesMut::from(&b"kept"[..]);
                    let n = ours.encode_publish(borrowed(&publish), &mut written).unwrap();
                    assert_eq!(n, theirs.len(), "{payload_len} bytes, {qos:?}, dup {dup}, retain {retain}");
                    assert!(written[4..] == theirs[..], "{payload_len} bytes, {qos:?}, dup {dup}, retain {retain}");
                }
            }
        }
    }

    #[test]
    fn a_v3_publish_that_cannot_be_written_is_refused() {
        let mut codec = PacketCodec::new(Version::V3, u32::MAX);
        let publish = |qos, packet_id: Option<u16>, topic_len| Publish {
            dup: false,
            retain: false,
            qos,
            topic: "t".repeat(topic_len).into(),
            packet_id: packet_id.and_then(std::num::NonZeroU16::new),
            payload: bytes::Bytes::new(),
            properties: None,
        };
        let mut out = BytesMut::new();
        assert!(codec.encode_publish(borrowed(&publish(QoS::AtLeastOnce, None, 1)), &mut out).is_err());
        assert!(codec.encode_publish(borrowed(&publish(QoS::AtMostOnce, Some(1), 1)), &mut out).is_err());
        assert!(codec.encode_publish(borrowed(&publish(QoS::AtMostOnce, None, 65_536)), &mut out).is_err());
        assert!(out.is_empty(), "nothing written");
    }

    #[test]
    fn peek_finds_the_level_at_every_split() {
        for (frame, want) in [(CONNECT_V4, Version::V3), (CONNECT_V5, Version::V5)] {
            for cut in 0..frame.len() {
                match peek_version(&frame[..cut], 1024) {
                    Ok(None) => {}
                    Ok(Some((v, _))) => assert_eq!(v, want, "cut {cut}"),
                    Err(e) => panic!("cut {cut}: {e}"),
                }
            }
            assert_eq!(peek_version(frame, 1024).unwrap().unwrap().0, want);
        }
    }

    #[test]
    fn peek_refuses_what_is_not_an_mqtt_connect() {
        assert!(matches!(peek_version(b"\x30\x00", 1024), Err(CodecError::NotConnect(0x30))));
        assert!(matches!(peek_version(b"\x10\x0e\x00\x04MQXX\x04", 1024), Err(CodecError::BadProtocolName(_))));
        assert!(matches!(peek_version(b"\x10\x0e\x00\x04MQTT\x06", 1024), Err(CodecError::UnsupportedLevel(6))));
        assert!(matches!(peek_version(CONNECT_V4, 8), Err(CodecError::TooLarge { size: 16, max: 8 })));
        assert!(matches!(peek_version(b"\x10\xff\xff\xff\xff\x01", 1024), Err(CodecError::BadRemainingLength)));
    }

    #[test]
    fn decodes_each_split_then_the_whole_frame() {
        for (frame, version) in [(CONNECT_V4, Version::V3), (CONNECT_V5, Version::V5)] {
            for cut in 0..frame.len() {
                let mut codec = PacketCodec::new(version, 1024);
                let mut buf = BytesMut::from(&frame[..cut]);
                assert!(codec.decode(&mut buf).unwrap().is_none(), "cut {cut}");
                buf.extend_from_slice(&frame[cut..]);
                let Some(Packet::Connect(c)) = codec.decode(&mut buf).unwrap() else { panic!("not a CONNECT") };
                assert_eq!((&*c.client_id, c.keep_alive, c.clean_start), ("ab", 60, true));
                assert!(buf.is_empty());
            }
        }
    }

    #[test]
    fn oversize_is_refused_from_the_header_alone() {
        let mut codec = PacketCodec::new(Version::V5, 100);
        // PUBLISH announcing 16384 bytes; only the header has arrived.
        let mut buf = BytesMut::from(&b"\x30\x80\x80\x01"[..]);
        assert!(matches!(codec.decode(&mut buf), Err(CodecError::TooLarge { max: 100, .. })));
    }

    #[test]
    fn v3_acks_lose_their_reason_codes_and_server_disconnect_is_silent() {
        let mut codec = PacketCodec::new(Version::V3, 1024);
        let mut out = BytesMut::new();
        let id = std::num::NonZeroU16::new(7).unwrap();
        codec.encode(Packet::PublishAck(v5::PublishAck { packet_id: id, ..Default::default() }), &mut out).unwrap();
        assert_eq!(&out[..], b"\x40\x02\x00\x07"); // MQTT 3.1.1 §3.4
        out.clear();
        assert_eq!(codec.encode(Packet::Disconnect(v5::Disconnect::new(Dis::ProtocolError)), &mut out).unwrap(), 0);
    }

    #[test]
    fn golden_publish_decodes_at_every_split() {
        // MQTT 3.1.1 §3.3.2.3 figure 3.11: topic "a/b", packet identifier 10; payload "hi".
        let frame: &[u8] = b"\x32\x09\x00\x03a/b\x00\x0ahi";
        for cut in 0..frame.len() {
            let mut codec = PacketCodec::new(Version::V3, 1024);
            let mut buf = BytesMut::from(&frame[..cut]);
            assert!(codec.decode(&mut buf).unwrap().is_none(), "cut {cut}");
            buf.extend_from_slice(&frame[cut..]);
            let Some(Packet::Publish(p)) = codec.decode(&mut buf).unwrap() else { panic!("not a PUBLISH") };
            assert_eq!((&*p.topic, p.packet_id.map(|n| n.get()), &p.payload[..]), ("a/b", Some(10), &b"hi"[..]));
        }
    }

    #[test]
    fn v5_connect_with_empty_id_and_no_clean_start_is_accepted() {
        // MQTT 5 §3.1.3.1: the server assigns an id; the decoder must not refuse it.
        let frame: &[u8] = b"\x10\x0d\x00\x04MQTT\x05\x00\x00\x3c\x00\x00\x00";
        let mut codec = PacketCodec::new(Version::V5, 1024);
        let mut buf = BytesMut::from(frame);
        let Some(Packet::Connect(c)) = codec.decode_connect(&mut buf).unwrap() else { panic!("not a CONNECT") };
        assert!(!c.clean_start && c.client_id.is_empty());
        let mut v3 = PacketCodec::new(Version::V3, 1024);
        let mut buf = BytesMut::from(&b"\x10\x0c\x00\x04MQTT\x04\x00\x00\x3c\x00\x00"[..]);
        assert!(v3.decode_connect(&mut buf).unwrap_err().is_identifier_rejected(), "MQTT-3.1.3-8");
    }

    use proptest::prelude::*;

    fn publish_strategy(v5: bool) -> impl Strategy<Value = rmqtt_codec::types::Publish> {
        (
            "[a-z0-9/]{1,20}",
            proptest::collection::vec(any::<u8>(), 0..64),
            0u8..3,
            any::<bool>(),
            any::<bool>(),
            1u16..,
            proptest::option::of("[a-z/]{1,10}"),
            proptest::collection::vec(("[a-z]{1,5}", "[a-z]{0,5}"), 0..3),
        )
            .prop_map(move |(topic, payload, qos, retain, dup, id, content_type, user)| {
                let qos = match qos {
                    0 => rmqtt_codec::types::QoS::AtMostOnce,
                    1 => rmqtt_codec::types::QoS::AtLeastOnce,
                    _ => rmqtt_codec::types::QoS::ExactlyOnce,
                };
                let properties = v5.then(|| v5::PublishProperties {
                    content_type: content_type.map(Into::into),
                    user_properties: user.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
                    ..Default::default()
                });
                rmqtt_codec::types::Publish {
                    dup: dup && qos != rmqtt_codec::types::QoS::AtMostOnce,
                    retain,
                    qos,
                    topic: topic.into(),
                    packet_id: (qos != rmqtt_codec::types::QoS::AtMostOnce)
                        .then(|| std::num::NonZeroU16::new(id))
                        .flatten(),
                    payload: payload.into(),
                    properties,
                }
            })
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
            for version in [Version::V3, Version::V5] {
                let mut codec = PacketCodec::new(version, 64);
                let mut buf = BytesMut::from(&bytes[..]);
                let _ = codec.decode_connect(&mut buf);
                while let Ok(Some(_)) = codec.decode(&mut buf) {}
                let _ = peek_version(&bytes, 64);
            }
        }

        #[test]
        fn publish_encode_then_decode_is_identity(v5 in any::<bool>(), publish in any::<bool>().prop_flat_map(publish_strategy)) {
            let version = if v5 { Version::V5 } else { Version::V3 };
            let mut publish = publish;
            if !v5 { publish.properties = None; }
            if v5 && publish.properties.is_none() { publish.properties = Some(Default::default()); }
            let mut codec = PacketCodec::new(version, 1 << 16);
            let mut buf = BytesMut::new();
            codec.encode(Packet::Publish(Box::new(publish.clone())), &mut buf).unwrap();
            let Some(Packet::Publish(back)) = codec.decode(&mut buf).unwrap() else { panic!("not a PUBLISH") };
            prop_assert_eq!(*back, publish);
            prop_assert!(buf.is_empty());
        }
    }
}
