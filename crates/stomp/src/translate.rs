//! SEND frame → core [`Message`] and core [`Message`] → MESSAGE frame. The whole property
//! mapping between STOMP headers and the core's message model lives here and only here.
//!
//! * `content-type` ↔ `props.content_type` (a message with no content type but flagged UTF-8 by
//!   its publisher, e.g. MQTT 5's payload format indicator, goes out as
//!   `text/plain;charset=utf-8`).
//! * `reply-to` (`/topic/…` or `/queue/…`) ↔ `props.reply_to`.
//! * `correlation-id` ↔ `props.correlation_data` (the UTF-8 bytes of the header).
//! * `expires` (milliseconds since the Unix epoch, 0 = never; the ActiveMQ/RabbitMQ convention)
//!   ↔ `props.expires_at`.
//! * `persistent:true` → QoS at-least-once, `persistent:false` → at-most-once; absent → the
//!   destination's default (at-most-once for `/topic/`, at-least-once for `/queue/`). MESSAGE
//!   frames carry `persistent:true` for messages published at least once.
//! * Every other header becomes a user property, first occurrence only (STOMP 1.2 "Repeated
//!   Header Entries"), and user properties come back as headers, except names that would clash
//!   with the headers above or with the ones the broker sets, and text the negotiated version
//!   cannot carry (NUL; CR/LF under 1.0; CR under 1.1).

use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use stomp_codec::{Frame, Utf8Bytes, Version};
use tolk_core::{Message, Origin, QoS};

use crate::destination::{self, QUEUE_PREFIX, TOPIC_PREFIX};
use crate::error::StompError;

/// Headers with a meaning of their own in SEND or MESSAGE frames: never copied to or from user
/// properties.
pub(crate) const RESERVED: &[&str] = &[
    "destination",
    "content-length",
    "content-type",
    "receipt",
    "receipt-id",
    "transaction",
    "reply-to",
    "correlation-id",
    "expires",
    "persistent",
    "message-id",
    "subscription",
    "ack",
    "redelivered",
];

/// Where a SEND's message goes, already validated.
/// Public for the translation benchmarks (`benches/benches/translation.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendTarget<'a> {
    /// Published through the router on this topic.
    Topic(&'a str),
    /// Pushed into this queue; the queue name is also the message's topic.
    Queue(&'a str),
}

/// The MESSAGE header set that does not come from the message itself.
/// Public for the translation benchmarks (`benches/benches/translation.rs`).
pub struct Envelope<'a> {
    /// Value of `destination`.
    pub destination: &'a str,
    /// Value of `message-id` (and `ack` when `ack` is set).
    pub message_id: u64,
    /// The subscription's id.
    pub subscription: &'a Utf8Bytes,
    /// Add the 1.2 `ack` header (explicit-ack subscription under 1.2).
    pub ack: bool,
    /// The message was delivered before and not acknowledged.
    pub redelivered: bool,
    /// The connection's version, which decides what header text can be carried.
    pub version: Version,
}

fn persistent_qos(value: Option<&str>, default: QoS) -> Result<QoS, StompError> {
    match value {
        None => Ok(default),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(QoS::AtLeastOnce),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(QoS::AtMostOnce),
        Some(v) => Err(StompError::protocol(format!(
            "invalid persistent header '{}': use true or false",
            v.chars().take(64).collect::<String>()
        ))),
    }
}

fn expiry(value: Option<&str>, now: Instant, wall: SystemTime) -> Result<Option<Instant>, StompError> {
    let Some(value) = value else { return Ok(None) };
    let millis: u64 = value.trim().parse().map_err(|_| {
        StompError::protocol(format!(
            "invalid expires header '{}': expected milliseconds since the Unix epoch",
            value.chars().take(64).collect::<String>()
        ))
    })?;
    if millis == 0 {
        return Ok(None);
    }
    let at = SystemTime::UNIX_EPOCH + Duration::from_millis(millis);
    let left = at.duration_since(wall).unwrap_or(Duration::ZERO);
    Ok(Some(now.checked_add(left).unwrap_or(now + Duration::from_secs(100 * 365 * 86_400))))
}

/// Builds the core message for a SEND frame whose destination was resolved to `target`.
/// `now`/`wall` are the monotonic and wall-clock times the frame was complete.
/// Public for the translation benchmarks (`benches/benches/translation.rs`).
pub fn message_from_send(
    frame: &Frame,
    target: SendTarget<'_>,
    origin: Origin,
    now: Instant,
    wall: SystemTime,
) -> Result<Message, StompError> {
    let (topic, default_qos) = match target {
        SendTarget::Topic(t) => (t, QoS::AtMostOnce),
        SendTarget::Queue(q) => (q, QoS::AtLeastOnce),
    };
    let mut message = Message::received(topic, frame.body.clone(), origin, now);
    message.qos = persistent_qos(frame.header("persistent"), default_qos)?;
    let props = &mut message.props;
    props.content_type = frame.header("content-type").map(str::to_owned);
    if let Some(reply_to) = frame.header("reply-to") {
        props.reply_to = Some(destination::to_core(reply_to).map_err(|e| {
            StompError::protocol(format!("invalid reply-to header: {}", e.message)).with_detail(e.detail)
        })?);
    }
    props.correlation_data = frame.headers.get_text("correlation-id").map(|v| v.as_bytes().clone());
    props.expires_at = expiry(frame.header("expires"), now, wall)?;
    for (name, value) in frame.headers.iter() {
        // First occurrence wins (STOMP 1.2 "Repeated Header Entries"); at most `max_headers`
        // entries, so the quadratic check stays small.
        let repeated = props.user.iter().any(|(seen, _)| seen == name.as_str());
        if !repeated && !RESERVED.contains(&name.as_str()) {
            props.user.push((name.to_string(), value.to_string()));
        }
    }
    Ok(message)
}

/// Whether `text` survives the header encoding of a MESSAGE frame under `version`.
pub(crate) fn representable(text: &str, version: Version, is_name: bool) -> bool {
    text.chars().all(|c| match c {
        '\0' => false,
        '\n' => version != Version::V1_0,
        '\r' => version == Version::V1_2,
        ':' => !is_name || version != Version::V1_0,
        _ => true,
    })
}

fn wall_clock_millis(at: Instant, now: Instant, wall: SystemTime) -> u64 {
    let when = wall + at.saturating_duration_since(now);
    when.duration_since(SystemTime::UNIX_EPOCH).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)).unwrap_or(0)
}

/// Builds the MESSAGE frame delivering `message` (spec "MESSAGE").
/// Public for the translation benchmarks (`benches/benches/translation.rs`).
pub fn message_frame(message: &Message, envelope: &Envelope<'_>, now: Instant, wall: SystemTime) -> Frame {
    let version = envelope.version;
    let ok = |text: &str| representable(text, version, false);
    let id = envelope.message_id.to_string();
    let mut frame = Frame::message(envelope.destination, id.as_str(), envelope.subscription.clone(), Bytes::new());
    if envelope.ack {
        frame.headers.push(Utf8Bytes::from_static("ack"), id);
    }
    if envelope.redelivered {
        frame.headers.push(Utf8Bytes::from_static("redelivered"), Utf8Bytes::from_static("true"));
    }
    if message.qos >= QoS::AtLeastOnce {
        frame.headers.push(Utf8Bytes::from_static("persistent"), Utf8Bytes::from_static("true"));
    }
    let props = &message.props;
    match (&props.content_type, props.payload_utf8) {
        (Some(content_type), _) if ok(content_type) => {
            frame.headers.push(Utf8Bytes::from_static("content-type"), content_type)
        }
        (None, Some(true)) => frame
            .headers
            .push(Utf8Bytes::from_static("content-type"), Utf8Bytes::from_static("text/plain;charset=utf-8")),
        _ => {}
    }
    if let Some(reply_to) = &props.reply_to {
        let reply_to = destination::from_core(reply_to);
        if ok(&reply_to) {
            frame.headers.push(Utf8Bytes::from_static("reply-to"), reply_to);
        }
    }
    if let Some(correlation) = &props.correlation_data
        && let Ok(text) = std::str::from_utf8(correlation)
        && ok(text)
    {
        frame.headers.push(Utf8Bytes::from_static("correlation-id"), text);
    }
    if let Some(at) = props.expires_at {
        frame.headers.push(Utf8Bytes::from_static("expires"), wall_clock_millis(at, now, wall).to_string());
    }
    for (name, value) in &props.user {
        if !name.is_empty()
            && !RESERVED.contains(&name.as_str())
            && representable(name, version, true)
            && representable(value, version, false)
        {
            frame.headers.push(name, value);
        }
    }
    frame.headers.push(Utf8Bytes::from_static("content-length"), message.payload.len().to_string());
    frame.body = message.payload.clone();
    frame
}

/// The `destination` header of a delivery from a topic subscription.
/// Public for the translation benchmarks (`benches/benches/translation.rs`).
pub fn topic_destination(topic: &str) -> String {
    format!("{TOPIC_PREFIX}{topic}")
}

/// The `destination` header of a delivery from a queue subscription.
pub(crate) fn queue_destination(queue: &str) -> String {
    format!("{QUEUE_PREFIX}{queue}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use stomp_codec::Command;
    use tolk_core::{Destination, Protocol, SessionId};

    fn origin() -> Origin {
        Origin { protocol: Protocol::Stomp, session: SessionId(1), client_id: "c".into() }
    }

    fn send(headers: &[(&str, &str)], body: &'static [u8]) -> Frame {
        headers.iter().fold(Frame::new(Command::Send), |f, (n, v)| f.with_header(*n, *v)).with_body(body)
    }

    #[test]
    fn send_headers_map_to_core_fields_and_user_properties() {
        let now = Instant::now();
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let frame = send(
            &[
                ("destination", "/topic/a/b"),
                ("content-type", "application/octet-stream"),
                ("reply-to", "/queue/replies"),
                ("correlation-id", "42"),
                ("expires", "1005000"),
                ("persistent", "true"),
                ("receipt", "r"),
                ("x-first", "1"),
                ("x-first", "2"),
                ("priority", "4"),
            ],
            b"a\0b",
        );
        let m = message_from_send(&frame, SendTarget::Topic("a/b"), origin(), now, wall).unwrap();
        assert_eq!(m.topic, "a/b");
        assert_eq!(&m.payload[..], b"a\0b");
        assert_eq!(m.qos, QoS::AtLeastOnce);
        assert_eq!(m.props.content_type.as_deref(), Some("application/octet-stream"));
        assert_eq!(m.props.reply_to, Some(Destination::Queue("replies".into())));
        assert_eq!(m.props.correlation_data.as_deref(), Some(&b"42"[..]));
        assert_eq!(m.props.expires_at, Some(now + Duration::from_secs(5)));
        assert_eq!(m.props.user, vec![("x-first".into(), "1".into()), ("priority".into(), "4".into())]);
        assert_eq!(m.received_at, now);
    }

    #[test]
    fn default_qos_depends_on_destination_kind() {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let frame = send(&[], b"");
        let topic = message_from_send(&frame, SendTarget::Topic("t"), origin(), now, wall).unwrap();
        let queue = message_from_send(&frame, SendTarget::Queue("q"), origin(), now, wall).unwrap();
        assert_eq!((topic.qos, queue.qos), (QoS::AtMostOnce, QoS::AtLeastOnce));
        let frame = send(&[("persistent", "false")], b"");
        let queue = message_from_send(&frame, SendTarget::Queue("q"), origin(), now, wall).unwrap();
        assert_eq!(queue.qos, QoS::AtMostOnce);
    }

    #[test]
    fn bad_values_are_errors() {
        let (now, wall) = (Instant::now(), SystemTime::now());
        for headers in [[("persistent", "yes")], [("expires", "soon")], [("reply-to", "/temp-queue/x")]] {
            let frame = send(&headers, b"");
            assert!(message_from_send(&frame, SendTarget::Topic("t"), origin(), now, wall).is_err(), "{headers:?}");
        }
        let frame = send(&[("expires", "0")], b"");
        let m = message_from_send(&frame, SendTarget::Topic("t"), origin(), now, wall).unwrap();
        assert_eq!(m.props.expires_at, None);
    }

    #[test]
    fn message_frame_carries_fields_and_filters_user_headers() {
        let now = Instant::now();
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let mut m = Message::new("a/b", &b"x\0y"[..], origin());
        m.qos = QoS::AtLeastOnce;
        m.props.content_type = Some("image/png".into());
        m.props.reply_to = Some(Destination::Topic("r/s".into()));
        m.props.correlation_data = Some(Bytes::from_static(b"c1"));
        m.props.expires_at = Some(now + Duration::from_secs(2));
        m.props.user = vec![
            ("destination".into(), "/topic/evil".into()),
            ("color".into(), "red\r\nblue".into()),
            ("k:v".into(), "1".into()),
        ];
        let sub = Utf8Bytes::from_static("s1");
        let envelope = Envelope {
            destination: "/topic/a/b",
            message_id: 9,
            subscription: &sub,
            ack: true,
            redelivered: true,
            version: Version::V1_2,
        };
        let f = message_frame(&m, &envelope, now, wall);
        assert_eq!(f.command, Command::Message);
        assert_eq!(f.header("destination"), Some("/topic/a/b"));
        assert_eq!(f.headers.get_all("destination").count(), 1);
        assert_eq!(f.header("message-id"), Some("9"));
        assert_eq!(f.header("ack"), Some("9"));
        assert_eq!(f.header("subscription"), Some("s1"));
        assert_eq!(f.header("redelivered"), Some("true"));
        assert_eq!(f.header("persistent"), Some("true"));
        assert_eq!(f.header("content-type"), Some("image/png"));
        assert_eq!(f.header("reply-to"), Some("/topic/r/s"));
        assert_eq!(f.header("correlation-id"), Some("c1"));
        assert_eq!(f.header("expires"), Some("1002000"));
        assert_eq!(f.header("color"), Some("red\r\nblue"));
        assert_eq!(f.header("k:v"), Some("1"));
        assert_eq!(f.header("content-length"), Some("3"));
        assert_eq!(&f.body[..], b"x\0y");

        // STOMP 1.0 cannot carry line breaks or a ':' in a name; 1.1 has no CR escape.
        let v10 = Envelope { version: Version::V1_0, ack: false, ..envelope };
        let f = message_frame(&m, &v10, now, wall);
        assert_eq!((f.header("color"), f.header("k:v"), f.header("ack")), (None, None, None));
        let v11 = Envelope { version: Version::V1_1, ..v10 };
        assert_eq!(message_frame(&m, &v11, now, wall).header("color"), None);
    }

    #[test]
    fn utf8_flag_without_content_type_becomes_text_plain() {
        let mut m = Message::new("t", "hi", origin());
        m.props.payload_utf8 = Some(true);
        let sub = Utf8Bytes::from_static("s");
        let envelope = Envelope {
            destination: "/topic/t",
            message_id: 1,
            subscription: &sub,
            ack: false,
            redelivered: false,
            version: Version::V1_2,
        };
        let f = message_frame(&m, &envelope, Instant::now(), SystemTime::now());
        assert_eq!(f.header("content-type"), Some("text/plain;charset=utf-8"));
        assert_eq!(f.header("persistent"), None);
        assert_eq!(f.header("redelivered"), None);
    }
}
