//! Starting right, as a real process: `lotsync run` and missing inboxes (refused with the
//! path and the way out, created only when asked with `--create-dirs`), and `lotsync validate
//! --online` proving the URL, token and organization with one request.

use crate::common;

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
    // status checks what run checks at start: not OK while an inbox is missing.
    let out = site
        .lotsync_within(&["status"], Duration::from_secs(20))
        .await;
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "CRITICAL: {said}");
    assert!(said.contains("feed east: no such inbox"), "{said}");

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

/// `lotsync validate --online` asks the service once with the config's token: accepted, it
/// says so; refused, it exits 2 with the service's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_online_proves_the_url_token_and_organization_with_one_request() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("validate-online", &sb.base_url());
    let out = site
        .lotsync_within(&["validate", "--online"], Duration::from_secs(20))
        .await;
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}{}", text(&out.stderr));
    assert!(
        said.contains("online: GET /v1/inventory?per_page=1 answered 200: the service takes the token for organization 100 (it has no vehicle yet)"),
        "{said}"
    );
    let st = common::stats(&sb).await;
    assert_eq!(common::count(&st, "GET /v1/inventory", "200"), 1, "{st}");

    let mut cmd = site.command(&["validate", "--online"]);
    cmd.env("LOTSYNC_TEST_TOKEN", "revoked-token");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let said = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.starts_with("online: ") && said.contains("401"),
        "{said}"
    );
    let st = common::stats(&sb).await;
    assert_eq!(
        common::count(&st, "GET /v1/inventory", "401"),
        1,
        "one request: {st}"
    );
}

/// `lotsync check --config FILE`, run from another folder, finds `--profile NAME` in the
/// config's `profiles_dir`, as the daemon would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_finds_profiles_next_to_the_config() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("check-profiles", &sb.base_url());
    let profiles = site.path().join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(
        profiles.join("serials.toml"),
        "[fields]\nvin = \"Unit\"\nstock = \"Tag\"\n",
    )
    .unwrap();
    let config = std::fs::read_to_string(&site.config).unwrap();
    std::fs::write(
        &site.config,
        format!("profiles_dir = \"profiles\"\n{config}"),
    )
    .unwrap();
    let export = site.path().join("units.csv");
    std::fs::write(&export, "Unit,Tag\n1HGCM82633A004352,A1\n").unwrap();

    let elsewhere = std::env::temp_dir();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_lotsync"));
    cmd.current_dir(&elsewhere)
        .args(["check", "--profile", "serials", "--config"])
        .arg(&site.config)
        .arg(&export);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}{}", text(&out.stderr));
    assert!(
        said.contains("profile serials") && said.contains("1 accepted"),
        "{said}"
    );
}
