//! Whole-process figures for `lotsync plan` against a large state.
//!
//! Builds a state of N vehicles (default 100,000) from a generated export, answering every
//! create as the service would (a benchmark harness: nothing is sent), then times the real
//! binary, each run a fresh process:
//! - a next file with 1% of the vehicles changed, 0.5% removed and 0.5% added;
//! - a re-drop of the unchanged file (the same bytes as the file last applied);
//! - the same vehicles with the columns in another order (new bytes, nothing changed): the
//!   whole file read, mapped and diffed, no operation;
//!
//! and reports bytes on disk per stored vehicle.
//!
//! `cargo build --release && cargo run --release --example plan_bench -- --rows 100000`

#[path = "../benches/feedgen.rs"]
mod feedgen;

mod support;

use clap::Parser;
use lotsync::config::Config;
use lotsync::diff::{diff_file, DiffOptions};
use lotsync::mapper::Profile;
use lotsync::outbox::{Answer, Outbox};
use lotsync::state::State;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 100_000)]
    rows: u64,
    /// Where to build the files and the state (emptied first).
    #[arg(long, default_value = "/tmp/lotsync-plan-bench")]
    dir: PathBuf,
    /// Timed runs of each case (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let lotsync = support::start_fresh(&args.dir)?;
    std::fs::create_dir_all(args.dir.join("inbox"))?;
    let dir = &args.dir;
    let rows = args.rows;
    let added = rows / 200;

    // The base export and its variants, from one generated feed of rows + added vehicles.
    let mut all = Vec::new();
    feedgen::write_feed(&mut all, rows + added)?;
    let text = String::from_utf8(all)?;
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let vehicles: Vec<&str> = lines.collect();
    let (base, extra) = vehicles.split_at(rows as usize);
    let base_file = dir.join("inbox/base.csv");
    write_lines(&base_file, header, base.iter().copied())?;
    let next_file = dir.join("inbox/next.csv");
    let next = base.iter().enumerate().filter_map(|(n, line)| {
        if n % 200 == 7 {
            return None; // 0.5% removed
        }
        if n % 100 == 3 {
            // 1% changed: another stock number
            return Some(line.replacen(&format!(",S{n:07},"), &format!(",S{n:07}X,"), 1));
        }
        Some((*line).to_owned())
    });
    write_lines(
        &next_file,
        header,
        next.chain(extra.iter().map(|l| (*l).to_owned())),
    )?;
    let reordered_file = dir.join("inbox/reordered.csv");
    reorder(&base_file, &reordered_file)?;

    let config_file = dir.join("lotsync.toml");
    std::fs::write(
        &config_file,
        "[api]\nbase_url = \"http://127.0.0.1:9\"\norganization_id = 100\ntoken_env = \"UNUSED\"\n\
         [state]\ndir = \"state\"\n\
         [[feed]]\nname = \"bench\"\ninbox = \"inbox\"\nlocation_id = 10\n",
    )?;
    let config = Config::load(&config_file)?;

    // The state: the base file applied and every create answered.
    let started = Instant::now();
    {
        let outbox = Outbox::new(State::open(&config.state.dir)?);
        let feed = &config.feeds[0];
        let rules = feed.rules(100, &[], false);
        let planned = diff_file(
            &outbox,
            rules,
            &Profile::auto(),
            10,
            &base_file,
            DiffOptions::committed(),
        )?;
        let committed = started.elapsed();
        let mut answered = 0u64;
        loop {
            let batch = outbox.take(100, 1024)?;
            if batch.is_empty() {
                break;
            }
            for e in batch {
                answered += 1;
                let answer = Answer::Applied {
                    service_id: Some(answered),
                    sold: None,
                };
                outbox.acknowledge(e.seq, &answer)?;
            }
        }
        outbox.flush()?;
        let stored = outbox.state().vehicle_count() as u64;
        let on_disk = outbox.state().size_on_disk()?;
        println!(
            "state: {} creates planned and committed in {:.2} s, {answered} answered in {:.1} s",
            planned.plan.counts.create,
            committed.as_secs_f64(),
            (started.elapsed() - committed).as_secs_f64()
        );
        println!(
            "on disk: {:.1} MB for {stored} vehicles = {} bytes per vehicle (state.db and its WAL)",
            on_disk as f64 / 1e6,
            on_disk / stored.max(1)
        );
    }
    let du = dir_size(&config.state.dir)?;
    println!(
        "state dir: {:.1} MB = {} bytes per vehicle (sum of file sizes)",
        du as f64 / 1e6,
        du / rows.max(1)
    );

    let time = |file: &Path| -> anyhow::Result<Duration> {
        let mut times = Vec::new();
        for _ in 0..args.runs {
            let started = Instant::now();
            let status = Command::new(&lotsync)
                .args(["plan", "--format", "ndjson", "--config"])
                .arg(&config_file)
                .arg(file)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()?;
            times.push(started.elapsed());
            anyhow::ensure!(status.success(), "lotsync plan failed: {status}");
        }
        times.sort();
        Ok(times[times.len() / 2])
    };
    let next_time = time(&next_file)?;
    let redrop_time = time(&base_file)?;
    let reordered_time = time(&reordered_file)?;
    let summary = Command::new(&lotsync)
        .args(["plan", "--config"])
        .arg(&config_file)
        .arg(&next_file)
        .output()?;
    let text = String::from_utf8_lossy(&summary.stdout);
    if let Some(counts) = text.lines().nth(1) {
        println!("next file: {}", counts.trim());
    }
    println!("lotsync plan, whole process, median of {}:", args.runs);
    println!(
        "  next file (1% changed, 0.5% removed, 0.5% added): {:.3} s",
        next_time.as_secs_f64()
    );
    println!(
        "  re-drop of the unchanged file (same bytes):         {:.3} s",
        redrop_time.as_secs_f64()
    );
    println!(
        "  same vehicles, columns reordered (read in full):    {:.3} s",
        reordered_time.as_secs_f64()
    );
    Ok(())
}

fn write_lines(
    path: &Path,
    header: &str,
    lines: impl Iterator<Item = impl AsRef<str>>,
) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(out, "{header}")?;
    for line in lines {
        writeln!(out, "{}", line.as_ref())?;
    }
    out.flush()
}

/// The same records with the columns reversed.
fn reorder(from: &Path, to: &Path) -> anyhow::Result<()> {
    let mut reader = csv::Reader::from_path(from)?;
    let mut writer = csv::Writer::from_path(to)?;
    let header: Vec<String> = reader.headers()?.iter().rev().map(str::to_owned).collect();
    writer.write_record(&header)?;
    for record in reader.records() {
        let record = record?;
        writer.write_record(record.iter().rev())?;
    }
    writer.flush()?;
    Ok(())
}

fn dir_size(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}
