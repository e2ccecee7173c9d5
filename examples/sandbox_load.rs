//! Load on the sandbox: how many requests per second it serves on loopback with keep-alive.
//!
//! `cargo run --release --example sandbox_load -- [--connections 32] [--seconds 5] [--mix mixed]
//! [--url http://127.0.0.1:8080]`
//!
//! Without `--url` the sandbox runs in this process on its own runtime (one worker thread, so
//! the load generator keeps the other core); with `--url` it loads a `lotsync sandbox` started
//! elsewhere. Requests go through the real `ApiClient`, one keep-alive connection per worker.

use clap::{Parser, ValueEnum};
use lotsync::api::{ApiClient, ApiToken, ClientSettings, VehiclePayload};
use lotsync::sandbox::{RunningSandbox, SandboxConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    /// Concurrent workers, each with its own keep-alive connection.
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// How long to measure.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    #[arg(long, value_enum, default_value_t = Mix::Mixed)]
    mix: Mix,
    /// An already running sandbox (default: one in this process).
    #[arg(long)]
    url: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Mix {
    /// GET /v1/inventory/{id} only.
    Get,
    /// POST /v1/inventory (modify) only.
    Post,
    /// Half and half.
    Mixed,
}

const VEHICLES: u32 = 500;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // The sandbox gets its own runtime with one worker, the load generator another.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let _sandbox;
    let url = match &args.url {
        Some(url) => url.clone(),
        None => {
            let sb = server_rt.block_on(RunningSandbox::start(
                SandboxConfig::default(),
                "127.0.0.1:0".parse()?,
            ))?;
            let url = sb.base_url();
            _sandbox = sb;
            url
        }
    };
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    client_rt.block_on(load(args, url))
}

fn vehicle(n: u32) -> VehiclePayload {
    let mut p = VehiclePayload::new(10, format!("LOAD{n:05}"), format!("LOADVIN{n:010}"));
    p.make = Some("Toyota".into());
    p.model = Some("Camry".into());
    p.year = Some(2022);
    p.miles = Some(u64::from(n) * 100);
    p
}

async fn load(args: Args, url: String) -> anyhow::Result<()> {
    let client = |url: &str| -> anyhow::Result<ApiClient> {
        Ok(ApiClient::new(ClientSettings::new(
            url,
            100,
            ApiToken::new("sandbox-token"),
        ))?)
    };
    let setup = client(&url)?;
    let mut ids = Vec::new();
    for n in 0..VEHICLES {
        ids.push(setup.upsert_vehicle(&vehicle(n)).await?.value.id);
    }
    let ids = Arc::new(ids);

    println!(
        "loading {url} with {} connections for {} s ({})",
        args.connections,
        args.seconds,
        match args.mix {
            Mix::Get => "GET",
            Mix::Post => "POST",
            Mix::Mixed => "GET and POST",
        }
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = tokio::task::JoinSet::new();
    let started = Instant::now();
    for w in 0..args.connections {
        // A client per worker: its own connection pool, so one keep-alive connection each.
        let api = client(&url)?;
        let (stop, ids, mix) = (stop.clone(), ids.clone(), args.mix);
        workers.spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0u64;
            let mut i = w as u32;
            while !stop.load(Ordering::Relaxed) {
                i = i.wrapping_add(7919);
                let n = i % VEHICLES;
                let get = match mix {
                    Mix::Get => true,
                    Mix::Post => false,
                    Mix::Mixed => i.is_multiple_of(2),
                };
                let t = Instant::now();
                let ok = if get {
                    api.get_vehicle(ids[n as usize]).await.is_ok()
                } else {
                    api.upsert_vehicle(&vehicle(n)).await.is_ok()
                };
                latencies.push(t.elapsed());
                errors += u64::from(!ok);
            }
            (latencies, errors)
        });
    }
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    let mut errors = 0;
    while let Some(done) = workers.join_next().await {
        let (l, e) = done?;
        latencies.extend(l);
        errors += e;
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    println!(
        "{} requests in {elapsed:.2} s: {:.0} requests/s, {errors} errors, latency p50 {:.2} ms, p99 {:.2} ms",
        latencies.len(),
        latencies.len() as f64 / elapsed,
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
    );
    Ok(())
}
