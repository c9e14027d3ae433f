//! amq.topic is the bridge to the common topic space: MQTT-style publishers reach AMQP queues
//! bound with wildcard keys (topic restored exactly, dots in levels included), and AMQP
//! publishers reach MQTT-style subscribers.

mod common;

use std::sync::Arc;

use common::{Broker, within};
use futures_util::StreamExt;
use lapin::options::*;
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, ErrorKind};
use tolk_amqp::topic_key;
use tolk_core::{Message, Origin, Protocol, QoS, SubscriptionOptions};

fn s(v: &str) -> ShortString {
    v.into()
}

#[tokio::test]
async fn mqtt_publisher_reaches_amqp_queues_bound_with_wildcards() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    for (queue, key) in [("any-room", "sensors.*.temp"), ("room-1", "sensors.room/1.#"), ("other", "sensors.room/2.#")]
    {
        within(ch.queue_declare(s(queue), QueueDeclareOptions::default(), FieldTable::default())).await.unwrap();
        within(ch.queue_bind(s(queue), s("amq.topic"), s(key), QueueBindOptions::default(), FieldTable::default()))
            .await
            .unwrap();
    }

    let mqtt = broker.router.open_session(Protocol::Mqtt);
    let origin = Origin { protocol: Protocol::Mqtt, session: mqtt.id(), client_id: "sensor-1".into() };
    let mut message = Message::new("sensors/room.1/temp", "21.5", origin);
    message.qos = QoS::AtLeastOnce;
    message.props.content_type = Some("text/plain".into());
    message.props.user.push(("unit".into(), "C".into()));
    let outcome = mqtt.publish(Arc::new(message));
    assert_eq!(outcome.delivered, 2);

    let mut consumer =
        within(ch.basic_consume(s("any-room"), s(""), BasicConsumeOptions::default(), FieldTable::default()))
            .await
            .unwrap();
    let d = within(consumer.next()).await.unwrap().unwrap();
    assert_eq!(
        (d.exchange.as_str(), d.routing_key.as_str(), d.data.as_slice()),
        ("amq.topic", "sensors.room/1.temp", &b"21.5"[..])
    );
    assert_eq!(
        topic_key::routing_key_to_topic(d.routing_key.as_str()).unwrap(),
        "sensors/room.1/temp",
        "topic restored exactly"
    );
    assert_eq!(d.properties.delivery_mode(), &Some(2));
    assert_eq!(d.properties.content_type(), &Some(s("text/plain")));
    let unit = d.properties.headers().as_ref().unwrap().inner().get("unit").cloned();
    assert_eq!(unit, Some(lapin::types::AMQPValue::LongString("C".into())));
    within(d.acker.ack(BasicAckOptions::default())).await.unwrap();

    let got = within(ch.basic_get(s("room-1"), BasicGetOptions { no_ack: true }))
        .await
        .unwrap()
        .expect("room-1 bound with #");
    assert_eq!(got.delivery.routing_key.as_str(), "sensors.room/1.temp");
    assert!(within(ch.basic_get(s("other"), BasicGetOptions { no_ack: true })).await.unwrap().is_none());

    // Unbinding removes the router subscription.
    within(ch.queue_unbind(s("room-1"), s("amq.topic"), s("sensors.room/1.#"), FieldTable::default())).await.unwrap();
    let origin = Origin { protocol: Protocol::Mqtt, session: mqtt.id(), client_id: "sensor-1".into() };
    assert_eq!(mqtt.publish(Arc::new(Message::new("sensors/room.1/temp", "22", origin))).delivered, 1);
    broker.stop().await;
}

#[tokio::test]
async fn amqp_publisher_reaches_mqtt_subscribers_through_amq_topic() {
    let broker = Broker::start().await;
    let mqtt = broker.router.open_session(Protocol::Mqtt);
    mqtt.subscribe("sensors/+/temp", 0, SubscriptionOptions::default()).unwrap();
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    within(ch.confirm_select(ConfirmSelectOptions::default())).await.unwrap();
    let props = BasicProperties::default().with_delivery_mode(2).with_correlation_id(s("c1"));
    let confirm = within(ch.basic_publish(
        s("amq.topic"),
        s("sensors.room/1.temp"),
        BasicPublishOptions { mandatory: true, ..Default::default() },
        b"20",
        props,
    ))
    .await
    .unwrap();
    let confirm = within(confirm).await.unwrap();
    assert!(confirm.is_ack() && confirm.take_message().is_none(), "routed to the MQTT subscriber: not returned");
    let mut got = Vec::new();
    within(mqtt.receiver().drain(&mut got, 10)).await.unwrap();
    let m = &got[0].message;
    assert_eq!((&*m.topic, &m.payload[..], m.qos), ("sensors/room.1/temp", &b"20"[..], QoS::AtLeastOnce));
    assert_eq!(m.origin.protocol, Protocol::Amqp);
    assert_eq!(m.props.correlation_data.as_deref(), Some(&b"c1"[..]));

    // No subscriber on the topic: a mandatory publish comes back.
    let confirm = within(ch.basic_publish(
        s("amq.topic"),
        s("nobody.home"),
        BasicPublishOptions { mandatory: true, ..Default::default() },
        b"x",
        BasicProperties::default(),
    ))
    .await
    .unwrap();
    assert_eq!(within(confirm).await.unwrap().take_message().map(|m| m.reply_code), Some(312));

    // A key with an MQTT wildcard character has no topic: 406, channel closed.
    let _ = within(ch.basic_publish(
        s("amq.topic"),
        s("a.+.b"),
        BasicPublishOptions::default(),
        b"x",
        BasicProperties::default(),
    ))
    .await;
    let e =
        within(ch.queue_declare(s("after"), QueueDeclareOptions::default(), FieldTable::default())).await.unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::ProtocolError(a) if a.get_id() == 406)
            || matches!(e.kind(), ErrorKind::InvalidChannelState(..)),
        "{e}"
    );
    broker.stop().await;
}

#[tokio::test]
async fn exchange_to_amq_topic_binding_publishes_into_the_topic_space() {
    let broker = Broker::start().await;
    let mqtt = broker.router.open_session(Protocol::Mqtt);
    mqtt.subscribe("alerts/#", 0, SubscriptionOptions::default()).unwrap();
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    within(ch.exchange_bind(
        s("amq.topic"),
        s("amq.fanout"),
        s(""),
        ExchangeBindOptions::default(),
        FieldTable::default(),
    ))
    .await
    .unwrap();
    within(ch.basic_publish(
        s("amq.fanout"),
        s("alerts.fire"),
        BasicPublishOptions::default(),
        b"!",
        BasicProperties::default(),
    ))
    .await
    .unwrap();
    let mut got = Vec::new();
    within(mqtt.receiver().drain(&mut got, 10)).await.unwrap();
    assert_eq!(got[0].message.topic, "alerts/fire");
    broker.stop().await;
}
