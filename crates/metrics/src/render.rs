//! Exposition: Prometheus text format for scrapers, percentile rows for people and dashboards.

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use serde::Serialize;

use crate::histogram::HistogramSnapshot;
use crate::labels::{CloseReason, Denial, DropReason, Encoding, Hop, MemoryKind, Protocol};
use crate::registry::Metrics;

/// Prometheus bucket boundaries are the powers of two from 2^10 ns (1.024 µs) to 2^35 ns
/// (34.4 s): they coincide with internal bucket edges, so every `le` count is exact.
const LE_EXPONENTS: std::ops::RangeInclusive<u32> = 10..=35;

/// Percentiles of one (hop, in, out) histogram, in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyRow {
    /// Which leg of the trip.
    pub hop: Hop,
    /// Publisher's protocol.
    #[serde(rename = "in")]
    pub from: Protocol,
    /// Subscriber's protocol.
    #[serde(rename = "out")]
    pub to: Protocol,
    /// Number of samples.
    pub count: u64,
    /// Median, µs.
    pub p50: f64,
    /// 90th percentile, µs.
    pub p90: f64,
    /// 99th percentile, µs.
    pub p99: f64,
    /// 99.9th percentile, µs.
    pub p999: f64,
    /// Largest sample, µs.
    pub max: f64,
}

/// The body of `GET /api/latency`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyReport {
    /// Always `"microseconds"`; stated so dashboards need not guess.
    pub unit: &'static str,
    /// One row per (hop, in, out) combination that has seen traffic.
    pub rows: Vec<LatencyRow>,
}

fn micros(nanos: u64) -> f64 {
    nanos as f64 / 1000.0
}

fn seconds(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

impl Metrics {
    fn used_histograms(&self) -> impl Iterator<Item = (Hop, Protocol, Protocol, HistogramSnapshot)> + '_ {
        Hop::ALL.iter().flat_map(move |&hop| {
            Protocol::ALL.iter().flat_map(move |&from| {
                Protocol::ALL
                    .iter()
                    .filter_map(move |&to| self.latency_if_used(hop, from, to).map(|h| (hop, from, to, h.snapshot())))
            })
        })
    }

    /// Percentiles for every combination that has seen traffic.
    pub fn latency_report(&self) -> LatencyReport {
        let rows = self
            .used_histograms()
            .filter(|(.., s)| s.count > 0)
            .map(|(hop, from, to, s)| {
                let q = |q| micros(s.quantile_nanos(q).unwrap_or(0));
                LatencyRow {
                    hop,
                    from,
                    to,
                    count: s.count,
                    p50: q(0.5),
                    p90: q(0.9),
                    p99: q(0.99),
                    p999: q(0.999),
                    max: micros(s.max_nanos),
                }
            })
            .collect();
        LatencyReport { unit: "microseconds", rows }
    }

    /// Everything in the Prometheus text exposition format (version 0.0.4).
    pub fn render_prometheus(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        self.render_latency(&mut out);
        self.render_counters(&mut out);
        self.bridges().render(&mut out);
        if let Some(cluster) = self.cluster() {
            cluster.render(&mut out);
        }
        out
    }

    fn render_latency(&self, out: &mut String) {
        out.push_str("# HELP tolk_hop_latency_seconds Time a message spends on each hop through the broker.\n");
        out.push_str("# TYPE tolk_hop_latency_seconds histogram\n");
        for (hop, from, to, s) in self.used_histograms() {
            let labels = format!("hop=\"{hop}\",in=\"{from}\",out=\"{to}\"");
            for exponent in LE_EXPONENTS {
                let le = seconds(1u64 << exponent);
                let count = s.count_below_power(exponent);
                let _ = writeln!(out, "tolk_hop_latency_seconds_bucket{{{labels},le=\"{le:e}\"}} {count}");
            }
            let _ = writeln!(out, "tolk_hop_latency_seconds_bucket{{{labels},le=\"+Inf\"}} {}", s.count);
            let _ = writeln!(out, "tolk_hop_latency_seconds_sum{{{labels}}} {}", seconds(s.sum_nanos));
            let _ = writeln!(out, "tolk_hop_latency_seconds_count{{{labels}}} {}", s.count);
        }
    }

    fn render_counters(&self, out: &mut String) {
        type Getter = fn(&crate::ProtocolCounters) -> i64;
        let simple: [(&str, &str, &str, Getter); 5] = [
            ("tolk_messages_in_total", "counter", "Messages accepted from publishers.", |c| {
                c.messages_in.load(Relaxed) as i64
            }),
            ("tolk_messages_out_total", "counter", "Messages written to subscribers.", |c| {
                c.messages_out.load(Relaxed) as i64
            }),
            ("tolk_connections", "gauge", "Connections open now.", |c| c.connections_open.load(Relaxed)),
            ("tolk_connections_accepted_total", "counter", "Connections accepted.", |c| {
                c.connections_accepted.load(Relaxed) as i64
            }),
            ("tolk_connections_refused_total", "counter", "Connections refused at the connection limit.", |c| {
                c.connections_refused.load(Relaxed) as i64
            }),
        ];
        for (name, kind, help, get) in simple {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for &p in Protocol::ALL {
                let _ = writeln!(out, "{name}{{protocol=\"{p}\"}} {}", get(self.protocol(p)));
            }
        }
        out.push_str("# HELP tolk_messages_dropped_total Messages not delivered, by reason.\n");
        out.push_str("# TYPE tolk_messages_dropped_total counter\n");
        for &p in Protocol::ALL {
            for &r in DropReason::ALL {
                let n = self.protocol(p).dropped_count(r);
                let _ = writeln!(out, "tolk_messages_dropped_total{{protocol=\"{p}\",reason=\"{r}\"}} {n}");
            }
        }
        out.push_str("# HELP tolk_memory_bytes Bytes held against the memory budget, by holder.\n");
        out.push_str("# TYPE tolk_memory_bytes gauge\n");
        for &k in MemoryKind::ALL {
            let _ = writeln!(out, "tolk_memory_bytes{{kind=\"{k}\"}} {}", self.memory().held(k));
        }
        out.push_str("# HELP tolk_memory_limit_bytes The memory budget ([core] memory_budget_bytes).\n");
        out.push_str("# TYPE tolk_memory_limit_bytes gauge\n");
        let _ = writeln!(out, "tolk_memory_limit_bytes {}", self.memory().limit.load(Relaxed));
        out.push_str("# HELP tolk_connections_closed_total Connections closed, by reason.\n");
        out.push_str("# TYPE tolk_connections_closed_total counter\n");
        for &p in Protocol::ALL {
            for &r in CloseReason::ALL {
                let n = self.protocol(p).closed_count(r);
                let _ = writeln!(out, "tolk_connections_closed_total{{protocol=\"{p}\",reason=\"{r}\"}} {n}");
            }
        }
        out.push_str("# HELP tolk_acl_denied_total Operations the access-control list refused, by what was asked.\n");
        out.push_str("# TYPE tolk_acl_denied_total counter\n");
        for &p in Protocol::ALL {
            for &d in Denial::ALL {
                let n = self.protocol(p).denied_count(d);
                let _ = writeln!(out, "tolk_acl_denied_total{{protocol=\"{p}\",operation=\"{d}\"}} {n}");
            }
        }
        out.push_str(
            "# HELP tolk_transcode_total Payloads re-encoded for subscribers ([[transcode]]), by target \
             format; failed ones went out as published.\n",
        );
        out.push_str("# TYPE tolk_transcode_total counter\n");
        for &e in Encoding::ALL {
            let (converted, failed) = self.transcode_counts(e);
            let _ = writeln!(out, "tolk_transcode_total{{to=\"{e}\",result=\"converted\"}} {converted}");
            let _ = writeln!(out, "tolk_transcode_total{{to=\"{e}\",result=\"failed\"}} {failed}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn prometheus_histogram_has_cumulative_buckets_sum_and_count() {
        let m = Metrics::new();
        m.record(Hop::EndToEnd, Protocol::Mqtt, Protocol::Stomp, Duration::from_nanos(1500));
        m.record(Hop::EndToEnd, Protocol::Mqtt, Protocol::Stomp, Duration::from_millis(3));
        let text = m.render_prometheus();
        let labels = "hop=\"end_to_end\",in=\"mqtt\",out=\"stomp\"";
        assert!(text.contains(&format!("tolk_hop_latency_seconds_bucket{{{labels},le=\"1.024e-6\"}} 0")), "{text}");
        assert!(text.contains(&format!("tolk_hop_latency_seconds_bucket{{{labels},le=\"2.048e-6\"}} 1")));
        assert!(text.contains(&format!("tolk_hop_latency_seconds_bucket{{{labels},le=\"+Inf\"}} 2")));
        assert!(text.contains(&format!("tolk_hop_latency_seconds_count{{{labels}}} 2")));
        assert!(text.contains(&format!("tolk_hop_latency_seconds_sum{{{labels}}} 0.0030015")));
        assert!(text.contains("# TYPE tolk_hop_latency_seconds histogram"));
        assert!(text.contains("tolk_messages_dropped_total{protocol=\"mqtt\",reason=\"outbox_full\"} 0"));
    }

    #[test]
    fn latency_report_lists_only_used_pairs_in_microseconds() {
        let m = Metrics::new();
        m.record(Hop::Queue, Protocol::Amqp, Protocol::Wsn, Duration::from_micros(100));
        let report = m.latency_report();
        assert_eq!(report.rows.len(), 1);
        let row = &report.rows[0];
        assert_eq!((row.hop, row.from, row.to, row.count), (Hop::Queue, Protocol::Amqp, Protocol::Wsn, 1));
        assert_eq!(row.max, 100.0);
        assert!((row.p50 - 100.0).abs() <= 100.0 * 0.0625);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["rows"][0]["in"], "amqp");
        assert_eq!(json["rows"][0]["hop"], "queue");
        // JSON and Prometheus spell labels the same way (MqttSn is `mqttsn`, not `mqtt_sn`).
        m.record(Hop::EndToEnd, Protocol::MqttSn, Protocol::Wsn, Duration::from_micros(1));
        let json = serde_json::to_value(m.latency_report()).unwrap();
        let row = json["rows"].as_array().unwrap().iter().find(|r| r["hop"] == "end_to_end").unwrap().clone();
        assert_eq!((row["in"].as_str(), row["out"].as_str()), (Some("mqttsn"), Some("wsn")));
    }
}
