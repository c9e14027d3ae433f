//! Writing and reading back: exact output for the namespace cases a server meets, the
//! server's stream framing, and properties over generated trees and arbitrary input.

mod common;

use bytes::BytesMut;
use common::{HEADER, feed};
use proptest::prelude::*;
use xmpp_codec::{
    CLIENT_NS, Element, Event, Limits, Node, STREAMS_NS, StreamError, StreamReader, XML_NS, parse_document,
    stream_close, stream_error, stream_header,
};

fn written(e: &Element, parent_ns: &str) -> String {
    let mut out = Vec::new();
    e.write_to(&mut out, parent_ns);
    String::from_utf8(out).unwrap()
}

fn unlimited_size(limits: Limits) -> Limits {
    Limits { max_stanza_bytes: usize::MAX, ..limits }
}

/// Reads `e` back from a client stream it was written into with `write_to`.
fn through_stream(e: &Element, limits: Limits) -> Result<Element, StreamError> {
    let mut wire = HEADER.as_bytes().to_vec();
    e.write_to(&mut wire, CLIENT_NS);
    stream_close(&mut wire);
    let mut reader = StreamReader::new(unlimited_size(limits));
    let mut buf = BytesMut::from(&wire[..]);
    let mut events = Vec::new();
    while let Some(event) = reader.next(&mut buf)? {
        events.push(event);
    }
    match <[Event; 3]>::try_from(events) {
        Ok([Event::StreamOpen(_), Event::Element(back), Event::StreamClose]) => Ok(back),
        Ok(other) => panic!("unexpected events {other:?}"),
        Err(other) => panic!("unexpected events {other:?}"),
    }
}

#[test]
fn namespaces_are_declared_only_where_they_change() {
    let iq = Element::new("iq", CLIENT_NS)
        .with_attr("type", "result")
        .with_child(Element::new("query", "urn:q").with_child(Element::new("item", "urn:q")))
        .with_child(Element::new("bare", ""))
        .with_child(Element::new("same", CLIENT_NS));
    assert_eq!(
        written(&iq, CLIENT_NS),
        "<iq type='result'><query xmlns='urn:q'><item/></query><bare xmlns=''/><same/></iq>"
    );
    assert_eq!(
        String::from_utf8(iq.to_bytes()).unwrap(),
        "<iq xmlns='jabber:client' type='result'><query xmlns='urn:q'><item/></query><bare xmlns=''/>\
         <same/></iq>"
    );
    // An element in no namespace inside one in no namespace declares nothing.
    assert_eq!(
        String::from_utf8(Element::new("a", "").with_child(Element::new("b", "")).to_bytes()).unwrap(),
        "<a><b/></a>"
    );
}

#[test]
fn stream_elements_use_the_header_prefix() {
    let features = Element::new("features", STREAMS_NS)
        .with_child(
            Element::new("starttls", "urn:ietf:params:xml:ns:xmpp-tls")
                .with_child(Element::new("required", "urn:ietf:params:xml:ns:xmpp-tls")),
        )
        .with_child(Element::new("ver", CLIENT_NS));
    assert_eq!(
        written(&features, CLIENT_NS),
        "<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'><required/></starttls><ver/>\
         </stream:features>"
    );
    // Standalone, the prefix would be undeclared: the namespace is declared as the default.
    assert_eq!(
        String::from_utf8(features.to_bytes()).unwrap(),
        "<features xmlns='http://etherx.jabber.org/streams'><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'>\
         <required/></starttls><ver xmlns='jabber:client'/></features>"
    );
    assert_eq!(parse_document(&features.to_bytes(), &Limits::default()), Ok(features.clone()));
    // Inside a stanza too.
    let error = Element::new("message", CLIENT_NS).with_child(Element::new("error", STREAMS_NS));
    assert_eq!(written(&error, CLIENT_NS), "<message><stream:error/></message>");
}

#[test]
fn escaping() {
    let e = Element::new("body", CLIENT_NS).with_attr("a", "<'\"&>\t\n\r").with_text("<'\"&>\t\n\r ]]>");
    assert_eq!(
        written(&e, CLIENT_NS),
        "<body a='&lt;&apos;&quot;&amp;&gt;&#x9;&#xA;&#xD;'>&lt;'\"&amp;&gt;\t\n&#xD; ]]&gt;</body>"
    );
    assert_eq!(through_stream(&e, Limits::default()), Ok(e.clone()));
    let ns = Element::new("x", "urn:a?b='c'&d");
    assert_eq!(written(&ns, ""), "<x xmlns='urn:a?b=&apos;c&apos;&amp;d'/>");
    assert_eq!(parse_document(&ns.to_bytes(), &Limits::default()), Ok(ns));
}

#[test]
fn parsed_elements_write_back_and_reparse() {
    for doc in [
        "<p:a xmlns:p='urn:p' xmlns:q='urn:q' q:x='1'><p:b><c xmlns='urn:c' p:y='2'>t</c></p:b><q:d/></p:a>",
        "<s:features xmlns:s='http://etherx.jabber.org/streams'><s:x/><y/></s:features>",
        "<a xmlns:stream='urn:other'><stream:b/><c xmlns:stream='http://etherx.jabber.org/streams'><stream:d stream:e='f'/></c></a>",
        "<a xml:lang='en'>\r\n  <b>  x  </b>\n<![CDATA[<&>]]></a>",
        "<a xmlns='urn:a'><xml:b xml:lang='en'><c/></xml:b></a>",
    ] {
        let e = parse_document(doc.as_bytes(), &Limits::default()).unwrap();
        assert_eq!(parse_document(&e.to_bytes(), &Limits::default()).as_ref(), Ok(&e), "{doc}");
        assert_eq!(through_stream(&e, Limits::default()).as_ref(), Ok(&e), "{doc} in a stream");
    }
    let e = parse_document(b"<a xmlns:stream='urn:other'><stream:b/></a>", &Limits::default()).unwrap();
    assert_eq!(e.elements().next().unwrap().ns, "urn:other");
    assert_eq!(written(&e, ""), "<a xmlns:stream='urn:other'><b xmlns='urn:other'/></a>");
}

#[test]
fn server_stream_framing() {
    let mut out = Vec::new();
    stream_header(&mut out, "example.org", Some("juliet@example.org/a'b"), "i<d");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' \
         id='i&lt;d' from='example.org' to='juliet@example.org/a&apos;b' version='1.0' xml:lang='en'>"
    );
    let mut out = Vec::new();
    stream_header(&mut out, "example.org", None, "1");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' \
         id='1' from='example.org' version='1.0' xml:lang='en'>"
    );
    let mut out = Vec::new();
    stream_error(&mut out, StreamError::RestrictedXml(String::new()).condition(), Some("no <!-- -->"));
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "<stream:error><restricted-xml xmlns='urn:ietf:params:xml:ns:xmpp-streams'/><text \
         xmlns='urn:ietf:params:xml:ns:xmpp-streams'>no &lt;!-- --&gt;</text></stream:error></stream:stream>"
    );
    let mut out = Vec::new();
    stream_error(&mut out, "host-unknown", None);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "<stream:error><host-unknown xmlns='urn:ietf:params:xml:ns:xmpp-streams'/></stream:error></stream:stream>"
    );
}

fn names() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "iq", "body", "x-y.z", "é", "名前", "_u", "error"]).prop_map(String::from)
}

fn namespaces() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["", CLIENT_NS, "urn:x", STREAMS_NS, XML_NS, "http://e/?a=1&b='2'<>"])
        .prop_map(String::from)
}

/// Text with everything that needs escaping or normalising, never empty.
fn texts() -> impl Strategy<Value = String> {
    let pieces = vec!["a", " ", "<", ">", "&", "'", "\"", "\r", "\n", "\r\n", "\t", "]]>", "é", "😀", "&amp;"];
    prop::collection::vec(prop::sample::select(pieces), 1..8).prop_map(|p| p.concat())
}

fn attributes() -> impl Strategy<Value = Vec<(String, String)>> {
    let names = prop::sample::select(vec!["id", "type", "to", "xml:lang", "a-b", "ü"]).prop_map(String::from);
    prop::collection::vec((names, prop_oneof![Just(String::new()), texts()]), 0..4)
}

fn elements() -> impl Strategy<Value = Element> {
    let leaf = (names(), namespaces(), attributes())
        .prop_map(|(name, ns, attrs)| attrs.into_iter().fold(Element::new(name, ns), |e, (n, v)| e.with_attr(n, v)));
    leaf.prop_recursive(5, 48, 6, |inner| {
        let (leaf_names, leaf_ns, leaf_attrs) = (names(), namespaces(), attributes());
        (
            leaf_names,
            leaf_ns,
            leaf_attrs,
            prop::collection::vec(prop_oneof![inner.prop_map(Node::Element), texts().prop_map(Node::Text)], 0..6),
        )
            .prop_map(|(name, ns, attrs, children)| {
                let e = attrs.into_iter().fold(Element::new(name, ns), |e, (n, v)| e.with_attr(n, v));
                children.into_iter().fold(e, |e, child| match child {
                    Node::Element(c) => e.with_child(c),
                    Node::Text(t) => e.with_text(t),
                })
            })
    })
}

/// Pieces of XML, good and bad, to build arbitrary streams from.
const FRAGMENTS: &[&[u8]] = &[
    b"<",
    b">",
    b"/>",
    b"</",
    b"a",
    b"b",
    b"p:",
    b"stream:",
    b"='",
    b"'",
    b"=\"",
    b"\"",
    b" ",
    b"\n",
    b"\r\n",
    b"&amp;",
    b"&lt;",
    b"&#65;",
    b"&#0;",
    b"&foo;",
    b"&",
    b"<![CDATA[",
    b"]]>",
    b"<!--",
    b"<?xml version='1.0'?>",
    b"?>",
    b" xmlns='urn:a'",
    b" xmlns=''",
    b" xmlns:p='urn:p'",
    b" p:at='v'",
    b" stream:at='w'",
    b" xml:lang='en'",
    b"</stream:stream>",
    b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>",
    b"\xC3\xA9",
    b"\xFF",
    b"<m>",
    b"</m>",
    b"<m/>",
    b"text",
    b" xmlns:stream='urn:s'",
];

/// Streams made of fragments (mostly refused somewhere), or of generated elements with at
/// most one fragment spliced in at an arbitrary byte (mostly read, some refused).
fn arbitrary_stream() -> impl Strategy<Value = Vec<u8>> {
    let fragments = || prop::collection::vec(prop::sample::select(FRAGMENTS.to_vec()), 0..40).prop_map(|f| f.concat());
    let from_fragments = (any::<bool>(), fragments()).prop_map(|(with_header, body)| {
        let mut wire = if with_header { HEADER.as_bytes().to_vec() } else { Vec::new() };
        wire.extend_from_slice(&body);
        wire
    });
    let splice = prop::option::of((any::<prop::sample::Index>(), prop::sample::select(FRAGMENTS.to_vec())));
    let from_elements = (prop::collection::vec(elements(), 1..4), splice).prop_map(|(elements, splice)| {
        let mut wire = HEADER.as_bytes().to_vec();
        for e in &elements {
            e.write_to(&mut wire, CLIENT_NS);
        }
        stream_close(&mut wire);
        if let Some((at, fragment)) = splice {
            let at = at.index(wire.len());
            wire.splice(at..at, fragment.iter().copied());
        }
        wire
    });
    prop_oneof![from_fragments, from_elements]
}

fn limits() -> impl Strategy<Value = Limits> {
    prop_oneof![
        Just(Limits::default()),
        Just(Limits { max_stanza_bytes: 64, max_depth: 3, max_attributes: 2, max_nodes: 5 }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn generated_trees_round_trip(e in elements()) {
        let bytes = e.to_bytes();
        let unlimited = Limits { max_stanza_bytes: usize::MAX, max_depth: 64, max_attributes: 64, max_nodes: usize::MAX };
        prop_assert_eq!(parse_document(&bytes, &unlimited), Ok(e.clone()), "written as {}", String::from_utf8_lossy(&bytes));
        prop_assert_eq!(through_stream(&e, unlimited), Ok(e));
    }

    #[test]
    fn arbitrary_streams_read_the_same_however_split_and_round_trip(
        wire in arbitrary_stream(),
        cuts in prop::collection::vec(0usize..400, 0..20),
        limits in limits(),
    ) {
        let whole = feed(limits, &wire, &[]);
        let split = feed(limits, &wire, &cuts);
        prop_assert_eq!(&whole.events, &split.events);
        prop_assert_eq!(&whole.error, &split.error);
        for event in &whole.events {
            if let Event::Element(e) = event {
                prop_assert_eq!(parse_document(&e.to_bytes(), &unlimited_size(limits)), Ok(e.clone()));
                prop_assert_eq!(through_stream(e, limits), Ok(e.clone()));
            }
        }
        if let Ok(e) = parse_document(&wire, &limits) {
            prop_assert_eq!(parse_document(&e.to_bytes(), &unlimited_size(limits)), Ok(e));
        }
    }
}
