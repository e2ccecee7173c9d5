//! `lotsync run` and missing inboxes, as a real process: refused with the path and the way
//! out, created only when asked with `--create-dirs`.

mod common;

use common::site::{text, Site};
use common::{sandbox_with, MAIN_FEED};
use lotsync::sandbox::Behaviour;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_inbox_is_refused_unless_asked_to_create_it() {
    let sb = sandbox_with(Behaviour::default()).await;
    let feeds = format!(
        "{MAIN_FEED}\n[[feed]]\nname = \"east\"\ninbox = \"east-inbox\"\nlocation_id = 11\n"
    );
    let site = Site::with("run-dirs", &sb.base_url(), 1000, "", "", &feeds);
    let east = site.path().join("east-inbox");
    assert!(!east.exists());

    let out = site.lotsync_within(&["run"], Duration::from_secs(20)).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(
        said.contains("no such inbox: feed east: ")
            && said.contains("east-inbox")
            && said.contains("--create-dirs"),
        "{said}"
    );
    assert!(
        !said.contains("feed main"),
        "the inbox that exists is not named: {said}"
    );
    assert!(!east.exists(), "nothing created without being asked");

    let mut daemon = site.command(&["run", "--create-dirs"]).spawn().unwrap();
    let start = std::time::Instant::now();
    while !east.join("archive").is_dir() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "east's folders not made"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status();
    let status = tokio::task::spawn_blocking(move || daemon.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "{status}");
}
