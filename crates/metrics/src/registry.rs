//! The broker-wide metrics registry: arrays of atomics indexed by closed label sets.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::bridges::Bridges;
use crate::cluster::ClusterCounters;
use crate::histogram::LatencyHistogram;
use crate::labels::{CloseReason, Denial, DropReason, Encoding, Hop, MemoryKind, Protocol};

const P: usize = Protocol::COUNT;

/// Counters kept per protocol.
#[derive(Default)]
pub struct ProtocolCounters {
    /// Messages accepted from publishers on this protocol.
    pub messages_in: AtomicU64,
    /// Messages written to subscribers on this protocol.
    pub messages_out: AtomicU64,
    /// Connections (or MQTT-SN peers, or WS-N subscriptions) open right now.
    pub connections_open: AtomicI64,
    /// Connections accepted since start.
    pub connections_accepted: AtomicU64,
    /// Connections refused at accept time (connection limit reached).
    pub connections_refused: AtomicU64,
    closed: [AtomicU64; CloseReason::COUNT],
    dropped: [AtomicU64; DropReason::COUNT],
    denied: [AtomicU64; Denial::COUNT],
}

impl ProtocolCounters {
    /// Counts one connection accepted and open. Pair it with [`ProtocolCounters::connection_ended`];
    /// [`Metrics::connection_opened`] gives a guard that does.
    pub fn connection_opened(&self) {
        self.connections_accepted.fetch_add(1, Relaxed);
        self.connections_open.fetch_add(1, Relaxed);
    }

    /// Counts one connection no longer open (its reason is counted by [`ProtocolCounters::closed`]).
    pub fn connection_ended(&self) {
        self.connections_open.fetch_sub(1, Relaxed);
    }

    /// Counts one connection closed for `reason`.
    pub fn closed(&self, reason: CloseReason) {
        self.closed[reason.index()].fetch_add(1, Relaxed);
    }

    /// Counts `n` messages not delivered for `reason`.
    pub fn dropped(&self, reason: DropReason, n: u64) {
        self.dropped[reason.index()].fetch_add(n, Relaxed);
    }

    /// Counts one operation the access-control list refused.
    pub fn denied(&self, what: Denial) {
        self.denied[what.index()].fetch_add(1, Relaxed);
    }

    /// Operations refused for `what` so far.
    pub fn denied_count(&self, what: Denial) -> u64 {
        self.denied[what.index()].load(Relaxed)
    }

    /// Connections closed for `reason` so far.
    pub fn closed_count(&self, reason: CloseReason) -> u64 {
        self.closed[reason.index()].load(Relaxed)
    }

    /// Messages dropped for `reason` so far.
    pub fn dropped_count(&self, reason: DropReason) -> u64 {
        self.dropped[reason.index()].load(Relaxed)
    }
}

/// All of the broker's metrics. One instance is shared (by `Arc`) by every task.
///
/// Latency histograms are allocated the first time a (hop, in, out) combination is recorded,
/// so a gateway that only ever sees MQTT pays for four histograms, not 144.
pub struct Metrics {
    latency: Box<[OnceLock<Box<LatencyHistogram>>]>,
    protocols: [ProtocolCounters; P],
    memory: MemoryGauges,
    bridges: Bridges,
    cluster: OnceLock<Arc<ClusterCounters>>,
    /// Payloads re-encoded, by target format: `[converted, failed]`.
    transcodes: [[AtomicU64; 2]; Encoding::COUNT],
}

/// Bytes held against the broker's memory budget, by holder. The budget itself (its limit and
/// policy) lives in the core; the counts live here so that `/metrics` shows them.
#[derive(Default)]
pub struct MemoryGauges {
    held: [AtomicUsize; MemoryKind::COUNT],
    /// The configured budget, in bytes (0 until the core sets it).
    pub limit: AtomicUsize,
}

impl MemoryGauges {
    /// Bytes held by `kind` now.
    pub fn held(&self, kind: MemoryKind) -> usize {
        self.held[kind.index()].load(Relaxed)
    }

    /// Bytes held by every kind together.
    pub fn total(&self) -> usize {
        self.held.iter().map(|h| h.load(Relaxed)).sum()
    }

    /// Counts `bytes` more held by `kind`.
    #[inline]
    pub fn add(&self, kind: MemoryKind, bytes: usize) {
        self.held[kind.index()].fetch_add(bytes, Relaxed);
    }

    /// Counts `bytes` released by `kind`.
    #[inline]
    pub fn sub(&self, kind: MemoryKind, bytes: usize) {
        self.held[kind.index()].fetch_sub(bytes, Relaxed);
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// An empty registry.
    pub fn new() -> Self {
        Self {
            latency: (0..Hop::COUNT * P * P).map(|_| OnceLock::new()).collect(),
            protocols: Default::default(),
            memory: MemoryGauges::default(),
            bridges: Bridges::default(),
            cluster: OnceLock::new(),
            transcodes: Default::default(),
        }
    }

    fn slot(hop: Hop, from: Protocol, to: Protocol) -> usize {
        (hop.index() * P + from.index()) * P + to.index()
    }

    /// The bridges to other brokers.
    pub fn bridges(&self) -> &Bridges {
        &self.bridges
    }

    /// Registers the cluster (`[cluster]`) under this node's name; once.
    pub fn register_cluster(&self, node: &str) -> Arc<ClusterCounters> {
        self.cluster
            .get_or_init(|| Arc::new(ClusterCounters { node: node.to_owned(), ..ClusterCounters::default() }))
            .clone()
    }

    /// The cluster's counters, when this node is part of one.
    pub fn cluster(&self) -> Option<&Arc<ClusterCounters>> {
        self.cluster.get()
    }

    /// The histogram for one hop of messages going from `from` publishers to `to` subscribers.
    #[inline]
    pub fn latency(&self, hop: Hop, from: Protocol, to: Protocol) -> &LatencyHistogram {
        self.latency[Self::slot(hop, from, to)].get_or_init(Default::default)
    }

    /// Records one latency sample.
    #[inline]
    pub fn record(&self, hop: Hop, from: Protocol, to: Protocol, latency: Duration) {
        self.latency(hop, from, to).record(latency);
    }

    /// The histogram for a combination if anything was ever recorded there.
    pub fn latency_if_used(&self, hop: Hop, from: Protocol, to: Protocol) -> Option<&LatencyHistogram> {
        self.latency[Self::slot(hop, from, to)].get().map(|b| &**b)
    }

    /// Counts one payload re-encoded into `to`, or (`converted` false) one that could not be
    /// and went out as published.
    pub fn transcoded(&self, to: Encoding, converted: bool) {
        self.transcodes[to.index()][usize::from(!converted)].fetch_add(1, Relaxed);
    }

    /// Payloads re-encoded into `to` so far: `(converted, failed)`.
    pub fn transcode_counts(&self, to: Encoding) -> (u64, u64) {
        let [ok, failed] = &self.transcodes[to.index()];
        (ok.load(Relaxed), failed.load(Relaxed))
    }

    /// Bytes held against the memory budget.
    #[inline]
    pub fn memory(&self) -> &MemoryGauges {
        &self.memory
    }

    /// Per-protocol counters.
    #[inline]
    pub fn protocol(&self, protocol: Protocol) -> &ProtocolCounters {
        &self.protocols[protocol.index()]
    }

    /// Marks a connection as opened; the returned guard marks it closed when dropped, so an
    /// early return or a panic in a connection task cannot leak the gauge. The guard owns its
    /// handle on the metrics, so it can travel with a spawned task.
    pub fn connection_opened(self: &Arc<Self>, protocol: Protocol) -> ConnectionGauge {
        self.protocol(protocol).connection_opened();
        ConnectionGauge { metrics: self.clone(), protocol }
    }
}

/// Decrements the open-connections gauge when dropped. See [`Metrics::connection_opened`].
pub struct ConnectionGauge {
    metrics: Arc<Metrics>,
    protocol: Protocol,
}

impl ConnectionGauge {
    /// Counts why the connection closed, in the protocol's close-reason series.
    pub fn closed(&self, reason: CloseReason) {
        self.metrics.protocol(self.protocol).closed(reason);
    }
}

impl Drop for ConnectionGauge {
    fn drop(&mut self) {
        self.metrics.protocol(self.protocol).connection_ended();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_allocated_on_first_use_only() {
        let m = Metrics::new();
        assert!(m.latency_if_used(Hop::Queue, Protocol::Mqtt, Protocol::Stomp).is_none());
        m.record(Hop::Queue, Protocol::Mqtt, Protocol::Stomp, Duration::from_micros(3));
        let h = m.latency_if_used(Hop::Queue, Protocol::Mqtt, Protocol::Stomp).unwrap();
        assert_eq!(h.snapshot().count, 1);
        assert!(m.latency_if_used(Hop::Queue, Protocol::Stomp, Protocol::Mqtt).is_none());
    }

    #[test]
    fn connection_gauge_follows_guard_lifetime() {
        let m = Arc::new(Metrics::new());
        let guard = m.connection_opened(Protocol::Amqp);
        assert_eq!(m.protocol(Protocol::Amqp).connections_open.load(Relaxed), 1);
        drop(guard);
        assert_eq!(m.protocol(Protocol::Amqp).connections_open.load(Relaxed), 0);
        assert_eq!(m.protocol(Protocol::Amqp).connections_accepted.load(Relaxed), 1);
    }
}
