//! lotsync's own config file (TOML): where the service is, as whom lotsync calls it, its
//! feeds, state and daemon.
//!
//! Typed and checked where it is declared, by job:
//! - [`types`]: the sections as serde types, unknown keys refused, defaults as small named
//!   functions;
//! - [`checks`]: each value's range, checked once where it is read, and what holds between
//!   values or against this machine, checked after;
//! - [`token`]: the API token's sources and their permissions;
//! - [`read`] and [`validate`]: reading that names every problem at once, each with its line
//!   and key path (`lotsync validate`, and [`Config::load`] but for the machine).
//!
//! This module loads a config (relative paths taken from its folder) and finds a file's feed.
//! It does not own what the values mean to the stages that use them, nor the metrics
//! endpoint's address ([`crate::daemon::metrics::MetricsListen`], which it reads).

mod checks;
mod coherence;
mod read;
mod token;
mod types;
mod validate;

pub use token::{write_token_file, CREDENTIAL};
pub use types::{
    ApiConfig, Config, DaemonConfig, FeedConfig, LogFormat, NotificationsConfig, StateConfig,
    WatchMode,
};
pub use validate::validate;

use std::path::{Path, PathBuf};

/// Where the config is read from when no `--config` is given.
pub const DEFAULT_PATH: &str = "/etc/lotsync/lotsync.toml";

/// The config file this process runs with, for the commands it prints as advice where no
/// [`Config`] is at hand (an error of the state, a rejection's fix): set once by the command
/// line, before anything is printed ([`runs_with`]). Unset (a library test), commands name
/// no config.
static RUNS_WITH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Sets the config this process runs with ([`advice`]); the first call wins.
pub fn runs_with(path: &Path) {
    let _ = RUNS_WITH.set(path.to_owned());
}

/// A lotsync command as advice, for the config this process runs with: [`command`].
pub fn advice(words: &[&str]) -> String {
    command(RUNS_WITH.get().map(PathBuf::as_path), words)
}

/// [`Config::command`] for the config at `path` (None: the default).
pub fn command(path: Option<&Path>, words: &[&str]) -> String {
    let mut line = String::from("lotsync");
    let mut words = words.iter();
    if let Some(sub) = words.next() {
        line.push(' ');
        line.push_str(sub);
    }
    if let Some(path) = path.filter(|p| *p != Path::new(DEFAULT_PATH)) {
        line.push_str(" --config ");
        line.push_str(&crate::text::shell_quoted(&crate::text::shown_path(path)));
    }
    for word in words {
        line.push(' ');
        line.push_str(&crate::text::shell_quoted(word));
    }
    line
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
    /// Not TOML: toml's message, which quotes the line.
    #[error("config {}", crate::text::shown_path(.path))]
    Parse {
        path: PathBuf,
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error("{0}")]
    Token(String),
    /// Not lotsync's config: every problem, each with its line and key (as `lotsync
    /// validate` names them, but for what the config points to on this machine).
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
    /// Every problem of its values is named at once, with its line.
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
        let table: toml::Table = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            source: Box::new(e),
        })?;
        let lines = validate::Lines::of(&text);
        let checked = validate::Checked::read(table, &lines, &[], &config_dir(path));
        match checked.config {
            Some(mut config) if checked.problems.is_empty() => {
                config.path = Some(path.to_owned());
                Ok(config)
            }
            _ => Err(ConfigError::Invalid {
                path: path.to_owned(),
                problems: checked.problems,
            }),
        }
    }

    /// A lotsync command as advice to run it against this config: `lotsync release --config
    /// /srv/lot/lotsync.toml /srv/lot/inbox/held/thursday.csv`, with `--config` whenever the
    /// config is not the default one and every word quoted for the shell, so that it runs as
    /// printed. `words`: the subcommand, then its arguments.
    pub fn command(&self, words: &[&str]) -> String {
        command(self.path.as_deref(), words)
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

/// The folder relative paths in a config are taken from: the config file's, absolute.
fn config_dir(path: &Path) -> PathBuf {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned())
}

#[cfg(test)]
mod tests {
    use super::checks::duration;
    use super::read::{read, ReadError, Refusal};
    use super::*;
    use crate::diff::Mode;
    use std::time::Duration;

    const MINIMAL: &str = "[api]\nbase_url = \"https://x\"\norganization_id = 1\n";

    /// What the structured reader says of `text`: Ok, or the one refusal that stopped it.
    fn refusal(text: &str) -> Option<Refusal> {
        let table: toml::Table = toml::from_str(text).unwrap();
        read::<Config>(toml::Value::Table(table)).err()
    }

    /// Every range is refused where the value is read, at its key, with its reason; a value
    /// at either end of its range is taken.
    #[test]
    fn a_value_out_of_range_is_refused_where_it_is_read() {
        for (section, line, key, said) in [
            (
                "api",
                "organization_id = 0",
                "api.organization_id",
                "must be the organization's id (not 0)",
            ),
            (
                "api",
                "max_requests_per_second = 0",
                "api.max_requests_per_second",
                "must be more than 0",
            ),
            (
                "api",
                "max_requests_per_second = nan",
                "api.max_requests_per_second",
                "must be more than 0",
            ),
            ("api", "burst = 0", "api.burst", "must be at least 1"),
            (
                "api",
                "max_in_flight = 0",
                "api.max_in_flight",
                "must be at least 1",
            ),
            (
                "api",
                "max_attempts = 0",
                "api.max_attempts",
                "must be at least 1",
            ),
            (
                "api",
                "max_answer_kib = 8",
                "api.max_answer_kib",
                "8 is not between 16 and 1048576 KiB",
            ),
            (
                "api",
                "max_list_page_kib = 2000000",
                "api.max_list_page_kib",
                "2000000 is not between 256 and",
            ),
            (
                "state",
                "cache_mib = 0",
                "state.cache_mib",
                "0 is not between 1 and 4096 MiB",
            ),
            (
                "daemon",
                "settle_secs = 3601",
                "daemon.settle_secs",
                "3601 is not between 0 and 3600 seconds",
            ),
            (
                "daemon",
                "settle_secs = -1",
                "daemon.settle_secs",
                "-1 is not between 0 and 3600 seconds",
            ),
            (
                "daemon",
                "incomplete_wait_secs = nan",
                "daemon.incomplete_wait_secs",
                "NaN is not between 0 and 86400 seconds",
            ),
            (
                "daemon",
                "reconcile_retry_secs = 0",
                "daemon.reconcile_retry_secs",
                "0 is not between 1 and 86400 seconds",
            ),
            (
                "daemon",
                "log_level = \"info,[\"",
                "daemon.log_level",
                "is not a level",
            ),
            (
                "daemon",
                "metrics = \"0.0.0.0:9187\"",
                "daemon.metrics",
                "\"0.0.0.0:9187\" is not a loopback address",
            ),
            (
                "notifications",
                "application_slug = \"a/b\"",
                "notifications.application_slug",
                "must be the application's slug",
            ),
            (
                "feed",
                "max_sold_fraction = 1.5",
                "feed[0].max_sold_fraction",
                "1.5 is not a share between 0 and 1",
            ),
            (
                "feed",
                "sold_after_absent = 0",
                "feed[0].sold_after_absent",
                "must be at least 1",
            ),
            (
                "feed",
                "poll_interval_secs = 0.05",
                "feed[0].poll_interval_secs",
                "0.05 is not between 0.1 and 3600 seconds",
            ),
            ("feed", "name = \" \"", "feed[0].name", "must not be empty"),
            (
                "feed",
                "name = \"reconcile\"",
                "feed[0].name",
                "is the name the nightly reconciliation uses",
            ),
        ] {
            let text = match section {
                "api" if line.starts_with("organization_id") => {
                    format!("[api]\nbase_url = \"https://x\"\n{line}\n")
                }
                "api" => format!("{MINIMAL}{line}\n"),
                "feed" if line.starts_with("name") => {
                    format!("{MINIMAL}[[feed]]\ninbox = \"in\"\nlocation_id = 1\n{line}\n")
                }
                "feed" => format!(
                    "{MINIMAL}[[feed]]\nname = \"a\"\ninbox = \"in\"\nlocation_id = 1\n{line}\n"
                ),
                s => format!("{MINIMAL}[{s}]\n{line}\n"),
            };
            let Some(Refusal { at, error }) = refusal(&text) else {
                panic!("{line}: taken");
            };
            assert_eq!(at.to_string(), key, "{line}");
            let ReadError::Value(reason) = &error else {
                panic!("{line}: {error:?}");
            };
            assert!(reason.contains(said), "{line}: {reason}");
            // toml's own reader (the types, whoever reads them) refuses it the same.
            let err = toml::from_str::<Config>(&text).unwrap_err();
            assert!(err.message().contains(said), "{line}: {err}");
        }
        for (section, line) in [
            ("daemon", "settle_secs = 0"),
            ("daemon", "settle_secs = 3600"),
            ("daemon", "incomplete_wait_secs = 86400"),
            ("daemon", "reconcile_retry_secs = 86400"),
            ("state", "cache_mib = 4096"),
            ("api", "max_answer_kib = 16"),
            ("api", "max_list_page_kib = 1048576"),
            ("api", "max_requests_per_second = 0.1"),
        ] {
            let text = match section {
                "api" => format!("{MINIMAL}{line}\n"),
                s => format!("{MINIMAL}[{s}]\n{line}\n"),
            };
            assert!(refusal(&text).is_none(), "{line}");
        }
    }

    /// A range is checked once: the durations are what was read, not clamped again.
    #[test]
    fn durations_are_the_seconds_read() {
        let config: Config = toml::from_str(&format!(
            "{MINIMAL}[daemon]\nsettle_secs = 3600\nincomplete_wait_secs = 0.5\n"
        ))
        .unwrap();
        assert_eq!(config.daemon.settle(), Duration::from_secs(3600));
        assert_eq!(config.daemon.incomplete_wait(), Duration::from_millis(500));
        assert_eq!(duration(-1.0), Duration::ZERO);
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
}
