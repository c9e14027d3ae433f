//! BEGIN / COMMIT / ABORT for SEND and ACK.

use stomp_codec::Command;
use tolk_core::RouterConfig;
use tolk_stomp::StompConfig;

use crate::client::{Broker, config, frame, text};

#[tokio::test]
async fn sends_are_held_until_commit_and_dropped_by_abort() {
    let broker = Broker::start().await;
    let mut sub = broker.client().await;
    sub.subscribe("/topic/tx", "s", "auto").await;
    let mut client = broker.client().await;
    assert!(client.with_receipt(frame(Command::Begin, &[("transaction", "t1")], "")).await.is_empty());
    assert!(client.with_receipt(frame(Command::Begin, &[("transaction", "t2")], "")).await.is_empty());
    let held = frame(Command::Send, &[("destination", "/topic/tx"), ("transaction", "t1")], "committed");
    assert!(client.with_receipt(held).await.is_empty());
    let dropped = frame(Command::Send, &[("destination", "/topic/tx"), ("transaction", "t2")], "aborted");
    assert!(client.with_receipt(dropped).await.is_empty());
    client.publish("/topic/tx", "outside").await;
    assert_eq!(text(&sub.recv_message().await), "outside", "transactional sends wait for COMMIT");

    assert!(client.with_receipt(frame(Command::Abort, &[("transaction", "t2")], "")).await.is_empty());
    assert!(client.with_receipt(frame(Command::Commit, &[("transaction", "t1")], "")).await.is_empty());
    assert_eq!(text(&sub.recv_message().await), "committed");
    client.publish("/topic/tx", "marker").await;
    assert_eq!(text(&sub.recv_message().await), "marker", "the aborted send never arrives");
    broker.stop().await;
}

#[tokio::test]
async fn acks_take_effect_at_commit_only() {
    let broker = Broker::start().await;
    let mut consumer = broker.client().await;
    consumer.subscribe("/queue/txq", "q", "client-individual").await;
    let mut publisher = broker.client().await;
    publisher.publish("/queue/txq", "m1").await;
    publisher.publish("/queue/txq", "m2").await;
    let m1 = consumer.recv_message().await;
    let m2 = consumer.recv_message().await;
    for (tx, m) in [("keep", &m1), ("undo", &m2)] {
        assert!(consumer.with_receipt(frame(Command::Begin, &[("transaction", tx)], "")).await.is_empty());
        let ack = frame(Command::Ack, &[("id", m.header("ack").unwrap()), ("transaction", tx)], "");
        assert!(consumer.with_receipt(ack).await.is_empty());
    }
    let queue = broker.router.queue("txq").unwrap();
    assert_eq!(queue.unacked_len(), 2, "nothing settled before COMMIT");
    assert!(consumer.with_receipt(frame(Command::Commit, &[("transaction", "keep")], "")).await.is_empty());
    assert!(consumer.with_receipt(frame(Command::Abort, &[("transaction", "undo")], "")).await.is_empty());
    assert_eq!(queue.unacked_len(), 1);
    consumer.disconnect().await;

    let mut next = broker.client().await;
    next.subscribe("/queue/txq", "q", "auto").await;
    let m = next.recv_message().await;
    assert_eq!((text(&m), m.header("redelivered")), ("m2", Some("true")));
    broker.stop().await;
}

#[tokio::test]
async fn unknown_transactions_are_errors() {
    let broker = Broker::start().await;
    for f in [
        frame(Command::Send, &[("destination", "/topic/a"), ("transaction", "nope")], "x"),
        frame(Command::Commit, &[("transaction", "nope")], ""),
        frame(Command::Abort, &[("transaction", "nope")], ""),
    ] {
        let mut client = broker.client().await;
        client.send(&f).await;
        assert!(client.expect_error().await.header("message").unwrap().contains("unknown transaction 'nope'"));
    }
    let mut client = broker.client().await;
    client.send(&frame(Command::Begin, &[], "")).await;
    client.expect_error().await;
    broker.stop().await;
}

#[tokio::test]
async fn transactions_are_bounded() {
    let stomp = StompConfig { max_transaction_frames: 2, ..config() };
    let broker = Broker::start_with(stomp, RouterConfig::default()).await;
    let mut client = broker.client().await;
    client.send(&frame(Command::Begin, &[("transaction", "t")], "")).await;
    for _ in 0..3 {
        client.send(&frame(Command::Send, &[("destination", "/topic/a"), ("transaction", "t")], "x")).await;
    }
    assert!(client.expect_error().await.header("message").unwrap().contains("at most 2 frames"));
    broker.stop().await;
}
