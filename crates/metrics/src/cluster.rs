//! The cluster's state (`[cluster]`): whether this node is connected to NATS, what waits to
//! go there, and how far behind its JetStream consumer is. Shown on `/metrics`,
//! `/api/cluster` and `/healthz`.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};

use serde::Serialize;

use crate::bridges::SpoolGauge;

/// The cluster's counters, shared by its task and the exposition.
#[derive(Default)]
pub struct ClusterCounters {
    /// This node's name in the cluster.
    pub node: String,
    /// Connected to NATS, with the stream, bucket and consumer in place.
    pub up: AtomicBool,
    /// Messages from other nodes published here.
    pub messages_in: AtomicU64,
    /// Messages sent to NATS (at least once: acknowledged by JetStream).
    pub messages_out: AtomicU64,
    /// Connections made to NATS since start.
    pub connects: AtomicU64,
    /// At-least-once messages in the stream that this node's consumer has not taken yet.
    pub lag: AtomicU64,
    /// NATS subjects subscribed for this node's local interest.
    pub subjects: AtomicU64,
    /// What the outgoing queue holds, read when shown.
    pub spool: OnceLock<SpoolGauge>,
    /// How many named queues clients declared on this node, read when shown: they are
    /// node-local (their consumers do not compete across nodes).
    pub local_queues: OnceLock<Box<dyn Fn() -> u64 + Send + Sync>>,
    /// Why the last connection attempt failed or the last connection ended.
    pub last_error: Mutex<Option<String>>,
    /// The NATS server connected to now: its name and address.
    pub server: Mutex<Option<String>>,
}

/// The cluster's state as `/api/cluster` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterStatus {
    /// This node's name.
    pub node: String,
    /// `"up"`, or `"down"` (routing is local only; at-least-once messages wait in the spool).
    pub state: &'static str,
    /// Messages from other nodes.
    pub messages_in: u64,
    /// Messages sent to NATS.
    pub messages_out: u64,
    /// Connections made since start.
    pub connects: u64,
    /// Stream messages not yet taken by this node.
    pub lag_messages: u64,
    /// NATS subjects subscribed.
    pub subjects: u64,
    /// Messages waiting to go to NATS.
    pub spool_messages: u64,
    /// Bytes waiting to go to NATS.
    pub spool_bytes: u64,
    /// Named queues on this node, which stay node-local.
    pub local_queues: u64,
    /// The last failure, if any.
    pub last_error: Option<String>,
    /// The NATS server connected to (`name host:port`), while up.
    pub server: Option<String>,
}

impl ClusterCounters {
    /// A snapshot.
    pub fn status(&self) -> ClusterStatus {
        let (spool_messages, spool_bytes) = self.spool.get().map_or((0, 0), |read| read());
        ClusterStatus {
            node: self.node.clone(),
            state: if self.up.load(Relaxed) { "up" } else { "down" },
            messages_in: self.messages_in.load(Relaxed),
            messages_out: self.messages_out.load(Relaxed),
            connects: self.connects.load(Relaxed),
            lag_messages: self.lag.load(Relaxed),
            subjects: self.subjects.load(Relaxed),
            spool_messages,
            spool_bytes,
            local_queues: self.local_queues.get().map_or(0, |read| read()),
            last_error: self.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            server: self.server.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }

    /// Prometheus text.
    pub(crate) fn render(&self, out: &mut String) {
        let s = self.status();
        let series: [(&str, &str, &str, u64); 8] = [
            (
                "tolk_cluster_up",
                "gauge",
                "1 while this node is connected to the cluster's NATS.",
                u64::from(s.state == "up"),
            ),
            ("tolk_cluster_messages_in_total", "counter", "Messages from other nodes published here.", s.messages_in),
            ("tolk_cluster_messages_out_total", "counter", "Messages sent to NATS.", s.messages_out),
            ("tolk_cluster_connects_total", "counter", "Connections made to NATS.", s.connects),
            ("tolk_cluster_lag_messages", "gauge", "Stream messages this node has not taken yet.", s.lag_messages),
            ("tolk_cluster_subjects", "gauge", "NATS subjects subscribed for local interest.", s.subjects),
            ("tolk_cluster_spool_messages", "gauge", "Messages waiting to go to NATS.", s.spool_messages),
            ("tolk_cluster_spool_bytes", "gauge", "Bytes waiting to go to NATS.", s.spool_bytes),
        ];
        for (name, kind, help, value) in series {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        }
        let name = "tolk_cluster_queues";
        let help = "Named queues (AMQP, STOMP /queue/, $share) on this node; they are not shared across nodes.";
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{scope=\"node\"}} {}", s.local_queues);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_state_and_gauges() {
        let c = ClusterCounters { node: "n1".into(), ..ClusterCounters::default() };
        c.up.store(true, Relaxed);
        c.lag.store(7, Relaxed);
        let mut out = String::new();
        c.render(&mut out);
        assert!(out.contains("tolk_cluster_up 1\n"), "{out}");
        assert!(out.contains("tolk_cluster_lag_messages 7\n"));
        assert!(out.contains("tolk_cluster_queues{scope=\"node\"} 0\n"));
        assert_eq!(c.status().state, "up");
    }
}
