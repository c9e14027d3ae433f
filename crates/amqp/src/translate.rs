//! AMQP content ↔ core [`Message`]: the property mapping lives here and only here.
//!
//! | AMQP basic property | core                                                         |
//! |---------------------|--------------------------------------------------------------|
//! | content-type        | `props.content_type`                                         |
//! | headers             | `props.user` (string-like values; see below)                 |
//! | delivery-mode       | 2 → `QoS::AtLeastOnce`, 1 or absent → `QoS::AtMostOnce`; back: QoS ≥ 1 → 2, else absent |
//! | correlation-id      | `props.correlation_data` (UTF-8 bytes; binary data from other protocols is not representable and is left out) |
//! | reply-to            | `props.reply_to = Destination::Queue(name)`; a `Topic(t)` goes out as the routing key of `t` (reply via amq.topic) |
//! | expiration (ms)     | `props.expires_at = received_at + ms`; back: the time left, in ms |
//! | message-id          | `props.message_id`                                            |
//! | timestamp (s)       | `props.timestamp`                                             |
//! | content-encoding, priority, type, user-id, app-id, cluster-id | user properties `amqp-content-encoding`, `amqp-priority`, … (restored as properties for AMQP consumers) |
//!
//! Headers: string values map to user properties one to one; numbers, booleans, timestamps and
//! decimals become their decimal text; an array becomes repeated user properties; nested tables
//! and byte arrays have no string form and are left out. Going back, every user property is a
//! long string, and repeated names become an array. So AMQP header *types* do not survive a trip
//! through the broker (headers-exchange matching happens before translation, on the typed table).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use amq_protocol::protocol::BasicProperties;
use amq_protocol::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};
use bytes::Bytes;
use tolk_core::{Destination, Message, Origin, QoS};

use crate::error::AmqpError;
use crate::topic_key;

/// Prefix of the internal topic given to messages routed by AMQP-only exchanges (they never
/// enter the common topic space, but every core message needs a topic, and the delivery needs
/// the exchange and routing key back): `$amqp/<exchange>/<routing key as topic>`.
pub const INTERNAL_TOPIC_PREFIX: &str = "$amqp/";

/// The bridge exchange: publishes go to the router, bindings are router bindings.
pub const TOPIC_BRIDGE: &str = "amq.topic";

/// User-property names that carry AMQP basic properties the core has no field for.
const EXTRA_PROPERTIES: [&str; 6] =
    ["amqp-content-encoding", "amqp-priority", "amqp-type", "amqp-user-id", "amqp-app-id", "amqp-cluster-id"];

/// The topic of a message published to `exchange` (not `amq.topic`) with `routing_key`.
pub fn internal_topic(exchange: &str, routing_key: &str) -> String {
    // Built to its exact length: it becomes a message's shared topic without a copy.
    let mut topic = String::with_capacity(INTERNAL_TOPIC_PREFIX.len() + exchange.len() + 1 + routing_key.len());
    topic.push_str(INTERNAL_TOPIC_PREFIX);
    topic.push_str(exchange);
    topic.push('/');
    topic.extend(routing_key.chars().map(topic_key::swap_separator));
    topic
}

/// The exchange and routing key a message is delivered with: what it was published with if it
/// came through an AMQP-only exchange, else `amq.topic` and its topic's routing key.
pub fn delivery_address(message: &Message) -> (String, String) {
    if message.origin.protocol == tolk_core::Protocol::Amqp
        && let Some(rest) = message.topic.strip_prefix(INTERNAL_TOPIC_PREFIX)
        && let Some((exchange, key)) = rest.split_once('/')
    {
        return (exchange.to_owned(), topic_key::swap_separators(key));
    }
    (TOPIC_BRIDGE.to_owned(), topic_key::topic_to_routing_key(&message.topic))
}

/// Builds the core message for a completed publish.
pub fn message_from_publish(
    topic: String,
    body: Bytes,
    properties: &BasicProperties,
    origin: Origin,
    received_at: Instant,
) -> Result<Message, AmqpError> {
    let mut message = Message::received(topic, body, origin, received_at);
    message.qos = if *properties.delivery_mode() == Some(2) { QoS::AtLeastOnce } else { QoS::AtMostOnce };
    let props = &mut message.props;
    props.content_type = properties.content_type().as_ref().map(|s| s.as_str().to_owned());
    props.correlation_data =
        properties.correlation_id().as_ref().map(|s| Bytes::copy_from_slice(s.as_str().as_bytes()));
    props.reply_to = properties.reply_to().as_ref().map(|s| Destination::Queue(s.as_str().to_owned()));
    props.message_id = properties.message_id().as_ref().map(|s| s.as_str().to_owned());
    props.timestamp =
        properties.timestamp().and_then(|secs| SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs)));
    if let Some(expiration) = properties.expiration() {
        let ms = parse_expiration(expiration.as_str())?;
        // An expiry too far away to represent is no expiry.
        props.expires_at = received_at.checked_add(Duration::from_millis(ms));
    }
    if let Some(headers) = properties.headers() {
        for (key, value) in headers {
            push_header(&mut props.user, key.as_str(), value);
        }
    }
    let extras = [
        properties.content_encoding().as_ref().map(|s| s.as_str().to_owned()),
        properties.priority().map(|p| p.to_string()),
        properties.kind().as_ref().map(|s| s.as_str().to_owned()),
        properties.user_id().as_ref().map(|s| s.as_str().to_owned()),
        properties.app_id().as_ref().map(|s| s.as_str().to_owned()),
        properties.cluster_id().as_ref().map(|s| s.as_str().to_owned()),
    ];
    for (name, value) in EXTRA_PROPERTIES.iter().zip(extras) {
        if let Some(value) = value {
            props.user.push(((*name).to_owned(), value));
        }
    }
    Ok(message)
}

/// RabbitMQ's rule: a non-negative integer number of milliseconds, as decimal text.
fn parse_expiration(s: &str) -> Result<u64, AmqpError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AmqpError::precondition_failed(format!(
            "invalid expiration '{s}': must be a whole number of milliseconds"
        )));
    }
    s.parse().map_err(|_| AmqpError::precondition_failed(format!("invalid expiration '{s}': too large")))
}

fn push_header(user: &mut Vec<(String, String)>, key: &str, value: &AMQPValue) {
    match value {
        AMQPValue::FieldArray(items) => {
            for item in items.as_slice() {
                if let Some(text) = scalar_text(item) {
                    user.push((key.to_owned(), text));
                }
            }
        }
        other => {
            if let Some(text) = scalar_text(other) {
                user.push((key.to_owned(), text));
            }
        }
    }
}

fn scalar_text(value: &AMQPValue) -> Option<String> {
    Some(match value {
        AMQPValue::Boolean(b) => b.to_string(),
        AMQPValue::ShortShortInt(v) => v.to_string(),
        AMQPValue::ShortShortUInt(v) => v.to_string(),
        AMQPValue::ShortInt(v) => v.to_string(),
        AMQPValue::ShortUInt(v) => v.to_string(),
        AMQPValue::LongInt(v) => v.to_string(),
        AMQPValue::LongUInt(v) => v.to_string(),
        AMQPValue::LongLongInt(v) => v.to_string(),
        AMQPValue::Float(v) => v.to_string(),
        AMQPValue::Double(v) => v.to_string(),
        AMQPValue::DecimalValue(d) => decimal_text(d.value, d.scale),
        AMQPValue::ShortString(s) => s.as_str().to_owned(),
        AMQPValue::LongString(s) => std::str::from_utf8(s.as_bytes()).ok()?.to_owned(),
        AMQPValue::Timestamp(t) => t.to_string(),
        AMQPValue::Void => String::new(),
        AMQPValue::FieldArray(_) | AMQPValue::FieldTable(_) | AMQPValue::ByteArray(_) => return None,
    })
}

fn decimal_text(value: u32, scale: u8) -> String {
    let digits = value.to_string();
    let scale = scale as usize;
    if scale == 0 {
        return digits;
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{int}.{frac}")
}

fn short(s: &str) -> Option<ShortString> {
    ShortString::try_new(s).ok()
}

/// The basic properties for delivering `message` to an AMQP client at `now`.
pub fn properties_for_delivery(message: &Message, now: Instant) -> BasicProperties {
    let p = &message.props;
    let mut out = BasicProperties::default();
    if let Some(ct) = p.content_type.as_deref().and_then(short) {
        out = out.with_content_type(ct);
    }
    if message.qos >= QoS::AtLeastOnce {
        out = out.with_delivery_mode(2);
    }
    if let Some(id) = p.correlation_data.as_deref().and_then(|b| std::str::from_utf8(b).ok()).and_then(short) {
        out = out.with_correlation_id(id);
    }
    let reply_to = match &p.reply_to {
        Some(Destination::Queue(q)) => short(q),
        Some(Destination::Topic(t)) => short(&topic_key::topic_to_routing_key(t)),
        None => None,
    };
    if let Some(reply_to) = reply_to {
        out = out.with_reply_to(reply_to);
    }
    if let Some(at) = p.expires_at {
        let left = at.saturating_duration_since(now).as_millis();
        out = out.with_expiration(left.to_string().into());
    }
    if let Some(id) = p.message_id.as_deref().and_then(short) {
        out = out.with_message_id(id);
    }
    if let Some(secs) = p.timestamp.and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok()) {
        out = out.with_timestamp(secs.as_secs());
    }
    let mut headers: Vec<(&str, Vec<&str>)> = Vec::new();
    for (key, value) in &p.user {
        match EXTRA_PROPERTIES.iter().position(|n| n == key) {
            Some(0) => {
                if let Some(v) = short(value) {
                    out = out.with_content_encoding(v);
                }
            }
            Some(1) => {
                if let Ok(v) = value.parse::<u8>() {
                    out = out.with_priority(v);
                }
            }
            Some(2) => {
                if let Some(v) = short(value) {
                    out = out.with_type(v);
                }
            }
            Some(3) => {
                if let Some(v) = short(value) {
                    out = out.with_user_id(v);
                }
            }
            Some(4) => {
                if let Some(v) = short(value) {
                    out = out.with_app_id(v);
                }
            }
            Some(5) => {
                if let Some(v) = short(value) {
                    out = out.with_cluster_id(v);
                }
            }
            _ => match headers.iter_mut().find(|(k, _)| k == key) {
                Some((_, values)) => values.push(value),
                None => headers.push((key, vec![value])),
            },
        }
    }
    if !headers.is_empty() {
        let mut table = FieldTable::default();
        for (key, values) in headers {
            let Some(key) = short(key) else { continue };
            let value = match values.as_slice() {
                [one] => AMQPValue::LongString(LongString::from(*one)),
                many => AMQPValue::FieldArray(FieldArray::from(
                    many.iter().map(|v| AMQPValue::LongString(LongString::from(*v))).collect::<Vec<_>>(),
                )),
            };
            table.insert(key, value);
        }
        out = out.with_headers(table);
    }
    out
}

/// The origin stamped on messages from one AMQP connection.
pub fn origin(session: tolk_core::SessionId, client_id: &Arc<str>) -> Origin {
    Origin { protocol: tolk_core::Protocol::Amqp, session, client_id: client_id.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tolk_core::{Protocol, SessionId};

    fn origin_of(protocol: Protocol) -> Origin {
        Origin { protocol, session: SessionId(1), client_id: "c".into() }
    }

    #[test]
    fn properties_round_trip_through_the_core() {
        let mut headers = FieldTable::default();
        headers.insert("site".into(), AMQPValue::LongString("north".into()));
        headers.insert("count".into(), AMQPValue::LongInt(3));
        headers.insert(
            "tags".into(),
            AMQPValue::FieldArray(vec![AMQPValue::LongString("a".into()), AMQPValue::ShortString("b".into())].into()),
        );
        headers.insert("blob".into(), AMQPValue::ByteArray(vec![1u8, 2].into()));
        let props = BasicProperties::default()
            .with_content_type("application/json".into())
            .with_headers(headers)
            .with_delivery_mode(2)
            .with_correlation_id("c-1".into())
            .with_reply_to("amq.gen-x".into())
            .with_expiration("60000".into())
            .with_message_id("m-1".into())
            .with_timestamp(1_700_000_000)
            .with_app_id("app".into())
            .with_priority(5);
        let now = Instant::now();
        let m = message_from_publish("t".into(), Bytes::from_static(b"{}"), &props, origin_of(Protocol::Amqp), now)
            .unwrap();
        assert_eq!(m.qos, QoS::AtLeastOnce);
        assert_eq!(m.props.reply_to, Some(Destination::Queue("amq.gen-x".into())));
        assert_eq!(m.props.expires_at, Some(now + Duration::from_secs(60)));
        assert!(m.props.user.contains(&("count".into(), "3".into())));
        assert!(m.props.user.contains(&("amqp-app-id".into(), "app".into())));
        assert!(!m.props.user.iter().any(|(k, _)| k == "blob"), "byte arrays have no string form");

        let back = properties_for_delivery(&m, now);
        assert_eq!(back.content_type(), props.content_type());
        assert_eq!(back.delivery_mode(), &Some(2));
        assert_eq!(back.correlation_id(), props.correlation_id());
        assert_eq!(back.reply_to(), props.reply_to());
        assert_eq!(back.expiration(), &Some("60000".into()));
        assert_eq!(back.message_id(), props.message_id());
        assert_eq!(back.timestamp(), props.timestamp());
        assert_eq!(back.app_id(), props.app_id());
        assert_eq!(back.priority(), &Some(5));
        let h = back.headers().as_ref().unwrap().inner();
        assert_eq!(h.get("site"), Some(&AMQPValue::LongString("north".into())));
        assert_eq!(h.get("count"), Some(&AMQPValue::LongString("3".into())));
        assert!(matches!(h.get("tags"), Some(AMQPValue::FieldArray(a)) if a.as_slice().len() == 2));
        assert!(!h.contains_key("amqp-app-id"));
    }

    #[test]
    fn bad_expiration_is_a_precondition_failure() {
        let props = BasicProperties::default().with_expiration("-5".into());
        let e = message_from_publish("t".into(), Bytes::new(), &props, origin_of(Protocol::Amqp), Instant::now())
            .unwrap_err();
        assert_eq!(e.code, 406);
        assert_eq!(decimal_text(12345, 2), "123.45");
        assert_eq!(decimal_text(5, 3), "0.005");
    }

    #[test]
    fn delivery_address_restores_exchange_and_key() {
        let mut m = Message::new(internal_topic("amq.direct", "a.b/c"), "x", origin_of(Protocol::Amqp));
        assert_eq!(delivery_address(&m), ("amq.direct".to_string(), "a.b/c".to_string()));
        m.topic = internal_topic("", "q1").into();
        assert_eq!(delivery_address(&m), (String::new(), "q1".to_string()));
        let m = Message::new("sensors/room.1/temp", "x", origin_of(Protocol::Mqtt));
        assert_eq!(delivery_address(&m), ("amq.topic".to_string(), "sensors.room/1.temp".to_string()));
        let m = Message::new("$amqp/x/y", "x", origin_of(Protocol::Mqtt));
        assert_eq!(delivery_address(&m).0, "amq.topic", "only AMQP publishers create internal topics");
    }
}
