//! The sandbox's TOML config: who may call it (tokens, organizations, locations) and how it
//! behaves (list shape, strictness, rate limit, faults). Every section is optional and falls
//! back to the default world that `lotsync sandbox` serves without a config file.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

/// The whole sandbox config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    /// API tokens the sandbox accepts, each for one user.
    #[serde(default = "default_tokens")]
    pub tokens: Vec<TokenEntry>,
    #[serde(default = "default_organizations")]
    pub organizations: Vec<OrganizationEntry>,
    #[serde(default = "default_locations")]
    pub locations: Vec<LocationEntry>,
    #[serde(default)]
    pub behaviour: Behaviour,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    pub token: String,
    pub user: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrganizationEntry {
    pub id: u64,
    pub name: String,
    /// Users with access to this organization.
    #[serde(default)]
    pub users: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocationEntry {
    pub id: u64,
    pub organization: u64,
}

/// How list answers are shaped (see the module docs of `sandbox`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ListShape {
    Bare,
    #[default]
    Paginator,
    Resource,
}

/// What the sandbox does beyond the happy path. Can be replaced at run time through
/// `PUT /__sandbox/behaviour` (JSON of the same fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Behaviour {
    #[serde(default)]
    pub list_shape: ListShape,
    /// Items per page when the caller does not ask (`per_page`); 1 to 100.
    #[serde(default = "default_page_size")]
    pub page_size: u32,
    /// A redundant transition (sold when sold, in-stock when in stock) is 422 instead of 200.
    #[serde(default)]
    pub strict_transitions: bool,
    /// How long after a write the vehicle's first image appears (images are processed
    /// asynchronously by the service).
    #[serde(default = "default_image_delay_ms")]
    pub image_delay_ms: u64,
    /// A token bucket per token; absent means unlimited (and no `X-RateLimit-*` headers).
    #[serde(default)]
    pub rate_limit: Option<RateLimitConfig>,
    /// A token bucket per token and route, for the routes named as the stats name them
    /// (`"POST /v1/inventory/{id}/sold"`), checked after the token's own bucket: endpoints
    /// with limits of their own, as a service that takes sales at 5/s and creates and updates
    /// at 50/s. Over one, 429 with a Retry-After as the token's bucket sends, counted as
    /// `rate_limited`; with its `headers`, that route's answers carry its bucket's
    /// `X-RateLimit-*`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub route_limits: BTreeMap<String, RateLimitConfig>,
    /// A fixed window per token, checked after the bucket: `requests` per `window_secs`
    /// counted from the window's start. Its answers say `X-RateLimit-Limit`, `-Remaining` and
    /// `-Reset` (the window's end); over it, 429 with a Retry-After to the window's end. A
    /// window of an hour or a day is a quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_window: Option<FixedWindowConfig>,
    /// A sliding window per token, checked after the fixed window: at most `requests`
    /// accepted in any `window_secs` seconds (a request it refuses does not count). Its
    /// answers say `X-RateLimit-Limit` and `-Remaining`; over it, 429 with a Retry-After and
    /// an `X-RateLimit-Reset` for when the oldest request accepted leaves the window: room
    /// comes back one request at a time, not all at once at an edge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<SlidingWindowConfig>,
    /// At most `max_in_flight` requests served at once, of every token: one more is refused
    /// on arrival with `status` (429 or 503), no header and no Retry-After, as a service whose
    /// workers are all busy (or a proxy in front of it) answers; counted as
    /// `over_concurrency` in the stats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<ConcurrencyConfig>,
    /// Answers slow down under load: with more than `knee_per_sec` service requests (of every
    /// token) arrived in the last second, each one's latency (`faults.latency_ms` and its
    /// route's) is multiplied by `1 + factor × excess / knee_per_sec`, the excess being the
    /// arrivals beyond the knee. Nothing is refused; without a latency there is nothing to
    /// multiply. Counted as `slowed` (and the latency added, `slowed_ms`) in the stats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowing: Option<SlowingConfig>,
    /// Hold clients to every Retry-After sent (by the rate limit, `http_429` or `http_503`):
    /// a request of that token before the announced time is refused with 429 and a
    /// Retry-After for the same moment, without touching the bucket or drawing a fault, and
    /// counted as `early` in the stats. Windows already announced stay across a change of
    /// behaviour; `POST /__sandbox/reset` forgets them.
    #[serde(default)]
    pub enforce_retry_after: bool,
    /// How every Retry-After the sandbox sends is written: whole seconds (`seconds`, the
    /// default) or an HTTP date (`http_date`, RFC 9110 §10.2.3), the moment rounded up to a
    /// whole second.
    #[serde(default)]
    pub retry_after_form: RetryAfterForm,
    /// Which `X-RateLimit-*` headers a rate limit with `headers = true` sends: all of them
    /// (`all`, the default), or only `X-RateLimit-Reset` on the bucket's own 429s
    /// (`reset_only`), as services that publish nothing but when to come back do.
    #[serde(default)]
    pub rate_headers: RateHeaderSet,
    #[serde(default)]
    pub faults: Faults,
    /// Events planted in reads of the vehicle list, to test a client's paging.
    #[serde(default, skip_serializing_if = "ListDrills::is_none")]
    pub list_drills: ListDrills,
}

/// Events planted in reads of the vehicle list (`GET /v1/inventory`), each once per behaviour
/// put (a new `PUT /__sandbox/behaviour` or a reset arms them again).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListDrills {
    /// The first request for each of these page numbers answers 500 (nothing else drawn);
    /// the next request for it is served as usual.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fail_pages: Vec<u64>,
    /// Right after page `after_page` is first served, the organization's `delete_first`
    /// vehicles of lowest id are deleted (as if sold and removed meanwhile), so that every
    /// later vehicle moves `delete_first` places toward the front, across page boundaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift: Option<ListShift>,
}

impl ListDrills {
    fn is_none(&self) -> bool {
        self.fail_pages.is_empty() && self.shift.is_none()
    }
}

/// See [`ListDrills::shift`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListShift {
    pub after_page: u64,
    pub delete_first: u64,
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour {
            list_shape: ListShape::default(),
            page_size: default_page_size(),
            strict_transitions: false,
            image_delay_ms: default_image_delay_ms(),
            rate_limit: None,
            route_limits: BTreeMap::new(),
            fixed_window: None,
            sliding_window: None,
            concurrency: None,
            slowing: None,
            enforce_retry_after: false,
            retry_after_form: RetryAfterForm::default(),
            rate_headers: RateHeaderSet::default(),
            faults: Faults::default(),
            list_drills: ListDrills::default(),
        }
    }
}

/// See [`Behaviour::fixed_window`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedWindowConfig {
    pub requests: u32,
    pub window_secs: u64,
}

/// See [`Behaviour::sliding_window`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlidingWindowConfig {
    pub requests: u32,
    pub window_secs: u64,
}

/// See [`Behaviour::slowing`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlowingConfig {
    pub knee_per_sec: u32,
    pub factor: f64,
}

/// See [`Behaviour::concurrency`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConcurrencyConfig {
    pub max_in_flight: u32,
    #[serde(default = "default_concurrency_status")]
    pub status: u16,
}

fn default_concurrency_status() -> u16 {
    429
}

/// See [`Behaviour::retry_after_form`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryAfterForm {
    #[default]
    Seconds,
    HttpDate,
}

/// See [`Behaviour::rate_headers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateHeaderSet {
    #[default]
    All,
    ResetOnly,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Tokens added to the bucket per second.
    pub rate: f64,
    /// Bucket size: requests allowed at once after a quiet spell.
    pub burst: u32,
    /// Whether answers carry `X-RateLimit-Limit` / `X-RateLimit-Remaining`, and the bucket's
    /// 429s `X-RateLimit-Reset` (off: a service that keeps its limit to itself, for testing a
    /// client's adaptation without them).
    #[serde(default = "default_true")]
    pub headers: bool,
}

fn default_true() -> bool {
    true
}

/// Fault probabilities per request (0 to 1, summing to at most 1), drawn from an RNG seeded
/// with `seed` so that a test can reproduce a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// 500 Server Error, nothing applied.
    #[serde(default)]
    pub http_500: f64,
    /// 503 Service Unavailable with Retry-After (`retry_after_secs`), nothing applied.
    #[serde(default)]
    pub http_503: f64,
    /// 504 Gateway Timeout, nothing applied.
    #[serde(default)]
    pub http_504: f64,
    /// 429 although the bucket has room, with Retry-After (`retry_after_secs`).
    #[serde(default)]
    pub http_429: f64,
    /// Those spurious 429s say the bucket is empty: `X-RateLimit-Limit` (the bucket's size,
    /// or 60 without a limit), `X-RateLimit-Remaining: 0` and `X-RateLimit-Reset` (the end of
    /// their Retry-After), whatever the bucket holds and even without a rate limit, as a
    /// second throttle or another server's bucket answers. Off: they carry the bucket's own
    /// headers (none without a limit).
    #[serde(default)]
    pub http_429_claims_empty: bool,
    /// The connection is dropped before the request is applied.
    #[serde(default)]
    pub drop: f64,
    /// The request is applied, then the connection is dropped before the answer.
    #[serde(default)]
    pub ack_lost: f64,
    /// 200 with an HTML page instead of the answer, nothing applied: a captive portal or a
    /// proxy's sign-in page in front of the service.
    #[serde(default)]
    pub html_200: f64,
    /// 403 with a firewall's HTML page, nothing applied and no rate headers: a web
    /// application firewall in front of the service that blocked the request.
    #[serde(default)]
    pub html_403: f64,
    /// Vehicle writes only (create-or-modify, sold, in-stock): the write is applied, but the
    /// answer is another vehicle of the organization (the one with the lowest id), as a
    /// confused cache or proxy would answer. Nothing happens while the organization has no
    /// other vehicle.
    #[serde(default)]
    pub wrong_vehicle: f64,
    /// Vehicle writes only: the write is applied, but the answer is only `{"id": N}`, N the id
    /// of another vehicle of the organization (the one with the lowest id), as a cache or a
    /// proxy that keeps only the id would answer. Nothing happens while the organization has
    /// no other vehicle.
    #[serde(default)]
    pub id_only: f64,
    /// No answer at all, nothing applied: the request is held without a byte sent back (for
    /// an hour, then its connection is dropped), so that the client's timeout has to end it.
    #[serde(default)]
    pub silence: f64,
    /// The Retry-After, in seconds, of `http_429` and `http_503` answers; 1 to 86400.
    #[serde(default = "default_retry_after_secs")]
    pub retry_after_secs: u64,
    /// Added to every request before it is handled.
    #[serde(default)]
    pub latency_ms: u64,
    /// More latency for the routes named, as the stats name them (`"POST
    /// /v1/inventory/{id}/sold"`): one slow endpoint among fast ones.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub route_latency_ms: BTreeMap<String, u64>,
    /// Every 2xx answer is followed by this many KiB of JSON whitespace (still valid JSON),
    /// sent in chunks without a Content-Length: an answer too large to read whole.
    #[serde(default)]
    pub pad_answer_kib: u64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            seed: default_seed(),
            http_500: 0.0,
            http_503: 0.0,
            http_504: 0.0,
            http_429: 0.0,
            drop: 0.0,
            ack_lost: 0.0,
            html_200: 0.0,
            html_403: 0.0,
            wrong_vehicle: 0.0,
            id_only: 0.0,
            silence: 0.0,
            http_429_claims_empty: false,
            retry_after_secs: default_retry_after_secs(),
            latency_ms: 0,
            route_latency_ms: BTreeMap::new(),
            pad_answer_kib: 0,
        }
    }
}

/// The most padding an answer can be given, in KiB.
const MAX_PAD_KIB: u64 = 4 * 1024 * 1024;

/// The longest Retry-After the faults may send: a day, in seconds.
const MAX_RETRY_AFTER_SECS: u64 = 86_400;

/// The most requests a sliding window may hold: each one accepted in it is remembered.
const MAX_SLIDING_REQUESTS: u32 = 1_000_000;

/// The largest `slowing.factor`: at twice the knee, answers a thousand and one times as slow.
const MAX_SLOWING_FACTOR: f64 = 1000.0;

/// The service's routes, as `gate` and the stats name them: the keys of
/// `behaviour.route_limits` (and of `faults.route_latency_ms`).
pub(crate) const SERVICE_ROUTES: [&str; 8] = [
    "GET /v1/inventory",
    "POST /v1/inventory",
    "GET /v1/inventory/{id}",
    "POST /v1/inventory/{id}/sold",
    "POST /v1/inventory/{id}/in-stock",
    "GET /v1/applications/{app}/notifications",
    "POST /v1/applications/{app}/notifications",
    "POST /v1/applications/{app}/notifications/{id}/read",
];

impl Faults {
    fn probabilities(&self) -> [(&'static str, f64); 11] {
        [
            ("http_500", self.http_500),
            ("http_503", self.http_503),
            ("http_504", self.http_504),
            ("http_429", self.http_429),
            ("drop", self.drop),
            ("ack_lost", self.ack_lost),
            ("html_200", self.html_200),
            ("html_403", self.html_403),
            ("wrong_vehicle", self.wrong_vehicle),
            ("id_only", self.id_only),
            ("silence", self.silence),
        ]
    }
}

/// A config that cannot be used, with every problem found.
#[derive(Debug, thiserror::Error)]
pub enum SandboxConfigError {
    #[error("cannot read sandbox config {path}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("sandbox config {path}: {message}")]
    Parse { path: String, message: String },
    #[error("sandbox config {path}:\n  {}", .problems.join("\n  "))]
    Invalid { path: String, problems: Vec<String> },
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            tokens: default_tokens(),
            organizations: default_organizations(),
            locations: default_locations(),
            behaviour: Behaviour::default(),
        }
    }
}

impl SandboxConfig {
    /// Reads and checks a config file.
    pub fn load(path: &Path) -> Result<Self, SandboxConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SandboxConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        let config: SandboxConfig =
            toml::from_str(&text).map_err(|e| SandboxConfigError::Parse {
                path: shown.clone(),
                message: e.to_string(),
            })?;
        let problems = config.problems();
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(SandboxConfigError::Invalid {
                path: shown,
                problems,
            })
        }
    }

    /// Every inconsistency in the config, as sentences; empty when it is usable.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut tokens = HashSet::new();
        for t in &self.tokens {
            if t.token.is_empty() {
                problems.push("a token is empty".to_owned());
            }
            if !tokens.insert(&t.token) {
                problems.push(format!("token {:?} is declared twice", t.token));
            }
        }
        let mut orgs = HashSet::new();
        for o in &self.organizations {
            if !orgs.insert(o.id) {
                problems.push(format!("organization {} is declared twice", o.id));
            }
        }
        let mut locations = HashSet::new();
        for l in &self.locations {
            if !locations.insert(l.id) {
                problems.push(format!("location {} is declared twice", l.id));
            }
            if !orgs.contains(&l.organization) {
                problems.push(format!(
                    "location {} names organization {}, which is not declared",
                    l.id, l.organization
                ));
            }
        }
        problems.extend(self.behaviour.problems());
        problems
    }

    /// The world as a few lines for a person: who can call, what exists, how it behaves.
    pub fn describe(&self) -> String {
        let mut out = String::from("sandbox world:\n");
        for t in &self.tokens {
            let _ = writeln!(out, "  token {:?} is user {}", t.token, t.user);
        }
        for o in &self.organizations {
            let locations: Vec<String> = self
                .locations
                .iter()
                .filter(|l| l.organization == o.id)
                .map(|l| l.id.to_string())
                .collect();
            let users: Vec<String> = o.users.iter().map(u64::to_string).collect();
            let _ = writeln!(
                out,
                "  organization {} {:?}: locations [{}], users with access [{}]",
                o.id,
                o.name,
                locations.join(", "),
                users.join(", ")
            );
        }
        let _ = write!(out, "  {}", self.behaviour.describe());
        out
    }
}

impl Behaviour {
    /// Every out-of-range setting, as sentences.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !(1..=100).contains(&self.page_size) {
            problems.push(format!(
                "behaviour.page_size is {}; it must be 1 to 100",
                self.page_size
            ));
        }
        if let Some(window) = &self.fixed_window {
            if window.requests == 0 || !(1..=MAX_RETRY_AFTER_SECS).contains(&window.window_secs) {
                problems.push(format!(
                    "behaviour.fixed_window is {} requests per {} s; it must be at least 1 \
                     request per 1 to {MAX_RETRY_AFTER_SECS} s",
                    window.requests, window.window_secs
                ));
            }
        }
        if let Some(window) = &self.sliding_window {
            if !(1..=MAX_SLIDING_REQUESTS).contains(&window.requests)
                || !(1..=MAX_RETRY_AFTER_SECS).contains(&window.window_secs)
            {
                problems.push(format!(
                    "behaviour.sliding_window is {} requests per {} s; it must be 1 to \
                     {MAX_SLIDING_REQUESTS} requests per 1 to {MAX_RETRY_AFTER_SECS} s",
                    window.requests, window.window_secs
                ));
            }
        }
        if let Some(c) = &self.concurrency {
            if c.max_in_flight == 0 || !matches!(c.status, 429 | 503) {
                problems.push(format!(
                    "behaviour.concurrency is {} in flight, refused with {}; it must be at least \
                     1, refused with 429 or 503",
                    c.max_in_flight, c.status
                ));
            }
        }
        if let Some(limit) = &self.rate_limit {
            bucket_problems(
                "behaviour.rate_limit",
                limit,
                "omit rate_limit for unlimited",
                &mut problems,
            );
        }
        for (route, limit) in &self.route_limits {
            if !SERVICE_ROUTES.contains(&route.as_str()) {
                problems.push(format!(
                    "behaviour.route_limits names {route:?}, which is not a route of the \
                     service; the routes are {}",
                    SERVICE_ROUTES.join(", ")
                ));
            }
            bucket_problems(
                &format!("behaviour.route_limits.{route:?}"),
                limit,
                "leave the route out for no limit of its own",
                &mut problems,
            );
        }
        if let Some(slowing) = &self.slowing {
            if slowing.knee_per_sec == 0
                || !(slowing.factor.is_finite()
                    && (0.0..=MAX_SLOWING_FACTOR).contains(&slowing.factor))
            {
                problems.push(format!(
                    "behaviour.slowing is a knee of {} requests/s and a factor of {}; the knee \
                     must be at least 1 and the factor 0 to {MAX_SLOWING_FACTOR}",
                    slowing.knee_per_sec, slowing.factor
                ));
            }
        }
        let mut sum = 0.0;
        for (name, p) in self.faults.probabilities() {
            if !(0.0..=1.0).contains(&p) {
                problems.push(format!("behaviour.faults.{name} is {p}; it must be 0 to 1"));
            }
            sum += p;
        }
        if sum > 1.0 + 1e-9 {
            problems.push(format!(
                "behaviour.faults add up to {sum}; together they must be at most 1"
            ));
        }
        if !(1..=MAX_RETRY_AFTER_SECS).contains(&self.faults.retry_after_secs) {
            problems.push(format!(
                "behaviour.faults.retry_after_secs is {}; it must be 1 to {MAX_RETRY_AFTER_SECS} (a day)",
                self.faults.retry_after_secs
            ));
        }
        if self.faults.pad_answer_kib > MAX_PAD_KIB {
            problems.push(format!(
                "behaviour.faults.pad_answer_kib is {}; it must be at most {MAX_PAD_KIB} ({} GiB)",
                self.faults.pad_answer_kib,
                MAX_PAD_KIB / (1024 * 1024)
            ));
        }
        problems
    }

    fn describe(&self) -> String {
        let lists = match self.list_shape {
            ListShape::Bare => "bare lists".to_owned(),
            ListShape::Paginator => format!("paginator lists of {}", self.page_size),
            ListShape::Resource => format!("resource lists of {}", self.page_size),
        };
        let rate = match &self.rate_limit {
            Some(l) if l.headers && self.rate_headers == RateHeaderSet::ResetOnly => format!(
                "rate limit {}/s, burst {} (only X-RateLimit-Reset, on its 429s)",
                l.rate, l.burst
            ),
            Some(l) if l.headers => format!("rate limit {}/s, burst {}", l.rate, l.burst),
            Some(l) => format!(
                "rate limit {}/s, burst {} (without X-RateLimit headers)",
                l.rate, l.burst
            ),
            None => "unlimited rate".to_owned(),
        };
        let rate = if self.enforce_retry_after {
            format!("{rate}, Retry-After enforced")
        } else {
            rate
        };
        let rate = match self.retry_after_form {
            RetryAfterForm::Seconds => rate,
            RetryAfterForm::HttpDate => format!("{rate}, Retry-After as an HTTP date"),
        };
        let faults: Vec<String> = self
            .faults
            .probabilities()
            .iter()
            .filter(|(_, p)| *p > 0.0)
            .map(|(name, p)| format!("{name} {:.1}%", p * 100.0))
            .chain(
                (self.faults.retry_after_secs != default_retry_after_secs()).then(|| {
                    format!(
                        "Retry-After {} s on 429 and 503",
                        self.faults.retry_after_secs
                    )
                }),
            )
            .chain(
                (self.faults.http_429 > 0.0 && self.faults.http_429_claims_empty)
                    .then(|| "spurious 429s claim an empty bucket".to_owned()),
            )
            .chain((self.faults.latency_ms > 0).then(|| format!("+{} ms", self.faults.latency_ms)))
            .chain(
                self.faults
                    .route_latency_ms
                    .iter()
                    .map(|(route, ms)| format!("+{ms} ms on {route}")),
            )
            .chain(
                (self.faults.pad_answer_kib > 0)
                    .then(|| format!("answers padded by {} KiB", self.faults.pad_answer_kib)),
            )
            .collect();
        let faults = if faults.is_empty() {
            "no faults".to_owned()
        } else {
            format!("faults (seed {}): {}", self.faults.seed, faults.join(", "))
        };
        let transitions = if self.strict_transitions {
            "strict transitions"
        } else {
            "lenient transitions"
        };
        format!("{lists}, {transitions}, {rate}, {faults}")
    }
}

/// The out-of-range settings of the token bucket at `field`; `unlimited` says how to go
/// without it.
fn bucket_problems(
    field: &str,
    limit: &RateLimitConfig,
    unlimited: &str,
    problems: &mut Vec<String>,
) {
    if !(limit.rate.is_finite() && (0.001..=1_000_000.0).contains(&limit.rate)) {
        problems.push(format!(
            "{field}.rate is {}; it must be 0.001 to 1000000 requests/s ({unlimited})",
            limit.rate
        ));
    }
    if limit.burst == 0 {
        problems.push(format!("{field}.burst must be at least 1"));
    }
}

fn default_tokens() -> Vec<TokenEntry> {
    vec![TokenEntry {
        token: "sandbox-token".into(),
        user: 1,
    }]
}

fn default_organizations() -> Vec<OrganizationEntry> {
    vec![
        OrganizationEntry {
            id: 100,
            name: "Demo Motors".into(),
            users: vec![1],
        },
        OrganizationEntry {
            id: 200,
            name: "Other Dealer".into(),
            users: vec![],
        },
    ]
}

fn default_locations() -> Vec<LocationEntry> {
    vec![
        LocationEntry {
            id: 10,
            organization: 100,
        },
        LocationEntry {
            id: 11,
            organization: 100,
        },
        LocationEntry {
            id: 20,
            organization: 200,
        },
    ]
}

fn default_page_size() -> u32 {
    25
}

fn default_image_delay_ms() -> u64 {
    200
}

fn default_seed() -> u64 {
    1
}

fn default_retry_after_secs() -> u64 {
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_world_is_the_documented_one() {
        let c = SandboxConfig::default();
        assert!(c.problems().is_empty());
        let text = c.describe();
        assert!(text.contains("token \"sandbox-token\" is user 1"), "{text}");
        assert!(
            text.contains(
                "organization 100 \"Demo Motors\": locations [10, 11], users with access [1]"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "organization 200 \"Other Dealer\": locations [20], users with access []"
            ),
            "{text}"
        );
        assert!(text.contains("paginator lists of 25"), "{text}");
        assert!(text.contains("unlimited rate, no faults"), "{text}");
    }

    #[test]
    fn a_partial_file_keeps_the_default_world() {
        let c: SandboxConfig = toml::from_str(
            "[behaviour]\nlist_shape = \"resource\"\n[behaviour.rate_limit]\nrate = 50.0\nburst = 10\n",
        )
        .unwrap();
        assert_eq!(c.tokens, default_tokens());
        assert_eq!(c.behaviour.list_shape, ListShape::Resource);
        assert_eq!(c.behaviour.rate_limit.unwrap().burst, 10);
    }

    #[test]
    fn the_shipped_example_is_valid() {
        let c: SandboxConfig = toml::from_str(include_str!("../../config/sandbox.example.toml"))
            .expect("config/sandbox.example.toml parses");
        assert!(c.problems().is_empty(), "{:?}", c.problems());
        assert_eq!(c.behaviour.rate_limit.map(|r| r.burst), Some(10));
    }

    #[test]
    fn unknown_keys_are_errors() {
        let err = toml::from_str::<SandboxConfig>("[behaviour]\npage_sise = 3\n").unwrap_err();
        assert!(err.to_string().contains("page_sise"), "{err}");
    }

    #[test]
    fn every_problem_is_reported() {
        let mut c = SandboxConfig::default();
        c.locations.push(LocationEntry {
            id: 10,
            organization: 999,
        });
        c.behaviour.page_size = 0;
        c.behaviour.faults.http_500 = 0.7;
        c.behaviour.faults.drop = 0.6;
        let problems = c.problems();
        assert_eq!(problems.len(), 4, "{problems:#?}");
    }

    #[test]
    fn pushback_settings_default_to_a_lenient_service() {
        let b = Behaviour::default();
        assert!(!b.enforce_retry_after);
        assert_eq!(b.faults.retry_after_secs, 1);
        assert_eq!(b.faults.silence, 0.0);
        let c: SandboxConfig = toml::from_str(
            "[behaviour]\nenforce_retry_after = true\n\
             [behaviour.faults]\nsilence = 0.25\nretry_after_secs = 3600\n",
        )
        .unwrap();
        assert!(c.problems().is_empty(), "{:?}", c.problems());
        assert!(c.behaviour.enforce_retry_after);
        assert_eq!(c.behaviour.faults.retry_after_secs, 3600);
        let text = c.describe();
        assert!(
            text.contains("unlimited rate, Retry-After enforced"),
            "{text}"
        );
        assert!(text.contains("silence 25.0%"), "{text}");
        assert!(text.contains("Retry-After 3600 s on 429 and 503"), "{text}");
    }

    /// A sliding window, limits of the routes' own and answers slowing under load read from
    /// TOML, and survive the JSON of `PUT /__sandbox/behaviour` unchanged.
    #[test]
    fn the_service_flavours_read_from_toml_and_round_trip_as_json() {
        let c: SandboxConfig = toml::from_str(
            "[behaviour]\n\
             sliding_window = { requests = 100, window_secs = 60 }\n\
             slowing = { knee_per_sec = 20, factor = 0.5 }\n\
             [behaviour.route_limits.\"POST /v1/inventory/{id}/sold\"]\n\
             rate = 5.0\nburst = 5\n\
             [behaviour.route_limits.\"POST /v1/inventory\"]\n\
             rate = 50.0\nburst = 50\nheaders = false\n",
        )
        .unwrap();
        assert!(c.problems().is_empty(), "{:?}", c.problems());
        let b = &c.behaviour;
        assert_eq!(
            b.sliding_window,
            Some(SlidingWindowConfig {
                requests: 100,
                window_secs: 60
            })
        );
        assert_eq!(
            b.slowing,
            Some(SlowingConfig {
                knee_per_sec: 20,
                factor: 0.5
            })
        );
        assert_eq!(
            b.route_limits.get("POST /v1/inventory/{id}/sold"),
            Some(&RateLimitConfig {
                rate: 5.0,
                burst: 5,
                headers: true
            })
        );
        assert_eq!(
            b.route_limits.get("POST /v1/inventory").map(|l| l.headers),
            Some(false)
        );
        let json = serde_json::to_string(b).unwrap();
        assert_eq!(&serde_json::from_str::<Behaviour>(&json).unwrap(), b);
        // Left out, they are not written either.
        let none = serde_json::to_value(Behaviour::default()).unwrap();
        for field in ["sliding_window", "route_limits", "slowing"] {
            assert!(none.get(field).is_none(), "{field} in {none}");
        }
    }

    #[test]
    fn the_service_flavours_refuse_zero_and_absurd_values() {
        let bucket = |rate, burst| RateLimitConfig {
            rate,
            burst,
            headers: true,
        };
        let mut b = Behaviour {
            sliding_window: Some(SlidingWindowConfig {
                requests: 0,
                window_secs: 10,
            }),
            slowing: Some(SlowingConfig {
                knee_per_sec: 0,
                factor: 1.0,
            }),
            ..Behaviour::default()
        };
        b.route_limits
            .insert("POST /v1/inventory/{id}/sold".into(), bucket(0.0, 0));
        b.route_limits
            .insert("POST /v1/inventory/{id}/sell".into(), bucket(5.0, 5));
        assert_eq!(
            b.problems(),
            [
                "behaviour.sliding_window is 0 requests per 10 s; it must be 1 to 1000000 \
                 requests per 1 to 86400 s",
                "behaviour.route_limits names \"POST /v1/inventory/{id}/sell\", which is not a \
                 route of the service; the routes are GET /v1/inventory, POST /v1/inventory, \
                 GET /v1/inventory/{id}, POST /v1/inventory/{id}/sold, \
                 POST /v1/inventory/{id}/in-stock, GET /v1/applications/{app}/notifications, \
                 POST /v1/applications/{app}/notifications, \
                 POST /v1/applications/{app}/notifications/{id}/read",
                "behaviour.route_limits.\"POST /v1/inventory/{id}/sold\".rate is 0; it must be \
                 0.001 to 1000000 requests/s (leave the route out for no limit of its own)",
                "behaviour.route_limits.\"POST /v1/inventory/{id}/sold\".burst must be at least 1",
                "behaviour.slowing is a knee of 0 requests/s and a factor of 1; the knee must be \
                 at least 1 and the factor 0 to 1000",
            ]
        );
        b.route_limits.clear();
        b.sliding_window = Some(SlidingWindowConfig {
            requests: 5,
            window_secs: 86_401,
        });
        b.slowing = Some(SlowingConfig {
            knee_per_sec: 10,
            factor: f64::NAN,
        });
        assert_eq!(b.problems().len(), 2, "{:?}", b.problems());
        for factor in [-0.5, f64::INFINITY, 1000.5] {
            b.slowing = Some(SlowingConfig {
                knee_per_sec: 10,
                factor,
            });
            assert_eq!(b.problems().len(), 2, "{factor}: {:?}", b.problems());
        }
        b.sliding_window = Some(SlidingWindowConfig {
            requests: 1_000_000,
            window_secs: 86_400,
        });
        b.slowing = Some(SlowingConfig {
            knee_per_sec: 1,
            factor: 0.0,
        });
        assert!(b.problems().is_empty(), "{:?}", b.problems());
    }

    #[test]
    fn retry_after_is_one_second_to_a_day_and_silence_counts_in_the_sum() {
        let mut b = Behaviour::default();
        b.faults.retry_after_secs = 0;
        assert_eq!(
            b.problems(),
            ["behaviour.faults.retry_after_secs is 0; it must be 1 to 86400 (a day)"]
        );
        b.faults.retry_after_secs = 86_400;
        assert!(b.problems().is_empty());
        b.faults.retry_after_secs = 86_401;
        assert_eq!(b.problems().len(), 1, "{:?}", b.problems());
        b.faults.retry_after_secs = 1;
        b.faults.silence = 1.5;
        assert_eq!(
            b.problems(),
            [
                "behaviour.faults.silence is 1.5; it must be 0 to 1",
                "behaviour.faults add up to 1.5; together they must be at most 1",
            ]
        );
        b.faults.silence = 0.6;
        b.faults.http_500 = 0.6;
        assert_eq!(b.problems().len(), 1, "{:?}", b.problems());
    }
}
