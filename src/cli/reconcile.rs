//! `lotsync reconcile`: the service's whole list against the state, the repairs queued and
//! delivered, and a summary (see [`lotsync::reconcile`] for what is compared).

use super::deliver::deliver;
use super::setup::{ask_daemon, client_of, print_reply, ConfigArg};
use anyhow::Context;
use lotsync::config::Config;
use lotsync::outbox::Outbox;
use lotsync::outcome::CommandOutcome;
use lotsync::reconcile::ReconcileReport;
use lotsync::state::{Holder, State};
use lotsync::text::Chain;
use lotsync::upload::{DrainReport, StatsSnapshot, UploadError, Uploader, NOTICE_WAIT};
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

/// Arguments of `lotsync reconcile`.
#[derive(Debug, clap::Args)]
pub struct ReconcileArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Fill an empty state (lost, or moved aside because it was corrupt) from the service's
    /// list and the feeds' archived exports, so that nothing is created twice or sent again.
    #[arg(long)]
    pub rebuild: bool,
    /// text: a summary for a person; json: the report and the delivery as one JSON object.
    #[arg(long, value_enum, default_value_t = ReconcileFormat::Text)]
    pub format: ReconcileFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReconcileFormat {
    Text,
    Json,
}

/// `lotsync reconcile`: through the running daemon (which owns the state), else directly.
pub fn reconcile(args: ReconcileArgs) -> anyhow::Result<CommandOutcome> {
    let config = Config::load(&args.config.config)?;
    let request = lotsync::daemon::control::Request::Reconcile {
        rebuild: args.rebuild,
    };
    // As long as it takes: the daemon answers when the repairs are delivered.
    if let Some(reply) = ask_daemon(&config, &request, None)? {
        if args.format == ReconcileFormat::Json {
            if let Some(report) = &reply.report {
                writeln!(super::stdout(), "{}", serde_json::to_string_pretty(report)?)?;
                return Ok(reply.outcome);
            }
        }
        return print_reply(&reply);
    }
    reconcile_direct(&args)
}

/// Reconciles with the state opened here (no daemon holds it): compares, queues the repairs,
/// delivers them, prints the summary. Done when every repair was delivered, incomplete when
/// some were refused or stay queued, failed on a bad config or a fatal answer.
pub fn reconcile_direct(args: &ReconcileArgs) -> anyhow::Result<CommandOutcome> {
    let started = Instant::now();
    let config = Config::load(&args.config.config)?;
    let client = client_of(&config)?;
    let mut opening = lotsync::daemon::state_opening(&config, Holder::Writer("reconcile"));
    // A rebuild is the way out of a lost state: it fills it, then writes the markers anew.
    opening.verify = !args.rebuild;
    let outbox = Arc::new(Outbox::new(State::open_with(&config.state.dir, &opening)?));
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let (report, delivered, stats) = runtime.block_on(async {
        // Built first: the list is read at its pace, as its repairs are sent.
        let (uploader, notices) = Uploader::configured(client.clone(), outbox.clone(), &config)?;
        let report =
            lotsync::reconcile::reconcile(&client, uploader.pace(), &outbox, &config, args.rebuild)
                .await?;
        let delivered = deliver(&uploader).await;
        if let (Some(notices), Ok(drained), Some(plan), Some(sha256)) =
            (&notices, &delivered, &report.plan, &report.plan_sha256)
        {
            let refused: Vec<String> = drained
                .rejected
                .iter()
                .filter(|r| &r.file == plan)
                .map(ToString::to_string)
                .collect();
            notices.rejected(plan, sha256, &refused);
        }
        if let Some(notices) = &notices {
            notices.finish(NOTICE_WAIT).await;
        }
        anyhow::Ok((report, delivered, uploader.stats().snapshot()))
    })?;

    let delivered = match delivered {
        Err(e @ (UploadError::Outbox(_) | UploadError::State(_) | UploadError::Task(_))) => {
            return Err(e.into())
        }
        other => other,
    };
    let code = match &delivered {
        Ok(d) if !d.rejected.is_empty() || d.undelivered > 0 => CommandOutcome::Incomplete,
        Ok(_) => CommandOutcome::Done,
        Err(_) => CommandOutcome::Failed,
    };
    let mut out = super::stdout();
    match args.format {
        ReconcileFormat::Json => {
            let (drained, fatal) = match &delivered {
                Ok(d) => (Some(d), None),
                Err(e) => (None, Some(Chain(e).to_string())),
            };
            let json = serde_json::json!({
                "report": report,
                "report_file": report.path,
                "delivered": stats,
                "refused": drained.map(|d| &d.rejected),
                "undelivered": drained.map(|d| d.undelivered),
                "stopped": drained.and_then(|d| d.stopped.as_ref()).or(fatal.as_ref()),
            });
            serde_json::to_writer_pretty(&mut out, &json)?;
            writeln!(out)?;
        }
        ReconcileFormat::Text => {
            write_text(&mut out, &report, delivered.as_ref().ok(), &stats, started)?;
        }
    }
    out.flush()?;
    if let Err(UploadError::Fatal { error, queued }) = &delivered {
        // As the logging wants it: one JSON line, one journal entry, or text.
        super::last_error(&format!(
            "delivery stopped: {error}; {queued} operations stay queued; run `lotsync \
             reconcile` again once fixed"
        ));
    }
    Ok(code)
}

fn write_text(
    out: &mut impl Write,
    report: &ReconcileReport,
    drained: Option<&DrainReport>,
    stats: &StatsSnapshot,
    started: Instant,
) -> std::io::Result<()> {
    writeln!(
        out,
        "reconcile{}: {} vehicles on the service, {} in the state ({:.1} s)",
        if report.rebuild { " --rebuild" } else { "" },
        report.service_vehicles,
        report.state_vehicles,
        started.elapsed().as_secs_f64()
    )?;
    for line in report.findings() {
        writeln!(out, "{line}")?;
    }
    writeln!(
        out,
        "  delivered: created {}, updated {}, sold {}, back in stock {}; requests {}, retries {}, 429s {}",
        stats.created,
        stats.updated,
        stats.sold,
        stats.in_stock,
        stats.requests,
        stats.retries,
        stats.throttled
    )?;
    if let Some(drained) = drained {
        let next = format!(
            "`{}`, a sync or the daemon",
            lotsync::config::advice(&["reconcile"])
        );
        super::deliver::write_drained(out, drained, &next)?;
    }
    writeln!(out, "  report: {}", report.path.display())
}
