//! Who may connect: at most so many connections on a listener, and at most so many from one
//! address, so that one host (a misbehaving device, a scanner, a flood of idle sockets) cannot
//! use up the file descriptors or the connection slots that every other client needs.
//!
//! Shared by the protocol listeners and the HTTP server. Refusals are counted
//! (`tolk_connections_refused_total`) and logged at most once a second per listener, so that a
//! flood does not flood the log too.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use foldhash::fast::RandomState;
use tokio::sync::Semaphore;
use tolk_metrics::{CloseReason, Metrics, Protocol};

/// A listener's connection limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once on the listener.
    pub max_connections: usize,
    /// Connections open at once from one IP address.
    pub max_per_address: usize,
}

/// The admission state of one listener.
pub struct Admission {
    limits: ConnectionLimits,
    /// The listener's free slots. A connection's slot is not held as a permit (16 bytes in
    /// every connection's task) but given back by [`Admitted`]'s drop.
    permits: Semaphore,
    by_address: Mutex<HashMap<IpAddr, usize, RandomState>>,
    protocol: Protocol,
    metrics: Arc<Metrics>,
    /// Second (since the epoch) of the last refusal logged.
    last_logged: AtomicU64,
    /// Refusals since the last line logged.
    unlogged: AtomicU64,
}

/// A connection that was let in. Dropping it frees its slots.
pub struct Admitted {
    admission: Arc<Admission>,
    address: IpAddr,
}

impl Admitted {
    /// The connection is served: it counts as accepted, and as open in its protocol's gauge
    /// until the result is dropped. One guard for both, so that the task of every connection
    /// keeps one handle on the listener rather than one for admission and one for the metrics.
    pub fn open(self) -> OpenConnection {
        self.admission.metrics.protocol(self.admission.protocol).connection_opened();
        OpenConnection(self)
    }
}

/// An admitted connection being served (see [`Admitted::open`]). Dropping it ends it in the
/// open-connections gauge and frees its slots.
pub struct OpenConnection(Admitted);

impl OpenConnection {
    /// Counts why the connection closed, in its protocol's close-reason series.
    pub fn closed(&self, reason: CloseReason) {
        let admission = &self.0.admission;
        admission.metrics.protocol(admission.protocol).closed(reason);
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        let admission = &self.0.admission;
        admission.metrics.protocol(admission.protocol).connection_ended();
    }
}

impl Admission {
    /// Admission for a listener of `protocol`, counting refusals into `metrics`.
    pub fn new(limits: ConnectionLimits, protocol: Protocol, metrics: Arc<Metrics>) -> Arc<Self> {
        let limits = ConnectionLimits {
            max_connections: limits.max_connections.max(1),
            max_per_address: limits.max_per_address.max(1),
        };
        Arc::new(Admission {
            limits,
            permits: Semaphore::new(limits.max_connections),
            by_address: Mutex::default(),
            protocol,
            metrics,
            last_logged: AtomicU64::new(0),
            unlogged: AtomicU64::new(0),
        })
    }

    /// Lets a connection from `address` in, or says why not (and counts and logs it).
    pub fn admit(self: &Arc<Self>, address: IpAddr) -> Option<Admitted> {
        let Ok(permit) = self.permits.try_acquire() else {
            self.refused(address, "connection limit of the listener reached");
            return None;
        };
        {
            let mut by_address = self.by_address.lock().unwrap_or_else(|e| e.into_inner());
            let open = by_address.entry(address).or_default();
            if *open >= self.limits.max_per_address {
                drop(by_address);
                self.refused(address, "connection limit per address reached");
                return None;
            }
            *open += 1;
        }
        // Given back by `Admitted`'s drop.
        permit.forget();
        Some(Admitted { admission: self.clone(), address })
    }

    fn refused(&self, address: IpAddr, why: &'static str) {
        self.metrics.protocol(self.protocol).connections_refused.fetch_add(1, Relaxed);
        let unlogged = self.unlogged.fetch_add(1, Relaxed) + 1;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if self.last_logged.swap(now, Relaxed) != now {
            self.unlogged.store(0, Relaxed);
            tracing::warn!(
                protocol = %self.protocol,
                peer = %address,
                max_connections = self.limits.max_connections,
                max_per_address = self.limits.max_per_address,
                refused = unlogged,
                "{why}; closing new connections"
            );
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        {
            let mut by_address = self.admission.by_address.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(open) = by_address.get_mut(&self.address) {
                *open -= 1;
                if *open == 0 {
                    by_address.remove(&self.address);
                }
            }
        }
        self.admission.permits.add_permits(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_address_cannot_take_every_slot() {
        let metrics = Arc::new(Metrics::new());
        let limits = ConnectionLimits { max_connections: 3, max_per_address: 2 };
        let admission = Admission::new(limits, Protocol::Amqp, metrics.clone());
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = admission.admit(a).unwrap();
        let _second = admission.admit(a).unwrap();
        assert!(admission.admit(a).is_none(), "per-address limit");
        let _other = admission.admit(b).unwrap();
        assert!(admission.admit(b).is_none(), "listener limit");
        drop(first);
        assert!(admission.admit(a).is_some(), "a closed connection frees both slots");
        assert_eq!(metrics.protocol(Protocol::Amqp).connections_refused.load(Relaxed), 2);
    }

    #[test]
    fn an_open_connection_is_in_the_gauge_until_dropped() {
        let metrics = Arc::new(Metrics::new());
        let limits = ConnectionLimits { max_connections: 1, max_per_address: 1 };
        let admission = Admission::new(limits, Protocol::Stomp, metrics.clone());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let open = admission.admit(a).unwrap().open();
        let counters = metrics.protocol(Protocol::Stomp);
        assert_eq!(counters.connections_open.load(Relaxed), 1);
        assert_eq!(counters.connections_accepted.load(Relaxed), 1);
        assert!(admission.admit(a).is_none(), "the open connection holds its slot");
        open.closed(CloseReason::ClientClosed);
        drop(open);
        assert_eq!(counters.connections_open.load(Relaxed), 0);
        assert_eq!(counters.closed_count(CloseReason::ClientClosed), 1);
        assert!(admission.admit(a).is_some(), "its slot is free again");
    }
}
