//! A publish that leaves something in the store is acknowledged only once the store says it is
//! durable, and in order with the publishes after it; a store that cannot keep it gets MQTT
//! 5's refusal. The store here is a gate the test opens, so the order is certain.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::{Raw, config, pid, start};
use rmqtt_codec::types::{Publish as RawPublish, QoS as RawQoS};
use rmqtt_codec::v5 as r5;
use tolk_core::store::{Gate, StoreError};

fn publish(topic: &str, id: u16, retain: bool) -> r5::Packet {
    r5::Packet::Publish(Box::new(RawPublish {
        dup: false,
        retain,
        qos: RawQoS::AtLeastOnce,
        topic: topic.into(),
        packet_id: std::num::NonZeroU16::new(id),
        payload: Bytes::from_static(b"kept"),
        properties: Some(Default::default()),
    }))
}

#[tokio::test]
async fn pubacks_wait_for_the_store_and_keep_their_order() {
    let broker = start(config()).await;
    let gate = Arc::new(Gate::default());
    broker.router.attach_store(gate.clone()).unwrap();
    let (mut raw, _) = Raw::handshake5(broker.port, Raw::connect5("durable")).await;

    // A retained message goes to the store; a plain one after it keeps nothing but must be
    // acknowledged after it. A PINGRESP overtakes both: they are held, not lost.
    raw.send5(publish("kept/a", 1, true)).await;
    raw.send5(publish("plain", 2, false)).await;
    raw.send5(r5::Packet::PingRequest).await;
    assert_eq!(raw.recv5().await, Some(r5::Packet::PingResponse));
    assert_eq!(gate.complete_all(Ok(())), 1, "one commit: the retained message");
    for id in [1, 2] {
        let Some(r5::Packet::PublishAck(ack)) = raw.recv5().await else { panic!("PUBACK {id} expected") };
        assert_eq!(ack.packet_id, pid(id));
    }

    // Nothing pending: a plain publish is acknowledged at once.
    raw.send5(publish("plain", 3, false)).await;
    let Some(r5::Packet::PublishAck(ack)) = raw.recv5().await else { panic!("PUBACK 3 expected") };
    assert_eq!(ack.packet_id, pid(3));

    // A full store: MQTT 5 refuses that one message (0x97) and the connection goes on.
    raw.send5(publish("kept/b", 4, true)).await;
    raw.send5(r5::Packet::PingRequest).await;
    assert_eq!(raw.recv5().await, Some(r5::Packet::PingResponse));
    assert_eq!(gate.complete_all(Err(StoreError::Full)), 1);
    let Some(r5::Packet::PublishAck(ack)) = raw.recv5().await else { panic!("PUBACK 4 expected") };
    assert_eq!((ack.packet_id, ack.reason_code), (pid(4), r5::PublishAckReason::QuotaExceeded));
    raw.send5(r5::Packet::PingRequest).await;
    assert_eq!(raw.recv5().await, Some(r5::Packet::PingResponse));
    broker.stop().await;
}
