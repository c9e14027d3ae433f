//! The parse error type: every way an inbound document can be refused, each variant carrying
//! the evidence (what, where) a log line or a SOAP fault needs.

use crate::ns::QName;

/// Why an inbound document was refused. Offsets are byte offsets into the input as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The input is larger than [`Limits::max_document_bytes`](crate::Limits).
    #[error("document of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Size of the input.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The input is not UTF-8. SOAP stacks in the field all send UTF-8; UTF-16 is refused.
    #[error("document is not UTF-8 (invalid byte at offset {offset})")]
    NotUtf8 {
        /// Offset of the first invalid byte.
        offset: usize,
    },
    /// The XML declaration names an encoding other than UTF-8 (or its ASCII subset).
    #[error("declared encoding {declared:?} is not supported, only UTF-8")]
    UnsupportedEncoding {
        /// The `encoding` pseudo-attribute as written.
        declared: String,
    },
    /// quick-xml found the document not well-formed (or namespace-ill-formed).
    #[error("malformed XML at offset {offset}: {message}")]
    Malformed {
        /// Where the problem was detected.
        offset: u64,
        /// quick-xml's description, or ours.
        message: String,
    },
    /// A `<!DOCTYPE …>` was present. Refused outright: no DTD means no entity expansion
    /// ("billion laughs") and no external entity (XXE). SOAP 1.1 §3 and SOAP 1.2 Part 1 §5
    /// both forbid a DTD in an envelope anyway.
    #[error("DOCTYPE at offset {offset} refused: DTDs are not accepted")]
    Doctype {
        /// Offset of the DOCTYPE.
        offset: u64,
    },
    /// An entity reference other than the five predefined ones or a character reference.
    #[error("undefined entity reference &{name}; at offset {offset}")]
    UndefinedEntity {
        /// The entity name between `&` and `;`.
        name: String,
        /// Where the reference ends.
        offset: u64,
    },
    /// An element or attribute prefix with no namespace declaration in scope.
    #[error("namespace prefix {prefix:?} is not declared (offset {offset})")]
    UnknownPrefix {
        /// The undeclared prefix.
        prefix: String,
        /// Where the element or attribute ends.
        offset: u64,
    },
    /// Nesting deeper than [`Limits::max_depth`](crate::Limits).
    #[error("element nesting deeper than {limit} levels at offset {offset}")]
    TooDeep {
        /// The configured limit.
        limit: usize,
        /// Offset of the element that crossed it.
        offset: u64,
    },
    /// More elements than [`Limits::max_elements`](crate::Limits).
    #[error("more than {limit} elements (offset {offset})")]
    TooManyElements {
        /// The configured limit.
        limit: usize,
        /// Offset of the element that crossed it.
        offset: u64,
    },
    /// More attributes on one element than [`Limits::max_attributes_per_element`](crate::Limits).
    #[error("more than {limit} attributes on one element (offset {offset})")]
    TooManyAttributes {
        /// The configured limit.
        limit: usize,
        /// Offset of the element.
        offset: u64,
    },
    /// More namespace bindings in scope than [`Limits::max_namespace_bindings`](crate::Limits).
    #[error("more than {limit} namespace bindings in scope (offset {offset})")]
    TooManyNamespaces {
        /// The configured limit.
        limit: usize,
        /// Offset of the element that crossed it.
        offset: u64,
    },
    /// The root element is not `Envelope` at all: not a SOAP message.
    #[error("root element {found} is not a SOAP Envelope")]
    NotSoapEnvelope {
        /// The root element found.
        found: QName,
    },
    /// The root is an `Envelope` in a namespace that is neither SOAP version. SOAP 1.1 §4.4.1
    /// and SOAP 1.2 Part 1 §5.4.7 call for a VersionMismatch fault.
    #[error("Envelope namespace {namespace:?} is neither SOAP 1.1 nor SOAP 1.2")]
    VersionMismatch {
        /// The namespace found on the Envelope.
        namespace: Option<String>,
    },
    /// The Envelope has no Body child.
    #[error("SOAP Envelope has no Body")]
    MissingBody,
    /// The Body has no child element, so there is no operation to dispatch on.
    #[error("SOAP Body has no child element")]
    EmptyBody,
    /// A WS-N element the schema requires is absent.
    #[error("{parent} is missing its required {element} element")]
    MissingElement {
        /// The element that should contain it.
        parent: &'static str,
        /// The missing element.
        element: &'static str,
    },
    /// An element is present but its content is unusable.
    #[error("invalid content in {element}: {reason}")]
    InvalidContent {
        /// The offending element.
        element: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}
