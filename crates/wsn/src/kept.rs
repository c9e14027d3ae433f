//! Subscriptions and pull points in the store (`[storage]`): each is written when it is made,
//! renewed, paused or resumed, and deleted when it is removed (Unsubscribe, DestroyPullPoint,
//! expiry, an unreachable consumer), never at shutdown. When the endpoint starts, [`restore`]
//! brings them back under the same addresses, with the same termination times, owners and
//! rights, so that consumers keep receiving and clients keep managing them across a restart
//! or a crash.
//!
//! Not kept: the notifications waiting in a pull point or in a push subscription's queue (WS-N
//! acknowledges a Notify with `202` before it is delivered; a durable notification path is
//! the store's next step), and a subscription whose pull point is gone.

use std::sync::Arc;

use axum::http::Uri;
use serde::{Deserialize, Serialize};
use tolk_core::store::{Change, Space, Store, record};
use tracing::{info, warn};
use wsn_xml::{AddressingVersion, EndpointReference, SoapVersion, XmlElement};

use crate::endpoint::Endpoint;
use crate::filter::TopicFilter;
use crate::pullpoint::PullPoint;
use crate::subscription::{Consumer, NewSubscription, Subscription};

const SUBSCRIPTION: &str = "wsn:subscription:";
const PULL_POINT: &str = "wsn:pullpoint:";

#[derive(Serialize, Deserialize)]
struct KeptPullPoint {
    user: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct KeptSubscription {
    user: Option<String>,
    /// The subscription manager's address as handed out.
    reference: String,
    /// `(filter, namespace)`.
    filters: Vec<(String, Option<String>)>,
    use_raw: bool,
    soap12: bool,
    submission_addressing: bool,
    consumer: KeptConsumer,
    terminates_at: i64,
    paused: bool,
}

#[derive(Serialize, Deserialize)]
enum KeptConsumer {
    /// An HTTP consumer: its address and reference parameters (each a whole element).
    Push { address: String, reference_parameters: Vec<Vec<u8>> },
    /// One of this broker's pull points, by id.
    PullPoint(String),
}

fn key(kind: &str, id: &str) -> Vec<u8> {
    format!("{kind}{id}").into_bytes()
}

fn put(store: &dyn Store, key: Vec<u8>, value: Vec<u8>) {
    drop(store.commit(vec![Change::Put { space: Space::Resources, key, value }]));
}

/// Writes (or rewrites) a subscription's record.
pub(crate) fn save_subscription(store: &dyn Store, subscription: &Subscription) {
    let consumer = match &subscription.consumer {
        Consumer::Push { reference, .. } => KeptConsumer::Push {
            address: reference.address.clone(),
            reference_parameters: reference.reference_parameters.iter().map(|e| e.as_bytes().to_vec()).collect(),
        },
        Consumer::PullPoint(pull_point) => KeptConsumer::PullPoint(pull_point.id.clone()),
    };
    let kept = KeptSubscription {
        user: subscription.user.clone(),
        reference: subscription.reference.address.clone(),
        filters: subscription.filters.iter().map(|f| (f.filter.clone(), f.namespace.clone())).collect(),
        use_raw: subscription.use_raw,
        soap12: subscription.soap == SoapVersion::V12,
        submission_addressing: subscription.addressing == AddressingVersion::Submission,
        consumer,
        terminates_at: subscription.terminates_at(),
        paused: subscription.is_paused(),
    };
    put(store, key(SUBSCRIPTION, &subscription.id), record::encode_record(&kept));
}

/// Writes a pull point's record.
pub(crate) fn save_pull_point(store: &dyn Store, pull_point: &PullPoint) {
    put(
        store,
        key(PULL_POINT, &pull_point.id),
        record::encode_record(&KeptPullPoint { user: pull_point.user.clone() }),
    );
}

/// Deletes a removed subscription's record.
pub(crate) fn forget_subscription(store: &dyn Store, id: &str) {
    drop(store.commit(vec![Change::Delete { space: Space::Resources, key: key(SUBSCRIPTION, id) }]));
}

/// Deletes a destroyed pull point's record.
pub(crate) fn forget_pull_point(store: &dyn Store, id: &str) {
    drop(store.commit(vec![Change::Delete { space: Space::Resources, key: key(PULL_POINT, id) }]));
}

/// Brings back every kept pull point, then every kept subscription (an expired one is
/// dropped by the next sweep, as if the broker had never stopped). Call it once, when the
/// endpoint starts.
pub(crate) fn restore(endpoint: &Arc<Endpoint>) {
    let Some(store) = endpoint.router.store().cloned() else { return };
    let records = match store.load(Space::Resources) {
        Ok(records) => records,
        Err(e) => return warn!(error = %e, "WS-N subscriptions could not be restored"),
    };
    let (mut pull_points, mut subscriptions) = (0, 0);
    for (key, value) in &records {
        let Some(id) = std::str::from_utf8(key).ok().and_then(|k| k.strip_prefix(PULL_POINT)) else { continue };
        match record::decode_record::<KeptPullPoint>(value).map(|kept| restore_pull_point(endpoint, id, kept)) {
            Ok(true) => pull_points += 1,
            Ok(false) => forget_pull_point(&*store, id),
            Err(e) => warn!(pull_point = id, error = %e, "a stored pull point was not restored"),
        }
    }
    for (key, value) in &records {
        let Some(id) = std::str::from_utf8(key).ok().and_then(|k| k.strip_prefix(SUBSCRIPTION)) else { continue };
        match record::decode_record::<KeptSubscription>(value).map(|kept| restore_subscription(endpoint, id, kept)) {
            Ok(true) => subscriptions += 1,
            Ok(false) => forget_subscription(&*store, id),
            Err(e) => warn!(subscription = id, error = %e, "a stored subscription was not restored"),
        }
    }
    if pull_points + subscriptions > 0 {
        info!(subscriptions, pull_points, "WS-N subscriptions and pull points restored from the store");
    }
}

fn restore_pull_point(endpoint: &Arc<Endpoint>, id: &str, kept: KeptPullPoint) -> bool {
    let config = &endpoint.config.pull_point;
    let bytes = endpoint.pull_point_bytes.clone();
    let cancel = endpoint.shutdown.child_token();
    let pull_point = Arc::new(PullPoint::new(&endpoint.router, id.to_owned(), kept.user, config, bytes, cancel));
    if endpoint.registry.insert_pull_point(pull_point.clone(), config.max_pull_points).is_err() {
        return false;
    }
    endpoint.tracker.spawn(pull_point.forward(endpoint.router.clone()));
    true
}

fn restore_subscription(endpoint: &Arc<Endpoint>, id: &str, kept: KeptSubscription) -> bool {
    let consumer = match kept.consumer {
        KeptConsumer::PullPoint(pull_point) => match endpoint.registry.pull_point(&pull_point) {
            Some(pp) => Consumer::PullPoint(pp),
            None => return false,
        },
        KeptConsumer::Push { address, reference_parameters } => {
            let Ok(uri) = address.parse::<Uri>() else { return false };
            let reference_parameters =
                reference_parameters.iter().filter_map(|xml| XmlElement::parse(xml, &endpoint.limits).ok()).collect();
            Consumer::Push { reference: EndpointReference { address, reference_parameters }, uri }
        }
    };
    let owner = endpoint.router.next_session_id();
    let (target, receiver) = endpoint.subscription_target(&consumer, owner);
    let parts = NewSubscription {
        id: id.to_owned(),
        tag: endpoint.next_tag(),
        reference: EndpointReference::new(kept.reference),
        filters: kept.filters.into_iter().map(|(filter, namespace)| TopicFilter { filter, namespace }).collect(),
        use_raw: kept.use_raw,
        soap: if kept.soap12 { SoapVersion::V12 } else { SoapVersion::V11 },
        addressing: if kept.submission_addressing { AddressingVersion::Submission } else { AddressingVersion::W3c },
        consumer,
        terminates_at: kept.terminates_at,
        cancel: endpoint.shutdown.child_token(),
        owner,
        rights: endpoint.auth.access(kept.user.as_deref(), None),
        user: kept.user,
    };
    let subscription = Arc::new(Subscription::new(parts, endpoint.router.clone(), target));
    if endpoint.registry.insert_subscription(subscription.clone(), endpoint.config.max_subscriptions).is_err() {
        return false;
    }
    endpoint.spawn_push(&subscription, receiver);
    if kept.paused {
        subscription.pause();
    } else {
        subscription.attach();
    }
    true
}
