//! The connection driver: one task loop that runs any protocol session over a socket. The
//! session is sans-IO (bytes and time in, bytes out, see [`ProtocolSession`]); the driver owns
//! everything around it that every protocol needs alike: reading without holding a buffer while
//! idle, writing concurrently with reading (so a client that publishes while not reading cannot
//! deadlock the two sides), taking deliveries from the outbox in batches, the session's timer,
//! holding back reading while a subscriber of this connection's messages is full, broker
//! shutdown, and the clean close (the last bytes written, the session ended, then a linger so
//! that the client reads them instead of a reset).
//!
//! Memory stays bounded by a client that does not read: reading and taking deliveries pause
//! while more than [`HIGH_WATER`] bytes wait to be written.

mod egress;
mod timer;
mod transport;

pub use egress::Egress;
use timer::Timer;
pub use transport::{ByteStream, Reader, Transport, TransportKind, Writer};

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::delivery::Delivery;
use crate::lazy_vec::LazyVec;
use crate::listener::linger;
use crate::outbox::Wake;
use crate::router::Session;
use crate::stamp::Stamp;
use crate::store::StoreError;
use tolk_metrics::CloseReason;
use tolk_tls::Tls;

/// How long the last bytes (a close, an error frame) may take to be written before the socket
/// is closed anyway.
const FINAL_FLUSH: Duration = Duration::from_secs(2);

/// A protocol's connection state machine, as the driver runs it. Every method is called with
/// the current time and returns at once; output accumulates until the driver writes it.
pub trait ProtocolSession: Send {
    /// The core session: its outbox, and whether this connection's publishes are held back.
    fn core(&self) -> &Session;

    /// Bytes arrived (received at `now`): `input` holds everything not yet consumed; the
    /// session takes what it handles from the front and leaves an incomplete frame.
    fn handle_bytes(&mut self, input: &mut BytesMut, now: Instant);

    /// The peer closed its side; `partial` when it stopped inside a frame.
    fn handle_eof(&mut self, partial: bool);

    /// A socket read or write failed.
    fn handle_io_error(&mut self, error: &io::Error);

    /// Whether the driver should read now. False while a subscriber of this connection's
    /// messages is full and the session holds back no more input (TCP then slows the
    /// publisher down); a session that lets acknowledgements through meanwhile keeps reading
    /// for a while and holds its publishes back itself.
    fn may_read(&self) -> bool {
        !self.core().is_congesting()
    }

    /// Input read earlier and left undecoded (while the session throttled its client, see
    /// [`ProtocolSession::may_read`]) may be handled now: the driver hands the buffer back
    /// without reading. Asked on every round (so it takes no clock reading: a session that
    /// throttles reads its own), and answers true once per throttle.
    fn input_ready(&mut self) -> bool {
        false
    }

    /// How many deliveries it takes from the outbox now (0: none, but the outbox is still
    /// watched, so that an overflow is noticed even while the client may take nothing).
    fn delivery_window(&self) -> usize;

    /// Deliveries taken from the outbox at `now`; the session drains `batch`.
    fn handle_deliveries(&mut self, batch: &mut Vec<Delivery>, now: Instant);

    /// The outbox overflowed: this connection is a slow consumer.
    fn handle_overflow(&mut self, now: Instant);

    /// The oldest of the store commits pending on the core session
    /// ([`Session::await_durable`], [`crate::PublishOutcome::durable`]) ended: send the
    /// acknowledgement that waited for it, or the protocol's refusal.
    fn handle_durable(&mut self, _result: Result<(), StoreError>, _now: Instant) {}

    /// The signal the session asked the driver to watch (see [`drive`]) changed, or its
    /// outbox was signalled ([`crate::Outbox::signal`]).
    fn handle_signal(&mut self, now: Instant);

    /// When [`ProtocolSession::handle_timeout`] next has work to do.
    fn poll_timeout(&self) -> Option<Instant>;

    /// The deadline from [`ProtocolSession::poll_timeout`] passed.
    fn handle_timeout(&mut self, now: Instant);

    /// Counts as hearing from the peer: the driver did not read meanwhile (a subscriber of this
    /// connection's messages was full), so the silence is not the peer's.
    fn excuse_silence(&mut self, now: Instant);

    /// The broker is shutting down: say the protocol's goodbye.
    fn begin_shutdown(&mut self, now: Instant);

    /// The session agreed to a STARTTLS upgrade (XMPP): once its pending output (the
    /// protocol's go-ahead) is written, the driver runs the server side of a TLS handshake on
    /// the same TCP connection and carries on over TLS. Input read before the handshake is
    /// discarded, as RFC 6120 §5.4.3.3 asks: nothing sent in clear may count as sent under TLS.
    fn take_start_tls(&mut self) -> Option<Arc<Tls>> {
        None
    }

    /// The STARTTLS handshake completed; `identity` is the user a client certificate names
    /// (`[tls] use_identity_as_username`).
    fn tls_started(&mut self, _identity: Option<Arc<str>>, _now: Instant) {}

    /// Bytes waiting to be written.
    fn pending_output(&self) -> &[u8];

    /// `n` bytes of [`ProtocolSession::pending_output`] were written at `now` (egress latency
    /// is recorded here, after the write).
    fn advance_output(&mut self, n: usize, now: Instant);

    /// Why the connection ended, once it has: the driver writes what is pending and closes.
    fn finished(&self) -> Option<CloseReason>;

    /// The connection is over, for `reason` (the session's own, or the driver's: output not
    /// taken in time), and its last bytes are written or given up on. Runs before the socket
    /// lingers, so that a client that is gone holds nothing meanwhile; MQTT parks a persistent
    /// session here. By default the session is simply dropped.
    fn release(self, reason: CloseReason)
    where
        Self: Sized,
    {
        let _ = reason;
    }
}

/// Drops the `n` bytes just written from the front of a session's output buffer, and gives the
/// buffer back once everything is out, so that an idle connection holds none.
pub fn consume_written(out: &mut BytesMut, n: usize) {
    bytes::Buf::advance(out, n);
    if out.is_empty() {
        *out = BytesMut::new();
    }
}

/// Something outside the connection that its session wants to hear about on every change
/// (AMQP: a queue was deleted elsewhere), watched by the driver (see
/// [`ProtocolSession::handle_signal`]). A request for one connection alone (MQTT: another
/// connection took the client id over) goes through its outbox instead
/// ([`crate::Outbox::signal`]), which the driver watches anyway.
pub struct Signal(pub watch::Receiver<u64>);

/// Output bytes above which the driver stops reading and taking deliveries: the same for every
/// front end, so a constant rather than a field in the task of every connection.
pub const HIGH_WATER: usize = 256 * 1024;

/// Deliveries taken from the outbox per wake-up, at most (see [`HIGH_WATER`]).
const DELIVERY_BATCH: u8 = 64;

/// A front end's sizes for its connections (32-bit: they are small, and they sit in the task of
/// every connection).
#[derive(Debug, Clone, Copy)]
pub struct DriveLimits {
    /// Bytes asked of the socket per read.
    read_chunk: u32,
    /// Longest time in milliseconds the driver waits for the socket to take pending output;
    /// 0: no limit beyond [`HIGH_WATER`].
    write_timeout_ms: u32,
}

impl DriveLimits {
    /// Each read asks for `read_chunk` bytes; a client that takes none of its output for
    /// `write_timeout` is closed as a slow consumer (`None`: no limit beyond [`HIGH_WATER`]).
    /// The timeout is kept in whole milliseconds, at least 1 and at most 49 days.
    pub const fn new(read_chunk: u32, write_timeout: Option<Duration>) -> Self {
        let write_timeout_ms = match write_timeout {
            Some(timeout) if timeout.as_millis() > u32::MAX as u128 => u32::MAX,
            Some(timeout) if timeout.as_millis() == 0 => 1,
            Some(timeout) => timeout.as_millis() as u32,
            None => 0,
        };
        DriveLimits { read_chunk, write_timeout_ms }
    }

    fn write_timeout(&self) -> Option<Duration> {
        (self.write_timeout_ms > 0).then(|| Duration::from_millis(self.write_timeout_ms.into()))
    }
}

/// Runs `session` over `stream` until it finishes, the peer goes or the broker shuts down;
/// returns why it ended. `input` holds bytes already read and not yet handled (what followed an
/// MQTT CONNECT). `signal`, when given, is watched on the session's behalf. The session is
/// released before the socket lingers, so that a client that is gone holds nothing
/// (subscriptions, held publishers) while it drains.
///
/// Not an `async fn`: that would keep a second copy of every argument (the session among
/// them) in the task of every connection, beside the one the body works on.
#[allow(clippy::manual_async_fn, reason = "an async fn keeps its arguments twice in its state")]
pub fn drive<S: ProtocolSession>(
    session: S,
    stream: Transport,
    input: BytesMut,
    shutdown: CancellationToken,
    signal: Option<Signal>,
    limits: DriveLimits,
) -> impl Future<Output = CloseReason> + Send {
    let mut driver =
        Driver { session, io: Sources::new(stream, input, limits), shutdown, signal: signal.map(Box::new) };
    async move {
        let step = run(&mut driver).await;
        // Boxed: what follows runs once per connection, and its futures (a write, a timer,
        // the linger, a TLS handshake) should not size the task of every idle one.
        Box::pin(finish(driver, step)).await
    }
}

/// What follows the driver's loop: the close, or the connection over TLS.
async fn finish<S: ProtocolSession>(driver: Driver<S>, step: Step) -> CloseReason {
    match step {
        Step::Closed(reason) => {
            close(driver, reason).await;
            reason
        }
        Step::StartTls(tls) => serve_over_tls(driver, tls).await,
    }
}

/// The rest of a connection whose session asked for TLS: the handshake, then the driver over
/// TLS to the end. A second request ends the connection: TLS is not layered twice.
async fn serve_over_tls<S: ProtocolSession>(driver: Driver<S>, tls: Arc<Tls>) -> CloseReason {
    let mut driver = match upgrade(driver, tls).await {
        Ok(upgraded) => upgraded,
        Err(reason) => return reason,
    };
    let reason = match run(&mut driver).await {
        Step::Closed(reason) => reason,
        Step::StartTls(_) => {
            debug!("STARTTLS asked again over TLS");
            CloseReason::ProtocolError
        }
    };
    close(driver, reason).await;
    reason
}

/// Why [`run`] returned.
enum Step {
    /// The connection is over.
    Closed(CloseReason),
    /// The session asked for TLS (see [`ProtocolSession::take_start_tls`]).
    StartTls(Arc<Tls>),
}

/// The driver again, over TLS (see [`ProtocolSession::take_start_tls`]), or why the connection
/// ended; the session is released then.
async fn upgrade<S: ProtocolSession>(driver: Driver<S>, tls: Arc<Tls>) -> Result<Driver<S>, CloseReason> {
    let Driver { mut session, io, shutdown, signal } = driver;
    let limits = io.limits;
    match start_tls(io.stream, tls).await {
        Ok((stream, identity)) => {
            session.tls_started(identity, Instant::now());
            Ok(Driver { session, io: Sources::new(stream, BytesMut::new(), limits), shutdown, signal })
        }
        Err(reason) => {
            session.release(reason);
            Err(reason)
        }
    }
}

/// Runs the TLS handshake on a plain TCP connection. Not generic: the handshake is one copy
/// for every protocol. (input read before it is the caller's to
/// drop): the transport over TLS and the name a client certificate gives, or why the
/// connection ended.
async fn start_tls(stream: Transport, tls: Arc<Tls>) -> Result<(Transport, Option<Arc<str>>), CloseReason> {
    let Transport::Tcp(tcp) = stream else {
        debug!("STARTTLS asked on a connection that is not plain TCP");
        return Err(CloseReason::ProtocolError);
    };
    match tls.accept(tcp).await {
        Ok((stream, identity)) => {
            let name = identity.as_deref().map(Arc::from);
            Ok((Transport::layered(stream, TransportKind::Tls).with_identity(identity), name))
        }
        Err(error) => {
            tracing::info!(%error, "STARTTLS handshake failed");
            Err(CloseReason::ProtocolError)
        }
    }
}

/// Everything a connection's task keeps, in one place: the loop borrows it, so that the
/// task holds each part once (an `async fn` taking them would keep a second copy).
struct Driver<S> {
    session: S,
    io: Sources,
    shutdown: CancellationToken,
    /// Boxed: only AMQP's connections watch one, and 8 bytes in every task are 16 inline.
    signal: Option<Box<Signal>>,
}

/// The parts of a connection that a round's wait polls, besides its session: apart from it,
/// so that the wait holds one borrow of them rather than one of each (every byte it holds is
/// kept in the task of every idle connection).
struct Sources {
    stream: Transport,
    /// Read and not yet handled.
    input: BytesMut,
    /// Allocated by the first delivery, not before, and one pointer until then: a connection
    /// that never receives one (an idle sensor, a publisher) holds no room for a batch.
    batch: LazyVec<Delivery>,
    /// Moved to each new deadline: one that only moves later (heartbeats, keep-alives) costs
    /// neither a timer-wheel insertion nor a lock per event.
    timer: Timer,
    limits: DriveLimits,
}

impl Sources {
    fn new(stream: Transport, input: BytesMut, limits: DriveLimits) -> Self {
        Sources { stream, input, batch: LazyVec::default(), timer: Timer::default(), limits }
    }
}

/// Writes what is pending (unless the socket stopped taking output), releases the session,
/// then lingers.
async fn close<S: ProtocolSession>(driver: Driver<S>, reason: CloseReason) {
    let Driver { session, mut io, shutdown, .. } = driver;
    let (mut reader, mut writer) = io.stream.split();
    if reason != CloseReason::SlowConsumer || session.finished().is_some() {
        let flush = writer.write_all(session.pending_output());
        let _ = tokio::time::timeout(FINAL_FLUSH, flush).await;
    }
    session.release(reason);
    linger(&mut reader, &mut writer, &shutdown).await;
}

/// Runs the session's timeout if its deadline has passed at `now`; whether it did.
fn handle_due<S: ProtocolSession>(session: &mut S, deadline: Option<Instant>, reading: bool, now: Instant) -> bool {
    if deadline.is_none_or(|at| at > now) {
        return false;
    }
    if !reading {
        // Not read meanwhile: the silence is the broker's, not the peer's.
        session.excuse_silence(now);
    }
    session.handle_timeout(now);
    true
}

/// What the driver does next, as [`plan`] decides it before each wait.
enum Next {
    /// The connection is over, or asks for TLS.
    Done(Step),
    /// Work was done without waiting (input handled from the buffer): plan again.
    Again,
    /// The session's deadline was due and handled: yield if the task's budget is spent, then
    /// plan again.
    Yield,
    /// Wait for the first of the events `Round` enables.
    Wait(Round),
}

/// Which of the driver's waits are enabled for one round. Only these flags outlive the wait,
/// besides the driver itself: every local kept across an await is a field of the task of every
/// connection.
struct Round {
    /// Deliveries to take from the outbox at most (8-bit: no more than [`DELIVERY_BATCH`]).
    window: u8,
    /// Read from the socket.
    reading: bool,
    /// Output waits to be written.
    writing: bool,
    /// A near deadline is set on the timer (a far one comes as the outbox's alarm).
    timed: bool,
    /// Wait for the subscribers this session congested.
    congested: bool,
    /// Watch the session's signal.
    watching: bool,
    /// Store commits are pending.
    durable: bool,
}

/// Does what needs no waiting, and says what to wait for: the session's end, input left in
/// the buffer, a slow consumer's write timeout, a due deadline. `write_progress` is when the
/// socket last took output, or output started waiting (`None` while none waits); the timer of
/// `io` is set to the next deadline; `watching`: a signal is there to watch.
fn plan<S: ProtocolSession>(
    session: &mut S,
    io: &mut Sources,
    watching: bool,
    write_progress: &mut Option<Stamp>,
) -> Next {
    let Sources { input, limits, timer, .. } = io;
    if let Some(reason) = session.finished() {
        return Next::Done(Step::Closed(reason));
    }
    if session.input_ready() {
        session.handle_bytes(input, Instant::now());
        return Next::Again;
    }
    // Empty until bytes arrive, and released once they are all handled: an idle
    // connection holds no read buffer.
    if input.is_empty() && input.capacity() > 0 {
        *input = BytesMut::new();
    }
    // One clock reading for the whole plan (a fn, not kept across the driver's await points):
    // it runs once per event of every connection.
    let now = Instant::now();
    let backlog = session.pending_output().len();
    if backlog > 0 && write_progress.is_none() {
        // Output started waiting since the last round.
        *write_progress = Some(Stamp::new(now));
    }
    let stalled_at = limits.write_timeout().zip(*write_progress).map(|(t, at)| at.instant() + t);
    if stalled_at.is_some_and(|at| at <= now) {
        debug!(timeout = ?limits.write_timeout(), backlog, "output not taken in time; slow consumer");
        return Next::Done(Step::Closed(CloseReason::SlowConsumer));
    }
    if backlog == 0 {
        *write_progress = None;
        if let Some(tls) = session.take_start_tls() {
            return Next::Done(Step::StartTls(tls));
        }
    }
    let deadline = match (session.poll_timeout(), stalled_at) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let reading = session.may_read() && backlog < HIGH_WATER;
    // Due already, with nothing waiting to be written (a round of MQTT retained messages,
    // once the last round is out): handled here rather than by the timer, whose
    // millisecond ticks would add a tick per round. With output waiting, the select
    // writes it first (a heart-beat just queued is due until written). The task still
    // yields when its scheduling budget is spent, so its neighbours get their turns.
    if backlog == 0 && handle_due(session, deadline, reading, now) {
        return Next::Yield;
    }
    let timed = deadline.is_some_and(|at| timer.set(at, now, session.core()));
    let window = if backlog < HIGH_WATER {
        // At most the batch, which is 8-bit.
        session.delivery_window().min(DELIVERY_BATCH.into()) as u8
    } else {
        0
    };
    Next::Wait(Round {
        window,
        reading,
        writing: backlog > 0,
        timed,
        congested: session.core().is_congesting(),
        watching,
        durable: session.core().has_pending_durable(),
    })
}

/// The driver's loop: [`plan`], then wait for the first enabled event and hand it to the
/// session. It reaches the driver's parts through `driver` rather than through bindings of
/// its own, which the task would keep across the wait.
///
/// Not an `async fn`, which would keep its argument twice.
#[allow(clippy::manual_async_fn, reason = "an async fn keeps its argument twice in its state")]
fn run<S: ProtocolSession>(driver: &mut Driver<S>) -> impl Future<Output = Step> + Send {
    async move {
        if !driver.io.input.is_empty() {
            driver.session.handle_bytes(&mut driver.io.input, Instant::now());
        }
        // The router tells every open session of the broker's shutdown through its outbox
        // (see [`Wake::ShutDown`]); a connection that starts once it began is told here.
        let mut shutting_down = driver.shutdown.is_cancelled();
        if shutting_down {
            driver.session.begin_shutdown(Instant::now());
        }
        let mut write_progress = None;
        let mut turn = 0u8;
        loop {
            let watching = driver.signal.is_some();
            // Matched at once, not bound: a binding would be kept across the waits below.
            let round = match plan(&mut driver.session, &mut driver.io, watching, &mut write_progress) {
                Next::Done(step) => return step,
                Next::Again => continue,
                Next::Yield => {
                    tokio::task::consume_budget().await;
                    continue;
                }
                Next::Wait(round) => round,
            };
            turn = (turn + 1) % SOURCES;
            match wait(driver, round, turn).await {
                Event::Read(Ok(0)) => driver.session.handle_eof(!driver.io.input.is_empty()),
                Event::Read(Ok(_)) => {
                    driver.session.handle_bytes(&mut driver.io.input, Instant::now());
                    write_now(driver, &mut write_progress);
                }
                Event::Read(Err(e)) => driver.session.handle_io_error(&e),
                Event::Written(written) => handle_written(&mut driver.session, written, &mut write_progress),
                Event::Woken(Wake::Delivered(_)) => {
                    let Driver { session, io, .. } = &mut *driver;
                    io.batch.with_vec(|batch| session.handle_deliveries(batch, Instant::now()));
                    write_now(driver, &mut write_progress);
                }
                Event::Woken(Wake::Overflowed) => driver.session.handle_overflow(Instant::now()),
                Event::Woken(Wake::Signalled) | Event::Changed(Ok(())) => driver.session.handle_signal(Instant::now()),
                // A far deadline is near (or moved): the next round's plan sets the timer again.
                Event::Woken(Wake::Alarm) => {}
                Event::Woken(Wake::ShutDown) => {
                    if !std::mem::replace(&mut shutting_down, true) {
                        driver.session.begin_shutdown(Instant::now());
                    }
                }
                // Its sender is gone: nothing more to watch.
                Event::Changed(Err(_)) => driver.signal = None,
                Event::Durable(result) => driver.session.handle_durable(result, Instant::now()),
                Event::Relieved => driver.session.handle_bytes(&mut driver.io.input, Instant::now()),
                Event::Timer { reading } => {
                    let now = Instant::now();
                    if !reading {
                        // Not read meanwhile: the silence is the broker's, not the peer's.
                        driver.session.excuse_silence(now);
                    }
                    driver.session.handle_timeout(now);
                }
            }
        }
    }
}

/// Writes what the event just handled produced, if the socket takes it now: the common case,
/// which then costs no round of its own (a plan and a wait of every source) before the wait
/// that follows. What the socket does not take is written by the next round's wait, which
/// polls with the task's waker; the no-op waker given here is replaced there. The socket's
/// answer is handled as the wait's would be.
fn write_now<S: ProtocolSession>(driver: &mut Driver<S>, write_progress: &mut Option<Stamp>) {
    let output = driver.session.pending_output();
    if output.is_empty() {
        return;
    }
    let mut cx = Context::from_waker(std::task::Waker::noop());
    if let Poll::Ready(written) = Pin::new(&mut driver.io.stream.split().1).poll_write(&mut cx, output) {
        handle_written(&mut driver.session, written, write_progress);
    }
}

/// Hands the socket's answer to pending output to the session: `n` bytes taken, none (the
/// peer can take no more, an error), or an error.
fn handle_written<S: ProtocolSession>(session: &mut S, written: io::Result<usize>, write_progress: &mut Option<Stamp>) {
    match written {
        Ok(0) => session.handle_io_error(&io::ErrorKind::WriteZero.into()),
        Ok(n) => {
            let now = Instant::now();
            session.advance_output(n, now);
            // Progress counts only while output is left: once it is all out, the next round
            // forgets it.
            if !session.pending_output().is_empty() {
                *write_progress = Some(Stamp::new(now));
            }
        }
        Err(e) => session.handle_io_error(&e),
    }
}

/// What ended a round's wait.
enum Event {
    /// The socket read (0: the peer closed its side).
    Read(io::Result<usize>),
    /// The socket took this many bytes of the pending output.
    Written(io::Result<usize>),
    /// The outbox: deliveries taken, an overflow, or a signal.
    Woken(Wake),
    /// The watched signal changed, or its sender is gone.
    Changed(Result<(), watch::error::RecvError>),
    /// The oldest pending store commit ended.
    Durable(Result<(), StoreError>),
    /// The subscribers this session congested have room again, or its grace ran out.
    Relieved,
    /// The session's deadline passed; `reading`: the round read from the socket meanwhile.
    Timer { reading: bool },
}

/// How many sources a round waits on (see [`Waits::poll_source`]).
const SOURCES: u8 = 7;

/// One round's wait: the first of the sources [`Round`] enables. One poll function over the
/// driver's parts, rather than a `select!` over a future per source: only three borrows and the
/// two rare waits' boxes are kept across the wait, which is where every idle connection sits.
/// Every source but those two keeps its waker where it is ready to be woken (the socket's
/// registration, the outbox, the store's commit, the timer), so that each can be polled afresh.
struct Waits<'a, C, R> {
    io: &'a mut Sources,
    /// The session's pending output.
    output: &'a [u8],
    core: &'a Session,
    /// The watched signal's change, when this round watches it.
    changed: Option<Pin<Box<C>>>,
    /// The congested subscribers' room, when this round waits for it.
    relieved: Option<Pin<Box<R>>>,
    round: Round,
    /// The source polled first: it moves on every round, so that a source that is always
    /// ready (a client that floods) cannot keep the others from their turns.
    first: u8,
}

/// The wait of one round of `driver`'s loop, polling `first` first. A function of its own, so
/// that `round` and the borrows it takes are not kept beside the wait in the loop's state.
fn wait<'a, S: ProtocolSession>(
    driver: &'a mut Driver<S>,
    round: Round,
    first: u8,
) -> impl Future<Output = Event> + Send + 'a {
    let core = driver.session.core();
    let mut waits = Waits {
        io: &mut driver.io,
        output: driver.session.pending_output(),
        core,
        // Boxed, and only for the rounds that watch them: rare waits whose futures should not
        // size the task of every connection.
        changed: driver.signal.as_mut().filter(|_| round.watching).map(|signal| Box::pin(signal.0.changed())),
        relieved: round.congested.then(|| Box::pin(core.relieve_congestion())),
        round,
        first,
    };
    std::future::poll_fn(move |cx| waits.poll(cx))
}

impl<C, R> Waits<'_, C, R>
where
    C: Future<Output = Result<(), watch::error::RecvError>>,
    R: Future<Output = ()>,
{
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        for i in 0..SOURCES {
            if let Poll::Ready(event) = self.poll_source((self.first + i) % SOURCES, cx) {
                return Poll::Ready(event);
            }
        }
        Poll::Pending
    }

    /// Polls one source, if this round enables it. The outbox is polled with a window of 0
    /// too: it then returns only when it overflows (which is how a client that stops
    /// acknowledging is told and closed instead of being dropped from silently) or is
    /// signalled.
    fn poll_source(&mut self, source: u8, cx: &mut Context<'_>) -> Poll<Event> {
        match source {
            // On TCP, waits for readability without a buffer; one is allocated only when bytes
            // are there.
            0 if self.round.reading => {
                let Sources { stream, input, limits, .. } = &mut *self.io;
                stream.split().0.poll_read_into(cx, input, limits.read_chunk as usize).map(Event::Read)
            }
            1 if self.round.writing => {
                Pin::new(&mut self.io.stream.split().1).poll_write(cx, self.output).map(Event::Written)
            }
            2 => {
                let (receiver, window) = (self.core.receiver(), self.round.window as usize);
                self.io.batch.with_vec(|batch| receiver.poll_wake(cx, batch, window)).map(Event::Woken)
            }
            3 => self.changed.as_mut().map_or(Poll::Pending, |changed| changed.as_mut().poll(cx).map(Event::Changed)),
            4 if self.round.durable => self.core.poll_durable(cx).map(Event::Durable),
            5 => self
                .relieved
                .as_mut()
                .map_or(Poll::Pending, |relieved| relieved.as_mut().poll(cx).map(|()| Event::Relieved)),
            6 if self.round.timed => self.io.timer.poll(cx).map(|()| Event::Timer { reading: self.round.reading }),
            _ => Poll::Pending,
        }
    }
}
