//! What the measurement programs share.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// What every measurement starts from: the release binary (see [`release_binary`]) and `dir`
/// emptied, so that no state or inbox of an earlier run counts.
pub fn start_fresh(dir: &Path) -> anyhow::Result<PathBuf> {
    let lotsync = release_binary()?;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    Ok(lotsync)
}

/// The release `lotsync` binary beside this example's own (`target/release/lotsync`).
fn release_binary() -> anyhow::Result<PathBuf> {
    std::env::current_exe()?
        .parent()
        .and_then(Path::parent)
        .map(|release| release.join("lotsync"))
        .filter(|p| p.is_file())
        .ok_or_else(|| anyhow::anyhow!("build the binary first: cargo build --release"))
}

/// Waits up to 10 s for `path` to appear (the daemon's socket: it has started).
#[allow(dead_code)]
pub fn wait_for(path: &Path) -> anyhow::Result<()> {
    let start = Instant::now();
    while !path.exists() {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(10),
            "the daemon did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Stops a daemon with SIGTERM and waits for it.
#[allow(dead_code)]
pub fn stop(mut daemon: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status();
    let _ = daemon.wait();
}

/// The reports filed in a feed's `archive/` (one per applied file).
#[allow(dead_code)]
pub fn count_reports(dir: &Path) -> usize {
    let mut n = 0;
    for day in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(day.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            n += usize::from(file.file_name().to_string_lossy().ends_with(".report.json"));
        }
    }
    n
}

/// A figure of `/proc/<pid>/status` in KiB (`VmRSS:`, `VmHWM:`).
#[allow(dead_code)]
pub fn status_kib(pid: u32, key: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with(key))
        .ok_or_else(|| anyhow::anyhow!("no {key} in /proc/{pid}/status"))?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("odd {key}"))?
        .parse()?)
}
