//! One WS-N subscription: its filters, consumer, termination time and paused state, and its
//! link into the core router.
//!
//! Each subscription owns a core subscriber id: its filters are core subscriptions of that id,
//! delivering into a bounded outbox (its own for a push consumer, the pull point's for a pull
//! point consumer). Pausing removes the core subscriptions, so nothing queues up while paused;
//! resuming adds them back. Dropping the link removes them, so a subscription cannot leak
//! router entries whatever path removes it.
//!
//! A subscription keeps its subscriber's rights: each core subscription carries a
//! [`ReadCheck`], so the router withholds a message on a topic the subscriber may not read
//! (a `deny` rule inside the filter, or an ACL reloaded since).

use std::sync::{Arc, Mutex, MutexGuard};

use axum::http::Uri;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tolk_core::access::{ReadCheck, Rights};
use tolk_core::{
    Outbox, Protocol, QoS, Router, SessionId, Subscription as CoreSubscription, SubscriptionOptions, Target,
};
use wsn_xml::{AddressingVersion, EndpointReference, SoapVersion};

use crate::filter::TopicFilter;
use crate::pullpoint::PullPoint;

/// Where a subscription's notifications go.
pub(crate) enum Consumer {
    /// POSTed to an HTTP consumer.
    Push {
        /// The ConsumerReference, reference parameters included (sent back as SOAP headers).
        reference: EndpointReference,
        /// Its address, parsed.
        uri: Uri,
    },
    /// Stored in one of this broker's pull points.
    PullPoint(Arc<PullPoint>),
}

/// The core side of a subscription: a subscriber id whose core subscriptions deliver into one
/// outbox, each checking the subscriber's rights per message. Removes them all when dropped.
pub(crate) struct CoreLink {
    router: Router,
    owner: SessionId,
    target: Outbox,
    tag: u64,
    read_check: Option<ReadCheck>,
}

impl CoreLink {
    pub(crate) fn new(router: Router, owner: SessionId, target: Outbox, tag: u64, rights: Rights) -> Self {
        let read_check = rights.map(|access| ReadCheck { access, protocol: Protocol::Wsn });
        CoreLink { router, owner, target, tag, read_check }
    }

    /// Subscribes every filter. At most once: a WS-N consumer acknowledges nothing but the
    /// HTTP exchange, so a full queue drops new notifications (counted) instead of closing
    /// anything, and retries cover a consumer that is briefly away.
    pub(crate) fn attach(&self, filters: &[TopicFilter]) {
        for f in filters {
            let subscription = CoreSubscription {
                owner: self.owner,
                tag: self.tag,
                options: SubscriptionOptions { max_qos: QoS::AtMostOnce, ..SubscriptionOptions::default() },
                target: Target::Outbox(self.target.clone()),
                read_check: self.read_check.clone(),
            };
            if let Err(e) = self.router.subscribe(&f.filter, subscription) {
                // Filters were validated at Subscribe; this would be a bug, not bad input.
                tracing::warn!(filter = %f.filter, error = %e, "core refused a validated filter");
            }
        }
    }

    /// Removes every core subscription of this link.
    pub(crate) fn detach(&self) {
        self.router.unsubscribe_all(self.owner);
    }
}

impl Drop for CoreLink {
    fn drop(&mut self) {
        self.detach();
    }
}

/// Mutable state of a subscription.
struct State {
    /// Termination time, Unix ms.
    terminates_at: i64,
}

/// A subscription, shared by the registry, its push task and the HTTP handlers.
pub(crate) struct Subscription {
    /// The last segment of its address.
    pub id: String,
    /// The user who subscribed (`None`: anonymous), the only one who may manage it once users
    /// are verified.
    pub user: Option<String>,
    /// Its core tag, echoed in deliveries so a pull point knows which subscription matched.
    pub tag: u64,
    /// Its subscription manager reference: `{base}{path}/subscriptions/{id}`.
    pub reference: EndpointReference,
    /// Core filters with the namespace each came from.
    pub filters: Vec<TopicFilter>,
    /// Send the bare message element instead of a Notify (WS-BaseNotification 1.3 §4.2 UseRaw).
    pub use_raw: bool,
    /// SOAP version of the Subscribe; outgoing Notify uses it too.
    pub soap: SoapVersion,
    /// WS-Addressing version of the Subscribe; outgoing Notify uses it too.
    pub addressing: AddressingVersion,
    /// Where notifications go.
    pub consumer: Consumer,
    /// Cancelled when the subscription is removed (or the broker stops): ends its push task.
    pub cancel: CancellationToken,
    link: CoreLink,
    paused: watch::Sender<bool>,
    state: Mutex<State>,
}

/// What a new subscription is made of (see the fields of [`Subscription`]).
pub(crate) struct NewSubscription {
    pub id: String,
    pub tag: u64,
    pub reference: EndpointReference,
    pub filters: Vec<TopicFilter>,
    pub use_raw: bool,
    pub soap: SoapVersion,
    pub addressing: AddressingVersion,
    pub consumer: Consumer,
    pub terminates_at: i64,
    pub cancel: CancellationToken,
    /// The core subscriber id its filters are subscribed under.
    pub owner: SessionId,
    /// The user who subscribed.
    pub user: Option<String>,
    /// That user's rights, checked for every message its filters match.
    pub rights: Rights,
}

impl Subscription {
    /// A subscription delivering into `target`, not yet attached to the router.
    pub(crate) fn new(parts: NewSubscription, router: Router, target: Outbox) -> Self {
        let link = CoreLink::new(router, parts.owner, target, parts.tag, parts.rights);
        Subscription {
            id: parts.id,
            user: parts.user,
            tag: parts.tag,
            reference: parts.reference,
            filters: parts.filters,
            use_raw: parts.use_raw,
            soap: parts.soap,
            addressing: parts.addressing,
            consumer: parts.consumer,
            cancel: parts.cancel,
            link,
            paused: watch::Sender::new(false),
            state: Mutex::new(State { terminates_at: parts.terminates_at }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts routing matches to the consumer.
    pub(crate) fn attach(&self) {
        self.link.attach(&self.filters);
    }

    /// Stops routing (removal); deliveries already queued are discarded with the queue.
    pub(crate) fn close(&self) {
        self.link.detach();
        self.cancel.cancel();
    }

    /// Termination time, Unix ms.
    pub(crate) fn terminates_at(&self) -> i64 {
        self.state().terminates_at
    }

    /// Sets a new termination time (Renew).
    pub(crate) fn set_terminates_at(&self, at: i64) {
        self.state().terminates_at = at;
    }

    /// PauseSubscription: no notification is routed or sent until resumed
    /// (WS-BaseNotification 1.3 §6.2). Idempotent.
    pub(crate) fn pause(&self) {
        if !self.paused.send_replace(true) {
            self.link.detach();
        }
    }

    /// ResumeSubscription. Idempotent.
    pub(crate) fn resume(&self) {
        if self.paused.send_replace(false) {
            self.link.attach(&self.filters);
        }
    }

    /// Whether it is paused.
    pub(crate) fn is_paused(&self) -> bool {
        *self.paused.borrow()
    }

    /// A watch of the paused flag, for the push task.
    pub(crate) fn paused_watch(&self) -> watch::Receiver<bool> {
        self.paused.subscribe()
    }

    /// The pull point it delivers to, if any.
    pub(crate) fn pull_point(&self) -> Option<&Arc<PullPoint>> {
        match &self.consumer {
            Consumer::PullPoint(pp) => Some(pp),
            Consumer::Push { .. } => None,
        }
    }
}
