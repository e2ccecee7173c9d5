//! `lotsync run` at the edges of the real world, as a real process watching real folders
//! against the sandbox on loopback:
//! - a file written in place that pauses mid-record is not taken until it is whole; one that
//!   stays cut is held with the reason, and released as it is; a much smaller snapshot is
//!   said in its report;
//! - names lotsync cannot file go to `failed/` without blocking the feed; names with control
//!   characters are escaped in the log; folders and outside links are said once;
//! - after a 401 or a 200 with an HTML page, a new token plus SIGHUP (or the service coming
//!   back) delivers everything, nothing stays queued;
//! - reports say what truly happened: a re-dropped applied file is "already applied", a file
//!   resumed after SIGKILL keeps what its first attempt found, and during an outage the
//!   counts are what the service acknowledged with the rest said to be queued.

use crate::common;

use common::fleet::{export, Car};
use common::site::{drop_file, reports, text, Site};
use common::{count, sandbox_with, set_behaviour, set_faults, sold, state, vehicles, MAIN_FEED};
use lotsync::sandbox::{Behaviour, Faults};
use serde_json::Value;
use std::io::Write;
use std::time::Duration;

/// The feed `main` of [`MAIN_FEED`], reading deltas.
fn delta() -> String {
    format!("{MAIN_FEED}mode = \"delta\"\n")
}

fn model_of(st: &Value, vin: &str) -> String {
    st["vehicles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vehicle"]["vin"] == vin)
        .map(|v| v["vehicle"]["model"].as_str().unwrap_or("").to_owned())
        .unwrap_or_default()
}

/// (3) A DMS writing in place that pauses longer than the settle time in the middle of a
/// record: nothing of the cut file is taken (no cut model sent, nothing sold); once whole it
/// is taken whole. One that stays cut is held with the reason and released as it is. A full
/// snapshot much smaller than the last is said in its report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_cut_in_its_last_record_waits_until_whole_or_is_held() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::with(
        "edges-incomplete",
        &sb.base_url(),
        1000,
        "",
        "incomplete_wait_secs = 2\n\n[notifications]\napplication_slug = \"inventory\"\n",
        MAIN_FEED,
    );
    let inbox = site.inbox();
    let _daemon = site.start();
    let cars: Vec<Car> = (0..40).map(Car::new).collect();
    drop_file(&inbox, "day1.csv", export(&cars).as_bytes());
    site.wait_until(Duration::from_secs(20), "day1 archived", || {
        reports(&inbox, "archive").len() == 1
    })
    .await;

    // Day 2 (every price cut by 100, the model in the last column) written in place,
    // pausing 1.5 s (the settle time is 0.3 s) inside the model of record 38 of 40: taken
    // then, the cut model would be sent and the two vehicles after it sold (5%, under the
    // safety guard).
    let mut cars = cars;
    for car in &mut cars {
        car.price -= 100;
    }
    let body = model_last(&cars);
    let line = model_last(&cars[37..38]).lines().nth(1).unwrap().to_owned();
    let model = line.rsplit(',').next().unwrap().to_owned();
    let cut_at = body.find(&line).unwrap() + line.len() - model.len() + 3;
    let cut_vin = common::feedgen::vin(37);
    // The writer closes the file during its pause (a file still open is not taken at all,
    // see tests/it/trust_edges.rs): its bytes alone say it is cut.
    let path = inbox.join("day2.csv");
    std::fs::write(&path, &body.as_bytes()[..cut_at]).unwrap();
    let before = state(&sb).await;
    // Seen and held back as incomplete (not merely not looked at yet), and nothing sent.
    let mut seen = serde_json::Value::Null;
    for _ in 0..100 {
        seen = site.status().await;
        let waiting = seen["feeds"][0]["waiting_incomplete"]
            .as_str()
            .unwrap_or("");
        if waiting.contains("day2.csv") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let waiting = seen["feeds"][0]["waiting_incomplete"]
        .as_str()
        .unwrap_or("");
    assert!(waiting.contains("day2.csv"), "{seen:#}");
    let during = state(&sb).await;
    assert_eq!(
        during["total_requests"], before["total_requests"],
        "nothing sent of a cut file"
    );
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(&body.as_bytes()[cut_at..]).unwrap();
    drop(file);
    site.wait_until(Duration::from_secs(20), "day2 archived", || {
        reports(&inbox, "archive").len() == 2
    })
    .await;
    let after = state(&sb).await;
    assert_eq!(sold(&after), 0, "nothing sold");
    assert_eq!(vehicles(&after), 40);
    assert_eq!(model_of(&after, &cut_vin), model, "never the cut value");
    let day2: Vec<Value> = reports(&inbox, "archive")
        .into_iter()
        .filter(|r| r["file"] == "day2.csv")
        .collect();
    assert_eq!(day2[0]["records"], 40, "taken whole: {:#}", day2[0]);
    assert!(
        site.log().contains("the file is not whole yet"),
        "{}",
        site.log()
    );

    // A file that stays cut (a full last record, but no line break after it): held after
    // 2 s unchanged, nothing sent; released, it is taken as it is.
    let mut body = export(&cars[..39]);
    body.pop();
    std::fs::write(inbox.join("stuck.csv"), &body).unwrap();
    site.wait_until(Duration::from_secs(20), "stuck.csv held", || {
        reports(&inbox, "held").len() == 1
    })
    .await;
    let held = &reports(&inbox, "held")[0];
    let reason = held["reasons"][0].as_str().unwrap();
    assert!(reason.contains("incomplete"), "{held:#}");
    assert!(
        reason.contains("releasing it takes it as it is"),
        "{held:#}"
    );
    assert_eq!(sold(&state(&sb).await), 0, "nothing of it sent");
    let out = site
        .lotsync(&["release", inbox.join("held/stuck.csv").to_str().unwrap()])
        .await;
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(sold(&state(&sb).await), 1, "the one car it lacks is sold");

    // A file that stays empty: nothing to release (`release` cannot read it), so filed in
    // failed/ with the reason, and the people on the service told, as of a held file.
    std::fs::File::create(inbox.join("empty.csv")).unwrap();
    site.wait_until(Duration::from_secs(20), "empty.csv failed", || {
        reports(&inbox, "failed")
            .iter()
            .any(|r| r["file"] == "empty.csv")
    })
    .await;
    let failed = reports(&inbox, "failed")
        .into_iter()
        .find(|r| r["file"] == "empty.csv")
        .unwrap();
    let said = failed.to_string();
    assert!(said.contains("the file is empty"), "{failed:#}");
    assert!(
        !said.contains("release"),
        "no advice that cannot work: {failed:#}"
    );
    let mut notes = String::new();
    for _ in 0..100 {
        notes = state(&sb).await["notifications"].to_string();
        if notes.contains("could not read") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(notes.contains("could not read"), "told: {notes}");
    assert!(notes.contains("empty.csv"), "told: {notes}");

    // Whole, but its last five records gone (under the guard's threshold): held as cut short.
    drop_file(&inbox, "day4.csv", export(&cars[..34]).as_bytes());
    site.wait_until(Duration::from_secs(20), "day4 held", || {
        reports(&inbox, "held")
            .iter()
            .any(|r| r["file"] == "day4.csv")
    })
    .await;
    let day4 = reports(&inbox, "held")
        .into_iter()
        .find(|r| r["file"] == "day4.csv")
        .unwrap();
    assert!(
        day4["reasons"]
            .to_string()
            .contains("leaves out the last 5 vehicles"),
        "{day4:#}"
    );
    assert_eq!(sold(&state(&sb).await), 1, "nothing of it sent");

    // Much smaller than the last snapshot, though under the guard's threshold, its cars gone
    // from the middle: sales, and said.
    let scattered: Vec<Car> = (cars[..30].iter().chain(&cars[35..39])).cloned().collect();
    drop_file(&inbox, "day5.csv", export(&scattered).as_bytes());
    site.wait_until(Duration::from_secs(20), "day5 archived", || {
        reports(&inbox, "archive")
            .iter()
            .any(|r| r["file"] == "day5.csv")
    })
    .await;
    let day5 = reports(&inbox, "archive")
        .into_iter()
        .find(|r| r["file"] == "day5.csv")
        .unwrap();
    let notes = day5["notes"].to_string();
    assert!(
        notes.contains("fewer than the last one applied"),
        "{day5:#}"
    );
}

/// (4, 5, 6) Names lotsync cannot file go to `failed/` under names that fit, each said once,
/// and the feed goes on; a name with a newline and an escape code is escaped in the log;
/// a folder and a link to outside the inbox are said once each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_names_never_block_a_feed_and_are_said_once_escaped() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::with(
        "edges-names",
        &sb.base_url(),
        1000,
        "",
        "\n[notifications]\napplication_slug = \"inventory\"\n",
        &delta(),
    );
    let inbox = site.inbox();
    std::fs::create_dir_all(inbox.join("a folder")).unwrap();
    let outside = site.path().join("outside.csv");
    std::fs::write(&outside, export(&[Car::new(99)])).unwrap();
    std::os::unix::fs::symlink(&outside, inbox.join("link.csv")).unwrap();
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;

    let long = format!("{}.csv", "x".repeat(250));
    std::fs::write(inbox.join(&long), export(&[Car::new(1)])).unwrap();
    let latin1 = OsStr::from_bytes(b"Citro\xebn.csv");
    std::fs::write(inbox.join(".tmp-latin1"), export(&[Car::new(2)])).unwrap();
    std::fs::rename(inbox.join(".tmp-latin1"), inbox.join(latin1)).unwrap();
    let evil = "evil\nfake=event \x1b[31mred.csv";
    drop_file(&inbox, evil, export(&[Car::new(3)]).as_bytes());
    for n in 0..5u64 {
        drop_file(
            &inbox,
            &format!("ok-{n}.csv"),
            export(&[Car::new(10 + n)]).as_bytes(),
        );
    }
    site.wait_until(Duration::from_secs(30), "6 archived, 2 failed", || {
        reports(&inbox, "archive").len() == 6 && reports(&inbox, "failed").len() == 2
    })
    .await;
    for _ in 0..3 {
        site.status().await;
    }
    let st = site.status().await;
    assert_eq!(st["feeds"][0]["failed"], 2, "{st:#}");
    assert_eq!(
        vehicles(&state(&sb).await),
        6,
        "the good files and the odd-named one"
    );
    for entry in std::fs::read_dir(inbox.join("failed")).unwrap() {
        let name = entry.unwrap().file_name();
        let name = name.to_str().expect("failed/ names are UTF-8");
        assert!(name.len() <= 255 && !name.contains('\n'), "{name}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = site.log();
    assert_eq!(
        log.matches("a file lotsync cannot take under its name")
            .count(),
        2,
        "{log}"
    );
    assert!(log.contains("Citro\\xebn.csv"), "{log}");
    assert_eq!(log.matches("a folder in the inbox").count(), 1, "{log}");
    assert_eq!(
        log.matches("a link to outside the inbox").count(),
        1,
        "{log}"
    );
    assert!(!log.contains('\x1b'), "no raw escape code in the log");
    assert!(
        !log.lines().any(|l| l.starts_with("fake=event")),
        "one event stays one line:\n{log}"
    );
    assert!(
        log.contains("evil\\nfake=event \\u{1b}[31mred.csv"),
        "{log}"
    );
    // Each file failed for its name is told to the service, once.
    let mut told = 0;
    for _ in 0..50 {
        let notes = state(&sb).await["notifications"].clone();
        told = notes.as_array().map_or(0, |n| {
            n.iter()
                .filter(|n| n.to_string().contains("could not read"))
                .count()
        });
        if told >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(told, 2, "{:#}", state(&sb).await["notifications"]);
}

/// (7, 8) A 401 stops delivery with the file's operations queued; a new token written to
/// the token file plus SIGHUP delivers them all. Then a 200 with an HTML page (a portal in
/// the way) stops it again, and once the service answers, nothing stays queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_fatal_stop_a_new_token_and_sighup_deliver_everything() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::with("edges-token", &sb.base_url(), 1000, "", "", &delta());
    let token = site.use_token_file("sandbox-token");
    let inbox = site.inbox();
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    drop_file(&inbox, "first.csv", export(&[Car::new(100)]).as_bytes());
    site.wait_until(Duration::from_secs(20), "first.csv archived", || {
        reports(&inbox, "archive").len() == 1
    })
    .await;
    // The token is revoked (and lotsync told of a new file, which is the old one).
    lotsync::config::write_token_file(&token, "revoked-token").unwrap();
    daemon.signal("HUP");
    let cars: Vec<Car> = (0..20).map(Car::new).collect();
    drop_file(&inbox, "a.csv", export(&cars).as_bytes());
    let mut st = Value::Null;
    for _ in 0..200 {
        st = site.status().await;
        if st["last_error"].as_str().is_some_and(|e| e.contains("401")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let error = st["last_error"].as_str().unwrap_or("");
    assert!(
        error.contains("401") && error.contains("systemctl reload"),
        "{st:#}\n{}\n{}",
        std::fs::read_to_string(&site.config).unwrap(),
        site.log()
    );
    assert_eq!(st["outbox_depth"], 20, "{st:#}");
    // Delivery stopped: CRITICAL for monitoring, since when in RFC 3339.
    let (code, st) = site.status_check().await;
    assert_eq!(code, 2, "{st:#}");
    let summary = st["check"]["summary"].as_str().unwrap_or_default();
    assert!(
        summary.starts_with(
            "LOTSYNC CRITICAL - delivery stopped: the service did not accept the API token (401) since "
        ) && summary.ends_with(" UTC"),
        "{st:#}"
    );
    let since = st["delivery"]["stopped"]["since"]
        .as_str()
        .unwrap_or_default();
    assert!(
        lotsync::clock::UtcTime::parse(since).is_some() && since.ends_with('Z'),
        "{st:#}"
    );
    let human = site.lotsync(&["status"]).await;
    assert_eq!(common::site::code(&human), 2);
    assert!(
        text(&human.stdout).starts_with(summary),
        "{}",
        text(&human.stdout)
    );

    lotsync::config::write_token_file(&token, "sandbox-token").unwrap();
    daemon.signal("HUP");
    site.wait_until(Duration::from_secs(20), "a.csv archived", || {
        reports(&inbox, "archive").len() == 2
    })
    .await;
    let report = &reports(&inbox, "archive")
        .into_iter()
        .find(|r| r["file"] == "a.csv")
        .unwrap();
    assert_eq!(report["counts"]["create"], 20, "{report:#}");
    assert_eq!(report["undelivered"], 0, "{report:#}");
    assert!(
        site.log().contains("the API token changed"),
        "{}",
        site.log()
    );

    // A portal answering 200 with an HTML page: fatal; the service back: all delivered.
    set_faults(
        &sb,
        Faults {
            html_200: 1.0,
            ..Faults::default()
        },
    )
    .await;
    let more: Vec<Car> = (20..30).map(Car::new).collect();
    drop_file(&inbox, "b.csv", export(&more).as_bytes());
    site.wait_until(Duration::from_secs(20), "the portal noticed", || {
        site.log().contains("not what the service sends")
    })
    .await;
    set_behaviour(&sb, &Behaviour::default()).await;
    daemon.signal("HUP");
    site.wait_until(Duration::from_secs(20), "b.csv archived", || {
        reports(&inbox, "archive").len() == 3
    })
    .await;
    let (code, st) = site.status_check().await;
    assert_eq!(st["outbox_depth"], 0, "nothing stays queued: {st:#}");
    assert_eq!(code, 0, "delivery works again: {st:#}");
    assert_eq!(vehicles(&state(&sb).await), 31);
}

/// An export of `cars` with the model in the last column.
fn model_last(cars: &[Car]) -> String {
    let mut text = String::from("VIN,Stock,Year,Make,Price,Miles,Status,Model\n");
    for car in cars {
        let line = car.line();
        let f: Vec<&str> = line.trim_end().split(',').collect();
        // VIN,Stock,Year,Make,Model,"$Price",Miles,Status,Lot
        text.push_str(&[f[0], f[1], f[2], f[3], f[5], f[6], f[7], f[4]].join(","));
        text.push('\n');
    }
    text
}

/// (9) Reports that are true: a re-dropped applied file is "already applied" (not
/// "resumed"); a file resumed after SIGKILL keeps its records, counts and rejected lines and
/// its notification is sent, and `status` never calls it "already applied" while it is
/// delivered; during an outage the counts are what the service acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_say_what_truly_happened() {
    let sb = sandbox_with(Behaviour {
        faults: Faults {
            latency_ms: 20,
            ..Faults::default()
        },
        ..Behaviour::default()
    })
    .await;
    let site = Site::with(
        "edges-reports",
        &sb.base_url(),
        1000,
        "give_up_after_secs = 2\nmax_attempts = 2\n",
        "\n[notifications]\napplication_slug = \"inventory\"\n",
        &delta(),
    );
    let inbox = site.inbox();
    let daemon = site.start();

    // 1,500 vehicles and two bad rows, killed in the middle of the delivery.
    let cars: Vec<Car> = (0..1500).map(Car::new).collect();
    let mut body = export(&cars);
    body.push_str(",NOSTOCK,2020,Ford,F-150,\"$1\",1,In Stock,MAIN\n");
    body.push_str(&format!(
        "{},,2020,Ford,F-150,\"$20000\",1,In Stock,MAIN\n",
        common::feedgen::vin(5000)
    ));
    drop_file(&inbox, "big.csv", body.as_bytes());
    let started = std::time::Instant::now();
    while vehicles(&state(&sb).await) < 300 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{}",
            site.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    daemon.signal("KILL");
    daemon.exit(Duration::from_secs(5)).await;
    assert!(vehicles(&state(&sb).await) < 1500, "killed before the end");

    let daemon = site.start();
    let mut outcomes = Vec::new();
    let started = std::time::Instant::now();
    while reports(&inbox, "archive").is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{}",
            site.log()
        );
        let st = site.status().await;
        if let Some(o) = st["feeds"][0]["last_file"]["outcome"].as_str() {
            outcomes.push(o.to_owned());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !outcomes.iter().any(|o| o == "already_applied"),
        "status while it is delivered: {outcomes:?}"
    );
    let report = &reports(&inbox, "archive")[0];
    assert_eq!(report["outcome"], "resumed", "{report:#}");
    assert_eq!(report["records"], 1502, "{report:#}");
    assert_eq!(report["counts"]["create"], 1500, "{report:#}");
    assert_eq!(
        report["rejected_records"].as_array().unwrap().len(),
        2,
        "{report:#}"
    );
    let after = state(&sb).await;
    assert_eq!(count(&after, "POST /v1/inventory", "201"), 1500);
    let notes = after["notifications"].to_string();
    assert!(
        notes.contains("big.csv"),
        "the rejected records are told: {notes}"
    );

    // The same bytes again: already applied, and said so.
    drop_file(&inbox, "big-again.csv", body.as_bytes());
    site.wait_until(Duration::from_secs(20), "big-again archived", || {
        reports(&inbox, "archive").len() == 2
    })
    .await;
    let again = reports(&inbox, "archive")
        .into_iter()
        .find(|r| r["file"] == "big-again.csv")
        .unwrap();
    assert_eq!(again["outcome"], "already_applied", "{again:#}");
    // Logged once the file is filed (its report is on disk a moment before).
    let done = |l: &&str| l.contains("big-again.csv") && l.contains("file done");
    site.wait_until(Duration::from_secs(5), "big-again logged", || {
        site.log().lines().any(|l| done(&l))
    })
    .await;
    let log = site.log();
    let line = log.lines().find(done).unwrap();
    assert!(
        line.contains("already applied") && !line.contains("resumed"),
        "{line}"
    );

    // An outage: every request fails; after 2 s delivery gives up and the file is filed with
    // what the service acknowledged (nothing) and what stays queued (20 creates).
    set_faults(
        &sb,
        Faults {
            http_503: 1.0,
            ..Faults::default()
        },
    )
    .await;
    let more: Vec<Car> = (2000..2020).map(Car::new).collect();
    drop_file(&inbox, "outage.csv", export(&more).as_bytes());
    site.wait_until(Duration::from_secs(60), "outage.csv archived", || {
        reports(&inbox, "archive")
            .iter()
            .any(|r| r["file"] == "outage.csv")
    })
    .await;
    let outage = reports(&inbox, "archive")
        .into_iter()
        .find(|r| r["file"] == "outage.csv")
        .unwrap();
    assert_eq!(outage["counts"]["create"], 0, "{outage:#}");
    assert_eq!(outage["planned"]["create"], 20, "{outage:#}");
    assert_eq!(outage["still_queued"]["create"], 20, "{outage:#}");
    let done = |l: &&str| l.contains("outage.csv") && l.contains("file done");
    site.wait_until(Duration::from_secs(5), "outage logged", || {
        site.log().lines().any(|l| done(&l))
    })
    .await;
    let log = site.log();
    let line = log.lines().find(done).unwrap();
    assert!(
        line.contains("0 created") && line.contains("still queued"),
        "{line}"
    );
    set_behaviour(&sb, &Behaviour::default()).await;
    daemon.signal("HUP");
    let mut depth = Value::Null;
    for _ in 0..200 {
        depth = site.status().await["outbox_depth"].clone();
        if depth == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(depth, 0, "delivered once the service is back");
    assert_eq!(vehicles(&state(&sb).await), 1520);
}

/// After a 401, the token file rotated without a reload is the token the
/// next try sends. Before, the try after the wait went out once more with the refused token
/// (another 401) before the file was read again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_401_the_next_try_reads_the_token_file_first() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::with("edges-token-retry", &sb.base_url(), 1000, "", "", &delta());
    let token = site.use_token_file("revoked-token");
    let inbox = site.inbox();
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    drop_file(&inbox, "a.csv", export(&[Car::new(1)]).as_bytes());
    // The refusal's own words: a bare "401" also turns up in the log's timestamps.
    site.wait_until(Duration::from_secs(20), "a 401", || {
        daemon_log_has(&site, "(401)")
    })
    .await;
    // Every route's 401s: an empty state reads the service's list first.
    let refused = || async {
        let st = state(&sb).await;
        st["requests"]
            .as_object()
            .map(|routes| routes.keys().map(|r| count(&st, r, "401")).sum::<u64>())
            .unwrap_or(0)
    };
    let before = refused().await;
    assert!(before >= 1, "{:#}", state(&sb).await);
    // Rotated in place, no SIGHUP: the daemon's next try (15 s on) must use it.
    lotsync::config::write_token_file(&token, "sandbox-token").unwrap();
    site.wait_until(Duration::from_secs(40), "a.csv archived", || {
        reports(&inbox, "archive").len() == 1
    })
    .await;
    assert_eq!(
        refused().await,
        before,
        "a try went out with the refused token\n{}",
        site.log()
    );
    assert_eq!(vehicles(&state(&sb).await), 1);
}

fn daemon_log_has(site: &Site, needle: &str) -> bool {
    site.log().contains(needle)
}

/// Idle connections to the control socket (its group may include the DMS's
/// account) cannot take the daemon's file descriptors. The daemon's limit is lowered to 200
/// and 300 idle connections are opened: the file dropped next is still applied, and `lotsync
/// status` answers once the idle ones are dropped. Before, every connection was accepted and
/// kept for 10 s, and the file failed with "Too many open files".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_control_connections_cannot_take_the_daemons_descriptors() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::with("edges-control-cap", &sb.base_url(), 1000, "", "", &delta());
    let inbox = site.inbox();
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    let limited = std::process::Command::new("prlimit")
        .arg(format!("--pid={}", daemon.child.id()))
        .arg("--nofile=200:200")
        .status()
        .expect("prlimit runs");
    assert!(limited.success());
    let idle: Vec<std::os::unix::net::UnixStream> = (0..300)
        .map(|_| std::os::unix::net::UnixStream::connect(site.socket()).expect("connects"))
        .collect();
    drop_file(
        &inbox,
        "a.csv",
        export(&[Car::new(1), Car::new(2)]).as_bytes(),
    );
    site.wait_until(Duration::from_secs(30), "a.csv archived", || {
        reports(&inbox, "archive").len() == 1
    })
    .await;
    assert!(reports(&inbox, "failed").is_empty(), "{}", site.log());
    let out = site
        .lotsync_within(&["status", "--format", "json"], Duration::from_secs(60))
        .await;
    assert!(
        (0..=2).contains(&common::site::code(&out)),
        "{}\n{}",
        text(&out.stderr),
        site.log()
    );
    assert!(
        !site.log().contains("Too many open files"),
        "{}",
        site.log()
    );
    drop(idle);
    assert_eq!(vehicles(&state(&sb).await), 2);
}
