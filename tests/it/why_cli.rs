//! `lotsync why` as a dealer meets it: real `lotsync sync`, `reconcile`, `run` and
//! `why` processes against the sandbox on loopback, with a real state on disk. A car created,
//! repriced, sold by absence, back in stock, kept on the lot by a rejected record and
//! re-created by the reconciliation: each event with its file and the service's answer; a VIN
//! never seen says where it was looked for; the history is read through a running daemon, and
//! told again by a rebuild of a lost state.

use crate::common;

use common::feedgen;
use common::fleet::{export, Car};
use common::site::{code, text, Site};
use common::{delete_vehicle, edit_vehicle, sandbox_with, state};
use lotsync::sandbox::Behaviour;
use std::time::Duration;

/// Runs `lotsync ARGS` to the end: (exit code, stdout, stderr).
async fn run(site: &Site, args: &[&str]) -> (i32, String, String) {
    let out = site.lotsync_within(args, Duration::from_secs(60)).await;
    (code(&out), text(&out.stdout), text(&out.stderr))
}

/// Writes `contents` beside the config as `name` and syncs it; returns the exit code.
async fn sync(site: &Site, name: &str, contents: &str) -> i32 {
    let path = site.path().join(name);
    std::fs::write(&path, contents).unwrap();
    let (status, stdout, stderr) = run(site, &["sync", path.to_str().unwrap()]).await;
    assert!(status == 0 || status == 3, "{stdout}\n{stderr}");
    status
}

/// `lotsync why ARGS` in text: its output, which must exit 0.
async fn why(site: &Site, args: &[&str]) -> String {
    let mut all = vec!["why"];
    all.extend_from_slice(args);
    let (status, stdout, stderr) = run(site, &all).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    stdout
}

/// The line of `text` holding `needle`, or the test fails showing the whole text.
fn line_with<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{text}"))
}

/// The VIN with its check digit (9th character) mistyped: the record is rejected.
fn check_digit_typo(vin: &str) -> String {
    let mut chars: Vec<char> = vin.chars().collect();
    chars[8] = if chars[8] == '7' { '3' } else { '7' };
    chars.into_iter().collect()
}

/// The story of four cars over three days and a reconciliation, each told by `why` with the
/// right file, line and answer, newest first; by stock number too, and as JSON; a VIN never
/// seen says so and where it was looked for; and all of it again through a running daemon,
/// from a new process (the history is in the state on disk).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_tells_each_event_of_a_car_with_its_file_and_answer() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("why-story", &sb.base_url());
    let cars: Vec<Car> = (0..12).map(Car::new).collect();
    let vin = |n: u64| feedgen::vin(n);

    // Day 1: twelve cars created. Lines: the header is 1, car n is n + 2.
    assert_eq!(sync(&site, "day1.csv", &export(&cars)).await, 0);
    // Day 2: car 1 repriced, car 2 left out (sold by absence), car 3's VIN mistyped (its
    // record is rejected and keeps it on the lot). Car 3 is on line 4 now.
    let mut day2: Vec<Car> = cars.clone();
    day2[1].price += 500;
    day2.remove(2);
    let day2_text = export(&day2).replace(&vin(3), &check_digit_typo(&vin(3)));
    assert_eq!(sync(&site, "day2.csv", &day2_text).await, 3);
    // Day 3: all of them again, car 1 at its new price: car 2 back in stock.
    let mut day3 = cars.clone();
    day3[1].price += 500;
    assert_eq!(sync(&site, "day3.csv", &export(&day3)).await, 0);
    // Car 4 deleted on the service behind lotsync's back: the reconciliation re-creates it.
    let st = state(&sb).await;
    let id4 = st["vehicles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vehicle"]["vin"] == vin(4))
        .and_then(|v| v["vehicle"]["id"].as_u64())
        .unwrap();
    delete_vehicle(&sb, id4).await;
    let (status, stdout, stderr) = run(&site, &["reconcile"]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");

    // Created, then repriced: each with its file, line and the service's answer.
    let car1 = why(&site, &[&vin(1)]).await;
    let created = line_with(&car1, "day1.csv line 3 listed it, new");
    assert!(created.contains("create it on the service"), "{car1}");
    let repriced = line_with(&car1, "day2.csv line 3 listed it changed (price.selling ");
    assert!(repriced.contains("update it"), "{car1}");
    assert!(
        car1.find("day2.csv line 3").unwrap() < car1.find("day1.csv line 3").unwrap(),
        "newest first:\n{car1}"
    );
    let accepted: Vec<&str> = car1
        .lines()
        .filter(|l| l.contains("the service accepted operation"))
        .collect();
    assert_eq!(accepted.len(), 2, "{car1}");
    assert!(
        car1.contains("On the service, as last acknowledged"),
        "{car1}"
    );
    assert!(car1.contains(", in stock"), "{car1}");
    let update = line_with(&car1, " update, queued ");
    assert!(update.contains("by day2.csv: accepted"), "{car1}");
    assert!(update.contains("HTTP 200"), "{car1}");

    // Sold by absence on day 2 (the guard's verdict said), back in stock on day 3.
    let car2 = why(&site, &[&vin(2)]).await;
    line_with(
        &car2,
        "day2.csv left it out (1 file in a row): sold by absence, the safety guard let the file through",
    );
    line_with(
        &car2,
        "day3.csv line 4 lists it on the lot again: back in stock",
    );
    assert!(line_with(&car2, " mark sold, queued ").contains("by day2.csv: accepted"));
    assert!(line_with(&car2, " back in stock, queued ").contains("by day3.csv: accepted"));

    // Kept on the lot by its rejected record on day 2: not sold, not changed.
    let car3 = why(&site, &[&vin(3)]).await;
    let kept = line_with(
        &car3,
        "day2.csv left it out, but its rejected record at line 4",
    );
    assert!(kept.contains("not sold"), "{car3}");
    assert!(!car3.contains("sold by absence"), "{car3}");

    // Re-created by the reconciliation, and answered.
    let car4 = why(&site, &[&vin(4)]).await;
    let recreated = line_with(&car4, "the reconciliation: not on the service any more");
    assert!(recreated.contains("create it again"), "{car4}");
    let ops: Vec<&str> = car4
        .lines()
        .filter(|l| l.contains(" create, queued "))
        .collect();
    assert_eq!(ops.len(), 2, "day 1's and the reconciliation's: {car4}");
    assert!(ops.iter().all(|l| l.contains(": accepted")), "{car4}");

    // By stock number: the same car.
    let by_stock = why(&site, &["s00002"]).await;
    assert!(
        by_stock.starts_with(&format!("VIN {}, stock S00002", vin(2))),
        "{by_stock}"
    );

    // As JSON, for tools: the events newest first, with their files.
    let json = why(&site, &[&vin(2), "--format", "json"]).await;
    let answer: serde_json::Value = serde_json::from_str(&json).unwrap();
    let events = answer["vehicles"][0]["events"].as_array().unwrap();
    assert_eq!(events[0]["kind"], "answered", "{json}");
    assert_eq!(events[1]["file"], "day3.csv", "{json}");
    assert_eq!(events[1]["line"], 4, "{json}");
    assert_eq!(events[1]["kind"], "queued", "{json}");
    assert_eq!(events[1]["event"]["o"], "in_stock", "{json}");

    // A VIN never seen: exit 1, and where it was looked for.
    let never = feedgen::vin(9_999);
    let (status, stdout, stderr) = run(&site, &["why", &never]).await;
    assert_eq!(status, 1, "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!(
            "lotsync knows no vehicle with VIN or stock number {never}"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("Looked in:"), "{stdout}");
    assert!(
        stdout.contains("12 vehicles of organization 100"),
        "{stdout}"
    );

    // `--online`: the service's view now, and where it differs from what was sent.
    let car1_id = st["vehicles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vehicle"]["vin"] == vin(1))
        .and_then(|v| v["vehicle"]["id"].as_u64())
        .unwrap();
    let online = why(&site, &[&vin(1), "--online"]).await;
    let now = line_with(&online, "On the service now:");
    assert!(
        now.ends_with("in stock; as lotsync last sent it"),
        "{online}"
    );
    edit_vehicle(&sb, car1_id, serde_json::json!({"price": 1})).await;
    let online = why(&site, &[&vin(1), "--online"]).await;
    let now = line_with(&online, "On the service now:");
    assert!(
        now.ends_with("differs from what lotsync sent: price.selling"),
        "{online}"
    );

    // Through the running daemon, which holds the state: the same story.
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    let through = why(&site, &[&vin(2)]).await;
    assert_eq!(through, car2, "the daemon tells the same story");
    daemon.signal("TERM");
    daemon.exit(Duration::from_secs(20)).await;

    // The state lost: `reconcile --rebuild` tells the story again from the archived exports
    // and their reports (`sync` filed a copy of each).
    std::fs::remove_dir_all(site.state_dir()).unwrap();
    let (status, stdout, stderr) = run(&site, &["reconcile", "--rebuild"]).await;
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    let told = "(told again from the archive by a rebuild of the state)";
    let car2 = why(&site, &[&vin(2)]).await;
    for event in [
        "day1.csv line 4 listed it, new: created",
        "day2.csv left it out: sold by absence",
        "day3.csv line 4 lists it on the lot again: back in stock",
    ] {
        assert!(line_with(&car2, event).ends_with(told), "{car2}");
    }
    assert!(
        car2.find("day3.csv").unwrap() < car2.find("day2.csv").unwrap(),
        "newest first:\n{car2}"
    );
    let car3 = why(&site, &[&vin(3)]).await;
    line_with(
        &car3,
        "day2.csv left it out, but its rejected record at line 4 stood for it",
    );
    assert!(!car3.contains("sold by absence"), "{car3}");
    let car1 = why(&site, &[&vin(1)]).await;
    line_with(&car1, "day2.csv line 3 listed it changed: updated");
}

/// "Why does it show that price?" The last file that listed a car, its line,
/// and per field the column, the value as written and what was sent, with what was left out
/// and why; read from the file's archived copy, also when a later file listed it unchanged
/// (found by its VIN in the location's latest snapshot), and a note when the copy is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_shows_where_each_field_of_the_last_listing_came_from() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("why-fields", &sb.base_url());
    let day1 = "\
VIN,Stock #,Year,Make,Model,Internet Price,Odometer,Ext Color,Int Color
1HGCM82633A004352,S1,2019,Honda,Accord,\"$21,880\",\"21,880\",Agate Black Metallic,Moonbeam Shimmer
1M8GDM9AXKP042788,S2,2020,Ford,F-150,\"$35,000\",1200,Oxford White,Ebony
";
    assert_eq!(sync(&site, "day1.csv", day1).await, 0);
    let car = why(&site, &["1HGCM82633A004352"]).await;
    let listed = line_with(
        &car,
        "The last file that listed it: day1.csv (feed main), line 2",
    );
    assert!(listed.contains(" UTC"), "{car}");
    line_with(
        &car,
        "internet_price: column \"Internet Price\" had \"$21,880\", sent price.internet 21880",
    );
    line_with(
        &car,
        "miles: column \"Odometer\" had \"21,880\", sent miles 21880",
    );
    line_with(
        &car,
        "exterior_color: column \"Ext Color\" had \"Agate Black Metallic\", sent exterior_color Black",
    );
    // Left out, with the mapper's reason after it.
    let left_out = "interior_color: column \"Int Color\" had \"Moonbeam Shimmer\", left out: ";
    let interior = line_with(&car, left_out);
    assert!(interior.trim().len() > left_out.len(), "{car}");
    // Before the history: the source comes first, the events after it.
    assert!(car.find("The last file").unwrap() < car.find("History, newest first").unwrap());

    // As JSON: the same, for tools.
    let json = why(&site, &["1HGCM82633A004352", "--format", "json"]).await;
    let answer: serde_json::Value = serde_json::from_str(&json).unwrap();
    let source = &answer["vehicles"][0]["source"];
    assert_eq!(source["file"], "day1.csv", "{json}");
    assert_eq!(source["record"]["line"], 2, "{json}");
    let miles = source["record"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == "miles")
        .unwrap();
    assert_eq!(miles["column"], "Odometer", "{json}");
    assert_eq!(miles["sent"][0][1], 21880, "{json}");

    // Day 2 lists it unchanged (a new line, another file): that file is the last that listed
    // it, its record found by VIN.
    let day2 = day1.replace(
        "1M8GDM9AXKP042788,S2,2020,Ford,F-150,\"$35,000\"",
        "1M8GDM9AXKP042788,S2,2020,Ford,F-150,\"$34,000\"",
    );
    let day2 = {
        let mut lines: Vec<&str> = day2.lines().collect();
        lines.swap(1, 2);
        lines.join("\n") + "\n"
    };
    assert_eq!(sync(&site, "day2.csv", &day2).await, 0);
    let car = why(&site, &["1HGCM82633A004352"]).await;
    line_with(
        &car,
        "The last file that listed it: day2.csv (feed main), line 3",
    );
    line_with(
        &car,
        "miles: column \"Odometer\" had \"21,880\", sent miles 21880",
    );

    // Its archived copy gone: said, with where it was looked for.
    let archive = site.inbox().join("archive");
    for day in std::fs::read_dir(&archive).unwrap() {
        for file in std::fs::read_dir(day.unwrap().path()).unwrap() {
            let path = file.unwrap().path();
            if path.file_name().unwrap().to_str().unwrap() == "day2.csv" {
                std::fs::remove_file(&path).unwrap();
            }
        }
    }
    let car = why(&site, &["1HGCM82633A004352"]).await;
    line_with(
        &car,
        "The last file that listed it: day2.csv (feed main), taken ",
    );
    line_with(
        &car,
        "Its record cannot be shown: its copy is not in the feed's archive",
    );
}
