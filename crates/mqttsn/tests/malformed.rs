//! Bad input is contained: malformed datagrams are dropped and counted, messages that need a
//! connection are answered with DISCONNECT, invalid requests are refused with their return code,
//! and the gateway (and every other client) carries on.

mod support;

use std::time::Duration;

use bytes::Bytes;
use mqttsn_codec::{Encapsulated, Message, PubAck, Publish, PublishTopic, QoS, Register, ReturnCode, SubscribeTopic};
use tolk_core::{DropReason, Protocol};
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

#[tokio::test]
async fn every_datagram_dropped_as_bad_input_is_counted_as_malformed_in_the_broker_metrics() {
    let gw = support::start(MqttSnConfig { max_message_size_bytes: 64, ..support::config() }).await;
    let stranger = gw.client().await;
    // Does not decode; larger than max_message_size_bytes.
    stranger.send_raw(&[0x02, 0x03]).await;
    stranger.send_raw(&[0x00; 70]).await;
    // Needs a session: a PUBLISH, and a PINGREQ naming a client that is not at this address.
    let data = Bytes::from_static(b"x");
    let publish =
        Publish { dup: false, qos: QoS::Zero, retain: false, topic: PublishTopic::Short(*b"ab"), msg_id: 0, data };
    stranger.send(&Message::Publish(publish.clone())).await;
    stranger.send(&Message::PingReq { client_id: Some("nobody".into()) }).await;
    // QoS −1 to a registered id (§6.8 allows pre-defined and short topics only).
    let anonymous = Publish { qos: QoS::MinusOne, topic: PublishTopic::Normal(1), ..publish };
    stranger.send(&Message::Publish(anonymous)).await;
    // Never from a client: a forwarder encapsulation (not supported).
    let wrapped = Encapsulated {
        ctrl: 0,
        wireless_node_id: Bytes::from_static(b"node"),
        message: Box::new(Message::PingReq { client_id: None }),
    };
    stranger.send(&Message::Encapsulated(wrapped)).await;
    let disconnect = vec![0x02, 0x18];
    assert_eq!(stranger.answers_so_far().await, [disconnect.clone(), disconnect]);

    let client = gw.client().await;
    // A CONNECT that is not MQTT-SN 1.2.
    let mut foreign = support::client::connect("c", 60, true, true);
    if let Message::Connect(c) = &mut foreign {
        c.protocol_id = 0x02;
    }
    client.send(&foreign).await;
    assert_eq!(client.recv().await, Message::ConnAck { return_code: ReturnCode::NotSupported });
    // Out of order during the will handshake: a PINGREQ instead of WILLTOPIC is ignored.
    client.send(&support::client::connect("c", 60, true, true)).await;
    assert_eq!(client.recv().await, Message::WillTopicReq);
    client.send(&Message::PingReq { client_id: None }).await;
    client.send(&Message::WillTopic(None)).await;
    assert_eq!(client.recv().await, Message::ConnAck { return_code: ReturnCode::Accepted });
    // Connected: a message only a gateway sends, garbage, and a PUBLISH to an id nobody registered.
    client.send(&Message::WillTopicReq).await;
    client.send_raw(&[0x03, 0xFF, 0x00]).await;
    let unknown = Publish {
        dup: false,
        qos: QoS::Zero,
        retain: false,
        topic: PublishTopic::Normal(77),
        msg_id: 0,
        data: Bytes::new(),
    };
    client.send(&Message::Publish(unknown)).await;
    let refusal = Message::PubAck(PubAck { topic_id: 77, msg_id: 0, return_code: ReturnCode::InvalidTopicId });
    assert_eq!(client.recv().await, refusal);

    let counters = gw.metrics().protocol(Protocol::MqttSn);
    assert_eq!(counters.dropped_count(DropReason::Malformed), 11);
    let text = gw.metrics().render_prometheus();
    assert!(text.contains("tolk_messages_dropped_total{protocol=\"mqttsn\",reason=\"malformed\"} 11\n"), "{text}");
    // The gateway's own counters say which kind.
    assert_eq!(GatewayStats::get(&gw.stats.malformed), 3);
    assert_eq!(GatewayStats::get(&gw.stats.not_connected), 2);
    assert_eq!(GatewayStats::get(&gw.stats.invalid_topic_id), 2);
    assert_eq!(GatewayStats::get(&gw.stats.unsupported), 3);
    assert_eq!(GatewayStats::get(&gw.stats.refused), 1);
    gw.stop().await;
}
