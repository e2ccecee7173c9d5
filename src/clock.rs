//! UTC timestamps in the spec's `YYYY-MM-DD HH:MM:SS` form, without a calendar crate.

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_known_instants() {
        assert_eq!(utc_datetime(UNIX_EPOCH), "1970-01-01 00:00:00");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3661); // 2000-02-29 01:01:01
        assert_eq!(utc_datetime(t), "2000-02-29 01:01:01");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_219_199); // 2026-11-20 23:59:59
        assert_eq!(utc_datetime(t), "2026-11-20 23:59:59");
    }
}
