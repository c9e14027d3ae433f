//! The WS-Security header as far as tolk reads it: one `wsse:UsernameToken` (OASIS WSS 1.0
//! UsernameToken Profile) with a user name and a password, in the `wsse:Security` header block
//! targeted at this node (WSS 1.0 SOAP Message Security §5, §6.2). Passwords are checked by the
//! broker, never here: this module says what was presented, or which WSS 1.0 §12 fault a
//! header tolk cannot process calls for.
//!
//! - A `wsu:Timestamp` beside the token is allowed and not checked: a PasswordText token sent
//!   over TLS has no use for it.
//! - Anything else in the header (a signature, an encrypted key, another kind of token) is
//!   `wsse:UnsupportedSecurityToken`, so that a client never believes tolk checked it.
//! - Two Security headers for this node (§5 allows one per role) or two UsernameTokens are
//!   `wsse:InvalidSecurity`: which one would count is ambiguous. A token without a user name,
//!   or with two, is `wsse:InvalidSecurityToken`.

use std::fmt;

use crate::dom::{Document, Node};
use crate::ns::{WSSE, WSU};

/// The WS-Security fault codes tolk answers with (WSS 1.0 SOAP Message Security §12): in SOAP
/// 1.1 they are the `faultcode`, in SOAP 1.2 the `Subcode` under `env:Sender`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityFault {
    /// `wsse:UnsupportedSecurityToken`: a token (or password type) tolk cannot check.
    UnsupportedSecurityToken,
    /// `wsse:InvalidSecurity`: the Security header itself cannot be processed.
    InvalidSecurity,
    /// `wsse:InvalidSecurityToken`: the token is malformed.
    InvalidSecurityToken,
    /// `wsse:FailedAuthentication`: the credentials were refused, or the user is not allowed
    /// to do this.
    FailedAuthentication,
}

impl SecurityFault {
    /// Local name of the fault code, in namespace [`WSSE`].
    pub fn local_name(self) -> &'static str {
        match self {
            SecurityFault::UnsupportedSecurityToken => "UnsupportedSecurityToken",
            SecurityFault::InvalidSecurity => "InvalidSecurity",
            SecurityFault::InvalidSecurityToken => "InvalidSecurityToken",
            SecurityFault::FailedAuthentication => "FailedAuthentication",
        }
    }

    /// The fault string WSS 1.0 §12 gives for the code, for reasons to begin with.
    pub fn description(self) -> &'static str {
        match self {
            SecurityFault::UnsupportedSecurityToken => "An unsupported token was provided",
            SecurityFault::InvalidSecurity => "An error was discovered processing the <wsse:Security> header",
            SecurityFault::InvalidSecurityToken => "An invalid security token was provided",
            SecurityFault::FailedAuthentication => "The security token could not be authenticated or authorized",
        }
    }
}

/// How a UsernameToken's password is written (UsernameToken Profile 1.0 §3.1, `Type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordType {
    /// `#PasswordText` (also when `Type` is absent, the profile's default): the password itself.
    Text,
    /// `#PasswordDigest`: Base64(SHA-1(nonce + created + password)).
    Digest,
    /// Any other `Type`, as written.
    Other(String),
}

/// A `wsse:UsernameToken`. Its `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct UsernameToken {
    /// `wsse:Username`, trimmed of XML whitespace.
    pub username: String,
    /// `wsse:Password` exactly as sent (entity references resolved, nothing trimmed); `None`
    /// without one.
    pub password: Option<String>,
    /// Its `Type`.
    pub password_type: PasswordType,
}

impl fmt::Debug for UsernameToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UsernameToken")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "…"))
            .field("password_type", &self.password_type)
            .finish()
    }
}

/// What the request's WS-Security header for this node held.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SecurityHeader {
    /// No `wsse:Security` header for this node, or one without a token (only a Timestamp).
    #[default]
    Absent,
    /// One UsernameToken.
    UsernameToken(UsernameToken),
    /// A header tolk cannot process, and the fault it calls for.
    Refused {
        /// The WSS fault code.
        fault: SecurityFault,
        /// Why, for the fault's reason.
        reason: String,
    },
}

impl SecurityHeader {
    fn refused(fault: SecurityFault, reason: impl Into<String>) -> Self {
        SecurityHeader::Refused { fault, reason: reason.into() }
    }

    /// The answer to a second Security header targeted at this node.
    pub(crate) fn duplicate() -> Self {
        SecurityHeader::refused(
            SecurityFault::InvalidSecurity,
            "more than one wsse:Security header is addressed to this node (WSS 1.0 §5)",
        )
    }
}

/// Reads one `wsse:Security` header block targeted at this node.
pub(crate) fn read_security(doc: &Document, security: &Node) -> SecurityHeader {
    let mut token = None;
    for child in doc.children(security) {
        if child.is(WSSE, "UsernameToken") {
            if token.is_some() {
                return SecurityHeader::refused(
                    SecurityFault::InvalidSecurity,
                    "more than one wsse:UsernameToken in wsse:Security",
                );
            }
            token = Some(child);
        } else if !child.is(WSU, "Timestamp") {
            return SecurityHeader::refused(
                SecurityFault::UnsupportedSecurityToken,
                format!(
                    "only a wsse:UsernameToken (and a wsu:Timestamp) is read in wsse:Security, not {}",
                    child.qname()
                ),
            );
        }
    }
    match token {
        None => SecurityHeader::Absent,
        Some(token) => read_username_token(doc, token),
    }
}

fn read_username_token(doc: &Document, token: &Node) -> SecurityHeader {
    let invalid = |reason: &str| SecurityHeader::refused(SecurityFault::InvalidSecurityToken, reason);
    let (Ok(username), Ok(password)) = (only_child(doc, token, "Username"), only_child(doc, token, "Password")) else {
        return invalid("a wsse:UsernameToken holds one wsse:Username and at most one wsse:Password");
    };
    let Some(username) = username.map(|u| u.text.trim_matches(crate::dom::is_xml_space)).filter(|u| !u.is_empty())
    else {
        return invalid("the wsse:UsernameToken has no wsse:Username");
    };
    let password_type = password.and_then(|p| p.attr(None, "Type")).map_or(PasswordType::Text, password_type);
    SecurityHeader::UsernameToken(UsernameToken {
        username: username.to_owned(),
        password: password.map(|p| p.text.clone()),
        password_type,
    })
}

/// The child `wsse:{local}`, if any; `Err` when there are two.
fn only_child<'a>(doc: &'a Document, node: &'a Node, local: &str) -> Result<Option<&'a Node>, ()> {
    let mut found = doc.children(node).filter(|c| c.is(WSSE, local));
    match (found.next(), found.next()) {
        (first, None) => Ok(first),
        _ => Err(()),
    }
}

/// The profile's `Type` URIs end in `#PasswordText` / `#PasswordDigest`; some older stacks
/// write the QName `wsse:PasswordText` instead (zeep's own documentation shows that form).
/// Both are read by their last part: a misread type can only make a password check fail.
fn password_type(value: &str) -> PasswordType {
    let value = value.trim();
    match value.rsplit(['#', ':']).next() {
        Some("PasswordText") => PasswordType::Text,
        Some("PasswordDigest") => PasswordType::Digest,
        _ => PasswordType::Other(value.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_types() {
        let profile = crate::ns::WSSE_USERNAME_TOKEN_PROFILE;
        assert_eq!(password_type(&format!("{profile}#PasswordText")), PasswordType::Text);
        assert_eq!(password_type(&format!("{profile}#PasswordDigest")), PasswordType::Digest);
        assert_eq!(password_type("wsse:PasswordText"), PasswordType::Text);
        assert_eq!(password_type("urn:x#Kerberos"), PasswordType::Other("urn:x#Kerberos".into()));
    }

    #[test]
    fn debug_hides_the_password() {
        let token = UsernameToken {
            username: "alice".into(),
            password: Some("s3cret".into()),
            password_type: PasswordType::Text,
        };
        let shown = format!("{:?}", SecurityHeader::UsernameToken(token));
        assert!(shown.contains("alice") && !shown.contains("s3cret"), "{shown}");
    }
}
