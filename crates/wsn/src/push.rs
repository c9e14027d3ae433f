//! Push delivery: one task per push subscription drains the subscription's bounded outbox and
//! POSTs each batch to the consumer, in order, one request at a time.
//!
//! A failed POST (no connection, timeout, non-2xx) is retried with exponential backoff
//! (`retry_initial` doubling up to `retry_backoff_max`); while it is retried, new
//! notifications wait in the outbox, and beyond its capacity they are dropped and counted. A
//! consumer that has failed every attempt for `give_up_after` is dropped: its subscription is
//! removed with whatever was waiting. While the subscription is paused nothing is sent.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use axum::http::{HeaderValue, Uri};
use bytes::Bytes;
use tokio::sync::{Semaphore, watch};
use tolk_core::frontend::record_delivery;
use tolk_core::{CloseReason, Delivery, DropReason, Message, OutboxReceiver, Protocol, path};
use tracing::{debug, info};
use wsn_xml::{EndpointReference, NotificationMessage, Request, RequestHeaders, write_raw_notification, write_request};

use crate::client::PostError;
use crate::endpoint::Endpoint;
use crate::subscription::{Consumer, Subscription};
use crate::translate::{element_of, namespace_for, notification_of};

/// How one batch ended.
enum Sent {
    /// The consumer took it.
    Delivered,
    /// The subscription was removed, or the broker is stopping.
    Stopped,
    /// The consumer failed every attempt for `give_up_after`.
    GaveUp(PostError),
}

/// Runs one push subscription's deliveries until it is removed or its consumer is dropped.
pub(crate) async fn run(
    endpoint: Arc<Endpoint>,
    subscription: Arc<Subscription>,
    receiver: OutboxReceiver,
    consumer_limit: Arc<Semaphore>,
) {
    let Consumer::Push { reference, uri } = &subscription.consumer else { return };
    let config = &endpoint.config.push;
    let batch_max = if subscription.use_raw { 1 } else { config.max_messages_per_notify.max(1) };
    let metrics = endpoint.router.metrics().clone();
    let counters = metrics.protocol(Protocol::Wsn);
    let dedupe = subscription.filters.len() > 1;
    let mut paused = subscription.paused_watch();
    let mark = endpoint.loop_mark.value(subscription.tag);
    let mut batch: Vec<Delivery> = Vec::with_capacity(batch_max);
    // What was drained but left for the next Notify, whose path differs.
    let mut rest: Vec<Delivery> = Vec::new();
    let mut previous: Option<Arc<Message>> = None;
    loop {
        batch.clear();
        if rest.is_empty() {
            let drained = tokio::select! {
                biased;
                _ = subscription.cancel.cancelled() => return,
                drained = receiver.drain(&mut batch, batch_max) => drained,
            };
            if drained.is_err() {
                // Only at-least-once deliveries overflow an outbox, and this one gets none.
                receiver.set_attached(true);
                continue;
            }
        } else {
            std::mem::swap(&mut batch, &mut rest);
        }
        // One path per Notify (its `tolk:Path` header): the batch ends where the path changes.
        if let Some(first) = batch.first() {
            let cut = batch
                .iter()
                .position(|d| !path::nodes(&d.message).eq(path::nodes(&first.message)))
                .unwrap_or(batch.len());
            rest = batch.split_off(cut);
        }
        let taken_at = Instant::now();
        batch.retain(|d| {
            if dedupe && previous.as_ref().is_some_and(|p| Arc::ptr_eq(p, &d.message)) {
                return false;
            }
            if dedupe {
                previous = Some(d.message.clone());
            }
            if d.message.is_expired(taken_at) {
                counters.dropped(DropReason::Expired, 1);
                return false;
            }
            true
        });
        let Some(body) = body_of(&endpoint, &subscription, reference, &mut batch) else { continue };
        let outcome = send(&endpoint, &subscription, uri, &mark, body, &consumer_limit, &mut paused).await;
        match outcome {
            Sent::Delivered => {
                let written_at = Instant::now();
                counters.messages_out.fetch_add(batch.len() as u64, Relaxed);
                for d in &batch {
                    record_delivery(&metrics, Protocol::Wsn, d, taken_at, written_at);
                }
            }
            Sent::Stopped => return,
            Sent::GaveUp(error) => {
                let lost = batch.len() + rest.len() + receiver.len();
                counters.dropped(DropReason::ConsumerUnreachable, lost as u64);
                // The subscription itself counts as a closed "connection" (`io_error`).
                endpoint.registry.remove_subscription(&subscription.id, CloseReason::IoError);
                info!(
                    %error,
                    undelivered = lost,
                    "consumer unreachable for {:?}; subscription removed",
                    config.give_up_after
                );
                return;
            }
        }
    }
}

/// The request body for a batch: one raw message element (UseRaw) or a Notify. Deliveries
/// whose topic has no WS-N form are dropped from the batch and counted. `None` when nothing
/// is left to send.
fn body_of(
    endpoint: &Endpoint,
    subscription: &Subscription,
    consumer: &EndpointReference,
    batch: &mut Vec<Delivery>,
) -> Option<Bytes> {
    let limits = &endpoint.limits;
    let message_id = endpoint.ids.message_id();
    // Every delivery in the batch has this path (see `run`).
    let path = batch.first().map(|d| path::nodes(&d.message).collect::<Vec<_>>().join(","));
    let headers = RequestHeaders {
        addressing: subscription.addressing,
        message_id: Some(&message_id),
        to: Some(consumer),
        path: path.as_deref().filter(|p| !p.is_empty()),
        ..RequestHeaders::default()
    };
    if subscription.use_raw {
        let delivery = batch.first()?;
        let element = element_of(&delivery.message, limits);
        return Some(write_raw_notification(subscription.soap, &headers, &element));
    }
    let mut messages: Vec<NotificationMessage> = Vec::with_capacity(batch.len());
    batch.retain(|d| {
        let namespace = namespace_for(&subscription.filters, &d.message.topic);
        match notification_of(&d.message, Some(&subscription.reference), namespace, limits) {
            Some(m) => {
                messages.push(m);
                true
            }
            None => {
                endpoint.router.metrics().protocol(Protocol::Wsn).dropped(DropReason::Untranslatable, 1);
                false
            }
        }
    });
    if messages.is_empty() {
        return None;
    }
    Some(write_request(subscription.soap, &headers, &Request::Notify(messages)))
}

/// POSTs `body` until the consumer takes it, the subscription stops, or the consumer has
/// failed for `give_up_after`.
async fn send(
    endpoint: &Endpoint,
    subscription: &Subscription,
    uri: &Uri,
    mark: &HeaderValue,
    body: Bytes,
    consumer_limit: &Semaphore,
    paused: &mut watch::Receiver<bool>,
) -> Sent {
    let config = &endpoint.config.push;
    let cancel = &subscription.cancel;
    let mut backoff = config.retry_initial;
    let mut failing_since: Option<Instant> = None;
    loop {
        if *paused.borrow() {
            tokio::select! {
                _ = cancel.cancelled() => return Sent::Stopped,
                resumed = paused.wait_for(|p| !*p) => if resumed.is_err() { return Sent::Stopped },
            }
            // Time spent paused is not time the consumer failed.
            failing_since = None;
        }
        let result = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Sent::Stopped,
            result = async {
                let _permit = consumer_limit.acquire().await;
                endpoint.client.post(uri, subscription.soap, mark, body.clone()).await
            } => result,
        };
        let error = match result {
            Ok(()) => return Sent::Delivered,
            Err(error) => error,
        };
        let since = *failing_since.get_or_insert_with(Instant::now);
        let failing_for = since.elapsed();
        if failing_for >= config.give_up_after {
            return Sent::GaveUp(error);
        }
        // Never sleep past the give-up point: one last attempt happens there.
        let wait = backoff.min(config.give_up_after.saturating_sub(failing_for)).max(Duration::from_millis(1));
        debug!(%error, "delivery failed; retrying in {wait:?}");
        tokio::select! {
            _ = cancel.cancelled() => return Sent::Stopped,
            _ = tokio::time::sleep(wait) => {}
        }
        backoff = backoff.saturating_mul(2).min(config.retry_backoff_max.max(config.retry_initial));
    }
}
