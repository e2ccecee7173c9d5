//! A dealership's lot over a long run: `lotsync run` with one full feed of a
//! `--vehicles`-vehicle lot against the sandbox on loopback, and `--files` exports renamed into
//! its inbox one after another. Each export turns the lot over as a used-car lot does: 2% of
//! the cars sold (gone from it) and 2% new ones arrived, and 5% changed (price, mileage); so
//! the state grows with every sold car and its history. After each file is filed the daemon's
//! resident memory is read; printed at file 1, 10, 100, … and the last, with the growth from
//! file 100 to the last (the targets: within 10%, and below 64 MiB for a 5,000-vehicle lot).
//! At the end, with the daemon stopped, the state file's size against the bytes its tables
//! hold (the target: at most 2×).
//!
//! `cargo build --release && cargo run --release --example soak_bench -- --files 1000`
//! (`--cache-mib N` sets the state's `[state] cache_mib`; without it the config's default.
//! `--turnover 0 --changed 1` keeps the lot and only changes 1% of it per file, the easy case
//! this bench ran before.)

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
    /// Percent of the lot sold and replaced by new cars in each export.
    #[arg(long, default_value_t = 2)]
    turnover: u64,
    /// Percent of the lot changed (price and mileage) in each export.
    #[arg(long, default_value_t = 5)]
    changed: u64,
    /// The state's page cache, in MiB (`[state] cache_mib`); the default when not given.
    #[arg(long)]
    cache_mib: Option<u64>,
    /// Where to put the config, state and inbox (emptied first).
    #[arg(long, default_value = "/tmp/lotsync-soak-bench")]
    dir: PathBuf,
}

/// The lot of export `n`: the vehicles it lists (by number, each a VIN of its own) and how
/// each reads in it.
struct Lot {
    vehicles: u64,
    turnover: u64,
    changed: u64,
}

impl Lot {
    /// The first and one past the last vehicle on the lot at export `n`: the oldest `turnover`
    /// percent leave each time and as many new ones arrive.
    fn range(&self, n: u64) -> std::ops::Range<u64> {
        let moved = self.vehicles * self.turnover / 100 * n;
        moved..moved + self.vehicles
    }

    /// Whether vehicle `i` changed in export `n` (a different `changed` percent each time).
    fn changed(&self, i: u64, n: u64) -> bool {
        self.changed > 0 && (i + n * 7) % 100 < self.changed
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let lot = Lot {
        vehicles: args.vehicles,
        turnover: args.turnover,
        changed: args.changed,
    };
    lotsync::api::install_crypto_provider();
    let lotsync = support::start_fresh(&args.dir)?;
    let sandbox = RunningSandbox::on_loopback(Behaviour::default()).await?;
    let daemon = start(&lotsync, &args.dir, &sandbox.base_url(), args.cache_mib)?;
    wait_for(&args.dir.join("run/lotsync.sock"))?;
    let inbox = args.dir.join("inbox");
    let state_db = args.dir.join("state/state.db");
    let pid = daemon.id();
    let began = Instant::now();
    let mut rss_mib = Vec::with_capacity(args.files);
    // Of it, what the process allocated (the rest is its binary and libraries, mapped).
    let mut anon_mib = Vec::with_capacity(args.files);
    let mut state_mib = Vec::with_capacity(args.files);
    // The peak while the first file (every vehicle a create) is planned and delivered.
    let mut first_peak = 0.0;
    for n in 0..args.files {
        let tmp = args.dir.join("export.tmp");
        write_export(&tmp, &lot, n as u64)?;
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
        state_mib.push(file_mib(&state_db) + file_mib(&args.dir.join("state/state.db-wal")));
        if n == 0 {
            first_peak = status_kib(pid, "VmHWM:")? as f64 / 1024.0;
        }
        if (n + 1) % 100 == 0 {
            // Progress, for a long run: what the table will show at the end.
            eprintln!(
                "file {}: RSS {:.1} MiB ({:.1} anon), state {:.1} MiB, {:.0} s",
                n + 1,
                rss_mib[n],
                anon_mib[n],
                state_mib[n],
                began.elapsed().as_secs_f64()
            );
        }
    }
    let peak = status_kib(pid, "VmHWM:")? as f64 / 1024.0;
    stop(daemon);
    sandbox.stop().await;
    let file = file_mib(&state_db);
    let held = content_bytes(&state_db)? as f64 / 1024.0 / 1024.0;

    println!(
        "{} exports of a {}-vehicle lot ({}% sold and {}% new, {}% changed each) through \
         lotsync run in {:.0} s, cache_mib {}",
        args.files,
        args.vehicles,
        lot.turnover,
        lot.turnover,
        lot.changed,
        began.elapsed().as_secs_f64(),
        args.cache_mib
            .map_or("default".to_owned(), |c| c.to_string())
    );
    println!(
        "{:>8}  {:>9}  {:>12}  {:>14}",
        "after", "RSS MiB", "of it anon", "state MiB"
    );
    let mut at = 1;
    while at < args.files {
        println!(
            "{at:>8}  {:>9.1}  {:>12.1}  {:>14.1}",
            rss_mib[at - 1],
            anon_mib[at - 1],
            state_mib[at - 1]
        );
        at *= 10;
    }
    let last = args.files - 1;
    println!(
        "{:>8}  {:>9.1}  {:>12.1}  {:>14.1}",
        args.files, rss_mib[last], anon_mib[last], state_mib[last]
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
    println!(
        "state after the daemon stopped: {file:.1} MiB on disk for {held:.1} MiB held \
         (keys and values of every table) = {:.2}x",
        file / held
    );
    Ok(())
}

fn file_mib(path: &Path) -> f64 {
    std::fs::metadata(path).map_or(0.0, |m| m.len() as f64 / 1024.0 / 1024.0)
}

/// The bytes the state's tables hold: every stored column of every row (integers and reals
/// as 8 bytes, text and blobs by length; the generated columns and the indexes not counted),
/// read through a read-only connection.
fn content_bytes(db: &Path) -> anyhow::Result<u64> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        )?
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    let mut total = 0;
    for table in tables {
        // `hidden` 0: a stored column (2 and 3 are generated ones).
        let columns: Vec<String> = conn
            .prepare(&format!(
                "SELECT name FROM pragma_table_xinfo('{table}') WHERE hidden = 0"
            ))?
            .query_map([], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        let sizes: Vec<String> = columns
            .iter()
            .map(|c| {
                format!(
                    "CASE typeof(\"{c}\") WHEN 'integer' THEN 8 WHEN 'real' THEN 8 \
                     WHEN 'null' THEN 0 ELSE length(CAST(\"{c}\" AS BLOB)) END"
                )
            })
            .collect();
        let sql = format!(
            "SELECT coalesce(sum({}), 0) FROM \"{table}\"",
            sizes.join(" + ")
        );
        let bytes: i64 = conn.query_row(&sql, [], |row| row.get(0))?;
        total += u64::try_from(bytes).unwrap_or(0);
    }
    Ok(total)
}

/// Export `n` of the lot: every vehicle on it, the changed ones with another price and
/// mileage.
fn write_export(path: &Path, lot: &Lot, n: u64) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(out, "VIN,Stock,Year,Make,Model,Price,Miles")?;
    for i in lot.range(n) {
        let bump = if lot.changed(i, n) { n } else { 0 };
        let price = 20_000 + i % 5_000 + bump;
        writeln!(
            out,
            "{},S{i:06},2021,Ford,F-150,{price},{}",
            feedgen::vin(i),
            1_000 + i + bump * 10
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
        // As systemd/lotsync.service runs it: two glibc heaps, not one per thread that
        // allocates (without, this daemon held 82.6 MiB after 30 files instead of 45.7).
        .env("MALLOC_ARENA_MAX", "2")
        .args(["run", "--config"])
        .arg(dir.join("lotsync.toml"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("daemon.log"))?)
        .spawn()?)
}

#[path = "../benches/feedgen.rs"]
#[allow(dead_code)]
mod feedgen;
