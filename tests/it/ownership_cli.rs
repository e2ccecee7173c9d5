//! Only a feed's own full snapshot sells by absence, and only the vehicles it owns (the feed
//! whose file created the vehicle or last listed it): `lotsync sync` as a real process against
//! the sandbox on loopback.
//! - A first install at one lot of two: the service's vehicles the file leaves out are not
//!   owned, reported, never sold.
//! - Two feeds on one location (both full, or one full and one delta): each sells only what it
//!   owns; a car both list is reported and not sold while either lists it; `validate` accepts
//!   the config as `sync` does.

use crate::common;

use common::feedgen;
use common::fleet::Car;
use common::site::{run, vehicle, Site};
use common::{client, sandbox_with, sold, state};
use lotsync::api::VehiclePayload;
use lotsync::sandbox::Behaviour;

fn is_sold(st: &serde_json::Value, n: u64) -> bool {
    vehicle(st, &feedgen::vin(n))["vehicle"]["status"] == "sold"
}

fn cars(ns: impl IntoIterator<Item = u64>) -> Vec<Car> {
    ns.into_iter().map(Car::new).collect()
}

/// The service lists 40 cars at lot 10 and 10 at lot 11; the config has one full feed, for
/// lot 10, and an empty state. Its first file lists 39 of the 40: nothing is sold (the one
/// left out and lot 11's ten are known only from the service's list), and the report says 11
/// are not owned. The next file leaves out a car the first one listed: the feed owns it, so
/// it is sold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_install_at_one_lot_of_two_sells_nothing_it_does_not_own() {
    let sb = sandbox_with(Behaviour::default()).await;
    let api = client(&sb);
    for (n, location) in (0..40).map(|n| (n, 10)).chain((100..110).map(|n| (n, 11))) {
        let payload = VehiclePayload::new(location, format!("S{n:05}"), feedgen::vin(n));
        api.upsert_vehicle(&payload).await.unwrap();
    }
    let site = Site::new("own-first-install", &sb.base_url());

    let day1 = site.export("day1.csv", &cars(0..39));
    let (status, stdout, stderr) = run(&site, &["sync"], &[&day1]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("11 left out but not owned by this feed"),
        "{stdout}\n{stderr}"
    );
    let st = state(&sb).await;
    assert_eq!(
        sold(&st),
        0,
        "nothing the feed does not own is sold: {stdout}"
    );

    let day2 = site.export("day2.csv", &cars(0..38));
    let (status, stdout, stderr) = run(&site, &["sync"], &[&day2]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    let st = state(&sb).await;
    assert!(is_sold(&st, 38), "listed by day 1, owned, left out: sold");
    assert_eq!(sold(&st), 1, "{stdout}");
    assert!(
        !is_sold(&st, 39) && !is_sold(&st, 100),
        "not owned: {stdout}"
    );
}

/// An XML export (the `used` feed's) of `cars`.
fn xml(cars: &[Car]) -> String {
    let mut out = String::from("<?xml version=\"1.0\"?>\n<Inventory>\n");
    for car in cars {
        out.push_str(&format!(
            "  <Vehicle><VIN>{}</VIN><StockNumber>S{:05}</StockNumber><Year>2020</Year>\
             <Make>Honda</Make><Model>Civic</Model><Odometer>{}</Odometer>\
             <Prices><Retail>{}</Retail></Prices></Vehicle>\n",
            feedgen::vin(car.n),
            car.n,
            car.miles,
            car.price
        ));
    }
    out.push_str("</Inventory>\n");
    out
}

/// New cars as CSV from feed `new`, used ones as XML from feed `used` (full or delta), both
/// location 10. `validate` accepts the config. `used` lists car 5 too: a conflict. `used`'s
/// file sells none of `new`'s cars; `new`'s next file leaves out cars 5 and 9: car 9 (its own)
/// is sold, car 5 (listed by `used` too) is not, nor any of `used`'s cars.
async fn two_feeds_on_one_location(name: &str, used_mode: &str) {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new(name, &sb.base_url());
    site.feed_inbox("new");
    site.feed_inbox("used");
    let feeds = format!(
        "[[feed]]\nname = \"new\"\ninbox = \"new\"\nlocation_id = 10\n\
         [[feed]]\nname = \"used\"\ninbox = \"used\"\nlocation_id = 10\nmode = \"{used_mode}\"\n"
    );
    site.write_config(&sb.base_url(), 1000, "", "", &feeds);

    let new1 = site.export("new1.csv", &cars(0..10));
    let (status, stdout, stderr) = run(&site, &["sync", "--feed", "new"], &[&new1]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("created 10,"), "{stdout}");

    let used1 = site.path().join("used1.xml");
    std::fs::write(&used1, xml(&cars([100, 101, 102, 103, 5]))).unwrap();
    let (status, stdout, stderr) = run(&site, &["sync", "--feed", "used"], &[&used1]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 listed by another feed of the lot too"),
        "{stdout}\n{stderr}"
    );
    assert_eq!(sold(&state(&sb).await), 0, "{stdout}");

    let new2 = site.export("new2.csv", &cars([0, 1, 2, 3, 4, 6, 7, 8]));
    let (status, stdout, stderr) = run(&site, &["sync", "--feed", "new"], &[&new2]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    let st = state(&sb).await;
    assert!(is_sold(&st, 9), "new's own, left out: sold: {stdout}");
    assert!(!is_sold(&st, 5), "used lists it too: {stdout}");
    assert_eq!(sold(&st), 1, "none of used's cars: {stdout}");

    let (status, stdout, stderr) = run(&site, &["validate"], &[]).await;
    assert_eq!(
        status, 0,
        "validate accepts what sync does: {stdout}\n{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_full_feeds_on_one_location_sell_only_their_own() {
    two_feeds_on_one_location("own-two-full", "full").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_and_a_delta_feed_on_one_location_sell_only_their_own() {
    two_feeds_on_one_location("own-full-delta", "delta").await;
}

/// A feed renamed in the config keeps its cars and what it applied: after `main` is renamed
/// `used`, an old export delivered again is still held as one, and a car the old name owned
/// is sold by the new name's next export that leaves it out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_feed_keeps_its_cars_and_its_applied_files() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("ownership-rename", &sb.base_url());
    let day1 = site.export("day1.csv", &cars(0..10));
    let mut day2_cars = cars(0..10);
    day2_cars[0].price += 700;
    let day2 = site.export("day2.csv", &day2_cars);
    for file in [&day1, &day2] {
        let (status, stdout, stderr) = run(&site, &["sync"], &[file]).await;
        assert_eq!(status, 0, "{stdout}\n{stderr}");
    }
    let renamed = common::MAIN_FEED.replace("name = \"main\"", "name = \"used\"");
    site.write_config(&sb.base_url(), 1000, "", "", &renamed);

    let again = site.path().join("day1-again.csv");
    std::fs::copy(&day1, &again).unwrap();
    let (status, stdout, stderr) = run(&site, &["sync"], &[&again]).await;
    assert!(
        stdout.contains("HELD") && stdout.contains("day1.csv"),
        "the old export is still known after the rename: {status}\n{stdout}\n{stderr}"
    );

    let day3 = site.export("day3.csv", &day2_cars[..9]);
    let (status, stdout, stderr) = run(&site, &["sync"], &[&day3]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("sold 1,"),
        "the renamed feed sells the car its old name owned: {stdout}"
    );
    let st = state(&sb).await;
    assert!(is_sold(&st, 9), "{st:#}");
}

/// A delta feed renamed in the config keeps its cars though it applies no snapshot: after
/// `used` (delta) is renamed `used-cars`, the full feed of the same lot, leaving out the used
/// cars as it always does, sells none of them (it would, were they owned by a feed the config
/// no longer has).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_delta_feed_keeps_its_cars() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("ownership-rename-delta", &sb.base_url());
    site.feed_inbox("new");
    site.feed_inbox("used");
    let feeds = |used: &str| {
        format!(
            "[[feed]]\nname = \"new\"\ninbox = \"new\"\nlocation_id = 10\n\
             [[feed]]\nname = \"{used}\"\ninbox = \"used\"\nlocation_id = 10\nmode = \"delta\"\n"
        )
    };
    site.write_config(&sb.base_url(), 1000, "", "", &feeds("used"));
    let new1 = site.export("new1.csv", &cars(0..20));
    let (status, stdout, stderr) = run(&site, &["sync", "--feed", "new"], &[&new1]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    let used1 = site.path().join("used1.xml");
    std::fs::write(&used1, xml(&cars([100, 101, 102]))).unwrap();
    let (status, stdout, stderr) = run(&site, &["sync", "--feed", "used"], &[&used1]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");

    site.write_config(&sb.base_url(), 1000, "", "", &feeds("used-cars"));
    let (mut stdout, mut stderr) = (String::new(), String::new());
    // Two files in a row: past the default grace of `sold_after_absent`.
    for day in 2..4 {
        let mut new = cars(0..20);
        new[0].price += day;
        let file = site.export(&format!("new{day}.csv"), &new);
        let status;
        (status, stdout, stderr) = run(&site, &["sync", "--feed", "new"], &[&file]).await;
        assert_eq!(status, 0, "{stdout}\n{stderr}");
    }
    let st = state(&sb).await;
    assert_eq!(
        sold(&st),
        0,
        "none of the renamed delta feed's cars: {stdout}\n{stderr}"
    );
    assert!(!is_sold(&st, 100) && !is_sold(&st, 102), "{stdout}");
}

/// A feed added to the config later, beside a service that already holds its lot's cars (a
/// dealer group bringing its second rooftop to lotsync): its first file is planned against the
/// service's list like the very first one, so the cars there are adopted, not created again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_added_later_adopts_the_cars_the_service_holds() {
    let sb = sandbox_with(Behaviour::default()).await;
    let api = client(&sb);
    for (n, location) in (0..20).map(|n| (n, 10)).chain((100..110).map(|n| (n, 11))) {
        let mut payload = VehiclePayload::new(location, format!("S{n:05}"), feedgen::vin(n));
        payload.year = Some(2020);
        api.upsert_vehicle(&payload).await.unwrap();
    }
    let site = Site::new("own-feed-added", &sb.base_url());
    site.feed_inbox("lot10");
    site.feed_inbox("lot11");
    let one = "[[feed]]\nname = \"lot10\"\ninbox = \"lot10\"\nlocation_id = 10\n";
    site.write_config(&sb.base_url(), 1000, "", "", one);
    let lot10 = site.export("lot10.csv", &cars(0..20));
    let (status, stdout, stderr) = run(&site, &["sync", "--feed", "lot10"], &[&lot10]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");

    let two = format!("{one}[[feed]]\nname = \"lot11\"\ninbox = \"lot11\"\nlocation_id = 11\n");
    site.write_config(&sb.base_url(), 1000, "", "", &two);
    let lot11 = site.export("lot11.csv", &cars(100..110));
    let (status, stdout, stderr) = run(&site, &["sync", "--feed", "lot11"], &[&lot11]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("created 0,"), "{stdout}\n{stderr}");
    let st = state(&sb).await;
    let vehicles = st["vehicles"].as_array().map_or(0, Vec::len);
    assert_eq!(vehicles, 30, "no car of lot 11 created twice: {stdout}");
}
