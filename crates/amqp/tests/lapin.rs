//! The AMQP front end driven by lapin over real sockets: handshake, queues, consumers, acks,
//! prefetch, get, recover, confirms, returns, exchanges and channel errors.

mod common;

use common::{Broker, within};
use futures_util::StreamExt;
use lapin::message::Delivery;
use lapin::options::*;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Consumer, ErrorKind, ExchangeKind};

fn s(v: &str) -> ShortString {
    v.into()
}

async fn declare(ch: &Channel, name: &str) -> String {
    within(ch.queue_declare(s(name), QueueDeclareOptions::default(), FieldTable::default()))
        .await
        .unwrap()
        .name()
        .to_string()
}

async fn publish(ch: &Channel, exchange: &str, key: &str, body: &[u8]) {
    within(ch.basic_publish(s(exchange), s(key), BasicPublishOptions::default(), body, BasicProperties::default()))
        .await
        .unwrap();
}

async fn consume(ch: &Channel, queue: &str, no_ack: bool) -> Consumer {
    let options = BasicConsumeOptions { no_ack, ..Default::default() };
    within(ch.basic_consume(s(queue), s(""), options, FieldTable::default())).await.unwrap()
}

async fn next(consumer: &mut Consumer) -> Delivery {
    within(consumer.next()).await.expect("consumer ended").expect("delivery error")
}

/// Asserts nothing arrives for a short moment (used only to check absence).
async fn nothing(consumer: &mut Consumer) {
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(150), consumer.next()).await.is_err(),
        "unexpected delivery"
    );
}

fn protocol_code(e: &lapin::Error) -> u16 {
    match e.kind() {
        ErrorKind::ProtocolError(amqp) => amqp.get_id(),
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

#[tokio::test]
async fn handshake_channels_and_close_both_ways() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let a = within(conn.create_channel()).await.unwrap();
    let b = within(conn.create_channel()).await.unwrap();
    assert_ne!(a.id(), b.id());
    within(a.close(200, s("bye"))).await.unwrap();
    // The other channel still works.
    declare(&b, "q").await;
    within(conn.close(200, s("bye"))).await.unwrap();
    // Broker-initiated close: shutdown says goodbye with connection.close.
    let conn = broker.connect().await;
    broker.stop().await;
    within(async {
        while conn.status().connected() {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

#[tokio::test]
async fn default_exchange_publish_and_consume_with_tags_from_one() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "work").await;
    let mut consumer = consume(&ch, "work", false).await;
    assert!(consumer.tag().as_str().starts_with("amq.ctag-"), "server-generated consumer tag");
    for i in 0..3u8 {
        publish(&ch, "", "work", &[i]).await;
    }
    for i in 0..3u8 {
        let d = next(&mut consumer).await;
        assert_eq!((d.data.as_slice(), d.delivery_tag, d.redelivered), (&[i][..], u64::from(i) + 1, false));
        assert_eq!((d.exchange.as_str(), d.routing_key.as_str()), ("", "work"));
        within(d.acker.ack(BasicAckOptions::default())).await.unwrap();
    }
    let q = within(ch.queue_declare(
        s("work"),
        QueueDeclareOptions { passive: true, ..Default::default() },
        FieldTable::default(),
    ))
    .await
    .unwrap();
    assert_eq!((q.message_count(), q.consumer_count()), (0, 1));
    broker.stop().await;
}

#[tokio::test]
async fn server_named_exclusive_queue_dies_with_its_connection() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    let options = QueueDeclareOptions { exclusive: true, ..Default::default() };
    let q = within(ch.queue_declare(s(""), options, FieldTable::default())).await.unwrap();
    let name = q.name().to_string();
    assert!(name.starts_with("amq.gen-") && name.len() == 30, "{name}");
    // Another connection may not use it.
    let other = broker.connect().await;
    let och = within(other.create_channel()).await.unwrap();
    let e = within(och.basic_consume(s(&name), s(""), BasicConsumeOptions::default(), FieldTable::default()))
        .await
        .unwrap_err();
    assert_eq!(protocol_code(&e), 405);
    within(conn.close(200, s("bye"))).await.unwrap();
    within(async {
        while broker.router.queue(&name).is_some() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    broker.stop().await;
}

#[tokio::test]
async fn confirms_ack_and_nack_when_a_queue_is_full_and_mandatory_returns() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    let mut args = FieldTable::default();
    args.insert(s("x-max-length"), AMQPValue::LongInt(1));
    within(ch.queue_declare(s("small"), QueueDeclareOptions::default(), args)).await.unwrap();
    within(ch.confirm_select(ConfirmSelectOptions::default())).await.unwrap();
    let first =
        within(ch.basic_publish(s(""), s("small"), BasicPublishOptions::default(), b"1", BasicProperties::default()))
            .await
            .unwrap();
    assert!(within(first).await.unwrap().is_ack());
    let second =
        within(ch.basic_publish(s(""), s("small"), BasicPublishOptions::default(), b"2", BasicProperties::default()))
            .await
            .unwrap();
    assert!(within(second).await.unwrap().is_nack(), "a full queue refuses: nack");
    let mandatory = BasicPublishOptions { mandatory: true, ..Default::default() };
    let props = BasicProperties::default().with_message_id(s("lost"));
    let confirm = within(ch.basic_publish(s(""), s("nowhere"), mandatory, b"x", props.clone())).await.unwrap();
    let confirm = within(confirm).await.unwrap();
    assert!(confirm.is_ack());
    let returned = confirm.take_message().expect("returned message");
    assert_eq!((returned.reply_code, returned.reply_text.as_str()), (312, "NO_ROUTE"));
    assert_eq!((returned.delivery.routing_key.as_str(), returned.delivery.data.as_slice()), ("nowhere", &b"x"[..]));
    assert_eq!(returned.delivery.properties.message_id(), props.message_id());
    broker.stop().await;
}

#[tokio::test]
async fn a_publisher_ahead_of_the_consumer_is_held_back_instead_of_refused() {
    let broker = Broker::start().await;
    let consumer_conn = broker.connect().await;
    let ch = within(consumer_conn.create_channel()).await.unwrap();
    let mut args = FieldTable::default();
    args.insert(s("x-max-length"), AMQPValue::LongInt(20));
    within(ch.queue_declare(s("paced"), QueueDeclareOptions::default(), args)).await.unwrap();
    within(ch.basic_qos(5, BasicQosOptions::default())).await.unwrap();
    let mut consumer = consume(&ch, "paced", false).await;
    // Without confirms, a refused message would be lost without a word to the publisher. 200
    // publishes into a queue of 20 whose consumer acknowledges nothing until they are all
    // written: the publisher's connection must stop being read at 10 waiting (what it still
    // sends waits in the socket), not have 175 refused.
    let publisher_conn = broker.connect().await;
    let publisher = within(publisher_conn.create_channel()).await.unwrap();
    let persistent = BasicProperties::default().with_delivery_mode(2);
    for i in 0..200u8 {
        let body = [i];
        let publish =
            publisher.basic_publish(s(""), s("paced"), BasicPublishOptions::default(), &body, persistent.clone());
        within(publish).await.unwrap();
    }
    for i in 0..200u8 {
        let delivery = next(&mut consumer).await;
        assert_eq!(delivery.data, [i], "every message, in order");
        within(delivery.ack(BasicAckOptions::default())).await.unwrap();
    }
    nothing(&mut consumer).await;
    broker.stop().await;
}

#[tokio::test]
async fn prefetch_limits_unacked_deliveries_per_consumer() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "pf").await;
    within(ch.basic_qos(2, BasicQosOptions::default())).await.unwrap();
    for i in 0..5u8 {
        publish(&ch, "", "pf", &[i]).await;
    }
    let mut consumer = consume(&ch, "pf", false).await;
    let first = next(&mut consumer).await;
    let _second = next(&mut consumer).await;
    nothing(&mut consumer).await;
    within(first.acker.ack(BasicAckOptions::default())).await.unwrap();
    assert_eq!(next(&mut consumer).await.data, [2]);
    nothing(&mut consumer).await;
    broker.stop().await;
}

#[tokio::test]
async fn global_prefetch_limits_the_whole_channel() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "g1").await;
    declare(&ch, "g2").await;
    within(ch.basic_qos(1, BasicQosOptions { global: true })).await.unwrap();
    publish(&ch, "", "g1", b"a").await;
    publish(&ch, "", "g2", b"b").await;
    let mut c1 = consume(&ch, "g1", false).await;
    let mut c2 = consume(&ch, "g2", false).await;
    let got = within(futures_util::future::select(c1.next(), c2.next())).await;
    let delivery = match got {
        futures_util::future::Either::Left((d, _)) | futures_util::future::Either::Right((d, _)) => d.unwrap().unwrap(),
    };
    let (mut held, other) = if delivery.data == b"a" { (c2, b"b") } else { (c1, b"a") };
    nothing(&mut held).await;
    within(delivery.acker.ack(BasicAckOptions::default())).await.unwrap();
    assert_eq!(next(&mut held).await.data, other);
    broker.stop().await;
}

#[tokio::test]
async fn nack_requeue_redelivers_and_reject_discards() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "n").await;
    within(ch.basic_qos(1, BasicQosOptions::default())).await.unwrap();
    publish(&ch, "", "n", b"again").await;
    publish(&ch, "", "n", b"drop").await;
    let mut consumer = consume(&ch, "n", false).await;
    let d = next(&mut consumer).await;
    within(d.acker.nack(BasicNackOptions { requeue: true, ..Default::default() })).await.unwrap();
    let d2 = next(&mut consumer).await;
    assert_eq!((d2.data.as_slice(), d2.redelivered), (&b"again"[..], true));
    within(d2.acker.ack(BasicAckOptions::default())).await.unwrap();
    let d3 = next(&mut consumer).await;
    assert_eq!(d3.data, b"drop");
    within(d3.acker.reject(BasicRejectOptions { requeue: false })).await.unwrap();
    nothing(&mut consumer).await;
    broker.stop().await;
}

#[tokio::test]
async fn multiple_ack_and_channel_close_requeues_the_rest_in_order() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "m").await;
    for i in 0..5u8 {
        publish(&ch, "", "m", &[i]).await;
    }
    let mut consumer = consume(&ch, "m", false).await;
    let mut last = None;
    for _ in 0..5 {
        last = Some(next(&mut consumer).await);
    }
    // Ack 1..=3 with one multiple ack on tag 3 (raw, since lapin acks via the delivery).
    within(ch.basic_ack(3, BasicAckOptions { multiple: true })).await.unwrap();
    drop(last);
    within(ch.close(200, s("bye"))).await.unwrap();
    let ch2 = within(conn.create_channel()).await.unwrap();
    let mut again = consume(&ch2, "m", true).await;
    let (a, b) = (next(&mut again).await, next(&mut again).await);
    assert_eq!((a.data, a.redelivered, b.data, b.redelivered), (vec![3], true, vec![4], true));
    nothing(&mut again).await;
    broker.stop().await;
}

#[tokio::test]
async fn get_get_empty_and_recover() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "pull").await;
    assert!(within(ch.basic_get(s("pull"), BasicGetOptions::default())).await.unwrap().is_none());
    publish(&ch, "", "pull", b"one").await;
    publish(&ch, "", "pull", b"two").await;
    let got = within(ch.basic_get(s("pull"), BasicGetOptions::default())).await.unwrap().expect("get-ok");
    assert_eq!((got.delivery.data.as_slice(), got.message_count, got.delivery.delivery_tag), (&b"one"[..], 1, 1));
    // recover(requeue) puts the unacknowledged get back, marked redelivered.
    within(ch.basic_recover(BasicRecoverOptions { requeue: true })).await.unwrap();
    let again = within(ch.basic_get(s("pull"), BasicGetOptions { no_ack: true })).await.unwrap().expect("get-ok");
    assert_eq!((again.delivery.data.as_slice(), again.delivery.redelivered), (&b"one"[..], true));
    broker.stop().await;
}

#[tokio::test]
async fn cancel_stops_deliveries_and_queue_delete_cancels_consumers() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "c").await;
    let mut consumer = consume(&ch, "c", true).await;
    within(ch.basic_cancel(consumer.tag(), BasicCancelOptions::default())).await.unwrap();
    assert!(within(consumer.next()).await.is_none(), "cancelled consumer stream ends");
    publish(&ch, "", "c", b"stays").await;
    let q = within(ch.queue_declare(
        s("c"),
        QueueDeclareOptions { passive: true, ..Default::default() },
        FieldTable::default(),
    ))
    .await
    .unwrap();
    assert_eq!(q.message_count(), 1);

    // Deleting the queue from another connection sends basic.cancel to its consumer.
    let mut consumer = consume(&ch, "c", false).await;
    let _held = next(&mut consumer).await;
    let other = broker.connect().await;
    let och = within(other.create_channel()).await.unwrap();
    let e = within(och.queue_delete(s("c"), QueueDeleteOptions { if_unused: true, ..Default::default() }))
        .await
        .unwrap_err();
    assert_eq!(protocol_code(&e), 406);
    let och = within(other.create_channel()).await.unwrap();
    within(och.queue_delete(s("c"), QueueDeleteOptions::default())).await.unwrap();
    assert!(within(consumer.next()).await.is_none(), "consumer cancelled by the broker");
    assert!(broker.router.queue("c").is_none());
    // The channel is still usable.
    declare(&ch, "c2").await;
    broker.stop().await;
}

#[tokio::test]
async fn purge_and_delete_if_empty() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "p").await;
    publish(&ch, "", "p", b"1").await;
    publish(&ch, "", "p", b"2").await;
    let e =
        within(ch.queue_delete(s("p"), QueueDeleteOptions { if_empty: true, ..Default::default() })).await.unwrap_err();
    assert_eq!(protocol_code(&e), 406);
    let ch = within(conn.create_channel()).await.unwrap();
    assert_eq!(within(ch.queue_purge(s("p"), QueuePurgeOptions::default())).await.unwrap(), 2);
    within(ch.queue_delete(s("p"), QueueDeleteOptions { if_empty: true, ..Default::default() })).await.unwrap();
    assert!(broker.router.queue("p").is_none());
    broker.stop().await;
}

#[tokio::test]
async fn properties_survive_the_core() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "props").await;
    let mut headers = FieldTable::default();
    headers.insert(s("site"), AMQPValue::LongString("north".into()));
    let props = BasicProperties::default()
        .with_content_type(s("application/json"))
        .with_headers(headers.clone())
        .with_correlation_id(s("c-7"))
        .with_reply_to(s("replies"))
        .with_expiration(s("60000"))
        .with_message_id(s("m-1"))
        .with_timestamp(1_700_000_000)
        .with_delivery_mode(2)
        .with_app_id(s("sensor-app"));
    within(ch.basic_publish(s(""), s("props"), BasicPublishOptions::default(), b"{}", props.clone())).await.unwrap();
    let mut consumer = consume(&ch, "props", true).await;
    let got = next(&mut consumer).await.properties;
    assert_eq!(got.content_type(), props.content_type());
    assert_eq!(got.headers(), &Some(headers));
    assert_eq!(got.correlation_id(), props.correlation_id());
    assert_eq!(got.reply_to(), props.reply_to());
    assert_eq!(got.message_id(), props.message_id());
    assert_eq!(got.timestamp(), props.timestamp());
    assert_eq!(got.delivery_mode(), &Some(2));
    assert_eq!(got.app_id(), props.app_id());
    let left: u64 = got.expiration().as_ref().unwrap().as_str().parse().unwrap();
    assert!((55_000..=60_000).contains(&left), "{left}");
    broker.stop().await;
}

#[tokio::test]
async fn large_bodies_are_split_into_frames_and_reassembled() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "big").await;
    let body: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
    publish(&ch, "", "big", &body).await;
    let mut consumer = consume(&ch, "big", true).await;
    assert_eq!(next(&mut consumer).await.data, body);
    broker.stop().await;
}

#[tokio::test]
async fn exchanges_of_each_type_and_exchange_to_exchange_bindings() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    for q in ["d", "f1", "f2", "t", "h", "e2e"] {
        declare(&ch, q).await;
    }
    let none = FieldTable::default;
    within(ch.queue_bind(s("d"), s("amq.direct"), s("key"), QueueBindOptions::default(), none())).await.unwrap();
    within(ch.exchange_declare(s("fan"), ExchangeKind::Fanout, ExchangeDeclareOptions::default(), none()))
        .await
        .unwrap();
    within(ch.queue_bind(s("f1"), s("fan"), s(""), QueueBindOptions::default(), none())).await.unwrap();
    within(ch.queue_bind(s("f2"), s("fan"), s(""), QueueBindOptions::default(), none())).await.unwrap();
    within(ch.exchange_declare(s("top"), ExchangeKind::Topic, ExchangeDeclareOptions::default(), none()))
        .await
        .unwrap();
    within(ch.queue_bind(s("t"), s("top"), s("a.*.c.#"), QueueBindOptions::default(), none())).await.unwrap();
    let mut args = FieldTable::default();
    args.insert(s("x-match"), AMQPValue::LongString("all".into()));
    args.insert(s("kind"), AMQPValue::LongString("alarm".into()));
    within(ch.queue_bind(s("h"), s("amq.headers"), s(""), QueueBindOptions::default(), args)).await.unwrap();
    within(ch.exchange_bind(s("fan"), s("amq.direct"), s("fanout-me"), ExchangeBindOptions::default(), none()))
        .await
        .unwrap();

    publish(&ch, "amq.direct", "key", b"direct").await;
    publish(&ch, "fan", "", b"fanout").await;
    publish(&ch, "top", "a.b.c.d.e", b"topic").await;
    publish(&ch, "top", "a.b.x", b"no-topic").await;
    let mut headers = FieldTable::default();
    headers.insert(s("kind"), AMQPValue::LongString("alarm".into()));
    let props = BasicProperties::default().with_headers(headers);
    within(ch.basic_publish(s("amq.headers"), s(""), BasicPublishOptions::default(), b"headers", props)).await.unwrap();
    publish(&ch, "amq.direct", "fanout-me", b"e2e").await;

    let expect = |q: &'static str, bodies: Vec<&'static [u8]>| {
        let ch = ch.clone();
        async move {
            for body in bodies {
                let got = within(ch.basic_get(s(q), BasicGetOptions { no_ack: true })).await.unwrap().expect(q);
                assert_eq!(got.delivery.data, body, "queue {q}");
            }
            assert!(
                within(ch.basic_get(s(q), BasicGetOptions { no_ack: true })).await.unwrap().is_none(),
                "queue {q} drained"
            );
        }
    };
    expect("d", vec![b"direct"]).await;
    expect("f1", vec![b"fanout", b"e2e"]).await;
    expect("f2", vec![b"fanout", b"e2e"]).await;
    expect("t", vec![b"topic"]).await;
    expect("h", vec![b"headers"]).await;
    let got = within(ch.basic_get(s("d"), BasicGetOptions { no_ack: true })).await.unwrap();
    assert!(got.is_none());

    // Delivered with the exchange and routing key they were published with.
    publish(&ch, "amq.direct", "key", b"addr").await;
    let got = within(ch.basic_get(s("d"), BasicGetOptions { no_ack: true })).await.unwrap().unwrap();
    assert_eq!((got.delivery.exchange.as_str(), got.delivery.routing_key.as_str()), ("amq.direct", "key"));
    broker.stop().await;
}

#[tokio::test]
async fn soft_errors_close_only_the_channel_with_a_readable_reason() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    let e = within(ch.queue_declare(
        s("missing"),
        QueueDeclareOptions { passive: true, ..Default::default() },
        FieldTable::default(),
    ))
    .await
    .unwrap_err();
    match e.kind() {
        ErrorKind::ProtocolError(amqp) => {
            assert_eq!(amqp.get_id(), 404);
            assert_eq!(amqp.get_message().as_str(), "NOT_FOUND - no queue 'missing' in vhost '/'");
        }
        other => panic!("{other:?}"),
    }
    let ch = within(conn.create_channel()).await.unwrap();
    let e = within(ch.exchange_declare(
        s("amq.direct"),
        ExchangeKind::Fanout,
        ExchangeDeclareOptions { durable: true, ..Default::default() },
        FieldTable::default(),
    ))
    .await
    .unwrap_err();
    assert_eq!(protocol_code(&e), 406);
    let ch = within(conn.create_channel()).await.unwrap();
    // The publish itself is asynchronous; the channel error shows on the next synchronous call.
    let _ = within(ch.basic_publish(
        s("no-such-exchange"),
        s("k"),
        BasicPublishOptions::default(),
        b"x",
        BasicProperties::default(),
    ))
    .await;
    let e =
        within(ch.queue_declare(s("after"), QueueDeclareOptions::default(), FieldTable::default())).await.unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::ProtocolError(a) if a.get_id() == 404)
            || matches!(e.kind(), ErrorKind::InvalidChannelState(..)),
        "{e}"
    );
    let ch = within(conn.create_channel()).await.unwrap();
    let e = within(ch.basic_ack(99, BasicAckOptions::default()))
        .await
        .and(within(ch.queue_declare(s("x"), QueueDeclareOptions::default(), FieldTable::default())).await.map(|_| ()));
    assert!(e.is_err(), "unknown delivery tag closes the channel");
    let ch = within(conn.create_channel()).await.unwrap();
    let e = within(ch.queue_bind(
        s("nope"),
        s("amq.topic"),
        s("a.#.b"),
        QueueBindOptions::default(),
        FieldTable::default(),
    ))
    .await
    .unwrap_err();
    assert_eq!(protocol_code(&e), 404);
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "bindme").await;
    let e = within(ch.queue_bind(
        s("bindme"),
        s("amq.topic"),
        s("a.#.b"),
        QueueBindOptions::default(),
        FieldTable::default(),
    ))
    .await
    .unwrap_err();
    assert_eq!(protocol_code(&e), 406);
    // After all that, the connection is healthy.
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "fine").await;
    assert!(conn.status().connected());
    broker.stop().await;
}

#[tokio::test]
async fn unimplemented_features_are_refused_with_540() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    let e = within(ch.tx_select()).await.unwrap_err();
    assert_eq!(protocol_code(&e), 540);
    assert!(!conn.status().connected());
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    let mut args = FieldTable::default();
    args.insert(s("x-message-ttl"), AMQPValue::LongInt(1000));
    let e = within(ch.queue_declare(s("ttl"), QueueDeclareOptions::default(), args)).await.unwrap_err();
    assert_eq!(protocol_code(&e), 540);
    broker.stop().await;
}

#[tokio::test]
async fn exclusive_consumer_excludes_others() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "solo").await;
    let options = BasicConsumeOptions { exclusive: true, ..Default::default() };
    let _c = within(ch.basic_consume(s("solo"), s("only"), options, FieldTable::default())).await.unwrap();
    let ch2 = within(conn.create_channel()).await.unwrap();
    let e = within(ch2.basic_consume(s("solo"), s(""), BasicConsumeOptions::default(), FieldTable::default()))
        .await
        .unwrap_err();
    assert_eq!(protocol_code(&e), 403);
    broker.stop().await;
}

#[tokio::test]
async fn nack_multiple_and_recover_redeliver_in_order() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "order").await;
    for i in 0..3u8 {
        publish(&ch, "", "order", &[i]).await;
    }
    let mut consumer = consume(&ch, "order", false).await;
    for _ in 0..3 {
        next(&mut consumer).await;
    }
    within(ch.basic_nack(3, BasicNackOptions { multiple: true, requeue: true })).await.unwrap();
    let again: Vec<(Vec<u8>, bool)> = [next(&mut consumer).await, next(&mut consumer).await, next(&mut consumer).await]
        .into_iter()
        .map(|d| (d.data, d.redelivered))
        .collect();
    assert_eq!(again, [(vec![0], true), (vec![1], true), (vec![2], true)]);
    within(ch.basic_recover(BasicRecoverOptions { requeue: true })).await.unwrap();
    let tags: Vec<u8> = [next(&mut consumer).await, next(&mut consumer).await, next(&mut consumer).await]
        .into_iter()
        .map(|d| d.data[0])
        .collect();
    assert_eq!(tags, [0, 1, 2]);
    broker.stop().await;
}

#[tokio::test]
async fn deliveries_stay_acknowledgeable_after_cancel_and_are_not_redelivered() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "keep").await;
    within(ch.basic_qos(2, BasicQosOptions::default())).await.unwrap();
    for i in 0..4u8 {
        publish(&ch, "", "keep", &[i]).await;
    }
    let mut consumer = consume(&ch, "keep", false).await;
    let (a, b) = (next(&mut consumer).await, next(&mut consumer).await);
    within(ch.basic_cancel(consumer.tag(), BasicCancelOptions::default())).await.unwrap();
    // A second consumer gets only what the first never received.
    let ch2 = within(conn.create_channel()).await.unwrap();
    let mut second = consume(&ch2, "keep", false).await;
    let (c, d) = (next(&mut second).await, next(&mut second).await);
    assert_eq!((c.data[0], c.redelivered, d.data[0]), (2, false, 3));
    within(a.acker.ack(BasicAckOptions::default())).await.unwrap();
    within(b.acker.ack(BasicAckOptions::default())).await.unwrap();
    nothing(&mut second).await;
    // The acks were real: the channel is fine and the queue holds nothing more.
    let q = within(ch.queue_declare(
        s("keep"),
        QueueDeclareOptions { passive: true, ..Default::default() },
        FieldTable::default(),
    ))
    .await
    .unwrap();
    assert_eq!(q.message_count(), 0);
    broker.stop().await;
}

#[tokio::test]
async fn channel_flow_pauses_and_resumes_deliveries() {
    let broker = Broker::start().await;
    let conn = broker.connect().await;
    let ch = within(conn.create_channel()).await.unwrap();
    declare(&ch, "flow").await;
    let mut consumer = consume(&ch, "flow", true).await;
    assert!(!within(ch.channel_flow(ChannelFlowOptions { active: false })).await.unwrap());
    publish(&ch, "", "flow", b"held").await;
    nothing(&mut consumer).await;
    assert!(within(ch.channel_flow(ChannelFlowOptions { active: true })).await.unwrap());
    assert_eq!(next(&mut consumer).await.data, b"held");
    broker.stop().await;
}
