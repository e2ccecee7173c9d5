//! Delivery at the edges, the uploader as a library against the sandbox over loopback with a
//! real state on disk: after a fatal stop, every operation is delivered once the service
//! answers again (none stays marked in flight).

mod common;

use common::{client, client_for, sandbox_with, state, TempDir};
use lotsync::api::VehiclePayload;
use lotsync::diff::{Differ, FileId, Mode, Rules};
use lotsync::mapper::Accepted;
use lotsync::outbox::Outbox;
use lotsync::sandbox::Behaviour;
use lotsync::state::State;
use lotsync::upload::{UploadError, UploadSettings, Uploader};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

fn rules() -> Rules {
    Rules {
        organization_id: 100,
        feed: "main".into(),
        mode: Mode::Delta,
        sold_after_absent: 1,
        max_sold_fraction: 1.0,
        locations: BTreeSet::from([10]),
        force: false,
    }
}

/// Plans and commits `n` new vehicles.
fn queue_creates(outbox: &Outbox, n: u32) {
    let file = FileId {
        name: "day1.csv".into(),
        sha256: "d1".into(),
    };
    let mut differ = Differ::new(outbox, rules(), file).unwrap();
    for i in 0..n {
        let payload = VehiclePayload::new(10, format!("S{i}"), format!("TESTVIN{i:010}"));
        differ
            .accepted(&Accepted {
                line: u64::from(i) + 2,
                payload,
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

/// A 401 stops delivery with every operation queued; once the token is right, the next
/// delivery sends them all: the operation whose answer was the 401 is not left behind as
/// "in flight" until a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_fatal_stop_every_operation_is_delivered() {
    let sb = sandbox_with(Behaviour::default()).await;
    let dir = TempDir::new("delivery-fatal");
    let outbox = Arc::new(Outbox::new(State::open(&dir.path().join("state")).unwrap()));
    queue_creates(&outbox, 20);

    let refused = Uploader::new(
        client_for(&sb, "revoked-token", 100),
        outbox.clone(),
        settings(),
    )
    .unwrap();
    let stopped = refused.drain().await;
    assert!(
        matches!(&stopped, Err(UploadError::Fatal { queued: 20, .. })),
        "{stopped:?}"
    );
    assert_eq!(outbox.len(), 20);

    let fixed = Uploader::new(client(&sb), outbox.clone(), settings()).unwrap();
    let report = fixed.drain().await.unwrap();
    assert_eq!(report.undelivered, 0, "nothing stays queued");
    assert!(outbox.is_empty());
    assert_eq!(fixed.stats().snapshot().created, 20);
    assert_eq!(state(&sb).await["vehicles"].as_array().unwrap().len(), 20);
}
