//! Sans-IO codec for MQTT-SN 1.2 ("MQTT For Sensor Networks Protocol Specification Version 1.2",
//! Stanford-Clark & Truong, IBM 2013): every message type of §5.4, the forwarder encapsulation of §5.5, and
//! both forms of the Length field (§5.2.1).
//!
//! MQTT-SN runs over datagrams, one message per datagram, so the main entry points take a whole datagram:
//! [`decode`] / [`decode_bytes`] turn it into a [`Message`], [`encode`] appends one to a buffer. For byte
//! streams (serial forwarders, TCP) [`decode_stream`] frames messages by their Length field first.
//!
//! This crate knows nothing of sockets, sessions, topic registries or the broker core: it only maps octets
//! to typed messages and back, and never panics on any input.
//!
//! ```
//! use bytes::{Bytes, BytesMut};
//! use mqttsn_codec::{Message, Publish, PublishTopic, QoS, decode_bytes, encode};
//!
//! let publish = Message::Publish(Publish {
//!     dup: false,
//!     qos: QoS::One,
//!     retain: false,
//!     topic: PublishTopic::Normal(0x002A),
//!     msg_id: 7,
//!     data: Bytes::from_static(b"21.5"),
//! });
//! let mut datagram = BytesMut::new();
//! encode(&publish, &mut datagram)?;
//! assert_eq!(&datagram[..3], &[11, 0x0C, 0b0010_0000]); // Length, PUBLISH, Flags with QoS 1
//! assert_eq!(decode_bytes(datagram.freeze())?, publish);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod decode;
mod encode;
mod error;
mod flags;
mod header;
mod message;
mod stream;

pub use decode::{decode, decode_bytes};
pub use encode::{encode, encoded_len};
pub use error::{DecodeError, EncodeError};
pub use flags::{Flags, QoS, TopicIdType};
pub use header::{LONG_LENGTH_MARKER, MAX_MESSAGE_LEN, MAX_SHORT_MESSAGE_LEN, MsgType};
pub use message::{
    Advertise, Connect, Encapsulated, GwInfo, Message, PROTOCOL_ID, PubAck, Publish, PublishTopic, RegAck, Register,
    ReturnCode, SubAck, Subscribe, SubscribeTopic, Unsubscribe, WillTopic,
};
pub use stream::{DEFAULT_MAX_MESSAGE_LEN, decode_stream};
