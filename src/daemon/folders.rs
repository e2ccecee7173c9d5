//! A feed's folders and a file's way through them, never deleting an export:
//! `inbox/` → `processing/` → `archive/YYYY-MM-DD/` (with its report), or `held/` (the safety
//! guard), or `failed/` (unreadable, with the reason in its report).

use super::report::FileReport;
use std::io;
use std::path::{Path, PathBuf};

const PROCESSING: &str = "processing";
const ARCHIVE: &str = "archive";
const HELD: &str = "held";
const FAILED: &str = "failed";

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

    /// Creates the working folders.
    pub fn ensure(&self) -> io::Result<()> {
        for dir in [PROCESSING, ARCHIVE, HELD, FAILED] {
            std::fs::create_dir_all(self.inbox.join(dir))?;
        }
        Ok(())
    }

    /// Export files waiting in the inbox, oldest first: regular files (or links to files inside
    /// the inbox), not dot-files, `*.tmp` or `*.part` (still being written). A link pointing
    /// outside the inbox is skipped with a warning.
    pub fn arrivals(&self) -> io::Result<Vec<PathBuf>> {
        let inbox = self.inbox.canonicalize()?;
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&self.inbox)? {
            let entry = entry?;
            let path = entry.path();
            if !is_export_name(&path) {
                continue;
            }
            let kind = entry.file_type()?;
            if kind.is_symlink() {
                match path.canonicalize() {
                    Ok(target) if target.starts_with(&inbox) && target.is_file() => {}
                    _ => {
                        tracing::warn!(file = %path.display(), "a link to outside the inbox; left alone");
                        continue;
                    }
                }
            } else if !kind.is_file() {
                continue;
            }
            let modified = entry.metadata()?.modified()?;
            found.push((modified, path));
        }
        found.sort();
        Ok(found.into_iter().map(|(_, p)| p).collect())
    }

    /// Files a crash left in `processing/`, to resume first.
    pub fn unfinished(&self) -> io::Result<Vec<PathBuf>> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(self.inbox.join(PROCESSING))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file() && !is_report(p))
            .collect();
        found.sort();
        Ok(found)
    }

    /// Moves an arrived file into `processing/`.
    pub fn claim(&self, file: &Path) -> io::Result<PathBuf> {
        let to = unique(&self.inbox.join(PROCESSING), file)?;
        std::fs::rename(file, &to)?;
        Ok(to)
    }

    /// Moves a processed file to `archive/YYYY-MM-DD/` with its report.
    pub fn archive(&self, file: &Path, report: &FileReport) -> io::Result<PathBuf> {
        let day = &crate::clock::utc_datetime(std::time::SystemTime::now())[..10];
        self.settle(file, &self.inbox.join(ARCHIVE).join(day), report)
    }

    /// Moves a held file to `held/` with its report.
    pub fn hold(&self, file: &Path, report: &FileReport) -> io::Result<PathBuf> {
        self.settle(file, &self.inbox.join(HELD), report)
    }

    /// Moves an unreadable file to `failed/` with its report (which says why).
    pub fn fail(&self, file: &Path, report: &FileReport) -> io::Result<PathBuf> {
        self.settle(file, &self.inbox.join(FAILED), report)
    }

    fn settle(&self, file: &Path, dir: &Path, report: &FileReport) -> io::Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        let to = unique(dir, file)?;
        let mut name = to.file_name().unwrap_or_default().to_owned();
        name.push(".report.json");
        let report_path = to.with_file_name(name);
        // The report first: a crash between the two leaves the file in processing/ to be
        // resumed, never an archived file without its report.
        let json = serde_json::to_vec_pretty(report).map_err(io::Error::other)?;
        std::fs::write(&report_path, json)?;
        std::fs::rename(file, &to)?;
        Ok(to)
    }
}

/// `dir/<file's name>`, or `dir/<stem>-2.<ext>`… when that is taken.
fn unique(dir: &Path, file: &Path) -> io::Result<PathBuf> {
    let name = file
        .file_name()
        .ok_or_else(|| io::Error::other(format!("{} has no file name", file.display())))?;
    let first = dir.join(name);
    if !first.exists() {
        return Ok(first);
    }
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
        if !candidate.exists() {
            return Ok(candidate);
        }
    }
    Err(io::Error::other(format!(
        "{}: no free name for {}",
        dir.display(),
        file.display()
    )))
}

fn is_export_name(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    !(name.starts_with('.') || name.ends_with(".tmp") || name.ends_with(".part") || is_report(path))
}

fn is_report(path: &Path) -> bool {
    path.to_string_lossy().ends_with(".report.json")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::report::{FileReport, Outcome};

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("lotsync-folders-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn arrivals_skip_partial_hidden_and_outside_links() {
        let dir = temp("arrivals");
        let folders = FeedFolders::new(&dir);
        folders.ensure().unwrap();
        for name in ["a.csv", ".hidden.csv", "b.csv.tmp", "c.xml.part", "d.xml"] {
            std::fs::write(dir.join(name), "x").unwrap();
        }
        let outside = temp("arrivals-outside").join("secret.csv");
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
    fn a_file_moves_through_with_its_report_and_never_overwrites() {
        let dir = temp("lifecycle");
        let folders = FeedFolders::new(&dir);
        folders.ensure().unwrap();
        let report = FileReport::new("main", "x.csv", "abc", Outcome::Applied);
        for round in 1..=2 {
            std::fs::write(dir.join("x.csv"), format!("round {round}")).unwrap();
            let claimed = folders.claim(&dir.join("x.csv")).unwrap();
            assert_eq!(folders.unfinished().unwrap(), vec![claimed.clone()]);
            let archived = folders.archive(&claimed, &report).unwrap();
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
}
