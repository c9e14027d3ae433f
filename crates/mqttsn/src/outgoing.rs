//! The gateway → client direction of one session: messages waiting to be sent, and the one
//! exchange in flight with its retransmission timer.
//!
//! The gateway handles a single outbound PUBLISH exchange that needs an answer at a time
//! (PUBLISH QoS 1 → PUBACK, PUBLISH QoS 2 → PUBREC → PUBREL → PUBCOMP, each after the REGISTER →
//! REGACK of its topic if needed), like the client must (MQTT-SN 1.2 §6.13): order is kept
//! without reordering on retransmission.
//!
//! QoS 0 messages need no answer, so they do not wait for that exchange, only for their topic:
//! up to [`MAX_REGISTRATIONS`] REGISTERs for them run at once, each a [`Registration`]. A
//! wildcard subscriber meeting 10,000 topics would otherwise wait one round trip per topic,
//! one after the other, while its outbox overflowed.
//!
//! This module only keeps state; `session` decides what to send.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use mqttsn_codec::{Message as SnMessage, Publish, Register};
use tolk_core::Delivery;

/// A delivery taken from the core outbox, with the time it was taken (the start of the egress
/// latency hop).
#[derive(Debug)]
pub(crate) struct Pending {
    /// What to send.
    pub(crate) delivery: Delivery,
    /// When the endpoint took it from the outbox.
    pub(crate) taken_at: Instant,
}

/// What the in-flight exchange waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// REGACK for the REGISTER that precedes the PUBLISH.
    RegAck,
    /// PUBACK (QoS 1).
    PubAck,
    /// PUBREC (QoS 2, first half).
    PubRec,
    /// PUBCOMP (QoS 2, after our PUBREL).
    PubComp,
}

/// The one exchange waiting for the client's answer.
#[derive(Debug)]
pub(crate) struct Inflight {
    /// What it waits for.
    pub(crate) step: Step,
    /// The REGISTER sent first, while `step` is [`Step::RegAck`].
    pub(crate) register: Option<Register>,
    /// The PUBLISH (sent, or to send once registered).
    pub(crate) publish: Publish,
    /// The delivery behind it.
    pub(crate) pending: Pending,
    /// When to send it again.
    pub(crate) retry: Retry,
}

impl Inflight {
    /// The MsgId the client's answer must carry.
    pub(crate) fn msg_id(&self) -> u16 {
        match (&self.register, self.step) {
            (Some(register), Step::RegAck) => register.msg_id,
            _ => self.publish.msg_id,
        }
    }

    /// The message to send again when the timer fires (§6.13): PUBLISH with DUP set, REGISTER
    /// or PUBREL as they were.
    pub(crate) fn retransmission(&self) -> SnMessage {
        match self.step {
            Step::RegAck => match &self.register {
                Some(register) => SnMessage::Register(register.clone()),
                None => SnMessage::Publish(Publish { dup: true, ..self.publish.clone() }),
            },
            Step::PubAck | Step::PubRec => SnMessage::Publish(Publish { dup: true, ..self.publish.clone() }),
            Step::PubComp => SnMessage::PubRel { msg_id: self.publish.msg_id },
        }
    }

    /// Goes on to the next step of the exchange, with a fresh `retry`.
    pub(crate) fn advance(&mut self, step: Step, retry: Retry) {
        self.step = step;
        self.retry = retry;
    }
}

/// The retransmission timer of one outbound message (§6.13): when to send it again, and how
/// many more times before the client is taken for lost. Shared by the exchange in flight and
/// the registrations, which retransmit alike.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retry {
    /// When to send it again.
    pub(crate) deadline: Instant,
    /// Retransmissions left.
    retries_left: u32,
}

impl Retry {
    /// A timer started at `now`: `retries` retransmissions, `timeout` apart.
    pub(crate) fn new(now: Instant, timeout: Duration, retries: u32) -> Self {
        Retry { deadline: now + timeout, retries_left: retries }
    }

    /// Whether the deadline has passed at `now`.
    pub(crate) fn is_due(&self, now: Instant) -> bool {
        now >= self.deadline
    }

    /// Takes one retransmission and re-arms for `timeout` from `now`; false when none is left
    /// (the client is lost).
    pub(crate) fn fire(&mut self, now: Instant, timeout: Duration) -> bool {
        let Some(left) = self.retries_left.checked_sub(1) else { return false };
        self.retries_left = left;
        self.deadline = now + timeout;
        true
    }
}

/// REGISTERs for QoS 0 messages that may wait for their REGACK at once.
pub(crate) const MAX_REGISTRATIONS: usize = 8;

/// A REGISTER sent for QoS 0 messages, waiting for its REGACK. The messages themselves wait in
/// [`Outgoing::pending`].
#[derive(Debug)]
pub(crate) struct Registration {
    /// What was sent, and is sent again on timeout.
    pub(crate) register: Register,
    /// When to send it again.
    pub(crate) retry: Retry,
}

/// The outbound queue of one session.
#[derive(Debug, Default)]
pub(crate) struct Outgoing {
    /// Deliveries waiting their turn, oldest first.
    pub(crate) pending: VecDeque<Pending>,
    /// The exchange in flight, if any. Boxed: 208 bytes inline in every session, and most
    /// clients (publishing sensors) never receive.
    pub(crate) inflight: Option<Box<Inflight>>,
    /// REGISTERs for QoS 0 messages (at most [`MAX_REGISTRATIONS`]); only while active.
    pub(crate) registrations: Vec<Registration>,
    last_msg_id: u16,
}

impl Outgoing {
    /// The next MsgId for a message the gateway sends; never 0 (reserved for QoS 0, §5.3.9).
    pub(crate) fn next_msg_id(&mut self) -> u16 {
        self.last_msg_id = self.last_msg_id.checked_add(1).unwrap_or(1);
        self.last_msg_id
    }

    /// Whether a REGISTER of `topic_id` waits for its REGACK.
    pub(crate) fn registering(&self, topic_id: u16) -> bool {
        self.registrations.iter().any(|r| r.register.topic_id == topic_id)
            || self
                .inflight
                .as_ref()
                .is_some_and(|i| i.step == Step::RegAck && i.register.as_ref().is_some_and(|r| r.topic_id == topic_id))
    }

    /// The earliest retransmission deadline, of the exchange and the registrations.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let registrations = self.registrations.iter().map(|r| r.retry.deadline);
        registrations.chain(self.inflight.as_ref().map(|i| i.retry.deadline)).min()
    }

    /// Everything not yet delivered, in order, for the core outbox when the session goes
    /// offline. Registrations are forgotten: their messages are in `pending`. A QoS 2 exchange
    /// past PUBREC is complete from the client's side (it has the
    /// message), so it is not handed back; a PUBLISH that was sent goes back marked redelivered.
    pub(crate) fn drain_undelivered(&mut self) -> Vec<Delivery> {
        self.registrations.clear();
        let mut undelivered = Vec::with_capacity(self.pending.len() + 1);
        if let Some(inflight) = self.inflight.take() {
            let mut delivery = inflight.pending.delivery;
            match inflight.step {
                Step::PubComp => {}
                Step::RegAck => undelivered.push(delivery),
                Step::PubAck | Step::PubRec => {
                    delivery.redelivered = true;
                    undelivered.push(delivery);
                }
            }
        }
        undelivered.extend(self.pending.drain(..).map(|p| p.delivery));
        undelivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msg_ids_skip_zero_when_they_wrap() {
        let mut out = Outgoing { last_msg_id: u16::MAX - 1, ..Outgoing::default() };
        assert_eq!(out.next_msg_id(), u16::MAX);
        assert_eq!(out.next_msg_id(), 1);
    }

    #[test]
    fn a_retry_fires_its_retransmissions_timeout_apart_then_gives_up() {
        let (t0, timeout) = (Instant::now(), Duration::from_secs(10));
        let mut retry = Retry::new(t0, timeout, 2);
        assert!(!retry.is_due(t0 + timeout / 2) && retry.is_due(t0 + timeout));
        assert!(retry.fire(t0 + timeout, timeout));
        assert_eq!(retry.deadline, t0 + timeout * 2);
        assert!(retry.fire(t0 + timeout * 2, timeout));
        assert!(!retry.fire(t0 + timeout * 3, timeout), "two retransmissions, then lost");
    }
}
