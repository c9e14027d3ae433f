//! MQTT 3.1.1 clients built on rumqttc's `AsyncClient`, each connection with its own event-loop
//! task. rumqttc is what tolk's bridges and tests already use, and it is independent of both
//! brokers under test.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use rumqttc::{AsyncClient, ConnectReturnCode, Event, EventLoop, MqttOptions, NetworkOptions, Packet, QoS};
use tokio::sync::{mpsc, oneshot};

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
}

impl MqttConnector {
    /// A connector for `target`, sized for payloads of `payload` bytes.
    pub fn new(target: &Target, payload: usize) -> Self {
        MqttConnector { host: target.host.clone(), port: target.port, max_packet: payload.max(1024) + 4096 }
    }

    /// Opens a clean session and waits for a successful CONNACK.
    async fn connect(&self, client_id: String, requests: usize) -> Result<(AsyncClient, EventLoop)> {
        let mut options = MqttOptions::new(client_id.clone(), self.host.clone(), self.port);
        options
            .set_keep_alive(KEEP_ALIVE)
            .set_clean_session(true)
            .set_max_packet_size(self.max_packet, self.max_packet);
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
        Ok(Subscription { deliveries, connection: Connection::new(stop_tx, task) })
    }

    async fn idle(&self, client_id: String) -> Result<Connection> {
        let (client, eventloop) = self.connect(client_id, 1).await?;
        Ok(spawn_driver(client, eventloop))
    }
}
