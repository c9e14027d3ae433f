//! The shared TCP accept loop: binding with a useful error, admission (connection limits per
//! listener and per address), one `tracing` span per connection, the connection gauge,
//! close-reason metrics and shutdown. A protocol supplies only a [`ConnectionHandler`].

mod admission;
mod linger;

pub use admission::{Admission, Admitted, ConnectionLimits};
pub use linger::{LINGER, linger};

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::drive::Transport;
use crate::frontend::FrontEndContext;
use crate::router::Router;
use tolk_metrics::{CloseReason, Protocol};

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
    let ctx = ctx.clone();
    let tracker = ctx.tracker.clone();
    let admission = Admission::new(limits, handler.protocol(), ctx.router.metrics().clone());
    tracker.spawn(accept_loop(listener, handler, admission, ctx));
}

async fn accept_loop<H: ConnectionHandler>(
    listener: TcpListener,
    handler: Arc<H>,
    admission: Arc<Admission>,
    ctx: FrontEndContext,
) {
    let protocol = handler.protocol();
    let metrics = ctx.router.metrics().clone();
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
        // Clones, not child tokens: nothing cancels one connection alone, and a child token
        // would cost every connection an allocation.
        let connection = Connection {
            stream: Transport::Tcp(stream),
            peer,
            shutdown: ctx.shutdown.clone(),
            router: ctx.router.clone(),
        };
        // `client_id` is filled in by the protocol once the client names itself: one span per
        // connection (a span is 40 bytes in every connection's task).
        let span = info_span!("conn", %protocol, %peer, client_id = tracing::field::Empty);
        let open = metrics.connection_opened(protocol);
        span.in_scope(|| debug!("connection opened"));
        // The handler's future is mapped, not awaited inside an `async` block: a block would
        // keep its own copy of the connection beside the handler's, in every connection's
        // task. If the handler panics, dropping the closure still gives back the permit and
        // the gauge.
        let task = handler.clone().handle(connection).map(move |reason| {
            let _admitted = admitted;
            open.closed(reason);
            match reason {
                CloseReason::ClientClosed | CloseReason::Shutdown => debug!(%reason, "connection closed"),
                _ => info!(%reason, "connection closed"),
            }
        });
        ctx.tracker.spawn(task.instrument(span));
    }
}
