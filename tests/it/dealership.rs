//! A dealership simulator, in the spirit of FoundationDB's simulation tests: from a seed, one
//! organization with 1-3 lots, each exported every day by its own full feed (CSV or XML, a
//! feed now and then renamed or moved to another location id in the config) or by two (new
//! cars from one, used from the other, each selling only its own; the used one now and then a
//! delta feed, which lists what changed and the cars sold), a true inventory that changes every day
//! (arrivals, sales, price and mileage changes, transfers between lots, trade-ins of cars sold
//! before, stock numbers reused, a lot back at an earlier day's exact state), and a DMS whose
//! exports now and then have the faults real exports have (see [`Fault`]). Each export is a
//! real file diffed by the library's real `diff_file` into a real SQLite state on disk, and every queued operation is answered as the service would
//! (`answer_all`); the answers build the simulated service's view, checked after every file
//! and every day against the truth:
//!
//! 1. No sale of a car that is on a true lot. Checked on every `sold` operation answered. The
//!    one exception is the documented one (promises.md, "A car moved to another lot"): a car
//!    that arrived at its lot (transfer, trade-in, a lot back at an earlier state), sold by
//!    another lot's export before any applied export of its own lot listed it (the same day,
//!    or later when its lot's exports since were held or cut), or a car sold yesterday and
//!    back today, sold by yesterday's export written again (a stale export, true as of its
//!    day); it is counted as `indistinguishable`, and invariant 2b then requires it back in
//!    stock after the next clean day.
//! 2. A car truly sold is shown sold once `sold_after_absent + 1` clean days came in a row on
//!    which the lot the service has it at applied an export (verdict Apply). A clean day: every
//!    lot's export of the day had no fault and came out Apply or "already applied"; any other
//!    day starts the count again (a fault, a held or superseded file, a stale export). Not
//!    a car its lot's delta feed owned that left for another lot and was sold there before any
//!    export of that lot was applied: a delta tells sales, not departures (documented).
//!
//!    2b. After a clean day, every car of every lot is on the service, in stock, at its lot,
//!    with its true stock number, price and mileage.
//! 3. No vehicle is created twice: a create answered for a VIN the service has (in stock or
//!    sold) is a violation, and so is a sale or return of a VIN it does not have.
//! 4. Every price, mileage and stock number a create or update sends was the car's, truly, at
//!    some point (stock numbers: or the one a stock-number typo of the DMS gave it).
//! 5. No operation touches a car of a lot another product feeds: one the service held when
//!    lotsync was installed beside it (a feed's first file at a location then reads the
//!    service's list, as the daemon does where the state knows no vehicle), or one of a lot
//!    another product adds later.
//!
//! `dealership::` runs a few seeds and the regression seeds in seconds; `LOTSYNC_SIM_SEEDS`
//! (a count, or a first-last range) and `LOTSYNC_SIM_DAYS` drive the ignored long run.

use crate::common::{answer_all, feedgen, TempDir};
use lotsync::api::{Price, VehiclePayload};
use lotsync::diff::{diff_file, DiffOptions, Mode, Op, Rules, Verdict};
use lotsync::mapper::{check_vin, Profile, VinCheck};
use lotsync::outbox::Outbox;
use lotsync::state::State;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const ORG: u64 = 100;
const DAY: u64 = 24 * 3600;

/// splitmix64: small, seedable, the same on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// What an export can do wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    /// Cut after a whole record (the file looks complete).
    TruncatedAtRow,
    /// Cut inside a record (no line break at its end).
    TruncatedMidRow,
    /// Yesterday's bytes again, though the lot changed.
    Stale,
    /// A record written twice.
    Duplicate,
    /// An old deal of a car on the lot: another record of its VIN saying Sold, with an old
    /// stock number and a price it never had, before or after its in-stock record.
    ConflictingDuplicate,
    /// A VIN with one character wrong (its check digit fails).
    VinTypo,
    /// A stock number with one character wrong.
    StockTypo,
    /// The price or the mileage column left out.
    MissingColumn,
    /// Other header names and another column order, for one day.
    HeaderChange,
    /// A byte-order mark and CRLF line ends (or neither, when the feed has them), one day.
    BomCrlf,
    /// An older applied export of the lot delivered again after today's, written now.
    OldExport,
    /// Another feed's export of today (another lot's, or the other half of this lot's) dropped
    /// in this feed's inbox as well.
    WrongInbox,
    /// The DMS's clock two days ahead: the export's modification time is the day after
    /// tomorrow's (still before the moment lotsync reads it, so not clamped), and the next two
    /// days' exports look older than it.
    ClockAhead,
    /// The DMS's clock two days behind: the export looks older than the one applied yesterday.
    ClockBehind,
}

impl Fault {
    /// The faults the current code is meant to handle.
    const HANDLED: &'static [Fault] = &[
        Fault::TruncatedAtRow,
        Fault::TruncatedMidRow,
        Fault::Stale,
        Fault::Duplicate,
        Fault::ConflictingDuplicate,
        Fault::VinTypo,
        Fault::StockTypo,
        Fault::MissingColumn,
        Fault::HeaderChange,
        Fault::BomCrlf,
        Fault::OldExport,
        Fault::WrongInbox,
        Fault::ClockAhead,
        Fault::ClockBehind,
    ];
}

/// How one simulation runs.
#[derive(Debug, Clone)]
struct Knobs {
    days: u32,
    faults: Vec<Fault>,
    /// The chance that a feed's export of a day has a fault.
    fault_rate: f64,
    /// None: 1 or 2, from the seed.
    sold_after_absent: Option<u32>,
    max_sold_fraction: f64,
    /// Breaks the rules the diff is given (not those the checker expects): the checker's
    /// own test that a broken rule is found.
    break_rules: Option<fn(&mut Rules)>,
    /// `TruncatedAtRow` only where the grace covers it: never in worlds with
    /// `sold_after_absent = 1`, and never on two days in a row of one feed. A full export cut
    /// after a whole record looks like the sale of the cars after the cut, and as many such
    /// cuts in a row as `sold_after_absent` sell them, as promises.md says ("if the export was
    /// cut short, the vehicles after the cut are sold"): found by seed 2 (day 55, two cars,
    /// with 1), seed 35 (day 260 of the long run, three cars after two cuts in a row of lot
    /// 12, with 2) and seed 22 (day 111, one car, two cuts in a row of a lot's second feed).
    cuts_within_grace: bool,
    /// The state is lost (a fresh one, never planned against the service's list) on this day:
    /// a deliberately broken setup that creates every vehicle again.
    lose_state_on: Option<u32>,
    /// The chance, each day, that the config renames one lot's feed (a look-alike of a feed
    /// gone: the renamed feed judges the cars the old name owned).
    rename_rate: f64,
    /// The chance that a lot is exported by two full feeds, each listing half of its cars
    /// (new and used): each sells only its own.
    split_rate: f64,
    /// The chance that lotsync is installed beside a service that holds the lots' cars already
    /// (a former integration: stale prices, old sales) and another product's lot: the first
    /// file reads the service's list, as the daemon does for a state that knows nothing.
    preexisting_rate: f64,
    /// The chance, each day, that another product adds a lot of its own to the organization
    /// (cars lotsync never hears of, bought and sold every day).
    other_product_rate: f64,
    /// The chance that the used-car feed of a lot with two is a delta feed: its export lists
    /// only the cars that changed since its last one, and those sold (status "Sold").
    delta_rate: f64,
    /// The chance, each day, that the config moves one lot's feeds to another location id (a
    /// look-alike of a lot whose cars all moved: the first export there is held as moving
    /// them, and released; the cars sold meanwhile are still sold).
    relocate_rate: f64,
}

impl Knobs {
    fn standard(days: u32) -> Knobs {
        Knobs {
            days,
            faults: Fault::HANDLED.to_vec(),
            fault_rate: 0.2,
            sold_after_absent: None,
            max_sold_fraction: 0.25,
            break_rules: None,
            cuts_within_grace: true,
            lose_state_on: None,
            rename_rate: 0.01,
            split_rate: 0.3,
            relocate_rate: 0.01,
            delta_rate: 0.5,
            preexisting_rate: 0.3,
            other_product_rate: 0.005,
        }
    }
}

/// What a delta feed's DMS believes it delivered.
#[derive(Debug, Default)]
struct Delta {
    base: BTreeMap<String, Car>,
    /// The cars its exports since the last clean one listed (a sale among them is told too).
    told: BTreeSet<String>,
    resend: bool,
}

/// A car as the truth has it.
#[derive(Debug, Clone, PartialEq)]
struct Car {
    stock: String,
    price: u64,
    miles: u64,
    year: u16,
    model: usize,
}

const MODELS: [&str; 4] = ["Accord", "Civic", "CR-V", "Pilot"];

/// Everything the truth ever said of a VIN, and what the DMS wrote wrongly of it.
#[derive(Debug, Default)]
struct Seen {
    stocks: BTreeSet<String>,
    prices: BTreeSet<u64>,
    miles: BTreeSet<u64>,
    typo_stocks: BTreeSet<String>,
}

/// One vehicle as the simulated service shows it.
#[derive(Debug, Clone)]
struct Shown {
    sold: bool,
    location: u64,
    payload: VehiclePayload,
}

/// A violation of an invariant, with what is needed to reproduce it.
#[derive(Debug, Clone)]
struct Violation {
    invariant: &'static str,
    seed: u64,
    day: u32,
    vin: String,
    what: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invariant {} (seed {}, day {}, VIN {}): {}",
            self.invariant, self.seed, self.day, self.vin, self.what
        )
    }
}

/// What one simulation saw.
#[derive(Debug, Default)]
struct Outcome {
    violations: Vec<Violation>,
    files: u64,
    verdicts: BTreeMap<&'static str, u64>,
    faults: BTreeMap<String, u64>,
    /// Sales of a car moved today, by its old lot's export before its new lot's (documented).
    indistinguishable: u64,
    sold: u64,
    created: u64,
    clean_days: u64,
}

/// A feed's export style: header names, column order, BOM and line ends.
#[derive(Debug, Clone, PartialEq)]
struct Style {
    names: usize,
    order: Vec<usize>,
    bom: bool,
    crlf: bool,
    /// An XML export (`<Inventory><Vehicle>…`) instead of a CSV one.
    xml: bool,
}

const HEADERS: [[&str; 8]; 3] = [
    [
        "VIN", "Stock", "Year", "Make", "Model", "Miles", "Price", "Status",
    ],
    [
        "VIN Number",
        "Stock #",
        "Yr",
        "Make",
        "Model",
        "Odometer",
        "Selling Price",
        "Status",
    ],
    [
        "VIN", "StockNo", "Year", "Make", "Model", "Mileage", "Price", "Status",
    ],
];
/// The XML feeds' element names (a header change there only reorders them).
const ELEMENTS: [&str; 8] = [
    "VIN",
    "StockNumber",
    "Year",
    "Make",
    "Model",
    "Odometer",
    "Price",
    "Status",
];
const PRICE: usize = 6;
const MILES: usize = 5;

type Row = [String; 8];

struct Sim {
    seed: u64,
    knobs: Knobs,
    rng: Rng,
    lots: Vec<u64>,
    sold_after_absent: u32,
    truth: Vec<BTreeMap<String, Car>>,
    /// Cars truly sold, with their last values (trade-ins come from here).
    gone: BTreeMap<String, Car>,
    /// Per lot, its true inventory at the end of each of the last days.
    past: Vec<Vec<BTreeMap<String, Car>>>,
    seen: BTreeMap<String, Seen>,
    next_car: u64,
    next_stock: Vec<u64>,
    freed_stocks: Vec<Vec<String>>,
    styles: Vec<Style>,
    /// Per feed: the lot it exports (an index of `lots`) and, for a lot with two feeds, the
    /// half of its cars it lists ([`half`]).
    feed_lots: Vec<(usize, Option<bool>)>,
    /// Per feed: its name in the config today (renamed now and then).
    feed_names: Vec<String>,
    /// Per delta feed: its half of the lot as its last clean export left it (the DMS lists
    /// what changed since), and whether its next export lists every car again (the last one
    /// had a fault: a DMS that sends everything again after a failed transfer).
    deltas: BTreeMap<usize, Delta>,
    /// The feeds whose last export was cut after a whole record.
    cut_yesterday: BTreeSet<usize>,
    /// Draws the renames, apart from `rng` so that a seed's world stays as it was.
    renames: Rng,
    /// Draws the moves of a lot's feeds to another location id, apart from `rng` too.
    relocations: Rng,
    /// The location ids the config used before for a lot: the lot's index, by old id.
    former_ids: BTreeMap<u64, usize>,
    /// Draws what other products do, apart from `rng` too.
    others: Rng,
    /// The cars of lots another product feeds, by VIN: lotsync must never touch them.
    foreign: BTreeMap<String, u64>,
    next_foreign: u64,
    /// Installed beside a service that holds cars already ([`Knobs::preexisting_rate`]).
    beside: bool,
    /// Per feed: its exports, the day, and whether they were applied.
    exports: Vec<Vec<(u32, PathBuf, bool)>>,
    /// Per feed: yesterday's main export.
    yesterday: Vec<Option<Vec<u8>>>,
    view: BTreeMap<String, Shown>,
    /// Truly sold cars the service still shows in stock: clean applied days since.
    overdue: BTreeMap<String, u32>,
    /// Cars that arrived at their lot (new, moved, traded in, back) and that no applied export
    /// of that lot has listed since.
    unlisted: BTreeSet<String>,
    /// Cars sold at a lot before any applied export of it listed them.
    untold: BTreeSet<String>,
    out: Outcome,
    base: SystemTime,
}

impl Sim {
    fn new(seed: u64, knobs: Knobs) -> Sim {
        let mut rng = Rng(seed ^ 0x005E_ED0F_D1A1);
        let lot_count = 1 + rng.below(3);
        let lots: Vec<u64> = (0..lot_count as u64).map(|i| 10 + i).collect();
        let sold_after_absent = knobs
            .sold_after_absent
            .unwrap_or_else(|| 1 + rng.below(2) as u32);
        let style = |rng: &mut Rng| Style {
            names: rng.below(HEADERS.len()),
            order: (0..8).collect(),
            bom: rng.chance(0.2),
            xml: rng.chance(0.25),
            crlf: rng.chance(0.3),
        };
        let lot_styles: Vec<Style> = (0..lot_count).map(|_| style(&mut rng)).collect();
        // Now and then a lot exported by two feeds (new cars from one, used from the other),
        // drawn apart from `rng` so that a seed's world stays as it was.
        let mut splits = Rng(seed ^ 0x0002_FEED_5117);
        let mut feed_lots: Vec<(usize, Option<bool>)> = Vec::new();
        let mut feed_names = Vec::new();
        for lot in 0..lot_count {
            let lot_id = 10 + lot as u64;
            if knobs.split_rate > 0.0 && splits.chance(knobs.split_rate) {
                feed_lots.push((lot, Some(true)));
                feed_names.push(format!("lot{lot_id}"));
                feed_lots.push((lot, Some(false)));
                feed_names.push(format!("lot{lot_id}-used"));
            } else {
                feed_lots.push((lot, None));
                feed_names.push(format!("lot{lot_id}"));
            }
        }
        // The used-car feed of a split lot is now and then a delta feed, drawn apart too.
        let mut delta_draws = Rng(seed ^ 0x00DE_17A5_F00D);
        let deltas: BTreeMap<usize, Delta> = (feed_lots.iter().enumerate())
            .filter(|(_, &(_, half))| half == Some(false))
            .filter(|_| knobs.delta_rate > 0.0 && delta_draws.chance(knobs.delta_rate))
            .map(|(feed, _)| (feed, Delta::default()))
            .collect();
        let styles: Vec<Style> = (feed_lots.iter())
            .map(|&(lot, half)| match half {
                Some(false) => style(&mut splits),
                _ => lot_styles[lot].clone(),
            })
            .collect();
        let feeds = feed_lots.len();
        let days = u64::from(knobs.days) + 30;
        let mut knobs = knobs;
        if sold_after_absent == 1 && knobs.cuts_within_grace {
            knobs.faults.retain(|f| *f != Fault::TruncatedAtRow);
        }
        let mut sim = Sim {
            seed,
            rng,
            lots,
            sold_after_absent,
            truth: vec![BTreeMap::new(); lot_count],
            gone: BTreeMap::new(),
            past: vec![Vec::new(); lot_count],
            seen: BTreeMap::new(),
            next_car: seed.wrapping_mul(1_000_003) % 1_000_000_000,
            next_stock: vec![1; lot_count],
            freed_stocks: vec![Vec::new(); lot_count],
            styles,
            feed_lots,
            feed_names,
            deltas,
            cut_yesterday: BTreeSet::new(),
            renames: Rng(seed ^ 0x00FE_ED4E_A3E5),
            relocations: Rng(seed ^ 0x0010_CA7E_D1D5),
            former_ids: BTreeMap::new(),
            others: Rng(seed ^ 0x0007_4E55_0DD5),
            foreign: BTreeMap::new(),
            next_foreign: 0,
            beside: false,
            exports: vec![Vec::new(); feeds],
            yesterday: vec![None; feeds],
            view: BTreeMap::new(),
            overdue: BTreeMap::new(),
            unlisted: BTreeSet::new(),
            untold: BTreeSet::new(),
            out: Outcome::default(),
            knobs,
            base: SystemTime::now() - Duration::from_secs(days * DAY),
        };
        for lot in 0..lot_count {
            let start = 8 + sim.rng.below(16);
            for _ in 0..start {
                sim.arrive(lot);
            }
        }
        if sim.knobs.preexisting_rate > 0.0 && sim.others.chance(sim.knobs.preexisting_rate) {
            sim.preexisting();
        }
        sim
    }

    /// The service as a former integration and another product left it: most of each lot's
    /// cars (a price now and then stale), a few sold long ago, and another product's lot.
    fn preexisting(&mut self) {
        *self.out.verdicts.entry("installed beside").or_default() += 1;
        self.beside = true;
        for lot in 0..self.lots.len() {
            let cars: Vec<(String, Car)> = self.truth[lot].clone().into_iter().collect();
            for (vin, car) in cars {
                if self.others.chance(0.2) {
                    continue; // arrived since the former integration stopped
                }
                let mut shown = car.clone();
                if self.others.chance(0.3) {
                    shown.price += 1000;
                }
                let location = self.lots[lot];
                let payload = payload(location, &vin, &shown);
                let sold = false;
                self.view.insert(
                    vin,
                    Shown {
                        sold,
                        location,
                        payload,
                    },
                );
            }
            for _ in 0..self.others.below(4) {
                self.next_foreign += 1;
                let vin = feedgen::vin(800_000_000 + self.next_foreign);
                let car = Car {
                    stock: format!("OLD{}", self.next_foreign),
                    price: 9900,
                    miles: 1,
                    year: 2001,
                    model: 0,
                };
                let location = self.lots[lot];
                let payload = payload(location, &vin, &car);
                self.view.insert(
                    vin,
                    Shown {
                        sold: true,
                        location,
                        payload,
                    },
                );
            }
        }
        self.other_lot(90);
    }

    /// Another product's lot: cars lotsync never hears of.
    fn other_lot(&mut self, location: u64) {
        for _ in 0..5 + self.others.below(10) {
            self.other_arrival(location);
        }
    }

    fn other_arrival(&mut self, location: u64) {
        self.next_foreign += 1;
        let vin = feedgen::vin(900_000_000 + self.next_foreign);
        let car = Car {
            stock: format!("P{}", self.next_foreign),
            price: 10_000 + 100 * self.others.range(0, 300),
            miles: self.others.range(0, 90_000),
            year: 2015,
            model: 1,
        };
        let payload = payload(location, &vin, &car);
        self.view.insert(
            vin.clone(),
            Shown {
                sold: false,
                location,
                payload,
            },
        );
        self.foreign.insert(vin, location);
    }

    /// What other products do in a day: sales and arrivals at their lots, now and then a new lot.
    fn others_live(&mut self, day: u32) {
        let vins: Vec<String> = self.foreign.keys().cloned().collect();
        for vin in vins {
            if self.others.chance(0.05) {
                if let Some(shown) = self.view.get_mut(&vin) {
                    shown.sold = true;
                }
            }
        }
        let lots: BTreeSet<u64> = self.foreign.values().copied().collect();
        for location in lots {
            for _ in 0..self.others.below(2) {
                self.other_arrival(location);
            }
        }
        if self.others.chance(self.knobs.other_product_rate) {
            *self
                .out
                .verdicts
                .entry("another product's lot")
                .or_default() += 1;
            self.other_lot(1000 + u64::from(day));
        }
    }

    /// The service's list, as the daemon reads it before the first file of a state that knows
    /// no vehicle of the organization.
    fn listed(&self) -> lotsync::diff::Listed {
        let vehicles = (self.view.iter())
            .map(|(vin, shown)| {
                let vehicle = serde_json::json!({
                    "id": crate::common::service_id(vin),
                    "vin": vin,
                    "stock": shown.payload.stock,
                    "price": shown.payload.price,
                    "odometer": { "value": shown.payload.miles, "unit": "mi" },
                    "status": if shown.sold { "sold" } else { "in-stock" },
                });
                let vehicle = serde_json::from_value(vehicle).expect("a vehicle of the list");
                (vin.clone(), vehicle)
            })
            .collect();
        lotsync::diff::Listed { vehicles }
    }

    fn rules(&self, feed: usize) -> Rules {
        let lot = self.feed_lots[feed].0;
        let siblings = (0..self.feed_lots.len())
            .filter(|&f| f != feed && self.feed_lots[f].0 == lot)
            .map(|f| self.feed_names[f].clone());
        Rules {
            organization_id: ORG,
            feed: self.feed_names[feed].clone(),
            mode: match self.deltas.contains_key(&feed) {
                true => Mode::Delta,
                false => Mode::Full,
            },
            sold_after_absent: self.sold_after_absent,
            max_sold_fraction: self.knobs.max_sold_fraction,
            locations: BTreeSet::from([self.lots[lot]]),
            force: false,
            sibling_feeds: siblings.collect(),
        }
    }

    /// The location a feed exports.
    fn location(&self, feed: usize) -> u64 {
        self.lots[self.feed_lots[feed].0]
    }

    /// The feed that lists a car of a lot (a lot with two feeds: by its half).
    fn feed_of(&self, lot: usize, vin: &str) -> usize {
        (0..self.feed_lots.len())
            .find(|&f| {
                let (l, h) = self.feed_lots[f];
                l == lot && h.is_none_or(|h| h == half(vin))
            })
            .expect("every lot has a feed for each of its cars")
    }

    fn remember(&mut self, vin: &str, car: &Car) {
        let seen = self.seen.entry(vin.to_owned()).or_default();
        seen.stocks.insert(car.stock.clone());
        seen.prices.insert(car.price);
        seen.miles.insert(car.miles);
    }

    fn stock_number(&mut self, lot: usize) -> String {
        // A sold car's stock number is given to a new one now and then.
        if !self.freed_stocks[lot].is_empty() && self.rng.chance(0.3) {
            let i = self.rng.below(self.freed_stocks[lot].len());
            return self.freed_stocks[lot].swap_remove(i);
        }
        self.next_stock[lot] += 1;
        format!("{}{:05}", (b'A' + lot as u8) as char, self.next_stock[lot])
    }

    fn arrive(&mut self, lot: usize) {
        self.next_car += 1;
        let vin = feedgen::vin(self.next_car);
        let car = Car {
            stock: self.stock_number(lot),
            price: self.rng.range(80, 600) * 100,
            miles: self.rng.range(0, 150_000),
            year: 2010 + self.rng.below(15) as u16,
            model: self.rng.below(MODELS.len()),
        };
        self.remember(&vin, &car);
        self.unlisted.insert(vin.clone());
        self.truth[lot].insert(vin, car);
    }

    fn sell(&mut self, lot: usize, vin: &str) {
        // Sold at a lot whose exports never listed it: if it came from a delta feed's lot
        // (which tells sales, not cars that left for another lot), no file ever tells it left.
        match self.unlisted.remove(vin) {
            true => self.untold.insert(vin.to_owned()),
            false => self.untold.remove(vin),
        };
        if let Some(car) = self.truth[lot].remove(vin) {
            self.freed_stocks[lot].push(car.stock.clone());
            self.gone.insert(vin.to_owned(), car);
        }
    }

    fn lot_of(&self, vin: &str) -> Option<usize> {
        self.truth.iter().position(|t| t.contains_key(vin))
    }

    /// One day of the world: what happens on the lots.
    fn live(&mut self) {
        let lots = self.lots.len();
        for lot in 0..lots {
            let vins: Vec<String> = self.truth[lot].keys().cloned().collect();
            for vin in vins {
                let r = self.rng.next() % 1000;
                if r < 50 {
                    self.sell(lot, &vin);
                } else if r < 100 {
                    let car = self.truth[lot].get_mut(&vin).expect("on the lot");
                    car.price = (car.price / 100)
                        .saturating_sub(self.rng.range(1, 20))
                        .max(50)
                        * 100;
                    let car = car.clone();
                    self.remember(&vin, &car);
                } else if r < 130 {
                    let car = self.truth[lot].get_mut(&vin).expect("on the lot");
                    car.miles += self.rng.range(1, 300);
                    let car = car.clone();
                    self.remember(&vin, &car);
                } else if r < 140 && lots > 1 {
                    // Moved to another lot, under a stock number of there.
                    let to = (lot + 1 + self.rng.below(lots - 1)) % lots;
                    let mut car = self.truth[lot].remove(&vin).expect("on the lot");
                    self.freed_stocks[lot].push(car.stock.clone());
                    if self.rng.chance(0.5) {
                        car.stock = self.stock_number(to);
                    }
                    self.remember(&vin, &car);
                    self.unlisted.insert(vin.clone());
                    self.truth[to].insert(vin, car);
                }
            }
            // Arrivals keep a lot near its size.
            let want = if self.truth[lot].len() < 10 { 3 } else { 2 };
            for _ in 0..self.rng.below(want + 1) {
                self.arrive(lot);
            }
            // A trade-in: a car sold before comes back.
            if !self.gone.is_empty() && self.rng.chance(0.08) {
                let i = self.rng.below(self.gone.len());
                let vin = self.gone.keys().nth(i).cloned().expect("in range");
                let mut car = self.gone.remove(&vin).expect("gone");
                car.stock = self.stock_number(lot);
                car.miles += self.rng.range(1000, 20_000);
                car.price = self.rng.range(50, 400) * 100;
                self.remember(&vin, &car);
                self.unlisted.insert(vin.clone());
                self.truth[lot].insert(vin, car);
            }
            // The lot back at an earlier day's exact state (a legitimate look-alike of an old
            // export delivered again): only when none of its cars is on another lot now.
            if self.rng.chance(0.01) && self.past[lot].len() >= 2 {
                let k = 1 + self.rng.below(self.past[lot].len().min(5));
                let then = self.past[lot][self.past[lot].len() - k].clone();
                let elsewhere = then
                    .keys()
                    .any(|v| matches!(self.lot_of(v), Some(l) if l != lot));
                if !elsewhere {
                    let now: Vec<String> = self.truth[lot].keys().cloned().collect();
                    for vin in now.iter().filter(|v| !then.contains_key(*v)) {
                        self.sell(lot, vin);
                    }
                    for (vin, car) in &then {
                        if !self.truth[lot].contains_key(vin) {
                            self.unlisted.insert(vin.clone());
                        }
                        self.gone.remove(vin);
                        self.freed_stocks[lot].retain(|s| s != &car.stock);
                    }
                    self.truth[lot] = then;
                }
            }
        }
        for lot in 0..lots {
            let snapshot = self.truth[lot].clone();
            self.past[lot].push(snapshot);
            if self.past[lot].len() > 6 {
                self.past[lot].remove(0);
            }
        }
        // Now and then a DMS upgrade changes a feed's header for good (not a fault).
        for feed in 0..self.feed_lots.len() {
            if self.rng.chance(0.003) {
                self.styles[feed].names = self.rng.below(HEADERS.len());
                self.shuffle_order(feed);
            }
        }
    }

    fn shuffle_order(&mut self, feed: usize) {
        let order = &mut self.styles[feed].order;
        for i in (1..order.len()).rev() {
            let j = (self.rng.next() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
    }

    /// A feed's cars: its lot's (of its half).
    fn cars(&self, feed: usize) -> BTreeMap<String, Car> {
        let (lot, listed) = self.feed_lots[feed];
        (self.truth[lot].iter())
            .filter(|(vin, _)| listed.is_none_or(|h| h == half(vin)))
            .map(|(vin, car)| (vin.clone(), car.clone()))
            .collect()
    }

    /// A feed's rows: its cars; for a delta feed, those that changed since its last clean
    /// export (every one after a fault) and those sold since, with their last values.
    fn rows(&self, feed: usize) -> Vec<Row> {
        let cars = self.cars(feed);
        let Some(delta) = self.deltas.get(&feed) else {
            return cars
                .iter()
                .map(|(vin, car)| row(vin, car, "In Stock"))
                .collect();
        };
        let changed = (cars.iter())
            .filter(|(vin, car)| delta.resend || delta.base.get(*vin) != Some(car))
            .map(|(vin, car)| row(vin, car, "In Stock"));
        let sold = (delta.base.keys().chain(&delta.told))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter(|vin| !cars.contains_key(*vin))
            .filter_map(|vin| Some(row(vin, self.gone.get(vin)?, "Sold")));
        changed.chain(sold).collect()
    }

    /// A delta feed's DMS wrote an export: clean, it lists what changed since this one next.
    fn exported(&mut self, feed: usize, clean: bool) {
        let cars = self.cars(feed);
        if let Some(delta) = self.deltas.get_mut(&feed) {
            if clean {
                delta.base = cars;
                delta.told.clear();
            } else {
                delta.told.extend(cars.into_keys());
            }
            delta.resend = !clean;
        }
    }

    /// Today's export of a feed, with its faults.
    fn export(&mut self, feed: usize, faults: &[Fault]) -> Vec<u8> {
        let mut rows = self.rows(feed);
        let mut style = self.styles[feed].clone();
        let mut columns: Vec<usize> = style.order.clone();
        for fault in faults {
            match fault {
                Fault::Duplicate if !rows.is_empty() => {
                    let i = self.rng.below(rows.len());
                    rows.insert(i, rows[i].clone());
                }
                // An old deal of a car on the lot (a delta's "Sold" rows are no such car).
                Fault::ConflictingDuplicate if !rows.is_empty() => {
                    let i = self.rng.below(rows.len());
                    if rows[i][7] != "In Stock" {
                        continue;
                    }
                    let mut deal = rows[i].clone();
                    deal[1] = format!("X{}", deal[1]);
                    let price: u64 = deal[PRICE].parse().expect("a number");
                    deal[PRICE] = (price + 1).to_string();
                    deal[7] = "Sold".into();
                    let at = if self.rng.chance(0.5) { i } else { i + 1 };
                    rows.insert(at, deal);
                }
                Fault::VinTypo if !rows.is_empty() => {
                    let i = self.rng.below(rows.len());
                    let at = self.rng.below(17);
                    rows[i][0] = typo(&rows[i][0], at, self.rng.below(33));
                }
                Fault::StockTypo if !rows.is_empty() => {
                    let i = self.rng.below(rows.len());
                    let mut stock: Vec<char> = rows[i][1].chars().collect();
                    let at = 1 + self.rng.below(stock.len() - 1);
                    stock[at] = if stock[at] == '7' { '1' } else { '7' };
                    rows[i][1] = stock.into_iter().collect();
                    let seen = self.seen.entry(rows[i][0].clone()).or_default();
                    seen.typo_stocks.insert(rows[i][1].clone());
                }
                Fault::MissingColumn => {
                    let gone = if self.rng.chance(0.5) { PRICE } else { MILES };
                    columns.retain(|&c| c != gone);
                }
                Fault::HeaderChange => {
                    style.names =
                        (style.names + 1 + self.rng.below(HEADERS.len() - 1)) % HEADERS.len();
                    let saved = self.styles[feed].order.clone();
                    self.shuffle_order(feed);
                    columns = self.styles[feed].order.clone();
                    self.styles[feed].order = saved;
                }
                Fault::BomCrlf => {
                    style.bom = !style.bom;
                    style.crlf = !style.crlf;
                }
                _ => {}
            }
        }
        let mut bytes = render(&style, &columns, &rows);
        for fault in faults {
            match fault {
                Fault::Stale => {
                    if let Some(before) = &self.yesterday[feed] {
                        bytes = before.clone();
                    }
                }
                Fault::TruncatedAtRow => {
                    let ends: Vec<usize> = line_ends(&bytes);
                    if ends.len() > 2 {
                        // Keep the header and at least one record.
                        let keep = 1 + self.rng.below(ends.len() - 2);
                        bytes.truncate(ends[keep] + 1);
                    }
                }
                Fault::TruncatedMidRow => {
                    let ends: Vec<usize> = line_ends(&bytes);
                    if ends.len() > 2 {
                        let line = 1 + self.rng.below(ends.len() - 1);
                        let (from, to) = (ends[line - 1] + 1, ends[line]);
                        let crlf = usize::from(bytes[to - 1] == b'\r');
                        if to - crlf > from + 1 {
                            bytes.truncate(from + 1 + self.rng.below(to - crlf - from - 1));
                        }
                    }
                }
                _ => {}
            }
        }
        bytes
    }
}

/// Which half of a lot with two feeds lists a car: new cars (true) or used, by its VIN.
fn half(vin: &str) -> bool {
    vin.bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)))
        % 2
        == 0
}

/// A car as the service would hold it.
fn payload(location: u64, vin: &str, car: &Car) -> VehiclePayload {
    let mut p = VehiclePayload::new(location, car.stock.clone(), vin);
    p.price = Some(Price::Selling(lotsync::api::Amount(car.price as f64)));
    p.miles = Some(car.miles);
    p
}

fn row(vin: &str, car: &Car, status: &str) -> Row {
    [
        vin.to_owned(),
        car.stock.clone(),
        car.year.to_string(),
        "Honda".into(),
        MODELS[car.model].into(),
        car.miles.to_string(),
        car.price.to_string(),
        status.into(),
    ]
}

fn render(style: &Style, columns: &[usize], rows: &[Row]) -> Vec<u8> {
    let end = if style.crlf { "\r\n" } else { "\n" };
    let mut text = String::new();
    if style.bom {
        text.push('\u{feff}');
    }
    if style.xml {
        // One vehicle a line, so that a cut falls between vehicles or inside one.
        text.push_str(&format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>{end}<Inventory>{end}"
        ));
        for r in rows {
            text.push_str("  <Vehicle>");
            for &c in columns {
                text.push_str(&format!("<{0}>{1}</{0}>", ELEMENTS[c], r[c]));
            }
            text.push_str("</Vehicle>");
            text.push_str(end);
        }
        text.push_str("</Inventory>");
        text.push_str(end);
        return text.into_bytes();
    }
    let header: Vec<&str> = columns.iter().map(|&c| HEADERS[style.names][c]).collect();
    text.push_str(&header.join(","));
    text.push_str(end);
    for r in rows {
        let cells: Vec<&str> = columns.iter().map(|&c| r[c].as_str()).collect();
        text.push_str(&cells.join(","));
        text.push_str(end);
    }
    text.into_bytes()
}

fn line_ends(bytes: &[u8]) -> Vec<usize> {
    bytes
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .map(|(i, _)| i)
        .collect()
}

/// A VIN with one character wrong that the check refuses (one that makes another valid VIN
/// would be another car: the check digit is changed instead).
fn typo(vin: &str, at: usize, char: usize) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHJKLMNPRSTUVWXYZ";
    let mut bytes = vin.as_bytes().to_vec();
    bytes[at] = ALPHABET[char];
    let typed = String::from_utf8(bytes).expect("ASCII");
    if typed != vin && check_vin(&typed, VinCheck::Strict).is_err() {
        return typed;
    }
    let mut bytes = vin.as_bytes().to_vec();
    bytes[8] = if bytes[8] == b'7' { b'3' } else { b'7' };
    String::from_utf8(bytes).expect("ASCII")
}

fn amounts(price: &Option<Price>) -> Vec<u64> {
    let amount = |a: &lotsync::api::Amount| a.0.round() as u64;
    match price {
        None => Vec::new(),
        Some(Price::Selling(a)) => vec![amount(a)],
        Some(Price::Detailed(set)) => [&set.selling, &set.internet, &set.msrp]
            .into_iter()
            .flatten()
            .map(amount)
            .collect(),
    }
}

fn set_modified(path: &Path, at: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(at))
        .expect("export dated");
}

/// What became of one file.
struct Filed {
    verdict: &'static str,
    /// Why it was held.
    reasons: Vec<String>,
}

/// Runs one world for `knobs.days` days.
fn simulate(seed: u64, knobs: Knobs) -> Outcome {
    let dir = TempDir::in_memory("dealership");
    let mut sim = Sim::new(seed, knobs);
    let mut outbox = Outbox::new(State::open(&dir.path().join("state")).expect("state opens"));
    let profile = Profile::auto();
    for day in 0..sim.knobs.days {
        if sim.knobs.lose_state_on == Some(day) {
            let fresh = dir.path().join(format!("state-{day}"));
            outbox = Outbox::new(State::open(&fresh).expect("state opens"));
        }
        if day > 0 {
            sim.live();
            sim.others_live(day);
        }
        if day > 0 && sim.renames.chance(sim.knobs.rename_rate) {
            let feed = sim.renames.below(sim.feed_lots.len());
            sim.feed_names[feed] = format!("lot{}-day{day}", sim.location(feed));
            *sim.out.verdicts.entry("feed renamed").or_default() += 1;
            // As the daemon does when it opens the state with the new config.
            let configured: Vec<(String, BTreeSet<u64>)> = (0..sim.feed_lots.len())
                .map(|f| (sim.feed_names[f].clone(), BTreeSet::from([sim.location(f)])))
                .collect();
            let continued =
                (outbox.state().continue_renamed_feeds(&configured)).expect("state readable");
            assert_eq!(continued.len(), 1, "the renamed feed continues its record");
        } else if day > 0 && sim.relocations.chance(sim.knobs.relocate_rate) {
            let lot = sim.relocations.below(sim.lots.len());
            let new_id = 20 + day as u64;
            sim.former_ids.insert(sim.lots[lot], lot);
            sim.lots[lot] = new_id;
            // A delta feed's DMS sends every car once to the new location (the promises page
            // asks for it: a delta moves only the cars it lists).
            for feed in 0..sim.feed_lots.len() {
                if sim.feed_lots[feed].0 == lot {
                    if let Some(delta) = sim.deltas.get_mut(&feed) {
                        delta.resend = true;
                    }
                }
            }
            *sim.out.verdicts.entry("feed moved").or_default() += 1;
            let configured: Vec<(String, BTreeSet<u64>)> = (0..sim.feed_lots.len())
                .map(|f| (sim.feed_names[f].clone(), BTreeSet::from([sim.location(f)])))
                .collect();
            let continued =
                (outbox.state().continue_renamed_feeds(&configured)).expect("state readable");
            assert!(continued.is_empty(), "a moved feed is no renamed one");
        }
        let feeds = sim.feed_lots.len();
        let mut order: Vec<usize> = (0..feeds).collect();
        for i in (1..feeds).rev() {
            order.swap(i, sim.rng.below(i + 1));
        }
        let mut clean_day = true;
        let mut applied: BTreeSet<usize> = BTreeSet::new();
        let at = sim.base + Duration::from_secs(u64::from(day) * DAY);
        for (n, &feed) in order.iter().enumerate() {
            let mut faults = Vec::new();
            if day > 0 && sim.rng.chance(sim.knobs.fault_rate) && !sim.knobs.faults.is_empty() {
                let k = sim.rng.below(sim.knobs.faults.len());
                faults.push(sim.knobs.faults[k]);
                if sim.rng.chance(0.15) {
                    let k = sim.rng.below(sim.knobs.faults.len());
                    if !faults.contains(&sim.knobs.faults[k]) {
                        faults.push(sim.knobs.faults[k]);
                    }
                }
            }
            if sim.knobs.cuts_within_grace && sim.cut_yesterday.contains(&feed) {
                faults.retain(|f| *f != Fault::TruncatedAtRow);
            }
            if faults.contains(&Fault::TruncatedAtRow) {
                sim.cut_yesterday.insert(feed);
            } else {
                sim.cut_yesterday.remove(&feed);
            }
            for f in &faults {
                *sim.out.faults.entry(format!("{f:?}")).or_default() += 1;
            }
            // Yesterday's export, as the DMS would write it again (clean).
            let clean = sim.rows(feed);
            let bytes = sim.export(feed, &faults);
            sim.exported(feed, faults.is_empty());
            let lot = sim.location(feed);
            let ext = if sim.styles[feed].xml { "xml" } else { "csv" };
            let path = dir
                .path()
                .join(format!("f{feed}-lot{lot}-day{day:05}.{ext}"));
            std::fs::write(&path, &bytes).expect("export written");
            let mut modified = at + Duration::from_secs(60 * n as u64);
            if faults.contains(&Fault::ClockAhead) {
                modified += Duration::from_secs(2 * DAY);
            }
            if faults.contains(&Fault::ClockBehind) {
                modified -= Duration::from_secs(2 * DAY);
            }
            set_modified(&path, modified);
            let mut filed = sim.diff(&outbox, &profile, feed, &path, day, &faults, &bytes, false);
            // The operator releases a true export that the safety guard held (many cars sold
            // in one day, a lot back at an earlier state); a faulty one stays held. A full
            // export held only as the same content as an older one is left (the next one
            // says it all again); a delta's is released, or its changes are lost for good.
            let by_guard = !filed
                .reasons
                .iter()
                .all(|r| r.starts_with("the same content as"));
            let is_delta = sim.deltas.contains_key(&feed);
            if filed.verdict == "held" && faults.is_empty() && (by_guard || is_delta) {
                *sim.out.verdicts.entry("released").or_default() += 1;
                filed = sim.diff(&outbox, &profile, feed, &path, day, &faults, &bytes, true);
            }
            sim.yesterday[feed] = Some(render(&sim.styles[feed], &sim.styles[feed].order, &clean));
            if faults.contains(&Fault::WrongInbox) && feeds > 1 {
                let other = (feed + 1) % feeds;
                let text = render(
                    &sim.styles[other],
                    &sim.styles[other].order,
                    &sim.rows(other),
                );
                let ext = if sim.styles[other].xml { "xml" } else { "csv" };
                let path = dir
                    .path()
                    .join(format!("f{feed}-lot{lot}-day{day:05}-wrong.{ext}"));
                std::fs::write(&path, &text).expect("export written");
                set_modified(&path, at + Duration::from_secs(60 * n as u64 + 30));
                sim.diff(&outbox, &profile, feed, &path, day, &faults, &text, false);
            }
            let is_apply = filed.verdict == "apply";
            if faults.is_empty() && (is_apply || filed.verdict == "already applied") {
                if is_apply {
                    applied.insert(feed);
                }
            } else {
                clean_day = false;
            }
        }
        // An older applied export of a lot delivered again, written now.
        for feed in 0..feeds {
            if day > 2
                && sim.knobs.faults.contains(&Fault::OldExport)
                && sim.rng.chance(sim.knobs.fault_rate / 10.0)
            {
                let older: Vec<PathBuf> = sim.exports[feed]
                    .iter()
                    .filter(|(d, _, applied)| *applied && *d + 1 < day)
                    .map(|(_, p, _)| p.clone())
                    .collect();
                if older.is_empty() {
                    continue;
                }
                let from = older[older.len() - 1 - sim.rng.below(older.len().min(10))].clone();
                *sim.out.faults.entry("OldExport".into()).or_default() += 1;
                let lot = sim.location(feed);
                let ext = from.extension().and_then(|e| e.to_str()).unwrap_or("csv");
                let path = dir
                    .path()
                    .join(format!("f{feed}-lot{lot}-day{day:05}-again.{ext}"));
                std::fs::copy(&from, &path).expect("old export copied");
                set_modified(&path, at + Duration::from_secs(3600));
                let bytes = std::fs::read(&path).expect("read back");
                let filed = sim.diff(
                    &outbox,
                    &profile,
                    feed,
                    &path,
                    day,
                    &[Fault::OldExport],
                    &bytes,
                    false,
                );
                // Superseded: a newer export (a clock ahead) already stands; nothing applied.
                if !matches!(filed.verdict, "held" | "already applied" | "superseded") {
                    sim.violation(
                        "old export",
                        day,
                        "",
                        format!(
                            "{} delivered again as {} came out {}",
                            from.display(),
                            path.display(),
                            filed.verdict
                        ),
                    );
                }
            }
        }
        sim.check_day(day, clean_day, &applied);
    }
    sim.out
}

impl Sim {
    fn violation(&mut self, invariant: &'static str, day: u32, vin: &str, what: String) {
        self.out.violations.push(Violation {
            invariant,
            seed: self.seed,
            day,
            vin: vin.to_owned(),
            what,
        });
    }

    /// Diffs one file, answers its operations, applies them to the view and checks them.
    #[allow(clippy::too_many_arguments)]
    fn diff(
        &mut self,
        outbox: &Outbox,
        profile: &Profile,
        feed: usize,
        path: &Path,
        day: u32,
        faults: &[Fault],
        bytes: &[u8],
        release: bool,
    ) -> Filed {
        self.out.files += 1;
        let lot = self.location(feed);
        let mut rules = self.rules(feed);
        rules.force |= release;
        if let Some(broken) = self.knobs.break_rules {
            broken(&mut rules);
        }
        let mut options = DiffOptions::committed();
        let state = outbox.state();
        let needs = (state.needs_service_list(ORG, &rules.feed, &rules.locations)).expect("read");
        if needs && self.beside && self.knobs.lose_state_on.is_none() {
            options.listed = Some(self.listed());
        }
        let planned = diff_file(outbox, rules, profile, lot, path, options);
        let verdict = match &planned {
            Ok(p) => match &p.plan.verdict {
                Verdict::Apply { .. } => "apply",
                Verdict::AlreadyApplied { .. } => "already applied",
                Verdict::Held { .. } => "held",
                Verdict::Superseded { .. } => "superseded",
            },
            // The daemon waits for a file cut inside a record and holds it: nothing applied.
            Err(_) => "unreadable",
        };
        *self.out.verdicts.entry(verdict).or_default() += 1;
        // An XML export cut anywhere is no XML document: unreadable too.
        let cut = faults.contains(&Fault::TruncatedMidRow)
            || (self.styles[feed].xml && faults.contains(&Fault::TruncatedAtRow));
        if verdict == "unreadable" && !cut {
            let error = planned
                .as_ref()
                .err()
                .map(|e| format!("{e:#}"))
                .unwrap_or_default();
            self.violation(
                "readable",
                day,
                "",
                format!(
                    "{} (faults {faults:?}) cannot be diffed: {error}",
                    path.display()
                ),
            );
        }
        self.exports[feed].push((day, path.to_owned(), verdict == "apply"));
        let text = String::from_utf8_lossy(bytes);
        if verdict == "apply" {
            let truth = &self.truth[self.feed_lots[feed].0];
            self.unlisted
                .retain(|vin| !(truth.contains_key(vin) && text.contains(vin.as_str())));
        }
        if let Ok(vin) = std::env::var("LOTSYNC_SIM_TRACE") {
            eprintln!(
                "day {day} {}: {verdict}, faults {faults:?}, lists {vin}: {}, truly at {:?}",
                path.display(),
                text.contains(&vin),
                self.lot_of(&vin).map(|l| self.lots[l])
            );
            if let Ok(p) = &planned {
                for kept in p.plan.protected.iter().filter(|k| k.vin == vin) {
                    eprintln!("  kept: {kept:?}");
                }
                if let Verdict::Held { reasons } = &p.plan.verdict {
                    eprintln!("  held: {reasons:?}");
                }
            }
            if let Some(shown) = self.view.get(&vin) {
                let key = lotsync::state::VehicleKey::new(ORG, shown.location, &vin);
                let record = outbox.state().vehicle(&key).expect("read");
                eprintln!("  record at {}: {record:?}", shown.location);
            }
        }
        for entry in answer_all(outbox) {
            self.answered(entry, day, feed, path, faults, &text);
        }
        let reasons = match planned {
            Ok(p) => match p.plan.verdict {
                Verdict::Held { reasons } => reasons,
                _ => Vec::new(),
            },
            Err(_) => Vec::new(),
        };
        Filed { verdict, reasons }
    }

    fn answered(
        &mut self,
        entry: lotsync::outbox::Entry,
        day: u32,
        feed: usize,
        path: &Path,
        faults: &[Fault],
        text: &str,
    ) {
        let vin = entry.vin.clone();
        if let Some(location) = self.foreign.get(&vin) {
            let what = format!(
                "{} of another product's car (its lot {location}), by file {}",
                entry.op.name(),
                path.display()
            );
            self.violation("5", day, &vin, what);
        }
        if std::env::var("LOTSYNC_SIM_TRACE").is_ok_and(|v| v == vin) {
            eprintln!("  answered {} at {}", entry.op.name(), entry.location_id);
        }
        let file = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let file = file.unwrap_or_default();
        let lot = self.location(feed);
        let context = || {
            let listed = text.contains(vin.as_str());
            format!(
                "file {file} of lot {} (faults {faults:?}, lists the VIN: {listed}); the file:\n{}",
                lot,
                excerpt(text)
            )
        };
        match &entry.op {
            Op::Create(p) | Op::Update(p) => {
                if matches!(entry.op, Op::Create(_)) {
                    self.out.created += 1;
                    if let Some(shown) = self.view.get(&vin) {
                        let what = format!(
                            "created again (the service shows it {} at {}); {}",
                            if shown.sold { "sold" } else { "in stock" },
                            shown.location,
                            context()
                        );
                        self.violation("3", day, &vin, what);
                    }
                }
                self.check_fields(p, day, &vin, &context);
                let sold = self.view.get(&vin).is_some_and(|s| s.sold);
                self.view.insert(
                    vin.clone(),
                    Shown {
                        sold,
                        location: p.location_id,
                        payload: p.clone(),
                    },
                );
            }
            Op::MarkSold | Op::MarkInStock => {
                let sold = entry.op == Op::MarkSold;
                if sold {
                    self.out.sold += 1;
                    if let Some(lot) = self.lot_of(&vin) {
                        // Sold by another lot's export before any export of its new lot
                        // listing it was applied: nothing can tell the move from a sale
                        // (documented).
                        let own = self.feed_lots[feed].0;
                        // Or by yesterday's export written again, as true as it was then:
                        // the car left the lot yesterday and came back today.
                        let past = &self.past[own];
                        let yesterday = past.len().checked_sub(2).map(|i| &past[i]);
                        let stale_truth = lot == own
                            && faults.contains(&Fault::Stale)
                            && yesterday.is_some_and(|then| !then.contains_key(&vin));
                        if (self.unlisted.contains(&vin) && lot != own) || stale_truth {
                            self.out.indistinguishable += 1;
                        } else {
                            let what = format!(
                                "sold while on lot {} (listed there by an applied export: {}); {}",
                                self.lots[lot],
                                !self.unlisted.contains(&vin),
                                context()
                            );
                            self.violation("1", day, &vin, what);
                        }
                    }
                }
                match self.view.get_mut(&vin) {
                    Some(shown) => shown.sold = sold,
                    None => {
                        let what =
                            format!("{} of a VIN the service does not have", entry.op.name());
                        self.violation("3", day, &vin, what);
                    }
                }
            }
        }
    }

    fn check_fields(
        &mut self,
        p: &VehiclePayload,
        day: u32,
        vin: &str,
        context: &dyn Fn() -> String,
    ) {
        let mut wrong = Vec::new();
        match self.seen.get(vin) {
            None => wrong.push("a VIN the truth never had".to_owned()),
            Some(seen) => {
                if !seen.stocks.contains(&p.stock) && !seen.typo_stocks.contains(&p.stock) {
                    wrong.push(format!("stock {} (true: {:?})", p.stock, seen.stocks));
                }
                for a in amounts(&p.price) {
                    if !seen.prices.contains(&a) {
                        wrong.push(format!("price {a} (true: {:?})", seen.prices));
                    }
                }
                if let Some(m) = p.miles {
                    if !seen.miles.contains(&m) {
                        wrong.push(format!("miles {m} (true: {:?})", seen.miles));
                    }
                }
            }
        }
        if !wrong.is_empty() {
            let what = format!("sent {}; {}", wrong.join(", "), context());
            self.violation("4", day, vin, what);
        }
    }

    /// The day's end: invariants 2 and 2b.
    fn check_day(&mut self, day: u32, clean: bool, applied: &BTreeSet<usize>) {
        if !clean {
            self.overdue.clear();
        } else {
            self.out.clean_days += 1;
        }
        let on_lots: BTreeSet<&String> = self.truth.iter().flat_map(|t| t.keys()).collect();
        let mut late = Vec::new();
        for (vin, shown) in &self.view {
            if shown.sold || on_lots.contains(vin) || self.foreign.contains_key(vin) {
                continue;
            }
            // Truly sold, still in stock on the service.
            let at = (self.lots.iter().position(|&l| l == shown.location))
                .or_else(|| self.former_ids.get(&shown.location).copied());
            let judged_by = at.map(|lot| self.feed_of(lot, vin));
            // Judged by a delta feed (it tells the cars its lot sold), moved to another lot and
            // sold there before any export of that lot was applied: no file tells it left.
            let by_delta = judged_by.is_some_and(|f| self.deltas.contains_key(&f));
            if by_delta && self.untold.contains(vin) {
                continue;
            }
            let count = self.overdue.entry(vin.clone()).or_default();
            if clean && judged_by.is_some_and(|f| applied.contains(&f)) {
                *count += 1;
            }
            if *count > self.sold_after_absent {
                late.push((vin.clone(), *count, shown.location));
            }
        }
        let view = &self.view;
        self.overdue
            .retain(|vin, _| view.get(vin).is_some_and(|s| !s.sold) && !on_lots.contains(vin));
        for (vin, count, location) in late {
            let what = format!(
                "truly sold, still in stock at {location} after {count} clean days its lot's \
                 export was applied (sold_after_absent = {})",
                self.sold_after_absent
            );
            self.violation("2", day, &vin, what);
            self.overdue.remove(&vin);
        }
        if !clean {
            return;
        }
        let mut wrong = Vec::new();
        for (lot, cars) in self.truth.iter().enumerate() {
            for (vin, car) in cars {
                let why = match self.view.get(vin) {
                    None => Some("not on the service".to_owned()),
                    Some(s) if s.sold => Some("shown sold".to_owned()),
                    Some(s) if s.location != self.lots[lot] => {
                        Some(format!("shown at {}", s.location))
                    }
                    Some(s)
                        if s.payload.stock != car.stock
                            || amounts(&s.payload.price) != vec![car.price]
                            || s.payload.miles != Some(car.miles) =>
                    {
                        Some(format!(
                            "shown as stock {} price {:?} miles {:?}, truly {car:?}",
                            s.payload.stock,
                            amounts(&s.payload.price),
                            s.payload.miles
                        ))
                    }
                    Some(_) => None,
                };
                if let Some(why) = why {
                    wrong.push((
                        vin.clone(),
                        format!("on lot {} after a clean day: {why}", self.lots[lot]),
                    ));
                }
            }
        }
        for (vin, what) in wrong {
            self.violation("2b", day, &vin, what);
        }
    }
}

/// The first lines of a file, for a report.
fn excerpt(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = lines.iter().take(6).map(|l| format!("    {l:?}")).collect();
    if lines.len() > 6 {
        out.push(format!("    … {} lines in all", lines.len()));
    }
    out.join("\n")
}

fn report(outcomes: &[(u64, Outcome)]) -> String {
    let mut lines = Vec::new();
    for (seed, o) in outcomes {
        lines.push(format!(
            "seed {seed}: {} files, {} clean days, {} created, {} sold ({} indistinguishable \
             moves), verdicts {:?}, faults {:?}, {} violations",
            o.files,
            o.clean_days,
            o.created,
            o.sold,
            o.indistinguishable,
            o.verdicts,
            o.faults,
            o.violations.len()
        ));
        for v in o.violations.iter().take(8) {
            lines.push(format!("  {v}"));
        }
    }
    lines.join("\n")
}

fn run(seeds: &[u64], knobs: &Knobs) -> Vec<(u64, Outcome)> {
    seeds
        .iter()
        .map(|&seed| (seed, simulate(seed, knobs.clone())))
        .collect()
}

fn assert_clean(outcomes: &[(u64, Outcome)]) {
    let bad = outcomes.iter().any(|(_, o)| !o.violations.is_empty());
    assert!(!bad, "{}", report(outcomes));
}

/// Seeds that once found a violation, with the days that reach it, run every time: a car
/// moved to another lot whose new lot's export of that day was stale, cut or held, sold by its
/// old lot's second absence before the new lot's next export listed it (seed 8 day 26, seed
/// 13 day 12; now counted as indistinguishable, and its return checked by 2b); the full feed's
/// export applied in the delta feed's inbox of its lot, sharing its cars for good (seed 36,
/// day 50, the first car left in stock on day 58); another lot's full export applied in a
/// delta feed's inbox, below the guard's share of that lot, taking two cars from their feed
/// for good (seed 32, day 39, left in stock from day 40).
const REGRESSIONS: &[(u64, u32)] = &[(8, 30), (13, 15), (32, 70), (36, 60)];

/// A thousand simulated days: eight worlds of 125 days.
#[test]
fn a_few_worlds_keep_every_invariant() {
    let started = std::time::Instant::now();
    let outcomes = run(&[1, 2, 3, 4, 5, 6, 7, 8], &Knobs::standard(125));
    eprintln!("{}\n({:?})", report(&outcomes), started.elapsed());
    assert_clean(&outcomes);
}

#[test]
fn the_regression_seeds_keep_every_invariant() {
    let outcomes: Vec<_> = REGRESSIONS
        .iter()
        .map(|&(seed, days)| (seed, simulate(seed, Knobs::standard(days))))
        .collect();
    assert_clean(&outcomes);
}

/// A full export cut after a whole record, under `sold_after_absent = 1`: a cut that loses
/// two records or more is held (it leaves out the end of the last snapshot's order, and
/// nothing before it), but one that loses a single record sells that car, as the sale of the
/// last car of the file would (seeds 16 and 24 of 1-24 × 200 days, one car each). Nothing in
/// such a file tells the two apart. Fails until the diff can; `LOTSYNC_SIM_SEEDS` and
/// `LOTSYNC_SIM_DAYS` widen it.
#[test]
#[ignore]
fn a_cut_export_under_one_absence() {
    let days = std::env::var("LOTSYNC_SIM_DAYS").map_or(200, |_| env_days());
    let knobs = Knobs {
        cuts_within_grace: false,
        ..Knobs::standard(days)
    };
    let seeds = match std::env::var("LOTSYNC_SIM_SEEDS") {
        Ok(_) => env_seeds(),
        Err(_) => vec![16, 24],
    };
    let outcomes = run(&seeds, &knobs);
    eprintln!("{}", report(&outcomes));
    assert_clean(&outcomes);
}

/// The checker is no tautology: a rule broken on purpose is found.
#[test]
fn a_broken_rule_is_found() {
    // Every absent car sold at the first absence, the guard overridden, where the checker
    // expects sold_after_absent = 2: truncated exports sell cars still on the lot.
    let knobs = Knobs {
        sold_after_absent: Some(2),
        break_rules: Some(|r| {
            r.sold_after_absent = 1;
            r.force = true;
        }),
        fault_rate: 0.3,
        ..Knobs::standard(60)
    };
    let outcomes = run(&[1], &knobs);
    assert!(
        outcomes[0].1.violations.iter().any(|v| v.invariant == "1"),
        "{}",
        report(&outcomes)
    );
    // Cars never sold.
    let knobs = Knobs {
        break_rules: Some(|r| r.sold_after_absent = 1000),
        ..Knobs::standard(40)
    };
    let outcomes = run(&[1], &knobs);
    assert!(
        outcomes[0].1.violations.iter().any(|v| v.invariant == "2"),
        "{}",
        report(&outcomes)
    );
    // The state lost without reading the service's list: every car created again.
    let knobs = Knobs {
        lose_state_on: Some(10),
        ..Knobs::standard(15)
    };
    let outcomes = run(&[1], &knobs);
    assert!(
        outcomes[0].1.violations.iter().any(|v| v.invariant == "3"),
        "{}",
        report(&outcomes)
    );
}

fn env_seeds() -> Vec<u64> {
    let text = std::env::var("LOTSYNC_SIM_SEEDS").unwrap_or_else(|_| "50".into());
    match text.split_once('-') {
        Some((a, b)) => (a.parse().expect("a seed")..=b.parse().expect("a seed")).collect(),
        None => (1..=text.parse().expect("a count of seeds")).collect(),
    }
}

fn env_days() -> u32 {
    std::env::var("LOTSYNC_SIM_DAYS").map_or(1000, |d| d.parse().expect("a number of days"))
}

/// The long run: `LOTSYNC_SIM_SEEDS=1-200 LOTSYNC_SIM_DAYS=2000 cargo test --release --test it
/// dealership::long -- --ignored --nocapture`.
#[test]
#[ignore]
fn long() {
    let knobs = Knobs::standard(env_days());
    let outcomes = run(&env_seeds(), &knobs);
    eprintln!("{}", report(&outcomes));
    assert_clean(&outcomes);
}
