//! MQTT 5 features with rumqttc's v5 client over real sockets, and a raw client where the wire
//! matters (aliases, windows, reason codes).

mod common;

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use bytes::Bytes;
use common::v5::{self, Filter, LastWill, LastWillProperties, Packet, PublishProperties, QoS, RetainForwardRule};
use common::{Raw, config, eventually, pid, start};
use rmqtt_codec::types::{Publish as RawPublish, QoS as RawQoS};
use rmqtt_codec::v5 as r5;
use tolk_core::{Destination, DropReason, Protocol, SubscriptionOptions};

fn raw_publish(topic: &str, qos: RawQoS, id: u16, payload: &'static [u8], props: r5::PublishProperties) -> r5::Packet {
    r5::Packet::Publish(Box::new(RawPublish {
        dup: false,
        retain: false,
        qos,
        topic: topic.into(),
        packet_id: std::num::NonZeroU16::new(id),
        payload: Bytes::from_static(payload),
        properties: Some(props),
    }))
}

fn raw_subscribe(filter: &str, qos: RawQoS, id: u16) -> r5::Packet {
    r5::Packet::Subscribe(r5::Subscribe {
        packet_id: pid(id),
        id: None,
        user_properties: Vec::new(),
        topic_filters: vec![(filter.into(), r5::SubscriptionOptions { qos, ..Default::default() })],
    })
}

async fn raw_subscribed(raw: &mut Raw, filter: &str, qos: RawQoS) {
    raw.send5(raw_subscribe(filter, qos, 1)).await;
    assert!(matches!(raw.recv5().await, Some(r5::Packet::SubscribeAck(_))));
}

#[tokio::test]
async fn connack_advertises_our_limits_and_assigns_client_ids() {
    let cfg = common::MqttConfigExt::with(|c| {
        c.receive_maximum = 7;
        c.max_packet_size_bytes = 5000;
        c.topic_alias_maximum = 3;
        c.max_keep_alive_secs = 5;
    });
    let broker = start(cfg).await;
    let (_raw, ack) = Raw::handshake5(broker.port, Raw::connect5("")).await;
    assert_eq!(ack.reason_code, r5::ConnectAckReason::Success);
    assert_eq!((ack.receive_max.get(), ack.max_packet_size, ack.topic_alias_max), (7, Some(5000), 3));
    assert_eq!(ack.server_keepalive_sec, Some(5), "client asked 30 s, the cap is 5 s");
    let assigned = ack.assigned_client_id.expect("assigned client identifier");
    assert!(!assigned.is_empty());
    // Clean start 0 with an empty id is fine in MQTT 5 too.
    let (_raw, ack) = Raw::handshake5(broker.port, r5::Connect { clean_start: false, ..Raw::connect5("") }).await;
    assert!(ack.assigned_client_id.is_some_and(|id| id != assigned));
    broker.stop().await;
}

#[tokio::test]
async fn properties_cross_the_broker_and_reach_the_core_model() {
    let broker = start(config()).await;
    let mut sub = v5::connect(v5::options(broker.port, "sub")).await;
    sub.subscribe("p/#", QoS::AtLeastOnce).await;
    // A core session sees the same message as every other protocol would.
    let core = broker.router.open_session(Protocol::Stomp);
    core.subscribe("p/#", 0, SubscriptionOptions::default()).unwrap();
    let publisher = v5::connect(v5::options(broker.port, "pub")).await;
    let props = PublishProperties {
        payload_format_indicator: Some(1),
        message_expiry_interval: Some(60),
        response_topic: Some("replies/1".into()),
        correlation_data: Some(Bytes::from_static(b"\x00corr")),
        user_properties: vec![("a".into(), "1".into()), ("a".into(), "2".into())],
        content_type: Some("text/plain".into()),
        ..Default::default()
    };
    publisher.client.publish_with_properties("p/x", QoS::AtLeastOnce, false, "héllo", props).await.unwrap();
    let got = sub.publish().await;
    let p = got.properties.expect("properties");
    assert_eq!(p.payload_format_indicator, Some(1));
    assert_eq!(p.content_type.as_deref(), Some("text/plain"));
    assert_eq!(p.response_topic.as_deref(), Some("replies/1"));
    assert_eq!(p.correlation_data.as_deref(), Some(&b"\x00corr"[..]));
    assert_eq!(p.user_properties, vec![("a".to_string(), "1".to_string()), ("a".to_string(), "2".to_string())]);
    let left = p.message_expiry_interval.unwrap();
    assert!((59..=60).contains(&left), "remaining expiry {left}");
    let mut out = Vec::new();
    core.receiver().try_drain(&mut out, 10).unwrap();
    let m = &out[0].message;
    assert_eq!(m.props.reply_to, Some(Destination::Topic("replies/1".into())));
    assert_eq!((m.props.content_type.as_deref(), m.props.payload_utf8), (Some("text/plain"), Some(true)));
    assert!(m.props.expires_at.is_some());
    broker.stop().await;
}

#[tokio::test]
async fn expired_messages_are_not_delivered_from_the_offline_queue() {
    let broker = start(config()).await;
    let mut o = v5::options(broker.port, "away");
    o.set_clean_start(false).set_session_expiry_interval(Some(60));
    let mut sub = v5::connect(o.clone()).await;
    sub.subscribe("e", QoS::AtLeastOnce).await;
    sub.disconnect().await;
    let publisher = v5::connect(v5::options(broker.port, "pub")).await;
    let short = PublishProperties { message_expiry_interval: Some(1), ..Default::default() };
    publisher.client.publish_with_properties("e", QoS::AtLeastOnce, false, "short", short).await.unwrap();
    publisher.client.publish("e", QoS::AtLeastOnce, false, "lasting").await.unwrap();
    let metrics = broker.metrics().protocol(Protocol::Mqtt);
    eventually("both published", || metrics.messages_in.load(Relaxed) == 2).await;
    tokio::time::sleep(Duration::from_millis(1100)).await; // let the first one expire
    let mut back = v5::connect(o).await;
    assert!(back.connack.session_present);
    assert_eq!(&back.publish().await.payload[..], b"lasting");
    assert_eq!(metrics.dropped_count(DropReason::Expired), 1);
    broker.stop().await;
}

#[tokio::test]
async fn subscription_options_no_local_retain_as_published_and_retain_handling() {
    let broker = start(config()).await;
    let mut me = v5::connect(v5::options(broker.port, "me")).await;
    let filters = vec![
        Filter {
            path: "nl".into(),
            qos: QoS::AtMostOnce,
            nolocal: true,
            preserve_retain: false,
            retain_forward_rule: RetainForwardRule::OnEverySubscribe,
        },
        Filter {
            path: "rap".into(),
            qos: QoS::AtMostOnce,
            nolocal: false,
            preserve_retain: true,
            retain_forward_rule: RetainForwardRule::OnEverySubscribe,
        },
        Filter {
            path: "plain".into(),
            qos: QoS::AtMostOnce,
            nolocal: false,
            preserve_retain: false,
            retain_forward_rule: RetainForwardRule::OnEverySubscribe,
        },
    ];
    me.client.subscribe_many(filters).await.unwrap();
    me.suback().await;
    me.client.publish("nl", QoS::AtMostOnce, false, "own").await.unwrap();
    me.client.publish("rap", QoS::AtMostOnce, true, "kept").await.unwrap();
    me.client.publish("plain", QoS::AtMostOnce, true, "cleared").await.unwrap();
    let got = me.publish().await;
    assert_eq!(
        (&got.topic[..], got.retain),
        (&b"rap"[..], true),
        "no-local skipped 'nl'; retain-as-published kept the flag"
    );
    let got = me.publish().await;
    assert_eq!((&got.topic[..], got.retain), (&b"plain"[..], false));
    // Retain handling: 0 sends on every subscribe, 1 only on a new one, 2 never.
    let mut other = v5::connect(v5::options(broker.port, "other")).await;
    let f = |rule| Filter {
        path: "rap".into(),
        qos: QoS::AtMostOnce,
        nolocal: false,
        preserve_retain: false,
        retain_forward_rule: rule,
    };
    other.client.subscribe_many([f(RetainForwardRule::Never)]).await.unwrap();
    other.suback().await;
    other.client.subscribe_many([f(RetainForwardRule::OnNewSubscribe)]).await.unwrap();
    other.suback().await; // not new: nothing
    other.client.subscribe_many([f(RetainForwardRule::OnEverySubscribe)]).await.unwrap();
    other.suback().await;
    let got = other.publish().await;
    assert_eq!((&got.payload[..], got.retain), (&b"kept"[..], true));
    other.client.unsubscribe("rap").await.unwrap();
    other.next(|p| matches!(p, Packet::UnsubAck(_)).then_some(())).await;
    other.client.subscribe_many([f(RetainForwardRule::OnNewSubscribe)]).await.unwrap();
    other.suback().await;
    assert_eq!(&other.publish().await.payload[..], b"kept", "new again after unsubscribe");
    broker.stop().await;
}

#[tokio::test]
async fn subscription_identifiers_come_back_with_each_delivery() {
    let broker = start(config()).await;
    let mut sub = v5::connect(v5::options(broker.port, "sub")).await;
    let props = v5::SubscribeProperties { id: Some(42), user_properties: Vec::new() };
    sub.client.subscribe_with_properties("sid/+", QoS::AtMostOnce, props).await.unwrap();
    sub.suback().await;
    sub.client.publish("sid/1", QoS::AtMostOnce, false, "x").await.unwrap();
    let got = sub.publish().await;
    assert_eq!(got.properties.unwrap().subscription_identifiers, vec![42]);
    broker.stop().await;
}

#[tokio::test]
async fn topic_aliases_work_in_both_directions() {
    let mut cfg = config();
    cfg.topic_alias_maximum = 2;
    let broker = start(cfg).await;
    // Outbound: the client accepts 1 alias.
    let (mut sub, _) = Raw::handshake5(broker.port, r5::Connect { topic_alias_max: 1, ..Raw::connect5("sub") }).await;
    raw_subscribed(&mut sub, "al/#", RawQoS::AtMostOnce).await;
    // Inbound: the publisher defines alias 1, then uses it.
    let (mut publisher, _) = Raw::handshake5(broker.port, Raw::connect5("pub")).await;
    let alias = |n| r5::PublishProperties { topic_alias: std::num::NonZeroU16::new(n), ..Default::default() };
    publisher.send5(raw_publish("al/long/topic", RawQoS::AtMostOnce, 0, b"1", alias(1))).await;
    publisher.send5(raw_publish("", RawQoS::AtMostOnce, 0, b"2", alias(1))).await;
    publisher.send5(raw_publish("al/other", RawQoS::AtMostOnce, 0, b"3", Default::default())).await;
    let mut seen = Vec::new();
    for _ in 0..3 {
        let Some(r5::Packet::Publish(p)) = sub.recv5().await else { panic!("publish expected") };
        let a = p.properties.as_ref().and_then(|p| p.topic_alias).map(|a| a.get());
        seen.push((p.topic.to_string(), a, p.payload.clone()));
    }
    assert_eq!(seen[0], ("al/long/topic".into(), Some(1), Bytes::from_static(b"1")), "defines alias 1");
    assert_eq!(seen[1], (String::new(), Some(1), Bytes::from_static(b"2")), "uses alias 1");
    assert_eq!(seen[2], ("al/other".into(), None, Bytes::from_static(b"3")), "table full: plain topic");
    // An alias above our maximum: DISCONNECT 0x94.
    publisher.send5(raw_publish("al/x", RawQoS::AtMostOnce, 0, b"4", alias(3))).await;
    let Some(r5::Packet::Disconnect(d)) = publisher.recv5().await else { panic!("DISCONNECT expected") };
    assert_eq!(d.reason_code, r5::DisconnectReasonCode::TopicAliasInvalid);
    broker.stop().await;
}

#[tokio::test]
async fn client_receive_maximum_limits_our_inflight_window() {
    let broker = start(config()).await;
    let connect = r5::Connect { receive_max: std::num::NonZeroU16::new(2), ..Raw::connect5("slow") };
    let (mut sub, _) = Raw::handshake5(broker.port, connect).await;
    raw_subscribed(&mut sub, "w", RawQoS::AtLeastOnce).await;
    let publisher = v5::connect(v5::options(broker.port, "pub")).await;
    for n in 0..4u8 {
        publisher.client.publish("w", QoS::AtLeastOnce, false, vec![n]).await.unwrap();
    }
    let metrics = broker.metrics().protocol(Protocol::Mqtt);
    eventually("all routed", || metrics.messages_in.load(Relaxed) == 4).await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let Some(r5::Packet::Publish(p)) = sub.recv5().await else { panic!() };
        ids.push(p.packet_id.unwrap());
    }
    // Nothing more until an acknowledgement: the next thing we get is the PINGRESP.
    sub.send5(r5::Packet::PingRequest).await;
    assert_eq!(sub.recv5().await, Some(r5::Packet::PingResponse));
    sub.send5(r5::Packet::PublishAck(r5::PublishAck { packet_id: ids[0], ..Default::default() })).await;
    let Some(r5::Packet::Publish(p)) = sub.recv5().await else { panic!() };
    assert_eq!(&p.payload[..], &[2]);
    broker.stop().await;
}

#[tokio::test]
async fn client_maximum_packet_size_drops_what_does_not_fit() {
    let broker = start(config()).await;
    let mut o = v5::options(broker.port, "small");
    o.set_max_packet_size(Some(100));
    let mut sub = v5::connect(o).await;
    sub.subscribe("big", QoS::AtLeastOnce).await;
    let publisher = v5::connect(v5::options(broker.port, "pub")).await;
    publisher.client.publish("big", QoS::AtLeastOnce, false, vec![0u8; 200]).await.unwrap();
    publisher.client.publish("big", QoS::AtLeastOnce, false, "small").await.unwrap();
    assert_eq!(&sub.publish().await.payload[..], b"small");
    assert_eq!(broker.metrics().protocol(Protocol::Mqtt).dropped_count(DropReason::Untranslatable), 1);
    broker.stop().await;
}

#[tokio::test]
async fn shared_subscriptions_balance_and_acks_settle_the_group_queue() {
    let broker = start(config()).await;
    let mut a = v5::connect(v5::options(broker.port, "a")).await;
    let mut b = v5::connect(v5::options(broker.port, "b")).await;
    a.subscribe("$share/g/jobs/#", QoS::AtLeastOnce).await;
    b.subscribe("$share/g/jobs/#", QoS::AtLeastOnce).await;
    let publisher = v5::connect(v5::options(broker.port, "pub")).await;
    for n in 0..4u8 {
        publisher.client.publish("jobs/x", QoS::AtLeastOnce, false, vec![n]).await.unwrap();
    }
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        got_a.push(a.publish().await.payload[0]);
        got_b.push(b.publish().await.payload[0]);
    }
    let mut all: Vec<u8> = got_a.iter().chain(&got_b).copied().collect();
    all.sort();
    assert_eq!(all, [0, 1, 2, 3]);
    let queue = broker.router.queue("$share/g/jobs/#").expect("group queue");
    eventually("PUBACKs settle the queue deliveries", || queue.unacked_len() == 0).await;
    broker.stop().await;
}

#[tokio::test]
async fn session_expiry_keeps_then_forgets_the_session() {
    let broker = start(config()).await;
    let mut o = v5::options(broker.port, "exp");
    o.set_clean_start(false).set_session_expiry_interval(Some(1));
    let c = v5::connect(o.clone()).await;
    assert!(!c.connack.session_present);
    c.disconnect().await;
    let c = v5::connect(o.clone()).await;
    assert!(c.connack.session_present, "back within the expiry");
    c.disconnect().await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let c = v5::connect(o.clone()).await;
    assert!(!c.connack.session_present, "expired");
    c.disconnect().await;
    // Expiry 0 (the default): the session ends with the connection.
    let mut o0 = v5::options(broker.port, "exp0");
    o0.set_clean_start(false);
    v5::connect(o0.clone()).await.disconnect().await;
    assert!(!v5::connect(o0).await.connack.session_present);
    broker.stop().await;
}

#[tokio::test]
async fn will_delay_waits_and_a_quick_reconnect_cancels_it() {
    let broker = start(config()).await;
    let mut watcher = v5::connect(v5::options(broker.port, "watcher")).await;
    watcher.subscribe("wills/#", QoS::AtMostOnce).await;
    let with_will = |id: &str| {
        let mut o = v5::options(broker.port, id);
        let props = LastWillProperties {
            delay_interval: Some(1),
            payload_format_indicator: None,
            message_expiry_interval: None,
            content_type: None,
            response_topic: None,
            correlation_data: None,
            user_properties: Vec::new(),
        };
        o.set_clean_start(false).set_session_expiry_interval(Some(10)).set_last_will(LastWill::new(
            format!("wills/{id}"),
            "gone",
            QoS::AtMostOnce,
            false,
            Some(props),
        ));
        o
    };
    // "back" returns within the delay: no will. "late" does not.
    v5::connect(with_will("back")).await.kill();
    let killed = std::time::Instant::now();
    v5::connect(with_will("late")).await.kill();
    let back = v5::connect(with_will("back")).await;
    assert!(back.connack.session_present);
    let got = watcher.publish().await;
    assert_eq!(&got.topic[..], b"wills/late");
    assert!(killed.elapsed() >= Duration::from_millis(900), "will waited for its delay");
    // Nothing from "back" came before (its will would have been due first) or comes after.
    back.client.publish("wills/marker", QoS::AtMostOnce, false, "m").await.unwrap();
    assert_eq!(&watcher.publish().await.topic[..], b"wills/marker");
    broker.stop().await;
}

#[tokio::test]
async fn disconnect_with_will_message_publishes_the_will() {
    let broker = start(config()).await;
    let mut watcher = v5::connect(v5::options(broker.port, "watcher")).await;
    watcher.subscribe("wills/#", QoS::AtMostOnce).await;
    let will = r5::LastWill {
        qos: RawQoS::AtMostOnce,
        retain: false,
        topic: "wills/w".into(),
        message: "bye".into(),
        will_delay_interval_sec: None,
        correlation_data: None,
        message_expiry_interval: None,
        content_type: None,
        user_properties: Vec::new(),
        is_utf8_payload: None,
        response_topic: None,
    };
    let (mut raw, _) = Raw::handshake5(broker.port, r5::Connect { last_will: Some(will), ..Raw::connect5("w") }).await;
    raw.send5(r5::Packet::Disconnect(r5::Disconnect::new(r5::DisconnectReasonCode::DisconnectWithWillMessage))).await;
    raw.expect_closed().await;
    assert_eq!(&watcher.publish().await.payload[..], b"bye");
    broker.stop().await;
}

#[tokio::test]
async fn takeover_tells_the_old_connection_0x8e() {
    let broker = start(config()).await;
    let (mut first, _) = Raw::handshake5(broker.port, Raw::connect5("same")).await;
    let (_second, ack) = Raw::handshake5(broker.port, Raw::connect5("same")).await;
    assert_eq!(ack.reason_code, r5::ConnectAckReason::Success);
    let Some(r5::Packet::Disconnect(d)) = first.recv5().await else { panic!("DISCONNECT expected") };
    assert_eq!(d.reason_code, r5::DisconnectReasonCode::SessionTakenOver);
    first.expect_closed().await;
    broker.stop().await;
}

#[tokio::test]
async fn qos2_both_ways_and_no_matching_subscribers_reason() {
    let broker = start(config()).await;
    let mut sub = v5::connect(v5::options(broker.port, "sub")).await;
    sub.subscribe("q2", QoS::ExactlyOnce).await;
    let (mut raw, _) = Raw::handshake5(broker.port, Raw::connect5("pub")).await;
    raw.send5(raw_publish("q2", RawQoS::ExactlyOnce, 3, b"exactly", Default::default())).await;
    let Some(r5::Packet::PublishReceived(rec)) = raw.recv5().await else { panic!() };
    assert_eq!(rec.reason_code, r5::PublishAckReason::Success);
    raw.send5(r5::Packet::PublishRelease(r5::PublishAck2 { packet_id: pid(3), ..Default::default() })).await;
    assert!(matches!(raw.recv5().await, Some(r5::Packet::PublishComplete(_))));
    let got = sub.publish().await;
    assert_eq!((got.qos, &got.payload[..]), (QoS::ExactlyOnce, &b"exactly"[..]));
    raw.send5(raw_publish("nobody/listens", RawQoS::AtLeastOnce, 4, b"x", Default::default())).await;
    let Some(r5::Packet::PublishAck(ack)) = raw.recv5().await else { panic!() };
    assert_eq!(ack.reason_code, r5::PublishAckReason::NoMatchingSubscribers);
    broker.stop().await;
}

#[tokio::test]
async fn persistent_session_queues_offline_and_rejoins_its_shared_group() {
    let broker = start(config()).await;
    let mut o = v5::options(broker.port, "durable5");
    o.set_clean_start(false).set_session_expiry_interval(Some(60));
    let mut c = v5::connect(o.clone()).await;
    c.subscribe("own/#", QoS::AtLeastOnce).await;
    c.subscribe("$share/grp/work", QoS::AtLeastOnce).await;
    c.disconnect().await;
    let publisher = v5::connect(v5::options(broker.port, "pub")).await;
    publisher.client.publish("own/1", QoS::ExactlyOnce, false, "queued").await.unwrap();
    let metrics = broker.metrics().protocol(Protocol::Mqtt);
    eventually("queued", || metrics.messages_in.load(Relaxed) == 1).await;
    let mut back = v5::connect(o).await;
    assert!(back.connack.session_present);
    let got = back.publish().await;
    assert_eq!((&got.payload[..], got.qos), (&b"queued"[..], QoS::AtLeastOnce), "min(2, subscription 1)");
    // The shared membership came back with the session.
    publisher.client.publish("work", QoS::AtLeastOnce, false, "job").await.unwrap();
    assert_eq!(&back.publish().await.payload[..], b"job");
    broker.stop().await;
}

#[tokio::test]
async fn keep_alive_timeout_sends_0x8d() {
    let broker = start(config()).await;
    let (mut raw, _) = Raw::handshake5(broker.port, r5::Connect { keep_alive: 1, ..Raw::connect5("idle") }).await;
    match raw.recv5().await {
        Some(r5::Packet::Disconnect(d)) => assert_eq!(d.reason_code, r5::DisconnectReasonCode::KeepAliveTimeout),
        other => panic!("expected DISCONNECT, got {other:?}"),
    }
    broker.stop().await;
}
