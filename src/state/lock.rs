//! The state dir's lock: an exclusive advisory lock on `lock`, holding the owner's pid, so a
//! second process is told who owns the state instead of waiting or failing obscurely. The
//! kernel drops the lock when the owner exits, however it exits.

use super::StateError;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

#[derive(Debug)]
pub(super) struct StateLock {
    _file: File,
}

impl StateLock {
    pub(super) fn take(path: &Path) -> Result<StateLock, StateError> {
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
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                return Err(StateError::InUse {
                    pid: if pid.is_empty() {
                        "unknown".into()
                    } else {
                        pid.into()
                    },
                });
            }
            Err(TryLockError::Error(e)) => return Err(dir_error(e)),
        }
        file.set_len(0).map_err(dir_error)?;
        file.rewind().map_err(dir_error)?;
        writeln!(file, "{}", std::process::id()).map_err(dir_error)?;
        Ok(StateLock { _file: file })
    }
}
