//! How the endpoint learns that a connected client's core outbox has deliveries, without a
//! task per client.
//!
//! The endpoint owns the socket and every session, and polls each connected client's core
//! outbox itself, with a waker of that client's ([`OutboxWatch`]). A push into the outbox
//! wakes it, which puts the client's key in the endpoint's [`Ready`] list (once, until the
//! endpoint looks) and wakes the endpoint. A task per client, as before, cost 632 bytes for
//! the task, 111 for its cancellation token and 60 for its handles: about a quarter of an
//! idle client's memory. The watch is a 40-byte allocation.
//!
//! The outbox is polled only while the session wants deliveries ([`OutboxWatch::want`]), so
//! deliveries wait in the core outbox (bounded, with its QoS-aware overflow policy), not in a
//! second queue here. The watch also holds the client's connection-gauge guard, so
//! `connections_open` counts exactly the clients that have one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;
use tolk_core::{ConnectionGauge, Delivery, Metrics, Overflowed, Protocol, Session};

/// Largest batch taken from an outbox at once: the session's window is refilled in steps of
/// this, and an awake client's backlog stays in the core outbox.
pub(crate) const BATCH: usize = 32;

/// Identifies a session in the endpoint; never reused, so a stale wake-up is recognisable.
pub(crate) type ClientKey = u64;

/// The clients whose outbox woke them since the endpoint last looked, each listed once.
/// Bounded by the number of clients.
#[derive(Default)]
pub(crate) struct Ready {
    keys: Mutex<Vec<ClientKey>>,
    endpoint: AtomicWaker,
}

impl Ready {
    /// Moves the listed keys into `into` (empty), or registers the endpoint's waker and
    /// stays pending while none are listed.
    pub(crate) fn poll_take(&self, cx: &mut Context<'_>, into: &mut Vec<ClientKey>) -> Poll<()> {
        self.endpoint.register(cx.waker());
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if keys.is_empty() {
            return Poll::Pending;
        }
        std::mem::swap(&mut *keys, into);
        Poll::Ready(())
    }

    fn push(&self, key: ClientKey) {
        self.keys.lock().unwrap_or_else(|e| e.into_inner()).push(key);
        self.endpoint.wake();
    }
}

/// One client's waker: lists its key in [`Ready`] at the first wake after the endpoint looked.
struct ClientWaker {
    key: ClientKey,
    listed: AtomicBool,
    ready: Arc<Ready>,
}

impl Wake for ClientWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.listed.swap(true, Ordering::AcqRel) {
            self.ready.push(self.key);
        }
    }
}

/// A connected client's watch on its core outbox.
pub(crate) struct OutboxWatch {
    client: Arc<ClientWaker>,
    waker: Waker,
    /// The session asked for deliveries and has not had them yet.
    wants: bool,
    /// The last poll found the outbox empty and left the waker there: until the client is
    /// listed again, polling would find nothing (a publisher's session wants deliveries all
    /// the time, and is flushed for each of its messages).
    armed: bool,
    _open: ConnectionGauge,
}

impl OutboxWatch {
    /// A watch for the client `key`, counted as an open connection until it is dropped. It
    /// takes nothing until the session asks ([`OutboxWatch::want`]).
    pub(crate) fn new(key: ClientKey, ready: &Arc<Ready>, metrics: &Arc<Metrics>) -> Self {
        let client = Arc::new(ClientWaker { key, listed: AtomicBool::new(false), ready: ready.clone() });
        let waker = Waker::from(client.clone());
        OutboxWatch { client, waker, wants: false, armed: false, _open: metrics.connection_opened(Protocol::MqttSn) }
    }

    /// The session has room for the next batch. The endpoint polls at once after asking: a
    /// push that woke the client while it wanted nothing was consumed then.
    pub(crate) fn want(&mut self) {
        self.wants = true;
    }

    /// Lists the client in [`Ready`] if it wants deliveries: the endpoint stopped giving it
    /// batches for this turn, and may not be woken for what is already queued.
    pub(crate) fn relist(&self) {
        if self.wants {
            Wake::wake_by_ref(&self.client);
        }
    }

    /// Takes up to [`BATCH`] deliveries into `into` if the session wants them and some are
    /// queued; otherwise leaves this client's waker with the outbox and returns `None`. Call it
    /// when the session asks, and when the client's key comes out of [`Ready`].
    pub(crate) fn poll(&mut self, core: &Session, into: &mut Vec<Delivery>) -> Option<Result<usize, Overflowed>> {
        // Cleared before looking, so that a push after this look lists the client again.
        let woken = self.client.listed.swap(false, Ordering::AcqRel);
        if !self.wants || (self.armed && !woken) {
            return None;
        }
        let mut cx = Context::from_waker(&self.waker);
        match core.receiver().poll_drain(&mut cx, into, BATCH) {
            Poll::Ready(taken) => {
                (self.wants, self.armed) = (false, false);
                Some(taken)
            }
            Poll::Pending => {
                self.armed = true;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use tolk_core::{Message, Origin, Router, RouterConfig};

    use super::*;

    fn message(topic: &str) -> Arc<Message> {
        let origin = Origin { protocol: Protocol::Mqtt, session: tolk_core::SessionId(0), client_id: "p".into() };
        Arc::new(Message::new(topic, b"x".to_vec(), origin))
    }

    #[tokio::test]
    async fn a_push_lists_the_client_once_and_the_watch_takes_only_when_wanted() {
        let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
        let publisher = router.open_session(Protocol::Mqtt);
        let subscriber = router.open_session(Protocol::MqttSn);
        subscriber.subscribe("a", 0, Default::default()).unwrap();
        let ready = Arc::new(Ready::default());
        let mut watch = OutboxWatch::new(9, &ready, router.metrics());
        let mut batch = Vec::new();

        assert!(watch.poll(&subscriber, &mut batch).is_none(), "not wanted yet");
        watch.want();
        assert!(watch.poll(&subscriber, &mut batch).is_none(), "nothing queued: the waker is left");
        publisher.publish(message("a"));
        publisher.publish(message("a"));
        let mut keys = Vec::new();
        poll_fn(|cx| ready.poll_take(cx, &mut keys)).await;
        assert_eq!(keys, [9], "listed once for two pushes");
        keys.clear();

        assert!(matches!(watch.poll(&subscriber, &mut batch), Some(Ok(2))));
        assert_eq!(batch.len(), 2);
        publisher.publish(message("a"));
        assert!(watch.poll(&subscriber, &mut batch).is_none(), "taken once; the next batch waits for `want`");
        watch.relist();
        watch.want();
        watch.relist();
        poll_fn(|cx| ready.poll_take(cx, &mut keys)).await;
        assert_eq!(keys, [9], "relisted only while it wants");
        assert!(matches!(watch.poll(&subscriber, &mut batch), Some(Ok(1))));
    }

    #[test]
    fn a_watch_counts_an_open_connection_while_it_lives() {
        let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
        let open = || router.metrics().protocol(Protocol::MqttSn).connections_open.load(Ordering::Relaxed);
        let watch = OutboxWatch::new(1, &Arc::new(Ready::default()), router.metrics());
        assert_eq!(open(), 1);
        drop(watch);
        assert_eq!(open(), 0);
    }
}
