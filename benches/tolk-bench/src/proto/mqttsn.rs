//! MQTT-SN 1.2 clients over UDP, with the bench's own message codec ([`packet`]): one socket
//! per client, connected to the gateway, and one task per client that owns the receiving side
//! (keep-alive, the gateway's REGISTERs, acknowledgements, deliveries).
//!
//! Topics are MQTT-SN topic names as they are. A publisher REGISTERs each topic once and
//! publishes with the id from REGACK. At QoS 1 it is stop-and-wait: each PUBLISH waits for its
//! PUBACK, retransmitted with DUP like every request (§6.13). A subscriber SUBSCRIBEs by name
//! (wildcards allowed); the gateway REGISTERs each topic a wildcard matches before publishing
//! on it. QoS 2 is not spoken.
//!
//! UDP has no backpressure: a datagram that finds the gateway's or a subscriber's receive
//! buffer full is dropped by the kernel and shows up as lost, which is what QoS 0 over UDP
//! means. Subscriber sockets ask for a large receive buffer so that the bench's own side is
//! not where that happens.

mod packet;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use socket2::{Domain, Socket, Type};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

use super::{Connection, Connector, Delivery, Publisher, Qos, Subscription, Target};
use crate::clock::Clock;
use packet::{ACCEPTED, INVALID_TOPIC_ID, MAX_DATAGRAM, MAX_PAYLOAD, Packet, code_text};

/// Keep-alive announced in CONNECT, in seconds. tolk (like the spec) drops a client silent for
/// 1.5 times this; the client task sends PINGREQ every [`PING_EVERY`], so a long run is safe.
const KEEP_ALIVE_SECS: u16 = 60;

/// Time between two PINGREQs: a third of the keep-alive, so one lost PINGREQ is harmless.
const PING_EVERY: Duration = Duration::from_secs(20);

/// Wait for an answer before a request is sent again (the spec's Tretry, shortened: the
/// gateway is on a LAN or loopback, and a bench should not sit idle for 10 s per lost datagram).
const RETRY_AFTER: Duration = Duration::from_secs(2);

/// Sends of one request before giving up (the first plus the spec's Nretry of 3).
const TRIES: u32 = 4;

/// Receive buffer asked for subscriber sockets. Linux caps it at `net.core.rmem_max`; a burst
/// of small datagrams then still fits where the 208 KiB default would overflow.
const SUBSCRIBER_RECEIVE_BUFFER: usize = 4 << 20;

/// Receive buffer (in the bench) of clients that only get acknowledgements and pings.
const SMALL_DATAGRAM: usize = 512;

/// Acknowledgements a publisher's task may hold for it; more (stale duplicates) are dropped.
const ACK_QUEUE: usize = 16;

/// A UDP socket connected to the gateway, shared by a client and its task.
#[derive(Debug, Clone)]
struct Link {
    socket: Arc<UdpSocket>,
}

impl Link {
    /// Binds an ephemeral port of the gateway's address family and connects it, so only the
    /// gateway's datagrams are received (and an ICMP "port unreachable" shows as an error).
    fn open(gateway: SocketAddr, receive_buffer: Option<usize>) -> Result<Link> {
        let socket = Socket::new(Domain::for_address(gateway), Type::DGRAM, None)?;
        if let Some(bytes) = receive_buffer {
            socket.set_recv_buffer_size(bytes).context("setting SO_RCVBUF")?;
        }
        let any: SocketAddr = match gateway {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        socket.bind(&any.into())?;
        socket.connect(&gateway.into())?;
        socket.set_nonblocking(true)?;
        Ok(Link { socket: Arc::new(UdpSocket::from_std(socket.into())?) })
    }

    async fn send(&self, packet: &Packet) -> Result<()> {
        self.socket.send(&packet.encode()?).await.context("sending to the MQTT-SN gateway")?;
        Ok(())
    }

    /// The next datagram from the gateway. Cancel-safe (tokio's `recv` is).
    async fn recv(&self, buf: &mut [u8]) -> Result<Packet> {
        let len = self.socket.recv(buf).await.context("receiving from the MQTT-SN gateway")?;
        Packet::decode(&buf[..len])
    }
}

/// Where the answer to a request comes from: the socket itself until the client task starts,
/// then the task, which owns the receiving side.
trait Replies: Send {
    fn next(&mut self) -> impl Future<Output = Result<Packet>> + Send;
}

/// Reads the socket directly (during CONNECT and SUBSCRIBE).
struct Direct<'a> {
    link: &'a Link,
    buf: Vec<u8>,
}

impl<'a> Direct<'a> {
    fn new(link: &'a Link) -> Self {
        Direct { link, buf: vec![0; SMALL_DATAGRAM] }
    }
}

impl Replies for Direct<'_> {
    async fn next(&mut self) -> Result<Packet> {
        self.link.recv(&mut self.buf).await
    }
}

impl Replies for mpsc::Receiver<Packet> {
    async fn next(&mut self) -> Result<Packet> {
        self.recv().await.context("the MQTT-SN client task has ended")
    }
}

/// Sends `packet` and waits for the reply `answer` picks out, sending again (with DUP where the
/// message has it) every [`RETRY_AFTER`], at most [`TRIES`] times. Other packets are skipped.
async fn request<T>(
    link: &Link,
    replies: &mut impl Replies,
    mut packet: Packet,
    what: &str,
    mut answer: impl FnMut(&Packet) -> Option<T> + Send,
) -> Result<T> {
    for _ in 0..TRIES {
        link.send(&packet).await?;
        let wait = async {
            loop {
                if let Some(found) = answer(&replies.next().await?) {
                    return Ok(found);
                }
            }
        };
        if let Ok(result) = tokio::time::timeout(RETRY_AFTER, wait).await {
            return result;
        }
        packet.set_dup();
    }
    bail!("no {what} from the gateway after {TRIES} tries, {RETRY_AFTER:?} apart")
}

/// MsgIds of one client: 1, 2, … 65535, 1 (0 means "none", §5.3.9).
#[derive(Debug, Default)]
struct MsgIds(u16);

impl MsgIds {
    fn next(&mut self) -> u16 {
        self.0 = self.0.checked_add(1).unwrap_or(1);
        self.0
    }
}

/// The MQTT-SN QoS number for a bench guarantee.
fn sn_qos(qos: Qos) -> Result<u8> {
    match qos {
        Qos::AtMostOnce => Ok(0),
        Qos::AtLeastOnce => Ok(1),
        Qos::ExactlyOnce => bail!("tolk-bench's MQTT-SN client speaks QoS 0 and 1 only"),
    }
}

/// What a client task does with what is not keep-alive business.
enum Role {
    /// A publisher (with its acknowledgement queue) or an idle connection (without).
    Send(Option<mpsc::Sender<Packet>>),
    /// A subscriber.
    Receive(Receiver),
}

/// A subscriber's side of its task.
struct Receiver {
    deliveries: mpsc::Sender<Delivery>,
    clock: Clock,
    /// Topic ids the gateway told this client about, in SUBACK or REGISTER.
    known: HashSet<u16>,
}

impl Role {
    /// Handles one packet; `Ok(false)` when the scenario no longer wants deliveries.
    async fn handle(&mut self, link: &Link, packet: Packet) -> Result<bool> {
        match (self, packet) {
            (Role::Send(Some(acks)), ack @ (Packet::RegAck { .. } | Packet::PubAck { .. })) => {
                // Full means stale duplicates the publisher never read; closed means it is gone.
                let _ = acks.try_send(ack);
            }
            (Role::Receive(r), Packet::Register { topic_id, msg_id, .. }) => {
                // §6.10: the gateway names a topic before its first PUBLISH on it.
                r.known.insert(topic_id);
                link.send(&Packet::RegAck { topic_id, msg_id, code: ACCEPTED }).await?;
            }
            (Role::Receive(r), Packet::Publish { qos, topic_id, msg_id, data, .. }) => {
                let received_ns = r.clock.now_ns();
                let known = r.known.contains(&topic_id);
                if qos == 1 {
                    let code = if known { ACCEPTED } else { INVALID_TOPIC_ID };
                    link.send(&Packet::PubAck { topic_id, msg_id, code }).await?;
                }
                if !known {
                    // A gateway bug: refused as §5.4.13 says, and counted lost by the scenario.
                    tracing::warn!(topic_id, "MQTT-SN PUBLISH on a topic id never registered: refused");
                    return Ok(true);
                }
                // Waiting for room stops reading the socket; the kernel then drops datagrams.
                return Ok(r.deliveries.send(Delivery { payload: data, received_ns }).await.is_ok());
            }
            _ => {}
        }
        Ok(true)
    }
}

/// Starts the task that owns the socket's receiving side until stopped: it answers PINGREQ,
/// sends PINGREQ every [`PING_EVERY`], passes the rest to `role`, and says DISCONNECT when it
/// is the one ending the connection.
fn spawn_client(link: Link, mut role: Role, datagram: usize) -> Connection {
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut buf = vec![0; datagram];
        let start = tokio::time::Instant::now() + PING_EVERY;
        let mut ping = tokio::time::interval_at(start, PING_EVERY);
        let reason = loop {
            let step = tokio::select! {
                _ = &mut stop_rx => break None,
                _ = ping.tick() => link.send(&Packet::PingReq).await.map(|()| true),
                received = link.recv(&mut buf) => match received {
                    Ok(Packet::PingReq) => link.send(&Packet::PingResp).await.map(|()| true),
                    Ok(Packet::Disconnect) => break Some("gateway sent DISCONNECT".to_string()),
                    Ok(packet) => role.handle(&link, packet).await,
                    Err(e) => Err(e),
                },
            };
            match step {
                Ok(true) => {}
                Ok(false) => break None,
                Err(e) => break Some(format!("{e:#}")),
            }
        };
        if reason.is_none() {
            let _ = link.send(&Packet::Disconnect).await;
        }
        reason
    });
    Connection::new(stop_tx, task)
}

/// Connects MQTT-SN clients to one gateway.
#[derive(Debug, Clone)]
pub struct MqttSnConnector {
    gateway: SocketAddr,
    payload: usize,
}

impl MqttSnConnector {
    /// A connector for `target`, for payloads of `payload` bytes.
    pub fn new(target: &Target, payload: usize) -> Self {
        MqttSnConnector { gateway: target.addr, payload }
    }

    /// Refuses a run whose payloads cannot travel: better than a run where all are lost.
    fn check_payload(&self) -> Result<()> {
        if self.payload > MAX_PAYLOAD {
            bail!(
                "--payload {} is too big for MQTT-SN: a PUBLISH must fit one UDP datagram \
                 ({MAX_DATAGRAM} bytes, tolk's default max_message_size_bytes), which leaves {MAX_PAYLOAD} \
                 bytes of payload",
                self.payload
            );
        }
        Ok(())
    }

    /// CONNECT (clean session, no will) and a successful CONNACK.
    async fn connect(&self, client_id: &str, receive_buffer: Option<usize>) -> Result<Link> {
        let connected = async {
            let link = Link::open(self.gateway, receive_buffer)?;
            let connect = Packet::Connect { duration: KEEP_ALIVE_SECS, client_id: client_id.to_string() };
            let code = request(&link, &mut Direct::new(&link), connect, "CONNACK", |p| match p {
                Packet::ConnAck { code } => Some(*code),
                _ => None,
            })
            .await?;
            if code != ACCEPTED {
                bail!("gateway refused CONNECT: {}", code_text(code));
            }
            Ok(link)
        };
        connected.await.with_context(|| format!("{client_id}: connecting to mqttsn://{}", self.gateway))
    }
}

/// Whether an MQTT-SN gateway answers SEARCHGW at `gateway` (§6.1): how the bench knows that a
/// broker it started is ready, since UDP has no connection to accept.
pub async fn gateway_answers(gateway: SocketAddr) -> bool {
    let Ok(link) = Link::open(gateway, None) else { return false };
    let answered = async {
        link.send(&Packet::SearchGw).await?;
        let mut replies = Direct::new(&link);
        while replies.next().await? != Packet::GwInfo {}
        anyhow::Ok(())
    };
    matches!(tokio::time::timeout(Duration::from_millis(200), answered).await, Ok(Ok(())))
}

/// An MQTT-SN publisher.
pub struct MqttSnPublisher {
    link: Link,
    qos: u8,
    /// REGACKs and PUBACKs, from the client task.
    acks: mpsc::Receiver<Packet>,
    /// Topic ids from REGACK, per topic name.
    topic_ids: HashMap<String, u16>,
    msg_ids: MsgIds,
    connection: Connection,
}

impl MqttSnPublisher {
    /// The registered id of `topic`, REGISTERing it the first time.
    async fn topic_id(&mut self, topic: &str) -> Result<u16> {
        if let Some(&id) = self.topic_ids.get(topic) {
            return Ok(id);
        }
        let msg_id = self.msg_ids.next();
        let register = Packet::Register { topic_id: 0, msg_id, topic: topic.to_string() };
        let (id, code) = request(&self.link, &mut self.acks, register, "REGACK", |p| match p {
            Packet::RegAck { topic_id, msg_id: m, code } if *m == msg_id => Some((*topic_id, *code)),
            _ => None,
        })
        .await?;
        if code != ACCEPTED {
            bail!("gateway refused to REGISTER {topic}: {}", code_text(code));
        }
        self.topic_ids.insert(topic.to_string(), id);
        Ok(id)
    }
}

impl Publisher for MqttSnPublisher {
    async fn publish(&mut self, topic: &str, payload: Bytes) -> Result<()> {
        if self.acks.is_closed() {
            bail!("MQTT-SN publisher's connection is gone");
        }
        let topic_id = self.topic_id(topic).await?;
        if self.qos == 0 {
            return self.link.send(&Packet::Publish { dup: false, qos: 0, topic_id, msg_id: 0, data: payload }).await;
        }
        let msg_id = self.msg_ids.next();
        let publish = Packet::Publish { dup: false, qos: self.qos, topic_id, msg_id, data: payload };
        let code = request(&self.link, &mut self.acks, publish, "PUBACK", |p| match p {
            Packet::PubAck { msg_id: m, code, .. } if *m == msg_id => Some(*code),
            _ => None,
        })
        .await?;
        if code != ACCEPTED {
            if code == INVALID_TOPIC_ID {
                self.topic_ids.remove(topic);
            }
            bail!("gateway refused a PUBLISH to {topic}: {}", code_text(code));
        }
        Ok(())
    }

    async fn prepare(&mut self, topic: &str) -> Result<()> {
        self.topic_id(topic).await.map(drop)
    }

    async fn close(self) -> Option<String> {
        self.connection.close().await
    }
}

impl Connector for MqttSnConnector {
    type Publisher = MqttSnPublisher;

    async fn publisher(&self, client_id: String, qos: Qos) -> Result<MqttSnPublisher> {
        self.check_payload()?;
        let qos = sn_qos(qos)?;
        let link = self.connect(&client_id, None).await?;
        let (tx, acks) = mpsc::channel(ACK_QUEUE);
        let connection = spawn_client(link.clone(), Role::Send(Some(tx)), SMALL_DATAGRAM);
        Ok(MqttSnPublisher { link, qos, acks, topic_ids: HashMap::new(), msg_ids: MsgIds::default(), connection })
    }

    async fn subscribe(
        &self,
        client_id: String,
        topic: String,
        qos: Qos,
        clock: Clock,
        buffer: usize,
    ) -> Result<Subscription> {
        self.check_payload()?;
        let qos = sn_qos(qos)?;
        let link = self.connect(&client_id, Some(SUBSCRIBER_RECEIVE_BUFFER)).await?;
        let msg_id = MsgIds::default().next();
        let subscribe = Packet::Subscribe { dup: false, qos, msg_id, filter: topic.clone() };
        let (topic_id, code) = request(&link, &mut Direct::new(&link), subscribe, "SUBACK", |p| match p {
            Packet::SubAck { topic_id, msg_id: m, code, .. } if *m == msg_id => Some((*topic_id, *code)),
            _ => None,
        })
        .await
        .with_context(|| format!("{client_id}: subscribing to {topic}"))?;
        if code != ACCEPTED {
            bail!("{client_id}: gateway refused the subscription to {topic}: {}", code_text(code));
        }
        // A SUBACK for a topic name (no wildcard) carries its id, used without a REGISTER.
        let known = (topic_id != 0).then_some(topic_id).into_iter().collect();
        let (deliveries_tx, deliveries) = mpsc::channel(buffer.max(1));
        let receiver = Receiver { deliveries: deliveries_tx, clock, known };
        let connection = spawn_client(link, Role::Receive(receiver), MAX_DATAGRAM + 1);
        Ok(Subscription { deliveries, connection })
    }

    async fn idle(&self, client_id: String) -> Result<Connection> {
        let link = self.connect(&client_id, None).await?;
        Ok(spawn_client(link, Role::Send(None), SMALL_DATAGRAM))
    }
}
