//! A publisher faster than its subscriber is slowed down (the broker stops reading it), and the
//! subscriber keeps everything, at QoS 1 and at QoS 0: the publisher waits within limits instead
//! of the slow session's messages being dropped at once.

mod common;

use std::num::NonZeroU16;
use std::time::Duration;

use common::v4::{self, AsyncClient, Event, MqttOptions, Packet, QoS};
use common::{MqttConfigExt, Raw, WAIT, config, eventually, start_with};
use rmqtt_codec::v5 as r5;
use tolk_core::{CloseReason, Protocol, RouterConfig};

const MESSAGES: usize = 300;

#[tokio::test]
async fn a_fast_qos1_publisher_is_held_back_and_the_slow_subscriber_gets_everything() {
    fast_publisher_slow_subscriber(QoS::AtLeastOnce, MESSAGES, 4).await;
}

/// At QoS 0 too: dropping at the first full moment would lose messages to a subscriber that is
/// only slower for a while. 4 MiB of messages, more than the loopback socket buffers hold, so
/// that the outbox fills.
#[tokio::test]
async fn a_fast_qos0_publisher_is_held_back_and_the_slow_subscriber_gets_everything() {
    fast_publisher_slow_subscriber(QoS::AtMostOnce, 4096, 1024).await;
}

async fn fast_publisher_slow_subscriber(qos: QoS, messages: usize, size: usize) {
    // A tiny outbox so that the subscriber is full almost at once.
    let broker = start_with(config(), RouterConfig { outbox_capacity: 8, ..RouterConfig::default() }).await;

    // The subscriber's event loop is polled by hand, slowly: each poll reads (and acks) at
    // most one message, and it pauses every few messages.
    let (subscriber, mut slow_loop) = AsyncClient::new(MqttOptions::new("slow", "127.0.0.1", broker.port), 16);
    subscriber.subscribe("load/t", qos).await.unwrap();
    loop {
        let event = tokio::time::timeout(WAIT, slow_loop.poll()).await.expect("suback in time").unwrap();
        if let Event::Incoming(Packet::SubAck(_)) = event {
            break;
        }
    }

    let publisher = v4::connect(v4::options(broker.port, "fast")).await;
    let sender = tokio::spawn(async move {
        for n in 0..messages {
            let mut payload = vec![0; size];
            payload[..4].copy_from_slice(&(n as u32).to_be_bytes());
            publisher.client.publish("load/t", qos, false, payload).await.unwrap();
        }
        publisher
    });

    let mut received = Vec::with_capacity(messages);
    while received.len() < messages {
        let event = tokio::time::timeout(WAIT, slow_loop.poll())
            .await
            .expect("a message in time")
            .unwrap_or_else(|e| panic!("subscriber lost after {} messages: {e}", received.len()));
        if let Event::Incoming(Packet::Publish(p)) = event {
            received.push(u32::from_be_bytes(p.payload[..4].try_into().unwrap()));
            if received.len() % (messages / 300).max(1) == 0 {
                tokio::time::sleep(Duration::from_micros(500)).await;
            }
        }
    }
    assert_eq!(received, (0..messages as u32).collect::<Vec<_>>(), "every message, once, in order");
    let counters = broker.metrics().protocol(Protocol::Mqtt);
    assert_eq!(counters.closed_count(CloseReason::SlowConsumer), 0, "nobody was dropped as a slow consumer");
    assert_eq!(counters.dropped_count(tolk_core::DropReason::OutboxFull), 0, "nothing was dropped");
    drop(sender.await.unwrap());
    broker.stop().await;
}

/// A client subscribed at QoS 1 to the topic it publishes to at QoS 1 is its own slow
/// subscriber: its outbox fills while its deliveries wait for its PUBACKs. Those PUBACKs must
/// still be read while its PUBLISHes are held back, or the connection deadlocks until it is
/// closed as a slow consumer.
#[tokio::test]
async fn a_client_publishing_to_its_own_subscription_is_not_deadlocked() {
    let router =
        RouterConfig { outbox_capacity: 8, slow_consumer_grace: Duration::from_secs(2), ..RouterConfig::default() };
    let broker = start_with(config(), router).await;
    let mut options = MqttOptions::new("echo", "127.0.0.1", broker.port);
    options.set_inflight(100);
    let (client, mut eventloop) = AsyncClient::new(options, 1000);
    client.subscribe("echo/t", QoS::AtLeastOnce).await.unwrap();
    loop {
        let event = tokio::time::timeout(WAIT, eventloop.poll()).await.expect("suback in time").unwrap();
        if let Event::Incoming(Packet::SubAck(_)) = event {
            break;
        }
    }
    let sender = tokio::spawn(async move {
        for n in 0..MESSAGES {
            client.publish("echo/t", QoS::AtLeastOnce, false, (n as u32).to_be_bytes().to_vec()).await.unwrap();
        }
        client
    });
    let mut received = Vec::with_capacity(MESSAGES);
    while received.len() < MESSAGES {
        let event = tokio::time::timeout(WAIT, eventloop.poll())
            .await
            .expect("a message in time")
            .unwrap_or_else(|e| panic!("connection lost after {} messages: {e}", received.len()));
        if let Event::Incoming(Packet::Publish(p)) = event {
            received.push(u32::from_be_bytes(p.payload[..4].try_into().unwrap()));
        }
    }
    assert_eq!(received, (0..MESSAGES as u32).collect::<Vec<_>>(), "every message, once, in order");
    let counters = broker.metrics().protocol(Protocol::Mqtt);
    assert_eq!(counters.closed_count(CloseReason::SlowConsumer), 0, "not dropped as a slow consumer");
    drop(sender.await.unwrap());
    broker.stop().await;
}

/// A client that stops reading while output waits for its socket is closed as a slow consumer
/// once the socket has taken none of it for `write_timeout`; the client beside it, which keeps
/// reading, gets every message (its publisher waits for the stuck one's outbox meanwhile, and
/// goes on once it is closed).
#[tokio::test]
async fn a_client_that_stops_reading_is_closed_after_the_write_timeout() {
    const MESSAGES: u32 = 2048;
    // 16 MiB in all, more than the loopback socket buffers of the stuck client hold.
    const SIZE: usize = 8 * 1024;
    // Long enough that only the write timeout can close the stuck client.
    let router = RouterConfig { slow_consumer_grace: Duration::from_secs(60), ..RouterConfig::default() };
    let broker = start_with(MqttConfigExt::with(|c| c.write_timeout = Duration::from_millis(300)), router).await;
    let mut reader = v4::connect(v4::options(broker.port, "reader")).await;
    reader.subscribe("flood", QoS::AtMostOnce).await;
    let (mut stuck, _) = Raw::handshake5(broker.port, Raw::connect5("stuck")).await;
    stuck
        .send5(r5::Packet::Subscribe(r5::Subscribe {
            packet_id: NonZeroU16::MIN,
            id: None,
            user_properties: Vec::new(),
            topic_filters: vec![("flood".into(), r5::SubscriptionOptions::default())],
        }))
        .await;
    assert!(matches!(stuck.recv5().await, Some(r5::Packet::SubscribeAck(_))));

    let publisher = v4::connect(v4::options(broker.port, "flooder")).await;
    let sender = tokio::spawn(async move {
        for n in 0..MESSAGES {
            let mut payload = vec![0; SIZE];
            payload[..4].copy_from_slice(&n.to_be_bytes());
            publisher.client.publish("flood", QoS::AtMostOnce, false, payload).await.unwrap();
        }
        publisher
    });
    let mut received = Vec::with_capacity(MESSAGES as usize);
    while received.len() < MESSAGES as usize {
        let publish = reader.publish().await;
        received.push(u32::from_be_bytes(publish.payload[..4].try_into().unwrap()));
    }
    assert_eq!(received, (0..MESSAGES).collect::<Vec<_>>(), "every message, once, in order");
    // The stuck client reads at last: what its socket took, then the end of the connection.
    let mut taken = 0;
    while let Some(packet) = stuck.recv5().await {
        assert!(matches!(packet, r5::Packet::Publish(_)), "only deliveries: {packet:?}");
        taken += 1;
    }
    assert!(taken < MESSAGES, "closed before it was sent everything ({taken})");
    drop(stuck);
    let counters = broker.metrics().protocol(Protocol::Mqtt);
    eventually("the stuck client's close counted", || counters.closed_count(CloseReason::SlowConsumer) == 1).await;
    assert_eq!(counters.dropped_count(tolk_core::DropReason::OutboxFull), 0, "nothing was dropped");
    drop(sender.await.unwrap());
    broker.stop().await;
}
