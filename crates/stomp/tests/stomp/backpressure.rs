//! A client subscribed with `client-individual` acks to the topic it sends to is its own slow
//! subscriber: its SENDs are held back while its subscription is full, and its ACKs, which are
//! what frees it, must still be read.

use std::time::Duration;

use stomp_codec::Command;
use tolk_core::{CloseReason, Protocol, RouterConfig};
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
