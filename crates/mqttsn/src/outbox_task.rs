//! The small task each connected client has: it waits on the client's core outbox and hands
//! batches of deliveries to the endpoint, one batch per request.
//!
//! Why a task per client: the endpoint owns the socket and every session, but the core wakes a
//! subscriber only through its outbox's `drain().await`; a task per connected client turns that
//! wake-up into a message on one bounded channel the endpoint already selects on. The task takes
//! a batch only when the session asked for one ([`OutboxTask::want_more`]), so deliveries wait in
//! the core outbox (bounded, with its QoS-aware overflow policy), not in a second queue here.
//! The task also holds the client's connection-gauge guard, so `connections_open` counts exactly
//! the clients that have one.

use std::sync::Arc;

use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tolk_core::store::StoreError;
use tolk_core::{Delivery, Metrics, Protocol, Session};

/// Largest batch taken from an outbox at once: enough to amortise the channel hop, small enough
/// that an awake client's backlog stays in the core outbox.
pub(crate) const BATCH: usize = 32;

/// Identifies a session in the endpoint; never reused, so a stale wake-up is recognisable.
pub(crate) type ClientKey = u64;

/// What an outbox task reports.
#[derive(Debug)]
pub(crate) enum Wake {
    /// Deliveries taken from the client's outbox.
    Deliveries(ClientKey, Vec<Delivery>),
    /// The outbox overflowed with at-least-once messages (slow consumer); the task has ended.
    Overflowed(ClientKey),
    /// A store commit the client's answers wait for ended (see `stored_acks.rs`).
    Stored(ClientKey, u64, Result<(), StoreError>),
}

/// Handle to a running outbox task; dropping it stops the task (and closes the gauge).
pub(crate) struct OutboxTask {
    cancel: CancellationToken,
    want: Arc<Notify>,
}

impl OutboxTask {
    /// Starts the task for a connected client.
    pub(crate) fn spawn(
        key: ClientKey,
        core: Arc<Session>,
        to_endpoint: mpsc::Sender<Wake>,
        shutdown: &CancellationToken,
        tracker: &TaskTracker,
        metrics: Arc<Metrics>,
    ) -> Self {
        let cancel = shutdown.child_token();
        let want = Arc::new(Notify::new());
        tracker.spawn(run(key, core, to_endpoint, cancel.clone(), want.clone(), metrics));
        OutboxTask { cancel, want }
    }

    /// Lets the task take the next batch. A request made while the task is busy is remembered
    /// (`Notify` keeps one permit), so none is lost.
    pub(crate) fn want_more(&self) {
        self.want.notify_one();
    }
}

impl Drop for OutboxTask {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

async fn run(
    key: ClientKey,
    core: Arc<Session>,
    to_endpoint: mpsc::Sender<Wake>,
    cancel: CancellationToken,
    want: Arc<Notify>,
    metrics: Arc<Metrics>,
) {
    let _open = metrics.connection_opened(Protocol::MqttSn);
    // Grown by the first batch, not before: most of 10,000 clients never receive one, and 32
    // empty slots each were a third of an idle client's memory.
    let mut batch = Vec::new();
    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return,
            _ = want.notified() => {}
        }
        // `drain` is cancel-safe: nothing is taken unless it completes.
        let drained = tokio::select! {
            biased;
            _ = cancel.cancelled() => return,
            drained = core.receiver().drain(&mut batch, BATCH) => drained,
        };
        let wake = match drained {
            Ok(_) => Wake::Deliveries(key, std::mem::take(&mut batch)),
            Err(_) => Wake::Overflowed(key),
        };
        // Reserve first so that a cancellation never loses a taken batch: it goes back.
        let permit = tokio::select! {
            biased;
            _ = cancel.cancelled() => None,
            permit = to_endpoint.reserve() => permit.ok(),
        };
        let Some(permit) = permit else {
            if let Wake::Deliveries(_, taken) = wake {
                core.receiver().requeue_front(taken.into_iter());
            }
            return;
        };
        let overflowed = matches!(wake, Wake::Overflowed(_));
        permit.send(wake);
        if overflowed {
            return;
        }
    }
}
