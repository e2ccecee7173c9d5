//! The diff's decisions on a real SQLite state in a temporary folder: create, update, sold,
//! back in stock and unchanged against what the service acknowledged (projected through what
//! is in flight), absence in full and delta snapshots, the safety guard, a refusal not sent
//! again, a re-dropped file, and a vehicle kept by a rejected record.

use super::*;
use crate::mapper::{Accepted, Rejected};
use crate::outbox::{Answer, Outbox};
use crate::state::State;
use std::collections::BTreeMap;

const ORG: u64 = 100;
const LOT: u64 = 10;

fn outbox(name: &str) -> (Outbox, tempfile::TempDir) {
    let tmp = crate::testing::temp_dir(&format!("diff-{name}"));
    let outbox = Outbox::new(State::open(&tmp.path().join("state")).expect("the state opens"));
    (outbox, tmp)
}

fn rules(mode: Mode) -> Rules {
    Rules {
        organization_id: ORG,
        feed: "main".into(),
        mode,
        sold_after_absent: 1,
        max_sold_fraction: 1.0,
        locations: [LOT].into(),
        force: false,
        sibling_feeds: Default::default(),
    }
}

/// A car of the lot: `VIN`, its stock number and price (what a file changes).
fn car(vin: &str, price: f64) -> VehiclePayload {
    let mut p = VehiclePayload::new(LOT, format!("S-{vin}"), vin);
    p.price = Some(crate::api::Price::Selling(crate::api::Amount(price)));
    p
}

/// One record of a file: the car, and what the export says of its sale.
struct Line(VehiclePayload, Option<bool>);

fn on_lot(vin: &str, price: f64) -> Line {
    Line(car(vin, price), None)
}

/// Diffs a file `name` of `lines` under `rules` and commits its plan.
fn file(outbox: &Outbox, rules: Rules, name: &str, lines: &[Line]) -> Plan {
    let mut differ = differ(outbox, rules, name, lines);
    differ.judge();
    differ.commit().expect("the plan commits")
}

/// The differ of a file, its records read, not judged.
fn differ<'o>(outbox: &'o Outbox, rules: Rules, name: &str, lines: &[Line]) -> Differ<'o> {
    let file = FileId {
        name: name.into(),
        sha256: format!("sha-{name}"),
    };
    let mut differ = Differ::new(outbox, rules, file).expect("the differ reads the state");
    for (n, Line(payload, sold)) in lines.iter().enumerate() {
        differ
            .accepted(&Accepted {
                line: n as u64 + 2,
                payload: payload.clone(),
                sold: *sold,
                warnings: Vec::new(),
            })
            .expect("the record is diffed");
    }
    differ
}

/// Answers everything queued as applied (ids by VIN).
fn answer_all(outbox: &Outbox) {
    loop {
        let taken = outbox.take(ORG, 64).unwrap();
        if taken.is_empty() {
            return;
        }
        for e in taken {
            let id = e.vin.bytes().map(u64::from).sum();
            outbox
                .acknowledge(
                    e.seq,
                    &Answer::Applied {
                        service_id: Some(id),
                        sold: None,
                    },
                )
                .unwrap();
        }
    }
}

fn ops(plan: &Plan) -> Vec<(&str, &str)> {
    plan.ops
        .iter()
        .map(|o| (o.vin.as_str(), o.op.name()))
        .collect()
}

/// A lot of `n` cars VIN0.. created and acknowledged by a first full snapshot.
fn settled_lot(outbox: &Outbox, n: usize) -> Vec<Line> {
    let lines: Vec<Line> = (0..n).map(|i| on_lot(&format!("VIN{i}"), 1000.0)).collect();
    let plan = file(outbox, rules(Mode::Full), "day0.csv", &lines);
    assert_eq!(plan.counts.create, n as u64);
    answer_all(outbox);
    lines
}

/// New VINs are created; a known one is updated when its payload changed, marked sold or back
/// in stock when the export says so, and left alone when nothing changed.
#[test]
fn each_record_becomes_create_update_sold_in_stock_or_nothing() {
    let (outbox, _tmp) = outbox("kinds");
    settled_lot(&outbox, 4);
    let plan = file(
        &outbox,
        rules(Mode::Delta),
        "day1.csv",
        &[
            on_lot("VIN0", 1000.0),                  // unchanged
            on_lot("VIN1", 1500.0),                  // repriced
            Line(car("VIN2", 1000.0), Some(true)),   // sold by the export
            Line(car("VIN3", 1200.0), Some(true)),   // repriced and sold
            on_lot("NEWVIN", 900.0),                 // new
            Line(car("GONEVIN", 900.0), Some(true)), // new, but already sold
        ],
    );
    assert_eq!(plan.verdict, Verdict::Apply { forced: false });
    // Each vehicle's operations in their order (the plan spreads sales among the writes).
    let mut by_vehicle: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (vin, op) in ops(&plan) {
        by_vehicle.entry(vin).or_default().push(op);
    }
    assert_eq!(
        by_vehicle,
        BTreeMap::from([
            ("VIN1", vec!["update"]),
            ("VIN2", vec!["sold"]),
            ("VIN3", vec!["update", "sold"]),
            ("NEWVIN", vec!["create"]),
        ])
    );
    let c = &plan.counts;
    assert_eq!(
        (
            c.create,
            c.update,
            c.sold,
            c.in_stock,
            c.unchanged,
            c.skipped_sold
        ),
        (1, 2, 2, 0, 1, 1)
    );
    answer_all(&outbox);

    // Back on the lot: the export no longer says sold.
    let plan = file(
        &outbox,
        rules(Mode::Delta),
        "day2.csv",
        &[
            Line(car("VIN2", 1000.0), Some(false)),
            on_lot("VIN3", 1200.0),
        ],
    );
    assert_eq!(ops(&plan), [("VIN2", "in_stock"), ("VIN3", "in_stock")]);
    assert_eq!(plan.counts.in_stock, 2);
}

/// A full snapshot sells what it no longer lists (after `sold_after_absent` snapshots
/// without it); a delta file sells nothing it does not name.
#[test]
fn absence_sells_in_full_snapshots_only_and_after_sold_after_absent() {
    let (outbox, _tmp) = outbox("absence");
    let lot = settled_lot(&outbox, 5);
    let delta = file(&outbox, rules(Mode::Delta), "d1.csv", &lot[..1]);
    assert!(delta.ops.is_empty(), "{:?}", ops(&delta));
    assert_eq!(delta.counts.absent_waiting, 0);

    let twice = Rules {
        sold_after_absent: 2,
        ..rules(Mode::Full)
    };
    let first = file(&outbox, twice.clone(), "f1.csv", &lot[..4]);
    assert!(first.ops.is_empty(), "{:?}", ops(&first));
    assert_eq!(first.counts.absent_waiting, 1);
    assert_eq!(first.changes["VIN4"].absent, Some(1));
    let second = file(&outbox, twice.clone(), "f2.csv", &lot[..4]);
    assert_eq!(ops(&second), [("VIN4", "sold")]);
    // Listed again before the second absence: the count starts over.
    let lot2 = {
        let (outbox2, tmp2) = self::outbox("absence-reset");
        let lot = settled_lot(&outbox2, 2);
        file(&outbox2, twice.clone(), "f1.csv", &lot[..1]);
        file(&outbox2, twice.clone(), "f2.csv", &lot);
        let (_, rec) = outbox2.state().find_vin(ORG, "VIN1").unwrap().unwrap();
        drop(tmp2);
        rec.absent
    };
    assert_eq!(lot2, 0, "listed again: no longer counted absent");
}

/// A full snapshot that would sell more of a lot than `max_sold_fraction`, or that has no
/// vehicle for a lot with cars in stock, is held with the reason and queues nothing; forced,
/// it applies and says so.
#[test]
fn the_guard_holds_a_snapshot_that_sells_too_much_and_force_overrides_it() {
    let (outbox, _tmp) = outbox("guard");
    let lot = settled_lot(&outbox, 4);
    let quarter = Rules {
        max_sold_fraction: 0.25,
        ..rules(Mode::Full)
    };
    // One of four (25%): within the limit.
    let within = differ(&outbox, quarter.clone(), "ok.csv", &lot[..3]).finish();
    assert_eq!(within.verdict, Verdict::Apply { forced: false });
    assert_eq!(
        within.guard,
        [(
            LOT,
            GuardCount {
                in_stock: 4,
                left_out: 1,
                would_sell: 1,
                accepted: 3
            }
        )]
    );
    // Two of four (50%): held, nothing queued.
    let held = file(&outbox, quarter.clone(), "half.csv", &lot[..2]);
    let Verdict::Held { reasons } = &held.verdict else {
        panic!("held: {:?}", held.verdict);
    };
    assert_eq!(
        reasons,
        &[
            "location 10: would mark 2 of 4 in-stock vehicles sold (50%, more than \
           max_sold_fraction 25%)"
        ]
    );
    assert!(outbox.is_empty(), "a held plan queues nothing");
    // Under a grace of two files, the same file sells nothing today but would spend the
    // grace of half the lot (another feed's export in this inbox looks so): held as well.
    let graced = Rules {
        sold_after_absent: 2,
        ..quarter.clone()
    };
    let held = file(&outbox, graced, "half-graced.csv", &lot[..2]);
    let Verdict::Held { reasons } = &held.verdict else {
        panic!("held under the grace: {:?}", held.verdict);
    };
    assert_eq!(
        reasons,
        &[
            "location 10: leaves out 2 of 4 in-stock vehicles (50%, more than max_sold_fraction \
             25%): 0 would be sold now, the rest after sold_after_absent = 2 files in a row \
             without them"
        ]
    );
    assert!(outbox.is_empty(), "a held plan queues nothing");
    // An empty file for the lot: held whatever the fraction.
    let empty = differ(&outbox, rules(Mode::Full), "empty.csv", &[]).finish();
    assert!(
        matches!(&empty.verdict, Verdict::Held { reasons } if reasons[0].contains("has no vehicle for it")),
        "{:?}",
        empty.verdict
    );
    // Forced: applied, marked forced, the sales queued.
    let forced = file(
        &outbox,
        Rules {
            force: true,
            sibling_feeds: Default::default(),
            ..quarter
        },
        "half-forced.csv",
        &lot[..2],
    );
    assert_eq!(forced.verdict, Verdict::Apply { forced: true });
    assert_eq!(ops(&forced), [("VIN2", "sold"), ("VIN3", "sold")]);
    assert_eq!(outbox.len(), 2);
}

/// What is in flight will land before this file's operations: the diff compares with it. A
/// create in flight with the file's payload needs nothing more; a pending one is replaced by
/// the file's version.
#[test]
fn operations_in_flight_are_projected_and_pending_ones_replaced() {
    let (outbox, _tmp) = outbox("projection");
    file(
        &outbox,
        rules(Mode::Delta),
        "day1.csv",
        &[on_lot("VINA", 1000.0), on_lot("VINB", 1000.0)],
    );
    let in_flight = outbox.take(ORG, 1).unwrap();
    assert_eq!(in_flight[0].vin, "VINA");
    let plan = file(
        &outbox,
        rules(Mode::Delta),
        "day2.csv",
        &[on_lot("VINA", 1000.0), on_lot("VINB", 1100.0)],
    );
    assert_eq!(
        ops(&plan),
        [("VINB", "create")],
        "VINA's create in flight carries this payload already; VINB's pending create is \
         replaced by one with the new price"
    );
    assert_eq!(plan.counts.unchanged, 1);
    assert!(plan.changes["VINB"].supersede);
    let queued: Vec<Op> = outbox.entries().map(|e| e.unwrap().op).collect();
    assert_eq!(
        queued,
        [
            Op::Create(car("VINA", 1000.0)),
            Op::Create(car("VINB", 1100.0))
        ]
    );
}

/// A payload the service refused is not sent again until it changes.
#[test]
fn a_refused_payload_is_not_sent_again_until_it_changes() {
    let (outbox, _tmp) = outbox("refused");
    file(
        &outbox,
        rules(Mode::Delta),
        "day1.csv",
        &[on_lot("VINA", 1.0)],
    );
    let taken = outbox.take(ORG, 1).unwrap();
    outbox
        .acknowledge(
            taken[0].seq,
            &Answer::Rejected {
                status: 422,
                messages: vec!["price too low".into()],
            },
        )
        .unwrap();
    let same = file(
        &outbox,
        rules(Mode::Delta),
        "day2.csv",
        &[on_lot("VINA", 1.0)],
    );
    assert!(same.ops.is_empty(), "{:?}", ops(&same));
    assert_eq!(same.counts.still_rejected, 1);
    let changed = file(
        &outbox,
        rules(Mode::Delta),
        "day3.csv",
        &[on_lot("VINA", 9000.0)],
    );
    assert_eq!(ops(&changed), [("VINA", "create")]);
}

/// The same bytes as the file last applied (by digest) are not diffed again: nothing queued,
/// whatever their records say.
#[test]
fn a_file_with_the_content_last_applied_is_not_diffed_again() {
    let (outbox, _tmp) = outbox("again");
    let lot = settled_lot(&outbox, 2);
    let mut again = differ(&outbox, rules(Mode::Full), "day0.csv", &[]);
    assert!(again.already_applied());
    again
        .accepted(&Accepted {
            line: 2,
            payload: car("VIN9", 5.0),
            sold: None,
            warnings: Vec::new(),
        })
        .unwrap();
    let plan = again.commit().unwrap();
    assert!(
        matches!(&plan.verdict, Verdict::AlreadyApplied { same_as, .. } if same_as == "day0.csv"),
        "{:?}",
        plan.verdict
    );
    assert!(plan.ops.is_empty());
    assert_eq!(plan.records, 0);
    assert!(outbox.is_empty());
    drop(lot);
}

/// In a full snapshot, a record the mapper rejected keeps on the lot the vehicle it names (by
/// VIN, or by stock number), which is neither sold nor changed.
#[test]
fn a_rejected_record_keeps_its_vehicle_on_the_lot() {
    let (outbox, _tmp) = outbox("protected");
    let lot = settled_lot(&outbox, 4);
    let mut differ = differ(&outbox, rules(Mode::Full), "day1.csv", &lot[..2]);
    differ.rejected(&Rejected {
        line: 4,
        vin: Some("VIN2".into()),
        location_id: Some(LOT),
        ..Rejected::default()
    });
    differ.rejected(&Rejected {
        line: 5,
        stock: Some(" s-vin3 ".into()),
        location_id: Some(LOT),
        ..Rejected::default()
    });
    let plan = differ.commit().unwrap();
    assert!(plan.ops.is_empty(), "{:?}", ops(&plan));
    assert_eq!(plan.counts.protected, 2);
    assert_eq!(plan.counts.rejected_records, 2);
    let by: Vec<(&str, ProtectedBy, Option<u64>)> = plan
        .protected
        .iter()
        .map(|p| (p.vin.as_str(), p.by, p.line))
        .collect();
    assert_eq!(
        by,
        [
            ("VIN2", ProtectedBy::Vin, Some(4)),
            ("VIN3", ProtectedBy::Stock, Some(5))
        ]
    );
}

/// A sold car that later full snapshots leave out keeps the time it was sold at: nothing of
/// it changed, so its record is not written again, and `[state] keep_sold_days` counts from
/// its sale (rewriting it with each file kept it for ever).
#[test]
fn a_sold_car_left_out_again_keeps_the_time_of_its_sale() {
    let (outbox, _tmp) = outbox("sold-time");
    let lines = settled_lot(&outbox, 3);
    file(&outbox, rules(Mode::Full), "day1.csv", &lines[..2]);
    answer_all(&outbox);
    let key = crate::state::VehicleKey::new(ORG, LOT, "VIN2");
    let sold = outbox.state().vehicle(&key).unwrap().unwrap();
    assert!(sold.sold);
    let stored_at = |outbox: &Outbox| outbox.state().vehicle(&key).unwrap().unwrap().updated_at;
    // Times are whole seconds: the next files are planned in a later one.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    for day in 2..4 {
        file(
            &outbox,
            rules(Mode::Full),
            &format!("day{day}.csv"),
            &lines[..2],
        );
        assert_eq!(stored_at(&outbox), sold.updated_at, "day {day}");
    }
}

/// Records of one vehicle are judged together: a record that says sold sells nothing that
/// another record of the file lists on the lot, rejected or not, whatever their order; a
/// rejected record that says sold sells its VIN's vehicle.
#[test]
fn a_record_that_says_sold_is_evidence_only_when_no_other_lists_the_car() {
    let (outbox, _tmp) = outbox("said-sold");
    let lot = settled_lot(&outbox, 4);
    let mut sold_vin1 = car("VIN1", 1000.0);
    sold_vin1.stock = "OLD-DEAL".into();
    let lines = [
        Line(car("VIN0", 1000.0), None),
        Line(sold_vin1, Some(true)),
        Line(car("VIN1", 900.0), Some(false)),
        Line(car("VIN2", 1000.0), Some(true)),
    ];
    let mut differ = differ(&outbox, rules(Mode::Full), "day1.csv", &lines);
    // VIN2's sale is overruled by a rejected record that lists it; VIN3's record says sold.
    differ.rejected(&Rejected {
        line: 6,
        vin: Some("VIN2".into()),
        location_id: Some(LOT),
        ..Rejected::default()
    });
    differ.rejected(&Rejected {
        line: 7,
        vin: Some("VIN3".into()),
        location_id: Some(LOT),
        sold: Some(true),
        ..Rejected::default()
    });
    let plan = differ.commit().unwrap();
    assert_eq!(ops(&plan), [("VIN1", "update"), ("VIN3", "sold")]);
    let Op::Update(sent) = &plan.ops[0].op else {
        panic!("{:?}", plan.ops)
    };
    assert_eq!(
        sent.stock, "S-VIN1",
        "the record on the lot is the one used"
    );
    let kept: Vec<(&str, ProtectedBy)> = plan
        .protected
        .iter()
        .map(|p| (p.vin.as_str(), p.by))
        .collect();
    assert_eq!(kept, [("VIN2", ProtectedBy::Vin)]);
    assert_eq!(plan.changes["VIN3"].line, Some(7));
    drop(lot);
}

/// A file that lists most of another location's cars at its own (another lot's export in this
/// feed's inbox) is held: a lot's cars move a few at a time. A transfer of one car passes.
#[test]
fn a_file_moving_most_of_another_lots_cars_is_held() {
    let (outbox, _tmp) = outbox("moves");
    settled_lot(&outbox, 8);
    let other = Rules {
        feed: "other".into(),
        locations: [LOT + 1].into(),
        max_sold_fraction: 0.25,
        ..rules(Mode::Full)
    };
    let at_other = |n: usize| -> Vec<Line> {
        (0..n)
            .map(|i| {
                let mut p = car(&format!("VIN{i}"), 1000.0);
                p.location_id = LOT + 1;
                Line(p, None)
            })
            .collect()
    };
    // One car moved to the other lot: a transfer.
    let one = differ(&outbox, other.clone(), "other-day1.csv", &at_other(1)).finish();
    assert!(
        matches!(one.verdict, Verdict::Apply { .. }),
        "{:?}",
        one.verdict
    );
    // Every car of lot 10 listed at lot 11.
    let all = differ(&outbox, other.clone(), "wrong.csv", &at_other(8)).finish();
    match &all.verdict {
        Verdict::Held { reasons } => assert!(
            reasons
                .iter()
                .any(|r| r.contains("would move 8 of the 8 in-stock vehicles of location 10")),
            "{reasons:?}"
        ),
        v => panic!("not held: {v:?}"),
    }
    let forced = Rules {
        force: true,
        ..other
    };
    let released = differ(&outbox, forced, "wrong.csv", &at_other(8)).finish();
    assert!(
        matches!(released.verdict, Verdict::Apply { forced: true }),
        "{:?}",
        released.verdict
    );
}

/// The config moves a feed to another location id: its next file (even one with the bytes it
/// last applied) moves its cars there without a hold, and a car it leaves out, still at the old
/// location, is judged as before: sold.
#[test]
fn a_feed_moved_to_another_location_moves_its_cars_and_still_sells() {
    let (outbox, _tmp) = outbox("relocated");
    settled_lot(&outbox, 4);
    let moved = Rules {
        locations: [LOT + 5].into(),
        max_sold_fraction: 0.4,
        ..rules(Mode::Full)
    };
    let at_new = |vins: &[usize]| -> Vec<Line> {
        (vins.iter())
            .map(|i| {
                let mut p = car(&format!("VIN{i}"), 1000.0);
                p.location_id = LOT + 5;
                Line(p, None)
            })
            .collect()
    };
    // The bytes applied last ("sha-day0.csv"), read under the new config: not a re-drop.
    let mut again = differ(&outbox, moved.clone(), "day0.csv", &at_new(&[0, 1, 2]));
    assert!(!again.already_applied());
    again.judge();
    let plan = again.commit().unwrap();
    assert!(
        matches!(plan.verdict, Verdict::Apply { forced: false }),
        "{:?}",
        plan.verdict
    );
    let mut sent = ops(&plan);
    sent.sort();
    assert_eq!(
        sent,
        [
            ("VIN0", "update"),
            ("VIN1", "update"),
            ("VIN2", "update"),
            ("VIN3", "sold")
        ]
    );
    answer_all(&outbox);
    // Its next file is judged at the new location; the same bytes again are a re-drop.
    let next = file(&outbox, moved.clone(), "day1.csv", &at_new(&[0, 1]));
    assert!(next.applies(), "{:?}", next.verdict);
    assert_eq!(ops(&next), [("VIN2", "sold")]);
    let redrop = differ(&outbox, moved, "day1.csv", &at_new(&[0, 1]));
    assert!(redrop.already_applied());
}

/// A snapshot that leaves out the end of the last one's order (two cars or more, and nothing
/// just before them) looks cut short after a whole record: held, though the share is under
/// the guard's fraction. The same number of cars left out anywhere else is sales.
#[test]
fn a_snapshot_missing_the_end_of_the_last_ones_order_is_held_as_cut_short() {
    let (outbox, _tmp) = outbox("cut-tail");
    let lot = settled_lot(&outbox, 8);
    let listing = |vins: &[usize]| -> Vec<Line> {
        (vins.iter())
            .map(|&i| Line(lot[i].0.clone(), None))
            .collect()
    };
    let cut = differ(
        &outbox,
        rules(Mode::Full),
        "cut.csv",
        &listing(&[0, 1, 2, 3, 4, 5]),
    )
    .finish();
    match &cut.verdict {
        Verdict::Held { reasons } => assert!(
            reasons
                .iter()
                .any(|r| r.contains("leaves out the last 2 vehicles of day0.csv")),
            "{reasons:?}"
        ),
        v => panic!("not held: {v:?}"),
    }
    // One car left out at the end is a sale like any other (nothing tells it from a cut).
    let one = differ(
        &outbox,
        rules(Mode::Full),
        "one.csv",
        &listing(&[0, 1, 2, 3, 4, 5, 6]),
    )
    .finish();
    assert!(one.applies(), "{:?}", one.verdict);
    // Two cars sold, one of them last: sales.
    let sales = file(
        &outbox,
        rules(Mode::Full),
        "sales.csv",
        &listing(&[0, 2, 3, 4, 5, 6]),
    );
    assert!(sales.applies(), "{:?}", sales.verdict);
    assert_eq!(sales.counts.sold, 2);
}

/// A delta feed's file that lists most of the cars the full feed of its lot owns (that feed's
/// export in the delta's inbox) is held: applied, it would share them for good, and the full
/// feed could never sell them. One car listed by both (a new car become used) is applied.
#[test]
fn a_delta_file_listing_most_of_another_feeds_cars_is_held() {
    let (outbox, _tmp) = outbox("delta-takeover");
    let lot = settled_lot(&outbox, 8);
    let used = Rules {
        feed: "used".into(),
        max_sold_fraction: 0.25,
        sibling_feeds: ["main".to_owned()].into(),
        ..rules(Mode::Delta)
    };
    let listing = |vins: &[usize]| -> Vec<Line> {
        (vins.iter())
            .map(|&i| Line(lot[i].0.clone(), None))
            .collect()
    };
    let wrong = differ(
        &outbox,
        used.clone(),
        "wrong.csv",
        &listing(&[0, 1, 2, 3, 4, 5]),
    )
    .finish();
    match &wrong.verdict {
        Verdict::Held { reasons } => assert!(
            reasons
                .iter()
                .any(|r| r.contains("lists 6 of the 8 in-stock vehicles feed main owns")),
            "{reasons:?}"
        ),
        v => panic!("not held: {v:?}"),
    }
    let one = differ(&outbox, used, "one.csv", &listing(&[3])).finish();
    assert!(one.applies(), "{:?}", one.verdict);
}

/// A delta feed of another lot whose file lists most of the cars a full feed owns here (that
/// feed's export dropped in the delta's inbox, fewer than `max_sold_fraction` of this lot's)
/// is held: applied, the delta would take them for good, and nothing would ever sell them.
/// One car moved over is a transfer and applies.
#[test]
fn a_delta_file_taking_most_of_another_lots_feed_is_held() {
    let (outbox, _tmp) = outbox("delta-takes-another-lot");
    let lot = settled_lot(&outbox, 4);
    // A second feed of the lot owns 16 more: the first one's 4 are a fifth of the lot.
    let other = Rules {
        feed: "other".into(),
        sibling_feeds: ["main".to_owned()].into(),
        ..rules(Mode::Full)
    };
    let more: Vec<Line> = (0..16)
        .map(|i| on_lot(&format!("VINX{i}"), 1000.0))
        .collect();
    let plan = file(&outbox, other, "other0.csv", &more);
    assert_eq!((plan.counts.create, plan.counts.sold), (16, 0));
    answer_all(&outbox);
    const THERE: u64 = LOT + 1;
    let used_there = Rules {
        feed: "used-there".into(),
        locations: [THERE].into(),
        max_sold_fraction: 0.25,
        ..rules(Mode::Delta)
    };
    let moved_there = |i: usize| -> Line {
        let mut payload = lot[i].0.clone();
        payload.location_id = THERE;
        Line(payload, None)
    };
    let wrong = (0..4).map(moved_there).collect::<Vec<_>>();
    let plan = differ(&outbox, used_there.clone(), "wrong.csv", &wrong).finish();
    match &plan.verdict {
        Verdict::Held { reasons } => assert!(
            reasons.iter().any(|r| r.contains(&format!(
                "location {LOT}: lists 4 of the 4 in-stock vehicles feed main owns"
            ))),
            "{reasons:?}"
        ),
        v => panic!("not held: {v:?}"),
    }
    let one = differ(&outbox, used_there, "one.csv", &[moved_there(0)]).finish();
    assert!(one.applies(), "{:?}", one.verdict);
}
