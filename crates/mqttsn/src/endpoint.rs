//! The gateway's one task that owns the UDP socket (quinn's endpoint/connection split): it
//! decodes each datagram, routes it to the session of its sender (by address; by client id for
//! CONNECT), answers what needs no session (SEARCHGW, QoS −1 PUBLISH, messages from unknown
//! peers), sends what the sessions produce, runs their timers, feeds them deliveries from their
//! core outboxes (`outbox_watch.rs`), and sends ADVERTISE.
//!
//! Against reflection: a datagram from an address without a session there is answered with at
//! most one small message (GWINFO, CONNACK, DISCONNECT), never more than 3 × its own size, and a
//! session sends deliveries only to an address that has proved to be its client's (see
//! `ClientSession`). A PINGREQ naming a sleeping client is honoured only from that client's own
//! address, so nobody can have its buffer flushed elsewhere.
//!
//! Sessions never touch the socket or the clock; everything here is about addresses, keys,
//! timers and bytes.

use std::collections::HashMap;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use foldhash::fast::RandomState;
use mqttsn_codec::{
    Advertise, Connect, GwInfo, Message as SnMessage, PROTOCOL_ID, Publish, PublishTopic, QoS, ReturnCode,
};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tolk_core::access::Rights;
use tolk_core::auth::Credentials;
use tolk_core::store::StoreError;
use tolk_core::store::load_sessions;
use tolk_core::{CloseReason, Delivery, Denial, Overflowed, Protocol, Session};
use tracing::{debug, info, warn};

use crate::addresses::Addresses;
use crate::config::AdvertiseConfig;
use crate::deadlines::{Deadlines, Filed};
use crate::gateway::Gateway;
use crate::outbox_watch::{ClientKey, OutboxWatch, Ready};
use crate::persist::Persister;
use crate::predefined::PredefinedCatalog;
use crate::session::{ClientSession, Event};
use crate::stats::GatewayStats;
use crate::throttle::LogThrottle;
use crate::translate::{core_message, inbound_topic};

/// Longest client id accepted. The spec says 1-23 characters (§5.4.4), but clients in the field
/// send longer ones (MAC addresses with a prefix, UUIDs); this bound only keeps memory in check.
pub(crate) const MAX_CLIENT_ID_BYTES: usize = 128;

/// Batches one client is given in one turn before the others and the socket are served.
const BATCHES_PER_TURN: usize = 4;

/// Store commits ended and waiting to be handled. Small: a commit's task waits for room.
const STORED_CHANNEL: usize = 64;

/// A store commit that a client's answers wait for ended (see `stored_acks.rs`).
struct Stored {
    key: ClientKey,
    seq: u64,
    result: Result<(), StoreError>,
}

/// What the endpoint needs besides the shared gateway state.
pub(crate) struct EndpointSettings {
    /// GWINFO / ADVERTISE gateway id.
    pub(crate) gateway_id: u8,
    /// Most sessions.
    pub(crate) max_clients: usize,
    /// Most sessions at one IP address.
    pub(crate) max_clients_per_address: usize,
    /// Largest datagram accepted.
    pub(crate) max_message_size: usize,
    /// ADVERTISE settings.
    pub(crate) advertise: AdvertiseConfig,
}

struct Entry {
    session: ClientSession,
    /// Where the client is now; `None` while offline.
    addr: Option<SocketAddr>,
    /// Watches the client's core outbox while it is connected.
    watch: Option<OutboxWatch>,
    /// The deadline that counts for this entry in the endpoint's [`Deadlines`].
    filed: Filed,
}

/// One input for the endpoint loop.
enum Input {
    Shutdown,
    Datagram(usize, SocketAddr),
    RecvError(io::Error),
    Stored(Stored),
    Ready,
    Timer,
    Advertise,
}

/// The endpoint task's state.
pub(crate) struct Endpoint {
    socket: UdpSocket,
    gw: Gateway,
    catalog: PredefinedCatalog,
    settings: EndpointSettings,
    /// Boxed: an entry is about 900 bytes, and a table sized for 10,000 clients keeps room for
    /// 16,384 of them, so inline entries cost half as much again as the clients themselves.
    clients: HashMap<ClientKey, Box<Entry>, RandomState>,
    addresses: Addresses,
    by_id: HashMap<Arc<str>, ClientKey, RandomState>,
    timers: Deadlines,
    next_key: ClientKey,
    stored_tx: mpsc::Sender<Stored>,
    stored_rx: mpsc::Receiver<Stored>,
    /// Clients whose outbox woke them.
    ready: Arc<Ready>,
    /// The keys taken from `ready`, and the deliveries taken from one outbox: kept between
    /// rounds so that neither is allocated per wake-up.
    ready_keys: Vec<ClientKey>,
    batch: Vec<Delivery>,
    /// What a session produced, between it and the socket; kept for the same reason.
    outgoing: Vec<SnMessage>,
    /// Origin of QoS −1 messages from peers without a connection.
    anonymous: Session,
    anonymous_client_id: Arc<str>,
    persister: Persister,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    out: BytesMut,
    /// CONNECTs refused for lack of room, logged once per period.
    refusal_log: LogThrottle,
    /// Bad datagrams from clients with a session, logged once per period.
    bad_input_log: LogThrottle,
}

/// Why a CONNECT gets CONNACK 0x01 "rejected: congestion".
#[derive(Debug, Clone, Copy)]
enum Full {
    /// `max_clients` sessions, none offline.
    Gateway,
    /// `max_clients_per_address` sessions at the sender's IP address.
    Address,
}

fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl Endpoint {
    /// An endpoint on a bound socket.
    pub(crate) fn new(
        socket: UdpSocket,
        gw: Gateway,
        catalog: PredefinedCatalog,
        settings: EndpointSettings,
        persister: Persister,
        shutdown: CancellationToken,
        tracker: TaskTracker,
    ) -> Self {
        let (stored_tx, stored_rx) = mpsc::channel(STORED_CHANNEL);
        let mut anonymous = gw.router.open_session(Protocol::MqttSn);
        anonymous.restrict(gw.auth.access(None, None));
        Endpoint {
            socket,
            gw,
            catalog,
            settings,
            clients: HashMap::default(),
            addresses: Addresses::default(),
            by_id: HashMap::default(),
            timers: Deadlines::default(),
            next_key: 1,
            stored_tx,
            stored_rx,
            ready: Arc::default(),
            ready_keys: Vec::new(),
            batch: Vec::new(),
            outgoing: Vec::new(),
            anonymous,
            anonymous_client_id: Arc::from(""),
            persister,
            shutdown,
            tracker,
            out: BytesMut::with_capacity(1024),
            refusal_log: LogThrottle::default(),
            bad_input_log: LogThrottle::default(),
        }
    }

    /// Runs until broker shutdown, then says goodbye to every connected client.
    pub(crate) async fn run(mut self) {
        self.restore(now());
        // One byte more than the limit, so that an oversized datagram is recognisable.
        let mut buf = vec![0u8; self.settings.max_message_size + 1];
        let mut advertise = self.settings.advertise.enabled.then(|| {
            let mut interval = tokio::time::interval(self.settings.advertise.period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            interval
        });
        loop {
            let deadline = self.timers.earliest().map(tokio::time::Instant::from_std);
            let input = tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => Input::Shutdown,
                Some(stored) = self.stored_rx.recv() => Input::Stored(stored),
                _ = sleep_until(deadline), if deadline.is_some() => Input::Timer,
                _ = tick(&mut advertise), if advertise.is_some() => Input::Advertise,
                received = self.socket.recv_from(&mut buf) => match received {
                    Ok((len, peer)) => Input::Datagram(len, peer),
                    Err(e) => Input::RecvError(e),
                },
                // After the socket: deliveries pushed while datagrams keep coming are taken in
                // batches once the socket is drained (or tokio's budget makes it yield), as a
                // task per client did when it ran after the endpoint.
                () = poll_fn(|cx| self.ready.poll_take(cx, &mut self.ready_keys)) => Input::Ready,
            };
            match input {
                Input::Shutdown => break,
                Input::Datagram(len, peer) => {
                    let datagram = buf.get(..len).unwrap_or_default();
                    self.on_datagram(datagram, peer, now()).await;
                }
                Input::RecvError(e) => {
                    // Linux reports ICMP errors of earlier sends here; nothing to do but go on.
                    debug!(error = %e, "MQTT-SN receive failed");
                }
                Input::Stored(stored) => self.on_stored(stored).await,
                Input::Ready => self.on_ready().await,
                Input::Timer => self.on_timers(now()).await,
                Input::Advertise => self.advertise().await,
            }
            self.persister.publish(&self.gw.registry);
        }
        self.shutdown_all().await;
        self.persister.publish(&self.gw.registry);
    }

    async fn on_datagram(&mut self, datagram: &[u8], peer: SocketAddr, now: Instant) {
        let known = self.addresses.get(peer).is_some();
        if datagram.len() > self.settings.max_message_size {
            self.gw.count_bad_input(|stats| &stats.malformed);
            self.log_bad(known, peer, "datagram larger than max_message_size_bytes dropped", now);
            return;
        }
        let message = match mqttsn_codec::decode_bytes(Bytes::copy_from_slice(datagram)) {
            Ok(message) => message,
            Err(e) => {
                self.gw.count_bad_input(|stats| &stats.malformed);
                self.log_bad(known, peer, &format!("malformed datagram dropped: {e}"), now);
                return;
            }
        };
        match message {
            SnMessage::SearchGw { .. } => {
                // §6.1: answered with GWINFO; sent to the searcher rather than broadcast.
                let gwinfo = SnMessage::GwInfo(GwInfo { gw_id: self.settings.gateway_id, gw_add: None });
                self.send(peer, &gwinfo).await;
            }
            // Other gateways announcing themselves on a shared network.
            SnMessage::Advertise(_) | SnMessage::GwInfo(_) => {}
            SnMessage::Encapsulated(_) => {
                self.gw.count_bad_input(|stats| &stats.unsupported);
                self.log_bad(known, peer, "forwarder encapsulation (§5.5) is not supported: dropped", now);
            }
            SnMessage::Connect(connect) => self.on_connect(peer, connect, now).await,
            SnMessage::Publish(publish) if publish.qos == QoS::MinusOne && !known => {
                self.publish_anonymous(peer, publish, now);
            }
            // §6.14: a sleeping client wakes up with a PINGREQ carrying its client id. Only from
            // its own address: from anywhere else, whoever names it would get its buffer (and
            // the gateway would reflect it to any forged source address). A client that has
            // moved gets DISCONNECT and connects again.
            SnMessage::PingReq { client_id: Some(ref client_id) } if !self.is_at(peer, client_id) => {
                self.not_connected(peer, message).await;
            }
            other => match self.addresses.get(peer) {
                Some(key) => {
                    if let Some(entry) = self.clients.get_mut(&key) {
                        entry.session.handle(other, now, &mut self.gw);
                    }
                    self.flush(key).await;
                }
                None => self.not_connected(peer, other).await,
            },
        }
    }

    /// A message that needs a session from a peer that has none: §5.4.21 has the gateway answer
    /// DISCONNECT when it "cannot map a received message to a client", so the client connects
    /// again. A DISCONNECT is answered too (its first answer may have been lost).
    async fn not_connected(&mut self, peer: SocketAddr, message: SnMessage) {
        if !matches!(message, SnMessage::Disconnect { .. }) {
            self.gw.count_bad_input(|stats| &stats.not_connected);
            debug!(%peer, msg_type = ?message.msg_type(), "message from a peer without a connection: answered with DISCONNECT");
        }
        self.send(peer, &SnMessage::Disconnect { duration: None }).await;
    }

    /// QoS −1 (§6.8): no connection; only pre-defined ids (global table) and short names.
    fn publish_anonymous(&mut self, peer: SocketAddr, publish: Publish, now: Instant) {
        let topic = match publish.topic {
            PublishTopic::Normal(_) => None,
            other => inbound_topic(other, self.catalog.global(), &self.gw.registry),
        };
        let Some(topic) = topic else {
            self.gw.count_bad_input(|stats| &stats.invalid_topic_id);
            debug!(%peer, topic = ?publish.topic, "QoS -1 PUBLISH to an unknown pre-defined id, invalid short name or registered id: dropped");
            return;
        };
        let anonymous = Credentials {
            protocol: Protocol::MqttSn,
            username: None,
            password: None,
            client_id: None,
            peer,
            proven: false,
        };
        if self.gw.auth.authenticate(&anonymous).is_err() {
            // Anonymous clients are not allowed, and a QoS −1 publisher has no client id to map
            // to a user: refused like a publish the access list denies.
            self.gw.router.metrics().protocol(Protocol::MqttSn).denied(Denial::Publish);
            debug!(%peer, "QoS -1 PUBLISH dropped: anonymous clients are not allowed");
            return;
        }
        let message = core_message(
            &topic,
            publish.data,
            QoS::MinusOne,
            publish.retain,
            self.anonymous.id(),
            &self.anonymous_client_id,
            now,
        );
        self.anonymous.publish(Arc::new(message));
        self.gw.count_in();
    }

    async fn on_connect(&mut self, peer: SocketAddr, connect: Connect, now: Instant) {
        let id_len = connect.client_id.len();
        if connect.protocol_id != PROTOCOL_ID || id_len == 0 || id_len > MAX_CLIENT_ID_BYTES {
            let known = self.addresses.get(peer).is_some();
            let what = format!(
                "CONNECT refused: protocol id {} (not 1), or client id {:?} not 1 to {MAX_CLIENT_ID_BYTES} bytes",
                connect.protocol_id, connect.client_id
            );
            self.log_bad(known, peer, &what, now);
            self.gw.count_bad_input(|stats| &stats.refused);
            self.send(peer, &SnMessage::ConnAck { return_code: ReturnCode::NotSupported }).await;
            return;
        }
        let client_id: Arc<str> = Arc::from(connect.client_id.as_str());
        let rights = match self.gw.login(Some(&client_id), peer) {
            Ok(rights) => rights,
            Err(why) => {
                info!(%peer, %client_id, why, "MQTT-SN CONNECT refused");
                self.send(peer, &SnMessage::ConnAck { return_code: ReturnCode::NotSupported }).await;
                return;
            }
        };
        if self.adds_past_address_limit(peer, &client_id) {
            return self.refuse_full(peer, Full::Address, now).await;
        }
        // Another client id from an address that has a session: the client there is gone.
        if let Some(old) = self.addresses.get(peer)
            && self.clients.get(&old).is_some_and(|e| *e.session.client_id() != client_id)
        {
            if let Some(entry) = self.clients.get_mut(&old) {
                entry.session.lost(now);
            }
            self.flush(old).await;
            self.unbind_addr(peer);
        }
        let key = match self.by_id.get(&client_id).copied() {
            // Reconnection to a kept session, or a sleeping client going back to active (§6.14).
            Some(key) if !connect.clean_session || self.clients.get(&key).is_some_and(|e| e.session.is_sleeping()) => {
                key
            }
            // Clean session: the old session goes (a DISCONNECT tells its old address, if another).
            Some(key) => {
                if let Some(entry) = self.clients.get_mut(&key) {
                    let goodbye = entry.addr.is_some_and(|a| a != peer);
                    entry.session.close(CloseReason::SessionTakenOver, goodbye, now);
                    entry.session.forget_kept();
                }
                self.flush(key).await;
                self.remove(key);
                match self.create(client_id, rights, now) {
                    Some(key) => key,
                    None => return self.refuse_full(peer, Full::Gateway, now).await,
                }
            }
            None => match self.create(client_id, rights, now) {
                Some(key) => key,
                None => return self.refuse_full(peer, Full::Gateway, now).await,
            },
        };
        let from_its_address = self.clients.get(&key).is_some_and(|e| e.addr == Some(peer));
        self.bind(key, peer);
        if let Some(entry) = self.clients.get_mut(&key) {
            entry.session.handle_connect(&connect, from_its_address, now, &mut self.gw);
        }
        self.flush(key).await;
    }

    /// Whether a CONNECT from `peer` for `client_id` would put one session more at the peer's IP
    /// address than `max_clients_per_address`. It would not if it replaces the session at that
    /// very address, or moves the client's own session from another port of the same IP.
    fn adds_past_address_limit(&self, peer: SocketAddr, client_id: &str) -> bool {
        if self.addresses.get(peer).is_some() {
            return false;
        }
        let moves_within_ip = self
            .by_id
            .get(client_id)
            .and_then(|key| self.clients.get(key))
            .and_then(|entry| entry.addr)
            .is_some_and(|addr| addr.ip() == peer.ip());
        !moves_within_ip && self.addresses.sessions_at(peer.ip()) >= self.settings.max_clients_per_address
    }

    /// CONNACK 0x01 "rejected: congestion", counted, and logged once per period at most: a
    /// CONNECT flood must not flood the log.
    async fn refuse_full(&mut self, peer: SocketAddr, full: Full, now: Instant) {
        if let Some(suppressed) = self.refusal_log.admit(now) {
            let (setting, limit) = match full {
                Full::Gateway => ("max_clients", self.settings.max_clients),
                Full::Address => ("max_clients_per_address", self.settings.max_clients_per_address),
            };
            warn!(%peer, setting, limit, suppressed, "MQTT-SN CONNECT refused: {setting} reached (`suppressed` \
                refusals since the last such line were not logged)");
        }
        self.gw.count_refused_connection();
        GatewayStats::bump(&self.gw.stats.refused);
        self.send(peer, &SnMessage::ConnAck { return_code: ReturnCode::Congestion }).await;
    }

    /// A new session, making room by forgetting the oldest offline one if needed.
    fn create(&mut self, client_id: Arc<str>, rights: Rights, now: Instant) -> Option<ClientKey> {
        if self.clients.len() >= self.settings.max_clients {
            let oldest = self
                .clients
                .iter()
                .filter_map(|(key, entry)| entry.session.offline_since().map(|since| (since, *key)))
                .min()?;
            debug!(client_id = %self.clients[&oldest.1].session.client_id(), "max_clients reached: oldest offline session dropped");
            self.clients[&oldest.1].session.forget_kept();
            self.remove(oldest.1);
        }
        let mut core = self.gw.router.open_session(Protocol::MqttSn);
        core.restrict(rights);
        let core = Arc::new(core);
        let predefined = self.catalog.for_client(&client_id);
        let session = ClientSession::new(client_id, core, predefined, self.gw.limits.clone(), now);
        Some(self.insert(session))
    }

    fn insert(&mut self, session: ClientSession) -> ClientKey {
        let key = self.next_key;
        self.next_key += 1;
        self.by_id.insert(session.client_id().clone(), key);
        self.clients.insert(key, Box::new(Entry { session, addr: None, watch: None, filed: None }));
        key
    }

    /// Parks the persistent sessions the store kept, offline, before any datagram is read.
    fn restore(&mut self, now: Instant) {
        let Some(store) = self.gw.router.store() else { return };
        let kept = match load_sessions(&**store, Protocol::MqttSn) {
            Ok(kept) => kept,
            Err(e) => return warn!(error = %e, "MQTT-SN sessions could not be restored"),
        };
        let restored = kept.len();
        for session in kept {
            let mut core = self.gw.router.open_session(Protocol::MqttSn);
            core.restrict(self.gw.rights_of(&session.client_id));
            let predefined = self.catalog.for_client(&session.client_id);
            let session = ClientSession::restored(session, Arc::new(core), predefined, self.gw.limits.clone(), now);
            let key = self.insert(session);
            self.schedule(key);
        }
        if restored > 0 {
            info!(sessions = restored, "persistent MQTT-SN sessions restored from the store");
        }
    }

    /// Whether the session at `peer` is `client_id`'s.
    fn is_at(&self, peer: SocketAddr, client_id: &str) -> bool {
        let key = self.addresses.get(peer);
        key.and_then(|key| self.clients.get(&key)).is_some_and(|entry| &**entry.session.client_id() == client_id)
    }

    async fn on_stored(&mut self, Stored { key, seq, result }: Stored) {
        if let Some(entry) = self.clients.get_mut(&key) {
            entry.session.handle_stored(seq, result);
            self.flush(key).await;
        }
    }

    /// Gives each client whose outbox woke it a batch, if its session wants one.
    async fn on_ready(&mut self) {
        let mut keys = std::mem::take(&mut self.ready_keys);
        for key in keys.drain(..) {
            // A key from a session that is gone, or from a watch that ended, finds nothing.
            if self.clients.get(&key).is_some_and(|entry| entry.watch.is_some()) {
                self.flush(key).await;
            }
        }
        self.ready_keys = keys;
    }

    async fn on_timers(&mut self, now: Instant) {
        // Take every due deadline first, so a session re-arming at `now` waits for the next turn
        // of the loop instead of spinning here.
        let mut due = Vec::new();
        self.timers.take_due(now, &mut due);
        for (at, key) in due {
            let Some(entry) = self.clients.get_mut(&key) else { continue };
            if entry.filed != Some(at) {
                continue; // stale: an earlier deadline was filed after it
            }
            entry.filed = None;
            // The session may have moved its deadline later since it was filed (a message
            // restarts the keep-alive window): then nothing is due, and flushing files the new one.
            entry.session.handle_timeout(now);
            self.flush(key).await;
        }
    }

    /// Sends what the session produced and carries out its events; then gives it the
    /// deliveries it asked for, at once rather than in a later round of the loop, and the same
    /// again for what they produced, up to [`BATCHES_PER_TURN`]. Re-arms its timer.
    async fn flush(&mut self, key: ClientKey) {
        for batches in 0.. {
            if !self.flush_once(key).await {
                return;
            }
            let Some(entry) = self.clients.get_mut(&key) else { return };
            let Some(watch) = &mut entry.watch else { break };
            if batches == BATCHES_PER_TURN {
                // Other clients and the socket first; this one comes back in the next round.
                watch.relist();
                break;
            }
            match watch.poll(entry.session.core(), &mut self.batch) {
                None => break,
                Some(Ok(_)) => entry.session.handle_deliveries(&mut self.batch, now(), &mut self.gw),
                Some(Err(Overflowed)) => {
                    entry.watch = None;
                    entry.session.handle_overflow(now());
                }
            }
        }
        self.schedule(key);
    }

    /// Sends what the session produced and carries out its events; false once the session is
    /// forgotten.
    async fn flush_once(&mut self, key: ClientKey) -> bool {
        let Some(entry) = self.clients.get_mut(&key) else { return false };
        for (seq, commit) in entry.session.take_commits() {
            let stored = self.stored_tx.clone();
            self.tracker.spawn(async move {
                let _ = stored.send(Stored { key, seq, result: commit.await }).await;
            });
        }
        let mut outgoing = std::mem::take(&mut self.outgoing);
        while let Some(message) = entry.session.poll_transmit() {
            outgoing.push(message);
        }
        let addr = entry.addr;
        for message in outgoing.drain(..) {
            let sent = match addr {
                Some(addr) => self.send(addr, &message).await,
                None => false,
            };
            if let Some(entry) = self.clients.get_mut(&key) {
                entry.session.transmitted(sent, Instant::now(), self.gw.router.metrics());
            }
        }
        self.outgoing = outgoing;
        loop {
            let Some(entry) = self.clients.get_mut(&key) else { return false };
            let Some(event) = entry.session.poll_event() else { break };
            match event {
                Event::Connected => {
                    if entry.watch.is_none() {
                        entry.watch = Some(OutboxWatch::new(key, &self.ready, self.gw.router.metrics()));
                    }
                }
                Event::WantDeliveries => {
                    if let Some(watch) = &mut entry.watch {
                        watch.want();
                    }
                }
                Event::Ended { reason, keep } => {
                    entry.watch = None;
                    let addr = entry.addr.take();
                    self.gw.count_closed(reason);
                    match reason {
                        // Idle: sessions that never became active or never said anything, which a
                        // CONNECT flood leaves by the thousand.
                        CloseReason::ClientClosed | CloseReason::Shutdown | CloseReason::IdleTimeout => {
                            debug!(client_id = %entry.session.client_id(), %reason, keep, "MQTT-SN client disconnected")
                        }
                        _ => {
                            info!(client_id = %entry.session.client_id(), %reason, keep, "MQTT-SN client disconnected")
                        }
                    }
                    if let Some(addr) = addr {
                        self.unbind_addr(addr);
                    }
                    if !keep {
                        self.remove(key);
                        return false;
                    }
                }
                Event::Expired => {
                    self.remove(key);
                    return false;
                }
            }
        }
        true
    }

    /// Files the session's next deadline, if it comes before the one filed (see [`Deadlines`]).
    fn schedule(&mut self, key: ClientKey) {
        let Some(entry) = self.clients.get_mut(&key) else { return };
        self.timers.file(key, &mut entry.filed, entry.session.poll_timeout());
        // Stale entries are left by deadlines that moved earlier; rebuilt when they pile up.
        if self.timers.len() > 2 * self.clients.len() + 1024 {
            self.timers.rebuild(self.clients.iter().filter_map(|(key, entry)| entry.filed.map(|at| (at, *key))));
        }
    }

    /// Forgets a session: its watch ends and its core session (subscriptions) goes.
    fn remove(&mut self, key: ClientKey) {
        if let Some(entry) = self.clients.remove(&key) {
            if let Some(addr) = entry.addr {
                self.unbind_addr(addr);
            }
            if self.by_id.get(entry.session.client_id()) == Some(&key) {
                self.by_id.remove(entry.session.client_id());
            }
        }
    }

    fn bind(&mut self, key: ClientKey, peer: SocketAddr) {
        let Some(entry) = self.clients.get_mut(&key) else { return };
        if entry.addr == Some(peer) {
            return;
        }
        let old = entry.addr.replace(peer);
        if let Some(old) = old
            && self.addresses.get(old) == Some(key)
        {
            self.addresses.remove(old);
        }
        if let Some(previous) = self.addresses.insert(peer, key)
            && previous != key
            && let Some(other) = self.clients.get_mut(&previous)
        {
            other.addr = None;
        }
    }

    fn unbind_addr(&mut self, addr: SocketAddr) {
        if let Some(key) = self.addresses.remove(addr)
            && let Some(entry) = self.clients.get_mut(&key)
            && entry.addr == Some(addr)
        {
            entry.addr = None;
        }
    }

    /// Logs a bad datagram: at debug for peers without a session (spoofed garbage must not flood
    /// the log), at info once per period at most for clients with one.
    fn log_bad(&mut self, known: bool, peer: SocketAddr, what: &str, now: Instant) {
        let admitted = if known { self.bad_input_log.admit(now) } else { None };
        match admitted {
            Some(suppressed) => info!(%peer, suppressed, "{what}"),
            None => debug!(%peer, "{what}"),
        }
    }

    async fn advertise(&mut self) {
        let duration = u16::try_from(self.settings.advertise.period.as_secs()).unwrap_or(u16::MAX);
        let message = SnMessage::Advertise(Advertise { gw_id: self.settings.gateway_id, duration });
        self.send(self.settings.advertise.address, &message).await;
    }

    async fn shutdown_all(&mut self) {
        let now = now();
        let keys: Vec<ClientKey> = self.clients.keys().copied().collect();
        for key in keys {
            if let Some(entry) = self.clients.get_mut(&key) {
                entry.session.close(CloseReason::Shutdown, true, now);
            }
            self.flush(key).await;
        }
        self.clients.clear();
    }

    /// Sends one datagram; whether it went out.
    async fn send(&mut self, to: SocketAddr, message: &SnMessage) -> bool {
        self.out.clear();
        if let Err(e) = mqttsn_codec::encode(message, &mut self.out) {
            warn!(%to, error = %e, "cannot encode MQTT-SN message");
            return false;
        }
        // UDP sends complete at once unless the socket buffer is full; waiting then is the
        // backpressure we want rather than dropping.
        let send = self.socket.send_to(&self.out, to);
        match tokio::time::timeout(SEND_TIMEOUT, send).await {
            Ok(Ok(_)) => true,
            Ok(Err(e)) => {
                debug!(%to, error = %e, "MQTT-SN send failed");
                false
            }
            Err(_) => {
                debug!(%to, "MQTT-SN send timed out");
                false
            }
        }
    }
}

/// Longest wait for socket buffer space for one datagram.
const SEND_TIMEOUT: Duration = Duration::from_secs(1);

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

async fn tick(interval: &mut Option<tokio::time::Interval>) {
    match interval {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}
