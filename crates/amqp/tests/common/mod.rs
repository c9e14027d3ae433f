//! Shared helpers for the integration tests: an in-process broker on an ephemeral port, lapin
//! connections, a raw-socket AMQP client for malformed input, and timeouts instead of sleeps.
#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use amq_protocol::frame::{AMQPFrame, WriteContext, gen_frame};
use amq_protocol::protocol::{AMQPClass, connection};
use amq_protocol::types::FieldTable;
use amqp_codec::Frame;
use bytes::BytesMut;
use lapin::{Connection, ConnectionProperties};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tolk_amqp::{AmqpConfig, AmqpFrontEnd};
use tolk_core::frontend::{FrontEnd, FrontEndContext};
use tolk_core::{Metrics, Router, RouterConfig};

pub const TIMEOUT: Duration = Duration::from_secs(5);

/// Awaits `f` or fails the test after [`TIMEOUT`].
pub async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(TIMEOUT, f).await.expect("timed out")
}

pub struct Broker {
    pub ctx: FrontEndContext,
    pub addr: SocketAddr,
    pub router: Router,
}

impl Broker {
    pub async fn start() -> Broker {
        Self::start_with(AmqpConfig::default()).await
    }

    pub async fn start_with(config: AmqpConfig) -> Broker {
        let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
        let ctx = FrontEndContext::new(router.clone(), std::env::temp_dir());
        let config = AmqpConfig { bind: "127.0.0.1:0".parse().unwrap(), ..config };
        let addrs = Box::new(AmqpFrontEnd::new(config)).start(ctx.clone()).await.expect("start").addrs;
        Broker { ctx, addr: addrs[0], router }
    }

    pub fn uri(&self) -> String {
        format!("amqp://guest:guest@{}/%2f", self.addr)
    }

    pub async fn connect(&self) -> Connection {
        within(Connection::connect(&self.uri(), ConnectionProperties::default())).await.expect("connect")
    }

    pub async fn stop(self) {
        self.ctx.shutdown.cancel();
        self.ctx.tracker.close();
        within(self.ctx.tracker.wait()).await;
    }
}

/// A hand-driven AMQP client over a raw TCP stream.
pub struct Raw {
    pub stream: TcpStream,
    pub buf: BytesMut,
}

pub fn encode(frame: &AMQPFrame) -> Vec<u8> {
    let (v, _) = gen_frame(frame)(WriteContext::from(Vec::new())).unwrap().into_inner();
    v
}

pub fn method(channel: u16, m: AMQPClass) -> Vec<u8> {
    encode(&AMQPFrame::Method(channel, m))
}

impl Raw {
    pub async fn connect(addr: SocketAddr) -> Raw {
        Raw { stream: within(TcpStream::connect(addr)).await.unwrap(), buf: BytesMut::new() }
    }

    /// Connects and completes the handshake with the given heartbeat.
    pub async fn open(addr: SocketAddr, heartbeat: u16) -> Raw {
        let mut raw = Raw::connect(addr).await;
        raw.send(&amqp_codec::PROTOCOL_HEADER).await;
        assert!(matches!(raw.method().await, AMQPClass::Connection(connection::AMQPMethod::Start(_))));
        raw.send(&method(
            0,
            AMQPClass::Connection(connection::AMQPMethod::StartOk(connection::StartOk {
                client_properties: FieldTable::default(),
                mechanism: "PLAIN".into(),
                response: "\0guest\0guest".into(),
                locale: "en_US".into(),
            })),
        ))
        .await;
        let AMQPClass::Connection(connection::AMQPMethod::Tune(tune)) = raw.method().await else {
            panic!("expected tune")
        };
        raw.send(&method(
            0,
            AMQPClass::Connection(connection::AMQPMethod::TuneOk(connection::TuneOk {
                channel_max: tune.channel_max,
                frame_max: tune.frame_max,
                heartbeat,
            })),
        ))
        .await;
        raw.send(&method(
            0,
            AMQPClass::Connection(connection::AMQPMethod::Open(connection::Open { virtual_host: "/".into() })),
        ))
        .await;
        assert!(matches!(raw.method().await, AMQPClass::Connection(connection::AMQPMethod::OpenOk(_))));
        raw
    }

    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// The next frame, or `None` at EOF.
    pub async fn frame(&mut self) -> Option<Frame> {
        within(async {
            loop {
                if let Some(f) = amqp_codec::decode(&mut self.buf, 1 << 20).expect("broker sent a bad frame") {
                    return Some(f);
                }
                match self.stream.read_buf(&mut self.buf).await {
                    Ok(0) | Err(_) => return None,
                    Ok(_) => {}
                }
            }
        })
        .await
    }

    /// The next method frame (skipping heartbeats).
    pub async fn method(&mut self) -> AMQPClass {
        loop {
            match self.frame().await {
                Some(Frame::Method(_, m)) => return *m,
                Some(Frame::Heartbeat) => continue,
                other => panic!("expected a method, got {other:?}"),
            }
        }
    }

    /// Reads until EOF (the broker closed the socket), returning everything it sent.
    pub async fn read_to_end(&mut self) -> Vec<u8> {
        let mut all = self.buf.to_vec();
        within(self.stream.read_to_end(&mut all)).await.unwrap_or(0);
        all
    }

    /// Expects `connection.close` with `code`, answers close-ok, expects EOF. Returns the text.
    pub async fn expect_connection_close(&mut self, code: u16) -> String {
        let AMQPClass::Connection(connection::AMQPMethod::Close(close)) = self.method().await else {
            panic!("expected connection.close")
        };
        assert_eq!(close.reply_code, code, "reply text: {}", close.reply_text);
        let _ = self
            .stream
            .write_all(&method(0, AMQPClass::Connection(connection::AMQPMethod::CloseOk(connection::CloseOk {}))))
            .await;
        assert!(self.frame().await.is_none(), "socket closed after connection.close");
        close.reply_text.to_string()
    }
}
