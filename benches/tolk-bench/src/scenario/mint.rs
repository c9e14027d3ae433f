//! `mint`: MinT-style load, a fleet of small devices each reporting a few times a second. The
//! clients (10,000) all connect first, then each publishes at a fixed rate to its own topic
//! `mint/<client>/data`, their start phases spread evenly over one period so that the total
//! rate arrives smoothly, while wildcard subscribers each receive everything.
//!
//! This module owns the fleet: its connect phase, its timetable and its figures (connect time,
//! broker memory after connecting and at the end, delivered against expected, CPU of broker and
//! bench). Protocols are `proto`'s business; stamping, recording and tallying are `flow`'s.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};

use super::flow::{SUBSCRIBER_BUFFER, Tally, consume, publish_stamped};
use super::sustain::generator_limit;
use super::{Ctx, RssSampler, connect_many, new_run_id};
use crate::broker::{Broker, Probe, cpus_allowed};
use crate::cli::{LoadArgs, MintArgs};
use crate::clock::Clock;
use crate::proto::{AnyConnector, Connector, Protocol, Publisher, Qos};
use crate::recorder::Recorder;
use crate::report::{BrokerUsage, MintSummary, Report};

/// File descriptors the bench needs besides one per client and subscriber: stdio, tokio's
/// epoll and wake-up descriptors, /proc reads, a broker connection being probed.
const SPARE_FILES: u64 = 64;

/// Time from spawning the publish tasks to the first message due: every task is running
/// before its timetable starts, so the first period is as smooth as the others.
const LEAD: Duration = Duration::from_millis(100);

/// One publish task's share of the fleet and its timetable: it publishes for `members[0]`
/// at `first`, then for each next member every `period`, round and round.
#[derive(Debug, Clone, PartialEq)]
struct Lane {
    /// Indexes of its clients, in publishing order.
    members: Vec<usize>,
    /// When its first message is due, from the start of the timetable.
    first: Duration,
    /// Time between two of its messages.
    period: Duration,
}

/// Spreads `clients` over `tasks` lanes so that client `i`'s messages are due at
/// `i / (clients × rate) + k / rate`: lane `l` takes clients `l, l + tasks, …` and starts at
/// `l / (clients × rate)`. With one lane per client, each client has its own timer at its own
/// phase; with fewer, each lane walks its clients at `rate × members` messages/s, and the
/// fleet's timetable is the same whenever `tasks` divides `clients` (else it is off by less
/// than one lane period).
fn lanes(clients: usize, tasks: usize, rate: f64) -> Vec<Lane> {
    let tasks = tasks.clamp(1, clients.max(1));
    let slot = 1.0 / (clients as f64 * rate);
    (0..tasks.min(clients))
        .map(|l| {
            let members: Vec<usize> = (l..clients).step_by(tasks).collect();
            Lane {
                first: Duration::from_secs_f64(l as f64 * slot),
                period: Duration::from_secs_f64(1.0 / (rate * members.len() as f64)),
                members,
            }
        })
        .collect()
}

/// The soft `Max open files` limit from /proc/<pid>/limits text; `u64::MAX` for unlimited.
fn open_files_limit(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    match line["Max open files".len()..].split_whitespace().next()? {
        "unlimited" => Some(u64::MAX),
        soft => soft.parse().ok(),
    }
}

/// Refuses a run that would fail half-way through connecting for want of descriptors.
fn check_open_files(limit: u64, sockets: usize) -> Result<()> {
    let needed = sockets as u64 + SPARE_FILES;
    if limit < needed {
        bail!(
            "{sockets} clients and subscribers need {needed} file descriptors but `ulimit -n` is {limit}: raise it \
             (`ulimit -n $(ulimit -Hn)`) or ask for fewer --clients"
        );
    }
    Ok(())
}

/// The run as the load options every scenario shares, so the context and report are theirs.
fn load_args(args: &MintArgs) -> LoadArgs {
    LoadArgs {
        target: args.target.clone(),
        publish_target: None,
        broker_pid: args.broker_pid,
        spawn_broker: None,
        messages: Some(messages_per_client(args)),
        rate: args.rate_per_client * args.clients as f64,
        publishers: Some(args.clients),
        subscribers: Some(args.subscribers),
        payload: args.payload,
        qos: args.qos,
        json: None,
        label: args.label.clone(),
        case: Some(args.case.clone().unwrap_or_else(|| format!("mint-{}", args.target.protocol.scheme()))),
        iterations: 1,
        connections: args.clients,
        connect_concurrency: args.connect_concurrency,
        slow_delay_ms: 0,
        drain_ms: args.drain_ms,
        drain_is_deadline: false,
    }
}

/// Messages each client sends: its rate over the duration, at least one.
fn messages_per_client(args: &MintArgs) -> u64 {
    (args.rate_per_client * args.duration.as_secs_f64()).round().max(1.0) as u64
}

/// A connected client of the fleet.
struct Member<P> {
    /// Its index, the publisher number in its stamps.
    id: u32,
    topic: String,
    publisher: P,
    /// Set when a publish failed; it sends nothing more.
    failed: bool,
}

/// What a lane did.
struct LaneDone<P> {
    members: Vec<Member<P>>,
    sent: u64,
    errors: Vec<String>,
}

/// Publishes `messages` for each member on the lane's timetable, from `start`. A timer that
/// fired late catches up at once (`Burst`) with each message stamped with the time it was due,
/// so a bench or broker that fell behind shows as latency from due time.
async fn drive<P: Publisher>(
    mut members: Vec<Member<P>>,
    start: Instant,
    lane: Lane,
    messages: u64,
    clock: Clock,
    payload: usize,
) -> LaneDone<P> {
    let mut interval = tokio::time::interval_at(start + lane.first, lane.period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let (mut sent, mut errors) = (0, Vec::new());
    let turns = members.len() as u64;
    for tick in 0..messages * turns {
        let due_ns = clock.ns_at(interval.tick().await.into_std());
        let member = &mut members[(tick % turns) as usize];
        if member.failed {
            continue;
        }
        let seq = tick / turns;
        match publish_stamped(&mut member.publisher, member.id, &member.topic, seq, Some(due_ns), clock, payload).await
        {
            Ok(()) => sent += 1,
            Err(e) => {
                member.failed = true;
                errors.push(format!("client {}: {e:#}", member.id));
            }
        }
    }
    LaneDone { members, sent, errors }
}

/// Runs the MinT load and reports it.
pub async fn run(args: &MintArgs) -> Result<Report> {
    if !matches!(args.target.protocol, Protocol::Mqtt | Protocol::MqttSn) {
        bail!("mint loads mqtt:// or mqttsn:// targets");
    }
    let rate_ok = args.rate_per_client.is_finite() && args.rate_per_client > 0.0;
    if args.clients == 0 || args.subscribers == 0 || !rate_ok {
        bail!("mint needs --clients, --subscribers and --rate-per-client above zero");
    }
    let limits = std::fs::read_to_string("/proc/self/limits").context("reading /proc/self/limits")?;
    let limit = open_files_limit(&limits).context("no `Max open files` in /proc/self/limits")?;
    check_open_files(limit, args.clients + args.subscribers)?;
    let broker = args.broker_pid.map(Broker::attach).transpose()?;
    let ctx = Ctx {
        qos: Qos::from_level(args.qos)?,
        clock: Clock::start(),
        broker: broker.as_ref().map(Broker::probe),
        own: Probe::new(std::process::id())?,
        run_id: new_run_id(),
        args: load_args(args),
    };
    let messages = messages_per_client(args);
    let mut report = Report::new("mint", &ctx.args);
    report.publishers = args.clients;
    report.subscribers = args.subscribers;
    report.messages_per_publisher = messages;
    let connector = AnyConnector::for_target(&args.target, args.payload);
    let topic = |i: usize| format!("mint/{i}/data");

    // The subscribers' client tasks and recorders run on a runtime of their own: in the main
    // one they would wait their turn behind 10,000 publishers' tasks and fall behind by the
    // bench's fault, while a thread of their own gets its share of the CPU from the kernel.
    let receiving = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("mint-subscribers")
        .enable_all()
        .build()
        .context("starting the subscribers' runtime")?;
    // Subscribers first, each confirmed, so nothing published is missed for want of one.
    let mut subscriptions = Vec::with_capacity(args.subscribers);
    for i in 0..args.subscribers {
        let (connector, id, filter) = (connector.clone(), ctx.client_id('s', i), args.filter.topic().to_string());
        let (qos, clock) = (ctx.qos, ctx.clock);
        let subscribed =
            receiving.spawn(async move { connector.subscribe(id, filter, qos, clock, SUBSCRIBER_BUFFER).await });
        subscriptions.push(subscribed.await??);
    }
    let opened = connect_many(args.clients, args.connect_concurrency, |i| {
        let (connector, id, topic, qos) = (connector.clone(), ctx.client_id('m', i), topic(i), ctx.qos);
        async move {
            let mut publisher = connector.publisher(id, qos).await?;
            publisher.prepare(&topic).await?;
            anyhow::Ok(publisher)
        }
    })
    .await;
    report.errors.extend(opened.errors);
    if let Some(probe) = ctx.broker {
        // Memory after connecting is read once the broker has finished setting them up.
        probe.settle().await;
    }
    let before = ctx.sample_broker();
    let before_at = Instant::now();

    let mut expected = vec![0; args.clients];
    for (i, _) in &opened.clients {
        expected[*i] = messages;
    }
    let (done_tx, done_rx) = watch::channel(false);
    let consumers: Vec<_> = subscriptions
        .into_iter()
        .map(|sub| {
            let rec = Recorder::new(expected.clone());
            receiving.spawn(consume(sub, rec, done_rx.clone(), ctx.drain(), false))
        })
        .collect();
    let sampler = RssSampler::start(&ctx);

    let connected = opened.clients.len();
    let plan = lanes(connected, args.publish_tasks.unwrap_or(connected), args.rate_per_client);
    let publish_tasks = plan.len();
    let mut members: Vec<Option<Member<_>>> = opened
        .clients
        .into_iter()
        .map(|(i, publisher)| Some(Member { id: i as u32, topic: topic(i), publisher, failed: false }))
        .collect();
    let own_before = ctx.own_cpu_secs();
    let start = Instant::now() + LEAD;
    let mut running = JoinSet::new();
    for lane in plan {
        let mine = lane.members.iter().filter_map(|&m| members[m].take()).collect();
        running.spawn(drive(mine, start, lane, messages, ctx.clock, args.payload));
    }
    let mut publishers = Vec::with_capacity(connected);
    let mut publish_errors = Vec::new();
    while let Some(done) = running.join_next().await {
        let done = done.context("a publish task failed")?;
        report.sent += done.sent;
        publish_errors.extend(done.errors);
        publishers.extend(done.members);
    }
    let publish_end_ns = ctx.clock.now_ns();
    let own_publish = ctx.own_cpu_secs() - own_before;
    let _ = done_tx.send(true);
    if !publish_errors.is_empty() {
        report.errors.push(format!(
            "{} client(s) failed to publish; first: {}",
            publish_errors.len(),
            publish_errors[0]
        ));
    }

    let mut finished = Vec::with_capacity(consumers.len());
    for task in consumers {
        finished.push(task.await?);
    }
    let after = ctx.sample_broker();
    let broker_secs = before_at.elapsed().as_secs_f64();
    report.bench_cpu_secs = ctx.own_cpu_secs() - own_before;
    report.bench_cpu_publish_secs = own_publish;
    report.rss_samples = sampler.finish().await;

    let mut tally = Tally::new(ctx.clock.ns_at(start.into_std()));
    for (i, (rec, sub)) in finished.into_iter().enumerate() {
        let summary = rec.summary(format!("sub-{i}"), sub.close().await);
        tally.add(&mut report, &rec, &summary);
        report.per_subscriber.push(summary);
    }
    tally.finish(&mut report, publish_end_ns, true);
    // Dropping a runtime inside another would block it; its tasks have ended.
    receiving.shutdown_background();

    // Goodbyes concurrently: one by one, 10,000 would outlast the run.
    let mut closing = JoinSet::new();
    for member in publishers {
        closing.spawn(member.publisher.close());
    }
    let mut closed_by_broker = Vec::new();
    while let Some(closed) = closing.join_next().await {
        closed_by_broker.extend(closed.ok().flatten());
    }
    if let Some(first) = closed_by_broker.first() {
        report.errors.push(format!("{} client(s) closed by the broker; first: {first}", closed_by_broker.len()));
    }

    let cores = cpus_allowed("self")?.len().max(1);
    let cpu_share = if report.publish_secs > 0.0 { own_publish / report.publish_secs / cores as f64 } else { 0.0 };
    let mut mint = MintSummary {
        clients: args.clients,
        connected,
        connect_failed: opened.failed,
        connect_secs: opened.secs,
        rate_per_client: args.rate_per_client,
        duration_secs: args.duration.as_secs_f64(),
        filter: args.filter.topic().into(),
        publish_tasks,
        generator_cores: cores,
        generator_cpu_share: cpu_share,
        generator_bound: generator_limit(cpu_share, cores),
        ..MintSummary::default()
    };
    if let (Some(probe), Some(before), Some(after)) = (ctx.broker, before, after) {
        let usage = BrokerUsage::between(probe.pid, before, after, report.received);
        mint.rss_after_connect_kib = Some(before.rss_kib);
        mint.rss_end_kib = Some(after.rss_kib);
        mint.hwm_kib = Some(after.hwm_kib);
        mint.broker_cpu_share = Some(usage.cpu_secs / broker_secs);
        report.broker = Some(usage);
    }
    report.mint = Some(mint);
    report.finished_unix =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// When each client's `k`-th message is due, from the lanes' timetables.
    fn due_times(lanes: &[Lane], clients: usize, k: u32) -> Vec<Duration> {
        let mut due = vec![Duration::MAX; clients];
        for lane in lanes {
            let turns = lane.members.len() as u32;
            for (j, &client) in lane.members.iter().enumerate() {
                due[client] = lane.first + lane.period * (k * turns + j as u32);
            }
        }
        due
    }

    fn close(a: Duration, b: Duration) -> bool {
        a.abs_diff(b) < Duration::from_micros(1)
    }

    #[test]
    fn one_lane_per_client_staggers_the_phases_evenly() {
        let plan = lanes(10_000, 10_000, 10.0);
        assert_eq!(plan.len(), 10_000);
        assert!(plan.iter().all(|l| l.members.len() == 1 && l.period == Duration::from_millis(100)));
        // 100,000 msg/s in all: one client every 10 µs.
        assert!(close(plan[1].first, Duration::from_micros(10)));
        assert!(close(plan[9_999].first, Duration::from_micros(99_990)));
    }

    #[test]
    fn fewer_lanes_keep_the_same_timetable() {
        let (clients, rate) = (12, 10.0);
        let own = due_times(&lanes(clients, clients, rate), clients, 3);
        for tasks in [1, 2, 3, 4, 6] {
            let shared = due_times(&lanes(clients, tasks, rate), clients, 3);
            assert!(own.iter().zip(&shared).all(|(a, b)| close(*a, *b)), "{tasks} lanes: {shared:?}");
        }
        // Each client exactly once, whatever the split.
        let mut all: Vec<usize> = lanes(10, 3, rate).into_iter().flat_map(|l| l.members).collect();
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert_eq!(lanes(3, 100, rate).len(), 3, "never more lanes than clients");
        assert_eq!(lanes(3, 0, rate).len(), 1);
    }

    #[test]
    fn the_open_files_limit_is_read_and_checked() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max processes             95000                95000                processes\n\
                      Max open files            1024                 20000                files\n";
        assert_eq!(open_files_limit(limits), Some(1024));
        assert_eq!(open_files_limit("Max open files  unlimited  unlimited  files"), Some(u64::MAX));
        assert_eq!(open_files_limit("Max processes 1 1"), None);
        let error = check_open_files(1024, 10_002).unwrap_err().to_string();
        assert!(error.contains("10066") && error.contains("ulimit -n"), "{error}");
        assert!(check_open_files(20_000, 10_002).is_ok());
        assert!(check_open_files(10_065, 10_002).is_err());
    }
}
