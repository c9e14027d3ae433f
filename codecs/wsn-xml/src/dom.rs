//! A small, bounded element tree built from quick-xml's namespace-aware reader.
//!
//! This module owns the untrusted-input rules: size, UTF-8, DOCTYPE refusal, entity
//! references, depth / element / attribute / namespace-binding limits, and namespace
//! well-formedness. Everything above it (envelope, requests, payloads) reads a finished tree
//! and never sees raw XML.
//!
//! Two things make it more than a generic DOM:
//! - *Capture*: children of chosen elements (`wsnt:Message`, `wsa:ReferenceParameters`) are
//!   not expanded into nodes. Their source bytes are kept as one [`XmlElement`], with the
//!   namespace declarations they borrow from their ancestors copied onto their start tag, so
//!   the bytes stand alone wherever they are re-emitted.
//! - *Scope snapshots*: for chosen elements (`wsnt:Topic`, `wsnt:TopicExpression`) the
//!   bindings of the prefixes their text uses are recorded, because the text holds QNames.
//!
//! Prefixes are resolved when an element *ends*: quick-xml's `NsReader` keeps the closed
//! element's scope until the next read, and by then the text and subtree are known, so only
//! the prefixes actually used are looked up (never a full copy of the scope, whose cost would
//! grow with bindings × elements).

use std::borrow::Cow;

use bytes::Bytes;
use quick_xml::NsReader;
use quick_xml::XmlVersion;
use quick_xml::events::{BytesRef, BytesStart, Event};
use quick_xml::name::{NamespaceError, PrefixDeclaration, QName as XQName, ResolveResult};

use crate::error::ParseError;
use crate::limits::Limits;
use crate::ns::QName;

/// Namespace bindings: `(prefix, uri)`, prefix `None` for the default namespace.
pub(crate) type Bindings = Vec<(Option<String>, String)>;

/// One attribute that is not a namespace declaration.
#[derive(Debug, Clone)]
pub(crate) struct Attr {
    pub ns: Option<String>,
    pub local: String,
    pub value: String,
}

/// A subtree kept as its source text, with the namespace declarations it borrows from its
/// ancestors copied into its start tag, so that it stands on its own (the payload layer,
/// `element.rs`, makes an `XmlElement` of it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Captured {
    /// The element's text.
    pub bytes: Bytes,
    /// Its name.
    pub name: QName,
    /// Offset just before the `>` or `/>` of its start tag.
    pub insert_at: usize,
}

/// One element of the tree.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub ns: Option<String>,
    pub local: String,
    pub children: Vec<usize>,
    pub attrs: Vec<Attr>,
    /// Character data directly inside this element, entity references resolved.
    pub text: String,
    /// Bindings of the prefixes used in `text`, recorded only where the plan asks (filled when
    /// the element ends).
    pub scope: Option<Bindings>,
    /// The element kept as self-contained bytes instead of expanded (see module docs).
    pub captured: Option<Captured>,
}

impl Node {
    pub fn is(&self, ns: &str, local: &str) -> bool {
        self.ns.as_deref() == Some(ns) && self.local == local
    }

    pub fn qname(&self) -> QName {
        QName { namespace: self.ns.clone(), local_name: self.local.clone() }
    }

    /// Attribute by expanded name (`ns` is `None` for unqualified attributes).
    pub fn attr(&self, ns: Option<&str>, local: &str) -> Option<&str> {
        self.attrs.iter().find(|a| a.ns.as_deref() == ns && a.local == local).map(|a| a.value.as_str())
    }

    /// `xsi:nil="true"` (XML Schema Part 1 §2.6.2), used by nillable WS-N time elements.
    pub fn is_nil(&self) -> bool {
        matches!(self.attr(Some(crate::ns::XSI), "nil").map(str::trim), Some("true" | "1"))
    }
}

/// A parsed document; node 0 is the root element.
#[derive(Debug, Clone)]
pub(crate) struct Document {
    pub nodes: Vec<Node>,
}

impl Document {
    pub fn root(&self) -> Option<&Node> {
        self.nodes.first()
    }

    pub fn children<'a>(&'a self, node: &'a Node) -> impl Iterator<Item = &'a Node> + 'a {
        node.children.iter().filter_map(|&i| self.nodes.get(i))
    }

    pub fn child<'a>(&'a self, node: &'a Node, ns: &str, local: &str) -> Option<&'a Node> {
        self.children(node).find(|c| c.is(ns, local))
    }
}

/// What the parser does beyond building nodes.
pub(crate) struct Plan {
    /// Children of elements for which this returns true are captured (see module docs).
    pub capture_children_of: fn(Option<&str>, &str) -> bool,
    /// Capture the root element itself (used to check a standalone payload document).
    pub capture_root: bool,
    /// Elements for which this returns true get the bindings of their text's prefixes recorded.
    pub record_scope_of: fn(Option<&str>, &str) -> bool,
}

impl Plan {
    /// Plain tree: no capture, no scope snapshots.
    pub const PLAIN: Plan =
        Plan { capture_children_of: |_, _| false, capture_root: false, record_scope_of: |_, _| false };
}

/// Parses `input` under `limits` following `plan`.
pub(crate) fn parse(input: &[u8], limits: &Limits, plan: &Plan) -> Result<Document, ParseError> {
    let text = as_utf8(input, limits)?;
    let mut reader = NsReader::from_str(text);
    reader.resolver_mut().set_max_namespace_bindings(limits.max_namespace_bindings);
    let mut parser = Parser { reader, input: text, limits, plan, elements: 0, nodes: Vec::new(), stack: Vec::new() };
    parser.run()?;
    Ok(Document { nodes: parser.nodes })
}

/// The expanded name of the root element, read from the start tag alone (nothing after it is
/// looked at). Used when a document failed to parse, to tell whether it was a SOAP Envelope
/// that hit a limit (answered as a SOAP fault in its version) or not SOAP at all.
pub(crate) fn root_name(input: &[u8], limits: &Limits) -> Option<QName> {
    let text = as_utf8(input, limits).ok()?;
    let mut reader = NsReader::from_str(text);
    reader.resolver_mut().set_max_namespace_bindings(limits.max_namespace_bindings);
    loop {
        match reader.read_event().ok()? {
            Event::Start(e) | Event::Empty(e) => {
                let (result, local) = reader.resolver().resolve_element(e.name());
                let namespace = match result {
                    ResolveResult::Bound(ns) => Some(unescape_uri(ns.0)),
                    ResolveResult::Unbound => None,
                    ResolveResult::Unknown(_) => return None,
                };
                return Some(QName { namespace, local_name: local.into_inner().to_owned() });
            }
            Event::DocType(_) | Event::Eof => return None,
            _ => {}
        }
    }
}

/// Size check, BOM removal and UTF-8 validation, before quick-xml sees a byte.
fn as_utf8<'a>(input: &'a [u8], limits: &Limits) -> Result<&'a str, ParseError> {
    if input.len() > limits.max_document_bytes {
        return Err(ParseError::TooLarge { size: input.len(), limit: limits.max_document_bytes });
    }
    let body = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);
    std::str::from_utf8(body).map_err(|e| ParseError::NotUtf8 { offset: e.valid_up_to() })
}

struct Parser<'i, 'l> {
    reader: NsReader<&'i [u8]>,
    input: &'i str,
    limits: &'l Limits,
    plan: &'l Plan,
    elements: usize,
    nodes: Vec<Node>,
    stack: Vec<usize>,
}

impl<'i> Parser<'i, '_> {
    fn pos(&self) -> u64 {
        self.reader.buffer_position()
    }

    fn next(&mut self) -> Result<Event<'i>, ParseError> {
        self.reader.read_event().map_err(|e| {
            let offset = self.reader.error_position();
            match e {
                quick_xml::Error::Namespace(NamespaceError::TooManyBindings(limit)) => {
                    ParseError::TooManyNamespaces { limit, offset }
                }
                quick_xml::Error::Namespace(NamespaceError::UnknownPrefix(prefix)) => {
                    ParseError::UnknownPrefix { prefix, offset }
                }
                other => ParseError::Malformed { offset, message: other.to_string() },
            }
        })
    }

    fn run(&mut self) -> Result<(), ParseError> {
        let mut root_done = false;
        loop {
            let start = self.pos();
            let event = self.next()?;
            match event {
                Event::Start(_) | Event::Empty(_) if root_done => {
                    return Err(self.malformed(start, "a second root element"));
                }
                Event::Start(e) => {
                    let stays_open = self.open(&e, start, false)?;
                    root_done = !stays_open && self.stack.is_empty();
                }
                Event::Empty(e) => {
                    self.open(&e, start, true)?;
                    root_done = self.stack.is_empty();
                }
                Event::End(_) => {
                    if let Some(closed) = self.stack.pop() {
                        self.record_scope(closed);
                    }
                    root_done = self.stack.is_empty();
                }
                Event::Text(t) => {
                    let content = t.xml10_content();
                    self.text(&content, start, true)?;
                }
                Event::CData(c) => {
                    let content = c.xml10_content();
                    self.text(&content, start, false)?;
                }
                Event::GeneralRef(r) => {
                    let resolved = resolve_reference(&r, self.pos())?;
                    self.text(&resolved, start, false)?;
                }
                Event::DocType(_) => return Err(ParseError::Doctype { offset: start }),
                Event::Decl(d) => {
                    if let Some(Ok(encoding)) = d.encoding() {
                        check_encoding(&encoding)?;
                    }
                }
                Event::Comment(_) | Event::PI(_) => {}
                Event::Eof => break,
            }
        }
        if self.nodes.is_empty() {
            return Err(self.malformed(self.pos(), "no root element"));
        }
        if !self.stack.is_empty() {
            return Err(self.malformed(self.pos(), "document ends inside an element"));
        }
        Ok(())
    }

    fn malformed(&self, offset: u64, message: &str) -> ParseError {
        ParseError::Malformed { offset, message: message.to_owned() }
    }

    /// Appends character data to the open element; outside the root only whitespace is legal
    /// (XML 1.0 §2.1 `document ::= prolog element Misc*`).
    fn text(&mut self, content: &str, offset: u64, may_be_whitespace: bool) -> Result<(), ParseError> {
        match self.stack.last().and_then(|&i| self.nodes.get_mut(i)) {
            Some(node) => {
                node.text.push_str(content);
                Ok(())
            }
            None if may_be_whitespace && content.chars().all(is_xml_space) => Ok(()),
            None => Err(self.malformed(offset, "character data outside the root element")),
        }
    }

    fn count_element(&mut self, depth: usize, offset: u64) -> Result<(), ParseError> {
        self.elements += 1;
        if self.elements > self.limits.max_elements {
            return Err(ParseError::TooManyElements { limit: self.limits.max_elements, offset });
        }
        if depth > self.limits.max_depth {
            return Err(ParseError::TooDeep { limit: self.limits.max_depth, offset });
        }
        Ok(())
    }

    /// Handles a start or empty tag. Returns whether the element stays open on the stack.
    fn open(&mut self, e: &BytesStart<'i>, start: u64, empty: bool) -> Result<bool, ParseError> {
        let depth = self.stack.len() + 1;
        self.count_element(depth, start)?;
        let (ns, local) = self.resolve_element(e)?;
        let (attrs, decls) = self.read_attributes(e, start)?;
        let parent = self.stack.last().copied();
        let capture = match parent.and_then(|p| self.nodes.get(p)) {
            Some(p) => (self.plan.capture_children_of)(p.ns.as_deref(), &p.local),
            None => self.plan.capture_root,
        };
        let scope = (self.plan.record_scope_of)(ns.as_deref(), &local).then(Bindings::new);
        let captured = if capture {
            let name = QName { namespace: ns.clone(), local_name: local.clone() };
            Some(self.capture(e, name, &attrs, &decls, start, empty, depth)?)
        } else {
            None
        };
        let stays_open = !empty && captured.is_none();
        let index = self.nodes.len();
        self.nodes.push(Node { ns, local, children: Vec::new(), attrs, text: String::new(), scope, captured });
        if let Some(p) = parent.and_then(|p| self.nodes.get_mut(p)) {
            p.children.push(index);
        }
        if stays_open {
            self.stack.push(index);
        }
        Ok(stays_open)
    }

    fn resolve_element(&self, e: &BytesStart<'_>) -> Result<(Option<String>, String), ParseError> {
        if !is_qname(e.name().into_inner()) {
            // `<\n/>` and the like: quick-xml reads a tag without checking its name.
            return Err(self.malformed(self.pos(), "an element name is not a qualified XML name"));
        }
        let (result, local) = self.reader.resolver().resolve_element(e.name());
        let ns = self.namespace_of(result)?;
        if ns.as_deref() == Some("http://www.w3.org/2000/xmlns/") {
            // Namespaces in XML 1.0 §3: the xmlns prefix is for declarations, never an element.
            return Err(self.malformed(self.pos(), "an element may not use the xmlns prefix"));
        }
        Ok((ns, local.into_inner().to_owned()))
    }

    fn namespace_of(&self, result: ResolveResult<'_>) -> Result<Option<String>, ParseError> {
        match result {
            ResolveResult::Bound(ns) => Ok(Some(unescape_uri(ns.0))),
            ResolveResult::Unbound => Ok(None),
            ResolveResult::Unknown(prefix) => Err(ParseError::UnknownPrefix { prefix, offset: self.pos() }),
        }
    }

    /// Reads attributes: namespace declarations apart, the others resolved and normalised
    /// (XML 1.0 §3.3.3). Duplicate attributes are refused by quick-xml's checks.
    fn read_attributes(&self, e: &BytesStart<'_>, offset: u64) -> Result<(Vec<Attr>, Bindings), ParseError> {
        let mut attrs = Vec::new();
        let mut decls = Bindings::new();
        for (count, attr) in e.attributes().enumerate() {
            if count >= self.limits.max_attributes_per_element {
                return Err(ParseError::TooManyAttributes { limit: self.limits.max_attributes_per_element, offset });
            }
            let attr = attr.map_err(|err| ParseError::Malformed { offset, message: err.to_string() })?;
            let value = attr
                .normalized_value(XmlVersion::Implicit1_0)
                .map_err(|err| ParseError::Malformed { offset, message: err.to_string() })?;
            match attr.key.as_namespace_binding() {
                Some(PrefixDeclaration::Default) => decls.push((None, value.into_owned())),
                Some(PrefixDeclaration::Named(prefix)) => decls.push((Some(prefix.to_owned()), value.into_owned())),
                None => {
                    let (result, local) = self.reader.resolver().resolve_attribute(attr.key);
                    let ns = self.namespace_of(result)?;
                    attrs.push(Attr { ns, local: local.into_inner().to_owned(), value: value.into_owned() });
                }
            }
        }
        Ok((attrs, decls))
    }

    /// The namespace `prefix` (`None`: the default namespace) is bound to in the current
    /// scope; `None` when unbound or undeclared.
    fn lookup(&self, prefix: Option<&str>) -> Option<String> {
        let probe = match prefix {
            Some(p) => format!("{p}:x"),
            None => "x".to_owned(),
        };
        match self.reader.resolver().resolve_element(XQName(&probe)).0 {
            ResolveResult::Bound(ns) => Some(unescape_uri(ns.0)),
            ResolveResult::Unbound | ResolveResult::Unknown(_) => None,
        }
    }

    /// For an element whose scope the plan records, called right after its end tag was read
    /// (its scope is still current): bindings of the prefixes its text uses.
    fn record_scope(&mut self, index: usize) {
        let Some(node) = self.nodes.get(index).filter(|n| n.scope.is_some()) else { return };
        let bindings: Bindings = crate::topic::prefixes_used(&node.text)
            .into_iter()
            .filter_map(|prefix| self.lookup(prefix).map(|ns| (prefix.map(str::to_owned), ns)))
            .collect();
        if let Some(node) = self.nodes.get_mut(index) {
            node.scope = Some(bindings);
        }
    }

    /// Consumes the element that just started (and its whole subtree), returning its source
    /// bytes with the ancestor namespace declarations it uses copied onto its start tag.
    #[allow(clippy::too_many_arguments)]
    fn capture(
        &mut self,
        e: &BytesStart<'i>,
        name: QName,
        attrs: &[Attr],
        own_decls: &Bindings,
        start: u64,
        empty: bool,
        depth: usize,
    ) -> Result<Captured, ParseError> {
        let mut used = UsedPrefixes::default();
        used.element(e.name());
        for a in attrs {
            used.value(&a.value);
        }
        for attr in e.attributes().flatten() {
            used.attribute(attr.key);
        }
        let tag_end = self.pos();
        let insert_at = tag_end.saturating_sub(if empty { 2 } else { 1 });
        if !empty {
            self.skip_subtree(depth, &mut used)?;
        }
        let end = self.pos();
        let (Ok(start), Ok(insert_at), Ok(end)) =
            (usize::try_from(start), usize::try_from(insert_at), usize::try_from(end))
        else {
            return Err(self.malformed(start, "offset overflow"));
        };
        let (Some(head), Some(tail)) = (self.input.get(start..insert_at), self.input.get(insert_at..end)) else {
            return Err(self.malformed(start as u64, "captured element out of range"));
        };
        if !head.starts_with('<') {
            return Err(self.malformed(start as u64, "captured element does not start with '<'"));
        }
        // The element's scope is still current (see module docs). Copy the bindings of the
        // prefixes the subtree uses that the element does not declare itself.
        let mut decls = String::new();
        let borrowed = used.named.iter().map(|p| Some(p.as_str())).chain(used.default.then_some(None));
        for prefix in borrowed {
            // `xml` and `xmlns` are bound in every document and may not be declared again (an
            // `xmlns:…` attribute counts `xmlns` as a used prefix).
            if own_decls.iter().any(|(q, _)| q.as_deref() == prefix) || matches!(prefix, Some("xml" | "xmlns")) {
                continue;
            }
            if let Some(uri) = self.lookup(prefix) {
                push_declaration(&mut decls, prefix, &uri);
            }
        }
        let mut out = String::with_capacity(head.len() + decls.len() + tail.len());
        out.push_str(head);
        out.push_str(&decls);
        let insert_at = out.len();
        out.push_str(tail);
        Ok(Captured { bytes: Bytes::from(out), name, insert_at })
    }

    /// Reads events up to the end tag matching the element just opened at `depth`, enforcing
    /// the same limits and namespace checks as the tree builder, and noting used prefixes.
    fn skip_subtree(&mut self, depth: usize, used: &mut UsedPrefixes) -> Result<(), ParseError> {
        let mut level = 0usize;
        loop {
            let start = self.pos();
            match self.next()? {
                Event::Start(e) => {
                    level += 1;
                    self.check_inner(&e, depth + level, start, used)?;
                }
                Event::Empty(e) => self.check_inner(&e, depth + level + 1, start, used)?,
                Event::End(_) => {
                    if level == 0 {
                        return Ok(());
                    }
                    level -= 1;
                }
                Event::Text(t) => used.value(&t.xml10_content()),
                Event::GeneralRef(r) => {
                    resolve_reference(&r, self.pos())?;
                }
                Event::DocType(_) => return Err(ParseError::Doctype { offset: start }),
                Event::CData(_) | Event::Comment(_) | Event::PI(_) | Event::Decl(_) => {}
                Event::Eof => return Err(self.malformed(start, "document ends inside an element")),
            }
        }
    }

    fn check_inner(
        &mut self,
        e: &BytesStart<'_>,
        depth: usize,
        start: u64,
        used: &mut UsedPrefixes,
    ) -> Result<(), ParseError> {
        self.count_element(depth, start)?;
        self.resolve_element(e)?;
        let (attrs, _) = self.read_attributes(e, start)?;
        used.element(e.name());
        for attr in e.attributes().flatten() {
            used.attribute(attr.key);
        }
        for a in &attrs {
            used.value(&a.value);
        }
        Ok(())
    }
}

/// Prefixes a captured subtree refers to: element and attribute names, plus values that are
/// a whole QName (`p:local`, the shape of `xsi:type` values and QName-typed content). `named`
/// keeps the order of first use (the order declarations are copied in); `seen` keeps adding
/// linear, since a subtree can name a hundred thousand distinct prefixes in its values.
#[derive(Default)]
struct UsedPrefixes {
    default: bool,
    named: Vec<String>,
    seen: std::collections::HashSet<String>,
}

impl UsedPrefixes {
    fn add(&mut self, prefix: &str) {
        if prefix != "xml" && !self.seen.contains(prefix) {
            self.seen.insert(prefix.to_owned());
            self.named.push(prefix.to_owned());
        }
    }

    fn element(&mut self, name: XQName<'_>) {
        match name.prefix() {
            Some(p) => self.add(p.into_inner()),
            None => self.default = true,
        }
    }

    fn attribute(&mut self, name: XQName<'_>) {
        if name.as_namespace_binding().is_some() {
            return;
        }
        if let Some(p) = name.prefix() {
            self.add(p.into_inner());
        }
    }

    fn value(&mut self, value: &str) {
        let qname = value.trim().split_once(':');
        if let Some((prefix, _)) = qname.filter(|(p, l)| crate::topic::is_ncname(p) && crate::topic::is_ncname(l)) {
            self.add(prefix);
        }
    }
}

/// Appends ` xmlns:p="uri"` (or ` xmlns="uri"`), escaping the URI for a double-quoted value.
pub(crate) fn push_declaration(out: &mut String, prefix: Option<&str>, uri: &str) {
    out.push_str(" xmlns");
    if let Some(p) = prefix {
        out.push(':');
        out.push_str(p);
    }
    out.push_str("=\"");
    out.push_str(&quick_xml::escape::escape(uri));
    out.push('"');
}

/// quick-xml keeps namespace names as written; entity references in them are resolved here.
fn unescape_uri(raw: &str) -> String {
    if raw.contains('&') {
        quick_xml::escape::unescape(raw).map(Cow::into_owned).unwrap_or_else(|_| raw.to_owned())
    } else {
        raw.to_owned()
    }
}

/// Resolves `&name;`: character references and the five predefined entities (XML 1.0 §4.6).
/// There is no DTD, so any other name is undefined.
fn resolve_reference(r: &BytesRef<'_>, offset: u64) -> Result<String, ParseError> {
    let malformed = |message: String| ParseError::Malformed { offset, message };
    if let Some(ch) = r.resolve_char_ref().map_err(|e| malformed(e.to_string()))? {
        if !is_xml_char(ch) {
            return Err(malformed(format!("character reference to U+{:04X}, not an XML character", ch as u32)));
        }
        return Ok(ch.to_string());
    }
    let name: &str = r;
    match quick_xml::escape::resolve_predefined_entity(name) {
        Some(s) => Ok(s.to_owned()),
        None => Err(ParseError::UndefinedEntity { name: name.to_owned(), offset }),
    }
}

fn check_encoding(declared: &str) -> Result<(), ParseError> {
    let ok = ["utf-8", "utf8", "us-ascii", "ascii"].iter().any(|e| declared.eq_ignore_ascii_case(e));
    if ok { Ok(()) } else { Err(ParseError::UnsupportedEncoding { declared: declared.to_owned() }) }
}

/// XML 1.0 §2.3 `S`.
pub(crate) fn is_xml_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

/// XML 1.0 §2.2 `Char` (Rust `char` already excludes surrogates).
pub(crate) fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Namespaces in XML 1.0 §4 `QName ::= (Prefix ':')? LocalPart`, each part an `NCName`: an XML
/// 1.0 `Name` (§2.3) without colons.
fn is_qname(name: &str) -> bool {
    let mut parts = name.splitn(2, ':');
    parts.all(crate::topic::is_ncname)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(xml: &str) -> Result<Document, ParseError> {
        parse(xml.as_bytes(), &Limits::default(), &Plan::PLAIN)
    }

    #[test]
    fn an_element_needs_a_qualified_name() {
        for bad in ["<r><\n/></r>", "<r>< /></r>", "<1r/>", "<r><a:/></r>", "<r><:a/></r>", "<r><a:b:c/></r>"] {
            assert!(matches!(plain(bad), Err(ParseError::Malformed { .. })), "{bad:?} parsed");
        }
        for good in ["<r/>", "<_r.x-1/>", "<é/>", "<r xmlns:p='urn:p'><p:a/></r>"] {
            assert!(plain(good).is_ok(), "{good:?} refused");
        }
        // Inside a captured payload, too.
        let captured = parse(b"<r><M xmlns='urn:m'><p><\n/></p></M></r>", &Limits::default(), &CAPTURE_UNDER_M);
        assert!(matches!(captured, Err(ParseError::Malformed { .. })));
    }

    const CAPTURE_UNDER_M: Plan = Plan {
        capture_children_of: |ns, local| ns == Some("urn:m") && local == "M",
        capture_root: false,
        record_scope_of: |_, local| local == "T",
    };

    #[test]
    fn resolves_prefixes_declared_anywhere() {
        let doc = plain(r#"<a:r xmlns:a="urn:a"><b xmlns="urn:b"><a:c xmlns:a="urn:c"/></b></a:r>"#).unwrap();
        let names: Vec<_> = doc.nodes.iter().map(|n| (n.ns.clone().unwrap(), n.local.clone())).collect();
        assert_eq!(names, [("urn:a".into(), "r".into()), ("urn:b".into(), "b".into()), ("urn:c".into(), "c".into())]);
    }

    #[test]
    fn text_resolves_references_and_cdata() {
        let doc = plain("<r>a&amp;b&#x41;&#66;<![CDATA[<x>]]></r>").unwrap();
        assert_eq!(doc.root().unwrap().text, "a&bAB<x>");
    }

    #[test]
    fn refuses_doctype_undefined_entities_and_unknown_prefixes() {
        assert!(matches!(plain("<!DOCTYPE r><r/>"), Err(ParseError::Doctype { .. })));
        assert!(matches!(plain("<r>&foo;</r>"), Err(ParseError::UndefinedEntity { .. })));
        assert!(matches!(plain("<p:r/>"), Err(ParseError::UnknownPrefix { .. })));
        assert!(matches!(plain(r#"<r p:a="1"/>"#), Err(ParseError::UnknownPrefix { .. })));
        assert!(matches!(plain("<r>&#0;</r>"), Err(ParseError::Malformed { .. })));
    }

    #[test]
    fn refuses_structural_errors() {
        for bad in ["", "text", "<a>", "<a></b>", "<a/><b/>", "<a/>junk", "<a x='1' x='2'/>"] {
            assert!(plain(bad).is_err(), "{bad:?} accepted");
        }
        assert!(plain("<?xml version='1.0'?>\n<!-- c --><a/>\n").is_ok());
        assert!(matches!(
            plain("<?xml version='1.0' encoding='ISO-8859-1'?><a/>"),
            Err(ParseError::UnsupportedEncoding { .. })
        ));
        assert!(plain("\u{FEFF}<a/>").is_ok());
    }

    #[test]
    fn limits_apply() {
        let limits = Limits {
            max_depth: 3,
            max_elements: 4,
            max_attributes_per_element: 2,
            max_document_bytes: 200,
            max_namespace_bindings: 2,
        };
        let p = |xml: &str| parse(xml.as_bytes(), &limits, &Plan::PLAIN);
        assert!(p("<a><b><c/></b></a>").is_ok());
        assert!(matches!(p("<a><b><c><d/></c></b></a>"), Err(ParseError::TooDeep { .. })));
        assert!(matches!(p("<a><b/><b/><b/><b/></a>"), Err(ParseError::TooManyElements { .. })));
        assert!(matches!(p("<a x='1' y='2' z='3'/>"), Err(ParseError::TooManyAttributes { .. })));
        assert!(matches!(p(&"<a/>".repeat(60)), Err(ParseError::TooLarge { .. })));
        assert!(matches!(
            p("<a xmlns:a='1'><b xmlns:b='2'><c xmlns:c='3'/></b></a>"),
            Err(ParseError::TooManyNamespaces { .. })
        ));
    }

    #[test]
    fn capture_makes_elements_self_contained() {
        let xml = r#"<r xmlns:m="urn:m" xmlns:x="urn:x" xmlns:unused="urn:u" xmlns="urn:d"><m:M>
            <x:v a="x:q" x:b="1"><inner>t</inner></x:v></m:M></r>"#;
        let doc = parse(xml.as_bytes(), &Limits::default(), &CAPTURE_UNDER_M).unwrap();
        let m = doc.nodes.iter().find(|n| n.local == "M").unwrap();
        let captured = doc.children(m).next().unwrap().captured.clone().unwrap();
        let text = std::str::from_utf8(&captured.bytes).unwrap();
        assert_eq!(text, r#"<x:v a="x:q" x:b="1" xmlns:x="urn:x" xmlns="urn:d"><inner>t</inner></x:v>"#);
        assert_eq!(&captured.name, &QName::new("urn:x", "v"));
        // The captured bytes parse on their own and mean the same thing.
        let again = plain(text).unwrap();
        assert!(again.nodes[1].is("urn:d", "inner"));
    }

    #[test]
    fn capture_of_empty_element_and_own_declarations() {
        let xml = r#"<r xmlns:m="urn:m" xmlns:p="urn:p"><m:M><p:e xmlns:p="urn:own"/></m:M></r>"#;
        let doc = parse(xml.as_bytes(), &Limits::default(), &CAPTURE_UNDER_M).unwrap();
        let captured = doc.nodes.iter().find_map(|n| n.captured.clone()).unwrap();
        assert_eq!(&captured.bytes[..], br#"<p:e xmlns:p="urn:own"/>"#);
        let xml = r#"<r xmlns:m="urn:m" xmlns:p="urn:p"><m:M><p:e/></m:M></r>"#;
        let doc = parse(xml.as_bytes(), &Limits::default(), &CAPTURE_UNDER_M).unwrap();
        let captured = doc.nodes.iter().find_map(|n| n.captured.clone()).unwrap();
        assert_eq!(&captured.bytes[..], br#"<p:e xmlns:p="urn:p"/>"#);
    }

    #[test]
    fn captured_subtree_still_obeys_limits_and_namespaces() {
        let limits = Limits { max_depth: 4, ..Limits::default() };
        let deep = r#"<r xmlns:m="urn:m"><m:M><a><b><c/></b></a></m:M></r>"#;
        assert!(matches!(parse(deep.as_bytes(), &limits, &CAPTURE_UNDER_M), Err(ParseError::TooDeep { .. })));
        let unbound = r#"<r xmlns:m="urn:m"><m:M><a><q:b/></a></m:M></r>"#;
        assert!(matches!(
            parse(unbound.as_bytes(), &Limits::default(), &CAPTURE_UNDER_M),
            Err(ParseError::UnknownPrefix { .. })
        ));
    }

    #[test]
    fn scope_is_recorded_where_asked() {
        let xml = r#"<r xmlns:a="urn:a" xmlns:z="urn:z"><T xmlns:b="urn:b" xmlns="urn:d">a:x/b:y | c | q:w<i xmlns:a="urn:inner"/></T></r>"#;
        let doc = parse(xml.as_bytes(), &Limits::default(), &CAPTURE_UNDER_M).unwrap();
        let scope = doc.nodes[1].scope.clone().unwrap();
        let want: Bindings =
            vec![(Some("a".into()), "urn:a".into()), (Some("b".into()), "urn:b".into()), (None, "urn:d".into())];
        assert_eq!(scope, want, "used prefixes only, in the element's own scope, undeclared q skipped");
        assert_eq!(doc.nodes[0].scope, None);
    }

    #[test]
    fn inner_undeclaration_of_the_default_namespace_is_kept() {
        let xml = r#"<r xmlns="urn:d" xmlns:m="urn:m"><m:M><x:e xmlns:x="urn:x"><i xmlns=""/><j/></x:e></m:M></r>"#;
        let doc = parse(xml.as_bytes(), &Limits::default(), &CAPTURE_UNDER_M).unwrap();
        let captured = doc.nodes.iter().find_map(|n| n.captured.clone()).unwrap();
        assert_eq!(&captured.bytes[..], r#"<x:e xmlns:x="urn:x" xmlns="urn:d"><i xmlns=""/><j/></x:e>"#.as_bytes());
        let again = plain(std::str::from_utf8(&captured.bytes).unwrap()).unwrap();
        assert_eq!(again.nodes[1].ns, None);
        assert_eq!(again.nodes[2].ns.as_deref(), Some("urn:d"));
    }
}
