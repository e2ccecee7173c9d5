//! What holds between the config's values, each read well on its own, or against this
//! machine: checked once the whole config is read ([`Config::problems`],
//! [`Config::machine_problems`]). Each value's own range is [`super::checks`]'.

use super::types::Config;
use crate::daemon::metrics::MetricsListen;
use std::collections::HashSet;
use std::path::Path;

impl Config {
    /// What is wrong between values that each read well, each named by its key: two feeds
    /// of one name, a feed at location 0, the metrics on the control socket's path. Every
    /// command that reads the config refuses these (`validate`, `sync`, `run` alike).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        // Path equality compares components, so `/run/lotsync//./lotsync.sock` is the
        // same path as the socket's.
        if let Some(MetricsListen::Unix(path)) = &self.daemon.metrics {
            if *path == self.daemon.socket {
                problems.push(format!(
                    "daemon.metrics: {} is the control socket (daemon.socket); serve the \
                     metrics on another path, such as \"/run/lotsync/metrics.sock\"",
                    crate::text::shown_path(path)
                ));
            }
        }
        // Feeds may share a location, full ones too: each full snapshot sells only the vehicles
        // its feed owns ([`crate::diff`]).
        let mut names = HashSet::new();
        for (i, feed) in self.feeds.iter().enumerate() {
            if !names.insert(feed.name.as_str()) {
                problems.push(format!(
                    "feed[{i}] ({:?}).name: another feed has the same name",
                    feed.name
                ));
            }
            if feed.location_id == 0 {
                problems.push(format!(
                    "feed[{i}] ({:?}).location_id: must be the location's id on the service \
                     (not 0)",
                    feed.name
                ));
            }
        }
        problems
    }

    /// What the config points to that this machine does not have.
    pub(super) fn machine_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Err(e) = crate::api::check_base_url(&self.api.base_url, &self.api.version) {
            problems.push(e.to_string());
        }
        if let Err(e) = self.api.load_token() {
            problems.push(crate::text::Chain(&e).to_string());
        }
        for (i, feed) in self.feeds.iter().enumerate() {
            let at = format!("feed[{i}] ({:?})", feed.name);
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

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "[api]\nbase_url = \"https://x\"\norganization_id = 1\n";

    #[test]
    fn metrics_on_the_control_socket_and_feeds_of_one_name_are_problems() {
        let config: Config = toml::from_str(&format!(
            "{MINIMAL}[daemon]\nsocket = \"/run/lotsync/lotsync.sock\"\n\
             metrics = \"/run/lotsync//./lotsync.sock\"\n\
             [[feed]]\nname = \"a\"\ninbox = \"in\"\nlocation_id = 1\n\
             [[feed]]\nname = \"a\"\ninbox = \"in2\"\nlocation_id = 2\n"
        ))
        .unwrap();
        let problems = config.problems();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("daemon.metrics: "), "{problems:?}");
        assert!(problems[0].contains("the control socket"), "{problems:?}");
        assert_eq!(
            problems[1],
            "feed[1] (\"a\").name: another feed has the same name"
        );
    }
}
