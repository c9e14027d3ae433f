//! A broker in a test: a router with one front end, bridges started on it, and core sessions
//! standing in for its clients. Shared by the bridge kinds' tests (feature `testing`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tolk_core::frontend::{FrontEnd, FrontEndContext};
use tolk_core::{
    Delivery, Message, Metrics, Origin, Protocol, QoS, Router, RouterConfig, Session, SubscriptionOptions,
};

use crate::{BridgeConfig, Bridges, Runner};

/// How long any one expectation may take.
pub const WAIT: Duration = Duration::from_secs(10);

/// A router named `node` with one front end listening on a loopback port.
pub struct TestBroker {
    /// Its context (router, shutdown, tasks).
    pub ctx: FrontEndContext,
    /// The front end's first bound port.
    pub port: u16,
}

impl TestBroker {
    /// Starts `front_end` on a new router named `node`.
    pub async fn start(node: &str, front_end: Box<dyn FrontEnd>) -> TestBroker {
        let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
        router.set_node_name(node);
        let ctx = FrontEndContext::new(router, std::env::temp_dir());
        let started = front_end.start(ctx.clone()).await.expect("the front end starts");
        TestBroker { ctx, port: started.addrs[0].port() }
    }

    /// Starts the bridge `config` (quick reconnects) with `runner`, and waits until it is up.
    pub async fn bridge(&self, mut config: BridgeConfig, runner: (crate::Kind, Runner)) {
        config.reconnect_min = Duration::from_millis(50);
        config.reconnect_max = Duration::from_millis(200);
        let name = config.name.clone();
        let bridges = Box::new(Bridges::new(vec![config], vec![runner]));
        bridges.start(self.ctx.clone()).await.expect("the bridge starts");
        self.eventually("the bridge is up", |b| {
            b.ctx.router.metrics().bridges().statuses().iter().any(|s| s.name == name && s.state == "up")
        })
        .await;
    }

    /// A client here, subscribed to `filter`.
    pub fn subscriber(&self, filter: &str) -> Session {
        let session = self.ctx.router.open_session(Protocol::Mqtt);
        session.subscribe(filter, 0, SubscriptionOptions::default()).expect("a valid filter");
        session
    }

    /// A client here that publishes.
    pub fn publisher(&self) -> Session {
        self.ctx.router.open_session(Protocol::Mqtt)
    }

    /// Publishes `payload` to `topic` at QoS 1 from `session`.
    pub fn publish(&self, session: &Session, topic: &str, payload: &str) {
        let origin = Origin { protocol: Protocol::Mqtt, session: session.id(), client_id: "publisher".into() };
        let mut message = Message::new(topic, Bytes::copy_from_slice(payload.as_bytes()), origin);
        message.qos = QoS::AtLeastOnce;
        session.publish(Arc::new(message));
    }

    /// Waits until `check` holds, polling (for states without an event to wait on).
    pub async fn eventually(&self, what: &str, check: impl Fn(&TestBroker) -> bool) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while !check(self) {
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops every task.
    pub async fn stop(self) {
        self.ctx.shutdown.cancel();
        self.ctx.tracker.close();
        tokio::time::timeout(WAIT, self.ctx.tracker.wait()).await.expect("the broker stops");
    }
}

/// The next delivery to `session`.
pub async fn next(session: &Session) -> Delivery {
    let mut got = Vec::new();
    tokio::time::timeout(WAIT, session.receiver().drain(&mut got, 1)).await.expect("a delivery").expect("no overflow");
    got.pop().expect("one delivery")
}

/// Everything delivered to `session` before a message on `marker`.
pub async fn until(session: &Session, marker: &str) -> Vec<Delivery> {
    let mut before = Vec::new();
    loop {
        let delivery = next(session).await;
        if delivery.message.topic == marker {
            return before;
        }
        before.push(delivery);
    }
}
