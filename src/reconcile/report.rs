//! The report a reconciliation leaves in `<state dir>/reports/`: what it found and queued, by
//! kind ([`ReconcileReport`]), its one-line summary, and one event per vehicle in the log.
//!
//! It says what was found; finding it is [`super::compare`]'s. The CLI prints it, and the daemon
//! keeps its summary for `lotsync status`.

use super::ReconcileError;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The suffix of a report's name (`reconcile-<stamp>.report.json`).
const REPORT_SUFFIX: &str = ".report.json";

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
    /// Pages of the service's list answered (each once in the normal case; more when the list
    /// changed while it was read, see `pages_read_again`).
    pub pages: usize,
    /// Of those, pages read again because the list changed while it was read (said in
    /// `notes`).
    pub pages_read_again: usize,
    /// Requests for a page that failed for a passing reason (429, 5xx, a dropped connection)
    /// and were sent again, each for that page alone.
    pub retries: usize,
    /// From the start of the run to its report, in seconds.
    pub seconds: f64,
    /// What is worth knowing besides (the list changed while read, unreadable archive files,
    /// duplicate VINs, …).
    pub notes: Vec<String>,
    /// Where the report was written.
    #[serde(skip)]
    pub path: PathBuf,
}

impl ReconcileReport {
    /// What it found and queued, a line each, for people: the list read, what was restored
    /// (a rebuild), the repairs queued with the VIN of each vehicle whose fields were edited
    /// on the service, what needed no request, what was skipped and left alone, its notes.
    /// The CLI prints them under its own header, and the daemon answers `lotsync reconcile`
    /// with them, so that both say the same; each then names the report's file.
    pub fn findings(&self) -> Vec<String> {
        let c = &self.counts;
        let mut lines = Vec::new();
        lines.push(format!(
            "  the service's list: {}{}, {} retried",
            plural(self.pages, "page"),
            if self.pages_read_again > 0 {
                format!(
                    " ({} read again: it changed meanwhile)",
                    self.pages_read_again
                )
            } else {
                String::new()
            },
            plural(self.retries, "request")
        ));
        if self.rebuild {
            lines.push(format!(
                "  restored {} from the service and {}",
                plural(c.restored, "vehicle"),
                plural(self.archived_files_read, "archived export")
            ));
            for f in &self.feeds_restored {
                lines.push(format!(
                    "  feed {}: last applied file {} (dropping it again sends nothing)",
                    f.feed, f.file
                ));
            }
        }
        if self.operations == 0 {
            lines.push("  nothing to repair".to_owned());
        } else {
            lines.push(format!(
                "  queued: {} re-created, {} marked sold again, {} back in stock, {} re-sent (fields edited on the service)",
                c.recreated, c.sold_fixed, c.in_stock_fixed, c.fields_fixed
            ));
        }
        for f in &self.fields_fixed {
            lines.push(format!("    VIN {}: {}", f.vin, f.fields.join(", ")));
        }
        if !self.rebuild {
            lines.push(format!(
                "  without a request: {} learned, {} restored from the archive, {} gone from the service forgotten",
                plural(c.ids_learned, "id"),
                plural(c.restored, "record"),
                plural(c.forgotten, "sold vehicle")
            ));
        }
        let s = &self.skipped;
        if s.total() > 0 {
            lines.push(format!(
                "  skipped: {} with operations still queued, {} refused by the service, {} changed while listed, {} other; the queue or the next run settles them",
                s.queued,
                s.rejected,
                s.changed_meanwhile,
                s.not_created + s.no_payload + s.duplicate_on_service
            ));
        }
        if !self.foreign.is_empty() {
            lines.push(format!(
                "  left alone: {} lotsync did not create:",
                plural(self.foreign.len(), "vehicle")
            ));
            for f in &self.foreign {
                let location = f
                    .location_id
                    .map_or_else(|| "-".to_owned(), |l| l.to_string());
                lines.push(format!(
                    "    VIN {:<17} id {:>8}  location {location}",
                    if f.vin.is_empty() { "(none)" } else { &f.vin },
                    f.id
                ));
            }
        }
        for note in &self.notes {
            lines.push(format!("  note: {note}"));
        }
        lines
    }

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

/// One event per vehicle repaired or left alone.
pub(super) fn log_repairs(report: &ReconcileReport) {
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

/// When the newest reconciliation whose report is in `dir` started: the last one that
/// succeeded, since a report is written only once the service's list was read and compared
/// (its stamp is in its name: nothing is read but the folder). None without one.
pub fn last_succeeded(dir: &Path) -> Option<crate::clock::UtcTime> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let stamp = name
                .to_str()?
                .strip_prefix("reconcile-")?
                .strip_suffix(REPORT_SUFFIX)?
                .get(..18)?
                .to_owned();
            parse_stamp(&stamp)
        })
        .max()
}

/// The time a [`file_stamp`] names.
fn parse_stamp(stamp: &str) -> Option<crate::clock::UtcTime> {
    let (day, time) = stamp.strip_suffix('Z')?.split_once('T')?;
    let (h, rest) = time.split_at_checked(2)?;
    let (m, s) = rest.split_at_checked(2)?;
    crate::clock::UtcTime::parse(&format!("{day} {h}:{m}:{s}"))
}

/// `2026-11-21T020000Z`: sortable, and safe in any file system's names.
pub(super) fn file_stamp(at: SystemTime) -> String {
    let stamp = crate::clock::utc_datetime(at);
    let (day, time) = stamp.split_once(' ').unwrap_or((&stamp, ""));
    format!("{day}T{}Z", time.replace(':', ""))
}

/// Writes the report as `reconcile-<stamp>.report.json` (never over another one).
pub(super) fn write_report(
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

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn report_stamps_are_safe_file_names() {
        let at = UNIX_EPOCH + Duration::from_secs(1_795_219_199);
        assert_eq!(file_stamp(at), "2026-11-20T235959Z");
        assert_eq!(
            parse_stamp("2026-11-20T235959Z"),
            Some(crate::clock::UtcTime::at(at))
        );
    }

    #[test]
    fn the_last_success_is_the_newest_report() {
        let dir = crate::testing::temp_dir("reconcile-reports");
        assert_eq!(last_succeeded(dir.path()), None);
        let report = |name: &str| std::fs::write(dir.path().join(name), "{}").unwrap();
        report("reconcile-2026-11-19T020000Z.report.json");
        report("reconcile-2026-11-21T020001Z-2.report.json");
        report("reconcile-2026-11-20T020000Z.report.json");
        report("notes.txt");
        let at = UNIX_EPOCH + Duration::from_secs(1_795_219_199 + 2 * 3600 + 2);
        assert_eq!(
            last_succeeded(dir.path()),
            Some(crate::clock::UtcTime::at(at))
        );
    }
}
