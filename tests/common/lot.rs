//! A lot planned straight into a real outbox, for the uploader tested as a library: the
//! rules of a feed at location 10, payloads, a snapshot committed, and upload settings.

use lotsync::api::VehiclePayload;
use lotsync::diff::{Differ, FileId, Mode, Rules};
use lotsync::mapper::Accepted;
use lotsync::outbox::Outbox;
use lotsync::upload::UploadSettings;
use std::collections::BTreeSet;
use std::time::Duration;

/// Feed `main` of organization 100 at location 10, selling after one absence, no guard.
pub fn rules(mode: Mode) -> Rules {
    Rules {
        organization_id: 100,
        feed: "main".into(),
        mode,
        sold_after_absent: 1,
        max_sold_fraction: 1.0,
        locations: BTreeSet::from([10]),
        force: false,
        sibling_feeds: Default::default(),
    }
}

/// A payload at location 10 whose VIN is unique per `n`.
pub fn car(n: u32) -> VehiclePayload {
    let mut p = VehiclePayload::new(10, format!("S{n}"), format!("TESTVIN{n:010}"));
    p.make = Some("Honda".into());
    p
}

/// Plans and commits a file `name` listing `cars`.
pub fn commit(outbox: &Outbox, name: &str, mode: Mode, cars: &[VehiclePayload]) {
    commit_with(outbox, rules(mode), name, cars);
}

/// [`commit`] under other rules (another organization, other locations).
pub fn commit_with(outbox: &Outbox, rules: Rules, name: &str, cars: &[VehiclePayload]) {
    let file = FileId {
        name: name.into(),
        sha256: lotsync::state::Digest::of(name.as_bytes()).to_string(),
    };
    let mut differ = Differ::new(outbox, rules, file).unwrap();
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

/// `rate` requests/s, four in flight, the default retries, giving up after 30 s.
pub fn upload_settings(rate: f64) -> UploadSettings {
    UploadSettings {
        max_requests_per_second: rate,
        burst: 1,
        max_in_flight: 4,
        retry: Default::default(),
        give_up_after: Duration::from_secs(30),
    }
}
