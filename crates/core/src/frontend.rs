//! The shape every protocol front end shares: a config type that becomes a [`FrontEnd`], started
//! with a [`FrontEndContext`]. The broker only sees this trait, so adding a protocol is adding
//! one crate and one line in the broker.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tolk_metrics::{Hop, Metrics, Protocol};

use crate::auth::{AllowAll, Authenticator};
use crate::delivery::Delivery;
use crate::router::Router;

/// Everything a front end needs from the broker. Cloned into each front end.
#[derive(Clone)]
pub struct FrontEndContext {
    /// The router (and through it, the metrics).
    pub router: Router,
    /// Cancelled when the broker shuts down; each front end and connection holds a clone.
    pub shutdown: CancellationToken,
    /// Every task a front end spawns goes here, so shutdown can wait for them to finish.
    pub tracker: TaskTracker,
    /// Where front ends keep state that must survive a restart (e.g. MQTT-SN topic ids).
    pub data_dir: PathBuf,
    /// The broker's HTTP address, set once the HTTP server is bound (port 0 resolved): a front
    /// end that must recognise the broker itself (WS-N refusing itself as a consumer) reads it.
    pub http_addr: Arc<OnceLock<SocketAddr>>,
    /// Decides who may connect, for every protocol ([`AllowAll`] until users are configured).
    pub auth: Arc<dyn Authenticator>,
    /// The `[tls]` certificates, for listeners with a `tls_bind`; `None` without a `[tls]`
    /// section.
    pub tls: Option<Arc<tolk_tls::Tls>>,
}

impl FrontEndContext {
    /// The TLS settings for the listener `setting` names (`"mqtt.tls_bind"`): an error a user
    /// can act on when there is no `[tls]` section.
    pub fn tls_for(&self, setting: &str) -> io::Result<Arc<tolk_tls::Tls>> {
        self.tls.clone().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{setting} is set, but there is no [tls] section with cert_file and key_file"),
            )
        })
    }

    /// A context with fresh shutdown token and task tracker (the broker makes one at start;
    /// tests make their own). Made inside the tokio runtime, so that cancelling the token
    /// reaches every connection ([`Router::shut_down_sessions_on`]).
    pub fn new(router: Router, data_dir: PathBuf) -> Self {
        let shutdown = CancellationToken::new();
        router.shut_down_sessions_on(&shutdown);
        FrontEndContext {
            router,
            shutdown,
            tracker: TaskTracker::new(),
            data_dir,
            http_addr: Arc::default(),
            auth: Arc::new(AllowAll),
            tls: None,
        }
    }
}

/// The kind of socket a declared listener binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Socket {
    /// A TCP listener.
    Tcp,
    /// A UDP socket.
    Udp,
}

/// A socket a front end will bind, declared before anything starts so that the broker can
/// refuse a configuration where two listeners claim the same port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listen {
    /// The setting that names it, for messages (`"mqtt.bind"`, `"mqtt.tls_bind"`…).
    pub setting: &'static str,
    /// TCP or UDP.
    pub socket: Socket,
    /// Configured address (port 0 = any free port).
    pub addr: SocketAddr,
}

/// What a started front end serves.
#[derive(Debug, Default)]
pub struct Started {
    /// The addresses it bound (port 0 resolved), for logs and for tests that asked for port 0.
    pub addrs: Vec<SocketAddr>,
    /// Routes it serves on the broker's HTTP port (WS-Notification's endpoint), merged into the
    /// one HTTP app; the broker binds that port once every front end has started.
    pub routes: Option<axum::Router>,
}

impl Started {
    /// A front end listening on its own sockets only.
    pub fn listening(addrs: Vec<SocketAddr>) -> Self {
        Started { addrs, routes: None }
    }
}

/// Future returned by [`FrontEnd::start`].
pub type StartFuture = Pin<Box<dyn Future<Output = io::Result<Started>> + Send>>;

/// A protocol front end.
pub trait FrontEnd: Send {
    /// Short protocol name for logs.
    fn name(&self) -> &'static str;

    /// The sockets it will bind.
    fn listens(&self) -> Vec<Listen>;

    /// Binds its sockets, spawns its tasks on `ctx.tracker` and returns the bound addresses
    /// (so that tests can ask for port 0) and the routes it serves on the HTTP port. Returns
    /// once listening: that is the broker's readiness signal.
    fn start(self: Box<Self>, ctx: FrontEndContext) -> StartFuture;
}

/// Records the four latency hops of a delivery that was taken from the outbox at `taken_at`
/// and whose bytes were handed to the socket at `written_at`.
#[inline]
pub fn record_delivery(metrics: &Metrics, to: Protocol, delivery: &Delivery, taken_at: Instant, written_at: Instant) {
    HopStamps::of(delivery, taken_at).record(metrics, to, written_at);
}

/// When a delivery passed each point of its trip: all its latency hops need once its bytes
/// are written. Kept in place of the message while the bytes wait for the socket, so that a
/// message shared by many subscribers is not held, nor its count touched, for the metrics.
#[derive(Debug, Clone, Copy)]
pub struct HopStamps {
    from: Protocol,
    received_at: Instant,
    enqueued_at: Instant,
    taken_at: Instant,
}

impl HopStamps {
    /// The stamps of `delivery`, taken from the outbox at `taken_at`.
    #[inline]
    pub fn of(delivery: &Delivery, taken_at: Instant) -> Self {
        let message = &delivery.message;
        HopStamps {
            from: message.origin.protocol,
            received_at: message.received_at,
            enqueued_at: delivery.enqueued_at,
            taken_at,
        }
    }

    /// Records the four hops, to a client of protocol `to`, written at `written_at`.
    #[inline]
    pub fn record(&self, metrics: &Metrics, to: Protocol, written_at: Instant) {
        let HopStamps { from, received_at, enqueued_at, taken_at } = *self;
        metrics.record(Hop::Ingress, from, to, enqueued_at.saturating_duration_since(received_at));
        metrics.record(Hop::Queue, from, to, taken_at.saturating_duration_since(enqueued_at));
        metrics.record(Hop::Egress, from, to, written_at.saturating_duration_since(taken_at));
        metrics.record(Hop::EndToEnd, from, to, written_at.saturating_duration_since(received_at));
    }
}
