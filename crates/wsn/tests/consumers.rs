//! Who the broker POSTs to: never itself (under any name, refused at Subscribe; through a
//! relay, caught by the loop mark when the push comes back), and only hosts in
//! `push.consumer_allow` when that list is set.

mod common;

use std::net::SocketAddr;

use common::*;
use tokio::net::TcpListener;
use tolk_core::DropReason;
use tolk_wsn::{PushConfig, WsnConfig};

fn allowing(hosts: &[&str]) -> WsnConfig {
    let mut config = test_config();
    config.push = PushConfig { consumer_allow: hosts.iter().map(|h| (*h).to_owned()).collect(), ..config.push };
    config
}

#[tokio::test]
async fn the_broker_under_another_name_is_refused_as_a_consumer() {
    let broker = Broker::start(test_config()).await;
    let port = broker.addr.port();
    // The client reaches the broker as 127.0.0.1; these name the same listener otherwise.
    for consumer in [
        format!("http://localhost:{port}/wsn"),
        format!("http://LOCALHOST:{port}/wsn/"),
        format!("http://127.0.0.2:{port}/anything"),
        format!("http://0.0.0.0:{port}/wsn"),
        format!("http://[::1]:{port}/wsn"),
    ] {
        let reply = broker.post("/wsn", CT12, subscribe_doc(SOAP12, &consumer, "", "")).await;
        reply.assert_fault(500, "SubscribeCreationFailedFault");
        assert!(reply.body.contains("would loop"), "{consumer}: {}", reply.body);
    }
    assert_eq!(broker.router.subscription_count(), 0, "nothing was subscribed");
    broker.stop().await;
}

/// A TCP relay to `target` on an ephemeral port: the broker reached through an address the
/// subscribe-time check cannot see through (as a reverse proxy or a port forward would be).
async fn relay_to(target: SocketAddr) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else { return };
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn a_push_that_comes_back_is_refused_counted_and_its_subscription_ended() {
    let broker = Broker::start(test_config()).await;
    let relay = relay_to(broker.addr).await;
    let subscription = broker.subscribe(&format!("http://{relay}/wsn"), "").await;
    let reply = broker.post("/wsn", CT11, notify_doc(SOAP11, &[("tns:loop", "<v>1</v>")])).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    // The push comes back through the relay carrying this broker's mark: refused and counted,
    // and the subscription that sent it is gone, so nothing comes back again.
    let counters = broker.metrics().protocol(tolk_core::Protocol::Wsn);
    eventually("the returned push to be counted as a loop", || counters.dropped_count(DropReason::Loop) == 1).await;
    eventually("the looping subscription to be removed", || broker.router.subscription_count() == 0).await;
    broker.post_to(&subscription, simple_doc("Unsubscribe")).await.assert_fault(500, "ResourceUnknownFault");
    assert_eq!(counters.messages_in.load(std::sync::atomic::Ordering::Relaxed), 1, "published once, never again");
    broker.stop().await;
}

#[tokio::test]
async fn consumers_outside_the_allow_list_are_refused() {
    let mut consumer = Consumer::start().await;
    let broker = Broker::start(allowing(&["10.0.0.0/8", "dashboard.lan"])).await;
    let reply = broker.post("/wsn", CT11, subscribe_doc(SOAP11, &consumer.url("c"), "", "")).await;
    reply.assert_fault(500, "SubscribeCreationFailedFault");
    assert!(reply.body.contains("consumer_allow"), "{}", reply.body);
    assert_eq!(broker.router.subscription_count(), 0);
    broker.stop().await;

    // Allowed by address, by network, and by name: delivered.
    let port = consumer.addr.port();
    for (allow, address) in [
        ("127.0.0.1", consumer.url("a")),
        ("127.0.0.0/8", consumer.url("b")),
        ("localhost", format!("http://localhost:{port}/consumer/c")),
    ] {
        let broker = Broker::start(allowing(&[allow])).await;
        broker.subscribe(&address, "").await;
        let reply = broker.post("/wsn", CT11, notify_doc(SOAP11, &[("tns:t", "<v>1</v>")])).await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        assert!(consumer.next().await.body.contains("<v>1</v>"), "allowed by {allow}");
        broker.stop().await;
    }
}

#[tokio::test]
async fn the_allow_list_does_not_make_the_broker_itself_a_consumer() {
    let broker = Broker::start(allowing(&["127.0.0.0/8", "localhost"])).await;
    let consumer = format!("http://localhost:{}/wsn", broker.addr.port());
    broker.post("/wsn", CT11, subscribe_doc(SOAP11, &consumer, "", "")).await.assert_fault(500, "would loop");
    broker.stop().await;
}
