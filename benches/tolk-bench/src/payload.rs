//! The payload every benchmark message carries: a fixed header (magic, publisher, sequence
//! number, send time, due time) padded with zeros to the requested size. Subscribers decode the header to
//! measure latency and to count losses and duplicates per publisher.

use bytes::{BufMut, Bytes, BytesMut};

/// Marks a payload as ours, so a stray message on the topic is counted as foreign, not as a
/// corrupt sample.
const MAGIC: [u8; 4] = *b"TKB1";

/// Bytes taken by the header; a smaller `--payload` is raised to this.
pub const HEADER_LEN: usize = 4 + 4 + 8 + 8 + 8;

/// What a subscriber learns from one payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Index of the publisher (or of the burst iteration) that sent it.
    pub publisher: u32,
    /// Position of the message in that publisher's sequence, from 0.
    pub seq: u64,
    /// Send time in nanoseconds since the run's [`crate::clock::Clock`] started.
    pub sent_ns: u64,
    /// When an open-loop publisher was due to send it (equal to `sent_ns` in closed loop).
    /// Latency from this time includes any wait the publisher suffered, so a broker stall is
    /// not hidden (coordinated omission); latency from `sent_ns` excludes the publisher's own
    /// timer lateness.
    pub due_ns: u64,
}

impl Stamp {
    /// Builds a payload of `size` bytes (at least [`HEADER_LEN`]) carrying this stamp.
    pub fn encode(&self, size: usize) -> Bytes {
        let size = size.max(HEADER_LEN);
        let mut buf = BytesMut::with_capacity(size);
        buf.put_slice(&MAGIC);
        buf.put_u32_le(self.publisher);
        buf.put_u64_le(self.seq);
        buf.put_u64_le(self.sent_ns);
        buf.put_u64_le(self.due_ns);
        buf.resize(size, 0);
        buf.freeze()
    }

    /// Reads the stamp back; `None` for a payload that is not ours or was cut short (a broker
    /// that truncates payloads would show up here).
    pub fn decode(payload: &[u8]) -> Option<Stamp> {
        let header = payload.get(..HEADER_LEN)?;
        let (magic, rest) = header.split_at(4);
        if magic != MAGIC {
            return None;
        }
        let (publisher, rest) = rest.split_at(4);
        let (seq, rest) = rest.split_at(8);
        let (sent, due) = rest.split_at(8);
        Some(Stamp {
            publisher: u32::from_le_bytes(publisher.try_into().ok()?),
            seq: u64::from_le_bytes(seq.try_into().ok()?),
            sent_ns: u64::from_le_bytes(sent.try_into().ok()?),
            due_ns: u64::from_le_bytes(due.try_into().ok()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_padding() {
        let stamp = Stamp { publisher: 7, seq: 123_456, sent_ns: 987_654_321, due_ns: 987_000_000 };
        let bytes = stamp.encode(100);
        assert_eq!(bytes.len(), 100);
        assert_eq!(Stamp::decode(&bytes), Some(stamp));
        assert_eq!(stamp.encode(1).len(), HEADER_LEN);
    }

    #[test]
    fn foreign_or_short_payloads_are_rejected() {
        assert_eq!(Stamp::decode(b"hello"), None);
        assert_eq!(Stamp::decode(&[0u8; 64]), None);
        let bytes = Stamp { publisher: 1, seq: 2, sent_ns: 3, due_ns: 3 }.encode(64);
        assert_eq!(Stamp::decode(&bytes[..HEADER_LEN - 1]), None);
    }
}
