//! Every live subscription and pull point, by the id in its address, with the limits on their
//! number and the bookkeeping of the `connections` gauge: for WS-N, a "connection" is an
//! active subscription or pull point (HTTP requests themselves are short-lived), so
//! `tolk_connections{protocol="wsn"}` counts both, and their removals are counted by reason
//! (`client_closed` for Unsubscribe/DestroyPullPoint, `keepalive_timeout` for expiry and idle
//! pull points, `io_error` for a consumer dropped as unreachable, `protocol_error` for a
//! subscription whose pushes came back to this broker (a loop), `shutdown`).
//!
//! One `std::sync::Mutex`: every operation is a few map operations and nothing is awaited
//! while it is held.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use foldhash::fast::RandomState;
use tolk_core::store::Store;
use tolk_core::{CloseReason, Metrics, Protocol};
use wsn_xml::FaultKind;

use crate::fault::Refusal;
use crate::kept;
use crate::pullpoint::PullPoint;
use crate::subscription::Subscription;

#[derive(Default)]
struct Inner {
    /// Subscriptions by core tag.
    subscriptions: HashMap<u64, Arc<Subscription>, RandomState>,
    /// Subscription tags by address id.
    ids: HashMap<String, u64, RandomState>,
    /// Pull points by address id.
    pull_points: HashMap<String, Arc<PullPoint>, RandomState>,
}

/// The live subscriptions and pull points, each kept in the store while it lives.
pub(crate) struct Registry {
    inner: Mutex<Inner>,
    metrics: Arc<Metrics>,
    store: Option<Arc<dyn Store>>,
}

impl Registry {
    pub(crate) fn new(metrics: Arc<Metrics>, store: Option<Arc<dyn Store>>) -> Self {
        Registry { inner: Mutex::default(), metrics, store }
    }

    /// Writes a subscription's record again (renewed, paused or resumed).
    pub(crate) fn save(&self, subscription: &Subscription) {
        if let Some(store) = &self.store {
            kept::save_subscription(&**store, subscription);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn opened(&self) {
        let counters = self.metrics.protocol(Protocol::Wsn);
        counters.connections_accepted.fetch_add(1, Relaxed);
        counters.connections_open.fetch_add(1, Relaxed);
    }

    fn closed(&self, reason: CloseReason) {
        let counters = self.metrics.protocol(Protocol::Wsn);
        counters.connections_open.fetch_sub(1, Relaxed);
        counters.closed(reason);
    }

    /// Adds a subscription unless the limit is reached or its pull point was destroyed
    /// meanwhile.
    pub(crate) fn insert_subscription(&self, subscription: Arc<Subscription>, max: usize) -> Result<(), Refusal> {
        let mut inner = self.lock();
        if inner.subscriptions.len() >= max {
            self.metrics.protocol(Protocol::Wsn).connections_refused.fetch_add(1, Relaxed);
            return Err(Refusal::new(
                FaultKind::SubscribeCreationFailed,
                format!("the broker holds its maximum of {max} subscriptions"),
            ));
        }
        if let Some(pp) = subscription.pull_point()
            && !inner.pull_points.contains_key(&pp.id)
        {
            return Err(Refusal::new(FaultKind::SubscribeCreationFailed, "the consumer pull point was just destroyed"));
        }
        inner.ids.insert(subscription.id.clone(), subscription.tag);
        inner.subscriptions.insert(subscription.tag, subscription.clone());
        drop(inner);
        self.save(&subscription);
        self.opened();
        Ok(())
    }

    /// The subscription whose address ends in `id`.
    pub(crate) fn subscription(&self, id: &str) -> Option<Arc<Subscription>> {
        let inner = self.lock();
        inner.ids.get(id).and_then(|tag| inner.subscriptions.get(tag)).cloned()
    }

    /// The subscription with core tag `tag`.
    pub(crate) fn subscription_by_tag(&self, tag: u64) -> Option<Arc<Subscription>> {
        self.lock().subscriptions.get(&tag).cloned()
    }

    /// Removes a subscription, stops its deliveries and counts the removal. `None` if it was
    /// already gone (two removals racing: only one wins).
    pub(crate) fn remove_subscription(&self, id: &str, reason: CloseReason) -> Option<Arc<Subscription>> {
        let mut inner = self.lock();
        let tag = inner.ids.remove(id)?;
        let removed = inner.subscriptions.remove(&tag);
        drop(inner);
        let subscription = removed?;
        subscription.close();
        // At shutdown it is kept, to be restored at the next start.
        if let Some(store) = self.store.as_ref().filter(|_| reason != CloseReason::Shutdown) {
            kept::forget_subscription(&**store, id);
        }
        self.closed(reason);
        Some(subscription)
    }

    /// Adds a pull point unless the limit is reached.
    pub(crate) fn insert_pull_point(&self, pull_point: Arc<PullPoint>, max: usize) -> Result<(), Refusal> {
        let mut inner = self.lock();
        if inner.pull_points.len() >= max {
            self.metrics.protocol(Protocol::Wsn).connections_refused.fetch_add(1, Relaxed);
            return Err(Refusal::new(
                FaultKind::UnableToCreatePullPoint,
                format!("the broker holds its maximum of {max} pull points"),
            ));
        }
        inner.pull_points.insert(pull_point.id.clone(), pull_point.clone());
        drop(inner);
        if let Some(store) = &self.store {
            kept::save_pull_point(&**store, &pull_point);
        }
        self.opened();
        Ok(())
    }

    /// The pull point whose address ends in `id`.
    pub(crate) fn pull_point(&self, id: &str) -> Option<Arc<PullPoint>> {
        self.lock().pull_points.get(id).cloned()
    }

    /// Removes a pull point (releasing what it holds) and every subscription delivering to it.
    pub(crate) fn remove_pull_point(&self, id: &str, reason: CloseReason) -> Option<Arc<PullPoint>> {
        let mut inner = self.lock();
        let pull_point = inner.pull_points.remove(id)?;
        let feeding: Vec<String> = inner
            .subscriptions
            .values()
            .filter(|s| s.pull_point().is_some_and(|pp| Arc::ptr_eq(pp, &pull_point)))
            .map(|s| s.id.clone())
            .collect();
        drop(inner);
        pull_point.close();
        if let Some(store) = self.store.as_ref().filter(|_| reason != CloseReason::Shutdown) {
            kept::forget_pull_point(&**store, id);
        }
        self.closed(reason);
        for sub in feeding {
            self.remove_subscription(&sub, reason);
        }
        Some(pull_point)
    }

    /// Ids of subscriptions whose termination time is not after `now_unix_millis`, and of pull
    /// points unused since `idle_since`.
    pub(crate) fn expired(&self, now_unix_millis: i64, idle_since: Option<Instant>) -> (Vec<String>, Vec<String>) {
        let inner = self.lock();
        let subscriptions = inner
            .subscriptions
            .values()
            .filter(|s| s.terminates_at() <= now_unix_millis)
            .map(|s| s.id.clone())
            .collect();
        let pull_points = match idle_since {
            Some(limit) => {
                inner.pull_points.values().filter(|pp| pp.last_used() <= limit).map(|pp| pp.id.clone()).collect()
            }
            None => Vec::new(),
        };
        (subscriptions, pull_points)
    }

    /// Removes everything (broker shutdown).
    pub(crate) fn clear(&self) {
        let ids: Vec<String> = self.lock().pull_points.keys().cloned().collect();
        for id in ids {
            self.remove_pull_point(&id, CloseReason::Shutdown);
        }
        let ids: Vec<String> = self.lock().ids.keys().cloned().collect();
        for id in ids {
            self.remove_subscription(&id, CloseReason::Shutdown);
        }
    }
}
