//! lotsync's own config file (TOML): where the service is and as whom lotsync calls it.
//!
//! Typed and checked where it is declared: unknown keys are errors with their path, defaults
//! are small named functions, and [`Config::load`] checks what types cannot (unique feed names,
//! fractions in range) and names every problem at once. The notifications section joins here
//! with the stage that reads it.

use crate::api::{ApiToken, ClientSettings};
use crate::diff::{Mode, Rules};
use serde::Deserialize;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The systemd credential holding the token when the config names none
/// (`LoadCredential=api-token:/etc/lotsync/api-token`).
pub const CREDENTIAL: &str = "api-token";

/// `$CREDENTIALS_DIRECTORY/api-token`, when systemd passed credentials.
fn credential_file() -> Option<PathBuf> {
    let dir = std::env::var_os("CREDENTIALS_DIRECTORY")?;
    Some(Path::new(&dir).join(CREDENTIAL))
}

/// Mode bits a token file must not have: any for other users, and write for its group.
const TOKEN_FILE_FORBIDDEN: u32 = 0o027;

/// Reads `api.token_file`, refusing it (as ssh refuses a key) when users other than its owner
/// and group may read or change it, or its group may change it: the token would not be the
/// dealer's secret any more. 0600, 0400, and 0640 with lotsync's group are fine. The mode is
/// that of the file opened, so it cannot be swapped between the check and the read.
fn read_token_file(file: &Path) -> Result<String, ConfigError> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let shown = crate::text::shown_path(file);
    let cannot_read = |e: std::io::Error| {
        ConfigError::Token(format!(
            "api.token_file {shown}: cannot read the token: {e}"
        ))
    };
    let mut opened = std::fs::File::open(file).map_err(cannot_read)?;
    let mode = opened.metadata().map_err(cannot_read)?.permissions().mode() & 0o7777;
    if mode & TOKEN_FILE_FORBIDDEN != 0 {
        let others = match (mode & 0o004 != 0, mode & 0o002 != 0) {
            (true, true) => Some("other users read and change it"),
            (true, false) => Some("other users read it"),
            (false, true) => Some("other users change it"),
            (false, false) => (mode & 0o001 != 0).then_some("other users execute it"),
        };
        let group = (mode & 0o020 != 0).then_some("its group change it");
        let who = [others, group]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" and ");
        let quoted = shell_quoted(&shown);
        return Err(ConfigError::Token(format!(
            "api.token_file {shown}: mode {mode:04o} lets {who}, and the token must stay \
             private; run `chmod 600 {quoted}` (or `chmod 640 {quoted}` when the file's group \
             is lotsync's and lotsync reads it through the group)"
        )));
    }
    let mut token = String::new();
    opened.read_to_string(&mut token).map_err(cannot_read)?;
    Ok(token)
}

/// `text` as one word of a POSIX shell command (quoted when it holds anything the shell reads
/// specially). A NUL, which no path can hold, is shown escaped.
fn shell_quoted(text: &str) -> String {
    shlex::try_quote(text).map_or_else(|_| text.escape_default().to_string(), |q| q.into_owned())
}

/// Where the config is read from when no `--config` is given.
pub const DEFAULT_PATH: &str = "/etc/lotsync/lotsync.toml";

/// The whole config file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub api: ApiConfig,
    #[serde(default)]
    pub state: StateConfig,
    /// Mapping profiles named by feeds; relative to the config file's folder.
    #[serde(default = "default_profiles_dir")]
    pub profiles_dir: PathBuf,
    /// `[[feed]]`: one per export the DMS writes.
    #[serde(default, rename = "feed")]
    pub feeds: Vec<FeedConfig>,
    /// `[notifications]`: absent, none are sent.
    #[serde(default)]
    pub notifications: Option<NotificationsConfig>,
    /// `[daemon]`: how `lotsync run` watches, answers and tidies up.
    #[serde(default)]
    pub daemon: DaemonConfig,
}

/// `[daemon]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonConfig {
    /// The control socket `lotsync status`, `reconcile` and `release` talk to (systemd's
    /// RuntimeDirectory).
    #[serde(default = "default_socket")]
    pub socket: PathBuf,
    /// A file is taken once its size and modification time stayed the same this long (a
    /// file renamed into the inbox is taken at once) and, for a feed watched with notify, a
    /// file seen being written once its writer closed it.
    #[serde(default = "default_settle_secs")]
    pub settle_secs: f64,
    /// A CSV whose last record is cut (no line break after it, a quote left open), or an
    /// empty file, is being written still: the daemon waits for it to change, and once it has
    /// not changed for this long it goes to `held/` with the reason. A file seen being
    /// written waits this long for its writer to close it, then the settle time decides.
    #[serde(default = "default_incomplete_wait_secs")]
    pub incomplete_wait_secs: f64,
    /// Archived exports and their reports older than this many days are deleted (0: kept).
    #[serde(default = "default_archive_days")]
    pub archive_days: u32,
    /// A reconciliation asked of the daemon (the nightly timer's) that fails is tried again
    /// after this long, the wait doubling, four more times (by default 5, 10, 20 and 40
    /// minutes later: the same night).
    #[serde(default = "default_reconcile_retry_secs")]
    pub reconcile_retry_secs: u64,
    /// Log level (`error`, `warn`, `info`, `debug`, or a tracing filter); `RUST_LOG` wins.
    #[serde(default = "default_log_level")]
    pub log_level: String,
    /// How log lines are written; `LOTSYNC_LOG_FORMAT` wins.
    #[serde(default)]
    pub log_format: LogFormat,
    /// Where `lotsync run` serves its Prometheus metrics and health: `127.0.0.1:9187` (a
    /// loopback address and port) or an absolute Unix socket path. Absent: no metrics. Read
    /// with [`DaemonConfig::metrics_listen`].
    #[serde(default)]
    pub metrics: Option<String>,
    /// Whether the config has a `[daemon]` table: then a daemon is meant to serve its state,
    /// and `lotsync status` finding none while work waits is CRITICAL.
    #[serde(skip_deserializing, default = "written")]
    pub configured: bool,
}

/// A field that is true when its table was written in the config.
fn written() -> bool {
    true
}

/// Where `lotsync run` serves its metrics (`[daemon] metrics`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricsListen {
    /// A loopback address and port.
    Tcp(std::net::SocketAddr),
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
        let addr: std::net::SocketAddr = match value.strip_prefix("localhost:") {
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

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// The journal when systemd connected stderr to it (`JOURNAL_STREAM`), else text.
    #[default]
    Auto,
    /// Lines for a person: time, level, message, fields.
    Text,
    /// journald's own protocol: a priority and a field per value (`FEED`, `FILE`, `VIN`, `OP`),
    /// one entry per event.
    Journal,
    /// One JSON object per line, for shipping to a log store.
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(LogFormat::Auto),
            "text" => Ok(LogFormat::Text),
            "journal" => Ok(LogFormat::Journal),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!(
                "{s:?} is not a log format (auto, text, journal, json)"
            )),
        }
    }
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            socket: default_socket(),
            settle_secs: default_settle_secs(),
            incomplete_wait_secs: default_incomplete_wait_secs(),
            archive_days: default_archive_days(),
            reconcile_retry_secs: default_reconcile_retry_secs(),
            log_level: default_log_level(),
            log_format: LogFormat::default(),
            metrics: None,
            configured: false,
        }
    }
}

impl DaemonConfig {
    pub fn settle(&self) -> Duration {
        Duration::from_secs_f64(self.settle_secs.clamp(0.0, 3600.0))
    }

    /// How long an incomplete file may stay unchanged before it is held.
    pub fn incomplete_wait(&self) -> Duration {
        Duration::from_secs_f64(self.incomplete_wait_secs.clamp(0.0, 86_400.0))
    }

    /// Where the metrics are served; None when `metrics` is absent. The error says what is
    /// wrong with the value (see [`MetricsListen::parse`]).
    pub fn metrics_listen(&self) -> Result<Option<MetricsListen>, String> {
        self.metrics
            .as_deref()
            .map(MetricsListen::parse)
            .transpose()
    }
}

/// How a feed's inbox is watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WatchMode {
    /// The kernel tells (inotify): immediate, for local folders.
    #[default]
    Notify,
    /// Look every `poll_interval_secs`: for SMB/NFS shares, which send no events.
    Poll,
}

impl WatchMode {
    /// Its name as the config writes it (`notify`, `poll`).
    pub fn name(self) -> &'static str {
        match self {
            WatchMode::Notify => "notify",
            WatchMode::Poll => "poll",
        }
    }
}

/// `[notifications]`: where lotsync tells people about problems on the service.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationsConfig {
    /// The `{application_slug}` of the notification calls (spec §4.5-4.7).
    pub application_slug: String,
}

/// `[state]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// The sled database and its lock live here (systemd's StateDirectory).
    #[serde(default = "default_state_dir")]
    pub dir: PathBuf,
    /// The database's page cache, in MiB (1 to 4096). sled's own default (1 GiB) suits a
    /// server; the state of a dealership's lots fits a few MiB, and a cache larger than the
    /// data only lets the daemon's memory grow with every file.
    #[serde(default = "default_cache_mib")]
    pub cache_mib: u64,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            dir: default_state_dir(),
            cache_mib: default_cache_mib(),
        }
    }
}

fn default_cache_mib() -> u64 {
    crate::state::DEFAULT_CACHE_MIB
}

/// `[[feed]]`: one DMS export.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedConfig {
    pub name: String,
    /// The folder the DMS drops its files into.
    pub inbox: PathBuf,
    /// Where its vehicles are, unless the profile routes them by lot code.
    pub location_id: u64,
    /// `auto`, a profile name in `profiles_dir`, or a path to a .toml file.
    #[serde(default = "default_profile")]
    pub profile: String,
    /// `full`: every file lists all vehicles, absent ones were sold; `delta`: only changes.
    #[serde(default)]
    pub mode: Mode,
    /// A full snapshot that would sell more than this share of a location's vehicles is held.
    #[serde(default = "default_max_sold_fraction")]
    pub max_sold_fraction: f64,
    /// Sold only after this many consecutive full snapshots without the vehicle.
    #[serde(default = "default_sold_after_absent")]
    pub sold_after_absent: u32,
    /// `notify` (default) or `poll` for network shares.
    #[serde(default)]
    pub watch: WatchMode,
    /// With `watch = "poll"`: seconds between looks.
    #[serde(default = "default_poll_interval_secs")]
    pub poll_interval_secs: f64,
}

/// `[api]`: the Vehicle Inventory Service.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    /// The spec's `{base_url}`; https, or plain http to this machine only.
    pub base_url: String,
    /// The version segment of every path.
    #[serde(default = "default_version")]
    pub version: String,
    /// Sent as `X-Service-Organization-Id`.
    pub organization_id: u64,
    /// A file holding the token. With neither this nor `token_env`, the systemd credential
    /// `api-token` is read (`$CREDENTIALS_DIRECTORY/api-token`).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Or the name of an environment variable holding it.
    #[serde(default)]
    pub token_env: Option<String>,
    /// Ceiling of the request rate; the uploader adapts below it.
    #[serde(default = "default_max_requests_per_second")]
    pub max_requests_per_second: f64,
    /// Requests let through at once after a quiet spell (1: evenly spaced).
    #[serde(default = "default_burst")]
    pub burst: u32,
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: u32,
    /// Attempts of one call (with backoff between them) before its operation goes back to
    /// the queue.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// Delivery stops when the service has answered nothing for this many seconds, on the wall
    /// clock whatever the requests are doing, or at once when the service asks to wait longer
    /// than that (`lotsync sync` then exits 3; the daemon tries again later).
    #[serde(default = "default_give_up_after_secs")]
    pub give_up_after_secs: u64,
    /// Whole-request timeout, in seconds.
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    /// The most KiB read of an answer that is one vehicle or notification, or an error; a
    /// larger one stops delivery (a proxy or portal answering, most likely).
    #[serde(default = "default_max_answer_kib")]
    pub max_answer_kib: u32,
    /// The most KiB read of one page of the service's list.
    #[serde(default = "default_max_list_page_kib")]
    pub max_list_page_kib: u32,
}

/// A config that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "no config file at {}: give its path with --config FILE or LOTSYNC_CONFIG=FILE \
         (config/lotsync.example.toml is one to start from)",
        crate::text::shown_path(.path)
    )]
    Missing { path: PathBuf },
    #[error("cannot read config {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not TOML, or not lotsync's config (`lotsync validate` names every problem).
    #[error("config {}", crate::text::shown_path(.path))]
    Parse {
        path: PathBuf,
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error("{0}")]
    Token(String),
    #[error("config {path}:\n  {}", problems.join("\n  "))]
    Invalid {
        path: PathBuf,
        problems: Vec<String>,
    },
    #[error("{0}")]
    Feed(String),
    /// The client cannot be built from `[api]` (a base URL that is not http(s), a token a
    /// header cannot hold); the message names the key.
    #[error(transparent)]
    Client(Box<crate::api::ApiError>),
}

impl Config {
    /// Reads and checks a config; relative paths in it are taken from the file's folder.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                ConfigError::Missing {
                    path: path.to_owned(),
                }
            } else {
                ConfigError::Read {
                    path: path.to_owned(),
                    source,
                }
            }
        })?;
        let mut config: Config = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            source: Box::new(e),
        })?;
        config.resolve_paths(&config_dir(path));
        let problems = config.problems();
        if !problems.is_empty() {
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                problems,
            });
        }
        Ok(config)
    }

    fn resolve_paths(&mut self, base: &Path) {
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        resolve(&mut self.state.dir);
        resolve(&mut self.profiles_dir);
        resolve(&mut self.daemon.socket);
        if let Some(token_file) = &mut self.api.token_file {
            resolve(token_file);
        }
        for feed in &mut self.feeds {
            resolve(&mut feed.inbox);
        }
    }

    /// What is wrong with the values, each named by its key.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.api.organization_id == 0 {
            problems.push("api.organization_id: must be the organization's id (not 0)".into());
        }
        let rate = self.api.max_requests_per_second;
        if rate.is_nan() || rate <= 0.0 {
            problems.push("api.max_requests_per_second: must be more than 0".into());
        }
        if self.api.max_in_flight == 0 {
            problems.push("api.max_in_flight: must be at least 1".into());
        }
        if self.api.burst == 0 {
            problems.push("api.burst: must be at least 1".into());
        }
        if self.api.max_attempts == 0 {
            problems.push("api.max_attempts: must be at least 1".into());
        }
        for (key, kib, least, default) in [
            (
                "max_answer_kib",
                self.api.max_answer_kib,
                MIN_ANSWER_KIB,
                default_max_answer_kib(),
            ),
            (
                "max_list_page_kib",
                self.api.max_list_page_kib,
                MIN_LIST_PAGE_KIB,
                default_max_list_page_kib(),
            ),
        ] {
            if !(least..=MAX_ANSWER_LIMIT_KIB).contains(&kib) {
                problems.push(format!(
                    "api.{key}: {kib} is not between {least} and {MAX_ANSWER_LIMIT_KIB} KiB \
                     (the default, {default}, suits the service)"
                ));
            }
        }
        if let Some(n) = &self.notifications {
            let slug = n.application_slug.trim();
            if slug.is_empty() || slug.contains('/') {
                problems.push(
                    "notifications.application_slug: must be the application's slug, \
                     such as \"inventory\""
                        .into(),
                );
            }
        }
        let retry = self.daemon.reconcile_retry_secs;
        if !(1..=86_400).contains(&retry) {
            problems.push(format!(
                "daemon.reconcile_retry_secs: {retry} is not between 1 and 86400 seconds"
            ));
        }
        let cache = self.state.cache_mib;
        if !(1..=4096).contains(&cache) {
            problems.push(format!(
                "state.cache_mib: {cache} is not between 1 and 4096 MiB (the default, {}, \
                 holds a lot of 100,000 vehicles)",
                crate::state::DEFAULT_CACHE_MIB
            ));
        }
        let settle = self.daemon.settle_secs;
        if settle.is_nan() || !(0.0..=3600.0).contains(&settle) {
            problems.push(format!(
                "daemon.settle_secs: {settle} is not between 0 and 3600 seconds"
            ));
        }
        let wait = self.daemon.incomplete_wait_secs;
        if wait.is_nan() || !(0.0..=86_400.0).contains(&wait) {
            problems.push(format!(
                "daemon.incomplete_wait_secs: {wait} is not between 0 and 86400 seconds"
            ));
        }
        match self.daemon.metrics_listen() {
            Err(reason) => problems.push(format!("daemon.metrics: {reason}")),
            // Path equality compares components, so `/run/lotsync//./lotsync.sock` is the
            // same path as the socket's.
            Ok(Some(MetricsListen::Unix(path))) if path == self.daemon.socket => {
                problems.push(format!(
                    "daemon.metrics: {} is the control socket (daemon.socket); serve the \
                     metrics on another path, such as \"/run/lotsync/metrics.sock\"",
                    crate::text::shown_path(&path)
                ));
            }
            Ok(_) => {}
        }
        if tracing_subscriber::EnvFilter::try_new(&self.daemon.log_level).is_err() {
            problems.push(format!(
                "daemon.log_level: {:?} is not a level (error, warn, info, debug, trace)",
                self.daemon.log_level
            ));
        }
        let mut names = HashSet::new();
        for (i, feed) in self.feeds.iter().enumerate() {
            let at = format!("feed[{i}] ({:?})", feed.name);
            if feed.name.trim().is_empty() {
                problems.push(format!("feed[{i}].name: must not be empty"));
            } else if feed.name == crate::plan::RECONCILE_FEED {
                problems.push(format!(
                    "{at}.name: {:?} is the name the nightly reconciliation uses; pick another",
                    feed.name
                ));
            } else if !names.insert(feed.name.as_str()) {
                problems.push(format!("{at}.name: another feed has the same name"));
            }
            if !(0.0..=1.0).contains(&feed.max_sold_fraction) {
                problems.push(format!(
                    "{at}.max_sold_fraction: {} is not a share between 0 and 1",
                    feed.max_sold_fraction
                ));
            }
            if feed.sold_after_absent == 0 {
                problems.push(format!("{at}.sold_after_absent: must be at least 1"));
            }
            let interval = feed.poll_interval_secs;
            if interval.is_nan() || !(0.1..=3600.0).contains(&interval) {
                problems.push(format!(
                    "{at}.poll_interval_secs: {interval} is not between 0.1 and 3600 seconds"
                ));
            }
        }
        problems
    }

    /// The feed of each file (see [`Config::feed_for`]).
    pub fn feeds_for<'c>(
        &'c self,
        files: &[PathBuf],
        name: Option<&str>,
    ) -> Result<Vec<&'c FeedConfig>, ConfigError> {
        files.iter().map(|f| self.feed_for(f, name)).collect()
    }

    /// The feed a file belongs to: the one named, else the only one, else the one whose inbox
    /// holds the file.
    pub fn feed_for(&self, file: &Path, name: Option<&str>) -> Result<&FeedConfig, ConfigError> {
        let names = || {
            self.feeds
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if let Some(name) = name {
            return self.feeds.iter().find(|f| f.name == name).ok_or_else(|| {
                ConfigError::Feed(format!("no feed named {name:?} (feeds: {})", names()))
            });
        }
        match self.feeds.as_slice() {
            [] => Err(ConfigError::Feed(
                "the config has no [[feed]]; add one (see config/lotsync.example.toml)".into(),
            )),
            [only] => Ok(only),
            _ => {
                let dir = file.parent().and_then(|d| d.canonicalize().ok());
                self.feeds
                    .iter()
                    .find(|f| dir.is_some() && f.inbox.canonicalize().ok() == dir)
                    .ok_or_else(|| {
                        ConfigError::Feed(format!(
                            "{}: which feed? it is in no feed's inbox; pick one with --feed ({})",
                            file.display(),
                            names()
                        ))
                    })
            }
        }
    }
}

/// Every key the config knows, by section (`feed` is each `[[feed]]`). `lotsync validate`
/// names all unknown keys at once from this; a test keeps it in step with the types.
const KNOWN_KEYS: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "api",
            "state",
            "profiles_dir",
            "feed",
            "notifications",
            "daemon",
        ],
    ),
    (
        "api",
        &[
            "base_url",
            "version",
            "organization_id",
            "token_file",
            "token_env",
            "max_requests_per_second",
            "burst",
            "max_in_flight",
            "max_attempts",
            "give_up_after_secs",
            "timeout_secs",
            "max_answer_kib",
            "max_list_page_kib",
        ],
    ),
    ("state", &["dir", "cache_mib"]),
    (
        "feed",
        &[
            "name",
            "inbox",
            "location_id",
            "profile",
            "mode",
            "max_sold_fraction",
            "sold_after_absent",
            "watch",
            "poll_interval_secs",
        ],
    ),
    ("notifications", &["application_slug"]),
    (
        "daemon",
        &[
            "socket",
            "settle_secs",
            "incomplete_wait_secs",
            "archive_days",
            "reconcile_retry_secs",
            "log_level",
            "log_format",
            "metrics",
        ],
    ),
];

/// Writes a token file as lotsync requires one: readable by its owner only (0600), also when
/// it was there before with another mode (the demo, the benchmarks and tests write theirs so).
pub fn write_token_file(path: &Path, token: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(token.as_bytes())
}

/// Every problem of a config file, at once: syntax, unknown keys, values, and what it points
/// to on this machine (inboxes, profiles, the token, folders). Empty: the config is usable.
/// The messages never hold the token.
pub fn validate(path: &Path) -> Vec<String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => return vec![format!("cannot read {}: {e}", path.display())],
    };
    // A line TOML cannot read is named and left out, so that the rest is checked too.
    let Readable {
        mut table,
        mut problems,
        left_out,
    } = match readable(&text) {
        Ok(readable) => readable,
        Err(problems) => return problems,
    };
    // Unknown keys are named, then set aside so that everything else is checked too; so is
    // a value of the wrong type, named with its line.
    problems.extend(unknown_keys(&mut table));
    let mut set_aside: Vec<SetAside> = Vec::new();
    let mut config: Config = loop {
        let e = match toml::Value::Table(table.clone()).try_into() {
            Ok(config) => break config,
            Err(e) => e,
        };
        let said = e.to_string().trim().replace('\n', " ");
        // A required key that is not set is named, and a placeholder stands in; nothing is
        // said of one missing because its line was left out (that line is named).
        if let Some(aside) = fill_missing(&said, &mut table) {
            if !left_out.iter().any(|l| l.hides(&aside)) {
                problems.push(format!("{}: required, not set", aside.shown()));
            }
            set_aside.push(aside);
            if set_aside.len() > 50 {
                return problems;
            }
            continue;
        }
        if left_out.iter().any(|l| matches!(l, LeftOut::Header))
            && said.starts_with("missing field")
        {
            // Missing because a section's header was left out: what the lines left out
            // hid is not checked.
            problems.push(format!(
                "the rest is not checked until the line{} TOML cannot read {} fixed",
                if left_out.len() == 1 { "" } else { "s" },
                if left_out.len() == 1 { "is" } else { "are" }
            ));
            return problems;
        }
        let Some(at) = key_path(&said) else {
            problems.push(said);
            return problems;
        };
        let what = said
            .rsplit_once(" in `")
            .map_or(said.as_str(), |(what, _)| what);
        let Some((line, where_)) = set_aside_value(&mut table, &text, &at, placeholder(what))
        else {
            problems.push(said);
            return problems;
        };
        problems.push(format!("line {line}: {}: {what}", where_.shown()));
        set_aside.push(where_);
        if set_aside.len() > 50 {
            return problems;
        }
    };
    config.resolve_paths(&config_dir(path));
    // What is said of a placeholder put for a value of the wrong type is not the user's.
    let own = |p: &String| !set_aside.iter().any(|at| at.said_in(p));
    problems.extend(config.problems().into_iter().filter(own));
    problems.extend(config.machine_problems().into_iter().filter(own));
    problems
}

/// The part of a config TOML can read: each line it cannot is named with TOML's reason and
/// left out (a section header with its whole section), up to 20 of them.
struct Readable {
    table: toml::Table,
    problems: Vec<String>,
    left_out: Vec<LeftOut>,
}

/// A line TOML could not read, left out of the checks.
enum LeftOut {
    /// A section's header, left out with its whole section.
    Header,
    /// A `key = value` line: where the key would have been.
    Key(SetAside),
    /// Anything else (a stray word, an array's item).
    Other,
}

impl LeftOut {
    /// What `line` (the `at`-th of `lines`) sets, as [`SetAside`] names places.
    fn key_line(lines: &[&str], at: usize) -> LeftOut {
        let Some(key) = lines[at]
            .split_once('=')
            .map(|(k, _)| k.trim().trim_matches('"'))
            .filter(|k| !k.is_empty() && !k.contains(char::is_whitespace))
        else {
            return LeftOut::Other;
        };
        let mut section = String::new();
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for line in &lines[..at] {
            let line = line.trim();
            if let Some((name, _)) = line.strip_prefix("[[").and_then(|r| r.split_once("]]")) {
                let n = seen.entry(name.trim()).or_default();
                section = format!("{}[{n}]", name.trim());
                *n += 1;
            } else if let Some((name, _)) = line.strip_prefix('[').and_then(|r| r.split_once(']')) {
                section = format!("{}.", name.trim());
            }
        }
        // A dotted key at the top (`api.base_url = …`) is its section's.
        let (section, key) = match key.rsplit_once('.') {
            Some((s, k)) if section.is_empty() => (format!("{s}."), k),
            _ => (section, key),
        };
        LeftOut::Key(SetAside {
            section,
            key: key.to_owned(),
        })
    }

    /// Whether it is where `aside` (a key found missing) would have been.
    fn hides(&self, aside: &SetAside) -> bool {
        matches!(self, LeftOut::Key(at) if at.section == aside.section && at.key == aside.key)
    }
}

/// When `said` (a deserialization error) is about a missing key: puts a placeholder of a type
/// the key takes in its place, and says where it went (what is then said of the placeholder's
/// value is filtered out by [`SetAside::said_in`]). None for a key no plain value fits (a
/// whole section).
fn fill_missing(said: &str, table: &mut toml::Table) -> Option<SetAside> {
    let (key, rest) = said.strip_prefix("missing field `")?.split_once('`')?;
    // "missing field `base_url` in `api`"; at the top without " in".
    let section = rest
        .split_once(" in `")
        .and_then(|(_, s)| s.strip_suffix('`'))
        .unwrap_or("")
        .to_owned();
    let wrong_type = if section.is_empty() {
        format!(" in `{key}`")
    } else {
        format!(" in `{section}.{key}`")
    };
    let placeholders = [
        toml::Value::String(String::new()),
        toml::Value::Integer(1),
        toml::Value::Boolean(false),
        toml::Value::Float(1.0),
    ];
    // In `[[feed]]`, the first feed without the key.
    let index = match table.get(&section) {
        Some(toml::Value::Array(items)) => Some(
            items
                .iter()
                .position(|item| item.as_table().is_some_and(|t| !t.contains_key(key)))?,
        ),
        _ => None,
    };
    for placeholder in placeholders {
        slot(table, &section, index)?.insert(key.to_owned(), placeholder);
        let taken = match toml::Value::Table(table.clone()).try_into::<Config>() {
            Ok(_) => true,
            Err(e) => !e.to_string().replace('\n', " ").contains(&wrong_type),
        };
        if taken {
            return Some(SetAside {
                section: match (section.as_str(), index) {
                    ("", _) => String::new(),
                    (s, Some(i)) => format!("{s}[{i}]"),
                    (s, None) => format!("{s}."),
                },
                key: key.to_owned(),
            });
        }
        slot(table, &section, index)?.remove(key);
    }
    None
}

/// The top table, `[section]`, or the `index`-th `[[section]]`.
fn slot<'t>(
    table: &'t mut toml::Table,
    section: &str,
    index: Option<usize>,
) -> Option<&'t mut toml::Table> {
    if section.is_empty() {
        return Some(table);
    }
    let value = table.get_mut(section)?;
    match index {
        Some(i) => value.as_array_mut()?.get_mut(i)?.as_table_mut(),
        None => value.as_table_mut(),
    }
}

/// Parses `text`, leaving out each line TOML cannot read (see [`Readable`]). Err: the problems
/// found when the rest cannot be told apart: a value left open (a string, an array) runs on
/// into the lines after it, which are then no problems of their own.
fn readable(text: &str) -> Result<Readable, Vec<String>> {
    let mut lines: Vec<&str> = text.lines().collect();
    let mut problems = Vec::new();
    let mut left_out = Vec::new();
    // The last line left out for its own sake (not with a header's section).
    let mut last: Option<usize> = None;
    loop {
        let joined = lines.join("\n");
        let e = match toml::from_str::<toml::Table>(&joined) {
            Ok(table) => {
                return Ok(Readable {
                    table,
                    problems,
                    left_out,
                })
            }
            Err(e) => e,
        };
        let reason = e.message().trim().replace('\n', " ");
        let at = e
            .span()
            .map(|span| joined[..span.start.min(joined.len())].matches('\n').count());
        let Some(at) = at else {
            problems.push(format!("not valid TOML: {reason}"));
            return Err(problems);
        };
        // Right after the line left out, before it, or on a line already left out: what that
        // line opened is still open, and nothing after it can be told apart.
        let runs_on = last.is_some_and(|last| at <= last + 1)
            || lines.get(at).is_none_or(|l| l.trim().is_empty());
        if let (true, Some(last)) = (runs_on, last) {
            problems.push(format!(
                "the rest is not checked: line {} seems to leave a value open (a string, an \
                 array) that runs on below it",
                last + 1
            ));
            return Err(problems);
        }
        if reason.contains("multi-line") {
            // Said where the file ends; the string was opened on the last line with quotes
            // of its kind.
            let opened = (0..=at.min(lines.len().saturating_sub(1)))
                .rev()
                .find(|&n| lines[n].contains("\"\"\"") || lines[n].contains("'''"))
                .unwrap_or(at);
            problems.push(format!(
                "line {}: not valid TOML: a multi-line string opened here is not closed \
                 ({reason}); the rest is not checked",
                opened + 1
            ));
            return Err(problems);
        }
        problems.push(format!("line {}: not valid TOML: {reason}", at + 1));
        if runs_on || problems.len() >= 20 {
            return Err(problems);
        }
        if lines[at].trim_start().starts_with('[') {
            // A header that does not read: its keys would land in the section before it.
            let end = (at + 1..lines.len())
                .find(|&n| lines[n].trim_start().starts_with('['))
                .unwrap_or(lines.len());
            lines[at..end].fill("");
            left_out.push(LeftOut::Header);
            last = None;
        } else {
            left_out.push(LeftOut::key_line(&lines, at));
            lines[at] = "";
            last = Some(at);
        }
    }
}

/// A value of the type a deserialization error expected, put in place of a wrong one so that
/// the rest of the config is read and checked; None when the type is not a plain one.
fn placeholder(what: &str) -> Option<toml::Value> {
    let (_, expected) = what.rsplit_once("expected ")?;
    let expected = expected.trim();
    if expected.starts_with('u') || expected.starts_with('i') || expected.contains("integer") {
        Some(toml::Value::Integer(1))
    } else if expected.starts_with('f') || expected.contains("float") {
        Some(toml::Value::Float(1.0))
    } else if expected.contains("string") || expected.contains("str") {
        Some(toml::Value::String(String::new()))
    } else if expected.contains("bool") {
        Some(toml::Value::Boolean(false))
    } else {
        None
    }
}

/// The key a deserialization error names: `api.organization_id` in "invalid type: string
/// \"abc\", expected u64 in `api.organization_id`".
fn key_path(said: &str) -> Option<String> {
    let (_, rest) = said.rsplit_once(" in `")?;
    Some(rest.strip_suffix('`')?.to_owned())
}

/// A value of the wrong type, set aside: where it was.
struct SetAside {
    /// `api.`, `feed[1]`, or empty at the top.
    section: String,
    key: String,
}

impl SetAside {
    /// `api.timeout_secs`, `feed[1].location_id`.
    fn shown(&self) -> String {
        match self.section.as_str() {
            "" => self.key.clone(),
            s if s.ends_with('.') => format!("{s}{}", self.key),
            s => format!("{s}.{}", self.key),
        }
    }

    /// Whether a problem is about this value (then about its placeholder).
    fn said_in(&self, problem: &str) -> bool {
        problem.contains(&self.section) && problem.contains(&self.key)
    }
}

/// Sets aside the value at `at` (`api.timeout_secs`, or `feed.location_id` in whichever feed
/// holds a wrong one): replaced by `instead`, or removed; says the line it was written on.
fn set_aside_value(
    table: &mut toml::Table,
    text: &str,
    at: &str,
    instead: Option<toml::Value>,
) -> Option<(usize, SetAside)> {
    let put = |t: &mut toml::Table, key: &str| {
        let old = t.remove(key);
        if let (Some(_), Some(value)) = (&old, instead.clone()) {
            t.insert(key.to_owned(), value);
        }
        old
    };
    let (section, key) = match at.split_once('.') {
        Some((section, key)) => (Some(section), key),
        None => (None, at),
    };
    match section {
        None => {
            put(table, key)?;
            let aside = SetAside {
                section: String::new(),
                key: key.to_owned(),
            };
            Some((line_of(text, None, key)?, aside))
        }
        Some(section) => match table.get_mut(section)? {
            toml::Value::Table(t) => {
                put(t, key)?;
                let aside = SetAside {
                    section: format!("{section}."),
                    key: key.to_owned(),
                };
                Some((line_of(text, Some((section, None)), key)?, aside))
            }
            toml::Value::Array(items) => {
                // The feed whose value does not read: each is tried alone.
                let index = items.iter().position(|item| {
                    item.get(key).is_some()
                        && toml::Value::try_into::<FeedConfig>(item.clone())
                            .is_err_and(|e| e.to_string().contains(&format!("`{key}`")))
                })?;
                if let Some(toml::Value::Table(t)) = items.get_mut(index) {
                    put(t, key);
                }
                let aside = SetAside {
                    section: format!("{section}[{index}]"),
                    key: key.to_owned(),
                };
                Some((line_of(text, Some((section, Some(index))), key)?, aside))
            }
            _ => None,
        },
    }
}

/// The line (from 1) where `key` is set: at the top, under `[section]`, or under the
/// `index`-th `[[section]]`.
fn line_of(text: &str, section: Option<(&str, Option<usize>)>, key: &str) -> Option<usize> {
    let mut current: Option<String> = None;
    let mut arrays_seen = 0usize;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix("[[").and_then(|r| r.split_once("]]")) {
            current = Some(name.0.trim().to_owned());
            if section.is_some_and(|(s, i)| s == name.0.trim() && i.is_some()) {
                arrays_seen += 1;
            }
            continue;
        }
        if let Some(name) = trimmed.strip_prefix('[').and_then(|r| r.split_once(']')) {
            current = Some(name.0.trim().to_owned());
            continue;
        }
        let here = match section {
            None => current.is_none(),
            Some((s, None)) => current.as_deref() == Some(s),
            Some((s, Some(i))) => current.as_deref() == Some(s) && arrays_seen == i + 1,
        };
        let named = trimmed
            .split_once('=')
            .is_some_and(|(k, _)| k.trim().trim_matches('"') == key);
        if here && named {
            return Some(n + 1);
        }
    }
    None
}

/// The folder relative paths in a config are taken from: the config file's, absolute.
fn config_dir(path: &Path) -> PathBuf {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned())
}

/// Names the unknown keys and removes them.
fn unknown_keys(table: &mut toml::Table) -> Vec<String> {
    let known = |section: &str| {
        KNOWN_KEYS
            .iter()
            .find(|(s, _)| *s == section)
            .map_or(&[][..], |(_, keys)| *keys)
    };
    let mut problems = Vec::new();
    let mut check = |section: &str, at: &str, t: &mut toml::Table| {
        t.retain(|key, _| {
            let ok = known(section).contains(&key);
            if !ok {
                problems.push(format!(
                    "{at}{key}: unknown key (known here: {})",
                    known(section).join(", ")
                ));
            }
            ok
        });
    };
    check("", "", table);
    for (section, value) in table.iter_mut() {
        match value {
            toml::Value::Table(t) => check(section, &format!("{section}."), t),
            toml::Value::Array(items) if section == "feed" => {
                for (i, item) in items.iter_mut().enumerate() {
                    if let toml::Value::Table(t) = item {
                        check(section, &format!("feed[{i}]."), t);
                    }
                }
            }
            _ => {}
        }
    }
    problems
}

impl Config {
    /// What the config points to that this machine does not have.
    fn machine_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Err(e) = crate::api::check_base_url(&self.api.base_url, &self.api.version) {
            problems.push(e.to_string());
        }
        if let Err(e) = self.api.load_token() {
            problems.push(crate::text::Chain(&e).to_string());
        }
        let mut locations: std::collections::HashMap<u64, &str> = std::collections::HashMap::new();
        for (i, feed) in self.feeds.iter().enumerate() {
            let at = format!("feed[{i}] ({:?})", feed.name);
            if feed.location_id == 0 {
                problems.push(format!(
                    "{at}.location_id: must be the location's id on the service (not 0)"
                ));
            } else if feed.mode == Mode::Full {
                if let Some(other) = locations.insert(feed.location_id, &feed.name) {
                    problems.push(format!(
                        "{at}.location_id: {} is also the location of full feed {other:?}; \
                         each full export would sell the other's vehicles",
                        feed.location_id
                    ));
                }
            }
            match std::fs::metadata(&feed.inbox) {
                Ok(m) if m.is_dir() => {
                    if m.permissions().readonly() {
                        problems.push(format!(
                            "{at}.inbox {}: read-only; lotsync moves files inside it",
                            feed.inbox.display()
                        ));
                    }
                }
                Ok(_) => {
                    problems.push(format!("{at}.inbox {}: not a folder", feed.inbox.display()))
                }
                Err(e) => problems.push(format!(
                    "{at}.inbox {}: {e} (create it, writable by lotsync's user)",
                    feed.inbox.display()
                )),
            }
            match crate::mapper::Profile::find(&feed.profile, &self.profiles_dir) {
                Ok(profile) => {
                    for (lot, location) in &profile.locations {
                        if *location == 0 {
                            problems.push(format!(
                                "{at}.profile {}: lot {lot:?} maps to location 0",
                                feed.profile
                            ));
                        }
                    }
                }
                Err(e) => problems.push(format!("{at}.profile: {}", e.one_line())),
            }
        }
        for (key, dir) in [
            ("state.dir", self.state.dir.as_path()),
            (
                "daemon.socket",
                self.daemon.socket.parent().unwrap_or(Path::new("/")),
            ),
        ] {
            // The folder itself may be created at start (systemd creates it); its parent
            // must exist.
            let existing = if dir.exists() {
                Some(dir)
            } else {
                dir.parent()
            };
            if let Some(d) = existing {
                if !d.is_dir() {
                    problems.push(format!(
                        "{key}: {} does not exist and cannot be created (its folder {} is missing)",
                        dir.display(),
                        d.display()
                    ));
                }
            }
        }
        problems
    }
}

impl FeedConfig {
    /// The diff's rules for this feed. `lot_locations` are the locations its profile routes
    /// to by lot code (empty: every vehicle is at `location_id`).
    pub fn rules(&self, organization_id: u64, lot_locations: &[u64], force: bool) -> Rules {
        let locations: BTreeSet<u64> = if lot_locations.is_empty() {
            BTreeSet::from([self.location_id])
        } else {
            lot_locations.iter().copied().collect()
        };
        Rules {
            organization_id,
            feed: self.name.clone(),
            mode: self.mode,
            sold_after_absent: self.sold_after_absent,
            max_sold_fraction: self.max_sold_fraction,
            locations,
            force,
        }
    }
}

impl ApiConfig {
    /// Reads the token from `token_file` or `token_env`; the messages never hold the token.
    pub fn load_token(&self) -> Result<ApiToken, ConfigError> {
        let token = match (&self.token_file, &self.token_env) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::Token(
                    "api: set token_file or token_env, not both".into(),
                ))
            }
            (Some(file), None) => read_token_file(file)?,
            (None, Some(var)) => std::env::var(var).map_err(|_| {
                ConfigError::Token(format!(
                    "api.token_env: the environment variable {var} is not set"
                ))
            })?,
            (None, None) => match credential_file() {
                Some(file) => std::fs::read_to_string(&file).map_err(|e| {
                    ConfigError::Token(format!(
                        "systemd credential {}: cannot read the token: {e}",
                        file.display()
                    ))
                })?,
                None => {
                    return Err(ConfigError::Token(format!(
                        "api: no token; set token_file (or token_env), or under systemd \
                         LoadCredential={CREDENTIAL}:/etc/lotsync/{CREDENTIAL}"
                    )))
                }
            },
        };
        let token = token.trim();
        if token.is_empty() {
            return Err(ConfigError::Token("api: the token is empty".into()));
        }
        Ok(ApiToken::new(token))
    }

    /// Client settings with the given token.
    pub fn client_settings(&self, token: ApiToken) -> ClientSettings {
        ClientSettings {
            base_url: self.base_url.clone(),
            version: self.version.clone(),
            organization_id: self.organization_id,
            token,
            timeout: Duration::from_secs(self.timeout_secs),
            max_answer_bytes: self.max_answer_kib as usize * 1024,
            max_list_page_bytes: self.max_list_page_kib as usize * 1024,
        }
    }

    /// The service client this section names, with its token read now: what `run`, `sync`,
    /// `reconcile` and `validate --online` talk to the service with.
    pub fn client(&self) -> Result<crate::api::ApiClient, ConfigError> {
        let token = self.load_token()?;
        crate::api::ApiClient::new(self.client_settings(token))
            .map_err(|e| ConfigError::Client(Box::new(e)))
    }
}

fn default_state_dir() -> PathBuf {
    PathBuf::from("/var/lib/lotsync")
}

fn default_socket() -> PathBuf {
    PathBuf::from("/run/lotsync/lotsync.sock")
}

fn default_settle_secs() -> f64 {
    2.0
}

fn default_incomplete_wait_secs() -> f64 {
    600.0
}

fn default_archive_days() -> u32 {
    90
}

fn default_reconcile_retry_secs() -> u64 {
    300
}

fn default_log_level() -> String {
    "info".into()
}

fn default_poll_interval_secs() -> f64 {
    10.0
}

fn default_profiles_dir() -> PathBuf {
    PathBuf::from("profiles")
}

fn default_profile() -> String {
    "auto".into()
}

fn default_max_sold_fraction() -> f64 {
    0.25
}

fn default_sold_after_absent() -> u32 {
    1
}

fn default_version() -> String {
    "v1".into()
}

fn default_max_requests_per_second() -> f64 {
    10.0
}

fn default_max_in_flight() -> u32 {
    4
}

fn default_burst() -> u32 {
    1
}

fn default_max_attempts() -> u32 {
    8
}

fn default_give_up_after_secs() -> u64 {
    120
}

fn default_timeout_secs() -> u64 {
    30
}

fn default_max_answer_kib() -> u32 {
    crate::api::DEFAULT_MAX_ANSWER_KIB
}

fn default_max_list_page_kib() -> u32 {
    crate::api::DEFAULT_MAX_LIST_PAGE_KIB
}

/// Below these, ordinary answers would be refused: a vehicle with every field is a few KiB, a
/// page of 100 of them a few hundred.
const MIN_ANSWER_KIB: u32 = 16;
const MIN_LIST_PAGE_KIB: u32 = 256;
/// 1 GiB: more is no limit at all.
const MAX_ANSWER_LIMIT_KIB: u32 = 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    /// The name a log field shows is the config's spelling.
    #[test]
    fn watch_mode_names_are_the_config_spelling() {
        for mode in [WatchMode::Notify, WatchMode::Poll] {
            let read: WatchMode =
                serde_json::from_value(serde_json::Value::from(mode.name())).unwrap();
            assert_eq!(read, mode);
        }
    }

    /// lotsync.toml(5) is written by hand: every key lotsync knows has its entry there (`.B
    /// key` under the section's heading), and it names none that lotsync does not know.
    #[test]
    fn the_config_pages_keys_are_the_known_keys() {
        let page = include_str!("../packaging/man/lotsync.toml.5");
        let mut documented: Vec<(String, String)> = Vec::new();
        let mut section = None;
        let mut lines = page.lines();
        while let Some(line) = lines.next() {
            if let Some(heading) = line.strip_prefix(".SH ") {
                section = match heading.trim_matches('"') {
                    "TOP-LEVEL KEYS" => Some(""),
                    "[api]" => Some("api"),
                    "[state]" => Some("state"),
                    "[daemon]" => Some("daemon"),
                    "[[feed]]" => Some("feed"),
                    "[notifications]" => Some("notifications"),
                    _ => None,
                };
            } else if let (Some(section), ".TP") = (section, line) {
                let term = lines.next().unwrap_or_default();
                let key = term.strip_prefix(".B ").unwrap_or(term);
                documented.push((section.to_owned(), key.to_owned()));
            }
        }
        let mut known: Vec<(String, String)> = KNOWN_KEYS
            .iter()
            .flat_map(|(section, keys)| keys.iter().map(|k| (section.to_string(), k.to_string())))
            // The sections themselves have headings, not entries.
            .filter(|(section, key)| {
                !(section.is_empty() && KNOWN_KEYS.iter().any(|(s, _)| s == key))
            })
            .collect();
        known.sort();
        documented.sort();
        assert_eq!(documented, known, "lotsync.toml(5) against KNOWN_KEYS");
    }

    /// The example the .deb installs as /etc/lotsync/lotsync.toml uses only keys lotsync
    /// knows: an unknown one fails `lotsync validate`, which the units run before every start
    /// (`daemon.reconcile_retry_secs` did, issue 26).
    #[test]
    fn the_packaged_example_has_no_unknown_key() {
        let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/lotsync.example.toml");
        let unknown: Vec<String> = validate(Path::new(example))
            .into_iter()
            .filter(|p| p.contains("unknown key"))
            .collect();
        assert_eq!(unknown, Vec::<String>::new());
    }

    #[test]
    fn known_keys_are_the_types_keys() {
        let minimal = "[api]\nbase_url = \"https://x\"\norganization_id = 1\n";
        for (section, keys) in KNOWN_KEYS {
            for key in *keys {
                // A value of no key's type: the error must be about the value, not the key.
                let text = match *section {
                    "" => format!("{key} = [[]]\n{minimal}"),
                    "api" => format!("{minimal}{key} = [[]]\n"),
                    "feed" => format!("{minimal}[[feed]]\n{key} = [[]]\n"),
                    s => format!("{minimal}[{s}]\n{key} = [[]]\n"),
                };
                let err = toml::from_str::<Config>(&text).map(drop).unwrap_err();
                assert!(
                    !err.to_string().contains("unknown field"),
                    "{section}.{key}: {err}"
                );
            }
        }
    }

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

    #[test]
    fn validate_names_a_bad_metrics_value_by_its_key() {
        let tmp = crate::testing::temp_dir("config");
        let dir = tmp.path().to_owned();
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lotsync.toml");
        let config = |metrics: &str| {
            format!(
                "[api]\nbase_url = \"http://127.0.0.1:1\"\norganization_id = 1\n\
                 token_env = \"LOTSYNC_METRICS_TEST_TOKEN\"\n[daemon]\n{metrics}\n"
            )
        };
        std::fs::write(&path, config("metrics = \"0.0.0.0:9187\"")).unwrap();
        let problems = validate(&path);
        let bad: Vec<_> = problems
            .iter()
            .filter(|p| p.starts_with("daemon.metrics: "))
            .collect();
        assert_eq!(bad.len(), 1, "{problems:?}");
        assert!(
            bad[0].contains("\"0.0.0.0:9187\" is not a loopback address"),
            "{bad:?}"
        );
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(err.contains("daemon.metrics: "), "{err}");
        std::fs::write(&path, config("metrics = \"127.0.0.1:9187\"")).unwrap();
        assert!(
            !validate(&path).iter().any(|p| p.contains("metrics")),
            "{:?}",
            validate(&path)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 26: the metrics served on the control socket's own path would take the place of
    /// the socket `lotsync status` talks to (or fail the start as "something answers there").
    #[test]
    fn validate_refuses_metrics_on_the_control_sockets_path() {
        let tmp = crate::testing::temp_dir("config");
        let dir = tmp.path().to_owned();
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lotsync.toml");
        let config = |socket: &str, metrics: &str| {
            format!(
                "[api]\nbase_url = \"http://127.0.0.1:1\"\norganization_id = 1\n\
                 token_env = \"LOTSYNC_METRICS_TEST_TOKEN\"\n[daemon]\nsocket = \"{socket}\"\n\
                 metrics = \"{metrics}\"\n"
            )
        };
        let metrics_problems = |path: &Path| -> Vec<String> {
            validate(path)
                .into_iter()
                .filter(|p| p.starts_with("daemon.metrics: "))
                .collect()
        };
        for (socket, metrics) in [
            ("/run/lotsync/lotsync.sock", "/run/lotsync/lotsync.sock"),
            ("/run/lotsync/lotsync.sock", "/run/lotsync//./lotsync.sock"),
            // A relative socket is taken from the config's folder.
            ("lotsync.sock", &format!("{}/lotsync.sock", dir.display())),
        ] {
            std::fs::write(&path, config(socket, metrics)).unwrap();
            let bad = metrics_problems(&path);
            assert_eq!(bad.len(), 1, "socket {socket}, metrics {metrics}: {bad:?}");
            assert!(bad[0].contains("the control socket"), "{bad:?}");
        }
        std::fs::write(
            &path,
            config("/run/lotsync/lotsync.sock", "/run/lotsync/metrics.sock"),
        )
        .unwrap();
        assert_eq!(metrics_problems(&path), Vec::<String>::new());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_config_names_the_ways_to_give_one_and_a_bare_host_gets_https() {
        let err = Config::load(Path::new("/nonexistent/lotsync.toml")).unwrap_err();
        let said = err.to_string();
        assert!(
            said.contains("--config FILE") && said.contains("LOTSYNC_CONFIG"),
            "{said}"
        );
        assert!(
            !said.contains("os error"),
            "said once, by the message: {said}"
        );
        let bare = crate::api::check_base_url("inventory.example.com", "v1").unwrap_err();
        assert!(
            bare.to_string()
                .contains(r#"did you mean "https://inventory.example.com"?"#),
            "{bare}"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_is_named_with_its_line_and_the_rest_still_checked() {
        let tmp = crate::testing::temp_dir("config");
        let dir = tmp.path().to_owned();
        std::fs::create_dir_all(dir.join("in-b")).unwrap();
        let path = dir.join("lotsync.toml");
        std::fs::write(
            &path,
            "[api]\nbase_url = \"https://x\"\norganization_id = \"abc\"\ntimeout_secs = \"ten\"\n\
             [state]\ndir = \"state\"\n\
             [[feed]]\nname = \"a\"\ninbox = \"in-a\"\nlocation_id = 1\n\
             [[feed]]\nname = \"b\"\ninbox = \"in-b\"\nlocation_id = \"x\"\n",
        )
        .unwrap();
        let problems = validate(&path);
        let all = problems.join("\n");
        for expected in [
            "line 3: api.organization_id: invalid type: string \"abc\", expected u64",
            "line 4: api.timeout_secs: invalid type: string \"ten\"",
            "line 14: feed[1].location_id: invalid type: string \"x\"",
            // Checked after them: feed a's inbox does not exist.
            "in-a",
        ] {
            assert!(all.contains(expected), "{expected:?} not in:\n{all}");
        }
        assert!(!all.contains("missing field"), "{all}");
        assert_eq!(
            all.matches("location_id").count(),
            1,
            "nothing said of the placeholder: {all}"
        );
    }

    /// A config with `lines`; its problems, with every placeholder kept quiet.
    fn problems_of(lines: &str) -> (Vec<String>, String) {
        let dir = crate::testing::temp_dir("config");
        std::fs::create_dir_all(dir.path().join("in-b")).unwrap();
        let path = dir.path().join("lotsync.toml");
        std::fs::write(&path, lines).unwrap();
        let problems = validate(&path);
        let all = problems.join("\n");
        (problems, all)
    }

    #[test]
    fn a_line_toml_cannot_read_is_named_and_the_rest_still_checked() {
        // Line 2 leaves its string open, line 4 repeats a key, line 8 is a wrong type, line
        // 9 an unknown key, and feed "a"'s inbox is missing.
        let (problems, all) = problems_of(
            "[api]\nbase_url = \"https://x\norganization_id = 100\norganization_id = 101\n\
             token_env = \"LOTSYNC_TEST_TOKEN_UNSET_X\"\n\
             [[feed]]\nname = \"a\"\nlocation_id = \"ten\"\ninbx = \"in-a\"\n\
             [[feed]]\nname = \"b\"\ninbox = \"in-b\"\nlocation_id = 11\n",
        );
        for expected in [
            "line 2: not valid TOML:",
            "line 4: not valid TOML: duplicate key",
            "line 8: feed[0].location_id: invalid type: string \"ten\"",
            "feed[0].inbx: unknown key",
            "LOTSYNC_TEST_TOKEN_UNSET_X",
        ] {
            assert!(all.contains(expected), "{expected:?} not in:\n{all}");
        }
        assert!(!all.contains("missing field"), "{all}");
        assert!(
            !all.contains("base_url"),
            "nothing said of the placeholder: {all}"
        );
        // Feed "a" has no inbox (the key is misspelt): said, and its placeholder is quiet.
        assert!(all.contains("feed[0].inbox: required, not set"), "{all}");
        assert_eq!(all.matches("feed[0].inbox").count(), 1, "{all}");
        assert!(problems.iter().all(|p| !p.contains('\n')), "{all}");
    }

    #[test]
    fn a_value_left_open_stops_the_check_at_its_line_and_blames_no_line_after_it() {
        // An array missing a comma (line 8), then valid lines.
        let (problems, all) = problems_of(
            "[api]\nbase_url = \"https://x\"\norganization_id = 100\n\
             [[feed]]\nname = \"a\"\ninbox = \"in-b\"\nextensions = [\"csv\",\n  \"xml\"\n  \"tsv\"]\n\
             location_id = 1\n[[feed]]\nname = \"b\"\ninbox = \"in-b\"\nlocation_id = 2\n",
        );
        assert!(all.contains("line 9: not valid TOML"), "{all}");
        assert!(
            problems
                .last()
                .unwrap()
                .contains("line 9 seems to leave a value open"),
            "{all}"
        );
        for innocent in ["line 10", "line 11", "line 12", "line 8:", "line 7:"] {
            assert!(!all.contains(innocent), "{innocent} blamed: {all}");
        }
        assert_eq!(problems.len(), 2, "{all}");

        // A multi-line string never closed: said once, with nothing after it.
        let (problems, all) = problems_of(
            "[api]\nbase_url = \"https://x\"\norganization_id = 100\n\
             [notifications]\napplication_slug = \"\"\"inventory\n\
             [[feed]]\nname = \"b\"\ninbox = \"in-b\"\nlocation_id = 2\n",
        );
        assert_eq!(problems.len(), 1, "{all}");
        assert!(
            all.starts_with("line 5: not valid TOML: a multi-line string opened here"),
            "{all}"
        );
    }

    #[test]
    fn a_line_left_out_hides_only_its_own_key() {
        // Feed a's name line does not read; feed b has no name at all; a dotted api key does
        // not read.
        let (_, all) = problems_of(
            "api.base_url = \"https://x\napi.organization_id = 100\n\
             [[feed]]\nname = \"a\ninbox = \"in-b\"\nlocation_id = 1\n\
             [[feed]]\ninbox = \"in-b\"\nlocation_id = 2\n",
        );
        assert!(all.contains("line 1: not valid TOML"), "{all}");
        assert!(all.contains("line 4: not valid TOML"), "{all}");
        assert!(all.contains("feed[1].name: required, not set"), "{all}");
        assert!(!all.contains("feed[0].name"), "{all}");
        assert!(!all.contains("base_url: required"), "{all}");

        // A stray word is no header: a missing [api] is still said as such.
        let (_, all) =
            problems_of("@@@\n[[feed]]\nname = \"b\"\ninbox = \"in-b\"\nlocation_id = 2\n");
        assert!(all.contains("line 1: not valid TOML"), "{all}");
        assert!(all.contains("missing field `api`"), "{all}");
    }

    #[test]
    fn a_header_toml_cannot_read_leaves_its_section_out() {
        let (problems, all) = problems_of(
            "[api\nbase_url = \"https://x\"\norganization_id = 100\n\
             [[feed]]\nname = \"b\"\ninbox = \"in-b\"\nlocation_id = 11\ncolour = 1\n",
        );
        assert!(all.contains("line 1: not valid TOML:"), "{all}");
        assert!(all.contains("feed[0].colour: unknown key"), "{all}");
        // Not "base_url: unknown key" at the top, where the header's keys would land.
        assert!(!all.contains("base_url"), "{all}");
        assert!(
            problems.last().unwrap().contains("not checked until"),
            "{all}"
        );
    }

    #[test]
    fn validate_names_every_problem_at_once() {
        let tmp = crate::testing::temp_dir("config");
        let dir = tmp.path().to_owned();
        std::fs::create_dir_all(dir.join("in-a")).unwrap();
        let path = dir.join("lotsync.toml");
        std::fs::write(
            &path,
            r#"
            colour = "red"
            [api]
            base_url = "http://inventory.example.com"
            organization_id = 100
            token_file = "missing-token"
            organisation = 2
            [state]
            dir = "state"
            [[feed]]
            name = "a"
            inbox = "in-a"
            location_id = 10
            [[feed]]
            name = "b"
            inbox = "in-b"
            location_id = 10
            profile = "nope"
            "#,
        )
        .unwrap();
        let problems = validate(&path);
        let all = problems.join("\n");
        for expected in [
            "colour: unknown key",
            "api.organisation: unknown key",
            "plain http to another machine",
            "api.token_file",
            "is also the location of full feed \"a\"",
            "in-b: No such file",
            "feed[1] (\"b\").profile",
        ] {
            assert!(all.contains(expected), "{expected}: {all}");
        }
        assert_eq!(problems.len(), 7, "{all}");
        assert!(
            !problems.iter().any(|p| p.contains("  ")),
            "one line each, no runs of blanks: {all}"
        );
        assert!(!all.contains("feed[0] (\"a\").inbox"), "{all}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reads_the_design_sketch_keys() {
        let config: Config = toml::from_str(
            r#"
            [api]
            base_url = "https://inventory.example.com"
            version = "v1"
            organization_id = 100
            token_env = "LOTSYNC_TEST_TOKEN_UNSET"
            max_requests_per_second = 10
            max_in_flight = 4
            "#,
        )
        .unwrap();
        assert_eq!(config.api.organization_id, 100);
        assert_eq!(config.api.timeout_secs, 30);
        let err = config.api.load_token().unwrap_err().to_string();
        assert!(err.contains("LOTSYNC_TEST_TOKEN_UNSET is not set"), "{err}");
    }

    #[test]
    fn the_shipped_example_is_valid_and_complete() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/lotsync.example.toml");
        let config = Config::load(&path).unwrap();
        assert_eq!(config.feeds.len(), 1);
        assert_eq!(
            config.notifications.map(|n| n.application_slug).as_deref(),
            Some("inventory")
        );
        assert_eq!(config.api.max_attempts, 8);
        assert_eq!(config.api.give_up_after_secs, 120);
        assert_eq!(config.api.max_answer_kib, 256);
        assert_eq!(config.api.max_list_page_kib, 8192);
    }

    #[test]
    fn upload_and_notification_settings_are_checked() {
        let mut config: Config = toml::from_str(
            "[api]\nbase_url = \"https://x\"\norganization_id = 1\nburst = 0\nmax_attempts = 0\n\
             [notifications]\napplication_slug = \"a/b\"\n",
        )
        .unwrap();
        let problems = config.problems().join("\n");
        assert!(problems.contains("api.burst"), "{problems}");
        assert!(problems.contains("api.max_attempts"), "{problems}");
        assert!(
            problems.contains("notifications.application_slug"),
            "{problems}"
        );
        config.notifications = None;
        config.api.burst = 2;
        config.api.max_attempts = 3;
        assert!(config.problems().is_empty());
    }

    #[test]
    fn the_state_cache_is_bounded_and_has_a_small_default() {
        let minimal = "[api]\nbase_url = \"https://x\"\norganization_id = 1\n";
        let mut config: Config = toml::from_str(minimal).unwrap();
        assert_eq!(config.state.cache_mib, crate::state::DEFAULT_CACHE_MIB);
        assert!(config.problems().is_empty());
        config.state.cache_mib = 0;
        let problems = config.problems().join("\n");
        assert!(
            problems.contains("state.cache_mib: 0 is not between"),
            "{problems}"
        );
    }

    #[test]
    fn answer_limits_are_checked_and_reach_the_client() {
        let minimal = "[api]\nbase_url = \"https://x\"\norganization_id = 1\n";
        let config: Config = toml::from_str(minimal).unwrap();
        let settings = config.api.client_settings(ApiToken::new("t"));
        assert_eq!(settings.max_answer_bytes, 256 * 1024);
        assert_eq!(settings.max_list_page_bytes, 8192 * 1024);

        let config: Config = toml::from_str(&format!(
            "{minimal}max_answer_kib = 64\nmax_list_page_kib = 1024\n"
        ))
        .unwrap();
        assert!(config.problems().is_empty(), "{:?}", config.problems());
        let settings = config.api.client_settings(ApiToken::new("t"));
        assert_eq!(settings.max_answer_bytes, 64 * 1024);
        assert_eq!(settings.max_list_page_bytes, 1024 * 1024);

        let config: Config = toml::from_str(&format!(
            "{minimal}max_answer_kib = 8\nmax_list_page_kib = 2000000\n"
        ))
        .unwrap();
        let problems = config.problems().join("\n");
        assert!(
            problems.contains("api.max_answer_kib: 8 is not between 16 and 1048576 KiB"),
            "{problems}"
        );
        assert!(
            problems.contains("api.max_list_page_kib: 2000000 is not between 256 and"),
            "{problems}"
        );
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = toml::from_str::<Config>(
            "[api]\nbase_url = \"https://x\"\norganization_id = 1\norganisation = 2\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("organisation"), "{err}");
    }

    #[test]
    fn feeds_are_checked_and_every_problem_named() {
        let tmp = crate::testing::temp_dir("config");
        let dir = tmp.path().to_owned();
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lotsync.toml");
        std::fs::write(
            &path,
            r#"
            [api]
            base_url = "https://x"
            organization_id = 100
            [state]
            dir = "state"
            [[feed]]
            name = "main"
            inbox = "inbox/main"
            location_id = 10
            max_sold_fraction = 1.5
            [[feed]]
            name = "main"
            inbox = "inbox/other"
            location_id = 11
            sold_after_absent = 0
            "#,
        )
        .unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("max_sold_fraction: 1.5 is not a share"),
            "{err}"
        );
        assert!(err.contains("another feed has the same name"), "{err}");
        assert!(
            err.contains("sold_after_absent: must be at least 1"),
            "{err}"
        );
        std::fs::write(
            &path,
            "[api]\nbase_url = \"https://x\"\norganization_id = 100\n\
             [[feed]]\nname = \"main\"\ninbox = \"in\"\nlocation_id = 10\nmode = \"delta\"\n",
        )
        .unwrap();
        let config = Config::load(&path).unwrap();
        assert_eq!(config.state.dir, PathBuf::from("/var/lib/lotsync"));
        assert_eq!(config.feeds[0].inbox, dir.join("in"));
        assert_eq!(config.feeds[0].mode, Mode::Delta);
        assert_eq!(config.feeds[0].max_sold_fraction, 0.25);
        let feed = config.feed_for(Path::new("/tmp/x.csv"), None).unwrap();
        assert_eq!(feed.name, "main");
        assert!(config
            .feed_for(Path::new("/tmp/x.csv"), Some("nope"))
            .is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn api_with_token_file(file: PathBuf) -> ApiConfig {
        let mut api: Config =
            toml::from_str("[api]\nbase_url = \"https://x\"\norganization_id = 1\n").unwrap();
        api.api.token_file = Some(file);
        api.api
    }

    /// As ssh with its keys: a token file other users may read or change, or its group
    /// change, is refused with the chmod that fixes it; owner-only and group-read are fine.
    #[test]
    fn a_token_file_others_can_read_or_change_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = crate::testing::temp_dir("config");
        let dir = tmp.path().to_owned();
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("api token");
        write_token_file(&file, "s3cret\n").unwrap();
        let api = api_with_token_file(file.clone());
        for mode in [0o644, 0o666, 0o604, 0o620, 0o777, 0o601] {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = api.load_token().unwrap_err().to_string();
            let shown = file.display();
            assert!(
                err.contains(&format!("api.token_file {shown}: mode {mode:04o}")),
                "{err}"
            );
            // Quoted: the name holds a space.
            assert!(err.contains(&format!("chmod 600 '{shown}'")), "{err}");
            assert!(!err.contains("s3cret"), "{err}");
            if mode == 0o601 {
                assert!(err.contains("lets other users execute it,"), "{err}");
            }
        }
        for mode in [0o600, 0o640, 0o400, 0o440] {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(
                api.load_token().unwrap(),
                ApiToken::new("s3cret"),
                "{mode:o}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn advice_quotes_what_the_shell_would_split() {
        assert_eq!(
            shell_quoted("/etc/lotsync/api-token"),
            "/etc/lotsync/api-token"
        );
        // What the shell reads back is the path, one word.
        for path in [
            "/srv/api token",
            "/srv/dealer's token",
            "$HOME/t",
            "",
            "a\"b`c`",
        ] {
            let quoted = shell_quoted(path);
            assert_ne!(quoted, path, "{path}");
            assert_eq!(
                shlex::split(&quoted),
                Some(vec![path.to_owned()]),
                "{quoted}"
            );
        }
    }

    #[test]
    fn token_file_is_trimmed_and_never_echoed() {
        let tmp = crate::testing::temp_dir("config");
        let dir = tmp.path().to_owned();
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        write_token_file(&file, "s3cret\n").unwrap();
        let api = ApiConfig {
            base_url: "https://x".into(),
            version: default_version(),
            organization_id: 1,
            token_file: Some(file),
            token_env: None,
            max_requests_per_second: 1.0,
            burst: 1,
            max_in_flight: 1,
            max_attempts: 1,
            give_up_after_secs: 1,
            timeout_secs: 1,
            max_answer_kib: default_max_answer_kib(),
            max_list_page_kib: default_max_list_page_kib(),
        };
        assert_eq!(api.load_token().unwrap(), ApiToken::new("s3cret"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
