//! `lotsync sandbox` as a real process: the world it prints, the port it reports, the config
//! file it reads, and a clean stop on SIGTERM.

use lotsync::api::{ApiClient, ApiToken, ClientSettings, ErrorClass, VehiclePayload};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts the binary and reads stdout up to the `listening on` line; returns the lines and URL.
fn start(args: &[&str]) -> (Child, Vec<String>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lotsync"))
        .arg("sandbox")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lotsync starts");
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("stdout is text");
        if let Some(url) = line.strip_prefix("listening on ") {
            let url = url.to_owned();
            lines.push(line);
            return (child, lines, url);
        }
        lines.push(line);
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("no `listening on` line; stdout was {lines:#?}");
}

fn terminate(child: &mut Child) -> std::process::ExitStatus {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().expect("wait works") {
            return status;
        }
        assert!(Instant::now() < deadline, "sandbox did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn prints_the_default_world_and_serves_on_the_port_it_got() {
    let (mut child, lines, url) = start(&["--listen", "127.0.0.1:0"]);
    let text = lines.join("\n");
    assert!(text.contains("token \"sandbox-token\" is user 1"), "{text}");
    assert!(text.contains("organization 100 \"Demo Motors\""), "{text}");
    assert!(text.contains("organization 200 \"Other Dealer\""), "{text}");
    assert!(!url.ends_with(":0"), "the real port is printed: {url}");

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let api = ApiClient::new(ClientSettings::new(
            url.clone(),
            100,
            ApiToken::new("sandbox-token"),
        ))
        .unwrap();
        let created = api
            .upsert_vehicle(&VehiclePayload::new(11, "S1", "1HGCM82633A004352"))
            .await
            .unwrap();
        assert!(created.created());
        assert_eq!(api.list_vehicles().await.unwrap().value.len(), 1);
    });

    let status = terminate(&mut child);
    assert!(status.success(), "exit status {status}");
}

#[test]
fn reads_its_config_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let config = dir.join("sandbox.toml");
    std::fs::write(
        &config,
        r#"
[[tokens]]
token = "store-7-token"
user = 7

[[organizations]]
id = 700
name = "Lakeside Auto"
users = [7]

[[locations]]
id = 71
organization = 700

[behaviour]
list_shape = "resource"
page_size = 10
strict_transitions = true
enforce_retry_after = true

[behaviour.rate_limit]
rate = 100.0
burst = 20

[behaviour.faults]
seed = 5
html_200 = 0.0
wrong_vehicle = 0.0
silence = 0.0
retry_after_secs = 30
pad_answer_kib = 4
"#,
    )
    .unwrap();
    let (mut child, lines, url) = start(&[
        "--listen",
        "127.0.0.1:0",
        "--config",
        config.to_str().unwrap(),
    ]);
    let text = lines.join("\n");
    assert!(
        text.contains("organization 700 \"Lakeside Auto\": locations [71]"),
        "{text}"
    );
    assert!(
        text.contains(
            "resource lists of 10, strict transitions, rate limit 100/s, burst 20, \
             Retry-After enforced"
        ),
        "{text}"
    );
    assert!(
        text.contains("faults (seed 5): Retry-After 30 s on 429 and 503, answers padded by 4 KiB"),
        "{text}"
    );

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let api = ApiClient::new(ClientSettings::new(
            url.clone(),
            700,
            ApiToken::new("store-7-token"),
        ))
        .unwrap();
        let answer = api
            .upsert_vehicle(&VehiclePayload::new(71, "S1", "VIN1"))
            .await
            .unwrap();
        assert_eq!(answer.rate_limit.unwrap().limit, Some(20));
        let err = api.mark_in_stock(answer.value.id).await.unwrap_err();
        assert_eq!(
            err.class(),
            ErrorClass::Rejected,
            "strict transitions: {err}"
        );
        // The default world's token is not in this world.
        let stranger = ApiClient::new(ClientSettings::new(
            url.clone(),
            700,
            ApiToken::new("sandbox-token"),
        ))
        .unwrap();
        assert_eq!(
            stranger.list_vehicles().await.unwrap_err().status(),
            Some(401)
        );
    });
    assert!(terminate(&mut child).success());
}

#[test]
fn a_bad_config_exits_2_naming_every_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let config = dir.join("sandbox.toml");
    std::fs::write(
        &config,
        "[[locations]]\nid = 5\norganization = 999\n\n[behaviour]\npage_size = 500\n\
         [behaviour.faults]\nretry_after_secs = 0\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lotsync"))
        .args(["sandbox", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sandbox.toml"), "{err}");
    assert!(err.contains("location 5 names organization 999"), "{err}");
    assert!(err.contains("page_size is 500"), "{err}");
    assert!(
        err.contains("retry_after_secs is 0; it must be 1 to 86400"),
        "{err}"
    );

    std::fs::write(&config, "[behaviour]\nlist_shape = \"pages\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lotsync"))
        .args(["sandbox", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("list_shape") || err.contains("pages"), "{err}");
}

/// A first run on a laptop in two commands: `lotsync sandbox --site DIR` writes a ready site
/// (config, token, inbox) for itself and prints the command that runs the daemon on it; that
/// command, run as printed by a shell, takes an export dropped into the inbox to the sandbox.
#[test]
fn a_site_for_the_sandbox_runs_with_the_command_it_prints() {
    let dir = crate::common::TempDir::new("sandbox site");
    let site = dir.path().join("my lot");
    let mut sandbox = Command::new(env!("CARGO_BIN_EXE_lotsync"))
        .args(["sandbox", "--listen", "127.0.0.1:0", "--site"])
        .arg(&site)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("lotsync starts");
    let mut lines = BufReader::new(sandbox.stdout.take().expect("stdout is piped")).lines();
    let mut said = Vec::new();
    let run = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("no run command; stdout was {said:#?}"))
            .expect("stdout is text");
        said.push(line.clone());
        if let Some(command) = line.trim_start().strip_prefix("lotsync run") {
            break format!("lotsync run{command}");
        }
    };
    assert!(run.contains("--config"), "{run}");
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_lotsync"))
        .parent()
        .unwrap()
        .to_owned();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut daemon = Command::new("sh")
        .args(["-c", &format!("exec {run}")])
        .env("PATH", &path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sh runs");
    let export = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("feeds/samples/demo/1-monday-full.csv"),
    )
    .unwrap();
    std::fs::write(site.join("inbox/.monday.part"), export).unwrap();
    std::fs::rename(
        site.join("inbox/.monday.part"),
        site.join("inbox/monday.csv"),
    )
    .unwrap();
    let status = run.replacen("lotsync run", "lotsync status", 1);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut shown = String::new();
    while Instant::now() < deadline {
        let out = Command::new("sh")
            .args(["-c", &status])
            .env("PATH", &path)
            .output()
            .expect("sh runs");
        shown = String::from_utf8_lossy(&out.stdout).into_owned();
        if shown.contains("12 created") {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        shown.contains("monday.csv") && shown.contains("12 created"),
        "{shown}"
    );
    assert!(terminate(&mut daemon).success());
    terminate(&mut sandbox);
}
