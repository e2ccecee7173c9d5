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
//! Records of one vehicle are merged before they are judged: a record that says sold waits for
//! the end of the file, and is a sale only when no other record lists the vehicle on the lot
//! (accepted or rejected); a rejected record that says sold is a sale of its VIN's vehicle.
//!
//! Only a feed's own full snapshot sells by absence, and only the vehicles it owns: a
//! vehicle's owner is the feed whose file created it or last listed it
//! ([`VehicleRecord::owner`]). A vehicle known only from the service's list ([`Listed`]), or
//! owned by another feed, is never sold by a snapshot that leaves it out: it is counted as not
//! owned ([`Counts::not_owned`]). A vehicle two feeds of one location list is a conflict
//! ([`Counts::shared`]): owned by the last to list it, shared with the other, and not sold
//! while either lists it (its owner leaving it out hands it to the other). A record from
//! before owners were kept that lotsync created or listed belongs to the feed that planned
//! its file ([`Owners`]).
//!
//! Absence is judged on the safe side ([`Protection`]): a record the mapper rejected keeps on
//! the lot the vehicle it stands for (its VIN, its stock number at its location unless the
//! record's VIN names another car, or a known VIN one typo away; every one when it matches
//! several), as if it listed it (its absences in a
//! row start again), and a vehicle that the latest full
//! snapshot of another location of the organization lists is moved there, not sold. Each
//! applied full snapshot leaves its listing per location in the state for that, with the end
//! of its order: a snapshot whose would-be sales are that whole end (two or more), and which
//! ends just before them, looks cut short after a whole record and is held
//! (`Differ::cut_short`). A feed the config moved to another location still judges the
//! vehicles it owns where it spoke before.
//!
//! It owns the rules, not the storage: it reads the state and the outbox, and hands a [`Plan`]
//! to [`crate::outbox`], which commits it. It sends nothing.

mod as_of;
mod drift;
mod export;

pub use as_of::{as_of, AsOf};
pub use drift::field_drift;
pub use export::{
    diff_file, diff_file_drafted, DiffOptions, FileDiffError, FilePlan, SMALLER_SNAPSHOT,
};
// The plan types live in `crate::plan` (the outbox commits them too); here for the diff's callers.
pub use crate::plan::{
    payload_digest, Counts, FileId, GuardCount, Learned, Op, Ownership, Plan, PlannedOp,
    ProtectedBy, Protection, Verdict, VinChange,
};

use crate::api::{Vehicle, VehiclePayload};
use crate::mapper::{Accepted, Rejected};
use crate::outbox::{Outbox, OutboxError, Planning, Queued};
use crate::state::{Digest, StateError, VehicleRecord};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

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
    /// The config's other feeds that speak for one of these locations (new cars from one
    /// export, used from another): a vehicle of the lot one of them owns is shared, not taken.
    pub sibling_feeds: BTreeSet<String>,
    /// Override the safety guard (`lotsync release`, `--force`).
    pub force: bool,
}

/// The service's own list, read before a feed's first diff and its first at a location the
/// state knows no vehicle at, so that a state never plans blind where it knows nothing:
/// vehicles already on the service are adopted when the file lists them (ids learned, nothing sent when the service shows what
/// the file says; the feed owns them from then on). Those the file leaves out are not owned:
/// never sold by its absence, only counted ([`Counts::not_owned`]).
#[derive(Debug, Clone, Default)]
pub struct Listed {
    /// By VIN (upper-cased), as the service shows them.
    pub vehicles: HashMap<String, Vehicle>,
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
    /// The feed that owns it as this feed judges it ([`Owners::of`]); None: not owned.
    owner: Option<String>,
    /// Another feed of its location that lists it too.
    shared: Option<String>,
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
            owner: None,
            shared: None,
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

/// Diffs one file. It holds the outbox's [`Planning`] from creation to [`Differ::commit`] or
/// [`Differ::finish`]: one plan at a time, and the pending operations of the vehicles it read
/// are not taken for sending meanwhile (the others are).
pub struct Differ<'o> {
    outbox: &'o Outbox,
    planning: Planning<'o>,
    rules: Rules,
    file: FileId,
    /// Full mode: the vehicles at the judged locations the file has not listed yet, by VIN
    /// (a listed one is taken out when its record is diffed).
    /// By VIN; foldhash, as the mapper's tables: a lot's every vehicle is hashed on each plan.
    at_locations: foldhash::HashMap<String, Known>,
    /// Full mode: per judged location, its in-stock vehicles as the diff began.
    guard: BTreeMap<u64, GuardCount>,
    /// Every VIN the file's accepted records show: Some(location) on a lot, None when the
    /// export says sold.
    present: HashMap<String, Option<u64>>,
    /// A file applied before the last one with this file's content: held, unless forced.
    applied_before: Option<crate::state::AppliedFile>,
    /// Records that say sold, by VIN, judged once the file is read (unless another record
    /// lists the vehicle on the lot meanwhile).
    said_sold: HashMap<String, SaidSold>,
    /// The VINs of rejected records that list their vehicle on the lot.
    kept_by_rejected: HashSet<String>,
    /// Full mode: rejected records that still say which vehicle they stand for.
    marks: Vec<Mark>,
    /// The known vehicles the marks stand for (once judged).
    mark_vins: Vec<MarkMatch>,
    /// The state could not be read while judging: the plan is not committed.
    read_error: Option<DiffError>,
    /// Accepted records per location.
    accepted_at: BTreeMap<u64, u64>,
    /// Vehicles in stock at a location this feed does not speak for that the file moves to
    /// one of its own, by that other location ([`Differ::judge_moves`]).
    moved_in: BTreeMap<u64, u64>,
    /// Delta mode: per location and feed, the in-stock vehicles that feed owns there that
    /// the file lists too, at that location or moving them to its own
    /// ([`Differ::delta_takeovers`]).
    taken_from: BTreeMap<(u64, String), u64>,
    /// Full mode: per location, the last VINs listed there, in the file's order.
    tails: BTreeMap<u64, std::collections::VecDeque<String>>,
    /// Full mode: the locations the feed listed before and no longer speaks for (the config
    /// moved it); the vehicles it still owns there are judged with the others.
    left_behind: Vec<u64>,
    /// The service's list, for the first diff of an empty state.
    listed: Option<Listed>,
    /// Who owns the records from before owners were kept.
    owners: Owners,
    /// Absence and the guard are judged (once).
    judged: bool,
    plan: Plan,
}

impl<'o> Differ<'o> {
    /// The columns this file bound by their values, stored with the feed when the plan is
    /// committed (its next file keeps them while they fit).
    pub fn keep_columns(&mut self, columns: crate::mapper::KeptColumns) {
        self.plan.columns = Some(columns);
    }

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
        let mut planning = outbox.planning();
        let mut owners = Owners::default();
        let mut plan = Plan::new(rules.organization_id, &rules.feed, file.clone());
        let feed = outbox.state().feed(&rules.feed)?.unwrap_or_default();
        let applied_before = feed.applied_before(&file.sha256).cloned();
        // A config that moved the feed: a location it never listed, and one it listed that it
        // no longer speaks for. Its vehicles left there are judged with the others (a car sold
        // while its lot changed ids is still sold), by this file and, through the empty
        // listing it leaves there, by the next ones. A location merely dropped from the config
        // is left alone: its cars are no longer this feed's to judge.
        let mut left_behind = Vec::new();
        let mut moved = false;
        if rules.mode == Mode::Full {
            let listed = (outbox.state()).feed_listings(rules.organization_id, &rules.feed)?;
            let new_here = (rules.locations.iter()).any(|l| !listed.iter().any(|(at, _)| at == l));
            let gone = listed
                .into_iter()
                .filter(|(l, _)| !rules.locations.contains(l));
            let gone: Vec<(u64, bool)> = gone.collect();
            moved = new_here && !gone.is_empty();
            left_behind = (gone.into_iter())
                .filter(|&(_, empty)| moved || empty)
                .map(|(l, _)| l)
                .collect();
        }
        // The same bytes as the last applied file, under a config that has just moved the
        // feed, say something new: its cars are at the new location now. Not a re-drop.
        if let Some(last) = feed.last_applied.filter(|_| !moved) {
            if last.sha256 == file.sha256 {
                plan.verdict = Verdict::AlreadyApplied {
                    same_as: last.name,
                    at: last.at,
                };
            }
        }
        let mut at_locations: foldhash::HashMap<String, Known> = Default::default();
        let mut guard: BTreeMap<u64, GuardCount> = BTreeMap::new();
        // A re-drop of the last applied file judges nothing: its lot is not read.
        let redrop = matches!(plan.verdict, Verdict::AlreadyApplied { .. });
        if rules.mode == Mode::Full && !redrop {
            // The vehicles the feed still owns where it spoke before the config moved it are
            // judged too (a car sold while its lot changed ids is still sold).
            for &location_id in rules.locations.iter().chain(&left_behind) {
                let speaks_for = rules.locations.contains(&location_id);
                let records = outbox
                    .state()
                    .location_vehicles(rules.organization_id, location_id)?;
                at_locations.reserve(records.len());
                for (vin, record) in records {
                    let known = if record.queued > 0 {
                        // Read again with its queue, at one instant: an answer may have
                        // landed meanwhile.
                        let read = planning.vehicle(rules.organization_id, &vin)?;
                        let Some((key, record, queued)) = read else {
                            continue;
                        };
                        if key.location_id != location_id {
                            continue; // moved to another lot by that answer: not judged here
                        }
                        let Ownership { owner, shared } =
                            owners.of(outbox.state(), &rules, location_id, &record)?;
                        Known {
                            location_id,
                            record,
                            queued,
                            adopted: false,
                            owner,
                            shared,
                        }
                    } else {
                        let Ownership { owner, shared } =
                            owners.of(outbox.state(), &rules, location_id, &record)?;
                        Known {
                            location_id,
                            record,
                            queued: Vec::new(),
                            adopted: false,
                            owner,
                            shared,
                        }
                    };
                    let base = known.base();
                    // The guard weighs what this snapshot may sell: the feed's own vehicles.
                    let owned = known.owner.as_deref() == Some(rules.feed.as_str());
                    if !owned && !speaks_for {
                        continue; // left behind, and another feed's: not this one's to judge
                    }
                    // The guard weighs them with the lot the feed speaks for now.
                    let weighed_at = match speaks_for {
                        true => location_id,
                        false => rules.locations.first().copied().unwrap_or(location_id),
                    };
                    let g = guard.entry(weighed_at).or_default();
                    if owned && base.digest.is_some() && !base.sold {
                        g.in_stock += 1;
                    }
                    at_locations.insert(vin, known);
                }
                if speaks_for {
                    guard.entry(location_id).or_default();
                }
            }
        }
        Ok(Differ {
            outbox,
            planning,
            rules,
            file,
            at_locations,
            guard,
            present: HashMap::new(),
            applied_before,
            said_sold: HashMap::new(),
            kept_by_rejected: HashSet::new(),
            marks: Vec::new(),
            mark_vins: Vec::new(),
            read_error: None,
            accepted_at: BTreeMap::new(),
            moved_in: BTreeMap::new(),
            tails: BTreeMap::new(),
            taken_from: BTreeMap::new(),
            left_behind,
            listed,
            owners,
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
            future: None,
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

    /// The snapshot's date was in the future when it was read ([`AsOf::in_future`]): it is
    /// as of that moment, and the state keeps what it said once the plan applies.
    pub fn future_dated(&mut self, future: crate::plan::FutureDated) {
        if let Some(snapshot) = &mut self.plan.snapshot {
            snapshot.future = Some(future);
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
        let Some((key, record, queued)) = self.planning.vehicle(org, vin)? else {
            let listed = self.listed.as_ref().and_then(|l| l.vehicles.get(vin));
            return Ok(listed.map(|v| Known::adopted(location_id, v)));
        };
        let Ownership { owner, shared } =
            self.owners
                .of(self.outbox.state(), &self.rules, key.location_id, &record)?;
        Ok(Some(Known {
            location_id: key.location_id,
            record,
            queued,
            adopted: false,
            owner,
            shared,
        }))
    }

    /// The file lists the vehicle at `location_id`: this feed owns it from now on. Another
    /// feed of the same location that owned it (or shared it) lists it too, as far as anyone
    /// knows: a conflict, reported, and the vehicle is not sold while either lists it.
    /// A file that moves the vehicle to its lot takes it at once: while the move is on its
    /// way, its old lot's snapshots leave it alone (its planned location is elsewhere), and a
    /// move the service refused leaves it at a lot this feed does not speak for, where that
    /// lot's feed judges it ([`Owners::of`]).
    fn claim(&mut self, vin: &str, known: &Known, location_id: u64) {
        let feed = self.rules.feed.as_str();
        let stays = known.location_id == location_id;
        let shared = match known.owner.as_deref() {
            Some(owner) if owner == feed => known.shared.clone().filter(|_| stays),
            Some(other) if stays => Some(other.to_owned()),
            _ => None,
        };
        // A delta feed's listing never lapses (its absence says nothing): a delta file that
        // lists another feed's cars of its lot is weighed by the guard.
        if let (Mode::Delta, Some(other)) = (self.rules.mode, &shared) {
            if known.owner.as_deref() == Some(other.as_str()) && !known.base().sold {
                *self
                    .taken_from
                    .entry((location_id, other.clone()))
                    .or_default() += 1;
            }
        }
        if let Some(other) = &shared {
            self.plan.counts.shared += 1;
            tracing::info!(file = %crate::text::Escaped(&self.file.name), vin = %vin, feed = %feed, other_feed = %other, "listed by two feeds of one location: not sold while either lists it");
        }
        let ownership = Ownership {
            owner: Some(feed.to_owned()),
            shared,
        };
        // Compared with what the state holds: a takeover ([`Owners::of`]) is written down.
        let now = (known.record.owner.as_ref(), known.record.shared.as_ref());
        if now != (ownership.owner.as_ref(), ownership.shared.as_ref()) {
            self.plan.change(vin, known.location_id).ownership = Some(ownership);
        }
    }

    /// A record the mapper accepted. One that says sold is judged once the file is read
    /// ([`Differ::judge`]): a record of the same vehicle that lists it on the lot overrules it.
    pub fn accepted(&mut self, accepted: &Accepted) -> Result<(), DiffError> {
        if self.already_applied() {
            return Ok(());
        }
        let vin = &accepted.payload.vin;
        let location_id = accepted.payload.location_id;
        self.plan.records += 1;
        *self.accepted_at.entry(location_id).or_default() += 1;
        if accepted.sold == Some(true) {
            self.said_sold(
                vin,
                SaidSold {
                    line: accepted.line,
                    location_id: Some(location_id),
                    accepted: Some(Box::new(accepted.clone())),
                },
            );
            return Ok(());
        }
        if let Some(overruled) = self.said_sold.remove(vin) {
            tracing::info!(file = %crate::text::Escaped(&self.file.name), vin = %vin, line = accepted.line, sold_line = overruled.line, "one record says sold, another lists it on the lot: that one is used, not sold");
        }
        self.present.insert(vin.clone(), Some(location_id));
        if self.rules.mode == Mode::Full {
            let tail = self.tails.entry(location_id).or_default();
            if tail.len() == crate::state::LISTING_TAIL {
                tail.pop_front();
            }
            tail.push_back(vin.clone());
        }
        self.diff_accepted(accepted)
    }

    /// A record that says sold, unless a record read before lists the vehicle on the lot (or
    /// says sold already: the first is used).
    fn said_sold(&mut self, vin: &str, said: SaidSold) {
        if self.present.contains_key(vin) || self.kept_by_rejected.contains(vin) {
            return;
        }
        self.present.insert(vin.to_owned(), None);
        self.said_sold.insert(vin.to_owned(), said);
    }

    /// The records that say sold and that no other record overruled, diffed now: an accepted
    /// one as usual, a rejected one as a sale of the vehicle its VIN names.
    fn judge_said_sold(&mut self) {
        let mut said: Vec<(String, SaidSold)> = self.said_sold.drain().collect();
        said.sort_by_key(|(_, s)| s.line);
        for (vin, said) in said {
            let diffed = match &said.accepted {
                Some(accepted) => self.diff_accepted(accepted),
                None => self.sold_by_rejected(&vin, &said),
            };
            if let Err(e) = diffed {
                tracing::error!(file = %crate::text::Escaped(&self.file.name), error = %crate::text::Chain(&e), "cannot judge the records that say sold; the plan is not committed");
                self.read_error.get_or_insert(e);
                return;
            }
        }
    }

    /// A rejected record that says sold: evidence that the vehicle its VIN names left the lot,
    /// though nothing of the record can be sent.
    fn sold_by_rejected(&mut self, vin: &str, said: &SaidSold) -> Result<(), DiffError> {
        let location_id = said
            .location_id
            .or_else(|| self.rules.locations.first().copied())
            .unwrap_or_default();
        let Some(known) = self.known(vin, location_id)? else {
            self.plan.counts.skipped_sold += 1;
            return Ok(());
        };
        if known.adopted {
            self.plan.counts.adopted += 1;
            self.plan.change(vin, known.location_id).learned = known.learned(None);
        }
        let change = self.plan.change(vin, known.location_id);
        change.line = Some(said.line);
        if known.pending() {
            change.supersede = true;
        }
        if known.record.absent > 0 {
            change.absent = Some(0);
        }
        let base = known.base();
        if base.digest.is_none() {
            change.drop_stub = true; // never created: nothing to sell
            self.plan.counts.skipped_sold += 1;
            return Ok(());
        }
        if base.sold {
            self.plan.counts.unchanged += 1;
            return Ok(());
        }
        tracing::info!(file = %crate::text::Escaped(&self.file.name), vin = %vin, line = said.line, "a rejected record says sold: its vehicle is sold");
        self.plan.push(known.location_id, vin, Op::MarkSold, false);
        Ok(())
    }

    /// An accepted record against what the state knows of its vehicle.
    fn diff_accepted(&mut self, accepted: &Accepted) -> Result<(), DiffError> {
        let &Accepted {
            ref payload, sold, ..
        } = accepted;
        let vin = payload.vin.clone();
        let location_id = payload.location_id;
        let known = self.known(&vin, location_id)?;
        let Some(mut known) = known else {
            if sold == Some(true) {
                self.plan.counts.skipped_sold += 1;
            } else {
                self.plan
                    .push(location_id, &vin, Op::Create(payload.clone()), true);
                let change = self.plan.change(&vin, location_id);
                change.line = Some(accepted.line);
                change.ownership = Some(Ownership {
                    owner: Some(self.rules.feed.clone()),
                    shared: None,
                });
            }
            return Ok(());
        };
        self.claim(&vin, &known, location_id);
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
        change.line = Some(accepted.line);
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
        // The feed's own vehicles at a location the config moved it from are its to move.
        let its_own_left_behind = self.left_behind.contains(&known.location_id)
            && known.owner.as_deref() == Some(self.rules.feed.as_str());
        if known.location_id != location_id
            && !base.sold
            && !self.rules.locations.contains(&known.location_id)
            && !its_own_left_behind
        {
            *self.moved_in.entry(known.location_id).or_default() += 1;
            // A delta's listing never lapses: the cars it takes from another feed's lot that
            // feed can never sell again, so the guard weighs them as it weighs shared ones.
            if let (Mode::Delta, Some(other)) = (self.rules.mode, known.owner.as_deref()) {
                if other != self.rules.feed {
                    let key = (known.location_id, other.to_owned());
                    *self.taken_from.entry(key).or_default() += 1;
                }
            }
        }
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

    /// A record the mapper rejected: nothing is sent for it. One that says sold is evidence of a
    /// sale of its VIN's vehicle ([`Differ::accepted`]); any other, in a full snapshot, keeps on
    /// the lot the vehicle it most likely stands for (its VIN, a known VIN one typo away, or
    /// its stock number at its location): that vehicle is neither sold nor changed
    /// ([`Protection`]).
    pub fn rejected(&mut self, rejected: &Rejected) {
        if self.already_applied() {
            return;
        }
        self.plan.counts.rejected_records += 1;
        self.plan.records += 1;
        if let Some(loc) = rejected.location_id {
            self.accepted_at.entry(loc).or_default();
        }
        if rejected.sold == Some(true) {
            // Evidence of a sale of the VIN it names, of nothing on the lot: it keeps nothing.
            if let Some(vin) = &rejected.vin {
                let said = SaidSold {
                    line: rejected.line,
                    location_id: rejected.location_id,
                    accepted: None,
                };
                self.said_sold(vin, said);
            }
            return;
        }
        if let Some(vin) = &rejected.vin {
            self.kept_by_rejected.insert(vin.clone());
            if let Some(overruled) = self.said_sold.remove(vin) {
                // Judged absent, so that this record keeps it (and says so).
                self.present.remove(vin);
                tracing::info!(file = %crate::text::Escaped(&self.file.name), vin = %vin, line = rejected.line, sold_line = overruled.line, "one record says sold, a rejected one lists it on the lot: not sold");
            }
        }
        let says_which =
            rejected.vin.is_some() || rejected.vin_text.is_some() || rejected.stock.is_some();
        if self.rules.mode == Mode::Full && says_which {
            self.marks.push(Mark {
                line: rejected.line,
                vin: rejected.vin.clone(),
                vin_text: rejected.vin_text.as_deref().map(str::to_owned),
                stock: rejected.stock.as_deref().map(stock_key),
                location_id: rejected.location_id,
            });
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
        if let Some(e) = self.read_error.take() {
            return Err(e);
        }
        self.list();
        let Differ {
            outbox,
            planning,
            mut plan,
            ..
        } = self;
        plan.file_no = Some(outbox.commit(&plan, &planning)?);
        // Stored now; a large lot's list is not carried on with the plan.
        plan.listings = Vec::new();
        plan.tails = Vec::new();
        // The markers count every vehicle: not while the vehicles it read are kept back.
        drop(planning);
        outbox.state().write_markers();
        Ok(plan)
    }

    /// Judges absence and the guard (once) and shows the plan as it would be committed.
    pub fn judge(&mut self) -> &Plan {
        if !self.judged {
            self.judged = true;
            self.judge_said_sold();
            self.judge_absence();
            self.judge_moves();
            self.judge_applied_before();
            self.plan.spread_transitions();
        }
        &self.plan
    }

    /// A file that moves here more than `max_sold_fraction` of another location's in-stock
    /// vehicles is held like one that sells them: most likely another lot's export dropped in
    /// this feed's inbox (a lot's cars move a few at a time). A real transfer of a whole lot
    /// is released by hand.
    fn judge_moves(&mut self) {
        if !matches!(
            self.plan.verdict,
            Verdict::Apply { .. } | Verdict::Held { .. }
        ) {
            return;
        }
        let mut reasons = Vec::new();
        for (&from, &moved) in &self.moved_in {
            let in_stock = match self
                .outbox
                .state()
                .in_stock_count(self.rules.organization_id, from)
            {
                Ok(n) => n,
                Err(e) => {
                    self.read_error = Some(e.into());
                    return;
                }
            };
            let share = moved as f64 / in_stock.max(1) as f64;
            if share > self.rules.max_sold_fraction {
                reasons.push(format!(
                    "would move {moved} of the {in_stock} in-stock vehicles of location {from} \
                     here ({:.0}%, more than max_sold_fraction {:.0}%): another lot's export in \
                     this feed's inbox?",
                    share * 100.0,
                    self.rules.max_sold_fraction * 100.0
                ));
            }
        }
        if reasons.is_empty() {
            return;
        }
        if self.rules.force {
            if let Verdict::Apply { forced } = &mut self.plan.verdict {
                *forced = true;
            }
            tracing::warn!(file = %crate::text::Escaped(&self.file.name), "the safety guard was overridden");
            return;
        }
        tracing::warn!(file = %crate::text::Escaped(&self.file.name), "moves too many vehicles from another location: held");
        match &mut self.plan.verdict {
            Verdict::Held { reasons: held } => held.extend(reasons),
            _ => self.plan.verdict = Verdict::Held { reasons },
        }
    }

    /// A file with the content of one applied before the last one is an old export delivered
    /// again or a lot back at that day's exact state, and nothing in the file tells which:
    /// held, naming the file it matches and what releasing it would do.
    fn judge_applied_before(&mut self) {
        let Some(before) = &self.applied_before else {
            return;
        };
        if self.rules.force {
            return;
        }
        let c = &self.plan.counts;
        // A delta that tells the same changes again (a car sold, back, and sold again) looks
        // the same as an old one delivered again.
        let or_true = match self.rules.mode {
            Mode::Full => "the lot back at that day's exact state",
            Mode::Delta => "the same changes made again",
        };
        let reason = format!(
            "the same content as {}, applied {} UTC before the last file applied: an old export \
             delivered again, or {or_true}; releasing it would revert to the state of {} of {} \
             UTC: {} created, {} updated, {} sold, {} back in stock",
            crate::text::Escaped(&before.name),
            crate::clock::utc_unix(before.at),
            crate::text::Escaped(&before.name),
            crate::clock::utc_unix(before.at),
            c.create,
            c.update,
            c.sold,
            c.in_stock
        );
        tracing::warn!(file = %crate::text::Escaped(&self.file.name), same_as = %crate::text::Escaped(&before.name), applied_at = before.at, "the same content as a file applied before the last one: held");
        match &mut self.plan.verdict {
            Verdict::Held { reasons } => reasons.insert(0, reason),
            Verdict::Apply { .. } => {
                self.plan.verdict = Verdict::Held {
                    reasons: vec![reason],
                }
            }
            Verdict::AlreadyApplied { .. } | Verdict::Superseded { .. } => {}
        }
    }

    /// What keeps absent vehicles on the lot. Returns the known vehicles each rejected record
    /// stands for (`absent`: the vehicles the file does not list validly, for stock numbers)
    /// and, for the `judged` ones (which would be counted absent or sold), the first reason to
    /// keep each: a rejected record first, else another location's latest listing, with the
    /// payload that moves it there and the feed of that listing (its owner once moved). The
    /// state is read only when there is something to look up.
    #[allow(clippy::type_complexity)]
    fn protections(
        &self,
        absent: &[(&String, &Known)],
        judged: &[(&String, &Known)],
    ) -> Result<
        (
            Vec<MarkMatch>,
            HashMap<String, Protection>,
            HashMap<String, (VehiclePayload, String)>,
        ),
        DiffError,
    > {
        let mark_vins = self.resolve_marks(absent)?;
        let mut kept: HashMap<String, Protection> = HashMap::new();
        let mut moves: HashMap<String, (VehiclePayload, String)> = HashMap::new();
        if judged.is_empty() {
            return Ok((mark_vins, kept, moves));
        }
        let judged_at: HashMap<&str, u64> = judged
            .iter()
            .map(|(vin, known)| (vin.as_str(), known.location_id))
            .collect();
        // How many vehicles each record stands for (more than one: all are kept).
        let mut per_mark: HashMap<usize, BTreeSet<&str>> = HashMap::new();
        for m in mark_vins
            .iter()
            .filter(|m| judged_at.contains_key(m.vin.as_str()))
        {
            per_mark.entry(m.mark).or_default().insert(m.vin.as_str());
        }
        for m in &mark_vins {
            let Some(&location_id) = judged_at.get(m.vin.as_str()) else {
                continue;
            };
            let mark = &self.marks[m.mark];
            let value = match m.by {
                ProtectedBy::Stock => mark.stock.clone(),
                ProtectedBy::NearVin => mark.vin_text.clone(),
                _ => mark.vin.clone(),
            };
            kept.entry(m.vin.clone()).or_insert_with(|| Protection {
                vin: m.vin.clone(),
                location_id,
                by: m.by,
                line: Some(mark.line),
                value: value.unwrap_or_default(),
                listed_at: None,
                moved: false,
                vehicles: per_mark.get(&m.mark).map_or(1, |s| s.len() as u32),
            });
        }
        if judged
            .iter()
            .all(|(vin, _)| kept.contains_key(vin.as_str()))
        {
            return Ok((mark_vins, kept, moves));
        }
        let now = crate::state::now();
        let listings = self
            .outbox
            .state()
            .other_listings(self.rules.organization_id, &self.rules.locations)?;
        for (listed_at, listing) in listings {
            if now.saturating_sub(listing.at) > LISTING_KEEPS_FOR_SECS {
                continue; // a lot whose feed stopped does not keep cars for ever
            }
            if listing.feed == self.rules.feed {
                continue; // its listing from before the config moved it: this file is newer
            }
            for (vin, known) in judged {
                if !kept.contains_key(vin.as_str()) && listing.lists(vin) {
                    if let Some(payload) = self.payload_of(vin, known)? {
                        moves.insert((*vin).clone(), (payload, listing.feed.clone()));
                    }
                    kept.insert(
                        (*vin).clone(),
                        Protection {
                            vin: (*vin).clone(),
                            location_id: known.location_id,
                            by: ProtectedBy::OtherLocation,
                            line: None,
                            value: listing.file.clone(),
                            listed_at: Some(listed_at),
                            moved: false,
                            vehicles: 1,
                        },
                    );
                }
            }
        }
        Ok((mark_vins, kept, moves))
    }

    /// The known vehicles the rejected records stand for: each record's own VIN, the known
    /// VINs of the organization one typo away from the VIN it wrote, and the vehicles of
    /// `absent` with its stock number at its location (any of the feed's when it has none).
    fn resolve_marks(&self, absent: &[(&String, &Known)]) -> Result<Vec<MarkMatch>, DiffError> {
        let mut out = Vec::new();
        if self.marks.is_empty() {
            return Ok(out);
        }
        let state = self.outbox.state();
        let org = self.rules.organization_id;
        let org_vins = if self.marks.iter().any(|m| m.vin_text.is_some()) {
            state.organization_vins(org)?
        } else {
            HashMap::new()
        };
        let mut by_stock: HashMap<String, Vec<(&str, u64)>> = HashMap::new();
        if self.marks.iter().any(|m| m.stock.is_some()) {
            for (vin, known) in absent {
                if let Some(stock) = self.stock_of(vin, known)? {
                    by_stock
                        .entry(stock_key(&stock))
                        .or_default()
                        .push((vin.as_str(), known.location_id));
                }
            }
        }
        let is_known = |v: &str| org_vins.contains_key(v) || self.at_locations.contains_key(v);
        for (i, mark) in self.marks.iter().enumerate() {
            let mut matched = BTreeSet::new();
            if let Some(vin) = &mark.vin {
                matched.insert((vin.clone(), ProtectedBy::Vin));
            }
            if let Some(text) = &mark.vin_text {
                if is_known(text) {
                    matched.insert((text.clone(), ProtectedBy::Vin));
                }
                for vin in near_vins(text, is_known) {
                    matched.insert((vin, ProtectedBy::NearVin));
                }
            }
            // A stock number is reused: a record whose VIN is far from the car's stands for
            // another car, and the stock number alone does not keep this one.
            let written = mark.vin.as_deref().or(mark.vin_text.as_deref());
            for (vin, at) in mark.stock.iter().flat_map(|s| by_stock.get(s)).flatten() {
                let same_car = written.is_none_or(|w| !vins_far_apart(w, vin));
                if same_car && mark.location_id.is_none_or(|l| l == *at) {
                    matched.insert(((*vin).to_owned(), ProtectedBy::Stock));
                }
            }
            out.extend(
                matched
                    .into_iter()
                    .map(|(vin, by)| MarkMatch { mark: i, vin, by }),
            );
        }
        Ok(out)
    }

    /// A known vehicle's stock number, from [`Differ::payload_of`].
    fn stock_of(&self, vin: &str, known: &Known) -> Result<Option<String>, DiffError> {
        Ok(self.payload_of(vin, known)?.map(|p| p.stock))
    }

    /// A known vehicle's newest payload: its newest queued one, else the one the service
    /// acknowledged; None for a vehicle only the service's list knows.
    fn payload_of(&self, vin: &str, known: &Known) -> Result<Option<VehiclePayload>, DiffError> {
        if let Some(p) = known
            .queued
            .iter()
            .filter_map(|q| q.op.payload())
            .next_back()
        {
            return Ok(Some(p.clone()));
        }
        if known.adopted {
            return Ok(None);
        }
        let key = crate::state::VehicleKey::new(self.rules.organization_id, known.location_id, vin);
        Ok(self.outbox.state().payload(&key)?)
    }

    /// The plan's listings: per location the file speaks for, what it lists (validly, or by a
    /// rejected record that stands for a known vehicle), for the outbox to store.
    fn list(&mut self) {
        if self.rules.mode != Mode::Full || !self.plan.applies() {
            return;
        }
        // A location left behind gets an empty listing: it keeps no car from a sale, and the
        // feed's next files still judge what it owns there.
        let mut lists: BTreeMap<u64, Vec<String>> = (self.rules.locations.iter())
            .chain(&self.left_behind)
            .map(|&l| (l, Vec::new()))
            .collect();
        for (vin, at) in std::mem::take(&mut self.present) {
            if let Some(list) = at.and_then(|l| lists.get_mut(&l)) {
                list.push(vin);
            }
        }
        for m in &self.mark_vins {
            match self.marks[m.mark].location_id {
                Some(l) => {
                    if let Some(list) = lists.get_mut(&l) {
                        list.push(m.vin.clone());
                    }
                }
                // A record whose lot cannot be told is on each of the feed's lots.
                None => lists.values_mut().for_each(|list| list.push(m.vin.clone())),
            }
        }
        for list in lists.values_mut() {
            list.sort_unstable();
            list.dedup();
        }
        self.plan.listings = lists.into_iter().collect();
        self.plan.tails = (std::mem::take(&mut self.tails).into_iter())
            .map(|(l, tail)| (l, tail.into()))
            .collect();
    }

    /// The service's vehicles the state does not know and the file leaves out (a full
    /// snapshot of an empty state): not owned, counted, never sold by this absence.
    fn not_owned(&mut self) {
        let Some(listed) = &self.listed else {
            return;
        };
        // Those the state knows (another lot's, read before) are not this list's to count.
        let known = match self
            .outbox
            .state()
            .organization_vins(self.rules.organization_id)
        {
            Ok(known) => known,
            Err(e) => {
                self.read_error.get_or_insert(e.into());
                return;
            }
        };
        let left_out = (listed.vehicles.iter())
            .filter(|(vin, _)| !self.present.contains_key(*vin) && !known.contains_key(*vin))
            .filter(|(_, v)| !v.sold_state().unwrap_or(false))
            .count();
        if left_out > 0 {
            tracing::info!(file = %crate::text::Escaped(&self.file.name), vehicles = left_out, "vehicles on the service's list the file leaves out: not owned by the feed, not sold");
        }
        self.plan.counts.not_owned += left_out as u64;
    }

    /// Why the file looks cut short after a whole record at `location_id`: the vehicles it
    /// would sell now are the whole end of the feed's last snapshot there, in that file's
    /// order (two or more), and this file ends with the car listed just before them. Sales
    /// fall anywhere in a lot's export; a DMS that stopped writing loses its end.
    fn cut_short(
        &self,
        location_id: u64,
        sold_now: &HashSet<&str>,
    ) -> Result<Option<String>, DiffError> {
        let (org, feed) = (self.rules.organization_id, self.rules.feed.as_str());
        let listings = self.outbox.state().listings(org, location_id)?;
        let Some(last) = listings.into_iter().find(|l| l.feed == feed) else {
            return Ok(None);
        };
        let missing = (last.tail.iter().rev())
            .take_while(|vin| !self.present.contains_key(vin.as_str()))
            .collect::<Vec<_>>();
        // And this file ends where the cut would be: with the car listed just before them
        // (a new car listed after it says the export went on).
        let before = last.tail.iter().rev().nth(missing.len());
        let ends_there =
            before.is_some() && (self.tails.get(&location_id)).and_then(|t| t.back()) == before;
        let cut = missing.len() >= 2
            && ends_there
            && missing.iter().all(|v| sold_now.contains(v.as_str()));
        Ok(cut.then(|| {
            format!(
                "location {location_id}: leaves out the last {} vehicles of {} in its order, and \
                 none before them: an export cut short after a whole record? (release it if \
                 they were sold)",
                missing.len(),
                crate::text::Escaped(&last.file)
            )
        }))
    }

    /// Why a delta file looks like another feed's export in this inbox: it lists more than
    /// `max_sold_fraction` of the in-stock vehicles another feed owns at one location (two or
    /// more), at its own location or another lot's. Applied, it would share them with that
    /// feed, or take them from it, for good: a delta's listing never lapses, so the other
    /// feed's snapshots could never sell them, and the delta sells only what its DMS says
    /// it sold.
    fn delta_takeovers(&self) -> Result<Vec<String>, DiffError> {
        let mut reasons = Vec::new();
        for ((location_id, other), &listed) in &self.taken_from {
            if listed < 2 {
                continue;
            }
            let records = (self.outbox.state())
                .location_vehicles(self.rules.organization_id, *location_id)?;
            let owned = (records.iter())
                .filter(|(_, r)| !r.sold && r.owner.as_deref() == Some(other.as_str()))
                .count() as u64;
            let owned = owned.max(listed);
            let share = listed as f64 / owned as f64;
            if share > self.rules.max_sold_fraction {
                reasons.push(format!(
                    "location {location_id}: lists {listed} of the {owned} in-stock vehicles feed \
                     {other} owns ({:.0}%, more than max_sold_fraction {:.0}%): that feed's \
                     export in this delta feed's inbox?",
                    share * 100.0,
                    self.rules.max_sold_fraction * 100.0
                ));
            }
        }
        Ok(reasons)
    }

    fn judge_absence(&mut self) {
        if self.already_applied() {
            return;
        }
        if self.rules.mode != Mode::Full {
            let reasons = match self.delta_takeovers() {
                Ok(reasons) => reasons,
                Err(e) => {
                    self.read_error.get_or_insert(e);
                    Vec::new()
                }
            };
            self.plan.verdict = if reasons.is_empty() || self.rules.force {
                Verdict::Apply {
                    forced: !reasons.is_empty(),
                }
            } else {
                Verdict::Held { reasons }
            };
            return;
        }
        self.not_owned();
        let feed = self.rules.feed.clone();
        let feed = feed.as_str();
        let mut absent: Vec<(&String, &Known)> = self
            .at_locations
            .iter()
            .filter(|(vin, _)| !self.present.contains_key(*vin))
            .collect();
        absent.sort_by(|a, b| a.0.cmp(b.0));
        // The vehicles this snapshot would count absent or sell: its feed's own, unless
        // something keeps them.
        let judged: Vec<(&String, &Known)> = absent
            .iter()
            .copied()
            .filter(|(_, known)| {
                let base = known.base();
                known.owner.as_deref() == Some(feed)
                    && known.shared.is_none()
                    && known.planned_location() == known.location_id
                    && base.digest.is_some()
                    && !base.sold
            })
            .collect();
        let (mut kept, mut moves) = match self.protections(&absent, &judged) {
            Ok((mark_vins, kept, moves)) => {
                self.mark_vins = mark_vins;
                (kept, moves)
            }
            Err(e) => {
                tracing::error!(file = %crate::text::Escaped(&self.file.name), error = %crate::text::Chain(&e), "cannot tell which absent vehicles are kept; the plan is not committed");
                self.read_error = Some(e);
                (HashMap::new(), HashMap::new())
            }
        };
        let mut guard = std::mem::take(&mut self.guard);
        let mut sold_now: HashSet<&str> = HashSet::new();
        for (vin, known) in absent {
            if known.planned_location() != known.location_id {
                continue; // on its way to another lot: that lot's file judges it
            }
            if known.owner.as_deref() != Some(feed) || known.shared.is_some() {
                not_owned_absent(&mut self.plan, feed, &self.file.name, vin, known);
                continue;
            }
            if let Some(mut protection) = kept.remove(vin.as_str()) {
                // Listed by another lot: moved there now, so that nothing waits for that lot's
                // next file (which may be the same bytes, not read again).
                let moving = protection.listed_at.and_then(|l| {
                    let (mut payload, feed) = moves.remove(vin.as_str())?;
                    payload.location_id = l;
                    Some((payload, feed))
                });
                // A move the service refused before is not sent again until it changes.
                let refused = |p: &VehiclePayload| {
                    let rejected = known.record.rejected.as_ref();
                    rejected.is_some_and(|r| r.digest == Some(payload_digest(p)))
                };
                if let Some((payload, lister)) = moving.filter(|(p, _)| !refused(p)) {
                    // The feed whose snapshot lists it there owns it from now on (a lot with
                    // two feeds: not the other one).
                    self.plan.change(vin, known.location_id).ownership = Some(Ownership {
                        owner: Some(lister),
                        shared: None,
                    });
                    self.plan
                        .push(payload.location_id, vin, Op::Update(payload), false);
                    protection.moved = true;
                }
                // Kept counts as listed, for every counter: the files in a row without it
                // start again (`sold_after_absent`).
                if known.record.absent > 0 {
                    self.plan.change(vin, known.location_id).absent = Some(0);
                }
                tracing::info!(file = %crate::text::Escaped(&self.file.name), vin = %vin, by = protection.by.name(), line = protection.line, "kept on the lot, not sold");
                self.plan.counts.protected += 1;
                self.plan.protected.push(protection);
                continue;
            }
            // Named by a rejected record but not judged (its create, or its return to stock,
            // still queued): left as it is, queue included; the record stands for it.
            if self.mark_vins.iter().any(|m| m.vin == *vin) {
                if known.record.absent > 0 {
                    self.plan.change(vin, known.location_id).absent = Some(0);
                }
                continue;
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
            let sells = absent >= self.rules.sold_after_absent.max(1);
            let weighed_at = match self.left_behind.contains(&known.location_id) {
                true => self.rules.locations.first().copied(),
                false => Some(known.location_id),
            };
            if let Some(g) = weighed_at.and_then(|l| guard.get_mut(&l)) {
                g.left_out += 1;
                g.would_sell += u64::from(sells);
            }
            if sells {
                self.plan.push(known.location_id, vin, Op::MarkSold, false);
                sold_now.insert(vin.as_str());
            } else {
                self.plan.counts.absent_waiting += 1;
            }
        }
        let mut reasons = Vec::new();
        let mut unread = None;
        for (&location_id, g) in &mut guard {
            g.accepted = self.accepted_at.get(&location_id).copied().unwrap_or(0);
            if g.in_stock == 0 {
                continue;
            }
            // Cars left out count whether they are sold today or after the grace: a file
            // that leaves out most of a lot (another feed's export in this inbox, a cut)
            // must not spend the grace of every car it omits.
            let share = g.left_out as f64 / g.in_stock as f64;
            if g.accepted == 0 {
                reasons.push(format!(
                    "location {location_id}: the file has no vehicle for it, and it has {} in stock",
                    g.in_stock
                ));
            } else if share > self.rules.max_sold_fraction && g.left_out == g.would_sell {
                reasons.push(format!(
                    "location {location_id}: would mark {} of {} in-stock vehicles sold ({:.0}%, \
                     more than max_sold_fraction {:.0}%)",
                    g.would_sell,
                    g.in_stock,
                    share * 100.0,
                    self.rules.max_sold_fraction * 100.0
                ));
            } else if share > self.rules.max_sold_fraction {
                reasons.push(format!(
                    "location {location_id}: leaves out {} of {} in-stock vehicles ({:.0}%, more \
                     than max_sold_fraction {:.0}%): {} would be sold now, the rest after \
                     sold_after_absent = {} files in a row without them",
                    g.left_out,
                    g.in_stock,
                    share * 100.0,
                    self.rules.max_sold_fraction * 100.0,
                    g.would_sell,
                    self.rules.sold_after_absent
                ));
            } else if g.would_sell >= 2 {
                match self.cut_short(location_id, &sold_now) {
                    Ok(reason) => reasons.extend(reason),
                    Err(e) => unread = Some(e),
                }
            }
        }
        if let Some(e) = unread {
            self.read_error.get_or_insert(e);
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

/// A vehicle of the judged locations the file leaves out and its feed does not own (or
/// owns with another feed that lists it too): never sold by this absence. A feed that
/// shared it no longer lists it; an owner that leaves it out hands it to the feed that
/// shares it, whose snapshots judge it from then on.
fn not_owned_absent(plan: &mut Plan, feed: &str, file: &str, vin: &str, known: &Known) {
    let base = known.base();
    if base.digest.is_some() && !base.sold {
        plan.counts.not_owned += 1;
    }
    let ownership = match (known.owner.as_deref(), known.shared.as_deref()) {
        (Some(owner), Some(shared)) if owner == feed => {
            tracing::info!(file = %crate::text::Escaped(file), vin = %vin, feed = %feed, other_feed = %shared, "left out, but another feed of the location lists it: not sold, that feed owns it now");
            Ownership {
                owner: Some(shared.to_owned()),
                shared: None,
            }
        }
        (owner, Some(shared)) if shared == feed => Ownership {
            owner: owner.map(str::to_owned),
            shared: None,
        },
        _ => return,
    };
    let change = plan.change(vin, known.location_id);
    change.ownership = Some(ownership);
    if known.record.absent > 0 {
        change.absent = Some(0);
    }
}

/// Who owns the state's records. A record written since owners were kept says it
/// ([`VehicleRecord::owner`]); one from before that lotsync created or listed (it names the
/// file that last queued for it) is owned by the feed that planned that file, else by the
/// feed judging it, so that an upgrade sells what it always sold; one without a file is not
/// owned.
///
/// At the judging feed's own lots, only the feeds that speak for the lot count: a vehicle
/// owned (or shared) by any other feed — its old lot's after a move, one gone from the
/// config — is the judging feed's, since no other feed would ever sell it there.
#[derive(Debug, Default)]
struct Owners {
    /// The feeds that planned each file name, read from the state once, when a record from
    /// before owners needs it.
    files: Option<HashMap<String, BTreeSet<String>>>,
}

impl Owners {
    /// The owner and the sharing feed of `record`, at `location_id`, as `rules.feed` judges
    /// them.
    fn of(
        &mut self,
        state: &crate::state::State,
        rules: &Rules,
        location_id: u64,
        record: &VehicleRecord,
    ) -> Result<Ownership, DiffError> {
        let owner = self.stored(state, &rules.feed, record)?;
        let shared = record.shared.clone();
        if !rules.locations.contains(&location_id) {
            return Ok(Ownership { owner, shared });
        }
        let here = |f: &String| *f == rules.feed || rules.sibling_feeds.contains(f);
        let owner = match owner {
            Some(other) if !here(&other) => Some(rules.feed.clone()),
            owner => owner,
        };
        let shared = shared.filter(|s| here(s) && Some(s) != owner.as_ref());
        Ok(Ownership { owner, shared })
    }

    /// The owner the record says, or the one of a record from before owners were kept.
    fn stored(
        &mut self,
        state: &crate::state::State,
        feed: &str,
        record: &VehicleRecord,
    ) -> Result<Option<String>, DiffError> {
        if record.owner.is_some() || record.file.is_empty() {
            return Ok(record.owner.clone());
        }
        if self.files.is_none() {
            let mut files: HashMap<String, BTreeSet<String>> = HashMap::new();
            for file in state.files() {
                let file = file?;
                files.entry(file.name).or_default().insert(file.feed);
            }
            self.files = Some(files);
        }
        let planned_by = self.files.as_ref().and_then(|f| f.get(&record.file));
        let owner = match planned_by {
            Some(feeds) if !feeds.contains(feed) => feeds.first().cloned(),
            _ => Some(feed.to_owned()),
        };
        Ok(owner)
    }
}

/// Another lot's listing keeps a car from being sold for this long after it was applied: a
/// lot whose feed stopped (or was removed from the config) does not keep its cars for ever.
pub const LISTING_KEEPS_FOR_SECS: i64 = 7 * 24 * 3600;

/// A record that says sold, waiting for the end of the file.
#[derive(Debug)]
struct SaidSold {
    line: u64,
    location_id: Option<u64>,
    /// The accepted record, diffed as usual; None for a rejected one (its VIN's vehicle is
    /// sold, nothing of it sent).
    accepted: Option<Box<Accepted>>,
}

/// A rejected record that still says which vehicle it stands for.
#[derive(Debug)]
struct Mark {
    line: u64,
    /// Its VIN, when it passed the check.
    vin: Option<String>,
    /// Its VIN as written, when it failed the check.
    vin_text: Option<String>,
    /// Its stock number, as [`stock_key`] compares it.
    stock: Option<String>,
    location_id: Option<u64>,
}

/// A known vehicle a rejected record stands for.
#[derive(Debug)]
struct MarkMatch {
    /// Its index in the differ's marks.
    mark: usize,
    vin: String,
    by: ProtectedBy,
}

/// Stock numbers compare trimmed and case-blind (a DMS that upper-cases one export and not
/// the next keeps the car).
fn stock_key(stock: &str) -> String {
    stock.trim().to_ascii_uppercase()
}

/// The VINs `is_known` knows that are one typo away from `text`: one character replaced, or
/// two neighbours swapped. A few hundred lookups per record, whatever the state's size.
fn near_vins(text: &str, is_known: impl Fn(&str) -> bool) -> BTreeSet<String> {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut found = BTreeSet::new();
    // A VIN or serial has 5 to 17 characters: other lengths cannot be one typo from one.
    if !(5..=17).contains(&text.len()) {
        return found;
    }
    let mut buf = text.as_bytes().to_vec();
    let mut check = |buf: &[u8]| {
        if let Ok(candidate) = std::str::from_utf8(buf) {
            if is_known(candidate) {
                found.insert(candidate.to_owned());
            }
        }
    };
    for i in 0..buf.len() {
        let was = buf[i];
        for &c in ALPHABET.iter().filter(|&&c| c != was) {
            buf[i] = c;
            check(&buf);
        }
        buf[i] = was;
    }
    for i in 1..buf.len() {
        if buf[i - 1] != buf[i] {
            buf.swap(i - 1, i);
            check(&buf);
            buf.swap(i - 1, i);
        }
    }
    found
}

/// A VIN as written that names another car than `vin`: it has a VIN's form (17 letters and
/// digits, no I, O or Q) and more than [`VIN_TYPOS`] of its characters differ from `vin`'s.
/// Text without that form ("TBD", a truncated or garbled VIN) names no car: not far.
fn vins_far_apart(written: &str, vin: &str) -> bool {
    /// Typos a DMS export shows in one VIN: a mistyped character and a swap of two.
    const VIN_TYPOS: usize = 2;
    let vin_form = written.len() == 17
        && written
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() && !b"IOQioq".contains(&b));
    let differ = (written.bytes().zip(vin.bytes()))
        .filter(|(x, y)| !x.eq_ignore_ascii_case(y))
        .count();
    vin_form && differ + written.len().abs_diff(vin.len()) > VIN_TYPOS
}

#[cfg(test)]
mod decision_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn vins_more_than_two_characters_apart_are_far() {
        assert!(!vins_far_apart("1HGCM82633A004352", "1HGCM82633A004352"));
        assert!(!vins_far_apart("1hgcm82633a004325", "1HGCM82633A004352"));
        // Not a VIN's form: names no car.
        assert!(!vins_far_apart("1HGCM82633A004", "1HGCM82633A004352"));
        assert!(!vins_far_apart("NOT-A-VIN", "1HGCM82633A004352"));
        assert!(!vins_far_apart("1HGCM82633AOO4352XYZ", "1HGCM82633A004352"));
        assert!(vins_far_apart("JTMFB3FV0MD021583", "1HGCM82633A004352"));
        assert!(!vins_far_apart("1HGCM82633A014362", "1HGCM82633A004352"));
        assert!(vins_far_apart("1HGCM82633A114362", "1HGCM82633A004352"));
    }

    #[test]
    fn near_vins_are_one_replaced_character_or_one_swap_away() {
        let known: HashSet<&str> = [
            "1HGCM82633A004352",
            "1HGCM82633A004353",
            "JTMFB3FV0MD021583",
        ]
        .into_iter()
        .collect();
        let near = |text: &str| near_vins(text, |v| known.contains(v));
        // The check digit mistyped: only the car it was typed for.
        assert_eq!(
            near("1HGCM82693A004352"),
            BTreeSet::from(["1HGCM82633A004352".to_owned()])
        );
        // The last character mistyped: both serials one character away are candidates.
        assert_eq!(near("1HGCM82633A004359").len(), 2);
        // Two neighbours swapped; an O typed for a 0.
        assert_eq!(
            near("JTMFB3FV0MD025183"),
            BTreeSet::from(["JTMFB3FV0MD021583".to_owned()])
        );
        assert_eq!(
            near("JTMFB3FVOMD021583"),
            BTreeSet::from(["JTMFB3FV0MD021583".to_owned()])
        );
        // Two typos, another length, or bytes that are no VIN: nothing.
        assert!(near("JTMFB3FV0MD021599").is_empty());
        assert!(near("JTMFB3FV0MD02158").is_empty());
        assert!(near("JTMFB3FV0MD02158é").is_empty());
        assert!(near("").is_empty());
    }

    #[test]
    fn stock_numbers_compare_trimmed_and_case_blind() {
        assert_eq!(stock_key(" u24002 "), stock_key("U24002"));
    }
}
