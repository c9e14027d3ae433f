//! Every fault in both SOAP versions: well-formed, the right code, the WS-N detail element
//! extending wsrf-bf:BaseFaultType (Timestamp first), the right Action, the right HTTP status
//! (500 for every SOAP fault, 400 only for requests that are not SOAP).

mod common;

use common::{Elem, tree};
use wsn_xml::ns::{SOAP11_ENV, SOAP12_ENV, WSA, WSN_BR, WSNT, WSRF_BF, WSRF_R, WSSE, XML};
use wsn_xml::{
    AddressingVersion, Fault, FaultKind, Limits, Operation, ParseError, QName, ReplyContext, SecurityFault,
    SoapVersion, TopicError, parse_request, write_fault,
};

const NOW: i64 = 1_717_243_200_000; // 2024-06-01T12:00:00Z

fn all_kinds() -> Vec<FaultKind> {
    use FaultKind::*;
    vec![
        VersionMismatch,
        MustUnderstand { headers: vec![QName::new("urn:sec", "Security")] },
        Sender,
        Receiver,
        ResourceUnknown,
        SubscribeCreationFailed,
        InvalidFilter { unknown_filters: vec![QName::new(WSNT, "MessageContent"), QName::new("urn:x", "Custom")] },
        TopicExpressionDialectUnknown,
        InvalidTopicExpression,
        TopicNotSupported,
        MultipleTopicsSpecified,
        InvalidProducerPropertiesExpression,
        InvalidMessageContentExpression,
        UnrecognizedPolicyRequest { policies: vec![QName::new("urn:p", "Rate")] },
        UnsupportedPolicyRequest { policies: vec![QName { namespace: None, local_name: "Local".into() }] },
        NotifyMessageNotSupported,
        UnacceptableInitialTerminationTime { minimum_unix_millis: NOW, maximum_unix_millis: Some(NOW + 86_400_000) },
        UnacceptableTerminationTime { minimum_unix_millis: NOW, maximum_unix_millis: None },
        NoCurrentMessageOnTopic,
        UnableToGetMessages,
        UnableToDestroyPullPoint,
        UnableToCreatePullPoint,
        UnableToDestroySubscription,
        PauseFailed,
        ResumeFailed,
        PublisherRegistrationRejected,
        PublisherRegistrationFailed,
        ResourceNotDestroyed,
        Security(SecurityFault::FailedAuthentication),
        Security(SecurityFault::UnsupportedSecurityToken),
        Security(SecurityFault::InvalidSecurity),
        Security(SecurityFault::InvalidSecurityToken),
    ]
}

fn context(soap: SoapVersion, operation: Option<Operation>) -> ReplyContext {
    ReplyContext {
        soap,
        addressing: AddressingVersion::W3c,
        relates_to: Some("urn:uuid:req".into()),
        message_id: None,
        operation,
    }
}

/// Checks the WS-N detail element: BaseFaultType content, then the fault's own elements.
fn check_detail(detail: &Elem, kind: &FaultKind, reason: &str) {
    let (ns, local) = kind.detail_element().unwrap();
    assert_eq!(detail.children.len(), 1);
    let d = &detail.children[0];
    assert!(d.is(ns, local), "{d:?}");
    assert!(d.children[0].is(WSRF_BF, "Timestamp"), "Timestamp comes first");
    assert_eq!(d.children[0].text, "2024-06-01T12:00:00Z");
    let description = d.child(WSRF_BF, "Description");
    assert_eq!(description.text, reason);
    assert_eq!(description.attr(Some(XML), "lang"), Some("en"));
    let qnames = |name: &str| -> Vec<(Option<String>, String)> {
        d.children.iter().filter(|c| c.is(ns, name)).map(|c| c.resolve_qname(&c.text)).collect()
    };
    match kind {
        FaultKind::InvalidFilter { unknown_filters } => {
            let want: Vec<_> = unknown_filters.iter().map(|q| (q.namespace.clone(), q.local_name.clone())).collect();
            assert_eq!(qnames("UnknownFilter"), want);
        }
        FaultKind::UnrecognizedPolicyRequest { .. } => {
            assert_eq!(qnames("UnrecognizedPolicy"), [(Some("urn:p".to_owned()), "Rate".to_owned())]);
        }
        FaultKind::UnsupportedPolicyRequest { .. } => {
            assert_eq!(qnames("UnsupportedPolicy"), [(None, "Local".to_owned())]);
        }
        FaultKind::UnacceptableInitialTerminationTime { .. } => {
            assert_eq!(d.child(ns, "MinimumTime").text, "2024-06-01T12:00:00Z");
            assert_eq!(d.child(ns, "MaximumTime").text, "2024-06-02T12:00:00Z");
        }
        FaultKind::UnacceptableTerminationTime { .. } => {
            assert_eq!(d.child(ns, "MinimumTime").text, "2024-06-01T12:00:00Z");
            assert!(d.children.iter().all(|c| c.local != "MaximumTime"));
        }
        _ => assert_eq!(d.children.len(), 2),
    }
}

#[test]
fn every_fault_in_soap11() {
    for kind in all_kinds() {
        let reason = format!("because <{kind:?}> & more");
        let fault = Fault::new(kind.clone(), reason.clone(), NOW);
        let bytes = write_fault(&context(SoapVersion::V11, Some(Operation::Subscribe)), &fault);
        let t = tree(&bytes);
        assert!(t.is(SOAP11_ENV, "Envelope"));
        let f = t.child(SOAP11_ENV, "Body").child(SOAP11_ENV, "Fault");
        let code = f.unqualified("faultcode");
        let want = match &kind {
            // WSS 1.0 §12: the WS-Security code is the faultcode itself.
            FaultKind::Security(code) => (WSSE, code.local_name()),
            FaultKind::VersionMismatch => (SOAP11_ENV, "VersionMismatch"),
            FaultKind::MustUnderstand { .. } => (SOAP11_ENV, "MustUnderstand"),
            k if k.is_sender() => (SOAP11_ENV, "Client"),
            _ => (SOAP11_ENV, "Server"),
        };
        assert_eq!(code.resolve_qname(&code.text), (Some(want.0.to_owned()), want.1.to_owned()), "{kind:?}");
        assert_eq!(f.unqualified("faultstring").text, reason);
        match kind.detail_element() {
            Some(_) => check_detail(f.unqualified("detail"), &kind, &reason),
            None => assert!(f.children.iter().all(|c| c.local != "detail")),
        }
        assert_eq!(t.child(SOAP11_ENV, "Header").child(WSA, "RelatesTo").text, "urn:uuid:req");
    }
}

#[test]
fn every_fault_in_soap12() {
    for kind in all_kinds() {
        let reason = format!("because {kind:?}");
        let fault = Fault::new(kind.clone(), reason.clone(), NOW);
        let bytes = write_fault(&context(SoapVersion::V12, Some(Operation::Renew)), &fault);
        let t = tree(&bytes);
        assert!(t.is(SOAP12_ENV, "Envelope"));
        let f = t.child(SOAP12_ENV, "Body").child(SOAP12_ENV, "Fault");
        let code = f.child(SOAP12_ENV, "Code");
        let value = code.child(SOAP12_ENV, "Value");
        let (code_ns, code_local) = value.resolve_qname(&value.text);
        assert_eq!(code_ns.as_deref(), Some(SOAP12_ENV));
        let want = match &kind {
            FaultKind::VersionMismatch => "VersionMismatch",
            FaultKind::MustUnderstand { .. } => "MustUnderstand",
            k if k.is_sender() => "Sender",
            _ => "Receiver",
        };
        assert_eq!(code_local, want, "{kind:?}");
        let text = f.child(SOAP12_ENV, "Reason").child(SOAP12_ENV, "Text");
        assert_eq!(text.text, reason);
        assert_eq!(text.attr(Some(XML), "lang"), Some("en"));
        match kind.detail_element() {
            Some((ns, local)) => {
                let sub = code.child(SOAP12_ENV, "Subcode").child(SOAP12_ENV, "Value");
                assert_eq!(sub.resolve_qname(&sub.text), (Some(ns.to_owned()), local.to_owned()));
                check_detail(f.child(SOAP12_ENV, "Detail"), &kind, &reason);
            }
            None => assert!(f.children.iter().all(|c| c.local != "Detail")),
        }
        if let FaultKind::Security(security) = &kind {
            // WSS 1.0 §12: Sender, with the WS-Security code as the Subcode.
            let sub = code.child(SOAP12_ENV, "Subcode").child(SOAP12_ENV, "Value");
            assert_eq!(sub.resolve_qname(&sub.text), (Some(WSSE.to_owned()), security.local_name().to_owned()));
        }
    }
}

#[test]
fn soap12_must_understand_and_version_mismatch_headers() {
    let header = |kind: FaultKind| {
        let bytes = write_fault(&context(SoapVersion::V12, None), &Fault::new(kind, "x", NOW));
        tree(&bytes).child(SOAP12_ENV, "Header").clone()
    };
    let h = header(FaultKind::MustUnderstand { headers: vec![QName::new("urn:sec", "Security")] });
    let nu = h.child(SOAP12_ENV, "NotUnderstood");
    assert_eq!(nu.resolve_qname(nu.attr(None, "qname").unwrap()), (Some("urn:sec".into()), "Security".into()));
    let h = header(FaultKind::VersionMismatch);
    let upgrade = h.child(SOAP12_ENV, "Upgrade");
    let supported: Vec<_> = upgrade.children.iter().map(|s| s.resolve_qname(s.attr(None, "qname").unwrap())).collect();
    assert_eq!(supported, [(Some(SOAP12_ENV.into()), "Envelope".into()), (Some(SOAP11_ENV.into()), "Envelope".into())]);
}

#[test]
fn fault_actions() {
    let action = |ctx: &ReplyContext, kind: FaultKind| {
        let bytes = write_fault(ctx, &Fault::new(kind, "x", NOW));
        let t = tree(&bytes);
        t.child(ctx.soap.namespace(), "Header").child(ctx.addressing.namespace(), "Action").text.clone()
    };
    let sub = context(SoapVersion::V11, Some(Operation::Subscribe));
    assert_eq!(
        action(&sub, FaultKind::InvalidFilter { unknown_filters: vec![] }),
        "http://docs.oasis-open.org/wsn/bw-2/NotificationProducer/Subscribe/Fault/InvalidFilterFault"
    );
    assert_eq!(
        action(&sub, FaultKind::ResourceUnknown),
        "http://docs.oasis-open.org/wsn/bw-2/NotificationProducer/Subscribe/Fault/ResourceUnknownFault"
    );
    assert_eq!(action(&sub, FaultKind::Sender), "http://www.w3.org/2005/08/addressing/soap/fault");
    assert_eq!(
        action(&context(SoapVersion::V12, None), FaultKind::TopicNotSupported),
        "http://www.w3.org/2005/08/addressing/soap/fault"
    );
    let old = ReplyContext { addressing: AddressingVersion::Submission, ..context(SoapVersion::V11, None) };
    assert_eq!(action(&old, FaultKind::Receiver), "http://schemas.xmlsoap.org/ws/2004/08/addressing/fault");
}

#[test]
fn detail_namespaces_follow_the_schemas() {
    assert_eq!(FaultKind::ResourceUnknown.detail_element(), Some((WSRF_R, "ResourceUnknownFault")));
    assert_eq!(
        FaultKind::PublisherRegistrationFailed.detail_element(),
        Some((WSN_BR, "PublisherRegistrationFailedFault"))
    );
    assert_eq!(FaultKind::Sender.detail_element(), None);
}

#[test]
fn parse_errors_and_topic_errors_map_to_faults() {
    let err = parse_request(b"not xml", &Limits::default()).unwrap_err();
    assert_eq!(err.error.fault_kind(), FaultKind::Sender);
    assert_eq!(err.soap, None);
    assert_eq!(err.reply_context(SoapVersion::V12).soap, SoapVersion::V12);
    let err =
        parse_request(br#"<e:Envelope xmlns:e="urn:soap-2.0"><e:Body/></e:Envelope>"#, &Limits::default()).unwrap_err();
    assert!(matches!(err.error, ParseError::VersionMismatch { .. }));
    assert_eq!(err.error.fault_kind(), FaultKind::VersionMismatch);
    // A body error keeps the version, MessageID and operation for the fault.
    let xml = r#"<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" xmlns:a="http://www.w3.org/2005/08/addressing"><s:Header><a:MessageID>urn:m</a:MessageID></s:Header><s:Body><n:Subscribe xmlns:n="http://docs.oasis-open.org/wsn/b-2"/></s:Body></s:Envelope>"#;
    let err = parse_request(xml.as_bytes(), &Limits::default()).unwrap_err();
    let ctx = err.reply_context(SoapVersion::V11);
    assert_eq!(
        (ctx.soap, ctx.relates_to.as_deref(), ctx.operation),
        (SoapVersion::V12, Some("urn:m"), Some(Operation::Subscribe))
    );
    assert_eq!(TopicError::UnknownDialect("x".into()).fault_kind(), FaultKind::TopicExpressionDialectUnknown);
    assert_eq!(
        TopicError::Unsupported { expression: "a//b".into(), construct: "x" }.fault_kind(),
        FaultKind::InvalidTopicExpression
    );
}

#[test]
fn every_soap_fault_is_http_500_and_only_non_soap_requests_are_400() {
    // CXF reads a typed SOAP 1.2 fault only from a 500; 400 would hide it.
    assert_eq!(Fault::HTTP_STATUS, 500);
    let status = |xml: &str, limits: &Limits| parse_request(xml.as_bytes(), limits).unwrap_err().http_status();
    let limits = Limits::default();
    let env12 = |body: &str| {
        format!(r#"<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Body>{body}</s:Body></s:Envelope>"#)
    };
    // Not SOAP at all: not XML, a DTD, not an Envelope.
    assert_eq!(status("not xml", &limits), 400);
    assert_eq!(status("<a><b></a>", &limits), 400);
    assert_eq!(status(&env12("<x>").replace("</s:Body>", ""), &limits), 400, "truncated XML");
    assert_eq!(status(&format!("<!DOCTYPE e>{}", env12("<x/>")), &limits), 400);
    assert_eq!(status("<html><body/></html>", &limits), 400);
    // SOAP envelopes the broker refuses: SOAP faults, 500, in SOAP 1.2 too.
    assert_eq!(status(r#"<e:Envelope xmlns:e="urn:soap-2.0"><e:Body/></e:Envelope>"#, &limits), 500);
    assert_eq!(status(&env12(""), &limits), 500, "empty Body");
    let subscribe = env12(r#"<n:Subscribe xmlns:n="http://docs.oasis-open.org/wsn/b-2"/>"#);
    assert_eq!(status(&subscribe, &limits), 500, "Sender fault: missing ConsumerReference");
    // A limit hit inside an Envelope is answered as a SOAP fault in the Envelope's version; the
    // same limit hit in something else is not SOAP.
    let shallow = Limits { max_depth: 3, ..Limits::default() };
    let deep = env12("<a><b><c/></b></a>");
    let err = parse_request(deep.as_bytes(), &shallow).unwrap_err();
    assert!(matches!(err.error, ParseError::TooDeep { .. }));
    assert_eq!((err.soap, err.http_status()), (Some(SoapVersion::V12), 500));
    assert_eq!(status("<r><a><b><c/></b></a></r>", &shallow), 400);
    let small = Limits { max_document_bytes: 10, ..Limits::default() };
    assert_eq!(status(&subscribe, &small), 413);
}
