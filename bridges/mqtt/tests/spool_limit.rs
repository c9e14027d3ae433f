//! The spool of a bridge whose remote is down is bounded in bytes: at-least-once publishers
//! are refused beyond `spool_max_bytes` (counted as `queue_full`), at-most-once messages are not
//! kept at all (counted as `remote_down`), and nothing else is hurt.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use tolk_bridge::testing::TestBroker;
use tolk_bridge::{BridgeConfig, Bridges, Kind};
use tolk_core::frontend::FrontEnd;
use tolk_core::{DropReason, Message, Origin, Protocol, QoS};
use tolk_mqtt::{MqttConfig, MqttFrontEnd};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_spool_refuses_at_least_once_publishers_and_keeps_no_qos0() {
    let config = MqttConfig { bind: SocketAddr::from(([127, 0, 0, 1], 0)), ..MqttConfig::default() };
    let broker = TestBroker::start("gw", Box::new(MqttFrontEnd::new(config))).await;
    // A remote that is never there: a port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut bridge = BridgeConfig::new("away", Kind::Mqtt, &format!("mqtt://127.0.0.1:{closed}"), &["up/# out 1"]);
    bridge.spool_max_bytes = 16 * 1024;
    Box::new(Bridges::new(vec![bridge], vec![tolk_bridge_mqtt::runner()])).start(broker.ctx.clone()).await.unwrap();

    let publisher = broker.publisher();
    let local = broker.subscriber("up/#");
    let send = |qos: QoS| {
        let origin = Origin { protocol: Protocol::Mqtt, session: publisher.id(), client_id: "p".into() };
        let mut message = Message::new("up/reading", Bytes::from(vec![7u8; 1024]), origin);
        message.qos = qos;
        publisher.publish(Arc::new(message))
    };
    let mut kept = 0;
    while send(QoS::AtLeastOnce).refused == 0 {
        kept += 1;
        assert!(kept < 100, "a 16 KiB spool holds fewer than 100 messages of 1 KiB");
    }
    assert!(kept > 0, "the spool took some before it was full");
    assert_eq!(send(QoS::AtMostOnce).refused, 0, "QoS 0 is not refused, only not kept");
    let metrics = broker.ctx.router.metrics().protocol(Protocol::Mqtt);
    assert_eq!(metrics.dropped_count(DropReason::QueueFull), 1);
    assert_eq!(metrics.dropped_count(DropReason::RemoteDown), 1);
    let status = &broker.ctx.router.metrics().bridges().statuses()[0];
    assert_eq!((status.state, status.spool_messages), ("down", kept));
    assert!(status.spool_bytes <= 16 * 1024);
    // Local subscribers got every message, the refused one included: only the spool said no.
    let mut got = Vec::new();
    local.receiver().try_drain(&mut got, usize::MAX).unwrap();
    assert_eq!(got.len() as u64, kept + 2);
    broker.stop().await;
}
