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
            Some(config) if checked.problems.is_empty() => Ok(config),
            _ => Err(ConfigError::Invalid {
                path: path.to_owned(),
                problems: checked.problems,
            }),
        }
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
    use super::*;
    use crate::diff::Mode;

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
