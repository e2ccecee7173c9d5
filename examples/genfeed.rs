//! Writes a realistic DMS CSV export of N vehicles, for benchmarks and trying lotsync at scale.
//!
//! `cargo run --release --example genfeed -- --rows 100000 --out /tmp/feed.csv`

#[path = "../benches/feedgen.rs"]
mod feedgen;

use clap::Parser;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

#[derive(Parser)]
struct Args {
    /// Vehicles to write.
    #[arg(long, default_value_t = 100_000)]
    rows: u64,
    /// The file to write.
    #[arg(long)]
    out: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut out = BufWriter::new(std::fs::File::create(&args.out)?);
    feedgen::write_feed(&mut out, args.rows)?;
    out.flush()?;
    let size = std::fs::metadata(&args.out)?.len();
    println!(
        "{}: {} vehicles, {:.1} MB",
        args.out.display(),
        args.rows,
        size as f64 / 1e6
    );
    Ok(())
}
