//! The NotificationBroker's own operations (WS-BaseNotification 1.3 §3–§4 and
//! WS-BrokeredNotification's broker role): Notify from publishers into the core, Subscribe, and
//! GetCurrentMessage from the core's retained store, each held to the caller's rights (the
//! access-control list on the canonical topic, as for every protocol) and counted in
//! `tolk_acl_denied_total` when refused.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use axum::http::Uri;
use tolk_core::access::{self, Access};
use tolk_core::{Denial, MemoryKind, Message, Origin, Outbox, OutboxReceiver, Protocol, SessionId};
use tracing::{Instrument, debug, info, info_span, warn};
use wsn_xml::{
    AddressingVersion, EndpointReference, FaultKind, NotificationMessage, ReplyContext, Response, SecurityFault,
    Subscribe, TopicExpression, write_response,
};

use crate::endpoint::{Endpoint, Reply};
use crate::fault::{Refusal, shorten};
use crate::filter::filters_of;
use crate::lifetime::{Ask, grant, now_unix_millis};
use crate::login::Caller;
use crate::subscription::{Consumer, NewSubscription, Subscription};
use crate::translate::{element_of, message_from_notification};

/// The refusal of a notification on a topic its publisher may not publish to:
/// `wsse:FailedAuthentication`, which WSS 1.0 §12 defines as "the security token could not be
/// authenticated or authorized". Notify is one-way and its WSDL declares no fault, so no WS-N
/// fault is the client's to expect, and the WS-N candidates mean something else:
/// TopicNotSupportedFault says the broker carries the topic for nobody, and
/// PublisherRegistrationRejectedFault answers RegisterPublisher. Answered `500` like every SOAP
/// fault, not `401`: the login succeeded, and asking for credentials again would not help.
fn publish_refused(topic: &str) -> Refusal {
    Refusal::new(
        FaultKind::Security(SecurityFault::FailedAuthentication),
        format!("not authorized to publish to topic {:?}; nothing of this Notify was published", shorten(topic)),
    )
}

impl Endpoint {
    /// Whether `caller`'s rights allow what `ask` checks; a refusal is counted as `what`.
    fn permits(&self, caller: &Caller, what: Denial, ask: impl FnOnce(&dyn Access) -> bool) -> bool {
        access::permits(&caller.rights, self.router.metrics(), Protocol::Wsn, what, ask)
    }

    /// Notify from a publisher: every NotificationMessage becomes a core message. All are
    /// checked (topic, payload, the caller's right to publish) before any is published, so a
    /// refused Notify publishes nothing. The `202` waits until what the messages left in the
    /// store (retained, in a durable queue, for a persistent session) is on disk; a store
    /// failure is a Receiver fault, so that the publisher sends again.
    pub(crate) async fn notify(
        &self,
        notifications: &[NotificationMessage],
        path: Option<&str>,
        caller: &Caller,
        received_at: Instant,
    ) -> Result<Reply, Refusal> {
        let messages = self.messages_of(notifications, path, caller, received_at)?;
        let count = messages.len() as u64;
        let mut durable = None;
        for message in messages {
            self.router.publish_kept(Arc::new(message), &mut durable);
        }
        self.router.metrics().protocol(Protocol::Wsn).messages_in.fetch_add(count, Relaxed);
        if let Some(commit) = durable
            && let Err(e) = commit.await
        {
            warn!(error = %e, "a notification could not be stored");
            return Err(Refusal::new(
                FaultKind::Receiver,
                format!("the notification could not be stored ({e}); send it again"),
            ));
        }
        Ok(Reply::Accepted)
    }

    /// The core messages of `caller`'s Notify, each with the envelope's `tolk:Path` as its path
    /// ([`tolk_core::path`]), or the fault refusing it (the first topic it may not publish to
    /// is counted as a denial).
    pub(crate) fn messages_of(
        &self,
        notifications: &[NotificationMessage],
        path: Option<&str>,
        caller: &Caller,
        received_at: Instant,
    ) -> Result<Vec<Message>, Refusal> {
        notifications
            .iter()
            .map(|n| {
                let producer = n.producer_reference.as_ref().map_or("", |r| r.address.as_str());
                let origin = Origin { protocol: Protocol::Wsn, session: self.publisher, client_id: producer.into() };
                let mut message = message_from_notification(n, &origin, &self.limits, received_at)?;
                if !self.permits(caller, Denial::Publish, |a| a.may_publish(&message.topic)) {
                    info!(user = ?caller.user, topic = %shorten(&message.topic), "WS-N Notify refused by the ACL");
                    return Err(publish_refused(&message.topic));
                }
                message.retain = self.config.retain_notify;
                if let Some(path) = path {
                    message.props.user.push((tolk_core::path::PATH_PROPERTY.to_owned(), path.to_owned()));
                }
                Ok(message)
            })
            .collect()
    }

    /// Subscribe: a push subscription to an HTTP consumer, or a pull subscription when the
    /// consumer is one of `caller`'s pull points. Every filter needs the right to subscribe
    /// (refused with SubscribeCreationFailedFault, WS-BaseNotification 1.3 §4.2's fault for a
    /// subscription the broker will not make), and the subscription keeps `caller`'s rights
    /// for each message it matches.
    pub(crate) async fn subscribe(
        self: &Arc<Self>,
        request: &Subscribe,
        caller: &Caller,
        ctx: &ReplyContext,
        base: &str,
    ) -> Result<Reply, Refusal> {
        let filters = filters_of(request, self.config.max_filters_per_subscription)?;
        if !request.other_policies.is_empty() {
            let names: Vec<String> = request.other_policies.iter().map(ToString::to_string).collect();
            return Err(Refusal::new(
                FaultKind::UnrecognizedPolicyRequest { policies: request.other_policies.clone() },
                format!("only the UseRaw policy is supported, not {}", names.join(", ")),
            ));
        }
        if let Some(denied) =
            filters.iter().find(|f| !self.permits(caller, Denial::Subscribe, |a| a.may_subscribe(&f.filter)))
        {
            info!(user = ?caller.user, filter = %shorten(&denied.filter), "WS-N Subscribe refused by the ACL");
            return Err(Refusal::new(
                FaultKind::SubscribeCreationFailed,
                format!("not authorized to subscribe to {:?}", shorten(&denied.filter)),
            ));
        }
        let now = now_unix_millis();
        let terminates_at = grant(
            Ask::Subscribe,
            request.initial_termination_time.as_deref(),
            now,
            self.config.default_subscription_lifetime,
            self.config.max_subscription_lifetime,
        )?;
        let consumer = self.consumer_of(&request.consumer_reference, caller, base).await?;
        let id = self.ids.resource_id();
        let reference = EndpointReference::new(self.subscription_address(base, &id));
        let owner = self.router.next_session_id();
        let (target, receiver) = self.subscription_target(&consumer, owner);
        let parts = NewSubscription {
            id: id.clone(),
            tag: self.next_tag(),
            reference: reference.clone(),
            filters,
            use_raw: request.use_raw,
            soap: ctx.soap,
            addressing: ctx.addressing,
            consumer,
            terminates_at,
            cancel: self.shutdown.child_token(),
            owner,
            user: caller.user.clone(),
            rights: caller.rights.clone(),
        };
        let subscription = Arc::new(Subscription::new(parts, self.router.clone(), target));
        self.registry.insert_subscription(subscription.clone(), self.config.max_subscriptions)?;
        self.spawn_push(&subscription, receiver);
        subscription.attach();
        debug!(
            subscription = %id,
            filters = ?subscription.filters.iter().map(|f| f.filter.as_str()).collect::<Vec<_>>(),
            raw = subscription.use_raw,
            "subscribed"
        );
        let body = write_response(
            ctx,
            &Response::Subscribe {
                subscription_reference: &reference,
                current_time: Some(now),
                termination_time: Some(terminates_at),
            },
        );
        Ok(Reply::Body(body))
    }

    /// Where a new subscription's core subscriptions deliver: the pull point's outbox, or an
    /// outbox of its own (with the receiver its push task drains) for an HTTP consumer.
    pub(crate) fn subscription_target(
        &self,
        consumer: &Consumer,
        owner: SessionId,
    ) -> (Outbox, Option<OutboxReceiver>) {
        match consumer {
            Consumer::PullPoint(pp) => (pp.outbox(), None),
            Consumer::Push { .. } => {
                let (capacity, max_bytes) =
                    (self.config.push.queue_per_consumer, self.router.config().outbox_max_bytes);
                let (outbox, receiver) =
                    self.router.outbox(owner, Protocol::Wsn, capacity, max_bytes, MemoryKind::Outbox);
                (outbox, Some(receiver))
            }
        }
    }

    /// Starts the push task of a subscription to an HTTP consumer (nothing for a pull point's).
    pub(crate) fn spawn_push(self: &Arc<Self>, subscription: &Arc<Subscription>, receiver: Option<OutboxReceiver>) {
        if let (Some(receiver), Consumer::Push { uri, .. }) = (receiver, &subscription.consumer) {
            let limit = self.consumer_limit(&uri.authority().map(ToString::to_string).unwrap_or_default());
            let span = info_span!("wsn_push", subscription = %subscription.id, consumer = %shorten(&uri.to_string()));
            self.tracker.spawn(crate::push::run(self.clone(), subscription.clone(), receiver, limit).instrument(span));
        }
    }

    /// Where a Subscribe's notifications go: one of `caller`'s pull points (by address), or an
    /// `http://` consumer. Refused: other schemes (https is not supported yet), anonymous
    /// addresses, this broker's own addresses under the name it was reached by or any name
    /// resolving to its HTTP listener (a loop), another user's pull point (it would read what
    /// this caller may), and hosts outside `push.consumer_allow`.
    async fn consumer_of(
        &self,
        reference: &EndpointReference,
        caller: &Caller,
        base: &str,
    ) -> Result<Consumer, Refusal> {
        let failed = |reason: String| Refusal::new(FaultKind::SubscribeCreationFailed, reason);
        let address = reference.address.trim();
        if address == AddressingVersion::W3c.anonymous() || address == AddressingVersion::Submission.anonymous() {
            return Err(failed(
                "an anonymous ConsumerReference cannot be sent notifications: give an http:// address, or \
                 create a pull point and subscribe it"
                    .into(),
            ));
        }
        let uri: Uri = address
            .parse()
            .map_err(|_| failed(format!("ConsumerReference address {:?} is not a URL", shorten(address))))?;
        match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("http") => {}
            Some(s) if s.eq_ignore_ascii_case("https") => {
                return Err(failed(format!(
                    "https consumers are not supported yet ({}): give an http:// address, or use a pull point",
                    shorten(address)
                )));
            }
            _ => {
                return Err(failed(format!("ConsumerReference address {:?} is not an http:// URL", shorten(address))));
            }
        }
        let Some(authority) = uri.authority() else {
            return Err(failed(format!("ConsumerReference address {:?} has no host", shorten(address))));
        };
        let ours = base.split_once("://").is_some_and(|(_, a)| a.eq_ignore_ascii_case(authority.as_str()));
        if let Some(rest) = uri.path().strip_prefix(self.base_path.as_str()) {
            if let Some(id) = rest.strip_prefix("/pullpoints/") {
                if let Ok(pp) = self.pull_point_for(id, caller) {
                    pp.touch();
                    return Ok(Consumer::PullPoint(pp));
                }
                if ours {
                    return Err(failed(format!("no pull point {:?} (it may have been destroyed)", shorten(id))));
                }
            }
            if ours && (rest.is_empty() || rest == "/" || rest.starts_with("/subscriptions/")) {
                return Err(failed(
                    "the ConsumerReference is this broker's own address: notifications would loop".into(),
                ));
            }
        }
        let port = uri.port_u16().unwrap_or(80);
        self.consumer_policy
            .addresses(authority.host(), port)
            .await
            .map_err(|refused| failed(format!("ConsumerReference refused: {refused}")))?;
        Ok(Consumer::Push { reference: EndpointReference { address: address.to_owned(), ..reference.clone() }, uri })
    }

    /// GetCurrentMessage: the retained message of one concrete topic (WS-BaseNotification 1.3
    /// §4.3). tolk keeps no last-value store of its own: the core's retained store answers,
    /// which holds what publishers retained (MQTT retain, or every Notify with `retain_notify`).
    ///
    /// A topic `caller` may not read is answered NoCurrentMessageOnTopicFault, with the same
    /// reason as a topic without a retained message: GetCurrentMessage declares no fault for a
    /// refusal, and a distinct answer would tell who may not read a topic whether it holds a
    /// message. The refusal is counted (`tolk_acl_denied_total{operation="read"}`), as the router
    /// counts a message it withholds from a subscriber.
    pub(crate) fn get_current_message(
        &self,
        expression: &TopicExpression,
        caller: &Caller,
        ctx: &ReplyContext,
    ) -> Result<Reply, Refusal> {
        let filters = expression.to_filters().map_err(|e| Refusal::new(e.fault_kind(), e.to_string()))?;
        if filters.len() > 1 {
            return Err(Refusal::new(
                FaultKind::MultipleTopicsSpecified,
                "GetCurrentMessage takes exactly one topic, not a union",
            ));
        }
        let mapped = expression.to_topic().map_err(|e| Refusal::new(e.fault_kind(), e.to_string()))?;
        let none = || {
            Refusal::new(
                FaultKind::NoCurrentMessageOnTopic,
                format!("no current (retained) message on topic {:?}", shorten(&mapped.topic)),
            )
        };
        if !self.permits(caller, Denial::Read, |a| a.may_read(&mapped.topic)) {
            info!(user = ?caller.user, topic = %shorten(&mapped.topic), "WS-N GetCurrentMessage refused by the ACL");
            return Err(none());
        }
        let current = self.router.retained(&mapped.topic).into_iter().next().ok_or_else(none)?;
        let current = self.router.transcode(current, Protocol::Wsn);
        let element = element_of(&current, &self.limits);
        Ok(Reply::Body(write_response(ctx, &Response::GetCurrentMessage { message: &element })))
    }
}
