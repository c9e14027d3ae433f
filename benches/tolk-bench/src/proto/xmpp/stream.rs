//! The client's reader of an XMPP stream (RFC 6120 §4): the server's bytes cut into top-level
//! elements by a resumable scan for `<`, `>` and quotes, each element then parsed by quick-xml
//! into a small [`Node`] tree inside the server's own stream header, so that the prefixes and
//! the default namespace it declares apply. Written for the bench rather than taken from tolk's
//! `xmpp-codec` (a server-side reader), so that a bug shared by broker and client cannot hide,
//! and so that it reads Prosody's stream as well as tolk's.

use anyhow::{Context, Result, bail};
use bytes::{Buf, BytesMut};
use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};
use quick_xml::name::{Namespace, ResolveResult};
use quick_xml::reader::NsReader;
use tokio::io::{AsyncRead, AsyncReadExt};

/// The namespace of `<stream:stream>`, `<stream:features>` and `<stream:error>`.
pub const STREAMS_NS: &str = "http://etherx.jabber.org/streams";

/// One element of the server's stream, with its namespace resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// Local name.
    pub name: String,
    /// Namespace; empty when none applies.
    pub ns: String,
    /// Attributes by qualified name, values unescaped; namespace declarations left out.
    pub attrs: Vec<(String, String)>,
    /// The text directly inside it, unescaped.
    pub text: String,
    /// Child elements in order.
    pub children: Vec<Node>,
}

impl Node {
    /// Whether this is `{ns}name`.
    pub fn is(&self, name: &str, ns: &str) -> bool {
        self.name == name && self.ns == ns
    }

    /// An attribute's value.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The first child `{ns}name`.
    pub fn child(&self, name: &str, ns: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.is(name, ns))
    }
}

/// The condition and text of a `<stream:error>` or a stanza's `<error>` (RFC 6120 §4.9.2,
/// §8.3.2): every child but `<text>` by name, then the text, for reports.
pub fn describe_error(error: &Node) -> String {
    let mut parts: Vec<String> = error.children.iter().filter(|c| c.name != "text").map(|c| c.name.clone()).collect();
    if let Some(text) = error.children.iter().find(|c| c.name == "text") {
        parts.push(format!("({})", text.text.trim()));
    }
    if parts.is_empty() { "no condition given".into() } else { parts.join(" ") }
}

/// What kind of markup a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Start,
    End,
    Empty,
    /// XML declaration, processing instruction, comment or CDATA section: no nesting.
    Other,
}

/// The length and kind of the markup token at the start of `b` (which starts with `<`), or
/// `None` when it has not all arrived.
fn token(b: &[u8]) -> Option<(usize, Token)> {
    const CDATA: &[u8] = b"<![CDATA[";
    const COMMENT: &[u8] = b"<!--";
    let until = |open: usize, close: &[u8]| {
        let rest = b.get(open..)?;
        rest.windows(close.len()).position(|w| w == close).map(|i| (open + i + close.len(), Token::Other))
    };
    if b.starts_with(b"<?") {
        return until(2, b"?>");
    }
    if b.starts_with(COMMENT) {
        return until(COMMENT.len(), b"-->");
    }
    if b.starts_with(CDATA) {
        return until(CDATA.len(), b"]]>");
    }
    if b.len() < CDATA.len() && (CDATA.starts_with(b) || COMMENT.starts_with(b)) {
        return None;
    }
    let mut quote = None;
    for (i, &c) in b.iter().enumerate().skip(1) {
        match (quote, c) {
            (None, b'"' | b'\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, b'>') => {
                let kind = match (b[1], b[i - 1]) {
                    (b'/', _) => Token::End,
                    (b'!', _) => Token::Other,
                    (_, b'/') => Token::Empty,
                    _ => Token::Start,
                };
                return Some((i + 1, kind));
            }
            _ => {}
        }
    }
    None
}

/// A piece of the stream, as [`Scan::next`] cuts it.
#[derive(Debug, PartialEq, Eq)]
enum Piece {
    /// The stream header's start tag.
    Header(String),
    /// One complete top-level element, as received.
    Element(String),
    /// `</stream:stream>`.
    Close,
}

/// Where the cutting of the buffer stands, so that a partly received element is not scanned
/// again from its start on every read.
#[derive(Debug, Default)]
struct Scan {
    /// Bytes of the buffer scanned so far (the element in progress starts at 0).
    pos: usize,
    /// Elements open in the element in progress.
    depth: usize,
    /// The stream header has been read.
    open: bool,
}

impl Scan {
    /// Takes the next piece off the front of `buf`, or `None` if it is not all there yet.
    /// White space between top-level elements (keep-alives) is dropped; `max` bounds an
    /// element so that a broken peer cannot grow `buf`.
    fn next(&mut self, buf: &mut BytesMut, max: usize) -> Result<Option<Piece>> {
        loop {
            if self.depth == 0 {
                let space = buf.iter().take_while(|b| b.is_ascii_whitespace()).count();
                buf.advance(space);
                self.pos = 0;
                match buf.first() {
                    None => return Ok(None),
                    Some(b'<') => {}
                    Some(_) => bail!("text between top-level elements of the server's stream"),
                }
            }
            let Some(lt) = buf[self.pos..].iter().position(|&b| b == b'<') else {
                self.pos = buf.len();
                return Self::wait(buf, max);
            };
            let start = self.pos + lt;
            let Some((len, kind)) = token(&buf[start..]) else {
                self.pos = start;
                return Self::wait(buf, max);
            };
            let end = start + len;
            self.pos = end;
            let whole = |buf: &mut BytesMut| {
                let bytes = buf.split_to(end);
                String::from_utf8(bytes.to_vec()).context("the server sent bytes that are not UTF-8")
            };
            match (kind, self.depth) {
                (Token::Other, 0) => buf.advance(end),
                (Token::Other, _) => {}
                (Token::Start, 0) if !self.open => {
                    self.open = true;
                    return whole(buf).map(|h| Some(Piece::Header(h)));
                }
                (Token::End, 0) => {
                    buf.advance(end);
                    return Ok(Some(Piece::Close));
                }
                (Token::Start, _) => self.depth += 1,
                (Token::Empty, 0) => return whole(buf).map(|e| Some(Piece::Element(e))),
                (Token::Empty, _) => {}
                (Token::End, _) => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        return whole(buf).map(|e| Some(Piece::Element(e)));
                    }
                }
            }
        }
    }

    fn wait(buf: &BytesMut, max: usize) -> Result<Option<Piece>> {
        if buf.len() > max {
            bail!("the server sent an element longer than {max} bytes");
        }
        Ok(None)
    }
}

/// Reads the server's half of one XMPP stream.
pub struct StreamReader<R> {
    io: R,
    buf: BytesMut,
    scan: Scan,
    /// The server's stream header as received; `None` before it (and after a restart).
    header: Option<String>,
    max: usize,
}

impl<R: AsyncRead + Unpin> StreamReader<R> {
    /// A reader of `io` taking elements of at most `max` bytes.
    pub fn new(io: R, max: usize) -> Self {
        StreamReader { io, buf: BytesMut::with_capacity(4096), scan: Scan::default(), header: None, max }
    }

    /// Expects a new stream header: the server starts a new stream after SASL success
    /// (RFC 6120 §6.4.6).
    pub fn restart(&mut self) {
        self.scan = Scan::default();
        self.header = None;
    }

    /// The next top-level element; `None` once the server closed the stream or the connection.
    /// A stream error is an `Err` with its condition. Cancel-safe: what was read stays here.
    pub async fn next(&mut self) -> Result<Option<Node>> {
        loop {
            match self.scan.next(&mut self.buf, self.max)? {
                Some(Piece::Header(header)) => self.header = Some(header),
                Some(Piece::Element(element)) => {
                    let header = self.header.as_deref().context("an element before the stream header")?;
                    let node = parse(header, &element)?;
                    if node.is("error", STREAMS_NS) {
                        bail!("stream error: {}", describe_error(&node));
                    }
                    return Ok(Some(node));
                }
                Some(Piece::Close) => return Ok(None),
                None => {
                    if self.io.read_buf(&mut self.buf).await? == 0 {
                        if self.scan.depth > 0 || !self.buf.is_empty() {
                            bail!("connection closed in the middle of an element");
                        }
                        return Ok(None);
                    }
                }
            }
        }
    }
}

/// Parses one top-level element inside the stream header it came in.
fn parse(header: &str, element: &str) -> Result<Node> {
    let name_end = header[1..].find(|c: char| c.is_ascii_whitespace() || c == '>').map_or(header.len(), |i| i + 1);
    let document = format!("{header}{element}</{}>", &header[1..name_end]);
    let mut reader = NsReader::from_str(&document);
    let mut stack: Vec<Node> = Vec::new();
    let mut in_header = false;
    loop {
        let (resolved, event) = reader.read_resolved_event().context("the server sent bad XML")?;
        let done = match event {
            Event::Start(_) if !in_header => {
                in_header = true;
                None
            }
            Event::Start(e) => {
                stack.push(node(&resolved, &e)?);
                None
            }
            Event::Empty(e) => Some(node(&resolved, &e)?),
            Event::End(_) => stack.pop(),
            Event::Text(t) => {
                if let Some(n) = stack.last_mut() {
                    n.text.push_str(&t.xml10_content());
                }
                None
            }
            Event::CData(c) => {
                if let Some(n) = stack.last_mut() {
                    n.text.push_str(&c.xml10_content());
                }
                None
            }
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref()? {
                    Some(c) => c,
                    None => match &*r.xml10_content() {
                        "lt" => '<',
                        "gt" => '>',
                        "amp" => '&',
                        "apos" => '\'',
                        "quot" => '"',
                        other => bail!("the server used an undefined entity &{other};"),
                    },
                };
                if let Some(n) = stack.last_mut() {
                    n.text.push(resolved);
                }
                None
            }
            Event::Eof => bail!("an element that does not close"),
            _ => None,
        };
        if let Some(done) = done {
            match stack.last_mut() {
                Some(parent) => parent.children.push(done),
                None => return Ok(done),
            }
        }
    }
}

/// The node for a start tag, children to come.
fn node(resolved: &ResolveResult<'_>, start: &BytesStart<'_>) -> Result<Node> {
    let ns = match resolved {
        ResolveResult::Bound(Namespace(ns)) => (*ns).to_owned(),
        _ => String::new(),
    };
    let mut attrs = Vec::new();
    for attr in start.attributes() {
        let attr = attr.context("the server sent a bad attribute")?;
        let key = attr.key.as_ref().to_owned();
        if key == "xmlns" || key.starts_with("xmlns:") {
            continue;
        }
        attrs.push((key, attr.normalized_value(XmlVersion::default())?.into_owned()));
    }
    let name = start.local_name().as_ref().to_owned();
    Ok(Node { name, ns, attrs, text: String::new(), children: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "<?xml version='1.0'?><stream:stream xmlns='jabber:client' \
        xmlns:stream='http://etherx.jabber.org/streams' from='localhost' id='x1' version='1.0'>";

    fn pieces(input: &[u8], max: usize) -> Result<Vec<Piece>> {
        let mut buf = BytesMut::from(input);
        let mut scan = Scan::default();
        let mut out = Vec::new();
        while let Some(piece) = scan.next(&mut buf, max)? {
            out.push(piece);
        }
        Ok(out)
    }

    #[test]
    fn the_stream_is_cut_into_elements_at_every_split() {
        let message = "<message to='a@b/c'><body a='x>y'>1 &lt; 2<![CDATA[<b>]]></body><x/></message>";
        let whole =
            format!("{HEADER} <stream:features><bind xmlns='b'/></stream:features>\n{message} </stream:stream>");
        let expected = vec![
            Piece::Header(HEADER.split_once("?>").unwrap().1.to_owned()),
            Piece::Element("<stream:features><bind xmlns='b'/></stream:features>".to_owned()),
            Piece::Element(message.to_owned()),
            Piece::Close,
        ];
        assert_eq!(pieces(whole.as_bytes(), 1 << 20).unwrap(), expected);
        for cut in 0..whole.len() {
            let mut buf = BytesMut::from(&whole.as_bytes()[..cut]);
            let mut scan = Scan::default();
            let mut got = Vec::new();
            while let Some(piece) = scan.next(&mut buf, 1 << 20).unwrap() {
                got.push(piece);
            }
            buf.extend_from_slice(&whole.as_bytes()[cut..]);
            while let Some(piece) = scan.next(&mut buf, 1 << 20).unwrap() {
                got.push(piece);
            }
            assert_eq!(got, expected, "cut at {cut}");
        }
    }

    #[test]
    fn elements_are_read_in_the_headers_namespaces() {
        let header = HEADER.split_once("?>").unwrap().1;
        let event = "<message from='pubsub.localhost' to='a@localhost/r' type='headline'>\
            <event xmlns='http://jabber.org/protocol/pubsub#event'><items node='a/b'><item id='i&amp;1'>\
            <Payload xmlns='urn:tolk:wsn:1' encoding='base64'>AAE=</Payload></item></items></event></message>";
        let node = parse(header, event).unwrap();
        assert!(node.is("message", "jabber:client"));
        assert_eq!(node.attr("type"), Some("headline"));
        let items = node.child("event", "http://jabber.org/protocol/pubsub#event").unwrap().children[0].clone();
        assert_eq!((items.name.as_str(), items.attr("node")), ("items", Some("a/b")));
        assert_eq!(items.children[0].attr("id"), Some("i&1"));
        let payload = &items.children[0].children[0];
        assert!(payload.is("Payload", "urn:tolk:wsn:1"));
        assert_eq!(payload.text, "AAE=");

        let error = parse(
            header,
            "<stream:error><host-unknown xmlns='urn:ietf:params:xml:ns:xmpp-streams'/>\
             <text xmlns='urn:ietf:params:xml:ns:xmpp-streams'>not &#x41; domain</text></stream:error>",
        )
        .unwrap();
        assert!(error.is("error", STREAMS_NS));
        assert_eq!(describe_error(&error), "host-unknown (not A domain)");
    }

    #[test]
    fn oversized_elements_and_stray_text_are_refused() {
        let long = format!("{HEADER}<message>{}", "x".repeat(2000));
        assert!(pieces(long.as_bytes(), 1024).is_err());
        assert!(pieces(format!("{HEADER}stray<a/>").as_bytes(), 1024).is_err());
    }
}
