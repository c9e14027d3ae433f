//! Durable throughput: persistent AMQP messages with publisher confirms into a durable queue
//! that nobody consumes, with `--window` of them unconfirmed at once, as a pipelining client
//! does. A broker that confirms only what is on disk is bounded by its sync rate and how well
//! it groups syncs; the queue's message count afterwards shows that every confirmed message
//! was kept.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use lapin::BasicProperties;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;

use super::new_run_id;
use crate::cli::DurableArgs;
use crate::proto::amqp::{AmqpConnector, PERSISTENT};

/// Runs the load; returns one Markdown table row: label, messages, seconds, confirmed per
/// second, nacked, and confirmed messages missing from the queue.
pub async fn run(args: &DurableArgs) -> Result<String> {
    let amqp = AmqpConnector::new(&args.target);
    let (connection, channel) = amqp.open("tolkbench-durable").await?;
    let queue = format!("tolkbench-durable-{}", new_run_id());
    let durable = QueueDeclareOptions { durable: true, ..QueueDeclareOptions::default() };
    channel.queue_declare(queue.as_str().into(), durable, FieldTable::default()).await.context("queue.declare")?;
    channel.confirm_select(ConfirmSelectOptions::default()).await.context("confirm.select")?;
    let properties = BasicProperties::default().with_delivery_mode(PERSISTENT);
    let body = vec![b'x'; args.payload];
    let (mut acked, mut nacked) = (0u64, 0u64);
    let mut in_flight: FuturesUnordered<lapin::PublisherConfirm> = FuturesUnordered::new();
    let start = Instant::now();
    for _ in 0..args.messages {
        while in_flight.len() >= args.window.max(1) {
            let confirm = in_flight.next().await.expect("the window is not empty");
            if confirm.context("waiting for a confirm")?.is_ack() { acked += 1 } else { nacked += 1 }
        }
        let publish = channel
            .basic_publish("".into(), queue.as_str().into(), BasicPublishOptions::default(), &body, properties.clone())
            .await
            .context("basic.publish")?;
        in_flight.push(publish);
    }
    while let Some(confirm) = in_flight.next().await {
        if confirm.context("waiting for a confirm")?.is_ack() { acked += 1 } else { nacked += 1 }
    }
    let secs = start.elapsed().as_secs_f64();
    let passive = QueueDeclareOptions { passive: true, durable: true, ..QueueDeclareOptions::default() };
    let kept = channel.queue_declare(queue.as_str().into(), passive, FieldTable::default()).await?.message_count();
    if !args.keep {
        channel.queue_delete(queue.as_str().into(), QueueDeleteOptions::default()).await.context("queue.delete")?;
    }
    let _ = connection.close(200, "bye".into()).await;
    if acked + nacked != args.messages {
        bail!("{} confirms for {} messages", acked + nacked, args.messages);
    }
    let lost = acked.saturating_sub(u64::from(kept));
    Ok(format!("| {} | {} | {secs:.2} s | {:.0} | {nacked} | {lost} |", args.label, args.messages, acked as f64 / secs))
}
