//! The AMQP bridge against tolk's own AMQP front end, in one process: out through `amq.topic`
//! with confirms, in through a durable queue bound at the remote, and what the bridge sends to
//! keys it also binds (AMQP has no No Local) does not come back as a second copy.

use std::net::SocketAddr;

use tolk_amqp::{AmqpConfig, AmqpFrontEnd};
use tolk_bridge::testing::{TestBroker, next, until};
use tolk_bridge::{BridgeConfig, Kind};
use tolk_core::{Protocol, path};

async fn broker(node: &str) -> TestBroker {
    let config = AmqpConfig { bind: SocketAddr::from(([127, 0, 0, 1], 0)), ..AmqpConfig::default() };
    TestBroker::start(node, Box::new(AmqpFrontEnd::new(config))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_cross_both_ways_through_amq_topic_once() {
    let far = broker("far").await;
    // The local side needs no listener of its own; it has one all the same.
    let near = broker("near").await;
    let url = format!("amqp://guest:guest@127.0.0.1:{}/%2f", far.port);
    near.bridge(BridgeConfig::new("far", Kind::Amqp, &url, &["room.1/# both 1"]), tolk_bridge_amqp::runner()).await;
    let (at_near, at_far) = (near.subscriber("#"), far.subscriber("#"));
    let (pn, pf) = (near.publisher(), far.publisher());

    near.publish(&pn, "room.1/temp", "21.5");
    let d = next(&at_far).await;
    assert_eq!((&*d.message.topic, &d.message.payload[..]), ("room.1/temp", &b"21.5"[..]));
    assert_eq!(d.message.origin.protocol, Protocol::Amqp, "it arrived over AMQP");
    assert!(path::has_passed(&d.message, "near"), "with the path as a header");

    far.publish(&pf, "room.1/valve", "open");
    let mut got = until(&at_near, "room.1/valve").await;
    got.retain(|d| d.message.topic != "room.1/temp");
    assert!(
        got.is_empty(),
        "nothing but near's own publish before: {:?}",
        got.iter().map(|d| &d.message.topic).collect::<Vec<_>>()
    );

    // What near sent came back through near's own binding (no No Local in AMQP) and was dropped
    // as a loop: a marker is the next thing near sees.
    near.publish(&pn, "room.1/end", "");
    let rest = until(&at_near, "room.1/end").await;
    assert!(rest.is_empty(), "{:?}", rest.iter().map(|d| &d.message.topic).collect::<Vec<_>>());
    near.eventually("room.1/temp and room.1/end confirmed", |b| {
        b.ctx.router.metrics().bridges().statuses()[0].messages_out == 2
    })
    .await;
    far.stop().await;
    near.stop().await;
}
