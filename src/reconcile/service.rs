//! The service's side of the reconciliation: the organization's vehicles in the service's
//! whole list, read page by page at the token's pace, and the VIN a listed vehicle is known by.
//!
//! Each page waits for its turn in the same [`Pace`] writes wait on (the per-token rate, the
//! service's Retry-After window, one probe at a time during an outage) and tells it how it was
//! answered. A page that fails for a passing reason is read again alone, with the uploader's
//! short backoff and never sooner than a Retry-After; the read gives up when nothing has been
//! answered for `api.give_up_after_secs` on the wall clock, or at once when the service asks
//! to wait longer than that, as delivery does.
//!
//! A list that changes while it is read (vehicles created or deleted meanwhile) moves items
//! across page boundaries: one may be missed, another read twice. Items are kept by id (read
//! twice is once), and a read is taken as whole only when every page told the same `total`
//! and that many distinct vehicles were read; otherwise the whole list is read again (up to
//! [`MAX_PASSES`] times), and the result says so. A list shape without a `total` (a bare array
//! is one request) is taken as read. A shift that a total cannot show (one vehicle created and
//! another deleted between two pages) is not seen; the next night's read settles it.
//!
//! It reads the list; what is made of it is [`super::compare`]'s (and, before the first diff of
//! an empty state, the daemon's `read_service_list`'s). It writes nothing.

use crate::api::{ApiClient, ApiError, ErrorClass, Url, Vehicle};
use crate::config::ApiConfig;
use crate::text::Chain;
use crate::upload::pace::Pace;
use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

/// Reads of the whole list at most, when it keeps changing while read.
pub const MAX_PASSES: usize = 3;
/// Pages followed at most in one pass, a guard against a service that never ends its list.
const MAX_PAGES: usize = 100_000;
/// The wait before a page that failed twice is asked again; it doubles up to [`RETRY_MAX`].
/// The first failure is asked again at once, at the pace: one 5xx among a hundred pages is a
/// blip, and a service that keeps failing meets the pace's outage probes, not a hammering.
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(2);

/// Why the list could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// An answer nothing but a change of setup fixes (a refused token, a list that cannot be
    /// read), or a setup error.
    #[error(transparent)]
    Api(Box<ApiError>),
    #[error(
        "nothing answered for {secs} s (api.give_up_after_secs) after {pages} pages; last \
         error: {}", last.as_deref().unwrap_or("none (waiting for a turn to send)")
    )]
    GaveUp {
        secs: u64,
        pages: usize,
        last: Option<String>,
    },
    #[error(
        "the service asked to wait until {until} ({header}), longer than \
         api.give_up_after_secs; it is read again after that"
    )]
    Waits { until: String, header: &'static str },
    #[error("the list's pages do not end ({pages} pages followed)")]
    Endless { pages: usize },
}

impl ListError {
    /// The service's answer (or the client's setup) behind it, when it is one.
    pub fn api_error(&self) -> Option<&ApiError> {
        match self {
            ListError::Api(e) => Some(e),
            _ => None,
        }
    }
}

/// The organization's vehicles as the service lists them, and what reading them cost.
#[derive(Debug, Clone, Default)]
pub struct ServiceList {
    /// By id, each once.
    pub vehicles: Vec<Vehicle>,
    /// Pages answered, every pass included.
    pub pages: usize,
    /// Of those, pages of a pass after the first.
    pub pages_read_again: usize,
    /// Requests that failed for a passing reason and were sent again.
    pub retries: usize,
    /// What is worth saying about the read (the list changed while it was read).
    pub notes: Vec<String>,
}

/// The organization's vehicles in the service's whole list (a service may list others'),
/// each page at `pace` (see the module docs).
pub(crate) async fn organization_vehicles(
    client: &ApiClient,
    pace: &Pace,
    api: &ApiConfig,
) -> Result<ServiceList, ListError> {
    let org = client.organization_id();
    let mut reader = Reader {
        client,
        pace,
        give_up: Duration::from_secs(api.give_up_after_secs),
        last_answer: Instant::now(),
        pages: 0,
        retries: 0,
    };
    let start = client
        .vehicle_list_start()
        .map_err(|e| ListError::Api(Box::new(e)))?;
    let mut read = Pass::default();
    let mut previous: Option<Pass> = None;
    let mut notes = Vec::new();
    let mut first_pass_pages = 0;
    for pass in 1..=MAX_PASSES {
        read = reader.pass(&start).await?;
        if pass == 1 {
            first_pass_pages = read.pages;
        }
        let Some(doubt) = read.doubt() else {
            break;
        };
        if pass == MAX_PASSES {
            // Still changing: nothing seen in the last two passes is left out (a vehicle
            // deleted meanwhile may be counted; the next run settles it).
            if let Some(before) = previous.take() {
                for (id, vehicle) in before.vehicles {
                    read.vehicles.entry(id).or_insert(vehicle);
                }
            }
            notes.push(format!(
                "the service's list kept changing while it was read ({doubt}); read {pass} \
                 times, the vehicles of the last two reads taken together"
            ));
            break;
        }
        notes.push(format!(
            "the service's list changed while it was read ({doubt}); it was read again whole"
        ));
        tracing::info!(pass, %doubt, "the service's list changed while it was read: reading it again");
        previous = Some(read);
        read = Pass::default();
    }
    Ok(ServiceList {
        vehicles: read
            .vehicles
            .into_values()
            .filter(|v| {
                v.organization
                    .as_ref()
                    .and_then(|o| o.id)
                    .is_none_or(|id| id == org as f64)
            })
            .collect(),
        pages: reader.pages,
        pages_read_again: reader.pages - first_pass_pages,
        retries: reader.retries,
        notes,
    })
}

/// One read of the whole list, first page to last.
#[derive(Debug, Default)]
struct Pass {
    vehicles: BTreeMap<u64, Vehicle>,
    pages: usize,
    /// Items read more than once (moved onto the next page meanwhile).
    doubled: usize,
    /// Each page's `total`, when it tells.
    totals: Vec<u64>,
}

impl Pass {
    /// Why this pass may not hold the whole list, if it may not: the total changed between
    /// pages, or the vehicles read do not add up to it.
    fn doubt(&self) -> Option<String> {
        let (first, last) = (self.totals.first()?, self.totals.last()?);
        if first != last || self.totals.iter().any(|t| t != first) {
            return Some(format!("its total went from {first} to {last}"));
        }
        let read = self.vehicles.len() as u64;
        (read != *last).then(|| format!("{read} vehicles read of the {last} it counts"))
    }
}

/// Reads pages at the pace, each retried alone, until the give-up time.
struct Reader<'a> {
    client: &'a ApiClient,
    pace: &'a Pace,
    give_up: Duration,
    /// The last page answered (or the start).
    last_answer: Instant,
    pages: usize,
    retries: usize,
}

impl Reader<'_> {
    /// Every page once, following the service's next links from `start`.
    async fn pass(&mut self, start: &Url) -> Result<Pass, ListError> {
        let mut pass = Pass::default();
        let mut followed = HashSet::new();
        let mut url = start.clone();
        loop {
            let page = self.page(&url).await?;
            pass.pages += 1;
            if let Some(total) = page.total {
                pass.totals.push(total);
            }
            for vehicle in page.items {
                if pass.vehicles.insert(vehicle.id, vehicle).is_some() {
                    pass.doubled += 1;
                }
            }
            let Some(next) = page.next else {
                break;
            };
            if !followed.insert(next.clone()) || followed.len() > MAX_PAGES {
                return Err(ListError::Endless { pages: pass.pages });
            }
            url = next;
        }
        if pass.doubled > 0 {
            tracing::debug!(
                doubled = pass.doubled,
                "vehicles listed twice (the list moved while read); each is kept once"
            );
        }
        Ok(pass)
    }

    /// One page, retried while it fails for a passing reason.
    async fn page(&mut self, url: &Url) -> Result<crate::api::ListPage<Vehicle>, ListError> {
        let mut wait = Duration::ZERO;
        let mut last: Option<String> = None;
        loop {
            let deadline = self.last_answer + self.give_up;
            if let Some(window) = self.client.service_wait().window() {
                if window.until > deadline {
                    return Err(ListError::Waits {
                        until: window.until_shown(),
                        header: window.reason.header(),
                    });
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ListError::GaveUp {
                    secs: now.duration_since(self.last_answer).as_secs(),
                    pages: self.pages,
                    last,
                });
            }
            let turn = tokio::select! {
                turn = self.pace.ready() => turn,
                () = tokio::time::sleep_until(deadline.into()) => continue,
            };
            let error = match self.client.vehicle_page(url).await {
                Ok(answer) => {
                    self.pace.answered(turn, true, answer.rate_limit);
                    self.pages += 1;
                    self.last_answer = Instant::now();
                    return Ok(answer.value);
                }
                // Not sent: the service's window opened after the turn was given.
                Err(ApiError::Waiting { .. }) => {
                    drop(turn);
                    continue;
                }
                Err(e) if e.status() == Some(429) => {
                    self.pace.throttled(turn, e.rate_limit(), e.retry_after());
                    e
                }
                Err(e) if e.class() == ErrorClass::Retryable => {
                    self.pace.failed(turn, &e);
                    e
                }
                Err(e) => {
                    self.pace.answered(turn, false, e.rate_limit());
                    return Err(ListError::Api(Box::new(e)));
                }
            };
            self.retries += 1;
            // Jitter keeps several readers of one service from asking in step.
            let jittered = wait.mul_f64(1.0 + fastrand::f64());
            let pause = error.retry_after().map_or(jittered, |r| r.max(jittered));
            tracing::debug!(error = %Chain(&error), wait_ms = pause.as_millis() as u64, "reading the page of the service's list again");
            last = Some(error.to_string());
            wait = if wait.is_zero() {
                RETRY_FIRST
            } else {
                (wait * 2).min(RETRY_MAX)
            };
            let until = (Instant::now() + pause).min(deadline);
            tokio::time::sleep_until(until.into()).await;
        }
    }
}

/// A listed vehicle's VIN as the state keys it (trimmed, upper-cased); None without one.
pub(crate) fn listed_vin(vehicle: &Vehicle) -> Option<String> {
    vehicle
        .vin
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_ascii_uppercase)
}
