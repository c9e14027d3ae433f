//! `[[transcode]]` rules as subscribers see them: converted once per message and rule, only
//! for the protocols and topics a rule names, and never at the cost of the message.

use std::sync::Arc;

use tolk_core::transcode::{ContentTypeRule, TranscodeRule, Transcoder, wsn_json_as_xml};
use tolk_core::{Delivery, Encoding, Hop, Message, Metrics, Origin, Protocol, QoS, Router, RouterConfig, Session};

const W3C: &str = r#"<map xmlns="http://www.w3.org/2005/xpath-functions"><number key="t">21.5</number></map>"#;

fn rule(topics: &str, to: &str, protocols: &[&str]) -> TranscodeRule {
    TranscodeRule {
        topics: topics.into(),
        to: to.into(),
        from: Vec::new(),
        protocols: protocols.iter().map(|p| (*p).to_owned()).collect(),
        proto: None,
    }
}

fn router(rules: &[TranscodeRule], declared: &[ContentTypeRule]) -> (Router, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let router = Router::new(RouterConfig::default(), metrics.clone());
    router.set_transcoder(Transcoder::new(rules, declared, metrics.clone()).unwrap());
    (router, metrics)
}

fn publish(session: &Session, topic: &str, payload: &str, content_type: Option<&str>) -> Arc<Message> {
    let origin = Origin { protocol: Protocol::Mqtt, session: session.id(), client_id: "pub".into() };
    let mut m = Message::new(topic, payload.to_owned(), origin);
    m.qos = QoS::AtLeastOnce;
    m.props.content_type = content_type.map(str::to_owned);
    let m = Arc::new(m);
    session.publish(m.clone());
    m
}

fn drain(session: &Session) -> Vec<Delivery> {
    let mut out = Vec::new();
    session.receiver().try_drain(&mut out, usize::MAX).unwrap();
    out
}

fn only(session: &Session) -> Arc<Message> {
    let mut got = drain(session);
    assert_eq!(got.len(), 1);
    got.pop().unwrap().message
}

#[test]
fn json_reaches_wsn_subscribers_as_one_w3c_map_and_others_as_published() {
    let (r, metrics) = router(&[wsn_json_as_xml()], &[]);
    let publisher = r.open_session(Protocol::Mqtt);
    let (a, b, mqtt) = (r.open_session(Protocol::Wsn), r.open_session(Protocol::Wsn), r.open_session(Protocol::Mqtt));
    for s in [&a, &b, &mqtt] {
        s.subscribe("s/#", 0, Default::default()).unwrap();
    }
    let sent = publish(&publisher, "s/1", r#"{"t":21.5}"#, Some("application/json"));
    let (got_a, got_b) = (only(&a), only(&b));
    assert_eq!(&got_a.payload[..], W3C.as_bytes());
    assert_eq!(got_a.props.content_type.as_deref(), Some("application/xml"));
    assert!(Arc::ptr_eq(&got_a, &got_b), "converted once, shared by both subscribers");
    assert!(Arc::ptr_eq(&only(&mqtt), &sent), "MQTT subscribers get the message as published");
    assert_eq!(metrics.transcode_counts(Encoding::Xml), (1, 0));
    assert_eq!(metrics.latency(Hop::Transcode, Protocol::Mqtt, Protocol::Wsn).snapshot().count, 1);
}

#[test]
fn a_payload_that_does_not_convert_goes_as_published_and_is_counted_once() {
    let (r, metrics) = router(&[rule("#", "application/cbor", &[])], &[]);
    let publisher = r.open_session(Protocol::Mqtt);
    let (a, b) = (r.open_session(Protocol::Stomp), r.open_session(Protocol::Amqp));
    for s in [&a, &b] {
        s.subscribe("#", 0, Default::default()).unwrap();
    }
    let sent = publish(&publisher, "x", r#"{"t": 21.5, "unit": "#, Some("application/json"));
    assert!(Arc::ptr_eq(&only(&a), &sent));
    assert!(Arc::ptr_eq(&only(&b), &sent));
    assert_eq!(metrics.transcode_counts(Encoding::Cbor), (0, 1));
}

#[test]
fn unknown_content_types_and_other_topics_are_left_alone() {
    let (r, metrics) = router(&[rule("sensors/#", "application/cbor", &["stomp"])], &[]);
    let publisher = r.open_session(Protocol::Mqtt);
    let s = r.open_session(Protocol::Stomp);
    s.subscribe("#", 0, Default::default()).unwrap();
    let text = publish(&publisher, "sensors/a", "21.5", Some("text/plain"));
    let untyped = publish(&publisher, "sensors/b", "{}", None);
    let elsewhere = publish(&publisher, "other", "{}", Some("application/json"));
    let got = drain(&s);
    for (delivery, sent) in got.iter().zip([&text, &untyped, &elsewhere]) {
        assert!(Arc::ptr_eq(&delivery.message, sent));
    }
    assert_eq!(metrics.transcode_counts(Encoding::Cbor), (0, 0));
}

#[test]
fn declared_content_types_stand_in_for_publishers_that_cannot_say() {
    let declared = [ContentTypeRule { topics: "sensors/#".into(), content_type: "application/json".into() }];
    let (r, _) = router(&[rule("#", "application/cbor", &["mqttsn"])], &declared);
    let publisher = r.open_session(Protocol::Mqtt);
    let s = r.open_session(Protocol::MqttSn);
    s.subscribe("#", 0, Default::default()).unwrap();
    publish(&publisher, "sensors/a", r#"{"t":1}"#, None);
    let got = only(&s);
    // {"t": 1} in CBOR: a map of one pair, text "t", unsigned 1.
    assert_eq!(&got.payload[..], &[0xa1, 0x61, b't', 0x01]);
    assert_eq!(got.props.content_type.as_deref(), Some("application/cbor"));
    assert_eq!(got.props.payload_utf8, None);
}

#[test]
fn retained_messages_are_converted_for_a_new_subscriber() {
    let (r, _) = router(&[rule("#", "application/xml", &["wsn"])], &[]);
    let publisher = r.open_session(Protocol::Mqtt);
    let origin = Origin { protocol: Protocol::Mqtt, session: publisher.id(), client_id: "pub".into() };
    let mut m = Message::new("s/1", r#"{"t":21.5}"#, origin);
    m.retain = true;
    m.props.content_type = Some("application/json".into());
    publisher.publish(Arc::new(m));
    let s = r.open_session(Protocol::Wsn);
    let retained = s.retained("s/#");
    assert_eq!(&retained[0].payload[..], W3C.as_bytes());
    assert_eq!(&r.transcode(r.retained("s/1")[0].clone(), Protocol::Wsn).payload[..], W3C.as_bytes());
}

#[test]
fn rules_that_cannot_work_are_refused_with_the_reason() {
    let metrics = Arc::new(Metrics::new());
    let refused = |rules: &[TranscodeRule]| Transcoder::new(rules, &[], metrics.clone()).err().unwrap().to_string();
    assert!(refused(&[rule("#", "text/plain", &[])]).contains("transcode[0]: content type \"text/plain\""));
    assert!(refused(&[rule("#", "application/json", &["xmpp"])]).contains("protocol \"xmpp\""));
    assert!(refused(&[rule("a/#/b", "application/json", &[])]).contains("topics \"a/#/b\""));
    assert!(refused(&[rule("#", "application/x-protobuf", &[])]).contains("needs `proto"));
}

#[test]
fn a_payload_over_the_conversion_limit_goes_as_published_and_is_counted() {
    let (r, metrics) = router(&[rule("#", "application/cbor", &[])], &[]);
    let publisher = r.open_session(Protocol::Mqtt);
    let s = r.open_session(Protocol::Stomp);
    s.subscribe("#", 0, Default::default()).unwrap();
    // Valid JSON of 300 KiB: over the 256 KiB the broker converts.
    let big = format!("[\"{}\"]", "x".repeat(300 * 1024));
    let sent = publish(&publisher, "big", &big, Some("application/json"));
    assert!(Arc::ptr_eq(&only(&s), &sent));
    assert_eq!(metrics.transcode_counts(Encoding::Cbor), (0, 1));
}
