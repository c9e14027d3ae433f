//! The subscription manager (Renew, Unsubscribe, Pause, Resume, expiry), pull points and
//! GetCurrentMessage, over real HTTP.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use common::*;
use tolk_core::{CloseReason, Message, Origin, Protocol};

fn renew_doc(time: &str) -> String {
    envelope(SOAP11, "", &format!("<wsnt:Renew><wsnt:TerminationTime>{time}</wsnt:TerminationTime></wsnt:Renew>"))
}

fn get_messages_doc(max: Option<u32>) -> String {
    let max = max.map(|n| format!("<wsnt:MaximumNumber>{n}</wsnt:MaximumNumber>")).unwrap_or_default();
    envelope(SOAP11, "", &format!("<wsnt:GetMessages>{max}</wsnt:GetMessages>"))
}

#[tokio::test]
async fn renew_sets_a_new_termination_time_within_the_maximum() {
    let broker = Broker::start(test_config()).await;
    let consumer = Consumer::start().await;
    let sub = broker.subscribe(&consumer.url("r"), "").await;
    let reply = broker.post_to(&sub, renew_doc("PT10M")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains("RenewResponse</wsa:Action>"));
    let current = wsn_xml::parse_date_time(reply.text_of("wsnt:CurrentTime")).unwrap();
    let termination = wsn_xml::parse_date_time(reply.text_of("wsnt:TerminationTime")).unwrap();
    assert!((termination - current - 600_000).abs() < 2_000, "{}", reply.body);
    // Beyond the maximum (24 h by default): granted the maximum.
    let reply = broker.post_to(&sub, renew_doc("P400D")).await;
    let termination = wsn_xml::parse_date_time(reply.text_of("wsnt:TerminationTime")).unwrap();
    assert!((termination - current - 86_400_000).abs() < 2_000, "{}", reply.body);
    // In the past: the Renew fault, with the acceptable range.
    broker.post_to(&sub, renew_doc("2001-01-01T00:00:00Z")).await.assert_fault(500, "UnacceptableTerminationTimeFault");
    broker.post_to(&sub, renew_doc("soon")).await.assert_fault(500, "UnacceptableTerminationTimeFault");
    broker.stop().await;
}

#[tokio::test]
async fn unsubscribe_ends_delivery_and_the_address() {
    let broker = Broker::start(test_config()).await;
    let mut consumer = Consumer::start().await;
    let sub = broker.subscribe(&consumer.url("u"), &topic_filter(SIMPLE, "tns:u")).await;
    let mqtt = broker.mqtt_session();
    broker.publish_mqtt(&mqtt, "u", b"<a/>");
    consumer.next().await;
    let subscriptions_before = broker.router.subscription_count();
    let reply = broker.post_to(&sub, simple_doc("Unsubscribe")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains("<wsnt:UnsubscribeResponse/>"), "{}", reply.body);
    assert_eq!(broker.router.subscription_count(), subscriptions_before - 1, "core subscription removed");
    broker.post_to(&sub, simple_doc("Unsubscribe")).await.assert_fault(500, "ResourceUnknownFault");
    broker.post_to(&sub, renew_doc("PT1M")).await.assert_fault(500, "ResourceUnknownFault");
    let counters = broker.metrics().protocol(Protocol::Wsn);
    assert_eq!(counters.connections_open.load(Relaxed), 0);
    assert_eq!(counters.closed_count(CloseReason::ClientClosed), 1);
    broker.stop().await;
}

#[tokio::test]
async fn paused_subscriptions_get_nothing_until_resumed() {
    let broker = Broker::start(test_config()).await;
    let mut consumer = Consumer::start().await;
    let sub = broker.subscribe(&consumer.url("p"), &topic_filter(SIMPLE, "tns:p")).await;
    let reply = broker.post_to(&sub, simple_doc("PauseSubscription")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains("<wsnt:PauseSubscriptionResponse/>"));
    let mqtt = broker.mqtt_session();
    broker.publish_mqtt(&mqtt, "p", b"<while-paused/>");
    let reply = broker.post_to(&sub, simple_doc("ResumeSubscription")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains("<wsnt:ResumeSubscriptionResponse/>"));
    broker.publish_mqtt(&mqtt, "p", b"<after-resume/>");
    // Delivery is in order, so the first thing to arrive shows whether the paused one was sent.
    let got = consumer.next().await;
    assert!(got.body.contains("<after-resume/>"), "nothing published while paused is sent: {}", got.body);
    broker.stop().await;
}

#[tokio::test]
async fn subscriptions_expire_at_their_termination_time() {
    let broker = Broker::start(test_config()).await;
    let consumer = Consumer::start().await;
    let filter = topic_filter(SIMPLE, "tns:e");
    let reply = broker
        .post(
            "/wsn",
            CT11,
            subscribe_doc(
                SOAP11,
                &consumer.url("e"),
                &filter,
                "<wsnt:InitialTerminationTime>PT0.3S</wsnt:InitialTerminationTime>",
            ),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let sub = reply.text_of("wsa:Address").to_owned();
    assert_eq!(broker.router.subscription_count(), 1);
    let counters = broker.metrics().protocol(Protocol::Wsn);
    eventually("the subscription to expire", || counters.closed_count(CloseReason::KeepAliveTimeout) == 1).await;
    assert_eq!(broker.router.subscription_count(), 0);
    assert_eq!(counters.connections_open.load(Relaxed), 0);
    broker.post_to(&sub, renew_doc("PT1M")).await.assert_fault(500, "ResourceUnknownFault");
    broker.stop().await;
}

#[tokio::test]
async fn pull_points_buffer_notifications_for_get_messages() {
    let broker = Broker::start(test_config()).await;
    let pull_point = broker.create_pull_point().await;
    assert!(pull_point.starts_with(&broker.url("/wsn/pullpoints/")), "{pull_point}");
    let sub = broker.subscribe(&pull_point, &topic_filter(FULL, "tns:meter//.")).await;
    assert_eq!(broker.metrics().protocol(Protocol::Wsn).connections_open.load(Relaxed), 2);

    let reply = broker.post_to(&pull_point, get_messages_doc(None)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(!reply.body.contains("NotificationMessage"), "empty at first: {}", reply.body);

    let mqtt = broker.mqtt_session();
    for i in 0..3 {
        broker.publish_mqtt(&mqtt, &format!("meter/m{i}"), format!("<kwh>{i}</kwh>").as_bytes());
    }
    let reply = broker.post_to(&pull_point, get_messages_doc(Some(2))).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body.matches("<wsnt:NotificationMessage>").count(), 2, "{}", reply.body);
    assert!(reply.body.contains("<kwh>0</kwh>") && reply.body.contains("<kwh>1</kwh>"));
    assert!(
        reply.body.contains(&format!("<wsa:Address>{sub}</wsa:Address>")),
        "subscription reference: {}",
        reply.body
    );
    assert!(reply.body.contains(">tns:meter/m0</wsnt:Topic>"), "{}", reply.body);
    // Levels that are not XML names are escaped as in .NET XmlConvert.
    broker.publish_mqtt(&mqtt, "meter/1", b"<n/>");
    let reply = broker.post_to(&pull_point, get_messages_doc(Some(10))).await;
    assert_eq!(reply.body.matches("<wsnt:NotificationMessage>").count(), 2, "{}", reply.body);
    assert!(reply.body.contains("<kwh>2</kwh>"));
    assert!(reply.body.contains(">tns:meter/_x0031_</wsnt:Topic>"), "{}", reply.body);

    // Bounded: the pull point holds 8 (test config); the rest are dropped and counted as
    // queue_full by the pull point. The outbox in front of it (twice its size) queues a burst
    // up to twice that again before it drops (outbox_full), so this one passes it whole.
    for i in 0..20 {
        broker.publish_mqtt(&mqtt, "meter/x", format!("<n>{i}</n>").as_bytes());
    }
    let reply = broker.post_to(&pull_point, get_messages_doc(None)).await;
    assert_eq!(reply.body.matches("<wsnt:NotificationMessage>").count(), 8, "{}", reply.body);
    let counters = broker.metrics().protocol(Protocol::Wsn);
    let full = counters.dropped_count(tolk_core::DropReason::QueueFull);
    assert_eq!((full, counters.dropped_count(tolk_core::DropReason::OutboxFull)), (12, 0));

    // A Notify sent to the pull point itself is stored, not published.
    let direct = notify_doc(SOAP11, &[("tns:direct", "<d/>")]);
    assert_eq!(broker.post_to(&pull_point, direct).await.status, 202);
    let reply = broker.post_to(&pull_point, get_messages_doc(None)).await;
    assert!(reply.body.contains("<d/>") && reply.body.contains(">direct</wsnt:Topic>"), "{}", reply.body);

    let reply = broker.post_to(&pull_point, simple_doc("DestroyPullPoint")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains("<wsnt:DestroyPullPointResponse/>"));
    broker.post_to(&pull_point, get_messages_doc(None)).await.assert_fault(500, "ResourceUnknownFault");
    broker.post_to(&sub, simple_doc("Unsubscribe")).await.assert_fault(500, "ResourceUnknownFault");
    assert_eq!(broker.router.subscription_count(), 0, "the pull point's subscriptions went with it");
    assert_eq!(broker.metrics().protocol(Protocol::Wsn).connections_open.load(Relaxed), 0);
    broker.stop().await;
}

#[tokio::test]
async fn pull_point_subscriptions_pause_and_resume() {
    let broker = Broker::start(test_config()).await;
    let pull_point = broker.create_pull_point().await;
    let sub = broker.subscribe(&pull_point, &topic_filter(SIMPLE, "tns:pp")).await;
    assert_eq!(broker.post_to(&sub, simple_doc("PauseSubscription")).await.status, 200);
    let mqtt = broker.mqtt_session();
    broker.publish_mqtt(&mqtt, "pp", b"<paused/>");
    assert_eq!(broker.post_to(&sub, simple_doc("ResumeSubscription")).await.status, 200);
    broker.publish_mqtt(&mqtt, "pp", b"<resumed/>");
    let reply = broker.post_to(&pull_point, get_messages_doc(None)).await;
    assert!(!reply.body.contains("<paused/>") && reply.body.contains("<resumed/>"), "{}", reply.body);
    broker.stop().await;
}

#[tokio::test]
async fn idle_pull_points_are_destroyed() {
    let mut config = test_config();
    config.pull_point.idle_timeout = std::time::Duration::from_millis(200);
    let broker = Broker::start(config).await;
    let pull_point = broker.create_pull_point().await;
    let counters = broker.metrics().protocol(Protocol::Wsn);
    eventually("the idle pull point to go", || counters.connections_open.load(Relaxed) == 0).await;
    broker.post_to(&pull_point, get_messages_doc(None)).await.assert_fault(500, "ResourceUnknownFault");
    broker.stop().await;
}

#[tokio::test]
async fn get_current_message_answers_from_the_retained_store() {
    let broker = Broker::start(test_config()).await;
    let doc = |topic: &str| get_current_message_doc(SOAP12, CONCRETE, topic);
    broker.post("/wsn", CT12, doc("tns:status/door")).await.assert_fault(500, "NoCurrentMessageOnTopicFault");
    let mqtt = broker.mqtt_session();
    let origin = Origin { protocol: Protocol::Mqtt, session: mqtt.id(), client_id: "m".into() };
    let mut retained = Message::new("status/door", &b"open"[..], origin);
    retained.retain = true;
    mqtt.publish(Arc::new(retained));
    let reply = broker.post("/wsn", CT12, doc("tns:status/door")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains(r#"encoding="text">open</tolk:Payload>"#), "{}", reply.body);
    let union = get_current_message_doc(SOAP12, FULL, "tns:a | tns:b");
    broker.post("/wsn", CT12, union).await.assert_fault(500, "MultipleTopicsSpecifiedFault");
    broker.stop().await;
}

#[tokio::test]
async fn retain_notify_makes_wsn_messages_current() {
    let mut config = test_config();
    config.retain_notify = true;
    let broker = Broker::start(config).await;
    assert_eq!(broker.post("/wsn", CT11, notify_doc(SOAP11, &[("tns:last", "<v>9</v>")])).await.status, 202);
    let doc = get_current_message_doc(SOAP11, SIMPLE, "tns:last");
    let reply = broker.post("/wsn", CT11, doc).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains("<v>9</v>"), "{}", reply.body);
    broker.stop().await;
}
