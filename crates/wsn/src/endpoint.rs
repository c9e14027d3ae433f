//! The endpoint's shared state and the dispatch of a parsed request to its operation, by the
//! resource the URL names: the broker itself (`{path}`), one subscription
//! (`{path}/subscriptions/{id}`) or one pull point (`{path}/pullpoints/{id}`). The URL alone
//! identifies a subscription or pull point: zeep does not echo reference parameters.
//!
//! Every request comes with its [`Caller`] ([`crate::login`]): its rights decide Notify,
//! Subscribe and GetCurrentMessage, and once users are verified a subscription or pull point
//! answers only the user who made it. To anyone else it is a ResourceUnknownFault, as if it did
//! not exist, so that its address discloses nothing.
//!
//! Operations live in [`crate::producer`], [`crate::manager`] and [`crate::pullpoint_ops`].
//! Most are synchronous (registry and router calls); Subscribe awaits the resolution of the
//! consumer's host and GetMessages the pull point's forwarding task. No lock is held across
//! either. Push delivery runs in its own tasks ([`crate::push`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tolk_core::auth::Authenticator;
use tolk_core::frontend::FrontEndContext;
use tolk_core::{CloseReason, Router, SessionId};
use tracing::debug;
use wsn_xml::{FaultKind, Limits, ReplyContext, Request, RequestEnvelope};

use crate::allow::ConsumerPolicy;
use crate::client::NotifyClient;
use crate::config::WsnConfig;
use crate::fault::{Refusal, shorten};
use crate::ids::IdSource;
use crate::lifetime::now_unix_millis;
use crate::login::Caller;
use crate::memory::PullPointBytes;
use crate::pullpoint::PullPoint;
use crate::push_mark::LoopMark;
use crate::registry::Registry;
use crate::subscription::Subscription;

/// What a request's URL addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resource {
    /// The NotificationBroker endpoint (`{path}`).
    Broker,
    /// A subscription manager (`{path}/subscriptions/{id}`).
    Subscription(String),
    /// A pull point (`{path}/pullpoints/{id}`).
    PullPoint(String),
}

/// A successful answer.
#[derive(Debug)]
pub(crate) enum Reply {
    /// `200` with this SOAP envelope.
    Body(Bytes),
    /// `202 Accepted`, no body: the answer to the one-way Notify.
    Accepted,
}

/// State shared by every request handler and push task.
pub(crate) struct Endpoint {
    /// The configuration.
    pub config: WsnConfig,
    /// `config.path` without a trailing `/`.
    pub base_path: String,
    /// XML limits for requests and payloads.
    pub limits: Limits,
    /// The core.
    pub router: Router,
    /// The broker's users and their rights.
    pub auth: Arc<dyn Authenticator>,
    /// Live subscriptions and pull points.
    pub registry: Registry,
    /// The push client.
    pub client: NotifyClient,
    /// Which consumer addresses may be pushed to.
    pub consumer_policy: Arc<ConsumerPolicy>,
    /// The mark on every push, to recognise pushes that come back.
    pub loop_mark: LoopMark,
    /// Bytes held by all pull points.
    pub pull_point_bytes: Arc<PullPointBytes>,
    /// Origin session of messages published by Notify.
    pub publisher: SessionId,
    /// Ids for addresses and messages.
    pub ids: IdSource,
    /// Request slots (`max_concurrent_requests`).
    pub request_permits: Arc<Semaphore>,
    /// Push tasks are spawned here.
    pub tracker: TaskTracker,
    /// Broker shutdown.
    pub shutdown: CancellationToken,
    /// Next core tag for a subscription (0 is "no subscription": a Notify into a pull point).
    next_tag: std::sync::atomic::AtomicU64,
    /// Per consumer address (`host:port`), the requests it may have in flight.
    consumer_limits: Mutex<HashMap<String, Weak<Semaphore>, foldhash::fast::RandomState>>,
}

impl Endpoint {
    /// The endpoint of the broker's HTTP server (whose address `ctx.http_addr` holds once it
    /// listens).
    pub(crate) fn new(config: WsnConfig, ctx: &FrontEndContext) -> Self {
        let limits = Limits { max_document_bytes: config.max_body_bytes, ..Limits::default() };
        let push = &config.push;
        let consumer_policy =
            Arc::new(ConsumerPolicy::new(&push.consumer_allow, ctx.http_addr.clone(), push.request_timeout));
        let ids = IdSource::new();
        Endpoint {
            base_path: config.base_path(),
            limits,
            router: ctx.router.clone(),
            auth: ctx.auth.clone(),
            registry: Registry::new(ctx.router.metrics().clone(), ctx.router.store().cloned()),
            client: NotifyClient::new(push, consumer_policy.clone()),
            consumer_policy,
            loop_mark: LoopMark::new(&ids),
            pull_point_bytes: Arc::new(PullPointBytes::new(
                ctx.router.budget().clone(),
                config.pull_point.total_max_bytes,
            )),
            publisher: ctx.router.next_session_id(),
            ids,
            request_permits: Arc::new(Semaphore::new(config.max_concurrent_requests.max(1))),
            tracker: ctx.tracker.clone(),
            shutdown: ctx.shutdown.clone(),
            next_tag: std::sync::atomic::AtomicU64::new(1),
            consumer_limits: Mutex::default(),
            config,
        }
    }

    /// A fresh core tag for a subscription.
    pub(crate) fn next_tag(&self) -> u64 {
        self.next_tag.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// The shared in-flight limit for one consumer address.
    pub(crate) fn consumer_limit(&self, authority: &str) -> Arc<Semaphore> {
        let key = authority.to_ascii_lowercase();
        let mut map = self.consumer_limits.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(limit) = map.get(&key).and_then(Weak::upgrade) {
            return limit;
        }
        // Forget consumers no subscription uses any more before adding one.
        map.retain(|_, weak| weak.strong_count() > 0);
        let limit = Arc::new(Semaphore::new(self.config.push.max_concurrent_per_consumer.max(1)));
        map.insert(key, Arc::downgrade(&limit));
        limit
    }

    /// The address of a subscription manager.
    pub(crate) fn subscription_address(&self, base: &str, id: &str) -> String {
        format!("{base}{}/subscriptions/{id}", self.base_path)
    }

    /// The address of a pull point.
    pub(crate) fn pull_point_address(&self, base: &str, id: &str) -> String {
        format!("{base}{}/pullpoints/{id}", self.base_path)
    }

    /// Whether `caller` may operate on a resource `owner` made: anyone while user names are
    /// only labels; once they are verified, the same user (anonymous resources: anonymous
    /// callers).
    pub(crate) fn may_manage(&self, caller: &Caller, owner: Option<&str>) -> bool {
        !self.auth.verifies_users() || caller.user.as_deref() == owner
    }

    /// The live subscription `id`, if `caller` may manage it; one past its termination time is
    /// removed on the spot.
    pub(crate) fn live_subscription(&self, id: &str, caller: &Caller) -> Result<Arc<Subscription>, Refusal> {
        let subscription = self
            .registry
            .subscription(id)
            .filter(|s| self.may_manage(caller, s.user.as_deref()))
            .ok_or_else(|| Refusal::resource_unknown("subscription", id))?;
        if subscription.terminates_at() <= now_unix_millis() {
            self.registry.remove_subscription(id, CloseReason::KeepAliveTimeout);
            return Err(Refusal::resource_unknown("subscription", id));
        }
        Ok(subscription)
    }

    /// The pull point `id`, if `caller` may use it.
    pub(crate) fn pull_point_for(&self, id: &str, caller: &Caller) -> Result<Arc<PullPoint>, Refusal> {
        self.registry
            .pull_point(id)
            .filter(|pp| self.may_manage(caller, pp.user.as_deref()))
            .ok_or_else(|| Refusal::resource_unknown("pull point", id))
    }

    /// Runs `caller`'s request on the resource. `base` is the scheme and authority addresses
    /// start with.
    pub(crate) async fn dispatch(
        self: &Arc<Self>,
        resource: &Resource,
        envelope: RequestEnvelope,
        caller: &Caller,
        ctx: &ReplyContext,
        base: &str,
    ) -> Result<Reply, Refusal> {
        let received_at = Instant::now();
        let (request, path) = (envelope.request, envelope.path);
        match (resource, request) {
            (_, Request::Unknown { namespace, local_name }) => Err(Refusal::sender(format!(
                "operation {{{}}}{} is not supported by this endpoint",
                shorten(namespace.as_deref().unwrap_or_default()),
                shorten(&local_name)
            ))),
            (Resource::Broker, Request::Notify(messages)) => {
                self.notify(&messages, path.as_deref(), caller, received_at).await
            }
            (Resource::Broker, Request::Subscribe(subscribe)) => self.subscribe(&subscribe, caller, ctx, base).await,
            (Resource::Broker, Request::GetCurrentMessage { topic }) => self.get_current_message(&topic, caller, ctx),
            (Resource::Broker, Request::CreatePullPoint) => self.create_pull_point(caller, ctx, base),
            (Resource::Broker, Request::RegisterPublisher(_)) => Err(Refusal::new(
                FaultKind::PublisherRegistrationRejected,
                format!("no registration needed: send Notify to {base}{} to publish", self.base_path),
            )),
            (
                Resource::Broker,
                Request::Renew { .. }
                | Request::Unsubscribe
                | Request::PauseSubscription
                | Request::ResumeSubscription
                | Request::GetMessages { .. }
                | Request::DestroyPullPoint
                | Request::DestroyRegistration,
            ) => Err(Refusal::new(
                FaultKind::ResourceUnknown,
                "send this request to the address of the subscription or pull point it is about \
                 (the reference the broker returned), not to the broker's address",
            )),
            (Resource::Subscription(id), Request::Renew { termination_time }) => {
                self.renew(&*self.live_subscription(id, caller)?, termination_time.as_deref(), ctx)
            }
            (Resource::Subscription(id), Request::Unsubscribe) => self.unsubscribe(id, caller, ctx),
            (Resource::Subscription(id), Request::PauseSubscription) => {
                self.pause(&*self.live_subscription(id, caller)?, ctx)
            }
            (Resource::Subscription(id), Request::ResumeSubscription) => {
                self.resume(&*self.live_subscription(id, caller)?, ctx)
            }
            (Resource::PullPoint(id), Request::GetMessages { maximum_number }) => {
                self.get_messages(&*self.pull_point_for(id, caller)?, maximum_number, ctx).await
            }
            (Resource::PullPoint(id), Request::DestroyPullPoint) => self.destroy_pull_point(id, caller, ctx),
            (Resource::PullPoint(id), Request::Notify(messages)) => {
                self.notify_pull_point(&*self.pull_point_for(id, caller)?, &messages, caller, received_at)
            }
            (resource, request) => {
                let what = match resource {
                    Resource::Subscription(_) => "a subscription manager address",
                    Resource::PullPoint(_) => "a pull point address",
                    Resource::Broker => "the broker address",
                };
                let name = request.operation().map_or("this operation", |op| op.name());
                Err(Refusal::sender(format!("{name} is not served at {what}")))
            }
        }
    }

    /// Removes expired subscriptions and idle pull points.
    pub(crate) fn sweep(&self) {
        let idle_since = Instant::now().checked_sub(self.config.pull_point.idle_timeout);
        let (subscriptions, pull_points) = self.registry.expired(now_unix_millis(), idle_since);
        for id in subscriptions {
            if self.registry.remove_subscription(&id, CloseReason::KeepAliveTimeout).is_some() {
                debug!(subscription = %id, "subscription expired");
            }
        }
        for id in pull_points {
            if self.registry.remove_pull_point(&id, CloseReason::KeepAliveTimeout).is_some() {
                debug!(pull_point = %id, "idle pull point destroyed");
            }
        }
    }
}
