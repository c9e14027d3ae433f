//! Header ↔ property translation and the trip through the core to and from other protocols
//! (a core session with an MQTT origin stands in for the MQTT front end).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use stomp_codec::Command;
use tokio::time::timeout;
use tolk_core::{Delivery, Destination, Message, Origin, Protocol, QoS, Session, SubscriptionOptions};

use crate::client::{Broker, WAIT, frame, text};

const BINARY: &[u8] = b"\x00\x01bin\x00ary\xff\x00";

async fn next_delivery(session: &Session) -> Delivery {
    let mut got = Vec::new();
    timeout(WAIT, session.receiver().drain(&mut got, 1)).await.expect("delivery").expect("no overflow");
    got.pop().unwrap()
}

#[tokio::test]
async fn mqtt_publish_reaches_a_stomp_wildcard_subscriber() {
    let broker = Broker::start().await;
    let mut sub = broker.client().await;
    sub.subscribe("/topic/a/+", "s", "auto").await;

    let mqtt = broker.router.open_session(Protocol::Mqtt);
    let origin = Origin { protocol: Protocol::Mqtt, session: mqtt.id(), client_id: "sensor".into() };
    let mut message = Message::new("a/b", Bytes::from_static(BINARY), origin);
    message.qos = QoS::AtLeastOnce;
    message.props.content_type = Some("application/octet-stream".into());
    message.props.correlation_data = Some(Bytes::from_static(b"req-7"));
    message.props.reply_to = Some(Destination::Topic("a/replies".into()));
    message.props.user = vec![
        ("unit".into(), "°C".into()),
        ("destination".into(), "/topic/spoof".into()),
        ("multi".into(), "x\ny".into()),
    ];
    assert_eq!(mqtt.publish(Arc::new(message)).delivered, 1);

    let m = sub.recv_message().await;
    assert_eq!(m.header("destination"), Some("/topic/a/b"));
    assert_eq!(m.headers.get_all("destination").count(), 1, "user properties cannot override reserved headers");
    assert_eq!(&m.body[..], BINARY);
    assert_eq!(m.header("content-length"), Some(BINARY.len().to_string().as_str()));
    assert_eq!(m.header("content-type"), Some("application/octet-stream"));
    assert_eq!(m.header("correlation-id"), Some("req-7"));
    assert_eq!(m.header("reply-to"), Some("/topic/a/replies"));
    assert_eq!(m.header("unit"), Some("°C"));
    assert_eq!(m.header("multi"), Some("x\ny"), "escaped on the wire, intact after decoding");
    // The subscription is auto-ack (at most once), the message keeps its own guarantee.
    assert_eq!(m.header("persistent"), Some("true"));
    broker.stop().await;
}

#[tokio::test]
async fn stomp_send_reaches_a_core_subscriber_with_its_properties() {
    let broker = Broker::start().await;
    let core = broker.router.open_session(Protocol::Mqtt);
    core.subscribe("x/#", 1, SubscriptionOptions::default()).unwrap();

    let expires_ms = (SystemTime::now() + Duration::from_secs(60)).duration_since(UNIX_EPOCH).unwrap().as_millis();
    let expires = expires_ms.to_string();
    let mut client = broker.client().await;
    let send = frame(
        Command::Send,
        &[
            ("destination", "/topic/x/y"),
            ("content-type", "application/cbor"),
            ("persistent", "true"),
            ("correlation-id", "c-1"),
            ("reply-to", "/queue/answers"),
            ("expires", &expires),
            ("app-header", "v1"),
            ("app-header", "ignored repeat"),
            ("colon", "a:b"),
        ],
        Bytes::from_static(BINARY),
    );
    assert!(client.with_receipt(send).await.is_empty());

    let d = next_delivery(&core).await;
    let m = &d.message;
    assert_eq!(m.topic, "x/y");
    assert_eq!(&m.payload[..], BINARY);
    assert_eq!(m.props.content_type.as_deref(), Some("application/cbor"));
    assert_eq!(m.qos, QoS::AtLeastOnce);
    assert_eq!(m.props.correlation_data.as_deref(), Some(&b"c-1"[..]));
    assert_eq!(m.props.reply_to, Some(Destination::Queue("answers".into())));
    let left = m.props.expires_at.expect("expiry") - Instant::now();
    assert!(left > Duration::from_secs(55) && left <= Duration::from_secs(60), "{left:?}");
    assert_eq!(m.props.user, vec![("app-header".into(), "v1".into()), ("colon".into(), "a:b".into())]);
    assert_eq!(m.origin.protocol, Protocol::Stomp);
    broker.stop().await;
}

#[tokio::test]
async fn stomp_send_to_a_queue_reaches_a_core_queue_consumer() {
    let broker = Broker::start().await;
    let mut client = broker.client().await;
    client.publish("/queue/shared", "for amqp").await;
    let mut core = broker.router.open_session(Protocol::Amqp);
    let queue = broker.router.queue("shared").expect("declared by the SEND");
    core.consume(&queue, 8, QoS::AtLeastOnce, 3).unwrap();
    let d = next_delivery(&core).await;
    assert_eq!((&*d.message.topic, &d.message.payload[..]), ("shared", &b"for amqp"[..]));
    assert_eq!(d.message.qos, QoS::AtLeastOnce);
    d.ack.unwrap().ack();
    broker.stop().await;
}

#[tokio::test]
async fn utf8_and_binary_bodies_and_escaped_headers_round_trip_between_stomp_clients() {
    let broker = Broker::start().await;
    let mut sub = broker.client().await;
    sub.subscribe("/topic/ütf/8", "u", "auto").await;
    let mut publisher = broker.client().await;
    let body = "Grüße, 世界 🌍";
    let send = frame(
        Command::Send,
        &[("destination", "/topic/ütf/8"), ("content-type", "text/plain;charset=utf-8"), ("note", "a:b\nc\\d\re")],
        body.to_owned(),
    );
    assert!(publisher.with_receipt(send).await.is_empty());
    let m = sub.recv_message().await;
    assert_eq!(text(&m), body);
    assert_eq!(m.header("destination"), Some("/topic/ütf/8"));
    assert_eq!(m.header("note"), Some("a:b\nc\\d\re"));

    let send = frame(Command::Send, &[("destination", "/topic/ütf/8")], Bytes::from_static(BINARY));
    assert!(publisher.with_receipt(send).await.is_empty());
    assert_eq!(&sub.recv_message().await.body[..], BINARY);
    broker.stop().await;
}

#[tokio::test]
async fn expired_messages_are_not_delivered() {
    let broker = Broker::start().await;
    let mut client = broker.client().await;
    client.subscribe("/topic/exp", "e", "auto").await;
    let past = frame(Command::Send, &[("destination", "/topic/exp"), ("expires", "1000")], "stale");
    assert!(client.with_receipt(past).await.is_empty());
    client.publish("/topic/exp", "fresh").await;
    assert_eq!(text(&client.recv_message().await), "fresh");
    broker.stop().await;
}
