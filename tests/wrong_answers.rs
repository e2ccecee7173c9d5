//! Answers about another vehicle are not recorded: the uploader, as a library, against the
//! sandbox answering half of the vehicle writes with another vehicle of the organization,
//! with a real state on disk. The service ends with one vehicle per VIN, the state with each
//! vehicle's own id, and the next day's sales reach the right vehicles.

mod common;

use common::{client, lot, sandbox_with, state, TempDir};
use lotsync::api::VehiclePayload;
use lotsync::diff::Mode;
use lotsync::outbox::Outbox;
use lotsync::sandbox::{Behaviour, Faults};
use lotsync::state::State;
use lotsync::upload::Uploader;
use std::collections::HashMap;
use std::sync::Arc;

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
    let cars: Vec<VehiclePayload> = (1..=20).map(lot::car).collect();

    lot::commit(&outbox, "day1.csv", Mode::Full, &cars);
    let uploader =
        Uploader::new(client(&sb), outbox.clone(), lot::upload_settings(1000.0)).unwrap();
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
    lot::commit(&outbox, "day2.csv", Mode::Full, &kept);
    let uploader =
        Uploader::new(client(&sb), outbox.clone(), lot::upload_settings(1000.0)).unwrap();
    let report = uploader.drain().await.unwrap();
    assert!(report.rejected.is_empty(), "{:?}", report.rejected);
    assert_eq!(report.undelivered, 0);
    let service = held(&sb).await;
    for (i, car) in cars.iter().enumerate() {
        assert_eq!(service[&car.vin].1, i % 4 == 0, "{} sold?", car.vin);
    }
}
