//! MQTT-SN 1.2 over UDP, a client written from the specification on top of `mqttsn-codec`.
//! It connects with clean session off, so reconnect = DISCONNECT, then CONNECT again from a new
//! socket (a device that rebooted gets a new port) with clean session off: the gateway kept the
//! subscription, the topic registrations and the QoS 1 messages published meanwhile (§6.3).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use mqttsn_codec::{
    Connect, Message, PROTOCOL_ID, PubAck, Publish, PublishTopic, QoS, RegAck, Register, ReturnCode, Subscribe,
    SubscribeTopic,
};
use tokio::net::UdpSocket;

use super::{BoxFuture, Outgoing, PubSub, Received, Subscription, WAIT};

pub struct MqttSn {
    gateway: SocketAddr,
    socket: UdpSocket,
    client_id: String,
    last_msg_id: u16,
    /// Topic ids the gateway told us about (REGACK, REGISTER, SUBACK of a name) → names.
    names: HashMap<u16, String>,
    /// Names we registered → ids, for publishing.
    ids: HashMap<String, u16>,
    /// Deliveries that arrived while waiting for something else, already acknowledged.
    pending: VecDeque<Received>,
}

impl MqttSn {
    pub async fn connect(gateway: SocketAddr, client_id: &str) -> MqttSn {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut client = MqttSn {
            gateway,
            socket,
            client_id: client_id.to_owned(),
            last_msg_id: 0,
            names: HashMap::new(),
            ids: HashMap::new(),
            pending: VecDeque::new(),
        };
        client.handshake().await;
        client
    }

    async fn handshake(&mut self) {
        let connect = Connect {
            will: false,
            clean_session: false,
            protocol_id: PROTOCOL_ID,
            duration: 60,
            client_id: self.client_id.clone(),
        };
        self.send(&Message::Connect(connect)).await;
        let code = self
            .expect("CONNACK", |m| if let Message::ConnAck { return_code } = m { Some(*return_code) } else { None })
            .await;
        assert_eq!(code, ReturnCode::Accepted, "MQTT-SN CONNACK");
    }

    fn msg_id(&mut self) -> u16 {
        self.last_msg_id = self.last_msg_id.wrapping_add(1).max(1);
        self.last_msg_id
    }

    async fn send(&self, message: &Message) {
        let mut out = BytesMut::new();
        mqttsn_codec::encode(message, &mut out).expect("encode");
        self.socket.send_to(&out, self.gateway).await.expect("send");
    }

    /// Next datagram from the gateway, or `None` at the deadline.
    async fn recv_until(&self, deadline: tokio::time::Instant) -> Option<Message> {
        let mut buf = vec![0u8; 70_000];
        let (len, from) = tokio::time::timeout_at(deadline, self.socket.recv_from(&mut buf)).await.ok()?.expect("recv");
        assert_eq!(from, self.gateway, "datagram from someone else");
        buf.truncate(len);
        Some(mqttsn_codec::decode_bytes(Bytes::from(buf)).expect("the gateway sent a malformed message"))
    }

    /// Handles what the gateway may send at any time (REGISTER, PUBLISH); returns anything else.
    async fn handle(&mut self, message: Message) -> Option<Message> {
        match message {
            Message::Register(Register { topic_id, msg_id, topic_name }) => {
                self.names.insert(topic_id, topic_name);
                let ack = RegAck { topic_id, msg_id, return_code: ReturnCode::Accepted };
                self.send(&Message::RegAck(ack)).await;
                None
            }
            Message::Publish(publish) => {
                let received = self.deliver(publish).await;
                self.pending.push_back(received);
                None
            }
            other => Some(other),
        }
    }

    /// Acknowledges a PUBLISH and names its topic.
    async fn deliver(&mut self, publish: Publish) -> Received {
        let topic_id = match publish.topic {
            PublishTopic::Normal(id) | PublishTopic::Predefined(id) => id,
            PublishTopic::Short(name) => u16::from_be_bytes(name),
        };
        match publish.qos {
            QoS::One => {
                let ack = PubAck { topic_id, msg_id: publish.msg_id, return_code: ReturnCode::Accepted };
                self.send(&Message::PubAck(ack)).await;
            }
            QoS::Two => panic!("MQTT-SN: QoS 2 delivery, but nobody asked for QoS 2"),
            QoS::Zero | QoS::MinusOne => {}
        }
        let topic = match publish.topic {
            PublishTopic::Normal(id) => self
                .names
                .get(&id)
                .cloned()
                .unwrap_or_else(|| panic!("MQTT-SN PUBLISH on topic id {id}, never REGISTERed")),
            PublishTopic::Predefined(id) => panic!("MQTT-SN PUBLISH on pre-defined id {id}, none configured"),
            PublishTopic::Short(name) => String::from_utf8_lossy(&name).into_owned(),
        };
        Received::bare(topic, publish.data, None, Some(publish.qos == QoS::One))
    }

    /// Waits for the message `pick` accepts, handling REGISTER and PUBLISH meanwhile.
    async fn expect<T>(&mut self, what: &str, mut pick: impl FnMut(&Message) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let message = self.recv_until(deadline).await.unwrap_or_else(|| panic!("MQTT-SN: no {what} in time"));
            if let Some(other) = self.handle(message).await {
                match pick(&other) {
                    Some(t) => return t,
                    None => panic!("MQTT-SN: expected {what}, got {other:?}"),
                }
            }
        }
    }

    async fn register(&mut self, topic: &str) -> u16 {
        if let Some(id) = self.ids.get(topic) {
            return *id;
        }
        let msg_id = self.msg_id();
        self.send(&Message::Register(Register { topic_id: 0, msg_id, topic_name: topic.to_owned() })).await;
        let ack = self.expect("REGACK", |m| if let Message::RegAck(a) = m { Some(*a) } else { None }).await;
        assert_eq!((ack.msg_id, ack.return_code), (msg_id, ReturnCode::Accepted), "MQTT-SN REGACK");
        self.ids.insert(topic.to_owned(), ack.topic_id);
        self.names.insert(ack.topic_id, topic.to_owned());
        ack.topic_id
    }
}

impl PubSub for MqttSn {
    fn subscribe<'a>(&'a mut self, s: Subscription<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let msg_id = self.msg_id();
            let qos = if s.at_least_once { QoS::One } else { QoS::Zero };
            let subscribe = Subscribe { dup: false, qos, msg_id, topic: SubscribeTopic::Name(s.filter.to_owned()) };
            self.send(&Message::Subscribe(subscribe)).await;
            let ack = self.expect("SUBACK", |m| if let Message::SubAck(a) = m { Some(*a) } else { None }).await;
            assert_eq!((ack.msg_id, ack.return_code), (msg_id, ReturnCode::Accepted), "MQTT-SN SUBACK");
            let wildcard = s.filter.contains(['+', '#']);
            assert_eq!(ack.topic_id == 0, wildcard, "MQTT-SN SUBACK topic id {} for {}", ack.topic_id, s.filter);
            if !wildcard {
                self.names.insert(ack.topic_id, s.filter.to_owned());
            }
        })
    }

    fn publish<'a>(&'a mut self, m: &'a Outgoing) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let topic_id = self.register(&m.topic).await;
            let (qos, msg_id) = if m.at_least_once { (QoS::One, self.msg_id()) } else { (QoS::Zero, 0) };
            let publish = Publish {
                dup: false,
                qos,
                retain: false,
                topic: PublishTopic::Normal(topic_id),
                msg_id,
                data: m.payload.clone(),
            };
            self.send(&Message::Publish(publish)).await;
            if m.at_least_once {
                let ack = self.expect("PUBACK", |m| if let Message::PubAck(a) = m { Some(*a) } else { None }).await;
                assert_eq!((ack.msg_id, ack.return_code), (msg_id, ReturnCode::Accepted), "MQTT-SN PUBACK");
            }
        })
    }

    fn next_message(&mut self, timeout: Duration) -> BoxFuture<'_, Option<Received>> {
        Box::pin(async move {
            let deadline = tokio::time::Instant::now() + timeout;
            loop {
                if let Some(received) = self.pending.pop_front() {
                    return Some(received);
                }
                let message = self.recv_until(deadline).await?;
                if let Some(other) = self.handle(message).await {
                    panic!("MQTT-SN: expected PUBLISH, got {other:?}");
                }
            }
        })
    }

    fn disconnect(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.send(&Message::Disconnect { duration: None }).await;
            self.expect("DISCONNECT", |m| matches!(m, Message::Disconnect { .. }).then_some(())).await;
        })
    }

    fn reconnect(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            self.handshake().await;
            // From a new address, the gateway sends what it kept only once that address speaks
            // again (so that a forged CONNECT cannot aim the queue at someone else).
            self.send(&Message::PingReq { client_id: None }).await;
            self.expect("PINGRESP", |m| matches!(m, Message::PingResp).then_some(())).await;
        })
    }

    fn own_terms(&self, topic: &str) -> String {
        topic.to_owned()
    }
}
