//! [`Version`] and the protocol negotiation rule of the CONNECT handshake (spec "Protocol
//! Negotiation"). Pure functions: the session decides what to do with the result.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// A STOMP protocol version. The order is chronological, so `max` picks the newest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    /// STOMP 1.0: no escapes, no heart-beats, no NACK.
    V1_0,
    /// STOMP 1.1: header escapes (without `\r`), heart-beats, NACK.
    V1_1,
    /// STOMP 1.2: CRLF line endings, `\r` escape, `ack` header on MESSAGE.
    V1_2,
}

impl Version {
    /// Every version, oldest first; a server supporting everything passes this to
    /// [`Version::negotiate`].
    pub const ALL: [Version; 3] = [Version::V1_0, Version::V1_1, Version::V1_2];

    /// The version as written in `accept-version` and `version` headers.
    pub const fn as_str(self) -> &'static str {
        match self {
            Version::V1_0 => "1.0",
            Version::V1_1 => "1.1",
            Version::V1_2 => "1.2",
        }
    }

    /// Whether header escapes apply to frames other than CONNECT/CONNECTED (spec "Value
    /// Encoding"; 1.0 had no escaping).
    pub const fn escapes_headers(self) -> bool {
        !matches!(self, Version::V1_0)
    }

    /// Picks the version for a session from the client's `accept-version` header (`None` when
    /// absent) and the versions this server supports.
    ///
    /// Spec "Protocol Negotiation": a client that sends no `accept-version` speaks 1.0;
    /// otherwise the server answers with the highest version both sides support, and with an
    /// ERROR frame listing its own versions when there is none. Unknown entries in the
    /// client's list (say `2.0`) are ignored; blanks around entries are tolerated.
    pub fn negotiate(accept_version: Option<&str>, supported: &[Version]) -> Result<Version, NegotiationError> {
        let chosen = match accept_version {
            None => supported.contains(&Version::V1_0).then_some(Version::V1_0),
            Some(list) => list
                .split(',')
                .filter_map(|entry| entry.trim().parse::<Version>().ok())
                .filter(|version| supported.contains(version))
                .max(),
        };
        chosen.ok_or_else(|| {
            let mut supported = supported.to_vec();
            supported.sort_unstable();
            supported.dedup();
            NegotiationError { requested: accept_version.unwrap_or("1.0").chars().take(64).collect(), supported }
        })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text is not one of `1.0`, `1.1`, `1.2`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown STOMP version {0:?}")]
pub struct UnknownVersion(String);

impl FromStr for Version {
    type Err = UnknownVersion;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "1.0" => Ok(Version::V1_0),
            "1.1" => Ok(Version::V1_1),
            "1.2" => Ok(Version::V1_2),
            other => Err(UnknownVersion(other.chars().take(16).collect())),
        }
    }
}

/// No version is acceptable to both sides. Spec "Protocol Negotiation": the server answers
/// with an ERROR frame whose `version` header lists what it supports (see
/// [`NegotiationError::version_header`]) and closes the connection.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("client accepts {requested:?}, supported protocol versions are {}", self.spaced())]
pub struct NegotiationError {
    /// What the client asked for (`1.0` when it sent no `accept-version`), at most 64 chars.
    pub requested: String,
    /// What the server supports, oldest first.
    pub supported: Vec<Version>,
}

impl NegotiationError {
    /// The value for the ERROR frame's `version` header, e.g. `1.1,1.2`.
    pub fn version_header(&self) -> String {
        self.join(",")
    }

    fn spaced(&self) -> String {
        self.join(" ")
    }

    fn join(&self, separator: &str) -> String {
        self.supported.iter().map(|version| version.as_str()).collect::<Vec<_>>().join(separator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_accept_version_means_1_0() {
        assert_eq!(Version::negotiate(None, &Version::ALL), Ok(Version::V1_0));
        let err = Version::negotiate(None, &[Version::V1_2]).unwrap_err();
        assert_eq!(err.version_header(), "1.2");
    }

    #[test]
    fn picks_highest_common_version() {
        // Spec "Protocol Negotiation" example: accept-version:1.0,1.1,2.0 → 1.1 for a server
        // that supports 1.1 (and 1.2 is not offered by the client).
        assert_eq!(Version::negotiate(Some("1.0,1.1,2.0"), &Version::ALL), Ok(Version::V1_1));
        assert_eq!(Version::negotiate(Some("1.2, 1.0"), &[Version::V1_0, Version::V1_1]), Ok(Version::V1_0));
        assert_eq!(Version::negotiate(Some("1.1,1.2"), &Version::ALL), Ok(Version::V1_2));
    }

    #[test]
    fn no_common_version_lists_server_versions() {
        let err = Version::negotiate(Some("2.0,2.1"), &[Version::V1_2, Version::V1_1]).unwrap_err();
        assert_eq!(err.supported, [Version::V1_1, Version::V1_2]);
        assert_eq!(err.version_header(), "1.1,1.2");
        assert_eq!(err.to_string(), "client accepts \"2.0,2.1\", supported protocol versions are 1.1 1.2");
        assert!(Version::negotiate(Some(""), &Version::ALL).is_err());
    }
}
