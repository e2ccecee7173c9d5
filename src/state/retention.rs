//! What the state lets go of with time, so that it stops growing on a lot that turns over:
//! sold vehicles not touched for `[state] keep_sold_days` (their records, payloads and VIN
//! index), history events, planned files' records and notifications older than
//! `[state] keep_history_days`. Done a small batch per transaction (the writer's lock is
//! never held long), then the freed pages are given back to the file system
//! (`PRAGMA incremental_vacuum`).
//!
//! It owns what is old enough to go, not when pruning runs (the outbox after each plan, the
//! daemon on its timer) nor what a vehicle's record means.

use super::history::{Event, What};
use super::{State, StateError};
use rusqlite::params;

/// Rows let go per transaction.
const BATCH: i64 = 500;
/// Batches per call at most: a state that fell far behind catches up over several calls.
const BATCHES_PER_CALL: usize = 40;
const DAY: i64 = 24 * 3600;

/// How long the state keeps what it no longer needs (`[state] keep_sold_days`,
/// `keep_history_days`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// A sold vehicle with nothing queued is forgotten this many days after its record last
    /// changed. A car that comes back after that is created again (the service's create
    /// modifies the vehicle it has under that VIN).
    pub keep_sold_days: u32,
    /// History events (`lotsync why`), records of planned files and sent notifications are
    /// kept this many days.
    pub keep_history_days: u32,
}

/// More than a year of `lotsync why`, and a sold car remembered as long.
pub const DEFAULT_KEEP_DAYS: u32 = 400;

impl Default for Retention {
    fn default() -> Self {
        Retention {
            keep_sold_days: DEFAULT_KEEP_DAYS,
            keep_history_days: DEFAULT_KEEP_DAYS,
        }
    }
}

/// What one call let go of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub vehicles: u64,
    pub events: u64,
    pub files: u64,
    pub notices: u64,
    /// Pages given back to the file system.
    pub pages: u64,
}

impl Pruned {
    pub fn is_empty(&self) -> bool {
        *self == Pruned::default()
    }
}

impl State {
    /// Lets go of what the state's retention no longer keeps at `now` (Unix seconds), a batch
    /// per transaction, and gives the freed pages back. A reader prunes nothing.
    pub fn prune(&self, now: i64) -> Result<Pruned, StateError> {
        let retention = self.retention;
        let mut pruned = Pruned::default();
        if self.writer.is_none() {
            return Ok(pruned);
        }
        for _ in 0..BATCHES_PER_CALL {
            let batch = self.prune_batch(retention, now)?;
            if batch.is_empty() {
                break;
            }
            pruned.vehicles += batch.vehicles;
            pruned.events += batch.events;
            pruned.files += batch.files;
            pruned.notices += batch.notices;
        }
        if !pruned.is_empty() {
            let conn = self.writer("pruning")?;
            let free: i64 = conn.pragma_query_value(None, "freelist_count", |r| r.get(0))?;
            conn.execute_batch("PRAGMA incremental_vacuum")?;
            pruned.pages = u64::try_from(free).unwrap_or(0);
            tracing::info!(
                vehicles = pruned.vehicles,
                events = pruned.events,
                files = pruned.files,
                notices = pruned.notices,
                pages = pruned.pages,
                "let go of what the state no longer keeps"
            );
        }
        Ok(pruned)
    }

    /// One transaction of at most [`BATCH`] rows of each kind.
    fn prune_batch(&self, retention: Retention, now: i64) -> Result<Pruned, StateError> {
        let keep_sold_days = retention.keep_sold_days;
        let sold_before = now.saturating_sub(i64::from(keep_sold_days) * DAY);
        let kept_from = now.saturating_sub(i64::from(retention.keep_history_days) * DAY);
        self.transaction(|tx| -> Result<Pruned, StateError> {
            let conn = tx.conn();
            // Sold, nothing queued, unchanged since before `sold_before`; its VIN's index only
            // when it points here (a car sold at one lot may be listed at another since).
            let gone: Vec<(u64, u64, String)> = {
                let mut stmt = conn.prepare_cached(
                    "SELECT organization_id, location_id, vin FROM vehicles
                     WHERE sold = 1 AND updated_at < ?1
                       AND coalesce(json_extract(record, '$.queued'), 0) = 0
                     LIMIT ?2",
                )?;
                let rows = stmt.query_map(params![sold_before, BATCH], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?;
                rows.collect::<Result<_, _>>()?
            };
            for (org, location, vin) in &gone {
                tx.remove_vehicle(*org, *location, vin)?;
                if tx.location_of(*org, vin)? == Some(*location) {
                    tx.unindex_vin(*org, vin)?;
                }
                // `lotsync why` says where it went, for as long as the history is kept.
                let expired = Event::new(now, None, What::Expired { days: keep_sold_days });
                tx.append_history(*org, vin, vec![expired], now)?;
            }
            let events = conn
                .prepare_cached(
                    "DELETE FROM history WHERE (organization_id, vin, at, tag, idx) IN
                     (SELECT organization_id, vin, at, tag, idx FROM history WHERE at < ?1 LIMIT ?2)",
                )?
                .execute(params![kept_from, BATCH])?;
            // A file's record goes with its answers' counts, once none of its operations is
            // queued and it is not held (`lotsync release` still needs that one).
            let files: Vec<i64> = {
                let mut stmt = conn.prepare_cached(
                    "SELECT file_no FROM files
                     WHERE seen_at < ?1 AND outcome <> 'held'
                       AND NOT EXISTS (SELECT 1 FROM outbox
                                       WHERE json_extract(outbox.entry, '$.file_no') = files.file_no)
                     LIMIT ?2",
                )?;
                let rows = stmt.query_map(params![kept_from, BATCH], |r| r.get(0))?;
                rows.collect::<Result<_, _>>()?
            };
            for file_no in &files {
                conn.prepare_cached("DELETE FROM files WHERE file_no = ?1")?
                    .execute([file_no])?;
                conn.prepare_cached("DELETE FROM delivered WHERE file_no = ?1")?
                    .execute([file_no])?;
            }
            let notices = conn
                .prepare_cached(
                    "DELETE FROM notices WHERE key IN
                     (SELECT key FROM notices WHERE claimed_at < ?1 LIMIT ?2)",
                )?
                .execute(params![kept_from, BATCH])?;
            Ok(Pruned {
                vehicles: gone.len() as u64,
                events: events as u64,
                files: files.len() as u64,
                notices: notices as u64,
                pages: 0,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{StateTx, VehicleRecord};

    /// A sold vehicle whose record last changed at `at`, with one history event then.
    fn sold_at(tx: &StateTx<'_>, vin: &str, at: i64) -> Result<(), StateError> {
        let record = VehicleRecord {
            sold: true,
            digest: Some(crate::plan::Digest::of(vin.as_bytes())),
            updated_at: at,
            ..VehicleRecord::default()
        };
        tx.put_vehicle(7, 3, vin, &record)?;
        tx.put_payload(7, 3, vin, &crate::api::VehiclePayload::new(3, "S", vin))?;
        tx.index_vin(7, vin, 3)?;
        tx.append_history(7, vin, vec![Event::new(at, None, What::Forgotten)], at)
    }

    /// On a simulated clock: vehicles sold every day for three years, pruned daily with
    /// a retention of 30 days; the state stops growing once the first are 30 days old, and
    /// what it keeps is exactly the last 30 days' worth.
    #[test]
    fn with_retention_the_state_stops_growing() {
        let dir = crate::testing::temp_dir("retention");
        let opening = crate::state::Opening {
            retention: Retention {
                keep_sold_days: 30,
                keep_history_days: 30,
            },
            ..crate::state::Opening::default()
        };
        let state = State::open_with(dir.path(), &opening).unwrap();
        let start = 1_700_000_000;
        let mut counts = Vec::new();
        for day in 0..3 * 365 {
            let now = start + day * DAY;
            state
                .transaction(|tx| -> Result<(), StateError> {
                    for car in 0..20 {
                        sold_at(tx, &format!("VIN{day:04}X{car:02}"), now)?;
                    }
                    Ok(())
                })
                .unwrap();
            state.prune(now).unwrap();
            counts.push((state.vehicle_count(), state.history_count()));
        }
        // Day 31 on: 31 days of 20 cars (the day's own and the 30 before it), and the
        // history of 31 days: each car's sale, and the expiry of those let go since.
        for (day, &(vehicles, events)) in counts.iter().enumerate().skip(62) {
            assert_eq!((vehicles, events), (31 * 20, 31 * 20 * 2), "day {day}");
        }
        assert_eq!(
            state.organization_vins(7).unwrap().len(),
            31 * 20,
            "the VIN index goes with them"
        );
        assert!(state
            .find_vin(7, &format!("VIN{:04}X00", 3 * 365 - 1))
            .unwrap()
            .is_some());
        assert!(state.find_vin(7, "VIN0000X00").unwrap().is_none());
    }

    /// A sold vehicle with an operation still queued, and one in stock, are kept however old.
    #[test]
    fn only_sold_vehicles_with_nothing_queued_are_forgotten() {
        let dir = crate::testing::temp_dir("retention");
        let state = State::open(dir.path()).unwrap();
        state
            .transaction(|tx| -> Result<(), StateError> {
                sold_at(tx, "SOLD", 0)?;
                sold_at(tx, "QUEUED", 0)?;
                let mut queued = tx.vehicle(7, 3, "QUEUED")?.unwrap_or_default();
                queued.queued = 1;
                tx.put_vehicle(7, 3, "QUEUED", &queued)?;
                sold_at(tx, "INSTOCK", 0)?;
                let mut in_stock = tx.vehicle(7, 3, "INSTOCK")?.unwrap_or_default();
                in_stock.sold = false;
                tx.put_vehicle(7, 3, "INSTOCK", &in_stock)
            })
            .unwrap();
        let pruned = state.prune(1_800_000_000).unwrap();
        assert_eq!((pruned.vehicles, pruned.events), (1, 3));
        let told = state.history(7, "SOLD").unwrap();
        assert_eq!(told.len(), 1, "only the expiry is left of its history");
        assert_eq!(told[0].what, What::Expired { days: 400 });
        let mut left: Vec<String> = state.organization_vins(7).unwrap().into_keys().collect();
        left.sort();
        assert_eq!(left, ["INSTOCK", "QUEUED"]);
    }
}
