//! Subscriptions and pull points in the store (`[storage]`): each is written when it is made,
//! renewed, paused or resumed, and deleted when it is removed (Unsubscribe, DestroyPullPoint,
//! expiry, an unreachable consumer), never at shutdown. When the endpoint starts,
//! `restore.rs` brings them back under the same addresses, with the same termination times,
//! owners and rights, so that consumers keep receiving and clients keep managing them across a
//! restart or a crash.
//!
//! Not kept: the notifications waiting in a pull point or in a push subscription's queue (WS-N
//! acknowledges a Notify with `202` before it is delivered; a durable notification path is
//! the store's next step), and a subscription whose pull point is gone.

use serde::{Deserialize, Serialize};
use tolk_core::store::{Change, Space, Store, record};
use wsn_xml::{AddressingVersion, SoapVersion};

use crate::pullpoint::PullPoint;
use crate::subscription::{Consumer, Subscription};

/// Key prefix of a subscription's record.
pub(crate) const SUBSCRIPTION: &str = "wsn:subscription:";
/// Key prefix of a pull point's record.
pub(crate) const PULL_POINT: &str = "wsn:pullpoint:";

/// A pull point as kept.
#[derive(Serialize, Deserialize)]
pub(crate) struct KeptPullPoint {
    pub user: Option<String>,
}

/// A subscription as kept.
#[derive(Serialize, Deserialize)]
pub(crate) struct KeptSubscription {
    pub user: Option<String>,
    /// The subscription manager's address as handed out.
    pub reference: String,
    /// `(filter, namespace)`.
    pub filters: Vec<(String, Option<String>)>,
    pub use_raw: bool,
    pub soap12: bool,
    pub submission_addressing: bool,
    pub consumer: KeptConsumer,
    pub terminates_at: i64,
    pub paused: bool,
}

/// Where a kept subscription's notifications go.
#[derive(Serialize, Deserialize)]
pub(crate) enum KeptConsumer {
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
