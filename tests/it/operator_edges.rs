//! What the operator sees, as real processes against the sandbox on loopback: `lotsync status`
//! after its daemon was killed with work waiting, every command's output into a pipe its reader
//! closed, and one hostile file name (a line break, a forged verdict, an escape sequence) fed
//! through every command and log that shows names.

use crate::common;

use common::fleet::{export, Car};
use common::site::{code, drop_file, reports, text, Site};
use common::{sandbox_with, state, vehicles};
use lotsync::sandbox::Behaviour;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const WITHIN: Duration = Duration::from_secs(30);

/// A daemon killed with SIGKILL in the middle of a file, and a file dropped after: the state
/// is meant to be served by a daemon (`[daemon]` in the config), work waits and none runs, so
/// `status` is CRITICAL at once, not only once `--stale-after` passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_without_its_daemon_while_work_waits_is_critical() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::with(
        "status-killed",
        &sb.base_url(),
        40,
        "",
        "",
        "[[feed]]\nname = \"main\"\ninbox = \"main\"\nlocation_id = 10\n",
    );
    let inbox = site.feed_inbox("main");
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    // A first file delivered: the feed is fresh, nothing else would make it CRITICAL.
    let cars: Vec<Car> = (0..400).map(Car::new).collect();
    drop_file(&inbox, "first.csv", export(&cars[..5]).as_bytes());
    site.wait_until(WITHIN, "first.csv archived", || {
        reports(&inbox, "archive").len() == 1
    })
    .await;
    drop_file(&inbox, "big.csv", export(&cars).as_bytes());
    let start = Instant::now();
    while vehicles(&state(&sb).await) < 20 {
        assert!(start.elapsed() < WITHIN, "{}", site.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    daemon.signal("KILL");
    daemon.exit(Duration::from_secs(10)).await;
    drop_file(&inbox, "later.csv", export(&cars[..5]).as_bytes());

    let (exit, status) = site.status_check().await;
    assert_eq!(status["daemon"], false, "{status:#}");
    let queued = status["outbox_depth"].as_u64().unwrap();
    assert!(queued > 0, "{status:#}");
    assert_eq!(exit, 2, "{status:#}");
    let summary = status["check"]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with(&format!(
            "LOTSYNC CRITICAL - no daemon is running; {queued} operations and 1 file wait"
        )),
        "{summary}"
    );
    let human = site.lotsync(&["status"]).await;
    assert_eq!(code(&human), 2);
    assert!(
        text(&human.stdout).starts_with("LOTSYNC CRITICAL - no daemon is running"),
        "{}",
        text(&human.stdout)
    );
}

/// `lotsync ARGS` with its stdout a pipe whose reader is gone before it writes (as in
/// `lotsync status | true`).
fn into_closed_pipe(site: &Site, args: &[&str]) -> Output {
    let mut child = site
        .command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

/// A reader that closes the pipe (`| head -1`, `| true`) is its choice: no "Broken pipe", and
/// the command's own exit code.
#[test]
fn a_closed_stdout_is_not_an_error() {
    // Nothing answers there: these commands never ask the service (`plan` would, at a
    // first file; it writes through the same stdout).
    let site = Site::new("closed-stdout", "http://127.0.0.1:9");
    let file = site.export("cars.csv", &(0..50).map(Car::new).collect::<Vec<_>>());
    let file = file.to_str().unwrap();
    // `status` with nothing to judge is UNKNOWN (3); the others succeed.
    for (args, exit) in [
        (&["status"][..], 3),
        (&["status", "--format", "json"][..], 3),
        (&["state", "export"][..], 0),
        (&["validate"][..], 0),
    ] {
        let out = into_closed_pipe(&site, args);
        let stderr = text(&out.stderr);
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
        assert_eq!(code(&out), exit, "{args:?}: {stderr}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_lotsync"))
        .args(["check", file, "--location-id", "10"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            drop(child.stdout.take());
            child.wait_with_output()
        })
        .unwrap();
    assert!(!text(&out.stderr).contains("Broken pipe"), "{out:?}");
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
}

/// The hostile name: a line break, then a forged verdict line, then an escape sequence that
/// clears the terminal.
const HOSTILE: &str = "x\nLOTSYNC OK - forged\x1b[2J.csv";

/// Nothing of `out` lets the name break a line or reach the terminal raw.
fn assert_escaped(what: &str, out: &Output) {
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let shown = text(bytes);
        assert!(
            !shown.contains('\x1b'),
            "{what}: a raw escape on {stream}:\n{shown}"
        );
        assert!(
            !shown.lines().any(|l| l.starts_with("LOTSYNC OK - forged")),
            "{what}: the name broke a line on {stream}:\n{shown}"
        );
    }
}

/// The same hostile name through `sync` (its output and its text log, `archived=` too),
/// `state export --format text`, `status` (with and without the daemon), `plan`, `release`
/// (with and without the daemon) and the daemon's own log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_file_name_is_escaped_in_every_output() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("hostile-name", &sb.base_url());
    let cars: Vec<Car> = (0..12).map(Car::new).collect();
    let lot = site.path().join(HOSTILE);
    std::fs::write(&lot, export(&cars)).unwrap();
    let lot = lot.to_str().unwrap().to_owned();

    let out = site.lotsync(&["sync", &lot]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("archived="), "{out:?}");
    assert_escaped("sync", &out);
    let out = site.lotsync(&["state", "export", "--format", "text"]).await;
    assert_eq!(code(&out), 0);
    assert!(text(&out.stdout).contains("forged"), "{out:?}");
    assert_escaped("state export", &out);
    let out = site.lotsync(&["status"]).await;
    assert!(text(&out.stdout).contains("forged"), "{out:?}");
    assert_escaped("status", &out);

    // Six cars left: the guard holds it (it would sell 6 of 12).
    let held = site.path().join(format!("held-{HOSTILE}"));
    std::fs::write(&held, export(&cars[..6])).unwrap();
    let held = held.to_str().unwrap().to_owned();
    let out = site.lotsync(&["plan", &held]).await;
    assert!(text(&out.stdout).contains("HELD"), "{out:?}");
    assert_escaped("plan", &out);
    let out = site.lotsync(&["sync", &held]).await;
    assert!(text(&out.stdout).contains("HELD"), "{out:?}");
    assert_escaped("sync of a held file", &out);
    let out = site.lotsync(&["release", &held]).await;
    assert_eq!(code(&out), 0, "{out:?}");
    assert!(text(&out.stdout).contains("forged"), "{out:?}");
    assert_escaped("release", &out);

    // The daemon: it holds a file of two of the six in its inbox, says so, and releases it.
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    drop_file(&site.inbox(), HOSTILE, export(&cars[..2]).as_bytes());
    site.wait_until(WITHIN, "the hostile file held", || {
        reports(&site.inbox(), "held").len() == 1
    })
    .await;
    let out = site.lotsync(&["status"]).await;
    assert!(text(&out.stdout).contains("forged"), "{out:?}");
    assert_escaped("status from the daemon", &out);
    let in_held = site.inbox().join("held").join(HOSTILE);
    let out = site.lotsync(&["release", in_held.to_str().unwrap()]).await;
    assert!(text(&out.stdout).contains("forged"), "{out:?}");
    assert_escaped("release through the daemon", &out);
    let log = site.log();
    assert!(log.contains("forged"), "{log}");
    assert!(!log.contains('\x1b'), "{log}");
    assert!(
        !log.lines().any(|l| l.starts_with("LOTSYNC OK - forged")),
        "{log}"
    );
    assert!(Path::new(&lot).exists());
}

/// `lotsync ARGS` logging JSON lines (`LOTSYNC_LOG_FORMAT=json`) with `token`: its exit code
/// and its log lines, each parsed.
async fn json_run(site: &Site, args: &[&str], token: &str) -> (i32, Vec<serde_json::Value>) {
    let mut cmd = site.command(args);
    cmd.env("LOTSYNC_LOG_FORMAT", "json")
        .env("LOTSYNC_TEST_TOKEN", token);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let lines = text(&out.stderr)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: not JSON: {l}")))
        .collect();
    (code(&out), lines)
}

/// The first log line whose message starts with `message`, or the test fails with them all.
fn line_of<'a>(lines: &'a [serde_json::Value], message: &str) -> &'a serde_json::Value {
    lines
        .iter()
        .find(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(message))
        })
        .unwrap_or_else(|| panic!("no {message:?} in\n{lines:#?}"))
}

/// `sync` in JSON: a file with a rejected record and a held file are warning events with the
/// file's name as `file`; the rate is a number; "delivery stopped" and "lotsync stopped" say
/// their cause in the message itself (what `journalctl` and `systemctl status` show).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_say_held_and_rejected_files_and_causes_in_the_message() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("json-sync", &sb.base_url());
    let cars: Vec<Car> = (0..12).map(Car::new).collect();
    let mut body = export(&cars);
    body.push_str("NOTAVIN,S99999,2020,Ford,F-150,\"$1\",1,In Stock,MAIN\n");
    let monday = site.path().join("monday.csv");
    std::fs::write(&monday, body).unwrap();

    let (exit, lines) = json_run(&site, &["sync", monday.to_str().unwrap()], "sandbox-token").await;
    assert_eq!(exit, 3, "a rejected record: {lines:#?}");
    let rejected = line_of(&lines, "1 of 13 records rejected");
    assert_eq!(rejected["level"], "WARN", "{rejected}");
    assert_eq!(rejected["file"], "monday.csv", "{rejected}");
    assert_eq!(rejected["rejected_records"], 1, "{rejected}");
    let delivering = line_of(&lines, "delivering");
    assert!(delivering["rate"].is_number(), "{delivering}");

    let held = site.export("tuesday.csv", &cars[..6]);
    let (_, lines) = json_run(&site, &["sync", held.to_str().unwrap()], "sandbox-token").await;
    let held = line_of(&lines, "held by the safety guard: ");
    assert_eq!(held["level"], "WARN", "{held}");
    assert_eq!(held["file"], "tuesday.csv", "{held}");
    assert!(held["reason"].is_string(), "{held}");
    assert!(
        held["message"]
            .as_str()
            .unwrap()
            .contains("would mark 6 of 12 in-stock vehicles sold"),
        "{held}"
    );

    // A new car, and a token the service refuses: delivery stops, and says why.
    let wednesday = site.export("wednesday.csv", &(0..13).map(Car::new).collect::<Vec<_>>());
    let (exit, lines) = json_run(
        &site,
        &["sync", wednesday.to_str().unwrap()],
        "revoked-token",
    )
    .await;
    assert_eq!(exit, 2, "{lines:#?}");
    let stopped = line_of(&lines, "delivery stopped: ");
    assert_eq!(stopped["level"], "ERROR", "{stopped}");
    assert!(stopped["error"].is_string(), "{stopped}");
    assert!(
        stopped["message"].as_str().unwrap().contains("401"),
        "{stopped}"
    );

    // The error that ends the process.
    std::fs::write(&site.config, "[api\n").unwrap();
    let (exit, lines) = json_run(&site, &["run"], "sandbox-token").await;
    assert_eq!(exit, 2);
    let stopped = line_of(&lines, "lotsync stopped: ");
    assert!(
        stopped["message"]
            .as_str()
            .unwrap()
            .contains("lotsync.toml"),
        "{stopped}"
    );
    assert!(stopped["error"].is_string(), "{stopped}");
}

/// `lotsync validate` under systemd (ExecStartPre, ExecReload: stderr is the journal's
/// stream, `JOURNAL_STREAM` names it): each problem line at priority err (`<3>`), so that
/// `journalctl -p err -u lotsync` shows why a start or a reload failed.
#[test]
fn validate_says_its_problems_at_priority_err_in_the_journal() {
    use std::os::unix::fs::MetadataExt;
    let site = Site::with(
        "validate-journal",
        "http://127.0.0.1:9",
        10,
        "",
        "",
        "[[feed]]\nname = \"main\"\ninbox = \"no-such-inbox\"\nlocation_id = 10\n",
    );
    let stream = site.path().join("stderr");
    let file = std::fs::File::create(&stream).unwrap();
    let meta = file.metadata().unwrap();
    let status = site
        .command(&["validate"])
        .env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))
        .stdout(Stdio::null())
        .stderr(file)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2));
    let said = std::fs::read_to_string(&stream).unwrap();
    assert!(said.contains("no-such-inbox"), "{said}");
    for line in said.lines() {
        assert!(line.starts_with("<3>"), "not at err: {line:?} in\n{said}");
    }
}
