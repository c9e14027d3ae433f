//! Why a datagram could not be decoded or a message could not be encoded.
//!
//! Every decode error names what was wrong and where (octet offset from the start of the datagram), so the
//! gateway's log line is enough to reproduce the problem without a packet capture.

/// A datagram that is not one well-formed MQTT-SN 1.2 message. The front end drops the datagram (MQTT-SN over
/// UDP has no error reply for garbage) and logs this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes end inside a field: a datagram cut short, or a Length too small for the message's fields.
    #[error("{message}: {field} at offset {offset} needs {needed} octet(s), only {available} left")]
    Truncated {
        /// Message name from Table 3, or "header".
        message: &'static str,
        /// Field name from the message's table in §5.4.
        field: &'static str,
        /// Where the field starts.
        offset: usize,
        /// Octets the field needs.
        needed: usize,
        /// Octets that were there.
        available: usize,
    },
    /// The Length field holds a value smaller than the header it is part of (0, or under 4 in the long form).
    #[error("Length at offset {offset} declares {declared} octet(s), less than the {minimum}-octet header")]
    LengthTooSmall {
        /// Where the Length field starts.
        offset: usize,
        /// The value it holds.
        declared: usize,
        /// Length field plus MsgType octet.
        minimum: usize,
    },
    /// The Length field declares more octets than the datagram holds from that point (a truncated datagram).
    #[error("Length at offset {offset} declares {declared} octet(s), the datagram has {received} from there")]
    LengthExceedsDatagram {
        /// Where the Length field starts.
        offset: usize,
        /// The value it holds.
        declared: usize,
        /// Octets present from `offset` to the end of the datagram.
        received: usize,
    },
    /// The datagram holds more octets than the Length field declares; over UDP one datagram is one message.
    #[error("Length at offset {offset} declares {declared} octet(s), the datagram has {received} from there")]
    TrailingBytes {
        /// Where the Length field starts.
        offset: usize,
        /// The value it holds.
        declared: usize,
        /// Octets present from `offset` to the end of the datagram.
        received: usize,
    },
    /// The MsgType octet is reserved in Table 3.
    #[error("unknown MsgType 0x{msg_type:02X} at offset {offset}")]
    UnknownMessageType {
        /// The octet as received.
        msg_type: u8,
        /// Where it is.
        offset: usize,
    },
    /// A fixed-size message carries octets after its last field.
    #[error("{message}: {extra} unexpected octet(s) after the last field, at offset {offset}")]
    UnexpectedBytes {
        /// Message name from Table 3.
        message: &'static str,
        /// First unexpected octet.
        offset: usize,
        /// How many there are.
        extra: usize,
    },
    /// TopicIdType `0b11` (reserved, §5.3.4) in a message that needs the field.
    #[error("{message}: reserved TopicIdType 0b11 in Flags at offset {offset}")]
    ReservedTopicIdType {
        /// Message name from Table 3.
        message: &'static str,
        /// Where the Flags octet is.
        offset: usize,
    },
    /// A topic name or client id that is not UTF-8.
    #[error("{message}: {field} at offset {offset} is not UTF-8 (first bad octet at offset {bad_octet})")]
    InvalidUtf8 {
        /// Message name from Table 3.
        message: &'static str,
        /// Field name from §5.4.
        field: &'static str,
        /// Where the field starts.
        offset: usize,
        /// Where the first invalid sequence starts.
        bad_octet: usize,
    },
    /// An encapsulated message that is itself an encapsulation; §5.5 wraps plain messages only.
    #[error("encapsulated message at offset {offset} is itself an encapsulation")]
    NestedEncapsulation {
        /// Where the inner message starts.
        offset: usize,
    },
    /// Stream framing only: a Length larger than the limit the caller set, refused before buffering it.
    #[error("Length at offset {offset} declares {declared} octets, over the {limit}-octet limit")]
    MessageTooLarge {
        /// Where the Length field starts.
        offset: usize,
        /// The value it holds.
        declared: usize,
        /// The caller's limit.
        limit: usize,
    },
}

/// A message that cannot be put on the wire. Nothing is written to the output buffer when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The message needs more than the 65 535 octets the Length field can express (§5.2.1).
    #[error("{message} would be {length} octets, over the 65535-octet maximum of the Length field")]
    TooLarge {
        /// Message name from Table 3.
        message: &'static str,
        /// Octets it would take.
        length: usize,
    },
    /// An [`crate::Encapsulated`] whose inner message is itself an encapsulation.
    #[error("an encapsulated message cannot itself be an encapsulation")]
    NestedEncapsulation,
}
