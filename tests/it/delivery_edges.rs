//! Delivery at the edges, the uploader as a library against the sandbox over loopback with a
//! real state on disk: after a fatal stop, every operation is delivered once the service
//! answers again (none stays marked in flight), and the answers on their way when it stopped
//! are kept.

use crate::common;

use common::{
    client, client_for, lot, sandbox_with, set_behaviour, state, stats, vehicles, TempDir,
};
use lotsync::api::ApiToken;
use lotsync::diff::Mode;
use lotsync::outbox::Outbox;
use lotsync::sandbox::{Behaviour, Faults};
use lotsync::state::State;
use lotsync::upload::{UploadError, UploadSettings, Uploader};
use std::sync::Arc;
use std::time::Duration;

/// A 401 stops delivery with every operation queued; once the token is right, the next
/// delivery sends them all: the operation whose answer was the 401 is not left behind as
/// "in flight" until a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_fatal_stop_every_operation_is_delivered() {
    let sb = sandbox_with(Behaviour::default()).await;
    let dir = TempDir::new("delivery-fatal");
    let outbox = Arc::new(Outbox::new(State::open(&dir.path().join("state")).unwrap()));
    let cars: Vec<_> = (0..20).map(lot::car).collect();
    lot::commit(&outbox, "day1.csv", Mode::Delta, &cars);

    let refused = Uploader::new(
        client_for(&sb, "revoked-token", 100),
        outbox.clone(),
        lot::upload_settings(500.0),
    )
    .unwrap();
    let stopped = refused.drain().await;
    assert!(
        matches!(&stopped, Err(UploadError::Fatal { queued: 20, .. })),
        "{stopped:?}"
    );
    assert_eq!(outbox.len(), 20);

    let fixed = Uploader::new(client(&sb), outbox.clone(), lot::upload_settings(500.0)).unwrap();
    let report = fixed.drain().await.unwrap();
    assert_eq!(report.undelivered, 0, "nothing stays queued");
    assert!(outbox.is_empty());
    assert_eq!(fixed.stats().snapshot().created, 20);
    assert_eq!(vehicles(&state(&sb).await), 20);
}

/// A fatal answer stops delivery, but the answers of the calls already on their way are kept:
/// every vehicle the service created is acknowledged, none stays queued to be sent again. The
/// stop used to drop them (aborting the calls), and the next run sent them again, spending its
/// quota on them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_stop_keeps_the_answers_on_their_way() {
    let slow = Behaviour {
        faults: Faults {
            latency_ms: 1_500,
            ..Faults::default()
        },
        ..Behaviour::default()
    };
    let sb = sandbox_with(slow).await;
    let dir = TempDir::new("delivery-fatal-in-flight");
    let outbox = Arc::new(Outbox::new(State::open(&dir.path().join("state")).unwrap()));
    let cars: Vec<_> = (0..40).map(lot::car).collect();
    lot::commit(&outbox, "day1.csv", Mode::Delta, &cars);
    let client = client(&sb);
    let settings = UploadSettings {
        max_in_flight: 16,
        ..lot::upload_settings(100.0)
    };
    let uploader = Uploader::new(client.clone(), outbox.clone(), settings).unwrap();
    // Once four creates are on their way (answered after 1.5 s), the token is revoked and the
    // service answers at once: the next request's 401 comes back while they are in flight.
    let revoke = async {
        let began = std::time::Instant::now();
        while stats(&sb).await["max_in_flight"].as_u64().unwrap_or(0) < 4 {
            assert!(
                began.elapsed() < Duration::from_secs(20),
                "never 4 in flight"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        set_behaviour(&sb, &Behaviour::default()).await;
        client.set_token(ApiToken::new("revoked-token")).unwrap();
    };
    let (stopped, ()) = tokio::join!(uploader.drain(), revoke);
    assert!(
        matches!(&stopped, Err(UploadError::Fatal { .. })),
        "{stopped:?}"
    );
    let created = vehicles(&state(&sb).await);
    // The sandbox applies a request once its latency has passed; a call cut off on its way is
    // never applied (the stop used to cut them all: 2 created, the rest sent again later).
    assert!(
        created >= 4,
        "the creates on their way were let finish: {created}"
    );
    assert_eq!(
        outbox.len(),
        40 - created,
        "every vehicle the service created is acknowledged, the rest queued"
    );
}
