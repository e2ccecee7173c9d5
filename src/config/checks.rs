//! What each of the config's values must be beyond its type: each range or form checked once,
//! where the value is read (the `deserialize_with` readers here, which [`super::types`]
//! names). What holds between values or against this machine is checked after reading, in
//! [`super::coherence`].
//!
//! A reader's refusal is serde's error of the reader in use: toml's at startup,
//! [`super::read`]'s in `lotsync validate`, which puts it with the key's path and line. The
//! messages say what is wrong and what would do, never the key (the reader knows it).

use crate::api::{DEFAULT_MAX_ANSWER_KIB, DEFAULT_MAX_LIST_PAGE_KIB};
use crate::daemon::metrics::MetricsListen;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use std::ops::RangeInclusive;
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

pub(super) fn keep_days<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    read_if(
        deserializer,
        |days: &u32| (1..=36_500).contains(days),
        |days| format!("{days} is not between 1 and 36500 days"),
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
    kib_from(deserializer, MIN_ANSWER_KIB, DEFAULT_MAX_ANSWER_KIB)
}

pub(super) fn list_page_kib<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    kib_from(deserializer, MIN_LIST_PAGE_KIB, DEFAULT_MAX_LIST_PAGE_KIB)
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
