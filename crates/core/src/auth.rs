//! Who may connect: one authentication hook for every protocol. Each front end turns what its
//! client presented (MQTT username and password, STOMP login and passcode, AMQP PLAIN or
//! AMQPLAIN) into [`Credentials`] and asks the broker's one [`Authenticator`]; it only turns
//! the answer into its protocol's refusal (MQTT CONNACK 0x86 / 0x04, STOMP ERROR, AMQP 403).
//!
//! Without an `[auth]` section the authenticator in force accepts everyone ([`AllowAll`]);
//! `tolk-auth` plugs the password file and the access-control list in here, so no session code
//! knows where users come from. After a login the front end asks [`Authenticator::access`] for
//! the client's rights and hands them to its core session ([`crate::Session::restrict`]).

use std::fmt;
use std::net::SocketAddr;

use base64::Engine;
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

impl<'a> Credentials<'a> {
    /// The credentials with a client certificate's name in force, if there is one: it is the
    /// user, proven by the TLS handshake, and the user name and password sent are set aside.
    pub fn with_identity(self, identity: Option<&'a str>) -> Self {
        match identity {
            Some(name) => Credentials { username: Some(name), password: None, proven: true, ..self },
            None => self,
        }
    }
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

/// The user name and password of an HTTP `Authorization: Basic` header (RFC 7617). One parser
/// for every HTTP route that logs users in (`/metrics` and `/api/*`, the WS-Notification
/// endpoint), so they cannot disagree on what a header means.
#[derive(Clone, PartialEq, Eq)]
pub struct BasicCredentials {
    /// The user id, before the first `:`.
    pub username: String,
    /// The password, after it (may hold `:`).
    pub password: String,
}

impl BasicCredentials {
    /// Reads an `Authorization` header value. `None` when it is not the Basic scheme (matched
    /// case-insensitively, RFC 9110 §11.1), not base64, not UTF-8 or has no `:`.
    pub fn from_header(value: &str) -> Option<Self> {
        let (scheme, encoded) = value.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
        let decoded = String::from_utf8(decoded).ok()?;
        let (username, password) = decoded.split_once(':')?;
        Some(BasicCredentials { username: username.to_owned(), password: password.to_owned() })
    }
}

/// Never shows the password, so that a stray `{:?}` cannot log it.
impl fmt::Debug for BasicCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BasicCredentials").field("username", &self.username).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials() {
        // RFC 7617 §2's example, and a password holding ':' and a space.
        let aladdin = BasicCredentials::from_header("Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==").unwrap();
        assert_eq!((aladdin.username.as_str(), aladdin.password.as_str()), ("Aladdin", "open sesame"));
        let colon = BasicCredentials::from_header("basic YWxpY2U6YTpiIGM=").unwrap();
        assert_eq!((colon.username.as_str(), colon.password.as_str()), ("alice", "a:b c"));
        assert!(!format!("{colon:?}").contains("a:b c"), "Debug hides the password");
        for bad in ["Bearer QWxhZGRpbjpvcGVuIHNlc2FtZQ==", "Basic !!!", "Basic YWxpY2U=", "Basic", ""] {
            assert_eq!(BasicCredentials::from_header(bad), None, "{bad}");
        }
    }
}
