//! [`parse_document`]: a standalone XML payload, read with the stream's rules and limits.

use crate::chars::is_space;
use crate::element::Element;
use crate::error::{StreamError, malformed};
use crate::limits::Limits;
use crate::scan::{Kind, Scanner};
use crate::tag::declaration;
use crate::tree::Tree;

/// Parses one standalone XML document (a payload a publisher sent: an optional XML declaration,
/// then one root element, optional surrounding white space) into an [`Element`], with the
/// stream's restrictions and limits ([`Limits::max_stanza_bytes`] bounds the input), so that
/// the broker can embed it in pubsub items knowing it is well-formed and bounded.
pub fn parse_document(input: &[u8], limits: &Limits) -> Result<Element, StreamError> {
    if input.len() > limits.max_stanza_bytes {
        return Err(StreamError::PolicyViolation(format!(
            "document of {} bytes, larger than {} bytes",
            input.len(),
            limits.max_stanza_bytes
        )));
    }
    let mut rest = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);
    let (mut tree, mut scan) = (Tree::default(), Scanner::default());
    let (mut first, mut root) = (true, None);
    loop {
        if tree.is_idle() {
            let space = rest.iter().take_while(|&&c| is_space(c)).count();
            rest = &rest[space..];
            match rest.first() {
                None => return root.ok_or_else(|| malformed("no root element")),
                Some(b'<') => {}
                Some(_) => return Err(malformed("text outside the root element")),
            }
        }
        let (kind, len) = scan.scan(rest, usize::MAX)?.ok_or_else(|| malformed("the document ends inside markup"))?;
        let tok = std::str::from_utf8(&rest[..len])
            .map_err(|_| StreamError::UnsupportedEncoding("bytes that are not UTF-8".into()))?;
        rest = &rest[len..];
        if root.is_some() {
            return Err(malformed("content after the root element"));
        }
        if std::mem::take(&mut first) && kind == Kind::Decl {
            declaration(tok)?;
            continue;
        }
        root = tree.token(kind, tok, limits)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::Node;

    fn parse(s: &str) -> Result<Element, StreamError> {
        parse_document(s.as_bytes(), &Limits::default())
    }

    #[test]
    fn a_payload_with_declaration_namespaces_and_mixed_content() {
        let doc = "\u{FEFF}<?xml version='1.0' encoding='UTF-8'?>\n<x:entry xmlns:x='http://www.w3.org/2005/Atom' \
                   xml:lang='en'>\r\n <x:title type=\"text\">a &lt; b<![CDATA[ <c> ]]>&#x21;</x:title><link href='u' \
                   xmlns=''/></x:entry>\n";
        let entry = parse(doc).unwrap();
        let atom = "http://www.w3.org/2005/Atom";
        assert_eq!(
            entry,
            Element {
                name: "entry".into(),
                ns: atom.into(),
                attrs: vec![("xmlns:x".into(), atom.into()), ("xml:lang".into(), "en".into())],
                children: vec![
                    Node::Text("\n ".into()),
                    Node::Element(Element::new("title", atom).with_attr("type", "text").with_text("a < b <c> !")),
                    Node::Element(Element::new("link", "").with_attr("href", "u")),
                ],
            }
        );
    }

    #[test]
    fn inherited_attribute_prefixes_are_declared_where_used() {
        let e = parse("<a xmlns:p='urn:p'><b p:x='1' p:y='2'/></a>").unwrap();
        let b = e.elements().next().unwrap();
        assert_eq!(
            b.attrs,
            [("xmlns:p".into(), "urn:p".into()), ("p:x".into(), "1".into()), ("p:y".into(), "2".into())]
        );
        assert_eq!(parse_document(&b.to_bytes(), &Limits::default()).as_ref(), Ok(b));
    }

    #[test]
    fn refusals() {
        let not_wf = |s: &str| assert!(matches!(parse(s), Err(StreamError::NotWellFormed(_))), "{s:?}: {:?}", parse(s));
        for s in
            ["", "  ", "text", "<a>", "<a></b>", "<a/><b/>", "<a/>x", "<a/><?xml version='1.0'?>", "</a>", "<a/></a>"]
        {
            not_wf(s);
        }
        assert!(matches!(parse("<a/><!-- c -->"), Err(StreamError::RestrictedXml(_))));
        assert!(matches!(parse("<a/><?pi?>"), Err(StreamError::RestrictedXml(_))));
        assert!(matches!(parse("<a><?xml version='1.0'?></a>"), Err(StreamError::RestrictedXml(_))));
        assert!(matches!(parse("<p:a/>"), Err(StreamError::BadNamespacePrefix(_))));
        assert!(matches!(parse("<a p:b='1'/>"), Err(StreamError::BadNamespacePrefix(_))));
        assert!(matches!(parse("<a xmlns:p=''/>"), Err(StreamError::NotWellFormed(_))));
        assert!(matches!(parse("<a xmlns:xml='urn:x'/>"), Err(StreamError::NotWellFormed(_))));
        assert!(matches!(parse("<a b='1' b='2'/>"), Err(StreamError::NotWellFormed(_))));
        assert!(matches!(parse_document(b"<a>\xFF</a>", &Limits::default()), Err(StreamError::UnsupportedEncoding(_))));
        let small = Limits { max_stanza_bytes: 4, ..Limits::default() };
        assert!(matches!(parse_document(b"<a/> ", &small), Err(StreamError::PolicyViolation(_))));
        assert!(parse_document(b"<a/>", &small).is_ok());
    }

    #[test]
    fn limits() {
        let limits = Limits { max_depth: 2, max_attributes: 2, max_nodes: 4, ..Limits::default() };
        let p = |s: &str| parse_document(s.as_bytes(), &limits);
        assert!(p("<a><b/></a>").is_ok());
        assert!(matches!(p("<a><b><c/></b></a>"), Err(StreamError::PolicyViolation(_))));
        assert!(p("<a xmlns='u' b='' c=''/>").is_ok());
        assert!(matches!(p("<a b='' c='' d=''/>"), Err(StreamError::PolicyViolation(_))));
        assert!(p("<a>x<b/>y</a>").is_ok());
        assert!(p("<a>x<![CDATA[y]]>z<b/></a>").is_ok());
        assert!(matches!(p("<a>x<b/>y<c/></a>"), Err(StreamError::PolicyViolation(_))));
    }
}
