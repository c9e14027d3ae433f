//! [`Element`] and [`Node`]: the namespace-resolved tree a stanza or payload is read into, with
//! the small builder and query surface a server needs to answer and route stanzas.

/// An XML element with its namespace resolved, so that code matches `(name, ns)` pairs and
/// never has to care which prefix a client chose.
///
/// `attrs` holds the attributes as written (`xml:lang` and other prefixed names keep their
/// prefix), in document order, without the default namespace declaration (that is `ns`).
/// Prefix declarations (`xmlns:p`) are kept, and a prefixed attribute whose prefix was
/// declared on an ancestor gets that declaration added to its own element, so that any element
/// written on its own is still namespace-well-formed. Values are decoded.
///
/// Children keep text exactly, white space included: a parsed element never has two adjacent
/// or empty text nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// The local name, without prefix.
    pub name: String,
    /// The namespace URI, "" for none.
    pub ns: String,
    /// Attribute names as written and decoded values, see the type's documentation.
    pub attrs: Vec<(String, String)>,
    /// Child elements and text, in document order.
    pub children: Vec<Node>,
}

/// A child of an [`Element`]: mixed content is kept in order so payloads survive unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A child element.
    Element(Element),
    /// Character data (CDATA sections included), references decoded.
    Text(String),
}

impl Element {
    /// An empty element, the start of every stanza the server builds.
    pub fn new(name: impl Into<String>, ns: impl Into<String>) -> Self {
        Element { name: name.into(), ns: ns.into(), attrs: Vec::new(), children: Vec::new() }
    }

    /// The value of an attribute by its name as written (`"id"`, `"xml:lang"`), for routing.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// Builder form of [`Element::set_attr`], for writing replies in one expression.
    pub fn with_attr(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.set_attr(name, value);
        self
    }

    /// Sets an attribute, replacing an existing one of that name: an element never carries a
    /// name twice (that would not be well-formed).
    pub fn set_attr(&mut self, name: impl Into<String>, value: impl Into<String>) {
        let (name, value) = (name.into(), value.into());
        match self.attrs.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => *v = value,
            None => self.attrs.push((name, value)),
        }
    }

    /// Builder form of [`Element::push_child`].
    pub fn with_child(mut self, child: Element) -> Self {
        self.push_child(child);
        self
    }

    /// Appends a text child, merged into a preceding one so the tree stays as a parse of its
    /// serialised form would give it.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        let text = text.into();
        match self.children.last_mut() {
            Some(Node::Text(last)) => last.push_str(&text),
            _ if text.is_empty() => {}
            _ => self.children.push(Node::Text(text)),
        }
        self
    }

    /// Appends a child element.
    pub fn push_child(&mut self, child: Element) {
        self.children.push(Node::Element(child));
    }

    /// The first direct child element with that name and namespace: how a server finds
    /// `<bind/>` in an `<iq/>` or `<publish/>` in `<pubsub/>`.
    pub fn child(&self, name: &str, ns: &str) -> Option<&Element> {
        self.elements().find(|e| e.is(name, ns))
    }

    /// The direct child elements, skipping text.
    pub fn elements(&self) -> impl Iterator<Item = &Element> {
        self.children.iter().filter_map(|n| match n {
            Node::Element(e) => Some(e),
            Node::Text(_) => None,
        })
    }

    /// The direct text children concatenated: the value of leaf elements such as `<body/>` or
    /// SASL's `<auth/>`.
    pub fn text(&self) -> String {
        self.children
            .iter()
            .filter_map(|n| match n {
                Node::Text(t) => Some(t.as_str()),
                Node::Element(_) => None,
            })
            .collect()
    }

    /// Whether this is the element `name` in namespace `ns`: the only correct way to match
    /// XMPP elements, whose prefixes are the sender's choice.
    pub fn is(&self, name: &str, ns: &str) -> bool {
        self.name == name && self.ns == ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_and_queries() {
        let iq = Element::new("iq", "jabber:client")
            .with_attr("type", "get")
            .with_attr("id", "1")
            .with_attr("type", "result")
            .with_text("a")
            .with_child(Element::new("query", "urn:q"))
            .with_child(Element::new("query", "urn:other"))
            .with_text("b")
            .with_text("c")
            .with_text("");
        assert_eq!(iq.attrs, [("type".to_owned(), "result".to_owned()), ("id".to_owned(), "1".to_owned())]);
        assert_eq!(iq.attr("id"), Some("1"));
        assert_eq!(iq.attr("to"), None);
        assert_eq!(iq.text(), "abc");
        assert_eq!(iq.children.len(), 4);
        assert_eq!(iq.elements().count(), 2);
        assert_eq!(iq.child("query", "urn:other").map(|e| e.ns.as_str()), Some("urn:other"));
        assert!(iq.child("query", "urn:none").is_none());
        assert!(iq.is("iq", "jabber:client"));
        assert!(!iq.is("iq", ""));
    }
}
