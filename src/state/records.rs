//! The values stored in the state's tables, as JSON (small, readable with any tool, and
//! tolerant of fields added later).

use super::{StateError, VehicleKey};
use crate::api::VehiclePayload;
use crate::plan::{Digest, OpCounts};
use serde::{Deserialize, Serialize};

/// What lotsync knows of one vehicle.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VehicleRecord {
    /// The service's id, once an answer carried it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_id: Option<u64>,
    /// Digest of the normalized payload the service last acknowledged; None while it has
    /// not acknowledged any (a create still queued).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
    /// Sold, as last acknowledged.
    #[serde(default)]
    pub sold: bool,
    /// Consecutive full snapshots of its location without it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub absent: u32,
    /// Its operations in the outbox.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub queued: u32,
    /// The last operation the service acknowledged (outbox sequence number).
    #[serde(default)]
    pub acked_seq: u64,
    /// The service's refusal of its last payload or transition; not re-sent until it changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<Rejection>,
    /// The file that last queued an operation for it.
    #[serde(default)]
    pub file: String,
    /// When lotsync first planned it, and when its state last changed (Unix seconds, UTC).
    #[serde(default)]
    pub first_seen: i64,
    #[serde(default)]
    pub updated_at: i64,
    /// The feed that owns it: the one whose file created it or last listed it. Only its own
    /// full snapshots sell it by absence. None: not owned (known only from the service's
    /// list), or a record from before owners were kept ([`crate::diff`] tells which).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Another feed of its location whose files list it too (a conflict): not sold while
    /// either lists it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl VehicleRecord {
    pub fn decode(bytes: &[u8]) -> Result<VehicleRecord, StateError> {
        decode(bytes, "vehicle record")
    }

    pub fn encode(&self) -> Result<String, StateError> {
        encode(self, "vehicle record")
    }

    /// Created on the service as far as lotsync knows.
    pub fn exists(&self) -> bool {
        self.digest.is_some()
    }
}

/// The service refused an operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rejection {
    /// The refused operation: `create`, `update`, `sold` or `in_stock`.
    pub op: String,
    /// The refused payload's digest (create and update).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
    pub status: u16,
    pub messages: Vec<String>,
    pub at: i64,
}

/// A stored vehicle, for export.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredVehicle {
    pub key: VehicleKey,
    pub record: VehicleRecord,
    pub payload: Option<VehiclePayload>,
}

/// One file planned against the state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileRecord {
    pub feed: String,
    /// The file's name as dropped (no directories: the inbox is known from the feed).
    pub name: String,
    pub sha256: String,
    pub seen_at: i64,
    pub outcome: FileOutcome,
}

/// What became of a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum FileOutcome {
    /// Its operations were queued (`first_seq..=last_seq`; none when nothing changed).
    Queued {
        ops: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first_seq: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_seq: Option<u64>,
        rejected_records: u64,
        /// The safety guard was overridden (`lotsync release` or `--force`).
        #[serde(default)]
        forced: bool,
    },
    /// The same content as the file last applied for its feed.
    AlreadyApplied { same_as: String },
    /// A full snapshot older than one already applied for its feed and location (`newer`):
    /// nothing was queued.
    Superseded { newer: String },
    /// The safety guard held it; nothing was queued.
    Held { reason: String },
}

/// What the service answered to one planned file's operations so far: written in the same
/// transaction as each answer, so it survives a crash exactly as the answers do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivered {
    /// Acknowledged.
    pub applied: OpCounts,
    /// Refused (400, 404, 422).
    pub refused: u64,
}

/// Per feed: the file last applied, so a re-drop of the same content is recognized, and per
/// location the full snapshot last applied, so an older one is never applied after it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FeedRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied: Option<AppliedFile>,
    /// By location id: the full snapshot last applied there.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub snapshots: std::collections::BTreeMap<u64, SnapshotMark>,
    /// The columns the feed's last applied file recognized by their values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<crate::mapper::KeptColumns>,
    /// The files applied most recently, oldest first, at most [`RECENT_APPLIED`] (each content
    /// once): a file with the content of one of them but the last is an old export delivered
    /// again, or a lot back at that day's state, which only a person can tell apart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent: Vec<AppliedFile>,
    /// The last full snapshot applied (or re-dropped), when its date was in the future as it
    /// was read: `status` says so until a snapshot dated right is applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub future_dated: Option<crate::plan::FutureDated>,
}

/// Applied files a feed remembers by content (a month of daily exports).
pub const RECENT_APPLIED: usize = 30;

impl FeedRecord {
    /// `applied` is the feed's last applied file, and the newest of its recent ones.
    pub fn applied(&mut self, applied: AppliedFile) {
        self.recent.retain(|f| f.sha256 != applied.sha256);
        self.recent.push(applied.clone());
        let over = self.recent.len().saturating_sub(RECENT_APPLIED);
        self.recent.drain(..over);
        self.last_applied = Some(applied);
    }

    /// The recent applied file with this content, when it is not the last one applied.
    pub fn applied_before(&self, sha256: &str) -> Option<&AppliedFile> {
        let last = self.last_applied.as_ref().map(|f| f.sha256.as_str());
        self.recent
            .iter()
            .rev()
            .find(|f| f.sha256 == sha256 && last != Some(sha256))
    }
}

/// A full snapshot applied for a location: its name and the time it is as of (Unix seconds,
/// UTC: the date its name carries, else its modification time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotMark {
    pub name: String,
    pub as_of: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedFile {
    pub name: String,
    pub sha256: String,
    pub at: i64,
    /// Records it held (0: not known, as for a file restored by a rebuild).
    #[serde(default)]
    pub records: u64,
}

/// What a location's latest applied full snapshot listed: the VINs it showed on that lot,
/// validly or by a rejected record that keeps them. A vehicle another location's latest
/// snapshot lists moved there: it is not sold ([`crate::diff`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Listing {
    pub feed: String,
    /// The snapshot's file name.
    pub file: String,
    /// The number its plan is filed under.
    pub file_no: u64,
    /// When it was applied (Unix seconds, UTC).
    pub at: i64,
    /// Sorted.
    pub vins: Vec<String>,
    /// Its last VINs in the file's order, at most [`LISTING_TAIL`]: a next snapshot that
    /// leaves out exactly the end of this order looks cut short, not sold
    /// ([`crate::diff`]). Empty for a listing written before tails were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tail: Vec<String>,
}

/// The VINs a listing keeps of its file's end.
pub const LISTING_TAIL: usize = 64;

impl Listing {
    pub fn lists(&self, vin: &str) -> bool {
        self.vins.binary_search_by(|v| v.as_str().cmp(vin)).is_ok()
    }
}

/// One queued operation, in the `outbox` table (keyed by its sequence number).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboxEntry {
    pub seq: u64,
    pub organization_id: u64,
    /// Where the vehicle was when it was queued (create and update: the payload's location).
    pub location_id: u64,
    pub vin: String,
    pub op: crate::plan::Op,
    /// The file that queued it.
    pub file: String,
    /// The number that file is filed under in the state (its answers are counted there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_no: Option<u64>,
    pub queued_at: i64,
    /// Why the plan queued it, for the vehicle's history: kept here until the service answers,
    /// then stored with the answer as one event (see `history`).
    #[serde(default, rename = "why", skip_serializing_if = "Queuing::is_empty")]
    pub queuing: Queuing,
}

/// Why a plan queued an operation, as the vehicle's history tells it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Queuing {
    /// The file's line that listed the vehicle (none: left out, or a reconciliation's repair).
    #[serde(default, rename = "l", skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// An update: the fields that differ from the payload last acknowledged.
    #[serde(default, rename = "c", skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<FieldChange>,
    /// Sold by absence: the files in a row that left it out.
    #[serde(default, rename = "a", skip_serializing_if = "Option::is_none")]
    pub absent: Option<u32>,
    /// Sold by absence although the safety guard would have held the file (overridden).
    #[serde(default, rename = "x", skip_serializing_if = "is_false")]
    pub forced: bool,
}

impl Queuing {
    pub fn is_empty(&self) -> bool {
        self == &Queuing::default()
    }
}

/// A field an update changes, as sent (values cut to a few dozen characters).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldChange {
    pub field: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The outbox's bookkeeping, updated in the same transactions as the outbox itself:
/// `queued == superseded + acknowledged + rejected + in the outbox` holds after any crash.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Operations ever committed to the outbox.
    pub queued: u64,
    /// Replaced by a newer file's plan before they were sent.
    pub superseded: u64,
    /// Answered with success.
    pub acknowledged: u64,
    /// Refused by the service.
    pub rejected: u64,
}

/// Its key in `meta`.
pub(crate) const COUNTERS_KEY: &str = "outbox_counters";

pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    what: &'static str,
) -> Result<T, StateError> {
    serde_json::from_slice(bytes).map_err(|e| StateError::Decode {
        what,
        source: Box::new(e),
    })
}

/// A stored value as JSON. These plain structs (strings, numbers, maps with string keys) do
/// not fail to serialize; if one ever did, the write fails rather than storing empty text.
pub(crate) fn encode<T: Serialize>(value: &T, what: &'static str) -> Result<String, StateError> {
    serde_json::to_string(value).map_err(|source| StateError::Encode { what, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_feed_remembers_its_recent_files_by_content_the_last_one_apart() {
        let file = |name: &str, sha256: &str| AppliedFile {
            name: name.into(),
            sha256: sha256.into(),
            at: 0,
            records: 1,
        };
        let mut feed = FeedRecord::default();
        feed.applied(file("day1.csv", "a"));
        feed.applied(file("day2.csv", "b"));
        assert_eq!(
            feed.applied_before("a").map(|f| f.name.as_str()),
            Some("day1.csv")
        );
        assert_eq!(feed.applied_before("b"), None, "the last one is a re-drop");
        feed.applied(file("day3.csv", "a"));
        assert_eq!(
            feed.applied_before("a"),
            None,
            "the same content applied again is last"
        );
        assert_eq!(feed.recent.len(), 2);
        for n in 0..40 {
            feed.applied(file(&format!("d{n}.csv"), &n.to_string()));
        }
        assert_eq!(feed.recent.len(), RECENT_APPLIED);
        assert_eq!(feed.recent[0].name, "d10.csv", "the oldest are forgotten");
    }

    #[test]
    fn records_keep_small() {
        let r = VehicleRecord {
            service_id: Some(12),
            digest: Some(Digest::of(b"p")),
            file: "inv.csv".into(),
            ..VehicleRecord::default()
        };
        let bytes = r.encode().unwrap();
        assert_eq!(VehicleRecord::decode(bytes.as_bytes()).unwrap(), r);
        assert!(bytes.len() < 140, "{bytes}");
    }
}
