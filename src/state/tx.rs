//! One transaction over the whole state, and the writes it is made of, by name.
//!
//! The outbox's commits (a file's plan, an answer of the service, the reconciliation's findings)
//! each change several tables at once; [`State::transaction`] runs them as one SQLite
//! transaction on the writer's connection, and [`StateTx`] says what they read and write in the
//! state's own terms (a vehicle, its payload, a queued operation, a file's record) so that
//! tables and columns stay this module's. It owns the layout of those writes, not what they
//! mean: that is the outbox's.

use super::history::{self, Event};
use super::records::{self, Counters, Delivered, FeedRecord, FileRecord, OutboxEntry};
use super::{text, State, StateError, VehicleRecord, NEXT_SEQ_KEY, PLANS_KEY};
use crate::api::VehiclePayload;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

/// What a transaction's closure returns: its value, or the caller's error (which rolls the
/// transaction back).
pub type Txn<T, E> = Result<T, E>;

/// The state's tables inside one transaction (see the module's doc).
pub struct StateTx<'t> {
    conn: &'t Connection,
}

impl State {
    /// Runs `f` as one transaction over the whole state: all of its writes land, or none (an
    /// error from `f` rolls it back). Durable against the process being killed once it
    /// returns; against a power cut after [`State::flush`].
    pub fn transaction<T, E: From<StateError>>(
        &self,
        f: impl FnOnce(&StateTx<'_>) -> Txn<T, E>,
    ) -> Result<T, E> {
        let mut conn = self.writer("a transaction")?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(StateError::from)?;
        let value = f(&StateTx { conn: &tx })?;
        tx.commit().map_err(StateError::from)?;
        Ok(value)
    }
}

/// The outbox's counters, as `conn` sees them.
pub(super) fn read_counters(conn: &Connection) -> Result<Counters, StateError> {
    let mut stmt = conn.prepare_cached("SELECT value FROM meta WHERE key = ?1")?;
    let mut rows = stmt.query([records::COUNTERS_KEY])?;
    match rows.next()? {
        Some(row) => records::decode(text(row, 0)?, "outbox counters"),
        None => Ok(Counters::default()),
    }
}

/// What the service answered to a planned file's operations, as `conn` sees it.
pub(super) fn read_delivered(conn: &Connection, file_no: u64) -> Result<Delivered, StateError> {
    let mut stmt = conn.prepare_cached("SELECT counts FROM delivered WHERE file_no = ?1")?;
    let mut rows = stmt.query([file_no])?;
    match rows.next()? {
        Some(row) => records::decode(text(row, 0)?, "delivery counts"),
        None => Ok(Delivered::default()),
    }
}

impl<'t> StateTx<'t> {
    /// The transaction's connection, for this module's own siblings (pruning).
    pub(super) fn conn(&self) -> &'t Connection {
        self.conn
    }

    /// The outbox's conservation counters.
    pub fn counters(&self) -> Result<Counters, StateError> {
        read_counters(self.conn)
    }

    pub fn set_counters(&self, counters: &Counters) -> Result<(), StateError> {
        let json = records::encode(counters, "outbox counters")?;
        self.set_meta(records::COUNTERS_KEY, json)
    }

    /// The sequence number the next queued operation takes (from 1).
    pub fn next_seq(&self) -> Result<u64, StateError> {
        Ok(self.meta_u64(NEXT_SEQ_KEY)?.max(1))
    }

    pub fn set_next_seq(&self, seq: u64) -> Result<(), StateError> {
        self.set_meta(NEXT_SEQ_KEY, seq)
    }

    /// The number the next plan (a file, a reconciliation) is filed under (from 1).
    pub fn next_file_no(&self) -> Result<u64, StateError> {
        Ok(self.meta_u64(PLANS_KEY)?.max(1))
    }

    pub fn set_next_file_no(&self, file_no: u64) -> Result<(), StateError> {
        self.set_meta(PLANS_KEY, file_no)
    }

    fn meta_u64(&self, key: &str) -> Result<u64, StateError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT value FROM meta WHERE key = ?1")?;
        let value: Option<i64> = stmt.query_row([key], |row| row.get(0)).optional()?;
        Ok(value.map_or(0, |v| u64::try_from(v).unwrap_or(0)))
    }

    fn set_meta(&self, key: &str, value: impl rusqlite::ToSql) -> Result<(), StateError> {
        let mut stmt = self
            .conn
            .prepare_cached("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)")?;
        stmt.execute(params![key, value])?;
        Ok(())
    }

    /// Queues an operation (its vehicle's queue is the outbox's index by VIN).
    pub fn enqueue(&self, entry: &OutboxEntry) -> Result<(), StateError> {
        let json = records::encode(entry, "outbox entry")?;
        let mut stmt = self.conn.prepare_cached(
            "INSERT OR REPLACE INTO outbox (seq, organization_id, vin, entry) VALUES (?1, ?2, ?3, ?4)",
        )?;
        stmt.execute(params![entry.seq, entry.organization_id, entry.vin, json])?;
        Ok(())
    }

    /// Takes an operation out of the queue (answered or replaced); None when it is not queued.
    pub fn dequeue(&self, seq: u64) -> Result<Option<OutboxEntry>, StateError> {
        let mut stmt = self
            .conn
            .prepare_cached("DELETE FROM outbox WHERE seq = ?1 RETURNING entry")?;
        let mut rows = stmt.query([seq])?;
        let entry = match rows.next()? {
            Some(row) => Some(records::decode(text(row, 0)?, "outbox entry")?),
            None => None,
        };
        // RETURNING's statement finishes its deletion when it is stepped to its end.
        while rows.next()?.is_some() {}
        Ok(entry)
    }

    /// The location a VIN of the organization is filed under.
    pub fn location_of(&self, org: u64, vin: &str) -> Result<Option<u64>, StateError> {
        super::read_location(self.conn, org, vin)
    }

    /// Files a VIN of the organization under a location.
    pub fn index_vin(&self, org: u64, vin: &str, location: u64) -> Result<(), StateError> {
        let mut stmt = self.conn.prepare_cached(
            "INSERT OR REPLACE INTO vins (organization_id, vin, location_id) VALUES (?1, ?2, ?3)",
        )?;
        stmt.execute(params![org, vin, location])?;
        Ok(())
    }

    pub fn unindex_vin(&self, org: u64, vin: &str) -> Result<(), StateError> {
        let mut stmt = self
            .conn
            .prepare_cached("DELETE FROM vins WHERE organization_id = ?1 AND vin = ?2")?;
        stmt.execute(params![org, vin])?;
        Ok(())
    }

    pub fn vehicle(
        &self,
        org: u64,
        location: u64,
        vin: &str,
    ) -> Result<Option<VehicleRecord>, StateError> {
        super::read_vehicle(self.conn, org, location, vin)
    }

    pub fn put_vehicle(
        &self,
        org: u64,
        location: u64,
        vin: &str,
        record: &VehicleRecord,
    ) -> Result<(), StateError> {
        let json = record.encode()?;
        let mut stmt = self.conn.prepare_cached(
            "INSERT OR REPLACE INTO vehicles (organization_id, location_id, vin, record) VALUES (?1, ?2, ?3, ?4)",
        )?;
        stmt.execute(params![org, location, vin, json])?;
        Ok(())
    }

    /// Removes a vehicle's record and its acknowledged payload from a location (the VIN's
    /// index stays: see [`StateTx::unindex_vin`]).
    pub fn remove_vehicle(&self, org: u64, location: u64, vin: &str) -> Result<(), StateError> {
        for table in ["vehicles", "payloads"] {
            let mut stmt = self.conn.prepare_cached(&format!(
                "DELETE FROM {table} WHERE organization_id = ?1 AND location_id = ?2 AND vin = ?3"
            ))?;
            stmt.execute(params![org, location, vin])?;
        }
        Ok(())
    }

    /// The payload the service last acknowledged for a vehicle, wherever it is filed; None
    /// when there is none or it cannot be read (it only says which fields an update changes).
    pub fn acknowledged_payload(
        &self,
        org: u64,
        vin: &str,
    ) -> Result<Option<VehiclePayload>, StateError> {
        let Some(location) = self.location_of(org, vin)? else {
            return Ok(None);
        };
        let key = super::VehicleKey::new(org, location, vin);
        Ok(super::read_payload(self.conn, &key).unwrap_or(None))
    }

    pub fn put_payload(
        &self,
        org: u64,
        location: u64,
        vin: &str,
        payload: &VehiclePayload,
    ) -> Result<(), StateError> {
        let json = records::encode(payload, "payload")?;
        let mut stmt = self.conn.prepare_cached(
            "INSERT OR REPLACE INTO payloads (organization_id, location_id, vin, payload) VALUES (?1, ?2, ?3, ?4)",
        )?;
        stmt.execute(params![org, location, vin, json])?;
        Ok(())
    }

    pub fn put_file(&self, file_no: u64, record: &FileRecord) -> Result<(), StateError> {
        let json = records::encode(record, "file record")?;
        let mut stmt = self
            .conn
            .prepare_cached("INSERT OR REPLACE INTO files (file_no, record) VALUES (?1, ?2)")?;
        stmt.execute(params![file_no, json])?;
        Ok(())
    }

    /// A feed's record; the default one for a feed never recorded.
    pub fn feed(&self, feed: &str) -> Result<FeedRecord, StateError> {
        Ok(super::read_feed(self.conn, feed)?.unwrap_or_default())
    }

    /// The vehicles `old` owns or shares, and its listings, are `new`'s
    /// ([`super::State::continue_renamed_feeds`]).
    pub fn rename_owner(&self, old: &str, new: &str) -> Result<(), StateError> {
        for field in ["$.owner", "$.shared"] {
            self.conn.execute(
                "UPDATE vehicles SET record = json_set(record, ?1, ?3)
                 WHERE json_extract(record, ?1) = ?2",
                params![field, old, new],
            )?;
        }
        self.conn.execute(
            "UPDATE OR REPLACE listings SET feed = ?2, listing = json_set(listing, '$.feed', ?2)
             WHERE feed = ?1",
            params![old, new],
        )?;
        Ok(())
    }

    pub fn put_feed(&self, feed: &str, record: &FeedRecord) -> Result<(), StateError> {
        let json = records::encode(record, "feed record")?;
        let mut stmt = self
            .conn
            .prepare_cached("INSERT OR REPLACE INTO feeds (name, record) VALUES (?1, ?2)")?;
        stmt.execute(params![feed, json])?;
        Ok(())
    }

    /// The VINs a location's latest applied full snapshot listed (a [`super::Listing`], or
    /// a borrowed value that writes as one).
    pub fn put_listing(
        &self,
        org: u64,
        location: u64,
        feed: &str,
        listing: &impl serde::Serialize,
    ) -> Result<(), StateError> {
        let json = records::encode(listing, "listing")?;
        let mut stmt = self.conn.prepare_cached(
            "INSERT OR REPLACE INTO listings (organization_id, location_id, feed, listing)
             VALUES (?1, ?2, ?3, ?4)",
        )?;
        stmt.execute(params![org, location, feed, json])?;
        Ok(())
    }

    /// Counts one more answer to a planned file's operations.
    pub fn count_delivered(
        &self,
        file_no: u64,
        count: impl FnOnce(&mut Delivered),
    ) -> Result<(), StateError> {
        let mut counted = read_delivered(self.conn, file_no)?;
        count(&mut counted);
        let json = records::encode(&counted, "delivery counts")?;
        let mut stmt = self
            .conn
            .prepare_cached("INSERT OR REPLACE INTO delivered (file_no, counts) VALUES (?1, ?2)")?;
        stmt.execute(params![file_no, json])?;
        Ok(())
    }

    /// Adds events to a vehicle's history (see [`history::append`]).
    pub fn append_history(
        &self,
        org: u64,
        vin: &str,
        events: Vec<Event>,
        now: i64,
    ) -> Result<(), StateError> {
        history::append(self.conn, org, vin, events, now)
    }

    /// Adds the service's answer to a queued operation to its vehicle's history (see
    /// [`history::answer`]).
    pub fn answer_history(
        &self,
        entry: &OutboxEntry,
        answer: history::Answer,
        now: i64,
    ) -> Result<(), StateError> {
        history::answer(self.conn, entry, answer, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Op;

    fn entry(seq: u64, vin: &str) -> OutboxEntry {
        OutboxEntry {
            seq,
            organization_id: 7,
            location_id: 3,
            vin: vin.to_owned(),
            op: Op::MarkSold,
            file: "inv.csv".to_owned(),
            file_no: Some(1),
            queued_at: 0,
            queuing: Default::default(),
        }
    }

    /// An operation is queued with its place in its vehicle's queue and taken out of both:
    /// a vehicle's queue never names an operation that is gone, nor another VIN's.
    #[test]
    fn enqueue_and_dequeue_keep_the_queue_and_its_index_together() {
        let dir = crate::testing::temp_dir("tx");
        let state = State::open(dir.path()).unwrap();
        state
            .transaction(|tx: &StateTx| -> Txn<(), StateError> {
                tx.enqueue(&entry(1, "VIN1"))?;
                tx.enqueue(&entry(2, "VIN10"))?;
                tx.enqueue(&entry(3, "VIN1"))
            })
            .unwrap();
        let seqs = |vin| -> Vec<u64> {
            let queued = state.queued_of(7, vin).unwrap();
            queued.iter().map(|e| e.seq).collect()
        };
        assert_eq!(seqs("VIN1"), [1, 3]);
        assert_eq!(seqs("VIN10"), [2]);
        assert_eq!(state.queue_len(), 3);

        let taken = state
            .transaction(|tx: &StateTx| -> Txn<_, StateError> { tx.dequeue(1) })
            .unwrap();
        assert_eq!(taken, Some(entry(1, "VIN1")));
        assert_eq!(seqs("VIN1"), [3]);
        assert!(!state.is_queued(1).unwrap() && state.is_queued(3).unwrap());
        let again = state
            .transaction(|tx: &StateTx| -> Txn<_, StateError> { tx.dequeue(1) })
            .unwrap();
        assert_eq!(again, None);
        let left: Vec<u64> = state.queued(0..=u64::MAX).map(|e| e.unwrap().seq).collect();
        assert_eq!(left, [2, 3]);
    }

    /// A transaction that fails part-way writes nothing: not the operation it queued, not
    /// the vehicle, not the counters.
    #[test]
    fn an_aborted_transaction_leaves_the_state_as_it_was() {
        let dir = crate::testing::temp_dir("tx");
        let state = State::open(dir.path()).unwrap();
        let failed = state.transaction(|tx: &StateTx| -> Txn<(), StateError> {
            tx.enqueue(&entry(1, "VIN1"))?;
            tx.put_vehicle(7, 3, "VIN1", &VehicleRecord::default())?;
            tx.index_vin(7, "VIN1", 3)?;
            tx.set_counters(&Counters {
                queued: 1,
                ..Counters::default()
            })?;
            Err(StateError::Decode {
                what: "test",
                source: "stop here".into(),
            })
        });
        assert!(matches!(
            failed,
            Err(StateError::Decode { what: "test", .. })
        ));
        assert!(state.queue_is_empty());
        assert!(state.queued_of(7, "VIN1").unwrap().is_empty());
        assert_eq!(state.find_vin(7, "VIN1").unwrap(), None);
        assert_eq!(state.counters().unwrap(), Counters::default());
    }

    /// A vehicle moved to another location is read there, and its old place holds nothing.
    #[test]
    fn a_vehicle_is_read_where_its_vin_is_filed() {
        let dir = crate::testing::temp_dir("tx");
        let state = State::open(dir.path()).unwrap();
        let payload = VehiclePayload::new(3, "S1", "VIN1");
        state
            .transaction(|tx: &StateTx| -> Txn<(), StateError> {
                tx.put_vehicle(7, 3, "VIN1", &VehicleRecord::default())?;
                tx.put_payload(7, 3, "VIN1", &payload)?;
                tx.index_vin(7, "VIN1", 3)
            })
            .unwrap();
        let moved = state
            .transaction(|tx: &StateTx| -> Txn<_, StateError> {
                assert_eq!(tx.acknowledged_payload(7, "VIN1")?, Some(payload.clone()));
                tx.remove_vehicle(7, 3, "VIN1")?;
                tx.put_vehicle(7, 4, "VIN1", &VehicleRecord::default())?;
                tx.index_vin(7, "VIN1", 4)?;
                Ok((
                    tx.vehicle(7, 3, "VIN1")?,
                    tx.acknowledged_payload(7, "VIN1")?,
                ))
            })
            .unwrap();
        assert_eq!(moved, (None, None));
        let (key, _) = state.find_vin(7, "VIN1").unwrap().unwrap();
        assert_eq!(key.location_id, 4);
    }
}
