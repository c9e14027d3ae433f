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

use anyhow::{Context, Result};
use clap::Parser;

use crate::cli::{Cli, Command};
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
        Command::Burst(a) => (Scenario::Burst, a),
        Command::FanIn(a) => (Scenario::FanIn, a),
        Command::FanOut(a) => (Scenario::FanOut, a),
        Command::P2p(a) => (Scenario::P2p, a),
        Command::Idle(a) => (Scenario::Idle, a),
        Command::SlowSubscriber(a) => (Scenario::SlowSubscriber, a),
    };
    let json = args.json.clone();
    let report = scenario::run(scenario, args).await?;
    print!("{}", report.to_text());
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
