//! The state dir's lock: an exclusive advisory lock on `lock`, holding the owner's pid and what
//! it is (`1234 writer run`), so a second process is told who owns the state instead of waiting
//! or failing obscurely. The kernel drops the lock when the owner exits, however it exits.
//!
//! Writers hold it as long as they run. Readers (`status`, `plan`, `why`, `state export`) take
//! it only to create a state that does not exist yet, for a moment; anyone who finds such a
//! reader (or an owner that has not written its name yet) waits for it up to [`READER_WAIT`]
//! rather than failing, so a `lotsync status` run at the wrong instant never stops the daemon
//! from starting.

use super::{Holder, StateError};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a process waits for a reader to let go of the state.
pub const READER_WAIT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(10);

#[derive(Debug)]
pub(super) struct StateLock {
    _file: File,
}

impl StateLock {
    pub(super) fn take(path: &Path, holder: Holder) -> Result<StateLock, StateError> {
        let dir_error = |source| StateError::Dir {
            dir: path.to_owned(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(dir_error)?;
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => {
                    let owner = Owner::read(&mut file);
                    if owner.is_writer() || started.elapsed() >= READER_WAIT {
                        let holder = owner.describe();
                        return Err(StateError::InUse {
                            pid: owner.pid,
                            holder,
                            command: owner.command,
                        });
                    }
                    std::thread::sleep(POLL);
                }
                Err(TryLockError::Error(e)) => return Err(dir_error(e)),
            }
        }
        let (role, command) = match holder {
            Holder::Writer(c) => ("writer", c),
            Holder::Reader(c) => ("reader", c),
        };
        file.set_len(0).map_err(dir_error)?;
        file.rewind().map_err(dir_error)?;
        // One write: `writeln!` on a file writes piece by piece, and a process reading between
        // the pid and the role took a reader for an older lotsync's writer and gave up at once.
        let line = format!("{} {role} {command}\n", std::process::id());
        file.write_all(line.as_bytes()).map_err(dir_error)?;
        Ok(StateLock { _file: file })
    }
}

impl Drop for StateLock {
    /// Says nobody holds it any more before the kernel lets go of the lock, so that the next
    /// one to find it taken never reads a name that left.
    fn drop(&mut self) {
        let _ = self._file.set_len(0);
    }
}

/// What the lock file says of its owner: `pid role command`, or only `pid` (older lotsync).
struct Owner {
    pid: String,
    role: Option<String>,
    command: Option<String>,
}

impl Owner {
    fn read(file: &mut File) -> Owner {
        let mut text = String::new();
        let _ = file.rewind();
        let _ = file.read_to_string(&mut text);
        let mut words = text.split_whitespace();
        Owner {
            pid: words.next().unwrap_or("unknown").to_owned(),
            role: words.next().map(str::to_owned),
            command: words.next().map(str::to_owned),
        }
    }

    /// A writer, or an older lotsync that did not say (which was always a writer).
    fn is_writer(&self) -> bool {
        match self.role.as_deref() {
            Some(role) => role == "writer",
            None => self.pid != "unknown",
        }
    }

    fn describe(&self) -> String {
        match &self.command {
            Some(c) if c == "lotsync" => "lotsync".into(),
            Some(c) => format!("lotsync {c}"),
            None => "lotsync run?".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock file's path in a fresh folder (removed when the guard drops).
    fn temp(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let tmp = crate::testing::temp_dir(&format!("lock-{name}"));
        let path = tmp.path().join("lock");
        (tmp, path)
    }

    /// A writer finding a reader waits for it; a writer finding a writer fails at once.
    #[test]
    fn writers_wait_for_readers_not_for_writers() {
        let (_tmp, path) = temp("wait");
        let reader = StateLock::take(&path, Holder::Reader("status")).unwrap();
        let released = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(reader);
        });
        let started = Instant::now();
        let writer = StateLock::take(&path, Holder::Writer("run")).expect("waited for the reader");
        assert!(started.elapsed() >= Duration::from_millis(250));
        released.join().unwrap();

        let started = Instant::now();
        let err = StateLock::take(&path, Holder::Writer("sync")).unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "no wait for a writer"
        );
        assert!(
            err.to_string().contains(&format!(
                "in use by pid {} (lotsync run)",
                std::process::id()
            )),
            "{err}"
        );
        drop(writer);
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
