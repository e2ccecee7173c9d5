//! Whole-process figures for `lotsync sync` against the sandbox on loopback: the benchmarks of
//! issue 14 (delivery when the service pushes back), and the in-flight sweep.
//!
//! - **A. Unknown limit**: a first sync of 15 × L vehicles (at least 300) against a limit of
//!   L ∈ {20, 50, 200} requests/s (burst 10, 10, 20) that the client is not told, with every
//!   Retry-After enforced, 20 ms latency, ceiling 1000/s, 16 in flight; with and without the
//!   X-RateLimit headers. Requests, 429s, 2xx answers per second from the first request to
//!   exit and that as a share of L (target ≥ 0.90), and the share of 429s among the requests
//!   after the first 2 s (target < 3%).
//! - **B. Spurious 429s**: 10% 429 (Retry-After 1 s, enforced), 20% 500, 3% dropped
//!   connections, no latency, ceiling 1000/s, 4 in flight, a first sync of `--spurious-rows`
//!   vehicles; once from a service whose X-RateLimit-Remaining says tokens remain, once from
//!   one that sends no rate headers. 2xx answers per second against the ideal computed from
//!   the run's own shares of 429s and failures (target ≥ 70% of it; printed with the table).
//! - **C. 5xx-only outage**: 200 vehicles, every request 500 for `--outage-secs`, then the
//!   service is back (the default behaviour is put); give_up_after_secs = 3600, ceiling 100/s,
//!   4 in flight. Requests during the outage (target ≤ 30), seconds from the return to the
//!   first 2xx, and from that to the sync's exit. Twice: with the outage from the sync's start
//!   (issue 14's case: the first sync's read of the service's list meets it), and from the
//!   first 2xx (that list read) on, so that the whole queue of writes meets it. A sync that
//!   exits within the outage is shown with its exit code.
//! - **Sweep**: with no limit (20 ms latency still), requests/s as a function of requests in
//!   flight.
//!
//! Each run is the real release binary in a fresh process with a fresh state; the sandbox runs
//! in this process and is sampled every 100 ms to time the delivery (first request, first 2xx
//! answer, the stats 2 s after the first request, exit).
//!
//! ```text
//! cargo build --release && cargo run --release --example sync_bench -- --sections a
//! cargo run --release --example sync_bench -- --sections b --spurious-rows 2000
//! cargo run --release --example sync_bench -- --sections c --outage-secs 600
//! cargo run --release --example sync_bench -- --sections sweep --sweep-rows 2000
//! ```
//!
//! Without `--sections` every section runs (a, b, c, sweep), C's outage alone taking
//! `--outage-secs`.

#[path = "../benches/feedgen.rs"]
mod feedgen;

mod support;

use clap::Parser;
use lotsync::sandbox::{Behaviour, Faults, RateLimitConfig, RunningSandbox};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SECTIONS: [&str; 4] = ["a", "b", "c", "sweep"];

#[derive(Parser)]
struct Args {
    /// Sections to run, comma-separated: a (unknown limit), b (spurious 429s), c (5xx-only
    /// outage), sweep (in flight).
    #[arg(long, value_delimiter = ',', default_value = "a,b,c,sweep")]
    sections: Vec<String>,
    /// Vehicles in each run of section B.
    #[arg(long, default_value_t = 2_000)]
    spurious_rows: u64,
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
    /// Every sample: when, and 2xx answers so far (the first 2xx is the first sample with
    /// one; see [`Run::first_ok_after`]).
    samples: Vec<(Instant, u64)>,
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
            .find(|(at, ok)| *at > after && *ok > ok_before)
            .map(|(at, _)| *at)
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
    if wanted("a") {
        unknown_limit(&bench).await?;
    }
    if wanted("b") {
        spurious_429s(&bench, args.spurious_rows).await?;
    }
    if wanted("c") {
        outage(&bench, args.outage_secs).await?;
    }
    if wanted("sweep") {
        sweep(&bench, args.sweep_rows).await?;
    }
    Ok(())
}

/// A. An unknown limit, with every Retry-After enforced.
async fn unknown_limit(bench: &Bench) -> anyhow::Result<()> {
    println!(
        "\nA. unknown limit L: a first sync of 15 × L vehicles (at least 300), limit L/s not told \
         to the client, Retry-After enforced, 20 ms latency, ceiling 1000/s, 16 in flight"
    );
    println!("targets: delivered/L ≥ 0.90, 429s after the first 2 s < 3% (\"met\" counts the whole run, the first 2 s included)");
    println!("(429s: bucket + early (inside an announced window) + spurious; delivered: 2xx answers per second from the first request to exit)\n");
    println!("| L/s (burst) | X-RateLimit headers | vehicles | seconds | requests | 429s (bucket + early) | 2xx/s | delivered/L | delivered/L after 2 s | 429s after 2 s | targets |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (limit, burst) in [(20u32, 10u32), (50, 10), (200, 20)] {
        for headers in [true, false] {
            let rows = u64::from(limit * 15).max(300);
            let behaviour = Behaviour {
                rate_limit: Some(RateLimitConfig {
                    rate: f64::from(limit),
                    burst,
                    headers,
                }),
                enforce_retry_after: true,
                faults: Faults {
                    latency_ms: 20,
                    ..Faults::default()
                },
                ..Behaviour::default()
            };
            let run = bench
                .sync_once(Setup::new(rows, behaviour, 1000.0, 16))
                .await?
                .ensure_ok()?;
            let last = &run.last;
            let answered = ok_answers(last) as f64 / run.seconds();
            let delivered = answered / f64::from(limit);
            let late_requests = n(&last["total_requests"]) - n(&run.at_2s["total_requests"]);
            let late_429 = throttled(last) - throttled(&run.at_2s);
            let late_share = late_429 as f64 / late_requests.max(1) as f64;
            // The sample "at 2 s" is the first taken 2 s or more after the first request.
            let late_answered = (ok_answers(last) - ok_answers(&run.at_2s)) as f64
                / (run.seconds() - 2.0).max(1e-3);
            let late_delivered = late_answered / f64::from(limit);
            let met = delivered >= 0.90 && late_share < 0.03;
            println!(
                "| {limit} ({burst}) | {} | {rows} | {:.1} | {} | {} ({} + {}) | {:.1} | {:.2} | {late_delivered:.2} | {:.2}% ({late_429} of {late_requests}) | {} |",
                if headers { "sent" } else { "not sent" },
                run.seconds(),
                n(&last["total_requests"]),
                throttled(last),
                n(&last["rate_limited"]),
                n(&last["early"]),
                answered,
                delivered,
                100.0 * late_share,
                if met { "met" } else { "missed" },
            );
        }
    }
    Ok(())
}

/// B. Spurious 429s among 5xx and dropped connections, with and without rate headers.
async fn spurious_429s(bench: &Bench, rows: u64) -> anyhow::Result<()> {
    const RETRY_AFTER_SECS: u64 = 1;
    println!(
        "\nB. spurious 429s: 10% 429 (Retry-After {RETRY_AFTER_SECS} s, enforced), 20% 500, \
         3% dropped connections, no latency, a first sync of {rows} vehicles, ceiling 1000/s, \
         4 in flight"
    );
    println!(
        "ideal: with p = the share of 429s among the requests that reached the fault draw \
         (faults.http_429 / (requests − early − bucket)), q = the share of 5xx and drops among \
         the same, and a Retry-After of RA = {RETRY_AFTER_SECS} s that stops every sender, a \
         client that sends instantly between windows gets on average (1−p)/p non-429 answers \
         per window: ideal non-429 answers/s = (1−p)/(p·RA), ideal 2xx/s = (1−p−q)/(p·RA)."
    );
    println!("target: 2xx/s ≥ 70% of the ideal\n");
    println!("| service | seconds | requests | 429s: spurious / early / bucket | 5xx + drops | 2xx | p | q | 2xx/s | ideal 2xx/s | % of ideal |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let services = [
        (
            "X-RateLimit-Remaining > 0",
            Some(RateLimitConfig {
                rate: 1_000_000.0,
                burst: 100_000,
                headers: true,
            }),
        ),
        ("no rate headers", None),
    ];
    for (name, rate_limit) in services {
        let behaviour = Behaviour {
            rate_limit,
            enforce_retry_after: true,
            faults: Faults {
                http_429: 0.10,
                http_500: 0.20,
                drop: 0.03,
                retry_after_secs: RETRY_AFTER_SECS,
                ..Faults::default()
            },
            ..Behaviour::default()
        };
        let run = bench
            .sync_once(Setup::new(rows, behaviour, 1000.0, 4))
            .await?
            .ensure_ok()?;
        let last = &run.last;
        let faults = &last["faults"];
        let spurious = n(&faults["http_429"]);
        let failed = n(&faults["http_500"])
            + n(&faults["http_503"])
            + n(&faults["http_504"])
            + n(&faults["drop"]);
        let drawn = n(&last["total_requests"]) - n(&last["early"]) - n(&last["rate_limited"]);
        let p = spurious as f64 / drawn.max(1) as f64;
        let q = failed as f64 / drawn.max(1) as f64;
        let ideal = (1.0 - p - q) / (p * RETRY_AFTER_SECS as f64);
        let answered = ok_answers(last) as f64 / run.seconds();
        println!(
            "| {name} | {:.1} | {} | {spurious} / {} / {} | {failed} | {} | {:.3} | {:.3} | {:.1} | {:.1} | {:.0}% |",
            run.seconds(),
            n(&last["total_requests"]),
            n(&last["early"]),
            n(&last["rate_limited"]),
            ok_answers(last),
            p,
            q,
            answered,
            ideal,
            100.0 * answered / ideal,
        );
    }
    Ok(())
}

/// C. Every request 500 for a while, then the service is back: from the sync's start (as
/// issue 14 puts it), and from the moment the service's list has been read (the first 2xx),
/// so that the whole queue waits behind the outage.
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
        let result = self.watch(&sandbox, &config, &feed, setup.switches).await;
        sandbox.stop().await;
        result
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
            .env("RUST_LOG", "warn")
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
            samples.push((now, ok_answers(&st)));
            if at_2s.is_none() && first_request.is_some_and(|t| now - t >= Duration::from_secs(2)) {
                at_2s = Some(st.clone());
            }
            if let Some(status) = exited {
                break (now, st, status);
            }
            let watching_first_ok = matches!(switches.peek(), Some((When::FirstOk, _)));
            let every = if watching_first_ok { 5 } else { 100 };
            tokio::time::sleep(Duration::from_millis(every)).await;
        };
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
