//! A small MQTT-SN 1.2 client written from the specification, for tests: it speaks the codec
//! crate's typed messages over a real UDP socket on 127.0.0.1, and each helper runs one
//! exchange of §6 and checks the answer's shape.

#![allow(dead_code)]

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use mqttsn_codec::{
    Connect, Message, PROTOCOL_ID, PubAck, Publish, PublishTopic, QoS, RegAck, Register, ReturnCode, SubAck, Subscribe,
    SubscribeTopic, Unsubscribe, WillTopic,
};
use tokio::net::UdpSocket;

/// Longest wait for an expected message. Generous: a failing test fails by it, a passing test
/// never waits for it.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// A client socket talking to one gateway.
pub struct TestClient {
    socket: UdpSocket,
    gateway: SocketAddr,
    last_msg_id: u16,
}

impl TestClient {
    /// A client on a fresh ephemeral port of 127.0.0.1.
    pub async fn new(gateway: SocketAddr) -> TestClient {
        TestClient::bind(IpAddr::from([127, 0, 0, 1]), gateway).await
    }

    /// A client on a fresh ephemeral port of `ip` (Linux routes all of 127.0.0.0/8 to the
    /// loopback interface, so 127.0.0.2 is a second host for per-address limits).
    pub async fn bind(ip: IpAddr, gateway: SocketAddr) -> TestClient {
        let socket = UdpSocket::bind(SocketAddr::new(ip, 0)).await.expect("bind test client");
        TestClient { socket, gateway, last_msg_id: 0 }
    }

    /// The client's own address.
    pub fn local_addr(&self) -> SocketAddr {
        self.socket.local_addr().unwrap()
    }

    /// A fresh MsgId.
    pub fn msg_id(&mut self) -> u16 {
        self.last_msg_id = self.last_msg_id.wrapping_add(1).max(1);
        self.last_msg_id
    }

    /// Sends one message as one datagram.
    pub async fn send(&self, message: &Message) {
        let mut out = BytesMut::new();
        mqttsn_codec::encode(message, &mut out).expect("encode");
        self.socket.send_to(&out, self.gateway).await.expect("send");
    }

    /// Sends raw octets as one datagram.
    pub async fn send_raw(&self, datagram: &[u8]) {
        self.socket.send_to(datagram, self.gateway).await.expect("send");
    }

    /// The next datagram's raw octets, or `None` after `wait`.
    pub async fn recv_raw_within(&self, wait: Duration) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 70_000];
        let (len, from) = tokio::time::timeout(wait, self.socket.recv_from(&mut buf)).await.ok()?.expect("recv");
        assert_eq!(from, self.gateway, "datagram from someone else");
        buf.truncate(len);
        Some(buf)
    }

    /// The next message, or `None` after `wait`.
    pub async fn recv_within(&self, wait: Duration) -> Option<Message> {
        let raw = self.recv_raw_within(wait).await?;
        Some(mqttsn_codec::decode_bytes(Bytes::from(raw)).expect("gateway sent a malformed message"))
    }

    /// The next message; panics if none comes.
    pub async fn recv(&self) -> Message {
        self.recv_within(ANSWER_TIMEOUT).await.expect("no message from the gateway")
    }

    /// The raw datagrams the gateway sent this client in answer to everything it sent so far, in
    /// order. Synchronises without sleeping: it sends a SEARCHGW and collects datagrams up to its
    /// GWINFO. The gateway handles datagrams one at a time and sends the answers to one before
    /// it reads the next, so whatever earlier datagrams caused arrives before the GWINFO.
    pub async fn answers_so_far(&self) -> Vec<Vec<u8>> {
        self.send(&Message::SearchGw { radius: 0 }).await;
        let mut answers = Vec::new();
        loop {
            let raw = self.recv_raw_within(ANSWER_TIMEOUT).await.expect("no GWINFO from the gateway");
            if matches!(raw[..], [3, 0x02, _]) {
                return answers;
            }
            answers.push(raw);
        }
    }

    /// Asserts that nothing arrives for `wait` (used after the gateway has had its chance).
    pub async fn expect_nothing(&self, wait: Duration) {
        if let Some(message) = self.recv_within(wait).await {
            panic!("unexpected message {message:?}");
        }
    }

    /// CONNECT without a will; returns the CONNACK's return code.
    pub async fn connect(&self, client_id: &str, keep_alive_secs: u16, clean_session: bool) -> ReturnCode {
        self.send(&connect(client_id, keep_alive_secs, clean_session, false)).await;
        match self.recv().await {
            Message::ConnAck { return_code } => return_code,
            other => panic!("expected CONNACK, got {other:?}"),
        }
    }

    /// CONNECT with the will handshake of §6.3; returns the CONNACK's return code.
    pub async fn connect_with_will(
        &self,
        client_id: &str,
        keep_alive_secs: u16,
        will: WillTopic,
        message: &[u8],
    ) -> ReturnCode {
        self.send(&connect(client_id, keep_alive_secs, true, true)).await;
        assert_eq!(self.recv().await, Message::WillTopicReq);
        self.send(&Message::WillTopic(Some(will))).await;
        assert_eq!(self.recv().await, Message::WillMsgReq);
        self.send(&Message::WillMsg { will_msg: Bytes::copy_from_slice(message) }).await;
        match self.recv().await {
            Message::ConnAck { return_code } => return_code,
            other => panic!("expected CONNACK, got {other:?}"),
        }
    }

    /// REGISTER; returns the REGACK.
    pub async fn register(&mut self, topic_name: &str) -> RegAck {
        let msg_id = self.msg_id();
        self.send(&Message::Register(Register { topic_id: 0, msg_id, topic_name: topic_name.into() })).await;
        match self.recv().await {
            Message::RegAck(regack) => {
                assert_eq!(regack.msg_id, msg_id);
                regack
            }
            other => panic!("expected REGACK, got {other:?}"),
        }
    }

    /// REGISTER that must be accepted; returns the topic id.
    pub async fn register_ok(&mut self, topic_name: &str) -> u16 {
        let regack = self.register(topic_name).await;
        assert_eq!(regack.return_code, ReturnCode::Accepted);
        assert_ne!(regack.topic_id, 0);
        regack.topic_id
    }

    /// PUBLISH and its QoS flow (PUBACK for 1; PUBREC, PUBREL, PUBCOMP for 2). Returns the
    /// PUBACK for QoS 1 (or an error PUBACK for any QoS if one comes).
    pub async fn publish(&mut self, topic: PublishTopic, qos: QoS, data: &[u8]) -> Option<PubAck> {
        let msg_id = if matches!(qos, QoS::One | QoS::Two) { self.msg_id() } else { 0 };
        let publish = Publish { dup: false, qos, retain: false, topic, msg_id, data: Bytes::copy_from_slice(data) };
        self.send(&Message::Publish(publish)).await;
        match qos {
            QoS::One => match self.recv().await {
                Message::PubAck(puback) => {
                    assert_eq!(puback.msg_id, msg_id);
                    Some(puback)
                }
                other => panic!("expected PUBACK, got {other:?}"),
            },
            QoS::Two => {
                match self.recv().await {
                    Message::PubRec { msg_id: id } => assert_eq!(id, msg_id),
                    Message::PubAck(puback) => return Some(puback),
                    other => panic!("expected PUBREC, got {other:?}"),
                }
                self.send(&Message::PubRel { msg_id }).await;
                assert_eq!(self.recv().await, Message::PubComp { msg_id });
                None
            }
            QoS::Zero | QoS::MinusOne => None,
        }
    }

    /// SUBSCRIBE; returns the SUBACK.
    pub async fn subscribe(&mut self, topic: SubscribeTopic, qos: QoS) -> SubAck {
        let msg_id = self.msg_id();
        self.send(&Message::Subscribe(Subscribe { dup: false, qos, msg_id, topic })).await;
        match self.recv().await {
            Message::SubAck(suback) => {
                assert_eq!(suback.msg_id, msg_id);
                suback
            }
            other => panic!("expected SUBACK, got {other:?}"),
        }
    }

    /// UNSUBSCRIBE and its UNSUBACK.
    pub async fn unsubscribe(&mut self, topic: SubscribeTopic) {
        let msg_id = self.msg_id();
        self.send(&Message::Unsubscribe(Unsubscribe { msg_id, topic })).await;
        assert_eq!(self.recv().await, Message::UnsubAck { msg_id });
    }

    /// DISCONNECT (with a duration: go to sleep) and the gateway's DISCONNECT answer.
    pub async fn disconnect(&self, duration: Option<u16>) {
        self.send(&Message::Disconnect { duration }).await;
        assert_eq!(self.recv().await, Message::Disconnect { duration: None });
    }

    /// The next PUBLISH; panics on anything else.
    pub async fn recv_publish(&self) -> Publish {
        match self.recv().await {
            Message::Publish(publish) => publish,
            other => panic!("expected PUBLISH, got {other:?}"),
        }
    }

    /// Receives a PUBLISH and completes its QoS flow as a well-behaved client.
    pub async fn recv_publish_and_ack(&self) -> Publish {
        let publish = self.recv_publish().await;
        self.ack(&publish).await;
        publish
    }

    /// Acknowledges a received PUBLISH (PUBACK, or PUBREC / PUBREL / PUBCOMP).
    pub async fn ack(&self, publish: &Publish) {
        let msg_id = publish.msg_id;
        match publish.qos {
            QoS::One => {
                let topic_id = topic_id_of(publish.topic);
                self.send(&Message::PubAck(PubAck { topic_id, msg_id, return_code: ReturnCode::Accepted })).await;
            }
            QoS::Two => {
                self.send(&Message::PubRec { msg_id }).await;
                assert_eq!(self.recv().await, Message::PubRel { msg_id });
                self.send(&Message::PubComp { msg_id }).await;
            }
            _ => {}
        }
    }

    /// Answers a gateway REGISTER with REGACK accepted; returns (topic id, name).
    pub async fn accept_register(&self) -> (u16, String) {
        match self.recv().await {
            Message::Register(register) => {
                let regack =
                    RegAck { topic_id: register.topic_id, msg_id: register.msg_id, return_code: ReturnCode::Accepted };
                self.send(&Message::RegAck(regack)).await;
                (register.topic_id, register.topic_name)
            }
            other => panic!("expected REGISTER, got {other:?}"),
        }
    }
}

/// A CONNECT message.
pub fn connect(client_id: &str, keep_alive_secs: u16, clean_session: bool, will: bool) -> Message {
    Message::Connect(Connect {
        will,
        clean_session,
        protocol_id: PROTOCOL_ID,
        duration: keep_alive_secs,
        client_id: client_id.into(),
    })
}

/// The TopicId field value of a topic reference.
pub fn topic_id_of(topic: PublishTopic) -> u16 {
    match topic {
        PublishTopic::Normal(id) | PublishTopic::Predefined(id) => id,
        PublishTopic::Short(name) => u16::from_be_bytes(name),
    }
}
