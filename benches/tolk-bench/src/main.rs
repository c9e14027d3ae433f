//! `tolk-bench`: the load generator for tolk and its peer brokers. See docs/benchmarks.md for
//! the scenarios and the one-command comparison with Mosquitto.

mod broker;
mod cli;
mod clock;
mod compare;
mod matrix;
mod payload;
mod proto;
mod recorder;
mod report;
mod scenario;

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use serde::Serialize;

use crate::cli::{Cli, Command};
use crate::report::Report;
use crate::scenario::Scenario;

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,lapin=off".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let (scenario, args) = match cli.command {
        Command::Compare(args) => {
            print!("{}", compare::run(&args)?);
            return Ok(());
        }
        Command::BurstMatrix(args) => {
            let json = args.load.json.clone();
            let (reports, table) = matrix::run(args).await?;
            print!("{table}");
            if let Some(path) = json {
                let text = serde_json::to_string_pretty(&reports)?;
                std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            }
            return Ok(());
        }
        Command::Attack(args) => {
            let report = scenario::attack::run(&args).await?;
            return output(&report, report.to_text(), report.row(), args.report.json, args.report.table);
        }
        Command::DurableConfirms(args) => {
            println!("{}", scenario::durable::run(&args).await?);
            return Ok(());
        }
        Command::Sustain(args) => {
            let report = scenario::sustain::run(&args).await?;
            return print_report(&report, args.json);
        }
        Command::Mint(args) => {
            let report = scenario::mint::run(&args).await?;
            return print_report(&report, args.json);
        }
        Command::RetainedStall(args) => {
            let report = scenario::stall::run(&args).await?;
            return output(&report, report.to_text(), report.row(), args.report.json, args.report.table);
        }
        Command::Burst(a) => (Scenario::Burst, a),
        Command::FanIn(a) => (Scenario::FanIn, a),
        Command::FanOut(a) => (Scenario::FanOut, a),
        Command::P2p(a) => (Scenario::P2p, a),
        Command::Idle(a) => (Scenario::Idle, a),
        Command::SlowSubscriber(a) => (Scenario::SlowSubscriber, a),
    };
    let json = args.json.clone();
    let report = scenario::run(scenario, args).await?;
    print_report(&report, json)
}

/// Prints a scenario's report and keeps it as JSON for `compare`.
fn print_report(report: &Report, json: Option<PathBuf>) -> Result<()> {
    print!("{}", report.to_text());
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(report)?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Prints a report, keeps it as JSON, and appends its row (`(header, row)`) to a Markdown table.
fn output(
    report: &impl Serialize,
    text: String,
    (header, row): (&str, String),
    json: Option<PathBuf>,
    table: Option<PathBuf>,
) -> Result<()> {
    print!("{text}");
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(report)?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = table {
        let new = std::fs::metadata(&path).map_or(true, |m| m.len() == 0);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        if new {
            write!(file, "{header}")?;
        }
        writeln!(file, "{row}").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
