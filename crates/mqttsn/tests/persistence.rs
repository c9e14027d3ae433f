//! The topic-id registry survives a gateway restart: a client that publishes with an id it
//! registered before the restart is not refused and reaches the same topic.

mod support;

use mqttsn_codec::{PublishTopic, QoS, ReturnCode, SubscribeTopic};
use tolk_core::QoS as CoreQoS;
use tolk_mqttsn::REGISTRY_FILE;

#[tokio::test]
async fn registered_ids_survive_a_restart() {
    let gw = support::start(support::config()).await;
    let mut client = gw.client().await;
    assert_eq!(client.connect("keeper", 60, true).await, ReturnCode::Accepted);
    let first = client.register_ok("plant/boiler/temp").await;
    let second = client.register_ok("plant/boiler/pressure").await;
    let dir = gw.stop().await;
    let file = std::fs::read_to_string(dir.path().join(REGISTRY_FILE)).unwrap();
    assert!(file.contains("plant/boiler/pressure"), "{file}");

    let gw = support::start_in(dir, support::config()).await;
    let peer = gw.mqtt_peer();
    peer.subscribe("plant/#");
    // The same client after the restart, publishing straight away with its old ids.
    let mut client = gw.client().await;
    assert_eq!(client.connect("keeper", 60, true).await, ReturnCode::Accepted);
    let puback = client.publish(PublishTopic::Normal(second), QoS::One, b"3 bar").await.unwrap();
    assert_eq!(puback.return_code, ReturnCode::Accepted);
    let delivery = peer.next().await;
    assert_eq!((&*delivery.message.topic, &delivery.message.payload[..]), ("plant/boiler/pressure", &b"3 bar"[..]));
    // Ids are global: another client may use them too, and new names get new ids.
    let mut other = gw.client().await;
    assert_eq!(other.connect("other", 60, true).await, ReturnCode::Accepted);
    other.publish(PublishTopic::Normal(first), QoS::Zero, b"80").await;
    assert_eq!(peer.next().await.message.topic, "plant/boiler/temp");
    let third = other.register_ok("plant/boiler/flow").await;
    assert!(third > second);
    assert_eq!(other.subscribe(SubscribeTopic::Name("plant/boiler/temp".into()), QoS::Zero).await.topic_id, first);
    peer.publish("plant/boiler/temp", b"81", CoreQoS::AtMostOnce, false);
    assert_eq!(other.recv_publish().await.topic, PublishTopic::Normal(first));
    gw.stop().await;
}

#[tokio::test]
async fn a_damaged_registry_stops_the_start_instead_of_reassigning_ids() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(REGISTRY_FILE), b"{ not json").unwrap();
    let err = support::start_error(dir.path(), support::config()).await;
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    assert!(err.to_string().contains(REGISTRY_FILE), "{err}");
}
