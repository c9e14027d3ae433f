//! A PUBLISH that leaves something in the store (here: retained) is answered only once the
//! store says it is durable, and the answers after it wait their turn; a store that cannot keep
//! it gets "rejected: congestion". The store is a gate the test opens, so the order is certain.

mod support;

use std::sync::Arc;

use bytes::Bytes;
use mqttsn_codec::{Message, PubAck, Publish, PublishTopic, QoS, ReturnCode};
use tolk_core::store::{Gate, StoreError};

fn publish(id: u16, msg_id: u16, retain: bool) -> Message {
    let data = Bytes::from_static(b"kept");
    Message::Publish(Publish { dup: false, qos: QoS::One, retain, topic: PublishTopic::Normal(id), msg_id, data })
}

fn puback(id: u16, msg_id: u16, return_code: ReturnCode) -> Message {
    Message::PubAck(PubAck { topic_id: id, msg_id, return_code })
}

#[tokio::test]
async fn pubacks_wait_for_the_store_and_keep_their_order() {
    let gw = support::start(support::config()).await;
    let gate = Arc::new(Gate::default());
    gw.router.attach_store(gate.clone()).unwrap();
    let mut client = gw.client().await;
    assert_eq!(client.connect("durable", 60, true).await, ReturnCode::Accepted);
    let id = client.register_ok("kept/a").await;

    // A retained message goes to the store; a plain one after it keeps nothing but is answered
    // after it. A PINGRESP overtakes both: they are held, not lost.
    client.send(&publish(id, 1, true)).await;
    client.send(&publish(id, 2, false)).await;
    client.send(&Message::PingReq { client_id: None }).await;
    assert_eq!(client.recv().await, Message::PingResp);
    assert_eq!(gate.complete_all(Ok(())), 1, "one commit: the retained message");
    assert_eq!(client.recv().await, puback(id, 1, ReturnCode::Accepted));
    assert_eq!(client.recv().await, puback(id, 2, ReturnCode::Accepted));

    // Nothing pending: a plain publish is answered at once.
    client.send(&publish(id, 3, false)).await;
    assert_eq!(client.recv().await, puback(id, 3, ReturnCode::Accepted));

    // A full store: that message is refused with "rejected: congestion", which clients retry.
    client.send(&publish(id, 4, true)).await;
    client.send(&Message::PingReq { client_id: None }).await;
    assert_eq!(client.recv().await, Message::PingResp);
    assert_eq!(gate.complete_all(Err(StoreError::Full)), 1);
    assert_eq!(client.recv().await, puback(id, 4, ReturnCode::Congestion));
}

#[tokio::test]
async fn a_persistent_sessions_connack_waits_for_its_record() {
    let gw = support::start(support::config()).await;
    let gate = Arc::new(Gate::default());
    gw.router.attach_store(gate.clone()).unwrap();
    let client = gw.client().await;

    // The CONNACK waits for the session's record; a PINGRESP is not held behind it.
    client.send(&support::client::connect("kept", 60, false, false)).await;
    client.send(&Message::PingReq { client_id: None }).await;
    assert_eq!(client.recv().await, Message::PingResp);
    assert_eq!(gate.complete_all(Ok(())), 1, "one commit: the session's record");
    assert_eq!(client.recv().await, Message::ConnAck { return_code: ReturnCode::Accepted });

    // A store that cannot keep it: "rejected: congestion", and the client tries again later.
    let other = gw.client().await;
    other.send(&support::client::connect("kept-too", 60, false, false)).await;
    other.send(&Message::PingReq { client_id: None }).await;
    assert_eq!(other.recv().await, Message::PingResp);
    assert_eq!(gate.complete_all(Err(StoreError::Full)), 1);
    assert_eq!(other.recv().await, Message::ConnAck { return_code: ReturnCode::Congestion });
}
