//! AMQP 0.9.1 clients of the bench's own ([`wire`]). Topics go through the `amq.topic`
//! exchange, which tolk (like RabbitMQ) joins to its topic space: routing-key words are topic
//! levels, with `.` and `/` swapped inside them (docs/translation.md). A subscriber is a
//! server-named exclusive queue bound to `amq.topic`, read by its own task like the MQTT and
//! STOMP subscribers, so that a slow reader is TCP backpressure on the broker.
//!
//! These clients replaced lapin for the load scenarios: lapin hands each publish to its own I/O
//! task and took the bench's whole core at about 31,000 messages/s, below what either broker
//! moves. lapin stays for the scenarios that need publisher confirms ([`AmqpConnector::open`]).

mod wire;

use std::net::SocketAddr;

use amq_protocol::protocol::{AMQPClass, basic, connection, queue};
use amq_protocol::types::FieldTable;
use anyhow::{Context, Result, bail};
use bytes::{Bytes, BytesMut};
use lapin::{Channel, ConnectionProperties};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};

use super::{Connection, Connector, Delivery, Publisher, Qos, Subscription, Target};
use crate::clock::Clock;
use wire::{FrameReader, Incoming, Opened};

/// The exchange tolk maps onto its topic space.
pub const TOPIC_EXCHANGE: &str = "amq.topic";

/// AMQP delivery-mode 2 ("persistent"): tolk treats it as at-least-once.
pub const PERSISTENT: u8 = 2;

/// A topic (or filter) as an `amq.topic` routing (or binding) key.
pub(crate) fn routing_key(topic: &str) -> String {
    topic
        .chars()
        .map(|c| match c {
            '/' => '.',
            '.' => '/',
            '+' => '*',
            other => other,
        })
        .collect()
}

/// Connects AMQP clients to one broker as guest/guest on vhost `/`.
#[derive(Debug, Clone)]
pub struct AmqpConnector {
    uri: String,
    addr: SocketAddr,
}

impl AmqpConnector {
    /// A connector for `target`.
    pub fn new(target: &Target) -> Self {
        AmqpConnector { uri: format!("amqp://guest:guest@{}:{}/%2f", target.host, target.port), addr: target.addr }
    }

    /// Opens a lapin connection and one channel on it, for the scenarios that use publisher
    /// confirms.
    pub async fn open(&self, client_id: &str) -> Result<(lapin::Connection, Channel)> {
        let properties = ConnectionProperties::default().with_connection_name(client_id.into());
        let connection = lapin::Connection::connect(&self.uri, properties)
            .await
            .with_context(|| format!("{client_id}: connecting to {}", self.uri))?;
        let channel = connection.create_channel().await.context("opening a channel")?;
        Ok((connection, channel))
    }
}

/// Reads frames until told to stop; returns why the broker ended the connection if it did. A
/// `connection.close-ok` ends it quietly: the client said goodbye first.
fn spawn_watcher(mut reader: FrameReader<OwnedReadHalf>, mut writer: Option<OwnedWriteHalf>) -> Connection {
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut stopping = false;
        loop {
            tokio::select! {
                _ = &mut stop_rx, if !stopping => {
                    stopping = true;
                    if let Some(w) = writer.as_mut() && w.write_all(&wire::goodbye()).await.is_err() {
                        return None;
                    }
                }
                frame = reader.next() => match frame {
                    Ok(Some(Incoming::Method(AMQPClass::Connection(connection::AMQPMethod::CloseOk(_))))) => {
                        return None;
                    }
                    Ok(Some(Incoming::Method(method))) => {
                        if let Some(refusal) = wire::refusal(&method) {
                            return Some(format!("{refusal:#}"));
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) if stopping => return None,
                    Ok(None) => return Some("connection closed by broker".into()),
                    Err(e) => return Some(format!("{e:#}")),
                },
            }
        }
    });
    Connection::new(stop_tx, task)
}

/// An AMQP publisher: `basic.publish` to `amq.topic` without confirms, each message written to
/// the socket as it comes (method, header and body in one write).
pub struct AmqpPublisher {
    writer: OwnedWriteHalf,
    properties: basic::AMQPProperties,
    frame_max: usize,
    /// The encoded `basic.publish` of the last topic: a run publishes to one topic.
    method: Option<(String, Vec<u8>)>,
    out: Vec<u8>,
    connection: Connection,
}

impl Publisher for AmqpPublisher {
    async fn publish(&mut self, topic: &str, payload: Bytes) -> Result<()> {
        if self.method.as_ref().is_none_or(|(t, _)| t != topic) {
            let publish = basic::Publish {
                exchange: TOPIC_EXCHANGE.into(),
                routing_key: routing_key(topic).into(),
                mandatory: false,
                immediate: false,
            };
            let mut method = Vec::new();
            wire::encode_method(&mut method, wire::CHANNEL, AMQPClass::Basic(basic::AMQPMethod::Publish(publish)));
            self.method = Some((topic.to_owned(), method));
        }
        let (_, method) = self.method.as_ref().expect("encoded above");
        self.out.clear();
        self.out.extend_from_slice(method);
        wire::encode_content(&mut self.out, &self.properties, &payload, self.frame_max);
        self.writer.write_all(&self.out).await.context("AMQP publisher's connection is gone")
    }

    async fn close(mut self) -> Option<String> {
        // The goodbye goes after every publish; the watcher then waits for its close-ok.
        let _ = self.writer.write_all(&wire::goodbye()).await;
        self.connection.close().await
    }
}

impl Connector for AmqpConnector {
    type Publisher = AmqpPublisher;

    async fn publisher(&self, client_id: String, qos: Qos) -> Result<AmqpPublisher> {
        let Opened { reader, writer, frame_max } = wire::open(self.addr, &client_id).await?;
        let properties = match qos {
            Qos::AtMostOnce => basic::AMQPProperties::default(),
            _ => basic::AMQPProperties::default().with_delivery_mode(PERSISTENT),
        };
        let connection = spawn_watcher(reader, None);
        Ok(AmqpPublisher { writer, properties, frame_max, method: None, out: Vec::new(), connection })
    }

    async fn subscribe(
        &self,
        client_id: String,
        topic: String,
        qos: Qos,
        clock: Clock,
        buffer: usize,
    ) -> Result<Subscription> {
        let mut opened = wire::open(self.addr, &client_id).await?;
        let ack_each = qos != Qos::AtMostOnce;
        let setup = async {
            if ack_each {
                let prefetch_count = u16::try_from(buffer.max(1)).unwrap_or(u16::MAX);
                let qos = basic::Qos { prefetch_count, global: false };
                opened.call(AMQPClass::Basic(basic::AMQPMethod::Qos(qos))).await.context("basic.qos")?;
            }
            let declare = queue::Declare {
                queue: "".into(),
                passive: false,
                durable: false,
                exclusive: true,
                auto_delete: true,
                nowait: false,
                arguments: FieldTable::default(),
            };
            let AMQPClass::Queue(queue::AMQPMethod::DeclareOk(declared)) =
                opened.call(AMQPClass::Queue(queue::AMQPMethod::Declare(declare))).await?
            else {
                bail!("expected queue.declare-ok");
            };
            let bind = queue::Bind {
                queue: declared.queue.clone(),
                exchange: TOPIC_EXCHANGE.into(),
                routing_key: routing_key(&topic).into(),
                nowait: false,
                arguments: FieldTable::default(),
            };
            opened
                .call(AMQPClass::Queue(queue::AMQPMethod::Bind(bind)))
                .await
                .with_context(|| format!("binding to {TOPIC_EXCHANGE} with {}", routing_key(&topic)))?;
            let consume = basic::Consume {
                queue: declared.queue,
                consumer_tag: client_id.as_str().into(),
                no_local: false,
                no_ack: !ack_each,
                exclusive: false,
                nowait: false,
                arguments: FieldTable::default(),
            };
            let AMQPClass::Basic(basic::AMQPMethod::ConsumeOk(_)) =
                opened.call(AMQPClass::Basic(basic::AMQPMethod::Consume(consume))).await?
            else {
                bail!("expected basic.consume-ok");
            };
            Ok(())
        };
        setup.await.with_context(|| format!("{client_id}: subscribing to {topic}"))?;
        let Opened { mut reader, mut writer, .. } = opened;
        let (tx, deliveries) = mpsc::channel(buffer.max(1));
        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut content = Content::default();
            let mut out = Vec::new();
            loop {
                tokio::select! {
                    _ = &mut stop_rx => {
                        farewell(&mut reader, &mut writer).await;
                        return None;
                    }
                    frame = reader.next() => {
                        let payload = match frame {
                            Ok(Some(frame)) => match content.take(frame) {
                                Ok(Some(payload)) => payload,
                                Ok(None) => continue,
                                Err(e) => return Some(format!("{e:#}")),
                            },
                            Ok(None) => return Some("connection closed by broker".into()),
                            Err(e) => return Some(format!("{e:#}")),
                        };
                        let received_ns = clock.now_ns();
                        // One acknowledgement for everything read so far, sent when no
                        // further frame is waiting in the buffer (as clients that ack in
                        // batches do; prefetch still bounds what is unacknowledged).
                        if ack_each && !reader.has_frame() {
                            let ack = basic::Ack { delivery_tag: content.tag, multiple: true };
                            out.clear();
                            wire::encode_method(&mut out, wire::CHANNEL, AMQPClass::Basic(basic::AMQPMethod::Ack(ack)));
                            if let Err(e) = writer.write_all(&out).await {
                                return Some(format!("writing basic.ack: {e}"));
                            }
                        }
                        // Waiting for room here stops the socket reads: TCP backpressure, and
                        // with acknowledgements, basic.qos holds the broker back.
                        if tx.send(Delivery { payload, received_ns }).await.is_err() {
                            farewell(&mut reader, &mut writer).await;
                            return None;
                        }
                    }
                }
            }
        });
        Ok(Subscription { deliveries, connection: Connection::new(stop_tx, task) })
    }

    async fn idle(&self, client_id: String) -> Result<Connection> {
        let Opened { reader, writer, .. } = wire::open(self.addr, &client_id).await?;
        Ok(spawn_watcher(reader, Some(writer)))
    }
}

/// Says goodbye and waits for the broker's `connection.close-ok` (or the end of the stream), so
/// that neither side sees a reset. Deliveries still arriving meanwhile are dropped.
async fn farewell(reader: &mut FrameReader<OwnedReadHalf>, writer: &mut OwnedWriteHalf) {
    if writer.write_all(&wire::goodbye()).await.is_err() {
        return;
    }
    while let Ok(Some(frame)) = reader.next().await {
        if matches!(frame, Incoming::Method(AMQPClass::Connection(connection::AMQPMethod::CloseOk(_)))) {
            return;
        }
    }
}

/// A delivery being put together from its `basic.deliver`, content header and body frames.
#[derive(Default)]
struct Content {
    /// The delivery tag of the last `basic.deliver`.
    tag: u64,
    /// Body bytes still to come.
    remaining: u64,
    body: BytesMut,
}

impl Content {
    /// Feeds one frame; the payload once a delivery is complete. Other methods are ignored,
    /// except the broker closing the connection or the channel.
    fn take(&mut self, frame: Incoming) -> Result<Option<Bytes>> {
        match frame {
            Incoming::Method(AMQPClass::Basic(basic::AMQPMethod::Deliver(deliver))) => {
                self.tag = deliver.delivery_tag;
                self.body.clear();
                Ok(None)
            }
            Incoming::Method(method) => wire::refusal(&method).map_or(Ok(None), Err),
            Incoming::Header { body_size: 0 } => Ok(Some(Bytes::new())),
            Incoming::Header { body_size } => {
                self.remaining = body_size;
                Ok(None)
            }
            Incoming::Body(chunk) => {
                let Some(remaining) = self.remaining.checked_sub(chunk.len() as u64) else {
                    bail!("AMQP body longer than its header said");
                };
                self.remaining = remaining;
                if remaining == 0 && self.body.is_empty() {
                    return Ok(Some(chunk));
                }
                self.body.extend_from_slice(&chunk);
                Ok((remaining == 0).then(|| self.body.split().freeze()))
            }
            Incoming::Heartbeat => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_become_amq_topic_keys() {
        assert_eq!(routing_key("sensors/room.1/temp"), "sensors.room/1.temp");
        assert_eq!(routing_key("a/+/#"), "a.*.#");
    }
}
