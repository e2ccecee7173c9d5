//! The state at its edges, the real binary against the sandbox on loopback with a real state
//! on disk:
//! - a state that lost its data (the database truncated or deleted, with its WAL, or the
//!   whole state dir deleted while lotsync was stopped) is refused with the way out,
//!   `lotsync reconcile --rebuild`, which restores it so that the next export creates nothing
//!   twice and sells exactly the vehicles gone;
//! - `lotsync status` run over and over never keeps the daemon from starting.

use crate::common;

use common::fleet::{Car, Expected};
use common::site::{drop_file, reports, text, Site};
use common::{count, sandbox_with, state, stats};
use lotsync::mapper::Profile;
use lotsync::sandbox::Behaviour;
use std::path::Path;
use std::time::Duration;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A way to damage the state while lotsync is stopped.
type Damage<'a> = Box<dyn Fn() + 'a>;

fn truncate(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_that_lost_its_data_is_refused_and_rebuilt() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("state-lost", &sb.base_url());
    let inbox = site.inbox();
    let profile = Profile::auto();
    let mut expected = Expected::default();

    // Day 1 through the daemon: 1,500 vehicles created, the export archived with its report.
    let mut cars: Vec<Car> = (0..1500).map(Car::new).collect();
    let day1 = site.export("day1.csv", &cars);
    expected.full(&day1, &profile);
    let daemon = site.start();
    drop_file(&inbox, "day1.csv", &std::fs::read(&day1).unwrap());
    site.wait_until(Duration::from_secs(60), "day1 archived", || {
        reports(&inbox, "archive").len() == 1
    })
    .await;
    daemon.signal("TERM");
    assert_eq!(daemon.exit(Duration::from_secs(15)).await.0, Some(0));
    expected.assert_matches(&state(&sb).await);

    let state_dir = site.state_dir();
    let good = site.path().join("state.good");
    copy_dir(&state_dir, &good);
    let db_file = state_dir.join("state.db");
    let size = std::fs::metadata(&db_file).unwrap().len();
    assert!(
        size > 64 * 1024,
        "the database is larger than every cut ({size})"
    );
    assert!(
        !state_dir.join("state.db-wal").exists(),
        "a clean stop leaves the database whole, without a WAL"
    );

    let damages: Vec<(&str, Damage)> = vec![
        (
            "db truncated to 0 bytes",
            Box::new(|| truncate(&db_file, 0)),
        ),
        (
            "db truncated to 4 KiB",
            Box::new(|| truncate(&db_file, 4096)),
        ),
        (
            "db truncated to half",
            Box::new(|| truncate(&db_file, size / 2)),
        ),
        (
            "db without its last page",
            Box::new(|| truncate(&db_file, size - 4096)),
        ),
        (
            "db file deleted",
            Box::new(|| std::fs::remove_file(&db_file).unwrap()),
        ),
        (
            "state dir deleted",
            Box::new(|| std::fs::remove_dir_all(&state_dir).unwrap()),
        ),
    ];
    let requests_before = stats(&sb).await["total_requests"].clone();
    for (what, damage) in &damages {
        std::fs::remove_dir_all(&state_dir).unwrap();
        copy_dir(&good, &state_dir);
        damage();
        let mut refused = Vec::new();
        for command in [&["run"][..], &["sync", day1.to_str().unwrap()], &["status"]] {
            let out = site.lotsync_within(command, Duration::from_secs(20)).await;
            let stderr = text(&out.stderr);
            // `status` is a monitoring check: a state it cannot read is UNKNOWN (3).
            let refused_with = if command == &["status"][..] { 3 } else { 2 };
            assert_eq!(
                out.status.code(),
                Some(refused_with),
                "{what}: lotsync {command:?} must refuse the state\n{stderr}{}",
                text(&out.stdout)
            );
            // With the site's config, as it runs (the collector of `common::advice` ran it).
            let rebuild = lotsync::config::command(Some(&site.config), &["reconcile", "--rebuild"]);
            assert!(
                stderr.contains(&rebuild),
                "{what}: {command:?} names the way out, {rebuild}: {stderr}"
            );
            assert!(
                !stderr.contains("panicked") && !stderr.contains("backtrace"),
                "{what}: no raw panic before the message: {stderr}"
            );
            refused.push(stderr);
        }
        assert_eq!(
            stats(&sb).await["total_requests"],
            requests_before,
            "{what}: nothing was sent from a lost state"
        );
    }

    // The way out: the damaged state moved aside, rebuilt from the service and the archive.
    std::fs::remove_dir_all(&state_dir).unwrap();
    copy_dir(&good, &state_dir);
    truncate(&db_file, 0);
    std::fs::rename(&state_dir, site.path().join("state.lost")).unwrap();
    let out = site.lotsync(&["reconcile", "--rebuild"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );

    // Day 2: 40 gone, 10 new. Exactly those change; nothing is created twice.
    cars.retain(|c| c.n % 37 != 5);
    let gone = 1500 - cars.len();
    cars.extend((1500..1510).map(Car::new));
    let day2 = site.export("day2.csv", &cars);
    expected.full(&day2, &profile);
    let out = site.lotsync(&["sync", day2.to_str().unwrap()]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let after = state(&sb).await;
    expected.assert_matches(&after);
    assert_eq!(count(&after, "POST /v1/inventory", "201"), 1510);
    let sold = common::sold(&after);
    assert_eq!(sold, gone, "the vehicles gone are sold, no more");
}

/// `lotsync status` in a loop (no daemon yet, so it opens the state each time) while the
/// daemon is started ten times: every start succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_in_a_loop_never_keeps_the_daemon_from_starting() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("state-status-loop", &sb.base_url());
    // No daemon and no file in the state: nothing to judge by, UNKNOWN for monitoring.
    let out = site.lotsync(&["status"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("LOTSYNC UNKNOWN - no daemon running and no file"),
        "{}",
        text(&out.stdout)
    );

    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let runs = std::sync::Arc::new(AtomicU64::new(0));
    let mut looping = site.command(&["status"]);
    looping
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let statuses = std::thread::spawn({
        let (stop, runs) = (stop.clone(), runs.clone());
        move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = looping.status();
                runs.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    for _ in 0..10 {
        // Each start comes while status is cycling: it has run once more since the last.
        let before = runs.load(Ordering::Relaxed);
        let waiting = std::time::Instant::now();
        while runs.load(Ordering::Relaxed) == before {
            assert!(
                waiting.elapsed() < Duration::from_secs(20),
                "status does not run"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut daemon = site.start();
        // Fails if the daemon exits while status runs, or never listens.
        site.wait_listening(&mut daemon).await;
        daemon.signal("TERM");
        assert_eq!(daemon.exit(Duration::from_secs(15)).await.0, Some(0));
    }
    stop.store(true, Ordering::Relaxed);
    statuses.join().unwrap();
    assert!(runs.load(Ordering::Relaxed) >= 10, "status ran meanwhile");
}

/// A new state beside a service that already holds the lot (a new install, a state rebuilt
/// from nothing): the first export is planned against the service's own list. Nothing is
/// created twice, ids are learned without a write, only the vehicles that changed are sent;
/// the ones the file leaves out are not owned by the feed: never sold, counted as not owned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_state_reads_the_service_list_before_its_first_file() {
    let sb = sandbox_with(Behaviour::default()).await;
    let profile = Profile::auto();
    let mut expected = Expected::default();
    // Another lotsync (another state, another inbox) put 300 vehicles on the service.
    let before = Site::new("first-list-before", &sb.base_url());
    let mut cars: Vec<Car> = (0..300).map(Car::new).collect();
    let day0 = before.export("day0.csv", &cars);
    expected.full(&day0, &profile);
    let out = before.lotsync(&["sync", day0.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // A new install: 10 gone, 20 repriced, 5 new.
    let site = Site::new("first-list", &sb.base_url());
    cars.retain(|c| c.n % 30 != 7);
    let gone = 300 - cars.len();
    let mut repriced = 0;
    for car in cars.iter_mut().filter(|c| c.n % 14 == 3).take(20) {
        car.price += 500;
        repriced += 1;
    }
    cars.extend((300..305).map(Car::new));
    let day1 = site.export("day1.csv", &cars);
    expected.full(&day1, &profile);
    // The new install owns none of the vehicles it leaves out: all stay in stock.
    expected.0.values_mut().for_each(|(_, sold)| *sold = false);
    let out = site.lotsync(&["sync", day1.to_str().unwrap()]).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("290 vehicles already on the service"),
        "{stdout}"
    );

    let after = state(&sb).await;
    expected.assert_matches(&after);
    assert_eq!(
        count(&after, "POST /v1/inventory", "201"),
        305,
        "only the 5 new created"
    );
    assert_eq!(
        count(&after, "POST /v1/inventory", "200"),
        repriced,
        "only the repriced ones sent again"
    );
    assert_eq!(
        common::sold(&after),
        0,
        "known only from the list: not sold"
    );
    assert!(
        stdout.contains(&format!("{gone} left out but not owned by this feed")),
        "{stdout}"
    );
    // The state learned the id of every vehicle the file lists; those it left out it does
    // not keep.
    let out = site.lotsync(&["state", "export"]).await;
    let exported: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(exported.len(), 305 - gone);
    for mine in &exported {
        let v = after["vehicles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["vehicle"]["vin"] == mine["vin"])
            .expect("on the service");
        assert_eq!(mine["service_id"], v["vehicle"]["id"], "{mine}");
    }

    // Another new install whose first export has only a third of the lot: nothing of the
    // rest is sold, nor sent.
    let writes =
        count(&after, "POST /v1/inventory", "201") + count(&after, "POST /v1/inventory", "200");
    let third = Site::new("first-list-held", &sb.base_url());
    let partial = third.export("partial.csv", &cars[..100]);
    let out = third.lotsync(&["sync", partial.to_str().unwrap()]).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let held = state(&sb).await;
    assert_eq!(common::sold(&held), 0, "{stdout}");
    assert_eq!(
        count(&held, "POST /v1/inventory", "201") + count(&held, "POST /v1/inventory", "200"),
        writes,
        "nothing sent"
    );
}

/// `lotsync state backup` run again and again while the daemon delivers 1,500 creates at
/// 300 requests/s: each copy is one consistent state, taken without stopping the daemon and
/// without waiting for it. SQLite's integrity check passes on it, its outbox's counters add up
/// (queued = superseded + acknowledged + rejected + still in the outbox), and the copies
/// taken later hold more answers (the delivery was caught in the middle).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_the_daemon_delivers_is_one_consistent_state() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::with(
        "state-backup",
        &sb.base_url(),
        300,
        "",
        "",
        common::MAIN_FEED,
    );
    let inbox = site.inbox();
    let cars: Vec<Car> = (0..1500).map(Car::new).collect();
    let day1 = site.export("day1.csv", &cars);
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    drop_file(&inbox, "day1.csv", &std::fs::read(&day1).unwrap());
    let began = std::time::Instant::now();
    while stats(&sb).await["total_requests"].as_u64().unwrap_or(0) < 100 {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "no delivery under way: {}",
            site.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut answered = Vec::new();
    for n in 0..6 {
        let copy = site.path().join(format!("copy-{n}.db"));
        let started = std::time::Instant::now();
        let out = site
            .lotsync_within(
                &["state", "backup", "--to", copy.to_str().unwrap()],
                Duration::from_secs(20),
            )
            .await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "a backup does not wait for the daemon: {:?}",
            started.elapsed()
        );
        let conn = rusqlite::Connection::open_with_flags(
            &copy,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let check: String = conn
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .unwrap();
        assert_eq!(check, "ok", "copy {n}");
        let counters: String = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'outbox_counters'",
                [],
                |row| row.get(0),
            )
            .unwrap_or_else(|_| "{}".into());
        let counters: serde_json::Value = serde_json::from_str(&counters).unwrap();
        let field = |name: &str| counters[name].as_u64().unwrap_or(0);
        let in_outbox: u64 = conn
            .query_row("SELECT count(*) FROM outbox", [], |row| row.get(0))
            .unwrap();
        assert_eq!(
            field("queued"),
            field("superseded") + field("acknowledged") + field("rejected") + in_outbox,
            "copy {n}: {counters} with {in_outbox} in the outbox"
        );
        answered.push(field("acknowledged"));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    site.wait_until(Duration::from_secs(60), "day1 archived", || {
        reports(&inbox, "archive").len() == 1
    })
    .await;
    daemon.signal("TERM");
    assert_eq!(daemon.exit(Duration::from_secs(15)).await.0, Some(0));
    assert!(
        answered.first() < answered.last() && answered.first() < Some(&1500),
        "the copies were taken during the delivery: acknowledged {answered:?}"
    );
}
