//! When a full snapshot was exported (its as-of time), so that an older one is never applied
//! after a newer one of the same feed and location: what the file's name says when the
//! profile names its date pattern (`name_date`), else its modification time, and never later
//! than the moment it is read (a date in the future, from a DMS whose clock is ahead or a
//! wrong name, would supersede every export until it passed). It owns reading that time, not
//! what follows from it (the diff supersedes, the daemon orders its queue).

use crate::mapper::Profile;
use std::path::Path;

/// A file's as-of time and where it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsOf {
    /// Unix seconds, UTC.
    pub at: i64,
    pub source: AsOfSource,
    /// What the source said, when it was later than the moment it was read (`at` is then
    /// that moment).
    pub said: Option<i64>,
}

/// A date this far ahead of the clock is in the future; closer, it is taken as the moment
/// it is read all the same, without a word (clocks of a share and of its server differ a
/// little).
pub const FUTURE_TOLERANCE_SECS: i64 = 300;

impl AsOf {
    /// The date is in the future by more than [`FUTURE_TOLERANCE_SECS`]: worth a warning.
    pub fn in_future(&self) -> Option<i64> {
        self.said
            .filter(|said| said.saturating_sub(self.at) > FUTURE_TOLERANCE_SECS)
    }

    fn clamped(at: i64, source: AsOfSource, now: i64) -> AsOf {
        match at > now {
            true => AsOf {
                at: now,
                source,
                said: Some(at),
            },
            false => AsOf {
                at,
                source,
                said: None,
            },
        }
    }
}

impl AsOfSource {
    /// What the as-of time was read from, for a person.
    pub fn name(self) -> &'static str {
        match self {
            AsOfSource::Name => "name",
            AsOfSource::Modified => "modification time",
            AsOfSource::Unknown => "unknown",
        }
    }
}

/// Where an as-of time was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsOfSource {
    /// The date in the file's name, in the profile's `name_date` pattern.
    Name,
    /// The file's modification time.
    Modified,
    /// Neither could be read (the file is gone): the oldest time, judged by nothing.
    Unknown,
}

/// The as-of time of the export at `path` for `profile`, never later than now.
pub fn as_of(path: &Path, profile: &Profile) -> AsOf {
    let now = crate::state::now();
    let named = profile.name_date.as_deref().and_then(|pattern| {
        let name = path.file_name()?.to_string_lossy();
        crate::clock::time_in_name(&name, pattern)
    });
    if let Some(at) = named {
        return AsOf::clamped(at, AsOfSource::Name, now);
    }
    let modified = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_secs()).ok());
    match modified {
        Some(at) => AsOf::clamped(at, AsOfSource::Modified, now),
        None => AsOf {
            at: 0,
            source: AsOfSource::Unknown,
            said: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    #[test]
    fn the_name_says_when_the_profile_names_its_pattern_else_the_modification_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inv_20261124.csv");
        std::fs::write(&path, "VIN\n").unwrap();
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
        let modified = as_of(&path, &Profile::auto());
        assert_eq!(modified.source, AsOfSource::Modified);
        let expected = hour_ago
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert_eq!(modified.at, expected);

        let mut profile = Profile::auto();
        profile.name_date = Some("%Y%m%d".into());
        let named = as_of(&path, &profile);
        assert_eq!(named.source, AsOfSource::Name);
        assert_eq!(
            crate::clock::utc_unix(named.at),
            "2026-11-24 00:00:00".to_owned()
        );
        // A name without the date: its modification time.
        let other = dir.path().join("inventory.csv");
        std::fs::write(&other, "VIN\n").unwrap();
        assert_eq!(as_of(&other, &profile).source, AsOfSource::Modified);
    }

    /// A name or a modification time in the future is taken as the moment it is read, and
    /// says what it said.
    #[test]
    fn a_date_in_the_future_is_taken_as_now() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inv_29991231.csv");
        std::fs::write(&path, "VIN\n").unwrap();
        let two_days = SystemTime::now() + Duration::from_secs(2 * 24 * 3600);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(two_days)
            .unwrap();
        let before = crate::state::now();
        let modified = as_of(&path, &Profile::auto());
        assert_eq!(modified.source, AsOfSource::Modified);
        assert!((before..before + 5).contains(&modified.at), "{modified:?}");
        let said = modified.in_future().expect("said to be in the future");
        assert!(said >= before + 2 * 24 * 3600 - 5, "{modified:?}");

        let mut profile = Profile::auto();
        profile.name_date = Some("%Y%m%d".into());
        let named = as_of(&path, &profile);
        assert_eq!(named.source, AsOfSource::Name);
        assert!((before..before + 5).contains(&named.at), "{named:?}");
        assert_eq!(
            named.said.map(crate::clock::utc_unix),
            Some("2999-12-31 00:00:00".to_owned())
        );
    }
}
