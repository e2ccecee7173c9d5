//! Whole-process figures for `lotsync sync` against the sandbox on loopback: how delivery
//! keeps its pace under every kind of pushback, and the in-flight sweep.
//!
//! - **Matrix**: one table of service flavours, each a first sync of generated vehicles
//!   against a fresh sandbox with every Retry-After enforced, 20 ms latency, ceiling 1000/s,
//!   16 in flight:
//!   - how the service tells its pushback: no headers; `X-RateLimit-Remaining` with tokens
//!     left (also on a spurious 429); spurious 429s that claim an empty bucket (Remaining 0 and
//!     a Reset, after answers that said it was nearly full); `X-RateLimit-Reset` only;
//!     Retry-After as an HTTP date;
//!   - a real limit of 5, 50 and 200/s the client is not told (targets: 2xx/s after the first
//!     10 s ≥ 90% of L·(1−q), 429s after them < 3%);
//!   - spurious 429s at 2%, 10% and 25% with no limit (target: 2xx/s ≥ 70% of the ideal
//!     (1−p−q)/(p·RA));
//!   - each with and without 20% 500 and 3% dropped connections;
//!   - one slow endpoint: marking sold answers after 2 s, in a second sync of a 1,500-vehicle
//!     lot under a 50/s limit (10% sold, the rest changed);
//!   - the harshest mix: `--harsh-rows` creates (2,000) with 10% spurious 429s claiming an
//!     empty bucket, 20% 500 and 3% drops (target: done within the time the ideal predicts
//!     plus 30%).
//! - **C. 5xx-only outage**: 200 vehicles, every request 500 for `--outage-secs`, then the
//!   service is back (the default behaviour is put); give_up_after_secs = 3600, ceiling 100/s,
//!   4 in flight. Requests during the outage (target ≤ 30), seconds from the return to the
//!   first 2xx, and from that to the sync's exit. Twice: with the outage from the sync's start
//!   (the first sync's read of the service's list meets it), and from the
//!   first 2xx (that list read) on, so that the whole queue of writes meets it. A sync that
//!   exits within the outage is shown with its exit code.
//! - **Sweep**: with no limit (20 ms latency still), requests/s as a function of requests in
//!   flight.
//! - **Concurrency**: a service that serves 4 requests at once (200 ms each) and turns away
//!   what arrives beyond them, with 429 or 503 and no header: 2xx/s after the first 10 s
//!   against the ideal of 4 / 0.2 s = 20/s, and requests refused per request served (a good
//!   citizen keeps that small).
//!
//! - **Families**: limits of other shapes than a token bucket, each against the time a client
//!   that knew them would take: a fixed window (100 per 5 s, Reset at its end), a sliding window
//!   (200 per 10 s, Retry-After as a date), a limit that changes during the run (50/s, then
//!   10/s for 20 s, then 50/s; with and without rate headers), limits per endpoint (sales 5/s,
//!   creates and updates 50/s, on a second day), answers that slow down above 40/s.
//!
//! Each run is the real release binary in a fresh process with a fresh state; the sandbox runs
//! in this process and is sampled every 100 ms to time the delivery (first request, the stats
//! 2 s and 10 s after it, exit). `LOTSYNC_BENCH_LOG=lotsync::upload=debug` shows the client's
//! own log; `LOTSYNC_BENCH_SAMPLES=FILE` appends every sample (seconds since the process
//! started, then the sandbox's stats as JSON; `END` after each process) to see where a run lost
//! its time.
//!
//! ```text
//! cargo build --release && cargo run --release --example sync_bench -- --sections matrix
//! cargo run --release --example sync_bench -- --sections c --outage-secs 600
//! cargo run --release --example sync_bench -- --sections sweep --sweep-rows 2000
//! cargo run --release --example sync_bench -- --sections concurrency
//! cargo run --release --example sync_bench -- --sections families
//! ```
//!
//! Without `--sections` every section runs (matrix, c, sweep), C's outage alone taking
//! `--outage-secs`; the matrix takes about 30 minutes.

#[path = "../benches/feedgen.rs"]
mod feedgen;

mod support;

use clap::Parser;
use lotsync::sandbox::{
    Behaviour, Faults, RateHeaderSet, RateLimitConfig, RetryAfterForm, RunningSandbox,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SECTIONS: [&str; 5] = ["matrix", "c", "sweep", "concurrency", "families"];

#[derive(Parser)]
struct Args {
    /// Sections to run, comma-separated: matrix (service flavours), c (5xx-only outage),
    /// sweep (in flight), concurrency (a service serving 4 at once), families (windows, a
    /// changing limit, limits per endpoint, slowing answers).
    #[arg(long, value_delimiter = ',', default_value = "matrix,c,sweep")]
    sections: Vec<String>,
    /// Vehicles in the matrix's harshest case.
    #[arg(long, default_value_t = 2_000)]
    harsh_rows: u64,
    /// Only the matrix's cases and the families whose row contains this text (e.g. "claims
    /// empty", "sliding").
    #[arg(long)]
    only: Option<String>,
    /// Seconds of section C's outage, from the sync's start to the service's return.
    #[arg(long, default_value_t = 600)]
    outage_secs: u64,
    /// Vehicles in each run of the in-flight sweep.
    #[arg(long, default_value_t = 2_000)]
    sweep_rows: u64,
    /// Where to put the files and states (emptied first).
    #[arg(long, default_value = "/tmp/lotsync-sync-bench")]
    dir: PathBuf,
}

/// One sync to run: the vehicles, the sandbox, the client's config.
struct Setup {
    rows: u64,
    behaviour: Behaviour,
    ceiling: f64,
    in_flight: u32,
    /// More lines for the `[api]` table of the client's config.
    api_extra: String,
    /// Behaviours given to the sandbox during the sync, in this order, each when its moment
    /// comes.
    switches: Vec<(When, Behaviour)>,
    /// What is measured is a second sync of the lot: 10% of it sold, the rest changed (a
    /// first sync, not measured, creates it).
    second_day: bool,
}

/// When a behaviour is put during a sync.
#[derive(Clone, Copy)]
enum When {
    /// This long after the sync's start.
    AfterStart(Duration),
    /// At the first 2xx answer seen (looked for every 5 ms).
    FirstOk,
    /// This long after the previous switch.
    AfterPrevious(Duration),
}

impl Setup {
    fn new(rows: u64, behaviour: Behaviour, ceiling: f64, in_flight: u32) -> Self {
        Setup {
            rows,
            behaviour,
            ceiling,
            in_flight,
            api_extra: String::new(),
            switches: Vec::new(),
            second_day: false,
        }
    }
}

/// What one sync did, as the sandbox saw it.
struct Run {
    /// When the sandbox was first seen to have a request.
    first_request: Instant,
    /// When the process was seen to have exited.
    end: Instant,
    /// The stats at the first sample 2 s or more after the first request (the last ones if
    /// the sync ended before).
    at_2s: Value,
    /// The stats once the process exited.
    last: Value,
    /// When each behaviour of `switches` was put, and the stats just before.
    switched: Vec<(Instant, Value)>,
    /// Every sample: when, and the stats then.
    samples: Vec<(Instant, Value)>,
    status: std::process::ExitStatus,
}

impl Run {
    /// The sync exited 0.
    fn ensure_ok(self) -> anyhow::Result<Self> {
        anyhow::ensure!(
            self.status.code() == Some(0),
            "lotsync sync exited {}",
            self.status
        );
        Ok(self)
    }

    /// The first sample after `after` with more 2xx answers than `ok_before`.
    fn first_ok_after(&self, after: Instant, ok_before: u64) -> Option<Instant> {
        self.samples
            .iter()
            .find(|(at, st)| *at > after && ok_answers(st) > ok_before)
            .map(|(at, _)| *at)
    }

    /// The stats of the first sample `after` or more after the first request (the last ones
    /// if the sync ended before).
    fn at(&self, after: Duration) -> &Value {
        self.samples
            .iter()
            .find(|(at, _)| *at >= self.first_request + after)
            .map_or(&self.last, |(_, st)| st)
    }

    /// The counts of this run less those of `before` (an earlier sync against the same
    /// sandbox).
    fn less(mut self, before: &Value) -> Self {
        minus(&mut self.last, before);
        minus(&mut self.at_2s, before);
        for (_, st) in self.switched.iter_mut().chain(self.samples.iter_mut()) {
            minus(st, before);
        }
        self
    }

    /// From the first request to the exit.
    fn seconds(&self) -> f64 {
        (self.end - self.first_request).as_secs_f64().max(1e-3)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    for s in &args.sections {
        anyhow::ensure!(
            SECTIONS.contains(&s.as_str()),
            "unknown section {s:?}; the sections are {}",
            SECTIONS.join(", ")
        );
    }
    let wanted = |name: &str| args.sections.iter().any(|s| s == name);
    lotsync::api::install_crypto_provider();
    let lotsync = support::start_fresh(&args.dir)?;
    let bench = Bench {
        lotsync,
        dir: args.dir.clone(),
        http: reqwest::Client::new(),
    };
    if wanted("matrix") {
        matrix(&bench, args.harsh_rows, args.only.as_deref()).await?;
    }
    if wanted("c") {
        outage(&bench, args.outage_secs).await?;
    }
    if wanted("sweep") {
        sweep(&bench, args.sweep_rows).await?;
    }
    if wanted("concurrency") {
        concurrency(&bench).await?;
    }
    if wanted("families") {
        families(&bench, args.only.as_deref()).await?;
    }
    Ok(())
}

/// How a service tells its pushback, for the matrix.
#[derive(Clone, Copy, PartialEq)]
enum Tells {
    /// No rate headers at all.
    Nothing,
    /// `X-RateLimit-Limit` / `-Remaining` on every answer (tokens left on a spurious 429),
    /// `-Reset` on the bucket's 429s.
    Remaining,
    /// The same, but spurious 429s say the bucket is empty (Remaining 0 and a Reset).
    ClaimsEmpty,
    /// Only `X-RateLimit-Reset`, on the bucket's 429s.
    ResetOnly,
    /// `Remaining` headers, and every Retry-After as an HTTP date.
    HttpDate,
}

impl Tells {
    fn name(self) -> &'static str {
        match self {
            Tells::Nothing => "no headers",
            Tells::Remaining => "tokens left",
            Tells::ClaimsEmpty => "429 claims empty",
            Tells::ResetOnly => "Reset only",
            Tells::HttpDate => "Retry-After date",
        }
    }
}

/// One case of the matrix.
#[derive(Clone, Copy)]
struct Case {
    tells: Tells,
    /// A real limit (requests/s, burst); without one, a bucket too large to matter when the
    /// service tells `Remaining`.
    limit: Option<(u32, u32)>,
    /// Spurious 429s, as a share of requests.
    spurious: f64,
    /// 20% 500 and 3% dropped connections.
    failures: bool,
    /// Marking sold takes 2 s (a second sync of the lot, 10% sold and the rest changed).
    slow_sold: bool,
    rows: u64,
}

/// The Retry-After of spurious 429s, seconds.
const RETRY_AFTER_SECS: u64 = 1;
/// The matrix's targets are measured after this long.
const SETTLE: Duration = Duration::from_secs(10);

impl Case {
    /// The first column of its row (and what `--only` looks in, with the limit and shares).
    fn label(&self, harshest: bool) -> String {
        let mut label = self.tells.name().to_owned();
        if self.slow_sold {
            label.push_str(", sold 2 s");
        }
        if harshest {
            label.push_str(" (harshest)");
        }
        let limit = self
            .limit
            .map_or("no limit".to_owned(), |(l, _)| format!("{l}/s"));
        let failures = if self.failures { " + 5xx" } else { "" };
        format!("{label}; {limit}; {:.0}%{failures}", self.spurious * 100.0)
    }

    fn behaviour(&self) -> Behaviour {
        let headers = self.tells != Tells::Nothing;
        let rate_limit = match self.limit {
            Some((rate, burst)) => Some(RateLimitConfig {
                rate: f64::from(rate),
                burst,
                headers,
            }),
            None if headers => Some(RateLimitConfig {
                rate: 1_000_000.0,
                burst: 100_000,
                headers: true,
            }),
            None => None,
        };
        let mut route_latency_ms = std::collections::BTreeMap::new();
        if self.slow_sold {
            route_latency_ms.insert("POST /v1/inventory/{id}/sold".to_owned(), 2_000);
        }
        Behaviour {
            rate_limit,
            enforce_retry_after: true,
            retry_after_form: if self.tells == Tells::HttpDate {
                RetryAfterForm::HttpDate
            } else {
                RetryAfterForm::Seconds
            },
            rate_headers: if self.tells == Tells::ResetOnly {
                RateHeaderSet::ResetOnly
            } else {
                RateHeaderSet::All
            },
            faults: Faults {
                http_429: self.spurious,
                http_429_claims_empty: self.tells == Tells::ClaimsEmpty,
                http_500: if self.failures { 0.20 } else { 0.0 },
                drop: if self.failures { 0.03 } else { 0.0 },
                retry_after_secs: RETRY_AFTER_SECS,
                latency_ms: 20,
                route_latency_ms,
                ..Faults::default()
            },
            ..Behaviour::default()
        }
    }
}

/// The matrix of service flavours: every way of telling pushback, real limits, spurious 429s,
/// failures, one slow endpoint; one table with each case's target.
async fn matrix(bench: &Bench, harsh_rows: u64, only: Option<&str>) -> anyhow::Result<()> {
    println!(
        "\nMatrix. a first sync of generated vehicles (the slow-endpoint case: a second sync, \
         10% sold and the rest changed), every Retry-After enforced ({RETRY_AFTER_SECS} s on \
         spurious 429s), 20 ms latency, ceiling 1000/s, 16 in flight, a fresh state and \
         sandbox per case"
    );
    println!(
        "targets: a real limit L: 2xx/s after the first {} s ≥ 90% of L·(1−q) (q: the share \
         of 5xx and drops, which use tokens too) and 429s after them < 3%; spurious 429s at p: \
         2xx/s ≥ 70% of the ideal (1−p−q)/(p·RA), RA = {RETRY_AFTER_SECS} s (a client that sends \
         instantly between the windows every 429 opens; RA = {RETRY_AFTER_SECS}.5 s for \
         Retry-After as a date, which names a whole second); the harshest mix: done within the \
         time the ideal predicts + 30%",
        SETTLE.as_secs()
    );
    println!("(p and q are measured: shares of the requests that reached the fault draw, i.e. not refused by the bucket or inside an announced window)\n");
    println!("| service tells | real limit | spurious 429 | 5xx + drops | vehicles | seconds | requests | 429s: bucket / early / spurious | 429s after {0} s | 2xx/s (after {0} s for a limit) | target 2xx/s | % of target | met |", SETTLE.as_secs());
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut cases = Vec::new();
    for (limit, burst) in [(5u32, 5u32), (50, 10), (200, 20)] {
        let rows = u64::from(limit * 30).max(150);
        for tells in [
            Tells::Nothing,
            Tells::Remaining,
            Tells::ResetOnly,
            Tells::HttpDate,
        ] {
            cases.push(Case {
                tells,
                limit: Some((limit, burst)),
                spurious: 0.0,
                failures: false,
                slow_sold: false,
                rows,
            });
        }
        for tells in [Tells::Nothing, Tells::Remaining] {
            cases.push(Case {
                tells,
                limit: Some((limit, burst)),
                spurious: 0.0,
                failures: true,
                slow_sold: false,
                rows,
            });
        }
    }
    for spurious in [0.02, 0.10, 0.25] {
        for failures in [false, true] {
            let q = if failures { 0.23 } else { 0.0 };
            let ideal = (1.0 - spurious - q) / (spurious * RETRY_AFTER_SECS as f64);
            let rows = ((ideal * 40.0) as u64).max(150);
            for tells in [
                Tells::Nothing,
                Tells::Remaining,
                Tells::ClaimsEmpty,
                Tells::HttpDate,
            ] {
                cases.push(Case {
                    tells,
                    limit: None,
                    spurious,
                    failures,
                    slow_sold: false,
                    rows,
                });
            }
        }
    }
    cases.push(Case {
        tells: Tells::Remaining,
        limit: Some((50, 10)),
        spurious: 0.0,
        failures: false,
        slow_sold: true,
        rows: 1_500,
    });
    for case in cases {
        if only.is_none_or(|o| case.label(false).contains(o)) {
            matrix_row(bench, case, false).await?;
        }
    }
    let harshest = Case {
        tells: Tells::ClaimsEmpty,
        limit: None,
        spurious: 0.10,
        failures: true,
        slow_sold: false,
        rows: harsh_rows,
    };
    if only.is_some_and(|o| !harshest.label(true).contains(o)) {
        return Ok(());
    }
    // The harshest mix of the issue: 2,000 creates, 10% spurious 429s claiming an empty bucket,
    // 20% 500 and 3% drops.
    matrix_row(bench, harshest, true).await
}

/// Runs one case and prints its row.
async fn matrix_row(bench: &Bench, case: Case, harshest: bool) -> anyhow::Result<()> {
    let behaviour = case.behaviour();
    let mut setup = Setup::new(case.rows, behaviour, 1000.0, 16);
    if case.slow_sold {
        setup.second_day = true;
    }
    let run = bench.sync_once(setup).await?.ensure_ok()?;
    let last = &run.last;
    let settled = run.at(SETTLE);
    let faults = &last["faults"];
    let spurious = n(&faults["http_429"]);
    let failed = n(&faults["http_500"]) + n(&faults["drop"]);
    let drawn = n(&last["total_requests"]) - n(&last["early"]) - n(&last["rate_limited"]);
    let p = spurious as f64 / drawn.max(1) as f64;
    let q = failed as f64 / drawn.max(1) as f64;
    let late_requests = n(&last["total_requests"]) - n(&settled["total_requests"]);
    let late_429 = throttled(last) - throttled(settled);
    let late_share = late_429 as f64 / late_requests.max(1) as f64;
    let late_secs = (run.end - run.first_request).as_secs_f64() - SETTLE.as_secs_f64();
    let (answered, target, met) = match case.limit {
        Some((limit, _)) if case.spurious == 0.0 => {
            let answered = (ok_answers(last) - ok_answers(settled)) as f64 / late_secs.max(1e-3);
            let target = f64::from(limit) * (1.0 - q);
            let met = late_secs > 0.0 && answered >= 0.9 * target && late_share < 0.03;
            (answered, target, met)
        }
        _ => {
            let answered = ok_answers(last) as f64 / run.seconds();
            // A Retry-After written as a date names a whole second: the moment, rounded up, is
            // on average half a second later than the seconds form's.
            let pause = if case.tells == Tells::HttpDate {
                RETRY_AFTER_SECS as f64 + 0.5
            } else {
                RETRY_AFTER_SECS as f64
            };
            let ideal = (1.0 - p - q) / (p.max(1e-9) * pause);
            let met = if harshest {
                run.seconds() <= 1.3 * ok_answers(last) as f64 / ideal
            } else {
                answered >= 0.7 * ideal
            };
            (answered, ideal, met)
        }
    };
    let label = case.label(harshest);
    let tells = label.split(';').next().unwrap_or_default();
    let shown_limit = case
        .limit
        .map_or("none".to_owned(), |(l, b)| format!("{l}/s ({b})"));
    let target_shown = if harshest {
        format!(
            "{target:.1} (done in ≤ {:.0} s)",
            1.3 * ok_answers(last) as f64 / target
        )
    } else {
        format!("{target:.1}")
    };
    println!(
        "| {tells} | {shown_limit} | {:.0}% (p {p:.3}) | {} (q {q:.3}) | {} | {:.1} | {} | {} / {} / {spurious} | {:.1}% | {answered:.1} | {target_shown} | {:.0}% | {} |",
        case.spurious * 100.0,
        if case.failures { "20% + 3%" } else { "–" },
        case.rows,
        run.seconds(),
        n(&last["total_requests"]),
        n(&last["rate_limited"]),
        n(&last["early"]),
        100.0 * late_share,
        100.0 * answered / target,
        if met { "met" } else { "missed" },
    );
    Ok(())
}

/// C. Every request 500 for a while, then the service is back: from the sync's start, and from
/// the moment the service's list has been read (the first 2xx), so that the whole queue waits
/// behind the outage.
async fn outage(bench: &Bench, outage_secs: u64) -> anyhow::Result<()> {
    const ROWS: u64 = 200;
    println!(
        "\nC. 5xx-only outage: a first sync of {ROWS} vehicles, every request 500 for \
         {outage_secs} s, then the default behaviour; give_up_after_secs = 3600, ceiling 100/s, \
         4 in flight"
    );
    println!("target: requests during the outage ≤ 30\n");
    println!("| outage from | requests during the outage | 2xx before it | return → first 2xx s | first 2xx → exit s | return → exit s | requests after the return | exit |");
    println!("|---|---|---|---|---|---|---|---|");
    let down = Behaviour {
        faults: Faults {
            http_500: 1.0,
            ..Faults::default()
        },
        ..Behaviour::default()
    };
    let outage = Duration::from_secs(outage_secs);
    let runs = [
        (
            "the sync's start",
            down.clone(),
            vec![(When::AfterStart(outage), Behaviour::default())],
        ),
        (
            "the list read (first 2xx)",
            Behaviour::default(),
            vec![
                (When::FirstOk, down),
                (When::AfterPrevious(outage), Behaviour::default()),
            ],
        ),
    ];
    for (from, behaviour, switches) in runs {
        let mut setup = Setup::new(ROWS, behaviour, 100.0, 4);
        setup.api_extra = "give_up_after_secs = 3600\n".to_owned();
        setup.switches = switches;
        let returns = setup.switches.len() - 1;
        let run = bench.sync_once(setup).await?;
        let exit = run
            .status
            .code()
            .map_or_else(|| run.status.to_string(), |c| c.to_string());
        // Before the outage: nothing, or the stats when it began.
        let (ok_before, requests_before) = match returns {
            0 => (0, 0),
            _ => run
                .switched
                .first()
                .map_or((0, 0), |(_, st)| (ok_answers(st), n(&st["total_requests"]))),
        };
        let Some((back, at_return)) = run.switched.get(returns) else {
            // The sync ended within the outage.
            println!(
                "| {from} | {} (the sync ended {:.1} s after its first request, within the outage) | {ok_before} | – | – | – | – | {exit} |",
                n(&run.last["total_requests"]) - requests_before,
                run.seconds(),
            );
            continue;
        };
        let during = n(&at_return["total_requests"]) - requests_before;
        anyhow::ensure!(
            ok_answers(at_return) == ok_before,
            "a 2xx during the outage"
        );
        let first_2xx = run.first_ok_after(*back, ok_before);
        let shown = |s: Option<f64>| s.map_or("–".to_owned(), |s| format!("{s:.1}"));
        println!(
            "| {from} | {during} | {ok_before} | {} | {} | {:.1} | {} | {exit} |",
            shown(first_2xx.map(|t| (t - *back).as_secs_f64())),
            shown(first_2xx.map(|t| (run.end - t).as_secs_f64())),
            (run.end - *back).as_secs_f64(),
            n(&run.last["total_requests"]) - n(&at_return["total_requests"]),
        );
    }
    Ok(())
}

/// The in-flight sweep: no limit, requests/s by requests in flight.
async fn sweep(bench: &Bench, rows: u64) -> anyhow::Result<()> {
    println!("\nSweep. no limit, 20 ms latency, {rows} vehicles: requests/s by requests in flight");
    println!("| in flight | requests/s |");
    println!("|---|---|");
    for in_flight in [1, 2, 4, 8, 16, 32, 64] {
        let behaviour = Behaviour {
            faults: Faults {
                latency_ms: 20,
                ..Faults::default()
            },
            ..Behaviour::default()
        };
        let run = bench
            .sync_once(Setup::new(rows, behaviour, 100_000.0, in_flight))
            .await?
            .ensure_ok()?;
        println!(
            "| {in_flight} | {:.1} |",
            n(&run.last["total_requests"]) as f64 / run.seconds()
        );
    }
    Ok(())
}

/// A service that serves 4 requests at once, 200 ms each, and turns away the rest on arrival:
/// lotsync at its default pace (10/s, 4 in flight) and opened up (1000/s, 32 in flight).
async fn concurrency(bench: &Bench) -> anyhow::Result<()> {
    const ROWS: u64 = 600;
    const IDEAL: f64 = 4.0 / 0.2;
    println!("\nConcurrency. at most 4 in flight, 200 ms answers, {ROWS} vehicles");
    println!(
        "| refused with | lotsync's pace | 2xx/s after 10 s | of ideal 20/s | refused per 2xx after 10 s | seconds |"
    );
    println!("|---|---|---|---|---|---|");
    for status in [429u16, 503] {
        for (ceiling, in_flight) in [(10.0, 4), (1000.0, 32)] {
            let behaviour = Behaviour {
                concurrency: Some(lotsync::sandbox::ConcurrencyConfig {
                    max_in_flight: 4,
                    status,
                }),
                faults: Faults {
                    latency_ms: 200,
                    ..Faults::default()
                },
                ..Behaviour::default()
            };
            let setup = Setup::new(ROWS, behaviour, ceiling, in_flight);
            let run = bench.sync_once(setup).await?.ensure_ok()?;
            let settled = run.at(SETTLE).clone();
            let mut after = run.last.clone();
            minus(&mut after, &settled);
            let secs = (run.end - run.first_request).as_secs_f64() - SETTLE.as_secs_f64();
            let ok = ok_answers(&after) as f64;
            let refused = n(&after["over_concurrency"]) as f64;
            println!(
                "| {status} | {ceiling}/s, {in_flight} in flight | {:.1} | {:.0}% | {:.2} | {:.1} |",
                ok / secs.max(0.001),
                100.0 * ok / secs.max(0.001) / IDEAL,
                refused / ok.max(1.0),
                run.seconds()
            );
        }
    }
    Ok(())
}

/// One row of the families: a service whose limit is not a plain token bucket.
struct Family {
    name: &'static str,
    behaviour: Behaviour,
    switches: Vec<(When, Behaviour)>,
    rows: u64,
    /// The measured sync is a second day (10% sold, the rest changed).
    second_day: bool,
    /// The seconds a client that knew the limits would take, from its first request.
    ideal_secs: f64,
}

impl Family {
    /// A first sync of `rows` vehicles, the service's behaviour the same throughout.
    fn first_sync(name: &'static str, behaviour: Behaviour, rows: u64, ideal_secs: f64) -> Self {
        Family {
            name,
            behaviour,
            switches: Vec::new(),
            rows,
            second_day: false,
            ideal_secs,
        }
    }
}

/// The families' service before its limit: 20 ms answers, every Retry-After enforced.
fn families_base() -> Behaviour {
    Behaviour {
        enforce_retry_after: true,
        faults: Faults {
            latency_ms: 20,
            ..Faults::default()
        },
        ..Behaviour::default()
    }
}

/// A token bucket of `rate` per second and a burst of a fifth of it, its headers or not.
fn bucket(rate: f64, headers: bool) -> Behaviour {
    Behaviour {
        rate_limit: Some(RateLimitConfig {
            rate,
            burst: (rate / 5.0).max(1.0) as u32,
            headers,
        }),
        ..families_base()
    }
}

/// Services with limits of other shapes than a token bucket: fixed and sliding windows, a
/// limit that changes during the run, limits of their own per endpoint, answers that slow
/// down under load. Each row: the time a client that knew the limits would take over the
/// time lotsync took, and the requests refused per 2xx.
async fn families(bench: &Bench, only: Option<&str>) -> anyhow::Result<()> {
    println!(
        "\nFamilies. a first sync of generated vehicles (per endpoint: a second sync, 10% sold \
         and the rest changed), 20 ms latency, every Retry-After enforced, ceiling 1000/s, 16 \
         in flight, a fresh state and sandbox per row"
    );
    println!(
        "(slowing: the ideal is a client that stays at the knee; going past it is faster, but \
         slows the service for everyone, which the last column shows)\n"
    );
    println!(
        "| service | vehicles | seconds | ideal seconds | of ideal | requests | refused per 2xx \
         | answers slowed, mean added |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let changing = |headers: bool| Family {
        name: if headers {
            "50/s, 10/s for 20 s from the 20th, 50/s; rate headers"
        } else {
            "50/s, 10/s for 20 s from the 20th, 50/s; no headers"
        },
        behaviour: bucket(50.0, headers),
        switches: vec![
            (
                When::AfterStart(Duration::from_secs(20)),
                bucket(10.0, headers),
            ),
            (
                When::AfterPrevious(Duration::from_secs(20)),
                bucket(50.0, headers),
            ),
        ],
        rows: 2_000,
        // 1,000 in the first 20 s, 200 in the next 20, the remaining 800 at 50/s.
        ideal_secs: 20.0 + 20.0 + 800.0 / 50.0,
        second_day: false,
    };
    let mut route_limits = std::collections::BTreeMap::new();
    route_limits.insert(
        "POST /v1/inventory/{id}/sold".to_owned(),
        RateLimitConfig {
            rate: 5.0,
            burst: 1,
            headers: false,
        },
    );
    route_limits.insert(
        "POST /v1/inventory".to_owned(),
        RateLimitConfig {
            rate: 50.0,
            burst: 10,
            headers: false,
        },
    );
    let rows = [
        Family::first_sync(
            "fixed window: 100 per 5 s, Reset at its end",
            Behaviour {
                fixed_window: Some(lotsync::sandbox::FixedWindowConfig {
                    requests: 100,
                    window_secs: 5,
                }),
                ..families_base()
            },
            1_200,
            1_200.0 / 20.0,
        ),
        Family::first_sync(
            "sliding window: 200 per 10 s, Retry-After as a date",
            Behaviour {
                sliding_window: Some(lotsync::sandbox::SlidingWindowConfig {
                    requests: 200,
                    window_secs: 10,
                }),
                retry_after_form: RetryAfterForm::HttpDate,
                ..families_base()
            },
            1_200,
            1_200.0 / 20.0,
        ),
        changing(false),
        changing(true),
        Family {
            second_day: true,
            // 150 sold at 5/s; 1,350 updates at 50/s take less.
            ..Family::first_sync(
                "per endpoint: sales 5/s, creates and updates 50/s",
                Behaviour {
                    route_limits,
                    ..families_base()
                },
                1_500,
                150.0 / 5.0,
            )
        },
        Family::first_sync(
            "answers slow down above 40/s (x1 + 4 x excess / 40)",
            Behaviour {
                slowing: Some(lotsync::sandbox::SlowingConfig {
                    knee_per_sec: 40,
                    factor: 4.0,
                }),
                ..families_base()
            },
            1_600,
            1_600.0 / 40.0,
        ),
    ];
    for family in rows {
        if only.is_some_and(|o| !family.name.contains(o)) {
            continue;
        }
        let mut setup = Setup::new(family.rows, family.behaviour, 1000.0, 16);
        setup.switches = family.switches;
        setup.second_day = family.second_day;
        let run = bench.sync_once(setup).await?.ensure_ok()?;
        let last = &run.last;
        let refused = throttled(last) + n(&last["over_concurrency"]);
        let requests = n(&last["total_requests"]);
        let slowed = n(&last["slowed"]);
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.0}% | {requests} | {:.2} | {:.0}%, {:.0} ms |",
            family.name,
            family.rows,
            run.seconds(),
            family.ideal_secs,
            100.0 * family.ideal_secs / run.seconds(),
            refused as f64 / ok_answers(last).max(1) as f64,
            100.0 * slowed as f64 / requests.max(1) as f64,
            n(&last["slowed_ms"]) as f64 / slowed.max(1) as f64,
        );
    }
    Ok(())
}

struct Bench {
    lotsync: PathBuf,
    dir: PathBuf,
    http: reqwest::Client,
}

impl Bench {
    /// One first sync of `setup.rows` generated vehicles against a fresh sandbox.
    async fn sync_once(&self, setup: Setup) -> anyhow::Result<Run> {
        let sandbox = RunningSandbox::on_loopback(setup.behaviour.clone()).await?;
        let run_dir = self.dir.join(format!("run-{}", fastrand::u64(..)));
        std::fs::create_dir_all(run_dir.join("inbox"))?;
        let feed = run_dir.join("feed.csv");
        let mut out = std::io::BufWriter::new(std::fs::File::create(&feed)?);
        feedgen::write_feed(&mut out, setup.rows)?;
        drop(out);
        let config = run_dir.join("lotsync.toml");
        std::fs::write(&config, client_config(&sandbox.base_url(), &setup))?;
        let result = if setup.second_day {
            self.second_day(&sandbox, &config, &feed, setup.switches)
                .await
        } else {
            self.watch(&sandbox, &config, &feed, setup.switches).await
        };
        sandbox.stop().await;
        result
    }

    /// Syncs `feed`, then measures a sync of the next day's export: every tenth vehicle gone
    /// (sold), every other one with a new trim (an update).
    async fn second_day(
        &self,
        sandbox: &RunningSandbox,
        config: &Path,
        feed: &Path,
        switches: Vec<(When, Behaviour)>,
    ) -> anyhow::Result<Run> {
        let first = self
            .watch(sandbox, config, feed, Vec::new())
            .await?
            .ensure_ok()?;
        let day1 = std::fs::read_to_string(feed)?;
        let mut day2 = String::with_capacity(day1.len());
        for (i, line) in day1.lines().enumerate() {
            if i == 0 {
                day2.push_str(line);
            } else if i % 10 == 5 {
                continue;
            } else {
                // VIN,Stock,Year,Make,Model,Trim,…: the sixth field, unquoted in feedgen.
                let mut fields = line.splitn(7, ',');
                let head: Vec<&str> = fields.by_ref().take(6).collect();
                day2.push_str(&head.join(","));
                day2.push_str(" Sport,");
                day2.push_str(fields.next().unwrap_or_default());
            }
            day2.push('\n');
        }
        let next = feed.with_file_name("feed-day2.csv");
        std::fs::write(&next, day2)?;
        Ok(self
            .watch(sandbox, config, &next, switches)
            .await?
            .less(&first.last))
    }

    /// Runs the sync and samples the sandbox every 100 ms (every 5 ms while a switch waits for
    /// the first 2xx) until the process exits, putting the switches' behaviours on the way.
    async fn watch(
        &self,
        sandbox: &RunningSandbox,
        config: &Path,
        feed: &Path,
        switches: Vec<(When, Behaviour)>,
    ) -> anyhow::Result<Run> {
        let start = Instant::now();
        let mut child = Command::new(&self.lotsync)
            .arg("sync")
            .arg("--config")
            .arg(config)
            .arg(feed)
            .env("LOTSYNC_BENCH_TOKEN", "sandbox-token")
            // LOTSYNC_BENCH_LOG=debug (say) shows the client's own log of a run.
            .env(
                "RUST_LOG",
                std::env::var("LOTSYNC_BENCH_LOG").unwrap_or_else(|_| "warn".to_owned()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut first_request: Option<Instant> = None;
        let mut at_2s: Option<Value> = None;
        let mut switched: Vec<(Instant, Value)> = Vec::new();
        let mut switches = switches.into_iter().peekable();
        let mut samples = Vec::new();
        let (end, last, status) = loop {
            if let Some((when, _)) = switches.peek() {
                let due = match *when {
                    When::AfterStart(after) => start.elapsed() >= after,
                    When::AfterPrevious(after) => {
                        switched.last().map_or(start, |(at, _)| *at).elapsed() >= after
                    }
                    When::FirstOk => ok_answers(&self.stats(sandbox).await?) > 0,
                };
                if due {
                    let (_, behaviour) = switches.next().expect("peeked");
                    let before = self.stats(sandbox).await?;
                    self.put_behaviour(sandbox, &behaviour).await?;
                    switched.push((Instant::now(), before));
                }
            }
            let exited = child.try_wait()?;
            let st = self.stats(sandbox).await?;
            let now = Instant::now();
            if first_request.is_none() && n(&st["total_requests"]) > 0 {
                first_request = Some(now);
            }
            if at_2s.is_none() && first_request.is_some_and(|t| now - t >= Duration::from_secs(2)) {
                at_2s = Some(st.clone());
            }
            samples.push((now, st.clone()));
            if let Some(status) = exited {
                break (now, st, status);
            }
            let watching_first_ok = matches!(switches.peek(), Some((When::FirstOk, _)));
            let every = if watching_first_ok { 5 } else { 100 };
            tokio::time::sleep(Duration::from_millis(every)).await;
        };
        // Every sample, for a look at where a run lost its time.
        if let Ok(path) = std::env::var("LOTSYNC_BENCH_SAMPLES") {
            use std::io::Write as _;
            let mut out = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            for (at, st) in &samples {
                writeln!(out, "{:.2} {}", (*at - start).as_secs_f64(), st)?;
            }
            writeln!(out, "END")?;
        }
        Ok(Run {
            first_request: first_request.ok_or_else(|| anyhow::anyhow!("no request was sent"))?,
            end,
            at_2s: at_2s.unwrap_or_else(|| last.clone()),
            last,
            switched,
            samples,
            status,
        })
    }

    async fn stats(&self, sandbox: &RunningSandbox) -> anyhow::Result<Value> {
        Ok(self
            .http
            .get(format!("{}/__sandbox/stats", sandbox.base_url()))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?)
    }

    /// `PUT /__sandbox/behaviour`, as the tests' `set_behaviour` does.
    async fn put_behaviour(
        &self,
        sandbox: &RunningSandbox,
        behaviour: &Behaviour,
    ) -> anyhow::Result<()> {
        self.http
            .put(format!("{}/__sandbox/behaviour", sandbox.base_url()))
            .json(behaviour)
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }
}

/// The client's config: the sandbox, the ceiling and in-flight of `setup`, and its extra
/// `[api]` lines.
fn client_config(base_url: &str, setup: &Setup) -> String {
    format!(
        "[api]\nbase_url = \"{base_url}\"\norganization_id = 100\ntoken_env = \"LOTSYNC_BENCH_TOKEN\"\n\
         max_requests_per_second = {}\nmax_in_flight = {}\n{}\
         [state]\ndir = \"state\"\n[[feed]]\nname = \"main\"\ninbox = \"inbox\"\nlocation_id = 10\n",
        setup.ceiling, setup.in_flight, setup.api_extra
    )
}

/// Subtracts every count of `before` from the same count of `stats`.
fn minus(stats: &mut Value, before: &Value) {
    match (stats, before) {
        (Value::Object(now), Value::Object(then)) => {
            for (key, value) in now.iter_mut() {
                if let Some(b) = then.get(key) {
                    minus(value, b);
                }
            }
        }
        (value @ Value::Number(_), Value::Number(b)) => {
            if let (Some(x), Some(y)) = (value.as_u64(), b.as_u64()) {
                *value = Value::from(x.saturating_sub(y));
            }
        }
        _ => {}
    }
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// 429s the sandbox answered, of every kind: the bucket's, early ones (inside an announced
/// window), spurious ones (the `http_429` fault).
fn throttled(stats: &Value) -> u64 {
    n(&stats["rate_limited"]) + n(&stats["early"]) + n(&stats["faults"]["http_429"])
}

/// Requests answered with a 2xx, on every route.
fn ok_answers(stats: &Value) -> u64 {
    stats["requests"].as_object().map_or(0, |routes| {
        routes
            .values()
            .filter_map(Value::as_object)
            .flat_map(|statuses| statuses.iter())
            .filter(|(status, _)| status.starts_with('2'))
            .map(|(_, count)| n(count))
            .sum()
    })
}
