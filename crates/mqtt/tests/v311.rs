//! MQTT 3.1.1 with rumqttc's v4 client over real sockets (and a raw client where rumqttc cannot
//! show what is on the wire): QoS 0/1/2 both ways, retained messages, wills, keep-alive,
//! persistent sessions with an offline queue and DUP redelivery, client-id rules, takeover.

mod common;

use std::time::Duration;

use common::v4::{self, LastWill, Packet, QoS};
use common::{Raw, config, eventually, pid, start};
use rmqtt_codec::v3;

#[tokio::test]
async fn qos_0_1_2_round_trips_at_the_lower_of_both_qos() {
    let broker = start(config()).await;
    let mut sub = v4::connect(v4::options(broker.port, "sub")).await;
    sub.subscribe("t/#", QoS::ExactlyOnce).await;
    let publisher = v4::connect(v4::options(broker.port, "pub")).await;
    for (n, qos) in [QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce].into_iter().enumerate() {
        publisher.client.publish(format!("t/{n}"), qos, false, vec![n as u8, 0xff]).await.unwrap();
        let got = sub.publish().await;
        assert_eq!((&*got.topic, &got.payload[..], got.qos), (format!("t/{n}").as_str(), &[n as u8, 0xff][..], qos));
    }
    // A QoS 0 subscription gets QoS 2 messages at QoS 0.
    let mut low = v4::connect(v4::options(broker.port, "low")).await;
    low.subscribe("t/#", QoS::AtMostOnce).await;
    publisher.client.publish("t/x", QoS::ExactlyOnce, false, "hi").await.unwrap();
    assert_eq!(low.publish().await.qos, QoS::AtMostOnce);
    let m = broker.metrics().protocol(tolk_core::Protocol::Mqtt);
    eventually("counters", || m.messages_in.load(std::sync::atomic::Ordering::Relaxed) == 4).await;
    broker.stop().await;
}

#[tokio::test]
async fn retained_messages_are_set_replaced_cleared_and_sent_on_subscribe() {
    let broker = start(config()).await;
    let publisher = v4::connect(v4::options(broker.port, "pub")).await;
    let mut probe = v4::connect(v4::options(broker.port, "probe")).await;
    probe.subscribe("r/#", QoS::AtLeastOnce).await;
    publisher.client.publish("r/a", QoS::AtLeastOnce, true, "one").await.unwrap();
    publisher.client.publish("r/a", QoS::AtLeastOnce, true, "two").await.unwrap();
    // Live deliveries carry retain = 0 (MQTT-3.3.1-9)…
    assert!(!probe.publish().await.retain);
    assert_eq!(&probe.publish().await.payload[..], b"two");
    // …a new subscriber gets the latest retained message with retain = 1.
    let mut late = v4::connect(v4::options(broker.port, "late")).await;
    late.subscribe("r/+", QoS::AtLeastOnce).await;
    let got = late.publish().await;
    assert!(got.retain);
    assert_eq!(&got.payload[..], b"two");
    // An empty retained payload clears it.
    publisher.client.publish("r/a", QoS::AtLeastOnce, true, "").await.unwrap();
    assert_eq!(probe.publish().await.payload.len(), 0);
    eventually("retained cleared", || broker.router.retained("r/a").is_empty()).await;
    broker.stop().await;
}

#[tokio::test]
async fn will_is_published_on_abrupt_close_but_not_after_disconnect() {
    let broker = start(config()).await;
    let mut watcher = v4::connect(v4::options(broker.port, "watcher")).await;
    watcher.subscribe("wills/#", QoS::AtLeastOnce).await;
    let mut o = v4::options(broker.port, "polite");
    o.set_last_will(LastWill::new("wills/polite", "gone", QoS::AtLeastOnce, false));
    v4::connect(o).await.disconnect().await;
    let mut o = v4::options(broker.port, "rude");
    o.set_last_will(LastWill::new("wills/rude", "gone", QoS::AtLeastOnce, false));
    v4::connect(o).await.kill();
    let got = watcher.publish().await;
    assert_eq!((&*got.topic, &got.payload[..]), ("wills/rude", &b"gone"[..]));
    broker.stop().await;
}

#[tokio::test]
async fn silent_client_is_dropped_after_one_and_a_half_keep_alives_and_its_will_fires() {
    let broker = start(config()).await;
    let mut watcher = v4::connect(v4::options(broker.port, "watcher")).await;
    watcher.subscribe("wills/#", QoS::AtMostOnce).await;
    let mut raw = Raw::connect(broker.port).await;
    let connect = v3::Connect {
        protocol: rmqtt_codec::types::Protocol(4),
        clean_session: true,
        keep_alive: 1,
        client_id: "sleepy".into(),
        last_will: Some(v3::LastWill {
            qos: v3::QoS::AtMostOnce,
            retain: false,
            topic: "wills/sleepy".into(),
            message: "zz".into(),
        }),
        ..Default::default()
    };
    raw.send3(v3::Packet::Connect(Box::new(connect))).await;
    assert!(matches!(raw.recv3().await, Some(v3::Packet::ConnectAck(_))));
    let started = std::time::Instant::now();
    raw.expect_closed().await;
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(1400) && waited < Duration::from_secs(3), "closed after {waited:?}");
    assert_eq!(watcher.publish().await.topic, "wills/sleepy");
    // Counted once the connection's task ends, after lingering for the client to close.
    let m = broker.metrics().protocol(tolk_core::Protocol::Mqtt);
    eventually("a keep-alive close", || m.closed_count(tolk_core::CloseReason::KeepAliveTimeout) == 1).await;
    broker.stop().await;
}

/// A keep-alive of 2 s puts the deadline 3 s ahead: far enough to be met through the router's
/// shared wheel of alarms, which must neither miss it nor meet it late once a ping moved it.
#[tokio::test]
async fn a_far_keep_alive_deadline_moved_by_a_ping_is_met_on_time() {
    let broker = start(config()).await;
    let mut raw = Raw::connect(broker.port).await;
    let connect = v3::Connect {
        protocol: rmqtt_codec::types::Protocol(4),
        clean_session: true,
        keep_alive: 2,
        client_id: "pinger".into(),
        ..Default::default()
    };
    raw.send3(v3::Packet::Connect(Box::new(connect))).await;
    assert!(matches!(raw.recv3().await, Some(v3::Packet::ConnectAck(_))));
    // The client's own pace, not a synchronisation: it pings once, a second in.
    tokio::time::sleep(Duration::from_secs(1)).await;
    raw.send3(v3::Packet::PingRequest).await;
    assert_eq!(raw.recv3().await, Some(v3::Packet::PingResponse));
    let pinged = std::time::Instant::now();
    raw.expect_closed().await;
    let waited = pinged.elapsed();
    assert!(waited >= Duration::from_millis(2900) && waited < Duration::from_millis(3800), "closed after {waited:?}");
    let m = broker.metrics().protocol(tolk_core::Protocol::Mqtt);
    eventually("a keep-alive close", || m.closed_count(tolk_core::CloseReason::KeepAliveTimeout) == 1).await;
    broker.stop().await;
}

#[tokio::test]
async fn persistent_session_keeps_subscriptions_and_queues_while_offline() {
    let broker = start(config()).await;
    let mut o = v4::options(broker.port, "durable");
    o.set_clean_session(false);
    let mut sub = v4::connect(o.clone()).await;
    assert!(!sub.session_present);
    sub.subscribe("q/#", QoS::AtLeastOnce).await;
    sub.disconnect().await;
    let publisher = v4::connect(v4::options(broker.port, "pub")).await;
    publisher.client.publish("q/1", QoS::AtLeastOnce, false, "while away 1").await.unwrap();
    publisher.client.publish("q/2", QoS::ExactlyOnce, false, "while away 2").await.unwrap();
    publisher.client.publish("q/3", QoS::AtMostOnce, false, "qos0 is not queued").await.unwrap();
    // Wait until the two QoS>0 messages are queued (the QoS 0 one is dropped).
    eventually("offline queue", || {
        let m = broker.metrics().protocol(tolk_core::Protocol::Mqtt);
        m.messages_in.load(std::sync::atomic::Ordering::Relaxed) == 3
    })
    .await;
    let mut back = v4::connect(o).await;
    assert!(back.session_present);
    assert_eq!(&back.publish().await.payload[..], b"while away 1");
    assert_eq!(&back.publish().await.payload[..], b"while away 2");
    // A clean session discards it.
    back.disconnect().await;
    let mut o = v4::options(broker.port, "durable");
    o.set_clean_session(true);
    assert!(!v4::connect(o).await.session_present);
    broker.stop().await;
}

#[tokio::test]
async fn unacknowledged_messages_are_resent_with_dup_after_reconnect() {
    let broker = start(config()).await;
    let (mut raw, ack) = Raw::handshake3(broker.port, "forgetful", false, 30).await;
    assert!(!ack.session_present);
    raw.send3(v3::Packet::Subscribe { packet_id: pid(1), topic_filters: vec![("d/#".into(), v3::QoS::ExactlyOnce)] })
        .await;
    assert!(matches!(raw.recv3().await, Some(v3::Packet::SubscribeAck { .. })));
    let publisher = v4::connect(v4::options(broker.port, "pub")).await;
    publisher.client.publish("d/1", QoS::AtLeastOnce, false, "one").await.unwrap();
    publisher.client.publish("d/2", QoS::ExactlyOnce, false, "two").await.unwrap();
    let Some(v3::Packet::Publish(first)) = raw.recv3().await else { panic!() };
    let Some(v3::Packet::Publish(second)) = raw.recv3().await else { panic!() };
    assert!(!first.dup && !second.dup);
    // Acknowledge nothing for the first; PUBREC the second, then vanish.
    raw.send3(v3::Packet::PublishReceived { packet_id: second.packet_id.unwrap() }).await;
    assert!(matches!(raw.recv3().await, Some(v3::Packet::PublishRelease { .. })));
    drop(raw);
    let (mut raw, ack) = Raw::handshake3(broker.port, "forgetful", false, 30).await;
    assert!(ack.session_present);
    let Some(v3::Packet::Publish(again)) = raw.recv3().await else { panic!() };
    assert!(again.dup, "MQTT-4.4.0-1: resent with DUP");
    assert_eq!((again.packet_id, &again.payload[..]), (first.packet_id, &b"one"[..]));
    assert_eq!(raw.recv3().await, Some(v3::Packet::PublishRelease { packet_id: second.packet_id.unwrap() }));
    raw.send3(v3::Packet::PublishAck { packet_id: again.packet_id.unwrap() }).await;
    raw.send3(v3::Packet::PublishComplete { packet_id: second.packet_id.unwrap() }).await;
    raw.send3(v3::Packet::PingRequest).await;
    assert_eq!(raw.recv3().await, Some(v3::Packet::PingResponse));
    broker.stop().await;
}

#[tokio::test]
async fn qos2_from_the_client_is_routed_once_even_when_resent() {
    let broker = start(config()).await;
    let mut sub = v4::connect(v4::options(broker.port, "sub")).await;
    sub.subscribe("x", QoS::AtLeastOnce).await;
    let (mut raw, _) = Raw::handshake3(broker.port, "p2", true, 30).await;
    let publish = |dup| {
        v3::Packet::Publish(Box::new(rmqtt_codec::types::Publish {
            dup,
            retain: false,
            qos: v3::QoS::ExactlyOnce,
            topic: "x".into(),
            packet_id: Some(pid(9)),
            payload: "once".into(),
            properties: None,
        }))
    };
    raw.send3(publish(false)).await;
    assert_eq!(raw.recv3().await, Some(v3::Packet::PublishReceived { packet_id: pid(9) }));
    raw.send3(publish(true)).await;
    assert_eq!(raw.recv3().await, Some(v3::Packet::PublishReceived { packet_id: pid(9) }));
    raw.send3(v3::Packet::PublishRelease { packet_id: pid(9) }).await;
    assert_eq!(raw.recv3().await, Some(v3::Packet::PublishComplete { packet_id: pid(9) }));
    assert_eq!(&sub.publish().await.payload[..], b"once");
    // The marker proves nothing else was queued before it.
    raw.send3(v3::Packet::Publish(Box::new(rmqtt_codec::types::Publish {
        dup: false,
        retain: false,
        qos: v3::QoS::AtMostOnce,
        topic: "x".into(),
        packet_id: None,
        payload: "marker".into(),
        properties: None,
    })))
    .await;
    assert_eq!(&sub.publish().await.payload[..], b"marker");
    broker.stop().await;
}

#[tokio::test]
async fn empty_client_id_needs_clean_session() {
    let broker = start(config()).await;
    let (_raw, ack) = Raw::handshake3(broker.port, "", false, 30).await;
    assert_eq!(ack.return_code, v3::ConnectAckReason::IdentifierRejected, "CONNACK 0x02");
    let (mut raw, ack) = Raw::handshake3(broker.port, "", true, 30).await;
    assert_eq!(ack.return_code, v3::ConnectAckReason::ConnectionAccepted);
    raw.send3(v3::Packet::PingRequest).await;
    assert_eq!(raw.recv3().await, Some(v3::Packet::PingResponse));
    broker.stop().await;
}

#[tokio::test]
async fn second_connection_with_the_same_id_takes_over() {
    let broker = start(config()).await;
    let mut first = v4::connect(v4::options(broker.port, "twin")).await;
    let mut second = v4::connect(v4::options(broker.port, "twin")).await;
    first.closed().await;
    second.subscribe("a", QoS::AtMostOnce).await;
    let m = broker.metrics().protocol(tolk_core::Protocol::Mqtt);
    assert_eq!(m.closed_count(tolk_core::CloseReason::SessionTakenOver), 1);
    let _ = Packet::PingReq;
    broker.stop().await;
}
