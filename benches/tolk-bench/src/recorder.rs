//! What one subscriber observed: an HDR histogram of end-to-end latency and, per publisher, a
//! bitmap of the sequence numbers seen, so that losses, duplicates and reordering are exact
//! counts rather than estimates. Each subscriber owns its recorder (no locks on the receive
//! path); the scenario merges them at the end.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::payload::Stamp;

/// Highest latency the histogram resolves, in microseconds (one hour); slower samples are
/// clamped to it rather than dropped, so a stall still shows as a huge max.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// Three significant digits: 0.1% resolution at every magnitude, as the brief asks.
const SIGNIFICANT_DIGITS: u8 = 3;

/// A fresh latency histogram in microseconds.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, SIGNIFICANT_DIGITS).expect("constant histogram bounds are valid")
}

/// The receive-side record of one subscriber.
#[derive(Debug)]
pub struct Recorder {
    /// End-to-end latency of every first delivery from its send time, in microseconds.
    pub latency: Histogram<u64>,
    /// The same from the time it was due (open loop), in microseconds.
    pub latency_from_due: Histogram<u64>,
    /// `seen[publisher]` has bit `seq` set once that message arrived.
    seen: Vec<Vec<u64>>,
    /// Messages expected from each publisher this subscriber listens to (index = publisher).
    expected: Vec<u64>,
    /// Distinct messages received.
    pub unique: u64,
    /// Messages received again after their first delivery.
    pub duplicates: u64,
    /// Messages that arrived with a lower sequence number than an earlier one from the same
    /// publisher (MQTT promises order per topic and QoS; a broker that reorders shows here).
    pub reordered: u64,
    /// Payloads that were not ours, or carried a publisher or sequence out of range.
    pub foreign: u64,
    highest_seq: Vec<Option<u64>>,
    /// Receive time of the first and last distinct message, ns since the run started.
    pub first_recv_ns: Option<u64>,
    /// See `first_recv_ns`.
    pub last_recv_ns: Option<u64>,
}

impl Recorder {
    /// A recorder expecting `expected[p]` messages from publisher `p` (0 for publishers this
    /// subscriber does not hear).
    pub fn new(expected: Vec<u64>) -> Self {
        let seen = expected.iter().map(|&n| vec![0u64; n.div_ceil(64) as usize]).collect();
        let highest_seq = vec![None; expected.len()];
        Recorder {
            latency: latency_histogram(),
            latency_from_due: latency_histogram(),
            seen,
            expected,
            unique: 0,
            duplicates: 0,
            reordered: 0,
            foreign: 0,
            highest_seq,
            first_recv_ns: None,
            last_recv_ns: None,
        }
    }

    /// Total messages this subscriber should receive.
    pub fn expected_total(&self) -> u64 {
        self.expected.iter().sum()
    }

    /// True once every expected message has arrived.
    pub fn complete(&self) -> bool {
        self.unique >= self.expected_total()
    }

    /// Records one delivery received at `recv_ns`. Returns true if it was a first delivery.
    pub fn record(&mut self, payload: &[u8], recv_ns: u64) -> bool {
        let Some(stamp) = Stamp::decode(payload) else {
            self.foreign += 1;
            return false;
        };
        let p = stamp.publisher as usize;
        let in_range = self.expected.get(p).is_some_and(|&n| stamp.seq < n);
        if !in_range {
            self.foreign += 1;
            return false;
        }
        let (word, bit) = ((stamp.seq / 64) as usize, stamp.seq % 64);
        let Some(slot) = self.seen.get_mut(p).and_then(|w| w.get_mut(word)) else {
            self.foreign += 1;
            return false;
        };
        if *slot & (1 << bit) != 0 {
            self.duplicates += 1;
            return false;
        }
        *slot |= 1 << bit;
        self.unique += 1;
        let highest = &mut self.highest_seq[p];
        match highest {
            Some(h) if stamp.seq < *h => self.reordered += 1,
            _ => *highest = Some(stamp.seq),
        }
        // Nanoseconds to microseconds, rounding up so a sub-microsecond hop is 1 µs, not 0.
        let micros = |from_ns: u64| recv_ns.saturating_sub(from_ns).div_ceil(1000).max(1);
        self.latency.saturating_record(micros(stamp.sent_ns));
        self.latency_from_due.saturating_record(micros(stamp.due_ns.min(stamp.sent_ns)));
        self.first_recv_ns.get_or_insert(recv_ns);
        self.last_recv_ns = Some(recv_ns);
        true
    }

    /// Counts of this subscriber for the report.
    pub fn summary(&self, name: String, closed_by_broker: Option<String>) -> SubscriberSummary {
        let expected = self.expected_total();
        SubscriberSummary {
            name,
            expected,
            received: self.unique,
            lost: expected.saturating_sub(self.unique),
            duplicates: self.duplicates,
            reordered: self.reordered,
            foreign: self.foreign,
            closed_by_broker,
        }
    }
}

/// One subscriber's line in the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubscriberSummary {
    /// Which subscriber (`sub-0`, `slow`, …).
    pub name: String,
    /// Messages it should have received.
    pub expected: u64,
    /// Distinct messages it received.
    pub received: u64,
    /// `expected − received`.
    pub lost: u64,
    /// Deliveries of a message it already had.
    pub duplicates: u64,
    /// Deliveries that came after a later message of the same publisher.
    pub reordered: u64,
    /// Payloads that were not from this run.
    pub foreign: u64,
    /// Why the connection ended, when the broker (not the bench) ended it.
    pub closed_by_broker: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(publisher: u32, seq: u64, sent_ns: u64) -> bytes::Bytes {
        Stamp { publisher, seq, sent_ns, due_ns: sent_ns }.encode(32)
    }

    #[test]
    fn counts_losses_duplicates_and_reordering() {
        let mut r = Recorder::new(vec![3, 2]);
        assert!(r.record(&msg(0, 0, 0), 5_000));
        assert!(r.record(&msg(0, 2, 0), 6_000));
        assert!(r.record(&msg(0, 1, 0), 7_000));
        assert!(!r.record(&msg(0, 1, 0), 8_000));
        assert!(r.record(&msg(1, 1, 0), 9_000));
        assert!(!r.record(&msg(1, 2, 0), 9_000));
        assert!(!r.record(b"not ours", 9_000));
        let s = r.summary("sub".into(), None);
        assert_eq!((s.expected, s.received, s.lost), (5, 4, 1));
        assert_eq!((s.duplicates, s.reordered, s.foreign), (1, 1, 2));
        assert!(!r.complete());
        assert_eq!(r.latency.len(), 4);
        assert_eq!(r.latency.max(), 9);
    }

    #[test]
    fn sub_microsecond_latency_records_as_one() {
        let mut r = Recorder::new(vec![1]);
        r.record(&msg(0, 0, 100), 200);
        assert_eq!(r.latency.min(), 1);
        assert!(r.complete());
    }
}
