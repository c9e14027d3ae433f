//! Notify into the core, push delivery to a real consumer endpoint (wrapped and UseRaw),
//! retries, dropping an unreachable consumer, and WS-N ↔ MQTT-style traffic through the core.

mod common;

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use common::*;
use tolk_core::{Protocol, SubscriptionOptions};
use wsn_xml::{Limits, PayloadForm, XmlElement};

#[tokio::test]
async fn notify_publishes_every_message_into_the_core_in_both_soap_versions() {
    let broker = Broker::start(test_config()).await;
    let mqtt = broker.mqtt_session();
    mqtt.subscribe("sensors/#", 0, SubscriptionOptions::default()).unwrap();
    let doc = notify_doc(
        SOAP11,
        &[("tns:sensors/t1", r#"<m:r xmlns:m="urn:m">1</m:r>"#), ("tns:sensors/t2", r#"<m:r xmlns:m="urn:m">2</m:r>"#)],
    );
    let reply = broker.post("/wsn", CT11, doc).await;
    assert_eq!(reply.status, 202, "{}", reply.body);
    assert!(reply.body.is_empty());
    let doc = notify_doc(SOAP12, &[("tns:sensors/t3", "<plain>3</plain>")]);
    let reply = broker.post("/wsn", CT12, doc).await;
    assert_eq!(reply.status, 202, "{}", reply.body);

    let mut got = Vec::new();
    eventually("three deliveries", || {
        let _ = mqtt.receiver().try_drain(&mut got, 10);
        got.len() == 3
    })
    .await;
    let topics: Vec<&str> = got.iter().map(|d| &*d.message.topic).collect();
    assert_eq!(topics, ["sensors/t1", "sensors/t2", "sensors/t3"]);
    assert_eq!(&got[0].message.payload[..], br#"<m:r xmlns:m="urn:m">1</m:r>"#);
    assert_eq!(&got[2].message.payload[..], b"<plain>3</plain>");
    assert_eq!(got[0].message.props.content_type.as_deref(), Some("application/xml"));
    assert_eq!(got[0].message.origin.protocol, Protocol::Wsn);
    assert_eq!(broker.metrics().protocol(Protocol::Wsn).messages_in.load(Relaxed), 3);
    broker.stop().await;
}

#[tokio::test]
async fn push_consumer_gets_notify_from_an_mqtt_publisher() {
    let broker = Broker::start(test_config()).await;
    let mut consumer = Consumer::start().await;
    let reply = broker
        .post("/wsn", CT12, subscribe_doc(SOAP12, &consumer.url("a"), &topic_filter(FULL, "tns:room/*"), ""))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.content_type.starts_with("application/soap+xml"));
    assert!(reply.body.contains("<wsa:RelatesTo>urn:uuid:test-1</wsa:RelatesTo>"), "{}", reply.body);
    assert!(reply.body.contains("SubscribeResponse</wsa:Action>"), "{}", reply.body);
    let subscription = reply.text_of("wsa:Address").to_owned();
    assert!(subscription.starts_with(&broker.url("/wsn/subscriptions/")), "{subscription}");
    assert!(reply.body.contains("<wsnt:TerminationTime>"), "{}", reply.body);
    assert_eq!(broker.metrics().protocol(Protocol::Wsn).connections_open.load(Relaxed), 1);

    let mqtt = broker.mqtt_session();
    broker.publish_mqtt(&mqtt, "room/kitchen", br#"<t xmlns="urn:t">21.5</t>"#);
    broker.publish_mqtt(&mqtt, "hall/ignored", b"x");
    let got = consumer.next().await;
    assert_eq!(
        got.headers["content-type"].to_str().unwrap(),
        "application/soap+xml; charset=utf-8; action=\"http://docs.oasis-open.org/wsn/bw-2/NotificationConsumer/Notify\""
    );
    let body = &got.body;
    assert!(body.contains("http://www.w3.org/2003/05/soap-envelope"), "reply in the subscriber's SOAP version: {body}");
    assert!(body.contains("<wsa:Action>http://docs.oasis-open.org/wsn/bw-2/NotificationConsumer/Notify</wsa:Action>"));
    assert_eq!(text_between(body, "wsa:To"), Some(consumer.url("a").as_str()));
    assert!(body.contains(&format!("<wsa:Address>{subscription}</wsa:Address>")), "{body}");
    let topic = text_between(body, "wsnt:Topic").unwrap();
    assert_eq!(topic, "tns:room/kitchen", "{body}");
    assert!(body.contains(r#"xmlns:tns="urn:test:topics""#), "topic in the subscriber's namespace: {body}");
    assert_eq!(text_between(body, "wsnt:Message"), Some(r#"<t xmlns="urn:t">21.5</t>"#));
    let counters = broker.metrics().protocol(Protocol::Wsn);
    eventually("messages_out counted", || counters.messages_out.load(Relaxed) == 1).await;
    assert!(consumer.try_next().is_none(), "hall/ignored does not match room/*");
    broker.stop().await;
}

#[tokio::test]
async fn use_raw_sends_the_bare_message_and_binary_payloads_survive_both_ways() {
    let broker = Broker::start(test_config()).await;
    let mut consumer = Consumer::start().await;
    let raw = "<wsnt:SubscriptionPolicy><wsnt:UseRaw/></wsnt:SubscriptionPolicy>";
    let reply = broker
        .post("/wsn", CT11, subscribe_doc(SOAP11, &consumer.url("raw"), &topic_filter(SIMPLE, "tns:bin"), raw))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);

    let binary: Vec<u8> = (0u8..=255).chain([0, 0xff, b'<', b'&']).collect();
    let mqtt = broker.mqtt_session();
    broker.publish_mqtt(&mqtt, "bin", &binary);
    let got = consumer.next().await;
    assert_eq!(got.headers["soapaction"], "\"http://docs.oasis-open.org/wsn/bw-2/NotificationConsumer/Notify\"");
    assert!(!got.body.contains("Notify>"), "raw: no Notify wrapper: {}", got.body);
    let element = text_between(&got.body, "s:Body")
        .or_else(|| text_between(&got.body, "soap:Body"))
        .unwrap_or_else(|| panic!("{}", got.body));
    let element = XmlElement::parse(element.as_bytes(), &Limits::default()).unwrap();
    let payload = element.to_payload(&Limits::default());
    assert_eq!(payload.form, PayloadForm::Base64);
    assert_eq!(&payload.bytes[..], &binary[..], "binary payload MQTT → WS-N intact");

    // And back: the wrapped element Notified by a WS-N publisher reaches an MQTT subscriber
    // as the original bytes.
    mqtt.subscribe("back", 0, SubscriptionOptions::default()).unwrap();
    let doc = notify_doc(SOAP11, &[("back", element.as_str())]);
    assert_eq!(broker.post("/wsn", CT11, doc).await.status, 202);
    let mut got = Vec::new();
    eventually("the binary payload back", || {
        let _ = mqtt.receiver().try_drain(&mut got, 10);
        !got.is_empty()
    })
    .await;
    assert_eq!(&got[0].message.payload[..], &binary[..], "binary payload WS-N → MQTT intact");
    assert_eq!(got[0].message.props.content_type, None);
    broker.stop().await;
}

#[tokio::test]
async fn wsn_to_wsn_through_the_core_with_text_payloads_wrapped() {
    let broker = Broker::start(test_config()).await;
    let mut consumer = Consumer::start().await;
    broker.subscribe(&consumer.url("w"), &topic_filter(CONCRETE, "tns:a/b")).await;
    let json = r#"<tolk:Payload xmlns:tolk="urn:tolk:wsn:1" encoding="text" contentType="application/json">{"t":1}</tolk:Payload>"#;
    assert_eq!(broker.post("/wsn", CT11, notify_doc(SOAP11, &[("tns:a/b", json)])).await.status, 202);
    let got = consumer.next().await;
    let message = text_between(&got.body, "wsnt:Message").unwrap();
    let element = XmlElement::parse(message.as_bytes(), &Limits::default()).unwrap();
    let payload = element.to_payload(&Limits::default());
    assert_eq!(&payload.bytes[..], br#"{"t":1}"#);
    assert_eq!(payload.content_type.as_deref(), Some("application/json"));
    broker.stop().await;
}

#[tokio::test]
async fn failed_deliveries_are_retried_until_the_consumer_recovers() {
    let broker = Broker::start(test_config()).await;
    let mut consumer = Consumer::start().await;
    broker.subscribe(&consumer.url("flaky"), &topic_filter(SIMPLE, "tns:retry")).await;
    consumer.fail_next(&[500, 503]);
    let mqtt = broker.mqtt_session();
    broker.publish_mqtt(&mqtt, "retry", b"<one/>");
    broker.publish_mqtt(&mqtt, "retry", b"<two/>");
    let attempts = [consumer.next().await, consumer.next().await, consumer.next().await, consumer.next().await];
    let statuses: Vec<u16> = attempts.iter().map(|r| r.answered).collect();
    assert_eq!(statuses, [500, 503, 200, 200]);
    for attempt in &attempts[..3] {
        assert!(attempt.body.contains("<one/>"), "the same message is retried: {}", attempt.body);
    }
    assert!(attempts[3].body.contains("<two/>"), "order kept after recovery");
    broker.stop().await;
}

#[tokio::test]
async fn an_unreachable_consumer_is_dropped_and_other_consumers_carry_on() {
    let broker = Broker::start(test_config()).await;
    // A port with nothing listening: bind, note the port, close.
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let dead_sub = broker.subscribe(&format!("http://{dead}/gone"), &topic_filter(SIMPLE, "tns:x")).await;
    let mut consumer = Consumer::start().await;
    broker.subscribe(&consumer.url("alive"), &topic_filter(SIMPLE, "tns:x")).await;
    let counters = broker.metrics().protocol(Protocol::Wsn);
    assert_eq!(counters.connections_open.load(Relaxed), 2);

    let mqtt = broker.mqtt_session();
    broker.publish_mqtt(&mqtt, "x", b"<v>1</v>");
    assert!(consumer.next().await.body.contains("<v>1</v>"), "the live consumer is not held up");
    eventually("the unreachable consumer to be dropped", || counters.connections_open.load(Relaxed) == 1).await;
    assert_eq!(counters.closed_count(tolk_core::CloseReason::IoError), 1);
    assert_eq!(
        counters.dropped_count(tolk_core::DropReason::ConsumerUnreachable),
        1,
        "the undelivered message is counted"
    );
    let reply = broker.post_to(&dead_sub, simple_doc("Unsubscribe")).await;
    reply.assert_fault(500, "ResourceUnknownFault");
    broker.publish_mqtt(&mqtt, "x", b"<v>2</v>");
    assert!(consumer.next().await.body.contains("<v>2</v>"));
    broker.stop().await;
}

#[tokio::test]
async fn batches_carry_several_notification_messages_when_configured() {
    let mut config = test_config();
    config.push.max_messages_per_notify = 10;
    let broker = Broker::start(config).await;
    let mut consumer = Consumer::start().await;
    broker.subscribe(&consumer.url("batch"), "").await;
    // Hold the first delivery back with failures so that the rest queue up behind it.
    consumer.fail_next(&[500]);
    let mqtt = broker.mqtt_session();
    for i in 0..5 {
        broker.publish_mqtt(&mqtt, "any/topic", format!("<n>{i}</n>").as_bytes());
    }
    let mut seen = Vec::new();
    while seen.len() < 5 {
        let got = consumer.next_accepted().await;
        let count = got.body.matches("<wsnt:NotificationMessage>").count();
        assert!(count >= 1);
        for i in 0..5 {
            if got.body.contains(&format!("<n>{i}</n>")) {
                seen.push(i);
            }
        }
    }
    assert_eq!(seen, [0, 1, 2, 3, 4]);
    broker.stop().await;
}

#[tokio::test]
async fn a_burst_of_100_notifications_from_a_wsn_publisher_reaches_a_push_consumer() {
    let broker = Broker::start(test_config()).await;
    let mut consumer = Consumer::start().await;
    broker.subscribe(&consumer.url("burst"), &topic_filter(SIMPLE, "tns:burst")).await;
    let publisher = common::Http::new();
    let url = broker.url("/wsn");
    let started = std::time::Instant::now();
    for i in 0..100 {
        let doc = notify_doc(SOAP11, &[("tns:burst", &format!("<n>{i}</n>"))]);
        assert_eq!(publisher.post(&url, CT11, doc.into()).await.status, 202);
    }
    for i in 0..100 {
        let got = consumer.next().await;
        assert!(got.body.contains(&format!("<n>{i}</n>")), "in order");
    }
    let elapsed = started.elapsed();
    eprintln!("WSN→WSN burst of 100 notifications (debug build, in-process): {elapsed:?}");
    assert!(elapsed < Duration::from_secs(10));
    broker.stop().await;
}
