//! Write → parse identity for every request (as a client or bridge writes it), the outgoing
//! Notify and raw notification, and the structure of every response in both SOAP versions.

mod common;

use common::tree;
use proptest::prelude::*;
use wsn_xml::ns::{SOAP11_ENV, SOAP12_ENV, WSA, WSA_2004, WSN_BR, WSNT, XSI};
use wsn_xml::{
    AddressingVersion, Dialect, EndpointReference, Limits, NOTIFY_ACTION, NamespaceBinding, NotificationMessage,
    Operation, QName, RegisterPublisher, ReplyContext, Request, RequestHeaders, Response, SoapVersion, Subscribe,
    TopicExpression, XmlElement, parse_request, write_empty_response, write_notify, write_raw_notification,
    write_request, write_response,
};

const VERSIONS: [SoapVersion; 2] = [SoapVersion::V11, SoapVersion::V12];
const ADDRESSING: [AddressingVersion; 2] = [AddressingVersion::W3c, AddressingVersion::Submission];

fn element(xml: &str) -> XmlElement {
    XmlElement::parse(xml.as_bytes(), &Limits::default()).unwrap()
}

fn epr(address: &str, params: &[&str]) -> EndpointReference {
    EndpointReference { address: address.into(), reference_parameters: params.iter().map(|p| element(p)).collect() }
}

fn topic(text: &str, dialect: Dialect, bindings: &[(Option<&str>, &str)]) -> TopicExpression {
    let scope: Vec<NamespaceBinding> = bindings
        .iter()
        .map(|(p, n)| NamespaceBinding { prefix: p.map(str::to_owned), namespace: (*n).to_owned() })
        .collect();
    TopicExpression::new(dialect, text, &scope)
}

fn message(payload: &[u8]) -> NotificationMessage {
    NotificationMessage {
        subscription_reference: Some(epr("http://gw/wsn/subscriptions/1", &[])),
        topic: Some(TopicExpression::from_topic("sensors/1/temp", Some("urn:site")).unwrap()),
        producer_reference: Some(epr("http://producer", &[r#"<p:id xmlns:p="urn:p">7</p:id>"#])),
        message: XmlElement::from_payload(payload, Some("text/plain"), &Limits::default()),
    }
}

/// One of every request, with the awkward cases: reference parameters, a topic whose
/// prefix clashes with `wsnt`, a default-namespace topic, nil times, escaping.
fn samples() -> Vec<Request> {
    vec![
        Request::Notify(vec![
            message(br#"<m:reading xmlns:m="urn:m" at="t&amp;1">21.5</m:reading>"#),
            message(b"plain text & <stuff>\r\n"),
            message(&[0, 159, 146, 150]),
        ]),
        Request::Subscribe(Subscribe {
            consumer_reference: epr("http://consumer/a?x=1&y=<2>", &[r#"<r:k xmlns:r="urn:r" r:a="1">v</r:k>"#]),
            topic_expressions: vec![
                topic("wsnt:a/b", Dialect::Concrete, &[(Some("wsnt"), "urn:not-wsn")]),
                topic("x/*", Dialect::Full, &[(None, "urn:default")]),
                TopicExpression::from_filter("a/+/#", Some("urn:t")).unwrap(),
            ],
            other_filters: vec![QName::new("urn:f", "Content"), QName { namespace: None, local_name: "bare".into() }],
            initial_termination_time: Some("PT10M".into()),
            use_raw: true,
            other_policies: vec![QName::new("urn:p", "Rate")],
        }),
        Request::Subscribe(Subscribe {
            consumer_reference: epr("http://c", &[]),
            topic_expressions: vec![],
            other_filters: vec![],
            initial_termination_time: None,
            use_raw: false,
            other_policies: vec![],
        }),
        Request::GetCurrentMessage { topic: TopicExpression::from_topic("a", Some("urn:n")).unwrap() },
        Request::Renew { termination_time: Some("2030-01-01T00:00:00Z".into()) },
        Request::Renew { termination_time: None },
        Request::Unsubscribe,
        Request::PauseSubscription,
        Request::ResumeSubscription,
        Request::CreatePullPoint,
        Request::GetMessages { maximum_number: Some(25) },
        Request::GetMessages { maximum_number: None },
        Request::DestroyPullPoint,
        Request::RegisterPublisher(RegisterPublisher {
            publisher_reference: Some(epr("http://pub", &[])),
            topics: vec![TopicExpression::from_topic("a/b", Some("urn:n")).unwrap()],
            demand: true,
            initial_termination_time: Some("2031-02-03T04:05:06Z".into()),
        }),
        Request::DestroyRegistration,
        Request::Unknown { namespace: Some("urn:vendor".into()), local_name: "Frobnicate".into() },
        // The XML namespace may be bound to `xml` only (found by fuzzing: `xmlns:q` bound to it
        // made the written request unreadable).
        Request::Unknown { namespace: Some(wsn_xml::ns::XML.into()), local_name: "CreatePullPoint".into() },
    ]
}

#[test]
fn every_request_round_trips_in_every_version() {
    let consumer = epr("http://gw/wsn", &[r#"<t:token xmlns:t="urn:t">abc</t:token>"#]);
    for soap in VERSIONS {
        for addressing in ADDRESSING {
            for request in samples() {
                let headers = RequestHeaders {
                    addressing,
                    action: None,
                    message_id: Some("urn:uuid:42"),
                    to: Some(&consumer),
                    reply_to: Some("http://reply/here"),
                    path: Some("gw1,site"),
                };
                let bytes = write_request(soap, &headers, &request);
                let env = parse_request(&bytes, &Limits::default())
                    .unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&bytes)));
                assert_eq!(env.request, request, "{}", String::from_utf8_lossy(&bytes));
                assert_eq!(env.soap, soap);
                assert_eq!(env.addressing.version, Some(addressing));
                assert_eq!(env.path.as_deref(), Some("gw1,site"));
                assert_eq!(env.addressing.action, request.operation().map(Operation::request_action));
                assert_eq!(env.addressing.message_id.as_deref(), Some("urn:uuid:42"));
                assert_eq!(env.addressing.to.as_deref(), Some("http://gw/wsn"));
                assert_eq!(env.addressing.reply_to.as_deref(), Some("http://reply/here"));
                assert!(env.not_understood.is_empty());
            }
        }
    }
}

#[test]
fn topic_element_prefix_never_clashes_with_the_expression() {
    let request = &samples()[1];
    let bytes = write_request(SoapVersion::V11, &RequestHeaders::default(), request);
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    assert!(
        text.contains(
            r#"<wsnt0:TopicExpression xmlns:wsnt0="http://docs.oasis-open.org/wsn/b-2" xmlns:wsnt="urn:not-wsn""#
        ),
        "{text}"
    );
}

#[test]
fn outgoing_notify_carries_action_to_and_reference_parameters() {
    let consumer = epr("http://consumer:9000/in", &[r#"<c:sub xmlns:c="urn:c">17</c:sub>"#]);
    let messages = vec![message(b"<v>1</v>"), message(b"2")];
    for soap in VERSIONS {
        let bytes = write_notify(soap, AddressingVersion::W3c, &consumer, Some("urn:uuid:n1"), &messages);
        let env = parse_request(&bytes, &Limits::default()).unwrap();
        assert_eq!(env.request, Request::Notify(messages.clone()));
        assert_eq!(env.addressing.action.as_deref(), Some(NOTIFY_ACTION));
        assert_eq!(env.addressing.to.as_deref(), Some("http://consumer:9000/in"));
        let t = tree(&bytes);
        let header = t.child(soap.namespace(), "Header");
        let param = header.child("urn:c", "sub");
        assert_eq!(param.text, "17");
        assert_eq!(param.attr(Some(WSA), "IsReferenceParameter"), Some("true"));
    }
}

#[test]
fn raw_notification_is_the_bare_message_element() {
    let payload = element(r#"<ev:alarm xmlns:ev="urn:ev" level="3"><ev:zone>2</ev:zone></ev:alarm>"#);
    let consumer = epr("http://raw-consumer", &[]);
    for soap in VERSIONS {
        let headers = RequestHeaders { to: Some(&consumer), ..RequestHeaders::default() };
        let bytes = write_raw_notification(soap, &headers, &payload);
        let env = parse_request(&bytes, &Limits::default()).unwrap();
        assert_eq!(env.request, Request::Unknown { namespace: Some("urn:ev".into()), local_name: "alarm".into() });
        assert_eq!(env.addressing.action.as_deref(), Some(NOTIFY_ACTION));
        let body = tree(&bytes);
        let body = body.child(soap.namespace(), "Body");
        assert_eq!(body.children.len(), 1);
        assert_eq!(body.children[0].attr(None, "level"), Some("3"));
        assert!(String::from_utf8_lossy(&bytes).contains(payload.as_str()));
    }
}

fn reply(soap: SoapVersion, addressing: AddressingVersion) -> ReplyContext {
    ReplyContext {
        soap,
        addressing,
        relates_to: Some("urn:uuid:req".into()),
        message_id: Some("urn:uuid:resp".into()),
        operation: None,
    }
}

#[test]
fn every_response_has_the_right_shape_in_both_versions() {
    let sub = epr("http://gw/wsn/subscriptions/abc", &[]);
    let pull = epr("http://gw/wsn/pullpoints/p1", &[]);
    let msg = element(r#"<m:x xmlns:m="urn:m">1</m:x>"#);
    let messages = vec![message(b"<a/>"), message(b"b")];
    let responses = [
        Response::Subscribe { subscription_reference: &sub, current_time: Some(0), termination_time: Some(3_600_000) },
        Response::Subscribe { subscription_reference: &sub, current_time: None, termination_time: None },
        Response::Renew { termination_time: Some(1_500), current_time: Some(1_000) },
        Response::Renew { termination_time: None, current_time: None },
        Response::Unsubscribe,
        Response::PauseSubscription,
        Response::ResumeSubscription,
        Response::GetCurrentMessage { message: &msg },
        Response::CreatePullPoint { pull_point: &pull },
        Response::GetMessages { messages: &messages },
        Response::GetMessages { messages: &[] },
        Response::DestroyPullPoint,
        Response::RegisterPublisher { registration_reference: &pull, consumer_reference: Some(&sub) },
        Response::DestroyRegistration,
    ];
    for soap in VERSIONS {
        for addressing in ADDRESSING {
            for response in &responses {
                let bytes = write_response(&reply(soap, addressing), response);
                let t = tree(&bytes);
                assert!(t.is(soap.namespace(), "Envelope"));
                let header = t.child(soap.namespace(), "Header");
                let op = response.operation();
                assert_eq!(header.child(addressing.namespace(), "Action").text, op.response_action().unwrap());
                assert_eq!(header.child(addressing.namespace(), "RelatesTo").text, "urn:uuid:req");
                assert_eq!(header.child(addressing.namespace(), "MessageID").text, "urn:uuid:resp");
                let body = t.child(soap.namespace(), "Body");
                assert_eq!(body.children.len(), 1);
                let r = &body.children[0];
                assert!(r.is(op.element_namespace(), &op.response_element().unwrap()), "{r:?}");
                check_response_content(r, response);
            }
        }
    }
}

fn check_response_content(r: &common::Elem, response: &Response<'_>) {
    match *response {
        Response::Subscribe { current_time, termination_time, .. } => {
            assert_eq!(r.children[0].local, "SubscriptionReference");
            assert_eq!(
                r.child(WSNT, "SubscriptionReference").child(WSA, "Address").text,
                "http://gw/wsn/subscriptions/abc"
            );
            match (current_time, termination_time) {
                (Some(_), Some(_)) => {
                    assert_eq!(r.child(WSNT, "CurrentTime").text, "1970-01-01T00:00:00Z");
                    assert_eq!(r.child(WSNT, "TerminationTime").text, "1970-01-01T01:00:00Z");
                }
                _ => assert_eq!(r.children.len(), 1, "no expiry: TerminationTime omitted"),
            }
        }
        Response::Renew { termination_time, .. } => {
            assert_eq!(r.children[0].local, "TerminationTime", "TerminationTime comes first");
            match termination_time {
                Some(_) => {
                    assert_eq!(r.child(WSNT, "TerminationTime").text, "1970-01-01T00:00:01.500Z");
                    assert_eq!(r.child(WSNT, "CurrentTime").text, "1970-01-01T00:00:01Z");
                }
                None => assert_eq!(r.child(WSNT, "TerminationTime").attr(Some(XSI), "nil"), Some("true")),
            }
        }
        Response::GetCurrentMessage { .. } => assert_eq!(r.child("urn:m", "x").text, "1"),
        Response::CreatePullPoint { .. } => {
            assert_eq!(r.child(WSNT, "PullPoint").child(WSA, "Address").text, "http://gw/wsn/pullpoints/p1");
        }
        Response::GetMessages { messages } => {
            assert_eq!(r.children.len(), messages.len());
            for m in &r.children {
                assert!(m.is(WSNT, "NotificationMessage"));
                assert_eq!(m.child(WSNT, "Message").children.len(), 1);
                let t = m.child(WSNT, "Topic");
                assert_eq!(t.resolve_qname(&t.text).0.as_deref(), Some("urn:site"));
            }
        }
        Response::RegisterPublisher { .. } => {
            assert_eq!(
                r.child(WSN_BR, "PublisherRegistrationReference").child(WSA, "Address").text,
                "http://gw/wsn/pullpoints/p1"
            );
            assert_eq!(
                r.child(WSN_BR, "ConsumerReference").child(WSA, "Address").text,
                "http://gw/wsn/subscriptions/abc"
            );
        }
        _ => assert!(r.children.is_empty()),
    }
}

#[test]
fn empty_response_relates_to_the_request() {
    for soap in VERSIONS {
        let bytes = write_empty_response(&reply(soap, AddressingVersion::W3c));
        let t = tree(&bytes);
        assert!(t.child(soap.namespace(), "Body").children.is_empty());
        assert_eq!(t.child(soap.namespace(), "Header").child(WSA, "RelatesTo").text, "urn:uuid:req");
    }
    assert_ne!(SOAP11_ENV, SOAP12_ENV);
    assert_ne!(WSA, WSA_2004);
}

// ---- proptest: arbitrary requests survive write → parse ----

fn address() -> impl Strategy<Value = String> {
    "http://[a-z0-9&<>'\"/?=.]{1,16}"
}

fn ns() -> impl Strategy<Value = String> {
    "urn:[a-z]{1,6}"
}

fn qname() -> impl Strategy<Value = QName> {
    (proptest::option::of(ns()), "[a-z][a-z0-9]{0,6}")
        .prop_map(|(namespace, local_name)| QName { namespace, local_name })
}

fn xml_element() -> impl Strategy<Value = XmlElement> {
    prop_oneof![
        (ns(), "[a-z][a-z0-9]{0,5}", "[ -9;-~]{0,20}").prop_map(|(n, l, text)| {
            let mut out = format!("<q:{l} xmlns:q=\"{n}\">");
            out.push_str(&text.replace('&', "&amp;").replace('<', "&lt;"));
            out.push_str(&format!("</q:{l}>"));
            XmlElement::parse(out.as_bytes(), &Limits::default()).unwrap()
        }),
        proptest::collection::vec(any::<u8>(), 0..40)
            .prop_map(|bytes| XmlElement::wrap_payload(&bytes, Some("application/octet-stream"))),
        "[^:]{0,30}".prop_map(|text| XmlElement::wrap_payload(text.as_bytes(), None)),
    ]
}

fn endpoint() -> impl Strategy<Value = EndpointReference> {
    (address(), proptest::collection::vec(xml_element(), 0..2))
        .prop_map(|(address, reference_parameters)| EndpointReference { address, reference_parameters })
}

fn topic_expression() -> impl Strategy<Value = TopicExpression> {
    let levels = proptest::collection::vec("[^/+#\u{0}]{0,5}", 1..4);
    prop_oneof![
        (levels.clone(), proptest::option::of(ns())).prop_map(|(l, n)| TopicExpression::from_topic(
            &l.join("/"),
            n.as_deref()
        )
        .unwrap()),
        (proptest::collection::vec(prop_oneof!["[a-z]{1,4}", Just("+".to_string())], 1..4), ns(), any::<bool>())
            .prop_map(|(l, n, hash)| {
                let mut f = l.join("/");
                if hash {
                    f.push_str("/#");
                }
                TopicExpression::from_filter(&f, Some(&n)).unwrap()
            }),
    ]
}

fn time_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of("[0-9A-Z:.+-]{0,24}")
}

fn notification_message() -> impl Strategy<Value = NotificationMessage> {
    (
        proptest::option::of(endpoint()),
        proptest::option::of(topic_expression()),
        proptest::option::of(endpoint()),
        xml_element(),
    )
        .prop_map(|(subscription_reference, topic, producer_reference, message)| NotificationMessage {
            subscription_reference,
            topic,
            producer_reference,
            message,
        })
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        proptest::collection::vec(notification_message(), 1..3).prop_map(Request::Notify),
        (
            endpoint(),
            proptest::collection::vec(topic_expression(), 0..3),
            proptest::collection::vec(qname(), 0..2),
            time_text(),
            any::<bool>(),
            proptest::collection::vec(qname(), 0..2)
        )
            .prop_map(
                |(
                    consumer_reference,
                    topic_expressions,
                    other_filters,
                    initial_termination_time,
                    use_raw,
                    other_policies,
                )| {
                    Request::Subscribe(Subscribe {
                        consumer_reference,
                        topic_expressions,
                        other_filters,
                        initial_termination_time,
                        use_raw,
                        other_policies,
                    })
                }
            ),
        topic_expression().prop_map(|topic| Request::GetCurrentMessage { topic }),
        time_text().prop_map(|termination_time| Request::Renew { termination_time }),
        Just(Request::Unsubscribe),
        Just(Request::PauseSubscription),
        Just(Request::ResumeSubscription),
        Just(Request::CreatePullPoint),
        proptest::option::of(any::<u32>()).prop_map(|maximum_number| Request::GetMessages { maximum_number }),
        Just(Request::DestroyPullPoint),
        (
            proptest::option::of(endpoint()),
            proptest::collection::vec(topic_expression(), 0..3),
            any::<bool>(),
            time_text()
        )
            .prop_map(|(publisher_reference, topics, demand, initial_termination_time)| {
                Request::RegisterPublisher(RegisterPublisher {
                    publisher_reference,
                    topics,
                    demand,
                    initial_termination_time,
                })
            }),
        Just(Request::DestroyRegistration),
        (ns(), "[A-Z][a-z]{0,8}").prop_map(|(n, l)| Request::Unknown { namespace: Some(n), local_name: l }),
    ]
}

proptest! {
    #[test]
    fn arbitrary_requests_round_trip(request in request(), v12 in any::<bool>(), submission in any::<bool>()) {
        let soap = if v12 { SoapVersion::V12 } else { SoapVersion::V11 };
        let addressing = if submission { AddressingVersion::Submission } else { AddressingVersion::W3c };
        let headers = RequestHeaders { addressing, message_id: Some("m"), ..RequestHeaders::default() };
        let bytes = write_request(soap, &headers, &request);
        let env = parse_request(&bytes, &Limits::default());
        prop_assert!(env.is_ok(), "{:?}\n{}", env, String::from_utf8_lossy(&bytes));
        prop_assert_eq!(env.unwrap().request, request);
    }
}
