//! A strict, fault-injecting imitation of the Vehicle Inventory Service, served on loopback.
//!
//! Every integration test, the demo, and integrators trying a feed use it instead of the real
//! service. It implements the spec and, where the spec is silent, these decisions:
//!
//! - Lists come in one shape, chosen in the config: `bare` (a JSON array), `paginator`
//!   (`current_page`, `data`, `last_page`, `next_page_url`, `per_page`, `total`) or `resource`
//!   (`data`, `links.next`, `meta`). `page` (1-based) and `per_page` (at most 100) are honoured;
//!   next URLs are absolute, on the host the client called.
//! - POST /v1/inventory is create-or-modify by VIN (case-insensitive) within the organization:
//!   201 with the new vehicle, or 200 with the modified one (same id). A modify replaces every
//!   field the body carries or leaves out; id, created_at, the sold state and, when not sent,
//!   `active` stay.
//! - …/{id}/sold gives status `sold` and sets sold_at; …/{id}/in-stock gives `in-stock` and
//!   clears it. A redundant transition is 200, or 422 with `strict_transitions`. An unknown id,
//!   or one of another organization, is 404.
//! - Validation failures are 422 `{"errors":{"code":422,"messages":[…]}}`, one message per
//!   problem; a body that is not JSON (or not sent as JSON) is 400; an Accept header that does
//!   not admit JSON is 406; an unknown path is 404; all in the same shape.
//! - A missing or unknown token is 401 "Unauthenticated."; a token whose user has no access to
//!   the organization in `X-Service-Organization-Id` (or no such header) is 403 "User does not
//!   have access to this organization.".
//! - Rate limit: a token bucket per token, checked right after the token; over it, 429 with
//!   Retry-After in whole seconds (rounded up) and `X-RateLimit-Reset`, the Unix time in whole
//!   seconds (rounded up) when the bucket has a token again. With a limit every answer carries
//!   `X-RateLimit-Limit` (the bucket size) and `X-RateLimit-Remaining` (tokens left), unless
//!   its `headers` are off; with no limit there are no `X-RateLimit-*` headers at all.
//! - Every 429 and 503 carries a Retry-After, and the sandbox remembers, per token, until when
//!   it asked the caller to wait (the answer's time plus the Retry-After, to the nanosecond).
//!   With `enforce_retry_after`, a request of that token arriving earlier is refused right
//!   after authentication, before the bucket and the faults: 429 with a Retry-After for the
//!   same moment (the seconds left, rounded up, at least 1), `X-RateLimit-Remaining: 0` when
//!   there is a limit, counted as `early` in the stats (not as `rate_limited`, nor as a fault).
//!   The window is not renewed by such a refusal, outlives `PUT /__sandbox/behaviour` and is
//!   forgotten on `POST /__sandbox/reset`.
//! - An Accept header, when sent, must admit JSON (else 406); none at all is fine.
//! - The vehicle answer follows §2.1 (odometer, exterior, interior, transmission, engine
//!   objects; name and slug from year, make, model, trim; `image` null until the images are
//!   "processed" `image_delay_ms` after the write; datetimes UTC `YYYY-MM-DD HH:MM:SS`).
//! - Notifications are per user and application; level defaults to `info`.
//!
//! Faults (500, 503, 504, spurious 429, dropped connection, ack-lost, a 200 HTML page from a
//! portal, a write answered with another vehicle, silence: a request held without a byte of
//! answer until the client gives up) are drawn per request from an RNG seeded in the config;
//! the Retry-After of the 429 and 503 faults (`retry_after_secs`, 1 s by default), added
//! latency and answers padded with whitespace are settings. A behaviour put while requests
//! are on their way applies to each once its latency has passed. `GET /__sandbox/state`
//! (`/__sandbox/stats`: its counters only, cheap to poll: requests per route and status,
//! `rate_limited`, `early`, `faults` by name, `max_in_flight`), `POST /__sandbox/reset`
//! (back to the config's state and behaviour) and `GET|PUT /__sandbox/behaviour` let tests
//! look inside and steer; `DELETE /__sandbox/vehicles/{id}` and `PATCH /__sandbox/vehicles/{id}`
//! (a JSON object: `sold`, `price` as a number or an object, or any other editable §2.1 field)
//! change a vehicle behind the client's back, as someone on the service's own screens would,
//! to inject drift for the reconciliation. They need no token and are not counted in the stats.

mod config;
mod routes;
mod validate;
mod world;

pub use config::{
    Behaviour, ConcurrencyConfig, Faults, FixedWindowConfig, ListDrills, ListShape, ListShift,
    LocationEntry, OrganizationEntry, RateHeaderSet, RateLimitConfig, RetryAfterForm,
    SandboxConfig, SandboxConfigError, SlidingWindowConfig, SlowingConfig, TokenEntry,
};
pub use validate::ALLOWED_VALUES;

use routes::{ConnectionKill, Shared};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tower::ServiceExt;

/// Why the sandbox could not start.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Config(#[from] SandboxConfigError),
    #[error("the sandbox config is not usable:\n  {}", .0.join("\n  "))]
    Invalid(Vec<String>),
}

/// A sandbox serving in the background of the current tokio runtime. Dropping it stops it.
pub struct RunningSandbox {
    addr: SocketAddr,
    stop: Arc<Notify>,
    task: JoinHandle<()>,
}

impl RunningSandbox {
    /// Binds `listen` (port 0 picks a free port) and starts serving.
    pub async fn start(config: SandboxConfig, listen: SocketAddr) -> Result<Self, SandboxError> {
        let problems = config.problems();
        if !problems.is_empty() {
            return Err(SandboxError::Invalid(problems));
        }
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| SandboxError::Bind {
                addr: listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| SandboxError::Bind {
            addr: listen,
            source,
        })?;
        let router = routes::router(Shared::new(config));
        let stop = Arc::new(Notify::new());
        let task = tokio::spawn(serve(listener, router, stop.clone()));
        Ok(RunningSandbox { addr, stop, task })
    }

    /// The default world with `behaviour`, on a free port of 127.0.0.1 (the demo, the
    /// benchmarks and the tests).
    pub async fn on_loopback(behaviour: Behaviour) -> Result<Self, SandboxError> {
        let config = SandboxConfig {
            behaviour,
            ..SandboxConfig::default()
        };
        RunningSandbox::start(config, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`, the base URL a client is given.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves until the task ends (it does not, unless stopped).
    pub async fn wait(mut self) {
        let _ = (&mut self.task).await;
    }

    /// Stops accepting connections and closes the open ones.
    pub async fn stop(mut self) {
        self.stop.notify_one();
        let _ = (&mut self.task).await;
    }
}

impl Drop for RunningSandbox {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Accepts connections until stopped. Each connection is served by hyper's HTTP/1 server with
/// keep-alive; a handler may end its connection without answering (`ConnectionKill`), which is
/// how dropped connections and lost acknowledgements are imitated.
async fn serve(listener: TcpListener, router: axum::Router, stop: Arc<Notify>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.notified() => break,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(error) => {
                // Out of file descriptors and the like: wait for connections to close.
                tracing::warn!(%error, "sandbox cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        connections.spawn(async move {
            let kill = Arc::new(Notify::new());
            let marker = ConnectionKill(kill.clone());
            let service = hyper::service::service_fn(
                move |mut request: hyper::Request<hyper::body::Incoming>| {
                    request.extensions_mut().insert(marker.clone());
                    router.clone().oneshot(request.map(axum::body::Body::new))
                },
            );
            let connection = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                () = kill.notified() => {}
            }
        });
        // Reap finished connection tasks so the set does not grow without bound.
        while connections.try_join_next().is_some() {}
    }
    connections.shutdown().await;
}
