//! One XMPP connection: the [`XmppSession`] and the items held back while a subscriber is
//! full, as a [`ProtocolSession`] the core's connection driver ([`tolk_core::drive`]) runs.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use tolk_core::drive::{DriveLimits, Egress, ProtocolSession, TransportKind, drive};
use tolk_core::hold::{self, Held, HeldInput};
use tolk_core::listener::{Connection, ConnectionHandler};
use tolk_core::store::StoreError;
use tolk_core::{CloseReason, Delivery, Metrics, Protocol, Session};
use tolk_tls::Tls;
use tracing::debug;
use xmpp_codec::Event;

use crate::session::{Service, XmppSession};

/// What every connection of a listener shares.
pub(crate) struct XmppHandler {
    /// Configuration, users and certificates.
    pub service: Arc<Service>,
}

impl ConnectionHandler for XmppHandler {
    fn protocol(&self) -> Protocol {
        Protocol::Xmpp
    }

    fn handle(self: Arc<Self>, connection: Connection) -> impl Future<Output = CloseReason> + Send {
        run(self, connection)
    }
}

/// Runs one XMPP connection to its end.
fn run(handler: Arc<XmppHandler>, connection: Connection) -> impl Future<Output = CloseReason> + Send {
    let Connection { stream, peer, shutdown, router } = connection;
    let core = router.open_session(Protocol::Xmpp);
    let identity = stream.identity();
    let config = &handler.service.config;
    // On a `tls_bind` listener TLS is in force from the first byte: no STARTTLS then.
    let secure = stream.kind() == TransportKind::Tls;
    let session = XmppSession::new(handler.service.clone(), peer, core, secure, Instant::now()).with_identity(identity);
    let connection =
        XmppConnection { session, held: None, egress: Egress::new(Protocol::Xmpp), metrics: router.metrics().clone() };
    // 8 KiB per read (the driver pauses reading above 256 KiB of unwritten output), and a
    // client that takes none of it for `write_timeout` is a slow consumer.
    let limits = DriveLimits::new(8 * 1024, Some(config.write_timeout));
    drive(connection, stream, BytesMut::new(), shutdown, None, limits)
}

/// An XMPP connection as the driver sees it.
struct XmppConnection {
    session: XmppSession,
    /// Stanzas held back while a subscriber of this client's items is full (see [`hold`]).
    held: Option<Box<Held<Event>>>,
    egress: Egress,
    metrics: Arc<Metrics>,
}

impl ProtocolSession for XmppConnection {
    fn core(&self) -> &Session {
        self.session.core()
    }

    fn handle_bytes(&mut self, input: &mut BytesMut, now: Instant) {
        self.session.note_read(now);
        let XmppConnection { session, held, .. } = self;
        let _ = hold::handle_input(&mut Input { input, session }, held);
    }

    fn handle_eof(&mut self, partial: bool) {
        debug!(partial, "XMPP client closed the connection");
        self.session.end(if partial { CloseReason::IoError } else { CloseReason::ClientClosed });
    }

    fn handle_io_error(&mut self, error: &io::Error) {
        debug!(%error, "socket error");
        self.session.end(CloseReason::IoError);
    }

    fn may_read(&self) -> bool {
        hold::may_read(&self.held) && (!self.session.is_throttled() || self.session.may_read(Instant::now()))
    }

    /// The clock is read only while a throttle is under way.
    fn input_ready(&mut self) -> bool {
        self.session.is_throttled() && self.session.input_ready(Instant::now())
    }

    fn delivery_window(&self) -> usize {
        if self.session.accepts_deliveries() { usize::MAX } else { 0 }
    }

    fn handle_deliveries(&mut self, batch: &mut Vec<Delivery>, now: Instant) {
        for delivery in batch.drain(..) {
            if self.session.handle_delivery(&delivery, now) {
                self.egress.record(self.session.output().len(), &delivery, now, None);
            }
        }
    }

    fn handle_overflow(&mut self, _now: Instant) {
        self.session.handle_slow_consumer();
    }

    fn handle_durable(&mut self, result: Result<(), StoreError>, _now: Instant) {
        self.session.handle_durable(result);
    }

    /// XMPP watches no signal.
    fn handle_signal(&mut self, _now: Instant) {}

    fn poll_timeout(&self) -> Option<Instant> {
        self.session.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.session.handle_timeout(now);
    }

    fn excuse_silence(&mut self, now: Instant) {
        self.session.note_read(now);
    }

    fn begin_shutdown(&mut self, _now: Instant) {
        self.session.handle_shutdown();
    }

    fn take_start_tls(&mut self) -> Option<Arc<Tls>> {
        self.session.take_upgrade()
    }

    fn tls_started(&mut self, identity: Option<Arc<str>>, _now: Instant) {
        self.session.tls_started(identity);
    }

    fn pending_output(&self) -> &[u8] {
        self.session.output()
    }

    fn advance_output(&mut self, n: usize, now: Instant) {
        self.session.advance_output(n);
        self.egress.written(n, now, &self.metrics);
    }

    fn finished(&self) -> Option<CloseReason> {
        self.session.finished()
    }
}

/// A connection's read input, as [`hold::handle_input`] drives it.
struct Input<'a> {
    input: &'a mut BytesMut,
    session: &'a mut XmppSession,
}

impl HeldInput for Input<'_> {
    type Frame = Event;
    type Error = CloseReason;

    fn is_congesting(&self) -> bool {
        self.session.core().is_congesting()
    }

    fn decode(&mut self) -> Result<Option<Event>, CloseReason> {
        self.session.next_event(self.input)
    }

    fn handle(&mut self, event: Event) -> Result<(), CloseReason> {
        self.session.handle_event(event, Instant::now())
    }

    /// XMPP has no acknowledgements of deliveries: everything waits in order.
    fn passes_hold(_event: &Event) -> bool {
        false
    }

    /// A stanza's size is not kept once parsed; the stanza limit bounds each one.
    fn size_of(_event: &Event) -> usize {
        1024
    }
}
