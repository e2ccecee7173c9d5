//! The diff engine: one file's mapped records against the state become the operations that
//! bring the service in line with the file: [`Op::Create`], [`Op::Update`], [`Op::MarkSold`],
//! [`Op::MarkInStock`], and nothing for what did not change.
//!
//! It compares with what the service acknowledged, projected through the operations already
//! in flight (they will land before anything this file queues); a file's plan replaces the
//! pending operations of every vehicle it judges. Payloads are compared by the digest of their
//! normalized form ([`payload_digest`]). A full snapshot judges absence per location and passes
//! the safety guard before anything of it is queued.
//!
//! It owns the rules, not the storage: it reads the state and the outbox, and hands a [`Plan`]
//! to [`crate::outbox`], which commits it. It sends nothing.

mod as_of;
mod drift;
mod export;

pub use as_of::{as_of, AsOf, AsOfSource};
pub use drift::field_drift;
pub use export::{
    diff_file, diff_file_drafted, DiffOptions, FileDiffError, FilePlan, SMALLER_SNAPSHOT,
};
// The plan types live in `crate::plan` (the outbox commits them too); here for the diff's callers.
pub use crate::plan::{
    payload_digest, Counts, FileId, GuardCount, Learned, Op, Plan, PlannedOp, Verdict, VinChange,
};

use crate::api::{Vehicle, VehiclePayload};
use crate::mapper::{Accepted, Rejected};
use crate::outbox::{InFlight, Outbox, OutboxError, Queued};
use crate::state::{Digest, StateError, VehicleRecord};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::MutexGuard;

/// Full snapshot or delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The file lists every vehicle on its lots: absent ones were sold.
    #[default]
    Full,
    /// The file lists only vehicles that changed.
    Delta,
}

/// The rules of one feed, from its config.
#[derive(Debug, Clone)]
pub struct Rules {
    pub organization_id: u64,
    pub feed: String,
    pub mode: Mode,
    /// A vehicle is sold after this many consecutive full snapshots without it.
    pub sold_after_absent: u32,
    /// A full snapshot selling more than this share of a location's vehicles is held.
    pub max_sold_fraction: f64,
    /// The locations a full snapshot of this feed speaks for.
    pub locations: BTreeSet<u64>,
    /// Override the safety guard (`lotsync release`, `--force`).
    pub force: bool,
}

/// The service's own list, read before the first diff of an organization the state knows no
/// vehicle of, so that an empty state never plans blind: vehicles already on the service are
/// adopted (ids learned, nothing sent when the service shows what the file says), and those
/// absent from a full snapshot are sold by the usual rules, guard included.
#[derive(Debug, Clone, Default)]
pub struct Listed {
    /// By VIN (upper-cased), as the service shows them.
    pub vehicles: HashMap<String, Vehicle>,
    /// The one location of the organization, when the config knows only one: the service's
    /// list does not say where a vehicle is, so absent vehicles are judged only then. With
    /// several, a listed vehicle is adopted when a file lists it.
    pub sole_location: Option<u64>,
}

/// The diff cannot be computed.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Outbox(#[from] OutboxError),
}

/// What the service will hold once the operations in flight land.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Base {
    digest: Option<Digest>,
    sold: bool,
}

/// A vehicle the state knows, as the diff sees it.
#[derive(Debug, Clone)]
struct Known {
    location_id: u64,
    record: VehicleRecord,
    /// Its queued operations (only read when the record says it has some).
    queued: Vec<Queued>,
    /// Not in the state: found on the service's list ([`Listed`]).
    adopted: bool,
}

impl Known {
    /// A vehicle of the service's list, as a record the state could have had.
    fn adopted(location_id: u64, vehicle: &Vehicle) -> Known {
        Known {
            location_id,
            record: VehicleRecord {
                service_id: Some(vehicle.id),
                digest: Some(Digest::UNKNOWN),
                sold: vehicle.sold_state().unwrap_or(false),
                ..VehicleRecord::default()
            },
            queued: Vec::new(),
            adopted: true,
        }
    }

    /// What the service's list showed, for the plan to record.
    fn learned(&self, same: Option<&VehiclePayload>) -> Option<Learned> {
        if !self.adopted {
            return None;
        }
        Some(Learned {
            service_id: self.record.service_id?,
            sold: self.record.sold,
            digest: same.map_or(Digest::UNKNOWN, payload_digest),
            payload: same.map(|p| Box::new(p.clone())),
        })
    }

    fn base(&self) -> Base {
        let mut base = Base {
            digest: self.record.digest,
            sold: self.record.sold,
        };
        for q in self.queued.iter().filter(|q| q.in_flight) {
            apply(&mut base, &q.op);
        }
        base
    }

    /// Where the vehicle will be once every queued operation lands.
    fn planned_location(&self) -> u64 {
        self.queued
            .iter()
            .filter_map(|q| q.op.payload().map(|p| p.location_id))
            .next_back()
            .unwrap_or(self.location_id)
    }

    fn pending(&self) -> bool {
        self.queued.iter().any(|q| !q.in_flight)
    }
}

fn apply(base: &mut Base, op: &Op) {
    match op {
        Op::Create(p) | Op::Update(p) => base.digest = Some(payload_digest(p)),
        Op::MarkSold => base.sold = true,
        Op::MarkInStock => base.sold = false,
    }
}

/// Diffs one file. It holds the outbox's in-flight lock from creation to
/// [`Differ::commit`] or [`Differ::finish`], so nothing is taken for sending meanwhile.
pub struct Differ<'o> {
    outbox: &'o Outbox,
    in_flight: MutexGuard<'o, InFlight>,
    rules: Rules,
    file: FileId,
    /// Full mode: the vehicles at the judged locations the file has not listed yet, by VIN
    /// (a listed one is taken out when its record is diffed).
    at_locations: HashMap<String, Known>,
    /// Full mode: per judged location, its in-stock vehicles as the diff began.
    guard: BTreeMap<u64, GuardCount>,
    /// Every VIN the file shows on a lot, accepted or rejected.
    present: HashSet<String>,
    /// Accepted records per location.
    accepted_at: BTreeMap<u64, u64>,
    /// The service's list, for the first diff of an empty state.
    listed: Option<Listed>,
    /// Absence and the guard are judged (once).
    judged: bool,
    plan: Plan,
}

impl<'o> Differ<'o> {
    pub fn new(outbox: &'o Outbox, rules: Rules, file: FileId) -> Result<Differ<'o>, DiffError> {
        Differ::with_listed(outbox, rules, file, None)
    }

    /// A diff that also knows the service's own list (the first file of an empty state).
    pub fn with_listed(
        outbox: &'o Outbox,
        rules: Rules,
        file: FileId,
        listed: Option<Listed>,
    ) -> Result<Differ<'o>, DiffError> {
        let in_flight = outbox.lock();
        let mut at_locations: HashMap<String, Known> = HashMap::new();
        let mut guard: BTreeMap<u64, GuardCount> = BTreeMap::new();
        if rules.mode == Mode::Full {
            for &location_id in &rules.locations {
                let records = outbox
                    .state()
                    .location_vehicles(rules.organization_id, location_id)?;
                for (vin, record) in records {
                    let queued = if record.queued > 0 {
                        outbox.queued_ops(rules.organization_id, &vin, &in_flight)?
                    } else {
                        Vec::new()
                    };
                    let known = Known {
                        location_id,
                        record,
                        queued,
                        adopted: false,
                    };
                    let base = known.base();
                    let g = guard.entry(location_id).or_default();
                    if base.digest.is_some() && !base.sold {
                        g.in_stock += 1;
                    }
                    at_locations.insert(vin, known);
                }
                guard.entry(location_id).or_default();
                // The service's vehicles the state does not know are on this lot when it is the
                // organization's only one: judged like the state's own.
                let sole = listed
                    .as_ref()
                    .filter(|l| l.sole_location == Some(location_id));
                for (vin, vehicle) in sole.iter().flat_map(|l| &l.vehicles) {
                    if at_locations.contains_key(vin)
                        || outbox
                            .state()
                            .find_vin(rules.organization_id, vin)?
                            .is_some()
                    {
                        continue;
                    }
                    let known = Known::adopted(location_id, vehicle);
                    if !known.record.sold {
                        guard.entry(location_id).or_default().in_stock += 1;
                    }
                    at_locations.insert(vin.clone(), known);
                }
            }
        }
        let mut plan = Plan::new(rules.organization_id, &rules.feed, file.clone());
        if let Some(last) = outbox
            .state()
            .feed(&rules.feed)?
            .and_then(|f| f.last_applied)
        {
            if last.sha256 == file.sha256 {
                plan.verdict = Verdict::AlreadyApplied {
                    same_as: last.name,
                    at: last.at,
                };
            }
        }
        Ok(Differ {
            outbox,
            in_flight,
            rules,
            file,
            at_locations,
            guard,
            present: HashSet::new(),
            accepted_at: BTreeMap::new(),
            listed,
            judged: false,
            plan,
        })
    }

    /// A full snapshot's as-of time, recorded for its locations when its plan applies. With
    /// `newer` (a snapshot applied already for one of them, newer than this one), the plan is
    /// superseded: nothing of it is judged or queued, and its records need not be read.
    pub fn as_of(&mut self, as_of: i64, newer: Option<crate::state::SnapshotMark>) {
        self.plan.snapshot = Some(crate::plan::Snapshot {
            as_of,
            locations: self.rules.locations.iter().copied().collect(),
        });
        if let (Some(newer), false) = (newer, self.already_applied()) {
            self.plan.verdict = Verdict::Superseded {
                newer: newer.name,
                newer_as_of: newer.as_of,
                as_of,
            };
            self.judged = true;
        }
    }

    /// Whether the file is older than a snapshot applied already ([`Differ::as_of`]).
    pub fn superseded(&self) -> bool {
        matches!(self.plan.verdict, Verdict::Superseded { .. })
    }

    /// Records diffed so far (accepted and rejected).
    pub fn records(&self) -> u64 {
        self.plan.records
    }

    /// The file has the same content as the one last applied for its feed: its records need
    /// not be read, the plan is empty.
    pub fn already_applied(&self) -> bool {
        matches!(self.plan.verdict, Verdict::AlreadyApplied { .. })
    }

    /// The vehicle as the state (or the service's list) knows it; `location_id` is where the
    /// file puts it, used for a vehicle only the list knows.
    fn known(&mut self, vin: &str, location_id: u64) -> Result<Option<Known>, DiffError> {
        if let Some(k) = self.at_locations.remove(vin) {
            return Ok(Some(k));
        }
        let org = self.rules.organization_id;
        let Some((key, record)) = self.outbox.state().find_vin(org, vin)? else {
            let listed = self.listed.as_ref().and_then(|l| l.vehicles.get(vin));
            return Ok(listed.map(|v| Known::adopted(location_id, v)));
        };
        let queued = if record.queued > 0 {
            self.outbox.queued_ops(org, vin, &self.in_flight)?
        } else {
            Vec::new()
        };
        Ok(Some(Known {
            location_id: key.location_id,
            record,
            queued,
            adopted: false,
        }))
    }

    /// A record the mapper accepted.
    pub fn accepted(&mut self, accepted: &Accepted) -> Result<(), DiffError> {
        if self.already_applied() {
            return Ok(());
        }
        let &Accepted {
            ref payload, sold, ..
        } = accepted;
        let vin = payload.vin.clone();
        let location_id = payload.location_id;
        self.plan.records += 1;
        *self.accepted_at.entry(location_id).or_default() += 1;
        self.present.insert(vin.clone());
        let known = self.known(&vin, location_id)?;
        let Some(mut known) = known else {
            if sold == Some(true) {
                self.plan.counts.skipped_sold += 1;
            } else {
                self.plan
                    .push(location_id, &vin, Op::Create(payload.clone()), true);
            }
            return Ok(());
        };
        if known.adopted {
            // What the service shows already matches the file: nothing to send, and the
            // payload counts as acknowledged.
            let same = self
                .listed
                .as_ref()
                .and_then(|l| l.vehicles.get(&vin))
                .is_some_and(|v| field_drift(v, payload).is_empty());
            let learned = known.learned(same.then_some(payload));
            known.record.digest = learned.as_ref().map(|l| l.digest);
            self.plan.counts.adopted += 1;
            self.plan.change(&vin, known.location_id).learned = learned;
        }
        let change = self.plan.change(&vin, known.location_id);
        if known.pending() {
            change.supersede = true;
        }
        if known.record.absent > 0 {
            change.absent = Some(0);
        }
        let digest = payload_digest(payload);
        if let Some(r) = &known.record.rejected {
            if r.digest == Some(digest) {
                self.plan.counts.still_rejected += 1;
                return Ok(());
            }
        }
        let base = known.base();
        let Some(base_digest) = base.digest else {
            // Queued as a create that has not gone out, or refused: this file's version
            // replaces it.
            if sold == Some(true) {
                change.drop_stub = true;
                self.plan.counts.skipped_sold += 1;
            } else {
                self.plan
                    .push(location_id, &vin, Op::Create(payload.clone()), false);
            }
            return Ok(());
        };
        let want_sold = sold.unwrap_or(false);
        let mut changed = false;
        if digest != base_digest {
            self.plan
                .push(location_id, &vin, Op::Update(payload.clone()), false);
            changed = true;
        }
        if want_sold != base.sold {
            let op = if want_sold {
                Op::MarkSold
            } else {
                Op::MarkInStock
            };
            self.plan.push(known.location_id, &vin, op, false);
            changed = true;
        }
        if !changed {
            self.plan.counts.unchanged += 1;
        }
        Ok(())
    }

    /// A record the mapper rejected: its VIN, when readable, still shows the vehicle is on the
    /// lot, so it is not judged absent; nothing else changes for it.
    pub fn rejected(&mut self, rejected: &Rejected) {
        if self.already_applied() {
            return;
        }
        self.plan.counts.rejected_records += 1;
        self.plan.records += 1;
        if let Some(vin) = &rejected.vin {
            self.present.insert(vin.clone());
        }
        if let Some(loc) = rejected.location_id {
            self.accepted_at.entry(loc).or_default();
        }
    }

    /// Judges absence and the guard, and returns the plan. Nothing is written.
    pub fn finish(mut self) -> Plan {
        self.judge();
        self.plan
    }

    /// Finishes and commits the plan to the outbox (unless it is held or already applied),
    /// under the same lock, and makes it durable.
    pub fn commit(mut self) -> Result<Plan, DiffError> {
        self.judge();
        let Differ {
            outbox,
            in_flight,
            mut plan,
            ..
        } = self;
        plan.file_no = Some(outbox.commit(&plan, &in_flight)?);
        // The markers count every vehicle: not while the uploader waits for the lock.
        drop(in_flight);
        outbox.state().write_markers();
        Ok(plan)
    }

    /// Judges absence and the guard (once) and shows the plan as it would be committed.
    pub fn judge(&mut self) -> &Plan {
        if !self.judged {
            self.judged = true;
            self.judge_absence();
        }
        &self.plan
    }

    fn judge_absence(&mut self) {
        if self.already_applied() {
            return;
        }
        if self.rules.mode != Mode::Full {
            self.plan.verdict = Verdict::Apply {
                forced: self.rules.force,
            };
            return;
        }
        let mut absent: Vec<(&String, &Known)> = self
            .at_locations
            .iter()
            .filter(|(vin, _)| !self.present.contains(*vin))
            .collect();
        absent.sort_by(|a, b| a.0.cmp(b.0));
        let mut guard = std::mem::take(&mut self.guard);
        for (vin, known) in absent {
            if known.planned_location() != known.location_id {
                continue; // on its way to another lot: that lot's file judges it
            }
            let base = known.base();
            if known.adopted {
                self.plan.counts.adopted += 1;
                self.plan.change(vin, known.location_id).learned = known.learned(None);
            }
            let change = self.plan.change(vin, known.location_id);
            if known.pending() {
                change.supersede = true;
            }
            if base.digest.is_none() {
                change.drop_stub = true; // never created: nothing to sell
                continue;
            }
            if base.sold {
                continue;
            }
            let absent = known.record.absent.saturating_add(1);
            change.absent = Some(absent);
            if absent >= self.rules.sold_after_absent.max(1) {
                self.plan.push(known.location_id, vin, Op::MarkSold, false);
                if let Some(g) = guard.get_mut(&known.location_id) {
                    g.would_sell += 1;
                }
            } else {
                self.plan.counts.absent_waiting += 1;
            }
        }
        let mut reasons = Vec::new();
        for (&location_id, g) in &mut guard {
            g.accepted = self.accepted_at.get(&location_id).copied().unwrap_or(0);
            if g.in_stock == 0 {
                continue;
            }
            let share = g.would_sell as f64 / g.in_stock as f64;
            if g.accepted == 0 {
                reasons.push(format!(
                    "location {location_id}: the file has no vehicle for it, and it has {} in stock",
                    g.in_stock
                ));
            } else if share > self.rules.max_sold_fraction {
                reasons.push(format!(
                    "location {location_id}: would mark {} of {} in-stock vehicles sold ({:.0}%, \
                     more than max_sold_fraction {:.0}%)",
                    g.would_sell,
                    g.in_stock,
                    share * 100.0,
                    self.rules.max_sold_fraction * 100.0
                ));
            }
        }
        self.plan.guard = guard.into_iter().collect();
        self.plan.verdict = if reasons.is_empty() || self.rules.force {
            Verdict::Apply {
                forced: !reasons.is_empty(),
            }
        } else {
            Verdict::Held { reasons }
        };
        if let Verdict::Apply { forced: true } = self.plan.verdict {
            tracing::warn!(file = %crate::text::Escaped(&self.file.name), "the safety guard was overridden");
        }
    }
}
