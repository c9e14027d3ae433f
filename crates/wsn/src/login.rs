//! Who sent a request. WS-N has no connection to log in once, so every request presents its
//! credentials: HTTP Basic (`Authorization`, RFC 7617), or a WS-Security UsernameToken with a
//! `#PasswordText` password in the SOAP header (OASIS WSS 1.0 UsernameToken Profile). The
//! broker's one [`Authenticator`] checks them as it checks an MQTT CONNECT (it remembers a
//! success, so a request costs a digest, not a PBKDF2 run), and its rights come with the
//! [`Caller`]. Nothing presented is an anonymous request, which the authenticator accepts or
//! refuses (`allow_anonymous`).
//!
//! This module only decides; [`crate::http`] answers, counts and logs. A password never leaves
//! here: refusals carry the authenticator's reason, which names at most the user.

use std::net::SocketAddr;

use axum::http::HeaderValue;
use tolk_core::Protocol;
use tolk_core::access::Rights;
use tolk_core::auth::{Authenticator, BasicCredentials, Credentials};
use wsn_xml::{FaultKind, PasswordType, SecurityFault, SecurityHeader};

use crate::fault::Refusal;

/// The user behind a request and what it may do.
#[derive(Debug)]
pub(crate) struct Caller {
    /// The user name it logged in with; `None`: anonymous.
    pub user: Option<String>,
    /// Its rights; `None`: unrestricted (no access-control list).
    pub rights: Rights,
}

/// A request whose credentials were refused.
#[derive(Debug)]
pub(crate) struct LoginRefused {
    /// The fault to answer with.
    pub refusal: Refusal,
    /// Answer `401` with a Basic challenge: the client used HTTP Basic or presented nothing,
    /// so HTTP is where it looks for credentials. A refused UsernameToken is a SOAP fault's
    /// `500`.
    pub challenge: bool,
    /// The user name presented, for the log.
    pub user: Option<String>,
}

impl LoginRefused {
    fn new(fault: SecurityFault, reason: impl Into<String>, challenge: bool, user: Option<&str>) -> Self {
        let refusal = Refusal::new(FaultKind::Security(fault), reason);
        LoginRefused { refusal, challenge, user: user.map(str::to_owned) }
    }
}

/// Checks what the request presented and returns its caller.
pub(crate) fn log_in(
    auth: &dyn Authenticator,
    authorization: Option<&HeaderValue>,
    security: &SecurityHeader,
    peer: SocketAddr,
) -> Result<Caller, LoginRefused> {
    let basic = match authorization {
        None => None,
        Some(value) => Some(value.to_str().ok().and_then(BasicCredentials::from_header).ok_or_else(|| {
            LoginRefused::new(
                SecurityFault::FailedAuthentication,
                "the Authorization header is not HTTP Basic with user:password, the only scheme this endpoint reads",
                true,
                None,
            )
        })?),
    };
    let token = match security {
        SecurityHeader::Absent => None,
        SecurityHeader::Refused { fault, reason } => {
            return Err(LoginRefused::new(*fault, format!("{}: {reason}", fault.description()), false, None));
        }
        SecurityHeader::UsernameToken(token) => {
            let unsupported = |why: String| {
                LoginRefused::new(
                    SecurityFault::UnsupportedSecurityToken,
                    format!("{why}: only a UsernameToken with a #PasswordText password (sent over TLS) is supported"),
                    false,
                    Some(&token.username),
                )
            };
            match &token.password_type {
                PasswordType::Text => Some((token.username.as_str(), token.password.as_deref())),
                PasswordType::Digest => {
                    return Err(unsupported(
                        "a #PasswordDigest cannot be checked against the broker's salted password hashes".into(),
                    ));
                }
                PasswordType::Other(other) => {
                    return Err(unsupported(format!("password Type {:?} is unknown", crate::fault::shorten(other))));
                }
            }
        }
    };
    let check = |user: Option<&str>, password: Option<&str>, challenge: bool| {
        let credentials = Credentials {
            protocol: Protocol::Wsn,
            username: user,
            password: password.map(str::as_bytes),
            client_id: None,
            peer,
            proven: false,
        };
        auth.authenticate(&credentials).map_err(|why| {
            let fault = SecurityFault::FailedAuthentication;
            LoginRefused::new(fault, format!("{}: {why}", fault.description()), challenge, user)
        })
    };
    let user = match (&basic, token) {
        (None, None) => check(None, None, true).map(|()| None)?,
        (Some(basic), None) => {
            check(Some(&basic.username), Some(&basic.password), true).map(|()| Some(&*basic.username))?
        }
        (None, Some((user, password))) => check(Some(user), password, false).map(|()| Some(user))?,
        // Both: each is checked, and they must name one user, so that neither decides alone.
        (Some(basic), Some((user, password))) => {
            if basic.username != user {
                return Err(LoginRefused::new(
                    SecurityFault::FailedAuthentication,
                    "HTTP Basic and the UsernameToken name different users",
                    true,
                    Some(user),
                ));
            }
            check(Some(&basic.username), Some(&basic.password), true)?;
            check(Some(user), password, true).map(|()| Some(user))?
        }
    };
    Ok(Caller { user: user.map(str::to_owned), rights: auth.access(user, None) })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use wsn_xml::UsernameToken;

    use super::*;

    /// A user name and password the authenticator was asked about.
    type Checked = (Option<String>, Option<Vec<u8>>);

    /// Accepts alice with "pw", and anonymous clients when `anonymous`; records every check.
    struct Alice {
        anonymous: bool,
        checked: Mutex<Vec<Checked>>,
    }

    impl Authenticator for Alice {
        fn authenticate(&self, c: &Credentials<'_>) -> Result<(), String> {
            assert_eq!(c.protocol, Protocol::Wsn);
            self.checked.lock().unwrap().push((c.username.map(Into::into), c.password.map(Into::into)));
            match (c.username, c.password) {
                (None, _) if self.anonymous => Ok(()),
                (Some("alice"), Some(b"pw")) => Ok(()),
                _ => Err("refused".into()),
            }
        }
    }

    fn alice(anonymous: bool) -> Alice {
        Alice { anonymous, checked: Mutex::default() }
    }

    fn token(user: &str, password: &str, password_type: PasswordType) -> SecurityHeader {
        SecurityHeader::UsernameToken(UsernameToken {
            username: user.into(),
            password: Some(password.into()),
            password_type,
        })
    }

    fn peer() -> SocketAddr {
        "127.0.0.1:9".parse().unwrap()
    }

    // "alice:pw" and "alice:no".
    const ALICE_PW: &str = "Basic YWxpY2U6cHc=";
    const ALICE_NO: &str = "Basic YWxpY2U6bm8=";

    fn basic(value: &'static str) -> HeaderValue {
        HeaderValue::from_static(value)
    }

    fn fault_of(refused: &LoginRefused) -> SecurityFault {
        match refused.refusal.kind {
            FaultKind::Security(fault) => fault,
            ref other => panic!("{other:?}"),
        }
    }

    #[test]
    fn basic_token_both_and_nothing() {
        let auth = alice(false);
        let caller = log_in(&auth, Some(&basic(ALICE_PW)), &SecurityHeader::Absent, peer()).unwrap();
        assert_eq!(caller.user.as_deref(), Some("alice"));
        let caller = log_in(&auth, None, &token("alice", "pw", PasswordType::Text), peer()).unwrap();
        assert_eq!(caller.user.as_deref(), Some("alice"));
        let both = log_in(&auth, Some(&basic(ALICE_PW)), &token("alice", "pw", PasswordType::Text), peer());
        assert_eq!(both.unwrap().user.as_deref(), Some("alice"));

        let refused = log_in(&auth, Some(&basic(ALICE_NO)), &SecurityHeader::Absent, peer()).unwrap_err();
        assert_eq!((fault_of(&refused), refused.challenge), (SecurityFault::FailedAuthentication, true));
        let refused = log_in(&auth, None, &token("alice", "no", PasswordType::Text), peer()).unwrap_err();
        assert_eq!((fault_of(&refused), refused.challenge), (SecurityFault::FailedAuthentication, false));
        let refused = log_in(&auth, None, &SecurityHeader::Absent, peer()).unwrap_err();
        assert_eq!((fault_of(&refused), refused.challenge), (SecurityFault::FailedAuthentication, true));
        assert!(log_in(&alice(true), None, &SecurityHeader::Absent, peer()).unwrap().user.is_none());
    }

    #[test]
    fn both_must_pass_and_name_one_user() {
        let auth = alice(false);
        let wrong_token = log_in(&auth, Some(&basic(ALICE_PW)), &token("alice", "no", PasswordType::Text), peer());
        assert!(wrong_token.is_err());
        let wrong_basic = log_in(&auth, Some(&basic(ALICE_NO)), &token("alice", "pw", PasswordType::Text), peer());
        assert!(wrong_basic.is_err());
        let two_users = log_in(&auth, Some(&basic(ALICE_PW)), &token("bob", "pw", PasswordType::Text), peer());
        assert!(two_users.unwrap_err().challenge);
    }

    #[test]
    fn digests_other_schemes_and_unusable_headers_are_refused_unchecked() {
        let auth = alice(true);
        let refused = log_in(&auth, None, &token("alice", "x", PasswordType::Digest), peer()).unwrap_err();
        assert_eq!(fault_of(&refused), SecurityFault::UnsupportedSecurityToken);
        assert!(refused.refusal.reason.contains("PasswordText"), "{}", refused.refusal.reason);
        let other = PasswordType::Other("urn:x".into());
        let refused = log_in(&auth, None, &token("alice", "x", other), peer()).unwrap_err();
        assert_eq!(fault_of(&refused), SecurityFault::UnsupportedSecurityToken);
        let bearer = HeaderValue::from_static("Bearer abc");
        let refused = log_in(&auth, Some(&bearer), &SecurityHeader::Absent, peer()).unwrap_err();
        assert!(refused.challenge, "not anonymous: the client meant to log in");
        let invalid = SecurityHeader::Refused { fault: SecurityFault::InvalidSecurity, reason: "two".into() };
        assert_eq!(fault_of(&log_in(&auth, None, &invalid, peer()).unwrap_err()), SecurityFault::InvalidSecurity);
        assert!(auth.checked.lock().unwrap().is_empty(), "nothing reached the authenticator");
    }

    #[test]
    fn refusals_never_carry_the_password() {
        let auth = alice(false);
        let refused = log_in(&auth, None, &token("alice", "s3cret-pw", PasswordType::Text), peer()).unwrap_err();
        assert!(!format!("{refused:?}").contains("s3cret-pw"));
    }
}
