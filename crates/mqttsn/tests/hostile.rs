//! Hostile peers: a CONNECT flood from one address, sessions that never become active or never
//! say anything, keep-alive 0, and datagrams that would make the gateway reflect far more bytes
//! than it received to an address that never proved it is the sender.

mod support;

use std::net::IpAddr;
use std::time::Duration;

use bytes::Bytes;
use mqttsn_codec::{Message, PublishTopic, QoS, ReturnCode, SubscribeTopic, WillTopic, encoded_len};
use support::client::connect;
use support::{ANSWER_TIMEOUT, TestClient};
use tolk_core::{CloseReason, Protocol, QoS as CoreQoS};
use tolk_mqttsn::{GatewayStats, MqttSnConfig, RetransmitConfig};

/// CONNACK with return code 0x01 "rejected: congestion" (§5.4.5).
const CONNACK_CONGESTION: [u8; 3] = [0x03, 0x05, 0x01];
/// CONNACK "accepted".
const CONNACK_ACCEPTED: [u8; 3] = [0x03, 0x05, 0x00];
/// DISCONNECT without a duration (§5.4.21).
const DISCONNECT: [u8; 2] = [0x02, 0x18];

#[tokio::test]
async fn a_connect_flood_from_one_address_cannot_lock_out_other_addresses() {
    let per_address = tolk_mqttsn::default_max_clients_per_address();
    let flood_size = per_address + 50;
    let gw = support::start(MqttSnConfig { max_clients: flood_size, ..support::config() }).await;
    // Distinct client ids from distinct ports of one host, asking for no keep-alive supervision.
    let mut flood = Vec::with_capacity(flood_size);
    for i in 0..flood_size {
        let client = gw.client().await;
        client.send(&connect(&format!("flood-{i}"), 0, true, false)).await;
        let answer = client.recv_raw_within(ANSWER_TIMEOUT).await.expect("no CONNACK");
        let expected = if i < per_address { CONNACK_ACCEPTED } else { CONNACK_CONGESTION };
        assert_eq!(answer, expected, "CONNACK to flood CONNECT {i}");
        // Kept open, so that no later client gets the same port.
        flood.push(client);
    }
    // A sensor on another host still gets in.
    let sensor = TestClient::bind(IpAddr::from([127, 0, 0, 2]), gw.addr).await;
    assert_eq!(sensor.connect("sensor", 60, true).await, ReturnCode::Accepted);
    let refused = (flood_size - per_address) as u64;
    let counters = gw.metrics().protocol(Protocol::MqttSn);
    assert_eq!(counters.connections_refused.load(std::sync::atomic::Ordering::Relaxed), refused);
    assert_eq!(GatewayStats::get(&gw.stats.refused), refused);
    gw.stop().await;
}

#[tokio::test]
async fn half_open_and_unused_sessions_give_their_slot_back() {
    let config = MqttSnConfig {
        max_clients_per_address: 2,
        handshake_timeout: Duration::from_millis(200),
        first_message_timeout: Duration::from_millis(300),
        // Tretry long enough that a handshake deadline derived from it could not pass in time.
        retransmit: RetransmitConfig { timeout: ANSWER_TIMEOUT, retries: 3 },
        ..support::config()
    };
    let gw = support::start(config).await;
    let counters = gw.metrics().protocol(Protocol::MqttSn);
    let idle = || counters.closed_count(CloseReason::IdleTimeout);
    // Two will handshakes that never go on fill the address.
    for id in ["half-1", "half-2"] {
        let client = gw.client().await;
        client.send(&connect(id, 60, true, true)).await;
        assert_eq!(client.recv().await, Message::WillTopicReq);
    }
    let client = gw.client().await;
    assert_eq!(client.connect("unused", 60, true).await, ReturnCode::Congestion);
    // They expire after handshake_timeout and give their slots back.
    gw.eventually("half-open sessions dropped", |_| idle() == 2).await;
    assert_eq!(client.connect("unused", 60, true).await, ReturnCode::Accepted);
    let used = gw.client().await;
    assert_eq!(used.connect("used", 60, true).await, ReturnCode::Accepted);
    used.send(&Message::PingReq { client_id: None }).await;
    assert_eq!(used.recv().await, Message::PingResp);
    // A client that says nothing after CONNECT is lost after first_message_timeout, long before
    // 1.5 × its 60 s keep-alive; the one that spoke keeps its session.
    gw.eventually("unused session dropped", |_| idle() == 3).await;
    client.send(&Message::PingReq { client_id: None }).await;
    assert_eq!(client.recv().await, Message::Disconnect { duration: None });
    used.send(&Message::PingReq { client_id: None }).await;
    assert_eq!(used.recv().await, Message::PingResp);
    gw.stop().await;
}

#[tokio::test]
async fn keep_alive_zero_or_longer_than_max_keep_alive_is_supervised_at_max_keep_alive() {
    let gw = support::start(MqttSnConfig { max_keep_alive: Duration::from_secs(1), ..support::config() }).await;
    let peer = gw.mqtt_peer();
    peer.subscribe("wills/#");
    let mut clients = Vec::new();
    for (id, keep_alive) in [("never", 0), ("rarely", 3600)] {
        let client = gw.client().await;
        let will = WillTopic { qos: QoS::Zero, retain: false, topic: format!("wills/{id}") };
        assert_eq!(client.connect_with_will(id, keep_alive, will, b"gone").await, ReturnCode::Accepted);
        // Kept open and silent.
        clients.push(client);
    }
    // Both silent for 1.5 × max_keep_alive: lost, and their wills fire.
    let mut topics = [peer.next().await.message.topic.clone(), peer.next().await.message.topic.clone()];
    topics.sort();
    assert_eq!(topics, ["wills/never", "wills/rarely"]);
    let counters = gw.metrics().protocol(Protocol::MqttSn);
    gw.eventually("both counted as idle", |_| counters.closed_count(CloseReason::IdleTimeout) == 2).await;
    gw.stop().await;
}

/// Bytes in the datagrams of `answers`.
fn total(answers: &[Vec<u8>]) -> usize {
    answers.iter().map(Vec::len).sum()
}

#[tokio::test]
async fn naming_a_sleeping_client_from_another_address_is_answered_within_three_times_its_size() {
    // A long Tretry, so that nothing is retransmitted while the test runs.
    let retransmit = RetransmitConfig { timeout: ANSWER_TIMEOUT * 2, retries: 3 };
    let gw = support::start(MqttSnConfig { retransmit, ..support::config() }).await;
    let peer = gw.mqtt_peer();
    // The victim: subscribed at QoS 1, holding one unacknowledged 60 KB PUBLISH, then asleep.
    let mut victim = gw.client().await;
    assert_eq!(victim.connect("sleepy", 60, true).await, ReturnCode::Accepted);
    victim.subscribe(SubscribeTopic::Short(*b"sl"), QoS::One).await;
    peer.publish("sl", &vec![b'x'; 60_000], CoreQoS::AtLeastOnce, false);
    let held = victim.recv_publish().await;
    assert_eq!(held.data.len(), 60_000);
    victim.disconnect(Some(600)).await;

    // The attacker (or a spoofed source) names the sleeping client in a PINGREQ: 8 bytes.
    let attacker = gw.client().await;
    let wake = Message::PingReq { client_id: Some("sleepy".into()) };
    attacker.send(&wake).await;
    let answers = attacker.answers_so_far().await;
    let (sent, received) = (total(&answers), encoded_len(&wake));
    assert!(sent <= 3 * received, "{sent} bytes out for {received} in");
    assert_eq!(answers, [DISCONNECT.to_vec()], "a PINGREQ from another address cannot map to the client");

    // A CONNECT with the sleeping client's id takes the session over (MQTT-SN has no
    // authentication), but the buffered messages wait until the new address speaks again.
    let takeover = connect("sleepy", 60, true, false);
    attacker.send(&takeover).await;
    let answers = attacker.answers_so_far().await;
    let (sent, received) = (total(&answers), encoded_len(&takeover));
    assert!(sent <= 3 * received, "{sent} bytes out for {received} in");
    assert_eq!(answers, [CONNACK_ACCEPTED.to_vec()]);
    // Once the new address has spoken from its active session, the session's messages go there.
    attacker.send(&Message::PingReq { client_id: None }).await;
    let resent = attacker.recv_publish().await;
    assert!(resent.dup);
    assert_eq!((resent.topic, resent.data), (PublishTopic::Short(*b"sl"), Bytes::from(vec![b'x'; 60_000])));
    assert_eq!(attacker.recv().await, Message::PingResp);
    gw.stop().await;
}
