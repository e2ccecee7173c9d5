//! `lotsync run` as a real process, planning a large file of one feed while it delivers another
//! feed's operations: delivery goes on (no gap in the service's answers longer than a second)
//! and systemd's watchdog is pinged on time (a `NOTIFY_SOCKET` the test binds, with
//! `WATCHDOG_USEC` set as systemd sets it).

use crate::common;

use common::fleet::{export, Car};
use common::site::{drop_file, Daemon, Site};
use common::{client, lot, sandbox_with, state, stats, vehicles, TempDir};
use lotsync::diff::{Differ, FileId, Mode};
use lotsync::mapper::Accepted;
use lotsync::outbox::Outbox;
use lotsync::sandbox::Behaviour;
use lotsync::state::State;
use lotsync::upload::Uploader;
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Operations queued by the first file (all creates).
const FIRST: u64 = 1_000;
/// Vehicles in the file planned meanwhile. See the test's doc for the size.
const LARGE: u64 = 100_000;
/// WatchdogSec as systemd would pass it; the daemon pings at half of it.
const WATCHDOG: Duration = Duration::from_secs(1);
/// The longest wait between two answers allowed while the large file is read.
const MAX_GAP: Duration = Duration::from_secs(1);
/// How long the watchdog is watched into the large file's commit.
const INTO_COMMIT: Duration = Duration::from_secs(8);

/// Creates answered by the service (`POST /v1/inventory` → 201).
fn created(stats: &serde_json::Value) -> u64 {
    stats["requests"]["POST /v1/inventory"]["201"]
        .as_u64()
        .unwrap_or(0)
}

/// Two feeds at two lots of organization 100. Feed `a` queues 1,000 creates, delivered at
/// 200 requests/s (about 5 s); once delivery is under way, a 100,000-vehicle snapshot lands in
/// feed `b`'s inbox and is read, mapped, diffed and committed. The answers keep coming while
/// it is read, mapped and diffed: no gap over 1 s from its drop until the 1,000 are answered
/// or its commit begins (its report's draft is written just before). The watchdog's pings
/// keep their period from the start until 8 s into the commit: none more than `WatchdogSec`
/// after the one before (systemd would kill the daemon then).
///
/// Not asked: answers during the commit itself. It is one transaction on the state's writer,
/// which every other write (answers included) waits for until it ends. The runtime's threads
/// do not wait for the state meanwhile, which the watchdog shows.
///
/// The 100,000 vehicles: a debug build reads, maps and diffs them in 4 to 9 s (the old
/// code's gap in answers is as long), and the test ends in about 15 s, 8 s into the commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_file_planned_while_delivering_keeps_answers_and_watchdog_on_time() {
    let sb = sandbox_with(Behaviour::default()).await;
    let feeds = "[[feed]]\nname = \"a\"\ninbox = \"a\"\nlocation_id = 10\n\
                 [[feed]]\nname = \"b\"\ninbox = \"b\"\nlocation_id = 11\n";
    let site = Site::with("planning-delivering", &sb.base_url(), 200, "", "", feeds);
    let (a, b) = (site.feed_inbox("a"), site.feed_inbox("b"));
    let large = export(
        &(1_000_000..1_000_000 + LARGE)
            .map(Car::new)
            .collect::<Vec<_>>(),
    );
    let committing = b.join("processing/large.csv.report.json");

    // systemd's side of sd_notify: a datagram socket, every WATCHDOG=1 timed.
    let notify_path = site.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let pings: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let listening = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let listener = std::thread::spawn({
        let (pings, listening) = (pings.clone(), listening.clone());
        move || {
            let mut buf = [0u8; 4096];
            while listening.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(n) = notify.recv(&mut buf) {
                    if String::from_utf8_lossy(&buf[..n]).contains("WATCHDOG=1") {
                        pings.lock().unwrap().push(Instant::now());
                    }
                }
            }
        }
    });

    // WATCHDOG_PID must be the daemon's own pid: the shell hands it its pid by exec.
    let log = std::fs::File::create(site.path().join("daemon.log")).unwrap();
    let child = Command::new("sh")
        .arg("-c")
        .arg("WATCHDOG_PID=$$ exec \"$0\" run --config \"$1\"")
        .arg(env!("CARGO_BIN_EXE_lotsync"))
        .arg(&site.config)
        .env("LOTSYNC_TEST_TOKEN", "sandbox-token")
        .env("RUST_LOG", "info")
        // Under NOTIFY_SOCKET the daemon would log to the journal.
        .env("LOTSYNC_LOG_FORMAT", "text")
        .env("NOTIFY_SOCKET", &notify_path)
        .env("WATCHDOG_USEC", WATCHDOG.as_micros().to_string())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("lotsync runs");
    let mut daemon = Daemon { child };
    site.wait_listening(&mut daemon).await;

    drop_file(
        &a,
        "first.csv",
        export(&(0..FIRST).map(Car::new).collect::<Vec<_>>()).as_bytes(),
    );
    let started = Instant::now();
    let mut dropped: Option<(Instant, u64)> = None;
    let (mut last, mut last_change) = (0, None::<Instant>);
    let mut longest = (Duration::ZERO, 0);
    let answered_while_read = loop {
        let now_created = created(&stats(&sb).await);
        let now = Instant::now();
        if now_created != last {
            if let Some(before) = last_change {
                if now - before > longest.0 {
                    longest = (now - before, last);
                }
            }
            (last, last_change) = (now_created, Some(now));
        }
        if let (Some(before), Some(_)) = (last_change, dropped) {
            // Still waiting: the gap so far counts too.
            if now - before > longest.0 {
                longest = (now - before, last);
            }
        }
        match dropped {
            None if now_created >= 50 => {
                drop_file(&b, "large.csv", large.as_bytes());
                dropped = Some((now, now_created));
            }
            Some((_, at_drop)) if now_created >= FIRST || committing.exists() => {
                break now_created - at_drop;
            }
            _ => {}
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the first file not delivered within 90 s ({now_created} created)\nlog:\n{}",
            site.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let read_for = dropped.map(|(at, _)| at.elapsed()).unwrap_or_default();
    // The watchdog is watched a while longer, into the commit (the writer is held for all of
    // it: nothing of the runtime's threads may wait for the state meanwhile).
    tokio::time::sleep(INTO_COMMIT).await;
    drop(daemon);
    listening.store(false, std::sync::atomic::Ordering::Relaxed);
    listener.join().unwrap();

    let pings = pings.lock().unwrap().clone();
    let latest_ping = pings
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default();
    if let Some((at, _)) = dropped {
        for w in pings.windows(2) {
            if w[1] - w[0] > Duration::from_millis(700) {
                eprintln!(
                    "late ping: {:.2?} between pings, the second {:.2?} after the drop",
                    w[1] - w[0],
                    w[1].saturating_duration_since(at)
                );
            }
        }
    }
    eprintln!(
        "{answered_while_read} answers in the {read_for:.2?} after the {LARGE}-vehicle file was \
         dropped (longest gap {:.2?}, after {} created); then {INTO_COMMIT:?} into its commit; {} \
         watchdog pings, longest interval {latest_ping:.2?}",
        longest.0,
        longest.1,
        pings.len()
    );
    assert!(
        longest.0 <= MAX_GAP,
        "gap of {:.1} s in answers (after {} of {FIRST} created) while a {LARGE}-vehicle file \
         was read, mapped and diffed\nlog:\n{}",
        longest.0.as_secs_f64(),
        longest.1,
        site.log()
    );
    assert!(
        answered_while_read >= 100,
        "only {answered_while_read} answers while the large file was read: the test did not \
         overlap them"
    );
    assert!(
        pings.len() >= 2,
        "the watchdog was pinged {} times",
        pings.len()
    );
    assert!(
        latest_ping < WATCHDOG,
        "the watchdog was late: {:.2} s between two pings (WatchdogSec {} s, pinged every {} \
         s)",
        latest_ping.as_secs_f64(),
        WATCHDOG.as_secs_f64(),
        WATCHDOG.as_secs_f64() / 2.0
    );
}

/// A delivery with nothing left to send but what a plan in progress keeps back (the pending
/// operations of the vehicles it read, which its commit replaces) waits for the plan, then
/// sends what it committed: the rest went out meanwhile, and nothing is left queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_waits_for_what_a_plan_in_progress_keeps_back() {
    let sb = sandbox_with(Behaviour::default()).await;
    let dir = TempDir::new("kept-back");
    let outbox = Arc::new(Outbox::new(State::open(&dir.path().join("state")).unwrap()));
    lot::commit(
        &outbox,
        "day1.csv",
        Mode::Delta,
        &[lot::car(1), lot::car(2)],
    );
    // Day 2 changes car 1: its plan reads it (its create pending: kept back), then waits.
    let (read_tx, read_rx) = std::sync::mpsc::channel();
    let (commit_tx, commit_rx) = std::sync::mpsc::channel::<()>();
    let planner = std::thread::spawn({
        let outbox = outbox.clone();
        move || {
            let file = FileId {
                name: "day2.csv".into(),
                sha256: "day2".into(),
            };
            let mut differ = Differ::new(&outbox, lot::rules(Mode::Delta), file).unwrap();
            let mut changed = lot::car(1);
            changed.stock = "S1-new".into();
            differ
                .accepted(&Accepted {
                    line: 2,
                    payload: changed,
                    sold: None,
                    warnings: Vec::new(),
                })
                .unwrap();
            read_tx.send(()).unwrap();
            commit_rx.recv().unwrap();
            differ.commit().unwrap();
        }
    });
    read_rx.recv().unwrap();
    let uploader = Uploader::new(client(&sb), outbox.clone(), lot::upload_settings(500.0)).unwrap();
    let drain = tokio::spawn(async move { uploader.drain().await });

    let start = Instant::now();
    while vehicles(&state(&sb).await) < 1 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "car 2 not delivered while the plan of car 1 is in progress"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !drain.is_finished(),
        "the delivery ended with car 1 kept back by the plan: {:?}",
        drain.await
    );
    assert_eq!(vehicles(&state(&sb).await), 1, "car 1 waits for the plan");

    commit_tx.send(()).unwrap();
    planner.join().unwrap();
    let report = tokio::time::timeout(Duration::from_secs(10), drain)
        .await
        .expect("the delivery ends once the plan is committed")
        .unwrap()
        .unwrap();
    assert_eq!(report.undelivered, 0, "{report:?}");
    let held = state(&sb).await;
    assert_eq!(vehicles(&held), 2);
    let stocks: Vec<&str> = held["vehicles"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["payload"]["stock"].as_str())
        .collect();
    assert!(
        stocks.contains(&"S1-new") && !stocks.contains(&"S1"),
        "car 1 sent once, as day 2 has it: {stocks:?}"
    );
}
