//! Nothing wrongly sold, as a dealer meets it: `lotsync sync` as a
//! real process against the sandbox on loopback, with a real state on disk. A record rejected
//! for a VIN typo keeps the vehicle it stands for on the lot, and a car moved between two lots
//! of one organization is moved, not sold and back in stock, whichever lot's export comes first.

use crate::common;

use common::feedgen;
use common::fleet::{export, Car};
use common::site::{reports, run, vehicle, Site};
use common::{count, sandbox_with, state};
use lotsync::sandbox::Behaviour;

/// The VIN with its check digit (9th character) mistyped.
fn check_digit_typo(vin: &str) -> String {
    let mut chars: Vec<char> = vin.chars().collect();
    chars[8] = if chars[8] == '7' { '3' } else { '7' };
    chars.into_iter().collect()
}

/// Item 1: day 1 lists stock U24002 with a valid VIN; day 2 the same export with that VIN's
/// check digit mistyped. The record is rejected (right), and its vehicle stays on the lot: 0
/// sold, and the report and `check` say which record protected which vehicle and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vin_typo_does_not_sell_the_car_its_stock_number_names() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("protect-typo", &sb.base_url());
    let cars: Vec<Car> = (0..12).map(Car::new).collect();
    let vin = feedgen::vin(2);
    let day1_text = export(&cars).replace("S00002", "U24002");
    let day1 = site.path().join("day1.csv");
    std::fs::write(&day1, &day1_text).unwrap();
    let (status, stdout, stderr) = run(&site, &["sync"], &[&day1]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("created 12,"), "{stdout}");

    let typo = check_digit_typo(&vin);
    let day2 = site.path().join("day2.csv");
    std::fs::write(&day2, day1_text.replace(&vin, &typo)).unwrap();

    let (status, stdout, stderr) = run(&site, &["sync"], &[&day2]).await;
    assert_eq!(status, 3, "a rejected record: exit 3\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("sold 0,"),
        "the rejected record's vehicle is not sold: {stdout}"
    );
    assert!(
        stdout.contains(&format!("line 4 keeps {vin}")),
        "the output names the protection: {stdout}"
    );
    let st = state(&sb).await;
    assert_eq!(
        vehicle(&st, &vin)["vehicle"]["status"],
        "in-stock",
        "{st:#}"
    );
    assert_eq!(
        count(&st, "POST /v1/inventory/{id}/sold", "200"),
        0,
        "{st:#}"
    );

    // `check` has no state: it says which rejected record carries a stock number or a VIN
    // that protects the vehicle the state knows by it.
    let (status, stdout, stderr) = run(&site, &["check"], &[&day2]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("U24002") && stdout.contains("keeps on the lot"),
        "check names the protecting stock number: {stdout}"
    );

    // The day-2 report says which record protected which vehicle, and why.
    let all = reports(&site.inbox(), "archive");
    let report = all
        .iter()
        .find(|r| r["file"] == "day2.csv")
        .unwrap_or_else(|| panic!("day2.csv is filed with its report: {all:#?}"));
    assert_eq!(report["counts"]["sold"], 0, "{report:#}");
    assert_eq!(report["counts"]["protected"], 1, "{report:#}");
    let protected = &report["protected"][0];
    assert_eq!(protected["line"], 4, "{report:#}");
    assert_eq!(protected["vin"], vin.as_str(), "{report:#}");
    assert_eq!(protected["by"], "stock", "{report:#}");
    assert_eq!(protected["value"], "U24002", "{report:#}");
    assert!(
        report["protected"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["vin"] == vin.as_str()),
        "only the one vehicle: {report:#}"
    );
}

/// Two lots of one organization, each its own feed (north: location 10, south: location 11).
const TWO_LOTS: &str = "[[feed]]\nname = \"north\"\ninbox = \"north\"\nlocation_id = 10\n\n\
                        [[feed]]\nname = \"south\"\ninbox = \"south\"\nlocation_id = 11\n";

/// Item 5: car 1 moves from north to south. The north DMS still lists it the day the south
/// one first does (day 2, south's export first), and on day 3 north's export (without it)
/// comes before south's. Today: sold by north's file, back in stock by south's. The car is
/// listed by south's latest snapshot when north's file is judged: it is moved, never sold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_car_moved_between_lots_is_moved_not_sold_when_the_old_lots_file_comes_first() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::with("protect-move", &sb.base_url(), 1000, "", "", TWO_LOTS);
    site.feed_inbox("north");
    site.feed_inbox("south");
    let north: Vec<Car> = (0..10).map(Car::new).collect();
    let south: Vec<Car> = (10..20).map(Car::new).collect();
    let moved = Car::new(1);
    let vin = feedgen::vin(1);
    let write = |name: &str, cars: &[Car]| {
        let path = site.path().join(name);
        std::fs::write(&path, export(cars)).unwrap();
        path
    };
    let with_moved = |cars: &[Car]| {
        let mut cars = cars.to_vec();
        cars.push(moved.clone());
        cars
    };

    let north1 = write("north1.csv", &north);
    let south1 = write("south1.csv", &south);
    let (status, stdout, stderr) = run(&site, &["sync", "--feed", "north"], &[&north1]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    let (status, stdout, stderr) = run(&site, &["sync", "--feed", "south"], &[&south1]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");

    // Day 2: south lists the car (it arrived), north still lists it too.
    let south2 = write("south2.csv", &with_moved(&south));
    // (A new price, so that it is not the same content as day 1's.)
    let mut north_day2 = north.clone();
    north_day2[0].price += 100;
    let north2 = write("north2.csv", &north_day2);
    let (status, stdout, stderr) = run(&site, &["sync", "--feed", "south"], &[&south2]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    let (status, stdout, stderr) = run(&site, &["sync", "--feed", "north"], &[&north2]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");

    // Day 3: north's export (without the car) comes first.
    let without_moved: Vec<Car> = north_day2.iter().filter(|c| c.n != 1).cloned().collect();
    let north3 = write("north3.csv", &without_moved);
    let south3 = write("south3.csv", &with_moved(&south));
    let (status, stdout, stderr) = run(&site, &["sync", "--feed", "north"], &[&north3]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("updated 1, sold 0,"),
        "north's file moves the car south lists, and does not sell it: {stdout}"
    );
    assert!(
        stdout.contains(vin.as_str()) && stdout.contains("south2.csv"),
        "the output names the protection: {stdout}"
    );
    let (status, stdout, stderr) = run(&site, &["sync", "--feed", "south"], &[&south3]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("updated 0, sold 0, back in stock 0"),
        "south's file (the same as the day before) has nothing left to do: {stdout}"
    );

    let st = state(&sb).await;
    let car = vehicle(&st, &vin);
    assert_eq!(car["vehicle"]["status"], "in-stock", "{st:#}");
    assert_eq!(car["location_id"], 11, "{st:#}");
    assert_eq!(
        count(&st, "POST /v1/inventory/{id}/sold", "200"),
        0,
        "{st:#}"
    );
    assert_eq!(
        count(&st, "POST /v1/inventory/{id}/in-stock", "200"),
        0,
        "{st:#}"
    );

    let all = reports(&site.path().join("north"), "archive");
    let report = all
        .iter()
        .find(|r| r["file"] == "north3.csv")
        .unwrap_or_else(|| panic!("north3.csv is filed with its report: {all:#?}"));
    assert_eq!(report["counts"]["protected"], 1, "{report:#}");
    let protected = &report["protected"][0];
    assert_eq!(protected["vin"], vin.as_str(), "{report:#}");
    assert_eq!(protected["by"], "other_location", "{report:#}");
    assert_eq!(protected["location_id"], 10, "{report:#}");
    assert_eq!(protected["listed_at"], 11, "{report:#}");
    assert_eq!(protected["value"], "south2.csv", "{report:#}");
    assert_eq!(protected["moved"], true, "{report:#}");
}
