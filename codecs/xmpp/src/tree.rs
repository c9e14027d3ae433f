//! [`Tree`]: builds one top-level element from its tokens as they arrive, resolving namespaces
//! and enforcing the depth, attribute and node limits. Open elements live on an explicit stack,
//! so nesting costs heap bounded by [`Limits::max_depth`], never call stack.

use crate::XML_NS;
use crate::chars::{Context, decode, split_qname};
use crate::element::{Element, Node};
use crate::error::{StreamError, malformed};
use crate::limits::Limits;
use crate::scan::Kind;
use crate::tag::{StartTag, end_tag, start_tag};

/// How many times [`Limits::max_stanza_bytes`] the namespace names copied into one top-level
/// element's nodes may add up to.
pub(crate) const COPY_FACTOR: usize = 4;

/// Namespace bindings in scope, innermost last: `(prefix, uri)`, prefix "" for the default.
pub(crate) type Scope = Vec<(String, String)>;

/// An element whose start tag has been read and whose end tag has not.
#[derive(Debug)]
struct Open {
    element: Element,
    /// Where its name as written starts in [`Tree::qnames`], for matching the end tag.
    qname_at: usize,
    /// The scope length before its own declarations.
    scope_at: usize,
}

/// The top-level element being built, or nothing between elements.
#[derive(Debug, Default)]
pub(crate) struct Tree {
    open: Vec<Open>,
    /// The open elements' names as written, concatenated: one allocation for the whole stack.
    qnames: String,
    /// Bindings in scope; the first `base` come from outside the element (the stream header).
    scope: Scope,
    base: usize,
    /// Nodes in the current top-level element.
    nodes: usize,
    /// Bytes of namespace names copied into its elements, see [`Tree::start`].
    copied: usize,
}

impl Tree {
    /// Sets the bindings every top-level element starts with, and forgets any partial element.
    pub(crate) fn set_base(&mut self, scope: Scope) {
        self.clear();
        self.scope = scope;
        self.base = self.scope.len();
    }

    /// Forgets the partial element, if any.
    pub(crate) fn clear(&mut self) {
        self.open.clear();
        self.qnames.clear();
        self.scope.truncate(self.base);
    }

    /// Whether no element is open: between top-level elements.
    pub(crate) fn is_idle(&self) -> bool {
        self.open.is_empty()
    }

    /// Takes one finished token; returns the top-level element it completes, if it does.
    pub(crate) fn token(&mut self, kind: Kind, tok: &str, limits: &Limits) -> Result<Option<Element>, StreamError> {
        match kind {
            Kind::Start => self.start(tok, limits),
            Kind::End => self.end(tok),
            Kind::Text => self.text(&decode(tok, Context::Text)?, limits),
            Kind::CData => {
                let inner = tok.get(9..tok.len().saturating_sub(3)).ok_or_else(|| malformed("bad CDATA section"))?;
                self.text(&decode(inner, Context::CData)?, limits)
            }
            Kind::Decl => Err(StreamError::RestrictedXml("XML declaration inside the document".into())),
        }
    }

    fn start(&mut self, tok: &str, limits: &Limits) -> Result<Option<Element>, StreamError> {
        if self.open.is_empty() {
            (self.nodes, self.copied) = (0, 0);
        }
        if self.open.len() >= limits.max_depth {
            return Err(StreamError::PolicyViolation(format!("elements nested deeper than {}", limits.max_depth)));
        }
        self.count_node(limits)?;
        // One more for the default namespace declaration, which `Element::attrs` leaves out.
        let tag = start_tag(tok, limits.max_attributes.saturating_add(1))?;
        let scope_at = self.scope.len();
        let element = open_element(&mut self.scope, &tag, limits)?;
        // Every element owns a copy of its namespace name and of the declarations its prefixed
        // attributes need, so one long name declared once could be multiplied by the node
        // count. The copies get a budget of their own, generous next to real stanzas.
        self.copied += element.ns.len();
        self.copied +=
            element.attrs.iter().filter(|(n, _)| n.starts_with("xmlns:")).map(|(_, v)| v.len()).sum::<usize>();
        if self.copied > limits.max_stanza_bytes.saturating_mul(COPY_FACTOR) {
            return Err(StreamError::PolicyViolation("namespace names repeated in too many elements".into()));
        }
        if tag.empty {
            self.scope.truncate(scope_at);
            return Ok(self.close(element));
        }
        let qname_at = self.qnames.len();
        self.qnames.push_str(tag.name);
        self.open.push(Open { element, qname_at, scope_at });
        Ok(None)
    }

    fn end(&mut self, tok: &str) -> Result<Option<Element>, StreamError> {
        let name = end_tag(tok)?;
        let open =
            self.open.pop().ok_or_else(|| StreamError::NotWellFormed(format!("</{name}> without a start tag")))?;
        let open_name = self.qnames.get(open.qname_at..).unwrap_or_default();
        if open_name != name {
            return Err(StreamError::NotWellFormed(format!("</{name}> closes <{open_name}>")));
        }
        self.qnames.truncate(open.qname_at);
        self.scope.truncate(open.scope_at);
        Ok(self.close(open.element))
    }

    fn text(&mut self, text: &str, limits: &Limits) -> Result<Option<Element>, StreamError> {
        let merges = match self.open.last() {
            None => return Err(malformed("text outside an element")),
            Some(top) => matches!(top.element.children.last(), Some(Node::Text(_))),
        };
        if text.is_empty() {
            return Ok(None);
        }
        if !merges {
            self.count_node(limits)?;
        }
        if let Some(top) = self.open.last_mut() {
            match top.element.children.last_mut() {
                Some(Node::Text(last)) => last.push_str(text),
                _ => top.element.children.push(Node::Text(text.to_owned())),
            }
        }
        Ok(None)
    }

    /// Attaches a finished element to its parent, or hands it out when it is the top one.
    fn close(&mut self, element: Element) -> Option<Element> {
        match self.open.last_mut() {
            Some(parent) => {
                parent.element.children.push(Node::Element(element));
                None
            }
            None => Some(element),
        }
    }

    fn count_node(&mut self, limits: &Limits) -> Result<(), StreamError> {
        self.nodes += 1;
        if self.nodes > limits.max_nodes {
            return Err(StreamError::PolicyViolation(format!("more than {} nodes in one element", limits.max_nodes)));
        }
        Ok(())
    }
}

/// The binding of `prefix` in `scope`: where it was declared (`usize::MAX` for the implicit
/// `xml` binding and the empty default) and its URI.
pub(crate) fn lookup<'s>(scope: &'s Scope, prefix: &str) -> Option<(usize, &'s str)> {
    if prefix == "xml" {
        return Some((usize::MAX, XML_NS));
    }
    match scope.iter().rposition(|(p, _)| p == prefix) {
        Some(at) => Some((at, scope[at].1.as_str())),
        None if prefix.is_empty() => Some((usize::MAX, "")),
        None => None,
    }
}

/// Builds an element (without children) from its start tag: pushes its namespace declarations
/// onto `scope`, resolves its name, and keeps its attributes as [`Element::attrs`] describes.
pub(crate) fn open_element(scope: &mut Scope, tag: &StartTag<'_>, limits: &Limits) -> Result<Element, StreamError> {
    let scope_at = scope.len();
    for (i, (name, value)) in tag.attrs.iter().enumerate() {
        if tag.attrs[..i].iter().any(|(n, _)| n == name) {
            return Err(StreamError::NotWellFormed(format!("attribute {name} given twice")));
        }
        let prefix = match name.strip_prefix("xmlns") {
            Some("") => "",
            Some(rest) => match rest.strip_prefix(':') {
                Some(prefix) => prefix,
                None => continue,
            },
            None => continue,
        };
        split_qname(name)?;
        // Namespaces in XML §3: `xml` only to its own URI, which nothing else may take;
        // `xmlns` never; no undeclaring a prefix (that is XML 1.1).
        if prefix == "xmlns" || (prefix == "xml") != (value == XML_NS) || (!prefix.is_empty() && value.is_empty()) {
            return Err(StreamError::NotWellFormed(format!("bad declaration {name}={value:?}")));
        }
        if prefix != "xml" {
            scope.push((prefix.to_owned(), value.clone().into_owned()));
        }
    }
    let (prefix, local) = split_qname(tag.name)?;
    // `xmlns` itself is never in scope: declaring it is refused above.
    let Some((_, ns)) = lookup(scope, prefix) else {
        return Err(StreamError::BadNamespacePrefix(format!("prefix {prefix:?} of <{}> is not declared", tag.name)));
    };
    let ns = ns.to_owned();
    let mut attrs: Vec<(String, String)> = Vec::with_capacity(tag.attrs.len());
    for (name, value) in &tag.attrs {
        if *name == "xmlns" {
            continue;
        }
        let (prefix, _) = split_qname(name)?;
        if !prefix.is_empty() && prefix != "xmlns" {
            let Some((at, uri)) = lookup(scope, prefix) else {
                return Err(StreamError::BadNamespacePrefix(format!(
                    "prefix {prefix:?} of attribute {name} is not declared"
                )));
            };
            // Declared on an ancestor or the stream header: carry the declaration along.
            let declaration = format!("xmlns:{prefix}");
            if at < scope_at && !attrs.iter().any(|(n, _)| *n == declaration) {
                attrs.push((declaration, uri.to_owned()));
            }
        }
        attrs.push(((*name).to_owned(), value.clone().into_owned()));
    }
    if attrs.len() > limits.max_attributes {
        return Err(StreamError::PolicyViolation(format!(
            "more than {} attributes on <{}>",
            limits.max_attributes, tag.name
        )));
    }
    Ok(Element { name: local.to_owned(), ns, attrs, children: Vec::new() })
}
