//! Resource limits applied while parsing untrusted XML, so that one hostile request cannot
//! exhaust the memory or CPU of a small gateway.

/// Bounds enforced by every parser in this crate. Exceeding any of them is a
/// [`ParseError`](crate::ParseError) naming the limit, never a partial result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted document, in bytes. Checked before any parsing. Default 1 MiB: far
    /// above any WS-N request (a Notify with a few sensor readings is a few KiB) and small
    /// enough for a 1 GB gateway serving many clients.
    pub max_document_bytes: usize,
    /// Deepest element nesting (the envelope is depth 1). Default 64: a Notify reaches depth
    /// 6 before its payload starts; deeper nesting is almost always an attack.
    pub max_depth: usize,
    /// Most elements in one document, payload included. Default 10 000.
    pub max_elements: usize,
    /// Most attributes (namespace declarations included) on one element. Default 64.
    pub max_attributes_per_element: usize,
    /// Most namespace bindings in scope at once. Default 64 (quick-xml's own default is 128).
    pub max_namespace_bindings: usize,
}

impl Limits {
    /// The documented defaults as a `const`, usable in statics.
    pub const DEFAULT: Limits = Limits {
        max_document_bytes: 1024 * 1024,
        max_depth: 64,
        max_elements: 10_000,
        max_attributes_per_element: 64,
        max_namespace_bindings: 64,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}
