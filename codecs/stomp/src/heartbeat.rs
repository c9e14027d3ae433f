//! [`HeartBeat`] header values and the negotiation rule of spec "Heart-beating". Pure
//! arithmetic: timers and the grace period for late heart-beats belong to the session.

use std::fmt;
use std::time::Duration;

use thiserror::Error;

/// One side's `heart-beat` header: `<outgoing>,<incoming>` in milliseconds.
///
/// Spec "Heart-beating": the first number is what the sender *can do* (0: it cannot send
/// heart-beats, otherwise the smallest interval between its heart-beats it can guarantee); the
/// second is what it *would like* (0: it does not want heart-beats, otherwise the desired
/// interval). A client sends `cx,cy` in CONNECT, the server answers `sx,sy` in CONNECTED.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HeartBeat {
    /// Smallest interval, in ms, at which this side can send; 0 = cannot send.
    pub outgoing_ms: u64,
    /// Interval, in ms, at which this side wants to receive; 0 = does not want any.
    pub incoming_ms: u64,
}

/// The `heart-beat` header is not two decimal numbers separated by a comma.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid heart-beat header {value:?}: expected \"<ms>,<ms>\"")]
pub struct HeartBeatError {
    /// The header value as received, at most 64 chars.
    pub value: String,
}

/// What both sides agreed on; `None` means no heart-beating in that direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeartBeatSchedule {
    /// How often the client will send something. The server should treat the client as dead
    /// after this interval plus a grace margin of its choosing without any data.
    pub client_to_server: Option<Duration>,
    /// How often the server must send something (a frame or an EOL heart-beat).
    pub server_to_client: Option<Duration>,
}

impl HeartBeat {
    /// No heart-beating either way: the meaning of `0,0` and of a missing header.
    pub const NONE: HeartBeat = HeartBeat { outgoing_ms: 0, incoming_ms: 0 };

    /// Builds a value from the two intervals in milliseconds.
    pub const fn new(outgoing_ms: u64, incoming_ms: u64) -> Self {
        Self { outgoing_ms, incoming_ms }
    }

    /// Reads a `heart-beat` header; a missing header (`None`) is treated as `0,0` as the spec
    /// requires. Blanks around each number are tolerated.
    pub fn parse(value: Option<&str>) -> Result<HeartBeat, HeartBeatError> {
        let Some(value) = value else {
            return Ok(HeartBeat::NONE);
        };
        let invalid = || HeartBeatError { value: value.chars().take(64).collect() };
        let (outgoing, incoming) = value.split_once(',').ok_or_else(invalid)?;
        let number = |text: &str| {
            let text = text.trim();
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid());
            }
            text.parse::<u64>().map_err(|_| invalid())
        };
        Ok(HeartBeat { outgoing_ms: number(outgoing)?, incoming_ms: number(incoming)? })
    }

    /// Applies the spec's rule to the client's `cx,cy` and the server's `sx,sy`:
    /// client→server heart-beats happen every MAX(cx, sy) ms unless cx or sy is 0, and
    /// server→client heart-beats every MAX(sx, cy) ms unless sx or cy is 0.
    pub fn negotiate(client: HeartBeat, server: HeartBeat) -> HeartBeatSchedule {
        let direction = |can_send: u64, wants: u64| {
            (can_send != 0 && wants != 0).then(|| Duration::from_millis(can_send.max(wants)))
        };
        HeartBeatSchedule {
            client_to_server: direction(client.outgoing_ms, server.incoming_ms),
            server_to_client: direction(server.outgoing_ms, client.incoming_ms),
        }
    }
}

impl fmt::Display for HeartBeat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{}", self.outgoing_ms, self.incoming_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(value: u64) -> Option<Duration> {
        Some(Duration::from_millis(value))
    }

    #[test]
    fn parses_and_prints() {
        let hb = HeartBeat::parse(Some("100,200")).unwrap();
        assert_eq!(hb, HeartBeat::new(100, 200));
        assert_eq!(hb.to_string(), "100,200");
        assert_eq!(HeartBeat::parse(None), Ok(HeartBeat::NONE));
        assert_eq!(HeartBeat::parse(Some(" 5 , 6 ")), Ok(HeartBeat::new(5, 6)));
    }

    #[test]
    fn rejects_malformed_values() {
        for bad in ["", "100", "100,", ",1", "a,b", "-1,0", "1,2,3", "99999999999999999999999,0"] {
            assert!(HeartBeat::parse(Some(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn client_to_server_uses_max_of_cx_and_sy() {
        // Spec "Heart-beating": client→server every MAX(cx, sy) ms.
        let schedule = HeartBeat::negotiate(HeartBeat::new(100, 0), HeartBeat::new(0, 300));
        assert_eq!(schedule.client_to_server, ms(300));
        assert_eq!(schedule.server_to_client, None);
        let schedule = HeartBeat::negotiate(HeartBeat::new(500, 0), HeartBeat::new(0, 300));
        assert_eq!(schedule.client_to_server, ms(500));
    }

    #[test]
    fn server_to_client_uses_max_of_sx_and_cy() {
        // Spec "Heart-beating": "In the other direction, sx and cy are used the same way."
        let schedule = HeartBeat::negotiate(HeartBeat::new(0, 200), HeartBeat::new(1000, 0));
        assert_eq!(schedule.server_to_client, ms(1000));
        assert_eq!(schedule.client_to_server, None);
        let schedule = HeartBeat::negotiate(HeartBeat::new(0, 2000), HeartBeat::new(1000, 0));
        assert_eq!(schedule.server_to_client, ms(2000));
    }

    #[test]
    fn zero_on_either_side_disables_that_direction() {
        // cx = 0: the client cannot send.
        let s = HeartBeat::negotiate(HeartBeat::new(0, 100), HeartBeat::new(100, 100));
        assert_eq!((s.client_to_server, s.server_to_client), (None, ms(100)));
        // sy = 0: the server does not want to receive.
        let s = HeartBeat::negotiate(HeartBeat::new(100, 100), HeartBeat::new(100, 0));
        assert_eq!((s.client_to_server, s.server_to_client), (None, ms(100)));
        // sx = 0: the server cannot send.
        let s = HeartBeat::negotiate(HeartBeat::new(100, 100), HeartBeat::new(0, 100));
        assert_eq!((s.client_to_server, s.server_to_client), (ms(100), None));
        // cy = 0: the client does not want to receive.
        let s = HeartBeat::negotiate(HeartBeat::new(100, 0), HeartBeat::new(100, 100));
        assert_eq!((s.client_to_server, s.server_to_client), (ms(100), None));
        let s = HeartBeat::negotiate(HeartBeat::NONE, HeartBeat::new(5000, 5000));
        assert_eq!((s.client_to_server, s.server_to_client), (None, None));
    }
}
