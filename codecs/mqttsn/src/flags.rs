//! The Flags octet of MQTT-SN 1.2 §5.3.4 and the two enums packed into it (QoS and TopicIdType).
//!
//! This module only translates between the octet and typed fields; which fields a message actually uses is
//! decided by the message decoder and encoder.

const DUP: u8 = 0b1000_0000;
const QOS_SHIFT: u8 = 5;
const RETAIN: u8 = 0b0001_0000;
const WILL: u8 = 0b0000_1000;
const CLEAN_SESSION: u8 = 0b0000_0100;
const TOPIC_ID_TYPE_MASK: u8 = 0b0000_0011;

/// Quality of service as coded in bits 6-5 of Flags (§5.3.4). MQTT-SN adds QoS −1 (`0b11`): a publish sent
/// without a connection, to a pre-defined or short topic (§6.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum QoS {
    /// `0b11`: "fire and forget" without a connection, §6.8.
    MinusOne,
    /// `0b00`: at most once.
    #[default]
    Zero,
    /// `0b01`: at least once.
    One,
    /// `0b10`: exactly once.
    Two,
}

impl QoS {
    /// Reads the two QoS bits (already shifted down to bits 1-0); every value is defined, so this cannot fail.
    pub const fn from_bits(bits: u8) -> QoS {
        match bits & 0b11 {
            0b00 => QoS::Zero,
            0b01 => QoS::One,
            0b10 => QoS::Two,
            _ => QoS::MinusOne,
        }
    }

    /// The two QoS bits in positions 1-0, ready to be shifted into the Flags octet.
    pub const fn bits(self) -> u8 {
        match self {
            QoS::Zero => 0b00,
            QoS::One => 0b01,
            QoS::Two => 0b10,
            QoS::MinusOne => 0b11,
        }
    }
}

/// What the TopicId / TopicName field of PUBLISH, SUBSCRIBE and UNSUBSCRIBE holds (§5.3.4, bits 1-0). The
/// reserved value `0b11` has no variant: a message that needs this field and carries it is malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TopicIdType {
    /// `0b00`: a topic id registered with REGISTER (PUBLISH) or a topic name (SUBSCRIBE/UNSUBSCRIBE).
    #[default]
    Normal,
    /// `0b01`: a topic id both sides know in advance (§6.7, pre-defined topic ids).
    Predefined,
    /// `0b10`: a two-octet topic name carried in place of the topic id (§6.7, short topic names).
    Short,
}

impl TopicIdType {
    /// Reads bits 1-0; `None` for the reserved `0b11`.
    pub const fn from_bits(bits: u8) -> Option<TopicIdType> {
        match bits & TOPIC_ID_TYPE_MASK {
            0b00 => Some(TopicIdType::Normal),
            0b01 => Some(TopicIdType::Predefined),
            0b10 => Some(TopicIdType::Short),
            _ => None,
        }
    }

    /// The value of bits 1-0.
    pub const fn bits(self) -> u8 {
        match self {
            TopicIdType::Normal => 0b00,
            TopicIdType::Predefined => 0b01,
            TopicIdType::Short => 0b10,
        }
    }
}

/// The Flags octet (§5.3.4) with each field typed, so that callers never shift bits by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags {
    /// Bit 7: the message is a retransmission (PUBLISH, SUBSCRIBE).
    pub dup: bool,
    /// Bits 6-5.
    pub qos: QoS,
    /// Bit 4: same meaning as in MQTT (PUBLISH, WILLTOPIC, WILLTOPICUPD).
    pub retain: bool,
    /// Bit 3: the client asks for the will topic and will message prompts (CONNECT).
    pub will: bool,
    /// Bit 2: same as MQTT, extended to the will data (CONNECT, §6.3).
    pub clean_session: bool,
    /// Bits 1-0.
    pub topic_id_type: TopicIdType,
}

impl Flags {
    /// Parses the octet; `None` when TopicIdType holds the reserved `0b11`.
    pub const fn from_byte(byte: u8) -> Option<Flags> {
        match TopicIdType::from_bits(byte) {
            Some(topic_id_type) => Some(Flags { topic_id_type, ..Flags::from_byte_ignoring_topic_id_type(byte) }),
            None => None,
        }
    }

    /// Parses the octet for a message where the spec marks TopicIdType "not used" (CONNECT, WILLTOPIC, SUBACK…):
    /// whatever the peer put there is ignored rather than rejected, and reads as [`TopicIdType::Normal`].
    pub const fn from_byte_ignoring_topic_id_type(byte: u8) -> Flags {
        Flags {
            dup: byte & DUP != 0,
            qos: QoS::from_bits(byte >> QOS_SHIFT),
            retain: byte & RETAIN != 0,
            will: byte & WILL != 0,
            clean_session: byte & CLEAN_SESSION != 0,
            topic_id_type: TopicIdType::Normal,
        }
    }

    /// The octet as sent on the wire.
    pub const fn to_byte(self) -> u8 {
        let mut byte = (self.qos.bits() << QOS_SHIFT) | self.topic_id_type.bits();
        if self.dup {
            byte |= DUP;
        }
        if self.retain {
            byte |= RETAIN;
        }
        if self.will {
            byte |= WILL;
        }
        if self.clean_session {
            byte |= CLEAN_SESSION;
        }
        byte
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_octet_without_reserved_topic_id_type_round_trips() {
        for byte in 0..=u8::MAX {
            match Flags::from_byte(byte) {
                Some(flags) => assert_eq!(flags.to_byte(), byte),
                None => assert_eq!(byte & TOPIC_ID_TYPE_MASK, 0b11),
            }
        }
    }

    #[test]
    fn bit_positions_follow_section_5_3_4() {
        let flags = Flags::from_byte(0b1111_1110).unwrap();
        assert!(flags.dup && flags.retain && flags.will && flags.clean_session);
        assert_eq!(flags.qos, QoS::MinusOne);
        assert_eq!(flags.topic_id_type, TopicIdType::Short);
        assert_eq!(Flags::from_byte(0b0010_0001).unwrap().qos, QoS::One);
        assert_eq!(Flags::from_byte(0b0100_0001).unwrap().qos, QoS::Two);
        assert_eq!(Flags::from_byte(0b0000_0001).unwrap().topic_id_type, TopicIdType::Predefined);
    }

    #[test]
    fn reserved_topic_id_type_is_rejected_only_by_the_strict_parser() {
        assert_eq!(Flags::from_byte(0b0000_0011), None);
        let lenient = Flags::from_byte_ignoring_topic_id_type(0b0000_0111);
        assert!(lenient.clean_session);
        assert_eq!(lenient.topic_id_type, TopicIdType::Normal);
    }
}
