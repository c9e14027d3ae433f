//! Payload re-encoding for subscribers (`[[transcode]]` and `[[content_type]]`).
//!
//! A rule says which subscribers (by topic filter and protocol) receive which format. The
//! conversion happens when a subscriber's task takes the message from its outbox, not on the
//! publisher's path, and each message keeps what it was converted to (`variants.rs`), so
//! that a message reaching a hundred WS-N consumers is converted once per rule, not a hundred
//! times. A payload whose format is unknown passes through untouched; one that cannot be converted
//! passes through too, and is counted (`tolk_transcode_total{result="failed"}`): re-encoding
//! never loses a message. The conversions themselves live in `payload-codec`, which knows
//! nothing of the broker.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use payload_codec::{Format, Limits, Schema};
use serde::{Deserialize, Serialize};
use tolk_metrics::{Encoding, Hop, Metrics, Protocol};

use crate::message::Message;
use crate::topic;

/// One `[[transcode]]` table: subscribers matching it receive payloads in the format `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranscodeRule {
    /// The topics it applies to: an MQTT-style filter on the common topic space.
    pub topics: String,
    /// The content type subscribers receive (`application/json`, `application/cbor`,
    /// `application/xml`, `application/senml+json`, `application/senml+cbor`,
    /// `application/x-protobuf`).
    pub to: String,
    /// Source content types it converts; empty: any format the broker knows.
    #[serde(default)]
    pub from: Vec<String>,
    /// Subscriber protocols it applies to (`mqtt`, `mqttsn`, `stomp`, `amqp`, `wsn`, `mqtt-ws`,
    /// `stomp-ws`, `bridge`; `mqtt` and `stomp` include their WebSocket listeners); empty: every
    /// client protocol, bridges and the cluster left out.
    #[serde(default)]
    pub protocols: Vec<String>,
    /// The Protobuf message type, when either side of the conversion is Protobuf.
    #[serde(default)]
    pub proto: Option<ProtoType>,
}

/// A Protobuf message type in a `.proto` file, compiled when the broker starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtoType {
    /// The `.proto` file; imports are looked up beside it.
    pub file: PathBuf,
    /// The fully qualified message name, e.g. `sensors.v1.Reading`.
    pub message: String,
}

/// One `[[content_type]]` table: what the payloads on some topics are, for publishers whose
/// protocol cannot say (MQTT 3.1.1, MQTT-SN). A content type the publisher did give wins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContentTypeRule {
    /// The topics it applies to: an MQTT-style filter.
    pub topics: String,
    /// Their content type, e.g. `application/json`.
    #[serde(rename = "type")]
    pub content_type: String,
}

/// A configuration the transcoder cannot work with. Names the rule and what is wrong, for
/// `--check-config`.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {problem}")]
pub struct TranscodeConfigError {
    what: String,
    problem: String,
}

/// A rule, checked and compiled.
struct Rule {
    filter: String,
    from: Vec<Format>,
    to: Format,
    /// Subscriber protocols, a bit per [`Protocol::index`].
    protocols: u32,
    schema: Option<Schema>,
}

impl Rule {
    fn serves(&self, protocol: Protocol) -> bool {
        self.protocols & (1 << protocol.index()) != 0
    }
}

/// The bounds of one conversion. 256 KiB rather than the codec's 1 MiB: a conversion holds
/// the whole payload as a tree for a moment (up to about 70 bytes per input byte for the worst
/// CBOR), and one runs at a time per worker thread, so this keeps the peak near 18 MB per
/// thread on a 1 GB Pi. Sensor readings are far smaller.
const LIMITS: Limits = Limits { max_depth: 32, max_output_bytes: 256 * 1024 };

/// The compiled `[[transcode]]` rules, shared by every subscriber's outbox.
pub struct Transcoder {
    rules: Vec<Rule>,
    declared: Vec<(String, Format)>,
    limits: Limits,
    metrics: Arc<Metrics>,
}

/// The protocols a rule without `protocols` serves: every client protocol.
const CLIENT_PROTOCOLS: [Protocol; 7] = [
    Protocol::Mqtt,
    Protocol::MqttWs,
    Protocol::MqttSn,
    Protocol::Stomp,
    Protocol::StompWs,
    Protocol::Amqp,
    Protocol::Wsn,
];

fn protocol_bits(names: &[String], what: &str) -> Result<u32, TranscodeConfigError> {
    let bit = |p: Protocol| 1u32 << p.index();
    if names.is_empty() {
        return Ok(CLIENT_PROTOCOLS.into_iter().map(bit).fold(0, |a, b| a | b));
    }
    names.iter().try_fold(0, |bits, name| {
        let more = match name.as_str() {
            "mqtt" => bit(Protocol::Mqtt) | bit(Protocol::MqttWs),
            "stomp" => bit(Protocol::Stomp) | bit(Protocol::StompWs),
            "mqtt-ws" => bit(Protocol::MqttWs),
            "stomp-ws" => bit(Protocol::StompWs),
            "mqttsn" => bit(Protocol::MqttSn),
            "amqp" => bit(Protocol::Amqp),
            "wsn" => bit(Protocol::Wsn),
            "bridge" => bit(Protocol::Bridge),
            other => {
                return Err(TranscodeConfigError {
                    what: what.to_owned(),
                    problem: format!(
                        "protocol {other:?}: one of mqtt, mqtt-ws, mqttsn, stomp, stomp-ws, amqp, wsn, bridge"
                    ),
                });
            }
        };
        Ok(bits | more)
    })
}

fn format_of(content_type: &str, what: &str) -> Result<Format, TranscodeConfigError> {
    Format::from_content_type(content_type).ok_or_else(|| TranscodeConfigError {
        what: what.to_owned(),
        problem: format!(
            "content type {content_type:?} is not one the broker converts (application/json, application/cbor, \
             application/xml, application/senml+json, application/senml+cbor, application/x-protobuf)"
        ),
    })
}

fn check_filter(filter: &str, what: &str) -> Result<(), TranscodeConfigError> {
    topic::validate_filter(filter)
        .map_err(|e| TranscodeConfigError { what: what.to_owned(), problem: format!("topics {filter:?}: {e}") })
}

/// The built-in rule that hands WS-N consumers JSON as XML elements (the W3C mapping), not as
/// escaped text: on unless `[wsn] json_as_xml = false`.
pub fn wsn_json_as_xml() -> TranscodeRule {
    TranscodeRule {
        topics: "#".into(),
        to: "application/xml".into(),
        from: vec!["application/json".into()],
        protocols: vec!["wsn".into()],
        proto: None,
    }
}

impl Transcoder {
    /// Compiles `rules` (the first that matches a subscriber wins) and `declared` content
    /// types, reading the `.proto` files they name (relative paths from the working
    /// directory, as for every other file in the configuration).
    pub fn new(
        rules: &[TranscodeRule],
        declared: &[ContentTypeRule],
        metrics: Arc<Metrics>,
    ) -> Result<Transcoder, TranscodeConfigError> {
        let mut compiled = Vec::with_capacity(rules.len());
        for (i, rule) in rules.iter().enumerate() {
            let what = format!("transcode[{i}]");
            check_filter(&rule.topics, &what)?;
            let to = format_of(&rule.to, &what)?;
            let from = rule.from.iter().map(|ct| format_of(ct, &what)).collect::<Result<Vec<_>, _>>()?;
            let schema = match &rule.proto {
                Some(proto) => {
                    let schema = Schema::load(&proto.file, &proto.message)
                        .map_err(|e| TranscodeConfigError { what: what.clone(), problem: format!("proto: {e}") })?;
                    Some(schema)
                }
                None if to == Format::Protobuf || from.contains(&Format::Protobuf) => {
                    return Err(TranscodeConfigError {
                        what,
                        problem: "Protobuf needs `proto = { file = \"...\", message = \"...\" }`".into(),
                    });
                }
                None => None,
            };
            let protocols = protocol_bits(&rule.protocols, &what)?;
            compiled.push(Rule { filter: rule.topics.clone(), from, to, protocols, schema });
        }
        let mut types = Vec::with_capacity(declared.len());
        for (i, d) in declared.iter().enumerate() {
            let what = format!("content_type[{i}]");
            check_filter(&d.topics, &what)?;
            types.push((d.topics.clone(), format_of(&d.content_type, &what)?));
        }
        Ok(Transcoder { rules: compiled, declared: types, limits: LIMITS, metrics })
    }

    /// Whether any rule converts for subscribers on `protocol`; outboxes of other protocols
    /// do not look at messages at all.
    pub fn serves(&self, protocol: Protocol) -> bool {
        self.rules.iter().any(|r| r.serves(protocol))
    }

    /// The payload's format: its own content type, else what `[[content_type]]` declares for
    /// its topic.
    fn source_format(&self, message: &Message) -> Option<Format> {
        match &message.props.content_type {
            Some(ct) => Format::from_content_type(ct),
            None => self.declared.iter().find(|(filter, _)| topic::matches(filter, &message.topic)).map(|(_, f)| *f),
        }
    }

    /// `message` as a subscriber on `protocol` should receive it: converted by the first rule
    /// that matches, or `None` when it goes as published (no rule, an unknown format, already
    /// in the target format, or a conversion that failed).
    pub fn apply(&self, message: &Arc<Message>, protocol: Protocol) -> Option<Arc<Message>> {
        let from = self.source_format(message)?;
        let (index, rule) = self.rules.iter().enumerate().find(|(_, r)| {
            r.serves(protocol)
                && (r.from.is_empty() || r.from.contains(&from))
                && topic::matches(&r.filter, &message.topic)
        })?;
        if rule.to == from {
            return None;
        }
        // Held while converting, so that a message is converted once per rule even when its
        // subscribers' tasks ask at the same time.
        let mut variants = message.variants.lock();
        if let Some(done) = variants.get(index) {
            return done;
        }
        let started = Instant::now();
        let converted = payload_codec::convert(&message.payload, from, rule.to, rule.schema.as_ref(), &self.limits);
        self.metrics.record(Hop::Transcode, message.origin.protocol, protocol, started.elapsed());
        let variant = match converted {
            Ok(payload) => {
                self.metrics.transcoded(encoding(rule.to), true);
                let mut variant = Message::clone(message);
                variant.payload = payload.into();
                variant.props.content_type = Some(rule.to.content_type().to_owned());
                variant.props.payload_utf8 = is_text(rule.to).then_some(true);
                Some(Arc::new(variant))
            }
            Err(e) => {
                self.metrics.transcoded(encoding(rule.to), false);
                tracing::debug!(topic = %message.topic, from = from.label(), to = rule.to.label(), error = %e,
                    "payload not re-encoded; sent as published");
                None
            }
        };
        variants.put(index, variant.clone());
        variant
    }
}

impl Transcoder {
    /// [`Transcoder::apply`], replacing `message` with what the subscriber receives.
    pub(crate) fn apply_in_place(&self, message: &mut Arc<Message>, protocol: Protocol) {
        if let Some(variant) = self.apply(message, protocol) {
            *message = variant;
        }
    }
}

/// Formats whose payloads are UTF-8 text (the MQTT 5 payload format indicator).
fn is_text(format: Format) -> bool {
    matches!(format, Format::Json | Format::Xml | Format::SenmlJson)
}

/// The metrics label of a format.
fn encoding(format: Format) -> Encoding {
    match format {
        Format::Json => Encoding::Json,
        Format::Cbor => Encoding::Cbor,
        Format::Xml => Encoding::Xml,
        Format::SenmlJson => Encoding::SenmlJson,
        Format::SenmlCbor => Encoding::SenmlCbor,
        Format::Protobuf => Encoding::Protobuf,
    }
}
