//! One AMQP connection's protocol state machine, sans-IO: a [`ProtocolSession`]. Bytes and
//! deliveries go in with the current time, frames come out of `pending_output`, and
//! `poll_timeout` says when to call back. No socket, no task, no clock inside, so handshakes,
//! heartbeats and close handshakes are driven the same way by the core's connection driver and
//! by tests.
//!
//! Owns the connection phase (header → start-ok → tune-ok → open → running → closing), the
//! negotiated limits, heartbeats, the close handshakes and the dispatch of channel frames to
//! `channel.rs`, `exchange.rs`, `queue.rs` and `basic.rs`. Errors come back from those as
//! [`AmqpError`]s and are turned into `channel.close` or `connection.close` here.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use amq_protocol::protocol::{AMQPClass, channel as amqp_channel, connection};
use amq_protocol::types::{AMQPValue, FieldTable, LongString, ShortString};
use amqp_codec::{FRAME_MIN_SIZE, Frame, PROTOCOL_HEADER};
use bytes::BytesMut;
use tolk_core::auth::Credentials;
use tolk_core::drive::ProtocolSession;
use tolk_core::store::StoreError;
use tolk_core::{AckLine, CloseReason, Delivery, Protocol, Session};
use tracing::{debug, info};

use crate::channel::Channel;
use crate::context::{Ctx, Login, Shared};
use crate::error::{AmqpError, Scope, code};
use crate::output::Output;
use crate::{basic, channel, exchange_class, queue};

/// How long the broker waits for `connection.close-ok` after sending `connection.close`.
const CLOSE_OK_TIMEOUT: Duration = Duration::from_secs(2);

/// Where the connection is in its life (spec §2.2.4 "connection class").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for `AMQP\0\0\x09\x01`.
    ProtocolHeader,
    /// `connection.start` sent.
    StartOk,
    /// `connection.tune` sent.
    TuneOk,
    /// Tuned; waiting for `connection.open`.
    Open,
    /// Open: channels work.
    Running,
    /// `connection.close` sent; waiting for close-ok until the deadline.
    Closing { reason: CloseReason, deadline: Instant },
    /// Finished: write what is queued and close the socket.
    Done(CloseReason),
}

/// One AMQP connection.
pub struct AmqpSession {
    ctx: Ctx,
    channels: HashMap<u16, Channel>,
    out: Output,
    phase: Phase,
    channel_max: u16,
    heartbeat: Option<Duration>,
    handshake_deadline: Instant,
    last_recv: Instant,
    last_send: Instant,
}

impl AmqpSession {
    /// The session of a client that a TLS client certificate names (`[tls]
    /// use_identity_as_username`).
    pub fn with_identity(mut self, identity: Option<Arc<str>>) -> Self {
        self.ctx.identity = identity;
        self
    }

    /// A connection from `peer` that has just been accepted, using the core session `core`.
    pub fn new(shared: Arc<Shared>, core: Session, peer: SocketAddr, now: Instant) -> Self {
        let metrics = shared.router.metrics().clone();
        let frame_max = shared.config.frame_max();
        let channel_max = shared.config.channel_max();
        let handshake_deadline = now + shared.config.handshake_timeout;
        let ctx = Ctx {
            shared,
            core,
            consumers: HashMap::new(),
            next_core_tag: 1,
            exclusive_queues: Vec::new(),
            client_id: Arc::from(""),
            peer,
            identity: None,
            cancel_notify: false,
            frame_max,
            metrics,
            assembling: 0,
            confirms: AckLine::default(),
        };
        AmqpSession {
            ctx,
            channels: HashMap::new(),
            out: Output::new(),
            phase: Phase::ProtocolHeader,
            channel_max,
            heartbeat: None,
            handshake_deadline,
            last_recv: now,
            last_send: now,
        }
    }

    /// How long the peer may stay silent: two heartbeat intervals, and never more than
    /// `max_silence`, even when heartbeats were turned off (`None`: no bound at all).
    fn silence_limit(&self) -> Option<std::time::Duration> {
        let max = self.ctx.shared.config.max_silence;
        let max = (!max.is_zero()).then_some(max);
        match (self.heartbeat.map(|hb| hb * 2), max) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn finish(&mut self, reason: CloseReason) {
        if self.finished().is_none() {
            self.teardown_channels();
            self.phase = Phase::Done(reason);
        }
    }

    fn teardown_channels(&mut self) {
        for (_, mut ch) in self.channels.drain() {
            channel::teardown(&mut self.ctx, &mut ch);
        }
    }

    /// Sends `connection.close` for a hard error and waits for close-ok (spec §2.3.6).
    fn connection_error(&mut self, error: AmqpError, now: Instant) {
        if matches!(self.phase, Phase::Closing { .. } | Phase::Done(_)) {
            return;
        }
        if error.code != code::CONNECTION_FORCED {
            info!(
                code = error.code,
                class_id = error.class_id,
                method_id = error.method_id,
                "closing connection: {}",
                error.text
            );
        }
        self.out.method(0, close_method(&error));
        self.teardown_channels();
        self.phase = Phase::Closing { reason: error.close_reason, deadline: now + CLOSE_OK_TIMEOUT };
    }

    fn handle_frame(&mut self, frame: Frame, now: Instant) {
        if let Phase::Closing { reason, .. } = self.phase {
            // Spec §2.2.4: after connection.close only close and close-ok are looked at.
            match frame {
                Frame::Method(0, m) if matches!(*m, AMQPClass::Connection(connection::AMQPMethod::CloseOk(_))) => {
                    self.finish(reason)
                }
                Frame::Method(0, m) if matches!(*m, AMQPClass::Connection(connection::AMQPMethod::Close(_))) => {
                    self.out.method(0, AMQPClass::Connection(connection::AMQPMethod::CloseOk(connection::CloseOk {})));
                    self.finish(reason);
                }
                _ => {}
            }
            return;
        }
        let result = match frame {
            Frame::Heartbeat => Ok(()),
            Frame::Method(0, method) => self.connection_method(*method),
            _ if self.phase != Phase::Running => {
                Err(AmqpError::command_invalid("channel frames are not allowed before connection.open-ok"))
            }
            Frame::Method(ch, method) => self.channel_method(ch, *method, now),
            Frame::Header(0, _) | Frame::Body(0, _) => Err(AmqpError::command_invalid("content frames on channel 0")),
            Frame::Header(ch, header) => {
                self.with_channel(ch, 0, 0, |ctx, c, out| basic::content_header(ctx, c, out, *header, now))
            }
            Frame::Body(ch, body) => {
                self.with_channel(ch, 0, 0, |ctx, c, out| basic::content_body(ctx, c, out, body, now))
            }
        };
        if let Err(e) = result {
            self.connection_error(e, now);
        }
    }

    /// Runs a handler on an open channel and turns a soft error into `channel.close`. Returns
    /// hard errors. Frames on a channel that is closing are dropped (spec §2.2.4, channel class).
    fn with_channel(
        &mut self,
        ch: u16,
        class_id: u16,
        method_id: u16,
        f: impl FnOnce(&mut Ctx, &mut Channel, &mut Output) -> Result<(), AmqpError>,
    ) -> Result<(), AmqpError> {
        let Some(channel) = self.channels.get_mut(&ch) else {
            return Err(AmqpError::channel_error(format!("channel {ch} is not open")).during(class_id, method_id));
        };
        if channel.closing {
            return Ok(());
        }
        match f(&mut self.ctx, channel, &mut self.out) {
            Ok(()) => Ok(()),
            Err(e) if e.scope == Scope::Channel => {
                let e = e.during(class_id, method_id);
                debug!(channel = ch, code = e.code, "closing channel: {}", e.text);
                channel::teardown(&mut self.ctx, channel);
                channel.closing = true;
                self.out.method(ch, channel_close_method(&e));
                Ok(())
            }
            Err(e) => Err(e.during(class_id, method_id)),
        }
    }

    fn channel_method(&mut self, ch: u16, method: AMQPClass, now: Instant) -> Result<(), AmqpError> {
        let (class_id, method_id) = (method.get_amqp_class_id(), method.get_amqp_method_id());
        match &method {
            AMQPClass::Channel(amqp_channel::AMQPMethod::Open(_)) => {
                if ch > self.channel_max {
                    return Err(AmqpError::not_allowed(format!(
                        "channel {ch} is above the negotiated channel_max {}",
                        self.channel_max
                    ))
                    .limit()
                    .during(class_id, method_id));
                }
                if self.channels.contains_key(&ch) {
                    return Err(
                        AmqpError::channel_error(format!("channel {ch} is already open")).during(class_id, method_id)
                    );
                }
                self.channels.insert(ch, Channel::new(ch));
                self.out.method(ch, AMQPClass::Channel(amqp_channel::AMQPMethod::OpenOk(amqp_channel::OpenOk {})));
                return Ok(());
            }
            AMQPClass::Channel(amqp_channel::AMQPMethod::Close(_) | amqp_channel::AMQPMethod::CloseOk(_)) => {
                let Some(channel) = self.channels.get_mut(&ch) else {
                    return Err(
                        AmqpError::channel_error(format!("channel {ch} is not open")).during(class_id, method_id)
                    );
                };
                let client_closes = matches!(method, AMQPClass::Channel(amqp_channel::AMQPMethod::Close(_)));
                if client_closes {
                    channel::teardown(&mut self.ctx, channel);
                    self.out
                        .method(ch, AMQPClass::Channel(amqp_channel::AMQPMethod::CloseOk(amqp_channel::CloseOk {})));
                } else if !channel.closing {
                    return Err(AmqpError::command_invalid(format!(
                        "channel.close-ok on channel {ch}, which was not closing"
                    ))
                    .during(class_id, method_id));
                }
                self.channels.remove(&ch);
                return Ok(());
            }
            _ => {}
        }
        if let Some(channel) = self.channels.get(&ch)
            && !channel.closing
            && channel.expects_content()
        {
            return Err(AmqpError::unexpected_frame(format!(
                "method {class_id}.{method_id} on channel {ch}, which expects the content of a basic.publish"
            ))
            .during(class_id, method_id));
        }
        self.with_channel(ch, class_id, method_id, |ctx, c, out| match method {
            // A channel.flow that resumes deliveries releases what was held back.
            AMQPClass::Channel(m) => channel::handle(c, out, m).map(|()| basic::release_held(ctx, c, out, now)),
            AMQPClass::Exchange(m) => exchange_class::handle(ctx, c, out, m),
            AMQPClass::Queue(m) => queue::handle(ctx, c, out, m),
            AMQPClass::Basic(m) => basic::handle(ctx, c, out, m, now),
            AMQPClass::Confirm(m) => basic::handle_confirm(c, out, m),
            AMQPClass::Tx(_) => Err(AmqpError::not_implemented(
                "transactions (tx.select, tx.commit, tx.rollback) are not implemented; use publisher confirms (confirm.select)",
            )),
            AMQPClass::Access(_) => Err(AmqpError::not_implemented("access.request is deprecated and not implemented")),
            AMQPClass::Connection(_) => {
                Err(AmqpError::command_invalid(format!("connection method {class_id}.{method_id} on channel {ch}; use channel 0")))
            }
        })
    }

    fn connection_method(&mut self, method: AMQPClass) -> Result<(), AmqpError> {
        use connection::AMQPMethod as M;
        let (class_id, method_id) = (method.get_amqp_class_id(), method.get_amqp_method_id());
        let AMQPClass::Connection(method) = method else {
            return Err(AmqpError::command_invalid(format!(
                "method {class_id}.{method_id} on channel 0, which only carries connection methods"
            )));
        };
        let result = match (self.phase, method) {
            (Phase::StartOk, M::StartOk(m)) => self.start_ok(m),
            (Phase::TuneOk, M::TuneOk(m)) => self.tune_ok(m),
            (Phase::Open, M::Open(m)) => {
                if m.virtual_host.as_str() != "/" {
                    return Err(AmqpError::not_allowed(format!(
                        "vhost '{}' not found: this broker has the single vhost '/'",
                        m.virtual_host
                    ))
                    .during(class_id, method_id));
                }
                self.out.method(0, AMQPClass::Connection(M::OpenOk(connection::OpenOk {})));
                self.phase = Phase::Running;
                debug!(client = %self.ctx.client_id, "connection open");
                Ok(())
            }
            (_, M::Close(m)) => {
                debug!(code = m.reply_code, text = %m.reply_text, "client closes the connection");
                self.teardown_channels();
                self.out.method(0, AMQPClass::Connection(M::CloseOk(connection::CloseOk {})));
                self.finish(CloseReason::ClientClosed);
                Ok(())
            }
            (_, M::UpdateSecret(_)) => Err(AmqpError::not_implemented("connection.update-secret is not implemented")),
            (Phase::Running, M::Blocked(_) | M::Unblocked(_)) => Err(AmqpError::command_invalid(
                "connection.blocked and connection.unblocked are sent by servers, not clients",
            )),
            (phase, m) => Err(AmqpError::command_invalid(format!(
                "connection method {class_id}.{method_id} ({}) is not valid {}",
                method_name(&m),
                match phase {
                    Phase::StartOk => "now: expected connection.start-ok",
                    Phase::TuneOk => "now: expected connection.tune-ok",
                    Phase::Open => "now: expected connection.open",
                    _ => "on an open connection",
                }
            ))),
        };
        result.map_err(|e| e.during(class_id, method_id))
    }

    fn start_ok(&mut self, m: connection::StartOk) -> Result<(), AmqpError> {
        let props = m.client_properties.inner();
        if let Some(AMQPValue::FieldTable(caps)) = props.get("capabilities") {
            self.ctx.cancel_notify =
                matches!(caps.inner().get("consumer_cancel_notify"), Some(AMQPValue::Boolean(true)));
        }
        let name = match props.get("connection_name") {
            Some(AMQPValue::LongString(s)) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
            Some(AMQPValue::ShortString(s)) => s.as_str().to_owned(),
            _ => String::new(),
        };
        self.ctx.client_id = Arc::from(name.as_str());
        let login = parse_credentials(m.mechanism.as_str(), m.response.as_bytes()).map_err(AmqpError::auth_refused)?;
        let credentials = Credentials {
            protocol: Protocol::Amqp,
            username: Some(&login.username),
            password: Some(login.password.as_bytes()),
            client_id: None,
            peer: self.ctx.peer,
            proven: false,
        }
        .with_identity(self.ctx.identity.as_deref());
        self.ctx.shared.auth.authenticate(&credentials).map_err(AmqpError::auth_refused)?;
        let rights = self.ctx.shared.auth.access(credentials.username, None);
        self.ctx.core.restrict(rights);
        debug!(user = %login.username, mechanism = %login.mechanism, "login accepted");
        let config = &self.ctx.shared.config;
        self.out.method(
            0,
            AMQPClass::Connection(connection::AMQPMethod::Tune(connection::Tune {
                channel_max: config.channel_max(),
                frame_max: config.frame_max(),
                heartbeat: config.heartbeat_secs(),
            })),
        );
        self.phase = Phase::TuneOk;
        Ok(())
    }

    fn tune_ok(&mut self, m: connection::TuneOk) -> Result<(), AmqpError> {
        let config = &self.ctx.shared.config;
        let frame_max = if m.frame_max == 0 { config.frame_max() } else { m.frame_max };
        if frame_max > config.frame_max() || frame_max < FRAME_MIN_SIZE {
            return Err(AmqpError::not_allowed(format!(
                "frame_max {} is outside the allowed range {FRAME_MIN_SIZE}..={}",
                m.frame_max,
                config.frame_max()
            )));
        }
        let channel_max = if m.channel_max == 0 { config.channel_max() } else { m.channel_max };
        if channel_max > config.channel_max() {
            return Err(AmqpError::not_allowed(format!(
                "channel_max {} is above the {} the broker offered",
                m.channel_max,
                config.channel_max()
            )));
        }
        self.ctx.frame_max = frame_max;
        self.channel_max = channel_max;
        self.heartbeat = (m.heartbeat > 0).then(|| Duration::from_secs(u64::from(m.heartbeat)));
        self.phase = Phase::Open;
        Ok(())
    }
}

impl ProtocolSession for AmqpSession {
    /// The core session: the connection loop asks it whether publishes are held back.
    fn core(&self) -> &Session {
        &self.ctx.core
    }

    /// Counts as hearing from the peer: used while the broker itself did not read (a subscriber
    /// of this connection's messages was full), so that silence is not blamed on the peer.
    fn excuse_silence(&mut self, now: Instant) {
        self.last_recv = now;
    }

    /// A persistent message reached the disk: its publisher confirm goes out.
    fn handle_durable(&mut self, result: Result<(), StoreError>, _now: Instant) {
        basic::settle_stored(&mut self.ctx, &self.channels, &mut self.out, result);
    }

    /// Bytes to write to the socket.
    fn pending_output(&self) -> &[u8] {
        self.out.unwritten()
    }

    /// `n` bytes of [`AmqpSession::pending_output`] were written at `now`.
    fn advance_output(&mut self, n: usize, now: Instant) {
        self.out.advance(n, now, &self.ctx.metrics);
        self.last_send = now;
    }

    /// Why the connection ended, once it has: write the pending output, then close the socket.
    fn finished(&self) -> Option<CloseReason> {
        match self.phase {
            Phase::Done(reason) => Some(reason),
            _ => None,
        }
    }

    /// Queue deliveries are taken once the connection is open, as many as there are (each
    /// consumer's credit bounds them).
    fn delivery_window(&self) -> usize {
        if self.phase == Phase::Running { usize::MAX } else { 0 }
    }

    /// The next instant at which [`AmqpSession::handle_timeout`] has work to do.
    fn poll_timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Done(_) => None,
            Phase::Closing { deadline, .. } => Some(deadline),
            Phase::Running => {
                let dead = self.silence_limit().map(|limit| self.last_recv + limit);
                let beat = self.heartbeat.filter(|_| self.out.len() == 0).map(|hb| self.last_send + hb / 2);
                match (dead, beat) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
            _ => Some(self.handshake_deadline),
        }
    }

    /// Timers: handshake deadline, heartbeat send and receive, close-ok wait.
    fn handle_timeout(&mut self, now: Instant) {
        match self.phase {
            Phase::Done(_) => {}
            Phase::Closing { reason, deadline } => {
                if now >= deadline {
                    debug!("no connection.close-ok within {CLOSE_OK_TIMEOUT:?}; closing the socket");
                    self.finish(reason);
                }
            }
            Phase::Running => {
                if let Some(limit) = self.silence_limit()
                    && now >= self.last_recv + limit
                {
                    info!(heartbeat = ?self.heartbeat, silent = ?limit, "peer silent for too long; closing");
                    self.finish(CloseReason::KeepAliveTimeout);
                } else if let Some(hb) = self.heartbeat
                    && self.out.len() == 0
                    && now >= self.last_send + hb / 2
                {
                    self.out.heartbeat();
                }
            }
            _ => {
                if now >= self.handshake_deadline {
                    info!(timeout = ?self.ctx.shared.config.handshake_timeout, "handshake not completed in time; closing");
                    self.finish(CloseReason::ProtocolError);
                }
            }
        }
    }

    /// The broker is shutting down: say goodbye with 320 CONNECTION_FORCED.
    fn begin_shutdown(&mut self, now: Instant) {
        match self.phase {
            Phase::Running => {
                let mut e = AmqpError::connection_forced("broker shutdown");
                e.close_reason = CloseReason::Shutdown;
                self.connection_error(e, now);
            }
            Phase::Closing { .. } | Phase::Done(_) => {}
            _ => self.finish(CloseReason::Shutdown),
        }
    }

    /// The peer closed its side. `partial` tells whether it stopped inside a frame.
    fn handle_eof(&mut self, partial: bool) {
        let reason = match self.phase {
            Phase::Closing { reason, .. } => reason,
            Phase::Done(reason) => reason,
            _ if partial => {
                info!("peer closed the connection in the middle of a frame");
                CloseReason::ProtocolError
            }
            _ => {
                debug!("peer closed the connection without connection.close");
                CloseReason::ClientClosed
            }
        };
        self.finish(reason);
    }

    /// A socket read or write failed.
    fn handle_io_error(&mut self, error: &std::io::Error) {
        if self.finished().is_none() {
            debug!(%error, "socket error");
            self.finish(CloseReason::IoError);
        }
    }

    /// The outbox overflowed (cannot happen with credit-bounded queue deliveries; handled for
    /// completeness): close as a slow consumer.
    fn handle_overflow(&mut self, now: Instant) {
        let mut e = AmqpError::connection_forced("slow consumer: deliveries could not be written fast enough");
        e.close_reason = CloseReason::SlowConsumer;
        self.connection_error(e, now);
    }

    /// Reads every complete frame in `buf` (received at `now`) and acts on it.
    fn handle_bytes(&mut self, buf: &mut BytesMut, now: Instant) {
        self.last_recv = now;
        loop {
            match self.phase {
                Phase::Done(_) => {
                    buf.clear();
                    return;
                }
                Phase::ProtocolHeader => match amqp_codec::check_protocol_header(buf) {
                    Ok(false) => return,
                    Ok(true) => {
                        self.out.method(0, start_method());
                        self.phase = Phase::StartOk;
                    }
                    Err(e) => {
                        // Spec §4.2.2: answer with the header we speak, then close.
                        info!("{e}; answering with the AMQP 0-9-1 header and closing");
                        self.out.raw(&PROTOCOL_HEADER);
                        self.finish(CloseReason::ProtocolError);
                    }
                },
                // A subscriber of this connection's messages is full: the rest of the buffer
                // waits until the connection loop has relieved the congestion.
                _ if self.ctx.core.is_congesting() => return,
                phase => {
                    let frame = match amqp_codec::decode(buf, self.ctx.frame_max) {
                        Ok(Some(frame)) => frame,
                        Ok(None) => return,
                        Err(e) => {
                            buf.clear();
                            if let Phase::Closing { reason, .. } = phase {
                                self.finish(reason);
                                return;
                            }
                            // Framing is lost: nothing after this can be read, so send the
                            // reason and close without waiting for close-ok.
                            let error = AmqpError::from(&e);
                            let reason = error.close_reason;
                            self.connection_error(error, now);
                            self.finish(reason);
                            return;
                        }
                    };
                    self.handle_frame(frame, now);
                }
            }
        }
    }

    /// Takes deliveries drained from the outbox at `now` and writes them (or holds them back
    /// for flow control and global prefetch).
    fn handle_deliveries(&mut self, batch: &mut Vec<Delivery>, now: Instant) {
        for delivery in batch.drain(..) {
            basic::deliver(&mut self.ctx, &mut self.channels, &mut self.out, delivery, now, now);
        }
    }

    /// Some queue was deleted somewhere (the registry's deletion signal): cancel this
    /// connection's consumers of deleted queues, telling clients that understand it with
    /// `basic.cancel` (consumer_cancel_notify).
    fn handle_signal(&mut self, _now: Instant) {
        if self.phase != Phase::Running {
            return;
        }
        for channel in self.channels.values_mut().filter(|c| !c.closing) {
            basic::cancel_consumers_of_deleted_queues(&mut self.ctx, channel, &mut self.out);
        }
    }
}

impl Drop for AmqpSession {
    fn drop(&mut self) {
        self.teardown_channels();
        // The core deletes exclusive queues when its session drops; do it here so that the
        // exchange bindings to them go too.
        for queue in std::mem::take(&mut self.ctx.exclusive_queues) {
            let router = &self.ctx.shared.router;
            if router.queue(queue.name()).is_some_and(|q| Arc::ptr_eq(&q, &queue)) {
                router.delete_queue(queue.name());
            }
            self.ctx.shared.registry.forget_queue(&queue);
        }
    }
}

fn short(s: &str) -> ShortString {
    ShortString::try_new(crate::error::truncate_utf8(s, 255)).unwrap_or_default()
}

fn close_method(e: &AmqpError) -> AMQPClass {
    AMQPClass::Connection(connection::AMQPMethod::Close(connection::Close {
        reply_code: e.code,
        reply_text: short(e.short_text()),
        class_id: e.class_id,
        method_id: e.method_id,
    }))
}

fn channel_close_method(e: &AmqpError) -> AMQPClass {
    AMQPClass::Channel(amqp_channel::AMQPMethod::Close(amqp_channel::Close {
        reply_code: e.code,
        reply_text: short(e.short_text()),
        class_id: e.class_id,
        method_id: e.method_id,
    }))
}

fn method_name(m: &connection::AMQPMethod) -> &'static str {
    use connection::AMQPMethod as M;
    match m {
        M::Start(_) => "connection.start",
        M::StartOk(_) => "connection.start-ok",
        M::Secure(_) => "connection.secure",
        M::SecureOk(_) => "connection.secure-ok",
        M::Tune(_) => "connection.tune",
        M::TuneOk(_) => "connection.tune-ok",
        M::Open(_) => "connection.open",
        M::OpenOk(_) => "connection.open-ok",
        M::Close(_) => "connection.close",
        M::CloseOk(_) => "connection.close-ok",
        M::Blocked(_) => "connection.blocked",
        M::Unblocked(_) => "connection.unblocked",
        M::UpdateSecret(_) => "connection.update-secret",
        M::UpdateSecretOk(_) => "connection.update-secret-ok",
    }
}

/// `connection.start` (§1.4.2.1) with the capabilities clients look for: aio-pika refuses to
/// open channels without `publisher_confirms`, and pika/lapin enable consumer cancel
/// notifications and `basic.nack` only when offered.
fn start_method() -> AMQPClass {
    let mut caps = FieldTable::default();
    for cap in [
        "publisher_confirms",
        "basic.nack",
        "consumer_cancel_notify",
        "exchange_exchange_bindings",
        "connection.blocked",
        "authentication_failure_close",
        "per_consumer_qos",
    ] {
        caps.insert(cap.into(), AMQPValue::Boolean(true));
    }
    let mut props = FieldTable::default();
    let text = |s: &str| AMQPValue::LongString(LongString::from(s));
    props.insert("product".into(), text("tolk"));
    props.insert("version".into(), text(env!("CARGO_PKG_VERSION")));
    props.insert("platform".into(), text("Rust"));
    props.insert("information".into(), text("tolk multi-protocol IoT broker; AMQP 0-9-1 front end"));
    props.insert("capabilities".into(), AMQPValue::FieldTable(caps));
    AMQPClass::Connection(connection::AMQPMethod::Start(connection::Start {
        version_major: 0,
        version_minor: 9,
        server_properties: props,
        mechanisms: "PLAIN AMQPLAIN".into(),
        locales: "en_US".into(),
    }))
}

/// Parses a SASL response: PLAIN is `[authzid] NUL user NUL password` (RFC 4616); AMQPLAIN is
/// a field table without its length prefix holding `LOGIN` and `PASSWORD`.
pub fn parse_credentials(mechanism: &str, response: &[u8]) -> Result<Login, String> {
    let (username, password) = match mechanism {
        "PLAIN" => {
            let mut parts = response.split(|&b| b == 0);
            let (Some(_authzid), Some(user), Some(pass), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err("malformed PLAIN response: expected '[authzid]\\0user\\0password'".to_owned());
            };
            (String::from_utf8_lossy(user).into_owned(), String::from_utf8_lossy(pass).into_owned())
        }
        "AMQPLAIN" => {
            if !amqp_codec::field_table_depth_ok(response) {
                return Err("AMQPLAIN response nests tables too deeply".to_owned());
            }
            let mut table = (response.len() as u32).to_be_bytes().to_vec();
            table.extend_from_slice(response);
            let Ok((rest, table)) = amq_protocol::types::parsing::parse_field_table(table.as_slice()) else {
                return Err("malformed AMQPLAIN response: not a field table".to_owned());
            };
            if !rest.is_empty() {
                return Err("malformed AMQPLAIN response: bytes after the table".to_owned());
            }
            let field = |name: &str| match table.inner().get(name) {
                Some(AMQPValue::LongString(s)) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
                Some(AMQPValue::ShortString(s)) => Some(s.as_str().to_owned()),
                _ => None,
            };
            match (field("LOGIN"), field("PASSWORD")) {
                (Some(u), Some(p)) => (u, p),
                _ => return Err("AMQPLAIN response lacks LOGIN or PASSWORD".to_owned()),
            }
        }
        other => return Err(format!("authentication mechanism '{other}' is not supported; use PLAIN or AMQPLAIN")),
    };
    Ok(Login { mechanism: mechanism.to_owned(), username, password })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AmqpConfig;
    use amq_protocol::frame::{AMQPFrame, WriteContext, gen_frame};
    use tolk_core::RouterConfig;
    use tolk_core::{Metrics, Protocol, Router};

    fn session() -> AmqpSession {
        session_with(Arc::new(tolk_core::auth::AllowAll))
    }

    fn session_with(auth: Arc<dyn tolk_core::auth::Authenticator>) -> AmqpSession {
        let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
        let shared = Arc::new(Shared::new(
            AmqpConfig { heartbeat: Duration::from_secs(4), ..AmqpConfig::default() },
            router.clone(),
            auth,
        ));
        AmqpSession::new(shared, router.open_session(Protocol::Amqp), "127.0.0.1:9".parse().unwrap(), Instant::now())
    }

    #[test]
    fn a_login_the_authenticator_refuses_is_closed_with_403() {
        struct NoGuests;
        impl tolk_core::auth::Authenticator for NoGuests {
            fn authenticate(&self, c: &Credentials<'_>) -> Result<(), String> {
                assert_eq!((c.protocol, c.password), (Protocol::Amqp, Some(&b"guest"[..])));
                if c.username == Some("guest") { Err("guests are not welcome".into()) } else { Ok(()) }
            }
        }
        let mut s = session_with(Arc::new(NoGuests));
        let t0 = Instant::now();
        handshake(&mut s, t0, 4);
        let frames = output_frames(&mut s, t0);
        let close = frames.iter().find_map(|f| match f {
            Frame::Method(0, m) => match &**m {
                AMQPClass::Connection(connection::AMQPMethod::Close(c)) => Some(c.clone()),
                _ => None,
            },
            _ => None,
        });
        let close = close.expect("connection.close");
        assert_eq!(close.reply_code, 403, "ACCESS_REFUSED");
        assert!(close.reply_text.as_str().contains("guests are not welcome"), "{}", close.reply_text);
    }

    fn bytes_of(frame: AMQPFrame) -> BytesMut {
        let (v, _) = gen_frame(&frame)(WriteContext::from(Vec::new())).unwrap().into_inner();
        BytesMut::from(&v[..])
    }

    fn output_frames(s: &mut AmqpSession, now: Instant) -> Vec<Frame> {
        let mut buf = BytesMut::from(s.pending_output());
        let n = buf.len();
        s.advance_output(n, now);
        let mut frames = Vec::new();
        while let Some(f) = amqp_codec::decode(&mut buf, 1 << 20).unwrap() {
            frames.push(f);
        }
        frames
    }

    fn handshake(s: &mut AmqpSession, now: Instant, heartbeat: u16) {
        s.handle_bytes(&mut BytesMut::from(&PROTOCOL_HEADER[..]), now);
        let start_ok = connection::StartOk {
            client_properties: FieldTable::default(),
            mechanism: "PLAIN".into(),
            response: "\0guest\0guest".into(),
            locale: "en_US".into(),
        };
        s.handle_bytes(
            &mut bytes_of(AMQPFrame::Method(0, AMQPClass::Connection(connection::AMQPMethod::StartOk(start_ok)))),
            now,
        );
        let tune_ok = connection::TuneOk { channel_max: 10, frame_max: 4096, heartbeat };
        s.handle_bytes(
            &mut bytes_of(AMQPFrame::Method(0, AMQPClass::Connection(connection::AMQPMethod::TuneOk(tune_ok)))),
            now,
        );
        let open = connection::Open { virtual_host: "/".into() };
        s.handle_bytes(
            &mut bytes_of(AMQPFrame::Method(0, AMQPClass::Connection(connection::AMQPMethod::Open(open)))),
            now,
        );
    }

    #[test]
    fn handshake_then_heartbeats_driven_by_time_alone() {
        let mut s = session();
        let t0 = Instant::now();
        handshake(&mut s, t0, 4);
        let frames = output_frames(&mut s, t0);
        assert!(matches!(&frames[..], [Frame::Method(0, a), Frame::Method(0, b), Frame::Method(0, c)]
            if matches!(**a, AMQPClass::Connection(connection::AMQPMethod::Start(_)))
            && matches!(**b, AMQPClass::Connection(connection::AMQPMethod::Tune(_)))
            && matches!(**c, AMQPClass::Connection(connection::AMQPMethod::OpenOk(_)))));
        // Half an interval of silence from us: a heartbeat goes out.
        assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(2)));
        s.handle_timeout(t0 + Duration::from_secs(2));
        assert_eq!(output_frames(&mut s, t0 + Duration::from_secs(2)), [Frame::Heartbeat]);
        // Two intervals of silence from the peer: closed.
        s.handle_timeout(t0 + Duration::from_secs(8));
        assert_eq!(s.finished(), Some(CloseReason::KeepAliveTimeout));
    }

    #[test]
    fn heartbeat_zero_is_still_bounded_by_max_silence() {
        let mut s = session();
        let t0 = Instant::now();
        handshake(&mut s, t0, 0);
        output_frames(&mut s, t0);
        let max = AmqpConfig::default().max_silence;
        assert_eq!(s.poll_timeout(), Some(t0 + max), "heartbeat 0 negotiated, but silence has a bound");
        s.handle_timeout(t0 + max - Duration::from_secs(1));
        assert_eq!(s.finished(), None);
        s.handle_timeout(t0 + max);
        assert_eq!(s.finished(), Some(CloseReason::KeepAliveTimeout));
    }

    #[test]
    fn handshake_deadline_closes_a_silent_peer() {
        let mut s = session();
        let t0 = Instant::now();
        let deadline = s.poll_timeout().unwrap();
        s.handle_timeout(t0);
        assert_eq!(s.finished(), None);
        s.handle_timeout(deadline);
        assert_eq!(s.finished(), Some(CloseReason::ProtocolError));
    }

    #[test]
    fn sasl_responses_are_parsed() {
        let plain = parse_credentials("PLAIN", b"\0user\0pw").unwrap();
        assert_eq!((plain.username.as_str(), plain.password.as_str()), ("user", "pw"));
        let amqplain = amq_protocol::auth::Credentials::new("u".into(), "p".into())
            .sasl_auth_string(amq_protocol::auth::SASLMechanism::AMQPlain);
        let c = parse_credentials("AMQPLAIN", amqplain.as_bytes()).unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("u", "p"));
        assert!(parse_credentials("PLAIN", b"nonul").is_err());
        assert!(parse_credentials("EXTERNAL", b"").is_err());
        assert!(parse_credentials("AMQPLAIN", b"\x05LOGIN").is_err());
    }
}
