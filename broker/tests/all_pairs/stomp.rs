//! STOMP 1.2 over a raw socket with `stomp-codec`. Reconnect = DISCONNECT (with a receipt),
//! a new connection and the same SUBSCRIBE again. STOMP keeps nothing for a client that is
//! gone, so a subscription that must survive is a `/queue/`: STOMP cannot bind a queue to a
//! topic, so the queue is declared and bound to `amq.topic` over AMQP first (the two share the
//! core's named queues), and STOMP consumes it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;
use stomp_codec::{Command, Decoded, Decoder, Encoder, Frame, Limits, Version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{BoxFuture, Outgoing, PubSub, Received, Subscription, WAIT};

/// MESSAGE headers with a meaning of their own; every other header is a user header.
const STANDARD: &[&str] = &[
    "destination",
    "message-id",
    "subscription",
    "content-type",
    "content-length",
    "ack",
    "persistent",
    "redelivered",
    "expires",
    "reply-to",
    "correlation-id",
];

pub struct Stomp {
    addr: SocketAddr,
    amqp: SocketAddr,
    name: String,
    stream: TcpStream,
    decoder: Decoder,
    encoder: Encoder,
    buf: BytesMut,
    next_receipt: u32,
    /// MESSAGE frames that arrived while waiting for a RECEIPT.
    pending: VecDeque<Frame>,
    /// (destination, ack mode) of every SUBSCRIBE, to repeat after a reconnect.
    subscriptions: Vec<(String, &'static str)>,
    /// The queue a surviving subscription consumes.
    queue: Option<String>,
}

fn frame(command: Command, headers: &[(&str, &str)]) -> Frame {
    headers.iter().fold(Frame::new(command), |f, (n, v)| f.with_header(*n, *v))
}

impl Stomp {
    pub async fn connect(addr: SocketAddr, amqp: SocketAddr, name: &str) -> Stomp {
        let (stream, decoder, encoder) = open(addr).await;
        let mut client = Stomp {
            addr,
            amqp,
            name: name.to_owned(),
            stream,
            decoder,
            encoder,
            buf: BytesMut::new(),
            next_receipt: 0,
            pending: VecDeque::new(),
            subscriptions: Vec::new(),
            queue: None,
        };
        client.handshake().await;
        client
    }

    async fn handshake(&mut self) {
        self.send(&frame(Command::Connect, &[("accept-version", "1.2"), ("host", "localhost")])).await;
        let connected = self.recv(WAIT).await.expect("STOMP CONNECTED in time");
        assert_eq!(connected.command, Command::Connected, "{connected:?}");
        assert_eq!(connected.header("version"), Some("1.2"));
    }

    async fn send(&mut self, frame: &Frame) {
        let mut out = BytesMut::new();
        self.encoder.encode(frame, &mut out).expect("frame encodes");
        self.stream.write_all(&out).await.expect("STOMP write");
    }

    /// Next frame (heart-beats skipped), or `None` after `timeout`. Panics at EOF.
    async fn recv(&mut self, timeout: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match self.decoder.decode(&mut self.buf).expect("the broker sent a valid STOMP frame") {
                Some(Decoded::Frame(frame)) => return Some(frame),
                Some(Decoded::HeartBeat) => continue,
                None => {}
            }
            match tokio::time::timeout_at(deadline, self.stream.read_buf(&mut self.buf)).await {
                Err(_) => return None,
                Ok(Ok(0)) | Ok(Err(_)) => panic!("STOMP connection closed by the broker"),
                Ok(Ok(_)) => {}
            }
        }
    }

    /// Sends `frame` with a receipt and waits for the RECEIPT; MESSAGEs before it are kept.
    async fn with_receipt(&mut self, mut frame: Frame) {
        self.next_receipt += 1;
        let id = format!("r{}", self.next_receipt);
        frame.headers.push("receipt", id.as_str());
        self.send(&frame).await;
        loop {
            let got = self.recv(WAIT).await.unwrap_or_else(|| panic!("STOMP RECEIPT {id} in time"));
            match got.command {
                Command::Receipt if got.header("receipt-id") == Some(id.as_str()) => return,
                Command::Message => self.pending.push_back(got),
                _ => panic!("STOMP: expected RECEIPT {id}, got {got:?}"),
            }
        }
    }

    async fn subscribe_to(&mut self, index: usize, destination: &str, ack: &str) {
        let id = format!("s{index}");
        let f = frame(Command::Subscribe, &[("destination", destination), ("id", &id), ("ack", ack)]);
        self.with_receipt(f).await;
    }
}

async fn open(addr: SocketAddr) -> (TcpStream, Decoder, Encoder) {
    let stream = TcpStream::connect(addr).await.expect("STOMP connect");
    let limits = Limits { max_frame_size: 64 * 1024 * 1024, ..Limits::default() };
    let (mut decoder, mut encoder) = (Decoder::new(limits), Encoder::new());
    decoder.set_version(Version::V1_2);
    encoder.set_version(Version::V1_2);
    (stream, decoder, encoder)
}

impl PubSub for Stomp {
    fn subscribe<'a>(&'a mut self, s: Subscription<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let ack = if s.at_least_once { "client-individual" } else { "auto" };
            let destination = if s.survive_reconnect {
                let queue = format!("all-pairs.{}", self.name);
                super::amqp::declare_bound_queue(self.amqp, &queue, &super::amqp_key(s.filter)).await;
                let destination = format!("/queue/{queue}");
                self.queue = Some(queue);
                destination
            } else {
                format!("/topic/{}", s.filter)
            };
            self.subscribe_to(self.subscriptions.len(), &destination, ack).await;
            self.subscriptions.push((destination, ack));
        })
    }

    fn publish<'a>(&'a mut self, m: &'a Outgoing) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let destination = format!("/topic/{}", m.topic);
            let persistent = if m.at_least_once { "true" } else { "false" };
            let mut f = frame(Command::Send, &[("destination", &destination), ("persistent", persistent)]);
            if let Some(content_type) = &m.content_type {
                f.headers.push("content-type", content_type.as_str());
            }
            if let Some((name, value)) = &m.header {
                f.headers.push(name.as_str(), value.as_str());
            }
            if let Some(correlation) = &m.correlation {
                f.headers.push("correlation-id", correlation.as_str());
            }
            if let Some(reply_to) = &m.reply_to {
                f.headers.push("reply-to", format!("/topic/{reply_to}"));
            }
            if let Some(expiry) = m.expiry {
                let at = super::epoch_millis() + u64::try_from(expiry.as_millis()).unwrap();
                f.headers.push("expires", at.to_string());
            }
            self.with_receipt(f.with_body(m.payload.clone())).await;
        })
    }

    fn next_message(&mut self, timeout: Duration) -> BoxFuture<'_, Option<Received>> {
        Box::pin(async move {
            let message = match self.pending.pop_front() {
                Some(m) => m,
                None => self.recv(timeout).await?,
            };
            assert_eq!(message.command, Command::Message, "STOMP: expected MESSAGE, got {message:?}");
            if let Some(ack) = message.header("ack") {
                let ack = frame(Command::Ack, &[("id", ack)]);
                self.send(&ack).await;
            }
            let text = |name: &str| message.header(name).map(str::to_owned);
            Some(Received {
                topic: text("destination").expect("MESSAGE has a destination"),
                payload: message.body.clone(),
                content_type: text("content-type"),
                headers: message
                    .headers
                    .iter()
                    .filter(|(name, _)| !STANDARD.contains(&name.as_str()))
                    .map(|(name, value)| (name.to_string(), value.to_string()))
                    .collect(),
                at_least_once: Some(message.header("persistent") == Some("true")),
                correlation: text("correlation-id"),
                reply_to: text("reply-to"),
                expires_in: message.header("expires").map(|at| {
                    let at: u64 = at.parse().expect("expires is milliseconds since the epoch");
                    Duration::from_millis(at.saturating_sub(super::epoch_millis()))
                }),
            })
        })
    }

    fn disconnect(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.with_receipt(frame(Command::Disconnect, &[])).await;
            assert!(self.pending.is_empty(), "STOMP: messages arrived after the last ACK: {:?}", self.pending);
        })
    }

    fn reconnect(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            (self.stream, self.decoder, self.encoder) = open(self.addr).await;
            self.buf.clear();
            self.handshake().await;
            for (index, (destination, ack)) in self.subscriptions.clone().into_iter().enumerate() {
                self.subscribe_to(index, &destination, ack).await;
            }
        })
    }

    fn own_terms(&self, topic: &str) -> String {
        match &self.queue {
            Some(queue) => format!("/queue/{queue}"),
            None => format!("/topic/{topic}"),
        }
    }
}
