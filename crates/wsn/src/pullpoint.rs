//! Pull points (WS-BaseNotification 1.3 §5): a buffer of notifications that a client fetches
//! with GetMessages instead of running an HTTP server of its own, bounded in count
//! (`pull_point.max_messages`) and in bytes (`pull_point.max_bytes` each,
//! `pull_point.total_max_bytes` for all of them, charged through [`PullPointBytes`]).
//!
//! Subscriptions whose consumer is the pull point deliver into a core outbox (of twice the
//! buffer's limits), since the router delivers only into outboxes; but an outbox cannot know
//! the total of all pull points, and counts its drops as `outbox_full`. So the pull point's
//! own task moves each delivery from that outbox into the buffer as soon as it arrives,
//! dropping what does not fit (counted as `queue_full`, or `memory_full` when the broker's
//! budget is used up): the outbox stays near empty and the bytes held stay bounded however
//! long nobody pulls. The task is the outbox's only reader, which keeps the order;
//! GetMessages first waits for it to move what is already queued, so a notification routed
//! before a GetMessages is in its answer.
//!
//! A Notify POSTed to the pull point's address (a pull point is a NotificationConsumer too)
//! goes straight into the buffer, all of it or none of it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tolk_core::budget::message_cost;
use tolk_core::{Delivery, DropReason, MemoryKind, Outbox, OutboxReceiver, Protocol, Router};

use crate::config::PullPointConfig;
use crate::memory::PullPointBytes;

/// The buffer: deliveries with what each was charged, oldest first.
#[derive(Default)]
struct Held {
    deliveries: VecDeque<(Delivery, usize)>,
    bytes: usize,
}

/// One pull point.
pub(crate) struct PullPoint {
    /// The last segment of its address.
    pub id: String,
    /// The user who created it (`None`: anonymous), the only one who may use it once users
    /// are verified.
    pub user: Option<String>,
    /// Where subscriptions deliver; only the forwarding task reads it.
    staging: OutboxReceiver,
    held: Mutex<Held>,
    /// Wakes GetMessages waiting for the task to move what was queued.
    forwarded: Notify,
    max_messages: usize,
    max_bytes: usize,
    bytes: Arc<PullPointBytes>,
    last_used: Mutex<Instant>,
    /// Cancelled when the pull point is destroyed (or the broker stops): ends its task.
    cancel: CancellationToken,
}

impl PullPoint {
    pub(crate) fn new(
        router: &Router,
        id: String,
        user: Option<String>,
        config: &PullPointConfig,
        bytes: Arc<PullPointBytes>,
        cancel: CancellationToken,
    ) -> Self {
        // Twice the buffer's limits, so that a burst reaches the buffer (whose drops are the
        // ones counted as `queue_full`) even before the task has run; the outbox drops
        // (`outbox_full`) only when the task falls that far behind. Its bytes count as
        // `outbox` while they pass through, so that the pull points' total is their buffers.
        let (capacity, max_bytes) = (config.max_messages.saturating_mul(2), config.max_bytes.saturating_mul(2));
        let (_, staging) =
            router.outbox(router.next_session_id(), Protocol::Wsn, capacity, max_bytes, MemoryKind::Outbox);
        PullPoint {
            id,
            user,
            staging,
            held: Mutex::default(),
            forwarded: Notify::new(),
            max_messages: config.max_messages,
            max_bytes: config.max_bytes,
            bytes,
            last_used: Mutex::new(Instant::now()),
            cancel,
        }
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where subscriptions deliver.
    pub(crate) fn outbox(&self) -> Outbox {
        self.staging.outbox()
    }

    /// The forwarding task: moves deliveries from the outbox into the buffer until the pull
    /// point is destroyed, counting what does not fit.
    pub(crate) async fn forward(self: Arc<Self>, router: Router) {
        let counters = router.metrics().protocol(Protocol::Wsn);
        loop {
            // Allocated per round: a burst's batch must not stay allocated in an idle pull point.
            let mut batch = Vec::new();
            let drained = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return,
                drained = self.staging.drain(&mut batch, usize::MAX) => drained,
            };
            if drained.is_err() {
                // Only at-least-once deliveries overflow an outbox, and pull subscriptions are
                // at most once; clear it rather than spin should one ever get here.
                self.staging.set_attached(true);
                continue;
            }
            let mut held = self.held();
            for delivery in batch.drain(..) {
                let cost = message_cost(&delivery.message);
                match self.charge(&mut held, 1, cost) {
                    Ok(()) => held.deliveries.push_back((delivery, cost)),
                    Err(reason) => counters.dropped(reason, 1),
                }
            }
            drop(held);
            self.forwarded.notify_waiters();
        }
    }

    /// Charges `count` more deliveries of `cost` bytes in all if they fit this pull point's
    /// count and bytes, the bytes of all pull points and the broker's budget; otherwise says
    /// why not, with nothing charged.
    fn charge(&self, held: &mut Held, count: usize, cost: usize) -> Result<(), DropReason> {
        if held.deliveries.len() + count > self.max_messages || held.bytes + cost > self.max_bytes {
            return Err(DropReason::QueueFull);
        }
        self.bytes.try_charge(cost)?;
        held.bytes += cost;
        Ok(())
    }

    /// Stores a Notify's deliveries: all of them, or none when they do not all fit (and why).
    pub(crate) fn store_all(&self, deliveries: Vec<Delivery>) -> Result<(), DropReason> {
        self.touch();
        let costs: Vec<usize> = deliveries.iter().map(|d| message_cost(&d.message)).collect();
        let mut held = self.held();
        self.charge(&mut held, deliveries.len(), costs.iter().sum())?;
        held.deliveries.extend(deliveries.into_iter().zip(costs));
        Ok(())
    }

    /// Waits until what subscriptions delivered before this call has been moved into the
    /// buffer (or dropped): one round of the forwarding task at most, so a steady stream of
    /// deliveries cannot hold GetMessages up.
    pub(crate) async fn settled(&self) {
        let forwarded = self.forwarded.notified();
        tokio::pin!(forwarded);
        forwarded.as_mut().enable();
        if !self.staging.is_empty() {
            tokio::select! {
                _ = forwarded => {}
                _ = self.cancel.cancelled() => {}
            }
        }
    }

    /// Takes up to `max` held deliveries, oldest first.
    pub(crate) fn take(&self, max: usize) -> Vec<Delivery> {
        self.touch();
        let mut held = self.held();
        let n = held.deliveries.len().min(max);
        let taken: Vec<(Delivery, usize)> = held.deliveries.drain(..n).collect();
        let bytes: usize = taken.iter().map(|(_, cost)| cost).sum();
        held.bytes -= bytes;
        drop(held);
        self.bytes.release(bytes);
        taken.into_iter().map(|(d, _)| d).collect()
    }

    /// Destroys the pull point: its task stops, what it holds is released.
    pub(crate) fn close(&self) {
        self.cancel.cancel();
        self.take(usize::MAX);
    }

    /// Notes a client call, which keeps the pull point from being destroyed as idle.
    pub(crate) fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// Last client call.
    pub(crate) fn last_used(&self) -> Instant {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for PullPoint {
    /// Releases whatever is still held, whichever way the pull point went.
    fn drop(&mut self) {
        self.bytes.release(self.held().bytes);
    }
}
