//! A file's report: `<file>.report.json` beside the archived (or held, or failed) file, and the
//! short human summary of it for the log and the demo.
//!
//! It says what truly happened: `counts` are what the service acknowledged (not what was
//! planned), `still_queued` what waits for it, `refused` what it refused. Its draft is written
//! before the plan is committed, so that a file resumed after a crash keeps what its first
//! attempt found.

use crate::diff::{Counts, FilePlan, Plan, Protection, Verdict};
use crate::outbox::FileProgress;
use crate::state::OpCounts;
use crate::text::Escaped;
use crate::upload::RejectedOp;
use serde::{Deserialize, Serialize};
use std::fmt;

/// What became of a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Outcome {
    /// Its operations were queued and delivered as far as the service answered (see
    /// `counts`, `still_queued` and `refused`).
    Applied,
    /// The same bytes as the feed's last applied file: nothing to do.
    AlreadyApplied,
    /// Taken up again after an interruption (a crash, a stop): its operations had been
    /// queued, and what was left of them is delivered. The rest of the report is what its
    /// first attempt found.
    Resumed,
    /// Its plan is committed and not all of its operations are delivered yet: the draft
    /// beside a file still in `processing/` (its delivery under way, or stopped on a fatal
    /// answer). `counts` say what the service acknowledged so far, `still_queued` the rest.
    Queued,
    /// A full snapshot older than one applied already for its feed and location (`newer`):
    /// nothing of it was sent, and it is filed in the archive.
    Superseded { newer: String, reason: String },
    /// Held by the safety guard, or because it stayed incomplete: nothing of it was sent.
    Held { reasons: Vec<String> },
    /// It could not be read, or its name cannot be filed.
    Failed { reason: String },
}

impl Outcome {
    /// The name used in `status` and the log.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::AlreadyApplied => "already_applied",
            Outcome::Resumed => "resumed",
            Outcome::Queued => "queued",
            Outcome::Superseded { .. } => "superseded",
            Outcome::Held { .. } => "held",
            Outcome::Failed { .. } => "failed",
        }
    }
}

/// One rejected record or warning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordProblem {
    pub line: u64,
    /// The payload field (or `record` for the row as a whole).
    pub field: String,
    pub reason: String,
    /// The source value, as read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl RecordProblem {
    pub fn new(line: u64, problem: &crate::mapper::Problem) -> RecordProblem {
        RecordProblem {
            line,
            field: problem.field.to_owned(),
            reason: problem.reason.clone(),
            value: problem.value.clone(),
        }
    }
}

/// `line N: field: reason (value)`, on one line (values come from outside: escaped).
impl fmt::Display for RecordProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}: {}: {}",
            self.line,
            self.field,
            Escaped(&self.reason)
        )?;
        if let Some(v) = &self.value {
            write!(f, " ({})", Escaped(v))?;
        }
        Ok(())
    }
}

/// The report of one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileReport {
    pub feed: String,
    pub file: String,
    pub sha256: String,
    /// UTC, `YYYY-MM-DD HH:MM:SS`.
    pub finished_at: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    pub records: u64,
    /// Created, updated, sold and back in stock: what the service acknowledged. The rest
    /// (unchanged, rejected records, …) as the plan found.
    pub counts: Counts,
    /// The operations the plan queued, by kind.
    #[serde(default)]
    pub planned: OpCounts,
    /// The plan's operations still waiting for the service when the report was written.
    #[serde(default)]
    pub still_queued: OpCounts,
    pub rejected_records: Vec<RecordProblem>,
    pub warnings: Vec<RecordProblem>,
    /// About the file as a whole (its encoding, a snapshot much smaller than the last one, …).
    #[serde(default)]
    pub notes: Vec<String>,
    /// Vehicles the file does not list validly that were kept on the lot (neither sold nor
    /// changed), and which record or which other lot's listing kept each.
    #[serde(default)]
    pub protected: Vec<Protection>,
    /// Operations queued for this file.
    pub operations: u64,
    /// Operations of this file the service refused.
    #[serde(default, skip_deserializing)]
    pub refused: Vec<RejectedOp>,
    /// Operations of this file still queued when the report was written (delivered later).
    pub undelivered: u64,
    /// The number the state files its plan under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_no: Option<u64>,
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
            planned: OpCounts::default(),
            still_queued: OpCounts::default(),
            rejected_records: Vec::new(),
            warnings: Vec::new(),
            notes: Vec::new(),
            protected: Vec::new(),
            operations: 0,
            refused: Vec::new(),
            undelivered: 0,
            file_no: None,
        }
    }

    /// The report of a planned file, before anything of it is delivered (its draft, or a
    /// held file's report).
    pub fn planned(planned: &FilePlan) -> FileReport {
        FileReport::from_parts(&planned.plan, planned)
    }

    /// [`FileReport::planned`] of a plan and what reading its file found (`found.plan` is
    /// not read: the plan may not be in it yet).
    pub fn from_parts(plan: &Plan, found: &FilePlan) -> FileReport {
        let planned = found;
        let outcome = match &plan.verdict {
            Verdict::Apply { .. } => Outcome::Applied,
            Verdict::AlreadyApplied { .. } => Outcome::AlreadyApplied,
            Verdict::Superseded {
                newer,
                newer_as_of,
                as_of,
            } => Outcome::Superseded {
                newer: newer.clone(),
                reason: Verdict::superseded_reason(newer, *newer_as_of, *as_of),
            },
            Verdict::Held { reasons } => Outcome::Held {
                reasons: reasons.clone(),
            },
        };
        let problems = |list: &[(u64, crate::mapper::Problem)]| {
            list.iter()
                .map(|(line, problem)| RecordProblem::new(*line, problem))
                .collect()
        };
        let mut report = FileReport::new(&plan.feed, &plan.file.name, &plan.file.sha256, outcome);
        report.records = planned.records;
        report.counts = plan.counts;
        let mut ops = OpCounts::default();
        for op in &plan.ops {
            op.op.count_in(&mut ops);
        }
        report.planned = ops;
        report.rejected_records = problems(&planned.rejected);
        report.warnings = problems(&planned.warnings);
        report.notes = planned.notes.clone();
        report.protected = plan.protected.clone();
        report.operations = plan.ops.len() as u64;
        report.file_no = plan.file_no;
        report
    }

    /// After delivery: the counts become what the service acknowledged, beside what is still
    /// queued and what it refused.
    pub fn delivered(&mut self, progress: &FileProgress, refused: Vec<RejectedOp>) {
        let done = &progress.delivered.applied;
        self.counts.create = done.create;
        self.counts.update = done.update;
        self.counts.sold = done.sold;
        self.counts.in_stock = done.in_stock;
        self.still_queued = progress.queued;
        self.undelivered = progress.queued.total();
        let before = progress
            .delivered
            .refused
            .saturating_sub(refused.len() as u64);
        if before > 0 {
            self.notes.push(format!(
                "{before} more operations of this file were refused before an interruption; \
                 the vehicles' records keep the service's reasons (`{}`)",
                crate::config::advice(&["state", "export"])
            ));
        }
        self.refused = refused;
        self.finished_at = crate::clock::utc_datetime(std::time::SystemTime::now());
    }

    /// The draft of a file in hand, true when it is written: outcome `queued`, `counts` what
    /// the service acknowledged of its plan so far, `still_queued` the rest (`progress`; a
    /// plan just committed has nothing acknowledged and all of [`FileReport::planned`]
    /// queued, see [`FileReport::just_committed`]).
    pub fn in_hand(&mut self, progress: &FileProgress) {
        self.outcome = Outcome::Queued;
        self.delivered(progress, Vec::new());
    }

    /// The progress of a plan just committed: nothing acknowledged, every operation queued.
    pub fn just_committed(&self) -> FileProgress {
        FileProgress {
            delivered: crate::state::Delivered::default(),
            queued: self.planned,
        }
    }

    /// One line for a person: what the file did.
    pub fn summary(&self) -> String {
        let c = &self.counts;
        let delivered = || {
            let mut s = format!(
                "{} created, {} updated, {} sold, {} back in stock, {} unchanged",
                c.create, c.update, c.sold, c.in_stock, c.unchanged
            );
            if c.adopted > 0 {
                s.push_str(&format!(
                    "; {} already on the service (ids learned)",
                    c.adopted
                ));
            }
            if !self.rejected_records.is_empty() || c.rejected_records > 0 {
                s.push_str(&format!(
                    "; {} records rejected ({} problems)",
                    c.rejected_records,
                    self.rejected_records.len()
                ));
            }
            if c.protected > 0 {
                s.push_str(&format!(
                    "; {} not listed validly but kept on the lot (see `protected`)",
                    c.protected
                ));
            }
            if c.not_owned > 0 {
                s.push_str(&format!(
                    "; {} left out but not owned by this feed (not sold)",
                    c.not_owned
                ));
            }
            if c.shared > 0 {
                s.push_str(&format!(
                    "; {} listed by another feed of the lot too (not sold while either lists them)",
                    c.shared
                ));
            }
            if !self.refused.is_empty() {
                s.push_str(&format!("; {} refused by the service", self.refused.len()));
            }
            if self.undelivered > 0 {
                let q = &self.still_queued;
                s.push_str(&format!(
                    "; still queued for the service: {} create, {} update, {} sold, {} back in \
                     stock (sent when it answers)",
                    q.create, q.update, q.sold, q.in_stock
                ));
            }
            s
        };
        match &self.outcome {
            Outcome::Applied => format!("{} records: {}", self.records, delivered()),
            Outcome::Resumed => format!(
                "resumed after an interruption: {} records: {}",
                self.records,
                delivered()
            ),
            Outcome::Queued => format!(
                "in hand, not all delivered yet: {} records: {}",
                self.records,
                delivered()
            ),
            Outcome::AlreadyApplied => {
                "already applied (same content as the last file); nothing sent".into()
            }
            Outcome::Superseded { reason, .. } => format!("superseded, nothing sent: {reason}"),
            Outcome::Held { reasons } => format!("held, nothing sent: {}", reasons.join("; ")),
            Outcome::Failed { reason } => format!("failed, nothing sent: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Delivered;

    /// During an outage the report counts what the service acknowledged, not what was
    /// planned, and says what is still queued.
    #[test]
    fn counts_are_what_the_service_acknowledged() {
        let mut report = FileReport::new("main", "x.csv", "ab", Outcome::Applied);
        report.records = 20;
        report.counts.create = 20;
        report.planned.create = 20;
        let progress = FileProgress {
            delivered: Delivered {
                applied: OpCounts {
                    create: 5,
                    ..OpCounts::default()
                },
                refused: 0,
            },
            queued: OpCounts {
                create: 15,
                ..OpCounts::default()
            },
        };
        report.delivered(&progress, Vec::new());
        assert_eq!(report.counts.create, 5);
        assert_eq!(report.undelivered, 15);
        let summary = report.summary();
        assert!(summary.starts_with("20 records: 5 created"), "{summary}");
        assert!(
            summary.contains("still queued for the service: 15 create"),
            "{summary}"
        );
        // The draft round-trips (a resumed file reads it back).
        let json = serde_json::to_vec(&report).unwrap();
        let back: FileReport = serde_json::from_slice(&json).unwrap();
        assert_eq!(back.counts, report.counts);
        assert_eq!(back.outcome, Outcome::Applied);
    }
}
