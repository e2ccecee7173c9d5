//! Parse + map throughput on a 100,000-vehicle CSV, next to a raw csv-crate ByteRecord scan of
//! the same file in the same run (the target: at least 40% of the raw scan's speed).
//!
//! `cargo bench --bench ingest`
//!
//! After criterion's three groups it prints the share of the raw scan from rounds that time
//! the raw scan, the reader and parse + map back to back (median of the rounds): on a machine
//! shared with other builds the load changes between criterion's groups, and a ratio taken
//! within one round is steadier than one taken across groups.

mod feedgen;
mod mapping;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lotsync::feed::{self, Item, ReadOptions, Record};
use mapping::{parse_and_map, raw_scan};
use std::hint::black_box;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const ROWS: u64 = 100_000;
/// Rounds of the interleaved share measurement.
const ROUNDS: usize = 9;

fn feed_file() -> PathBuf {
    let path = std::env::temp_dir().join(format!("lotsync-ingest-{ROWS}.csv"));
    if !path.exists() {
        let mut out = BufWriter::new(std::fs::File::create(&path).expect("temp file"));
        feedgen::write_feed(&mut out, ROWS).expect("feed written");
        out.flush().expect("feed flushed");
    }
    path
}

/// The reader alone: records with their fields decoded, nothing mapped.
fn parse_only(path: &Path) -> u64 {
    let mut reader = feed::open(path, &ReadOptions::default()).expect("open");
    let mut record = Record::default();
    let mut fields = 0;
    while let Item::Record = reader.next(&mut record).expect("read") {
        fields += record.iter().count() as u64;
    }
    fields
}

fn ingest(c: &mut Criterion) {
    let path = feed_file();
    let bytes = std::fs::metadata(&path).expect("file").len();
    assert_eq!(parse_and_map(&path), ROWS, "every generated vehicle maps");
    let mut group = c.benchmark_group("ingest-100k");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("raw csv ByteRecord scan", |b| b.iter(|| raw_scan(&path)));
    group.bench_function("lotsync parse only", |b| b.iter(|| parse_only(&path)));
    group.bench_function("lotsync parse + map", |b| b.iter(|| parse_and_map(&path)));
    group.finish();
    print_share(&path);
}

/// Times the three readings back to back, `ROUNDS` times, and prints the median share of the
/// raw scan's speed (raw time / lotsync time) with the median times.
fn print_share(path: &Path) {
    let time = |f: fn(&Path) -> u64| {
        let start = Instant::now();
        black_box(f(path));
        start.elapsed()
    };
    let mut rounds: Vec<[Duration; 3]> = (0..ROUNDS)
        .map(|_| [time(raw_scan), time(parse_only), time(parse_and_map)])
        .collect();
    let share = |r: &[Duration; 3], i: usize| r[0].as_secs_f64() / r[i].as_secs_f64() * 100.0;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let parse_share = median(rounds.iter().map(|r| share(r, 1)).collect());
    let map_share = median(rounds.iter().map(|r| share(r, 2)).collect());
    let ms = |i: usize, rounds: &mut Vec<[Duration; 3]>| {
        rounds.sort_by_key(|r| r[i]);
        rounds[rounds.len() / 2][i].as_secs_f64() * 1000.0
    };
    let (raw, parse, map) = (ms(0, &mut rounds), ms(1, &mut rounds), ms(2, &mut rounds));
    println!(
        "share of the raw scan ({ROUNDS} interleaved rounds, medians): raw {raw:.1} ms; \
         parse only {parse:.1} ms ({parse_share:.1}%); parse + map {map:.1} ms ({map_share:.1}%)"
    );
}

criterion_group!(benches, ingest);
criterion_main!(benches);
