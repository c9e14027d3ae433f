//! [`Limits`]: the bounds that keep one client from exhausting a small gateway's memory or CPU.

/// Sizes the reader enforces; crossing any of them is a [`StreamError::PolicyViolation`]
/// (RFC 6120 §4.9.3.14), detected on partial input, not when the element completes.
///
/// [`StreamError::PolicyViolation`]: crate::StreamError::PolicyViolation
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest top-level element (stanza) in bytes as received, markup included; the stream
    /// header and the XML declaration are each bounded by it too. Default 65 536: the
    /// stanza-size floor RFC 6120 §13.12 asks servers to accept (10 000) with room for pubsub
    /// payloads. Namespace names, which every element holds a copy of, may add up to four
    /// times this per stanza: one long name inherited by many elements is refused.
    pub max_stanza_bytes: usize,
    /// Deepest nesting inside a stanza, its top element being depth 1. Default 16: a pubsub
    /// publish of an Atom entry's title is at depth 6.
    pub max_depth: usize,
    /// Most attributes on one element as [`Element::attrs`](crate::Element::attrs) keeps them:
    /// prefix declarations (`xmlns:p`) included, the default namespace declaration (`xmlns`)
    /// not. Default 32.
    pub max_attributes: usize,
    /// Most nodes (elements and text runs) in one stanza. Default 4096: what makes a tree
    /// expensive is its node count more than its byte count.
    pub max_nodes: usize,
}

impl Limits {
    /// The documented defaults as a `const`, usable in statics.
    pub const DEFAULT: Limits = Limits { max_stanza_bytes: 65_536, max_depth: 16, max_attributes: 32, max_nodes: 4096 };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}
