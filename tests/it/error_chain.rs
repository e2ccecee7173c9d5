//! An error and its cause said once each, as a real process: our messages leave their source
//! out and the CLI prints the chain (an io error used to be printed twice: "Is a directory
//! (os error 21): Is a directory (os error 21)").

use crate::common;

use common::site::{text, Site};
use common::{sandbox_with, TempDir};
use lotsync::sandbox::Behaviour;
use std::process::Command;

/// The io error's text is in `stderr` exactly once, after `what`.
fn said_once(stderr: &str, what: &str, os_error: &str) {
    assert_eq!(stderr.matches("(os error ").count(), 1, "{stderr}");
    assert_eq!(stderr.matches(os_error).count(), 1, "{stderr}");
    let at = stderr
        .find(what)
        .unwrap_or_else(|| panic!("no {what:?}: {stderr}"));
    assert!(
        stderr[at..].contains(os_error),
        "the cause after the message: {stderr}"
    );
}

#[test]
fn a_config_that_cannot_be_read_says_its_cause_once() {
    let dir = TempDir::new("chain-config");
    let export = dir.path().join("f.csv");
    std::fs::write(&export, "VIN,Stock\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lotsync"))
        .arg("sync")
        .arg("--config")
        .arg(dir.path())
        .arg(&export)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    said_once(
        &text(&out.stderr),
        &format!("cannot read config {}: ", dir.path().display()),
        "(os error 21)",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_dir_that_cannot_be_made_says_its_cause_once() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("chain-state", &sb.base_url());
    // A file where the state dir should be.
    std::fs::write(site.state_dir(), "not a folder").unwrap();
    let export = site.export("f.csv", &[]);
    let out = site.lotsync(&["sync", export.to_str().unwrap()]).await;
    assert_ne!(out.status.code(), Some(0));
    said_once(
        &text(&out.stderr),
        "cannot create or lock the state dir",
        "(os error 17)",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_socket_that_cannot_be_bound_says_its_cause_once() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("chain-socket", &sb.base_url());
    // A file where the socket's folder should be.
    std::fs::write(site.path().join("run"), "not a folder").unwrap();
    let out = site
        .lotsync_within(&["run"], std::time::Duration::from_secs(30))
        .await;
    assert_ne!(out.status.code(), Some(0));
    said_once(&text(&out.stderr), "control socket", "(os error ");
}
