//! Test harness: a gateway started in-process on 127.0.0.1:0 with its own router and data
//! directory, and a core session standing in for an MQTT client on the other side.

#![allow(dead_code)]

pub mod client;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use bytes::Bytes;
use tempfile::TempDir;
use tolk_core::frontend::{FrontEnd, FrontEndContext};
use tolk_core::store::Store;
use tolk_core::{
    Delivery, Message, Metrics, Origin, Protocol, QoS, Router, RouterConfig, Session, SubscriptionOptions,
};
use tolk_mqttsn::{GatewayStats, MqttSnConfig, MqttSnFrontEnd, RetransmitConfig};

pub use client::{ANSWER_TIMEOUT, TestClient};

/// A running gateway.
pub struct Gateway {
    pub router: Router,
    pub ctx: FrontEndContext,
    pub addr: SocketAddr,
    pub stats: Arc<GatewayStats>,
    pub dir: TempDir,
}

/// A configuration for tests: ephemeral port, short retransmission timer.
pub fn config() -> MqttSnConfig {
    MqttSnConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        retransmit: RetransmitConfig { timeout: Duration::from_millis(300), retries: 2 },
        ..MqttSnConfig::default()
    }
}

/// Starts a gateway with `config` in a fresh data directory.
pub async fn start(config: MqttSnConfig) -> Gateway {
    start_in(tempfile::tempdir().unwrap(), config).await
}

/// Starts a gateway with `config` in `dir` (to restart on the same data).
pub async fn start_in(dir: TempDir, config: MqttSnConfig) -> Gateway {
    start_with_router(dir, config, RouterConfig::default()).await
}

/// Starts a gateway whose router has the given limits.
pub async fn start_with_router(dir: TempDir, config: MqttSnConfig, router_config: RouterConfig) -> Gateway {
    start_on(Router::new(router_config, Arc::new(Metrics::new())), dir, config).await
}

/// Starts a gateway in `dir` whose router keeps what it must in `store` (restoring what the
/// store holds first, as the broker does at start).
pub async fn start_with_store(dir: TempDir, config: MqttSnConfig, store: Arc<dyn Store>) -> Gateway {
    let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
    router.attach_store(store).expect("the store loads");
    start_on(router, dir, config).await
}

async fn start_on(router: Router, dir: TempDir, config: MqttSnConfig) -> Gateway {
    let ctx = FrontEndContext::new(router.clone(), dir.path().to_path_buf());
    let front_end = MqttSnFrontEnd::new(config);
    let stats = front_end.stats();
    let addrs = Box::new(front_end).start(ctx.clone()).await.expect("gateway starts").addrs;
    Gateway { router, ctx, addr: addrs[0], stats, dir }
}

/// Tries to start a gateway on existing data; returns the error.
pub async fn start_error(data_dir: &Path, config: MqttSnConfig) -> std::io::Error {
    let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
    let ctx = FrontEndContext::new(router, data_dir.to_path_buf());
    Box::new(MqttSnFrontEnd::new(config)).start(ctx).await.expect_err("start must fail")
}

impl Gateway {
    /// A client for this gateway.
    pub async fn client(&self) -> TestClient {
        TestClient::new(self.addr).await
    }

    /// Stops the gateway and waits for every task; returns the data directory.
    pub async fn stop(self) -> TempDir {
        self.ctx.shutdown.cancel();
        self.ctx.tracker.close();
        tokio::time::timeout(ANSWER_TIMEOUT, self.ctx.tracker.wait()).await.expect("gateway stops");
        self.dir
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        self.router.metrics()
    }

    /// Open MQTT-SN connections by the gauge.
    pub fn connections_open(&self) -> i64 {
        self.metrics().protocol(Protocol::MqttSn).connections_open.load(Relaxed)
    }

    /// Waits until `check` holds (polling; the gauge is updated by another task).
    pub async fn eventually(&self, what: &str, check: impl Fn(&Gateway) -> bool) {
        let deadline = tokio::time::Instant::now() + ANSWER_TIMEOUT;
        while !check(self) {
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// A core session standing in for an MQTT client (origin protocol MQTT).
    pub fn mqtt_peer(&self) -> CorePeer {
        CorePeer { session: self.router.open_session(Protocol::Mqtt), client_id: Arc::from("mqtt-peer") }
    }
}

/// A core session used as the "MQTT side" of cross-protocol tests.
pub struct CorePeer {
    pub session: Session,
    pub client_id: Arc<str>,
}

impl CorePeer {
    pub fn subscribe(&self, filter: &str) {
        self.session.subscribe(filter, 0, SubscriptionOptions::default()).unwrap();
    }

    /// Publishes like an MQTT client would.
    pub fn publish(&self, topic: &str, payload: &[u8], qos: QoS, retain: bool) {
        let origin = Origin { protocol: Protocol::Mqtt, session: self.session.id(), client_id: self.client_id.clone() };
        let mut message = Message::new(topic, Bytes::copy_from_slice(payload), origin);
        message.qos = qos;
        message.retain = retain;
        self.session.publish(Arc::new(message));
    }

    /// The next delivery; panics if none comes in time.
    pub async fn next(&self) -> Delivery {
        let mut got = Vec::new();
        tokio::time::timeout(ANSWER_TIMEOUT, self.session.receiver().drain(&mut got, 1))
            .await
            .expect("no delivery to the core peer")
            .unwrap();
        got.pop().unwrap()
    }

    /// Asserts nothing was delivered (call after the gateway has answered something later).
    pub fn assert_empty(&self) {
        assert!(self.session.receiver().is_empty(), "unexpected delivery to the core peer");
    }
}
