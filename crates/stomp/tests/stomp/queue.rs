//! /queue/ destinations: point to point, competing consumers, ack modes, NACK and redelivery.

use std::collections::BTreeSet;

use stomp_codec::Command;
use tolk_core::RouterConfig;

use crate::client::{Broker, config, frame, text};

#[tokio::test]
async fn queue_messages_go_to_one_of_the_competing_consumers() {
    let broker = Broker::start().await;
    let mut a = broker.client().await;
    let mut b = broker.client().await;
    a.subscribe("/queue/jobs", "a", "auto").await;
    b.subscribe("/queue/jobs", "b", "auto").await;
    let mut publisher = broker.client().await;
    for n in 0..4 {
        publisher.publish("/queue/jobs", &format!("job {n}")).await;
    }
    // Consumers take turns: two each.
    let mut seen = BTreeSet::new();
    for client in [&mut a, &mut b] {
        for _ in 0..2 {
            let m = client.recv_message().await;
            assert_eq!(m.header("destination"), Some("/queue/jobs"));
            assert_eq!(m.header("persistent"), Some("true"), "queue default is at-least-once");
            assert!(seen.insert(text(&m).to_owned()), "delivered twice: {m:?}");
        }
    }
    assert_eq!(seen.len(), 4);
    broker.stop().await;
}

#[tokio::test]
async fn messages_wait_in_the_queue_for_a_consumer() {
    let broker = Broker::start().await;
    let mut publisher = broker.client().await;
    publisher.publish("/queue/later", "kept").await;
    assert_eq!(broker.router.queue("later").unwrap().ready_len(), 1);
    let mut consumer = broker.client().await;
    consumer.subscribe("/queue/later", "1", "auto").await;
    assert_eq!(text(&consumer.recv_message().await), "kept");
    broker.stop().await;
}

#[tokio::test]
async fn client_individual_nack_redelivers_with_redelivered_header() {
    let broker = Broker::start().await;
    let mut consumer = broker.client().await;
    consumer.subscribe("/queue/work", "w", "client-individual").await;
    let mut publisher = broker.client().await;
    publisher.publish("/queue/work", "m1").await;
    publisher.publish("/queue/work", "m2").await;

    let m1 = consumer.recv_message().await;
    let m2 = consumer.recv_message().await;
    assert_eq!((text(&m1), text(&m2)), ("m1", "m2"));
    assert_eq!(m1.header("ack"), m1.header("message-id"), "1.2 ack id");
    assert_eq!(m1.header("redelivered"), None);

    consumer.send(&frame(Command::Nack, &[("id", m1.header("ack").unwrap())], "")).await;
    let again = consumer.recv_message().await;
    assert_eq!((text(&again), again.header("redelivered")), ("m1", Some("true")));
    assert_ne!(again.header("ack"), m1.header("ack"), "a new delivery gets a new id");

    for m in [&again, &m2] {
        assert!(consumer.with_receipt(frame(Command::Ack, &[("id", m.header("ack").unwrap())], "")).await.is_empty());
    }
    let queue = broker.router.queue("work").unwrap();
    assert_eq!((queue.ready_len(), queue.unacked_len()), (0, 0));
    consumer.disconnect().await;
    assert_eq!(queue.ready_len(), 0, "acked messages are not redelivered");
    broker.stop().await;
}

#[tokio::test]
async fn client_ack_is_cumulative_and_unacked_messages_return_at_disconnect() {
    let broker = Broker::start().await;
    let mut first = broker.client().await;
    first.subscribe("/queue/batch", "b", "client").await;
    let mut publisher = broker.client().await;
    for body in ["m1", "m2", "m3"] {
        publisher.publish("/queue/batch", body).await;
    }
    let got: Vec<_> = [first.recv_message().await, first.recv_message().await, first.recv_message().await].into();
    // ACK of m2 settles m1 as well.
    let ack = frame(Command::Ack, &[("id", got[1].header("ack").unwrap())], "");
    assert!(first.with_receipt(ack).await.is_empty());
    let queue = broker.router.queue("batch").unwrap();
    assert_eq!(queue.unacked_len(), 1);
    first.disconnect().await;

    let mut second = broker.client().await;
    second.subscribe("/queue/batch", "b", "auto").await;
    let m = second.recv_message().await;
    assert_eq!((text(&m), m.header("redelivered")), ("m3", Some("true")));
    broker.stop().await;
}

#[tokio::test]
async fn prefetch_count_bounds_unacked_messages_per_consumer() {
    let broker = Broker::start().await;
    let mut consumer = broker.client().await;
    let subscribe = frame(
        Command::Subscribe,
        &[("destination", "/queue/slow"), ("id", "1"), ("ack", "client-individual"), ("prefetch-count", "1")],
        "",
    );
    assert!(consumer.with_receipt(subscribe).await.is_empty());
    let mut publisher = broker.client().await;
    publisher.publish("/queue/slow", "m1").await;
    publisher.publish("/queue/slow", "m2").await;
    let queue = broker.router.queue("slow").unwrap();
    assert_eq!((queue.unacked_len(), queue.ready_len()), (1, 1));
    let m1 = consumer.recv_message().await;
    consumer.send(&frame(Command::Ack, &[("id", m1.header("ack").unwrap())], "")).await;
    assert_eq!(text(&consumer.recv_message().await), "m2");
    broker.stop().await;
}

#[tokio::test]
async fn nack_on_a_topic_drops_the_message() {
    let broker = Broker::start().await;
    let mut consumer = broker.client().await;
    consumer.subscribe("/topic/t", "t", "client-individual").await;
    let mut publisher = broker.client().await;
    publisher.publish("/topic/t", "first").await;
    let m = consumer.recv_message().await;
    assert!(m.header("ack").is_some());
    assert!(consumer.with_receipt(frame(Command::Nack, &[("id", m.header("ack").unwrap())], "")).await.is_empty());
    publisher.publish("/topic/t", "second").await;
    assert_eq!(text(&consumer.recv_message().await), "second", "NACKed topic message is not redelivered");
    broker.stop().await;
}

#[tokio::test]
async fn stomp_1_1_acks_by_message_id() {
    let broker = Broker::start().await;
    let (mut consumer, _) =
        crate::client::Client::connect_with(broker.addr, &[("accept-version", "1.1"), ("host", "h")]).await;
    consumer.subscribe("/queue/v11", "s", "client").await;
    let mut publisher = broker.client().await;
    publisher.publish("/queue/v11", "m").await;
    let m = consumer.recv_message().await;
    assert_eq!(m.header("ack"), None, "the ack header is 1.2 only");
    let ack = frame(Command::Ack, &[("subscription", "s"), ("message-id", m.header("message-id").unwrap())], "");
    assert!(consumer.with_receipt(ack).await.is_empty());
    assert_eq!(broker.router.queue("v11").unwrap().unacked_len(), 0);
    broker.stop().await;
}

#[tokio::test]
async fn ack_of_a_message_never_delivered_is_an_error() {
    let broker = Broker::start().await;
    let mut client = broker.client().await;
    client.send(&frame(Command::Ack, &[("id", "12345")], "")).await;
    assert!(client.expect_error().await.header("message").unwrap().contains("12345"));
    broker.stop().await;
}

#[tokio::test]
async fn send_to_a_full_queue_is_refused() {
    let router_config = RouterConfig { queue_max_length: 1, ..RouterConfig::default() };
    let broker = Broker::start_with(config(), router_config).await;
    let mut publisher = broker.client().await;
    publisher.publish("/queue/tiny", "fits").await;
    publisher.send(&frame(Command::Send, &[("destination", "/queue/tiny"), ("receipt", "r")], "overflows")).await;
    let error = publisher.expect_error().await;
    assert!(error.header("message").unwrap().contains("full"), "{error:?}");
    assert_eq!(error.header("receipt-id"), Some("r"));
    broker.stop().await;
}

#[tokio::test]
async fn nack_without_requeue_discards_the_queue_message() {
    let broker = Broker::start().await;
    let mut consumer = broker.client().await;
    consumer.subscribe("/queue/poison", "p", "client-individual").await;
    let mut publisher = broker.client().await;
    publisher.publish("/queue/poison", "bad").await;
    let m = consumer.recv_message().await;
    let nack = frame(Command::Nack, &[("id", m.header("ack").unwrap()), ("requeue", "false")], "");
    assert!(consumer.with_receipt(nack).await.is_empty());
    let queue = broker.router.queue("poison").unwrap();
    assert_eq!((queue.ready_len(), queue.unacked_len()), (0, 0));
    broker.stop().await;
}
