//! What the measurement programs share.

use std::path::{Path, PathBuf};

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
