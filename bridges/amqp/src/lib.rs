//! The AMQP bridge: one AMQP 0.9.1 connection to a remote broker (RabbitMQ), through an
//! exchange, `amq.topic` by default, with the AMQP front end's key mapping (topic `a/b.c` is
//! routing key `a.b/c`, [`tolk_amqp::topic_key`]).
//!
//! - **Out.** What the spool holds is published to the exchange with publisher confirms on, as
//!   persistent messages (delivery mode 2) when at least once, with up to `max_inflight`
//!   unconfirmed. A message leaves the spool only once the remote confirms it; a nack, or no
//!   confirm for `ack_timeout`, ends the connection and the unconfirmed ones are sent again.
//! - **In.** A durable queue at the remote, `tolk-<node>-<name>`, is bound to the exchange with
//!   the binding key of every `in` rule, so the remote keeps what comes while the bridge is
//!   away. It is consumed with `max_inflight` prefetch and manual acks: a message is acked to
//!   the remote only once what it left here is on disk.
//! - AMQP has no No Local: what the bridge publishes to keys it also binds comes back to it.
//!   Those copies carry this node on their `tolk-path` header, so the router drops them (and
//!   the bridge acks them at the remote).
//! - User properties travel as headers (string values), `tolk-path` among them.

#![warn(missing_docs)]

use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::Pin;
use std::str::FromStr;

use bytes::Bytes;
use futures_util::StreamExt;
use lapin::message::Delivery as AmqpDelivery;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions, QueueBindOptions,
    QueueDeclareOptions,
};
use lapin::tcp::OwnedTLSConfig;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::uri::{AMQPUri, AMQPUserInfo};
use lapin::{
    BasicProperties, Channel, Confirmation, Connection, ConnectionBuilder, ConnectionProperties, Event,
    PublisherConfirm,
};
use tokio::time::Instant;
use tolk_amqp::topic_key;
use tolk_bridge::{AwaitingStore, Inbound, Kind, Launch, Link, Outbound, Refused, Runner};
use tolk_core::QoS;
use tolk_core::store::Durable;

/// The AMQP kind, for [`tolk_bridge::Bridges`].
pub fn runner() -> (Kind, Runner) {
    (Kind::Amqp, |link| Launch::task(run(link)))
}

/// Connects, moves messages, and connects again after a failure, until the broker stops.
async fn run(link: Link) {
    link.reconnecting(async |link, backoff| connection(link, backoff).await).await;
}

/// The remote's address with the configured credentials in it.
fn uri(link: &Link) -> Result<AMQPUri, String> {
    let config = link.config();
    let mut uri = AMQPUri::from_str(&config.url).map_err(|e| format!("url {:?}: {e}", config.url_for_logs()))?;
    if let Some(username) = &config.username {
        uri.authority.userinfo =
            AMQPUserInfo { username: username.clone(), password: config.password.clone().unwrap_or_default() };
    }
    if uri.query.heartbeat.is_none() {
        let seconds = config.keep_alive.as_secs().clamp(1, u64::from(u16::MAX));
        uri.query.heartbeat = Some(seconds as u16);
    }
    Ok(uri)
}

/// Opens the connection and its channel, sets up the `in` queue, and moves messages until the
/// connection fails (the reason) or the broker stops (`None`).
async fn connection(link: &mut Link, backoff: &mut tolk_bridge::Backoff) -> Option<String> {
    let uri = match uri(link) {
        Ok(uri) => uri,
        Err(reason) => return Some(reason),
    };
    let shutdown = link.shutdown().clone();
    let connected = tokio::select! {
        _ = shutdown.cancelled() => return None,
        connected = connect(link, uri) => connected,
    };
    let (connection, channel, mut consumer) = match connected {
        Ok(connected) => connected,
        Err(reason) => return Some(reason),
    };
    // A connection lost while nothing is asked of it (the remote stopped, a missed heartbeat)
    // shows only here.
    let mut events = connection.events_listener();
    link.connected();
    backoff.reset();

    let max_inflight = usize::from(link.config().max_inflight);
    let ack_timeout = link.config().ack_timeout;
    let exchange = ShortString::from(link.config().exchange.as_str());
    let mut unconfirmed: VecDeque<(PublisherConfirm, Outbound)> = VecDeque::new();
    let mut awaiting_store: AwaitingStore<AmqpDelivery> = AwaitingStore::default();
    let mut last_progress = Instant::now();

    let reason = loop {
        let room = unconfirmed.len() < max_inflight;
        let stalled = !unconfirmed.is_empty();
        tokio::select! {
            _ = shutdown.cancelled() => break None,
            out = link.next_outbound(), if room => {
                let key = topic_key::topic_to_routing_key(&out.topic);
                let properties = properties(&out);
                let published =
                    channel.basic_publish(exchange.clone(), key.into(), BasicPublishOptions::default(), &out.message.payload, properties).await;
                match published {
                    Ok(confirm) => {
                        if unconfirmed.is_empty() {
                            last_progress = Instant::now();
                        }
                        unconfirmed.push_back((confirm, out));
                    }
                    Err(e) => break Some(format!("could not publish: {e}")),
                }
            }
            confirmation = front_confirm(&mut unconfirmed) => {
                let (_, out) = unconfirmed.pop_front().expect("a confirm came from the front");
                match confirmation {
                    Ok(Confirmation::Nack(_)) => break Some("the remote refused a message (nack); it will be sent again".into()),
                    Ok(_) => {
                        link.confirmed(out);
                        last_progress = Instant::now();
                    }
                    Err(e) => break Some(format!("connection lost while awaiting a confirm: {e}")),
                }
            }
            delivery = consumer.next() => {
                match delivery {
                    Some(Ok(delivery)) => match take_in(link, &delivery) {
                        Ok(durable) => awaiting_store.push(durable, delivery),
                        Err(reason) => break Some(reason),
                    },
                    Some(Err(e)) => break Some(format!("consumer failed: {e}")),
                    None => break Some("the remote cancelled the consumer".into()),
                }
            }
            (result, delivery) = awaiting_store.next() => {
                if let Err(e) = result {
                    break Some(format!("a message from the remote could not be stored here ({e}); it will be sent again"));
                }
                if let Err(e) = delivery.acker.ack(BasicAckOptions::default()).await {
                    break Some(format!("could not ack: {e}"));
                }
            }
            event = events.next() => match event {
                Some(Event::Error(e)) => break Some(describe(&e)),
                None => break Some("the connection ended".into()),
                Some(_) => {}
            },
            _ = tokio::time::sleep_until(last_progress + ack_timeout), if stalled => {
                break Some(format!("the remote confirmed nothing for {ack_timeout:?}; reconnecting"));
            }
        }
    };
    let _ = connection.close(200, "tolk bridge stopping".into()).await;
    reason
}

/// The connection, its channel in confirm mode, and the consumer of the `in` queue (a stream
/// that never yields when there are no `in` rules).
async fn connect(link: &Link, uri: AMQPUri) -> Result<(Connection, Channel, Consumer), String> {
    let config = link.config();
    let properties = ConnectionProperties::default()
        .with_connection_name(format!("tolk bridge {} of {}", config.name, link.node()).into());
    let connection = ConnectionBuilder::new()
        .map_err(|e| describe(&e))?
        .with_uri(uri)
        .with_properties(properties)
        .with_tls_config(tls_config(config)?)
        .connect()
        .await
        .map_err(|e| describe(&e))?;
    let channel = connection.create_channel().await.map_err(|e| describe(&e))?;
    channel.confirm_select(ConfirmSelectOptions::default()).await.map_err(|e| describe(&e))?;
    let bindings = link.remote_subscriptions();
    if bindings.is_empty() {
        return Ok((connection, channel, Consumer::None));
    }
    let queue = format!("tolk-{}-{}", link.node(), config.name);
    let durable = QueueDeclareOptions { durable: true, ..QueueDeclareOptions::default() };
    channel.queue_declare(queue.as_str().into(), durable, FieldTable::default()).await.map_err(|e| describe(&e))?;
    for (filter, _) in &bindings {
        let key = topic_key::filter_to_binding_key(filter);
        channel
            .queue_bind(
                queue.as_str().into(),
                config.exchange.as_str().into(),
                key.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| describe(&e))?;
    }
    channel.basic_qos(config.max_inflight, BasicQosOptions::default()).await.map_err(|e| describe(&e))?;
    let consumer = channel
        .basic_consume(
            queue.as_str().into(),
            "tolk-bridge".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(|e| describe(&e))?;
    Ok((connection, channel, Consumer::Queue(consumer)))
}

/// What `amqps://` trusts besides the system's certificates: those in `ca_file` (lapin takes
/// them as PEM text; rustls with ring checks them).
fn tls_config(config: &tolk_bridge::BridgeConfig) -> Result<OwnedTLSConfig, String> {
    let cert_chain = match &config.ca_file {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|e| format!("ca_file {}: {e}", path.display()))?),
        None => None,
    };
    Ok(OwnedTLSConfig { identity: None, cert_chain })
}

/// The `in` queue's consumer, if there are `in` rules.
enum Consumer {
    None,
    Queue(lapin::Consumer),
}

impl Consumer {
    async fn next(&mut self) -> Option<lapin::Result<AmqpDelivery>> {
        match self {
            Consumer::None => std::future::pending().await,
            Consumer::Queue(consumer) => consumer.next().await,
        }
    }
}

/// Publishes here what the remote delivered. `Err`: the connection ends (the remote delivers
/// the message again).
fn take_in(link: &Link, delivery: &AmqpDelivery) -> Result<Option<Durable>, String> {
    let Ok(topic) = topic_key::routing_key_to_topic(delivery.routing_key.as_str()) else {
        // No topic for that key: acked and dropped (the bindings come from topic filters, so
        // this is the remote's doing).
        return Ok(None);
    };
    let properties = &delivery.properties;
    let qos = if properties.delivery_mode() == &Some(2) { QoS::AtLeastOnce } else { QoS::AtMostOnce };
    let user: Vec<(String, String)> = properties
        .headers()
        .as_ref()
        .map(|headers| headers.inner().iter().filter_map(|(k, v)| Some((k.to_string(), header_text(v)?))).collect())
        .unwrap_or_default();
    let props = tolk_core::Properties {
        user,
        content_type: properties.content_type().as_ref().map(|c| c.to_string()),
        ..tolk_core::Properties::default()
    };
    let inbound = Inbound { payload: Bytes::copy_from_slice(&delivery.data), qos, retain: false, props };
    match link.publish_in(&topic, inbound) {
        Ok(durable) => Ok(durable),
        Err(Refused::Unmapped) => Ok(None),
        Err(Refused::Full) => {
            Err("this broker is full (memory budget or queue limits); the remote will deliver again".into())
        }
    }
}

/// A header value as text, when it is one.
fn header_text(value: &AMQPValue) -> Option<String> {
    match value {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.to_string()),
        _ => None,
    }
}

/// The AMQP properties of an outbound message: persistent when at least once, its content
/// type, and its user properties (with the path) as headers.
fn properties(out: &Outbound) -> BasicProperties {
    let mut headers = FieldTable::default();
    for (key, value) in &out.user {
        headers.insert(key.as_str().into(), AMQPValue::LongString(value.as_str().into()));
    }
    let mut properties = BasicProperties::default().with_headers(headers);
    if out.qos != QoS::AtMostOnce {
        properties = properties.with_delivery_mode(2);
    }
    if let Some(content_type) = &out.message.props.content_type {
        properties = properties.with_content_type(content_type.as_str().into());
    }
    properties
}

/// The oldest publish's confirmation; pending while none is awaited.
async fn front_confirm(unconfirmed: &mut VecDeque<(PublisherConfirm, Outbound)>) -> lapin::Result<Confirmation> {
    poll_fn(|cx| match unconfirmed.front_mut() {
        None => std::task::Poll::Pending,
        Some((confirm, _)) => Pin::new(confirm).poll(cx),
    })
    .await
}

/// A lapin error as a log line a user can act on (a refused login says so).
fn describe(error: &lapin::Error) -> String {
    let text = error.to_string();
    if text.contains("ACCESS_REFUSED") || text.contains("403") {
        format!("the remote refused the connection: {text}")
    } else {
        text
    }
}
