//! The typed MQTT-SN 1.2 messages of §5.4 and §5.5, and the small value types their fields use.
//!
//! Types here describe what a message means, not how it is laid out: Flags bits that a message does not use
//! are not represented, and fields whose shape depends on TopicIdType are enums, so an inconsistent message
//! cannot be built. The wire layout lives in `decode` and `encode`.

use bytes::Bytes;

use crate::flags::{QoS, TopicIdType};
use crate::header::MsgType;

/// The only ProtocolId MQTT-SN 1.2 defines for CONNECT (§5.3.8). Kept as a constant, not enforced by the
/// decoder: refusing another version is the session's decision (it answers with CONNACK, not silence).
pub const PROTOCOL_ID: u8 = 0x01;

/// ReturnCode of §5.3.10. Values `0x04..=0xFF` are reserved; they are kept, not rejected, so that a peer
/// using them (some gateways do) produces a readable message rather than a dropped datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ReturnCode {
    /// `0x00`.
    #[default]
    Accepted,
    /// `0x01`: rejected, congestion; the client waits and retries.
    Congestion,
    /// `0x02`: rejected, invalid topic id; what a gateway answers to a PUBLISH on an unknown id.
    InvalidTopicId,
    /// `0x03`: rejected, not supported.
    NotSupported,
    /// Any reserved value. Only `0x04..=0xFF` round-trips; `Reserved(0)` would encode as `Accepted`.
    Reserved(u8),
}

impl ReturnCode {
    /// Reads the octet; never fails.
    pub const fn from_u8(value: u8) -> ReturnCode {
        match value {
            0x00 => ReturnCode::Accepted,
            0x01 => ReturnCode::Congestion,
            0x02 => ReturnCode::InvalidTopicId,
            0x03 => ReturnCode::NotSupported,
            other => ReturnCode::Reserved(other),
        }
    }

    /// The octet on the wire.
    pub const fn to_u8(self) -> u8 {
        match self {
            ReturnCode::Accepted => 0x00,
            ReturnCode::Congestion => 0x01,
            ReturnCode::InvalidTopicId => 0x02,
            ReturnCode::NotSupported => 0x03,
            ReturnCode::Reserved(other) => other,
        }
    }
}

/// The TopicId field of PUBLISH (§5.4.12), whose meaning the TopicIdType flag selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PublishTopic {
    /// A topic id the client or gateway registered with REGISTER/REGACK.
    Normal(u16),
    /// A pre-defined topic id.
    Predefined(u16),
    /// A two-octet short topic name (usually two ASCII characters), sent in place of an id.
    Short([u8; 2]),
}

impl PublishTopic {
    /// The TopicIdType value this topic is sent with.
    pub const fn topic_id_type(&self) -> TopicIdType {
        match self {
            PublishTopic::Normal(_) => TopicIdType::Normal,
            PublishTopic::Predefined(_) => TopicIdType::Predefined,
            PublishTopic::Short(_) => TopicIdType::Short,
        }
    }
}

/// What SUBSCRIBE and UNSUBSCRIBE name (§5.4.15, §5.4.17): a topic name (possibly with wildcards), a
/// pre-defined topic id, or a short topic name, as the TopicIdType flag says.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SubscribeTopic {
    /// TopicIdType `0b00`: a UTF-8 topic name or filter, e.g. `sensors/+/temp`.
    Name(String),
    /// TopicIdType `0b01`: a pre-defined topic id.
    Predefined(u16),
    /// TopicIdType `0b10`: a two-octet short topic name.
    Short([u8; 2]),
}

impl SubscribeTopic {
    /// The TopicIdType value this topic is sent with.
    pub const fn topic_id_type(&self) -> TopicIdType {
        match self {
            SubscribeTopic::Name(_) => TopicIdType::Normal,
            SubscribeTopic::Predefined(_) => TopicIdType::Predefined,
            SubscribeTopic::Short(_) => TopicIdType::Short,
        }
    }
}

/// ADVERTISE (§5.4.1): a gateway announces itself and when its next advertisement is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Advertise {
    /// The gateway's id.
    pub gw_id: u8,
    /// Seconds until the next ADVERTISE.
    pub duration: u16,
}

/// GWINFO (§5.4.3): the answer to SEARCHGW.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GwInfo {
    /// The gateway's id.
    pub gw_id: u8,
    /// The gateway's address in the wireless network's own format; present only when a client answers on
    /// behalf of a gateway. `Some` of an empty address is sent the same as `None`.
    pub gw_add: Option<Bytes>,
}

/// CONNECT (§5.4.4).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Connect {
    /// The client wants to be prompted for its will topic and will message (WILLTOPICREQ/WILLMSGREQ).
    pub will: bool,
    /// Start a fresh session; in MQTT-SN this also clears the will data (§6.3).
    pub clean_session: bool,
    /// Protocol name and version in one octet; [`PROTOCOL_ID`] for 1.2.
    pub protocol_id: u8,
    /// Keep-alive in seconds.
    pub duration: u16,
    /// The client id. The spec says 1-23 characters; the codec does not enforce that, the session does.
    pub client_id: String,
}

/// The Flags and WillTopic fields of a non-empty WILLTOPIC (§5.4.7) or WILLTOPICUPD (§5.4.22).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WillTopic {
    /// QoS for publishing the will message.
    pub qos: QoS,
    /// Publish the will message retained.
    pub retain: bool,
    /// The will topic name.
    pub topic: String,
}

/// REGISTER (§5.4.10): binds a topic name to a topic id, sent by either side.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Register {
    /// `0x0000` from a client; the assigned id from a gateway.
    pub topic_id: u16,
    /// Matches the REGACK.
    pub msg_id: u16,
    /// The topic name being registered.
    pub topic_name: String,
}

/// REGACK (§5.4.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RegAck {
    /// The id assigned to the topic (meaningful when accepted).
    pub topic_id: u16,
    /// The MsgId of the REGISTER being answered.
    pub msg_id: u16,
    /// Outcome.
    pub return_code: ReturnCode,
}

/// PUBLISH (§5.4.12).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Publish {
    /// Retransmission.
    pub dup: bool,
    /// Delivery guarantee, including QoS −1.
    pub qos: QoS,
    /// Retained message.
    pub retain: bool,
    /// Topic id, pre-defined id or short name; its variant sets the TopicIdType flag.
    pub topic: PublishTopic,
    /// `0x0000` for QoS 0 and −1.
    pub msg_id: u16,
    /// Application data. Shares the datagram's buffer when decoded with [`crate::decode_bytes`].
    pub data: Bytes,
}

/// PUBACK (§5.4.13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PubAck {
    /// TopicId of the PUBLISH being acknowledged, as it was sent (a short name's two octets read big-endian).
    pub topic_id: u16,
    /// MsgId of that PUBLISH.
    pub msg_id: u16,
    /// Outcome; `InvalidTopicId` tells the sender to re-register.
    pub return_code: ReturnCode,
}

/// SUBSCRIBE (§5.4.15).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Subscribe {
    /// Retransmission.
    pub dup: bool,
    /// Requested QoS.
    pub qos: QoS,
    /// Matches the SUBACK.
    pub msg_id: u16,
    /// What to subscribe to; its variant sets the TopicIdType flag.
    pub topic: SubscribeTopic,
}

/// SUBACK (§5.4.16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubAck {
    /// Granted QoS.
    pub qos: QoS,
    /// Id of the topic subscribed to; `0x0000` for a wildcard filter or a short name.
    pub topic_id: u16,
    /// MsgId of the SUBSCRIBE.
    pub msg_id: u16,
    /// Outcome.
    pub return_code: ReturnCode,
}

/// UNSUBSCRIBE (§5.4.17); of its Flags only TopicIdType is used.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Unsubscribe {
    /// Matches the UNSUBACK.
    pub msg_id: u16,
    /// What to unsubscribe from.
    pub topic: SubscribeTopic,
}

/// The forwarder encapsulation of §5.5: a message relayed by a forwarder on behalf of a wireless node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Encapsulated {
    /// The Ctrl octet as sent. Bits 1-0 are the broadcast radius (gateway → forwarder); bits 7-2 are
    /// reserved and kept as received.
    pub ctrl: u8,
    /// Identifies the wireless node behind the forwarder; its format is the forwarder's business.
    pub wireless_node_id: Bytes,
    /// The relayed message. It is decoded (so a broken one fails the whole datagram) and may not itself be
    /// an encapsulation.
    pub message: Box<Message>,
}

impl Encapsulated {
    /// The broadcast radius from bits 1-0 of Ctrl.
    pub const fn radius(&self) -> u8 {
        self.ctrl & 0b11
    }
}

/// One MQTT-SN 1.2 message: every type of Table 3 (§5.2.2). One UDP datagram carries exactly one of these.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Message {
    /// §5.4.1.
    Advertise(Advertise),
    /// §5.4.2: a client looks for gateways within `radius` hops.
    SearchGw {
        /// Broadcast radius in hops.
        radius: u8,
    },
    /// §5.4.3.
    GwInfo(GwInfo),
    /// §5.4.4.
    Connect(Connect),
    /// §5.4.5.
    ConnAck {
        /// Outcome of the CONNECT.
        return_code: ReturnCode,
    },
    /// §5.4.6: the gateway asks for the will topic.
    WillTopicReq,
    /// §5.4.7. `None` is the empty (2-octet) WILLTOPIC: no will.
    WillTopic(Option<WillTopic>),
    /// §5.4.8: the gateway asks for the will message.
    WillMsgReq,
    /// §5.4.9.
    WillMsg {
        /// The will message.
        will_msg: Bytes,
    },
    /// §5.4.10.
    Register(Register),
    /// §5.4.11.
    RegAck(RegAck),
    /// §5.4.12.
    Publish(Publish),
    /// §5.4.13.
    PubAck(PubAck),
    /// §5.4.14: third step of QoS 2.
    PubComp {
        /// MsgId of the PUBLISH.
        msg_id: u16,
    },
    /// §5.4.14: first step of QoS 2.
    PubRec {
        /// MsgId of the PUBLISH.
        msg_id: u16,
    },
    /// §5.4.14: second step of QoS 2.
    PubRel {
        /// MsgId of the PUBLISH.
        msg_id: u16,
    },
    /// §5.4.15.
    Subscribe(Subscribe),
    /// §5.4.16.
    SubAck(SubAck),
    /// §5.4.17.
    Unsubscribe(Unsubscribe),
    /// §5.4.18.
    UnsubAck {
        /// MsgId of the UNSUBSCRIBE.
        msg_id: u16,
    },
    /// §5.4.19. With a client id it is a sleeping client waking up to collect buffered messages (§6.14).
    PingReq {
        /// Present only from a sleeping client. `Some("")` is sent the same as `None`.
        client_id: Option<String>,
    },
    /// §5.4.20.
    PingResp,
    /// §5.4.21. With a duration the client goes to sleep for that many seconds (§6.14).
    Disconnect {
        /// Sleep duration in seconds.
        duration: Option<u16>,
    },
    /// §5.4.22. `None` is the empty (2-octet) WILLTOPICUPD: delete the will topic and will message.
    WillTopicUpd(Option<WillTopic>),
    /// §5.4.24.
    WillTopicResp {
        /// Outcome of the WILLTOPICUPD.
        return_code: ReturnCode,
    },
    /// §5.4.23.
    WillMsgUpd {
        /// The new will message.
        will_msg: Bytes,
    },
    /// §5.4.25.
    WillMsgResp {
        /// Outcome of the WILLMSGUPD.
        return_code: ReturnCode,
    },
    /// §5.5.
    Encapsulated(Encapsulated),
}

impl Message {
    /// The MsgType this message is sent with, for dispatch and log lines.
    pub const fn msg_type(&self) -> MsgType {
        match self {
            Message::Advertise(_) => MsgType::Advertise,
            Message::SearchGw { .. } => MsgType::SearchGw,
            Message::GwInfo(_) => MsgType::GwInfo,
            Message::Connect(_) => MsgType::Connect,
            Message::ConnAck { .. } => MsgType::ConnAck,
            Message::WillTopicReq => MsgType::WillTopicReq,
            Message::WillTopic(_) => MsgType::WillTopic,
            Message::WillMsgReq => MsgType::WillMsgReq,
            Message::WillMsg { .. } => MsgType::WillMsg,
            Message::Register(_) => MsgType::Register,
            Message::RegAck(_) => MsgType::RegAck,
            Message::Publish(_) => MsgType::Publish,
            Message::PubAck(_) => MsgType::PubAck,
            Message::PubComp { .. } => MsgType::PubComp,
            Message::PubRec { .. } => MsgType::PubRec,
            Message::PubRel { .. } => MsgType::PubRel,
            Message::Subscribe(_) => MsgType::Subscribe,
            Message::SubAck(_) => MsgType::SubAck,
            Message::Unsubscribe(_) => MsgType::Unsubscribe,
            Message::UnsubAck { .. } => MsgType::UnsubAck,
            Message::PingReq { .. } => MsgType::PingReq,
            Message::PingResp => MsgType::PingResp,
            Message::Disconnect { .. } => MsgType::Disconnect,
            Message::WillTopicUpd(_) => MsgType::WillTopicUpd,
            Message::WillTopicResp { .. } => MsgType::WillTopicResp,
            Message::WillMsgUpd { .. } => MsgType::WillMsgUpd,
            Message::WillMsgResp { .. } => MsgType::WillMsgResp,
            Message::Encapsulated(_) => MsgType::Encapsulated,
        }
    }
}
