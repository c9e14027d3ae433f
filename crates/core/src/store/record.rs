//! The on-disk form of a kept [`Message`]: a version byte, then the fields in postcard (a
//! compact, stable serde format). Instants become Unix milliseconds, because a monotonic clock
//! means nothing after a restart; a message whose expiry passed while the broker was down is
//! not brought back.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tolk_metrics::Protocol;

use crate::delivery::Delivery;
use crate::message::{Destination, Message, Origin, Properties, QoS, SessionId};

/// The record format this build writes. A record of another version is refused at load (and
/// logged), never misread.
const VERSION: u8 = 1;

#[derive(Serialize, Deserialize)]
struct Stored {
    topic: String,
    payload: Vec<u8>,
    qos: u8,
    retain: bool,
    content_type: Option<String>,
    payload_utf8: Option<bool>,
    correlation_data: Option<Vec<u8>>,
    /// `(true, queue)` or `(false, topic)`.
    reply_to: Option<(bool, String)>,
    message_id: Option<String>,
    timestamp_ms: Option<u64>,
    expires_at_ms: Option<u64>,
    user: Vec<(String, String)>,
    protocol: u8,
    client_id: String,
}

fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Encodes a message for the store.
pub fn encode_message(message: &Message) -> Vec<u8> {
    let (now, wall) = (Instant::now(), SystemTime::now());
    let props = &message.props;
    let stored = Stored {
        topic: message.topic.to_string(),
        payload: message.payload.to_vec(),
        qos: message.qos as u8,
        retain: message.retain,
        content_type: props.content_type.clone(),
        payload_utf8: props.payload_utf8,
        correlation_data: props.correlation_data.as_ref().map(|b| b.to_vec()),
        reply_to: props.reply_to.as_ref().map(|d| match d {
            Destination::Queue(q) => (true, q.clone()),
            Destination::Topic(t) => (false, t.clone()),
        }),
        message_id: props.message_id.clone(),
        timestamp_ms: props.timestamp.map(unix_ms),
        expires_at_ms: props.expires_at.map(|at| unix_ms(wall + at.saturating_duration_since(now))),
        user: props.user.clone(),
        protocol: message.origin.protocol.index() as u8,
        client_id: message.origin.client_id.to_string(),
    };
    let mut out = vec![VERSION];
    out.extend(postcard::to_allocvec(&stored).expect("a message always encodes"));
    out
}

/// Why a record could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Written by another version of the format.
    #[error("record format version {0}, this build reads {VERSION}")]
    Version(u8),
    /// Not a record of this format (damaged).
    #[error("damaged record: {0}")]
    Damaged(String),
}

/// Decodes a stored message; `Ok(None)` when it expired while the broker was down.
pub fn decode_message(bytes: &[u8]) -> Result<Option<Message>, RecordError> {
    let (&version, body) = bytes.split_first().ok_or_else(|| RecordError::Damaged("empty".into()))?;
    if version != VERSION {
        return Err(RecordError::Version(version));
    }
    let stored: Stored = postcard::from_bytes(body).map_err(|e| RecordError::Damaged(e.to_string()))?;
    let (now, wall) = (Instant::now(), unix_ms(SystemTime::now()));
    let expires_at = match stored.expires_at_ms {
        Some(at) if at <= wall => return Ok(None),
        Some(at) => Some(now + Duration::from_millis(at - wall)),
        None => None,
    };
    let qos = QoS::from_level(stored.qos).ok_or_else(|| RecordError::Damaged(format!("QoS {}", stored.qos)))?;
    let protocol = *Protocol::ALL.get(usize::from(stored.protocol)).unwrap_or(&Protocol::Mqtt);
    Ok(Some(Message {
        topic: stored.topic.into(),
        payload: Bytes::from(stored.payload),
        props: Properties {
            content_type: stored.content_type,
            payload_utf8: stored.payload_utf8,
            correlation_data: stored.correlation_data.map(Bytes::from),
            reply_to: stored
                .reply_to
                .map(|(queue, name)| if queue { Destination::Queue(name) } else { Destination::Topic(name) }),
            message_id: stored.message_id,
            timestamp: stored.timestamp_ms.map(|ms| UNIX_EPOCH + Duration::from_millis(ms)),
            expires_at,
            user: stored.user,
        },
        qos,
        retain: stored.retain,
        // Restored messages belong to no live session: no-local never hides them.
        origin: Origin { protocol, session: SessionId(0), client_id: Arc::from(stored.client_id) },
        received_at: now,
        variants: Default::default(),
    }))
}

/// A durable queue as kept: what it was declared with and the topic filters bound to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueRecord {
    /// `max_length` at declaration.
    pub max_length: u64,
    /// `max_length_bytes` at declaration.
    pub max_length_bytes: u64,
    /// Router bindings (`amq.topic`, `$share`): filter and tag.
    pub bindings: Vec<(String, u64)>,
}

/// The key of a queue's or a session's message: the owner's name, length-prefixed
/// ([`seq_prefix`]), then the arrival number big-endian, so that one owner's messages are
/// adjacent and in arrival order.
pub fn seq_key(owner: &str, seq: u64) -> Vec<u8> {
    let mut key = seq_prefix(owner);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// What every [`seq_key`] of `owner` starts with: the name's length (2 bytes) and the name.
pub fn seq_prefix(owner: &str) -> Vec<u8> {
    let name = owner.as_bytes();
    let mut key = Vec::with_capacity(2 + name.len() + 8);
    key.extend_from_slice(&(name.len() as u16).to_be_bytes());
    key.extend_from_slice(name);
    key
}

/// The owner and arrival number of a [`seq_key`].
pub fn split_seq_key(key: &[u8]) -> Option<(&str, u64)> {
    let (len, rest) = key.split_first_chunk::<2>()?;
    let len = usize::from(u16::from_be_bytes(*len));
    let (name, seq) = (rest.get(..len)?, rest.get(len..)?);
    Some((std::str::from_utf8(name).ok()?, u64::from_be_bytes(seq.try_into().ok()?)))
}

/// The name a protocol's session is kept under: `mqtt:<client id>`.
pub fn session_key(protocol: Protocol, client_id: &str) -> String {
    format!("{}:{client_id}", protocol.as_str())
}

/// A delivery to a persistent session as kept: what it needs to be sent again.
#[derive(Serialize, Deserialize)]
struct StoredDelivery {
    message: Vec<u8>,
    qos: u8,
    retain: bool,
    tag: u64,
    subscription_id: Option<u32>,
}

/// A kept delivery's value once its client has received it but not completed its QoS 2 flow:
/// empty, which no encoded delivery is.
pub const RELEASED: &[u8] = &[];

/// Encodes a delivery to a persistent session.
pub fn encode_delivery(delivery: &Delivery) -> Vec<u8> {
    let stored = StoredDelivery {
        message: encode_message(&delivery.message),
        qos: delivery.qos as u8,
        retain: delivery.retain,
        tag: delivery.tag,
        subscription_id: delivery.subscription_id,
    };
    encode_record(&stored)
}

/// Decodes a kept delivery (marked redelivered: it may have been sent before the restart);
/// `Ok(None)` when its message expired while the broker was down.
pub fn decode_delivery(bytes: &[u8], seq: u64) -> Result<Option<Delivery>, RecordError> {
    let stored: StoredDelivery = decode_record(bytes)?;
    let Some(message) = decode_message(&stored.message)? else { return Ok(None) };
    let qos = QoS::from_level(stored.qos).ok_or_else(|| RecordError::Damaged(format!("QoS {}", stored.qos)))?;
    Ok(Some(Delivery {
        retain: stored.retain,
        tag: stored.tag,
        subscription_id: stored.subscription_id,
        redelivered: true,
        stored: seq,
        ..Delivery::new(Arc::new(message), qos, Instant::now())
    }))
}

/// A persistent session as kept: enough to park it again after a restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// How long it outlives its connection, in milliseconds.
    pub expiry_ms: u64,
    /// When it ends if its client does not come back (Unix milliseconds), once it is offline;
    /// `None` while a client is connected (after a crash it counts from the restart).
    pub expires_at_ms: Option<u64>,
    /// The proven user that owns its client id.
    pub owner: Option<String>,
    /// Its subscriptions as the client asked for them.
    pub subscriptions: Vec<SubscriptionRecord>,
    /// Its will, in the front end's own form ([`encode_record`]), while one waits.
    pub will: Option<Vec<u8>>,
}

/// One subscription of a kept session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionRecord {
    /// The filter as the client wrote it (`$share/…` included).
    pub filter: String,
    /// Highest QoS.
    pub max_qos: u8,
    /// MQTT 5 no-local.
    pub no_local: bool,
    /// MQTT 5 retain-as-published.
    pub retain_as_published: bool,
    /// MQTT 5 retain handling (0–2).
    pub retain_handling: u8,
    /// MQTT 5 subscription identifier.
    pub subscription_id: Option<u32>,
    /// The front end's tag for it (MQTT-SN: the topic form its deliveries use; MQTT: 0).
    pub tag: u64,
}

/// Wall-clock milliseconds `after` from now, for an expiry kept across restarts.
pub fn deadline_ms(after: Duration) -> u64 {
    unix_ms(SystemTime::now() + after)
}

/// How long until a kept wall-clock deadline (zero once it passed).
pub fn until_ms(deadline: u64) -> Duration {
    Duration::from_millis(deadline.saturating_sub(unix_ms(SystemTime::now())))
}

/// Encodes a record (a queue's, a session's, or a front end's own, see
/// [`crate::store::Space::Resources`]) in the store's versioned format.
pub fn encode_record<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = vec![VERSION];
    out.extend(postcard::to_allocvec(value).expect("a record always encodes"));
    out
}

/// Decodes a record written by [`encode_record`].
pub fn decode_record<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, RecordError> {
    let (&version, body) = bytes.split_first().ok_or_else(|| RecordError::Damaged("empty".into()))?;
    if version != VERSION {
        return Err(RecordError::Version(version));
    }
    postcard::from_bytes(body).map_err(|e| RecordError::Damaged(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_reads_back_as_written_and_an_expired_one_not_at_all() {
        let origin = Origin { protocol: Protocol::Stomp, session: SessionId(7), client_id: Arc::from("c1") };
        let mut m = Message::new("sensors/a", &b"\x00\xffpayload"[..], origin);
        m.qos = QoS::AtLeastOnce;
        m.retain = true;
        m.props.content_type = Some("application/cbor".into());
        m.props.reply_to = Some(Destination::Queue("replies".into()));
        m.props.user = vec![("unit".into(), "C".into())];
        m.props.timestamp = Some(UNIX_EPOCH + Duration::from_millis(1_700_000_000_123));
        m.props.expires_at = Some(Instant::now() + Duration::from_secs(3600));
        let back = decode_message(&encode_message(&m)).unwrap().unwrap();
        assert_eq!(
            (&*back.topic, &back.payload[..], back.qos, back.retain),
            ("sensors/a", &m.payload[..], m.qos, true)
        );
        assert_eq!(back.props.content_type, m.props.content_type);
        assert_eq!(back.props.reply_to, m.props.reply_to);
        assert_eq!(back.props.user, m.props.user);
        assert_eq!(back.props.timestamp, m.props.timestamp);
        assert_eq!((back.origin.protocol, &*back.origin.client_id), (Protocol::Stomp, "c1"));
        let left = back.props.expires_at.unwrap().saturating_duration_since(Instant::now());
        assert!(left > Duration::from_secs(3590) && left <= Duration::from_secs(3600), "{left:?}");

        m.props.expires_at = Some(Instant::now());
        assert_eq!(decode_message(&encode_message(&m)).unwrap(), None);
        let mut other_version = encode_message(&m);
        other_version[0] = 9;
        assert_eq!(decode_message(&other_version), Err(RecordError::Version(9)));
        assert!(matches!(decode_message(&[VERSION, 0xff]), Err(RecordError::Damaged(_))));
    }

    #[test]
    fn sessions_and_their_deliveries_read_back() {
        let session = SessionRecord {
            expiry_ms: 60_000,
            expires_at_ms: Some(deadline_ms(Duration::from_secs(60))),
            owner: Some("alice".into()),
            subscriptions: vec![SubscriptionRecord {
                filter: "$share/g/a/#".into(),
                max_qos: 1,
                no_local: false,
                retain_as_published: true,
                retain_handling: 2,
                subscription_id: Some(7),
                tag: 0,
            }],
            will: Some(vec![1, 2]),
        };
        assert_eq!(decode_record(&encode_record(&session)), Ok(session.clone()));
        let left = until_ms(session.expires_at_ms.unwrap());
        assert!(left > Duration::from_secs(58) && left <= Duration::from_secs(60), "{left:?}");

        let origin = Origin { protocol: Protocol::Amqp, session: SessionId(3), client_id: Arc::from("p") };
        let message = Arc::new(Message::new("a/b", &b"v"[..], origin));
        let delivery =
            Delivery { tag: 4, subscription_id: Some(7), ..Delivery::new(message, QoS::AtLeastOnce, Instant::now()) };
        let back = decode_delivery(&encode_delivery(&delivery), 42).unwrap().unwrap();
        assert_eq!((&back.message.topic[..], &back.message.payload[..]), ("a/b", &b"v"[..]));
        assert_eq!((back.qos, back.tag, back.subscription_id), (QoS::AtLeastOnce, 4, Some(7)));
        assert_eq!((back.stored, back.redelivered), (42, true));
    }

    #[test]
    fn queue_records_and_message_keys_read_back_and_sort_by_arrival() {
        let queue = QueueRecord { max_length: 10, max_length_bytes: 1 << 20, bindings: vec![("a/#".into(), 3)] };
        assert_eq!(decode_record(&encode_record(&queue)), Ok(queue));
        let (early, late) = (seq_key("q", 2), seq_key("q", 256));
        assert!(early < late, "arrival order is key order");
        assert!(seq_key("q", u64::MAX) < seq_key("qq", 0), "one queue's keys are adjacent");
        assert!(late.starts_with(&seq_prefix("q")) && !seq_key("qq", 1).starts_with(&seq_prefix("q")));
        assert_eq!(split_seq_key(&late), Some(("q", 256)));
        assert_eq!(split_seq_key(&late[..5]), None);
    }
}
