//! Memory over a long run (issue 25 item 7): `lotsync run` with one full feed of a
//! `--vehicles`-vehicle lot against the sandbox on loopback, and `--files` exports renamed into
//! its inbox one after another, each with the prices of 1% of the lot changed. The daemon's
//! resident memory is read after each file is filed, and printed at file 1, 10, 100, … and the
//! last, with the growth from file 100 to the last (the target: within 10%, and below 64 MiB
//! for a 5,000-vehicle lot).
//!
//! `cargo build --release && cargo run --release --example soak_bench -- --files 1000`
//! (`--cache-mib N` sets the state's `[state] cache_mib`; without it the config's default.)

mod support;

use clap::Parser;
use lotsync::sandbox::{Behaviour, RunningSandbox};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{count_reports, status_kib, stop, wait_for};

#[derive(Parser)]
struct Args {
    /// Vehicles in the lot.
    #[arg(long, default_value_t = 5_000)]
    vehicles: u64,
    /// Exports dropped one after another.
    #[arg(long, default_value_t = 1_000)]
    files: usize,
    /// The state's page cache, in MiB (`[state] cache_mib`); the default when not given.
    #[arg(long)]
    cache_mib: Option<u64>,
    /// Where to put the config, state and inbox (emptied first).
    #[arg(long, default_value = "/tmp/lotsync-soak-bench")]
    dir: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    lotsync::api::install_crypto_provider();
    let lotsync = support::start_fresh(&args.dir)?;
    let sandbox = RunningSandbox::on_loopback(Behaviour::default()).await?;
    let daemon = start(&lotsync, &args.dir, &sandbox.base_url(), args.cache_mib)?;
    wait_for(&args.dir.join("run/lotsync.sock"))?;
    let inbox = args.dir.join("inbox");
    let pid = daemon.id();
    let began = Instant::now();
    let mut rss_mib = Vec::with_capacity(args.files);
    // Of it, what the process allocated (the rest is its binary and libraries, mapped).
    let mut anon_mib = Vec::with_capacity(args.files);
    // The peak while the first file (every vehicle a create) is planned and delivered.
    let mut first_peak = 0.0;
    for n in 0..args.files {
        let tmp = args.dir.join("export.tmp");
        write_export(&tmp, args.vehicles, n)?;
        std::fs::rename(&tmp, inbox.join(format!("export-{n:05}.csv")))?;
        let dropped = Instant::now();
        while count_reports(&inbox.join("archive")) <= n {
            anyhow::ensure!(
                dropped.elapsed() < Duration::from_secs(120),
                "file {n} was not filed in 2 minutes (see {})",
                args.dir.join("daemon.log").display()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        rss_mib.push(status_kib(pid, "VmRSS:")? as f64 / 1024.0);
        anon_mib.push(status_kib(pid, "RssAnon:")? as f64 / 1024.0);
        if n == 0 {
            first_peak = status_kib(pid, "VmHWM:")? as f64 / 1024.0;
        }
    }
    let peak = status_kib(pid, "VmHWM:")? as f64 / 1024.0;
    stop(daemon);
    sandbox.stop().await;

    println!(
        "{} exports of a {}-vehicle lot (1% repriced each) through lotsync run in {:.0} s, \
         cache_mib {}",
        args.files,
        args.vehicles,
        began.elapsed().as_secs_f64(),
        args.cache_mib
            .map_or("default".to_owned(), |c| c.to_string())
    );
    println!("{:>8}  {:>9}  {:>12}", "after", "RSS MiB", "of it anon");
    let mut at = 1;
    while at < args.files {
        println!(
            "{at:>8}  {:>9.1}  {:>12.1}",
            rss_mib[at - 1],
            anon_mib[at - 1]
        );
        at *= 10;
    }
    let last = args.files - 1;
    println!(
        "{:>8}  {:>9.1}  {:>12.1}",
        args.files, rss_mib[last], anon_mib[last]
    );
    println!("peak RSS {peak:.1} MiB ({first_peak:.1} MiB by the end of the first file)");
    if args.files >= 100 {
        let (hundred, last) = (rss_mib[99], rss_mib[args.files - 1]);
        println!(
            "growth from file 100 to file {}: {:+.1}% ({hundred:.1} -> {last:.1} MiB)",
            args.files,
            (last - hundred) / hundred * 100.0
        );
    }
    Ok(())
}

/// Export `n` of the lot: every vehicle, with 1% of them (a different 1% each time) repriced.
fn write_export(path: &Path, vehicles: u64, n: usize) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(out, "VIN,Stock,Year,Make,Model,Price,Miles")?;
    for i in 0..vehicles {
        let repriced = i % 100 == n as u64 % 100;
        let price = 20_000 + i % 5_000 + if repriced { n as u64 } else { 0 };
        writeln!(
            out,
            "{},S{i:06},2021,Ford,F-150,{price},{}",
            feedgen::vin(i),
            1_000 + i
        )?;
    }
    out.flush()?;
    Ok(())
}

/// The daemon with one full feed at location 10, its log in `dir/daemon.log`.
fn start(
    lotsync: &Path,
    dir: &Path,
    base_url: &str,
    cache_mib: Option<u64>,
) -> anyhow::Result<Child> {
    std::fs::create_dir_all(dir.join("inbox"))?;
    lotsync::config::write_token_file(&dir.join("token"), "sandbox-token\n")?;
    let cache = cache_mib.map_or(String::new(), |c| format!("cache_mib = {c}\n"));
    let config = format!(
        "[api]\nbase_url = \"{base_url}\"\norganization_id = 100\ntoken_file = \"token\"\n\
         max_requests_per_second = 500\n[state]\ndir = \"state\"\n{cache}\
         [daemon]\nsocket = \"run/lotsync.sock\"\n\
         [[feed]]\nname = \"lot\"\ninbox = \"inbox\"\nlocation_id = 10\nmode = \"full\"\n"
    );
    std::fs::write(dir.join("lotsync.toml"), config)?;
    Ok(Command::new(lotsync)
        .args(["run", "--config"])
        .arg(dir.join("lotsync.toml"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("daemon.log"))?)
        .spawn()?)
}

#[path = "../benches/feedgen.rs"]
#[allow(dead_code)]
mod feedgen;
