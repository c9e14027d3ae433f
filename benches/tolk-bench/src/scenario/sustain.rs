//! `sustain`: the highest offered rate at which a broker delivers every message, found by a
//! bounded search over open-loop runs of the flow scenarios.
//!
//! Each step is one run of `flow` (fresh clients and topics, so nothing left over from the step
//! before can arrive in it) at a fixed total rate for `--window`, whose messages must all
//! arrive within `--drain-ms` of the last publish. The search doubles the rate while steps are
//! clean, then bisects between the highest clean and the lowest unclean rate, and never runs
//! more than `--steps` steps, so a run has a known upper time.
//!
//! The bench is measured too: a step in which it used nearly all the CPU it may run on may have
//! measured the generator rather than the broker, and the verdict says so. Publishers that fell
//! behind the pace with CPU to spare were held back by the broker (its acknowledgements, TCP
//! backpressure): that step is not clean, and it is the broker's limit. This module owns the search and the verdicts; it knows
//! nothing of protocols, and leaves publishing and recording to `flow`.

use anyhow::{Context, Result};

use super::{Scenario, broker_for, flow, run_attached};
use crate::broker::cpus_allowed;
use crate::cli::{LoadArgs, Shape, SustainArgs};
use crate::report::{Report, SustainStep, SustainSummary};

/// Share of the cores it may run on at or above which the generator counts as saturated.
const GENERATOR_CPU_LIMIT: f64 = 0.90;

/// Share of the asked publish rate below which the publishers count as having fallen behind.
const PACE_LIMIT: f64 = 0.97;

/// Rates closer than this share of the higher one are not worth another step: two runs at
/// the same rate differ by more than that on a shared machine.
const RESOLUTION: f64 = 0.01;

/// What the search needs to know of a finished step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// Total rate offered, in messages/s.
    pub rate: f64,
    /// Every message arrived in time and the publishers kept the pace.
    pub clean: bool,
    /// The generator may have set the step's limit.
    pub generator_bound: bool,
}

/// The bounds of a search: where it starts, its ceiling and its step budget.
#[derive(Debug, Clone, Copy)]
pub struct Search {
    /// First rate, in messages/s.
    pub start: f64,
    /// Highest rate offered, in messages/s.
    pub max: f64,
    /// Most steps.
    pub steps: u32,
}

impl Search {
    /// The rate of the next step given the outcomes so far, or `None` when the search is over:
    /// the budget is spent, the rates left are within `RESOLUTION`, the ceiling was clean, or
    /// a clean step was generator-bound (a higher rate would measure the bench).
    pub fn next_rate(&self, outcomes: &[Outcome]) -> Option<f64> {
        if outcomes.len() >= self.steps as usize {
            return None;
        }
        if outcomes.is_empty() {
            return Some(self.start.min(self.max).round().max(1.0));
        }
        let clean = highest_clean(outcomes).map(|i| &outcomes[i]);
        if clean.is_some_and(|c| c.generator_bound) {
            return None;
        }
        let low = clean.map_or(0.0, |c| c.rate);
        let high = lowest_unclean_above(outcomes, low).map(|o| o.rate);
        let next = match high {
            None => (low * 2.0).min(self.max),
            Some(high) if high - low <= high * RESOLUTION => return None,
            Some(high) => (low + high) / 2.0,
        }
        .round();
        // Rounding to whole messages/s can land on a bound: then there is nothing between.
        (next > low && high.is_none_or(|h| next < h) && next >= 1.0).then_some(next)
    }

    /// The verdict on finished steps: which was the highest clean one, and whether its rate is
    /// only a lower bound of the broker's because the generator or the search limited it.
    pub fn verdict(outcomes: &[Outcome]) -> Verdict {
        let Some(best) = highest_clean(outcomes) else {
            return Verdict { sustainable: None, generator_bound: false, search_limited: false };
        };
        let above = lowest_unclean_above(outcomes, outcomes[best].rate);
        Verdict {
            sustainable: Some(best),
            generator_bound: outcomes[best].generator_bound || above.is_some_and(|o| o.generator_bound),
            search_limited: above.is_none(),
        }
    }
}

/// What a search found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Index of the highest clean step.
    pub sustainable: Option<usize>,
    /// That step, or the lowest unclean step above it, was generator-bound.
    pub generator_bound: bool,
    /// No step above it was run.
    pub search_limited: bool,
}

/// Index of the clean step at the highest rate.
fn highest_clean(outcomes: &[Outcome]) -> Option<usize> {
    (0..outcomes.len()).filter(|&i| outcomes[i].clean).max_by(|&a, &b| outcomes[a].rate.total_cmp(&outcomes[b].rate))
}

/// The unclean step at the lowest rate above `rate`.
fn lowest_unclean_above(outcomes: &[Outcome], rate: f64) -> Option<&Outcome> {
    outcomes.iter().filter(|o| !o.clean && o.rate > rate).min_by(|a, b| a.rate.total_cmp(&b.rate))
}

/// Why a step may have measured the generator: it used at least `GENERATOR_CPU_LIMIT` of its
/// cores while publishing. Falling behind the pace alone is not it: with CPU to spare, the
/// publishers were waiting for the broker (QoS 1 acknowledgements, TCP backpressure), which
/// makes the step unclean (see `step_of`) and the broker's limit.
pub fn generator_limit(cpu_share: f64, cores: usize) -> Option<String> {
    (cpu_share >= GENERATOR_CPU_LIMIT).then(|| format!("CPU {:.0}% of {cores} core(s)", cpu_share * 100.0))
}

/// The flow scenario of a shape.
fn scenario(shape: Shape) -> Scenario {
    match shape {
        Shape::FanIn => Scenario::FanIn,
        Shape::FanOut => Scenario::FanOut,
        Shape::P2p => Scenario::P2p,
    }
}

/// The flow run of one step: `rate` over all publishers for the window, drained by deadline.
fn step_args(args: &SustainArgs, rate: f64) -> LoadArgs {
    let publishers = args.publishers.unwrap_or(flow::defaults(scenario(args.shape)).0).max(1);
    let messages = (rate * args.window.as_secs_f64() / publishers as f64).ceil().max(1.0) as u64;
    LoadArgs {
        target: args.target.clone(),
        publish_target: None,
        broker_pid: args.broker_pid,
        spawn_broker: args.spawn_broker.clone(),
        messages: Some(messages),
        rate,
        publishers: args.publishers,
        subscribers: args.subscribers,
        payload: args.payload,
        qos: args.qos,
        json: None,
        label: args.label.clone(),
        case: None,
        iterations: 1,
        connections: 0,
        connect_concurrency: 1,
        slow_delay_ms: 0,
        drain_ms: args.drain_ms,
        drain_is_deadline: true,
    }
}

/// A step's row from its flow report.
fn step_of(rate: f64, report: &Report, cores: usize) -> SustainStep {
    let cpu_share = if report.publish_secs > 0.0 {
        report.bench_cpu_publish_secs / report.publish_secs / cores as f64
    } else {
        0.0
    };
    let pace = report.offered_rate / rate;
    let generator_bound = generator_limit(cpu_share, cores);
    SustainStep {
        offered_rate: rate,
        sent: report.sent,
        send_rate: report.offered_rate,
        expected: report.expected,
        received: report.received,
        lost: report.lost,
        delivered_rate: report.delivered_rate,
        latency_us: report.latency_us,
        broker_cpu_us_per_msg: report.cpu_us_per_delivered(),
        generator_cpu_share: cpu_share,
        generator_bound,
        clean: report.lost == 0 && report.errors.is_empty() && pace >= PACE_LIMIT,
    }
}

/// CPU numbers as the kernel lists them (`0,1,2`); ranges are not folded back, the lists are
/// short.
fn cpu_list(cpus: &[u32]) -> String {
    cpus.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// Runs the search and reports the sustainable step with every step's figures.
pub async fn run(args: &SustainArgs) -> Result<Report> {
    let search = Search { start: args.start_rate, max: args.max_rate, steps: args.steps };
    let own_cpus = cpus_allowed("self")?;
    let cores = own_cpus.len().max(1);
    let broker = broker_for(&step_args(args, search.start)).await?;
    let probe = broker.as_ref().map(|b| b.probe());
    let broker_cpus = probe.and_then(|p| cpus_allowed(&p.pid.to_string()).ok());
    if broker_cpus.as_ref().is_some_and(|b| b.iter().any(|c| own_cpus.contains(c))) {
        eprintln!(
            "warning: the broker (CPUs {}) and the bench (CPUs {}) share cores; pin them apart with taskset",
            cpu_list(broker_cpus.as_deref().unwrap_or_default()),
            cpu_list(&own_cpus)
        );
    }
    println!("sustain {} against {} ({})", scenario(args.shape).name(), args.label, args.target.addr);
    println!("  {}", SustainStep::HEADER);
    let mut outcomes = Vec::new();
    let mut steps: Vec<(SustainStep, Report)> = Vec::new();
    let result = async {
        while let Some(rate) = search.next_rate(&outcomes) {
            // A step after an overloaded one must not pay for its backlog.
            if let Some(probe) = probe {
                probe.settle().await;
            }
            let report = run_attached(scenario(args.shape), step_args(args, rate), probe)
                .await
                .with_context(|| format!("step {} at {rate} msg/s", steps.len() + 1))?;
            let step = step_of(rate, &report, cores);
            println!("  {}", step.line(steps.len() + 1));
            outcomes.push(Outcome { rate, clean: step.clean, generator_bound: step.generator_bound.is_some() });
            steps.push((step, report));
        }
        anyhow::Ok(())
    }
    .await;
    if let Some(broker) = broker {
        broker.stop().await;
    }
    result?;

    let verdict = Search::verdict(&outcomes);
    // The report's own figures are the sustainable step's; with none, the lowest rate tried.
    let shown = verdict.sustainable.unwrap_or_else(|| {
        (0..steps.len()).min_by(|&a, &b| outcomes[a].rate.total_cmp(&outcomes[b].rate)).unwrap_or(0)
    });
    let mut report = steps.get(shown).map(|(_, r)| r.clone()).context("the search ran no step")?;
    report.scenario = "sustain".into();
    report.case =
        args.case.clone().unwrap_or_else(|| format!("sustain-{}-qos{}", scenario(args.shape).name(), args.qos));
    report.sustain = Some(SustainSummary {
        shape: scenario(args.shape).name().into(),
        window_secs: args.window.as_secs_f64(),
        drain_ms: args.drain_ms,
        start_rate: search.start,
        max_rate: search.max,
        max_steps: search.steps,
        generator_cpus: cpu_list(&own_cpus),
        broker_cpus: broker_cpus.as_deref().map(cpu_list),
        steps: steps.into_iter().map(|(s, _)| s).collect(),
        sustainable_step: verdict.sustainable,
        generator_bound: verdict.generator_bound,
        search_limited: verdict.search_limited,
    });
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEARCH: Search = Search { start: 1000.0, max: 100_000.0, steps: 8 };

    fn clean(rate: f64) -> Outcome {
        Outcome { rate, clean: true, generator_bound: false }
    }

    fn lossy(rate: f64) -> Outcome {
        Outcome { rate, clean: false, generator_bound: false }
    }

    /// Runs the search against a broker that carries everything up to `capacity`.
    fn simulate(search: Search, capacity: f64) -> Vec<Outcome> {
        let mut outcomes = Vec::new();
        while let Some(rate) = search.next_rate(&outcomes) {
            outcomes.push(if rate <= capacity { clean(rate) } else { lossy(rate) });
        }
        outcomes
    }

    #[test]
    fn starts_at_the_start_rate_and_doubles_while_clean() {
        assert_eq!(SEARCH.next_rate(&[]), Some(1000.0));
        assert_eq!(SEARCH.next_rate(&[clean(1000.0)]), Some(2000.0));
        assert_eq!(SEARCH.next_rate(&[clean(1000.0), clean(2000.0)]), Some(4000.0));
    }

    #[test]
    fn bisects_between_the_last_clean_and_the_first_lossy_rate() {
        let steps = [clean(1000.0), clean(2000.0), lossy(4000.0)];
        assert_eq!(SEARCH.next_rate(&steps), Some(3000.0));
        let steps = [clean(1000.0), clean(2000.0), lossy(4000.0), lossy(3000.0)];
        assert_eq!(SEARCH.next_rate(&steps), Some(2500.0));
        let steps = [clean(1000.0), clean(2000.0), lossy(4000.0), clean(3000.0)];
        assert_eq!(SEARCH.next_rate(&steps), Some(3500.0));
    }

    #[test]
    fn halves_when_the_start_rate_is_already_lossy() {
        assert_eq!(SEARCH.next_rate(&[lossy(1000.0)]), Some(500.0));
        assert_eq!(SEARCH.next_rate(&[lossy(1000.0), lossy(500.0)]), Some(250.0));
        assert_eq!(SEARCH.next_rate(&[lossy(1.0)]), None);
    }

    #[test]
    fn stops_at_the_step_budget_the_ceiling_and_the_resolution() {
        let outcomes = simulate(SEARCH, 37_000.0);
        assert_eq!(outcomes.len(), 8);
        let verdict = Search::verdict(&outcomes);
        let best = outcomes[verdict.sustainable.unwrap()].rate;
        assert!((32_000.0..=37_000.0).contains(&best), "{outcomes:?}");
        assert!(!verdict.search_limited && !verdict.generator_bound);

        // Clean up to the ceiling: the ceiling is tried once, then the search ends.
        let outcomes = simulate(SEARCH, f64::INFINITY);
        let rates: Vec<f64> = outcomes.iter().map(|o| o.rate).collect();
        assert_eq!(rates, [1000.0, 2000.0, 4000.0, 8000.0, 16_000.0, 32_000.0, 64_000.0, 100_000.0]);
        assert!(Search::verdict(&outcomes).search_limited);
        let short = Search { steps: 3, ..SEARCH };
        assert!(Search::verdict(&simulate(short, f64::INFINITY)).search_limited);

        // Bounds 1% apart: nothing left to learn.
        assert_eq!(SEARCH.next_rate(&[clean(10_000.0), lossy(10_050.0)]), None);
        // A budget larger than the resolution needs is not spent.
        let long = Search { steps: 100, ..SEARCH };
        assert!(simulate(long, 5000.0).len() < 20);
    }

    #[test]
    fn a_clean_generator_bound_step_ends_the_search_and_bounds_the_result() {
        let bound = Outcome { rate: 2000.0, clean: true, generator_bound: true };
        assert_eq!(SEARCH.next_rate(&[clean(1000.0), bound]), None);
        let verdict = Search::verdict(&[clean(1000.0), bound]);
        assert_eq!(verdict.sustainable, Some(1));
        assert!(verdict.generator_bound);
    }

    #[test]
    fn a_generator_bound_step_above_bounds_the_result() {
        let bound_lossy = Outcome { rate: 4000.0, clean: false, generator_bound: true };
        let verdict = Search::verdict(&[clean(1000.0), clean(2000.0), bound_lossy, lossy(3000.0)]);
        assert_eq!(verdict, Verdict { sustainable: Some(1), generator_bound: false, search_limited: false });
        let verdict = Search::verdict(&[clean(1000.0), clean(2000.0), bound_lossy]);
        assert_eq!(verdict, Verdict { sustainable: Some(1), generator_bound: true, search_limited: false });
        assert_eq!(Search::verdict(&[lossy(1000.0)]).sustainable, None);
    }

    #[test]
    fn the_generator_is_flagged_by_its_cpu_alone() {
        assert_eq!(generator_limit(0.5, 1), None, "behind the pace with CPU to spare is the broker's doing");
        assert_eq!(generator_limit(0.95, 1).unwrap(), "CPU 95% of 1 core(s)");
    }
}
