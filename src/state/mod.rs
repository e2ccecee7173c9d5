//! The state: what lotsync knows the service holds, in one SQLite file, `state.db`, in the
//! state dir.
//!
//! Owns the database, its lock, its schema ([`schema`]: the tables, their version and the
//! migrations) and how its rows are read and written:
//! - `vehicles`: (organization, location, VIN) → [`VehicleRecord`]: the service's id, sold or in
//!   stock and the digest of the payload as last acknowledged, the count of full snapshots it
//!   has been absent from, its ops in the outbox, the service's last rejection;
//! - `payloads`: same key → the last acknowledged payload (kept apart so that diffing a file
//!   reads only the small records);
//! - `vins`: (organization, VIN) → location, so a VIN is known across the organization's lots;
//! - `listings`: (organization, location, feed) → the VINs that feed's latest applied full snapshot
//!   listed ([`Listing`]), so a lot's file does not sell a car another lot lists;
//! - `files`: every file planned, with its content hash and outcome; `feeds`: per feed, the file
//!   last applied;
//! - `outbox`: the durable queue, written only by [`crate::outbox`] through [`StateTx`] (as
//!   every write that spans tables); `delivered`: per planned file, what the service answered
//!   to its operations so far;
//! - `history`: one event of a vehicle per row, for `lotsync why` ([`history`]), written in
//!   the outbox's transactions;
//! - `meta` and `notices`: the state's id, the next numbers, the outbox's conservation
//!   counters, the request rate the uploader settled on; the notifications already sent.
//!
//! Durability: the database is in WAL mode with `synchronous = NORMAL`, so a commit survives
//! the process being killed at once, and [`State::flush`] makes every commit so far survive a
//! power cut too (one fsync of the WAL): after each plan before anything of it is sent, and
//! after each small batch of answers (the outbox's), so delivering is not bound by fsyncs.
//!
//! One writer at a time (the state dir's lock, [`Holder::Writer`]); readers
//! ([`Holder::Reader`]: `status`, `plan`, `why`, `state export`) open the file read-only beside
//! a running writer and never wait for it. In a writer, reads outside a transaction go through
//! a connection of their own, so a large plan being committed never holds up `status`.
//!
//! The state's identity is also kept outside the database ([`identity`]), so a database that
//! lost its data is refused rather than taken for a new one; so is the sled database of
//! lotsync 0.1.0, which this build does not read ([`StateError::Sled`]).
//!
//! It does not decide what to send (that is [`crate::diff`]) nor change vehicles' acknowledged
//! state (that happens only when the outbox records an answer of the service).

pub mod history;
pub mod identity;
mod keys;
mod lock;
pub(crate) mod records;
pub mod retention;
mod schema;
mod tx;

/// Stored in its records; the plan's types.
pub use crate::plan::{Digest, OpCounts};
pub use identity::{MarkedInbox, Marker};
pub use keys::VehicleKey;
pub use records::{
    AppliedFile, Counters, Delivered, FeedRecord, FieldChange, FileOutcome, FileRecord, Listing,
    OutboxEntry, Queuing, Rejection, SnapshotMark, StoredVehicle, VehicleRecord, LISTING_TAIL,
};
pub use retention::Retention;
pub use schema::SCHEMA_VERSION;
pub use tx::{StateTx, Txn};

use crate::text::Chain;
use lock::StateLock;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The database's file in the state dir.
pub const DB_FILE: &str = "state.db";

const STATE_ID_KEY: &str = "state_id";
/// The number of the next plan committed (files planned and reconciliations), from 1.
const PLANS_KEY: &str = "files_next";
/// The sequence number of the next operation queued, from 1.
const NEXT_SEQ_KEY: &str = "outbox_next_seq";
const UPLOAD_RATE_KEY: &str = "upload_rate";
/// Until when the service's quota is spent (Unix seconds), while it is.
const QUOTA_UNTIL_KEY: &str = "quota_until";
/// Rows read per query by the iterators over whole tables.
const BATCH: usize = 1000;

/// What to do about a state another lotsync holds: a daemon answers control commands
/// (`status`, `plan`, `release`, `why` and the rest reach it through its socket); a one-shot
/// command is waited for.
fn in_use_advice(command: Option<&str>) -> &'static str {
    match command {
        Some("run") => {
            "status, release, reconcile and why reach the daemon through its \
                        control socket, and plan reads a copy of its state; stop it (systemctl \
                        stop lotsync) for anything else"
        }
        _ => "wait for it to finish, then run this again",
    }
}

/// The state cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state is in use by pid {pid} ({holder}); {}", in_use_advice(.command.as_deref()))]
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
        "the state database {dir}/state.db cannot be opened ({reason}); move the state aside \
         (mv {q} {q}.broken) and rebuild it from the service with `{}`",
         crate::config::advice(&["reconcile", "--rebuild"]),
         q = crate::text::shell_quoted(&crate::text::shown_path(.dir))
    )]
    Corrupt { dir: PathBuf, reason: String },
    #[error(
        "the state database {path} cannot be opened by this user ({reason}): run this as root \
         or as the user lotsync runs as (a member of its group can read it only while the \
         daemon runs)"
    )]
    Unreadable { path: PathBuf, reason: String },
    #[error("{path} exists already: a backup is written to a new file")]
    BackupExists { path: PathBuf },
    #[error(
        "the state in {dir} has schema version {found}, newer than this lotsync ({SCHEMA_VERSION}); \
         run the newer lotsync, or move the state aside and rebuild it with `{}`",
         crate::config::advice(&["reconcile", "--rebuild"])
    )]
    TooNew { dir: PathBuf, found: u32 },
    #[error(
        "the state in {dir} is lotsync 0.1.0's (a sled database in {dir}/db), which this \
         lotsync does not read. Rebuild it from the service and the archived exports: stop \
         lotsync, then run: mv {q} {q}.0.1.0 && {}",
         crate::config::advice(&["reconcile", "--rebuild"]),
         q = crate::text::shell_quoted(&crate::text::shown_path(.dir))
    )]
    Sled { dir: PathBuf },
    #[error("state database")]
    Storage(#[from] rusqlite::Error),
    #[error("the state was opened read-only ({what} needs a writer)")]
    ReadOnly { what: &'static str },
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
         move the state aside (mv {q} {q}.lost) and run `{}`",
         crate::config::advice(&["reconcile", "--rebuild"]),
         q = crate::text::shell_quoted(&crate::text::shown_path(.dir))
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
    /// Changes the state (`run`, `sync`, `reconcile`, `release`): holds the state dir's lock,
    /// one at a time.
    Writer(&'static str),
    /// Only reads (`status`, `plan`, `why`, `state export`): opens the database read-only,
    /// beside a writer, without the lock (but to create a state not made yet).
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
    /// SQLite's page cache, in MiB (`[state] cache_mib`), shared by the connections.
    pub cache_mib: u64,
    /// What the state lets go of with time (`[state] keep_sold_days`, `keep_history_days`).
    pub retention: Retention,
}

/// The vehicles of a location a full snapshot judges ([`State::location_vehicles`]), read
/// through their index (a lot's sold cars are not read).
const JUDGED_VEHICLES: &str = "SELECT vin, record FROM vehicles INDEXED BY vehicles_judged
     WHERE organization_id = ?1 AND location_id = ?2
       AND (sold = 0 OR coalesce(json_extract(record, '$.queued'), 0) > 0)
     ORDER BY vin";

/// The vehicles in stock at a location ([`State::in_stock_count`]).
const IN_STOCK_AT: &str = "SELECT count(*) FROM vehicles INDEXED BY vehicles_judged
     WHERE organization_id = ?1 AND location_id = ?2
       AND (sold = 0 OR coalesce(json_extract(record, '$.queued'), 0) > 0) AND sold = 0";

/// The VIN holding a service id ([`State::vin_of_service_id`]).
const VIN_OF_SERVICE_ID: &str = "SELECT vin FROM vehicles INDEXED BY vehicles_by_service_id
     WHERE organization_id = ?1 AND service_id = ?2 LIMIT 1";

/// The least page cache a connection gets, in KiB.
const MIN_CACHE_KIB: u64 = 1024;

/// The page cache when the config says nothing: see `[state] cache_mib`.
pub const DEFAULT_CACHE_MIB: u64 = 16;

impl Default for Opening {
    fn default() -> Self {
        Opening {
            holder: Holder::Writer("lotsync"),
            markers: None,
            verify: true,
            cache_mib: DEFAULT_CACHE_MIB,
            retention: Retention::default(),
        }
    }
}

/// A queued operation's number and vehicle ([`State::queue_heads`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueHead {
    pub seq: u64,
    pub organization_id: u64,
    pub vin: String,
}

/// The open state database.
#[derive(Debug)]
pub struct State {
    dir: PathBuf,
    /// Reads outside transactions. Closed before the writer (fields drop in order), so that
    /// the writer, closing last, checkpoints the WAL into the database and removes it.
    reader: Mutex<Connection>,
    /// Transactions and writes; None for a reader.
    writer: Option<Mutex<Connection>>,
    /// Inboxes whose markers are written after each commit; None: no markers.
    markers: Option<Vec<MarkedInbox>>,
    /// When the markers were last written and the vehicle count they said; locked while they
    /// are written.
    markers_written: Mutex<Option<(std::time::Instant, u64)>>,
    retention: Retention,
    _lock: Option<StateLock>,
}

impl State {
    /// Opens (or creates) the state in `dir` as its writer. No markers are checked or written
    /// (see [`State::open_with`]).
    pub fn open(dir: &Path) -> Result<State, StateError> {
        State::open_with(dir, &Opening::default())
    }

    /// Opens (or creates) the state as `opening` says: a writer takes the lock; the schema is
    /// checked (and migrated by a writer), then the markers.
    pub fn open_with(dir: &Path, opening: &Opening) -> Result<State, StateError> {
        if schema::is_sled_state(dir) {
            return Err(StateError::Sled {
                dir: dir.to_owned(),
            });
        }
        let dir_error = |source| StateError::Dir {
            dir: dir.to_owned(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(dir_error)?;
        let path = dir.join(DB_FILE);
        // A writer's reader connection loses its cache whenever the writer commits (WAL): it
        // gets the least, the writer the rest. A read-only command's reader gets it all.
        let cache_kib = opening.cache_mib.saturating_mul(1024);
        let (writer_kib, reader_kib) = match opening.holder {
            Holder::Writer(_) => (cache_kib.saturating_sub(MIN_CACHE_KIB), MIN_CACHE_KIB),
            Holder::Reader(_) => (0, cache_kib),
        };
        let (writer, lock) = match opening.holder {
            Holder::Writer(_) => {
                let lock = StateLock::take(&dir.join("lock"), opening.holder)?;
                let mut conn = open_connection(dir, &path, false, writer_kib)?;
                let found = schema::user_version(&conn).map_err(|e| corrupt(dir, e))?;
                if found == 0 {
                    schema::create(&mut conn).map_err(|e| corrupt(dir, e))?;
                } else if found > SCHEMA_VERSION {
                    return Err(StateError::TooNew {
                        dir: dir.to_owned(),
                        found,
                    });
                } else if found < SCHEMA_VERSION {
                    schema::migrate(&mut conn, found)?;
                }
                (Some(Mutex::new(conn)), Some(lock))
            }
            Holder::Reader(_) => {
                if !has_schema(dir, &path)? {
                    // Made once, under the lock, as a writer would; read-only from then on.
                    let _lock = StateLock::take(&dir.join("lock"), opening.holder)?;
                    let mut conn = open_connection(dir, &path, false, MIN_CACHE_KIB)?;
                    schema::create(&mut conn).map_err(|e| corrupt(dir, e))?;
                }
                (None, None)
            }
        };
        let reader = open_connection(dir, &path, true, reader_kib)?;
        let found = schema::user_version(&reader).map_err(|e| corrupt(dir, e))?;
        if found > SCHEMA_VERSION {
            return Err(StateError::TooNew {
                dir: dir.to_owned(),
                found,
            });
        }
        let state = State {
            dir: dir.to_owned(),
            writer,
            reader: Mutex::new(reader),
            markers: opening.markers.clone(),
            markers_written: Mutex::new(None),
            retention: opening.retention,
            _lock: lock,
        };
        if let Some(inboxes) = &state.markers {
            if opening.verify {
                identity::verify(&state, inboxes)?;
                if matches!(opening.holder, Holder::Writer(_)) {
                    // A state from before the markers is protected from its first start.
                    state.write_markers();
                }
            }
        }
        // Only once the state is known to be the one the inboxes remember.
        if let (Some(inboxes), Holder::Writer(_)) = (&state.markers, &opening.holder) {
            let configured: Vec<_> = (inboxes.iter())
                .map(|i| (i.feed.clone(), i.locations.clone()))
                .collect();
            state.continue_renamed_feeds(&configured)?;
        }
        Ok(state)
    }

    /// The connection of writes and transactions (locked while in use).
    fn writer(&self, what: &'static str) -> Result<MutexGuard<'_, Connection>, StateError> {
        let writer = self.writer.as_ref().ok_or(StateError::ReadOnly { what })?;
        Ok(writer.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The connection of reads outside transactions (locked while in use).
    fn reader(&self) -> MutexGuard<'_, Connection> {
        self.reader.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state's id (random, made when the state was created; see [`identity`]).
    pub fn id(&self) -> Result<String, StateError> {
        self.meta_text(STATE_ID_KEY)?
            .ok_or_else(|| StateError::Decode {
                what: "state id",
                source: "missing".into(),
            })
    }

    fn meta_text(&self, key: &str) -> Result<Option<String>, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached("SELECT value FROM meta WHERE key = ?1")?;
        Ok(stmt.query_row([key], |row| row.get(0)).optional()?)
    }

    fn set_meta(&self, key: &str, value: impl rusqlite::ToSql) -> Result<(), StateError> {
        let conn = self.writer("a setting")?;
        let mut stmt =
            conn.prepare_cached("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)")?;
        stmt.execute(params![key, value])?;
        Ok(())
    }

    /// Flushes, then writes the markers with the vehicles counted, after a commit that may have
    /// changed them. A marker that cannot be written is logged: the commit before it stands,
    /// and a marker that lags never accuses the state.
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
            .unwrap_or_else(PoisonError::into_inner);
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

    fn meta_u64(&self, key: &str) -> Result<u64, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached("SELECT value FROM meta WHERE key = ?1")?;
        let value: Option<i64> = stmt.query_row([key], |row| row.get(0)).optional()?;
        Ok(value.map_or(0, |v| u64::try_from(v).unwrap_or(0)))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Makes every commit so far survive a power cut: the WAL, where commits land, fsynced
    /// (SQLite itself syncs it before each checkpoint and the database after). A commit already
    /// survives the process being killed; nothing to do for a reader.
    pub fn flush(&self) -> Result<(), StateError> {
        if self.writer.is_none() {
            return Ok(());
        }
        let wal = self.dir.join(format!("{DB_FILE}-wal"));
        match std::fs::File::open(&wal) {
            // fsync applies to the file, whichever descriptor asks: SQLite's own writes to it
            // are on disk when this returns.
            Ok(file) => file
                .sync_data()
                .map_err(|source| StateError::Dir { dir: wal, source }),
            // No WAL: every commit was checkpointed into the database, which SQLite synced.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StateError::Dir { dir: wal, source }),
        }
    }

    /// Writes a copy of the database as it is now to `to`, a new file (`VACUUM INTO`: one
    /// consistent snapshot, compacted, a `state.db` of its own), beside a writer that goes on
    /// committing. A copy of `state.db` and its WAL made by `cp` while the daemon writes is
    /// not one: a checkpoint may rewrite the file halfway through. Put back in place after
    /// the live state moved on, it holds less than the markers say, and is refused as such
    /// ([`identity`]).
    pub fn backup_to(&self, to: &Path) -> Result<(), StateError> {
        if to.exists() {
            return Err(StateError::BackupExists {
                path: to.to_owned(),
            });
        }
        let to_text = to.to_str().ok_or_else(|| StateError::Dir {
            dir: to.to_owned(),
            source: std::io::Error::other("the backup's path is not UTF-8"),
        })?;
        self.reader().execute("VACUUM INTO ?1", [to_text])?;
        Ok(())
    }

    /// Bytes the database takes on disk (its file and its WAL).
    pub fn size_on_disk(&self) -> Result<u64, StateError> {
        let size = |name: String| std::fs::metadata(self.dir.join(name)).map_or(0, |m| m.len());
        Ok(size(DB_FILE.to_owned()) + size(format!("{DB_FILE}-wal")))
    }

    /// Sets the stored schema version (tests of the migration path use it).
    #[doc(hidden)]
    pub fn set_schema_version(&self, version: u32) -> Result<(), StateError> {
        self.writer("the schema version")?
            .pragma_update(None, "user_version", version)?;
        Ok(())
    }

    pub fn schema_version(&self) -> Result<u32, StateError> {
        schema::user_version(&self.reader())
    }

    /// The record of a vehicle at a location.
    pub fn vehicle(&self, key: &VehicleKey) -> Result<Option<VehicleRecord>, StateError> {
        let conn = self.reader();
        read_vehicle(&conn, key.organization_id, key.location_id, &key.vin)
    }

    /// Where a VIN lives in the organization, and its record.
    pub fn find_vin(
        &self,
        organization_id: u64,
        vin: &str,
    ) -> Result<Option<(VehicleKey, VehicleRecord)>, StateError> {
        let conn = self.reader();
        let Some(location) = read_location(&conn, organization_id, vin)? else {
            return Ok(None);
        };
        let key = VehicleKey::new(organization_id, location, vin);
        let record = read_vehicle(&conn, organization_id, location, vin)?;
        Ok(record.map(|r| (key, r)))
    }

    /// The latest listing of each feed at each location of the organization but those in `except`, by
    /// location (the others' are not decoded).
    pub fn other_listings(
        &self,
        organization_id: u64,
        except: &std::collections::BTreeSet<u64>,
    ) -> Result<Vec<(u64, Listing)>, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached(
            "SELECT location_id, listing FROM listings WHERE organization_id = ?1 ORDER BY location_id",
        )?;
        let mut rows = stmt.query([organization_id])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let location_id: u64 = row.get(0)?;
            if !except.contains(&location_id) {
                out.push((location_id, records::decode(text(row, 1)?, "listing")?));
            }
        }
        Ok(out)
    }

    /// The latest listings of one location, one per feed (the VINs each feed's latest applied
    /// full snapshot listed there).
    pub fn listings(
        &self,
        organization_id: u64,
        location_id: u64,
    ) -> Result<Vec<Listing>, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached(
            "SELECT listing FROM listings WHERE organization_id = ?1 AND location_id = ?2",
        )?;
        let mut rows = stmt.query(params![organization_id, location_id])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            out.push(records::decode(text(row, 0)?, "listing")?);
        }
        Ok(out)
    }

    /// The locations of the organization where the feed has a listing (its applied full
    /// snapshots spoke for them), each with whether that listing is empty.
    pub fn feed_listings(
        &self,
        organization_id: u64,
        feed: &str,
    ) -> Result<Vec<(u64, bool)>, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached(
            "SELECT location_id, json_array_length(listing, '$.vins') = 0 FROM listings
             WHERE organization_id = ?1 AND feed = ?2",
        )?;
        let rows = stmt.query_map(params![organization_id, feed], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The locations where a feed owns a vehicle (read once per unconfigured feed when the
    /// writer opens the state: the whole table, by the owner in each record).
    fn owned_locations(&self, feed: &str) -> Result<BTreeSet<u64>, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached(
            "SELECT DISTINCT location_id FROM vehicles WHERE json_extract(record, '$.owner') = ?1",
        )?;
        let rows = stmt.query_map([feed], |row| row.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every VIN of the organization the state knows, with its location.
    pub fn organization_vins(
        &self,
        organization_id: u64,
    ) -> Result<HashMap<String, u64>, StateError> {
        let conn = self.reader();
        let mut stmt =
            conn.prepare_cached("SELECT vin, location_id FROM vins WHERE organization_id = ?1")?;
        let rows = stmt.query_map([organization_id], |row| Ok((row.get(0)?, row.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The vehicles at a location a full snapshot judges, with their VINs, in the order of
    /// their VINs: all but the sold ones with nothing queued. Those grow with every car a lot
    /// ever sold (until `[state] keep_sold_days`), and a snapshot has nothing to judge of them:
    /// one that comes back is found by its VIN.
    pub fn location_vehicles(
        &self,
        organization_id: u64,
        location_id: u64,
    ) -> Result<Vec<(String, VehicleRecord)>, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached(JUDGED_VEHICLES)?;
        let mut rows = stmt.query(params![organization_id, location_id])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            out.push((row.get(0)?, VehicleRecord::decode(text(row, 1)?)?));
        }
        Ok(out)
    }

    /// The vehicles in stock at a location, as the state holds them.
    pub fn in_stock_count(
        &self,
        organization_id: u64,
        location_id: u64,
    ) -> Result<u64, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached(IN_STOCK_AT)?;
        Ok(stmt.query_row(params![organization_id, location_id], |row| row.get(0))?)
    }

    /// The VIN (as keyed, upper-cased) the state holds a service id for, if any. Two VINs
    /// holding one id (which the uploader refuses) give one of them.
    pub fn vin_of_service_id(
        &self,
        organization_id: u64,
        service_id: u64,
    ) -> Result<Option<String>, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached(VIN_OF_SERVICE_ID)?;
        Ok(stmt
            .query_row(params![organization_id, service_id], |row| row.get(0))
            .optional()?)
    }

    /// The payload the service last acknowledged for a vehicle.
    pub fn payload(
        &self,
        key: &VehicleKey,
    ) -> Result<Option<crate::api::VehiclePayload>, StateError> {
        let conn = self.reader();
        read_payload(&conn, key)
    }

    /// Every stored vehicle with its payload, in key order (read a batch at a time).
    pub fn vehicles(&self) -> impl Iterator<Item = Result<StoredVehicle, StateError>> + '_ {
        batches(move |after: Option<&VehicleKey>, limit: usize| {
            let conn = self.reader();
            let mut stmt = conn.prepare_cached(
                "SELECT v.organization_id, v.location_id, v.vin, v.record, p.payload
                 FROM vehicles v LEFT JOIN payloads p USING (organization_id, location_id, vin)
                 WHERE (v.organization_id, v.location_id, v.vin) > (?1, ?2, ?3)
                 ORDER BY v.organization_id, v.location_id, v.vin LIMIT ?4",
            )?;
            let (org, location, vin) = after.map_or((-1, -1, ""), |k| {
                (
                    k.organization_id as i64,
                    k.location_id as i64,
                    k.vin.as_str(),
                )
            });
            let mut rows = stmt.query(params![org, location, vin, limit as i64])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                let key = VehicleKey::new(row.get(0)?, row.get(1)?, &row.get::<_, String>(2)?);
                let record = VehicleRecord::decode(text(row, 3)?)?;
                let payload = match row.get_ref(4)? {
                    rusqlite::types::ValueRef::Null => None,
                    _ => Some(records::decode(text(row, 4)?, "payload")?),
                };
                out.push((
                    key.clone(),
                    StoredVehicle {
                        key,
                        record,
                        payload,
                    },
                ));
            }
            Ok(out)
        })
    }

    /// Whether a feed's next file is planned against the service's list
    /// ([`crate::diff::Listed`]): the feed has applied no file yet (a first install, a feed new
    /// to the config beside a service that may hold its cars), or the state knows no vehicle at
    /// one of its `locations`.
    pub fn needs_service_list(
        &self,
        organization_id: u64,
        feed: &str,
        locations: &BTreeSet<u64>,
    ) -> Result<bool, StateError> {
        if self.feed(feed)?.is_none_or(|f| f.last_applied.is_none()) {
            return Ok(true);
        }
        let conn = self.reader();
        let mut stmt = conn.prepare_cached(
            "SELECT 1 FROM vehicles WHERE organization_id = ?1 AND location_id = ?2 LIMIT 1",
        )?;
        for &location in locations {
            if !stmt.exists(params![organization_id, location])? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Number of vehicle records.
    pub fn vehicle_count(&self) -> usize {
        self.count("vehicles")
    }

    /// Rows of a table (0 when it cannot be read: for figures and markers only).
    fn count(&self, table: &'static str) -> usize {
        let conn = self.reader();
        let counted = conn
            .prepare_cached(&format!("SELECT count(*) FROM {table}"))
            .and_then(|mut stmt| stmt.query_row([], |row| row.get::<_, i64>(0)));
        counted.map_or(0, |n| usize::try_from(n).unwrap_or(0))
    }

    /// Whether the state holds no plan, vehicle or operation (a new state, or one that lost
    /// everything).
    pub(crate) fn is_blank(&self) -> Result<bool, StateError> {
        let conn = self.reader();
        let exists = |table: &str| -> Result<bool, StateError> {
            Ok(conn
                .prepare_cached(&format!("SELECT 1 FROM {table} LIMIT 1"))?
                .exists([])?)
        };
        Ok(!exists("vehicles")? && !exists("outbox")? && !exists("files")?)
    }

    pub fn feed(&self, name: &str) -> Result<Option<FeedRecord>, StateError> {
        let conn = self.reader();
        read_feed(&conn, name)
    }

    /// Every feed's record, by name.
    pub fn feeds(&self) -> Result<Vec<(String, FeedRecord)>, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached("SELECT name, record FROM feeds ORDER BY name")?;
        let mut rows = stmt.query([])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            out.push((row.get(0)?, records::decode(text(row, 1)?, "feed record")?));
        }
        Ok(out)
    }

    /// A feed of the config the state has no record of continues the record of a feed the
    /// config no longer has that applied snapshots at one of its locations, or (a delta feed,
    /// which applies none) owns vehicles there (the newest such):
    /// a feed renamed keeps the files it applied, so an old export delivered again is still
    /// known as one, and an older snapshot is still superseded; and it owns (or shares) the
    /// vehicles the old name did. `configured`: every feed of the config with its locations.
    /// Returns the (new, old) names continued.
    pub fn continue_renamed_feeds(
        &self,
        configured: &[(String, std::collections::BTreeSet<u64>)],
    ) -> Result<Vec<(String, String)>, StateError> {
        let known = self.feeds()?;
        let is_configured = |name: &str| configured.iter().any(|(n, _)| n == name);
        let mut continued = Vec::new();
        for (name, locations) in configured {
            if known.iter().any(|(n, _)| n == name) {
                continue;
            }
            let newest_at = |name: &str, record: &FeedRecord| -> Result<_, StateError> {
                let snapshot = (record.snapshots.iter())
                    .filter(|(location, _)| locations.contains(location))
                    .map(|(_, mark)| mark.as_of)
                    .max();
                if snapshot.is_some() || !record.snapshots.is_empty() {
                    return Ok(snapshot);
                }
                let owns_here = (self.owned_locations(name)?.iter()).any(|l| locations.contains(l));
                Ok(record
                    .last_applied
                    .as_ref()
                    .filter(|_| owns_here)
                    .map(|f| f.at))
            };
            let mut before = None;
            for (n, record) in known.iter().filter(|(n, _)| !is_configured(n)) {
                if let Some(at) = newest_at(n, record)? {
                    if before.as_ref().is_none_or(|(newest, _, _)| at > *newest) {
                        before = Some((at, n, record));
                    }
                }
            }
            if let Some((_, old, record)) = before {
                self.transaction(|tx| -> Txn<(), StateError> {
                    tx.put_feed(name, record)?;
                    tx.rename_owner(old, name)
                })?;
                tracing::info!(feed = %name, was = %old, "a feed new to the state continues the record of the feed the config no longer has at its locations (renamed)");
                continued.push((name.clone(), old.clone()));
            }
        }
        Ok(continued)
    }

    /// A planned file's record, by the number it was filed under.
    pub fn file(&self, file_no: u64) -> Result<Option<FileRecord>, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached("SELECT record FROM files WHERE file_no = ?1")?;
        let mut rows = stmt.query([file_no])?;
        match rows.next()? {
            Some(row) => Ok(Some(records::decode(text(row, 0)?, "file record")?)),
            None => Ok(None),
        }
    }

    /// What the service answered so far to the operations of the file filed as `file_no`.
    pub fn delivered(&self, file_no: u64) -> Result<Delivered, StateError> {
        let conn = self.reader();
        tx::read_delivered(&conn, file_no)
    }

    /// Operations in the outbox.
    pub fn queue_len(&self) -> usize {
        self.count("outbox")
    }

    pub fn queue_is_empty(&self) -> bool {
        let conn = self.reader();
        let found = conn
            .prepare_cached("SELECT 1 FROM outbox LIMIT 1")
            .and_then(|mut stmt| stmt.exists([]));
        !found.unwrap_or(false)
    }

    /// The queued operations whose sequence numbers are in `seqs`, oldest first (read a batch
    /// at a time).
    pub fn queued(
        &self,
        seqs: std::ops::RangeInclusive<u64>,
    ) -> impl Iterator<Item = Result<OutboxEntry, StateError>> + '_ {
        let (first, last) = seqs.into_inner();
        let (first, last) = (clamp_i64(first), clamp_i64(last));
        batches(move |after: Option<&i64>, limit: usize| {
            let conn = self.reader();
            let mut stmt = conn.prepare_cached(
                "SELECT seq, entry FROM outbox WHERE seq >= ?1 AND seq <= ?2 ORDER BY seq LIMIT ?3",
            )?;
            let from = after.map_or(first, |seq| seq.saturating_add(1));
            let mut rows = stmt.query(params![from, last, limit as i64])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                out.push((row.get(0)?, records::decode(text(row, 1)?, "outbox entry")?));
            }
            Ok(out)
        })
    }

    /// Every queued operation's number and vehicle, oldest first, without its entry (read a
    /// batch at a time): the uploader looks at many to hand out a few ([`State::queued_entry`]).
    pub fn queue_heads(&self) -> impl Iterator<Item = Result<QueueHead, StateError>> + '_ {
        batches(move |after: Option<&i64>, limit: usize| {
            let conn = self.reader();
            let mut stmt = conn.prepare_cached(
                "SELECT seq, organization_id, vin FROM outbox WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            )?;
            let mut rows = stmt.query(params![after.copied().unwrap_or(0), limit as i64])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                let seq: i64 = row.get(0)?;
                let head = QueueHead {
                    seq: u64::try_from(seq).unwrap_or(0),
                    organization_id: row.get(1)?,
                    vin: row.get(2)?,
                };
                out.push((seq, head));
            }
            Ok(out)
        })
    }

    /// A queued operation's entry; None when it is not queued (answered, or replaced).
    pub fn queued_entry(&self, seq: u64) -> Result<Option<OutboxEntry>, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached("SELECT entry FROM outbox WHERE seq = ?1")?;
        let mut rows = stmt.query([seq])?;
        match rows.next()? {
            Some(row) => Ok(Some(records::decode(text(row, 0)?, "outbox entry")?)),
            None => Ok(None),
        }
    }

    /// Whether an operation is still queued (not answered, not replaced).
    pub fn is_queued(&self, seq: u64) -> Result<bool, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached("SELECT 1 FROM outbox WHERE seq = ?1")?;
        Ok(stmt.exists([seq])?)
    }

    /// One vehicle's queued operations, in order.
    pub fn queued_of(
        &self,
        organization_id: u64,
        vin: &str,
    ) -> Result<Vec<OutboxEntry>, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached(
            "SELECT entry FROM outbox WHERE organization_id = ?1 AND vin = ?2 ORDER BY seq",
        )?;
        let mut rows = stmt.query(params![organization_id, vin])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            out.push(records::decode(text(row, 0)?, "outbox entry")?);
        }
        Ok(out)
    }

    /// Every file planned, newest first, with the number it is filed under (read a batch at a
    /// time).
    pub fn files_newest_first(
        &self,
    ) -> impl Iterator<Item = Result<(u64, FileRecord), StateError>> + '_ {
        batches(move |after: Option<&u64>, limit: usize| {
            let conn = self.reader();
            let mut stmt = conn.prepare_cached(
                "SELECT file_no, record FROM files WHERE file_no < ?1 ORDER BY file_no DESC LIMIT ?2",
            )?;
            let before = after.map_or(i64::MAX, |n| clamp_i64(*n));
            let mut rows = stmt.query(params![before, limit as i64])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                let file_no: u64 = row.get(0)?;
                let record = records::decode(text(row, 1)?, "file record")?;
                out.push((file_no, (file_no, record)));
            }
            Ok(out)
        })
    }

    /// Every file planned, oldest first (read a batch at a time).
    pub fn files(&self) -> impl Iterator<Item = Result<FileRecord, StateError>> + '_ {
        batches(move |after: Option<&u64>, limit: usize| {
            let conn = self.reader();
            let mut stmt = conn.prepare_cached(
                "SELECT file_no, record FROM files WHERE file_no > ?1 ORDER BY file_no LIMIT ?2",
            )?;
            let from = after.map_or(0, |n| clamp_i64(*n));
            let mut rows = stmt.query(params![from, limit as i64])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                let file_no: u64 = row.get(0)?;
                out.push((file_no, records::decode(text(row, 1)?, "file record")?));
            }
            Ok(out)
        })
    }

    /// Whether the safety guard held a file of `feed` with this content.
    pub fn is_held(&self, feed: &str, sha256: &str) -> bool {
        let conn = self.reader();
        let found = conn
            .prepare_cached(
                "SELECT 1 FROM files WHERE feed = ?1 AND sha256 = ?2 AND outcome = 'held' LIMIT 1",
            )
            .and_then(|mut stmt| stmt.exists(params![feed, sha256]));
        found.unwrap_or(false)
    }

    /// The last record of a file of `feed` named `name` that was held, if it is the last
    /// record of that name: a held file changed since (finished by its writer inside
    /// `held/`) is still known by it.
    pub fn held_by_name(&self, feed: &str, name: &str) -> Option<FileRecord> {
        let conn = self.reader();
        let mut stmt = conn
            .prepare_cached(
                "SELECT record FROM files WHERE feed = ?1 AND name = ?2 ORDER BY file_no DESC LIMIT 1",
            )
            .ok()?;
        let mut rows = stmt.query(params![feed, name]).ok()?;
        let row = rows.next().ok()??;
        let last: FileRecord = records::decode(text(row, 0).ok()?, "file record").ok()?;
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
        let conn = self.reader();
        tx::read_counters(&conn)
    }

    /// The request rate (per second) the uploader last settled on.
    pub fn upload_rate(&self) -> Result<Option<f64>, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached("SELECT value FROM meta WHERE key = ?1")?;
        Ok(stmt
            .query_row([UPLOAD_RATE_KEY], |row| row.get(0))
            .optional()?)
    }

    pub fn set_upload_rate(&self, rate: f64) -> Result<(), StateError> {
        self.set_meta(UPLOAD_RATE_KEY, rate)
    }

    /// Until when the service said its quota is spent, as the last delivery that met it left
    /// it (a later run, `status` without a daemon); None once something was delivered again.
    pub fn quota_until(&self) -> Result<Option<crate::clock::UtcTime>, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached("SELECT value FROM meta WHERE key = ?1")?;
        let secs: Option<i64> = stmt
            .query_row([QUOTA_UNTIL_KEY], |row| row.get(0))
            .optional()?
            .flatten();
        Ok(secs.map(crate::clock::UtcTime::from_unix))
    }

    pub fn set_quota_until(&self, until: Option<crate::clock::UtcTime>) -> Result<(), StateError> {
        self.set_meta(QUOTA_UNTIL_KEY, until.map(crate::clock::UtcTime::unix))
    }

    /// Records that the notification `key` is being sent; false when it was already (at most
    /// one notification per file or incident). Durable before it returns.
    pub fn claim_notice(&self, key: &str) -> Result<bool, StateError> {
        let claimed = {
            let conn = self.writer("a notification")?;
            let mut stmt = conn.prepare_cached(
                "INSERT OR IGNORE INTO notices (key, claimed_at) VALUES (?1, ?2)",
            )?;
            stmt.execute(params![key, now()])? == 1
        };
        if claimed {
            self.flush()?;
        }
        Ok(claimed)
    }

    /// Forgets the notifications whose keys start with `prefix` (an incident is over, so the
    /// next one is told again).
    pub fn forget_notices(&self, prefix: &str) -> Result<(), StateError> {
        let conn = self.writer("a notification")?;
        let mut stmt =
            conn.prepare_cached("DELETE FROM notices WHERE substr(key, 1, length(?1)) = ?1")?;
        stmt.execute([prefix])?;
        Ok(())
    }
}

/// Opens a connection to the database at `path`: read-only, or read-write in WAL mode.
fn open_connection(
    dir: &Path,
    path: &Path,
    read_only: bool,
    cache_kib: u64,
) -> Result<Connection, StateError> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let opened = || -> rusqlite::Result<(Connection, String)> {
        let conn = Connection::open_with_flags(path, flags)?;
        // A writer checkpointing, or a reader opening as the WAL is reset, holds the file for
        // a moment: waited for, not reported.
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.set_prepared_statement_cache_capacity(64);
        let cache = -i64::try_from(cache_kib.max(MIN_CACHE_KIB)).unwrap_or(i64::MAX);
        conn.pragma_update(None, "cache_size", cache)?;
        if read_only {
            return Ok((conn, "wal".into()));
        }
        // Set before the first table is made (a new file), so that pruning can give pages
        // back (`PRAGMA incremental_vacuum`, [`retention`]); a no-op on a file that has tables.
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        let mode = conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // The WAL shrinks back to this after a checkpoint that emptied it.
        conn.pragma_update(None, "journal_size_limit", 16 * 1024 * 1024)?;
        Ok((conn, mode))
    };
    let (conn, mode) = opened().map_err(|e| corrupt(dir, e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StateError::Corrupt {
            dir: dir.to_owned(),
            reason: format!("its journal cannot be put in WAL mode (it is {mode})"),
        });
    }
    Ok(conn)
}

/// Whether the database file exists with its tables (a reader opens only such a file).
fn has_schema(dir: &Path, path: &Path) -> Result<bool, StateError> {
    if !path.is_file() {
        return Ok(false);
    }
    let conn = open_connection(dir, path, true, 1024)?;
    Ok(schema::user_version(&conn).map_err(|e| corrupt(dir, e))? > 0)
}

/// A database that cannot be read at all: named with the way to recover; or one this user
/// may not open (SQLite's "read-only" and "cannot open" codes), which is no damage.
fn corrupt(dir: &Path, e: impl Into<StateError>) -> StateError {
    use rusqlite::ErrorCode::{CannotOpen, PermissionDenied, ReadOnly};
    match e.into() {
        StateError::Storage(rusqlite::Error::SqliteFailure(f, message))
            if matches!(f.code, ReadOnly | PermissionDenied | CannotOpen) =>
        {
            StateError::Unreadable {
                path: dir.join(DB_FILE),
                reason: message.unwrap_or_else(|| f.to_string()),
            }
        }
        StateError::Storage(e) => StateError::Corrupt {
            dir: dir.to_owned(),
            reason: e.to_string(),
        },
        other => other,
    }
}

/// A column holding JSON text.
fn text<'r>(row: &'r rusqlite::Row<'_>, column: usize) -> Result<&'r [u8], StateError> {
    match row.get_ref(column)? {
        rusqlite::types::ValueRef::Text(bytes) | rusqlite::types::ValueRef::Blob(bytes) => {
            Ok(bytes)
        }
        other => Err(StateError::Decode {
            what: "stored value",
            source: format!("a {} where JSON was expected", other.data_type()).into(),
        }),
    }
}

fn clamp_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Rows read a batch at a time, each batch one short query from the key the last one ended
/// at: a long read holds neither a connection nor the whole table. The first batch is small
/// and each next one twice as large up to [`BATCH`], so a reader that stops after a few rows
/// (the uploader taking the next operations) decodes only a few.
fn batches<K, T>(
    mut read: impl FnMut(Option<&K>, usize) -> Result<Vec<(K, T)>, StateError>,
) -> impl Iterator<Item = Result<T, StateError>> {
    let mut buffer = std::collections::VecDeque::new();
    let mut last: Option<K> = None;
    let mut size = 16;
    let mut done = false;
    std::iter::from_fn(move || {
        if buffer.is_empty() && !done {
            match read(last.as_ref(), size) {
                Ok(rows) => {
                    done = rows.len() < size;
                    size = (size * 2).min(BATCH);
                    for (key, value) in rows {
                        buffer.push_back(value);
                        last = Some(key);
                    }
                }
                Err(e) => {
                    done = true;
                    return Some(Err(e));
                }
            }
        }
        buffer.pop_front().map(Ok)
    })
}

pub(crate) fn read_vehicle(
    conn: &Connection,
    organization_id: u64,
    location_id: u64,
    vin: &str,
) -> Result<Option<VehicleRecord>, StateError> {
    let mut stmt = conn.prepare_cached(
        "SELECT record FROM vehicles WHERE organization_id = ?1 AND location_id = ?2 AND vin = ?3",
    )?;
    let mut rows = stmt.query(params![organization_id, location_id, vin])?;
    match rows.next()? {
        Some(row) => Ok(Some(VehicleRecord::decode(text(row, 0)?)?)),
        None => Ok(None),
    }
}

pub(crate) fn read_location(
    conn: &Connection,
    organization_id: u64,
    vin: &str,
) -> Result<Option<u64>, StateError> {
    let mut stmt = conn
        .prepare_cached("SELECT location_id FROM vins WHERE organization_id = ?1 AND vin = ?2")?;
    Ok(stmt
        .query_row(params![organization_id, vin], |row| row.get(0))
        .optional()?)
}

pub(crate) fn read_payload(
    conn: &Connection,
    key: &VehicleKey,
) -> Result<Option<crate::api::VehiclePayload>, StateError> {
    let mut stmt = conn.prepare_cached(
        "SELECT payload FROM payloads WHERE organization_id = ?1 AND location_id = ?2 AND vin = ?3",
    )?;
    let mut rows = stmt.query(params![key.organization_id, key.location_id, key.vin])?;
    match rows.next()? {
        Some(row) => Ok(Some(records::decode(text(row, 0)?, "payload")?)),
        None => Ok(None),
    }
}

pub(crate) fn read_feed(conn: &Connection, name: &str) -> Result<Option<FeedRecord>, StateError> {
    let mut stmt = conn.prepare_cached("SELECT record FROM feeds WHERE name = ?1")?;
    let mut rows = stmt.query([name])?;
    match rows.next()? {
        Some(row) => Ok(Some(records::decode(text(row, 0)?, "feed record")?)),
        None => Ok(None),
    }
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

    /// lotsync 0.1.0's sled state is refused with the command that rebuilds it, and nothing
    /// is written beside it.
    #[test]
    fn a_sled_state_is_refused_with_the_rebuild() {
        let (_tmp, dir) = temp_dir("sled");
        std::fs::create_dir_all(dir.join("db")).unwrap();
        std::fs::write(dir.join("db/conf"), "segment_size: 524288\n").unwrap();
        std::fs::write(dir.join("db/db"), [0u8; 64]).unwrap();
        let err = State::open(&dir).unwrap_err().to_string();
        assert!(err.contains("lotsync 0.1.0"), "{err}");
        let command = format!(
            "mv {0} {0}.0.1.0 && lotsync reconcile --rebuild",
            dir.display()
        );
        assert!(err.contains(&command), "{err}");
        assert!(!dir.join(DB_FILE).exists());
    }

    /// A backup taken beside a writer that keeps committing is a state of its own: it opens,
    /// passes SQLite's integrity check and holds what was committed before it was taken.
    #[test]
    fn a_backup_taken_beside_the_writer_opens_whole() {
        let (tmp, dir) = temp_dir("backup");
        let writer = State::open(&dir).unwrap();
        for i in 0..200 {
            writer
                .transaction(|tx| tx.put_vehicle(1, 2, &format!("V{i}"), &VehicleRecord::default()))
                .unwrap();
        }
        let reader = State::open_with(
            &dir,
            &Opening {
                holder: Holder::Reader("backup"),
                ..Opening::default()
            },
        )
        .unwrap();
        let copy = tmp.path().join("copy");
        std::fs::create_dir_all(&copy).unwrap();
        reader.backup_to(&copy.join(DB_FILE)).unwrap();
        writer
            .transaction(|tx| tx.put_vehicle(1, 2, "AFTER", &VehicleRecord::default()))
            .unwrap();
        let restored = State::open(&copy).unwrap();
        let check: String = restored
            .reader()
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .unwrap();
        assert_eq!(check, "ok");
        assert_eq!(restored.vehicle_count(), 200);
        assert_eq!(restored.id().unwrap(), writer.id().unwrap());
        assert!(
            reader.backup_to(&copy.join(DB_FILE)).is_err(),
            "never over a file"
        );
    }

    /// A reader beside a writer answers at once and sees what the writer committed; it
    /// cannot write.
    #[test]
    fn readers_open_beside_a_writer() {
        let (_tmp, dir) = temp_dir("readers");
        let writer = State::open(&dir).unwrap();
        writer
            .transaction(|tx| tx.put_vehicle(1, 2, "K", &VehicleRecord::default()))
            .unwrap();
        let reading = Opening {
            holder: Holder::Reader("status"),
            ..Opening::default()
        };
        let started = std::time::Instant::now();
        let reader = State::open_with(&dir, &reading).unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(reader.vehicle_count(), 1);
        assert_eq!(reader.id().unwrap(), writer.id().unwrap());
        writer
            .transaction(|tx| tx.put_vehicle(1, 2, "L", &VehicleRecord::default()))
            .unwrap();
        assert_eq!(reader.vehicle_count(), 2, "a later commit is seen");
        assert!(matches!(
            reader.set_upload_rate(1.0),
            Err(StateError::ReadOnly { .. })
        ));
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
            .transaction(|tx| tx.put_vehicle(1, 2, "K", &VehicleRecord::default()))
            .unwrap();
        drop(state);
        // Overwrite the database with noise.
        let path = dir.join(DB_FILE);
        let len = std::fs::metadata(&path).unwrap().len().max(64) as usize;
        let noise: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
        std::fs::write(&path, noise).unwrap();
        let err = State::open(&dir).unwrap_err().to_string();
        assert!(err.contains("cannot be opened"), "{err}");
        assert!(err.contains("lotsync reconcile"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
