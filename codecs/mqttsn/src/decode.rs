//! Datagram → [`Message`]: the field layouts of §5.4 and §5.5, read with bounds checks on every octet.
//!
//! Over UDP one datagram carries exactly one message (the spec does no fragmentation or batching), so the
//! decoder insists that the Length field, the datagram size and the message's own fields all agree. It never indexes without a check and never panics; every failure is a
//! [`DecodeError`] naming the field and the offset.

use std::ops::Range;

use bytes::Bytes;

use crate::error::DecodeError;
use crate::flags::{Flags, TopicIdType};
use crate::header::{MsgType, read_header};
use crate::message::{
    Advertise, Connect, Encapsulated, GwInfo, Message, PubAck, Publish, PublishTopic, RegAck, Register, ReturnCode,
    SubAck, Subscribe, SubscribeTopic, Unsubscribe, WillTopic,
};

/// Decodes one whole UDP datagram. Payloads (PUBLISH data, will messages, GwAdd, Wireless Node Id) are copied
/// out of `datagram`; use [`decode_bytes`] to share the buffer instead.
pub fn decode(datagram: &[u8]) -> Result<Message, DecodeError> {
    decode_message(Source::new(datagram, None), 0, true)
}

/// Decodes one whole UDP datagram held in `Bytes`; payloads are slices of it, so a PUBLISH payload reaches
/// subscribers without a copy.
pub fn decode_bytes(datagram: Bytes) -> Result<Message, DecodeError> {
    decode_message(Source::new(&datagram, Some(&datagram)), 0, true)
}

/// The datagram plus, when the caller gave `Bytes`, a handle to slice payloads from instead of copying.
#[derive(Clone, Copy)]
struct Source<'a> {
    octets: &'a [u8],
    shared: Option<&'a Bytes>,
}

impl<'a> Source<'a> {
    fn new(octets: &'a [u8], shared: Option<&'a Bytes>) -> Self {
        Source { octets, shared }
    }

    /// A payload field as `Bytes`. `range` comes from a [`Reader`], which has checked it.
    fn payload(&self, range: Range<usize>) -> Bytes {
        match self.shared {
            Some(shared) if range.end <= shared.len() && range.start <= range.end => shared.slice(range),
            _ => self.octets.get(range).map(Bytes::copy_from_slice).unwrap_or_default(),
        }
    }
}

/// Decodes the message starting at `start` and running to the end of the datagram.
fn decode_message(src: Source<'_>, start: usize, allow_encapsulated: bool) -> Result<Message, DecodeError> {
    let header = read_header(src.octets, start)?;
    let type_offset = start + header.length_field_len;
    let msg_type = MsgType::from_u8(header.msg_type)
        .ok_or(DecodeError::UnknownMessageType { msg_type: header.msg_type, offset: type_offset })?;
    let end = start + header.declared;
    let mut r = Reader { src, pos: type_offset + 1, end, message: msg_type.name() };

    if msg_type == MsgType::Encapsulated {
        if !allow_encapsulated {
            return Err(DecodeError::NestedEncapsulation { offset: start });
        }
        // §5.5: Length covers Length, MsgType, Ctrl and Wireless Node Id; the relayed message fills the rest
        // of the datagram and carries its own Length.
        let ctrl = r.u8("Ctrl")?;
        let wireless_node_id = r.payload_rest();
        let message = decode_message(src, end, false)?;
        return Ok(Message::Encapsulated(Encapsulated { ctrl, wireless_node_id, message: Box::new(message) }));
    }

    let received = src.octets.len().saturating_sub(start);
    if header.declared < received {
        return Err(DecodeError::TrailingBytes { offset: start, declared: header.declared, received });
    }
    let message = decode_body(msg_type, &mut r)?;
    r.finish()?;
    Ok(message)
}

/// Reads the fields that follow MsgType, per the message's table in §5.4.
fn decode_body(msg_type: MsgType, r: &mut Reader<'_>) -> Result<Message, DecodeError> {
    Ok(match msg_type {
        // §5.4.1, Table 6: GwId (2), Duration (3-4).
        MsgType::Advertise => Message::Advertise(Advertise { gw_id: r.u8("GwId")?, duration: r.u16("Duration")? }),
        // §5.4.2, Table 7: Radius (2).
        MsgType::SearchGw => Message::SearchGw { radius: r.u8("Radius")? },
        // §5.4.3, Table 8: GwId (2), GwAdd (3:n) only when sent by a client.
        MsgType::GwInfo => {
            let gw_id = r.u8("GwId")?;
            let gw_add = r.payload_rest();
            Message::GwInfo(GwInfo { gw_id, gw_add: (!gw_add.is_empty()).then_some(gw_add) })
        }
        // §5.4.4, Table 9: Flags (2), ProtocolId (3), Duration (4-5), ClientId (6:n).
        MsgType::Connect => {
            let flags = r.flags_ignoring_topic_id_type()?;
            Message::Connect(Connect {
                will: flags.will,
                clean_session: flags.clean_session,
                protocol_id: r.u8("ProtocolId")?,
                duration: r.u16("Duration")?,
                client_id: r.string_rest("ClientId")?,
            })
        }
        // §5.4.5, Table 10: ReturnCode (2).
        MsgType::ConnAck => Message::ConnAck { return_code: r.return_code()? },
        // §5.4.6, Table 11: header only.
        MsgType::WillTopicReq => Message::WillTopicReq,
        // §5.4.7, Table 12: Flags (2), WillTopic (3:n); exactly 2 octets is the empty WILLTOPIC.
        MsgType::WillTopic => Message::WillTopic(r.will_topic()?),
        // §5.4.8, Table 11: header only.
        MsgType::WillMsgReq => Message::WillMsgReq,
        // §5.4.9, Table 13: WillMsg (2:n).
        MsgType::WillMsg => Message::WillMsg { will_msg: r.payload_rest() },
        // §5.4.10, Table 14: TopicId (2-3), MsgId (4-5), TopicName (6:n).
        MsgType::Register => Message::Register(Register {
            topic_id: r.u16("TopicId")?,
            msg_id: r.u16("MsgId")?,
            topic_name: r.string_rest("TopicName")?,
        }),
        // §5.4.11, Table 15: TopicId (2-3), MsgId (4-5), ReturnCode (6).
        MsgType::RegAck => Message::RegAck(RegAck {
            topic_id: r.u16("TopicId")?,
            msg_id: r.u16("MsgId")?,
            return_code: r.return_code()?,
        }),
        // §5.4.12, Table 16: Flags (2), TopicId (3-4), MsgId (5-6), Data (7:n).
        MsgType::Publish => {
            let flags = r.flags()?;
            let topic = match flags.topic_id_type {
                TopicIdType::Normal => PublishTopic::Normal(r.u16("TopicId")?),
                TopicIdType::Predefined => PublishTopic::Predefined(r.u16("TopicId")?),
                TopicIdType::Short => PublishTopic::Short(r.array("TopicId")?),
            };
            Message::Publish(Publish {
                dup: flags.dup,
                qos: flags.qos,
                retain: flags.retain,
                topic,
                msg_id: r.u16("MsgId")?,
                data: r.payload_rest(),
            })
        }
        // §5.4.13, Table 17: TopicId (2-3), MsgId (4-5), ReturnCode (6).
        MsgType::PubAck => Message::PubAck(PubAck {
            topic_id: r.u16("TopicId")?,
            msg_id: r.u16("MsgId")?,
            return_code: r.return_code()?,
        }),
        // §5.4.14, Table 18: MsgId (2-3).
        MsgType::PubComp => Message::PubComp { msg_id: r.u16("MsgId")? },
        MsgType::PubRec => Message::PubRec { msg_id: r.u16("MsgId")? },
        MsgType::PubRel => Message::PubRel { msg_id: r.u16("MsgId")? },
        // §5.4.15, Table 19: Flags (2), MsgId (3-4), TopicName (5:n) or TopicId (5-6).
        MsgType::Subscribe => {
            let flags = r.flags()?;
            let msg_id = r.u16("MsgId")?;
            Message::Subscribe(Subscribe {
                dup: flags.dup,
                qos: flags.qos,
                msg_id,
                topic: r.subscribe_topic(flags.topic_id_type)?,
            })
        }
        // §5.4.16, Table 20: Flags (2), TopicId (3-4), MsgId (5-6), ReturnCode (7).
        MsgType::SubAck => {
            let flags = r.flags_ignoring_topic_id_type()?;
            Message::SubAck(SubAck {
                qos: flags.qos,
                topic_id: r.u16("TopicId")?,
                msg_id: r.u16("MsgId")?,
                return_code: r.return_code()?,
            })
        }
        // §5.4.17, Table 19 again: same layout as SUBSCRIBE.
        MsgType::Unsubscribe => {
            let flags = r.flags()?;
            let msg_id = r.u16("MsgId")?;
            Message::Unsubscribe(Unsubscribe { msg_id, topic: r.subscribe_topic(flags.topic_id_type)? })
        }
        // §5.4.18, Table 21: MsgId (2-3).
        MsgType::UnsubAck => Message::UnsubAck { msg_id: r.u16("MsgId")? },
        // §5.4.19, Table 22: ClientId (2:n), optional.
        MsgType::PingReq => {
            let client_id = r.string_rest("ClientId")?;
            Message::PingReq { client_id: (!client_id.is_empty()).then_some(client_id) }
        }
        // §5.4.20, Table 23: header only.
        MsgType::PingResp => Message::PingResp,
        // §5.4.21, Table 24: Duration (2-3), optional.
        MsgType::Disconnect => {
            Message::Disconnect { duration: if r.is_empty() { None } else { Some(r.u16("Duration")?) } }
        }
        // §5.4.22, Table 25: same as WILLTOPIC; the empty form deletes the will.
        MsgType::WillTopicUpd => Message::WillTopicUpd(r.will_topic()?),
        // §5.4.24, Table 27: ReturnCode (2).
        MsgType::WillTopicResp => Message::WillTopicResp { return_code: r.return_code()? },
        // §5.4.23, Table 26: WillMsg (2:n).
        MsgType::WillMsgUpd => Message::WillMsgUpd { will_msg: r.payload_rest() },
        // §5.4.25, Table 27: ReturnCode (2).
        MsgType::WillMsgResp => Message::WillMsgResp { return_code: r.return_code()? },
        // Handled by the caller before the body; reaching here means a nesting the caller already refused.
        MsgType::Encapsulated => {
            return Err(DecodeError::NestedEncapsulation { offset: r.pos });
        }
    })
}

/// A cursor over one message's fields, bounded by its Length.
struct Reader<'a> {
    src: Source<'a>,
    pos: usize,
    end: usize,
    message: &'static str,
}

impl Reader<'_> {
    fn is_empty(&self) -> bool {
        self.pos >= self.end
    }

    /// The next `N` octets, or `Truncated` if the message ends first.
    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let chunk = self.src.octets.get(self.pos..self.end).and_then(|rest| rest.first_chunk::<N>());
        match chunk {
            Some(chunk) => {
                self.pos += N;
                Ok(*chunk)
            }
            None => Err(DecodeError::Truncated {
                message: self.message,
                field,
                offset: self.pos,
                needed: N,
                available: self.end.saturating_sub(self.pos),
            }),
        }
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        let [b] = self.array(field)?;
        Ok(b)
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    fn return_code(&mut self) -> Result<ReturnCode, DecodeError> {
        Ok(ReturnCode::from_u8(self.u8("ReturnCode")?))
    }

    /// Flags for a message that uses TopicIdType: the reserved value is an error.
    fn flags(&mut self) -> Result<Flags, DecodeError> {
        let offset = self.pos;
        let byte = self.u8("Flags")?;
        Flags::from_byte(byte).ok_or(DecodeError::ReservedTopicIdType { message: self.message, offset })
    }

    /// Flags for a message where TopicIdType is "not used": its bits are ignored.
    fn flags_ignoring_topic_id_type(&mut self) -> Result<Flags, DecodeError> {
        Ok(Flags::from_byte_ignoring_topic_id_type(self.u8("Flags")?))
    }

    /// Everything up to the end of the message, as a range of the datagram.
    fn rest(&mut self) -> Range<usize> {
        let range = self.pos..self.end.max(self.pos);
        self.pos = range.end;
        range
    }

    fn payload_rest(&mut self) -> Bytes {
        let range = self.rest();
        self.src.payload(range)
    }

    fn string_rest(&mut self, field: &'static str) -> Result<String, DecodeError> {
        let range = self.rest();
        let offset = range.start;
        let octets = self.src.octets.get(range).unwrap_or_default();
        match std::str::from_utf8(octets) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(DecodeError::InvalidUtf8 {
                message: self.message,
                field,
                offset,
                bad_octet: offset + e.valid_up_to(),
            }),
        }
    }

    /// WILLTOPIC / WILLTOPICUPD: nothing after MsgType means "no will" (§5.4.7, §5.4.22).
    fn will_topic(&mut self) -> Result<Option<WillTopic>, DecodeError> {
        if self.is_empty() {
            return Ok(None);
        }
        let flags = self.flags_ignoring_topic_id_type()?;
        Ok(Some(WillTopic { qos: flags.qos, retain: flags.retain, topic: self.string_rest("WillTopic")? }))
    }

    /// The last field of SUBSCRIBE / UNSUBSCRIBE, shaped by TopicIdType.
    fn subscribe_topic(&mut self, kind: TopicIdType) -> Result<SubscribeTopic, DecodeError> {
        Ok(match kind {
            TopicIdType::Normal => SubscribeTopic::Name(self.string_rest("TopicName")?),
            TopicIdType::Predefined => SubscribeTopic::Predefined(self.u16("TopicId")?),
            TopicIdType::Short => SubscribeTopic::Short(self.array("TopicId")?),
        })
    }

    /// Fails if octets remain after the last field of the message.
    fn finish(&self) -> Result<(), DecodeError> {
        if self.pos < self.end {
            return Err(DecodeError::UnexpectedBytes {
                message: self.message,
                offset: self.pos,
                extra: self.end - self.pos,
            });
        }
        Ok(())
    }
}
