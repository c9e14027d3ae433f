//! Exchanges: AMQP-only routing state, one registry shared by every AMQP connection.
//!
//! The default exchange `""` routes to the queue named by the routing key and is not stored
//! here. `amq.direct`, `amq.fanout`, `amq.headers`/`amq.match` and declared exchanges keep their
//! bindings here and push straight into the core's queues. `amq.topic` is the bridge to the
//! common topic space: its queue bindings are router bindings (made by the session), so it has
//! no bindings of its own here; an exchange-to-exchange binding *to* it makes [`Route`] ask for
//! a router publish.
//!
//! Bindings hold the `Arc<Queue>` they were made with; a queue deleted elsewhere (another
//! front end, the core's auto-delete) is noticed when a push reports it and its bindings are
//! dropped then ([`ExchangeRegistry::forget_queue`]).
//!
//! The registry also remembers exclusive consumers (`basic.consume` with `exclusive`), which the
//! core has no notion of, and broadcasts queue deletions so that every connection can send
//! `basic.cancel` to consumers of a deleted queue (the `consumer_cancel_notify` capability).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use amq_protocol::types::{AMQPValue, FieldTable};
use tokio::sync::watch;
use tolk_core::store::{Change, Space, Store, record};
use tolk_core::{Queue, Router, SessionId};
use tracing::warn;

use crate::error::AmqpError;
use crate::kept::{KEY, KeptBinding, KeptExchange, KeptTopology};
use crate::topic_key;
use crate::translate::TOPIC_BRIDGE;

/// The four exchange types of AMQP 0-9-1 (§3.1.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExchangeKind {
    /// Routing key equals binding key.
    Direct,
    /// Every binding.
    Fanout,
    /// Binding key pattern with `*` and `#` words.
    Topic,
    /// Header values (`x-match` all/any).
    Headers,
}

impl ExchangeKind {
    /// Parses the `type` argument of `exchange.declare`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "direct" => ExchangeKind::Direct,
            "fanout" => ExchangeKind::Fanout,
            "topic" => ExchangeKind::Topic,
            "headers" => ExchangeKind::Headers,
            _ => return None,
        })
    }

    /// The type's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ExchangeKind::Direct => "direct",
            ExchangeKind::Fanout => "fanout",
            ExchangeKind::Topic => "topic",
            ExchangeKind::Headers => "headers",
        }
    }
}

/// What an exchange was declared with; a re-declare must agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExchangeOptions {
    /// Type.
    pub kind: ExchangeKind,
    /// Remembered for equivalence checks; exchanges live in memory.
    pub durable: bool,
    /// Deleted when its last binding (as source) goes.
    pub auto_delete: bool,
    /// Clients may not publish to it directly, only through exchange-to-exchange bindings.
    pub internal: bool,
}

/// Where a binding leads.
#[derive(Clone)]
pub enum BindingTarget {
    /// A core queue.
    Queue(Arc<Queue>),
    /// Another exchange (RabbitMQ's exchange-to-exchange binding extension).
    Exchange(String),
}

impl BindingTarget {
    fn same(&self, other: &BindingTarget) -> bool {
        match (self, other) {
            (BindingTarget::Queue(a), BindingTarget::Queue(b)) => Arc::ptr_eq(a, b),
            (BindingTarget::Exchange(a), BindingTarget::Exchange(b)) => a == b,
            _ => false,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum XMatch {
    All,
    Any,
}

struct Binding {
    target: BindingTarget,
    key: String,
    arguments: FieldTable,
    x_match: XMatch,
}

struct Exchange {
    options: ExchangeOptions,
    builtin: bool,
    bindings: Vec<Binding>,
}

/// Where one publish goes.
#[derive(Default)]
pub struct Route {
    /// Queues to push into, each once.
    pub queues: Vec<Arc<Queue>>,
    /// Whether the message also reached `amq.topic` and must be published to the router.
    pub topic_space: bool,
}

#[derive(Default)]
struct State {
    exchanges: HashMap<String, Exchange>,
    /// Queue id → connection holding an exclusive consumer on it.
    exclusive_consumers: HashMap<SessionId, SessionId>,
}

/// All exchanges of the broker's single vhost `/`.
pub struct ExchangeRegistry {
    state: Mutex<State>,
    deletions: watch::Sender<u64>,
    max_exchanges: usize,
    max_bindings: usize,
    /// Where the durable topology is kept, once attached.
    store: OnceLock<Arc<dyn Store>>,
}

/// Most exchanges visited by one publish through exchange-to-exchange bindings; cycles are cut
/// by the visited set, this bounds the work of a long chain.
const MAX_ROUTE_HOPS: usize = 64;

fn not_found(name: &str) -> AmqpError {
    AmqpError::not_found(format!("no exchange '{name}' in vhost '/'"))
}

/// Spec §2.1.3 / `exchange-name` domain: letters, digits, `-`, `_`, `.`, `:`. Keeping `/` out
/// also keeps the internal `$amqp/<exchange>/…` topics unambiguous.
fn valid_name(name: &str) -> bool {
    name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

fn x_match(arguments: &FieldTable) -> Result<XMatch, AmqpError> {
    match arguments.inner().get("x-match") {
        None => Ok(XMatch::All),
        Some(AMQPValue::LongString(s)) if s.as_bytes() == b"all" => Ok(XMatch::All),
        Some(AMQPValue::LongString(s)) if s.as_bytes() == b"any" => Ok(XMatch::Any),
        Some(AMQPValue::ShortString(s)) if s.as_str() == "all" => Ok(XMatch::All),
        Some(AMQPValue::ShortString(s)) if s.as_str() == "any" => Ok(XMatch::Any),
        Some(other) => {
            Err(AmqpError::precondition_failed(format!("invalid x-match value {other:?}: use \"all\" or \"any\"")))
        }
    }
}

/// Headers-exchange matching (RabbitMQ semantics): binding arguments other than `x-*` are
/// compared with the message's headers; a `Void` value only asks for presence.
fn headers_match(binding: &Binding, headers: Option<&FieldTable>) -> bool {
    let empty = FieldTable::default();
    let headers = headers.unwrap_or(&empty).inner();
    let mut wanted = binding.arguments.inner().iter().filter(|(k, _)| !k.as_str().starts_with("x-")).peekable();
    if wanted.peek().is_none() {
        return binding.x_match == XMatch::All;
    }
    let mut check = wanted.map(|(k, v)| match (headers.get(k.as_str()), v) {
        (Some(_), AMQPValue::Void) => true,
        (Some(h), v) => h == v,
        (None, _) => false,
    });
    match binding.x_match {
        XMatch::All => check.all(|ok| ok),
        XMatch::Any => check.any(|ok| ok),
    }
}

impl ExchangeRegistry {
    /// A registry with the built-in exchanges, holding at most `max_exchanges` exchanges and
    /// `max_bindings` bindings per exchange.
    pub fn new(max_exchanges: usize, max_bindings: usize) -> Self {
        let mut state = State::default();
        for (name, kind) in [
            ("amq.direct", ExchangeKind::Direct),
            ("amq.fanout", ExchangeKind::Fanout),
            (TOPIC_BRIDGE, ExchangeKind::Topic),
            ("amq.headers", ExchangeKind::Headers),
            ("amq.match", ExchangeKind::Headers),
        ] {
            let options = ExchangeOptions { kind, durable: true, auto_delete: false, internal: false };
            state.exchanges.insert(name.to_owned(), Exchange { options, builtin: true, bindings: Vec::new() });
        }
        ExchangeRegistry {
            state: Mutex::new(state),
            deletions: watch::Sender::new(0),
            max_exchanges,
            max_bindings,
            store: OnceLock::new(),
        }
    }

    /// Restores the durable exchanges and bindings `router`'s store kept (its durable queues
    /// are back already) and keeps them there from now on. At start, once.
    pub fn attach_store(&self, router: &Router) {
        let Some(store) = router.store() else { return };
        let kept = match store.load(Space::Resources) {
            Ok(records) => records.into_iter().find(|(key, _)| key == KEY).map(|(_, value)| value),
            Err(e) => return warn!(error = %e, "AMQP exchanges could not be restored"),
        };
        let topology = match kept.map(|value| record::decode_record::<KeptTopology>(&value)) {
            Some(Ok(topology)) => topology,
            Some(Err(e)) => {
                warn!(error = %e, "the stored AMQP exchanges were not restored");
                KeptTopology::default()
            }
            None => KeptTopology::default(),
        };
        let mut state = self.lock();
        for exchange in topology.exchanges {
            let Some(kind) = ExchangeKind::parse(&exchange.kind) else { continue };
            let options =
                ExchangeOptions { kind, durable: true, auto_delete: exchange.auto_delete, internal: exchange.internal };
            state.exchanges.entry(exchange.name).or_insert(Exchange { options, builtin: false, bindings: Vec::new() });
        }
        for binding in topology.bindings {
            let target = if binding.to_queue {
                match router.queue(&binding.target) {
                    Some(queue) => BindingTarget::Queue(queue),
                    None => continue,
                }
            } else {
                BindingTarget::Exchange(binding.target)
            };
            let Some(exchange) = state.exchanges.get_mut(&binding.source) else { continue };
            let x_match = x_match(&binding.arguments).unwrap_or(XMatch::All);
            exchange.bindings.push(Binding { target, key: binding.key, arguments: binding.arguments, x_match });
        }
        let _ = self.store.set(store.clone());
        drop(state);
    }

    /// Writes the durable topology after a change (under the lock, so that the last record
    /// written is the latest state).
    fn keep(&self, state: &State) {
        let Some(store) = self.store.get() else { return };
        let durable_exchange = |name: &str| state.exchanges.get(name).is_some_and(|e| e.options.durable);
        let mut topology = KeptTopology::default();
        for (name, exchange) in &state.exchanges {
            if exchange.options.durable && !exchange.builtin {
                topology.exchanges.push(KeptExchange {
                    name: name.clone(),
                    kind: exchange.options.kind.as_str().to_owned(),
                    auto_delete: exchange.options.auto_delete,
                    internal: exchange.options.internal,
                });
            }
            if !exchange.options.durable {
                continue;
            }
            for binding in &exchange.bindings {
                let (to_queue, target) = match &binding.target {
                    BindingTarget::Queue(q) if q.options().durable => (true, q.name().to_owned()),
                    BindingTarget::Exchange(e) if durable_exchange(e) => (false, e.clone()),
                    _ => continue,
                };
                topology.bindings.push(KeptBinding {
                    source: name.clone(),
                    to_queue,
                    target,
                    key: binding.key.clone(),
                    arguments: binding.arguments.clone(),
                });
            }
        }
        let change =
            Change::Put { space: Space::Resources, key: KEY.to_vec(), value: record::encode_record(&topology) };
        drop(store.commit(vec![change]));
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every mutation below leaves the maps consistent at each step, so a poisoned lock
        // holds nothing half-done.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `exchange.declare` (§1.7.2.1), `passive` included.
    pub fn declare(&self, name: &str, options: ExchangeOptions, passive: bool) -> Result<(), AmqpError> {
        if name.is_empty() {
            return Err(AmqpError::access_refused("operation not permitted on the default exchange"));
        }
        let mut state = self.lock();
        if let Some(existing) = state.exchanges.get(name) {
            if passive {
                return Ok(());
            }
            let e = existing.options;
            let differs = |arg: &str, got: &str, have: &str| {
                AmqpError::precondition_failed(format!(
                    "inequivalent arg '{arg}' for exchange '{name}' in vhost '/': received '{got}' but current is '{have}'"
                ))
            };
            if e.kind != options.kind {
                return Err(differs("type", options.kind.as_str(), e.kind.as_str()));
            }
            if e.durable != options.durable {
                return Err(differs("durable", &options.durable.to_string(), &e.durable.to_string()));
            }
            if e.auto_delete != options.auto_delete {
                return Err(differs("auto_delete", &options.auto_delete.to_string(), &e.auto_delete.to_string()));
            }
            if e.internal != options.internal {
                return Err(differs("internal", &options.internal.to_string(), &e.internal.to_string()));
            }
            return Ok(());
        }
        if passive {
            return Err(not_found(name));
        }
        if name.starts_with("amq.") {
            return Err(AmqpError::access_refused(format!("exchange name '{name}' contains reserved prefix 'amq.*'")));
        }
        if !valid_name(name) {
            return Err(AmqpError::precondition_failed(format!(
                "exchange name '{name}' is invalid: use letters, digits, '-', '_', '.' and ':'"
            )));
        }
        if state.exchanges.len() >= self.max_exchanges {
            return Err(AmqpError::precondition_failed(format!(
                "cannot declare exchange '{name}': the broker's limit of {} exchanges is reached",
                self.max_exchanges
            )));
        }
        state.exchanges.insert(name.to_owned(), Exchange { options, builtin: false, bindings: Vec::new() });
        if options.durable {
            self.keep(&state);
        }
        Ok(())
    }

    /// `exchange.delete` (§1.7.2.3). Deleting a missing exchange succeeds, as in RabbitMQ.
    pub fn delete(&self, name: &str, if_unused: bool) -> Result<(), AmqpError> {
        if name.is_empty() {
            return Err(AmqpError::access_refused("operation not permitted on the default exchange"));
        }
        let mut state = self.lock();
        let Some(exchange) = state.exchanges.get(name) else { return Ok(()) };
        if exchange.builtin {
            return Err(AmqpError::access_refused(format!("deletion of system exchange '{name}' is not allowed")));
        }
        if if_unused && !exchange.bindings.is_empty() {
            return Err(AmqpError::precondition_failed(format!("exchange '{name}' in vhost '/' in use")));
        }
        Self::remove_exchange(&mut state, name);
        self.keep(&state);
        Ok(())
    }

    /// Removes an exchange and every binding leading to it, then auto-deletes the sources that
    /// lost their last binding.
    fn remove_exchange(state: &mut State, name: &str) {
        let mut doomed = vec![name.to_owned()];
        while let Some(name) = doomed.pop() {
            state.exchanges.remove(&name);
            let target = BindingTarget::Exchange(name);
            doomed.extend(Self::remove_bindings_to(state, &target));
        }
    }

    /// Removes bindings to `target` everywhere; returns auto-delete exchanges now unbound.
    fn remove_bindings_to(state: &mut State, target: &BindingTarget) -> Vec<String> {
        let mut emptied = Vec::new();
        for (name, exchange) in state.exchanges.iter_mut() {
            let before = exchange.bindings.len();
            exchange.bindings.retain(|b| !b.target.same(target));
            if before != exchange.bindings.len() && exchange.bindings.is_empty() && exchange.options.auto_delete {
                emptied.push(name.clone());
            }
        }
        emptied
    }

    /// Type and `internal` flag of an exchange, for publishes and binds.
    pub fn lookup(&self, name: &str) -> Option<ExchangeOptions> {
        self.lock().exchanges.get(name).map(|e| e.options)
    }

    /// Errors unless `name` exists (404 with the usual text).
    pub fn require(&self, name: &str) -> Result<ExchangeOptions, AmqpError> {
        self.lookup(name).ok_or_else(|| not_found(name))
    }

    /// Adds a binding from `source` to `target` (idempotent). The caller has refused the
    /// default exchange and the bridge's special cases.
    pub fn bind(
        &self,
        source: &str,
        target: BindingTarget,
        key: &str,
        arguments: &FieldTable,
    ) -> Result<(), AmqpError> {
        let mut state = self.lock();
        if let BindingTarget::Exchange(dest) = &target
            && !state.exchanges.contains_key(dest)
        {
            return Err(not_found(dest));
        }
        let max = self.max_bindings;
        let exchange = state.exchanges.get_mut(source).ok_or_else(|| not_found(source))?;
        let x_match = if exchange.options.kind == ExchangeKind::Headers { x_match(arguments)? } else { XMatch::All };
        let same = |b: &Binding| b.target.same(&target) && b.key == key && &b.arguments == arguments;
        if exchange.bindings.iter().any(same) {
            return Ok(());
        }
        if exchange.bindings.len() >= max {
            return Err(AmqpError::precondition_failed(format!(
                "cannot bind to exchange '{source}': its limit of {max} bindings is reached"
            )));
        }
        exchange.bindings.push(Binding { target, key: key.to_owned(), arguments: arguments.clone(), x_match });
        self.keep(&state);
        Ok(())
    }

    /// Removes a binding (succeeds if there is none, as in RabbitMQ), auto-deleting the source
    /// if it was its last.
    pub fn unbind(&self, source: &str, target: &BindingTarget, key: &str, arguments: &FieldTable) {
        let mut state = self.lock();
        let Some(exchange) = state.exchanges.get_mut(source) else { return };
        let before = exchange.bindings.len();
        exchange.bindings.retain(|b| !(b.target.same(target) && b.key == key && &b.arguments == arguments));
        let removed = before != exchange.bindings.len();
        if removed && exchange.bindings.is_empty() && exchange.options.auto_delete {
            Self::remove_exchange(&mut state, source);
        }
        if removed {
            self.keep(&state);
        }
    }

    /// Drops every binding to `queue` (it was deleted) and auto-deletes emptied exchanges.
    pub fn forget_queue(&self, queue: &Arc<Queue>) {
        let mut state = self.lock();
        for name in Self::remove_bindings_to(&mut state, &BindingTarget::Queue(queue.clone())) {
            Self::remove_exchange(&mut state, &name);
        }
        if queue.options().durable {
            self.keep(&state);
        }
    }

    /// Where a message published to `exchange` with `routing_key` and `headers` goes.
    pub fn route(&self, exchange: &str, routing_key: &str, headers: Option<&FieldTable>) -> Route {
        let state = self.lock();
        let mut route = Route::default();
        let mut pending = vec![exchange];
        let mut visited: Vec<&str> = Vec::new();
        while let Some(name) = pending.pop() {
            if visited.contains(&name) || visited.len() >= MAX_ROUTE_HOPS {
                continue;
            }
            visited.push(name);
            if name == TOPIC_BRIDGE {
                route.topic_space = true;
                continue;
            }
            let Some(ex) = state.exchanges.get(name) else { continue };
            for binding in &ex.bindings {
                let hit = match ex.options.kind {
                    ExchangeKind::Direct => binding.key == routing_key,
                    ExchangeKind::Fanout => true,
                    ExchangeKind::Topic => topic_key::pattern_matches(&binding.key, routing_key),
                    ExchangeKind::Headers => headers_match(binding, headers),
                };
                if !hit {
                    continue;
                }
                match &binding.target {
                    BindingTarget::Queue(q) => {
                        if !route.queues.iter().any(|x| Arc::ptr_eq(x, q)) {
                            route.queues.push(q.clone());
                        }
                    }
                    BindingTarget::Exchange(next) => pending.push(next),
                }
            }
        }
        route
    }

    /// Registers a consumer on `queue` for connection `owner`, refusing it if the queue has an
    /// exclusive consumer, or if it asks for exclusivity and the queue has any consumer.
    /// `consume` runs under the registry lock so that two connections cannot both win.
    pub fn add_consumer<R>(
        &self,
        queue: &Arc<Queue>,
        owner: SessionId,
        exclusive: bool,
        consume: impl FnOnce() -> Result<R, AmqpError>,
    ) -> Result<R, AmqpError> {
        let mut state = self.lock();
        let in_use = || AmqpError::access_refused(format!("queue '{}' in vhost '/' in exclusive use", queue.name()));
        if state.exclusive_consumers.contains_key(&queue.id()) || (exclusive && queue.consumer_count() > 0) {
            return Err(in_use());
        }
        let result = consume()?;
        if exclusive {
            state.exclusive_consumers.insert(queue.id(), owner);
        }
        Ok(result)
    }

    /// Forgets an exclusive consumer (cancelled, channel or connection closed).
    pub fn remove_exclusive_consumer(&self, queue: &Arc<Queue>) {
        self.lock().exclusive_consumers.remove(&queue.id());
    }

    /// Tells every connection that a queue was deleted, so they can cancel its consumers.
    pub fn announce_queue_deleted(&self) {
        self.deletions.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that changes whenever [`ExchangeRegistry::announce_queue_deleted`] is called.
    pub fn queue_deletions(&self) -> watch::Receiver<u64> {
        self.deletions.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tolk_core::{Metrics, Protocol, QueueOptions, Router, RouterConfig};

    fn setup() -> (Router, ExchangeRegistry) {
        (Router::new(RouterConfig::default(), Arc::new(Metrics::new())), ExchangeRegistry::new(16, 4))
    }

    fn opts(kind: ExchangeKind) -> ExchangeOptions {
        ExchangeOptions { kind, durable: false, auto_delete: false, internal: false }
    }

    fn names(route: &Route) -> Vec<&str> {
        let mut v: Vec<&str> = route.queues.iter().map(|q| q.name()).collect();
        v.sort();
        v
    }

    #[test]
    fn each_exchange_type_routes_by_its_rule() {
        let (router, reg) = setup();
        let q = |n: &str| router.declare_queue(n, QueueOptions::default()).unwrap().0;
        let (a, b) = (q("a"), q("b"));
        let none = FieldTable::default();
        reg.bind("amq.direct", BindingTarget::Queue(a.clone()), "k", &none).unwrap();
        reg.bind("amq.fanout", BindingTarget::Queue(a.clone()), "", &none).unwrap();
        reg.bind("amq.fanout", BindingTarget::Queue(b.clone()), "", &none).unwrap();
        reg.declare("t", opts(ExchangeKind::Topic), false).unwrap();
        reg.bind("t", BindingTarget::Queue(b.clone()), "s.*.x", &none).unwrap();
        let mut any = FieldTable::default();
        any.insert("x-match".into(), AMQPValue::LongString("any".into()));
        any.insert("color".into(), AMQPValue::LongString("red".into()));
        any.insert("size".into(), AMQPValue::Void);
        reg.bind("amq.headers", BindingTarget::Queue(a.clone()), "", &any).unwrap();

        assert_eq!(names(&reg.route("amq.direct", "k", None)), ["a"]);
        assert!(reg.route("amq.direct", "j", None).queues.is_empty());
        assert_eq!(names(&reg.route("amq.fanout", "whatever", None)), ["a", "b"]);
        assert_eq!(names(&reg.route("t", "s.1.x", None)), ["b"]);
        let mut h = FieldTable::default();
        h.insert("size".into(), AMQPValue::LongInt(3));
        assert_eq!(names(&reg.route("amq.headers", "", Some(&h))), ["a"]);
        assert!(reg.route("amq.headers", "", None).queues.is_empty());
    }

    #[test]
    fn exchange_to_exchange_bindings_follow_chains_and_stop_at_cycles() {
        let (router, reg) = setup();
        let a = router.declare_queue("a", QueueOptions::default()).unwrap().0;
        let none = FieldTable::default();
        reg.declare("x", opts(ExchangeKind::Fanout), false).unwrap();
        reg.declare("y", opts(ExchangeKind::Fanout), false).unwrap();
        reg.bind("x", BindingTarget::Exchange("y".into()), "", &none).unwrap();
        reg.bind("y", BindingTarget::Exchange("x".into()), "", &none).unwrap();
        reg.bind("y", BindingTarget::Queue(a.clone()), "", &none).unwrap();
        reg.bind("y", BindingTarget::Exchange(TOPIC_BRIDGE.into()), "", &none).unwrap();
        let route = reg.route("x", "k", None);
        assert_eq!(names(&route), ["a"]);
        assert!(route.topic_space);
        reg.delete("y", false).unwrap();
        assert!(reg.route("x", "k", None).queues.is_empty());
    }

    #[test]
    fn declares_are_checked_for_equivalence_names_and_limits() {
        let (_, reg) = setup();
        assert_eq!(reg.declare("", opts(ExchangeKind::Direct), false).unwrap_err().code, 403);
        assert_eq!(reg.declare("amq.new", opts(ExchangeKind::Direct), false).unwrap_err().code, 403);
        assert_eq!(reg.declare("nope", opts(ExchangeKind::Direct), true).unwrap_err().code, 404);
        reg.declare("e", opts(ExchangeKind::Direct), false).unwrap();
        let e = reg.declare("e", opts(ExchangeKind::Fanout), false).unwrap_err();
        assert_eq!(
            e.text,
            "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'e' in vhost '/': received 'fanout' but current is 'direct'"
        );
        assert_eq!(reg.declare("a/b", opts(ExchangeKind::Direct), false).unwrap_err().code, 406);
        assert_eq!(reg.delete("amq.direct", false).unwrap_err().code, 403);
        assert!(
            reg.declare("amq.topic", ExchangeOptions { durable: true, ..opts(ExchangeKind::Topic) }, false).is_ok()
        );
        for i in 0..10 {
            reg.declare(&format!("n{i}"), opts(ExchangeKind::Direct), false).unwrap();
        }
        assert_eq!(reg.declare("over", opts(ExchangeKind::Direct), false).unwrap_err().code, 406);
    }

    #[test]
    fn auto_delete_exchange_goes_with_its_last_binding_and_deleted_queues_are_forgotten() {
        let (router, reg) = setup();
        let a = router.declare_queue("a", QueueOptions::default()).unwrap().0;
        let none = FieldTable::default();
        reg.declare("ad", ExchangeOptions { auto_delete: true, ..opts(ExchangeKind::Direct) }, false).unwrap();
        reg.bind("ad", BindingTarget::Queue(a.clone()), "k", &none).unwrap();
        reg.bind("amq.direct", BindingTarget::Queue(a.clone()), "k", &none).unwrap();
        reg.forget_queue(&a);
        assert!(reg.lookup("ad").is_none());
        assert!(reg.route("amq.direct", "k", None).queues.is_empty());
    }

    #[test]
    fn exclusive_consumers_exclude_everyone_else() {
        let (router, reg) = setup();
        let mut s = router.open_session(Protocol::Amqp);
        let q = router.declare_queue("q", QueueOptions::default()).unwrap().0;
        reg.add_consumer(&q, s.id(), true, || {
            s.consume(&q, 1, tolk_core::QoS::AtLeastOnce, 1).map_err(AmqpError::internal_error)
        })
        .unwrap();
        assert_eq!(reg.add_consumer(&q, SessionId(99), false, || Ok(())).unwrap_err().code, 403);
        reg.remove_exclusive_consumer(&q);
        assert!(reg.add_consumer(&q, SessionId(99), false, || Ok(())).is_ok());
        assert_eq!(reg.add_consumer(&q, SessionId(99), true, || Ok(())).unwrap_err().code, 403);
    }
}
