//! Delivery at the edges, the uploader as a library against the sandbox over loopback with a
//! real state on disk: after a fatal stop, every operation is delivered once the service
//! answers again (none stays marked in flight).

use crate::common;

use common::{client, client_for, lot, sandbox_with, state, vehicles, TempDir};
use lotsync::diff::Mode;
use lotsync::outbox::Outbox;
use lotsync::sandbox::Behaviour;
use lotsync::state::State;
use lotsync::upload::{UploadError, Uploader};
use std::sync::Arc;

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
