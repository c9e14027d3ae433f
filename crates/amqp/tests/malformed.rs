//! Malformed and hostile input over raw TCP: each gets the right channel or connection error
//! (or the protocol header), and another client on the same broker is unaffected.

mod common;

use std::time::Duration;

use amq_protocol::frame::{AMQPContentHeader, AMQPFrame};
use amq_protocol::protocol::{AMQPClass, BasicProperties, basic, channel, connection, queue};
use amq_protocol::types::{AMQPValue, FieldTable};
use amqp_codec::{Frame, PROTOCOL_HEADER};
use common::{Broker, Raw, encode, method, within};
use lapin::options::QueueDeclareOptions;
use tolk_amqp::AmqpConfig;

fn open_channel(ch: u16) -> Vec<u8> {
    method(ch, AMQPClass::Channel(channel::AMQPMethod::Open(channel::Open {})))
}

async fn open(raw: &mut Raw, ch: u16) {
    raw.send(&open_channel(ch)).await;
    assert!(matches!(raw.method().await, AMQPClass::Channel(channel::AMQPMethod::OpenOk(_))));
}

/// A lapin connection opened before the abuse must still work after it.
async fn bystander_works(conn: &lapin::Connection) {
    let ch = within(conn.create_channel()).await.unwrap();
    within(ch.queue_declare("bystander".into(), QueueDeclareOptions::default(), FieldTable::default())).await.unwrap();
}

#[tokio::test]
async fn wrong_protocol_header_gets_ours_and_a_close() {
    let broker = Broker::start().await;
    let bystander = broker.connect().await;
    let mut raw = Raw::connect(broker.addr).await;
    raw.send(b"GET / HTTP/1.1\r\n\r\n").await;
    assert_eq!(raw.read_to_end().await, PROTOCOL_HEADER);
    // AMQP 0-10's header is answered the same way.
    let mut raw = Raw::connect(broker.addr).await;
    raw.send(b"AMQP\x01\x01\x00\x0a").await;
    assert_eq!(raw.read_to_end().await, PROTOCOL_HEADER);
    bystander_works(&bystander).await;
    broker.stop().await;
}

#[tokio::test]
async fn start_offers_the_capabilities_clients_need() {
    let broker = Broker::start().await;
    let mut raw = Raw::connect(broker.addr).await;
    raw.send(&PROTOCOL_HEADER).await;
    let AMQPClass::Connection(connection::AMQPMethod::Start(start)) = raw.method().await else { panic!("start") };
    assert_eq!((start.version_major, start.version_minor), (0, 9));
    assert_eq!(start.mechanisms.to_string(), "PLAIN AMQPLAIN");
    let Some(AMQPValue::FieldTable(caps)) = start.server_properties.inner().get("capabilities") else {
        panic!("capabilities")
    };
    for cap in [
        "publisher_confirms",
        "basic.nack",
        "consumer_cancel_notify",
        "exchange_exchange_bindings",
        "connection.blocked",
        "authentication_failure_close",
        "per_consumer_qos",
    ] {
        assert_eq!(caps.inner().get(cap), Some(&AMQPValue::Boolean(true)), "{cap}");
    }
    broker.stop().await;
}

#[tokio::test]
async fn frame_without_end_octet_is_a_frame_error() {
    let broker = Broker::start().await;
    let bystander = broker.connect().await;
    let mut raw = Raw::open(broker.addr, 0).await;
    let mut frame = open_channel(1);
    *frame.last_mut().unwrap() = 0x00;
    raw.send(&frame).await;
    let text = raw.expect_connection_close(501).await;
    assert!(text.contains("not 0xCE"), "{text}");
    bystander_works(&bystander).await;
    broker.stop().await;
}

#[tokio::test]
async fn oversize_frame_is_refused_from_its_header() {
    let broker = Broker::start_with(AmqpConfig { frame_max_bytes: 8192, ..AmqpConfig::default() }).await;
    let bystander = broker.connect().await;
    let mut raw = Raw::open(broker.addr, 0).await;
    // Only the 7-byte header of a 1 MB body frame: refused without waiting for the payload.
    raw.send(&[3, 0, 1, 0, 0x10, 0, 0]).await;
    let text = raw.expect_connection_close(501).await;
    assert!(text.contains("exceeds frame_max 8192"), "{text}");
    bystander_works(&bystander).await;
    broker.stop().await;
}

#[tokio::test]
async fn unknown_frame_type_is_a_frame_error() {
    let broker = Broker::start().await;
    let mut raw = Raw::open(broker.addr, 0).await;
    raw.send(&[9, 0, 0, 0, 0, 0, 0, 0xCE]).await;
    raw.expect_connection_close(501).await;
    broker.stop().await;
}

#[tokio::test]
async fn method_on_a_channel_that_is_not_open_is_a_channel_error() {
    let broker = Broker::start().await;
    let bystander = broker.connect().await;
    let mut raw = Raw::open(broker.addr, 0).await;
    raw.send(&method(5, AMQPClass::Basic(basic::AMQPMethod::Qos(basic::Qos { prefetch_count: 1, global: false }))))
        .await;
    let text = raw.expect_connection_close(504).await;
    assert!(text.contains("channel 5 is not open"), "{text}");
    // Opening a channel twice is one too.
    let mut raw = Raw::open(broker.addr, 0).await;
    open(&mut raw, 1).await;
    raw.send(&open_channel(1)).await;
    raw.expect_connection_close(504).await;
    bystander_works(&bystander).await;
    broker.stop().await;
}

#[tokio::test]
async fn content_out_of_order_is_an_unexpected_frame() {
    let broker = Broker::start().await;
    let bystander = broker.connect().await;
    // Body without header.
    let mut raw = Raw::open(broker.addr, 0).await;
    open(&mut raw, 1).await;
    raw.send(&encode(&AMQPFrame::Body(1, b"orphan".to_vec()))).await;
    raw.expect_connection_close(505).await;
    // Header without publish.
    let mut raw = Raw::open(broker.addr, 0).await;
    open(&mut raw, 1).await;
    let header = AMQPContentHeader { class_id: 60, body_size: 1, properties: BasicProperties::default() };
    raw.send(&encode(&AMQPFrame::Header(1, header))).await;
    raw.expect_connection_close(505).await;
    // A method where the content of a publish was expected.
    let mut raw = Raw::open(broker.addr, 0).await;
    open(&mut raw, 1).await;
    let publish = basic::Publish { exchange: "".into(), routing_key: "q".into(), mandatory: false, immediate: false };
    raw.send(&method(1, AMQPClass::Basic(basic::AMQPMethod::Publish(publish)))).await;
    raw.send(&method(1, AMQPClass::Basic(basic::AMQPMethod::Qos(basic::Qos { prefetch_count: 1, global: false }))))
        .await;
    raw.expect_connection_close(505).await;
    bystander_works(&bystander).await;
    broker.stop().await;
}

#[tokio::test]
async fn channels_beyond_channel_max_are_not_allowed() {
    let broker = Broker::start_with(AmqpConfig { channel_max: 4, ..AmqpConfig::default() }).await;
    let mut raw = Raw::open(broker.addr, 0).await;
    open(&mut raw, 4).await;
    raw.send(&open_channel(5)).await;
    let text = raw.expect_connection_close(530).await;
    assert!(text.contains("channel_max 4"), "{text}");
    broker.stop().await;
}

#[tokio::test]
async fn channel_error_closes_only_the_channel_and_it_can_be_reopened() {
    let broker = Broker::start().await;
    let mut raw = Raw::open(broker.addr, 0).await;
    open(&mut raw, 1).await;
    let declare = queue::Declare { queue: "missing".into(), passive: true, ..Default::default() };
    raw.send(&method(1, AMQPClass::Queue(queue::AMQPMethod::Declare(declare.clone())))).await;
    let AMQPClass::Channel(channel::AMQPMethod::Close(close)) = raw.method().await else { panic!("channel.close") };
    assert_eq!((close.reply_code, close.class_id, close.method_id), (404, 50, 10));
    assert_eq!(close.reply_text.as_str(), "NOT_FOUND - no queue 'missing' in vhost '/'");
    // Frames on the closing channel are dropped until close-ok.
    raw.send(&method(1, AMQPClass::Queue(queue::AMQPMethod::Declare(declare)))).await;
    raw.send(&method(1, AMQPClass::Channel(channel::AMQPMethod::CloseOk(channel::CloseOk {})))).await;
    open(&mut raw, 1).await;
    // Client-initiated channel close.
    raw.send(&method(
        1,
        AMQPClass::Channel(channel::AMQPMethod::Close(channel::Close {
            reply_code: 200,
            reply_text: "bye".into(),
            class_id: 0,
            method_id: 0,
        })),
    ))
    .await;
    assert!(matches!(raw.method().await, AMQPClass::Channel(channel::AMQPMethod::CloseOk(_))));
    // Client-initiated connection close.
    raw.send(&method(
        0,
        AMQPClass::Connection(connection::AMQPMethod::Close(connection::Close {
            reply_code: 200,
            reply_text: "bye".into(),
            class_id: 0,
            method_id: 0,
        })),
    ))
    .await;
    assert!(matches!(raw.method().await, AMQPClass::Connection(connection::AMQPMethod::CloseOk(_))));
    assert!(raw.frame().await.is_none());
    broker.stop().await;
}

#[tokio::test]
async fn other_vhosts_are_not_allowed() {
    let broker = Broker::start().await;
    let uri = format!("amqp://guest:guest@{}/other", broker.addr);
    let e = within(lapin::Connection::connect(&uri, lapin::ConnectionProperties::default())).await.unwrap_err();
    assert!(matches!(e.kind(), lapin::ErrorKind::ProtocolError(a) if a.get_id() == 530), "{e}");
    broker.stop().await;
}

#[tokio::test]
async fn heartbeats_are_sent_and_a_silent_peer_is_dropped() {
    let broker = Broker::start_with(AmqpConfig { heartbeat: Duration::from_secs(1), ..AmqpConfig::default() }).await;
    let mut raw = Raw::open(broker.addr, 1).await;
    assert_eq!(raw.frame().await, Some(Frame::Heartbeat), "broker heartbeats at half the interval");
    // Stay silent: after two intervals the broker closes the socket.
    let started = std::time::Instant::now();
    while raw.frame().await.is_some() {}
    assert!(started.elapsed() < Duration::from_secs(3));
    broker.stop().await;
}

#[tokio::test]
async fn a_peer_that_never_completes_the_handshake_is_dropped() {
    let broker =
        Broker::start_with(AmqpConfig { handshake_timeout: Duration::from_millis(200), ..AmqpConfig::default() }).await;
    let mut raw = Raw::connect(broker.addr).await;
    raw.send(b"AMQ").await;
    assert!(raw.frame().await.is_none());
    broker.stop().await;
}

#[tokio::test]
async fn unknown_methods_and_deep_tables_close_the_connection() {
    let broker = Broker::start().await;
    let bystander = broker.connect().await;
    let mut raw = Raw::open(broker.addr, 0).await;
    raw.send(&[1, 0, 1, 0, 0, 0, 4, 0, 99, 0, 1, 0xCE]).await;
    raw.expect_connection_close(540).await;
    // queue.declare whose arguments nest 10 000 tables (60 KB): refused, broker alive.
    let mut table: Vec<u8> = Vec::new();
    for _ in 0..10_000 {
        let mut outer = vec![0u8, b'F'];
        outer.extend_from_slice(&(table.len() as u32).to_be_bytes());
        outer.extend_from_slice(&table);
        table = outer;
    }
    let mut payload = vec![0, 50, 0, 10, 0, 0, 1, b'q', 0];
    payload.extend_from_slice(&(table.len() as u32).to_be_bytes());
    payload.extend_from_slice(&table);
    let mut frame = vec![1u8, 0, 1];
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(&payload);
    frame.push(0xCE);
    let mut raw = Raw::open(broker.addr, 0).await;
    open(&mut raw, 1).await;
    raw.send(&frame).await;
    raw.expect_connection_close(502).await;
    bystander_works(&bystander).await;
    broker.stop().await;
}

fn publish_with_header(ch: u16, size: u64) -> Vec<u8> {
    let publish = basic::Publish { exchange: "".into(), routing_key: "q".into(), mandatory: false, immediate: false };
    let mut bytes = method(ch, AMQPClass::Basic(basic::AMQPMethod::Publish(publish)));
    let header = AMQPContentHeader { class_id: 60, body_size: size, properties: BasicProperties::default() };
    bytes.extend(encode(&AMQPFrame::Header(ch, header)));
    bytes
}

#[tokio::test]
async fn message_size_limits_hold_per_message_and_per_connection() {
    let broker = Broker::start_with(AmqpConfig { max_message_size_bytes: 10_000, ..AmqpConfig::default() }).await;
    let mut raw = Raw::open(broker.addr, 0).await;
    open(&mut raw, 1).await;
    open(&mut raw, 2).await;
    // One message announced above the limit: refused from its header, before any body.
    raw.send(&publish_with_header(1, 10_001)).await;
    let AMQPClass::Channel(channel::AMQPMethod::Close(close)) = raw.method().await else { panic!("channel.close") };
    assert_eq!(close.reply_code, 406, "{}", close.reply_text);
    // The body that follows is dropped with the closing channel.
    raw.send(&encode(&AMQPFrame::Body(1, vec![0; 5000]))).await;
    raw.send(&method(1, AMQPClass::Channel(channel::AMQPMethod::CloseOk(channel::CloseOk {})))).await;
    open(&mut raw, 1).await;
    // Two messages under the limit each, received at once: together they may not exceed it.
    raw.send(&publish_with_header(1, 8000)).await;
    raw.send(&publish_with_header(2, 8000)).await;
    raw.send(&encode(&AMQPFrame::Body(1, vec![0; 6000]))).await;
    raw.send(&encode(&AMQPFrame::Body(2, vec![0; 6000]))).await;
    let AMQPClass::Channel(channel::AMQPMethod::Close(close)) = raw.method().await else { panic!("channel.close") };
    assert_eq!(close.reply_code, 406, "{}", close.reply_text);
    assert!(close.reply_text.as_str().contains("at once"), "{}", close.reply_text);
    broker.stop().await;
}
