//! One STOMP connection: the [`StompSession`], the decoder in front of it and the publishes
//! held back while a subscriber is full, as a [`ProtocolSession`] the core's connection driver
//! ([`tolk_core::drive`]) runs. Every decision is the session's.
//!
//! The decoder is driven straight from the read buffer (no `FramedRead`) so that every byte
//! read, not only every complete frame, counts as proof of life for heart-beating.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use stomp_codec::{Command, Decoded, Decoder, Frame};
use tolk_core::auth::Authenticator;
use tolk_core::drive::{DriveLimits, Egress, ProtocolSession, drive};
use tolk_core::hold::{self, Held, HeldInput};
use tolk_core::listener::{Connection, ConnectionHandler};
use tolk_core::store::StoreError;
use tolk_core::{CloseReason, Delivery, Metrics, Protocol, Session};
use tracing::debug;

use crate::config::StompConfig;
use crate::session::{Now, StompSession};

/// What every connection shares: configuration and the authentication hook.
pub(crate) struct StompHandler {
    /// The `[stomp]` settings.
    pub config: Arc<StompConfig>,
    /// CONNECT credentials go through this.
    pub auth: Arc<dyn Authenticator>,
}

impl ConnectionHandler for StompHandler {
    fn protocol(&self) -> Protocol {
        Protocol::Stomp
    }

    fn handle(self: Arc<Self>, connection: Connection) -> impl Future<Output = CloseReason> + Send {
        run(self, connection)
    }
}

/// Runs one STOMP connection to its end. Not an `async fn`: the session is made here and moved
/// into the driver's future, which is all the connection's task holds.
fn run(handler: Arc<StompHandler>, connection: Connection) -> impl Future<Output = CloseReason> + Send {
    let Connection { stream, peer, shutdown, router } = connection;
    let config = handler.config.clone();
    let protocol = stream.kind().label(Protocol::Stomp);
    let core = router.open_session(protocol);
    let identity = stream.identity();
    let session =
        StompSession::new(config.clone(), handler.auth.clone(), peer, core, Instant::now()).with_identity(identity);
    let connection = StompConnection {
        decoder: Decoder::new(config.limits()),
        session,
        held: None,
        egress: Egress::new(protocol),
        metrics: router.metrics().clone(),
        finished: None,
    };
    // 8 KiB per read (the driver pauses reading above 256 KiB of unwritten output), and a
    // client that takes none of it for `write_timeout` is a slow consumer.
    let limits = DriveLimits::new(8 * 1024, Some(config.write_timeout));
    drive(connection, stream, BytesMut::new(), shutdown, None, limits)
}

/// A STOMP connection as the driver sees it.
struct StompConnection {
    session: StompSession,
    decoder: Decoder,
    /// SENDs held back while a subscriber of this client's messages is full (see [`hold`]).
    held: Option<Box<Held<Frame>>>,
    egress: Egress,
    metrics: Arc<Metrics>,
    finished: Option<CloseReason>,
}

impl StompConnection {
    fn end(&mut self, reason: CloseReason) {
        self.finished.get_or_insert(reason);
    }
}

impl ProtocolSession for StompConnection {
    fn core(&self) -> &Session {
        self.session.core()
    }

    fn handle_bytes(&mut self, input: &mut BytesMut, now: Instant) {
        if self.finished.is_some() {
            input.clear();
            return;
        }
        self.session.note_read(now);
        let StompConnection { decoder, session, held, .. } = self;
        if let Err(reason) = hold::handle_input(&mut Input { decoder, input, session }, held) {
            self.end(reason);
        }
    }

    fn handle_eof(&mut self, partial: bool) {
        if partial {
            debug!("connection ended inside a frame");
            self.end(CloseReason::IoError);
        } else {
            self.end(CloseReason::ClientClosed);
        }
    }

    fn handle_io_error(&mut self, error: &io::Error) {
        debug!(%error, "socket error");
        self.end(CloseReason::IoError);
    }

    /// Publishes are held back here (ACKs and NACKs still pass) until as much is held as may
    /// be; only then does reading stop.
    fn may_read(&self) -> bool {
        hold::may_read(&self.held)
    }

    fn delivery_window(&self) -> usize {
        if self.finished.is_none() && self.session.accepts_deliveries() { usize::MAX } else { 0 }
    }

    fn handle_deliveries(&mut self, batch: &mut Vec<Delivery>, now: Instant) {
        let now = Now { instant: now, wall: std::time::SystemTime::now() };
        for delivery in batch.drain(..) {
            if let Some(w) = self.session.handle_delivery(delivery, now) {
                self.egress.record(self.session.output().len(), &w.delivery, w.taken_at, w.settle);
            }
        }
    }

    fn handle_overflow(&mut self, _now: Instant) {
        let reason = self.session.handle_slow_consumer();
        self.end(reason);
    }

    fn handle_durable(&mut self, result: Result<(), StoreError>, _now: Instant) {
        if let Err(reason) = self.session.handle_durable(result) {
            self.end(reason);
        }
    }

    /// STOMP watches no signal.
    fn handle_signal(&mut self, _now: Instant) {}

    fn poll_timeout(&self) -> Option<Instant> {
        if self.finished.is_some() { None } else { self.session.poll_timeout() }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Err(reason) = self.session.handle_timeout(now) {
            self.end(reason);
        }
    }

    fn excuse_silence(&mut self, now: Instant) {
        self.session.note_read(now);
    }

    fn begin_shutdown(&mut self, _now: Instant) {
        let reason = self.session.handle_shutdown();
        self.end(reason);
    }

    fn pending_output(&self) -> &[u8] {
        self.session.output()
    }

    fn advance_output(&mut self, n: usize, now: Instant) {
        self.session.advance_output(n, now);
        self.egress.written(n, now, &self.metrics);
    }

    fn finished(&self) -> Option<CloseReason> {
        self.finished
    }
}

/// A connection's read input, as [`hold::handle_input`] drives it.
struct Input<'a> {
    decoder: &'a mut Decoder,
    input: &'a mut BytesMut,
    session: &'a mut StompSession,
}

impl HeldInput for Input<'_> {
    type Frame = Frame;
    type Error = CloseReason;

    fn is_congesting(&self) -> bool {
        self.session.core().is_congesting()
    }

    fn decode(&mut self) -> Result<Option<Frame>, CloseReason> {
        loop {
            match self.decoder.decode(self.input) {
                Ok(None) => return Ok(None),
                Ok(Some(Decoded::HeartBeat)) => {}
                Ok(Some(Decoded::Frame(frame))) => return Ok(Some(frame)),
                Err(e) => return Err(self.session.handle_decode_error(e)),
            }
        }
    }

    fn handle(&mut self, frame: Frame) -> Result<(), CloseReason> {
        self.session.handle_frame(frame, Now::current())?;
        if self.decoder.version().is_none()
            && let Some(version) = self.session.version()
        {
            // Escapes apply from the frame after CONNECT on.
            self.decoder.set_version(version);
        }
        Ok(())
    }

    /// ACK and NACK settle this client's deliveries: the way out when it is its own slow
    /// subscriber.
    fn passes_hold(frame: &Frame) -> bool {
        matches!(frame.command, Command::Ack | Command::Nack)
    }

    fn size_of(frame: &Frame) -> usize {
        frame.body.len()
    }
}
