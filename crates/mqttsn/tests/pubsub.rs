//! Topic registration, publishing and subscribing in both directions (MQTT-SN 1.2 §6.5-§6.10,
//! §6.13), and MQTT-SN ↔ MQTT through the core: a core session with origin protocol MQTT stands
//! in for an MQTT client.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use mqttsn_codec::{Message, PubAck, Publish, PublishTopic, QoS, ReturnCode, SubscribeTopic, WillTopic};
use tolk_core::{CloseReason, Protocol, QoS as CoreQoS, RouterConfig};
use tolk_mqttsn::{ClientConfig, GatewayStats, MqttSnConfig, RetransmitConfig};

fn predefined_config() -> MqttSnConfig {
    MqttSnConfig {
        predefined: BTreeMap::from([(100, "pre/global".into())]),
        clients: BTreeMap::from([(
            "special".into(),
            ClientConfig { predefined: BTreeMap::from([(200, "pre/special".into())]), user: None },
        )]),
        ..support::config()
    }
}

#[tokio::test]
async fn mqttsn_publishes_at_qos_0_1_2_reach_an_mqtt_subscriber() {
    let gw = support::start(support::config()).await;
    let peer = gw.mqtt_peer();
    peer.subscribe("sensors/#");
    let mut client = gw.client().await;
    assert_eq!(client.connect("pub", 60, true).await, ReturnCode::Accepted);
    let id = client.register_ok("sensors/temp").await;
    // Registering the same name again gives the same id.
    assert_eq!(client.register_ok("sensors/temp").await, id);

    for (qos, core_qos, payload) in [
        (QoS::Zero, CoreQoS::AtMostOnce, &b"zero"[..]),
        (QoS::One, CoreQoS::AtLeastOnce, b"one"),
        (QoS::Two, CoreQoS::ExactlyOnce, b"two"),
    ] {
        let ack = client.publish(PublishTopic::Normal(id), qos, payload).await;
        if let Some(puback) = ack {
            assert_eq!(puback, PubAck { topic_id: id, msg_id: puback.msg_id, return_code: ReturnCode::Accepted });
        }
        let delivery = peer.next().await;
        assert_eq!(delivery.message.topic, "sensors/temp");
        assert_eq!(&delivery.message.payload[..], payload);
        assert_eq!(delivery.message.qos, core_qos);
        assert_eq!(delivery.message.origin.protocol, Protocol::MqttSn);
        assert_eq!(&*delivery.message.origin.client_id, "pub");
    }
    assert_eq!(gw.metrics().protocol(Protocol::MqttSn).messages_in.load(std::sync::atomic::Ordering::Relaxed), 3);
    gw.stop().await;
}

#[tokio::test]
async fn a_retransmitted_qos2_publish_is_routed_once() {
    let gw = support::start(support::config()).await;
    let peer = gw.mqtt_peer();
    peer.subscribe("q2");
    let client = gw.client().await;
    assert_eq!(client.connect("q2pub", 60, true).await, ReturnCode::Accepted);
    let publish = Publish {
        dup: false,
        qos: QoS::Two,
        retain: false,
        topic: PublishTopic::Short(*b"q2"),
        msg_id: 9,
        data: Bytes::from_static(b"once"),
    };
    client.send(&Message::Publish(publish.clone())).await;
    assert_eq!(client.recv().await, Message::PubRec { msg_id: 9 });
    client.send(&Message::Publish(Publish { dup: true, ..publish })).await;
    assert_eq!(client.recv().await, Message::PubRec { msg_id: 9 });
    client.send(&Message::PubRel { msg_id: 9 }).await;
    assert_eq!(client.recv().await, Message::PubComp { msg_id: 9 });
    assert_eq!(&peer.next().await.message.payload[..], b"once");
    peer.assert_empty();
    gw.stop().await;
}

#[tokio::test]
async fn unknown_topic_ids_are_refused_with_puback_0x02() {
    let gw = support::start(predefined_config()).await;
    let peer = gw.mqtt_peer();
    peer.subscribe("#");
    let mut client = gw.client().await;
    assert_eq!(client.connect("plain", 60, true).await, ReturnCode::Accepted);
    for (topic, qos, msg_id) in [
        (PublishTopic::Normal(4242), QoS::One, 1),
        (PublishTopic::Normal(4242), QoS::Zero, 0),
        (PublishTopic::Predefined(200), QoS::One, 2), // another client's pre-defined id
        (PublishTopic::Short(*b"a#"), QoS::Two, 3),   // not a valid topic name
    ] {
        let data = Bytes::from_static(b"x");
        client.send(&Message::Publish(Publish { dup: false, qos, retain: false, topic, msg_id, data })).await;
        let expected =
            PubAck { topic_id: support::client::topic_id_of(topic), msg_id, return_code: ReturnCode::InvalidTopicId };
        assert_eq!(client.recv().await, Message::PubAck(expected), "{topic:?} at {qos:?}");
    }
    let _ = &mut client;
    peer.assert_empty();
    assert_eq!(GatewayStats::get(&gw.stats.invalid_topic_id), 4);
    gw.stop().await;
}

#[tokio::test]
async fn predefined_and_short_topics_publish_without_registration() {
    let gw = support::start(predefined_config()).await;
    let peer = gw.mqtt_peer();
    peer.subscribe("pre/#");
    peer.subscribe("ab");
    let mut special = gw.client().await;
    assert_eq!(special.connect("special", 60, true).await, ReturnCode::Accepted);
    assert_eq!(
        special.publish(PublishTopic::Predefined(100), QoS::One, b"g").await.unwrap().return_code,
        ReturnCode::Accepted
    );
    assert_eq!(peer.next().await.message.topic, "pre/global");
    assert_eq!(
        special.publish(PublishTopic::Predefined(200), QoS::One, b"s").await.unwrap().return_code,
        ReturnCode::Accepted
    );
    assert_eq!(peer.next().await.message.topic, "pre/special");
    special.publish(PublishTopic::Short(*b"ab"), QoS::Zero, b"short").await;
    let delivery = peer.next().await;
    assert_eq!((&*delivery.message.topic, &delivery.message.payload[..]), ("ab", &b"short"[..]));
    gw.stop().await;
}

#[tokio::test]
async fn qos_minus_one_needs_no_connection() {
    let gw = support::start(predefined_config()).await;
    let peer = gw.mqtt_peer();
    peer.subscribe("#");
    let client = gw.client().await;
    let publish = |topic| {
        Message::Publish(Publish {
            dup: false,
            qos: QoS::MinusOne,
            retain: false,
            topic,
            msg_id: 0,
            data: Bytes::from_static(b"fire and forget"),
        })
    };
    client.send(&publish(PublishTopic::Predefined(100))).await;
    let delivery = peer.next().await;
    assert_eq!(delivery.message.topic, "pre/global");
    assert_eq!(delivery.message.qos, CoreQoS::AtMostOnce);
    client.send(&publish(PublishTopic::Short(*b"zz"))).await;
    assert_eq!(peer.next().await.message.topic, "zz");
    // Not allowed at QoS −1: registered ids, unknown or per-client pre-defined ids. Dropped
    // silently (QoS −1 has no answer) and counted.
    client.send(&publish(PublishTopic::Normal(1))).await;
    client.send(&publish(PublishTopic::Predefined(200))).await;
    client.send(&Message::SearchGw { radius: 0 }).await;
    assert!(matches!(client.recv().await, Message::GwInfo(_)));
    peer.assert_empty();
    assert_eq!(GatewayStats::get(&gw.stats.invalid_topic_id), 2);
    gw.stop().await;
}

#[tokio::test]
async fn subscribe_by_exact_name_delivers_with_the_suback_topic_id_at_each_qos() {
    let gw = support::start(support::config()).await;
    let peer = gw.mqtt_peer();
    let mut client = gw.client().await;
    assert_eq!(client.connect("sub", 60, true).await, ReturnCode::Accepted);
    let suback = client.subscribe(SubscribeTopic::Name("home/light".into()), QoS::Two).await;
    assert_eq!(suback.return_code, ReturnCode::Accepted);
    assert_eq!(suback.qos, QoS::Two);
    let id = suback.topic_id;
    assert_ne!(id, 0);
    for (core_qos, qos) in
        [(CoreQoS::AtMostOnce, QoS::Zero), (CoreQoS::AtLeastOnce, QoS::One), (CoreQoS::ExactlyOnce, QoS::Two)]
    {
        peer.publish("home/light", b"on", core_qos, false);
        let publish = client.recv_publish_and_ack().await;
        assert_eq!(publish.topic, PublishTopic::Normal(id));
        assert_eq!(publish.qos, qos);
        assert_eq!(&publish.data[..], b"on");
        assert!(!publish.retain && !publish.dup);
        assert_eq!(publish.msg_id == 0, qos == QoS::Zero);
    }
    let out = gw.metrics().protocol(Protocol::MqttSn).messages_out.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(out, 3);
    // The effective QoS is the lower of publisher's and subscriber's (§6.8 as in MQTT).
    let suback = client.subscribe(SubscribeTopic::Name("home/door".into()), QoS::Zero).await;
    peer.publish("home/door", b"open", CoreQoS::ExactlyOnce, false);
    let publish = client.recv_publish().await;
    assert_eq!((publish.topic, publish.qos), (PublishTopic::Normal(suback.topic_id), QoS::Zero));
    gw.stop().await;
}

#[tokio::test]
async fn wildcard_subscriptions_get_id_0_and_a_register_before_each_new_topic() {
    let gw = support::start(support::config()).await;
    let peer = gw.mqtt_peer();
    let mut client = gw.client().await;
    assert_eq!(client.connect("wild", 60, true).await, ReturnCode::Accepted);
    let suback = client.subscribe(SubscribeTopic::Name("plant/+/temp".into()), QoS::One).await;
    assert_eq!((suback.return_code, suback.topic_id), (ReturnCode::Accepted, 0));

    peer.publish("plant/a/temp", b"20", CoreQoS::AtLeastOnce, false);
    let (id, name) = client.accept_register().await;
    assert_eq!(name, "plant/a/temp");
    let publish = client.recv_publish_and_ack().await;
    assert_eq!((publish.topic, &publish.data[..]), (PublishTopic::Normal(id), &b"20"[..]));
    // Same topic again: no second REGISTER.
    peer.publish("plant/a/temp", b"21", CoreQoS::AtMostOnce, false);
    assert_eq!(client.recv_publish().await.topic, PublishTopic::Normal(id));
    // A new topic: a new REGISTER.
    peer.publish("plant/b/temp", b"22", CoreQoS::AtMostOnce, false);
    let (other, name) = client.accept_register().await;
    assert_ne!(other, id);
    assert_eq!(name, "plant/b/temp");
    assert_eq!(client.recv_publish().await.topic, PublishTopic::Normal(other));
    gw.stop().await;
}

#[tokio::test]
async fn subscribe_by_predefined_id_and_short_name_delivers_in_that_form() {
    let gw = support::start(predefined_config()).await;
    let peer = gw.mqtt_peer();
    let mut client = gw.client().await;
    assert_eq!(client.connect("special", 60, true).await, ReturnCode::Accepted);
    let suback = client.subscribe(SubscribeTopic::Predefined(200), QoS::One).await;
    assert_eq!((suback.return_code, suback.topic_id), (ReturnCode::Accepted, 200));
    let suback = client.subscribe(SubscribeTopic::Short(*b"st"), QoS::One).await;
    assert_eq!((suback.return_code, suback.topic_id), (ReturnCode::Accepted, 0));
    let refused = client.subscribe(SubscribeTopic::Predefined(999), QoS::One).await;
    assert_eq!(refused.return_code, ReturnCode::InvalidTopicId);

    peer.publish("pre/special", b"p", CoreQoS::AtLeastOnce, false);
    let publish = client.recv_publish_and_ack().await;
    assert_eq!((publish.topic, &publish.data[..]), (PublishTopic::Predefined(200), &b"p"[..]));
    peer.publish("st", b"s", CoreQoS::AtLeastOnce, false);
    let publish = client.recv_publish_and_ack().await;
    assert_eq!((publish.topic, &publish.data[..]), (PublishTopic::Short(*b"st"), &b"s"[..]));

    client.unsubscribe(SubscribeTopic::Short(*b"st")).await;
    client.unsubscribe(SubscribeTopic::Predefined(200)).await;
    peer.publish("st", b"gone", CoreQoS::AtLeastOnce, false);
    peer.publish("pre/special", b"gone", CoreQoS::AtLeastOnce, false);
    client.expect_nothing(Duration::from_millis(150)).await;
    gw.stop().await;
}

#[tokio::test]
async fn mqttsn_to_mqttsn_through_the_core_and_back_to_mqtt() {
    let gw = support::start(support::config()).await;
    let peer = gw.mqtt_peer();
    peer.subscribe("chat/#");
    let mut alice = gw.client().await;
    let mut bob = gw.client().await;
    assert_eq!(alice.connect("alice", 60, true).await, ReturnCode::Accepted);
    assert_eq!(bob.connect("bob", 60, true).await, ReturnCode::Accepted);
    let suback = bob.subscribe(SubscribeTopic::Name("chat/room".into()), QoS::One).await;
    let id = alice.register_ok("chat/room").await;
    assert_eq!(id, suback.topic_id, "topic ids are global");
    alice.publish(PublishTopic::Normal(id), QoS::One, b"hi bob").await;
    let publish = bob.recv_publish_and_ack().await;
    assert_eq!(&publish.data[..], b"hi bob");
    assert_eq!(&peer.next().await.message.payload[..], b"hi bob");
    gw.stop().await;
}

#[tokio::test]
async fn payloads_over_255_octets_use_the_three_octet_length_both_ways() {
    let gw = support::start(support::config()).await;
    let peer = gw.mqtt_peer();
    peer.subscribe("big");
    let mut client = gw.client().await;
    assert_eq!(client.connect("big", 60, true).await, ReturnCode::Accepted);
    let payload: Vec<u8> = (0..2048u32).map(|i| (i % 251) as u8).collect();
    let id = client.register_ok("big").await;
    client.publish(PublishTopic::Normal(id), QoS::One, &payload).await;
    assert_eq!(&peer.next().await.message.payload[..], &payload[..]);

    client.subscribe(SubscribeTopic::Name("big".into()), QoS::Zero).await;
    peer.publish("big", &payload, CoreQoS::AtMostOnce, false);
    let raw = client.recv_raw_within(support::ANSWER_TIMEOUT).await.unwrap();
    assert_eq!(raw[0], 0x01, "three-octet Length form (§5.2.1)");
    assert_eq!(u16::from_be_bytes([raw[1], raw[2]]) as usize, raw.len());
    assert_eq!(&raw[raw.len() - payload.len()..], &payload[..]);
    gw.stop().await;
}

#[tokio::test]
async fn retained_messages_follow_the_suback() {
    let gw = support::start(support::config()).await;
    let peer = gw.mqtt_peer();
    peer.publish("status/gw", b"online", CoreQoS::AtLeastOnce, true);
    let mut client = gw.client().await;
    assert_eq!(client.connect("late", 60, true).await, ReturnCode::Accepted);
    let suback = client.subscribe(SubscribeTopic::Name("status/#".into()), QoS::One).await;
    assert_eq!(suback.topic_id, 0);
    let (id, _) = client.accept_register().await;
    let publish = client.recv_publish_and_ack().await;
    assert_eq!((publish.topic, publish.retain, &publish.data[..]), (PublishTopic::Normal(id), true, &b"online"[..]));
    // MQTT-SN retained publish reaches a later MQTT-side subscriber via the core store.
    client
        .send(&Message::Publish(Publish {
            dup: false,
            qos: QoS::Zero,
            retain: true,
            topic: PublishTopic::Short(*b"rt"),
            msg_id: 0,
            data: Bytes::from_static(b"kept"),
        }))
        .await;
    client.send(&Message::PingReq { client_id: None }).await;
    assert_eq!(client.recv().await, Message::PingResp);
    let retained = gw.router.retained("rt");
    assert_eq!(retained.len(), 1);
    assert_eq!(&retained[0].payload[..], b"kept");
    gw.stop().await;
}

#[tokio::test]
async fn unacknowledged_publishes_are_retransmitted_then_the_client_is_lost() {
    let config = MqttSnConfig {
        retransmit: RetransmitConfig { timeout: Duration::from_millis(200), retries: 2 },
        ..support::config()
    };
    let gw = support::start(config).await;
    let peer = gw.mqtt_peer();
    peer.subscribe("wills/#");
    let mut client = gw.client().await;
    let will = WillTopic { qos: QoS::Zero, retain: false, topic: "wills/deaf".into() };
    assert_eq!(client.connect_with_will("deaf", 60, will, b"gone").await, ReturnCode::Accepted);
    let suback = client.subscribe(SubscribeTopic::Name("cmd".into()), QoS::One).await;
    peer.publish("cmd", b"do it", CoreQoS::AtLeastOnce, false);
    let first = client.recv_publish().await;
    assert!(!first.dup);
    assert_eq!(first.topic, PublishTopic::Normal(suback.topic_id));
    // §6.13: sent again with DUP after each timeout, `retries` times...
    for _ in 0..2 {
        let again = client.recv_publish().await;
        assert!(again.dup);
        assert_eq!((again.msg_id, &again.data[..]), (first.msg_id, &b"do it"[..]));
    }
    // ...then the client is considered lost: its will fires.
    assert_eq!(peer.next().await.message.topic, "wills/deaf");
    let counters = gw.metrics().protocol(Protocol::MqttSn);
    assert_eq!(counters.closed_count(CloseReason::KeepAliveTimeout), 1);
    gw.stop().await;
}

#[tokio::test]
async fn an_acknowledged_publish_after_one_retransmission_completes() {
    let gw = support::start(support::config()).await;
    let peer = gw.mqtt_peer();
    let mut client = gw.client().await;
    assert_eq!(client.connect("slow", 60, true).await, ReturnCode::Accepted);
    client.subscribe(SubscribeTopic::Name("x/y".into()), QoS::Two).await;
    peer.publish("x/y", b"1", CoreQoS::ExactlyOnce, false);
    peer.publish("x/y", b"2", CoreQoS::ExactlyOnce, false);
    let first = client.recv_publish().await;
    // One outbound exchange at a time: nothing else until this one completes.
    let again = client.recv_publish().await;
    assert!(again.dup);
    assert_eq!(&again.data[..], b"1");
    client.ack(&again).await;
    let second = client.recv_publish_and_ack().await;
    assert_eq!(&second.data[..], b"2");
    assert_ne!(second.msg_id, first.msg_id);
    gw.stop().await;
}

#[tokio::test]
async fn a_client_whose_outbox_overflows_is_disconnected_as_a_slow_consumer() {
    let router = RouterConfig { outbox_capacity: 4, ..RouterConfig::default() };
    let gw = support::start_with_router(tempfile::tempdir().unwrap(), support::config(), router).await;
    let peer = gw.mqtt_peer();
    peer.subscribe("wills/#");
    let mut client = gw.client().await;
    let will = WillTopic { qos: QoS::Zero, retain: false, topic: "wills/slow".into() };
    assert_eq!(client.connect_with_will("slow", 60, will, b"too slow").await, ReturnCode::Accepted);
    client.subscribe(SubscribeTopic::Name("flood".into()), QoS::One).await;
    // More than twice the outbox capacity: the hard limit past which at-least-once deliveries
    // overflow (the MQTT-SN gateway cannot hold a publisher back, see docs/translation.md).
    for i in 0..16u8 {
        peer.publish("flood", &[i], CoreQoS::AtLeastOnce, false);
    }
    // Whatever got out before, the gateway ends with a DISCONNECT.
    loop {
        match client.recv().await {
            Message::Publish(_) => {}
            Message::Disconnect { duration: None } => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(&peer.next().await.message.payload[..], b"too slow");
    let counters = gw.metrics().protocol(Protocol::MqttSn);
    assert_eq!(counters.closed_count(CloseReason::SlowConsumer), 1);
    gw.stop().await;
}
