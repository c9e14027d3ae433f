//! Connecting, publish/subscribe on /topic/, receipts, unsubscribe and protocol errors.

use stomp_codec::{Command, Decoded};

use crate::client::{Broker, Client, frame, text};

#[tokio::test]
async fn connect_negotiates_the_highest_common_version() {
    let broker = Broker::start().await;
    let (client, connected) =
        Client::connect_with(broker.addr, &[("accept-version", "1.0,1.1,1.2"), ("host", "h"), ("heart-beat", "0,0")])
            .await;
    assert_eq!(connected.command, Command::Connected);
    assert_eq!(connected.header("version"), Some("1.2"));
    assert!(connected.header("server").unwrap().starts_with("tolk/"));
    assert_eq!(connected.header("heart-beat"), Some("0,0"));
    assert!(connected.header("session").is_some());
    client.disconnect().await;

    // The STOMP command is CONNECT's 1.2 alias.
    let mut client = Client::open(broker.addr).await;
    client.send(&frame(Command::Stomp, &[("accept-version", "1.1"), ("host", "h")], "")).await;
    let connected = client.recv().await;
    assert_eq!((connected.command, connected.header("version")), (Command::Connected, Some("1.1")));
    broker.stop().await;
}

#[tokio::test]
async fn unsupported_version_gets_error_listing_ours_then_close() {
    let broker = Broker::start().await;
    let (mut client, answer) = Client::connect_with(broker.addr, &[("accept-version", "2.0,3.1"), ("host", "h")]).await;
    assert_eq!(answer.command, Command::Error);
    assert_eq!(answer.header("version"), Some("1.0,1.1,1.2"));
    assert!(text(&answer).contains("1.0 1.1 1.2"));
    client.expect_closed().await;
    broker.stop().await;
}

#[tokio::test]
async fn frames_before_connect_are_refused() {
    let broker = Broker::start().await;
    let mut client = Client::open(broker.addr).await;
    client.send(&frame(Command::Send, &[("destination", "/topic/a")], "x")).await;
    let error = client.expect_error().await;
    assert!(error.header("message").unwrap().contains("expected CONNECT"), "{error:?}");
    broker.stop().await;
}

#[tokio::test]
async fn topic_wildcard_subscriber_gets_matching_sends_with_headers() {
    let broker = Broker::start().await;
    let mut sub = broker.client().await;
    let mut publisher = broker.client().await;
    sub.subscribe("/topic/sensors/+/temp", "s1", "auto").await;

    publisher.publish("/topic/sensors/k1/humidity", "not for you").await;
    let send = frame(
        Command::Send,
        &[("destination", "/topic/sensors/k1/temp"), ("content-type", "text/plain"), ("x-unit", "celsius")],
        "21.5",
    );
    assert!(publisher.with_receipt(send).await.is_empty());

    let m = sub.recv_message().await;
    assert_eq!(m.header("destination"), Some("/topic/sensors/k1/temp"));
    assert_eq!(m.header("subscription"), Some("s1"));
    assert!(m.header("message-id").is_some());
    assert_eq!(m.header("content-type"), Some("text/plain"));
    assert_eq!(m.header("content-length"), Some("4"));
    assert_eq!(m.header("x-unit"), Some("celsius"));
    assert_eq!(m.header("ack"), None, "auto subscriptions carry no ack header");
    assert_eq!(m.header("persistent"), None, "topic default is at-most-once");
    assert_eq!(text(&m), "21.5");
    broker.stop().await;
}

#[tokio::test]
async fn receipts_follow_the_effect_and_disconnect_closes_after_its_receipt() {
    let broker = Broker::start().await;
    let mut client = broker.client().await;
    client.subscribe("/topic/own", "1", "auto").await;
    // The SEND's receipt comes after routing, so our own copy may already be queued; either
    // order is allowed, but both must arrive.
    let before = client.with_receipt(frame(Command::Send, &[("destination", "/topic/own")], "self")).await;
    let m = match before.into_iter().next() {
        Some(m) => m,
        None => client.recv_message().await,
    };
    assert_eq!(text(&m), "self");
    assert!(client.with_receipt(frame(Command::Begin, &[("transaction", "t")], "")).await.is_empty());
    assert!(client.with_receipt(frame(Command::Abort, &[("transaction", "t")], "")).await.is_empty());
    assert!(client.with_receipt(frame(Command::Unsubscribe, &[("id", "1")], "")).await.is_empty());
    client.disconnect().await;
    broker.stop().await;
}

#[tokio::test]
async fn unsubscribe_stops_delivery() {
    let broker = Broker::start().await;
    let mut sub = broker.client().await;
    let mut publisher = broker.client().await;
    sub.subscribe("/topic/a", "a", "auto").await;
    sub.subscribe("/topic/b", "b", "auto").await;
    assert!(sub.with_receipt(frame(Command::Unsubscribe, &[("id", "a")], "")).await.is_empty());
    publisher.publish("/topic/a", "gone").await;
    publisher.publish("/topic/b", "marker").await;
    let m = sub.recv_message().await;
    assert_eq!((m.header("subscription"), text(&m)), (Some("b"), "marker"));
    broker.stop().await;
}

#[tokio::test]
async fn subscription_ids_are_required_and_unique() {
    let broker = Broker::start().await;
    let mut client = broker.client().await;
    client.send(&frame(Command::Subscribe, &[("destination", "/topic/a")], "")).await;
    assert!(client.expect_error().await.header("message").unwrap().contains("'id'"));

    let mut client = broker.client().await;
    client.subscribe("/topic/a", "same", "auto").await;
    client.send(&frame(Command::Subscribe, &[("destination", "/topic/b"), ("id", "same"), ("receipt", "r")], "")).await;
    let error = client.expect_error().await;
    assert!(error.header("message").unwrap().contains("already in use"));
    assert_eq!(error.header("receipt-id"), Some("r"));

    let mut client = broker.client().await;
    client.send(&frame(Command::Unsubscribe, &[("id", "never")], "")).await;
    assert!(client.expect_error().await.header("message").unwrap().contains("no subscription"));
    broker.stop().await;
}

#[tokio::test]
async fn other_destinations_are_refused_naming_the_accepted_forms() {
    let broker = Broker::start().await;
    for command in [Command::Send, Command::Subscribe] {
        let mut client = broker.client().await;
        client
            .send(&frame(command, &[("destination", "/exchange/amq.topic/x"), ("id", "1"), ("receipt", "r9")], ""))
            .await;
        let error = client.expect_error().await;
        let message = error.header("message").unwrap();
        assert!(message.contains("/exchange/amq.topic/x"), "{message}");
        assert!(message.contains("/topic/<topic>") && message.contains("/queue/<name>"), "{message}");
        assert_eq!(error.header("receipt-id"), Some("r9"));
    }
    let mut client = broker.client().await;
    client.send(&frame(Command::Send, &[("destination", "/topic/a/+")], "")).await;
    assert!(client.expect_error().await.header("message").unwrap().contains("wildcard"));
    broker.stop().await;
}

#[tokio::test]
async fn server_frames_and_second_connect_are_refused() {
    let broker = Broker::start().await;
    let mut client = broker.client().await;
    client.send(&frame(Command::Message, &[("destination", "/topic/a")], "")).await;
    client.expect_error().await;
    let mut client = broker.client().await;
    client.send(&frame(Command::Connect, &[("accept-version", "1.2")], "")).await;
    client.expect_error().await;
    broker.stop().await;
}

#[tokio::test]
async fn stomp_1_0_client_without_ids() {
    let broker = Broker::start().await;
    let (mut client, connected) = Client::connect_with(broker.addr, &[("login", "old")]).await;
    assert_eq!(connected.header("version"), Some("1.0"));
    assert_eq!(connected.header("heart-beat"), None);
    let subscribe = frame(Command::Subscribe, &[("destination", "/topic/legacy")], "");
    assert!(client.with_receipt(subscribe).await.is_empty());
    client.send(&frame(Command::Send, &[("destination", "/topic/legacy")], "hi")).await;
    let m = client.recv_message().await;
    assert_eq!((m.header("subscription"), text(&m)), (Some("/topic/legacy"), "hi"));
    let unsubscribe = frame(Command::Unsubscribe, &[("destination", "/topic/legacy")], "");
    assert!(client.with_receipt(unsubscribe).await.is_empty());
    client.disconnect().await;
    broker.stop().await;
}

#[tokio::test]
async fn shutdown_sends_error_and_closes() {
    let broker = Broker::start().await;
    let mut client = broker.client().await;
    let router = broker.router.clone();
    broker.stop().await;
    let error = client.recv().await;
    assert_eq!(error.command, Command::Error);
    assert!(error.header("message").unwrap().contains("shutting down"));
    assert!(!matches!(client.recv_item().await, Some(Decoded::Frame(_))));
    drop(router);
}

#[tokio::test]
async fn selectors_and_durable_subscriptions_are_refused() {
    let broker = Broker::start().await;
    let mut client = broker.client().await;
    client
        .send(&frame(Command::Subscribe, &[("destination", "/topic/a"), ("id", "1"), ("selector", "x > 1")], ""))
        .await;
    assert!(client.expect_error().await.header("message").unwrap().contains("selectors are not supported"));
    broker.stop().await;
}
