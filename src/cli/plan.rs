//! `lotsync plan`, `lotsync release` and `lotsync state export`: the diff against the stored
//! state, shown (plan), committed past the safety guard (release), and the state itself.

use super::setup::{ask_daemon, open, print_reply, ConfigArg};
use super::{OutputFormat, ProblemLine};
use anyhow::Context;
use lotsync::config::Config;
use lotsync::daemon::lifecycle::{
    self, FileToPlan, Listing, Past, PlanError, Planned, PlannedFile,
};
use lotsync::diff::{FilePlan, Listed, Plan, PlannedOp, Verdict};
use lotsync::outbox::Outbox;
use lotsync::outcome::CommandOutcome;
use lotsync::state::Holder;
use lotsync::text::{shown_path, Escaped};
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// Arguments of `lotsync plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Export files (CSV or XML). Each is planned against the state as it is now.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArg,
    /// The feed the files belong to (needed when the config has several and the files are
    /// in none of their inboxes).
    #[arg(long, value_name = "NAME")]
    pub feed: Option<String>,
    /// text: counts and a table of the vehicles; ndjson: one operation per line on stdout.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
}

/// Arguments of `lotsync release`.
#[derive(Debug, clap::Args)]
pub struct ReleaseArgs {
    /// The held export file, as it was dropped.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    #[command(flatten)]
    pub config: ConfigArg,
    /// The feed the file belongs to (default: the feed whose inbox holds it in `held/`).
    #[arg(long, value_name = "NAME")]
    pub feed: Option<String>,
    /// Release it even when it is a full snapshot older than one applied since (what it will
    /// do is said first). Without it, such a file is refused and stays held.
    #[arg(long)]
    pub force: bool,
}

/// Arguments of `lotsync state export`.
#[derive(Debug, clap::Args)]
pub struct StateExportArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// ndjson: one vehicle per line; text: a table.
    #[arg(long, value_enum, default_value_t = OutputFormat::Ndjson)]
    pub format: OutputFormat,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "The copy is one consistent snapshot of state.db, taken beside a \
running daemon without stopping it (a `cp` of state.db while the daemon writes is not).\n\n\
Example:\n  lotsync state backup --to /root/lotsync-state-$(date +%F).db"
)]
pub struct StateBackupArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// The copy's file; it must not exist yet.
    #[arg(long, value_name = "FILE")]
    pub to: PathBuf,
}

/// A file planned ([`lifecycle::plan_file`], on `runtime`), or why not as a command says it:
/// the inner error is this file's (it cannot be read, is cut, its feed's profile is not
/// there: an error naming the file), the outer one stops every file (the service's list
/// cannot be read: nothing is planned blind).
pub(super) fn plan_file(
    runtime: &tokio::runtime::Runtime,
    outbox: &Arc<Outbox>,
    file: FileToPlan<'_>,
    listing: Listing<'_>,
) -> anyhow::Result<anyhow::Result<PlannedFile>> {
    let shown = || shown_path(file.path);
    Ok(
        match runtime.block_on(lifecycle::plan_file(outbox, file, listing)) {
            Ok(Planned::File(planned)) => Ok(*planned),
            Ok(Planned::Incomplete(e) | Planned::Unreadable(e)) => {
                Err(anyhow::Error::new(e).context(shown()))
            }
            Err(e @ (PlanError::ServiceList(_) | PlanError::Client(_))) => return Err(e.into()),
            Err(e) => Err(anyhow::Error::new(e).context(shown())),
        },
    )
}

/// A runtime for the one-shot commands' async steps (the service's list, planning off this
/// thread).
pub(super) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// `lotsync plan`: done, or incomplete when a file would be held by the safety guard (or is
/// superseded).
pub fn plan(args: PlanArgs) -> anyhow::Result<CommandOutcome> {
    let config = Config::load(&args.config.config)?;
    let feeds = config.feeds_for(&args.files, args.feed.as_deref())?;
    let runtime = runtime()?;
    let mut outbox = open(&config, Holder::Reader("plan"))?;
    let mut listed = None;
    // The files planned with the service's list, as `sync` and `run` would: a feed's first,
    // or its first at a location the state knows no vehicle at.
    let org = config.api.organization_id;
    let mut needs_list = Vec::with_capacity(feeds.len());
    for feed in &feeds {
        let locations = lifecycle::feed_locations(&config, feed);
        needs_list.push(
            outbox
                .state()
                .needs_service_list(org, &feed.name, &locations)?,
        );
    }
    if needs_list.contains(&true) {
        // Reading the list takes a while: not while holding the state, which a daemon
        // starting meanwhile would wait for.
        drop(outbox);
        listed = plan_listed(&runtime, &config);
        outbox = open(&config, Holder::Reader("plan"))?;
    }
    let outbox = Arc::new(outbox);
    let mut out = std::io::BufWriter::new(super::stdout());
    let mut err = std::io::stderr().lock();
    let mut held = false;
    for ((path, feed), needs_list) in args.files.iter().zip(feeds).zip(needs_list) {
        let file = FileToPlan {
            config: &config,
            feed,
            path,
            past: Past::Nothing,
            commit: false,
            keep_ops: true,
            claimed: None,
        };
        let listed = listed.clone().filter(|_| needs_list);
        let planned = plan_file(&runtime, &outbox, file, Listing::Given(listed))??;
        held |= planned.stopped();
        let shown = shown_path(path);
        match args.format {
            OutputFormat::Text => write_text(
                &mut out,
                &shown,
                &planned.planned,
                &config,
                &known_in(&outbox, config.api.organization_id),
            )?,
            OutputFormat::Ndjson => write_ndjson(&mut out, &mut err, &shown, &planned.planned)?,
        }
    }
    out.flush()?;
    Ok(match held {
        true => CommandOutcome::Incomplete,
        false => CommandOutcome::Done,
    })
}

/// For `plan` of an empty state, which may run without a token or the service: the service's
/// list when it can be read; otherwise the plan says loudly that it could not be.
fn plan_listed(runtime: &tokio::runtime::Runtime, config: &Config) -> Option<Listed> {
    let org = config.api.organization_id;
    match runtime.block_on(lifecycle::read_configured_service_list(config)) {
        Ok(listed) => Some(listed),
        Err(e) => {
            eprintln!(
                "lotsync: note: the state knows no vehicle at a location of these feeds \
                 (organization {org}), and the service's list could not be read ({e:#}); this \
                 plan assumes the service holds none there. A sync and the daemon read the \
                 list first and never plan blind."
            );
            None
        }
    }
}

/// `lotsync release FILE`: queues a held file's plan past the safety guard.
pub fn release(args: ReleaseArgs) -> anyhow::Result<CommandOutcome> {
    let config = Config::load(&args.config.config)?;
    // A running daemon owns the state: it releases, delivers and archives the file.
    let file = std::path::absolute(&args.file).unwrap_or_else(|_| args.file.clone());
    let request = lotsync::daemon::control::Request::Release {
        file: file.clone(),
        feed: args.feed.clone(),
        force: args.force,
    };
    if let Some(reply) = ask_daemon(&config, &request, None)? {
        return print_reply(&reply);
    }
    let runtime = runtime()?;
    let feed = lotsync::daemon::held_feed(&config, &args.file, args.feed.as_deref())?;
    if lotsync::inbox::FeedFolders::new(&feed.inbox).released_already(&file) {
        return Err(lotsync::daemon::DaemonError::Released { file }.into());
    }
    let outbox = Arc::new(open(&config, Holder::Writer("release"))?);
    let id = lotsync::diff::FileId::of_path(&args.file).with_context(|| shown_path(&args.file))?;
    let folders = lotsync::inbox::FeedFolders::new(&feed.inbox);
    let in_held = folders.is_held(&file);
    // A file its writer finished inside held/ is known by its name there.
    let held = outbox.state().is_held(&feed.name, &id.sha256)
        || (in_held && outbox.state().held_by_name(&feed.name, &id.name).is_some());
    if !held {
        anyhow::bail!(
            "{}: not held for feed {:?} (no held file has this content); nothing to release",
            shown_path(&args.file),
            feed.name
        );
    }
    let (profile, rules) = lifecycle::profile_and_rules(&config, feed, Past::Guard)?;
    let as_of = lotsync::diff::as_of(&args.file, &profile).at;
    let newer = match rules.mode {
        lotsync::diff::Mode::Full => {
            outbox
                .state()
                .newer_snapshot(&feed.name, &rules.locations, as_of)?
        }
        lotsync::diff::Mode::Delta => None,
    };
    let mut out = super::stdout();
    if let Some(newer) = &newer {
        let reason = Verdict::superseded_reason(&newer.name, newer.as_of, as_of);
        if !args.force {
            let file = shown_path(&args.file);
            anyhow::bail!(
                "{file}: not released: it is {reason}; nothing was queued and it stays held. If \
                 it is right all the same, `{}` applies it",
                config.command(&["release", "--force", &file])
            );
        }
        writeln!(
            out,
            "forced: {} is {}",
            shown_path(&args.file),
            Escaped(&reason)
        )?;
    }
    let file_to_plan = FileToPlan {
        config: &config,
        feed,
        path: &args.file,
        past: match args.force {
            true => Past::GuardAndNewer,
            false => Past::Guard,
        },
        commit: true,
        keep_ops: true,
        claimed: None,
    };
    let planned = plan_file(&runtime, &outbox, file_to_plan, Listing::Configured)??;
    write_text(
        &mut out,
        &shown_path(&args.file),
        &planned.planned,
        &config,
        &known_in(&outbox, config.api.organization_id),
    )?;
    if in_held {
        // Out of held/ with its report: filed in the archive as the daemon files it, with
        // what is queued (nothing is delivered yet).
        let mut report = planned.report.clone();
        if let Some(n) = planned.planned.plan.file_no {
            report.delivered(&outbox.progress(n)?, Vec::new());
        }
        let to = folders
            .archive(&file, &report)
            .with_context(|| shown_path(&args.file))?;
        folders
            .drop_report(&file)
            .with_context(|| shown_path(&args.file))?;
        writeln!(out, "archived as {}, with its report", shown_path(&to))?;
    } else if let Some((_, to)) = lifecycle::file_copy(&outbox, feed, &args.file, &planned) {
        // As the daemon files a file it releases (with what is queued: nothing is delivered yet).
        writeln!(
            out,
            "archived: a copy as {}, with its report",
            shown_path(&to)
        )?;
    }
    writeln!(
        out,
        "released: {} operations queued (nothing sent yet); `{}` or the daemon delivers them",
        planned.planned.plan.ops.len(),
        lotsync::config::advice(&["sync"])
    )?;
    Ok(CommandOutcome::Done)
}

/// `lotsync state backup`.
pub fn state_backup(args: StateBackupArgs) -> anyhow::Result<CommandOutcome> {
    let config = Config::load(&args.config.config)?;
    let outbox = open(&config, Holder::Reader("state-backup"))?;
    outbox.state().backup_to(&args.to)?;
    let size = std::fs::metadata(&args.to).map_or(0, |m| m.len());
    writeln!(
        super::stdout(),
        "state backed up to {} ({:.1} MB): one consistent copy of {}",
        shown_path(&args.to),
        size as f64 / 1e6,
        shown_path(&config.state.dir.join(lotsync::state::DB_FILE))
    )?;
    Ok(CommandOutcome::Done)
}

/// `lotsync state export`.
pub fn state_export(args: StateExportArgs) -> anyhow::Result<CommandOutcome> {
    let config = Config::load(&args.config.config)?;
    let outbox = open(&config, Holder::Reader("state-export"))?;
    let mut out = std::io::BufWriter::new(super::stdout());
    if args.format == OutputFormat::Text {
        writeln!(
            out,
            "{:<8} {:<17} {:>8} {:<8} {:<12} {:<10} file",
            "location", "vin", "id", "sold", "stock", "queued"
        )?;
    }
    for vehicle in outbox.state().vehicles() {
        let v = vehicle?;
        match args.format {
            OutputFormat::Ndjson => {
                let line = serde_json::json!({
                    "organization_id": v.key.organization_id,
                    "location_id": v.key.location_id,
                    "vin": v.key.vin,
                    "service_id": v.record.service_id,
                    "created": v.record.exists(),
                    "sold": v.record.sold,
                    "absent": v.record.absent,
                    "queued": v.record.queued,
                    "rejected": v.record.rejected,
                    "file": v.record.file,
                    "first_seen": lotsync::clock::utc_unix(v.record.first_seen),
                    "updated_at": lotsync::clock::utc_unix(v.record.updated_at),
                    "payload": v.payload,
                });
                serde_json::to_writer(&mut out, &line)?;
                out.write_all(b"\n")?;
            }
            OutputFormat::Text => writeln!(
                out,
                "{:<8} {:<17} {:>8} {:<8} {:<12} {:<10} {}",
                v.key.location_id,
                v.key.vin,
                v.record
                    .service_id
                    .map_or_else(|| "-".to_owned(), |id| id.to_string()),
                if v.record.sold { "sold" } else { "in stock" },
                Escaped(v.payload.as_ref().map_or("-", |p| p.stock.as_str())),
                v.record.queued,
                Escaped(&v.record.file)
            )?,
        }
    }
    out.flush()?;
    Ok(CommandOutcome::Done)
}

fn write_text(
    out: &mut impl Write,
    shown: &str,
    planned: &FilePlan,
    config: &Config,
    known: &Known<'_>,
) -> std::io::Result<()> {
    let plan = &planned.plan;
    writeln!(
        out,
        "{shown} (feed {}, sha256 {}): {} records",
        plan.feed,
        short(&plan.file.sha256),
        planned.records
    )?;
    match &plan.verdict {
        Verdict::AlreadyApplied { same_as, at: when } => {
            writeln!(
                out,
                "  already applied: same content as {} ({} UTC); nothing to do",
                Escaped(same_as),
                lotsync::clock::utc_unix(*when)
            )?;
            return Ok(());
        }
        Verdict::Superseded {
            newer,
            newer_as_of,
            as_of,
        } => {
            writeln!(
                out,
                "  SUPERSEDED, nothing of it would be queued: {}",
                Escaped(&Verdict::superseded_reason(newer, *newer_as_of, *as_of))
            )?;
            return Ok(());
        }
        Verdict::Held { reasons } => {
            writeln!(
                out,
                "  HELD by the safety guard; nothing of it would be queued:"
            )?;
            for r in reasons {
                writeln!(out, "    {}", Escaped(r))?;
            }
            // `plan` holds nothing, so there is nothing to release yet: `sync` holds it
            // (as here), then `release` takes it past the guard.
            writeln!(
                out,
                "  if the file is right: {} (held, as here), then {} && {}",
                config.command(&["sync", shown]),
                config.command(&["release", shown]),
                config.command(&["sync"])
            )?;
        }
        Verdict::Apply { forced: true } => {
            writeln!(out, "  the safety guard is overridden for this file")?;
        }
        Verdict::Apply { forced: false } => {}
    }
    let c = &plan.counts;
    writeln!(
        out,
        "  {} create, {} update, {} sold, {} back in stock, {} unchanged, {} rejected records",
        c.create, c.update, c.sold, c.in_stock, c.unchanged, c.rejected_records
    )?;
    if c.still_rejected + c.absent_waiting + c.skipped_sold > 0 {
        writeln!(
            out,
            "  {} still refused by the service (unchanged since), {} absent but not yet sold \
             (sold_after_absent), {} listed as sold and never created",
            c.still_rejected, c.absent_waiting, c.skipped_sold
        )?;
    }
    if c.not_owned + c.shared > 0 {
        writeln!(
            out,
            "  {} left out but not owned by this feed (never sold by its absence), {} listed by \
             another feed of the lot too (not sold while either lists them)",
            c.not_owned, c.shared
        )?;
    }
    for (location, g) in &plan.guard {
        writeln!(
            out,
            "  location {location}: {} in stock, {} in this file, {} left out, {} would be sold",
            g.in_stock, g.accepted, g.left_out, g.would_sell
        )?;
    }
    if !plan.ops.is_empty() {
        writeln!(
            out,
            "  {:<9} {:<17} {:>8}  {:<10} vehicle",
            "op", "vin", "location", "stock"
        )?;
        for op in &plan.ops {
            writeln!(out, "  {}", Escaped(&op_row(op, known)))?;
        }
    }
    if !planned.rejected.is_empty() {
        writeln!(
            out,
            "  rejected records (not sent; still count as on the lot):"
        )?;
        for (line, p) in &planned.rejected {
            writeln!(out, "    {shown}:{line}: {}", Escaped(&p.to_string()))?;
        }
    }
    for note in &planned.notes {
        writeln!(out, "  note: {}", Escaped(note))?;
    }
    Ok(())
}

/// The payload the state holds of a vehicle (location, VIN): what a sale or a return to
/// stock is shown with, as the operator decides whether to release the file.
type Known<'a> = dyn Fn(u64, &str) -> Option<lotsync::api::VehiclePayload> + 'a;

/// The payloads [`Known`] gives, from the state.
fn known_in(
    outbox: &Outbox,
    organization_id: u64,
) -> impl Fn(u64, &str) -> Option<lotsync::api::VehiclePayload> + '_ {
    move |location_id, vin| {
        let key = lotsync::state::VehicleKey {
            organization_id,
            location_id,
            vin: vin.to_owned(),
        };
        outbox.state().payload(&key).ok().flatten()
    }
}

/// One operation as a row: its vehicle's stock number, year, make, model, trim and price,
/// from its payload, or for a sale or a return to stock from what the state knows of it.
fn op_row(op: &PlannedOp, known: &Known<'_>) -> String {
    let stored;
    let payload = match op.op.payload() {
        Some(p) => Some(p),
        None => {
            stored = known(op.location_id, &op.vin);
            stored.as_ref()
        }
    };
    let (stock, vehicle) = match payload {
        Some(p) => {
            let mut words: Vec<String> = [
                p.year.map(|y| y.to_string()),
                p.make.clone(),
                p.model.clone(),
                p.trim.clone(),
            ]
            .into_iter()
            .flatten()
            .collect();
            let selling = match &p.price {
                Some(lotsync::api::Price::Selling(a)) => Some(a),
                Some(lotsync::api::Price::Detailed(set)) => set.selling.as_ref(),
                None => None,
            };
            if let Some(amount) = selling {
                words.push(format!("${}", amount.0));
            }
            (p.stock.as_str(), words.join(" "))
        }
        None => ("", String::new()),
    };
    format!(
        "{:<9} {:<17} {:>8}  {:<10} {}",
        op.op.name(),
        op.vin,
        op.location_id,
        stock,
        vehicle
    )
}

fn short(sha256: &str) -> &str {
    sha256.get(..12).unwrap_or(sha256)
}

/// One operation in ndjson.
#[derive(Serialize)]
struct OpLine<'a> {
    op: &'static str,
    vin: &'a str,
    location_id: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<&'a lotsync::api::VehiclePayload>,
}

fn write_ndjson(
    out: &mut impl Write,
    err: &mut impl Write,
    shown: &str,
    planned: &FilePlan,
) -> std::io::Result<()> {
    let plan: &Plan = &planned.plan;
    match &plan.verdict {
        Verdict::Held { reasons } => {
            let line = serde_json::json!({
                "held": true, "file": shown, "feed": plan.feed, "reasons": reasons,
                "guard": plan.guard.iter().map(|(l, g)| serde_json::json!({
                    "location_id": l, "in_stock": g.in_stock,
                    "accepted": g.accepted, "left_out": g.left_out, "would_sell": g.would_sell,
                })).collect::<Vec<_>>(),
            });
            writeln!(out, "{line}")?;
        }
        Verdict::AlreadyApplied { same_as, .. } => {
            let line = serde_json::json!({
                "already_applied": true, "file": shown, "feed": plan.feed, "same_as": same_as,
            });
            writeln!(out, "{line}")?;
        }
        Verdict::Superseded {
            newer,
            newer_as_of,
            as_of,
        } => {
            let line = serde_json::json!({
                "superseded": true, "file": shown, "feed": plan.feed, "newer": newer,
                "reason": Verdict::superseded_reason(newer, *newer_as_of, *as_of),
            });
            writeln!(out, "{line}")?;
        }
        Verdict::Apply { .. } => {
            for op in &plan.ops {
                let line = OpLine {
                    op: op.op.name(),
                    vin: &op.vin,
                    location_id: op.location_id,
                    payload: op.op.payload(),
                };
                serde_json::to_writer(&mut *out, &line)?;
                out.write_all(b"\n")?;
            }
        }
    }
    for (line, problem) in &planned.rejected {
        let json = ProblemLine {
            file: shown,
            line: *line,
            severity: "rejected",
            problem,
        };
        serde_json::to_writer(&mut *err, &json)?;
        err.write_all(b"\n")?;
    }
    let summary = serde_json::json!({
        "file": shown, "feed": plan.feed, "sha256": plan.file.sha256,
        "records": planned.records, "counts": plan.counts,
    });
    writeln!(err, "{summary}")
}
