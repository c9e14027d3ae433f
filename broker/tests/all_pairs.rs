//! Every protocol to every protocol, through the real `tolk` binary: what the product is for.
//!
//! One broker runs for the whole matrix, every listener on an ephemeral port read from its log.
//! For each publisher × subscriber pair (25), two cells:
//!
//! - **delivery**: a subscriber with a wildcard filter (MQTT `+`/`#`, MQTT-SN wildcard
//!   SUBSCRIBE, STOMP `/topic/…/+` or `/#`, an AMQP queue bound to `amq.topic` with `*`/`#`,
//!   WS-N Full `*` or `//.`) gets binary, text, XML, HTML, empty and 150 kB payloads exactly once
//!   each: topic in its own terms (a `.` inside a level, a level that is not an XML name), payload
//!   byte for byte (unwrapped for WS-N), and, where both protocols carry them and absent where one
//!   cannot: content type, one user header, correlation id, reply-to, expiry, and the guarantee
//!   the delivery declares. MQTT-SN cannot carry 150 kB: it must not arrive (dropped, counted).
//! - **reconnect**: a subscriber whose subscription survives (MQTT session with an expiry, MQTT-SN
//!   clean session off, AMQP durable queue, STOMP `/queue/` bound to the topic, WS-N pull point)
//!   goes away, the message is published and confirmed, the subscriber comes back and gets it
//!   exactly once. WS-N publishes at most once, which an offline MQTT or MQTT-SN session rightly
//!   does not keep: there the message must not arrive.
//!
//! A marker message published last (at least once) tells when everything has arrived, so nothing
//! waits on a clock. Then `/api/latency` and `/metrics` must show the end-to-end hop of every
//! pair. Every cell runs even when another fails, and the report names the pair, the payload and
//! the field that differed.

#[path = "all_pairs/mod.rs"]
mod clients;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use bytes::Bytes;
use clients::tolk::{Addrs, Tolk};
use clients::{Outgoing, Proto, Received, Subscription, WAIT, connect, show};

/// The payload kinds every pair carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Binary,
    Text,
    Xml,
    /// Markup that is well-formed XML but published as HTML: its content type must survive.
    Html,
    Empty,
    /// Bigger than an AMQP frame (split into body frames both ways) and than any MQTT-SN
    /// datagram (which cannot carry it: dropped and counted, never truncated).
    Big,
}

/// Size of [`Kind::Big`]: more than `[amqp] frame_max_bytes` (128 KiB) and than the largest
/// UDP datagram MQTT-SN can use.
const BIG: usize = 150_000;

impl Kind {
    const ALL: [Kind; 6] = [Kind::Binary, Kind::Text, Kind::Xml, Kind::Html, Kind::Empty, Kind::Big];

    /// Whether a publisher of `p` can send it and a subscriber of `s` can get it.
    fn carried(self, p: Proto, s: Proto) -> bool {
        self != Kind::Big || (p != Proto::MqttSn && s != Proto::MqttSn)
    }

    /// The last topic level: a `.` inside a level (swapped with `/` in AMQP routing keys), and a
    /// leading digit and a space (not XML names: `_xHHHH_`-escaped in WS-N topics).
    fn level(self) -> &'static str {
        match self {
            Kind::Binary => "bin.v1",
            Kind::Text => "2nd text",
            Kind::Xml => "xml",
            Kind::Html => "html",
            Kind::Empty => "empty",
            Kind::Big => "big",
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Kind::Binary => "application/octet-stream",
            Kind::Text => "text/plain; charset=\"utf-8\"",
            Kind::Xml => "application/xml",
            Kind::Html => "text/html; charset=utf-8",
            Kind::Empty => "text/plain",
            Kind::Big => "application/octet-stream",
        }
    }

    /// NUL, CR/LF, bytes ≥ 0x80 and invalid UTF-8 in the binary one; XML specials in the text one;
    /// a namespaced element with an attribute and an escape in the XML one.
    fn payload(self, pair: &str) -> Bytes {
        match self {
            Kind::Binary => {
                [&b"\x00\x01\xff\xfe\x80tolk\x00<&>\r\n\xc3\x28"[..], pair.as_bytes(), b"\x00"].concat().into()
            }
            Kind::Text => format!("21.5 \u{b0}C <ok> & \"q\" 'a'\r\n{pair}").into(),
            Kind::Xml => format!(r#"<m:reading xmlns:m="urn:tolk:test" unit="C">21.5 &amp; {pair}</m:reading>"#).into(),
            Kind::Html => format!("<p>21.5 &amp; <b>{pair}</b></p>").into(),
            Kind::Empty => Bytes::new(),
            Kind::Big => (0..BIG).map(|i| (i % 251) as u8).collect(),
        }
    }
}

/// A user header whose name has capitals and whose value needs escaping in STOMP (`:`, `\\`,
/// line feed) and is not ASCII.
const HEADER: &str = "Site-Id";

fn header_value(pair: &str) -> String {
    format!("{pair}: caf\u{e9} \\ line\nend")
}
const MARKER: &[u8] = b"end";

fn pair_name(p: Proto, s: Proto) -> String {
    format!("{p}-{s}")
}

fn topic_base(p: Proto, s: Proto) -> String {
    format!("all-pairs/{}", pair_name(p, s))
}

/// The delivery cell's filter: each subscriber protocol gets `+` for some publishers and `#`
/// for the others.
fn wildcard_filter(p: Proto, s: Proto) -> String {
    let index = |x: Proto| Proto::ALL.iter().position(|y| *y == x).unwrap();
    let base = topic_base(p, s);
    if (index(p) + index(s)) % 2 == 0 { format!("{base}/+") } else { format!("{base}/#") }
}

/// Time to live of every message that can carry one; deliveries must state between
/// [`TTL_FLOOR`] and this much left.
const TTL: Duration = Duration::from_secs(60);
const TTL_FLOOR: Duration = Duration::from_secs(40);

/// A message of `kind` from `p` with every property `p` can carry.
fn outgoing(p: Proto, kind: Kind, topic: String, pair: &str) -> Outgoing {
    let request_reply = p.carries_request_reply();
    Outgoing {
        payload: kind.payload(pair),
        content_type: Some(kind.content_type().to_owned()),
        header: p.carries_user_headers().then(|| (HEADER.to_owned(), header_value(pair))),
        at_least_once: p.publishes_at_least_once(),
        correlation: request_reply.then(|| format!("corr-{pair}")),
        reply_to: request_reply.then(|| format!("{}/replies.v1", topic_base_of(&topic))),
        expiry: request_reply.then_some(TTL),
        topic,
    }
}

/// `all-pairs/<pair>` of a matrix topic.
fn topic_base_of(topic: &str) -> &str {
    let mut levels = topic.splitn(3, '/');
    let (first, second) = (levels.next().unwrap(), levels.next().unwrap());
    &topic[..first.len() + 1 + second.len()]
}

/// What `s` must see for a message from `p` (translation.md "Properties and headers").
struct Expected {
    topic: String,
    payload: Bytes,
    content_type: Option<String>,
    headers: Vec<(String, String)>,
    at_least_once: Option<bool>,
    correlation: Option<String>,
    reply_to: Option<String>,
    expires: bool,
}

fn expected(p: Proto, s: Proto, kind: Kind, sent: &Outgoing, own_topic: String) -> Expected {
    let content_type = if !s.carries_content_type() {
        None
    } else if s == Proto::Wsn && (kind == Kind::Xml || (kind == Kind::Html && !p.carries_content_type())) {
        // An XML payload without another content type is embedded in the Notify as the element
        // itself: that says XML.
        Some("application/xml".to_owned())
    } else if p.carries_content_type() {
        sent.content_type.clone()
    } else {
        None
    };
    let headers = if p.carries_user_headers() && s.carries_user_headers() {
        sent.header.iter().cloned().collect()
    } else {
        Vec::new()
    };
    // MQTT and MQTT-SN deliver at min(publisher, subscription); STOMP `persistent` and AMQP
    // delivery-mode carry the publisher's guarantee; WS-N says nothing.
    let at_least_once = match s {
        Proto::Mqtt | Proto::MqttSn | Proto::Stomp | Proto::Amqp => Some(sent.at_least_once),
        Proto::Wsn => None,
    };
    let both = p.carries_request_reply() && s.carries_request_reply();
    // MQTT and STOMP `/topic/` replies name a topic; an AMQP reply-to names a queue, which has
    // no MQTT form (and the AMQP client wrote the routing key it would reply with).
    let reply_to = sent.reply_to.as_deref().filter(|_| both).and_then(|topic| match (p, s) {
        (Proto::Amqp, Proto::Mqtt) => None,
        (Proto::Amqp, Proto::Stomp) => Some(format!("/queue/{}", clients::amqp_key(topic))),
        (_, Proto::Mqtt) => Some(topic.to_owned()),
        (_, Proto::Stomp) => Some(format!("/topic/{topic}")),
        (_, _) => Some(clients::amqp_key(topic)),
    });
    Expected {
        topic: own_topic,
        payload: sent.payload.clone(),
        content_type,
        headers,
        at_least_once,
        correlation: sent.correlation.clone().filter(|_| both),
        reply_to,
        expires: both,
    }
}

/// Every difference between what arrived and what should have, one line each.
fn compare(what: &str, got: &Received, want: &Expected) -> Vec<String> {
    let mut diffs = Vec::new();
    let mut differs = |field: &str, got: String, want: String| {
        if got != want {
            diffs.push(format!("{what}: {field} {got}, expected {want}"));
        }
    };
    differs("topic", format!("{:?}", got.topic), format!("{:?}", want.topic));
    differs("payload", format!("{:?}", show(&got.payload)), format!("{:?}", show(&want.payload)));
    differs("content type", format!("{:?}", got.content_type), format!("{:?}", want.content_type));
    differs("user headers", format!("{:?}", got.headers), format!("{:?}", want.headers));
    differs("at-least-once", format!("{:?}", got.at_least_once), format!("{:?}", want.at_least_once));
    differs("correlation id", format!("{:?}", got.correlation), format!("{:?}", want.correlation));
    differs("reply-to", format!("{:?}", got.reply_to), format!("{:?}", want.reply_to));
    let ttl_ok = match got.expires_in {
        Some(left) => want.expires && (TTL_FLOOR..=TTL).contains(&left),
        None => !want.expires,
    };
    if !ttl_ok {
        let want = if want.expires { format!("{TTL_FLOOR:?}..={TTL:?} left") } else { "none".to_owned() };
        diffs.push(format!("{what}: expiry {:?}, expected {want}", got.expires_in));
    }
    diffs
}

/// Receives until the marker (payload `end`) arrives; everything before it, in order.
async fn until_marker(sub: &mut Box<dyn clients::PubSub>, what: &str) -> Vec<Received> {
    let mut got = Vec::new();
    loop {
        match sub.next_message(WAIT).await {
            Some(r) if r.payload == MARKER => return got,
            Some(r) => got.push(r),
            None => panic!("{what}: the marker never arrived; before it: {:#?}", got),
        }
    }
}

fn marker(topic: String, at_least_once: bool) -> Outgoing {
    Outgoing::plain(topic, Bytes::from_static(MARKER), at_least_once)
}

/// Every payload kind from `p` to a wildcard subscriber of `s`.
async fn delivery_cell(addrs: Addrs, p: Proto, s: Proto) -> Result<(), String> {
    let pair = pair_name(p, s);
    let base = topic_base(p, s);
    let mut sub = connect(s, &addrs, &format!("{pair}-s")).await;
    let filter = wildcard_filter(p, s);
    sub.subscribe(Subscription { filter: &filter, at_least_once: true, survive_reconnect: false }).await;
    let mut publisher = connect(p, &addrs, &format!("{pair}-p")).await;
    let mut sent = BTreeMap::new();
    for kind in Kind::ALL.into_iter().filter(|k| *k != Kind::Big || p != Proto::MqttSn) {
        let message = outgoing(p, kind, format!("{base}/{}", kind.level()), &pair);
        publisher.publish(&message).await;
        sent.insert(kind, message);
    }
    publisher.publish(&marker(format!("{base}/end"), p.publishes_at_least_once())).await;

    let got = until_marker(&mut sub, &format!("subscription {filter}")).await;
    let mut diffs = Vec::new();
    for (kind, message) in &sent {
        let own = sub.own_terms(&message.topic);
        let copies: Vec<&Received> = got.iter().filter(|r| r.topic == own).collect();
        let what = format!("{} payload on {}", kind.level(), message.topic);
        match (&copies[..], kind.carried(p, s)) {
            ([one], true) => diffs.extend(compare(&what, one, &expected(p, s, *kind, message, own))),
            ([], true) => diffs.push(format!("{what}: did not arrive (subscribed to {filter})")),
            ([], false) => {}
            (_, true) => diffs.push(format!("{what}: arrived {} times", copies.len())),
            (_, false) => diffs.push(format!("{what}: {s} cannot carry it, yet it arrived {} times", copies.len())),
        }
    }
    let known: Vec<String> = sent.values().map(|m| sub.own_terms(&m.topic)).collect();
    for r in got.iter().filter(|r| !known.contains(&r.topic)) {
        diffs.push(format!("unexpected delivery on {:?}: {:?}", r.topic, show(&r.payload)));
    }
    if diffs.is_empty() { Ok(()) } else { Err(diffs.join("\n")) }
}

/// Whether what `p` publishes waits for a subscriber of `s` that is away: at-least-once
/// messages always do; WS-N's at-most-once Notify waits in queues (AMQP, STOMP `/queue/`) and
/// pull points, but an offline MQTT or MQTT-SN session keeps only at-least-once messages
/// (translation.md "Delivery guarantees", core outbox rules).
fn kept_while_away(p: Proto, s: Proto) -> bool {
    p.publishes_at_least_once() || matches!(s, Proto::Amqp | Proto::Stomp | Proto::Wsn)
}

/// From `p` to a subscriber of `s` that is away when it is published.
async fn reconnect_cell(addrs: Addrs, p: Proto, s: Proto) -> Result<(), String> {
    let pair = pair_name(p, s);
    let topic = format!("{}/durable", topic_base(p, s));
    let mut sub = connect(s, &addrs, &format!("{pair}-ds")).await;
    sub.subscribe(Subscription { filter: &topic, at_least_once: true, survive_reconnect: true }).await;
    sub.disconnect().await;
    let mut publisher = connect(p, &addrs, &format!("{pair}-dp")).await;
    let message = outgoing(p, Kind::Binary, topic.clone(), &pair);
    publisher.publish(&message).await;
    // The marker must itself be kept, so a WS-N publisher's is sent by MQTT at least once;
    // it is queued after the message, so it shows whether the message was kept.
    if p.publishes_at_least_once() {
        publisher.publish(&marker(topic.clone(), true)).await;
    } else {
        let mut helper = connect(Proto::Mqtt, &addrs, &format!("{pair}-dm")).await;
        helper.publish(&marker(topic.clone(), true)).await;
    }
    sub.reconnect().await;
    let got = until_marker(&mut sub, &format!("after reconnecting, {topic}")).await;
    let own = sub.own_terms(&topic);
    match (&got[..], kept_while_away(p, s)) {
        ([one], true) => {
            let diffs = compare("after reconnecting", one, &expected(p, s, Kind::Binary, &message, own));
            if diffs.is_empty() { Ok(()) } else { Err(diffs.join("\n")) }
        }
        ([], false) => Ok(()),
        ([], true) => Err("after reconnecting: the message published while away was lost".to_owned()),
        (many, true) => Err(format!("after reconnecting: {} deliveries instead of one: {many:#?}", many.len())),
        (many, false) => {
            Err(format!("after reconnecting: an at-most-once message was kept for an offline {s} session: {many:#?}"))
        }
    }
}

/// Runs one cell in its own task so that a panic (a client's assertion) fails only that cell.
async fn run_cell<F>(name: &str, cell: F) -> Result<(), String>
where
    F: std::future::Future<Output = Result<(), String>> + Send + 'static,
{
    let task = tokio::spawn(tokio::time::timeout(Duration::from_secs(20), cell));
    match task.await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err(format!("{name}: timed out after 20 s")),
        Err(e) if e.is_panic() => {
            let panic = e.into_panic();
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "panicked".to_owned());
            Err(text)
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The `(in, out)` pairs `/api/latency` has an `end_to_end` row for.
fn latency_pairs(json: &str) -> Vec<(String, String)> {
    let report: serde_json::Value = serde_json::from_str(json).expect("/api/latency is JSON");
    report["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|row| row["hop"] == "end_to_end" && row["count"].as_u64().unwrap_or(0) > 0)
        .map(|row| (row["in"].as_str().unwrap().to_owned(), row["out"].as_str().unwrap().to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_protocol_reaches_every_protocol() {
    let started = std::time::Instant::now();
    let tolk = Tolk::start();
    let addrs = tolk.addrs();
    let mut failures = Vec::new();
    let mut table = format!("{:<16}", "pub \\ sub");
    for s in Proto::ALL {
        let _ = write!(table, "{s:<14}");
    }
    for p in Proto::ALL {
        let _ = write!(table, "\n{p:<16}");
        for s in Proto::ALL {
            let pair = pair_name(p, s);
            let delivery = run_cell(&pair, delivery_cell(addrs.clone(), p, s)).await;
            let reconnect = run_cell(&pair, reconnect_cell(addrs.clone(), p, s)).await;
            let mark = |r: &Result<(), String>, kept: bool| match (r.is_ok(), kept) {
                (false, _) => "FAIL",
                (true, true) => "ok",
                (true, false) => "dropped",
            };
            let cell = format!("{}+{}", mark(&delivery, true), mark(&reconnect, kept_while_away(p, s)));
            let _ = write!(table, "{cell:<14}");
            if let Err(e) = delivery {
                failures.push(format!("[{p} -> {s}] delivery:\n  {}", e.replace('\n', "\n  ")));
            }
            if let Err(e) = reconnect {
                failures.push(format!("[{p} -> {s}] reconnect:\n  {}", e.replace('\n', "\n  ")));
            }
        }
    }
    println!(
        "{table}\n(delivery+reconnect; \"dropped\": an offline MQTT/MQTT-SN session rightly kept no \
         at-most-once WS-N message)\nmatrix took {:?}",
        started.elapsed()
    );

    // Every pair that delivered must show up in the latency API and in Prometheus.
    let latency = tolk.http_get("/api/latency").await;
    let rows = latency_pairs(&latency);
    let shown: Vec<String> = rows.iter().map(|(i, o)| format!("{i}->{o}")).collect();
    let metrics = tolk.http_get("/metrics").await;
    for p in Proto::ALL {
        for s in Proto::ALL {
            let (inp, out) = (p.label().to_owned(), s.label().to_owned());
            if !rows.contains(&(inp.clone(), out.clone())) {
                failures.push(format!(
                    "[{p} -> {s}] /api/latency has no end_to_end row with in={inp:?}, out={out:?}; it has {}",
                    shown.join(" ")
                ));
            }
            let series = format!("tolk_hop_latency_seconds_count{{hop=\"end_to_end\",in=\"{inp}\",out=\"{out}\"}} ");
            let count =
                metrics.lines().find_map(|l| l.strip_prefix(series.as_str())).and_then(|n| n.parse::<u64>().ok());
            if count.is_none_or(|n| n == 0) {
                failures.push(format!("[{p} -> {s}] /metrics has no {series}series with a count"));
            }
        }
    }
    // What MQTT-SN cannot carry (the big payloads from the four other publishers) was dropped
    // and counted, not truncated.
    let dropped = "tolk_messages_dropped_total{protocol=\"mqttsn\",reason=\"untranslatable\"} ";
    let count = metrics.lines().find_map(|l| l.strip_prefix(dropped)).and_then(|n| n.parse::<u64>().ok());
    if count.is_none_or(|n| n < 4) {
        failures.push(format!("/metrics: {dropped}is {count:?}, expected at least 4 (one big payload per publisher)"));
    }
    if !failures.is_empty() {
        panic!(
            "{} of the all-pairs checks failed:\n{table}\n\n{}\n\nbroker log (last lines):\n{}",
            failures.len(),
            failures.join("\n"),
            tolk.log_tail(40)
        );
    }
    tolk.stop();
}
