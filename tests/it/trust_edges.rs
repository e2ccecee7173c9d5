//! Three edge cases of trust, as real processes against the sandbox on loopback, real
//! folders and a real state:
//! - a DMS writing in place that pauses longer than the settle time right after a line
//!   break, the file still open: nothing is taken until the writer closes it, so nothing is
//!   sold; an empty file filled after the settle time waits and is applied, never failed;
//! - a create answered with only another vehicle's id: that id is not bound, and the next
//!   day's sale reaches the right car; a sale answered with another VIN stops delivery,
//!   naming both VINs;
//! - during a fatal stop (a 401 mid-delivery) the draft report in `processing/` says what
//!   the service acknowledged and what stays queued.

use crate::common;

use common::fleet::{export, Car};
use common::site::{code, drop_file, reports, text, Site};
use common::{feedgen, sandbox_with, set_faults, sold, state, vehicles, MAIN_FEED};
use lotsync::sandbox::{Behaviour, Faults};
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// VIN → (id, sold) as the sandbox holds them.
fn held(st: &Value) -> std::collections::HashMap<String, (u64, bool)> {
    st["vehicles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["vehicle"]["vin"].as_str().unwrap().to_owned(),
                (
                    v["vehicle"]["id"].as_u64().unwrap(),
                    v["vehicle"]["status"] == "sold",
                ),
            )
        })
        .collect()
}

/// (4) A file written in place whose writer pauses longer than the settle time right after
/// a line break, with the file still open: its bytes look whole, but it is not taken until
/// the writer closes it (the kernel's close-after-write), so none of the rows not yet written
/// is sold. An empty file filled after the settle time waits like a half-written one and is
/// applied once filled, never sent to `failed/`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_open_for_writing_is_not_taken_and_an_empty_file_waits() {
    let sb = sandbox_with(Behaviour::default()).await;
    // settle_secs = 0.3 (the site's); the writer pauses 1.5 s.
    let site = Site::with(
        "trust-open-writer",
        &sb.base_url(),
        1000,
        "",
        "incomplete_wait_secs = 60\n",
        MAIN_FEED,
    );
    let inbox = site.inbox();
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    let cars: Vec<Car> = (0..200).map(Car::new).collect();
    drop_file(&inbox, "day1.csv", export(&cars).as_bytes());
    site.wait_until(Duration::from_secs(30), "day1 archived", || {
        reports(&inbox, "archive").len() == 1
    })
    .await;
    assert_eq!(vehicles(&state(&sb).await), 200);

    // Day 2, written in place: 185 rows, a pause with the file open, then the last 15.
    let mut day2 = cars.clone();
    for car in &mut day2 {
        car.price += 50;
    }
    let body = export(&day2);
    let cut_at = body.match_indices('\n').nth(185).unwrap().0 + 1; // header + 185 rows
    let path = inbox.join("day2.csv");
    let mut file = std::fs::File::create(&path).unwrap();
    file.write_all(&body.as_bytes()[..cut_at]).unwrap();
    file.flush().unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let during = state(&sb).await;
    assert_eq!(
        sold(&during),
        0,
        "a file still open for writing was taken: the rows not yet written were sold\nlog:\n{}",
        site.log()
    );
    assert!(
        path.exists(),
        "taken while open for writing\nlog:\n{}",
        site.log()
    );
    file.write_all(&body.as_bytes()[cut_at..]).unwrap();
    drop(file); // the close-after-write
    site.wait_until(Duration::from_secs(30), "day2 archived", || {
        reports(&inbox, "archive").len() == 2
    })
    .await;
    let after = state(&sb).await;
    assert_eq!(sold(&after), 0, "nothing sold");
    let day2_report = reports(&inbox, "archive")
        .into_iter()
        .find(|r| r["file"] == "day2.csv")
        .unwrap();
    assert_eq!(day2_report["records"], 200, "taken whole: {day2_report:#}");
    assert_eq!(day2_report["counts"]["update"], 200, "{day2_report:#}");

    // An empty file (created and closed), filled after the settle time: it waits, then is
    // applied once, whole.
    let empty = inbox.join("day3.csv");
    std::fs::File::create(&empty).unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        reports(&inbox, "failed").is_empty(),
        "an empty file was failed at once: {:#?}",
        reports(&inbox, "failed")
    );
    let mut day3 = day2.clone();
    for car in &mut day3 {
        car.price += 50;
    }
    std::fs::write(&empty, export(&day3)).unwrap();
    site.wait_until(Duration::from_secs(30), "day3 archived", || {
        reports(&inbox, "archive").len() == 3
    })
    .await;
    let day3_report = reports(&inbox, "archive")
        .into_iter()
        .find(|r| r["file"] == "day3.csv")
        .unwrap();
    assert_eq!(day3_report["outcome"], "applied", "{day3_report:#}");
    assert_eq!(day3_report["counts"]["update"], 200, "{day3_report:#}");
    assert!(reports(&inbox, "failed").is_empty());
    assert_eq!(sold(&state(&sb).await), 0);
}

/// `lotsync sync FILE` on the site; its output.
async fn sync(site: &Site, file: &Path) -> std::process::Output {
    site.lotsync_within(&["sync", file.to_str().unwrap()], Duration::from_secs(60))
        .await
}

/// (6) A create answered with only `{"id": N}`, N another listed vehicle's id (a proxy or a
/// cache): N is not bound to the new vehicle; its own id is found by VIN, so the next day's
/// sale reaches it and not the other car. A sale answered with another vehicle's VIN stops
/// delivery, naming both VINs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_naming_only_an_id_is_not_trusted() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("trust-id-only", &sb.base_url());
    let cars: Vec<Car> = (0..10).map(Car::new).collect();
    let day1 = site.export("day1.csv", &cars);
    let out = sync(&site, &day1).await;
    assert_eq!(code(&out), 0, "{}{}", text(&out.stdout), text(&out.stderr));

    // The car the faults answer with: the one with the lowest id.
    let service = held(&state(&sb).await);
    let first_vin = service
        .iter()
        .min_by_key(|(_, (id, _))| *id)
        .map(|(vin, _)| vin.clone())
        .unwrap();

    // Day 2 adds car 10; the service's answer to its create is only the id of that car.
    set_faults(
        &sb,
        Faults {
            id_only: 1.0,
            ..Faults::default()
        },
    )
    .await;
    let with_new: Vec<Car> = (0..11).map(Car::new).collect();
    let day2 = site.export("day2.csv", &with_new);
    let out = sync(&site, &day2).await;
    let st = state(&sb).await;
    assert!(
        st["faults"]["id_only"].as_u64().unwrap_or(0) >= 1,
        "the fault was met: {:#}",
        st["faults"]
    );
    assert!(
        code(&out) == 0,
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    set_faults(&sb, Faults::default()).await;
    let service = held(&state(&sb).await);
    let new_vin = feedgen::vin(10);
    let export_out = site.lotsync(&["state", "export"]).await;
    let exported = text(&export_out.stdout);
    let bound = exported
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["vin"] == new_vin.as_str())
        .map(|v| v["service_id"].clone());
    assert_ne!(
        bound,
        Some(Value::from(service[&first_vin].0)),
        "car 10 bound to the id of {first_vin}\n{exported}"
    );

    // Day 3: car 10 is gone (sold on the lot). Its sale reaches car 10, not the other car.
    // (A new price too: the very bytes of day 1 would be held as an old export again.)
    let mut day3_cars = cars.clone();
    day3_cars[0].price += 100;
    let day3 = site.export("day3.csv", &day3_cars);
    let out = sync(&site, &day3).await;
    assert_eq!(code(&out), 0, "{}{}", text(&out.stdout), text(&out.stderr));
    let service = held(&state(&sb).await);
    assert!(
        !service[&first_vin].1,
        "{first_vin}, on the lot, was sold\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(service[&new_vin].1, "car 10 is sold");
    assert_eq!(sold(&state(&sb).await), 1);

    // Day 4: one more car is gone, and the answer to its sale names the other car: delivery stops
    // (exit 2) with both VINs said.
    set_faults(
        &sb,
        Faults {
            wrong_vehicle: 1.0,
            ..Faults::default()
        },
    )
    .await;
    let gone = cars
        .iter()
        .rev()
        .find(|c| feedgen::vin(c.n) != first_vin)
        .unwrap()
        .n;
    let kept: Vec<Car> = cars.iter().filter(|c| c.n != gone).cloned().collect();
    let day4 = site.export("day4.csv", &kept);
    let out = sync(&site, &day4).await;
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 2, "{said}");
    assert!(
        said.contains(&feedgen::vin(gone)) && said.contains(&first_vin),
        "both VINs said: {said}"
    );
}

/// (9) A 401 in the middle of a file's delivery: the draft report left in `processing/` says
/// what the service acknowledged so far and what stays queued, not "applied" with the plan's
/// counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_during_a_fatal_stop_says_what_stays_queued() {
    let sb = sandbox_with(Behaviour::default()).await;
    // 10 requests/s: 40 creates take 4 s, time to revoke the token in the middle.
    let site = Site::with("trust-draft", &sb.base_url(), 10, "", "", MAIN_FEED);
    let token = site.use_token_file("sandbox-token");
    let inbox = site.inbox();
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    let cars: Vec<Car> = (0..40).map(Car::new).collect();
    drop_file(&inbox, "a.csv", export(&cars).as_bytes());
    site.wait_until(Duration::from_secs(20), "some created", || {
        std::thread::sleep(Duration::from_millis(20));
        inbox.join("processing/a.csv.report.json").exists()
    })
    .await;
    let mut created = 0;
    for _ in 0..200 {
        created = vehicles(&state(&sb).await);
        if created >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!((5..40).contains(&created), "{created} created");
    lotsync::config::write_token_file(&token, "revoked-token").unwrap();
    daemon.signal("HUP");
    let mut st = Value::Null;
    for _ in 0..200 {
        st = site.status().await;
        if st["last_error"].as_str().is_some_and(|e| e.contains("401")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        st["last_error"].as_str().is_some_and(|e| e.contains("401")),
        "{st:#}\n{}",
        site.log()
    );
    let created = vehicles(&state(&sb).await) as u64;
    assert!(created < 40, "{created} created before the 401");
    let draft: Value =
        serde_json::from_slice(&std::fs::read(inbox.join("processing/a.csv.report.json")).unwrap())
            .unwrap();
    assert_ne!(draft["outcome"], "applied", "{draft:#}");
    assert_eq!(draft["counts"]["create"], created, "{draft:#}");
    assert_eq!(draft["still_queued"]["create"], 40 - created, "{draft:#}");
    assert_eq!(draft["undelivered"], 40 - created, "{draft:#}");

    // The token fixed: delivered, archived with the true counts.
    lotsync::config::write_token_file(&token, "sandbox-token").unwrap();
    daemon.signal("HUP");
    site.wait_until(Duration::from_secs(30), "a.csv archived", || {
        reports(&inbox, "archive").len() == 1
    })
    .await;
    let report = &reports(&inbox, "archive")[0];
    assert_eq!(report["outcome"], "applied", "{report:#}");
    assert_eq!(report["counts"]["create"], 40, "{report:#}");
    assert_eq!(report["undelivered"], 0, "{report:#}");
}
