//! Bad input is contained: malformed datagrams are dropped and counted, messages that need a
//! connection are answered with DISCONNECT, invalid requests are refused with their return code,
//! and the gateway (and every other client) carries on.

mod support;

use std::time::Duration;

use bytes::Bytes;
use mqttsn_codec::{Encapsulated, Message, Publish, PublishTopic, QoS, Register, ReturnCode, SubscribeTopic};
use tolk_mqttsn::{GatewayStats, MqttSnConfig};

#[tokio::test]
async fn malformed_datagrams_are_dropped_counted_and_unanswered() {
    let gw = support::start(MqttSnConfig { max_message_size_bytes: 64, ..support::config() }).await;
    let client = gw.client().await;
    let oversized = {
        let mut datagram = vec![70, 0x0C, 0x00, 0x00, 0x01, 0x00, 0x00];
        datagram.resize(70, b'x');
        datagram
    };
    let garbage: [&[u8]; 7] = [
        &[],                       // no Length at all
        &[0x05, 0x16],             // Length larger than the datagram
        &[0x02, 0x16, 0x00],       // trailing octet after a PINGREQ
        &[0x00, 0x16],             // Length 0
        &[0x02, 0x03],             // reserved MsgType 0x03
        &[0x01, 0x00, 0x02, 0x16], // three-octet Length below its own header
        &oversized,                // over max_message_size_bytes
    ];
    for datagram in garbage {
        client.send_raw(datagram).await;
    }
    // The first answer the client gets is to this PINGREQ: nothing was sent for the garbage.
    client.send(&Message::PingReq { client_id: None }).await;
    assert_eq!(client.recv().await, Message::Disconnect { duration: None });
    assert_eq!(GatewayStats::get(&gw.stats.malformed), 7);
    // Still serving.
    assert_eq!(client.connect("after-garbage", 60, true).await, ReturnCode::Accepted);
    gw.stop().await;
}

#[tokio::test]
async fn garbage_from_a_connected_client_does_not_disconnect_it() {
    let gw = support::start(support::config()).await;
    let client = gw.client().await;
    assert_eq!(client.connect("noisy", 60, true).await, ReturnCode::Accepted);
    client.send_raw(&[0x03, 0xFF, 0x00]).await;
    client.send_raw(&[0x09, 0x0C, 0x00]).await;
    client.send(&Message::PingReq { client_id: None }).await;
    assert_eq!(client.recv().await, Message::PingResp);
    assert_eq!(GatewayStats::get(&gw.stats.malformed), 2);
    gw.stop().await;
}

#[tokio::test]
async fn session_messages_before_connect_are_answered_with_disconnect_and_not_routed() {
    let gw = support::start(support::config()).await;
    let peer = gw.mqtt_peer();
    peer.subscribe("#");
    let client = gw.client().await;
    for qos in [QoS::Zero, QoS::One, QoS::Two] {
        let msg_id = u16::from(qos != QoS::Zero);
        let data = Bytes::from_static(b"too early");
        let publish = Publish { dup: false, qos, retain: false, topic: PublishTopic::Short(*b"ab"), msg_id, data };
        client.send(&Message::Publish(publish)).await;
        assert_eq!(client.recv().await, Message::Disconnect { duration: None }, "QoS {qos:?}");
    }
    client.send(&Message::Register(Register { topic_id: 0, msg_id: 1, topic_name: "a".into() })).await;
    assert_eq!(client.recv().await, Message::Disconnect { duration: None });
    peer.assert_empty();
    assert_eq!(GatewayStats::get(&gw.stats.not_connected), 4);
    gw.stop().await;
}

#[tokio::test]
async fn invalid_requests_are_refused_with_their_return_codes() {
    let gw = support::start(MqttSnConfig { max_topic_ids: 1, ..support::config() }).await;
    let mut client = gw.client().await;
    assert_eq!(client.connect("picky", 60, true).await, ReturnCode::Accepted);
    for name in ["", "a/+", "a/#", "nul\0"] {
        let regack = client.register(name).await;
        assert_eq!((regack.topic_id, regack.return_code), (0, ReturnCode::InvalidTopicId), "REGISTER {name:?}");
    }
    // The registry holds one name: a second new one is refused with "congestion".
    client.register_ok("only").await;
    assert_eq!(client.register("second").await.return_code, ReturnCode::Congestion);
    let suback = client.subscribe(SubscribeTopic::Name("a/#/b".into()), QoS::Zero).await;
    assert_eq!(suback.return_code, ReturnCode::InvalidTopicId);
    let suback = client.subscribe(SubscribeTopic::Name("x".into()), QoS::MinusOne).await;
    assert_eq!(suback.return_code, ReturnCode::NotSupported);
    let suback = client.subscribe(SubscribeTopic::Short([0xFF, 0xFE]), QoS::Zero).await;
    assert_eq!(suback.return_code, ReturnCode::InvalidTopicId);
    assert_eq!(GatewayStats::get(&gw.stats.refused), 8);
    gw.stop().await;
}

#[tokio::test]
async fn forwarder_encapsulation_is_dropped_and_counted() {
    let gw = support::start(support::config()).await;
    let client = gw.client().await;
    let wrapped = Encapsulated {
        ctrl: 0,
        wireless_node_id: Bytes::from_static(b"node"),
        message: Box::new(Message::SearchGw { radius: 0 }),
    };
    client.send(&Message::Encapsulated(wrapped)).await;
    client.expect_nothing(Duration::from_millis(150)).await;
    assert_eq!(GatewayStats::get(&gw.stats.unsupported), 1);
    gw.stop().await;
}
