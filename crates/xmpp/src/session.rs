//! [`XmppSession`]: the state machine of one client stream, quinn-style. It owns no socket and
//! reads no clock: the connection (`connection.rs`) feeds it bytes, deliveries and timer
//! expiries with the current time, and writes the bytes of [`XmppSession::output`].
//!
//! A stream goes: header → features → (STARTTLS → header again) → SASL → header again →
//! resource binding → stanzas. Before binding, only negotiation is accepted; after it, `iq`,
//! `message` and `presence` stanzas. A stream error ends the stream (RFC 6120 §4.9); a stanza
//! error answers one request and the stream carries on.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use bytes::BytesMut;
use tolk_core::access::SubscribeError;
use tolk_core::auth::{Authenticator, Credentials};
use tolk_core::store::StoreError;
use tolk_core::{AckLine, CloseReason, Delivery, DropReason, Origin, Protocol, QoS, Session, SubscriptionOptions};
use tolk_tls::Tls;
use tracing::{debug, info};
use xmpp_codec::{CLIENT_NS, Element, Event, StreamError, StreamHeader, StreamReader};

use crate::config::XmppConfig;
use crate::disco;
use crate::pubsub::{self, Request, errors};
use crate::sasl::{self, Failure, Mechanism};
use crate::stanza::{self, Jid, StanzaError};
use crate::throttle::Throttle;
use crate::translate::{self, Envelope};

const TLS_NS: &str = "urn:ietf:params:xml:ns:xmpp-tls";
const BIND_NS: &str = "urn:ietf:params:xml:ns:xmpp-bind";
const SESSION_NS: &str = "urn:ietf:params:xml:ns:xmpp-session";
const PING_NS: &str = "urn:xmpp:ping";
const ROSTER_NS: &str = "jabber:iq:roster";
/// SASL attempts a client gets on one stream before it is closed.
const MAX_AUTH_FAILURES: u8 = 3;

/// What every connection of the listener shares.
pub(crate) struct Service {
    /// The `[xmpp]` settings.
    pub config: XmppConfig,
    /// `pubsub.<domain>`.
    pub pubsub_jid: String,
    /// Bounds on item payloads.
    pub payload_limits: wsn_xml::Limits,
    /// Who may log in.
    pub auth: Arc<dyn Authenticator>,
    /// The certificates STARTTLS uses; `None`: STARTTLS is not offered.
    pub tls: Option<Arc<Tls>>,
}

/// Where the stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the client's stream header (at the start, and after STARTTLS or SASL).
    Opening,
    /// Header answered, features sent: STARTTLS, SASL or binding next.
    Negotiating,
    /// A resource is bound: stanzas flow.
    Bound,
    /// The stream is closed; nothing more is read.
    Closed,
}

/// A subscription of this connection.
struct Subscription {
    tag: u64,
    node: String,
}

/// The state machine of one XMPP client stream.
pub(crate) struct XmppSession {
    service: Arc<Service>,
    peer: SocketAddr,
    /// The user a TLS client certificate names.
    identity: Option<Arc<str>>,
    core: Session,
    reader: StreamReader,
    /// Output, of which `out[written..]` is still to be written.
    out: Vec<u8>,
    written: usize,
    phase: Phase,
    /// TLS is in force (a `tls_bind` listener, or STARTTLS done).
    secure: bool,
    /// STARTTLS was agreed: the driver takes it once `<proceed/>` is out.
    upgrade: Option<Arc<Tls>>,
    /// The authenticated user: the JID's local part, and the name rights are looked up by
    /// (`None` for ANONYMOUS).
    user: Option<(String, Option<String>)>,
    jid: Option<Jid>,
    header_sent: bool,
    /// A SASL mechanism waiting for the client's `<response/>`.
    sasl: Option<Mechanism>,
    failures: u8,
    subscriptions: Vec<Subscription>,
    next_tag: u64,
    next_id: u64,
    /// `iq` results of publishes, waiting for the store in publish order.
    acks: AckLine<Vec<u8>>,
    /// Until a resource is bound, the stream must be ready by then.
    deadline: Option<Instant>,
    /// `[xmpp] max_stanzas_per_second`; `None` without a limit.
    throttle: Option<Throttle>,
    last_read: Instant,
    finished: Option<CloseReason>,
}

/// The answer to an `iq`: a result (with its payload, as an element or as fixed text), an
/// error, or bytes written already.
enum Answer {
    Result(Option<Element>),
    Text(String),
    Error(StanzaError),
    Written,
}

impl XmppSession {
    /// A session waiting for the stream header, opened at `now`; `secure` when TLS is in
    /// force from the start.
    pub fn new(service: Arc<Service>, peer: SocketAddr, core: Session, secure: bool, now: Instant) -> Self {
        let reader = StreamReader::new(service.config.limits());
        let deadline = now + service.config.connect_timeout;
        let rate = service.config.max_stanzas_per_second;
        let throttle = (rate > 0).then(|| Throttle::new(rate, now));
        XmppSession {
            service,
            peer,
            identity: None,
            core,
            reader,
            out: Vec::new(),
            written: 0,
            phase: Phase::Opening,
            secure,
            upgrade: None,
            user: None,
            jid: None,
            header_sent: false,
            sasl: None,
            failures: 0,
            subscriptions: Vec::new(),
            next_tag: 1,
            next_id: 1,
            acks: AckLine::default(),
            deadline: Some(deadline),
            throttle,
            last_read: now,
            finished: None,
        }
    }

    /// The session of a client that a TLS client certificate names.
    pub fn with_identity(mut self, identity: Option<Arc<str>>) -> Self {
        self.identity = identity;
        self
    }

    /// The core session.
    pub fn core(&self) -> &Session {
        &self.core
    }

    /// Why the stream ended, once it has.
    pub fn finished(&self) -> Option<CloseReason> {
        self.finished
    }

    /// The connection is over for `reason` (the peer went, the socket failed).
    pub fn end(&mut self, reason: CloseReason) {
        self.finished.get_or_insert(reason);
        self.phase = Phase::Closed;
    }

    /// Bytes waiting to be written.
    pub fn output(&self) -> &[u8] {
        &self.out[self.written..]
    }

    /// `n` bytes of [`XmppSession::output`] were written; the buffer is given back once
    /// everything is out, so that an idle connection holds none.
    pub fn advance_output(&mut self, n: usize) {
        self.written += n;
        if self.written >= self.out.len() {
            self.out = Vec::new();
            self.written = 0;
        }
    }

    /// Whether deliveries may be taken: once bound and while open.
    pub fn accepts_deliveries(&self) -> bool {
        self.phase == Phase::Bound && self.finished.is_none()
    }

    /// STARTTLS agreed, for the driver.
    pub fn take_upgrade(&mut self) -> Option<Arc<Tls>> {
        self.upgrade.take()
    }

    /// TLS is in force now; a client certificate may name the user.
    pub fn tls_started(&mut self, identity: Option<Arc<str>>) {
        self.secure = true;
        if identity.is_some() {
            self.identity = identity;
        }
    }

    /// Bytes arrived.
    pub fn note_read(&mut self, now: Instant) {
        self.last_read = now;
    }

    /// When the client must have spoken by: `max_silence` after it last did.
    fn silent_after(&self) -> Option<Instant> {
        let silence = self.service.config.max_silence;
        (!silence.is_zero()).then(|| self.last_read + silence)
    }

    /// When [`XmppSession::handle_timeout`] next has work to do: a deadline, or the end of a
    /// throttle (the driver then hands the read input back, see [`XmppSession::input_ready`]).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.finished.is_some() {
            return None;
        }
        let throttled = self.throttle.as_ref().and_then(Throttle::blocked_until);
        [self.deadline, self.silent_after(), throttled].into_iter().flatten().min()
    }

    /// A deadline passed: the stream was not ready in time, or the client went silent.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.deadline.is_some_and(|at| at <= now) {
            let text = format!("not logged in and bound within {:?}", self.service.config.connect_timeout);
            self.stream_error("connection-timeout", Some(&text), CloseReason::KeepAliveTimeout);
        } else if self.silent_after().is_some_and(|at| at <= now) {
            let text = format!("nothing received for {:?}", self.service.config.max_silence);
            self.stream_error("connection-timeout", Some(&text), CloseReason::KeepAliveTimeout);
        }
    }

    /// Whether more may be read: not while the stanza budget is spent.
    pub fn may_read(&self, now: Instant) -> bool {
        self.throttle.as_ref().and_then(Throttle::blocked_until).is_none_or(|until| until <= now)
    }

    /// The stanza budget refilled after running out: what was read and left undecoded may be
    /// handled now. True once per throttle.
    pub fn input_ready(&mut self, now: Instant) -> bool {
        self.throttle.as_mut().is_some_and(|t| t.take_unblocked(now))
    }

    /// Whether a throttle is under way (no clock needed to tell).
    pub fn is_throttled(&self) -> bool {
        self.throttle.as_ref().is_some_and(|t| t.blocked_until().is_some())
    }

    /// The broker is shutting down.
    pub fn handle_shutdown(&mut self) {
        self.stream_error("system-shutdown", None, CloseReason::Shutdown);
    }

    /// The outbox overflowed: this client does not read fast enough.
    pub fn handle_slow_consumer(&mut self) {
        let text = "slow consumer: too many messages waiting for this connection";
        self.stream_error("resource-constraint", Some(text), CloseReason::SlowConsumer);
    }

    /// The next event from what was read. `Err` once the stream is over (the stream error is
    /// written). While a STARTTLS upgrade waits, nothing more is read: bytes sent in clear
    /// after `<starttls/>` must not count (RFC 6120 §5.4.3.3).
    pub fn next_event(&mut self, input: &mut BytesMut) -> Result<Option<Event>, CloseReason> {
        if let Some(reason) = self.finished {
            input.clear();
            return Err(reason);
        }
        if self.upgrade.is_some() {
            input.clear();
            return Ok(None);
        }
        let now = Instant::now();
        if let Some(throttle) = &mut self.throttle
            && !throttle.may_take(now)
        {
            // Left in `input` until the budget refills.
            return Ok(None);
        }
        match self.reader.next(input) {
            Ok(Some(event)) => {
                if let Some(throttle) = &mut self.throttle {
                    throttle.take();
                }
                Ok(Some(event))
            }
            Ok(None) => Ok(None),
            Err(error) => {
                input.clear();
                Err(self.refuse_input(&error))
            }
        }
    }

    fn refuse_input(&mut self, error: &StreamError) -> CloseReason {
        info!(%error, "closing XMPP stream: bad input");
        let reason = match error {
            StreamError::PolicyViolation(_) => CloseReason::LimitExceeded,
            _ => CloseReason::ProtocolError,
        };
        self.stream_error(error.condition(), Some(&error.to_string()), reason);
        reason
    }

    /// Ends the stream with a stream error (RFC 6120 §4.9): the header first if none was sent.
    fn stream_error(&mut self, condition: &str, text: Option<&str>, reason: CloseReason) {
        if self.finished.is_some() {
            return;
        }
        if !self.header_sent {
            self.write_header(None);
        }
        if reason != CloseReason::Shutdown && reason != CloseReason::ClientClosed {
            debug!(condition, text, "XMPP stream error");
        }
        xmpp_codec::stream_error(&mut self.out, condition, text);
        self.phase = Phase::Closed;
        self.finished = Some(reason);
    }

    fn write_header(&mut self, to: Option<&str>) {
        let id = format!("{:016x}", fastrand::u64(..));
        xmpp_codec::stream_header(&mut self.out, &self.service.config.domain, to, &id);
        self.header_sent = true;
    }

    fn write(&mut self, element: &Element) {
        element.write_to(&mut self.out, CLIENT_NS);
    }

    /// Acts on one event. `Err` ends the connection (what to say is written).
    pub fn handle_event(&mut self, event: Event, now: Instant) -> Result<(), CloseReason> {
        match (self.phase, event) {
            (Phase::Opening, Event::StreamOpen(header)) => self.on_stream_open(&header),
            (_, Event::StreamClose) => {
                xmpp_codec::stream_close(&mut self.out);
                self.phase = Phase::Closed;
                self.finished = Some(CloseReason::ClientClosed);
            }
            (Phase::Negotiating, Event::Element(element)) => self.negotiate(element),
            (Phase::Bound, Event::Element(element)) => self.on_stanza(element, now),
            (_, Event::StreamOpen(_)) => {
                self.stream_error("not-well-formed", Some("a second stream header"), CloseReason::ProtocolError);
            }
            (Phase::Opening | Phase::Closed, Event::Element(_)) => {
                self.stream_error(
                    "not-well-formed",
                    Some("a stanza before the stream header"),
                    CloseReason::ProtocolError,
                );
            }
        }
        self.finished.map_or(Ok(()), Err)
    }

    fn on_stream_open(&mut self, header: &StreamHeader) {
        let domain = self.service.config.domain.clone();
        self.write_header(header.from.as_deref().filter(|_| self.user.is_some()));
        if header.to.as_deref().is_some_and(|to| !to.eq_ignore_ascii_case(&domain)) {
            let text = format!("this server serves {domain}");
            return self.stream_error("host-unknown", Some(&text), CloseReason::ProtocolError);
        }
        if !header.version.as_deref().is_some_and(|v| v.starts_with("1.")) {
            return self.stream_error("unsupported-version", Some("XMPP 1.0 streams only"), CloseReason::ProtocolError);
        }
        let features = self.features();
        self.out.extend_from_slice(features.as_bytes());
        self.phase = Phase::Negotiating;
    }

    /// The stream features for where the stream is (RFC 6120 §4.3.2).
    fn features(&self) -> String {
        if self.user.is_some() {
            return format!(
                "<stream:features><bind xmlns='{BIND_NS}'/><session xmlns='{SESSION_NS}'><optional/></session>\
                 </stream:features>"
            );
        }
        let config = &self.service.config;
        let mut features = String::from("<stream:features>");
        if !self.secure && self.service.tls.is_some() {
            let starttls = if config.require_tls {
                format!("<starttls xmlns='{TLS_NS}'><required/></starttls>")
            } else {
                format!("<starttls xmlns='{TLS_NS}'/>")
            };
            features.push_str(&starttls);
        }
        if self.secure || !config.require_tls {
            let anonymous = if self.offers_anonymous() { "<mechanism>ANONYMOUS</mechanism>" } else { "" };
            features.push_str(&format!(
                "<mechanisms xmlns='{}'><mechanism>PLAIN</mechanism>{anonymous}</mechanisms>",
                sasl::NS
            ));
        }
        features.push_str("</stream:features>");
        features
    }

    /// ANONYMOUS is offered where names are not checked (no user database), as every other
    /// protocol takes clients without credentials there.
    fn offers_anonymous(&self) -> bool {
        !self.service.auth.verifies_users()
    }

    fn negotiate(&mut self, element: Element) {
        let authenticated = self.user.is_some();
        if element.is("starttls", TLS_NS) && !authenticated && !self.secure {
            match self.service.tls.clone() {
                Some(tls) => {
                    self.write(&Element::new("proceed", TLS_NS));
                    self.upgrade = Some(tls);
                    self.restart();
                }
                None => {
                    self.write(&Element::new("failure", TLS_NS));
                    xmpp_codec::stream_close(&mut self.out);
                    self.phase = Phase::Closed;
                    self.finished = Some(CloseReason::ProtocolError);
                }
            }
        } else if element.ns == sasl::NS && !authenticated {
            self.on_sasl(&element);
        } else if element.is("iq", CLIENT_NS) && authenticated {
            self.on_bind(&element);
        } else {
            let text = format!("<{}/> before logging in and binding a resource", element.name);
            self.stream_error("not-authorized", Some(&text), CloseReason::NotAuthorized);
        }
    }

    /// Waits for a new stream header (after STARTTLS and after SASL success).
    fn restart(&mut self) {
        self.reader.reset();
        self.phase = Phase::Opening;
        self.header_sent = false;
    }

    fn on_sasl(&mut self, element: &Element) {
        if self.service.config.require_tls && !self.secure {
            let failure = Element::new("failure", sasl::NS).with_child(Element::new("encryption-required", sasl::NS));
            return self.write(&failure);
        }
        let result = match (element.name.as_str(), self.sasl.take()) {
            ("auth", None) => match element.attr("mechanism").and_then(Mechanism::parse) {
                Some(Mechanism::Anonymous) if self.offers_anonymous() => self.login_anonymous(),
                Some(Mechanism::Plain) => {
                    if element.text().is_empty() {
                        // No initial response: an empty challenge asks for it.
                        self.sasl = Some(Mechanism::Plain);
                        return self.write(&Element::new("challenge", sasl::NS));
                    }
                    self.login_plain(&element.text())
                }
                _ => Err(Failure::InvalidMechanism),
            },
            ("response", Some(Mechanism::Plain)) => self.login_plain(&element.text()),
            ("abort", _) => Err(Failure::Aborted),
            (name, _) => {
                let text = format!("SASL <{name}/> out of turn");
                return self.stream_error("not-authorized", Some(&text), CloseReason::ProtocolError);
            }
        };
        match result {
            Ok(()) => {
                self.write(&Element::new("success", sasl::NS));
                self.restart();
            }
            Err(failure) => {
                self.failures += 1;
                let element = Element::new("failure", sasl::NS).with_child(Element::new(failure.condition(), sasl::NS));
                self.write(&element);
                if self.failures >= MAX_AUTH_FAILURES {
                    xmpp_codec::stream_close(&mut self.out);
                    self.phase = Phase::Closed;
                    self.finished = Some(CloseReason::AuthFailed);
                }
            }
        }
    }

    fn login_plain(&mut self, response: &str) -> Result<(), Failure> {
        let plain = sasl::plain(&sasl::decode(response)?)?;
        let domain = &self.service.config.domain;
        if !plain.authzid.is_empty() && plain.authzid != format!("{}@{domain}", plain.authcid) {
            return Err(Failure::InvalidAuthzid);
        }
        let credentials = Credentials {
            protocol: Protocol::Xmpp,
            username: Some(&plain.authcid),
            password: Some(&plain.password),
            client_id: None,
            peer: self.peer,
            proven: false,
        }
        .with_identity(self.identity.as_deref());
        if let Err(why) = self.service.auth.authenticate(&credentials) {
            info!(user = %plain.authcid, %why, "XMPP login refused");
            return Err(Failure::NotAuthorized);
        }
        let username = credentials.username.map(str::to_owned);
        self.user = Some((username.clone().unwrap_or_default(), username));
        Ok(())
    }

    fn login_anonymous(&mut self) -> Result<(), Failure> {
        let credentials = Credentials {
            protocol: Protocol::Xmpp,
            username: None,
            password: None,
            client_id: None,
            peer: self.peer,
            proven: false,
        }
        .with_identity(self.identity.as_deref());
        if self.service.auth.authenticate(&credentials).is_err() {
            return Err(Failure::NotAuthorized);
        }
        let username = credentials.username.map(str::to_owned);
        let local = username.clone().unwrap_or_else(|| format!("anon-{:012x}", fastrand::u64(..) >> 16));
        self.user = Some((local, username));
        Ok(())
    }

    /// Resource binding (RFC 6120 §7): the only `iq` before it is bound.
    fn on_bind(&mut self, iq: &Element) {
        let bind = iq.child("bind", BIND_NS).filter(|_| iq.attr("type") == Some("set"));
        let Some(bind) = bind else {
            let text = "bind a resource first";
            return self.stream_error("not-authorized", Some(text), CloseReason::NotAuthorized);
        };
        let domain = self.service.config.domain.clone();
        let requested = bind.child("resource", BIND_NS).map(|r| r.text()).filter(|r| !r.is_empty());
        if requested.as_deref().is_some_and(|r| !stanza::valid_resource(r)) {
            let error = StanzaError::new("modify", "bad-request").with_text("resource not allowed");
            return self.write(&stanza::error_reply(iq, &domain, "", &error));
        }
        let resource = requested.unwrap_or_else(|| format!("tolk-{:08x}", fastrand::u32(..)));
        let (local, username) = self.user.clone().unwrap_or_default();
        let jid = Jid { local, domain: domain.clone(), resource };
        let full = jid.full();
        let rights = self.service.auth.access(username.as_deref(), Some(&full));
        self.core.restrict(rights);
        let answer = Element::new("bind", BIND_NS).with_child(Element::new("jid", BIND_NS).with_text(full.clone()));
        let mut result = Element::new("iq", CLIENT_NS).with_attr("type", "result");
        if let Some(id) = iq.attr("id") {
            result.set_attr("id", id);
        }
        self.write(&result.with_child(answer));
        debug!(jid = %full, "XMPP stream bound");
        tolk_core::listener::name_client(full.as_str().into());
        self.jid = Some(jid);
        self.phase = Phase::Bound;
        self.deadline = None;
    }

    /// An `iq` result to `iq` whose child is `payload`, XML written already.
    fn write_result_text(&mut self, iq: &Element, from: &str, to: &str, payload: &[u8]) {
        let mut head = Vec::new();
        stanza::iq_result(iq, from, to, None).write_to(&mut head, CLIENT_NS);
        // `<iq …/>` opened up to take the payload.
        let open = head.strip_suffix(b"/>").unwrap_or(&head);
        self.out.extend_from_slice(open);
        self.out.push(b'>');
        self.out.extend_from_slice(payload);
        self.out.extend_from_slice(b"</iq>");
    }

    fn full_jid(&self) -> String {
        self.jid.as_ref().map(Jid::full).unwrap_or_default()
    }

    fn on_stanza(&mut self, stanza: Element, now: Instant) {
        if stanza.ns != CLIENT_NS {
            let text = format!("<{}/> in {}", stanza.name, stanza.ns);
            return self.stream_error("unsupported-stanza-type", Some(&text), CloseReason::ProtocolError);
        }
        match stanza.name.as_str() {
            "iq" => self.on_iq(&stanza, now),
            "message" => self.on_message(&stanza),
            // Presence is accepted and not routed: the service has no rosters to tell.
            "presence" => {}
            other => {
                let text = format!("<{other}/>");
                self.stream_error("unsupported-stanza-type", Some(&text), CloseReason::ProtocolError);
            }
        }
    }

    /// Messages are not routed between users: only the pubsub service is here.
    fn on_message(&mut self, message: &Element) {
        if message.attr("type") == Some("error") {
            return;
        }
        let from = message.attr("to").unwrap_or(&self.service.config.domain).to_owned();
        let reply = stanza::error_reply(message, &from, &self.full_jid(), &StanzaError::service_unavailable());
        self.write(&reply);
    }

    fn on_iq(&mut self, iq: &Element, now: Instant) {
        let kind = iq.attr("type").unwrap_or_default();
        if kind == "result" || kind == "error" {
            return;
        }
        let domain = self.service.config.domain.clone();
        let to = iq.attr("to").unwrap_or(&domain).to_owned();
        let own_bare = self.jid.as_ref().map(Jid::bare).unwrap_or_default();
        let mut children = iq.elements();
        let (Some(payload), None) = (children.next(), children.next()) else {
            let error = StanzaError::bad_request("an iq get or set has exactly one child");
            return self.write(&stanza::error_reply(iq, &to, &self.full_jid(), &error));
        };
        let answer = if to == self.service.pubsub_jid {
            self.service_iq(iq, kind, payload, now)
        } else if to.eq_ignore_ascii_case(&domain) || stanza::bare_of(&to) == own_bare {
            self.server_iq(kind, payload)
        } else {
            Answer::Error(StanzaError::service_unavailable())
        };
        let jid = self.full_jid();
        match answer {
            Answer::Result(payload) => self.write(&stanza::iq_result(iq, &to, &jid, payload)),
            Answer::Text(payload) => self.write_result_text(iq, &to, &jid, payload.as_bytes()),
            Answer::Error(error) => self.write(&stanza::error_reply(iq, &to, &jid, &error)),
            Answer::Written => {}
        }
    }

    /// Requests to the server itself (or the user's own account).
    fn server_iq(&mut self, kind: &str, payload: &Element) -> Answer {
        match (kind, payload.name.as_str(), payload.ns.as_str()) {
            ("get", "ping", PING_NS) => Answer::Result(None),
            ("set", "session", SESSION_NS) => Answer::Result(None),
            ("get", "query", disco::INFO_NS) if payload.attr("node").is_none() => {
                Answer::Text(disco::SERVER_INFO.to_owned())
            }
            ("get", "query", disco::ITEMS_NS) if payload.attr("node").is_none() => {
                Answer::Text(disco::server_items(&self.service.pubsub_jid))
            }
            // An empty roster: the service keeps none.
            ("get", "query", ROSTER_NS) => Answer::Result(Some(Element::new("query", ROSTER_NS))),
            _ => Answer::Error(StanzaError::service_unavailable()),
        }
    }

    /// Requests to the publish-subscribe service.
    fn service_iq(&mut self, iq: &Element, kind: &str, payload: &Element, now: Instant) -> Answer {
        match (kind, payload.name.as_str(), payload.ns.as_str()) {
            ("get", "ping", PING_NS) => Answer::Result(None),
            ("get", "query", disco::INFO_NS) => Answer::Text(disco::service_info(payload.attr("node"))),
            ("get", "query", disco::ITEMS_NS) => Answer::Text(disco::SERVICE_ITEMS.to_owned()),
            (_, "pubsub", pubsub::NS | pubsub::OWNER_NS) => match pubsub::parse(kind, payload) {
                Ok(request) => self.pubsub(iq, request, now),
                Err(error) => Answer::Error(error),
            },
            _ => Answer::Error(StanzaError::service_unavailable()),
        }
    }

    fn pubsub(&mut self, iq: &Element, request: Request, now: Instant) -> Answer {
        match request {
            Request::Publish { node, item_id, payload } => self.publish(iq, node, item_id, payload.as_ref(), now),
            Request::Subscribe { node, jid } => self.subscribe(iq, node, &jid),
            Request::Unsubscribe { node, jid, subid } => self.unsubscribe(&node, &jid, subid.as_deref()),
            Request::Items { node } => self.items(iq, &node),
            Request::Subscriptions { node } => {
                let jid = self.jid.as_ref().map(Jid::bare).unwrap_or_default();
                let mut list = Element::new("subscriptions", pubsub::NS);
                for s in self.subscriptions.iter().filter(|s| node.as_ref().is_none_or(|n| *n == s.node)) {
                    list.push_child(pubsub::subscription(&s.node, &jid, &s.tag.to_string(), "subscribed"));
                }
                Answer::Result(Some(Element::new("pubsub", pubsub::NS).with_child(list)))
            }
            Request::Create { node } => match tolk_core::topic::validate_name(&node) {
                Ok(()) => Answer::Result(None),
                Err(e) => Answer::Error(errors::bad_node(e)),
            },
            Request::Purge { node } | Request::Delete { node } => self.purge(node, now),
        }
    }

    fn origin(&self) -> Origin {
        Origin { protocol: self.core.protocol(), session: self.core.id(), client_id: Arc::from(self.full_jid()) }
    }

    fn publish(
        &mut self,
        iq: &Element,
        node: String,
        item_id: Option<String>,
        payload: Option<&Element>,
        now: Instant,
    ) -> Answer {
        if let Err(e) = tolk_core::topic::validate_name(&node) {
            return Answer::Error(errors::bad_node(e));
        }
        let item_id = item_id.unwrap_or_else(|| {
            self.next_id += 1;
            format!("{:x}-{:x}", self.core.id().0, self.next_id)
        });
        let mut message = translate::message_from_item(node.clone(), &item_id, payload, self.origin(), now);
        // An item without payload is not kept: as the node's last item it would clear it.
        message.retain = self.service.config.retain_items && !message.payload.is_empty();
        let counters = self.core.router().metrics().protocol(self.core.protocol());
        counters.messages_in.fetch_add(1, Relaxed);
        let mut durable = None;
        let outcome = self.core.publish_into(Arc::new(message), &mut durable);
        if outcome.not_authorized {
            return Answer::Error(errors::forbidden());
        }
        if outcome.refused > 0 {
            let why = if outcome.memory_full {
                "the broker's memory budget is used up; item refused".to_owned()
            } else {
                format!("{} subscriber queue(s) full; item refused", outcome.refused)
            };
            return Answer::Error(errors::not_kept(why));
        }
        // The result says "kept": for a persistent item, once the store has it.
        let stored = durable.map(|commit| self.core.await_durable(commit)).is_some();
        let result =
            stanza::iq_result(iq, &self.service.pubsub_jid, &self.full_jid(), Some(pubsub::published(&node, &item_id)));
        let reply = self.render(&result);
        if let Some(reply) = self.acks.place(&self.core, stored, reply) {
            self.out.extend_from_slice(&reply);
        }
        Answer::Written
    }

    fn render(&self, element: &Element) -> Vec<u8> {
        let mut bytes = Vec::new();
        element.write_to(&mut bytes, CLIENT_NS);
        bytes
    }

    /// The oldest store commit of this connection's publishes ended.
    pub fn handle_durable(&mut self, result: Result<(), StoreError>) {
        let waiting = self.acks.settled();
        if let Err(error) = result {
            let text = format!("an item could not be stored ({error}); publish it again");
            return self.stream_error("internal-server-error", Some(&text), CloseReason::ProtocolError);
        }
        if let Some(reply) = waiting {
            self.out.extend_from_slice(&reply);
        }
    }

    fn subscribe(&mut self, iq: &Element, node: String, jid: &str) -> Answer {
        let own = self.jid.as_ref().map(Jid::bare).unwrap_or_default();
        if stanza::bare_of(jid) != own {
            return Answer::Error(errors::invalid_jid());
        }
        if let Some(existing) = self.subscriptions.iter().find(|s| s.node == node) {
            let tag = existing.tag.to_string();
            let element = pubsub::subscription(&node, jid, &tag, "subscribed");
            return Answer::Result(Some(Element::new("pubsub", pubsub::NS).with_child(element)));
        }
        if self.subscriptions.len() >= self.service.config.max_subscriptions {
            return Answer::Error(errors::too_many_subscriptions());
        }
        let tag = self.next_tag;
        let options = SubscriptionOptions { max_qos: QoS::AtMostOnce, ..SubscriptionOptions::default() };
        match self.core.subscribe(&node, tag, options) {
            Ok(_) => {}
            Err(SubscribeError::NotAuthorized(_)) => return Answer::Error(errors::forbidden()),
            Err(SubscribeError::Topic(e)) => return Answer::Error(errors::bad_node(e)),
        }
        self.next_tag += 1;
        let element = pubsub::subscription(&node, jid, &tag.to_string(), "subscribed");
        // The answer first, then the node's last item (XEP-0060 `send_last_published_item`
        // "on_sub"), as MQTT sends retained messages after SUBACK.
        let answer = Element::new("pubsub", pubsub::NS).with_child(element);
        let result = stanza::iq_result(iq, &self.service.pubsub_jid, &self.full_jid(), Some(answer));
        self.write(&result);
        self.subscriptions.push(Subscription { tag, node: node.clone() });
        for message in self.core.retained(&node) {
            self.write_delivery(&message);
        }
        Answer::Written
    }

    fn unsubscribe(&mut self, node: &str, jid: &str, subid: Option<&str>) -> Answer {
        let own = self.jid.as_ref().map(Jid::bare).unwrap_or_default();
        if !jid.is_empty() && stanza::bare_of(jid) != own {
            return Answer::Error(errors::invalid_jid());
        }
        let found =
            self.subscriptions.iter().position(|s| s.node == node && subid.is_none_or(|id| id == s.tag.to_string()));
        let Some(index) = found else {
            return Answer::Error(errors::not_subscribed());
        };
        let subscription = self.subscriptions.swap_remove(index);
        self.core.unsubscribe(&subscription.node, subscription.tag);
        Answer::Result(None)
    }

    fn items(&mut self, iq: &Element, node: &str) -> Answer {
        if let Err(e) = tolk_core::topic::validate_filter(node) {
            return Answer::Error(errors::bad_node(e));
        }
        let retained: Vec<_> = self.core.retained(node).into_iter().filter(|m| !m.payload.is_empty()).collect();
        let mut items = format!("<pubsub xmlns='{}'>", pubsub::NS).into_bytes();
        translate::write_items(&mut items, node, &retained, &self.service.payload_limits);
        items.extend_from_slice(b"</pubsub>");
        let (from, to) = (self.service.pubsub_jid.clone(), self.full_jid());
        self.write_result_text(iq, &from, &to, &items);
        Answer::Written
    }

    /// Purge and delete: the node's item (its retained message) is cleared, as an MQTT client
    /// clears one, by publishing an empty retained message; XMPP subscribers are told with a
    /// `<purge/>` notification.
    fn purge(&mut self, node: String, now: Instant) -> Answer {
        if let Err(e) = tolk_core::topic::validate_name(&node) {
            return Answer::Error(errors::bad_node(e));
        }
        let mut message = tolk_core::Message::received(node, bytes::Bytes::new(), self.origin(), now);
        message.retain = true;
        let outcome = self.core.publish(Arc::new(message));
        if outcome.not_authorized { Answer::Error(errors::forbidden()) } else { Answer::Result(None) }
    }

    /// Writes one delivery as an event notification; whether it was written.
    pub fn handle_delivery(&mut self, delivery: &Delivery, now: Instant) -> bool {
        if self.phase != Phase::Bound {
            return false;
        }
        if delivery.message.is_expired(now) {
            self.core.router().metrics().protocol(self.core.protocol()).dropped(DropReason::Expired, 1);
            if let Some(ack) = &delivery.ack {
                ack.ack();
            }
            return false;
        }
        if !self.subscriptions.iter().any(|s| s.tag == delivery.tag) {
            return false;
        }
        self.write_delivery(&delivery.message);
        if let Some(ack) = &delivery.ack {
            ack.ack();
        }
        true
    }

    fn write_delivery(&mut self, message: &tolk_core::Message) {
        self.next_id += 1;
        let item_id = match &message.props.message_id {
            Some(id) => id.clone(),
            None => format!("{:x}", self.next_id),
        };
        let to = self.full_jid();
        let envelope = Envelope { from: &self.service.pubsub_jid, to: &to, id: self.next_id, item_id: &item_id };
        translate::write_event(&mut self.out, message, &envelope, &self.service.payload_limits);
    }
}
