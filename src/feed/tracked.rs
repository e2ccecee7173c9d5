//! A reader wrapper that bounds how much one record may read and keeps the counts the readers
//! need for messages: bytes since the record began, newlines consumed, the last byte seen.

use std::io::{self, BufRead, Read};

/// Wraps the file. Both the CSV reader (through `Read`) and the XML reader (through `BufRead`)
/// read through it; past `limit` bytes since the last `mark` every read fails, so no record,
/// however malformed, can make lotsync buffer more than about `limit` bytes.
#[derive(Debug)]
pub(super) struct Tracked<R> {
    inner: R,
    limit: u64,
    since_mark: u64,
    over: bool,
    newlines: u64,
    last_byte: Option<u8>,
}

impl<R: BufRead> Tracked<R> {
    pub fn new(inner: R, limit: u64) -> Self {
        Tracked {
            inner,
            limit,
            since_mark: 0,
            over: false,
            newlines: 0,
            last_byte: None,
        }
    }

    /// Starts counting a new record.
    pub fn mark(&mut self) {
        self.since_mark = 0;
    }

    /// Whether a read failed because the limit was passed.
    pub fn over_limit(&self) -> bool {
        self.over
    }

    /// Newlines consumed so far (through `BufRead::consume`): line number minus one.
    pub fn newlines(&self) -> u64 {
        self.newlines
    }

    /// The last byte read, to tell whether the file ended with a line break.
    pub fn last_byte(&self) -> Option<u8> {
        self.last_byte
    }

    fn account(&mut self, bytes: &[u8]) {
        self.since_mark += bytes.len() as u64;
        if let Some(&b) = bytes.last() {
            self.last_byte = Some(b);
        }
    }

    fn check(&mut self) -> io::Result<()> {
        if self.since_mark > self.limit {
            self.over = true;
            return Err(io::Error::other("record over the size limit"));
        }
        Ok(())
    }
}

impl<R: BufRead> Read for Tracked<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.check()?;
        let n = self.inner.read(out)?;
        self.account(&out[..n]);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Tracked<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.check()?;
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        if amt > 0 {
            // The data being consumed is what the last fill_buf returned; asking again
            // returns the same buffer without reading.
            if let Ok(buf) = self.inner.fill_buf() {
                let taken = &buf[..amt.min(buf.len())];
                self.newlines += memchr::memchr_iter(b'\n', taken).count() as u64;
                self.since_mark += taken.len() as u64;
                if let Some(&b) = taken.last() {
                    self.last_byte = Some(b);
                }
            }
        }
        self.inner.consume(amt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fail_past_the_limit_until_marked() {
        let data = [b'x'; 100];
        let mut t = Tracked::new(io::BufReader::with_capacity(10, &data[..]), 25);
        let mut buf = [0u8; 10];
        for _ in 0..3 {
            t.read_exact(&mut buf).unwrap();
        }
        assert!(t.read(&mut buf).is_err());
        assert!(t.over_limit());
        t.mark();
        assert!(t.read(&mut buf).is_ok());
    }

    #[test]
    fn consume_counts_newlines() {
        let data = b"a\nb\nc";
        let mut t = Tracked::new(io::BufReader::new(&data[..]), 100);
        let n = t.fill_buf().unwrap().len();
        t.consume(n - 1);
        assert_eq!(t.newlines(), 2);
        assert_eq!(t.last_byte(), Some(b'\n'));
    }
}
