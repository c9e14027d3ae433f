//! The command line: one subcommand per scenario, sharing one set of load options, plus
//! `compare` to turn a directory of JSON reports into a ratio table.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::proto::Target;

/// Load generator for tolk and peer brokers.
///
/// Publishers and subscribers run in this process and share one clock, so every message's
/// end-to-end latency is measured exactly. Give the broker's pid (or let the bench start it) to
/// get its CPU time per delivered message and its memory.
#[derive(Debug, Parser)]
#[command(name = "tolk-bench", version)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Scenarios, and the comparison report.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Subscribe, publish a burst of 100 messages, time until the 100th arrives (the OKSE
    /// evaluation's measure); repeated --iterations times.
    Burst(LoadArgs),
    /// N publishers (default 4) to one topic, one subscriber.
    FanIn(LoadArgs),
    /// One publisher, N subscribers (default 4) on its topic.
    FanOut(LoadArgs),
    /// N publishers (default 4), each with its own subscriber on its own topic.
    P2p(LoadArgs),
    /// Open --connections idle connections: connect rate and broker memory per connection.
    Idle(LoadArgs),
    /// Full-speed load plus one subscriber that reads very slowly: broker memory over time.
    SlowSubscriber(LoadArgs),
    /// The OKSE burst for every (publisher protocol, subscriber protocol) pair of one broker's
    /// listeners; prints the matrix of median burst times.
    BurstMatrix(MatrixArgs),
    /// A memory attack: large messages the broker would have to hold for a client that does
    /// not take them; the broker's peak RSS (VmHWM) afterwards, and what it acknowledged,
    /// refused and kept.
    Attack(AttackArgs),
    /// Store many retained messages, run a steady probe pair, and have a new client subscribe
    /// to `#`: the probe's latency before, during and after the retained flood.
    RetainedStall(StallArgs),
    /// AMQP persistent messages with publisher confirms into a durable queue without
    /// consumer, a window of them unconfirmed at once: confirmed messages per second, and the
    /// queue's message count afterwards (a confirmed message missing from it is loss).
    DurableConfirms(DurableArgs),
    /// The highest offered rate at which every message arrives: open-loop steps of --window
    /// each, doubling from --start-rate while nothing is lost, then bisecting; per step the
    /// delivered rate, latency, broker CPU per message and the bench's own CPU, flagged when the
    /// bench rather than the broker set the limit.
    Sustain(SustainArgs),
    /// MinT load: --clients publishers (10,000) connected at once, each publishing
    /// --rate-per-client (10 msg/s) to its own topic `mint/<client>/data`, and wildcard
    /// subscribers receiving everything; connect time, broker RSS after connecting and at the
    /// end, delivered/sent, broker CPU and latency.
    Mint(MintArgs),
    /// Print a Markdown table comparing the JSON reports in a directory, candidate/baseline.
    Compare(CompareArgs),
}

/// The wildcard filter of `mint`'s subscribers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MintFilter {
    /// `mint/+/data`: one level per client, the way a dashboard watches a fleet.
    Plus,
    /// `mint/#`: everything under `mint/`.
    Hash,
}

impl MintFilter {
    /// The topic filter subscribed to.
    pub fn topic(self) -> &'static str {
        match self {
            MintFilter::Plus => "mint/+/data",
            MintFilter::Hash => "mint/#",
        }
    }
}

/// Options of `mint`.
#[derive(Debug, Clone, Args)]
pub struct MintArgs {
    /// Broker to load: mqtt://host:port or mqttsn://host:port (one UDP socket, so one source
    /// port, per client, as devices have).
    #[arg(long, default_value = "mqtt://127.0.0.1:1883")]
    pub target: Target,

    /// Pid of the running broker, for its CPU time and memory.
    #[arg(long)]
    pub broker_pid: Option<u32>,

    /// Publishing clients, all connected before the first publish. Each needs a file
    /// descriptor in the bench (and one in the broker): the run refuses to start when the
    /// bench's `ulimit -n` is too low.
    #[arg(long, default_value_t = 10_000)]
    pub clients: usize,

    /// Messages per second each client publishes; the clients' start phases are spread
    /// evenly over one period, so the total (clients × rate) arrives smoothly.
    #[arg(long, default_value_t = 10.0)]
    pub rate_per_client: f64,

    /// How long the clients publish, as `30s` or `500ms`.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,

    /// Wildcard subscribers, each of which receives every message.
    #[arg(long, default_value_t = 2)]
    pub subscribers: usize,

    /// The subscribers' filter.
    #[arg(long, value_enum, default_value_t = MintFilter::Plus)]
    pub filter: MintFilter,

    /// Delivery guarantee for publishers and subscribers (MQTT QoS; MQTT-SN speaks 0 and 1).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=1))]
    pub qos: u8,

    /// Payload size in bytes (at least the 32-byte stamp header).
    #[arg(long, default_value_t = 64)]
    pub payload: usize,

    /// Connection attempts in flight at once while the clients connect.
    #[arg(long, default_value_t = 64)]
    pub connect_concurrency: usize,

    /// Tasks that drive the publishing clients, each taking every N-th client in turn on one
    /// timer; default one task (and timer) per client. Fewer tasks cost the bench fewer
    /// wake-ups, with the same schedule.
    #[arg(long)]
    pub publish_tasks: Option<usize>,

    /// After the last publish, how long a subscriber waits for one more message before it
    /// counts the rest as lost, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub drain_ms: u64,

    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Name of the broker in reports (e.g. tolk, mosquitto).
    #[arg(long, default_value = "broker")]
    pub label: String,

    /// Row name in comparison tables; defaults to `mint-<protocol>`.
    #[arg(long)]
    pub case: Option<String>,
}

/// The flow shapes `sustain` can load a broker with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    /// N publishers (default 4) to one topic, one subscriber.
    FanIn,
    /// One publisher, N subscribers (default 4) on its topic.
    FanOut,
    /// N publishers (default 4), each with its own subscriber on its own topic.
    P2p,
}

/// Options of `sustain`.
#[derive(Debug, Clone, Args)]
pub struct SustainArgs {
    /// The flow to offer.
    #[arg(long, value_enum)]
    pub shape: Shape,

    /// Broker to load, as protocol://host:port (as for the other scenarios).
    #[arg(long, default_value = "mqtt://127.0.0.1:1883")]
    pub target: Target,

    /// Pid of the running broker, for its CPU time per message.
    #[arg(long, conflicts_with = "spawn_broker")]
    pub broker_pid: Option<u32>,

    /// Start the broker with this command (split on spaces) and stop it at the end; it runs
    /// every step.
    #[arg(long)]
    pub spawn_broker: Option<String>,

    /// Delivery guarantee for publishers and subscribers (MQTT QoS, mapped as for the other
    /// scenarios).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=2))]
    pub qos: u8,

    /// Publishers (shape default when omitted).
    #[arg(long)]
    pub publishers: Option<usize>,

    /// Subscribers (shape default when omitted; p2p has one per publisher).
    #[arg(long)]
    pub subscribers: Option<usize>,

    /// Payload size in bytes (at least the 32-byte stamp header).
    #[arg(long, default_value_t = 64)]
    pub payload: usize,

    /// How long each step offers its rate, as `10s` or `500ms`: long enough that a broker
    /// falling behind runs out of buffers within it.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub window: Duration,

    /// Total publish rate of the first step, in messages/s over all publishers.
    #[arg(long, default_value_t = 4000.0)]
    pub start_rate: f64,

    /// Highest rate the search offers, in messages/s; a run clean up to it reports "at least".
    #[arg(long, default_value_t = 1_000_000.0)]
    pub max_rate: f64,

    /// Most steps to run, so a run lasts at most about steps × (window + drain).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub steps: u32,

    /// How long after a step's last publish its last message may arrive, in milliseconds;
    /// whatever comes later counts as lost, so a broker that only keeps up by queueing is not
    /// called sustainable.
    #[arg(long, default_value_t = 1000)]
    pub drain_ms: u64,

    /// Also write the report (the sustainable step's figures plus every step) as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Name of the broker in reports (e.g. tolk, mosquitto).
    #[arg(long, default_value = "broker")]
    pub label: String,

    /// Row name in comparison tables; defaults to `sustain-<shape>-qos<N>`.
    #[arg(long)]
    pub case: Option<String>,
}

/// Parses `10s`, `2.5s`, `500ms` (or a bare number of seconds) into a duration.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, scale) =
        if let Some(ms) = text.strip_suffix("ms") { (ms, 1e-3) } else { (text.strip_suffix('s').unwrap_or(text), 1.0) };
    let value: f64 = number.trim().parse().map_err(|_| format!("`{text}` is not a duration like 10s or 500ms"))?;
    if !(value.is_finite() && value > 0.0) {
        return Err(format!("`{text}` must be longer than zero"));
    }
    Ok(Duration::from_secs_f64(value * scale))
}

/// Options of `durable-confirms`.
#[derive(Debug, Clone, Args)]
pub struct DurableArgs {
    /// AMQP broker, as amqp://host:port.
    #[arg(long, default_value = "amqp://127.0.0.1:5672")]
    pub target: Target,

    /// Messages to publish.
    #[arg(long, default_value_t = 20_000)]
    pub messages: u64,

    /// Most messages published and not yet confirmed.
    #[arg(long, default_value_t = 64)]
    pub window: usize,

    /// Bytes per message.
    #[arg(long, default_value_t = 100)]
    pub payload: usize,

    /// Row name in the printed line.
    #[arg(long, default_value = "broker")]
    pub label: String,

    /// Leave the queue and its messages in the broker (for a recovery measurement) instead of
    /// deleting it at the end.
    #[arg(long)]
    pub keep: bool,
}

/// Options shared by every scenario.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Broker to load, as protocol://host:port: mqtt:// (TCP, default port 1883), mqttsn://
    /// (UDP, 1884), stomp:// (61613), amqp:// (5672), wsn://host:port/path (WS-Notification
    /// over HTTP, port 8080, path /wsn) or xmpp:// (XEP-0060 pubsub, 5222; ?domain=localhost,
    /// ?service=pubsub.<domain>). mqtt:// and xmpp:// take user:password@ before the host.
    #[arg(long, default_value = "mqtt://127.0.0.1:1883")]
    pub target: Target,

    /// Publishers connect here instead of --target: a cross-protocol run (e.g. publish over
    /// WS-N, subscribe over MQTT). Subscribers and idle connections always use --target.
    #[arg(long)]
    pub publish_target: Option<Target>,

    /// Pid of the running broker, for its CPU time and memory.
    #[arg(long, conflicts_with = "spawn_broker")]
    pub broker_pid: Option<u32>,

    /// Start the broker with this command (split on spaces, no shell quoting), wait until the
    /// target answers (accepts TCP connections; for mqttsn://, answers SEARCHGW), and stop it
    /// afterwards.
    #[arg(long)]
    pub spawn_broker: Option<String>,

    /// Messages each publisher sends. Defaults: burst 100 per burst, fan-in and fan-out 20,000,
    /// p2p 10,000, slow-subscriber 40,000 (a few seconds each on a small machine).
    #[arg(long)]
    pub messages: Option<u64>,

    /// Total publish rate in messages/s over all publishers; 0 = closed loop at full speed.
    /// Open-loop sends are stamped with their scheduled time, so a stalled broker shows up as
    /// latency instead of being hidden (coordinated omission).
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,

    /// Publishers (scenario default when omitted).
    #[arg(long)]
    pub publishers: Option<usize>,

    /// Subscribers (scenario default when omitted; p2p always has one per publisher;
    /// slow-subscriber counts only the full-speed ones).
    #[arg(long)]
    pub subscribers: Option<usize>,

    /// Payload size in bytes (at least the 32-byte stamp header; MQTT-SN carries at most 65,498,
    /// what fits one UDP datagram).
    #[arg(long, default_value_t = 64)]
    pub payload: usize,

    /// Delivery guarantee for publishers and subscribers (MQTT QoS; MQTT-SN speaks 0 and 1,
    /// WS-N is at-most-once whatever is asked).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=2))]
    pub qos: u8,

    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Name of the broker in reports (e.g. tolk, mosquitto).
    #[arg(long, default_value = "broker")]
    pub label: String,

    /// Row name in comparison tables; defaults to the scenario, plus the rate when set.
    #[arg(long)]
    pub case: Option<String>,

    /// Burst: how many bursts to time.
    #[arg(long, default_value_t = 5)]
    pub iterations: u32,

    /// Idle: connections to open (not for wsn://, which has no connection to hold).
    #[arg(long, default_value_t = 1000)]
    pub connections: usize,

    /// Idle: connection attempts in flight at once.
    #[arg(long, default_value_t = 32)]
    pub connect_concurrency: usize,

    /// Slow-subscriber: pause after each message the slow subscriber reads, in milliseconds.
    #[arg(long, default_value_t = 10)]
    pub slow_delay_ms: u64,

    /// After the last publish, how long a subscriber waits for one more message before it
    /// counts the rest as lost, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub drain_ms: u64,

    /// Not an option: set by `sustain`, which makes `drain_ms` a deadline counted from the last
    /// publish rather than a silence, so that a step ends at a known time however slowly a
    /// backlog trickles in, and a message later than that counts as lost.
    #[arg(skip)]
    pub drain_is_deadline: bool,
}

/// Options of `burst-matrix`.
#[derive(Debug, Clone, Args)]
pub struct MatrixArgs {
    /// One listener of the broker per protocol, as protocol://host:port (wsn://host:port/path);
    /// repeat the option. Every ordered pair (publisher's protocol, subscriber's protocol) is
    /// measured.
    #[arg(long = "endpoint", required = true)]
    pub endpoints: Vec<Target>,

    /// The burst options; --target and --publish-target are taken from the endpoints, and
    /// --json receives the list of all reports.
    #[command(flatten)]
    pub load: LoadArgs,
}

/// The attacks of `attack` (what each does is in `scenario/attack.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Attack {
    /// MQTT: QoS 1 retained messages, each on a topic of its own; read back by a subscriber to
    /// all of them.
    Retained,
    /// MQTT: QoS 1 messages for a persistent session (clean session 0) that subscribed at QoS 1
    /// and disconnected; read back when it reconnects.
    OfflineSession,
    /// AMQP: persistent messages with publisher confirms into a named queue without consumer;
    /// read back as the queue's message count.
    AmqpQueue,
    /// WS-N: Notify on a topic that a pull point subscribed to, with no GetMessages until the
    /// end; read back by GetMessages.
    WsnPullPoint,
    /// MQTT: a subscriber that stops reading its socket after its SUBACK, and a publisher, both
    /// at --qos; read back when the subscriber reads again.
    StalledReader,
}

/// Options of `attack`.
#[derive(Debug, Clone, Args)]
pub struct AttackArgs {
    /// Which attack.
    #[arg(value_enum)]
    pub attack: Attack,

    /// Broker to attack: mqtt:// for retained, offline-session and stalled-reader, amqp:// for
    /// amqp-queue, wsn://host:port/path for wsn-pull-point.
    #[arg(long)]
    pub target: Target,

    /// Pid of the running broker, for its memory (VmRSS, VmHWM).
    #[arg(long)]
    pub broker_pid: Option<u32>,

    /// Messages to offer. Default: 2,000 for retained (each on its own topic), 500 for
    /// wsn-pull-point, 1,000 for the others.
    #[arg(long)]
    pub messages: Option<u64>,

    /// Bytes per message. The default, 1,048,000, is the largest round figure under 1 MiB
    /// that tolk's default limits let through with its headers: an MQTT packet of at most
    /// 1 MiB, a WS-N request body of at most 1 MiB (where it is the size of the whole Notify,
    /// whose message is one XML element).
    #[arg(long, default_value_t = 1_048_000)]
    pub payload: usize,

    /// stalled-reader: QoS of the subscription and of the publisher (the other MQTT attacks
    /// use QoS 1, AMQP persistent messages with confirms, WS-N has none to choose).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=1))]
    pub qos: u8,

    /// A Prometheus page of the broker (tolk's `http://host:port/metrics`) to read when the
    /// attack is over, before the read-back: its non-zero memory, drop and close figures go
    /// into the report.
    #[arg(long)]
    pub metrics_url: Option<String>,

    /// How long a read-back waits for one more message before it counts the rest as not
    /// kept, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub drain_ms: u64,

    /// Where the report goes; the row name defaults to the attack, plus the QoS for
    /// stalled-reader.
    #[command(flatten)]
    pub report: ReportArgs,
}

/// Options of `retained-stall`.
#[derive(Debug, Clone, Args)]
pub struct StallArgs {
    /// MQTT broker, as mqtt://host:port.
    #[arg(long, default_value = "mqtt://127.0.0.1:1883")]
    pub target: Target,

    /// Pid of the running broker, for its peak memory (VmHWM).
    #[arg(long)]
    pub broker_pid: Option<u32>,

    /// Retained messages stored before the probe starts (QoS 1, each acknowledged), on
    /// distinct topics `…/r/<i/1000>/<i%1000>`.
    #[arg(long, default_value_t = 100_000)]
    pub retained: u64,

    /// Bytes per message, retained and probe alike (at least the 32-byte stamp).
    #[arg(long, default_value_t = 64)]
    pub payload: usize,

    /// Probe rate in messages/s: one publisher and one subscriber, QoS 0, on a topic of their
    /// own.
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,

    /// How long the probe runs before the `#` subscription, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub before_ms: u64,

    /// How long it runs after the last retained message arrived, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub after_ms: u64,

    /// QoS of the `#` subscription.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=1))]
    pub qos: u8,

    /// After the last message, how long a subscriber waits for one more, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub drain_ms: u64,

    /// Where the report goes; the row name defaults to `retained-stall`.
    #[command(flatten)]
    pub report: ReportArgs,
}

/// Where a one-row report (`attack`, `retained-stall`) goes.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Name of the broker in the report (e.g. tolk, mosquitto).
    #[arg(long, default_value = "broker")]
    pub label: String,

    /// Row name (each command has its default).
    #[arg(long)]
    pub case: Option<String>,

    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Append the report's row to this Markdown table (the header is written first when the
    /// file is new).
    #[arg(long)]
    pub table: Option<PathBuf>,
}

/// Options of `compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Directory holding the JSON reports (every *.json in it is read).
    pub dir: PathBuf,

    /// Label of the broker whose figures are the numerator.
    #[arg(long, default_value = "tolk")]
    pub candidate: String,

    /// Label of the broker whose figures are the denominator.
    #[arg(long, default_value = "mosquitto")]
    pub baseline: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_seconds_or_milliseconds() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2.5s"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
