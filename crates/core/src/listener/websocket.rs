//! A protocol over WebSocket on the broker's HTTP port (`/mqtt`, `/stomp`): the upgrade, then
//! the protocol's own connection handler over the WebSocket's messages read and written as one
//! byte stream, as MQTT over WebSockets (MQTT 5.0 §6) and STOMP over WebSockets are specified.
//! A protocol frame may span messages and a message may hold several frames; the broker sends
//! binary messages.
//!
//! The upgraded connection is admitted with the protocol's own connection limits, runs in the
//! broker's task tracker (so that shutdown waits for its goodbye), and is logged and counted as
//! any connection of the protocol.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::{Buf, Bytes};
use futures_util::{Sink, Stream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tracing::info;

use super::{Admission, ConnectionHandler, ConnectionLimits, serve_connection};
use crate::drive::{Transport, TransportKind};
use crate::frontend::FrontEndContext;

/// One protocol's WebSocket endpoint.
#[derive(Debug, Clone, Copy)]
pub struct WebSocketEndpoint {
    /// The path on the HTTP port (`"/mqtt"`).
    pub path: &'static str,
    /// Subprotocols it speaks (`Sec-WebSocket-Protocol`), the preferred first. A client that
    /// offers none of them is still served, without a subprotocol in the answer.
    pub subprotocols: &'static [&'static str],
    /// Largest WebSocket message accepted; the protocol's own frame limit applies on top.
    pub max_message_bytes: usize,
    /// Connection limits for its upgraded connections.
    pub limits: ConnectionLimits,
}

struct Endpoint<H> {
    config: WebSocketEndpoint,
    handler: Arc<H>,
    admission: Arc<Admission>,
    ctx: FrontEndContext,
}

impl WebSocketEndpoint {
    /// The route that upgrades requests to `path` and runs `handler` over them.
    pub fn routes<H: ConnectionHandler>(self, handler: Arc<H>, ctx: &FrontEndContext) -> axum::Router {
        let admission = Admission::new(self.limits, handler.protocol(), ctx.router.metrics().clone());
        let endpoint = Arc::new(Endpoint { config: self, handler, admission, ctx: ctx.clone() });
        axum::Router::new().route(self.path, axum::routing::get(upgrade::<H>)).with_state(endpoint)
    }
}

async fn upgrade<H: ConnectionHandler>(
    State(endpoint): State<Arc<Endpoint<H>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let Some(admitted) = endpoint.admission.admit(peer.ip()) else {
        return (StatusCode::SERVICE_UNAVAILABLE, "too many connections\n").into_response();
    };
    let max = endpoint.config.max_message_bytes;
    let upgrade =
        upgrade.protocols(endpoint.config.subprotocols.iter().copied()).max_message_size(max).max_frame_size(max);
    upgrade.on_upgrade(move |socket| {
        let protocol = endpoint.handler.protocol();
        info!(%protocol, %peer, path = endpoint.config.path, "WebSocket connection upgraded");
        let stream = Transport::layered(WebSocketBytes::new(socket), TransportKind::WebSocket);
        serve_connection(&endpoint.handler, &endpoint.ctx, peer, admitted, TransportKind::WebSocket, async move {
            Ok(stream)
        });
        std::future::ready(())
    })
}

/// A WebSocket read and written as one byte stream.
pub struct WebSocketBytes {
    socket: WebSocket,
    /// What is left of the last message read.
    unread: Bytes,
}

impl WebSocketBytes {
    /// Bytes over `socket`.
    pub fn new(socket: WebSocket) -> Self {
        WebSocketBytes { socket, unread: Bytes::new() }
    }
}

fn to_io(error: axum::Error) -> io::Error {
    io::Error::other(error)
}

impl AsyncRead for WebSocketBytes {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.unread.is_empty() {
                let n = this.unread.len().min(buf.remaining());
                buf.put_slice(&this.unread[..n]);
                this.unread.advance(n);
                return Poll::Ready(Ok(()));
            }
            match ready!(Pin::new(&mut this.socket).poll_next(cx)) {
                Some(Ok(Message::Binary(bytes))) => this.unread = bytes,
                // STOMP clients often send text messages; their bytes are the frame.
                Some(Ok(Message::Text(text))) => this.unread = Bytes::from(text),
                // Pings are answered by the WebSocket layer itself.
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                // A close message or the end of the stream: the peer is gone.
                Some(Ok(Message::Close(_))) | None => return Poll::Ready(Ok(())),
                Some(Err(e)) => return Poll::Ready(Err(to_io(e))),
            }
        }
    }
}

impl AsyncWrite for WebSocketBytes {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let socket = &mut self.get_mut().socket;
        ready!(Pin::new(&mut *socket).poll_ready(cx)).map_err(to_io)?;
        Pin::new(socket).start_send(Message::Binary(Bytes::copy_from_slice(buf))).map_err(to_io)?;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().socket).poll_flush(cx).map_err(to_io)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().socket).poll_close(cx).map_err(to_io)
    }
}
