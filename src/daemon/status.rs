//! What `lotsync status` shows: per feed the last file and its outcome, files waiting, held
//! and failed, vehicles the service refused, the last error; the outbox depth and the settled
//! rate. The running daemon adds what only it knows (the file in hand, errors since start);
//! without a daemon the same figures are read from the state and the folders.
//!
//! [`DaemonStatus::check`] judges them the way a monitoring system (Nagios, Icinga, Zabbix)
//! wants: OK, WARNING, CRITICAL or UNKNOWN, with a one-line summary.
//!
//! The reconciliation's freshness: when the last one succeeded is the newest report in
//! `<state dir>/reports/` (a report is written once the service's list was read and
//! compared), so it is known with or without a daemon and across restarts. It is judged only
//! once reconciliation is expected to run: after one has ever succeeded, or once the daemon
//! has tried one. Older than [`RECONCILE_WARN_AFTER`] is WARNING, older than
//! [`RECONCILE_CRITICAL_AFTER`] CRITICAL; a failure the daemon is still retrying is shown
//! beside it.

use crate::clock::UtcTime;
use crate::config::{Config, FeedConfig, WatchMode};
use crate::inbox::FeedFolders;
use crate::outbox::Outbox;
use crate::state::{FileOutcome, StateError};
use crate::text::Escaped;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A reconciliation that succeeded longer ago than this is WARNING (a day and a half: one
/// nightly run missed).
pub const RECONCILE_WARN_AFTER: u64 = 36 * 3600;
/// And CRITICAL after three days.
pub const RECONCILE_CRITICAL_AFTER: u64 = 3 * 24 * 3600;

/// The daemon's last reconciliation failed (and none succeeded since).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReconcileFailed {
    pub at: UtcTime,
    pub error: String,
    /// Tries of this night's run so far, the first one included.
    pub tries: u32,
    /// When the daemon tries again; None once this night's tries are spent (the next nightly
    /// run tries again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_try: Option<UtcTime>,
}

/// The whole status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DaemonStatus {
    /// Answered by a running daemon (else read from the state).
    pub daemon: bool,
    /// A daemon is meant to serve this state (the config has `[daemon]`, or the unit that
    /// runs it is enabled): without one, work waiting is CRITICAL.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub daemon_expected: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<UtcTime>,
    pub feeds: Vec<FeedStatus>,
    /// Operations waiting for the service.
    pub outbox_depth: usize,
    /// The request rate the uploader settled on (requests per second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_rate: Option<f64>,
    /// The last reconciliation's summary, and when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reconcile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reconcile_at: Option<UtcTime>,
    /// When the last reconciliation that succeeded started (the newest report in
    /// `<state dir>/reports/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconcile_succeeded_at: Option<UtcTime>,
    /// The daemon's last reconciliation failed, and when it tries again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconcile_failed: Option<ReconcileFailed>,
    /// The last error of delivery (such as a refused token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Where delivery stands with the service (a wait it asked for, an outage), from the
    /// running daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<crate::upload::DeliveryCondition>,
}

/// One feed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FeedStatus {
    pub name: String,
    pub inbox: String,
    pub watch: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_file: Option<LastFile>,
    /// When lotsync took the newest file of the feed that is delivered in full (or was
    /// already applied), as the state records it; the end of its delivery is not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_success: Option<UtcTime>,
    /// The file being processed now (without a daemon: one a stop or a crash interrupted,
    /// resumed at the next start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// A file in the inbox that is not whole yet (its last record cut), waiting to change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_incomplete: Option<String>,
    /// Export files in the inbox, not taken yet.
    pub waiting: usize,
    pub held: usize,
    /// Of the held files, those held because they stayed incomplete: `name: what was seen`
    /// (the others were held by the safety guard).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_incomplete: Vec<String>,
    pub failed: usize,
    /// The command that releases its oldest held file, as it runs: with `--config` when the
    /// config is not the default, the file's path quoted for the shell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// Its last file was held and is neither in `held/` under its name nor released from there:
    /// a one-shot `sync` leaves a file it holds where it was given (or someone removed it
    /// since), so only the file's own path releases it. The release command without that path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_in_place: Option<String>,
    /// Its inbox does not exist (or is no folder): the daemon refuses to start so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inbox_missing: bool,
    /// Vehicles of its location whose last operation the service refused.
    pub rejected_vehicles: usize,
    /// The last full snapshot applied was dated in the future when it was read (taken as of
    /// that moment): what it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub future_dated: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The last file of a feed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LastFile {
    pub name: String,
    pub outcome: String,
    pub at: UtcTime,
    pub summary: String,
}

/// What the running daemon adds to the state's figures, per feed.
#[derive(Debug, Clone, Default)]
pub struct Live {
    pub started_at: UtcTime,
    pub feeds: BTreeMap<String, FeedLive>,
    pub last_reconcile: Option<String>,
    pub last_reconcile_at: Option<UtcTime>,
    pub reconcile_failed: Option<ReconcileFailed>,
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct FeedLive {
    pub last_file: Option<LastFile>,
    pub current: Option<String>,
    pub waiting_incomplete: Option<String>,
    pub last_error: Option<String>,
}

/// The status from the state and the folders, with the daemon's `live` figures when it runs.
pub fn collect(
    config: &Config,
    outbox: &Outbox,
    live: Option<&Live>,
    settled_rate: Option<f64>,
    delivery: Option<crate::upload::DeliveryCondition>,
) -> Result<DaemonStatus, StateError> {
    let state = outbox.state();
    // The last file of each feed as the state recorded it (newest record wins), and when
    // the newest one delivered in full was taken.
    let mut last: BTreeMap<String, LastFile> = BTreeMap::new();
    let mut success: BTreeMap<String, UtcTime> = BTreeMap::new();
    // Newest first, until every feed has both.
    for item in state.files_newest_first() {
        if config
            .feeds
            .iter()
            .all(|f| last.contains_key(&f.name) && success.contains_key(&f.name))
        {
            break;
        }
        let (file_no, r) = item?;
        if success.contains_key(&r.feed) || !config.feeds.iter().any(|f| f.name == r.feed) {
            continue;
        }
        let (outcome, summary) = match &r.outcome {
            FileOutcome::Queued {
                ops,
                rejected_records,
                ..
            } => {
                let progress = outbox.progress(file_no).map_err(|e| match e {
                    crate::outbox::OutboxError::State(e) => e,
                    other => StateError::Decode {
                        what: "outbox",
                        source: Box::new(other),
                    },
                })?;
                let done = progress.delivered;
                let left = progress.queued.total();
                let summary = format!(
                    "{} of {ops} operations acknowledged, {} refused, {left} still queued; \
                     {rejected_records} records rejected",
                    done.applied.total(),
                    done.refused
                );
                (if left > 0 { "delivering" } else { "applied" }, summary)
            }
            FileOutcome::AlreadyApplied { same_as } => {
                ("already_applied", format!("same content as {same_as}"))
            }
            FileOutcome::Held { reason } => ("held", reason.clone()),
            FileOutcome::Superseded { newer } => (
                "superseded",
                format!("older than {newer}, applied already; nothing sent"),
            ),
        };
        if matches!(outcome, "applied" | "already_applied") {
            success.insert(r.feed.clone(), UtcTime::from_unix(r.seen_at));
        }
        last.entry(r.feed.clone()).or_insert_with(|| LastFile {
            name: r.name.clone(),
            outcome: outcome.into(),
            at: UtcTime::from_unix(r.seen_at),
            summary,
        });
    }
    let mut feeds = Vec::new();
    for feed in &config.feeds {
        let folders = FeedFolders::new(&feed.inbox);
        let live_feed = live.and_then(|l| l.feeds.get(&feed.name));
        let rejected_vehicles = state
            .location_vehicles(config.api.organization_id, feed.location_id)?
            .iter()
            .filter(|(_, v)| v.rejected.is_some())
            .count();
        let last_file = live_feed
            .and_then(|l| l.last_file.clone())
            .or_else(|| last.remove(&feed.name));
        // Neither in held/ nor released from there (waiting in processing/ to be delivered).
        let held_in_place = last_file
            .as_ref()
            .filter(|l| {
                let in_held = folders.held_dir().join(&l.name);
                l.outcome == "held" && !in_held.exists() && !folders.released_already(&in_held)
            })
            .map(|_| config.command(&["release"]));
        feeds.push(FeedStatus {
            name: feed.name.clone(),
            inbox: feed.inbox.display().to_string(),
            watch: watch_name(feed),
            last_file,
            held_in_place,
            last_success: success.remove(&feed.name),
            current: match live {
                Some(_) => live_feed.and_then(|l| l.current.clone()),
                None => folders.unfinished().ok().and_then(|u| {
                    u.first().map(|c| {
                        format!(
                            "{} (interrupted; resumed when lotsync starts)",
                            crate::text::shown_name(&c.path)
                        )
                    })
                }),
            },
            waiting_incomplete: live_feed.and_then(|l| l.waiting_incomplete.clone()),
            waiting: folders.arrivals().map(|a| a.len()).unwrap_or(0),
            held: count_files(&folders.held_dir()),
            held_incomplete: held_incomplete(&folders.held_dir()),
            failed: count_files(&folders.failed_dir()),
            release: oldest_held(&folders.held_dir())
                .map(|file| config.command(&["release", &crate::text::shown_path(&file)])),
            inbox_missing: !feed.inbox.is_dir(),
            rejected_vehicles,
            future_dated: state
                .feed(&feed.name)?
                .and_then(|f| f.future_dated)
                .map(|f| f.to_string()),
            last_error: live_feed.and_then(|l| l.last_error.clone()),
        });
    }
    let settled_rate = match settled_rate {
        Some(rate) => Some(rate),
        None => state.upload_rate()?,
    };
    Ok(DaemonStatus {
        daemon: live.is_some(),
        daemon_expected: config.daemon.configured,
        pid: live.map(|_| std::process::id()),
        started_at: live.map(|l| l.started_at),
        feeds,
        outbox_depth: outbox.len(),
        settled_rate,
        last_reconcile: live.and_then(|l| l.last_reconcile.clone()),
        last_reconcile_at: live.and_then(|l| l.last_reconcile_at),
        reconcile_succeeded_at: crate::reconcile::last_succeeded(&config.state.dir.join("reports")),
        reconcile_failed: live.and_then(|l| l.reconcile_failed.clone()),
        last_error: live.and_then(|l| l.last_error.clone()),
        delivery,
    })
}

/// Whether the systemd unit that runs `lotsync run` with `config_path` is enabled under
/// `systemd_dir` (`/etc/systemd/system`): `lotsync.service` for the packaged config,
/// `lotsync@NAME.service` for `/etc/lotsync/NAME.toml`.
pub fn unit_enabled(config_path: &std::path::Path, systemd_dir: &std::path::Path) -> bool {
    let config_path = std::path::absolute(config_path).unwrap_or_else(|_| config_path.into());
    let unit = if config_path == std::path::Path::new(crate::config::DEFAULT_PATH) {
        "lotsync.service".to_owned()
    } else if config_path.parent() == Some(std::path::Path::new("/etc/lotsync"))
        && config_path.extension().is_some_and(|e| e == "toml")
    {
        match config_path.file_stem().and_then(|s| s.to_str()) {
            Some(name) => format!("lotsync@{name}.service"),
            None => return false,
        }
    } else {
        return false;
    };
    let Ok(entries) = std::fs::read_dir(systemd_dir) else {
        return false;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".wants"))
        .any(|wants| wants.path().join(&unit).exists())
}

fn watch_name(feed: &FeedConfig) -> String {
    match feed.watch {
        WatchMode::Notify => "notify".into(),
        WatchMode::Poll => format!("poll every {} s", feed.poll_interval_secs),
    }
}

/// The release of a feed's oldest held file, as it runs (`lotsync release` alone when the
/// file could not be named).
fn release_line(f: &FeedStatus) -> String {
    match &f.release {
        Some(command) => format!("`{command}`"),
        None => format!(
            "`{}` with the held file",
            crate::config::advice(&["release"])
        ),
    }
}

/// The oldest export file in `held/` (by modification time; its report aside).
fn oldest_held(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            !name.ends_with(".report.json") && !name.starts_with('.')
        })
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .min_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
}

/// The files in `held/` held because they stayed incomplete, each as `name: what was seen`
/// (from its report, without the advice that follows).
fn held_incomplete(dir: &std::path::Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let file = name.strip_suffix(".report.json")?;
            if !dir.join(file).is_file() {
                return None;
            }
            let report: serde_json::Value =
                serde_json::from_slice(&std::fs::read(entry.path()).ok()?).ok()?;
            let reason = report["reasons"]
                .as_array()?
                .iter()
                .filter_map(|r| r.as_str())
                .find(|r| r.starts_with("incomplete"))?;
            let seen = reason.split("; if the export").next().unwrap_or(reason);
            Some(format!("{}: {seen}", crate::text::Escaped(file)))
        })
        .collect();
    found.sort();
    found
}

/// Export files in a folder (not their reports).
fn count_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| {
                    e.file_type().is_ok_and(|t| t.is_file())
                        && !e.file_name().to_string_lossy().ends_with(".report.json")
                })
                .count()
        })
        .unwrap_or(0)
}

/// The verdict of `lotsync status` for a monitoring system, in the Nagios plugin convention:
/// its code is the exit code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
    pub code: u8,
    /// `OK`, `WARNING`, `CRITICAL` or `UNKNOWN`.
    pub state: &'static str,
    /// One line: `LOTSYNC CRITICAL - delivery stopped: ...`.
    pub summary: String,
}

pub const OK: u8 = 0;
pub const WARNING: u8 = 1;
pub const CRITICAL: u8 = 2;
pub const UNKNOWN: u8 = 3;

impl Check {
    /// A check with `code` and what it found (`detail` after `LOTSYNC STATE - `).
    pub fn new(code: u8, detail: &str) -> Check {
        let state = match code {
            OK => "OK",
            WARNING => "WARNING",
            CRITICAL => "CRITICAL",
            _ => "UNKNOWN",
        };
        Check {
            code: code.min(UNKNOWN),
            state,
            // One line whatever the names and errors in it hold.
            summary: format!("LOTSYNC {state} - {}", Escaped(detail)),
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// How long ago, for people: `45 s`, `12 min`, `30 h`, `3 d`.
fn ago(secs: u64) -> String {
    match secs {
        0..120 => format!("{secs} s"),
        120..7200 => format!("{} min", secs / 60),
        7200..172_800 => format!("{} h", secs / 3600),
        _ => format!("{} d", secs / 86_400),
    }
}

/// A moment in a summary: the time of day when within the last 20 hours, else the date too.
fn moment(at: UtcTime, now: UtcTime) -> String {
    let t = at.to_string();
    match at.secs_until(now) < 20 * 3600 {
        true => format!("{} UTC", t.get(11..16).unwrap_or(&t)),
        false => format!("{} UTC", t.get(..16).unwrap_or(&t)),
    }
}

impl DaemonStatus {
    /// The verdict for a monitoring system at `now`; a feed whose newest delivered file
    /// was taken more than `stale_after` ago is CRITICAL (see `lotsync status --help`).
    pub fn check(&self, now: UtcTime, stale_after: std::time::Duration) -> Check {
        let mut problems: Vec<(u8, String)> = Vec::new();
        let stopped = self.delivery.as_ref().and_then(|d| d.stopped.as_ref());
        if let Some(stopped) = stopped {
            problems.push((
                CRITICAL,
                format!(
                    "delivery stopped: {} since {}",
                    stopped.reason,
                    moment(stopped.since, now)
                ),
            ));
        }
        if let Some(d) = &self.delivery {
            if let (Some(until), Some(header)) = (d.waiting_until, &d.waiting_for) {
                problems.push((WARNING, crate::api::said(header, format!("{until} UTC"))));
            } else if let Some(since) = d.failing_since.filter(|_| stopped.is_none()) {
                problems.push((
                    WARNING,
                    format!(
                        "the service fails every request since {}: {}",
                        moment(since, now),
                        d.last_error.as_deref().unwrap_or("unknown")
                    ),
                ));
            }
        }
        if !self.daemon && self.daemon_expected {
            let files: usize = self.feeds.iter().map(|f| f.waiting).sum();
            if self.outbox_depth > 0 || files > 0 {
                problems.push((
                    CRITICAL,
                    format!(
                        "no daemon is running; {} operation{} and {files} file{} wait",
                        self.outbox_depth,
                        plural(self.outbox_depth),
                        plural(files)
                    ),
                ));
            }
        }
        let stale = stale_after.as_secs();
        // Neither a daemon to ask nor a file in the state.
        let nothing_to_judge = !self.daemon && self.feeds.iter().all(|f| f.last_file.is_none());
        for f in &self.feeds {
            if f.inbox_missing {
                problems.push((
                    CRITICAL,
                    format!(
                        "feed {}: no such inbox {}: the daemon does not start so (create it, \
                         or start it with `{}`, which makes it; or correct the feed's inbox)",
                        f.name,
                        f.inbox,
                        crate::config::advice(&["run", "--create-dirs"])
                    ),
                ));
            }
            if f.failed > 0 {
                problems.push((
                    CRITICAL,
                    format!(
                        "feed {}: {} file{} failed (see {}/failed/)",
                        f.name,
                        f.failed,
                        plural(f.failed),
                        f.inbox
                    ),
                ));
            }
            match (f.last_success, self.started_at) {
                (Some(at), _) if at.secs_until(now) > stale => problems.push((
                    CRITICAL,
                    format!(
                        "feed {}: newest delivered file taken {} ago (at {}; more than {})",
                        f.name,
                        ago(at.secs_until(now)),
                        moment(at, now),
                        ago(stale)
                    ),
                )),
                (Some(_), _) => {}
                (None, Some(started)) if started.secs_until(now) > stale => problems.push((
                    CRITICAL,
                    format!(
                        "feed {}: no file delivered since lotsync started {} ago",
                        f.name,
                        ago(started.secs_until(now))
                    ),
                )),
                (None, Some(_)) => {}
                (None, None) if f.last_file.is_some() => {
                    problems.push((CRITICAL, format!("feed {}: no file delivered yet", f.name)))
                }
                (None, None) if nothing_to_judge => {}
                (None, None) => {
                    problems.push((WARNING, format!("feed {}: no file yet", f.name)));
                }
            }
            if let Some(future) = &f.future_dated {
                problems.push((
                    WARNING,
                    format!("feed {}: a snapshot dated in the future: {future}", f.name),
                ));
            }
            // A superseded file delivered nothing: the feed's newest export is not on the
            // service.
            if let Some(last) = f.last_file.as_ref().filter(|l| l.outcome == "superseded") {
                problems.push((
                    WARNING,
                    format!(
                        "feed {}: its newest file {} was superseded, not delivered ({}); if it \
                         shows the lot as it is now, drop it again with a current date",
                        f.name, last.name, last.summary
                    ),
                ));
            }
            if let (Some(release), Some(last)) = (&f.held_in_place, &f.last_file) {
                problems.push((
                    WARNING,
                    format!(
                        "feed {}: its newest file {} was held ({}) and is not in held/ (a \
                         one-shot sync leaves the file it holds where it was given); if it is \
                         right: `{release}` and that file's path",
                        f.name, last.name, last.summary
                    ),
                ));
            }
            let by_guard = f.held.saturating_sub(f.held_incomplete.len());
            if by_guard > 0 {
                problems.push((
                    WARNING,
                    format!(
                        "feed {}: {} file{} held by the safety guard (see {}/held/; if it is \
                         right: {})",
                        f.name,
                        by_guard,
                        plural(by_guard),
                        f.inbox,
                        release_line(f)
                    ),
                ));
            }
            if let Some(first) = f.held_incomplete.first() {
                let n = f.held_incomplete.len();
                problems.push((
                    WARNING,
                    format!(
                        "feed {}: {n} file{} held as incomplete ({first}{}); if it is whole now or \
                         really ends so, releasing it takes it as it is (see {}/held/: {})",
                        f.name,
                        plural(n),
                        if n > 1 { ", …" } else { "" },
                        f.inbox,
                        release_line(f)
                    ),
                ));
            }
            if let Some(e) = f.last_error.as_ref().filter(|_| stopped.is_none()) {
                problems.push((WARNING, format!("feed {}: {e}", f.name)));
            }
        }
        if let Some(e) = self.last_error.as_ref().filter(|_| stopped.is_none()) {
            problems.push((WARNING, format!("last error: {e}")));
        }
        problems.extend(self.reconcile_problem(now));
        if nothing_to_judge && problems.is_empty() {
            return Check::new(
                UNKNOWN,
                "no daemon running and no file in the state yet: nothing to judge by",
            );
        }
        // The worst first, in the order found.
        problems.sort_by_key(|(code, _)| std::cmp::Reverse(*code));
        match problems.split_first() {
            None => {
                let newest = self.feeds.iter().filter_map(|f| f.last_success).max();
                let detail = match newest {
                    Some(at) => format!(
                        "{} feed{}; newest delivered file taken {} ago; {} operations queued",
                        self.feeds.len(),
                        plural(self.feeds.len()),
                        ago(at.secs_until(now)),
                        self.outbox_depth
                    ),
                    None => format!(
                        "{} feed{}; no file yet; {} operations queued",
                        self.feeds.len(),
                        plural(self.feeds.len()),
                        self.outbox_depth
                    ),
                };
                Check::new(OK, &detail)
            }
            Some(((code, first), rest)) => {
                let detail = match rest.len() {
                    0 => first.clone(),
                    n => format!("{first} (and {n} more)"),
                };
                Check::new(*code, &detail)
            }
        }
    }

    /// How fresh the last reconciliation is, once one is expected (see the module docs).
    fn reconcile_problem(&self, now: UtcTime) -> Option<(u8, String)> {
        let failed = self.reconcile_failed.as_ref().map(|f| {
            format!(
                "; the last try failed at {}: {}",
                moment(f.at, now),
                f.error
            )
        });
        let Some(at) = self.reconcile_succeeded_at else {
            return failed.map(|f| (WARNING, format!("no reconciliation has succeeded yet{f}")));
        };
        let age = at.secs_until(now);
        let code = match age {
            a if a > RECONCILE_CRITICAL_AFTER => CRITICAL,
            a if a > RECONCILE_WARN_AFTER => WARNING,
            _ => return None,
        };
        let limit = if code == CRITICAL {
            RECONCILE_CRITICAL_AFTER
        } else {
            RECONCILE_WARN_AFTER
        };
        Some((
            code,
            format!(
                "the last reconciliation that succeeded started {} ago (at {}; more than {}){}",
                ago(age),
                moment(at, now),
                ago(limit),
                failed.unwrap_or_default()
            ),
        ))
    }

    /// The human form of `lotsync status`. Each line is escaped whole (file names, errors and
    /// the service's messages come from outside): nothing in them can start a line.
    pub fn render(&self) -> String {
        let mut lines: Vec<String> = Vec::new();
        lines.push(match (&self.pid, &self.started_at) {
            (Some(pid), Some(since)) => format!("lotsync: running (pid {pid}, since {since} UTC)"),
            _ => "lotsync: no daemon running; figures read from the state".into(),
        });
        let rate = self.settled_rate.map_or_else(
            || "not measured yet".into(),
            |r| format!("{r:.1} requests/s"),
        );
        lines.push(format!(
            "outbox: {} operations waiting; settled rate {rate}",
            self.outbox_depth
        ));
        if let Some(line) = self.delivery.as_ref().and_then(|d| d.line()) {
            lines.push(format!("delivery: {line}"));
        }
        if let Some(r) = &self.last_reconcile {
            let at = self
                .last_reconcile_at
                .map(|t| format!("{t} UTC: "))
                .unwrap_or_default();
            lines.push(format!("last reconciliation: {at}{r}"));
        }
        if let Some(at) = self.reconcile_succeeded_at {
            lines.push(format!(
                "last reconciliation that succeeded: started {at} UTC"
            ));
        }
        if let Some(f) = &self.reconcile_failed {
            let next = match f.next_try {
                Some(next) => format!("tried again at {next} UTC"),
                None => "no more tries tonight; the next nightly run tries again".into(),
            };
            lines.push(format!(
                "reconciliation failed at {} UTC (try {}): {}; {next}",
                f.at, f.tries, f.error
            ));
        }
        if let Some(e) = &self.last_error {
            lines.push(format!("last error: {e}"));
        }
        for f in &self.feeds {
            lines.push(String::new());
            lines.push(format!("feed {} ({}; {})", f.name, f.inbox, f.watch));
            lines.push(match &f.last_file {
                // A summary that names its outcome ("held, nothing sent: …") says it once.
                Some(l) if l.summary.starts_with(&l.outcome) => {
                    format!("  last file: {} at {} UTC: {}", l.name, l.at, l.summary)
                }
                Some(l) => format!(
                    "  last file: {} at {} UTC: {}: {}",
                    l.name, l.at, l.outcome, l.summary
                ),
                None => "  last file: none yet".into(),
            });
            if let Some(c) = &f.current {
                lines.push(format!("  now: {c}"));
            }
            if let Some(w) = &f.waiting_incomplete {
                lines.push(format!("  not whole yet, waiting for it to change: {w}"));
            }
            lines.push(format!(
                "  waiting {}, held {}, failed {}; vehicles refused by the service: {}",
                f.waiting, f.held, f.failed, f.rejected_vehicles
            ));
            if f.held > 0 {
                lines.push(format!(
                    "  held files wait for you: see {}/held/*.report.json, then {}",
                    f.inbox,
                    release_line(f)
                ));
            }
            if let Some(release) = &f.held_in_place {
                lines.push(format!(
                    "  its last file was held and is not in held/ (a one-shot sync leaves the \
                     file it holds where it was given); if it is right: `{release}` and that \
                     file's path"
                ));
            }
            if let Some(e) = &f.last_error {
                lines.push(format!("  last error: {e}"));
            }
        }
        let mut s = String::new();
        for line in lines {
            s.push_str(&Escaped(&line).to_string());
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    /// A daemon with one feed that delivered a file an hour ago: OK but for `reconcile`.
    fn status(succeeded_ago: Option<u64>, failed: Option<ReconcileFailed>) -> DaemonStatus {
        let now = UtcTime::from_unix(NOW);
        DaemonStatus {
            daemon: true,
            started_at: Some(UtcTime::from_unix(NOW - 3600)),
            feeds: vec![FeedStatus {
                name: "main".into(),
                last_success: Some(UtcTime::from_unix(NOW - 3600)),
                ..FeedStatus::default()
            }],
            reconcile_succeeded_at: succeeded_ago
                .map(|ago| UtcTime::from_unix(now.unix() - ago as i64)),
            reconcile_failed: failed,
            ..DaemonStatus::default()
        }
    }

    fn check(status: &DaemonStatus) -> Check {
        status.check(
            UtcTime::from_unix(NOW),
            std::time::Duration::from_secs(48 * 3600),
        )
    }

    #[test]
    fn reconciliation_freshness_is_judged_once_one_is_expected() {
        // Never tried: nothing to say.
        assert_eq!(check(&status(None, None)).code, OK);
        // A night old: fine.
        assert_eq!(check(&status(Some(20 * 3600), None)).code, OK);
        // A day and a half: WARNING; three days: CRITICAL.
        let warned = check(&status(Some(37 * 3600), None));
        assert_eq!(warned.code, WARNING, "{warned:?}");
        assert!(
            warned
                .summary
                .contains("the last reconciliation that succeeded started 37 h ago"),
            "{warned:?}"
        );
        let critical = check(&status(Some(73 * 3600), None));
        assert_eq!(critical.code, CRITICAL, "{critical:?}");
        assert!(critical.summary.contains("more than 3 d"), "{critical:?}");
    }

    #[test]
    fn a_failed_reconciliation_is_said() {
        let failed = ReconcileFailed {
            at: UtcTime::from_unix(NOW - 600),
            error: "cannot read the service's list of vehicles: gave up".into(),
            tries: 2,
            next_try: Some(UtcTime::from_unix(NOW + 600)),
        };
        // Tried but never succeeded: WARNING, with the error.
        let never = check(&status(None, Some(failed.clone())));
        assert_eq!(never.code, WARNING, "{never:?}");
        assert!(never
            .summary
            .contains("no reconciliation has succeeded yet"));
        assert!(never.summary.contains("gave up"), "{never:?}");
        // Failed tonight after last night's success: shown, and judged by the age.
        let recent = status(Some(20 * 3600), Some(failed.clone()));
        assert_eq!(check(&recent).code, OK);
        let text = recent.render();
        assert!(
            text.contains("reconciliation failed at") && text.contains("(try 2)"),
            "{text}"
        );
        let old = check(&status(Some(40 * 3600), Some(failed)));
        assert_eq!(old.code, WARNING);
        assert!(old.summary.contains("the last try failed at"), "{old:?}");
    }

    /// A state a daemon is meant to serve, with work waiting and no daemon: CRITICAL, however
    /// fresh its files; the same without `daemon_expected` (no `[daemon]`, no unit enabled) is
    /// judged as before.
    #[test]
    fn no_daemon_while_work_waits_is_critical_when_one_is_meant_to_run() {
        let mut s = status(None, None);
        s.daemon = false;
        s.started_at = None;
        s.outbox_depth = 8;
        s.feeds[0].last_file = Some(LastFile::default());
        s.feeds[0].waiting = 1;
        assert_eq!(check(&s).code, OK, "{:?}", check(&s));
        s.daemon_expected = true;
        let critical = check(&s);
        assert_eq!(critical.code, CRITICAL, "{critical:?}");
        assert_eq!(
            critical.summary,
            "LOTSYNC CRITICAL - no daemon is running; 8 operations and 1 file wait"
        );
        s.outbox_depth = 0;
        s.feeds[0].waiting = 0;
        assert_eq!(check(&s).code, OK, "nothing waits: {:?}", check(&s));
    }

    #[test]
    fn an_enabled_unit_means_a_daemon_is_meant_to_run() {
        let tmp = crate::testing::temp_dir("units");
        let systemd = tmp.path();
        let wants = systemd.join("multi-user.target.wants");
        std::fs::create_dir_all(&wants).unwrap();
        let packaged = std::path::Path::new(crate::config::DEFAULT_PATH);
        let shop = std::path::Path::new("/etc/lotsync/shop.toml");
        assert!(!unit_enabled(packaged, systemd));
        std::fs::write(wants.join("lotsync.service"), "").unwrap();
        assert!(unit_enabled(packaged, systemd));
        assert!(!unit_enabled(shop, systemd));
        std::fs::write(wants.join("lotsync@shop.service"), "").unwrap();
        assert!(unit_enabled(shop, systemd));
        assert!(!unit_enabled(
            std::path::Path::new("/home/me/lotsync.toml"),
            systemd
        ));
    }

    /// A name from outside cannot start a line of the text, nor of the verdict.
    #[test]
    fn names_cannot_forge_a_line() {
        let mut s = status(None, None);
        s.feeds[0].last_file = Some(LastFile {
            name: "x\nLOTSYNC OK - forged\u{1b}[2J.csv".into(),
            ..LastFile::default()
        });
        s.feeds[0].last_error = Some("bad\nLOTSYNC OK - forged".into());
        let text = s.render();
        assert!(
            !text.lines().any(|l| l.starts_with("LOTSYNC OK - forged")) && !text.contains('\u{1b}'),
            "{text}"
        );
        let verdict = check(&s).summary;
        assert!(!verdict.contains('\n'), "{verdict}");
    }
}
