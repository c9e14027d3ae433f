//! PUBLISH (and will) ↔ core [`Message`]: the MQTT side of the property mapping lives here and
//! only here, so that every other protocol sees MQTT 5 metadata through `Properties`.
//!
//! | MQTT 5                     | core `Properties`                              |
//! |----------------------------|------------------------------------------------|
//! | payload format indicator 1 | `payload_utf8 = Some(true)`                    |
//! | content type               | `content_type`                                 |
//! | response topic             | `reply_to = Destination::Topic`                |
//! | correlation data           | `correlation_data`                             |
//! | message expiry interval    | `expires_at` (remaining interval on delivery)  |
//! | user properties            | `user` (order and repeats kept)                |
//!
//! A `reply_to` naming a core queue has no MQTT form and is left out; `message_id` and
//! `timestamp` (AMQP) are not carried either. 3.1.1 carries no properties at all.

use std::num::{NonZeroU16, NonZeroU32};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rmqtt_codec::types::{Publish, QoS as WireQoS};
use rmqtt_codec::v5::{LastWill, PublishProperties};
use tolk_core::{ByteString, Delivery, Destination, Message, Origin, Properties, QoS};

use mqtt_codec::{PublishOut, Version};

/// Wire QoS → core QoS.
pub fn qos_in(qos: WireQoS) -> QoS {
    match qos {
        WireQoS::AtMostOnce => QoS::AtMostOnce,
        WireQoS::AtLeastOnce => QoS::AtLeastOnce,
        WireQoS::ExactlyOnce => QoS::ExactlyOnce,
    }
}

/// Core QoS → wire QoS.
pub fn qos_out(qos: QoS) -> WireQoS {
    match qos {
        QoS::AtMostOnce => WireQoS::AtMostOnce,
        QoS::AtLeastOnce => WireQoS::AtLeastOnce,
        QoS::ExactlyOnce => WireQoS::ExactlyOnce,
    }
}

/// Builds the core message for an accepted PUBLISH, moving its payload out of the packet.
/// `topic` is the resolved topic (after a topic alias), already validated.
pub fn inbound(publish: &mut Publish, topic: ByteString, origin: Origin, received_at: Instant) -> Message {
    let mut message = Message::received(topic, std::mem::take(&mut publish.payload), origin, received_at);
    message.qos = qos_in(publish.qos);
    message.retain = publish.retain;
    if let Some(p) = &publish.properties {
        message.props = properties(PropsIn {
            utf8: p.is_utf8_payload,
            content_type: p.content_type.as_deref(),
            response_topic: p.response_topic.as_deref(),
            correlation: p.correlation_data.as_ref(),
            expiry: p.message_expiry_interval,
            user: &p.user_properties,
            received_at,
        });
    }
    message
}

/// Builds the message a will becomes (MQTT 5 §3.1.3.2: will properties are those of a PUBLISH).
pub fn will_message(will: &LastWill, origin: Origin, now: Instant) -> Message {
    let mut message = Message::received(String::from(&*will.topic), will.message.clone(), origin, now);
    message.qos = qos_in(will.qos);
    message.retain = will.retain;
    message.props = properties(PropsIn {
        utf8: will.is_utf8_payload.unwrap_or(false),
        content_type: will.content_type.as_deref(),
        response_topic: will.response_topic.as_deref(),
        correlation: will.correlation_data.as_ref(),
        expiry: will.message_expiry_interval,
        user: &will.user_properties,
        received_at: now,
    });
    message
}

struct PropsIn<'a> {
    utf8: bool,
    content_type: Option<&'a str>,
    response_topic: Option<&'a str>,
    correlation: Option<&'a Bytes>,
    expiry: Option<NonZeroU32>,
    user: &'a [rmqtt_codec::v5::UserProperty],
    received_at: Instant,
}

fn properties(p: PropsIn<'_>) -> Properties {
    Properties {
        content_type: p.content_type.map(str::to_owned),
        payload_utf8: p.utf8.then_some(true),
        correlation_data: p.correlation.cloned(),
        reply_to: p.response_topic.map(|t| Destination::Topic(t.to_owned())),
        expires_at: p.expiry.map(|secs| p.received_at + Duration::from_secs(u64::from(secs.get()))),
        user: p.user.iter().map(|(k, v)| (String::from(&**k), String::from(&**v))).collect(),
        ..Properties::default()
    }
}

/// Builds the PUBLISH for a delivery, borrowing its topic and payload, or `None` when the
/// message expired at `now` (MQTT-3.3.2-5). The topic alias is the caller's business (it
/// depends on the connection, not the message).
pub fn outbound(
    delivery: &Delivery,
    version: Version,
    packet_id: Option<NonZeroU16>,
    dup: bool,
    now: Instant,
) -> Option<PublishOut<'_>> {
    let message = &delivery.message;
    let remaining = match message.props.expires_at {
        Some(at) if at <= now => return None,
        Some(at) => Some(at - now),
        None => None,
    };
    let properties = match version {
        Version::V3 => None,
        Version::V5 => Some(publish_properties(message, delivery.subscription_id, remaining)),
    };
    Some(PublishOut {
        dup,
        retain: delivery.retain,
        qos: qos_out(delivery.qos),
        topic: &message.topic,
        packet_id,
        payload: &message.payload,
        properties,
    })
}

/// `interval` in whole seconds for MQTT 5's four-byte intervals (session and message expiry):
/// a fraction is rounded up, so that only zero is zero; at most `u32::MAX`.
pub(crate) fn whole_seconds(interval: Duration) -> u32 {
    let secs = interval.as_secs().saturating_add(u64::from(interval.subsec_nanos() > 0));
    u32::try_from(secs).unwrap_or(u32::MAX)
}

fn publish_properties(
    message: &Message,
    subscription_id: Option<u32>,
    remaining: Option<Duration>,
) -> PublishProperties {
    let props = &message.props;
    PublishProperties {
        topic_alias: None,
        correlation_data: props.correlation_data.clone(),
        // Rounded up, so that a message with 0.4 s left is not sent as "expiry 0" (= never).
        message_expiry_interval: remaining.map(whole_seconds).and_then(NonZeroU32::new),
        content_type: props.content_type.as_deref().map(Into::into),
        user_properties: props.user.iter().map(|(k, v)| (k.as_str().into(), v.as_str().into())).collect(),
        is_utf8_payload: props.payload_utf8 == Some(true),
        response_topic: match &props.reply_to {
            Some(Destination::Topic(t)) => Some(t.as_str().into()),
            Some(Destination::Queue(_)) | None => None,
        },
        subscription_ids: subscription_id.and_then(NonZeroU32::new).into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tolk_core::{Protocol, SessionId};

    fn origin() -> Origin {
        Origin { protocol: Protocol::Mqtt, session: SessionId(1), client_id: "c".into() }
    }

    #[test]
    fn properties_survive_a_round_trip_with_expiry_counting_down() {
        let t0 = Instant::now();
        let mut publish = Publish {
            dup: false,
            retain: true,
            qos: WireQoS::AtLeastOnce,
            topic: "a/b".into(),
            packet_id: NonZeroU16::new(3),
            payload: Bytes::from_static(b"{}"),
            properties: Some(PublishProperties {
                topic_alias: None,
                correlation_data: Some(Bytes::from_static(b"\x00\x01")),
                message_expiry_interval: NonZeroU32::new(10),
                content_type: Some("application/json".into()),
                user_properties: vec![("k".into(), "v1".into()), ("k".into(), "v2".into())],
                is_utf8_payload: true,
                response_topic: Some("reply/here".into()),
                subscription_ids: Vec::new(),
            }),
        };
        let message = inbound(&mut publish, "a/b".into(), origin(), t0);
        assert_eq!(message.props.reply_to, Some(Destination::Topic("reply/here".into())));
        assert_eq!(message.props.user.len(), 2);
        let delivery =
            Delivery { subscription_id: Some(9), ..Delivery::new(std::sync::Arc::new(message), QoS::AtLeastOnce, t0) };
        let out =
            outbound(&delivery, Version::V5, NonZeroU16::new(1), false, t0 + Duration::from_millis(2500)).unwrap();
        let p = out.properties.unwrap();
        assert_eq!(p.message_expiry_interval, NonZeroU32::new(8), "7.5 s left rounds up to 8");
        assert_eq!(p.subscription_ids, vec![NonZeroU32::new(9).unwrap()]);
        assert_eq!(p.content_type.as_deref(), Some("application/json"));
        assert!(p.is_utf8_payload);
        assert!(outbound(&delivery, Version::V5, None, false, t0 + Duration::from_secs(10)).is_none(), "expired");
        assert!(outbound(&delivery, Version::V3, None, false, t0).unwrap().properties.is_none());
    }
}
