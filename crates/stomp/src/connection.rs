//! The per-connection task: one `tokio::select!` over socket reads, outbox deliveries, the
//! session's timer and broker shutdown. It owns the socket, the read buffer and the decoder;
//! every decision is the [`StompSession`]'s. After each event it writes everything the session
//! produced and flushes once.
//!
//! The decoder is driven straight from the read buffer (no `FramedRead`) so that every byte
//! read, not only every complete frame, counts as proof of life for heart-beating.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use bytes::BytesMut;
use stomp_codec::{Command, Decoded, Decoder, Frame};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedReadHalf;
use tokio::time::{sleep_until, timeout};
use tolk_core::hold::{self, Held, HeldInput};
use tolk_core::listener::{Connection, ConnectionHandler, linger};
use tolk_core::{CloseReason, Protocol, frontend::record_delivery};
use tracing::debug;

use crate::config::StompConfig;
use crate::session::{Now, StompSession, Written};
use tolk_core::auth::Authenticator;

/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 8 * 1024;
/// Deliveries taken from the outbox per wake-up, so one flush covers a burst.
const BATCH: usize = 64;

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

/// Runs one STOMP connection to its end.
pub(crate) async fn run(handler: Arc<StompHandler>, connection: Connection) -> CloseReason {
    let Connection { stream, peer, shutdown, router } = connection;
    let (mut reader, mut writer) = stream.into_split();
    let metrics = router.metrics().clone();
    let config = handler.config.clone();
    let core = router.open_session(Protocol::Stomp);
    let mut session = StompSession::new(config.clone(), handler.auth.clone(), peer, core, Instant::now());
    let mut decoder = Decoder::new(config.limits());
    // Empty until bytes arrive, and released once they are all decoded: an idle connection
    // holds no read buffer.
    let mut input = BytesMut::new();
    let mut batch = Vec::with_capacity(BATCH);
    let mut written: Vec<Written> = Vec::new();
    let mut held = None;

    // One timer for the connection's life, moved to each new deadline: a deadline that only
    // moves later (heart-beats) costs an atomic store, not a timer-wheel insertion per event.
    let mut timer = Box::pin(sleep_until(Instant::now().into()));
    loop {
        let deadline = session.poll_timeout();
        if let Some(at) = deadline {
            timer.as_mut().reset(at.into());
        }
        if input.is_empty() && input.capacity() > 0 {
            input = BytesMut::new();
        }
        // While a subscriber of this client's messages is full, its SENDs are held back (ACKs
        // still pass); once as much is held as may be, reading stops: TCP then slows the
        // publisher down instead of the subscriber being dropped.
        let congested = session.core().is_congesting();
        let reading = hold::may_read(&held);
        let max_deliveries = if session.accepts_deliveries() { BATCH } else { 0 };
        let step = tokio::select! {
            _ = shutdown.cancelled() => Err(session.handle_shutdown()),
            // Waits for readability without a buffer; one is allocated only when bytes are there.
            read = read_some(&reader, &mut input), if reading => match read {
                Ok(None) => Ok(()),
                Ok(Some(0)) if input.is_empty() => return CloseReason::ClientClosed,
                Ok(Some(0)) => {
                    debug!(buffered = input.len(), "connection ended inside a frame");
                    return CloseReason::IoError;
                }
                Ok(Some(_)) => {
                    session.note_read(Instant::now());
                    decode_input(&mut decoder, &mut input, &mut session, &mut held)
                }
                Err(e) => {
                    debug!(error = %e, "read failed");
                    return CloseReason::IoError;
                }
            },
            // Polled even when the client holds all the unacknowledged messages it may (max 0):
            // it then returns only when the outbox overflows, which is how a client that stops
            // acknowledging is told and closed instead of being dropped from silently.
            drained = session.receiver().drain(&mut batch, max_deliveries) => match drained {
                Ok(_) => {
                    let now = Now::current();
                    written.extend(batch.drain(..).filter_map(|d| session.handle_delivery(d, now)));
                    Ok(())
                }
                Err(_overflowed) => Err(session.handle_slow_consumer()),
            },
            () = session.core().relieve_congestion(), if congested => {
                session.note_read(Instant::now());
                decode_input(&mut decoder, &mut input, &mut session, &mut held)
            }
            () = timer.as_mut(), if deadline.is_some() => {
                if !reading {
                    // Not read meanwhile: the silence is the broker's, not the client's.
                    session.note_read(Instant::now());
                }
                session.handle_timeout(Instant::now())
            }
        };

        if let Some(mut out) = session.take_output() {
            match timeout(config.write_timeout, writer.write_all_buf(&mut out)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    debug!(error = %e, "write failed");
                    return CloseReason::IoError;
                }
                Err(_) => {
                    debug!(timeout = ?config.write_timeout, "write timed out");
                    return CloseReason::SlowConsumer;
                }
            }
            let written_at = Instant::now();
            session.note_written(written_at);
            let counters = metrics.protocol(Protocol::Stomp);
            for w in written.drain(..) {
                counters.messages_out.fetch_add(1, Relaxed);
                record_delivery(&metrics, Protocol::Stomp, &w.delivery, w.taken_at, written_at);
                if w.settle
                    && let Some(ack) = &w.delivery.ack
                {
                    ack.ack();
                }
            }
        }

        if let Err(reason) = step {
            // Subscriptions end before lingering: a client that is gone must not hold
            // publishers back for the second the socket drains.
            drop(session);
            Box::pin(linger(&mut reader, &mut writer, &shutdown)).await;
            return reason;
        }
    }
}

/// Waits until the socket is readable, then reads what is there into `input` (growing it
/// only now). `None` when the readiness was spurious.
async fn read_some(reader: &OwnedReadHalf, input: &mut BytesMut) -> std::io::Result<Option<usize>> {
    reader.readable().await?;
    input.reserve(READ_CHUNK);
    match reader.try_read_buf(input) {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

/// Hands every complete frame in `input` to the session, holding SENDs back while a
/// subscriber of this client's messages is full (see [`hold`]); stops at the first frame
/// that ends the connection.
fn decode_input(
    decoder: &mut Decoder,
    input: &mut BytesMut,
    session: &mut StompSession,
    held: &mut Option<Box<Held<Frame>>>,
) -> Result<(), CloseReason> {
    hold::handle_input(&mut Input { decoder, input, session }, held)
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
