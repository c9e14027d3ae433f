//! Test-only reader: turns a document into a plain namespace-resolved tree with quick-xml
//! directly (independent of the crate's own parser), to check the structure of what the
//! writers produce.
#![allow(dead_code)]

use quick_xml::NsReader;
use quick_xml::events::Event;
use quick_xml::name::ResolveResult;

#[derive(Debug, Clone)]
pub struct Elem {
    pub ns: Option<String>,
    pub local: String,
    pub attrs: Vec<(Option<String>, String, String)>,
    pub text: String,
    pub children: Vec<Elem>,
    /// In-scope bindings at this element, `(prefix, uri)`.
    pub scope: Vec<(Option<String>, String)>,
}

impl Elem {
    pub fn child(&self, ns: &str, local: &str) -> &Elem {
        self.children
            .iter()
            .find(|c| c.ns.as_deref() == Some(ns) && c.local == local)
            .unwrap_or_else(|| panic!("no {{{ns}}}{local} under {}: {:#?}", self.local, self.children))
    }

    pub fn unqualified(&self, local: &str) -> &Elem {
        self.children.iter().find(|c| c.ns.is_none() && c.local == local).unwrap_or_else(|| panic!("no {local}"))
    }

    pub fn attr(&self, ns: Option<&str>, local: &str) -> Option<&str> {
        self.attrs.iter().find(|(n, l, _)| n.as_deref() == ns && l == local).map(|(_, _, v)| v.as_str())
    }

    pub fn is(&self, ns: &str, local: &str) -> bool {
        self.ns.as_deref() == Some(ns) && self.local == local
    }

    /// Resolves a QName written as content of this element.
    pub fn resolve_qname(&self, text: &str) -> (Option<String>, String) {
        let (prefix, local) = match text.trim().split_once(':') {
            Some((p, l)) => (Some(p), l),
            None => (None, text.trim()),
        };
        let ns = self.scope.iter().rev().find(|(p, _)| p.as_deref() == prefix).map(|(_, u)| u.clone());
        (ns, local.to_owned())
    }
}

/// Parses a whole document; panics if it is not namespace-well-formed.
pub fn tree(xml: &[u8]) -> Elem {
    let text = std::str::from_utf8(xml).expect("utf-8");
    let mut reader = NsReader::from_str(text);
    let mut stack: Vec<Elem> = Vec::new();
    let mut root = None;
    loop {
        let (res, event) = reader.read_resolved_event().expect("well-formed XML");
        let ns = match res {
            ResolveResult::Bound(ns) => Some(ns.0.to_owned()),
            ResolveResult::Unbound => None,
            ResolveResult::Unknown(p) => panic!("unbound prefix {p}"),
        };
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let mut attrs = Vec::new();
                for a in e.attributes() {
                    let a = a.expect("attribute");
                    if a.key.as_namespace_binding().is_some() {
                        continue;
                    }
                    let (r, l) = reader.resolver().resolve_attribute(a.key);
                    let ans = match r {
                        ResolveResult::Bound(ns) => Some(ns.0.to_owned()),
                        ResolveResult::Unbound => None,
                        ResolveResult::Unknown(p) => panic!("unbound attribute prefix {p}"),
                    };
                    let v = a.normalized_value(quick_xml::XmlVersion::Implicit1_0).expect("value").into_owned();
                    attrs.push((ans, l.into_inner().to_owned(), v));
                }
                let scope = reader
                    .resolver()
                    .bindings()
                    .map(|(p, n)| {
                        let p = match p {
                            quick_xml::name::PrefixDeclaration::Default => None,
                            quick_xml::name::PrefixDeclaration::Named(p) => Some(p.to_owned()),
                        };
                        (p, n.0.to_owned())
                    })
                    .collect();
                let elem = Elem {
                    ns,
                    local: e.local_name().into_inner().to_owned(),
                    attrs,
                    text: String::new(),
                    children: vec![],
                    scope,
                };
                if matches!(event, Event::Start(_)) {
                    stack.push(elem);
                } else if let Some(parent) = stack.last_mut() {
                    parent.children.push(elem);
                } else {
                    root = Some(elem);
                }
            }
            Event::End(_) => {
                let done = stack.pop().expect("balanced");
                match stack.last_mut() {
                    Some(parent) => parent.children.push(done),
                    None => root = Some(done),
                }
            }
            Event::Text(t) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&t.xml10_content());
                }
            }
            Event::GeneralRef(r) => {
                if let Some(top) = stack.last_mut() {
                    let s: String = match r.resolve_char_ref().expect("char ref") {
                        Some(c) => c.to_string(),
                        None => quick_xml::escape::resolve_predefined_entity(&r).expect("entity").to_owned(),
                    };
                    top.text.push_str(&s);
                }
            }
            Event::DocType(_) => panic!("writer produced a DOCTYPE"),
            Event::Eof => break,
            _ => {}
        }
    }
    root.expect("root element")
}
