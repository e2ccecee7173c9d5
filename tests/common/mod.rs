//! Shared helpers for the integration tests: a sandbox on loopback, clients, and the
//! sandbox's own view of what happened.
#![allow(dead_code)] // each test crate uses a different subset

pub mod advice;
#[path = "../../benches/feedgen.rs"]
pub mod feedgen;
pub mod fleet;
pub mod lot;
pub mod site;

use lotsync::api::{ApiClient, ApiToken, ClientSettings, VehiclePayload};
use lotsync::sandbox::{Behaviour, RunningSandbox, SandboxConfig};
use serde_json::Value;
use std::time::Duration;

/// A sandbox with `config`, on a free loopback port, in this test's runtime.
pub async fn sandbox(config: SandboxConfig) -> RunningSandbox {
    RunningSandbox::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("sandbox starts")
}

/// The default world with `behaviour`.
pub async fn sandbox_with(behaviour: Behaviour) -> RunningSandbox {
    RunningSandbox::on_loopback(behaviour)
        .await
        .expect("sandbox starts")
}

/// The start of every test site's config: `[api]` for organization 100 at `base_url`, the
/// token from `LOTSYNC_TEST_TOKEN`, `rate` requests/s and 8 in flight, then `api` (more
/// `[api]` keys); `[state]` in `state/` beside the config.
pub fn site_config(base_url: &str, rate: u32, api: &str) -> String {
    format!(
        "[api]\nbase_url = \"{base_url}\"\norganization_id = 100\n\
         token_env = \"LOTSYNC_TEST_TOKEN\"\nmax_requests_per_second = {rate}\n\
         max_in_flight = 8\n{api}\n[state]\ndir = \"state\"\n"
    )
}

/// A loopback port free a moment ago (the kernel's pick, let go again): for a server the
/// test starts in another process. Another process may take it meanwhile; that is rare, and
/// the server then says it cannot listen.
pub fn free_loopback_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// One full feed `main` reading `inbox/` for location 10.
pub const MAIN_FEED: &str = "[[feed]]\nname = \"main\"\ninbox = \"inbox\"\nlocation_id = 10\n";

pub fn client_for(sb: &RunningSandbox, token: &str, organization_id: u64) -> ApiClient {
    let mut settings = ClientSettings::new(sb.base_url(), organization_id, ApiToken::new(token));
    settings.timeout = Duration::from_secs(5);
    ApiClient::new(settings).expect("client builds")
}

/// A client of organization 100 with the default token.
pub fn client(sb: &RunningSandbox) -> ApiClient {
    client_for(sb, "sandbox-token", 100)
}

fn raw_http() -> reqwest::Client {
    lotsync::api::install_crypto_provider();
    reqwest::Client::new()
}

/// `GET /__sandbox/state`.
pub async fn state(sb: &RunningSandbox) -> Value {
    sandbox_json(sb, "state").await
}

/// `GET /__sandbox/stats`: the request counters of the state, without the vehicles.
pub async fn stats(sb: &RunningSandbox) -> Value {
    sandbox_json(sb, "stats").await
}

async fn sandbox_json(sb: &RunningSandbox, what: &str) -> Value {
    raw_http()
        .get(format!("{}/__sandbox/{what}", sb.base_url()))
        .send()
        .await
        .expect("the sandbox answers")
        .json()
        .await
        .expect("the sandbox answers JSON")
}

/// `PUT /__sandbox/behaviour`.
pub async fn set_behaviour(sb: &RunningSandbox, behaviour: &Behaviour) {
    let response = raw_http()
        .put(format!("{}/__sandbox/behaviour", sb.base_url()))
        .json(behaviour)
        .send()
        .await
        .expect("behaviour answers");
    assert!(response.status().is_success(), "{}", response.status());
}

/// `PUT /__sandbox/behaviour` with the default behaviour but `faults`.
pub async fn set_faults(sb: &RunningSandbox, faults: lotsync::sandbox::Faults) {
    set_behaviour(
        sb,
        &Behaviour {
            faults,
            ..Behaviour::default()
        },
    )
    .await;
}

/// Vehicles the sandbox holds.
pub fn vehicles(sandbox_state: &Value) -> usize {
    sandbox_state["vehicles"].as_array().map_or(0, Vec::len)
}

/// Vehicles the sandbox holds as sold.
pub fn sold(sandbox_state: &Value) -> usize {
    sandbox_state["vehicles"].as_array().map_or(0, |v| {
        v.iter()
            .filter(|v| v["vehicle"]["status"] == "sold")
            .count()
    })
}

/// `POST /__sandbox/reset`: back to the config's world and behaviour.
pub async fn reset(sb: &RunningSandbox) {
    let response = raw_http()
        .post(format!("{}/__sandbox/reset", sb.base_url()))
        .send()
        .await
        .expect("reset answers");
    assert!(response.status().is_success(), "{}", response.status());
}

/// `DELETE /__sandbox/vehicles/{id}`: the vehicle is deleted behind the client's back.
pub async fn delete_vehicle(sb: &RunningSandbox, id: u64) {
    let response = raw_http()
        .delete(format!("{}/__sandbox/vehicles/{id}", sb.base_url()))
        .send()
        .await
        .expect("delete answers");
    assert!(response.status().is_success(), "{}", response.status());
}

/// `PATCH /__sandbox/vehicles/{id}`: fields (`sold`, `price`, …) edited behind the client's
/// back; answers the vehicle as edited.
pub async fn edit_vehicle(sb: &RunningSandbox, id: u64, edit: Value) -> Value {
    let response = raw_http()
        .patch(format!("{}/__sandbox/vehicles/{id}", sb.base_url()))
        .json(&edit)
        .send()
        .await
        .expect("edit answers");
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.expect("the sandbox answers JSON")
}

/// How many requests of `route` ended with `status` (e.g. "201", "dropped").
pub fn count(state: &Value, route: &str, status: &str) -> u64 {
    state["requests"][route][status].as_u64().unwrap_or(0)
}

/// A valid payload for location 10 whose VIN is unique per `n` (check digits are the step-2
/// mapper's concern; the service only needs a string).
pub fn payload(n: u32) -> VehiclePayload {
    VehiclePayload::new(10, format!("STK{n:05}"), format!("TESTVIN{n:010}"))
}

/// A fresh folder under the system temp dir (its name starts `lotsync-NAME-`), removed when
/// dropped: the one way the tests make temporary folders.
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        TempDir(
            tempfile::Builder::new()
                .prefix(&format!("lotsync-{name}-"))
                .tempdir()
                .expect("temp dir"),
        )
    }

    /// In memory (`/dev/shm`) where there is one, else as [`TempDir::new`]: for tests that
    /// write and commit thousands of small files, where the disk is most of their time.
    pub fn in_memory(name: &str) -> TempDir {
        let shm = std::path::Path::new("/dev/shm");
        if !shm.is_dir() {
            return TempDir::new(name);
        }
        TempDir(
            tempfile::Builder::new()
                .prefix(&format!("lotsync-{name}-"))
                .tempdir_in(shm)
                .expect("temp dir"),
        )
    }

    pub fn path(&self) -> &std::path::Path {
        self.0.path()
    }
}

/// Answers every queued operation as the service would (test-only: nothing is sent): ids are
/// handed out per VIN, transitions apply. Returns the operations answered, in order.
pub fn answer_all(outbox: &lotsync::outbox::Outbox) -> Vec<lotsync::outbox::Entry> {
    use lotsync::outbox::Answer;
    let mut answered = Vec::new();
    loop {
        let batch = outbox.take(100, 64).expect("take");
        if batch.is_empty() {
            break;
        }
        for entry in batch {
            let id = service_id(&entry.vin);
            outbox
                .acknowledge(
                    entry.seq,
                    &Answer::Applied {
                        service_id: Some(id),
                        sold: None,
                    },
                )
                .expect("acknowledge");
            answered.push(entry);
        }
    }
    outbox.flush().expect("flush");
    answered
}

/// A stable id per VIN, as the service would give.
pub fn service_id(vin: &str) -> u64 {
    vin.bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
        % 1_000_000_000
}
