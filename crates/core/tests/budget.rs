//! The memory budget never leaks: whatever mix of sessions, subscriptions, named queues,
//! publishes, drains, acknowledgements and departures happens, once every session has gone
//! the outbox, offline and queue gauges are back to zero, and the retained gauge is exactly
//! what the retained store holds. A leak would grow until every publisher is refused as
//! "memory full", days into a gateway's life.

use std::sync::Arc;

use proptest::prelude::*;
use tolk_core::budget::message_cost;
use tolk_core::{
    Delivery, MemoryKind, Message, Metrics, Origin, Protocol, QoS, QueueOptions, Router, RouterConfig, Session,
    SubscriptionOptions,
};

const TOPICS: [&str; 4] = ["a/b", "a/c", "x", "a/b/c"];
const FILTERS: [&str; 5] = ["a/b", "a/+", "#", "x", "a/#"];

#[derive(Debug, Clone)]
enum Op {
    Open,
    Subscribe {
        session: usize,
        filter: usize,
        qos: u8,
    },
    Unsubscribe {
        session: usize,
        filter: usize,
    },
    Publish {
        session: usize,
        topic: usize,
        qos: u8,
        len: usize,
        retain: bool,
    },
    /// Takes up to `max` deliveries; queue deliveries are acked, nacked or kept unsettled.
    Drain {
        session: usize,
        max: usize,
        settle: u8,
    },
    Attach {
        session: usize,
        attached: bool,
    },
    Consume {
        session: usize,
        credit: usize,
    },
    Cancel {
        session: usize,
    },
    Leave {
        session: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::Open),
        3 => (0..6usize, 0..FILTERS.len(), 0..2u8).prop_map(|(session, filter, qos)| Op::Subscribe { session, filter, qos }),
        1 => (0..6usize, 0..FILTERS.len()).prop_map(|(session, filter)| Op::Unsubscribe { session, filter }),
        6 => (0..6usize, 0..TOPICS.len(), 0..2u8, 0..3000usize, prop::bool::weighted(0.2))
            .prop_map(|(session, topic, qos, len, retain)| Op::Publish { session, topic, qos, len, retain }),
        3 => (0..6usize, 0..8usize, 0..3u8).prop_map(|(session, max, settle)| Op::Drain { session, max, settle }),
        1 => (0..6usize, any::<bool>()).prop_map(|(session, attached)| Op::Attach { session, attached }),
        1 => (0..6usize, 1..4usize).prop_map(|(session, credit)| Op::Consume { session, credit }),
        1 => (0..6usize).prop_map(|session| Op::Cancel { session }),
        1 => (0..6usize).prop_map(|session| Op::Leave { session }),
    ]
}

/// A small router, so that limits are reached often: outboxes of 3 deliveries or 8 KiB, offline
/// sessions of 6 KiB, a queue of 5 messages, a budget of 64 KiB, 3 retained topics.
fn router() -> Router {
    let config = RouterConfig {
        outbox_capacity: 3,
        outbox_max_bytes: 8 * 1024,
        offline_max_bytes: 6 * 1024,
        queue_max_length: 5,
        memory_budget_bytes: 64 * 1024,
        retained_max_topics: 3,
        ..RouterConfig::default()
    };
    Router::new(config, Arc::new(Metrics::new()))
}

fn qos(n: u8) -> QoS {
    if n == 0 { QoS::AtMostOnce } else { QoS::AtLeastOnce }
}

/// Applies `ops`; returns the deliveries a session took and kept unsettled, still held.
fn run(router: &Router, ops: &[Op]) -> Vec<Delivery> {
    let queue = router.declare_queue("q", QueueOptions::default()).unwrap().0;
    router.bind_queue(&queue, "a/#", 0).unwrap();
    let mut sessions: Vec<Option<Session>> = Vec::new();
    let mut unsettled = Vec::new();
    for op in ops {
        let live = |sessions: &mut Vec<Option<Session>>, i: usize| -> Option<usize> {
            let n = sessions.len();
            (n > 0).then(|| i % n).filter(|&i| sessions[i].is_some())
        };
        match *op {
            Op::Open => sessions.push(Some(router.open_session(Protocol::Mqtt))),
            Op::Subscribe { session, filter, qos: q } => {
                if let Some(i) = live(&mut sessions, session) {
                    let options = SubscriptionOptions { max_qos: qos(q), ..SubscriptionOptions::default() };
                    let _ = sessions[i].as_ref().unwrap().subscribe(FILTERS[filter], filter as u64 + 1, options);
                }
            }
            Op::Unsubscribe { session, filter } => {
                if let Some(i) = live(&mut sessions, session) {
                    sessions[i].as_ref().unwrap().unsubscribe(FILTERS[filter], filter as u64 + 1);
                }
            }
            Op::Publish { session, topic, qos: q, len, retain } => {
                if let Some(i) = live(&mut sessions, session) {
                    let s = sessions[i].as_ref().unwrap();
                    let origin = Origin { protocol: Protocol::Mqtt, session: s.id(), client_id: "p".into() };
                    let mut message = Message::new(TOPICS[topic], vec![7u8; len], origin);
                    message.qos = qos(q);
                    message.retain = retain;
                    let _ = s.publish(Arc::new(message));
                }
            }
            Op::Drain { session, max, settle } => {
                if let Some(i) = live(&mut sessions, session) {
                    let mut taken = Vec::new();
                    let _ = sessions[i].as_ref().unwrap().receiver().try_drain(&mut taken, max);
                    for delivery in taken {
                        match (&delivery.ack, settle) {
                            (Some(ack), 0) => ack.ack(),
                            (Some(ack), 1) => ack.nack(true),
                            (Some(_), _) => unsettled.push(delivery),
                            (None, _) => {}
                        }
                    }
                }
            }
            Op::Attach { session, attached } => {
                if let Some(i) = live(&mut sessions, session) {
                    sessions[i].as_ref().unwrap().receiver().set_attached(attached);
                }
            }
            Op::Consume { session, credit } => {
                if let Some(i) = live(&mut sessions, session) {
                    let s = sessions[i].as_mut().unwrap();
                    let _ = s.consume(&queue, credit, QoS::AtLeastOnce, 100);
                }
            }
            Op::Cancel { session } => {
                if let Some(i) = live(&mut sessions, session) {
                    sessions[i].as_mut().unwrap().cancel(100);
                }
            }
            Op::Leave { session } => {
                if let Some(i) = live(&mut sessions, session) {
                    sessions[i] = None;
                }
            }
        }
    }
    drop(sessions);
    unsettled
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_byte_charged_is_given_back(ops in prop::collection::vec(op(), 1..120)) {
        let router = router();
        let unsettled = run(&router, &ops);
        let memory = router.metrics().memory();
        prop_assert_eq!(memory.held(MemoryKind::Outbox), 0, "outbox bytes after every session left");
        prop_assert_eq!(memory.held(MemoryKind::Offline), 0, "offline bytes after every session left");
        // Unsettled queue deliveries went back to the queue when their session left; the
        // queue's bytes are given back when it is emptied.
        drop(unsettled);
        let queue = router.queue("q").unwrap();
        prop_assert_eq!(queue.unacked_len(), 0, "every consumer left");
        let had = queue.ready_len();
        prop_assert_eq!(queue.purge(), had);
        prop_assert_eq!(memory.held(MemoryKind::Queue), 0, "queue bytes after the queue was emptied");
        let retained: usize = router.retained("#").iter().map(|m| message_cost(m)).sum();
        prop_assert_eq!(memory.held(MemoryKind::Retained), retained, "retained bytes are what the store holds");
    }
}
