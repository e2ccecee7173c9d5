//! The state's tables, its schema version (`PRAGMA user_version`) and the forward migrations,
//! in one place.
//!
//! Each table holds one kind of thing under the key a person would look it up by, with the
//! value as JSON (small, readable with `sqlite3`, tolerant of fields added later); the fields
//! an operator filters on are generated columns read out of that JSON (`VIRTUAL`: they take no
//! space and cannot disagree with it). `docs/guide/state.md` shows the tables and a few
//! queries. It owns the layout, not what the values mean ([`super::records`]).

use super::StateError;
use rusqlite::Connection;

/// The layout this build reads and writes. Bump it with a step in [`STEPS`].
pub const SCHEMA_VERSION: u32 = 2;

/// The steps from one version to the next: `STEPS[0]` takes version 1 to 2, and so on. A new
/// state is made as version 1 and stepped up in the same transaction.
const STEPS: [&str; SCHEMA_VERSION as usize - 1] = [TO_VERSION_2];

/// Version 2: indexes, so that each file and each answer reads what it needs and not the
/// whole table (a lot's sold cars grow with every sale until `keep_sold_days`):
/// - the vehicles a full snapshot judges (in stock, or with operations queued);
/// - a vehicle by its service id (the uploader's check before it binds an id);
/// - sold vehicles by age (pruning), which also counts the vehicles cheaply;
/// - files by age (pruning);
/// - a listing per feed of a location (two feeds of one lot each keep theirs).
const TO_VERSION_2: &str = "
CREATE TABLE listings_by_feed (
    organization_id INTEGER NOT NULL,
    location_id     INTEGER NOT NULL,
    feed            TEXT NOT NULL,
    listing         TEXT NOT NULL,
    PRIMARY KEY (organization_id, location_id, feed)
) WITHOUT ROWID;
INSERT INTO listings_by_feed
    SELECT organization_id, location_id, coalesce(json_extract(listing, '$.feed'), ''), listing
    FROM listings;
DROP TABLE listings;
ALTER TABLE listings_by_feed RENAME TO listings;
CREATE INDEX vehicles_judged ON vehicles (organization_id, location_id, vin)
    WHERE sold = 0 OR coalesce(json_extract(record, '$.queued'), 0) > 0;
CREATE INDEX vehicles_by_service_id ON vehicles (organization_id, service_id);
CREATE INDEX vehicles_by_sale ON vehicles (sold, updated_at);
CREATE INDEX files_by_time ON files (seen_at);
";

/// The layout of version 1, made in one transaction with the version.
const VERSION_1: &str = "
-- Numbers and settings of the whole state: its id, the next plan's and operation's numbers,
-- the outbox's counters (JSON), the request rate the uploader settled on.
-- `value` has no type, so no affinity: text stays text (a state id of digits is not taken
-- for a number).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value
) WITHOUT ROWID;

-- Notifications already sent (at most one per file or incident), by key.
CREATE TABLE notices (
    key        TEXT PRIMARY KEY,
    claimed_at INTEGER NOT NULL
) WITHOUT ROWID;

-- What lotsync knows of each vehicle: the service's id, sold or in stock, the digest of the
-- payload last acknowledged, files in a row without it, its queued operations, the service's
-- last refusal.
CREATE TABLE vehicles (
    organization_id INTEGER NOT NULL,
    location_id     INTEGER NOT NULL,
    vin             TEXT NOT NULL,
    record          TEXT NOT NULL,
    service_id      INTEGER GENERATED ALWAYS AS (json_extract(record, '$.service_id')) VIRTUAL,
    sold            INTEGER GENERATED ALWAYS AS (json_extract(record, '$.sold')) VIRTUAL,
    updated_at      INTEGER GENERATED ALWAYS AS (json_extract(record, '$.updated_at')) VIRTUAL,
    PRIMARY KEY (organization_id, location_id, vin)
) WITHOUT ROWID;

-- The payload the service last acknowledged for each vehicle (apart from `vehicles`, so that
-- diffing a file reads only the small records).
CREATE TABLE payloads (
    organization_id INTEGER NOT NULL,
    location_id     INTEGER NOT NULL,
    vin             TEXT NOT NULL,
    payload         TEXT NOT NULL,
    PRIMARY KEY (organization_id, location_id, vin)
) WITHOUT ROWID;

-- Where each VIN of an organization is filed (a VIN is known across the organization's lots).
CREATE TABLE vins (
    organization_id INTEGER NOT NULL,
    vin             TEXT NOT NULL,
    location_id     INTEGER NOT NULL,
    PRIMARY KEY (organization_id, vin)
) WITHOUT ROWID;

-- The VINs each location's latest applied full snapshot listed.
CREATE TABLE listings (
    organization_id INTEGER NOT NULL,
    location_id     INTEGER NOT NULL,
    listing         TEXT NOT NULL,
    PRIMARY KEY (organization_id, location_id)
) WITHOUT ROWID;

-- Every file planned (and every reconciliation), by the number it is filed under.
CREATE TABLE files (
    file_no INTEGER PRIMARY KEY,
    record  TEXT NOT NULL,
    feed    TEXT GENERATED ALWAYS AS (json_extract(record, '$.feed')) VIRTUAL,
    name    TEXT GENERATED ALWAYS AS (json_extract(record, '$.name')) VIRTUAL,
    sha256  TEXT GENERATED ALWAYS AS (json_extract(record, '$.sha256')) VIRTUAL,
    seen_at INTEGER GENERATED ALWAYS AS (json_extract(record, '$.seen_at')) VIRTUAL,
    outcome TEXT GENERATED ALWAYS AS (json_extract(record, '$.outcome.outcome')) VIRTUAL
);
CREATE INDEX files_by_content ON files (feed, sha256);
CREATE INDEX files_by_name ON files (feed, name);

-- Per feed: the file last applied, and per location the full snapshot last applied.
CREATE TABLE feeds (
    name   TEXT PRIMARY KEY,
    record TEXT NOT NULL
) WITHOUT ROWID;

-- The durable queue: each operation until the service answers it (or a newer plan replaces
-- it), in order; a vehicle's operations go out one at a time. `op`: create, update, mark_sold
-- or mark_in_stock.
CREATE TABLE outbox (
    seq             INTEGER PRIMARY KEY,
    organization_id INTEGER NOT NULL,
    vin             TEXT NOT NULL,
    entry           TEXT NOT NULL,
    op              TEXT GENERATED ALWAYS AS (CASE
                        WHEN json_type(entry, '$.op.create') IS NOT NULL THEN 'create'
                        WHEN json_type(entry, '$.op.update') IS NOT NULL THEN 'update'
                        ELSE json_extract(entry, '$.op') END) VIRTUAL,
    queued_at       INTEGER GENERATED ALWAYS AS (json_extract(entry, '$.queued_at')) VIRTUAL
);
CREATE INDEX outbox_by_vehicle ON outbox (organization_id, vin, seq);

-- Per planned file: what the service answered to its operations so far.
CREATE TABLE delivered (
    file_no INTEGER PRIMARY KEY,
    counts  TEXT NOT NULL
);

-- Each vehicle's history, for `lotsync why`: one row per event. `tag` is the operation's
-- number (or the plan's file number) and `idx` the event's place among those written together.
CREATE TABLE history (
    organization_id INTEGER NOT NULL,
    vin             TEXT NOT NULL,
    at              INTEGER NOT NULL,
    tag             INTEGER NOT NULL,
    idx             INTEGER NOT NULL,
    event           TEXT NOT NULL,
    PRIMARY KEY (organization_id, vin, at, tag, idx)
) WITHOUT ROWID;
CREATE INDEX history_by_time ON history (at);
";

/// Makes the tables of a new state, with the version, in one transaction; a state made by a
/// writer meanwhile (another process) is left as it is.
pub(super) fn create(conn: &mut Connection) -> Result<(), StateError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    if user_version(&tx)? == 0 {
        tx.execute_batch(VERSION_1)?;
        for step in STEPS {
            tx.execute_batch(step)?;
        }
        // Random, for the markers that tell this state from another ([`super::identity`]).
        let id = format!("{:032x}", fastrand::u128(..));
        tx.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2)",
            [super::STATE_ID_KEY, &id],
        )?;
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    tx.commit()?;
    Ok(())
}

/// The stored schema version: 0 for a file without tables yet.
pub(super) fn user_version(conn: &Connection) -> Result<u32, StateError> {
    Ok(conn.pragma_query_value(None, "user_version", |row| row.get(0))?)
}

/// Upgrades the stored layout from `from` to [`SCHEMA_VERSION`], one version at a time, each in
/// its own transaction with the version bump ([`STEPS`]).
pub(super) fn migrate(conn: &mut Connection, from: u32) -> Result<(), StateError> {
    for version in from..SCHEMA_VERSION {
        tracing::info!(from = version, to = version + 1, "migrating the state");
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // `from` is at least 1: a file without tables is made by [`create`].
        tx.execute_batch(STEPS[version as usize - 1])?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
    }
    Ok(())
}

/// Whether `dir` holds a state of lotsync 0.1.0 (a sled database in `db/`), which this build
/// does not read.
pub(super) fn is_sled_state(dir: &std::path::Path) -> bool {
    let db = dir.join("db");
    db.join("conf").is_file() || db.join("db").is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version-1 state is stepped up to this version, and the queries of each file and each
    /// answer then read through the new indexes.
    #[test]
    fn a_version_1_state_is_migrated_and_read_through_its_indexes() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(VERSION_1).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute(
            "INSERT INTO vehicles (organization_id, location_id, vin, record)
             VALUES (1, 2, 'V', '{\"service_id\":42,\"sold\":false}')",
            [],
        )
        .unwrap();
        migrate(&mut conn, 1).unwrap();
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);
        let plan = |sql: &str| -> String {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows = stmt.query_map([], |r| r.get::<_, String>(3)).unwrap();
            rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
        };
        for (sql, index) in [
            (super::super::JUDGED_VEHICLES, "vehicles_judged"),
            (super::super::VIN_OF_SERVICE_ID, "vehicles_by_service_id"),
            // Counted through a narrow index, not the records.
            (
                "SELECT count(*) FROM vehicles",
                "COVERING INDEX vehicles_by",
            ),
        ] {
            let sql = sql.replace("?1", "1").replace("?2", "2");
            assert!(plan(&sql).contains(index), "{sql}: {}", plan(&sql));
        }
        let vin: String = conn
            .query_row(
                &super::super::VIN_OF_SERVICE_ID
                    .replace("?1", "1")
                    .replace("?2", "42"),
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(vin, "V");
    }

    /// Every generated column reads its value out of the JSON as the records write it.
    #[test]
    fn generated_columns_read_what_the_records_store() {
        let mut conn = Connection::open_in_memory().unwrap();
        create(&mut conn).unwrap();
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);
        let record = super::super::VehicleRecord {
            service_id: Some(42),
            sold: true,
            updated_at: 1_700_000_000,
            ..Default::default()
        };
        conn.execute(
            "INSERT INTO vehicles (organization_id, location_id, vin, record) VALUES (1, 2, 'V', ?1)",
            [record.encode().unwrap()],
        )
        .unwrap();
        let (id, sold, at): (i64, i64, i64) = conn
            .query_row(
                "SELECT service_id, sold, updated_at FROM vehicles",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((id, sold, at), (42, 1, 1_700_000_000));

        let file = super::super::FileRecord {
            feed: "main".into(),
            name: "inv.csv".into(),
            sha256: "ab".into(),
            seen_at: 5,
            outcome: super::super::FileOutcome::Held { reason: "r".into() },
        };
        let json = serde_json::to_string(&file).unwrap();
        conn.execute("INSERT INTO files (file_no, record) VALUES (1, ?1)", [json])
            .unwrap();
        let row: (String, String, String, i64, String) = conn
            .query_row(
                "SELECT feed, name, sha256, seen_at, outcome FROM files",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .unwrap();
        assert_eq!(
            row,
            (
                "main".into(),
                "inv.csv".into(),
                "ab".into(),
                5,
                "held".into()
            )
        );

        let entry = super::super::OutboxEntry {
            seq: 3,
            organization_id: 1,
            location_id: 2,
            vin: "V".into(),
            op: crate::plan::Op::MarkSold,
            file: "inv.csv".into(),
            file_no: Some(1),
            queued_at: 9,
            queuing: Default::default(),
        };
        let json = serde_json::to_string(&entry).unwrap();
        conn.execute(
            "INSERT INTO outbox (seq, organization_id, vin, entry) VALUES (3, 1, 'V', ?1)",
            [json],
        )
        .unwrap();
        let (op, at): (String, i64) = conn
            .query_row("SELECT op, queued_at FROM outbox", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((op.as_str(), at), ("mark_sold", 9));
    }
}
