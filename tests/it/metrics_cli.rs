//! The metrics endpoint of `lotsync run` (`[daemon] metrics`), scraped over real HTTP from a
//! real daemon process against the sandbox on loopback: the figures after a delivered file
//! and a reconciliation, `/health` 200 while delivery works and 503 once the service refuses the token, a Unix
//! socket, and a port already taken failing the start with the key named.

use crate::common;

use common::site::{drop_file, reports, Daemon, Site};
use common::{free_loopback_port, sandbox_with, state, vehicles};
use lotsync::sandbox::Behaviour;
use std::path::Path;
use std::time::{Duration, Instant};

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/feeds/samples/demo");

/// How long the daemon gets for each thing awaited (a start, a delivery, a stop).
const WITHIN: Duration = Duration::from_secs(20);

fn monday() -> Vec<u8> {
    std::fs::read(Path::new(DEMO).join("1-monday-full.csv")).unwrap()
}

/// A site whose daemon serves its metrics at `metrics` (the value of the key), with one
/// full feed `main` reading `main/` (created).
fn site(name: &str, base_url: &str, metrics: &str) -> Site {
    let site = Site::with(
        name,
        base_url,
        200,
        "",
        &format!("metrics = \"{metrics}\""),
        "[[feed]]\nname = \"main\"\ninbox = \"main\"\nlocation_id = 10\n",
    );
    site.feed_inbox("main");
    site
}

fn http() -> reqwest::Client {
    lotsync::api::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// `GET url`: status, content type and body; None while nothing answers (not started yet).
async fn get(url: &str) -> Option<(u16, String, String)> {
    let response = http().get(url).send().await.ok()?;
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    Some((status, content_type, response.text().await.ok()?))
}

/// The value of one series (`name{labels}` exactly as exposed) in an exposition.
fn sample(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.trim().parse().ok()
    })
}

/// Polls `url` until `done` holds for its answer; fails with the daemon's log after
/// [`WITHIN`] (or when the daemon exits).
async fn poll(
    site: &Site,
    daemon: &mut Daemon,
    url: &str,
    what: &str,
    done: impl Fn(u16, &str) -> bool,
) -> (u16, String, String) {
    let start = Instant::now();
    let mut last = None;
    loop {
        if let Some((status, content_type, body)) = get(url).await {
            if done(status, &body) {
                return (status, content_type, body);
            }
            last = Some((status, body));
        }
        if let Some(exit) = daemon.child.try_wait().unwrap() {
            panic!("{what}: the daemon exited ({exit})\nlog:\n{}", site.log());
        }
        assert!(
            start.elapsed() < WITHIN,
            "{what}: not within {WITHIN:?}; last answer {last:?}\nlog:\n{}",
            site.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivered_file_shows_in_the_scrape_and_health_is_ok() {
    let sb = sandbox_with(Behaviour::default()).await;
    let port = free_loopback_port();
    let site = site(
        "metrics-scrape",
        &sb.base_url(),
        &format!("127.0.0.1:{port}"),
    );
    let inbox = site.feed_inbox("main");
    let mut daemon = site.start();
    let base = format!("http://127.0.0.1:{port}");

    // Before any file: served, healthy, nothing filed yet.
    let (_, _, before) = poll(
        &site,
        &mut daemon,
        &format!("{base}/metrics"),
        "the first scrape",
        |s, _| s == 200,
    )
    .await;
    assert_eq!(
        sample(&before, "lotsync_outbox_operations"),
        Some(0.0),
        "{before}"
    );
    // Every outcome's series is there from the start, at 0 (`increase()` sees the first).
    assert_eq!(
        sample(
            &before,
            r#"lotsync_files_total{feed="main",outcome="applied"}"#
        ),
        Some(0.0),
        "{before}"
    );

    drop_file(&inbox, "monday.csv", &monday());
    site.wait_until(WITHIN, "monday archived", || {
        reports(&inbox, "archive").len() == 1
    })
    .await;
    let report = &reports(&inbox, "archive")[0];
    let created = report["counts"]["create"].as_u64().unwrap();
    assert_eq!(created, 12, "{report:#}");
    assert_eq!(vehicles(&state(&sb).await), 12);

    // The report is written before the file is counted: the scrape may come a moment early.
    let filed = r#"lotsync_files_total{feed="main",outcome="applied"}"#;
    let (status, content_type, metrics) = poll(
        &site,
        &mut daemon,
        &format!("{base}/metrics"),
        "monday counted",
        |_, body| sample(body, filed) == Some(1.0),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    assert_eq!(sample(&metrics, filed), Some(1.0), "{metrics}");
    assert_eq!(
        sample(
            &metrics,
            r#"lotsync_operations_total{kind="create",answer="applied"}"#
        ),
        Some(created as f64),
        "{metrics}"
    );
    for answer in ["rejected", "retryable", "fatal"] {
        let series = format!(r#"lotsync_operations_total{{kind="create",answer="{answer}"}}"#);
        assert_eq!(sample(&metrics, &series), Some(0.0), "{series}\n{metrics}");
    }
    // The list read to learn the organization, then one request per vehicle.
    let requests = sample(&metrics, "lotsync_requests_total").unwrap();
    assert!(requests >= created as f64, "{metrics}");
    assert_eq!(
        sample(&metrics, "lotsync_throttled_responses_total"),
        Some(0.0),
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "lotsync_outbox_operations"),
        Some(0.0),
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "lotsync_delivery_stopped"),
        Some(0.0),
        "{metrics}"
    );
    let now = lotsync::clock::UtcTime::now().unix() as f64;
    let success = sample(
        &metrics,
        r#"lotsync_last_success_timestamp_seconds{feed="main"}"#,
    )
    .unwrap_or_else(|| panic!("no last success\n{metrics}"));
    assert!(success > 0.0 && success <= now, "{success} (now {now})");
    let started = sample(&metrics, "lotsync_start_time_seconds").unwrap();
    assert!(started <= success, "started {started}, success {success}");
    let rate = sample(&metrics, "lotsync_settled_rate_requests_per_second").unwrap();
    assert!(rate > 0.0 && rate <= 200.0, "{metrics}");
    for folder in ["waiting", "held", "failed"] {
        let series = format!(r#"lotsync_inbox_files{{feed="main",folder="{folder}"}}"#);
        assert_eq!(sample(&metrics, &series), Some(0.0), "{series}\n{metrics}");
    }
    assert!(metrics.ends_with("# EOF\n"), "{metrics}");

    assert_eq!(
        get(&format!("{base}/health")).await,
        Some((200, "text/plain; charset=utf-8".into(), "ok\n".into()))
    );
    let (status, _, _) = get(&format!("{base}/nothing-here")).await.unwrap();
    assert_eq!(status, 404);

    // A reconciliation through the daemon (as the nightly timer's): nothing to repair.
    let reconciled = site.lotsync(&["reconcile"]).await;
    assert_eq!(
        common::site::code(&reconciled),
        0,
        "{}",
        common::site::text(&reconciled.stderr)
    );
    let (_, _, metrics) = get(&format!("{base}/metrics")).await.unwrap();
    assert_eq!(
        sample(&metrics, r#"lotsync_reconciliations_total{result="ok"}"#),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(sample(&metrics, filed), Some(1.0), "{metrics}");

    // Stops with the daemon.
    daemon.signal("TERM");
    let (code, _) = daemon.exit(WITHIN).await;
    assert_eq!(code, Some(0), "{}", site.log());
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "nothing listens once the daemon stopped"
    );
    assert!(
        site.log()
            .contains(&format!("listen=http://127.0.0.1:{port}")),
        "the log says where: {}",
        site.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_makes_health_503_with_the_reason() {
    let sb = sandbox_with(Behaviour::default()).await;
    let port = free_loopback_port();
    let site = site("metrics-401", &sb.base_url(), &format!("127.0.0.1:{port}"));
    let inbox = site.feed_inbox("main");
    let mut daemon = site.start_with_env(&[("LOTSYNC_TEST_TOKEN", "revoked-token")]);
    let base = format!("http://127.0.0.1:{port}");
    let (status, _, body) = poll(
        &site,
        &mut daemon,
        &format!("{base}/health"),
        "served",
        |_, _| true,
    )
    .await;
    assert_eq!(
        (status, body.as_str()),
        (200, "ok\n"),
        "nothing refused yet"
    );

    drop_file(&inbox, "monday.csv", &monday());
    let (status, content_type, body) = poll(
        &site,
        &mut daemon,
        &format!("{base}/health"),
        "health says delivery stopped",
        |status, _| status != 200,
    )
    .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(content_type, "text/plain; charset=utf-8");
    assert!(
        body.starts_with("delivery stopped since ") && body.contains("(401)"),
        "{body}"
    );
    let (_, _, metrics) = get(&format!("{base}/metrics")).await.unwrap();
    assert_eq!(
        sample(&metrics, "lotsync_delivery_stopped"),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"lotsync_files_total{feed="main",outcome="held"}"#
        ),
        Some(0.0),
        "nothing filed: {metrics}"
    );
    assert_eq!(vehicles(&state(&sb).await), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unix_socket_serves_health_and_is_removed_at_the_stop() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sb = sandbox_with(Behaviour::default()).await;
    let site = site("metrics-unix", &sb.base_url(), "SOCKET");
    let socket = site.path().join("run/metrics.sock");
    let config = std::fs::read_to_string(&site.config).unwrap();
    std::fs::write(
        &site.config,
        config.replace("SOCKET", &socket.display().to_string()),
    )
    .unwrap();
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    let start = Instant::now();
    let mut stream = loop {
        match tokio::net::UnixStream::connect(&socket).await {
            Ok(stream) => break stream,
            Err(e) => assert!(start.elapsed() < WITHIN, "{e}\nlog:\n{}", site.log()),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: lotsync\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
    assert!(reply.ends_with("\r\n\r\nok\n"), "{reply}");
    daemon.signal("TERM");
    let (code, _) = daemon.exit(WITHIN).await;
    assert_eq!(code, Some(0), "{}", site.log());
    assert!(!socket.exists(), "the socket file is removed at the stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_taken_fails_the_start_naming_the_key() {
    let sb = sandbox_with(Behaviour::default()).await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let site = site(
        "metrics-taken",
        &sb.base_url(),
        &format!("127.0.0.1:{port}"),
    );
    let daemon = site.start();
    let (code, _) = daemon.exit(WITHIN).await;
    assert_eq!(code, Some(2), "{}", site.log());
    let log = site.log();
    assert!(
        log.contains(&format!(
            "daemon.metrics http://127.0.0.1:{port}: cannot listen there"
        )),
        "{log}"
    );
    assert!(
        !site.socket().exists(),
        "the control socket is not left behind"
    );
    drop(taken);
}

/// Local clients cannot keep `/health` from answering. 32 idle connections
/// and 32 that pipeline requests and never read fill the pool; `/health` still answers at
/// once (before, the scrape waited for a place until its timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_answers_while_idle_and_unread_connections_fill_the_pool() {
    use std::io::Write;
    let sb = sandbox_with(Behaviour::default()).await;
    let port = free_loopback_port();
    let site = site("metrics-busy", &sb.base_url(), &format!("127.0.0.1:{port}"));
    let mut daemon = site.start();
    let base = format!("http://127.0.0.1:{port}");
    poll(
        &site,
        &mut daemon,
        &format!("{base}/health"),
        "the first answer",
        |s, _| s == 200,
    )
    .await;
    let address = format!("127.0.0.1:{port}");
    let mut held = Vec::new();
    for _ in 0..32 {
        held.push(std::net::TcpStream::connect(&address).expect("connects"));
    }
    let pipelined = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(2000);
    for _ in 0..32 {
        let mut stream = std::net::TcpStream::connect(&address).expect("connects");
        stream.set_nonblocking(true).unwrap();
        // As much as the socket takes; the answers are never read.
        let _ = stream.write_all(pipelined.as_bytes());
        held.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = Instant::now();
    let health = get(&format!("{base}/health")).await;
    assert!(
        matches!(&health, Some((200, _, _))),
        "{health:?} after {:?}\n{}",
        asked.elapsed(),
        site.log()
    );
    drop(held);
    daemon.signal("TERM");
}
