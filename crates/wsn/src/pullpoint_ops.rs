//! The CreatePullPoint and PullPoint operations (WS-BaseNotification 1.3 §5.1–§5.3):
//! CreatePullPoint on the broker address; GetMessages, DestroyPullPoint and Notify (a pull
//! point is a NotificationConsumer too) on the pull point's own address, by the user who
//! created it ([`Endpoint::may_manage`]). The buffer and its byte bounds are
//! [`crate::pullpoint`]'s.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use tolk_core::frontend::record_delivery;
use tolk_core::{CloseReason, Delivery, DropReason, Protocol, QoS};
use wsn_xml::{EndpointReference, FaultKind, NotificationMessage, ReplyContext, Response, write_response};

use crate::endpoint::{Endpoint, Reply};
use crate::fault::Refusal;
use crate::login::Caller;
use crate::pullpoint::PullPoint;
use crate::translate::{namespace_for, notification_of};

impl Endpoint {
    /// CreatePullPoint: a new, empty pull point with its own address, and its forwarding task.
    /// It belongs to `caller`: only that user may subscribe it, pull from it or destroy it.
    pub(crate) fn create_pull_point(&self, caller: &Caller, ctx: &ReplyContext, base: &str) -> Result<Reply, Refusal> {
        let id = self.ids.resource_id();
        let reference = EndpointReference::new(self.pull_point_address(base, &id));
        let config = &self.config.pull_point;
        let bytes = self.pull_point_bytes.clone();
        let owner = caller.user.clone();
        let pull_point = Arc::new(PullPoint::new(&self.router, id, owner, config, bytes, self.shutdown.child_token()));
        self.registry.insert_pull_point(pull_point.clone(), config.max_pull_points)?;
        self.tracker.spawn(pull_point.forward(self.router.clone()));
        Ok(Reply::Body(write_response(ctx, &Response::CreatePullPoint { pull_point: &reference })))
    }

    /// GetMessages: takes up to MaximumNumber waiting notifications (all, up to the buffer
    /// size, without one), oldest first. Each carries the reference of the subscription that
    /// matched it.
    pub(crate) async fn get_messages(
        &self,
        pull_point: &PullPoint,
        maximum_number: Option<u32>,
        ctx: &ReplyContext,
    ) -> Result<Reply, Refusal> {
        let max = maximum_number
            .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX))
            .min(self.config.pull_point.max_messages);
        pull_point.settled().await;
        let taken = pull_point.take(max);
        let taken_at = Instant::now();
        let metrics = self.router.metrics();
        let counters = metrics.protocol(Protocol::Wsn);
        let mut delivered: Vec<Delivery> = Vec::with_capacity(taken.len());
        let mut messages: Vec<NotificationMessage> = Vec::with_capacity(taken.len());
        let mut subscription = None;
        for delivery in taken {
            // Overlapping filters of one subscription can match one message twice in a row.
            let duplicate =
                delivered.last().is_some_and(|d| d.tag == delivery.tag && Arc::ptr_eq(&d.message, &delivery.message));
            if duplicate {
                continue;
            }
            if delivery.message.is_expired(taken_at) {
                counters.dropped(DropReason::Expired, 1);
                continue;
            }
            if subscription.as_ref().is_none_or(|s: &Arc<crate::subscription::Subscription>| s.tag != delivery.tag) {
                subscription = self.registry.subscription_by_tag(delivery.tag);
            }
            let reference = subscription.as_ref().map(|s| &s.reference);
            let namespace = subscription.as_ref().and_then(|s| namespace_for(&s.filters, &delivery.message.topic));
            match notification_of(&delivery.message, reference, namespace, &self.limits) {
                Some(message) => {
                    messages.push(message);
                    delivered.push(delivery);
                }
                None => counters.dropped(DropReason::Untranslatable, 1),
            }
        }
        let body = write_response(ctx, &Response::GetMessages { messages: &messages });
        let written_at = Instant::now();
        counters.messages_out.fetch_add(delivered.len() as u64, Relaxed);
        for d in &delivered {
            record_delivery(metrics, Protocol::Wsn, d, taken_at, written_at);
        }
        Ok(Reply::Body(body))
    }

    /// DestroyPullPoint: the pull point, what it holds, and the subscriptions feeding it go.
    pub(crate) fn destroy_pull_point(&self, id: &str, caller: &Caller, ctx: &ReplyContext) -> Result<Reply, Refusal> {
        self.pull_point_for(id, caller)?;
        self.registry
            .remove_pull_point(id, CloseReason::ClientClosed)
            .ok_or_else(|| Refusal::resource_unknown("pull point", id))?;
        Ok(Reply::Body(write_response(ctx, &Response::DestroyPullPoint)))
    }

    /// Notify sent to a pull point's address (by its owner): stored for GetMessages, not
    /// published, though each topic still needs the right to publish to it. A Notify the pull
    /// point has no room for is refused whole, with a fault, so that the publisher knows (and
    /// can retry) instead of losing it silently.
    pub(crate) fn notify_pull_point(
        &self,
        pull_point: &PullPoint,
        notifications: &[NotificationMessage],
        caller: &Caller,
        received_at: Instant,
    ) -> Result<Reply, Refusal> {
        // Not published: what a pull point keeps goes nowhere else, so it needs no path.
        let messages = self.messages_of(notifications, None, caller, received_at)?;
        let count = messages.len() as u64;
        let counters = self.router.metrics().protocol(Protocol::Wsn);
        let now = Instant::now();
        let deliveries = messages.into_iter().map(|m| Delivery::new(Arc::new(m), QoS::AtMostOnce, now)).collect();
        if let Err(reason) = pull_point.store_all(deliveries) {
            counters.dropped(reason, count);
            let limits = &self.config.pull_point;
            return Err(Refusal::new(
                FaultKind::Receiver,
                match reason {
                    DropReason::MemoryFull => "the broker's memory budget is used up; retry later".to_owned(),
                    _ => format!(
                        "the pull point is full (at most {} notifications and {} bytes, and {} bytes for all \
                         pull points): GetMessages makes room",
                        limits.max_messages, limits.max_bytes, limits.total_max_bytes
                    ),
                },
            ));
        }
        counters.messages_in.fetch_add(count, Relaxed);
        Ok(Reply::Accepted)
    }
}
