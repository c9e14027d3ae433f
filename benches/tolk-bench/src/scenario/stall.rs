//! The retained stall (hardening issue): with many retained messages stored (100,000 by
//! default), a new client subscribes to `#` and is sent all of them, while a probe (one
//! publisher and one subscriber at a steady rate, QoS 0, on a topic of their own) measures what
//! the broker's other clients see. The probe's latency is reported before, during and after
//! the `#` subscription; each probe message belongs to the phase in which it was due.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use super::attack::{Run, offer_mqtt};
use crate::cli::StallArgs;
use crate::clock::Clock;
use crate::payload::Stamp;
use crate::proto::mqtt::{MqttConnector, MqttPublisher};
use crate::proto::{Connector, Protocol, Publisher, Qos, Subscription};
use crate::recorder::{Recorder, latency_histogram};
use crate::report::LatencySummary;

/// Deliveries the probe subscriber may hold between its client and the record.
const PROBE_BUFFER: usize = 1024;

/// Deliveries the `#` subscriber may hold; it records as fast as it reads.
const FLOOD_BUFFER: usize = 4096;

/// How long the `#` subscriber waits for its first retained message: the broker may take a
/// while to collect 100,000 of them, and that wait is part of what is measured.
const FIRST_RETAINED_WAIT: Duration = Duration::from_secs(60);

/// The probe's figures for one phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Phase {
    /// `before`, `during` or `after` the retained flood.
    pub name: String,
    /// Probe messages due in this phase.
    pub sent: u64,
    /// Of those, received.
    pub received: u64,
    /// `sent − received`.
    pub lost: u64,
    /// Latency from the send time, in microseconds.
    pub latency_us: Option<LatencySummary>,
    /// Latency from the time each message was due (adds a held-back publisher's wait).
    pub latency_from_due_us: Option<LatencySummary>,
}

/// One run of the retained stall against one broker.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StallReport {
    /// Row name.
    pub case: String,
    /// Which broker (`--label`).
    pub label: String,
    /// The target URL.
    pub target: String,
    /// Retained messages published.
    pub retained: u64,
    /// Of those, acknowledged (QoS 1).
    pub retained_acked: u64,
    /// Time to publish them all and have them acknowledged, in seconds.
    pub fill_secs: f64,
    /// Probe rate, messages/s.
    pub probe_rate: f64,
    /// QoS of the `#` subscription.
    pub flood_qos: u8,
    /// From SUBSCRIBE to SUBACK, in milliseconds.
    pub suback_ms: f64,
    /// Distinct retained messages the `#` subscriber received.
    pub flood_received: u64,
    /// From SUBSCRIBE to the last of them, in seconds.
    pub flood_secs: f64,
    /// Why the broker closed the `#` subscriber, if it did.
    pub flood_closed: Option<String>,
    /// The probe before, during and after the flood.
    pub phases: Vec<Phase>,
    /// Broker RSS before the probe started and its peak (VmHWM) at the end, in KiB.
    pub rss_start_kib: u64,
    /// See `rss_start_kib`.
    pub hwm_kib: u64,
    /// Errors met.
    pub errors: Vec<String>,
}

impl StallReport {
    /// The report for a terminal.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "retained-stall against {} ({}), case {}", self.label, self.target, self.case);
        let _ = writeln!(
            out,
            "  store     {} retained published, {} acknowledged, in {:.1} s",
            self.retained, self.retained_acked, self.fill_secs
        );
        let _ = writeln!(
            out,
            "  `#`       QoS {}: SUBACK after {:.1} ms; {} retained received in {:.2} s{}",
            self.flood_qos,
            self.suback_ms,
            self.flood_received,
            self.flood_secs,
            self.flood_closed.as_deref().map(|r| format!("; closed by broker: {r}")).unwrap_or_default()
        );
        for p in &self.phases {
            let _ = writeln!(
                out,
                "  probe     {:<6} {}/{} received, lost {}; µs p50/p99/max {}; from due time {}",
                p.name,
                p.received,
                p.sent,
                p.lost,
                percentiles(p.latency_us.as_ref(), 1.0),
                percentiles(p.latency_from_due_us.as_ref(), 1.0)
            );
        }
        let _ = writeln!(
            out,
            "  broker    RSS {:.1} MiB before the probe, peak {:.1} MiB",
            self.rss_start_kib as f64 / 1024.0,
            self.hwm_kib as f64 / 1024.0
        );
        for e in &self.errors {
            let _ = writeln!(out, "  error     {e}");
        }
        out
    }

    /// The Markdown table header and this report's row.
    pub fn row(&self) -> (&'static str, String) {
        const HEADER: &str = "| case | broker | retained acknowledged | `#` received / took s | probe p50 / p99 / max ms: before | during | after | during, from due time: p99 / max ms | probe lost: before / during / after |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
        let phase = |name: &str| self.phases.iter().find(|p| p.name == name);
        let cell = |name: &str| percentiles(phase(name).and_then(|p| p.latency_us.as_ref()), 1000.0);
        let due = phase("during").and_then(|p| p.latency_from_due_us);
        let due = due.map_or("–".to_string(), |l| format!("{:.1} / {:.1}", l.p99 as f64 / 1e3, l.max as f64 / 1e3));
        let lost = |name: &str| phase(name).map_or("–".to_string(), |p| p.lost.to_string());
        let row = format!(
            "| {} | {} | {} | {} / {:.2}{} | {} | {} | {} | {} | {} / {} / {} |",
            self.case,
            self.label,
            self.retained_acked,
            self.flood_received,
            self.flood_secs,
            if self.flood_closed.is_some() { " (closed)" } else { "" },
            cell("before"),
            cell("during"),
            cell("after"),
            due,
            lost("before"),
            lost("during"),
            lost("after"),
        );
        (HEADER, row)
    }
}

/// `p50 / p99 / max` of a summary in µs, divided by `unit` (1 for µs, 1000 for ms).
fn percentiles(l: Option<&LatencySummary>, unit: f64) -> String {
    let Some(l) = l else { return "–".to_string() };
    let digits = if unit > 1.0 { 2 } else { 0 };
    let f = |v: u64| format!("{:.*}", digits, v as f64 / unit);
    format!("{} / {} / {}", f(l.p50), f(l.p99), f(l.max))
}

/// Publishes one probe message every `1/rate` s until stopped; returns the publisher and the
/// time each message was due (index = sequence number).
async fn probe_publish(
    mut publisher: MqttPublisher,
    topic: String,
    rate: f64,
    clock: Clock,
    payload: usize,
    mut stop: watch::Receiver<bool>,
) -> (MqttPublisher, Vec<u64>, Option<String>) {
    let mut interval = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    // Missed sends go out at once, stamped with when they were due: a broker that holds the
    // publisher back shows as latency from due time.
    interval.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut due = Vec::new();
    loop {
        let tick = tokio::select! {
            tick = interval.tick() => tick,
            _ = stop.changed() => break,
        };
        let due_ns = clock.ns_at(tick.into_std());
        let sent_ns = clock.now_ns();
        // Publisher 1: the retained messages are publisher 0.
        let body = Stamp { publisher: 1, seq: due.len() as u64, sent_ns, due_ns }.encode(payload);
        if let Err(e) = publisher.publish(&topic, body).await {
            return (publisher, due, Some(format!("probe publisher: {e:#}")));
        }
        due.push(due_ns);
    }
    (publisher, due, None)
}

/// Collects the probe's deliveries until every message sent arrived (`sent` says how many once
/// the publisher stopped) or none came for `drain`.
async fn probe_receive(
    mut sub: Subscription,
    mut sent: watch::Receiver<Option<u64>>,
    drain: Duration,
) -> (Subscription, Vec<(Stamp, u64)>) {
    let mut got = Vec::new();
    loop {
        let total = *sent.borrow_and_update();
        let next = match total {
            Some(n) if got.len() as u64 >= n => break,
            Some(_) => match tokio::time::timeout(drain, sub.deliveries.recv()).await {
                Ok(next) => next,
                Err(_) => break,
            },
            None => tokio::select! {
                next = sub.deliveries.recv() => next,
                _ = sent.changed() => continue,
            },
        };
        let Some(d) = next else { break };
        if let Some(stamp) = Stamp::decode(&d.payload) {
            got.push((stamp, d.received_ns));
        }
    }
    (sub, got)
}

/// The probe's figures for messages due in `[from, to)`.
fn phase(name: &str, due: &[u64], got: &[(Stamp, u64)], from: u64, to: u64) -> Phase {
    let inside = |t: u64| (from..to).contains(&t);
    let sent = due.iter().filter(|&&t| inside(t)).count() as u64;
    let mut seen = vec![false; due.len()];
    let (mut latency, mut from_due) = (latency_histogram(), latency_histogram());
    let mut received = 0;
    for (stamp, recv_ns) in got {
        let Some(slot) = seen.get_mut(stamp.seq as usize) else { continue };
        if !inside(stamp.due_ns) || std::mem::replace(slot, true) {
            continue;
        }
        received += 1;
        let micros = |from_ns: u64| recv_ns.saturating_sub(from_ns).div_ceil(1000).max(1);
        latency.saturating_record(micros(stamp.sent_ns));
        from_due.saturating_record(micros(stamp.due_ns));
    }
    Phase {
        name: name.to_string(),
        sent,
        received,
        lost: sent.saturating_sub(received),
        latency_us: LatencySummary::of(&latency),
        latency_from_due_us: LatencySummary::of(&from_due),
    }
}

/// Runs the retained stall.
pub async fn run(args: &StallArgs) -> Result<StallReport> {
    if args.target.protocol != Protocol::Mqtt {
        bail!("retained-stall needs an mqtt:// target");
    }
    if args.rate <= 0.0 {
        bail!("--rate must be above 0");
    }
    let run = Run::new(args.broker_pid, args.drain_ms, args.payload)?;
    let clock = run.clock;
    let mqtt = MqttConnector::new(&args.target, args.payload);
    let t = &args.target;
    let mut report = StallReport {
        case: args.report.case.clone().unwrap_or_else(|| "retained-stall".into()),
        label: args.report.label.clone(),
        target: format!("mqtt://{}:{}", t.host, t.port),
        retained: args.retained,
        probe_rate: args.rate,
        flood_qos: args.qos,
        ..StallReport::default()
    };

    let start = clock.now_ns();
    let retained_topic = |i: u64| run.topic(&format!("r/{}/{}", i / 1000, i % 1000));
    let offer = offer_mqtt(&run, &mqtt, Qos::AtLeastOnce, true, args.retained, retained_topic).await?;
    report.retained_acked = offer.accepted;
    report.fill_secs = (clock.now_ns() - start) as f64 / 1e9;
    report.errors.extend(offer.notes);
    report.rss_start_kib = run.sample().map_or(0, |s| s.rss_kib);

    let probe_topic = run.topic("probe");
    let probe_sub = mqtt.subscribe(run.client_id('s', 0), probe_topic.clone(), Qos::AtMostOnce, clock, PROBE_BUFFER);
    let probe_sub = probe_sub.await?;
    let probe_pub = mqtt.publisher(run.client_id('q', 0), Qos::AtMostOnce).await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let (sent_tx, sent_rx) = watch::channel(None);
    let sender = tokio::spawn(probe_publish(probe_pub, probe_topic, args.rate, clock, args.payload, stop_rx));
    let receiver = tokio::spawn(probe_receive(probe_sub, sent_rx, run.drain()));

    // The probe's undisturbed window.
    tokio::time::sleep(Duration::from_millis(args.before_ms)).await;
    let subscribe_ns = clock.now_ns();
    let flood = mqtt.subscribe(run.client_id('h', 0), "#".into(), Qos::from_level(args.qos)?, clock, FLOOD_BUFFER);
    let mut flood = flood.await?;
    report.suback_ms = (clock.now_ns() - subscribe_ns) as f64 / 1e6;
    // Retained messages are publisher 0; the probe's live messages (publisher 1) that `#` also
    // matches are counted as foreign.
    let mut rec = Recorder::new(vec![args.retained]);
    let mut deadline = Instant::now() + FIRST_RETAINED_WAIT;
    while !rec.complete() {
        match tokio::time::timeout_at(deadline, flood.deliveries.recv()).await {
            Ok(Some(d)) => {
                if rec.record(&d.payload, d.received_ns) {
                    deadline = Instant::now() + run.drain();
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
    let flood_end_ns = rec.last_recv_ns.unwrap_or_else(|| clock.now_ns());
    report.flood_received = rec.unique;
    report.flood_secs = (flood_end_ns - subscribe_ns) as f64 / 1e9;

    // The probe's window after the flood.
    tokio::time::sleep(Duration::from_millis(args.after_ms)).await;
    let _ = stop_tx.send(true);
    let (publisher, due, error) = sender.await?;
    report.errors.extend(error);
    let _ = sent_tx.send(Some(due.len() as u64));
    let (probe_sub, got) = receiver.await?;
    report.hwm_kib = run.sample().map_or(0, |s| s.hwm_kib);
    report.flood_closed = flood.close().await;
    for (what, closed) in [("probe subscriber", probe_sub.close().await), ("probe publisher", publisher.close().await)]
    {
        if let Some(reason) = closed {
            report.errors.push(format!("{what} closed by broker: {reason}"));
        }
    }
    report.phases = vec![
        phase("before", &due, &got, 0, subscribe_ns),
        phase("during", &due, &got, subscribe_ns, flood_end_ns + 1),
        phase("after", &due, &got, flood_end_ns + 1, u64::MAX),
    ];
    Ok(report)
}
