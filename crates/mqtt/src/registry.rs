//! Every client id the broker knows, connected or not: the place where a new connection finds
//! its persistent session, where a second connection with the same id takes over the first
//! (MQTT-3.1.4-2; MQTT 5 DISCONNECT 0x8E), and where offline sessions wait for their client,
//! their delayed will or their expiry.
//!
//! One `std::sync::Mutex` around a map: every operation is a lookup and a move, never held
//! across an await. A reaper task sleeps until the earliest will or expiry deadline.

use std::collections::HashMap;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use thiserror::Error;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tolk_core::Outbox;

use crate::kept;
use crate::state::Parked;

/// How long a new connection waits for the connection it takes over to hand back the session.
const TAKEOVER_WAIT: Duration = Duration::from_secs(5);

enum Entry {
    /// `outbox`: the connection's session's, signalled when another connection takes the id
    /// over (once: it is taken then).
    Online {
        conn: u64,
        outbox: Option<Outbox>,
        owner: Option<Arc<str>>,
    },
    Offline(Box<Parked>),
}

impl Entry {
    fn owner(&self) -> Option<&str> {
        match self {
            Entry::Online { owner, .. } => owner.as_deref(),
            Entry::Offline(parked) => parked.state.owner.as_deref(),
        }
    }
}

/// What a connection gets for its client id.
pub struct Claim {
    /// This connection's token for [`Registry::release`].
    pub conn: u64,
    /// The offline session it found, if any.
    pub previous: Option<Parked>,
}

/// Why a client id could not be claimed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClaimError {
    /// `max_sessions` client ids are known already.
    #[error("session limit of {0} reached")]
    Full(usize),
    /// The client id belongs to another user's connection or stored session.
    #[error("client id {0:?} belongs to another user")]
    OwnedByAnother(String),
}

/// The client-id registry of one MQTT front end.
pub struct Registry {
    inner: Mutex<Inner>,
    changed: Notify,
    max_sessions: usize,
}

#[derive(Default)]
struct Inner {
    /// Keyed by the session's own client id (shared, not copied: one allocation less per
    /// connection).
    sessions: HashMap<Arc<str>, Entry>,
    last_conn: u64,
}

impl Registry {
    /// An empty registry admitting at most `max_sessions` client ids.
    pub fn new(max_sessions: usize) -> Self {
        Registry { inner: Mutex::default(), changed: Notify::new(), max_sessions: max_sessions.max(1) }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every critical section leaves the map consistent, so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Claims `client_id` for a new connection of `owner` (a proven user, or `None`). A
    /// connection already holding it is told to close and park its session, and the claim then
    /// takes that session. An id that a proven user holds, online or stored, is taken only by
    /// the same user (MQTT-3.1.4-2's takeover must not let one user seize another's session).
    ///
    /// `outbox_for` names the outbox of the session the connection will run, given the
    /// offline session found (if any): a takeover signals it, and the connection's driver
    /// hands that to the session
    /// ([`ProtocolSession::handle_signal`](tolk_core::drive::ProtocolSession::handle_signal)).
    pub async fn claim(
        &self,
        client_id: &Arc<str>,
        owner: Option<&Arc<str>>,
        outbox_for: impl FnOnce(Option<&Parked>) -> Outbox,
    ) -> Result<Claim, ClaimError> {
        let id: &str = client_id;
        loop {
            let mut released = pin!(self.changed.notified());
            let holder = {
                let mut inner = self.lock();
                if let Some(entry) = inner.sessions.get(id)
                    && entry.owner().is_some_and(|held| Some(held) != owner.map(|o| &**o))
                {
                    return Err(ClaimError::OwnedByAnother(id.to_owned()));
                }
                match inner.sessions.get_mut(id) {
                    None => {
                        if inner.sessions.len() >= self.max_sessions {
                            return Err(ClaimError::Full(self.max_sessions));
                        }
                        let outbox = outbox_for(None);
                        return Ok(Self::attach(&mut inner, client_id, None, outbox, owner));
                    }
                    Some(Entry::Offline(_)) => {
                        let previous = match inner.sessions.remove(id) {
                            Some(Entry::Offline(parked)) => Some(*parked),
                            _ => None,
                        };
                        if let Some(parked) = &previous {
                            // A takeover's signal that its connection ended before taking is
                            // not meant for the next one. (Signals are sent under this lock,
                            // so none can come between this and the new entry.)
                            parked.state.core.receiver().clear_signal();
                        }
                        let outbox = outbox_for(previous.as_ref());
                        return Ok(Self::attach(&mut inner, client_id, previous, outbox, owner));
                    }
                    Some(Entry::Online { conn, outbox, .. }) => {
                        if let Some(outbox) = outbox.take() {
                            outbox.signal();
                        }
                        released.as_mut().enable();
                        *conn
                    }
                }
            };
            if tokio::time::timeout(TAKEOVER_WAIT, released).await.is_err() {
                // The old connection is stuck (e.g. blocked in a write): take the id anyway. Its
                // session is discarded when it finally releases.
                tracing::warn!(client_id = id, "previous connection did not hand over its session in time");
                let mut inner = self.lock();
                if matches!(inner.sessions.get(id), Some(Entry::Online { conn, .. }) if *conn == holder) {
                    inner.sessions.remove(id);
                }
            }
        }
    }

    fn attach(
        inner: &mut Inner,
        client_id: &Arc<str>,
        previous: Option<Parked>,
        outbox: Outbox,
        owner: Option<&Arc<str>>,
    ) -> Claim {
        inner.last_conn += 1;
        let conn = inner.last_conn;
        let owner = owner.cloned();
        inner.sessions.insert(client_id.clone(), Entry::Online { conn, outbox: Some(outbox), owner });
        Claim { conn, previous }
    }

    /// The connection `conn` is done with `client_id`: park its session (`Some`) or forget the
    /// id (`None`, the session ended). When the id was taken from it meanwhile, the session is
    /// handed back so the caller can end it.
    pub fn release(&self, client_id: &str, conn: u64, park: Option<Parked>) -> Option<Parked> {
        let leftover = {
            let mut inner = self.lock();
            let ours =
                inner.sessions.get_mut(client_id).filter(|e| matches!(e, Entry::Online { conn: c, .. } if *c == conn));
            match (ours, park) {
                (Some(entry), Some(parked)) => {
                    // The key stays: only what it holds changes.
                    *entry = Entry::Offline(Box::new(parked));
                    None
                }
                (Some(_), None) => {
                    inner.sessions.remove(client_id);
                    None
                }
                (None, park) => park,
            }
        };
        self.changed.notify_waiters();
        leftover
    }

    /// Parks a session the store kept (at start, before anyone connects). Returns `false` when
    /// its client id is taken already.
    pub fn restore(&self, parked: Parked) -> bool {
        let mut inner = self.lock();
        let client_id = parked.state.client_id.clone();
        if inner.sessions.contains_key(&client_id) {
            return false;
        }
        inner.sessions.insert(client_id, Entry::Offline(Box::new(parked)));
        drop(inner);
        self.changed.notify_waiters();
        true
    }

    /// Publishes due delayed wills and ends expired offline sessions (publishing their will if
    /// it was still waiting: the will goes out at session end at the latest). Returns the next
    /// deadline.
    pub fn sweep(&self, now: Instant) -> Option<Instant> {
        let mut expired = Vec::new();
        let mut next: Option<Instant> = None;
        {
            let mut inner = self.lock();
            let ids: Vec<Arc<str>> = inner
                .sessions
                .iter()
                .filter(|(_, e)| matches!(e, Entry::Offline(p) if p.expires_at <= now))
                .map(|(id, _)| id.clone())
                .collect();
            for id in ids {
                if let Some(Entry::Offline(parked)) = inner.sessions.remove(&id) {
                    expired.push(*parked);
                }
            }
            for entry in inner.sessions.values_mut() {
                let Entry::Offline(parked) = entry else { continue };
                if parked.will.as_ref().is_some_and(|(_, at)| *at <= now)
                    && let Some((will, _)) = parked.will.take()
                {
                    // Publishing takes router locks only; nothing holds those while waiting
                    // for this one, so doing it here cannot deadlock.
                    will.publish(&parked.state.core, &parked.state.client_id, now);
                    drop(kept::save(&parked.state, Some(parked.expires_at.saturating_duration_since(now)), None));
                }
                let due = parked.will.as_ref().map_or(parked.expires_at, |(_, at)| (*at).min(parked.expires_at));
                next = Some(next.map_or(due, |n| n.min(due)));
            }
        }
        // Ended sessions are dropped outside the registry lock (their clean-up takes router locks).
        for parked in expired {
            tracing::debug!(client_id = %parked.state.client_id, "offline session expired");
            parked.state.forget_kept();
            if let Some((will, _)) = &parked.will {
                will.publish(&parked.state.core, &parked.state.client_id, now);
            }
        }
        next
    }

    /// Runs [`Registry::sweep`] at every deadline until `shutdown`.
    pub async fn run_reaper(&self, shutdown: CancellationToken) {
        loop {
            let mut changed = pin!(self.changed.notified());
            changed.as_mut().enable();
            let next = self.sweep(Instant::now());
            let sleep =
                tokio::time::sleep_until(next.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600)).into());
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = changed => {}
                _ = sleep => {}
            }
        }
    }
}
