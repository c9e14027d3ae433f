//! Deliveries on their way out, accounted for once their bytes are written, not when they are
//! encoded: the egress and end-to-end latency hops, `tolk_messages_out_total`, and the
//! settling of queue deliveries that need no acknowledgement from the client (AMQP no-ack,
//! STOMP `ack:auto`, MQTT QoS 0), which a connection dying before the write must not have
//! settled: those go back to their queue.
//!
//! Output is counted in units: bytes on a stream, datagrams for MQTT-SN.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use tolk_metrics::{Metrics, Protocol};

use crate::delivery::{Delivery, QueueAck};
use crate::frontend::HopStamps;
use crate::lazy_deque::LazyDeque;

/// A delivery whose bytes end at stream offset `end`. It keeps the delivery's stamps for the
/// latency hops and its queue acknowledgement, not the message: the message may be freed as
/// soon as it is encoded, and its count, which every subscriber of a fan-out shares, is left
/// alone.
struct Pending {
    end: u64,
    stamps: HopStamps,
    settle: Option<QueueAck>,
}

/// One connection's deliveries between encoding and the socket.
pub struct Egress {
    protocol: Protocol,
    written_total: u64,
    /// One pointer until the first delivery: a connection that never receives one keeps no
    /// queue in its task.
    pending: LazyDeque<Pending>,
}

impl Egress {
    /// Accounting for a connection of `protocol`.
    pub fn new(protocol: Protocol) -> Self {
        Egress { protocol, written_total: 0, pending: LazyDeque::default() }
    }

    /// `delivery`, taken from the outbox at `taken_at`, was encoded; its bytes end with the
    /// `unwritten` bytes now waiting for the socket. `settle`: its queue delivery, acked once
    /// written.
    pub fn record(&mut self, unwritten: usize, delivery: &Delivery, taken_at: Instant, settle: Option<QueueAck>) {
        let end = self.written_total + unwritten as u64;
        self.pending.push_back(Pending { end, stamps: HopStamps::of(delivery, taken_at), settle });
    }

    /// `n` more bytes were written at `now`: every delivery they complete is counted, its hops
    /// recorded and, if asked, its queue delivery settled.
    pub fn written(&mut self, n: usize, now: Instant, metrics: &Metrics) {
        self.written_total += n as u64;
        let mut done = 0;
        while let Some(p) = self.pending.front()
            && p.end <= self.written_total
        {
            let p = self.pending.pop_front().expect("front exists");
            p.stamps.record(metrics, self.protocol, now);
            if let Some(ack) = &p.settle {
                ack.ack();
            }
            done += 1;
        }
        if done > 0 {
            metrics.protocol(self.protocol).messages_out.fetch_add(done, Relaxed);
        }
    }
}

impl Egress {
    /// `n` more units will never be written (a datagram for a client that is gone): the
    /// deliveries they complete are not counted, and those to be settled go back to their
    /// queue.
    pub fn abandoned(&mut self, n: usize) {
        self.written_total += n as u64;
        while let Some(p) = self.pending.front()
            && p.end <= self.written_total
        {
            let p = self.pending.pop_front().expect("front exists");
            if let Some(ack) = &p.settle {
                ack.nack(true);
            }
        }
    }
}

impl Drop for Egress {
    /// Deliveries to be settled once written that never were go back to their queue.
    fn drop(&mut self) {
        for p in self.pending.drain() {
            if let Some(ack) = &p.settle {
                ack.nack(true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tolk_metrics::Hop;

    use super::*;
    use crate::message::{Message, Origin, QoS, SessionId};

    fn delivery() -> Delivery {
        let origin = Origin { protocol: Protocol::Mqtt, session: SessionId(1), client_id: "c".into() };
        Delivery::new(Arc::new(Message::new("t", "x", origin)), QoS::AtMostOnce, Instant::now())
    }

    #[test]
    fn a_delivery_counts_once_its_last_byte_is_written() {
        let metrics = Metrics::new();
        let mut egress = Egress::new(Protocol::Stomp);
        egress.record(10, &delivery(), Instant::now(), None);
        egress.record(25, &delivery(), Instant::now(), None);
        let out = || metrics.protocol(Protocol::Stomp).messages_out.load(Relaxed);
        egress.written(9, Instant::now(), &metrics);
        assert_eq!(out(), 0, "one byte of the first is still waiting");
        egress.written(1, Instant::now(), &metrics);
        assert_eq!(out(), 1);
        egress.written(15, Instant::now(), &metrics);
        assert_eq!(out(), 2);
        egress.record(1, &delivery(), Instant::now(), None);
        egress.abandoned(1);
        egress.record(1, &delivery(), Instant::now(), None);
        egress.written(1, Instant::now(), &metrics);
        assert_eq!(out(), 3, "an abandoned unit is not counted, and the next one still is");
    }

    #[test]
    fn a_delivery_waiting_for_the_socket_holds_its_stamps_not_its_message() {
        let metrics = Metrics::new();
        let mut egress = Egress::new(Protocol::Stomp);
        let d = delivery();
        egress.record(5, &d, Instant::now(), None);
        assert_eq!(Arc::strong_count(&d.message), 1, "the message is freed once encoded");
        drop(d);
        egress.written(5, Instant::now(), &metrics);
        for hop in [Hop::Ingress, Hop::Queue, Hop::Egress, Hop::EndToEnd] {
            assert_eq!(metrics.latency(hop, Protocol::Mqtt, Protocol::Stomp).snapshot().count, 1, "{hop:?}");
        }
    }
}
