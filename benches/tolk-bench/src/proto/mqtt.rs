//! MQTT 3.1.1 clients built on rumqttc's `AsyncClient`, each connection with its own event-loop
//! task. rumqttc is what tolk's bridges and tests already use, and it is independent of both
//! brokers under test.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use rumqttc::{AsyncClient, ConnectReturnCode, Event, EventLoop, MqttOptions, NetworkOptions, Packet, QoS};
use tokio::sync::{mpsc, oneshot, watch};

use super::{Connection, Connector, Delivery, Publisher, Qos, Subscription, Target};
use crate::clock::Clock;

/// Keep-alive of loaded connections: long enough that no PINGREQ competes with the load in a
/// run of a few seconds.
const KEEP_ALIVE: Duration = Duration::from_secs(60);

/// Seconds rumqttc waits for TCP connect and CONNACK, and for a flush.
const NETWORK_TIMEOUT_SECS: u64 = 10;

/// Requests a publisher may queue in rumqttc before `publish` waits: small, so a closed-loop
/// publisher is paced by its socket rather than by an in-process queue.
const PUBLISH_QUEUE: usize = 64;

/// How long a closing client waits for its DISCONNECT to be written.
const GOODBYE_TIMEOUT: Duration = Duration::from_secs(1);

/// Connects MQTT clients to one broker.
#[derive(Debug, Clone)]
pub struct MqttConnector {
    host: String,
    port: u16,
    /// Largest packet accepted or sent; rumqttc's 10 KiB default would refuse big payloads.
    max_packet: usize,
    /// Whether connections start a clean session (the default) or resume a persistent one.
    clean_session: bool,
    /// User name and password every connection logs in with, if any.
    credentials: Option<(String, String)>,
}

impl MqttConnector {
    /// A connector for `target`, sized for payloads of `payload` bytes.
    pub fn new(target: &Target, payload: usize) -> Self {
        MqttConnector {
            host: target.host.clone(),
            port: target.port,
            max_packet: payload.max(1024) + 4096,
            clean_session: true,
            credentials: target.credentials.clone(),
        }
    }

    /// The same connector for persistent sessions (clean session 0): what a client subscribes
    /// to stays, and at-least-once messages are kept for it while it is away.
    pub fn persistent(&self) -> Self {
        MqttConnector { clean_session: false, ..self.clone() }
    }

    /// Opens a session (clean unless [`MqttConnector::persistent`]) and waits for a successful
    /// CONNACK.
    async fn connect(&self, client_id: String, requests: usize) -> Result<(AsyncClient, EventLoop)> {
        let mut options = MqttOptions::new(client_id.clone(), self.host.clone(), self.port);
        options
            .set_keep_alive(KEEP_ALIVE)
            .set_clean_session(self.clean_session)
            .set_max_packet_size(self.max_packet, self.max_packet);
        if let Some((user, password)) = &self.credentials {
            options.set_credentials(user.clone(), password.clone());
        }
        let (client, mut eventloop) = AsyncClient::new(options, requests);
        let mut network = NetworkOptions::new();
        // Without TCP_NODELAY a lone small publish can wait for a delayed ACK (tens of ms),
        // which would measure Nagle, not the broker.
        network.set_tcp_nodelay(true);
        network.set_connection_timeout(NETWORK_TIMEOUT_SECS);
        eventloop.set_network_options(network);
        match eventloop.poll().await {
            Ok(Event::Incoming(Packet::ConnAck(ack))) if ack.code == ConnectReturnCode::Success => {
                Ok((client, eventloop))
            }
            Ok(other) => bail!("{client_id}: expected a successful CONNACK, got {other:?}"),
            Err(e) => Err(e).with_context(|| format!("{client_id}: connecting to {}:{}", self.host, self.port)),
        }
    }

    /// Connects, subscribes and waits for the SUBACK. Nothing polls the event loop afterwards,
    /// so the socket is not read until it is handed to [`receive`]: a stalled reader until then.
    pub async fn subscribed(&self, client_id: String, topic: String, qos: Qos) -> Result<(AsyncClient, EventLoop)> {
        let (client, mut eventloop) = self.connect(client_id.clone(), 8).await?;
        client.subscribe(topic.clone(), mqtt_qos(qos)).await.context("queueing SUBSCRIBE")?;
        loop {
            match eventloop.poll().await.with_context(|| format!("{client_id}: waiting for SUBACK"))? {
                Event::Incoming(Packet::SubAck(ack)) => {
                    if ack.return_codes.iter().any(|c| matches!(c, rumqttc::SubscribeReasonCode::Failure)) {
                        bail!("{client_id}: broker refused the subscription to {topic}");
                    }
                    break;
                }
                _ => continue,
            }
        }
        Ok((client, eventloop))
    }

    /// Connects and receives what the session delivers without subscribing: a persistent
    /// session coming back for what was kept for it.
    pub async fn resume(&self, client_id: String, clock: Clock, buffer: usize) -> Result<Subscription> {
        let (client, eventloop) = self.connect(client_id, 8).await?;
        Ok(receive(client, eventloop, clock, buffer))
    }

    /// Connects a publisher that counts the broker's acknowledgements.
    pub async fn acked_publisher(&self, client_id: String, retain: bool) -> Result<AckedPublisher> {
        let (client, mut eventloop) = self.connect(client_id, PUBLISH_QUEUE).await?;
        let (acks_tx, acks) = watch::channel(0u64);
        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        let driver = client.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut stop_rx => return goodbye(driver, eventloop).await,
                    event = eventloop.poll() => match event {
                        Ok(Event::Incoming(Packet::PubAck(_))) => acks_tx.send_modify(|n| *n += 1),
                        Ok(_) => {}
                        Err(e) => return Some(e.to_string()),
                    },
                }
            }
        });
        Ok(AckedPublisher { client, retain, acks, connection: Connection::new(stop_tx, task) })
    }
}

fn mqtt_qos(qos: Qos) -> QoS {
    match qos {
        Qos::AtMostOnce => QoS::AtMostOnce,
        Qos::AtLeastOnce => QoS::AtLeastOnce,
        Qos::ExactlyOnce => QoS::ExactlyOnce,
    }
}

/// Sends DISCONNECT after whatever is already queued and lets the event loop write it.
async fn goodbye(client: AsyncClient, mut eventloop: EventLoop) -> Option<String> {
    if client.try_disconnect().is_err() {
        return None;
    }
    let drain = async {
        loop {
            match eventloop.poll().await {
                Ok(Event::Outgoing(rumqttc::Outgoing::Disconnect)) | Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    let _ = tokio::time::timeout(GOODBYE_TIMEOUT, drain).await;
    None
}

/// Drives a connection that only sends (or only stays alive) until told to stop.
fn spawn_driver(client: AsyncClient, mut eventloop: EventLoop) -> Connection {
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = &mut stop_rx => return goodbye(client, eventloop).await,
                event = eventloop.poll() => if let Err(e) = event {
                    return Some(e.to_string());
                },
            }
        }
    });
    Connection::new(stop_tx, task)
}

/// An MQTT publisher: the client handle plus its event-loop task.
pub struct MqttPublisher {
    client: AsyncClient,
    qos: QoS,
    connection: Connection,
}

impl Publisher for MqttPublisher {
    async fn publish(&mut self, topic: &str, payload: Bytes) -> Result<()> {
        self.client.publish_bytes(topic, self.qos, false, payload).await.context("MQTT publisher's connection is gone")
    }

    async fn close(self) -> Option<String> {
        self.connection.close().await
    }
}

impl Connector for MqttConnector {
    type Publisher = MqttPublisher;

    async fn publisher(&self, client_id: String, qos: Qos) -> Result<MqttPublisher> {
        let (client, eventloop) = self.connect(client_id, PUBLISH_QUEUE).await?;
        let connection = spawn_driver(client.clone(), eventloop);
        Ok(MqttPublisher { client, qos: mqtt_qos(qos), connection })
    }

    async fn subscribe(
        &self,
        client_id: String,
        topic: String,
        qos: Qos,
        clock: Clock,
        buffer: usize,
    ) -> Result<Subscription> {
        let (client, eventloop) = self.subscribed(client_id, topic, qos).await?;
        Ok(receive(client, eventloop, clock, buffer))
    }

    async fn idle(&self, client_id: String) -> Result<Connection> {
        let (client, eventloop) = self.connect(client_id, 1).await?;
        Ok(spawn_driver(client, eventloop))
    }
}

/// Drives a subscribed connection: every PUBLISH becomes a delivery on a channel of `buffer`.
pub fn receive(client: AsyncClient, mut eventloop: EventLoop, clock: Clock, buffer: usize) -> Subscription {
    let (tx, deliveries) = mpsc::channel(buffer.max(1));
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = &mut stop_rx => return goodbye(client, eventloop).await,
                event = eventloop.poll() => match event {
                    Ok(Event::Incoming(Packet::Publish(publish))) => {
                        let delivery = Delivery { payload: publish.payload, received_ns: clock.now_ns() };
                        // Waiting here while the scenario is behind is the backpressure:
                        // the socket is not read until there is room.
                        if tx.send(delivery).await.is_err() {
                            return goodbye(client, eventloop).await;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => return Some(e.to_string()),
                },
            }
        }
    });
    Subscription { deliveries, connection: Connection::new(stop_tx, task) }
}

/// An MQTT publisher for attacks, where what the broker acknowledged is the figure: it counts
/// PUBACKs, and says when the broker closed its connection.
pub struct AckedPublisher {
    client: AsyncClient,
    retain: bool,
    acks: watch::Receiver<u64>,
    connection: Connection,
}

impl AckedPublisher {
    /// Hands one message to the client; fails once the connection is gone.
    pub async fn publish(&self, topic: &str, qos: Qos, payload: Bytes) -> Result<()> {
        let client = &self.client;
        client.publish_bytes(topic, mqtt_qos(qos), self.retain, payload).await.context("MQTT connection is gone")
    }

    /// Waits until `n` messages are acknowledged, the connection ends, or no acknowledgement
    /// came for `idle`; returns how many were.
    pub async fn acked(&mut self, n: u64, idle: Duration) -> u64 {
        while *self.acks.borrow() < n {
            match tokio::time::timeout(idle, self.acks.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => break,
            }
        }
        *self.acks.borrow()
    }

    /// Disconnects; returns the reason if the broker had closed the connection first.
    pub async fn close(self) -> Option<String> {
        self.connection.close().await
    }
}
