//! MQTT-SN ↔ core translation, and only that: QoS levels, the three kinds of topic reference
//! (registered id, pre-defined id, short name) to and from canonical topic names, how a
//! subscription was made (kept in the core subscription's tag), and building core messages.
//!
//! Canonical topics are MQTT-style, and MQTT-SN topic names are MQTT topic names (§5.3.12), so
//! names map one to one; a short name is its two characters as a topic.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use mqttsn_codec::{PublishTopic, QoS};
use tolk_core::{Message, Origin, Protocol, QoS as CoreQoS, SessionId, topic};

/// The pre-defined ids [`inbound_topic`] and [`outbound_topic`] read; re-exported for the
/// translation benchmarks.
pub use crate::predefined::PredefinedTopics;
/// The registered ids [`inbound_topic`] and [`outbound_topic`] read and assign; re-exported for
/// the translation benchmarks.
pub use crate::registry::TopicRegistry;

/// Core guarantee of an MQTT-SN QoS. QoS −1 is "at most once" once it has reached the gateway.
pub(crate) fn core_qos(qos: QoS) -> CoreQoS {
    match qos {
        QoS::MinusOne | QoS::Zero => CoreQoS::AtMostOnce,
        QoS::One => CoreQoS::AtLeastOnce,
        QoS::Two => CoreQoS::ExactlyOnce,
    }
}

/// MQTT-SN QoS for a delivery at a core guarantee.
/// Public for the translation benchmarks (`benches/benches/translation.rs`).
pub fn sn_qos(qos: CoreQoS) -> QoS {
    match qos {
        CoreQoS::AtMostOnce => QoS::Zero,
        CoreQoS::AtLeastOnce => QoS::One,
        CoreQoS::ExactlyOnce => QoS::Two,
    }
}

/// The canonical topic of a short topic name, if it is UTF-8 and a valid name.
pub(crate) fn short_topic(name: [u8; 2]) -> Option<String> {
    let text = std::str::from_utf8(&name).ok()?;
    topic::validate_name(text).ok()?;
    Some(text.to_owned())
}

/// The canonical filter of a short topic name in SUBSCRIBE/UNSUBSCRIBE (wildcards allowed).
pub(crate) fn short_filter(name: [u8; 2]) -> Option<String> {
    let text = std::str::from_utf8(&name).ok()?;
    topic::validate_filter(text).ok()?;
    Some(text.to_owned())
}

/// The canonical topic a PUBLISH names, or `None` for an unknown id / invalid short name (the
/// gateway answers PUBACK 0x02 "invalid topic id").
/// Public for the translation benchmarks (`benches/benches/translation.rs`).
pub fn inbound_topic(topic: PublishTopic, predefined: &PredefinedTopics, registry: &TopicRegistry) -> Option<Arc<str>> {
    match topic {
        PublishTopic::Normal(id) => registry.name(id).cloned(),
        PublishTopic::Predefined(id) => predefined.name(id).cloned(),
        PublishTopic::Short(name) => short_topic(name).map(Arc::from),
    }
}

/// The TopicId octets a PUBACK echoes for a PUBLISH (§5.4.13): the id, or the short name read
/// big-endian.
pub(crate) fn topic_id_field(topic: PublishTopic) -> u16 {
    match topic {
        PublishTopic::Normal(id) | PublishTopic::Predefined(id) => id,
        PublishTopic::Short(name) => u16::from_be_bytes(name),
    }
}

/// How a client subscribed, which decides how matching messages are addressed to it. Stored in
/// the core subscription's tag, so a delivery carries it back.
/// Public for the translation benchmarks (`benches/benches/translation.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionForm {
    /// By topic name (with or without wildcards): deliveries use registered ids, REGISTERed to
    /// the client first when it does not know them (§6.10).
    Name,
    /// By pre-defined id: deliveries use that id.
    Predefined(u16),
    /// By short name: deliveries use the short name.
    Short([u8; 2]),
}

const TAG_KIND_SHIFT: u32 = 32;
const TAG_PREDEFINED: u64 = 1 << TAG_KIND_SHIFT;
const TAG_SHORT: u64 = 2 << TAG_KIND_SHIFT;

impl SubscriptionForm {
    /// The core subscription tag. Name subscriptions use tag 0, so the filter alone identifies
    /// them; the other forms get their own tag so that "ab" by short name and "ab" by name are
    /// two subscriptions that each deliver in their own form.
    pub(crate) fn tag(self) -> u64 {
        match self {
            SubscriptionForm::Name => 0,
            SubscriptionForm::Predefined(id) => TAG_PREDEFINED | u64::from(id),
            SubscriptionForm::Short(name) => TAG_SHORT | u64::from(u16::from_be_bytes(name)),
        }
    }

    /// Reads a tag back.
    pub(crate) fn from_tag(tag: u64) -> SubscriptionForm {
        let low = (tag & 0xFFFF) as u16;
        match tag >> TAG_KIND_SHIFT {
            1 => SubscriptionForm::Predefined(low),
            2 => SubscriptionForm::Short(low.to_be_bytes()),
            _ => SubscriptionForm::Name,
        }
    }
}

/// How a delivery's topic can be put in a PUBLISH to one client.
/// Public for the translation benchmarks (`benches/benches/translation.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboundTopic {
    /// Ready to send.
    Ready(PublishTopic),
    /// Needs a REGISTER of `name` as `id` first; the client does not know the id yet (§6.10).
    Register {
        /// The registered id.
        id: u16,
        /// The topic name.
        name: Arc<str>,
    },
    /// The registry is full and the topic has neither a pre-defined id nor a short form.
    Unmappable,
}

/// Chooses how to address `topic` to a client that subscribed in `form` and knows the ids for
/// which `knows` answers true.
/// Public for the translation benchmarks (`benches/benches/translation.rs`).
pub fn outbound_topic(
    topic: &str,
    form: SubscriptionForm,
    predefined: &PredefinedTopics,
    registry: &mut TopicRegistry,
    knows: impl Fn(u16) -> bool,
) -> OutboundTopic {
    match form {
        SubscriptionForm::Predefined(id) if predefined.name(id).is_some_and(|n| &**n == topic) => {
            return OutboundTopic::Ready(PublishTopic::Predefined(id));
        }
        SubscriptionForm::Short(name) if topic.as_bytes() == name => {
            return OutboundTopic::Ready(PublishTopic::Short(name));
        }
        _ => {}
    }
    match registry.get_or_insert(topic) {
        Ok(id) if knows(id) => OutboundTopic::Ready(PublishTopic::Normal(id)),
        Ok(id) => OutboundTopic::Register { id, name: registry.name(id).cloned().unwrap_or_else(|| topic.into()) },
        Err(_) => {
            if let Some(id) = predefined.id(topic) {
                OutboundTopic::Ready(PublishTopic::Predefined(id))
            } else if let Ok(name) = <[u8; 2]>::try_from(topic.as_bytes()) {
                OutboundTopic::Ready(PublishTopic::Short(name))
            } else {
                OutboundTopic::Unmappable
            }
        }
    }
}

/// A core message for a PUBLISH (or a will) accepted from a client.
/// Public for the translation benchmarks (`benches/benches/translation.rs`).
pub fn core_message(
    topic: &str,
    payload: Bytes,
    qos: QoS,
    retain: bool,
    session: SessionId,
    client_id: &Arc<str>,
    received_at: Instant,
) -> Message {
    let origin = Origin { protocol: Protocol::MqttSn, session, client_id: client_id.clone() };
    let mut message = Message::received(topic, payload, origin, received_at);
    message.qos = core_qos(qos);
    message.retain = retain;
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip() {
        for form in [
            SubscriptionForm::Name,
            SubscriptionForm::Predefined(0),
            SubscriptionForm::Predefined(65534),
            SubscriptionForm::Short(*b"ab"),
            SubscriptionForm::Short([0, 0]),
        ] {
            assert_eq!(SubscriptionForm::from_tag(form.tag()), form);
        }
    }

    #[test]
    fn qos_levels_map_both_ways() {
        assert_eq!(core_qos(QoS::MinusOne), CoreQoS::AtMostOnce);
        for qos in [QoS::Zero, QoS::One, QoS::Two] {
            assert_eq!(sn_qos(core_qos(qos)), qos);
        }
    }

    #[test]
    fn short_names_must_be_valid_topics() {
        assert_eq!(short_topic(*b"ab").as_deref(), Some("ab"));
        assert_eq!(short_topic(*b"a+"), None);
        assert_eq!(short_topic([0xC3, 0x28]), None);
        assert_eq!(short_topic([b'a', 0]), None);
        assert_eq!(short_filter(*b"+/").as_deref(), Some("+/"));
    }

    #[test]
    fn outbound_topics_follow_the_subscription_form() {
        let predefined = PredefinedTopics::default();
        let mut registry = TopicRegistry::new(1);
        let form = SubscriptionForm::Short(*b"ab");
        assert_eq!(
            outbound_topic("ab", form, &predefined, &mut registry, |_| false),
            OutboundTopic::Ready(PublishTopic::Short(*b"ab"))
        );
        assert_eq!(
            outbound_topic("a/b", SubscriptionForm::Name, &predefined, &mut registry, |_| false),
            OutboundTopic::Register { id: 1, name: "a/b".into() }
        );
        assert_eq!(
            outbound_topic("a/b", SubscriptionForm::Name, &predefined, &mut registry, |id| id == 1),
            OutboundTopic::Ready(PublishTopic::Normal(1))
        );
        // Registry full: short form as a fallback, else unmappable.
        assert_eq!(
            outbound_topic("cd", SubscriptionForm::Name, &predefined, &mut registry, |_| true),
            OutboundTopic::Ready(PublishTopic::Short(*b"cd"))
        );
        assert_eq!(
            outbound_topic("c/d", SubscriptionForm::Name, &predefined, &mut registry, |_| true),
            OutboundTopic::Unmappable
        );
    }
}
