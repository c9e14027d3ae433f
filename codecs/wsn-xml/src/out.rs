//! A thin layer over quick-xml's `Writer` for the document writers: prefixed names and
//! attribute lists in, well-formed and escaped UTF-8 out.

use bytes::Bytes;
use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};

/// Output buffer for one document.
pub(crate) struct Out {
    w: Writer<Vec<u8>>,
}

impl Out {
    pub fn new() -> Self {
        Out { w: Writer::new(Vec::with_capacity(1024)) }
    }

    fn emit(&mut self, event: Event<'_>) {
        // Writing into a Vec<u8> cannot fail: io::Write for Vec never returns an error.
        let result = self.w.write_event(event);
        debug_assert!(result.is_ok());
    }

    /// `<?xml version="1.0" encoding="UTF-8"?>`, so receivers need not guess the charset.
    pub fn decl(&mut self) {
        self.emit(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    }

    fn tag<'a>(name: &'a str, attrs: &[(&str, &str)]) -> BytesStart<'a> {
        let mut start = BytesStart::new(name);
        for &(key, value) in attrs {
            // quick-xml escapes the value (`<`, `>`, `&`, `'`, `"`).
            start.push_attribute((key, value));
        }
        start
    }

    pub fn start(&mut self, name: &str, attrs: &[(&str, &str)]) {
        self.emit(Event::Start(Self::tag(name, attrs)));
    }

    pub fn empty(&mut self, name: &str, attrs: &[(&str, &str)]) {
        self.emit(Event::Empty(Self::tag(name, attrs)));
    }

    pub fn end(&mut self, name: &str) {
        self.emit(Event::End(BytesEnd::new(name)));
    }

    /// Character data. Besides the usual escapes, `\r` becomes `&#13;`: a literal CR would be
    /// turned into LF by the receiver's end-of-line handling (XML 1.0 §2.11).
    pub fn text(&mut self, text: &str) {
        let mut escaped = String::with_capacity(text.len());
        for c in text.chars() {
            match c {
                '&' => escaped.push_str("&amp;"),
                '<' => escaped.push_str("&lt;"),
                '>' => escaped.push_str("&gt;"),
                '\r' => escaped.push_str("&#13;"),
                c => escaped.push(c),
            }
        }
        self.emit(Event::Text(BytesText::from_escaped(escaped)));
    }

    /// `<name attrs>text</name>`.
    pub fn leaf(&mut self, name: &str, attrs: &[(&str, &str)], text: &str) {
        self.start(name, attrs);
        self.text(text);
        self.end(name);
    }

    /// Bytes that are already a well-formed, self-contained element.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.w.get_mut().extend_from_slice(bytes);
    }

    pub fn len(&self) -> usize {
        self.w.get_ref().len()
    }

    pub fn into_bytes(self) -> Bytes {
        Bytes::from(self.w.into_inner())
    }
}
