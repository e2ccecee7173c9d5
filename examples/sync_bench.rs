//! Whole-process figures for `lotsync sync` against the sandbox on loopback.
//!
//! 1. A first sync of N vehicles (default 5,000) against a sandbox with 20 ms added latency and
//!    a limit of 200 requests/s (burst 20) that the client is not told: requests/s and the
//!    share of 429s, with and without the sandbox's X-RateLimit headers.
//! 2. With no limit (20 ms latency still), requests/s as a function of requests in flight.
//!
//! Each run is the real binary in a fresh process with a fresh state; the sandbox runs in this
//! process and is sampled every 100 ms to time the delivery (first request to exit).
//!
//! `cargo build --release && cargo run --release --example sync_bench -- --rows 5000`

#[path = "../benches/feedgen.rs"]
mod feedgen;

mod support;

use clap::Parser;
use lotsync::sandbox::{Behaviour, Faults, RateLimitConfig, RunningSandbox};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    /// Vehicles in the rate-limited first sync.
    #[arg(long, default_value_t = 5_000)]
    rows: u64,
    /// Vehicles in each run of the in-flight sweep.
    #[arg(long, default_value_t = 2_000)]
    sweep_rows: u64,
    /// Where to put the files and states (emptied first).
    #[arg(long, default_value = "/tmp/lotsync-sync-bench")]
    dir: PathBuf,
}

/// What one sync did, as the sandbox saw it.
struct Run {
    requests: u64,
    throttled: u64,
    seconds: f64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    lotsync::api::install_crypto_provider();
    let lotsync = support::start_fresh(&args.dir)?;

    println!("1. first sync of {} vehicles, 20 ms latency, limit 200/s burst 20 not told to the client (ceiling 1000/s, 16 in flight)", args.rows);
    println!("| X-RateLimit headers | requests | 429s | requests/s | answered/s (% of limit) |");
    println!("|---|---|---|---|---|");
    for headers in [true, false] {
        let behaviour = Behaviour {
            rate_limit: Some(RateLimitConfig {
                rate: 200.0,
                burst: 20,
                headers,
            }),
            faults: Faults {
                latency_ms: 20,
                ..Faults::default()
            },
            ..Behaviour::default()
        };
        let run = sync_once(&lotsync, &args.dir, args.rows, behaviour, 1000.0, 16).await?;
        let answered = (run.requests - run.throttled) as f64 / run.seconds;
        println!(
            "| {} | {} | {} ({:.2}%) | {:.1} | {:.1} ({:.0}%) |",
            if headers { "sent" } else { "not sent" },
            run.requests,
            run.throttled,
            100.0 * run.throttled as f64 / run.requests as f64,
            run.requests as f64 / run.seconds,
            answered,
            answered / 2.0
        );
    }

    println!(
        "\n2. no limit, 20 ms latency, {} vehicles: requests/s by requests in flight",
        args.sweep_rows
    );
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
        let run = sync_once(
            &lotsync,
            &args.dir,
            args.sweep_rows,
            behaviour,
            100_000.0,
            in_flight,
        )
        .await?;
        println!("| {in_flight} | {:.1} |", run.requests as f64 / run.seconds);
    }
    Ok(())
}

/// One first sync of `rows` generated vehicles against a fresh sandbox.
async fn sync_once(
    lotsync: &Path,
    dir: &Path,
    rows: u64,
    behaviour: Behaviour,
    ceiling: f64,
    in_flight: u32,
) -> anyhow::Result<Run> {
    let sandbox = RunningSandbox::on_loopback(behaviour).await?;
    let run_dir = dir.join(format!("run-{}", fastrand::u64(..)));
    std::fs::create_dir_all(run_dir.join("inbox"))?;
    let feed = run_dir.join("feed.csv");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&feed)?);
    feedgen::write_feed(&mut out, rows)?;
    drop(out);
    let config = run_dir.join("lotsync.toml");
    std::fs::write(
        &config,
        format!(
            "[api]\nbase_url = \"{}\"\norganization_id = 100\ntoken_env = \"LOTSYNC_BENCH_TOKEN\"\n\
             max_requests_per_second = {ceiling}\nmax_in_flight = {in_flight}\n\
             [state]\ndir = \"state\"\n[[feed]]\nname = \"main\"\ninbox = \"inbox\"\nlocation_id = 10\n",
            sandbox.base_url()
        ),
    )?;
    let mut child = Command::new(lotsync)
        .arg("sync")
        .arg("--config")
        .arg(&config)
        .arg(&feed)
        .env("LOTSYNC_BENCH_TOKEN", "sandbox-token")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    let mut first: Option<Instant> = None;
    loop {
        let st = sandbox_stats(&sandbox).await?;
        if first.is_none() && st["total_requests"].as_u64().unwrap_or(0) > 0 {
            first = Some(Instant::now());
        }
        if let Some(status) = child.try_wait()? {
            anyhow::ensure!(status.code() == Some(0), "lotsync sync exited {status}");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let end = Instant::now();
    let st = sandbox_stats(&sandbox).await?;
    sandbox.stop().await;
    let first = first.ok_or_else(|| anyhow::anyhow!("no request was sent"))?;
    Ok(Run {
        requests: st["total_requests"].as_u64().unwrap_or(0),
        throttled: st["rate_limited"].as_u64().unwrap_or(0),
        seconds: (end - first).as_secs_f64().max(1e-3),
    })
}

async fn sandbox_stats(sandbox: &RunningSandbox) -> anyhow::Result<Value> {
    Ok(
        reqwest::get(format!("{}/__sandbox/stats", sandbox.base_url()))
            .await?
            .json()
            .await?,
    )
}
