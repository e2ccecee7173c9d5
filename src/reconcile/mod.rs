//! The full reconciliation (`lotsync reconcile`, nightly from a systemd timer): the service's
//! whole list against the state, and the repairs it calls for, queued in the outbox.
//!
//! For each vehicle of the organization the state knows as created and settled (nothing queued,
//! no refusal on record, not changed while the list was read), what the service lists is
//! compared with what lotsync last sent:
//! - missing on the service: re-created from the payload last sent when it is in stock;
//!   forgotten when it is sold (the service let it go; the DMS listing it again creates it);
//! - sold, or in stock, otherwise than lotsync left it: moved back;
//! - fields that differ from the payload last sent ([`field_drift`]): that payload is sent again;
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

use crate::api::{ApiClient, ApiError, ErrorClass, Vehicle, VehiclePayload};
use crate::config::{ApiConfig, Config, FeedConfig};
use crate::diff::{field_drift, Counts, FileId, Mode, Op, Plan, PlannedOp, Verdict, VinChange};
use crate::mapper::{ExportFile, Mapped, Profile, ProfileError};
use crate::outbox::{Finding, Outbox, OutboxError};
use crate::state::{AppliedFile, StateError, VehicleKey, VehicleRecord};
use crate::text::Chain;
use backon::Retryable;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use crate::plan::RECONCILE_FEED;

/// The archive's place in a feed's inbox (see [`crate::daemon::FeedFolders`]).
const ARCHIVE: &str = "archive";
const REPORT_SUFFIX: &str = ".report.json";

/// What stops a reconciliation.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("cannot read the service's list of vehicles")]
    List(#[source] Box<ApiError>),
    #[error(
        "--rebuild fills an empty state only, and {dir} holds {vehicles} vehicles and {queued} \
         queued operations; to rebuild it, stop lotsync, move it aside \
         (mv {dir} {dir}.old) and run `lotsync reconcile --rebuild` again"
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
    #[error("reconciliation task failed: {0}")]
    Task(String),
}

/// A vehicle whose fields on the service differ from the payload last sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldDrift {
    pub vin: String,
    /// Payload field names (`price.selling`, `make`, …).
    pub fields: Vec<&'static str>,
}

/// A vehicle on the service that lotsync did not create: left alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForeignVehicle {
    /// As the service spells it (empty when it has none).
    pub vin: String,
    pub id: u64,
    /// Where an archived export puts it, when one lists it (the service's list does not say).
    pub location_id: Option<u64>,
    /// The archived export that lists it, though only as sold (so lotsync never created it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listed_sold_in: Option<String>,
}

/// Vehicles not judged this time; the queue or the next run settles them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// Operations still queued for them.
    pub queued: u64,
    /// The service refused their last operation (the next export that changes them retries).
    pub rejected: u64,
    /// Their record changed while the list was read (answers landing meanwhile).
    pub changed_meanwhile: u64,
    /// Planned but never created, and nothing queued.
    pub not_created: u64,
    /// No payload stored to compare with or re-create from.
    pub no_payload: u64,
    /// The service lists their VIN more than once: left for a person to sort out.
    pub duplicate_on_service: u64,
}

impl Skipped {
    pub fn total(&self) -> u64 {
        self.queued
            + self.rejected
            + self.changed_meanwhile
            + self.not_created
            + self.no_payload
            + self.duplicate_on_service
    }
}

/// Per repair kind, vehicles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RepairCounts {
    pub recreated: usize,
    pub sold_fixed: usize,
    pub in_stock_fixed: usize,
    pub fields_fixed: usize,
    pub ids_learned: usize,
    pub restored: usize,
    pub forgotten: usize,
    pub foreign: usize,
    pub unchanged: usize,
}

/// A feed's last applied file, restored by a rebuild.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestoredFeed {
    pub feed: String,
    pub file: String,
    pub sha256: String,
}

/// What a reconciliation found and queued. Written as JSON to `<state dir>/reports/`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReconcileReport {
    pub organization_id: u64,
    pub rebuild: bool,
    /// UTC, `YYYY-MM-DD HH:MM:SS`.
    pub started_at: String,
    pub finished_at: String,
    /// Vehicles of the organization on the service, and in the state before the run.
    pub service_vehicles: usize,
    pub state_vehicles: usize,
    pub counts: RepairCounts,
    /// Missing on the service, in stock: created again.
    pub recreated: Vec<String>,
    /// Sold as far as lotsync knows, in stock on the service: marked sold again.
    pub sold_fixed: Vec<String>,
    /// In stock as far as lotsync knows, sold on the service: marked in stock again.
    pub in_stock_fixed: Vec<String>,
    /// Fields edited on the service: the payload last sent is sent again.
    pub fields_fixed: Vec<FieldDrift>,
    /// Ids learned from the list (no request).
    pub ids_learned: Vec<String>,
    /// Records restored from the service and the archived exports (no request).
    pub restored: Vec<String>,
    /// Sold, and no longer on the service: records dropped.
    pub forgotten: Vec<String>,
    pub skipped: Skipped,
    /// On the service, not created by lotsync: left alone.
    pub foreign: Vec<ForeignVehicle>,
    /// Rebuild: each feed's last applied file.
    pub feeds_restored: Vec<RestoredFeed>,
    /// Archived exports read (rebuild: all applied ones; else each full feed's newest).
    pub archived_files_read: usize,
    /// Operations queued, under the file name `plan` (and its `plan_sha256` in the state's
    /// files).
    pub operations: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_sha256: Option<String>,
    /// What is worth knowing besides (unreadable archive files, duplicate VINs, …).
    pub notes: Vec<String>,
    /// Where the report was written.
    #[serde(skip)]
    pub path: PathBuf,
}

impl ReconcileReport {
    /// One line for a person (and the log).
    pub fn summary(&self) -> String {
        let c = &self.counts;
        let mut s = format!(
            "{} vehicles on the service, {} in the state: ",
            self.service_vehicles, self.state_vehicles
        );
        if self.operations == 0 {
            s.push_str("nothing to repair");
        } else {
            s.push_str(&format!(
                "queued {} re-created, {} marked sold again, {} back in stock, {} re-sent (fields)",
                c.recreated, c.sold_fixed, c.in_stock_fixed, c.fields_fixed
            ));
        }
        s.push_str(&format!(
            "; {} ids learned, {} restored, {} forgotten; {} foreign left alone",
            c.ids_learned, c.restored, c.forgotten, c.foreign
        ));
        let skipped = self.skipped.total();
        if skipped > 0 {
            s.push_str(&format!(
                "; {skipped} skipped ({} queued, {} refused, {} changed meanwhile)",
                self.skipped.queued, self.skipped.rejected, self.skipped.changed_meanwhile
            ));
        }
        s
    }
}

/// Reconciles the organization's vehicles on the service with the state, and queues the
/// repairs (`rebuild`: fills an empty state first, see the module docs). The caller delivers
/// them by draining an [`crate::upload::Uploader`] over the same outbox.
pub async fn reconcile(
    client: &ApiClient,
    outbox: &Arc<Outbox>,
    config: &Config,
    rebuild: bool,
) -> Result<ReconcileReport, ReconcileError> {
    let started = SystemTime::now();
    let org = client.organization_id();
    let before = blocking({
        let outbox = outbox.clone();
        move || versions(&outbox, org, rebuild)
    })
    .await?;
    let listed = organization_vehicles(client, &config.api)
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
        let archive = archive.listings;
        move || -> Result<(Comparison, usize), ReconcileError> {
            // Held from the first read to the commit, as the diff does: nothing is taken for
            // sending meanwhile, so what is settled stays settled.
            let in_flight = outbox.lock();
            let known = known_vehicles(&outbox, org)?;
            let state_vehicles = known.len();
            let comparison = compare(org, &listed, known, &before, &archive);
            outbox.record_findings(org, &comparison.findings, &archive_feeds)?;
            if !comparison.ops.is_empty() {
                let plan = comparison.plan(org, plan_file);
                outbox.commit(&plan, &in_flight)?;
            }
            drop(in_flight);
            outbox.state().write_markers();
            Ok((comparison, state_vehicles))
        }
    })
    .await?;

    let mut notes = archive.notes;
    notes.extend(comparison.notes.iter().cloned());
    let r = &comparison.repairs;
    let operations = comparison.ops.len();
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
        notes,
        path: PathBuf::new(),
    };
    report.finished_at = crate::clock::utc_datetime(SystemTime::now());
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
        report = %report.path.display(),
        "reconciliation done"
    );
    Ok(report)
}

/// One event per vehicle repaired or left alone.
fn log_repairs(report: &ReconcileReport) {
    let kinds = [
        ("recreate", &report.recreated),
        ("sold", &report.sold_fixed),
        ("in_stock", &report.in_stock_fixed),
    ];
    for (op, vins) in kinds {
        for vin in vins {
            tracing::info!(%vin, op, "drift on the service: repair queued");
        }
    }
    for f in &report.fields_fixed {
        tracing::info!(vin = %f.vin, op = "update", fields = %f.fields.join(","), "fields edited on the service: repair queued");
    }
    for vin in &report.forgotten {
        tracing::info!(%vin, "sold and gone from the service: forgotten");
    }
    for vin in &report.restored {
        tracing::info!(%vin, "record restored from the service and the archive");
    }
    for f in &report.foreign {
        tracing::debug!(vin = %f.vin, id = f.id, "not created by lotsync: left alone");
    }
}

/// Runs sled and file work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ReconcileError> + Send + 'static,
) -> Result<T, ReconcileError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ReconcileError::Task(e.to_string()))?
}

/// The organization's vehicles in the service's whole list (a service may list others'),
/// retried as the uploader retries a call (a 429 or a 503 on the 40th page should not cost the
/// night's reconciliation).
pub(crate) async fn organization_vehicles(
    client: &ApiClient,
    api: &ApiConfig,
) -> Result<Vec<Vehicle>, ApiError> {
    let org = client.organization_id();
    let backoff = backon::ExponentialBuilder::default()
        .with_jitter()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(30))
        .with_max_times(api.max_attempts.saturating_sub(1) as usize);
    let answer = (|| client.list_vehicles())
        .retry(backoff)
        .when(|e: &ApiError| e.class() == ErrorClass::Retryable)
        .adjust(|e: &ApiError, wait| wait.map(|w| e.retry_after().map_or(w, |r| r.max(w))))
        .notify(|e: &ApiError, wait| {
            tracing::warn!(error = %Chain(e), wait_ms = wait.as_millis() as u64, "listing the service's vehicles again");
        })
        .await?;
    Ok(answer
        .value
        .into_iter()
        .filter(|v| {
            v.organization
                .as_ref()
                .and_then(|o| o.id)
                .is_none_or(|id| id == org as f64)
        })
        .collect())
}

/// A listed vehicle's VIN as the state keys it (trimmed, upper-cased); None without one.
pub(crate) fn listed_vin(vehicle: &Vehicle) -> Option<String> {
    vehicle
        .vin
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_ascii_uppercase)
}

/// What each record of the organization looked like before the list was read: (last answered
/// operation, last change, queued operations).
type Versions = HashMap<String, (u64, i64, u32)>;

fn versions(outbox: &Outbox, org: u64, rebuild: bool) -> Result<Versions, ReconcileError> {
    let state = outbox.state();
    if rebuild && (state.vehicle_count() > 0 || !outbox.is_empty()) {
        return Err(ReconcileError::NotEmpty {
            dir: state.dir().to_owned(),
            vehicles: state.vehicle_count(),
            queued: outbox.len(),
        });
    }
    Ok(known_vehicles(outbox, org)?
        .into_iter()
        .map(|k| {
            let r = &k.record;
            (k.key.vin, (r.acked_seq, r.updated_at, r.queued))
        })
        .collect())
}

/// A vehicle of the state, as the comparison sees it.
#[derive(Debug, Clone)]
struct Known {
    key: VehicleKey,
    record: VehicleRecord,
    payload: Option<VehiclePayload>,
}

fn known_vehicles(outbox: &Outbox, org: u64) -> Result<Vec<Known>, ReconcileError> {
    let mut out = Vec::new();
    for stored in outbox.state().vehicles() {
        let stored = stored?;
        if stored.key.organization_id == org {
            out.push(Known {
                key: stored.key,
                record: stored.record,
                payload: stored.payload,
            });
        }
    }
    Ok(out)
}

/// The newest listing of a VIN in the archived exports read.
#[derive(Debug, Clone, PartialEq)]
struct Listing {
    payload: VehiclePayload,
    /// Sold as the archive tells: listed as sold, or absent from its full feed's newest
    /// snapshot since.
    sold: bool,
    /// Some applied export listed it on the lot: lotsync created it.
    listed_in_stock: bool,
    /// Listed on the lot by the newest applied snapshot of a full feed.
    in_last_snapshot: bool,
    /// The archived export of the newest listing.
    file: String,
}

/// What the archived exports tell.
#[derive(Debug, Default)]
struct Archive {
    listings: HashMap<String, Listing>,
    /// Per feed, its newest applied export.
    last_applied: Vec<(String, AppliedFile)>,
    files_read: usize,
    notes: Vec<String>,
}

/// The fields of an archived file's report the reconciliation reads (see [`crate::daemon::FileReport`]).
#[derive(Debug, Deserialize)]
struct ArchivedReport {
    file: String,
    outcome: String,
    #[serde(default)]
    finished_at: String,
}

/// An applied export in a feed's archive.
#[derive(Debug, Clone)]
struct Archived {
    feed: usize,
    path: PathBuf,
    /// The name it was dropped under.
    name: String,
    finished_at: String,
    /// When its report was written: orders files finished within the same second.
    written: SystemTime,
}

/// Reads the archives of the config's feeds: each feed's newest applied file and, per VIN, its
/// newest listing (`all`: in every applied export; else in each full feed's newest only).
fn read_archive(config: &Config, all: bool) -> Result<Archive, ReconcileError> {
    let mut archive = Archive::default();
    let mut files: Vec<Archived> = Vec::new();
    let mut newest_of_full: Vec<PathBuf> = Vec::new();
    for (index, feed) in config.feeds.iter().enumerate() {
        let mut applied = applied_files(feed, index, &mut archive.notes);
        applied.sort_by(|a, b| (&b.finished_at, b.written).cmp(&(&a.finished_at, a.written)));
        if let Some(newest) = applied.first() {
            // Only a rebuild restores it; hashing it every night would be wasted.
            let id = if all {
                Some(FileId::of_path(&newest.path))
            } else {
                None
            };
            match id {
                None => {}
                Some(Ok(id)) => archive.last_applied.push((
                    feed.name.clone(),
                    AppliedFile {
                        name: newest.name.clone(),
                        sha256: id.sha256,
                        at: unix_secs(newest.written),
                        records: 0,
                    },
                )),
                Some(Err(e)) => archive
                    .notes
                    .push(format!("{}: cannot be read: {e}", newest.path.display())),
            }
            if feed.mode == Mode::Full {
                newest_of_full.push(newest.path.clone());
            }
        }
        if all {
            files.extend(applied);
        } else if feed.mode == Mode::Full {
            files.extend(applied.into_iter().take(1));
        }
    }
    files.sort_by(|a, b| (&b.finished_at, b.written).cmp(&(&a.finished_at, a.written)));
    let mut profiles: HashMap<usize, Profile> = HashMap::new();
    for file in &files {
        let feed = &config.feeds[file.feed];
        let profile = match profiles.get(&file.feed) {
            Some(p) => p,
            None => {
                let p = Profile::find(&feed.profile, &config.profiles_dir).map_err(|source| {
                    ReconcileError::Profile {
                        feed: feed.name.clone(),
                        source,
                    }
                })?;
                profiles.entry(file.feed).or_insert(p)
            }
        };
        let listed = match listings_of(&file.path, profile, feed.location_id) {
            Ok(listed) => listed,
            Err(reason) => {
                tracing::warn!(file = %crate::text::shown_path(&file.path), reason = %crate::text::Escaped(&reason), "archived export not read");
                archive
                    .notes
                    .push(format!("{}: not read: {reason}", file.path.display()));
                continue;
            }
        };
        archive.files_read += 1;
        let full = feed.mode == Mode::Full;
        let newest = newest_of_full.contains(&file.path);
        for (payload, sold) in listed {
            let in_stock = sold != Some(true);
            match archive.listings.get_mut(&payload.vin) {
                Some(listing) => listing.listed_in_stock |= in_stock,
                None => {
                    let listing = Listing {
                        sold: !in_stock || (full && !newest),
                        listed_in_stock: in_stock,
                        in_last_snapshot: newest && in_stock,
                        file: file.name.clone(),
                        payload,
                    };
                    archive
                        .listings
                        .insert(listing.payload.vin.clone(), listing);
                }
            }
        }
    }
    Ok(archive)
}

/// A feed's applied exports in `archive/*/`, with their reports.
fn applied_files(feed: &FeedConfig, index: usize, notes: &mut Vec<String>) -> Vec<Archived> {
    let mut out = Vec::new();
    let root = feed.inbox.join(ARCHIVE);
    let Ok(days) = std::fs::read_dir(&root) else {
        return out; // no archive yet
    };
    for day in days.filter_map(Result::ok).map(|d| d.path()) {
        let Ok(entries) = std::fs::read_dir(&day) else {
            continue;
        };
        for report_path in entries.filter_map(Result::ok).map(|e| e.path()) {
            let Some(file_name) = report_path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let Some(export_name) = file_name.strip_suffix(REPORT_SUFFIX) else {
                continue;
            };
            let report: ArchivedReport = match std::fs::read(&report_path)
                .map_err(|e| e.to_string())
                .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
            {
                Ok(report) => report,
                Err(reason) => {
                    notes.push(format!("{}: not read: {reason}", report_path.display()));
                    continue;
                }
            };
            let path = day.join(export_name);
            // `resumed`: applied, and delivered after an interruption (a later daemon's
            // outcome; the same as applied here).
            let applied = matches!(report.outcome.as_str(), "applied" | "resumed");
            if !applied || !path.is_file() {
                continue;
            }
            let written = std::fs::metadata(&report_path)
                .and_then(|m| m.modified())
                .unwrap_or(UNIX_EPOCH);
            out.push(Archived {
                feed: index,
                path,
                name: report.file,
                finished_at: report.finished_at,
                written,
            });
        }
    }
    out
}

/// The accepted records of an export: payload and what the export says of sold.
fn listings_of(
    path: &Path,
    profile: &Profile,
    location_id: u64,
) -> Result<Vec<(VehiclePayload, Option<bool>)>, String> {
    let mut export = ExportFile::open(path, profile, location_id).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(mapped) = export.next_record().map_err(|e| e.to_string())? {
        if let Mapped::Accepted(a) = mapped {
            out.push((a.payload.clone(), a.sold));
        }
    }
    Ok(out)
}

/// What the comparison found, by kind.
#[derive(Debug, Default, PartialEq)]
struct Repairs {
    recreated: Vec<String>,
    sold_fixed: Vec<String>,
    in_stock_fixed: Vec<String>,
    fields_fixed: Vec<FieldDrift>,
    ids_learned: Vec<String>,
    restored: Vec<String>,
    forgotten: Vec<String>,
    foreign: Vec<ForeignVehicle>,
    skipped: Skipped,
    unchanged: usize,
}

/// The comparison's outcome: findings to record, operations to queue, and what they repair.
#[derive(Debug, Default)]
struct Comparison {
    findings: Vec<Finding>,
    ops: Vec<PlannedOp>,
    changes: BTreeMap<String, VinChange>,
    counts: Counts,
    repairs: Repairs,
    service_vehicles: usize,
    notes: Vec<String>,
}

impl Comparison {
    fn push(&mut self, location_id: u64, vin: &str, op: Op, new_record: bool) {
        let counter = match &op {
            Op::Create(_) => &mut self.counts.create,
            Op::Update(_) => &mut self.counts.update,
            Op::MarkSold => &mut self.counts.sold,
            Op::MarkInStock => &mut self.counts.in_stock,
        };
        *counter += 1;
        let change = self
            .changes
            .entry(vin.to_owned())
            .or_insert_with(|| VinChange {
                location_id,
                ..VinChange::default()
            });
        change.new_ops += 1;
        change.new_record |= new_record;
        self.ops.push(PlannedOp {
            location_id,
            vin: vin.to_owned(),
            op,
        });
    }

    /// The repairs as a plan of the pseudo-feed [`RECONCILE_FEED`].
    fn plan(&self, org: u64, file: FileId) -> Plan {
        let mut counts = self.counts;
        counts.unchanged = self.repairs.unchanged as u64;
        Plan {
            organization_id: org,
            feed: RECONCILE_FEED.into(),
            file,
            verdict: Verdict::Apply { forced: false },
            ops: self.ops.clone(),
            changes: self.changes.clone(),
            counts,
            guard: Vec::new(),
            file_no: None,
            records: 0,
        }
    }
}

/// A plan's file: `name`, and a hash of nothing any export holds, so that the plan is never
/// taken for one already applied.
fn plan_file(name: &str) -> FileId {
    use sha2::Digest as _;
    let unique = format!(
        "{name}/{}/{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let sha256 = sha2::Sha256::digest(unique.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    FileId {
        name: name.to_owned(),
        sha256,
    }
}

/// Compares the service's list with the state's vehicles of `org` (and, for those the state
/// lacks, the archive's listings). Plain: reads and writes nothing.
fn compare(
    org: u64,
    service: &[Vehicle],
    known: Vec<Known>,
    before: &Versions,
    archive: &HashMap<String, Listing>,
) -> Comparison {
    let mut out = Comparison {
        service_vehicles: service.len(),
        ..Comparison::default()
    };
    let mut by_vin: HashMap<String, Vec<&Vehicle>> = HashMap::new();
    for v in service {
        match listed_vin(v) {
            Some(vin) => by_vin.entry(vin).or_default().push(v),
            None => out.repairs.foreign.push(ForeignVehicle {
                vin: String::new(),
                id: v.id,
                location_id: None,
                listed_sold_in: None,
            }),
        }
    }
    let mut known_vins = std::collections::HashSet::new();
    for k in known.into_iter().filter(|k| k.key.organization_id == org) {
        known_vins.insert(k.key.vin.clone());
        judge_known(&mut out, k, before, &by_vin);
    }

    let mut unknown: Vec<(&String, &Vec<&Vehicle>)> = by_vin
        .iter()
        .filter(|(vin, _)| !known_vins.contains(*vin))
        .collect();
    unknown.sort_by(|a, b| a.0.cmp(b.0));
    for (vin, listed) in unknown {
        let [v] = listed.as_slice() else {
            out.notes.push(format!(
                "VIN {vin} is on the service {} times (ids {}): left alone",
                listed.len(),
                ids(listed)
            ));
            out.repairs
                .foreign
                .extend(listed.iter().map(|v| ForeignVehicle {
                    vin: vin.clone(),
                    id: v.id,
                    location_id: archive.get(vin).map(|l| l.payload.location_id),
                    listed_sold_in: None,
                }));
            continue;
        };
        match archive.get(vin) {
            Some(listing) if listing.listed_in_stock => {
                let sold = v.sold_state().unwrap_or(listing.sold);
                out.findings.push(Finding::Restore {
                    vin: vin.clone(),
                    service_id: v.id,
                    sold,
                    payload: Box::new(listing.payload.clone()),
                    file: listing.file.clone(),
                });
                out.repairs.restored.push(vin.clone());
                let drift = field_drift(v, &listing.payload);
                if drift.is_empty() {
                    out.repairs.unchanged += 1;
                } else {
                    let location = listing.payload.location_id;
                    out.push(location, vin, Op::Update(listing.payload.clone()), false);
                    out.repairs.fields_fixed.push(FieldDrift {
                        vin: vin.clone(),
                        fields: drift,
                    });
                }
            }
            listing => out.repairs.foreign.push(ForeignVehicle {
                vin: vin.clone(),
                id: v.id,
                location_id: listing.map(|l| l.payload.location_id),
                listed_sold_in: listing.map(|l| l.file.clone()),
            }),
        }
    }

    // On the lot in a full feed's newest snapshot, known to neither the state nor the service.
    let mut missing: Vec<&Listing> = archive
        .iter()
        .filter(|(vin, l)| {
            l.in_last_snapshot && !known_vins.contains(*vin) && !by_vin.contains_key(*vin)
        })
        .map(|(_, l)| l)
        .collect();
    missing.sort_by(|a, b| a.payload.vin.cmp(&b.payload.vin));
    for listing in missing {
        let p = &listing.payload;
        out.push(p.location_id, &p.vin, Op::Create(p.clone()), true);
        out.repairs.recreated.push(p.vin.clone());
    }
    out.repairs
        .foreign
        .sort_by(|a, b| (&a.vin, a.id).cmp(&(&b.vin, b.id)));
    out
}

/// One vehicle the state knows.
fn judge_known(
    out: &mut Comparison,
    k: Known,
    before: &Versions,
    by_vin: &HashMap<String, Vec<&Vehicle>>,
) {
    let Known {
        key,
        record,
        payload,
    } = k;
    let vin = key.vin.as_str();
    let skipped = &mut out.repairs.skipped;
    if before.get(vin) != Some(&(record.acked_seq, record.updated_at, record.queued)) {
        skipped.changed_meanwhile += 1;
        return;
    }
    if record.queued > 0 {
        skipped.queued += 1;
        return;
    }
    let listed = by_vin.get(vin).map(Vec::as_slice).unwrap_or_default();
    // A sale or return refused because the service lost the vehicle is repaired below like
    // any missing vehicle; other refusals wait for new data.
    let lost_for = record.rejected.as_ref().and_then(|r| {
        (r.status == 404 && listed.is_empty() && matches!(r.op.as_str(), "sold" | "in_stock"))
            .then_some(r.op.as_str())
    });
    if record.rejected.is_some() && lost_for.is_none() {
        skipped.rejected += 1;
        return;
    }
    if !record.exists() {
        skipped.not_created += 1;
        return;
    }
    let v = match listed {
        [] => {
            // Where the DMS wants it: the refused transition's side, else as last acknowledged.
            let sold = lost_for.map_or(record.sold, |op| op == "sold");
            if sold {
                out.findings.push(Finding::Forget {
                    vin: vin.to_owned(),
                });
                out.repairs.forgotten.push(vin.to_owned());
            } else if let Some(payload) = payload {
                out.push(key.location_id, vin, Op::Create(payload), false);
                out.repairs.recreated.push(vin.to_owned());
            } else {
                skipped.no_payload += 1;
            }
            return;
        }
        [v] => *v,
        _ => {
            skipped.duplicate_on_service += 1;
            out.notes.push(format!(
                "VIN {vin} is on the service {} times (ids {}): left alone",
                listed.len(),
                ids(listed)
            ));
            return;
        }
    };
    let mut repaired = false;
    if record.service_id != Some(v.id) {
        out.findings.push(Finding::Id {
            vin: vin.to_owned(),
            service_id: v.id,
        });
        out.repairs.ids_learned.push(vin.to_owned());
        repaired = true;
    }
    match &payload {
        Some(payload) => {
            let drift = field_drift(v, payload);
            if !drift.is_empty() {
                out.push(key.location_id, vin, Op::Update(payload.clone()), false);
                out.repairs.fields_fixed.push(FieldDrift {
                    vin: vin.to_owned(),
                    fields: drift,
                });
                repaired = true;
            }
        }
        None => out.repairs.skipped.no_payload += 1,
    }
    match v.sold_state() {
        Some(sold) if sold != record.sold => {
            if record.sold {
                out.push(key.location_id, vin, Op::MarkSold, false);
                out.repairs.sold_fixed.push(vin.to_owned());
            } else {
                out.push(key.location_id, vin, Op::MarkInStock, false);
                out.repairs.in_stock_fixed.push(vin.to_owned());
            }
            repaired = true;
        }
        _ => {}
    }
    if !repaired {
        out.repairs.unchanged += 1;
    }
}

fn ids(listed: &[&Vehicle]) -> String {
    listed
        .iter()
        .map(|v| v.id.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `2026-11-21T020000Z`: sortable, and safe in any file system's names.
fn file_stamp(at: SystemTime) -> String {
    let stamp = crate::clock::utc_datetime(at);
    let (day, time) = stamp.split_once(' ').unwrap_or((&stamp, ""));
    format!("{day}T{}Z", time.replace(':', ""))
}

fn unix_secs(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Writes the report as `reconcile-<stamp>.report.json` (never over another one).
fn write_report(
    dir: &Path,
    stamp: &str,
    report: &ReconcileReport,
) -> Result<PathBuf, ReconcileError> {
    let failed = |path: &Path| {
        let path = path.to_owned();
        move |source| ReconcileError::Report { path, source }
    };
    std::fs::create_dir_all(dir).map_err(failed(dir))?;
    let json =
        serde_json::to_vec_pretty(report).map_err(|e| failed(dir)(std::io::Error::other(e)))?;
    for n in 1..1000 {
        let name = if n == 1 {
            format!("reconcile-{stamp}{REPORT_SUFFIX}")
        } else {
            format!("reconcile-{stamp}-{n}{REPORT_SUFFIX}")
        };
        let path = dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut file) => {
                use std::io::Write;
                file.write_all(&json).map_err(failed(&path))?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(failed(&path)(e)),
        }
    }
    Err(failed(dir)(std::io::Error::other(
        "a thousand reports of the same second already exist",
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Amount, Price};
    use crate::outbox::Finding;
    use crate::state::{Digest, Rejection};
    use serde_json::json;

    fn shown(p: &VehiclePayload, id: u64, sold: bool) -> Vehicle {
        serde_json::from_value(json!({
            "id": id, "vin": p.vin, "stock": p.stock, "price": p.price,
            "status": if sold { "sold" } else { "in-stock" },
        }))
        .unwrap()
    }

    fn known(vin: &str, id: Option<u64>, sold: bool) -> Known {
        let mut payload = VehiclePayload::new(10, format!("S-{vin}"), vin);
        payload.price = Some(Price::Selling(Amount(1000.0)));
        Known {
            key: VehicleKey::new(100, 10, vin),
            record: VehicleRecord {
                service_id: id,
                digest: Some(Digest::of(vin.as_bytes())),
                sold,
                acked_seq: 1,
                updated_at: 5,
                ..VehicleRecord::default()
            },
            payload: Some(payload),
        }
    }

    #[test]
    fn a_sale_or_return_refused_for_a_lost_vehicle_is_settled() {
        let refused = |op: &str| Rejection {
            op: op.into(),
            digest: None,
            status: 404,
            messages: vec![],
            at: 0,
        };
        let mut state = vec![
            known("LOSTSALE", Some(1), false),
            known("LOSTRETURN", Some(2), true),
            known("REFUSEDHERE", Some(3), false),
        ];
        state[0].record.rejected = Some(refused("sold"));
        state[1].record.rejected = Some(refused("in_stock"));
        state[2].record.rejected = Some(refused("sold"));
        let before: Versions = state
            .iter()
            .map(|k| (k.key.vin.clone(), (1, 5, 0)))
            .collect();
        // Only the third is still on the service: its refusal waits for new data.
        let service = vec![shown(&state[2].payload.clone().unwrap(), 3, false)];
        let c = compare(100, &service, state, &before, &HashMap::new());
        assert_eq!(c.repairs.forgotten, ["LOSTSALE"], "nothing left to sell");
        assert_eq!(c.repairs.recreated, ["LOSTRETURN"], "back on the lot");
        assert_eq!(c.repairs.skipped.rejected, 1);
    }

    #[test]
    fn compare_queues_each_repair_and_leaves_the_rest_alone() {
        let mut state = vec![
            known("SAME", Some(1), false),
            known("DELETED", Some(2), false),
            known("SOLDHERE", Some(3), true),
            known("SOLDTHERE", Some(4), false),
            known("EDITED", Some(5), false),
            known("NOID", None, false),
            known("GONESOLD", Some(7), true),
            known("QUEUED", Some(8), false),
            known("REFUSED", Some(9), false),
            known("MOVING", Some(10), false),
        ];
        state[7].record.queued = 1;
        state[8].record.rejected = Some(Rejection {
            op: "update".into(),
            digest: None,
            status: 422,
            messages: vec![],
            at: 0,
        });
        let mut before: Versions = state
            .iter()
            .map(|k| (k.key.vin.clone(), (1, 5, k.record.queued)))
            .collect();
        before.insert("MOVING".into(), (0, 4, 1));
        let payload = |k: &Known| k.payload.clone().unwrap();
        let mut edited = payload(&state[4]);
        edited.price = Some(Price::Selling(Amount(900.0)));
        let restorable = VehiclePayload::new(10, "S-R", "RESTORE");
        let recreatable = VehiclePayload::new(10, "S-L", "LISTED");
        let service = vec![
            shown(&payload(&state[0]), 1, false),
            shown(&payload(&state[2]), 3, false),
            shown(&payload(&state[3]), 4, true),
            shown(&edited, 5, false),
            shown(&payload(&state[5]), 6, false),
            shown(&payload(&state[7]), 8, true),
            shown(&payload(&state[8]), 9, true),
            shown(&restorable, 20, true),
            shown(&VehiclePayload::new(10, "F", "FOREIGN"), 21, false),
            shown(&VehiclePayload::new(10, "F", "SOLDONLY"), 22, true),
        ];
        let listing = |p: &VehiclePayload, listed_in_stock, in_last_snapshot| Listing {
            payload: p.clone(),
            sold: false,
            listed_in_stock,
            in_last_snapshot,
            file: "day1.csv".into(),
        };
        let archive = HashMap::from([
            ("RESTORE".to_owned(), listing(&restorable, true, true)),
            ("LISTED".to_owned(), listing(&recreatable, true, true)),
            (
                "SOLDONLY".to_owned(),
                listing(&VehiclePayload::new(12, "F", "SOLDONLY"), false, false),
            ),
        ]);
        let c = compare(100, &service, state, &before, &archive);
        let r = &c.repairs;
        assert_eq!(r.recreated, ["DELETED", "LISTED"]);
        assert_eq!(r.sold_fixed, ["SOLDHERE"]);
        assert_eq!(r.in_stock_fixed, ["SOLDTHERE"]);
        assert_eq!(
            r.fields_fixed,
            [FieldDrift {
                vin: "EDITED".into(),
                fields: vec!["price.selling"]
            }]
        );
        assert_eq!(r.ids_learned, ["NOID"]);
        assert_eq!(r.forgotten, ["GONESOLD"]);
        assert_eq!(r.restored, ["RESTORE"]);
        assert_eq!(r.unchanged, 2, "SAME and RESTORE");
        let foreign: Vec<(&str, u64, Option<u64>)> = r
            .foreign
            .iter()
            .map(|f| (f.vin.as_str(), f.id, f.location_id))
            .collect();
        assert_eq!(foreign, [("FOREIGN", 21, None), ("SOLDONLY", 22, Some(12))]);
        assert_eq!(
            r.skipped,
            Skipped {
                queued: 1,
                rejected: 1,
                changed_meanwhile: 1,
                ..Skipped::default()
            }
        );
        let ops: Vec<(&str, &str)> = c
            .ops
            .iter()
            .map(|o| (o.vin.as_str(), o.op.name()))
            .collect();
        assert_eq!(
            ops,
            [
                ("DELETED", "create"),
                ("SOLDHERE", "sold"),
                ("SOLDTHERE", "in_stock"),
                ("EDITED", "update"),
                ("LISTED", "create"),
            ]
        );
        assert!(c.changes["LISTED"].new_record && !c.changes["DELETED"].new_record);
        assert_eq!(
            c.findings,
            [
                Finding::Id {
                    vin: "NOID".into(),
                    service_id: 6
                },
                Finding::Forget {
                    vin: "GONESOLD".into()
                },
                Finding::Restore {
                    vin: "RESTORE".into(),
                    service_id: 20,
                    sold: true,
                    payload: Box::new(restorable),
                    file: "day1.csv".into()
                },
            ]
        );
        let plan = c.plan(100, plan_file("reconcile-x"));
        assert_eq!(plan.feed, RECONCILE_FEED);
        assert_eq!((plan.counts.create, plan.counts.update), (2, 1));
        assert_ne!(plan.file.sha256, plan_file("reconcile-x").sha256);
    }

    #[test]
    fn report_stamps_are_safe_file_names() {
        let at = UNIX_EPOCH + Duration::from_secs(1_795_219_199);
        assert_eq!(file_stamp(at), "2026-11-20T235959Z");
    }
}
