//! The MQTT-SN 1.2 messages the bench's client sends and reads, and their wire layout (§5.2
//! header, §5.3.4 Flags, §5.4 messages). Written here rather than taken from tolk's
//! `mqttsn-codec`, so that a misreading of the spec shared by gateway and client cannot hide.
//! Only what a clean-session client with registered topic ids needs is modelled; any other
//! message type decodes as [`Packet::Other`] and is ignored by the client.

use anyhow::{Context, Result, bail};
use bytes::{BufMut, Bytes, BytesMut};

/// Largest UDP payload over IPv4 (65535 − 8-byte UDP header − 20-byte IP header), which is
/// also tolk's default `[mqttsn] max_message_size_bytes`.
pub const MAX_DATAGRAM: usize = 65_507;

/// Largest PUBLISH payload that fits [`MAX_DATAGRAM`]: the three-octet Length form, MsgType,
/// Flags, TopicId and MsgId take 9 octets.
pub const MAX_PAYLOAD: usize = MAX_DATAGRAM - 9;

/// ReturnCode "accepted" (§5.3.10).
pub const ACCEPTED: u8 = 0x00;

/// ReturnCode "rejected: invalid topic ID" (§5.3.10).
pub const INVALID_TOPIC_ID: u8 = 0x02;

/// ProtocolId of MQTT-SN 1.2 in CONNECT (§5.3.8).
const PROTOCOL_ID: u8 = 0x01;

/// First octet of the three-octet Length form (§5.2.1).
const LONG_LENGTH: u8 = 0x01;

// MsgType values of Table 3 (§5.2.2).
const SEARCHGW: u8 = 0x01;
const GWINFO: u8 = 0x02;
const CONNECT: u8 = 0x04;
const CONNACK: u8 = 0x05;
const REGISTER: u8 = 0x0A;
const REGACK: u8 = 0x0B;
const PUBLISH: u8 = 0x0C;
const PUBACK: u8 = 0x0D;
const SUBSCRIBE: u8 = 0x12;
const SUBACK: u8 = 0x13;
const PINGREQ: u8 = 0x16;
const PINGRESP: u8 = 0x17;
const DISCONNECT: u8 = 0x18;

// Flags bits (§5.3.4). TopicIdType (bits 1-0) is always 0b00 here: a registered topic id in
// PUBLISH, a topic name in SUBSCRIBE.
const DUP: u8 = 0b1000_0000;
const QOS_SHIFT: u8 = 5;
const CLEAN_SESSION: u8 = 0b0000_0100;
const TOPIC_ID_TYPE: u8 = 0b0000_0011;

/// One MQTT-SN message. QoS is the number 0 or 1 (the client speaks no other level).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    /// SEARCHGW with radius 0: asks whether a gateway answers, before the first CONNECT.
    SearchGw,
    /// GWINFO: a gateway's answer to SEARCHGW.
    GwInfo,
    /// CONNECT with clean session set and no will.
    Connect {
        /// Keep-alive in seconds.
        duration: u16,
        /// Client id.
        client_id: String,
    },
    /// CONNACK.
    ConnAck {
        /// ReturnCode.
        code: u8,
    },
    /// REGISTER: topic id 0 from the client; the gateway's own id when it registers a topic
    /// for a wildcard subscription.
    Register {
        /// TopicId.
        topic_id: u16,
        /// MsgId.
        msg_id: u16,
        /// TopicName.
        topic: String,
    },
    /// REGACK.
    RegAck {
        /// TopicId.
        topic_id: u16,
        /// MsgId of the REGISTER.
        msg_id: u16,
        /// ReturnCode.
        code: u8,
    },
    /// PUBLISH on a registered topic id.
    Publish {
        /// Retransmission.
        dup: bool,
        /// QoS 0 or 1.
        qos: u8,
        /// Registered topic id.
        topic_id: u16,
        /// 0 for QoS 0.
        msg_id: u16,
        /// The payload.
        data: Bytes,
    },
    /// PUBACK.
    PubAck {
        /// TopicId of the PUBLISH.
        topic_id: u16,
        /// MsgId of the PUBLISH.
        msg_id: u16,
        /// ReturnCode.
        code: u8,
    },
    /// SUBSCRIBE by topic name (wildcards allowed).
    Subscribe {
        /// Retransmission.
        dup: bool,
        /// Highest QoS wanted.
        qos: u8,
        /// MsgId.
        msg_id: u16,
        /// Topic filter.
        filter: String,
    },
    /// SUBACK.
    SubAck {
        /// Granted QoS.
        qos: u8,
        /// The filter's registered id, or 0 for a wildcard filter.
        topic_id: u16,
        /// MsgId of the SUBSCRIBE.
        msg_id: u16,
        /// ReturnCode.
        code: u8,
    },
    /// PINGREQ (without ClientId: the client does not sleep).
    PingReq,
    /// PINGRESP.
    PingResp,
    /// DISCONNECT (without Duration: the client does not sleep).
    Disconnect,
    /// A message type the client has no use for.
    Other(u8),
}

/// Words for a ReturnCode in error messages.
pub fn code_text(code: u8) -> String {
    match code {
        ACCEPTED => "accepted".into(),
        0x01 => "rejected: congestion".into(),
        INVALID_TOPIC_ID => "rejected: invalid topic id".into(),
        0x03 => "rejected: not supported".into(),
        other => format!("reserved return code {other:#04x}"),
    }
}

fn flags(dup: bool, qos: u8) -> u8 {
    (if dup { DUP } else { 0 }) | (qos << QOS_SHIFT)
}

impl Packet {
    /// Marks a request as a retransmission (§6.13: PUBLISH and SUBSCRIBE carry DUP when sent
    /// again); other messages are resent as they were.
    pub fn set_dup(&mut self) {
        if let Packet::Publish { dup, .. } | Packet::Subscribe { dup, .. } = self {
            *dup = true;
        }
    }

    /// The datagram, in the one-octet Length form whenever the message fits 255 octets.
    pub fn encode(&self) -> Result<Bytes> {
        let mut body = BytesMut::with_capacity(16);
        let msg_type = match self {
            Packet::SearchGw => {
                body.put_u8(0); // Radius: the gateway is on this host or network
                SEARCHGW
            }
            Packet::GwInfo => {
                body.put_u8(0);
                GWINFO
            }
            Packet::Connect { duration, client_id } => {
                body.put_u8(CLEAN_SESSION);
                body.put_u8(PROTOCOL_ID);
                body.put_u16(*duration);
                body.put_slice(client_id.as_bytes());
                CONNECT
            }
            Packet::ConnAck { code } => {
                body.put_u8(*code);
                CONNACK
            }
            Packet::Register { topic_id, msg_id, topic } => {
                body.put_u16(*topic_id);
                body.put_u16(*msg_id);
                body.put_slice(topic.as_bytes());
                REGISTER
            }
            Packet::RegAck { topic_id, msg_id, code } => {
                body.put_u16(*topic_id);
                body.put_u16(*msg_id);
                body.put_u8(*code);
                REGACK
            }
            Packet::Publish { dup, qos, topic_id, msg_id, data } => {
                body.reserve(data.len() + 5);
                body.put_u8(flags(*dup, *qos));
                body.put_u16(*topic_id);
                body.put_u16(*msg_id);
                body.put_slice(data);
                PUBLISH
            }
            Packet::PubAck { topic_id, msg_id, code } => {
                body.put_u16(*topic_id);
                body.put_u16(*msg_id);
                body.put_u8(*code);
                PUBACK
            }
            Packet::Subscribe { dup, qos, msg_id, filter } => {
                body.put_u8(flags(*dup, *qos));
                body.put_u16(*msg_id);
                body.put_slice(filter.as_bytes());
                SUBSCRIBE
            }
            Packet::SubAck { qos, topic_id, msg_id, code } => {
                body.put_u8(flags(false, *qos));
                body.put_u16(*topic_id);
                body.put_u16(*msg_id);
                body.put_u8(*code);
                SUBACK
            }
            Packet::PingReq => PINGREQ,
            Packet::PingResp => PINGRESP,
            Packet::Disconnect => DISCONNECT,
            Packet::Other(msg_type) => *msg_type,
        };
        // Length counts the whole message, itself included (§5.2.1).
        let short = body.len() + 2;
        let mut out = BytesMut::with_capacity(short + 2);
        if short <= usize::from(u8::MAX) {
            out.put_u8(short as u8);
        } else if short + 2 <= MAX_DATAGRAM {
            out.put_u8(LONG_LENGTH);
            out.put_u16((short + 2) as u16);
        } else {
            bail!("an MQTT-SN message of {} bytes does not fit one UDP datagram ({MAX_DATAGRAM} bytes)", short + 2);
        }
        out.put_u8(msg_type);
        out.put_slice(&body);
        Ok(out.freeze())
    }

    /// Reads one whole datagram: over UDP a datagram holds exactly one message, so its Length
    /// must equal the datagram's size.
    pub fn decode(datagram: &[u8]) -> Result<Packet> {
        let (length, header) = match datagram {
            [LONG_LENGTH, hi, lo, ..] => (usize::from(u16::from_be_bytes([*hi, *lo])), 3),
            [length, ..] => (usize::from(*length), 1),
            [] => bail!("empty MQTT-SN datagram"),
        };
        if length != datagram.len() {
            bail!("MQTT-SN Length {length} but a datagram of {} bytes", datagram.len());
        }
        let msg_type = *datagram.get(header).context("MQTT-SN datagram without MsgType")?;
        let mut f = Fields { rest: &datagram[header + 1..], msg_type };
        let packet = match msg_type {
            SEARCHGW => {
                f.u8()?;
                Packet::SearchGw
            }
            GWINFO => {
                f.u8()?;
                f.take_rest(); // GwAdd, present only when a client answers for a gateway
                Packet::GwInfo
            }
            CONNECT => {
                f.u8()?; // Flags
                f.u8()?; // ProtocolId
                Packet::Connect { duration: f.u16()?, client_id: f.string_rest()? }
            }
            CONNACK => Packet::ConnAck { code: f.u8()? },
            REGISTER => Packet::Register { topic_id: f.u16()?, msg_id: f.u16()?, topic: f.string_rest()? },
            REGACK => Packet::RegAck { topic_id: f.u16()?, msg_id: f.u16()?, code: f.u8()? },
            PUBLISH => {
                let flags = f.u8()?;
                if flags & TOPIC_ID_TYPE != 0 {
                    bail!(
                        "PUBLISH with TopicIdType {}: this client only uses registered topic ids",
                        flags & TOPIC_ID_TYPE
                    );
                }
                Packet::Publish {
                    dup: flags & DUP != 0,
                    qos: (flags >> QOS_SHIFT) & 0b11,
                    topic_id: f.u16()?,
                    msg_id: f.u16()?,
                    data: Bytes::copy_from_slice(f.take_rest()),
                }
            }
            PUBACK => Packet::PubAck { topic_id: f.u16()?, msg_id: f.u16()?, code: f.u8()? },
            SUBSCRIBE => {
                let flags = f.u8()?;
                Packet::Subscribe {
                    dup: flags & DUP != 0,
                    qos: (flags >> QOS_SHIFT) & 0b11,
                    msg_id: f.u16()?,
                    filter: f.string_rest()?,
                }
            }
            SUBACK => Packet::SubAck {
                qos: (f.u8()? >> QOS_SHIFT) & 0b11,
                topic_id: f.u16()?,
                msg_id: f.u16()?,
                code: f.u8()?,
            },
            PINGREQ => {
                f.take_rest(); // ClientId, sent only by a sleeping client
                Packet::PingReq
            }
            PINGRESP => Packet::PingResp,
            DISCONNECT => {
                f.take_rest(); // Duration, sent only by a client going to sleep
                Packet::Disconnect
            }
            other => {
                f.take_rest();
                Packet::Other(other)
            }
        };
        if !f.rest.is_empty() {
            bail!("{} octets left over in an MQTT-SN message of type {msg_type:#04x}", f.rest.len());
        }
        Ok(packet)
    }
}

/// The fields after MsgType, read front to back with bounds checks.
struct Fields<'a> {
    rest: &'a [u8],
    msg_type: u8,
}

impl<'a> Fields<'a> {
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N]> {
        let Some((head, tail)) = self.rest.split_first_chunk::<N>() else {
            bail!("MQTT-SN message of type {:#04x} is too short", self.msg_type);
        };
        self.rest = tail;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.bytes::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.bytes()?))
    }

    fn take_rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }

    fn string_rest(&mut self) -> Result<String> {
        let msg_type = self.msg_type;
        let text = std::str::from_utf8(self.take_rest())
            .with_context(|| format!("MQTT-SN message of type {msg_type:#04x} carries a name that is not UTF-8"))?;
        Ok(text.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden datagrams laid out by hand from the tables of MQTT-SN 1.2 §5.4.
    fn golden() -> Vec<(Packet, Vec<u8>)> {
        vec![
            // §5.4.2 Table 7: Length, MsgType, Radius.
            (Packet::SearchGw, vec![0x03, 0x01, 0x00]),
            // §5.4.3 Table 8: Length, MsgType, GwId.
            (Packet::GwInfo, vec![0x03, 0x02, 0x00]),
            // §5.4.4 Table 9: Flags 0x04 (CleanSession), ProtocolId 0x01, Duration 60, ClientId "ab".
            (
                Packet::Connect { duration: 60, client_id: "ab".into() },
                vec![0x08, 0x04, 0x04, 0x01, 0x00, 0x3C, b'a', b'b'],
            ),
            // §5.4.5 Table 10.
            (Packet::ConnAck { code: 0 }, vec![0x03, 0x05, 0x00]),
            // §5.4.10 Table 14: TopicId 0 (from a client), MsgId 1, TopicName "a/b".
            (
                Packet::Register { topic_id: 0, msg_id: 1, topic: "a/b".into() },
                vec![0x09, 0x0A, 0x00, 0x00, 0x00, 0x01, b'a', b'/', b'b'],
            ),
            // §5.4.11 Table 15.
            (Packet::RegAck { topic_id: 5, msg_id: 1, code: 0 }, vec![0x07, 0x0B, 0x00, 0x05, 0x00, 0x01, 0x00]),
            // §5.4.12 Table 16: Flags 0x20 (QoS 1, TopicIdType normal), TopicId 5, MsgId 2, Data "hi".
            (
                Packet::Publish { dup: false, qos: 1, topic_id: 5, msg_id: 2, data: Bytes::from_static(b"hi") },
                vec![0x09, 0x0C, 0x20, 0x00, 0x05, 0x00, 0x02, b'h', b'i'],
            ),
            // Retransmitted QoS 0 would be odd, but DUP is bit 7 whatever the QoS.
            (
                Packet::Publish { dup: true, qos: 0, topic_id: 0x0102, msg_id: 0, data: Bytes::new() },
                vec![0x07, 0x0C, 0x80, 0x01, 0x02, 0x00, 0x00],
            ),
            // §5.4.13 Table 17.
            (Packet::PubAck { topic_id: 5, msg_id: 2, code: 2 }, vec![0x07, 0x0D, 0x00, 0x05, 0x00, 0x02, 0x02]),
            // §5.4.15 Table 19: Flags 0x20 (QoS 1, topic name), MsgId 3, TopicName "a/#".
            (
                Packet::Subscribe { dup: false, qos: 1, msg_id: 3, filter: "a/#".into() },
                vec![0x08, 0x12, 0x20, 0x00, 0x03, b'a', b'/', b'#'],
            ),
            // §5.4.16 Table 20: Flags (granted QoS 1), TopicId 0 for a wildcard filter, MsgId 3.
            (
                Packet::SubAck { qos: 1, topic_id: 0, msg_id: 3, code: 0 },
                vec![0x08, 0x13, 0x20, 0x00, 0x00, 0x00, 0x03, 0x00],
            ),
            // §5.4.19-21: header only.
            (Packet::PingReq, vec![0x02, 0x16]),
            (Packet::PingResp, vec![0x02, 0x17]),
            (Packet::Disconnect, vec![0x02, 0x18]),
        ]
    }

    #[test]
    fn every_message_matches_its_golden_datagram_both_ways() {
        for (packet, bytes) in golden() {
            assert_eq!(&packet.encode().unwrap()[..], &bytes[..], "{packet:?}");
            assert_eq!(Packet::decode(&bytes).unwrap(), packet, "{bytes:02x?}");
        }
    }

    #[test]
    fn long_messages_use_the_three_octet_length() {
        // §5.2.1: 0x01 then the 16-bit length of the whole message (3 + 1 + 5 + 300 = 309).
        let data = Bytes::from(vec![7u8; 300]);
        let packet = Packet::Publish { dup: false, qos: 0, topic_id: 9, msg_id: 0, data };
        let bytes = packet.encode().unwrap();
        assert_eq!(&bytes[..4], &[0x01, 0x01, 0x35, 0x0C]);
        assert_eq!(bytes.len(), 309);
        assert_eq!(Packet::decode(&bytes).unwrap(), packet);
        // A message of 255 octets keeps the one-octet form; one more octet takes the long form
        // and grows to 3 + 255 = 258 octets.
        let fits = Packet::Register { topic_id: 0, msg_id: 1, topic: "t".repeat(249) };
        assert_eq!(fits.encode().unwrap()[0], 255);
        let spills = Packet::Register { topic_id: 0, msg_id: 1, topic: "t".repeat(250) };
        assert_eq!(&spills.encode().unwrap()[..4], &[0x01, 0x01, 0x02, 0x0A]);
    }

    #[test]
    fn the_largest_payload_fills_a_datagram_and_one_more_byte_is_refused() {
        let publish = |n| Packet::Publish { dup: false, qos: 0, topic_id: 1, msg_id: 0, data: Bytes::from(vec![0; n]) };
        assert_eq!(publish(MAX_PAYLOAD).encode().unwrap().len(), MAX_DATAGRAM);
        assert!(publish(MAX_PAYLOAD + 1).encode().is_err());
    }

    #[test]
    fn retransmissions_set_dup_on_publish_and_subscribe_only() {
        let mut subscribe = Packet::Subscribe { dup: false, qos: 0, msg_id: 1, filter: "a".into() };
        subscribe.set_dup();
        assert_eq!(subscribe.encode().unwrap()[2], 0x80);
        let mut connect = Packet::Connect { duration: 1, client_id: "c".into() };
        connect.set_dup();
        assert_eq!(connect, Packet::Connect { duration: 1, client_id: "c".into() });
    }

    #[test]
    fn optional_trailing_fields_and_unknown_types_are_tolerated() {
        // A DISCONNECT with Duration, a PINGREQ with ClientId, ADVERTISE (0x00).
        assert_eq!(Packet::decode(&[0x04, 0x18, 0x00, 0x3C]).unwrap(), Packet::Disconnect);
        assert_eq!(Packet::decode(&[0x03, 0x16, b'c']).unwrap(), Packet::PingReq);
        assert_eq!(Packet::decode(&[0x05, 0x00, 0x01, 0x00, 0x0F]).unwrap(), Packet::Other(0x00));
    }

    #[test]
    fn malformed_datagrams_are_errors_not_panics() {
        for bad in [
            &[][..],
            &[0x03, 0x05][..],                                     // Length says 3, datagram has 2
            &[0x02, 0x05][..],                                     // CONNACK without ReturnCode
            &[0x04, 0x05, 0x00, 0x00][..],                         // CONNACK with a trailing octet
            &[0x01, 0x00][..],                                     // three-octet form cut short
            &[0x07, 0x0C, 0x01, 0x00, 0x01, 0x00, 0x00][..],       // PUBLISH with a pre-defined id
            &[0x04, 0x0A, 0x00, 0x01][..],                         // REGISTER without MsgId
            &[0x08, 0x0A, 0x00, 0x00, 0x00, 0x01, 0xFF, 0xFE][..], // REGISTER, name not UTF-8
        ] {
            assert!(Packet::decode(bad).is_err(), "{bad:02x?}");
        }
    }
}
