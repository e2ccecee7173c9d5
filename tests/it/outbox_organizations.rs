//! Two organizations in one state: the operations of another organization at
//! the head of the outbox (a state whose `organization_id` was changed, or one shared by two
//! configs) never starve this one's. The uploader as a library against the sandbox over
//! loopback, with a real state on disk.

use crate::common;

use common::{client, lot, sandbox_with, state, vehicles, TempDir};
use lotsync::diff::Mode;
use lotsync::outbox::Outbox;
use lotsync::sandbox::Behaviour;
use lotsync::state::State;
use lotsync::upload::Uploader;
use std::sync::Arc;
use std::time::Duration;

/// Plans and commits `cars` for organization `org` (feed `main-<org>`, location 10).
fn commit_for(outbox: &Outbox, org: u64, name: &str, cars: &[lotsync::api::VehiclePayload]) {
    let mut rules = lot::rules(Mode::Delta);
    rules.organization_id = org;
    rules.feed = format!("main-{org}");
    lot::commit_with(outbox, rules, name, cars);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_organizations_operations_at_the_head_never_starve_ours() {
    let sb = sandbox_with(Behaviour::default()).await;
    let dir = TempDir::new("outbox-orgs");
    let outbox = Arc::new(Outbox::new(State::open(&dir.path().join("state")).unwrap()));
    // 300 operations of organization 200 first (more than one batch), then 10 of ours (100).
    let theirs: Vec<_> = (0..300).map(lot::car).collect();
    commit_for(&outbox, 200, "theirs.csv", &theirs);
    let ours: Vec<_> = (1000..1010).map(lot::car).collect();
    commit_for(&outbox, 100, "ours.csv", &ours);
    assert_eq!(outbox.len(), 310);

    let uploader = Uploader::new(client(&sb), outbox.clone(), lot::upload_settings(500.0)).unwrap();
    let report = tokio::time::timeout(Duration::from_secs(30), uploader.drain())
        .await
        .expect("delivery of our 10 operations ends")
        .unwrap();
    assert_eq!(report.undelivered, 0, "{report:?}");
    assert_eq!(uploader.stats().snapshot().created, 10);
    assert_eq!(vehicles(&state(&sb).await), 10);
    // Theirs stay queued, untouched, for a config that names their organization.
    assert_eq!(outbox.len(), 300);
}
