//! Persistent sessions in the store (`[storage]`): a session with a non-zero expiry (MQTT 3.1.1
//! clean session 0, MQTT 5 Session Expiry Interval) is written as a record of its
//! subscriptions and expiry when it connects, subscribes, unsubscribes and goes offline; the
//! core writes each QoS 1/2 delivery to it as it is routed, and it is deleted when the client
//! acknowledges it. At start, [`restore`] parks every kept session again, with what it had
//! not acknowledged queued, as if its client had just disconnected.
//!
//! The will is kept with the record while one waits. After a crash a session whose client was
//! connected lost its connection without a DISCONNECT, so its will is published, after its
//! delay, as for any connection that fails; a parked session's delayed will stays due when it
//! was.
//!
//! Packet ids are not written: a kept delivery is sent under the id its place in the store
//! gives it ([`crate::inflight::id_for_stored`]), so after a restart it goes out again, with
//! DUP set, under the id the client may hold. A QoS 2 delivery the client has received (PUBREC)
//! is marked released in the store before the PUBREL goes, and after a restart only the PUBREL
//! is sent again (MQTT-4.3.3). Not kept: the ids of QoS 2 publishes from the client awaiting
//! PUBREL (their message was routed, and kept, before the PUBREC; a PUBREL that finds no id is
//! answered all the same).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rmqtt_codec::types::QoS as WireQoS;
use rmqtt_codec::v5::{LastWill, RetainHandling, SubscriptionOptions as WireOptions};
use serde::{Deserialize, Serialize};
use tolk_core::auth::Authenticator;
use tolk_core::store::record::{self, SessionRecord, SubscriptionRecord};
use tolk_core::store::{Durable, KeptSession, StoreError, load_sessions};
use tolk_core::{Protocol, Router, SubscriptionOptions};

use crate::inflight::{Stage, id_for_stored};
use crate::state::{Parked, SessionState};
use crate::subscriptions::{FilterKind, SubEntry, parse_filter};
use crate::translate::qos_in;
use crate::will::Will;

/// A will as kept: the CONNECT's will fields, and when it is due once its connection ended.
#[derive(Serialize, Deserialize)]
struct KeptWill {
    qos: u8,
    retain: bool,
    topic: String,
    message: Vec<u8>,
    delay_secs: Option<u32>,
    correlation_data: Option<Vec<u8>>,
    message_expiry_secs: Option<u32>,
    content_type: Option<String>,
    user_properties: Vec<(String, String)>,
    utf8: Option<bool>,
    response_topic: Option<String>,
    /// Unix milliseconds; `None` while its client was connected.
    due_at_ms: Option<u64>,
}

impl KeptWill {
    fn new(will: &Will, due_in: Option<Duration>) -> Self {
        let w = &will.last_will;
        KeptWill {
            qos: w.qos as u8,
            retain: w.retain,
            topic: w.topic.to_string(),
            message: w.message.to_vec(),
            delay_secs: w.will_delay_interval_sec,
            correlation_data: w.correlation_data.as_ref().map(|b| b.to_vec()),
            message_expiry_secs: w.message_expiry_interval.map(NonZeroU32::get),
            content_type: w.content_type.as_ref().map(ToString::to_string),
            user_properties: w.user_properties.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            utf8: w.is_utf8_payload,
            response_topic: w.response_topic.as_ref().map(ToString::to_string),
            due_at_ms: due_in.map(record::deadline_ms),
        }
    }

    /// The will, and when it is due now that the broker has restarted.
    fn restore(self, expiry_left: Duration) -> (Will, Instant) {
        let last_will = LastWill {
            qos: wire_qos(self.qos),
            retain: self.retain,
            topic: self.topic.into(),
            message: Bytes::from(self.message),
            will_delay_interval_sec: self.delay_secs,
            correlation_data: self.correlation_data.map(Bytes::from),
            message_expiry_interval: self.message_expiry_secs.and_then(NonZeroU32::new),
            content_type: self.content_type.map(Into::into),
            user_properties: self.user_properties.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
            is_utf8_payload: self.utf8,
            response_topic: self.response_topic.map(Into::into),
        };
        let will = Will { delay: Duration::from_secs(u64::from(self.delay_secs.unwrap_or(0))), last_will };
        let due_in = self.due_at_ms.map_or(will.delay, record::until_ms).min(expiry_left);
        (will, Instant::now() + due_in)
    }
}

fn wire_qos(level: u8) -> WireQoS {
    match level {
        0 => WireQoS::AtMostOnce,
        1 => WireQoS::AtLeastOnce,
        _ => WireQoS::ExactlyOnce,
    }
}

/// Writes the session's record now (`parked_until`: how long it lives on once offline), with
/// the will still waiting, if any, and how long until it is due once its connection ended; or
/// ends what was kept of it if it is no longer persistent (expiry 0). Returns the commit, for a
/// CONNACK that must not go out before the session is on disk.
pub fn save(
    state: &SessionState,
    parked_until: Option<Duration>,
    will: Option<(&Will, Option<Duration>)>,
) -> Option<Durable> {
    if state.expiry().is_zero() {
        state.forget_kept();
        return None;
    }
    let name = record::session_key(Protocol::Mqtt, &state.client_id);
    let keeper = state.core.keep_in_store(name, 1)?;
    Some(keeper.save(&SessionRecord {
        expiry_ms: u64::try_from(state.expiry().as_millis()).unwrap_or(u64::MAX),
        expires_at_ms: parked_until.map(record::deadline_ms),
        owner: state.owner.as_deref().map(str::to_owned),
        subscriptions: state.subs.iter().map(|(filter, entry)| subscription_record(filter, entry)).collect(),
        will: will.map(|(will, due_in)| record::encode_record(&KeptWill::new(will, due_in))),
    }))
}

fn subscription_record(filter: &str, entry: &SubEntry) -> SubscriptionRecord {
    SubscriptionRecord {
        filter: filter.to_owned(),
        max_qos: entry.options.qos as u8,
        no_local: entry.options.no_local,
        retain_as_published: entry.options.retain_as_published,
        retain_handling: entry.options.retain_handling.into(),
        subscription_id: entry.id,
        tag: 0,
    }
}

fn wire_options(kept: &SubscriptionRecord) -> WireOptions {
    WireOptions {
        qos: wire_qos(kept.max_qos),
        no_local: kept.no_local,
        retain_as_published: kept.retain_as_published,
        retain_handling: match kept.retain_handling {
            0 => RetainHandling::AtSubscribe,
            1 => RetainHandling::AtSubscribeNew,
            _ => RetainHandling::NoAtSubscribe,
        },
    }
}

/// Every MQTT session the store kept, parked: with its subscriptions (its shared-group
/// memberships held, and rejoined when the client comes back, as for any offline session), its
/// unacknowledged deliveries and its will. Groups the store kept that no restored session is a
/// member of go. Call it before the listener accepts.
pub fn restore(router: &Router, auth: &dyn Authenticator) -> Result<Vec<Parked>, StoreError> {
    let Some(store) = router.store() else { return Ok(Vec::new()) };
    let mut restored = Vec::new();
    for kept in load_sessions(&**store, Protocol::Mqtt)? {
        let expiry_left = kept.expires_in;
        let will = kept.record.will.as_deref().and_then(|bytes| match record::decode_record::<KeptWill>(bytes) {
            Ok(will) => Some(will.restore(expiry_left)),
            Err(e) => {
                tracing::warn!(client_id = kept.client_id, error = %e, "a stored will was not restored");
                None
            }
        });
        let state = rebuild(router, auth, kept);
        let due_in = will.as_ref().map(|(w, at)| (w, Some(at.saturating_duration_since(Instant::now()))));
        drop(save(&state, Some(expiry_left), due_in));
        restored.push(Parked { expires_at: Instant::now() + expiry_left, state, will });
    }
    router.drop_unheld_groups();
    Ok(restored)
}

/// A kept session as an offline [`SessionState`]: its core session subscribed again with the
/// owner's rights, its deliveries queued in arrival order.
fn rebuild(router: &Router, auth: &dyn Authenticator, kept: KeptSession) -> Box<SessionState> {
    let client_id = kept.client_id.as_str();
    let record = &kept.record;
    let mut core = router.open_session(Protocol::Mqtt);
    core.restrict(auth.access(record.owner.as_deref(), Some(client_id)));
    core.track_durable();
    core.keep_in_store(kept.name(Protocol::Mqtt), kept.next_seq);
    let expiry = Duration::from_millis(record.expiry_ms);
    let mut state = Box::new(SessionState::new(core, Arc::from(client_id), expiry));
    state.owner = record.owner.as_deref().map(Arc::from);
    for sub in &record.subscriptions {
        let options = wire_options(sub);
        let shared_tag = match parse_filter(&sub.filter) {
            Ok(FilterKind::Plain(filter)) => {
                let core_options = SubscriptionOptions {
                    max_qos: qos_in(options.qos),
                    no_local: options.no_local,
                    retain_as_published: options.retain_as_published,
                    subscription_id: sub.subscription_id,
                    ..SubscriptionOptions::default()
                };
                if let Err(e) = state.core.subscribe(filter, 0, core_options) {
                    tracing::warn!(client_id, filter, error = %e, "a stored subscription was not restored");
                    continue;
                }
                None
            }
            Ok(FilterKind::Shared { group, filter }) => {
                let tag = state.subs.next_tag();
                if let Err(e) = state.core.hold_shared(group, filter, tag) {
                    tracing::warn!(client_id, filter = sub.filter, error = %e, "a stored group membership was not restored");
                    continue;
                }
                Some(tag)
            }
            Err(_) => continue,
        };
        state.subs.insert(&sub.filter, SubEntry { options, id: sub.subscription_id, shared_tag });
    }
    for seq in kept.released {
        state.outgoing.push(id_for_stored(seq), Stage::Pubcomp { stored: seq });
    }
    state.core.receiver().set_attached(false);
    state.core.receiver().requeue_front(kept.deliveries.into_iter());
    state
}
