//! `wsn_xml::parse_request` (what the WS-N endpoint runs on every SOAP request body),
//! `parse_reply` (what the WS-N bridge runs on a remote's answers) and `XmlElement::parse`
//! (message payloads) on arbitrary bytes. No prefix: the input is the
//! document, so the corpus is plain XML.
//!
//! Checked: no panic; a parsed request (with its `tolk:Path`) written back with `write_request` (same SOAP version,
//! same WS-Addressing headers) parses to the same request; a parsed element reparsed from its
//! own bytes is the same element.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wsn_xml::{
    EndpointReference, Limits, Request, RequestHeaders, TopicExpression, XmlElement, parse_reply, parse_request,
    write_request,
};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    let _ = parse_reply(data, &limits);

    if let Ok(envelope) = parse_request(data, &limits) {
        let to = envelope.addressing.to.clone().map(EndpointReference::new);
        let headers = RequestHeaders {
            addressing: envelope.addressing.version.unwrap_or_default(),
            action: envelope.addressing.action.as_deref(),
            message_id: envelope.addressing.message_id.as_deref(),
            to: to.as_ref(),
            reply_to: envelope.addressing.reply_to.as_deref(),
            path: envelope.path.as_deref(),
        };
        let written = write_request(envelope.soap, &headers, &envelope.request);
        match parse_request(&written, &limits) {
            Ok(mut back) => {
                assert_eq!(back.soap, envelope.soap);
                assert_eq!(back.path, envelope.path);
                forget_borrowed_bindings(&envelope.request, &mut back.request);
                same_payloads(&envelope.request, &mut back.request, &limits);
                assert_eq!(
                    back.request,
                    envelope.request,
                    "parse(write(request)) differs; written as\n{}",
                    String::from_utf8_lossy(&written)
                );
            }
            Err(e) => {
                panic!("a parsed request written back does not parse: {e}\n{}", String::from_utf8_lossy(&written))
            }
        }
    }

    if let Ok(element) = XmlElement::parse(data, &limits) {
        match XmlElement::parse(element.as_bytes(), &limits) {
            Ok(back) => assert_eq!(back, element, "an element reparsed from its own bytes differs"),
            Err(e) => panic!("an element's own bytes do not parse: {e}\n{}", element.as_str()),
        }
    }
});

/// The topic expressions of a request, in document order.
fn topics(request: &mut Request) -> Vec<&mut TopicExpression> {
    match request {
        Request::Notify(messages) => messages.iter_mut().filter_map(|m| m.topic.as_mut()).collect(),
        Request::Subscribe(subscribe) => subscribe.topic_expressions.iter_mut().collect(),
        Request::RegisterPublisher(register) => register.topics.iter_mut().collect(),
        Request::GetCurrentMessage { topic } => vec![topic],
        _ => Vec::new(),
    }
}

/// A topic expression may use a prefix its document never declared (zeep does; the codec
/// keeps the topic and leaves the namespace unknown). Written back, such a prefix can meet a
/// declaration of the writer's own envelope (`wsnt`, `wsa`) and resolve: the one difference a
/// round trip may make. Bindings in `back` for prefixes the original left unbound are dropped.
fn forget_borrowed_bindings(original: &Request, back: &mut Request) {
    let mut original = original.clone();
    for (theirs, ours) in topics(&mut original).into_iter().zip(topics(back)) {
        ours.namespaces.retain(|b| theirs.namespaces.iter().any(|t| t.prefix == b.prefix));
    }
}

/// A Notify's messages must carry the same payloads back (what a consumer receives), not
/// byte-identical elements: a text payload is wrapped in `tolk:Payload` by the first parse, and
/// which namespace declarations the wrapper borrows from the envelope may differ the second
/// time. Likewise a payload whose text looks like a QName (`wsnt:x`) with a prefix its
/// document never declared borrows the writer's declaration of that prefix once written back.
/// Where the payloads agree up to such borrowed declarations, `back` takes the original
/// element, so the rest of the request is still compared exactly.
fn same_payloads(original: &Request, back: &mut Request, limits: &Limits) {
    if let (Request::Notify(theirs), Request::Notify(ours)) = (original, back) {
        for (t, o) in theirs.iter().zip(ours.iter_mut()) {
            let (mut ours, theirs) = (o.message.to_payload(limits), t.message.to_payload(limits));
            ours.bytes = without_borrowed_declarations(&ours.bytes, &theirs.bytes).into();
            assert_eq!(ours, theirs, "the payload changed");
            o.message = t.message.clone();
        }
    }
}

/// `ours` without the ` xmlns:p="…"` declarations the writer added: the two are walked side
/// by side, and where they differ, such a declaration in `ours` is skipped. No parsing of the
/// tag, whose attributes the codec takes as leniently as quick-xml does (names with any bytes,
/// whitespace around `=`), and no check of which prefixes `theirs` declares: its text may hold
/// whole documents that declare anything.
fn without_borrowed_declarations(ours: &[u8], theirs: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ours.len());
    let (mut i, mut j) = (0, 0);
    while i < ours.len() {
        if theirs.get(j) == Some(&ours[i]) {
            out.push(ours[i]);
            i += 1;
            j += 1;
            continue;
        }
        match added_declaration(&ours[i..]) {
            Some(len) => i += len,
            None => {
                out.extend_from_slice(&ours[i..]);
                break;
            }
        }
    }
    out
}

/// The length of a ` xmlns:p="…"` declaration at the start of `at`.
fn added_declaration(at: &[u8]) -> Option<usize> {
    let rest = at.strip_prefix(b" xmlns:")?;
    let name_len = rest.iter().position(|&c| c == b'=')?;
    let value = rest[name_len..].strip_prefix(b"=\"")?;
    let value_len = value.iter().position(|&c| c == b'"')?;
    Some(b" xmlns:".len() + name_len + 2 + value_len + 1)
}
