//! Scenario selection and what every scenario shares: the run's clock and names, the broker
//! probe, and RSS sampling during the load.

pub mod attack;
mod burst;
pub mod durable;
mod flow;
mod idle;
pub mod mint;
pub mod stall;
pub mod sustain;

use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use crate::broker::{Broker, Probe, ProcSample};
use crate::cli::LoadArgs;
use crate::clock::Clock;
use crate::proto::{AnyConnector, Qos};
use crate::report::Report;

/// The load scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// OKSE-style burst of 100.
    Burst,
    /// N publishers → 1 subscriber.
    FanIn,
    /// 1 publisher → N subscribers.
    FanOut,
    /// N publishers, each → its own subscriber.
    P2p,
    /// Idle connection ramp.
    Idle,
    /// Load plus one slow reader.
    SlowSubscriber,
}

impl Scenario {
    /// Name as on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Burst => "burst",
            Scenario::FanIn => "fan-in",
            Scenario::FanOut => "fan-out",
            Scenario::P2p => "p2p",
            Scenario::Idle => "idle",
            Scenario::SlowSubscriber => "slow-subscriber",
        }
    }
}

/// How often broker RSS is sampled during a load.
const RSS_SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// What a scenario gets besides its connectors.
pub struct Ctx {
    /// The command line.
    pub args: LoadArgs,
    /// Time base of every stamp.
    pub clock: Clock,
    /// Reads the broker's figures, when its pid is known.
    pub broker: Option<Probe>,
    /// Reads the bench's own figures.
    pub own: Probe,
    /// Short random id that keeps client ids and topics of concurrent runs apart.
    pub run_id: String,
    /// Delivery guarantee.
    pub qos: Qos,
}

impl Ctx {
    /// A client id that is unique per run, short and alphanumeric: MQTT 3.1.1 only obliges a
    /// server to accept 1–23 characters of `[0-9a-zA-Z]` (MQTT-3.1.3-5).
    pub fn client_id(&self, role: char, index: usize) -> String {
        format!("tb{}{role}{index}", self.run_id)
    }

    /// A topic private to this run.
    pub fn topic(&self, leaf: &str) -> String {
        format!("tolkbench/{}/{leaf}", self.run_id)
    }

    /// How long a subscriber waits for stragglers after the last publish.
    pub fn drain(&self) -> Duration {
        Duration::from_millis(self.args.drain_ms)
    }

    /// The broker's figures now, if it is known and readable.
    pub fn sample_broker(&self) -> Option<ProcSample> {
        let probe = self.broker?;
        probe.sample().map_err(|e| tracing::warn!("cannot read broker figures: {e:#}")).ok()
    }

    /// The bench's own CPU seconds so far.
    pub fn own_cpu_secs(&self) -> f64 {
        self.own.sample_self().map(|s| s.cpu_secs).unwrap_or(0.0)
    }
}

/// Samples broker RSS in the background while a load runs.
pub struct RssSampler {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Vec<(u64, u64)>>,
}

impl RssSampler {
    /// Starts sampling; without a broker probe it records nothing.
    pub fn start(ctx: &Ctx) -> Self {
        let (stop, mut stopped) = oneshot::channel();
        let probe = ctx.broker;
        let clock = ctx.clock;
        let task = tokio::spawn(async move {
            let mut samples = Vec::new();
            let Some(probe) = probe else { return samples };
            let mut tick = tokio::time::interval(RSS_SAMPLE_EVERY);
            loop {
                tokio::select! {
                    _ = &mut stopped => return samples,
                    _ = tick.tick() => {
                        if let Ok(s) = probe.sample() {
                            samples.push((clock.now_ns() / 1_000_000, s.rss_kib));
                        }
                    }
                }
            }
        });
        RssSampler { stop, task }
    }

    /// Stops sampling and returns (ms since start, KiB) pairs.
    pub async fn finish(self) -> Vec<(u64, u64)> {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}

/// What [`connect_many`] opened.
pub struct Connected<T> {
    /// The clients that connected, each with its index, in index order.
    pub clients: Vec<(usize, T)>,
    /// Attempts that failed.
    pub failed: usize,
    /// The first few failures' messages: thousands of identical ones would bury the report.
    pub errors: Vec<String>,
    /// From the first attempt to the last answer, in seconds.
    pub secs: f64,
}

/// Failures whose messages [`connect_many`] keeps.
const CONNECT_ERRORS_KEPT: usize = 5;

/// Opens `count` clients with `connect(index)`, at most `concurrency` attempts in flight: as
/// many at once as a fleet of devices coming online, without a SYN flood that would measure
/// the kernel's accept queue rather than the broker.
pub async fn connect_many<T, F, Fut>(count: usize, concurrency: usize, connect: F) -> Connected<T>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    let started = Instant::now();
    let mut attempts = JoinSet::new();
    let mut done = Connected { clients: Vec::with_capacity(count), failed: 0, errors: Vec::new(), secs: 0.0 };
    let mut next = 0;
    while next < count || !attempts.is_empty() {
        while next < count && attempts.len() < concurrency.max(1) {
            let attempt = connect(next);
            attempts.spawn(async move { (next, attempt.await) });
            next += 1;
        }
        let error = match attempts.join_next().await {
            Some(Ok((i, Ok(client)))) => {
                done.clients.push((i, client));
                continue;
            }
            Some(Ok((_, Err(e)))) => format!("{e:#}"),
            Some(Err(e)) => format!("connect task: {e}"),
            None => break,
        };
        done.failed += 1;
        if done.errors.len() < CONNECT_ERRORS_KEPT {
            done.errors.push(error);
        }
    }
    done.secs = started.elapsed().as_secs_f64();
    done.clients.sort_unstable_by_key(|(i, _)| *i);
    done
}

/// A short random id that keeps client ids and topics of concurrent runs apart.
pub fn new_run_id() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{:06x}", (nanos ^ std::process::id().rotate_left(20)) & 0xff_ffff)
}

/// Starts the broker (`--spawn-broker`, waiting for `--target`) or attaches to it
/// (`--broker-pid`); `None` when neither was given.
pub async fn broker_for(args: &LoadArgs) -> Result<Option<Broker>> {
    Ok(match (args.broker_pid, args.spawn_broker.as_deref()) {
        (Some(pid), _) => Some(Broker::attach(pid)?),
        (None, Some(command)) => Some(Broker::spawn(command, &args.target).await?),
        (None, None) => None,
    })
}

/// Runs one scenario as the command line asks: attaches to or starts the broker, runs, and
/// stops a broker it started.
pub async fn run(scenario: Scenario, args: LoadArgs) -> Result<Report> {
    let broker = broker_for(&args).await?;
    let result = run_attached(scenario, args, broker.as_ref().map(Broker::probe)).await;
    if let Some(broker) = broker {
        broker.stop().await;
    }
    result
}

/// Runs one scenario against a broker whose figures `broker` reads (if known).
pub async fn run_attached(scenario: Scenario, args: LoadArgs, broker: Option<Probe>) -> Result<Report> {
    let subscribe = AnyConnector::for_target(&args.target, args.payload);
    let publish = AnyConnector::for_target(args.publish_target.as_ref().unwrap_or(&args.target), args.payload);
    let ctx = Ctx {
        qos: Qos::from_level(args.qos)?,
        clock: Clock::start(),
        broker,
        own: Probe::new(std::process::id())?,
        run_id: new_run_id(),
        args,
    };
    let mut report = match scenario {
        Scenario::Burst => burst::run(&publish, &subscribe, &ctx).await,
        Scenario::Idle => idle::run(&subscribe, &ctx).await,
        Scenario::FanIn | Scenario::FanOut | Scenario::P2p | Scenario::SlowSubscriber => {
            flow::run(&publish, &subscribe, scenario, &ctx).await
        }
    }?;
    if let Some(p) = &ctx.args.publish_target {
        report.target = format!("{}→{}", p.protocol.scheme(), report.target);
    }
    report.finished_unix = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    Ok(report)
}
