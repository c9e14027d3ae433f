//! [`StreamReader`]: the client's half of an XML stream, read incrementally into [`Event`]s.
//!
//! Between top-level elements the reader consumes white space (keep-alives) at once; inside one
//! it consumes each finished token into a partial [`Element`] tree, so the caller's buffer
//! holds at most one unfinished token and the tree at most [`Limits::max_stanza_bytes`] of
//! input. Every error is final: the stream cannot resynchronise, and the server answers with
//! the error's condition and closes (RFC 6120 §4.9.1.1).

use bytes::{Buf, BytesMut};

use crate::chars::is_space;
use crate::element::Element;
use crate::error::{StreamError, malformed};
use crate::limits::Limits;
use crate::scan::{Kind, Scanner};
use crate::tag::{declaration, end_tag, start_tag};
use crate::tree::{Scope, Tree, lookup, open_element};
use crate::{CLIENT_NS, STREAMS_NS};

/// The UTF-8 byte order mark, which XML 1.0 §4.3.3 allows before the first byte of a document.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The attributes of the client's stream header `<stream:stream …>`, for the server to check
/// `to` against its domains and to choose its answer's language and version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamHeader {
    /// The server domain the client wants.
    pub to: Option<String>,
    /// The client's claimed JID, if it sent one.
    pub from: Option<String>,
    /// The XMPP version, `"1.0"` for RFC 6120 clients.
    pub version: Option<String>,
    /// `xml:lang`, the default language of the client's stanzas.
    pub lang: Option<String>,
    /// A stream id (clients normally send none).
    pub id: Option<String>,
}

/// What the client sent, one protocol step at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The client opened (or, after STARTTLS/SASL, re-opened) its stream.
    StreamOpen(StreamHeader),
    /// One complete top-level element (a stanza, or `<starttls/>`, `<auth/>`, etc.).
    Element(Element),
    /// `</stream:stream>`.
    StreamClose,
}

/// Where in the stream the reader is.
#[derive(Debug)]
enum State {
    /// Before the stream header; `declared` once the XML declaration was read.
    Prolog { declared: bool },
    /// After the header: top-level elements, or the close.
    Open,
    /// The header was `<stream:stream …/>`: the close is the next event.
    Closing,
    /// After the close: only white space may follow.
    Closed,
    /// An error was returned; it is returned again.
    Failed(StreamError),
}

/// Reads the client's side of an XML stream from a buffer that the caller keeps appending to:
/// sans-IO, so the same reader serves TCP, TLS and tests, and a slow client costs no task.
#[derive(Debug)]
pub struct StreamReader {
    limits: Limits,
    state: State,
    scan: Scanner,
    tree: Tree,
    /// The header's element name as written: the close must repeat it.
    stream_name: String,
    /// Bytes of the current top-level construct already consumed.
    used: usize,
    /// Nothing of this stream has been consumed: a byte order mark may come.
    fresh: bool,
}

impl StreamReader {
    /// A reader expecting a stream header (optionally after an XML declaration).
    pub fn new(limits: Limits) -> Self {
        StreamReader {
            limits,
            state: State::Prolog { declared: false },
            scan: Scanner::default(),
            tree: Tree::default(),
            stream_name: String::new(),
            used: 0,
            fresh: true,
        }
    }

    /// Takes the next event from the front of `input`, the buffer the connection appends
    /// socket reads to, consuming exactly its bytes and any white space before it. `Ok(None)`:
    /// more bytes are needed; what arrived of a top-level element has been consumed into the
    /// reader (at most [`Limits::max_stanza_bytes`] of it), and `input` keeps at most the
    /// unfinished token. Only append to `input` between calls.
    ///
    /// Before the header only a byte order mark, an XML declaration and white space may come.
    /// The header must be `stream` in [`STREAMS_NS`] with `jabber:client` as its default
    /// namespace (else `invalid-namespace`); an undeclared prefix is `bad-namespace-prefix`.
    /// After an error every call returns it again.
    pub fn next(&mut self, input: &mut BytesMut) -> Result<Option<Event>, StreamError> {
        if let State::Failed(e) = &self.state {
            return Err(e.clone());
        }
        let result = self.step(input);
        if let Err(e) = &result {
            self.state = State::Failed(e.clone());
        }
        result
    }

    /// Forget the stream: the next bytes start a new stream header (after STARTTLS and after
    /// SASL success, RFC 6120 §5.4.3.3 and §6.4.6). Bytes already in the caller's buffer are
    /// read as the new stream's, so after `<starttls/>` the caller must discard what it holds:
    /// plaintext sent behind the request must not be taken as having come over TLS.
    pub fn reset(&mut self) {
        *self = StreamReader::new(self.limits);
    }

    fn step(&mut self, input: &mut BytesMut) -> Result<Option<Event>, StreamError> {
        loop {
            if self.tree.is_idle() && self.scan.is_idle() {
                if let State::Closing = self.state {
                    self.state = State::Closed;
                    return Ok(Some(Event::StreamClose));
                }
                if self.fresh {
                    if BOM.starts_with(input) && input.len() < BOM.len() {
                        return Ok(None);
                    }
                    if input.starts_with(BOM) {
                        input.advance(BOM.len());
                    }
                    self.fresh = false;
                }
                let space = input.iter().take_while(|&&c| is_space(c)).count();
                input.advance(space);
                match (input.first(), &self.state) {
                    (None, _) => return Ok(None),
                    (Some(_), State::Closed) => return Err(malformed("data after the end of the stream")),
                    (Some(b'<'), _) => {}
                    (Some(_), State::Prolog { .. }) => return Err(malformed("text before the stream header")),
                    (Some(_), _) => return Err(malformed("text between top-level elements")),
                }
                self.used = 0;
            }
            let budget = self.limits.max_stanza_bytes.saturating_sub(self.used);
            let Some((kind, len)) = self.scan.scan(input, budget)? else {
                return Ok(None);
            };
            self.used += len;
            let tok = std::str::from_utf8(&input[..len])
                .map_err(|_| StreamError::UnsupportedEncoding("bytes that are not UTF-8".into()))?;
            let event = self.token(kind, tok)?;
            input.advance(len);
            if event.is_some() {
                return Ok(event);
            }
        }
    }

    fn token(&mut self, kind: Kind, tok: &str) -> Result<Option<Event>, StreamError> {
        match self.state {
            State::Prolog { declared: false } if kind == Kind::Decl => {
                declaration(tok)?;
                self.state = State::Prolog { declared: true };
                Ok(None)
            }
            State::Prolog { .. } if kind == Kind::Decl => {
                Err(StreamError::RestrictedXml("a second XML declaration".into()))
            }
            State::Prolog { .. } if kind == Kind::Start => self.header(tok).map(Some),
            State::Prolog { .. } => Err(malformed("stream header expected")),
            State::Open if kind == Kind::End && self.tree.is_idle() => {
                let name = end_tag(tok)?;
                if name != self.stream_name {
                    return Err(StreamError::NotWellFormed(format!("</{name}> does not close <{}>", self.stream_name)));
                }
                self.state = State::Closed;
                Ok(Some(Event::StreamClose))
            }
            State::Open => Ok(self.tree.token(kind, tok, &self.limits)?.map(Event::Element)),
            State::Closing | State::Closed | State::Failed(_) => Err(malformed("data after the end of the stream")),
        }
    }

    fn header(&mut self, tok: &str) -> Result<Event, StreamError> {
        let tag = start_tag(tok, self.limits.max_attributes.saturating_add(1))?;
        let mut scope = Scope::new();
        let element = open_element(&mut scope, &tag, &self.limits)?;
        if !element.is("stream", STREAMS_NS) {
            return Err(StreamError::InvalidNamespace(format!(
                "the stream header is <{}> in {:?}, not <stream> in {STREAMS_NS}",
                element.name, element.ns
            )));
        }
        match lookup(&scope, "") {
            Some((_, CLIENT_NS)) => {}
            other => {
                let ns = other.map_or("", |(_, ns)| ns);
                return Err(StreamError::InvalidNamespace(format!("content namespace {ns:?}, not {CLIENT_NS}")));
            }
        }
        let attr = |name: &str| element.attr(name).map(str::to_owned);
        let header = StreamHeader {
            to: attr("to"),
            from: attr("from"),
            version: attr("version"),
            lang: attr("xml:lang"),
            id: attr("id"),
        };
        self.stream_name = tag.name.to_owned();
        self.tree.set_base(scope);
        self.state = if tag.empty { State::Closing } else { State::Open };
        Ok(Event::StreamOpen(header))
    }
}
