//! AMQP 0.9.1 clients built on lapin. Topics go through the `amq.topic` exchange, which tolk
//! (like RabbitMQ) joins to its topic space: routing-key words are topic levels, with `.` and
//! `/` swapped inside them (docs/translation.md). A subscriber is a server-named exclusive
//! queue bound to `amq.topic`.
//!
//! Unlike the MQTT and STOMP clients, lapin reads the socket in its own task and buffers
//! deliveries, so a slow AMQP reader is throttled by the broker only in at-least-once mode,
//! where `basic.qos` caps the unacknowledged deliveries. Deliveries are taken from lapin's
//! `Consumer` stream in order; its delegate API runs each delivery as a separate task, which
//! would reorder them.

use anyhow::{Context, Result};
use bytes::Bytes;
use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, ConnectionProperties};
use tokio::sync::{mpsc, oneshot};

use super::{Connection, Connector, Delivery, Publisher, Qos, Subscription, Target};
use crate::clock::Clock;

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
}

impl AmqpConnector {
    /// A connector for `target`.
    pub fn new(target: &Target) -> Self {
        AmqpConnector { uri: format!("amqp://guest:guest@{}:{}/%2f", target.host, target.port) }
    }

    /// Opens a connection and one channel on it.
    pub async fn open(&self, client_id: &str) -> Result<(lapin::Connection, Channel)> {
        let properties = ConnectionProperties::default().with_connection_name(client_id.into());
        let connection = lapin::Connection::connect(&self.uri, properties)
            .await
            .with_context(|| format!("{client_id}: connecting to {}", self.uri))?;
        let channel = connection.create_channel().await.context("opening a channel")?;
        Ok((connection, channel))
    }
}

/// A task that holds the connection until stopped, then closes it; reports the broker's
/// error if the connection failed first.
fn hold(connection: lapin::Connection) -> Connection {
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = stop_rx.await;
        let status = connection.status();
        let reason = (!status.connected()).then(|| "connection closed by broker".to_string());
        let _ = connection.close(200, "bye".into()).await;
        reason
    });
    Connection::new(stop_tx, task)
}

/// An AMQP publisher: one channel, publishing to `amq.topic` without confirms.
pub struct AmqpPublisher {
    channel: Channel,
    properties: BasicProperties,
    connection: Connection,
}

impl Publisher for AmqpPublisher {
    async fn publish(&mut self, topic: &str, payload: Bytes) -> Result<()> {
        self.channel
            .basic_publish(
                TOPIC_EXCHANGE.into(),
                routing_key(topic).as_str().into(),
                BasicPublishOptions::default(),
                &payload,
                self.properties.clone(),
            )
            .await
            .context("AMQP basic.publish failed")?;
        Ok(())
    }

    async fn close(self) -> Option<String> {
        self.connection.close().await
    }
}

impl Connector for AmqpConnector {
    type Publisher = AmqpPublisher;

    async fn publisher(&self, client_id: String, qos: Qos) -> Result<AmqpPublisher> {
        let (connection, channel) = self.open(&client_id).await?;
        let properties = match qos {
            Qos::AtMostOnce => BasicProperties::default(),
            _ => BasicProperties::default().with_delivery_mode(PERSISTENT),
        };
        Ok(AmqpPublisher { channel, properties, connection: hold(connection) })
    }

    async fn subscribe(
        &self,
        client_id: String,
        topic: String,
        qos: Qos,
        clock: Clock,
        buffer: usize,
    ) -> Result<Subscription> {
        let (connection, channel) = self.open(&client_id).await?;
        let ack_each = qos != Qos::AtMostOnce;
        if ack_each {
            let prefetch = u16::try_from(buffer.max(1)).unwrap_or(u16::MAX);
            channel.basic_qos(prefetch, BasicQosOptions::default()).await.context("basic.qos")?;
        }
        let queue = channel
            .queue_declare(
                "".into(),
                QueueDeclareOptions { exclusive: true, auto_delete: true, ..Default::default() },
                FieldTable::default(),
            )
            .await
            .context("declaring the subscriber's queue")?;
        channel
            .queue_bind(
                queue.name().clone(),
                TOPIC_EXCHANGE.into(),
                routing_key(&topic).as_str().into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .with_context(|| format!("binding to {TOPIC_EXCHANGE} with {}", routing_key(&topic)))?;
        let consumer = channel
            .basic_consume(
                queue.name().clone(),
                client_id.as_str().into(),
                BasicConsumeOptions { no_ack: !ack_each, ..Default::default() },
                FieldTable::default(),
            )
            .await
            .context("basic.consume")?;
        let (tx, deliveries) = mpsc::channel(buffer.max(1));
        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        let mut consumer = consumer;
        let task = tokio::spawn(async move {
            let reason = loop {
                tokio::select! {
                    _ = &mut stop_rx => break None,
                    next = consumer.next() => match next {
                        Some(Ok(delivery)) => {
                            let received_ns = clock.now_ns();
                            if ack_each && let Err(e) = delivery.ack(BasicAckOptions::default()).await {
                                break Some(format!("basic.ack: {e}"));
                            }
                            let payload = Bytes::from(delivery.data);
                            // Waiting here stops taking deliveries; with acks, basic.qos then
                            // holds the broker back.
                            if tx.send(Delivery { payload, received_ns }).await.is_err() {
                                break None;
                            }
                        }
                        Some(Err(e)) => break Some(e.to_string()),
                        None => break Some("consumer cancelled by broker".into()),
                    },
                }
            };
            let _ = connection.close(200, "bye".into()).await;
            reason
        });
        Ok(Subscription { deliveries, connection: Connection::new(stop_tx, task) })
    }

    async fn idle(&self, client_id: String) -> Result<Connection> {
        let (connection, _channel) = self.open(&client_id).await?;
        Ok(hold(connection))
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
