//! One client connection from first byte to close: the CONNECT handshake (protocol level peek,
//! client id claim, session resume or takeover) as a short prologue of its own, then the
//! connected client as a [`ProtocolSession`] that the core's connection driver
//! ([`tolk_core::drive`]) runs; a takeover reaches it as a signal on its session's outbox.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use futures_util::FutureExt;
use futures_util::future::Either;
use mqtt_codec::{CONNACK_UNACCEPTABLE_PROTOCOL, CodecError, Packet, PacketCodec, Version, peek_version};
use rmqtt_codec::v5::{self, ConnectAckReason, DisconnectReasonCode as Dis};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use tolk_core::auth::{Authenticator, Credentials};
use tolk_core::drive::{DriveLimits, ProtocolSession, Transport, drive};
use tolk_core::hold::{self, Held, HeldInput};
use tolk_core::listener::{Connection, LINGER, linger};
use tolk_core::store::StoreError;
use tolk_core::{CloseReason, Delivery, Protocol, Router, Session, Stamp};
use tracing::{debug, info};

use crate::config::MqttConfig;
use crate::connect::{Refusal, plan};
use crate::kept;
use crate::registry::{Claim, ClaimError, Registry};
use crate::session::{Close, Flow, MqttSession};
use crate::state::{Parked, SessionState};
use crate::will::{Will, WillTiming};

/// Retained messages for a new subscription are encoded this many at a time, a round whenever
/// less than [`RETAINED_ROUND_BELOW`] bytes wait for the socket: a subscription matching
/// 100,000 of them is sent in rounds, and other clients on the same thread get their turns.
const RETAINED_ROUND: usize = 64;
const RETAINED_ROUND_BELOW: usize = 64 * 1024;

/// What every connection of one front end shares.
pub struct Shared {
    /// The listener's settings.
    pub config: Arc<MqttConfig>,
    /// Client ids and offline sessions.
    pub registry: Arc<Registry>,
    /// The broker's authenticator.
    pub auth: Arc<dyn Authenticator>,
}

/// The socket and read buffer during the handshake.
struct Io {
    stream: Transport,
    rbuf: BytesMut,
    shutdown: CancellationToken,
    config: Arc<MqttConfig>,
}

impl Io {
    /// Writes the last bytes (a refusing CONNACK), then closes cleanly.
    async fn write_final(&mut self, bytes: &[u8]) {
        let (mut reader, mut writer) = self.stream.split();
        let _ = tokio::time::timeout(LINGER, writer.write_all(bytes)).await;
        // Boxed: it runs once per connection, and its timer and buffer should not size the
        // task of every idle one.
        Box::pin(linger(&mut reader, &mut writer, &self.shutdown)).await;
    }
}

/// Runs one connection to its end.
///
/// Not an `async fn`, and no `async` block either: those would keep the `Connection` it was
/// given, and the connected client moved into the driver, a second time for the task's whole
/// life. The handshake future takes the connection instead, and lives on the heap only while
/// it runs (its state, a whole CONNECT packet among it, should not set the size of every
/// connection's task); then the task holds the driver's future alone.
pub fn run(shared: Arc<Shared>, connection: Connection) -> impl Future<Output = CloseReason> + Send {
    Box::pin(connect(shared, connection)).then(|handshake| match handshake {
        Ok(connected) => Either::Left(serve(connected)),
        Err(reason) => Either::Right(std::future::ready(reason)),
    })
}

/// The connected phase: the driver runs the client (a takeover reaches it through the
/// session's outbox, see [`Registry::claim`]).
fn serve((connected, io): (MqttConnection, Io)) -> impl Future<Output = CloseReason> {
    tolk_core::listener::name_client(connected.session.client_id().clone());
    // 4 KiB per read (the driver pauses reading above 256 KiB of unwritten output), and a
    // client that takes none of it for `write_timeout` is a slow consumer.
    let limits = DriveLimits::new(4096, Some(io.config.write_timeout));
    let Io { stream, rbuf, shutdown, .. } = io;
    drive(connected, stream, rbuf, shutdown, None, limits)
}

/// A connected client as the driver sees it.
struct MqttConnection {
    session: MqttSession,
    shared: Arc<Shared>,
    /// This connection's token for [`Registry::release`].
    conn: u64,
    /// Packets read while held back; only while there are some.
    held: Option<Box<Held<Packet>>>,
    /// When the client was last heard from (the keep-alive counts from here).
    last_heard: Stamp,
    /// How the connection ends, once it does.
    end: Option<End>,
}

/// How the connected phase ended.
#[derive(Clone, Copy)]
struct End {
    reason: CloseReason,
    /// Publish the will (the client did not say a normal goodbye).
    will: bool,
}

impl MqttConnection {
    /// Ends the connection (the first reason wins), telling an MQTT 5 client why with `code`.
    fn end(&mut self, reason: CloseReason, will: bool, code: Option<Dis>) {
        if self.end.is_some() {
            return;
        }
        if let Some(code) = code
            && self.session.version() == Version::V5
        {
            self.session.disconnect(code);
        }
        self.end = Some(End { reason, will });
    }

    fn closed(&mut self, close: Close) {
        info!(reason = %close.reason, code = ?close.code, detail = close.detail, "closing connection");
        self.end(close.reason, true, close.code);
    }

    fn keep_alive_deadline(&self) -> Option<Instant> {
        self.session.keep_alive_timeout().map(|t| self.last_heard.instant() + t)
    }

    /// Whether a round of retained messages may be encoded now.
    fn retained_round_due(&self) -> bool {
        self.session.has_pending()
            && self.session.free_window() > 0
            && self.session.output().len() < RETAINED_ROUND_BELOW
    }
}

impl ProtocolSession for MqttConnection {
    fn core(&self) -> &Session {
        &self.session.state().core
    }

    fn handle_bytes(&mut self, input: &mut BytesMut, now: Instant) {
        if self.end.is_some() {
            input.clear();
            return;
        }
        self.last_heard = Stamp::new(now);
        let MqttConnection { session, held, .. } = self;
        match hold::handle_input(&mut Input { session, rbuf: input, now }, held) {
            Ok(()) => {}
            Err(Stop::Disconnected { will }) => self.end(CloseReason::ClientClosed, will, None),
            Err(Stop::Closed(close)) => self.closed(close),
        }
    }

    fn handle_eof(&mut self, _partial: bool) {
        self.end(CloseReason::ClientClosed, true, None);
    }

    fn handle_io_error(&mut self, error: &io::Error) {
        debug!(%error, "socket error");
        self.end(CloseReason::IoError, true, None);
    }

    /// Publishes are held back here (acknowledgements and pings still pass) until as much is
    /// held as may be; only then does reading stop, and TCP slows the publisher down.
    fn may_read(&self) -> bool {
        hold::may_read(&self.held)
    }

    /// Retained messages for new subscriptions go before more outbox traffic.
    fn delivery_window(&self) -> usize {
        if self.end.is_some() || self.session.has_pending() { 0 } else { self.session.free_window() }
    }

    fn handle_deliveries(&mut self, batch: &mut Vec<Delivery>, now: Instant) {
        for delivery in batch.drain(..) {
            self.session.deliver(delivery, now, now);
        }
    }

    fn handle_overflow(&mut self, _now: Instant) {
        self.end(CloseReason::SlowConsumer, true, Some(Dis::QuotaExceeded));
    }

    fn handle_durable(&mut self, result: Result<(), StoreError>, _now: Instant) {
        if let Err(close) = self.session.handle_durable(result) {
            self.closed(close);
        }
    }

    /// Another connection took the client id over (the registry signalled the outbox).
    fn handle_signal(&mut self, _now: Instant) {
        self.end(CloseReason::SessionTakenOver, true, Some(Dis::SessionTakenOver));
    }

    /// The keep-alive deadline, or, when a round of retained messages is due, a time already
    /// past (when the client was last heard from) that the driver handles without a timer.
    fn poll_timeout(&self) -> Option<Instant> {
        if self.end.is_some() {
            None
        } else if self.retained_round_due() {
            Some(self.last_heard.instant())
        } else {
            self.keep_alive_deadline()
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.retained_round_due() {
            self.session.flush_pending(RETAINED_ROUND, now);
        }
        if self.keep_alive_deadline().is_some_and(|at| at <= now) {
            self.end(CloseReason::KeepAliveTimeout, true, Some(Dis::KeepAliveTimeout));
        }
    }

    fn excuse_silence(&mut self, now: Instant) {
        self.last_heard = Stamp::new(now);
    }

    fn begin_shutdown(&mut self, _now: Instant) {
        self.end(CloseReason::Shutdown, false, Some(Dis::ServerShuttingDown));
    }

    fn pending_output(&self) -> &[u8] {
        self.session.output()
    }

    fn advance_output(&mut self, n: usize, now: Instant) {
        self.session.advance_output(n, now);
    }

    fn finished(&self) -> Option<CloseReason> {
        self.end.map(|e| e.reason)
    }

    /// Parks a persistent session (or ends it) and deals with the will.
    fn release(self, reason: CloseReason) {
        // A connection the driver ended (output not taken in time) did not say goodbye.
        let will = self.end.is_none_or(|e| e.will);
        finish(&self.shared, self.session, self.conn, reason, will);
    }
}

/// Why reading stopped: the client's DISCONNECT, or a packet that ends the connection.
enum Stop {
    Disconnected { will: bool },
    Closed(Close),
}

/// A connection's read input, driven by [`hold::handle_input`]: while a subscriber of this
/// client's messages is full, PUBLISHes wait and acknowledgements still pass.
struct Input<'a> {
    session: &'a mut MqttSession,
    rbuf: &'a mut BytesMut,
    /// When the bytes were read: the time of every packet among them.
    now: Instant,
}

impl HeldInput for Input<'_> {
    type Frame = Packet;
    type Error = Stop;

    fn is_congesting(&self) -> bool {
        self.session.state().core.is_congesting()
    }

    fn decode(&mut self) -> Result<Option<Packet>, Stop> {
        self.session.decode(self.rbuf).map_err(Stop::Closed)
    }

    fn handle(&mut self, packet: Packet) -> Result<(), Stop> {
        match self.session.handle(packet, self.now) {
            Ok(Flow::Continue) => Ok(()),
            Ok(Flow::Disconnect { will }) => Err(Stop::Disconnected { will }),
            Err(close) => Err(Stop::Closed(close)),
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

/// Reads and answers the CONNECT within the connect timeout. Returns the connected client, the
/// socket with what was read after the CONNECT.
async fn connect(shared: Arc<Shared>, connection: Connection) -> Result<(MqttConnection, Io), CloseReason> {
    let Connection { stream, peer, shutdown, router } = connection;
    let config = shared.config.clone();
    // Buffers start empty: an idle connection should cost next to nothing.
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
            let connection = MqttConnection {
                session,
                shared,
                conn: claim.conn,
                held: None,
                last_heard: Stamp::new(Instant::now()),
                end: None,
            };
            Ok((connection, io))
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
    let identity = io.stream.identity();
    let credentials = Credentials {
        protocol: Protocol::Mqtt,
        username: connect.username.as_deref(),
        password: connect.password.as_deref(),
        client_id: Some(&plan.client_id),
        peer,
        proven: false,
    }
    .with_identity(identity.as_deref());
    if let Err(why) = shared.auth.authenticate(&credentials) {
        refuse_connack(io, &mut codec, ConnectAckReason::BadUserNameOrPassword).await;
        return Err(Refused(CloseReason::AuthFailed, why));
    }
    // What it may do; a will it could not publish is refused now, not lost at disconnect.
    let rights = shared.auth.access(credentials.username, Some(&plan.client_id));
    if let (Some(access), Some(will)) = (&rights, &plan.will)
        && !access.may_publish(&will.last_will.topic)
    {
        refuse_connack(io, &mut codec, ConnectAckReason::NotAuthorized).await;
        let why = format!("not authorized to publish the will to '{}'", will.last_will.topic);
        return Err(Refused(CloseReason::AuthFailed, why));
    }
    // 4. The client id: a stored session, or a takeover of a live one.
    // A user name the broker checked owns the client id; an unchecked one is only a label.
    let verified = shared.auth.verifies_users() || credentials.proven;
    let owner: Option<Arc<str>> = credentials.username.filter(|_| verified).map(Arc::from);
    // The session it will run: the stored one it resumes, or a new one (opened here, so that
    // the registry knows its outbox to signal a takeover through from the start).
    let mut fresh = None;
    let label = io.stream.kind().label(Protocol::Mqtt);
    let outbox_for = |previous: Option<&Parked>| match previous {
        Some(parked) if !plan.clean_start => parked.state.core.receiver().outbox(),
        _ => fresh.insert(router.open_session(label)).receiver().outbox(),
    };
    let mut claim = match shared.registry.claim(&plan.client_id, owner.as_ref(), outbox_for).await {
        Ok(c) => c,
        Err(e @ ClaimError::OwnedByAnother(_)) => {
            refuse_connack(io, &mut codec, ConnectAckReason::NotAuthorized).await;
            return Err(Refused(CloseReason::AuthFailed, e.to_string()));
        }
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
    let (mut state, session_present) = match claim.previous.take() {
        Some(parked) if !plan.clean_start => {
            // Back before the will delay ran out: the will is not sent (§3.1.3.2.2).
            let mut state = parked.state;
            state.set_expiry(plan.expiry);
            state.core.restrict(rights);
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
                parked.state.forget_kept();
            }
            let mut core = fresh.take().expect("opened for the claim");
            core.restrict(rights);
            core.track_durable();
            (Box::new(SessionState::new(core, plan.client_id.clone(), plan.expiry)), false)
        }
    };
    state.owner = owner;
    // Written (or, with expiry 0, ended) before CONNACK: a crash after it finds the session.
    if let Some(commit) = kept::save(&state, None, plan.will.as_ref().map(|w| (w, None)))
        && let Err(e) = commit.await
    {
        tracing::warn!(client_id = %plan.client_id, error = %e, "a persistent session could not be stored");
    }
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
    let (mut reader, _) = io.stream.split();
    match reader.read_buf(&mut io.rbuf).await {
        Ok(0) => Err(Refused(CloseReason::ClientClosed, String::new())),
        Ok(_) => Ok(()),
        Err(_) => Err(Refused(CloseReason::IoError, String::new())),
    }
}

/// Hands the session to the registry (persistent) or ends it, and deals with the will.
fn finish(shared: &Shared, session: MqttSession, conn: u64, reason: CloseReason, will_wanted: bool) {
    let now = Instant::now();
    let client_id = session.client_id().clone();
    let (state, will) = session.finish(will_wanted && reason != CloseReason::Shutdown);
    let mut delayed = None;
    if let Some(will) = will {
        match will.timing(state.expiry(), now) {
            WillTiming::Now(w) => w.publish(&state.core, &client_id, now),
            WillTiming::At(w, at) => delayed = Some((w, at)),
        }
    }
    if state.expiry().is_zero() {
        state.forget_kept();
        shared.registry.release(&client_id, conn, None);
        return;
    }
    let waiting = delayed.as_ref().map(|(will, at)| (will, Some(at.saturating_duration_since(now))));
    drop(kept::save(&state, Some(state.expiry()), waiting));
    let parked = Parked { expires_at: now + state.expiry(), state, will: delayed };
    if let Some(leftover) = shared.registry.release(&client_id, conn, Some(parked)) {
        end_session(leftover.state, leftover.will.map(|(w, _)| w), now);
    }
}

fn end_session(state: Box<SessionState>, will: Option<Will>, now: Instant) {
    state.forget_kept();
    if let Some(will) = will {
        will.publish(&state.core, &state.client_id, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The connection's future: the listener's wrappers (its label, its slot and its gauge)
    /// and tokio's task header take it to a task of 640 bytes on 64-bit targets (a multiple of
    /// the task's 128-byte alignment there; the future is 416 bytes, 488 would still fit) and
    /// of 384 bytes on armv7, the 32-bit Pi build (32-byte alignment; 272 bytes, exactly what
    /// fits). Past those every connection, busy or idle, is in the next class
    /// (docs/benchmarks.md, "Where an idle MQTT connection's bytes go now").
    #[tokio::test]
    async fn a_connections_future_fits_its_task_class() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let peer = listener.local_addr().unwrap();
        let stream = tokio::net::TcpStream::connect(peer).await.unwrap();
        let router = Router::new(Default::default(), Arc::new(tolk_core::Metrics::new()));
        let shared = Arc::new(Shared {
            config: Arc::new(MqttConfig::default()),
            registry: Arc::new(Registry::new(1)),
            auth: Arc::new(tolk_core::auth::AllowAll),
        });
        let connection =
            Connection { stream: Transport::Tcp(stream), peer, shutdown: CancellationToken::new(), router };
        let future = run(shared, connection);
        let most = if cfg!(target_pointer_width = "64") { 488 } else { 272 };
        assert!(size_of_val(&future) <= most, "{} bytes", size_of_val(&future));
    }
}
