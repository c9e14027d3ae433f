//! Reading a response envelope: the client side of an exchange with a remote
//! NotificationBroker (tolk's WS-N bridge). Only what a subscriber needs is read: the
//! subscription reference and termination time of a SubscribeResponse, the termination time of
//! a RenewResponse, an UnsubscribeResponse, and a SOAP fault's code and reason. Anything else
//! in the Body is named, not read.
//!
//! The remote is as untrusted as any client: the same [`Limits`] apply, a DOCTYPE is refused,
//! and nothing panics on any input.

use crate::dom::{self, Plan};
use crate::error::ParseError;
use crate::limits::Limits;
use crate::ns::{QName, WSA, WSA_2004, WSNT};
use crate::parse::{envelope_version, read_epr};
use crate::request::EndpointReference;
use crate::soap::SoapVersion;

/// Capture reference parameters (sent back as headers with Renew and Unsubscribe).
const REPLY_PLAN: Plan = Plan {
    capture_children_of: |ns, local| matches!(ns, Some(WSA | WSA_2004)) && local == "ReferenceParameters",
    capture_root: false,
    record_scope_of: |_, _| false,
};

/// What the remote answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `wsnt:SubscribeResponse`.
    Subscribed {
        /// Where the subscription is managed (Renew, Unsubscribe).
        subscription_reference: EndpointReference,
        /// `wsnt:TerminationTime` as written (`None`: absent or nil, no expiry).
        termination_time: Option<String>,
    },
    /// `wsnt:RenewResponse`.
    Renewed {
        /// The new `wsnt:TerminationTime` as written (`None`: nil, no expiry).
        termination_time: Option<String>,
    },
    /// `wsnt:UnsubscribeResponse`.
    Unsubscribed,
    /// A SOAP fault.
    Fault {
        /// SOAP 1.1 `faultcode`, or SOAP 1.2 `Code/Value` (with its subcode after a space).
        code: String,
        /// `faultstring`, or the first `Reason/Text`.
        reason: String,
    },
    /// Any other Body element.
    Other(QName),
}

/// Parses a SOAP 1.1 or 1.2 response envelope.
pub fn parse_reply(input: &[u8], limits: &Limits) -> Result<Reply, ParseError> {
    let doc = dom::parse(input, limits, &REPLY_PLAN)?;
    let root = doc.root().ok_or(ParseError::MissingBody)?;
    let soap = envelope_version(&root.qname())?;
    let env = soap.namespace();
    let body = doc.child(root, env, "Body").ok_or(ParseError::MissingBody)?;
    let first = doc.children(body).next().ok_or(ParseError::EmptyBody)?;
    let time = |parent| {
        doc.child(parent, WSNT, "TerminationTime").and_then(|t| (!t.is_nil()).then(|| t.text.trim().to_owned()))
    };
    if first.is(env, "Fault") {
        return Ok(read_fault(&doc, first, soap));
    }
    Ok(match (first.ns.as_deref(), first.local.as_str()) {
        (Some(WSNT), "SubscribeResponse") => {
            let reference = doc
                .child(first, WSNT, "SubscriptionReference")
                .ok_or(ParseError::MissingElement { parent: "SubscribeResponse", element: "SubscriptionReference" })?;
            Reply::Subscribed {
                subscription_reference: read_epr(&doc, reference, "SubscriptionReference")?,
                termination_time: time(first),
            }
        }
        (Some(WSNT), "RenewResponse") => Reply::Renewed { termination_time: time(first) },
        (Some(WSNT), "UnsubscribeResponse") => Reply::Unsubscribed,
        _ => Reply::Other(first.qname()),
    })
}

fn read_fault(doc: &dom::Document, fault: &dom::Node, soap: SoapVersion) -> Reply {
    let text = |node: Option<&dom::Node>| node.map(|n| n.text.trim().to_owned()).unwrap_or_default();
    match soap {
        // SOAP 1.1 §4.4: faultcode and faultstring are unqualified.
        SoapVersion::V11 => Reply::Fault {
            code: text(doc.children(fault).find(|c| c.ns.is_none() && c.local == "faultcode")),
            reason: text(doc.children(fault).find(|c| c.ns.is_none() && c.local == "faultstring")),
        },
        SoapVersion::V12 => {
            let env = soap.namespace();
            let code = doc.child(fault, env, "Code");
            let mut value = text(code.and_then(|c| doc.child(c, env, "Value")));
            if let Some(sub) = code.and_then(|c| doc.child(c, env, "Subcode")).and_then(|s| doc.child(s, env, "Value"))
            {
                value.push(' ');
                value.push_str(sub.text.trim());
            }
            let reason = doc.child(fault, env, "Reason").and_then(|r| doc.child(r, env, "Text"));
            Reply::Fault { code: value, reason: text(reason) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::{Fault, FaultKind, write_fault};
    use crate::request::ReplyContext;
    use crate::response::{Response, write_response};

    #[test]
    fn what_tolk_answers_reads_back() {
        let reference = EndpointReference::new("http://b:8080/wsn/subscriptions/7");
        for soap in [SoapVersion::V11, SoapVersion::V12] {
            let ctx = ReplyContext::new(soap);
            let subscribed = write_response(
                &ctx,
                &Response::Subscribe {
                    subscription_reference: &reference,
                    current_time: Some(0),
                    termination_time: Some(600_000),
                },
            );
            assert_eq!(
                parse_reply(&subscribed, &Limits::default()).unwrap(),
                Reply::Subscribed {
                    subscription_reference: reference.clone(),
                    termination_time: Some("1970-01-01T00:10:00Z".into())
                }
            );
            let renewed = write_response(&ctx, &Response::Renew { termination_time: None, current_time: Some(0) });
            assert_eq!(parse_reply(&renewed, &Limits::default()).unwrap(), Reply::Renewed { termination_time: None });
            let gone = write_response(&ctx, &Response::Unsubscribe);
            assert_eq!(parse_reply(&gone, &Limits::default()).unwrap(), Reply::Unsubscribed);
            let fault = write_fault(&ctx, &Fault::new(FaultKind::ResourceUnknown, "no such subscription", 0));
            match parse_reply(&fault, &Limits::default()).unwrap() {
                Reply::Fault { code, reason } => {
                    assert!(code.contains("Client") || code.contains("Sender"), "{code}");
                    assert_eq!(reason, "no such subscription");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn anything_else_is_named_or_refused() {
        let other = br#"<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Body><x:Hi xmlns:x="urn:x"/></s:Body></s:Envelope>"#;
        assert_eq!(
            parse_reply(other, &Limits::default()).unwrap(),
            Reply::Other(QName { namespace: Some("urn:x".into()), local_name: "Hi".into() })
        );
        assert!(parse_reply(b"<html>nope</html>", &Limits::default()).is_err());
        assert!(parse_reply(b"", &Limits::default()).is_err());
        let bad = br#"<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Body><w:SubscribeResponse xmlns:w="http://docs.oasis-open.org/wsn/b-2"/></s:Body></s:Envelope>"#;
        assert!(matches!(parse_reply(bad, &Limits::default()), Err(ParseError::MissingElement { .. })));
    }
}
