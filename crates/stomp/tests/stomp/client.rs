//! A tiny raw-socket STOMP client built on the codec, and an in-process broker to point it at.
//! No maintained Rust STOMP client is worth depending on, and a raw client can also send the
//! malformed bytes a real one never would.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use stomp_codec::{Command, Decoded, Decoder, Encoder, Frame, Limits, Version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;
use tolk_core::frontend::{FrontEnd, FrontEndContext};
use tolk_core::{Metrics, Router, RouterConfig};
use tolk_stomp::{StompConfig, StompFrontEnd};

/// How long a test waits for something it expects.
pub const WAIT: Duration = Duration::from_secs(5);

/// A broker with only the STOMP front end, on an ephemeral port.
pub struct Broker {
    pub addr: SocketAddr,
    pub router: Router,
    ctx: FrontEndContext,
}

/// The test configuration: loopback, ephemeral port, no heart-beats unless a test asks.
pub fn config() -> StompConfig {
    StompConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        heart_beat_send: Duration::ZERO,
        heart_beat_receive: Duration::ZERO,
        ..StompConfig::default()
    }
}

impl Broker {
    pub async fn start() -> Broker {
        Self::start_with(config(), RouterConfig::default()).await
    }

    pub async fn start_with(config: StompConfig, router_config: RouterConfig) -> Broker {
        let router = Router::new(router_config, Arc::new(Metrics::new()));
        let ctx = FrontEndContext::new(router.clone(), std::env::temp_dir());
        let addrs =
            Box::new(StompFrontEnd::new(config)).start(ctx.clone()).await.expect("STOMP front end starts").addrs;
        Broker { addr: addrs[0], router, ctx }
    }

    /// A connected STOMP 1.2 client.
    pub async fn client(&self) -> Client {
        Client::connect(self.addr).await
    }

    pub async fn stop(self) {
        self.ctx.shutdown.cancel();
        self.ctx.tracker.close();
        timeout(WAIT, self.ctx.tracker.wait()).await.expect("front end stops");
    }
}

/// Builds a frame from a command, headers and a body.
pub fn frame(command: Command, headers: &[(&str, &str)], body: impl Into<bytes::Bytes>) -> Frame {
    headers.iter().fold(Frame::new(command), |f, (n, v)| f.with_header(*n, *v)).with_body(body)
}

pub struct Client {
    stream: TcpStream,
    decoder: Decoder,
    encoder: Encoder,
    buf: BytesMut,
    next_receipt: u32,
}

impl Client {
    /// A TCP connection that has not sent CONNECT.
    pub async fn open(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).await.expect("connect");
        // Frames are written one by one; Nagle would hold each behind the previous one's ACK.
        stream.set_nodelay(true).expect("nodelay");
        let limits = Limits { max_frame_size: 64 * 1024 * 1024, ..Limits::default() };
        Client { stream, decoder: Decoder::new(limits), encoder: Encoder::new(), buf: BytesMut::new(), next_receipt: 0 }
    }

    /// CONNECT as a 1.2 client without heart-beats.
    pub async fn connect(addr: SocketAddr) -> Client {
        let (client, connected) = Client::connect_with(addr, &[("accept-version", "1.2"), ("host", "localhost")]).await;
        assert_eq!(connected.command, Command::Connected, "{connected:?}");
        client
    }

    /// CONNECT with the given headers; returns the broker's answer (CONNECTED or ERROR).
    pub async fn connect_with(addr: SocketAddr, headers: &[(&str, &str)]) -> (Client, Frame) {
        let mut client = Client::open(addr).await;
        client.send(&frame(Command::Connect, headers, "")).await;
        let answer = client.recv().await;
        if let Some(version) = answer.header("version").and_then(|v| v.parse::<Version>().ok())
            && answer.command == Command::Connected
        {
            client.encoder.set_version(version);
            client.decoder.set_version(version);
        }
        (client, answer)
    }

    pub async fn send(&mut self, frame: &Frame) {
        let mut out = BytesMut::new();
        self.encoder.encode(frame, &mut out).expect("test frame encodes");
        self.send_raw(&out).await;
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    /// Next frame or heart-beat; `None` at EOF (or when the broker reset the connection).
    pub async fn recv_item(&mut self) -> Option<Decoded> {
        timeout(WAIT, async {
            loop {
                if let Some(item) = self.decoder.decode(&mut self.buf).expect("broker sent a valid frame") {
                    return Some(item);
                }
                match self.stream.read_buf(&mut self.buf).await {
                    Ok(0) | Err(_) => return None,
                    Ok(_) => {}
                }
            }
        })
        .await
        .expect("timed out waiting for the broker")
    }

    /// Next frame, skipping heart-beats; panics at EOF.
    pub async fn recv(&mut self) -> Frame {
        loop {
            match self.recv_item().await {
                Some(Decoded::Frame(frame)) => return frame,
                Some(Decoded::HeartBeat) => continue,
                None => panic!("connection closed while waiting for a frame"),
            }
        }
    }

    /// Next frame, which must be a MESSAGE.
    pub async fn recv_message(&mut self) -> Frame {
        let frame = self.recv().await;
        assert_eq!(frame.command, Command::Message, "{frame:?}");
        frame
    }

    /// Expects ERROR, then the connection to close. Returns the ERROR.
    pub async fn expect_error(&mut self) -> Frame {
        let frame = self.recv().await;
        assert_eq!(frame.command, Command::Error, "{frame:?}");
        self.expect_closed().await;
        frame
    }

    /// Expects EOF (heart-beats allowed before it).
    pub async fn expect_closed(&mut self) {
        loop {
            match self.recv_item().await {
                None => return,
                Some(Decoded::HeartBeat) => continue,
                Some(Decoded::Frame(frame)) => panic!("expected the connection to close, got {frame:?}"),
            }
        }
    }

    /// Sends `frame` with a fresh `receipt` and waits for the RECEIPT (frames arriving before
    /// it are returned, in order).
    pub async fn with_receipt(&mut self, mut frame: Frame) -> Vec<Frame> {
        self.next_receipt += 1;
        let id = format!("r{}", self.next_receipt);
        frame.headers.push("receipt", id.as_str());
        self.send(&frame).await;
        let mut before = Vec::new();
        loop {
            let got = self.recv().await;
            if got.command == Command::Receipt {
                assert_eq!(got.header("receipt-id"), Some(id.as_str()));
                return before;
            }
            assert_ne!(got.command, Command::Error, "{got:?}");
            before.push(got);
        }
    }

    /// SUBSCRIBE and wait until it is in force.
    pub async fn subscribe(&mut self, destination: &str, id: &str, ack: &str) {
        let f = frame(Command::Subscribe, &[("destination", destination), ("id", id), ("ack", ack)], "");
        assert!(self.with_receipt(f).await.is_empty());
    }

    /// SEND a text body and wait until the broker has routed it.
    pub async fn publish(&mut self, destination: &str, body: &str) {
        let f = frame(Command::Send, &[("destination", destination), ("content-type", "text/plain")], body.to_owned());
        assert!(self.with_receipt(f).await.is_empty());
    }

    /// DISCONNECT with a receipt, then expect the broker to close.
    pub async fn disconnect(mut self) {
        self.with_receipt(frame(Command::Disconnect, &[], "")).await;
        self.expect_closed().await;
    }
}

/// The body of a frame as text.
pub fn text(frame: &Frame) -> &str {
    std::str::from_utf8(&frame.body).expect("UTF-8 body")
}
