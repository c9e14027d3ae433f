//! [`StreamError`]: every way a client's bytes can be refused, named by the stream error
//! condition the server answers with before closing (RFC 6120 §4.9: stream errors are
//! unrecoverable).

/// Why the client's bytes were refused: each maps onto an RFC 6120 §4.9.3 stream error
/// condition, so the front end can answer with [`stream_error`](crate::stream_error) without a
/// mapping table of its own. The text says what was wrong, for the log and the `<text/>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// Not XML: bad markup, mismatched tags, bad references or characters (§4.9.3.13).
    #[error("not well-formed: {0}")]
    NotWellFormed(String),
    /// XML that RFC 6120 §11.1 forbids: a comment, a processing instruction, a DTD, or an
    /// entity reference other than the predefined ones (§4.9.3.18).
    #[error("restricted XML: {0}")]
    RestrictedXml(String),
    /// A [`Limits`](crate::Limits) bound was crossed (§4.9.3.14).
    #[error("policy violation: {0}")]
    PolicyViolation(String),
    /// The stream header is not `stream` in the streams namespace, or its content namespace is
    /// not `jabber:client` (§4.9.3.10).
    #[error("invalid namespace: {0}")]
    InvalidNamespace(String),
    /// An element or attribute prefix with no declaration in scope (§4.9.3.2).
    #[error("bad namespace prefix: {0}")]
    BadNamespacePrefix(String),
    /// The XML declaration names an encoding other than UTF-8, or the bytes are not UTF-8
    /// (§4.9.3.22, §11.6).
    #[error("unsupported encoding: {0}")]
    UnsupportedEncoding(String),
}

impl StreamError {
    /// The RFC 6120 condition element name, e.g. "not-well-formed": what goes into
    /// `<stream:error>`.
    pub fn condition(&self) -> &'static str {
        match self {
            StreamError::NotWellFormed(_) => "not-well-formed",
            StreamError::RestrictedXml(_) => "restricted-xml",
            StreamError::PolicyViolation(_) => "policy-violation",
            StreamError::InvalidNamespace(_) => "invalid-namespace",
            StreamError::BadNamespacePrefix(_) => "bad-namespace-prefix",
            StreamError::UnsupportedEncoding(_) => "unsupported-encoding",
        }
    }

    /// The human-readable part, without the condition: what the `<text/>` child carries.
    pub fn text(&self) -> &str {
        match self {
            StreamError::NotWellFormed(s)
            | StreamError::RestrictedXml(s)
            | StreamError::PolicyViolation(s)
            | StreamError::InvalidNamespace(s)
            | StreamError::BadNamespacePrefix(s)
            | StreamError::UnsupportedEncoding(s) => s,
        }
    }
}

/// Shorthand for the most common error.
pub(crate) fn malformed(what: &str) -> StreamError {
    StreamError::NotWellFormed(what.to_owned())
}
