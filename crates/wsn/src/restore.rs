//! Brings back, when the endpoint starts, the subscriptions and pull points `kept.rs` wrote.

use std::sync::Arc;

use axum::http::Uri;
use tolk_core::store::{Record, Space, record};
use tracing::{info, warn};
use wsn_xml::{AddressingVersion, EndpointReference, SoapVersion, XmlElement};

use crate::endpoint::Endpoint;
use crate::filter::TopicFilter;
use crate::kept::{
    KeptConsumer, KeptPullPoint, KeptSubscription, PULL_POINT, SUBSCRIPTION, forget_pull_point, forget_subscription,
};
use crate::pullpoint::PullPoint;
use crate::subscription::{Consumer, NewSubscription, Subscription};

/// Brings back every kept pull point, then every kept subscription (an expired one is
/// dropped by the next sweep, as if the broker had never stopped). Call it once, when the
/// endpoint starts.
pub(crate) fn restore(endpoint: &Arc<Endpoint>) {
    let Some(store) = endpoint.router.store().cloned() else { return };
    let records = match store.load(Space::Resources) {
        Ok(records) => records,
        Err(e) => return warn!(error = %e, "WS-N subscriptions could not be restored"),
    };
    let forget = |prefix: &str, id: &str| match prefix {
        PULL_POINT => forget_pull_point(&*store, id),
        _ => forget_subscription(&*store, id),
    };
    let pull_points = restore_each(&records, PULL_POINT, |id, kept| restore_pull_point(endpoint, id, kept), &forget);
    let subscriptions =
        restore_each(&records, SUBSCRIPTION, |id, kept| restore_subscription(endpoint, id, kept), &forget);
    if pull_points + subscriptions > 0 {
        info!(subscriptions, pull_points, "WS-N subscriptions and pull points restored from the store");
    }
}

/// Restores each record under `prefix` with `restore`; one that cannot be restored any more
/// (its pull point is gone, a limit is reached) is forgotten, one that cannot be read is left
/// and logged. Returns how many came back.
fn restore_each<T: serde::de::DeserializeOwned>(
    records: &[Record],
    prefix: &str,
    mut restore: impl FnMut(&str, T) -> bool,
    forget: &dyn Fn(&str, &str),
) -> usize {
    let mut restored = 0;
    for (key, value) in records {
        let Some(id) = std::str::from_utf8(key).ok().and_then(|k| k.strip_prefix(prefix)) else { continue };
        match record::decode_record::<T>(value).map(|kept| restore(id, kept)) {
            Ok(true) => restored += 1,
            Ok(false) => forget(prefix, id),
            Err(e) => warn!(key = %String::from_utf8_lossy(key), error = %e, "a stored WS-N resource was not restored"),
        }
    }
    restored
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
