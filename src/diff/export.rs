//! A whole export file through the mapper into the diff: the step `plan`, `release`, `sync`
//! and the daemon share.

use super::{DiffError, Differ, FileId, Listed, Plan, Rules};
use crate::mapper::{ExportError, ExportFile, Mapped, Problem, Profile};
use crate::outbox::Outbox;
use std::path::Path;

/// What diffing a file produced besides its plan.
#[derive(Debug)]
pub struct FilePlan {
    pub plan: Plan,
    /// Records read (0 when the file was already applied and not read).
    pub records: u64,
    /// Rejected records' problems, by line.
    pub rejected: Vec<(u64, Problem)>,
    /// Warnings of accepted records, by line.
    pub warnings: Vec<(u64, Problem)>,
    /// About the file as a whole.
    pub notes: Vec<String>,
}

/// How a file is diffed.
#[derive(Debug, Clone, Default)]
pub struct DiffOptions {
    /// Commit the plan to the outbox (else it is only shown).
    pub commit: bool,
    /// The service's own list, for the first file of an empty state ([`Listed`]).
    pub listed: Option<Listed>,
    /// Read a file whose last record is cut as it is (an operator released it).
    pub accept_incomplete: bool,
    /// Apply a full snapshot even when a newer one was applied for one of its locations
    /// (`lotsync release --force`); without it, such a file is superseded.
    pub accept_older: bool,
}

impl DiffOptions {
    /// Committed, without the service's list.
    pub fn committed() -> DiffOptions {
        DiffOptions {
            commit: true,
            ..DiffOptions::default()
        }
    }
}

/// The file cannot be diffed.
#[derive(Debug, thiserror::Error)]
pub enum FileDiffError {
    #[error("cannot be read")]
    Io(#[from] std::io::Error),
    #[error("cannot be read")]
    Export(#[from] ExportError),
    #[error(transparent)]
    Diff(#[from] DiffError),
}

/// A full snapshot with this share of the records of the last one applied, or fewer, is worth
/// a note even when the safety guard lets it through: a cut export sells what follows the cut.
pub const SMALLER_SNAPSHOT: f64 = 0.9;

/// Vehicles kept on the lot that get a note each; the rest are counted in one.
const PROTECTIONS_NOTED: usize = 20;

/// Reads, maps and diffs one file; commits the plan to the outbox when `options` say so.
pub fn diff_file(
    outbox: &Outbox,
    rules: Rules,
    profile: &Profile,
    location_id: u64,
    path: &Path,
    options: DiffOptions,
) -> Result<FilePlan, FileDiffError> {
    diff_file_drafted(
        outbox,
        rules,
        profile,
        location_id,
        path,
        options,
        |_, _, _| Ok(()),
    )
}

/// [`diff_file`], with `draft` told the plan that applies just before it is committed, with
/// the number it will be filed under (the daemon writes the file's report draft there, so a
/// crash after the commit loses nothing of what the file said, and the draft names its plan
/// exactly). An error of `draft` stops the commit.
pub fn diff_file_drafted(
    outbox: &Outbox,
    rules: Rules,
    profile: &Profile,
    location_id: u64,
    path: &Path,
    options: DiffOptions,
    draft: impl FnOnce(&Plan, &FilePlan, u64) -> std::io::Result<()>,
) -> Result<FilePlan, FileDiffError> {
    let file = FileId::of_path(path)?;
    let full = rules.mode == super::Mode::Full;
    let last = outbox.state().feed(&rules.feed).map_err(DiffError::from)?;
    // A full snapshot older than one applied since for one of its locations is superseded.
    let snapshot = match full {
        true => {
            let read = super::as_of(path, profile);
            let future = read.in_future().map(|said| crate::plan::FutureDated {
                file: file.name.clone(),
                said,
                read_at: read.at,
                by: read.source.name().to_owned(),
            });
            if let Some(future) = &future {
                tracing::warn!(
                    file = %crate::text::Escaped(&file.name),
                    by = %future.by,
                    said = %crate::clock::utc_unix(future.said),
                    as_of = %crate::clock::utc_unix(future.read_at),
                    "a snapshot dated in the future: {future}"
                );
            }
            let as_of = read.at;
            let newer = match options.accept_older {
                true => None,
                false => outbox
                    .state()
                    .newer_snapshot(&rules.feed, &rules.locations, as_of)
                    .map_err(DiffError::from)?,
            };
            Some((as_of, newer, future))
        }
        false => None,
    };
    let mut differ = Differ::with_listed(outbox, rules, file, options.listed)?;
    if let Some((as_of, newer, future)) = snapshot {
        differ.as_of(as_of, newer);
        if let Some(future) = future {
            differ.future_dated(future);
        }
    }
    let mut out = FilePlan {
        plan: Plan::default(),
        records: 0,
        rejected: Vec::new(),
        warnings: Vec::new(),
        notes: Vec::new(),
    };
    // The columns the feed's last file recognized by their values, kept while they fit.
    let kept = last.as_ref().and_then(|f| f.columns.clone());
    if !differ.already_applied() && !differ.superseded() {
        let mut export = ExportFile::open_kept(
            path,
            profile,
            location_id,
            options.accept_incomplete,
            kept.clone(),
        )?;
        while let Some(mapped) = export.next_record()? {
            match mapped {
                Mapped::Accepted(a) => {
                    out.warnings
                        .extend(a.warnings.iter().map(|w| (a.line, w.clone())));
                    differ.accepted(a)?;
                }
                Mapped::Rejected(r) => {
                    differ.rejected(&r);
                    out.rejected
                        .extend(r.problems.into_iter().map(|p| (r.line, p)));
                }
            }
        }
        out.notes = export.notes();
        out.records = differ.records();
        let columns = export.kept_columns();
        if let Some(before) = kept.filter(|k| k.header == columns.header) {
            if before.by_values != columns.by_values {
                let shown = |c: &crate::mapper::KeptColumns| {
                    let pairs: Vec<String> = c
                        .by_values
                        .iter()
                        .map(|(target, column)| format!("{target} <- {column:?}"))
                        .collect();
                    pairs.join(", ")
                };
                tracing::warn!(
                    file = %crate::text::shown_name(path),
                    before = %crate::text::Escaped(&shown(&before)),
                    now = %crate::text::Escaped(&shown(&columns)),
                    "the columns recognized by their values changed since the feed's last file"
                );
            }
        }
        differ.keep_columns(columns);
        let previous = last.and_then(|f| f.last_applied);
        if let Some(previous) = previous.filter(|p| full && p.records > 0) {
            if (out.records as f64) <= previous.records as f64 * SMALLER_SNAPSHOT {
                out.notes.push(format!(
                    "this full snapshot has {} records, {:.0}% fewer than the last one applied \
                     ({}, {} records): if the export was cut short, the vehicles after the cut \
                     are sold",
                    out.records,
                    100.0 - out.records as f64 * 100.0 / previous.records as f64,
                    crate::text::Escaped(&previous.name),
                    previous.records
                ));
            }
        }
    }
    let protected = &differ.judge().protected;
    out.notes.extend(
        protected
            .iter()
            .take(PROTECTIONS_NOTED)
            .map(ToString::to_string),
    );
    if protected.len() > PROTECTIONS_NOTED {
        out.notes.push(format!(
            "{} more vehicles kept on the lot the same way (the report's `protected` lists each)",
            protected.len() - PROTECTIONS_NOTED
        ));
    }
    let adopted = differ.judge().counts.adopted;
    if adopted > 0 {
        out.notes.push(format!(
            "the state knew no vehicle of the organization: {adopted} vehicles already on the \
             service were taken as known (ids learned from its list, nothing sent for those it \
             shows as this file does)"
        ));
    }
    out.plan = if options.commit {
        if differ.judge().applies() {
            // Every commit of a plan holds the lock the differ holds: this is the number the
            // commit below takes.
            let file_no = outbox.state().next_file_no().map_err(DiffError::from)?;
            draft(differ.judge(), &out, file_no)?;
        }
        differ.commit()?
    } else {
        differ.finish()
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::{Mode, Verdict};
    use std::path::PathBuf;
    use std::time::{Duration, SystemTime};

    fn rules() -> Rules {
        Rules {
            organization_id: 100,
            feed: "main".into(),
            mode: Mode::Full,
            sold_after_absent: 1,
            max_sold_fraction: 1.0,
            locations: [10].into(),
            force: false,
            sibling_feeds: Default::default(),
        }
    }

    /// A full export of `vins` in `dir`, modified `age` ago.
    fn export(dir: &Path, name: &str, vins: &[&str], age: Duration) -> PathBuf {
        let mut body = String::from("VIN,Stock,Year,Make,Model\n");
        for (n, vin) in vins.iter().enumerate() {
            body.push_str(&format!("{vin},S{n},2020,Honda,Accord\n"));
        }
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(SystemTime::now() - age)
            .unwrap();
        path
    }

    /// A full snapshot older than the one applied for its location is superseded: nothing
    /// of it read or queued, the newer one named; the newer one's as-of is in the state. Only
    /// `accept_older` (a forced release) applies it.
    #[test]
    fn an_older_full_snapshot_is_superseded_unless_accepted() {
        let tmp = crate::testing::temp_dir("superseded");
        let outbox = Outbox::new(crate::state::State::open(&tmp.path().join("state")).unwrap());
        let (a, b) = ("1HGCM82633A004352", "1M8GDM9AXKP042788");
        let tuesday = export(tmp.path(), "tuesday.csv", &[a, b], Duration::ZERO);
        let monday = export(tmp.path(), "monday.csv", &[a], Duration::from_secs(3600));
        let profile = Profile::auto();
        let diff = |path: &Path, options: DiffOptions| {
            diff_file(&outbox, rules(), &profile, 10, path, options).unwrap()
        };
        let applied = diff(&tuesday, DiffOptions::committed());
        assert_eq!(applied.plan.counts.create, 2);
        let mark = outbox.state().feed("main").unwrap().unwrap().snapshots[&10].clone();
        assert_eq!(mark.name, "tuesday.csv");

        let late = diff(&monday, DiffOptions::committed());
        assert!(
            matches!(&late.plan.verdict, Verdict::Superseded { newer, .. } if newer == "tuesday.csv"),
            "{:?}",
            late.plan.verdict
        );
        assert!(late.plan.ops.is_empty());
        assert_eq!(late.records, 0, "not read");
        assert_eq!(outbox.len(), 2, "only tuesday's operations are queued");
        let recorded = outbox.state().files().last().unwrap().unwrap();
        assert_eq!(
            recorded.outcome,
            crate::state::FileOutcome::Superseded {
                newer: "tuesday.csv".into()
            }
        );

        let forced = diff(
            &monday,
            DiffOptions {
                accept_older: true,
                ..DiffOptions::committed()
            },
        );
        assert!(forced.plan.applies());
        assert_eq!(forced.records, 1, "read and judged");
        let mark = outbox.state().feed("main").unwrap().unwrap().snapshots[&10].clone();
        assert_eq!(mark.name, "monday.csv", "the last applied is recorded");
    }
}
