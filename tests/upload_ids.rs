//! Ids are never lost: the uploader, as a library, against the sandbox over loopback with a
//! real state on disk, when the state has no service id for a vehicle a sold or in-stock call
//! needs.

mod common;

use common::{client, sandbox_with, state, TempDir};
use lotsync::api::VehiclePayload;
use lotsync::diff::{Differ, FileId, Mode, Rules};
use lotsync::mapper::Accepted;
use lotsync::outbox::{Answer, Outbox};
use lotsync::sandbox::Behaviour;
use lotsync::state::State;
use lotsync::upload::{UploadSettings, Uploader};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

fn rules() -> Rules {
    Rules {
        organization_id: 100,
        feed: "main".into(),
        mode: Mode::Full,
        sold_after_absent: 1,
        max_sold_fraction: 1.0,
        locations: BTreeSet::from([10]),
        force: false,
    }
}

fn car(n: u32) -> VehiclePayload {
    let mut p = VehiclePayload::new(10, format!("S{n}"), format!("TESTVIN{n:010}"));
    p.make = Some("Honda".into());
    p
}

/// Plans and commits a full snapshot of `cars`.
fn snapshot(outbox: &Outbox, name: &str, cars: &[VehiclePayload]) {
    let file = FileId {
        name: name.into(),
        sha256: lotsync::state::Digest::of(name.as_bytes()).to_string(),
    };
    let mut differ = Differ::new(outbox, rules(), file).unwrap();
    for (i, payload) in cars.iter().enumerate() {
        differ
            .accepted(&Accepted {
                line: i as u64 + 2,
                payload: payload.clone(),
                sold: None,
                warnings: Vec::new(),
            })
            .unwrap();
    }
    differ.commit().unwrap();
}

fn settings() -> UploadSettings {
    UploadSettings {
        max_requests_per_second: 500.0,
        burst: 1,
        max_in_flight: 4,
        retry: Default::default(),
        give_up_after: Duration::from_secs(30),
    }
}

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
    let cars = [car(1), car(2)];
    snapshot(&outbox, "day1.csv", &cars);
    for entry in outbox.take(10).unwrap() {
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
    snapshot(&outbox, "day2.csv", &cars[1..]);
    let uploader = Uploader::new(api.clone(), outbox.clone(), settings()).unwrap();
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
