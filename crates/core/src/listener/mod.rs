//! The shared TCP accept loop: binding with a useful error, admission (connection limits per
//! listener and per address), the label on a connection's log lines, the connection gauge,
//! close-reason metrics and shutdown. A protocol supplies only a [`ConnectionHandler`].

mod admission;
mod labelled;
mod linger;
mod websocket;

pub use admission::{Admission, Admitted, ConnectionLimits, OpenConnection};
pub use labelled::{Label, Labelled, name_client, write_current_label};
pub use linger::{LINGER, linger};
pub use websocket::{WebSocketBytes, WebSocketEndpoint};

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::Either;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::drive::{Transport, TransportKind};
use crate::frontend::{FrontEndContext, Listen, Socket};
use crate::router::Router;
use tolk_metrics::{CloseReason, Protocol};
use tolk_tls::Tls;

/// One accepted connection, handed to the protocol.
pub struct Connection {
    /// The transport: a TCP socket with `TCP_NODELAY` set, or a layer over one (TLS, a
    /// WebSocket).
    pub stream: Transport,
    /// The peer's address.
    pub peer: SocketAddr,
    /// Cancelled at broker shutdown: send the protocol's goodbye and return.
    pub shutdown: CancellationToken,
    /// The router.
    pub router: Router,
}

/// A protocol's per-connection logic.
pub trait ConnectionHandler: Send + Sync + 'static {
    /// Protocol label for metrics and logs.
    fn protocol(&self) -> Protocol;

    /// Runs one connection to its end and says why it ended.
    fn handle(self: Arc<Self>, connection: Connection) -> impl Future<Output = CloseReason> + Send;
}

/// The TCP listeners of a front end: `bind`, and `tls_bind` when set, both served by the same
/// connection handler. One description, used to declare the sockets before anything starts
/// and then to bind and serve them.
#[derive(Debug, Clone, Copy)]
pub struct TcpListeners {
    /// The protocol's name in logs ("MQTT").
    pub label: &'static str,
    /// The settings that name the two addresses (`"mqtt.bind"`, `"mqtt.tls_bind"`).
    pub settings: (&'static str, &'static str),
    /// The plain listener.
    pub bind: SocketAddr,
    /// The TLS listener, if any (needs the broker's `[tls]` section).
    pub tls_bind: Option<SocketAddr>,
    /// Connection limits, counted per listener.
    pub limits: ConnectionLimits,
    /// Whether the front end runs at all; when not, it declares no socket.
    pub enabled: bool,
}

impl TcpListeners {
    /// The listeners of a front end from its settings: its label in logs, the names of its
    /// two address settings, and the settings themselves.
    pub fn new(
        label: &'static str,
        settings: (&'static str, &'static str),
        enabled: bool,
        (bind, tls_bind): (SocketAddr, Option<SocketAddr>),
        (max_connections, max_per_address): (usize, usize),
    ) -> Self {
        TcpListeners {
            label,
            settings,
            bind,
            tls_bind,
            limits: ConnectionLimits { max_connections, max_per_address },
            enabled,
        }
    }

    /// The sockets these listeners will bind (none when the front end is disabled).
    pub fn listens(&self) -> Vec<Listen> {
        if !self.enabled {
            return Vec::new();
        }
        let plain = Listen { setting: self.settings.0, socket: Socket::Tcp, addr: self.bind };
        let tls = self.tls_bind.map(|addr| Listen { setting: self.settings.1, socket: Socket::Tcp, addr });
        std::iter::once(plain).chain(tls).collect()
    }

    /// Binds and serves them; returns the bound addresses (plain first, then TLS).
    pub async fn start<H: ConnectionHandler>(
        &self,
        handler: Arc<H>,
        ctx: &FrontEndContext,
    ) -> io::Result<Vec<SocketAddr>> {
        // Checked before binding anything, so that a missing [tls] leaves no listener behind.
        let tls = self.tls_bind.map(|_| ctx.tls_for(self.settings.1)).transpose()?;
        let listener = bind_tcp(self.settings.0, self.bind).await?;
        let mut addrs = vec![listener.local_addr()?];
        spawn_tcp(listener, handler.clone(), self.limits, ctx);
        info!(addr = %addrs[0], "{} listening", self.label);
        if let (Some(tls_bind), Some(tls)) = (self.tls_bind, tls) {
            let listener = bind_tcp(self.settings.1, tls_bind).await?;
            let addr = listener.local_addr()?;
            spawn_tls(listener, handler, self.limits, ctx, tls);
            info!(%addr, "{} over TLS listening", self.label);
            addrs.push(addr);
        }
        Ok(addrs)
    }
}

/// Binds a TCP listener, naming the listener in the error so a user knows which setting to fix.
pub async fn bind_tcp(name: &str, addr: SocketAddr) -> io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen for {name} on {addr}: {e}")))
}

/// Spawns the accept loop for `listener` on the context's tracker. Connections beyond
/// `limits` (on the listener, or from one address) are accepted and closed at once (counted
/// as refused), so a flood cannot exhaust memory or file descriptors, nor one host lock
/// everyone else out.
pub fn spawn_tcp<H: ConnectionHandler>(
    listener: TcpListener,
    handler: Arc<H>,
    limits: ConnectionLimits,
    ctx: &FrontEndContext,
) {
    spawn(listener, handler, limits, ctx, None);
}

/// As [`spawn_tcp`], for a listener whose connections start with a TLS handshake (a
/// `tls_bind`). A client that does not complete it (a plain client on the TLS port, a
/// certificate refused) is closed, counted as a protocol error and logged.
pub fn spawn_tls<H: ConnectionHandler>(
    listener: TcpListener,
    handler: Arc<H>,
    limits: ConnectionLimits,
    ctx: &FrontEndContext,
    tls: Arc<Tls>,
) {
    spawn(listener, handler, limits, ctx, Some(tls));
}

fn spawn<H: ConnectionHandler>(
    listener: TcpListener,
    handler: Arc<H>,
    limits: ConnectionLimits,
    ctx: &FrontEndContext,
    tls: Option<Arc<Tls>>,
) {
    let ctx = ctx.clone();
    let tracker = ctx.tracker.clone();
    let admission = Admission::new(limits, handler.protocol(), ctx.router.metrics().clone());
    tracker.spawn(accept_loop(listener, handler, admission, ctx, tls));
}

async fn accept_loop<H: ConnectionHandler>(
    listener: TcpListener,
    handler: Arc<H>,
    admission: Arc<Admission>,
    ctx: FrontEndContext,
    tls: Option<Arc<Tls>>,
) {
    let protocol = handler.protocol();
    let mut backoff = Duration::from_millis(5);
    loop {
        let accepted = tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(pair) => {
                backoff = Duration::from_millis(5);
                pair
            }
            Err(e) => {
                // Usually out of file descriptors: wait for some to free up instead of spinning.
                warn!(%protocol, error = %e, "accept failed; retrying in {backoff:?}");
                tokio::select! {
                    _ = ctx.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let Some(admitted) = admission.admit(peer.ip()) else { continue };
        let _ = stream.set_nodelay(true);
        match &tls {
            None => serve_connection(&handler, &ctx, peer, admitted, TransportKind::Tcp, async move {
                Ok(Transport::Tcp(stream))
            }),
            Some(tls) => {
                serve_connection(&handler, &ctx, peer, admitted, TransportKind::Tls, handshake(tls.clone(), stream))
            }
        }
    }
}

/// Runs one admitted connection in the broker's task tracker, once `stream` (a TLS
/// handshake, or a transport ready at once) gives its transport: its log label, the connection
/// gauge, and the close reason counted and logged, whatever the protocol and transport.
fn serve_connection<H: ConnectionHandler>(
    handler: &Arc<H>,
    ctx: &FrontEndContext,
    peer: SocketAddr,
    admitted: Admitted,
    kind: TransportKind,
    stream: impl Future<Output = Result<Transport, CloseReason>> + Send + 'static,
) {
    let protocol = handler.protocol();
    let open = admitted.open();
    debug!(%protocol, %peer, transport = %kind, "connection opened");
    let (shutdown, router, handler) = (ctx.shutdown.clone(), ctx.router.clone(), handler.clone());
    // Combinators, not an async block: the handshake (boxed, while it runs) and the
    // connection each take the task's memory in turn, not together.
    let run = Box::pin(stream).then(move |stream| match stream {
        Ok(stream) => Either::Left(handler.handle(Connection { stream, peer, shutdown, router })),
        Err(reason) => Either::Right(std::future::ready(reason)),
    });
    let task = run.map(move |reason| {
        open.closed(reason);
        match reason {
            CloseReason::ClientClosed | CloseReason::Shutdown => debug!(%reason, "connection closed"),
            _ => info!(%reason, "connection closed"),
        }
    });
    ctx.tracker.spawn(Labelled::new(task, Label::new(protocol, peer, kind)));
}

/// The server side of a TLS handshake; why the connection ended when it failed.
async fn handshake(tls: Arc<Tls>, stream: TcpStream) -> Result<Transport, CloseReason> {
    match tls.accept(stream).await {
        Ok((stream, identity)) => Ok(Transport::layered(stream, TransportKind::Tls).with_identity(identity)),
        Err(error) => {
            info!(%error, "TLS handshake failed");
            Err(CloseReason::ProtocolError)
        }
    }
}
