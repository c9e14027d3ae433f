//! The router: the single source of truth for subscriptions, and the hot path of every message.
//!
//! Publishing is one read-lock on the trie, one walk, and one bounded push per matching
//! subscription (an `Arc` clone, no payload copy). Subscribing takes the write lock briefly.
//! No lock here is ever held across an await.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use foldhash::fast::RandomState;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use tolk_metrics::{Denial, DropReason, MemoryKind, Metrics, Protocol};

use crate::access::{self, Access, ReadCheck, Resource, Right, Rights, SubscribeError};
use crate::alarm::Alarms;
use crate::budget::{MemoryBudget, message_cost};
use crate::delivery::Delivery;
use crate::interest::{Interest, InterestWatch};
use crate::lazy_vec::LazyVec;
use crate::live::LiveSessions;
use crate::message::{Message, QoS, SessionId};
use crate::outbox::{Outbox, OutboxLimits, OutboxReceiver, PushOutcome, outbox};
use crate::queue::{Queue, QueueOptions, QueuePush};
use crate::retained::{RetainOutcome, RetainedLimits, RetainedStore};
use crate::store::{Change, Durable, SessionKeeper, Space, Store, StoreError, record};
use crate::topic::{self, TopicError, TopicLimits};
use crate::transcode::Transcoder;
use crate::trie::Trie;

/// Sizes of the router's bounded structures. Part of the broker's `[core]` configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RouterConfig {
    /// Bytes that everything holding messages may use together: outboxes, offline sessions,
    /// named queues, retained messages and pull points, counted per holder (a message waiting
    /// for three subscribers counts three times). When it is used up, at-most-once messages
    /// are dropped (`memory_full`) and at-least-once publishers are refused with their
    /// protocol's signal. 128 MiB leaves a 1 GB Raspberry Pi room for the OS and other
    /// services; raise it on a server.
    pub memory_budget_bytes: usize,
    /// Deliveries waiting per connected session before at-most-once messages are dropped and
    /// publishers of at-least-once messages are held back (then the session is closed as a
    /// slow consumer).
    pub outbox_capacity: usize,
    /// The same limit in bytes (payload, topic, properties and 384 bytes of overhead per
    /// message): 8 MiB lets a slow reader fall behind by thousands of sensor readings, while
    /// 1 MiB messages stop after eight.
    pub outbox_max_bytes: usize,
    /// Bytes an offline persistent session keeps (MQTT clean-session off, MQTT-SN). Beyond it,
    /// at-least-once messages for it are refused (MQTT 5 publishers get 0x97, AMQP a nack,
    /// STOMP an ERROR) or, where the publisher's protocol cannot be told, dropped, counted
    /// (`queue_full`) and logged. 4 MiB holds an hour of one message a second of up to ~700
    /// bytes.
    pub offline_max_bytes: usize,
    /// Most messages waiting in a named queue (AMQP queue, STOMP `/queue/`, MQTT `$share` group).
    pub queue_max_length: usize,
    /// Most bytes held by one named queue (RabbitMQ's `max-length-bytes`).
    pub queue_max_bytes: usize,
    /// Unacknowledged deliveries per queue consumer when its protocol asks for "unlimited"
    /// (AMQP prefetch 0, STOMP auto ack).
    pub consumer_credit: usize,
    /// Most topics with a retained message; new retained topics beyond it are not stored.
    pub retained_max_topics: usize,
    /// Most bytes of retained messages; new retained messages beyond it are not stored.
    pub retained_max_bytes: usize,
    /// Most levels in a topic name or filter (EMQX's default, 128). Deeper topics are refused
    /// with each protocol's own error.
    pub max_topic_levels: usize,
    /// Most bytes in a topic name or filter, at most MQTT's 65,535.
    pub max_topic_bytes: usize,
    /// How long a publisher is held back (its connection stops reading) while a subscriber it
    /// publishes to has a full outbox, or a queue it publishes to is past half its limits. An
    /// at-least-once subscriber still full after this is closed as a slow consumer; a queue
    /// still past its mark refuses what exceeds its limits. MQTT-SN and WS-N publishers are not
    /// held back.
    #[serde(with = "humantime_serde")]
    pub slow_consumer_grace: Duration,
}

impl Default for RouterConfig {
    fn default() -> Self {
        const MIB: usize = 1024 * 1024;
        RouterConfig {
            memory_budget_bytes: 128 * MIB,
            outbox_capacity: 1024,
            outbox_max_bytes: 8 * MIB,
            offline_max_bytes: 4 * MIB,
            queue_max_length: 100_000,
            queue_max_bytes: 16 * MIB,
            consumer_credit: 256,
            retained_max_topics: 100_000,
            retained_max_bytes: 32 * MIB,
            max_topic_levels: TopicLimits::default().max_levels,
            max_topic_bytes: TopicLimits::default().max_bytes,
            slow_consumer_grace: Duration::from_secs(5),
        }
    }
}

/// Per-subscription choices (MQTT 5 subscription options; other protocols use the defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscriptionOptions {
    /// Highest guarantee the subscriber accepts.
    pub max_qos: QoS,
    /// Do not deliver messages published by the same session (MQTT 5 no-local).
    pub no_local: bool,
    /// Keep the publisher's retain flag on live deliveries (MQTT 5 retain-as-published).
    pub retain_as_published: bool,
    /// MQTT 5 subscription identifier, echoed in deliveries.
    pub subscription_id: Option<u32>,
    /// Do not deliver messages published by this session (a bridge's spool leaves out what the
    /// bridge itself brought in, as no-local does for a subscriber's own publishes).
    pub not_from: Option<SessionId>,
    /// Do not deliver messages that have crossed this many bridges ([`crate::path::hops`]):
    /// a bridge's hop limit.
    pub max_hops: Option<u8>,
}

impl SubscriptionOptions {
    /// Whether these options keep `message` from a subscription owned by `owner`: its own
    /// publish under no-local, its bridge's own under `not_from`, or past the hop limit.
    fn leaves_out(&self, owner: SessionId, message: &Message) -> bool {
        let from = message.origin.session;
        (self.no_local && owner == from)
            || self.not_from == Some(from)
            || self.max_hops.is_some_and(|max| crate::path::hops(message) >= usize::from(max))
    }
}

impl Default for SubscriptionOptions {
    fn default() -> Self {
        SubscriptionOptions {
            max_qos: QoS::ExactlyOnce,
            no_local: false,
            retain_as_published: false,
            subscription_id: None,
            not_from: None,
            max_hops: None,
        }
    }
}

/// Where a subscription's matches go.
#[derive(Clone)]
pub enum Target {
    /// Straight into one session's outbox.
    Outbox(Outbox),
    /// Into a named queue, which hands each message to one of its consumers.
    Queue(Arc<Queue>),
}

/// What the queue of an MQTT-style shared subscription group is named with: `$share/group/filter`.
const SHARED_PREFIX: &str = "$share/";

/// What a bridge's spool is named with: `$bridge/<name>` (see `bridges/engine`).
pub const SPOOL_PREFIX: &str = "$bridge/";

/// A subscription as stored in the trie. Identity is `(owner, filter, tag)`: subscribing again
/// with the same identity replaces the options (MQTT-3.8.4-3).
#[derive(Clone)]
pub struct Subscription {
    /// The session (or queue) that owns it.
    pub owner: SessionId,
    /// A number the front end chooses to tell its subscriptions apart (STOMP subscription ids;
    /// 0 where the filter alone identifies it). Echoed in every delivery.
    pub tag: u64,
    /// Options.
    pub options: SubscriptionOptions,
    /// Destination of matches.
    pub target: Target,
    /// Checked for each message before delivery when the subscriber's rights are restricted.
    pub read_check: Option<ReadCheck>,
}

/// What one publish did. Front ends use it to answer the publisher (MQTT 5 "no matching
/// subscribers", AMQP mandatory returns and confirm nacks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PublishOutcome {
    /// Subscriptions that matched (after no-local).
    pub matched: usize,
    /// Deliveries queued.
    pub delivered: usize,
    /// Deliveries dropped because a subscriber could not take them (counted in metrics).
    pub dropped: usize,
    /// Holders that refused the message: full named queues, offline sessions at their byte
    /// limit, a full retained store, or (with [`PublishOutcome::memory_full`]) the whole
    /// broker. Tell the publisher where its protocol can (MQTT 5 0x97, AMQP nack, STOMP ERROR).
    pub refused: usize,
    /// The memory budget was used up and this at-least-once message was not routed at all.
    pub memory_full: bool,
    /// The access-control list refused the publisher this topic; nothing was routed (MQTT 5
    /// 0x87, AMQP 403, STOMP ERROR).
    pub not_authorized: bool,
    /// What the message left in the store is being written; the publishing session's
    /// [`Session::poll_durable`] says when it is on disk. Acknowledge it then.
    pub durable: bool,
}

/// What [`Router::attach_store`] put back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restored {
    /// Retained messages.
    pub retained: usize,
    /// Durable queues.
    pub queues: usize,
    /// Messages in durable queues.
    pub queued: usize,
}

/// Errors from queue declarations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// Re-declared with different options (AMQP 406 precondition-failed).
    #[error("queue '{0}' exists with different options")]
    OptionsDiffer(String),
    /// An exclusive queue belongs to another session (AMQP 405 resource-locked).
    #[error("queue '{0}' is exclusive to another connection")]
    Locked(String),
    /// The access-control list does not give this client the right it needs on the queue.
    #[error("access to queue '{0}' refused")]
    NotAuthorized(String),
}

#[derive(Default)]
struct Subscriptions {
    trie: Trie<Subscription>,
    /// Filters per owner, so that a session's subscriptions can all be removed when it ends.
    by_owner: HashMap<SessionId, Vec<(String, u64)>, RandomState>,
    /// The filters local subscribers want, counted once the cluster watches them.
    interest: Option<Interest>,
}

struct Inner {
    /// Where retained messages are kept across restarts, once attached.
    store: OnceLock<Arc<dyn Store>>,
    subscriptions: RwLock<Subscriptions>,
    queues: Mutex<HashMap<String, Arc<Queue>, RandomState>>,
    retained: RetainedStore,
    next_id: AtomicU64,
    metrics: Arc<Metrics>,
    budget: Arc<MemoryBudget>,
    config: RouterConfig,
    /// What every session's outbox may hold (from `config`), shared by all of them.
    session_limits: Arc<OutboxLimits>,
    /// This broker's name on bridged messages' paths ([`crate::path`]), once set.
    node_name: OnceLock<Arc<str>>,
    /// The `[[transcode]]` rules, once set.
    transcoder: OnceLock<Arc<Transcoder>>,
    /// Every open session's outbox, for the broker's shutdown (shared with the task that
    /// waits for it) and the alarms.
    live: Arc<LiveSessions>,
    /// The connections' far deadlines.
    alarms: Arc<Alarms>,
}

/// Handle to the router; cheap to clone, shared by every front end.
#[derive(Clone)]
pub struct Router(Arc<Inner>);

impl Router {
    /// A router with the given limits, recording into `metrics`. Puts the topic limits in
    /// force for the process (see [`topic::set_limits`]).
    pub fn new(config: RouterConfig, metrics: Arc<Metrics>) -> Router {
        topic::set_limits(TopicLimits { max_levels: config.max_topic_levels, max_bytes: config.max_topic_bytes });
        let budget = Arc::new(MemoryBudget::new(config.memory_budget_bytes, metrics.clone()));
        let retained_limits =
            RetainedLimits { max_topics: config.retained_max_topics, max_bytes: config.retained_max_bytes };
        let session_limits = Arc::new(OutboxLimits {
            // At least one, as `outbox` would make it (for each session, with a copy of its own).
            capacity: config.outbox_capacity.max(1),
            max_bytes: config.outbox_max_bytes,
            offline_max_bytes: config.offline_max_bytes,
            kind: MemoryKind::Outbox,
        });
        let live = Arc::new(LiveSessions::default());
        Router(Arc::new(Inner {
            store: OnceLock::new(),
            subscriptions: RwLock::default(),
            queues: Mutex::default(),
            retained: RetainedStore::new(retained_limits, budget.clone()),
            next_id: AtomicU64::new(1),
            metrics,
            budget,
            config,
            session_limits,
            node_name: OnceLock::new(),
            transcoder: OnceLock::new(),
            alarms: Arc::new(Alarms::new(live.clone())),
            live,
        }))
    }

    /// Names this broker on the paths of bridged messages: from now on a message whose path
    /// holds `name` came back through a loop of bridges and is dropped (counted as `loop`).
    /// Set once, at start; later calls are ignored.
    pub fn set_node_name(&self, name: &str) {
        let _ = self.0.node_name.set(Arc::from(name));
    }

    /// This broker's name on bridged messages' paths, if set.
    pub fn node_name(&self) -> Option<&Arc<str>> {
        self.0.node_name.get()
    }

    /// The memory budget every holder of messages draws from.
    pub fn budget(&self) -> &Arc<MemoryBudget> {
        &self.0.budget
    }

    /// An outbox for a holder that is not a session (a WS-N pull point or push consumer),
    /// owned by `id`: the session limits, with `capacity` deliveries and `max_bytes`, charged
    /// as `kind`.
    pub fn outbox(
        &self,
        id: SessionId,
        protocol: Protocol,
        capacity: usize,
        max_bytes: usize,
        kind: MemoryKind,
    ) -> (Outbox, OutboxReceiver) {
        let limits = OutboxLimits { capacity, max_bytes, kind, ..*self.0.session_limits };
        let (outbox, receiver) = outbox(id, protocol, limits, self.0.budget.clone());
        (outbox, self.transcoding(receiver, protocol))
    }

    /// Puts the `[[transcode]]` rules in force for every session and outbox opened from now
    /// on. Call it once, at start, before any client is served.
    pub fn set_transcoder(&self, transcoder: Transcoder) {
        let _ = self.0.transcoder.set(Arc::new(transcoder));
    }

    /// `message` as a subscriber on `protocol` should receive it, for a front end that hands
    /// out a message it did not take from an outbox (WS-N GetCurrentMessage).
    pub fn transcode(&self, message: Arc<Message>, protocol: Protocol) -> Arc<Message> {
        self.0.transcoder.get().and_then(|t| t.apply(&message, protocol)).unwrap_or(message)
    }

    /// `receiver`, re-encoding what it takes when a rule serves `protocol`.
    fn transcoding(&self, mut receiver: OutboxReceiver, protocol: Protocol) -> OutboxReceiver {
        if let Some(transcoder) = self.0.transcoder.get().filter(|t| t.serves(protocol)) {
            receiver.transcode_with(transcoder.clone());
        }
        receiver
    }

    /// The broker's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.0.metrics
    }

    /// The limits in force.
    pub fn config(&self) -> &RouterConfig {
        &self.0.config
    }

    /// A fresh id for a session or queue.
    pub fn next_session_id(&self) -> SessionId {
        SessionId(self.0.next_id.fetch_add(1, Ordering::Relaxed))
    }

    fn read(&self) -> RwLockReadGuard<'_, Subscriptions> {
        self.0.subscriptions.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Subscriptions> {
        self.0.subscriptions.write().unwrap_or_else(|e| e.into_inner())
    }

    fn queues(&self) -> MutexGuard<'_, HashMap<String, Arc<Queue>, RandomState>> {
        self.0.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a session for a protocol front end: an id, an outbox, and automatic clean-up of
    /// its subscriptions and queue consumers when the [`Session`] is dropped.
    pub fn open_session(&self, protocol: Protocol) -> Session {
        let id = self.next_session_id();
        let (sender, receiver) = outbox(id, protocol, self.0.session_limits.clone(), self.0.budget.clone());
        let receiver = self.transcoding(receiver, protocol);
        Session {
            live_slot: self.0.live.insert(sender),
            id,
            protocol,
            router: self.clone(),
            receiver,
            consumers: LazyVec::default(),
            congestion: Mutex::default(),
            congested: AtomicBool::new(false),
            rights: None,
            durable: Mutex::default(),
            durable_pending: AtomicBool::new(false),
            tracks_durable: false,
        }
    }

    /// Tells every open session's connection, and every one opened from now on, that the broker
    /// is shutting down (their drivers say the protocol's goodbye), once `shutdown` is
    /// cancelled. [`crate::FrontEndContext::new`] asks it for the context's token.
    pub fn shut_down_sessions_on(&self, shutdown: &CancellationToken) {
        self.0.live.shut_down_when_cancelled(shutdown);
    }

    /// Adds or replaces a subscription. Returns `true` when it replaced an existing one.
    pub fn subscribe(&self, filter: &str, subscription: Subscription) -> Result<bool, TopicError> {
        topic::validate_filter(filter)?;
        let (owner, tag) = (subscription.owner, subscription.tag);
        let mut subs = self.write();
        let replaced = subs.trie.upsert(filter, subscription, |s| s.owner == owner && s.tag == tag).is_some();
        if !replaced {
            subs.by_owner.entry(owner).or_default().push((filter.to_owned(), tag));
            if let Some(interest) = &mut subs.interest {
                interest.added(owner, filter);
            }
        }
        Ok(replaced)
    }

    /// Removes one subscription. Returns whether it existed.
    pub fn unsubscribe(&self, owner: SessionId, filter: &str, tag: u64) -> bool {
        let mut subs = self.write();
        let removed = subs.trie.remove(filter, |s| s.owner == owner && s.tag == tag) > 0;
        if removed && let Some(interest) = &mut subs.interest {
            interest.removed(owner, filter);
        }
        if removed && let Some(list) = subs.by_owner.get_mut(&owner) {
            list.retain(|(f, t)| !(f == filter && *t == tag));
            if list.is_empty() {
                subs.by_owner.remove(&owner);
            }
        }
        removed
    }

    /// Removes every subscription of `owner`. Returns how many.
    pub fn unsubscribe_all(&self, owner: SessionId) -> usize {
        let mut subs = self.write();
        let Some(list) = subs.by_owner.remove(&owner) else { return 0 };
        let subs = &mut *subs;
        let mut removed = 0;
        for (filter, tag) in &list {
            let n = subs.trie.remove(filter, |s| s.owner == owner && s.tag == *tag);
            if n > 0
                && let Some(interest) = &mut subs.interest
            {
                interest.removed(owner, filter);
            }
            removed += n;
        }
        removed
    }

    /// Starts counting which filters local subscribers want ([`crate::interest`]), leaving
    /// out `ignore`'s bindings (the watcher's own queue). One watcher per router.
    pub fn watch_interest(&self, ignore: SessionId) -> InterestWatch {
        let mut subs = self.write();
        let subs = &mut *subs;
        let existing = subs.by_owner.iter().flat_map(|(owner, list)| list.iter().map(|(f, _)| (*owner, f.as_str())));
        let (interest, watch) = Interest::new(ignore, existing);
        subs.interest = Some(interest);
        watch
    }

    /// The filters local subscribers want now, sorted (empty until [`Router::watch_interest`]).
    pub fn interest(&self) -> Vec<String> {
        self.read().interest.as_ref().map(Interest::filters).unwrap_or_default()
    }

    /// Number of subscriptions in the trie (queue bindings included).
    pub fn subscription_count(&self) -> usize {
        self.read().trie.len()
    }

    /// Routes a message to every matching subscription, storing it first if it is retained.
    /// The topic must be a valid name (front ends check with [`topic::validate_name`]).
    pub fn publish(&self, message: Arc<Message>) -> PublishOutcome {
        self.route(message, &mut Vec::new(), &mut None)
    }

    /// [`Router::publish`], leaving in `durable` the store commit of what the message left on
    /// disk (a publisher without a session, WS-N, awaits it before answering).
    pub fn publish_kept(&self, message: Arc<Message>, durable: &mut Option<Durable>) -> PublishOutcome {
        self.route(message, &mut Vec::new(), durable)
    }

    /// [`Router::publish`], noting in `congested` the outboxes that took a delivery over their
    /// capacity and the queues past their mark, and in `durable` the store commit of what it
    /// kept.
    fn route(
        &self,
        message: Arc<Message>,
        congested: &mut Vec<Congested>,
        durable: &mut Option<Durable>,
    ) -> PublishOutcome {
        let metrics = &self.0.metrics;
        let mut outcome = PublishOutcome::default();
        if !message.props.user.is_empty()
            && let Some(node) = self.0.node_name.get()
            && crate::path::has_passed(&message, node)
        {
            // Sent out through a bridge and back in: routed here once already.
            metrics.protocol(message.origin.protocol).dropped(DropReason::Loop, 1);
            return outcome;
        }
        let at_least_once = message.qos != QoS::AtMostOnce;
        if at_least_once && !self.0.budget.has_room(message_cost(&message)) {
            // Refused whole, before anything holds it: one message never half-routes.
            metrics.protocol(message.origin.protocol).dropped(DropReason::MemoryFull, 1);
            outcome.refused += 1;
            outcome.memory_full = true;
            return outcome;
        }
        if message.retain {
            match self.0.retained.store(&message) {
                RetainOutcome::Full => {
                    metrics.protocol(message.origin.protocol).dropped(DropReason::MemoryFull, 1);
                    if at_least_once {
                        outcome.refused += 1;
                    }
                }
                kept => {
                    if let Some(commit) = self.keep_retained(&message, kept) {
                        Durable::keep(durable, commit);
                    }
                }
            }
        }
        let now = Instant::now();
        let subs = self.read();
        subs.trie.for_each_match(&message.topic, |s| {
            if s.options.leaves_out(s.owner, &message) {
                return;
            }
            if let Some(check) = &s.read_check
                && !check.access.may_read(&message.topic)
            {
                metrics.protocol(check.protocol).denied(Denial::Read);
                return;
            }
            outcome.matched += 1;
            match &s.target {
                Target::Outbox(outbox) => {
                    let mut delivery = Delivery {
                        message: message.clone(),
                        qos: message.qos.min(s.options.max_qos),
                        retain: message.retain && s.options.retain_as_published,
                        tag: s.tag,
                        subscription_id: s.options.subscription_id,
                        enqueued_at: now,
                        ack: None,
                        redelivered: false,
                        stored: 0,
                    };
                    // A persistent session keeps what it must receive at least once.
                    let keeper = outbox.keeper().filter(|_| delivery.qos != QoS::AtMostOnce);
                    if let Some((seq, commit)) = keeper.and_then(|k| k.keep(&delivery)) {
                        delivery.stored = seq;
                        Durable::keep(durable, commit);
                    }
                    let kept = delivery.stored;
                    let pushed = outbox.push(delivery);
                    if let Some(keeper) = keeper
                        && !matches!(pushed, PushOutcome::Queued | PushOutcome::Congested)
                    {
                        keeper.forget(kept);
                    }
                    match pushed {
                        PushOutcome::Queued => outcome.delivered += 1,
                        PushOutcome::Congested => {
                            outcome.delivered += 1;
                            congested.push(Congested::Outbox(outbox.clone()));
                        }
                        PushOutcome::Dropped(reason) => {
                            outcome.dropped += 1;
                            metrics.protocol(outbox.protocol()).dropped(reason, 1);
                        }
                        PushOutcome::Overflowed => {
                            outcome.dropped += 1;
                            metrics.protocol(outbox.protocol()).dropped(DropReason::OutboxFull, 1);
                        }
                        PushOutcome::Refused => {
                            outcome.refused += 1;
                            metrics.protocol(outbox.protocol()).dropped(DropReason::QueueFull, 1);
                        }
                        PushOutcome::Closed => {}
                    }
                }
                Target::Queue(queue) => match queue.push(message.clone(), durable) {
                    QueuePush::Accepted => outcome.delivered += 1,
                    QueuePush::Congested => {
                        outcome.delivered += 1;
                        congested.push(Congested::Queue(queue.clone()));
                    }
                    // Counted by the queue.
                    QueuePush::Full => outcome.refused += 1,
                    QueuePush::Deleted => {}
                },
            }
        });
        outcome
    }

    /// Puts back what `store` kept (retained messages, durable queues with their bindings and
    /// messages) and keeps them there from now on. Call it once, at start, before any client
    /// is served. Records that cannot be read are skipped with a log line.
    pub fn attach_store(&self, store: Arc<dyn Store>) -> Result<Restored, StoreError> {
        let _ = self.0.store.set(store.clone());
        let mut restored = Restored::default();
        for (key, value) in store.load(Space::Retained)? {
            match record::decode_message(&value) {
                Ok(Some(message)) => match self.0.retained.store(&Arc::new(message)) {
                    RetainOutcome::Full => tracing::warn!("a stored retained message does not fit the retained limits"),
                    _ => restored.retained += 1,
                },
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(topic = %String::from_utf8_lossy(&key), error = %e, "a stored retained message was not restored")
                }
            }
        }
        for (key, value) in store.load(Space::Queues)? {
            let name = String::from_utf8_lossy(&key);
            match record::decode_record::<record::QueueRecord>(&value) {
                Ok(kept) => self.restore_queue(&name, kept),
                Err(e) => tracing::warn!(queue = %name, error = %e, "a stored queue was not restored"),
            }
            restored.queues += 1;
        }
        for (key, value) in store.load(Space::QueueMessages)? {
            let Some((name, seq)) = record::split_seq_key(&key) else { continue };
            let Some(queue) = self.queue(name) else {
                // Its queue was deleted and the crash came before the messages' deletes.
                drop(store.commit(vec![Change::Delete { space: Space::QueueMessages, key }]));
                continue;
            };
            match record::decode_message(&value) {
                Ok(Some(message)) => match queue.restore(message, seq) {
                    QueuePush::Accepted | QueuePush::Congested => restored.queued += 1,
                    _ => tracing::warn!(queue = name, "a stored message does not fit its queue's limits; not restored"),
                },
                Ok(None) => drop(store.commit(vec![Change::Delete { space: Space::QueueMessages, key }])),
                Err(e) => tracing::warn!(queue = name, error = %e, "a stored queue message was not restored"),
            }
        }
        Ok(restored)
    }

    fn restore_queue(&self, name: &str, kept: record::QueueRecord) {
        let options = QueueOptions {
            max_length: usize::try_from(kept.max_length).unwrap_or(usize::MAX),
            max_length_bytes: usize::try_from(kept.max_length_bytes).unwrap_or(usize::MAX),
            durable: true,
            // A `$share` group's queue goes with its last member, as when it was made.
            auto_delete: name.starts_with(SHARED_PREFIX),
            // A bridge's spool keeps only at-least-once messages while its remote is away.
            at_most_once_needs_consumer: name.starts_with(SPOOL_PREFIX),
            ..QueueOptions::default()
        };
        // Its record is left as it is: rewriting it binding by binding would leave it without
        // some of them until the last rewrite.
        let queue = match self.insert_queue(name, options) {
            Ok((queue, _)) => queue,
            Err(e) => return tracing::warn!(queue = name, error = %e, "a stored queue was not restored"),
        };
        for (filter, tag) in kept.bindings {
            if let Err(e) = self.subscribe(&filter, Self::queue_subscription(&queue, tag, None)) {
                tracing::warn!(queue = name, filter, error = %e, "a stored binding was not restored");
            }
        }
    }

    /// Writes a durable queue's record (its options and current bindings) to the store.
    fn keep_queue(&self, queue: &Queue) {
        let Some(store) = self.0.store.get().filter(|_| queue.is_stored()) else { return };
        // Committed under the read lock: no binding changes between this snapshot and its
        // place in the store's order, so the last record written has every binding.
        let subs = self.read();
        let bindings = subs.by_owner.get(&queue.id()).cloned().unwrap_or_default();
        let options = queue.options();
        let kept = record::QueueRecord {
            max_length: options.max_length as u64,
            max_length_bytes: options.max_length_bytes as u64,
            bindings,
        };
        let key = queue.name().as_bytes().to_vec();
        drop(store.commit(vec![Change::Put { space: Space::Queues, key, value: record::encode_record(&kept) }]));
        drop(subs);
    }

    /// Writes a retained message's change through to the store. The message is routed at once;
    /// the returned commit says when it is on disk, which is when its publisher may be told
    /// (see [`Session::poll_durable`]). The store applies changes in order, so the last one of a
    /// topic wins there too.
    fn keep_retained(&self, message: &Message, outcome: RetainOutcome) -> Option<Durable> {
        let store = self.0.store.get()?;
        let key = message.topic.as_bytes().to_vec();
        let change = match outcome {
            RetainOutcome::Cleared => Change::Delete { space: Space::Retained, key },
            _ => Change::Put { space: Space::Retained, key, value: record::encode_message(message) },
        };
        Some(store.commit(vec![change]))
    }

    /// Keeps `message` as its topic's retained message (an empty payload clears it) without
    /// routing it anywhere: what another node of the cluster retained, from the shared bucket.
    pub fn retain_only(&self, message: &Arc<Message>) {
        match self.0.retained.store(message) {
            RetainOutcome::Full => self.0.metrics.protocol(message.origin.protocol).dropped(DropReason::MemoryFull, 1),
            kept => drop(self.keep_retained(message, kept)),
        }
    }

    /// The store, once attached: for a front end that restores its own kept state (persistent
    /// sessions) at start.
    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        self.0.store.get()
    }

    /// Retained messages matching a filter, for a new subscription.
    pub fn retained(&self, filter: &str) -> Vec<Arc<Message>> {
        self.0.retained.matching(filter)
    }

    /// Number of topics with a retained message.
    pub fn retained_count(&self) -> usize {
        self.0.retained.len()
    }

    /// Declares a queue, or returns the existing one (`false` = not newly created) when the
    /// options agree. `options.max_length` of 0 means the configured default.
    pub fn declare_queue(&self, name: &str, options: QueueOptions) -> Result<(Arc<Queue>, bool), QueueError> {
        let (queue, created) = self.insert_queue(name, options)?;
        if created {
            self.keep_queue(&queue);
        }
        Ok((queue, created))
    }

    /// [`Router::declare_queue`] without writing a durable queue's record.
    fn insert_queue(&self, name: &str, mut options: QueueOptions) -> Result<(Arc<Queue>, bool), QueueError> {
        if options.max_length == 0 {
            options.max_length = self.0.config.queue_max_length;
        }
        if options.max_length_bytes == 0 {
            options.max_length_bytes = self.0.config.queue_max_bytes;
        }
        let mut queues = self.queues();
        if let Some(existing) = queues.get(name) {
            let theirs = existing.options();
            if theirs.exclusive_owner.is_some() && theirs.exclusive_owner != options.exclusive_owner {
                return Err(QueueError::Locked(name.to_owned()));
            }
            if (theirs.durable, theirs.auto_delete, theirs.exclusive_owner.is_some())
                != (options.durable, options.auto_delete, options.exclusive_owner.is_some())
            {
                return Err(QueueError::OptionsDiffer(name.to_owned()));
            }
            return Ok((existing.clone(), false));
        }
        let id = self.next_session_id();
        let store = self.0.store.get().cloned();
        let queue =
            Arc::new(Queue::new(name, id, options, self.0.config.consumer_credit, self.0.budget.clone(), store));
        queues.insert(name.to_owned(), queue.clone());
        Ok((queue, true))
    }

    /// Named queues declared by clients now (not the broker's own `$…` ones).
    pub fn client_queue_count(&self) -> usize {
        self.queues().keys().filter(|name| !name.starts_with('$')).count()
    }

    /// The queue called `name`, if declared.
    pub fn queue(&self, name: &str) -> Option<Arc<Queue>> {
        self.queues().get(name).cloned()
    }

    /// Deletes a queue and its bindings. Returns the number of messages discarded, or `None`
    /// when no such queue exists.
    pub fn delete_queue(&self, name: &str) -> Option<usize> {
        let queue = self.queues().remove(name)?;
        self.unsubscribe_all(queue.id());
        self.forget_queue(&queue);
        Some(queue.mark_deleted())
    }

    /// Deletes a durable queue's record (its messages go with [`Queue::mark_deleted`]).
    fn forget_queue(&self, queue: &Queue) {
        if let Some(store) = self.0.store.get().filter(|_| queue.is_stored()) {
            let key = queue.name().as_bytes().to_vec();
            drop(store.commit(vec![Change::Delete { space: Space::Queues, key }]));
        }
    }

    /// Deletes `queue` if it is auto-delete and nobody consumes from it or holds it any more.
    fn delete_if_abandoned(&self, queue: &Arc<Queue>) {
        if !queue.options().auto_delete {
            return;
        }
        let mut queues = self.queues();
        let still_ours = queues.get(queue.name()).is_some_and(|q| Arc::ptr_eq(q, queue));
        if still_ours && queue.is_abandoned() {
            queues.remove(queue.name());
            drop(queues);
            self.unsubscribe_all(queue.id());
            self.forget_queue(queue);
            queue.mark_deleted();
        }
    }

    /// Deletes the `$share` groups the store restored that no restored session is a member of
    /// (their members were not persistent): call once every front end has restored its
    /// sessions.
    pub fn drop_unheld_groups(&self) {
        let groups: Vec<Arc<Queue>> =
            self.queues().iter().filter(|(name, _)| name.starts_with(SHARED_PREFIX)).map(|(_, q)| q.clone()).collect();
        for queue in groups {
            self.delete_if_abandoned(&queue);
        }
    }

    /// Routes messages matching `filter` into `queue` (AMQP binding to `amq.topic`, `$share`).
    pub fn bind_queue(&self, queue: &Arc<Queue>, filter: &str, tag: u64) -> Result<bool, TopicError> {
        self.bind_checked(queue, filter, tag, None)
    }

    /// [`Router::bind_queue`] with subscription options (a bridge's spool: `not_from` and
    /// `max_hops`). Not written to the store: whoever binds this way binds again at start.
    pub fn bind_queue_with(
        &self,
        queue: &Arc<Queue>,
        filter: &str,
        tag: u64,
        options: SubscriptionOptions,
    ) -> Result<bool, TopicError> {
        let subscription = Subscription { options, ..Self::queue_subscription(queue, tag, None) };
        self.subscribe(filter, subscription)
    }

    /// [`Router::bind_queue`] delivering only what `read_check` allows (the binder's rights).
    fn bind_checked(
        &self,
        queue: &Arc<Queue>,
        filter: &str,
        tag: u64,
        read_check: Option<ReadCheck>,
    ) -> Result<bool, TopicError> {
        let replaced = self.subscribe(filter, Self::queue_subscription(queue, tag, read_check))?;
        if !replaced {
            self.keep_queue(queue);
        }
        Ok(replaced)
    }

    /// The router subscription that binds `queue`.
    fn queue_subscription(queue: &Arc<Queue>, tag: u64, read_check: Option<ReadCheck>) -> Subscription {
        Subscription {
            owner: queue.id(),
            tag,
            options: SubscriptionOptions::default(),
            target: Target::Queue(queue.clone()),
            read_check,
        }
    }

    /// Removes a binding made with [`Router::bind_queue`].
    pub fn unbind_queue(&self, queue: &Arc<Queue>, filter: &str, tag: u64) -> bool {
        let removed = self.unsubscribe(queue.id(), filter, tag);
        if removed {
            self.keep_queue(queue);
        }
        removed
    }

    /// Deletes every exclusive queue owned by `owner` (its connection ended).
    fn delete_exclusive_queues(&self, owner: SessionId) {
        let names: Vec<String> = self
            .queues()
            .iter()
            .filter(|(_, q)| q.options().exclusive_owner == Some(owner))
            .map(|(name, _)| name.clone())
            .collect();
        for name in names {
            self.delete_queue(&name);
        }
    }
}

/// One protocol session's view of the router. Dropping it removes its subscriptions, returns
/// its unacknowledged queue messages, deletes its exclusive queues and abandoned auto-delete
/// queues: a front end cannot leak subscriptions by forgetting a clean-up path.
pub struct Session {
    id: SessionId,
    protocol: Protocol,
    router: Router,
    receiver: OutboxReceiver,
    /// Queues this session consumes from, or holds as an offline member (`None`), by tag.
    /// Allocated with the first: most sessions consume from no queue.
    consumers: LazyVec<(Arc<Queue>, Option<crate::queue::ConsumerId>, u64)>,
    /// Boxed, and only while it waits for something: 16 bytes in every session instead of 48.
    congestion: Mutex<Option<Box<Congestion>>>,
    /// Whether `congestion` waits for anything: set and cleared under its lock, read without
    /// it, so that the connection's loop takes no lock to ask on every round.
    congested: AtomicBool,
    rights: Rights,
    /// Store commits of this session's publishes (and markers the front end queued behind
    /// them), oldest first. Boxed: most sessions never have one.
    #[allow(clippy::box_collection, reason = "8 bytes instead of 32 in every session, most of which never hold one")]
    durable: Mutex<Option<Box<VecDeque<Durable>>>>,
    /// Whether `durable` holds a commit: set and cleared under its lock, read without it.
    durable_pending: AtomicBool,
    /// Whether its front end waits for the store before acknowledging (see
    /// [`Session::track_durable`]); commits of other sessions are not kept here.
    tracks_durable: bool,
    /// Where the router keeps its outbox for the broker's shutdown (32-bit: it fits the
    /// session's padding).
    live_slot: u32,
}

/// Subscribers and queues this session's publishes have filled up, and since when.
#[derive(Default)]
struct Congestion {
    waits: Vec<Congested>,
    since: Option<Instant>,
}

/// What a publisher waits for: a subscriber's outbox or a queue its publishes filled.
#[derive(Clone)]
pub(crate) enum Congested {
    /// An outbox past its capacity ([`PushOutcome::Congested`]).
    Outbox(Outbox),
    /// A queue past its mark ([`QueuePush::Congested`]).
    Queue(Arc<Queue>),
}

impl Congested {
    /// The subscriber's or the queue's id: one wait each, however many publishes filled it.
    fn id(&self) -> SessionId {
        match self {
            Congested::Outbox(outbox) => outbox.session(),
            Congested::Queue(queue) => queue.id(),
        }
    }

    async fn wait_for_room(&self) {
        match self {
            Congested::Outbox(outbox) => outbox.wait_for_room().await,
            Congested::Queue(queue) => queue.wait_for_room().await,
        }
    }

    fn give_up_waiting(&self) {
        match self {
            Congested::Outbox(outbox) => outbox.give_up_waiting(),
            Congested::Queue(queue) => queue.give_up_waiting(),
        }
    }
}

impl Session {
    /// The session's id (used as the owner of its subscriptions and for no-local).
    pub fn id(&self) -> SessionId {
        self.id
    }

    /// The router it belongs to.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// Where deliveries arrive.
    pub fn receiver(&self) -> &OutboxReceiver {
        &self.receiver
    }

    /// Asks for [`Wake::Alarm`](crate::Wake::Alarm) through this session's outbox one to two
    /// seconds before `at`, which is at least two seconds ahead, from the router's shared wheel
    /// ([`crate::alarm`]); an alarm filed before, still pending and no later, is kept. Whether
    /// it is filed: not outside a tokio runtime, where nothing raises one.
    pub(crate) fn file_alarm(&self, at: Instant) -> bool {
        let filed = self.receiver.alarm_filed();
        let Some(second) = self.router.0.alarms.file(self.live_slot, at, filed) else { return false };
        if second != filed {
            self.receiver.set_alarm_filed(second);
        }
        true
    }

    /// Puts the client's rights in force (at login, and again when a persistent session is
    /// resumed). Sessions start unrestricted: `None` is the broker without an access list.
    pub fn restrict(&mut self, rights: Rights) {
        self.rights = rights;
    }

    fn permits(&self, what: Denial, ask: impl FnOnce(&dyn Access) -> bool) -> bool {
        access::permits(&self.rights, &self.router.0.metrics, self.protocol, what, ask)
    }

    /// The per-message check for a subscription of this session, once `filter` is allowed.
    fn read_check(&self, filter: &str) -> Result<Option<ReadCheck>, SubscribeError> {
        topic::validate_filter(filter)?;
        if !self.permits(Denial::Subscribe, |a| a.may_subscribe(filter)) {
            return Err(SubscribeError::NotAuthorized(filter.to_owned()));
        }
        Ok(self.rights.clone().map(|access| ReadCheck { access, protocol: self.protocol }))
    }

    /// Whether the access list lets this session do any of `rights` to `resource` (declaring,
    /// for one, takes any right); a refusal is counted once. Bridge spools (`$bridge/…`) are
    /// refused to every client.
    pub fn may_use(&self, resource: Resource<'_>, rights: &[Right]) -> bool {
        let what = match resource {
            Resource::Queue(_) => Denial::Queue,
            Resource::Exchange(_) => Denial::Exchange,
        };
        if self.protocol != Protocol::Bridge
            && matches!(resource, Resource::Queue(name) if name.starts_with(SPOOL_PREFIX))
        {
            // A bridge's spool is the bridge's alone, access list or not.
            self.router.0.metrics.protocol(self.protocol).denied(what);
            return false;
        }
        self.permits(what, |a| rights.iter().any(|&right| a.may_use(resource, right)))
    }

    /// [`Session::may_use`] on a queue, as a [`QueueError`].
    pub fn check_queue(&self, name: &str, right: Right) -> Result<(), QueueError> {
        if self.may_use(Resource::Queue(name), &[right]) {
            Ok(())
        } else {
            Err(QueueError::NotAuthorized(name.to_owned()))
        }
    }

    /// Subscribes this session's outbox to `filter`, if its rights allow.
    pub fn subscribe(&self, filter: &str, tag: u64, options: SubscriptionOptions) -> Result<bool, SubscribeError> {
        let read_check = self.read_check(filter)?;
        let subscription =
            Subscription { owner: self.id, tag, options, target: Target::Outbox(self.receiver.outbox()), read_check };
        Ok(self.router.subscribe(filter, subscription)?)
    }

    /// Binds `queue` to `filter` for this session (AMQP `queue.bind` to `amq.topic`): it needs
    /// `write` on the queue (unless the queue is exclusive to this session) and the right to
    /// read the filter, and the binding delivers only what this session may read.
    pub fn bind_queue(&self, queue: &Arc<Queue>, filter: &str, tag: u64) -> Result<bool, SubscribeError> {
        let read_check = self.read_check(filter)?;
        let own = queue.options().exclusive_owner == Some(self.id);
        if !own && !self.may_use(Resource::Queue(queue.name()), &[Right::Write]) {
            return Err(SubscribeError::NotAuthorized(queue.name().to_owned()));
        }
        Ok(self.router.bind_checked(queue, filter, tag, read_check)?)
    }

    /// Retained messages matching `filter` that this session may read.
    pub fn retained(&self, filter: &str) -> Vec<Arc<Message>> {
        let mut retained = self.router.retained(filter);
        if let Some(access) = &self.rights {
            retained.retain(|m| access.may_read(&m.topic));
        }
        if let Some(transcoder) = self.receiver.transcoder() {
            for message in &mut retained {
                transcoder.apply_in_place(message, self.protocol);
            }
        }
        retained
    }

    /// Removes one of this session's subscriptions.
    pub fn unsubscribe(&self, filter: &str, tag: u64) -> bool {
        self.router.unsubscribe(self.id, filter, tag)
    }

    /// Becomes a consumer of `queue`; deliveries carry `tag` and a [`crate::QueueAck`].
    pub fn consume(&mut self, queue: &Arc<Queue>, credit: usize, max_qos: QoS, tag: u64) -> Result<(), QueueError> {
        // A queue exclusive to this session needs no rule: nobody else can reach it.
        if queue.options().exclusive_owner != Some(self.id) {
            self.check_queue(queue.name(), Right::Read)?;
        }
        if queue.options().exclusive_owner.is_some_and(|owner| owner != self.id) {
            return Err(QueueError::Locked(queue.name().to_owned()));
        }
        let options = crate::queue::ConsumerOptions { outbox: self.receiver.outbox(), credit, max_qos, tag };
        let id = queue.add_consumer(options);
        let held = self.consumers.iter().position(|(q, id, t)| Arc::ptr_eq(q, queue) && id.is_none() && *t == tag);
        match held {
            Some(i) => {
                // An offline member's hold becomes consuming again.
                self.consumers[i].1 = Some(id);
                queue.unhold();
            }
            None => self.consumers.push((queue.clone(), Some(id), tag)),
        }
        Ok(())
    }

    /// Stops consuming under `tag`; its unacknowledged messages go back to the queue. Returns
    /// whether such a consumer existed.
    pub fn cancel(&mut self, tag: u64) -> bool {
        let Some(index) = self.consumers.iter().position(|(_, _, t)| *t == tag) else { return false };
        let (queue, id, _) = self.consumers.swap_remove(index);
        self.leave(&queue, id);
        true
    }

    /// Ends one membership of `queue`: consuming (`Some`) or holding (`None`).
    fn leave(&self, queue: &Arc<Queue>, id: Option<crate::queue::ConsumerId>) {
        match id {
            Some(id) => drop(queue.remove_consumer(id)),
            None => queue.unhold(),
        }
        self.router.delete_if_abandoned(queue);
    }

    /// Stops consuming under `tag` but keeps the queue alive for this session, which will
    /// consume again under the same tag ([`Session::consume`], [`Session::join_shared`]): a
    /// persistent session going offline stays a member of its `$share` groups, whose other
    /// members get the messages meanwhile (its unacknowledged ones go back to the group), and
    /// whose queue keeps them while no member is connected.
    pub fn hold(&mut self, tag: u64) {
        for (queue, id, _) in self.consumers.iter_mut().filter(|(_, id, t)| *t == tag && id.is_some()) {
            queue.hold();
            if let Some(id) = id.take() {
                queue.remove_consumer(id);
            }
        }
    }

    /// Changes the credit of the consumer under `tag`.
    pub fn set_credit(&self, tag: u64, credit: usize) {
        for (queue, id, _) in self.consumers.iter().filter(|(_, _, t)| *t == tag) {
            if let Some(id) = id {
                queue.set_credit(*id, credit);
            }
        }
    }

    /// Joins the MQTT-style shared subscription `group` on `filter` (`$share/group/filter`):
    /// the group is a queue named after it, bound to the filter, and each member a consumer.
    pub fn join_shared(
        &mut self,
        group: &str,
        filter: &str,
        credit: usize,
        max_qos: QoS,
        tag: u64,
    ) -> Result<(), SharedError> {
        let queue = self.group(group, filter)?;
        self.consume(&queue, credit, max_qos, tag)?;
        Ok(())
    }

    /// Becomes a member of the shared subscription `group` on `filter` that does not consume
    /// yet ([`Session::hold`]): a persistent session restored at start, waiting for its client.
    pub fn hold_shared(&mut self, group: &str, filter: &str, tag: u64) -> Result<(), SharedError> {
        let queue = self.group(group, filter)?;
        queue.hold();
        self.consumers.push((queue, None, tag));
        Ok(())
    }

    /// The queue of a shared subscription group, made on first use and bound to its filter. It
    /// is durable when the member making it has a persistent session kept in the store: the
    /// group, its binding and its at-least-once messages then outlive the broker.
    fn group(&self, group: &str, filter: &str) -> Result<Arc<Queue>, SharedError> {
        let read_check = self.read_check(filter)?;
        let name = format!("{SHARED_PREFIX}{group}/{filter}");
        self.check_queue(&name, Right::Read)?;
        if let Some(queue) = self.router.queue(&name) {
            return Ok(queue);
        }
        let durable = self.receiver.keeper().is_some();
        let options = QueueOptions { auto_delete: true, durable, ..QueueOptions::default() };
        match self.router.insert_queue(&name, options) {
            Ok((queue, created)) => {
                if created {
                    // Binding it writes a durable one's record.
                    self.router.bind_checked(&queue, filter, 0, read_check).map_err(SubscribeError::from)?;
                }
                Ok(queue)
            }
            // Made meanwhile by a member of the other kind (persistent or not): join that one.
            Err(QueueError::OptionsDiffer(_)) => Ok(self.router.queue(&name).ok_or(QueueError::OptionsDiffer(name))?),
            Err(e) => Err(e.into()),
        }
    }

    /// Publishes through the router. When a subscriber's outbox is full, the delivery is still
    /// queued (up to twice its limits) and the session becomes congested: its connection should
    /// stop reading until [`Session::relieve_congestion`] returns.
    pub fn publish(&self, message: Arc<Message>) -> PublishOutcome {
        let mut durable = None;
        let mut outcome = self.publish_into(message, &mut durable);
        if let Some(durable) = durable.filter(|_| self.tracks_durable) {
            outcome.durable = true;
            self.await_durable(durable);
        }
        outcome
    }

    /// [`Session::publish`], leaving the store commit of what it kept in `durable` rather
    /// than awaiting it: for a front end that gathers one message's commits from several
    /// routes (AMQP exchanges) and awaits only the last.
    pub fn publish_into(&self, message: Arc<Message>, durable: &mut Option<Durable>) -> PublishOutcome {
        if !self.permits(Denial::Publish, |a| a.may_publish(&message.topic)) {
            return PublishOutcome { not_authorized: true, ..PublishOutcome::default() };
        }
        let mut congested = Vec::new();
        let outcome = self.router.route(message, &mut congested, durable);
        for wait in congested {
            self.wait_for(wait);
        }
        outcome
    }

    /// Holds this session's publishes back for `queue`, which a push of its own (outside
    /// [`Session::publish`]: an AMQP exchange, a STOMP `/queue/`) found past its mark.
    pub fn congested_by(&self, queue: &Arc<Queue>) {
        self.wait_for(Congested::Queue(queue.clone()));
    }

    /// Adds `wait` to what this session's publishes wait for, once. Not a queue this session
    /// consumes from itself: its connection would stop reading the acknowledgements that drain
    /// it (AMQP reads nothing while held back), so such a publisher is refused at the queue's
    /// limit instead, as before queues held anyone back.
    fn wait_for(&self, wait: Congested) {
        if let Congested::Queue(queue) = &wait
            && self.consumers.iter().any(|(q, id, _)| id.is_some() && Arc::ptr_eq(q, queue))
        {
            return;
        }
        let mut congestion = self.congestion.lock().unwrap_or_else(|e| e.into_inner());
        let congestion = congestion.get_or_insert_default();
        if !congestion.waits.iter().any(|w| w.id() == wait.id()) {
            congestion.waits.push(wait);
            self.congested.store(true, Ordering::Release);
        }
    }

    /// Makes this session's publishes report their store commits
    /// ([`crate::PublishOutcome::durable`], [`Session::poll_durable`]), for a front end that
    /// acknowledges a publish only once it is on disk. Others never hold commits.
    pub fn track_durable(&mut self) {
        self.tracks_durable = true;
    }

    /// Queues `durable` behind this session's pending commits: a front end whose protocol
    /// acknowledges in order (MQTT) queues an already-durable marker ([`Durable::ready`]) for a
    /// publish that kept nothing while earlier ones are still being written.
    pub fn await_durable(&self, durable: Durable) {
        let mut pending = self.durable.lock().unwrap_or_else(|e| e.into_inner());
        pending.get_or_insert_default().push_back(durable);
        self.durable_pending.store(true, Ordering::Release);
    }

    /// Forgets the pending commits (they go on in the store): a persistent session resumed by
    /// a new connection has none of the old connection's acknowledgements to send.
    pub fn forget_durable(&self) {
        let mut pending = self.durable.lock().unwrap_or_else(|e| e.into_inner());
        *pending = None;
        self.durable_pending.store(false, Ordering::Release);
    }

    /// Whether commits are pending (the connection driver then polls [`Session::poll_durable`]).
    pub fn has_pending_durable(&self) -> bool {
        self.durable_pending.load(Ordering::Acquire)
    }

    /// The outcome of the oldest pending commit, once it has one.
    pub fn poll_durable(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), StoreError>> {
        let mut pending = self.durable.lock().unwrap_or_else(|e| e.into_inner());
        let Some(queue) = pending.as_mut() else { return std::task::Poll::Pending };
        let Some(front) = queue.front_mut() else { return std::task::Poll::Pending };
        let result = std::task::ready!(std::pin::Pin::new(front).poll(cx));
        queue.pop_front();
        if queue.is_empty() {
            *pending = None;
            self.durable_pending.store(false, Ordering::Release);
        }
        std::task::Poll::Ready(result)
    }

    /// Keeps this session in the store as `name` ([`record::session_key`]) from now on, if the
    /// store is on: its at-least-once deliveries are written as they are routed (so that the
    /// publisher's acknowledgement waits for them) until [`Session::settled`]. `next_seq`
    /// follows the deliveries a restored session already has (1 for a new one). Returns the
    /// keeper, through which the front end writes the session's record.
    pub fn keep_in_store(&self, name: String, next_seq: u64) -> Option<Arc<SessionKeeper>> {
        if let Some(keeper) = self.receiver.keeper() {
            return Some(keeper.clone());
        }
        let store = self.router.0.store.get()?.clone();
        let keeper = Arc::new(SessionKeeper::new(store, name, next_seq));
        self.receiver.keep_with(keeper.clone());
        Some(keeper)
    }

    /// The keeper of a session kept in the store.
    pub fn keeper(&self) -> Option<&Arc<SessionKeeper>> {
        self.receiver.keeper()
    }

    /// The client acknowledged `delivery` (or it was given up): a kept one is deleted.
    pub fn settled(&self, delivery: &Delivery) {
        if let Some(keeper) = self.receiver.keeper() {
            keeper.forget(delivery.stored);
        }
    }

    /// Whether a subscriber of this session's publishes has a full outbox, or a queue it
    /// publishes to is past its mark: stop reading from the publisher and await
    /// [`Session::relieve_congestion`].
    pub fn is_congesting(&self) -> bool {
        self.congested.load(Ordering::Acquire)
    }

    /// Waits until every subscriber this session congested has room again, for at most the
    /// router's `slow_consumer_grace` from when the congestion began. Subscribers still full
    /// then with at-least-once deliveries are slow consumers (their connections close); those
    /// with at-most-once ones only lose what comes beyond their limits until they have room
    /// ([`crate::Outbox::give_up_waiting`]); queues still past their mark refuse what exceeds
    /// their limits ([`Queue::give_up_waiting`]). Cancel-safe: the deadline is kept, so calling
    /// it again in a `select!` loop continues the same wait.
    pub async fn relieve_congestion(&self) {
        let (waits, since) = {
            let mut congestion = self.congestion.lock().unwrap_or_else(|e| e.into_inner());
            let Some(congestion) = congestion.as_mut() else { return };
            let since = *congestion.since.get_or_insert_with(Instant::now);
            (congestion.waits.clone(), since)
        };
        let deadline = tokio::time::Instant::from_std(since + self.router.0.config.slow_consumer_grace);
        for wait in &waits {
            if tokio::time::timeout_at(deadline, wait.wait_for_room()).await.is_err() {
                wait.give_up_waiting();
            }
        }
        let mut congestion = self.congestion.lock().unwrap_or_else(|e| e.into_inner());
        let Some(left) = congestion.as_mut() else { return };
        left.waits.retain(|w| !waits.iter().any(|done| done.id() == w.id()));
        if left.waits.is_empty() {
            *congestion = None;
            self.congested.store(false, Ordering::Release);
        }
    }

    /// The protocol this session speaks.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }
}

/// Why joining a shared subscription failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SharedError {
    /// The filter is invalid, or the client may not read it.
    #[error(transparent)]
    Subscribe(#[from] SubscribeError),
    /// The group's queue could not be used.
    #[error(transparent)]
    Queue(#[from] QueueError),
}

impl Drop for Session {
    fn drop(&mut self) {
        self.router.0.live.remove(self.live_slot);
        self.router.unsubscribe_all(self.id);
        // A session kept in the store that has not ended goes only with the process: the
        // durable groups it is a member of stay for it (it is restored a member).
        let outlives = self.receiver.keeper().is_some_and(|k| !k.has_ended());
        for (queue, id, _) in std::mem::take(&mut self.consumers) {
            match id {
                Some(id) if outlives && queue.is_stored() => drop(queue.remove_consumer(id)),
                None if outlives && queue.is_stored() => {}
                _ => self.leave(&queue, id),
            }
        }
        self.router.delete_exclusive_queues(self.id);
    }
}
