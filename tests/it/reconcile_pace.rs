//! Reading the service's whole list under a rate limit, as real processes against the sandbox
//! on loopback: `lotsync reconcile` and a first start beside a service that already
//! holds a large lot go at the pace writes obey, a failed page is read again alone, a list that
//! shifts while it is read is still read whole, and giving up follows `give_up_after_secs`.

use crate::common;

use common::fleet::Car;
use common::site::{code, text, Site};
use common::{
    client, count, delete_vehicle, edit_vehicle, feedgen, sandbox_with, set_behaviour, state, stats,
};
use lotsync::api::VehiclePayload;
use lotsync::sandbox::{Behaviour, Faults, ListDrills, ListShift, RateLimitConfig};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const LIST: &str = "GET /v1/inventory";

/// The service's vehicles by VIN; fails on a VIN held twice.
fn by_vin(sandbox_state: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for v in sandbox_state["vehicles"].as_array().unwrap() {
        let vin = v["vehicle"]["vin"].as_str().unwrap().to_owned();
        assert!(
            out.insert(vin.clone(), v.clone()).is_none(),
            "{vin} is on the service twice"
        );
    }
    out
}

/// A site whose `[api]` says the service's limit (50/s, burst 10) and gives up after
/// `give_up` seconds.
fn limited_site(name: &str, base_url: &str, rate: u32, give_up: u64) -> Site {
    Site::with(
        name,
        base_url,
        rate,
        &format!("burst = 10\ngive_up_after_secs = {give_up}\n"),
        "",
        common::MAIN_FEED,
    )
}

/// 50 requests/s with a burst of 10, and `faults`.
fn limited(faults: Faults) -> Behaviour {
    Behaviour {
        rate_limit: Some(RateLimitConfig {
            rate: 50.0,
            burst: 10,
            headers: true,
        }),
        faults,
        ..Behaviour::default()
    }
}

/// 2% of requests fail with a 5xx (500 or 504, half each), reproducibly.
fn two_percent_5xx() -> Faults {
    Faults {
        seed: 23,
        http_500: 0.01,
        http_504: 0.01,
        ..Faults::default()
    }
}

/// Syncs `cars` as the site's first file with the service unlimited (the seeding, fast).
async fn seed(site: &Site, cars: &[Car]) {
    let file = site.export("seed.csv", cars);
    let out = site
        .lotsync_within(&["sync", file.to_str().unwrap()], Duration::from_secs(120))
        .await;
    assert_eq!(
        code(&out),
        0,
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// `lotsync reconcile --format json`, within `within`: its exit code and JSON.
async fn reconcile(site: &Site, within: Duration) -> (i32, Value, String) {
    let out = site
        .lotsync_within(&["reconcile", "--format", "json"], within)
        .await;
    let stderr = text(&out.stderr);
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (code(&out), json, stderr)
}

/// 3,000 vehicles (30 pages) behind a limit of 50/s with a burst of 10 and 2% of 5xx: the
/// reconciliation reads the list at the pace, exits 0 and repairs exactly the drift planted;
/// then a new state beside the same service applies its first file (it reads the same list
/// first and adopts the vehicles: nothing is created twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_list_is_read_under_a_rate_limit() {
    let sb = sandbox_with(Behaviour::default()).await;
    let cars: Vec<Car> = (0..3000).map(Car::new).collect();
    let site = limited_site("pace-large", &sb.base_url(), 1000, 60);
    seed(&site, &cars).await;
    let synced = by_vin(&state(&sb).await);
    assert_eq!(synced.len(), 3000);
    let vin = |n: u64| feedgen::vin(n);
    let id = |n: u64| synced[&vin(n)]["vehicle"]["id"].as_u64().unwrap();

    // Drift behind lotsync's back, spread over the pages, and a foreign vehicle.
    delete_vehicle(&sb, id(17)).await;
    delete_vehicle(&sb, id(2_450)).await;
    edit_vehicle(&sb, id(1_203), serde_json::json!({"sold": true})).await;
    edit_vehicle(&sb, id(2_999), serde_json::json!({"price": 1})).await;
    let foreign = VehiclePayload::new(10, "OTHER-TOOL", feedgen::vin(9_000));
    client(&sb).upsert_vehicle(&foreign).await.unwrap();

    // The service's limit, and lotsync told of it.
    set_behaviour(&sb, &limited(two_percent_5xx())).await;
    site.write_config(
        &sb.base_url(),
        50,
        "burst = 10\ngive_up_after_secs = 60\n",
        "",
        common::MAIN_FEED,
    );
    let before = stats(&sb).await;
    let (exit, json, stderr) = reconcile(&site, Duration::from_secs(90)).await;
    assert_eq!(exit, 0, "{json:#}\n{stderr}");
    let report = &json["report"];
    let mut recreated: Vec<String> = serde_json::from_value(report["recreated"].clone()).unwrap();
    recreated.sort();
    let mut deleted = vec![vin(17), vin(2_450)];
    deleted.sort();
    assert_eq!(recreated, deleted, "{report:#}");
    assert_eq!(report["in_stock_fixed"], serde_json::json!([vin(1_203)]));
    assert_eq!(
        report["fields_fixed"],
        serde_json::json!([{"vin": vin(2_999), "fields": ["price.selling"]}])
    );
    assert_eq!(report["sold_fixed"], serde_json::json!([]));
    assert_eq!(report["foreign"].as_array().unwrap().len(), 1, "{report:#}");
    assert_eq!(report["operations"], 4);
    assert_eq!(report["service_vehicles"], 2_999);
    // 2,999 vehicles are 30 pages of 100, each read once.
    assert_eq!(report["pages"], 30, "{report:#}");
    let after = stats(&sb).await;
    let list_requests = |st: &Value| -> u64 {
        st["requests"][LIST]
            .as_object()
            .map_or(0, |m| m.values().map(|n| n.as_u64().unwrap()).sum())
    };
    assert_eq!(
        count(&after, LIST, "200") - count(&before, LIST, "200"),
        30,
        "{:#}",
        after["requests"]
    );
    assert_eq!(
        list_requests(&after) - list_requests(&before),
        30 + report["retries"].as_u64().unwrap(),
        "one request per page, and one per retry: {:#}",
        after["requests"]
    );
    let now = by_vin(&state(&sb).await);
    assert_eq!(now.len(), 3001);
    for n in [17, 2_450, 1_203] {
        assert_eq!(now[&vin(n)]["vehicle"]["status"], "in-stock", "car {n}");
    }
    assert_eq!(
        now[&vin(2_999)]["vehicle"]["price"]["selling"],
        synced[&vin(2_999)]["vehicle"]["price"]["selling"]
    );

    // A first start of a new state beside the same service: the list first, then the file.
    let newcomer = limited_site("pace-newcomer", &sb.base_url(), 50, 60);
    let file = newcomer.export("first.csv", &cars);
    let before = stats(&sb).await;
    let out = newcomer
        .lotsync_within(&["sync", file.to_str().unwrap()], Duration::from_secs(90))
        .await;
    assert_eq!(
        code(&out),
        0,
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let after = stats(&sb).await;
    assert_eq!(
        count(&after, "POST /v1/inventory", "201"),
        count(&before, "POST /v1/inventory", "201"),
        "nothing created twice: {:#}",
        after["requests"]
    );
    assert_eq!(by_vin(&state(&sb).await).len(), 3001);
}

/// A 500 on page 3 of 3 costs one more request for page 3 and none for pages 1 and 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_page_is_read_again_alone() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = limited_site("pace-page-fault", &sb.base_url(), 1000, 60);
    seed(&site, &(0..250).map(Car::new).collect::<Vec<_>>()).await;
    set_behaviour(
        &sb,
        &Behaviour {
            list_drills: ListDrills {
                fail_pages: vec![3],
                shift: None,
            },
            ..limited(Faults::default())
        },
    )
    .await;
    let before = stats(&sb).await;
    let (exit, json, stderr) = reconcile(&site, Duration::from_secs(30)).await;
    assert_eq!(exit, 0, "{json:#}\n{stderr}");
    let after = stats(&sb).await;
    assert_eq!(
        count(&after, LIST, "200") - count(&before, LIST, "200"),
        3,
        "each page once: {:#}",
        after["requests"]
    );
    assert_eq!(count(&after, LIST, "500") - count(&before, LIST, "500"), 1);
    assert_eq!(json["report"]["pages"], 3, "{json:#}");
    assert_eq!(json["report"]["retries"], 1, "{json:#}");
    assert_eq!(json["report"]["operations"], 0, "{json:#}");
}

/// The first five vehicles of the list are deleted on the service right after page 1 is read,
/// so that five others move from page 2 onto page 1 behind the reader's back: the read sees
/// the total change and reads again, so that exactly the five deleted are re-created, none of
/// those that only moved (nothing missed) and nothing twice; the report says it read again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_that_shifts_while_read_is_read_whole() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = limited_site("pace-shift", &sb.base_url(), 1000, 60);
    seed(&site, &(0..250).map(Car::new).collect::<Vec<_>>()).await;
    let synced = by_vin(&state(&sb).await);
    assert_eq!(synced.len(), 250);
    // The front of the list: the five lowest ids.
    let mut by_id: Vec<(u64, String)> = synced
        .iter()
        .map(|(vin, v)| (v["vehicle"]["id"].as_u64().unwrap(), vin.clone()))
        .collect();
    by_id.sort();
    let mut deleted: Vec<String> = by_id[..5].iter().map(|(_, vin)| vin.clone()).collect();
    deleted.sort();
    set_behaviour(
        &sb,
        &Behaviour {
            list_drills: ListDrills {
                fail_pages: vec![],
                shift: Some(ListShift {
                    after_page: 1,
                    delete_first: 5,
                }),
            },
            ..limited(Faults::default())
        },
    )
    .await;
    let (exit, json, stderr) = reconcile(&site, Duration::from_secs(30)).await;
    assert_eq!(exit, 0, "{json:#}\n{stderr}");
    let report = &json["report"];
    let mut recreated: Vec<String> = serde_json::from_value(report["recreated"].clone()).unwrap();
    recreated.sort();
    assert_eq!(recreated, deleted, "{report:#}");
    assert_eq!(report["operations"], 5, "{report:#}");
    assert_eq!(report["service_vehicles"], 245, "{report:#}");
    assert!(
        report["pages_read_again"].as_u64().unwrap() >= 1,
        "{report:#}"
    );
    let notes = report["notes"].to_string();
    assert!(notes.contains("read again"), "{notes}");
    assert_eq!(by_vin(&state(&sb).await).len(), 250, "each VIN once");
}

/// Against a service that fails every request, `lotsync reconcile` and the first file of an
/// empty state give up after `give_up_after_secs` (3 s here), not after a fixed ~90 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn giving_up_on_the_list_follows_the_setting() {
    let sb = sandbox_with(Behaviour {
        faults: Faults {
            http_500: 1.0,
            ..Faults::default()
        },
        ..Behaviour::default()
    })
    .await;
    let site = limited_site("pace-give-up", &sb.base_url(), 50, 3);
    let started = Instant::now();
    let (exit, _, stderr) = reconcile(&site, Duration::from_secs(30)).await;
    assert_eq!(exit, 2, "{stderr}");
    assert!(
        stderr.contains("cannot read the service's list"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing answered for"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(15), "{stderr}");

    let file = site.export("first.csv", &(0..10).map(Car::new).collect::<Vec<_>>());
    let started = Instant::now();
    let out = site
        .lotsync_within(&["sync", file.to_str().unwrap()], Duration::from_secs(30))
        .await;
    assert_ne!(code(&out), 0);
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(
        text(&out.stderr).contains("nothing answered for"),
        "{}",
        text(&out.stderr)
    );
}

/// Through the running daemon: a reconciliation that fails (every request fails; giving up
/// after 1 s) is said by `lotsync status` (WARNING, the error, the next try); the daemon tries
/// it again by itself (`reconcile_retry_secs = 1`, doubling) and, once the service answers
/// again, it succeeds and status says when.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_tries_a_failed_reconciliation_again() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::with(
        "pace-retry",
        &sb.base_url(),
        1000,
        "burst = 10\ngive_up_after_secs = 1\n",
        "reconcile_retry_secs = 1\n",
        common::MAIN_FEED,
    );
    seed(&site, &(0..20).map(Car::new).collect::<Vec<_>>()).await;
    set_behaviour(
        &sb,
        &Behaviour {
            faults: Faults {
                http_500: 1.0,
                ..Faults::default()
            },
            ..Behaviour::default()
        },
    )
    .await;
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    let out = site
        .lotsync_within(&["reconcile"], Duration::from_secs(30))
        .await;
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("nothing answered for"),
        "{}",
        text(&out.stderr)
    );
    let (check, status) = site.status_check().await;
    assert_eq!(check, 1, "WARNING: {status:#}");
    assert!(
        status["reconcile_failed"]["error"]
            .as_str()
            .unwrap()
            .contains("cannot read the service's list"),
        "{status:#}"
    );
    assert!(
        status["reconcile_failed"]["next_try"].is_string(),
        "{status:#}"
    );
    assert!(status["reconcile_succeeded_at"].is_null(), "{status:#}");

    set_behaviour(&sb, &Behaviour::default()).await;
    let started = Instant::now();
    loop {
        let status = site.status().await;
        if status["reconcile_succeeded_at"].is_string() {
            assert!(status["reconcile_failed"].is_null(), "{status:#}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "not tried again: {status:#}\nlog:\n{}",
            site.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(site
        .log()
        .contains("trying the failed reconciliation again"));
    daemon.signal("TERM");
    daemon.exit(Duration::from_secs(10)).await;
}
