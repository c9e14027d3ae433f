//! Subscription lifetimes: the wall clock in the Unix milliseconds WS-N speaks, and the
//! termination time granted for a Subscribe's InitialTerminationTime or a Renew's
//! TerminationTime (WS-BaseNotification 1.3 §4.2 and §6.1).
//!
//! A request without a time gets the configured default (Subscribe) or the maximum (Renew with
//! `xsi:nil`, which asks for no termination). A time beyond the maximum is granted the maximum
//! (the spec lets the producer choose; the response states the time set). A time that is not an
//! `xsd:dateTime` or `xsd:duration`, or is not in the future, is refused with the fault the
//! operation declares, carrying the acceptable range.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wsn_xml::{FaultKind, TerminationTime};

use crate::fault::{Refusal, shorten};

/// Now, in milliseconds since the Unix epoch.
pub(crate) fn now_unix_millis() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Which request asked, for the fault kind and the meaning of "no time given".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// Subscribe's InitialTerminationTime: absent means the default lifetime.
    Subscribe,
    /// Renew's TerminationTime: `xsi:nil` means "never", granted as the maximum.
    Renew,
}

/// The termination time to set, in Unix milliseconds.
pub(crate) fn grant(
    ask: Ask,
    requested: Option<&str>,
    now: i64,
    default: Duration,
    maximum: Duration,
) -> Result<i64, Refusal> {
    let latest = now.saturating_add(millis(maximum));
    let refuse = |reason: String| {
        let (minimum_unix_millis, maximum_unix_millis) = (now.saturating_add(1), Some(latest));
        let kind = match ask {
            Ask::Subscribe => {
                FaultKind::UnacceptableInitialTerminationTime { minimum_unix_millis, maximum_unix_millis }
            }
            Ask::Renew => FaultKind::UnacceptableTerminationTime { minimum_unix_millis, maximum_unix_millis },
        };
        Refusal::new(kind, reason)
    };
    let at = match (requested, ask) {
        (None, Ask::Subscribe) => now.saturating_add(millis(default)),
        (None, Ask::Renew) => latest,
        (Some(text), _) => TerminationTime::parse(text)
            .map_err(|e| refuse(format!("termination time {:?} refused: {e}", shorten(text))))?
            .resolve(now),
    };
    if at <= now {
        return Err(refuse(format!("termination time {} is not in the future", wsn_xml::format_date_time(at))));
    }
    Ok(at.min(latest))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_000;
    const HOUR: Duration = Duration::from_secs(3600);
    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn defaults_durations_dates_and_clamping() {
        assert_eq!(grant(Ask::Subscribe, None, NOW, HOUR, DAY), Ok(NOW + 3_600_000));
        assert_eq!(grant(Ask::Renew, None, NOW, HOUR, DAY), Ok(NOW + 86_400_000));
        assert_eq!(grant(Ask::Subscribe, Some("PT10M"), NOW, HOUR, DAY), Ok(NOW + 600_000));
        assert_eq!(grant(Ask::Subscribe, Some("P30D"), NOW, HOUR, DAY), Ok(NOW + 86_400_000), "clamped");
        assert_eq!(grant(Ask::Subscribe, Some("2023-11-14T22:14:00Z"), NOW, HOUR, DAY), Ok(1_700_000_040_000));
    }

    #[test]
    fn past_and_malformed_times_are_refused_with_the_operation_fault() {
        let past = grant(Ask::Subscribe, Some("2001-01-01T00:00:00Z"), NOW, HOUR, DAY).unwrap_err();
        assert!(matches!(past.kind, FaultKind::UnacceptableInitialTerminationTime { .. }));
        let junk = grant(Ask::Renew, Some("tomorrow"), NOW, HOUR, DAY).unwrap_err();
        assert!(matches!(junk.kind, FaultKind::UnacceptableTerminationTime { .. }));
        assert!(grant(Ask::Subscribe, Some("PT0S"), NOW, HOUR, DAY).is_err());
    }
}
