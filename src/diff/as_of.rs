//! When a full snapshot was exported (its as-of time), so that an older one is never applied
//! after a newer one of the same feed and location: what the file's name says when the
//! profile names its date pattern (`name_date`), else its modification time. It owns reading
//! that time, not what follows from it (the diff supersedes, the daemon orders its queue).

use crate::mapper::Profile;
use std::path::Path;

/// A file's as-of time and where it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsOf {
    /// Unix seconds, UTC.
    pub at: i64,
    pub source: AsOfSource,
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

/// The as-of time of the export at `path` for `profile`.
pub fn as_of(path: &Path, profile: &Profile) -> AsOf {
    let named = profile.name_date.as_deref().and_then(|pattern| {
        let name = path.file_name()?.to_string_lossy();
        crate::clock::time_in_name(&name, pattern)
    });
    if let Some(at) = named {
        return AsOf {
            at,
            source: AsOfSource::Name,
        };
    }
    let modified = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_secs()).ok());
    match modified {
        Some(at) => AsOf {
            at,
            source: AsOfSource::Modified,
        },
        None => AsOf {
            at: 0,
            source: AsOfSource::Unknown,
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
}
