//! A hostile client must not crash, starve or lock out the broker: each finding of the
//! hardening issue, tried against the real binary over real sockets. Raw bytes where the
//! point is what goes over the wire, and a loopback address of its own (127.0.0.2) for the
//! client that must still get in while another address misbehaves.

#[allow(dead_code)]
#[path = "all_pairs/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::time::Duration;

use support::tolk::Tolk;
use support::within;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// An MQTT "remaining length" (variable byte integer).
fn varint(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let byte = (n % 128) as u8;
        n /= 128;
        out.push(if n > 0 { byte | 0x80 } else { byte });
        if n == 0 {
            break;
        }
    }
}

/// A whole MQTT packet: fixed header byte, length, body.
fn packet(first: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![first];
    varint(body.len(), &mut out);
    out.extend_from_slice(body);
    out
}

fn string(s: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// CONNECT with clean session, no credentials: level 4 (3.1.1) or 5.
fn connect(level: u8, client_id: &str, keep_alive: u16) -> Vec<u8> {
    let mut body = Vec::new();
    string("MQTT", &mut body);
    body.extend_from_slice(&[level, 0x02]);
    body.extend_from_slice(&keep_alive.to_be_bytes());
    if level == 5 {
        body.push(0); // no properties
    }
    string(client_id, &mut body);
    packet(0x10, &body)
}

/// Reads one MQTT packet (fixed header and body).
async fn read_packet(stream: &mut TcpStream) -> (u8, Vec<u8>) {
    let first = stream.read_u8().await.expect("a packet");
    let (mut len, mut shift) = (0usize, 0);
    loop {
        let b = stream.read_u8().await.unwrap();
        len |= usize::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            break;
        }
    }
    let mut body = vec![0; len];
    stream.read_exact(&mut body).await.unwrap();
    (first, body)
}

async fn mqtt_connected(addr: SocketAddr, level: u8, id: &str, keep_alive: u16) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(&connect(level, id, keep_alive)).await.unwrap();
    let (kind, body) = within("CONNACK", read_packet(&mut stream)).await;
    assert_eq!((kind, body[1]), (0x20, 0), "CONNACK accepted");
    stream
}

/// Reads until EOF (or an error), returning what arrived; the broker must close within `limit`.
async fn read_to_close(stream: &mut TcpStream, limit: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(limit, async {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = stream.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&chunk[..n]);
        }
    })
    .await;
    assert!(read.is_ok(), "the broker did not close the connection within {limit:?}");
    got
}

/// A TCP connection from another loopback address, as a second host would make.
async fn connect_from(source: &str, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket.connect(to).await.unwrap()
}

/// `a/a/…/a` with `levels` levels.
fn deep(levels: usize) -> String {
    vec!["a"; levels].join("/")
}

#[tokio::test]
async fn deep_topics_are_refused_with_each_protocols_error_and_the_broker_lives() {
    let tolk = Tolk::start();
    let addrs = tolk.addrs();
    let filter = deep(12_000);

    // MQTT: SUBSCRIBE → SUBACK with the failure return code 0x80.
    let mut mqtt = mqtt_connected(addrs.get("mqtt"), 4, "deep", 60).await;
    let mut body = vec![0, 1];
    string(&filter, &mut body);
    body.push(0);
    mqtt.write_all(&packet(0x82, &body)).await.unwrap();
    assert_eq!(within("SUBACK", read_packet(&mut mqtt)).await, (0x90, vec![0, 1, 0x80]));

    // STOMP: SUBSCRIBE → ERROR.
    let mut stomp = TcpStream::connect(addrs.get("stomp")).await.unwrap();
    stomp.write_all(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0").await.unwrap();
    // 3,000 levels: over the topic limit, under STOMP's header line limit.
    let frame = format!("SUBSCRIBE\nid:1\ndestination:/topic/{}\n\n\0", deep(3000));
    stomp.write_all(frame.as_bytes()).await.unwrap();
    let answer = String::from_utf8_lossy(&read_to_close(&mut stomp, Duration::from_secs(5)).await).into_owned();
    assert!(answer.starts_with("CONNECTED"), "{answer}");
    assert!(answer.contains("ERROR") && answer.contains("levels"), "{answer}");

    // MQTT-SN: SUBSCRIBE by topic name → SUBACK "rejected: invalid topic id" (0x02).
    let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    udp.connect(addrs.get("mqttsn")).await.unwrap();
    // CONNECT: clean session, protocol id 1, keep-alive 60 s, client id "deep".
    udp.send(&[10, 0x04, 0x04, 0x01, 0, 60, b'd', b'e', b'e', b'p']).await.unwrap();
    let mut datagram = vec![0u8; 512];
    let n = within("CONNACK", udp.recv(&mut datagram)).await.unwrap();
    assert_eq!(&datagram[..n], &[3, 0x05, 0x00], "CONNACK accepted");
    let topic = deep(12_000);
    // A long SUBSCRIBE: 0x01 then a two-octet length; flags 0 (topic name), message id 7.
    let mut subscribe = vec![0x01, 0, 0, 0x12, 0x00, 0, 7];
    subscribe.extend_from_slice(topic.as_bytes());
    let len = subscribe.len() as u16;
    subscribe[1..3].copy_from_slice(&len.to_be_bytes());
    udp.send(&subscribe).await.unwrap();
    let n = within("SUBACK", udp.recv(&mut datagram)).await.unwrap();
    assert_eq!(&datagram[..n], &[8, 0x13, 0x00, 0, 0, 0, 7, 0x02], "SUBACK refused, invalid topic");

    // WS-N: Subscribe with a 12,000-level Concrete expression → InvalidTopicExpressionFault, 500.
    let subscribe = format!(
        r#"<?xml version="1.0"?><s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/" xmlns:wsa="http://www.w3.org/2005/08/addressing" xmlns:wsnt="http://docs.oasis-open.org/wsn/b-2"><s:Body><wsnt:Subscribe><wsnt:ConsumerReference><wsa:Address>http://127.0.0.1:9/consumer</wsa:Address></wsnt:ConsumerReference><wsnt:Filter><wsnt:TopicExpression Dialect="http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete" xmlns:tns="urn:t">tns:{topic}</wsnt:TopicExpression></wsnt:Filter></wsnt:Subscribe></s:Body></s:Envelope>"#
    );
    let mut http = TcpStream::connect(addrs.get("http")).await.unwrap();
    let request = format!(
        "POST /wsn HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nSOAPAction: \"\"\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{subscribe}",
        subscribe.len()
    );
    http.write_all(request.as_bytes()).await.unwrap();
    let answer = String::from_utf8_lossy(&read_to_close(&mut http, Duration::from_secs(10)).await).into_owned();
    assert!(answer.starts_with("HTTP/1.1 500"), "{answer}");
    assert!(answer.contains("InvalidTopicExpressionFault"), "{answer}");

    // The broker is alive and routing: a normal subscriber gets a normal message.
    let mut sub = mqtt_connected(addrs.get("mqtt"), 4, "alive-sub", 60).await;
    let mut body = vec![0, 2];
    string("still/here", &mut body);
    body.push(0);
    sub.write_all(&packet(0x82, &body)).await.unwrap();
    assert_eq!(within("SUBACK", read_packet(&mut sub)).await, (0x90, vec![0, 2, 0]));
    let mut body = Vec::new();
    string("still/here", &mut body);
    body.extend_from_slice(b"yes");
    mqtt.write_all(&packet(0x30, &body)).await.unwrap();
    assert_eq!(within("PUBLISH", read_packet(&mut sub)).await, (0x30, body));
    tolk.stop();
}

#[tokio::test]
async fn one_address_cannot_lock_out_another() {
    let tolk =
        Tolk::start_with(&[("amqp.max_connections_per_address", "4"), ("http.max_connections_per_address", "4")]);
    let amqp = tolk.addrs().get("amqp");
    let http = tolk.addrs().get("http");
    // Four silent sockets from one host take that host's slots.
    let mut silent = Vec::new();
    for _ in 0..4 {
        silent.push(connect_from("127.0.0.1", amqp).await);
    }
    // Its fifth is closed at once, without a byte.
    let mut fifth = connect_from("127.0.0.1", amqp).await;
    assert_eq!(read_to_close(&mut fifth, Duration::from_secs(5)).await, b"");
    // Another host still gets an AMQP handshake: connection.start (method frame, class 10, method 10).
    let mut other = connect_from("127.0.0.2", amqp).await;
    other.write_all(b"AMQP\x00\x00\x09\x01").await.unwrap();
    let mut head = [0u8; 11];
    within("connection.start", other.read_exact(&mut head)).await.unwrap();
    assert_eq!((head[0], &head[7..11]), (1, &[0, 10, 0, 10][..]), "a method frame: connection.start");
    drop(silent);

    // HTTP too: idle sockets from one host cannot take the port from everyone else.
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(connect_from("127.0.0.1", http).await);
    }
    let mut fifth = connect_from("127.0.0.1", http).await;
    assert_eq!(read_to_close(&mut fifth, Duration::from_secs(5)).await, b"");
    let mut other = connect_from("127.0.0.2", http).await;
    other.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let got = read_to_close(&mut other, Duration::from_secs(5)).await;
    assert!(got.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));
    drop(idle);
    tolk.stop();
}

#[tokio::test]
async fn silence_is_bounded_even_when_a_client_asks_for_no_keep_alive() {
    let tolk = Tolk::start_with(&[
        ("mqtt.max_keep_alive_secs", "1"),
        ("stomp.max_silence", "\"1s\""),
        ("http.header_timeout", "\"1s\""),
    ]);
    let addrs = tolk.addrs();
    // MQTT 3.1.1, keep-alive 0: closed after 1.5 s of silence instead of never.
    let mut mqtt = mqtt_connected(addrs.get("mqtt"), 4, "silent", 0).await;
    read_to_close(&mut mqtt, Duration::from_secs(10)).await;
    // MQTT 5, keep-alive 0: told the cap as Server Keep Alive (property 0x13) in the CONNACK.
    let mut v5 = TcpStream::connect(addrs.get("mqtt")).await.unwrap();
    v5.write_all(&connect(5, "silent5", 0)).await.unwrap();
    let (_, connack) = within("CONNACK", read_packet(&mut v5)).await;
    assert!(connack.windows(3).any(|w| w == [0x13, 0, 1]), "Server Keep Alive 1: {connack:?}");
    // STOMP, heart-beat 0,0.
    let mut stomp = TcpStream::connect(addrs.get("stomp")).await.unwrap();
    stomp.write_all(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\0").await.unwrap();
    let got = read_to_close(&mut stomp, Duration::from_secs(10)).await;
    assert!(got.starts_with(b"CONNECTED"), "{}", String::from_utf8_lossy(&got));
    // HTTP: a connection that never sends a request.
    let mut http = TcpStream::connect(addrs.get("http")).await.unwrap();
    read_to_close(&mut http, Duration::from_secs(10)).await;
    // An idle keep-alive connection after one request.
    let mut http = TcpStream::connect(addrs.get("http")).await.unwrap();
    http.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let got = read_to_close(&mut http, Duration::from_secs(10)).await;
    assert!(got.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));
    tolk.stop();
}

#[tokio::test]
async fn a_protocol_error_reason_reaches_the_client_before_the_close() {
    let tolk = Tolk::start();
    let mut mqtt = mqtt_connected(tolk.addrs().get("mqtt"), 5, "rude", 60).await;
    // A PUBLISH to a wildcard topic (MQTT-3.3.2-2), with more packets pipelined behind it:
    // unread input at close time is what made the kernel reset the connection.
    let mut body = Vec::new();
    string("a/#", &mut body);
    body.push(0); // no properties
    let mut bytes = packet(0x30, &body);
    for _ in 0..2000 {
        bytes.extend_from_slice(&[0xC0, 0x00]); // PINGREQ
    }
    mqtt.write_all(&bytes).await.unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match within("the close", mqtt.read(&mut chunk)).await {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("the connection was reset ({e}) after {} bytes: {got:?}", got.len()),
        }
    }
    // Whatever PINGRESPs came first, the last packet is DISCONNECT 0x90 (topic name invalid).
    let at = got.iter().rposition(|&b| b == 0xE0).expect("a DISCONNECT");
    assert_eq!(got[at + 2], 0x90, "reason code: {got:?}");
    tolk.stop();
}

#[tokio::test]
async fn an_offline_session_keeps_every_acknowledged_message() {
    const N: u16 = 5000;
    let tolk = Tolk::start();
    let addr = tolk.addrs().get("mqtt");
    // A persistent session (3.1.1, clean session 0) subscribes at QoS 1, then goes away.
    let persistent = |keep_alive: u16| {
        let mut body = Vec::new();
        string("MQTT", &mut body);
        body.extend_from_slice(&[4, 0x00]);
        body.extend_from_slice(&keep_alive.to_be_bytes());
        string("offline-sub", &mut body);
        packet(0x10, &body)
    };
    let mut sub = TcpStream::connect(addr).await.unwrap();
    sub.write_all(&persistent(60)).await.unwrap();
    assert_eq!(within("CONNACK", read_packet(&mut sub)).await.0, 0x20);
    let mut body = vec![0, 1];
    string("sensor/+", &mut body);
    body.push(1);
    sub.write_all(&packet(0x82, &body)).await.unwrap();
    assert_eq!(within("SUBACK", read_packet(&mut sub)).await, (0x90, vec![0, 1, 1]));
    sub.write_all(&[0xE0, 0]).await.unwrap();
    read_to_close(&mut sub, Duration::from_secs(5)).await;

    // Every QoS 1 message acknowledged to the publisher while the subscriber is away...
    let mut publisher = mqtt_connected(addr, 4, "offline-pub", 60).await;
    let mut batch = Vec::new();
    for id in 1..=N {
        let mut body = Vec::new();
        string("sensor/t", &mut body);
        body.extend_from_slice(&id.to_be_bytes());
        body.extend_from_slice(&id.to_be_bytes());
        batch.extend(packet(0x32, &body));
    }
    publisher.write_all(&batch).await.unwrap();
    for id in 1..=N {
        let ack = within(&format!("PUBACK {id}"), read_packet(&mut publisher)).await;
        assert_eq!(ack, (0x40, id.to_be_bytes().to_vec()));
    }

    // ...reaches it when it comes back, in order.
    let mut sub = TcpStream::connect(addr).await.unwrap();
    sub.write_all(&persistent(60)).await.unwrap();
    assert_eq!(within("CONNACK", read_packet(&mut sub)).await, (0x20, vec![1, 0]), "session present");
    for expected in 1..=N {
        let (kind, body) = within("a kept message", read_packet(&mut sub)).await;
        assert_eq!(kind & 0xF0, 0x30, "PUBLISH");
        let payload = &body[body.len() - 2..];
        assert_eq!(payload, expected.to_be_bytes(), "message {expected} of {N}");
        let packet_id = &body[body.len() - 4..body.len() - 2];
        sub.write_all(&packet(0x40, packet_id)).await.unwrap();
    }
    tolk.stop();
}

#[tokio::test]
async fn a_full_memory_budget_refuses_at_least_once_publishers_with_their_protocols_signal() {
    // 1 MiB for everything; retained messages of 64 KiB fill it after about 16.
    let tolk = Tolk::start_with(&[("core.memory_budget_bytes", "1048576")]);
    let addr = tolk.addrs().get("mqtt");
    let mut v5 = mqtt_connected(addr, 5, "filler", 60).await;
    let payload = vec![7u8; 64 * 1024];
    let mut refused_at = None;
    for id in 1..=40u16 {
        let mut body = Vec::new();
        string(&format!("big/{id}"), &mut body);
        body.extend_from_slice(&id.to_be_bytes());
        body.push(0); // no properties
        body.extend_from_slice(&payload);
        v5.write_all(&packet(0x33, &body)).await.unwrap(); // QoS 1, retain
        let (kind, ack) = within("PUBACK", read_packet(&mut v5)).await;
        assert_eq!((kind, &ack[..2]), (0x40, &id.to_be_bytes()[..]));
        if ack.get(2) == Some(&0x97) {
            refused_at = Some(id);
            break;
        }
    }
    let refused_at = refused_at.expect("a PUBACK with 0x97 (quota exceeded) once the budget is full");
    assert_eq!(refused_at, 16, "15 copies of 64 KiB and their overhead fit in 1 MiB, the 16th does not");
    // MQTT 3.1.1 has no negative PUBACK: the publisher is disconnected without one.
    let mut v3 = mqtt_connected(addr, 4, "filler3", 60).await;
    let mut body = Vec::new();
    string("big/x", &mut body);
    body.extend_from_slice(&[0, 1]);
    body.extend_from_slice(&payload);
    v3.write_all(&packet(0x32, &body)).await.unwrap();
    assert_eq!(read_to_close(&mut v3, Duration::from_secs(5)).await, b"", "no PUBACK, a close");
    let metrics = tolk.http_get("/metrics").await;
    let held = metrics.lines().find(|l| l.starts_with("tolk_memory_bytes{kind=\"retained\"}")).unwrap();
    let held: usize = held.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(held <= 1024 * 1024 + 80 * 1024, "retained bytes stay within the budget: {held}");
    assert!(metrics.contains("tolk_messages_dropped_total{protocol=\"mqtt\",reason=\"memory_full\"} 2"), "{metrics}");
    tolk.stop();
}

#[tokio::test]
async fn a_wildcard_subscription_gets_many_retained_messages_in_rounds() {
    const N: u16 = 3000;
    let tolk = Tolk::start();
    let addr = tolk.addrs().get("mqtt");
    let mut publisher = mqtt_connected(addr, 4, "retainer", 60).await;
    let mut batch = Vec::new();
    for i in 0..N {
        let mut body = Vec::new();
        string(&format!("r/{}/{}", i / 100, i % 100), &mut body);
        body.extend_from_slice(&i.to_be_bytes());
        batch.extend(packet(0x31, &body)); // QoS 0, retain
    }
    // A QoS 1 publish after them: its PUBACK says every retained one before it was routed.
    let mut body = Vec::new();
    string("fence", &mut body);
    body.extend_from_slice(&[0, 1]);
    batch.extend(packet(0x32, &body));
    publisher.write_all(&batch).await.unwrap();
    assert_eq!(within("PUBACK", read_packet(&mut publisher)).await, (0x40, vec![0, 1]));

    let mut sub = mqtt_connected(addr, 4, "everything", 60).await;
    let mut body = vec![0, 1];
    string("r/#", &mut body);
    body.push(0);
    sub.write_all(&packet(0x82, &body)).await.unwrap();
    assert_eq!(within("SUBACK", read_packet(&mut sub)).await, (0x90, vec![0, 1, 0]));
    let mut seen = vec![false; usize::from(N)];
    for _ in 0..N {
        let (kind, body) = within("a retained message", read_packet(&mut sub)).await;
        assert_eq!(kind, 0x31, "PUBLISH with the retain flag");
        let i = u16::from_be_bytes([body[body.len() - 2], body[body.len() - 1]]);
        assert!(!std::mem::replace(&mut seen[usize::from(i)], true), "message {i} twice");
    }
    assert!(seen.iter().all(|&s| s), "every retained message once");
    tolk.stop();
}

#[tokio::test]
async fn an_amqp_binding_over_the_topic_limit_closes_the_channel_with_406() {
    use lapin::options::{QueueBindOptions, QueueDeclareOptions};
    use lapin::types::FieldTable;
    // A routing key is a short string (255 bytes, so at most 128 words, the default limit):
    // a lower limit shows AMQP's refusal.
    let tolk = Tolk::start_with(&[("core.max_topic_levels", "8")]);
    let uri = format!("amqp://guest:guest@{}/%2f", tolk.addrs().get("amqp"));
    let connection = within("connection", lapin::Connection::connect(&uri, Default::default())).await.unwrap();
    let channel = within("channel", connection.create_channel()).await.unwrap();
    within("declare", channel.queue_declare("deep".into(), QueueDeclareOptions::default(), FieldTable::default()))
        .await
        .unwrap();
    let key = ["a"; 9].join(".");
    let bind = channel.queue_bind(
        "deep".into(),
        "amq.topic".into(),
        key.as_str().into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    );
    let error = within("channel.close", bind).await.expect_err("a 9-level binding key over a limit of 8");
    let text = error.to_string();
    assert!(text.contains("PRECONDITION") || text.contains("406"), "{text}");
    assert!(text.contains("levels"), "the reason names the limit: {text}");
    // The connection carries on: another channel works.
    let other = within("channel", connection.create_channel()).await.unwrap();
    within("declare", other.queue_declare("shallow".into(), QueueDeclareOptions::default(), FieldTable::default()))
        .await
        .unwrap();
    tolk.stop();
}
