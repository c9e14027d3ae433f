//! This node's side of the cluster: one NATS connection at a time, made again after a failure
//! with backoff, moving messages between NATS and the router. See the crate documentation.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::{self, consumer, stream};
use async_nats::{HeaderMap, ServerAddr};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tolk_bridge::{AwaitingStore, Backoff, Spool, settle};
use tolk_core::frontend::FrontEndContext;
use tolk_core::interest::InterestWatch;
use tolk_core::store::record;
use tolk_core::{
    ClusterCounters, Delivery, Hop, Message, Protocol, QoS, QueueOptions, Router, Session, SubscriptionOptions,
};

use crate::config::ClusterConfig;
use crate::{cover, subject};

/// The header naming the node a message was published on.
const NODE_HEADER: &str = "Tolk-Node";
/// The header with the publish time on that node, in microseconds since the Unix epoch.
const TIME_HEADER: &str = "Tolk-Time";
/// The header a key-value bucket marks deletes with.
const KV_OPERATION: &str = "KV-Operation";

/// A message from NATS, by where it came from.
enum Arrival {
    /// Core NATS (at most once).
    Core(async_nats::Message),
    /// This node's JetStream consumer (at least once).
    Stream(jetstream::Message),
    /// The retained bucket.
    Retained(jetstream::Message),
}

/// An at-least-once send in flight: the delivery, and how JetStream answered.
type Sending = BoxFuture<'static, (Delivery, Result<(), String>)>;

/// The node: its session in the router, its outgoing queue, and its counters.
pub(crate) struct Node {
    config: Arc<ClusterConfig>,
    node: Arc<str>,
    router: Router,
    session: Session,
    spool: Spool,
    counters: Arc<ClusterCounters>,
    interest: InterestWatch,
    shutdown: CancellationToken,
    /// NATS servers learnt from the ones configured, for the next connection.
    discovered: Vec<String>,
    /// Tells apart this process's message ids from an earlier one's.
    boot: (Instant, u128),
    up: bool,
    last_error: Option<String>,
}

impl Node {
    /// Declares `$cluster/out`, bound to every topic, and starts counting local interest.
    pub(crate) fn open(ctx: &FrontEndContext, config: Arc<ClusterConfig>, node: Arc<str>) -> Result<Node, String> {
        let router = ctx.router.clone();
        let session = router.open_session(Protocol::Cluster);
        let options = QueueOptions {
            max_length: usize::MAX,
            max_length_bytes: config.spool_max_bytes,
            durable: true,
            at_most_once_needs_consumer: true,
            confirms: true,
            ..QueueOptions::default()
        };
        let (queue, _) = router.declare_queue("$cluster/out", options).map_err(|e| e.to_string())?;
        let bindings = SubscriptionOptions { not_from: Some(session.id()), ..SubscriptionOptions::default() };
        router.bind_queue_with(&queue, "#", 0, bindings).map_err(|e| e.to_string())?;
        let interest = router.watch_interest(queue.id());
        let spool = Spool::new(queue);
        let counters = router.metrics().register_cluster(&node);
        let _ = counters.spool.set(spool.gauge());
        let queues = router.clone();
        let _ = counters.local_queues.set(Box::new(move || queues.client_queue_count() as u64));
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
        Ok(Node {
            config,
            node,
            router,
            session,
            spool,
            counters,
            interest,
            shutdown: ctx.shutdown.clone(),
            discovered: Vec::new(),
            boot: (Instant::now(), wall),
            up: false,
            last_error: None,
        })
    }

    /// Connects, moves messages, and connects again after a failure, until the broker stops.
    pub(crate) async fn run(mut self) {
        let mut backoff = Backoff::new(self.config.reconnect_min, self.config.reconnect_max);
        loop {
            let Some(reason) = self.connection(&mut backoff).await else { return };
            self.down(&reason);
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(backoff.next_wait()) => {}
            }
        }
    }

    /// Connected, with the stream, bucket and consumer in place: sending starts, and
    /// publishers are acknowledged once JetStream has their message.
    fn up(&mut self) {
        if !self.up {
            tracing::info!(node = %self.node, "cluster up");
        }
        self.up = true;
        self.last_error = None;
        self.counters.up.store(true, Relaxed);
        self.counters.connects.fetch_add(1, Relaxed);
        *self.counters.last_error.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.spool.queue().set_confirming(true);
        self.spool.start(&mut self.session, usize::from(self.config.max_inflight));
    }

    /// NATS is away: routing is local only, at-least-once messages wait in `$cluster/out`,
    /// and their publishers are acknowledged as soon as they are kept here.
    fn down(&mut self, reason: &str) {
        if self.up || self.last_error.as_deref() != Some(reason) {
            tracing::warn!(node = %self.node, reason, "cluster down: routing locally, spooling for NATS");
        }
        self.up = false;
        self.last_error = Some(reason.to_owned());
        self.counters.up.store(false, Relaxed);
        self.counters.subjects.store(0, Relaxed);
        *self.counters.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.to_owned());
        self.spool.stop(&mut self.session);
        self.spool.queue().set_confirming(false);
    }

    fn connect_options(&self, events: mpsc::Sender<async_nats::Event>) -> async_nats::ConnectOptions {
        let config = &self.config;
        let mut options = async_nats::ConnectOptions::new()
            .name(format!("tolk-{}", self.node))
            .no_echo()
            .connection_timeout(Duration::from_secs(5))
            .event_callback(move |event| {
                let events = events.clone();
                async move {
                    let _ = events.try_send(event);
                }
            });
        if let (Some(user), Some(password)) = (&config.user, &config.password) {
            options = options.user_and_password(user.clone(), password.clone());
        }
        if let Some(token) = &config.token {
            options = options.token(token.clone());
        }
        if let Some(ca) = &config.ca_file {
            options = options.add_root_certificates(ca.clone());
        }
        if let (Some(cert), Some(key)) = (&config.cert_file, &config.key_file) {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        if config.nats_urls.iter().any(|u| u.starts_with("tls://")) {
            options = options.require_tls(true);
        }
        options
    }

    /// The configured servers, then the ones learnt from them.
    fn servers(&self) -> Result<Vec<ServerAddr>, String> {
        let urls = self.config.nats_urls.iter().chain(&self.discovered);
        urls.map(|u| u.parse::<ServerAddr>().map_err(|e| format!("nats url {u:?}: {e}"))).collect()
    }

    /// One connection: returns why it ended, or `None` when the broker stops.
    async fn connection(&mut self, backoff: &mut Backoff) -> Option<String> {
        let (events_tx, events) = mpsc::channel(64);
        let servers = match self.servers() {
            Ok(servers) => servers,
            Err(reason) => return Some(reason),
        };
        let connect = self.connect_options(events_tx).connect(servers);
        let client = tokio::select! {
            _ = self.shutdown.cancelled() => return None,
            client = connect => match client {
                Ok(client) => client,
                Err(e) => return Some(format!("cannot reach NATS: {e}")),
            },
        };
        self.learn_servers(&client);
        let info = client.server_info();
        *self.counters.server.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(format!("{} {}:{}", info.server_name, info.host, info.port));
        let reason = self.serve(&client, events, backoff).await;
        *self.counters.server.lock().unwrap_or_else(|e| e.into_inner()) = None;
        // The NATS cluster tells of its servers as they join: remember them for the next time.
        self.learn_servers(&client);
        reason
    }

    /// Adds the servers `client` has heard of to those tried next time.
    fn learn_servers(&mut self, client: &async_nats::Client) {
        let scheme = if self.config.nats_urls.iter().all(|u| u.starts_with("tls://")) { "tls" } else { "nats" };
        for url in client.server_info().connect_urls {
            let url = format!("{scheme}://{url}");
            if !self.config.nats_urls.contains(&url) && !self.discovered.contains(&url) {
                self.discovered.push(url);
            }
        }
    }

    /// Sets up the stream, the bucket and the consumer on a connection, then moves messages
    /// until it fails (`Some(reason)`) or the broker stops (`None`).
    async fn serve(
        &mut self,
        client: &async_nats::Client,
        mut events: mpsc::Receiver<async_nats::Event>,
        backoff: &mut Backoff,
    ) -> Option<String> {
        let js = jetstream::ContextBuilder::new().timeout(self.config.ack_timeout).build(client.clone());
        let names = Names::new(&self.config.prefix);
        // The servers of the NATS cluster, this one among them.
        let servers = client.server_info().connect_urls.len();
        let setup = async {
            let stream = ensure_stream(&js, names.stream_config(&self.config, servers)).await?;
            let bucket = ensure_stream(&js, names.bucket_config(&self.config, servers)).await?;
            let retained = bucket
                .create_consumer(consumer::pull::OrderedConfig {
                    filter_subject: format!("{}.>", names.bucket_subjects),
                    deliver_policy: consumer::DeliverPolicy::LastPerSubject,
                    ..Default::default()
                })
                .await
                .map_err(|e| e.to_string())?
                .messages()
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((stream, retained))
        };
        let (stream, mut retained) = tokio::select! {
            _ = self.shutdown.cancelled() => return None,
            done = setup => match done {
                Ok(done) => done,
                Err(e) => return Some(format!("JetStream set-up failed: {e}")),
            },
        };

        let mut wanted: Vec<String> = Vec::new();
        let mut core_subs: HashMap<String, AbortHandle> = HashMap::new();
        let mut core_tasks = JoinSet::new();
        let (core_tx, mut core_rx) = mpsc::channel::<async_nats::Message>(1024);
        let mut consumer: Option<Consumer> = None;
        let mut sending: FuturesUnordered<Sending> = FuturesUnordered::new();
        let mut awaiting_store: AwaitingStore<jetstream::Message> = AwaitingStore::default();
        let max_inflight = usize::from(self.config.max_inflight);
        let mut interest_changed = true;
        self.up();
        backoff.reset();

        loop {
            if interest_changed {
                interest_changed = false;
                let filters = cover::cover(&self.router.interest());
                if filters != wanted {
                    wanted = filters;
                    if let Err(e) = self
                        .follow_interest(
                            client,
                            &stream,
                            &names,
                            &wanted,
                            &mut core_subs,
                            &mut core_tasks,
                            &core_tx,
                            &mut consumer,
                        )
                        .await
                    {
                        return Some(e);
                    }
                }
            }
            let arrival = tokio::select! {
                _ = self.shutdown.cancelled() => return None,
                Some(event) = events.recv() => match event {
                    async_nats::Event::Disconnected => return Some("disconnected from NATS".into()),
                    async_nats::Event::Closed => return Some("the NATS connection closed".into()),
                    async_nats::Event::ServerError(e) => {
                        tracing::warn!(node = %self.node, error = %e, "NATS server error");
                        continue;
                    }
                    _ => continue,
                },
                _ = self.interest.changed() => {
                    interest_changed = true;
                    continue;
                }
                delivery = self.spool.next(&self.session), if sending.len() < max_inflight => {
                    match self.send(client, &js, &names, delivery).await {
                        Ok(Some(pending)) => sending.push(pending),
                        Ok(None) => {}
                        Err(reason) => return Some(reason),
                    }
                    continue;
                }
                Some((delivery, result)) = sending.next() => {
                    if let Err(reason) = result {
                        return Some(reason);
                    }
                    self.sent(&delivery);
                    continue;
                }
                (result, message) = awaiting_store.next() => {
                    if let Err(e) = result {
                        return Some(format!("a message from the cluster could not be stored here ({e}); JetStream will send it again"));
                    }
                    // Lost acknowledgements come back as redeliveries, which at-least-once allows.
                    let _ = message.ack().await;
                    continue;
                }
                Some(message) = core_rx.recv() => Arrival::Core(message),
                Some(message) = next_of(&mut consumer) => match message {
                    Ok(message) => Arrival::Stream(message),
                    Err(e) if e.kind() == consumer::pull::MessagesErrorKind::MissingHeartbeat => {
                        // Its pull request went with a NATS server: ask again.
                        if let Some(consumer) = &mut consumer
                            && let Err(e) = consumer.pull_again().await
                        {
                            return Some(e);
                        }
                        continue;
                    }
                    Err(e) => return Some(format!("JetStream consumer: {e}")),
                },
                Some(message) = retained.next() => match message {
                    Ok(message) => Arrival::Retained(message),
                    Err(e) => return Some(format!("retained bucket: {e}")),
                },
            };
            match arrival {
                Arrival::Core(message) => {
                    let _ = self.take_in(&message);
                }
                Arrival::Stream(message) => {
                    if let Ok(info) = message.info() {
                        self.counters.lag.store(info.pending, Relaxed);
                    }
                    match self.take_in(&message) {
                        Taken::Published(durable) => awaiting_store.push(durable, message),
                        Taken::Skipped => {
                            let _ = message.ack().await;
                        }
                        Taken::Full => {
                            let _ = message.ack_with(jetstream::AckKind::Nak(Some(Duration::from_secs(1)))).await;
                        }
                    }
                }
                Arrival::Retained(message) => self.take_retained(&names, &message),
            }
        }
    }

    /// Subscribes in NATS to `wanted`: core subscriptions for it, and the consumer's filter
    /// subjects.
    #[allow(clippy::too_many_arguments)]
    async fn follow_interest(
        &self,
        client: &async_nats::Client,
        stream: &stream::Stream,
        names: &Names,
        wanted: &[String],
        core_subs: &mut HashMap<String, AbortHandle>,
        core_tasks: &mut JoinSet<()>,
        core_tx: &mpsc::Sender<async_nats::Message>,
        consumer: &mut Option<Consumer>,
    ) -> Result<(), String> {
        let core: HashSet<String> = wanted.iter().flat_map(|f| subject::of_filter(&names.core, f)).collect();
        core_subs.retain(|subject, task| {
            let keep = core.contains(subject);
            if !keep {
                // Dropping the subscriber unsubscribes.
                task.abort();
            }
            keep
        });
        for subject in core {
            if core_subs.contains_key(&subject) {
                continue;
            }
            let mut subscriber = client.subscribe(subject.clone()).await.map_err(|e| format!("NATS subscribe: {e}"))?;
            let tx = core_tx.clone();
            let task = core_tasks.spawn(async move {
                while let Some(message) = subscriber.next().await {
                    if tx.send(message).await.is_err() {
                        return;
                    }
                }
            });
            core_subs.insert(subject, task);
        }
        let mut filters: Vec<String> = wanted.iter().flat_map(|f| subject::of_filter(&names.stream, f)).collect();
        if filters.is_empty() {
            // A consumer without filters would take everything: this subject no topic maps to
            // keeps it idle.
            filters.push(format!("{}.%none", names.stream));
        }
        self.counters.subjects.store(core_subs.len() as u64, Relaxed);
        let config = consumer::pull::Config {
            durable_name: Some(format!("tolk-{}", self.node)),
            filter_subjects: filters,
            ack_policy: consumer::AckPolicy::Explicit,
            deliver_policy: consumer::DeliverPolicy::New,
            // What was on its way to this node when a NATS server died comes again after this.
            ack_wait: Duration::from_secs(10),
            max_ack_pending: i64::from(self.config.max_inflight) * 4,
            // A node away for longer than the stream keeps messages has nothing to resume.
            inactive_threshold: self.config.max_age,
            ..Default::default()
        };
        let handle = stream.create_consumer(config).await.map_err(|e| format!("JetStream consumer: {e}"))?;
        if consumer.is_none() {
            let mut fresh = Consumer { handle, messages: None };
            fresh.pull_again().await?;
            *consumer = Some(fresh);
        }
        tracing::debug!(node = %self.node, filters = ?wanted, "cluster interest");
        Ok(())
    }

    /// Sends one message from `$cluster/out`: at most once on core NATS (settled at once),
    /// at least once to the stream (settled when JetStream acknowledges: the returned send).
    async fn send(
        &self,
        client: &async_nats::Client,
        js: &jetstream::Context,
        names: &Names,
        delivery: Delivery,
    ) -> Result<Option<Sending>, String> {
        let message = delivery.message.clone();
        let headers = self.headers(&message);
        let payload = Bytes::from(record::encode_message(&message));
        let retained = message.retain.then(|| self.retained_update(js, names, &message, payload.clone()));
        if message.qos == QoS::AtMostOnce {
            let subject = subject::of_topic(&names.core, &message.topic);
            client.publish_with_headers(subject, headers, payload).await.map_err(|e| format!("NATS publish: {e}"))?;
            let Some(retained) = retained else {
                self.sent(&delivery);
                return Ok(None);
            };
            return Ok(Some(Box::pin(async move { (delivery, retained.await) })));
        }
        let mut headers = headers;
        headers.insert("Nats-Msg-Id", self.message_id(&message).as_str());
        let subject = subject::of_topic(&names.stream, &message.topic);
        let ack =
            js.publish_with_headers(subject, headers, payload).await.map_err(|e| format!("JetStream publish: {e}"))?;
        Ok(Some(Box::pin(async move {
            let mut result = ack.await.map(drop).map_err(|e| format!("JetStream did not take a message: {e}"));
            if let (Ok(()), Some(retained)) = (&result, retained) {
                result = retained.await;
            }
            (delivery, result)
        })))
    }

    /// Sets (or, empty, deletes) the topic's value in the retained bucket.
    fn retained_update(
        &self,
        js: &jetstream::Context,
        names: &Names,
        message: &Message,
        payload: Bytes,
    ) -> BoxFuture<'static, Result<(), String>> {
        let subject = subject::of_topic(&names.bucket_subjects, &message.topic);
        let mut headers = self.headers(message);
        let payload = if message.payload.is_empty() {
            headers.insert(KV_OPERATION, "DEL");
            Bytes::new()
        } else {
            payload
        };
        let js = js.clone();
        Box::pin(async move {
            let ack = js
                .publish_with_headers(subject, headers, payload)
                .await
                .map_err(|e| format!("retained bucket: {e}"))?;
            ack.await.map(drop).map_err(|e| format!("retained bucket: {e}"))
        })
    }

    /// A message left for NATS: settled (its publisher acknowledged), counted and timed.
    fn sent(&self, delivery: &Delivery) {
        settle(delivery);
        self.counters.messages_out.fetch_add(1, Relaxed);
        let metrics = self.router.metrics();
        metrics.protocol(Protocol::Cluster).messages_out.fetch_add(1, Relaxed);
    }

    fn headers(&self, message: &Message) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(NODE_HEADER, &*self.node);
        let age = message.received_at.elapsed();
        let published = SystemTime::now().checked_sub(age).unwrap_or(UNIX_EPOCH);
        let micros = published.duration_since(UNIX_EPOCH).unwrap_or_default().as_micros();
        headers.insert(TIME_HEADER, micros.to_string().as_str());
        headers
    }

    /// An id JetStream deduplicates a resent message by: this node, this process, and the
    /// message's arrival here.
    fn message_id(&self, message: &Arc<Message>) -> String {
        let (boot, wall) = self.boot;
        let arrival = message.received_at.saturating_duration_since(boot).as_nanos();
        format!("{}-{wall}-{arrival}-{:x}", self.node, Arc::as_ptr(message) as usize)
    }

    /// Publishes here what another node sent.
    fn take_in(&self, nats: &async_nats::Message) -> Taken {
        let headers = nats.headers.as_ref();
        let from = headers.and_then(|h| h.get(NODE_HEADER)).map(|v| v.as_str());
        if from == Some(&*self.node) {
            return Taken::Skipped;
        }
        let Some(mut message) = self.decode(nats) else { return Taken::Skipped };
        message.origin.session = self.session.id();
        let protocol = message.origin.protocol;
        self.router.metrics().record(Hop::Cluster, protocol, Protocol::Cluster, message.received_at.elapsed());
        self.counters.messages_in.fetch_add(1, Relaxed);
        self.router.metrics().protocol(Protocol::Cluster).messages_in.fetch_add(1, Relaxed);
        let mut durable = None;
        let outcome = self.session.publish_into(Arc::new(message), &mut durable);
        if outcome.memory_full || outcome.refused > 0 {
            return Taken::Full;
        }
        Taken::Published(durable)
    }

    /// A message as the other node encoded it, its arrival time set back by how long ago it
    /// was published there.
    fn decode(&self, nats: &async_nats::Message) -> Option<Message> {
        let mut message = match record::decode_message(&nats.payload) {
            Ok(Some(message)) => message,
            // Expired on the way.
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(node = %self.node, subject = %nats.subject, error = %e, "a cluster message that is not tolk's; dropped");
                return None;
            }
        };
        let published =
            nats.headers.as_ref().and_then(|h| h.get(TIME_HEADER)).and_then(|v| v.as_str().parse::<u64>().ok());
        if let Some(micros) = published {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
            let age = now.saturating_sub(Duration::from_micros(micros));
            message.received_at = Instant::now().checked_sub(age).unwrap_or(message.received_at);
        }
        Some(message)
    }

    /// Keeps here what another node retained (or deleted) in the bucket.
    fn take_retained(&self, names: &Names, nats: &jetstream::Message) {
        let headers = nats.headers.as_ref();
        let own = headers.and_then(|h| h.get(NODE_HEADER)).is_some_and(|v| v.as_str() == &*self.node);
        if own && let Some(topic) = subject::to_topic(&names.bucket_subjects, &nats.subject) {
            // This node's own value, already kept here when it was published; only a node
            // that lost it (restarted without the store) takes it back.
            if !self.router.retained(&topic).is_empty() {
                return;
            }
        }
        let deleted = headers.and_then(|h| h.get(KV_OPERATION)).is_some();
        let message = if deleted {
            let Some(topic) = subject::to_topic(&names.bucket_subjects, &nats.subject) else { return };
            let origin =
                tolk_core::Origin { protocol: Protocol::Cluster, session: self.session.id(), client_id: "".into() };
            let mut cleared = Message::new(topic, Bytes::new(), origin);
            cleared.retain = true;
            cleared
        } else {
            let Some(message) = self.decode(nats) else { return };
            message
        };
        self.router.retain_only(&Arc::new(message));
    }
}

/// The stream `wanted` names, made if missing. One made with fewer replicas than wanted now (by
/// a node that connected before the NATS cluster had formed, or before a server was added) is
/// scaled up, as `nats stream edit --replicas` would: a stream never scales down on its own.
async fn ensure_stream(js: &jetstream::Context, wanted: stream::Config) -> Result<stream::Stream, String> {
    let mut stream = js.get_or_create_stream(wanted.clone()).await.map_err(|e| e.to_string())?;
    let have = stream.cached_info().config.clone();
    if have.num_replicas < wanted.num_replicas {
        let name = &wanted.name;
        let scaled = stream::Config { num_replicas: wanted.num_replicas, ..have };
        match js.update_stream(&scaled).await {
            Ok(_) => {
                tracing::info!(stream = %name, replicas = wanted.num_replicas, "cluster: stream scaled up");
                stream = js.get_stream(name).await.map_err(|e| e.to_string())?;
            }
            Err(e) => {
                tracing::warn!(stream = %name, "cluster: cannot scale the stream up to {} replicas: {e}", wanted.num_replicas)
            }
        }
    }
    Ok(stream)
}

/// What became of a message from another node.
enum Taken {
    /// Published here; acknowledge it to JetStream once this commit is durable.
    Published(Option<tolk_core::store::Durable>),
    /// This node's own, or not tolk's: nothing to do here.
    Skipped,
    /// The broker cannot take it now: JetStream sends it again later.
    Full,
}

/// This node's durable consumer, and its stream of pulled messages.
struct Consumer {
    handle: consumer::Consumer<consumer::pull::Config>,
    messages: Option<consumer::pull::Stream>,
}

impl Consumer {
    /// Starts pulling, again after the pull request was lost with a NATS server: heartbeats
    /// every 2 s tell within seconds, where the client's default takes 30.
    async fn pull_again(&mut self) -> Result<(), String> {
        let pull = self.handle.stream().heartbeat(Duration::from_secs(2)).expires(Duration::from_secs(10));
        self.messages = Some(pull.messages().await.map_err(|e| format!("JetStream consumer: {e}"))?);
        Ok(())
    }
}

/// The next message of the consumer, once there is one.
async fn next_of(consumer: &mut Option<Consumer>) -> Option<Result<jetstream::Message, consumer::pull::MessagesError>> {
    match consumer.as_mut().and_then(|c| c.messages.as_mut()) {
        Some(messages) => messages.next().await,
        None => std::future::pending().await,
    }
}

/// The subjects and names a cluster uses, from its prefix.
struct Names {
    core: String,
    stream: String,
    stream_name: String,
    bucket_name: String,
    bucket_subjects: String,
}

impl Names {
    fn new(prefix: &str) -> Names {
        let bucket = format!("{prefix}_retained");
        Names {
            core: format!("{prefix}.0"),
            stream: format!("{prefix}.1"),
            stream_name: prefix.to_uppercase(),
            bucket_name: format!("KV_{bucket}"),
            bucket_subjects: format!("$KV.{bucket}"),
        }
    }

    fn stream_config(&self, config: &ClusterConfig, servers: usize) -> stream::Config {
        stream::Config {
            name: self.stream_name.clone(),
            subjects: vec![format!("{}.>", self.stream)],
            num_replicas: config.replicas(servers),
            max_age: config.max_age,
            max_bytes: config.stream_max_bytes,
            storage: stream::StorageType::File,
            discard: stream::DiscardPolicy::Old,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        }
    }

    /// The stream a key-value bucket is (what `nats kv` makes), so that NATS tools read it.
    fn bucket_config(&self, config: &ClusterConfig, servers: usize) -> stream::Config {
        stream::Config {
            name: self.bucket_name.clone(),
            subjects: vec![format!("{}.>", self.bucket_subjects)],
            num_replicas: config.replicas(servers),
            max_messages_per_subject: 1,
            storage: stream::StorageType::File,
            discard: stream::DiscardPolicy::New,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            ..Default::default()
        }
    }
}
