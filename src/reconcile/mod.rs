//! The full reconciliation (`lotsync reconcile`, nightly from a systemd timer): the service's
//! whole list against the state, and the repairs it calls for, queued in the outbox.
//!
//! For each vehicle of the organization the state knows as created and settled (nothing queued,
//! no refusal on record, not changed while the list was read), what the service lists is
//! compared with what lotsync last sent:
//! - missing on the service: re-created from the payload last sent when it is in stock;
//!   forgotten when it is sold (the service let it go; the DMS listing it again creates it);
//! - sold, or in stock, otherwise than lotsync left it: moved back;
//! - fields that differ from the payload last sent ([`crate::diff::field_drift`]): that payload is sent again;
//! - its id unknown or changed: learned from the list, without a request.
//!
//! A service vehicle the state does not know is foreign and left alone, unless an applied export
//! in the archive lists it on the lot: then lotsync created it and lost its record, which is
//! restored (id and sold state from the service, the archived payload as the one last sent). A
//! nightly run reads only the newest applied snapshot of each `full` feed for this; `rebuild`
//! reads every archived export, fills an empty state that way, and restores each feed's last
//! applied file, so that re-dropping it is recognized and the next export sends only what
//! changed. In both, a vehicle the newest snapshot of a full feed lists on the lot that neither
//! the state nor the service has is created.
//!
//! It queues, it does not send: the caller drains the uploader. What needs no request is
//! recorded first ([`Outbox::record_findings`]); the repairs are one plan of the pseudo-feed
//! [`RECONCILE_FEED`], committed like a file's plan. A crash between the two loses nothing: the
//! next run finds what is still to repair. Every run leaves a report in `<state dir>/reports/`.
//!
//! The stage in files, each owning one side of it:
//! - `service.rs`: the service's side, its whole list of the organization's vehicles, read at
//!   the token's pace (the uploader's [`crate::upload::pace::Pace`]), a failed page again alone;
//! - `known.rs`: the state's side, the organization's vehicles as the comparison sees them;
//! - `archive.rs`: the archived exports' side, what the feeds' applied files listed;
//! - `compare.rs`: the three compared, into the drift by kind and the repairs' plan;
//! - `report.rs`: the report a run leaves ([`ReconcileReport`]), and its events in the log;
//! - here: [`reconcile`], which runs them in order, and what stops it ([`ReconcileError`]).

mod archive;
mod compare;
mod known;
mod report;
mod service;

pub use report::{
    last_succeeded, FieldDrift, ForeignVehicle, ReconcileReport, RepairCounts, RestoredFeed,
    Skipped,
};
pub(crate) use service::{listed_vin, organization_vehicles};
pub use service::{ListError, ServiceList};

use crate::api::ApiClient;
use crate::config::Config;
use crate::mapper::ProfileError;
use crate::outbox::{Outbox, OutboxError};
use crate::state::StateError;
use crate::upload::pace::Pace;
use archive::read_archive;
use compare::{compare, plan_file, Comparison};
use known::{known_vehicles, versions};
use report::{file_stamp, log_repairs, write_report};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

/// What stops a reconciliation.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("cannot read the service's list of vehicles")]
    List(#[source] Box<ListError>),
    #[error(
        "--rebuild fills an empty state only, and {dir} holds {vehicles} vehicles and {queued} \
         queued operations; to rebuild it, stop lotsync, move it aside \
         (mv {q} {q}.old) and run `{}` again",
         crate::config::advice(&["reconcile", "--rebuild"]),
         q = crate::text::shell_quoted(&crate::text::shown_path(.dir))
    )]
    NotEmpty {
        dir: PathBuf,
        vehicles: usize,
        queued: usize,
    },
    #[error("feed {feed}")]
    Profile {
        feed: String,
        #[source]
        source: ProfileError,
    },
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    #[error("cannot write the report {path}")]
    Report {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A blocking task of the reconciliation (state and file work off the async threads) did
    /// not finish.
    #[error("reconciliation task failed")]
    Task(#[source] tokio::task::JoinError),
}

/// Reconciles the organization's vehicles on the service with the state, and queues the
/// repairs (`rebuild`: fills an empty state first, see the module docs). The caller delivers
/// them by draining an [`crate::upload::Uploader`] over the same outbox; the list is read at
/// `pace`, that uploader's ([`crate::upload::Uploader::pace`]), so that reads and writes of the
/// token share one rate.
pub async fn reconcile(
    client: &ApiClient,
    pace: &Pace,
    outbox: &Arc<Outbox>,
    config: &Config,
    rebuild: bool,
) -> Result<ReconcileReport, ReconcileError> {
    let started = SystemTime::now();
    let clock = std::time::Instant::now();
    let org = client.organization_id();
    let before = blocking({
        let outbox = outbox.clone();
        move || versions(&outbox, org, rebuild)
    })
    .await?;
    let ServiceList {
        vehicles: listed,
        pages,
        pages_read_again,
        retries,
        notes: list_notes,
    } = organization_vehicles(client, pace, &config.api)
        .await
        .map_err(|e| ReconcileError::List(Box::new(e)))?;
    let archive = blocking({
        let config = config.clone();
        move || read_archive(&config, rebuild)
    })
    .await?;
    let stamp = file_stamp(started);
    let plan_file = plan_file(&format!("reconcile-{stamp}"));
    let (comparison, state_vehicles) = blocking({
        let outbox = outbox.clone();
        let plan_file = plan_file.clone();
        let archive_feeds = if rebuild {
            archive.last_applied.clone()
        } else {
            Vec::new()
        };
        let told = archive.history;
        let archive = archive.listings;
        move || -> Result<(Comparison, usize), ReconcileError> {
            // Held from the first read to the commit, as the diff does: no plan queues
            // anything meanwhile, so a vehicle with nothing queued (the only ones repaired)
            // stays so; answers to what is queued go on.
            let planning = outbox.planning();
            let known = known_vehicles(&outbox, org)?;
            let state_vehicles = known.len();
            let comparison = compare(org, &listed, known, &before, &archive);
            if !told.is_empty() {
                outbox.record_history(org, &told)?;
            }
            outbox.record_findings(org, &comparison.findings, &archive_feeds)?;
            if !comparison.ops().is_empty() {
                let plan = comparison.plan(plan_file);
                outbox.commit(&plan, &planning)?;
            }
            drop(planning);
            outbox.state().write_markers();
            Ok((comparison, state_vehicles))
        }
    })
    .await?;

    let mut notes = list_notes;
    notes.extend(archive.notes);
    notes.extend(comparison.notes.iter().cloned());
    let r = &comparison.repairs;
    let operations = comparison.ops().len();
    let mut report = ReconcileReport {
        organization_id: org,
        rebuild,
        started_at: crate::clock::utc_datetime(started),
        finished_at: String::new(),
        service_vehicles: comparison.service_vehicles,
        state_vehicles: if rebuild { 0 } else { state_vehicles },
        counts: RepairCounts {
            recreated: r.recreated.len(),
            sold_fixed: r.sold_fixed.len(),
            in_stock_fixed: r.in_stock_fixed.len(),
            fields_fixed: r.fields_fixed.len(),
            ids_learned: r.ids_learned.len(),
            restored: r.restored.len(),
            forgotten: r.forgotten.len(),
            foreign: r.foreign.len(),
            unchanged: r.unchanged,
        },
        recreated: r.recreated.clone(),
        sold_fixed: r.sold_fixed.clone(),
        in_stock_fixed: r.in_stock_fixed.clone(),
        fields_fixed: r.fields_fixed.clone(),
        ids_learned: r.ids_learned.clone(),
        restored: r.restored.clone(),
        forgotten: r.forgotten.clone(),
        skipped: r.skipped,
        foreign: r.foreign.clone(),
        feeds_restored: if rebuild {
            archive
                .last_applied
                .iter()
                .map(|(feed, f)| RestoredFeed {
                    feed: feed.clone(),
                    file: f.name.clone(),
                    sha256: f.sha256.clone(),
                })
                .collect()
        } else {
            Vec::new()
        },
        archived_files_read: archive.files_read,
        operations,
        plan: (operations > 0).then_some(plan_file.name),
        plan_sha256: (operations > 0).then_some(plan_file.sha256),
        pages,
        pages_read_again,
        retries,
        seconds: 0.0,
        notes,
        path: PathBuf::new(),
    };
    report.finished_at = crate::clock::utc_datetime(SystemTime::now());
    report.seconds = (clock.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
    let reports = config.state.dir.join("reports");
    report.path = blocking({
        let report = report.clone();
        move || write_report(&reports, &stamp, &report)
    })
    .await?;
    log_repairs(&report);
    let c = &report.counts;
    tracing::info!(
        rebuild,
        service = report.service_vehicles,
        state = report.state_vehicles,
        operations,
        recreated = c.recreated,
        sold_fixed = c.sold_fixed,
        in_stock_fixed = c.in_stock_fixed,
        fields_fixed = c.fields_fixed,
        ids_learned = c.ids_learned,
        restored = c.restored,
        forgotten = c.forgotten,
        foreign = c.foreign,
        skipped = report.skipped.total(),
        pages,
        pages_read_again,
        retries,
        seconds = report.seconds,
        report = %report.path.display(),
        "reconciliation done"
    );
    Ok(report)
}

/// Runs state and file work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ReconcileError> + Send + 'static,
) -> Result<T, ReconcileError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(ReconcileError::Task)?
}

// Against the sandbox, so with its feature (on by default).
#[cfg(all(test, feature = "sandbox"))]
mod tests;
