//! The Grafana dashboard the .deb installs (`packaging/grafana/lotsync.json`, as
//! `/usr/share/lotsync/grafana/lotsync.json`) against a real scrape: a real daemon process,
//! the sandbox on loopback, one delivered file and one reconciliation, then `GET /metrics`.
//! Every metric its queries name must be in the scrape, with every label they match on or
//! group by; a renamed metric or label leaves a panel empty without any other warning.

use crate::common;

use common::site::{drop_file, reports, Site};
use common::{free_loopback_port, sandbox_with};
use lotsync::sandbox::Behaviour;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

const DASHBOARD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/packaging/grafana/lotsync.json"
);
const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/feeds/samples/demo");

/// How long the daemon gets for each thing awaited.
const WITHIN: Duration = Duration::from_secs(20);

/// Labels Prometheus adds to every series it scrapes (the target's), which the exposition
/// itself does not carry.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];

/// Every metric a query names, with the labels it matches on or groups by.
#[derive(Debug, Default)]
struct Uses {
    metrics: BTreeMap<String, BTreeSet<String>>,
    /// Labels in `by (…)`/`without (…)`, with the query they are in: each must be on one of
    /// that query's metrics.
    grouped: Vec<(String, String)>,
}

/// The metric names and label names of a scrape: `name{a="1",b="2"} 3` gives name -> {a, b}.
fn scraped(exposition: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut series: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in exposition.lines().filter(|l| !l.starts_with('#')) {
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = series.entry(line[..end].to_owned()).or_default();
        if line[end..].starts_with('{') {
            let (names, _) = label_names(&line[end + 1..]);
            labels.extend(names);
        }
    }
    series
}

/// The label names of matchers or labels `a="x",b=~"y"}` up to the closing brace, and the
/// length read (quoted values may hold anything, escaped quotes included).
fn label_names(text: &str) -> (Vec<String>, usize) {
    let mut names = Vec::new();
    let mut name = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '}' => return (names, i + 1),
            '"' => {
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '=' | '!' | '~' if !name.is_empty() => names.push(std::mem::take(&mut name)),
            c if c.is_ascii_alphanumeric() || c == '_' => name.push(c),
            _ => name.clear(),
        }
    }
    (names, text.len())
}

/// Reads one query (PromQL, or Grafana's `label_values(metric{…}, label)`).
fn read_query(query: &str, uses: &mut Uses) {
    let mut rest = query;
    while let Some(at) = rest.find("lotsync_") {
        let name_len = rest[at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len() - at);
        let name = &rest[at..at + name_len];
        let labels = uses.metrics.entry(name.to_owned()).or_default();
        rest = &rest[at + name_len..];
        if let Some(matchers) = rest.strip_prefix('{') {
            let (names, read) = label_names(matchers);
            labels.extend(names);
            rest = &matchers[read..];
        }
    }
    for keyword in ["by (", "without ("] {
        for (at, _) in query.match_indices(keyword) {
            let inside = &query[at + keyword.len()..];
            let inside = &inside[..inside.find(')').unwrap_or(inside.len())];
            for label in inside.split(',').map(str::trim).filter(|l| !l.is_empty()) {
                uses.grouped.push((label.to_owned(), query.to_owned()));
            }
        }
    }
    if let Some(args) = query.trim().strip_prefix("label_values(") {
        let args = args.strip_suffix(')').unwrap_or(args);
        if let Some((selector, label)) = args.rsplit_once(',') {
            uses.grouped
                .push((label.trim().to_owned(), selector.to_owned()));
        }
    }
}

/// Every query of the dashboard: the panels' `expr`s (rows' panels included) and the
/// template variables' queries.
fn queries(value: &serde_json::Value, found: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr" | "query" | "definition", serde_json::Value::String(q))
                        if q.contains("lotsync_") =>
                    {
                        found.push(q.clone())
                    }
                    _ => queries(value, found),
                }
            }
        }
        serde_json::Value::Array(values) => values.iter().for_each(|v| queries(v, found)),
        _ => {}
    }
}

/// The dashboard's queries read for metric and label names.
fn dashboard_uses() -> (Vec<String>, Uses) {
    let text = std::fs::read_to_string(DASHBOARD)
        .unwrap_or_else(|e| panic!("cannot read the dashboard {DASHBOARD}: {e}"));
    let dashboard: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{DASHBOARD} is not JSON: {e}"));
    let mut found = Vec::new();
    queries(&dashboard, &mut found);
    let mut uses = Uses::default();
    for query in &found {
        read_query(query, &mut uses);
    }
    (found, uses)
}

#[test]
fn the_query_reader_finds_names_matchers_and_groups() {
    let mut uses = Uses::default();
    read_query(
        r#"sum by (feed, folder) (lotsync_inbox_files{instance=~"$instance", feed=~"a,b}\"c", folder="held"}) / lotsync_requests_total"#,
        &mut uses,
    );
    read_query(
        r#"label_values(lotsync_inbox_files{x="1"}, feed)"#,
        &mut uses,
    );
    let labels =
        |name: &str| -> Vec<&str> { uses.metrics[name].iter().map(String::as_str).collect() };
    assert_eq!(
        uses.metrics.keys().collect::<Vec<_>>(),
        ["lotsync_inbox_files", "lotsync_requests_total"]
    );
    assert_eq!(
        labels("lotsync_inbox_files"),
        ["feed", "folder", "instance", "x"]
    );
    assert!(labels("lotsync_requests_total").is_empty());
    let grouped: Vec<&str> = uses.grouped.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(grouped, ["feed", "folder", "feed"]);

    let series = scraped(
        "# TYPE lotsync_files counter\nlotsync_files_total{feed=\"a\\\"}\",outcome=\"held\"} 1\n\
         lotsync_requests_total 3\n# EOF\n",
    );
    assert_eq!(series["lotsync_files_total"].len(), 2, "{series:?}");
    assert!(series["lotsync_requests_total"].is_empty());
}

/// `GET url`'s body once it answers 200 and `done` holds for it; fails after [`WITHIN`].
async fn scrape_until(site: &Site, url: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
    lotsync::api::install_crypto_provider();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Ok(response) = http.get(url).send().await {
            if response.status() == 200 {
                let body = response.text().await.unwrap_or_default();
                if done(&body) {
                    return body;
                }
            }
        }
        assert!(
            start.elapsed() < WITHIN,
            "{what}: not within {WITHIN:?}\nlog:\n{}",
            site.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_and_label_the_dashboard_queries_is_in_a_real_scrape() {
    let (found, uses) = dashboard_uses();
    // The reader is not reading nothing: the panels the issue asks for are there.
    for name in [
        "lotsync_operations_total",
        "lotsync_outbox_operations",
        "lotsync_inbox_files",
        "lotsync_files_total",
        "lotsync_delivery_stopped",
        "lotsync_throttled_responses_total",
    ] {
        assert!(uses.metrics.contains_key(name), "no query uses {name}");
    }

    let sb = sandbox_with(Behaviour::default()).await;
    let port = free_loopback_port();
    let site = Site::with(
        "grafana-dashboard",
        &sb.base_url(),
        200,
        "",
        &format!("metrics = \"127.0.0.1:{port}\""),
        "[[feed]]\nname = \"main\"\ninbox = \"main\"\nlocation_id = 10\n",
    );
    let inbox = site.feed_inbox("main");
    let daemon = site.start();
    let url = format!("http://127.0.0.1:{port}/metrics");

    // A delivered file and a reconciliation: the series that have no sample before their
    // first (a feed's last success, the last reconciliation's) are there too.
    scrape_until(&site, &url, "the first scrape", |_| true).await;
    let monday = std::fs::read(Path::new(DEMO).join("1-monday-full.csv")).unwrap();
    drop_file(&inbox, "monday.csv", &monday);
    site.wait_until(WITHIN, "monday archived", || {
        reports(&inbox, "archive").len() == 1
    })
    .await;
    let reconciled = site.lotsync(&["reconcile"]).await;
    assert_eq!(
        common::site::code(&reconciled),
        0,
        "{}",
        common::site::text(&reconciled.stderr)
    );
    let exposition = scrape_until(&site, &url, "monday and the reconciliation counted", |b| {
        b.contains("lotsync_files_total{") && b.contains("lotsync_reconcile_last_success")
    })
    .await;
    daemon.signal("TERM");
    daemon.exit(WITHIN).await;

    let series = scraped(&exposition);
    let mut missing = Vec::new();
    for (name, labels) in &uses.metrics {
        let Some(scraped_labels) = series.get(name) else {
            missing.push(format!("metric {name}"));
            continue;
        };
        for label in labels {
            if !TARGET_LABELS.contains(&label.as_str()) && !scraped_labels.contains(label) {
                missing.push(format!("label {label} of {name}"));
            }
        }
    }
    for (label, query) in &uses.grouped {
        let on_a_metric = uses
            .metrics
            .keys()
            .filter(|name| query.contains(name.as_str()))
            .any(|name| series.get(name).is_some_and(|l| l.contains(label)));
        if !TARGET_LABELS.contains(&label.as_str()) && !on_a_metric {
            missing.push(format!("label {label} grouped by in {query}"));
        }
    }
    assert!(
        missing.is_empty(),
        "the dashboard's {} queries use what a scrape does not have:\n  {}\nthe scrape:\n{exposition}",
        found.len(),
        missing.join("\n  ")
    );
}
