//! Writing responses to WS-N requests, in the caller's SOAP version, with WS-Addressing reply
//! headers: the operation's response Action and `RelatesTo` = the request's MessageID.
//!
//! Notify is one-way (its WSDL operation has no output): tolk answers it with HTTP
//! `202 Accepted` and an empty body, which SOAP 1.1 stacks and the SOAP 1.2 HTTP binding's
//! one-way pattern both accept. [`write_empty_response`] exists for clients that insist on
//! an envelope (`200` with an empty Body).

use bytes::Bytes;

use crate::element::XmlElement;
use crate::ns::WSN_BR;
use crate::operation::Operation;
use crate::out::Out;
use crate::request::{EndpointReference, NotificationMessage, ReplyContext};

use crate::time::format_date_time;
use crate::write::{endpoint_reference, envelope, nillable_time, notification_message};

/// A response body. Times are Unix milliseconds, written as UTC `xsd:dateTime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Response<'a> {
    /// `wsnt:SubscribeResponse`.
    Subscribe {
        /// The subscription manager EPR (tolk: a unique URL, since zeep does not echo
        /// reference parameters).
        subscription_reference: &'a EndpointReference,
        /// `wsnt:CurrentTime`.
        current_time: Option<i64>,
        /// `wsnt:TerminationTime`; omitted when `None` (no expiry).
        termination_time: Option<i64>,
    },
    /// `wsnt:RenewResponse`.
    Renew {
        /// `wsnt:TerminationTime`; `xsi:nil` when `None` (no expiry).
        termination_time: Option<i64>,
        /// `wsnt:CurrentTime`.
        current_time: Option<i64>,
    },
    /// `wsnt:UnsubscribeResponse`.
    Unsubscribe,
    /// `wsnt:PauseSubscriptionResponse`.
    PauseSubscription,
    /// `wsnt:ResumeSubscriptionResponse`.
    ResumeSubscription,
    /// `wsnt:GetCurrentMessageResponse` holding the last message on the topic.
    GetCurrentMessage {
        /// The message element.
        message: &'a XmlElement,
    },
    /// `wsnt:CreatePullPointResponse`.
    CreatePullPoint {
        /// `wsnt:PullPoint`, the new pull point's EPR.
        pull_point: &'a EndpointReference,
    },
    /// `wsnt:GetMessagesResponse` with zero or more messages.
    GetMessages {
        /// The messages taken from the pull point.
        messages: &'a [NotificationMessage],
    },
    /// `wsnt:DestroyPullPointResponse`.
    DestroyPullPoint,
    /// `wsn-br:RegisterPublisherResponse`.
    RegisterPublisher {
        /// `wsn-br:PublisherRegistrationReference`.
        registration_reference: &'a EndpointReference,
        /// `wsn-br:ConsumerReference`, where the publisher should send its Notify.
        consumer_reference: Option<&'a EndpointReference>,
    },
    /// `wsn-br:DestroyRegistrationResponse`.
    DestroyRegistration,
}

impl Response<'_> {
    /// The operation this responds to.
    pub fn operation(&self) -> Operation {
        match self {
            Response::Subscribe { .. } => Operation::Subscribe,
            Response::Renew { .. } => Operation::Renew,
            Response::Unsubscribe => Operation::Unsubscribe,
            Response::PauseSubscription => Operation::PauseSubscription,
            Response::ResumeSubscription => Operation::ResumeSubscription,
            Response::GetCurrentMessage { .. } => Operation::GetCurrentMessage,
            Response::CreatePullPoint { .. } => Operation::CreatePullPoint,
            Response::GetMessages { .. } => Operation::GetMessages,
            Response::DestroyPullPoint => Operation::DestroyPullPoint,
            Response::RegisterPublisher { .. } => Operation::RegisterPublisher,
            Response::DestroyRegistration => Operation::DestroyRegistration,
        }
    }
}

/// Reply headers: Action, MessageID, RelatesTo.
pub(crate) fn reply_headers(out: &mut Out, hp: &str, ctx: &ReplyContext, action: Option<&str>) {
    if let Some(action) = action {
        out.leaf(&format!("{hp}:Action"), &[], action);
    }
    if let Some(id) = &ctx.message_id {
        out.leaf(&format!("{hp}:MessageID"), &[], id);
    }
    if let Some(id) = &ctx.relates_to {
        out.leaf(&format!("{hp}:RelatesTo"), &[], id);
    }
}

/// Writes a response envelope.
pub fn write_response(ctx: &ReplyContext, response: &Response<'_>) -> Bytes {
    let op = response.operation();
    let action = op.response_action();
    envelope(
        ctx.soap,
        ctx.addressing,
        |out, hp| reply_headers(out, hp, ctx, action.as_deref()),
        |out| response_body(out, response),
    )
}

/// An envelope with an empty Body and only `RelatesTo`, for acknowledging a one-way Notify
/// to clients that will not accept `202` with no body.
pub fn write_empty_response(ctx: &ReplyContext) -> Bytes {
    envelope(ctx.soap, ctx.addressing, |out, hp| reply_headers(out, hp, ctx, None), |_| {})
}

fn time_leaf(out: &mut Out, name: &str, millis: Option<i64>) {
    if let Some(t) = millis {
        out.leaf(name, &[], &format_date_time(t));
    }
}

fn response_body(out: &mut Out, response: &Response<'_>) {
    match *response {
        Response::Subscribe { subscription_reference, current_time, termination_time } => {
            out.start("wsnt:SubscribeResponse", &[]);
            endpoint_reference(out, "wsnt:SubscriptionReference", subscription_reference);
            time_leaf(out, "wsnt:CurrentTime", current_time);
            time_leaf(out, "wsnt:TerminationTime", termination_time);
            out.end("wsnt:SubscribeResponse");
        }
        Response::Renew { termination_time, current_time } => {
            // RenewResponse: TerminationTime (required, nillable) then CurrentTime.
            out.start("wsnt:RenewResponse", &[]);
            nillable_time(out, "wsnt:TerminationTime", termination_time.map(format_date_time).as_deref());
            time_leaf(out, "wsnt:CurrentTime", current_time);
            out.end("wsnt:RenewResponse");
        }
        Response::Unsubscribe => out.empty("wsnt:UnsubscribeResponse", &[]),
        Response::PauseSubscription => out.empty("wsnt:PauseSubscriptionResponse", &[]),
        Response::ResumeSubscription => out.empty("wsnt:ResumeSubscriptionResponse", &[]),
        Response::GetCurrentMessage { message } => {
            out.start("wsnt:GetCurrentMessageResponse", &[]);
            out.raw(message.as_bytes());
            out.end("wsnt:GetCurrentMessageResponse");
        }
        Response::CreatePullPoint { pull_point } => {
            out.start("wsnt:CreatePullPointResponse", &[]);
            endpoint_reference(out, "wsnt:PullPoint", pull_point);
            out.end("wsnt:CreatePullPointResponse");
        }
        Response::GetMessages { messages } => {
            out.start("wsnt:GetMessagesResponse", &[]);
            for m in messages {
                notification_message(out, m);
            }
            out.end("wsnt:GetMessagesResponse");
        }
        Response::DestroyPullPoint => out.empty("wsnt:DestroyPullPointResponse", &[]),
        Response::RegisterPublisher { registration_reference, consumer_reference } => {
            out.start("wsn-br:RegisterPublisherResponse", &[("xmlns:wsn-br", WSN_BR)]);
            endpoint_reference(out, "wsn-br:PublisherRegistrationReference", registration_reference);
            if let Some(epr) = consumer_reference {
                endpoint_reference(out, "wsn-br:ConsumerReference", epr);
            }
            out.end("wsn-br:RegisterPublisherResponse");
        }
        Response::DestroyRegistration => out.empty("wsn-br:DestroyRegistrationResponse", &[("xmlns:wsn-br", WSN_BR)]),
    }
}
