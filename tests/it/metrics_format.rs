//! The metrics endpoint's formats, scraped from a real daemon over real HTTP after it delivered
//! a file to the sandbox: OpenMetrics by default and for Prometheus's own Accept header, the
//! classic text format for `Accept: text/plain; version=0.0.4`, the same samples in both, and
//! `promtool check metrics` passing on the classic scrape. promtool comes with Debian's
//! `prometheus` package (.ci/run installs it and sets `LOTSYNC_REQUIRE_PROMTOOL=1`); without it
//! and without that variable, that check is skipped with a note.

use crate::common;

use common::fleet::{export, Car};
use common::site::{drop_file, reports, Site};
use common::{free_loopback_port, sandbox_with};
use lotsync::sandbox::Behaviour;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

const WITHIN: Duration = Duration::from_secs(30);

/// Prometheus's own Accept header (2.x): OpenMetrics first.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,\
    application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// `GET url` with `accept`: its content type and body.
async fn scrape(url: &str, accept: Option<&str>) -> (String, String) {
    lotsync::api::install_crypto_provider();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut request = client.get(url);
    if let Some(accept) = accept {
        request = request.header(reqwest::header::ACCEPT, accept);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()[reqwest::header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_owned();
    (content_type, response.text().await.unwrap())
}

/// The sample lines, sorted.
fn samples(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    lines.sort();
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scrape_comes_in_the_format_asked_for_and_promtool_accepts_it() {
    let sb = sandbox_with(Behaviour::default()).await;
    let port = free_loopback_port();
    let site = Site::with(
        "metrics-format",
        &sb.base_url(),
        1000,
        "",
        &format!("metrics = \"127.0.0.1:{port}\""),
        common::MAIN_FEED,
    );
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    let cars: Vec<Car> = (0..5).map(Car::new).collect();
    drop_file(&site.inbox(), "monday.csv", export(&cars).as_bytes());
    site.wait_until(WITHIN, "monday.csv archived", || {
        !reports(&site.inbox(), "archive").is_empty()
    })
    .await;
    let url = format!("http://127.0.0.1:{port}/metrics");
    // The report is written before the file is counted: a moment.
    let filed = r#"lotsync_files_total{feed="main",outcome="applied"} 1"#;
    let start = std::time::Instant::now();
    while !scrape(&url, None).await.1.lines().any(|l| l == filed) {
        assert!(start.elapsed() < WITHIN, "{}", site.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (default_type, openmetrics) = scrape(&url, None).await;
    assert!(
        default_type.starts_with("application/openmetrics-text; version=1.0.0"),
        "{default_type}"
    );
    assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
    let (prometheus_type, _) = scrape(&url, Some(PROMETHEUS_ACCEPT)).await;
    assert_eq!(prometheus_type, default_type);

    let (classic_type, classic) = scrape(&url, Some("text/plain; version=0.0.4")).await;
    assert_eq!(classic_type, "text/plain; version=0.0.4; charset=utf-8");
    assert!(
        !classic.contains("# EOF") && !classic.contains("# UNIT"),
        "{classic}"
    );
    assert!(
        classic
            .lines()
            .any(|l| l == "# TYPE lotsync_files_total counter"),
        "{classic}"
    );
    // The figures that matter are in both, the same (the process's own move between scrapes).
    let stable = |text: &str| -> Vec<String> {
        samples(text)
            .into_iter()
            .filter(|l| !l.starts_with("process_"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(stable(&classic), stable(&openmetrics));
    for name in [
        "lotsync_build_info{version=",
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_open_fds ",
        "process_start_time_seconds ",
        r#"lotsync_request_duration_seconds_count{endpoint="POST /v1/inventory",answer="2xx"} "#,
        r#"lotsync_files_total{feed="main",outcome="held"} 0"#,
    ] {
        assert!(
            classic.lines().any(|l| l.starts_with(name)),
            "{name}\n{classic}"
        );
    }

    match Command::new("promtool").arg("--version").output() {
        Ok(_) => {
            let mut promtool = Command::new("promtool")
                .args(["check", "metrics"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            promtool
                .stdin
                .take()
                .unwrap()
                .write_all(classic.as_bytes())
                .unwrap();
            let checked = promtool.wait_with_output().unwrap();
            assert!(
                checked.status.success(),
                "promtool check metrics: {}{}\n{classic}",
                String::from_utf8_lossy(&checked.stdout),
                String::from_utf8_lossy(&checked.stderr)
            );
        }
        Err(_) if std::env::var_os("LOTSYNC_REQUIRE_PROMTOOL").is_some() => {
            panic!("LOTSYNC_REQUIRE_PROMTOOL is set and promtool cannot be run")
        }
        Err(_) => eprintln!(
            "note: promtool not found (apt-get install prometheus): `promtool check metrics` \
             skipped"
        ),
    }
}
