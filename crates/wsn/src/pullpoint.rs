//! Pull points (WS-BaseNotification 1.3 §5): a bounded buffer of notifications that a client
//! fetches with GetMessages instead of running an HTTP server of its own.
//!
//! The buffer is a core outbox: subscriptions whose consumer is the pull point deliver into it
//! straight from the router (no HTTP hop), and a Notify POSTed to the pull point's address (a
//! pull point is also a NotificationConsumer) is queued into it too. When full, new
//! notifications are dropped and counted (`outbox_full`).

use std::sync::Mutex;
use std::time::Instant;

use tolk_core::{Delivery, Outbox, OutboxReceiver, Protocol, Router, outbox};

/// One pull point.
pub(crate) struct PullPoint {
    /// The last segment of its address.
    pub id: String,
    receiver: OutboxReceiver,
    last_used: Mutex<Instant>,
}

impl PullPoint {
    pub(crate) fn new(router: &Router, id: String, capacity: usize) -> Self {
        let (_, receiver) = outbox(router.next_session_id(), Protocol::Wsn, capacity);
        PullPoint { id, receiver, last_used: Mutex::new(Instant::now()) }
    }

    /// Where subscriptions deliver.
    pub(crate) fn outbox(&self) -> Outbox {
        self.receiver.outbox()
    }

    /// Takes up to `max` waiting deliveries.
    pub(crate) fn take(&self, max: usize) -> Vec<Delivery> {
        self.touch();
        let mut taken = Vec::new();
        // Every delivery into a pull point is at most once, so the outbox never overflows.
        let _ = self.receiver.try_drain(&mut taken, max);
        taken
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
