//! Every way a client's bytes are refused, with the stream error condition it maps to. Each
//! case is read whole and byte by byte, which must fail the same way.

mod common;

use bytes::BytesMut;
use common::{HEADER, bytewise, error_after_header, feed, whole};
use xmpp_codec::{Event, Limits, StreamError, StreamReader};

fn condition(body: &str) -> &'static str {
    error_after_header(body).condition()
}

/// The error a stream that starts with `wire` (no header of ours) ends in.
fn prolog_error(wire: &str) -> StreamError {
    let outcome = whole(wire.as_bytes());
    assert_eq!(outcome.error, bytewise(wire.as_bytes()).error, "whole and bytewise differ for {wire:?}");
    assert_eq!(outcome.events, []);
    outcome.error.unwrap_or_else(|| panic!("no error for {wire:?}"))
}

#[test]
fn restricted_xml() {
    assert_eq!(
        error_after_header("<message><!-- hi --></message>"),
        StreamError::RestrictedXml("comments, DTDs and markup declarations are not allowed".into())
    );
    assert_eq!(condition("<!-- between stanzas -->"), "restricted-xml");
    assert_eq!(
        error_after_header("<message><?php echo 1; ?></message>"),
        StreamError::RestrictedXml("processing instructions are not allowed".into())
    );
    assert_eq!(condition("<?xml version='1.0'?>"), "restricted-xml");
    assert_eq!(condition("<message><body>&foo;</body></message>"), "restricted-xml");
    assert_eq!(
        error_after_header("<message to='&foo;'/>"),
        StreamError::RestrictedXml("entity reference &foo;".into())
    );
    assert_eq!(condition("<message><![INCLUDE[ x ]]></message>"), "restricted-xml");
    assert_eq!(prolog_error("<!DOCTYPE stream>").condition(), "restricted-xml");
    assert_eq!(
        prolog_error("<?xml version='1.0'?>\n<!DOCTYPE stream [<!ENTITY a 'b'>]>").condition(),
        "restricted-xml"
    );
    assert_eq!(prolog_error("<!-- hello -->").condition(), "restricted-xml");
    assert_eq!(prolog_error("<?xml-stylesheet href='x'?>").condition(), "restricted-xml");
    assert_eq!(prolog_error("<?xml version='1.0'?><?xml version='1.0'?>").condition(), "restricted-xml");
}

#[test]
fn not_well_formed() {
    // Reported as soon as the wrong end tag arrives: nothing more is needed.
    assert_eq!(error_after_header("<a><b></a>"), StreamError::NotWellFormed("</a> closes <b>".into()));
    let outcome = whole(format!("{HEADER}<message>").as_bytes());
    assert_eq!(outcome.error, None, "an unfinished stanza is not an error");
    for body in [
        "hello",
        "</message>",
        "<message></stream:stream>",
        "</stream>",
        "<a b=c/>",
        "<a b='1' b='2'/>",
        "<a>&#0;</a>",
        "<a>&#xD800;</a>",
        "<a>\u{1}</a>",
        "<a>&</a>",
        "<1a/>",
        "<a:b:c xmlns:a='u'/>",
        "<![CDATA[top-level text]]>",
        "<a xmlns:p=''/>",
        "</stream:stream>x",
    ] {
        assert_eq!(condition(body), "not-well-formed", "{body:?}");
    }
    assert_eq!(prolog_error("hello").condition(), "not-well-formed");
    assert_eq!(prolog_error("</stream:stream>").condition(), "not-well-formed");
    assert_eq!(prolog_error("<?xml version='2.0'?>").condition(), "not-well-formed");
}

#[test]
fn policy_violation() {
    let limits = Limits::default();
    // Depth: 16 levels are fine, 17 are not.
    let nest = |n: usize| format!("{}{}", "<a>".repeat(n), "</a>".repeat(n));
    assert!(common::element_after_header(&nest(16)).is("a", "jabber:client"));
    assert_eq!(error_after_header(&nest(17)), StreamError::PolicyViolation("elements nested deeper than 16".into()));
    // Attributes: 32 fine (the default namespace declaration not counted), 33 not.
    let attrs = |n: usize| (0..n).map(|i| format!(" a{i}='v'")).collect::<String>();
    assert!(common::element_after_header(&format!("<m xmlns='urn:x'{}/>", attrs(32))).attrs.len() == 32);
    assert_eq!(condition(&format!("<m{}/>", attrs(33))), "policy-violation");
    // Nodes.
    assert_eq!(condition(&format!("<m>{}</m>", "<b/>".repeat(limits.max_nodes))), "policy-violation");
    assert!(
        common::element_after_header(&format!("<m>{}</m>", "<b/>".repeat(limits.max_nodes - 1))).children.len() == 4095
    );
}

#[test]
fn oversized_stanza_is_refused_before_it_ends() {
    let limits = Limits { max_stanza_bytes: 1000, ..Limits::default() };
    let mut reader = StreamReader::new(limits);
    let mut buf = BytesMut::from(HEADER.as_bytes());
    assert!(matches!(reader.next(&mut buf), Ok(Some(Event::StreamOpen(_)))));
    buf.extend_from_slice(b"<message><body>");
    assert_eq!(reader.next(&mut buf), Ok(None));
    let mut fed = 15;
    let error = loop {
        buf.extend_from_slice(&[b'a'; 100]);
        fed += 100;
        match reader.next(&mut buf) {
            Ok(None) => assert!(fed <= 1000, "still reading after {fed} bytes"),
            Ok(Some(event)) => panic!("unexpected {event:?}"),
            Err(e) => break e,
        }
    };
    assert_eq!(fed, 1015);
    assert_eq!(error, StreamError::PolicyViolation("element larger than 985 bytes".into()));
    // The error sticks.
    assert_eq!(reader.next(&mut buf), Err(error));

    // The same bound on a stanza arriving whole, and on a stanza exactly at the limit.
    let stanza = |len: usize| format!("<m>{}</m>", "a".repeat(len - 7));
    let at_limit = feed(limits, format!("{HEADER}{}", stanza(1000)).as_bytes(), &[]);
    assert_eq!(at_limit.error, None);
    assert_eq!(at_limit.events.len(), 2);
    let over = feed(limits, format!("{HEADER}{}", stanza(1001)).as_bytes(), &[]);
    assert_eq!(over.error.map(|e| e.condition()), Some("policy-violation"));
    // The header and the XML declaration are bounded too.
    let long_header = format!("<stream:stream to='{}'", "x".repeat(2000));
    assert_eq!(feed(limits, long_header.as_bytes(), &[]).error.map(|e| e.condition()), Some("policy-violation"));
}

#[test]
fn invalid_namespace() {
    assert_eq!(
        prolog_error("<stream:stream xmlns='jabber:client' xmlns:stream='urn:wrong'>"),
        StreamError::InvalidNamespace(
            "the stream header is <stream> in \"urn:wrong\", not <stream> in http://etherx.jabber.org/streams".into()
        )
    );
    assert_eq!(
        prolog_error("<stream:stream xmlns='jabber:server' xmlns:stream='http://etherx.jabber.org/streams'>"),
        StreamError::InvalidNamespace("content namespace \"jabber:server\", not jabber:client".into())
    );
    for wire in [
        "<stream:stream xmlns:stream='http://etherx.jabber.org/streams'>",
        "<stream xmlns='http://etherx.jabber.org/streams'>",
        "<stream:features xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>",
    ] {
        assert_eq!(prolog_error(wire).condition(), "invalid-namespace", "{wire}");
    }
}

#[test]
fn bad_namespace_prefix() {
    assert_eq!(
        prolog_error("<stream:stream xmlns='jabber:client'>"),
        StreamError::BadNamespacePrefix("prefix \"stream\" of <stream:stream> is not declared".into())
    );
    assert_eq!(condition("<foo:message/>"), "bad-namespace-prefix");
    assert_eq!(condition("<message foo:bar='1'/>"), "bad-namespace-prefix");
    assert_eq!(condition("<message><x:y xmlns:x='u'/><x:z/></message>"), "bad-namespace-prefix");
}

#[test]
fn unsupported_encoding() {
    assert_eq!(
        prolog_error("<?xml version='1.0' encoding='UTF-16'?>"),
        StreamError::UnsupportedEncoding("encoding \"UTF-16\" declared, only UTF-8 is accepted".into())
    );
    let mut wire = format!("{HEADER}<message><body>").into_bytes();
    wire.extend_from_slice(b"caf\xC3</body></message>");
    let outcome = whole(&wire);
    assert_eq!(outcome.error, Some(StreamError::UnsupportedEncoding("bytes that are not UTF-8".into())));
    assert_eq!(outcome.error, bytewise(&wire).error);
    let wire = b"<stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' to='\xFF'>";
    assert_eq!(whole(wire).error.map(|e| e.condition()), Some("unsupported-encoding"));
}

#[test]
fn data_after_the_close() {
    assert_eq!(condition("</stream:stream> \n<message/>"), "not-well-formed");
}

#[test]
fn conditions() {
    let all = [
        (StreamError::NotWellFormed(String::new()), "not-well-formed"),
        (StreamError::RestrictedXml(String::new()), "restricted-xml"),
        (StreamError::PolicyViolation(String::new()), "policy-violation"),
        (StreamError::InvalidNamespace(String::new()), "invalid-namespace"),
        (StreamError::BadNamespacePrefix(String::new()), "bad-namespace-prefix"),
        (StreamError::UnsupportedEncoding("x".into()), "unsupported-encoding"),
    ];
    for (error, condition) in all {
        assert_eq!(error.condition(), condition);
    }
    assert_eq!(StreamError::UnsupportedEncoding("x".into()).text(), "x");
    assert_eq!(StreamError::RestrictedXml("y".into()).to_string(), "restricted XML: y");
}

#[test]
fn a_byte_order_mark_only_at_the_start() {
    assert_eq!(prolog_error("  \u{FEFF}<stream:stream/>").condition(), "not-well-formed");
    let outcome = whole(format!("\u{FEFF}{HEADER}").as_bytes());
    assert_eq!((outcome.events.len(), outcome.error), (1, None));
    // Split inside the mark, or after leading white space: the same outcome as whole.
    assert_eq!(bytewise(b"\xEF\xBB").error, None);
    assert_eq!(bytewise(b"   \xEF").error, Some(StreamError::NotWellFormed("text before the stream header".into())));
}
