//! One transaction over the whole state, and the writes it is made of, by name.
//!
//! The outbox's commits (a file's plan, an answer of the service, the reconciliation's findings)
//! each change several trees at once; [`State::transaction`] runs them as one sled transaction
//! over every tree, and [`StateTx`] says what they read and write in the state's own terms
//! (a vehicle, its payload, a queued operation, a file's record) so that keys and trees stay
//! this module's. It owns the layout of those writes, not what they mean: that is the outbox's.
//!
//! sled may run a transaction's closure more than once (on a conflict): it must only read and
//! write through the [`StateTx`] it is given.

use super::history::{self, Event};
use super::keys::{queue_key, vehicle_key, vin_key};
use super::records::{self, Counters, Delivered, FeedRecord, FileRecord, OutboxEntry};
use super::{decode_u64, State, StateError, VehicleRecord, NEXT_SEQ_KEY, PLANS_KEY};
use crate::api::VehiclePayload;
use sled::transaction::{ConflictableTransactionError, TransactionError, TransactionalTree};
use sled::Transactional;

/// What a step of a transaction returns: its value, or an abort with the caller's error (or a
/// conflict, which sled retries).
pub type Txn<T, E> = Result<T, ConflictableTransactionError<E>>;

/// A state error, as the abort of a transaction whose error is `E`.
fn abort<E: From<StateError>>(e: StateError) -> ConflictableTransactionError<E> {
    ConflictableTransactionError::Abort(E::from(e))
}

/// The state's trees inside one transaction (see the module's doc).
pub struct StateTx<'t> {
    meta: &'t TransactionalTree,
    vehicles: &'t TransactionalTree,
    payloads: &'t TransactionalTree,
    vins: &'t TransactionalTree,
    listings: &'t TransactionalTree,
    files: &'t TransactionalTree,
    feeds: &'t TransactionalTree,
    outbox: &'t TransactionalTree,
    queue: &'t TransactionalTree,
    delivered: &'t TransactionalTree,
    history: &'t TransactionalTree,
}

impl State {
    /// Runs `f` as one transaction over the whole state: all of its writes land, or none.
    /// Not flushed (see [`State::flush`]).
    pub fn transaction<T, E: From<StateError>>(
        &self,
        f: impl Fn(&StateTx<'_>) -> Txn<T, E>,
    ) -> Result<T, E> {
        let t = &self.trees;
        let trees = (
            &t.meta,
            &t.vehicles,
            &t.payloads,
            &t.vins,
            &t.listings,
            &t.files,
            &t.feeds,
            &t.outbox,
            &t.queue,
            &t.delivered,
            &t.history,
        );
        let done = trees.transaction(
            |(
                meta,
                vehicles,
                payloads,
                vins,
                listings,
                files,
                feeds,
                outbox,
                queue,
                delivered,
                history,
            )| {
                f(&StateTx {
                    meta,
                    vehicles,
                    payloads,
                    vins,
                    listings,
                    files,
                    feeds,
                    outbox,
                    queue,
                    delivered,
                    history,
                })
            },
        );
        done.map_err(|e| match e {
            TransactionError::Abort(e) => e,
            TransactionError::Storage(e) => E::from(StateError::Storage(e)),
        })
    }
}

impl StateTx<'_> {
    /// The outbox's conservation counters.
    pub fn counters<E: From<StateError>>(&self) -> Txn<Counters, E> {
        match self.meta.get(records::COUNTERS_KEY)? {
            Some(v) => records::decode(&v, "outbox counters").map_err(abort),
            None => Ok(Counters::default()),
        }
    }

    pub fn set_counters<E: From<StateError>>(&self, counters: &Counters) -> Txn<(), E> {
        let bytes = records::encode(counters, "outbox counters").map_err(abort)?;
        self.meta.insert(records::COUNTERS_KEY, bytes)?;
        Ok(())
    }

    /// The sequence number the next queued operation takes (from 1).
    pub fn next_seq<E: From<StateError>>(&self) -> Txn<u64, E> {
        Ok(self.meta_u64(NEXT_SEQ_KEY)?.max(1))
    }

    pub fn set_next_seq<E: From<StateError>>(&self, seq: u64) -> Txn<(), E> {
        self.meta.insert(NEXT_SEQ_KEY, &seq.to_be_bytes())?;
        Ok(())
    }

    /// The number the next plan (a file, a reconciliation) is filed under (from 1).
    pub fn next_file_no<E: From<StateError>>(&self) -> Txn<u64, E> {
        Ok(self.meta_u64(PLANS_KEY)?.max(1))
    }

    pub fn set_next_file_no<E: From<StateError>>(&self, file_no: u64) -> Txn<(), E> {
        self.meta.insert(PLANS_KEY, &file_no.to_be_bytes())?;
        Ok(())
    }

    fn meta_u64<E: From<StateError>>(&self, key: &[u8]) -> Txn<u64, E> {
        match self.meta.get(key)? {
            Some(v) => decode_u64(&v, "counter").map_err(abort),
            None => Ok(0),
        }
    }

    /// Queues an operation: its entry, and its place in its vehicle's queue.
    pub fn enqueue<E: From<StateError>>(&self, entry: &OutboxEntry) -> Txn<(), E> {
        let bytes = records::encode(entry, "outbox entry").map_err(abort)?;
        self.outbox.insert(&entry.seq.to_be_bytes(), bytes)?;
        let key = queue_key(entry.organization_id, &entry.vin, entry.seq);
        self.queue.insert(key, &[][..])?;
        Ok(())
    }

    /// Takes an operation out of the queue (answered or replaced); None when it is not queued.
    pub fn dequeue<E: From<StateError>>(&self, seq: u64) -> Txn<Option<OutboxEntry>, E> {
        let Some(v) = self.outbox.remove(&seq.to_be_bytes())? else {
            return Ok(None);
        };
        let entry: OutboxEntry = records::decode(&v, "outbox entry").map_err(abort)?;
        self.queue
            .remove(queue_key(entry.organization_id, &entry.vin, seq))?;
        Ok(Some(entry))
    }

    /// The location a VIN of the organization is filed under.
    pub fn location_of<E: From<StateError>>(&self, org: u64, vin: &str) -> Txn<Option<u64>, E> {
        match self.vins.get(vin_key(org, vin))? {
            Some(v) => Ok(Some(decode_u64(&v, "VIN index").map_err(abort)?)),
            None => Ok(None),
        }
    }

    /// Files a VIN of the organization under a location.
    pub fn index_vin<E: From<StateError>>(&self, org: u64, vin: &str, location: u64) -> Txn<(), E> {
        self.vins
            .insert(vin_key(org, vin), &location.to_be_bytes())?;
        Ok(())
    }

    pub fn unindex_vin<E: From<StateError>>(&self, org: u64, vin: &str) -> Txn<(), E> {
        self.vins.remove(vin_key(org, vin))?;
        Ok(())
    }

    pub fn vehicle<E: From<StateError>>(
        &self,
        org: u64,
        location: u64,
        vin: &str,
    ) -> Txn<Option<VehicleRecord>, E> {
        match self.vehicles.get(vehicle_key(org, location, vin))? {
            Some(v) => Ok(Some(VehicleRecord::decode(&v).map_err(abort)?)),
            None => Ok(None),
        }
    }

    pub fn put_vehicle<E: From<StateError>>(
        &self,
        org: u64,
        location: u64,
        vin: &str,
        record: &VehicleRecord,
    ) -> Txn<(), E> {
        let bytes = record.encode().map_err(abort)?;
        self.vehicles
            .insert(vehicle_key(org, location, vin), bytes)?;
        Ok(())
    }

    /// Removes a vehicle's record and its acknowledged payload from a location (the VIN's
    /// index stays: see [`StateTx::unindex_vin`]).
    pub fn remove_vehicle<E: From<StateError>>(
        &self,
        org: u64,
        location: u64,
        vin: &str,
    ) -> Txn<(), E> {
        let key = vehicle_key(org, location, vin);
        self.vehicles.remove(key.clone())?;
        self.payloads.remove(key)?;
        Ok(())
    }

    /// The payload the service last acknowledged for a vehicle, wherever it is filed; None
    /// when there is none or it cannot be read (it only says which fields an update changes).
    pub fn acknowledged_payload<E: From<StateError>>(
        &self,
        org: u64,
        vin: &str,
    ) -> Txn<Option<VehiclePayload>, E> {
        let Some(location) = self.location_of(org, vin)? else {
            return Ok(None);
        };
        Ok(self
            .payloads
            .get(vehicle_key(org, location, vin))?
            .and_then(|v| serde_json::from_slice(&v).ok()))
    }

    pub fn put_payload<E: From<StateError>>(
        &self,
        org: u64,
        location: u64,
        vin: &str,
        payload: &VehiclePayload,
    ) -> Txn<(), E> {
        let bytes = records::encode(payload, "payload").map_err(abort)?;
        self.payloads
            .insert(vehicle_key(org, location, vin), bytes)?;
        Ok(())
    }

    pub fn put_file<E: From<StateError>>(&self, file_no: u64, record: &FileRecord) -> Txn<(), E> {
        let bytes = records::encode(record, "file record").map_err(abort)?;
        self.files.insert(&file_no.to_be_bytes(), bytes)?;
        Ok(())
    }

    /// A feed's record; the default one for a feed never recorded.
    pub fn feed<E: From<StateError>>(&self, feed: &str) -> Txn<FeedRecord, E> {
        match self.feeds.get(feed.as_bytes())? {
            Some(v) => records::decode(&v, "feed record").map_err(abort),
            None => Ok(FeedRecord::default()),
        }
    }

    pub fn put_feed<E: From<StateError>>(&self, feed: &str, record: &FeedRecord) -> Txn<(), E> {
        let bytes = records::encode(record, "feed record").map_err(abort)?;
        self.feeds.insert(feed.as_bytes(), bytes)?;
        Ok(())
    }

    /// The VINs a location's latest applied full snapshot listed (a [`super::Listing`], or
    /// a borrowed value that writes as one).
    pub fn put_listing<E: From<StateError>>(
        &self,
        org: u64,
        location: u64,
        listing: &impl serde::Serialize,
    ) -> Txn<(), E> {
        let bytes = records::encode(listing, "listing").map_err(abort)?;
        self.listings
            .insert(&super::location_prefix(org, location), bytes)?;
        Ok(())
    }

    /// Counts one more answer to a planned file's operations.
    pub fn count_delivered<E: From<StateError>>(
        &self,
        file_no: u64,
        count: impl FnOnce(&mut Delivered),
    ) -> Txn<(), E> {
        let mut counted: Delivered = match self.delivered.get(file_no.to_be_bytes())? {
            Some(v) => records::decode(&v, "delivery counts").map_err(abort)?,
            None => Delivered::default(),
        };
        count(&mut counted);
        let bytes = records::encode(&counted, "delivery counts").map_err(abort)?;
        self.delivered.insert(&file_no.to_be_bytes(), bytes)?;
        Ok(())
    }

    /// Adds events to a vehicle's history (see [`history::append`]).
    pub fn append_history<E: From<StateError>>(
        &self,
        org: u64,
        vin: &str,
        events: Vec<Event>,
        now: i64,
    ) -> Txn<(), E> {
        history::append(self.history, org, vin, events, now)
    }

    /// Adds the service's answer to a queued operation to its vehicle's history (see
    /// [`history::answer`]).
    pub fn answer_history<E: From<StateError>>(
        &self,
        entry: &OutboxEntry,
        answer: history::Answer,
        now: i64,
    ) -> Txn<(), E> {
        history::answer(self.history, entry, answer, now)
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
            Err(abort(StateError::Decode {
                what: "test",
                source: "stop here".into(),
            }))
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
