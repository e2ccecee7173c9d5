//! A feed's inbox and the folders lotsync keeps in it: files arriving, `processing/`,
//! `archive/YYYY-MM-DD/`, `held/` and `failed/` ([`FeedFolders`]), and the report filed beside
//! each file ([`FileReport`]).
//!
//! The daemon moves files through these folders, `lotsync sync` files copies in the archive,
//! and reconciliation reads the archive back: all through [`FeedFolders`], so the layout is
//! spelled in one place. It owns the folders and the reports' format, not when a file is
//! complete (the watchers) nor what becomes of its vehicles (the diff, the uploader).

mod folders;
mod report;

pub use folders::{ArchiveEntry, Arrival, Claimed, FeedFolders};
pub use report::{FileReport, Outcome, RecordProblem};
