//! The CONNECT / STOMP handshake (spec "Connecting"): version negotiation, the `host` header,
//! credentials for the [`Authenticator`], heart-beat negotiation and the CONNECTED answer.
//! Pure: it reads a frame and the configuration and returns what was agreed.

use std::net::SocketAddr;
use std::time::Duration;

use stomp_codec::{Frame, HeartBeat, HeartBeatSchedule, Version};
use tolk_core::CloseReason;

use crate::config::StompConfig;
use crate::error::StompError;
use tolk_core::Protocol;
use tolk_core::access::Rights;
use tolk_core::auth::{Authenticator, Credentials};

/// The `server` header of CONNECTED.
pub(crate) const SERVER: &str = concat!("tolk/", env!("CARGO_PKG_VERSION"));

/// What a successful handshake agreed on.
#[derive(Debug, Clone)]
pub(crate) struct Agreed {
    /// The protocol version for the rest of the connection.
    pub version: Version,
    /// Heart-beats in both directions (none under 1.0, which has no heart-beating).
    pub schedule: HeartBeatSchedule,
    /// The answer to send.
    pub connected: Frame,
    /// The publisher id carried in messages' origin: `client-id` header, else `login`.
    pub client_id: String,
    /// What the client may do (`None`: no access-control list).
    pub rights: Rights,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The broker's `sx,sy` heart-beat offer.
pub(crate) fn server_heart_beat(config: &StompConfig) -> HeartBeat {
    HeartBeat::new(millis(config.heart_beat_send), millis(config.heart_beat_receive))
}

/// Answers a CONNECT or STOMP frame, or says why the connection must be refused.
/// Who is connecting, as the transport knows it.
pub(crate) struct Client<'a> {
    /// Its address.
    pub peer: SocketAddr,
    /// The user its TLS client certificate names, if `[tls] use_identity_as_username`.
    pub identity: Option<&'a str>,
    /// The core session's id, sent in CONNECTED's `session` header.
    pub session_id: u64,
}

pub(crate) fn handshake(
    frame: &Frame,
    config: &StompConfig,
    auth: &dyn Authenticator,
    client: Client<'_>,
) -> Result<Agreed, StompError> {
    let Client { peer, identity, session_id } = client;
    let version = Version::negotiate(frame.header("accept-version"), &Version::ALL).map_err(|e| {
        // Spec "Protocol Negotiation": ERROR with a `version` header listing ours.
        StompError::protocol(format!("unsupported protocol version: {e}"))
            .with_header("version", e.version_header())
            .with_detail(format!("Supported protocol versions are {}", e.version_header().replace(',', " ")))
    })?;

    let credentials = Credentials {
        protocol: Protocol::Stomp,
        username: frame.header("login"),
        password: frame.header("passcode").map(str::as_bytes),
        // STOMP has no client id of its own: the `client-id` header (ActiveMQ's) or the login.
        client_id: frame.header("client-id").or(frame.header("login")),
        peer,
        proven: false,
    }
    .with_identity(identity);
    auth.authenticate(&credentials).map_err(|why| StompError::new(CloseReason::AuthFailed, why))?;

    let ours = server_heart_beat(config);
    let schedule = if version == Version::V1_0 {
        HeartBeatSchedule { client_to_server: None, server_to_client: None }
    } else {
        let theirs = HeartBeat::parse(frame.header("heart-beat")).map_err(|e| StompError::protocol(e.to_string()))?;
        HeartBeat::negotiate(theirs, ours)
    };

    let connected = Frame::connected(version, ours, SERVER).with_header("session", session_id.to_string());
    let client_id = credentials.client_id.unwrap_or_default().to_owned();
    let rights = auth.access(credentials.username, credentials.client_id);
    Ok(Agreed { version, schedule, connected, client_id, rights })
}

#[cfg(test)]
mod tests {
    use super::*;
    use stomp_codec::Command;
    use tolk_core::auth::AllowAll;

    fn peer() -> SocketAddr {
        "127.0.0.1:1".parse().unwrap()
    }

    fn connect(headers: &[(&str, &str)]) -> Frame {
        headers.iter().fold(Frame::new(Command::Connect), |f, (n, v)| f.with_header(*n, *v))
    }

    #[test]
    fn negotiates_highest_version_and_heart_beats() {
        let config = StompConfig {
            heart_beat_send: Duration::from_millis(500),
            heart_beat_receive: Duration::from_millis(1000),
            ..Default::default()
        };
        let frame = connect(&[("accept-version", "1.1,1.2"), ("host", "/"), ("heart-beat", "2000,100")]);
        let agreed =
            handshake(&frame, &config, &AllowAll, Client { peer: peer(), identity: None, session_id: 7 }).unwrap();
        assert_eq!(agreed.version, Version::V1_2);
        assert_eq!(agreed.schedule.client_to_server, Some(Duration::from_millis(2000)));
        assert_eq!(agreed.schedule.server_to_client, Some(Duration::from_millis(500)));
        assert_eq!(agreed.connected.header("heart-beat"), Some("500,1000"));
        assert_eq!(agreed.connected.header("version"), Some("1.2"));
        assert_eq!(agreed.connected.header("session"), Some("7"));
    }

    #[test]
    fn refuses_unknown_versions_listing_ours() {
        let frame = connect(&[("accept-version", "2.0")]);
        let e = handshake(
            &frame,
            &StompConfig::default(),
            &AllowAll,
            Client { peer: peer(), identity: None, session_id: 1 },
        )
        .unwrap_err();
        assert_eq!(e.headers, vec![("version", "1.0,1.1,1.2".to_owned())]);
    }

    #[test]
    fn stomp_1_0_has_no_heart_beats() {
        let frame = connect(&[("heart-beat", "10,10")]);
        let agreed = handshake(
            &frame,
            &StompConfig::default(),
            &AllowAll,
            Client { peer: peer(), identity: None, session_id: 1 },
        )
        .unwrap();
        assert_eq!(agreed.version, Version::V1_0);
        assert_eq!(agreed.schedule.client_to_server, None);
        assert_eq!(agreed.connected.header("heart-beat"), None);
    }

    #[test]
    fn authenticator_sees_credentials() {
        struct OnlyBob;
        impl Authenticator for OnlyBob {
            fn authenticate(&self, c: &Credentials<'_>) -> Result<(), String> {
                match (c.username, c.password, c.proven) {
                    (Some("bob"), Some(b"pw"), false) | (Some("bob"), None, true) => Ok(()),
                    _ => Err("bad credentials".into()),
                }
            }
        }
        let ok = connect(&[("accept-version", "1.2"), ("login", "bob"), ("passcode", "pw")]);
        assert_eq!(
            handshake(&ok, &StompConfig::default(), &OnlyBob, Client { peer: peer(), identity: None, session_id: 1 })
                .unwrap()
                .client_id,
            "bob"
        );
        let bad = connect(&[("accept-version", "1.2"), ("login", "eve")]);
        let e =
            handshake(&bad, &StompConfig::default(), &OnlyBob, Client { peer: peer(), identity: None, session_id: 1 })
                .unwrap_err();
        assert_eq!(e.reason, CloseReason::AuthFailed);
        // A client certificate naming bob is bob, whatever login it sends.
        let by_certificate = Client { peer: peer(), identity: Some("bob"), session_id: 1 };
        assert!(handshake(&bad, &StompConfig::default(), &OnlyBob, by_certificate).is_ok());
    }
}
