//! UTC timestamps in the spec's `YYYY-MM-DD HH:MM:SS` form for people and in RFC 3339
//! (`YYYY-MM-DDTHH:MM:SSZ`) for JSON, without a calendar crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// `YYYY-MM-DD HH:MM:SS` in UTC.
pub fn utc_datetime(at: SystemTime) -> String {
    // Times before 1970 do not occur here (clocks of running machines); they print as 1970.
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// `YYYY-MM-DD HH:MM:SS` in UTC of Unix seconds (as the state stores times).
pub fn utc_unix(secs: i64) -> String {
    utc_datetime(UNIX_EPOCH + std::time::Duration::from_secs(u64::try_from(secs).unwrap_or(0)))
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
        UtcTime(
            at.duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64),
        )
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
        let mut s = utc_unix(self.0);
        s.replace_range(10..11, "T");
        s.push('Z');
        s
    }

    /// `06:12:00`, for one-line summaries.
    pub fn time_of_day(self) -> String {
        let s = utc_unix(self.0);
        s.get(11..).unwrap_or(&s).to_owned()
    }

    /// Seconds from `self` to `later` (0 when `later` is earlier).
    pub fn secs_until(self, later: UtcTime) -> u64 {
        u64::try_from(later.0 - self.0).unwrap_or(0)
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` or `YYYY-MM-DD HH:MM:SS` (UTC).
    pub fn parse(text: &str) -> Option<UtcTime> {
        let b = text.as_bytes();
        let plain = b.len() == 19 && b[10] == b' ';
        let rfc = b.len() == 20 && b[10] == b'T' && b[19] == b'Z';
        if !(plain || rfc) || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
            return None;
        }
        let num = |from: usize, to: usize| -> Option<i64> {
            let part = text.get(from..to)?;
            part.bytes()
                .all(|c| c.is_ascii_digit())
                .then(|| part.parse().ok())
                .flatten()
        };
        let (y, m, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
        let (h, min, s) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
        if !(1..=12).contains(&m) || !(1..=31).contains(&d) || h > 23 || min > 59 || s > 60 {
            return None;
        }
        let days = days_from_civil(y, m as u32, d as u32);
        Some(UtcTime::from_unix(days * 86_400 + h * 3600 + min * 60 + s))
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
/// one (month 13, say).
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
    let (mut fields, mut at, mut p) = ([1970i64, 1, 1, 0, 0, 0], 0, 0);
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
            fields[slot] = digits.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0'));
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
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || h > 23 || min > 59 || s > 60 {
        return None;
    }
    let days = days_from_civil(y, m as u32, d as u32);
    Some(days * 86_400 + h * 3600 + min * 60 + s)
}

/// The calendar year in UTC.
pub fn utc_year(at: SystemTime) -> u16 {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (y, _, _) = civil_from_days((secs / 86_400) as i64);
    u16::try_from(y).unwrap_or(u16::MAX)
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm,
/// "chrono-Compatible Low-Level Date Algorithms").
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the inverse of [`civil_from_days`],
/// from the same paper).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = y - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from(if m > 2 { m - 3 } else { m + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
            "2026-11-20T23:59:59+01:00",
            "x",
        ] {
            assert_eq!(UtcTime::parse(bad), None, "{bad}");
        }
    }
}
