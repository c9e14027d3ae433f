//! Malformed input: ERROR then close for that connection only; another connected client keeps
//! working. Small limits are configured so the over-limit cases are cheap.

use stomp_codec::Command;
use tolk_core::RouterConfig;
use tolk_stomp::StompConfig;

use crate::client::{Broker, Client, config, frame, text};

const MAX_FRAME: usize = 4096;

async fn broker() -> Broker {
    let stomp = StompConfig { max_frame_size_bytes: MAX_FRAME, max_headers: 8, max_header_line_bytes: 256, ..config() };
    Broker::start_with(stomp, RouterConfig::default()).await
}

/// Sends `bytes` after CONNECT on one connection and checks that it gets ERROR (whose
/// `message` contains `expect`) and is closed, while a bystander still publishes and receives.
async fn rejected(bytes: &[u8], expect: &str) {
    let broker = broker().await;
    let mut bystander = broker.client().await;
    bystander.subscribe("/topic/fine", "f", "auto").await;

    let mut bad = broker.client().await;
    bad.send_raw(bytes).await;
    let error = bad.expect_error().await;
    let message = error.header("message").unwrap();
    assert!(message.contains(expect), "expected {expect:?} in {message:?}");

    bystander.publish("/topic/fine", "still here").await;
    assert_eq!(text(&bystander.recv_message().await), "still here");
    let mut newcomer = Client::connect(broker.addr).await;
    assert!(newcomer.with_receipt(frame(Command::Begin, &[("transaction", "t")], "")).await.is_empty());
    broker.stop().await;
}

#[tokio::test]
async fn body_without_nul_beyond_the_frame_limit() {
    let mut bytes = b"SEND\ndestination:/topic/a\n\n".to_vec();
    bytes.extend(std::iter::repeat_n(b'x', MAX_FRAME * 2));
    rejected(&bytes, "exceeds the 4096-byte limit").await;
}

#[tokio::test]
async fn content_length_beyond_the_frame_limit() {
    rejected(b"SEND\ndestination:/topic/a\ncontent-length:100000\n\n", "exceeds the 4096-byte limit").await;
}

#[tokio::test]
async fn header_line_without_colon() {
    rejected(b"SEND\ndestination/topic/a\n\nbody\0", "no ':' separator").await;
}

#[tokio::test]
async fn content_length_larger_than_the_body_then_a_non_nul_byte() {
    rejected(b"SEND\ndestination:/topic/a\ncontent-length:5\n\nabc\0XYZ", "expected NUL").await;
}

#[tokio::test]
async fn unknown_command() {
    rejected(b"PUBLISH\ndestination:/topic/a\n\n\0", "unknown command").await;
}

#[tokio::test]
async fn too_many_headers() {
    let mut bytes = b"SEND\ndestination:/topic/a\n".to_vec();
    for n in 0..9 {
        bytes.extend(format!("h{n}:v\n").as_bytes());
    }
    bytes.extend(b"\n\0");
    rejected(&bytes, "more than 8 headers").await;
}

#[tokio::test]
async fn header_line_too_long() {
    let bytes = format!("SEND\ndestination:/topic/{}\n\n\0", "a".repeat(300));
    rejected(bytes.as_bytes(), "longer than 256 bytes").await;
}

#[tokio::test]
async fn undefined_escape() {
    rejected(b"SEND\ndestination:/topic/a\nx:tab\\there\n\n\0", "undefined escape").await;
}

#[tokio::test]
async fn missing_destination() {
    rejected(b"SEND\n\nbody\0", "no 'destination' header").await;
}

#[tokio::test]
async fn bad_heart_beat_header_in_connect() {
    let broker = broker().await;
    let (mut client, answer) =
        Client::connect_with(broker.addr, &[("accept-version", "1.2"), ("heart-beat", "fast")]).await;
    assert_eq!(answer.command, Command::Error);
    assert!(answer.header("message").unwrap().contains("heart-beat"));
    client.expect_closed().await;
    broker.stop().await;
}
