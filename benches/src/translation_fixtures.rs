//! The message every translation benchmark carries: one sensor reading on [`HOT_TOPIC`], with the
//! metadata a cross-protocol message typically has (a content type and one user property). Only
//! the core side lives here; the wire frames are built by `benches/translation.rs`, whose
//! protocol crates are dev-dependencies.

use tolk_core::{Message, Origin, Protocol, QoS, SessionId};

use crate::HOT_TOPIC;

/// A 64-byte JSON reading: the payload size of the broker's load benchmarks.
pub const PAYLOAD: &[u8; 64] = br#"{"sensor":"temp-03","value":21.50,"unit":"C","ts":1732300000000}"#;

/// Content type of [`PAYLOAD`]; carried by MQTT 5, STOMP, AMQP and WS-N (not MQTT-SN).
pub const CONTENT_TYPE: &str = "application/json";

/// The one user property (name, value); carried by MQTT 5, STOMP and AMQP.
pub const USER_PROPERTY: (&str, &str) = ("zone", "north");

/// Client id of every benchmark publisher.
pub const CLIENT_ID: &str = "sensor-7";

/// The core message an outbound benchmark delivers: [`PAYLOAD`] on [`HOT_TOPIC`] at most once,
/// declared UTF-8, with [`CONTENT_TYPE`] and [`USER_PROPERTY`], as if published over `from`.
pub fn sample_message(from: Protocol) -> Message {
    let origin = Origin { protocol: from, session: SessionId(1), client_id: CLIENT_ID.into() };
    let mut message = Message::new(HOT_TOPIC, &PAYLOAD[..], origin);
    message.qos = QoS::AtMostOnce;
    message.props.content_type = Some(CONTENT_TYPE.to_owned());
    message.props.payload_utf8 = Some(true);
    message.props.user.push((USER_PROPERTY.0.to_owned(), USER_PROPERTY.1.to_owned()));
    message
}
