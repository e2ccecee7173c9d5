//! What the config's values must be beyond their types: each range or form checked once,
//! where the value is read (the `deserialize_with` readers here, which [`super::types`]
//! names), and what holds between values or against this machine, checked after reading
//! ([`Config::problems`], [`Config::machine_problems`]).
//!
//! A reader's refusal is serde's error of the reader in use: toml's at startup,
//! [`super::read`]'s in `lotsync validate`, which puts it with the key's path and line. The
//! messages say what is wrong and what would do, never the key (the reader knows it).

use super::types::{default_max_answer_kib, default_max_list_page_kib, Config};
use crate::daemon::metrics::MetricsListen;
use crate::diff::Mode;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use std::collections::{HashMap, HashSet};
use std::ops::RangeInclusive;
use std::path::Path;
use std::time::Duration;

/// Below these, ordinary answers would be refused: a vehicle with every field is a few KiB, a
/// page of 100 of them a few hundred.
const MIN_ANSWER_KIB: u32 = 16;
const MIN_LIST_PAGE_KIB: u32 = 256;
/// 1 GiB: more is no limit at all.
const MAX_ANSWER_LIMIT_KIB: u32 = 1024 * 1024;

const SETTLE_SECS: RangeInclusive<f64> = 0.0..=3600.0;
const INCOMPLETE_WAIT_SECS: RangeInclusive<f64> = 0.0..=86_400.0;
const POLL_INTERVAL_SECS: RangeInclusive<f64> = 0.1..=3600.0;
const RECONCILE_RETRY_SECS: RangeInclusive<u64> = 1..=86_400;
const CACHE_MIB: RangeInclusive<u64> = 1..=4096;

/// Reads a `T` and refuses it with `why` unless `fits`.
fn read_if<'de, D, T>(
    deserializer: D,
    fits: impl FnOnce(&T) -> bool,
    why: impl FnOnce(&T) -> String,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let value = T::deserialize(deserializer)?;
    match fits(&value) {
        true => Ok(value),
        false => Err(D::Error::custom(why(&value))),
    }
}

/// Seconds in `range` (NaN is in none).
fn seconds_in<'de, D: Deserializer<'de>>(
    deserializer: D,
    range: RangeInclusive<f64>,
) -> Result<f64, D::Error> {
    read_if(
        deserializer,
        |secs: &f64| range.contains(secs),
        |secs| {
            format!(
                "{secs} is not between {} and {} seconds",
                range.start(),
                range.end()
            )
        },
    )
}

/// A number of seconds that was read through [`seconds_in`], as a duration.
pub(super) fn duration(secs: f64) -> Duration {
    // Read in a range of finite, non-negative seconds, so the conversion takes it; a value
    // set in code out of range waits no time rather than panicking.
    Duration::try_from_secs_f64(secs).unwrap_or_default()
}

pub(super) fn settle_secs<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    seconds_in(deserializer, SETTLE_SECS)
}

pub(super) fn incomplete_wait_secs<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<f64, D::Error> {
    seconds_in(deserializer, INCOMPLETE_WAIT_SECS)
}

pub(super) fn poll_interval_secs<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<f64, D::Error> {
    seconds_in(deserializer, POLL_INTERVAL_SECS)
}

pub(super) fn reconcile_retry_secs<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<u64, D::Error> {
    read_if(
        deserializer,
        |secs: &u64| RECONCILE_RETRY_SECS.contains(secs),
        |secs| {
            format!(
                "{secs} is not between {} and {} seconds",
                RECONCILE_RETRY_SECS.start(),
                RECONCILE_RETRY_SECS.end()
            )
        },
    )
}

pub(super) fn cache_mib<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    read_if(
        deserializer,
        |mib: &u64| CACHE_MIB.contains(mib),
        |mib| {
            format!(
                "{mib} is not between {} and {} MiB (the default, {}, holds a lot of 100,000 \
                 vehicles)",
                CACHE_MIB.start(),
                CACHE_MIB.end(),
                crate::state::DEFAULT_CACHE_MIB
            )
        },
    )
}

pub(super) fn at_least_one<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    read_if(
        deserializer,
        |n: &u32| *n >= 1,
        |_| "must be at least 1".into(),
    )
}

pub(super) fn organization_id<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    read_if(
        deserializer,
        |id: &u64| *id != 0,
        |_| "must be the organization's id (not 0)".into(),
    )
}

pub(super) fn requests_per_second<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<f64, D::Error> {
    // `> 0.0` is false for NaN.
    read_if(
        deserializer,
        |rate: &f64| *rate > 0.0,
        |_| "must be more than 0".into(),
    )
}

/// KiB between `least` and 1 GiB.
fn kib_from<'de, D: Deserializer<'de>>(
    deserializer: D,
    least: u32,
    default: u32,
) -> Result<u32, D::Error> {
    read_if(
        deserializer,
        |kib: &u32| (least..=MAX_ANSWER_LIMIT_KIB).contains(kib),
        |kib| {
            format!(
                "{kib} is not between {least} and {MAX_ANSWER_LIMIT_KIB} KiB (the default, \
                 {default}, suits the service)"
            )
        },
    )
}

pub(super) fn answer_kib<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    kib_from(deserializer, MIN_ANSWER_KIB, default_max_answer_kib())
}

pub(super) fn list_page_kib<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    kib_from(deserializer, MIN_LIST_PAGE_KIB, default_max_list_page_kib())
}

pub(super) fn share<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    read_if(
        deserializer,
        |share: &f64| (0.0..=1.0).contains(share),
        |share| format!("{share} is not a share between 0 and 1"),
    )
}

pub(super) fn feed_name<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let name = String::deserialize(deserializer)?;
    if name.trim().is_empty() {
        return Err(D::Error::custom("must not be empty"));
    }
    if name == crate::plan::RECONCILE_FEED {
        return Err(D::Error::custom(format!(
            "{name:?} is the name the nightly reconciliation uses; pick another"
        )));
    }
    Ok(name)
}

pub(super) fn application_slug<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<String, D::Error> {
    read_if(
        deserializer,
        |slug: &String| !slug.trim().is_empty() && !slug.contains('/'),
        |_| "must be the application's slug, such as \"inventory\"".into(),
    )
}

pub(super) fn log_level<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    read_if(
        deserializer,
        |level: &String| tracing_subscriber::EnvFilter::try_new(level).is_ok(),
        |level| format!("{level:?} is not a level (error, warn, info, debug, trace)"),
    )
}

pub(super) fn metrics<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<MetricsListen>, D::Error> {
    let value = String::deserialize(deserializer)?;
    MetricsListen::parse(&value)
        .map(Some)
        .map_err(D::Error::custom)
}

impl Config {
    /// What is wrong between values that each read well, each named by its key: two feeds
    /// of one name, the metrics on the control socket's path.
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
        let mut names = HashSet::new();
        for (i, feed) in self.feeds.iter().enumerate() {
            if !names.insert(feed.name.as_str()) {
                problems.push(format!(
                    "feed[{i}] ({:?}).name: another feed has the same name",
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
        let mut locations: HashMap<u64, &str> = HashMap::new();
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

#[cfg(test)]
mod tests {
    use super::super::read::{read, ReadError, Refusal};
    use super::*;

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
