//! Idle connections: open many connections that do nothing, measure how fast the broker
//! accepts them and how much memory each costs it (the aim is at most 2 KB per idle MQTT
//! connection and 100,000 connections held on a Pi).

use std::time::Duration;

use anyhow::Result;
use tokio::task::JoinSet;

use super::{Ctx, connect_many};
use crate::proto::Connector;
use crate::report::{BrokerUsage, IdleSummary, Report};

/// Time given to the broker after the last connect before its memory is read, so buffers
/// allocated just after CONNACK are counted.
const SETTLE: Duration = Duration::from_millis(500);

/// Opens `--connections` connections, `--connect-concurrency` at a time.
pub async fn run<C: Connector>(connector: &C, ctx: &Ctx) -> Result<Report> {
    let args = &ctx.args;
    let requested = args.connections;
    let mut report = Report::new("idle", args);
    report.subscribers = requested;

    let before = ctx.sample_broker();
    let own_before = ctx.own_cpu_secs();
    let opened = connect_many(requested, args.connect_concurrency, |i| {
        let (connector, id) = (connector.clone(), ctx.client_id('i', i));
        async move { connector.idle(id).await }
    })
    .await;
    report.errors = opened.errors;
    let (failed, connect_secs) = (opened.failed, opened.secs);
    let held: Vec<_> = opened.clients.into_iter().map(|(_, c)| c).collect();
    tokio::time::sleep(SETTLE).await;
    let after = ctx.sample_broker();
    report.bench_cpu_secs = ctx.own_cpu_secs() - own_before;

    let connected = held.len();
    let mut idle = IdleSummary {
        requested,
        connected,
        failed,
        connect_secs,
        connect_rate: if connect_secs > 0.0 { connected as f64 / connect_secs } else { 0.0 },
        ..IdleSummary::default()
    };
    if let (Some(probe), Some(before), Some(after)) = (ctx.broker, before, after) {
        if connected > 0 {
            let grown = after.rss_kib.saturating_sub(before.rss_kib) as f64 * 1024.0;
            idle.rss_bytes_per_connection = Some(grown / connected as f64);
            idle.cpu_us_per_connection = Some((after.cpu_secs - before.cpu_secs).max(0.0) * 1e6 / connected as f64);
        }
        report.broker = Some(BrokerUsage::between(probe.pid, before, after, 0));
    }
    report.idle = Some(idle);

    // Say goodbye concurrently; one by one, 100,000 closes would outlast the run.
    let mut closing = JoinSet::new();
    for connection in held {
        closing.spawn(connection.close());
    }
    while closing.join_next().await.is_some() {}
    Ok(report)
}
