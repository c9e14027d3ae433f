//! AMQP 0.9.1 through lapin. Publishing goes to `amq.topic` with publisher confirms on;
//! subscribing binds a queue to `amq.topic`. Reconnect = connection.close, then a new
//! connection consuming the same durable, non-exclusive queue, which kept what arrived meanwhile.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions, QueueBindOptions,
    QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, Consumer};

use super::{BoxFuture, Outgoing, PubSub, Received, Subscription, within};

pub struct Amqp {
    uri: String,
    name: String,
    connection: Connection,
    channel: Channel,
    consumer: Option<Consumer>,
    /// The queue consumed, and whether deliveries are acknowledged by hand.
    queue: Option<(String, bool)>,
}

fn s(v: &str) -> ShortString {
    v.into()
}

async fn open(uri: &str) -> (Connection, Channel) {
    let connection = within("AMQP connection", Connection::connect(uri, ConnectionProperties::default()))
        .await
        .expect("AMQP connect");
    let channel = within("AMQP channel", connection.create_channel()).await.expect("AMQP channel");
    within("confirm.select-ok", channel.confirm_select(ConfirmSelectOptions::default())).await.unwrap();
    (connection, channel)
}

/// Declares a durable queue bound to `amq.topic` with `binding_key` over its own connection.
/// STOMP uses it too: it shares named queues with AMQP and has no way to bind one itself.
pub async fn declare_bound_queue(addr: SocketAddr, queue: &str, binding_key: &str) {
    let (connection, channel) = open(&uri(addr)).await;
    let options = QueueDeclareOptions { durable: true, ..QueueDeclareOptions::default() };
    within("queue.declare-ok", channel.queue_declare(s(queue), options, FieldTable::default())).await.unwrap();
    let bind = channel.queue_bind(
        s(queue),
        s("amq.topic"),
        s(binding_key),
        QueueBindOptions::default(),
        FieldTable::default(),
    );
    within("queue.bind-ok", bind).await.unwrap();
    within("connection.close-ok", connection.close(200, s("bye"))).await.unwrap();
}

fn uri(addr: SocketAddr) -> String {
    format!("amqp://guest:guest@{addr}/%2f")
}

impl Amqp {
    pub async fn connect(addr: SocketAddr, name: &str) -> Amqp {
        let uri = uri(addr);
        let (connection, channel) = open(&uri).await;
        Amqp { uri, name: name.to_owned(), connection, channel, consumer: None, queue: None }
    }

    async fn consume(&mut self) {
        let (queue, manual_ack) = self.queue.clone().expect("subscribed");
        let options = BasicConsumeOptions { no_ack: !manual_ack, ..BasicConsumeOptions::default() };
        let consume = self.channel.basic_consume(s(&queue), s(""), options, FieldTable::default());
        self.consumer = Some(within("basic.consume-ok", consume).await.expect("basic.consume"));
    }
}

/// Header values as text, the way a client would show them.
fn header_text(value: &AMQPValue) -> String {
    match value {
        AMQPValue::LongString(v) => String::from_utf8_lossy(v.as_bytes()).into_owned(),
        AMQPValue::ShortString(v) => v.as_str().to_owned(),
        other => format!("{other:?}"),
    }
}

impl PubSub for Amqp {
    fn subscribe<'a>(&'a mut self, sub: Subscription<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // A surviving subscription needs a named queue that outlives the connection; else a
            // server-named exclusive queue, gone with the connection.
            let (name, options) = if sub.survive_reconnect {
                (format!("all-pairs.{}", self.name), QueueDeclareOptions { durable: true, ..Default::default() })
            } else {
                (String::new(), QueueDeclareOptions { exclusive: true, auto_delete: true, ..Default::default() })
            };
            let declared =
                within("queue.declare-ok", self.channel.queue_declare(s(&name), options, FieldTable::default()))
                    .await
                    .expect("queue.declare");
            let queue = declared.name().to_string();
            let key = super::amqp_key(sub.filter);
            let bind = self.channel.queue_bind(
                s(&queue),
                s("amq.topic"),
                s(&key),
                QueueBindOptions::default(),
                FieldTable::default(),
            );
            within("queue.bind-ok", bind).await.expect("queue.bind");
            self.queue = Some((queue, sub.at_least_once));
            self.consume().await;
        })
    }

    fn publish<'a>(&'a mut self, m: &'a Outgoing) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let mut properties = BasicProperties::default();
            if let Some(content_type) = &m.content_type {
                properties = properties.with_content_type(s(content_type));
            }
            if let Some((name, value)) = &m.header {
                let mut headers = FieldTable::default();
                headers.insert(s(name), AMQPValue::LongString(LongString::from(value.as_str())));
                properties = properties.with_headers(headers);
            }
            if m.at_least_once {
                properties = properties.with_delivery_mode(2);
            }
            if let Some(correlation) = &m.correlation {
                properties = properties.with_correlation_id(s(correlation));
            }
            if let Some(reply_to) = &m.reply_to {
                // An AMQP reply-to names a queue; the client puts the key it would reply with.
                properties = properties.with_reply_to(s(&super::amqp_key(reply_to)));
            }
            if let Some(expiry) = m.expiry {
                properties = properties.with_expiration(s(&expiry.as_millis().to_string()));
            }
            let key = super::amqp_key(&m.topic);
            let publish = self.channel.basic_publish(
                s("amq.topic"),
                s(&key),
                BasicPublishOptions { mandatory: true, ..Default::default() },
                &m.payload,
                properties,
            );
            let confirm = within("basic.publish", publish).await.expect("basic.publish");
            let confirm = within("the publisher confirm", confirm).await.expect("confirm");
            assert!(confirm.is_ack(), "AMQP: publish to {key} was nacked");
            assert!(confirm.take_message().is_none(), "AMQP: publish to {key} came back unroutable");
        })
    }

    fn next_message(&mut self, timeout: Duration) -> BoxFuture<'_, Option<Received>> {
        Box::pin(async move {
            let consumer = self.consumer.as_mut().expect("subscribed");
            let delivery = tokio::time::timeout(timeout, consumer.next()).await.ok()?;
            let delivery = delivery.expect("AMQP consumer ended").expect("AMQP delivery");
            if self.queue.as_ref().is_some_and(|(_, manual)| *manual) {
                within("basic.ack", delivery.acker.ack(BasicAckOptions::default())).await.expect("basic.ack");
            }
            assert_eq!(delivery.exchange.as_str(), "amq.topic", "AMQP delivery from exchange {}", delivery.exchange);
            let properties = &delivery.properties;
            let headers = properties
                .headers()
                .as_ref()
                .map(|table| table.inner().iter().map(|(k, v)| (k.to_string(), header_text(v))).collect())
                .unwrap_or_default();
            Some(Received {
                topic: delivery.routing_key.to_string(),
                payload: Bytes::from(delivery.data.clone()),
                content_type: properties.content_type().as_ref().map(|c| c.to_string()),
                headers,
                at_least_once: Some(properties.delivery_mode() == &Some(2)),
                correlation: properties.correlation_id().as_ref().map(|c| c.to_string()),
                reply_to: properties.reply_to().as_ref().map(|r| r.to_string()),
                expires_in: properties
                    .expiration()
                    .as_ref()
                    .map(|ms| Duration::from_millis(ms.as_str().parse().expect("expiration is milliseconds"))),
            })
        })
    }

    fn disconnect(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.consumer = None;
            within("connection.close-ok", self.connection.close(200, s("bye"))).await.expect("connection.close");
        })
    }

    fn reconnect(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            (self.connection, self.channel) = open(&self.uri).await;
            self.consume().await;
        })
    }

    fn own_terms(&self, topic: &str) -> String {
        super::amqp_key(topic)
    }
}

#[test]
fn keys_follow_the_translation_rules() {
    assert_eq!(super::amqp_key("sensors/room.1/temp"), "sensors.room/1.temp");
    assert_eq!(super::amqp_key("a/+/b/#"), "a.*.b.#");
}
