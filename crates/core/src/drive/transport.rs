//! What a connection's bytes travel over: plain TCP, or a byte stream layered on it (TLS, a
//! WebSocket). Sessions and the driver see only bytes in and bytes out.
//!
//! Plain TCP keeps its own path: reading waits for readability with no buffer, so that an idle
//! connection holds none. A layered stream reads into a buffer reserved for the read and given
//! back when nothing came (its layer keeps buffers of its own anyway). Its two directions are
//! split with `tokio::io::split`, so that writing never waits for reading, as on TCP. A write
//! to it completes once the layer has flushed it: taken means on its way, as on TCP, so that
//! nothing waits in a TLS record or a WebSocket frame for a write that may never come.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::net::tcp;
use tolk_metrics::Protocol;

/// A byte stream a connection can run over.
pub trait ByteStream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> ByteStream for T {}

/// Which layer a connection runs over, for logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// Plain TCP.
    Tcp,
    /// TLS over TCP.
    Tls,
    /// A WebSocket on the HTTP port (over TLS or not).
    WebSocket,
}

impl TransportKind {
    /// The protocol label of `protocol`'s sessions over this transport: WebSocket sessions get
    /// labels of their own (`mqtt-ws`), so that latency and counters tell them apart.
    pub fn label(self, protocol: Protocol) -> Protocol {
        match (self, protocol) {
            (TransportKind::WebSocket, Protocol::Mqtt) => Protocol::MqttWs,
            (TransportKind::WebSocket, Protocol::Stomp) => Protocol::StompWs,
            _ => protocol,
        }
    }

    /// The label in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Tcp => "tcp",
            TransportKind::Tls => "tls",
            TransportKind::WebSocket => "ws",
        }
    }
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One connection's transport.
pub enum Transport {
    /// Plain TCP.
    Tcp(TcpStream),
    /// A layered stream, split in its two directions.
    Layered(Box<Layered>),
}

/// A layered stream's two halves and what it is.
pub struct Layered {
    reader: ReadHalf<Box<dyn ByteStream>>,
    writer: WriteHalf<Box<dyn ByteStream>>,
    /// Bytes the layer took whose flush is still under way.
    flushing: Option<usize>,
    kind: TransportKind,
    identity: Option<Arc<str>>,
}

impl Transport {
    /// A connection over `stream`, a TLS stream or a WebSocket adapted to bytes.
    pub fn layered(stream: impl ByteStream, kind: TransportKind) -> Transport {
        let (reader, writer) = tokio::io::split(Box::new(stream) as Box<dyn ByteStream>);
        Transport::Layered(Box::new(Layered { reader, writer, flushing: None, kind, identity: None }))
    }

    /// The same transport, whose client a TLS client certificate names (`[tls]
    /// use_identity_as_username`). Plain TCP has no such name: it is left as it is.
    pub fn with_identity(mut self, identity: Option<String>) -> Transport {
        if let Transport::Layered(layered) = &mut self {
            layered.identity = identity.map(Arc::from);
        }
        self
    }

    /// The user name a client certificate gave, which wins over the credentials the client
    /// sends (see [`crate::auth::Credentials::with_identity`]).
    pub fn identity(&self) -> Option<Arc<str>> {
        match self {
            Transport::Tcp(_) => None,
            Transport::Layered(layered) => layered.identity.clone(),
        }
    }

    /// What it runs over.
    pub fn kind(&self) -> TransportKind {
        match self {
            Transport::Tcp(_) => TransportKind::Tcp,
            Transport::Layered(layered) => layered.kind,
        }
    }

    /// The two directions, to be used at the same time.
    pub fn split(&mut self) -> (Reader<'_>, Writer<'_>) {
        match self {
            Transport::Tcp(stream) => {
                let (reader, writer) = stream.split();
                (Reader::Tcp(reader), Writer::Tcp(writer))
            }
            Transport::Layered(layered) => {
                let Layered { reader, writer, flushing, .. } = &mut **layered;
                (Reader::Layered(reader), Writer::Layered(writer, flushing))
            }
        }
    }
}

/// The reading direction of a [`Transport`].
pub enum Reader<'a> {
    /// Plain TCP.
    Tcp(tcp::ReadHalf<'a>),
    /// A layered stream.
    Layered(&'a mut ReadHalf<Box<dyn ByteStream>>),
}

impl Reader<'_> {
    /// Reads into `input`, reserving `chunk` bytes only when there is something to read (TCP)
    /// or for the read itself (a layered stream: given back if nothing came). `Ok(0)`: the
    /// peer closed its side.
    pub fn poll_read_into(
        &mut self,
        cx: &mut Context<'_>,
        input: &mut BytesMut,
        chunk: usize,
    ) -> Poll<io::Result<usize>> {
        match self {
            Reader::Tcp(reader) => {
                ready!(reader.as_ref().poll_read_ready(cx))?;
                // Read through `AsyncRead` rather than `try_read_buf`: a read that does not fill
                // the buffer then counts as draining the socket, so the next wait goes to epoll
                // instead of a `recvfrom` that finds nothing (one wasted system call per
                // wake-up of every busy connection otherwise).
                read_into(Pin::new(reader), cx, input, chunk)
            }
            Reader::Layered(reader) => read_into(Pin::new(&mut **reader), cx, input, chunk),
        }
    }
}

/// Reads into `input` with `chunk` bytes reserved for the read, and gives the buffer back if
/// nothing came (readiness was stale, or a layer had no whole record yet), so that a connection
/// waits without one.
fn read_into(
    reader: Pin<&mut impl AsyncRead>,
    cx: &mut Context<'_>,
    input: &mut BytesMut,
    chunk: usize,
) -> Poll<io::Result<usize>> {
    input.reserve(chunk);
    let polled = tokio_util::io::poll_read_buf(reader, cx, input);
    if polled.is_pending() && input.is_empty() {
        *input = BytesMut::new();
    }
    polled
}

impl AsyncRead for Reader<'_> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Reader::Tcp(reader) => Pin::new(reader).poll_read(cx, buf),
            Reader::Layered(reader) => Pin::new(&mut **reader).poll_read(cx, buf),
        }
    }
}

/// The writing direction of a [`Transport`].
pub enum Writer<'a> {
    /// Plain TCP.
    Tcp(tcp::WriteHalf<'a>),
    /// A layered stream, and how much of the last write is being flushed.
    Layered(&'a mut WriteHalf<Box<dyn ByteStream>>, &'a mut Option<usize>),
}

impl AsyncWrite for Writer<'_> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Writer::Tcp(writer) => Pin::new(writer).poll_write(cx, buf),
            Writer::Layered(writer, flushing) => {
                // The caller comes back with the same bytes until it is told they were taken.
                let n = match **flushing {
                    Some(n) => n,
                    None => ready!(Pin::new(&mut **writer).poll_write(cx, buf))?,
                };
                if Pin::new(&mut **writer).poll_flush(cx)?.is_pending() {
                    **flushing = Some(n);
                    return Poll::Pending;
                }
                **flushing = None;
                Poll::Ready(Ok(n))
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Writer::Tcp(writer) => Pin::new(writer).poll_flush(cx),
            Writer::Layered(writer, _) => Pin::new(&mut **writer).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Writer::Tcp(writer) => Pin::new(writer).poll_shutdown(cx),
            Writer::Layered(writer, _) => Pin::new(&mut **writer).poll_shutdown(cx),
        }
    }
}
