//! A client subscribed with `client-individual` acks to the topic it sends to is its own slow
//! subscriber: its SENDs are held back while its subscription is full, and its ACKs, which are
//! what frees it, must still be read.

use std::time::Duration;

use stomp_codec::Command;
use tolk_core::{CloseReason, DropReason, Protocol, RouterConfig};
use tolk_stomp::StompConfig;

use crate::client::{Broker, config, frame};

#[tokio::test]
async fn a_client_sending_to_its_own_subscription_with_client_acks_is_not_deadlocked() {
    let stomp = StompConfig { max_unacked_messages: 4, ..config() };
    let router =
        RouterConfig { outbox_capacity: 4, slow_consumer_grace: Duration::from_secs(2), ..RouterConfig::default() };
    let broker = Broker::start_with(stomp, router).await;
    let mut client = broker.client().await;
    client.subscribe("/topic/echo", "s", "client-individual").await;

    // Ten SENDs ahead of their deliveries each round: more than the subscription can take
    // unacknowledged, so the connection congests itself every round.
    let mut received = Vec::new();
    for round in 0..20u32 {
        for n in 0..10 {
            let body = (round * 10 + n).to_string();
            client.send(&frame(Command::Send, &[("destination", "/topic/echo"), ("persistent", "true")], body)).await;
        }
        for _ in 0..10 {
            let message = client.recv_message().await;
            let ack = message.header("ack").expect("client-individual deliveries carry ack").to_owned();
            received.push(std::str::from_utf8(&message.body).unwrap().parse::<u32>().unwrap());
            client.send(&frame(Command::Ack, &[("id", ack.as_str())], "")).await;
        }
    }
    assert_eq!(received, (0..200).collect::<Vec<_>>(), "every message, once, in order");
    let closed = broker.router.metrics().protocol(Protocol::Stomp).closed_count(CloseReason::SlowConsumer);
    assert_eq!(closed, 0, "not dropped as a slow consumer");
    broker.stop().await;
}

/// A `client`-ack subscriber that never acknowledges is not lost from silently: the publisher
/// of at-least-once messages is held back while the subscriber is full, and when the grace runs
/// out the subscriber is told (ERROR) and closed. Every message receipted to the publisher
/// either reached the subscriber or was counted as dropped.
#[tokio::test]
async fn a_subscriber_that_never_acks_is_told_and_closed_not_lost_from_silently() {
    let stomp = StompConfig { max_unacked_messages: 8, ..config() };
    let router =
        RouterConfig { outbox_capacity: 8, slow_consumer_grace: Duration::from_millis(500), ..RouterConfig::default() };
    let broker = Broker::start_with(stomp, router).await;
    let mut subscriber = broker.client().await;
    subscriber.subscribe("/topic/slow", "s", "client").await;
    let mut publisher = broker.client().await;
    let mut receipted = 0u64;
    for n in 0..200 {
        let send = frame(Command::Send, &[("destination", "/topic/slow"), ("persistent", "true")], n.to_string());
        assert!(publisher.with_receipt(send).await.is_empty());
        receipted += 1;
    }
    let mut received = 0u64;
    let error = loop {
        let got = subscriber.recv().await;
        match got.command {
            Command::Message => received += 1,
            Command::Error => break got,
            other => panic!("unexpected {other:?}"),
        }
    };
    let said = format!("{:?} {}", error.header("message"), String::from_utf8_lossy(&error.body));
    assert!(said.contains("slow consumer"), "{said}");
    subscriber.expect_closed().await;
    drop(publisher);
    let router = broker.router.clone();
    broker.stop().await;
    // Everything the subscriber did not get while it was subscribed is counted; what was sent
    // after it was closed matched nobody.
    let counters = router.metrics().protocol(Protocol::Stomp);
    let dropped: u64 =
        [DropReason::OutboxFull, DropReason::SessionEnded].iter().map(|&r| counters.dropped_count(r)).sum();
    assert!(dropped > 0 && received + dropped <= receipted, "received {received}, dropped {dropped}");
    assert_eq!(counters.closed_count(CloseReason::SlowConsumer), 1);
}
