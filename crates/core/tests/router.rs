//! Router behaviour as front ends see it: sessions subscribe, publish and drain outboxes.

use std::sync::Arc;

use tolk_core::{
    Delivery, Message, Metrics, Origin, Protocol, QoS, QueueOptions, Router, RouterConfig, Session, SubscriptionOptions,
};

fn router() -> Router {
    Router::new(RouterConfig { outbox_capacity: 4, ..RouterConfig::default() }, Arc::new(Metrics::new()))
}

fn message(session: &Session, topic: &str, payload: &str, qos: QoS) -> Arc<Message> {
    let origin = Origin { protocol: session.protocol(), session: session.id(), client_id: "pub".into() };
    let mut m = Message::new(topic, payload.to_owned(), origin);
    m.qos = qos;
    Arc::new(m)
}

fn drain(session: &Session) -> Vec<Delivery> {
    let mut out = Vec::new();
    session.receiver().try_drain(&mut out, usize::MAX).unwrap();
    out
}

fn payloads(session: &Session) -> Vec<String> {
    drain(session).iter().map(|d| String::from_utf8(d.message.payload.to_vec()).unwrap()).collect()
}

#[test]
fn fan_out_shares_one_message_and_applies_min_qos() {
    let r = router();
    let publisher = r.open_session(Protocol::Mqtt);
    let a = r.open_session(Protocol::Stomp);
    let b = r.open_session(Protocol::Amqp);
    a.subscribe("s/+/t", 0, SubscriptionOptions { max_qos: QoS::AtMostOnce, ..Default::default() }).unwrap();
    b.subscribe("s/#", 0, SubscriptionOptions::default()).unwrap();
    let outcome = publisher.publish(message(&publisher, "s/1/t", "x", QoS::AtLeastOnce));
    assert_eq!((outcome.matched, outcome.delivered), (2, 2));
    let (da, db) = (drain(&a).pop().unwrap(), drain(&b).pop().unwrap());
    assert!(Arc::ptr_eq(&da.message, &db.message), "fan-out must not copy the message");
    assert_eq!((da.qos, db.qos), (QoS::AtMostOnce, QoS::AtLeastOnce));
}

#[test]
fn no_local_skips_own_messages_and_tags_come_back() {
    let r = router();
    let s = r.open_session(Protocol::Mqtt);
    s.subscribe("t", 7, SubscriptionOptions { no_local: true, ..Default::default() }).unwrap();
    s.subscribe("#", 8, SubscriptionOptions { subscription_id: Some(42), ..Default::default() }).unwrap();
    s.publish(message(&s, "t", "own", QoS::AtMostOnce));
    let got = drain(&s);
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].tag, got[0].subscription_id), (8, Some(42)));
}

#[test]
fn resubscribing_replaces_and_dropping_a_session_removes_its_subscriptions() {
    let r = router();
    let s = r.open_session(Protocol::Mqtt);
    assert!(!s.subscribe("a", 0, SubscriptionOptions::default()).unwrap());
    assert!(s.subscribe("a", 0, SubscriptionOptions { max_qos: QoS::AtMostOnce, ..Default::default() }).unwrap());
    s.subscribe("b/#", 0, SubscriptionOptions::default()).unwrap();
    assert_eq!(r.subscription_count(), 2);
    drop(s);
    assert_eq!(r.subscription_count(), 0);
}

#[test]
fn retained_messages_are_stored_replaced_and_cleared() {
    let r = router();
    let p = r.open_session(Protocol::Mqtt);
    let retained = |topic, payload: &str| {
        let mut m = (*message(&p, topic, payload, QoS::AtMostOnce)).clone();
        m.retain = true;
        p.publish(Arc::new(m));
    };
    retained("home/a", "1");
    retained("home/a", "2");
    retained("home/b", "3");
    retained("$SYS/x", "4");
    let mut got: Vec<_> = r.retained("home/+").iter().map(|m| m.payload.clone()).collect();
    got.sort();
    assert_eq!(got, ["2", "3"]);
    assert!(r.retained("#").iter().all(|m| m.topic != "$SYS/x"));
    retained("home/a", "");
    assert_eq!(r.retained("home/a").len(), 0);
    assert_eq!(r.retained_count(), 2);
}

#[test]
fn slow_subscriber_congests_then_drops_at_most_once_and_overflows_at_least_once_at_twice_the_capacity() {
    let r = router();
    let p = r.open_session(Protocol::Mqtt);
    let slow = r.open_session(Protocol::Mqtt);
    slow.subscribe("t", 0, SubscriptionOptions::default()).unwrap();
    for _ in 0..4 {
        p.publish(message(&p, "t", "x", QoS::AtMostOnce));
    }
    assert!(!p.is_congesting());
    for _ in 0..4 {
        assert_eq!(p.publish(message(&p, "t", "x", QoS::AtMostOnce)).delivered, 1, "queued over capacity");
    }
    assert!(p.is_congesting(), "the publisher is asked to wait, whatever the QoS");
    assert_eq!(p.publish(message(&p, "t", "x", QoS::AtMostOnce)).dropped, 1, "twice the capacity");
    assert_eq!(r.metrics().protocol(Protocol::Mqtt).dropped_count(tolk_core::DropReason::OutboxFull), 1);
    assert_eq!(p.publish(message(&p, "t", "x", QoS::AtLeastOnce)).dropped, 1, "the publisher did not wait");
    assert!(slow.receiver().try_drain(&mut Vec::new(), 10).is_err(), "marked as slow consumer");
}

#[tokio::test(start_paused = true)]
async fn an_at_most_once_subscriber_still_full_after_the_grace_stays_and_loses_only_the_excess() {
    let r = router();
    let publisher = r.open_session(Protocol::Mqtt);
    let slow = r.open_session(Protocol::Stomp);
    slow.subscribe("t", 0, SubscriptionOptions::default()).unwrap();
    for _ in 0..5 {
        publisher.publish(message(&publisher, "t", "x", QoS::AtMostOnce));
    }
    assert!(publisher.is_congesting());
    publisher.relieve_congestion().await; // the paused clock jumps to the grace deadline
    assert!(!publisher.is_congesting());
    let next = publisher.publish(message(&publisher, "t", "x", QoS::AtMostOnce));
    assert_eq!((next.dropped, publisher.is_congesting()), (1, false), "dropped, nobody held back again");
    assert_eq!(slow.receiver().try_drain(&mut Vec::new(), 10), Ok(5), "still connected, nothing else lost");
}

#[test]
fn shared_subscription_balances_and_hands_over_on_leave() {
    let r = router();
    let p = r.open_session(Protocol::Mqtt);
    let mut a = r.open_session(Protocol::Mqtt);
    let mut b = r.open_session(Protocol::Stomp);
    a.join_shared("g", "jobs/#", 10, QoS::AtLeastOnce, 1).unwrap();
    b.join_shared("g", "jobs/#", 10, QoS::AtLeastOnce, 1).unwrap();
    for n in 0..4 {
        p.publish(message(&p, "jobs/x", &n.to_string(), QoS::AtLeastOnce));
    }
    let a_got = drain(&a);
    assert_eq!(a_got.iter().map(|d| d.message.payload.clone()).collect::<Vec<_>>(), ["0", "2"]);
    assert_eq!(payloads(&b), ["1", "3"]);
    // a leaves without acknowledging: its two messages go to b, marked redelivered.
    drop(a_got);
    drop(a);
    let again = drain(&b);
    assert_eq!(again.len(), 2);
    assert!(again.iter().all(|d| d.redelivered));
    assert!(b.cancel(1));
    assert!(r.queue("$share/g/jobs/#").is_none(), "group queue goes with its last member");
    assert_eq!(r.subscription_count(), 0);
}

#[test]
fn queues_refuse_when_full_and_exclusive_queues_die_with_their_owner() {
    let r = router();
    let owner = r.open_session(Protocol::Amqp);
    let p = r.open_session(Protocol::Mqtt);
    let options = QueueOptions { max_length: 1, exclusive_owner: Some(owner.id()), ..Default::default() };
    let (q, created) = r.declare_queue("q1", options.clone()).unwrap();
    assert!(created);
    assert!(r.declare_queue("q1", QueueOptions { exclusive_owner: Some(p.id()), ..options.clone() }).is_err());
    r.bind_queue(&q, "a/+", 0).unwrap();
    assert_eq!(p.publish(message(&p, "a/b", "1", QoS::AtLeastOnce)).delivered, 1);
    assert_eq!(p.publish(message(&p, "a/b", "2", QoS::AtLeastOnce)).refused, 1);
    drop(owner);
    assert!(r.queue("q1").is_none());
    assert_eq!(r.subscription_count(), 0);
}

#[tokio::test]
async fn a_fast_publisher_is_held_back_until_the_slow_subscriber_has_room() {
    let r = router();
    let publisher = r.open_session(Protocol::Mqtt);
    let slow = r.open_session(Protocol::Mqtt);
    slow.subscribe("t", 0, SubscriptionOptions::default()).unwrap();
    for n in 0..5 {
        assert_eq!(publisher.publish(message(&publisher, "t", &n.to_string(), QoS::AtLeastOnce)).delivered, 1);
    }
    assert!(publisher.is_congesting(), "the fifth delivery went over capacity");
    let relieve = tokio::spawn(async move {
        publisher.relieve_congestion().await;
        publisher
    });
    tokio::task::yield_now().await;
    assert!(!relieve.is_finished(), "waits while the subscriber is full");
    assert_eq!(payloads(&slow), ["0", "1", "2", "3", "4"], "nothing was lost");
    let publisher = relieve.await.unwrap();
    assert!(!publisher.is_congesting());
}

#[tokio::test]
async fn a_queue_past_its_mark_holds_back_its_publishers_but_not_its_own_consumers() {
    let r = router();
    let options = QueueOptions { max_length: 4, ..Default::default() };
    let (q, _) = r.declare_queue("work", options).unwrap();
    r.bind_queue(&q, "jobs", 0).unwrap();
    let mut worker = r.open_session(Protocol::Amqp);
    worker.consume(&q, 1, QoS::AtLeastOnce, 1).unwrap();
    let publisher = r.open_session(Protocol::Mqtt);
    for n in 0..3 {
        assert_eq!(publisher.publish(message(&publisher, "jobs", &n.to_string(), QoS::AtLeastOnce)).delivered, 1);
    }
    assert!(publisher.is_congesting(), "one with the worker, two waiting: half of 4");
    // The worker republishing into the queue it drains would stop reading its own acks.
    assert_eq!(worker.publish(message(&worker, "jobs", "again", QoS::AtLeastOnce)).delivered, 1);
    assert!(!worker.is_congesting(), "a consumer of the queue is not held back by it");
    let relieve = tokio::spawn(async move {
        publisher.relieve_congestion().await;
        publisher
    });
    tokio::task::yield_now().await;
    assert!(!relieve.is_finished(), "waits while the queue is past its mark");
    let mut taken = Vec::new();
    for _ in 0..4 {
        // Credit 1: each acknowledgement lets the next message through.
        for delivery in drain(&worker) {
            taken.push(String::from_utf8(delivery.message.payload.to_vec()).unwrap());
            delivery.ack.as_ref().unwrap().ack();
        }
    }
    assert_eq!(taken, ["0", "1", "2", "again"], "nothing was refused");
    assert!(!relieve.await.unwrap().is_congesting());
}

#[tokio::test(start_paused = true)]
async fn a_subscriber_still_full_after_the_grace_is_closed_as_slow_consumer() {
    let r = router();
    let publisher = r.open_session(Protocol::Mqtt);
    let slow = r.open_session(Protocol::Stomp);
    slow.subscribe("t", 0, SubscriptionOptions::default()).unwrap();
    for _ in 0..5 {
        publisher.publish(message(&publisher, "t", "x", QoS::AtLeastOnce));
    }
    publisher.relieve_congestion().await; // the paused clock jumps to the grace deadline
    assert!(!publisher.is_congesting());
    assert!(slow.receiver().try_drain(&mut Vec::new(), 10).is_err(), "marked as slow consumer");
}

#[test]
fn a_bridges_spool_is_refused_to_clients_and_open_to_its_bridge() {
    use tolk_core::access::{Resource, Right};
    let r = router();
    let spool = format!("{}uplink", tolk_core::SPOOL_PREFIX);
    let client = r.open_session(Protocol::Amqp);
    assert!(!client.may_use(Resource::Queue(&spool), &[Right::Read, Right::Write, Right::Configure]));
    assert!(client.may_use(Resource::Queue("orders"), &[Right::Read]), "other queues stay open without an ACL");
    let bridge = r.open_session(Protocol::Bridge);
    assert!(bridge.may_use(Resource::Queue(&spool), &[Right::Read]));
}

#[test]
fn a_message_that_passed_this_node_is_dropped_as_a_loop() {
    let r = router();
    r.set_node_name("gw1");
    let publisher = r.open_session(Protocol::Mqtt);
    let subscriber = r.open_session(Protocol::Mqtt);
    subscriber.subscribe("t", 0, SubscriptionOptions::default()).unwrap();
    let mut looped = Message::clone(&message(&publisher, "t", "x", QoS::AtLeastOnce));
    looped.props.user = tolk_core::path::through(&[], "gw1");
    assert_eq!(publisher.publish(Arc::new(looped)).delivered, 0);
    let mut elsewhere = Message::clone(&message(&publisher, "t", "y", QoS::AtLeastOnce));
    elsewhere.props.user = tolk_core::path::through(&[], "gw2");
    assert_eq!(publisher.publish(Arc::new(elsewhere)).delivered, 1);
    assert_eq!(r.metrics().protocol(Protocol::Mqtt).dropped_count(tolk_core::DropReason::Loop), 1);
}

#[test]
fn interest_follows_subscriptions_and_bindings_but_not_the_watchers_own_queue() {
    let r = router();
    let (own, _) = r.declare_queue("$cluster/out", QueueOptions::default()).unwrap();
    r.bind_queue_with(&own, "#", 0, SubscriptionOptions::default()).unwrap();
    let a = r.open_session(Protocol::Mqtt);
    a.subscribe("s/+", 0, SubscriptionOptions::default()).unwrap();
    let _watch = r.watch_interest(own.id());
    assert_eq!(r.interest(), ["s/+"], "what was there before the watch counts");
    let b = r.open_session(Protocol::Stomp);
    b.subscribe("s/+", 0, SubscriptionOptions::default()).unwrap();
    b.subscribe("x", 1, SubscriptionOptions::default()).unwrap();
    let (q, _) = r.declare_queue("work", QueueOptions::default()).unwrap();
    r.bind_queue_with(&q, "jobs/#", 0, SubscriptionOptions::default()).unwrap();
    assert_eq!(r.interest(), ["jobs/#", "s/+", "x"]);
    drop(a);
    assert_eq!(r.interest(), ["jobs/#", "s/+", "x"], "b still wants s/+");
    drop(b);
    r.delete_queue("work");
    assert!(r.interest().is_empty());
}
