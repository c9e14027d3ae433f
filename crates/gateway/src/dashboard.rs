//! The live dashboard (`/dashboard`): an embedded page, and the snapshots it draws, as JSON
//! (`/api/dashboard`) and as Server-Sent Events (`/api/dashboard/events`), one a second.
//!
//! It owns the page's assets (`crates/gateway/assets/dashboard/`, compiled in: a gateway is often
//! offline, so nothing comes from a CDN) and the sampler that turns the metrics registry into
//! snapshots. It only reads `tolk_metrics`; it knows nothing of protocols' sessions or sockets.
//!
//! Cost: one sampler task for every viewer together, running only while at least one viewer is
//! connected. It reads the registry once a second into one JSON string, shared by `Arc` through
//! a `watch` channel, so five open pages cost one sample a second plus five small writes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;
use tokio_util::io::ReaderStream;
use tokio_util::sync::CancellationToken;
use tolk_metrics::{BridgeStatus, ClusterStatus, DropReason, Hop, MemoryKind, Metrics, Protocol};

const PAGE: &str = include_str!("../assets/dashboard/index.html");
const SCRIPT: &str = include_str!("../assets/dashboard/app.js");
const STYLE: &str = include_str!("../assets/dashboard/app.css");

/// How often the sampler takes a snapshot; the page's rates are per this interval.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// The protocols the matrix always shows, used or not; others (WebSocket variants, bridges,
/// the cluster, the broker's own messages) join it once they carry traffic.
const ALWAYS_SHOWN: [Protocol; 6] =
    [Protocol::Mqtt, Protocol::MqttSn, Protocol::Stomp, Protocol::Amqp, Protocol::Wsn, Protocol::Xmpp];

/// The broker's shutdown, handed to the event streams by the HTTP server (`http::serve`) so
/// that an open page does not hold up the drain.
#[derive(Clone)]
pub struct Shutdown(pub CancellationToken);

/// The dashboard's routes, without auth: `http::routes` puts them behind it.
pub fn routes(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/dashboard", get(|| asset(PAGE, "text/html; charset=utf-8")))
        .route("/dashboard/app.js", get(|| asset(SCRIPT, "text/javascript; charset=utf-8")))
        .route("/dashboard/app.css", get(|| asset(STYLE, "text/css; charset=utf-8")))
        .route("/api/dashboard", get(snapshot))
        .route("/api/dashboard/events", get(events))
        .with_state(Dashboard::new(metrics))
}

async fn asset(body: &'static str, content_type: &'static str) -> Response {
    // no-cache: the page is small, and a browser must not keep an old build's script.
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

async fn snapshot(State(dashboard): State<Arc<Dashboard>>) -> Response {
    let json = dashboard.current();
    ([(header::CONTENT_TYPE, "application/json")], json.to_string()).into_response()
}

/// `text/event-stream`: the current snapshot at once, then each new one as the sampler makes it.
async fn events(State(dashboard): State<Arc<Dashboard>>, shutdown: Option<Extension<Shutdown>>) -> Response {
    let mut snapshots = dashboard.subscribe();
    let stop = shutdown.map(|Extension(s)| s.0).unwrap_or_default();
    // The body reads from one end of an in-memory pipe that this task writes into: a write
    // fails once the viewer has gone (the body and its reader dropped), which ends the task
    // and drops its receiver, so the sampler sees one viewer fewer. 16 KiB holds a few
    // snapshots (about 1 KiB each) for a viewer reading slowly; a viewer that does not read
    // holds no more, and misses the snapshots in between (the watch keeps only the latest).
    // With `[http] max_connections` (1,024) all open as event streams, that is 16 MiB at most.
    let (mut writer, reader) = tokio::io::duplex(16 * 1024);
    tokio::spawn(async move {
        if writer.write_all(b"retry: 2000\n\n").await.is_err() {
            return;
        }
        loop {
            let json = snapshots.borrow_and_update().clone();
            let event = format!("event: snapshot\ndata: {json}\n\n");
            if writer.write_all(event.as_bytes()).await.is_err() {
                return;
            }
            tokio::select! {
                changed = snapshots.changed() => if changed.is_err() { return },
                _ = stop.cancelled() => return,
            }
        }
    });
    let mut response = Response::new(Body::from_stream(ReaderStream::new(reader)));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Tells a buffering reverse proxy (nginx) to pass each event on as it comes.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    *response.status_mut() = StatusCode::OK;
    response
}

/// The sampler's shared state: the latest snapshot and who is watching it.
struct Dashboard {
    metrics: Arc<Metrics>,
    latest: watch::Sender<Arc<str>>,
    /// Whether the sampler task runs. Taken by a new viewer (to start it) and by the sampler
    /// (to stop when nobody watches), so that neither decision can miss the other.
    running: Mutex<bool>,
    /// The counts of the previous sample, for per-second rates.
    previous: Mutex<Option<Counts>>,
}

impl Dashboard {
    fn new(metrics: Arc<Metrics>) -> Arc<Self> {
        let (latest, _) = watch::channel(Arc::from("{}"));
        Arc::new(Self { metrics, latest, running: Mutex::new(false), previous: Mutex::new(None) })
    }

    /// A receiver of snapshots, starting the sampler if it is not running.
    fn subscribe(self: &Arc<Self>) -> watch::Receiver<Arc<str>> {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let receiver = self.latest.subscribe();
        if !*running {
            *running = true;
            self.latest.send_replace(self.sample());
            tokio::spawn(self.clone().run_sampler());
        }
        receiver
    }

    /// The latest snapshot while the sampler runs; a new one (rates since the previous call)
    /// otherwise.
    fn current(&self) -> Arc<str> {
        if *self.running.lock().unwrap_or_else(|e| e.into_inner()) {
            return self.latest.borrow().clone();
        }
        self.sample()
    }

    async fn run_sampler(self: Arc<Self>) {
        let mut ticks = tokio::time::interval(SAMPLE_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await; // The first tick is now: `subscribe` has just sampled.
        loop {
            ticks.tick().await;
            let json = self.sample();
            let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
            if self.latest.receiver_count() == 0 {
                *running = false;
                return;
            }
            self.latest.send_replace(json);
        }
    }

    /// Reads the registry into one JSON snapshot, with rates since the previous sample.
    fn sample(&self) -> Arc<str> {
        let now = Instant::now();
        let mut previous = self.previous.lock().unwrap_or_else(|e| e.into_inner());
        let snapshot = build_snapshot(&self.metrics, previous.as_ref(), now);
        *previous = Some(snapshot.1);
        Arc::from(serde_json::to_string(&snapshot.0).unwrap_or_else(|_| "{}".to_owned()))
    }
}

/// Counters kept between samples to turn them into rates.
struct Counts {
    at: Instant,
    /// Each pair's histogram, for the next interval's percentiles and mean.
    cells: HashMap<(Protocol, Protocol), tolk_metrics::HistogramSnapshot>,
    dropped: HashMap<(Protocol, DropReason), u64>,
}

/// One snapshot, the body of `/api/dashboard` and of each event (docs/dashboard.md).
#[derive(Serialize)]
struct Snapshot {
    /// Wall-clock time of the sample, milliseconds since the Unix epoch.
    at_ms: u64,
    /// Seconds the rates cover; `null` on the first sample (no rates yet).
    interval_s: Option<f64>,
    /// Always `"microseconds"`, for `p50` and `p99`.
    unit: &'static str,
    /// Rows and columns of the matrix, in order.
    protocols: Vec<Protocol>,
    /// One per pair that has carried traffic; a pair absent here has none.
    cells: Vec<Cell>,
    /// Open connections per protocol (every protocol of `protocols`).
    connections: BTreeMap<Protocol, i64>,
    /// Messages dropped, per protocol and reason, only those ever counted.
    dropped: Vec<Dropped>,
    memory: Memory,
    bridges: Vec<BridgeStatus>,
    cluster: Option<ClusterStatus>,
}

#[derive(Serialize)]
struct Cell {
    #[serde(rename = "in")]
    from: Protocol,
    #[serde(rename = "out")]
    to: Protocol,
    /// Which histogram: `end_to_end`, or `bridge`/`cluster` for messages leaving that way.
    hop: Hop,
    /// Messages since the broker started.
    count: u64,
    /// Messages per second over the last interval (`null` on the first sample).
    rate: Option<f64>,
    /// Median, 99th percentile and mean of the last interval's messages, µs (`null` when
    /// there were none, and on the first sample): the live figures.
    p50: Option<f64>,
    p99: Option<f64>,
    mean: Option<f64>,
    /// Median and 99th percentile since the broker started, µs: what an idle pair last did.
    p50_total: f64,
    p99_total: f64,
}

#[derive(Serialize)]
struct Dropped {
    protocol: Protocol,
    reason: DropReason,
    count: u64,
    rate: Option<f64>,
}

#[derive(Serialize)]
struct Memory {
    /// Bytes held against the budget now.
    held: usize,
    /// The budget (`[core] memory_budget_bytes`), bytes.
    limit: usize,
    by_kind: BTreeMap<MemoryKind, usize>,
}

/// The histogram a matrix cell shows: messages delivered to a subscriber end to end, or, for
/// those leaving through a bridge or to other cluster nodes, that hop.
fn cell_histogram(metrics: &Metrics, from: Protocol, to: Protocol) -> Option<(Hop, tolk_metrics::HistogramSnapshot)> {
    [Hop::EndToEnd, Hop::Bridge, Hop::Cluster]
        .into_iter()
        .filter_map(|hop| metrics.latency_if_used(hop, from, to).map(|h| (hop, h.snapshot())))
        .find(|(_, s)| s.count > 0)
}

fn build_snapshot(metrics: &Metrics, previous: Option<&Counts>, now: Instant) -> (Snapshot, Counts) {
    let interval = previous.map(|p| now.duration_since(p.at).as_secs_f64()).filter(|s| *s > 0.0);
    let rate = |count: u64, before: Option<u64>| interval.map(|s| count.saturating_sub(before.unwrap_or(0)) as f64 / s);
    let mut counts = Counts { at: now, cells: HashMap::new(), dropped: HashMap::new() };
    let mut cells = Vec::new();
    for &from in Protocol::ALL {
        for &to in Protocol::ALL {
            let Some((hop, s)) = cell_histogram(metrics, from, to) else { continue };
            let micros = |h: &tolk_metrics::HistogramSnapshot, q| h.quantile_nanos(q).map(|n| n as f64 / 1000.0);
            // A pair new since the previous sample had nothing before it.
            let last = previous.map(|p| p.cells.get(&(from, to)).map_or_else(|| s.clone(), |before| s.since(before)));
            let last = last.filter(|l| l.count > 0);
            cells.push(Cell {
                from,
                to,
                hop,
                count: s.count,
                rate: interval.map(|secs| last.as_ref().map_or(0, |l| l.count) as f64 / secs),
                p50: last.as_ref().and_then(|l| micros(l, 0.5)),
                p99: last.as_ref().and_then(|l| micros(l, 0.99)),
                mean: last.as_ref().map(|l| l.sum_nanos as f64 / l.count as f64 / 1000.0),
                p50_total: micros(&s, 0.5).unwrap_or(0.0),
                p99_total: micros(&s, 0.99).unwrap_or(0.0),
            });
            counts.cells.insert((from, to), s);
        }
    }
    // The client protocols first (XMPP's label comes after the bridge's and the cluster's, so
    // that kept messages keep their protocol numbers), then the others with traffic.
    let with_traffic = |p: &Protocol| cells.iter().any(|c| c.from == *p || c.to == *p);
    let others = Protocol::ALL.iter().copied().filter(|p| !ALWAYS_SHOWN.contains(p) && with_traffic(p));
    let protocols: Vec<Protocol> = ALWAYS_SHOWN.into_iter().chain(others).collect();
    let mut dropped = Vec::new();
    for &protocol in Protocol::ALL {
        for &reason in DropReason::ALL {
            let count = metrics.protocol(protocol).dropped_count(reason);
            if count == 0 {
                continue;
            }
            let before = previous.and_then(|p| p.dropped.get(&(protocol, reason)).copied());
            dropped.push(Dropped { protocol, reason, count, rate: rate(count, before) });
            counts.dropped.insert((protocol, reason), count);
        }
    }
    let connections = Protocol::ALL
        .iter()
        .map(|&p| (p, metrics.protocol(p).connections_open.load(std::sync::atomic::Ordering::Relaxed)))
        .filter(|&(p, open)| open != 0 || protocols.contains(&p))
        .collect();
    let memory = Memory {
        held: metrics.memory().total(),
        limit: metrics.memory().limit.load(std::sync::atomic::Ordering::Relaxed),
        by_kind: MemoryKind::ALL.iter().map(|&k| (k, metrics.memory().held(k))).collect(),
    };
    let at_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let snapshot = Snapshot {
        at_ms,
        interval_s: interval,
        unit: "microseconds",
        protocols,
        cells,
        connections,
        dropped,
        memory,
        bridges: metrics.bridges().statuses(),
        cluster: metrics.cluster().map(|c| c.status()),
    };
    (snapshot, counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pairs_with_traffic_have_cells_and_rates_and_percentiles_are_per_interval() {
        let metrics = Metrics::new();
        metrics.record(Hop::EndToEnd, Protocol::Mqtt, Protocol::Stomp, Duration::from_millis(10));
        // A queue-hop sample alone does not make a cell: the matrix shows end-to-end latency.
        metrics.record(Hop::Queue, Protocol::Stomp, Protocol::Amqp, Duration::from_micros(5));
        let start = Instant::now();
        let (first, counts) = build_snapshot(&metrics, None, start);
        assert_eq!(first.cells.len(), 1);
        assert_eq!(
            (first.cells[0].rate, first.cells[0].p99),
            (None, None),
            "nothing per interval without a previous sample"
        );
        for _ in 0..4 {
            metrics.record(Hop::EndToEnd, Protocol::Mqtt, Protocol::Stomp, Duration::from_micros(100));
        }
        let (second, _) = build_snapshot(&metrics, Some(&counts), start + Duration::from_secs(2));
        let cell = &second.cells[0];
        assert_eq!((cell.from, cell.to, cell.count, cell.rate), (Protocol::Mqtt, Protocol::Stomp, 5, Some(2.0)));
        let p99 = cell.p99.expect("samples in the interval");
        assert!((p99 - 100.0).abs() <= 100.0 * 0.0625, "{p99}: the interval's, without the 10 ms one before it");
        assert!(cell.p99_total > 9_000.0, "{}: since the start", cell.p99_total);
        assert_eq!(cell.mean, Some(100.0));
        let json = serde_json::to_value(&second).unwrap();
        assert_eq!(json["cells"][0]["in"], "mqtt");
        assert_eq!(json["protocols"], serde_json::json!(["mqtt", "mqttsn", "stomp", "amqp", "wsn", "xmpp"]));
        assert_eq!(json["cluster"], serde_json::Value::Null);
    }

    #[test]
    fn bridge_traffic_adds_its_column() {
        let metrics = Metrics::new();
        metrics.record(Hop::Bridge, Protocol::Mqtt, Protocol::Bridge, Duration::from_millis(2));
        let (snapshot, _) = build_snapshot(&metrics, None, Instant::now());
        assert_eq!(snapshot.cells[0].hop, Hop::Bridge);
        assert_eq!(snapshot.protocols.last(), Some(&Protocol::Bridge));
    }

    #[tokio::test]
    async fn one_sampler_runs_while_someone_watches_and_stops_after() {
        let dashboard = Dashboard::new(Arc::new(Metrics::new()));
        let viewers: Vec<_> = (0..5).map(|_| dashboard.subscribe()).collect();
        assert!(*dashboard.running.lock().unwrap());
        assert_eq!(dashboard.latest.receiver_count(), 5);
        let mut one = viewers[0].clone();
        tokio::time::timeout(Duration::from_secs(5), one.changed()).await.expect("a snapshot a second").unwrap();
        drop((viewers, one));
        let deadline = Instant::now() + Duration::from_secs(5);
        while *dashboard.running.lock().unwrap() {
            assert!(Instant::now() < deadline, "the sampler still runs with nobody watching");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // `/api/dashboard` still answers, sampling on demand.
        assert!(dashboard.current().starts_with("{\"at_ms\""));
    }
}
