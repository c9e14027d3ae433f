//! Durable queues through the router on a real store: a durable queue, its topic binding and
//! its persistent messages come back after a reopen, in order and marked redelivered; what was
//! acknowledged, what was at most once, and non-durable or deleted queues do not.

use std::sync::Arc;

use tolk_core::store::Store;
use tolk_core::{Message, Metrics, Origin, Protocol, QoS, QueueOptions, Router, RouterConfig, SessionId};
use tolk_store::{FjallStore, StorageConfig};

fn message(topic: &str, body: &str, qos: QoS) -> Arc<Message> {
    let origin = Origin { protocol: Protocol::Amqp, session: SessionId(1), client_id: "p".into() };
    let mut m = Message::new(topic, body.as_bytes().to_vec(), origin);
    m.qos = qos;
    Arc::new(m)
}

fn router_on(store: &Arc<FjallStore>) -> Router {
    let router = Router::new(RouterConfig::default(), Arc::new(Metrics::default()));
    router.attach_store(store.clone() as Arc<dyn Store>).unwrap();
    router
}

#[tokio::test]
async fn durable_queues_their_bindings_and_persistent_messages_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let config = StorageConfig::default();
    {
        let store = Arc::new(FjallStore::open(dir.path(), &config).unwrap());
        let router = router_on(&store);
        let durable = QueueOptions { durable: true, ..QueueOptions::default() };
        let (orders, _) = router.declare_queue("orders", durable.clone()).unwrap();
        router.bind_queue(&orders, "sensors/#", 0).unwrap();
        let (scratch, _) = router.declare_queue("scratch", QueueOptions::default()).unwrap();
        let (gone, _) = router.declare_queue("gone", durable).unwrap();

        let mut last = None;
        for (i, qos) in [QoS::AtLeastOnce, QoS::AtMostOnce, QoS::AtLeastOnce, QoS::AtLeastOnce].into_iter().enumerate()
        {
            orders.push(message("direct", &format!("m{i}"), qos), &mut last);
        }
        // Through the binding: the router routes into the queue and stores it there.
        router.publish(message("sensors/t", "bound", QoS::AtLeastOnce));
        scratch.push(message("x", "not durable", QoS::AtLeastOnce), &mut None);
        gone.push(message("x", "deleted", QoS::AtLeastOnce), &mut last);
        last.take().unwrap().await.unwrap();

        // m0 is taken and acknowledged; it must not come back.
        let puller = orders.pull_consumer();
        let (first, _, ack) = orders.get(puller, true).unwrap();
        assert_eq!(&first.payload[..], b"m0");
        ack.unwrap().ack();
        router.delete_queue("gone").unwrap();
        // Deletes are not awaited by the queue: a last commit after them is durable after them.
        let mut marker = None;
        let (flush, _) =
            router.declare_queue("flush", QueueOptions { durable: true, ..QueueOptions::default() }).unwrap();
        flush.push(message("x", "marker", QoS::AtLeastOnce), &mut marker);
        marker.unwrap().await.unwrap();
        store.close();
    }
    let store = Arc::new(FjallStore::open(dir.path(), &config).unwrap());
    let router = router_on(&store);
    assert!(router.queue("scratch").is_none() && router.queue("gone").is_none());
    let orders = router.queue("orders").expect("the durable queue is back");
    assert!(orders.options().durable);
    let puller = orders.pull_consumer();
    let mut got = Vec::new();
    while let Some((m, redelivered, _)) = orders.get(puller, false) {
        got.push((String::from_utf8(m.payload.to_vec()).unwrap(), redelivered));
    }
    let expected: Vec<(String, bool)> = ["m2", "m3", "bound"].iter().map(|s| (s.to_string(), true)).collect();
    assert_eq!(got, expected, "persistent, unacknowledged, in arrival order");

    // The binding came back too.
    router.publish(message("sensors/u", "after", QoS::AtLeastOnce));
    assert_eq!(orders.ready_len(), 1);
}
