//! What a month of daily files costs the state (the vehicles' history).
//!
//! Builds a state of N vehicles (default 100,000) from a generated export, then applies D
//! daily full exports (default 30), each with 1% of the vehicles changed, 0.5% gone (sold)
//! and 0.5% new, every operation answered as the service would (a benchmark harness: nothing
//! is sent). Reports the time to commit and answer each day, and the state's size on disk at
//! the end. Built only on what the library offered before the history, so the same program
//! measures a lotsync without it (run it on both and compare).
//!
//! `cargo run --release --example history_bench -- --rows 100000 --days 30`

#[path = "../benches/feedgen.rs"]
mod feedgen;

use clap::Parser;
use lotsync::config::Config;
use lotsync::diff::{diff_file, DiffOptions};
use lotsync::mapper::Profile;
use lotsync::outbox::{Answer, Outbox};
use lotsync::state::State;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 100_000)]
    rows: u64,
    #[arg(long, default_value_t = 30)]
    days: u64,
    /// Where to build the files and the state (emptied first).
    #[arg(long, default_value = "/tmp/lotsync-history-bench")]
    dir: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = &args.dir;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("inbox"))?;
    let added_per_day = args.rows / 200;
    let mut all = Vec::new();
    feedgen::write_feed(&mut all, args.rows + added_per_day * args.days)?;
    let text = String::from_utf8(all)?;
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default().to_owned();
    let pool: Vec<&str> = lines.collect();
    // Listed vehicles (indices into the pool) and how many times each was changed.
    let mut listed: Vec<usize> = (0..args.rows as usize).collect();
    let mut version = vec![0u32; pool.len()];
    let mut next_new = args.rows as usize;

    let config_file = dir.join("lotsync.toml");
    std::fs::write(
        &config_file,
        "[api]\nbase_url = \"http://127.0.0.1:9\"\norganization_id = 100\ntoken_env = \"UNUSED\"\n\
         [state]\ndir = \"state\"\n\
         [[feed]]\nname = \"bench\"\ninbox = \"inbox\"\nlocation_id = 10\n",
    )?;
    let config = Config::load(&config_file)?;
    let outbox = Outbox::new(State::open(&config.state.dir)?);
    let rules = config.feeds[0].rules(100, &[], false);
    let mut answered = 0u64;
    let (mut commit_total, mut answer_total) = (Duration::ZERO, Duration::ZERO);
    for day in 0..=args.days {
        if day > 0 {
            // 0.5% gone, 1% changed (another stock number), 0.5% new.
            let shift = day as usize;
            let mut kept = Vec::with_capacity(listed.len());
            for (i, &n) in listed.iter().enumerate() {
                if (i + shift) % 200 == 7 {
                    continue;
                }
                if (i + 3 * shift) % 100 == 3 {
                    version[n] += 1;
                }
                kept.push(n);
            }
            listed = kept;
            for _ in 0..added_per_day {
                listed.push(next_new);
                next_new += 1;
            }
        }
        let file = dir.join(format!("inbox/day-{day:02}.csv"));
        write_day(&file, &header, &pool, &listed, &version)?;
        let started = Instant::now();
        let planned = diff_file(
            &outbox,
            rules.clone(),
            &Profile::auto(),
            10,
            &file,
            DiffOptions::committed(),
        )?;
        let committed = started.elapsed();
        let mut ops = 0u64;
        loop {
            let batch = outbox.take(100, 1024)?;
            if batch.is_empty() {
                break;
            }
            for e in batch {
                answered += 1;
                ops += 1;
                let answer = Answer::Applied {
                    service_id: Some(answered),
                    sold: None,
                };
                outbox.acknowledge(e.seq, &answer)?;
            }
        }
        outbox.flush()?;
        let answering = started.elapsed() - committed;
        if day > 0 {
            commit_total += committed;
            answer_total += answering;
        }
        let c = &planned.plan.counts;
        println!(
            "day {day:2}: {} create, {} update, {} sold; planned and committed in {:.2} s, {ops} answered in {:.2} s",
            c.create,
            c.update,
            c.sold,
            committed.as_secs_f64(),
            answering.as_secs_f64()
        );
        std::fs::remove_file(&file)?;
    }
    let on_disk = outbox.state().size_on_disk()?;
    let stored = outbox.state().vehicle_count() as u64;
    drop(outbox);
    let du = dir_size(&config.state.dir)?;
    println!(
        "days 1 to {}: planned and committed in {:.1} s, answered in {:.1} s in all",
        args.days,
        commit_total.as_secs_f64(),
        answer_total.as_secs_f64()
    );
    println!(
        "on disk: {:.1} MB (state.db and its WAL), state dir {:.1} MB, for {stored} vehicles",
        on_disk as f64 / 1e6,
        du as f64 / 1e6
    );
    Ok(())
}

/// A day's export: the listed vehicles, each changed one `version` times carrying another
/// stock number.
fn write_day(
    path: &Path,
    header: &str,
    pool: &[&str],
    listed: &[usize],
    version: &[u32],
) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(out, "{header}")?;
    for &n in listed {
        match version[n] {
            0 => writeln!(out, "{}", pool[n])?,
            v => writeln!(
                out,
                "{}",
                pool[n].replacen(&format!(",S{n:07},"), &format!(",S{n:07}V{v},"), 1)
            )?,
        }
    }
    out.flush()
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
