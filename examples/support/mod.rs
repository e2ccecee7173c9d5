//! What the measurement programs share.

use std::path::{Path, PathBuf};

/// The release `lotsync` binary beside this example's own (`target/release/lotsync`).
pub fn release_binary() -> anyhow::Result<PathBuf> {
    std::env::current_exe()?
        .parent()
        .and_then(Path::parent)
        .map(|release| release.join("lotsync"))
        .filter(|p| p.is_file())
        .ok_or_else(|| anyhow::anyhow!("build the binary first: cargo build --release"))
}
