//! Heart-beat negotiation, EOL heart-beats both ways, dropping silent clients, CONNECT timeout.
//! Intervals are tens of milliseconds so the suite stays fast.

use std::time::{Duration, Instant};

use stomp_codec::{Command, Decoded};
use tokio::time::sleep;
use tolk_core::RouterConfig;
use tolk_stomp::{HEART_BEAT_TOLERANCE_FACTOR, StompConfig};

use crate::client::{Broker, Client, config, frame};

fn heart_beats(send_ms: u64, receive_ms: u64) -> StompConfig {
    StompConfig {
        heart_beat_send: Duration::from_millis(send_ms),
        heart_beat_receive: Duration::from_millis(receive_ms),
        ..config()
    }
}

#[tokio::test]
async fn broker_sends_eol_heart_beats_at_the_negotiated_interval() {
    let broker = Broker::start_with(heart_beats(40, 0), RouterConfig::default()).await;
    let (mut client, connected) =
        Client::connect_with(broker.addr, &[("accept-version", "1.2"), ("host", "h"), ("heart-beat", "0,20")]).await;
    assert_eq!(connected.header("heart-beat"), Some("40,0"));
    let start = Instant::now();
    for _ in 0..3 {
        assert_eq!(client.recv_item().await, Some(Decoded::HeartBeat));
    }
    // max(sx = 40, cy = 20) = 40 ms apart.
    assert!(start.elapsed() >= Duration::from_millis(100), "{:?}", start.elapsed());
    broker.stop().await;
}

#[tokio::test]
async fn silent_client_is_dropped_after_twice_the_interval() {
    let broker = Broker::start_with(heart_beats(0, 100), RouterConfig::default()).await;
    let (mut client, connected) =
        Client::connect_with(broker.addr, &[("accept-version", "1.2"), ("host", "h"), ("heart-beat", "50,0")]).await;
    assert_eq!(connected.header("heart-beat"), Some("0,100"));
    let start = Instant::now();
    let error = client.expect_error().await;
    let elapsed = start.elapsed();
    assert!(error.header("message").unwrap().contains("heart-beat timeout"), "{error:?}");
    // max(cx = 50, sy = 100) = 100 ms, times the tolerance factor.
    let allowed = Duration::from_millis(100) * HEART_BEAT_TOLERANCE_FACTOR;
    assert!(elapsed >= allowed - Duration::from_millis(20), "dropped too early: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(2), "dropped too late: {elapsed:?}");
    broker.stop().await;
}

#[tokio::test]
async fn eol_heart_beats_keep_a_client_alive() {
    let broker = Broker::start_with(heart_beats(0, 150), RouterConfig::default()).await;
    let (mut client, _) =
        Client::connect_with(broker.addr, &[("accept-version", "1.2"), ("host", "h"), ("heart-beat", "50,0")]).await;
    // 600 ms is twice the 300 ms allowance; CRLF heart-beats are fine too.
    for n in 0..12 {
        client.send_raw(if n % 2 == 0 { b"\n" } else { b"\r\n" }).await;
        sleep(Duration::from_millis(50)).await;
    }
    assert!(client.with_receipt(frame(Command::Begin, &[("transaction", "alive")], "")).await.is_empty());
    broker.stop().await;
}

#[tokio::test]
async fn a_client_that_offers_no_heart_beats_is_not_dropped() {
    let broker = Broker::start_with(heart_beats(0, 50), RouterConfig::default()).await;
    let mut client = broker.client().await;
    sleep(Duration::from_millis(300)).await;
    assert!(client.with_receipt(frame(Command::Begin, &[("transaction", "t")], "")).await.is_empty());
    broker.stop().await;
}

#[tokio::test]
async fn a_connection_without_connect_times_out() {
    let stomp = StompConfig { connect_timeout: Duration::from_millis(100), ..config() };
    let broker = Broker::start_with(stomp, RouterConfig::default()).await;
    let mut client = Client::open(broker.addr).await;
    let error = client.expect_error().await;
    assert!(error.header("message").unwrap().contains("no CONNECT"));
    broker.stop().await;
}
