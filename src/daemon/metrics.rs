//! The metrics endpoint of `lotsync run` (`[daemon] metrics`): the metrics at `GET /metrics`,
//! as OpenMetrics text or, for a scraper that asks for it (`Accept: text/plain;
//! version=0.0.4`), Prometheus's classic text format, and a health check at `GET /health`,
//! served over HTTP/1 on a loopback port or a Unix socket.
//!
//! It owns the counters only the daemon sees happen (files filed, reconciliations), the build
//! and process figures (read from `/proc/self` at each scrape), the text they and the scraped
//! figures are encoded into, the listener and its small server. It does not own the figures
//! read at each scrape: the outbox depth, the settled rate, the files waiting, held and
//! failed and each feed's last success are the status `lotsync status` shows; the
//! operations, requests and 429s are the uploader's stats; the request durations are the
//! client's ([`crate::api::RequestTimes`]); health is the uploader's delivery condition,
//! judged as `lotsync status` judges a stop.
//!
//! Every counter has its series from the first scrape (a feed's files by outcome, the
//! reconciliations by result, the operations by kind and answer, at 0), so that `increase()`
//! sees the first one after a start.

use super::status::DaemonStatus;
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
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The content type of [`prometheus_client::encoding::text::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of Prometheus's classic text format ([`classic_text`]).
pub const CLASSIC_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The outcomes a file is filed with, each a series of `lotsync_files_total` from the start.
const FILE_OUTCOMES: [&str; 6] = [
    "applied",
    "already_applied",
    "resumed",
    "superseded",
    "held",
    "failed",
];

/// The results of a reconciliation, each a series of `lotsync_reconciliations_total`.
const RECONCILE_RESULTS: [&str; 3] = ["ok", "incomplete", "failed"];

/// Connections served at once in each of the two pools; a further one waits to be accepted.
const MAX_CONNECTIONS: usize = 32;

/// The longest a connection holds a place in the pool, idle or answering a client that does
/// not read (a scraper reconnects).
const CONNECTION_LIFETIME: Duration = Duration::from_secs(30);

/// The same for a connection taken while the pool is full: long enough for one answer.
const OVERFLOW_LIFETIME: Duration = Duration::from_secs(2);

/// A connection that sends no complete request head within this is closed.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Where `lotsync run` serves its metrics (`[daemon] metrics`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricsListen {
    /// A loopback address and port.
    Tcp(SocketAddr),
    /// A Unix socket at this absolute path.
    Unix(PathBuf),
}

impl std::fmt::Display for MetricsListen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetricsListen::Tcp(addr) => write!(f, "http://{addr}"),
            MetricsListen::Unix(path) => write!(f, "unix:{}", crate::text::shown_path(path)),
        }
    }
}

/// The longest Unix socket path the kernel takes (`sun_path` is 108 bytes with its NUL).
const UNIX_SOCKET_PATH_MAX: usize = 107;

impl MetricsListen {
    /// Reads `[daemon] metrics`. Only loopback addresses are taken: the metrics have no
    /// authentication, so another machine reaches them through a proxy or tunnel that adds
    /// it. `localhost` is 127.0.0.1; port 0 is refused (a scraper needs to know the port).
    pub fn parse(value: &str) -> Result<MetricsListen, String> {
        let value = value.trim();
        if value.is_empty() {
            return Err("is empty; leave the key out to serve no metrics".into());
        }
        if value.starts_with('/') {
            if value.len() > UNIX_SOCKET_PATH_MAX || value.ends_with('/') {
                return Err(format!(
                    "{value:?} cannot be a Unix socket (a file path of at most \
                     {UNIX_SOCKET_PATH_MAX} bytes, such as \"/run/lotsync/metrics.sock\")"
                ));
            }
            return Ok(MetricsListen::Unix(PathBuf::from(value)));
        }
        let addr: SocketAddr = match value.strip_prefix("localhost:") {
            Some(port) => format!("127.0.0.1:{port}").parse(),
            None => value.parse(),
        }
        .map_err(|_| {
            let relative = if value.contains('/') {
                "; a Unix socket path must be absolute"
            } else {
                ""
            };
            format!(
                "{value:?} is neither a loopback address and port (\"127.0.0.1:9187\", \
                 \"[::1]:9187\") nor an absolute Unix socket path \
                 (\"/run/lotsync/metrics.sock\"){relative}"
            )
        })?;
        if addr.port() == 0 {
            return Err(format!(
                "{value:?}: port 0 would be a different port at every start; name one, such \
                 as 9187"
            ));
        }
        if !addr.ip().is_loopback() {
            return Err(format!(
                "{value:?} is not a loopback address, and the metrics have no authentication: \
                 serve them on 127.0.0.1 or a Unix socket, and reach them from another \
                 machine through a proxy that authenticates (or an SSH tunnel)"
            ));
        }
        Ok(MetricsListen::Tcp(addr))
    }
}

/// The metrics cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
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
struct BuildLabels {
    version: &'static str,
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
    /// How long the client's requests took.
    pub request_times: crate::api::RequestTimes,
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

    /// The whole exposition as OpenMetrics text: the counters, and `snapshot`'s figures as
    /// they are now.
    pub fn encode(&self, snapshot: &Snapshot) -> Result<String, std::fmt::Error> {
        let mut registry = Registry::with_prefix("lotsync");
        registry.register(
            "build",
            "The version of lotsync running, as a label; always 1",
            prometheus_client::metrics::info::Info::new(BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            }),
        );
        // Every series from the start, at 0 (a reload's new feed from the next scrape).
        for feed in &snapshot.status.feeds {
            for outcome in FILE_OUTCOMES {
                let _ = self.files.get_or_create(&FileLabels {
                    feed: feed.name.clone(),
                    outcome,
                });
            }
        }
        for result in RECONCILE_RESULTS {
            let _ = self.reconciliations.get_or_create(&ResultLabels { result });
        }
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
        registry.register_with_unit(
            "request_duration",
            "How long the service took to answer lotsync's requests (delivery, lists, \
             reconciliation), from sending to the whole answer read, by endpoint and answer \
             class (2xx, 3xx, 4xx, 5xx; none: no answer)",
            Unit::Seconds,
            snapshot.request_times.family(),
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
            "The request rate delivery settled on: the configured ceiling, or at a start the \
             rate the last run settled on, until the service's answers move it",
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
        prometheus_client::encoding::text::encode_registry(&mut text, &registry)?;
        prometheus_client::encoding::text::encode_registry(&mut text, &process_registry())?;
        prometheus_client::encoding::text::encode_eof(&mut text)?;
        Ok(text)
    }
}

/// The process's figures under the names every Prometheus client library uses
/// (`process_cpu_seconds_total`, …), read from `/proc/self`; none elsewhere.
fn process_registry() -> Registry {
    let mut registry = Registry::default();
    let Some(p) = ProcessFigures::read() else {
        return registry;
    };
    let cpu = Counter::<f64, AtomicU64>::default();
    cpu.inc_by(p.cpu_seconds);
    registry.register_with_unit(
        "process_cpu",
        "CPU time the process used, user and system",
        Unit::Seconds,
        cpu,
    );
    registry.register_with_unit(
        "process_resident_memory",
        "Resident memory of the process",
        Unit::Bytes,
        gauge(i64::try_from(p.resident_bytes).unwrap_or(i64::MAX)),
    );
    registry.register_with_unit(
        "process_virtual_memory",
        "Virtual memory of the process",
        Unit::Bytes,
        gauge(i64::try_from(p.virtual_bytes).unwrap_or(i64::MAX)),
    );
    registry.register(
        "process_open_fds",
        "File descriptors the process holds open",
        gauge(i64::try_from(p.open_fds).unwrap_or(i64::MAX)),
    );
    if let Some(max) = p.max_fds {
        registry.register(
            "process_max_fds",
            "The most file descriptors the process may hold open (its soft limit)",
            gauge(i64::try_from(max).unwrap_or(i64::MAX)),
        );
    }
    let start = Gauge::<f64, AtomicU64>::default();
    start.set(p.start_time);
    registry.register_with_unit(
        "process_start_time",
        "When the process started (Unix time)",
        Unit::Seconds,
        start,
    );
    registry
}

/// Clock ticks per second of `/proc/self/stat`'s times: 100 on every Linux (USER_HZ, the
/// value Prometheus's own procfs library assumes too).
const TICKS_PER_SECOND: f64 = 100.0;

/// What `/proc` says of this process.
#[derive(Debug, Clone, PartialEq)]
struct ProcessFigures {
    cpu_seconds: f64,
    resident_bytes: u64,
    virtual_bytes: u64,
    open_fds: u64,
    max_fds: Option<u64>,
    /// Unix time, in seconds.
    start_time: f64,
}

impl ProcessFigures {
    /// None where there is no `/proc` (not Linux) or it cannot be read.
    fn read() -> Option<ProcessFigures> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok()?;
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        ProcessFigures::parse(&stat, &status, &boot, &limits, open_fds)
    }

    fn parse(
        stat: &str,
        status: &str,
        boot: &str,
        limits: &str,
        open_fds: u64,
    ) -> Option<ProcessFigures> {
        // The command's name is in parentheses and may hold spaces: fields count after it.
        let after_name = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        // Field 3 (state) is the first after the name: utime is field 14, stime 15,
        // starttime 22.
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        let kib = |key: &str| {
            status.lines().find_map(|l| {
                let value = l.strip_prefix(key)?.trim().strip_suffix("kB")?;
                value.trim().parse::<u64>().ok()
            })
        };
        let boot_time = boot
            .lines()
            .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<u64>().ok())?;
        let max_fds = limits.lines().find_map(|l| {
            let rest = l.strip_prefix("Max open files")?;
            rest.split_whitespace().next()?.parse::<u64>().ok()
        });
        Some(ProcessFigures {
            cpu_seconds: (field(14)? + field(15)?) as f64 / TICKS_PER_SECOND,
            resident_bytes: kib("VmRSS:")? * 1024,
            virtual_bytes: kib("VmSize:")? * 1024,
            open_fds,
            max_fds,
            start_time: boot_time as f64 + field(22)? as f64 / TICKS_PER_SECOND,
        })
    }
}

/// OpenMetrics text (as [`Metrics::encode`] writes it) in Prometheus's classic text format
/// (version 0.0.4): no `# UNIT` and no `# EOF`; a counter's HELP and TYPE name its samples
/// (`_total`); an info is a gauge named `_info`. The samples are the same.
pub fn classic_text(openmetrics: &str) -> String {
    let types: std::collections::HashMap<&str, &str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split_once(' '))
        .collect();
    let named = |name: &str| match types.get(name) {
        Some(&"counter") => format!("{name}_total"),
        Some(&"info") => format!("{name}_info"),
        _ => name.to_owned(),
    };
    let mut text = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some((name, help)) = line.strip_prefix("# HELP ").and_then(|r| r.split_once(' ')) {
            text.push_str(&format!("# HELP {} {help}\n", named(name)));
        } else if let Some((name, kind)) =
            line.strip_prefix("# TYPE ").and_then(|r| r.split_once(' '))
        {
            let kind = match kind {
                "counter" | "gauge" | "histogram" | "summary" => kind,
                "info" | "stateset" => "gauge",
                _ => "untyped",
            };
            text.push_str(&format!("# TYPE {} {kind}\n", named(name)));
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}

/// Whether a scraper's `Accept` header prefers the classic text format: it names `text/plain`
/// and ranks it above OpenMetrics (by `q`, OpenMetrics winning a tie). Without the header, or
/// for anything else, OpenMetrics.
pub fn wants_classic(accept: Option<&str>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    let (mut classic, mut openmetrics) = (None::<f64>, None::<f64>);
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.strip_prefix("q="))
            .find_map(|q| q.parse::<f64>().ok())
            .unwrap_or(1.0);
        let best = match media.as_str() {
            "text/plain" => &mut classic,
            "application/openmetrics-text" => &mut openmetrics,
            _ => continue,
        };
        *best = Some(best.map_or(q, |b| b.max(q)));
    }
    match (classic, openmetrics) {
        (Some(c), Some(o)) => c > o,
        (Some(c), None) => c > 0.0,
        _ => false,
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
            let accept = request
                .headers()
                .get(hyper::header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            Ok::<_, std::convert::Infallible>(
                answer(request.method(), request.uri().path(), accept, &*source).await,
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

/// The answer to one request: `/metrics` (in the format `accept` prefers), `/health`, 405 for
/// another method on them, 404 for anything else.
pub async fn answer<S: Source>(
    method: &Method,
    path: &str,
    accept: Option<&str>,
    source: &S,
) -> Response<Full<Bytes>> {
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
                let (body, content_type) = match wants_classic(accept) {
                    true => (classic_text(&exposition), CLASSIC_CONTENT_TYPE),
                    false => (exposition, CONTENT_TYPE),
                };
                let mut response = Response::new(Full::new(Bytes::from(body)));
                response.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static(content_type),
                );
                // What a cache between scraper and daemon must key the answer on.
                response.headers_mut().insert(
                    hyper::header::VARY,
                    hyper::header::HeaderValue::from_static("Accept"),
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

    #[test]
    fn metrics_are_served_on_loopback_or_an_absolute_unix_socket() {
        let tcp = |s: &str| MetricsListen::Tcp(s.parse().unwrap());
        assert_eq!(
            MetricsListen::parse("127.0.0.1:9187"),
            Ok(tcp("127.0.0.1:9187"))
        );
        assert_eq!(MetricsListen::parse(" [::1]:9187 "), Ok(tcp("[::1]:9187")));
        assert_eq!(
            MetricsListen::parse("localhost:9187"),
            Ok(tcp("127.0.0.1:9187"))
        );
        assert_eq!(
            MetricsListen::parse("/run/lotsync/metrics.sock"),
            Ok(MetricsListen::Unix("/run/lotsync/metrics.sock".into()))
        );
        for (value, said) in [
            ("0.0.0.0:9187", "not a loopback address"),
            ("192.168.1.5:9187", "not a loopback address"),
            ("127.0.0.1:0", "port 0"),
            ("127.0.0.1", "neither a loopback address and port"),
            ("metrics.example.com:9187", "neither"),
            ("run/metrics.sock", "must be absolute"),
            ("/run/lotsync/", "cannot be a Unix socket"),
            ("", "is empty"),
        ] {
            let err = MetricsListen::parse(value).unwrap_err();
            assert!(err.contains(said), "{value:?}: {err}");
        }
        let long = format!("/{}", "x".repeat(UNIX_SOCKET_PATH_MAX));
        assert!(MetricsListen::parse(&long).is_err());
    }

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
            request_times: crate::api::RequestTimes::default(),
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

    /// Every counter's series is there before anything happened (a first held file after a
    /// restart is an increase from 0), every metric has a HELP text, and the build and the
    /// process are described.
    #[test]
    fn every_series_is_there_from_the_start_with_help() {
        let text = Metrics::default().encode(&snapshot()).unwrap();
        let lines = samples(&text);
        let build = format!(
            r#"lotsync_build_info{{version="{}"}} 1"#,
            env!("CARGO_PKG_VERSION")
        );
        for expected in [
            r#"lotsync_files_total{feed="new",outcome="held"} 0"#,
            r#"lotsync_files_total{feed="new",outcome="applied"} 0"#,
            r#"lotsync_files_total{feed="main \"lot\"",outcome="failed"} 0"#,
            r#"lotsync_reconciliations_total{result="ok"} 0"#,
            r#"lotsync_reconciliations_total{result="incomplete"} 0"#,
            r#"lotsync_reconciliations_total{result="failed"} 0"#,
            &build,
        ] {
            assert!(lines.contains(&expected), "{expected}\n{text}");
        }
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_open_fds ",
            "process_start_time_seconds ",
        ] {
            assert!(lines.iter().any(|l| l.starts_with(name)), "{name}\n{text}");
        }
        let typed: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next())
            .collect();
        assert!(typed.len() >= 15, "{text}");
        for name in typed {
            let help = format!("# HELP {name} ");
            assert!(
                text.lines()
                    .any(|l| l.starts_with(&help) && l.len() > help.len() + 10),
                "no help for {name}\n{text}"
            );
        }
        assert!(!text.contains("0 before it is measured"), "{text}");
    }

    /// The classic text format: the same samples, a counter's HELP and TYPE under its
    /// samples' name, no UNIT and no EOF.
    #[test]
    fn the_classic_format_names_counters_by_their_samples() {
        let metrics = Metrics::default();
        metrics.file_filed("new", "held");
        let snapshot = snapshot();
        // A family without a series is left out: one request timed.
        let url = crate::api::Url::parse("http://127.0.0.1/v1/inventory").unwrap();
        snapshot
            .request_times
            .observe("POST", &url, Some(201), Duration::from_millis(30));
        let openmetrics = metrics.encode(&snapshot).unwrap();
        let classic = classic_text(&openmetrics);
        for expected in [
            "# TYPE lotsync_files_total counter",
            "# TYPE lotsync_build_info gauge",
            "# TYPE process_cpu_seconds_total counter",
            "# TYPE lotsync_settled_rate_requests_per_second gauge",
            "# TYPE lotsync_request_duration_seconds histogram",
        ] {
            assert!(
                classic.lines().any(|l| l == expected),
                "{expected}\n{classic}"
            );
        }
        assert!(
            classic
                .lines()
                .any(|l| l.starts_with("# HELP lotsync_files_total Files filed")),
            "{classic}"
        );
        assert!(
            !classic.contains("# EOF") && !classic.contains("# UNIT"),
            "{classic}"
        );
        assert_eq!(samples(&classic), samples(&openmetrics));
    }

    #[test]
    fn accept_chooses_the_format() {
        assert!(wants_classic(Some("text/plain; version=0.0.4")));
        assert!(wants_classic(Some(
            "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        )));
        // Prometheus itself: OpenMetrics first.
        assert!(!wants_classic(Some(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
             version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        )));
        assert!(!wants_classic(None));
        assert!(!wants_classic(Some("*/*")));
        assert!(!wants_classic(Some("text/plain;q=0")));
        assert!(wants_classic(Some(
            "application/openmetrics-text;q=0.2, text/plain;q=0.9"
        )));
    }

    #[test]
    fn process_figures_come_from_proc() {
        let stat = "4242 (lot sync) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 50 0 0 20 0 \
                    9 0 1000 123456789 2000 18446744073709551615";
        let status = "Name:\tlotsync\nVmSize:\t  200000 kB\nVmRSS:\t   12000 kB\n";
        let boot = "cpu  1 2 3\nbtime 1700000000\n";
        let limits = "Limit Soft Limit Hard Limit Units\nMax open files 1024 524288 files\n";
        assert_eq!(
            ProcessFigures::parse(stat, status, boot, limits, 7),
            Some(ProcessFigures {
                cpu_seconds: 3.0,
                resident_bytes: 12_000 * 1024,
                virtual_bytes: 200_000 * 1024,
                open_fds: 7,
                max_fds: Some(1024),
                start_time: 1_700_000_010.0,
            })
        );
        if cfg!(target_os = "linux") {
            let p = ProcessFigures::read().unwrap();
            let now = UtcTime::now().unix() as f64;
            assert!(p.resident_bytes > 0 && p.open_fds > 0, "{p:?}");
            assert!(
                p.start_time <= now + 1.0 && p.start_time > now - 86_400.0,
                "{p:?}"
            );
        }
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
        let response = answer(&method, path, None, source).await;
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
        let response = answer(
            &Method::GET,
            "/metrics",
            Some("text/plain; version=0.0.4"),
            &healthy,
        )
        .await;
        assert_eq!(
            response.headers()[hyper::header::CONTENT_TYPE],
            CLASSIC_CONTENT_TYPE
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"lotsync_requests_total 1\n");
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
