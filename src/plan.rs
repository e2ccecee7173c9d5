//! A plan: the operations one file (or one reconciliation) calls for, what they change in the
//! vehicles' bookkeeping, and whether it may be applied; with the [`Op`]s themselves and the
//! digest payloads are compared by ([`payload_digest`], a [`Digest`]), and operations counted
//! by kind ([`OpCounts`]).
//!
//! These are the types the stages hand each other: [`crate::diff`] and the reconciliation
//! make plans, [`crate::outbox`] commits them, [`crate::upload`] sends their operations. It
//! owns the types, not the rules that fill them (the diff, the reconciliation) nor their
//! storage (the outbox).

use crate::api::VehiclePayload;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// The feed name the reconciliation's plans are queued under, which no configured feed may
/// take (the config refuses it).
pub const RECONCILE_FEED: &str = "reconcile";

/// One call to make on the service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// POST /v1/inventory for a VIN the service does not have yet.
    Create(VehiclePayload),
    /// POST /v1/inventory (create-or-modify) with the changed payload.
    Update(VehiclePayload),
    /// POST /v1/inventory/{id}/sold.
    MarkSold,
    /// POST /v1/inventory/{id}/in-stock.
    MarkInStock,
}

impl Op {
    /// The name used in output and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Create(_) => "create",
            Op::Update(_) => "update",
            Op::MarkSold => "sold",
            Op::MarkInStock => "in_stock",
        }
    }

    /// Counts it in `counts`, by kind.
    pub fn count_in(&self, counts: &mut OpCounts) {
        match self {
            Op::Create(_) => counts.create += 1,
            Op::Update(_) => counts.update += 1,
            Op::MarkSold => counts.sold += 1,
            Op::MarkInStock => counts.in_stock += 1,
        }
    }

    pub fn payload(&self) -> Option<&VehiclePayload> {
        match self {
            Op::Create(p) | Op::Update(p) => Some(p),
            Op::MarkSold | Op::MarkInStock => None,
        }
    }
}

/// 128 bits of SHA-256: enough to tell payloads apart, half the bytes of the whole hash.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest(pub [u8; 16]);

impl Digest {
    /// A vehicle found on the service whose content lotsync did not send (adopted by the first
    /// diff of an empty state): every payload differs from it, so the next one listing it is
    /// sent. No SHA-256 prefix is all zeros in practice.
    pub const UNKNOWN: Digest = Digest([0; 16]);

    pub fn of(bytes: &[u8]) -> Digest {
        use sha2::Digest as _;
        let full = sha2::Sha256::digest(bytes);
        let mut out = [0; 16];
        out.copy_from_slice(&full[..16]);
        Digest(out)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let bad = || serde::de::Error::custom("a digest is 32 hex digits");
        if text.len() != 32 {
            return Err(bad());
        }
        let mut out = [0; 16];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
                .map_err(|_| bad())?;
        }
        Ok(Digest(out))
    }
}

/// Operations, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpCounts {
    pub create: u64,
    pub update: u64,
    pub sold: u64,
    pub in_stock: u64,
}

impl OpCounts {
    pub fn total(&self) -> u64 {
        self.create + self.update + self.sold + self.in_stock
    }
}

/// The digest of a payload's normalized form: what means nothing (the order of options) does
/// not change it. Image order is kept: the first photo is the listing's main one.
pub fn payload_digest(payload: &VehiclePayload) -> Digest {
    let json = if payload.options.is_sorted() {
        serde_json::to_vec(payload)
    } else {
        let mut sorted = payload.clone();
        sorted.options.sort();
        serde_json::to_vec(&sorted)
    };
    // A payload is plain strings and numbers: serializing it cannot fail.
    Digest::of(&json.unwrap_or_default())
}

/// The file a plan is for.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct FileId {
    /// The file's name (no directories).
    pub name: String,
    /// SHA-256 of its bytes, hex.
    pub sha256: String,
}

/// An operation with its vehicle.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedOp {
    /// For create and update the payload's location; for sold and in-stock where the vehicle is.
    pub location_id: u64,
    pub vin: String,
    pub op: Op,
}

/// What the plan does to one vehicle's record besides queueing operations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VinChange {
    /// Where its record is, or will be for a new vehicle.
    pub location_id: u64,
    /// Operations this plan queues for it.
    pub new_ops: u32,
    /// Its pending operations are replaced by this plan's.
    pub supersede: bool,
    /// New absence count.
    pub absent: Option<u32>,
    /// A vehicle the state does not know yet: its record is created.
    pub new_record: bool,
    /// A vehicle never created on the service and no longer wanted: its record goes.
    pub drop_stub: bool,
    /// A vehicle the state did not know, found on the service's list: its record is created
    /// with what the list showed, without a request.
    pub learned: Option<Learned>,
    /// The file's line that listed it (for its history).
    pub line: Option<u64>,
    /// Its new owner and shared feed ([`crate::state::VehicleRecord::owner`]).
    pub ownership: Option<Ownership>,
}

/// Who owns a vehicle: the feed whose file created it or last listed it, and another feed of
/// its location that lists it too.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ownership {
    pub owner: Option<String>,
    pub shared: Option<String>,
}

/// What the service's list showed of a vehicle the state did not know.
#[derive(Debug, Clone, PartialEq)]
pub struct Learned {
    pub service_id: u64,
    pub sold: bool,
    /// The file's payload's digest when the service shows the same fields
    /// ([`crate::diff::field_drift`]), else [`Digest::UNKNOWN`].
    pub digest: Digest,
    /// The file's payload, recorded as acknowledged when the service shows the same fields.
    pub payload: Option<Box<crate::api::VehiclePayload>>,
}

/// Per kind of outcome, vehicles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub create: u64,
    pub update: u64,
    pub sold: u64,
    pub in_stock: u64,
    pub unchanged: u64,
    /// Records the mapper rejected.
    pub rejected_records: u64,
    /// Payloads the service refused before, unchanged since: not re-sent.
    pub still_rejected: u64,
    /// Absent, but fewer times than `sold_after_absent`.
    pub absent_waiting: u64,
    /// Unknown vehicles the export lists as sold: not created.
    pub skipped_sold: u64,
    /// Vehicles already on the service that the state did not know (the first file of an
    /// empty state): their ids learned from the service's list, without a request.
    #[serde(default)]
    pub adopted: u64,
    /// Vehicles a full snapshot did not list validly but kept on the lot (neither sold nor
    /// changed): a rejected record stands for them, or another lot's latest snapshot lists
    /// them ([`Protection`]).
    #[serde(default)]
    pub protected: u64,
    /// In-stock vehicles a full snapshot left out that its feed does not own (known only from
    /// the service's list, or owned by another feed): never sold by its absence.
    #[serde(default)]
    pub not_owned: u64,
    /// Vehicles the file lists that another feed of the location lists too: not sold while
    /// either lists them.
    #[serde(default)]
    pub shared: u64,
}

/// Why a vehicle a full snapshot does not list validly is kept on the lot; the surest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProtectedBy {
    /// A rejected record carries its VIN.
    Vin,
    /// A rejected record carries its stock number, at its location.
    Stock,
    /// A rejected record's VIN is one typo away from its VIN: one character replaced, or two
    /// neighbours swapped.
    NearVin,
    /// The latest full snapshot of another location of the organization lists it: it moved
    /// there, and moves when that lot's next file lists it.
    OtherLocation,
}

impl ProtectedBy {
    /// Its name as the reports write it (`vin`, `stock`, `near_vin`, `other_location`).
    pub fn name(self) -> &'static str {
        match self {
            ProtectedBy::Vin => "vin",
            ProtectedBy::Stock => "stock",
            ProtectedBy::NearVin => "near_vin",
            ProtectedBy::OtherLocation => "other_location",
        }
    }
}

/// A vehicle absent from a full snapshot that is kept on the lot, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protection {
    /// The vehicle kept.
    pub vin: String,
    /// Where it is (its record's location).
    pub location_id: u64,
    pub by: ProtectedBy,
    /// The rejected record's line (none for [`ProtectedBy::OtherLocation`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// What matched: the record's VIN or stock number as written, or the other location's
    /// file.
    pub value: String,
    /// [`ProtectedBy::OtherLocation`]: the location whose latest snapshot lists it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listed_at: Option<u64>,
    /// [`ProtectedBy::OtherLocation`]: an update moving it there is queued (its last payload
    /// with the other `location_id`).
    #[serde(default)]
    pub moved: bool,
    /// Vehicles the same record keeps: more than one when its stock number or VIN matches
    /// several the file does not list, and then every one is kept (never wrongly sold is the
    /// safe side).
    #[serde(default = "one")]
    pub vehicles: u32,
}

fn one() -> u32 {
    1
}

/// One line for a person (values come from outside: escaped).
impl std::fmt::Display for Protection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::text::Escaped;
        let (vin, at) = (&self.vin, self.location_id);
        let line = self.line.unwrap_or(0);
        match self.by {
            ProtectedBy::Vin => write!(
                f,
                "line {line} keeps {vin} (location {at}) on the lot: the rejected record carries \
                 its VIN"
            )?,
            ProtectedBy::Stock => write!(
                f,
                "line {line} keeps {vin} (location {at}) on the lot: the rejected record carries \
                 its stock number {}",
                Escaped(&self.value)
            )?,
            ProtectedBy::NearVin => write!(
                f,
                "line {line} keeps {vin} (location {at}) on the lot: the rejected record's VIN \
                 {} is one typo away from it",
                Escaped(&self.value)
            )?,
            ProtectedBy::OtherLocation => {
                return write!(
                    f,
                    "{vin} (location {at}) is not sold: the latest snapshot of location {} ({}) \
                     lists it; {}",
                    self.listed_at.unwrap_or(0),
                    Escaped(&self.value),
                    if self.moved {
                        "it is moved there"
                    } else {
                        "it moves there when that lot's next file lists it"
                    }
                )
            }
        }
        write!(f, "; not sold, not changed")?;
        if self.vehicles > 1 {
            write!(
                f,
                " (the record matches {} vehicles this file does not list: all are kept, the \
                 safe side; correct the record)",
                self.vehicles
            )?;
        }
        Ok(())
    }
}

/// One location's figures for the safety guard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GuardCount {
    pub in_stock: u64,
    /// In-stock vehicles the file leaves out: sold now, or counted absent under the grace.
    pub left_out: u64,
    pub would_sell: u64,
    pub accepted: u64,
}

/// Whether the plan may be queued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Queue it (`forced`: the guard would have held it, and was overridden).
    Apply { forced: bool },
    /// The safety guard holds it until `lotsync release`.
    Held { reasons: Vec<String> },
    /// The same content as the file last applied for this feed: nothing to do.
    AlreadyApplied { same_as: String, at: i64 },
    /// A full snapshot as of `as_of`, older than `newer` (as of `newer_as_of`), which was
    /// applied already for one of its locations: nothing of it is queued.
    Superseded {
        newer: String,
        newer_as_of: i64,
        as_of: i64,
    },
}

impl Verdict {
    /// Why a superseded file is not applied, in one sentence naming the newer file.
    pub fn superseded_reason(newer: &str, newer_as_of: i64, as_of: i64) -> String {
        format!(
            "older than {} (as of {} UTC), a full snapshot applied already: this one is as of \
             {} UTC, and applying it would undo what the newer one did",
            crate::text::Escaped(newer),
            crate::clock::utc_unix(newer_as_of),
            crate::clock::utc_unix(as_of)
        )
    }
}

/// A full snapshot's as-of time and the locations it speaks for, recorded per location when
/// its plan is applied.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    pub as_of: i64,
    pub locations: Vec<u64>,
    /// Its date was in the future when it was read: taken as of that moment instead.
    pub future: Option<FutureDated>,
}

/// A full snapshot whose name or modification time said a moment after it was read (a DMS
/// clock ahead, a wrong name): taken as of the moment it was read. The state keeps the last
/// applied one per feed for `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FutureDated {
    /// The file's name.
    pub file: String,
    /// What its date said and when it was read (Unix seconds, UTC).
    pub said: i64,
    pub read_at: i64,
    /// `name` or `modification time`.
    pub by: String,
}

impl std::fmt::Display for FutureDated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}'s {} says {} UTC, later than it was read ({} UTC): taken as of then; check the \
             DMS's clock (or the profile's name_date)",
            crate::text::Escaped(&self.file),
            self.by,
            crate::clock::utc_unix(self.said),
            crate::clock::utc_unix(self.read_at)
        )
    }
}

impl Default for Verdict {
    fn default() -> Self {
        Verdict::Apply { forced: false }
    }
}

/// A file's plan.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    pub organization_id: u64,
    pub feed: String,
    pub file: FileId,
    pub verdict: Verdict,
    /// In order; the operations of one vehicle keep theirs.
    pub ops: Vec<PlannedOp>,
    pub changes: BTreeMap<String, VinChange>,
    pub counts: Counts,
    /// Full snapshots: the guard's figures per location.
    pub guard: Vec<(u64, GuardCount)>,
    /// The number the state files it under, once committed.
    pub file_no: Option<u64>,
    /// Records the file held (accepted or rejected).
    pub records: u64,
    /// Full snapshots: the vehicles kept on the lot though the file does not list them
    /// validly.
    pub protected: Vec<Protection>,
    /// Full snapshots, while they are committed: per location it speaks for, the VINs it
    /// lists (validly, or by a rejected record that keeps them), sorted. The outbox stores
    /// them as the location's latest listing ([`crate::state::Listing`]); the committed plan
    /// handed back no longer holds them.
    pub listings: Vec<(u64, Vec<String>)>,
    /// With the listings: per location, the last VINs the file listed there, in its order
    /// ([`crate::state::Listing::tail`]).
    pub tails: Vec<(u64, Vec<String>)>,
    /// A full snapshot's as-of time and locations.
    pub snapshot: Option<Snapshot>,
    /// The columns the file bound by their values, for the feed's next file.
    pub columns: Option<crate::mapper::KeptColumns>,
}

impl Plan {
    /// An empty plan of `feed`'s `file`, to apply.
    pub fn new(organization_id: u64, feed: &str, file: FileId) -> Plan {
        Plan {
            organization_id,
            feed: feed.to_owned(),
            file,
            verdict: Verdict::Apply { forced: false },
            ops: Vec::new(),
            changes: BTreeMap::new(),
            counts: Counts::default(),
            guard: Vec::new(),
            file_no: None,
            records: 0,
            protected: Vec::new(),
            listings: Vec::new(),
            tails: Vec::new(),
            snapshot: None,
            columns: None,
        }
    }

    pub(crate) fn change(&mut self, vin: &str, location_id: u64) -> &mut VinChange {
        self.changes
            .entry(vin.to_owned())
            .or_insert_with(|| VinChange {
                location_id,
                ..VinChange::default()
            })
    }

    pub(crate) fn push(&mut self, location_id: u64, vin: &str, op: Op, new_record: bool) {
        let counter = match &op {
            Op::Create(_) => &mut self.counts.create,
            Op::Update(_) => &mut self.counts.update,
            Op::MarkSold => &mut self.counts.sold,
            Op::MarkInStock => &mut self.counts.in_stock,
        };
        *counter += 1;
        let change = self.change(vin, location_id);
        change.new_ops += 1;
        change.new_record |= new_record;
        change.drop_stub = false;
        self.ops.push(PlannedOp {
            location_id,
            vin: vin.to_owned(),
            op,
        });
    }

    /// Spreads the vehicles whose operations begin with a transition (sold, back in stock)
    /// evenly among the others, each vehicle's operations kept together and in their order,
    /// and each kind in its own order. The queue is delivered in this order, and a plan lists
    /// its sales last (the absent are judged after the file): when the service takes long for
    /// one endpoint, those calls alone held every slot in flight at the end of a delivery (150
    /// sales of 2 s each ran alone for 19 s at 16 in flight); spread, they overlap the writes.
    pub(crate) fn spread_transitions(&mut self) {
        let mut units: Vec<Vec<PlannedOp>> = Vec::new();
        let mut unit_of: HashMap<String, usize> = HashMap::new();
        for planned in std::mem::take(&mut self.ops) {
            match unit_of.get(&planned.vin) {
                Some(&i) => units[i].push(planned),
                None => {
                    unit_of.insert(planned.vin.clone(), units.len());
                    units.push(vec![planned]);
                }
            }
        }
        let is_transition =
            |unit: &Vec<PlannedOp>| matches!(unit[0].op, Op::MarkSold | Op::MarkInStock);
        let (transitions, writes): (Vec<_>, Vec<_>) = units.into_iter().partition(is_transition);
        let (t_total, w_total) = (transitions.len(), writes.len());
        let (mut t_done, mut w_done) = (0, 0);
        let mut transitions = transitions.into_iter().peekable();
        let mut writes = writes.into_iter().peekable();
        loop {
            // A transition goes next once the writes before it reached its share of them (a
            // plan of one write and one sale keeps its order).
            let transition_next = match (transitions.peek(), writes.peek()) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(_), Some(_)) => (t_done + 1) * w_total <= w_done * t_total,
            };
            let unit = if transition_next {
                t_done += 1;
                transitions.next()
            } else {
                w_done += 1;
                writes.next()
            };
            self.ops.extend(unit.into_iter().flatten());
        }
    }

    /// Whether committing it queues its operations.
    pub fn applies(&self) -> bool {
        matches!(self.verdict, Verdict::Apply { .. })
    }
}

impl FileId {
    /// Names and hashes a file (SHA-256 of its bytes, read in blocks).
    pub fn of_path(path: &std::path::Path) -> std::io::Result<FileId> {
        use sha2::Digest as _;
        use std::io::Read;
        let mut file = std::fs::File::open(path)?;
        let mut hasher = sha2::Sha256::new();
        let mut block = vec![0; 256 * 1024];
        loop {
            let n = file.read(&mut block)?;
            if n == 0 {
                break;
            }
            hasher.update(&block[..n]);
        }
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let sha256 = hex::encode(hasher.finalize());
        Ok(FileId { name, sha256 })
    }
}

#[cfg(test)]
mod tests {
    use super::{Digest, Op, Plan, ProtectedBy};

    #[test]
    fn digest_round_trips_as_hex() {
        let d = Digest::of(b"abc");
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(json, "\"ba7816bf8f01cfea414140de5dae2223\"");
        assert_eq!(serde_json::from_str::<Digest>(&json).unwrap(), d);
        assert!(serde_json::from_str::<Digest>("\"xyz\"").is_err());
    }

    /// 90 updates then 10 sales, one vehicle back in stock and updated at the start: the sales
    /// come one in ten, each vehicle's operations together and in order.
    #[test]
    fn sales_are_spread_among_the_writes_and_each_vehicle_keeps_its_order() {
        let mut plan = Plan::default();
        plan.push(1, "BACK", Op::MarkInStock, false);
        let update = |vin: &str| Op::Update(crate::api::VehiclePayload::new(1, vin, vin));
        plan.push(1, "BACK", update("BACK"), false);
        for i in 0..89 {
            let vin = format!("W{i:02}");
            plan.push(1, &vin, update(&vin), false);
        }
        for i in 0..10 {
            plan.push(1, &format!("S{i}"), Op::MarkSold, false);
        }
        plan.spread_transitions();
        let order: Vec<(&str, &str)> = plan
            .ops
            .iter()
            .map(|o| (o.vin.as_str(), o.op.name()))
            .collect();
        assert_eq!(order.len(), 101);
        let back = order
            .iter()
            .position(|(v, _)| *v == "BACK")
            .expect("listed");
        assert_eq!(
            order[back..back + 2],
            [("BACK", "in_stock"), ("BACK", "update")]
        );
        let sales: Vec<usize> = (0..order.len()).filter(|&i| order[i].1 == "sold").collect();
        // Eleven transitions (BACK's and ten sales) among 89 writes: one about every nine.
        assert!(
            sales.windows(2).all(|w| (7..=11).contains(&(w[1] - w[0]))),
            "{sales:?}"
        );
        assert!(sales[0] >= 7, "not all at the start: {sales:?}");
        let names = |prefix: char| -> Vec<&str> {
            order
                .iter()
                .filter(|(v, _)| v.starts_with(prefix))
                .map(|(v, _)| *v)
                .collect()
        };
        let mut sorted = names('S');
        sorted.sort_unstable();
        assert_eq!(names('S'), sorted, "sales in their order");
        let mut sorted = names('W');
        sorted.sort_unstable();
        assert_eq!(names('W'), sorted, "writes in their order");
    }

    proptest::proptest! {
        /// Any plan: spreading keeps every operation, each vehicle's together and in their
        /// order, and each kind's vehicles in their order.
        #[test]
        fn spreading_keeps_every_operation_and_each_vehicles_order(
            units in proptest::collection::vec((0u8..4, 1usize..3), 0..60)
        ) {
            let mut plan = Plan::default();
            for (i, (kind, len)) in units.iter().enumerate() {
                let vin = format!("V{i:03}");
                for k in 0..*len {
                    let op = match (kind, k) {
                        (0, 0) => Op::MarkSold,
                        (1, 0) => Op::MarkInStock,
                        (2, _) | (1, _) => Op::Update(crate::api::VehiclePayload::new(1, &vin, &vin)),
                        _ => Op::Create(crate::api::VehiclePayload::new(1, &vin, &vin)),
                    };
                    plan.push(1, &vin, op, false);
                }
            }
            let before: Vec<(String, &'static str)> =
                plan.ops.iter().map(|o| (o.vin.clone(), o.op.name())).collect();
            plan.spread_transitions();
            let after: Vec<(String, &'static str)> =
                plan.ops.iter().map(|o| (o.vin.clone(), o.op.name())).collect();
            let mut sorted_before = before.clone();
            sorted_before.sort();
            let mut sorted_after = after.clone();
            sorted_after.sort();
            proptest::prop_assert_eq!(sorted_before, sorted_after, "every operation kept");
            // Each vehicle's operations together and in order.
            let mut vins: Vec<&str> = after.iter().map(|(v, _)| v.as_str()).collect();
            vins.dedup();
            let mut unique = vins.clone();
            unique.sort_unstable();
            unique.dedup();
            proptest::prop_assert_eq!(vins.len(), unique.len(), "a vehicle's operations together");
            for vin in &unique {
                let ops_of = |list: &[(String, &'static str)]| -> Vec<&'static str> {
                    list.iter().filter(|(v, _)| v == vin).map(|(_, o)| *o).collect()
                };
                proptest::prop_assert_eq!(ops_of(&before), ops_of(&after));
            }
            // Each kind's vehicles in their order.
            // The vehicles whose first operation is (or is not) a transition, in order.
            let first_ops = |list: &[(String, &'static str)], transitions: bool| -> Vec<String> {
                let mut seen: Vec<&str> = Vec::new();
                let mut out = Vec::new();
                for (v, o) in list {
                    if seen.contains(&v.as_str()) {
                        continue;
                    }
                    seen.push(v);
                    if matches!(*o, "sold" | "in_stock") == transitions {
                        out.push(v.clone());
                    }
                }
                out
            };
            proptest::prop_assert_eq!(first_ops(&before, true), first_ops(&after, true));
            proptest::prop_assert_eq!(first_ops(&before, false), first_ops(&after, false));
        }
    }

    /// The name a log field shows is the one the reports write.
    #[test]
    fn protected_by_names_are_the_reports_spelling() {
        for by in [
            ProtectedBy::Vin,
            ProtectedBy::Stock,
            ProtectedBy::NearVin,
            ProtectedBy::OtherLocation,
        ] {
            assert_eq!(serde_json::to_value(by).unwrap(), by.name());
        }
    }
}
