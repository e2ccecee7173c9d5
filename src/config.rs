//! lotsync's own config file (TOML): where the service is and as whom lotsync calls it.
//!
//! Typed and checked where it is declared: unknown keys are errors with their path, defaults
//! are small named functions. Sections for state, feeds and notifications join here as the
//! stages that read them arrive.

use crate::api::{ApiToken, ClientSettings};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The whole config file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub api: ApiConfig,
}

/// `[api]`: the Vehicle Inventory Service.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    /// The spec's `{base_url}`; https, or plain http to this machine only.
    pub base_url: String,
    /// The version segment of every path.
    #[serde(default = "default_version")]
    pub version: String,
    /// Sent as `X-Service-Organization-Id`.
    pub organization_id: u64,
    /// A file holding the token (systemd's LoadCredential puts it in
    /// `/run/credentials/lotsync.service/`).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Or the name of an environment variable holding it.
    #[serde(default)]
    pub token_env: Option<String>,
    /// Ceiling of the request rate; the uploader adapts below it.
    #[serde(default = "default_max_requests_per_second")]
    pub max_requests_per_second: f64,
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: u32,
    /// Whole-request timeout, in seconds.
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
}

/// A config that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{0}")]
    Token(String),
}

impl Config {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })
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
            (Some(file), None) => std::fs::read_to_string(file).map_err(|e| {
                ConfigError::Token(format!(
                    "api.token_file {}: cannot read the token: {e}",
                    file.display()
                ))
            })?,
            (None, Some(var)) => std::env::var(var).map_err(|_| {
                ConfigError::Token(format!(
                    "api.token_env: the environment variable {var} is not set"
                ))
            })?,
            (None, None) => {
                return Err(ConfigError::Token(
                    "api: no token; set token_file (or token_env)".into(),
                ))
            }
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
        }
    }
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

fn default_timeout_secs() -> u64 {
    30
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn unknown_keys_are_named() {
        let err = toml::from_str::<Config>(
            "[api]\nbase_url = \"https://x\"\norganization_id = 1\norganisation = 2\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("organisation"), "{err}");
    }

    #[test]
    fn token_file_is_trimmed_and_never_echoed() {
        let dir = std::env::temp_dir().join(format!("lotsync-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "s3cret\n").unwrap();
        let api = ApiConfig {
            base_url: "https://x".into(),
            version: default_version(),
            organization_id: 1,
            token_file: Some(file),
            token_env: None,
            max_requests_per_second: 1.0,
            max_in_flight: 1,
            timeout_secs: 1,
        };
        assert_eq!(api.load_token().unwrap(), ApiToken::new("s3cret"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
