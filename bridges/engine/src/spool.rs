//! A spool: the durable core queue that holds what is to leave this broker for a remote (a
//! bridge's `$bridge/<name>`, the cluster's `$cluster/out`), consumed with bounded credit
//! while the remote is up.
//!
//! At-least-once messages wait here, within the queue's byte limit, while the remote is away;
//! what was handed out but not settled when the connection ended goes back to the front and
//! is sent again.

use std::collections::VecDeque;
use std::sync::Arc;

use tolk_core::{Delivery, QoS, Queue, Session};

/// The consumer tag of the spool's one consumer.
const SPOOL_TAG: u64 = 1;

/// One spool and its consumer state. The caller's session consumes from it.
pub struct Spool {
    queue: Arc<Queue>,
    consuming: bool,
    taken: VecDeque<Delivery>,
}

impl Spool {
    /// Wraps a declared queue.
    pub fn new(queue: Arc<Queue>) -> Spool {
        Spool { queue, consuming: false, taken: VecDeque::new() }
    }

    /// The queue.
    pub fn queue(&self) -> &Arc<Queue> {
        &self.queue
    }

    /// What it holds now, (messages, bytes), for the counters.
    pub fn gauge(&self) -> tolk_core::SpoolGauge {
        let read = self.queue.clone();
        Box::new(move || ((read.ready_len() + read.unacked_len()) as u64, read.bytes() as u64))
    }

    /// The remote is up: `session` starts taking messages, with `credit` unsettled at most.
    pub fn start(&mut self, session: &mut Session, credit: usize) {
        // The caller's own queue, and no access list applies to it: this cannot be refused.
        if !self.consuming && session.consume(&self.queue, credit, QoS::ExactlyOnce, SPOOL_TAG).is_ok() {
            self.consuming = true;
        }
    }

    /// The remote went away: what was taken and not settled goes back to the front.
    pub fn stop(&mut self, session: &mut Session) {
        if self.consuming {
            session.cancel(SPOOL_TAG);
            // Deliveries already handed to this session went back with the consumer.
            let mut stale = Vec::new();
            let _ = session.receiver().try_drain(&mut stale, usize::MAX);
            self.taken.clear();
            self.consuming = false;
        }
    }

    /// The next message taken. Cancel-safe: one taken while the caller stopped waiting is
    /// kept for the next call.
    pub async fn next(&mut self, session: &Session) -> Delivery {
        loop {
            if let Some(delivery) = self.taken.pop_front() {
                return delivery;
            }
            let mut batch = Vec::new();
            if session.receiver().drain(&mut batch, usize::MAX).await.is_err() {
                // Queue deliveries never overflow an outbox (credit bounds them).
                session.receiver().set_attached(true);
            }
            self.taken.extend(batch);
        }
    }
}

/// Settles a delivery taken from a spool: it leaves the queue (and its publisher, in a
/// confirming queue, is acknowledged).
pub fn settle(delivery: &Delivery) {
    if let Some(ack) = &delivery.ack {
        ack.ack();
    }
}
