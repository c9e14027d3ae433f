//! [`Message`] → octets: the field layouts of §5.4 and §5.5, with the shortest Length form that fits.
//!
//! Sizes are computed before anything is written, so an encode that fails leaves the output untouched.

use bytes::{BufMut, BytesMut};

use crate::error::EncodeError;
use crate::flags::Flags;
use crate::header::{MAX_MESSAGE_LEN, put_length, total_len};
use crate::message::{Message, PublishTopic, SubscribeTopic, WillTopic};

/// Octets [`encode`] will append for `message`, including an encapsulated inner message. A result above
/// 65 535 for a plain message means [`encode`] will refuse it.
pub fn encoded_len(message: &Message) -> usize {
    let own = total_len(1 + body_len(message));
    match message {
        Message::Encapsulated(e) => own + encoded_len(&e.message),
        _ => own,
    }
}

/// Appends `message` to `out` as one MQTT-SN message (one datagram's worth). The Length field takes its
/// one-octet form when the whole message fits in 255 octets, its three-octet form otherwise (§5.2.1).
pub fn encode(message: &Message, out: &mut BytesMut) -> Result<(), EncodeError> {
    check(message, true)?;
    out.reserve(encoded_len(message));
    put_message(message, out);
    Ok(())
}

/// Refuses what cannot be expressed: a Length over 65 535, or an encapsulation inside an encapsulation.
fn check(message: &Message, allow_encapsulated: bool) -> Result<(), EncodeError> {
    let length = total_len(1 + body_len(message));
    if length > MAX_MESSAGE_LEN {
        return Err(EncodeError::TooLarge { message: message.msg_type().name(), length });
    }
    if let Message::Encapsulated(e) = message {
        if !allow_encapsulated || matches!(*e.message, Message::Encapsulated(_)) {
            return Err(EncodeError::NestedEncapsulation);
        }
        check(&e.message, false)?;
    }
    Ok(())
}

fn put_message(message: &Message, out: &mut BytesMut) {
    put_length(out, total_len(1 + body_len(message)));
    out.put_u8(message.msg_type().to_u8());
    put_body(message, out);
    if let Message::Encapsulated(e) = message {
        put_message(&e.message, out);
    }
}

/// Octets after MsgType (for an encapsulation: Ctrl and Wireless Node Id only, the inner message follows).
fn body_len(message: &Message) -> usize {
    match message {
        Message::Advertise(_) => 3,
        Message::SearchGw { .. } => 1,
        Message::GwInfo(g) => 1 + g.gw_add.as_ref().map_or(0, |a| a.len()),
        Message::Connect(c) => 4 + c.client_id.len(),
        Message::ConnAck { .. } | Message::WillTopicResp { .. } | Message::WillMsgResp { .. } => 1,
        Message::WillTopicReq | Message::WillMsgReq | Message::PingResp => 0,
        Message::WillTopic(w) | Message::WillTopicUpd(w) => w.as_ref().map_or(0, |w| 1 + w.topic.len()),
        Message::WillMsg { will_msg } | Message::WillMsgUpd { will_msg } => will_msg.len(),
        Message::Register(r) => 4 + r.topic_name.len(),
        Message::RegAck(_) | Message::PubAck(_) => 5,
        Message::Publish(p) => 5 + p.data.len(),
        Message::PubComp { .. } | Message::PubRec { .. } | Message::PubRel { .. } | Message::UnsubAck { .. } => 2,
        Message::Subscribe(s) => 3 + subscribe_topic_len(&s.topic),
        Message::Unsubscribe(u) => 3 + subscribe_topic_len(&u.topic),
        Message::SubAck(_) => 6,
        Message::PingReq { client_id } => client_id.as_ref().map_or(0, String::len),
        Message::Disconnect { duration } => duration.map_or(0, |_| 2),
        Message::Encapsulated(e) => 1 + e.wireless_node_id.len(),
    }
}

fn subscribe_topic_len(topic: &SubscribeTopic) -> usize {
    match topic {
        SubscribeTopic::Name(name) => name.len(),
        SubscribeTopic::Predefined(_) | SubscribeTopic::Short(_) => 2,
    }
}

/// Writes the fields after MsgType, in the order of the message's table in §5.4.
fn put_body(message: &Message, out: &mut BytesMut) {
    match message {
        Message::Advertise(a) => {
            out.put_u8(a.gw_id);
            out.put_u16(a.duration);
        }
        Message::SearchGw { radius } => out.put_u8(*radius),
        Message::GwInfo(g) => {
            out.put_u8(g.gw_id);
            if let Some(addr) = &g.gw_add {
                out.put_slice(addr);
            }
        }
        Message::Connect(c) => {
            let flags = Flags { will: c.will, clean_session: c.clean_session, ..Flags::default() };
            out.put_u8(flags.to_byte());
            out.put_u8(c.protocol_id);
            out.put_u16(c.duration);
            out.put_slice(c.client_id.as_bytes());
        }
        Message::ConnAck { return_code }
        | Message::WillTopicResp { return_code }
        | Message::WillMsgResp { return_code } => out.put_u8(return_code.to_u8()),
        Message::WillTopicReq | Message::WillMsgReq | Message::PingResp => {}
        Message::WillTopic(w) | Message::WillTopicUpd(w) => {
            if let Some(w) = w {
                put_will_topic(w, out);
            }
        }
        Message::WillMsg { will_msg } | Message::WillMsgUpd { will_msg } => {
            out.put_slice(will_msg);
        }
        Message::Register(r) => {
            out.put_u16(r.topic_id);
            out.put_u16(r.msg_id);
            out.put_slice(r.topic_name.as_bytes());
        }
        Message::RegAck(r) => {
            out.put_u16(r.topic_id);
            out.put_u16(r.msg_id);
            out.put_u8(r.return_code.to_u8());
        }
        Message::Publish(p) => {
            let flags = Flags {
                dup: p.dup,
                qos: p.qos,
                retain: p.retain,
                topic_id_type: p.topic.topic_id_type(),
                ..Flags::default()
            };
            out.put_u8(flags.to_byte());
            match p.topic {
                PublishTopic::Normal(id) | PublishTopic::Predefined(id) => out.put_u16(id),
                PublishTopic::Short(name) => out.put_slice(&name),
            }
            out.put_u16(p.msg_id);
            out.put_slice(&p.data);
        }
        Message::PubAck(p) => {
            out.put_u16(p.topic_id);
            out.put_u16(p.msg_id);
            out.put_u8(p.return_code.to_u8());
        }
        Message::PubComp { msg_id }
        | Message::PubRec { msg_id }
        | Message::PubRel { msg_id }
        | Message::UnsubAck { msg_id } => out.put_u16(*msg_id),
        Message::Subscribe(s) => {
            let flags = Flags { dup: s.dup, qos: s.qos, topic_id_type: s.topic.topic_id_type(), ..Flags::default() };
            out.put_u8(flags.to_byte());
            out.put_u16(s.msg_id);
            put_subscribe_topic(&s.topic, out);
        }
        Message::Unsubscribe(u) => {
            let flags = Flags { topic_id_type: u.topic.topic_id_type(), ..Flags::default() };
            out.put_u8(flags.to_byte());
            out.put_u16(u.msg_id);
            put_subscribe_topic(&u.topic, out);
        }
        Message::SubAck(s) => {
            let flags = Flags { qos: s.qos, ..Flags::default() };
            out.put_u8(flags.to_byte());
            out.put_u16(s.topic_id);
            out.put_u16(s.msg_id);
            out.put_u8(s.return_code.to_u8());
        }
        Message::PingReq { client_id } => {
            if let Some(id) = client_id {
                out.put_slice(id.as_bytes());
            }
        }
        Message::Disconnect { duration } => {
            if let Some(d) = duration {
                out.put_u16(*d);
            }
        }
        Message::Encapsulated(e) => {
            out.put_u8(e.ctrl);
            out.put_slice(&e.wireless_node_id);
        }
    }
}

fn put_will_topic(w: &WillTopic, out: &mut BytesMut) {
    let flags = Flags { qos: w.qos, retain: w.retain, ..Flags::default() };
    out.put_u8(flags.to_byte());
    out.put_slice(w.topic.as_bytes());
}

fn put_subscribe_topic(topic: &SubscribeTopic, out: &mut BytesMut) {
    match topic {
        SubscribeTopic::Name(name) => out.put_slice(name.as_bytes()),
        SubscribeTopic::Predefined(id) => out.put_u16(*id),
        SubscribeTopic::Short(name) => out.put_slice(name),
    }
}
