//! The outboxes of every open session, so that the broker's shutdown and the alarms of the
//! shared wheel ([`crate::alarm`]) reach each connection through the outbox its driver watches
//! anyway ([`crate::Outbox::shut_down`]), instead of a wait of its own in the task of every
//! connection (72 bytes each for the shutdown, 128 for a timer).
//!
//! One slot of 8 bytes per open session, reused once freed; the lock is taken when a session
//! opens or ends, never per message.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

use crate::outbox::Outbox;

/// The open sessions' outboxes, and whether the broker is shutting down.
#[derive(Default)]
pub(crate) struct LiveSessions(Mutex<Slots>);

#[derive(Default)]
struct Slots {
    outboxes: Vec<Option<Outbox>>,
    /// Indices of the empty slots in `outboxes`.
    free: Vec<u32>,
    shutting_down: bool,
}

impl LiveSessions {
    fn lock(&self) -> MutexGuard<'_, Slots> {
        // Every change under the lock is a single push, pop or store: a panic cannot leave the
        // slots inconsistent.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `outbox` until [`LiveSessions::remove`] with the slot returned. A session opened
    /// once the shutdown began is told at once.
    pub(crate) fn insert(&self, outbox: Outbox) -> u32 {
        let mut slots = self.lock();
        if slots.shutting_down {
            outbox.shut_down();
        }
        match slots.free.pop() {
            Some(slot) => {
                slots.outboxes[slot as usize] = Some(outbox);
                slot
            }
            None => {
                slots.outboxes.push(Some(outbox));
                // More than 4 billion open sessions do not fit in the memory of any broker.
                (slots.outboxes.len() - 1) as u32
            }
        }
    }

    /// Forgets the outbox kept in `slot`.
    pub(crate) fn remove(&self, slot: u32) {
        let mut slots = self.lock();
        if let Some(entry) = slots.outboxes.get_mut(slot as usize)
            && entry.take().is_some()
        {
            slots.free.push(slot);
        }
    }

    /// Tells every open session, and every one opened from now on, that the broker is shutting
    /// down. Idempotent: a session is told once.
    pub(crate) fn shut_down(&self) {
        let mut slots = self.lock();
        if std::mem::replace(&mut slots.shutting_down, true) {
            return;
        }
        for outbox in slots.outboxes.iter().flatten() {
            outbox.shut_down();
        }
    }

    /// Raises the alarm of the sessions in `slots` ([`crate::alarm`]). A slot freed meanwhile
    /// is skipped; one reused since wakes its new session for nothing, which then files its own
    /// deadline again.
    pub(crate) fn alarm(&self, slots: &[u32]) {
        if slots.is_empty() {
            return;
        }
        let live = self.lock();
        for &slot in slots {
            if let Some(Some(outbox)) = live.outboxes.get(slot as usize) {
                outbox.alarm();
            }
        }
    }

    /// Runs [`LiveSessions::shut_down`] once `shutdown` is cancelled. Needs a tokio runtime: a
    /// context made outside one (a fuzz target that serves no connection) has nobody to tell.
    pub(crate) fn shut_down_when_cancelled(self: &Arc<Self>, shutdown: &CancellationToken) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (live, shutdown) = (self.clone(), shutdown.clone());
        runtime.spawn(async move {
            shutdown.cancelled().await;
            live.shut_down();
        });
    }

    /// How many sessions are open.
    #[cfg(test)]
    fn len(&self) -> usize {
        let slots = self.lock();
        slots.outboxes.len() - slots.free.len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::task::{Context, Poll};

    use tolk_metrics::{Metrics, Protocol};

    use super::*;
    use crate::budget::MemoryBudget;
    use crate::message::SessionId;
    use crate::outbox::{OutboxLimits, OutboxReceiver, Wake, outbox};

    fn open(id: u64) -> (Outbox, OutboxReceiver) {
        let limits = OutboxLimits::count(4);
        let budget = Arc::new(MemoryBudget::new(1 << 20, Arc::new(Metrics::new())));
        outbox(SessionId(id), Protocol::Mqtt, limits, budget)
    }

    fn wake(receiver: &OutboxReceiver) -> Poll<Wake> {
        let waker = futures_util::task::noop_waker();
        receiver.poll_wake(&mut Context::from_waker(&waker), &mut Vec::new(), 10)
    }

    #[test]
    fn the_shutdown_reaches_open_sessions_and_later_ones_once_each() {
        let live = LiveSessions::default();
        let (first, first_rx) = open(1);
        let (gone, gone_rx) = open(2);
        live.insert(first);
        let gone_slot = live.insert(gone);
        live.remove(gone_slot);
        assert_eq!(live.len(), 1);

        live.shut_down();
        live.shut_down();
        assert_eq!(wake(&first_rx), Poll::Ready(Wake::ShutDown));
        assert_eq!(wake(&first_rx), Poll::Pending, "taken once, however often the broker is told");
        assert_eq!(wake(&gone_rx), Poll::Pending, "a removed session is not told");

        let (late, late_rx) = open(3);
        let slot = live.insert(late);
        assert_eq!(slot, gone_slot, "a freed slot is reused");
        assert_eq!(wake(&late_rx), Poll::Ready(Wake::ShutDown));
    }

    #[test]
    fn a_takeover_signal_cleared_keeps_the_shutdown() {
        let (tx, rx) = open(1);
        tx.signal();
        tx.shut_down();
        rx.clear_signal();
        assert_eq!(wake(&rx), Poll::Ready(Wake::ShutDown));
        assert_eq!(wake(&rx), Poll::Pending);
    }
}
