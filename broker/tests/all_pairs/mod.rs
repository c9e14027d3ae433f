//! One small client per protocol behind one trait, so that the all-pairs matrix can treat a
//! publisher and a subscriber of any protocol alike. Each adapter speaks its protocol over a
//! real socket to the real `tolk` binary and maps the canonical (MQTT-style) topic to its own
//! terms by the rules of docs/translation.md, written again here from the rules, not taken from
//! the broker's code, so that a wrong rule on either side shows up as a failing cell.

pub mod amqp;
pub mod mqtt;
pub mod mqttsn;
pub mod stomp;
pub mod tolk;
pub mod wsn;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;

/// A boxed future, so that the trait stays object-safe (`Box<dyn PubSub>`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Longest wait for anything the broker is expected to do.
pub const WAIT: Duration = Duration::from_secs(5);

/// The WS-N topic namespace the matrix uses; the broker must hand it back on delivery.
pub const WSN_NAMESPACE: &str = "urn:tolk:all-pairs";

/// The five protocols, in matrix order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Proto {
    Mqtt,
    MqttSn,
    Stomp,
    Amqp,
    Wsn,
}

impl Proto {
    pub const ALL: [Proto; 5] = [Proto::Mqtt, Proto::MqttSn, Proto::Stomp, Proto::Amqp, Proto::Wsn];

    /// The label the broker's metrics use for this protocol.
    pub fn label(self) -> &'static str {
        match self {
            Proto::Mqtt => "mqtt",
            Proto::MqttSn => "mqttsn",
            Proto::Stomp => "stomp",
            Proto::Amqp => "amqp",
            Proto::Wsn => "wsn",
        }
    }

    /// MQTT 5 properties, STOMP headers, AMQP basic properties and the WS-N payload wrapper carry
    /// a content type; MQTT-SN carries none (translation.md "Properties and headers").
    pub fn carries_content_type(self) -> bool {
        self != Proto::MqttSn
    }

    /// User headers: MQTT 5 user properties, STOMP headers, AMQP headers table. MQTT-SN and WS-N
    /// have no place for them.
    pub fn carries_user_headers(self) -> bool {
        matches!(self, Proto::Mqtt | Proto::Stomp | Proto::Amqp)
    }

    /// Correlation id, reply-to and expiry: MQTT 5, STOMP and AMQP only (translation.md
    /// "Properties and headers").
    pub fn carries_request_reply(self) -> bool {
        matches!(self, Proto::Mqtt | Proto::Stomp | Proto::Amqp)
    }

    /// Whether a publisher of this protocol can ask for at-least-once (WS-N Notify cannot).
    pub fn publishes_at_least_once(self) -> bool {
        self != Proto::Wsn
    }
}

impl fmt::Display for Proto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.label())
    }
}

/// What a publisher sends. `topic` is canonical; the adapter maps it to its own terms.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub topic: String,
    pub payload: Bytes,
    pub content_type: Option<String>,
    /// One user header, sent only by protocols that carry user headers.
    pub header: Option<(String, String)>,
    pub at_least_once: bool,
    /// Correlation id, reply-to (a canonical topic) and time to live: sent only by protocols
    /// that carry them.
    pub correlation: Option<String>,
    pub reply_to: Option<String>,
    pub expiry: Option<Duration>,
}

impl Outgoing {
    /// A message with nothing but a topic, a payload and a guarantee.
    pub fn plain(topic: String, payload: Bytes, at_least_once: bool) -> Outgoing {
        Outgoing {
            topic,
            payload,
            content_type: None,
            header: None,
            at_least_once,
            correlation: None,
            reply_to: None,
            expiry: None,
        }
    }
}

/// What a subscriber got, in its own protocol's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// Topic or destination as the subscriber's protocol names it (MQTT topic, MQTT-SN topic
    /// name resolved from its id, STOMP `destination`, AMQP routing key, WS-N `{namespace}path`).
    pub topic: String,
    /// The payload, unwrapped where the protocol wraps it (WS-N).
    pub payload: Bytes,
    pub content_type: Option<String>,
    /// Every user header that arrived, in order.
    pub headers: Vec<(String, String)>,
    /// The guarantee the delivery says it has, where the protocol says it (MQTT/MQTT-SN QoS ≥ 1,
    /// STOMP `persistent:true`, AMQP delivery-mode 2); `None` for WS-N, which has no such flag.
    pub at_least_once: Option<bool>,
    /// Correlation id as text (MQTT 5 Correlation Data, STOMP/AMQP `correlation-id`).
    pub correlation: Option<String>,
    /// Reply-to in the subscriber's terms (MQTT Response Topic, STOMP `reply-to`, AMQP reply-to).
    pub reply_to: Option<String>,
    /// Time left before the message expires, as the delivery states it.
    pub expires_in: Option<Duration>,
}

impl Received {
    /// A delivery that carries no properties (MQTT-SN, WS-N).
    pub fn bare(topic: String, payload: Bytes, content_type: Option<String>, at_least_once: Option<bool>) -> Received {
        Received {
            topic,
            payload,
            content_type,
            headers: Vec::new(),
            at_least_once,
            correlation: None,
            reply_to: None,
            expires_in: None,
        }
    }
}

/// How a subscriber subscribes.
#[derive(Debug, Clone, Copy)]
pub struct Subscription<'a> {
    /// Canonical filter (MQTT wildcards allowed).
    pub filter: &'a str,
    /// Ask for at-least-once delivery (MQTT/MQTT-SN QoS 1, STOMP client-individual acks, AMQP
    /// manual acks).
    pub at_least_once: bool,
    /// Keep what is published while the client is away: MQTT session with an expiry, MQTT-SN
    /// clean session off, AMQP durable queue, STOMP `/queue/` bound to the topic, WS-N pull point.
    pub survive_reconnect: bool,
}

/// One protocol's client, as the matrix drives it.
pub trait PubSub: Send {
    /// Subscribes and returns once the broker confirmed the subscription is in force.
    fn subscribe<'a>(&'a mut self, subscription: Subscription<'a>) -> BoxFuture<'a, ()>;
    /// Publishes and returns once the broker said it routed the message (where it can say so).
    fn publish<'a>(&'a mut self, message: &'a Outgoing) -> BoxFuture<'a, ()>;
    /// The next delivery, acknowledged as the subscription requires; `None` after `timeout`.
    fn next_message(&mut self, timeout: Duration) -> BoxFuture<'_, Option<Received>>;
    /// Goes away as a client of this protocol does (see each adapter for what that means).
    fn disconnect(&mut self) -> BoxFuture<'_, ()>;
    /// Comes back and resumes what `subscribe` set up.
    fn reconnect(&mut self) -> BoxFuture<'_, ()>;
    /// The topic or destination a delivery on canonical `topic` names, in this protocol's terms,
    /// given how this client subscribed.
    fn own_terms(&self, topic: &str) -> String;
}

/// Connects a client of `proto` named `name` (unique per client).
pub async fn connect(proto: Proto, broker: &tolk::Addrs, name: &str) -> Box<dyn PubSub> {
    match proto {
        Proto::Mqtt => Box::new(mqtt::Mqtt::connect(broker.get("mqtt"), name).await),
        Proto::MqttSn => Box::new(mqttsn::MqttSn::connect(broker.get("mqttsn"), name).await),
        Proto::Stomp => Box::new(stomp::Stomp::connect(broker.get("stomp"), broker.get("amqp"), name).await),
        Proto::Amqp => Box::new(amqp::Amqp::connect(broker.get("amqp"), name).await),
        Proto::Wsn => Box::new(wsn::Wsn::new(broker.get("http"), name)),
    }
}

/// AMQP routing key of a canonical topic or binding key of a canonical filter
/// (translation.md): levels become words joined by `.`, `.` and `/` swap inside a word, and
/// `+` becomes `*` (`#` stays).
pub fn amqp_key(filter: &str) -> String {
    filter
        .split('/')
        .map(|level| match level {
            "+" => "*".to_owned(),
            "#" => "#".to_owned(),
            word => word.chars().map(|c| if c == '.' { '/' } else { c }).collect(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// Milliseconds since the Unix epoch now (STOMP `expires`).
pub fn epoch_millis() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    u64::try_from(now.as_millis()).unwrap()
}

/// Awaits `f`, failing with `what` after [`WAIT`].
pub async fn within<F: Future>(what: &str, f: F) -> F::Output {
    match tokio::time::timeout(WAIT, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {WAIT:?} waiting for {what}"),
    }
}

/// Bytes shown readably in failure messages.
pub fn show(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}
