//! stdout for the commands' output. A reader that stops reading (`lotsync status | head -1`,
//! `| true`) closes the pipe: that is the reader's choice, not a failure of the command, so a
//! write into a closed pipe counts as written and the command ends with its own exit code
//! (Rust ignores SIGPIPE, so the write fails with EPIPE instead of ending the process).

use std::io::{ErrorKind, Write};

/// stdout, where a closed pipe swallows what is written. Every command prints through it.
#[derive(Debug)]
pub struct Stdout {
    inner: std::io::Stdout,
    /// The reader closed the pipe: what follows goes nowhere.
    closed: bool,
}

/// The process's stdout, a closed pipe not being an error.
pub fn stdout() -> Stdout {
    Stdout {
        inner: std::io::stdout(),
        closed: false,
    }
}

impl Stdout {
    /// `result` of writing `len` bytes, a closed pipe counting as written.
    fn unless_closed<T>(&mut self, result: std::io::Result<T>, len: T) -> std::io::Result<T> {
        match result {
            Err(e) if e.kind() == ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(len)
            }
            other => other,
        }
    }
}

impl Write for Stdout {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.closed {
            return Ok(bytes.len());
        }
        let written = self.inner.write(bytes);
        self.unless_closed(written, bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let flushed = self.inner.flush();
        self.unless_closed(flushed, ())
    }
}
