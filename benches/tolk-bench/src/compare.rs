//! `tolk-bench compare DIR`: reads the JSON reports of one comparison run and prints Markdown
//! tables of candidate/baseline ratios, ready for docs/benchmarks.md. Ratios from the same run
//! are the figures that mean something on a shared machine; absolute numbers are noise.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{Context, Result, bail};

use crate::cli::CompareArgs;
use crate::report::{LatencySummary, MintSummary, Report, SustainSummary};

/// Order of scenarios in the tables: the OKSE burst first, then throughput, then resources.
const SCENARIO_ORDER: [&str; 8] = ["burst", "fan-in", "fan-out", "p2p", "sustain", "mint", "slow-subscriber", "idle"];

/// The fastest OKSE figure for a burst of 100 messages, in ms (Raspberry Pi 3).
const OKSE_BEST_BURST_MS: f64 = 2300.0;

/// Broker CPU time below which CPU per message is not shown: /proc counts in clock ticks
/// (10 ms), so fewer than five ticks would be a figure with more than 20% error.
const MIN_CPU_SECS: f64 = 0.05;

/// One case's reports: (candidate, baseline), either possibly missing.
type Pair<'a> = (Option<&'a Report>, Option<&'a Report>);

/// Reads every report in the directory.
fn load(args: &CompareArgs) -> Result<Vec<Report>> {
    let mut reports = Vec::new();
    let entries = std::fs::read_dir(&args.dir).with_context(|| format!("reading {}", args.dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            let report: Report = serde_json::from_str(&text)
                .with_context(|| format!("{} is not a tolk-bench report", path.display()))?;
            reports.push(report);
        }
    }
    if reports.is_empty() {
        bail!("no *.json reports in {}", args.dir.display());
    }
    Ok(reports)
}

/// `candidate / baseline`, printed with two decimals, or `–` when either is missing or zero.
fn ratio(candidate: Option<f64>, baseline: Option<f64>) -> String {
    match (candidate, baseline) {
        (Some(c), Some(b)) if b > 0.0 => format!("{:.2}", c / b),
        _ => "–".into(),
    }
}

/// A figure with a sensible number of digits for its size.
fn num(value: Option<f64>) -> String {
    match value {
        None => "–".into(),
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) if v >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

/// `candidate / baseline` of two figures each of which may be only a lower bound (`true`):
/// the ratio of a bound candidate is itself a lower bound, of a bound baseline an upper one,
/// and of two bounds unknown.
fn bounded_ratio(candidate: Option<(f64, bool)>, baseline: Option<(f64, bool)>) -> String {
    let plain = ratio(candidate.map(|c| c.0), baseline.map(|b| b.0));
    match (candidate.map(|c| c.1), baseline.map(|b| b.1)) {
        _ if plain == "–" => plain,
        (Some(true), Some(true)) => "?".into(),
        (Some(true), _) => format!("≥ {plain}"),
        (_, Some(true)) => format!("≤ {plain}"),
        _ => plain,
    }
}

/// `p50 / p99 / p99.9` in µs, or `–` when there is no latency.
fn percentiles(latency: Option<LatencySummary>) -> String {
    latency.map_or("–".into(), |l| format!("{} / {} / {}", l.p50, l.p99, l.p999))
}

/// Messages lost by each side, `candidate / baseline`.
fn lost(cand: &Option<&Report>, base: &Option<&Report>) -> String {
    let one = |r: &Option<&Report>| r.map_or("–".into(), |r| r.lost.to_string());
    format!("{} / {}", one(cand), one(base))
}

/// A report's sustain search, if it is one (a function: a closure cannot say that the summary
/// lives as long as the report).
fn summary<'a>(r: &Option<&'a Report>) -> Option<&'a SustainSummary> {
    r.and_then(|r| r.sustain.as_ref())
}

/// Highest broker RSS seen during the run, in MiB.
fn peak_rss_mib(r: &Report) -> Option<f64> {
    let after = r.broker.as_ref().map(|b| b.after.rss_kib);
    r.rss_samples.iter().map(|s| s.1).chain(after).max().map(|kib| kib as f64 / 1024.0)
}

/// Prints the comparison tables.
pub fn run(args: &CompareArgs) -> Result<String> {
    let reports = load(args)?;
    // case → (candidate, baseline)
    let mut cases: BTreeMap<(usize, String), Pair> = BTreeMap::new();
    for r in &reports {
        let rank = SCENARIO_ORDER.iter().position(|s| *s == r.scenario).unwrap_or(SCENARIO_ORDER.len());
        let slot = cases.entry((rank, r.case.clone())).or_default();
        if r.label == args.candidate {
            slot.0 = Some(r);
        } else if r.label == args.baseline {
            slot.1 = Some(r);
        }
    }
    let (c, b) = (&args.candidate, &args.baseline);
    let mut out = String::new();
    let _ = writeln!(out, "Ratios are {c}/{b}: above 1 is better for throughput, below 1 is better for the rest.\n");
    // Sustain and mint reports have tables of their own, where a figure the generator bounded
    // says so.
    let closed = |r: &Report| r.idle.is_none() && r.sustain.is_none() && r.mint.is_none();
    let main: Vec<_> = cases.iter().filter(|(_, (x, y))| x.or(*y).is_some_and(closed)).collect();
    if !main.is_empty() {
        let _ = writeln!(
            out,
            "| case | msg/s {c} | msg/s {b} | × | p99 µs {c} | p99 µs {b} | × | CPU µs/msg {c} | CPU µs/msg {b} | × | peak RSS MiB {c} | peak RSS MiB {b} | × | lost {c} / {b} |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    }
    for ((_, case), (cand, base)) in main {
        let thr = |r: &Option<&Report>| r.map(|r| r.delivered_rate);
        let p99 = |r: &Option<&Report>| r.and_then(|r| r.latency_us.map(|l| l.p99 as f64));
        let cpu = |r: &Option<&Report>| {
            r.filter(|r| r.broker.as_ref().is_some_and(|b| b.cpu_secs >= MIN_CPU_SECS))
                .and_then(|r| r.cpu_us_per_delivered())
        };
        let rss = |r: &Option<&Report>| r.and_then(peak_rss_mib);
        let _ = writeln!(
            out,
            "| {case} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            num(thr(cand)),
            num(thr(base)),
            ratio(thr(cand), thr(base)),
            num(p99(cand)),
            num(p99(base)),
            ratio(p99(cand), p99(base)),
            num(cpu(cand)),
            num(cpu(base)),
            ratio(cpu(cand), cpu(base)),
            num(rss(cand)),
            num(rss(base)),
            ratio(rss(cand), rss(base)),
            lost(cand, base),
        );
    }

    let sustain: Vec<_> = cases.iter().filter(|(_, (x, y))| x.or(*y).is_some_and(|r| r.sustain.is_some())).collect();
    if !sustain.is_empty() {
        let _ = writeln!(
            out,
            "\n| sustainable case | msg/s {c} | msg/s {b} | × | p50 / p99 / p99.9 µs {c} | p50 / p99 / p99.9 µs {b} | CPU µs/msg {c} | CPU µs/msg {b} | × | bench CPU {c} / {b} | lost {c} / {b} |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for ((_, case), (cand, base)) in sustain {
            // Deliveries per second at the sustainable step, and whether that is only a bound.
            let rate = |r: &Option<&Report>| {
                let s = summary(r)?;
                s.sustainable().map(|step| (step.delivered_rate, s.bound().is_some()))
            };
            let shown = |r: &Option<&Report>| match (summary(r), rate(r)) {
                (Some(s), Some((rate, _))) => s.qualify(num(Some(rate))),
                (Some(_), None) => "none".into(),
                (None, _) => "–".into(),
            };
            let three = |r: &Option<&Report>| {
                percentiles(summary(r).and_then(|s| s.sustainable()).and_then(|step| step.latency_us))
            };
            let cpu = |r: &Option<&Report>| {
                r.filter(|r| r.sustain.as_ref().is_some_and(|s| s.sustainable_step.is_some()))
                    .filter(|r| r.broker.as_ref().is_some_and(|b| b.cpu_secs >= MIN_CPU_SECS))
                    .and_then(|r| r.cpu_us_per_delivered())
            };
            let bench = |r: &Option<&Report>| {
                summary(r)
                    .and_then(|s| s.sustainable())
                    .map_or("–".into(), |step| format!("{:.0}%", step.generator_cpu_share * 100.0))
            };
            let _ = writeln!(
                out,
                "| {case} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} |",
                shown(cand),
                shown(base),
                bounded_ratio(rate(cand), rate(base)),
                three(cand),
                three(base),
                num(cpu(cand)),
                num(cpu(base)),
                ratio(cpu(cand), cpu(base)),
                bench(cand),
                bench(base),
                lost(cand, base),
            );
        }
    }

    let open: Vec<_> =
        cases.iter().filter(|(_, (x, y))| x.or(*y).is_some_and(|r| r.target_rate.is_some() && closed(r))).collect();
    if !open.is_empty() {
        let _ = writeln!(
            out,
            "\n| fixed-rate case | rate msg/s | p50 / p99 / p99.9 µs {c} | p50 / p99 / p99.9 µs {b} | p99 × | p99 from due time µs {c} / {b} | lost {c} / {b} |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
        for ((_, case), (cand, base)) in open {
            let lat = |r: &Option<&Report>| r.and_then(|r| r.latency_us);
            let due =
                |r: &Option<&Report>| r.and_then(|r| r.latency_from_due_us).map_or("–".into(), |l| l.p99.to_string());
            let three = |r: &Option<&Report>| percentiles(lat(r));
            let rate = cand.or(*base).and_then(|r| r.target_rate).unwrap_or(0.0);
            let _ = writeln!(
                out,
                "| {case} | {rate:.0} | {} | {} | {} | {} / {} | {} |",
                three(cand),
                three(base),
                ratio(lat(cand).map(|l| l.p99 as f64), lat(base).map(|l| l.p99 as f64)),
                due(cand),
                due(base),
                lost(cand, base),
            );
        }
    }

    let mint: Vec<_> = cases.iter().filter(|(_, (x, y))| x.or(*y).is_some_and(|r| r.mint.is_some())).collect();
    if !mint.is_empty() {
        let _ = writeln!(
            out,
            "\n| mint case | clients × msg/s | delivered % {c} / {b} | connect s {c} / {b} | RSS MiB after connect {c} / {b} | RSS MiB end {c} | RSS MiB end {b} | × | CPU µs/msg {c} | CPU µs/msg {b} | × | broker CPU {c} / {b} | p50 / p99 / p99.9 µs {c} | p50 / p99 / p99.9 µs {b} | bench CPU {c} / {b} | lost {c} / {b} |"
        );
        let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for ((_, case), (cand, base)) in mint {
            let m = |r: &Option<&'_ Report>| r.and_then(|r| r.mint.clone());
            let pair = |f: &dyn Fn(&Report, &MintSummary) -> Option<String>| {
                let one = |r: &Option<&Report>| r.zip(m(r)).and_then(|(r, m)| f(r, &m)).unwrap_or_else(|| "–".into());
                format!("{} / {}", one(cand), one(base))
            };
            let mib = |kib: Option<u64>| kib.map(|k| k as f64 / 1024.0);
            let end = |r: &Option<&Report>| m(r).and_then(|m| mib(m.rss_end_kib));
            let cpu = |r: &Option<&Report>| {
                r.filter(|r| r.broker.as_ref().is_some_and(|b| b.cpu_secs >= MIN_CPU_SECS))
                    .and_then(|r| r.cpu_us_per_delivered())
            };
            let three = |r: &Option<&Report>| percentiles(r.and_then(|r| r.latency_us));
            let fleet =
                m(cand).or(m(base)).map_or("–".into(), |m| format!("{} × {}", m.connected, m.rate_per_client));
            let _ = writeln!(
                out,
                "| {case} | {fleet} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                pair(&|r, _| r.delivered_percent().map(|p| format!("{p:.3}"))),
                pair(&|_, m| Some(format!("{:.2}", m.connect_secs))),
                pair(&|_, m| mib(m.rss_after_connect_kib).map(|v| num(Some(v)))),
                num(end(cand)),
                num(end(base)),
                ratio(end(cand), end(base)),
                num(cpu(cand)),
                num(cpu(base)),
                ratio(cpu(cand), cpu(base)),
                pair(&|_, m| m.broker_cpu_share.map(|s| format!("{:.0}%", s * 100.0))),
                three(cand),
                three(base),
                pair(&|_, m| {
                    let bound = if m.generator_bound.is_some() { " (generator-bound)" } else { "" };
                    Some(format!("{:.0}%{bound}", m.generator_cpu_share * 100.0))
                }),
                lost(cand, base),
            );
        }
    }

    let bursts: Vec<_> = cases.iter().filter(|(_, (x, y))| x.or(*y).is_some_and(|r| r.burst.is_some())).collect();
    if !bursts.is_empty() {
        let _ = writeln!(
            out,
            "\n| burst case | median ms {c} | median ms {b} | × | OKSE best (2.3 s) / {c} | lost {c} / {b} |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
        for ((_, case), (cand, base)) in bursts {
            let median = |r: &Option<&Report>| r.and_then(|r| r.burst.as_ref()).map(|b| b.median_ms);
            let okse = median(cand).filter(|m| *m > 0.0).map(|m| format!("{:.0}×", OKSE_BEST_BURST_MS / m));
            let _ = writeln!(
                out,
                "| {case} | {} | {} | {} | {} | {} |",
                num(median(cand)),
                num(median(base)),
                ratio(median(cand), median(base)),
                okse.unwrap_or_else(|| "–".into()),
                lost(cand, base),
            );
        }
    }

    let slow: Vec<_> = cases.iter().filter(|(_, (x, y))| x.or(*y).is_some_and(|r| r.slow.is_some())).collect();
    if !slow.is_empty() {
        let _ = writeln!(
            out,
            "\n| slow case | RSS MiB start→max→end {c} | RSS MiB start→max→end {b} | slow reader closed by broker {c} / {b} | lost by full-speed readers {c} / {b} |"
        );
        let _ = writeln!(out, "|---|---|---|---|---:|");
        for ((_, case), (cand, base)) in slow {
            let series = |r: &Option<&Report>| {
                r.and_then(|r| r.slow.as_ref()).map_or("–".into(), |s| {
                    let mib = |kib: u64| kib as f64 / 1024.0;
                    format!("{:.1}→{:.1}→{:.1}", mib(s.rss_start_kib), mib(s.rss_max_kib), mib(s.rss_end_kib))
                })
            };
            let closed = |r: &Option<&Report>| {
                r.and_then(|r| r.slow.as_ref()).map_or("–".into(), |s| s.slow_closed_by_broker.is_some().to_string())
            };
            let _ = writeln!(
                out,
                "| {case} | {} | {} | {} / {} | {} |",
                series(cand),
                series(base),
                closed(cand),
                closed(base),
                lost(cand, base)
            );
        }
    }

    let idle: Vec<_> = cases.iter().filter(|(_, (x, y))| x.or(*y).is_some_and(|r| r.idle.is_some())).collect();
    if !idle.is_empty() {
        let _ = writeln!(
            out,
            "\n| idle case | connections {c} / {b} | conn/s {c} | conn/s {b} | × | RSS B/conn {c} | RSS B/conn {b} | × |"
        );
        let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|");
        for ((_, case), (cand, base)) in idle {
            let i = |r: &Option<&Report>| r.and_then(|r| r.idle.clone());
            let conns = |r: &Option<&Report>| i(r).map_or("–".into(), |i| format!("{}", i.connected));
            let rate = |r: &Option<&Report>| i(r).map(|i| i.connect_rate);
            let per = |r: &Option<&Report>| i(r).and_then(|i| i.rss_bytes_per_connection);
            let _ = writeln!(
                out,
                "| {case} | {} / {} | {} | {} | {} | {} | {} | {} |",
                conns(cand),
                conns(base),
                num(rate(cand)),
                num(rate(base)),
                ratio(rate(cand), rate(base)),
                num(per(cand)),
                num(per(base)),
                ratio(per(cand), per(base)),
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_numbers_format_compactly() {
        assert_eq!(ratio(Some(3.0), Some(2.0)), "1.50");
        assert_eq!(ratio(Some(3.0), Some(0.0)), "–");
        assert_eq!(ratio(None, Some(1.0)), "–");
        assert_eq!(num(Some(12345.6)), "12346");
        assert_eq!(num(Some(12.345)), "12.3");
        assert_eq!(num(Some(1.2345)), "1.23");
    }

    #[test]
    fn a_bounded_figure_makes_a_bounded_ratio() {
        assert_eq!(bounded_ratio(Some((3.0, false)), Some((2.0, false))), "1.50");
        assert_eq!(bounded_ratio(Some((3.0, true)), Some((2.0, false))), "≥ 1.50");
        assert_eq!(bounded_ratio(Some((3.0, false)), Some((2.0, true))), "≤ 1.50");
        assert_eq!(bounded_ratio(Some((3.0, true)), Some((2.0, true))), "?");
        assert_eq!(bounded_ratio(None, Some((2.0, true))), "–");
    }

    #[test]
    fn sustain_reports_get_their_own_table_and_say_when_the_generator_bounds_them() {
        use crate::report::{SustainStep, SustainSummary};
        let dir = std::env::temp_dir().join(format!("tolk-bench-compare-sustain-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (label, rate, generator_bound) in [("tolk", 90_000.0, true), ("mosquitto", 60_000.0, false)] {
            let step =
                SustainStep { delivered_rate: rate, clean: true, generator_cpu_share: 0.95, ..Default::default() };
            let report = Report {
                case: "sustain-fan-in".into(),
                scenario: "sustain".into(),
                label: label.into(),
                delivered_rate: rate,
                target_rate: Some(rate),
                sustain: Some(SustainSummary {
                    steps: vec![step],
                    sustainable_step: Some(0),
                    generator_bound,
                    ..Default::default()
                }),
                ..Report::default()
            };
            std::fs::write(dir.join(format!("{label}.json")), serde_json::to_string(&report).unwrap()).unwrap();
        }
        let args = CompareArgs { dir: dir.clone(), candidate: "tolk".into(), baseline: "mosquitto".into() };
        let table = run(&args).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            table.contains("| sustain-fan-in | ≥ 90000 (generator-bound) | 60000 | ≥ 1.50 | – | – | – | – | – | 95% / 95% | 0 / 0 |"),
            "{table}"
        );
        assert_eq!(table.matches("| sustain-fan-in |").count(), 1, "only in the sustain table: {table}");
    }

    #[test]
    fn mint_reports_get_their_own_table_with_delivery_memory_and_loss() {
        use crate::report::MintSummary;
        let dir = std::env::temp_dir().join(format!("tolk-bench-compare-mint-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (label, received, end_kib) in [("tolk", 1999, 40 * 1024), ("mosquitto", 2000, 80 * 1024)] {
            let report = Report {
                case: "mint-mqtt".into(),
                scenario: "mint".into(),
                label: label.into(),
                expected: 2000,
                received,
                lost: 2000 - received,
                target_rate: Some(100.0),
                mint: Some(MintSummary {
                    connected: 10,
                    rate_per_client: 10.0,
                    connect_secs: 0.5,
                    rss_end_kib: Some(end_kib),
                    generator_cpu_share: 0.95,
                    generator_bound: Some("CPU 95% of 1 core(s)".into()),
                    ..Default::default()
                }),
                ..Report::default()
            };
            std::fs::write(dir.join(format!("{label}.json")), serde_json::to_string(&report).unwrap()).unwrap();
        }
        let args = CompareArgs { dir: dir.clone(), candidate: "tolk".into(), baseline: "mosquitto".into() };
        let table = run(&args).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            table.contains(
                "| mint-mqtt | 10 × 10 | 99.950 / 100.000 | 0.50 / 0.50 | – / – | 40.0 | 80.0 | 0.50 | – | – | – | – / – | – | – | 95% (generator-bound) / 95% (generator-bound) | 1 / 0 |"
            ),
            "{table}"
        );
        assert_eq!(table.matches("| mint-mqtt |").count(), 1, "only in the mint table: {table}");
    }

    #[test]
    fn a_directory_of_reports_becomes_a_table() {
        let dir = std::env::temp_dir().join(format!("tolk-bench-compare-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (label, rate) in [("tolk", 300.0), ("mosquitto", 200.0)] {
            let report = Report {
                case: "fan-in".into(),
                scenario: "fan-in".into(),
                label: label.into(),
                delivered_rate: rate,
                ..Report::default()
            };
            std::fs::write(dir.join(format!("{label}.json")), serde_json::to_string(&report).unwrap()).unwrap();
        }
        let args = CompareArgs { dir: dir.clone(), candidate: "tolk".into(), baseline: "mosquitto".into() };
        let table = run(&args).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(table.contains("| fan-in | 300 | 200 | 1.50 |"), "{table}");
    }
}
