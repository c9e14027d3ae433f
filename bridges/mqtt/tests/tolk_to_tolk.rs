//! Two brokers in one process, each a router with its MQTT front end; the bridge connects the
//! first to the second over a real socket. Messages cross both ways once, carry the path, and
//! do not loop when both brokers bridge each other.

use std::net::SocketAddr;

use tolk_bridge::testing::{TestBroker, next, until};
use tolk_bridge::{BridgeConfig, Kind};
use tolk_core::{Protocol, QoS, path};
use tolk_mqtt::{MqttConfig, MqttFrontEnd};

async fn broker(node: &str) -> TestBroker {
    let config = MqttConfig { bind: SocketAddr::from(([127, 0, 0, 1], 0)), ..MqttConfig::default() };
    TestBroker::start(node, Box::new(MqttFrontEnd::new(config))).await
}

fn bridge(name: &str, to: &TestBroker, topics: &[&str]) -> BridgeConfig {
    BridgeConfig::new(name, Kind::Mqtt, &format!("mqtt://127.0.0.1:{}", to.port), topics)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_cross_both_ways_once_with_their_path_and_prefixes() {
    let (a, b) = (broker("a").await, broker("b").await);
    a.bridge(bridge("to-b", &b, &["sensors/# out 1", "cmd/# in 1 site1/ \"\""]), tolk_bridge_mqtt::runner()).await;
    let (at_a, at_b) = (a.subscriber("#"), b.subscriber("#"));
    let (publisher_a, publisher_b) = (a.publisher(), b.publisher());

    a.publish(&publisher_a, "sensors/t1", "21.5");
    let d = next(&at_b).await;
    assert_eq!(
        (&*d.message.topic, &d.message.payload[..], d.message.qos),
        ("sensors/t1", &b"21.5"[..], QoS::AtLeastOnce)
    );
    assert_eq!(path::nodes(&d.message).collect::<Vec<_>>(), ["a"], "the path names the node it left");

    b.publish(&publisher_b, "cmd/valve", "open");
    let mut got = next(&at_a).await;
    if got.message.topic == "sensors/t1" {
        got = next(&at_a).await; // a's own publish, seen by a's subscriber first
    }
    assert_eq!((&*got.message.topic, &got.message.payload[..]), ("site1/cmd/valve", &b"open"[..]));
    assert_eq!(got.message.origin.protocol, Protocol::Bridge);
    assert_eq!(path::nodes(&got.message).collect::<Vec<_>>(), ["to-b"], "the remote's name, by default the bridge's");

    // Nothing else crossed: markers published last arrive next.
    a.publish(&publisher_a, "marker/a", "");
    b.publish(&publisher_b, "marker/b", "");
    assert!(until(&at_b, "marker/b").await.iter().all(|d| d.message.topic == "cmd/valve"), "only b's own traffic at b");
    assert!(until(&at_a, "marker/a").await.is_empty());
    let status = &a.ctx.router.metrics().bridges().statuses()[0];
    assert_eq!((status.messages_out, status.messages_in), (1, 1));
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_brokers_bridged_both_ways_on_everything_deliver_one_copy() {
    let (a, b) = (broker("a").await, broker("b").await);
    // Each sends all of its topics to the other.
    a.bridge(bridge("to-b", &b, &["# out 1"]), tolk_bridge_mqtt::runner()).await;
    b.bridge(bridge("to-a", &a, &["# out 1"]), tolk_bridge_mqtt::runner()).await;
    let (at_a, at_b) = (a.subscriber("data/#"), b.subscriber("data/#"));
    let (pa, pb) = (a.publisher(), b.publisher());
    for i in 0..20 {
        a.publish(&pa, &format!("data/a/{i}"), "x");
        b.publish(&pb, &format!("data/b/{i}"), "y");
    }
    a.publish(&pa, "data/end-a", "");
    b.publish(&pb, "data/end-b", "");
    // Each side gets its own 20 and the other's 20, once each, then both end markers.
    for (side, session) in [("a", &at_a), ("b", &at_b)] {
        let mut topics = Vec::new();
        while topics.iter().filter(|t: &&String| t.starts_with("data/end")).count() < 2 {
            topics.push(next(session).await.message.topic.to_string());
        }
        let data: Vec<&String> = topics.iter().filter(|t| !t.starts_with("data/end")).collect();
        let mut unique = data.clone();
        unique.sort();
        unique.dedup();
        assert_eq!((data.len(), unique.len()), (40, 40), "at {side}: {topics:?}");
    }
    // And nothing more comes round: a last marker is the next thing either side sees.
    a.publish(&pa, "data/last", "");
    assert_eq!(next(&at_a).await.message.topic, "data/last");
    assert_eq!(next(&at_b).await.message.topic, "data/last");
    a.stop().await;
    b.stop().await;
}
