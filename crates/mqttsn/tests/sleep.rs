//! Sleeping clients (MQTT-SN 1.2 §6.14): DISCONNECT with a duration, buffering, PINGREQ with the
//! client id to collect the buffer, the asleep/awake/lost state machine, and persistent sessions
//! (clean session off) across a disconnect.

mod support;

use std::time::Duration;

use mqttsn_codec::{Message, PublishTopic, QoS, ReturnCode, SubscribeTopic, WillTopic};
use tolk_core::{CloseReason, DropReason, Protocol, QoS as CoreQoS};
use tolk_mqttsn::MqttSnConfig;

const QUIET: Duration = Duration::from_millis(150);

#[tokio::test]
async fn a_sleeping_client_gets_its_buffer_on_pingreq_then_pingresp() {
    let gw = support::start(support::config()).await;
    let peer = gw.mqtt_peer();
    let mut client = gw.client().await;
    assert_eq!(client.connect("sleepy", 60, true).await, ReturnCode::Accepted);
    let id = client.subscribe(SubscribeTopic::Name("news".into()), QoS::One).await.topic_id;
    client.disconnect(Some(30)).await;
    // Asleep still counts as connected.
    gw.eventually("one open connection", |gw| gw.connections_open() == 1).await;

    peer.publish("news", b"a", CoreQoS::AtMostOnce, false);
    peer.publish("news", b"b", CoreQoS::AtLeastOnce, false);
    peer.publish("news", b"c", CoreQoS::AtMostOnce, false);
    client.expect_nothing(QUIET).await;

    // Awake: every buffered message (QoS 0 included), the QoS 1 one acknowledged, then PINGRESP.
    client.send(&Message::PingReq { client_id: Some("sleepy".into()) }).await;
    for expected in [&b"a"[..], b"b", b"c"] {
        let publish = client.recv_publish_and_ack().await;
        assert_eq!((publish.topic, &publish.data[..]), (PublishTopic::Normal(id), expected));
    }
    assert_eq!(client.recv().await, Message::PingResp);

    // Asleep again: nothing is sent until the next wake-up.
    peer.publish("news", b"d", CoreQoS::AtLeastOnce, false);
    client.expect_nothing(QUIET).await;
    // A PINGREQ naming the client from another address is not a wake-up: whoever sent it gets
    // DISCONNECT and none of the buffer. A client that did move connects again from there.
    let moved = gw.client().await;
    moved.send(&Message::PingReq { client_id: Some("sleepy".into()) }).await;
    assert_eq!(moved.recv().await, Message::Disconnect { duration: None });
    // CONNECT from asleep: back to active. The buffer waits until the new address speaks again
    // (anyone can forge the source of a CONNECT), then goes out ahead of the answer.
    assert_eq!(moved.connect("sleepy", 60, true).await, ReturnCode::Accepted);
    moved.send(&Message::PingReq { client_id: None }).await;
    assert_eq!(&moved.recv_publish_and_ack().await.data[..], b"d");
    assert_eq!(moved.recv().await, Message::PingResp);
    // Active: messages flow at once.
    peer.publish("news", b"live", CoreQoS::AtMostOnce, false);
    assert_eq!(&moved.recv_publish().await.data[..], b"live");
    gw.stop().await;
}

#[tokio::test]
async fn the_awake_period_waits_for_acknowledgements_before_pingresp() {
    let gw = support::start(support::config()).await;
    let peer = gw.mqtt_peer();
    let mut client = gw.client().await;
    assert_eq!(client.connect("careful", 60, true).await, ReturnCode::Accepted);
    client.subscribe(SubscribeTopic::Name("q".into()), QoS::One).await;
    client.disconnect(Some(30)).await;
    peer.publish("q", b"1", CoreQoS::AtLeastOnce, false);
    client.expect_nothing(QUIET).await;
    client.send(&Message::PingReq { client_id: Some("careful".into()) }).await;
    let publish = client.recv_publish().await;
    // No PINGRESP while the PUBLISH is unacknowledged.
    client.expect_nothing(Duration::from_millis(100)).await;
    client.ack(&publish).await;
    assert_eq!(client.recv().await, Message::PingResp);
    gw.stop().await;
}

#[tokio::test]
async fn the_sleep_buffer_is_bounded() {
    let gw = support::start(MqttSnConfig { max_buffered_per_sleeping_client: 2, ..support::config() }).await;
    let peer = gw.mqtt_peer();
    let mut client = gw.client().await;
    assert_eq!(client.connect("small", 60, true).await, ReturnCode::Accepted);
    client.subscribe(SubscribeTopic::Short(*b"sb"), QoS::Zero).await;
    client.disconnect(Some(30)).await;
    for payload in [b"1", b"2", b"3", b"4"] {
        peer.publish("sb", payload, CoreQoS::AtMostOnce, false);
    }
    client.expect_nothing(QUIET).await;
    client.send(&Message::PingReq { client_id: Some("small".into()) }).await;
    assert_eq!(&client.recv_publish().await.data[..], b"1");
    assert_eq!(&client.recv_publish().await.data[..], b"2");
    assert_eq!(client.recv().await, Message::PingResp);
    let counters = gw.metrics().protocol(Protocol::MqttSn);
    let dropped = counters.dropped_count(DropReason::QueueFull) + counters.dropped_count(DropReason::OutboxFull);
    assert_eq!(dropped, 2);
    gw.stop().await;
}

#[tokio::test]
async fn a_client_that_oversleeps_is_lost_and_its_will_fires() {
    let gw = support::start(support::config()).await;
    let peer = gw.mqtt_peer();
    peer.subscribe("wills/+");
    let client = gw.client().await;
    let will = WillTopic { qos: QoS::Zero, retain: false, topic: "wills/sleeper".into() };
    assert_eq!(client.connect_with_will("sleeper", 60, will, b"overslept").await, ReturnCode::Accepted);
    client.disconnect(Some(1)).await;
    // Silent for 1.5 × the 1 s sleep duration.
    let will = peer.next().await;
    assert_eq!(&will.message.payload[..], b"overslept");
    let counters = gw.metrics().protocol(Protocol::MqttSn);
    gw.eventually("lost client counted", |_| counters.closed_count(CloseReason::KeepAliveTimeout) == 1).await;
    gw.eventually("no open connection", |gw| gw.connections_open() == 0).await;
    // Lost with clean session: forgotten; waking up now is refused with DISCONNECT.
    client.send(&Message::PingReq { client_id: Some("sleeper".into()) }).await;
    assert_eq!(client.recv().await, Message::Disconnect { duration: None });
    gw.stop().await;
}

#[tokio::test]
async fn a_persistent_session_keeps_subscriptions_and_queues_at_least_once_messages() {
    let gw = support::start(support::config()).await;
    let peer = gw.mqtt_peer();
    let mut client = gw.client().await;
    assert_eq!(client.connect("durable", 60, false).await, ReturnCode::Accepted);
    let id = client.subscribe(SubscribeTopic::Name("alerts".into()), QoS::One).await.topic_id;
    client.disconnect(None).await;
    gw.eventually("no open connection", |gw| gw.connections_open() == 0).await;

    peer.publish("alerts", b"dropped: qos 0 offline", CoreQoS::AtMostOnce, false);
    peer.publish("alerts", b"kept", CoreQoS::AtLeastOnce, false);

    let again = gw.client().await;
    assert_eq!(again.connect("durable", 60, false).await, ReturnCode::Accepted);
    // From a new address, what was kept waits until the client speaks again. It may still be on
    // its way from the core outbox when the PINGRESP goes, so the two come in either order.
    again.send(&Message::PingReq { client_id: None }).await;
    let mut answers = [again.recv().await, again.recv().await];
    answers.sort_by_key(|m| matches!(m, Message::PingResp));
    let [Message::Publish(publish), Message::PingResp] = answers else { panic!("{answers:?}") };
    again.ack(&publish).await;
    assert_eq!((publish.topic, &publish.data[..]), (PublishTopic::Normal(id), &b"kept"[..]));
    again.expect_nothing(QUIET).await;
    // Still subscribed.
    peer.publish("alerts", b"live", CoreQoS::AtLeastOnce, false);
    assert_eq!(&again.recv_publish_and_ack().await.data[..], b"live");

    // A clean CONNECT starts over: no subscriptions.
    again.disconnect(None).await;
    let fresh = gw.client().await;
    assert_eq!(fresh.connect("durable", 60, true).await, ReturnCode::Accepted);
    peer.publish("alerts", b"nobody", CoreQoS::AtLeastOnce, false);
    fresh.expect_nothing(QUIET).await;
    gw.stop().await;
}
