//! The daemon's stages around the pipeline: a feed's folders and a file's way through them
//! ([`FeedFolders`]), the report each file leaves behind ([`FileReport`]), and
//! [`FilePipeline`], which takes one complete export from its inbox to the service.
//!
//! `lotsync demo` drives the pipeline file by file; the watchers, control socket, nightly
//! reconciliation and sd_notify of `lotsync run` build on it. It owns the files' lifecycle, not
//! what to send (the diff) nor how (the uploader).

pub mod control;
mod folders;
mod reconcile;
mod report;
mod run;
mod service_list;
pub mod status;
mod watch;

pub use crate::diff::field_drift;
pub use folders::{Arrival, FeedFolders};
pub use reconcile::{
    reconcile, FieldDrift, ForeignVehicle, ReconcileError, ReconcileReport, RepairCounts,
    RestoredFeed, Skipped, RECONCILE_FEED,
};
pub use report::{FileReport, Outcome, RecordProblem};
pub use run::{held_feed, Daemon, Filed, Signal, StartError, STOP_GRACE};
pub use service_list::{listed_if_state_is_empty, ServiceListError};
pub use watch::{describe_notify_error, watch_inbox, Settler, WatchSettings};

use crate::config::{Config, FeedConfig};
use crate::diff::{diff_file, DiffOptions, FileDiffError, Verdict};
use crate::mapper::{Profile, ProfileError};
use crate::outbox::Outbox;
use crate::upload::{DrainReport, Notices, RejectedOp, UploadError, Uploader};
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
    #[error(transparent)]
    ServiceList(#[from] ServiceListError),
    #[error(
        "{file}: not held for feed {feed:?} (no held file has this content); nothing to release"
    )]
    NotHeld { file: PathBuf, feed: String },
}

/// Takes complete export files through map, diff, queue and delivery, and files them.
///
/// Several feeds plan their files at once; delivery is one at a time (one rate limit, one
/// outbox), and a refusal delivered while another file's delivery ran is kept for its own
/// file's report.
pub struct FilePipeline {
    config: std::sync::RwLock<Arc<Config>>,
    outbox: Arc<Outbox>,
    uploader: Uploader,
    notices: Option<Notices>,
    /// Held during a delivery; refusals of files whose report is not written yet.
    delivery: tokio::sync::Mutex<Vec<RejectedOp>>,
}

impl FilePipeline {
    pub fn new(
        config: Arc<Config>,
        outbox: Arc<Outbox>,
        uploader: Uploader,
        notices: Option<Notices>,
    ) -> FilePipeline {
        FilePipeline {
            config: std::sync::RwLock::new(config),
            outbox,
            uploader,
            notices,
            delivery: tokio::sync::Mutex::new(Vec::new()),
        }
    }

    pub fn uploader(&self) -> &Uploader {
        &self.uploader
    }

    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    pub fn notices(&self) -> Option<&Notices> {
        self.notices.as_ref()
    }

    /// The config files are planned with now.
    pub fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// A reloaded config (profiles and feeds; the service and state stay as started).
    pub fn set_config(&self, config: Arc<Config>) {
        *self
            .config
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = config;
    }

    /// Delivers what is queued, one delivery at a time. With `file`, the refusals of that
    /// file's operations come back in the report, also those answered during an earlier
    /// delivery; the others are kept for their own file.
    pub async fn deliver(&self, file: Option<&str>) -> Result<DrainReport, UploadError> {
        let mut carried = self.delivery.lock().await;
        let mut report = self.uploader.drain().await?;
        carried.append(&mut report.rejected);
        if let Some(file) = file {
            let (mine, others): (Vec<_>, Vec<_>) = carried.drain(..).partition(|r| r.file == file);
            *carried = others;
            report.rejected = mine;
        }
        // Refusals of a file nobody reports on any more (a crash between delivery and the
        // report) are not kept for ever.
        let excess = carried.len().saturating_sub(10_000);
        carried.drain(..excess);
        Ok(report)
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
        folders.ensure().map_err(folder_error(&feed.inbox))?;
        let resumed = is_in_processing(file);
        let processing = if resumed {
            file.to_owned()
        } else {
            folders.claim(file).map_err(folder_error(file))?
        };
        let name = file_name(&processing);

        let planned = match self.plan(feed, &processing, false).await? {
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
        let drained = self.deliver(Some(&plan.file.name)).await?;
        let mut report = FileReport::planned(&planned, Some(&drained));
        if resumed && matches!(plan.verdict, Verdict::AlreadyApplied { .. }) {
            // Its plan was committed before the interruption: what was left is delivered now.
            report.outcome = Outcome::Resumed;
        }
        self.tell_rejected(&report, &plan.file.sha256);
        let to = folders
            .archive(&processing, &report)
            .map_err(folder_error(&processing))?;
        tracing::info!(feed = %feed.name, file = %name, summary = %report.summary(), "file done");
        Ok((report, to))
    }

    /// Queues a file the safety guard held, past the guard, delivers it, and archives it
    /// (when it is in the feed's `held/` folder) with its report. Refused when no held file of
    /// the feed has this content.
    pub async fn release(
        &self,
        feed: &FeedConfig,
        file: &Path,
    ) -> Result<(FileReport, PathBuf), DaemonError> {
        let sha256 = crate::diff::FileId::of_path(file)
            .map_err(folder_error(file))?
            .sha256;
        let state = self.outbox.clone();
        let (feed_name, sha) = (feed.name.clone(), sha256.clone());
        let was_held = tokio::task::spawn_blocking(move || state.state().is_held(&feed_name, &sha))
            .await
            .map_err(|e| DaemonError::Diff(e.to_string()))?;
        if !was_held {
            return Err(DaemonError::NotHeld {
                file: file.to_owned(),
                feed: feed.name.clone(),
            });
        }
        let planned = self
            .plan(feed, file, true)
            .await?
            .map_err(|reason| DaemonError::Diff(format!("{}: {reason}", file.display())))?;
        tracing::info!(feed = %feed.name, file = %file.display(), operations = planned.plan.ops.len(), "released past the safety guard");
        let drained = self.deliver(Some(&planned.plan.file.name)).await?;
        let report = FileReport::planned(&planned, Some(&drained));
        self.tell_rejected(&report, &planned.plan.file.sha256);
        let folders = FeedFolders::new(&feed.inbox);
        let in_held = file.parent().and_then(Path::file_name) == Some(std::ffi::OsStr::new("held"))
            && file.parent().and_then(Path::parent) == Some(feed.inbox.as_path());
        let to = if in_held {
            folders.archive(file, &report).map_err(folder_error(file))?
        } else {
            file.to_owned()
        };
        Ok((report, to))
    }

    fn tell_rejected(&self, report: &FileReport, sha256: &str) {
        if let Some(notices) = &self.notices {
            let mut problems: Vec<String> = report
                .rejected_records
                .iter()
                .map(|r| format!("line {}: {}", r.line, r.problem))
                .collect();
            problems.extend(report.refused.iter().map(ToString::to_string));
            notices.rejected(&report.file, sha256, &problems);
        }
    }

    /// Maps, diffs and commits a file off the async threads. The inner error is a file that
    /// cannot be read, with its reason.
    async fn plan(
        &self,
        feed: &FeedConfig,
        path: &Path,
        force: bool,
    ) -> Result<Result<crate::diff::FilePlan, String>, DaemonError> {
        let config = self.config();
        let profile = Profile::find(&feed.profile, &config.profiles_dir).map_err(|source| {
            DaemonError::Profile {
                feed: feed.name.clone(),
                source,
            }
        })?;
        let lots: Vec<u64> = profile.locations.values().copied().collect();
        let rules = feed.rules(config.api.organization_id, &lots, force);
        let listed =
            listed_if_state_is_empty(self.uploader.client(), &self.outbox, &config).await?;
        let options = DiffOptions {
            commit: true,
            listed,
        };
        let (outbox, path, location_id) = (self.outbox.clone(), path.to_owned(), feed.location_id);
        let planned = tokio::task::spawn_blocking(move || {
            diff_file(&outbox, rules, &profile, location_id, &path, options)
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

fn folder_error(path: &Path) -> impl FnOnce(std::io::Error) -> DaemonError {
    let path = path.to_owned();
    move |source| DaemonError::Folder { path, source }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// How commands open the state of `config`: each feed's inbox carries the state's marker, and
/// an applied export in its archive is evidence that a state existed.
pub fn state_opening(config: &Config, holder: crate::state::Holder) -> crate::state::Opening {
    let markers = config
        .feeds
        .iter()
        .map(|feed| crate::state::MarkedInbox {
            feed: feed.name.clone(),
            inbox: feed.inbox.clone(),
            applied_export: FeedFolders::new(&feed.inbox).applied_export(),
        })
        .collect();
    crate::state::Opening {
        holder,
        markers: Some(markers),
        verify: true,
    }
}

/// A file in a feed's `processing/` folder (claimed before an interruption).
pub fn is_in_processing(file: &Path) -> bool {
    file.parent().and_then(Path::file_name) == Some(std::ffi::OsStr::new("processing"))
}
