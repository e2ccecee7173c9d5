//! [`reconcile`] against the sandbox on loopback, over a real SQLite state in a temporary
//! folder: what each kind of drift becomes (one plan of the pseudo-feed, queued, not sent),
//! what it leaves alone, the report it writes, and what stops it before anything is queued.

use super::*;
use crate::api::{Amount, Price, VehiclePayload};
use crate::plan::RECONCILE_FEED;
use crate::sandbox::RunningSandbox;
use crate::upload::Uploader;

/// A site: a config (token file, state, one delta feed) for the sandbox, its outbox, and an
/// uploader over it.
struct Site {
    _tmp: tempfile::TempDir,
    config: Config,
    outbox: Arc<Outbox>,
    uploader: Uploader,
}

impl Site {
    fn new(name: &str, sb: &RunningSandbox, token: &str) -> Site {
        let tmp = crate::testing::temp_dir(&format!("reconcile-{name}"));
        let dir = tmp.path();
        crate::config::write_token_file(&dir.join("token"), token).expect("token file");
        std::fs::create_dir_all(dir.join("inbox")).expect("inbox");
        let text = format!(
            "[api]\nbase_url = \"{}\"\norganization_id = 100\ntoken_file = \"{}\"\n\
             max_requests_per_second = 200\nmax_attempts = 1\n\
             [state]\ndir = \"{}\"\n\
             [[feed]]\nname = \"main\"\ninbox = \"{}\"\nlocation_id = 10\nmode = \"delta\"\n",
            sb.base_url(),
            dir.join("token").display(),
            dir.join("state").display(),
            dir.join("inbox").display(),
        );
        let path = dir.join("lotsync.toml");
        std::fs::write(&path, text).expect("config");
        let config = Config::load(&path).expect("the config loads");
        let outbox = Arc::new(Outbox::new(
            crate::state::State::open(&config.state.dir).expect("the state opens"),
        ));
        let client = config.api.client().expect("client");
        let (uploader, _) =
            Uploader::configured(client, outbox.clone(), &config).expect("uploader");
        Site {
            _tmp: tmp,
            config,
            outbox,
            uploader,
        }
    }

    async fn reconcile(&self, rebuild: bool) -> Result<ReconcileReport, ReconcileError> {
        reconcile(
            self.uploader.client(),
            self.uploader.pace(),
            &self.outbox,
            &self.config,
            rebuild,
        )
        .await
    }

    /// Queues `cars` as a delta file of the feed would, and delivers them.
    async fn synced(&self, cars: &[VehiclePayload]) {
        let rules = crate::diff::Rules {
            organization_id: 100,
            feed: "main".into(),
            mode: crate::diff::Mode::Delta,
            sold_after_absent: 1,
            max_sold_fraction: 1.0,
            locations: [10].into(),
            force: false,
            sibling_feeds: Default::default(),
        };
        let file = crate::diff::FileId {
            name: "day1.csv".into(),
            sha256: "day1".into(),
        };
        let mut differ = crate::diff::Differ::new(&self.outbox, rules, file)
            .expect("the differ reads the state");
        for (n, p) in cars.iter().enumerate() {
            differ
                .accepted(&crate::mapper::Accepted {
                    line: n as u64 + 2,
                    payload: p.clone(),
                    sold: None,
                    warnings: Vec::new(),
                })
                .expect("the record is diffed");
        }
        differ.commit().expect("the plan commits");
        let drained = self.uploader.drain().await.expect("delivered");
        assert_eq!(drained.undelivered, 0, "{drained:?}");
        assert!(self.outbox.is_empty());
    }

    fn queued(&self) -> Vec<(String, String, &'static str)> {
        self.outbox
            .entries()
            .map(|e| {
                let e = e.expect("the outbox reads");
                (e.file, e.vin, e.op.name())
            })
            .collect()
    }

    fn service_id(&self, vin: &str) -> u64 {
        let (_, record) = self
            .outbox
            .state()
            .find_vin(100, vin)
            .expect("the state reads")
            .expect("the vehicle is known");
        record.service_id.expect("an id from the answer")
    }
}

fn car(n: u32) -> VehiclePayload {
    let mut p = VehiclePayload::new(10, format!("STK{n}"), format!("TESTVIN{n:010}"));
    p.price = Some(Price::Selling(Amount(10_000.0 + f64::from(n))));
    p
}

/// Behind the client's back, on the sandbox.
async fn sandbox_edit(sb: &RunningSandbox, id: u64, edit: Option<serde_json::Value>) {
    let http = reqwest::Client::new();
    let url = format!("{}/__sandbox/vehicles/{id}", sb.base_url());
    let request = match edit {
        Some(edit) => http.patch(url).json(&edit),
        None => http.delete(url),
    };
    let answer = request.send().await.expect("the sandbox answers");
    assert!(answer.status().is_success(), "{}", answer.status());
}

/// Deleted, sold and edited on the service: re-created, back in stock and re-sent, queued
/// as one plan of the reconciliation's pseudo-feed (nothing sent); the untouched car and a
/// vehicle lotsync did not create are left alone; the report is written and counts each.
/// Once delivered, a second run finds nothing and queues nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_drift_is_queued_as_its_repair_and_the_rest_left_alone() {
    let sb = RunningSandbox::on_loopback(Default::default())
        .await
        .expect("sandbox starts");
    let site = Site::new("drift", &sb, "sandbox-token");
    let cars: Vec<VehiclePayload> = (1..=4).map(car).collect();
    site.synced(&cars).await;
    sandbox_edit(&sb, site.service_id(&cars[0].vin), None).await;
    sandbox_edit(
        &sb,
        site.service_id(&cars[1].vin),
        Some(serde_json::json!({"sold": true})),
    )
    .await;
    sandbox_edit(
        &sb,
        site.service_id(&cars[2].vin),
        Some(serde_json::json!({"price": 1})),
    )
    .await;
    let foreign = VehiclePayload::new(10, "OTHER-TOOL", "FOREIGNVIN0000001");
    site.uploader
        .client()
        .upsert_vehicle(&foreign)
        .await
        .unwrap();

    let report = site.reconcile(false).await.expect("reconciled");
    let c = &report.counts;
    assert_eq!(
        (
            c.recreated,
            c.in_stock_fixed,
            c.fields_fixed,
            c.sold_fixed,
            c.foreign,
            c.unchanged
        ),
        (1, 1, 1, 0, 1, 1),
        "{report:#?}"
    );
    assert_eq!((report.service_vehicles, report.state_vehicles), (4, 4));
    assert_eq!(report.operations, 3);
    let plan = report.plan.clone().expect("a plan was queued");
    assert!(plan.starts_with("reconcile-"), "{plan}");
    let mut queued = site.queued();
    queued.sort();
    assert_eq!(
        queued,
        [
            (plan.clone(), cars[0].vin.clone(), "create"),
            (plan.clone(), cars[1].vin.clone(), "in_stock"),
            (plan.clone(), cars[2].vin.clone(), "update"),
        ]
    );
    let filed = site
        .outbox
        .state()
        .files()
        .map(Result::unwrap)
        .find(|f| f.name == plan)
        .expect("the plan is filed");
    assert_eq!(filed.feed, RECONCILE_FEED);
    assert!(report
        .path
        .starts_with(site.config.state.dir.join("reports")));
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report.path).expect("the report is written"))
            .expect("JSON");
    assert_eq!(written["operations"], 3);

    let drained = site.uploader.drain().await.expect("delivered");
    assert_eq!(drained.undelivered, 0, "{drained:?}");
    let again = site.reconcile(false).await.expect("reconciled again");
    assert_eq!(again.operations, 0, "{again:#?}");
    assert_eq!(again.plan, None);
    assert_eq!((again.counts.unchanged, again.counts.foreign), (4, 1));
    assert!(site.outbox.is_empty());
}

/// `--rebuild` fills an empty state only: on one that knows vehicles it stops before reading
/// the service, and says how many.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_of_a_state_that_knows_vehicles_is_refused() {
    let sb = RunningSandbox::on_loopback(Default::default())
        .await
        .expect("sandbox starts");
    let site = Site::new("rebuild", &sb, "sandbox-token");
    site.synced(&[car(1), car(2)]).await;
    let refused = site.reconcile(true).await;
    assert!(
        matches!(
            refused,
            Err(ReconcileError::NotEmpty {
                vehicles: 2,
                queued: 0,
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(site.outbox.is_empty());
    assert!(!site.config.state.dir.join("reports").exists());
}

/// A list the service refuses (a wrong token) stops the run before anything is compared:
/// nothing queued, nothing learned, no report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_that_cannot_be_read_queues_nothing() {
    let sb = RunningSandbox::on_loopback(Default::default())
        .await
        .expect("sandbox starts");
    let site = Site::new("refused", &sb, "not-the-token");
    let stopped = site.reconcile(false).await;
    assert!(
        matches!(stopped, Err(ReconcileError::List(_))),
        "{stopped:?}"
    );
    assert!(site.outbox.is_empty());
    assert_eq!(site.outbox.state().files().count(), 0, "no plan filed");
    assert!(!site.config.state.dir.join("reports").exists());
}
