//! What a bridge kind is handed: the bridge's side of the router. It sends what the spool
//! holds, publishes what the remote sends, and reports whether the remote is up.
//!
//! Out: a durable core queue, `$bridge/<name>` (the spool), is bound to the local side of every
//! `out` rule. It keeps at-least-once messages on disk while the remote is away, within
//! `spool_max_bytes`, and drops at-most-once ones while nobody consumes (counted as
//! `remote_down`). While connected, the kind consumes from it with `max_inflight` credit and
//! settles each message once the remote has acknowledged it; what was not acknowledged when the
//! connection ended goes back to the front of the spool and is sent again.
//!
//! Loops: the spool's bindings leave out what this bridge published itself and what has
//! crossed `hop_limit` bridges already; what leaves carries this node on its path, and what
//! comes in carries the remote's name ([`crate::path`](tolk_core::path)).

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;
use tolk_core::frontend::FrontEndContext;
use tolk_core::store::Durable;
use tolk_core::{
    BridgeCounters, Delivery, Hop, Message, Origin, Properties, Protocol, QoS, Queue, QueueOptions, Router, Session,
    SubscriptionOptions, path,
};

use crate::backoff::Backoff;
use crate::config::{BridgeConfig, ConfigError};
use crate::rule::TopicRule;
use crate::spool::{Spool, settle};

/// A message to send to the remote.
pub struct Outbound {
    /// The remote topic (the rule's prefixes swapped).
    pub topic: String,
    /// The QoS to send it with: the message's, at most the rule's.
    pub qos: QoS,
    /// The message as published here.
    pub message: Arc<Message>,
    /// Its user properties with this node added to its path.
    pub user: Vec<(String, String)>,
    delivery: Delivery,
}

/// A message from the remote, as its kind read it.
pub struct Inbound {
    /// The payload.
    pub payload: Bytes,
    /// The QoS it arrived with (at most the `in` rule's, as subscribed).
    pub qos: QoS,
    /// The remote's retain flag, as published there (Retain As Published).
    pub retain: bool,
    /// Its properties (content type, user properties with the path…) as the remote sent them.
    pub props: Properties,
}

/// Why the remote's message was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No `in` rule covers its topic (the remote sent what we did not subscribe to).
    Unmapped,
    /// The broker could not take it now (memory budget, a full queue): leave it unacknowledged
    /// for the remote to send again.
    Full,
}

/// One bridge's side of the broker. See the module documentation.
pub struct Link {
    config: Arc<BridgeConfig>,
    rules: Vec<TopicRule>,
    session: Session,
    spool: Option<Spool>,
    counters: Arc<BridgeCounters>,
    node: Arc<str>,
    remote_node: String,
    shutdown: CancellationToken,
    up: bool,
    last_error: Option<String>,
}

impl Link {
    /// Makes the bridge's session and spool (restored from the store if it was kept), binds
    /// the spool to the `out` rules, and registers the bridge's counters.
    pub(crate) fn open(ctx: &FrontEndContext, config: BridgeConfig, node: Arc<str>) -> Result<Link, ConfigError> {
        let rules = config.rules()?;
        let router = &ctx.router;
        let counters = router.metrics().bridges().register(&config.name, config.kind.as_str());
        let session = router.open_session(Protocol::Bridge);
        let spool = if rules.iter().any(|r| r.direction.goes_out()) {
            let spool = Spool::new(open_spool(router, &config, &rules, &session)?);
            let _ = counters.spool.set(spool.gauge());
            Some(spool)
        } else {
            None
        };
        let remote_node = config.remote_node.clone().unwrap_or_else(|| config.name.clone());
        Ok(Link {
            rules,
            session,
            spool,
            counters,
            node,
            remote_node,
            shutdown: ctx.shutdown.clone(),
            up: false,
            last_error: None,
            config: Arc::new(config),
        })
    }

    /// The bridge's configuration.
    pub fn config(&self) -> &BridgeConfig {
        &self.config
    }

    /// This node's name, as it goes on paths (and, by default, in client ids).
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Cancelled when the broker stops.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// The waits between connection attempts, from the configuration.
    pub fn backoff(&self) -> Backoff {
        Backoff::new(self.config.reconnect_min, self.config.reconnect_max)
    }

    /// Runs `session` (one connection: `Some(reason)` when it failed, `None` when the broker
    /// stops) again and again, recording each failure and waiting the backoff between them,
    /// until the broker stops.
    pub async fn reconnecting(mut self, mut session: impl AsyncFnMut(&mut Link, &mut Backoff) -> Option<String>) {
        let mut backoff = self.backoff();
        while let Some(reason) = session(&mut self, &mut backoff).await {
            self.disconnected(&reason);
            let wait = backoff.next_wait();
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// The remote filters to subscribe to, with their QoS: the remote side of every `in` rule.
    pub fn remote_subscriptions(&self) -> Vec<(String, QoS)> {
        self.rules.iter().filter(|r| r.direction.comes_in()).map(|r| (r.remote_filter(), r.qos)).collect()
    }

    /// The remote is connected: logged when it was not, counted, and the spool starts sending
    /// with `max_inflight` messages unacknowledged at most.
    pub fn connected(&mut self) {
        if !self.up {
            tracing::info!(bridge = %self.config.name, url = %self.config.url_for_logs(), "bridge up");
        }
        self.up = true;
        self.last_error = None;
        self.counters.up.store(true, Relaxed);
        self.counters.connects.fetch_add(1, Relaxed);
        *self.counters.last_error.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if let Some(spool) = &mut self.spool {
            spool.start(&mut self.session, usize::from(self.config.max_inflight));
        }
    }

    /// The connection failed or ended: logged once per reason, and what was sent but not
    /// acknowledged goes back to the front of the spool.
    pub fn disconnected(&mut self, reason: &str) {
        if self.up || self.last_error.as_deref() != Some(reason) {
            tracing::warn!(bridge = %self.config.name, url = %self.config.url_for_logs(), reason, "bridge down");
        }
        self.up = false;
        self.last_error = Some(reason.to_owned());
        self.counters.up.store(false, Relaxed);
        *self.counters.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.to_owned());
        if let Some(spool) = &mut self.spool {
            spool.stop(&mut self.session);
        }
    }

    /// The next message to send. Cancel-safe: one taken while the caller stopped waiting is
    /// kept for the next call.
    pub async fn next_outbound(&mut self) -> Outbound {
        loop {
            let Some(spool) = &mut self.spool else { return std::future::pending().await };
            let delivery = spool.next(&self.session).await;
            if let Some(out) = self.map_out(delivery) {
                return out;
            }
        }
    }

    fn map_out(&self, delivery: Delivery) -> Option<Outbound> {
        let message = delivery.message.clone();
        let Some((rule, topic)) =
            self.rules.iter().filter(|r| r.direction.goes_out()).find_map(|r| Some((r, r.to_remote(&message.topic)?)))
        else {
            // The spool is bound to the out rules only; nothing else reaches it.
            settle(&delivery);
            return None;
        };
        let user = path::through(&message.props.user, &self.node);
        Some(Outbound { topic, qos: message.qos.min(rule.qos), user, message, delivery })
    }

    /// The remote acknowledged `out` (or it was sent at QoS 0): it leaves the spool, and its
    /// latency to here is recorded as the `bridge` hop.
    pub fn confirmed(&self, out: Outbound) {
        settle(&out.delivery);
        self.counters.messages_out.fetch_add(1, Relaxed);
        let metrics = self.session.router().metrics();
        metrics.protocol(Protocol::Bridge).messages_out.fetch_add(1, Relaxed);
        let from = out.message.origin.protocol;
        metrics.record(Hop::Bridge, from, Protocol::Bridge, out.message.received_at.elapsed());
    }

    /// Publishes here what the remote sent on `remote_topic`, with the remote's name added to
    /// its path. Returns the store commit to await before acknowledging it to the remote
    /// (`None`: nothing was kept).
    pub fn publish_in(&self, remote_topic: &str, inbound: Inbound) -> Result<Option<Durable>, Refused> {
        let Some(topic) = self.rules.iter().filter(|r| r.direction.comes_in()).find_map(|r| r.to_local(remote_topic))
        else {
            tracing::debug!(bridge = %self.config.name, topic = remote_topic, "message on a topic no in rule covers");
            return Err(Refused::Unmapped);
        };
        let origin = Origin {
            protocol: Protocol::Bridge,
            session: self.session.id(),
            client_id: self.config.name.as_str().into(),
        };
        let Inbound { payload, qos, retain, mut props } = inbound;
        props.user = path::through(&props.user, &self.remote_node);
        let mut message = Message::new(topic, payload, origin);
        message.qos = qos;
        message.retain = retain;
        message.received_at = Instant::now();
        message.props = props;
        self.counters.messages_in.fetch_add(1, Relaxed);
        self.session.router().metrics().protocol(Protocol::Bridge).messages_in.fetch_add(1, Relaxed);
        let mut durable = None;
        let outcome = self.session.publish_into(Arc::new(message), &mut durable);
        if outcome.refused > 0 || outcome.memory_full {
            return Err(Refused::Full);
        }
        Ok(durable)
    }
}

/// The spool: a durable queue bound to the local side of the `out` rules.
fn open_spool(
    router: &Router,
    config: &BridgeConfig,
    rules: &[TopicRule],
    session: &Session,
) -> Result<Arc<Queue>, ConfigError> {
    let options = QueueOptions {
        max_length: usize::MAX,
        max_length_bytes: config.spool_max_bytes,
        durable: true,
        at_most_once_needs_consumer: true,
        ..QueueOptions::default()
    };
    let name = format!("{}{}", tolk_core::SPOOL_PREFIX, config.name);
    let (spool, _) = router.declare_queue(&name, options).map_err(|e| config.error(&e.to_string()))?;
    let bindings = SubscriptionOptions {
        not_from: Some(session.id()),
        max_hops: Some(config.hop_limit),
        ..SubscriptionOptions::default()
    };
    for (tag, rule) in rules.iter().filter(|r| r.direction.goes_out()).enumerate() {
        router
            .bind_queue_with(&spool, &rule.local_filter(), tag as u64, bindings)
            .map_err(|e| config.error(&format!("{rule}: {e}")))?;
    }
    Ok(spool)
}
