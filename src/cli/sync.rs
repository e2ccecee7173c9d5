//! `lotsync sync`: one shot of the whole pipeline: map, diff, queue, deliver, and exit when
//! the outbox is drained, with a summary.

use super::deliver::deliver;
use super::plan::plan_file;
use super::setup::{client_of, open, ConfigArg};
use lotsync::config::Config;
use lotsync::daemon::lifecycle::{self, FileToPlan, Listing, Past, PlannedFile};
use lotsync::diff::Verdict;
use lotsync::inbox::FeedFolders;
use lotsync::outcome::CommandOutcome;
use lotsync::text::{shown_name, shown_path, Escaped};
use lotsync::upload::{UploadError, Uploader, NOTICE_WAIT};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

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
    planned: PlannedFile,
    /// Its copy in the feed's archive (a file from outside the inbox, applied), with the
    /// folders it is filed in; its report is written again once delivery is known.
    archived: Option<(FeedFolders, PathBuf)>,
}

/// `lotsync sync`: done when everything was delivered; incomplete when some records or
/// operations were rejected, a file was held or superseded, or operations stay queued;
/// failed on bad input or config, or a fatal answer.
pub fn sync(args: SyncArgs) -> anyhow::Result<CommandOutcome> {
    let started = Instant::now();
    let config = Config::load(&args.config.config)?;
    let feeds = config.feeds_for(&args.files, args.feed.as_deref())?;
    let client = client_of(&config)?;
    let outbox = Arc::new(open(&config, lotsync::state::Holder::Writer("sync"))?);
    let runtime = tokio::runtime::Runtime::new()?;
    // Built first: the service's list is read at its pace, and a held file is told at once.
    let (uploader, notices) =
        runtime.block_on(async { Uploader::configured(client, outbox.clone(), &config) })?;

    let mut out = super::stdout();
    let mut unreadable = false;
    let mut synced = Vec::new();
    for (path, feed) in oldest_first(&config, args.files.iter().zip(feeds).collect()) {
        let shown = shown_path(path);
        let file = FileToPlan {
            config: &config,
            feed,
            path,
            past: Past::Nothing,
            commit: true,
            keep_ops: false,
            claimed: None,
        };
        // Read again for each file until the state knows the organization (the first file
        // taken makes it known).
        let listing = Listing::Read {
            client: uploader.client(),
            pace: uploader.pace(),
        };
        // Nothing is planned blind: without the service's list, no file is (`?`).
        match plan_file(&runtime, &outbox, file, listing)? {
            Ok(planned) => {
                write_file(&mut out, &shown, &planned, &config)?;
                log_verdict(feed, path, &planned);
                // Notices are sent by tasks of the runtime.
                let _in_runtime = runtime.enter();
                planned.tell_held(notices.as_ref(), path);
                let archived = lifecycle::file_copy(&outbox, feed, path, &planned);
                synced.push(Synced { planned, archived });
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

    let delivered = runtime.block_on(async {
        let delivered = deliver(&uploader).await;
        let refused = delivered.as_ref().ok().map(|d| d.rejected.as_slice());
        for s in &synced {
            lifecycle::settle(
                &outbox,
                &s.planned,
                s.archived.as_ref(),
                refused,
                notices.as_ref(),
            );
        }
        if let Some(notices) = &notices {
            notices.finish(NOTICE_WAIT).await;
        }
        (
            delivered,
            uploader.stats().snapshot(),
            uploader.settled_rate(),
        )
    });
    let (delivered, stats, rate) = delivered;
    let archived = synced.iter().filter(|s| s.archived.is_some()).count();

    let mut out = super::stdout();
    let verdicts = synced.iter().map(|s| &s.planned.planned.plan);
    let unchanged: u64 = verdicts.clone().map(|p| p.counts.unchanged).sum();
    let refused_records: u64 = verdicts.clone().map(|p| p.counts.rejected_records).sum();
    let held = verdicts
        .clone()
        .filter(|p| matches!(p.verdict, Verdict::Held { .. }))
        .count();
    let superseded = verdicts
        .filter(|p| matches!(p.verdict, Verdict::Superseded { .. }))
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
    let outcome = match delivered {
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
            let next = format!("`{}` or the daemon", config.command(&["sync"]));
            super::deliver::write_drained(&mut out, &report, &next)?;
            let incomplete = refused_records > 0
                || !report.rejected.is_empty()
                || held > 0
                || superseded > 0
                || report.undelivered > 0;
            if unreadable {
                CommandOutcome::Failed
            } else if incomplete {
                CommandOutcome::Incomplete
            } else {
                CommandOutcome::Done
            }
        }
        Err(UploadError::Fatal { error, queued }) => {
            out.flush()?;
            // As the logging wants it: one JSON line, one journal entry, or text.
            super::last_error(&format!(
                "delivery stopped: {error}; {queued} operations stay queued; run `{}` \
                 again once fixed",
                config.command(&["sync"])
            ));
            CommandOutcome::Failed
        }
        Err(e) => return Err(e.into()),
    };
    out.flush()?;
    Ok(outcome)
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

fn write_file(
    out: &mut impl Write,
    shown: &str,
    planned: &PlannedFile,
    config: &Config,
) -> std::io::Result<()> {
    let profile = config
        .feeds
        .iter()
        .find(|f| f.name == planned.report.feed)
        .map_or("auto", |f| f.profile.as_str());
    let planned = &planned.planned;
    write_verdict(out, shown, planned, config, profile)?;
    for note in &planned.notes {
        writeln!(out, "  note: {}", Escaped(note))?;
    }
    Ok(())
}

/// A file held, superseded or with rejected records is a warning event too, as the daemon
/// logs it: a log store (`LOTSYNC_LOG_FORMAT=json`) sees what the summary on stdout says.
fn log_verdict(feed: &lotsync::config::FeedConfig, path: &Path, planned: &PlannedFile) {
    let planned = &planned.planned;
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
    planned: &lotsync::diff::FilePlan,
    config: &Config,
    profile: &str,
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
            // The hints name the config given, so that they run as printed.
            writeln!(
                out,
                "  if the file is right: {} && {}",
                config.command(&["release", shown]),
                config.command(&["sync"])
            )
        }
        Verdict::Apply { .. } => {
            writeln!(
                out,
                "{shown}: {} records; queued {} create, {} update, {} sold, {} back in stock; {} unchanged, {} rejected",
                planned.records, c.create, c.update, c.sold, c.in_stock, c.unchanged, c.rejected_records
            )?;
            if c.not_owned + c.shared > 0 {
                writeln!(
                    out,
                    "  {} left out but not owned by this feed (not sold), {} listed by another \
                     feed of the lot too (not sold while either lists them)",
                    c.not_owned, c.shared
                )?;
            }
            for (line, problem) in &planned.rejected {
                writeln!(out, "  {shown}:{line}: {}", Escaped(&problem.to_string()))?;
            }
            if !planned.warnings.is_empty() {
                writeln!(
                    out,
                    "  {} warnings (fields left out); `{}` lists them",
                    planned.warnings.len(),
                    config.command(&["check", "--profile", profile, shown])
                )?;
            }
            Ok(())
        }
    }
}
