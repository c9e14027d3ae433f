//! The part of an MQTT session that outlives a network connection (MQTT 3.1.1 §3.1.2.4, MQTT 5
//! §4.1): the core session (subscriptions and the bounded outbox, which doubles as the offline
//! queue), the session's subscription records, the QoS 1/2 flows in flight and the session
//! expiry interval.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tolk_core::{Delivery, QoS, SharedError};

use crate::inflight::{IncomingQos2, Outgoing};
use crate::subscriptions::{FilterKind, Subscriptions, parse_filter};
use crate::translate::{qos_in, whole_seconds};
use crate::will::Will;

/// A session parked while its client is away.
pub struct Parked {
    /// The session.
    pub state: Box<SessionState>,
    /// When it expires.
    pub expires_at: Instant,
    /// A delayed will and when it is due.
    pub will: Option<(Will, Instant)>,
}

/// Session state, owned by the connection while one is attached and by the registry while the
/// client is away.
pub struct SessionState {
    /// The router's view: subscriptions, outbox, shared-group memberships.
    pub core: tolk_core::Session,
    /// The client identifier the session belongs to.
    pub client_id: Arc<str>,
    /// Subscriptions as the client asked for them.
    pub subs: Subscriptions,
    /// Deliveries to the client not yet fully acknowledged.
    pub outgoing: Outgoing,
    /// QoS 2 messages from the client awaiting PUBREL.
    pub incoming: IncomingQos2,
    /// How long the session outlives its connection, in whole seconds as MQTT 5 gives it (0: it
    /// ends with it; 4 bytes, not a `Duration`'s 16: the state then fits a smaller allocation).
    /// Read and set through [`SessionState::expiry`] and [`SessionState::set_expiry`].
    expiry_secs: u32,
    /// The proven user it belongs to, if any: only that user may take its client id over.
    pub owner: Option<Arc<str>>,
}

impl SessionState {
    /// A fresh session.
    pub fn new(core: tolk_core::Session, client_id: Arc<str>, expiry: Duration) -> Self {
        SessionState {
            core,
            client_id,
            owner: None,
            subs: Subscriptions::default(),
            outgoing: Outgoing::default(),
            incoming: IncomingQos2::default(),
            expiry_secs: whole_seconds(expiry),
        }
    }

    /// How long the session outlives its connection (zero: it ends with it).
    pub fn expiry(&self) -> Duration {
        Duration::from_secs(self.expiry_secs.into())
    }

    /// Sets how long the session outlives its connection: whole seconds, a fraction rounded up
    /// (so that only zero means "ends with it"), at most `u32::MAX` (MQTT 5's "never").
    pub fn set_expiry(&mut self, expiry: Duration) {
        self.expiry_secs = whole_seconds(expiry);
    }

    /// Takes the session offline. The outbox keeps queueing QoS 1/2 messages up to its
    /// capacity (QoS 0 is dropped, MQTT-3.1.2-5 allows either). Shared-group memberships stop
    /// consuming so that the group's other members get the messages meanwhile (everything this
    /// member held unacknowledged goes back to the group), but hold the group's queue, which
    /// keeps what comes while no member is connected; `unsent` deliveries that were never
    /// written are queued again.
    pub fn detach(&mut self, unsent: impl IntoIterator<Item = Delivery>) {
        // Attaching clears a slow-consumer overflow mark, so that what is queued can be read
        // and kept for the next connection.
        self.core.receiver().set_attached(true);
        let mut queued = Vec::new();
        let _ = self.core.receiver().try_drain(&mut queued, usize::MAX);
        let tags: Vec<u64> = self.subs.shared().filter_map(|(_, e)| e.shared_tag).collect();
        for tag in tags {
            self.core.hold(tag);
        }
        // Queue deliveries were handed back to their group by the hold above.
        self.outgoing.take_where(|d| d.ack.is_some());
        let keep = |d: &Delivery| d.ack.is_none() && d.qos > QoS::AtMostOnce;
        let again: Vec<Delivery> = unsent.into_iter().chain(queued).filter(keep).collect();
        self.core.receiver().requeue_front(again.into_iter());
        self.core.receiver().set_attached(false);
    }

    /// The session ended: what the store kept of it goes (see `kept.rs`).
    pub fn forget_kept(&self) {
        if let Some(keeper) = self.core.keeper() {
            keeper.end();
        }
    }

    /// Brings an offline session back: the outbox is live again and the shared-group
    /// memberships are rejoined with `credit` unacknowledged deliveries each.
    pub fn attach(&mut self, credit: usize) -> Result<(), SharedError> {
        self.core.receiver().set_attached(true);
        let shared: Vec<(String, u64, QoS)> = self
            .subs
            .shared()
            .filter_map(|(f, e)| Some((f.to_owned(), e.shared_tag?, qos_in(e.options.qos))))
            .collect();
        for (written, tag, qos) in shared {
            if let Ok(FilterKind::Shared { group, filter }) = parse_filter(&written) {
                self.core.join_shared(group, filter, credit, qos, tag)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_is_whole_seconds_and_only_zero_ends_with_the_connection() {
        assert_eq!(whole_seconds(Duration::ZERO), 0);
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1, "a fraction is rounded up");
        assert_eq!(whole_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(whole_seconds(Duration::from_secs(100)), 100);
        assert_eq!(whole_seconds(Duration::from_secs(u64::from(u32::MAX) + 1)), u32::MAX, "never");
    }

    /// Every connected MQTT client holds one, boxed: at 216 bytes or less it is a 224-byte
    /// chunk of glibc's allocator, 16 bytes less than at 232 (docs/benchmarks.md, "Where an
    /// idle MQTT connection's bytes go now"). Checked on 64-bit targets.
    #[test]
    fn session_state_fits_the_224_byte_chunk() {
        if cfg!(target_pointer_width = "64") {
            assert!(size_of::<SessionState>() <= 216, "{} bytes", size_of::<SessionState>());
        }
    }
}
