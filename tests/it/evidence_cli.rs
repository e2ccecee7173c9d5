//! A car is sold only on evidence, as a dealer meets it: `lotsync sync` and `lotsync
//! run` as real processes against the sandbox on loopback, with a real state and real folders.
//! - Records of one vehicle inside one file are merged: one that lists it in stock keeps it,
//!   whatever order they come in; a record that says sold is read as one even when it lacks
//!   other fields; a record that was rejected but keeps a car counts as its presence.
//! - A snapshot is never as of a moment after it was seen, and a superseded file is not
//!   delivered for `status`.
//! - A file with the content of the last applied snapshot confirms it; one with the content
//!   of an older one is held, naming it.

use crate::common;

use common::feedgen;
use common::fleet::{export, Car, HEADER};
use common::site::{code, reports, run, text, vehicle, Site};
use common::{count, sandbox_with, state};
use lotsync::sandbox::Behaviour;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

fn cars(range: std::ops::Range<u64>) -> Vec<Car> {
    range.map(Car::new).collect()
}

/// Day 1 of ten cars, synced.
async fn day1(site: &Site) {
    let day1 = site.export("day1.csv", &cars(0..10));
    let (status, stdout, stderr) = run(site, &["sync"], &[&day1]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("created 10,"), "{stdout}");
}

/// Item 6: the export lists car 3 twice, first as the old deal (another stock number and
/// price, "Sold"), then as it is on the lot ("In Stock", a new price). The record that lists
/// it in stock keeps it, and is the one used: not sold, its stock number and price as that
/// record says; the report says which record was used and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sold_duplicate_before_the_in_stock_record_does_not_sell_the_car() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("evidence-duplicate", &sb.base_url());
    day1(&site).await;

    let vin = feedgen::vin(3);
    let mut today = cars(0..10);
    today[3].price += 500;
    let mut old_deal = Car::new(3);
    old_deal.sold = true;
    old_deal.price = 9_999;
    let old_line = old_deal.line().replace("S00003", "T00003");
    let mut body = String::from(HEADER);
    for (i, car) in today.iter().enumerate() {
        if i == 3 {
            body.push_str(&old_line); // line 5
        }
        body.push_str(&car.line()); // car 3 at line 6
    }
    let day2 = site.path().join("day2.csv");
    std::fs::write(&day2, body).unwrap();

    let (status, stdout, stderr) = run(&site, &["sync"], &[&day2]).await;
    assert!(status == 0 || status == 3, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("updated 1, sold 0,"),
        "the car the second record lists in stock is updated, not sold: {stdout}"
    );
    let st = state(&sb).await;
    let car = vehicle(&st, &vin);
    assert_eq!(car["vehicle"]["status"], "in-stock", "{st:#}");
    assert_eq!(car["payload"]["stock"], "S00003", "{st:#}");
    assert_eq!(
        count(&st, "POST /v1/inventory/{id}/sold", "200"),
        0,
        "{st:#}"
    );

    let all = reports(&site.inbox(), "archive");
    let report = all
        .iter()
        .find(|r| r["file"] == "day2.csv")
        .unwrap_or_else(|| panic!("day2.csv is filed with its report: {all:#?}"));
    let said = report.to_string();
    assert!(
        said.contains("line 5 says sold") && said.contains("this record is the one used"),
        "the report says which record was used and why: {report:#}"
    );
}

/// Item 9: a record that says "Sold" without its stock number is rejected (it cannot be sent),
/// and still read for what it says: the car is sold, not kept in stock by its own record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sold_record_without_its_stock_number_still_sells_the_car() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("evidence-sold-record", &sb.base_url());
    day1(&site).await;

    let vin = feedgen::vin(4);
    let mut today = cars(0..10);
    today[4].sold = true;
    let day2 = site.path().join("day2.csv");
    std::fs::write(&day2, export(&today).replace("S00004", "")).unwrap();

    let (status, stdout, stderr) = run(&site, &["sync"], &[&day2]).await;
    assert_eq!(status, 3, "a rejected record: exit 3\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("sold 1,"),
        "the record that says sold sells its car: {stdout}"
    );
    let st = state(&sb).await;
    assert_eq!(vehicle(&st, &vin)["vehicle"]["status"], "sold", "{st:#}");
    assert_eq!(
        count(&st, "POST /v1/inventory/{id}/sold", "200"),
        1,
        "{st:#}"
    );
}

/// Item 9: car 6 is sold, and a new car arrives with its stock number (numbers are reused)
/// in a record that is rejected (its VIN's check digit is wrong). That VIN is far from car
/// 6's: it stands for the new car, not car 6, so the stock number alone does not keep car 6
/// on the lot for ever. Car 6 is sold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_record_of_another_car_with_the_stock_number_does_not_keep_a_sold_one() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("evidence-reused-stock", &sb.base_url());
    day1(&site).await;

    let sold = feedgen::vin(6);
    let mut newcomer = feedgen::vin(6 + 7 * 33 * 33 * 33 + 5 * 33 * 33 + 3 * 33 + 1);
    let wrong = if newcomer.as_bytes()[8] == b'7' {
        "5"
    } else {
        "7"
    };
    newcomer.replace_range(8..9, wrong);
    let mut body = export(
        &cars(0..10)
            .into_iter()
            .filter(|c| c.n != 6)
            .collect::<Vec<_>>(),
    );
    body.push_str(&format!(
        "{newcomer},S00006,2024,Toyota,RAV4,\"$23,000\",12,In Stock,MAIN\n"
    ));
    let day2 = site.path().join("day2.csv");
    std::fs::write(&day2, body).unwrap();

    let (status, stdout, stderr) = run(&site, &["sync"], &[&day2]).await;
    assert_eq!(status, 3, "a rejected record: exit 3\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("sold 1,"),
        "car 6 is sold despite the other car's stock number: {stdout}"
    );
    let st = state(&sb).await;
    assert_eq!(vehicle(&st, &sold)["vehicle"]["status"], "sold", "{st:#}");
}

/// Item 7: with `sold_after_absent = 2`, a car absent (1), then listed only by a record that
/// was rejected but keeps it on the lot, then absent again, is absent once in a row, not
/// twice: the protected file counts as presence. It is not sold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protecting_record_resets_the_absent_count() {
    let sb = sandbox_with(Behaviour::default()).await;
    let feed = format!("{}sold_after_absent = 2\n", common::MAIN_FEED);
    let site = Site::with("evidence-grace", &sb.base_url(), 1000, "", "", &feed);
    let vin = feedgen::vin(5);
    let all = cars(0..10);
    let without: Vec<Car> = all.iter().filter(|c| c.n != 5).cloned().collect();
    let day1 = site.export("day1.csv", &all);
    let day2 = site.export("day2.csv", &without);
    // Day 3: car 5's record without its stock number: rejected, and it keeps the car.
    let day3 = site.path().join("day3.csv");
    std::fs::write(&day3, export(&all).replace("S00005", "")).unwrap();
    let mut day4_cars = without.clone();
    day4_cars[0].price += 100;
    let day4 = site.export("day4.csv", &day4_cars);
    for (file, expected) in [(&day1, 0), (&day2, 0), (&day3, 3), (&day4, 0)] {
        let (status, stdout, stderr) = run(&site, &["sync"], &[file]).await;
        assert_eq!(status, expected, "{}: {stdout}\n{stderr}", file.display());
        assert!(stdout.contains("sold 0,"), "{stdout}");
    }
    let st = state(&sb).await;
    assert_eq!(
        vehicle(&st, &vin)["vehicle"]["status"],
        "in-stock",
        "{st:#}"
    );
    assert_eq!(count(&st, "POST /v1/inventory/{id}/sold", "200"), 0);
}

/// Sets a file's modification time: `secs` from now (negative: in the past).
fn set_mtime(path: &Path, secs: i64) {
    let now = SystemTime::now();
    let at = match secs >= 0 {
        true => now + Duration::from_secs(secs.unsigned_abs()),
        false => now - Duration::from_secs(secs.unsigned_abs()),
    };
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(at).unwrap();
}

/// An export of `cars` beside the config, modified `secs` from now.
fn export_at(site: &Site, name: &str, cars: &[Car], secs: i64) -> PathBuf {
    let path = site.export(name, cars);
    set_mtime(&path, secs);
    path
}

fn report_of(inbox: &Path, folder: &str, file: &str) -> Option<serde_json::Value> {
    reports(inbox, folder)
        .into_iter()
        .find(|r| r["file"] == file)
}

/// Item 1: day 1 and day 2 applied, then day 1's export arrives again with a fresh
/// modification time (an FTP re-upload). It is the same content as an older applied snapshot:
/// held, not applied, its reason naming day1.csv and what releasing it would do; `release`
/// is the way out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_export_delivered_again_is_held_not_applied() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("evidence-redelivered", &sb.base_url());
    let day1 = export_at(&site, "day1.csv", &cars(0..10), -7200);
    let mut day2_cars = cars(0..8);
    day2_cars[0].price += 700;
    day2_cars.push(Car::new(10));
    let day2 = export_at(&site, "day2.csv", &day2_cars, -3600);
    for file in [&day1, &day2] {
        let (status, stdout, stderr) = run(&site, &["sync"], &[file]).await;
        assert_eq!(status, 0, "{stdout}\n{stderr}");
    }
    assert!(common::sold(&state(&sb).await) == 2);

    let again = site.path().join("day1-again.csv");
    std::fs::copy(&day1, &again).unwrap();
    let (status, stdout, stderr) = run(&site, &["sync"], &[&again]).await;
    assert!(stdout.contains("HELD"), "{status}\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("day1.csv") && stdout.contains("2 back in stock"),
        "the reason names the file it matches and what releasing would do: {stdout}"
    );
    let st = state(&sb).await;
    assert_eq!(common::sold(&st), 2, "nothing reverted: {st:#}");
    assert_eq!(count(&st, "POST /v1/inventory/{id}/in-stock", "200"), 0);

    let out = site.lotsync(&["release", again.to_str().unwrap()]).await;
    assert_eq!(code(&out), 0, "{}{}", text(&out.stdout), text(&out.stderr));
    let (status, stdout, stderr) = run(&site, &["sync"], &[&again]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    let st = state(&sb).await;
    assert_eq!(count(&st, "POST /v1/inventory/{id}/in-stock", "200"), 2);
}

/// Item 2: Sunday applied; Monday's export (half the lot) held by the safety guard; Tuesday's
/// has the same content as Sunday's (a re-drop, nothing to send). Tuesday still confirms the
/// lot as of Tuesday: releasing Monday's file after it is refused as superseded, nothing sold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identical_redrop_is_newer_than_a_held_file() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("evidence-redrop", &sb.base_url());
    let sunday = export_at(&site, "sunday.csv", &cars(0..40), -7200);
    let (status, stdout, stderr) = run(&site, &["sync"], &[&sunday]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    let inbox = site.inbox();
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    let monday = inbox.join(".monday.tmp");
    std::fs::write(&monday, export(&cars(0..25))).unwrap();
    set_mtime(&monday, -3600);
    std::fs::rename(&monday, inbox.join("monday.csv")).unwrap();
    site.wait_until(Duration::from_secs(20), "monday.csv held", || {
        report_of(&inbox, "held", "monday.csv").is_some()
    })
    .await;
    common::site::drop_file(&inbox, "tuesday.csv", export(&cars(0..40)).as_bytes());
    site.wait_until(Duration::from_secs(20), "tuesday.csv filed", || {
        report_of(&inbox, "archive", "tuesday.csv").is_some()
    })
    .await;
    let tuesday = report_of(&inbox, "archive", "tuesday.csv").unwrap();
    assert_eq!(tuesday["outcome"], "already_applied", "{tuesday:#}");

    let held = inbox.join("held/monday.csv");
    let out = site.lotsync(&["release", held.to_str().unwrap()]).await;
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 2, "refused: {said}");
    assert!(said.contains("tuesday.csv"), "names the newer file: {said}");
    assert!(held.exists(), "still held");
    assert_eq!(common::sold(&state(&sb).await), 0, "nothing sold");
}

/// Item 8: an export whose modification time is two days ahead (a DMS with a wrong clock) is
/// taken as of the moment it was seen, with a warning in the log and in `status`: the next
/// day's export is applied after it, not superseded until that date passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_dated_in_the_future_does_not_supersede_the_next_one() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("evidence-future", &sb.base_url());
    let ahead = export_at(&site, "day1.csv", &cars(0..10), 2 * 24 * 3600);
    let (status, stdout, stderr) = run(&site, &["sync"], &[&ahead]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("created 10,"), "{stdout}");
    assert!(
        stderr.contains("in the future"),
        "the clamp is logged: {stderr}"
    );
    let (check, figures) = site.status_check().await;
    let summary = figures["check"]["summary"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert_eq!(check, 1, "WARNING: {figures:#}");
    assert!(
        summary.contains("day1.csv") && summary.contains("in the future"),
        "status says so: {summary}"
    );

    let mut day2 = cars(0..9);
    day2.push(Car::new(10));
    let next = site.export("day2.csv", &day2);
    let (status, stdout, stderr) = run(&site, &["sync"], &[&next]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("created 1, updated 0, sold 1,"),
        "the next day's export is applied: {stdout}"
    );
    let st = state(&sb).await;
    assert_eq!(vehicle(&st, &feedgen::vin(9))["vehicle"]["status"], "sold");
}

/// Item 8: a superseded file is not delivered: `status` says the feed's newest file was
/// superseded (nothing of it sent) instead of OK.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_does_not_count_a_superseded_file_as_delivered() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("evidence-superseded", &sb.base_url());
    let tuesday = export_at(&site, "tuesday.csv", &cars(0..10), -3600);
    let monday = export_at(&site, "monday.csv", &cars(0..9), -7200);
    let (status, stdout, stderr) = run(&site, &["sync"], &[&tuesday]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert_eq!(site.status_check().await.0, 0);
    let (_, stdout, stderr) = run(&site, &["sync"], &[&monday]).await;
    assert!(stdout.contains("superseded"), "{stdout}\n{stderr}");
    let (check, figures) = site.status_check().await;
    let summary = figures["check"]["summary"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert_eq!(check, 1, "WARNING: {figures:#}");
    assert!(
        summary.contains("monday.csv") && summary.contains("superseded"),
        "status names the superseded file: {summary}"
    );
}
