//! The pace against a model of the service's pushback, on paused time: minutes of 429s,
//! failures and Retry-After windows run in a fraction of a second, the same on every machine.
//!
//! Everything on the client's side is the real code: `deliver::call` (a slot in flight, the
//! pace's turn, backon's retries), [`Pace`], and the client's reading of an answer's headers
//! ([`crate::api::heed`], which holds the service's wait). Only the service is a model, of the
//! sandbox's rules (`sandbox/routes.rs`): its latency, then an announced window refuses
//! (`enforce_retry_after`), then the bucket, then the faults; a bucket's refusal and a spurious
//! 429 announce a window. The sandbox over loopback stays the reference (`examples/sync_bench`
//! prints the same matrix from it); this model is where a change to the pace is tried first.

use super::deliver::call;
use super::pace::Pace;
use super::{Lane, RetryPolicy, UploadStats};
use crate::api::{heed, Answer, ApiError, Call, ServiceWait};
use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What the service tells with its pushback (the sandbox's flavours).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tells {
    /// No `X-RateLimit-*` at all; Retry-After in seconds.
    Nothing,
    /// `Limit` and `Remaining` on every answer, `Reset` on a bucket's 429.
    Remaining,
    /// The same, and spurious 429s say the bucket is empty.
    ClaimsEmpty,
    /// Only `X-RateLimit-Reset`, on the bucket's 429s.
    ResetOnly,
    /// `Remaining`, and every Retry-After as an HTTP date.
    HttpDate,
}

#[derive(Debug, Clone, Copy)]
struct Flavour {
    tells: Tells,
    /// A real limit: requests per second and burst.
    limit: Option<(f64, u32)>,
    /// Spurious 429s, a share of the requests that reach the faults.
    spurious: f64,
    /// 20% 500s and 3% dropped connections.
    failures: bool,
    /// Every tenth operation takes [`SLOW_LATENCY`] to reach the service (the bench's slow
    /// endpoint: marking sold answers after 2 s).
    slow: bool,
}

const LATENCY: Duration = Duration::from_millis(20);
const SLOW_LATENCY: Duration = Duration::from_secs(2);
/// With a slow endpoint, each request's latency is longer by up to this much, at random: the
/// sandbox's timing on a busy machine. Requests paced evenly then reach the bucket bunched,
/// dipping it for a moment whatever the rate (without it the slow row of this model met at
/// 93% while the sandbox's missed at 83-85%).
const JITTER: Duration = Duration::from_millis(50);
/// The Retry-After of spurious 429s.
const RETRY_AFTER_SECS: u64 = 1;
/// The model's wall clock at the start of a run, after the epoch: fixed, so that whole-second Retry-After dates
/// and resets round the same way on every run (the real clock's fraction of a second moved
/// the figures from run to run), half a second past a whole one, as a real start is on
/// average.
const MODEL_WALL_START: Duration = Duration::from_millis(1_800_000_000_500);
/// A limit's figures are taken after this long.
const SETTLE: Duration = Duration::from_secs(10);

/// How a request was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    /// Refused by the bucket.
    Bucket,
    /// Sent inside an announced window.
    Early,
    Spurious,
    Failed,
}

/// The service's side.
struct Service {
    flavour: Flavour,
    t0: Instant,
    wall0: SystemTime,
    /// Tokens in the bucket and when they were counted.
    tokens: f64,
    counted: Instant,
    window: Option<Instant>,
    rng: fastrand::Rng,
    /// Every request, when it reached the service and how it was answered.
    log: Vec<(Instant, Outcome)>,
}

impl Service {
    fn new(flavour: Flavour, seed: u64) -> Service {
        let now = crate::clock::monotonic_now();
        Service {
            flavour,
            t0: now,
            wall0: UNIX_EPOCH + MODEL_WALL_START,
            tokens: flavour.limit.map_or(0.0, |(_, burst)| f64::from(burst)),
            counted: now,
            window: None,
            rng: fastrand::Rng::with_seed(seed),
            log: Vec::new(),
        }
    }

    /// The wall clock of the model: it moves with the paused time.
    fn wall(&self, now: Instant) -> SystemTime {
        self.wall0 + now.duration_since(self.t0)
    }

    /// Unix seconds `after` from now, rounded up (as the sandbox names a moment).
    fn unix_secs_up(&self, now: Instant, after: Duration) -> u64 {
        let since = (self.wall(now) + after)
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        since.as_secs() + u64::from(since.subsec_nanos() > 0)
    }

    fn retry_after(&self, now: Instant, secs: u64, headers: &mut HeaderMap) {
        let value = if self.flavour.tells == Tells::HttpDate {
            let at = UNIX_EPOCH + Duration::from_secs(self.unix_secs_up(now, secs_of(secs)));
            HeaderValue::from_str(&httpdate::fmt_http_date(at)).expect("an HTTP date is ASCII")
        } else {
            HeaderValue::from(secs)
        };
        headers.insert(RETRY_AFTER, value);
    }

    fn rate_headers(&self, limit: u32, remaining: u32, reset: Option<u64>, h: &mut HeaderMap) {
        if self.flavour.tells != Tells::ResetOnly {
            h.insert("x-ratelimit-limit", HeaderValue::from(limit));
            h.insert("x-ratelimit-remaining", HeaderValue::from(remaining));
        }
        if let Some(reset) = reset {
            h.insert("x-ratelimit-reset", HeaderValue::from(reset));
        }
    }

    /// The bucket: its rate, size, and whether it tells. Without a real limit a service that
    /// tells `Remaining` has one too large to matter.
    fn bucket(&self) -> Option<(f64, u32, bool)> {
        let tells = self.flavour.tells != Tells::Nothing;
        match self.flavour.limit {
            Some((rate, burst)) => Some((rate, burst, tells)),
            None if tells => Some((1_000_000.0, 100_000, true)),
            None => None,
        }
    }

    /// A request reaches the service now: its status and headers.
    fn answer(&mut self, now: Instant) -> (u16, HeaderMap) {
        let mut h = HeaderMap::new();
        let bucket = self.bucket();
        if let Some(until) = self.window.filter(|until| *until > now) {
            let left = until - now;
            self.retry_after(now, whole_secs_up(left).max(1), &mut h);
            if let Some((_, burst, true)) = bucket {
                self.rate_headers(burst, 0, None, &mut h);
            }
            self.log.push((now, Outcome::Early));
            return (429, h);
        }
        let mut remaining = None;
        if let Some((rate, burst, tells)) = bucket {
            if self.flavour.limit.is_none() {
                self.tokens = f64::from(burst);
            }
            let elapsed = now.duration_since(self.counted).as_secs_f64();
            self.tokens = (self.tokens + elapsed * rate).min(f64::from(burst));
            self.counted = now;
            if self.tokens >= 1.0 {
                self.tokens -= 1.0;
                remaining = Some((burst, self.tokens.floor() as u32, tells));
            } else {
                let wait = Duration::from_secs_f64((1.0 - self.tokens) / rate);
                let secs = whole_secs_up(wait).max(1);
                self.window = Some(now + secs_of(secs));
                self.retry_after(now, secs, &mut h);
                if tells {
                    let reset = self.unix_secs_up(now, wait);
                    self.rate_headers(burst, 0, Some(reset), &mut h);
                }
                self.log.push((now, Outcome::Bucket));
                return (429, h);
            }
        }
        let roll = self.rng.f64();
        let (failures, drops) = if self.flavour.failures {
            (0.20, 0.03)
        } else {
            (0.0, 0.0)
        };
        let status = if roll < failures {
            500
        } else if roll < failures + self.flavour.spurious {
            429
        } else if roll < failures + self.flavour.spurious + drops {
            0 // the connection dropped
        } else {
            200
        };
        if status == 429 {
            self.window = Some(now + secs_of(RETRY_AFTER_SECS));
            self.retry_after(now, RETRY_AFTER_SECS, &mut h);
            if self.flavour.tells == Tells::ClaimsEmpty {
                let reset = self.unix_secs_up(now, secs_of(RETRY_AFTER_SECS));
                let limit = bucket.map_or(60, |(_, burst, _)| burst);
                self.rate_headers(limit, 0, Some(reset), &mut h);
                self.log.push((now, Outcome::Spurious));
                return (429, h);
            }
        }
        if let Some((burst, left, true)) = remaining {
            self.rate_headers(burst, left, None, &mut h);
        }
        let outcome = match status {
            200 => Outcome::Ok,
            429 => Outcome::Spurious,
            _ => Outcome::Failed,
        };
        self.log.push((now, outcome));
        (status, h)
    }

    /// Prints the last request's outcome with the pace's rate (`LOTSYNC_MODEL_TRACE`).
    fn trace(&self, rate: f64) {
        if let Some((at, outcome)) = self.log.last() {
            println!(
                "{:8.3} {outcome:?} rate {rate:.2}",
                at.duration_since(self.t0).as_secs_f64()
            );
        }
    }
}

fn secs_of(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

fn whole_secs_up(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// One request as the client sends it: refused locally inside the token's window, else
/// answered by the model after its latency, its headers read by the client's own code.
async fn request(client: &Client, slow: bool) -> Result<Answer<()>, ApiError> {
    let (service, wait) = (&client.service, &*client.wait);
    let call = wait.refuse(Call {
        method: "POST",
        path: "/v1/inventory".to_owned(),
    })?;
    let latency = if slow { SLOW_LATENCY } else { LATENCY };
    let jitter = client.jitter.as_ref().map_or(Duration::ZERO, |rng| {
        let mut rng = rng.lock().expect("not poisoned: no panic holds it");
        Duration::from_micros(rng.u64(0..JITTER.as_micros() as u64))
    });
    tokio::time::sleep(latency + jitter).await;
    let now = crate::clock::monotonic_now();
    let (status, headers, wall) = {
        let mut service = service.lock().expect("not poisoned: no panic holds it");
        let (status, headers) = service.answer(now);
        if client.trace {
            service.trace(client.pace.rate());
        }
        (status, headers, service.wall(now))
    };
    if status == 0 {
        return Err(ApiError::Retryable {
            call,
            status: None,
            messages: vec![],
            retry_after: None,
            rate_limit: None,
            reason: "the connection was closed".to_owned(),
        });
    }
    let heard = heed(wait, status, &headers, wall);
    if status == 200 {
        return Ok(Answer {
            value: (),
            status,
            rate_limit: heard.rate_limit,
            call,
        });
    }
    Err(ApiError::from_status(
        call,
        status,
        vec![],
        heard.retry_after,
        heard.rate_limit,
        100,
        false,
    ))
}

/// What a run of `creates` first creates did, as the bench's matrix measures it.
#[derive(Debug)]
struct Figures {
    seconds: f64,
    requests: usize,
    /// 2xx per second: after [`SETTLE`] for a real limit, over the whole run otherwise.
    answered: f64,
    /// The share of 429s among the requests after [`SETTLE`].
    late_429: f64,
    target: f64,
    met: bool,
    /// Each second of the run: the 2xx answered, and the requests refused (429s).
    per_second: Vec<(u32, u32)>,
}

/// The client's side of a run.
struct Client {
    service: Mutex<Service>,
    wait: Arc<ServiceWait>,
    pace: Pace,
    slots: tokio::sync::Semaphore,
    stats: UploadStats,
    retry: RetryPolicy,
    stopping: tokio::sync::watch::Sender<bool>,
    /// Operations not yet taken.
    left: AtomicUsize,
    /// Draws each request's [`JITTER`], when the flavour has a slow endpoint
    /// ([`Flavour::slow`]: every tenth operation is slow).
    jitter: Option<Mutex<fastrand::Rng>>,
    trace: bool,
}

/// Delivers `creates` operations through the real call path against the model, with the
/// bench's settings: ceiling 1,000/s, 16 in flight, burst 1, 512 operations taken at once.
async fn run(flavour: Flavour, creates: usize, seed: u64) -> Figures {
    let wait = Arc::new(ServiceWait::default());
    let client = Arc::new(Client {
        service: Mutex::new(Service::new(flavour, seed)),
        pace: Pace::new(1000.0, None, 1, wait.clone()),
        wait,
        slots: tokio::sync::Semaphore::new(16),
        stats: UploadStats::default(),
        retry: RetryPolicy {
            jitter_seed: Some(seed),
            ..RetryPolicy::default()
        },
        stopping: tokio::sync::watch::Sender::new(false),
        left: AtomicUsize::new(creates),
        jitter: flavour
            .slow
            .then(|| Mutex::new(fastrand::Rng::with_seed(seed ^ 0x5eed))),
        trace: std::env::var_os("LOTSYNC_MODEL_TRACE").is_some(),
    });
    let started = crate::clock::monotonic_now();
    let mut takers = tokio::task::JoinSet::new();
    for _ in 0..512 {
        let client = client.clone();
        takers.spawn(async move {
            let lane = Lane {
                slots: &client.slots,
                pace: &client.pace,
                stats: &client.stats,
                retry: &client.retry,
                stopping: &client.stopping,
            };
            while let Ok(n) = client
                .left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            {
                let slow = client.jitter.is_some() && n % 10 == 5;
                // An operation that exhausts its attempts goes back to the outbox: taken again.
                while call(&lane, || request(&client, slow)).await.is_err() {}
            }
        });
    }
    while takers.join_next().await.is_some() {}
    let end = crate::clock::monotonic_now();
    let service = client
        .service
        .lock()
        .expect("not poisoned: no panic holds it");
    if client.trace {
        // Requests and 2xx per 5 s.
        let mut per: Vec<(u32, u32)> = Vec::new();
        for (at, outcome) in &service.log {
            let i = (at.duration_since(started).as_secs_f64() / 5.0) as usize;
            per.resize(per.len().max(i + 1), (0, 0));
            per[i].0 += 1;
            per[i].1 += u32::from(*outcome == Outcome::Ok);
        }
        let after_2s = service
            .log
            .iter()
            .filter(|(at, o)| {
                *o == Outcome::Ok && at.duration_since(started) >= Duration::from_secs(2)
            })
            .count() as f64
            / (end.duration_since(started).as_secs_f64() - 2.0);
        println!("2xx/s after 2 s: {after_2s:.1}");
        for (i, (requests, ok)) in per.iter().enumerate() {
            let (requests, ok) = (f64::from(*requests) / 5.0, f64::from(*ok) / 5.0);
            println!("{:4} s: {requests:6.1} requests/s {ok:6.1} 2xx/s", i * 5);
        }
    }
    figures(&service, flavour, started, end)
}

fn figures(service: &Service, flavour: Flavour, started: Instant, end: Instant) -> Figures {
    let log = &service.log;
    let seconds = end.duration_since(started).as_secs_f64();
    let count = |from: Instant, what: &dyn Fn(Outcome) -> bool| {
        log.iter().filter(|(at, o)| *at >= from && what(*o)).count()
    };
    let drawn = count(started, &|o| !matches!(o, Outcome::Bucket | Outcome::Early));
    let p = count(started, &|o| o == Outcome::Spurious) as f64 / drawn.max(1) as f64;
    let q = count(started, &|o| o == Outcome::Failed) as f64 / drawn.max(1) as f64;
    let settled = started + SETTLE;
    let late = count(settled, &|_| true);
    let late_429 = count(settled, &|o| {
        matches!(o, Outcome::Bucket | Outcome::Early | Outcome::Spurious)
    }) as f64
        / late.max(1) as f64;
    let ok = |from| count(from, &|o| o == Outcome::Ok) as f64;
    let (answered, target, met) = match flavour.limit {
        Some((limit, _)) if flavour.spurious == 0.0 => {
            let secs = (seconds - SETTLE.as_secs_f64()).max(1e-3);
            let answered = ok(settled) / secs;
            let target = limit * (1.0 - q);
            (
                answered,
                target,
                answered >= 0.9 * target && late_429 < 0.03,
            )
        }
        _ => {
            let answered = ok(started) / seconds;
            let pause = if flavour.tells == Tells::HttpDate {
                RETRY_AFTER_SECS as f64 + 0.5
            } else {
                RETRY_AFTER_SECS as f64
            };
            let ideal = (1.0 - p - q) / (p.max(1e-9) * pause);
            (answered, ideal, answered >= 0.7 * ideal)
        }
    };
    let mut per_second: Vec<(u32, u32)> = Vec::new();
    for (at, outcome) in log {
        let i = at.duration_since(started).as_secs() as usize;
        per_second.resize(per_second.len().max(i + 1), (0, 0));
        match outcome {
            Outcome::Ok => per_second[i].0 += 1,
            Outcome::Bucket | Outcome::Early | Outcome::Spurious => per_second[i].1 += 1,
            Outcome::Failed => {}
        }
    }
    // The last second, cut short by the run's end, would plot as a fall.
    per_second.truncate(seconds as usize);
    Figures {
        seconds,
        requests: log.len(),
        answered,
        late_429,
        target,
        met,
        per_second,
    }
}

/// The matrix of `examples/sync_bench`, with its rows' sizes.
fn matrix() -> Vec<(Flavour, usize)> {
    let mut cases = Vec::new();
    for (limit, burst) in [(5.0, 5), (50.0, 10), (200.0, 20)] {
        let rows = ((limit * 30.0) as usize).max(150);
        for tells in [
            Tells::Nothing,
            Tells::Remaining,
            Tells::ResetOnly,
            Tells::HttpDate,
        ] {
            let flavour = Flavour {
                tells,
                limit: Some((limit, burst)),
                spurious: 0.0,
                failures: false,
                slow: false,
            };
            cases.push((flavour, rows));
        }
        for tells in [Tells::Nothing, Tells::Remaining] {
            let flavour = Flavour {
                tells,
                limit: Some((limit, burst)),
                spurious: 0.0,
                failures: true,
                slow: false,
            };
            cases.push((flavour, rows));
        }
    }
    for spurious in [0.02, 0.10, 0.25] {
        for failures in [false, true] {
            let q = if failures { 0.23 } else { 0.0 };
            let ideal = (1.0 - spurious - q) / (spurious * RETRY_AFTER_SECS as f64);
            let rows = ((ideal * 40.0) as usize).max(150);
            for tells in [
                Tells::Nothing,
                Tells::Remaining,
                Tells::ClaimsEmpty,
                Tells::HttpDate,
            ] {
                let flavour = Flavour {
                    tells,
                    limit: None,
                    spurious,
                    failures,
                    slow: false,
                };
                cases.push((flavour, rows));
            }
        }
    }
    cases.push((
        Flavour {
            tells: Tells::Remaining,
            limit: Some((50.0, 10)),
            spurious: 0.0,
            failures: false,
            slow: true,
        },
        1_500,
    ));
    cases
}

fn row(flavour: Flavour, f: &Figures) -> String {
    format!(
        "| {:?}{} | {} | {:.0}% | {} | {:.1} s | {} | {:.1}% | {:.1} | {:.1} | {:.0}% | {} |",
        flavour.tells,
        if flavour.slow { ", sold 2 s" } else { "" },
        flavour
            .limit
            .map_or("none".to_owned(), |(l, b)| format!("{l}/s ({b})")),
        flavour.spurious * 100.0,
        if flavour.failures { "20% + 3%" } else { "–" },
        f.seconds,
        f.requests,
        100.0 * f.late_429,
        f.answered,
        f.target,
        100.0 * f.answered / f.target,
        if f.met { "met" } else { "missed" },
    )
}

/// A number from the environment, for the printed matrix's knobs.
fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// The whole matrix, printed (`cargo test --lib model_tests -- --ignored --nocapture`): where
/// a change to the pace is weighed first. `LOTSYNC_MODEL_ONLY` picks rows by their text,
/// `LOTSYNC_MODEL_SEEDS` (from `LOTSYNC_MODEL_SEED`, 7) runs each several times,
/// `LOTSYNC_MODEL_ROWS` sets their size, `LOTSYNC_MODEL_TRACE` prints every answer and the
/// pace's decisions.
#[tokio::test(start_paused = true)]
#[ignore = "prints the model's matrix; run it by name"]
async fn the_matrix_on_the_model() {
    let only = std::env::var("LOTSYNC_MODEL_ONLY").ok();
    if std::env::var_os("LOTSYNC_MODEL_TRACE").is_some() {
        // The pace's own decisions, between the trace's lines.
        let _ = tracing_subscriber::fmt()
            .with_env_filter("lotsync=debug")
            .without_time()
            .with_test_writer()
            .try_init();
    }
    println!("| tells | limit | spurious | 5xx + drops | seconds | requests | 429s after 10 s | 2xx/s | target | % | met |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (flavour, rows) in matrix() {
        let line = row(
            flavour,
            &Figures {
                seconds: 0.0,
                requests: 0,
                answered: 0.0,
                late_429: 0.0,
                target: 1.0,
                met: false,
                per_second: Vec::new(),
            },
        );
        if only.as_deref().is_some_and(|o| !line.contains(o)) {
            continue;
        }
        let seeds: u64 = env_number("LOTSYNC_MODEL_SEEDS", 1);
        let first: u64 = env_number("LOTSYNC_MODEL_SEED", 7);
        let rows = env_number("LOTSYNC_MODEL_ROWS", rows);
        for seed in 0..seeds {
            let figures = run(flavour, rows, first + seed).await;
            println!("{}", row(flavour, &figures));
        }
    }
}

/// Runs `flavour` over three seeds with the matrix's size for it.
async fn three_runs(flavour: Flavour) -> Vec<Figures> {
    runs(flavour, 7..10).await
}

/// Runs `flavour` over `seeds` with the matrix's size for it.
async fn runs(flavour: Flavour, seeds: impl IntoIterator<Item = u64>) -> Vec<Figures> {
    let rows = matrix()
        .into_iter()
        .find(|(f, _)| {
            f.tells == flavour.tells
                && f.limit == flavour.limit
                && f.spurious == flavour.spurious
                && f.failures == flavour.failures
                && f.slow == flavour.slow
        })
        .map(|(_, rows)| rows)
        .expect("a flavour of the matrix");
    let mut runs = Vec::new();
    for seed in seeds {
        runs.push(run(flavour, rows, seed).await);
    }
    runs
}

// Before this model, each case below missed on the pace then in main: 5/s without headers
// 37.3% 429s after 10 s (a trial of pauses alone at 1,000/s); 25% spurious 429s without
// headers 43% of the ideal; 10% with 5xx 49%; 50/s with 5xx and headers 88%.

#[tokio::test(start_paused = true)]
async fn a_limit_without_headers_is_kept_below_without_trials_far_above_it() {
    let flavour = Flavour {
        tells: Tells::Nothing,
        limit: Some((5.0, 5)),
        spurious: 0.0,
        failures: false,
        slow: false,
    };
    for f in three_runs(flavour).await {
        assert!(f.met, "{}", row(flavour, &f));
    }
}

/// Seeds 13 and 16 of 5/s with 5xx and no headers: on 073e00a the cuts, still above the
/// limit, were suspected of not paying, and a trial of pauses alone at the ceiling was kept
/// (the service's share of 429s looked like chance, its early ones being echoes): 71% and 70%
/// of the requests after the first 10 s refused. On a42fb5f the trial was no longer kept, but
/// cost 45% and 48% itself. Now the pauses between the cuts' 429s, each letting a bucket's
/// worth through, start no trial: the row is met (1.3%, 1.4%).
#[tokio::test(start_paused = true)]
async fn a_limit_without_headers_gets_no_trial_of_pauses_alone() {
    let flavour = Flavour {
        tells: Tells::Nothing,
        limit: Some((5.0, 5)),
        spurious: 0.0,
        failures: true,
        slow: false,
    };
    for f in runs(flavour, [13, 16]).await {
        assert!(f.met, "{}", row(flavour, &f));
    }
}

#[tokio::test(start_paused = true)]
async fn spurious_429s_without_headers_only_pause() {
    for (spurious, failures) in [(0.25, false), (0.10, true)] {
        let flavour = Flavour {
            tells: Tells::Nothing,
            limit: None,
            spurious,
            failures,
            slow: false,
        };
        for f in three_runs(flavour).await {
            assert!(f.met, "{}", row(flavour, &f));
        }
    }
}

/// A limit that tells nothing, with 5xx and drops, measured to the run's last answer: on
/// 570ea46 seeds 7 and 15 gave 87% and 87% at 200/s, 89% and 88% at 50/s. Two causes: the
/// operations that drew four or five 5xx in a row waited up to 3 s in backoff after the rest
/// were done, and the rate walked back into the limit every 10 to 20 s, each 429 holding every
/// sender for its second of Retry-After.
#[tokio::test(start_paused = true)]
async fn a_quiet_limit_with_failures_is_met_to_the_runs_end() {
    for limit in [(50.0, 10), (200.0, 20)] {
        let flavour = Flavour {
            tells: Tells::Nothing,
            limit: Some(limit),
            spurious: 0.0,
            failures: true,
            slow: false,
        };
        for f in runs(flavour, [7, 15]).await {
            assert!(f.met, "{}", row(flavour, &f));
        }
    }
}

#[tokio::test(start_paused = true)]
async fn failures_at_a_limit_do_not_slow_delivery_below_it() {
    let flavour = Flavour {
        tells: Tells::Remaining,
        limit: Some((50.0, 10)),
        spurious: 0.0,
        failures: true,
        slow: false,
    };
    for f in three_runs(flavour).await {
        assert!(f.met, "{}", row(flavour, &f));
    }
}

/// The bench's slow endpoint: every tenth operation answered after 2 s, against a limit of
/// 50/s that tells what its bucket has left. Before the fix seeds 7 and 8 gave 84% and 81%
/// (no 429 after 10 s; a blind cut to 40.5 came back at 0.5% a second, each round's bunched
/// answers dipping the bucket below nearly full), and the sandbox missed at 83-85% on the
/// other side of the same rule (a rate raised while the slots waited on sales, then sent).
#[tokio::test(start_paused = true)]
async fn a_slow_endpoint_at_a_limit_is_met() {
    let flavour = Flavour {
        tells: Tells::Remaining,
        limit: Some((50.0, 10)),
        spurious: 0.0,
        failures: false,
        slow: true,
    };
    for f in three_runs(flavour).await {
        assert!(f.met, "{}", row(flavour, &f));
    }
}

/// The flavours of the pace's plot in the performance guide: a limit told by headers, the
/// same limit untold, spurious 429s with no limit, and a limit with failures.
fn plotted() -> Vec<(&'static str, Flavour)> {
    let limit = |tells, failures| Flavour {
        tells,
        limit: Some((50.0, 10)),
        spurious: 0.0,
        failures,
        slow: false,
    };
    vec![
        ("50/s, told by rate headers", limit(Tells::Remaining, false)),
        ("50/s, untold (no headers)", limit(Tells::Nothing, false)),
        (
            "50/s untold, 20% 5xx and 3% dropped",
            limit(Tells::Nothing, true),
        ),
        (
            "no limit, 10% spurious 429s, no headers",
            Flavour {
                tells: Tells::Nothing,
                limit: None,
                spurious: 0.10,
                failures: false,
                slow: false,
            },
        ),
    ]
}

/// Where the plot is kept.
const PLOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/guide/pace-model.svg");

/// Each plotted flavour's run (seed 7, the matrix's size), drawn as rate over time.
async fn pace_plot() -> String {
    let mut panels = Vec::new();
    for (name, flavour) in plotted() {
        let figures = runs(flavour, [7]).await.remove(0);
        panels.push((name, figures));
    }
    svg(&panels)
}

/// A 2-column grid of panels: 2xx per second (blue), 429s per second (red), the ideal
/// (dashed); each title with the run's share of the ideal.
fn svg(panels: &[(&str, Figures)]) -> String {
    use std::fmt::Write;
    const W: f64 = 440.0;
    const H: f64 = 230.0;
    const LEFT: f64 = 44.0;
    const TOP: f64 = 34.0;
    const PLOT_W: f64 = W - LEFT - 16.0;
    const PLOT_H: f64 = H - TOP - 34.0;
    let rows = panels.len().div_ceil(2);
    let (width, height) = (2.0 * W, 30.0 + rows as f64 * H);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        out,
        r##"<rect width="100%" height="100%" fill="white"/><text x="10" y="18" font-size="12">The pace on the model of the service (paused time, seed 7): <tspan fill="#1f6feb">2xx/s</tspan>, <tspan fill="#d1242f">429s/s</tspan>, ideal dashed. Generated by a test: cargo test --lib pace_plot</text>"##
    );
    for (i, (name, f)) in panels.iter().enumerate() {
        let (x0, y0) = ((i % 2) as f64 * W, 30.0 + (i / 2) as f64 * H);
        let secs = f.per_second.len().max(1) as f64;
        let peak = f
            .per_second
            .iter()
            .map(|&(ok, refused)| ok.max(refused))
            .max()
            .unwrap_or(0) as f64;
        let top = (peak.max(f.target) * 1.15).max(1.0);
        let x = |t: f64| x0 + LEFT + PLOT_W * t / secs;
        let y = |v: f64| y0 + TOP + PLOT_H * (1.0 - v / top);
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="12">{name}: {:.0}% of the ideal, {:.1}% refused after 10 s</text>"#,
            x0 + LEFT,
            y0 + 20.0,
            100.0 * f.answered / f.target,
            100.0 * f.late_429
        );
        let _ = writeln!(
            out,
            r##"<rect x="{:.1}" y="{:.1}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#999"/>"##,
            x0 + LEFT,
            y0 + TOP
        );
        for tick in [0.0, top / 2.0, top] {
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{tick:.0}</text>"#,
                x0 + LEFT - 4.0,
                y(tick) + 4.0
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{secs:.0} s</text>"#,
            x0 + LEFT + PLOT_W,
            y0 + TOP + PLOT_H + 14.0
        );
        let _ = writeln!(
            out,
            r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#555" stroke-dasharray="5,4"/>"##,
            x(0.0),
            y(f.target),
            x(secs),
            y(f.target)
        );
        for (colour, pick) in [
            ("#d1242f", (|p: &(u32, u32)| p.1) as fn(&(u32, u32)) -> u32),
            ("#1f6feb", |p: &(u32, u32)| p.0),
        ] {
            let points: Vec<String> = f
                .per_second
                .iter()
                .enumerate()
                .map(|(t, p)| format!("{:.1},{:.1}", x(t as f64 + 0.5), y(f64::from(pick(p)))))
                .collect();
            let _ = writeln!(
                out,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/>"#,
                points.join(" ")
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

/// The plot in the performance guide is the one this code draws: a change to the pace that
/// changes it updates the file (`LOTSYNC_WRITE_PLOT=1 cargo test --lib pace_plot`).
#[tokio::test(start_paused = true)]
async fn the_pace_plot_in_the_guide_is_current() {
    let drawn = pace_plot().await;
    if std::env::var_os("LOTSYNC_WRITE_PLOT").is_some() {
        std::fs::write(PLOT, &drawn).expect("the plot written");
        return;
    }
    let kept = std::fs::read_to_string(PLOT).unwrap_or_default();
    assert!(
        kept == drawn,
        "{PLOT} is not the plot the pace draws now: LOTSYNC_WRITE_PLOT=1 cargo test --lib pace_plot"
    );
}

/// Drawing the plot twice gives the same bytes: the check above cannot depend on luck.
#[tokio::test(start_paused = true)]
async fn the_pace_plot_is_the_same_every_time() {
    let first = pace_plot().await;
    let second = pace_plot().await;
    assert!(first == second, "two draws differ");
    assert_eq!(first.matches("<polyline").count(), 2 * plotted().len());
}
