//! `lotsync reconcile` as a real process against the sandbox on loopback, with a real state on
//! disk: drift injected behind lotsync's back is repaired and foreign vehicles are left alone;
//! a lost state is rebuilt from the service and the archive without creating anything twice or
//! sending anything again.

use crate::common;

use common::site::{code, text};
use common::{
    client, count, delete_vehicle, edit_vehicle, feedgen, sandbox_with, state, stats, TempDir,
};
use lotsync::api::{ApiToken, VehiclePayload};
use lotsync::config::Config;
use lotsync::daemon::FilePipeline;
use lotsync::inbox::Outcome;
use lotsync::mapper::{ExportFile, Mapped, Profile};
use lotsync::outbox::Outbox;
use lotsync::sandbox::{Behaviour, RunningSandbox};
use lotsync::state::State;
use lotsync::upload::{UploadSettings, Uploader};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

/// A dealership: a config (one full feed, location 10), a state dir and an inbox.
struct Site {
    dir: TempDir,
    config: PathBuf,
}

impl Site {
    fn new(name: &str, sb: &RunningSandbox) -> Site {
        let dir = TempDir::new(name);
        std::fs::create_dir_all(dir.path().join("inbox")).unwrap();
        let config = dir.path().join("lotsync.toml");
        let text = common::site_config(&sb.base_url(), 1000, "") + common::MAIN_FEED;
        std::fs::write(&config, text).unwrap();
        Site { dir, config }
    }

    fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// An export of cars `ns` (prices from `price`), outside the inbox.
    fn export(
        &self,
        name: &str,
        ns: impl Iterator<Item = u64>,
        price: impl Fn(u64) -> u64,
    ) -> PathBuf {
        let mut text = String::from("VIN,Stock,Year,Make,Model,Price,Miles,Status\n");
        for n in ns {
            text.push_str(&format!(
                "{},S{n:05},{},Ford,F-150,\"${}\",{},In Stock\n",
                feedgen::vin(n),
                2015 + n % 10,
                price(n),
                1000 + n * 37
            ));
        }
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Runs `lotsync ARGS --config …` to the end (off the runtime that serves the sandbox).
    async fn lotsync(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lotsync"));
        cmd.args(args)
            .arg("--config")
            .arg(&self.config)
            .env("LOTSYNC_TEST_TOKEN", "sandbox-token")
            .env("RUST_LOG", "info");
        let out = tokio::task::spawn_blocking(move || cmd.output().expect("lotsync runs"))
            .await
            .unwrap();
        let printed = format!("{}{}", text(&out.stdout), text(&out.stderr));
        common::advice::check(&printed, &self.config, true, &mut Default::default());
        out
    }

    /// Drops `file` into the inbox and takes it through the daemon's file pipeline (claimed,
    /// planned, delivered, archived with its report), as `lotsync run` does.
    async fn drop_file(&self, file: &Path) -> Outcome {
        let config = Arc::new(Config::load(&self.config).unwrap());
        let feed = config.feeds[0].clone();
        let dropped = feed.inbox.join(file.file_name().unwrap());
        std::fs::copy(file, &dropped).unwrap();
        let client = lotsync::api::ApiClient::new(
            config.api.client_settings(ApiToken::new("sandbox-token")),
        )
        .unwrap();
        let outbox = Arc::new(Outbox::new(State::open(&config.state.dir).unwrap()));
        let uploader = Uploader::new(
            client,
            outbox.clone(),
            UploadSettings::from_config(&config.api),
        )
        .unwrap();
        let pipeline = FilePipeline::new(config, outbox, uploader, None);
        let (report, _) = pipeline.process(&feed, &dropped).await.unwrap();
        assert!(
            report.refused.is_empty() && report.undelivered == 0,
            "{report:#?}"
        );
        report.outcome
    }
}

/// The sandbox's vehicles by VIN; fails on a VIN held twice.
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

/// A vehicle's answer without what changes with every write or re-creation.
fn lasting(v: &Value) -> Value {
    let mut v = v["vehicle"].clone();
    for key in [
        "id",
        "created_at",
        "updated_at",
        "sold_at",
        "image",
        "organization",
    ] {
        v.as_object_mut().unwrap().remove(key);
    }
    v
}

/// Requests that change something on the service (every POST).
fn writes(st: &Value) -> u64 {
    st["requests"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(route, _)| route.starts_with("POST "))
        .flat_map(|(_, statuses)| statuses.as_object().unwrap().values())
        .map(|n| n.as_u64().unwrap())
        .sum()
}

/// The payloads an export maps to, by VIN.
fn mapped(file: &Path) -> HashMap<String, Value> {
    let mut export = ExportFile::open(file, &Profile::auto(), 10).unwrap();
    let mut out = HashMap::new();
    while let Some(m) = export.next_record().unwrap() {
        if let Mapped::Accepted(a) = m {
            out.insert(
                a.payload.vin.clone(),
                serde_json::to_value(&a.payload).unwrap(),
            );
        }
    }
    out
}

fn only_report(dir: &Path) -> Value {
    let reports: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(reports.len(), 1, "{reports:?}");
    serde_json::from_slice(&std::fs::read(&reports[0]).unwrap()).unwrap()
}

/// A vehicle deleted on the service, one sold there, one put back in stock there and a price
/// edited there are all repaired; a vehicle lotsync did not create is left alone and listed in
/// the report; a second run finds nothing to repair and sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_repairs_drift_and_leaves_foreign_vehicles_alone() {
    // Strict: a transition the service thinks redundant would be refused (and reported).
    let sb = sandbox_with(Behaviour {
        strict_transitions: true,
        ..Behaviour::default()
    })
    .await;
    let site = Site::new("reconcile-drift", &sb);
    // 120 vehicles: the service's list takes two pages.
    let price = |n: u64| 10_000 + n * 100;
    let day1 = site.export("day1.csv", 0..120, price);
    let day2 = site.export("day2.csv", 0..119, price); // 119 is gone: sold
    for file in [&day1, &day2] {
        let out = site.lotsync(&["sync", file.to_str().unwrap()]).await;
        assert_eq!(
            code(&out),
            0,
            "{}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    let synced = by_vin(&state(&sb).await);
    assert_eq!(synced.len(), 120);
    let vin = |n: u64| feedgen::vin(n);
    let id = |n: u64| synced[&vin(n)]["vehicle"]["id"].as_u64().unwrap();
    assert_eq!(synced[&vin(119)]["vehicle"]["status"], "sold");

    // Drift behind lotsync's back, and a vehicle someone else created.
    delete_vehicle(&sb, id(3)).await;
    edit_vehicle(&sb, id(5), serde_json::json!({"sold": true})).await;
    edit_vehicle(&sb, id(119), serde_json::json!({"sold": false})).await;
    let edited = edit_vehicle(&sb, id(7), serde_json::json!({"price": 1})).await;
    assert_eq!(edited["price"]["selling"], 1);
    let foreign = VehiclePayload::new(10, "OTHER-TOOL", feedgen::vin(5000));
    client(&sb).upsert_vehicle(&foreign).await.unwrap();
    let before = state(&sb).await;
    let foreign_before = by_vin(&before)[&foreign.vin].clone();

    let out = site.lotsync(&["reconcile"]).await;
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains("120 vehicles on the service, 120 in the state"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "queued: 1 re-created, 1 marked sold again, 1 back in stock, 1 re-sent (fields edited on the service)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("VIN {}: price.selling", vin(7))),
        "{stdout}"
    );
    assert!(
        stdout.contains("left alone: 1 vehicle lotsync did not create"),
        "{stdout}"
    );
    assert!(stdout.contains(&foreign.vin), "{stdout}");
    assert!(
        stdout.contains("delivered: created 1, updated 1, sold 1, back in stock 1"),
        "{stdout}"
    );

    // The service is back to what lotsync sent: each VIN once, as mapped, sold as the DMS says.
    let after = state(&sb).await;
    let now = by_vin(&after);
    assert_eq!(now.len(), 121);
    let mut expected = mapped(&day2);
    expected.insert(vin(119), mapped(&day1)[&vin(119)].clone());
    for n in 0..120 {
        let v = &now[&vin(n)];
        assert_eq!(v["payload"], expected[&vin(n)], "payload of car {n}");
        let status = if n == 119 { "sold" } else { "in-stock" };
        assert_eq!(v["vehicle"]["status"], status, "car {n}");
        assert_eq!(
            lasting(v),
            lasting(&synced[&vin(n)]),
            "car {n} as before the drift"
        );
    }
    assert_ne!(
        now[&vin(3)]["vehicle"]["id"],
        synced[&vin(3)]["vehicle"]["id"],
        "re-created"
    );
    assert_eq!(
        now[&foreign.vin], foreign_before,
        "the foreign vehicle is untouched"
    );
    assert_eq!(
        writes(&after) - writes(&before),
        4,
        "one request per repair"
    );

    // The report lists the repairs and the foreign vehicle.
    let report = only_report(&site.state_dir().join("reports"));
    assert_eq!(report["recreated"], serde_json::json!([vin(3)]));
    assert_eq!(report["in_stock_fixed"], serde_json::json!([vin(5)]));
    assert_eq!(report["sold_fixed"], serde_json::json!([vin(119)]));
    assert_eq!(
        report["fields_fixed"],
        serde_json::json!([{"vin": vin(7), "fields": ["price.selling"]}])
    );
    assert_eq!(report["foreign"].as_array().unwrap().len(), 1, "{report:#}");
    assert_eq!(report["foreign"][0]["vin"], foreign.vin);
    assert_eq!(report["foreign"][0]["id"], foreign_before["vehicle"]["id"]);
    assert_eq!(report["operations"], 4);

    // Again: nothing to repair, nothing sent but the list.
    let out = site.lotsync(&["reconcile", "--format", "json"]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["report"]["operations"], 0, "{json:#}");
    assert_eq!(json["report"]["counts"]["unchanged"], 120, "{json:#}");
    assert_eq!(json["report"]["foreign"][0]["vin"], foreign.vin);
    assert!(Path::new(json["report_file"].as_str().unwrap()).is_file());
    let again = state(&sb).await;
    assert_eq!(writes(&again), writes(&after));
    assert_eq!(
        again["total_requests"].as_u64().unwrap() - after["total_requests"].as_u64().unwrap(),
        2,
        "the two pages of the list"
    );
}

/// The state dir is lost. `lotsync reconcile --rebuild` refills it from the service's list and
/// the archived exports without a write; re-dropping the last export is then recognized and
/// sends nothing, the next export sends only what changed, and nothing is ever created twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebuild_after_losing_the_state_sends_nothing_again() {
    let sb = sandbox_with(Behaviour {
        strict_transitions: true,
        ..Behaviour::default()
    })
    .await;
    let site = Site::new("reconcile-rebuild", &sb);
    let price = |n: u64| 10_000 + n * 100;
    let day1 = site.export("day1.csv", 0..120, price);
    // Day 2: car 119 gone (sold), car 4 cheaper.
    let day2 = site.export(
        "day2.csv",
        0..119,
        |n| if n == 4 { 9_000 } else { price(n) },
    );
    assert_eq!(site.drop_file(&day1).await, Outcome::Applied);
    assert_eq!(site.drop_file(&day2).await, Outcome::Applied);
    let foreign = VehiclePayload::new(10, "OTHER-TOOL", feedgen::vin(5000));
    client(&sb).upsert_vehicle(&foreign).await.unwrap();
    let synced = by_vin(&state(&sb).await);
    assert_eq!(synced.len(), 121);

    // A state that holds vehicles is not rebuilt over.
    let out = site.lotsync(&["reconcile", "--rebuild"]).await;
    assert_eq!(code(&out), 2);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("fills an empty state only"), "{stderr}");
    assert!(stderr.contains("move it aside"), "{stderr}");

    std::fs::remove_dir_all(site.state_dir()).unwrap();
    let before = stats(&sb).await;
    let out = site.lotsync(&["reconcile", "--rebuild"]).await;
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains("restored 120 vehicles from the service and 2 archived exports"),
        "{stdout}"
    );
    assert!(
        stdout.contains("feed main: last applied file day2.csv"),
        "{stdout}"
    );
    assert!(stdout.contains("nothing to repair"), "{stdout}");
    assert!(stdout.contains("left alone: 1 vehicle lotsync"), "{stdout}");
    let after = stats(&sb).await;
    assert_eq!(writes(&after), writes(&before), "a rebuild writes nothing");
    assert_eq!(
        count(&after, "GET /v1/inventory", "200") - count(&before, "GET /v1/inventory", "200"),
        2,
        "it reads the list's two pages"
    );

    // The records are back: ids and sold state from the service, payloads from the archive.
    {
        let st = State::open(&site.state_dir()).unwrap();
        assert_eq!(st.vehicle_count(), 120, "the foreign vehicle is not taken");
        for n in [0, 4, 119] {
            let (_, record) = st.find_vin(100, &feedgen::vin(n)).unwrap().unwrap();
            assert_eq!(
                record.service_id,
                synced[&feedgen::vin(n)]["vehicle"]["id"].as_u64(),
                "car {n}"
            );
            assert_eq!(record.sold, n == 119, "car {n}");
        }
        let last = st.feed("main").unwrap().unwrap().last_applied.unwrap();
        assert_eq!(last.name, "day2.csv");
    }

    // Re-dropping the last export: recognized, nothing sent.
    assert_eq!(site.drop_file(&day2).await, Outcome::AlreadyApplied);
    let out = site.lotsync(&["sync", day2.to_str().unwrap()]).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("already applied"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(stats(&sb).await["total_requests"], after["total_requests"]);

    // The next export: car 9 cheaper, car 119 back on the lot: two requests, no more.
    let day3 = site.export("day3.csv", 0..120, |n| match n {
        4 => 9_000,
        9 => 9_500,
        _ => price(n),
    });
    assert_eq!(site.drop_file(&day3).await, Outcome::Applied);
    let end = state(&sb).await;
    assert_eq!(writes(&end) - writes(&after), 2, "{:#}", end["requests"]);
    assert_eq!(
        count(&end, "POST /v1/inventory", "200") - count(&after, "POST /v1/inventory", "200"),
        1
    );
    assert_eq!(
        count(&end, "POST /v1/inventory/{id}/in-stock", "200")
            - count(&after, "POST /v1/inventory/{id}/in-stock", "200"),
        1
    );
    let now = by_vin(&end);
    assert_eq!(now.len(), 121, "nothing created twice");
    assert_eq!(
        count(&end, "POST /v1/inventory", "201"),
        120 + 1,
        "120 cars and the foreign one, once"
    );
    assert_eq!(now[&feedgen::vin(9)]["vehicle"]["price"]["selling"], 9_500);
    assert_eq!(now[&feedgen::vin(119)]["vehicle"]["status"], "in-stock");
    assert_eq!(
        now[&foreign.vin]["writes"], 1,
        "the foreign vehicle is untouched"
    );
}
