//! What a persistent session's client held in flight when the broker went away is resumed
//! after a restart on the same store under the same packet ids (MQTT-4.4.0-1): an unacknowledged
//! QoS 1 message is sent again with DUP under its old id, and a QoS 2 message the client had
//! received (PUBREC) is not sent again; only its PUBREL is.

mod common;

use std::num::NonZeroU16;
use std::sync::Arc;

use bytes::Bytes;
use common::{Raw, config, pid, start_on};
use rmqtt_codec::types::{Publish, QoS};
use rmqtt_codec::v3::Packet;
use tolk_core::{Metrics, Router, RouterConfig};
use tolk_store::{FjallStore, StorageConfig};

fn publish(topic: &str, qos: QoS, id: u16) -> Packet {
    Packet::Publish(Box::new(Publish {
        dup: false,
        retain: false,
        qos,
        topic: topic.into(),
        packet_id: NonZeroU16::new(id),
        payload: Bytes::copy_from_slice(topic.as_bytes()),
        properties: None,
    }))
}

fn open_store(dir: &tempfile::TempDir) -> Arc<FjallStore> {
    FjallStore::open(dir.path(), &StorageConfig::default()).unwrap()
}

/// A router on `store`, with what it kept restored.
fn router(store: Arc<FjallStore>) -> Router {
    let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
    router.attach_store(store).unwrap();
    router
}

async fn recv_publish(raw: &mut Raw) -> Box<Publish> {
    match raw.recv3().await {
        Some(Packet::Publish(p)) => p,
        other => panic!("expected PUBLISH, got {other:?}"),
    }
}

#[tokio::test]
async fn in_flight_deliveries_resume_under_their_packet_ids_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let open = || open_store(&dir);

    let store = open();
    let broker = start_on(config(), router(store.clone())).await;
    let (mut sub, ack) = Raw::handshake3(broker.port, "kept", false, 60).await;
    assert!(!ack.session_present);
    sub.send3(Packet::Subscribe { packet_id: pid(1), topic_filters: vec![("k/#".into(), QoS::ExactlyOnce)] }).await;
    assert!(matches!(sub.recv3().await, Some(Packet::SubscribeAck { .. })));

    // Earlier deliveries, acknowledged, so that the ids in flight are not the first ones a
    // fresh allocator would give.
    let (mut publisher, _) = Raw::handshake3(broker.port, "publisher", true, 60).await;
    for _ in 0..3 {
        publisher.send3(publish("k/warm", QoS::AtLeastOnce, 9)).await;
        assert_eq!(publisher.recv3().await, Some(Packet::PublishAck { packet_id: pid(9) }));
        let warm = recv_publish(&mut sub).await;
        sub.send3(Packet::PublishAck { packet_id: warm.packet_id.unwrap() }).await;
    }
    publisher.send3(publish("k/one", QoS::AtLeastOnce, 1)).await;
    assert_eq!(publisher.recv3().await, Some(Packet::PublishAck { packet_id: pid(1) }));
    publisher.send3(publish("k/two", QoS::ExactlyOnce, 2)).await;
    assert_eq!(publisher.recv3().await, Some(Packet::PublishReceived { packet_id: pid(2) }));

    // QoS 1: left unacknowledged. QoS 2: received, so the broker releases it.
    let one = recv_publish(&mut sub).await;
    let two = recv_publish(&mut sub).await;
    assert_eq!((&*one.topic, one.qos, one.dup), ("k/one", QoS::AtLeastOnce, false));
    assert_eq!((&*two.topic, two.qos), ("k/two", QoS::ExactlyOnce));
    let (one_id, two_id) = (one.packet_id.unwrap(), two.packet_id.unwrap());
    sub.send3(Packet::PublishReceived { packet_id: two_id }).await;
    assert_eq!(sub.recv3().await, Some(Packet::PublishRelease { packet_id: two_id }));

    // The process goes: nothing of the old connection is told anything.
    broker.stop().await;
    drop((sub, publisher));
    store.close();
    drop(store);

    let store = open();
    let broker = start_on(config(), router(store.clone())).await;
    let (mut sub, ack) = Raw::handshake3(broker.port, "kept", false, 60).await;
    assert!(ack.session_present);
    assert_eq!(sub.recv3().await, Some(Packet::PublishRelease { packet_id: two_id }), "only the release of k/two");
    let again = recv_publish(&mut sub).await;
    assert_eq!(
        (&*again.topic, again.packet_id, again.dup, &again.payload[..]),
        ("k/one", Some(one_id), true, &b"k/one"[..]),
        "k/one again, under its old id, marked DUP"
    );
    sub.send3(Packet::PublishAck { packet_id: one_id }).await;
    sub.send3(Packet::PublishComplete { packet_id: two_id }).await;

    // Both flows are complete: a new message comes, and nothing else.
    let (mut publisher, _) = Raw::handshake3(broker.port, "publisher", true, 60).await;
    publisher.send3(publish("k/three", QoS::AtLeastOnce, 3)).await;
    assert_eq!(publisher.recv3().await, Some(Packet::PublishAck { packet_id: pid(3) }));
    let three = recv_publish(&mut sub).await;
    assert_eq!(&*three.topic, "k/three");
    broker.stop().await;
    store.close();
}

#[tokio::test]
async fn a_shared_group_of_persistent_members_keeps_its_messages_while_they_are_away_and_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let open = || open_store(&dir);
    let subscribe =
        |filter: &str| Packet::Subscribe { packet_id: pid(1), topic_filters: vec![(filter.into(), QoS::AtLeastOnce)] };

    let store = open();
    let broker = start_on(config(), router(store.clone())).await;
    let (mut worker, _) = Raw::handshake3(broker.port, "worker", false, 60).await;
    worker.send3(subscribe("$share/g/jobs/#")).await;
    assert!(matches!(worker.recv3().await, Some(Packet::SubscribeAck { .. })));
    let (mut passing, _) = Raw::handshake3(broker.port, "passing", true, 60).await;
    passing.send3(subscribe("$share/clean/jobs/#")).await;
    assert!(matches!(passing.recv3().await, Some(Packet::SubscribeAck { .. })));
    worker.send3(Packet::Disconnect).await;
    worker.expect_closed().await;

    // The only member is away: the group keeps what comes, on disk before the PUBACK.
    let (mut publisher, _) = Raw::handshake3(broker.port, "publisher", true, 60).await;
    publisher.send3(publish("jobs/1", QoS::AtLeastOnce, 1)).await;
    assert_eq!(publisher.recv3().await, Some(Packet::PublishAck { packet_id: pid(1) }));
    broker.stop().await;
    drop((publisher, passing));
    store.close();
    drop(store);

    let store = open();
    let broker = start_on(config(), router(store.clone())).await;
    assert!(broker.router.queue("$share/g/jobs/#").is_some(), "the persistent member's group is back");
    assert!(broker.router.queue("$share/clean/jobs/#").is_none(), "a group of clean sessions is not");
    let (mut publisher, _) = Raw::handshake3(broker.port, "publisher", true, 60).await;
    publisher.send3(publish("jobs/2", QoS::AtLeastOnce, 2)).await;
    assert_eq!(publisher.recv3().await, Some(Packet::PublishAck { packet_id: pid(2) }));

    let (mut worker, ack) = Raw::handshake3(broker.port, "worker", false, 60).await;
    assert!(ack.session_present);
    for topic in ["jobs/1", "jobs/2"] {
        let p = recv_publish(&mut worker).await;
        assert_eq!(&*p.topic, topic);
        worker.send3(Packet::PublishAck { packet_id: p.packet_id.unwrap() }).await;
    }
    broker.stop().await;
    store.close();
}
