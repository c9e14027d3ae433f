//! Packet identifiers and the QoS 1/2 flows that are in flight, both directions (MQTT 3.1.1
//! §4.3, MQTT 5 §4.3 and §4.9 flow control). Part of the session state: it survives a reconnect
//! of a persistent session, so unacknowledged messages are sent again with DUP set
//! (MQTT-4.4.0-1) and a half-finished QoS 2 exchange resumes with PUBREL.

use std::collections::{HashSet, VecDeque};
use std::num::NonZeroU16;

use tolk_core::Delivery;

/// Where an outgoing QoS 1/2 delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Awaiting {
    /// QoS 1 PUBLISH sent, PUBACK awaited.
    Puback,
    /// QoS 2 PUBLISH sent, PUBREC awaited.
    Pubrec,
    /// PUBREL sent, PUBCOMP awaited; the message itself is no longer resent.
    Pubcomp,
}

/// One delivery the client has not finished acknowledging.
#[derive(Debug)]
pub struct OutEntry {
    /// Its packet identifier.
    pub packet_id: NonZeroU16,
    /// What was sent (kept for DUP resend and to settle a queue delivery on the final ack).
    pub delivery: Delivery,
    /// Progress of the flow.
    pub stage: Awaiting,
}

/// Outgoing deliveries awaiting acknowledgement, in the order they were first sent.
#[derive(Debug, Default)]
pub struct Outgoing {
    entries: VecDeque<OutEntry>,
    last_id: u16,
}

impl Outgoing {
    /// Deliveries in flight (the number the client's Receive Maximum limits).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// A packet identifier not in use by another outgoing flow (MQTT-2.3.1-2), or `None` when
    /// all 65535 are taken.
    pub fn allocate_id(&mut self) -> Option<NonZeroU16> {
        for _ in 0..u16::MAX {
            self.last_id = self.last_id.checked_add(1).unwrap_or(1);
            let id = NonZeroU16::new(self.last_id)?;
            if !self.entries.iter().any(|e| e.packet_id == id) {
                return Some(id);
            }
        }
        None
    }

    /// Records a PUBLISH just sent.
    pub fn push(&mut self, packet_id: NonZeroU16, delivery: Delivery, stage: Awaiting) {
        self.entries.push_back(OutEntry { packet_id, delivery, stage });
    }

    fn position(&self, id: NonZeroU16, stage: Awaiting) -> Option<usize> {
        self.entries.iter().position(|e| e.packet_id == id && e.stage == stage)
    }

    /// PUBACK: the QoS 1 flow is complete. Returns the delivery to settle.
    pub fn puback(&mut self, id: NonZeroU16) -> Option<Delivery> {
        let i = self.position(id, Awaiting::Puback)?;
        self.entries.remove(i).map(|e| e.delivery)
    }

    /// PUBREC: the client has the message; from now on only PUBREL is resent. Returns whether
    /// the id was awaiting a PUBREC.
    pub fn pubrec(&mut self, id: NonZeroU16) -> bool {
        match self.position(id, Awaiting::Pubrec) {
            Some(i) => {
                self.entries[i].stage = Awaiting::Pubcomp;
                true
            }
            None => false,
        }
    }

    /// PUBREC with a failure reason (MQTT 5): the flow ends there (MQTT-4.3.3-... §4.3.3).
    pub fn pubrec_failed(&mut self, id: NonZeroU16) -> Option<Delivery> {
        let i = self.position(id, Awaiting::Pubrec)?;
        self.entries.remove(i).map(|e| e.delivery)
    }

    /// PUBCOMP: the QoS 2 flow is complete. Returns the delivery to settle.
    pub fn pubcomp(&mut self, id: NonZeroU16) -> Option<Delivery> {
        let i = self.position(id, Awaiting::Pubcomp)?;
        self.entries.remove(i).map(|e| e.delivery)
    }

    /// Every flow in sending order, for the resend after a reconnect.
    pub fn iter(&self) -> impl Iterator<Item = &OutEntry> {
        self.entries.iter()
    }

    /// Removes the flows `keep` refuses (e.g. shared-subscription deliveries that go back to
    /// their group when the session goes offline) and returns them.
    pub fn take_where(&mut self, mut take: impl FnMut(&OutEntry) -> bool) -> Vec<OutEntry> {
        let (taken, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.entries).into_iter().partition(|e| take(e));
        self.entries = kept.into();
        taken
    }
}

/// QoS 2 packet identifiers received from the client whose PUBREL has not arrived: a PUBLISH
/// with one of these ids is a duplicate and is not routed again (MQTT 5 §4.3.3 method B
/// receiver side: "store the packet identifier until PUBREL").
#[derive(Debug, Default)]
pub struct IncomingQos2 {
    ids: HashSet<u16>,
}

impl IncomingQos2 {
    /// Records `id`; `false` when it was already recorded (a resend).
    pub fn insert(&mut self, id: NonZeroU16) -> bool {
        self.ids.insert(id.get())
    }

    /// PUBREL: forgets `id`; returns whether it was known.
    pub fn release(&mut self, id: NonZeroU16) -> bool {
        self.ids.remove(&id.get())
    }

    /// Exchanges not yet released (counted against our Receive Maximum).
    pub fn len(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;
    use tolk_core::{Message, Origin, Protocol, QoS, SessionId};

    fn delivery() -> Delivery {
        let origin = Origin { protocol: Protocol::Mqtt, session: SessionId(1), client_id: "c".into() };
        Delivery::new(Arc::new(Message::new("t", "x", origin)), QoS::ExactlyOnce, Instant::now())
    }

    #[test]
    fn ids_skip_those_in_use_and_wrap() {
        let mut out = Outgoing::default();
        let a = out.allocate_id().unwrap();
        out.push(a, delivery(), Awaiting::Puback);
        out.last_id = u16::MAX;
        assert_eq!(out.allocate_id(), NonZeroU16::new(2), "wraps past 0 and skips 1 (in use)");
    }

    #[test]
    fn qos2_flow_moves_through_its_stages() {
        let mut out = Outgoing::default();
        let id = out.allocate_id().unwrap();
        out.push(id, delivery(), Awaiting::Pubrec);
        assert!(out.puback(id).is_none(), "a PUBACK does not finish a QoS 2 flow");
        assert!(out.pubcomp(id).is_none(), "nor does an early PUBCOMP");
        assert!(out.pubrec(id));
        assert_eq!(out.iter().next().unwrap().stage, Awaiting::Pubcomp);
        assert!(out.pubcomp(id).is_some());
        assert_eq!(out.len(), 0);
    }

    #[test]
    fn incoming_qos2_detects_resends_until_released() {
        let mut inc = IncomingQos2::default();
        let id = NonZeroU16::new(5).unwrap();
        assert!(inc.insert(id));
        assert!(!inc.insert(id));
        assert!(inc.release(id));
        assert!(!inc.release(id));
        assert_eq!(inc.len(), 0);
    }
}
