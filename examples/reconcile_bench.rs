//! Whole-process figure for `lotsync reconcile` under a rate limit: a lot of
//! `--vehicles` (10,000: 100 pages of 100) on the sandbox, a limit of `--rate` requests/s with
//! a burst of 10, and 2% of the requests failing with a 5xx (500 or 504, half each). The target:
//! the reconciliation takes at most 1.3× the time its pages take at the limit, where the burst's
//! pages go at once and the rest at the rate: (pages − burst) / rate (1.8 s for 100 pages at
//! 50/s; 2 s counting every page at the rate).
//!
//! The lot is first synced with the limit off (the real binary, a fresh state), and a few
//! vehicles are changed behind lotsync's back so that there is drift to repair; then the limit
//! and the faults are put, the config tells lotsync the limit, and `lotsync reconcile` runs
//! `--runs` times. Each run's wall time is from the process's start to its exit; the report's
//! `seconds`, `pages` and `retries` and the sandbox's counts of list requests are shown beside.
//!
//! ```text
//! cargo build --release && cargo run --release --example reconcile_bench
//! cargo run --release --example reconcile_bench -- --vehicles 10000 --rate 50 --runs 3
//! ```

#[path = "../benches/feedgen.rs"]
mod feedgen;

mod support;

use clap::Parser;
use lotsync::sandbox::{Behaviour, Faults, RateLimitConfig, RunningSandbox};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    /// Vehicles on the service (and in the state).
    #[arg(long, default_value_t = 10_000)]
    vehicles: u64,
    /// The service's limit, requests per second (the burst is 10).
    #[arg(long, default_value_t = 50.0)]
    rate: f64,
    /// Reconciliations measured.
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// RUST_LOG of the reconciliations (their log goes to stderr).
    #[arg(long, default_value = "warn")]
    log: String,
    /// Where to put the files and the state (emptied first).
    #[arg(long, default_value = "/tmp/lotsync-reconcile-bench")]
    dir: PathBuf,
}

const BURST: u32 = 10;
const LIST: &str = "GET /v1/inventory";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let lotsync = support::start_fresh(&args.dir)?;
    let sandbox = RunningSandbox::on_loopback(Behaviour::default()).await?;
    lotsync::api::install_crypto_provider();
    let http = reqwest::Client::new();
    std::fs::create_dir_all(args.dir.join("inbox"))?;
    let config = args.dir.join("lotsync.toml");
    let feed = args.dir.join("lot.csv");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&feed)?);
    feedgen::write_feed(&mut out, args.vehicles)?;
    drop(out);

    // The lot, synced with the limit off.
    std::fs::write(&config, client_config(&sandbox.base_url(), 1000.0))?;
    let seeded = Instant::now();
    run(
        &lotsync,
        &config,
        &["sync", &feed.display().to_string()],
        "warn",
    )?;
    println!(
        "seeded {} vehicles in {:.1} s",
        args.vehicles,
        seeded.elapsed().as_secs_f64()
    );

    // Drift: a vehicle deleted and a price edited behind lotsync's back.
    let state: Value = get(&http, &sandbox, "state").await?;
    let ids: Vec<u64> = state["vehicles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["vehicle"]["id"].as_u64())
        .collect();
    if let (Some(first), Some(last)) = (ids.first(), ids.last()) {
        http.delete(format!("{}/__sandbox/vehicles/{first}", sandbox.base_url()))
            .send()
            .await?
            .error_for_status()?;
        http.patch(format!("{}/__sandbox/vehicles/{last}", sandbox.base_url()))
            .json(&serde_json::json!({"price": 1}))
            .send()
            .await?
            .error_for_status()?;
    }

    // The limit and the faults, and lotsync told of the limit.
    let behaviour = Behaviour {
        rate_limit: Some(RateLimitConfig {
            rate: args.rate,
            burst: BURST,
            headers: true,
        }),
        faults: Faults {
            seed: 23,
            http_500: 0.01,
            http_504: 0.01,
            ..Faults::default()
        },
        ..Behaviour::default()
    };
    std::fs::write(&config, client_config(&sandbox.base_url(), args.rate))?;
    let pages = args.vehicles.div_ceil(100) as f64;
    let at_limit = (pages - f64::from(BURST)).max(0.0) / args.rate;
    let all_at_rate = pages / args.rate;
    println!(
        "{pages} pages at {}/s, burst {BURST}: {at_limit:.2} s at the limit ({all_at_rate:.2} s \
         with every page at the rate); target at most {:.2} s (1.3 × {all_at_rate:.2})",
        args.rate,
        1.3 * all_at_rate
    );
    println!("run  wall_s  report_s  pages  retries  list_200  list_5xx  429  ops");
    for n in 1..=args.runs {
        // Other faults each run, the same ones for the same run number.
        let mut behaviour = behaviour.clone();
        behaviour.faults.seed = 23 + u64::from(n);
        http.put(format!("{}/__sandbox/behaviour", sandbox.base_url()))
            .json(&behaviour)
            .send()
            .await?
            .error_for_status()?;
        // A full bucket, as after a quiet spell.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = get(&http, &sandbox, "stats").await?;
        let started = Instant::now();
        let stdout = run(
            &lotsync,
            &config,
            &["reconcile", "--format", "json"],
            &args.log,
        )?;
        let wall = started.elapsed().as_secs_f64();
        let after = get(&http, &sandbox, "stats").await?;
        let json: Value = serde_json::from_slice(&stdout)?;
        let report = &json["report"];
        let count = |status: &str| {
            after["requests"][LIST][status].as_u64().unwrap_or(0)
                - before["requests"][LIST][status].as_u64().unwrap_or(0)
        };
        println!(
            "{n:>3}  {wall:>6.2}  {:>8.2}  {:>5}  {:>7}  {:>8}  {:>8}  {:>3}  {:>3}",
            report["seconds"].as_f64().unwrap_or(0.0),
            report["pages"],
            report["retries"],
            count("200"),
            count("500") + count("504"),
            count("429"),
            report["operations"],
        );
    }
    sandbox.stop().await;
    Ok(())
}

/// Runs `lotsync ARGS --config CONFIG` with `RUST_LOG=log`; fails unless it exits 0; its
/// stdout (its log goes to stderr).
fn run(lotsync: &Path, config: &Path, args: &[&str], log: &str) -> anyhow::Result<Vec<u8>> {
    let out = Command::new(lotsync)
        .args(args)
        .arg("--config")
        .arg(config)
        .env("LOTSYNC_BENCH_TOKEN", "sandbox-token")
        .env("RUST_LOG", log)
        .stderr(std::process::Stdio::inherit())
        .stdout(std::process::Stdio::piped())
        .output()?;
    if out.status.code() != Some(0) {
        anyhow::bail!(
            "lotsync {args:?} exited {:?}\n{}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            "(its log above)"
        );
    }
    Ok(out.stdout)
}

async fn get(
    http: &reqwest::Client,
    sandbox: &RunningSandbox,
    what: &str,
) -> anyhow::Result<Value> {
    Ok(http
        .get(format!("{}/__sandbox/{what}", sandbox.base_url()))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?)
}

/// The client's config: the sandbox at `rate` requests/s (burst 10), 16 in flight.
fn client_config(base_url: &str, rate: f64) -> String {
    format!(
        "[api]\nbase_url = \"{base_url}\"\norganization_id = 100\ntoken_env = \"LOTSYNC_BENCH_TOKEN\"\n\
         max_requests_per_second = {rate}\nburst = {BURST}\nmax_in_flight = 16\n\
         [state]\ndir = \"state\"\n[[feed]]\nname = \"main\"\ninbox = \"inbox\"\nlocation_id = 10\n"
    )
}
