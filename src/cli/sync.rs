//! `lotsync sync`: one shot of the whole pipeline: map, diff, queue, deliver, and exit when
//! the outbox is drained, with a summary.

use super::deliver::deliver;
use super::plan::{plan_one, service_list_if_needed, Past};
use super::setup::{client_of, open, ConfigArg};
use super::EXIT_BAD_INPUT;
use lotsync::config::Config;
use lotsync::diff::{FilePlan, Verdict};
use lotsync::inbox::{FeedFolders, FileReport, Outcome};
use lotsync::outbox::Outbox;
use lotsync::text::{shown_name, shown_path, Chain, Escaped};
use lotsync::upload::{DrainReport, UploadError, Uploader, NOTICE_WAIT};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Exit code when some vehicles were rejected, held or could not be delivered.
pub const EXIT_INCOMPLETE: u8 = 3;

/// Arguments of `lotsync sync`.
#[derive(Debug, clap::Args)]
pub struct SyncArgs {
    /// Export files (CSV or XML), synced oldest first (by the date in their names when the
    /// profile names its pattern, else their modification times; in the order given among
    /// equals). Without any, what is already queued (say, by `lotsync release`) is delivered.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArg,
    /// The feed the files belong to (needed when the config has several and the files are in
    /// none of their inboxes).
    #[arg(long, value_name = "NAME")]
    pub feed: Option<String>,
}

/// One file's part in the run.
struct Synced {
    shown: String,
    planned: FilePlan,
    /// Its copy in the feed's archive (a file from outside the inbox, applied), with the
    /// folders it is filed in; its report is written again once delivery is known.
    archived: Option<(FeedFolders, PathBuf)>,
}

/// `lotsync sync`: exit 0 when everything was delivered, 3 when some records or operations
/// were rejected, a file was held or operations stay queued, 2 on bad input or config.
pub fn sync(args: SyncArgs) -> anyhow::Result<u8> {
    let started = Instant::now();
    let config = Config::load(&args.config.config)?;
    let feeds = config.feeds_for(&args.files, args.feed.as_deref())?;
    let client = client_of(&config)?;
    let outbox = Arc::new(open(&config, lotsync::state::Holder::Writer("sync"))?);

    // The hints repeat the config the user gave, so that they can be run as they are.
    let config_flag = if args.config.config == Path::new(lotsync::config::DEFAULT_PATH) {
        String::new()
    } else {
        format!(
            " --config {}",
            lotsync::text::shown_path(&args.config.config)
        )
    };
    let mut out = super::stdout();
    let mut unreadable = false;
    let mut synced = Vec::new();
    for (path, feed) in oldest_first(&config, args.files.iter().zip(feeds).collect()) {
        let shown = lotsync::text::shown_path(path);
        // Read again for each file until the state knows the organization (the first file
        // taken makes it known).
        let listed = service_list_if_needed(&config, &outbox, || Ok(client.clone()))?;
        match plan_one(&outbox, &config, feed, path, Past::Nothing, true, listed) {
            Ok(planned) => {
                write_file(&mut out, &shown, &planned, &config_flag)?;
                log_verdict(feed, path, &planned);
                let archived = file_copy(&outbox, feed, path, &planned);
                synced.push(Synced {
                    shown,
                    planned,
                    archived,
                });
            }
            Err(e) => {
                unreadable = true;
                let error = Escaped(&format!("{e:#}")).to_string();
                tracing::error!(file = %shown_name(path), path = %shown, error = %error, "file not synced");
                writeln!(out, "{shown}: not synced: {error}")?;
            }
        }
    }
    out.flush()?;

    let runtime = tokio::runtime::Runtime::new()?;
    let delivered = runtime.block_on(async {
        let (uploader, notices) = Uploader::configured(client, outbox.clone(), &config)?;
        if let Some(notices) = &notices {
            for s in &synced {
                if let Verdict::Held { reasons } = &s.planned.plan.verdict {
                    notices.held(&s.shown, &s.planned.plan.file.sha256, reasons);
                }
            }
        }
        let delivered = deliver(&uploader).await;
        if let (Some(notices), Ok(report)) = (&notices, &delivered) {
            for s in &synced {
                notices.rejected(
                    &s.planned.plan.file.name,
                    &s.planned.plan.file.sha256,
                    &problems_of(s, report),
                );
            }
        }
        if let Some(notices) = &notices {
            notices.finish(NOTICE_WAIT).await;
        }
        Ok::<_, UploadError>((
            delivered,
            uploader.stats().snapshot(),
            uploader.settled_rate(),
        ))
    });
    let (delivered, stats, rate) = delivered?;
    let archived = rewrite_reports(&outbox, &synced, &delivered);

    let mut out = super::stdout();
    let unchanged: u64 = synced.iter().map(|s| s.planned.plan.counts.unchanged).sum();
    let refused_records: u64 = synced
        .iter()
        .map(|s| s.planned.plan.counts.rejected_records)
        .sum();
    let held = synced
        .iter()
        .filter(|s| matches!(s.planned.plan.verdict, Verdict::Held { .. }))
        .count();
    let superseded = synced
        .iter()
        .filter(|s| matches!(s.planned.plan.verdict, Verdict::Superseded { .. }))
        .count();
    writeln!(
        out,
        "sync: {} file{} in {:.1} s",
        synced.len(),
        if synced.len() == 1 { "" } else { "s" },
        started.elapsed().as_secs_f64()
    )?;
    writeln!(
        out,
        "  created {}, updated {}, sold {}, back in stock {}, unchanged {}",
        stats.created, stats.updated, stats.sold, stats.in_stock, unchanged
    )?;
    writeln!(
        out,
        "  rejected: {refused_records} records (not mapped), {} operations (refused by the service)",
        stats.rejected
    )?;
    writeln!(
        out,
        "  requests {}, retries {}, 429s {}, settled rate {rate:.1} requests/s",
        stats.requests, stats.retries, stats.throttled
    )?;
    let code = match delivered {
        Ok(report) => {
            if held > 0 {
                writeln!(out, "  held: {held} file(s); see above")?;
            }
            if superseded > 0 {
                writeln!(
                    out,
                    "  superseded: {superseded} file(s) older than a snapshot applied already; nothing of them sent"
                )?;
            }
            if archived > 0 {
                writeln!(
                    out,
                    "  archived: a copy of {archived} file{} in {} feed's archive, with {} report",
                    if archived == 1 { "" } else { "s" },
                    if archived == 1 { "its" } else { "their" },
                    if archived == 1 { "its" } else { "their" },
                )?;
            }
            super::deliver::write_drained(&mut out, &report, "`lotsync sync` or `lotsync run`")?;
            let incomplete = refused_records > 0
                || !report.rejected.is_empty()
                || held > 0
                || superseded > 0
                || report.undelivered > 0;
            if unreadable {
                EXIT_BAD_INPUT
            } else if incomplete {
                EXIT_INCOMPLETE
            } else {
                0
            }
        }
        Err(UploadError::Fatal { error, queued }) => {
            out.flush()?;
            // As the logging wants it: one JSON line, one journal entry, or text.
            super::last_error(&format!(
                "delivery stopped: {error}; {queued} operations stay queued; run `lotsync sync` \
                 again once fixed"
            ));
            EXIT_BAD_INPUT
        }
        Err(e) => return Err(e.into()),
    };
    out.flush()?;
    Ok(code)
}

/// The files in the order they were exported ([`lotsync::diff::as_of`]), the order given
/// among equals: a full snapshot older than one applied is superseded, so the older one goes
/// first. A profile that cannot be read keeps the order given (planning says why).
fn oldest_first<'a>(
    config: &Config,
    mut files: Vec<(&'a PathBuf, &'a lotsync::config::FeedConfig)>,
) -> Vec<(&'a PathBuf, &'a lotsync::config::FeedConfig)> {
    files.sort_by_cached_key(|(path, feed)| {
        lotsync::mapper::Profile::find(&feed.profile, &config.profiles_dir)
            .map_or(0, |profile| lotsync::diff::as_of(path, &profile).at)
    });
    files
}

/// Files a copy of an applied export in the feed's archive with its report, as the daemon
/// files what it takes, so that `lotsync reconcile --rebuild` reads it too (`sync` and
/// `release` run without a daemon: a running one holds the state). The report says what is
/// queued, delivered so far (nothing yet), and is written again once delivery is known. A
/// file already applied is filed when the archive lacks it (a sync stopped between queuing
/// the file's plan and filing its copy). A copy that cannot be made is said, and the command
/// goes on.
pub(super) fn file_copy(
    outbox: &Outbox,
    feed: &lotsync::config::FeedConfig,
    path: &Path,
    planned: &FilePlan,
) -> Option<(FeedFolders, PathBuf)> {
    let folders = FeedFolders::new(&feed.inbox);
    let mut report = FileReport::planned(planned);
    let shown = lotsync::text::shown_path(path);
    match planned.plan.verdict {
        Verdict::Apply { .. } => {
            if let Some(n) = planned.plan.file_no {
                match outbox.progress(n) {
                    Ok(progress) => report.delivered(&progress, Vec::new()),
                    Err(e) => {
                        tracing::warn!(file = %shown_name(path), path = %shown, error = %Chain(&e), "the archived report keeps the plan's counts")
                    }
                }
            }
        }
        Verdict::AlreadyApplied { .. } => {
            if folders.archive_holds(&planned.plan.file.sha256) {
                return None;
            }
            report.outcome = Outcome::Applied;
            report.notes.push(
                "filed by a later `lotsync sync` of the same content: the sync that applied it \
                 stopped before filing its copy; its counts are in that sync's summary"
                    .into(),
            );
        }
        // Filed, as the daemon files it: its report names the newer file.
        Verdict::Superseded { .. } => {}
        Verdict::Held { .. } => return None,
    }
    match folders.archive_copy(path, &report) {
        Ok(to) => {
            tracing::info!(feed = %feed.name, file = %shown_name(path), path = %shown, archived = %shown_path(&to), "copy archived");
            Some((folders, to))
        }
        Err(e) => {
            tracing::warn!(feed = %feed.name, file = %shown_name(path), path = %shown, error = %Chain(&e), "no copy archived (`lotsync reconcile --rebuild` will not read it)");
            None
        }
    }
}

/// The archived copies' reports say what the service acknowledged, as the daemon's do (what is
/// still queued when delivery stopped, too). Returns how many copies were archived.
fn rewrite_reports(
    outbox: &lotsync::outbox::Outbox,
    synced: &[Synced],
    delivered: &Result<DrainReport, UploadError>,
) -> usize {
    let refused = match delivered {
        Ok(report) => report.rejected.as_slice(),
        Err(_) => &[],
    };
    let mut archived = 0;
    for s in synced {
        let Some((folders, to)) = &s.archived else {
            continue;
        };
        archived += 1;
        if !matches!(s.planned.plan.verdict, Verdict::Apply { .. }) {
            continue; // filed late, as already applied: nothing of it was delivered now
        }
        let mut report = FileReport::planned(&s.planned);
        let progress = match s.planned.plan.file_no.map(|n| outbox.progress(n)) {
            Some(Ok(progress)) => progress,
            Some(Err(e)) => {
                tracing::warn!(file = %Escaped(&s.planned.plan.file.name), path = %s.shown, error = %Chain(&e), "the archived report keeps the plan's counts");
                continue;
            }
            None => Default::default(),
        };
        let mine = refused
            .iter()
            .filter(|r| r.file_no == s.planned.plan.file_no)
            .cloned()
            .collect();
        report.delivered(&progress, mine);
        if let Err(e) = folders.rewrite_report(to, &report) {
            tracing::warn!(file = %Escaped(&s.planned.plan.file.name), path = %s.shown, error = %Chain(&e), "the archived report keeps the plan's counts");
        }
    }
    archived
}

/// One file's problems for its notification: records the mapper rejected and operations the
/// service refused.
fn problems_of(s: &Synced, report: &DrainReport) -> Vec<String> {
    let name = &s.planned.plan.file.name;
    let mut problems: Vec<String> = s
        .planned
        .rejected
        .iter()
        .map(|(line, p)| format!("line {line}: {p}"))
        .collect();
    problems.extend(
        report
            .rejected
            .iter()
            .filter(|r| &r.file == name)
            .map(ToString::to_string),
    );
    problems
}

fn write_file(
    out: &mut impl Write,
    shown: &str,
    planned: &FilePlan,
    config_flag: &str,
) -> std::io::Result<()> {
    write_verdict(out, shown, planned, config_flag)?;
    for note in &planned.notes {
        writeln!(out, "  note: {}", Escaped(note))?;
    }
    Ok(())
}

/// A file held, superseded or with rejected records is a warning event too, as the daemon
/// logs it: a log store (`LOTSYNC_LOG_FORMAT=json`) sees what the summary on stdout says.
fn log_verdict(feed: &lotsync::config::FeedConfig, path: &Path, planned: &FilePlan) {
    let file = shown_name(path);
    let plan = &planned.plan;
    match &plan.verdict {
        Verdict::Held { reasons } => {
            let reason = Escaped(&reasons.join("; ")).to_string();
            tracing::warn!(feed = %feed.name, file = %file, path = %shown_path(path), reason = %reason, "held by the safety guard: {reason}");
        }
        Verdict::Superseded {
            newer,
            newer_as_of,
            as_of,
        } => {
            let reason =
                Escaped(&Verdict::superseded_reason(newer, *newer_as_of, *as_of)).to_string();
            tracing::warn!(feed = %feed.name, file = %file, path = %shown_path(path), reason = %reason, "superseded: {reason}");
        }
        Verdict::Apply { .. } | Verdict::AlreadyApplied { .. } => {}
    }
    let rejected = plan.counts.rejected_records;
    if rejected > 0 {
        tracing::warn!(
            feed = %feed.name,
            file = %file,
            path = %shown_path(path),
            rejected_records = rejected,
            records = planned.records,
            "{rejected} of {} records rejected (not sent)",
            planned.records
        );
    }
}

fn write_verdict(
    out: &mut impl Write,
    shown: &str,
    planned: &FilePlan,
    config_flag: &str,
) -> std::io::Result<()> {
    let plan = &planned.plan;
    let c = &plan.counts;
    match &plan.verdict {
        Verdict::AlreadyApplied { same_as, .. } => {
            writeln!(
                out,
                "{shown}: already applied (same content as {}); nothing to send",
                Escaped(same_as)
            )
        }
        Verdict::Superseded {
            newer,
            newer_as_of,
            as_of,
        } => writeln!(
            out,
            "{shown}: superseded, nothing of it is sent: {}",
            Escaped(&Verdict::superseded_reason(newer, *newer_as_of, *as_of))
        ),
        Verdict::Held { reasons } => {
            writeln!(
                out,
                "{shown}: HELD by the safety guard; nothing of it is sent:"
            )?;
            for r in reasons {
                writeln!(out, "    {}", Escaped(r))?;
            }
            writeln!(
                out,
                "  if the file is right: lotsync release{config_flag} {shown} && lotsync sync{config_flag}"
            )
        }
        Verdict::Apply { .. } => {
            writeln!(
                out,
                "{shown}: {} records; queued {} create, {} update, {} sold, {} back in stock; {} unchanged, {} rejected",
                planned.records, c.create, c.update, c.sold, c.in_stock, c.unchanged, c.rejected_records
            )?;
            for (line, problem) in &planned.rejected {
                writeln!(out, "  {shown}:{line}: {}", Escaped(&problem.to_string()))?;
            }
            if !planned.warnings.is_empty() {
                writeln!(
                    out,
                    "  {} warnings (fields left out); `lotsync check {shown}` lists them",
                    planned.warnings.len()
                )?;
            }
            Ok(())
        }
    }
}
