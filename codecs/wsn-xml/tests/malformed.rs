//! Hostile and broken input: one test per malformed-input class and per limit, truncation
//! at every offset, and "arbitrary bytes never panic".

use std::time::{Duration, Instant};

use proptest::prelude::*;
use wsn_xml::{
    AddressingVersion, Dialect, EndpointReference, Limits, ParseError, Payload, PayloadForm, Request, SoapVersion,
    TopicExpression, XmlElement, parse_request, write_notify,
};

fn err(xml: &[u8]) -> wsn_xml::RequestError {
    match parse_request(xml, &Limits::default()) {
        Ok(env) => panic!("accepted: {env:?}"),
        Err(e) => e,
    }
}

fn body11(body: &str) -> String {
    format!(
        r#"<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/" xmlns:wsnt="http://docs.oasis-open.org/wsn/b-2" xmlns:wsa="http://www.w3.org/2005/08/addressing"><soap:Body>{body}</soap:Body></soap:Envelope>"#
    )
}

const VALID_NOTIFY: &str = r#"<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/" xmlns:wsnt="http://docs.oasis-open.org/wsn/b-2" xmlns:wsa="http://www.w3.org/2005/08/addressing"><soap:Header><wsa:Action>http://docs.oasis-open.org/wsn/bw-2/NotificationConsumer/Notify</wsa:Action></soap:Header><soap:Body><wsnt:Notify><wsnt:NotificationMessage><wsnt:Topic Dialect="http://docs.oasis-open.org/wsn/t-1/TopicExpression/Simple">t</wsnt:Topic><wsnt:Message><m:v xmlns:m="urn:m" a="1">2&amp;3</m:v></wsnt:Message></wsnt:NotificationMessage></wsnt:Notify></soap:Body></soap:Envelope>"#;

#[test]
fn not_xml() {
    for input in [
        &b""[..],
        b"hello",
        b"{\"json\": true}",
        b"<",
        b"<a",
        b"<a></b>",
        b"\x00\x01\x02",
        b"<a/><b/>",
        b"<a/>trailing",
    ] {
        let e = err(input);
        assert!(matches!(e.error, ParseError::Malformed { .. }), "{input:?}: {:?}", e.error);
        assert_eq!(e.soap, None);
    }
    assert!(matches!(err(b"<html><body/></html>").error, ParseError::NotSoapEnvelope { .. }));
}

#[test]
fn doctype_is_refused_before_any_entity_is_expanded() {
    let billion_laughs = r#"<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;"><!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>&lol3;</soap:Body></soap:Envelope>"#;
    assert!(matches!(err(billion_laughs.as_bytes()).error, ParseError::Doctype { .. }));
    let xxe = r#"<!DOCTYPE r [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>&xxe;</soap:Body></soap:Envelope>"#;
    assert!(matches!(err(xxe.as_bytes()).error, ParseError::Doctype { .. }));
    // Without a DTD, a non-predefined entity is simply undefined.
    assert!(matches!(err(body11("<x>&lol;</x>").as_bytes()).error, ParseError::UndefinedEntity { .. }));
    // The same defence for payloads: a payload with a DOCTYPE is never embedded as XML.
    let payload = XmlElement::from_payload(b"<!DOCTYPE a [<!ENTITY e 'x'>]><a>&e;</a>", None, &Limits::default());
    assert_eq!(payload.to_payload(&Limits::default()).form, PayloadForm::Text);
}

#[test]
fn wrong_envelope() {
    let e = err(br#"<soap:Envelope xmlns:soap="http://example.com/soap"><soap:Body/></soap:Envelope>"#);
    assert_eq!(e.error, ParseError::VersionMismatch { namespace: Some("http://example.com/soap".into()) });
    assert_eq!(err(b"<Envelope><Body/></Envelope>").error, ParseError::VersionMismatch { namespace: None });
    let e = err(br#"<soap:Envelop xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"/>"#);
    assert!(matches!(e.error, ParseError::NotSoapEnvelope { .. }));
    let e =
        err(br#"<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Header/></soap:Envelope>"#);
    assert_eq!((e.error, e.soap), (ParseError::MissingBody, Some(SoapVersion::V11)));
    // A Body in the other SOAP version's namespace is not this envelope's Body.
    let e = err(br#"<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><b:Body xmlns:b="http://www.w3.org/2003/05/soap-envelope"><x/></b:Body></s:Envelope>"#);
    assert_eq!(e.error, ParseError::MissingBody);
    assert_eq!(err(body11("  ").as_bytes()).error, ParseError::EmptyBody);
}

#[test]
fn missing_or_invalid_required_elements() {
    let cases: &[(&str, ParseError)] = &[
        ("<wsnt:Subscribe/>", ParseError::MissingElement { parent: "Subscribe", element: "ConsumerReference" }),
        (
            "<wsnt:Subscribe><wsnt:Filter/></wsnt:Subscribe>",
            ParseError::MissingElement { parent: "Subscribe", element: "ConsumerReference" },
        ),
        (
            "<wsnt:Subscribe><wsnt:ConsumerReference/></wsnt:Subscribe>",
            ParseError::MissingElement { parent: "ConsumerReference", element: "Address" },
        ),
        (
            "<wsnt:Subscribe><wsnt:ConsumerReference><wsa:Address> </wsa:Address></wsnt:ConsumerReference></wsnt:Subscribe>",
            ParseError::InvalidContent { element: "ConsumerReference", reason: "empty wsa:Address".into() },
        ),
        ("<wsnt:Notify/>", ParseError::MissingElement { parent: "Notify", element: "NotificationMessage" }),
        (
            "<wsnt:Notify><wsnt:NotificationMessage/></wsnt:Notify>",
            ParseError::MissingElement { parent: "NotificationMessage", element: "Message" },
        ),
        ("<wsnt:GetCurrentMessage/>", ParseError::MissingElement { parent: "GetCurrentMessage", element: "Topic" }),
        ("<wsnt:Renew/>", ParseError::MissingElement { parent: "Renew", element: "TerminationTime" }),
    ];
    for (body, want) in cases {
        assert_eq!(&err(body11(body).as_bytes()).error, want, "{body}");
    }
    for body in [
        "<wsnt:Notify><wsnt:NotificationMessage><wsnt:Message/></wsnt:NotificationMessage></wsnt:Notify>",
        "<wsnt:Notify><wsnt:NotificationMessage><wsnt:Message><a/><b/></wsnt:Message></wsnt:NotificationMessage></wsnt:Notify>",
        "<wsnt:Notify><wsnt:NotificationMessage><wsnt:Message>x<a/></wsnt:Message></wsnt:NotificationMessage></wsnt:Notify>",
        "<wsnt:GetMessages><wsnt:MaximumNumber>-1</wsnt:MaximumNumber></wsnt:GetMessages>",
        "<wsnt:GetMessages><wsnt:MaximumNumber/></wsnt:GetMessages>",
        r#"<br:RegisterPublisher xmlns:br="http://docs.oasis-open.org/wsn/br-2"><br:Demand>maybe</br:Demand></br:RegisterPublisher>"#,
    ] {
        assert!(matches!(err(body11(body).as_bytes()).error, ParseError::InvalidContent { .. }), "{body}");
    }
}

#[test]
fn namespace_errors() {
    assert!(matches!(err(body11("<nope:Subscribe/>").as_bytes()).error, ParseError::UnknownPrefix { .. }));
    assert!(matches!(
        err(body11(r#"<wsnt:Unsubscribe nope:a="1"/>"#).as_bytes()).error,
        ParseError::UnknownPrefix { .. }
    ));
    // Inside a captured payload too.
    let bad = VALID_NOTIFY.replace("<m:v xmlns:m=\"urn:m\"", "<m:v");
    assert!(matches!(err(bad.as_bytes()).error, ParseError::UnknownPrefix { .. }));
}

#[test]
fn encodings() {
    let mut utf16 = vec![0xFF, 0xFE];
    for c in VALID_NOTIFY.encode_utf16() {
        utf16.extend_from_slice(&c.to_le_bytes());
    }
    assert!(matches!(err(&utf16).error, ParseError::NotUtf8 { .. }));
    let latin1 = format!("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>{VALID_NOTIFY}");
    assert!(matches!(err(latin1.as_bytes()).error, ParseError::UnsupportedEncoding { .. }));
    let utf8 = format!("\u{FEFF}<?xml version=\"1.0\" encoding=\"UTF-8\"?>{VALID_NOTIFY}");
    assert!(parse_request(utf8.as_bytes(), &Limits::default()).is_ok());
}

fn nested_payload(depth: usize) -> String {
    VALID_NOTIFY.replace("2&amp;3", &format!("{}{}", "<d>".repeat(depth), "</d>".repeat(depth)))
}

#[test]
fn nesting_beyond_the_limit() {
    // Envelope, Body, Notify, NotificationMessage, Message, m:v: the first <d> is at depth 7.
    assert!(parse_request(nested_payload(64 - 6).as_bytes(), &Limits::default()).is_ok());
    assert!(matches!(err(nested_payload(64 - 5).as_bytes()).error, ParseError::TooDeep { limit: 64, .. }));
    // Deep nesting in the structural part is caught the same way.
    let deep_header = format!(
        r#"<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Header>{}{}</s:Header><s:Body><x/></s:Body></s:Envelope>"#,
        "<h>".repeat(100),
        "</h>".repeat(100)
    );
    assert!(matches!(err(deep_header.as_bytes()).error, ParseError::TooDeep { limit: 64, .. }));
}

/// Runs `f` on a thread with a 256 KiB stack: a parser that recursed once per nesting level
/// would overflow it (and abort the test binary) long before 100,000 levels.
fn on_a_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new().stack_size(256 * 1024).spawn(f).unwrap().join().unwrap();
}

/// No limits at all, so that the nesting reaches the code instead of stopping at a limit.
const UNLIMITED: Limits = Limits {
    max_document_bytes: usize::MAX,
    max_depth: usize::MAX,
    max_elements: usize::MAX,
    max_attributes_per_element: 64,
    max_namespace_bindings: 64,
};

#[test]
fn nothing_recurses_on_nesting_depth() {
    const DEPTH: usize = 100_000;
    // quick-xml refuses more than 65,535 open elements itself; stay under it without limits.
    const UNLIMITED_DEPTH: usize = 60_000;
    on_a_small_stack(|| {
        // With the default limits: refused at depth 65, answered as a SOAP fault.
        let e = err(nested_payload(DEPTH).as_bytes());
        assert!(matches!(e.error, ParseError::TooDeep { limit: 64, .. }));
        assert_eq!((e.soap, e.http_status()), (Some(SoapVersion::V11), 500));
        assert!(parse_request(nested_payload(DEPTH).as_bytes(), &UNLIMITED).is_err(), "quick-xml's own limit");
        // Without limits: the payload is captured, written into a Notify and read back.
        let deep = nested_payload(UNLIMITED_DEPTH);
        let env = parse_request(deep.as_bytes(), &UNLIMITED).unwrap();
        let Request::Notify(messages) = env.request else { panic!("not a Notify") };
        let out = write_notify(
            SoapVersion::V12,
            AddressingVersion::W3c,
            &EndpointReference::new("http://c/"),
            None,
            &messages,
        );
        let again = parse_request(&out, &UNLIMITED).unwrap();
        assert!(matches!(again.request, Request::Notify(m) if m[0].message == messages[0].message));
        // Outside a captured payload: a deep Header builds a deep tree.
        let header = VALID_NOTIFY.replace("<soap:Header>", &format!("<soap:Header>{}", nested("h", UNLIMITED_DEPTH)));
        assert!(parse_request(header.as_bytes(), &UNLIMITED).is_ok());
        // Payloads from other protocols take the same road.
        let payload = nested("p", UNLIMITED_DEPTH);
        let element = XmlElement::from_payload(payload.as_bytes(), None, &UNLIMITED);
        assert_eq!(element.to_payload(&UNLIMITED).bytes, payload.as_bytes());
        let element = XmlElement::from_payload(payload.as_bytes(), None, &Limits::default());
        let back = element.to_payload(&UNLIMITED);
        assert_eq!((back.form, &back.bytes[..]), (PayloadForm::Text, payload.as_bytes()), "too deep: wrapped as text");
        // Topic expressions: 100,000 levels, and a union of 100,000 paths.
        let levels = vec!["a"; DEPTH].join("/");
        let path = TopicExpression::new(Dialect::Full, &format!("{levels}/*//."), &[]);
        assert_eq!(path.to_filters().unwrap()[0].topic.len(), levels.len() + 4);
        let union = TopicExpression::new(Dialect::Full, &vec!["a/*"; DEPTH].join(" | "), &[]);
        assert_eq!(union.to_filters().unwrap().len(), DEPTH);
        assert!(TopicExpression::from_filter(&format!("{levels}/+/#"), Some("urn:t")).is_ok());
    });
}

fn nested(name: &str, depth: usize) -> String {
    format!("{}{}", format!("<{name}>").repeat(depth), format!("</{name}>").repeat(depth))
}

#[test]
fn many_distinct_prefixes_cost_linear_time() {
    // 100,000 distinct prefixes in a topic expression and in a payload's QName values (the
    // prefixes the parser tracks): linear, so well under the bound even in a debug build; a
    // scan per prefix took minutes.
    const N: usize = 100_000;
    let topic: Vec<String> = (0..N).map(|i| format!("p{i}:a")).collect();
    let values: String = (0..N).map(|i| format!("<v>q{i}:x</v>")).collect();
    let doc = format!(
        r#"<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/" xmlns:wsnt="http://docs.oasis-open.org/wsn/b-2"><s:Body><wsnt:Notify><wsnt:NotificationMessage><wsnt:Topic Dialect="http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete">{}</wsnt:Topic><wsnt:Message><m>{values}</m></wsnt:Message></wsnt:NotificationMessage></wsnt:Notify></s:Body></s:Envelope>"#,
        topic.join("/")
    );
    let limits = Limits { max_elements: 2 * N, ..UNLIMITED };
    let started = Instant::now();
    assert!(parse_request(doc.as_bytes(), &limits).is_ok());
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
}

#[test]
fn each_limit() {
    let limits = |f: fn(&mut Limits)| {
        let mut l = Limits::default();
        f(&mut l);
        l
    };
    let p = |xml: &str, l: &Limits| parse_request(xml.as_bytes(), l).map(|_| ()).map_err(|e| e.error);

    let many = VALID_NOTIFY.replace("2&amp;3", &"<i/>".repeat(50));
    assert!(p(&many, &limits(|l| l.max_elements = 60)).is_ok());
    assert!(matches!(p(&many, &limits(|l| l.max_elements = 40)), Err(ParseError::TooManyElements { limit: 40, .. })));

    let attrs: String = (0..10).map(|i| format!(" a{i}=\"{i}\"")).collect();
    let wide = VALID_NOTIFY.replace(" a=\"1\"", &attrs);
    assert!(p(&wide, &limits(|l| l.max_attributes_per_element = 11)).is_ok());
    assert!(matches!(
        p(&wide, &limits(|l| l.max_attributes_per_element = 10)),
        Err(ParseError::TooManyAttributes { limit: 10, .. })
    ));

    assert!(p(VALID_NOTIFY, &limits(|l| l.max_namespace_bindings = 4)).is_ok());
    assert!(matches!(
        p(VALID_NOTIFY, &limits(|l| l.max_namespace_bindings = 3)),
        Err(ParseError::TooManyNamespaces { limit: 3, .. })
    ));

    let size = VALID_NOTIFY.len();
    assert!(p(VALID_NOTIFY, &Limits { max_document_bytes: size, ..Limits::default() }).is_ok());
    let small = Limits { max_document_bytes: size - 1, ..Limits::default() };
    assert_eq!(p(VALID_NOTIFY, &small), Err(ParseError::TooLarge { size, limit: size - 1 }));
    let huge = vec![b' '; Limits::default().max_document_bytes + 1];
    assert!(matches!(p(std::str::from_utf8(&huge).unwrap(), &Limits::default()), Err(ParseError::TooLarge { .. })));
}

#[test]
fn truncation_at_every_offset_is_an_error_never_a_panic() {
    assert!(parse_request(VALID_NOTIFY.as_bytes(), &Limits::default()).is_ok());
    for cut in 0..VALID_NOTIFY.len() {
        let prefix = &VALID_NOTIFY.as_bytes()[..cut];
        assert!(parse_request(prefix, &Limits::default()).is_err(), "accepted a document cut at {cut}");
    }
}

#[test]
fn payload_wrapper_with_bad_content_falls_back_to_xml() {
    let odd = XmlElement::parse(
        br#"<t:Payload xmlns:t="urn:tolk:wsn:1" encoding="base64">!!!</t:Payload>"#,
        &Limits::default(),
    )
    .unwrap();
    let back: Payload = odd.to_payload(&Limits::default());
    assert_eq!(back.form, PayloadForm::Xml);
    assert_eq!(&back.bytes[..], odd.as_bytes());
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(input in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_request(&input, &Limits::default());
        let _ = XmlElement::parse(&input, &Limits::default());
    }

    #[test]
    fn mutated_requests_never_panic(edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..8)) {
        let mut doc = VALID_NOTIFY.as_bytes().to_vec();
        for (at, byte, op) in edits {
            let i = at.index(doc.len());
            match op {
                0 => doc[i] = byte,
                1 => doc.insert(i, byte),
                _ => { doc.remove(i); }
            }
        }
        let _ = parse_request(&doc, &Limits::default());
    }

    #[test]
    fn any_payload_survives_the_message_element(payload in proptest::collection::vec(any::<u8>(), 0..200), xmlish in any::<bool>()) {
        let payload = if xmlish { [b"<a x='1'>".as_slice(), &payload, b"</a>"].concat() } else { payload };
        let element = XmlElement::from_payload(&payload, Some("application/x-test"), &Limits::default());
        let back = element.to_payload(&Limits::default());
        match back.form {
            PayloadForm::Xml => prop_assert!(XmlElement::parse(&back.bytes, &Limits::default()).is_ok()),
            _ => {
                prop_assert_eq!(&back.bytes[..], &payload[..]);
                prop_assert_eq!(back.content_type.as_deref(), Some("application/x-test"));
            }
        }
    }
}
