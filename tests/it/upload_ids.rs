//! Ids are never lost: the uploader, as a library, against the sandbox over loopback with a
//! real state on disk, when the state has no service id for a vehicle a sold or in-stock call
//! needs.

use crate::common;

use common::{client, lot, sandbox_with, state, TempDir};
use lotsync::diff::Mode;
use lotsync::outbox::{Answer, Outbox};
use lotsync::sandbox::Behaviour;
use lotsync::state::State;
use lotsync::upload::Uploader;
use std::sync::Arc;

/// A vehicle created on the service whose create answer never reached the state with an id
/// (a state rebuilt, or an answer that carried none): its sale first repeats its last payload
/// (create-or-modify answers with the id), then marks it sold; nothing is created twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_without_a_known_id_learns_it_first() {
    let sb = sandbox_with(Behaviour::default()).await;
    let api = client(&sb);
    let dir = TempDir::new("upload-ids");
    let outbox = Arc::new(Outbox::new(State::open(&dir.path().join("state")).unwrap()));

    // Day 1: both vehicles exist on the service; the state records them without ids.
    let cars = [lot::car(1), lot::car(2)];
    lot::commit(&outbox, "day1.csv", Mode::Full, &cars);
    for entry in outbox.take(100, 10).unwrap() {
        let created = api
            .upsert_vehicle(entry.op.payload().unwrap())
            .await
            .unwrap();
        assert!(created.created());
        let no_id = Answer::Applied {
            service_id: None,
            sold: None,
        };
        outbox.acknowledge(entry.seq, &no_id).unwrap();
    }
    let (_, record) = outbox.state().find_vin(100, &cars[0].vin).unwrap().unwrap();
    assert_eq!(record.service_id, None);

    // Day 2: vehicle 1 is gone.
    lot::commit(&outbox, "day2.csv", Mode::Full, &cars[1..]);
    let uploader = Uploader::new(api.clone(), outbox.clone(), lot::upload_settings(500.0)).unwrap();
    let report = uploader.drain().await.unwrap();
    assert!(report.rejected.is_empty(), "{:?}", report.rejected);
    assert_eq!(report.undelivered, 0);
    let stats = uploader.stats().snapshot();
    assert_eq!(stats.sold, 1);
    assert_eq!(
        stats.requests, 2,
        "one repeat of the payload, one sold call"
    );

    let st = state(&sb).await;
    let vehicles = st["vehicles"].as_array().unwrap();
    assert_eq!(vehicles.len(), 2, "nothing created twice");
    let sold = vehicles
        .iter()
        .find(|v| v["vehicle"]["vin"] == cars[0].vin.as_str())
        .unwrap();
    assert_eq!(sold["vehicle"]["status"], "sold");
    let (_, record) = outbox.state().find_vin(100, &cars[0].vin).unwrap().unwrap();
    assert_eq!(record.service_id, sold["vehicle"]["id"].as_u64());
    assert!(record.sold);
}
