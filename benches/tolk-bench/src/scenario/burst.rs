//! The OKSE evaluation's measure (Johnsen, FFI): with a subscriber in place, publish a burst of
//! 100 messages and time from the first publish until the 100th arrives. OKSE took 2.3 s to
//! 20.8 s per burst on a Raspberry Pi 3; tolk aims to be 100× faster in every protocol pair.

use anyhow::Result;

use super::{Ctx, RssSampler};
use crate::payload::Stamp;
use crate::proto::{Connector, Publisher, Subscription};
use crate::recorder::Recorder;
use crate::report::{BrokerUsage, BurstSummary, LatencySummary, Report};

/// Messages per burst in the OKSE table.
const OKSE_BURST: u64 = 100;

/// Waits until `target` distinct messages have been recorded, or none arrived for the drain
/// time. Returns the receive time of the last distinct message.
async fn receive_until(sub: &mut Subscription, rec: &mut Recorder, target: u64, ctx: &Ctx) -> Option<u64> {
    let mut last = None;
    while rec.unique < target {
        match tokio::time::timeout(ctx.drain(), sub.deliveries.recv()).await {
            Ok(Some(d)) => {
                if rec.record(&d.payload, d.received_ns) {
                    last = Some(d.received_ns);
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
    last
}

/// Runs `--iterations` bursts over one publisher and one subscriber.
pub async fn run<P: Connector, S: Connector>(publish: &P, subscribe: &S, ctx: &Ctx) -> Result<Report> {
    let args = &ctx.args;
    let messages = args.messages.unwrap_or(OKSE_BURST);
    let iterations = args.iterations.max(1);
    let mut report = Report::new("burst", args);
    report.publishers = 1;
    report.subscribers = 1;
    report.messages_per_publisher = messages * u64::from(iterations);

    let topic = ctx.topic("burst");
    // Each burst is its own "publisher" in the recorder, so its sequence starts at 0.
    let mut rec = Recorder::new(vec![messages; iterations as usize]);
    let mut sub =
        subscribe.subscribe(ctx.client_id('s', 0), topic.clone(), ctx.qos, ctx.clock, messages as usize).await?;
    let mut publisher = publish.publisher(ctx.client_id('p', 0), ctx.qos).await?;

    let before = ctx.sample_broker();
    let own_before = ctx.own_cpu_secs();
    let sampler = RssSampler::start(ctx);
    let start_ns = ctx.clock.now_ns();
    let mut bursts_ms = Vec::new();
    for burst in 0..iterations {
        let first_ns = ctx.clock.now_ns();
        let target = rec.unique + messages;
        // Publish and receive concurrently: a burst larger than the subscriber's buffer must
        // not deadlock against TCP backpressure.
        let send = async {
            for seq in 0..messages {
                let sent_ns = ctx.clock.now_ns();
                let body = Stamp { publisher: burst, seq, sent_ns, due_ns: sent_ns }.encode(args.payload);
                publisher.publish(&topic, body).await?;
                report.sent += 1;
            }
            anyhow::Ok(())
        };
        let (sent, last_ns) = tokio::join!(send, receive_until(&mut sub, &mut rec, target, ctx));
        if let Err(e) = sent {
            report.errors.push(format!("burst {burst}: {e:#}"));
            break;
        }
        match last_ns {
            Some(last) if rec.unique >= target => bursts_ms.push((last - first_ns) as f64 / 1e6),
            _ => report
                .errors
                .push(format!("burst {burst}: only {} of {messages} arrived", messages - (target - rec.unique))),
        }
    }
    let end_ns = ctx.clock.now_ns();
    let after = ctx.sample_broker();
    report.bench_cpu_secs = ctx.own_cpu_secs() - own_before;
    report.rss_samples = sampler.finish().await;

    let summary = rec.summary("sub-0".into(), sub.close().await);
    if let Some(reason) = publisher.close().await {
        report.errors.push(format!("publisher connection closed by broker: {reason}"));
    }
    report.expected = summary.expected;
    report.received = summary.received;
    report.lost = summary.lost;
    report.duplicates = summary.duplicates;
    report.reordered = summary.reordered;
    report.per_subscriber.push(summary);
    report.latency_us = LatencySummary::of(&rec.latency);
    let secs = (end_ns - start_ns) as f64 / 1e9;
    report.publish_secs = secs;
    report.offered_rate = if secs > 0.0 { report.sent as f64 / secs } else { 0.0 };
    report.delivered_rate = if secs > 0.0 { report.received as f64 / secs } else { 0.0 };
    if let (Some(probe), Some(before), Some(after)) = (ctx.broker, before, after) {
        report.broker = Some(BrokerUsage::between(probe.pid, before, after, report.received));
    }
    let mut sorted = bursts_ms.clone();
    sorted.sort_by(f64::total_cmp);
    report.burst = Some(BurstSummary {
        messages,
        min_ms: sorted.first().copied().unwrap_or(0.0),
        median_ms: sorted.get(sorted.len() / 2).copied().unwrap_or(0.0),
        max_ms: sorted.last().copied().unwrap_or(0.0),
        burst_ms: bursts_ms,
    });
    Ok(report)
}
