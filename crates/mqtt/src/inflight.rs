//! Packet identifiers and the QoS 1/2 flows that are in flight, both directions (MQTT 3.1.1
//! §4.3, MQTT 5 §4.3 and §4.9 flow control). Part of the session state: it survives a reconnect
//! of a persistent session, so unacknowledged messages are sent again with DUP set
//! (MQTT-4.4.0-1) and a half-finished QoS 2 exchange resumes with PUBREL. A delivery kept in
//! the store takes its packet id from its place there ([`id_for_stored`]), so the same holds
//! after a restart.

use std::collections::BTreeSet;
use std::num::NonZeroU16;

use tolk_core::{Delivery, LazyDeque};

/// Where an outgoing QoS 1/2 delivery stands.
#[derive(Debug)]
pub enum Stage {
    /// QoS 1 PUBLISH sent, PUBACK awaited.
    Puback(Delivery),
    /// QoS 2 PUBLISH sent, PUBREC awaited.
    Pubrec(Delivery),
    /// PUBREL sent, PUBCOMP awaited: the client has the message, which is no longer resent;
    /// only its place in the store ([`Delivery::stored`]) is left to forget.
    Pubcomp { stored: u64 },
}

/// One delivery the client has not finished acknowledging.
#[derive(Debug)]
pub struct OutEntry {
    /// Its packet identifier.
    pub packet_id: NonZeroU16,
    /// Progress of the flow, with what is needed to resend or settle it.
    pub stage: Stage,
}

/// The packet identifier a kept delivery is sent under: its arrival number in the session's
/// store, wrapped into 1..=65535. Derived rather than remembered, so that after a restart the
/// delivery goes out again under the id the client may already hold (MQTT-4.4.0-1) without a
/// write per send.
pub fn id_for_stored(seq: u64) -> NonZeroU16 {
    let id = (seq.wrapping_sub(1) % u64::from(u16::MAX)) + 1;
    NonZeroU16::new(id as u16).unwrap_or(NonZeroU16::MIN)
}

/// Outgoing deliveries awaiting acknowledgement, in the order they were first sent.
#[derive(Debug, Default)]
pub struct Outgoing {
    /// One pointer until the first delivery in flight: most sessions of sensors never have one,
    /// and 24 bytes less put the session state in a smaller allocation.
    entries: LazyDeque<OutEntry>,
    last_id: u16,
}

impl Outgoing {
    /// Deliveries in flight (the number the client's Receive Maximum limits).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    fn in_use(&self, id: NonZeroU16) -> bool {
        self.entries.iter().any(|e| e.packet_id == id)
    }

    /// The packet identifier for `delivery`: [`id_for_stored`] for a kept one unless another
    /// flow holds it, else one not in use by another outgoing flow (MQTT-2.3.1-2). `None` when
    /// all 65535 are taken.
    pub fn allocate_id(&mut self, delivery: &Delivery) -> Option<NonZeroU16> {
        if delivery.stored != 0 {
            let id = id_for_stored(delivery.stored);
            if !self.in_use(id) {
                return Some(id);
            }
        }
        for _ in 0..u16::MAX {
            self.last_id = self.last_id.checked_add(1).unwrap_or(1);
            let id = NonZeroU16::new(self.last_id)?;
            if !self.in_use(id) {
                return Some(id);
            }
        }
        None
    }

    /// Records a PUBLISH just sent, or a kept QoS 2 flow restored at its PUBREL.
    pub fn push(&mut self, packet_id: NonZeroU16, stage: Stage) {
        self.entries.push_back(OutEntry { packet_id, stage });
    }

    /// Removes the flow `id` if it is at the stage `at` picks, and returns its stage.
    fn take(&mut self, id: NonZeroU16, at: impl Fn(&Stage) -> bool) -> Option<Stage> {
        let i = self.entries.iter().position(|e| e.packet_id == id && at(&e.stage))?;
        self.entries.remove(i).map(|e| e.stage)
    }

    /// PUBACK: the QoS 1 flow is complete. Returns the delivery to settle.
    pub fn puback(&mut self, id: NonZeroU16) -> Option<Delivery> {
        match self.take(id, |s| matches!(s, Stage::Puback(_)))? {
            Stage::Puback(delivery) => Some(delivery),
            _ => None,
        }
    }

    /// PUBREC: the client has the message; from now on only PUBREL is resent. Returns the
    /// delivery (its queue may settle it now), or `None` when the id was not awaiting a PUBREC.
    pub fn pubrec(&mut self, id: NonZeroU16) -> Option<Delivery> {
        let entry = self.entries.iter_mut().find(|e| e.packet_id == id && matches!(e.stage, Stage::Pubrec(_)))?;
        let stored = match &entry.stage {
            Stage::Pubrec(delivery) => delivery.stored,
            _ => return None,
        };
        match std::mem::replace(&mut entry.stage, Stage::Pubcomp { stored }) {
            Stage::Pubrec(delivery) => Some(delivery),
            _ => None,
        }
    }

    /// PUBREC with a failure reason (MQTT 5): the flow ends there (§4.3.3).
    pub fn pubrec_failed(&mut self, id: NonZeroU16) -> Option<Delivery> {
        match self.take(id, |s| matches!(s, Stage::Pubrec(_)))? {
            Stage::Pubrec(delivery) => Some(delivery),
            _ => None,
        }
    }

    /// PUBCOMP: the QoS 2 flow is complete. Returns where the delivery was kept (0: nowhere).
    pub fn pubcomp(&mut self, id: NonZeroU16) -> Option<u64> {
        match self.take(id, |s| matches!(s, Stage::Pubcomp { .. }))? {
            Stage::Pubcomp { stored } => Some(stored),
            _ => None,
        }
    }

    /// Every flow in sending order, for the resend after a reconnect.
    pub fn iter(&self) -> impl Iterator<Item = &OutEntry> {
        self.entries.iter()
    }

    /// Removes the deliveries `take` picks (e.g. shared-subscription deliveries that go back to
    /// their group when the session goes offline) from the flows still before PUBREC, and
    /// returns them.
    pub fn take_where(&mut self, mut take: impl FnMut(&Delivery) -> bool) -> Vec<Delivery> {
        let mut taken = Vec::new();
        let mut kept = LazyDeque::default();
        for entry in std::mem::take(&mut self.entries) {
            match entry.stage {
                Stage::Puback(d) | Stage::Pubrec(d) if take(&d) => taken.push(d),
                _ => kept.push_back(entry),
            }
        }
        self.entries = kept;
        taken
    }
}

/// QoS 2 packet identifiers received from the client whose PUBREL has not arrived: a PUBLISH
/// with one of these ids is a duplicate and is not routed again (MQTT 5 §4.3.3 method B
/// receiver side: "store the packet identifier until PUBREL"). A B-tree set: 24 bytes instead
/// of a hash set's 48 in every session, and no hashing per QoS 2 message.
#[derive(Debug, Default)]
pub struct IncomingQos2 {
    ids: BTreeSet<u16>,
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
        let a = out.allocate_id(&delivery()).unwrap();
        out.push(a, Stage::Puback(delivery()));
        out.last_id = u16::MAX;
        assert_eq!(out.allocate_id(&delivery()), NonZeroU16::new(2), "wraps past 0 and skips 1 (in use)");
    }

    #[test]
    fn a_kept_delivery_gets_the_id_of_its_place_in_the_store_while_that_is_free() {
        let kept = |seq| Delivery { stored: seq, ..delivery() };
        let mut out = Outgoing::default();
        assert_eq!(id_for_stored(1), NonZeroU16::MIN);
        assert_eq!(id_for_stored(65535).get(), 65535);
        assert_eq!(id_for_stored(65536), NonZeroU16::MIN, "wraps after 65535");
        let id = out.allocate_id(&kept(7)).unwrap();
        assert_eq!(id.get(), 7);
        out.push(id, Stage::Puback(kept(7)));
        assert_eq!(out.allocate_id(&kept(65535 + 7)), NonZeroU16::new(1), "held: another id");
    }

    #[test]
    fn qos2_flow_moves_through_its_stages() {
        let mut out = Outgoing::default();
        let id = out.allocate_id(&delivery()).unwrap();
        out.push(id, Stage::Pubrec(Delivery { stored: 9, ..delivery() }));
        assert!(out.puback(id).is_none(), "a PUBACK does not finish a QoS 2 flow");
        assert!(out.pubcomp(id).is_none(), "nor does an early PUBCOMP");
        assert_eq!(out.pubrec(id).map(|d| d.stored), Some(9));
        assert!(matches!(out.iter().next().unwrap().stage, Stage::Pubcomp { stored: 9 }));
        assert!(out.take_where(|_| true).is_empty(), "past PUBREC, a flow is not given back");
        assert_eq!(out.pubcomp(id), Some(9));
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
