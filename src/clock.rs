//! UTC timestamps in the spec's `YYYY-MM-DD HH:MM:SS` form for people and in RFC 3339
//! (`YYYY-MM-DDTHH:MM:SSZ`) for JSON, and the dates DMS exports carry in their names. The
//! calendar is jiff's; this module only fixes the forms lotsync writes and reads.
//!
//! It also names the monotonic clock of delivery's pace and of the service's wait
//! ([`monotonic_now`]): the async runtime's, so that tests under `tokio::time::pause()` move it
//! without sleeping.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::Timestamp;
use std::time::{SystemTime, UNIX_EPOCH};

/// Now on the monotonic clock of delivery: the async runtime's (`tokio::time::Instant`), which
/// is `std::time::Instant::now()` except in tests that paused the runtime's time, where it moves
/// only as the test advances it. Every instant the pace, the outage and the service's wait
/// compare comes from here, and they sleep with `tokio::time`, so that a delivery test runs
/// minutes of pushback in milliseconds.
pub fn monotonic_now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// The moment of Unix seconds, or the epoch for one out of jiff's range (years -9999 to 9999,
/// far from any clock of a running machine).
fn timestamp(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Unix seconds of a `SystemTime`; times before 1970 (no running machine's clock) are 0.
fn unix_secs(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// `YYYY-MM-DD HH:MM:SS` in UTC.
pub fn utc_datetime(at: SystemTime) -> String {
    utc_unix(unix_secs(at))
}

/// `YYYY-MM-DD HH:MM:SS` in UTC of Unix seconds (as the state stores times).
pub fn utc_unix(secs: i64) -> String {
    timestamp(secs.max(0))
        .strftime("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// A moment in UTC to the second, as `lotsync status` shows it: `YYYY-MM-DD HH:MM:SS` for
/// people (`Display`), RFC 3339 in UTC (`2026-11-23T06:12:00Z`) in JSON. JSON in the older
/// `YYYY-MM-DD HH:MM:SS` form is read too (a daemon started before an upgrade answers so).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UtcTime(i64);

impl UtcTime {
    pub fn now() -> UtcTime {
        UtcTime::at(SystemTime::now())
    }

    pub fn at(at: SystemTime) -> UtcTime {
        UtcTime(unix_secs(at))
    }

    /// Unix seconds, as the state stores times.
    pub fn from_unix(secs: i64) -> UtcTime {
        UtcTime(secs.max(0))
    }

    pub fn unix(self) -> i64 {
        self.0
    }

    /// `2026-11-23T06:12:00Z`.
    pub fn rfc3339(self) -> String {
        timestamp(self.0).strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    }

    /// `06:12:00`, for one-line summaries.
    pub fn time_of_day(self) -> String {
        timestamp(self.0).strftime("%H:%M:%S").to_string()
    }

    /// Seconds from `self` to `later` (0 when `later` is earlier).
    pub fn secs_until(self, later: UtcTime) -> u64 {
        u64::try_from(later.0 - self.0).unwrap_or(0)
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` or `YYYY-MM-DD HH:MM:SS` (UTC), exactly those forms.
    pub fn parse(text: &str) -> Option<UtcTime> {
        let b = text.as_bytes();
        let form = match (b.len(), b.get(10)) {
            (19, Some(b' ')) => "%Y-%m-%d %H:%M:%S",
            (20, Some(b'T')) if b[19] == b'Z' => "%Y-%m-%dT%H:%M:%SZ",
            _ => return None,
        };
        let civil = DateTime::strptime(form, text).ok()?;
        let at = civil.to_zoned(TimeZone::UTC).ok()?.timestamp();
        Some(UtcTime::from_unix(at.as_second()))
    }
}

impl std::fmt::Display for UtcTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&utc_unix(self.0))
    }
}

impl serde::Serialize for UtcTime {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.rfc3339())
    }
}

impl<'de> serde::Deserialize<'de> for UtcTime {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        UtcTime::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("not a UTC time (YYYY-MM-DDTHH:MM:SSZ): {text:?}"))
        })
    }
}

/// The moment a file name carries in the form `pattern` names (a profile's `name_date`), as
/// Unix seconds in UTC: the first place in `name` where it fits. `%Y` is four digits, `%m`,
/// `%d`, `%H`, `%M` and `%S` two, `%%` a percent sign, any other character itself; a field the
/// pattern leaves out is 0 (the start of the day). None when no place fits or the date is not
/// one (month 13, February 30th, say). Fixed widths, unlike strptime's: names run digits
/// together (`inv_20261124.csv`).
pub fn time_in_name(name: &str, pattern: &str) -> Option<i64> {
    let name = name.as_bytes();
    (0..name.len()).find_map(|at| time_at(&name[at..], pattern.as_bytes()))
}

/// Why `pattern` cannot be a `name_date`: it needs `%Y`, `%m` and `%d`, and knows no other
/// `%` than those of [`time_in_name`].
pub fn check_name_pattern(pattern: &str) -> Result<(), String> {
    let mut seen = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        match chars.next() {
            Some(f @ ('Y' | 'm' | 'd' | 'H' | 'M' | 'S')) => seen.push(f),
            Some('%') => {}
            other => {
                return Err(format!(
                    "%{} is not known: use %Y, %m, %d, %H, %M, %S or %%",
                    other.map(String::from).unwrap_or_default()
                ))
            }
        }
    }
    match ['Y', 'm', 'd'].iter().find(|f| !seen.contains(f)) {
        Some(f) => Err(format!("%{f} is needed (a date is %Y, %m and %d)")),
        None => Ok(()),
    }
}

/// [`time_in_name`] at the start of `text`.
fn time_at(text: &[u8], pattern: &[u8]) -> Option<i64> {
    let (mut fields, mut at, mut p) = ([1970i16, 1, 1, 0, 0, 0], 0, 0);
    while p < pattern.len() {
        if pattern[p] == b'%' && p + 1 < pattern.len() && pattern[p + 1] != b'%' {
            let (slot, width) = match pattern[p + 1] {
                b'Y' => (0, 4),
                b'm' => (1, 2),
                b'd' => (2, 2),
                b'H' => (3, 2),
                b'M' => (4, 2),
                b'S' => (5, 2),
                _ => return None,
            };
            let digits = text.get(at..at + width)?;
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            fields[slot] = digits.iter().fold(0, |n, d| n * 10 + i16::from(d - b'0'));
            at += width;
            p += 2;
        } else {
            let literal = if pattern[p] == b'%' { p + 1 } else { p };
            if text.get(at) != pattern.get(literal) {
                return None;
            }
            at += 1;
            p = literal + 1;
        }
    }
    let [y, m, d, h, min, s] = fields;
    let date = Date::new(y, i8::try_from(m).ok()?, i8::try_from(d).ok()?).ok()?;
    let time = Time::new(
        i8::try_from(h).ok()?,
        i8::try_from(min).ok()?,
        i8::try_from(s).ok()?,
        0,
    )
    .ok()?;
    let at = date.to_datetime(time).to_zoned(TimeZone::UTC).ok()?;
    Some(at.timestamp().as_second())
}

/// The calendar year in UTC.
pub fn utc_year(at: SystemTime) -> u16 {
    let year = timestamp(unix_secs(at)).to_zoned(TimeZone::UTC).year();
    u16::try_from(year).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_date_is_found_in_a_name_by_its_pattern() {
        let day = |s: &str| UtcTime::parse(s).unwrap().unix();
        assert_eq!(
            time_in_name("inv_20261124.csv", "%Y%m%d"),
            Some(day("2026-11-24 00:00:00"))
        );
        assert_eq!(
            time_in_name("export-2026-11-24_0615.csv", "%Y-%m-%d_%H%M"),
            Some(day("2026-11-24 06:15:00"))
        );
        // The first place that fits is taken; one that is no date is passed over.
        assert_eq!(
            time_in_name("v2-99999999-20261123.csv", "%Y%m%d"),
            Some(day("2026-11-23 00:00:00"))
        );
        assert_eq!(time_in_name("inventory.csv", "%Y%m%d"), None);
        // A real calendar: no February 30th, and 2024 was a leap year.
        assert_eq!(time_in_name("inv_20260230.csv", "%Y%m%d"), None);
        assert_eq!(time_in_name("inv_20261124_2460.csv", "%Y%m%d_%H%M"), None);
        assert_eq!(
            time_in_name("inv_20240229.csv", "%Y%m%d"),
            Some(day("2024-02-29 00:00:00"))
        );
        assert_eq!(time_in_name("2026", "%Y%m%d"), None);
        assert!(check_name_pattern("%Y%m%d").is_ok());
        assert!(check_name_pattern("%d.%m.%Y %%").is_ok());
        assert!(check_name_pattern("%Y%m").unwrap_err().contains("%d"));
        assert!(check_name_pattern("%Y%m%d%q").unwrap_err().contains("%q"));
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(utc_datetime(UNIX_EPOCH), "1970-01-01 00:00:00");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3661); // 2000-02-29 01:01:01
        assert_eq!(utc_datetime(t), "2000-02-29 01:01:01");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_219_199); // 2026-11-20 23:59:59
        assert_eq!(utc_datetime(t), "2026-11-20 23:59:59");
    }

    #[test]
    fn utc_times_go_to_rfc3339_and_back() {
        for secs in [0, 951_782_400 + 3661, 1_795_219_199, 4_107_542_400] {
            let t = UtcTime::from_unix(secs);
            assert_eq!(UtcTime::parse(&t.rfc3339()), Some(t), "{t}");
            assert_eq!(UtcTime::parse(&t.to_string()), Some(t), "{t}");
        }
        let t = UtcTime::from_unix(1_795_219_199);
        assert_eq!(t.rfc3339(), "2026-11-20T23:59:59Z");
        assert_eq!(t.time_of_day(), "23:59:59");
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            "\"2026-11-20T23:59:59Z\""
        );
        for bad in [
            "2026-11-20",
            "2026-13-01T00:00:00Z",
            "2026-02-30 00:00:00",
            "2026-11-20T23:59:59+01:00",
            "x",
        ] {
            assert_eq!(UtcTime::parse(bad), None, "{bad}");
        }
    }
}
