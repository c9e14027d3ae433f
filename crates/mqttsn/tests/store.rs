//! A persistent session (clean session off) outlives the gateway with the store on: after a
//! restart on the same store, the client's CONNECT resumes it, what was queued for it and not
//! acknowledged arrives, and its subscription still delivers.

mod support;

use mqttsn_codec::{Message, PublishTopic, QoS, RegAck, ReturnCode, SubscribeTopic};
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
