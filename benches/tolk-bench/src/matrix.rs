//! `tolk-bench burst-matrix`: the OKSE evaluation's table for one broker. For every ordered
//! pair of its listeners (publisher's protocol → subscriber's protocol) the burst scenario runs
//! over the same topic space, so each cell shows what one protocol translation costs.

use std::fmt::Write as _;

use anyhow::Result;

use crate::broker::Broker;
use crate::cli::MatrixArgs;
use crate::report::Report;
use crate::scenario::{self, Scenario};

/// The slowest and fastest OKSE figures per burst of 100 (Raspberry Pi 3), in ms.
const OKSE_BURST_MS: (f64, f64) = (2300.0, 20800.0);

/// Runs every cell; returns the reports and the Markdown matrix.
pub async fn run(args: MatrixArgs) -> Result<(Vec<Report>, String)> {
    let mut load = args.load.clone();
    load.target = args.endpoints[0].clone();
    let broker = scenario::broker_for(&load).await?;
    let probe = broker.as_ref().map(Broker::probe);
    let mut cells = Vec::new();
    let mut reports = Vec::new();
    for publish in &args.endpoints {
        for subscribe in &args.endpoints {
            let mut cell = load.clone();
            cell.target = subscribe.clone();
            cell.publish_target = Some(publish.clone());
            cell.case = Some(format!("{}→{}", publish.protocol.scheme(), subscribe.protocol.scheme()));
            cell.json = None;
            match scenario::run_attached(Scenario::Burst, cell, probe).await {
                Ok(report) => {
                    print!("{}", report.to_text());
                    let text = match report.burst.as_ref().filter(|b| !b.burst_ms.is_empty()) {
                        Some(b) => format!("{:.2} ms ({:.0}×)", b.median_ms, OKSE_BURST_MS.0 / b.median_ms.max(1e-3)),
                        None => format!("incomplete: {}", report.errors.join("; ")),
                    };
                    cells.push(text);
                    reports.push(report);
                }
                Err(e) => cells.push(format!("failed: {e:#}")),
            }
        }
    }
    if let Some(broker) = broker {
        broker.stop().await;
    }

    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nMedian time from the first publish of a burst of {} to its last delivery; in brackets, how many times faster than OKSE's best cell ({} s; its worst was {} s).\n",
        load.messages.unwrap_or(100),
        OKSE_BURST_MS.0 / 1000.0,
        OKSE_BURST_MS.1 / 1000.0
    );
    let names: Vec<&str> = args.endpoints.iter().map(|e| e.protocol.scheme()).collect();
    let _ = writeln!(out, "| publisher ↓ subscriber → | {} |", names.join(" | "));
    let _ = writeln!(out, "|---|{}", "---:|".repeat(names.len()));
    for (row, name) in cells.chunks(names.len()).zip(&names) {
        let _ = writeln!(out, "| {name} | {} |", row.join(" | "));
    }
    Ok((reports, out))
}
