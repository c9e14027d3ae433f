//! A persistent session (clean session off) outlives the gateway with the store on: after a
//! restart on the same store, the client's CONNECT resumes it, what was queued for it and not
//! acknowledged arrives, and its subscription still delivers.

mod support;

use bytes::Bytes;
use mqttsn_codec::{Message, PublishTopic, QoS, RegAck, ReturnCode, SubscribeTopic, WillTopic};
use tolk_core::QoS as CoreQoS;
use tolk_store::{FjallStore, StorageConfig};

#[tokio::test]
async fn a_persistent_session_and_its_queued_messages_survive_a_restart() {
    let store_dir = tempfile::tempdir().unwrap();
    let open = || FjallStore::open(store_dir.path(), &StorageConfig::default()).unwrap();

    let store = open();
    let gw = support::start_with_store(tempfile::tempdir().unwrap(), support::config(), store.clone()).await;
    let peer = gw.mqtt_peer();
    let mut client = gw.client().await;
    assert_eq!(client.connect("kept-sn", 60, false).await, ReturnCode::Accepted);
    let id = client.subscribe(SubscribeTopic::Name("alerts".into()), QoS::One).await.topic_id;
    client.disconnect(None).await;
    gw.eventually("no open connection", |gw| gw.connections_open() == 0).await;
    peer.publish("alerts", b"kept", CoreQoS::AtLeastOnce, false);
    let dir = gw.stop().await;
    // Everything holding the router (and so the store) goes, as at a process exit.
    drop((peer, client));
    store.close();
    drop(store);

    let gw = support::start_with_store(dir, support::config(), open()).await;
    let peer = gw.mqtt_peer();
    let again = gw.client().await;
    assert_eq!(again.connect("kept-sn", 60, false).await, ReturnCode::Accepted);
    // From a new address, what was kept waits until the client speaks again (see sleep.rs).
    // Which ids the client had learnt is not kept, so the topic is REGISTERed first (§6.10).
    again.send(&Message::PingReq { client_id: None }).await;
    let (mut publish, mut pinged) = (None, false);
    while publish.is_none() || !pinged {
        match again.recv().await {
            Message::Register(r) => {
                let ack = RegAck { topic_id: r.topic_id, msg_id: r.msg_id, return_code: ReturnCode::Accepted };
                again.send(&Message::RegAck(ack)).await;
            }
            Message::PingResp => pinged = true,
            Message::Publish(p) => publish = Some(p),
            other => panic!("unexpected {other:?}"),
        }
    }
    let publish = publish.unwrap();
    again.ack(&publish).await;
    assert_eq!((publish.topic, &publish.data[..]), (PublishTopic::Normal(id), &b"kept"[..]));
    // The subscription came back with it.
    peer.publish("alerts", b"live", CoreQoS::AtLeastOnce, false);
    assert_eq!(&again.recv_publish_and_ack().await.data[..], b"live");
    gw.stop().await;
}

#[tokio::test]
async fn the_will_of_a_session_connected_when_the_gateway_went_is_published_at_restart() {
    let store_dir = tempfile::tempdir().unwrap();
    let open = || FjallStore::open(store_dir.path(), &StorageConfig::default()).unwrap();

    // The first gateway runs on a runtime of its own, dropped with the client still connected:
    // its tasks stop where they are, as at a kill -9, and nothing is written on the way out.
    let store = open();
    let first = store.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let gw = support::start_with_store(tempfile::tempdir().unwrap(), support::config(), first).await;
            let client = gw.client().await;
            client.send(&support::client::connect("sensor-7", 60, false, true)).await;
            assert_eq!(client.recv().await, Message::WillTopicReq);
            let will = WillTopic { qos: QoS::One, retain: true, topic: "status/sensor-7".into() };
            client.send(&Message::WillTopic(Some(will))).await;
            assert_eq!(client.recv().await, Message::WillMsgReq);
            client.send(&Message::WillMsg { will_msg: Bytes::from_static(b"offline") }).await;
            // The CONNACK follows the record, will included, onto the disk.
            assert_eq!(client.recv().await, Message::ConnAck { return_code: ReturnCode::Accepted });
            assert!(gw.router.retained("status/#").is_empty(), "no will while connected");
            drop((client, gw));
        });
    })
    .join()
    .unwrap();
    store.close();
    drop(store);

    let gw = support::start_with_store(tempfile::tempdir().unwrap(), support::config(), open()).await;
    // The endpoint restores its sessions as it starts running.
    gw.eventually("the will", |gw| !gw.router.retained("status/#").is_empty()).await;
    let retained = gw.router.retained("status/#");
    assert_eq!(retained.len(), 1, "the will, published (retained) at restart");
    assert_eq!((&*retained[0].topic, &retained[0].payload[..]), ("status/sensor-7", &b"offline"[..]));
    gw.stop().await;
}
