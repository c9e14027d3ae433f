//! Two brokers in one process, each a router with its MQTT front end; the bridge connects the
//! first to the second over a real socket. Messages cross both ways once, carry the path, and
//! do not loop when both brokers bridge each other.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tolk_bridge::{BridgeConfig, Bridges, Kind};
use tolk_core::frontend::{FrontEnd, FrontEndContext};
use tolk_core::{
    Delivery, Message, Metrics, Origin, Protocol, QoS, Router, RouterConfig, Session, SubscriptionOptions, path,
};
use tolk_mqtt::{MqttConfig, MqttFrontEnd};

const WAIT: Duration = Duration::from_secs(10);

struct Broker {
    ctx: FrontEndContext,
    mqtt_port: u16,
}

impl Broker {
    async fn start(node: &str) -> Broker {
        let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
        router.set_node_name(node);
        let ctx = FrontEndContext::new(router, std::env::temp_dir());
        let config = MqttConfig { bind: SocketAddr::from(([127, 0, 0, 1], 0)), ..MqttConfig::default() };
        let started = Box::new(MqttFrontEnd::new(config)).start(ctx.clone()).await.unwrap();
        Broker { ctx, mqtt_port: started.addrs[0].port() }
    }

    async fn bridge(&self, name: &str, to: &Broker, topics: &[&str]) {
        let mut config = BridgeConfig::new(name, Kind::Mqtt, &format!("mqtt://127.0.0.1:{}", to.mqtt_port), topics);
        config.reconnect_min = Duration::from_millis(50);
        config.reconnect_max = Duration::from_millis(200);
        let bridges = Box::new(Bridges::new(vec![config], vec![tolk_bridge_mqtt::runner()]));
        bridges.start(self.ctx.clone()).await.unwrap();
        self.eventually("the bridge is up", |b| {
            b.ctx.router.metrics().bridges().statuses().iter().any(|s| s.name == name && s.state == "up")
        })
        .await;
    }

    /// A subscriber here, taking everything under `filter`.
    fn subscriber(&self, filter: &str) -> Session {
        let session = self.ctx.router.open_session(Protocol::Mqtt);
        session.subscribe(filter, 0, SubscriptionOptions::default()).unwrap();
        session
    }

    fn publish(&self, session: &Session, topic: &str, payload: &str) {
        let origin = Origin { protocol: Protocol::Mqtt, session: session.id(), client_id: "pub".into() };
        let mut message = Message::new(topic, Bytes::copy_from_slice(payload.as_bytes()), origin);
        message.qos = QoS::AtLeastOnce;
        session.publish(Arc::new(message));
    }

    async fn eventually(&self, what: &str, check: impl Fn(&Broker) -> bool) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while !check(self) {
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn stop(self) {
        self.ctx.shutdown.cancel();
        self.ctx.tracker.close();
        tokio::time::timeout(WAIT, self.ctx.tracker.wait()).await.expect("stops");
    }
}

async fn next(session: &Session) -> Delivery {
    let mut got = Vec::new();
    tokio::time::timeout(WAIT, session.receiver().drain(&mut got, 1)).await.expect("a delivery").unwrap();
    got.pop().unwrap()
}

/// Waits until `marker` arrives, and returns everything that arrived before it.
async fn until(session: &Session, marker: &str) -> Vec<Delivery> {
    let mut before = Vec::new();
    loop {
        let d = next(session).await;
        if d.message.topic == marker {
            return before;
        }
        before.push(d);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_cross_both_ways_once_with_their_path_and_prefixes() {
    let (a, b) = (Broker::start("a").await, Broker::start("b").await);
    a.bridge("to-b", &b, &["sensors/# out 1", "cmd/# in 1 site1/ \"\""]).await;

    let at_b = b.subscriber("#");
    let at_a = a.subscriber("#");
    let publisher_a = a.ctx.router.open_session(Protocol::Mqtt);
    let publisher_b = b.ctx.router.open_session(Protocol::Mqtt);

    a.publish(&publisher_a, "sensors/t1", "21.5");
    let d = next(&at_b).await;
    assert_eq!(
        (d.message.topic.as_str(), &d.message.payload[..], d.message.qos),
        ("sensors/t1", &b"21.5"[..], QoS::AtLeastOnce)
    );
    assert_eq!(path::nodes(&d.message).collect::<Vec<_>>(), ["a"], "the path names the node it left");

    b.publish(&publisher_b, "cmd/valve", "open");
    let mut got = next(&at_a).await;
    if got.message.topic == "sensors/t1" {
        got = next(&at_a).await; // a's own publish, seen by a's subscriber first
    }
    assert_eq!((got.message.topic.as_str(), &got.message.payload[..]), ("site1/cmd/valve", &b"open"[..]));
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
    let (a, b) = (Broker::start("a").await, Broker::start("b").await);
    // Each sends all of its topics to the other.
    a.bridge("to-b", &b, &["# out 1"]).await;
    b.bridge("to-a", &a, &["# out 1"]).await;
    let (at_a, at_b) = (a.subscriber("data/#"), b.subscriber("data/#"));
    let (pa, pb) = (a.ctx.router.open_session(Protocol::Mqtt), b.ctx.router.open_session(Protocol::Mqtt));
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
            topics.push(next(session).await.message.topic.clone());
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
