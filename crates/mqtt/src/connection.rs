//! One client connection from first byte to close: the CONNECT handshake (protocol level peek,
//! client id claim, session resume or takeover), then one `tokio::select!` over socket reads,
//! outbox batches, the keep-alive timer, takeover and shutdown. Everything queued in a round is
//! written, then flushed once.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use mqtt_codec::{CONNACK_UNACCEPTABLE_PROTOCOL, CodecError, Packet, PacketCodec, Version, peek_version};
use rmqtt_codec::v5::{self, ConnectAckReason, DisconnectReasonCode as Dis};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tolk_core::auth::{Authenticator, Credentials};
use tolk_core::hold::{self, Held, HeldInput};
use tolk_core::listener::{Connection, LINGER, linger};
use tolk_core::{CloseReason, Protocol, Router};
use tracing::{debug, info};

use crate::config::MqttConfig;
use crate::connect::{Refusal, plan};
use crate::registry::{Claim, ClaimError, Parked, Registry};
use crate::session::{Close, Flow, MqttSession};
use crate::state::SessionState;
use crate::will::{Will, WillTiming};

/// Deliveries taken from the outbox per round at most (then written and flushed together).
const BATCH: usize = 64;

/// What every connection of one front end shares.
pub struct Shared {
    /// The listener's settings.
    pub config: Arc<MqttConfig>,
    /// Client ids and offline sessions.
    pub registry: Arc<Registry>,
    /// The broker's authenticator.
    pub auth: Arc<dyn Authenticator>,
}

/// The socket plus the read buffer.
struct Io {
    stream: TcpStream,
    rbuf: BytesMut,
    shutdown: CancellationToken,
    config: Arc<MqttConfig>,
}

enum WriteError {
    Failed,
    Shutdown,
}

impl Io {
    /// Writes and flushes `out` completely, giving up after the write timeout or at shutdown.
    async fn write(&mut self, out: &mut BytesMut) -> Result<(), WriteError> {
        if out.is_empty() {
            return Ok(());
        }
        let write = tokio::time::timeout(self.config.write_timeout, self.stream.write_all(out));
        let result = tokio::select! {
            r = write => match r {
                Ok(Ok(())) => Ok(()),
                Ok(Err(_)) | Err(_) => Err(WriteError::Failed),
            },
            _ = self.shutdown.cancelled() => Err(WriteError::Shutdown),
        };
        out.clear();
        result
    }

    /// Writes the last bytes (a DISCONNECT with its reason), then closes cleanly.
    async fn write_final(&mut self, bytes: &[u8]) {
        self.write_last(bytes).await;
        self.close().await;
    }

    /// Best effort for the last words before closing.
    async fn write_last(&mut self, bytes: &[u8]) {
        let _ = tokio::time::timeout(LINGER, self.stream.write_all(bytes)).await;
    }

    /// Half-closes and drains for a moment, so that the client reads the last words instead
    /// of a reset.
    async fn close(&mut self) {
        let (mut reader, mut writer) = self.stream.split();
        // Boxed: it runs once per connection, and its timer and buffer should not size the
        // task of every idle one.
        Box::pin(linger(&mut reader, &mut writer, &self.shutdown)).await;
    }
}

/// Runs one connection to its end.
///
/// Not an `async fn`: that would keep the `Connection` it was given for the task's whole life.
/// The handshake future takes it instead, and lives on the heap only while it runs (its state,
/// a whole CONNECT packet among it, should not set the size of every connection's task).
pub fn run(shared: Arc<Shared>, connection: Connection) -> impl Future<Output = CloseReason> + Send {
    let handshake = Box::pin(connect(shared.clone(), connection));
    async move {
        let connected = match handshake.await {
            Ok(connected) => connected,
            Err(reason) => return reason,
        };
        tracing::Span::current().record("client_id", tracing::field::display(connected.session.client_id()));
        serve(connected, shared).await
    }
}

/// A connected client's state, in one allocation. The connection's task holds a pointer to
/// it, so what the task itself costs per idle connection is only what its await points need.
struct Connected {
    io: Io,
    session: MqttSession,
    /// This connection's token for [`Registry::release`].
    conn: u64,
    /// Fires when another connection takes the client id over.
    kicked: tokio::sync::oneshot::Receiver<()>,
    /// Packets read while held back; only while there are some.
    held: Option<Box<Held<Packet>>>,
}

/// A connection's read input, driven by [`hold::handle_input`]: while a subscriber of this
/// client's messages is full, PUBLISHes wait and acknowledgements still pass.
struct Input<'a> {
    session: &'a mut MqttSession,
    rbuf: &'a mut BytesMut,
}

impl HeldInput for Input<'_> {
    type Frame = Packet;
    type Error = End;

    fn is_congesting(&self) -> bool {
        self.session.state().core.is_congesting()
    }

    fn decode(&mut self) -> Result<Option<Packet>, End> {
        self.session.decode(self.rbuf).map_err(closed)
    }

    fn handle(&mut self, packet: Packet) -> Result<(), End> {
        match self.session.handle(packet, Instant::now()) {
            Ok(Flow::Continue) => Ok(()),
            Ok(Flow::Disconnect { will }) => Err(End { reason: CloseReason::ClientClosed, will, code: None }),
            Err(close) => Err(closed(close)),
        }
    }

    /// The client's acknowledgements of its deliveries, and its pings.
    fn passes_hold(packet: &Packet) -> bool {
        matches!(
            packet,
            Packet::PublishAck(_) | Packet::PublishReceived(_) | Packet::PublishComplete(_) | Packet::PingRequest
        )
    }

    fn size_of(packet: &Packet) -> usize {
        match packet {
            Packet::Publish(p) => p.payload.len() + p.topic.len(),
            _ => 0,
        }
    }
}

/// Reads and answers the CONNECT within the connect timeout.
async fn connect(shared: Arc<Shared>, connection: Connection) -> Result<Box<Connected>, CloseReason> {
    let Connection { stream, peer, shutdown, router } = connection;
    let config = shared.config.clone();
    // Buffers start empty: an idle connection should cost next to nothing (see `serve`).
    let mut io = Io { stream, rbuf: BytesMut::new(), shutdown, config };
    let deadline = tokio::time::Instant::now() + io.config.connect_timeout;
    let shutdown = io.shutdown.clone();
    let handshake = tokio::select! {
        r = handshake(&mut io, &shared, &router, peer) => r,
        _ = tokio::time::sleep_until(deadline) => Err(Refused(CloseReason::ProtocolError, "no CONNECT in time".into())),
        _ = shutdown.cancelled() => Err(Refused(CloseReason::Shutdown, String::new())),
    };
    match handshake {
        Ok((session, claim)) => {
            Ok(Box::new(Connected { io, session, conn: claim.conn, kicked: claim.kicked, held: None }))
        }
        Err(Refused(reason, detail)) => {
            if !detail.is_empty() {
                info!(%reason, detail, "connection refused");
            }
            Err(reason)
        }
    }
}

/// Why the handshake ended the connection (the detail is logged; empty for a quiet close).
struct Refused(CloseReason, String);

/// Reads until the CONNECT is complete, decides on it and answers with CONNACK.
async fn handshake(
    io: &mut Io,
    shared: &Shared,
    router: &Router,
    peer: SocketAddr,
) -> Result<(MqttSession, Claim), Refused> {
    let max = io.config.max_packet_size_bytes;
    let refuse = |detail: String| Refused(CloseReason::ProtocolError, detail);
    // 1. Which protocol level (MQTT-3.1.2-2), from the first bytes.
    let (version, _level) = loop {
        match peek_version(&io.rbuf, max) {
            Ok(Some(v)) => break v,
            Ok(None) => {}
            Err(CodecError::UnsupportedLevel(level)) => {
                io.write_final(&CONNACK_UNACCEPTABLE_PROTOCOL).await;
                return Err(refuse(format!("protocol level {level} is not supported")));
            }
            Err(e @ CodecError::TooLarge { .. }) => {
                return Err(Refused(CloseReason::LimitExceeded, e.to_string()));
            }
            Err(e) => return Err(refuse(e.to_string())),
        }
        read_more(io).await?;
    };
    // 2. The CONNECT itself.
    let mut codec = PacketCodec::new(version, max);
    let connect = loop {
        match codec.decode_connect(&mut io.rbuf) {
            Ok(Some(Packet::Connect(c))) => break c,
            Ok(Some(_)) => return Err(refuse("first packet is not CONNECT".into())),
            Ok(None) => read_more(io).await?,
            Err(e) if e.is_identifier_rejected() => {
                refuse_connack(io, &mut codec, ConnectAckReason::ClientIdentifierNotValid).await;
                return Err(refuse(format!("bad CONNECT: {e}")));
            }
            Err(e) => {
                if version == Version::V5 {
                    let code = if matches!(e.reason_code(), Dis::ProtocolError) {
                        ConnectAckReason::ProtocolError
                    } else {
                        ConnectAckReason::MalformedPacket
                    };
                    refuse_connack(io, &mut codec, code).await;
                }
                return Err(refuse(format!("bad CONNECT: {e}")));
            }
        }
    };
    // 3. The decision.
    let mut plan = match plan(&connect, version, &io.config, || format!("tolk-{}", router.next_session_id().0)) {
        Ok(p) => p,
        Err(Refusal::Connack(code, why)) => {
            refuse_connack(io, &mut codec, code).await;
            return Err(refuse(why.to_owned()));
        }
        Err(Refusal::Close(why)) => return Err(refuse(why.to_owned())),
    };
    // Who it is, asked of the broker's one authenticator (CONNACK 0x86, 3.1.1: 0x04).
    let credentials = Credentials {
        protocol: Protocol::Mqtt,
        username: connect.username.as_deref(),
        password: connect.password.as_deref(),
        client_id: Some(&plan.client_id),
        peer,
    };
    if let Err(why) = shared.auth.authenticate(&credentials) {
        refuse_connack(io, &mut codec, ConnectAckReason::BadUserNameOrPassword).await;
        return Err(Refused(CloseReason::AuthFailed, why));
    }
    // 4. The client id: a stored session, or a takeover of a live one.
    let mut claim = match shared.registry.claim(&plan.client_id).await {
        Ok(c) => c,
        Err(e @ ClaimError::Full(_)) => {
            let code = if version == Version::V5 {
                ConnectAckReason::QuotaExceeded
            } else {
                ConnectAckReason::ServerUnavailable
            };
            refuse_connack(io, &mut codec, code).await;
            return Err(Refused(CloseReason::LimitExceeded, e.to_string()));
        }
    };
    let credit = usize::from(io.config.max_inflight.min(plan.client_receive_max).max(1));
    let now = Instant::now();
    let (state, session_present) = match claim.previous.take() {
        Some(parked) if !plan.clean_start => {
            // Back before the will delay ran out: the will is not sent (§3.1.3.2.2).
            let mut state = parked.state;
            state.expiry = plan.expiry;
            if let Err(e) = state.attach(credit) {
                tracing::warn!(error = %e, "could not rejoin a shared subscription");
            }
            (state, true)
        }
        previous => {
            if let Some(parked) = previous {
                // Clean start ends the stored session, which publishes a will still waiting.
                if let Some((will, _)) = &parked.will {
                    will.publish(&parked.state.core, &parked.state.client_id, now);
                }
            }
            let core = router.open_session(Protocol::Mqtt);
            (Box::new(SessionState::new(core, plan.client_id.clone(), plan.expiry)), false)
        }
    };
    let metrics = router.metrics().clone();
    let mut session = MqttSession::new(state, codec, &mut plan, io.config.clone(), metrics);
    session.connack(&plan, session_present);
    if session_present {
        session.resend_inflight(now);
    }
    debug!(client_id = %plan.client_id, ?version, session_present, "connected");
    Ok((session, claim))
}

async fn refuse_connack(io: &mut Io, codec: &mut PacketCodec, reason_code: ConnectAckReason) {
    let mut out = BytesMut::new();
    let ack = v5::ConnectAck { reason_code, ..Default::default() };
    if codec.encode(Packet::ConnectAck(Box::new(ack)), &mut out).is_ok() {
        io.write_final(&out).await;
    }
}

async fn read_more(io: &mut Io) -> Result<(), Refused> {
    match io.stream.read_buf(&mut io.rbuf).await {
        Ok(0) => Err(Refused(CloseReason::ClientClosed, String::new())),
        Ok(_) => Ok(()),
        Err(_) => Err(Refused(CloseReason::IoError, String::new())),
    }
}

/// How the connected phase ended.
struct End {
    reason: CloseReason,
    /// Publish the will (the client did not say a normal goodbye).
    will: bool,
    /// MQTT 5 DISCONNECT to send before closing.
    code: Option<Dis>,
}

/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 4096;

async fn serve(mut connected: Box<Connected>, shared: Arc<Shared>) -> CloseReason {
    let Connected { io, session, kicked, held, .. } = &mut *connected;
    let mut batch = Vec::new();
    let mut last_heard = tokio::time::Instant::now();
    let keep_alive = session.keep_alive_timeout();
    // One timer for the connection's life, re-armed only when it fires early (the client was
    // heard meanwhile): cheaper than a new timer per round, and small in the task.
    let mut keep_alive_timer = keep_alive.map(|t| Box::pin(tokio::time::sleep_until(last_heard + t)));
    let end = 'conn: loop {
        if let Err(end) = hold::handle_input(&mut Input { session, rbuf: &mut io.rbuf }, held) {
            break 'conn end;
        }
        if io.rbuf.is_empty() && io.rbuf.capacity() > 0 {
            io.rbuf = BytesMut::new();
        }
        // Retained messages for new subscriptions go before more outbox traffic.
        if session.has_pending() {
            session.flush_pending(BATCH, Instant::now());
        }
        match io.write(session.output()).await {
            Ok(()) => session.after_write(Instant::now()),
            Err(WriteError::Failed) => break End { reason: CloseReason::SlowConsumer, will: true, code: None },
            Err(WriteError::Shutdown) => break End { reason: CloseReason::Shutdown, will: false, code: None },
        }
        let free = if session.has_pending() { 0 } else { session.free_window().min(BATCH) };
        let congested = session.state().core.is_congesting();
        // Not read while as much is held as may be: TCP then slows the publisher down
        // instead of the subscriber being dropped.
        let reading = hold::may_read(held);
        let core = &session.state().core;
        tokio::select! {
            biased;
            _ = io.shutdown.cancelled() => {
                break End { reason: CloseReason::Shutdown, will: false, code: Some(Dis::ServerShuttingDown) };
            }
            _ = &mut *kicked => {
                break End { reason: CloseReason::SessionTakenOver, will: true, code: Some(Dis::SessionTakenOver) };
            }
            // Waits for readability without holding a buffer; one is allocated only when
            // bytes are there, and released again once they are all decoded.
            ready = std::future::poll_fn(|cx| io.stream.poll_read_ready(cx)), if reading => {
                if ready.is_err() {
                    break End { reason: CloseReason::IoError, will: true, code: None };
                }
                io.rbuf.reserve(READ_CHUNK);
                match io.stream.try_read_buf(&mut io.rbuf) {
                    Ok(0) => break End { reason: CloseReason::ClientClosed, will: true, code: None },
                    Ok(_) => last_heard = tokio::time::Instant::now(),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => break End { reason: CloseReason::IoError, will: true, code: None },
                }
            }
            // Polled even with a full window (free = 0): it then returns only when the outbox
            // overflows, which is how a client that stops acknowledging is noticed.
            drained = core.receiver().drain(&mut batch, free) => {
                if drained.is_err() {
                    break End { reason: CloseReason::SlowConsumer, will: true, code: Some(Dis::QuotaExceeded) };
                }
                let taken_at = Instant::now();
                for delivery in batch.drain(..) {
                    session.deliver(delivery, taken_at, taken_at);
                }
            }
            // Boxed when polled: congestion is rare, and its wait should not size every task.
            () = async { Box::pin(core.relieve_congestion()).await }, if congested => {
                // The client may not have been read meanwhile; that silence is not its own.
                last_heard = tokio::time::Instant::now();
            }
            // More retained messages for a new subscription: the next round, once every other
            // event had its turn and the task has yielded to its neighbours.
            () = tokio::task::yield_now(), if session.has_pending() && session.free_window() > 0 => {}
            () = fired(&mut keep_alive_timer), if reading => {
                let (Some(timeout), Some(timer)) = (keep_alive, keep_alive_timer.as_mut()) else { continue };
                let deadline = last_heard + timeout;
                if deadline <= tokio::time::Instant::now() {
                    break End { reason: CloseReason::KeepAliveTimeout, will: true, code: Some(Dis::KeepAliveTimeout) };
                }
                timer.as_mut().reset(deadline);
            }
        }
    };
    // Deliveries drained but not encoded (only when a round broke off) go back to the outbox.
    if !batch.is_empty() {
        session.state().core.receiver().requeue_front(batch.drain(..));
    }
    if let Some(code) = end.code
        && session.version() == Version::V5
    {
        session.disconnect(code);
    }
    let last = std::mem::take(session.output());
    io.write_last(&last).await;
    // The session is parked (or ended) before lingering: a client that is gone must not look
    // connected, with a full outbox, for the second the socket drains.
    let Connected { session, conn, mut io, .. } = *connected;
    finish(&shared, session, conn, end.reason, end.will);
    // Boxed with the socket: moved out of `connected` into this future, the socket would add
    // its size to the state of every idle connection's task.
    Box::pin(async move { io.close().await }).await;
    end.reason
}

fn closed(close: Close) -> End {
    info!(reason = %close.reason, code = ?close.code, detail = close.detail, "closing connection");
    End { reason: close.reason, will: true, code: close.code }
}

/// Completes when the keep-alive timer fires; never without one.
async fn fired(timer: &mut Option<std::pin::Pin<Box<tokio::time::Sleep>>>) {
    match timer {
        Some(timer) => timer.as_mut().await,
        None => std::future::pending().await,
    }
}

/// Hands the session to the registry (persistent) or ends it, and deals with the will.
fn finish(shared: &Shared, session: MqttSession, conn: u64, reason: CloseReason, will_wanted: bool) {
    let now = Instant::now();
    let client_id = session.client_id().clone();
    let (state, will) = session.finish(will_wanted && reason != CloseReason::Shutdown);
    let mut delayed = None;
    if let Some(will) = will {
        match will.timing(state.expiry, now) {
            WillTiming::Now(w) => w.publish(&state.core, &client_id, now),
            WillTiming::At(w, at) => delayed = Some((w, at)),
        }
    }
    if state.expiry.is_zero() {
        shared.registry.release(&client_id, conn, None);
        return;
    }
    let parked = Parked { expires_at: now + state.expiry, state, will: delayed };
    if let Some(leftover) = shared.registry.release(&client_id, conn, Some(parked)) {
        end_session(leftover.state, leftover.will.map(|(w, _)| w), now);
    }
}

fn end_session(state: Box<SessionState>, will: Option<Will>, now: Instant) {
    if let Some(will) = will {
        will.publish(&state.core, &state.client_id, now);
    }
}
