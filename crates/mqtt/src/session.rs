//! The MQTT session state machine for a connected client, driven without I/O: bytes in through
//! [`MqttSession::decode`] and [`MqttSession::handle`], deliveries in through
//! [`MqttSession::deliver`], bytes out through [`MqttSession::output`]. Time is passed in.
//! The core's connection driver owns the socket and the timer (see connection.rs).

use std::num::{NonZeroU16, NonZeroU32};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use mqtt_codec::{CodecError, Packet, PacketCodec, Version};
use rmqtt_codec::types::{Publish, QoS as WireQoS};
use rmqtt_codec::v5::{
    self, DisconnectReasonCode as Dis, PublishAck2Reason, PublishAckReason, RetainHandling, SubscribeAckReason,
    UnsubscribeAckReason,
};
use tolk_core::access::SubscribeError;
use tolk_core::drive::Egress;
use tolk_core::store::StoreError;
use tolk_core::{
    AckLine, ByteString, CloseReason, Delivery, DropReason, LazyDeque, Metrics, Origin, PublishOutcome, QoS,
    QueueError, SharedError, SubscriptionOptions, topic,
};

use crate::alias::{OutboundTopic, TopicAliases};
use crate::config::MqttConfig;
use crate::connect::{self, ConnectPlan};
use crate::inflight::Stage;
use crate::kept;
use crate::state::SessionState;
use crate::subscriptions::{FilterKind, SubEntry, parse_filter};
use crate::translate::{self, qos_in};
use crate::will::Will;

/// Why the session must end its connection, and what to tell the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Close {
    /// The metric label.
    pub reason: CloseReason,
    /// MQTT 5 DISCONNECT reason code to send first (3.1.1 just closes).
    pub code: Option<Dis>,
    /// For the log line.
    pub detail: String,
}

impl Close {
    /// The client broke the protocol.
    pub fn protocol(code: Dis, detail: impl Into<String>) -> Close {
        Close { reason: CloseReason::ProtocolError, code: Some(code), detail: detail.into() }
    }

    /// The client exceeded a limit.
    pub fn limit(code: Dis, detail: impl Into<String>) -> Close {
        Close { reason: CloseReason::LimitExceeded, code: Some(code), detail: detail.into() }
    }
}

impl From<CodecError> for Close {
    fn from(e: CodecError) -> Close {
        let reason = match e {
            CodecError::TooLarge { .. } => CloseReason::LimitExceeded,
            _ => CloseReason::ProtocolError,
        };
        Close { reason, code: Some(e.reason_code()), detail: e.to_string() }
    }
}

/// What to do after a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep going.
    Continue,
    /// The client sent DISCONNECT; `will` is set for MQTT 5 reason 0x04.
    Disconnect {
        /// Publish the will anyway.
        will: bool,
    },
}

/// One connected client's session.
pub struct MqttSession {
    state: Box<SessionState>,
    codec: PacketCodec,
    out: BytesMut,
    /// Deliveries encoded into `out` and not yet written.
    egress: Egress,
    /// Retained messages for new subscriptions, waiting for window space. Bounded by the
    /// retained store's size. One pointer until the first.
    pending: LazyDeque<Delivery>,
    config: Arc<MqttConfig>,
    metrics: Arc<Metrics>,
    /// Boxed: most clients set no will, and an idle connection should not carry its size.
    will: Option<Box<Will>>,
    /// MQTT-3.14.2-2: a session that connected with expiry 0 may not set one at DISCONNECT.
    connected_with_zero_expiry: bool,
    /// Most QoS 1/2 deliveries in flight (the smaller of ours and the client's Receive
    /// Maximum, which is 16-bit).
    window: u16,
    client_max_packet: Option<NonZeroU32>,
    aliases: TopicAliases,
    /// Seconds (0: off); see [`connect::keep_alive_timeout`].
    keep_alive: u16,
    /// Acknowledgements and releases waiting for the store, in the order their packets came
    /// (MQTT-4.6.0-2).
    awaiting_store: AckLine<Deferred>,
}

/// What waits in line for the store.
enum Deferred {
    /// A PUBACK or PUBREC, until what its PUBLISH left in the store is on disk.
    Ack(DeferredAck),
    /// A PUBREL, until the store has its delivery marked released.
    Release(NonZeroU16),
}

/// A PUBACK or PUBREC held until what its PUBLISH left in the store is on disk.
struct DeferredAck {
    qos: WireQoS,
    /// `None` for QoS 0: nothing to send, but a place in line.
    packet_id: Option<NonZeroU16>,
    reason: PublishAckReason,
}

/// The client is done with `delivery` (acknowledged, or it was dropped): a queue delivery is
/// acknowledged to its queue, a kept one deleted from the store.
fn settle(core: &tolk_core::Session, delivery: &Delivery) {
    if let Some(ack) = &delivery.ack {
        ack.ack();
    }
    core.settled(delivery);
}

impl MqttSession {
    /// A session for an accepted CONNECT. `state` is fresh or resumed.
    pub fn new(
        state: Box<SessionState>,
        codec: PacketCodec,
        plan: &mut ConnectPlan,
        config: Arc<MqttConfig>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let mut awaiting_store = AckLine::default();
        // A resumed session's pending commits were the old connection's to acknowledge.
        awaiting_store.forget(&state.core);
        let window = config.max_inflight.min(plan.client_receive_max).max(1);
        let version = codec.version();
        let (alias_in, alias_out) = match version {
            Version::V5 => (config.topic_alias_maximum, plan.client_alias_max.min(config.topic_alias_maximum)),
            Version::V3 => (0, 0),
        };
        MqttSession {
            connected_with_zero_expiry: state.expiry().is_zero(),
            egress: Egress::new(state.core.protocol()),
            state,
            codec,
            out: BytesMut::new(),
            pending: LazyDeque::default(),
            will: plan.will.take().map(Box::new),
            window,
            client_max_packet: plan.client_max_packet,
            aliases: TopicAliases::new(alias_in, alias_out),
            keep_alive: plan.keep_alive,
            awaiting_store,
            config,
            metrics,
        }
    }

    /// The protocol level.
    pub fn version(&self) -> Version {
        self.codec.version()
    }

    /// The client id.
    pub fn client_id(&self) -> &Arc<str> {
        &self.state.client_id
    }

    /// The session state (for the connection's outbox access).
    pub fn state(&self) -> &SessionState {
        &self.state
    }

    /// Silence after which the client is considered gone.
    pub fn keep_alive_timeout(&self) -> Option<Duration> {
        connect::keep_alive_timeout(self.keep_alive)
    }

    /// Encoded bytes waiting for the socket.
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// `n` bytes of the output were written at `now`: the deliveries they complete are
    /// counted and their latency recorded; QoS 0 queue deliveries are settled.
    pub fn advance_output(&mut self, n: usize, now: Instant) {
        tolk_core::drive::consume_written(&mut self.out, n);
        self.egress.written(n, now, &self.metrics);
    }

    fn send(&mut self, packet: Packet) {
        if let Err(e) = self.codec.encode(packet, &mut self.out) {
            // Only our own control packets come through here; they are small and well formed.
            tracing::warn!(error = %e, "could not encode a control packet");
        }
    }

    /// Writes the CONNACK that accepts the connection.
    pub fn connack(&mut self, plan: &ConnectPlan, session_present: bool) {
        let config = &self.config;
        let ack = v5::ConnectAck {
            session_present,
            session_expiry_interval_secs: plan.expiry_announced,
            receive_max: NonZeroU16::new(config.receive_maximum).unwrap_or(NonZeroU16::MIN),
            max_packet_size: Some(config.max_packet_size_bytes),
            assigned_client_id: plan.assigned.then(|| (*plan.client_id).into()),
            topic_alias_max: config.topic_alias_maximum,
            server_keepalive_sec: plan.server_keep_alive,
            ..Default::default()
        };
        self.send(Packet::ConnectAck(Box::new(ack)));
    }

    /// Writes a DISCONNECT with `code` (MQTT 5 only; 3.1.1 servers just close).
    pub fn disconnect(&mut self, code: Dis) {
        self.send(Packet::Disconnect(v5::Disconnect::new(code)));
    }

    /// After reconnecting to a stored session: sends every unacknowledged PUBLISH again with
    /// DUP set, and PUBREL for QoS 2 flows past PUBREC (MQTT-4.4.0-1), in their original order.
    pub fn resend_inflight(&mut self, now: Instant) {
        let version = self.version();
        let mut packets = Vec::new();
        let mut expired = Vec::new();
        for entry in self.state.outgoing.iter() {
            match &entry.stage {
                Stage::Pubcomp { .. } => packets
                    .push(Packet::PublishRelease(v5::PublishAck2 { packet_id: entry.packet_id, ..Default::default() })),
                Stage::Puback(delivery) | Stage::Pubrec(delivery) => {
                    match translate::outbound(delivery, version, Some(entry.packet_id), true, now) {
                        Some(publish) => packets.push(Packet::Publish(Box::new(publish.to_owned()))),
                        None => expired.push(entry.packet_id),
                    }
                }
            }
        }
        for id in expired {
            let done = self.state.outgoing.puback(id).or_else(|| self.state.outgoing.pubrec_failed(id));
            if let Some(d) = done {
                self.metrics.protocol(self.state.core.protocol()).dropped(DropReason::Expired, 1);
                settle(&self.state.core, &d);
            }
        }
        for p in packets {
            self.send(p);
        }
    }

    /// Takes the next complete packet from the read buffer.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Packet>, Close> {
        Ok(self.codec.decode(buf)?)
    }

    /// Acts on one packet from the client.
    pub fn handle(&mut self, packet: Packet, now: Instant) -> Result<Flow, Close> {
        match packet {
            Packet::Publish(p) => self.on_publish(*p, now)?,
            Packet::PublishAck(a) => {
                if let Some(d) = self.state.outgoing.puback(a.packet_id) {
                    settle(&self.state.core, &d);
                }
            }
            Packet::PublishReceived(a) => {
                if u8::from(a.reason_code) >= 0x80 {
                    if let Some(d) = self.state.outgoing.pubrec_failed(a.packet_id) {
                        settle(&self.state.core, &d);
                    }
                } else {
                    self.on_pubrec(a.packet_id);
                }
            }
            Packet::PublishComplete(a) => {
                if let Some(stored) = self.state.outgoing.pubcomp(a.packet_id)
                    && let Some(keeper) = self.state.core.keeper()
                {
                    keeper.forget(stored);
                }
            }
            Packet::PublishRelease(a) => {
                let reason_code = if self.state.incoming.release(a.packet_id) {
                    PublishAck2Reason::Success
                } else {
                    PublishAck2Reason::PacketIdNotFound
                };
                self.send(Packet::PublishComplete(v5::PublishAck2 {
                    packet_id: a.packet_id,
                    reason_code,
                    ..Default::default()
                }));
            }
            Packet::Subscribe(s) => self.on_subscribe(s, now)?,
            Packet::Unsubscribe(u) => self.on_unsubscribe(u),
            Packet::PingRequest => self.send(Packet::PingResponse),
            Packet::Disconnect(d) => return self.on_disconnect(d),
            Packet::Connect(_) => return Err(Close::protocol(Dis::ProtocolError, "second CONNECT")),
            Packet::Auth(_) => return Err(Close::protocol(Dis::ProtocolError, "AUTH without enhanced authentication")),
            Packet::ConnectAck(_) | Packet::SubscribeAck(_) | Packet::UnsubscribeAck(_) | Packet::PingResponse => {
                return Err(Close::protocol(Dis::ProtocolError, "client sent a server-only packet"));
            }
        }
        Ok(Flow::Continue)
    }

    /// PUBREC for a QoS 2 delivery: its queue, if any, is done with it. A kept delivery is
    /// marked released in the store before the PUBREL goes, so that a restart never sends
    /// the message again once the client may have completed the flow (MQTT 3.1.1 §4.3.3).
    fn on_pubrec(&mut self, id: NonZeroU16) {
        let Some(delivery) = self.state.outgoing.pubrec(id) else {
            return self.send_release(id, PublishAck2Reason::PacketIdNotFound);
        };
        if let Some(ack) = &delivery.ack {
            ack.ack();
        }
        let kept = match self.state.core.keeper() {
            Some(keeper) if delivery.stored != 0 => {
                self.state.core.await_durable(keeper.release(delivery.stored));
                true
            }
            _ => false,
        };
        self.place(kept, Deferred::Release(id));
    }

    fn on_disconnect(&mut self, d: v5::Disconnect) -> Result<Flow, Close> {
        if let Some(secs) = d.session_expiry_interval_secs {
            if self.connected_with_zero_expiry && secs > 0 {
                // MQTT-3.14.2-2.
                return Err(Close::protocol(
                    Dis::ProtocolError,
                    "DISCONNECT sets a session expiry after CONNECT had none",
                ));
            }
            self.state.set_expiry(Duration::from_secs(u64::from(secs)).min(self.config.max_session_expiry));
        }
        Ok(Flow::Disconnect { will: d.reason_code == Dis::DisconnectWithWillMessage })
    }

    fn on_publish(&mut self, mut publish: Publish, now: Instant) -> Result<(), Close> {
        let version = self.version();
        let alias = publish.properties.as_ref().and_then(|p| p.topic_alias);
        let topic = match version {
            Version::V5 => self
                .aliases
                .resolve(&publish.topic, alias)
                .map_err(|e| Close::protocol(e.reason_code(), e.to_string()))?,
            // Moved, not shared: the message takes the frame's handle on its bytes.
            Version::V3 => std::mem::take(&mut publish.topic),
        };
        if let Err(e) = topic::validate_name(&topic) {
            // MQTT-3.3.2-2: wildcards are not allowed in a PUBLISH topic.
            return Err(Close::protocol(Dis::TopicNameInvalid, format!("PUBLISH topic {topic:?}: {e}")));
        }
        let packet_id = publish.packet_id;
        if publish.qos == WireQoS::ExactlyOnce
            && let Some(id) = packet_id
        {
            if !self.state.incoming.insert(id) {
                // A resend of a message already routed: acknowledge again, route nothing.
                self.send(Packet::PublishReceived(v5::PublishAck { packet_id: id, ..Default::default() }));
                return Ok(());
            }
            if self.state.incoming.len() > usize::from(self.config.receive_maximum) {
                return Err(Close::limit(
                    Dis::ReceiveMaximumExceeded,
                    "more QoS 2 messages in flight than Receive Maximum",
                ));
            }
        }
        let utf8_declared = publish.properties.as_ref().is_some_and(|p| p.is_utf8_payload);
        if utf8_declared && std::str::from_utf8(&publish.payload).is_err() {
            // MQTT 5 §3.3.2.3.2: the server may refuse a payload that is not what it claims.
            tracing::info!(%topic, "payload declared UTF-8 is not; not routed");
            if let Some(id) = packet_id {
                self.state.incoming.release(id);
            }
            self.ack_publish(publish.qos, packet_id, PublishAckReason::PayloadFormatInvalid);
            return Ok(());
        }
        let origin = Origin {
            protocol: self.state.core.protocol(),
            session: self.state.core.id(),
            client_id: self.state.client_id.clone(),
        };
        let message = translate::inbound(&mut publish, topic, origin, now);
        self.metrics.protocol(self.state.core.protocol()).messages_in.fetch_add(1, Ordering::Relaxed);
        let outcome = self.state.core.publish(Arc::new(message));
        let reason = match outcome {
            // Refused by the access list: MQTT 5 says so (0x87); 3.1.1 cannot, so the message is
            // acknowledged and dropped, as Mosquitto does. Counted either way.
            PublishOutcome { not_authorized: true, .. } => {
                tracing::info!(client_id = %self.state.client_id, "publish not authorized");
                if let Some(id) = packet_id {
                    self.state.incoming.release(id);
                }
                let reason =
                    if version == Version::V5 { PublishAckReason::NotAuthorized } else { PublishAckReason::Success };
                self.ack_publish(publish.qos, packet_id, reason);
                return Ok(());
            }
            // MQTT 5 can refuse one message and carry on (§3.4.2.1, 0x97 Quota exceeded).
            _ if outcome.refused > 0 && version == Version::V5 => PublishAckReason::QuotaExceeded,
            // MQTT 3.1.1 cannot: without a PUBACK, the client keeps the message and sends it
            // again after reconnecting, when the broker may have room.
            PublishOutcome { memory_full: true, .. } if publish.qos != WireQoS::AtMostOnce => {
                if let Some(id) = packet_id {
                    self.state.incoming.release(id);
                }
                return Err(Close {
                    reason: CloseReason::MemoryFull,
                    code: Some(Dis::QuotaExceeded),
                    detail: "the broker's memory budget is used up; publish again later".into(),
                });
            }
            _ if outcome.matched == 0 => PublishAckReason::NoMatchingSubscribers,
            _ => PublishAckReason::Success,
        };
        if reason == PublishAckReason::QuotaExceeded
            && let Some(id) = packet_id
        {
            // Refused, so not routed: a resend of this QoS 2 id must be routed afresh.
            self.state.incoming.release(id);
        }
        // Acknowledged once the store has it (see `handle_durable`).
        self.place(outcome.durable, Deferred::Ack(DeferredAck { qos: publish.qos, packet_id, reason }));
        Ok(())
    }

    /// Sends a PUBACK or PUBREC now, or, while earlier ones wait for the store, in line behind
    /// them: MQTT acknowledges QoS 1 publishes in the order they came.
    fn ack_publish(&mut self, qos: WireQoS, packet_id: Option<NonZeroU16>, reason: PublishAckReason) {
        if packet_id.is_some() {
            self.place(false, Deferred::Ack(DeferredAck { qos, packet_id, reason }));
        }
    }

    /// Sends `what` now, or once its commit (with `stored`) and those before it are durable.
    fn place(&mut self, stored: bool, what: Deferred) {
        match self.awaiting_store.place(&self.state.core, stored, what) {
            Some(Deferred::Ack(ack)) => self.send_ack(ack.qos, ack.packet_id, ack.reason),
            Some(Deferred::Release(id)) => self.send_release(id, PublishAck2Reason::Success),
            None => {}
        }
    }

    fn send_release(&mut self, packet_id: NonZeroU16, reason_code: PublishAck2Reason) {
        self.send(Packet::PublishRelease(v5::PublishAck2 { packet_id, reason_code, ..Default::default() }));
    }

    fn send_ack(&mut self, qos: WireQoS, packet_id: Option<NonZeroU16>, reason_code: PublishAckReason) {
        let Some(packet_id) = packet_id else { return };
        let ack = v5::PublishAck { packet_id, reason_code, ..Default::default() };
        match qos {
            WireQoS::AtMostOnce => {}
            WireQoS::AtLeastOnce => self.send(Packet::PublishAck(ack)),
            WireQoS::ExactlyOnce => self.send(Packet::PublishReceived(ack)),
        }
    }

    /// The oldest store commit of this session's publishes ended: its acknowledgement goes
    /// out, or, when the store could not keep the message, the refusal. MQTT 5 refuses one
    /// message (0x97 Quota exceeded when the store is full, 0x80 otherwise); MQTT 3.1.1 cannot,
    /// so the connection closes and the client sends the message again after reconnecting.
    pub fn handle_durable(&mut self, result: Result<(), StoreError>) -> Result<(), Close> {
        let ack = match self.awaiting_store.settled() {
            None => return Ok(()),
            Some(Deferred::Ack(ack)) => ack,
            Some(Deferred::Release(id)) => {
                if let Err(error) = result {
                    // The client has the message; the flow goes on. Only a restart before
                    // PUBCOMP would send it again.
                    tracing::warn!(client_id = %self.state.client_id, %error, "a release could not be stored");
                }
                self.send_release(id, PublishAck2Reason::Success);
                return Ok(());
            }
        };
        let Err(error) = result else {
            self.send_ack(ack.qos, ack.packet_id, ack.reason);
            return Ok(());
        };
        tracing::warn!(client_id = %self.state.client_id, %error, "a publish could not be stored");
        if ack.qos == WireQoS::ExactlyOnce
            && let Some(id) = ack.packet_id
        {
            self.state.incoming.release(id);
        }
        if ack.packet_id.is_none() {
            return Ok(());
        }
        if self.version() == Version::V5 {
            let reason = if error == StoreError::Full {
                PublishAckReason::QuotaExceeded
            } else {
                PublishAckReason::UnspecifiedError
            };
            self.send_ack(ack.qos, ack.packet_id, reason);
            return Ok(());
        }
        Err(Close {
            reason: CloseReason::MemoryFull,
            code: Some(Dis::QuotaExceeded),
            detail: format!("a published message could not be stored ({error}); publish again later"),
        })
    }

    fn on_subscribe(&mut self, subscribe: v5::Subscribe, now: Instant) -> Result<(), Close> {
        let id = subscribe.id.map(|n| n.get());
        let mut status = Vec::with_capacity(subscribe.topic_filters.len());
        for (filter, options) in &subscribe.topic_filters {
            status.push(self.subscribe_one(filter, *options, id, now)?);
        }
        drop(kept::save(&self.state, None, self.will.as_deref().map(|w| (w, None))));
        self.send(Packet::SubscribeAck(v5::SubscribeAck {
            packet_id: subscribe.packet_id,
            properties: Vec::new(),
            reason_string: None,
            status,
        }));
        Ok(())
    }

    fn subscribe_one(
        &mut self,
        filter: &str,
        options: v5::SubscriptionOptions,
        id: Option<u32>,
        now: Instant,
    ) -> Result<SubscribeAckReason, Close> {
        let Ok(kind) = parse_filter(filter) else {
            tracing::info!(filter, "invalid topic filter refused");
            return Ok(SubscribeAckReason::TopicFilterInvalid);
        };
        let existing = self.state.subs.get(filter).cloned();
        if existing.is_none() && self.state.subs.len() >= self.config.max_subscriptions_per_session {
            return Ok(SubscribeAckReason::QuotaExceeded);
        }
        let max_qos = qos_in(options.qos);
        let granted = match options.qos {
            WireQoS::AtMostOnce => SubscribeAckReason::GrantedQos0,
            WireQoS::AtLeastOnce => SubscribeAckReason::GrantedQos1,
            WireQoS::ExactlyOnce => SubscribeAckReason::GrantedQos2,
        };
        match kind {
            FilterKind::Plain(plain) => {
                let core_options = SubscriptionOptions {
                    max_qos,
                    no_local: options.no_local,
                    retain_as_published: options.retain_as_published,
                    subscription_id: id,
                    ..SubscriptionOptions::default()
                };
                let replaced = match self.state.core.subscribe(plain, 0, core_options) {
                    Ok(replaced) => replaced,
                    Err(SubscribeError::NotAuthorized(_)) => {
                        tracing::info!(filter, client_id = %self.state.client_id, "subscription not authorized");
                        return Ok(SubscribeAckReason::NotAuthorized);
                    }
                    Err(SubscribeError::Topic(_)) => return Ok(SubscribeAckReason::TopicFilterInvalid),
                };
                self.state.subs.insert(filter, SubEntry { options, id, shared_tag: None });
                let send_retained = match options.retain_handling {
                    RetainHandling::AtSubscribe => true,
                    RetainHandling::AtSubscribeNew => !replaced,
                    RetainHandling::NoAtSubscribe => false,
                };
                if send_retained {
                    for message in self.state.core.retained(plain) {
                        if options.no_local && message.origin.session == self.state.core.id() {
                            continue;
                        }
                        self.pending
                            .push_back(Delivery { subscription_id: id, ..Delivery::retained(message, max_qos, now) });
                    }
                }
            }
            FilterKind::Shared { group, filter: inner } => {
                if options.no_local {
                    // MQTT-3.8.3-4.
                    return Err(Close::protocol(Dis::ProtocolError, "no-local on a shared subscription"));
                }
                let tag = match existing.and_then(|e| e.shared_tag) {
                    Some(tag) => {
                        self.state.core.cancel(tag);
                        tag
                    }
                    None => self.state.subs.next_tag(),
                };
                if let Err(e) = self.state.core.join_shared(group, inner, usize::from(self.window), max_qos, tag) {
                    tracing::info!(filter, error = %e, "shared subscription refused");
                    self.state.subs.remove(filter);
                    return Ok(match e {
                        SharedError::Subscribe(SubscribeError::NotAuthorized(_))
                        | SharedError::Queue(QueueError::NotAuthorized(_)) => SubscribeAckReason::NotAuthorized,
                        _ => SubscribeAckReason::UnspecifiedError,
                    });
                }
                self.state.subs.insert(filter, SubEntry { options, id, shared_tag: Some(tag) });
            }
        }
        Ok(granted)
    }

    fn on_unsubscribe(&mut self, unsubscribe: v5::Unsubscribe) {
        let mut status = Vec::with_capacity(unsubscribe.topic_filters.len());
        for filter in &unsubscribe.topic_filters {
            let reason = match self.state.subs.remove(filter) {
                None => UnsubscribeAckReason::NoSubscriptionExisted,
                Some(entry) => {
                    match entry.shared_tag {
                        Some(tag) => {
                            self.state.core.cancel(tag);
                        }
                        None => {
                            self.state.core.unsubscribe(filter, 0);
                        }
                    }
                    UnsubscribeAckReason::Success
                }
            };
            status.push(reason);
        }
        drop(kept::save(&self.state, None, self.will.as_deref().map(|w| (w, None))));
        self.send(Packet::UnsubscribeAck(v5::UnsubscribeAck {
            packet_id: unsubscribe.packet_id,
            properties: Vec::new(),
            reason_string: None,
            status,
        }));
    }

    /// How many more QoS 1/2 deliveries the client can take now.
    pub fn free_window(&self) -> usize {
        usize::from(self.window).saturating_sub(self.state.outgoing.len())
    }

    /// Whether retained messages for new subscriptions are waiting.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Encodes up to `max` waiting retained messages while the window allows. Bounded so that
    /// a subscription matching 100,000 retained messages is sent in rounds, each written
    /// before the next is encoded: the task yields between them, and other clients on the
    /// same worker thread do not wait for the whole store.
    pub fn flush_pending(&mut self, max: usize, now: Instant) {
        for _ in 0..max {
            if self.free_window() == 0 {
                break;
            }
            let Some(d) = self.pending.pop_front() else { break };
            if !self.deliver(d, now, now) {
                break;
            }
        }
    }

    /// Encodes one delivery taken from the outbox at `taken_at`. Expired messages and messages
    /// larger than the client's Maximum Packet Size are dropped (counted) and settled as if
    /// sent (MQTT-3.1.2-25). Returns `false` when the delivery had to wait (no packet
    /// identifier free) and was put back in front of the pending ones.
    pub fn deliver(&mut self, mut delivery: Delivery, taken_at: Instant, now: Instant) -> bool {
        let counters = self.metrics.protocol(self.state.core.protocol());
        if delivery.ack.is_some() && delivery.subscription_id.is_none() {
            delivery.subscription_id = self.state.subs.id_for_tag(delivery.tag);
        }
        let packet_id = if delivery.qos > QoS::AtMostOnce {
            match self.state.outgoing.allocate_id(&delivery) {
                Some(id) => Some(id),
                None => {
                    self.pending.push_front(delivery);
                    return false;
                }
            }
        } else {
            None
        };
        // A kept delivery read back after a restart may have been sent under this id before.
        let dup = delivery.redelivered && delivery.stored != 0;
        let aliased = ByteString::new();
        let Some(mut publish) = translate::outbound(&delivery, self.version(), packet_id, dup, now) else {
            counters.dropped(DropReason::Expired, 1);
            settle(&self.state.core, &delivery);
            return true;
        };
        let topic = &delivery.message.topic;
        let mut defined = false;
        if let Some(props) = publish.properties.as_mut() {
            match self.aliases.assign(topic) {
                OutboundTopic::Plain => {}
                OutboundTopic::Define(alias) => {
                    props.topic_alias = Some(alias);
                    defined = true;
                }
                OutboundTopic::Use(alias) => {
                    props.topic_alias = Some(alias);
                    publish.topic = &aliased;
                }
            }
        }
        let start = self.out.len();
        let encoded = self.codec.encode_publish(publish, &mut self.out);
        let too_big = match (&encoded, self.client_max_packet) {
            (Ok(size), Some(max)) => *size as u64 > u64::from(max.get()),
            (Ok(_), None) => false,
            (Err(_), _) => true,
        };
        if too_big {
            self.out.truncate(start);
            if defined {
                self.aliases.forget(topic);
            }
            tracing::debug!(%topic, "message larger than the client's maximum packet size dropped");
            counters.dropped(DropReason::Untranslatable, 1);
            settle(&self.state.core, &delivery);
            return true;
        }
        match packet_id {
            Some(id) => {
                self.egress.record(self.out.len(), &delivery, taken_at, None);
                let stage =
                    if delivery.qos == QoS::AtLeastOnce { Stage::Puback(delivery) } else { Stage::Pubrec(delivery) };
                self.state.outgoing.push(id, stage);
            }
            // QoS 0: a queue delivery is settled once written.
            None => self.egress.record(self.out.len(), &delivery, taken_at, delivery.ack.clone()),
        }
        true
    }

    /// Ends the connection's part: returns the session state (with deliveries that were never
    /// written put back for a persistent session) and the will, if one should still be published.
    /// Deliveries encoded but never written: QoS 1/2 ones stay in the outgoing flows and are
    /// resent on reconnect; QoS 0 ones are lost with the connection, and queue deliveries among
    /// them go back to their group (see [`Egress`]).
    pub fn finish(mut self, will_wanted: bool) -> (Box<SessionState>, Option<Will>) {
        let pending: Vec<Delivery> = self.pending.drain().collect();
        if !self.state.expiry().is_zero() {
            self.state.detach(pending);
        }
        let will = if will_wanted { self.will.take().map(|w| *w) } else { None };
        (self.state, will)
    }
}
