//! The message-flow scenarios: fan-in (N→1), fan-out (1→N), point-to-point (N×1→1) and the
//! slow subscriber. One runner connects subscribers, then publishers, then lets every
//! publisher send at full speed (closed loop) or on a fixed schedule (open loop) while each
//! subscriber records what it receives.

use std::time::Duration;

use anyhow::{Result, bail};
use hdrhistogram::Histogram;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use super::{Ctx, RssSampler, Scenario};
use crate::clock::Clock;
use crate::payload::Stamp;
use crate::proto::{Connector, Publisher, Subscription};
use crate::recorder::{Recorder, SubscriberSummary, latency_histogram};
use crate::report::{BrokerUsage, LatencySummary, Report, SlowSummary};

/// Deliveries a full-speed subscriber may hold between its client task and its recorder.
/// Large enough that recording never slows the socket reads; the slow subscriber gets 1.
pub(super) const SUBSCRIBER_BUFFER: usize = 1024;

/// One publisher's part of the plan.
struct PublisherPlan {
    topic: String,
    messages: u64,
}

/// One subscriber's part of the plan.
struct SubscriberPlan {
    name: String,
    topic: String,
    /// Messages expected from each publisher (index = publisher).
    expected: Vec<u64>,
    slow: bool,
}

/// Publishers, subscribers and messages per publisher of a scenario when the command line
/// leaves them out; `sustain` asks for the publishers to spread its rate over them.
pub(super) fn defaults(scenario: Scenario) -> (usize, usize, u64) {
    match scenario {
        Scenario::FanIn => (4, 1, 20_000),
        Scenario::FanOut => (1, 4, 20_000),
        Scenario::P2p => (4, 4, 10_000),
        _ => (1, 1, 40_000),
    }
}

/// Who publishes and subscribes where, per scenario.
fn plan(scenario: Scenario, ctx: &Ctx) -> Result<(Vec<PublisherPlan>, Vec<SubscriberPlan>)> {
    let args = &ctx.args;
    let (default_publishers, default_subscribers, default_messages) = defaults(scenario);
    let publishers = args.publishers.unwrap_or(default_publishers);
    let messages = args.messages.unwrap_or(default_messages);
    if publishers == 0 {
        bail!("--publishers must be at least 1");
    }
    if scenario == Scenario::P2p {
        if args.subscribers.is_some_and(|s| s != publishers) {
            bail!("p2p pairs each publisher with one subscriber; leave --subscribers out");
        }
        let pubs = (0..publishers).map(|i| PublisherPlan { topic: ctx.topic(&format!("p{i}")), messages }).collect();
        let subs = (0..publishers)
            .map(|i| {
                let mut expected = vec![0; publishers];
                expected[i] = messages;
                SubscriberPlan { name: format!("sub-{i}"), topic: ctx.topic(&format!("p{i}")), expected, slow: false }
            })
            .collect();
        return Ok((pubs, subs));
    }
    let subscribers = args.subscribers.unwrap_or(default_subscribers);
    if subscribers == 0 && scenario != Scenario::SlowSubscriber {
        bail!("--subscribers must be at least 1");
    }
    let topic = ctx.topic("t");
    let pubs = (0..publishers).map(|_| PublisherPlan { topic: topic.clone(), messages }).collect();
    let mut subs: Vec<SubscriberPlan> = (0..subscribers)
        .map(|i| SubscriberPlan {
            name: format!("sub-{i}"),
            topic: topic.clone(),
            expected: vec![messages; publishers],
            slow: false,
        })
        .collect();
    if scenario == Scenario::SlowSubscriber {
        subs.push(SubscriberPlan { name: "slow".into(), topic, expected: vec![messages; publishers], slow: true });
    }
    Ok((pubs, subs))
}

/// Sends `messages` stamped messages: as fast as the client takes them, or one every
/// `1/rate` seconds. Returns the publisher, how many it sent, and the error that stopped it.
async fn publish_loop<P: Publisher>(
    mut publisher: P,
    id: u32,
    topic: String,
    messages: u64,
    rate: Option<f64>,
    clock: Clock,
    payload: usize,
) -> (P, u64, Option<String>) {
    let mut interval = rate.map(|r| {
        let mut i = tokio::time::interval(Duration::from_secs_f64(1.0 / r));
        // Burst: when the loop falls behind, the missed sends go out at once, each stamped
        // with the time it was due as well, so the delay shows in latency from due time.
        i.set_missed_tick_behavior(MissedTickBehavior::Burst);
        i
    });
    for seq in 0..messages {
        let due_ns = match interval.as_mut() {
            Some(i) => Some(clock.ns_at(i.tick().await.into_std())),
            None => None,
        };
        if let Err(e) = publish_stamped(&mut publisher, id, &topic, seq, due_ns, clock, payload).await {
            return (publisher, seq, Some(format!("publisher {id}: {e:#}")));
        }
    }
    (publisher, messages, None)
}

/// Publishes message `seq` of publisher `id`, stamped with the time it goes out and the time
/// it was due (`None` in closed loop: due when sent).
pub(super) async fn publish_stamped<P: Publisher>(
    publisher: &mut P,
    id: u32,
    topic: &str,
    seq: u64,
    due_ns: Option<u64>,
    clock: Clock,
    payload: usize,
) -> Result<()> {
    let sent_ns = clock.now_ns();
    let body = Stamp { publisher: id, seq, sent_ns, due_ns: due_ns.unwrap_or(sent_ns) }.encode(payload);
    publisher.publish(topic, body).await
}

/// Sums what the full-speed subscribers of a run received into its report: counts, merged
/// latency histograms and the last arrival, from which [`Tally::finish`] derives the rates.
pub(super) struct Tally {
    latency: Histogram<u64>,
    latency_from_due: Histogram<u64>,
    start_ns: u64,
    last_recv_ns: u64,
}

impl Tally {
    /// A tally for a run whose first publish was at `start_ns`.
    pub(super) fn new(start_ns: u64) -> Self {
        Tally { latency: latency_histogram(), latency_from_due: latency_histogram(), start_ns, last_recv_ns: start_ns }
    }

    /// Adds one subscriber's counts to `report` and its latencies to the tally.
    pub(super) fn add(&mut self, report: &mut Report, rec: &Recorder, summary: &SubscriberSummary) {
        report.expected += summary.expected;
        report.received += summary.received;
        report.lost += summary.lost;
        report.duplicates += summary.duplicates;
        report.reordered += summary.reordered;
        self.latency.add(&rec.latency).expect("histograms share bounds");
        self.latency_from_due.add(&rec.latency_from_due).expect("histograms share bounds");
        self.last_recv_ns = self.last_recv_ns.max(rec.last_recv_ns.unwrap_or(0));
    }

    /// Fills the report's rates and latencies; the publishers finished at `publish_end_ns`, and
    /// latency from due time is reported for an `open_loop` run only.
    pub(super) fn finish(self, report: &mut Report, publish_end_ns: u64, open_loop: bool) {
        report.publish_secs = (publish_end_ns - self.start_ns) as f64 / 1e9;
        report.offered_rate = if report.publish_secs > 0.0 { report.sent as f64 / report.publish_secs } else { 0.0 };
        let deliver_secs = (self.last_recv_ns - self.start_ns) as f64 / 1e9;
        report.delivered_rate = if deliver_secs > 0.0 { report.received as f64 / deliver_secs } else { 0.0 };
        report.latency_us = LatencySummary::of(&self.latency);
        if open_loop {
            report.latency_from_due_us = LatencySummary::of(&self.latency_from_due);
        }
    }
}

/// Records deliveries until all expected ones arrived, or, once the publishers are done,
/// until none came for `drain` (or, with `drain_is_deadline`, until `drain` has passed since
/// they were done).
pub(super) async fn consume(
    mut sub: Subscription,
    mut rec: Recorder,
    mut done: watch::Receiver<bool>,
    drain: Duration,
    drain_is_deadline: bool,
) -> (Recorder, Subscription) {
    let mut deadline = None;
    while !rec.complete() {
        let next = if *done.borrow() {
            let until = if drain_is_deadline {
                *deadline.get_or_insert_with(|| Instant::now() + drain)
            } else {
                Instant::now() + drain
            };
            match tokio::time::timeout_at(until, sub.deliveries.recv()).await {
                Ok(next) => next,
                Err(_) => break,
            }
        } else {
            tokio::select! {
                next = sub.deliveries.recv() => next,
                _ = done.changed() => continue,
            }
        };
        let Some(delivery) = next else { break };
        rec.record(&delivery.payload, delivery.received_ns);
    }
    (rec, sub)
}

/// Reads one delivery per `delay` until stopped: the slow reader whose backlog the broker must
/// bound.
async fn consume_slowly(
    mut sub: Subscription,
    mut rec: Recorder,
    mut stop: watch::Receiver<bool>,
    delay: Duration,
) -> (Recorder, Subscription) {
    while !*stop.borrow() && !rec.complete() {
        tokio::select! {
            next = sub.deliveries.recv() => match next {
                Some(d) => { rec.record(&d.payload, d.received_ns); }
                None => break,
            },
            _ = stop.changed() => break,
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.changed() => break,
        }
    }
    (rec, sub)
}

/// Runs a flow scenario and fills its report.
pub async fn run<P: Connector, S: Connector>(
    publish: &P,
    subscribe: &S,
    scenario: Scenario,
    ctx: &Ctx,
) -> Result<Report> {
    let args = &ctx.args;
    let (pub_plans, sub_plans) = plan(scenario, ctx)?;
    let mut report = Report::new(scenario.name(), args);
    report.publishers = pub_plans.len();
    report.subscribers = sub_plans.len();
    report.messages_per_publisher = pub_plans.first().map_or(0, |p| p.messages);

    // Subscribers first, each confirmed by the broker, so nothing published can be missed for
    // lack of a subscription.
    let mut subscriptions = Vec::with_capacity(sub_plans.len());
    for (i, plan) in sub_plans.iter().enumerate() {
        let (role, buffer) = if plan.slow { ('w', 1) } else { ('s', SUBSCRIBER_BUFFER) };
        let id = ctx.client_id(role, i);
        subscriptions.push(subscribe.subscribe(id, plan.topic.clone(), ctx.qos, ctx.clock, buffer).await?);
    }
    let mut publishers = Vec::with_capacity(pub_plans.len());
    for i in 0..pub_plans.len() {
        publishers.push(publish.publisher(ctx.client_id('p', i), ctx.qos).await?);
    }

    let before = ctx.sample_broker();
    let own_before = ctx.own_cpu_secs();
    let sampler = RssSampler::start(ctx);
    let (done_tx, done_rx) = watch::channel(false);
    let (stop_slow_tx, stop_slow_rx) = watch::channel(false);
    let slow_delay = Duration::from_millis(args.slow_delay_ms);
    let mut consumers: Vec<(SubscriberPlan, JoinHandle<(Recorder, Subscription)>)> = Vec::new();
    for (plan, sub) in sub_plans.into_iter().zip(subscriptions) {
        let rec = Recorder::new(plan.expected.clone());
        let task = if plan.slow {
            tokio::spawn(consume_slowly(sub, rec, stop_slow_rx.clone(), slow_delay))
        } else {
            tokio::spawn(consume(sub, rec, done_rx.clone(), ctx.drain(), args.drain_is_deadline))
        };
        consumers.push((plan, task));
    }

    let start_ns = ctx.clock.now_ns();
    let rate = (args.rate > 0.0).then(|| args.rate / pub_plans.len() as f64);
    let producers: Vec<_> = pub_plans
        .into_iter()
        .zip(publishers)
        .enumerate()
        .map(|(i, (plan, p))| {
            tokio::spawn(publish_loop(p, i as u32, plan.topic, plan.messages, rate, ctx.clock, args.payload))
        })
        .collect();
    let mut publishers = Vec::new();
    for task in producers {
        let (p, sent, error) = task.await?;
        report.sent += sent;
        report.errors.extend(error);
        publishers.push(p);
    }
    let publish_end_ns = ctx.clock.now_ns();
    report.bench_cpu_publish_secs = ctx.own_cpu_secs() - own_before;
    let _ = done_tx.send(true);

    // Full-speed subscribers first; the slow one is stopped only when they are done, so it
    // lags for the whole load.
    let (slow, fast): (Vec<_>, Vec<_>) = consumers.into_iter().partition(|(plan, _)| plan.slow);
    let mut finished = Vec::new();
    for (plan, task) in fast {
        finished.push((plan, task.await?));
    }
    let _ = stop_slow_tx.send(true);
    for (plan, task) in slow {
        finished.push((plan, task.await?));
    }
    let after = ctx.sample_broker();
    let own_after = ctx.own_cpu_secs();
    report.rss_samples = sampler.finish().await;

    let mut tally = Tally::new(start_ns);
    let mut delivered_total = 0;
    for (plan, (rec, sub)) in finished {
        let closed = sub.close().await;
        let summary = rec.summary(plan.name, closed);
        delivered_total += summary.received;
        if plan.slow {
            report.slow = Some(SlowSummary {
                delay_ms: args.slow_delay_ms,
                slow_received: summary.received,
                slow_closed_by_broker: summary.closed_by_broker.clone(),
                ..SlowSummary::default()
            });
        } else {
            tally.add(&mut report, &rec, &summary);
        }
        report.per_subscriber.push(summary);
    }
    for p in publishers {
        if let Some(reason) = p.close().await {
            report.errors.push(format!("publisher connection closed by broker: {reason}"));
        }
    }

    tally.finish(&mut report, publish_end_ns, rate.is_some());
    report.bench_cpu_secs = own_after - own_before;
    if let (Some(probe), Some(before), Some(after)) = (ctx.broker, before, after) {
        // The broker's CPU went into every delivery, the slow subscriber's included.
        report.broker = Some(BrokerUsage::between(probe.pid, before, after, delivered_total));
        if let Some(slow) = report.slow.as_mut() {
            slow.rss_start_kib = before.rss_kib;
            slow.rss_end_kib = after.rss_kib;
            slow.rss_max_kib = report.rss_samples.iter().map(|s| s.1).chain([after.rss_kib]).max().unwrap_or(0);
        }
    }
    Ok(report)
}
