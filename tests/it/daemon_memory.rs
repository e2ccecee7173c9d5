//! `lotsync run`'s memory after a big file: a 5,000-vehicle lot's first export commits 5,000
//! creates in one transaction. Once the file is filed, what the daemon allocated and holds
//! (its anonymous resident memory) is below 64 MiB, and a second export (1% repriced) leaves
//! it there. A real process against the sandbox on loopback, the real SQLite state on disk.
//!
//! The debug build's binary maps some 30 MiB more than the release build's, so its whole
//! resident size is printed but the bound is on the anonymous part; the release figure is
//! `examples/soak_bench`'s.

use crate::common;

use common::fleet::{export, Car};
use common::site::{drop_file, reports, Site};
use common::{sandbox_with, state, vehicles};
use lotsync::sandbox::Behaviour;
use std::time::Duration;

/// The bound for a 5,000-vehicle lot.
const BOUND_MIB: f64 = 64.0;

/// A figure of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`), in MiB.
fn status_mib(pid: u32, key: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("Linux /proc");
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .expect("the figure in /proc/<pid>/status")
        / 1024.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5000_vehicle_lot_leaves_the_daemon_below_64_mib() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("daemon-memory", &sb.base_url());
    let inbox = site.inbox();
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;
    let pid = daemon.child.id();
    let idle = status_mib(pid, "RssAnon:");
    let mut cars: Vec<Car> = (0..5_000).map(Car::new).collect();
    drop_file(&inbox, "first.csv", export(&cars).as_bytes());
    site.wait_until(Duration::from_secs(300), "first.csv filed", || {
        reports(&inbox, "archive").len() == 1
    })
    .await;
    let first = status_mib(pid, "RssAnon:");
    for car in cars.iter_mut().filter(|c| c.n % 100 == 7) {
        car.price += 500;
    }
    drop_file(&inbox, "second.csv", export(&cars).as_bytes());
    site.wait_until(Duration::from_secs(120), "second.csv filed", || {
        reports(&inbox, "archive").len() == 2
    })
    .await;
    let second = status_mib(pid, "RssAnon:");
    let (whole, peak) = (status_mib(pid, "VmRSS:"), status_mib(pid, "VmHWM:"));
    println!(
        "anonymous RSS of lotsync run: {idle:.1} MiB idle, {first:.1} MiB after the first file \
         (5,000 creates), {second:.1} MiB after the second (50 updates; whole RSS {whole:.1} \
         MiB, peak {peak:.1} MiB)"
    );
    assert_eq!(vehicles(&state(&sb).await), 5_000);
    assert!(
        first < BOUND_MIB,
        "{first:.1} MiB anonymous after the first file (bound {BOUND_MIB} MiB; peak RSS \
         {peak:.1} MiB)"
    );
    assert!(
        second < BOUND_MIB,
        "{second:.1} MiB anonymous after the second file (bound {BOUND_MIB} MiB)"
    );
}
