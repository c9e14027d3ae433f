//! Gateway discovery, connection set-up and tear-down (MQTT-SN 1.2 §6.1-§6.4, §6.11, §6.12)
//! with the spec-based test client over a real UDP socket.

mod support;

use std::time::Duration;

use bytes::Bytes;
use mqttsn_codec::{Advertise, GwInfo, Message, QoS, ReturnCode, WillTopic};
use support::client::connect;
use tolk_core::{CloseReason, Protocol, QoS as CoreQoS};
use tolk_mqttsn::{AdvertiseConfig, GatewayStats, MqttSnConfig};

#[tokio::test]
async fn searchgw_is_answered_with_gwinfo() {
    let gw = support::start(MqttSnConfig { gateway_id: 7, ..support::config() }).await;
    let client = gw.client().await;
    client.send(&Message::SearchGw { radius: 1 }).await;
    assert_eq!(client.recv().await, Message::GwInfo(GwInfo { gw_id: 7, gw_add: None }));
    gw.stop().await;
}

#[tokio::test]
async fn advertise_is_sent_periodically_when_enabled() {
    let listener = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let advertise =
        AdvertiseConfig { enabled: true, address: listener.local_addr().unwrap(), period: Duration::from_secs(60) };
    let gw = support::start(MqttSnConfig { gateway_id: 3, advertise, ..support::config() }).await;
    let mut buf = [0u8; 64];
    let (len, _) = tokio::time::timeout(support::ANSWER_TIMEOUT, listener.recv_from(&mut buf)).await.unwrap().unwrap();
    let message = mqttsn_codec::decode(&buf[..len]).unwrap();
    assert_eq!(message, Message::Advertise(Advertise { gw_id: 3, duration: 60 }));
    gw.stop().await;
}

#[tokio::test]
async fn connect_disconnect_and_the_connection_gauge() {
    let gw = support::start(support::config()).await;
    let client = gw.client().await;
    assert_eq!(client.connect("c1", 60, true).await, ReturnCode::Accepted);
    gw.eventually("one open connection", |gw| gw.connections_open() == 1).await;
    client.send(&Message::PingReq { client_id: None }).await;
    assert_eq!(client.recv().await, Message::PingResp);
    client.disconnect(None).await;
    gw.eventually("no open connection", |gw| gw.connections_open() == 0).await;
    let counters = gw.metrics().protocol(Protocol::MqttSn);
    assert_eq!(counters.closed_count(CloseReason::ClientClosed), 1);
    // Gone: a PINGREQ now maps to no client and is answered with DISCONNECT (§5.4.21).
    client.send(&Message::PingReq { client_id: None }).await;
    assert_eq!(client.recv().await, Message::Disconnect { duration: None });
    gw.stop().await;
}

#[tokio::test]
async fn connect_refusals_carry_return_codes() {
    let gw = support::start(MqttSnConfig { max_clients: 1, ..support::config() }).await;
    let client = gw.client().await;
    // Unknown protocol id: "rejected: not supported".
    let mut bad = connect("c1", 10, true, false);
    if let Message::Connect(c) = &mut bad {
        c.protocol_id = 2;
    }
    client.send(&bad).await;
    assert_eq!(client.recv().await, Message::ConnAck { return_code: ReturnCode::NotSupported });
    // Empty client id.
    assert_eq!(client.connect("", 10, true).await, ReturnCode::NotSupported);
    // max_clients = 1: the second client gets "rejected: congestion".
    assert_eq!(client.connect("c1", 10, true).await, ReturnCode::Accepted);
    let other = gw.client().await;
    assert_eq!(other.connect("c2", 10, true).await, ReturnCode::Congestion);
    let counters = gw.metrics().protocol(Protocol::MqttSn);
    assert_eq!(counters.connections_refused.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(GatewayStats::get(&gw.stats.refused), 3);
    gw.stop().await;
}

#[tokio::test]
async fn will_handshake_then_updates_then_the_will_fires_on_keep_alive_timeout() {
    let gw = support::start(support::config()).await;
    let peer = gw.mqtt_peer();
    peer.subscribe("wills/#");
    let client = gw.client().await;
    let will = WillTopic { qos: QoS::One, retain: false, topic: "wills/first".into() };
    assert_eq!(client.connect_with_will("dying", 1, will, b"first words").await, ReturnCode::Accepted);

    // §6.4: WILLTOPICUPD / WILLMSGUPD, each answered with its RESP.
    let update = WillTopic { qos: QoS::One, retain: false, topic: "wills/dying".into() };
    client.send(&Message::WillTopicUpd(Some(update))).await;
    assert_eq!(client.recv().await, Message::WillTopicResp { return_code: ReturnCode::Accepted });
    client.send(&Message::WillMsgUpd { will_msg: Bytes::from_static(b"last words") }).await;
    assert_eq!(client.recv().await, Message::WillMsgResp { return_code: ReturnCode::Accepted });
    // An invalid will topic is refused and the old one kept.
    let bad = WillTopic { qos: QoS::Zero, retain: false, topic: "wills/+".into() };
    client.send(&Message::WillTopicUpd(Some(bad))).await;
    assert_eq!(client.recv().await, Message::WillTopicResp { return_code: ReturnCode::NotSupported });

    // Silent for 1.5 × keep-alive (1 s): lost, and the will is published.
    let will = peer.next().await;
    assert_eq!(will.message.topic, "wills/dying");
    assert_eq!(&will.message.payload[..], b"last words");
    assert_eq!(will.message.qos, CoreQoS::AtLeastOnce);
    assert_eq!(will.message.origin.protocol, Protocol::Internal);
    let counters = gw.metrics().protocol(Protocol::MqttSn);
    gw.eventually("keep-alive close counted", |_| counters.closed_count(CloseReason::KeepAliveTimeout) == 1).await;
    gw.eventually("no open connection", |gw| gw.connections_open() == 0).await;
    gw.stop().await;
}

#[tokio::test]
async fn pings_keep_a_client_alive_and_disconnect_does_not_fire_the_will() {
    let gw = support::start(support::config()).await;
    let peer = gw.mqtt_peer();
    peer.subscribe("wills/#");
    let client = gw.client().await;
    let will = WillTopic { qos: QoS::Zero, retain: false, topic: "wills/polite".into() };
    assert_eq!(client.connect_with_will("polite", 1, will, b"bye").await, ReturnCode::Accepted);
    // Three pings 0.6 s apart span 1.8 s, past the 1.5 s timeout of a silent client.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(600)).await;
        client.send(&Message::PingReq { client_id: None }).await;
        assert_eq!(client.recv().await, Message::PingResp);
    }
    client.disconnect(None).await;
    // An empty will topic in the handshake means "no will" (§5.4.7).
    let other = gw.client().await;
    other.send(&connect("nowill", 60, true, true)).await;
    assert_eq!(other.recv().await, Message::WillTopicReq);
    other.send(&Message::WillTopic(None)).await;
    assert_eq!(other.recv().await, Message::ConnAck { return_code: ReturnCode::Accepted });
    other.disconnect(None).await;
    peer.assert_empty();
    gw.stop().await;
}

#[tokio::test]
async fn an_invalid_will_topic_refuses_the_connect() {
    let gw = support::start(support::config()).await;
    let client = gw.client().await;
    client.send(&connect("w", 60, true, true)).await;
    assert_eq!(client.recv().await, Message::WillTopicReq);
    client.send(&Message::WillTopic(Some(WillTopic { qos: QoS::Zero, retain: false, topic: "a/#".into() }))).await;
    assert_eq!(client.recv().await, Message::ConnAck { return_code: ReturnCode::NotSupported });
    client.send(&Message::PingReq { client_id: None }).await;
    assert_eq!(client.recv().await, Message::Disconnect { duration: None });
    gw.stop().await;
}

#[tokio::test]
async fn the_same_client_id_from_a_new_address_takes_the_session_over() {
    let gw = support::start(support::config()).await;
    let first = gw.client().await;
    assert_eq!(first.connect("roamer", 60, true).await, ReturnCode::Accepted);
    let second = gw.client().await;
    assert_eq!(second.connect("roamer", 60, true).await, ReturnCode::Accepted);
    // The old address is told, and no longer maps to a client.
    assert_eq!(first.recv().await, Message::Disconnect { duration: None });
    let counters = gw.metrics().protocol(Protocol::MqttSn);
    assert_eq!(counters.closed_count(CloseReason::SessionTakenOver), 1);
    second.send(&Message::PingReq { client_id: None }).await;
    assert_eq!(second.recv().await, Message::PingResp);
    gw.eventually("one open connection", |gw| gw.connections_open() == 1).await;
    gw.stop().await;
}

#[tokio::test]
async fn shutdown_says_goodbye_to_connected_clients() {
    let gw = support::start(support::config()).await;
    let client = gw.client().await;
    assert_eq!(client.connect("c", 60, true).await, ReturnCode::Accepted);
    let counters_owner = gw.router.clone();
    gw.stop().await;
    assert_eq!(client.recv().await, Message::Disconnect { duration: None });
    let counters = counters_owner.metrics().protocol(Protocol::MqttSn);
    assert_eq!(counters.closed_count(CloseReason::Shutdown), 1);
    assert_eq!(counters.connections_open.load(std::sync::atomic::Ordering::Relaxed), 0);
}
