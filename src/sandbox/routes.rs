//! The sandbox's HTTP surface: the service's routes, the gate every service request passes
//! (latency, token, announced Retry-After windows, rate limit, Accept, organization, faults),
//! and the `/__sandbox` routes that tests use to look inside and steer (and to change the
//! world behind the client's back: delete or edit a vehicle, as someone using the service's
//! own screens would).
//!
//! The gate owns the pushback a strict service gives: the token bucket with its
//! `X-RateLimit-*` headers (none at all without a limit), the buckets of single routes, the
//! fixed and sliding windows, the Retry-After of every 429 and 503, the windows those announce
//! (remembered per token; enforced with `behaviour.enforce_retry_after`), answers slowing under
//! load, and requests never answered (`silence`).

use super::config::{
    Behaviour, RateHeaderSet, RateLimitConfig, RetryAfterForm, SandboxConfig, SlidingWindowConfig,
    SlowingConfig,
};
use super::validate;
use super::world::{PageRequest, Refusal, World};
use axum::body::Bytes;
use axum::extract::{MatchedPath, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Extension, Json, Router};
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::Notify;

type Limiter = RateLimiter<NotKeyed, InMemoryState, DefaultClock, StateInformationMiddleware>;

/// Drops the request's connection without an answer when notified (see `sandbox::serve`).
#[derive(Clone)]
pub(crate) struct ConnectionKill(pub Arc<Notify>);

/// Who is calling, once the gate has let the request in.
#[derive(Clone, Copy)]
struct Caller {
    user: u64,
    organization_id: u64,
}

/// The fault drawn for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Http500,
    Http503,
    Http504,
    Http429,
    Drop,
    AckLost,
    Html200,
    Html403,
    WrongVehicle,
    IdOnly,
    Silence,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::Http500 => "http_500",
            Fault::Http503 => "http_503",
            Fault::Http504 => "http_504",
            Fault::Http429 => "http_429",
            Fault::Drop => "drop",
            Fault::AckLost => "ack_lost",
            Fault::Html200 => "html_200",
            Fault::Html403 => "html_403",
            Fault::WrongVehicle => "wrong_vehicle",
            Fault::IdOnly => "id_only",
            Fault::Silence => "silence",
        }
    }
}

/// Everything the handlers share.
pub(crate) struct Shared {
    config: SandboxConfig,
    /// token → user
    tokens: HashMap<String, u64>,
    /// organization → users with access
    access: HashMap<u64, HashSet<u64>>,
    world: Mutex<World>,
    behaviour: RwLock<Arc<Behaviour>>,
    limiters: RwLock<HashMap<String, Arc<Limiter>>>,
    /// route → token → the bucket `behaviour.route_limits` gives that token on that route.
    route_limiters: RwLock<HashMap<String, HashMap<String, Arc<Limiter>>>>,
    /// token → the start of its fixed window and the requests counted in it.
    fixed_windows: Mutex<HashMap<String, (Instant, u32)>>,
    /// token → when each request its sliding window accepted arrived, oldest first, those
    /// still in the window (and perhaps some that left it since the token last called).
    sliding_windows: Mutex<HashMap<String, VecDeque<Instant>>>,
    /// When each service request of the last second arrived, oldest first, of every token;
    /// kept while `behaviour.slowing` is on.
    arrivals: Mutex<VecDeque<Instant>>,
    /// token → the end of the last Retry-After sent to it (its answer's time plus the
    /// Retry-After). Kept across behaviour changes: a window announced is a promise made.
    retry_windows: Mutex<HashMap<String, Instant>>,
    clock: DefaultClock,
    rng: Mutex<fastrand::Rng>,
    stats: Stats,
    /// The list drills already played since the behaviour was put: pages failed, and whether
    /// the shift happened.
    drills_done: Mutex<(HashSet<u64>, bool)>,
}

#[derive(Default)]
struct Stats {
    /// (route, status) → count; status is the HTTP code or `dropped` / `ack_lost` / `silence`.
    requests: Mutex<BTreeMap<(String, String), u64>>,
    rate_limited: AtomicU64,
    /// Requests refused because they came back inside an announced Retry-After window.
    early: AtomicU64,
    faults: Mutex<BTreeMap<&'static str, u64>>,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
    /// Requests refused on arrival by `behaviour.concurrency`.
    over_concurrency: AtomicU64,
    /// Requests whose latency `behaviour.slowing` lengthened, and by how many milliseconds
    /// in all.
    slowed: AtomicU64,
    slowed_ms: AtomicU64,
}

/// Counts a request in flight for as long as it lives, even when its connection is dropped.
struct InFlight<'a>(&'a Stats);

impl<'a> InFlight<'a> {
    /// Counts the request in, with how many are in flight now (itself included).
    fn enter(stats: &'a Stats) -> (Self, u64) {
        let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
        (InFlight(stats), now)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A handler never panics while holding a lock; if one did, the data is still consistent
    // (every update is a single assignment), so serving on is right for a test double.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub(crate) fn new(config: SandboxConfig) -> Arc<Self> {
        let tokens = config
            .tokens
            .iter()
            .map(|t| (t.token.clone(), t.user))
            .collect();
        let access = config
            .organizations
            .iter()
            .map(|o| (o.id, o.users.iter().copied().collect()))
            .collect();
        let shared = Shared {
            world: Mutex::new(World::new(&config)),
            behaviour: RwLock::new(Arc::new(config.behaviour.clone())),
            limiters: RwLock::new(HashMap::new()),
            route_limiters: RwLock::new(HashMap::new()),
            fixed_windows: Mutex::new(HashMap::new()),
            sliding_windows: Mutex::new(HashMap::new()),
            arrivals: Mutex::new(VecDeque::new()),
            retry_windows: Mutex::new(HashMap::new()),
            clock: DefaultClock::default(),
            rng: Mutex::new(fastrand::Rng::with_seed(config.behaviour.faults.seed)),
            stats: Stats::default(),
            drills_done: Mutex::new((HashSet::new(), false)),
            tokens,
            access,
            config,
        };
        shared.apply_behaviour(shared.behaviour());
        Arc::new(shared)
    }

    fn behaviour(&self) -> Arc<Behaviour> {
        self.behaviour
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Installs a behaviour: fresh token buckets (the tokens' and the routes'), fresh fixed and
    /// sliding windows, and a reseeded fault RNG.
    fn apply_behaviour(&self, behaviour: Arc<Behaviour>) {
        let limiters = match &behaviour.rate_limit {
            Some(limit) => self.buckets(limit),
            None => HashMap::new(),
        };
        let route_limiters = behaviour
            .route_limits
            .iter()
            .map(|(route, limit)| (route.clone(), self.buckets(limit)))
            .collect();
        *lock_write(&self.limiters) = limiters;
        *lock_write(&self.route_limiters) = route_limiters;
        lock(&self.fixed_windows).clear();
        lock(&self.sliding_windows).clear();
        *lock(&self.rng) = fastrand::Rng::with_seed(behaviour.faults.seed);
        *lock(&self.drills_done) = (HashSet::new(), false);
        *lock_write(&self.behaviour) = behaviour;
    }

    /// A full bucket of `limit` for each token.
    fn buckets(&self, limit: &RateLimitConfig) -> HashMap<String, Arc<Limiter>> {
        self.tokens
            .keys()
            .map(|token| {
                // Behaviour::problems keeps the rate within what a Duration can hold.
                let period = Duration::try_from_secs_f64(1.0 / limit.rate)
                    .unwrap_or(Duration::from_secs(1000));
                let burst = NonZeroU32::new(limit.burst).unwrap_or(NonZeroU32::MIN);
                let quota = Quota::with_period(period)
                    .unwrap_or_else(|| Quota::per_second(NonZeroU32::MAX))
                    .allow_burst(burst);
                let limiter = RateLimiter::direct_with_clock(quota, self.clock.clone())
                    .with_middleware::<StateInformationMiddleware>();
                (token.clone(), Arc::new(limiter))
            })
            .collect()
    }

    fn reset(&self) {
        *lock(&self.world) = World::new(&self.config);
        lock(&self.stats.requests).clear();
        lock(&self.stats.faults).clear();
        self.stats.rate_limited.store(0, Ordering::SeqCst);
        self.stats.early.store(0, Ordering::SeqCst);
        self.stats.over_concurrency.store(0, Ordering::SeqCst);
        self.stats.slowed.store(0, Ordering::SeqCst);
        self.stats.slowed_ms.store(0, Ordering::SeqCst);
        lock(&self.retry_windows).clear();
        lock(&self.arrivals).clear();
        self.stats.max_in_flight.store(
            self.stats.in_flight.load(Ordering::SeqCst),
            Ordering::SeqCst,
        );
        self.apply_behaviour(Arc::new(self.config.behaviour.clone()));
    }

    fn record(&self, route: &str, status: &str) {
        *lock(&self.stats.requests)
            .entry((route.to_owned(), status.to_owned()))
            .or_default() += 1;
    }

    /// One roll of the RNG per request. `wrong_vehicle` and `id_only` are counted by the handler, and only
    /// when it used it: a vehicle write that had another vehicle to answer with (other
    /// requests ignore it, so there its share of the roll is no fault).
    fn draw_fault(&self, behaviour: &Behaviour) -> Option<Fault> {
        let f = &behaviour.faults;
        let table = [
            (Fault::Http500, f.http_500),
            (Fault::Http503, f.http_503),
            (Fault::Http504, f.http_504),
            (Fault::Http429, f.http_429),
            (Fault::Drop, f.drop),
            (Fault::AckLost, f.ack_lost),
            (Fault::Html200, f.html_200),
            (Fault::Html403, f.html_403),
            (Fault::WrongVehicle, f.wrong_vehicle),
            (Fault::IdOnly, f.id_only),
            (Fault::Silence, f.silence),
        ];
        if table.iter().all(|(_, p)| *p <= 0.0) {
            return None;
        }
        let roll = lock(&self.rng).f64();
        let mut edge = 0.0;
        for (fault, p) in table {
            edge += p;
            if roll < edge {
                if !matches!(fault, Fault::WrongVehicle | Fault::IdOnly) {
                    self.count_fault(fault);
                }
                return Some(fault);
            }
        }
        None
    }

    fn count_fault(&self, fault: Fault) {
        *lock(&self.stats.faults).entry(fault.name()).or_default() += 1;
    }

    /// Remembers that `token` was just told to come back in `secs` seconds.
    fn announce(&self, token: &str, secs: u64) {
        let until = Instant::now() + Duration::from_secs(secs);
        lock(&self.retry_windows).insert(token.to_owned(), until);
    }

    /// Counts a request of `token` in its fixed window: the requests used with it (None: the
    /// window is spent) and the time left of the window.
    fn count_in_window(
        &self,
        token: &str,
        window: &crate::sandbox::FixedWindowConfig,
    ) -> (Option<u32>, Duration) {
        let now = Instant::now();
        let period = Duration::from_secs(window.window_secs);
        let mut windows = lock(&self.fixed_windows);
        let (start, used) = windows.entry(token.to_owned()).or_insert((now, 0));
        let periods = now.duration_since(*start).as_secs() / window.window_secs;
        if periods > 0 {
            *start += period * u32::try_from(periods).unwrap_or(u32::MAX);
            *used = 0;
        }
        let left = (*start + period).saturating_duration_since(now);
        if *used < window.requests {
            *used += 1;
            (Some(*used), left)
        } else {
            (None, left)
        }
    }

    /// Counts a request of `token` in its sliding window: the requests left in the window
    /// with this one accepted, or, when the window is full (this one is not counted), how long
    /// until the oldest request accepted leaves it.
    fn count_in_sliding_window(
        &self,
        token: &str,
        window: &SlidingWindowConfig,
    ) -> Result<u32, Duration> {
        let now = Instant::now();
        let period = Duration::from_secs(window.window_secs);
        let mut windows = lock(&self.sliding_windows);
        let accepted = windows.entry(token.to_owned()).or_default();
        while accepted
            .front()
            .is_some_and(|at| now.duration_since(*at) >= period)
        {
            accepted.pop_front();
        }
        let used = u32::try_from(accepted.len()).unwrap_or(u32::MAX);
        if used < window.requests {
            accepted.push_back(now);
            Ok(window.requests - used - 1)
        } else {
            let oldest = accepted.front().copied().unwrap_or(now);
            Err((oldest + period).saturating_duration_since(now))
        }
    }

    /// Counts a service request arriving now: how many arrived in the last second, this one
    /// included.
    fn arrive(&self) -> u64 {
        let now = Instant::now();
        let mut arrivals = lock(&self.arrivals);
        while arrivals
            .front()
            .is_some_and(|at| now.duration_since(*at) >= Duration::from_secs(1))
        {
            arrivals.pop_front();
        }
        arrivals.push_back(now);
        arrivals.len() as u64
    }

    /// A request of `token` over a limit: counted as `rate_limited`, answered 429 with a
    /// Retry-After of `wait` (at least a second), and held to it when `enforce_retry_after`.
    fn refuse_over_limit(&self, token: &str, wait: Duration, form: RetryAfterForm) -> Response {
        self.stats.rate_limited.fetch_add(1, Ordering::SeqCst);
        let secs = whole_secs_up(wait).max(1);
        self.announce(token, secs);
        retry_after(error(429, vec!["Too Many Attempts.".into()]), secs, form)
    }

    /// How long is left of the window last announced to `token`, if it is still open.
    fn window_left(&self, token: &str, now: Instant) -> Option<Duration> {
        let mut windows = lock(&self.retry_windows);
        let until = *windows.get(token)?;
        if until > now {
            Some(until - now)
        } else {
            windows.remove(token);
            None
        }
    }

    fn state(&self) -> Value {
        let mut state = lock(&self.world).snapshot();
        if let (Value::Object(state), Value::Object(stats)) = (&mut state, self.stats()) {
            state.extend(stats);
        }
        state
    }

    /// The counters of [`Shared::state`] without the world: cheap enough to poll.
    fn stats(&self) -> Value {
        let mut stats = json!({});
        let mut requests: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        let mut total = 0;
        for ((route, status), count) in lock(&self.stats.requests).iter() {
            requests
                .entry(route.clone())
                .or_default()
                .insert(status.clone(), *count);
            total += count;
        }
        stats["requests"] = json!(requests);
        stats["total_requests"] = json!(total);
        stats["rate_limited"] = json!(self.stats.rate_limited.load(Ordering::SeqCst));
        stats["early"] = json!(self.stats.early.load(Ordering::SeqCst));
        stats["faults"] = json!(*lock(&self.stats.faults));
        stats["max_in_flight"] = json!(self.stats.max_in_flight.load(Ordering::SeqCst));
        stats["over_concurrency"] = json!(self.stats.over_concurrency.load(Ordering::SeqCst));
        stats["slowed"] = json!(self.stats.slowed.load(Ordering::SeqCst));
        stats["slowed_ms"] = json!(self.stats.slowed_ms.load(Ordering::SeqCst));
        stats["behaviour"] = json!(*self.behaviour());
        stats
    }
}

fn lock_write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(PoisonError::into_inner)
}

/// The router: service routes behind the gate, the `/__sandbox` routes beside it.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let service = Router::new()
        .route("/v1/inventory", get(list_vehicles).post(upsert_vehicle))
        .route("/v1/inventory/{id}", get(get_vehicle))
        .route("/v1/inventory/{id}/sold", post(mark_sold))
        .route("/v1/inventory/{id}/in-stock", post(mark_in_stock))
        .route(
            "/v1/applications/{app}/notifications",
            get(list_notifications).post(create_notification),
        )
        .route(
            "/v1/applications/{app}/notifications/{id}/read",
            post(read_notification),
        )
        .route_layer(middleware::from_fn_with_state(shared.clone(), gate));
    Router::new()
        .route("/__sandbox/state", get(sandbox_state))
        .route("/__sandbox/stats", get(sandbox_stats))
        .route("/__sandbox/reset", post(sandbox_reset))
        .route(
            "/__sandbox/behaviour",
            get(sandbox_behaviour).put(set_sandbox_behaviour),
        )
        .route(
            "/__sandbox/vehicles/{id}",
            delete(sandbox_delete_vehicle).patch(sandbox_edit_vehicle),
        )
        .merge(service)
        .fallback(unknown_path)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(shared)
}

/// The error shape of spec §7.
fn error(status: u16, messages: Vec<String>) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        Json(json!({"errors": {"code": status, "messages": messages}})),
    )
        .into_response()
}

fn refused(r: Refusal) -> Response {
    error(r.status, r.messages)
}

/// Adds a Retry-After of `secs` from now, written as `form` says (an HTTP date names the
/// moment rounded up to a whole second, so that a client never comes back early by reading it).
fn retry_after(mut response: Response, secs: u64, form: RetryAfterForm) -> Response {
    let value = match form {
        RetryAfterForm::Seconds => HeaderValue::from(secs),
        RetryAfterForm::HttpDate => {
            let at = UNIX_EPOCH + Duration::from_secs(unix_secs_up(Duration::from_secs(secs)));
            match HeaderValue::from_str(&httpdate::fmt_http_date(at)) {
                Ok(date) => date,
                // An HTTP date is ASCII: this arm is never taken.
                Err(_) => HeaderValue::from(secs),
            }
        }
    };
    response.headers_mut().insert(header::RETRY_AFTER, value);
    response
}

/// The Unix time `after` from now, in whole seconds rounded up.
fn unix_secs_up(after: Duration) -> u64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    whole_secs_up(since_epoch + after)
}

/// How long a request drawn for `silence` is held before its connection is dropped: longer
/// than any client waits.
const SILENCE: Duration = Duration::from_secs(3600);

/// Every service request passes here first, in the order a real deployment would apply:
/// concurrency, latency (stretched under load), authentication, announced Retry-After
/// windows, rate limits, content negotiation, organization access, faults.
async fn gate(
    State(shared): State<Arc<Shared>>,
    matched: MatchedPath,
    mut request: Request,
    next: Next,
) -> Response {
    let route = format!("{} {}", request.method(), matched.as_str());
    let (_in_flight, now_in_flight) = InFlight::enter(&shared.stats);
    // Every arrival is load, even one turned away at once.
    let slowing = shared.behaviour().slowing.map(|s| (s, shared.arrive()));
    // A service whose workers are all busy turns the request away on arrival.
    if let Some(c) = shared.behaviour().concurrency {
        if now_in_flight > u64::from(c.max_in_flight) {
            shared.stats.over_concurrency.fetch_add(1, Ordering::SeqCst);
            let status = if c.status == 503 { 503 } else { 429 };
            let text = if status == 503 {
                "Service Unavailable"
            } else {
                "Too Many Attempts."
            };
            let response = error(status, vec![text.into()]);
            shared.record(&route, response.status().as_str());
            return response;
        }
    }
    let mut latency_ms = {
        let faults = &shared.behaviour().faults;
        faults.latency_ms + faults.route_latency_ms.get(&route).copied().unwrap_or(0)
    };
    if let Some((slowing, arrived)) = slowing {
        let extra_ms = slowed_by(latency_ms, slowing, arrived);
        if extra_ms > 0 {
            shared.stats.slowed.fetch_add(1, Ordering::SeqCst);
            shared.stats.slowed_ms.fetch_add(extra_ms, Ordering::SeqCst);
            latency_ms = latency_ms.saturating_add(extra_ms);
        }
    }
    if latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(latency_ms)).await;
    }
    // The behaviour in force when the request reaches the service: one installed during the
    // latency applies to the requests already on their way, as a service that breaks does.
    let behaviour = shared.behaviour();
    let kill = request.extensions().get::<ConnectionKill>().cloned();
    let outcome = admit(&shared, &behaviour, &route, &mut request).await;
    let (response, rate_headers) = match outcome {
        Admission::Refused(response, rate) => (response, rate),
        Admission::Fault(fault @ (Fault::Drop | Fault::AckLost), _) => {
            if fault == Fault::AckLost {
                // The write is applied; only its answer is lost.
                let _applied = next.run(request).await;
            }
            shared.record(
                &route,
                if fault == Fault::Drop {
                    "dropped"
                } else {
                    "ack_lost"
                },
            );
            return drop_connection(kill).await;
        }
        Admission::Fault(Fault::Html200, _) => {
            // A portal in front of the service: nothing reaches it, no rate headers.
            shared.record(&route, "200");
            return captive_portal();
        }
        Admission::Fault(Fault::Html403, _) => {
            // A firewall in front of the service: nothing reaches it, no rate headers.
            shared.record(&route, "403");
            return firewall_page();
        }
        Admission::Fault(Fault::Silence, _) => {
            // Counted now: no answer will ever be.
            shared.record(&route, "silence");
            tokio::time::sleep(SILENCE).await;
            return drop_connection(kill).await;
        }
        Admission::Fault(fault @ (Fault::WrongVehicle | Fault::IdOnly), rate) => {
            // Taken by the vehicle writes' handlers; the others ignore it.
            request.extensions_mut().insert(AnswerAnother {
                id_only: fault == Fault::IdOnly,
            });
            (next.run(request).await, rate)
        }
        Admission::Fault(Fault::Http429, rate) if behaviour.faults.http_429_claims_empty => {
            // Another throttle's refusal: its own headers, saying its bucket is empty.
            let wait = behaviour.faults.retry_after_secs;
            let response = retry_after(
                error(429, vec!["Too Many Attempts.".into()]),
                wait,
                behaviour.retry_after_form,
            );
            let claim = RateHeaders {
                limit: rate.map_or(CLAIMED_BUCKET, |r| r.limit),
                remaining: 0,
                reset: Some(unix_secs_up(Duration::from_secs(wait))),
            };
            let response = with_rate_headers(response, claim, RateHeaderSet::All);
            shared.record(&route, response.status().as_str());
            return padded(response, behaviour.faults.pad_answer_kib);
        }
        Admission::Fault(fault, rate) => {
            let wait = behaviour.faults.retry_after_secs;
            let form = behaviour.retry_after_form;
            let response = match fault {
                Fault::Http500 => error(500, vec!["Server Error".into()]),
                Fault::Http503 => {
                    retry_after(error(503, vec!["Service Unavailable".into()]), wait, form)
                }
                Fault::Http504 => error(504, vec!["Gateway Timeout".into()]),
                // Fault::Http429; the others are taken above.
                _ => retry_after(error(429, vec!["Too Many Attempts.".into()]), wait, form),
            };
            (response, rate)
        }
        Admission::Admitted(rate) => (next.run(request).await, rate),
    };
    let headers_on = behaviour.fixed_window.is_some()
        || behaviour.sliding_window.is_some()
        || behaviour.rate_limit.as_ref().is_some_and(|l| l.headers)
        || behaviour
            .route_limits
            .get(&route)
            .is_some_and(|l| l.headers);
    let response = match rate_headers {
        Some(rate) if headers_on => with_rate_headers(response, rate, behaviour.rate_headers),
        _ => response,
    };
    shared.record(&route, response.status().as_str());
    padded(response, behaviour.faults.pad_answer_kib)
}

/// The latency `slowing` adds, in milliseconds, to a request of `latency_ms` that arrived
/// with `arrived` requests in the last second (itself included): `latency_ms × factor ×
/// excess / knee`, the excess being the arrivals beyond the knee.
fn slowed_by(latency_ms: u64, slowing: SlowingConfig, arrived: u64) -> u64 {
    let knee = u64::from(slowing.knee_per_sec.max(1));
    let excess = arrived.saturating_sub(knee);
    let extra = latency_ms as f64 * slowing.factor * excess as f64 / knee as f64;
    // A float cast saturates (and a NaN, which Behaviour::problems rules out, is 0).
    extra.round() as u64
}

/// Marks a vehicle write whose answer is to be another vehicle (fault `wrong_vehicle`), or
/// only its id (fault `id_only`).
#[derive(Clone, Copy)]
struct AnswerAnother {
    id_only: bool,
}

/// The answer of a write drawn for `wrong_vehicle` or `id_only`: the organization's vehicle
/// with the lowest id other than `written` (whole, or only `{"id": …}`), when there is one
/// (and the fault is counted); else `written`'s own.
fn answer_for(
    shared: &Shared,
    world: &World,
    another: Option<Extension<AnswerAnother>>,
    organization_id: u64,
    written: Value,
) -> Value {
    let Some(Extension(another)) = another else {
        return written;
    };
    let id = written.get("id").and_then(Value::as_u64).unwrap_or(0);
    match world.other_vehicle(organization_id, id) {
        Some(other) if another.id_only => {
            shared.count_fault(Fault::IdOnly);
            json!({ "id": other.get("id").cloned().unwrap_or(Value::Null) })
        }
        Some(other) => {
            shared.count_fault(Fault::WrongVehicle);
            other
        }
        None => written,
    }
}

/// A 200 sign-in page, as a captive portal or a proxy serves instead of the service.
fn captive_portal() -> Response {
    let page = "<!DOCTYPE html>\n<html><head><title>Sign in to continue</title></head>\n\
                <body><h1>Network sign-in</h1><p>Accept the terms to reach the internet.</p>\
                </body></html>\n";
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page,
    )
        .into_response()
}

/// A web application firewall's block page, in front of the service.
fn firewall_page() -> Response {
    let page = "<!DOCTYPE html>\n<html><head><title>403 Forbidden</title></head>\n\
                <body><h1>Access denied</h1><p>The request was blocked by the security \
                policy.</p></body></html>\n";
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page,
    )
        .into_response()
}

/// Spaces a padded answer is made of, lent (never copied) chunk by chunk.
static SPACES: [u8; 64 * 1024] = [b' '; 64 * 1024];

/// A 2xx answer followed by `kib` KiB of spaces (JSON allows whitespace after the value),
/// streamed without a Content-Length so that the size shows only by reading.
fn padded(response: Response, kib: u64) -> Response {
    if kib == 0 || !response.status().is_success() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let padding = PaddedBody {
        inner: Some(body),
        // Behaviour::problems keeps kib at most MAX_PAD_KIB, whose bytes a u64 holds.
        left: kib.saturating_mul(1024),
    };
    Response::from_parts(parts, axum::body::Body::new(padding))
}

/// The answer's own body, then the padding, one chunk of [`SPACES`] at a time as the
/// connection takes them: the sandbox never holds more than one chunk of it.
struct PaddedBody {
    inner: Option<axum::body::Body>,
    left: u64,
}

impl hyper::body::Body for PaddedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        use std::task::Poll;
        if let Some(inner) = self.inner.as_mut() {
            match std::pin::Pin::new(inner).poll_frame(cx) {
                Poll::Ready(None) => self.inner = None,
                other => return other,
            }
        }
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = usize::try_from(self.left).map_or(SPACES.len(), |left| left.min(SPACES.len()));
        self.left -= n as u64;
        Poll::Ready(Some(Ok(hyper::body::Frame::data(Bytes::from_static(
            &SPACES[..n],
        )))))
    }
}

/// The `X-RateLimit-*` headers of one answer; there are none without a rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RateHeaders {
    /// `X-RateLimit-Limit`: the bucket size.
    limit: u32,
    /// `X-RateLimit-Remaining`: tokens left.
    remaining: u32,
    /// `X-RateLimit-Reset`, on the bucket's 429s only: Unix time in whole seconds (rounded
    /// up) when the bucket has a token again.
    reset: Option<u64>,
}

enum Admission {
    Admitted(Option<RateHeaders>),
    Refused(Response, Option<RateHeaders>),
    Fault(Fault, Option<RateHeaders>),
}

/// Lets a request of `route` in, or refuses it, in the gate's order.
async fn admit(
    shared: &Shared,
    behaviour: &Behaviour,
    route: &str,
    request: &mut Request,
) -> Admission {
    let untouched = rate_headers_untouched(behaviour);
    let headers = request.headers();
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let Some((token, user)) = token.and_then(|t| Some((t.to_owned(), *shared.tokens.get(t)?)))
    else {
        return Admission::Refused(error(401, vec!["Unauthenticated.".into()]), untouched);
    };

    // A caller told to come back later is held to it before anything else: the same 429,
    // for the same moment, and neither its bucket nor the faults see the request.
    if behaviour.enforce_retry_after {
        if let Some(left) = shared.window_left(&token, Instant::now()) {
            shared.stats.early.fetch_add(1, Ordering::SeqCst);
            let response = retry_after(
                error(429, vec!["Too Many Attempts.".into()]),
                whole_secs_up(left).max(1),
                behaviour.retry_after_form,
            );
            // A window's early caller hears that nothing remains until the time it was given.
            let window = behaviour
                .fixed_window
                .map(|w| w.requests)
                .or(behaviour.sliding_window.map(|w| w.requests))
                .map(|limit| RateHeaders {
                    limit,
                    remaining: 0,
                    reset: Some(unix_secs_up(left)),
                });
            let rate = window.or(untouched.map(|r| RateHeaders { remaining: 0, ..r }));
            return Admission::Refused(response, rate);
        }
    }

    // The bucket comes right after authentication, as a throttle keyed by the caller would:
    // every request of a known token counts, whatever happens to it next.
    let limiter = shared
        .limiters
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&token)
        .cloned();
    let mut rate = untouched;
    if let (Some(limiter), Some(limit)) = (limiter, &behaviour.rate_limit) {
        match limiter.check() {
            Ok(snapshot) => {
                rate = Some(RateHeaders {
                    limit: limit.burst,
                    remaining: snapshot.remaining_burst_capacity(),
                    reset: None,
                });
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(shared.clock.now());
                let response = shared.refuse_over_limit(&token, wait, behaviour.retry_after_form);
                let rate = RateHeaders {
                    limit: limit.burst,
                    remaining: 0,
                    reset: Some(unix_secs_up(wait)),
                };
                return Admission::Refused(response, Some(rate));
            }
        }
    }

    // A route with a limit of its own: a bucket per token on it, refusing as the token's does.
    let route_limiter = shared
        .route_limiters
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(route)
        .and_then(|buckets| buckets.get(&token))
        .cloned();
    if let (Some(limiter), Some(limit)) = (route_limiter, behaviour.route_limits.get(route)) {
        match limiter.check() {
            Ok(snapshot) if limit.headers => {
                rate = Some(RateHeaders {
                    limit: limit.burst,
                    remaining: snapshot.remaining_burst_capacity(),
                    reset: None,
                });
            }
            // Without its headers the answer says what the token's bucket says.
            Ok(_) => {}
            Err(not_until) => {
                let wait = not_until.wait_time_from(shared.clock.now());
                let response = shared.refuse_over_limit(&token, wait, behaviour.retry_after_form);
                let own = RateHeaders {
                    limit: limit.burst,
                    remaining: 0,
                    reset: Some(unix_secs_up(wait)),
                };
                return Admission::Refused(response, if limit.headers { Some(own) } else { rate });
            }
        }
    }

    if let Some(window) = &behaviour.fixed_window {
        let (counted, left) = shared.count_in_window(&token, window);
        let headers = |remaining| RateHeaders {
            limit: window.requests,
            remaining,
            reset: Some(unix_secs_up(left)),
        };
        match counted {
            Some(used) => rate = Some(headers(window.requests - used)),
            None => {
                let response = shared.refuse_over_limit(&token, left, behaviour.retry_after_form);
                return Admission::Refused(response, Some(headers(0)));
            }
        }
    }

    if let Some(window) = &behaviour.sliding_window {
        match shared.count_in_sliding_window(&token, window) {
            Ok(remaining) => {
                rate = Some(RateHeaders {
                    limit: window.requests,
                    remaining,
                    reset: None,
                });
            }
            Err(left) => {
                let response = shared.refuse_over_limit(&token, left, behaviour.retry_after_form);
                let rate = RateHeaders {
                    limit: window.requests,
                    remaining: 0,
                    reset: Some(unix_secs_up(left)),
                };
                return Admission::Refused(response, Some(rate));
            }
        }
    }

    let headers = request.headers();
    if !accepts_json(headers) {
        return Admission::Refused(
            error(
                406,
                vec!["Send Accept: application/json; this service answers only JSON.".into()],
            ),
            rate,
        );
    }
    let organization_id = headers
        .get("x-service-organization-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let allowed = organization_id.filter(|org| {
        shared
            .access
            .get(org)
            .is_some_and(|users| users.contains(&user))
    });
    let Some(organization_id) = allowed else {
        return Admission::Refused(
            error(
                403,
                vec!["User does not have access to this organization.".into()],
            ),
            rate,
        );
    };
    request.extensions_mut().insert(Caller {
        user,
        organization_id,
    });
    match shared.draw_fault(behaviour) {
        Some(fault) => {
            if matches!(fault, Fault::Http429 | Fault::Http503) {
                shared.announce(&token, behaviour.faults.retry_after_secs);
            }
            Admission::Fault(fault, rate)
        }
        None => Admission::Admitted(rate),
    }
}

/// A duration in whole seconds, rounded up.
fn whole_secs_up(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// The headers of an answer that did not touch a bucket: the bucket size and a full bucket;
/// none when there is no limit (a service without one does not send them).
fn rate_headers_untouched(behaviour: &Behaviour) -> Option<RateHeaders> {
    behaviour.rate_limit.as_ref().map(|limit| RateHeaders {
        limit: limit.burst,
        remaining: limit.burst,
        reset: None,
    })
}

/// The bucket size a spurious 429 that claims an empty bucket names when there is no limit.
const CLAIMED_BUCKET: u32 = 60;

fn with_rate_headers(mut response: Response, rate: RateHeaders, set: RateHeaderSet) -> Response {
    let h = response.headers_mut();
    if set == RateHeaderSet::All {
        h.insert("x-ratelimit-limit", HeaderValue::from(rate.limit));
        h.insert("x-ratelimit-remaining", HeaderValue::from(rate.remaining));
    }
    if let Some(reset) = rate.reset {
        h.insert("x-ratelimit-reset", HeaderValue::from(reset));
    }
    response
}

/// Accept, when sent, must admit JSON: `application/json`, `application/*` or `*/*`. No Accept
/// header means any type will do (RFC 9110 §12.5.1).
fn accepts_json(headers: &HeaderMap) -> bool {
    let mut accept = headers.get_all(header::ACCEPT).iter().peekable();
    if accept.peek().is_none() {
        return true;
    }
    accept.any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',').any(|item| {
                let media = item.split(';').next().unwrap_or("").trim();
                matches!(media, "application/json" | "application/*" | "*/*")
            })
        })
    })
}

/// Ends the connection without a byte of answer. The connection task (`sandbox::serve`)
/// drops the connection on this signal, which also drops this future.
async fn drop_connection(kill: Option<ConnectionKill>) -> Response {
    match kill {
        Some(ConnectionKill(notify)) => {
            notify.notify_one();
            std::future::pending().await
        }
        // Only reachable when the router is served by something else than `sandbox::serve`.
        None => error(500, vec!["connection drop is not available here".into()]),
    }
}

/// A JSON request body: Content-Type must say JSON and the bytes must parse.
fn json_body(headers: &HeaderMap, body: &Bytes) -> Result<Value, Refusal> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(Refusal::new(
            400,
            "Send the body as JSON with Content-Type: application/json.",
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| Refusal::new(400, format!("The request body is not valid JSON: {e}.")))
}

fn page_request(query: &HashMap<String, String>, behaviour: &Behaviour) -> PageRequest {
    let number = |key: &str| query.get(key).and_then(|v| v.trim().parse::<u64>().ok());
    PageRequest {
        page: number("page").filter(|p| *p >= 1).unwrap_or(1),
        per_page: number("per_page")
            .filter(|p| *p >= 1)
            .map_or(u64::from(behaviour.page_size), |p| p.min(100)),
    }
}

/// The absolute address of page `n` of this list, on the host the client called.
fn page_url(headers: &HeaderMap, uri: &axum::http::Uri, per_page: u64) -> impl Fn(u64) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1")
        .to_owned();
    // The path as the client sent it, still percent-encoded.
    let path = uri.path().to_owned();
    move |n| format!("http://{host}{path}?page={n}&per_page={per_page}")
}

fn id_of(raw: &str) -> Result<u64, Refusal> {
    raw.parse()
        .map_err(|_| Refusal::new(404, format!("Vehicle {raw} not found.")))
}

async fn list_vehicles(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<HashMap<String, String>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let behaviour = shared.behaviour();
    let page = page_request(&query, &behaviour);
    let number = page.page;
    let drills = &behaviour.list_drills;
    if drills.fail_pages.contains(&number) && lock(&shared.drills_done).0.insert(number) {
        return error(500, vec!["Server Error (a planted list drill).".into()]);
    }
    let url = page_url(&headers, &uri, page.per_page);
    let mut world = lock(&shared.world);
    let list = world.list_vehicles(caller.organization_id, behaviour.list_shape, page, &url);
    if let Some(shift) = drills.shift.filter(|s| s.after_page == number) {
        let mut done = lock(&shared.drills_done);
        if !done.1 {
            done.1 = true;
            for id in world.first_ids(caller.organization_id, shift.delete_first) {
                // Listed a moment ago under the same lock: it is there to remove.
                let _ = world.remove(id);
            }
        }
    }
    Json(list).into_response()
}

async fn upsert_vehicle(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    another: Option<Extension<AnswerAnother>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw = match json_body(&headers, &body) {
        Ok(raw) => raw,
        Err(r) => return refused(r),
    };
    let org = caller.organization_id;
    let delay = Duration::from_millis(shared.behaviour().image_delay_ms);
    let mut world = lock(&shared.world);
    let vehicle = match validate::vehicle_body(&raw, &|loc| world.has_location(org, loc)) {
        Ok(vehicle) => vehicle,
        Err(messages) => return error(422, messages),
    };
    let (answer, created) = world.upsert(org, &raw, vehicle, delay);
    let answer = answer_for(&shared, &world, another, org, answer);
    if created {
        (StatusCode::CREATED, Json(answer)).into_response()
    } else {
        Json(answer).into_response()
    }
}

async fn get_vehicle(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Response {
    let id = match id_of(&id) {
        Ok(id) => id,
        Err(r) => return refused(r),
    };
    let result = lock(&shared.world).vehicle(caller.organization_id, id);
    result.map_or_else(refused, |v| Json(v).into_response())
}

async fn mark_sold(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    another: Option<Extension<AnswerAnother>>,
    Path(id): Path<String>,
) -> Response {
    transition(&shared, caller, another, &id, true)
}

async fn mark_in_stock(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    another: Option<Extension<AnswerAnother>>,
    Path(id): Path<String>,
) -> Response {
    transition(&shared, caller, another, &id, false)
}

fn transition(
    shared: &Shared,
    caller: Caller,
    another: Option<Extension<AnswerAnother>>,
    id: &str,
    sold: bool,
) -> Response {
    let id = match id_of(id) {
        Ok(id) => id,
        Err(r) => return refused(r),
    };
    let strict = shared.behaviour().strict_transitions;
    let org = caller.organization_id;
    let mut world = lock(&shared.world);
    match world.transition(org, id, sold, strict) {
        Ok(v) => Json(answer_for(shared, &world, another, org, v)).into_response(),
        Err(r) => refused(r),
    }
}

async fn list_notifications(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let behaviour = shared.behaviour();
    let page = page_request(&query, &behaviour);
    let url = page_url(&headers, &uri, page.per_page);
    let list =
        lock(&shared.world).list_notifications(caller.user, &app, behaviour.list_shape, page, &url);
    Json(list).into_response()
}

async fn create_notification(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw = match json_body(&headers, &body) {
        Ok(raw) => raw,
        Err(r) => return refused(r),
    };
    match validate::notification_body(&raw) {
        Ok(body) => {
            let answer = lock(&shared.world).create_notification(caller.user, &app, body);
            (StatusCode::CREATED, Json(answer)).into_response()
        }
        Err(messages) => error(422, messages),
    }
}

async fn read_notification(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path((app, id)): Path<(String, String)>,
) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return error(404, vec![format!("Notification {id} not found.")]);
    };
    let result = lock(&shared.world).read_notification(caller.user, &app, id);
    result.map_or_else(refused, |n| Json(n).into_response())
}

async fn unknown_path(request: Request) -> Response {
    error(
        404,
        vec![format!(
            "No endpoint {} {}.",
            request.method(),
            request.uri().path()
        )],
    )
}

async fn method_not_allowed(request: Request) -> Response {
    error(
        405,
        vec![format!(
            "{} is not allowed on {}.",
            request.method(),
            request.uri().path()
        )],
    )
}

async fn sandbox_state(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(shared.state())
}

async fn sandbox_stats(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(shared.stats())
}

async fn sandbox_reset(State(shared): State<Arc<Shared>>) -> StatusCode {
    shared.reset();
    StatusCode::NO_CONTENT
}

async fn sandbox_delete_vehicle(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Response {
    let result = id_of(&id).and_then(|id| lock(&shared.world).remove(id));
    result.map_or_else(refused, |v| Json(v).into_response())
}

async fn sandbox_edit_vehicle(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let patch = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(patch)) => patch,
        Ok(_) => return error(400, vec!["The edit must be a JSON object.".into()]),
        Err(e) => return error(400, vec![format!("The edit is not JSON: {e}.")]),
    };
    let result = id_of(&id).and_then(|id| lock(&shared.world).edit(id, &patch));
    result.map_or_else(refused, |v| Json(v).into_response())
}

async fn sandbox_behaviour(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(json!(*shared.behaviour()))
}

async fn set_sandbox_behaviour(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let behaviour: Behaviour = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => return error(400, vec![format!("Not a behaviour: {e}.")]),
    };
    let problems = behaviour.problems();
    if !problems.is_empty() {
        return error(422, problems);
    }
    shared.apply_behaviour(Arc::new(behaviour));
    Json(json!(*shared.behaviour())).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{Faults, RateLimitConfig, RunningSandbox};

    async fn sandbox(behaviour: Behaviour) -> RunningSandbox {
        RunningSandbox::on_loopback(behaviour).await.unwrap()
    }

    fn http() -> reqwest::Client {
        crate::api::install_crypto_provider();
        reqwest::Client::new()
    }

    /// `GET /v1/inventory` as organization 100 with the default token.
    async fn list(http: &reqwest::Client, sb: &RunningSandbox) -> reqwest::Response {
        http.get(format!("{}/v1/inventory", sb.base_url()))
            .header(header::AUTHORIZATION, "Bearer sandbox-token")
            .header("x-service-organization-id", "100")
            .send()
            .await
            .unwrap()
    }

    fn header_of<'a>(response: &'a reqwest::Response, name: &str) -> Option<&'a str> {
        response.headers().get(name).map(|v| v.to_str().unwrap())
    }

    async fn stats(http: &reqwest::Client, sb: &RunningSandbox) -> Value {
        http.get(format!("{}/__sandbox/stats", sb.base_url()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    async fn put_behaviour(http: &reqwest::Client, sb: &RunningSandbox, behaviour: &Behaviour) {
        let response = http
            .put(format!("{}/__sandbox/behaviour", sb.base_url()))
            .json(behaviour)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }

    fn unix_now() -> u64 {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    /// A spurious 429 announces a window; coming back inside it is refused for the same
    /// moment (not a new window), without taking a token; after it, the request passes.
    #[tokio::test]
    async fn a_request_inside_an_announced_window_is_refused_until_it_ends() {
        let limit = RateLimitConfig {
            rate: 0.001,
            burst: 5,
            headers: true,
        };
        let mut behaviour = Behaviour {
            enforce_retry_after: true,
            rate_limit: Some(limit),
            faults: Faults {
                http_429: 1.0,
                ..Faults::default()
            },
            ..Behaviour::default()
        };
        let sb = sandbox(behaviour.clone()).await;
        let http = http();
        let first = list(&http, &sb).await;
        let told = Instant::now();
        assert_eq!(first.status(), 429);
        assert_eq!(header_of(&first, header::RETRY_AFTER.as_str()), Some("1"));
        // The faults stop; the window announced stays (fresh buckets of 5).
        behaviour.faults.http_429 = 0.0;
        put_behaviour(&http, &sb, &behaviour).await;

        tokio::time::sleep_until((told + Duration::from_millis(500)).into()).await;
        let early = list(&http, &sb).await;
        assert_eq!(early.status(), 429);
        assert_eq!(header_of(&early, "retry-after"), Some("1"));
        assert_eq!(header_of(&early, "x-ratelimit-remaining"), Some("0"));
        assert_eq!(header_of(&early, "x-ratelimit-reset"), None);

        // Past the first window; a window renewed by the early request would still be open.
        tokio::time::sleep_until((told + Duration::from_millis(1050)).into()).await;
        let after = list(&http, &sb).await;
        assert_eq!(after.status(), 200);
        assert_eq!(
            header_of(&after, "x-ratelimit-remaining"),
            Some("4"),
            "the early request took no token"
        );
        let st = stats(&http, &sb).await;
        assert_eq!(st["early"], 1);
        assert_eq!(st["rate_limited"], 0);
        assert_eq!(st["faults"], json!({"http_429": 1}));
        assert_eq!(st["requests"]["GET /v1/inventory"]["429"], 2);
    }

    /// The bucket's own 429 says when it has a token again (X-RateLimit-Reset, Unix seconds)
    /// and announces a window like any Retry-After; without enforcement nothing is early.
    #[tokio::test]
    async fn the_buckets_429_carries_its_reset_and_opens_a_window() {
        let behaviour = Behaviour {
            enforce_retry_after: true,
            rate_limit: Some(RateLimitConfig {
                rate: 1.0,
                burst: 1,
                headers: true,
            }),
            ..Behaviour::default()
        };
        let sb = sandbox(behaviour.clone()).await;
        let http = http();
        assert_eq!(list(&http, &sb).await.status(), 200);
        let before = unix_now();
        let limited = list(&http, &sb).await;
        let told = Instant::now();
        assert_eq!(limited.status(), 429);
        assert_eq!(header_of(&limited, "retry-after"), Some("1"));
        assert_eq!(header_of(&limited, "x-ratelimit-remaining"), Some("0"));
        let reset: u64 = header_of(&limited, "x-ratelimit-reset")
            .expect("X-RateLimit-Reset on the bucket's 429")
            .parse()
            .unwrap();
        // A token again about a second after the 429, rounded up to a whole second.
        let after = unix_now();
        assert!(
            (before + 1..=after + 2).contains(&reset),
            "{before} + 1 ≤ {reset} ≤ {after} + 2"
        );
        let early = list(&http, &sb).await;
        assert_eq!(early.status(), 429);
        assert_eq!(header_of(&early, "x-ratelimit-reset"), None);
        tokio::time::sleep_until((told + Duration::from_millis(1050)).into()).await;
        assert_eq!(list(&http, &sb).await.status(), 200);
        let st = stats(&http, &sb).await;
        assert_eq!(
            (st["rate_limited"].clone(), st["early"].clone()),
            (json!(1), json!(1))
        );

        // Not enforced: the next request inside the window reaches the bucket.
        put_behaviour(
            &http,
            &sb,
            &Behaviour {
                enforce_retry_after: false,
                ..behaviour
            },
        )
        .await;
        assert_eq!(list(&http, &sb).await.status(), 200);
        assert_eq!(list(&http, &sb).await.status(), 429);
        assert_eq!(list(&http, &sb).await.status(), 429);
        let st = stats(&http, &sb).await;
        assert_eq!(
            (st["rate_limited"].clone(), st["early"].clone()),
            (json!(3), json!(1))
        );
    }

    /// No limit, no `X-RateLimit-*`: not on a success, a 401 or a 429 fault. With a limit
    /// whose headers are off, none either, not even the Reset of the bucket's 429.
    #[tokio::test]
    async fn no_rate_headers_without_a_limit_or_with_them_off() {
        let sb = sandbox(Behaviour::default()).await;
        let http = http();
        let rate_headers = |r: &reqwest::Response| {
            r.headers()
                .keys()
                .filter(|k| k.as_str().starts_with("x-ratelimit"))
                .count()
        };
        let ok = list(&http, &sb).await;
        assert_eq!((ok.status().as_u16(), rate_headers(&ok)), (200, 0));
        let anonymous = http
            .get(format!("{}/v1/inventory", sb.base_url()))
            .send()
            .await
            .unwrap();
        assert_eq!(
            (anonymous.status().as_u16(), rate_headers(&anonymous)),
            (401, 0)
        );
        let mut behaviour = Behaviour {
            faults: Faults {
                http_429: 1.0,
                retry_after_secs: 3600,
                ..Faults::default()
            },
            ..Behaviour::default()
        };
        put_behaviour(&http, &sb, &behaviour).await;
        let spurious = list(&http, &sb).await;
        assert_eq!(
            (spurious.status().as_u16(), rate_headers(&spurious)),
            (429, 0)
        );
        assert_eq!(header_of(&spurious, "retry-after"), Some("3600"));

        behaviour.faults = Faults::default();
        behaviour.rate_limit = Some(RateLimitConfig {
            rate: 0.001,
            burst: 1,
            headers: false,
        });
        put_behaviour(&http, &sb, &behaviour).await;
        let ok = list(&http, &sb).await;
        assert_eq!((ok.status().as_u16(), rate_headers(&ok)), (200, 0));
        let limited = list(&http, &sb).await;
        assert_eq!(
            (limited.status().as_u16(), rate_headers(&limited)),
            (429, 0)
        );
    }

    /// `silence`: no byte of answer, so the client's own timeout ends the call; the sandbox
    /// goes on serving everything else meanwhile.
    #[tokio::test]
    async fn a_silent_request_is_never_answered() {
        let sb = sandbox(Behaviour {
            faults: Faults {
                silence: 1.0,
                ..Faults::default()
            },
            ..Behaviour::default()
        })
        .await;
        crate::api::install_crypto_provider();
        let impatient = reqwest::Client::builder()
            .timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let started = Instant::now();
        let err = impatient
            .get(format!("{}/v1/inventory", sb.base_url()))
            .header(header::AUTHORIZATION, "Bearer sandbox-token")
            .header("x-service-organization-id", "100")
            .send()
            .await
            .unwrap_err();
        assert!(err.is_timeout(), "{err}");
        assert!(started.elapsed() < Duration::from_secs(2));
        let http = http();
        let st = stats(&http, &sb).await;
        assert_eq!(st["faults"], json!({"silence": 1}));
        assert_eq!(st["requests"]["GET /v1/inventory"]["silence"], 1);
        put_behaviour(&http, &sb, &Behaviour::default()).await;
        assert_eq!(list(&http, &sb).await.status(), 200);
    }

    /// "500 for a while": a behaviour put while requests are in flight applies to them
    /// (they reach the service after it), and putting the old one back heals the service.
    #[tokio::test]
    async fn server_errors_for_a_while_reach_requests_in_flight() {
        let slow = Behaviour {
            faults: Faults {
                latency_ms: 300,
                ..Faults::default()
            },
            ..Behaviour::default()
        };
        let failing = Behaviour {
            faults: Faults {
                http_500: 1.0,
                ..slow.faults.clone()
            },
            ..slow.clone()
        };
        let sb = Arc::new(sandbox(slow.clone()).await);
        let http = http();
        let batch = |n: usize| {
            let mut calls = tokio::task::JoinSet::new();
            for _ in 0..n {
                let (http, sb) = (http.clone(), sb.clone());
                calls.spawn(async move { list(&http, &sb).await.status().as_u16() });
            }
            calls
        };
        for (behaviour, status) in [(&failing, 500), (&slow, 200)] {
            let mut calls = batch(4);
            tokio::time::sleep(Duration::from_millis(100)).await;
            put_behaviour(&http, &sb, behaviour).await;
            let mut statuses = Vec::new();
            while let Some(answer) = calls.join_next().await {
                statuses.push(answer.unwrap());
            }
            assert_eq!(statuses, [status; 4]);
        }
        let st = stats(&http, &sb).await;
        assert_eq!(st["faults"], json!({"http_500": 4}));
        assert!(st["max_in_flight"].as_u64().unwrap() >= 4, "{st}");
    }

    /// A concurrency limit: with two requests being served, the third and fourth are turned
    /// away at once with the configured status and no header; once they are answered, the
    /// next ones are served.
    #[tokio::test]
    async fn a_concurrency_limit_refuses_what_arrives_beyond_it() {
        for status in [429u16, 503] {
            let busy = Behaviour {
                faults: Faults {
                    latency_ms: 300,
                    ..Faults::default()
                },
                concurrency: Some(crate::sandbox::ConcurrencyConfig {
                    max_in_flight: 2,
                    status,
                }),
                ..Behaviour::default()
            };
            let sb = Arc::new(sandbox(busy).await);
            let http = http();
            let mut calls = tokio::task::JoinSet::new();
            for _ in 0..4 {
                let (http, sb) = (http.clone(), sb.clone());
                calls.spawn(async move {
                    let answer = list(&http, &sb).await;
                    let limited = answer.headers().contains_key("retry-after")
                        || answer.headers().contains_key("x-ratelimit-remaining");
                    (answer.status().as_u16(), limited)
                });
            }
            let mut statuses = Vec::new();
            while let Some(answer) = calls.join_next().await {
                let (code, limited) = answer.unwrap();
                assert!(!limited, "no header on {code}");
                statuses.push(code);
            }
            statuses.sort_unstable();
            assert_eq!(statuses, [200, 200, status, status]);
            assert_eq!(
                list(&http, &sb).await.status(),
                200,
                "served once the others are"
            );
            let st = stats(&http, &sb).await;
            assert_eq!(st["over_concurrency"], 2, "{st}");
        }
    }

    /// `method path` as organization 100 with the default token, no body.
    async fn call(
        http: &reqwest::Client,
        sb: &RunningSandbox,
        method: reqwest::Method,
        path: &str,
    ) -> reqwest::Response {
        http.request(method, format!("{}{path}", sb.base_url()))
            .header(header::AUTHORIZATION, "Bearer sandbox-token")
            .header("x-service-organization-id", "100")
            .send()
            .await
            .unwrap()
    }

    /// A sliding window: room comes back as each accepted request leaves the window, one at
    /// a time, and a refusal says when the oldest leaves (Retry-After and Reset). An early
    /// caller, when Retry-After is enforced, hears the window's limit with nothing left.
    #[tokio::test]
    async fn a_sliding_window_gives_room_back_as_each_request_leaves_it() {
        let window = |requests, window_secs| {
            Some(crate::sandbox::SlidingWindowConfig {
                requests,
                window_secs,
            })
        };
        let sb = sandbox(Behaviour {
            sliding_window: window(3, 2),
            ..Behaviour::default()
        })
        .await;
        let http = http();
        let started = Instant::now();
        let before = unix_now();
        let first = list(&http, &sb).await;
        let first_in = Instant::now();
        let after = unix_now();
        assert_eq!(first.status(), 200);
        assert_eq!(header_of(&first, "x-ratelimit-limit"), Some("3"));
        assert_eq!(header_of(&first, "x-ratelimit-remaining"), Some("2"));
        assert_eq!(header_of(&first, "x-ratelimit-reset"), None);
        tokio::time::sleep_until((started + Duration::from_millis(700)).into()).await;
        for remaining in ["1", "0"] {
            let ok = list(&http, &sb).await;
            assert_eq!(ok.status(), 200);
            assert_eq!(header_of(&ok, "x-ratelimit-remaining"), Some(remaining));
        }
        let full = list(&http, &sb).await;
        assert_eq!(full.status(), 429);
        // The first leaves the window about 1.3 s from now: 2 s, rounded up.
        assert_eq!(header_of(&full, "retry-after"), Some("2"));
        assert_eq!(header_of(&full, "x-ratelimit-limit"), Some("3"));
        assert_eq!(header_of(&full, "x-ratelimit-remaining"), Some("0"));
        let reset: u64 = header_of(&full, "x-ratelimit-reset")
            .expect("X-RateLimit-Reset on the window's 429")
            .parse()
            .unwrap();
        assert!(
            (before + 2..=after + 3).contains(&reset),
            "{before} + 2 ≤ {reset} ≤ {after} + 3"
        );

        // The first has left: room for one, not for three as a new fixed window would give.
        tokio::time::sleep_until((first_in + Duration::from_millis(2050)).into()).await;
        let again = list(&http, &sb).await;
        assert_eq!(again.status(), 200);
        assert_eq!(header_of(&again, "x-ratelimit-remaining"), Some("0"));
        let full = list(&http, &sb).await;
        assert_eq!(full.status(), 429);
        assert_eq!(header_of(&full, "retry-after"), Some("1"));
        let st = stats(&http, &sb).await;
        assert_eq!(st["rate_limited"], 2, "{st}");
        assert_eq!(
            st["requests"]["GET /v1/inventory"],
            json!({"200": 4, "429": 2})
        );

        // Enforced (after a reset, which forgets the windows announced so far): the request
        // after the refusal is early, told the same moment.
        let reset = http
            .post(format!("{}/__sandbox/reset", sb.base_url()))
            .send()
            .await
            .unwrap();
        assert_eq!(reset.status(), 204);
        put_behaviour(
            &http,
            &sb,
            &Behaviour {
                sliding_window: window(1, 60),
                enforce_retry_after: true,
                ..Behaviour::default()
            },
        )
        .await;
        let ok = list(&http, &sb).await;
        assert_eq!(ok.status(), 200);
        assert_eq!(header_of(&ok, "x-ratelimit-remaining"), Some("0"));
        let full = list(&http, &sb).await;
        assert_eq!(full.status(), 429);
        assert_eq!(header_of(&full, "retry-after"), Some("60"));
        let early = list(&http, &sb).await;
        assert_eq!(early.status(), 429);
        assert_eq!(header_of(&early, "retry-after"), Some("60"));
        assert_eq!(header_of(&early, "x-ratelimit-limit"), Some("1"));
        assert_eq!(header_of(&early, "x-ratelimit-remaining"), Some("0"));
        assert!(header_of(&early, "x-ratelimit-reset").is_some());
        let st = stats(&http, &sb).await;
        assert_eq!(
            (st["rate_limited"].clone(), st["early"].clone()),
            (json!(1), json!(1))
        );
    }

    /// A limit of the sales route's own ("sales 5/s, creates and updates 50/s"): a bucket per
    /// token on that route, after the token's own bucket, whose 429 is the token bucket's
    /// (Retry-After, announced, `rate_limited`); other routes are not held by it. With its
    /// headers the route's answers speak of its bucket; without, of the token's.
    #[tokio::test]
    async fn a_route_with_a_limit_of_its_own_refuses_beyond_it() {
        let sold = "POST /v1/inventory/{id}/sold";
        let limits = |headers| Behaviour {
            rate_limit: Some(RateLimitConfig {
                rate: 0.001,
                burst: 100,
                headers: true,
            }),
            route_limits: [(
                sold.to_owned(),
                RateLimitConfig {
                    rate: 0.001,
                    burst: 2,
                    headers,
                },
            )]
            .into(),
            ..Behaviour::default()
        };
        let sb = sandbox(limits(true)).await;
        let http = http();
        let sell = || call(&http, &sb, reqwest::Method::POST, "/v1/inventory/1/sold");
        for remaining in ["1", "0"] {
            // No vehicle 1: the route's handler answers 404, past the gate.
            let ok = sell().await;
            assert_eq!(ok.status(), 404);
            assert_eq!(header_of(&ok, "x-ratelimit-limit"), Some("2"));
            assert_eq!(header_of(&ok, "x-ratelimit-remaining"), Some(remaining));
        }
        let limited = sell().await;
        assert_eq!(limited.status(), 429);
        assert_eq!(header_of(&limited, "retry-after"), Some("1000"));
        assert_eq!(header_of(&limited, "x-ratelimit-limit"), Some("2"));
        assert_eq!(header_of(&limited, "x-ratelimit-remaining"), Some("0"));
        let reset: u64 = header_of(&limited, "x-ratelimit-reset")
            .expect("X-RateLimit-Reset on the route's 429")
            .parse()
            .unwrap();
        assert!(
            (unix_now() + 990..=unix_now() + 1001).contains(&reset),
            "{reset}"
        );
        // Another route: only the token's bucket, which took every request so far.
        let other = call(
            &http,
            &sb,
            reqwest::Method::POST,
            "/v1/inventory/1/in-stock",
        )
        .await;
        assert_eq!(other.status(), 404);
        assert_eq!(header_of(&other, "x-ratelimit-limit"), Some("100"));
        assert_eq!(header_of(&other, "x-ratelimit-remaining"), Some("96"));
        assert_eq!(list(&http, &sb).await.status(), 200);
        let st = stats(&http, &sb).await;
        assert_eq!(st["rate_limited"], 1, "{st}");
        assert_eq!(st["requests"][sold], json!({"404": 2, "429": 1}));

        // Its headers off: its answers, its 429 too, carry the token's bucket.
        put_behaviour(&http, &sb, &limits(false)).await;
        for remaining in ["99", "98"] {
            let ok = sell().await;
            assert_eq!(ok.status(), 404);
            assert_eq!(header_of(&ok, "x-ratelimit-limit"), Some("100"));
            assert_eq!(header_of(&ok, "x-ratelimit-remaining"), Some(remaining));
        }
        let limited = sell().await;
        assert_eq!(limited.status(), 429);
        assert_eq!(header_of(&limited, "retry-after"), Some("1000"));
        assert_eq!(header_of(&limited, "x-ratelimit-limit"), Some("100"));
        assert_eq!(header_of(&limited, "x-ratelimit-remaining"), Some("97"));
        assert_eq!(header_of(&limited, "x-ratelimit-reset"), None);
        let st = stats(&http, &sb).await;
        assert_eq!(st["rate_limited"], 2, "{st}");

        // A reset puts back the config's behaviour, the route's full bucket with it.
        let reset = http
            .post(format!("{}/__sandbox/reset", sb.base_url()))
            .send()
            .await
            .unwrap();
        assert_eq!(reset.status(), 204);
        assert_eq!(header_of(&sell().await, "x-ratelimit-remaining"), Some("1"));
    }

    /// Answers slow down under load: six requests at once on a knee of 2 a second with a
    /// factor of 1 take 100 ms, 100 ms, then 1.5, 2, 2.5 and 3 times that (400 ms added in
    /// all), and none is refused; a second later, one alone takes its 100 ms again.
    #[tokio::test]
    async fn answers_slow_down_beyond_the_knee() {
        let sb = Arc::new(
            sandbox(Behaviour {
                faults: Faults {
                    latency_ms: 100,
                    ..Faults::default()
                },
                slowing: Some(crate::sandbox::SlowingConfig {
                    knee_per_sec: 2,
                    factor: 1.0,
                }),
                ..Behaviour::default()
            })
            .await,
        );
        let http = http();
        let started = Instant::now();
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..6 {
            let (http, sb) = (http.clone(), sb.clone());
            calls.spawn(async move {
                let sent = Instant::now();
                let status = list(&http, &sb).await.status().as_u16();
                (status, sent.elapsed())
            });
        }
        let mut answers = Vec::new();
        while let Some(answer) = calls.join_next().await {
            answers.push(answer.unwrap());
        }
        assert!(
            answers.iter().all(|(status, _)| *status == 200),
            "{answers:?}"
        );
        let mut took: Vec<Duration> = answers.iter().map(|(_, took)| *took).collect();
        took.sort_unstable();
        for (took, at_least) in took.iter().zip([100, 100, 150, 200, 250, 300]) {
            assert!(
                *took >= Duration::from_millis(at_least),
                "{took:?} < {at_least} ms: {answers:?}"
            );
        }
        let st = stats(&http, &sb).await;
        assert_eq!(
            (st["slowed"].clone(), st["slowed_ms"].clone()),
            (json!(4), json!(500)),
            "{st}"
        );
        assert_eq!(st["rate_limited"], 0);
        assert_eq!(st["requests"]["GET /v1/inventory"], json!({"200": 6}));

        tokio::time::sleep_until((started + Duration::from_millis(1100)).into()).await;
        let t = Instant::now();
        assert_eq!(list(&http, &sb).await.status(), 200);
        assert!(
            t.elapsed() < Duration::from_millis(250),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(stats(&http, &sb).await["slowed"], 4);
    }

    /// The routes `behaviour.route_limits` may name are those the stats count requests under.
    #[tokio::test]
    async fn the_routes_a_limit_may_name_are_the_routes_served() {
        let sb = sandbox(Behaviour::default()).await;
        let http = http();
        for route in crate::sandbox::config::SERVICE_ROUTES {
            let (method, path) = route.split_once(' ').unwrap();
            let path = path.replace("{id}", "1").replace("{app}", "inventory");
            let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
            call(&http, &sb, method, &path).await;
        }
        let st = stats(&http, &sb).await;
        let counted: Vec<&str> = st["requests"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut routes = crate::sandbox::config::SERVICE_ROUTES.to_vec();
        routes.sort_unstable();
        assert_eq!(counted, routes);
    }

    /// The service flavours of the pace's bench: a spurious 429 that claims an empty bucket
    /// (even without a limit), a limit that publishes only its reset, Retry-After as an HTTP
    /// date, and one slow route among fast ones.
    #[tokio::test]
    async fn pushback_flavours_send_what_they_say() {
        let claims = Behaviour {
            faults: Faults {
                http_429: 1.0,
                http_429_claims_empty: true,
                retry_after_secs: 2,
                ..Faults::default()
            },
            ..Behaviour::default()
        };
        let sb = sandbox(claims).await;
        let http = http();
        let spurious = list(&http, &sb).await;
        assert_eq!(spurious.status(), 429);
        assert_eq!(header_of(&spurious, "x-ratelimit-remaining"), Some("0"));
        assert_eq!(header_of(&spurious, "x-ratelimit-limit"), Some("60"));
        let reset: u64 = header_of(&spurious, "x-ratelimit-reset")
            .expect("a reset on the claim")
            .parse()
            .unwrap();
        assert!(
            (unix_now() + 1..=unix_now() + 3).contains(&reset),
            "{reset}"
        );
        assert_eq!(header_of(&spurious, "retry-after"), Some("2"));

        // Only the reset, on the bucket's own 429; Retry-After as a date.
        let reset_only = Behaviour {
            rate_limit: Some(RateLimitConfig {
                rate: 0.001,
                burst: 1,
                headers: true,
            }),
            rate_headers: RateHeaderSet::ResetOnly,
            retry_after_form: RetryAfterForm::HttpDate,
            ..Behaviour::default()
        };
        put_behaviour(&http, &sb, &reset_only).await;
        let ok = list(&http, &sb).await;
        assert_eq!(ok.status(), 200);
        assert!(ok
            .headers()
            .keys()
            .all(|k| !k.as_str().starts_with("x-ratelimit")));
        let limited = list(&http, &sb).await;
        assert_eq!(limited.status(), 429);
        assert_eq!(header_of(&limited, "x-ratelimit-remaining"), None);
        assert!(header_of(&limited, "x-ratelimit-reset").is_some());
        let date = header_of(&limited, "retry-after").expect("a Retry-After");
        let at = httpdate::parse_http_date(date).expect("an HTTP date");
        let wait = at.duration_since(SystemTime::now()).unwrap_or_default();
        // The bucket refills in 1000 s; the date is that moment rounded up.
        assert!(
            (Duration::from_secs(990)..=Duration::from_secs(1001)).contains(&wait),
            "{wait:?}"
        );

        // One slow route.
        let slow = Behaviour {
            faults: Faults {
                route_latency_ms: [("GET /v1/inventory/{id}".to_owned(), 400)].into(),
                ..Faults::default()
            },
            ..Behaviour::default()
        };
        put_behaviour(&http, &sb, &slow).await;
        let t = Instant::now();
        assert_eq!(list(&http, &sb).await.status(), 200);
        assert!(
            t.elapsed() < Duration::from_millis(300),
            "{:?}",
            t.elapsed()
        );
        let t = Instant::now();
        let one = http
            .get(format!("{}/v1/inventory/1", sb.base_url()))
            .bearer_auth("sandbox-token")
            .header("X-Service-Organization-Id", "100")
            .header("Accept", "application/json")
            .send()
            .await
            .unwrap();
        assert_eq!(one.status(), 404);
        assert!(
            t.elapsed() >= Duration::from_millis(400),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn accept_must_admit_json() {
        let mut h = HeaderMap::new();
        assert!(accepts_json(&h), "no Accept: anything goes");
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/html, */*;q=0.1"),
        );
        assert!(accepts_json(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
        assert!(!accepts_json(&h));
    }

    #[test]
    fn faults_follow_the_seed_and_the_probabilities() {
        let mut config = SandboxConfig::default();
        config.behaviour.faults.http_500 = 0.25;
        config.behaviour.faults.drop = 0.25;
        let draws = |shared: &Shared| -> Vec<Option<Fault>> {
            let b = shared.behaviour();
            (0..2000).map(|_| shared.draw_fault(&b)).collect()
        };
        let a = draws(&Shared::new(config.clone()));
        let b = draws(&Shared::new(config));
        assert_eq!(a, b, "same seed, same faults");
        let count = |f| a.iter().filter(|x| **x == Some(f)).count();
        assert!(
            (400..600).contains(&count(Fault::Http500)),
            "{}",
            count(Fault::Http500)
        );
        assert!(
            (400..600).contains(&count(Fault::Drop)),
            "{}",
            count(Fault::Drop)
        );
        assert_eq!(count(Fault::AckLost), 0);
    }
}
