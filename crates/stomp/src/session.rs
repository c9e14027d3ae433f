//! [`StompSession`]: the protocol state machine of one connection, quinn-style. It owns no
//! socket and reads no clock: the connection (`connection.rs`) feeds it frames, deliveries
//! and timer expiries with the current time, and writes the bytes of
//! [`StompSession::output`]. It talks to the core through its [`Session`].
//!
//! Every error is fatal (STOMP has no non-fatal error frame): the session writes ERROR, moves
//! to [`Phase::Closed`] and returns the close reason; the connection flushes and closes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Instant, SystemTime};

use bytes::BytesMut;
use stomp_codec::{Command, DecodeError, Encoder, Frame, Utf8Bytes, Version, encode_heartbeat};
use tolk_core::store::{Durable, StoreError};
use tolk_core::{
    AckLine, CloseReason, Delivery, DropReason, Message, Origin, QoS, Queue, QueueAck, QueueOptions, QueuePush,
    Session, SubscriptionOptions,
};
use tracing::{debug, info, warn};

use crate::ack::{Unacked, Verdict};
use crate::config::StompConfig;
use crate::connect;
use crate::destination::{self, Destination};
use crate::error::StompError;
use crate::heartbeat::Liveness;
use crate::subscription::{self, AckMode, Source, Subscription, Subscriptions};
use crate::transaction::{TransactionLimits, Transactions};
use crate::translate::{self, Envelope, SendTarget};
use tolk_core::access::{Right, SubscribeError};
use tolk_core::auth::Authenticator;

/// The two clocks a frame is handled at: monotonic for deadlines and latency, wall-clock for
/// the `expires` header (milliseconds since the Unix epoch).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    /// Monotonic time.
    pub instant: Instant,
    /// Wall-clock time.
    pub wall: SystemTime,
}

impl Now {
    /// Reads both clocks.
    pub fn current() -> Self {
        Now { instant: Instant::now(), wall: SystemTime::now() }
    }
}

/// Where the connection is in its life; each phase holds only what is valid in it.
enum Phase {
    /// Only CONNECT or STOMP is accepted, until `deadline`.
    AwaitingConnect { deadline: Instant },
    /// Handshake done.
    Connected { version: Version, liveness: Liveness },
    /// ERROR or the DISCONNECT receipt was written; nothing more is accepted.
    Closed,
}

/// What a continued frame asks of the connection.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Disconnect,
}

/// An action a transaction defers until COMMIT.
pub(crate) enum Deferred {
    /// Publish to a topic (`to_queue == false`) or push into the queue named by the topic.
    Send { message: Box<Message>, to_queue: bool },
    /// ACK or NACK message `id`.
    Settle { id: u64, verdict: Verdict },
}

/// A MESSAGE written to the output; after the bytes reach the socket the connection records
/// latency and, for auto-ack queue subscriptions, settles the queue delivery.
pub(crate) struct Written {
    /// The delivery, kept for metrics.
    pub delivery: Delivery,
    /// The queue delivery to ack once written (auto-ack subscription).
    pub settle: Option<QueueAck>,
    /// When the connection took it from the outbox.
    pub taken_at: Instant,
}

/// The state machine of one STOMP connection.
pub(crate) struct StompSession {
    config: Arc<StompConfig>,
    auth: Arc<dyn Authenticator>,
    peer: SocketAddr,
    /// The user a TLS client certificate names, which wins over `login`.
    identity: Option<Arc<str>>,
    core: Session,
    phase: Phase,
    encoder: Encoder,
    out: BytesMut,
    subscriptions: Subscriptions,
    unacked: Unacked,
    transactions: Transactions<Deferred>,
    client_id: Arc<str>,
    /// One entry per store commit the core session awaits, and the receipts in line behind
    /// them: a RECEIPT goes out only once every message sent before it is on disk.
    receipts: AckLine<Option<String>>,
    /// DISCONNECT came while receipts waited for the store: close once they are sent.
    disconnecting: bool,
}

fn required<'f>(frame: &'f Frame, name: &str) -> Result<&'f str, StompError> {
    frame.header(name).ok_or_else(|| StompError::missing_header(frame.command.as_str(), name))
}

impl StompSession {
    /// A session waiting for CONNECT, opened at `now`.
    pub fn new(
        config: Arc<StompConfig>,
        auth: Arc<dyn Authenticator>,
        peer: SocketAddr,
        core: Session,
        now: Instant,
    ) -> Self {
        let limits = TransactionLimits {
            max_open: config.max_transactions,
            max_frames: config.max_transaction_frames,
            max_bytes: config.max_transaction_bytes,
        };
        StompSession {
            phase: Phase::AwaitingConnect { deadline: now + config.connect_timeout },
            subscriptions: Subscriptions::new(config.max_subscriptions),
            transactions: Transactions::new(limits),
            unacked: Unacked::default(),
            encoder: Encoder::new(),
            out: BytesMut::new(),
            client_id: Arc::from(""),
            config,
            auth,
            peer,
            identity: None,
            core,
            receipts: AckLine::default(),
            disconnecting: false,
        }
    }

    /// The session of a client that a TLS client certificate names (`[tls]
    /// use_identity_as_username`).
    pub fn with_identity(mut self, identity: Option<Arc<str>>) -> Self {
        self.identity = identity;
        self
    }

    /// The negotiated version, once connected.
    pub fn version(&self) -> Option<Version> {
        match self.phase {
            Phase::Connected { version, .. } => Some(version),
            _ => None,
        }
    }

    /// The core session: the connection loop asks it whether publishes are held back.
    pub fn core(&self) -> &Session {
        &self.core
    }

    /// Whether the connection should take more deliveries: only once connected, and not while
    /// the client holds `max_unacked_messages` unacknowledged MESSAGEs (back-pressure instead
    /// of unbounded bookkeeping).
    pub fn accepts_deliveries(&self) -> bool {
        matches!(self.phase, Phase::Connected { .. }) && self.unacked.len() < self.config.max_unacked_messages
    }

    /// When [`StompSession::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.phase {
            Phase::AwaitingConnect { deadline } => Some(*deadline),
            Phase::Connected { liveness, .. } => liveness.next_deadline(),
            Phase::Closed => None,
        }
    }

    /// Bytes waiting to be written.
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// `n` bytes of [`StompSession::output`] were written at `now`.
    pub fn advance_output(&mut self, n: usize, now: Instant) {
        tolk_core::drive::consume_written(&mut self.out, n);
        self.note_written(now);
    }

    /// Bytes arrived from the client (any bytes count as a heart-beat).
    pub fn note_read(&mut self, now: Instant) {
        if let Phase::Connected { liveness, .. } = &mut self.phase {
            liveness.note_read(now);
        }
    }

    /// Output was written to the socket (heart-beats are due only after silence).
    fn note_written(&mut self, now: Instant) {
        if let Phase::Connected { liveness, .. } = &mut self.phase {
            liveness.note_write(now);
        }
    }

    fn write(&mut self, frame: &Frame) -> bool {
        match self.encoder.encode(frame, &mut self.out) {
            Ok(()) => true,
            Err(e) => {
                warn!(command = %frame.command, error = %e, "cannot encode frame; not sent");
                false
            }
        }
    }

    /// Writes ERROR for `error`, closes the session and returns the close reason.
    fn fail(&mut self, error: StompError, receipt: Option<&str>) -> CloseReason {
        if matches!(self.phase, Phase::Closed) {
            return error.reason;
        }
        info!(reason = %error.reason, error = %error.message, "closing STOMP connection with ERROR");
        if !self.write(&error.to_frame(receipt)) {
            // The receipt id or an extra header could not be encoded: say at least why.
            self.write(&Frame::error(&error.message, bytes::Bytes::new()));
        }
        self.phase = Phase::Closed;
        error.reason
    }

    /// The oldest store commit of this connection's messages ended: the receipts waiting for
    /// it go out. STOMP has no negative receipt, so a message the store could not keep is an
    /// ERROR: the client sends it again on a new connection.
    pub fn handle_durable(&mut self, result: Result<(), StoreError>) -> Result<(), CloseReason> {
        let waiting = self.receipts.settled();
        if let Err(error) = result {
            let message = format!("a persistent message could not be stored ({error}); send it again");
            return Err(self.fail(StompError::limit(message), None));
        }
        if let Some(Some(receipt)) = waiting {
            self.write(&Frame::receipt(&receipt));
        }
        if self.disconnecting && self.receipts.is_empty() {
            return Err(CloseReason::ClientClosed);
        }
        Ok(())
    }

    /// Puts a store commit of this connection's publish in line: receipts after it wait.
    fn await_stored(&mut self, durable: Option<Durable>) {
        if let Some(commit) = durable {
            self.core.await_durable(commit);
            self.receipts.place(&self.core, true, None);
        }
    }

    /// The decoder rejected the client's bytes.
    pub fn handle_decode_error(&mut self, error: DecodeError) -> CloseReason {
        self.fail(StompError::from(error), None)
    }

    /// The core reports that the outbox overflowed with at-least-once messages.
    pub fn handle_slow_consumer(&mut self) -> CloseReason {
        self.fail(
            StompError::new(CloseReason::SlowConsumer, "slow consumer: too many messages waiting for this connection"),
            None,
        )
    }

    /// The broker is shutting down; ERROR is STOMP's only way to say goodbye.
    pub fn handle_shutdown(&mut self) -> CloseReason {
        self.fail(StompError::new(CloseReason::Shutdown, "the broker is shutting down"), None)
    }

    /// A timer set by [`StompSession::poll_timeout`] expired.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), CloseReason> {
        match &self.phase {
            Phase::AwaitingConnect { deadline } if now >= *deadline => {
                let message = format!("no CONNECT frame within {:?}", self.config.connect_timeout);
                Err(self.fail(StompError::new(CloseReason::KeepAliveTimeout, message), None))
            }
            Phase::Connected { liveness, .. } if liveness.is_dead(now) => {
                let message = format!(
                    "heart-beat timeout: nothing received for {:?}",
                    liveness.read_timeout().unwrap_or_default()
                );
                Err(self.fail(StompError::new(CloseReason::KeepAliveTimeout, message), None))
            }
            Phase::Connected { liveness, .. } => {
                if liveness.heart_beat_due(now) && self.out.is_empty() {
                    encode_heartbeat(&mut self.out);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Handles one frame from the client. `Err` means the connection must close after the
    /// output is flushed (ERROR written, or DISCONNECT answered).
    pub fn handle_frame(&mut self, frame: Frame, now: Now) -> Result<(), CloseReason> {
        let result = match self.phase {
            Phase::AwaitingConnect { .. } => match frame.command {
                Command::Connect | Command::Stomp => self.on_connect(&frame, now),
                other => Err(StompError::protocol(format!("expected CONNECT or STOMP, got {other}"))),
            },
            Phase::Connected { .. } => self.on_frame(&frame, now),
            Phase::Closed => return Err(CloseReason::ProtocolError),
        };
        // CONNECT has no receipt (CONNECTED is its answer).
        let receipt = match frame.command {
            Command::Connect | Command::Stomp => None,
            _ => frame.header("receipt"),
        };
        match result {
            Ok(flow) => {
                // Spec "RECEIPT": sent once the frame's effect is done, which for a persistent
                // message is when it is on disk (see `handle_durable`).
                let mut waits = false;
                if let Some(receipt) = receipt {
                    match self.receipts.place(&self.core, false, Some(receipt.to_owned())) {
                        Some(Some(now)) => {
                            self.write(&Frame::receipt(&now));
                        }
                        _ => waits = true,
                    }
                }
                if flow == Flow::Disconnect {
                    self.phase = Phase::Closed;
                    if waits {
                        self.disconnecting = true;
                        return Ok(());
                    }
                    return Err(CloseReason::ClientClosed);
                }
                Ok(())
            }
            Err(error) => Err(self.fail(error, receipt)),
        }
    }

    fn on_connect(&mut self, frame: &Frame, now: Now) -> Result<Flow, StompError> {
        let client =
            connect::Client { peer: self.peer, identity: self.identity.as_deref(), session_id: self.core.id().0 };
        let agreed = connect::handshake(frame, &self.config, &*self.auth, client)?;
        debug!(
            version = %agreed.version,
            host = frame.header("host").unwrap_or(""),
            login = frame.header("login").unwrap_or(""),
            "STOMP session opened"
        );
        self.encoder.set_version(agreed.version);
        self.client_id = Arc::from(agreed.client_id.as_str());
        self.core.restrict(agreed.rights);
        self.write(&agreed.connected);
        self.phase = Phase::Connected {
            version: agreed.version,
            liveness: Liveness::new(agreed.schedule, self.config.max_silence, now.instant),
        };
        Ok(Flow::Continue)
    }

    fn on_frame(&mut self, frame: &Frame, now: Now) -> Result<Flow, StompError> {
        match frame.command {
            Command::Send => self.on_send(frame, now),
            Command::Subscribe => self.on_subscribe(frame),
            Command::Unsubscribe => self.on_unsubscribe(frame),
            Command::Ack => self.on_settle(frame, Verdict::Ack, now),
            Command::Nack => self.on_settle(frame, Verdict::Nack, now),
            Command::Begin => {
                let id = frame
                    .headers
                    .get_text("transaction")
                    .ok_or_else(|| StompError::missing_header("BEGIN", "transaction"))?;
                self.transactions.begin(id.clone())?;
                Ok(Flow::Continue)
            }
            Command::Commit => {
                let deferred = self.transactions.commit(required(frame, "transaction")?)?;
                for action in deferred {
                    self.apply(action, now, true)?;
                }
                Ok(Flow::Continue)
            }
            Command::Abort => {
                self.transactions.abort(required(frame, "transaction")?)?;
                Ok(Flow::Continue)
            }
            Command::Disconnect => Ok(Flow::Disconnect),
            Command::Connect | Command::Stomp => Err(StompError::protocol("already connected: CONNECT sent twice")),
            other => Err(StompError::protocol(format!("{other} is a server frame; clients may not send it"))),
        }
    }

    fn origin(&self) -> Origin {
        Origin { protocol: self.core.protocol(), session: self.core.id(), client_id: self.client_id.clone() }
    }

    fn defer_or_apply(&mut self, frame: &Frame, action: Deferred, bytes: usize, now: Now) -> Result<Flow, StompError> {
        match frame.header("transaction") {
            Some(transaction) => self.transactions.defer(transaction, action, bytes)?,
            None => self.apply(action, now, false)?,
        }
        Ok(Flow::Continue)
    }

    fn on_send(&mut self, frame: &Frame, now: Now) -> Result<Flow, StompError> {
        let target = match destination::for_send(required(frame, "destination")?)? {
            Destination::Topic(topic) => SendTarget::Topic(topic),
            Destination::Queue(queue) => SendTarget::Queue(queue),
        };
        let message = translate::message_from_send(frame, target, self.origin(), now.instant, now.wall)?;
        let action = Deferred::Send { message: Box::new(message), to_queue: matches!(target, SendTarget::Queue(_)) };
        self.defer_or_apply(frame, action, frame.body.len(), now)
    }

    fn on_settle(&mut self, frame: &Frame, verdict: Verdict, now: Now) -> Result<Flow, StompError> {
        // 1.2 names the message by the MESSAGE's `ack` header, sent back as `id`; 1.0 and 1.1
        // by `message-id`. Either is accepted from any version: they carry the same number.
        let names = if self.version() == Some(Version::V1_2) { ["id", "message-id"] } else { ["message-id", "id"] };
        let text = frame
            .header(names[0])
            .or_else(|| frame.header(names[1]))
            .ok_or_else(|| StompError::missing_header(frame.command.as_str(), names[0]))?;
        let id = self.unacked.parse_issued(text)?;
        let verdict = match (verdict, frame.header("requeue")) {
            (Verdict::Nack, Some(requeue)) if requeue.eq_ignore_ascii_case("false") => Verdict::Discard,
            _ => verdict,
        };
        self.defer_or_apply(frame, Deferred::Settle { id, verdict }, 0, now)
    }

    fn apply(&mut self, action: Deferred, now: Now, committed: bool) -> Result<(), StompError> {
        match action {
            Deferred::Send { mut message, to_queue } => {
                if committed {
                    // The broker accepts a transactional message at COMMIT, so latency starts there.
                    message.received_at = now.instant;
                }
                self.publish(*message, to_queue, now.instant)
            }
            Deferred::Settle { id, verdict } => {
                if let Some(tag) = self.unacked.tag_of(id) {
                    let cumulative = self.subscriptions.get(tag).is_some_and(|s| s.ack == AckMode::Client);
                    self.unacked.settle(id, cumulative, verdict);
                }
                Ok(())
            }
        }
    }

    fn publish(&mut self, message: Message, to_queue: bool, now: Instant) -> Result<(), StompError> {
        let metrics = self.core.router().metrics().clone();
        let counters = metrics.protocol(self.core.protocol());
        if message.is_expired(now) {
            counters.dropped(DropReason::Expired, 1);
            return Ok(());
        }
        let at_least_once = message.qos >= QoS::AtLeastOnce;
        let message = Arc::new(message);
        if !to_queue {
            counters.messages_in.fetch_add(1, Relaxed);
            let mut durable = None;
            let outcome = self.core.publish_into(message.clone(), &mut durable);
            self.await_stored(durable);
            if outcome.not_authorized {
                let topic = &message.topic;
                return Err(StompError::not_authorized(format!("not authorized to send to /topic/{topic}")));
            }
            if outcome.refused > 0 && at_least_once {
                // STOMP has no negative receipt: an ERROR instead of the RECEIPT tells the
                // publisher that this message was not kept for everyone.
                return Err(StompError::limit(if outcome.memory_full {
                    "the broker's memory budget is used up; message refused".to_owned()
                } else {
                    format!("{} subscriber queue(s) full; message refused", outcome.refused)
                }));
            }
            return Ok(());
        }
        self.authorize_queue(&message.topic, Right::Write)?;
        // A queue deleted (by another protocol) between lookup and push is declared afresh once.
        for _ in 0..2 {
            let queue = self.queue(&message.topic)?;
            let mut durable = None;
            match queue.push(message.clone(), &mut durable) {
                QueuePush::Accepted => {
                    counters.messages_in.fetch_add(1, Relaxed);
                    self.await_stored(durable);
                    return Ok(());
                }
                QueuePush::Congested => {
                    counters.messages_in.fetch_add(1, Relaxed);
                    self.await_stored(durable);
                    self.core.congested_by(&queue);
                    return Ok(());
                }
                QueuePush::Full => {
                    // Counted by the queue. STOMP has no negative receipt; refusing the message is an ERROR.
                    return Err(StompError::limit(format!(
                        "queue '{}' is full ({} messages waiting); message refused",
                        queue.name(),
                        queue.ready_len()
                    )));
                }
                QueuePush::Deleted => continue,
            }
        }
        Err(StompError::protocol(format!("queue '{}' was deleted while sending", message.topic)))
    }

    /// The access list's verdict on `right` to `/queue/<name>`. STOMP creates queues on first
    /// use, so the right to send or to subscribe is enough to create one.
    fn authorize_queue(&self, name: &str, right: Right) -> Result<(), StompError> {
        let verb = if right == Right::Write { "send to" } else { "subscribe to" };
        self.core
            .check_queue(name, right)
            .map_err(|_| StompError::not_authorized(format!("not authorized to {verb} /queue/{name}")))
    }

    /// The core queue behind `/queue/<name>`, declared with default options on first use. An
    /// existing queue (say, declared by an AMQP client) is used as it is.
    fn queue(&self, name: &str) -> Result<Arc<Queue>, StompError> {
        let router = self.core.router();
        if let Some(queue) = router.queue(name) {
            return Ok(queue);
        }
        // max_length 0 = the router's configured `queue_max_length`. Durable, as RabbitMQ's
        // STOMP queues are: `persistent:true` messages in it survive a restart.
        let options = QueueOptions { max_length: 0, durable: true, ..QueueOptions::default() };
        router
            .declare_queue(name, options)
            .map(|(queue, _)| queue)
            .map_err(|e| StompError::protocol(format!("cannot use queue '{name}': {e}")))
    }

    fn prefetch(&self, frame: &Frame) -> Result<usize, StompError> {
        let max = self.config.max_unacked_messages.max(1);
        match frame.header("prefetch-count") {
            None => Ok(self.config.queue_prefetch.clamp(1, max)),
            Some(text) => match text.trim().parse::<usize>() {
                Ok(n) if n >= 1 => Ok(n.min(max)),
                _ => Err(StompError::protocol(format!(
                    "invalid prefetch-count '{}': expected a number of at least 1",
                    text.chars().take(32).collect::<String>()
                ))),
            },
        }
    }

    fn on_subscribe(&mut self, frame: &Frame) -> Result<Flow, StompError> {
        let destination = required(frame, "destination")?;
        // STOMP 1.0 made `id` optional; such a subscription is known by its destination.
        let id: Utf8Bytes = match (frame.headers.get_text("id"), self.version()) {
            (Some(id), _) => id.clone(),
            (None, Some(Version::V1_0)) => destination.into(),
            (None, _) => return Err(StompError::missing_header("SUBSCRIBE", "id")),
        };
        let ack = AckMode::parse(frame.header("ack"))?;
        subscription::check_supported(frame)?;
        let parsed = destination::for_subscribe(destination)?;
        let tag = self.subscriptions.reserve(&id)?;
        let source = match parsed {
            Destination::Topic(filter) => {
                // Explicit-ack subscribers are not silently dropped from: when their outbox is
                // full, the core closes them as slow consumers instead.
                let max_qos = if ack.is_explicit() { QoS::AtLeastOnce } else { QoS::AtMostOnce };
                let options = SubscriptionOptions { max_qos, ..SubscriptionOptions::default() };
                self.core.subscribe(filter, tag, options).map_err(|e| match e {
                    SubscribeError::NotAuthorized(_) => {
                        StompError::not_authorized(format!("not authorized to subscribe to {destination}"))
                    }
                    SubscribeError::Topic(e) => StompError::protocol(format!("invalid topic filter '{filter}': {e}")),
                })?;
                Source::Topic(filter.to_owned())
            }
            Destination::Queue(name) => {
                self.authorize_queue(name, Right::Read)?;
                let queue = self.queue(name)?;
                // Auto-ack consumers get the core's default credit (settled as soon as written).
                let credit = if ack.is_explicit() { self.prefetch(frame)? } else { 0 };
                self.core
                    .consume(&queue, credit, QoS::AtLeastOnce, tag)
                    .map_err(|e| StompError::protocol(format!("cannot subscribe to '{destination}': {e}")))?;
                Source::Queue(queue)
            }
        };
        self.subscriptions.insert(tag, Subscription { id, ack, source });
        Ok(Flow::Continue)
    }

    fn on_unsubscribe(&mut self, frame: &Frame) -> Result<Flow, StompError> {
        let id = match (frame.header("id"), self.version()) {
            (Some(id), _) => id,
            (None, Some(Version::V1_0)) => required(frame, "destination")?,
            (None, _) => return Err(StompError::missing_header("UNSUBSCRIBE", "id")),
        };
        let (tag, subscription) = self.subscriptions.remove(id).ok_or_else(|| {
            StompError::protocol(format!("no subscription with id '{}'", id.chars().take(64).collect::<String>()))
        })?;
        match subscription.source {
            Source::Topic(filter) => {
                self.core.unsubscribe(&filter, tag);
            }
            Source::Queue(_) => {
                // Puts this consumer's unacknowledged messages back in the queue.
                self.core.cancel(tag);
            }
        }
        self.unacked.forget_subscription(tag);
        Ok(Flow::Continue)
    }

    /// Writes one delivery from the outbox as a MESSAGE. Returns it for metrics and settling
    /// once written, or `None` when it was not sent (subscription gone, expired, or not
    /// representable in this connection's STOMP version).
    pub fn handle_delivery(&mut self, delivery: Delivery, now: Now) -> Option<Written> {
        let Phase::Connected { version, .. } = self.phase else {
            // Closing: anything left goes back (queue) or is lost with the connection (topic).
            return None;
        };
        // Gone since the delivery was queued: a queue message was already put back when the
        // consumer was cancelled, a topic message is simply not wanted any more.
        let subscription = self.subscriptions.get(delivery.tag)?;
        let message = &delivery.message;
        let counters = self.core.router().metrics().protocol(self.core.protocol());
        if message.is_expired(now.instant) {
            counters.dropped(DropReason::Expired, 1);
            if let Some(ack) = &delivery.ack {
                ack.ack();
            }
            return None;
        }
        let destination = match &subscription.source {
            Source::Topic(_) => translate::topic_destination(&message.topic),
            Source::Queue(queue) => translate::queue_destination(queue.name()),
        };
        let explicit = subscription.ack.is_explicit();
        let message_id = self.unacked.next_id();
        let envelope = Envelope {
            destination: &destination,
            message_id,
            subscription: &subscription.id,
            ack: explicit && version == Version::V1_2,
            redelivered: delivery.redelivered,
            version,
        };
        let frame = translate::message_frame(message, &envelope, now.instant, now.wall);
        if let Err(e) = self.encoder.encode(&frame, &mut self.out) {
            // E.g. a topic with a line break cannot be a STOMP 1.0 destination header.
            debug!(topic = %message.topic, error = %e, "message not representable in this STOMP version; dropped");
            counters.dropped(DropReason::Untranslatable, 1);
            if let Some(ack) = &delivery.ack {
                ack.ack();
            }
            return None;
        }
        let settle = if explicit {
            self.unacked.track(message_id, delivery.tag, delivery.ack.clone());
            None
        } else {
            delivery.ack.clone()
        };
        Some(Written { delivery, settle, taken_at: now.instant })
    }
}

#[cfg(test)]
mod tests {
    //! The state machine driven without sockets or real waiting: time is an argument.
    use std::time::Duration;

    use stomp_codec::{Decoded, Decoder};
    use tolk_core::{Metrics, Router, RouterConfig};

    use super::*;
    use tolk_core::auth::AllowAll;

    fn session(config: StompConfig, t0: Instant) -> StompSession {
        let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
        let core = router.open_session(tolk_core::Protocol::Stomp);
        StompSession::new(Arc::new(config), Arc::new(AllowAll), "127.0.0.1:9".parse().unwrap(), core, t0)
    }

    /// What the session wrote, taken as written at `now`.
    fn frames(session: &mut StompSession, now: Instant) -> Vec<Decoded> {
        let mut out = BytesMut::from(session.output());
        session.advance_output(out.len(), now);
        let mut decoder = Decoder::default();
        std::iter::from_fn(|| decoder.decode(&mut out).unwrap()).collect()
    }

    fn at(t: Instant) -> Now {
        Now { instant: t, wall: SystemTime::now() }
    }

    #[test]
    fn heart_beats_are_sent_and_silence_is_fatal_on_the_clock_passed_in() {
        let t0 = Instant::now();
        let config = StompConfig {
            heart_beat_send: Duration::from_millis(100),
            heart_beat_receive: Duration::from_millis(1000),
            ..StompConfig::default()
        };
        let mut s = session(config, t0);
        let connect =
            Frame::new(Command::Connect).with_header("accept-version", "1.2").with_header("heart-beat", "500,50");
        assert_eq!(s.handle_frame(connect, at(t0)), Ok(()));
        assert!(matches!(frames(&mut s, t0).as_slice(), [Decoded::Frame(f)] if f.command == Command::Connected));

        // Broker → client every max(sx 100, cy 50) = 100 ms; client → broker max(cx 500, sy 1000).
        assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_millis(100)));
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(s.handle_timeout(t1), Ok(()));
        assert_eq!(frames(&mut s, t1), vec![Decoded::HeartBeat]);
        s.note_read(t0 + Duration::from_millis(900));

        let dead = t0 + Duration::from_millis(900 + 2000);
        assert_eq!(s.handle_timeout(dead - Duration::from_millis(1)), Ok(()));
        let _ = frames(&mut s, dead);
        assert_eq!(s.handle_timeout(dead), Err(CloseReason::KeepAliveTimeout));
        assert!(matches!(frames(&mut s, dead).as_slice(), [Decoded::Frame(f)] if f.command == Command::Error));
        assert_eq!(s.poll_timeout(), None);
    }

    #[test]
    fn connect_deadline_and_frames_after_disconnect() {
        let t0 = Instant::now();
        let mut s = session(StompConfig { connect_timeout: Duration::from_secs(3), ..StompConfig::default() }, t0);
        assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(3)));
        assert!(!s.accepts_deliveries());
        assert_eq!(s.handle_timeout(t0 + Duration::from_secs(3)), Err(CloseReason::KeepAliveTimeout));

        let mut s = session(StompConfig::default(), t0);
        assert_eq!(s.handle_frame(Frame::new(Command::Stomp).with_header("accept-version", "1.2"), at(t0)), Ok(()));
        assert!(s.accepts_deliveries());
        let bye = Frame::new(Command::Disconnect).with_header("receipt", "77");
        assert_eq!(s.handle_frame(bye, at(t0)), Err(CloseReason::ClientClosed));
        let out = frames(&mut s, t0);
        assert!(matches!(out.last(), Some(Decoded::Frame(f)) if f.header("receipt-id") == Some("77")));
        assert!(!s.accepts_deliveries());
    }
}
