//! The daemon's stages around the pipeline: a feed's folders and a file's way through them
//! ([`FeedFolders`]), the report each file leaves behind ([`FileReport`]), and
//! [`FilePipeline`], which takes one complete export from its inbox to the service.
//!
//! `lotsync demo` drives the pipeline file by file; the watchers, control socket, nightly
//! reconciliation and sd_notify of `lotsync run` build on it. It owns the files' lifecycle, not
//! what to send (the diff) nor how (the uploader).

mod folders;
mod reconcile;
mod report;

pub use folders::FeedFolders;
pub use reconcile::{
    field_drift, reconcile, FieldDrift, ForeignVehicle, ReconcileError, ReconcileReport,
    RepairCounts, RestoredFeed, Skipped, RECONCILE_FEED,
};
pub use report::{FileReport, Outcome, RecordProblem};

use crate::config::{Config, FeedConfig};
use crate::diff::{diff_file, FileDiffError, Verdict};
use crate::mapper::{Profile, ProfileError};
use crate::outbox::Outbox;
use crate::upload::{Notices, UploadError, Uploader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What stops the pipeline (a file that cannot be read is not an error: it is moved to
/// `failed/` with its reason).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("feed {feed}: {source}")]
    Profile {
        feed: String,
        #[source]
        source: ProfileError,
    },
    #[error("{path}: {source}")]
    Folder {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Diff(String),
    #[error(transparent)]
    Upload(#[from] UploadError),
}

/// Takes complete export files through map, diff, queue and delivery, and files them.
pub struct FilePipeline {
    config: Arc<Config>,
    outbox: Arc<Outbox>,
    uploader: Uploader,
    notices: Option<Notices>,
}

impl FilePipeline {
    pub fn new(
        config: Arc<Config>,
        outbox: Arc<Outbox>,
        uploader: Uploader,
        notices: Option<Notices>,
    ) -> FilePipeline {
        FilePipeline {
            config,
            outbox,
            uploader,
            notices,
        }
    }

    pub fn uploader(&self) -> &Uploader {
        &self.uploader
    }

    /// One file of `feed`, complete, in its inbox (or in `processing/`, resumed after a crash):
    /// claimed into `processing/`, planned and committed, delivered, then archived with its
    /// report, or held, or failed. A fatal delivery error leaves it in `processing/` (its
    /// operations are queued) and is returned.
    pub async fn process(
        &self,
        feed: &FeedConfig,
        file: &Path,
    ) -> Result<(FileReport, PathBuf), DaemonError> {
        let folders = FeedFolders::new(&feed.inbox);
        let folder_error = |path: &Path| {
            let path = path.to_owned();
            move |source| DaemonError::Folder { path, source }
        };
        folders.ensure().map_err(folder_error(&feed.inbox))?;
        let processing = if file.parent().and_then(Path::file_name)
            == Some(std::ffi::OsStr::new("processing"))
        {
            file.to_owned()
        } else {
            folders.claim(file).map_err(folder_error(file))?
        };
        let name = processing
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();

        let planned = self.plan(feed, &processing).await?;
        let planned = match planned {
            Ok(planned) => planned,
            Err(reason) => {
                tracing::warn!(feed = %feed.name, file = %name, %reason, "file cannot be read");
                let sha256 = crate::diff::FileId::of_path(&processing)
                    .map(|f| f.sha256)
                    .unwrap_or_default();
                let report =
                    FileReport::new(&feed.name, &name, &sha256, Outcome::Failed { reason });
                let to = folders
                    .fail(&processing, &report)
                    .map_err(folder_error(&processing))?;
                return Ok((report, to));
            }
        };
        let plan = &planned.plan;
        if let Verdict::Held { reasons } = &plan.verdict {
            let report = FileReport::planned(&planned, None);
            let to = folders
                .hold(&processing, &report)
                .map_err(folder_error(&processing))?;
            tracing::warn!(feed = %feed.name, file = %name, reason = %reasons.join("; "), "held by the safety guard");
            if let Some(notices) = &self.notices {
                notices.held(&to.display().to_string(), &plan.file.sha256, reasons);
            }
            return Ok((report, to));
        }
        let drained = self.uploader.drain().await?;
        let report = FileReport::planned(&planned, Some(&drained));
        if let Some(notices) = &self.notices {
            let mut problems: Vec<String> = report
                .rejected_records
                .iter()
                .map(|r| format!("line {}: {}", r.line, r.problem))
                .collect();
            problems.extend(report.refused.iter().map(ToString::to_string));
            notices.rejected(&name, &plan.file.sha256, &problems);
        }
        let to = folders
            .archive(&processing, &report)
            .map_err(folder_error(&processing))?;
        tracing::info!(feed = %feed.name, file = %name, summary = %report.summary(), "file done");
        Ok((report, to))
    }

    /// Maps, diffs and commits a file off the async threads. The inner error is a file that
    /// cannot be read, with its reason.
    async fn plan(
        &self,
        feed: &FeedConfig,
        path: &Path,
    ) -> Result<Result<crate::diff::FilePlan, String>, DaemonError> {
        let profile =
            Profile::find(&feed.profile, &self.config.profiles_dir).map_err(|source| {
                DaemonError::Profile {
                    feed: feed.name.clone(),
                    source,
                }
            })?;
        let lots: Vec<u64> = profile.locations.values().copied().collect();
        let rules = feed.rules(self.config.api.organization_id, &lots, false);
        let (outbox, path, location_id) = (self.outbox.clone(), path.to_owned(), feed.location_id);
        let planned = tokio::task::spawn_blocking(move || {
            diff_file(&outbox, rules, &profile, location_id, &path, true)
        })
        .await
        .map_err(|e| DaemonError::Diff(e.to_string()))?;
        match planned {
            Ok(planned) => Ok(Ok(planned)),
            Err(FileDiffError::Io(e)) => Ok(Err(e.to_string())),
            Err(FileDiffError::Export(e)) => Ok(Err(e.to_string())),
            Err(e @ FileDiffError::Diff(_)) => Err(DaemonError::Diff(e.to_string())),
        }
    }
}
