//! Memory attacks (the hardening issue): a client offers large messages that the broker would
//! have to hold for someone who does not take them, and the broker's peak resident memory
//! (`VmHWM`) is read once the attack is over. Each attack then reads back what the broker kept,
//! so the report puts side by side what was offered, what the broker acknowledged, refused and
//! kept, and whether it closed a connection.
//!
//! A publisher whose connection the broker closes reconnects and goes on with the next message,
//! as a determined client would; what it had in flight counts as refused.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use lapin::BasicProperties;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::new_run_id;
use crate::broker::{Broker, Probe, ProcSample};
use crate::cli::{Attack, AttackArgs};
use crate::clock::Clock;
use crate::payload::Stamp;
use crate::proto::amqp::{AmqpConnector, PERSISTENT, TOPIC_EXCHANGE, routing_key};
use crate::proto::mqtt::{self, MqttConnector};
use crate::proto::wsn::{self, WsnConnector};
use crate::proto::{Connector, Protocol, Publisher, Qos, Subscription};
use crate::recorder::Recorder;

/// Deliveries a reader may hold between its client task and the count.
const READ_BUFFER: usize = 64;

/// How long a publisher waits for the acknowledgement of what it has in flight before counting
/// it refused: longer than tolk's `slow_consumer_grace` (5 s), during which a publisher to a
/// full at-least-once subscriber is held back without being told no.
const ACK_WAIT: Duration = Duration::from_secs(15);

/// What the broker said when refusing, or why it closed a connection: the first few kept.
const NOTES_KEPT: usize = 4;

impl Attack {
    fn name(self) -> &'static str {
        match self {
            Attack::Retained => "retained",
            Attack::OfflineSession => "offline-session",
            Attack::AmqpQueue => "amqp-queue",
            Attack::WsnPullPoint => "wsn-pull-point",
            Attack::StalledReader => "stalled-reader",
        }
    }

    fn protocol(self) -> Protocol {
        match self {
            Attack::AmqpQueue => Protocol::Amqp,
            Attack::WsnPullPoint => Protocol::Wsn,
            _ => Protocol::Mqtt,
        }
    }

    fn default_messages(self) -> u64 {
        match self {
            Attack::Retained => 2000,
            Attack::WsnPullPoint => 500,
            _ => 1000,
        }
    }
}

/// One attack against one broker.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AttackReport {
    /// Row name.
    pub case: String,
    /// Which broker (`--label`).
    pub label: String,
    /// The target URL.
    pub target: String,
    /// Messages offered.
    pub messages: u64,
    /// Bytes per message.
    pub payload_bytes: usize,
    /// `messages × payload_bytes`.
    pub offered_bytes: u64,
    /// Acknowledged by the broker (PUBACK, AMQP confirm, HTTP 202); at QoS 0, handed to the
    /// client library, since nothing acknowledges them.
    pub accepted: u64,
    /// Offered but not acknowledged: nacked, answered with an error, or in flight when the
    /// broker closed the connection.
    pub refused: u64,
    /// What the read-back got: the messages the broker had kept.
    pub kept: u64,
    /// Times the broker closed the attacker's publishing connection.
    pub publisher_closed: u32,
    /// Why the broker closed the reader, if it did (the stalled reader, the resumed session).
    pub reader_closed: Option<String>,
    /// What the broker answered when it refused, and why connections ended (first few).
    pub notes: Vec<String>,
    /// The broker's non-zero memory, drop and close figures from `--metrics-url` when the
    /// attack was over, before the read-back.
    pub metrics: Vec<String>,
    /// Broker RSS before the attack, in KiB.
    pub rss_start_kib: u64,
    /// Broker peak RSS (VmHWM) when the attack was over, before the read-back, in KiB.
    pub hwm_attack_kib: u64,
    /// Broker peak RSS after the read-back, in KiB.
    pub hwm_end_kib: u64,
    /// Broker RSS at the end, in KiB.
    pub rss_end_kib: u64,
    /// From the first offer to the end of the attack, in seconds.
    pub attack_secs: f64,
    /// Errors that ended the attack early.
    pub errors: Vec<String>,
}

const MIB: f64 = 1024.0 * 1024.0;

impl AttackReport {
    fn closed(&self) -> String {
        let mut closed = Vec::new();
        if self.publisher_closed > 0 {
            closed.push(format!("publisher {}×", self.publisher_closed));
        }
        if self.reader_closed.is_some() {
            closed.push("reader".to_string());
        }
        if closed.is_empty() { "no".to_string() } else { closed.join(", ") }
    }

    /// The report for a terminal.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "attack {} against {} ({})", self.case, self.label, self.target);
        let _ = writeln!(
            out,
            "  offered   {} × {} B = {:.1} MiB in {:.1} s",
            self.messages,
            self.payload_bytes,
            self.offered_bytes as f64 / MIB,
            self.attack_secs
        );
        let _ = writeln!(
            out,
            "  broker    accepted {}, refused {}, kept {} (read back); closed: {}",
            self.accepted,
            self.refused,
            self.kept,
            self.closed()
        );
        for note in self.notes.iter().chain(&self.reader_closed) {
            let _ = writeln!(out, "            {note}");
        }
        let _ = writeln!(
            out,
            "  RSS       {:.1} MiB before, peak {:.1} MiB after the attack, {:.1} MiB after the read-back; {:.1} MiB at the end",
            self.rss_start_kib as f64 / 1024.0,
            self.hwm_attack_kib as f64 / 1024.0,
            self.hwm_end_kib as f64 / 1024.0,
            self.rss_end_kib as f64 / 1024.0
        );
        for (i, line) in self.metrics.iter().enumerate() {
            let _ = writeln!(out, "  {}{line}", if i == 0 { "metrics   " } else { "          " });
        }
        for e in &self.errors {
            let _ = writeln!(out, "  error     {e}");
        }
        out
    }

    /// The Markdown table header and this report's row.
    pub fn row(&self) -> (&'static str, String) {
        const HEADER: &str = "| attack | broker | offered MiB | peak RSS MiB: attack / with read-back | accepted | refused | kept | dropped after accepting | broker closed |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n";
        let row = format!(
            "| {} | {} | {:.0} | {:.1} / {:.1} | {} | {} | {} | {} | {}{} |",
            self.case,
            self.label,
            self.offered_bytes as f64 / MIB,
            self.hwm_attack_kib as f64 / 1024.0,
            self.hwm_end_kib as f64 / 1024.0,
            self.accepted,
            self.refused,
            self.kept,
            self.accepted.saturating_sub(self.kept),
            self.closed(),
            if self.errors.is_empty() { "" } else { " (error: see report)" },
        );
        (HEADER, row)
    }
}

/// What an attack (and the retained stall) shares: the clock, names, and the broker's figures.
pub(super) struct Run {
    pub(super) clock: Clock,
    run_id: String,
    probe: Option<Probe>,
    drain: Duration,
    payload: usize,
    /// Where to read the broker's metrics once the attack is over.
    metrics_url: Option<String>,
}

impl Run {
    pub(super) fn new(broker_pid: Option<u32>, drain_ms: u64, payload: usize) -> Result<Self> {
        let probe = broker_pid.map(Broker::attach).transpose()?.map(|b| b.probe());
        let drain = Duration::from_millis(drain_ms);
        Ok(Run { clock: Clock::start(), run_id: new_run_id(), probe, drain, payload, metrics_url: None })
    }

    pub(super) fn client_id(&self, role: char, index: usize) -> String {
        format!("tb{}{role}{index}", self.run_id)
    }

    pub(super) fn topic(&self, leaf: &str) -> String {
        format!("tolkbench/{}/{leaf}", self.run_id)
    }

    pub(super) fn drain(&self) -> Duration {
        self.drain
    }

    /// Message `seq` of the attack: stamped, so a read-back counts each one once.
    fn message(&self, seq: u64) -> Bytes {
        let now = self.clock.now_ns();
        Stamp { publisher: 0, seq, sent_ns: now, due_ns: now }.encode(self.payload)
    }

    pub(super) fn sample(&self) -> Option<ProcSample> {
        self.probe?.sample().map_err(|e| tracing::warn!("cannot read broker figures: {e:#}")).ok()
    }
}

/// What the attacker saw of its own messages.
#[derive(Debug, Default)]
pub(super) struct Offer {
    pub(super) accepted: u64,
    pub(super) refused: u64,
    pub(super) closed: u32,
    pub(super) notes: Vec<String>,
}

impl Offer {
    /// Keeps the first few distinct things the broker said.
    fn note(&mut self, note: String) {
        if self.notes.len() < NOTES_KEPT && !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }
}

/// Publishes `messages` messages over MQTT, message `i` on `topic(i)`, reconnecting when the
/// broker closes the connection.
pub(super) async fn offer_mqtt(
    run: &Run,
    connector: &MqttConnector,
    qos: Qos,
    retain: bool,
    messages: u64,
    topic: impl Fn(u64) -> String,
) -> Result<Offer> {
    let mut offer = Offer::default();
    let mut next = 0;
    let mut connections = 0;
    while next < messages {
        let mut publisher = connector.acked_publisher(run.client_id('p', connections), retain).await?;
        connections += 1;
        let mut sent = 0;
        while next < messages && publisher.publish(&topic(next), qos, run.message(next)).await.is_ok() {
            next += 1;
            sent += 1;
        }
        let acked = if qos == Qos::AtMostOnce { sent } else { publisher.acked(sent, ACK_WAIT).await };
        offer.accepted += acked;
        offer.refused += sent - acked;
        if let Some(reason) = publisher.close().await {
            offer.closed += 1;
            offer.note(format!("publisher closed: {reason}"));
        }
        if sent == 0 {
            // The connection ended before it took a message: that one is refused, not retried
            // for ever.
            offer.refused += 1;
            next += 1;
        }
    }
    Ok(offer)
}

/// Counts what a reader receives until it has every message or none came for the drain time.
async fn read_back(run: &Run, mut sub: Subscription, messages: u64, report: &mut AttackReport) {
    let mut rec = Recorder::new(vec![messages]);
    while !rec.complete() {
        match tokio::time::timeout(run.drain(), sub.deliveries.recv()).await {
            Ok(Some(d)) => {
                rec.record(&d.payload, d.received_ns);
            }
            Ok(None) | Err(_) => break,
        }
    }
    report.kept = rec.unique;
    report.reader_closed = sub.close().await;
}

/// Runs one attack as the command line asks.
pub async fn run(args: &AttackArgs) -> Result<AttackReport> {
    let attack = args.attack;
    if args.target.protocol != attack.protocol() {
        bail!("{} needs a {}:// target", attack.name(), attack.protocol().scheme());
    }
    let run = Run { metrics_url: args.metrics_url.clone(), ..Run::new(args.broker_pid, args.drain_ms, args.payload)? };
    let messages = args.messages.unwrap_or(attack.default_messages());
    let t = &args.target;
    let mut report = AttackReport {
        case: args.report.case.clone().unwrap_or_else(|| match attack {
            Attack::StalledReader => format!("{} qos{}", attack.name(), args.qos),
            _ => attack.name().to_string(),
        }),
        label: args.report.label.clone(),
        target: format!("{}://{}:{}{}", t.protocol.scheme(), t.host, t.port, t.path),
        messages,
        payload_bytes: args.payload,
        offered_bytes: messages * args.payload as u64,
        rss_start_kib: run.sample().map_or(0, |s| s.rss_kib),
        ..AttackReport::default()
    };
    let mqtt = MqttConnector::new(t, args.payload);
    let outcome = match attack {
        Attack::Retained => retained(&run, &mqtt, messages, &mut report).await,
        Attack::OfflineSession => offline_session(&run, &mqtt, messages, &mut report).await,
        Attack::StalledReader => stalled_reader(&run, &mqtt, messages, Qos::from_level(args.qos)?, &mut report).await,
        Attack::AmqpQueue => amqp_queue(&run, &AmqpConnector::new(t), messages, &mut report).await,
        Attack::WsnPullPoint => wsn_pull_point(&run, &WsnConnector::new(t), messages, &mut report).await,
    };
    if let Err(e) = outcome {
        report.errors.push(format!("{e:#}"));
    }
    if let Some(end) = run.sample() {
        report.hwm_end_kib = end.hwm_kib;
        report.rss_end_kib = end.rss_kib;
        if report.hwm_attack_kib == 0 {
            report.hwm_attack_kib = end.hwm_kib;
        }
    }
    Ok(report)
}

/// The metric families `--metrics-url` is read for.
const METRICS_KEPT: [&str; 3] = ["tolk_memory_bytes", "tolk_messages_dropped_total", "tolk_connections_closed_total"];

/// GETs a Prometheus text page over HTTP/1.0 (the server closes the connection after the
/// answer, so reading to the end is the whole page) and keeps the non-zero lines of
/// [`METRICS_KEPT`].
async fn read_metrics(url: &str) -> Result<Vec<String>> {
    let rest = url.strip_prefix("http://").with_context(|| format!("{url} is not an http:// URL"))?;
    let (authority, path) = rest.find('/').map_or((rest, "/"), |i| rest.split_at(i));
    let mut stream = TcpStream::connect(authority).await.with_context(|| format!("connecting to {authority}"))?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: {authority}\r\n\r\n").as_bytes()).await?;
    let mut page = String::new();
    stream.read_to_string(&mut page).await.with_context(|| format!("reading {url}"))?;
    let kept = page.lines().filter(|l| METRICS_KEPT.iter().any(|m| l.starts_with(m)) && !l.ends_with(" 0"));
    Ok(kept.map(str::to_owned).collect())
}

/// Takes in what the attacker saw, and the broker's peak memory now that the attack is over.
async fn attack_over(run: &Run, offer: Offer, report: &mut AttackReport) {
    if let Some(url) = &run.metrics_url {
        match read_metrics(url).await {
            Ok(lines) => report.metrics = lines,
            Err(e) => report.errors.push(format!("{e:#}")),
        }
    }
    report.attack_secs = run.clock.now_ns() as f64 / 1e9;
    report.hwm_attack_kib = run.sample().map_or(0, |s| s.hwm_kib);
    report.accepted = offer.accepted;
    report.refused = offer.refused;
    report.publisher_closed = offer.closed;
    report.notes = offer.notes;
}

async fn retained(run: &Run, mqtt: &MqttConnector, messages: u64, report: &mut AttackReport) -> Result<()> {
    let offer = offer_mqtt(run, mqtt, Qos::AtLeastOnce, true, messages, |i| run.topic(&format!("r/{i}"))).await?;
    attack_over(run, offer, report).await;
    // At QoS 1, so that the read-back does not lose at-most-once deliveries of its own.
    let sub = mqtt.subscribe(run.client_id('s', 0), run.topic("r/#"), Qos::AtLeastOnce, run.clock, READ_BUFFER).await?;
    read_back(run, sub, messages, report).await;
    Ok(())
}

async fn offline_session(run: &Run, mqtt: &MqttConnector, messages: u64, report: &mut AttackReport) -> Result<()> {
    let (persistent, id, topic) = (mqtt.persistent(), run.client_id('s', 0), run.topic("o"));
    let sub = persistent.subscribe(id.clone(), topic.clone(), Qos::AtLeastOnce, run.clock, READ_BUFFER).await?;
    if let Some(reason) = sub.close().await {
        bail!("the broker closed the persistent subscriber before it disconnected: {reason}");
    }
    let offer = offer_mqtt(run, mqtt, Qos::AtLeastOnce, false, messages, |_| topic.clone()).await?;
    attack_over(run, offer, report).await;
    let sub = persistent.resume(id, run.clock, READ_BUFFER).await?;
    read_back(run, sub, messages, report).await;
    Ok(())
}

async fn stalled_reader(
    run: &Run,
    mqtt: &MqttConnector,
    messages: u64,
    qos: Qos,
    report: &mut AttackReport,
) -> Result<()> {
    let topic = run.topic("s");
    // Nothing polls this connection until the read-back: its socket is not read.
    let (client, eventloop) = mqtt.subscribed(run.client_id('s', 0), topic.clone(), qos).await?;
    let offer = offer_mqtt(run, mqtt, qos, false, messages, |_| topic.clone()).await?;
    attack_over(run, offer, report).await;
    read_back(run, mqtt::receive(client, eventloop, run.clock, READ_BUFFER), messages, report).await;
    Ok(())
}

async fn amqp_queue(run: &Run, amqp: &AmqpConnector, messages: u64, report: &mut AttackReport) -> Result<()> {
    let queue = format!("tolkbench-{}-q", run.run_id);
    let key = routing_key(&run.topic("q"));
    let (connection, channel) = amqp.open(&run.client_id('d', 0)).await?;
    // Not exclusive, not auto-delete: the queue outlives the connection that declared it.
    channel
        .queue_declare(queue.as_str().into(), QueueDeclareOptions::default(), FieldTable::default())
        .await
        .context("declaring the queue")?;
    let (exchange, routing) = (TOPIC_EXCHANGE.into(), key.as_str().into());
    let bind = QueueBindOptions::default();
    channel
        .queue_bind(queue.as_str().into(), exchange, routing, bind, FieldTable::default())
        .await
        .context("binding")?;
    let _ = connection.close(200, "bye".into()).await;

    let mut offer = Offer::default();
    let properties = BasicProperties::default().with_delivery_mode(PERSISTENT);
    let mut next = 0;
    let mut connections = 0;
    while next < messages {
        let (connection, channel) = amqp.open(&run.client_id('p', connections)).await?;
        connections += 1;
        channel.confirm_select(ConfirmSelectOptions::default()).await.context("confirm.select")?;
        let closed = loop {
            if next == messages {
                break None;
            }
            let body = run.message(next);
            next += 1;
            let confirmed = async {
                let publish = BasicPublishOptions::default();
                let (exchange, routing) = (TOPIC_EXCHANGE.into(), key.as_str().into());
                channel.basic_publish(exchange, routing, publish, &body, properties.clone()).await?.await
            };
            match confirmed.await {
                Ok(c) if c.is_ack() => offer.accepted += 1,
                Ok(_) => {
                    offer.refused += 1;
                    offer.note("basic.nack".into());
                }
                Err(e) => {
                    offer.refused += 1;
                    break Some(e.to_string());
                }
            }
        };
        match closed {
            Some(reason) => {
                offer.closed += 1;
                offer.note(format!("channel or connection closed: {reason}"));
            }
            None => {
                let _ = connection.close(200, "bye".into()).await;
            }
        }
    }
    attack_over(run, offer, report).await;

    let (connection, channel) = amqp.open(&run.client_id('r', 0)).await?;
    let passive = QueueDeclareOptions { passive: true, ..QueueDeclareOptions::default() };
    let declared = channel.queue_declare(queue.as_str().into(), passive, FieldTable::default()).await;
    let _ = connection.close(200, "bye".into()).await;
    report.kept = u64::from(declared.context("passive queue.declare for the message count")?.message_count());
    Ok(())
}

async fn wsn_pull_point(run: &Run, wsn: &WsnConnector, messages: u64, report: &mut AttackReport) -> Result<()> {
    let topic = run.topic("w");
    let pull_point = wsn.create_pull_point().await?;
    wsn.subscribe_consumer(&pull_point, &topic).await?;
    let document = wsn::filled_notify(&topic, run.payload);

    let mut offer = Offer::default();
    let mut next = 0;
    let mut connections = 0;
    while next < messages {
        let mut publisher = wsn.publisher(run.client_id('p', connections), Qos::AtMostOnce).await?;
        connections += 1;
        let closed = loop {
            if next == messages {
                break None;
            }
            next += 1;
            match publisher.notify_document(document.clone()).await {
                Ok((status, _)) if status.is_success() => offer.accepted += 1,
                Ok((status, reason)) => {
                    offer.refused += 1;
                    offer.note(format!("HTTP {status}: {reason}"));
                }
                Err(e) => {
                    offer.refused += 1;
                    break Some(format!("{e:#}"));
                }
            }
        };
        let ended = publisher.close().await;
        if let Some(reason) = closed.or(ended) {
            offer.closed += 1;
            offer.note(format!("connection closed: {reason}"));
        }
    }
    attack_over(run, offer, report).await;

    // One at a time: a GetMessagesResponse holds whole messages.
    while report.kept < messages {
        match wsn.get_messages(&pull_point, 1).await? {
            0 => break,
            n => report.kept += n as u64,
        }
    }
    Ok(())
}
