//! `xsd:dateTime` and `xsd:duration`, as used by WS-BaseNotification termination times
//! (`wsnt:AbsoluteOrRelativeTimeType`, the union of the two) and by the times tolk writes in
//! responses and fault details. No clock is read here: relative times are resolved against a
//! `now` the caller passes in.
//!
//! Choices where XML Schema leaves room:
//! - A dateTime without a timezone is taken as UTC (Schema calls it "local, unknown").
//! - Years are four digits, 0001–9999; fractional seconds are truncated to milliseconds.
//! - In durations a year is 365 days and a month 30 days, so that a duration is a fixed
//!   number of milliseconds without a calendar. Negative durations are refused: a
//!   termination time in the past cannot be honoured.

/// A termination time as a client may send it: absolute or relative to now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminationTime {
    /// An `xsd:dateTime`, in milliseconds since the Unix epoch (UTC).
    Absolute {
        /// Milliseconds since 1970-01-01T00:00:00Z.
        unix_millis: i64,
    },
    /// An `xsd:duration` from now, in milliseconds.
    Relative {
        /// Length of the duration.
        millis: u64,
    },
}

/// Why a time value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// Not the lexical form of the expected type.
    #[error("{text:?} is not a valid {expected}")]
    Syntax {
        /// The text as received.
        text: String,
        /// `xsd:dateTime`, `xsd:duration`, or both.
        expected: &'static str,
    },
    /// Well-formed but outside what tolk accepts.
    #[error("{text:?} is out of range: {reason}")]
    OutOfRange {
        /// The text as received.
        text: String,
        /// Which component is out of range.
        reason: &'static str,
    },
    /// A negative duration.
    #[error("negative duration {text:?}")]
    Negative {
        /// The text as received.
        text: String,
    },
}

impl TerminationTime {
    /// Parses `AbsoluteOrRelativeTimeType`: a duration when it starts with `P` (or `-P`),
    /// otherwise a dateTime.
    pub fn parse(text: &str) -> Result<Self, TimeError> {
        let t = text.trim();
        if t.starts_with('P') || t.starts_with("-P") {
            parse_duration(t).map(|millis| TerminationTime::Relative { millis })
        } else {
            parse_date_time(t).map(|unix_millis| TerminationTime::Absolute { unix_millis })
        }
    }

    /// The absolute time in Unix milliseconds, given the current time (saturating).
    pub fn resolve(&self, now_unix_millis: i64) -> i64 {
        match *self {
            TerminationTime::Absolute { unix_millis } => unix_millis,
            TerminationTime::Relative { millis } => {
                now_unix_millis.saturating_add(i64::try_from(millis).unwrap_or(i64::MAX))
            }
        }
    }
}

const MILLIS_PER_DAY: i64 = 86_400_000;

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(year) => 29,
        _ => 28,
    }
}

/// A byte cursor over an ASCII lexical form.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn eat(&mut self, b: u8) -> bool {
        let hit = self.bytes.get(self.pos) == Some(&b);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Exactly `n` digits.
    fn fixed(&mut self, n: usize) -> Option<u32> {
        let digits = self.bytes.get(self.pos..self.pos + n)?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.pos += n;
        Some(digits.iter().fold(0u32, |acc, d| acc * 10 + u32::from(d - b'0')))
    }

    /// One or more digits, as text.
    fn digits(&mut self) -> Option<&'a [u8]> {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        let bytes = self.bytes;
        (self.pos > start).then(|| &bytes[start..self.pos])
    }

    fn done(&self) -> bool {
        self.pos == self.bytes.len()
    }
}

/// First three digits of a fraction, as milliseconds (truncating).
fn fraction_millis(digits: &[u8]) -> u64 {
    (0..3).fold(0u64, |acc, i| acc * 10 + u64::from(digits.get(i).map_or(0, |d| d - b'0')))
}

/// Parses an `xsd:dateTime` (XML Schema Part 2 §3.2.7) to Unix milliseconds.
pub fn parse_date_time(text: &str) -> Result<i64, TimeError> {
    let t = text.trim();
    let syntax = || TimeError::Syntax { text: text.to_owned(), expected: "xsd:dateTime" };
    let range = |reason| TimeError::OutOfRange { text: text.to_owned(), reason };
    let mut c = Cursor { bytes: t.as_bytes(), pos: 0 };
    let year = c.fixed(4).ok_or_else(syntax)?;
    let month = c.eat(b'-').then(|| c.fixed(2)).flatten().ok_or_else(syntax)?;
    let day = c.eat(b'-').then(|| c.fixed(2)).flatten().ok_or_else(syntax)?;
    let hour = c.eat(b'T').then(|| c.fixed(2)).flatten().ok_or_else(syntax)?;
    let minute = c.eat(b':').then(|| c.fixed(2)).flatten().ok_or_else(syntax)?;
    let second = c.eat(b':').then(|| c.fixed(2)).flatten().ok_or_else(syntax)?;
    let fraction = if c.eat(b'.') { Some(c.digits().ok_or_else(syntax)?) } else { None };
    let offset_minutes: i64 = match c.peek() {
        None => 0,
        Some(b'Z') => {
            c.pos += 1;
            0
        }
        Some(sign @ (b'+' | b'-')) => {
            c.pos += 1;
            let hh = c.fixed(2).ok_or_else(syntax)?;
            let mm = c.eat(b':').then(|| c.fixed(2)).flatten().ok_or_else(syntax)?;
            if mm > 59 || hh > 14 || (hh == 14 && mm > 0) {
                return Err(range("timezone offset"));
            }
            let minutes = i64::from(hh * 60 + mm);
            if sign == b'-' { -minutes } else { minutes }
        }
        Some(_) => return Err(syntax()),
    };
    if !c.done() {
        return Err(syntax());
    }
    if year == 0 {
        return Err(range("year 0000"));
    }
    if !(1..=12).contains(&month) {
        return Err(range("month"));
    }
    if day == 0 || day > days_in_month(i64::from(year), month) {
        return Err(range("day"));
    }
    let millis = fraction.map_or(0, fraction_millis);
    let end_of_day = hour == 24 && minute == 0 && second == 0 && fraction.is_none_or(|f| f.iter().all(|&d| d == b'0'));
    if (hour > 23 && !end_of_day) || minute > 59 || second > 59 {
        return Err(range("time of day"));
    }
    let days = days_from_civil(i64::from(year), month, day);
    let seconds = i64::from(hour) * 3600 + i64::from(minute) * 60 + i64::from(second);
    Ok(days * MILLIS_PER_DAY + seconds * 1000 + millis as i64 - offset_minutes * 60_000)
}

/// Parses an `xsd:duration` (XML Schema Part 2 §3.2.6) to milliseconds; see the module docs
/// for years and months.
pub fn parse_duration(text: &str) -> Result<u64, TimeError> {
    let t = text.trim();
    let syntax = || TimeError::Syntax { text: text.to_owned(), expected: "xsd:duration" };
    let too_big = || TimeError::OutOfRange { text: text.to_owned(), reason: "duration overflows" };
    let (negative, rest) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t),
    };
    let mut c = Cursor { bytes: rest.as_bytes(), pos: 0 };
    if !c.eat(b'P') {
        return Err(syntax());
    }
    const DAY: u64 = 86_400_000;
    // (designator, unit in ms, allowed after 'T')
    const UNITS: [(u8, u64, bool); 6] = [
        (b'Y', 365 * DAY, false),
        (b'M', 30 * DAY, false),
        (b'D', DAY, false),
        (b'H', 3_600_000, true),
        (b'M', 60_000, true),
        (b'S', 1000, true),
    ];
    let mut total: u64 = 0;
    let mut next_unit = 0usize;
    let mut in_time = false;
    let mut components = 0usize;
    let mut time_components = 0usize;
    while !c.done() {
        if c.eat(b'T') {
            if in_time {
                return Err(syntax());
            }
            in_time = true;
            next_unit = next_unit.max(3);
            continue;
        }
        let digits = c.digits().ok_or_else(syntax)?;
        let fraction = if c.eat(b'.') { Some(c.digits().ok_or_else(syntax)?) } else { None };
        let designator = c.peek().ok_or_else(syntax)?;
        c.pos += 1;
        let index =
            (next_unit..UNITS.len()).find(|&i| UNITS[i].0 == designator && UNITS[i].2 == in_time).ok_or_else(syntax)?;
        if fraction.is_some() && designator != b'S' {
            return Err(syntax());
        }
        next_unit = index + 1;
        components += 1;
        time_components += usize::from(in_time);
        let value = std::str::from_utf8(digits).ok().and_then(|d| d.parse::<u64>().ok()).ok_or_else(too_big)?;
        let part = value.checked_mul(UNITS[index].1).ok_or_else(too_big)?;
        total = total.checked_add(part).ok_or_else(too_big)?;
        total = total.checked_add(fraction.map_or(0, fraction_millis)).ok_or_else(too_big)?;
    }
    if components == 0 || (in_time && time_components == 0) {
        return Err(syntax());
    }
    if negative && total > 0 {
        return Err(TimeError::Negative { text: text.to_owned() });
    }
    Ok(total)
}

/// Earliest and latest instants [`format_date_time`] can write (four-digit years).
const MIN_MILLIS: i64 = -62_135_596_800_000; // 0001-01-01T00:00:00Z
const MAX_MILLIS: i64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z

/// Writes Unix milliseconds as an `xsd:dateTime` in UTC: `2024-05-01T12:00:00Z`, with
/// `.mmm` only when the milliseconds are not zero. Clamped to years 0001–9999.
pub fn format_date_time(unix_millis: i64) -> String {
    let t = unix_millis.clamp(MIN_MILLIS, MAX_MILLIS);
    let days = t.div_euclid(MILLIS_PER_DAY);
    let ms_of_day = t.rem_euclid(MILLIS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let secs = ms_of_day / 1000;
    let millis = ms_of_day % 1000;
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    if millis == 0 {
        format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z")
    } else {
        format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{millis:03}Z")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn date_times() {
        let cases = [
            ("1970-01-01T00:00:00Z", 0),
            ("1970-01-01T00:00:00", 0),
            ("2000-03-01T00:00:00Z", 951_868_800_000),
            ("2024-02-29T12:30:15.250Z", 1_709_209_815_250),
            ("2024-02-29T14:30:15.2509+02:00", 1_709_209_815_250),
            ("2024-02-29T07:30:15.25-05:00", 1_709_209_815_250),
            ("1999-12-31T24:00:00Z", 946_684_800_000),
            ("  2038-01-19T03:14:07Z \n", 2_147_483_647_000),
            ("0001-01-01T00:00:00Z", MIN_MILLIS),
            ("9999-12-31T23:59:59.999Z", MAX_MILLIS),
        ];
        for (text, millis) in cases {
            assert_eq!(parse_date_time(text), Ok(millis), "{text}");
        }
        for bad in [
            "",
            "2024-02-30T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-01-01T24:00:01Z",
            "2024-01-01T00:60:00Z",
            "2024-01-01",
            "2024-01-01T00:00:00+15:00",
            "2024-01-01T00:00:00.Z",
            "24-01-01T00:00:00Z",
            "2024-01-01T00:00:00ZZ",
            "0000-01-01T00:00:00Z",
            "-2024-01-01T00:00:00Z",
            "2024-01-01 00:00:00Z",
            "PT1H",
        ] {
            assert!(parse_date_time(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        let cases = [
            ("PT10M", 600_000),
            ("PT1H", 3_600_000),
            ("P1D", 86_400_000),
            ("P1DT1H1M1.5S", 90_061_500),
            ("PT0.0011S", 1),
            ("P1Y", 365 * 86_400_000),
            ("P1M", 30 * 86_400_000),
            ("P1Y2M3DT4H5M6S", (365 + 60 + 3) * 86_400_000 + 4 * 3_600_000 + 5 * 60_000 + 6000),
            ("PT36H", 129_600_000),
            ("-PT0S", 0),
        ];
        for (text, millis) in cases {
            assert_eq!(parse_duration(text), Ok(millis), "{text}");
        }
        for bad in
            ["", "P", "PT", "1D", "P1H", "PT1D", "P1S", "PT1M1H", "P1.5D", "P1DT", "PTH", "PT1.S", "P-1D", "P1D1D"]
        {
            assert!(matches!(parse_duration(bad), Err(TimeError::Syntax { .. })), "{bad}");
        }
        assert!(matches!(parse_duration("-PT1S"), Err(TimeError::Negative { .. })));
        assert!(matches!(parse_duration("P99999999999999999999D"), Err(TimeError::OutOfRange { .. })));
        assert!(matches!(parse_duration("P999999999999999D"), Err(TimeError::OutOfRange { .. })));
    }

    #[test]
    fn termination_time_union() {
        assert_eq!(TerminationTime::parse("PT1M"), Ok(TerminationTime::Relative { millis: 60_000 }));
        assert_eq!(
            TerminationTime::parse("1970-01-01T00:01:00Z"),
            Ok(TerminationTime::Absolute { unix_millis: 60_000 })
        );
        assert_eq!(TerminationTime::Relative { millis: 5 }.resolve(10), 15);
        assert_eq!(TerminationTime::Relative { millis: u64::MAX }.resolve(10), i64::MAX);
        assert!(TerminationTime::parse("tomorrow").is_err());
    }

    #[test]
    fn formatting() {
        assert_eq!(format_date_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_date_time(1_709_209_815_250), "2024-02-29T12:30:15.250Z");
        assert_eq!(format_date_time(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(format_date_time(i64::MAX), "9999-12-31T23:59:59.999Z");
        assert_eq!(format_date_time(i64::MIN), "0001-01-01T00:00:00Z");
    }

    proptest! {
        #[test]
        fn format_parse_round_trip(millis in MIN_MILLIS..=MAX_MILLIS) {
            prop_assert_eq!(parse_date_time(&format_date_time(millis)), Ok(millis));
        }

        #[test]
        fn arbitrary_text_never_panics(text in ".{0,40}") {
            let _ = TerminationTime::parse(&text);
            let _ = parse_duration(&text);
            let _ = parse_date_time(&text);
        }
    }
}
