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
}

impl DiffOptions {
    /// Committed, without the service's list.
    pub fn committed() -> DiffOptions {
        DiffOptions {
            commit: true,
            listed: None,
        }
    }
}

/// The file cannot be diffed.
#[derive(Debug, thiserror::Error)]
pub enum FileDiffError {
    #[error("cannot be read: {0}")]
    Io(#[from] std::io::Error),
    #[error("cannot be read: {0}")]
    Export(#[from] ExportError),
    #[error(transparent)]
    Diff(#[from] DiffError),
}

/// Reads, maps and diffs one file; commits the plan to the outbox when `options` say so.
pub fn diff_file(
    outbox: &Outbox,
    rules: Rules,
    profile: &Profile,
    location_id: u64,
    path: &Path,
    options: DiffOptions,
) -> Result<FilePlan, FileDiffError> {
    let file = FileId::of_path(path)?;
    let mut differ = Differ::with_listed(outbox, rules, file, options.listed)?;
    let mut out = FilePlan {
        plan: Plan::default(),
        records: 0,
        rejected: Vec::new(),
        warnings: Vec::new(),
        notes: Vec::new(),
    };
    if !differ.already_applied() {
        let mut export = ExportFile::open(path, profile, location_id)?;
        while let Some(mapped) = export.next_record()? {
            out.records += 1;
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
    }
    out.plan = if options.commit {
        differ.commit()?
    } else {
        differ.finish()
    };
    let adopted = out.plan.counts.adopted;
    if adopted > 0 {
        out.notes.push(format!(
            "the state knew no vehicle of the organization: {adopted} vehicles already on the \
             service were taken as known (ids learned from its list, nothing sent for those it \
             shows as this file does)"
        ));
    }
    Ok(out)
}
