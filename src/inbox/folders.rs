//! A feed's folders and a file's way through them, never deleting an export:
//! `inbox/` → `processing/` → `archive/YYYY-MM-DD/` (with its report), or `held/` (the safety
//! guard, or a file that stayed incomplete), or `failed/` (unreadable, or a name lotsync cannot
//! file, with the reason in its report).
//!
//! This is the one owner of the layout: the pipeline asks it where a file is ([`Claimed`]) and
//! where it goes; no one else spells the folders' names. A file in `processing/` has a draft
//! of its report beside it once its plan is made, so that a file resumed after a crash is
//! reported as its first attempt found it.

use super::report::FileReport;
use std::collections::HashSet;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

const PROCESSING: &str = "processing";
const ARCHIVE: &str = "archive";
const HELD: &str = "held";
const FAILED: &str = "failed";
const REPORT_SUFFIX: &str = ".report.json";

/// The longest file name lotsync files (in bytes): its report (`<name>.report.json`) and a
/// `-NNNNN` added when the name is taken must still fit in the 255 bytes file systems allow.
pub const NAME_LIMIT: usize = 255 - REPORT_SUFFIX.len() - "-99999".len();

/// What a path in the inbox is.
#[derive(Debug)]
pub enum Arrival {
    /// An export to take, with its metadata.
    Export(std::fs::Metadata),
    /// A link to something outside the inbox: left alone, with a warning.
    OutsideLink,
    /// A folder: left alone (lotsync takes files), with a word.
    Folder,
    /// Not an export (a partial or hidden file, a report).
    Ignored,
}

/// A file taken into `processing/`: where it is, and whether an earlier run took it (a crash
/// or a stop interrupted it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    pub path: PathBuf,
    pub resumed: bool,
}

/// A report in the archive and the export filed beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveEntry {
    pub report: PathBuf,
    pub export: PathBuf,
}

/// The folders of one feed, all inside its inbox (so every move is a rename on one file
/// system).
#[derive(Debug, Clone)]
pub struct FeedFolders {
    inbox: PathBuf,
}

impl FeedFolders {
    pub fn new(inbox: &Path) -> FeedFolders {
        FeedFolders {
            inbox: inbox.to_owned(),
        }
    }

    pub fn inbox(&self) -> &Path {
        &self.inbox
    }

    /// Creates the working folders inside the inbox, which must exist: a missing inbox is
    /// said, not made (`lotsync run --create-dirs` makes them on purpose).
    pub fn ensure(&self) -> io::Result<()> {
        if !self.inbox.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the inbox does not exist (lotsync run --create-dirs creates it)",
            ));
        }
        for dir in [PROCESSING, ARCHIVE, HELD, FAILED] {
            std::fs::create_dir_all(self.inbox.join(dir))?;
        }
        Ok(())
    }

    /// Export files waiting in the inbox, oldest first (see [`FeedFolders::arrival`]). Says
    /// nothing of what it skips: the watcher tells each once.
    pub fn arrivals(&self) -> io::Result<Vec<PathBuf>> {
        let mut found = Vec::new();
        for path in self.names()? {
            match self.arrival(&path) {
                Ok(Arrival::Export(meta)) => found.push((meta.modified()?, path)),
                Ok(Arrival::OutsideLink | Arrival::Folder | Arrival::Ignored) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        found.sort();
        Ok(found.into_iter().map(|(_, p)| p).collect())
    }

    /// Every entry directly in the inbox (files and folders alike).
    pub fn names(&self) -> io::Result<HashSet<PathBuf>> {
        std::fs::read_dir(&self.inbox)?
            .map(|e| e.map(|e| e.path()))
            .collect()
    }

    /// Whether a path in the inbox is an export to take: a regular file (or a link to one
    /// inside the inbox), not a dot-file, `*.tmp` or `*.part` (still being written), nor a
    /// report. The metadata is the file's own (the link's target for a link).
    pub fn arrival(&self, path: &Path) -> io::Result<Arrival> {
        if path.parent() != Some(self.inbox.as_path()) || !is_export_name(path) {
            return Ok(Arrival::Ignored);
        }
        let meta = path.symlink_metadata()?;
        if meta.file_type().is_symlink() {
            let inbox = self.inbox.canonicalize()?;
            return Ok(match path.canonicalize() {
                Ok(target) if target.starts_with(&inbox) && target.is_file() => {
                    Arrival::Export(target.metadata()?)
                }
                _ => Arrival::OutsideLink,
            });
        }
        Ok(if meta.is_file() {
            Arrival::Export(meta)
        } else if meta.is_dir() && !self.is_own_folder(path) {
            Arrival::Folder
        } else {
            Arrival::Ignored
        })
    }

    /// lotsync's own folders in the inbox.
    fn is_own_folder(&self, path: &Path) -> bool {
        path.file_name().is_some_and(|n| {
            [PROCESSING, ARCHIVE, HELD, FAILED]
                .iter()
                .any(|own| n == std::ffi::OsStr::new(own))
        })
    }

    /// Why lotsync cannot file an export under its name (then it goes to `failed/` under one
    /// it can, with a report): a name that is not UTF-8, or too long for its report beside it.
    pub fn name_problem(file: &Path) -> Option<String> {
        let name = file.file_name()?;
        let shown = crate::text::shown_name(file);
        if name.to_str().is_none() {
            return Some(format!(
                "its name is not UTF-8 ({shown}); rename it (the DMS's export settings may \
                 choose the character set) and drop it again"
            ));
        }
        let len = name.as_bytes().len();
        (len > NAME_LIMIT).then(|| {
            format!(
                "its name is {len} bytes long; lotsync files names of up to {NAME_LIMIT} bytes \
                 (its report must fit beside it): rename it and drop it again"
            )
        })
    }

    /// Moves a file whose name lotsync cannot file to `failed/`, under a name that fits
    /// (printable, shortened, with a hash of the original), with its report.
    pub fn fail_name(&self, file: &Path, report: &FileReport) -> io::Result<PathBuf> {
        self.settle_as(
            file,
            &self.inbox.join(FAILED).join(fitting_name(file)),
            report,
        )
    }

    /// Deletes archive day folders older than `days` days. The newest folder is always kept,
    /// and so is the newest one holding an applied file (the last snapshot `lotsync reconcile
    /// --rebuild` reads), however old. Returns the folders deleted.
    pub fn prune_archive(&self, days: u32) -> io::Result<Vec<PathBuf>> {
        if days == 0 {
            return Ok(Vec::new());
        }
        let cutoff = std::time::SystemTime::now()
            .checked_sub(std::time::Duration::from_secs(u64::from(days) * 86_400))
            .unwrap_or(std::time::UNIX_EPOCH);
        let cutoff = &crate::clock::utc_datetime(cutoff)[..10];
        let mut day_dirs: Vec<(String, PathBuf)> = std::fs::read_dir(self.inbox.join(ARCHIVE))?
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_owned();
                is_day(&name).then(|| (name, e.path()))
            })
            .collect();
        day_dirs.sort();
        day_dirs.pop();
        if let Some(i) = day_dirs.iter().rposition(|(_, dir)| holds_applied(dir)) {
            day_dirs.remove(i);
        }
        let mut deleted = Vec::new();
        for (day, dir) in day_dirs {
            if day.as_str() < cutoff {
                std::fs::remove_dir_all(&dir)?;
                deleted.push(dir);
            }
        }
        Ok(deleted)
    }

    /// The report of an applied export in the archive, if there is one: evidence that a
    /// state existed.
    pub fn applied_export(&self) -> Option<PathBuf> {
        let days = std::fs::read_dir(self.inbox.join(ARCHIVE)).ok()?;
        days.filter_map(Result::ok)
            .filter_map(|day| std::fs::read_dir(day.path()).ok())
            .flat_map(|entries| entries.filter_map(Result::ok))
            .map(|e| e.path())
            .find(|path| is_report(path) && report_is_applied(path))
    }

    /// Files a crash or a stop left in `processing/`, to resume first.
    pub fn unfinished(&self) -> io::Result<Vec<Claimed>> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(self.inbox.join(PROCESSING))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file() && is_export_name(p))
            .collect();
        found.sort();
        Ok(found
            .into_iter()
            .map(|path| Claimed {
                path,
                resumed: true,
            })
            .collect())
    }

    /// Moves an arrived file into `processing/`.
    pub fn claim(&self, file: &Path) -> io::Result<Claimed> {
        let to = unique(&self.inbox.join(PROCESSING), file)?;
        std::fs::rename(file, &to)?;
        Ok(Claimed {
            path: to,
            resumed: false,
        })
    }

    /// Removes the report beside `file` (a held file's, once the file left `held/`); none
    /// there is fine.
    pub fn drop_report(&self, file: &Path) -> io::Result<()> {
        match std::fs::remove_file(report_beside(file)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Whether `file` names a file of `held/` that is gone from there while a file of its
    /// name waits in `processing/`: released already, its delivery not finished.
    pub fn released_already(&self, file: &Path) -> bool {
        self.is_held(file)
            && !file.exists()
            && file
                .file_name()
                .is_some_and(|name| self.inbox.join(PROCESSING).join(name).is_file())
    }

    /// Whether a path is in the feed's `processing/` folder.
    pub fn is_processing(&self, file: &Path) -> bool {
        file.parent() == Some(self.inbox.join(PROCESSING).as_path())
    }

    /// Whether a path is in the feed's `held/` folder.
    pub fn is_held(&self, file: &Path) -> bool {
        file.parent() == Some(self.inbox.join(HELD).as_path())
    }

    pub fn held_dir(&self) -> PathBuf {
        self.inbox.join(HELD)
    }

    pub fn failed_dir(&self) -> PathBuf {
        self.inbox.join(FAILED)
    }

    /// The draft of a claimed file's report, written once its plan is made (durably, before
    /// the plan is committed), whole or not at all.
    pub fn write_draft(&self, claimed: &Claimed, report: &FileReport) -> io::Result<()> {
        let json = serde_json::to_vec_pretty(report).map_err(io::Error::other)?;
        crate::state::write_durably(&report_beside(&claimed.path), &json)
    }

    /// The draft of a claimed file's report, if its plan was made.
    pub fn draft(&self, claimed: &Claimed) -> Option<FileReport> {
        let bytes = std::fs::read(report_beside(&claimed.path)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Moves a processed file to `archive/YYYY-MM-DD/` with its report.
    pub fn archive(&self, file: &Path, report: &FileReport) -> io::Result<PathBuf> {
        let day = &crate::clock::utc_datetime(std::time::SystemTime::now())[..10];
        self.settle(file, &self.inbox.join(ARCHIVE).join(day), report)
    }

    /// Files a copy of an export synced from outside the inbox (`lotsync sync`) in today's
    /// archive with its report, as the daemon files the ones it takes, so that `lotsync
    /// reconcile --rebuild` reads it too; the file itself stays where it is. The report goes
    /// first and the copy is renamed into place whole: a crash leaves a report without its
    /// export (which the archive's readers skip), never a cut export.
    pub fn archive_copy(&self, file: &Path, report: &FileReport) -> io::Result<PathBuf> {
        // A missing inbox is said, not made (as `ensure` does): an archive made here would
        // not be where the daemon files (an unmounted share, a wrong path).
        if !self.inbox.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "the feed's inbox {} is not there",
                    crate::text::shown_path(&self.inbox)
                ),
            ));
        }
        let day = &crate::clock::utc_datetime(std::time::SystemTime::now())[..10];
        let dir = self.inbox.join(ARCHIVE).join(day);
        std::fs::create_dir_all(&dir)?;
        let name = match Self::name_problem(file) {
            None => file.file_name().map(|n| n.to_owned()),
            Some(_) => Some(fitting_name(file).into()),
        }
        .ok_or_else(|| {
            io::Error::other(format!(
                "{} has no file name",
                crate::text::shown_path(file)
            ))
        })?;
        let to = unique_path(&dir.join(name))?;
        self.rewrite_report(&to, report)?;
        let mut partial = std::ffi::OsString::from(".");
        partial.push(to.file_name().unwrap_or_default());
        partial.push(".partial");
        let partial = to.with_file_name(partial);
        std::fs::copy(file, &partial)?;
        std::fs::File::open(&partial)?.sync_all()?;
        std::fs::rename(&partial, &to)?;
        std::fs::File::open(&dir)?.sync_all()?;
        Ok(to)
    }

    /// Whether the archive holds a file with this content (a report that says so).
    pub fn archive_holds(&self, sha256: &str) -> bool {
        #[derive(serde::Deserialize)]
        struct Sha {
            sha256: String,
        }
        self.archived_reports().iter().any(|filed| {
            std::fs::read(&filed.report)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Sha>(&bytes).ok())
                .is_some_and(|r| r.sha256 == sha256)
                && filed.export.is_file()
        })
    }

    /// Writes the report of a filed file anew (a synced file's, once its delivery is known).
    pub fn rewrite_report(&self, filed: &Path, report: &FileReport) -> io::Result<()> {
        let json = serde_json::to_vec_pretty(report).map_err(io::Error::other)?;
        crate::state::write_durably(&report_beside(filed), &json)
    }

    /// Every report in the archive (`archive/*/<file>.report.json`) with the export it is
    /// filed beside, which may be missing (a crash between the two, or a file deleted by
    /// hand). In no order; empty without an archive.
    pub fn archived_reports(&self) -> Vec<ArchiveEntry> {
        let mut found = Vec::new();
        let Ok(days) = std::fs::read_dir(self.inbox.join(ARCHIVE)) else {
            return found;
        };
        for day in days.filter_map(Result::ok).map(|d| d.path()) {
            let Ok(entries) = std::fs::read_dir(&day) else {
                continue;
            };
            for report in entries.filter_map(Result::ok).map(|e| e.path()) {
                let export = report
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_suffix(REPORT_SUFFIX))
                    .map(|name| day.join(name));
                if let Some(export) = export {
                    found.push(ArchiveEntry { report, export });
                }
            }
        }
        found
    }

    /// Moves a held file to `held/` with its report.
    pub fn hold(&self, file: &Path, report: &FileReport) -> io::Result<PathBuf> {
        self.settle(file, &self.inbox.join(HELD), report)
    }

    /// Moves an unreadable file to `failed/` with its report (which says why).
    pub fn fail(&self, file: &Path, report: &FileReport) -> io::Result<PathBuf> {
        self.settle(file, &self.inbox.join(FAILED), report)
    }

    /// Moves `file` into `dir` under its name (or a free one beside it) with its report.
    fn settle(&self, file: &Path, dir: &Path, report: &FileReport) -> io::Result<PathBuf> {
        let name = file.file_name().ok_or_else(|| {
            io::Error::other(format!(
                "{} has no file name",
                crate::text::shown_path(file)
            ))
        })?;
        self.settle_as(file, &dir.join(name), report)
    }

    /// Moves `file` to `to` (or a free name beside it) with its report beside it, and drops
    /// its draft.
    fn settle_as(&self, file: &Path, to: &Path, report: &FileReport) -> io::Result<PathBuf> {
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let to = unique_path(to)?;
        // The report first, durably: a crash between the two leaves the file in processing/
        // to be resumed, never an archived file without its report.
        let json = serde_json::to_vec_pretty(report).map_err(io::Error::other)?;
        crate::state::write_durably(&report_beside(&to), &json)?;
        std::fs::rename(file, &to)?;
        let draft = report_beside(file);
        if draft.parent() == Some(self.inbox.join(PROCESSING).as_path()) {
            let _ = std::fs::remove_file(draft);
        }
        Ok(to)
    }
}

/// `<file>.report.json` beside a file.
fn report_beside(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_owned();
    name.push(REPORT_SUFFIX);
    file.with_file_name(name)
}

/// A name lotsync can file for one it cannot: printable, at most 200 bytes, and a hash of the
/// original name so that two such files never meet.
fn fitting_name(file: &Path) -> String {
    use sha2::Digest as _;
    let original = file.file_name().unwrap_or_default().as_bytes();
    let hash = sha2::Sha256::digest(original);
    let mut shown: String = crate::text::shown_name(file)
        .chars()
        .map(|c| if c == '/' || c == '\\' { '_' } else { c })
        .collect();
    let mut cut = shown.len().min(200);
    while !shown.is_char_boundary(cut) {
        cut -= 1;
    }
    shown.truncate(cut);
    format!(
        "{shown}-{:02x}{:02x}{:02x}{:02x}",
        hash[0], hash[1], hash[2], hash[3]
    )
}

/// `dir/<file's name>`, or `dir/<stem>-2.<ext>`… when that is taken.
fn unique(dir: &Path, file: &Path) -> io::Result<PathBuf> {
    let name = file.file_name().ok_or_else(|| {
        io::Error::other(format!(
            "{} has no file name",
            crate::text::shown_path(file)
        ))
    })?;
    unique_path(&dir.join(name))
}

/// `path`, or `<stem>-2.<ext>`… beside it when that is taken.
fn unique_path(first: &Path) -> io::Result<PathBuf> {
    if !first.exists() && !report_beside(first).exists() {
        return Ok(first.to_owned());
    }
    let (dir, file) = (first.parent().unwrap_or(Path::new(".")), first);
    let stem = file
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let ext = file
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    for n in 2..100_000 {
        let candidate = dir.join(format!("{stem}-{n}{ext}"));
        // A report without its file (a crash between the two) keeps its name too.
        if !candidate.exists() && !report_beside(&candidate).exists() {
            return Ok(candidate);
        }
    }
    Err(io::Error::other(format!(
        "{}: no free name for {}",
        crate::text::shown_path(dir),
        crate::text::shown_path(file)
    )))
}

/// Not a dot-file, `*.tmp` or `*.part` (still being written), nor a report. Judged on the
/// name's bytes: a name that is not UTF-8 is still an export (filed in `failed/` with why).
fn is_export_name(path: &Path) -> bool {
    let Some(name) = path.file_name().map(|n| n.as_bytes()) else {
        return false;
    };
    !(name.starts_with(b".")
        || name.ends_with(b".tmp")
        || name.ends_with(b".part")
        || is_report(path))
}

/// Whether an archive day folder holds the report of a file whose operations were applied.
fn holds_applied(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries
        .filter_map(Result::ok)
        .any(|e| is_report(&e.path()) && report_is_applied(&e.path()))
}

/// Whether a report says its file's operations were applied.
fn report_is_applied(report: &Path) -> bool {
    std::fs::read(report)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|r| matches!(r["outcome"].as_str(), Some("applied" | "resumed")))
}

/// `YYYY-MM-DD`.
fn is_day(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
}

fn is_report(path: &Path) -> bool {
    path.as_os_str()
        .as_bytes()
        .ends_with(REPORT_SUFFIX.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbox::{FileReport, Outcome};

    /// A fresh folder (removed when the guard drops) and its path.
    fn temp(name: &str) -> (tempfile::TempDir, PathBuf) {
        let tmp = crate::testing::temp_dir(&format!("folders-{name}"));
        let dir = tmp.path().to_owned();
        (tmp, dir)
    }

    #[test]
    fn arrivals_skip_partial_hidden_and_outside_links() {
        let (_tmp, dir) = temp("arrivals");
        let folders = FeedFolders::new(&dir);
        folders.ensure().unwrap();
        for name in ["a.csv", ".hidden.csv", "b.csv.tmp", "c.xml.part", "d.xml"] {
            std::fs::write(dir.join(name), "x").unwrap();
        }
        let (_outside_tmp, outside) = temp("arrivals-outside");
        let outside = outside.join("secret.csv");
        std::fs::write(&outside, "x").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("link.csv")).unwrap();
        std::os::unix::fs::symlink(dir.join("a.csv"), dir.join("inside.csv")).unwrap();
        let mut names: Vec<String> = folders
            .arrivals()
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["a.csv", "d.xml", "inside.csv"]);
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(outside.parent().unwrap()).unwrap();
    }

    #[test]
    fn pruning_keeps_recent_days_and_the_newest_folder() {
        let (_tmp, dir) = temp("prune");
        let folders = FeedFolders::new(&dir);
        folders.ensure().unwrap();
        let today = crate::clock::utc_datetime(std::time::SystemTime::now())[..10].to_owned();
        for day in ["2020-01-01", "2020-01-02", today.as_str(), "notes"] {
            std::fs::create_dir_all(dir.join("archive").join(day)).unwrap();
        }
        let deleted = folders.prune_archive(30).unwrap();
        assert_eq!(deleted.len(), 2, "{deleted:?}");
        assert!(dir.join("archive").join(&today).is_dir());
        assert!(dir.join("archive/notes").is_dir());
        // Only old days left: the newest of them stays.
        std::fs::remove_dir_all(dir.join("archive").join(&today)).unwrap();
        std::fs::create_dir_all(dir.join("archive/2020-01-01")).unwrap();
        std::fs::create_dir_all(dir.join("archive/2020-01-03")).unwrap();
        folders.prune_archive(30).unwrap();
        assert!(!dir.join("archive/2020-01-01").exists());
        assert!(dir.join("archive/2020-01-03").is_dir());
        // The last applied file stays too, when newer days hold only other outcomes.
        let applied = FileReport::new("main", "full.csv", "a", Outcome::Applied);
        let same = FileReport::new("main", "again.csv", "a", Outcome::AlreadyApplied);
        for (day, report) in [("2020-01-05", &applied), ("2020-01-06", &same)] {
            let d = dir.join("archive").join(day);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join(format!("{}.report.json", report.file)),
                serde_json::to_vec(report).unwrap(),
            )
            .unwrap();
        }
        folders.prune_archive(30).unwrap();
        assert!(!dir.join("archive/2020-01-03").exists());
        assert!(
            dir.join("archive/2020-01-05").is_dir(),
            "the last applied file"
        );
        assert!(dir.join("archive/2020-01-06").is_dir(), "the newest day");
        assert!(folders.prune_archive(0).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_moves_through_with_its_report_and_never_overwrites() {
        let (_tmp, dir) = temp("lifecycle");
        let folders = FeedFolders::new(&dir);
        folders.ensure().unwrap();
        let report = FileReport::new("main", "x.csv", "abc", Outcome::Applied);
        for round in 1..=2 {
            std::fs::write(dir.join("x.csv"), format!("round {round}")).unwrap();
            let claimed = folders.claim(&dir.join("x.csv")).unwrap();
            assert!(!claimed.resumed);
            let resumed = Claimed {
                path: claimed.path.clone(),
                resumed: true,
            };
            assert_eq!(folders.unfinished().unwrap(), vec![resumed.clone()]);
            // The draft beside it is read back, and goes when the file is filed.
            assert!(folders.draft(&resumed).is_none());
            folders.write_draft(&claimed, &report).unwrap();
            assert_eq!(folders.draft(&resumed), Some(report.clone()));
            assert_eq!(folders.unfinished().unwrap().len(), 1, "a draft is no file");
            let archived = folders.archive(&claimed.path, &report).unwrap();
            assert!(folders.draft(&resumed).is_none());
            let expected = if round == 1 { "x.csv" } else { "x-2.csv" };
            assert_eq!(archived.file_name().unwrap(), expected);
            assert_eq!(
                std::fs::read_to_string(&archived).unwrap(),
                format!("round {round}")
            );
            let report_path = archived.with_file_name(format!("{expected}.report.json"));
            assert!(report_path.is_file());
            assert!(folders.unfinished().unwrap().is_empty());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A name that is not UTF-8, or too long for its report beside it, is filed in
    /// `failed/` under a name that fits, with a report; ordinary long names pass.
    #[test]
    fn names_lotsync_cannot_file_go_to_failed_under_one_it_can() {
        use std::ffi::OsStr;
        let (_tmp, dir) = temp("names");
        let folders = FeedFolders::new(&dir);
        folders.ensure().unwrap();
        let fits = dir.join("a".repeat(NAME_LIMIT));
        assert_eq!(FeedFolders::name_problem(&fits), None);
        let long = dir.join(format!("{}.csv", "b".repeat(250)));
        let latin1 = dir.join(OsStr::from_bytes(b"Citro\xebn\n.csv"));
        for (file, said) in [(&long, "254 bytes long"), (&latin1, "not UTF-8")] {
            std::fs::write(file, "VIN\n").unwrap();
            assert!(matches!(folders.arrival(file), Ok(Arrival::Export(_))));
            let reason = FeedFolders::name_problem(file).expect("a problem");
            assert!(reason.contains(said), "{reason}");
            let report = FileReport::new("main", "x", "", Outcome::Failed { reason });
            let to = folders.fail_name(file, &report).unwrap();
            assert!(!file.exists());
            assert_eq!(to.parent(), Some(folders.failed_dir().as_path()));
            let name = to.file_name().unwrap().to_str().expect("UTF-8");
            assert!(name.len() <= 209 && !name.contains('\n'), "{name}");
            assert!(report_beside(&to).is_file());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
