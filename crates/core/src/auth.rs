//! Who may connect: one authentication hook for every protocol. Each front end turns what its
//! client presented (MQTT username and password, STOMP login and passcode, AMQP PLAIN or
//! AMQPLAIN) into [`Credentials`] and asks the broker's one [`Authenticator`]; it only turns
//! the answer into its protocol's refusal (MQTT CONNACK 0x86 / 0x04, STOMP ERROR, AMQP 403).
//!
//! Without an `[auth]` section the authenticator in force accepts everyone ([`AllowAll`]);
//! `tolk-auth` plugs the password file and the access-control list in here, so no session code
//! knows where users come from. After a login the front end asks [`Authenticator::access`] for
//! the client's rights and hands them to its core session ([`crate::Session::restrict`]).

use std::net::SocketAddr;

use tolk_metrics::Protocol;

use crate::access::Rights;

/// What a client presented when it connected.
#[derive(Debug, Clone, Copy)]
pub struct Credentials<'a> {
    /// The protocol it spoke.
    pub protocol: Protocol,
    /// User name (MQTT username, STOMP `login`, AMQP login), if any.
    pub username: Option<&'a str>,
    /// Password (MQTT password, STOMP `passcode`, AMQP password), if any. Bytes: MQTT's
    /// password is binary data.
    pub password: Option<&'a [u8]>,
    /// The client id, where the protocol has one (MQTT).
    pub client_id: Option<&'a str>,
    /// The client's address.
    pub peer: SocketAddr,
    /// The user name was proven without a password: configuration maps this MQTT-SN client id
    /// to it, or a verified client certificate names it (`use_identity_as_username`).
    pub proven: bool,
}

/// Decides whether a client may open a session. A refusal's text is logged and, where the
/// protocol has room for text (STOMP ERROR, AMQP connection.close), sent to the client.
pub trait Authenticator: Send + Sync + 'static {
    /// `Ok` to accept; `Err(reason)` to refuse.
    fn authenticate(&self, credentials: &Credentials<'_>) -> Result<(), String>;

    /// Whether an accepted user name is proven (a password was checked), so that it may own
    /// things: an MQTT client id is then taken over only by the same user. False: names are
    /// labels anyone may use.
    fn verifies_users(&self) -> bool {
        false
    }

    /// The rights of a client that logged in as `username` (none: anonymous) with
    /// `client_id`. `None`: unrestricted, when no access-control list is configured.
    fn access(&self, _username: Option<&str>, _client_id: Option<&str>) -> Rights {
        None
    }
}

/// Accepts every client: the broker's behaviour until a user database exists.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl Authenticator for AllowAll {
    fn authenticate(&self, _: &Credentials<'_>) -> Result<(), String> {
        Ok(())
    }
}
