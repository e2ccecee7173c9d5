//! A file's report: `<file>.report.json` beside the archived (or held, or failed) file, and the
//! short human summary of it for the log and the demo.

use crate::diff::{Counts, FilePlan, Verdict};
use crate::upload::{DrainReport, RejectedOp};
use serde::Serialize;

/// What became of a file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Outcome {
    /// Its operations were delivered (some may have been refused; see `refused`).
    Applied,
    /// The same bytes as the feed's last applied file: nothing to do.
    AlreadyApplied,
    /// Taken up again after an interruption (a crash, a stop): its operations had been
    /// queued, and what was left of them is delivered.
    Resumed,
    /// Held by the safety guard: nothing of it was sent.
    Held { reasons: Vec<String> },
    /// It could not be read.
    Failed { reason: String },
}

/// One rejected record or warning.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordProblem {
    pub line: u64,
    #[serde(flatten)]
    pub problem: crate::mapper::Problem,
}

/// The report of one file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileReport {
    pub feed: String,
    pub file: String,
    pub sha256: String,
    /// UTC, `YYYY-MM-DD HH:MM:SS`.
    pub finished_at: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    pub records: u64,
    pub counts: Counts,
    pub rejected_records: Vec<RecordProblem>,
    pub warnings: Vec<RecordProblem>,
    /// Operations queued for this file.
    pub operations: u64,
    /// Operations of this file the service refused.
    pub refused: Vec<RejectedOp>,
    /// Operations still queued when the report was written (delivered later).
    pub undelivered: usize,
}

impl FileReport {
    pub fn new(feed: &str, file: &str, sha256: &str, outcome: Outcome) -> FileReport {
        FileReport {
            feed: feed.into(),
            file: file.into(),
            sha256: sha256.into(),
            finished_at: crate::clock::utc_datetime(std::time::SystemTime::now()),
            outcome,
            records: 0,
            counts: Counts::default(),
            rejected_records: Vec::new(),
            warnings: Vec::new(),
            operations: 0,
            refused: Vec::new(),
            undelivered: 0,
        }
    }

    /// The report of a planned file, before or after delivery.
    pub fn planned(planned: &FilePlan, drained: Option<&DrainReport>) -> FileReport {
        let plan = &planned.plan;
        let outcome = match &plan.verdict {
            Verdict::Apply { .. } => Outcome::Applied,
            Verdict::AlreadyApplied { .. } => Outcome::AlreadyApplied,
            Verdict::Held { reasons } => Outcome::Held {
                reasons: reasons.clone(),
            },
        };
        let problems = |list: &[(u64, crate::mapper::Problem)]| {
            list.iter()
                .map(|(line, problem)| RecordProblem {
                    line: *line,
                    problem: problem.clone(),
                })
                .collect()
        };
        let mut report = FileReport::new(&plan.feed, &plan.file.name, &plan.file.sha256, outcome);
        report.records = planned.records;
        report.counts = plan.counts;
        report.rejected_records = problems(&planned.rejected);
        report.warnings = problems(&planned.warnings);
        report.operations = plan.ops.len() as u64;
        if let Some(drained) = drained {
            report.refused = drained
                .rejected
                .iter()
                .filter(|r| r.file == plan.file.name)
                .cloned()
                .collect();
            report.undelivered = drained.undelivered;
        }
        report
    }

    /// One line for a person: what the file did.
    pub fn summary(&self) -> String {
        let c = &self.counts;
        match &self.outcome {
            Outcome::Applied => {
                let mut s = format!(
                    "{} records: {} created, {} updated, {} sold, {} back in stock, {} unchanged",
                    self.records, c.create, c.update, c.sold, c.in_stock, c.unchanged
                );
                if !self.rejected_records.is_empty() || c.rejected_records > 0 {
                    s.push_str(&format!(
                        "; {} records rejected ({} problems)",
                        c.rejected_records,
                        self.rejected_records.len()
                    ));
                }
                if !self.refused.is_empty() {
                    s.push_str(&format!("; {} refused by the service", self.refused.len()));
                }
                if self.undelivered > 0 {
                    s.push_str(&format!("; {} operations still queued", self.undelivered));
                }
                s
            }
            Outcome::Resumed => {
                let mut s =
                    "resumed after an interruption; its queued operations delivered".to_owned();
                if !self.refused.is_empty() {
                    s.push_str(&format!("; {} refused by the service", self.refused.len()));
                }
                if self.undelivered > 0 {
                    s.push_str(&format!("; {} operations still queued", self.undelivered));
                }
                s
            }
            Outcome::AlreadyApplied => {
                "already applied (same content as the last file); nothing sent".into()
            }
            Outcome::Held { reasons } => format!("HELD, nothing sent: {}", reasons.join("; ")),
            Outcome::Failed { reason } => format!("FAILED, cannot be read: {reason}"),
        }
    }
}
