//! Which connection a log line comes from, without a `tracing` span per connection.
//!
//! A span kept open for a connection's life costs it about 420 bytes at the `info` level,
//! idle or not: the subscriber's slot, its extension map and the formatted fields. A span made
//! afresh around each poll costs nothing idle, but about 700 instructions per poll (8.5 % more
//! per message). Instead, the task keeps only what identifies it (the protocol, the peer, the
//! transport and, once the client has named itself, its id) in a box of 48 bytes, and lends it
//! to its thread while it is polled; the log formatter appends it to every line written meanwhile
//! ([`write_current_label`]). Below the `info` level nothing is kept: 8 bytes in the task.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tracing::{Level, enabled};

use crate::drive::TransportKind;
use tolk_metrics::Protocol;

thread_local! {
    /// The label of the connection whose task this thread is polling.
    static POLLED: RefCell<Option<Box<Label>>> = const { RefCell::new(None) };
}

/// Names the client of the connection whose task is being polled: its log lines carry
/// `client_id` from now on.
pub fn name_client(id: Arc<str>) {
    POLLED.with_borrow_mut(|label| {
        if let Some(label) = label {
            label.client_id = Some(id);
        }
    });
}

/// Writes ` protocol=… peer=…` (and the transport and client id, when known) to `out` if this
/// thread is polling a connection's task: the log formatter's suffix for the lines it writes.
pub fn write_current_label(out: &mut dyn fmt::Write) -> fmt::Result {
    POLLED.with_borrow(|label| label.as_ref().map_or(Ok(()), |label| write!(out, " {label}")))
}

/// What identifies a connection in its log lines. The peer is kept as its address and port
/// (an IPv6 peer's flow label and scope are left out of the lines): 40 bytes with the rest, a
/// 48-byte chunk where a whole `SocketAddr` made it 64 (40 on the 32-bit Pi build, not 48).
pub struct Label {
    protocol: Protocol,
    transport: TransportKind,
    ip: IpAddr,
    port: u16,
    client_id: Option<Arc<str>>,
}

impl Label {
    /// The label of a connection from `peer`, before its client has named itself.
    pub fn new(protocol: Protocol, peer: SocketAddr, transport: TransportKind) -> Self {
        Label { protocol, transport, ip: peer.ip(), port: peer.port(), client_id: None }
    }
}

impl fmt::Display for Label {
    /// The transport is named only when it is not plain TCP.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "protocol={} peer={}", self.protocol, SocketAddr::new(self.ip, self.port))?;
        if self.transport != TransportKind::Tcp {
            write!(f, " transport={}", self.transport)?;
        }
        match &self.client_id {
            Some(id) => write!(f, " client_id={id}"),
            None => Ok(()),
        }
    }
}

pin_project_lite::pin_project! {
    /// `inner`, polled with its connection's label lent to the thread.
    pub struct Labelled<F> {
        label: Option<Box<Label>>,
        #[pin]
        inner: F,
    }
}

impl<F> Labelled<F> {
    /// `inner`, whose log lines carry `label` when `info` lines are written.
    pub fn new(inner: F, label: Label) -> Self {
        let label = enabled!(Level::INFO).then(|| Box::new(label));
        Labelled { label, inner }
    }
}

impl<F: Future> Future for Labelled<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        if this.label.is_none() {
            return this.inner.poll(cx);
        }
        let outer = POLLED.replace(this.label.take());
        let lent = Lent { slot: this.label, outer };
        let poll = this.inner.poll(cx);
        drop(lent);
        poll
    }
}

/// The label lent to the thread for one poll; taken back when dropped, even by a panic.
struct Lent<'a> {
    slot: &'a mut Option<Box<Label>>,
    outer: Option<Box<Label>>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        *self.slot = POLLED.replace(self.outer.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::filter::LevelFilter;
    use tracing_subscriber::layer::SubscriberExt;

    fn current() -> String {
        let mut out = String::new();
        write_current_label(&mut out).unwrap();
        out
    }

    #[test]
    fn the_label_is_lent_for_each_poll_and_keeps_the_named_client() {
        let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(LevelFilter::INFO));
        let peer: SocketAddr = "192.0.2.1:4000".parse().unwrap();
        let mut polls = 0;
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let inner = std::future::poll_fn({
            let seen = seen.clone();
            move |_| {
                polls += 1;
                seen.lock().unwrap().push(current());
                if polls == 1 {
                    name_client("sensor-7".into());
                    seen.lock().unwrap().push(current());
                }
                if polls < 2 { Poll::Pending } else { Poll::Ready(()) }
            }
        });
        let mut task = Box::pin(Labelled::new(inner, Label::new(Protocol::Mqtt, peer, TransportKind::Tls)));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(task.as_mut().poll(&mut cx).is_pending());
        assert_eq!(current(), "", "nothing is lent between polls");
        assert!(task.as_mut().poll(&mut cx).is_ready());
        let before = " protocol=mqtt peer=192.0.2.1:4000 transport=tls";
        let named = " protocol=mqtt peer=192.0.2.1:4000 transport=tls client_id=sensor-7";
        assert_eq!(*seen.lock().unwrap(), [before, named, named]);
    }

    #[test]
    fn a_panicking_poll_takes_its_label_back() {
        let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(LevelFilter::INFO));
        let peer: SocketAddr = "192.0.2.1:4000".parse().unwrap();
        let inner = std::future::poll_fn(|_| -> Poll<()> { panic!("bad input") });
        let mut task = Box::pin(Labelled::new(inner, Label::new(Protocol::Stomp, peer, TransportKind::Tcp)));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task.as_mut().poll(&mut cx)));
        assert!(panicked.is_err());
        assert_eq!(current(), "");
        assert!(task.label.is_some());
    }

    /// Every connection keeps one at the `info` level: 40 bytes are a 48-byte glibc chunk on
    /// 64-bit targets (as the Pi's aarch64 build), 32 bytes a 40-byte one on 32-bit (armv7).
    #[test]
    fn a_label_fits_the_48_byte_chunk() {
        let most = if cfg!(target_pointer_width = "64") { 40 } else { 32 };
        assert!(size_of::<Label>() <= most, "{} bytes", size_of::<Label>());
    }

    #[test]
    fn below_the_info_level_nothing_is_kept() {
        let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(LevelFilter::WARN));
        let peer: SocketAddr = "192.0.2.1:4000".parse().unwrap();
        let task = Labelled::new(std::future::ready(()), Label::new(Protocol::Stomp, peer, TransportKind::Tcp));
        assert!(task.label.is_none());
    }
}
