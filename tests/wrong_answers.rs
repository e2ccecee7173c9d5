//! Answers about another vehicle are not recorded: the uploader, as a library, against the
//! sandbox answering half of the vehicle writes with another vehicle of the organization,
//! with a real state on disk. The service ends with one vehicle per VIN, the state with each
//! vehicle's own id, and the next day's sales reach the right vehicles.

mod common;

use common::{client, sandbox_with, state, TempDir};
use lotsync::api::VehiclePayload;
use lotsync::diff::{Differ, FileId, Mode, Rules};
use lotsync::mapper::Accepted;
use lotsync::outbox::Outbox;
use lotsync::sandbox::{Behaviour, Faults};
use lotsync::state::State;
use lotsync::upload::{UploadSettings, Uploader};
use std::collections::{BTreeSet, HashMap};
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
        max_requests_per_second: 1000.0,
        burst: 1,
        max_in_flight: 4,
        retry: Default::default(),
        give_up_after: Duration::from_secs(30),
    }
}

/// VIN → (id, sold) as the service holds them; panics on a VIN held twice.
async fn held(sb: &lotsync::sandbox::RunningSandbox) -> HashMap<String, (u64, bool)> {
    let mut held = HashMap::new();
    for v in state(sb).await["vehicles"].as_array().unwrap() {
        let vin = v["vehicle"]["vin"].as_str().unwrap().to_owned();
        let entry = (
            v["vehicle"]["id"].as_u64().unwrap(),
            v["vehicle"]["status"] == "sold",
        );
        assert!(
            held.insert(vin.clone(), entry).is_none(),
            "{vin} held twice"
        );
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_about_another_vehicle_never_reach_the_state() {
    let sb = sandbox_with(Behaviour {
        faults: Faults {
            seed: 13,
            wrong_vehicle: 0.5,
            ..Faults::default()
        },
        ..Behaviour::default()
    })
    .await;
    let dir = TempDir::new("wrong-answers");
    let outbox = Arc::new(Outbox::new(State::open(&dir.path().join("state")).unwrap()));
    let cars: Vec<VehiclePayload> = (1..=20).map(car).collect();

    snapshot(&outbox, "day1.csv", &cars);
    let uploader = Uploader::new(client(&sb), outbox.clone(), settings()).unwrap();
    let report = uploader.drain().await.unwrap();
    assert!(report.rejected.is_empty(), "{:?}", report.rejected);
    assert_eq!(report.undelivered, 0);
    let faults = state(&sb).await["faults"]["wrong_vehicle"]
        .as_u64()
        .unwrap_or(0);
    println!("wrong_vehicle answers on day 1: {faults}");
    assert!(faults >= 3, "the fault was met ({faults} times)");

    let service = held(&sb).await;
    assert_eq!(service.len(), 20, "one vehicle per VIN");
    for car in &cars {
        let (_, record) = outbox.state().find_vin(100, &car.vin).unwrap().unwrap();
        assert_eq!(record.service_id, Some(service[&car.vin].0), "{}", car.vin);
    }

    // Day 2: every fourth vehicle is gone; exactly those are sold on the service.
    let kept: Vec<VehiclePayload> = cars
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 4 != 0)
        .map(|(_, c)| c.clone())
        .collect();
    snapshot(&outbox, "day2.csv", &kept);
    let uploader = Uploader::new(client(&sb), outbox.clone(), settings()).unwrap();
    let report = uploader.drain().await.unwrap();
    assert!(report.rejected.is_empty(), "{:?}", report.rejected);
    assert_eq!(report.undelivered, 0);
    let service = held(&sb).await;
    for (i, car) in cars.iter().enumerate() {
        assert_eq!(service[&car.vin].1, i % 4 == 0, "{} sold?", car.vin);
    }
}
