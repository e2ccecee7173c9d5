//! A generated dealership fleet: vehicles written as a CSV export, and what the service
//! should hold after exports are applied.

use super::feedgen;
use lotsync::mapper::{ExportFile, Mapped, Profile};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

pub const HEADER: &str = "VIN,Stock,Year,Make,Model,Price,Miles,Status,Lot\n";
const MAKES: [(&str, &str); 4] = [
    ("Ford", "F-150"),
    ("Honda", "Accord"),
    ("Toyota", "RAV4"),
    ("Subaru", "Outback"),
];

/// One vehicle of a generated export.
#[derive(Debug, Clone)]
pub struct Car {
    pub n: u64,
    pub price: u64,
    pub miles: u64,
    pub sold: bool,
    pub lot: &'static str,
}

impl Car {
    pub fn new(n: u64) -> Car {
        Car {
            n,
            price: 10_000 + (n * 7_919) % 40_000,
            miles: (n * 104_729) % 120_000,
            sold: false,
            lot: "MAIN",
        }
    }

    pub fn line(&self) -> String {
        let (make, model) = MAKES[(self.n % 4) as usize];
        format!(
            "{},S{:05},{},{make},{model},\"${}\",{},{},{}\n",
            feedgen::vin(self.n),
            self.n,
            2015 + self.n % 10,
            self.price,
            self.miles,
            if self.sold { "Sold" } else { "In Stock" },
            self.lot
        )
    }
}

/// A CSV export of `cars`.
pub fn export(cars: &[Car]) -> String {
    let mut text = String::from(HEADER);
    for car in cars {
        text.push_str(&car.line());
    }
    text
}

/// What the service should hold: VIN → (payload as sent, sold).
#[derive(Default)]
pub struct Expected(pub BTreeMap<String, (Value, bool)>);

impl Expected {
    /// Applies a full export the way the pipeline must: listed vehicles as mapped (a vehicle
    /// listed as sold that was never created stays unknown), absent ones sold.
    pub fn full(&mut self, file: &Path, profile: &Profile) {
        let mut export = ExportFile::open(file, profile, 10).unwrap();
        let mut listed = std::collections::HashSet::new();
        while let Some(mapped) = export.next_record().unwrap() {
            let Mapped::Accepted(a) = mapped else {
                continue;
            };
            let vin = a.payload.vin.clone();
            listed.insert(vin.clone());
            let sold = a.sold == Some(true);
            if sold && !self.0.contains_key(&vin) {
                continue;
            }
            self.0
                .insert(vin, (serde_json::to_value(&a.payload).unwrap(), sold));
        }
        for (vin, (_, sold)) in self.0.iter_mut() {
            if !listed.contains(vin) {
                *sold = true;
            }
        }
    }

    /// Asserts the sandbox holds exactly these vehicles: each VIN once, the payload last
    /// sent equal to the mapped one, the sold state right.
    pub fn assert_matches(&self, sandbox_state: &Value) {
        let mut held: HashMap<String, Vec<&Value>> = HashMap::new();
        for v in sandbox_state["vehicles"].as_array().unwrap() {
            let vin = v["vehicle"]["vin"].as_str().unwrap().to_owned();
            held.entry(vin).or_default().push(v);
        }
        let doubled: Vec<&String> = held
            .iter()
            .filter(|(_, v)| v.len() > 1)
            .map(|(vin, _)| vin)
            .collect();
        assert!(doubled.is_empty(), "created twice: {doubled:?}");
        let mut wrong = Vec::new();
        for (vin, (payload, sold)) in &self.0 {
            let Some(v) = held.get(vin).map(|v| v[0]) else {
                wrong.push(format!("{vin}: missing"));
                continue;
            };
            if &v["payload"] != payload {
                wrong.push(format!("{vin}: payload {} != {payload}", v["payload"]));
            }
            let status = v["vehicle"]["status"].as_str().unwrap_or("");
            if (status == "sold") != *sold {
                wrong.push(format!("{vin}: status {status}, expected sold={sold}"));
            }
        }
        let extra: Vec<&String> = held.keys().filter(|k| !self.0.contains_key(*k)).collect();
        assert!(extra.is_empty(), "not in any export: {extra:?}");
        assert!(
            wrong.is_empty(),
            "{} wrong, first: {:#?}",
            wrong.len(),
            &wrong[..wrong.len().min(5)]
        );
    }
}
