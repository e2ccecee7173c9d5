//! The config's sections as serde types, with their defaults as small named functions.
//!
//! Unknown keys are refused (`deny_unknown_fields`: serde then names the keys known in the
//! section, which `lotsync validate` shows). A value with a range is read through its check
//! in [`super::checks`], so a config that was read holds no value out of range and nothing
//! clamps it again. What types cannot say (feed names unique, the machine's folders) is
//! checked by [`super::checks`] after reading.

use super::checks;
use crate::api::{ApiToken, ClientSettings};
use crate::daemon::metrics::MetricsListen;
use crate::diff::{Mode, Rules};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

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
    /// The file it was loaded from, for the commands lotsync prints as advice
    /// ([`Config::command`]); None for a config built in memory.
    #[serde(skip)]
    pub path: Option<PathBuf>,
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
    /// file seen being written once its writer closed it. 0 to 3600.
    #[serde(
        default = "default_settle_secs",
        deserialize_with = "checks::settle_secs"
    )]
    pub settle_secs: f64,
    /// A CSV whose last record is cut (no line break after it, a quote left open), or an
    /// empty file, is being written still: the daemon waits for it to change, and once it has
    /// not changed for this long it goes to `held/` with the reason. A file seen being
    /// written waits this long for its writer to close it, then the settle time decides.
    /// 0 to 86400.
    #[serde(
        default = "default_incomplete_wait_secs",
        deserialize_with = "checks::incomplete_wait_secs"
    )]
    pub incomplete_wait_secs: f64,
    /// Archived exports and their reports older than this many days are deleted (0: kept).
    #[serde(default = "default_archive_days")]
    pub archive_days: u32,
    /// A reconciliation asked of the daemon (the nightly timer's) that fails is tried again
    /// after this long, the wait doubling, four more times (by default 5, 10, 20 and 40
    /// minutes later: the same night). 1 to 86400.
    #[serde(
        default = "default_reconcile_retry_secs",
        deserialize_with = "checks::reconcile_retry_secs"
    )]
    pub reconcile_retry_secs: u64,
    /// Log level (`error`, `warn`, `info`, `debug`, or a tracing filter); `RUST_LOG` wins.
    #[serde(default = "default_log_level", deserialize_with = "checks::log_level")]
    pub log_level: String,
    /// How log lines are written; `LOTSYNC_LOG_FORMAT` wins.
    #[serde(default)]
    pub log_format: LogFormat,
    /// Where `lotsync run` serves its Prometheus metrics and health: `127.0.0.1:9187` (a
    /// loopback address and port) or an absolute Unix socket path, read with
    /// [`MetricsListen::parse`]. Absent: no metrics.
    #[serde(default, deserialize_with = "checks::metrics")]
    pub metrics: Option<MetricsListen>,
    /// Whether the config has a `[daemon]` table: then a daemon is meant to serve its state,
    /// and `lotsync status` finding none while work waits is CRITICAL.
    #[serde(skip_deserializing, default = "written")]
    pub configured: bool,
}

/// A field that is true when its table was written in the config.
fn written() -> bool {
    true
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
    /// How long a file must stay unchanged before it is taken.
    pub fn settle(&self) -> Duration {
        checks::duration(self.settle_secs)
    }

    /// How long an incomplete file may stay unchanged before it is held.
    pub fn incomplete_wait(&self) -> Duration {
        checks::duration(self.incomplete_wait_secs)
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
    #[serde(deserialize_with = "checks::application_slug")]
    pub application_slug: String,
}

/// `[state]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// The state's database (`state.db`) and its lock live here (systemd's StateDirectory).
    #[serde(default = "default_state_dir")]
    pub dir: PathBuf,
    /// SQLite's page cache, in MiB (1 to 4096), shared by the daemon's connections: the
    /// most the state's pages take of its memory, however large the state grows.
    #[serde(default = "default_cache_mib", deserialize_with = "checks::cache_mib")]
    pub cache_mib: u64,
    /// A sold vehicle with nothing queued is forgotten this many days after its record last
    /// changed (1 to 36500); one that comes back later is created again.
    #[serde(default = "default_keep_days", deserialize_with = "checks::keep_days")]
    pub keep_sold_days: u32,
    /// `lotsync why`'s history, the records of planned files and sent notifications are kept
    /// this many days (1 to 36500).
    #[serde(default = "default_keep_days", deserialize_with = "checks::keep_days")]
    pub keep_history_days: u32,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            dir: default_state_dir(),
            cache_mib: default_cache_mib(),
            keep_sold_days: default_keep_days(),
            keep_history_days: default_keep_days(),
        }
    }
}

/// `[[feed]]`: one DMS export.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedConfig {
    #[serde(deserialize_with = "checks::feed_name")]
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
    #[serde(
        default = "default_max_sold_fraction",
        deserialize_with = "checks::share"
    )]
    pub max_sold_fraction: f64,
    /// Sold only after this many consecutive full snapshots without the vehicle.
    #[serde(
        default = "default_sold_after_absent",
        deserialize_with = "checks::at_least_one"
    )]
    pub sold_after_absent: u32,
    /// `notify` (default) or `poll` for network shares.
    #[serde(default)]
    pub watch: WatchMode,
    /// With `watch = "poll"`: seconds between looks (0.1 to 3600).
    #[serde(
        default = "default_poll_interval_secs",
        deserialize_with = "checks::poll_interval_secs"
    )]
    pub poll_interval_secs: f64,
}

impl FeedConfig {
    /// The locations a full snapshot of this feed speaks for: `lot_locations`, the ones its
    /// profile routes to by lot code, or else its `location_id`.
    pub fn locations(&self, lot_locations: &[u64]) -> BTreeSet<u64> {
        if lot_locations.is_empty() {
            BTreeSet::from([self.location_id])
        } else {
            lot_locations.iter().copied().collect()
        }
    }

    /// The diff's rules for this feed, with no sibling feeds (see
    /// [`crate::daemon::lifecycle::profile_and_rules`]).
    pub fn rules(&self, organization_id: u64, lot_locations: &[u64], force: bool) -> Rules {
        Rules {
            organization_id,
            feed: self.name.clone(),
            mode: self.mode,
            sold_after_absent: self.sold_after_absent,
            max_sold_fraction: self.max_sold_fraction,
            locations: self.locations(lot_locations),
            sibling_feeds: BTreeSet::new(),
            force,
        }
    }
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
    #[serde(deserialize_with = "checks::organization_id")]
    pub organization_id: u64,
    /// A file holding the token. With neither this nor `token_env`, the systemd credential
    /// `api-token` is read (`$CREDENTIALS_DIRECTORY/api-token`).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Or the name of an environment variable holding it.
    #[serde(default)]
    pub token_env: Option<String>,
    /// Ceiling of the request rate; the uploader adapts below it.
    #[serde(
        default = "default_max_requests_per_second",
        deserialize_with = "checks::requests_per_second"
    )]
    pub max_requests_per_second: f64,
    /// Requests let through at once after a quiet spell (1: evenly spaced).
    #[serde(default = "default_burst", deserialize_with = "checks::at_least_one")]
    pub burst: u32,
    #[serde(
        default = "default_max_in_flight",
        deserialize_with = "checks::at_least_one"
    )]
    pub max_in_flight: u32,
    /// Attempts of one call (with backoff between them) before its operation goes back to
    /// the queue.
    #[serde(
        default = "default_max_attempts",
        deserialize_with = "checks::at_least_one"
    )]
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
    #[serde(
        default = "default_max_answer_kib",
        deserialize_with = "checks::answer_kib"
    )]
    pub max_answer_kib: u32,
    /// The most KiB read of one page of the service's list.
    #[serde(
        default = "default_max_list_page_kib",
        deserialize_with = "checks::list_page_kib"
    )]
    pub max_list_page_kib: u32,
}

impl ApiConfig {
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
    pub fn client(&self) -> Result<crate::api::ApiClient, super::ConfigError> {
        let token = self.load_token()?;
        crate::api::ApiClient::new(self.client_settings(token))
            .map_err(|e| super::ConfigError::Client(Box::new(e)))
    }
}

fn default_state_dir() -> PathBuf {
    PathBuf::from("/var/lib/lotsync")
}

fn default_cache_mib() -> u64 {
    crate::state::DEFAULT_CACHE_MIB
}

fn default_keep_days() -> u32 {
    crate::state::retention::DEFAULT_KEEP_DAYS
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

pub(super) fn default_version() -> String {
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

pub(super) fn default_max_answer_kib() -> u32 {
    crate::api::DEFAULT_MAX_ANSWER_KIB
}

pub(super) fn default_max_list_page_kib() -> u32 {
    crate::api::DEFAULT_MAX_LIST_PAGE_KIB
}

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
        assert_eq!(config.daemon.settle(), Duration::from_secs(2));
        assert_eq!(config.daemon.incomplete_wait(), Duration::from_secs(600));
    }

    /// The types refuse an unknown key themselves, whoever reads them (toml's own reader
    /// here, not only `lotsync validate`'s).
    #[test]
    fn unknown_keys_are_refused_by_the_types() {
        let err = toml::from_str::<Config>(
            "[api]\nbase_url = \"https://x\"\norganization_id = 1\norganisation = 2\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("organisation"), "{err}");
    }

    #[test]
    fn answer_limits_reach_the_client() {
        let minimal = "[api]\nbase_url = \"https://x\"\norganization_id = 1\n";
        let config: Config = toml::from_str(minimal).unwrap();
        let settings = config.api.client_settings(ApiToken::new("t"));
        assert_eq!(settings.max_answer_bytes, 256 * 1024);
        assert_eq!(settings.max_list_page_bytes, 8192 * 1024);

        let config: Config = toml::from_str(&format!(
            "{minimal}max_answer_kib = 64\nmax_list_page_kib = 1024\n"
        ))
        .unwrap();
        let settings = config.api.client_settings(ApiToken::new("t"));
        assert_eq!(settings.max_answer_bytes, 64 * 1024);
        assert_eq!(settings.max_list_page_bytes, 1024 * 1024);
    }
}
