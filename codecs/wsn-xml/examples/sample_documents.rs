//! Writes one of every response, a few faults and an outgoing Notify, in both SOAP versions,
//! into a directory, so that third-party stacks can be pointed at them. The zeep check in
//! `tests/golden/zeep/check_responses.py` reads these files.
//!
//! ```text
//! cargo run -p wsn-xml --example sample_documents -- /tmp/wsn-samples
//! ```

use std::path::PathBuf;

use wsn_xml::{
    AddressingVersion, EndpointReference, Fault, FaultKind, Limits, NotificationMessage, Operation, QName,
    ReplyContext, Response, SoapVersion, TopicExpression, XmlElement, write_fault, write_notify, write_response,
};

const NOW: i64 = 1_717_243_200_000; // 2024-06-01T12:00:00Z

fn main() -> std::io::Result<()> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "wsn-samples".into()));
    std::fs::create_dir_all(&dir)?;
    let limits = Limits::default();
    let subscription = EndpointReference::new("http://gw:8080/wsn/subscriptions/abc");
    let pull_point = EndpointReference::new("http://gw:8080/wsn/pullpoints/p1");
    let current = XmlElement::from_payload(
        br#"<m:reading xmlns:m="urn:example:meter"><m:kwh>12.5</m:kwh></m:reading>"#,
        None,
        &limits,
    );
    let message = |payload: &[u8]| NotificationMessage {
        subscription_reference: Some(subscription.clone()),
        topic: TopicExpression::from_topic("meter/kwh", Some("urn:site")).ok(),
        producer_reference: None,
        message: XmlElement::from_payload(payload, Some("text/plain"), &limits),
    };
    let messages = vec![message(b"<a>1</a>"), message(b"plain & text")];
    for (tag, soap) in [("11", SoapVersion::V11), ("12", SoapVersion::V12)] {
        let ctx = ReplyContext {
            soap,
            addressing: AddressingVersion::W3c,
            relates_to: Some("urn:uuid:1".into()),
            message_id: None,
            operation: Some(Operation::Subscribe),
        };
        let responses = [
            (
                "subscribe",
                Response::Subscribe {
                    subscription_reference: &subscription,
                    current_time: Some(NOW),
                    termination_time: Some(NOW + 3_600_000),
                },
            ),
            ("renew", Response::Renew { termination_time: Some(NOW + 3_600_000), current_time: Some(NOW) }),
            ("renew_nil", Response::Renew { termination_time: None, current_time: None }),
            ("unsubscribe", Response::Unsubscribe),
            ("pause", Response::PauseSubscription),
            ("resume", Response::ResumeSubscription),
            ("get_current_message", Response::GetCurrentMessage { message: &current }),
            ("create_pull_point", Response::CreatePullPoint { pull_point: &pull_point }),
            ("get_messages", Response::GetMessages { messages: &messages }),
            ("destroy_pull_point", Response::DestroyPullPoint),
        ];
        for (name, response) in responses {
            std::fs::write(dir.join(format!("ours-{tag}-{name}.xml")), write_response(&ctx, &response))?;
        }
        let faults = [
            (
                "fault_invalid_filter",
                FaultKind::InvalidFilter {
                    unknown_filters: vec![QName::new("http://docs.oasis-open.org/wsn/b-2", "MessageContent")],
                },
            ),
            (
                "fault_itt",
                FaultKind::UnacceptableInitialTerminationTime { minimum_unix_millis: NOW, maximum_unix_millis: None },
            ),
            ("fault_resource_unknown", FaultKind::ResourceUnknown),
            ("fault_sender", FaultKind::Sender),
        ];
        for (name, kind) in faults {
            let fault = Fault::new(kind, "it went wrong", NOW);
            std::fs::write(dir.join(format!("ours-{tag}-{name}.xml")), write_fault(&ctx, &fault))?;
        }
        let consumer = EndpointReference::new("http://consumer:9000/in");
        let notify = write_notify(soap, AddressingVersion::W3c, &consumer, Some("urn:uuid:2"), &messages);
        std::fs::write(dir.join(format!("ours-{tag}-notify.xml")), notify)?;
    }
    Ok(())
}
