//! One client's MQTT-SN 1.2 session as a sans-IO state machine: no socket, no clock, no task.
//!
//! The endpoint feeds it decoded messages ([`ClientSession::handle`], [`ClientSession::handle_connect`]),
//! core deliveries ([`ClientSession::handle_deliveries`]) and timer expiries
//! ([`ClientSession::handle_timeout`]), always with the current time. It answers through three
//! queues the endpoint drains after every call, in this order: [`ClientSession::poll_transmit`]
//! (messages for the client's address), [`ClientSession::poll_event`] (what the endpoint must do:
//! start or stop watching the core outbox, take the next batch from it, forget the session), and
//! [`ClientSession::poll_timeout`] (when to call `handle_timeout` next).
//!
//! Phases follow the client state diagram of §6.14 (Figure 4), with the will handshake of §6.3
//! in front: `WillTopic → WillMsg → Active ⇄ Asleep ⇄ Awake`, and `Offline` for a session kept
//! after a disconnect or loss (clean session off).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use foldhash::fast::RandomState;
use mqttsn_codec::{
    Connect, Message as SnMessage, PubAck, Publish, PublishTopic, QoS, RegAck, Register, ReturnCode, SubAck, Subscribe,
    SubscribeTopic, Unsubscribe, WillTopic, encoded_len,
};
use tolk_core::access::SubscribeError;
use tolk_core::drive::Egress;
use tolk_core::store::{Durable, KeptSession, StoreError};
use tolk_core::{
    CloseReason, Delivery, DropReason, Metrics, Protocol, PublishOutcome, QoS as CoreQoS, Session, SubscriptionOptions,
    topic,
};
use tracing::{debug, info};

use crate::gateway::{Gateway, Limits, MAX_INBOUND_QOS2};
use crate::kept;
use crate::known_ids::KnownIds;
use crate::outgoing::{Inflight, MAX_REGISTRATIONS, Outgoing, Pending, Registration, Retry, Step};
use crate::predefined::PredefinedTopics;
use crate::registry::RegistryFull;
use crate::stats::GatewayStats;
use crate::stored_acks::StoredAcks;
use crate::translate::{
    OutboundTopic, SubscriptionForm, core_message, core_qos, inbound_topic, outbound_topic, short_filter, sn_qos,
    topic_id_field,
};

/// Where the client is in its life cycle (§6.14 Figure 4, plus the will handshake of §6.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Phase {
    /// CONNECT with the Will flag: WILLTOPICREQ sent, waiting for WILLTOPIC.
    WillTopic {
        /// Give up on the handshake at this time (`handshake_timeout` after the CONNECT).
        deadline: Instant,
    },
    /// WILLMSGREQ sent, waiting for WILLMSG.
    WillMsg {
        /// The will topic just received.
        topic: WillTopic,
        /// Give up on the handshake at this time (the same as in `WillTopic`).
        deadline: Instant,
    },
    /// Connected; supervised by the keep-alive timer (and, until the client's first message, by
    /// `first_message_timeout`).
    Active,
    /// DISCONNECT with a duration: messages are buffered; lost if silent for the duration.
    Asleep {
        /// The sleep duration in seconds.
        duration: u16,
    },
    /// PINGREQ with the client id: buffered messages are being sent; PINGRESP ends it.
    Awake {
        /// The sleep duration in seconds, to go back to sleep with.
        duration: u16,
        /// Buffered messages still to send before the PINGRESP.
        remaining: usize,
    },
    /// Disconnected or lost with clean session off: subscriptions stay, at-least-once messages
    /// wait in the core outbox, until a CONNECT or the session expiry.
    Offline {
        /// When it went offline.
        since: Instant,
    },
    /// Over; the endpoint forgets it.
    Closed,
}

/// What the endpoint must do for this session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The client is connected (CONNACK sent): watch the core outbox and count the connection.
    Connected,
    /// The session has room: take the next batch from the core outbox.
    WantDeliveries,
    /// The connection ended: stop watching the outbox, release the address, count `reason`. With
    /// `keep` the session stays (offline) for a later CONNECT; without, forget it.
    Ended {
        /// Why.
        reason: CloseReason,
        /// Whether the session is kept offline.
        keep: bool,
    },
    /// An offline session expired: forget it (its end was already counted).
    Expired,
}

/// The keep-alive granted at CONNECT (§6.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KeepAlive {
    period: Duration,
    /// The client asked for 0 ("no supervision") or for more than `max_keep_alive`, and got
    /// `max_keep_alive` instead.
    capped: bool,
}

impl KeepAlive {
    fn grant(asked_secs: u16, max: Duration) -> Self {
        let asked = Duration::from_secs(u64::from(asked_secs));
        if asked.is_zero() || asked > max {
            KeepAlive { period: max, capped: true }
        } else {
            KeepAlive { period: asked, capped: false }
        }
    }
}

/// One client's session.
pub(crate) struct ClientSession {
    client_id: Arc<str>,
    core: Arc<Session>,
    predefined: Arc<PredefinedTopics>,
    limits: Arc<Limits>,
    phase: Phase,
    clean: bool,
    keep_alive: KeepAlive,
    last_heard: Instant,
    /// A message came after the last CONNECT. Until then the session is unused, and
    /// `first_message_timeout` bounds its silence.
    heard_since_connect: bool,
    /// The client's address has proved to be the client's: the last CONNECT came from the
    /// address the session was already at, or the client spoke again after it. Until then,
    /// anyone could have sent that CONNECT with a forged source address, so only the answer to
    /// it (CONNACK or WILLTOPICREQ, smaller than a CONNECT) is sent there: no deliveries, no
    /// retransmissions, which would reflect many times the CONNECT's size to a third party.
    address_proved: bool,
    will_topic: Option<WillTopic>,
    will_message: Bytes,
    /// Registered ids this client knows: it registered them, got them in a SUBACK or REGACKed
    /// our REGISTER.
    known_ids: KnownIds,
    /// (filter, tag) of each subscription, to enforce the per-client limit.
    /// `(filter, tag)` → the QoS granted.
    subscriptions: HashMap<(String, u64), CoreQoS, RandomState>,
    /// Incoming QoS 2 MsgIds routed but not yet released by PUBREL (duplicate suppression).
    inbound_qos2: HashSet<u16, RandomState>,
    out: Outgoing,
    /// The endpoint watches the core outbox (between `Connected` and `Ended`).
    online: bool,
    /// A `WantDeliveries` is outstanding.
    requested: bool,
    /// The core outbox is detached (offline, or asleep with a full buffer).
    detached: bool,
    transmit: VecDeque<SnMessage>,
    /// PUBACKs and PUBRECs waiting for the store.
    stored_acks: StoredAcks,
    /// Deliveries in `transmit`, counted once their datagram is sent.
    egress: Egress,
    events: VecDeque<Event>,
}

impl ClientSession {
    /// A session for `client_id` about to handle its first CONNECT.
    pub(crate) fn new(
        client_id: Arc<str>,
        core: Arc<Session>,
        predefined: Arc<PredefinedTopics>,
        limits: Arc<Limits>,
        now: Instant,
    ) -> Self {
        let max_keep_alive = limits.max_keep_alive;
        ClientSession {
            client_id,
            core,
            predefined,
            limits,
            phase: Phase::Offline { since: now },
            clean: true,
            keep_alive: KeepAlive::grant(0, max_keep_alive),
            last_heard: now,
            heard_since_connect: false,
            address_proved: false,
            will_topic: None,
            will_message: Bytes::new(),
            known_ids: KnownIds::default(),
            subscriptions: HashMap::default(),
            inbound_qos2: HashSet::default(),
            out: Outgoing::default(),
            online: false,
            requested: false,
            detached: false,
            transmit: VecDeque::new(),
            stored_acks: StoredAcks::default(),
            egress: Egress::new(Protocol::MqttSn),
            events: VecDeque::new(),
        }
    }

    /// A persistent session the store kept, offline until its client connects (or
    /// `expires_in` passes): subscribed again, its deliveries queued in the core outbox.
    pub(crate) fn restored(
        kept: KeptSession,
        core: Arc<Session>,
        predefined: Arc<PredefinedTopics>,
        limits: Arc<Limits>,
        now: Instant,
    ) -> Self {
        let mut session = ClientSession::new(Arc::from(kept.client_id.as_str()), core, predefined, limits, now);
        session.clean = false;
        // Offline since so long that `expires_in` is what is left.
        let lived = session.limits.session_expiry.saturating_sub(kept.expires_in);
        session.phase = Phase::Offline { since: now.checked_sub(lived).unwrap_or(now) };
        session.core.keep_in_store(kept.name(Protocol::MqttSn), kept.next_seq);
        for sub in kept.record.subscriptions {
            let (filter, tag) = (sub.filter, sub.tag);
            let Some(max_qos) = CoreQoS::from_level(sub.max_qos) else { continue };
            let options = SubscriptionOptions { max_qos, ..SubscriptionOptions::default() };
            match session.core.subscribe(&filter, tag, options) {
                Ok(_) => {
                    session.subscriptions.insert((filter, tag), max_qos);
                }
                Err(e) => {
                    info!(client_id = %session.client_id, %filter, error = %e, "a stored subscription was not restored")
                }
            }
        }
        session.set_detached(true);
        session.core.receiver().requeue_front(kept.deliveries.into_iter());
        // Its client was connected when the broker went: the connection ended without a
        // DISCONNECT, so the will goes now, and the record is written again without it.
        let will = kept.record.will.filter(|_| kept.record.expires_at_ms.is_none());
        if let Some((topic, payload)) = will.and_then(|bytes| kept::decode_will(&session.client_id, &bytes)) {
            session.will_topic = Some(topic);
            session.will_message = payload;
            session.publish_will(now);
        }
        drop(session.save());
        session
    }

    /// Writes this session's record if it is persistent (clean session off), with its will
    /// while its client is connected. Returns the commit.
    fn save(&self) -> Option<Durable> {
        if self.clean {
            return None;
        }
        let offline = matches!(self.phase, Phase::Offline { .. });
        let offline_for = offline.then_some(self.limits.session_expiry);
        let will = self.will_topic.as_ref().filter(|_| !offline).map(|t| kept::encode_will(t, &self.will_message));
        kept::save(&self.core, &self.client_id, &self.subscriptions, self.limits.session_expiry, offline_for, will)
    }

    /// The session ends for good (expired, replaced by a clean session, evicted): what the
    /// store kept of it goes.
    pub(crate) fn forget_kept(&self) {
        if let Some(keeper) = self.core.keeper() {
            keeper.end();
        }
    }

    // ---- getters ----

    /// The client id.
    pub(crate) fn client_id(&self) -> &Arc<str> {
        &self.client_id
    }

    /// The core session.
    pub(crate) fn core(&self) -> &Arc<Session> {
        &self.core
    }

    /// The current phase.
    #[cfg(test)]
    pub(crate) fn phase(&self) -> &Phase {
        &self.phase
    }

    /// Asleep or awake (§6.14): a CONNECT only wakes such a client, whatever its flags.
    pub(crate) fn is_sleeping(&self) -> bool {
        matches!(self.phase, Phase::Asleep { .. } | Phase::Awake { .. })
    }

    /// When it went offline, for evicting the oldest offline session.
    pub(crate) fn offline_since(&self) -> Option<Instant> {
        match self.phase {
            Phase::Offline { since } => Some(since),
            _ => None,
        }
    }

    // ---- input ----

    /// A CONNECT from this client: a new connection, a reconnection to a kept session, or a
    /// sleeping client going back to active (§6.14; then only the Will flag is honoured).
    /// `from_its_address`: the session was already at the address the CONNECT came from.
    pub(crate) fn handle_connect(&mut self, connect: &Connect, from_its_address: bool, now: Instant, gw: &mut Gateway) {
        let waking = self.is_sleeping();
        self.last_heard = now;
        self.heard_since_connect = false;
        self.address_proved = from_its_address;
        self.keep_alive = KeepAlive::grant(connect.duration, self.limits.max_keep_alive);
        if !waking {
            self.clean = connect.clean_session;
            // Answers still waiting for the store were for the connection before.
            self.stored_acks.clear();
        }
        if connect.will {
            let deadline = now + self.limits.handshake_timeout;
            self.phase = Phase::WillTopic { deadline };
            self.transmit.push_back(SnMessage::WillTopicReq);
        } else {
            self.finish_connect(now, gw);
        }
    }

    /// Any other message from this client (from the session's address: the endpoint routes by
    /// it).
    pub(crate) fn handle(&mut self, message: SnMessage, now: Instant, gw: &mut Gateway) {
        self.last_heard = now;
        self.heard_since_connect = true;
        if !self.address_proved {
            self.address_proved = true;
            if self.phase == Phase::Active {
                // What waited for the address to prove itself goes out, ahead of the answer.
                self.resume_inflight(now);
                self.pump(now, gw);
            }
        }
        match self.phase {
            Phase::WillTopic { .. } => return self.on_will_topic(message, now, gw),
            Phase::WillMsg { .. } => return self.on_will_msg(message, now, gw),
            Phase::Offline { .. } | Phase::Closed => return,
            Phase::Active | Phase::Asleep { .. } | Phase::Awake { .. } => {}
        }
        match message {
            SnMessage::Publish(publish) => self.on_publish(publish, now, gw),
            SnMessage::PubRel { msg_id } => {
                self.inbound_qos2.remove(&msg_id);
                self.transmit.push_back(SnMessage::PubComp { msg_id });
            }
            SnMessage::Register(register) => self.on_register(register, gw),
            SnMessage::RegAck(regack) => self.on_regack(regack, now, gw),
            SnMessage::PubAck(puback) => self.on_puback(puback, now, gw),
            SnMessage::PubRec { msg_id } => self.on_pubrec(msg_id, now),
            SnMessage::PubComp { msg_id } => self.on_pubcomp(msg_id, now, gw),
            SnMessage::Subscribe(subscribe) => self.on_subscribe(subscribe, now, gw),
            SnMessage::Unsubscribe(unsubscribe) => self.on_unsubscribe(unsubscribe),
            SnMessage::PingReq { client_id } => self.on_pingreq(client_id.is_some(), now, gw),
            SnMessage::Disconnect { duration } => self.on_disconnect(duration, now),
            SnMessage::WillTopicUpd(topic) => self.on_will_topic_update(topic, gw),
            SnMessage::WillMsgUpd { will_msg } => {
                self.will_message = will_msg;
                drop(self.save());
                self.transmit.push_back(SnMessage::WillMsgResp { return_code: ReturnCode::Accepted });
            }
            other => {
                gw.count_bad_input(|stats| &stats.unsupported);
                debug!(client_id = %self.client_id, msg_type = ?other.msg_type(), "ignored: not expected from a client here");
            }
        }
    }

    /// Deliveries the endpoint took from the core outbox; `batch` is left empty.
    pub(crate) fn handle_deliveries(&mut self, batch: &mut Vec<Delivery>, now: Instant, gw: &mut Gateway) {
        self.requested = false;
        match self.phase {
            Phase::Offline { .. } => {
                // Taken just before the session went offline: back to the outbox, where an
                // offline session keeps only at-least-once messages.
                self.core.receiver().requeue_front(batch.drain(..).filter(|d| d.qos != CoreQoS::AtMostOnce));
                return;
            }
            Phase::Closed => return batch.clear(),
            _ => {}
        }
        let bounded = self.is_sleeping();
        for delivery in batch.drain(..) {
            if bounded && self.out.pending.len() >= self.limits.max_buffered_sleeping {
                gw.count_drop(DropReason::QueueFull);
                settle(&self.core, &delivery);
                continue;
            }
            self.out.pending.push_back(Pending { delivery, taken_at: now });
        }
        self.pump(now, gw);
    }

    /// The core outbox overflowed with at-least-once messages: the client cannot keep up.
    pub(crate) fn handle_overflow(&mut self, now: Instant) {
        info!(client_id = %self.client_id, "outbox overflowed: disconnecting slow client");
        self.close(CloseReason::SlowConsumer, true, now);
    }

    /// The time returned by [`Self::poll_timeout`] has come (or passed).
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        match self.phase {
            Phase::WillTopic { deadline } | Phase::WillMsg { deadline, .. } if now >= deadline => {
                // Debug: a flood of half-open handshakes must not flood the log.
                debug!(client_id = %self.client_id, "will handshake not completed within handshake_timeout");
                return self.end(CloseReason::IdleTimeout, false, now);
            }
            Phase::Offline { .. } if self.phase_deadline().is_some_and(|t| now >= t) => {
                debug!(client_id = %self.client_id, "offline session expired");
                self.forget_kept();
                self.phase = Phase::Closed;
                self.events.push_back(Event::Expired);
                return;
            }
            Phase::Active | Phase::Asleep { .. } | Phase::Awake { .. }
                if self.phase_deadline().is_some_and(|t| now >= t) =>
            {
                // §6.14: silent for longer than the keep-alive (or sleep) duration: lost.
                let reason = match self.phase {
                    Phase::Active => self.allowed_silence().1,
                    _ => CloseReason::KeepAliveTimeout,
                };
                if self.heard_since_connect {
                    info!(client_id = %self.client_id, phase = ?self.phase, %reason, "no message within the keep-alive window: client lost");
                } else {
                    // Debug: a flood of CONNECTs that never say more must not flood the log.
                    debug!(client_id = %self.client_id, %reason, "no message since CONNECT: client lost");
                }
                return self.end(reason, true, now);
            }
            _ => {}
        }
        if !self.inflight_timer_runs() {
            return;
        }
        let (timeout, retries) = (self.limits.retransmit_timeout, self.limits.retransmit_retries);
        for registration in self.out.registrations.iter_mut().filter(|r| r.retry.is_due(now)) {
            if !registration.retry.fire(now, timeout) {
                info!(client_id = %self.client_id, retries, "no REGACK after the last retransmission: client lost");
                return self.end(CloseReason::KeepAliveTimeout, true, now);
            }
            self.transmit.push_back(SnMessage::Register(registration.register.clone()));
        }
        let Some(inflight) = self.out.inflight.as_mut().filter(|i| i.retry.is_due(now)) else { return };
        if !inflight.retry.fire(now, timeout) {
            info!(client_id = %self.client_id, retries, "no answer after the last retransmission: client lost");
            return self.end(CloseReason::KeepAliveTimeout, true, now);
        }
        self.transmit.push_back(inflight.retransmission());
    }

    /// A fresh retransmission timer for a message sent at `now`.
    fn retry(&self, now: Instant) -> Retry {
        Retry::new(now, self.limits.retransmit_timeout, self.limits.retransmit_retries)
    }

    /// The gateway ends the connection (shutdown, slow consumer, session taken over): with
    /// `goodbye` a DISCONNECT tells the client to connect again (§5.4.21).
    pub(crate) fn close(&mut self, reason: CloseReason, goodbye: bool, now: Instant) {
        if matches!(self.phase, Phase::Offline { .. } | Phase::Closed) {
            return;
        }
        if goodbye {
            self.transmit.push_back(SnMessage::Disconnect { duration: None });
        }
        let fire_will = reason == CloseReason::SlowConsumer;
        self.end(reason, fire_will, now);
    }

    /// The client is gone without a DISCONNECT (another client took its address): its will fires.
    pub(crate) fn lost(&mut self, now: Instant) {
        if !matches!(self.phase, Phase::Offline { .. } | Phase::Closed) {
            info!(client_id = %self.client_id, "another client connected from this address: client lost");
            self.end(CloseReason::ClientClosed, true, now);
        }
    }

    // ---- output ----

    /// The next message for the client; tell [`ClientSession::transmitted`] what became of it.
    /// The queue's buffer is given back once it is drained: the endpoint drains it after every
    /// call, and a buffer kept by each of 10,000 clients for its CONNACK was 224 bytes apiece.
    pub(crate) fn poll_transmit(&mut self) -> Option<SnMessage> {
        let message = self.transmit.pop_front();
        if message.is_none() && self.transmit.capacity() > 0 {
            self.transmit = VecDeque::new();
        }
        message
    }

    /// The next message from [`ClientSession::poll_transmit`] was sent at `now` (`sent`), or
    /// could not be: a delivery it carries is counted, its latency recorded and a QoS 0 queue
    /// delivery settled only once its datagram is out.
    pub(crate) fn transmitted(&mut self, sent: bool, now: Instant, metrics: &Metrics) {
        if sent {
            self.egress.written(1, now, metrics);
        } else {
            self.egress.abandoned(1);
        }
    }

    /// The next thing the endpoint must do.
    pub(crate) fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Self::handle_timeout`] must be called next.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let inflight = self.out.next_deadline().filter(|_| self.inflight_timer_runs());
        match (self.phase_deadline(), inflight) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    // ---- internals ----

    fn phase_deadline(&self) -> Option<Instant> {
        match &self.phase {
            Phase::WillTopic { deadline } | Phase::WillMsg { deadline, .. } => Some(*deadline),
            Phase::Active => self.last_heard.checked_add(self.allowed_silence().0),
            Phase::Asleep { duration } | Phase::Awake { duration, .. } => {
                self.last_heard.checked_add(Duration::from_secs(u64::from(*duration)).mul_f32(1.5))
            }
            Phase::Offline { since } => since.checked_add(self.limits.session_expiry),
            Phase::Closed => None,
        }
    }

    /// How long an active client may stay silent, and what losing it for that is counted as.
    /// §6.14 and MQTT's rule: lost after 1.5 × the keep-alive without a message. Until its first
    /// message after CONNECT, `first_message_timeout` if that is shorter.
    fn allowed_silence(&self) -> (Duration, CloseReason) {
        let keep_alive = self.keep_alive.period.mul_f32(1.5);
        if !self.heard_since_connect && self.limits.first_message_timeout < keep_alive {
            return (self.limits.first_message_timeout, CloseReason::IdleTimeout);
        }
        let reason = if self.keep_alive.capped { CloseReason::IdleTimeout } else { CloseReason::KeepAliveTimeout };
        (keep_alive, reason)
    }

    /// Retransmission runs only while the client is listening at a proved address; asleep it is
    /// paused and the exchange is resumed on wake-up.
    fn inflight_timer_runs(&self) -> bool {
        self.address_proved && matches!(self.phase, Phase::Active | Phase::Awake { .. })
    }

    fn finish_connect(&mut self, now: Instant, gw: &mut Gateway) {
        self.phase = Phase::Active;
        // A persistent session is kept (with its will) before the CONNACK leaves: a crash after
        // it finds the session. Refused as congestion, to be tried again, if the store fails.
        let accepted = SnMessage::ConnAck { return_code: ReturnCode::Accepted };
        let refused = SnMessage::ConnAck { return_code: ReturnCode::Congestion };
        if let Some(connack) = self.stored_acks.answer(accepted, self.save(), refused) {
            self.transmit.push_back(connack);
        }
        self.set_detached(false);
        if !self.online {
            self.online = true;
            self.requested = false;
            self.events.push_back(Event::Connected);
        }
        if self.address_proved {
            self.resume_inflight(now);
        }
        self.pump(now, gw);
    }

    /// Sends the in-flight exchange again after a sleep or a reconnection (as a duplicate).
    fn resume_inflight(&mut self, now: Instant) {
        let retry = self.retry(now);
        if let Some(inflight) = &mut self.out.inflight {
            inflight.retry = retry;
            self.transmit.push_back(inflight.retransmission());
        }
    }

    fn on_will_topic(&mut self, message: SnMessage, now: Instant, gw: &mut Gateway) {
        match message {
            // §5.4.7: an empty WILLTOPIC means no will.
            SnMessage::WillTopic(None) => {
                self.will_topic = None;
                self.will_message = Bytes::new();
                self.finish_connect(now, gw);
            }
            SnMessage::WillTopic(Some(will)) => {
                if let Err(e) = topic::validate_name(&will.topic) {
                    info!(client_id = %self.client_id, topic = ?will.topic, error = %e, "CONNECT refused: invalid will topic");
                    GatewayStats::bump(&gw.stats.refused);
                    self.transmit.push_back(SnMessage::ConnAck { return_code: ReturnCode::NotSupported });
                    return self.end(CloseReason::ProtocolError, false, now);
                }
                let Phase::WillTopic { deadline } = self.phase else { return };
                self.phase = Phase::WillMsg { topic: will, deadline };
                self.transmit.push_back(SnMessage::WillMsgReq);
            }
            other => self.out_of_handshake(&other, gw),
        }
    }

    fn on_will_msg(&mut self, message: SnMessage, now: Instant, gw: &mut Gateway) {
        match message {
            SnMessage::WillMsg { will_msg } => {
                if let Phase::WillMsg { topic, .. } = std::mem::replace(&mut self.phase, Phase::Active) {
                    self.will_topic = Some(topic);
                }
                self.will_message = will_msg;
                self.finish_connect(now, gw);
            }
            // Our WILLMSGREQ was lost and the client sent WILLTOPIC again.
            SnMessage::WillTopic(Some(_)) => self.transmit.push_back(SnMessage::WillMsgReq),
            other => self.out_of_handshake(&other, gw),
        }
    }

    /// A message the will handshake does not allow (§6.3: only WILLTOPIC and WILLMSG): ignored.
    fn out_of_handshake(&self, message: &SnMessage, gw: &mut Gateway) {
        gw.count_bad_input(|stats| &stats.unsupported);
        debug!(client_id = %self.client_id, msg_type = ?message.msg_type(), "ignored during the will handshake");
    }

    fn on_will_topic_update(&mut self, will: Option<WillTopic>, gw: &mut Gateway) {
        // §5.4.22: an empty WILLTOPICUPD deletes the will topic and will message.
        let return_code = match will {
            None => {
                self.will_topic = None;
                self.will_message = Bytes::new();
                ReturnCode::Accepted
            }
            Some(will) => match topic::validate_name(&will.topic) {
                Ok(()) => {
                    self.will_topic = Some(will);
                    ReturnCode::Accepted
                }
                Err(e) => {
                    info!(client_id = %self.client_id, topic = ?will.topic, error = %e, "WILLTOPICUPD refused: invalid topic");
                    GatewayStats::bump(&gw.stats.refused);
                    ReturnCode::NotSupported
                }
            },
        };
        drop(self.save());
        self.transmit.push_back(SnMessage::WillTopicResp { return_code });
    }

    fn on_publish(&mut self, publish: Publish, now: Instant, gw: &mut Gateway) {
        let Some(topic) = inbound_topic(publish.topic, &self.predefined, &gw.registry) else {
            gw.count_bad_input(|stats| &stats.invalid_topic_id);
            info!(client_id = %self.client_id, topic = ?publish.topic, "PUBLISH refused: unknown topic id");
            // §5.4.13: PUBACK also reports errors; QoS −1 has no answer of any kind.
            if publish.qos != QoS::MinusOne {
                self.transmit.push_back(SnMessage::PubAck(PubAck {
                    topic_id: topic_id_field(publish.topic),
                    msg_id: publish.msg_id,
                    return_code: ReturnCode::InvalidTopicId,
                }));
            }
            return;
        };
        let puback = |return_code| {
            SnMessage::PubAck(PubAck { topic_id: topic_id_field(publish.topic), msg_id: publish.msg_id, return_code })
        };
        match publish.qos {
            QoS::Two if self.inbound_qos2.contains(&publish.msg_id) => {
                // A retransmission of a message already routed: answer, do not route twice.
                self.transmit.push_back(SnMessage::PubRec { msg_id: publish.msg_id });
            }
            QoS::Two if self.inbound_qos2.len() >= MAX_INBOUND_QOS2 => {
                info!(client_id = %self.client_id, "QoS 2 PUBLISH refused: too many unreleased messages");
                GatewayStats::bump(&gw.stats.refused);
                self.transmit.push_back(puback(ReturnCode::Congestion));
            }
            QoS::Two | QoS::One => {
                let (outcome, commit) = self.route(&topic, &publish, now, gw);
                let answer = if outcome.not_authorized {
                    // The access list refuses this topic: "rejected: not supported", the only
                    // refusal MQTT-SN 1.2 has that the client will not retry.
                    info!(client_id = %self.client_id, %topic, "PUBLISH not authorized");
                    puback(ReturnCode::NotSupported)
                } else if outcome.refused > 0 {
                    // A full offline session, queue or memory budget (§5.4.13: PUBACK "rejected:
                    // congestion"): the client keeps the message and may send it again.
                    GatewayStats::bump(&gw.stats.refused);
                    puback(ReturnCode::Congestion)
                } else if publish.qos == QoS::Two {
                    self.inbound_qos2.insert(publish.msg_id);
                    SnMessage::PubRec { msg_id: publish.msg_id }
                } else {
                    puback(ReturnCode::Accepted)
                };
                // Sent once what the message left on disk is there (see `handle_stored`); a
                // store failure is "rejected: congestion", which the client retries.
                let refusal = puback(ReturnCode::Congestion);
                if let Some(now) = self.stored_acks.answer(answer, commit, refusal) {
                    self.transmit.push_back(now);
                }
            }
            QoS::Zero | QoS::MinusOne => {
                self.route(&topic, &publish, now, gw);
            }
        }
    }

    /// Publishes through the core; returns what it did and the store commit to answer after.
    fn route(
        &self,
        topic: &str,
        publish: &Publish,
        now: Instant,
        gw: &mut Gateway,
    ) -> (PublishOutcome, Option<Durable>) {
        let message = core_message(
            topic,
            publish.data.clone(),
            publish.qos,
            publish.retain,
            self.core.id(),
            &self.client_id,
            now,
        );
        let mut commit = None;
        let outcome = self.core.publish_into(Arc::new(message), &mut commit);
        gw.count_in();
        (outcome, commit)
    }

    /// The store commits this session's answers wait for; the endpoint awaits each and calls
    /// [`ClientSession::handle_stored`].
    pub(crate) fn take_commits(&mut self) -> Vec<(u64, Durable)> {
        self.stored_acks.take_commits()
    }

    /// Commit `seq` ended: the answers it held go out (a refusal if it failed, and a refused
    /// QoS 2 message id is released so that its resend is routed again).
    pub(crate) fn handle_stored(&mut self, seq: u64, result: Result<(), StoreError>) {
        if let Err(e) = &result {
            info!(client_id = %self.client_id, error = %e, "a published message could not be stored");
        }
        for (answer, refused) in self.stored_acks.stored(seq, result.is_ok()) {
            if let (true, SnMessage::PubAck(refusal)) = (refused, &answer) {
                self.inbound_qos2.remove(&refusal.msg_id);
            }
            self.transmit.push_back(answer);
        }
    }

    fn on_register(&mut self, register: Register, gw: &mut Gateway) {
        let msg_id = register.msg_id;
        let refuse = |return_code| SnMessage::RegAck(RegAck { topic_id: 0, msg_id, return_code });
        let reply = if let Err(e) = topic::validate_name(&register.topic_name) {
            info!(client_id = %self.client_id, topic = ?register.topic_name, error = %e, "REGISTER refused: invalid topic name");
            GatewayStats::bump(&gw.stats.refused);
            refuse(ReturnCode::InvalidTopicId)
        } else {
            match gw.registry.get_or_insert(&register.topic_name) {
                Ok(topic_id) => {
                    self.known_ids.insert(topic_id);
                    SnMessage::RegAck(RegAck { topic_id, msg_id, return_code: ReturnCode::Accepted })
                }
                Err(RegistryFull) => {
                    info!(client_id = %self.client_id, topic = ?register.topic_name, "REGISTER refused: topic id registry full (max_topic_ids)");
                    GatewayStats::bump(&gw.stats.refused);
                    refuse(ReturnCode::Congestion)
                }
            }
        };
        self.transmit.push_back(reply);
    }

    fn on_regack(&mut self, regack: RegAck, now: Instant, gw: &mut Gateway) {
        if let Some(at) = self.out.registrations.iter().position(|r| r.register.msg_id == regack.msg_id) {
            let register = self.out.registrations.swap_remove(at).register;
            if regack.return_code == ReturnCode::Accepted {
                self.known_ids.insert(register.topic_id);
            } else {
                // As for the exchange's REGISTER: the first message waiting for it is dropped; the
                // next one on the topic registers it again.
                info!(client_id = %self.client_id, return_code = ?regack.return_code, "client refused our REGISTER: message dropped");
                let first = self.out.pending.iter().position(|p| *p.delivery.message.topic == *register.topic_name);
                if let Some(pending) = first.and_then(|at| self.out.pending.remove(at)) {
                    gw.count_drop(DropReason::Untranslatable);
                    settle(&self.core, &pending.delivery);
                }
            }
            return self.pump(now, gw);
        }
        let matches = self.out.inflight.as_ref().is_some_and(|i| i.step == Step::RegAck && i.msg_id() == regack.msg_id);
        let Some(mut inflight) = self.out.inflight.take_if(|_| matches) else { return };
        let topic_id = inflight.register.take().map_or(0, |r| r.topic_id);
        if regack.return_code == ReturnCode::Accepted {
            self.known_ids.insert(topic_id);
            self.send_publish(inflight.publish, inflight.pending, now);
        } else {
            info!(client_id = %self.client_id, return_code = ?regack.return_code, "client refused our REGISTER: message dropped");
            gw.count_drop(DropReason::Untranslatable);
            settle(&self.core, &inflight.pending.delivery);
        }
        self.pump(now, gw);
    }

    fn on_puback(&mut self, puback: PubAck, now: Instant, gw: &mut Gateway) {
        let matches = self.out.inflight.as_ref().is_some_and(|i| i.step == Step::PubAck && i.msg_id() == puback.msg_id);
        let Some(inflight) = self.out.inflight.take_if(|_| matches) else { return };
        if puback.return_code != ReturnCode::Accepted {
            // 0x02: the client does not know the id (it lost its registrations); it will be
            // registered again before the next message on that topic.
            if let PublishTopic::Normal(id) = inflight.publish.topic {
                self.known_ids.remove(id);
            }
            info!(client_id = %self.client_id, return_code = ?puback.return_code, "client refused a PUBLISH: message dropped");
            gw.count_drop(DropReason::Untranslatable);
        }
        settle(&self.core, &inflight.pending.delivery);
        self.pump(now, gw);
    }

    fn on_pubrec(&mut self, msg_id: u16, now: Instant) {
        let retry = self.retry(now);
        let Some(inflight) = self.out.inflight.as_mut().filter(|i| i.msg_id() == msg_id) else { return };
        match inflight.step {
            Step::PubRec => inflight.advance(Step::PubComp, retry),
            Step::PubComp => {} // duplicate PUBREC: our PUBREL was lost
            Step::RegAck | Step::PubAck => return,
        }
        self.transmit.push_back(SnMessage::PubRel { msg_id });
    }

    fn on_pubcomp(&mut self, msg_id: u16, now: Instant, gw: &mut Gateway) {
        let matches = self.out.inflight.as_ref().is_some_and(|i| i.step == Step::PubComp && i.msg_id() == msg_id);
        if let Some(inflight) = self.out.inflight.take_if(|_| matches) {
            settle(&self.core, &inflight.pending.delivery);
            self.pump(now, gw);
        }
    }

    fn on_subscribe(&mut self, subscribe: Subscribe, now: Instant, gw: &mut Gateway) {
        let msg_id = subscribe.msg_id;
        let mut refuse = |return_code, why: &str| {
            info!(client_id = %self.client_id, topic = ?subscribe.topic, "SUBSCRIBE refused: {why}");
            GatewayStats::bump(&gw.stats.refused);
            self.transmit.push_back(SnMessage::SubAck(SubAck { qos: QoS::Zero, topic_id: 0, msg_id, return_code }));
        };
        if subscribe.qos == QoS::MinusOne {
            return refuse(ReturnCode::NotSupported, "QoS -1 is for publishing only");
        }
        let (filter, form, topic_id) = match &subscribe.topic {
            SubscribeTopic::Name(name) => {
                if let Err(e) = topic::validate_filter(name) {
                    return refuse(ReturnCode::InvalidTopicId, &e.to_string());
                }
                if topic::has_wildcard(name) {
                    // §5.4.16: the TopicId of a SUBACK for a wildcard filter is 0x0000.
                    (name.clone(), SubscriptionForm::Name, 0)
                } else {
                    match gw.registry.get_or_insert(name) {
                        Ok(id) => (name.clone(), SubscriptionForm::Name, id),
                        Err(RegistryFull) => {
                            return refuse(ReturnCode::Congestion, "topic id registry full (max_topic_ids)");
                        }
                    }
                }
            }
            SubscribeTopic::Predefined(id) => match self.predefined.name(*id) {
                Some(name) => (name.to_string(), SubscriptionForm::Predefined(*id), *id),
                None => return refuse(ReturnCode::InvalidTopicId, "unknown pre-defined topic id"),
            },
            SubscribeTopic::Short(name) => match short_filter(*name) {
                Some(filter) => (filter, SubscriptionForm::Short(*name), 0),
                None => return refuse(ReturnCode::InvalidTopicId, "invalid short topic name"),
            },
        };
        let tag = form.tag();
        let key = (filter, tag);
        if !self.subscriptions.contains_key(&key) && self.subscriptions.len() >= self.limits.max_subscriptions {
            return refuse(ReturnCode::Congestion, "max_subscriptions_per_client reached");
        }
        let max_qos = core_qos(subscribe.qos);
        let options = SubscriptionOptions { max_qos, ..SubscriptionOptions::default() };
        match self.core.subscribe(&key.0, tag, options) {
            Ok(_) => {}
            Err(e @ SubscribeError::NotAuthorized(_)) => return refuse(ReturnCode::NotSupported, &e.to_string()),
            Err(e) => return refuse(ReturnCode::InvalidTopicId, &e.to_string()),
        }
        if topic_id != 0 && matches!(form, SubscriptionForm::Name) {
            self.known_ids.insert(topic_id);
        }
        self.transmit.push_back(SnMessage::SubAck(SubAck {
            qos: subscribe.qos,
            topic_id,
            msg_id,
            return_code: ReturnCode::Accepted,
        }));
        // Retained messages follow the SUBACK, marked retained, as in MQTT.
        let retained = self.core.retained(&key.0);
        let limit = self.limits.max_retained_per_subscribe;
        if retained.len() > limit {
            gw.count_drops(DropReason::QueueFull, (retained.len() - limit) as u64);
        }
        for message in retained.into_iter().take(limit) {
            let delivery = Delivery { tag, ..Delivery::retained(message, max_qos, now) };
            self.out.pending.push_back(Pending { delivery, taken_at: now });
        }
        self.subscriptions.insert(key, max_qos);
        drop(self.save());
        self.pump(now, gw);
    }

    fn on_unsubscribe(&mut self, unsubscribe: Unsubscribe) {
        let target = match &unsubscribe.topic {
            SubscribeTopic::Name(name) => Some((name.clone(), SubscriptionForm::Name.tag())),
            SubscribeTopic::Predefined(id) => {
                self.predefined.name(*id).map(|name| (name.to_string(), SubscriptionForm::Predefined(*id).tag()))
            }
            SubscribeTopic::Short(name) => short_filter(*name).map(|f| (f, SubscriptionForm::Short(*name).tag())),
        };
        if let Some(key) = target {
            self.core.unsubscribe(&key.0, key.1);
            self.subscriptions.remove(&key);
            drop(self.save());
        }
        // §5.4.18: UNSUBACK whether or not the subscription existed.
        self.transmit.push_back(SnMessage::UnsubAck { msg_id: unsubscribe.msg_id });
    }

    fn on_pingreq(&mut self, with_client_id: bool, now: Instant, gw: &mut Gateway) {
        match self.phase {
            // §6.14: PINGREQ with the ClientId wakes the client up: buffered messages, then PINGRESP.
            Phase::Asleep { duration } if with_client_id => {
                self.phase = Phase::Awake { duration, remaining: self.out.pending.len() };
                self.resume_inflight(now);
                self.pump(now, gw);
            }
            Phase::Awake { .. } => {} // PINGRESP follows the buffered messages
            _ => self.transmit.push_back(SnMessage::PingResp),
        }
    }

    fn on_disconnect(&mut self, duration: Option<u16>, now: Instant) {
        // §5.4.21: the gateway acknowledges with a DISCONNECT (without duration).
        self.transmit.push_back(SnMessage::Disconnect { duration: None });
        match duration.filter(|&d| d > 0) {
            Some(duration) => {
                self.phase = Phase::Asleep { duration };
                self.last_heard = now;
                // Asleep, the client hears nothing; its messages wait in `pending`, and are
                // registered again one by one when it wakes.
                self.out.registrations.clear();
                self.maybe_request();
            }
            None => self.end(CloseReason::ClientClosed, false, now),
        }
    }

    /// Sends waiting deliveries while the phase allows; finishes an awake period with
    /// PINGRESP; asks for more deliveries when there is room.
    fn pump(&mut self, now: Instant, gw: &mut Gateway) {
        if self.phase == Phase::Active && self.address_proved {
            self.pump_active(now, gw);
        } else {
            self.pump_awake(now, gw);
        }
        self.maybe_request();
    }

    /// Awake (§6.14): the buffered messages strictly one at a time, counted down, then
    /// PINGRESP. Nothing goes out in other phases, nor to an address not yet proved.
    fn pump_awake(&mut self, now: Instant, gw: &mut Gateway) {
        while self.out.inflight.is_none() {
            let may_send = self.address_proved && matches!(self.phase, Phase::Awake { remaining, .. } if remaining > 0);
            if !may_send {
                break;
            }
            let next = self.out.pending.pop_front();
            if let Phase::Awake { remaining, .. } = &mut self.phase {
                *remaining = if next.is_some() { *remaining - 1 } else { 0 };
            }
            let Some(pending) = next else { break };
            self.start_delivery(pending, now, gw);
        }
        if let Phase::Awake { duration, remaining: 0 } = self.phase
            && self.out.inflight.is_none()
        {
            // §6.14: buffered messages delivered; PINGRESP sends the client back to sleep.
            self.transmit.push_back(SnMessage::PingResp);
            self.phase = Phase::Asleep { duration };
            self.last_heard = now;
        }
    }

    /// Active: QoS 0 messages go out beside the exchange in flight once their topic is known,
    /// with up to [`MAX_REGISTRATIONS`] topics being registered for them at once; at-least-once
    /// messages one exchange at a time. A message waits while an earlier one on its topic
    /// waits or is in flight (a retransmission would overtake it), so each topic keeps its
    /// order.
    fn pump_active(&mut self, now: Instant, gw: &mut Gateway) {
        let mut waiting = VecDeque::new();
        while let Some(pending) = self.out.pending.pop_front() {
            let topic = &pending.delivery.message.topic;
            let in_flight = self.out.inflight.as_ref().is_some_and(|i| i.pending.delivery.message.topic == *topic);
            if in_flight || waiting.iter().any(|w: &Pending| w.delivery.message.topic == *topic) {
                waiting.push_back(pending);
                continue;
            }
            // Its topic's REGISTER is out: it waits for the REGACK, and is not routed again
            // (looked up, encoded, sized) on every pump meanwhile.
            let registering = gw.registry.id(topic).is_some_and(|id| self.out.registering(id));
            if sn_qos(pending.delivery.qos) != QoS::Zero {
                if self.out.inflight.is_some() || registering {
                    waiting.push_back(pending);
                } else {
                    self.start_delivery(pending, now, gw);
                }
                continue;
            }
            if registering {
                waiting.push_back(pending);
                continue;
            }
            match self.outbound(&pending, now, gw) {
                Route::Dropped => {}
                Route::Ready(publish) => self.send_publish(publish, pending, now),
                Route::Register(id, name, _) => {
                    let room = self.out.registrations.len() < MAX_REGISTRATIONS;
                    if self.out.registering(id) || !room {
                        waiting.push_back(pending);
                    } else if let Some(register) = self.send_register(id, &name, gw, &pending.delivery) {
                        let retry = self.retry(now);
                        self.out.registrations.push(Registration { register, retry });
                        waiting.push_back(pending);
                    }
                }
            }
        }
        // `pending` is empty now: appending keeps its buffer for the next batch.
        self.out.pending.append(&mut waiting);
    }

    fn maybe_request(&mut self) {
        if !self.online || self.requested {
            return;
        }
        let sleeping = self.is_sleeping();
        let room = match self.phase {
            Phase::Active => self.out.pending.is_empty(),
            Phase::Asleep { .. } | Phase::Awake { .. } => self.out.pending.len() < self.limits.max_buffered_sleeping,
            _ => false,
        };
        // Asleep with a full buffer: the core outbox, detached, keeps at-least-once messages up
        // to its capacity (and drops the rest, counted) instead of overflowing.
        self.set_detached(sleeping && !room);
        if room {
            self.requested = true;
            self.events.push_back(Event::WantDeliveries);
        }
    }

    fn set_detached(&mut self, detached: bool) {
        if self.detached != detached {
            self.detached = detached;
            self.core.receiver().set_attached(!detached);
        }
    }

    /// Starts the exchange of one delivery: drops it if it cannot be sent, REGISTERs its topic
    /// first if the client does not know the id, else sends the PUBLISH.
    fn start_delivery(&mut self, pending: Pending, now: Instant, gw: &mut Gateway) {
        match self.outbound(&pending, now, gw) {
            Route::Dropped => {}
            Route::Ready(publish) => self.send_publish(publish, pending, now),
            Route::Register(id, name, publish) => {
                if let Some(register) = self.send_register(id, &name, gw, &pending.delivery) {
                    self.out.inflight = Some(Box::new(Inflight {
                        step: Step::RegAck,
                        register: Some(register),
                        publish,
                        pending,
                        retry: self.retry(now),
                    }));
                }
            }
        }
    }

    /// The PUBLISH for one delivery, and the REGISTER it needs first if the client does not
    /// know its topic's id (§6.10). A delivery that cannot be sent is dropped, counted and
    /// settled here.
    fn outbound(&mut self, pending: &Pending, now: Instant, gw: &mut Gateway) -> Route {
        let delivery = &pending.delivery;
        if delivery.message.is_expired(now) {
            gw.count_drop(DropReason::Expired);
            settle(&self.core, delivery);
            return Route::Dropped;
        }
        let form = SubscriptionForm::from_tag(delivery.tag);
        let known = &self.known_ids;
        let target =
            outbound_topic(&delivery.message.topic, form, &self.predefined, &mut gw.registry, |id| known.contains(id));
        let topic = match &target {
            OutboundTopic::Ready(topic) => *topic,
            OutboundTopic::Register { id, .. } => PublishTopic::Normal(*id),
            OutboundTopic::Unmappable => {
                debug!(client_id = %self.client_id, topic = %delivery.message.topic, "no topic id for this topic (registry full): dropped");
                gw.count_drop(DropReason::Untranslatable);
                settle(&self.core, delivery);
                return Route::Dropped;
            }
        };
        let qos = sn_qos(delivery.qos);
        let msg_id = if qos == QoS::Zero { 0 } else { self.out.next_msg_id() };
        let publish = Publish {
            dup: delivery.redelivered && qos != QoS::Zero,
            qos,
            retain: delivery.retain,
            topic,
            msg_id,
            data: delivery.message.payload.clone(),
        };
        if encoded_len(&SnMessage::Publish(publish.clone())) > self.limits.max_message_size {
            debug!(client_id = %self.client_id, topic = %delivery.message.topic, "message larger than max_message_size_bytes: dropped");
            gw.count_drop(DropReason::Untranslatable);
            settle(&self.core, delivery);
            return Route::Dropped;
        }
        match target {
            OutboundTopic::Register { id, name } => Route::Register(id, name, publish),
            _ => Route::Ready(publish),
        }
    }

    /// Sends a REGISTER of `name` as `topic_id` and returns it, or drops `delivery` (counted
    /// and settled) if it would be larger than the client takes.
    fn send_register(&mut self, topic_id: u16, name: &str, gw: &mut Gateway, delivery: &Delivery) -> Option<Register> {
        let register = Register { topic_id, msg_id: self.out.next_msg_id(), topic_name: name.to_string() };
        let message = SnMessage::Register(register.clone());
        if encoded_len(&message) > self.limits.max_message_size {
            gw.count_drop(DropReason::Untranslatable);
            settle(&self.core, delivery);
            return None;
        }
        self.transmit.push_back(message);
        Some(register)
    }

    fn send_publish(&mut self, publish: Publish, pending: Pending, now: Instant) {
        self.transmit.push_back(SnMessage::Publish(publish.clone()));
        let step = match publish.qos {
            QoS::One => Step::PubAck,
            QoS::Two => Step::PubRec,
            QoS::Zero | QoS::MinusOne => {
                // Settled once its datagram is sent.
                let ack = pending.delivery.ack.clone();
                return self.egress.record(self.transmit.len(), &pending.delivery, pending.taken_at, ack);
            }
        };
        self.egress.record(self.transmit.len(), &pending.delivery, pending.taken_at, None);
        self.out.inflight = Some(Box::new(Inflight { step, register: None, publish, pending, retry: self.retry(now) }));
    }

    /// Ends the connection. The will is published when `fire_will` (the client did not say
    /// goodbye). With clean session off the session stays offline: what was not delivered goes
    /// back to the core outbox, which keeps at-least-once messages for it.
    fn end(&mut self, reason: CloseReason, fire_will: bool, now: Instant) {
        if fire_will {
            self.publish_will(now);
        }
        self.online = false;
        self.requested = false;
        let keep = !self.clean;
        if keep {
            let undelivered: Vec<Delivery> =
                self.out.drain_undelivered().into_iter().filter(|d| d.qos != CoreQoS::AtMostOnce).collect();
            self.core.receiver().requeue_front(undelivered.into_iter());
            self.set_detached(true);
            self.phase = Phase::Offline { since: now };
            drop(self.save());
        } else {
            self.out = Outgoing::default();
            self.phase = Phase::Closed;
        }
        self.events.push_back(Event::Ended { reason, keep });
    }

    fn publish_will(&mut self, now: Instant) {
        let Some(will) = self.will_topic.take() else { return };
        let payload = std::mem::take(&mut self.will_message);
        let mut message =
            core_message(&will.topic, payload, will.qos, will.retain, self.core.id(), &self.client_id, now);
        // A will is sent by the gateway on the client's behalf, after its connection is gone.
        message.origin.protocol = Protocol::Internal;
        info!(client_id = %self.client_id, topic = %will.topic, "publishing will");
        self.core.publish(Arc::new(message));
    }
}

/// How one delivery can go out now.
enum Route {
    /// It could not be sent, and was dropped.
    Dropped,
    /// The PUBLISH can go.
    Ready(Publish),
    /// A REGISTER of the name as the id must go first, and be answered.
    Register(u16, Arc<str>, Publish),
}

/// The client is done with `delivery`: one kept in the store is deleted there, and one from a
/// named queue settled (none come from one today: MQTT-SN subscribes outboxes only, but a queue
/// delivery must never be left unsettled).
fn settle(core: &Session, delivery: &Delivery) {
    if let Some(ack) = &delivery.ack {
        ack.ack();
    }
    core.settled(delivery);
}

#[cfg(test)]
mod tests {
    //! The state machine driven with synthetic time: keep-alive, sleep, retransmission and
    //! expiry without sockets or real clocks. `handle_connect(.., true, ..)` is a CONNECT from
    //! the address the session is at, so that deliveries flow at once;
    //! `deliveries_wait_until_a_new_address_speaks_again` covers the other case.

    use super::*;
    use crate::registry::TopicRegistry;
    use mqttsn_codec::PROTOCOL_ID;
    use tolk_core::{Message, Metrics, Origin, Router, RouterConfig, SessionId};

    fn gateway() -> Gateway {
        let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
        let limits = Limits {
            retransmit_timeout: Duration::from_secs(10),
            retransmit_retries: 2,
            max_buffered_sleeping: 8,
            max_message_size: 1024,
            max_subscriptions: 4,
            session_expiry: Duration::from_secs(3600),
            max_retained_per_subscribe: 8,
            handshake_timeout: Duration::from_secs(20),
            first_message_timeout: Duration::from_secs(60),
            max_keep_alive: Duration::from_secs(3600),
        };
        Gateway {
            router,
            registry: TopicRegistry::new(100),
            stats: Arc::default(),
            limits: Arc::new(limits),
            auth: Arc::new(tolk_core::auth::AllowAll),
            users: Default::default(),
        }
    }

    fn session(gw: &Gateway, now: Instant) -> ClientSession {
        let core = Arc::new(gw.router.open_session(Protocol::MqttSn));
        ClientSession::new("c".into(), core, Arc::default(), gw.limits.clone(), now)
    }

    fn connect(keep_alive: u16, clean_session: bool, will: bool) -> Connect {
        Connect { will, clean_session, protocol_id: PROTOCOL_ID, duration: keep_alive, client_id: "c".into() }
    }

    fn delivery(topic: &str, qos: CoreQoS, tag: u64) -> Delivery {
        let origin = Origin { protocol: Protocol::Mqtt, session: SessionId(999), client_id: "m".into() };
        Delivery { tag, ..Delivery::new(Arc::new(Message::new(topic, "x", origin)), qos, Instant::now()) }
    }

    fn transmitted(s: &mut ClientSession) -> Vec<SnMessage> {
        std::iter::from_fn(|| s.poll_transmit()).collect()
    }

    #[test]
    fn a_drained_transmit_queue_keeps_no_buffer() {
        let mut gw = gateway();
        let t0 = Instant::now();
        let mut s = session(&gw, t0);
        s.handle_connect(&connect(0, true, false), true, t0, &mut gw);
        assert_eq!(transmitted(&mut s), [SnMessage::ConnAck { return_code: ReturnCode::Accepted }]);
        assert_eq!(s.transmit.capacity(), 0, "an idle client keeps no buffer for its answers");
    }

    fn events(s: &mut ClientSession) -> Vec<Event> {
        std::iter::from_fn(|| s.poll_event()).collect()
    }

    const SHORT: u64 = 2 << 32 | 0x6162; // SubscriptionForm::Short(*b"ab")

    #[test]
    fn keep_alive_times_out_at_one_and_a_half_times_the_duration_and_fires_the_will() {
        let mut gw = gateway();
        let watcher = gw.router.open_session(Protocol::Mqtt);
        watcher.subscribe("w", 0, SubscriptionOptions::default()).unwrap();
        let t0 = Instant::now();
        let mut s = session(&gw, t0);
        s.handle_connect(&connect(10, true, true), true, t0, &mut gw);
        assert_eq!(transmitted(&mut s), [SnMessage::WillTopicReq]);
        let will = WillTopic { qos: QoS::Zero, retain: false, topic: "w".into() };
        s.handle(SnMessage::WillTopic(Some(will)), t0, &mut gw);
        s.handle(SnMessage::WillMsg { will_msg: Bytes::from_static(b"bye") }, t0, &mut gw);
        assert_eq!(
            transmitted(&mut s),
            [SnMessage::WillMsgReq, SnMessage::ConnAck { return_code: ReturnCode::Accepted }]
        );
        assert_eq!(events(&mut s), [Event::Connected, Event::WantDeliveries]);

        let t1 = t0 + Duration::from_secs(5);
        s.handle(SnMessage::PingReq { client_id: None }, t1, &mut gw);
        assert_eq!(transmitted(&mut s), [SnMessage::PingResp]);
        assert_eq!(s.poll_timeout(), Some(t1 + Duration::from_secs(15)));
        s.handle_timeout(t1 + Duration::from_secs(14));
        assert_eq!(s.phase(), &Phase::Active);
        s.handle_timeout(t1 + Duration::from_secs(15));
        assert_eq!(events(&mut s), [Event::Ended { reason: CloseReason::KeepAliveTimeout, keep: false }]);
        assert_eq!(s.phase(), &Phase::Closed);
        assert_eq!(watcher.receiver().len(), 1, "will published");
    }

    #[test]
    fn an_unfinished_will_handshake_is_abandoned_at_handshake_timeout_after_the_connect() {
        let mut gw = gateway();
        let t0 = Instant::now();
        let mut s = session(&gw, t0);
        s.handle_connect(&connect(10, true, true), true, t0, &mut gw);
        let deadline = t0 + gw.limits.handshake_timeout;
        assert_eq!(s.poll_timeout(), Some(deadline));
        // The second step does not restart the clock.
        let will = WillTopic { qos: QoS::Zero, retain: false, topic: "w".into() };
        s.handle(SnMessage::WillTopic(Some(will)), t0 + Duration::from_secs(15), &mut gw);
        assert_eq!(transmitted(&mut s), [SnMessage::WillTopicReq, SnMessage::WillMsgReq]);
        assert_eq!(s.poll_timeout(), Some(deadline));
        s.handle_timeout(deadline);
        assert_eq!(events(&mut s), [Event::Ended { reason: CloseReason::IdleTimeout, keep: false }]);
    }

    #[test]
    fn a_session_that_says_nothing_after_connect_expires_at_first_message_timeout() {
        let mut gw = gateway();
        let t0 = Instant::now();
        let mut silent = session(&gw, t0);
        silent.handle_connect(&connect(600, true, false), true, t0, &mut gw);
        let expiry = t0 + gw.limits.first_message_timeout;
        assert_eq!(silent.poll_timeout(), Some(expiry));
        silent.handle_timeout(expiry);
        assert!(events(&mut silent).contains(&Event::Ended { reason: CloseReason::IdleTimeout, keep: false }));

        // One message, and the client's own keep-alive applies.
        let mut used = session(&gw, t0);
        used.handle_connect(&connect(600, true, false), true, t0, &mut gw);
        used.handle(SnMessage::PingReq { client_id: None }, t0, &mut gw);
        assert_eq!(used.poll_timeout(), Some(t0 + Duration::from_secs(900)));
        // A keep-alive shorter than first_message_timeout wins over it.
        let mut quick = session(&gw, t0);
        quick.handle_connect(&connect(10, true, false), true, t0, &mut gw);
        assert_eq!(quick.poll_timeout(), Some(t0 + Duration::from_secs(15)));
    }

    #[test]
    fn keep_alive_zero_or_past_the_maximum_gets_max_keep_alive() {
        let mut gw = gateway();
        let watcher = gw.router.open_session(Protocol::Mqtt);
        watcher.subscribe("w", 0, SubscriptionOptions::default()).unwrap();
        let t0 = Instant::now();
        for asked in [0, u16::MAX] {
            let mut s = session(&gw, t0);
            s.handle_connect(&connect(asked, true, true), true, t0, &mut gw);
            let will = WillTopic { qos: QoS::Zero, retain: false, topic: "w".into() };
            s.handle(SnMessage::WillTopic(Some(will)), t0, &mut gw);
            s.handle(SnMessage::WillMsg { will_msg: Bytes::from_static(b"gone") }, t0, &mut gw);
            let lost = t0 + gw.limits.max_keep_alive.mul_f32(1.5);
            assert_eq!(s.poll_timeout(), Some(lost), "asked {asked}");
            s.handle_timeout(lost);
            assert!(events(&mut s).contains(&Event::Ended { reason: CloseReason::IdleTimeout, keep: false }));
        }
        assert_eq!(watcher.receiver().len(), 2, "both wills published");
    }

    #[test]
    fn deliveries_wait_until_a_new_address_speaks_again() {
        let mut gw = gateway();
        let t0 = Instant::now();
        let mut s = session(&gw, t0);
        s.handle_connect(&connect(60, true, false), true, t0, &mut gw);
        s.handle_deliveries(&mut vec![delivery("ab", CoreQoS::AtLeastOnce, SHORT)], t0, &mut gw);
        let [SnMessage::Publish(first)] = &transmitted(&mut s)[1..] else { panic!() };
        let msg_id = first.msg_id;
        s.handle(SnMessage::Disconnect { duration: Some(100) }, t0, &mut gw);
        transmitted(&mut s);
        // Awake again by a CONNECT from an address the session was not at: only the CONNACK
        // goes there, neither the unacknowledged PUBLISH nor a retransmission timer.
        let t1 = t0 + Duration::from_secs(5);
        s.handle_connect(&connect(60, true, false), false, t1, &mut gw);
        assert_eq!(transmitted(&mut s), [SnMessage::ConnAck { return_code: ReturnCode::Accepted }]);
        assert_eq!(s.poll_timeout(), Some(t1 + gw.limits.first_message_timeout));
        s.handle_deliveries(&mut vec![delivery("ab", CoreQoS::AtMostOnce, SHORT)], t1, &mut gw);
        assert!(transmitted(&mut s).is_empty());
        // The client speaks from there: what waited goes out, ahead of the answer.
        s.handle(SnMessage::PingReq { client_id: None }, t1, &mut gw);
        let sent = transmitted(&mut s);
        let [SnMessage::Publish(resent), SnMessage::PingResp] = &sent[..] else { panic!("{sent:?}") };
        assert!(resent.dup && resent.msg_id == msg_id);
        assert_eq!(s.poll_timeout(), Some(t1 + gw.limits.retransmit_timeout));
    }

    #[test]
    fn a_delivery_counts_once_its_datagram_is_sent_not_when_it_is_queued() {
        let mut gw = gateway();
        let t0 = Instant::now();
        let mut s = session(&gw, t0);
        s.handle_connect(&connect(60, true, false), true, t0, &mut gw);
        let metrics = gw.router.metrics().clone();
        let out = || metrics.protocol(Protocol::MqttSn).messages_out.load(std::sync::atomic::Ordering::Relaxed);
        s.handle_deliveries(&mut vec![delivery("ab", CoreQoS::AtMostOnce, SHORT)], t0, &mut gw);
        s.handle_deliveries(&mut vec![delivery("ab", CoreQoS::AtMostOnce, SHORT)], t0, &mut gw);
        assert_eq!(out(), 0, "queued for the socket, not yet sent");
        let sent = transmitted(&mut s);
        let [SnMessage::ConnAck { .. }, SnMessage::Publish(_), SnMessage::Publish(_)] = &sent[..] else {
            panic!("{sent:?}")
        };
        s.transmitted(true, t0, &metrics);
        s.transmitted(true, t0, &metrics);
        assert_eq!(out(), 1);
        // The second datagram could not be sent (the client's address is gone).
        s.transmitted(false, t0, &metrics);
        assert_eq!(out(), 1);
    }

    #[test]
    fn retransmission_uses_dup_then_gives_up() {
        let mut gw = gateway();
        let t0 = Instant::now();
        let mut s = session(&gw, t0);
        s.handle_connect(&connect(0, true, false), true, t0, &mut gw);
        transmitted(&mut s);
        s.handle_deliveries(&mut vec![delivery("ab", CoreQoS::AtLeastOnce, SHORT)], t0, &mut gw);
        let [SnMessage::Publish(first)] = &transmitted(&mut s)[..] else { panic!() };
        assert!(!first.dup);
        let mut at = t0;
        for _ in 0..2 {
            at += Duration::from_secs(10);
            assert_eq!(s.poll_timeout(), Some(at));
            s.handle_timeout(at);
            let [SnMessage::Publish(again)] = &transmitted(&mut s)[..] else { panic!() };
            assert!(again.dup && again.msg_id == first.msg_id);
        }
        at += Duration::from_secs(10);
        s.handle_timeout(at);
        assert!(events(&mut s).contains(&Event::Ended { reason: CloseReason::KeepAliveTimeout, keep: false }));
    }

    #[test]
    fn qos2_outbound_runs_pubrec_pubrel_pubcomp_and_retransmits_pubrel() {
        let mut gw = gateway();
        let t0 = Instant::now();
        let mut s = session(&gw, t0);
        s.handle_connect(&connect(0, true, false), true, t0, &mut gw);
        transmitted(&mut s);
        s.handle_deliveries(
            &mut vec![delivery("ab", CoreQoS::ExactlyOnce, SHORT), delivery("ab", CoreQoS::AtMostOnce, SHORT)],
            t0,
            &mut gw,
        );
        let [SnMessage::Publish(publish)] = &transmitted(&mut s)[..] else { panic!() };
        let msg_id = publish.msg_id;
        s.handle(SnMessage::PubRec { msg_id }, t0, &mut gw);
        assert_eq!(transmitted(&mut s), [SnMessage::PubRel { msg_id }]);
        let later = t0 + Duration::from_secs(10);
        s.handle_timeout(later);
        assert_eq!(transmitted(&mut s), [SnMessage::PubRel { msg_id }]);
        s.handle(SnMessage::PubComp { msg_id }, later, &mut gw);
        // The QoS 0 message waited for the exchange to complete.
        let [SnMessage::Publish(next)] = &transmitted(&mut s)[..] else { panic!() };
        assert_eq!(next.qos, QoS::Zero);
        // No retransmission timer left; keep-alive 0 is supervised at max_keep_alive.
        assert_eq!(s.poll_timeout(), Some(later + gw.limits.max_keep_alive.mul_f32(1.5)));
    }

    #[test]
    fn asleep_pauses_retransmission_and_buffers_until_pingreq() {
        let mut gw = gateway();
        let t0 = Instant::now();
        let mut s = session(&gw, t0);
        s.handle_connect(&connect(30, true, false), true, t0, &mut gw);
        transmitted(&mut s);
        s.handle_deliveries(&mut vec![delivery("ab", CoreQoS::AtLeastOnce, SHORT)], t0, &mut gw);
        assert_eq!(transmitted(&mut s).len(), 1);
        s.handle(SnMessage::Disconnect { duration: Some(100) }, t0, &mut gw);
        assert_eq!(transmitted(&mut s), [SnMessage::Disconnect { duration: None }]);
        assert_eq!(s.phase(), &Phase::Asleep { duration: 100 });
        // Only the sleep timer runs.
        assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(150)));
        s.handle_deliveries(&mut vec![delivery("ab", CoreQoS::AtMostOnce, SHORT)], t0, &mut gw);
        assert!(transmitted(&mut s).is_empty());

        let t1 = t0 + Duration::from_secs(60);
        s.handle(SnMessage::PingReq { client_id: Some("c".into()) }, t1, &mut gw);
        let [SnMessage::Publish(resent)] = &transmitted(&mut s)[..] else { panic!() };
        assert!(resent.dup);
        s.handle(
            SnMessage::PubAck(PubAck { topic_id: 0x6162, msg_id: resent.msg_id, return_code: ReturnCode::Accepted }),
            t1,
            &mut gw,
        );
        let sent = transmitted(&mut s);
        assert!(
            matches!(sent[..], [SnMessage::Publish(Publish { qos: QoS::Zero, .. }), SnMessage::PingResp]),
            "{sent:?}"
        );
        assert_eq!(s.phase(), &Phase::Asleep { duration: 100 });
        s.handle_timeout(t1 + Duration::from_secs(150));
        assert!(events(&mut s).contains(&Event::Ended { reason: CloseReason::KeepAliveTimeout, keep: false }));
    }

    #[test]
    fn a_persistent_session_goes_offline_requeues_and_expires() {
        let mut gw = gateway();
        let t0 = Instant::now();
        let mut s = session(&gw, t0);
        s.handle_connect(&connect(0, false, false), true, t0, &mut gw);
        transmitted(&mut s);
        events(&mut s);
        s.handle_deliveries(
            &mut vec![
                delivery("ab", CoreQoS::AtLeastOnce, SHORT),
                delivery("ab", CoreQoS::AtMostOnce, SHORT),
                delivery("ab", CoreQoS::AtLeastOnce, SHORT),
            ],
            t0,
            &mut gw,
        );
        s.handle(SnMessage::Disconnect { duration: None }, t0, &mut gw);
        assert_eq!(events(&mut s), [Event::Ended { reason: CloseReason::ClientClosed, keep: true }]);
        // The in-flight message (marked redelivered) and the waiting QoS 1 one go back; QoS 0 does not.
        let mut back = Vec::new();
        s.core().receiver().try_drain(&mut back, 10).unwrap();
        assert_eq!(back.len(), 2);
        assert!(back[0].redelivered && !back[1].redelivered);
        let expiry = t0 + Duration::from_secs(3600);
        assert_eq!(s.poll_timeout(), Some(expiry));
        s.handle_timeout(expiry);
        assert_eq!(events(&mut s), [Event::Expired]);
    }

    #[test]
    fn wildcard_deliveries_register_first_and_a_refused_register_drops_the_message() {
        let mut gw = gateway();
        let t0 = Instant::now();
        let mut s = session(&gw, t0);
        s.handle_connect(&connect(0, true, false), true, t0, &mut gw);
        transmitted(&mut s);
        s.handle_deliveries(
            &mut vec![delivery("a/b", CoreQoS::AtMostOnce, 0), delivery("c/d", CoreQoS::AtMostOnce, 0)],
            t0,
            &mut gw,
        );
        // QoS 0: both topics are registered at once.
        let [SnMessage::Register(register), SnMessage::Register(next)] = &transmitted(&mut s)[..] else { panic!() };
        assert_eq!((&*register.topic_name, &*next.topic_name), ("a/b", "c/d"));
        let refused =
            RegAck { topic_id: register.topic_id, msg_id: register.msg_id, return_code: ReturnCode::NotSupported };
        s.handle(SnMessage::RegAck(refused), t0, &mut gw);
        assert!(transmitted(&mut s).is_empty());
        assert_eq!(gw.router.metrics().protocol(Protocol::MqttSn).dropped_count(DropReason::Untranslatable), 1);
        let accepted = RegAck { topic_id: next.topic_id, msg_id: next.msg_id, return_code: ReturnCode::Accepted };
        s.handle(SnMessage::RegAck(accepted), t0, &mut gw);
        let [SnMessage::Publish(publish)] = &transmitted(&mut s)[..] else { panic!() };
        assert_eq!(publish.topic, PublishTopic::Normal(next.topic_id));
    }

    #[test]
    fn a_wildcard_subscriber_keeps_every_registered_id() {
        // More topics than the 1,024 ids a client used to be remembered for: with the old bound
        // the second round registered every topic again (MinT load, 10,000 topics).
        const TOPICS: usize = 2_000;
        let mut gw = gateway();
        gw.registry = TopicRegistry::new(TOPICS + 1);
        let t0 = Instant::now();
        let mut s = session(&gw, t0);
        s.handle_connect(&connect(0, true, false), true, t0, &mut gw);
        transmitted(&mut s);
        for i in 0..TOPICS {
            s.handle_deliveries(&mut vec![delivery(&format!("t/{i}"), CoreQoS::AtMostOnce, 0)], t0, &mut gw);
            let [SnMessage::Register(register)] = &transmitted(&mut s)[..] else { panic!("topic {i}") };
            let accepted =
                RegAck { topic_id: register.topic_id, msg_id: register.msg_id, return_code: ReturnCode::Accepted };
            s.handle(SnMessage::RegAck(accepted), t0, &mut gw);
            assert!(matches!(&transmitted(&mut s)[..], [SnMessage::Publish(_)]), "topic {i}");
        }
        let mut again: Vec<_> = (0..TOPICS).map(|i| delivery(&format!("t/{i}"), CoreQoS::AtMostOnce, 0)).collect();
        s.handle_deliveries(&mut again, t0, &mut gw);
        let sent = transmitted(&mut s);
        assert_eq!(sent.len(), TOPICS);
        assert!(sent.iter().all(|m| matches!(m, SnMessage::Publish(_))));
    }

    #[test]
    fn qos0_registrations_run_side_by_side_and_each_topic_keeps_its_order() {
        let mut gw = gateway();
        let t0 = Instant::now();
        let mut s = session(&gw, t0);
        s.handle_connect(&connect(0, true, false), true, t0, &mut gw);
        transmitted(&mut s);
        // "ab" (short form) is ready at once: its QoS 1 message starts the one exchange.
        let mut batch = vec![delivery("ab", CoreQoS::AtLeastOnce, SHORT)];
        batch.extend((0..10).map(|i| delivery(&format!("t/{i}"), CoreQoS::AtMostOnce, 0)));
        batch.push(delivery("t/0", CoreQoS::AtMostOnce, 0));
        s.handle_deliveries(&mut batch, t0, &mut gw);
        let sent = transmitted(&mut s);
        let [SnMessage::Publish(exchange), registers @ ..] = &sent[..] else { panic!("{sent:?}") };
        assert_eq!(exchange.qos, QoS::One);
        let registers: Vec<Register> = registers
            .iter()
            .map(|m| match m {
                SnMessage::Register(r) => r.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        let names: Vec<&str> = registers.iter().map(|r| &*r.topic_name).collect();
        assert_eq!(names, (0..MAX_REGISTRATIONS).map(|i| format!("t/{i}")).collect::<Vec<_>>());
        // t/0's two messages go out together, in order, beside the unacknowledged exchange;
        // the freed slot registers the next topic.
        let first = &registers[0];
        s.handle(SnMessage::RegAck(RegAck { return_code: ReturnCode::Accepted, ..regack(first) }), t0, &mut gw);
        let sent = transmitted(&mut s);
        let published: Vec<PublishTopic> =
            sent.iter().filter_map(|m| if let SnMessage::Publish(p) = m { Some(p.topic) } else { None }).collect();
        assert_eq!(published, [PublishTopic::Normal(first.topic_id); 2]);
        let [next] = &sent
            .iter()
            .filter_map(|m| if let SnMessage::Register(r) = m { Some(r) } else { None })
            .collect::<Vec<_>>()[..]
        else {
            panic!("{sent:?}")
        };
        assert_eq!(next.topic_name, format!("t/{MAX_REGISTRATIONS}"));
        // A registration nobody answers is sent again, then the client is lost.
        let mut at = t0;
        for _ in 0..gw.limits.retransmit_retries {
            at += gw.limits.retransmit_timeout;
            s.handle_timeout(at);
            assert!(transmitted(&mut s).iter().any(|m| matches!(m, SnMessage::Register(r) if r.msg_id == next.msg_id)));
        }
        s.handle_timeout(at + gw.limits.retransmit_timeout);
        assert!(events(&mut s).contains(&Event::Ended { reason: CloseReason::KeepAliveTimeout, keep: false }));
    }

    fn regack(register: &Register) -> RegAck {
        RegAck { topic_id: register.topic_id, msg_id: register.msg_id, return_code: ReturnCode::NotSupported }
    }
}
