//! Bad input over raw sockets: each case closes only the offending connection, with the
//! protocol's own answer where it has one (MQTT 5 DISCONNECT reason codes, CONNACK 0x01 for an
//! unknown protocol level, nothing for 3.1.1), while a bystander client keeps working.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::v4::{self, QoS};
use common::{Broker, MqttConfigExt, Raw, config, eventually, pid, start, start_with};
use rmqtt_codec::types::{Publish as RawPublish, QoS as RawQoS};
use rmqtt_codec::v3;
use rmqtt_codec::v5::{self as r5, DisconnectReasonCode as Dis};
use tolk_core::{CloseReason, Protocol, RouterConfig};

async fn bystander(broker: &Broker) -> v4::Client {
    let mut c = v4::connect(v4::options(broker.port, "bystander")).await;
    c.subscribe("alive", QoS::AtLeastOnce).await;
    c
}

/// The bystander still gets its own messages through the broker.
async fn still_alive(c: &mut v4::Client) {
    c.client.publish("alive", QoS::AtLeastOnce, false, "yes").await.unwrap();
    assert_eq!(&c.publish().await.payload[..], b"yes");
}

fn publish(topic: &str, qos: RawQoS, id: u16) -> RawPublish {
    RawPublish {
        dup: false,
        retain: false,
        qos,
        topic: topic.into(),
        packet_id: std::num::NonZeroU16::new(id),
        payload: Bytes::from_static(b"x"),
        properties: None,
    }
}

async fn expect_disconnect(raw: &mut Raw, code: Dis) {
    match raw.recv5().await {
        Some(r5::Packet::Disconnect(d)) => assert_eq!(d.reason_code, code),
        other => panic!("expected DISCONNECT {code:?}, got {other:?}"),
    }
    raw.expect_closed().await;
}

#[tokio::test]
async fn garbage_bytes_close_silently() {
    let broker = start(config()).await;
    let mut by = bystander(&broker).await;
    let mut raw = Raw::connect(broker.port).await;
    raw.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    raw.expect_closed().await;
    let mut raw = Raw::connect(broker.port).await;
    raw.send(&[0x10, 0xff, 0xff, 0xff, 0xff, 0x7f]).await; // five-byte remaining length
    raw.expect_closed().await;
    still_alive(&mut by).await;
    assert!(broker.metrics().protocol(Protocol::Mqtt).closed_count(CloseReason::ProtocolError) >= 2);
    broker.stop().await;
}

#[tokio::test]
async fn invalid_protocol_name_closes_and_unknown_level_gets_connack_0x01() {
    let broker = start(config()).await;
    let mut by = bystander(&broker).await;
    let mut raw = Raw::connect(broker.port).await;
    raw.send(b"\x10\x0e\x00\x04MQXX\x04\x02\x00\x3c\x00\x02ab").await;
    raw.expect_closed().await;
    let mut raw = Raw::connect(broker.port).await;
    raw.send(b"\x10\x0e\x00\x04MQTT\x07\x02\x00\x3c\x00\x02ab").await;
    assert_eq!(raw.fill_until_closed().await, b"\x20\x02\x00\x01", "MQTT-3.1.2-2");
    still_alive(&mut by).await;
    broker.stop().await;
}

#[tokio::test]
async fn publish_before_connect_closes() {
    let broker = start(config()).await;
    let mut by = bystander(&broker).await;
    let mut raw = Raw::connect(broker.port).await;
    raw.send(b"\x30\x05\x00\x01ahi").await;
    raw.expect_closed().await;
    still_alive(&mut by).await;
    broker.stop().await;
}

#[tokio::test]
async fn oversize_packet_gets_0x95_in_v5_and_a_plain_close_in_v3() {
    let broker = start(MqttConfigExt::with(|c| c.max_packet_size_bytes = 1000)).await;
    let mut by = bystander(&broker).await;
    let (mut raw, _) = Raw::handshake5(broker.port, Raw::connect5("big5")).await;
    raw.send(&[0x30, 0xff, 0xff, 0xff, 0x7f]).await; // announces 256 MiB, sends nothing more
    expect_disconnect(&mut raw, Dis::PacketTooLarge).await;
    let (mut raw, _) = Raw::handshake3(broker.port, "big3", true, 30).await;
    raw.send(&[0x30, 0xe9, 0x07]).await; // 1001 bytes announced
    raw.expect_closed().await;
    // A malformed remaining length is 0x81.
    let (mut raw, _) = Raw::handshake5(broker.port, Raw::connect5("bad5")).await;
    raw.send(&[0x30, 0x80, 0x80, 0x80, 0x80, 0x01]).await;
    expect_disconnect(&mut raw, Dis::MalformedPacket).await;
    still_alive(&mut by).await;
    // Counted once the connection's task ends, after lingering for the client to close.
    eventually("two closes for a limit", || {
        broker.metrics().protocol(Protocol::Mqtt).closed_count(CloseReason::LimitExceeded) >= 2
    })
    .await;
    broker.stop().await;
}

#[tokio::test]
async fn publish_to_a_wildcard_topic_gets_0x90_in_v5_and_a_close_in_v3() {
    let broker = start(config()).await;
    let mut by = bystander(&broker).await;
    let (mut raw, _) = Raw::handshake5(broker.port, Raw::connect5("wild5")).await;
    let mut p = publish("a/#", RawQoS::AtMostOnce, 0);
    p.properties = Some(Default::default());
    raw.send5(r5::Packet::Publish(Box::new(p))).await;
    expect_disconnect(&mut raw, Dis::TopicNameInvalid).await;
    let (mut raw, _) = Raw::handshake3(broker.port, "wild3", true, 30).await;
    raw.send3(v3::Packet::Publish(Box::new(publish("a/+/b", RawQoS::AtLeastOnce, 1)))).await;
    raw.expect_closed().await;
    still_alive(&mut by).await;
    broker.stop().await;
}

#[tokio::test]
async fn second_connect_gets_0x82_in_v5_and_a_close_in_v3() {
    let broker = start(config()).await;
    let mut by = bystander(&broker).await;
    let (mut raw, _) = Raw::handshake5(broker.port, Raw::connect5("twice5")).await;
    raw.send5(r5::Packet::Connect(Box::new(Raw::connect5("twice5")))).await;
    expect_disconnect(&mut raw, Dis::ProtocolError).await;
    let (mut raw, _) = Raw::handshake3(broker.port, "twice3", true, 30).await;
    raw.send(b"\x10\x0e\x00\x04MQTT\x04\x02\x00\x3c\x00\x02ab").await;
    raw.expect_closed().await;
    still_alive(&mut by).await;
    broker.stop().await;
}

#[tokio::test]
async fn malformed_packets_get_0x81() {
    let broker = start(config()).await;
    let mut by = bystander(&broker).await;
    let (mut raw, _) = Raw::handshake5(broker.port, Raw::connect5("qos3")).await;
    raw.send(b"\x36\x06\x00\x01a\x00\x01\x00").await; // PUBLISH with QoS 3
    expect_disconnect(&mut raw, Dis::MalformedPacket).await;
    let (mut raw, _) = Raw::handshake5(broker.port, Raw::connect5("flags")).await;
    raw.send(b"\x60\x02\x00\x01").await; // PUBREL with reserved flags 0000 (must be 0010)
    expect_disconnect(&mut raw, Dis::MalformedPacket).await;
    still_alive(&mut by).await;
    broker.stop().await;
}

#[tokio::test]
async fn exceeding_our_receive_maximum_gets_0x93() {
    let broker = start(MqttConfigExt::with(|c| c.receive_maximum = 2)).await;
    let mut by = bystander(&broker).await;
    let (mut raw, ack) = Raw::handshake5(broker.port, Raw::connect5("greedy")).await;
    assert_eq!(ack.receive_max.get(), 2);
    for id in 1..=3 {
        let mut p = publish("r", RawQoS::ExactlyOnce, id);
        p.properties = Some(Default::default());
        raw.send5(r5::Packet::Publish(Box::new(p))).await;
    }
    for _ in 0..2 {
        assert!(matches!(raw.recv5().await, Some(r5::Packet::PublishReceived(_))));
    }
    expect_disconnect(&mut raw, Dis::ReceiveMaximumExceeded).await;
    still_alive(&mut by).await;
    broker.stop().await;
}

#[tokio::test]
async fn a_client_that_never_acknowledges_is_closed_with_0x97() {
    // The publisher is held back for the grace, then the stuck subscriber is dropped.
    let router =
        RouterConfig { outbox_capacity: 4, slow_consumer_grace: Duration::from_millis(200), ..RouterConfig::default() };
    let broker = start_with(MqttConfigExt::with(|c| c.max_inflight = 1), router).await;
    let mut by = bystander(&broker).await;
    let (mut raw, _) = Raw::handshake5(broker.port, Raw::connect5("stuck")).await;
    raw.send5(r5::Packet::Subscribe(r5::Subscribe {
        packet_id: pid(1),
        id: None,
        user_properties: Vec::new(),
        topic_filters: vec![(
            "flood".into(),
            r5::SubscriptionOptions { qos: RawQoS::AtLeastOnce, ..Default::default() },
        )],
    }))
    .await;
    assert!(matches!(raw.recv5().await, Some(r5::Packet::SubscribeAck(_))));
    let publisher = v4::connect(v4::options(broker.port, "flooder")).await;
    for n in 0..10u8 {
        publisher.client.publish("flood", QoS::AtLeastOnce, false, vec![n]).await.unwrap();
    }
    assert!(matches!(raw.recv5().await, Some(r5::Packet::Publish(_))), "one in flight");
    expect_disconnect(&mut raw, Dis::QuotaExceeded).await;
    still_alive(&mut by).await;
    eventually("a close as a slow consumer", || {
        broker.metrics().protocol(Protocol::Mqtt).closed_count(CloseReason::SlowConsumer) == 1
    })
    .await;
    broker.stop().await;
}

#[tokio::test]
async fn subscribe_refusals_carry_reason_codes() {
    let broker = start(MqttConfigExt::with(|c| c.max_subscriptions_per_session = 1)).await;
    let (mut raw, _) = Raw::handshake5(broker.port, Raw::connect5("subs")).await;
    let opts = r5::SubscriptionOptions { qos: RawQoS::AtLeastOnce, ..Default::default() };
    raw.send5(r5::Packet::Subscribe(r5::Subscribe {
        packet_id: pid(1),
        id: None,
        user_properties: Vec::new(),
        topic_filters: vec![("ok/+".into(), opts), ("bad/#/x".into(), opts), ("second".into(), opts)],
    }))
    .await;
    let Some(r5::Packet::SubscribeAck(ack)) = raw.recv5().await else { panic!() };
    assert_eq!(
        ack.status,
        vec![
            r5::SubscribeAckReason::GrantedQos1,
            r5::SubscribeAckReason::TopicFilterInvalid,
            r5::SubscribeAckReason::QuotaExceeded
        ]
    );
    let (mut raw, _) = Raw::handshake3(broker.port, "subs3", true, 30).await;
    raw.send3(v3::Packet::Subscribe { packet_id: pid(1), topic_filters: vec![("bad#".into(), v3::QoS::AtMostOnce)] })
        .await;
    let Some(v3::Packet::SubscribeAck { status, .. }) = raw.recv3().await else { panic!() };
    assert_eq!(status, vec![v3::SubscribeReturnCode::Failure], "0x80");
    broker.stop().await;
}

#[tokio::test]
async fn enhanced_authentication_is_refused_with_0x8c() {
    let broker = start(config()).await;
    let connect = r5::Connect { auth_method: Some("SCRAM-SHA-1".into()), ..Raw::connect5("auth") };
    let (mut raw, ack) = Raw::handshake5(broker.port, connect).await;
    assert_eq!(ack.reason_code, r5::ConnectAckReason::BadAuthenticationMethod);
    raw.expect_closed().await;
    broker.stop().await;
}

#[tokio::test]
async fn session_limit_refuses_new_client_ids() {
    let broker = start(MqttConfigExt::with(|c| c.max_sessions = 1)).await;
    let (_first, ack) = Raw::handshake5(broker.port, Raw::connect5("one")).await;
    assert_eq!(ack.reason_code, r5::ConnectAckReason::Success);
    let (mut raw, ack) = Raw::handshake5(broker.port, Raw::connect5("two")).await;
    assert_eq!(ack.reason_code, r5::ConnectAckReason::QuotaExceeded);
    raw.expect_closed().await;
    let (_raw, ack) = Raw::handshake3(broker.port, "three", true, 30).await;
    assert_eq!(ack.return_code, v3::ConnectAckReason::ServiceUnavailable, "CONNACK 0x03");
    broker.stop().await;
}
