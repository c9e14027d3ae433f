//! The command line: one subcommand per scenario, sharing one set of load options, plus
//! `compare` to turn a directory of JSON reports into a ratio table.

use std::path::PathBuf;

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
    /// Print a Markdown table comparing the JSON reports in a directory, candidate/baseline.
    Compare(CompareArgs),
}

/// Options shared by every scenario.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Broker to load, as protocol://host:port: mqtt:// (TCP, default port 1883), mqttsn://
    /// (UDP, 1884), stomp:// (61613), amqp:// (5672) or wsn://host:port/path (WS-Notification
    /// over HTTP, port 8080, path /wsn).
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
