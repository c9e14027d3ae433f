//! Writing: elements (with an explicit stack, so output depth costs no call stack) and the
//! server's side of the stream framing: its header, its close and stream errors.

use crate::chars::escape;
use crate::element::{Element, Node};
use crate::{CLIENT_NS, STREAM_ERRORS_NS, STREAMS_NS, XML_NS};

/// An element whose start tag is written and whose children are being written.
struct Open<'a> {
    element: &'a Element,
    /// The next child to write.
    next: usize,
    /// The default namespace its children are written in.
    default_ns: &'a str,
    /// Whether `stream:` is bound to the streams namespace for its children.
    stream_bound: bool,
    /// The prefix it was written with, if any.
    prefix: Option<&'static str>,
}

/// Writing lives here, beside the writer, so that the element model does not depend on it.
impl Element {
    /// Serialises into `out` as the child of an element whose default namespace is
    /// `parent_ns`, so a stanza written into a stream repeats no declaration the stream
    /// already made: `xmlns='…'` appears only where the namespace changes (`xmlns=''` to leave
    /// one). Elements in [`STREAMS_NS`](crate::STREAMS_NS) get the `stream:` prefix the server's
    /// stream header declares. Text and attribute values are escaped; nothing recurses.
    pub fn write_to(&self, out: &mut Vec<u8>, parent_ns: &str) {
        element(self, out, parent_ns, true);
    }

    /// The standalone document form: every namespace declared inside the element, so any XML
    /// parser reads it alone. Elements in [`STREAMS_NS`](crate::STREAMS_NS) are written with
    /// `xmlns='http://etherx.jabber.org/streams'` instead of an undeclared `stream:` prefix.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        element(self, &mut out, "", false);
        out
    }
}

/// Writes `root` as the child of an element with default namespace `parent_ns`;
/// `stream_bound` says whether the `stream:` prefix is declared around it (the stream header).
pub(crate) fn element(root: &Element, out: &mut Vec<u8>, parent_ns: &str, stream_bound: bool) {
    let mut stack: Vec<Open<'_>> = Vec::new();
    if let Some(open) = start(root, out, parent_ns, stream_bound) {
        stack.push(open);
    }
    while let Some(top) = stack.last_mut() {
        let parent = top.element;
        match parent.children.get(top.next) {
            Some(Node::Text(text)) => {
                top.next += 1;
                escape(out, text, false);
            }
            Some(Node::Element(child)) => {
                top.next += 1;
                let (default_ns, stream_bound) = (top.default_ns, top.stream_bound);
                if let Some(open) = start(child, out, default_ns, stream_bound) {
                    stack.push(open);
                }
            }
            None => {
                out.extend_from_slice(b"</");
                name(out, top.prefix, &parent.name);
                out.push(b'>');
                stack.pop();
            }
        }
    }
}

/// Writes the start tag (or the whole of an empty element); `Some` when children follow.
fn start<'a>(e: &'a Element, out: &mut Vec<u8>, default_ns: &'a str, stream_bound: bool) -> Option<Open<'a>> {
    let stream_bound = match e.attrs.iter().find(|(n, _)| n == "xmlns:stream") {
        Some((_, uri)) => uri == STREAMS_NS,
        None => stream_bound,
    };
    // `xml:` is bound everywhere and its namespace may not be the default (Namespaces in XML
    // §3); `stream:` wherever the stream header's declaration is in force.
    let prefix = match e.ns.as_str() {
        XML_NS => Some("xml"),
        STREAMS_NS if stream_bound => Some("stream"),
        _ => None,
    };
    out.push(b'<');
    name(out, prefix, &e.name);
    if prefix.is_none() && e.ns != default_ns {
        attribute(out, "xmlns", &e.ns);
    }
    // A prefixed element leaves the default namespace as it was.
    let default_ns = if prefix.is_some() { default_ns } else { e.ns.as_str() };
    for (name, value) in &e.attrs {
        if name != "xmlns" {
            attribute(out, name, value);
        }
    }
    if e.children.is_empty() {
        out.extend_from_slice(b"/>");
        return None;
    }
    out.push(b'>');
    Some(Open { element: e, next: 0, default_ns, stream_bound, prefix })
}

fn name(out: &mut Vec<u8>, prefix: Option<&str>, local: &str) {
    if let Some(prefix) = prefix {
        out.extend_from_slice(prefix.as_bytes());
        out.push(b':');
    }
    out.extend_from_slice(local.as_bytes());
}

fn attribute(out: &mut Vec<u8>, name: &str, value: &str) {
    out.push(b' ');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"='");
    escape(out, value, true);
    out.push(b'\'');
}

/// The server's stream header, sent in answer to every
/// [`Event::StreamOpen`](crate::Event::StreamOpen): it declares `jabber:client` as the default
/// namespace and the `stream:` prefix that [`Element::write_to`] relies on. Values are escaped.
pub fn stream_header(out: &mut Vec<u8>, from: &str, to: Option<&str>, id: &str) {
    out.extend_from_slice(b"<?xml version='1.0'?><stream:stream");
    attribute(out, "xmlns", CLIENT_NS);
    attribute(out, "xmlns:stream", STREAMS_NS);
    attribute(out, "id", id);
    attribute(out, "from", from);
    if let Some(to) = to {
        attribute(out, "to", to);
    }
    out.extend_from_slice(b" version='1.0' xml:lang='en'>");
}

/// `</stream:stream>`: the end of the server's half of the stream.
pub fn stream_close(out: &mut Vec<u8>) {
    out.extend_from_slice(b"</stream:stream>");
}

/// A stream error followed by the close, since a stream error always ends the stream (RFC
/// 6120 §4.9.1.1). `condition` is an RFC 6120 §4.9.3 element name such as
/// [`StreamError::condition`](crate::StreamError::condition) gives, written as is; `text`
/// is escaped.
pub fn stream_error(out: &mut Vec<u8>, condition: &str, text: Option<&str>) {
    out.extend_from_slice(b"<stream:error><");
    out.extend_from_slice(condition.as_bytes());
    attribute(out, "xmlns", STREAM_ERRORS_NS);
    out.extend_from_slice(b"/>");
    if let Some(text) = text {
        out.extend_from_slice(b"<text");
        attribute(out, "xmlns", STREAM_ERRORS_NS);
        out.push(b'>');
        escape(out, text, false);
        out.extend_from_slice(b"</text>");
    }
    out.extend_from_slice(b"</stream:error>");
    stream_close(out);
}
