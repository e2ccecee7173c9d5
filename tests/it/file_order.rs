//! Files taken in the order they were exported, and held files released the way a person
//! means, with `lotsync run`, `sync` and `release` as real processes against the sandbox on
//! loopback, in real folders:
//! - an older full snapshot that arrives after a newer one was applied is filed
//!   `superseded`, nothing of it sent, its report naming the newer file;
//! - releasing a held file older than the snapshot applied since is refused (exit 2, naming
//!   the newer file) unless `--force`, which says what it will do first;
//! - a released file whose delivery stops on a 401 is filed (archive/, with the counts the
//!   service acknowledged) as soon as its operations are delivered, and nothing stays held;
//! - a file held as incomplete that its writer finishes inside `held/` is said to be held as
//!   incomplete, and is released as it now is.

use crate::common;

use common::fleet::{export, Car};
use common::site::{code, drop_file, reports, text, Daemon, Site};
use common::{sandbox_with, sold, state, vehicles, MAIN_FEED};
use lotsync::sandbox::{Behaviour, RunningSandbox};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

fn cars(range: std::ops::Range<u64>) -> Vec<Car> {
    range.map(Car::new).collect()
}

/// Sets a file's modification time `age` in the past.
fn age(path: &Path, age: Duration) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

/// An export outside the inbox whose modification time is `old` in the past.
fn export_aged(site: &Site, name: &str, cars: &[Car], old: Duration) -> PathBuf {
    let path = site.export(name, cars);
    age(&path, old);
    path
}

/// Renamed into `inbox` whole, with a modification time `old` in the past.
fn drop_aged(inbox: &Path, name: &str, cars: &[Car], old: Duration) -> PathBuf {
    let tmp = inbox.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, export(cars)).unwrap();
    age(&tmp, old);
    let to = inbox.join(name);
    std::fs::rename(&tmp, &to).unwrap();
    to
}

fn report_of(inbox: &Path, folder: &str, file: &str) -> Option<Value> {
    reports(inbox, folder)
        .into_iter()
        .find(|r| r["file"] == file)
}

/// The site's config with `from` replaced by `to`.
fn edit_config(site: &Site, from: &str, to: &str) {
    let config = std::fs::read_to_string(&site.config).unwrap();
    assert!(config.contains(from), "{config}");
    std::fs::write(&site.config, config.replace(from, to)).unwrap();
}

/// Sunday's snapshot of 40 cars applied by `lotsync sync`, as of two hours ago.
async fn sunday_synced(site: &Site) {
    let sunday = export_aged(site, "sunday.csv", &cars(0..40), Duration::from_secs(7200));
    let out = site.lotsync(&["sync", sunday.to_str().unwrap()]).await;
    assert_eq!(code(&out), 0, "{}{}", text(&out.stdout), text(&out.stderr));
}

/// (2) An export written in place an hour ago waits for its settle time; a newer one renamed
/// in meanwhile is taken at once. The older one, late, must not be applied after it (it would
/// sell 6 cars the newer one lists): it is filed `superseded`, nothing of it sent, its report
/// naming the newer file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_export_arriving_after_a_newer_one_is_superseded() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("order-superseded", &sb.base_url());
    edit_config(&site, "settle_secs = 0.3", "settle_secs = 6");
    sunday_synced(&site).await;
    assert_eq!(vehicles(&state(&sb).await), 40);
    let inbox = site.inbox();
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    // Sunday's bytes dropped again ("already applied", nothing sent): once filed, the inbox
    // is watched, and a file renamed in is taken at once.
    drop_file(&inbox, "sunday-again.csv", export(&cars(0..40)).as_bytes());
    site.wait_until(Duration::from_secs(20), "sunday-again.csv filed", || {
        report_of(&inbox, "archive", "sunday-again.csv").is_some()
    })
    .await;
    // Monday's export (4 cars gone), as of an hour ago, written in place by a writer that
    // has not let go of it yet: it waits.
    let monday = inbox.join("monday.csv");
    let mut writer = std::fs::File::create(&monday).unwrap();
    writer.write_all(export(&cars(0..36)).as_bytes()).unwrap();
    writer.flush().unwrap();
    writer
        .set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    // Tuesday's (the 4 back, 2 new) renamed in meanwhile: taken at once.
    drop_file(&inbox, "tuesday.csv", export(&cars(0..42)).as_bytes());
    site.wait_until(Duration::from_secs(20), "tuesday.csv archived", || {
        report_of(&inbox, "archive", "tuesday.csv").is_some()
    })
    .await;
    drop(writer);
    site.wait_until(Duration::from_secs(30), "monday.csv filed", || {
        report_of(&inbox, "archive", "monday.csv").is_some()
    })
    .await;
    let tuesday = report_of(&inbox, "archive", "tuesday.csv").expect("tuesday.csv archived");
    assert_eq!(tuesday["outcome"], "applied", "{tuesday:#}");
    let monday = report_of(&inbox, "archive", "monday.csv").unwrap();
    assert_eq!(monday["outcome"], "superseded", "{monday:#}");
    assert!(
        monday.to_string().contains("tuesday.csv"),
        "the report names the newer file: {monday:#}"
    );
    assert_eq!(monday["operations"], 0, "{monday:#}");
    let st = state(&sb).await;
    assert_eq!(sold(&st), 0, "nothing re-sold");
    assert_eq!(vehicles(&st), 42, "nothing re-created");
    let status = site.status().await;
    assert_eq!(status["outbox_depth"], 0, "{status:#}");
}

/// Sunday's 40 cars applied; Monday's export (half the lot, as of an hour ago) held by the
/// safety guard; Tuesday's (all 40 and 2 new) applied after it by the running daemon.
async fn monday_held_tuesday_applied(sb: &RunningSandbox, name: &str) -> (Site, PathBuf, Daemon) {
    let site = Site::new(name, &sb.base_url());
    sunday_synced(&site).await;
    let inbox = site.inbox();
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    drop_aged(
        &inbox,
        "monday.csv",
        &cars(0..20),
        Duration::from_secs(3600),
    );
    site.wait_until(Duration::from_secs(20), "monday.csv held", || {
        report_of(&inbox, "held", "monday.csv").is_some()
    })
    .await;
    drop_file(&inbox, "tuesday.csv", export(&cars(0..42)).as_bytes());
    site.wait_until(Duration::from_secs(20), "tuesday.csv archived", || {
        report_of(&inbox, "archive", "tuesday.csv").is_some()
    })
    .await;
    (site, inbox, daemon)
}

/// (3) Monday's export, held by the safety guard, released through the daemon after
/// Tuesday's was applied: refused (exit 2) naming tuesday.csv, nothing sent, the file still
/// held. With `--force`, what it will do is said first, then it is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_a_held_file_older_than_the_last_applied_is_refused_unless_forced() {
    let sb = sandbox_with(Behaviour::default()).await;
    let (site, inbox, _daemon) = monday_held_tuesday_applied(&sb, "order-release-old").await;
    let held = inbox.join("held/monday.csv");
    let requests = common::stats(&sb).await["total_requests"].clone();
    let out = site.lotsync(&["release", held.to_str().unwrap()]).await;
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 2, "{said}");
    assert!(said.contains("tuesday.csv"), "names the newer file: {said}");
    assert!(said.contains("--force"), "says the way out: {said}");
    assert!(held.exists(), "still held");
    assert_eq!(
        common::stats(&sb).await["total_requests"],
        requests,
        "nothing sent"
    );
    assert_eq!(sold(&state(&sb).await), 0);

    let out = site
        .lotsync(&["release", "--force", held.to_str().unwrap()])
        .await;
    let said = text(&out.stdout);
    assert_eq!(code(&out), 0, "{said}{}", text(&out.stderr));
    let plan_at = said.find("22 sold").unwrap_or(usize::MAX);
    let done_at = said.find("released").unwrap_or(0);
    assert!(
        plan_at < done_at,
        "what it will do comes first (22 sold), then what it did: {said}"
    );
    assert_eq!(sold(&state(&sb).await), 22);
    assert!(!held.exists());
    let report = report_of(&inbox, "archive", "monday.csv").expect("monday.csv archived");
    assert_eq!(report["counts"]["sold"], 22, "{report:#}");
}

/// (7) A held file released while the token is refused: its delivery stops on a 401. Once a
/// new token is read (SIGHUP), its operations are delivered and the file is filed at once in
/// archive/ with the counts the service acknowledged; nothing stays in held/ and `status`
/// no longer warns of a held file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_file_stopped_by_a_401_is_filed_once_delivered() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("order-release-401", &sb.base_url());
    edit_config(
        &site,
        "token_env = \"LOTSYNC_TEST_TOKEN\"",
        "token_file = \"token\"",
    );
    let token = site.path().join("token");
    lotsync::config::write_token_file(&token, "sandbox-token").unwrap();
    let inbox = site.inbox();
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    drop_file(&inbox, "monday.csv", export(&cars(0..40)).as_bytes());
    site.wait_until(Duration::from_secs(20), "monday.csv archived", || {
        report_of(&inbox, "archive", "monday.csv").is_some()
    })
    .await;
    drop_file(&inbox, "thursday.csv", export(&cars(0..20)).as_bytes());
    site.wait_until(Duration::from_secs(20), "thursday.csv held", || {
        report_of(&inbox, "held", "thursday.csv").is_some()
    })
    .await;
    // The token is revoked, and lotsync reads it again.
    lotsync::config::write_token_file(&token, "revoked-token").unwrap();
    daemon.signal("HUP");
    site.wait_until(Duration::from_secs(20), "the revoked token read", || {
        site.log().contains("the API token changed")
    })
    .await;
    let held = inbox.join("held/thursday.csv");
    let out = site.lotsync(&["release", held.to_str().unwrap()]).await;
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 2, "{said}");
    assert!(said.contains("401"), "{said}");
    assert_eq!(sold(&state(&sb).await), 0, "nothing delivered yet");
    let status = site.status().await;
    assert_eq!(status["feeds"][0]["held"], 0, "out of held/: {status:#}");
    // Released again meanwhile: said to be on its way, not archived as "already applied".
    let out = site.lotsync(&["release", held.to_str().unwrap()]).await;
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 2, "{said}");
    assert!(said.contains("released already"), "{said}");
    assert!(report_of(&inbox, "archive", "thursday.csv").is_none());

    // The right token again: delivered, and the file filed with what was acknowledged.
    lotsync::config::write_token_file(&token, "sandbox-token").unwrap();
    daemon.signal("HUP");
    site.wait_until(Duration::from_secs(30), "thursday.csv archived", || {
        report_of(&inbox, "archive", "thursday.csv").is_some()
    })
    .await;
    let report = report_of(&inbox, "archive", "thursday.csv").unwrap();
    assert_eq!(report["counts"]["sold"], 20, "{report:#}");
    assert_eq!(report["undelivered"], 0, "{report:#}");
    assert_eq!(sold(&state(&sb).await), 20);
    assert!(
        reports(&inbox, "held").is_empty(),
        "no held report left behind"
    );
    assert!(!held.exists());
    let status = site.status().await;
    assert_eq!(status["feeds"][0]["held"], 0, "{status:#}");
    assert_eq!(status["outbox_depth"], 0, "{status:#}");
    let human = text(&site.lotsync(&["status"]).await.stdout);
    assert!(
        !human.contains("file held") && !human.contains("held by"),
        "{human}"
    );
}

/// (8) A file written in place whose writer stalls in its last record is held as
/// incomplete; `status` says so (not "by the safety guard"). The writer then finishes it
/// inside held/ (its handle still open): `release` takes it as it now is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_finished_inside_held_is_released_as_it_now_is() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::with(
        "order-held-finished",
        &sb.base_url(),
        1000,
        "",
        "incomplete_wait_secs = 2\n",
        MAIN_FEED,
    );
    let inbox = site.inbox();
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    drop_file(&inbox, "monday.csv", export(&cars(0..40)).as_bytes());
    site.wait_until(Duration::from_secs(20), "monday.csv archived", || {
        report_of(&inbox, "archive", "monday.csv").is_some()
    })
    .await;
    // Tuesday's lists one car more; its writer stops 10 bytes before the end.
    let body = export(&cars(0..41));
    let (first, rest) = body.split_at(body.len() - 10);
    let mut writer = std::fs::File::create(inbox.join("tuesday.csv")).unwrap();
    writer.write_all(first.as_bytes()).unwrap();
    writer.flush().unwrap();
    site.wait_until(Duration::from_secs(20), "tuesday.csv held", || {
        report_of(&inbox, "held", "tuesday.csv").is_some()
    })
    .await;
    let human = text(&site.lotsync(&["status"]).await.stdout);
    assert!(human.contains("incomplete"), "{human}");
    assert!(!human.contains("safety guard"), "{human}");
    // The writer finishes (the file is in held/ now).
    writer.write_all(rest.as_bytes()).unwrap();
    writer.sync_all().unwrap();
    drop(writer);
    let held = inbox.join("held/tuesday.csv");
    let out = site.lotsync(&["release", held.to_str().unwrap()]).await;
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 0, "{said}");
    let report = report_of(&inbox, "archive", "tuesday.csv").expect("tuesday.csv archived");
    assert_eq!(report["records"], 41, "taken as it now is: {report:#}");
    assert_eq!(report["counts"]["create"], 1, "{report:#}");
    let st = state(&sb).await;
    assert_eq!(vehicles(&st), 41);
    assert_eq!(sold(&st), 0);
}

/// (3) The same without a daemon (`release` on the state): refused naming tuesday.csv, the
/// file still held; with `--force` the plan is shown first, the file is filed in the archive
/// with its queued operations, and `lotsync sync` delivers them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_an_old_held_file_on_the_state_is_refused_unless_forced() {
    let sb = sandbox_with(Behaviour::default()).await;
    let (site, inbox, daemon) = monday_held_tuesday_applied(&sb, "order-release-state").await;
    daemon.signal("TERM");
    daemon.exit(Duration::from_secs(20)).await;
    let held = inbox.join("held/monday.csv");
    let out = site.lotsync(&["release", held.to_str().unwrap()]).await;
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 2, "{said}");
    assert!(said.contains("tuesday.csv"), "names the newer file: {said}");
    assert!(said.contains("--force"), "says the way out: {said}");
    assert!(held.exists(), "still held");
    let status = site.status().await;
    assert_eq!(status["outbox_depth"], 0, "nothing queued: {status:#}");

    let out = site
        .lotsync(&["release", "--force", held.to_str().unwrap()])
        .await;
    let said = text(&out.stdout);
    assert_eq!(code(&out), 0, "{said}{}", text(&out.stderr));
    let plan_at = said.find("22 sold").unwrap_or(usize::MAX);
    let done_at = said.find("released").unwrap_or(0);
    assert!(plan_at < done_at, "the plan comes first: {said}");
    assert!(!held.exists());
    assert!(reports(&inbox, "held").is_empty(), "no held report left");
    let report = report_of(&inbox, "archive", "monday.csv").expect("monday.csv archived");
    assert_eq!(report["still_queued"]["sold"], 22, "{report:#}");
    let out = site.lotsync(&["sync"]).await;
    assert_eq!(code(&out), 0, "{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(sold(&state(&sb).await), 22);
}
