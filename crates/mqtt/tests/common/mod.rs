//! Test harness: an in-process broker on an ephemeral port, rumqttc v4/v5 clients whose events
//! arrive on a channel, and a raw TCP client that speaks packets built with rmqtt-codec.

#![allow(dead_code, unused_imports)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::codec::{Decoder, Encoder};
use tolk_core::frontend::{FrontEnd, FrontEndContext};
use tolk_core::{Metrics, Router, RouterConfig};
use tolk_mqtt::{MqttConfig, MqttFrontEnd};

/// How long any single expectation may take.
pub const WAIT: Duration = Duration::from_secs(5);

pub struct Broker {
    pub port: u16,
    pub ctx: FrontEndContext,
    pub router: Router,
}

pub fn config() -> MqttConfig {
    MqttConfig { bind: SocketAddr::from(([127, 0, 0, 1], 0)), ..MqttConfig::default() }
}

pub async fn start(config: MqttConfig) -> Broker {
    start_with(config, RouterConfig::default()).await
}

pub async fn start_with(config: MqttConfig, router_config: RouterConfig) -> Broker {
    start_with_auth(config, router_config, Arc::new(tolk_core::auth::AllowAll)).await
}

/// A broker on `router` (which may have a store attached: the front end restores what it kept).
pub async fn start_on(config: MqttConfig, router: Router) -> Broker {
    let ctx = FrontEndContext::new(router.clone(), std::env::temp_dir());
    let addrs = Box::new(MqttFrontEnd::new(config)).start(ctx.clone()).await.expect("start").addrs;
    Broker { port: addrs[0].port(), ctx, router }
}

/// A broker whose CONNECTs are checked by `auth`.
pub async fn start_with_auth(
    config: MqttConfig,
    router_config: RouterConfig,
    auth: Arc<dyn tolk_core::auth::Authenticator>,
) -> Broker {
    let router = Router::new(router_config, Arc::new(Metrics::new()));
    let mut ctx = FrontEndContext::new(router.clone(), std::env::temp_dir());
    ctx.auth = auth;
    let addrs = Box::new(MqttFrontEnd::new(config)).start(ctx.clone()).await.expect("start").addrs;
    Broker { port: addrs[0].port(), ctx, router }
}

impl Broker {
    pub async fn stop(self) {
        self.ctx.shutdown.cancel();
        self.ctx.tracker.close();
        tokio::time::timeout(WAIT, self.ctx.tracker.wait()).await.expect("front end stops");
    }

    pub fn metrics(&self) -> &tolk_core::Metrics {
        self.router.metrics()
    }
}

/// Waits for `f` to become true, polling (for conditions without an event to wait on, such
/// as a metric).
pub async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

// ---------------------------------------------------------------- rumqttc 3.1.1 client

pub mod v4 {
    use super::*;
    pub use rumqttc::{AsyncClient, Event, LastWill, MqttOptions, Packet, Publish, QoS};

    pub struct Client {
        pub client: AsyncClient,
        pub events: mpsc::UnboundedReceiver<Result<Event, String>>,
        pub session_present: bool,
        task: tokio::task::JoinHandle<()>,
    }

    pub fn options(port: u16, id: &str) -> MqttOptions {
        let mut o = MqttOptions::new(id, "127.0.0.1", port);
        o.set_keep_alive(Duration::from_secs(30));
        o
    }

    pub async fn connect(options: MqttOptions) -> Client {
        let (client, mut eventloop) = AsyncClient::new(options, 64);
        let (tx, mut events) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            loop {
                match eventloop.poll().await {
                    Ok(e) => {
                        if tx.send(Ok(e)).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                        return;
                    }
                }
            }
        });
        let session_present = loop {
            match tokio::time::timeout(WAIT, events.recv()).await.expect("CONNACK in time") {
                Some(Ok(Event::Incoming(Packet::ConnAck(ack)))) => break ack.session_present,
                Some(Ok(_)) => {}
                other => panic!("connection failed: {other:?}"),
            }
        };
        Client { client, events, session_present, task }
    }

    impl Client {
        /// Next incoming packet that `pick` accepts; others are skipped.
        pub async fn next<T>(&mut self, mut pick: impl FnMut(&Packet) -> Option<T>) -> T {
            loop {
                match tokio::time::timeout(WAIT, self.events.recv()).await.expect("event in time") {
                    Some(Ok(Event::Incoming(p))) => {
                        if let Some(t) = pick(&p) {
                            return t;
                        }
                    }
                    Some(Ok(Event::Outgoing(_))) => {}
                    other => panic!("connection ended: {other:?}"),
                }
            }
        }

        pub async fn publish(&mut self) -> Publish {
            self.next(|p| if let Packet::Publish(p) = p { Some(p.clone()) } else { None }).await
        }

        pub async fn subscribe(&mut self, filter: &str, qos: QoS) {
            self.client.subscribe(filter, qos).await.unwrap();
            self.next(|p| matches!(p, Packet::SubAck(_)).then_some(())).await;
        }

        /// Waits until the connection ends, returning the error text.
        pub async fn closed(&mut self) -> String {
            loop {
                match tokio::time::timeout(WAIT, self.events.recv()).await.expect("close in time") {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return e,
                    None => return "channel closed".into(),
                }
            }
        }

        /// Drops the client without DISCONNECT (the socket closes when the event loop goes).
        pub fn kill(self) {
            self.task.abort();
        }

        pub async fn disconnect(mut self) {
            self.client.disconnect().await.unwrap();
            let _ = self.closed().await;
        }
    }
}

// ---------------------------------------------------------------- rumqttc 5.0 client

pub mod v5 {
    use super::*;
    pub use rumqttc::v5::mqttbytes::QoS;
    pub use rumqttc::v5::mqttbytes::v5::{
        ConnAck, Filter, LastWill, LastWillProperties, Packet, Publish, PublishProperties, RetainForwardRule,
        SubscribeProperties,
    };
    pub use rumqttc::v5::{AsyncClient, Event, MqttOptions};

    pub struct Client {
        pub client: AsyncClient,
        pub events: mpsc::UnboundedReceiver<Result<Event, String>>,
        pub connack: ConnAck,
        task: tokio::task::JoinHandle<()>,
    }

    pub fn options(port: u16, id: &str) -> MqttOptions {
        let mut o = MqttOptions::new(id, "127.0.0.1", port);
        o.set_keep_alive(Duration::from_secs(30));
        o
    }

    pub async fn connect(options: MqttOptions) -> Client {
        let (client, mut eventloop) = AsyncClient::new(options, 64);
        let (tx, mut events) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            loop {
                match eventloop.poll().await {
                    Ok(e) => {
                        if tx.send(Ok(e)).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                        return;
                    }
                }
            }
        });
        let connack = loop {
            match tokio::time::timeout(WAIT, events.recv()).await.expect("CONNACK in time") {
                Some(Ok(Event::Incoming(Packet::ConnAck(ack)))) => break ack,
                Some(Ok(_)) => {}
                other => panic!("connection failed: {other:?}"),
            }
        };
        Client { client, events, connack, task }
    }

    impl Client {
        pub async fn next<T>(&mut self, mut pick: impl FnMut(&Packet) -> Option<T>) -> T {
            loop {
                match tokio::time::timeout(WAIT, self.events.recv()).await.expect("event in time") {
                    Some(Ok(Event::Incoming(p))) => {
                        if let Some(t) = pick(&p) {
                            return t;
                        }
                    }
                    Some(Ok(Event::Outgoing(_))) => {}
                    other => panic!("connection ended: {other:?}"),
                }
            }
        }

        pub async fn publish(&mut self) -> Publish {
            self.next(|p| if let Packet::Publish(p) = p { Some(p.clone()) } else { None }).await
        }

        pub async fn subscribe(&mut self, filter: &str, qos: QoS) {
            self.client.subscribe(filter, qos).await.unwrap();
            self.suback().await;
        }

        pub async fn suback(&mut self) -> Vec<rumqttc::v5::mqttbytes::v5::SubscribeReasonCode> {
            self.next(|p| if let Packet::SubAck(a) = p { Some(a.return_codes.clone()) } else { None }).await
        }

        pub async fn closed(&mut self) -> String {
            loop {
                match tokio::time::timeout(WAIT, self.events.recv()).await.expect("close in time") {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return e,
                    None => return "channel closed".into(),
                }
            }
        }

        pub fn kill(self) {
            self.task.abort();
        }

        pub async fn disconnect(mut self) {
            self.client.disconnect().await.unwrap();
            let _ = self.closed().await;
        }
    }
}

// ---------------------------------------------------------------- raw TCP client

/// A client that writes arbitrary bytes and reads packets with rmqtt-codec.
pub struct Raw {
    pub stream: TcpStream,
    buf: BytesMut,
    v5: rmqtt_codec::v5::Codec,
    v3: rmqtt_codec::v3::Codec,
}

/// What the server sent, in either protocol level.
#[derive(Debug)]
pub enum Got {
    V3(rmqtt_codec::v3::Packet),
    V5(rmqtt_codec::v5::Packet),
    Closed,
}

impl Raw {
    pub async fn connect(port: u16) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        Raw { stream, buf: BytesMut::new(), v5: rmqtt_codec::v5::Codec::new(0, 0), v3: rmqtt_codec::v3::Codec::new(0) }
    }

    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    pub async fn send5(&mut self, packet: rmqtt_codec::v5::Packet) {
        let mut out = BytesMut::new();
        self.v5.encode(packet, &mut out).unwrap();
        self.send(&out).await;
    }

    pub async fn send3(&mut self, packet: rmqtt_codec::v3::Packet) {
        let mut out = BytesMut::new();
        self.v3.encode(packet, &mut out).unwrap();
        self.send(&out).await;
    }

    async fn fill(&mut self) -> bool {
        match tokio::time::timeout(WAIT, self.stream.read_buf(&mut self.buf)).await.expect("server answered in time") {
            Ok(0) | Err(_) => false,
            Ok(_) => true,
        }
    }

    /// Next packet in MQTT 5 framing, or `None` once the server closed the connection.
    pub async fn recv5(&mut self) -> Option<rmqtt_codec::v5::Packet> {
        loop {
            if let Some((p, _)) = self.v5.decode(&mut self.buf).expect("server sends valid MQTT 5") {
                return Some(p);
            }
            if !self.fill().await {
                return None;
            }
        }
    }

    pub async fn recv3(&mut self) -> Option<rmqtt_codec::v3::Packet> {
        loop {
            if let Some((p, _)) = self.v3.decode(&mut self.buf).expect("server sends valid MQTT 3.1.1") {
                return Some(p);
            }
            if !self.fill().await {
                return None;
            }
        }
    }

    /// Asserts that the server closes the connection, with nothing more sent.
    pub async fn expect_closed(&mut self) {
        assert!(self.fill_until_closed().await.is_empty(), "server sent more before closing");
    }

    /// Reads until EOF and returns whatever arrived.
    pub async fn fill_until_closed(&mut self) -> Vec<u8> {
        while self.fill().await {}
        self.buf.split().to_vec()
    }

    /// A minimal MQTT 5 CONNECT.
    pub fn connect5(id: &str) -> rmqtt_codec::v5::Connect {
        rmqtt_codec::v5::Connect { client_id: id.into(), clean_start: true, keep_alive: 30, ..Default::default() }
    }

    pub async fn handshake5(port: u16, connect: rmqtt_codec::v5::Connect) -> (Raw, Box<rmqtt_codec::v5::ConnectAck>) {
        let mut raw = Raw::connect(port).await;
        raw.send5(rmqtt_codec::v5::Packet::Connect(Box::new(connect))).await;
        match raw.recv5().await {
            Some(rmqtt_codec::v5::Packet::ConnectAck(ack)) => (raw, ack),
            other => panic!("expected CONNACK, got {other:?}"),
        }
    }

    pub async fn handshake3(port: u16, id: &str, clean: bool, keep_alive: u16) -> (Raw, rmqtt_codec::v3::ConnectAck) {
        let mut raw = Raw::connect(port).await;
        let connect = rmqtt_codec::v3::Connect {
            protocol: rmqtt_codec::types::Protocol(4),
            clean_session: clean,
            keep_alive,
            client_id: id.into(),
            ..Default::default()
        };
        raw.send3(rmqtt_codec::v3::Packet::Connect(Box::new(connect))).await;
        match raw.recv3().await {
            Some(rmqtt_codec::v3::Packet::ConnectAck(ack)) => (raw, ack),
            other => panic!("expected CONNACK, got {other:?}"),
        }
    }
}

pub fn pid(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap()
}

/// Builds a test configuration (ephemeral loopback port) with some fields changed.
pub struct MqttConfigExt;

impl MqttConfigExt {
    pub fn with(change: impl FnOnce(&mut MqttConfig)) -> MqttConfig {
        let mut c = config();
        change(&mut c);
        c
    }
}
