//! `lotsync run`: the daemon. One watcher and one worker per feed (a feed's files one at a
//! time, in order of arrival; feeds side by side), a delivery loop for what stays queued, the
//! control socket, archive pruning, and systemd's readiness, status and watchdog.
//!
//! Stopping (SIGTERM) stops taking files, lets the file in hand finish for a few seconds and
//! otherwise leaves it in `processing/` with its operations queued, to be resumed at the next
//! start. Reloading (SIGHUP) starts new feeds, stops removed ones after their file in hand,
//! and restarts changed ones; the service and state settings need a restart.

use super::control::{self, Reply, Request};
use super::metrics::{self, Health, Metrics, MetricsError, MetricsListener};
use super::status::{self, FeedLive, LastFile, Live};
use super::watch::{watch_inbox, FileStamp, WatchSettings};
use super::{DaemonError, FilePipeline, Taken};
use crate::api::ApiClient;
use crate::config::{Config, FeedConfig};
use crate::inbox::FileReport;
use crate::inbox::{Claimed, FeedFolders};
use crate::mapper::{ExportFile, Profile};
use crate::outbox::Outbox;
use crate::outcome::CommandOutcome;
use crate::text::{shown_path, Chain, Escaped};
use crate::upload::{UploadError, Uploader};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// On SIGTERM, the file in hand gets this long to finish before it is left for next time.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// After a fatal answer or a delivery that gave up, the next try waits this long at first,
/// doubling up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(15);
const RETRY_MAX: Duration = Duration::from_secs(300);

/// Control connections served at once (`lotsync status`, `release`, `reconcile`).
const CONTROL_CONNECTIONS: usize = 64;

/// Tries of a reconciliation asked of the daemon that fails, the first one included; the waits
/// between them are `[daemon] reconcile_retry_secs`, doubling.
const RECONCILE_TRIES: u32 = 5;

/// Archives are pruned at start and then this often.
const PRUNE_EVERY: Duration = Duration::from_secs(6 * 3600);

/// What the daemon's tasks share.
pub struct Daemon {
    pipeline: Arc<FilePipeline>,
    client: ApiClient,
    live: Mutex<Live>,
    /// Wakes the delivery loop (a release, a reconciliation, a file that left work queued).
    nudge: tokio::sync::Notify,
    /// Wakes the files waiting to be tried again (a reload may have fixed what stopped them).
    retry_now: tokio::sync::Notify,
    /// One reconciliation at a time.
    reconciling: tokio::sync::Mutex<()>,
    /// A failed reconciliation's next try: when, and which try it is.
    reconcile_retry: Mutex<Option<(Instant, u32)>>,
    /// Wakes the reconciliation's retry loop (a retry was set).
    reconcile_wake: tokio::sync::Notify,
    /// Each file's report once it is filed (for the demo and benchmarks to follow along).
    filed: tokio::sync::broadcast::Sender<Filed>,
    /// The counters of the metrics endpoint (kept also when it is off: they cost nothing).
    metrics: Metrics,
    /// The metrics endpoint's listener, bound at the start and served by [`Daemon::run`].
    metrics_listener: Mutex<Option<MetricsListener>>,
    /// Per running feed, the way to its worker's queue (a released file whose delivery
    /// stopped is handed to it, to be tried again and filed).
    workers: Mutex<HashMap<String, mpsc::Sender<PathBuf>>>,
}

/// A file's report and where the file went.
#[derive(Debug, Clone)]
pub struct Filed {
    pub report: FileReport,
    pub path: PathBuf,
}

/// A feed's running tasks.
struct RunningFeed {
    config: FeedConfig,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// Why the daemon cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    #[error(transparent)]
    Upload(#[from] UploadError),
    #[error(transparent)]
    Control(#[from] control::ControlError),
    #[error(transparent)]
    Metrics(#[from] MetricsError),
}

/// Signals the daemon reacts to, from the OS or from a test or the demo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Stop,
    Reload,
}

impl Daemon {
    /// Opens the state, connects the client, binds the control socket and the metrics
    /// endpoint (`[daemon] metrics`). Nothing is watched yet.
    pub fn open(
        config: Arc<Config>,
    ) -> Result<(Arc<Daemon>, tokio::net::UnixListener), StartError> {
        let opening = super::state_opening(&config, crate::state::Holder::Writer("run"));
        let outbox = Arc::new(Outbox::new(crate::state::State::open_with(
            &config.state.dir,
            &opening,
        )?));
        let client = config.api.client()?;
        let (uploader, notices) = Uploader::configured(client.clone(), outbox.clone(), &config)?;
        let listener = control::bind(&config.daemon.socket)?;
        let metrics_listener = match bind_metrics(&config) {
            Ok(bound) => bound,
            Err(e) => {
                // Ours: no other daemon answers there (bind refuses that).
                let _ = std::fs::remove_file(&config.daemon.socket);
                return Err(e.into());
            }
        };
        let pipeline = Arc::new(FilePipeline::new(config, outbox, uploader, notices));
        let daemon = Arc::new(Daemon {
            pipeline,
            client,
            live: Mutex::new(Live {
                started_at: crate::clock::UtcTime::now(),
                ..Live::default()
            }),
            nudge: tokio::sync::Notify::new(),
            retry_now: tokio::sync::Notify::new(),
            reconciling: tokio::sync::Mutex::new(()),
            reconcile_retry: Mutex::new(None),
            reconcile_wake: tokio::sync::Notify::new(),
            filed: tokio::sync::broadcast::channel(256).0,
            metrics: Metrics::default(),
            metrics_listener: Mutex::new(metrics_listener),
            workers: Mutex::new(HashMap::new()),
        });
        Ok((daemon, listener))
    }

    pub fn pipeline(&self) -> &Arc<FilePipeline> {
        &self.pipeline
    }

    /// Reports of the files filed from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Filed> {
        self.filed.subscribe()
    }

    /// Runs until `signals` says stop (or closes): watches every feed, answers the control
    /// socket, delivers, prunes. `config_path` is read again on [`Signal::Reload`].
    pub async fn run(
        self: Arc<Daemon>,
        listener: tokio::net::UnixListener,
        config_path: PathBuf,
        mut signals: mpsc::Receiver<Signal>,
    ) -> Result<(), DaemonError> {
        let config = self.pipeline.config();
        let (stop_tx, stop) = watch::channel(false);
        let mut feeds: BTreeMap<String, RunningFeed> = BTreeMap::new();
        for feed in &config.feeds {
            feeds.insert(feed.name.clone(), self.start_feed(feed.clone()));
        }
        let mut background = vec![
            tokio::spawn(self.clone().serve(listener, stop.clone())),
            tokio::spawn(self.clone().delivery_loop(stop.clone())),
            tokio::spawn(self.clone().prune_loop(stop.clone())),
            tokio::spawn(self.clone().reconcile_retry_loop(stop.clone())),
            tokio::spawn(watchdog(stop.clone())),
        ];
        let metrics_listener = self
            .metrics_listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(listener) = metrics_listener {
            tracing::info!(listen = %listener.shown(), "metrics at /metrics, health at /health");
            background.push(tokio::spawn(metrics::serve(
                listener,
                self.clone(),
                stop.clone(),
            )));
        }
        tracing::info!(
            feeds = config.feeds.len(),
            socket = %config.daemon.socket.display(),
            "lotsync is running"
        );
        notify_systemd(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(&format!("watching {} feeds", config.feeds.len())),
        ]);

        while let Some(signal) = signals.recv().await {
            match signal {
                Signal::Stop => break,
                Signal::Reload => self.reload(&config_path, &mut feeds).await,
            }
        }

        tracing::info!("stopping: no new files are taken");
        notify_systemd(&[
            sd_notify::NotifyState::Stopping,
            sd_notify::NotifyState::Status("stopping"),
        ]);
        let _ = stop_tx.send(true);
        for (_, feed) in std::mem::take(&mut feeds) {
            stop_feed(feed).await;
        }
        for task in background {
            task.abort();
            let _ = task.await;
        }
        let config = self.pipeline.config();
        let _ = std::fs::remove_file(&config.daemon.socket);
        let outbox = self.pipeline.outbox().clone();
        let flushed = tokio::task::spawn_blocking(move || (outbox.flush_marked(), outbox.len()));
        let queued = match flushed.await {
            Ok((Ok(()), queued)) => Some(queued),
            Ok((Err(e), queued)) => {
                tracing::error!(error = %Chain(&e), "cannot flush the state");
                Some(queued)
            }
            Err(_) => None,
        };
        tracing::info!(
            queued,
            "stopped; queued operations are sent at the next start"
        );
        Ok(())
    }

    /// Starts a feed's watcher and worker.
    fn start_feed(self: &Arc<Daemon>, feed: FeedConfig) -> RunningFeed {
        let (stop_tx, stop) = watch::channel(false);
        let (files_tx, files) = mpsc::channel(1024);
        let config = self.pipeline.config();
        let folders = FeedFolders::new(&feed.inbox);
        if let Err(e) = folders.ensure() {
            tracing::error!(feed = %feed.name, inbox = %feed.inbox.display(), error = %Chain(&e), "cannot prepare the inbox; the feed waits");
            self.feed_live(&feed.name, |l| {
                l.last_error = Some(format!("cannot prepare the inbox: {}", Chain(&e)));
            });
        }
        let settings = WatchSettings {
            feed: feed.name.clone(),
            mode: feed.watch,
            // Checked where it is read (`config::checks`: 0.1 to 3,600 s).
            poll_interval: Duration::from_secs_f64(feed.poll_interval_secs),
            settle: config.daemon.settle(),
            close_wait: config.daemon.incomplete_wait(),
        };
        tracing::info!(feed = %feed.name, inbox = %shown_path(&feed.inbox), watch = feed.watch.name(), "watching");
        self.workers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(feed.name.clone(), files_tx.clone());
        let watcher = tokio::spawn(watch_inbox(folders, settings, files_tx, stop.clone()));
        let worker = tokio::spawn(self.clone().feed_worker(feed.clone(), files, stop));
        RunningFeed {
            config: feed,
            stop: stop_tx,
            tasks: vec![watcher, worker],
        }
    }

    /// A feed's files, one at a time: first those a previous run left in `processing/`, then
    /// those the watcher hands over. A file whose last record is cut waits (parked) for the
    /// DMS to finish it: the watcher hands it over again once it changed and settled, and one
    /// that stays unchanged for `incomplete_wait_secs` goes to `held/`.
    async fn feed_worker(
        self: Arc<Daemon>,
        feed: FeedConfig,
        mut files: mpsc::Receiver<PathBuf>,
        mut stop: watch::Receiver<bool>,
    ) {
        let folders = FeedFolders::new(&feed.inbox);
        let unfinished = tokio::task::spawn_blocking(move || folders.unfinished())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        for claimed in unfinished {
            tracing::info!(feed = %feed.name, file = %crate::text::shown_name(&claimed.path), path = %crate::text::shown_path(&claimed.path), "resuming a file a previous run left unfinished");
            if !self.take_claimed(&feed, &claimed, &mut stop).await {
                return;
            }
        }
        let mut parked: HashMap<PathBuf, Parked> = HashMap::new();
        // Full snapshots much smaller than the feed's last, waiting in case they still grow.
        let mut growing: HashMap<PathBuf, Parked> = HashMap::new();
        // Handed over and not taken yet: the oldest export goes first.
        let mut waiting: Vec<PathBuf> = Vec::new();
        loop {
            if waiting.is_empty() {
                let wait = self.pipeline.config().daemon.incomplete_wait();
                let due = parked
                    .values()
                    .map(|p| p.since + wait)
                    .chain(growing.values().map(|g| g.since + GROWTH_QUIET))
                    .min();
                let file = tokio::select! {
                    _ = stop.changed() => return,
                    file = files.recv() => match file {
                        Some(file) => file,
                        None => return,
                    },
                    () = sleep_until(due), if due.is_some() => {
                        self.hold_unchanged(&feed, &mut parked, wait).await;
                        let now = Instant::now();
                        waiting.extend(
                            growing
                                .iter()
                                .filter(|(_, g)| now >= g.since + GROWTH_QUIET)
                                .map(|(path, _)| path.clone()),
                        );
                        continue;
                    }
                };
                waiting.push(file);
            }
            while let Ok(file) = files.try_recv() {
                if !waiting.contains(&file) {
                    waiting.push(file);
                }
            }
            if *stop.borrow() {
                return;
            }
            let Some(file) = self.oldest(&feed, &mut waiting).await else {
                continue;
            };
            let taken = if FeedFolders::new(&feed.inbox).is_processing(&file) {
                // A released file whose delivery stopped: tried again until it is filed.
                let claimed = Claimed {
                    path: file,
                    resumed: false,
                };
                self.take_claimed(&feed, &claimed, &mut stop).await
            } else {
                self.take_arrival(&feed, &file, &mut parked, &mut growing, &mut stop)
                    .await
            };
            if !taken {
                return;
            }
        }
    }

    /// Takes out of `waiting` the export that is oldest by what it says
    /// ([`crate::diff::as_of`]), the first handed over among equals: a feed's files are
    /// applied in the order they were exported, whatever order they arrived in.
    async fn oldest(&self, feed: &FeedConfig, waiting: &mut Vec<PathBuf>) -> Option<PathBuf> {
        let mut first = 0;
        if waiting.len() > 1 {
            let config = self.pipeline.config();
            let (profile_name, paths) = (feed.profile.clone(), waiting.clone());
            // The profile and each file's date are read off the async threads.
            first = tokio::task::spawn_blocking(move || {
                // A profile that cannot be read is said when the file is planned.
                let profile = Profile::find(&profile_name, &config.profiles_dir)
                    .unwrap_or_else(|_| Profile::auto());
                paths
                    .iter()
                    .enumerate()
                    .min_by_key(|(i, path)| (crate::diff::as_of(path, &profile).at, *i))
                    .map_or(0, |(i, _)| i)
            })
            .await
            .unwrap_or(0);
            if first != 0 {
                tracing::debug!(feed = %feed.name, file = %crate::text::shown_name(&waiting[first]), path = %crate::text::shown_path(&waiting[first]), "taken first: the oldest export waiting");
            }
        }
        (first < waiting.len()).then(|| waiting.remove(first))
    }

    /// A file the watcher handed over: filed in `failed/` when its name cannot be, parked
    /// when it is not whole yet, else claimed and taken. Returns false when the daemon stops.
    async fn take_arrival(
        &self,
        feed: &FeedConfig,
        file: &Path,
        parked: &mut HashMap<PathBuf, Parked>,
        growing: &mut HashMap<PathBuf, Parked>,
        stop: &mut watch::Receiver<bool>,
    ) -> bool {
        let shown = shown_path(file);
        // Handed over again: it changed since it was parked.
        let was_parked = parked.remove(file).is_some();
        // A name lotsync cannot file goes to failed/ at once, whole or not.
        let named = FeedFolders::name_problem(file).is_none();
        let cut = match named {
            true => self.incomplete(feed, file).await,
            false => None,
        };
        if let Some(reason) = cut {
            let Some(stamp) = stamp_of(file).await else {
                return true; // gone meanwhile
            };
            let wait = self.pipeline.config().daemon.incomplete_wait();
            if !was_parked {
                tracing::warn!(
                    feed = %feed.name,
                    file = %crate::text::shown_name(file),
                    path = %shown,
                    reason = %Escaped(&reason),
                    hold_after_secs = wait.as_secs(),
                    "the file is not whole yet; waiting for it to change (held if it does not)"
                );
            }
            self.feed_live(&feed.name, |l| {
                l.waiting_incomplete = Some(format!("{shown}: {reason}"));
            });
            parked.insert(file.to_owned(), Parked::now(stamp, reason));
            return true;
        }
        if parked.is_empty() {
            self.feed_live(&feed.name, |l| l.waiting_incomplete = None);
        }
        // A full snapshot much smaller than the feed's last may be a file its DMS writes in
        // two bursts: it is taken once it stayed unchanged for GROWTH_QUIET (the guard then
        // judges it as usual); one that changed meanwhile is looked at again.
        let stamp = stamp_of(file).await;
        let waited = growing
            .remove(file)
            .is_some_and(|g| Some(g.stamp) == stamp && g.since.elapsed() >= GROWTH_QUIET);
        if !waited {
            if let (Some(reason), Some(stamp)) = (self.smaller(feed, file).await, stamp) {
                tracing::info!(
                    feed = %feed.name,
                    file = %crate::text::shown_name(file),
                    path = %shown,
                    reason = %Escaped(&reason),
                    wait_secs = GROWTH_QUIET.as_secs(),
                    "a full snapshot much smaller than the last one: waiting in case its file still grows"
                );
                growing.insert(file.to_owned(), Parked::now(stamp, reason));
                return true;
            }
        }
        let claimed = match self.pipeline.claim(feed, file).await {
            Ok(Taken::Claimed(claimed)) => claimed,
            Ok(Taken::Filed(report, to)) => {
                self.file_done(feed, &report, &to);
                return true;
            }
            // Gone before its turn (replaced, or moved away by hand): nothing to do.
            Err(DaemonError::Folder { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return true
            }
            Err(e) => {
                self.file_error(
                    feed,
                    &shown,
                    &format!(
                        "cannot take it into processing/: {}; it stays in the inbox",
                        Chain(&e)
                    ),
                );
                return true;
            }
        };
        self.take_claimed(feed, &claimed, stop).await
    }

    /// For a full feed: why the file may not be whole yet, when it has noticeably fewer
    /// records than the feed's last applied file ([`GROWTH_SHRINK`]). Read off the async
    /// threads; a file or state that cannot be read says nothing here (its planning says it).
    async fn smaller(&self, feed: &FeedConfig, file: &Path) -> Option<String> {
        if feed.mode != crate::diff::Mode::Full {
            return None;
        }
        let last = self
            .pipeline
            .outbox()
            .state()
            .feed(&feed.name)
            .ok()
            .flatten()?
            .last_applied?;
        if last.records == 0 {
            return None;
        }
        let config = self.pipeline.config();
        let profile = Profile::find(&feed.profile, &config.profiles_dir).ok()?;
        let (path, location_id) = (file.to_owned(), feed.location_id);
        let records = tokio::task::spawn_blocking(move || -> Option<u64> {
            let mut export = ExportFile::open(&path, &profile, location_id).ok()?;
            let mut records = 0u64;
            while export.next_record().ok()?.is_some() {
                records += 1;
            }
            Some(records)
        })
        .await
        .ok()??;
        ((records as f64) < last.records as f64 * GROWTH_SHRINK).then(|| {
            format!(
                "{records} records, fewer than the {} of {}",
                last.records,
                Escaped(&last.name)
            )
        })
    }

    /// Why a file is not whole yet (its last record is cut), read off the async threads.
    async fn incomplete(&self, feed: &FeedConfig, file: &Path) -> Option<String> {
        let config = self.pipeline.config();
        // A profile that cannot be read is said when the file is planned.
        let profile = Profile::find(&feed.profile, &config.profiles_dir).ok()?;
        let path = file.to_owned();
        tokio::task::spawn_blocking(move || ExportFile::looks_cut(&path, &profile))
            .await
            .ok()?
    }

    /// Parked files that stayed unchanged for `wait`: held, with the reason. One that changed
    /// meanwhile is left to the watcher, which hands it over again once it settles.
    async fn hold_unchanged(
        &self,
        feed: &FeedConfig,
        parked: &mut HashMap<PathBuf, Parked>,
        wait: Duration,
    ) {
        let now = Instant::now();
        let due: Vec<PathBuf> = parked
            .iter()
            .filter(|(_, p)| now >= p.since + wait)
            .map(|(path, _)| path.clone())
            .collect();
        for path in due {
            let Some(p) = parked.remove(&path) else {
                continue;
            };
            if stamp_of(&path).await != Some(p.stamp) {
                continue;
            }
            // Still empty: nothing to release (an export with no vehicle has its header), so
            // not held but filed as unreadable, where a person sees it and the service is told.
            let filed = if p.stamp.is_empty() {
                let reason = format!(
                    "the file is empty (0 bytes, unchanged for {} s): nothing to read; did the \
                     DMS's export fail? Its next export is taken as usual",
                    wait.as_secs()
                );
                self.pipeline.fail_unreadable(feed, &path, reason).await
            } else {
                let reason = super::incomplete_reason(&format!(
                    "{} (unchanged for {} s)",
                    p.reason,
                    wait.as_secs()
                ));
                self.pipeline
                    .hold_unplanned(feed, &path, vec![reason])
                    .await
            };
            match filed {
                Ok((report, to)) => self.file_done(feed, &report, &to),
                Err(e) => self.file_error(feed, &shown_path(&path), &Chain(&e).to_string()),
            }
        }
        if parked.is_empty() {
            self.feed_live(&feed.name, |l| l.waiting_incomplete = None);
        }
    }

    /// A file that could not be taken: in the log and `status`.
    fn file_error(&self, feed: &FeedConfig, file: &str, error: &str) {
        tracing::error!(feed = %feed.name, file = %file, error = %Escaped(error), "a file could not be taken");
        self.feed_live(&feed.name, |l| {
            l.last_error = Some(format!("{file}: {error}"));
        });
    }

    /// One claimed file, retried after fatal errors until it is through or the daemon
    /// stops. Returns false when the daemon stops.
    async fn take_claimed(
        &self,
        feed: &FeedConfig,
        claimed: &Claimed,
        stop: &mut watch::Receiver<bool>,
    ) -> bool {
        let name = crate::text::shown_name(&claimed.path);
        self.feed_live(&feed.name, |l| l.current = Some(name.clone()));
        let mut wait = RETRY_FIRST;
        let mut refused_token = false;
        let done = loop {
            // The token file may have been rotated while this waited: the try goes out with
            // what it holds now, not with the token the service refused.
            if std::mem::take(&mut refused_token) {
                self.read_token_again();
            }
            let work = self.pipeline.process_claimed(feed, claimed);
            tokio::pin!(work);
            let result = tokio::select! {
                result = &mut work => result,
                _ = stop.changed() => {
                    match tokio::time::timeout(STOP_GRACE, &mut work).await {
                        Ok(result) => result,
                        Err(_) => {
                            tracing::warn!(feed = %feed.name, file = %name, "stopping in the middle of the file; it is resumed at the next start");
                            self.pipeline.redraft(feed, claimed).await;
                            break false;
                        }
                    }
                }
            };
            match result {
                Ok((report, to)) => {
                    self.file_done(feed, &report, &to);
                    break !*stop.borrow();
                }
                Err(e) => {
                    let mut retry_in = wait;
                    if let Some(error) = e.fatal_api_error() {
                        self.set_error(Some(error.to_string()));
                        // The uploader records its own; the service's list is read here.
                        self.pipeline.uploader().stopped_by(error);
                        if error.status() == Some(401) {
                            if self.read_token_again() {
                                retry_in = Duration::from_secs(1);
                            } else {
                                refused_token = true;
                            }
                        }
                    }
                    tracing::error!(feed = %feed.name, file = %name, error = %Escaped(&Chain(&e).to_string()), retry_in_secs = retry_in.as_secs(), "file not finished; it stays in processing/ and is tried again");
                    self.feed_live(&feed.name, |l| l.last_error = Some(Chain(&e).to_string()));
                    tokio::select! {
                        _ = stop.changed() => break false,
                        () = self.retry_now.notified() => {}
                        () = tokio::time::sleep(retry_in) => {}
                    }
                    wait = (wait * 2).min(RETRY_MAX);
                }
            }
        };
        self.feed_live(&feed.name, |l| l.current = None);
        done
    }

    /// The wait the service asked for, while it lasts.
    fn service_window(&self) -> Option<crate::api::Window> {
        self.pipeline.uploader().client().service_wait().window()
    }

    /// Reads the API token again (the token file may have been rotated): true when it
    /// changed, and the client uses it from now on. Said in the log either way it matters.
    fn read_token_again(&self) -> bool {
        let config = self.pipeline.config();
        match config.api.load_token() {
            Ok(token) if self.client.token_is(&token) => false,
            Ok(token) => match self.client.set_token(token) {
                Ok(()) => {
                    tracing::info!("the API token changed; using the new one");
                    self.set_error(None);
                    self.pipeline.uploader().forget_stop(401);
                    true
                }
                Err(e) => {
                    tracing::error!(error = %Chain(&e), "the new API token cannot be used");
                    false
                }
            },
            Err(e) => {
                tracing::error!(error = %Chain(&e), "cannot read the API token again");
                false
            }
        }
    }

    fn file_done(&self, feed: &FeedConfig, report: &FileReport, to: &Path) {
        let outcome = report.outcome.name();
        self.metrics.file_filed(&feed.name, outcome);
        let summary = report.summary();
        self.feed_live(&feed.name, |l| {
            l.last_file = Some(LastFile {
                name: report.file.clone(),
                outcome: outcome.into(),
                // Written by the report a moment ago; now is as near when it cannot be read.
                at: crate::clock::UtcTime::parse(&report.finished_at)
                    .unwrap_or_else(crate::clock::UtcTime::now),
                summary: summary.clone(),
            });
            l.last_error = None;
        });
        self.set_error(None);
        if report.undelivered > 0 {
            self.nudge.notify_one();
        }
        tracing::debug!(feed = %feed.name, file = %crate::text::shown_name(to), path = %crate::text::shown_path(to), "filed");
        // Nobody listening is the usual case.
        let _ = self.filed.send(Filed {
            report: report.clone(),
            path: to.to_owned(),
        });
        // Counted through the whole outbox: off the async threads, told when counted.
        let (outbox, status) = (
            self.pipeline.outbox().clone(),
            format!("{}: {} {outcome}", feed.name, report.file),
        );
        tokio::task::spawn_blocking(move || {
            notify_systemd(&[sd_notify::NotifyState::Status(&format!(
                "{status}; {} operations queued",
                outbox.len()
            ))]);
        });
    }

    /// Delivers what stays queued (operations of a run that stopped, a delivery that gave up,
    /// a release): at start, when nudged, and with growing waits while it keeps failing.
    async fn delivery_loop(self: Arc<Daemon>, mut stop: watch::Receiver<bool>) {
        let mut wait = RETRY_FIRST;
        let mut refused_token = false;
        loop {
            if !self.outbox_empty().await {
                // As in `take_claimed`: a token rotated during the wait is the one tried.
                if std::mem::take(&mut refused_token) {
                    self.read_token_again();
                }
                match self.pipeline.deliver(None).await {
                    Ok(report) if report.stopped.is_none() => {
                        wait = RETRY_FIRST;
                        self.set_error(None);
                    }
                    Ok(report) => {
                        if let Some(window) = self.service_window() {
                            // Said once by the client when the wait began; tried again as
                            // soon as it is over.
                            tracing::debug!(queued = report.undelivered, until = %window.until_shown(), "delivery waits for the service");
                        } else {
                            tracing::warn!(
                                queued = report.undelivered,
                                reason = report.stopped.as_deref().unwrap_or(""),
                                retry_in_secs = wait.as_secs(),
                                "delivery stopped; trying again later"
                            );
                            wait = (wait * 2).min(RETRY_MAX);
                        }
                    }
                    Err(e) => {
                        let refused = matches!(
                            &e,
                            UploadError::Fatal { error, .. } if error.status() == Some(401)
                        );
                        let token_changed = refused && self.read_token_again();
                        refused_token = refused && !token_changed;
                        if token_changed {
                            wait = Duration::from_secs(1);
                        } else {
                            tracing::error!(error = %Chain(&e), retry_in_secs = wait.as_secs(), "delivery failed; trying again later");
                            self.set_error(Some(Chain(&e).to_string()));
                            wait = (wait * 2).min(RETRY_MAX);
                        }
                    }
                }
            }
            let pause = match self.service_window() {
                Some(window) => window
                    .until
                    .saturating_duration_since(std::time::Instant::now()),
                None if self.outbox_empty().await => RETRY_MAX,
                None => wait,
            };
            tokio::select! {
                _ = stop.changed() => return,
                () = self.nudge.notified() => {}
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Whether the outbox is empty, read off the async threads (a plan's commit holds the
    /// state's lock meanwhile). Not empty when it cannot be read: delivery then says why.
    async fn outbox_empty(&self) -> bool {
        let outbox = self.pipeline.outbox().clone();
        tokio::task::spawn_blocking(move || outbox.is_empty())
            .await
            .unwrap_or(false)
    }

    /// Tries a failed reconciliation again when its time comes.
    async fn reconcile_retry_loop(self: Arc<Daemon>, mut stop: watch::Receiver<bool>) {
        loop {
            let next = *self
                .reconcile_retry
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            tokio::select! {
                _ = stop.changed() => return,
                () = self.reconcile_wake.notified() => {}
                () = sleep_until(next.map(|(at, _)| at)) => {
                    let due = self
                        .reconcile_retry
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .take_if(|(at, _)| *at <= Instant::now());
                    if let Some((_, tries)) = due {
                        tracing::info!(tries, "trying the failed reconciliation again");
                        let reply = self.reconcile_try(tries).await;
                        if reply.outcome != CommandOutcome::Failed {
                            tracing::info!(outcome = ?reply.outcome, "the reconciliation tried again succeeded");
                        }
                    }
                }
            }
        }
    }

    async fn prune_loop(self: Arc<Daemon>, mut stop: watch::Receiver<bool>) {
        loop {
            let config = self.pipeline.config();
            let days = config.daemon.archive_days;
            let inboxes: Vec<(String, PathBuf)> = config
                .feeds
                .iter()
                .map(|f| (f.name.clone(), f.inbox.clone()))
                .collect();
            let outbox = self.pipeline.outbox().clone();
            let _ = tokio::task::spawn_blocking(move || {
                // What the state no longer keeps ([state] keep_*_days), also on a lot whose
                // files stopped coming (each plan prunes too).
                if let Err(e) = outbox.state().prune(crate::state::now()) {
                    tracing::warn!(error = %Chain(&e), "cannot let go of what the state no longer keeps");
                }
                for (feed, inbox) in inboxes {
                    match FeedFolders::new(&inbox).prune_archive(days) {
                        Ok(deleted) if !deleted.is_empty() => {
                            tracing::info!(feed = %feed, folders = deleted.len(), days, "old archives deleted");
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(feed = %feed, error = %Chain(&e), "cannot prune the archive");
                        }
                    }
                }
            })
            .await;
            tokio::select! {
                _ = stop.changed() => return,
                () = tokio::time::sleep(PRUNE_EVERY) => {}
            }
        }
    }

    /// Answers the control socket until the daemon stops, [`CONTROL_CONNECTIONS`] at a time:
    /// the socket's group may include the DMS's account, and idle connections without a cap
    /// would take every file descriptor the daemon has (a file in hand would then fail with
    /// "Too many open files"). Further ones wait in the listen queue, costing the daemon
    /// nothing, while an idle one is dropped after `control::REQUEST_WAIT`.
    async fn serve(
        self: Arc<Daemon>,
        listener: tokio::net::UnixListener,
        mut stop: watch::Receiver<bool>,
    ) {
        let slots = Arc::new(tokio::sync::Semaphore::new(CONTROL_CONNECTIONS));
        loop {
            let slot = tokio::select! {
                _ = stop.changed() => return,
                slot = slots.clone().acquire_owned() => match slot {
                    Ok(slot) => slot,
                    // Never closed: the semaphore lives as long as this loop.
                    Err(_) => return,
                },
            };
            let stream = tokio::select! {
                _ = stop.changed() => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!(error = %Chain(&e), "control socket: cannot accept");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let daemon = self.clone();
            tokio::spawn(async move {
                let _slot = slot;
                let answered = control::converse(stream, |request| daemon.answer(request)).await;
                if let Err(e) = answered {
                    tracing::debug!(error = %Chain(&e), "control socket: conversation ended early");
                }
            });
        }
    }

    /// One control request.
    pub async fn answer(&self, request: Request) -> Reply {
        match request {
            Request::Status => match self.status().await {
                Ok(status) => Reply {
                    outcome: CommandOutcome::Done,
                    text: status.render(),
                    status: Some(status),
                    report: None,
                },
                Err(e) => Reply::failed(e),
            },
            Request::Release { file, feed, force } => {
                self.release(&file, feed.as_deref(), force).await
            }
            Request::Reconcile { rebuild } => self.reconcile(rebuild).await,
            Request::Why { query, feed } => {
                let config = self.pipeline.config();
                let outbox = self.pipeline.outbox().clone();
                let answered = tokio::task::spawn_blocking(move || {
                    super::why(&config, &outbox, &query, feed.as_deref())
                })
                .await
                .map_err(|e| e.to_string())
                .and_then(|answered| answered);
                match answered.and_then(|w| {
                    let text = w.render();
                    serde_json::to_value(&w)
                        .map(|json| (text, json))
                        .map_err(|e| e.to_string())
                }) {
                    Ok((text, report)) => Reply {
                        outcome: CommandOutcome::Done,
                        text,
                        status: None,
                        report: Some(report),
                    },
                    Err(e) => Reply::failed(e),
                }
            }
        }
    }

    /// The status, from the state and what the daemon knows.
    pub async fn status(&self) -> Result<status::DaemonStatus, String> {
        let config = self.pipeline.config();
        let outbox = self.pipeline.outbox().clone();
        let live = self
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let rate = self.pipeline.uploader().settled_rate();
        let delivery = self.pipeline.uploader().condition();
        tokio::task::spawn_blocking(move || {
            status::collect(&config, &outbox, Some(&live), Some(rate), Some(delivery))
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| Chain(&e).to_string())
    }

    async fn release(&self, file: &Path, feed: Option<&str>, force: bool) -> Reply {
        let config = self.pipeline.config();
        let feed = match held_feed(&config, file, feed) {
            Ok(feed) => feed.clone(),
            Err(e) => return Reply::failed(Chain(&e).to_string()),
        };
        match self.pipeline.release(&feed, file, force).await {
            Ok(released) => {
                let report = &released.report;
                self.file_done(&feed, report, &released.to);
                let outcome = if report.refused.is_empty() && report.undelivered == 0 {
                    CommandOutcome::Done
                } else {
                    CommandOutcome::Incomplete
                };
                let mut text = String::new();
                if let Some(newer) = &released.older_than {
                    let p = &report.planned;
                    text.push_str(&format!(
                        "forced: {} is older than {} (as of {} UTC), applied already; it \
                         sends {} create, {} update, {} sold, {} back in stock\n",
                        shown_path(file),
                        Escaped(&newer.name),
                        crate::clock::utc_unix(newer.as_of),
                        p.create,
                        p.update,
                        p.sold,
                        p.in_stock
                    ));
                }
                text.push_str(&format!(
                    "released {}: {}\narchived with its report: {}",
                    shown_path(file),
                    Escaped(&report.summary()),
                    shown_path(&released.to)
                ));
                Reply {
                    outcome,
                    text,
                    status: None,
                    report: serde_json::to_value(report).ok(),
                }
            }
            Err(e) => {
                if let DaemonError::Stopped { file: waiting, .. } = &e {
                    self.hand_over(&feed, waiting.clone()).await;
                }
                Reply::failed(Chain(&e).to_string())
            }
        }
    }

    /// Hands a released file whose delivery stopped (in `processing/`) to its feed's worker,
    /// which tries it again and files it once delivered (or the next start resumes it).
    async fn hand_over(&self, feed: &FeedConfig, file: PathBuf) {
        let worker = self
            .workers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&feed.name)
            .cloned();
        match worker {
            Some(worker) if worker.send(file.clone()).await.is_ok() => {}
            _ => {
                tracing::warn!(feed = %feed.name, file = %crate::text::shown_name(&file), path = %crate::text::shown_path(&file), "the feed is not running; the released file is resumed at the next start");
            }
        }
    }

    async fn reconcile(&self, rebuild: bool) -> Reply {
        if rebuild {
            return Reply::failed(format!(
                "--rebuild works on a stopped daemon's state: stop lotsync first \
                 (systemctl stop lotsync), then run `{}`",
                crate::config::advice(&["reconcile", "--rebuild"])
            ));
        }
        self.reconcile_try(1).await
    }

    /// One try of a reconciliation: a failed one is tried again later the same night (see
    /// [`RECONCILE_TRIES`]); a try asked meanwhile replaces the one waiting.
    async fn reconcile_try(&self, tries: u32) -> Reply {
        let _one = self.reconciling.lock().await;
        *self
            .reconcile_retry
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        let config = self.pipeline.config();
        let outbox = self.pipeline.outbox().clone();
        let pace = self.pipeline.uploader().pace();
        let reconciled =
            crate::reconcile::reconcile(&self.client, pace, &outbox, &config, false).await;
        let report = match reconciled {
            Ok(report) => report,
            Err(e) => {
                self.metrics.reconciled("failed");
                let error = Chain(&e).to_string();
                // Checked where it is read (`config::checks`: at least 1 s).
                let first = Duration::from_secs(config.daemon.reconcile_retry_secs);
                let wait = (tries < RECONCILE_TRIES).then(|| first * 2u32.pow(tries - 1));
                let now = crate::clock::UtcTime::now();
                if let Some(wait) = wait {
                    tracing::warn!(error = %error, tries, retry_in_secs = wait.as_secs(), "reconciliation failed; it is tried again later");
                    *self
                        .reconcile_retry
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) =
                        Some((Instant::now() + wait, tries + 1));
                    self.reconcile_wake.notify_one();
                } else {
                    tracing::error!(error = %error, tries, "reconciliation failed; no more tries until the next nightly run");
                }
                let next_try = wait.map(|w| {
                    let secs = i64::try_from(w.as_secs()).unwrap_or(i64::MAX / 2);
                    crate::clock::UtcTime::from_unix(now.unix().saturating_add(secs))
                });
                self.live
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .reconcile_failed = Some(status::ReconcileFailed {
                    at: now,
                    error: error.clone(),
                    tries,
                    next_try,
                });
                return Reply::failed(format!("reconciliation failed: {error}"));
            }
        };
        let delivered = self.pipeline.deliver(None).await;
        // As the direct run says it: the summary, then what was found (the VINs repaired,
        // those left alone), then where the report is.
        let mut text = report.summary();
        for line in report.findings() {
            text.push('\n');
            text.push_str(&line);
        }
        text.push_str(&format!("\n  report: {}", report.path.display()));
        let outcome = match &delivered {
            Ok(d) if d.undelivered == 0 && d.rejected.is_empty() => CommandOutcome::Done,
            Ok(d) => {
                text.push_str(&format!(
                    "\n{} repairs refused by the service, {} operations still queued",
                    d.rejected.len(),
                    d.undelivered
                ));
                CommandOutcome::Incomplete
            }
            Err(e) => {
                text.push_str(&format!("\ndelivery stopped: {}", Chain(e)));
                CommandOutcome::Failed
            }
        };
        self.metrics.reconciled(match outcome {
            CommandOutcome::Done => "ok",
            CommandOutcome::Incomplete => "incomplete",
            CommandOutcome::Failed | CommandOutcome::NotFound => "failed",
        });
        {
            let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
            live.last_reconcile = Some(report.summary());
            live.last_reconcile_at = Some(crate::clock::UtcTime::now());
            live.reconcile_failed = None;
        }
        Reply {
            outcome,
            text,
            status: None,
            report: serde_json::to_value(&report).ok(),
        }
    }

    /// Reads the config again and applies the feeds' changes.
    async fn reload(self: &Arc<Daemon>, path: &Path, feeds: &mut BTreeMap<String, RunningFeed>) {
        notify_systemd(&[sd_notify::NotifyState::Reloading]);
        // Files read (the config, its token's): off the async threads.
        let loaded = tokio::task::spawn_blocking({
            let path = path.to_owned();
            move || Config::load(&path)
        })
        .await;
        let loaded = match loaded {
            Ok(loaded) => loaded,
            Err(e) => {
                tracing::error!(error = %Chain(&e), "reload: the config could not be read; the running config stays");
                notify_systemd(&[sd_notify::NotifyState::Ready]);
                return;
            }
        };
        let config = match loaded {
            Ok(config) => Arc::new(config),
            Err(e) => {
                tracing::error!(error = %Chain(&e), "reload: the config has problems; the running config stays");
                notify_systemd(&[sd_notify::NotifyState::Ready]);
                return;
            }
        };
        let old = self.pipeline.config();
        self.pipeline.set_config(config.clone());
        // The token file may have been rotated (after a 401, say): read again, and what
        // waits to be tried again is tried now.
        self.read_token_again();
        self.retry_now.notify_waiters();
        self.nudge.notify_one();
        if old.api != config.api
            || old.state != config.state
            || old.daemon.socket != config.daemon.socket
            || old.daemon.metrics != config.daemon.metrics
        {
            tracing::warn!(
                "reload: [api] (but the token), [state], daemon.socket and daemon.metrics \
                 changes take effect at the next restart"
            );
        }
        let wanted: BTreeMap<&str, &FeedConfig> =
            config.feeds.iter().map(|f| (f.name.as_str(), f)).collect();
        let names: Vec<String> = feeds.keys().cloned().collect();
        for name in names {
            let same = wanted
                .get(name.as_str())
                .is_some_and(|f| **f == feeds[&name].config);
            if !same {
                if let Some(feed) = feeds.remove(&name) {
                    tracing::info!(feed = %name, "reload: stopping the feed (after its file in hand)");
                    stop_feed(feed).await;
                }
            }
        }
        for feed in &config.feeds {
            if !feeds.contains_key(&feed.name) {
                tracing::info!(feed = %feed.name, "reload: starting the feed");
                feeds.insert(feed.name.clone(), self.start_feed(feed.clone()));
            }
        }
        tracing::info!(feeds = feeds.len(), "config reloaded");
        notify_systemd(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(&format!("watching {} feeds", feeds.len())),
        ]);
    }

    fn feed_live(&self, feed: &str, change: impl FnOnce(&mut FeedLive)) {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        change(live.feeds.entry(feed.to_owned()).or_default());
    }

    fn set_error(&self, error: Option<String>) {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_error = error;
    }
}

/// What the metrics endpoint reads: the status `lotsync status` shows and the uploader's stats.
impl metrics::Source for Daemon {
    async fn metrics(&self) -> Result<String, String> {
        let status = self.status().await?;
        let uploader = self.pipeline.uploader();
        let snapshot = metrics::Snapshot {
            status,
            answers: uploader.stats().answers(),
            upload: uploader.stats().snapshot(),
            request_times: uploader.client().request_times().clone(),
        };
        self.metrics
            .encode(&snapshot)
            .map_err(|e| format!("cannot encode the metrics: {e}"))
    }

    fn health(&self) -> Health {
        Health::of(&self.pipeline.uploader().condition())
    }
}

/// Binds the metrics endpoint `[daemon] metrics` names; None when it names none.
fn bind_metrics(config: &Config) -> Result<Option<MetricsListener>, MetricsError> {
    config
        .daemon
        .metrics
        .as_ref()
        .map(MetricsListener::bind)
        .transpose()
}

/// The feed a file to release belongs to: named, or the one whose inbox (or its `held/`)
/// holds it, or the only one.
pub fn held_feed<'c>(
    config: &'c Config,
    file: &Path,
    name: Option<&str>,
) -> Result<&'c FeedConfig, crate::config::ConfigError> {
    if name.is_none() {
        let dir = file.parent().and_then(|d| d.canonicalize().ok());
        if let Some(feed) = config.feeds.iter().find(|f| {
            f.inbox
                .join("held")
                .canonicalize()
                .is_ok_and(|held| Some(held) == dir)
        }) {
            return Ok(feed);
        }
    }
    config.feed_for(file, name)
}

/// Stops a feed: its watcher at once, its worker after the file in hand (or the grace).
async fn stop_feed(feed: RunningFeed) {
    let _ = feed.stop.send(true);
    for task in feed.tasks {
        let _ = task.await;
    }
}

/// WATCHDOG=1 at half of WatchdogSec, while the runtime is alive.
async fn watchdog(mut stop: watch::Receiver<bool>) {
    let mut usec = 0;
    if !sd_notify::watchdog_enabled(false, &mut usec) || usec == 0 {
        return;
    }
    let every = Duration::from_micros(usec / 2);
    loop {
        notify_systemd(&[sd_notify::NotifyState::Watchdog]);
        tokio::select! {
            _ = stop.changed() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// Tells systemd (Type=notify); nothing outside systemd.
fn notify_systemd(states: &[sd_notify::NotifyState]) {
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::debug!(error = %Chain(&e), "cannot notify systemd");
    }
}

/// A full snapshot with fewer records than this share of the feed's last applied file waits
/// [`GROWTH_QUIET`] unchanged before it is taken: a DMS that writes a file in two bursts
/// (closing it between them) gets its file read whole.
pub const GROWTH_SHRINK: f64 = 0.97;

/// How long such a snapshot must stay unchanged after it was handed over (its writer closed
/// it and it settled): several seconds, longer than a DMS pauses between two bursts.
pub const GROWTH_QUIET: Duration = Duration::from_secs(6);

/// A file found not whole yet, waiting for the DMS to finish it.
struct Parked {
    /// When it was found so (or last changed).
    since: Instant,
    stamp: FileStamp,
    reason: String,
}

impl Parked {
    /// Parked from now.
    fn now(stamp: FileStamp, reason: String) -> Parked {
        Parked {
            since: Instant::now(),
            stamp,
            reason,
        }
    }
}

/// A file's stamp, None when it is gone; read off the async threads (an inbox may be on a
/// network share).
async fn stamp_of(path: &Path) -> Option<FileStamp> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || FileStamp::of(&path))
        .await
        .ok()
        .flatten()
}

/// Sleeps until `at` (for ever without one: the branch is disabled then).
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(all(test, feature = "sandbox"))]
#[path = "run_tests.rs"]
mod tests;
