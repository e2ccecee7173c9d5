//! The API token's sources: `api.token_file` (refused when others may read or change it),
//! `api.token_env`, or the systemd credential `api-token`; and the writing of a token file
//! as lotsync requires one. The token never reaches a message.

use super::types::ApiConfig;
use super::ConfigError;
use crate::api::ApiToken;
use std::path::{Path, PathBuf};

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
        let quoted = crate::text::shell_quoted(&shown);
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
}

#[cfg(test)]
mod tests {
    use super::super::types::{
        default_max_answer_kib, default_max_list_page_kib, default_version, Config,
    };
    use super::*;

    #[test]
    fn an_unset_token_variable_is_named() {
        let config: Config = toml::from_str(
            "[api]\nbase_url = \"https://x\"\norganization_id = 1\n\
             token_env = \"LOTSYNC_TEST_TOKEN_UNSET\"\n",
        )
        .unwrap();
        let err = config.api.load_token().unwrap_err().to_string();
        assert!(err.contains("LOTSYNC_TEST_TOKEN_UNSET is not set"), "{err}");
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
            crate::text::shell_quoted("/etc/lotsync/api-token"),
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
            let quoted = crate::text::shell_quoted(path);
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
