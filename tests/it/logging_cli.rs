//! How `lotsync` writes its log, as a real process: JSON lines with structured fields for a log
//! store (`[daemon] log_format = "json"`), and under systemd's journal one entry per event with
//! its priority, also for the error that stops the process (a config error used to spread over
//! several journal lines, none of them at priority `err`).

use crate::common;

use common::fleet::{export, Car};
use common::site::{drop_file, reports, text, Site};
use common::{sandbox_with, MAIN_FEED};
use lotsync::sandbox::Behaviour;
use serde_json::Value;
use std::time::Duration;

/// The daemon's log as JSON lines: every line an object with a level and a message, and the
/// lines about a file carry `feed` and `file` as fields of their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_per_line_with_the_fields_apart() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::with(
        "logging-json",
        &sb.base_url(),
        1000,
        "",
        "log_format = \"json\"",
        MAIN_FEED,
    );
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    let cars: Vec<Car> = (0..5).map(Car::new).collect();
    drop_file(&site.inbox(), "monday.csv", export(&cars).as_bytes());
    site.wait_until(Duration::from_secs(30), "monday.csv archived", || {
        !reports(&site.inbox(), "archive").is_empty()
    })
    .await;
    daemon.signal("TERM");
    let (code, _) = daemon.exit(Duration::from_secs(15)).await;
    assert_eq!(code, Some(0), "{}", site.log());

    let log = site.log();
    let lines: Vec<Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: not JSON: {l}")))
        .collect();
    assert!(lines.len() >= 3, "{log}");
    for line in &lines {
        assert!(
            line["level"].is_string()
                && line["message"].is_string()
                && line["timestamp"].is_string(),
            "{line}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l["feed"] == "main"
                && l["file"].as_str().is_some_and(|f| f.contains("monday.csv"))),
        "no line with feed and file as fields:\n{log}"
    );
}

/// A config that cannot be read, under the journal: one entry at priority `err` (3), the
/// whole message on it. Where journald's socket is there the entry goes to it and stderr
/// stays empty; elsewhere (a container, CI) the stream systemd would read gets one `<3>` line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_error_is_one_journal_entry_at_priority_err() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("logging-journal", &sb.base_url());
    // A table never closed: the TOML error quotes the line, over several lines.
    std::fs::write(&site.config, "[api\nbase_url = \"http://x\"\n").unwrap();
    let mut cmd = site.command(&["run"]);
    cmd.env("LOTSYNC_LOG_FORMAT", "journal");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    if std::path::Path::new("/run/systemd/journal/socket").exists() {
        assert_eq!(stderr, "", "sent to the journal, not to stderr");
    } else {
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one entry: {stderr}");
        assert!(
            lines[0].starts_with("<3>lotsync: ") && lines[0].contains("lotsync.toml"),
            "{stderr}"
        );
        assert!(
            lines[0].contains("\\n"),
            "the message's line breaks are kept inside: {stderr}"
        );
    }

    // The same error as JSON: one object, at level ERROR, the message as a field.
    let mut cmd = site.command(&["run"]);
    cmd.env("LOTSYNC_LOG_FORMAT", "json");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    let line: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(line["level"], "ERROR", "{line}");
    assert!(
        line["error"]
            .as_str()
            .is_some_and(|e| e.contains("lotsync.toml")),
        "{line}"
    );
}
