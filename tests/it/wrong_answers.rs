//! Answers about another vehicle are not recorded: the uploader, as a library, against the
//! sandbox answering half of the vehicle writes with another vehicle of the organization,
//! with a real state on disk. The service ends with one vehicle per VIN, the state with each
//! vehicle's own id, and the next day's sales reach the right vehicles; a sale answered with
//! another VIN stops delivery. An id the state holds for another VIN is never bound to a
//! second one.

use crate::common;

use common::{client, lot, sandbox_with, state, TempDir};
use lotsync::api::VehiclePayload;
use lotsync::diff::Mode;
use lotsync::outbox::Finding;
use lotsync::outbox::Outbox;
use lotsync::sandbox::{Behaviour, Faults};
use lotsync::state::State;
use lotsync::upload::{UploadError, Uploader};
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

    // Day 2: every fourth vehicle is gone. A sale answered with another VIN stops delivery,
    // naming both; once the answers are right again, exactly those are sold on the service.
    let kept: Vec<VehiclePayload> = cars
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 4 != 0)
        .map(|(_, c)| c.clone())
        .collect();
    lot::commit(&outbox, "day2.csv", Mode::Full, &kept);
    let uploader =
        Uploader::new(client(&sb), outbox.clone(), lot::upload_settings(1000.0)).unwrap();
    match uploader.drain().await {
        Err(UploadError::Fatal { error, queued }) => {
            let line = error.to_string();
            println!("{line}");
            assert!(line.contains("answered the sale of VIN"), "{line}");
            let named = cars.iter().filter(|c| line.contains(&c.vin)).count();
            assert_eq!(named, 2, "both VINs said: {line}");
            assert!(queued >= 1);
        }
        other => panic!("a sale answered with another VIN must stop delivery: {other:?}"),
    }
    common::set_faults(&sb, Faults::default()).await;
    let report = uploader.drain().await.unwrap();
    assert!(report.rejected.is_empty(), "{:?}", report.rejected);
    assert_eq!(report.undelivered, 0);
    let service = held(&sb).await;
    for (i, car) in cars.iter().enumerate() {
        assert_eq!(service[&car.vin].1, i % 4 == 0, "{} sold?", car.vin);
    }
}

/// The state holds for car 1 the id of car 3, a car the service has and the state does not
/// know yet (as an answer trusted by an older lotsync could have left it). Car 3's create is
/// answered rightly with that id: it is not bound to car 3 as well; delivery stops, naming
/// both VINs, and the state keeps one VIN per id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_held_for_another_vin_is_never_bound_again() {
    let sb = sandbox_with(Behaviour::default()).await;
    let dir = TempDir::new("id-held");
    let outbox = Arc::new(Outbox::new(State::open(&dir.path().join("state")).unwrap()));
    let cars: Vec<VehiclePayload> = (1..=3).map(lot::car).collect();
    lot::commit(&outbox, "day1.csv", Mode::Full, &cars[..2]);
    let uploader =
        Uploader::new(client(&sb), outbox.clone(), lot::upload_settings(1000.0)).unwrap();
    uploader.drain().await.unwrap();
    let id_of_3 = client(&sb).upsert_vehicle(&cars[2]).await.unwrap().value.id;
    outbox
        .record_findings(
            100,
            &[Finding::Id {
                vin: cars[0].vin.clone(),
                service_id: id_of_3,
            }],
            &[],
        )
        .unwrap();
    let (_, first) = outbox.state().find_vin(100, &cars[0].vin).unwrap().unwrap();
    assert_eq!(first.service_id, Some(id_of_3), "the setup holds");

    lot::commit(&outbox, "day2.csv", Mode::Full, &cars);
    match uploader.drain().await {
        Err(UploadError::Fatal { error, .. }) => {
            let line = error.to_string();
            assert!(
                line.contains(&cars[0].vin) && line.contains(&cars[2].vin),
                "{line}"
            );
            assert!(line.contains("lotsync reconcile"), "{line}");
        }
        other => panic!("an id held for another VIN must not be bound: {other:?}"),
    }
    let third = outbox.state().find_vin(100, &cars[2].vin).unwrap();
    assert!(
        third
            .as_ref()
            .is_none_or(|(_, r)| r.service_id != Some(id_of_3)),
        "bound to a second VIN: {third:?}"
    );
}
