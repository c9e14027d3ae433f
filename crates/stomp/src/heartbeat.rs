//! Heart-beat timers of one connection (spec "Heart-beating"), as pure deadline arithmetic:
//! when the broker must send an EOL, and when a silent client counts as dead. Time is passed
//! in; the connection task owns the clock and the sleeping.

use std::time::{Duration, Instant};

use stomp_codec::HeartBeatSchedule;

/// How many negotiated client intervals may pass without a byte before the client is dropped.
/// The spec leaves the margin to the server; twice the interval absorbs one late or lost
/// heart-beat plus network jitter, as RabbitMQ and ActiveMQ do.
pub const TOLERANCE_FACTOR: u32 = 2;

/// The negotiated schedule plus when each direction last saw traffic.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Liveness {
    schedule: HeartBeatSchedule,
    last_read: Instant,
    last_write: Instant,
}

impl Liveness {
    /// Starts both clocks at `now` (the CONNECTED frame is about to be written).
    pub fn new(schedule: HeartBeatSchedule, now: Instant) -> Self {
        Liveness { schedule, last_read: now, last_write: now }
    }

    /// Any byte from the client proves it alive, not only EOLs and whole frames.
    pub fn note_read(&mut self, now: Instant) {
        self.last_read = now;
    }

    /// Anything written counts as a heart-beat from the broker.
    pub fn note_write(&mut self, now: Instant) {
        self.last_write = now;
    }

    /// How long the client may stay silent, if it is expected to heart-beat.
    pub fn read_timeout(&self) -> Option<Duration> {
        self.schedule.client_to_server.map(|interval| interval * TOLERANCE_FACTOR)
    }

    /// When the client is considered dead unless something arrives.
    pub fn read_deadline(&self) -> Option<Instant> {
        self.read_timeout().map(|timeout| self.last_read + timeout)
    }

    /// When the broker must write an EOL unless it writes something else first.
    pub fn write_deadline(&self) -> Option<Instant> {
        self.schedule.server_to_client.map(|interval| self.last_write + interval)
    }

    /// The earlier of the two deadlines.
    pub fn next_deadline(&self) -> Option<Instant> {
        match (self.read_deadline(), self.write_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the client has been silent for too long at `now`.
    pub fn is_dead(&self, now: Instant) -> bool {
        self.read_deadline().is_some_and(|deadline| now >= deadline)
    }

    /// Whether an EOL heart-beat is due at `now`.
    pub fn heart_beat_due(&self, now: Instant) -> bool {
        self.write_deadline().is_some_and(|deadline| now >= deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn silent_client_dies_after_twice_the_interval() {
        let t0 = Instant::now();
        let mut l = Liveness::new(HeartBeatSchedule { client_to_server: Some(ms(100)), server_to_client: None }, t0);
        assert_eq!(l.next_deadline(), Some(t0 + ms(200)));
        assert!(!l.is_dead(t0 + ms(199)));
        assert!(l.is_dead(t0 + ms(200)));
        l.note_read(t0 + ms(150));
        assert!(!l.is_dead(t0 + ms(300)));
        assert!(!l.heart_beat_due(t0 + ms(10_000)));
    }

    #[test]
    fn broker_heart_beats_when_it_has_written_nothing_for_an_interval() {
        let t0 = Instant::now();
        let mut l = Liveness::new(HeartBeatSchedule { client_to_server: None, server_to_client: Some(ms(50)) }, t0);
        assert!(!l.heart_beat_due(t0 + ms(49)));
        assert!(l.heart_beat_due(t0 + ms(50)));
        l.note_write(t0 + ms(50));
        assert_eq!(l.next_deadline(), Some(t0 + ms(100)));
        assert!(!l.is_dead(t0 + ms(1_000_000)));
    }

    #[test]
    fn no_schedule_no_deadline() {
        let l = Liveness::new(HeartBeatSchedule { client_to_server: None, server_to_client: None }, Instant::now());
        assert_eq!(l.next_deadline(), None);
    }
}
