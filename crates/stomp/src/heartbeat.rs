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
    /// The longest silence allowed whatever was negotiated (`None`: no bound).
    max_silence: Option<Duration>,
    last_read: Instant,
    last_write: Instant,
}

impl Liveness {
    /// Starts both clocks at `now` (the CONNECTED frame is about to be written). A client is
    /// never allowed more than `max_silence` without a byte, even one that offered no
    /// heart-beats (zero: no bound).
    pub fn new(schedule: HeartBeatSchedule, max_silence: Duration, now: Instant) -> Self {
        let max_silence = (!max_silence.is_zero()).then_some(max_silence);
        Liveness { schedule, max_silence, last_read: now, last_write: now }
    }

    /// Any byte from the client proves it alive, not only EOLs and whole frames.
    pub fn note_read(&mut self, now: Instant) {
        self.last_read = now;
    }

    /// Anything written counts as a heart-beat from the broker.
    pub fn note_write(&mut self, now: Instant) {
        self.last_write = now;
    }

    /// How long the client may stay silent: twice its heart-beat interval, at most
    /// `max_silence`.
    pub fn read_timeout(&self) -> Option<Duration> {
        let negotiated = self.schedule.client_to_server.map(|interval| interval * TOLERANCE_FACTOR);
        match (negotiated, self.max_silence) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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
        let mut l = Liveness::new(
            HeartBeatSchedule { client_to_server: Some(ms(100)), server_to_client: None },
            Duration::ZERO,
            t0,
        );
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
        let mut l = Liveness::new(
            HeartBeatSchedule { client_to_server: None, server_to_client: Some(ms(50)) },
            Duration::ZERO,
            t0,
        );
        assert!(!l.heart_beat_due(t0 + ms(49)));
        assert!(l.heart_beat_due(t0 + ms(50)));
        l.note_write(t0 + ms(50));
        assert_eq!(l.next_deadline(), Some(t0 + ms(100)));
        assert!(!l.is_dead(t0 + ms(1_000_000)));
    }

    #[test]
    fn silence_is_bounded_even_without_heart_beats() {
        let t0 = Instant::now();
        let none = HeartBeatSchedule { client_to_server: None, server_to_client: None };
        let l = Liveness::new(none, ms(300), t0);
        assert!(!l.is_dead(t0 + ms(299)));
        assert!(l.is_dead(t0 + ms(300)));
        let slow = HeartBeatSchedule { client_to_server: Some(ms(1000)), server_to_client: None };
        assert_eq!(Liveness::new(slow, ms(300), t0).read_timeout(), Some(ms(300)), "the bound caps a long interval");
    }

    #[test]
    fn no_schedule_no_deadline() {
        let l = Liveness::new(
            HeartBeatSchedule { client_to_server: None, server_to_client: None },
            Duration::ZERO,
            Instant::now(),
        );
        assert_eq!(l.next_deadline(), None);
    }
}
