//! The state: what lotsync knows the service holds, in one sled database in the state dir.
//!
//! Owns the database, its lock, its schema version and the layout of its trees:
//! - `vehicles`: (organization, location, VIN) → [`VehicleRecord`]: the service's id, sold or in
//!   stock and the digest of the payload as last acknowledged, the count of full snapshots it
//!   has been absent from, its ops in the outbox, the service's last rejection;
//! - `payloads`: same key → the last acknowledged payload (kept apart so that diffing a file
//!   reads only the small records);
//! - `vins`: (organization, VIN) → location, so a VIN is known across the organization's lots;
//! - `listings`: (organization, location) → the VINs its latest applied full snapshot listed
//!   ([`Listing`]), so a lot's file does not sell a car another lot lists;
//! - `files`: every file planned, with its content hash and outcome; `feeds`: per feed, the file
//!   last applied;
//! - `outbox` and `queue`: the durable queue, written only by [`crate::outbox`] through
//!   [`StateTx`] (as every write that spans trees); `delivered`: per planned file, what the
//!   service answered to its operations so far;
//! - `history`: (time, organization, VIN, …) → one event of a vehicle, for `lotsync why`
//!   ([`history`]); written in the outbox's transactions. A state from before it has none;
//!   the tree is only added to, so the schema version stays (an older lotsync ignores it);
//! - `meta`: the schema version, the state's id, the outbox's conservation counters, the request
//!   rate the uploader settled on, and the notifications already sent (`notice/<key>`).
//!
//! The state's identity is also kept outside sled ([`identity`]), so a database that lost its
//! data is refused rather than taken for a new one. Read-only commands and writers share the
//! lock politely: a writer waits a few seconds for a reader to finish ([`Holder`]).
//!
//! It does not decide what to send (that is [`crate::diff`]) nor change vehicles' acknowledged
//! state (that happens only when the outbox records an answer of the service).

pub mod history;
pub mod identity;
mod keys;
mod lock;
pub mod memory;
pub(crate) mod records;
mod tx;

/// Stored in its records; the plan's types.
pub use crate::plan::{Digest, OpCounts};
pub use identity::{MarkedInbox, Marker};
pub use keys::{location_prefix, vehicle_key, vin_key, VehicleKey};
pub use records::{
    AppliedFile, Counters, Delivered, FeedRecord, FieldChange, FileOutcome, FileRecord, Listing,
    OutboxEntry, Queuing, Rejection, SnapshotMark, StoredVehicle, VehicleRecord,
};
pub use tx::{StateTx, Txn};

use crate::text::Chain;
use lock::StateLock;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The layout this build reads and writes. Bump it with a step in `migrate`.
pub const SCHEMA_VERSION: u32 = 1;

const SCHEMA_KEY: &[u8] = b"schema_version";
const STATE_ID_KEY: &[u8] = b"state_id";
/// The number of the next plan committed (files planned and reconciliations), from 1.
const PLANS_KEY: &[u8] = b"files_next";
/// The sequence number of the next operation queued, from 1.
const NEXT_SEQ_KEY: &[u8] = b"outbox_next_seq";
const UPLOAD_RATE_KEY: &[u8] = b"upload_rate";
const NOTICE_PREFIX: &str = "notice/";

/// The state cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state is in use by pid {pid} ({holder}); stop it or use its control commands")]
    InUse {
        pid: String,
        /// As said to people: `lotsync run`, or `lotsync run?` for an older lotsync.
        holder: String,
        /// The holder's command (`run`, `status`, …), when it said.
        command: Option<String>,
    },
    #[error("cannot create or lock the state dir {dir}")]
    Dir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the state database in {dir} cannot be opened ({reason}); move it aside \
         (mv {dir} {dir}.broken) and rebuild the state from the service with `lotsync reconcile --rebuild`"
    )]
    Corrupt { dir: PathBuf, reason: String },
    #[error(
        "the state in {dir} has schema version {found}, newer than this lotsync ({SCHEMA_VERSION}); \
         run the newer lotsync, or move the state aside and rebuild it with `lotsync reconcile --rebuild`"
    )]
    TooNew { dir: PathBuf, found: u32 },
    #[error("state database")]
    Storage(#[from] sled::Error),
    /// A stored value or key that does not read back; `source` says why (the JSON parser's
    /// error, or a length that is not the key's).
    #[error("state database: a stored {what} cannot be read")]
    Decode {
        what: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A value that could not be written as JSON (nothing of it is stored).
    #[error("state database: a {what} cannot be stored")]
    Encode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "the state in {dir} has lost data: {evidence}. Its database was damaged, truncated or \
         removed while lotsync was stopped, and planning from it would create every vehicle \
         again and never sell the ones gone. Nothing was changed. To recover: stop lotsync, \
         move the state aside (mv {dir} {dir}.lost) and run `lotsync reconcile --rebuild`"
    )]
    Lost { dir: PathBuf, evidence: String },
    #[error(
        "the state in {dir} is not the one that last wrote {marker} (that one was in \
         {marker_dir}); two lotsync configs may share an inbox. Point [state] dir at the right \
         state, or, if this state is the right one, remove {marker}"
    )]
    OtherState {
        dir: PathBuf,
        marker: PathBuf,
        marker_dir: PathBuf,
    },
    #[error(
        "the state marker {path} cannot be read ({reason}); lotsync writes it whole, so it was \
         edited by hand: restore it, or remove it if the state next to it is the right one"
    )]
    BadMarker { path: PathBuf, reason: String },
    #[error("the state marker {path} cannot be read or written")]
    Marker {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Who opens the state, written in its lock so that others know whom they wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// Changes the state (`run`, `sync`, `reconcile`, `release`); others wait for it only
    /// through its control socket.
    Writer(&'static str),
    /// Only reads, briefly (`status`, `plan`, `state export`): a writer starting meanwhile
    /// waits for it a few seconds instead of failing.
    Reader(&'static str),
}

/// How to open the state.
#[derive(Debug, Clone)]
pub struct Opening {
    pub holder: Holder,
    /// The feeds' inboxes carrying markers ([`identity`]): checked at open and written after
    /// each commit. None: no markers at all (library tests, benchmarks).
    pub markers: Option<Vec<MarkedInbox>>,
    /// Check the markers (off only for `lotsync reconcile --rebuild`, which fills a lost
    /// state).
    pub verify: bool,
    /// sled's page cache, in MiB (`[state] cache_mib`).
    pub cache_mib: u64,
}

/// The page cache when the config says nothing: see `[state] cache_mib`.
pub const DEFAULT_CACHE_MIB: u64 = 16;

impl Default for Opening {
    fn default() -> Self {
        Opening {
            holder: Holder::Writer("lotsync"),
            markers: None,
            verify: true,
            cache_mib: DEFAULT_CACHE_MIB,
        }
    }
}

/// The open state database. One process owns it at a time.
#[derive(Debug)]
pub struct State {
    dir: PathBuf,
    db: sled::Db,
    trees: Trees,
    /// Inboxes whose markers are written after each commit; None: no markers.
    markers: Option<Vec<MarkedInbox>>,
    /// When the markers were last written and the vehicle count they said; locked while they
    /// are written.
    markers_written: std::sync::Mutex<Option<(std::time::Instant, u64)>>,
    _lock: StateLock,
}

/// The trees of the database, cheap to clone (sled trees are shared handles).
#[derive(Debug, Clone)]
struct Trees {
    pub meta: sled::Tree,
    pub vehicles: sled::Tree,
    pub payloads: sled::Tree,
    pub vins: sled::Tree,
    pub listings: sled::Tree,
    pub files: sled::Tree,
    pub feeds: sled::Tree,
    pub outbox: sled::Tree,
    pub queue: sled::Tree,
    pub delivered: sled::Tree,
    pub history: sled::Tree,
}

impl State {
    /// Opens (or creates) the state in `dir`: takes the lock, opens sled, checks the schema.
    /// No markers are checked or written (see [`State::open_with`]).
    pub fn open(dir: &Path) -> Result<State, StateError> {
        State::open_with(dir, &Opening::default())
    }

    /// Opens (or creates) the state as `opening` says: takes the lock (waiting a few seconds
    /// for a reader), opens sled, checks the schema, then the markers.
    pub fn open_with(dir: &Path, opening: &Opening) -> Result<State, StateError> {
        std::fs::create_dir_all(dir).map_err(|source| StateError::Dir {
            dir: dir.to_owned(),
            source,
        })?;
        let lock = StateLock::take(&dir.join("lock"), opening.holder)?;
        let db_dir = dir.join("db");
        let db = open_db(&db_dir, opening.cache_mib)?;
        let tree = |name: &str| db.open_tree(name);
        let trees = Trees {
            meta: tree("meta")?,
            vehicles: tree("vehicles")?,
            payloads: tree("payloads")?,
            vins: tree("vins")?,
            listings: tree("listings")?,
            files: tree("files")?,
            feeds: tree("feeds")?,
            outbox: tree("outbox")?,
            queue: tree("queue")?,
            delivered: tree("delivered")?,
            history: tree("history")?,
        };
        let state = State {
            dir: dir.to_owned(),
            db,
            trees,
            markers: opening.markers.clone(),
            markers_written: std::sync::Mutex::new(None),
            _lock: lock,
        };
        state.check_schema()?;
        if let Some(inboxes) = &state.markers {
            if opening.verify {
                identity::verify(&state, inboxes)?;
                if matches!(opening.holder, Holder::Writer(_)) {
                    // A state from before the markers is protected from its first start.
                    state.write_markers();
                }
            }
        }
        Ok(state)
    }

    /// The state's id (random, made when the state was created; see [`identity`]).
    pub fn id(&self) -> Result<String, StateError> {
        match self.trees.meta.get(STATE_ID_KEY)? {
            Some(v) => Ok(String::from_utf8_lossy(&v).into_owned()),
            None => Err(StateError::Decode {
                what: "state id",
                source: "missing".into(),
            }),
        }
    }

    /// Flushes, then writes the markers with the vehicles counted (reading every record:
    /// sled keeps no count), after a commit that may have changed them. A marker that cannot
    /// be written is logged: the commit before it stands, and a marker that lags never accuses
    /// the state.
    pub fn write_markers(&self) {
        if let Err(e) = self.flush_and_mark(true, std::time::Duration::ZERO) {
            tracing::warn!(error = %Chain(&e), "cannot flush the state to write its markers");
        }
    }

    /// Flushes, and writes the markers with the vehicle count last counted (answers do not
    /// change it) unless they were written less than `unless_within` ago: after answers are
    /// flushed (many times a second: `unless_within` one second) and at the end of a delivery
    /// (zero).
    pub fn flush_marked(&self, unless_within: std::time::Duration) -> Result<(), StateError> {
        self.flush_and_mark(false, unless_within)
    }

    /// One writer of the markers at a time (the lock is held throughout). What they say is
    /// read before the flush, so a marker never says more than the database holds, whatever
    /// other threads commit meanwhile.
    fn flush_and_mark(
        &self,
        count: bool,
        unless_within: std::time::Duration,
    ) -> Result<(), StateError> {
        let Some(inboxes) = &self.markers else {
            return self.flush();
        };
        let mut last = self
            .markers_written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.is_some_and(|(at, _)| at.elapsed() < unless_within) {
            drop(last);
            return self.flush();
        }
        let progress = identity::Progress::of(self)?;
        let vehicles = match *last {
            Some((_, vehicles)) if !count => vehicles,
            _ => self.vehicle_count() as u64,
        };
        self.flush()?;
        if let Err(e) = identity::write(self, inboxes, progress, vehicles) {
            tracing::warn!(error = %Chain(&e), "cannot write the state's markers");
        }
        *last = Some((std::time::Instant::now(), vehicles));
        Ok(())
    }

    /// The number the next plan committed is filed under (from 1).
    pub fn next_file_no(&self) -> Result<u64, StateError> {
        Ok(self.meta_u64(PLANS_KEY)?.max(1))
    }

    fn meta_u64(&self, key: &[u8]) -> Result<u64, StateError> {
        self.trees
            .meta
            .get(key)?
            .map_or(Ok(0), |v| decode_u64(&v, "counter"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Makes every write so far durable (sled writes are durable only once flushed).
    pub fn flush(&self) -> Result<(), StateError> {
        self.db.flush()?;
        memory::collect_garbage();
        Ok(())
    }

    /// Bytes the database takes on disk.
    pub fn size_on_disk(&self) -> Result<u64, StateError> {
        Ok(self.db.size_on_disk()?)
    }

    fn check_schema(&self) -> Result<(), StateError> {
        let found = match self.trees.meta.get(SCHEMA_KEY)? {
            Some(v) => decode_u32(&v, "schema version")?,
            None => {
                let empty = self.trees.vehicles.is_empty()
                    && self.trees.outbox.is_empty()
                    && self.trees.files.is_empty();
                if !empty {
                    return Err(StateError::Corrupt {
                        dir: self.dir.join("db"),
                        reason: "it holds data but no schema version".into(),
                    });
                }
                self.trees
                    .meta
                    .insert(SCHEMA_KEY, &SCHEMA_VERSION.to_be_bytes())?;
                self.flush()?;
                SCHEMA_VERSION
            }
        };
        if found > SCHEMA_VERSION {
            return Err(StateError::TooNew {
                dir: self.dir.clone(),
                found,
            });
        }
        if found < SCHEMA_VERSION {
            migrate(self, found)?;
        }
        if self.trees.meta.get(STATE_ID_KEY)?.is_none() {
            // A new state, or one from before ids: it is given one now.
            let id = format!("{:032x}", fastrand::u128(..));
            self.trees.meta.insert(STATE_ID_KEY, id.as_bytes())?;
            self.flush()?;
        }
        Ok(())
    }

    /// Sets the stored schema version (tests of the migration path use it).
    #[doc(hidden)]
    pub fn set_schema_version(&self, version: u32) -> Result<(), StateError> {
        self.trees.meta.insert(SCHEMA_KEY, &version.to_be_bytes())?;
        Ok(())
    }

    pub fn schema_version(&self) -> Result<u32, StateError> {
        match self.trees.meta.get(SCHEMA_KEY)? {
            Some(v) => decode_u32(&v, "schema version"),
            None => Ok(SCHEMA_VERSION),
        }
    }

    /// The record of a vehicle at a location.
    pub fn vehicle(&self, key: &VehicleKey) -> Result<Option<VehicleRecord>, StateError> {
        self.trees
            .vehicles
            .get(key.bytes())?
            .map(|v| VehicleRecord::decode(&v))
            .transpose()
    }

    /// Where a VIN lives in the organization, and its record.
    pub fn find_vin(
        &self,
        organization_id: u64,
        vin: &str,
    ) -> Result<Option<(VehicleKey, VehicleRecord)>, StateError> {
        let Some(loc) = self.trees.vins.get(vin_key(organization_id, vin))? else {
            return Ok(None);
        };
        let key = VehicleKey::new(organization_id, decode_u64(&loc, "VIN index")?, vin);
        Ok(self.vehicle(&key)?.map(|r| (key, r)))
    }

    /// The latest listing of each location of the organization but those in `except`, by
    /// location (the others' are not decoded).
    pub fn other_listings(
        &self,
        organization_id: u64,
        except: &std::collections::BTreeSet<u64>,
    ) -> Result<Vec<(u64, Listing)>, StateError> {
        let mut out = Vec::new();
        for item in self
            .trees
            .listings
            .scan_prefix(organization_id.to_be_bytes())
        {
            let (k, v) = item?;
            let location_id = decode_u64(k.get(8..16).unwrap_or_default(), "listing key")?;
            if !except.contains(&location_id) {
                out.push((location_id, records::decode(&v, "listing")?));
            }
        }
        Ok(out)
    }

    /// The latest listing of one location (the VINs its latest applied full snapshot listed).
    pub fn listing(
        &self,
        organization_id: u64,
        location_id: u64,
    ) -> Result<Option<Listing>, StateError> {
        self.trees
            .listings
            .get(location_prefix(organization_id, location_id))?
            .map(|v| records::decode(&v, "listing"))
            .transpose()
    }

    /// Every VIN of the organization the state knows, with its location.
    pub fn organization_vins(
        &self,
        organization_id: u64,
    ) -> Result<HashMap<String, u64>, StateError> {
        let mut out = HashMap::new();
        for item in self.trees.vins.scan_prefix(organization_id.to_be_bytes()) {
            let (k, v) = item?;
            let vin = String::from_utf8_lossy(&k[8..]).into_owned();
            out.insert(vin, decode_u64(&v, "VIN index")?);
        }
        Ok(out)
    }

    /// Every vehicle recorded at a location, with its VIN, in the order of their keys.
    pub fn location_vehicles(
        &self,
        organization_id: u64,
        location_id: u64,
    ) -> Result<Vec<(String, VehicleRecord)>, StateError> {
        let prefix = location_prefix(organization_id, location_id);
        let mut out = Vec::new();
        for item in self.trees.vehicles.scan_prefix(prefix) {
            let (k, v) = item?;
            let vin = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
            out.push((vin, VehicleRecord::decode(&v)?));
        }
        Ok(out)
    }

    /// The service ids the state holds for an organization's vehicles: id → VIN (as keyed,
    /// upper-cased). Two VINs holding one id (which the uploader refuses) keep one of them.
    pub fn service_ids(&self, organization_id: u64) -> Result<HashMap<u64, String>, StateError> {
        let mut ids = HashMap::new();
        for item in self
            .trees
            .vehicles
            .scan_prefix(organization_id.to_be_bytes())
        {
            let (k, v) = item?;
            if let Some(id) = VehicleRecord::decode(&v)?.service_id {
                ids.insert(id, VehicleKey::from_bytes(&k)?.vin);
            }
        }
        Ok(ids)
    }

    /// The payload the service last acknowledged for a vehicle.
    pub fn payload(
        &self,
        key: &VehicleKey,
    ) -> Result<Option<crate::api::VehiclePayload>, StateError> {
        self.trees
            .payloads
            .get(key.bytes())?
            .map(|v| {
                serde_json::from_slice(&v).map_err(|e| StateError::Decode {
                    what: "payload",
                    source: Box::new(e),
                })
            })
            .transpose()
    }

    /// Every stored vehicle with its payload, in key order.
    pub fn vehicles(&self) -> impl Iterator<Item = Result<StoredVehicle, StateError>> + '_ {
        self.trees.vehicles.iter().map(move |item| {
            let (k, v) = item?;
            let key = VehicleKey::from_bytes(&k)?;
            let record = VehicleRecord::decode(&v)?;
            let payload = self.payload(&key)?;
            Ok(StoredVehicle {
                key,
                record,
                payload,
            })
        })
    }

    /// Whether the state has a record of any vehicle of the organization.
    pub fn knows_organization(&self, organization_id: u64) -> Result<bool, StateError> {
        Ok(self
            .trees
            .vehicles
            .scan_prefix(organization_id.to_be_bytes())
            .next()
            .transpose()?
            .is_some())
    }

    /// Number of vehicle records.
    pub fn vehicle_count(&self) -> usize {
        self.trees.vehicles.len()
    }

    pub fn feed(&self, name: &str) -> Result<Option<FeedRecord>, StateError> {
        self.trees
            .feeds
            .get(name.as_bytes())?
            .map(|v| records::decode(&v, "feed record"))
            .transpose()
    }

    /// A planned file's record, by the number it was filed under.
    pub fn file(&self, file_no: u64) -> Result<Option<FileRecord>, StateError> {
        self.trees
            .files
            .get(file_no.to_be_bytes())?
            .map(|v| records::decode(&v, "file record"))
            .transpose()
    }

    /// What the service answered so far to the operations of the file filed as `file_no`.
    pub fn delivered(&self, file_no: u64) -> Result<Delivered, StateError> {
        self.trees
            .delivered
            .get(file_no.to_be_bytes())?
            .map_or(Ok(Delivered::default()), |v| {
                records::decode(&v, "delivery counts")
            })
    }

    /// Operations in the outbox.
    pub fn queue_len(&self) -> usize {
        self.trees.outbox.len()
    }

    pub fn queue_is_empty(&self) -> bool {
        self.trees.outbox.is_empty()
    }

    /// The queued operations whose sequence numbers are in `seqs`, oldest first.
    pub fn queued(
        &self,
        seqs: std::ops::RangeInclusive<u64>,
    ) -> impl Iterator<Item = Result<OutboxEntry, StateError>> + '_ {
        let (first, last) = seqs.into_inner();
        self.trees
            .outbox
            .range(first.to_be_bytes()..=last.to_be_bytes())
            .values()
            .map(|v| records::decode(&v?, "outbox entry"))
    }

    /// Whether an operation is still queued (not answered, not replaced).
    pub fn is_queued(&self, seq: u64) -> Result<bool, StateError> {
        Ok(self.trees.outbox.contains_key(seq.to_be_bytes())?)
    }

    /// One vehicle's queued operations, in order.
    pub fn queued_of(
        &self,
        organization_id: u64,
        vin: &str,
    ) -> Result<Vec<OutboxEntry>, StateError> {
        let mut out = Vec::new();
        for key in self
            .trees
            .queue
            .scan_prefix(keys::queue_prefix(organization_id, vin))
            .keys()
        {
            let key = key?;
            let seq = decode_u64(&key[key.len().saturating_sub(8)..], "queue key")?;
            if let Some(v) = self.trees.outbox.get(seq.to_be_bytes())? {
                out.push(records::decode(&v, "outbox entry")?);
            }
        }
        Ok(out)
    }

    /// Every file planned, newest first, with the number it is filed under.
    pub fn files_newest_first(
        &self,
    ) -> impl Iterator<Item = Result<(u64, FileRecord), StateError>> + '_ {
        self.trees.files.iter().rev().map(|item| {
            let (key, value) = item?;
            Ok((
                decode_u64(&key, "file number")?,
                records::decode(&value, "file record")?,
            ))
        })
    }

    /// Every file planned, oldest first.
    pub fn files(&self) -> impl Iterator<Item = Result<FileRecord, StateError>> + '_ {
        self.trees.files.iter().values().map(|v| {
            let v = v?;
            records::decode(&v, "file record")
        })
    }

    /// Whether the safety guard held a file of `feed` with this content.
    pub fn is_held(&self, feed: &str, sha256: &str) -> bool {
        self.files().any(|r| {
            r.is_ok_and(|r| {
                r.feed == feed
                    && r.sha256 == sha256
                    && matches!(r.outcome, FileOutcome::Held { .. })
            })
        })
    }

    /// The last record of a file of `feed` named `name` that was held, if it is the last
    /// record of that name: a held file changed since (finished by its writer inside
    /// `held/`) is still known by it.
    pub fn held_by_name(&self, feed: &str, name: &str) -> Option<FileRecord> {
        let last = self
            .files()
            .filter_map(Result::ok)
            .filter(|r| r.feed == feed && r.name == name)
            .last()?;
        matches!(last.outcome, FileOutcome::Held { .. }).then_some(last)
    }

    /// The full snapshot of `feed` last applied for one of `locations` that is newer than
    /// `as_of`, the newest of them: a snapshot as of `as_of` must not be applied after it.
    pub fn newer_snapshot(
        &self,
        feed: &str,
        locations: &std::collections::BTreeSet<u64>,
        as_of: i64,
    ) -> Result<Option<SnapshotMark>, StateError> {
        let Some(record) = self.feed(feed)? else {
            return Ok(None);
        };
        Ok(record
            .snapshots
            .iter()
            .filter(|(location, mark)| locations.contains(location) && mark.as_of > as_of)
            .map(|(_, mark)| mark)
            .max_by_key(|mark| mark.as_of)
            .cloned())
    }

    /// The outbox's conservation counters.
    pub fn counters(&self) -> Result<Counters, StateError> {
        Counters::read(&self.trees.meta)
    }

    /// The request rate (per second) the uploader last settled on.
    pub fn upload_rate(&self) -> Result<Option<f64>, StateError> {
        self.trees
            .meta
            .get(UPLOAD_RATE_KEY)?
            .map(|v| {
                let bytes: [u8; 8] = v.as_ref().try_into().map_err(|_| StateError::Decode {
                    what: "upload rate",
                    source: format!("{} bytes, expected 8", v.len()).into(),
                })?;
                Ok(f64::from_be_bytes(bytes))
            })
            .transpose()
    }

    pub fn set_upload_rate(&self, rate: f64) -> Result<(), StateError> {
        self.trees
            .meta
            .insert(UPLOAD_RATE_KEY, &rate.to_be_bytes())?;
        Ok(())
    }

    /// Records that the notification `key` is being sent; false when it was already (at most
    /// one notification per file or incident). Durable before it returns.
    pub fn claim_notice(&self, key: &str) -> Result<bool, StateError> {
        let key = format!("{NOTICE_PREFIX}{key}");
        let claimed = self
            .trees
            .meta
            .compare_and_swap(key, None::<&[u8]>, Some(&now().to_be_bytes()[..]))?
            .is_ok();
        if claimed {
            self.flush()?;
        }
        Ok(claimed)
    }

    /// Forgets the notifications whose keys start with `prefix` (an incident is over, so the
    /// next one is told again).
    pub fn forget_notices(&self, prefix: &str) -> Result<(), StateError> {
        let prefix = format!("{NOTICE_PREFIX}{prefix}");
        for key in self.trees.meta.scan_prefix(prefix.as_bytes()).keys() {
            self.trees.meta.remove(key?)?;
        }
        Ok(())
    }
}

/// Upgrades the stored layout from `from` to [`SCHEMA_VERSION`], one version at a time, each in
/// its own transaction with the version bump. Version 1 is the first layout: no steps yet.
fn migrate(state: &State, from: u32) -> Result<(), StateError> {
    let mut version = from;
    while version < SCHEMA_VERSION {
        // When version 2 arrives: `1 => to_v2(state)?,` rewriting what changed, then the bump,
        // with a test that opens a version-1 state and reads what the step rewrote (there is no
        // step yet, so no test: one that only saw the number go up could not fail).
        tracing::info!(from = version, to = version + 1, "migrating the state");
        version += 1;
        state.set_schema_version(version)?;
    }
    state.flush()
}

/// sled reports a damaged database as an error, and on some damage it panics while recovering;
/// both become [`StateError::Corrupt`] naming the recovery.
fn open_db(db_dir: &Path, cache_mib: u64) -> Result<sled::Db, StateError> {
    let config = sled::Config::new()
        .path(db_dir)
        .cache_capacity(cache_mib.saturating_mul(1024 * 1024));
    // sled's panic would print its own line and a backtrace before our message: silenced while
    // the database opens (the panic is caught and reported below).
    // The hook is the process's: one opening at a time swaps it, or two at once could leave
    // it silent for good.
    static HOOK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _swapping = HOOK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    // Nothing of ours is observed after a panic: the config is cloned in and dropped.
    let open = || std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| config.clone().open()));
    let mut opened = open();
    // sled's own file lock still held: only our lock (taken above) lets a process this far,
    // so it is an instance of this process closing (its flusher thread lets go a moment after
    // the drop). Waited for briefly, not reported as a damaged database.
    for _ in 0..50 {
        // sled says so in the text of an io error of kind Other.
        let held = matches!(&opened, Ok(Err(sled::Error::Io(e))) if e.to_string().contains("could not acquire lock"));
        if !held {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        opened = open();
    }
    std::panic::set_hook(previous_hook);
    match opened {
        Ok(Ok(db)) => Ok(db),
        Ok(Err(e)) => Err(StateError::Corrupt {
            dir: db_dir.to_owned(),
            reason: e.to_string(),
        }),
        Err(panic) => {
            let reason = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("sled panicked while recovering it")
                .to_owned();
            Err(StateError::Corrupt {
                dir: db_dir.to_owned(),
                reason,
            })
        }
    }
}

pub(crate) fn decode_u64(bytes: &[u8], what: &'static str) -> Result<u64, StateError> {
    let array: [u8; 8] = bytes.try_into().map_err(|_| StateError::Decode {
        what,
        source: format!("{} bytes, expected 8", bytes.len()).into(),
    })?;
    Ok(u64::from_be_bytes(array))
}

fn decode_u32(bytes: &[u8], what: &'static str) -> Result<u32, StateError> {
    let array: [u8; 4] = bytes.try_into().map_err(|_| StateError::Decode {
        what,
        source: format!("{} bytes, expected 4", bytes.len()).into(),
    })?;
    Ok(u32::from_be_bytes(array))
}

/// Writes a small file durably and whole: written aside (a dot-file ending in `.tmp`, which
/// the watcher and the resume never take for an export), fsynced, renamed over `path`, and its
/// folder fsynced. For the state's markers and the daemon's reports.
pub fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("a file to write has no name"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Seconds since the Unix epoch, UTC.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state folder not made yet, in a fresh folder (removed when the guard drops).
    fn temp_dir(name: &str) -> (tempfile::TempDir, PathBuf) {
        let tmp = crate::testing::temp_dir(&format!("state-{name}"));
        let dir = tmp.path().join("state");
        (tmp, dir)
    }

    #[test]
    fn a_second_open_names_the_owner() {
        let (_tmp, dir) = temp_dir("lock");
        let first = State::open(&dir).unwrap();
        let err = State::open(&dir).unwrap_err().to_string();
        assert!(
            err.contains(&format!("state is in use by pid {}", std::process::id())),
            "{err}"
        );
        assert!(err.contains("(lotsync)"), "{err}");
        drop(first);
        State::open(&dir).expect("the lock is released with the state");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn notices_are_claimed_once_until_forgotten_and_the_rate_persists() {
        let (_tmp, dir) = temp_dir("notices");
        let state = State::open(&dir).unwrap();
        assert!(state.claim_notice("file/abc/rejected").unwrap());
        assert!(!state.claim_notice("file/abc/rejected").unwrap());
        assert!(state.claim_notice("fatal/401").unwrap());
        assert_eq!(state.upload_rate().unwrap(), None);
        state.set_upload_rate(42.5).unwrap();
        state.flush().unwrap();
        drop(state);
        let state = State::open(&dir).unwrap();
        assert_eq!(state.upload_rate().unwrap(), Some(42.5));
        assert!(!state.claim_notice("fatal/401").unwrap());
        state.forget_notices("fatal/").unwrap();
        assert!(state.claim_notice("fatal/401").unwrap());
        assert!(
            !state.claim_notice("file/abc/rejected").unwrap(),
            "other keys stay"
        );
        drop(state);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn schema_newer_than_this_build_is_refused() {
        let (_tmp, dir) = temp_dir("schema");
        let state = State::open(&dir).unwrap();
        assert_eq!(state.schema_version().unwrap(), SCHEMA_VERSION);
        state.set_schema_version(SCHEMA_VERSION + 1).unwrap();
        state.flush().unwrap();
        drop(state);
        let err = State::open(&dir).unwrap_err().to_string();
        assert!(err.contains("newer than this lotsync"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_database_names_the_recovery() {
        let (_tmp, dir) = temp_dir("corrupt");
        let state = State::open(&dir).unwrap();
        state
            .trees
            .vehicles
            .insert(b"k", &b"v"[..])
            .map(drop)
            .unwrap();
        state.flush().unwrap();
        drop(state);
        // Overwrite the database's files with noise.
        for entry in std::fs::read_dir(dir.join("db")).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                let len = std::fs::metadata(&path).unwrap().len().max(64) as usize;
                let noise: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
                std::fs::write(&path, noise).unwrap();
            }
        }
        let err = State::open(&dir).unwrap_err().to_string();
        assert!(err.contains("cannot be opened"), "{err}");
        assert!(err.contains("lotsync reconcile"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
