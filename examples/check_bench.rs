//! The whole-process figure of `lotsync check --format ndjson` on a 100,000-vehicle export
//! (payloads to a file, problems to a file), against the floor: a raw csv-crate `ByteRecord`
//! scan of the same file (the target: `check` within 10× of it), and next to the in-process
//! parse + map (what `cargo bench --bench ingest` times). Each round times all four back to
//! back and the ratios are taken within a round: on a machine whose speed drifts, a ratio
//! across separate series moves with the machine. Two exports: the generator's, which warns
//! about nothing, and the same with every drive type "2WD" (ambiguous: one warning line per
//! vehicle).
//!
//! `cargo build --release && cargo run --release --example check_bench`

#[path = "../benches/feedgen.rs"]
mod feedgen;
#[path = "../benches/mapping.rs"]
mod mapping;

use clap::Parser;
use mapping::{parse_and_map, raw_scan};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    /// Vehicles in each export.
    #[arg(long, default_value_t = 100_000)]
    rows: u64,
    /// Rounds, each timing the four once; medians are shown.
    #[arg(long, default_value_t = 7)]
    runs: usize,
    /// The lotsync binary to run.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/target/release/lotsync"))]
    bin: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.bin.is_file(),
        "{} not found: build it first (cargo build --release)",
        args.bin.display()
    );
    let dir = std::env::temp_dir().join(format!("lotsync-check-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let clean = dir.join("clean.csv");
    let mut feed = Vec::new();
    feedgen::write_feed(&mut feed, args.rows)?;
    std::fs::write(&clean, &feed)?;
    // Every drive type the generator writes becomes "2WD", which the mapper leaves out with a
    // warning: front or rear cannot be told.
    let mut text = String::from_utf8(feed)?;
    for drive in [
        ",4WD,",
        ",FWD,",
        ",AWD,",
        ",All Wheel Drive,",
        ",Rear Wheel Drive,",
    ] {
        text = text.replace(drive, ",2WD,");
    }
    let warning = dir.join("warning-every-row.csv");
    std::fs::write(&warning, text)?;

    let out = dir.join("out.ndjson");
    let err = dir.join("problems.ndjson");
    let whole = |path: &Path| -> anyhow::Result<Duration> {
        let start = Instant::now();
        let status = Command::new(&args.bin)
            .args(["check", "--format", "ndjson"])
            .arg(path)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out)?)
            .stderr(std::fs::File::create(&err)?)
            .status()?;
        let took = start.elapsed();
        anyhow::ensure!(status.success(), "lotsync check exited with {status}");
        Ok(took)
    };
    let mut rounds = Vec::new();
    for _ in 0..args.runs.max(1) {
        let start = Instant::now();
        black_box(raw_scan(&clean));
        let raw = start.elapsed();
        let start = Instant::now();
        black_box(parse_and_map(&clean));
        let in_process = start.elapsed();
        rounds.push([raw, in_process, whole(&clean)?, whole(&warning)?]);
    }
    let lines = |p: &Path| -> anyhow::Result<usize> {
        Ok(std::fs::read(p)?.iter().filter(|&&b| b == b'\n').count())
    };
    println!(
        "{} vehicles, {:.1} MB; medians of {} interleaved rounds",
        args.rows,
        std::fs::metadata(&clean)?.len() as f64 / 1e6,
        rounds.len()
    );
    println!("| what | time | × raw scan (within a round) |");
    println!("|---|---|---|");
    let rows = [
        (0, "raw csv-crate `ByteRecord` scan, in process"),
        (1, "parse + map, in process (no output)"),
        (2, "`lotsync check --format ndjson`, no warnings"),
        (3, "`lotsync check --format ndjson`, a warning every row"),
    ];
    for (i, name) in rows {
        println!(
            "| {name} | {:.1} ms | {:.2} |",
            ms(median(rounds.iter().map(|r| r[i].as_secs_f64()))),
            median(
                rounds
                    .iter()
                    .map(|r| r[i].as_secs_f64() / r[0].as_secs_f64())
            )
        );
    }
    let warnings = lines(&err)?;
    println!(
        "(the last run wrote {} payload lines and {warnings} problem lines)",
        lines(&out)?
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn ms(seconds: f64) -> f64 {
    seconds * 1e3
}
