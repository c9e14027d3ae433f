//! Pull points are bounded in bytes, each (`pull_point.max_bytes`) and all together
//! (`pull_point.total_max_bytes`): what does not fit is dropped and counted as `queue_full`,
//! a Notify sent straight to a full pull point is refused with a fault, and the bytes held
//! show in the core's memory gauge (`tolk_memory_bytes{kind="pullpoint"}`).

mod common;

use common::*;
use tolk_core::budget::message_cost;
use tolk_core::{DropReason, MemoryKind, Message, Origin, Protocol, SessionId};
use tolk_wsn::{PullPointConfig, WsnConfig};

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

fn with_pull_points(pull_point: PullPointConfig) -> WsnConfig {
    WsnConfig { pull_point, ..test_config() }
}

fn get_messages() -> String {
    envelope(SOAP11, "", "<wsnt:GetMessages/>")
}

/// What one held notification of `payload_len` bytes on topic `topic` is charged.
fn cost(topic: &str, payload_len: usize) -> usize {
    let origin = Origin { protocol: Protocol::Mqtt, session: SessionId(1), client_id: "".into() };
    message_cost(&Message::new(topic, vec![0u8; payload_len], origin))
}

#[tokio::test]
async fn a_pull_point_nobody_pulls_from_holds_at_most_max_bytes() {
    // The defaults: 4 MiB per pull point; 1,024 notifications would allow far more.
    let broker = Broker::start(with_pull_points(PullPointConfig::default())).await;
    let pull_point = broker.create_pull_point().await;
    broker.subscribe(&pull_point, &topic_filter(SIMPLE, "tns:big")).await;
    let mqtt = broker.mqtt_session();
    for _ in 0..6 {
        broker.publish_mqtt(&mqtt, "big", &vec![b'x'; MIB]);
    }
    let counters = broker.metrics().protocol(Protocol::Wsn);
    let memory = broker.metrics().memory();
    eventually("the pull point's task to take the burst", || counters.dropped_count(DropReason::QueueFull) == 3).await;
    assert_eq!(memory.held(MemoryKind::PullPoint), 3 * cost("big", MIB), "three fit in 4 MiB, three were dropped");

    let reply = broker.post_to(&pull_point, get_messages()).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body.matches("<wsnt:NotificationMessage>").count(), 3);
    assert_eq!(memory.held(MemoryKind::PullPoint), 0, "taking releases");
    broker.stop().await;
}

#[tokio::test]
async fn all_pull_points_together_stay_under_the_total() {
    let limits = PullPointConfig { max_bytes: 64 * KIB, total_max_bytes: 96 * KIB, ..PullPointConfig::default() };
    let broker = Broker::start(with_pull_points(limits)).await;
    let first = broker.create_pull_point().await;
    let second = broker.create_pull_point().await;
    for pull_point in [&first, &second] {
        broker.subscribe(pull_point, &topic_filter(SIMPLE, "tns:t")).await;
    }
    let mqtt = broker.mqtt_session();
    for _ in 0..5 {
        broker.publish_mqtt(&mqtt, "t", &vec![b'x'; 20 * KIB]);
    }
    // Ten deliveries of about 20 KiB: at most three fit one pull point (64 KiB) and four fit
    // both (96 KiB), however the two tasks interleave.
    let counters = broker.metrics().protocol(Protocol::Wsn);
    eventually("both pull points to take the burst", || counters.dropped_count(DropReason::QueueFull) == 6).await;
    assert_eq!(broker.metrics().memory().held(MemoryKind::PullPoint), 4 * cost("t", 20 * KIB));
    let mut held = 0;
    for pull_point in [&first, &second] {
        held += broker.post_to(pull_point, get_messages()).await.body.matches("<wsnt:NotificationMessage>").count();
    }
    assert_eq!(held, 4);
    broker.stop().await;
}

#[tokio::test]
async fn a_notify_into_a_full_pull_point_is_refused_until_it_is_emptied() {
    let limits = PullPointConfig { max_bytes: 4 * KIB, ..PullPointConfig::default() };
    let broker = Broker::start(with_pull_points(limits)).await;
    let pull_point = broker.create_pull_point().await;
    let big = format!("<v>{}</v>", "x".repeat(2 * KIB));
    let notify = notify_doc(SOAP11, &[("tns:a", &big)]);
    assert_eq!(broker.post_to(&pull_point, notify.clone()).await.status, 202);
    // A second one does not fit: the publisher is told, nothing is stored.
    let reply = broker.post_to(&pull_point, notify.clone()).await;
    reply.assert_fault(500, "pull point is full");
    let counters = broker.metrics().protocol(Protocol::Wsn);
    assert_eq!(counters.dropped_count(DropReason::QueueFull), 1);
    // GetMessages makes room.
    let reply = broker.post_to(&pull_point, get_messages()).await;
    assert_eq!(reply.body.matches("<wsnt:NotificationMessage>").count(), 1);
    assert_eq!(broker.post_to(&pull_point, notify).await.status, 202);
    // Destroying the pull point releases what it held.
    assert_eq!(broker.post_to(&pull_point, simple_doc("DestroyPullPoint")).await.status, 200);
    assert_eq!(broker.metrics().memory().held(MemoryKind::PullPoint), 0);
    broker.stop().await;
}
