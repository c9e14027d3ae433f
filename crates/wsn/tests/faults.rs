//! Faults for refused requests, in the caller's SOAP version with the right HTTP status (500
//! for every SOAP fault, 400 for what is not SOAP at all), and malformed or hostile input:
//! answered with a fault or a 4xx, memory bounded, other clients unaffected.

mod common;

use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn subscribe_with(filter: &str, extra: &str) -> String {
    subscribe_doc(SOAP12, "http://127.0.0.1:9/c", filter, extra)
}

#[tokio::test]
async fn subscribe_faults_name_the_problem_in_the_callers_version() {
    let broker = Broker::start(test_config()).await;
    let post12 = |doc: String| broker.post("/wsn", CT12, doc);

    let reply = post12(subscribe_with(&topic_filter("http://www.w3.org/TR/1999/REC-xpath-19991116", "//a"), "")).await;
    reply.assert_fault(500, "TopicExpressionDialectUnknownFault");
    assert!(reply.content_type.starts_with("application/soap+xml"));
    assert!(reply.body.contains("<soap:Value>soap:Sender</soap:Value>"), "{}", reply.body);
    assert!(reply.body.contains("wsrf-bf:Timestamp"), "BaseFault detail: {}", reply.body);
    assert!(reply.body.contains("<wsa:RelatesTo>urn:uuid:test-1</wsa:RelatesTo>"));

    post12(subscribe_with(&topic_filter(CONCRETE, "tns:a/*"), ""))
        .await
        .assert_fault(500, "InvalidTopicExpressionFault");
    post12(subscribe_with(&topic_filter(FULL, "tns:a//b"), "")).await.assert_fault(500, "InvalidTopicExpressionFault");
    let content = r#"<wsnt:Filter><wsnt:MessageContent Dialect="http://www.w3.org/TR/1999/REC-xpath-19991116">//x</wsnt:MessageContent></wsnt:Filter>"#;
    let reply = post12(subscribe_with(content, "")).await;
    reply.assert_fault(500, "InvalidFilterFault");
    assert!(reply.body.contains("UnknownFilter"), "{}", reply.body);
    let past = "<wsnt:InitialTerminationTime>2001-01-01T00:00:00Z</wsnt:InitialTerminationTime>";
    post12(subscribe_with("", past)).await.assert_fault(500, "UnacceptableInitialTerminationTimeFault");
    let junk = "<wsnt:InitialTerminationTime>later</wsnt:InitialTerminationTime>";
    post12(subscribe_with("", junk)).await.assert_fault(500, "UnacceptableInitialTerminationTimeFault");
    let policy = "<wsnt:SubscriptionPolicy><x:Durable xmlns:x=\"urn:x\"/></wsnt:SubscriptionPolicy>";
    post12(subscribe_with("", policy)).await.assert_fault(500, "UnrecognizedPolicyRequestFault");

    // A receiver-side failure is 500 too.
    let https = subscribe_doc(SOAP12, "https://127.0.0.1:9/c", "", "");
    let reply = post12(https).await;
    reply.assert_fault(500, "SubscribeCreationFailedFault");
    assert!(reply.body.contains("https consumers are not supported yet"), "{}", reply.body);

    // The same in SOAP 1.1: always 500, faultcode Client.
    let reply =
        broker.post("/wsn", CT11, subscribe_doc(SOAP11, "http://c/", &topic_filter(CONCRETE, "tns:a/*"), "")).await;
    reply.assert_fault(500, "InvalidTopicExpressionFault");
    assert!(reply.content_type.starts_with("text/xml"));
    assert!(reply.body.contains("<faultcode>soap:Client</faultcode>"), "{}", reply.body);

    // The broker's own address as consumer would loop.
    let own = subscribe_doc(SOAP11, &broker.url("/wsn"), "", "");
    broker.post("/wsn", CT11, own).await.assert_fault(500, "SubscribeCreationFailedFault");
    let missing_pp = subscribe_doc(SOAP11, &broker.url("/wsn/pullpoints/nope"), "", "");
    broker.post("/wsn", CT11, missing_pp).await.assert_fault(500, "SubscribeCreationFailedFault");
    assert_eq!(broker.router.subscription_count(), 0, "nothing was subscribed");
    broker.stop().await;
}

#[tokio::test]
async fn unknown_resources_and_operations() {
    let broker = Broker::start(test_config()).await;
    broker
        .post("/wsn/subscriptions/nope", CT11, simple_doc("Unsubscribe"))
        .await
        .assert_fault(500, "ResourceUnknownFault");
    let reply = broker.post("/wsn/subscriptions/nope", CT12, envelope(SOAP12, "", "<wsnt:PauseSubscription/>")).await;
    reply.assert_fault(500, "ResourceUnknownFault");
    broker
        .post("/wsn/pullpoints/nope", CT11, simple_doc("DestroyPullPoint"))
        .await
        .assert_fault(500, "ResourceUnknownFault");
    broker.post("/wsn", CT11, simple_doc("Unsubscribe")).await.assert_fault(500, "ResourceUnknownFault");

    let unknown = envelope(SOAP12, "", r#"<x:Frobnicate xmlns:x="urn:x"/>"#);
    let reply = broker.post("/wsn", CT12, unknown).await;
    assert_eq!(reply.status, 500, "a SOAP 1.2 Sender fault is 500 too");
    assert!(reply.body.contains("soap:Sender") && reply.body.contains("Frobnicate"), "{}", reply.body);
    // The right local name in the wrong namespace is not Subscribe.
    let wrong_ns = envelope(SOAP11, "", r#"<w:Subscribe xmlns:w="urn:not-wsn"/>"#);
    let reply = broker.post("/wsn", CT11, wrong_ns).await;
    assert_eq!(reply.status, 500);
    assert!(reply.body.contains("soap:Client"), "{}", reply.body);
    let register = envelope(SOAP11, "", r#"<br:RegisterPublisher xmlns:br="http://docs.oasis-open.org/wsn/br-2"/>"#);
    broker.post("/wsn", CT11, register).await.assert_fault(500, "PublisherRegistrationRejectedFault");
    let must =
        envelope(SOAP11, r#"<sec:Security xmlns:sec="urn:sec" s:mustUnderstand="1"/>"#, "<wsnt:CreatePullPoint/>");
    let reply = broker.post("/wsn", CT11, must).await;
    assert_eq!(reply.status, 500);
    assert!(reply.body.contains("MustUnderstand"), "{}", reply.body);
    broker.stop().await;
}

#[tokio::test]
async fn malformed_documents_get_sender_faults() {
    let broker = Broker::start(test_config()).await;
    // Not SOAP at all: 400, with a fault body for clients that read one.
    let reply = broker.post("/wsn", CT11, "this is not xml").await;
    assert_eq!(reply.status, 400);
    assert!(reply.body.contains("<faultcode>soap:Client</faultcode>"), "{}", reply.body);
    let reply = broker.post("/wsn", CT12, "<a><b></a>").await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body.contains("soap:Sender"), "SOAP 1.2 from the Content-Type: {}", reply.body);

    let bomb = r#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;"><!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;"><!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;"><!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;"><!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;"><!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;"><!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;"><!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">]><s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><wsnt:Notify xmlns:wsnt="http://docs.oasis-open.org/wsn/b-2"><wsnt:NotificationMessage><wsnt:Topic>a</wsnt:Topic><wsnt:Message><m>&lol9;</m></wsnt:Message></wsnt:NotificationMessage></wsnt:Notify></s:Body></s:Envelope>"#;
    let started = Instant::now();
    let reply = broker.post("/wsn", CT11, bomb).await;
    assert_eq!(reply.status, 400, "SOAP forbids a DTD: not a SOAP message");
    assert!(reply.body.contains("DOCTYPE"), "{}", reply.body);
    assert!(started.elapsed() < Duration::from_secs(1));
    let xxe = r#"<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body>&e;</s:Body></s:Envelope>"#;
    let reply = broker.post("/wsn", CT11, xxe).await;
    assert_eq!(reply.status, 400);
    assert!(!reply.body.contains("root:"), "{}", reply.body);

    let wrong_envelope = r#"<s:Envelope xmlns:s="urn:not-soap"><s:Body><x/></s:Body></s:Envelope>"#;
    let reply = broker.post("/wsn", CT11, wrong_envelope).await;
    assert_eq!(reply.status, 500);
    assert!(reply.body.contains("VersionMismatch"), "{}", reply.body);

    let no_consumer = envelope(SOAP11, "", "<wsnt:Subscribe><wsnt:Filter/></wsnt:Subscribe>");
    let reply = broker.post("/wsn", CT11, no_consumer).await;
    assert_eq!(reply.status, 500);
    assert!(reply.body.contains("ConsumerReference"), "{}", reply.body);

    let no_topic = envelope(
        SOAP11,
        "",
        "<wsnt:Notify><wsnt:NotificationMessage><wsnt:Message><m/></wsnt:Message></wsnt:NotificationMessage></wsnt:Notify>",
    );
    broker.post("/wsn", CT11, no_topic).await.assert_fault(500, "InvalidTopicExpressionFault");
    let deep = format!("{}{}", "<a>".repeat(10_000), "</a>".repeat(10_000));
    let reply = broker.post("/wsn", CT11, notify_doc(SOAP11, &[("t", &deep)])).await;
    assert_eq!(reply.status, 500);
    assert!(reply.body.contains("nesting"), "{}", reply.body);
    broker.stop().await;
}

/// Sends raw bytes and returns the status line's code once the server answers.
async fn status_of(stream: &mut TcpStream) -> u16 {
    let mut buf = vec![0u8; 4096];
    let mut got = Vec::new();
    loop {
        let n = tokio::time::timeout(WAIT, stream.read(&mut buf)).await.expect("an answer in time").unwrap();
        assert!(n > 0, "connection closed without an answer: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        if let Some(line_end) = got.windows(2).position(|w| w == b"\r\n") {
            let line = String::from_utf8_lossy(&got[..line_end]).to_string();
            return line.split(' ').nth(1).unwrap().parse().unwrap();
        }
    }
}

#[tokio::test]
async fn oversized_bodies_are_refused_without_being_read() {
    let mut config = test_config();
    config.max_body_bytes = 64 * 1024;
    let broker = Broker::start(config).await;

    // Declared too large: answered from the headers alone.
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    let head = "POST /wsn HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nContent-Length: 104857600\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&[b' '; 1000]).await.unwrap();
    assert_eq!(status_of(&mut stream).await, 413);

    // Chunked, no length: refused once the limit is crossed, while the client is still sending.
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    let head = "POST /wsn HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nTransfer-Encoding: chunked\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let writer = tokio::spawn(async move {
        let chunk = format!("{:x}\r\n{}\r\n", 8192, "x".repeat(8192));
        let mut sent = 0usize;
        // Stops when the server closes the connection; never sends more than 10 MiB.
        while sent < 10 * 1024 * 1024 && write.write_all(chunk.as_bytes()).await.is_ok() {
            sent += 8192;
        }
        sent
    });
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(WAIT, read.read(&mut buf)).await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 413"), "{}", String::from_utf8_lossy(&buf[..n]));
    drop(read);
    let sent = writer.await.unwrap();
    assert!(sent < 10 * 1024 * 1024, "the server stopped reading (sent {sent} bytes)");
    broker.stop().await;
}

#[tokio::test]
async fn stalled_and_flooding_clients_do_not_hold_up_others() {
    let mut config = test_config();
    config.max_concurrent_requests = 2;
    config.body_read_timeout = Duration::from_secs(1);
    let broker = Broker::start(config).await;
    // One client sends half a body and stalls.
    let mut stalled = TcpStream::connect(broker.addr).await.unwrap();
    let head = "POST /wsn HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nContent-Length: 1000\r\n\r\n<s:Envelope";
    stalled.write_all(head.as_bytes()).await.unwrap();
    // Another client is served meanwhile.
    let started = Instant::now();
    let pull_point = broker.create_pull_point().await;
    assert!(started.elapsed() < Duration::from_millis(800), "not held up by the stalled client");
    assert!(pull_point.contains("/wsn/pullpoints/"));
    // The stalled one is answered 408 once its time is up.
    assert_eq!(status_of(&mut stalled).await, 408);
    broker.stop().await;
}

#[tokio::test]
async fn requests_beyond_the_concurrency_limit_are_answered_503() {
    let mut config = test_config();
    config.max_concurrent_requests = 1;
    let broker = Broker::start(config).await;
    let mut stalled = TcpStream::connect(broker.addr).await.unwrap();
    let head = "POST /wsn HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nContent-Length: 1000\r\n\r\n<s:Envelope";
    stalled.write_all(head.as_bytes()).await.unwrap();
    // The stalled request holds the only slot once the server has read its headers.
    let mut refused = None;
    for _ in 0..100 {
        let reply = broker.post("/wsn", CT11, simple_doc("CreatePullPoint")).await;
        if reply.status == 503 {
            refused = Some(reply);
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let reply = refused.expect("a 503 while the slot is held");
    assert!(reply.body.contains("too many"), "{}", reply.body);
    drop(stalled);
    let mut ok = false;
    for _ in 0..100 {
        if broker.post("/wsn", CT11, simple_doc("CreatePullPoint")).await.status == 200 {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(ok, "served again once the stalled client left");
    broker.stop().await;
}
