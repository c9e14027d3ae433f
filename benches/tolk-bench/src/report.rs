//! The result of one run: the figures every scenario shares (rates, losses, latency
//! percentiles, broker CPU and memory) plus each scenario's own, printed for people and written
//! as JSON for `compare` and for keeping.

use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::broker::ProcSample;
use crate::cli::LoadArgs;
use crate::recorder::SubscriberSummary;

/// One run of one scenario against one broker.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    /// Row name in comparison tables.
    pub case: String,
    /// Which broker (`--label`).
    pub label: String,
    /// Scenario name as on the command line.
    pub scenario: String,
    /// The `--target` URL's protocol and address.
    pub target: String,
    /// Seconds since the Unix epoch when the run ended.
    pub finished_unix: u64,
    /// Delivery guarantee used (MQTT level).
    pub qos: u8,
    /// Payload bytes per message.
    pub payload_bytes: usize,
    /// Publishers connected.
    pub publishers: usize,
    /// Subscribers connected (including a slow one).
    pub subscribers: usize,
    /// Messages each publisher was to send.
    pub messages_per_publisher: u64,
    /// Requested total rate in messages/s; `None` for closed loop.
    pub target_rate: Option<f64>,
    /// Messages actually published.
    pub sent: u64,
    /// From the first publish to the last publisher finishing, in seconds.
    pub publish_secs: f64,
    /// `sent / publish_secs`: what the publishers achieved against `target_rate`.
    pub offered_rate: f64,
    /// Deliveries expected over all subscribers.
    pub expected: u64,
    /// Distinct deliveries received over all subscribers.
    pub received: u64,
    /// `expected − received`.
    pub lost: u64,
    /// Deliveries of a message a subscriber already had.
    pub duplicates: u64,
    /// Deliveries out of publish order.
    pub reordered: u64,
    /// Deliveries per second, from the first publish to the last delivery.
    pub delivered_rate: f64,
    /// End-to-end latency of the full-speed subscribers, from each message's send time.
    pub latency_us: Option<LatencySummary>,
    /// Open loop only: latency from the time each message was due, which adds the publisher's
    /// lateness (tokio's timer fires up to about 1 ms late; a stalled client waits longer).
    #[serde(default)]
    pub latency_from_due_us: Option<LatencySummary>,
    /// Each subscriber's counts.
    pub per_subscriber: Vec<SubscriberSummary>,
    /// Broker CPU and memory over the measured window.
    pub broker: Option<BrokerUsage>,
    /// The bench's own CPU seconds over the same window (near the number of cores means the
    /// load generator, not the broker, was the limit).
    pub bench_cpu_secs: f64,
    /// The bench's own CPU seconds while the publishers ran (`publish_secs`): what it took the
    /// generator to offer the load, undiluted by the drain after it.
    #[serde(default)]
    pub bench_cpu_publish_secs: f64,
    /// Broker RSS (KiB) sampled every 100 ms during the load: (ms since start, KiB).
    pub rss_samples: Vec<(u64, u64)>,
    /// Burst scenario's figures.
    pub burst: Option<BurstSummary>,
    /// Idle scenario's figures.
    pub idle: Option<IdleSummary>,
    /// Slow-subscriber scenario's figures.
    pub slow: Option<SlowSummary>,
    /// Sustain's search: every step, and which rate was sustainable.
    #[serde(default)]
    pub sustain: Option<SustainSummary>,
    /// MinT load's figures.
    #[serde(default)]
    pub mint: Option<MintSummary>,
    /// Errors met (connections refused or closed, publishes failed).
    pub errors: Vec<String>,
}

impl Report {
    /// A report with the settings filled in from the command line.
    pub fn new(scenario: &str, args: &LoadArgs) -> Self {
        let rate_open = args.rate > 0.0;
        Report {
            case: args
                .case
                .clone()
                .unwrap_or_else(|| if rate_open { format!("{scenario}@{}", args.rate) } else { scenario.to_string() }),
            label: args.label.clone(),
            scenario: scenario.to_string(),
            target: format!(
                "{}://{}:{}{}",
                args.target.protocol.scheme(),
                args.target.host,
                args.target.port,
                args.target.path
            ),
            qos: args.qos,
            payload_bytes: args.payload.max(crate::payload::HEADER_LEN),
            target_rate: rate_open.then_some(args.rate),
            ..Report::default()
        }
    }

    /// Broker CPU microseconds per delivered message, the figure compared between brokers.
    pub fn cpu_us_per_delivered(&self) -> Option<f64> {
        self.broker.as_ref().and_then(|b| b.cpu_us_per_delivered)
    }

    /// `received / expected` in percent, the figure the MinT goal (≥ 99.9%) is about.
    pub fn delivered_percent(&self) -> Option<f64> {
        (self.expected > 0).then(|| self.received as f64 * 100.0 / self.expected as f64)
    }

    /// Renders the report for a terminal.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{} against {} ({}), case {}", self.scenario, self.label, self.target, self.case);
        if self.idle.is_none() {
            let _ = writeln!(
                out,
                "  load      {} publisher(s), {} subscriber(s), {} msg/publisher, {} B, QoS {}",
                self.publishers, self.subscribers, self.messages_per_publisher, self.payload_bytes, self.qos
            );
        }
        if self.sent > 0 {
            let target = self.target_rate.map_or("closed loop".to_string(), |r| format!("target {r:.0} msg/s"));
            let _ = writeln!(
                out,
                "  publish   {} sent in {:.3} s = {:.0} msg/s ({target})",
                self.sent, self.publish_secs, self.offered_rate
            );
            let _ = writeln!(
                out,
                "  deliver   {}/{} received = {:.0} msg/s; lost {}, duplicates {}, reordered {}",
                self.received, self.expected, self.delivered_rate, self.lost, self.duplicates, self.reordered
            );
        }
        for s in self.per_subscriber.iter().filter(|s| s.lost > 0 || s.duplicates > 0 || s.closed_by_broker.is_some()) {
            let closed = s.closed_by_broker.as_deref().map(|r| format!(", closed by broker: {r}")).unwrap_or_default();
            let _ = writeln!(
                out,
                "    {}: {}/{} received, lost {}, duplicates {}{closed}",
                s.name, s.received, s.expected, s.lost, s.duplicates
            );
        }
        if let Some(l) = &self.latency_us {
            let _ = writeln!(
                out,
                "  latency   µs p50 {} p90 {} p99 {} p99.9 {} max {} (n = {})",
                l.p50, l.p90, l.p99, l.p999, l.max, l.count
            );
        }
        if let Some(l) = &self.latency_from_due_us {
            let _ = writeln!(
                out,
                "            from due time: p50 {} p90 {} p99 {} p99.9 {} max {}",
                l.p50, l.p90, l.p99, l.p999, l.max
            );
        }
        if let Some(b) = &self.burst {
            let bursts: Vec<String> = b.burst_ms.iter().map(|ms| format!("{ms:.2}")).collect();
            let _ = writeln!(
                out,
                "  burst     {} messages: median {:.2} ms, min {:.2}, max {:.2} (each: {})",
                b.messages,
                b.median_ms,
                b.min_ms,
                b.max_ms,
                bursts.join(", ")
            );
        }
        if let Some(i) = &self.idle {
            let _ = writeln!(
                out,
                "  idle      {}/{} connected in {:.3} s = {:.0} conn/s; {} failed",
                i.connected, i.requested, i.connect_secs, i.connect_rate, i.failed
            );
            if let Some(per) = i.rss_bytes_per_connection {
                let _ = writeln!(out, "            broker RSS +{per:.0} B per connection");
            }
        }
        if let Some(s) = &self.slow {
            let closed = s.slow_closed_by_broker.as_deref().unwrap_or("no");
            let _ = writeln!(
                out,
                "  slow      read {} messages at {} ms each; closed by broker: {closed}",
                s.slow_received, s.delay_ms
            );
            let series: Vec<String> = self.rss_samples.iter().map(|(_, kib)| format!("{}", kib / 1024)).collect();
            let _ = writeln!(out, "            broker RSS MiB every 100 ms: {}", series.join(" "));
            let _ = writeln!(
                out,
                "            broker RSS start {} KiB, max {} KiB, end {} KiB",
                s.rss_start_kib, s.rss_max_kib, s.rss_end_kib
            );
        }
        if let Some(b) = &self.broker {
            let per = b.cpu_us_per_delivered.map(|c| format!(" = {c:.2} µs per delivered message")).unwrap_or_default();
            let _ = writeln!(out, "  broker    pid {}: CPU {:.3} s{per}", b.pid, b.cpu_secs);
            let _ = writeln!(
                out,
                "            RSS {} → {} KiB, peak (VmHWM) {} KiB",
                b.before.rss_kib, b.after.rss_kib, b.after.hwm_kib
            );
        }
        let _ = writeln!(out, "  bench     CPU {:.3} s", self.bench_cpu_secs);
        if let Some(s) = &self.sustain {
            s.write_text(&mut out);
        }
        if let Some(m) = &self.mint {
            m.write_text(self, &mut out);
        }
        for e in &self.errors {
            let _ = writeln!(out, "  error     {e}");
        }
        out
    }
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
    /// Arithmetic mean.
    pub mean: f64,
}

impl LatencySummary {
    /// Percentiles of `h`, or `None` when it is empty.
    pub fn of(h: &Histogram<u64>) -> Option<Self> {
        (!h.is_empty()).then(|| LatencySummary {
            count: h.len(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            mean: h.mean(),
        })
    }
}

/// The broker's resource use over the measured window.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BrokerUsage {
    /// Its pid.
    pub pid: u32,
    /// Just before the load started (after connecting and subscribing).
    pub before: ProcSample,
    /// Just after the last delivery, before disconnecting.
    pub after: ProcSample,
    /// CPU seconds spent in between.
    pub cpu_secs: f64,
    /// `cpu_secs` per delivered message, in microseconds.
    pub cpu_us_per_delivered: Option<f64>,
}

impl BrokerUsage {
    /// Usage between two samples, spread over `delivered` messages.
    pub fn between(pid: u32, before: ProcSample, after: ProcSample, delivered: u64) -> Self {
        let cpu_secs = (after.cpu_secs - before.cpu_secs).max(0.0);
        BrokerUsage {
            pid,
            before,
            after,
            cpu_secs,
            cpu_us_per_delivered: (delivered > 0).then(|| cpu_secs * 1e6 / delivered as f64),
        }
    }
}

/// Figures of the burst scenario.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BurstSummary {
    /// Messages per burst.
    pub messages: u64,
    /// From the first publish of each burst to the arrival of its last message, in ms.
    pub burst_ms: Vec<f64>,
    /// Fastest burst.
    pub min_ms: f64,
    /// Median burst.
    pub median_ms: f64,
    /// Slowest burst.
    pub max_ms: f64,
}

/// Figures of the idle-connections scenario.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IdleSummary {
    /// Connections asked for.
    pub requested: usize,
    /// Connections that got a CONNACK (or the protocol's equivalent).
    pub connected: usize,
    /// Attempts that failed.
    pub failed: usize,
    /// Time to open them all, in seconds.
    pub connect_secs: f64,
    /// `connected / connect_secs`.
    pub connect_rate: f64,
    /// Broker RSS growth divided by `connected`, in bytes.
    pub rss_bytes_per_connection: Option<f64>,
    /// Broker CPU per connection set up, in microseconds.
    pub cpu_us_per_connection: Option<f64>,
}

/// Figures of the slow-subscriber scenario.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SlowSummary {
    /// Pause after each message the slow subscriber read, in ms.
    pub delay_ms: u64,
    /// Messages the slow subscriber read before the run ended.
    pub slow_received: u64,
    /// Why the broker closed the slow subscriber's connection, if it did.
    pub slow_closed_by_broker: Option<String>,
    /// Broker RSS when the load started, in KiB.
    pub rss_start_kib: u64,
    /// Highest broker RSS sampled during the load, in KiB.
    pub rss_max_kib: u64,
    /// Broker RSS when the load ended, in KiB.
    pub rss_end_kib: u64,
}

/// Figures of `mint`: the fleet, its connect phase, the broker's memory at the two moments the
/// MinT goal names, and whose CPU was the limit.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MintSummary {
    /// Clients asked for.
    pub clients: usize,
    /// Clients that connected (and, over MQTT-SN, registered their topic).
    pub connected: usize,
    /// Clients that failed to connect; they publish nothing and nothing is expected of them.
    pub connect_failed: usize,
    /// From the first connection attempt to the last answer, in seconds.
    pub connect_secs: f64,
    /// Messages per second per client.
    pub rate_per_client: f64,
    /// How long the clients published, as asked, in seconds.
    pub duration_secs: f64,
    /// The subscribers' wildcard filter.
    pub filter: String,
    /// Tasks that drove the publishing clients.
    pub publish_tasks: usize,
    /// Broker RSS once every client connected and the broker went quiet, in KiB.
    pub rss_after_connect_kib: Option<u64>,
    /// Broker RSS after the drain, before the clients disconnect, in KiB.
    pub rss_end_kib: Option<u64>,
    /// Broker peak RSS (VmHWM) at the end, in KiB.
    pub hwm_kib: Option<u64>,
    /// Broker CPU from after connecting to the end, as a share of one core (1.0 = one core).
    pub broker_cpu_share: Option<f64>,
    /// CPUs the bench may run on.
    pub generator_cores: usize,
    /// The bench's CPU while publishing, as a share of those cores (1.0 = all).
    pub generator_cpu_share: f64,
    /// Why the bench, rather than the broker, may have set the limit (its CPU at 90% or more).
    pub generator_bound: Option<String>,
}

impl MintSummary {
    fn write_text(&self, report: &Report, out: &mut String) {
        let mib = |kib: Option<u64>| kib.map_or("–".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
        let _ = writeln!(
            out,
            "  mint      {}/{} clients connected in {:.3} s ({} failed); {} msg/s each for {} s, {} publish task(s), subscribers on {}",
            self.connected,
            self.clients,
            self.connect_secs,
            self.connect_failed,
            self.rate_per_client,
            self.duration_secs,
            self.publish_tasks,
            self.filter
        );
        let delivered = report.delivered_percent().map_or("–".into(), |p| format!("{p:.3}%"));
        let _ = writeln!(out, "            delivered {delivered} of expected, {} lost", report.lost);
        let _ = writeln!(
            out,
            "            broker RSS after connect {}, at the end {}, peak (VmHWM) {}",
            mib(self.rss_after_connect_kib),
            mib(self.rss_end_kib),
            mib(self.hwm_kib)
        );
        if let Some(share) = self.broker_cpu_share {
            let _ = writeln!(out, "            broker CPU {:.0}% of one core", share * 100.0);
        }
        let bound = self.generator_bound.as_deref().map(|why| format!(": generator-bound, {why}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "            bench CPU while publishing {:.0}% of {} core(s){bound}",
            self.generator_cpu_share * 100.0,
            self.generator_cores
        );
    }
}

/// What `sustain` found: every step of its search and the verdict. The report around it holds
/// the figures of the sustainable step (or, when no step was clean, of the lowest rate tried).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SustainSummary {
    /// The flow offered (`fan-in`, `fan-out`, `p2p`).
    pub shape: String,
    /// How long each step offered its rate, in seconds.
    pub window_secs: f64,
    /// How long after a step's last publish its messages could still arrive, in ms.
    pub drain_ms: u64,
    /// The search's first rate, its ceiling and its step budget.
    pub start_rate: f64,
    /// See `start_rate`.
    pub max_rate: f64,
    /// See `start_rate`.
    pub max_steps: u32,
    /// CPUs the bench may run on (its affinity, e.g. `1` under `taskset -c 1`).
    pub generator_cpus: String,
    /// CPUs the broker may run on, when its pid is known.
    pub broker_cpus: Option<String>,
    /// Every step in the order run.
    pub steps: Vec<SustainStep>,
    /// Index in `steps` of the highest clean step; `None` when no step was clean.
    pub sustainable_step: Option<usize>,
    /// The generator bounded the result: the sustainable step, or the lowest step above it
    /// that was not clean, was generator-bound. The broker may carry more than shown.
    pub generator_bound: bool,
    /// No step above the sustainable one was run (the search reached `max_rate` or ran out of
    /// steps while doubling): the broker may carry more than shown.
    pub search_limited: bool,
}

impl SustainSummary {
    /// The highest clean step, if any.
    pub fn sustainable(&self) -> Option<&SustainStep> {
        self.sustainable_step.and_then(|i| self.steps.get(i))
    }

    /// Why the sustainable figure is only a lower bound of the broker's, if it is.
    pub fn bound(&self) -> Option<&'static str> {
        if self.generator_bound {
            Some("generator-bound")
        } else if self.search_limited {
            Some("search limit")
        } else {
            None
        }
    }

    /// `rate`, prefixed with ≥ and followed by the reason when the figure is a lower bound.
    pub fn qualify(&self, rate: String) -> String {
        match self.bound() {
            Some(why) => format!("≥ {rate} ({why})"),
            None => rate,
        }
    }

    fn write_text(&self, out: &mut String) {
        let broker = self.broker_cpus.as_deref().map(|c| format!(", broker on CPUs {c}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  sustain   {} s window per step, {} ms drain deadline; bench on CPUs {}{broker}",
            self.window_secs, self.drain_ms, self.generator_cpus
        );
        let _ = writeln!(out, "    {}", SustainStep::HEADER);
        for (i, step) in self.steps.iter().enumerate() {
            let _ = writeln!(out, "    {}", step.line(i + 1));
        }
        match self.sustainable() {
            Some(step) => {
                let _ = writeln!(
                    out,
                    "  sustainable {} msg/s offered, {} msg/s delivered",
                    self.qualify(format!("{:.0}", step.offered_rate)),
                    self.qualify(format!("{:.0}", step.delivered_rate)),
                );
            }
            None => {
                let _ = writeln!(out, "  sustainable none: every step lost messages or fell behind its pace");
            }
        }
    }
}

/// One step of the `sustain` search: an open-loop run at one offered rate.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SustainStep {
    /// Total publish rate asked for, in messages/s.
    pub offered_rate: f64,
    /// Messages published.
    pub sent: u64,
    /// Publish rate achieved (`sent` over the publishing time).
    pub send_rate: f64,
    /// Deliveries expected over all subscribers.
    pub expected: u64,
    /// Distinct deliveries received within the drain deadline.
    pub received: u64,
    /// `expected − received`.
    pub lost: u64,
    /// Deliveries per second, from the first publish to the last delivery.
    pub delivered_rate: f64,
    /// End-to-end latency from each message's send time.
    pub latency_us: Option<LatencySummary>,
    /// Broker CPU per delivered message, in µs, when its pid is known.
    pub broker_cpu_us_per_msg: Option<f64>,
    /// The bench's CPU while publishing, as a share of the cores it may run on (1.0 = all).
    pub generator_cpu_share: f64,
    /// Why the generator, rather than the broker, may have set this step's limit.
    pub generator_bound: Option<String>,
    /// Nothing lost, no error, and the publishers kept the pace.
    pub clean: bool,
}

impl SustainStep {
    /// Column names of [`SustainStep::line`].
    pub const HEADER: &str =
        "step offered/s     sent   sent/s received     lost deliver/s  p50 µs  p99 µs p99.9 µs broker µs/msg gen CPU";

    /// The step as one line of the table under [`SustainStep::HEADER`].
    pub fn line(&self, number: usize) -> String {
        let l = self.latency_us.unwrap_or_default();
        let cpu = self.broker_cpu_us_per_msg.map_or("–".into(), |c| format!("{c:.2}"));
        let verdict = match (&self.generator_bound, self.clean) {
            (Some(why), true) => format!("clean, generator-bound: {why}"),
            (Some(why), false) => format!("not clean, generator-bound: {why}"),
            (None, true) => "clean".into(),
            (None, false) => "not clean".into(),
        };
        format!(
            "{number:>4} {:>9.0} {:>8} {:>8.0} {:>8} {:>8} {:>9.0} {:>7} {:>7} {:>8} {cpu:>13} {:>6.0}%  {verdict}",
            self.offered_rate,
            self.sent,
            self.send_rate,
            self.received,
            self.lost,
            self.delivered_rate,
            l.p50,
            l.p99,
            l.p999,
            self.generator_cpu_share * 100.0,
        )
    }
}
