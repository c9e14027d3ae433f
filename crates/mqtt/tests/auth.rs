//! CONNECT credentials go to the broker's one authenticator (`FrontEndContext::auth`): a
//! refusal is CONNACK 0x86 (MQTT 5) or 0x04 (3.1.1), then the close, and is counted.

mod common;

use std::sync::Arc;

use common::{Raw, config, eventually, start_with_auth};
use rmqtt_codec::{types, v3, v5};
use tolk_core::auth::{Authenticator, Credentials};
use tolk_core::{CloseReason, Protocol, RouterConfig};

/// Lets in `bob` with password `pw`, and no one else; checks what it is shown.
struct OnlyBob;

impl Authenticator for OnlyBob {
    fn authenticate(&self, c: &Credentials<'_>) -> Result<(), String> {
        assert_eq!(c.protocol, Protocol::Mqtt);
        assert!(c.client_id.is_some_and(|id| id.starts_with("client")), "the client id is shown: {c:?}");
        assert!(c.peer.ip().is_loopback());
        match (c.username, c.password) {
            (Some("bob"), Some(b"pw")) => Ok(()),
            _ => Err("unknown user or wrong password".into()),
        }
    }
}

fn v5_connect(user: &str, password: &'static [u8]) -> v5::Connect {
    v5::Connect { username: Some(user.into()), password: Some(password.into()), ..Raw::connect5("client-5") }
}

#[tokio::test]
async fn wrong_credentials_are_refused_with_each_levels_code_and_counted() {
    let broker = start_with_auth(config(), RouterConfig::default(), Arc::new(OnlyBob)).await;

    let (mut raw, ack) = Raw::handshake5(broker.port, v5_connect("eve", b"pw")).await;
    assert_eq!(ack.reason_code, v5::ConnectAckReason::BadUserNameOrPassword, "CONNACK 0x86");
    raw.expect_closed().await;
    let (_bob, ack) = Raw::handshake5(broker.port, v5_connect("bob", b"pw")).await;
    assert_eq!(ack.reason_code, v5::ConnectAckReason::Success);

    let mut raw = Raw::connect(broker.port).await;
    let connect = v3::Connect {
        protocol: types::Protocol(4),
        clean_session: true,
        keep_alive: 30,
        client_id: "client-3".into(),
        username: Some("bob".into()),
        password: Some(b"wrong"[..].into()),
        ..Default::default()
    };
    raw.send3(v3::Packet::Connect(Box::new(connect))).await;
    match raw.recv3().await {
        Some(v3::Packet::ConnectAck(ack)) => {
            assert_eq!(ack.return_code, v3::ConnectAckReason::BadUserNameOrPassword, "CONNACK 0x04")
        }
        other => panic!("expected CONNACK, got {other:?}"),
    }
    raw.expect_closed().await;

    let closed = || broker.metrics().protocol(Protocol::Mqtt).closed_count(CloseReason::AuthFailed);
    eventually("two auth_failed closes", || closed() == 2).await;
    broker.stop().await;
}

/// Alice and bob, both with password `pw`, and names that are proven.
struct AliceAndBob;

impl Authenticator for AliceAndBob {
    fn authenticate(&self, c: &Credentials<'_>) -> Result<(), String> {
        match (c.username, c.password) {
            (Some("alice" | "bob"), Some(b"pw")) => Ok(()),
            _ => Err("unknown user or wrong password".into()),
        }
    }

    fn verifies_users(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn a_client_id_is_taken_over_only_by_the_same_user() {
    let broker = start_with_auth(config(), RouterConfig::default(), Arc::new(AliceAndBob)).await;
    let connect = |user: &str| v5::Connect {
        username: Some(user.into()),
        password: Some(b"pw"[..].into()),
        ..Raw::connect5("client-shared")
    };
    let (mut alice, ack) = Raw::handshake5(broker.port, connect("alice")).await;
    assert_eq!(ack.reason_code, v5::ConnectAckReason::Success);

    // Bob may log in, but not take alice's client id: CONNACK 0x87, and alice stays connected.
    let (mut bob, ack) = Raw::handshake5(broker.port, connect("bob")).await;
    assert_eq!(ack.reason_code, v5::ConnectAckReason::NotAuthorized);
    bob.expect_closed().await;
    alice.send5(v5::Packet::PingRequest).await;
    assert!(matches!(alice.recv5().await, Some(v5::Packet::PingResponse)), "alice was not disturbed");

    // Alice herself takes it over: the old connection is told why (0x8E).
    let (_again, ack) = Raw::handshake5(broker.port, connect("alice")).await;
    assert_eq!(ack.reason_code, v5::ConnectAckReason::Success);
    match alice.recv5().await {
        Some(v5::Packet::Disconnect(d)) => assert_eq!(d.reason_code, v5::DisconnectReasonCode::SessionTakenOver),
        other => panic!("expected DISCONNECT 0x8E, got {other:?}"),
    }
    broker.stop().await;
}
