//! What the unit tests share: one way to make a temporary folder. (The integration tests have
//! theirs in `tests/common`.)

/// A fresh folder `lotsync-NAME-…` under the system temp dir, removed when dropped.
pub(crate) fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("lotsync-{name}-"))
        .tempdir()
        .expect("a temporary folder")
}
