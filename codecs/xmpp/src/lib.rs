//! Sans-IO XMPP (RFC 6120) XML stream codec for the server side of a client connection.
//!
//! This crate owns the wire format only: the client's stream header, its top-level elements
//! (stanzas, `<starttls/>`, `<auth/>`, …) as [`Element`] trees, and the server's stream
//! header, errors and close. It knows nothing about sockets, TLS, SASL, JIDs, sessions or the
//! broker; the XMPP front end drives it.
//!
//! * [`StreamReader`] is resumable: feed it a growing `BytesMut`, it returns `Ok(None)` until an
//!   [`Event`] is complete, never looks at a byte twice (beyond a few bytes of look-ahead), and
//!   enforces every [`Limits`] bound on partial input.
//! * Only the XML subset of RFC 6120 §11.1 is accepted: no comments, processing instructions,
//!   DTDs or entity references other than the five predefined ones (so nothing can expand), and
//!   UTF-8 only (§11.6).
//! * [`parse_document`] reads a standalone XML payload with the same rules, and
//!   [`Element::write_to`] / [`Element::to_bytes`] write elements back.
//!
//! Nothing recurses on the input's nesting: reading, writing and searching use explicit stacks.
//!
//! Specification: <https://www.rfc-editor.org/rfc/rfc6120>.
#![warn(missing_docs)]
#![deny(unsafe_code)]

mod chars;
mod document;
mod element;
mod error;
mod limits;
mod reader;
mod scan;
mod tag;
mod tree;
mod write;

pub use document::parse_document;
pub use element::{Element, Node};
pub use error::StreamError;
pub use limits::Limits;
pub use reader::{Event, StreamHeader, StreamReader};
pub use write::{stream_close, stream_error, stream_header};

/// The namespace of `<stream:stream>` and its `<stream:features>`/`<stream:error>` children;
/// elements in it are written with the `stream:` prefix the stream header declares.
pub const STREAMS_NS: &str = "http://etherx.jabber.org/streams";
/// The content namespace of a client-to-server stream: the default namespace of every stanza.
pub const CLIENT_NS: &str = "jabber:client";
/// The namespace of the condition and `<text/>` children of `<stream:error>` (RFC 6120 §4.9.2).
pub const STREAM_ERRORS_NS: &str = "urn:ietf:params:xml:ns:xmpp-streams";
/// The namespace the `xml:` prefix is bound to without a declaration (Namespaces in XML §3).
pub const XML_NS: &str = "http://www.w3.org/XML/1998/namespace";
