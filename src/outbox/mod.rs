//! The outbox: the durable queue of operations between the diff and the uploader.
//!
//! A file's plan is committed in one transaction of the state with the file's bookkeeping and the
//! vehicles' records, and flushed before anything is sent. Each answer of the service removes
//! its operation in the same transaction that records the answer on the vehicle, and answers
//! are flushed in small batches ([`FLUSH_EVERY`]), so a crash at any instant loses nothing and
//! applies nothing twice; after a power cut at most the last batch of answers is asked again,
//! which the service's create-or-modify and transitions make harmless.
//!
//! Operations of one vehicle go out one at a time, in order. Which operations are in flight
//! lives in memory: one process owns the state (its lock), and after a crash every operation
//! is pending again. It owns the queue, not the rules (the diff and the reconciliation make the
//! plans, of the types in [`crate::plan`]) nor the calls (the uploader).

use crate::api::VehiclePayload;
use crate::plan::{payload_digest, Op, Plan, Verdict};
use crate::state::history::{self, Event, What};
use crate::state::{
    self, AppliedFile, Counters, FeedRecord, FileOutcome, FileRecord, OpCounts, Queuing, Rejection,
    State, StateError, StateTx, Txn, VehicleKey, VehicleRecord,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Answers recorded between two flushes.
pub const FLUSH_EVERY: u32 = 16;

pub use crate::state::OutboxEntry as Entry;

/// The outbox cannot do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error("operation {0} is not in the outbox")]
    NotQueued(u64),
}

type TxResult<T> = Txn<T, OutboxError>;

/// A queued operation of a vehicle, as the diff sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    pub seq: u64,
    pub op: Op,
    pub in_flight: bool,
}

/// The service's answer to an operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Done. `service_id` and `sold` as the answer's vehicle says, when it has them.
    Applied {
        service_id: Option<u64>,
        sold: Option<bool>,
    },
    /// Refused (400, 404, 422): recorded on the vehicle, not retried until it changes.
    Rejected { status: u16, messages: Vec<String> },
}

/// How an answered operation went out, for the vehicle's history: when its last call was
/// sent, the status the service answered with, and the calls repeated before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    pub at: Option<i64>,
    pub status: Option<u16>,
    pub retries: u32,
}

/// What the service's own list showed about a vehicle, written into the state without a
/// request: the reconciliation's findings (see [`crate::reconcile`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// The service's id of a vehicle the state knows (it had none, or another one).
    Id { vin: String, service_id: u64 },
    /// A vehicle the state lacks, as the service holds it (id, sold), with `payload` (from the
    /// archived export that listed it) as the payload last acknowledged.
    Restore {
        vin: String,
        service_id: u64,
        sold: bool,
        payload: Box<VehiclePayload>,
        /// The archived export it comes from.
        file: String,
    },
    /// A sold vehicle the service no longer holds: its record goes, so that the DMS listing
    /// it again creates it again.
    Forget { vin: String },
}

/// A planned file's operations: answered so far, and still queued.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileProgress {
    pub delivered: state::Delivered,
    pub queued: OpCounts,
}

/// What the uploader has in hand, and what the plan in progress keeps back. Its lock is held
/// for a moment only (one operation taken or given back, one answer, one vehicle's queue
/// read), never across a plan: the uploader's tasks take it too.
#[derive(Debug, Default)]
struct Sending {
    /// Operations handed out and not yet answered or given back.
    in_flight: HashSet<u64>,
    /// Vehicles (organization, VIN) whose pending operations the plan in progress has read:
    /// its commit replaces them, so none is handed out until it commits or gives up.
    kept: HashSet<(u64, String)>,
}

/// The durable queue over an open [`State`].
///
/// Two locks: `planning`, held by one plan (or reconciliation) from its first read to its
/// commit, and `sending`, held for a moment at a time. Delivery never waits for a plan: while a
/// file is planned, every operation goes out but the pending ones of the vehicles it has read
/// (see [`Planning`]).
#[derive(Debug)]
pub struct Outbox {
    state: State,
    planning: Mutex<()>,
    sending: Mutex<Sending>,
    answers_since_flush: AtomicU32,
}

/// One plan's hold on the outbox, from its first read to its commit: plans are made one at a
/// time (their file numbers and sequences follow each other), and the pending operations of
/// each vehicle it reads stay unsent until it ends, since its commit replaces them. Dropping
/// it (committed or not) lets them go.
#[derive(Debug)]
pub struct Planning<'o> {
    outbox: &'o Outbox,
    _one_at_a_time: MutexGuard<'o, ()>,
    /// The pending operations seen of each vehicle kept back: those a commit replaces.
    pending: HashMap<(u64, String), Vec<u64>>,
}

impl Planning<'_> {
    /// A vehicle of the organization as the plan sees it: where it is, its record and its
    /// queued operations (read only when the record says it has some), read at one instant:
    /// an answer recorded between the reads would be in neither, so they are read again
    /// then. A vehicle with pending operations is kept back from sending until the plan ends.
    pub fn vehicle(
        &mut self,
        organization_id: u64,
        vin: &str,
    ) -> Result<Option<(VehicleKey, VehicleRecord, Vec<Queued>)>, OutboxError> {
        let state = self.outbox.state();
        loop {
            let Some((key, record)) = state.find_vin(organization_id, vin)? else {
                return Ok(None);
            };
            // Only a plan queues, and this is the plan: nothing is queued for it meanwhile.
            if record.queued == 0 {
                return Ok(Some((key, record, Vec::new())));
            }
            let queued = self.queued_ops(organization_id, vin)?;
            match state.find_vin(organization_id, vin)? {
                Some((again, now)) if again == key && now == record => {
                    return Ok(Some((key, record, queued)))
                }
                // An answer landed between the reads.
                _ => continue,
            }
        }
    }

    /// One vehicle's queued operations, in order, each said in flight or not; when some are
    /// pending, the vehicle is kept back from sending until the plan ends.
    fn queued_ops(&mut self, organization_id: u64, vin: &str) -> Result<Vec<Queued>, OutboxError> {
        let mut sending = self.outbox.sending();
        let queued = self
            .outbox
            .read_queue(organization_id, vin, &sending.in_flight)?;
        let pending: Vec<u64> = queued
            .iter()
            .filter(|q| !q.in_flight)
            .map(|q| q.seq)
            .collect();
        let vehicle = (organization_id, vin.to_owned());
        if pending.is_empty() {
            if self.pending.remove(&vehicle).is_some() {
                sending.kept.remove(&vehicle);
            }
        } else {
            sending.kept.insert(vehicle.clone());
            self.pending.insert(vehicle, pending);
        }
        Ok(queued)
    }

    /// The pending operations of a vehicle this plan read: those its commit replaces. None
    /// were taken since (the vehicle was kept back); one handed out before and given back
    /// since stays, as the plan counted it to land.
    fn replaced(&self, organization_id: u64, vin: &str) -> &[u64] {
        self.pending
            .get(&(organization_id, vin.to_owned()))
            .map_or(&[], Vec::as_slice)
    }
}

impl Drop for Planning<'_> {
    fn drop(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut sending = self.outbox.sending();
        for vehicle in self.pending.keys() {
            sending.kept.remove(vehicle);
        }
    }
}

impl Outbox {
    pub fn new(state: State) -> Outbox {
        Outbox {
            state,
            planning: Mutex::new(()),
            sending: Mutex::new(Sending::default()),
            answers_since_flush: AtomicU32::new(0),
        }
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    /// Starts a plan: waits for the one in progress, if any, to end. See [`Planning`].
    pub fn planning(&self) -> Planning<'_> {
        Planning {
            outbox: self,
            _one_at_a_time: self.planning.lock().unwrap_or_else(PoisonError::into_inner),
            pending: HashMap::new(),
        }
    }

    /// Whether a plan in progress keeps operations back (they go out once it ends).
    pub fn keeps_back(&self) -> bool {
        !self.sending().kept.is_empty()
    }

    /// For a moment: what is in flight and kept back.
    fn sending(&self) -> MutexGuard<'_, Sending> {
        self.sending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Operations in the outbox.
    pub fn len(&self) -> usize {
        self.state.queue_len()
    }

    pub fn is_empty(&self) -> bool {
        self.state.queue_is_empty()
    }

    /// Every queued operation, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = Result<Entry, OutboxError>> + '_ {
        self.state.queued(0..=u64::MAX).map(|e| Ok(e?))
    }

    /// One vehicle's queued operations, in order.
    fn read_queue(
        &self,
        organization_id: u64,
        vin: &str,
        in_flight: &HashSet<u64>,
    ) -> Result<Vec<Queued>, OutboxError> {
        Ok(self
            .state
            .queued_of(organization_id, vin)?
            .into_iter()
            .map(|entry| Queued {
                seq: entry.seq,
                in_flight: in_flight.contains(&entry.seq),
                op: entry.op,
            })
            .collect())
    }

    /// Commits a plan: its operations, the replaced pending ones, the vehicles' records, the
    /// file's record and the feed's last applied file, in one transaction; then flushes.
    /// A held or already applied plan records only the file (an already applied full
    /// snapshot also its as-of time, when newer: a re-drop confirms the lot). Returns the number the file is
    /// filed under. The pending operations replaced are those `planning` read (the in-flight
    /// ones stay: they are projected). The caller writes the state's markers once it let go
    /// of `planning` (they count every vehicle).
    pub(crate) fn commit(&self, plan: &Plan, planning: &Planning) -> Result<u64, OutboxError> {
        let org = plan.organization_id;
        let now = state::now();
        let applies = plan.applies();
        let replaced: Vec<(&str, &[u64])> = match applies {
            true => plan
                .changes
                .iter()
                .filter(|(_, c)| c.supersede)
                .map(|(vin, _)| (vin.as_str(), planning.replaced(org, vin)))
                .collect(),
            false => Vec::new(),
        };
        let outcome = |first_seq: Option<u64>, last_seq: Option<u64>| match &plan.verdict {
            Verdict::Apply { forced } => FileOutcome::Queued {
                ops: plan.ops.len() as u64,
                first_seq,
                last_seq,
                rejected_records: plan.counts.rejected_records,
                forced: *forced,
            },
            Verdict::Held { reasons } => FileOutcome::Held {
                reason: reasons.join("; "),
            },
            Verdict::AlreadyApplied { same_as, .. } => FileOutcome::AlreadyApplied {
                same_as: same_as.clone(),
            },
            Verdict::Superseded { newer, .. } => FileOutcome::Superseded {
                newer: newer.clone(),
            },
        };
        let filed = self.state.transaction(|tx: &StateTx| -> TxResult<u64> {
            let mut counters = tx.counters()?;
            let mut next_seq = tx.next_seq()?;
            let file_no = tx.next_file_no()?;
            let (mut first_seq, mut last_seq) = (None, None);
            // Each vehicle's events of this plan, for its history.
            let mut events: BTreeMap<&str, Vec<Event>> = BTreeMap::new();
            let event = |what| Event::new(now, Some(file_no), what);
            if let Verdict::Held { .. } = plan.verdict {
                for planned in &plan.ops {
                    let line = plan.changes.get(&planned.vin).and_then(|c| c.line);
                    let op = history::op_code(planned.op.name());
                    events
                        .entry(planned.vin.as_str())
                        .or_default()
                        .push(event(What::Held { op, line }));
                }
            }
            if applies {
                let forced = matches!(plan.verdict, Verdict::Apply { forced: true });
                let mut removed: HashMap<&str, u32> = HashMap::new();
                for (vin, seqs) in &replaced {
                    let mut gone = Vec::new();
                    for &seq in *seqs {
                        if let Some(entry) = tx.dequeue(seq)? {
                            counters.superseded += 1;
                            *removed.entry(vin).or_default() += 1;
                            gone.push(seq);
                            // Never answered: its queueing is told now.
                            events
                                .entry(vin)
                                .or_default()
                                .push(history::queued_event(&entry));
                        }
                    }
                    if !gone.is_empty() {
                        events
                            .entry(vin)
                            .or_default()
                            .push(event(What::Replaced { seqs: gone }));
                    }
                }
                for planned in &plan.ops {
                    let seq = next_seq;
                    next_seq += 1;
                    first_seq.get_or_insert(seq);
                    last_seq = Some(seq);
                    let change = plan.changes.get(&planned.vin);
                    let line = change.and_then(|c| c.line);
                    let changed = match &planned.op {
                        Op::Update(p) => {
                            let before = tx.acknowledged_payload(org, &planned.vin)?;
                            history::changed_fields(before.as_ref(), p)
                        }
                        _ => Vec::new(),
                    };
                    let absent = match (&planned.op, line) {
                        (Op::MarkSold, None) => change.and_then(|c| c.absent),
                        _ => None,
                    };
                    // Told in the vehicle's history with the service's answer.
                    let queuing = Queuing {
                        line,
                        changed,
                        forced: forced && absent.is_some(),
                        absent,
                    };
                    let entry = Entry {
                        seq,
                        organization_id: org,
                        location_id: planned.location_id,
                        vin: planned.vin.clone(),
                        op: planned.op.clone(),
                        file: plan.file.name.clone(),
                        file_no: Some(file_no),
                        queued_at: now,
                        queuing,
                    };
                    tx.enqueue(&entry)?;
                    counters.queued += 1;
                }
                for protection in &plan.protected {
                    events
                        .entry(protection.vin.as_str())
                        .or_default()
                        .push(event(What::Protected {
                            by: protection.by.name().to_owned(),
                            line: protection.line,
                            value: protection.value.clone(),
                        }));
                }
                for (vin, change) in &plan.changes {
                    let indexed = tx.location_of(org, vin)?;
                    let location_id = indexed.unwrap_or(change.location_id);
                    let stored = tx.vehicle(org, location_id, vin)?;
                    let mut record = match (stored.clone(), &change.learned) {
                        (Some(record), _) => record,
                        // Found on the service's list: known as the list showed it.
                        (None, Some(learned)) => {
                            if let Some(payload) = &learned.payload {
                                tx.put_payload(org, location_id, vin, payload)?;
                            }
                            VehicleRecord {
                                service_id: Some(learned.service_id),
                                digest: Some(learned.digest),
                                sold: learned.sold,
                                file: plan.file.name.clone(),
                                first_seen: now,
                                ..VehicleRecord::default()
                            }
                        }
                        (None, None) if change.new_ops > 0 || change.new_record => VehicleRecord {
                            first_seen: now,
                            ..VehicleRecord::default()
                        },
                        (None, None) => continue,
                    };
                    if let Some(learned) = &change.learned {
                        let adopted = event(What::Adopted {
                            service_id: learned.service_id,
                        });
                        events.entry(vin.as_str()).or_default().insert(0, adopted);
                    }
                    if let (Some(absent @ 1..), 0) = (change.absent, change.new_ops) {
                        let kept = plan.protected.iter().any(|p| &p.vin == vin);
                        if !kept {
                            events
                                .entry(vin.as_str())
                                .or_default()
                                .push(event(What::Waiting { absent }));
                        }
                    }
                    let gone = removed.get(vin.as_str()).copied().unwrap_or(0);
                    record.queued = (record.queued + change.new_ops).saturating_sub(gone);
                    if let Some(absent) = change.absent {
                        record.absent = absent;
                    }
                    if change.new_ops > 0 {
                        record.file = plan.file.name.clone();
                    }
                    if let Some(o) = &change.ownership {
                        record.owner = o.owner.clone();
                        record.shared = o.shared.clone();
                    }
                    let unwanted = change.drop_stub
                        && !record.exists()
                        && record.queued == 0
                        && record.rejected.is_none();
                    // A record the plan left as it was keeps its time and is not written
                    // again: `updated_at` says when its state last changed (a sold car is
                    // forgotten that long after, `[state] keep_sold_days`).
                    if !unwanted && indexed.is_some() && stored.as_ref() == Some(&record) {
                        continue;
                    }
                    record.updated_at = now;
                    if unwanted {
                        tx.remove_vehicle(org, location_id, vin)?;
                        tx.unindex_vin(org, vin)?;
                    } else {
                        tx.put_vehicle(org, location_id, vin, &record)?;
                        if indexed.is_none() {
                            tx.index_vin(org, vin, location_id)?;
                        }
                    }
                }
                let mut feed = tx.feed(&plan.feed)?;
                feed.applied(AppliedFile {
                    name: plan.file.name.clone(),
                    sha256: plan.file.sha256.clone(),
                    at: now,
                    records: plan.records,
                });
                if let Some(columns) = &plan.columns {
                    feed.columns = Some(columns.clone());
                }
                if let Some(snapshot) = &plan.snapshot {
                    feed.future_dated = snapshot.future.clone();
                    for &location in &snapshot.locations {
                        feed.snapshots.insert(
                            location,
                            state::SnapshotMark {
                                name: plan.file.name.clone(),
                                as_of: snapshot.as_of,
                            },
                        );
                    }
                }
                tx.put_feed(&plan.feed, &feed)?;
                for (location_id, vins) in &plan.listings {
                    let tail = (plan.tails.iter()).find(|(l, _)| l == location_id);
                    let listing = ListingOf {
                        feed: &plan.feed,
                        file: &plan.file.name,
                        file_no,
                        at: now,
                        vins,
                        tail: tail.map_or(&[][..], |(_, t)| t),
                    };
                    tx.put_listing(org, *location_id, &plan.feed, &listing)?;
                }
            }
            if let (Verdict::AlreadyApplied { .. }, Some(snapshot)) =
                (&plan.verdict, &plan.snapshot)
            {
                // A re-drop of the last applied snapshot confirms the lot as of its own time: a
                // snapshot older than it (a held one released later) is superseded by it.
                let mut feed = tx.feed(&plan.feed)?;
                let mut newer = feed.future_dated != snapshot.future;
                feed.future_dated = snapshot.future.clone();
                for &location in &snapshot.locations {
                    let mark = feed.snapshots.get(&location);
                    if mark.is_none_or(|m| m.as_of < snapshot.as_of) {
                        let mark = state::SnapshotMark {
                            name: plan.file.name.clone(),
                            as_of: snapshot.as_of,
                        };
                        feed.snapshots.insert(location, mark);
                        newer = true;
                    }
                }
                if newer {
                    tx.put_feed(&plan.feed, &feed)?;
                }
            }
            let file = FileRecord {
                feed: plan.feed.clone(),
                name: plan.file.name.clone(),
                sha256: plan.file.sha256.clone(),
                seen_at: now,
                outcome: outcome(first_seq, last_seq),
            };
            tx.put_file(file_no, &file)?;
            for (vin, list) in events {
                tx.append_history(org, vin, list, now)?;
            }
            tx.set_next_file_no(file_no + 1)?;
            tx.set_next_seq(next_seq)?;
            tx.set_counters(&counters)?;
            Ok(file_no)
        })?;
        if let Err(e) = self.state.prune(now) {
            tracing::warn!(error = %crate::text::Chain(&e), "cannot let go of what the state no longer keeps");
        }
        self.state.flush()?;
        Ok(filed)
    }

    /// Records a file that was held without a plan (it stayed incomplete), so that
    /// `lotsync release` knows it.
    pub fn record_held(
        &self,
        feed: &str,
        name: &str,
        sha256: &str,
        reason: &str,
    ) -> Result<(), OutboxError> {
        let record = FileRecord {
            feed: feed.to_owned(),
            name: name.to_owned(),
            sha256: sha256.to_owned(),
            seen_at: state::now(),
            outcome: FileOutcome::Held {
                reason: reason.to_owned(),
            },
        };
        {
            // Between plans: the number a plan will be filed under can be known before its
            // commit (see `diff::diff_file_drafted`).
            let _planning = self.planning();
            self.state.transaction(|tx: &StateTx| -> TxResult<()> {
                let file_no = tx.next_file_no()?;
                tx.put_file(file_no, &record)?;
                Ok(tx.set_next_file_no(file_no + 1)?)
            })?;
        }
        self.state.write_markers();
        Ok(())
    }

    /// Where a planned file's operations are: what the service answered so far, and what is
    /// still queued, by kind.
    pub fn progress(&self, file_no: u64) -> Result<FileProgress, OutboxError> {
        let delivered = self.state.delivered(file_no)?;
        let mut queued = OpCounts::default();
        if let Some(FileRecord {
            outcome:
                FileOutcome::Queued {
                    first_seq: Some(first),
                    last_seq: Some(last),
                    ..
                },
            ..
        }) = self.state.file(file_no)?
        {
            for entry in self.state.queued(first..=last) {
                entry?.op.count_in(&mut queued);
            }
        }
        Ok(FileProgress { delivered, queued })
    }

    /// Records what the service's list showed ([`Finding`]) and, for a rebuilt state, each
    /// feed's last applied file, in one transaction; then flushes. A finding the state has
    /// moved past meanwhile is left out: a Restore of a VIN the state knows, a Forget of a
    /// vehicle with operations queued or back in stock, an Id of a VIN it does not know.
    pub fn record_findings(
        &self,
        organization_id: u64,
        findings: &[Finding],
        feeds: &[(String, AppliedFile)],
    ) -> Result<(), OutboxError> {
        let org = organization_id;
        let now = state::now();
        self.state.transaction(|tx: &StateTx| -> TxResult<()> {
            let told = |vin: &str, what: What| -> TxResult<()> {
                Ok(tx.append_history(org, vin, vec![Event::new(now, None, what)], now)?)
            };
            for finding in findings {
                let vin = match finding {
                    Finding::Id { vin, .. }
                    | Finding::Restore { vin, .. }
                    | Finding::Forget { vin } => vin,
                };
                match (finding, tx.location_of(org, vin)?) {
                    (
                        Finding::Restore {
                            service_id,
                            sold,
                            payload,
                            file,
                            ..
                        },
                        None,
                    ) => {
                        let location_id = payload.location_id;
                        let record = VehicleRecord {
                            service_id: Some(*service_id),
                            digest: Some(payload_digest(payload)),
                            sold: *sold,
                            file: file.clone(),
                            first_seen: now,
                            updated_at: now,
                            ..VehicleRecord::default()
                        };
                        tx.put_vehicle(org, location_id, vin, &record)?;
                        tx.put_payload(org, location_id, vin, payload)?;
                        tx.index_vin(org, vin, location_id)?;
                        told(
                            vin,
                            What::Restored {
                                service_id: *service_id,
                                sold: *sold,
                                file: file.clone(),
                            },
                        )?;
                    }
                    (Finding::Id { service_id, .. }, Some(location_id)) => {
                        let Some(mut record) = tx.vehicle(org, location_id, vin)? else {
                            continue;
                        };
                        if record.service_id != Some(*service_id) {
                            told(
                                vin,
                                What::IdLearned {
                                    service_id: *service_id,
                                },
                            )?;
                        }
                        record.service_id = Some(*service_id);
                        record.updated_at = now;
                        tx.put_vehicle(org, location_id, vin, &record)?;
                    }
                    (Finding::Forget { .. }, Some(location_id)) => {
                        let Some(record) = tx.vehicle(org, location_id, vin)? else {
                            continue;
                        };
                        if record.queued > 0 || !record.sold {
                            continue;
                        }
                        tx.remove_vehicle(org, location_id, vin)?;
                        tx.unindex_vin(org, vin)?;
                        told(vin, What::Forgotten)?;
                    }
                    _ => {}
                }
            }
            for (feed, applied) in feeds {
                let record = FeedRecord {
                    last_applied: Some(applied.clone()),
                    ..FeedRecord::default()
                };
                tx.put_feed(feed, &record)?;
            }
            Ok(())
        })?;
        self.state.flush()?;
        Ok(())
    }

    /// Adds what a rebuild read in the archive to the vehicles' history, in one transaction
    /// (see [`history`]); flushed with what the rebuild commits next.
    pub fn record_history(
        &self,
        organization_id: u64,
        told: &HashMap<String, Vec<Event>>,
    ) -> Result<(), OutboxError> {
        let now = state::now();
        self.state.transaction(|tx: &StateTx| -> TxResult<()> {
            for (vin, events) in told {
                tx.append_history(organization_id, vin, events.clone(), now)?;
            }
            Ok(())
        })
    }

    /// Hands out up to `max` operations of `organization_id` to send, marking them in flight:
    /// the oldest first, and of each vehicle only its next one (the rest wait for its answer).
    /// Another organization's operations are passed over, never counted against `max`: a
    /// state holding two organizations' queues (an `organization_id` changed, or a state
    /// shared by two configs) never starves the one being delivered.
    pub fn take(&self, organization_id: u64, max: usize) -> Result<Vec<Entry>, OutboxError> {
        let mut out = Vec::new();
        match self.take_into(organization_id, max, &mut out) {
            Ok(()) => Ok(out),
            Err(e) => {
                // What was marked goes back: the caller gets none of it.
                for entry in &out {
                    self.give_back(entry.seq);
                }
                Err(e)
            }
        }
    }

    fn take_into(
        &self,
        organization_id: u64,
        max: usize,
        out: &mut Vec<Entry>,
    ) -> Result<(), OutboxError> {
        let mut waiting: HashSet<String> = HashSet::new();
        // Only the operations handed out are read whole.
        for head in self.state.queue_heads() {
            if out.len() >= max {
                break;
            }
            let head = head?;
            if head.organization_id != organization_id {
                continue;
            }
            if !waiting.insert(head.vin.clone()) {
                continue; // an earlier operation of this vehicle is queued
            }
            // The lock for this one entry only: a plan reading the vehicle's queue sees the
            // operation handed out or not, never half-way.
            {
                let mut sending = self.sending();
                if sending.in_flight.contains(&head.seq)
                    || sending.kept.contains(&(organization_id, head.vin.clone()))
                {
                    continue;
                }
                sending.in_flight.insert(head.seq);
            }
            // Seen before it was marked: answered, or replaced by a plan, since. Read once
            // marked (no answer or plan removes it any more), out of the lock.
            match self.state.queued_entry(head.seq) {
                Ok(Some(entry)) => out.push(entry),
                Ok(None) => self.give_back(head.seq),
                Err(e) => {
                    self.give_back(head.seq);
                    return Err(e.into());
                }
            }
        }
        Ok(())
    }

    /// An operation handed out goes back to the queue, unanswered (to be retried).
    pub fn give_back(&self, seq: u64) {
        self.sending().in_flight.remove(&seq);
    }

    /// Records the service's answer to an operation: removes it from the outbox and updates
    /// the vehicle in one transaction. Flushes every [`FLUSH_EVERY`] answers.
    pub fn acknowledge(&self, seq: u64, answer: &Answer) -> Result<(), OutboxError> {
        self.acknowledge_sent(seq, answer, Sent::default())
    }

    /// [`Outbox::acknowledge`], with how the operation went out (kept in the vehicle's
    /// history, in the same transaction).
    pub fn acknowledge_sent(
        &self,
        seq: u64,
        answer: &Answer,
        sent: Sent,
    ) -> Result<(), OutboxError> {
        let now = state::now();
        let result = self.state.transaction(|tx: &StateTx| -> TxResult<()> {
            let Some(entry) = tx.dequeue(seq)? else {
                return Err(OutboxError::NotQueued(seq));
            };
            let org = entry.organization_id;
            let vin = entry.vin.as_str();
            let location_id = tx.location_of(org, vin)?.unwrap_or(entry.location_id);
            let mut new_location = location_id;
            let mut record = match tx.vehicle(org, location_id, vin)? {
                Some(record) => record,
                None => VehicleRecord {
                    first_seen: now,
                    ..VehicleRecord::default()
                },
            };
            let mut counters = tx.counters()?;
            match answer {
                Answer::Applied { service_id, sold } => {
                    counters.acknowledged += 1;
                    if service_id.is_some() {
                        record.service_id = *service_id;
                    }
                    match &entry.op {
                        Op::Create(p) | Op::Update(p) => {
                            record.digest = Some(payload_digest(p));
                            if p.location_id != location_id {
                                tx.remove_vehicle(org, location_id, vin)?;
                                new_location = p.location_id;
                            }
                            tx.put_payload(org, new_location, vin, p)?;
                        }
                        Op::MarkSold => {
                            record.sold = true;
                            record.absent = 0;
                        }
                        Op::MarkInStock => record.sold = false,
                    }
                    if let Some(sold) = sold {
                        record.sold = *sold;
                    }
                    if record
                        .rejected
                        .as_ref()
                        .is_some_and(|r| r.op == entry.op.name())
                    {
                        record.rejected = None;
                    }
                }
                Answer::Rejected { status, messages } => {
                    counters.rejected += 1;
                    record.rejected = Some(Rejection {
                        op: entry.op.name().to_owned(),
                        digest: entry.op.payload().map(payload_digest),
                        status: *status,
                        messages: messages.clone(),
                        at: now,
                    });
                }
            }
            record.queued = record.queued.saturating_sub(1);
            record.acked_seq = seq;
            record.updated_at = now;
            if let Some(file_no) = entry.file_no {
                tx.count_delivered(file_no, |counted| match answer {
                    Answer::Applied { .. } => entry.op.count_in(&mut counted.applied),
                    Answer::Rejected { .. } => counted.refused += 1,
                })?;
            }
            let (ok, messages) = match answer {
                Answer::Applied { .. } => (true, Vec::new()),
                Answer::Rejected { messages, .. } => (false, messages.clone()),
            };
            let status = match answer {
                Answer::Rejected { status, .. } => Some(*status),
                Answer::Applied { .. } => sent.status,
            };
            let answered = history::Answer {
                at: now,
                refused: !ok,
                status,
                sent: sent.at.filter(|&at| at != now),
                retries: sent.retries,
                messages,
                service_id: record
                    .service_id
                    .filter(|_| ok && matches!(entry.op, Op::Create(_))),
            };
            tx.answer_history(&entry, answered, now)?;
            tx.put_vehicle(org, new_location, vin, &record)?;
            tx.index_vin(org, vin, new_location)?;
            Ok(tx.set_counters(&counters)?)
        });
        self.sending().in_flight.remove(&seq);
        result?;
        if self.answers_since_flush.fetch_add(1, Ordering::AcqRel) + 1 >= FLUSH_EVERY {
            self.flush()?;
        }
        Ok(())
    }

    /// Makes every answer recorded so far durable, and counts them in the state's markers at
    /// most once a second (a marker that lags only says less).
    pub fn flush(&self) -> Result<(), OutboxError> {
        self.answers_since_flush.store(0, Ordering::Release);
        self.state.flush_marked(std::time::Duration::from_secs(1))?;
        Ok(())
    }

    /// [`Outbox::flush`], with the markers written whenever they were last (the end of a
    /// delivery, a stop).
    pub fn flush_marked(&self) -> Result<(), OutboxError> {
        self.answers_since_flush.store(0, Ordering::Release);
        self.state.flush_marked(std::time::Duration::ZERO)?;
        Ok(())
    }

    /// The conservation counters.
    pub fn counters(&self) -> Result<Counters, OutboxError> {
        Ok(self.state.counters()?)
    }

    /// `lotsync why`: what the state, the vehicles' history and the queue tell of the vehicles
    /// a VIN or stock number names (see [`history::explain`]).
    pub fn why(
        &self,
        organization_id: u64,
        query: &str,
        feed: Option<(&str, &[u64])>,
    ) -> Result<history::Why, OutboxError> {
        let mut pending = Vec::new();
        for entry in self.entries() {
            let entry = entry?;
            if entry.organization_id == organization_id {
                pending.push(entry);
            }
        }
        let question = history::Question {
            organization_id,
            query,
            feed,
            pending: &pending,
        };
        Ok(history::explain(&self.state, &question)?)
    }
}

/// A [`state::Listing`] as it is written, borrowed from the plan (a large lot's list is not
/// copied).
#[derive(serde::Serialize)]
struct ListingOf<'a> {
    feed: &'a str,
    file: &'a str,
    file_no: u64,
    at: i64,
    vins: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    tail: &'a [String],
}

#[cfg(test)]
mod queue_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::VehicleKey;

    /// An outbox in a fresh folder (removed when the guard drops), and the state's path.
    fn outbox(name: &str) -> (Outbox, std::path::PathBuf, tempfile::TempDir) {
        let tmp = crate::testing::temp_dir(&format!("outbox-{name}"));
        let dir = tmp.path().join("state");
        (Outbox::new(State::open(&dir).unwrap()), dir, tmp)
    }

    /// Plans `cars` (VIN, stock number's digits) of a delta feed into the outbox; the differ is handed back
    /// uncommitted, holding its [`Planning`].
    fn delta_plan<'o>(
        outbox: &'o Outbox,
        name: &str,
        cars: &[(&str, u64)],
    ) -> crate::diff::Differ<'o> {
        let rules = crate::diff::Rules {
            organization_id: 100,
            feed: "main".into(),
            mode: crate::diff::Mode::Delta,
            sold_after_absent: 1,
            max_sold_fraction: 1.0,
            locations: [10].into(),
            force: false,
            sibling_feeds: Default::default(),
        };
        let file = crate::diff::FileId {
            name: name.into(),
            sha256: name.into(),
        };
        let mut differ = crate::diff::Differ::new(outbox, rules, file).unwrap();
        for (line, (vin, price)) in cars.iter().enumerate() {
            let payload = VehiclePayload::new(10, format!("S{price}"), *vin);
            differ
                .accepted(&crate::mapper::Accepted {
                    line: line as u64 + 2,
                    payload,
                    sold: None,
                    warnings: Vec::new(),
                })
                .unwrap();
        }
        differ
    }

    /// `take` from another thread, within 2 s (a take that waits for the plan fails here).
    fn take_beside(outbox: &std::sync::Arc<Outbox>) -> Vec<String> {
        let (tx, rx) = std::sync::mpsc::channel();
        let outbox = outbox.clone();
        std::thread::spawn(move || {
            let taken = outbox.take(100, 10).unwrap();
            let _ = tx.send(taken.into_iter().map(|e| e.vin).collect::<Vec<_>>());
        });
        rx.recv_timeout(std::time::Duration::from_secs(2))
            .expect("take does not wait for the plan in progress")
    }

    /// A plan in progress holds back only the vehicles whose pending operations it read (its
    /// commit replaces them); the others are taken and answered meanwhile, and what it kept
    /// back goes out once it commits, replaced.
    #[test]
    fn a_plan_in_progress_keeps_back_only_the_vehicles_it_read() {
        let (outbox, dir, _tmp) = outbox("planning");
        let outbox = std::sync::Arc::new(outbox);
        delta_plan(
            &outbox,
            "day1.csv",
            &[("VINA", 1), ("VINB", 1), ("VINC", 1)],
        )
        .commit()
        .unwrap();
        let first = outbox.take(100, 1).unwrap();
        assert_eq!(first[0].vin, "VINA", "in flight before the plan");

        // The plan reads VINA (in flight: kept as it is) and VINB (pending: kept back).
        let differ = delta_plan(&outbox, "day2.csv", &[("VINA", 2), ("VINB", 2)]);
        let mut taken = take_beside(&outbox);
        taken.sort();
        assert_eq!(taken, ["VINC"], "VINB waits for the plan, VINC goes");
        let seq_c = outbox.entries().find_map(|e| {
            let e = e.unwrap();
            (e.vin == "VINC").then_some(e.seq)
        });
        outbox
            .acknowledge(
                seq_c.unwrap(),
                &Answer::Applied {
                    service_id: Some(3),
                    sold: None,
                },
            )
            .unwrap();
        outbox.give_back(first[0].seq);
        differ.commit().unwrap();

        // VINA's first create was in flight when read: it stays, before its update. VINB's
        // pending create was replaced by the new one.
        let ops: Vec<(String, &str)> = outbox
            .entries()
            .map(|e| {
                let e = e.unwrap();
                (e.vin, e.op.name())
            })
            .collect();
        assert_eq!(
            ops,
            [
                ("VINA".to_owned(), "create"),
                ("VINA".to_owned(), "update"),
                ("VINB".to_owned(), "create"),
            ],
        );
        let mut taken = take_beside(&outbox);
        taken.sort();
        assert_eq!(taken, ["VINA", "VINB"]);
        drop(outbox);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Findings are written as acknowledged facts: restored records with the payload's digest,
    /// ids learned, sold vehicles forgotten; the feeds' last applied files. One that no longer
    /// fits the state is left out.
    #[test]
    fn findings_restore_learn_and_forget() {
        let (outbox, dir, _tmp) = outbox("findings");
        let payload = VehiclePayload::new(11, "S1", "VIN1");
        let applied = AppliedFile {
            name: "day1.csv".into(),
            sha256: "ab".into(),
            at: 7,
            records: 0,
        };
        let restore = |vin: &str, sold| Finding::Restore {
            vin: vin.into(),
            service_id: 41,
            sold,
            payload: Box::new(VehiclePayload::new(11, "S", vin)),
            file: "day1.csv".into(),
        };
        outbox
            .record_findings(
                100,
                &[
                    Finding::Restore {
                        vin: "VIN1".into(),
                        service_id: 40,
                        sold: false,
                        payload: Box::new(payload.clone()),
                        file: "day1.csv".into(),
                    },
                    restore("VIN2", true),
                    Finding::Id {
                        vin: "UNKNOWN".into(),
                        service_id: 9,
                    },
                ],
                &[("main".into(), applied.clone())],
            )
            .unwrap();
        let state = outbox.state();
        let (key, record) = state.find_vin(100, "VIN1").unwrap().unwrap();
        assert_eq!(key, VehicleKey::new(100, 11, "VIN1"));
        assert_eq!(record.service_id, Some(40));
        assert_eq!(record.digest, Some(payload_digest(&payload)));
        assert_eq!(state.payload(&key).unwrap(), Some(payload));
        assert_eq!(
            state.feed("main").unwrap().unwrap().last_applied,
            Some(applied)
        );
        assert_eq!(
            state.vehicle_count(),
            2,
            "an id for an unknown VIN is left out"
        );

        outbox
            .record_findings(
                100,
                &[
                    restore("VIN1", true),
                    Finding::Id {
                        vin: "VIN1".into(),
                        service_id: 50,
                    },
                    Finding::Forget { vin: "VIN1".into() },
                    Finding::Forget { vin: "VIN2".into() },
                ],
                &[],
            )
            .unwrap();
        let (_, record) = state.find_vin(100, "VIN1").unwrap().unwrap();
        assert_eq!(record.service_id, Some(50), "learned");
        assert!(
            !record.sold,
            "a known VIN is not restored over, an in-stock one not forgotten"
        );
        assert!(state.find_vin(100, "VIN2").unwrap().is_none(), "forgotten");
        assert!(state
            .payload(&VehicleKey::new(100, 11, "VIN2"))
            .unwrap()
            .is_none());
        drop(outbox);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
