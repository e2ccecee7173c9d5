//! A property over the real diff and outbox, as the daemon uses them (exports
//! written to real files, `diff_file` committing to a real SQLite state on disk, every queued
//! operation answered as the service would): for random exports of three lots of one
//! organization, with cars moving between the lots (the old lot sometimes still listing a
//! car the day the new one first does), random rejected records (VIN typos, a VIN or stock
//! number missing, a VIN that is no VIN), the lots' files in random orders and now and then a
//! lot's older export arriving after its newer one (it is superseded: nothing of it applied),
//! and a lot's export with the bytes of an older applied one (held: nothing of it applied),
//! no vehicle that the latest applied snapshot of some lot lists, validly or by a rejected
//! record that stands for it, is ever sold.

use crate::common;

use common::{answer_all, feedgen, TempDir};
use lotsync::diff::{diff_file, DiffOptions, Mode, Op, Rules, Verdict};
use lotsync::mapper::{check_vin, Profile, VinCheck};
use lotsync::outbox::Outbox;
use lotsync::state::State;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const ORG: u64 = 100;
const LOTS: [u64; 3] = [10, 11, 12];
/// Cars that move, vanish and come back; three more (one per lot) never move and are always
/// listed validly, so that no lot's file is ever empty (the guard would hold it).
const MOVERS: usize = 6;

fn vin(car: usize) -> String {
    feedgen::vin(car as u64)
}

fn stock(car: usize) -> String {
    format!("S{car:05}")
}

/// How a car's record is damaged in one export.
#[derive(Debug, Clone)]
enum Damage {
    /// One character of the VIN replaced (`char` indexes the VIN alphabet).
    Typo { at: usize, char: usize },
    /// Two neighbouring characters of the VIN swapped.
    Swap { at: usize },
    /// The VIN left out; the stock number is there.
    NoVin,
    /// A VIN that is no VIN at all; the stock number is there.
    NotAVin,
    /// The stock number left out; the VIN is right.
    NoStock,
}

/// One day: where each mover is (None: gone), whether its old lot still lists it the day it
/// moved, how its records are damaged, and the order the lots' files come in.
#[derive(Debug, Clone)]
struct Day {
    places: Vec<Option<usize>>,
    lagging: Vec<bool>,
    damage: Vec<Option<Damage>>,
    order: Vec<usize>,
    /// A lot whose previous export arrives again after today's, written an hour ago.
    late: Option<usize>,
}

fn damage() -> impl Strategy<Value = Option<Damage>> {
    prop::option::weighted(
        0.35,
        prop_oneof![
            (0..17usize, 0..33usize).prop_map(|(at, char)| Damage::Typo { at, char }),
            (0..16usize).prop_map(|at| Damage::Swap { at }),
            Just(Damage::NoVin),
            Just(Damage::NotAVin),
            Just(Damage::NoStock),
        ],
    )
}

fn day() -> impl Strategy<Value = Day> {
    (
        prop::collection::vec(prop::option::weighted(0.85, 0..LOTS.len()), MOVERS),
        prop::collection::vec(prop::bool::weighted(0.5), MOVERS),
        prop::collection::vec(damage(), MOVERS),
        Just((0..LOTS.len()).collect::<Vec<_>>()).prop_shuffle(),
        prop::option::weighted(0.3, 0..LOTS.len()),
    )
        .prop_map(|(places, lagging, damage, order, late)| Day {
            places,
            lagging,
            damage,
            order,
            late,
        })
}

/// A VIN with a typo that the check refuses (a typo that makes another valid VIN would be
/// another car: the check digit is changed instead).
fn typo(vin: &str, damage: &Damage) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHJKLMNPRSTUVWXYZ";
    let mut bytes = vin.as_bytes().to_vec();
    match damage {
        Damage::Typo { at, char } => bytes[*at] = ALPHABET[*char],
        Damage::Swap { at } => bytes.swap(*at, at + 1),
        _ => {}
    }
    let typed = String::from_utf8(bytes).expect("ASCII");
    if typed != vin && check_vin(&typed, VinCheck::Strict).is_err() {
        return typed;
    }
    let mut bytes = vin.as_bytes().to_vec();
    bytes[8] = if bytes[8] == b'7' { b'3' } else { b'7' };
    String::from_utf8(bytes).expect("ASCII")
}

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

/// Runs the days and returns the first sale of a listed car, described; None when there is
/// none.
fn first_wrong_sale(days: &[Day]) -> Option<String> {
    let dir = TempDir::new("protect-property");
    let outbox = Outbox::new(State::open(&dir.path().join("state")).expect("state opens"));
    let profile = Profile::auto();
    // Per lot: the VINs its latest applied snapshot lists, validly or by a rejected record
    // that stands for a known car.
    let mut listed: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    let mut was: Vec<Option<usize>> = vec![None; MOVERS];
    // Per lot: its exports, in the order they were written.
    let mut exports: BTreeMap<u64, Vec<std::path::PathBuf>> = BTreeMap::new();
    for (d, day) in days.iter().enumerate() {
        for &lot_index in &day.order {
            let lot = LOTS[lot_index];
            // The cars of this lot's export: its anchor, the movers there, and those that
            // left it today but are still listed by it.
            let mut cars = vec![(MOVERS + lot_index, None)];
            for (m, (&place, &before)) in day.places.iter().zip(&was).enumerate() {
                let here = place == Some(lot_index);
                let lagging = day.lagging[m] && before == Some(lot_index) && place != before;
                if here || lagging {
                    cars.push((m, day.damage[m].clone()));
                }
            }
            // What the state knows before this file: which cars, and where.
            let state = outbox.state();
            let known_at = |car: usize| {
                state
                    .find_vin(ORG, &vin(car))
                    .expect("state reads")
                    .map(|(key, _)| key.location_id)
            };
            let mut text = String::from("VIN,Stock,Year,Make,Model,Price\n");
            let mut listing = BTreeSet::new();
            for (car, damage) in &cars {
                let (v, s) = (vin(*car), stock(*car));
                let (row_vin, row_stock, stands) = match damage {
                    None => (v.clone(), s.clone(), true),
                    Some(d @ (Damage::Typo { .. } | Damage::Swap { .. })) => {
                        (typo(&v, d), s.clone(), known_at(*car).is_some())
                    }
                    Some(Damage::NoVin) => (String::new(), s.clone(), known_at(*car) == Some(lot)),
                    Some(Damage::NotAVin) => {
                        ("NOT-A-VIN".into(), s.clone(), known_at(*car) == Some(lot))
                    }
                    Some(Damage::NoStock) => (v.clone(), String::new(), true),
                };
                if stands {
                    listing.insert(v);
                }
                text.push_str(&format!("{row_vin},{row_stock},2020,Honda,Accord,20000\n"));
            }
            let path = dir.path().join(format!("lot{lot}-day{d}.csv"));
            std::fs::write(&path, &text).expect("export written");
            exports.entry(lot).or_default().push(path.clone());
            let planned = diff_file(
                &outbox,
                rules(lot),
                &profile,
                lot,
                &path,
                DiffOptions::committed(),
            )
            .expect("the file is diffed and committed");
            answer_all(&outbox);
            let plan = &planned.plan;
            match plan.verdict {
                Verdict::Apply { .. } => {
                    listed.insert(lot, listing);
                }
                Verdict::AlreadyApplied { .. } => {}
                // The bytes of an older applied export of the lot (the lot back at that day's
                // state): held for a person to release, nothing of it applied, whatever else
                // the hold says (it may also end where the last one's order was cut short).
                Verdict::Held { ref reasons }
                    if reasons.iter().any(|r| r.starts_with("the same content as")) =>
                {
                    continue
                }
                // A true export that ends where the last one's order was cut short: released,
                // as its operator would.
                Verdict::Held { ref reasons }
                    if reasons.iter().all(|r| r.contains("an export cut short")) =>
                {
                    let mut released = rules(lot);
                    released.force = true;
                    let planned = diff_file(
                        &outbox,
                        released,
                        &profile,
                        lot,
                        &path,
                        DiffOptions::committed(),
                    )
                    .expect("the released file is diffed and committed");
                    answer_all(&outbox);
                    if !planned.plan.applies() {
                        return Some(format!("day {d}, lot {lot}: not applied when released"));
                    }
                    listed.insert(lot, listing);
                    let sold = planned.plan.ops.iter().filter(|o| o.op == Op::MarkSold);
                    for op in sold {
                        if let Some((by, _)) = listed.iter().find(|(_, l)| l.contains(&op.vin)) {
                            return Some(format!(
                                "day {d}, lot {lot}'s released file sold {}, which lot {by}'s \
                                 latest snapshot lists",
                                op.vin
                            ));
                        }
                    }
                    continue;
                }
                Verdict::Held { ref reasons } => {
                    return Some(format!("day {d}, lot {lot}: held: {reasons:?}"))
                }
                Verdict::Superseded { .. } => {
                    return Some(format!("day {d}, lot {lot}: today's export superseded"))
                }
            }
            for op in plan.ops.iter().filter(|o| o.op == Op::MarkSold) {
                if let Some((by, _)) = listed.iter().find(|(_, l)| l.contains(&op.vin)) {
                    return Some(format!(
                        "day {d}, lot {lot}'s file sold {} (at location {}), which lot {by}'s \
                         latest snapshot lists; the file:\n{text}",
                        op.vin, op.location_id
                    ));
                }
            }
        }
        // A lot's previous export again, written an hour ago, after today's was applied.
        let late = day.late.map(|i| LOTS[i]);
        let previous = late.and_then(|lot| {
            let files = exports.get(&lot)?;
            Some((lot, files.get(files.len().checked_sub(2)?)?.clone()))
        });
        if let Some((lot, previous)) = previous {
            let path = dir.path().join(format!("lot{lot}-day{d}-late.csv"));
            std::fs::copy(&previous, &path).expect("late export written");
            let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_modified(an_hour_ago))
                .expect("late export dated");
            let planned = diff_file(
                &outbox,
                rules(lot),
                &profile,
                lot,
                &path,
                DiffOptions::committed(),
            )
            .expect("the late file is diffed");
            answer_all(&outbox);
            // The same bytes as today's are "already applied": nothing sent either way.
            let refused = matches!(
                planned.plan.verdict,
                Verdict::Superseded { .. } | Verdict::AlreadyApplied { .. }
            );
            if !refused || !planned.plan.ops.is_empty() {
                return Some(format!(
                    "day {d}, lot {lot}'s older export, arriving after its newer one, was not \
                     superseded: {:?}, {} operations",
                    planned.plan.verdict,
                    planned.plan.ops.len()
                ));
            }
        }
        was.clone_from(&day.places);
    }
    None
}

proptest! {
    // Each case writes and commits up to 15 files to a fresh SQLite state: a few seconds in
    // debug for all of them.
    #![proptest_config(ProptestConfig {
        cases: 48,
        max_shrink_iters: 300,
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_car_a_lot_lists_is_ever_sold(days in prop::collection::vec(day(), 2..=5)) {
        if let Some(wrong) = first_wrong_sale(&days) {
            prop_assert!(false, "{}", wrong);
        }
    }
}
