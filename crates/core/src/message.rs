//! The one message model every protocol translates to and from.
//!
//! A [`Message`] is built once by the publisher's front end and shared as `Arc<Message>` by
//! every subscriber: fan-out never copies the payload. Payloads are bytes, never strings, so
//! binary data survives every protocol pair that can carry it.

use bytestring::ByteString;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use tolk_metrics::Protocol;

use crate::variants::Variants;

/// Identifies one session (or one named queue) inside the router. Unique for the process lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub u64);

/// Delivery guarantee. Ordered, so the effective guarantee of a delivery is `min(publisher, subscriber)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum QoS {
    /// Fire and forget; may be dropped under load (counted).
    #[default]
    AtMostOnce = 0,
    /// Acknowledged; may arrive more than once.
    AtLeastOnce = 1,
    /// Acknowledged with a two-phase handshake where the protocol has one (MQTT QoS 2).
    ExactlyOnce = 2,
}

impl QoS {
    /// The MQTT-numbered level, for protocols that carry it as a number.
    pub fn from_level(level: u8) -> Option<QoS> {
        match level {
            0 => Some(QoS::AtMostOnce),
            1 => Some(QoS::AtLeastOnce),
            2 => Some(QoS::ExactlyOnce),
            _ => None,
        }
    }
}

/// Where a reply should go. STOMP and AMQP name queues as well as topics, so a bare string
/// would lose which one was meant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Destination {
    /// A topic in the common (MQTT-style) topic space.
    Topic(String),
    /// A named queue in the core.
    Queue(String),
}

/// Optional metadata carried across protocols: MQTT 5 properties, STOMP headers, AMQP basic
/// properties and WS-N message attributes all map onto these fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Properties {
    /// MIME type of the payload (MQTT 5 content type, STOMP/AMQP content-type).
    pub content_type: Option<String>,
    /// `true` when the publisher declared the payload UTF-8 text (MQTT 5 payload format indicator).
    pub payload_utf8: Option<bool>,
    /// Opaque request/response correlation (MQTT 5 correlation data, AMQP correlation-id).
    pub correlation_data: Option<Bytes>,
    /// Where replies go (MQTT 5 response topic, STOMP/AMQP reply-to).
    pub reply_to: Option<Destination>,
    /// Publisher-assigned id (AMQP message-id).
    pub message_id: Option<String>,
    /// Publisher-assigned creation time (AMQP timestamp).
    pub timestamp: Option<SystemTime>,
    /// After this instant the message must not be delivered (MQTT 5 expiry, AMQP expiration).
    pub expires_at: Option<Instant>,
    /// User headers, in order, repeats allowed (MQTT 5 user properties, STOMP headers, AMQP headers table).
    pub user: Vec<(String, String)>,
}

/// Who published a message: used for no-local, loop prevention and metrics labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The protocol it arrived on.
    pub protocol: Protocol,
    /// The publishing session.
    pub session: SessionId,
    /// The publisher's client id (empty where the protocol has none).
    pub client_id: Arc<str>,
}

/// A message in flight through the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Canonical topic: MQTT-style, levels separated by `/`, never a wildcard. Shared and
    /// immutable: an MQTT publisher's topic stays in the bytes of its frame, and every delivery
    /// encodes it from there.
    pub topic: ByteString,
    /// The bytes, exactly as published.
    pub payload: Bytes,
    /// Cross-protocol metadata.
    pub props: Properties,
    /// The publisher's delivery guarantee.
    pub qos: QoS,
    /// Whether the publisher asked for this to become the topic's retained message.
    pub retain: bool,
    /// Who sent it.
    pub origin: Origin,
    /// When the publisher's frame was complete; the start of every latency measurement.
    pub received_at: Instant,
    /// What its payload was re-encoded to for subscribers (`[[transcode]]`).
    pub(crate) variants: Variants<Message>,
}

impl Message {
    /// A message with no properties, stamped now. Front ends fill in the rest field by field.
    pub fn new(topic: impl Into<ByteString>, payload: impl Into<Bytes>, origin: Origin) -> Message {
        Message::received(topic, payload, origin, Instant::now())
    }

    /// A message with no properties whose frame was complete at `received_at`: a front end
    /// that read the clock for the bytes it handles stamps its messages with that reading
    /// rather than take one more per message.
    pub fn received(
        topic: impl Into<ByteString>,
        payload: impl Into<Bytes>,
        origin: Origin,
        received_at: Instant,
    ) -> Message {
        Message {
            topic: topic.into(),
            payload: payload.into(),
            props: Properties::default(),
            qos: QoS::AtMostOnce,
            retain: false,
            origin,
            received_at,
            variants: Variants::default(),
        }
    }

    /// Whether the message's expiry has passed at `now`.
    pub fn is_expired(&self, now: Instant) -> bool {
        self.props.expires_at.is_some_and(|at| at <= now)
    }
}
