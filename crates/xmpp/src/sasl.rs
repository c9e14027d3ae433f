//! SASL (RFC 6120 §6) as this server offers it: PLAIN (RFC 4616), checked against the broker's
//! users, and ANONYMOUS (RFC 4505) where the broker has no user database. Pure: it decodes what
//! the client sent and says who it claims to be; the session asks the authenticator.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The SASL namespace.
pub(crate) const NS: &str = "urn:ietf:params:xml:ns:xmpp-sasl";

/// A mechanism the server offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mechanism {
    /// User name and password in one message.
    Plain,
    /// No credentials.
    Anonymous,
}

impl Mechanism {
    /// The mechanism a client named, if offered.
    pub fn parse(name: &str) -> Option<Mechanism> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            "ANONYMOUS" => Some(Mechanism::Anonymous),
            _ => None,
        }
    }
}

/// What a PLAIN message claims.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Plain {
    /// The identity to act as, when it differs from the user (not supported: must be empty
    /// or the user's own JID).
    pub authzid: String,
    /// The user name.
    pub authcid: String,
    /// The password.
    pub password: Vec<u8>,
}

/// Why a SASL exchange failed: the RFC 6120 §6.5 failure condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The response was not base64 or not a PLAIN message.
    IncorrectEncoding,
    /// The response was malformed in another way.
    MalformedRequest,
    /// The credentials were refused.
    NotAuthorized,
    /// The client asked to act as someone else.
    InvalidAuthzid,
    /// The mechanism is not offered.
    InvalidMechanism,
    /// The client aborted.
    Aborted,
}

impl Failure {
    /// The condition element's name.
    pub fn condition(self) -> &'static str {
        match self {
            Failure::IncorrectEncoding => "incorrect-encoding",
            Failure::MalformedRequest => "malformed-request",
            Failure::NotAuthorized => "not-authorized",
            Failure::InvalidAuthzid => "invalid-authzid",
            Failure::InvalidMechanism => "invalid-mechanism",
            Failure::Aborted => "aborted",
        }
    }
}

/// Decodes the base64 text of `<auth/>` or `<response/>`: `=` is an empty response (RFC 6120
/// §6.4.2), and whitespace is not allowed.
pub(crate) fn decode(text: &str) -> Result<Vec<u8>, Failure> {
    match text {
        "=" | "" => Ok(Vec::new()),
        text => STANDARD.decode(text).map_err(|_| Failure::IncorrectEncoding),
    }
}

/// Reads a PLAIN message: `authzid NUL authcid NUL password`.
pub(crate) fn plain(message: &[u8]) -> Result<Plain, Failure> {
    let mut parts = message.splitn(3, |&b| b == 0);
    let (Some(authzid), Some(authcid), Some(password)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(Failure::MalformedRequest);
    };
    let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).map_err(|_| Failure::MalformedRequest);
    let plain = Plain { authzid: text(authzid)?, authcid: text(authcid)?, password: password.to_vec() };
    if plain.authcid.is_empty() || plain.authcid.len() > 1023 || plain.authcid.contains(['@', '/', ' ']) {
        return Err(Failure::NotAuthorized);
    }
    Ok(plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_messages_are_split_and_checked() {
        let message = decode("AGp1bGlldABwYXNz").unwrap();
        assert_eq!(
            plain(&message),
            Ok(Plain { authzid: String::new(), authcid: "juliet".into(), password: b"pass".to_vec() })
        );
        assert_eq!(plain(b"juliet\0pass"), Err(Failure::MalformedRequest));
        assert_eq!(plain(b"\0\0pass"), Err(Failure::NotAuthorized));
        assert_eq!(decode("not base64!"), Err(Failure::IncorrectEncoding));
        assert_eq!(decode("="), Ok(Vec::new()));
    }
}
