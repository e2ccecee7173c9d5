//! A reader wrapper that bounds how much one record may read and keeps the counts the readers
//! need for messages: bytes since the record began, newlines consumed, the last byte seen; and,
//! when asked, the file's last bytes, for a last look at how its last record ends.

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
    /// Bytes read through `Read` so far: the offset of the next one.
    offset: u64,
    /// Bytes read through `Read` from this offset on are kept (u64::MAX: none are).
    keep_from: u64,
    /// At most about `keep` bytes are kept: the latest.
    keep: usize,
    /// What a file read to the size it had keeps: at most `keep`, less for a smaller file.
    expected: usize,
    kept: Vec<u8>,
    /// The offset of `kept[0]`.
    kept_at: u64,
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
            offset: 0,
            keep_from: u64::MAX,
            keep: 0,
            expected: 0,
            kept: Vec::new(),
            kept_at: 0,
        }
    }

    /// Keeps the last `keep` bytes read through `Read` of a file of `size` bytes: only its end
    /// is copied, from offset `size - keep` on. A file that grows while it is read still has
    /// only its latest `keep` bytes kept, give or take `keep`.
    pub fn keeping_tail(mut self, size: u64, keep: usize) -> Self {
        self.keep_from = size.saturating_sub(keep as u64);
        self.keep = keep;
        // Less than `keep`, so it fits a usize.
        self.expected = (size - self.keep_from) as usize;
        self
    }

    /// The bytes read from `offset` to the last one read, if they were all kept.
    pub fn tail_from(&self, offset: u64) -> Option<&[u8]> {
        let start = usize::try_from(offset.checked_sub(self.kept_at)?).ok()?;
        if self.kept_at + self.kept.len() as u64 != self.offset {
            return None;
        }
        self.kept.get(start..)
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
        let read = &out[..n];
        self.account(read);
        let end = self.offset + n as u64;
        if end > self.keep_from {
            let skip = self.keep_from.saturating_sub(self.offset) as usize;
            if self.kept.is_empty() {
                self.kept_at = self.offset + skip as u64;
                // The usual file, read to the size it had: what it keeps, allocated once
                // rather than doubled up to twice that (a file that grew is doubled for).
                self.kept
                    .reserve_exact(self.expected.max(read.len() - skip));
            }
            self.kept.extend_from_slice(&read[skip..]);
            // Trimmed in halves, so that each byte is moved about once.
            if self.kept.len() > 2 * self.keep {
                let cut = self.kept.len() - self.keep;
                self.kept.drain(..cut);
                self.kept_at += cut as u64;
            }
        }
        self.offset = end;
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
    fn the_tail_is_kept_from_the_offset_asked() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let read_all = |t: &mut Tracked<io::BufReader<&[u8]>>| {
            let mut buf = [0u8; 64];
            while t.read(&mut buf).unwrap() > 0 {}
        };
        let mut t = Tracked::new(io::BufReader::with_capacity(16, &data[..]), 10_000)
            .keeping_tail(1000, 100);
        read_all(&mut t);
        assert_eq!(t.tail_from(950), Some(&data[950..]));
        assert_eq!(t.tail_from(899), None, "before what was kept");
        // Reading more than expected keeps only the latest bytes.
        let mut t = Tracked::new(io::BufReader::with_capacity(16, &data[..]), 10_000)
            .keeping_tail(100, 100);
        read_all(&mut t);
        assert_eq!(t.tail_from(900), Some(&data[900..]));
        assert_eq!(t.tail_from(0), None);
        let t = Tracked::new(io::BufReader::new(&data[..]), 10_000);
        assert_eq!(t.tail_from(0), Some(&[][..]), "nothing read, nothing kept");
    }

    #[test]
    fn a_small_file_reserves_only_its_size() {
        let data = b"a,b\n1,2\n";
        let mut t =
            Tracked::new(io::BufReader::new(&data[..]), 10_000).keeping_tail(9, 1024 * 1024);
        let mut buf = [0u8; 64];
        while t.read(&mut buf).unwrap() > 0 {}
        assert_eq!(t.tail_from(0), Some(&data[..]));
        assert!(t.kept.capacity() < 64, "{}", t.kept.capacity());
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
