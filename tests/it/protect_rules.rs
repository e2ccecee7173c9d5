//! The diff's rules for what a full snapshot keeps on the lot though it does not list it
//! validly, on a real SQLite state on disk: a rejected record matching
//! several vehicles keeps them all, and a vehicle another lot lists is moved, not sold, even
//! when the service refused its move.

use crate::common;

use common::{answer_all, TempDir};
use lotsync::api::VehiclePayload;
use lotsync::diff::{Differ, FileId, Mode, Plan, ProtectedBy, Rules};
use lotsync::mapper::{Accepted, Rejected};
use lotsync::outbox::{Answer, Outbox};
use lotsync::state::State;
use std::collections::BTreeSet;

const ORG: u64 = 100;

fn rules(lot: u64) -> Rules {
    Rules {
        organization_id: ORG,
        feed: format!("lot{lot}"),
        mode: Mode::Full,
        sold_after_absent: 1,
        max_sold_fraction: 1.0,
        locations: BTreeSet::from([lot]),
        force: false,
        sibling_feeds: Default::default(),
    }
}

fn vin(n: u32) -> String {
    format!("TESTVIN{n:010}")
}

fn car(n: u32, lot: u64) -> VehiclePayload {
    let mut p = VehiclePayload::new(lot, format!("S{n}"), vin(n));
    p.make = Some("Honda".into());
    p
}

/// Diffs a file of lot `lot` (accepted `cars`, then `rejected`) and commits it.
fn commit(
    outbox: &Outbox,
    lot: u64,
    name: &str,
    cars: &[VehiclePayload],
    rejected: &[Rejected],
) -> Plan {
    let file = FileId {
        name: name.into(),
        sha256: lotsync::state::Digest::of(name.as_bytes()).to_string(),
    };
    let mut differ = Differ::new(outbox, rules(lot), file).unwrap();
    for (i, payload) in cars.iter().enumerate() {
        differ
            .accepted(&Accepted {
                line: i as u64 + 2,
                payload: payload.clone(),
                sold: None,
                warnings: Vec::new(),
            })
            .unwrap();
    }
    for r in rejected {
        differ.rejected(r);
    }
    differ.commit().unwrap()
}

fn sold(plan: &Plan) -> Vec<&str> {
    plan.ops
        .iter()
        .filter(|o| o.op.name() == "sold")
        .map(|o| o.vin.as_str())
        .collect()
}

fn state(name: &str) -> (TempDir, Outbox) {
    let dir = TempDir::new(name);
    let outbox = Outbox::new(State::open(&dir.path().join("state")).unwrap());
    (dir, outbox)
}

/// A stock number that two vehicles share (a DMS that reuses them): its rejected record
/// keeps both, and each protection says the record matches two.
#[test]
fn a_stock_number_of_two_vehicles_keeps_both() {
    let (_dir, outbox) = state("protect-stock-twice");
    let mut twin = car(2, 10);
    twin.stock = "S1".into();
    commit(&outbox, 10, "a.csv", &[car(1, 10), twin, car(3, 10)], &[]);
    answer_all(&outbox);
    let record = Rejected {
        line: 7,
        stock: Some(" s1 ".into()),
        location_id: Some(10),
        ..Rejected::default()
    };
    let plan = commit(&outbox, 10, "b.csv", &[car(3, 10)], &[record]);
    assert!(sold(&plan).is_empty(), "{:?}", plan.ops);
    assert_eq!(plan.counts.protected, 2);
    let kept: Vec<(&str, ProtectedBy, u32)> = plan
        .protected
        .iter()
        .map(|p| (p.vin.as_str(), p.by, p.vehicles))
        .collect();
    assert_eq!(
        kept,
        [
            (vin(1).as_str(), ProtectedBy::Stock, 2),
            (vin(2).as_str(), ProtectedBy::Stock, 2)
        ]
    );
    assert!(
        plan.protected[0].to_string().contains("matches 2 vehicles"),
        "{}",
        plan.protected[0]
    );
}

/// A typed VIN one character away from two known VINs keeps both; a VIN two typos away from
/// every known one keeps nothing, and that vehicle is sold.
#[test]
fn a_vin_one_typo_from_two_vehicles_keeps_both() {
    let (_dir, outbox) = state("protect-near-twice");
    commit(
        &outbox,
        10,
        "a.csv",
        &[car(1, 10), car(2, 10), car(30, 10), car(4, 10)],
        &[],
    );
    answer_all(&outbox);
    let typed = |line, text: &str| Rejected {
        line,
        vin_text: Some(text.into()),
        location_id: Some(10),
        ..Rejected::default()
    };
    let plan = commit(
        &outbox,
        10,
        "b.csv",
        &[car(4, 10)],
        // ...01 and ...02 are one character from ...09; ...30 is two from ...99 swapped.
        &[typed(5, "TESTVIN0000000009"), typed(6, "TESTVIN0000000099")],
    );
    assert_eq!(sold(&plan), [vin(30).as_str()]);
    let kept: Vec<(&str, ProtectedBy, Option<u64>, u32)> = plan
        .protected
        .iter()
        .map(|p| (p.vin.as_str(), p.by, p.line, p.vehicles))
        .collect();
    assert_eq!(
        kept,
        [
            (vin(1).as_str(), ProtectedBy::NearVin, Some(5), 2),
            (vin(2).as_str(), ProtectedBy::NearVin, Some(5), 2)
        ]
    );
}

/// Lot 11's file lists car 1 (at lot 10); the service refuses the move. Lot 10's next file
/// without it does not sell it (lot 11 lists it), and does not send the refused move again.
/// Once lot 11's latest snapshot no longer lists it, lot 10's next file sells it.
#[test]
fn a_car_another_lot_lists_is_not_sold_even_when_its_move_was_refused() {
    let (_dir, outbox) = state("protect-refused-move");
    commit(&outbox, 10, "north1.csv", &[car(1, 10), car(2, 10)], &[]);
    commit(&outbox, 11, "south1.csv", &[car(5, 11)], &[]);
    answer_all(&outbox);
    let plan = commit(&outbox, 11, "south2.csv", &[car(5, 11), car(1, 11)], &[]);
    assert_eq!(plan.counts.update, 1, "{:?}", plan.ops);
    for entry in outbox.take(ORG, 16).unwrap() {
        let refusal = Answer::Rejected {
            status: 422,
            messages: vec!["location_id: not allowed".into()],
        };
        outbox.acknowledge(entry.seq, &refusal).unwrap();
    }
    let plan = commit(&outbox, 10, "north2.csv", &[car(2, 10)], &[]);
    assert!(sold(&plan).is_empty(), "{:?}", plan.ops);
    assert!(
        plan.ops.is_empty(),
        "the refused move is not sent again: {:?}",
        plan.ops
    );
    let kept = &plan.protected[0];
    assert_eq!(
        (kept.vin.as_str(), kept.by, kept.listed_at, kept.moved),
        (vin(1).as_str(), ProtectedBy::OtherLocation, Some(11), false)
    );
    assert!(kept.to_string().contains("south2.csv"), "{kept}");
    // Lot 11 no longer lists it: lot 10's next file sells it.
    commit(&outbox, 11, "south3.csv", &[car(5, 11)], &[]);
    let plan = commit(&outbox, 10, "north3.csv", &[car(2, 10)], &[]);
    assert_eq!(sold(&plan), [vin(1).as_str()]);
}
