//! The archived exports' side of the reconciliation: what the feeds' applied files in their
//! `archive/` listed, per VIN its newest listing ([`Listing`]), and each feed's newest applied
//! file (restored by a rebuild).
//!
//! It finds the archive's exports and reports through [`FeedFolders`], which lays the archive
//! out, and maps each export through its feed's profile; it moves and writes nothing, and
//! judges nothing (that is [`super::compare`]'s). An archived file that cannot be read is a
//! note, not an error.

use super::ReconcileError;
use crate::api::VehiclePayload;
use crate::config::{Config, FeedConfig};
use crate::diff::{FileId, Mode};
use crate::inbox::FeedFolders;
use crate::mapper::{ExportFile, Mapped, Profile};
use crate::state::history::{Event, What};
use crate::state::AppliedFile;
use crate::text::Escaped;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The newest listing of a VIN in the archived exports read.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Listing {
    pub(super) payload: VehiclePayload,
    /// Sold as the archive tells: listed as sold, or absent from its full feed's newest
    /// snapshot since.
    pub(super) sold: bool,
    /// Some applied export listed it on the lot: lotsync created it.
    pub(super) listed_in_stock: bool,
    /// Listed on the lot by the newest applied snapshot of a full feed.
    pub(super) in_last_snapshot: bool,
    /// The archived export of the newest listing.
    pub(super) file: String,
}

/// What the archived exports tell.
#[derive(Debug, Default)]
pub(super) struct Archive {
    pub(super) listings: HashMap<String, Listing>,
    /// Per feed, its newest applied export.
    pub(super) last_applied: Vec<(String, AppliedFile)>,
    pub(super) files_read: usize,
    pub(super) notes: Vec<String>,
    /// A rebuild's: per VIN, what the applied exports did to it, oldest first (for the
    /// vehicles' history, see [`crate::state::history`]).
    pub(super) history: HashMap<String, Vec<Event>>,
}

/// What one archived export listed of a VIN: its line, its payload's digest, sold.
struct Seen {
    line: u64,
    digest: crate::state::Digest,
    sold: bool,
}

/// The fields of an archived file's report the reconciliation reads (the daemon's `FileReport`).
#[derive(Debug, Deserialize)]
struct ArchivedReport {
    file: String,
    outcome: String,
    #[serde(default)]
    finished_at: String,
    /// Vehicles it left out but kept on the lot (for a rebuild's history).
    #[serde(default)]
    protected: Vec<crate::plan::Protection>,
    /// Operations of it the service refused (for a rebuild's history).
    #[serde(default)]
    refused: Vec<RefusedOp>,
}

/// An operation the service refused, as an archived report says it.
#[derive(Debug, Clone, Deserialize)]
struct RefusedOp {
    vin: String,
    op: String,
    status: u16,
    #[serde(default)]
    messages: Vec<String>,
}

/// An applied export in a feed's archive.
#[derive(Debug, Clone)]
struct Archived {
    feed: usize,
    path: PathBuf,
    /// The name it was dropped under.
    name: String,
    finished_at: String,
    /// When its report was written: orders files finished within the same second.
    written: SystemTime,
    protected: Vec<crate::plan::Protection>,
    refused: Vec<RefusedOp>,
}

/// Reads the archives of the config's feeds: each feed's newest applied file and, per VIN, its
/// newest listing (`all`: in every applied export; else in each full feed's newest only).
pub(super) fn read_archive(config: &Config, all: bool) -> Result<Archive, ReconcileError> {
    let mut archive = Archive::default();
    let mut files: Vec<Archived> = Vec::new();
    let mut newest_of_full: Vec<PathBuf> = Vec::new();
    for (index, feed) in config.feeds.iter().enumerate() {
        let mut applied = applied_files(feed, index, &mut archive.notes);
        applied.sort_by(|a, b| (&b.finished_at, b.written).cmp(&(&a.finished_at, a.written)));
        if let Some(newest) = applied.first() {
            // Only a rebuild restores it; hashing it every night would be wasted.
            let id = if all {
                Some(FileId::of_path(&newest.path))
            } else {
                None
            };
            match id {
                None => {}
                Some(Ok(id)) => archive.last_applied.push((
                    feed.name.clone(),
                    AppliedFile {
                        name: newest.name.clone(),
                        sha256: id.sha256,
                        at: unix_secs(newest.written),
                        records: 0,
                    },
                )),
                Some(Err(e)) => archive
                    .notes
                    .push(format!("{}: cannot be read: {e}", newest.path.display())),
            }
            if feed.mode == Mode::Full {
                newest_of_full.push(newest.path.clone());
            }
        }
        if all {
            files.extend(applied);
        } else if feed.mode == Mode::Full {
            files.extend(applied.into_iter().take(1));
        }
    }
    files.sort_by(|a, b| (&b.finished_at, b.written).cmp(&(&a.finished_at, a.written)));
    let mut profiles: HashMap<usize, Profile> = HashMap::new();
    // A rebuild's: what each file read listed, newest first, for the vehicles' history.
    let mut seen: Vec<(&Archived, HashMap<String, Seen>)> = Vec::new();
    for file in &files {
        let feed = &config.feeds[file.feed];
        let profile = match profiles.get(&file.feed) {
            Some(p) => p,
            None => {
                let p = Profile::find(&feed.profile, &config.profiles_dir).map_err(|source| {
                    ReconcileError::Profile {
                        feed: feed.name.clone(),
                        source,
                    }
                })?;
                profiles.entry(file.feed).or_insert(p)
            }
        };
        let listed = match listings_of(&file.path, profile, feed.location_id) {
            Ok(listed) => listed,
            Err(reason) => {
                tracing::warn!(file = %crate::text::shown_name(&file.path), path = %crate::text::shown_path(&file.path), reason = %crate::text::Escaped(&reason), "archived export not read");
                archive
                    .notes
                    .push(format!("{}: not read: {reason}", file.path.display()));
                continue;
            }
        };
        archive.files_read += 1;
        let full = feed.mode == Mode::Full;
        let newest = newest_of_full.contains(&file.path);
        let mut listed_here = HashMap::new();
        for (payload, sold, line) in listed {
            let in_stock = sold != Some(true);
            if all {
                let digest = crate::plan::payload_digest(&payload);
                let sold = !in_stock;
                listed_here.insert(payload.vin.clone(), Seen { line, digest, sold });
            }
            match archive.listings.get_mut(&payload.vin) {
                Some(listing) => listing.listed_in_stock |= in_stock,
                None => {
                    let listing = Listing {
                        sold: !in_stock || (full && !newest),
                        listed_in_stock: in_stock,
                        in_last_snapshot: newest && in_stock,
                        file: file.name.clone(),
                        payload,
                    };
                    archive
                        .listings
                        .insert(listing.payload.vin.clone(), listing);
                }
            }
        }
        if all {
            seen.push((file, listed_here));
        }
    }
    if all {
        archive.history = history_of(config, &seen);
    }
    Ok(archive)
}

/// Each VIN's story as the archived exports tell it, oldest file first: listed the first
/// time (created), with another payload (updated), as sold, left out of its full feed's
/// export (sold by absence), listed again (back in stock). `seen` is newest first.
fn history_of(
    config: &Config,
    seen: &[(&Archived, HashMap<String, Seen>)],
) -> HashMap<String, Vec<Event>> {
    // Per VIN: its feed, its last digest, sold.
    let mut last: HashMap<&str, (usize, crate::state::Digest, bool)> = HashMap::new();
    let mut out: HashMap<String, Vec<Event>> = HashMap::new();
    for (file, listed) in seen.iter().rev() {
        let at = unix_secs(file.written);
        let mut event = |vin: &str, line: Option<u64>, op: &str, note: String| {
            out.entry(vin.to_owned()).or_default().push(Event::new(
                at,
                None,
                What::Rebuilt {
                    file: file.name.clone(),
                    line,
                    op: op.to_owned(),
                    note,
                },
            ));
        };
        for (vin, s) in listed {
            let op = match last.get(vin.as_str()) {
                None if s.sold => None,
                None => Some("create"),
                Some((_, _, true)) if !s.sold => Some("in_stock"),
                Some((_, _, false)) if s.sold => Some("sold"),
                Some((_, digest, _)) if *digest != s.digest && !s.sold => Some("update"),
                Some(_) => None,
            };
            if let Some(op) = op {
                event(vin, Some(s.line), op, String::new());
            }
            last.insert(vin, (file.feed, s.digest, s.sold));
        }
        for p in &file.protected {
            event(&p.vin, p.line, "kept", Escaped(&p.value).to_string());
        }
        if config.feeds[file.feed].mode == Mode::Full {
            for (vin, (feed, _, sold)) in last.iter_mut() {
                let kept = file.protected.iter().any(|p| p.vin == *vin);
                if *feed == file.feed && !*sold && !kept && !listed.contains_key(*vin) {
                    *sold = true;
                    event(vin, None, "sold", String::new());
                }
            }
        }
        for r in &file.refused {
            let note = format!(
                "{} refused (HTTP {}): {}",
                r.op,
                r.status,
                r.messages.join("; ")
            );
            event(&r.vin, None, "refused", note);
        }
    }
    out
}

/// A feed's applied exports in its archive, with their reports.
fn applied_files(feed: &FeedConfig, index: usize, notes: &mut Vec<String>) -> Vec<Archived> {
    let mut out = Vec::new();
    for filed in FeedFolders::new(&feed.inbox).archived_reports() {
        let report: ArchivedReport = match std::fs::read(&filed.report)
            .map_err(|e| e.to_string())
            .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
        {
            Ok(report) => report,
            Err(reason) => {
                notes.push(format!("{}: not read: {reason}", filed.report.display()));
                continue;
            }
        };
        // `resumed`: applied, and delivered after an interruption (a later daemon's outcome;
        // the same as applied here).
        let applied = matches!(report.outcome.as_str(), "applied" | "resumed");
        if !applied || !filed.export.is_file() {
            continue;
        }
        let written = std::fs::metadata(&filed.report)
            .and_then(|m| m.modified())
            .unwrap_or(UNIX_EPOCH);
        out.push(Archived {
            feed: index,
            path: filed.export,
            name: report.file,
            finished_at: report.finished_at,
            written,
            protected: report.protected,
            refused: report.refused,
        });
    }
    out
}

/// The accepted records of an export: payload, what the export says of sold, and line.
fn listings_of(
    path: &Path,
    profile: &Profile,
    location_id: u64,
) -> Result<Vec<(VehiclePayload, Option<bool>, u64)>, String> {
    let mut export = ExportFile::open(path, profile, location_id).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(mapped) = export.next_record().map_err(|e| e.to_string())? {
        if let Mapped::Accepted(a) = mapped {
            out.push((a.payload.clone(), a.sold, a.line));
        }
    }
    Ok(out)
}

fn unix_secs(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
