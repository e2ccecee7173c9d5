//! `lotsync run` as a real process watching real folders, against the sandbox on loopback:
//! a dropped file reaches the service, a slowly written file is taken once and whole, SIGKILL
//! in the middle of 2,000 vehicles and a restart converge exactly, SIGTERM stops in time, a
//! truncated snapshot is held and released through the control socket, a burst of 200 files,
//! and a reload that adds a feed.

use crate::common;

use common::fleet::{export, Car, Expected};
use common::site::{drop_file, reports, text, Daemon, Site};
use common::{sandbox_with, state, stats, vehicles};
use lotsync::mapper::Profile;
use lotsync::sandbox::{Behaviour, Faults, RunningSandbox};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/feeds/samples/demo");

fn demo(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(DEMO).join(name)).unwrap()
}

/// A daemon with one feed at location 10 (`mode`: "full" or "delta") that has applied the
/// demo's Monday export.
async fn monday_applied(sb: &RunningSandbox, name: &str, mode: &str) -> (Site, PathBuf, Daemon) {
    let site = Site::with(
        name,
        &sb.base_url(),
        200,
        "",
        "",
        &format!(
            "[[feed]]\nname = \"main\"\ninbox = \"main\"\nlocation_id = 10\nmode = \"{mode}\"\n"
        ),
    );
    let inbox = site.feed_inbox("main");
    let daemon = site.start();
    drop_file(&inbox, "monday.csv", &demo("1-monday-full.csv"));
    site.wait_until(Duration::from_secs(20), "monday archived", || {
        reports(&inbox, "archive").len() == 1
    })
    .await;
    (site, inbox, daemon)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_file_reaches_the_service_and_a_slow_write_is_taken_once_whole() {
    let sb = sandbox_with(Behaviour::default()).await;
    let (site, inbox, daemon) = monday_applied(&sb, "daemon-drop", "delta").await;
    assert_eq!(vehicles(&state(&sb).await), 12);
    let (code, status) = site.status_check().await;
    assert_eq!(status["daemon"], true, "{status:#}");
    assert_eq!(status["feeds"][0]["last_file"]["name"], "monday.csv");
    assert_eq!(status["feeds"][0]["last_file"]["outcome"], "applied");
    // A monitoring check: OK, every time in RFC 3339 (UTC).
    assert_eq!(code, 0, "{status:#}");
    assert_eq!(status["check"]["state"], "OK", "{status:#}");
    for at in [
        &status["started_at"],
        &status["feeds"][0]["last_file"]["at"],
        &status["feeds"][0]["last_success"],
    ] {
        let at = at.as_str().unwrap_or_default();
        assert!(
            lotsync::clock::UtcTime::parse(at).is_some() && at.ends_with('Z') && at.contains('T'),
            "{at:?} in {status:#}"
        );
    }
    let human = site.lotsync(&["status"]).await;
    assert_eq!(common::site::code(&human), 0);
    let shown = text(&human.stdout);
    assert!(shown.starts_with("LOTSYNC OK - 1 feed; "), "{shown}");
    // The newest delivered file is older than a second's threshold: CRITICAL.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let stale = site.lotsync(&["status", "--stale-after", "0s"]).await;
    let shown = text(&stale.stdout);
    assert_eq!(common::site::code(&stale), 2, "{shown}");
    assert!(
        shown.starts_with("LOTSYNC CRITICAL - feed main: newest delivered file taken"),
        "{shown}"
    );

    // Written in place, slowly: 40 vehicles in 8 chunks, 50 ms apart (the settle time is
    // 300 ms: a machine six times slower still writes within it; the file is open meanwhile,
    // which alone keeps it from being taken). It must be taken once, whole.
    let cars: Vec<Car> = (100..140).map(Car::new).collect();
    let body = export(&cars);
    let lines: Vec<&str> = body.split_inclusive('\n').collect();
    let path = inbox.join("slow.csv");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&path).unwrap();
        for chunk in lines.chunks(lines.len().div_ceil(8)) {
            f.write_all(chunk.concat().as_bytes()).unwrap();
            f.flush().unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    site.wait_until(Duration::from_secs(20), "slow.csv archived", || {
        reports(&inbox, "archive").len() == 2
    })
    .await;
    let slow: Vec<Value> = reports(&inbox, "archive")
        .into_iter()
        .filter(|r| r["file"] == "slow.csv")
        .collect();
    assert_eq!(slow.len(), 1, "taken once");
    assert_eq!(slow[0]["records"], 40, "taken whole: {:#}", slow[0]);
    assert_eq!(slow[0]["counts"]["create"], 40);
    assert!(reports(&inbox, "failed").is_empty());
    assert_eq!(vehicles(&state(&sb).await), 52);

    daemon.signal("TERM");
    let (code, _) = daemon.exit(Duration::from_secs(10)).await;
    assert_eq!(code, Some(0));
    // Without the daemon, status reads the state.
    let status = site.status().await;
    assert_eq!(status["daemon"], false);
    assert_eq!(status["outbox_depth"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_in_the_middle_of_2000_vehicles_and_a_restart_converge_exactly() {
    let sb = sandbox_with(Behaviour {
        strict_transitions: true,
        faults: Faults {
            seed: 5,
            http_503: 0.05,
            ack_lost: 0.02,
            ..Faults::default()
        },
        ..Behaviour::default()
    })
    .await;
    let site = Site::with(
        "daemon-sigkill",
        &sb.base_url(),
        300,
        "",
        "",
        "[[feed]]\nname = \"main\"\ninbox = \"main\"\nlocation_id = 10\n",
    );
    let inbox = site.feed_inbox("main");
    let mut expected = Expected::default();
    let daemon = site.start();
    let cars: Vec<Car> = (0..2000).map(Car::new).collect();
    let day1 = drop_file(&inbox, "day1.csv", export(&cars).as_bytes());
    let copy = site.dir.path().join("day1.csv");
    std::fs::copy(&day1, &copy).unwrap();
    expected.full(&copy, &Profile::auto());

    // Killed once the service holds some hundreds of them.
    let start = Instant::now();
    loop {
        let n = vehicles(&state(&sb).await);
        if n >= 400 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{}", site.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    daemon.signal("KILL");
    daemon.exit(Duration::from_secs(5)).await;
    let held = vehicles(&state(&sb).await);
    assert!(held < 2000, "killed before the end ({held})");
    let waiting: Vec<_> = std::fs::read_dir(inbox.join("processing"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        waiting.contains(&"day1.csv".to_owned())
            && waiting
                .iter()
                .all(|n| n == "day1.csv" || n == "day1.csv.report.json"),
        "the file waits in processing/, with the draft of its report: {waiting:?}"
    );

    let daemon = site.start();
    site.wait_until(Duration::from_secs(60), "day1 archived", || {
        !reports(&inbox, "archive").is_empty()
    })
    .await;
    expected.assert_matches(&state(&sb).await);
    let report = &reports(&inbox, "archive")[0];
    assert_eq!(report["outcome"], "resumed", "{report:#}");
    assert!(site.log().contains("resuming a file"));

    // A next-day file through the restarted daemon: 100 gone, 50 new.
    let mut cars = cars;
    cars.retain(|c| c.n % 20 != 3);
    cars.extend((2000..2050).map(Car::new));
    let day2 = site.dir.path().join("day2.csv");
    std::fs::write(&day2, export(&cars)).unwrap();
    expected.full(&day2, &Profile::auto());
    drop_file(&inbox, "day2.csv", &std::fs::read(&day2).unwrap());
    site.wait_until(Duration::from_secs(60), "day2 archived", || {
        reports(&inbox, "archive").len() == 2
    })
    .await;
    expected.assert_matches(&state(&sb).await);
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_within_ten_seconds_and_the_next_start_finishes() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::with(
        "daemon-sigterm",
        &sb.base_url(),
        100,
        "",
        "",
        "[[feed]]\nname = \"main\"\ninbox = \"main\"\nlocation_id = 10\n",
    );
    let inbox = site.feed_inbox("main");
    let daemon = site.start();
    let cars: Vec<Car> = (0..1500).map(Car::new).collect();
    drop_file(&inbox, "big.csv", export(&cars).as_bytes());
    let start = Instant::now();
    while vehicles(&state(&sb).await) < 100 {
        assert!(start.elapsed() < Duration::from_secs(30), "{}", site.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    daemon.signal("TERM");
    let (code, took) = daemon.exit(Duration::from_secs(15)).await;
    assert_eq!(code, Some(0), "{}", site.log());
    assert!(took < Duration::from_secs(10), "stopped in {took:?}");
    let log = site.log();
    assert!(log.contains("stopping: no new files are taken"), "{log}");
    assert!(log.contains("resumed at the next start"), "{log}");
    let status = site.status().await;
    let left = status["outbox_depth"].as_u64().unwrap();
    assert!(left > 0 && left < 1500, "{status:#}");
    assert!(!site.socket().exists());

    let daemon = site.start();
    site.wait_until(Duration::from_secs(60), "big.csv archived", || {
        !reports(&inbox, "archive").is_empty()
    })
    .await;
    let st = state(&sb).await;
    assert_eq!(vehicles(&st), 1500);
    assert_eq!(site.status().await["outbox_depth"], 0);
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_snapshot_is_held_and_released_through_the_daemon() {
    let sb = sandbox_with(Behaviour::default()).await;
    let (site, inbox, _daemon) = monday_applied(&sb, "daemon-held", "full").await;
    drop_file(&inbox, "thursday.csv", &demo("4-thursday-truncated.csv"));
    site.wait_until(Duration::from_secs(20), "thursday held", || {
        reports(&inbox, "held").len() == 1
    })
    .await;
    let held = &reports(&inbox, "held")[0];
    assert_eq!(held["outcome"], "held", "{held:#}");
    let before = stats(&sb).await;
    let (code, status) = site.status_check().await;
    assert_eq!(status["feeds"][0]["held"], 1, "{status:#}");
    assert_eq!(status["feeds"][0]["last_file"]["outcome"], "held");
    // A held file is a WARNING; the feed's last success is still Monday's.
    assert_eq!(code, 1, "{status:#}");
    assert!(status["feeds"][0]["last_success"].is_string(), "{status:#}");
    let human = site.lotsync(&["status"]).await;
    assert_eq!(common::site::code(&human), 1);
    let said = text(&human.stdout);
    assert!(
        said.starts_with("LOTSYNC WARNING - feed main: 1 file held by the safety guard"),
        "{said}"
    );
    // The release status advises, run as printed by a shell (the site's config is not the
    // default one: the command must name it).
    let release = said
        .split_once("if it is right: `")
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(command, _)| command.to_owned())
        .unwrap_or_else(|| panic!("no release command in:\n{said}"));
    assert!(release.contains("--config"), "{release}");
    assert!(release.ends_with("held/thursday.csv"), "{release}");
    // Nothing of it was sent.
    assert_eq!(stats(&sb).await["total_requests"], before["total_requests"]);

    let held_file = inbox.join("held/thursday.csv");
    let out = common::site::run_printed(&release);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("released"),
        "{}",
        text(&out.stdout)
    );
    assert!(!held_file.exists());
    let archived: Vec<Value> = reports(&inbox, "archive")
        .into_iter()
        .filter(|r| r["file"] == "thursday.csv")
        .collect();
    assert_eq!(archived.len(), 1);
    let st = state(&sb).await;
    let sold = st["vehicles"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["vehicle"]["status"] == "sold")
        .count();
    assert_eq!(
        sold, 8,
        "the 8 cars missing from the released file are sold"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_200_files_is_each_processed_once() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::with(
        "daemon-burst",
        &sb.base_url(),
        1000,
        "",
        "",
        "[[feed]]\nname = \"deltas\"\ninbox = \"deltas\"\nlocation_id = 10\nmode = \"delta\"\n",
    );
    let inbox = site.feed_inbox("deltas");
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    for i in 0..200u64 {
        let cars = [Car::new(i * 2), Car::new(i * 2 + 1)];
        drop_file(
            &inbox,
            &format!("delta-{i:03}.csv"),
            export(&cars).as_bytes(),
        );
    }
    site.wait_until(Duration::from_secs(120), "200 files archived", || {
        reports(&inbox, "archive").len() >= 200
    })
    .await;
    let done = reports(&inbox, "archive");
    assert_eq!(done.len(), 200);
    let mut names: Vec<&str> = done.iter().map(|r| r["file"].as_str().unwrap()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 200, "each file once");
    assert!(done
        .iter()
        .all(|r| r["outcome"] == "applied" && r["records"] == 2));
    let st = state(&sb).await;
    assert_eq!(vehicles(&st), 400);
    assert_eq!(common::count(&st, "POST /v1/inventory", "201"), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_through_the_daemon_repairs_drift_and_leaves_a_foreign_vehicle() {
    let sb = sandbox_with(Behaviour::default()).await;
    let (site, _inbox, _daemon) = monday_applied(&sb, "daemon-reconcile", "full").await;
    let before = state(&sb).await;
    let ids: Vec<(u64, String)> = before["vehicles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["vehicle"]["id"].as_u64().unwrap(),
                v["vehicle"]["vin"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    // Behind lotsync's back: one deleted, one marked sold, one price edited; and a vehicle
    // another tool created.
    common::delete_vehicle(&sb, ids[0].0).await;
    common::edit_vehicle(&sb, ids[1].0, serde_json::json!({"sold": true})).await;
    common::edit_vehicle(
        &sb,
        ids[2].0,
        serde_json::json!({"price": {"selling": 1.0}}),
    )
    .await;
    let foreign = lotsync::api::VehiclePayload::new(10, "OTHER", common::feedgen::vin(9000));
    common::client(&sb).upsert_vehicle(&foreign).await.unwrap();
    let foreign_before = find(&state(&sb).await, &foreign.vin);

    let out = site.lotsync(&["reconcile"]).await;
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    // Through the daemon, said as the direct run says it: the vehicle whose fields were
    // edited by its VIN, the one left alone, and where the report is.
    assert!(said.contains(&format!("VIN {}: ", ids[2].1)), "{said}");
    assert!(
        said.contains("left alone: 1 vehicle lotsync did not create"),
        "{said}"
    );
    let path = said
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("report: "))
        .unwrap_or_else(|| panic!("no report path in:\n{said}"));
    let report: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert_eq!(
        report["recreated"],
        serde_json::json!([ids[0].1]),
        "{report:#}"
    );
    assert_eq!(
        report["in_stock_fixed"],
        serde_json::json!([ids[1].1]),
        "{report:#}"
    );
    assert_eq!(
        report["fields_fixed"].as_array().unwrap().len(),
        1,
        "{report:#}"
    );
    assert_eq!(
        report["foreign"][0]["vin"],
        foreign.vin.as_str(),
        "{report:#}"
    );

    let after = state(&sb).await;
    let mut expected = Expected::default();
    let monday = site.dir.path().join("monday.csv");
    std::fs::write(&monday, demo("1-monday-full.csv")).unwrap();
    expected.full(&monday, &Profile::auto());
    let ours = serde_json::json!({
        "vehicles": after["vehicles"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["vehicle"]["vin"] != foreign.vin.as_str())
            .collect::<Vec<_>>()
    });
    expected.assert_matches(&ours);
    assert_eq!(find(&after, &foreign.vin), foreign_before, "left alone");
    let status = site.status().await;
    assert!(
        status["last_reconcile"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{status:#}"
    );
}

/// One vehicle of the sandbox's state, by VIN.
fn find(st: &Value, vin: &str) -> Value {
    st["vehicles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vehicle"]["vin"] == vin)
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polled_inbox_is_processed_without_events() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::with(
        "daemon-poll",
        &sb.base_url(),
        200,
        "",
        "",
        "[[feed]]\nname = \"share\"\ninbox = \"share\"\nlocation_id = 10\n\
         watch = \"poll\"\npoll_interval_secs = 0.2\n",
    );
    let inbox = site.feed_inbox("share");
    // Already there before the start: found by the first look.
    drop_file(&inbox, "early.csv", export(&[Car::new(1)]).as_bytes());
    let _daemon = site.start();
    site.wait_until(Duration::from_secs(20), "early archived", || {
        reports(&inbox, "archive").len() == 1
    })
    .await;
    // Written in place while polled: taken after it settles.
    std::fs::write(inbox.join("later.csv"), export(&[Car::new(1), Car::new(2)])).unwrap();
    site.wait_until(Duration::from_secs(20), "later archived", || {
        reports(&inbox, "archive").len() == 2
    })
    .await;
    assert_eq!(vehicles(&state(&sb).await), 2);
    assert_eq!(site.status().await["feeds"][0]["watch"], "poll every 0.2 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_starts_a_new_feed_and_stops_a_removed_one() {
    let sb = sandbox_with(Behaviour::default()).await;
    let one = "[[feed]]\nname = \"a\"\ninbox = \"a\"\nlocation_id = 10\nmode = \"delta\"\n";
    let two = "[[feed]]\nname = \"b\"\ninbox = \"b\"\nlocation_id = 11\nmode = \"delta\"\n";
    let site = Site::with("daemon-reload", &sb.base_url(), 200, "", "", one);
    let (a, b) = (site.feed_inbox("a"), site.feed_inbox("b"));
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    site.write_config(&sb.base_url(), 200, "", "", &format!("{one}{two}"));
    daemon.signal("HUP");
    site.wait_until(Duration::from_secs(10), "reloaded", || {
        site.log().contains("config reloaded")
    })
    .await;
    drop_file(&b, "b1.csv", export(&[Car::new(1)]).as_bytes());
    site.wait_until(Duration::from_secs(20), "b1 archived", || {
        reports(&b, "archive").len() == 1
    })
    .await;
    assert_eq!(site.status().await["feeds"].as_array().unwrap().len(), 2);

    // Feed a removed: its inbox is no longer watched.
    site.write_config(&sb.base_url(), 200, "", "", two);
    daemon.signal("HUP");
    site.wait_until(Duration::from_secs(10), "reloaded twice", || {
        site.log().matches("config reloaded").count() == 2
    })
    .await;
    // Dropped together: once b2 is taken, a watched a1 would have been too.
    drop_file(&a, "a1.csv", export(&[Car::new(2)]).as_bytes());
    drop_file(&b, "b2.csv", export(&[Car::new(1), Car::new(3)]).as_bytes());
    site.wait_until(Duration::from_secs(20), "b2 archived", || {
        reports(&b, "archive").len() == 2
    })
    .await;
    assert!(a.join("a1.csv").exists(), "left alone");
    assert_eq!(vehicles(&state(&sb).await), 2, "b's two, not a's");
}

/// SIGHUP with a config that has problems: the log says so, and the running config stays (its
/// feed still watched, files still taken), until a good config is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_with_a_broken_config_keeps_the_running_one() {
    let sb = sandbox_with(Behaviour::default()).await;
    let one = "[[feed]]\nname = \"a\"\ninbox = \"a\"\nlocation_id = 10\nmode = \"delta\"\n";
    let site = Site::with("daemon-bad-reload", &sb.base_url(), 200, "", "", one);
    let a = site.feed_inbox("a");
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    std::fs::write(&site.config, "[api\nbase_url = ").unwrap();
    daemon.signal("HUP");
    site.wait_until(Duration::from_secs(10), "the refusal", || {
        site.log()
            .contains("reload: the config has problems; the running config stays")
    })
    .await;
    assert!(!site.log().contains("config reloaded"), "{}", site.log());
    drop_file(&a, "a1.csv", export(&[Car::new(1), Car::new(2)]).as_bytes());
    site.wait_until(Duration::from_secs(20), "a1 archived", || {
        reports(&a, "archive").len() == 1
    })
    .await;
    assert_eq!(vehicles(&state(&sb).await), 2);
}
