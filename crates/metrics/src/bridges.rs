//! Counters of the bridges to other brokers (`[[bridge]]`). Unlike protocols, bridges are named
//! by the configuration, so they are registered at start, each with its own counters.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};

use serde::Serialize;

/// Reads what a bridge's spool holds now: (messages, bytes).
pub type SpoolGauge = Box<dyn Fn() -> (u64, u64) + Send + Sync>;

/// One bridge's counters, shared by its task and the exposition.
#[derive(Default)]
pub struct BridgeCounters {
    /// The configured name.
    pub name: String,
    /// The remote broker's kind (`mqtt`, `amqp`, `wsn`).
    pub kind: String,
    /// Connected to the remote and passing messages.
    pub up: AtomicBool,
    /// Messages taken from the remote and published here.
    pub messages_in: AtomicU64,
    /// Messages the remote acknowledged (or, at QoS 0, was sent).
    pub messages_out: AtomicU64,
    /// Connections made to the remote since start.
    pub connects: AtomicU64,
    /// What the spool holds, read when shown (none: the bridge sends nothing out).
    pub spool: OnceLock<SpoolGauge>,
    /// Why the last connection attempt failed or the last connection ended.
    pub last_error: Mutex<Option<String>>,
}

/// A bridge's state as `/api/bridges` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BridgeStatus {
    /// The configured name.
    pub name: String,
    /// The remote broker's kind.
    pub kind: String,
    /// `"up"` or `"down"`.
    pub state: &'static str,
    /// Messages taken from the remote.
    pub messages_in: u64,
    /// Messages the remote acknowledged.
    pub messages_out: u64,
    /// Connections made since start.
    pub connects: u64,
    /// Bytes waiting in the spool.
    pub spool_bytes: u64,
    /// Messages waiting in the spool.
    pub spool_messages: u64,
    /// The last failure, if any.
    pub last_error: Option<String>,
}

impl BridgeCounters {
    /// A snapshot for `/api/bridges`.
    pub fn status(&self) -> BridgeStatus {
        let (spool_messages, spool_bytes) = self.spool.get().map_or((0, 0), |read| read());
        BridgeStatus {
            name: self.name.clone(),
            kind: self.kind.clone(),
            state: if self.up.load(Relaxed) { "up" } else { "down" },
            messages_in: self.messages_in.load(Relaxed),
            messages_out: self.messages_out.load(Relaxed),
            connects: self.connects.load(Relaxed),
            spool_bytes,
            spool_messages,
            last_error: self.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }
}

/// Every registered bridge, in registration order.
#[derive(Default)]
pub struct Bridges {
    list: Mutex<Vec<Arc<BridgeCounters>>>,
}

impl Bridges {
    /// Registers a bridge; its counters start at zero and down.
    pub fn register(&self, name: &str, kind: &str) -> Arc<BridgeCounters> {
        let counters =
            Arc::new(BridgeCounters { name: name.to_owned(), kind: kind.to_owned(), ..BridgeCounters::default() });
        self.list.lock().unwrap_or_else(|e| e.into_inner()).push(counters.clone());
        counters
    }

    /// The state of every bridge.
    pub fn statuses(&self) -> Vec<BridgeStatus> {
        self.list.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|b| b.status()).collect()
    }

    /// Prometheus text for every bridge (nothing when none is configured).
    pub(crate) fn render(&self, out: &mut String) {
        let statuses = self.statuses();
        if statuses.is_empty() {
            return;
        }
        type Getter = fn(&BridgeStatus) -> u64;
        let series: [(&str, &str, &str, Getter); 6] = [
            ("tolk_bridge_up", "gauge", "1 while the bridge is connected to its remote.", |s| {
                u64::from(s.state == "up")
            }),
            ("tolk_bridge_messages_in_total", "counter", "Messages taken from the remote.", |s| s.messages_in),
            ("tolk_bridge_messages_out_total", "counter", "Messages the remote acknowledged.", |s| s.messages_out),
            ("tolk_bridge_connects_total", "counter", "Connections made to the remote.", |s| s.connects),
            ("tolk_bridge_spool_bytes", "gauge", "Bytes waiting in the spool for the remote.", |s| s.spool_bytes),
            ("tolk_bridge_spool_messages", "gauge", "Messages waiting in the spool for the remote.", |s| {
                s.spool_messages
            }),
        ];
        for (name, kind, help, get) in series {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for s in &statuses {
                let _ = writeln!(out, "{name}{{bridge=\"{}\",kind=\"{}\"}} {}", escape(&s.name), s.kind, get(s));
            }
        }
    }
}

/// A label value with `\`, `"` and newlines escaped (Prometheus text format).
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_bridges_render_with_their_names() {
        let bridges = Bridges::default();
        let mut out = String::new();
        bridges.render(&mut out);
        assert!(out.is_empty(), "nothing without bridges");
        let b = bridges.register("up\"link", "mqtt");
        b.up.store(true, Relaxed);
        b.messages_out.fetch_add(3, Relaxed);
        bridges.render(&mut out);
        assert!(out.contains("tolk_bridge_up{bridge=\"up\\\"link\",kind=\"mqtt\"} 1"), "{out}");
        assert!(out.contains("tolk_bridge_messages_out_total{bridge=\"up\\\"link\",kind=\"mqtt\"} 3"));
        assert_eq!(bridges.statuses()[0].state, "up");
    }
}
