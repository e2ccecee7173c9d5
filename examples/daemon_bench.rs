//! Whole-process figures for `lotsync run` against the sandbox on loopback:
//!
//! 1. latency: a complete file renamed into a watched inbox, to the first request the service
//!    sees for it (p50 and p95 over `--drops` drops; a rename needs no settle time);
//! 2. idle: CPU time and resident memory of the daemon watching 5 inboxes and doing nothing.
//!
//! `cargo build --release && cargo run --release --example daemon_bench`

mod support;

use support::{count_reports, status_kib, stop, wait_for};

use clap::Parser;
use lotsync::sandbox::{Behaviour, RunningSandbox};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    /// Files dropped one after another for the latency figures.
    #[arg(long, default_value_t = 20)]
    drops: usize,
    /// How long the idle daemon is watched.
    #[arg(long, default_value_t = 30)]
    idle_secs: u64,
    /// Where to put configs, states and inboxes (emptied first).
    #[arg(long, default_value = "/tmp/lotsync-daemon-bench")]
    dir: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    lotsync::api::install_crypto_provider();
    let lotsync = support::start_fresh(&args.dir)?;
    let sandbox = RunningSandbox::on_loopback(Behaviour::default()).await?;
    let http = reqwest::Client::new();

    // 1. Latency: a delta feed, one new vehicle per file.
    let dir = args.dir.join("latency");
    let daemon = start(&lotsync, &dir, &sandbox.base_url(), 1)?;
    let inbox = dir.join("feed-0");
    wait_for(&dir.join("run/lotsync.sock"))?;
    let mut latencies = Vec::with_capacity(args.drops);
    for i in 0..args.drops {
        let before = requests(&http, &sandbox).await?;
        let tmp = dir.join(format!("drop-{i}.csv"));
        std::fs::write(
            &tmp,
            format!(
                "VIN,Stock,Year,Make,Model,Price,Miles\n{},S{i:05},2021,Ford,F-150,\"$30000\",{}\n",
                feedgen::vin(i as u64),
                1000 + i
            ),
        )?;
        // Written aside, then renamed in: the way export tools drop a complete file.
        let dropped = Instant::now();
        std::fs::rename(&tmp, inbox.join(format!("drop-{i}.csv")))?;
        loop {
            if requests(&http, &sandbox).await? > before {
                break;
            }
            anyhow::ensure!(
                dropped.elapsed() < Duration::from_secs(30),
                "no request for drop {i}"
            );
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
        latencies.push(dropped.elapsed());
        // The file is done before the next one comes.
        while count_reports(&inbox.join("archive")) <= i {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop(daemon);
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize];
    println!(
        "rename into the inbox -> first request at the service, {} drops: p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms",
        latencies.len(),
        pct(0.5).as_secs_f64() * 1000.0,
        pct(0.95).as_secs_f64() * 1000.0,
        latencies[latencies.len() - 1].as_secs_f64() * 1000.0
    );

    // 2. Idle: 5 inboxes, nothing arriving.
    let dir = args.dir.join("idle");
    let daemon = start(&lotsync, &dir, &sandbox.base_url(), 5)?;
    wait_for(&dir.join("run/lotsync.sock"))?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pid = daemon.id();
    let (cpu0, at0) = (cpu_ticks(pid)?, Instant::now());
    tokio::time::sleep(Duration::from_secs(args.idle_secs)).await;
    let (cpu1, secs) = (cpu_ticks(pid)?, at0.elapsed().as_secs_f64());
    let ticks_per_sec = clock_ticks()?;
    let cpu_secs = (cpu1 - cpu0) as f64 / ticks_per_sec;
    let rss = status_kib(pid, "VmRSS:")?;
    let hwm = status_kib(pid, "VmHWM:")?;
    println!(
        "idle, watching 5 inboxes for {secs:.0} s: CPU {:.3}% of one core ({cpu_secs:.2} s), RSS {:.1} MiB (peak {:.1} MiB)",
        cpu_secs / secs * 100.0,
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    stop(daemon);
    sandbox.stop().await;
    Ok(())
}

/// The daemon with `feeds` delta feeds, its log in `dir/daemon.log`.
fn start(lotsync: &Path, dir: &Path, base_url: &str, feeds: usize) -> anyhow::Result<Child> {
    std::fs::create_dir_all(dir)?;
    lotsync::config::write_token_file(&dir.join("token"), "sandbox-token\n")?;
    let mut config = format!(
        "[api]\nbase_url = \"{base_url}\"\norganization_id = 100\ntoken_file = \"token\"\n\
         max_requests_per_second = 100\n[state]\ndir = \"state\"\n\
         [daemon]\nsocket = \"run/lotsync.sock\"\n"
    );
    for i in 0..feeds {
        std::fs::create_dir_all(dir.join(format!("feed-{i}")))?;
        config.push_str(&format!(
            "[[feed]]\nname = \"feed-{i}\"\ninbox = \"feed-{i}\"\nlocation_id = 10\nmode = \"delta\"\n"
        ));
    }
    std::fs::write(dir.join("lotsync.toml"), config)?;
    Ok(Command::new(lotsync)
        .args(["run", "--config"])
        .arg(dir.join("lotsync.toml"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("daemon.log"))?)
        .spawn()?)
}

async fn requests(http: &reqwest::Client, sandbox: &RunningSandbox) -> anyhow::Result<u64> {
    let stats: Value = http
        .get(format!("{}/__sandbox/stats", sandbox.base_url()))
        .send()
        .await?
        .json()
        .await?;
    stats["total_requests"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("no total_requests in {stats}"))
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let rest = stat
        .rsplit_once(')')
        .ok_or_else(|| anyhow::anyhow!("odd /proc/{pid}/stat"))?
        .1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Ok(fields[11].parse::<u64>()? + fields[12].parse::<u64>()?)
}

fn clock_ticks() -> anyhow::Result<f64> {
    let out = Command::new("getconf").arg("CLK_TCK").output()?;
    Ok(String::from_utf8(out.stdout)?.trim().parse()?)
}

#[path = "../benches/feedgen.rs"]
#[allow(dead_code)]
mod feedgen;
