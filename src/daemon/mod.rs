//! The daemon's stages around the pipeline: a file's way through its feed's folders
//! ([`crate::inbox`]) with the report it leaves behind, and [`FilePipeline`], which takes one
//! complete export from its inbox to the service.
//!
//! A file's plan (profile, rules, the service's list when needed, the diff, the notices it
//! calls for) is [`lifecycle`]'s, the same for the one-shot commands.
//!
//! `lotsync demo` drives the pipeline file by file; the watchers, control socket, nightly
//! reconciliation and sd_notify of `lotsync run` build on it. It owns the files' lifecycle, not
//! what to send (the diff) nor how (the uploader).

pub mod control;
pub mod lifecycle;
pub mod metrics;
mod run;
mod service_list;
pub mod status;
mod watch;
mod why;

pub use run::{held_feed, Daemon, Filed, Signal, StartError, GROWTH_QUIET};
pub use service_list::{read_service_list, ServiceListError};
pub use why::why;

use crate::config::{Config, FeedConfig};
use crate::diff::{DiffError, FileDiffError, Verdict};
use crate::inbox::{Claimed, FeedFolders, FileReport, Outcome};
use crate::mapper::ProfileError;
use crate::outbox::{FileProgress, Outbox};
use crate::state::StateError;
use crate::text::{Chain, Escaped};
use crate::upload::{DrainReport, Notices, RejectedOp, UploadError, Uploader};
use lifecycle::{FileToPlan, Listing, Past, PlanError, Planned};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What stops the pipeline (a file that cannot be read is not an error: it is moved to
/// `failed/` with its reason).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("feed {feed}")]
    Profile {
        feed: String,
        #[source]
        source: ProfileError,
    },
    #[error("{}", crate::text::shown_path(.path))]
    Folder {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The diff cannot be computed (the state or the outbox failed under it).
    #[error(transparent)]
    Diff(DiffError),
    /// The state cannot be read (looking up a file's committed plan).
    #[error(transparent)]
    State(#[from] StateError),
    /// A released file that cannot be planned (it cannot be read).
    #[error("{}", crate::text::shown_path(.file))]
    Unplannable {
        file: PathBuf,
        #[source]
        source: Box<FileDiffError>,
    },
    /// A blocking task of the pipeline (planning a file, reading or recording it in the
    /// state) did not finish.
    #[error("pipeline task failed")]
    Task(#[source] tokio::task::JoinError),
    #[error(transparent)]
    Upload(#[from] UploadError),
    #[error(transparent)]
    ServiceList(#[from] ServiceListError),
    /// The config's service client cannot be made. Only a plan that reads the service's list
    /// with the config's own client meets it ([`lifecycle::Listing::Configured`], a one-shot
    /// command's); the daemon plans with its uploader's.
    #[error(transparent)]
    Client(crate::config::ConfigError),
    #[error(
        "{file}: not held for feed {feed:?} (no held file has this content); nothing to release"
    )]
    NotHeld { file: PathBuf, feed: String },
    /// A release of a full snapshot older than one applied since (without `--force`).
    #[error(
        "{}: not released: it is {}; nothing was sent and it stays held. If it is right all \
         the same, the same release with --force applies it",
        crate::text::shown_path(.file),
        crate::diff::Verdict::superseded_reason(.newer, *.newer_as_of, *.as_of)
    )]
    Older {
        file: PathBuf,
        newer: String,
        newer_as_of: i64,
        as_of: i64,
    },
    /// A held file released already, whose delivery has not finished: it waits in
    /// `processing/`.
    #[error(
        "{}: released already; it waits in processing/ and is filed in archive/ with its \
         report once its operations are delivered (`{}` says why not yet)",
        crate::text::shown_path(.file),
        crate::config::advice(&["status"])
    )]
    Released { file: PathBuf },
    /// A released file whose delivery stopped: it waits in `processing/` (its operations
    /// queued) and is filed in the archive once they are delivered.
    #[error(
        "{}: released and queued, but delivery stopped; the file waits in processing/ and is \
         filed in archive/ with its report once its operations are delivered",
        crate::text::shown_path(.file)
    )]
    Stopped {
        file: PathBuf,
        #[source]
        source: Box<DaemonError>,
    },
}

impl From<PlanError> for DaemonError {
    fn from(e: PlanError) -> DaemonError {
        match e {
            PlanError::Profile { feed, source } => DaemonError::Profile { feed, source },
            PlanError::ServiceList(e) => DaemonError::ServiceList(e),
            PlanError::Client(e) => DaemonError::Client(e),
            PlanError::Diff(e) => DaemonError::Diff(e),
            PlanError::Task(e) => DaemonError::Task(e),
        }
    }
}

impl DaemonError {
    /// The service's answer that stopped the file, when it is one nothing but a change of
    /// setup fixes (a refused token, say).
    pub fn fatal_api_error(&self) -> Option<&crate::api::ApiError> {
        match self {
            DaemonError::Stopped { source, .. } => source.fatal_api_error(),
            DaemonError::Upload(UploadError::Fatal { error, .. })
            | DaemonError::ServiceList(ServiceListError::List { error, .. })
                if error.class() == crate::api::ErrorClass::Fatal =>
            {
                Some(error)
            }
            _ => None,
        }
    }
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

    /// Delivers what is queued, one delivery at a time. With `file_no`, the refusals of that
    /// file's operations come back in the report, also those answered during an earlier
    /// delivery; the others are kept for their own file.
    pub async fn deliver(&self, file_no: Option<u64>) -> Result<DrainReport, UploadError> {
        let mut carried = self.delivery.lock().await;
        let mut report = self.uploader.drain().await?;
        carried.append(&mut report.rejected);
        if let Some(file_no) = file_no {
            let (mine, others): (Vec<_>, Vec<_>) =
                carried.drain(..).partition(|r| r.file_no == Some(file_no));
            *carried = others;
            report.rejected = mine;
        }
        // Refusals of a file nobody reports on any more (a crash between delivery and the
        // report) are not kept for ever.
        let excess = carried.len().saturating_sub(10_000);
        carried.drain(..excess);
        Ok(report)
    }

    /// One file of `feed`, complete, in its inbox: claimed into `processing/`, then taken as
    /// [`FilePipeline::process_claimed`] does. A name lotsync cannot file sends it to
    /// `failed/` instead.
    pub async fn process(
        &self,
        feed: &FeedConfig,
        file: &Path,
    ) -> Result<(FileReport, PathBuf), DaemonError> {
        let folders = FeedFolders::new(&feed.inbox);
        let inbox = feed.inbox.clone();
        blocking(move || folders.ensure().map_err(folder_error(&inbox))).await?;
        match self.claim(feed, file).await? {
            Taken::Claimed(claimed) => self.process_claimed(feed, &claimed).await,
            Taken::Filed(report, to) => Ok((*report, to)),
        }
    }

    /// Takes an arrived file into `processing/`, or files it in `failed/` when lotsync cannot
    /// file it under its name (off the async threads: a move, or a hash and a report).
    pub async fn claim(&self, feed: &FeedConfig, file: &Path) -> Result<Taken, DaemonError> {
        let (feed, file) = (feed.clone(), file.to_owned());
        let taken = blocking(move || {
            if let Some(reason) = FeedFolders::name_problem(&file) {
                let (report, to) = fail_name(&feed, &file, reason)?;
                return Ok(Taken::Filed(Box::new(report), to));
            }
            FeedFolders::new(&feed.inbox)
                .claim(&file)
                .map(Taken::Claimed)
                .map_err(folder_error(&file))
        })
        .await?;
        if let (Taken::Filed(report, to), Some(notices)) = (&taken, self.notices()) {
            if let Outcome::Failed { reason } = &report.outcome {
                notices.failed(&shown_path(to), &report.sha256, reason);
            }
        }
        Ok(taken)
    }

    /// A claimed file: planned and committed (the draft of its report written just before),
    /// delivered, then archived with its report; or held, or failed. A file whose plan was
    /// committed before (resumed after an interruption, or tried again after a fatal answer)
    /// is not planned again: what is left of it is delivered, and its report is the one its
    /// first attempt drafted. A fatal delivery error leaves it in `processing/` (its
    /// operations are queued) and is returned.
    pub async fn process_claimed(
        &self,
        feed: &FeedConfig,
        claimed: &Claimed,
    ) -> Result<(FileReport, PathBuf), DaemonError> {
        let folders = FeedFolders::new(&feed.inbox);
        // Its plan was committed already: by a run a crash or a stop interrupted (resumed),
        // or by this one before a fatal answer stopped its delivery (tried again).
        if let Some((draft, file_no)) = self.committed_draft(feed, &folders, claimed).await? {
            let outcome = if claimed.resumed {
                Outcome::Resumed
            } else {
                Outcome::Applied
            };
            return self
                .deliver_and_archive(feed, claimed, draft, Some(file_no), outcome)
                .await;
        }
        let name = shown_name(&claimed.path);
        let planning = std::time::Instant::now();
        let planned = self
            .plan(feed, &claimed.path, Some(claimed), Past::Nothing)
            .await?;
        let lifecycle::PlannedFile { planned, report } = match planned {
            Planned::File(planned) => *planned,
            Planned::Incomplete(e) => {
                let reason = unplanned_reason(&e);
                // Taken before it was whole (a resumed file, or one cut after it was checked):
                // held, for a person to release once it is known to be right.
                let reasons = vec![incomplete_reason(&reason)];
                return self.hold_unplanned(feed, &claimed.path, reasons).await;
            }
            Planned::Unreadable(e) => {
                return self
                    .fail_unreadable(feed, &claimed.path, unplanned_reason(&e))
                    .await;
            }
        };
        let plan = &planned.plan;
        tracing::info!(
            feed = %feed.name,
            file = %name,
            records = planned.records,
            operations = report.planned.total(),
            secs = format_args!("{:.2}", planning.elapsed().as_secs_f64()),
            "planned"
        );
        self.log_notes(feed, &name, &report.notes);
        match &plan.verdict {
            Verdict::Held { reasons } => {
                let to = file_away(&folders, &claimed.path, &report, FeedFolders::hold).await?;
                let reason = Escaped(&reasons.join("; ")).to_string();
                // The reason in the message too: `journalctl` and `systemctl status` show
                // only the message.
                tracing::warn!(feed = %feed.name, file = %name, reason = %reason, "held by the safety guard: {reason}");
                lifecycle::tell_held(self.notices(), &to, &plan.file.sha256, reasons);
                Ok((report, to))
            }
            Verdict::AlreadyApplied { .. } => {
                let to = file_away(&folders, &claimed.path, &report, FeedFolders::archive).await?;
                tracing::info!(feed = %feed.name, file = %name, summary = %report.summary(), "file done");
                Ok((report, to))
            }
            Verdict::Superseded { newer, .. } => {
                let to = file_away(&folders, &claimed.path, &report, FeedFolders::archive).await?;
                tracing::warn!(feed = %feed.name, file = %name, newer = %Escaped(newer), reason = %report.summary(), "superseded: older than a snapshot applied already; nothing sent");
                Ok((report, to))
            }
            Verdict::Apply { .. } => {
                self.deliver_and_archive(feed, claimed, report, plan.file_no, Outcome::Applied)
                    .await
            }
        }
    }

    /// The draft of a claimed file whose plan was committed (by a run an interruption
    /// stopped, or before a fatal answer), with the number its plan is filed under: the draft
    /// names it, and the state has a queued plan of this content under it. None when the plan
    /// was never committed (the crash came first) or there is no draft (a re-dropped copy of
    /// an applied file).
    async fn committed_draft(
        &self,
        feed: &FeedConfig,
        folders: &FeedFolders,
        claimed: &Claimed,
    ) -> Result<Option<(FileReport, u64)>, DaemonError> {
        let (outbox, feed_name, folders, claimed) = (
            self.outbox.clone(),
            feed.name.clone(),
            folders.clone(),
            claimed.clone(),
        );
        blocking(move || {
            let Some((draft, file_no)) = folders
                .draft(&claimed)
                .and_then(|d| d.file_no.map(|n| (d, n)))
            else {
                return Ok(None);
            };
            let filed = outbox.state().file(file_no)?;
            let committed = filed.is_some_and(|f| {
                f.feed == feed_name
                    && f.sha256 == draft.sha256
                    && matches!(f.outcome, crate::state::FileOutcome::Queued { .. })
            });
            Ok(committed.then_some((draft, file_no)))
        })
        .await
    }

    /// Delivers what is queued and archives the file with its report: the counts are what
    /// the service acknowledged for this file, beside what is still queued and refused.
    async fn deliver_and_archive(
        &self,
        feed: &FeedConfig,
        claimed: &Claimed,
        mut report: FileReport,
        file_no: Option<u64>,
        outcome: Outcome,
    ) -> Result<(FileReport, PathBuf), DaemonError> {
        report.outcome = outcome;
        if let Err(e) = self.deliver_reported(&mut report, file_no).await {
            // The file stays in hand: its draft says what is delivered and queued now.
            self.redraft(feed, claimed).await;
            return Err(e);
        }
        let folders = FeedFolders::new(&feed.inbox);
        let to = file_away(&folders, &claimed.path, &report, FeedFolders::archive).await?;
        tracing::info!(feed = %feed.name, file = %Escaped(&report.file), summary = %report.summary(), "file done");
        Ok((report, to))
    }

    /// Writes a claimed file's draft again with what its plan has delivered and still has
    /// queued now: after a delivery that stopped (a fatal answer, the daemon stopping), so
    /// that the draft left in `processing/` says what is true. Nothing without a draft of a
    /// committed plan. A draft that cannot be written keeps the last one (said in the log):
    /// the file's way does not depend on it.
    pub async fn redraft(&self, feed: &FeedConfig, claimed: &Claimed) {
        let (outbox, folders, in_hand) = (
            self.outbox.clone(),
            FeedFolders::new(&feed.inbox),
            claimed.clone(),
        );
        let written = tokio::task::spawn_blocking(move || {
            let Some((mut draft, file_no)) = folders
                .draft(&in_hand)
                .and_then(|d| d.file_no.map(|n| (d, n)))
            else {
                return Ok(());
            };
            let progress = outbox
                .progress(file_no)
                .map_err(|e| Chain(&e).to_string())?;
            draft.in_hand(&progress);
            folders
                .write_draft(&in_hand, &draft)
                .map_err(|e| Chain(&e).to_string())
        })
        .await;
        let error = match written {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e,
            Err(e) => Chain(&e).to_string(),
        };
        tracing::warn!(feed = %feed.name, file = %shown_name(&claimed.path), error = %Escaped(&error), "cannot write the file's draft again; it keeps the last one");
    }

    /// Delivers what is queued, and makes `report`'s counts what the service acknowledged
    /// for the plan filed as `file_no`, beside what is still queued and refused; tells the
    /// problems.
    async fn deliver_reported(
        &self,
        report: &mut FileReport,
        file_no: Option<u64>,
    ) -> Result<(), DaemonError> {
        let drained = self.deliver(file_no).await?;
        let progress = match file_no {
            Some(n) => {
                let outbox = self.outbox.clone();
                tokio::task::spawn_blocking(move || outbox.progress(n))
                    .await
                    .map_err(DaemonError::Task)?
                    .map_err(UploadError::from)?
            }
            None => FileProgress::default(),
        };
        report.delivered(&progress, drained.rejected);
        lifecycle::tell_rejected(self.notices(), report);
        Ok(())
    }

    /// A file that cannot be read: to `failed/` with a report that says why.
    pub async fn fail_unreadable(
        &self,
        feed: &FeedConfig,
        file: &Path,
        reason: String,
    ) -> Result<(FileReport, PathBuf), DaemonError> {
        let folders = FeedFolders::new(&feed.inbox);
        let name = shown_name(file);
        tracing::warn!(feed = %feed.name, file = %name, reason = %Escaped(&reason), "file cannot be read");
        let (feed_name, path) = (feed.name.clone(), file.to_owned());
        let told = reason.clone();
        let (report, to, sha256) = blocking(move || {
            let sha256 = crate::diff::FileId::of_path(&path)
                .map(|f| f.sha256)
                .unwrap_or_default();
            let report = FileReport::new(&feed_name, &name, &sha256, Outcome::Failed { reason });
            let to = folders.fail(&path, &report).map_err(folder_error(&path))?;
            Ok((report, to, sha256))
        })
        .await?;
        if let Some(notices) = self.notices() {
            notices.failed(&shown_path(&to), &sha256, &told);
        }
        Ok((report, to))
    }

    /// A file that stayed incomplete, or was found cut once taken: to `held/` with a report,
    /// recorded as held so that `lotsync release` takes it as it is.
    pub async fn hold_unplanned(
        &self,
        feed: &FeedConfig,
        file: &Path,
        reasons: Vec<String>,
    ) -> Result<(FileReport, PathBuf), DaemonError> {
        let folders = FeedFolders::new(&feed.inbox);
        let name = shown_name(file);
        let (outbox, feed_name, path, reason) = (
            self.outbox.clone(),
            feed.name.clone(),
            file.to_owned(),
            reasons.join("; "),
        );
        let held_reasons = reasons.clone();
        let (report, to) = blocking(move || {
            let sha256 = crate::diff::FileId::of_path(&path)
                .map_err(folder_error(&path))?
                .sha256;
            let report = FileReport::new(
                &feed_name,
                &name,
                &sha256,
                Outcome::Held {
                    reasons: held_reasons,
                },
            );
            outbox
                .record_held(&feed_name, &file_name(&path), &sha256, &reason)
                .map_err(UploadError::from)?;
            let to = folders.hold(&path, &report).map_err(folder_error(&path))?;
            Ok((report, to))
        })
        .await?;
        let (name, sha256) = (report.file.clone(), report.sha256.clone());
        let reason = Escaped(&reasons.join("; ")).to_string();
        tracing::warn!(feed = %feed.name, file = %name, reason = %reason, "held: {reason}");
        lifecycle::tell_held(self.notices(), &to, &sha256, &reasons);
        Ok((report, to))
    }

    /// Queues a file the safety guard held (or that stayed incomplete), past the guard and as
    /// it is, delivers it, and archives it with its report. Refused when no held file of the
    /// feed has this content or, in `held/`, its name (a file its writer finished there is
    /// taken as it now is); and, unless `force`, when it is a full snapshot older than one
    /// applied since ([`DaemonError::Older`]). A file in `held/` is taken into `processing/`
    /// first: when its delivery stops ([`DaemonError::Stopped`]) it waits there, resumed at
    /// the next start, and is filed once its operations are delivered.
    pub async fn release(
        &self,
        feed: &FeedConfig,
        file: &Path,
        force: bool,
    ) -> Result<Released, DaemonError> {
        let folders = FeedFolders::new(&feed.inbox);
        let (profile, rules) = lifecycle::profile_and_rules(&self.config(), feed, Past::Guard)?;
        let full = rules.mode == crate::diff::Mode::Full;
        let (outbox, feed_name, name, path, looked_at) = (
            self.outbox.clone(),
            feed.name.clone(),
            file_name(file),
            file.to_owned(),
            folders.clone(),
        );
        // The file hashed and dated, the state read: off the async threads.
        let (in_held, as_of, was_held, newer) = blocking(move || {
            if looked_at.released_already(&path) {
                return Err(DaemonError::Released { file: path });
            }
            let sha256 = crate::diff::FileId::of_path(&path)
                .map_err(folder_error(&path))?
                .sha256;
            let in_held = looked_at.is_held(&path);
            let as_of = crate::diff::as_of(&path, &profile).at;
            let state = outbox.state();
            let held = state.is_held(&feed_name, &sha256)
                || (in_held && state.held_by_name(&feed_name, &name).is_some());
            let newer = match full {
                true => state.newer_snapshot(&feed_name, &rules.locations, as_of),
                false => Ok(None),
            };
            Ok((in_held, as_of, held, newer))
        })
        .await?;
        if !was_held {
            return Err(DaemonError::NotHeld {
                file: file.to_owned(),
                feed: feed.name.clone(),
            });
        }
        let newer = newer?;
        if let (Some(newer), false) = (&newer, force) {
            return Err(DaemonError::Older {
                file: file.to_owned(),
                newer: newer.name.clone(),
                newer_as_of: newer.as_of,
                as_of,
            });
        }
        // Out of held/ into processing/, where a stopped delivery is resumed from.
        let claimed = match in_held {
            true => {
                let (folders, file) = (folders.clone(), file.to_owned());
                Some(blocking(move || folders.claim(&file).map_err(folder_error(&file))).await?)
            }
            false => None,
        };
        let path = claimed.as_ref().map_or(file, |c| c.path.as_path());
        let past = match force {
            true => Past::GuardAndNewer,
            false => Past::Guard,
        };
        let planned = match self.plan(feed, path, claimed.as_ref(), past).await {
            Ok(Planned::File(planned)) => Ok(*planned),
            Ok(Planned::Incomplete(e) | Planned::Unreadable(e)) => Err(DaemonError::Unplannable {
                file: file.to_owned(),
                source: Box::new(e),
            }),
            Err(e) => Err(e),
        };
        let planned = match planned {
            Ok(planned) => planned,
            Err(e) => {
                // Back where it was, held.
                if let Some(claimed) = &claimed {
                    let (from, to) = (claimed.path.clone(), file.to_owned());
                    blocking(move || std::fs::rename(&from, &to).map_err(folder_error(&to)))
                        .await?;
                }
                return Err(e);
            }
        };
        if in_held {
            // Its held report goes with it: the archive gets the report of what it did.
            let (folders, file) = (folders.clone(), file.to_owned());
            blocking(move || folders.drop_report(&file).map_err(folder_error(&file))).await?;
        }
        let lifecycle::PlannedFile {
            planned,
            mut report,
        } = planned;
        tracing::info!(feed = %feed.name, file = %crate::text::shown_name(file), path = %crate::text::shown_path(file), operations = report.planned.total(), forced_older = newer.is_some(), "released past the safety guard");
        if let Err(e) = self
            .deliver_reported(&mut report, planned.plan.file_no)
            .await
        {
            return Err(match claimed {
                Some(claimed) => DaemonError::Stopped {
                    file: claimed.path,
                    source: Box::new(e),
                },
                None => e,
            });
        }
        let to = match &claimed {
            Some(claimed) => {
                file_away(&folders, &claimed.path, &report, FeedFolders::archive).await?
            }
            None => file.to_owned(),
        };
        Ok(Released {
            report,
            to,
            older_than: newer,
        })
    }

    /// What is worth a person's attention about a file as a whole, one event each.
    fn log_notes(&self, feed: &FeedConfig, file: &str, notes: &[String]) {
        for note in notes {
            tracing::warn!(feed = %feed.name, file = %file, note = %Escaped(note), "about the file");
        }
    }

    /// Plans and commits a file ([`lifecycle::plan_file`]; a claimed one with its report's
    /// draft written just before the commit), reading the service's list first when the
    /// state needs it. `past`: a release goes past the guard, and with `--force` past a newer
    /// snapshot.
    async fn plan(
        &self,
        feed: &FeedConfig,
        path: &Path,
        claimed: Option<&Claimed>,
        past: Past,
    ) -> Result<Planned, DaemonError> {
        let config = self.config();
        let file = FileToPlan {
            config: &config,
            feed,
            path,
            past,
            commit: true,
            keep_ops: false,
            claimed,
        };
        let listing = Listing::Read {
            client: self.uploader.client(),
            pace: self.uploader.pace(),
        };
        Ok(lifecycle::plan_file(&self.outbox, file, listing).await?)
    }
}

/// What a release did: the file's report, where it was filed, and the newer snapshot it was
/// forced over, if it was.
#[derive(Debug)]
pub struct Released {
    pub report: FileReport,
    pub to: PathBuf,
    pub older_than: Option<crate::state::SnapshotMark>,
}

/// What became of an arrived file that was taken.
#[derive(Debug)]
pub enum Taken {
    /// In `processing/`, to plan.
    Claimed(Claimed),
    /// In `failed/` (its name cannot be filed), with its report.
    Filed(Box<FileReport>, PathBuf),
}

/// Why a file was not planned ([`Planned::Unreadable`], [`Planned::Incomplete`]), as a
/// file's report and the log say it: the reading error's own text.
fn unplanned_reason(e: &FileDiffError) -> String {
    match e {
        FileDiffError::Io(e) => e.to_string(),
        FileDiffError::Export(e) => e.to_string(),
        FileDiffError::Diff(e) => Chain(e).to_string(),
    }
}

/// A file whose name lotsync cannot file: moved to `failed/` under one it can, with a report
/// naming the original and why. Blocking (a hash, a move, a report).
fn fail_name(
    feed: &FeedConfig,
    file: &Path,
    reason: String,
) -> Result<(FileReport, PathBuf), DaemonError> {
    let folders = FeedFolders::new(&feed.inbox);
    let shown = shown_name(file);
    let sha256 = crate::diff::FileId::of_path(file)
        .map(|f| f.sha256)
        .unwrap_or_default();
    let report = FileReport::new(&feed.name, &shown, &sha256, Outcome::Failed { reason });
    let to = folders
        .fail_name(file, &report)
        .map_err(folder_error(file))?;
    tracing::warn!(
        feed = %feed.name,
        file = %shown,
        moved_to = %shown_path(&to),
        reason = %report.summary(),
        "a file lotsync cannot take under its name"
    );
    Ok((report, to))
}

/// Moves a claimed file with its report (`to`: [`FeedFolders::archive`], `hold`, …) off the
/// async threads; where it went.
async fn file_away(
    folders: &FeedFolders,
    path: &Path,
    report: &FileReport,
    to: fn(&FeedFolders, &Path, &FileReport) -> std::io::Result<PathBuf>,
) -> Result<PathBuf, DaemonError> {
    let (folders, path, report) = (folders.clone(), path.to_owned(), report.clone());
    blocking(move || to(&folders, &path, &report).map_err(folder_error(&path))).await
}

/// Blocking work of a file's way (hashing it, moving it, writing its report, reading the
/// state) off the async threads: the runtime's threads serve delivery, the control socket and
/// the watchdog meanwhile.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, DaemonError> + Send + 'static,
) -> Result<T, DaemonError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(DaemonError::Task)?
}

/// The reason given for a file held because it is incomplete, with the way out.
pub fn incomplete_reason(reason: &str) -> String {
    format!(
        "incomplete: {reason}; if the export really ends like this, releasing it takes it \
         as it is (or set ends_without_newline = true in the feed's profile)"
    )
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

fn shown_name(path: &Path) -> String {
    crate::text::shown_name(path)
}

fn shown_path(path: &Path) -> String {
    crate::text::shown_path(path)
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
            locations: lifecycle::feed_locations(config, feed),
        })
        .collect();
    crate::state::Opening {
        holder,
        markers: Some(markers),
        verify: true,
        cache_mib: config.state.cache_mib,
        retention: crate::state::Retention {
            keep_sold_days: config.state.keep_sold_days,
            keep_history_days: config.state.keep_history_days,
        },
    }
}
