//! The metrics endpoint of `lotsync run` (`[daemon] metrics`): the Prometheus/OpenMetrics text
//! at `GET /metrics` and a health check at `GET /health`, served over HTTP/1 on a loopback
//! port or a Unix socket.
//!
//! It owns the counters only the daemon sees happen (files filed, reconciliations), the text
//! they and the scraped figures are encoded into, the listener and its small server. It does
//! not own the figures read at each scrape: the outbox depth, the settled rate, the files
//! waiting, held and failed and each feed's last success are the status `lotsync status`
//! shows; the operations, requests and 429s are the uploader's stats; health is the
//! uploader's delivery condition, judged as `lotsync status` judges a stop.

use super::status::DaemonStatus;
use crate::config::MetricsListen;
use crate::upload::{DeliveryCondition, OpAnswerCount, StatsSnapshot};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The content type of [`prometheus_client::encoding::text::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Connections served at once in each of the two pools; a further one waits to be accepted.
const MAX_CONNECTIONS: usize = 32;

/// The longest a connection holds a place in the pool, idle or answering a client that does
/// not read (a scraper reconnects).
const CONNECTION_LIFETIME: Duration = Duration::from_secs(30);

/// The same for a connection taken while the pool is full: long enough for one answer.
const OVERFLOW_LIFETIME: Duration = Duration::from_secs(2);

/// A connection that sends no complete request head within this is closed.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The metrics cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("daemon.metrics: {reason}")]
    Invalid { reason: String },
    #[error("daemon.metrics {listen}: cannot listen there")]
    Bind {
        listen: MetricsListen,
        #[source]
        source: std::io::Error,
    },
    #[error("daemon.metrics {listen}: something answers there already (another lotsync?)")]
    InUse { listen: MetricsListen },
    #[error(
        "daemon.metrics {listen}: a file that is not a socket is there; lotsync leaves it alone"
    )]
    NotASocket { listen: MetricsListen },
}

/// The counters of what the daemon does with files and reconciliations, since it started.
#[derive(Debug, Default)]
pub struct Metrics {
    files: Family<FileLabels, Counter>,
    reconciliations: Family<ResultLabels, Counter>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FileLabels {
    feed: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    kind: &'static str,
    answer: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FeedLabels {
    feed: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FolderLabels {
    feed: String,
    folder: &'static str,
}

/// What a scrape reads besides the daemon's own counters.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// As `lotsync status` has it (from the running daemon).
    pub status: DaemonStatus,
    /// The uploader's operations by kind and answer.
    pub answers: Vec<OpAnswerCount>,
    /// The uploader's requests and 429s.
    pub upload: StatsSnapshot,
}

impl Metrics {
    /// A file was filed with `outcome` (`applied`, `already_applied`, `resumed`, `superseded`, `held`,
    /// `failed`).
    pub fn file_filed(&self, feed: &str, outcome: &'static str) {
        self.files
            .get_or_create(&FileLabels {
                feed: feed.to_owned(),
                outcome,
            })
            .inc();
    }

    /// A reconciliation asked of the daemon ended: `ok`, `incomplete` (refusals, or
    /// operations still queued) or `failed`.
    pub fn reconciled(&self, result: &'static str) {
        self.reconciliations
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// The whole exposition: the counters, and `snapshot`'s figures as they are now.
    pub fn encode(&self, snapshot: &Snapshot) -> Result<String, std::fmt::Error> {
        let mut registry = Registry::with_prefix("lotsync");
        registry.register(
            "files",
            "Files filed, by feed and outcome (applied, already_applied, resumed, superseded, held, failed)",
            self.files.clone(),
        );
        registry.register(
            "reconciliations",
            "Reconciliations asked of the daemon, and its own tries again of failed ones, by \
             result (ok, incomplete, failed)",
            self.reconciliations.clone(),
        );

        let operations = Family::<OperationLabels, Counter>::default();
        for a in &snapshot.answers {
            let labels = OperationLabels {
                kind: a.kind,
                answer: a.answer.name(),
            };
            operations.get_or_create(&labels).inc_by(a.count);
        }
        registry.register(
            "operations",
            "Operations delivered, by kind (create, update, sold, in_stock) and how the \
             service answered (applied, rejected, retryable: still failing after every retry \
             and queued again, fatal)",
            operations,
        );
        registry.register(
            "requests",
            "Requests sent to the service by delivery, retries included",
            counter(snapshot.upload.requests),
        );
        registry.register(
            "throttled_responses",
            "429 Too Many Requests answers to delivery's requests",
            counter(snapshot.upload.throttled),
        );

        let status = &snapshot.status;
        registry.register(
            "outbox_operations",
            "Operations queued for the service",
            gauge(i64::try_from(status.outbox_depth).unwrap_or(i64::MAX)),
        );
        let rate = Gauge::<f64, AtomicU64>::default();
        rate.set(status.settled_rate.unwrap_or(0.0));
        registry.register_with_unit(
            "settled_rate",
            "The request rate delivery settled on (0 before it is measured)",
            Unit::Other("requests_per_second".into()),
            rate,
        );
        let stopped = status.delivery.as_ref().and_then(|d| d.stopped.as_ref());
        registry.register(
            "delivery_stopped",
            "1 while delivery is stopped (a fatal answer such as a refused token, or it gave \
             up) and nothing was delivered since, else 0; /health answers 503 then",
            gauge(i64::from(stopped.is_some())),
        );
        if let Some(at) = status.reconcile_succeeded_at {
            registry.register_with_unit(
                "reconcile_last_success_timestamp",
                "When the last reconciliation that succeeded started (Unix time); no sample \
                 before the first",
                Unit::Seconds,
                gauge(at.unix()),
            );
        }
        if let Some(started) = status.started_at {
            registry.register_with_unit(
                "start_time",
                "When the daemon started (Unix time)",
                Unit::Seconds,
                gauge(started.unix()),
            );
        }

        let last_success = Family::<FeedLabels, Gauge>::default();
        let inbox = Family::<FolderLabels, Gauge>::default();
        for feed in &status.feeds {
            if let Some(at) = feed.last_success {
                let labels = FeedLabels {
                    feed: feed.name.clone(),
                };
                last_success.get_or_create(&labels).set(at.unix());
            }
            for (folder, n) in [
                ("waiting", feed.waiting),
                ("held", feed.held),
                ("failed", feed.failed),
            ] {
                let labels = FolderLabels {
                    feed: feed.name.clone(),
                    folder,
                };
                inbox
                    .get_or_create(&labels)
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
        }
        registry.register_with_unit(
            "last_success_timestamp",
            "When lotsync took the feed's newest file that was delivered in full or already \
             applied (Unix time); no sample before the first",
            Unit::Seconds,
            last_success,
        );
        registry.register(
            "inbox_files",
            "Export files in a feed's inbox waiting to be taken, and in its held/ and failed/",
            inbox,
        );

        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry)?;
        Ok(text)
    }
}

fn counter(value: u64) -> Counter {
    let counter = Counter::default();
    counter.inc_by(value);
    counter
}

fn gauge(value: i64) -> Gauge {
    let gauge = Gauge::default();
    gauge.set(value);
    gauge
}

/// Whether delivery works, for `/health`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    Ok,
    /// Delivery stopped, and why: the stop that makes `lotsync status` CRITICAL.
    Stopped(String),
}

impl Health {
    pub fn of(condition: &DeliveryCondition) -> Health {
        match &condition.stopped {
            None => Health::Ok,
            Some(stopped) => Health::Stopped(format!(
                "delivery stopped since {} UTC: {}",
                stopped.since, stopped.reason
            )),
        }
    }
}

/// What the server asks the daemon.
pub trait Source: Send + Sync + 'static {
    /// The exposition now.
    fn metrics(&self) -> impl Future<Output = Result<String, String>> + Send;
    fn health(&self) -> Health;
}

/// A bound listener, not yet served.
#[derive(Debug)]
pub enum MetricsListener {
    Tcp(std::net::TcpListener),
    /// With its socket file, removed when serving ends.
    Unix(std::os::unix::net::UnixListener, PathBuf),
}

impl MetricsListener {
    /// Binds where `listen` says. A Unix socket's folder is created; a stale socket file (no
    /// one answers on it) is replaced, one that answers is not. The socket is readable and
    /// writable by the daemon's user and group, like the control socket.
    pub fn bind(listen: &MetricsListen) -> Result<MetricsListener, MetricsError> {
        let failed = |source| MetricsError::Bind {
            listen: listen.clone(),
            source,
        };
        match listen {
            MetricsListen::Tcp(addr) => {
                let listener = std::net::TcpListener::bind(addr).map_err(failed)?;
                listener.set_nonblocking(true).map_err(failed)?;
                Ok(MetricsListener::Tcp(listener))
            }
            MetricsListen::Unix(path) => {
                use std::os::unix::fs::PermissionsExt;
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(failed)?;
                }
                if path.exists() {
                    if std::os::unix::net::UnixStream::connect(path).is_ok() {
                        return Err(MetricsError::InUse {
                            listen: listen.clone(),
                        });
                    }
                    if !super::control::is_socket(path) {
                        return Err(MetricsError::NotASocket {
                            listen: listen.clone(),
                        });
                    }
                    std::fs::remove_file(path).map_err(failed)?;
                }
                let listener = std::os::unix::net::UnixListener::bind(path).map_err(failed)?;
                listener.set_nonblocking(true).map_err(failed)?;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
                    .map_err(failed)?;
                Ok(MetricsListener::Unix(listener, path.clone()))
            }
        }
    }

    /// Where it listens, for the log (the port the kernel gave, too).
    pub fn shown(&self) -> String {
        match self {
            MetricsListener::Tcp(l) => match l.local_addr() {
                Ok(addr) => format!("http://{addr}"),
                Err(_) => "http://(unknown)".into(),
            },
            MetricsListener::Unix(_, path) => format!("unix:{}", crate::text::shown_path(path)),
        }
    }
}

/// Removes a Unix socket file when serving ends (the task is aborted when the daemon stops).
struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Serves `/metrics` and `/health` until `stop` says so (or the task is aborted); the
/// connections in hand end with it.
pub async fn serve<S: Source>(
    listener: MetricsListener,
    source: Arc<S>,
    mut stop: watch::Receiver<bool>,
) {
    let shown = listener.shown();
    match listener {
        MetricsListener::Tcp(listener) => match tokio::net::TcpListener::from_std(listener) {
            Ok(listener) => {
                let listener = &listener;
                let accept = move || async move { listener.accept().await.map(|(s, _)| s) };
                accept_until_stopped(accept, source, &shown, &mut stop).await;
            }
            Err(e) => cannot_serve(&shown, &e),
        },
        MetricsListener::Unix(listener, path) => {
            let _file = SocketFile(path);
            match tokio::net::UnixListener::from_std(listener) {
                Ok(listener) => {
                    let listener = &listener;
                    let accept = move || async move { listener.accept().await.map(|(s, _)| s) };
                    accept_until_stopped(accept, source, &shown, &mut stop).await;
                }
                Err(e) => cannot_serve(&shown, &e),
            }
        }
    }
}

/// Serves each connection `accept` gives until `stop` changes.
async fn accept_until_stopped<A, F, IO, S>(
    mut accept: A,
    source: Arc<S>,
    shown: &str,
    stop: &mut watch::Receiver<bool>,
) where
    A: FnMut() -> F,
    F: Future<Output = std::io::Result<IO>>,
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: Source,
{
    // The pool, and beyond it a second one of short-lived connections: when idle or
    // never-reading clients fill the first, a scrape or a `/health` still gets an answer.
    let mut connections = JoinSet::new();
    let mut overflow = JoinSet::new();
    loop {
        // With both full it waits for a connection to end, still told of a stop.
        tokio::select! {
            _ = stop.changed() => return,
            () = reap(&mut connections, &mut overflow) => {}
        }
        let stream = tokio::select! {
            _ = stop.changed() => return,
            accepted = accept() => accepted,
        };
        match stream {
            Ok(stream) if connections.len() < MAX_CONNECTIONS => {
                let served = connection(stream, source.clone());
                connections.spawn(async move {
                    let _ = tokio::time::timeout(CONNECTION_LIFETIME, served).await;
                });
            }
            Ok(stream) => {
                let served = connection(stream, source.clone());
                overflow.spawn(async move {
                    let _ = tokio::time::timeout(OVERFLOW_LIFETIME, served).await;
                });
            }
            Err(e) => cannot_accept(shown, &e).await,
        }
    }
}

/// Forgets the connections that ended; waits for one to end while both pools are full.
async fn reap(connections: &mut JoinSet<()>, overflow: &mut JoinSet<()>) {
    while connections.try_join_next().is_some() {}
    while overflow.try_join_next().is_some() {}
    if connections.len() >= MAX_CONNECTIONS && overflow.len() >= MAX_CONNECTIONS {
        tokio::select! {
            _ = connections.join_next() => {}
            _ = overflow.join_next() => {}
        }
    }
}

fn cannot_serve(shown: &str, e: &std::io::Error) {
    tracing::error!(listen = %shown, error = %crate::text::Chain(e), "metrics: cannot serve");
}

async fn cannot_accept(shown: &str, e: &std::io::Error) {
    tracing::warn!(listen = %shown, error = %crate::text::Chain(e), "metrics: cannot accept");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// One HTTP/1 connection.
async fn connection<IO, S>(io: IO, source: Arc<S>)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: Source,
{
    let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
        let source = source.clone();
        async move {
            Ok::<_, std::convert::Infallible>(
                answer(request.method(), request.uri().path(), &*source).await,
            )
        }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(hyper_util::rt::TokioIo::new(io), service)
        .await;
    if let Err(e) = served {
        tracing::debug!(error = %crate::text::Chain(&e), "metrics: connection ended early");
    }
}

/// The answer to one request: `/metrics`, `/health`, 405 for another method on them, 404
/// for anything else.
pub async fn answer<S: Source>(method: &Method, path: &str, source: &S) -> Response<Full<Bytes>> {
    let known = matches!(path, "/metrics" | "/health");
    if !known {
        return text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics or /health\n",
        );
    }
    if method != Method::GET && method != Method::HEAD {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
        response.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("GET, HEAD"),
        );
        return response;
    }
    match path {
        "/metrics" => match source.metrics().await {
            Ok(exposition) => {
                let mut response = Response::new(Full::new(Bytes::from(exposition)));
                response.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static(CONTENT_TYPE),
                );
                response
            }
            Err(e) => {
                tracing::warn!(error = %crate::text::Escaped(&e), "metrics: cannot read them");
                text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("cannot read the metrics: {e}\n"),
                )
            }
        },
        _ => match source.health() {
            Health::Ok => text(StatusCode::OK, "ok\n"),
            Health::Stopped(reason) => {
                text(StatusCode::SERVICE_UNAVAILABLE, &format!("{reason}\n"))
            }
        },
    }
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_owned())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::UtcTime;
    use crate::daemon::status::FeedStatus;
    use crate::upload::{OpAnswer, Stopped};
    use http_body_util::BodyExt;

    fn snapshot() -> Snapshot {
        let answers = vec![
            OpAnswerCount {
                kind: "create",
                answer: OpAnswer::Applied,
                count: 12,
            },
            OpAnswerCount {
                kind: "sold",
                answer: OpAnswer::Rejected,
                count: 2,
            },
        ];
        Snapshot {
            status: DaemonStatus {
                daemon: true,
                started_at: Some(UtcTime::from_unix(1_700_000_000)),
                feeds: vec![
                    FeedStatus {
                        name: "main \"lot\"".into(),
                        last_success: Some(UtcTime::from_unix(1_700_000_100)),
                        held: 1,
                        ..FeedStatus::default()
                    },
                    FeedStatus {
                        name: "new".into(),
                        ..FeedStatus::default()
                    },
                ],
                outbox_depth: 7,
                settled_rate: Some(9.5),
                reconcile_succeeded_at: Some(UtcTime::from_unix(1_700_000_200)),
                ..DaemonStatus::default()
            },
            answers,
            upload: StatsSnapshot {
                requests: 20,
                throttled: 3,
                ..StatsSnapshot::default()
            },
        }
    }

    /// The exposition's sample lines (no comments), for exact comparison.
    fn samples(text: &str) -> Vec<&str> {
        text.lines().filter(|l| !l.starts_with('#')).collect()
    }

    #[test]
    fn the_exposition_has_every_figure_under_its_name() {
        let metrics = Metrics::default();
        metrics.file_filed("main \"lot\"", "applied");
        metrics.file_filed("main \"lot\"", "applied");
        metrics.file_filed("new", "held");
        metrics.reconciled("ok");
        metrics.reconciled("failed");
        let text = metrics.encode(&snapshot()).unwrap();
        let lines = samples(&text);
        for expected in [
            r#"lotsync_files_total{feed="main \"lot\"",outcome="applied"} 2"#,
            r#"lotsync_files_total{feed="new",outcome="held"} 1"#,
            r#"lotsync_reconciliations_total{result="ok"} 1"#,
            r#"lotsync_reconciliations_total{result="failed"} 1"#,
            "lotsync_reconcile_last_success_timestamp_seconds 1700000200",
            r#"lotsync_operations_total{kind="create",answer="applied"} 12"#,
            r#"lotsync_operations_total{kind="sold",answer="rejected"} 2"#,
            "lotsync_requests_total 20",
            "lotsync_throttled_responses_total 3",
            "lotsync_outbox_operations 7",
            "lotsync_settled_rate_requests_per_second 9.5",
            "lotsync_delivery_stopped 0",
            "lotsync_start_time_seconds 1700000000",
            r#"lotsync_last_success_timestamp_seconds{feed="main \"lot\""} 1700000100"#,
            r#"lotsync_inbox_files{feed="main \"lot\"",folder="held"} 1"#,
            r#"lotsync_inbox_files{feed="new",folder="waiting"} 0"#,
        ] {
            assert!(lines.contains(&expected), "{expected}\n{text}");
        }
        // A feed without a success has no sample (not a 0 that says 1970).
        assert!(
            !text.contains(r#"lotsync_last_success_timestamp_seconds{feed="new"}"#),
            "{text}"
        );
        assert!(text.contains("# UNIT lotsync_last_success_timestamp_seconds seconds"));
        assert!(text.contains("# TYPE lotsync_files counter"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn a_stopped_delivery_is_a_one_and_unhealthy() {
        let stopped = Stopped {
            since: UtcTime::from_unix(1_700_000_000),
            reason: "the service did not accept the API token (401)".into(),
            status: Some(401),
            fatal: true,
        };
        let condition = DeliveryCondition {
            stopped: Some(stopped),
            ..DeliveryCondition::default()
        };
        let mut snapshot = snapshot();
        snapshot.status.delivery = Some(condition.clone());
        let text = Metrics::default().encode(&snapshot).unwrap();
        assert!(
            samples(&text).contains(&"lotsync_delivery_stopped 1"),
            "{text}"
        );
        match Health::of(&condition) {
            Health::Stopped(reason) => assert!(reason.contains("(401)"), "{reason}"),
            Health::Ok => panic!("stopped delivery must not be healthy"),
        }
        assert_eq!(Health::of(&DeliveryCondition::default()), Health::Ok);
    }

    struct Fixed {
        metrics: Result<String, String>,
        health: Health,
    }

    impl Source for Fixed {
        async fn metrics(&self) -> Result<String, String> {
            self.metrics.clone()
        }

        fn health(&self) -> Health {
            self.health.clone()
        }
    }

    async fn ask(source: &Fixed, method: Method, path: &str) -> (StatusCode, String, String) {
        let response = answer(&method, path, source).await;
        let status = response.status();
        let content_type = response
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            content_type,
            String::from_utf8(body.to_vec()).unwrap(),
        )
    }

    #[tokio::test]
    async fn routes_answer_metrics_health_and_nothing_else() {
        let healthy = Fixed {
            metrics: Ok("lotsync_requests_total 1\n# EOF\n".into()),
            health: Health::Ok,
        };
        let (status, content_type, body) = ask(&healthy, Method::GET, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type, CONTENT_TYPE);
        assert_eq!(body, "lotsync_requests_total 1\n# EOF\n");
        assert_eq!(
            ask(&healthy, Method::GET, "/health").await,
            (
                StatusCode::OK,
                "text/plain; charset=utf-8".into(),
                "ok\n".into()
            )
        );
        for path in ["/", "/metrics/", "/healthz", "/metrics.txt"] {
            let (status, _, _) = ask(&healthy, Method::GET, path).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        }
        let (status, _, _) = ask(&healthy, Method::POST, "/metrics").await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);

        let stopped = Fixed {
            metrics: Err("the state cannot be read".into()),
            health: Health::Stopped("delivery stopped since x UTC: 401".into()),
        };
        let (status, _, body) = ask(&stopped, Method::GET, "/health").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "delivery stopped since x UTC: 401\n");
        let (status, _, body) = ask(&stopped, Method::GET, "/metrics").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(body.contains("the state cannot be read"), "{body}");
    }

    /// A path that holds a file that is no socket is never bound over (nor deleted).
    #[test]
    fn a_file_that_is_not_a_socket_is_left_alone() {
        let tmp = crate::testing::temp_dir("metrics-file");
        let path = tmp.path().join("lotsync.toml");
        std::fs::write(&path, "keep me").unwrap();
        let bound = MetricsListener::bind(&MetricsListen::Unix(path.clone()));
        assert!(
            matches!(bound, Err(MetricsError::NotASocket { .. })),
            "{:?}",
            bound.err()
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me");
    }

    /// The server over a real Unix socket: bound, answering HTTP/1, and its file removed
    /// when serving ends; a socket that answers is not taken over.
    #[tokio::test]
    async fn a_unix_socket_serves_and_is_removed_when_serving_ends() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let tmp = crate::testing::temp_dir("daemon");
        let dir = tmp.path();
        let path = dir.join("run/metrics.sock");
        let listen = MetricsListen::Unix(path.clone());
        let listener = MetricsListener::bind(&listen).unwrap();
        assert!(matches!(
            MetricsListener::bind(&listen),
            Err(MetricsError::InUse { .. })
        ));
        let source = Arc::new(Fixed {
            metrics: Ok("m 1\n".into()),
            health: Health::Ok,
        });
        let (stop_tx, stop) = watch::channel(false);
        let serving = tokio::spawn(serve(listener, source, stop));
        let mut stream = tokio::net::UnixStream::connect(&path).await.unwrap();
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await.unwrap();
        assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
        assert!(reply.ends_with("\r\n\r\nok\n"), "{reply}");
        stop_tx.send(true).unwrap();
        serving.await.unwrap();
        assert!(!path.exists(), "the socket file is removed");
    }
}
