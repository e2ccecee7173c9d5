//! CSV exports: delimiter detection, header row, the encoding decided once per file (UTF-8, or
//! Windows-1252 when no valid multi-byte UTF-8 is anywhere in it; a file of both is UTF-8 with
//! the records holding the other bytes rejected), rows with the wrong number of fields
//! reported, and a last look at the end of the file: a last record cut off (no line break after
//! it, or a quote still open) makes the file incomplete.

use super::tracked::Tracked;
use super::{FeedError, FieldId, Item, ReadOptions, Record, RowProblem, Schema, RECORD_LIMIT};
use crate::text::shown_bytes;
use std::fs::File;
use std::io::{self, BufRead, Read};
use std::path::PathBuf;

/// The csv crate reads ahead in chunks; the size limit allows for one chunk beyond the record.
const READ_AHEAD: u64 = 64 * 1024;

/// How much of the end of a file is kept for the last look at its last record: more than the
/// largest record the size limit lets through.
const TAIL: usize = (RECORD_LIMIT + 2 * READ_AHEAD) as usize;

const DELIMITERS: [u8; 4] = [b',', b';', b'\t', b'|'];

/// Reads a CSV export one record at a time.
#[derive(Debug)]
pub struct CsvReader<R: BufRead> {
    reader: csv::Reader<Tracked<R>>,
    schema: Schema,
    delimiter: u8,
    row: csv::ByteRecord,
    index: u64,
    /// The last row that was not blank (the header until a record is read).
    last: Option<LastRow>,
    ends_without_newline: bool,
    accept_incomplete: bool,
    encoding: Encoding,
    /// The file-level note on the encoding was given.
    encoding_noted: bool,
    warnings: Vec<String>,
    finished: bool,
    /// Added to the csv crate's line numbers: 1 for CRLF files (below).
    line_offset: u64,
    /// The line of the last record read (the header's until a record is; 0 before that).
    last_line: u64,
    double_space: memchr::memmem::Finder<'static>,
}

/// How a file's bytes become text: decided once for the whole file, never field by field.
#[derive(Debug)]
pub(super) enum Encoding {
    /// Not needed yet: every row so far was UTF-8. At the first that is not, this file is read
    /// once more to decide (most files never need it).
    Undecided(PathBuf),
    /// UTF-8: nothing but UTF-8, or valid multi-byte UTF-8 beside bytes that are not, whose
    /// fields are left out of their records for the mapper to reject.
    Utf8,
    /// Bytes that are not UTF-8 and no valid multi-byte UTF-8 anywhere: Windows-1252.
    Windows1252,
}

impl Encoding {
    /// Decided from the whole input at once, when it is in memory.
    pub(super) fn of_bytes(bytes: &[u8]) -> Encoding {
        // Reading a slice cannot fail.
        let utf8 = std::str::from_utf8(bytes).is_ok() || has_multibyte_utf8(bytes).unwrap_or(false);
        Encoding::utf8_if(utf8)
    }

    /// For a file that is not all UTF-8: UTF-8 still when it holds valid multi-byte UTF-8.
    fn utf8_if(multibyte: bool) -> Encoding {
        if multibyte {
            Encoding::Utf8
        } else {
            Encoding::Windows1252
        }
    }
}

/// Whether the input holds a valid multi-byte UTF-8 sequence anywhere, read in chunks (a
/// sequence split between two chunks is joined).
fn has_multibyte_utf8(mut input: impl Read) -> io::Result<bool> {
    let mut buf = vec![0u8; 64 * 1024];
    // Bytes of a sequence the last chunk ended in the middle of, moved to the front.
    let mut carried = 0;
    loop {
        let n = match input.read(&mut buf[carried..]) {
            Ok(0) => return Ok(false),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let end = carried + n;
        let mut at = 0;
        carried = 0;
        while at < end {
            match std::str::from_utf8(&buf[at..end]) {
                Ok(valid) => {
                    if !valid.is_ascii() {
                        return Ok(true);
                    }
                    at = end;
                }
                Err(e) => {
                    let valid = &buf[at..at + e.valid_up_to()];
                    if !valid.is_ascii() {
                        return Ok(true);
                    }
                    at += e.valid_up_to();
                    match e.error_len() {
                        Some(len) => at += len,
                        None => {
                            carried = end - at;
                            buf.copy_within(at..end, 0);
                            at = end;
                        }
                    }
                }
            }
        }
    }
}

/// Where the last row that was not blank lies, for the look at the end of the file.
#[derive(Debug, Clone, Copy)]
struct LastRow {
    line: u64,
    /// Its offset in the file (the csv crate's; for CRLF files it may be the LF before it).
    start: u64,
    fields: usize,
    /// Fewer fields than the header.
    short: bool,
    /// A field holds a line break.
    broken_field: bool,
    header: bool,
}

impl<R: BufRead> CsvReader<R> {
    /// Reads the header row; the delimiter is detected from it when the options give none.
    /// `size` is the input's length (only the end of the file is kept for the last look).
    pub(super) fn new(
        mut input: R,
        options: &ReadOptions,
        size: u64,
        encoding: Encoding,
    ) -> Result<Self, FeedError> {
        let head = input.fill_buf().map_err(FeedError::Io)?;
        let delimiter = options.delimiter.unwrap_or_else(|| detect_delimiter(head));
        // The csv crate ends a CRLF record at the CR and counts the LF's line only once it
        // starts the next record, whose position then says the line before. Files end their
        // lines one way throughout, so the first line break tells.
        let crlf = head
            .iter()
            .position(|&b| b == b'\n')
            .is_some_and(|i| i > 0 && head[i - 1] == b'\r');
        let reader = csv::ReaderBuilder::new()
            .delimiter(delimiter)
            .has_headers(false)
            .flexible(true)
            // Reads as large as the file's BufReader skip its buffer (once it is drained)
            // instead of copying every byte through it.
            .buffer_capacity(READ_AHEAD as usize)
            .from_reader(Tracked::new(input, RECORD_LIMIT + READ_AHEAD).keeping_tail(size, TAIL));
        let mut this = CsvReader {
            reader,
            schema: Schema::default(),
            delimiter,
            row: csv::ByteRecord::new(),
            index: 0,
            last: None,
            ends_without_newline: options.ends_without_newline,
            accept_incomplete: options.accept_incomplete,
            encoding,
            encoding_noted: false,
            warnings: Vec::new(),
            finished: false,
            line_offset: u64::from(crlf),
            last_line: 0,
            double_space: memchr::memmem::Finder::new(b"  "),
        };
        this.read_header()?;
        Ok(this)
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    pub fn describe(&self) -> String {
        let name = match self.delimiter {
            b',' => "comma",
            b';' => "semicolon",
            b'\t' => "tab",
            b'|' => "pipe",
            _ => "custom",
        };
        format!("CSV, {name}-separated, {} columns", self.schema.len())
    }

    fn read_header(&mut self) -> Result<(), FeedError> {
        loop {
            if !self.read_row()? {
                return Err(FeedError::Empty);
            }
            if !row_is_blank(&self.row) {
                break;
            }
        }
        let line = self.header_line();
        self.last_line = line;
        self.last = Some(LastRow {
            line,
            start: self.row.position().map_or(0, csv::Position::byte),
            fields: self.row.len(),
            short: false,
            broken_field: false,
            header: true,
        });
        // Two columns of one name are the mapper's to compare, when it reads them.
        self.schema.numbered = true;
        if std::str::from_utf8(self.row.as_slice()).is_err() {
            self.decide_encoding(line)?;
        }
        for i in 0..self.row.len() {
            let raw = self.row.get(i).unwrap_or_default();
            let name = match (std::str::from_utf8(raw), &self.encoding) {
                (_, Encoding::Windows1252) => {
                    encoding_rs::WINDOWS_1252.decode_without_bom_handling(raw).0
                }
                (Ok(name), _) => name.into(),
                // Blanks around are trimmed before control characters are escaped.
                (Err(_), _) => shown_bytes(raw.trim_ascii()).into(),
            };
            let name = name.trim_start_matches('\u{feff}').trim();
            let name = if name.is_empty() {
                format!("column {}", i + 1)
            } else {
                name.to_owned()
            };
            self.schema.push(name);
        }
        Ok(())
    }

    /// The line the header row (just read) starts on. The csv crate gives a row the position
    /// its read began at, before the empty lines it skips, so the line is counted back from
    /// where the read ended: less the line breaks inside the header, and less the one that
    /// ended it when that was an LF (a CRLF's LF is counted with the next row, and a header
    /// that ends the file may have none).
    fn header_line(&self) -> u64 {
        let end = self.reader.position();
        let inside = memchr::memchr_iter(b'\n', self.row.as_slice()).count() as u64;
        // The byte that ended the header is kept when the file is small enough for its start
        // to be in the tail kept; a larger file's header is not its last row, and its line
        // breaks are those of its first line.
        let ended_by_lf = match end
            .byte()
            .checked_sub(1)
            .and_then(|at| self.reader.get_ref().tail_from(at))
        {
            Some(tail) => tail.first() == Some(&b'\n'),
            None => self.line_offset == 0,
        };
        end.line()
            .saturating_sub(inside + u64::from(ended_by_lf))
            .max(1)
    }

    /// Reads the next record into `record`.
    pub fn next(&mut self, record: &mut Record) -> Result<Item, FeedError> {
        loop {
            if self.finished || !self.read_row()? {
                self.finished = true;
                return self.end();
            }
            if row_is_blank(&self.row) {
                continue;
            }
            let position = self.row.position();
            let line = position.map_or(0, csv::Position::line) + self.line_offset;
            self.last_line = line;
            self.index += 1;
            let columns = self.schema.len();
            let fields = self.row.len();
            let mut last = LastRow {
                line,
                start: position.map_or(0, csv::Position::byte),
                fields,
                short: fields < columns,
                broken_field: false,
                header: false,
            };
            // Extra fields that are all empty (a trailing delimiter on every row) are harmless.
            let extra_empty =
                fields > columns && self.row.iter().skip(columns).all(<[u8]>::is_empty);
            if fields != columns && !extra_empty {
                last.broken_field = self.row.iter().any(|f| f.contains(&b'\n'));
                self.last = Some(last);
                return Ok(Item::Problem(RowProblem {
                    line,
                    reason: format!("has {fields} fields where the header has {columns}"),
                }));
            }
            self.last = Some(last);
            if memchr::memchr(0, self.row.as_slice()).is_some() {
                return Ok(Item::Problem(RowProblem {
                    line,
                    reason: "contains a NUL byte (binary data in a text export)".into(),
                }));
            }
            record.clear();
            record.line = line;
            record.index = self.index;
            // One UTF-8 check for the whole row; field by field only when it fails, or when a
            // field boundary falls inside a character (Windows-1252 bytes such as "Ã" + "©"
            // on either side of a delimiter can read as UTF-8 together), or in a Windows-1252
            // file when the row is not plain ASCII.
            let read_whole = {
                let bytes = self.row.as_slice();
                record.tidy = memchr::memchr3(b'\t', b'\n', b'\r', bytes).is_none()
                    && self.double_space.find(bytes).is_none();
                let whole = std::str::from_utf8(bytes).ok().filter(|all| {
                    (0..columns).all(|i| {
                        self.row
                            .range(i)
                            .is_none_or(|r| all.is_char_boundary(r.end))
                    }) && (!matches!(self.encoding, Encoding::Windows1252) || all.is_ascii())
                });
                if let Some(all) = whole {
                    let ranges = (0..columns).map(|i| self.row.range(i).unwrap_or(0..0));
                    record.push_row(all, ranges);
                }
                whole.is_some()
            };
            if read_whole {
                return Ok(Item::Record);
            }
            self.decide_encoding(line)?;
            let windows_1252 = matches!(self.encoding, Encoding::Windows1252);
            for i in 0..columns {
                let raw = self.row.get(i).unwrap_or_default();
                if raw.is_empty() {
                    continue;
                }
                if windows_1252 {
                    let text = encoding_rs::WINDOWS_1252.decode_without_bom_handling(raw).0;
                    record.push(i as FieldId, &text);
                } else if let Ok(text) = std::str::from_utf8(raw) {
                    record.push(i as FieldId, text);
                } else {
                    record.push_undecodable(i as FieldId, shown_bytes(raw));
                }
            }
            return Ok(Item::Record);
        }
    }

    /// At the end, a last look at the last record: a quote still open, or no line break
    /// after it, means the file was cut there (a DMS still writing it); with
    /// `ends_without_newline` a last record without a line break is whole when it has every
    /// field of the header. A last record that ends with its line break is whole whatever its
    /// fields (a short one was a row problem, like a trailer row): a file cut at a line break
    /// is only shorter, which the safety guard is for.
    fn end(&mut self) -> Result<Item, FeedError> {
        let Some(last) = self.last.take() else {
            return Ok(Item::End);
        };
        if self.accept_incomplete {
            return Ok(Item::End);
        }
        let tracked = self.reader.get_ref();
        let ending = match tracked.tail_from(last.start) {
            Some(raw) => ending(raw, self.delimiter),
            // Not kept (megabytes of blank lines after the last record): what today's row
            // and the last byte tell.
            None => Ending {
                terminated: matches!(tracked.last_byte(), Some(b'\n' | b'\r')),
                open_quote: (last.short && last.broken_field).then_some(0),
            },
        };
        if let Some(lines) = ending.open_quote {
            return Err(FeedError::UnclosedQuote {
                line: last.line + lines,
            });
        }
        if ending.terminated || (self.ends_without_newline && !last.short) {
            return Ok(Item::End);
        }
        let columns = self.schema.len();
        let fields = last.fields;
        let reason = if last.header {
            "the file ends inside its header row (no line break after it)".to_owned()
        } else if last.short && self.ends_without_newline {
            format!("the last record has {fields} of the header's {columns} fields")
        } else if last.short {
            format!(
                "the last record has {fields} of the header's {columns} fields and no line break after it"
            )
        } else {
            "the file ends inside its last record (no line break after it)".to_owned()
        };
        let hint = if last.short {
            ""
        } else {
            "; if the DMS never ends its files with a line break, set ends_without_newline = true in the profile"
        };
        Err(FeedError::Incomplete {
            line: last.line,
            reason: format!("{reason}: it is incomplete, perhaps still being written{hint}"),
        })
    }

    /// At the first row that is not UTF-8 (on `line`): decides the file's encoding, if it
    /// is not yet, and says it once.
    fn decide_encoding(&mut self, line: u64) -> Result<(), FeedError> {
        if let Encoding::Undecided(path) = &self.encoding {
            let file = File::open(path).map_err(FeedError::Open)?;
            let multibyte = has_multibyte_utf8(file).map_err(FeedError::Io)?;
            self.encoding = Encoding::utf8_if(multibyte);
        }
        if !self.encoding_noted {
            self.encoding_noted = true;
            self.warnings.push(match self.encoding {
                Encoding::Windows1252 => {
                    format!("not UTF-8 (first at line {line}): read as Windows-1252")
                }
                _ => format!(
                    "bytes that are not UTF-8 in a file that is otherwise UTF-8 (first at line \
                     {line}): the records holding them are rejected; export the file in one \
                     encoding"
                ),
            });
        }
        Ok(())
    }

    fn read_row(&mut self) -> Result<bool, FeedError> {
        self.reader.get_mut().mark();
        match self.reader.read_byte_record(&mut self.row) {
            Ok(more) => Ok(more),
            Err(e) => {
                // The failing record starts after the last one read (exact unless that one
                // spanned several lines).
                let line = self.last_line + 1;
                if self.reader.get_ref().over_limit() {
                    return Err(FeedError::RecordTooLarge { line });
                }
                match e.into_kind() {
                    csv::ErrorKind::Io(io) => Err(FeedError::Io(io)),
                    other => Err(FeedError::Layout(format!("line {line}: {other:?}"))),
                }
            }
        }
    }
}

/// How a file ends, read from the raw bytes of its last record to the end of the file.
#[derive(Debug, PartialEq, Eq)]
struct Ending {
    /// A line break ends the last record.
    terminated: bool,
    /// A quote is still open at the end, opened this many lines below the record's first.
    open_quote: Option<u64>,
}

/// Runs the csv crate's quoting rules (RFC 4180: a quote opens a field only at its start,
/// `""` inside one is a quote) over `raw`, the bytes from the last record's start on.
fn ending(raw: &[u8], delimiter: u8) -> Ending {
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum State {
        FieldStart,
        Field,
        Quoted,
        QuoteInQuoted,
    }
    // The csv crate may start a CRLF file's record at the LF before it.
    let first = raw
        .iter()
        .position(|&b| b != b'\n' && b != b'\r')
        .unwrap_or(raw.len());
    let mut state = State::FieldStart;
    let mut terminated = false;
    let mut lines = 0;
    let mut quote_line = 0;
    for &b in &raw[first..] {
        if b == b'\n' {
            lines += 1;
        }
        state = match state {
            State::Quoted if b == b'"' => State::QuoteInQuoted,
            State::Quoted => State::Quoted,
            State::QuoteInQuoted if b == b'"' => State::Quoted,
            State::FieldStart if b == b'"' => {
                quote_line = lines;
                State::Quoted
            }
            _ if b == b'\n' || b == b'\r' => {
                terminated = true;
                State::FieldStart
            }
            _ if b == delimiter => State::FieldStart,
            _ => State::Field,
        };
    }
    Ending {
        terminated,
        open_quote: (state == State::Quoted).then_some(quote_line),
    }
}

fn row_is_blank(row: &csv::ByteRecord) -> bool {
    row.iter().all(|f| f.iter().all(u8::is_ascii_whitespace))
}

/// The candidate that occurs most often outside quotes in the first line; comma when none does.
fn detect_delimiter(head: &[u8]) -> u8 {
    let mut counts = [0usize; DELIMITERS.len()];
    let mut quoted = false;
    for &b in head {
        match b {
            b'"' => quoted = !quoted,
            b'\n' | b'\r' if !quoted => break,
            _ if !quoted => {
                if let Some(i) = DELIMITERS.iter().position(|&d| d == b) {
                    counts[i] += 1;
                }
            }
            _ => {}
        }
    }
    let best = (0..DELIMITERS.len())
        .max_by_key(|&i| (counts[i], std::cmp::Reverse(i)))
        .unwrap_or(0);
    if counts[best] == 0 {
        b','
    } else {
        DELIMITERS[best]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::feed::Format;

    type Rows = Vec<Result<Vec<(String, String)>, RowProblem>>;

    fn read_all(data: &[u8]) -> Result<(Schema, Rows, Vec<String>), FeedError> {
        read_with(data, ReadOptions::default())
    }

    fn read_with(
        data: &[u8],
        options: ReadOptions,
    ) -> Result<(Schema, Rows, Vec<String>), FeedError> {
        let options = ReadOptions {
            format: Some(Format::Csv),
            ..options
        };
        let mut reader = crate::feed::from_bytes(data, &options)?;
        let mut out = Vec::new();
        let mut record = Record::default();
        loop {
            match reader.next(&mut record)? {
                Item::End => break,
                Item::Problem(p) => out.push(Err(p)),
                Item::Record => {
                    let fields = record
                        .iter()
                        .map(|(id, v)| (reader.schema().name(id).to_owned(), v.to_owned()))
                        .collect();
                    out.push(Ok(fields));
                }
            }
        }
        let warnings = reader.take_warnings();
        Ok((reader.schema().clone(), out, warnings))
    }

    #[test]
    fn detects_each_delimiter() {
        assert_eq!(detect_delimiter(b"a,b,c\n1;2;3;4;5"), b',');
        assert_eq!(detect_delimiter(b"a;b;c,d\n"), b';');
        assert_eq!(detect_delimiter(b"a\tb\tc"), b'\t');
        assert_eq!(detect_delimiter(b"a|b|c\r\n"), b'|');
        assert_eq!(detect_delimiter(b"\"x;y;z\",b,c\n"), b',');
        assert_eq!(detect_delimiter(b"single\n"), b',');
    }

    #[test]
    fn reads_bom_crlf_quotes_and_embedded_newlines() {
        let data = b"\xEF\xBB\xBFVIN;Options\r\nA1;\"x;y\r\nz\"\r\nA2;\"say \"\"hi\"\"\"\r\n";
        let (schema, rows, warnings) = read_all(data).unwrap();
        assert_eq!(schema.name(0), "VIN");
        assert!(warnings.is_empty());
        let first = rows[0].as_ref().unwrap();
        assert_eq!(first[1].1, "x;y\r\nz");
        assert_eq!(rows[1].as_ref().unwrap()[1].1, "say \"hi\"");
    }

    #[test]
    fn lines_are_counted_alike_for_lf_and_crlf() {
        let lines = |data: &[u8]| -> Vec<u64> {
            let mut reader = crate::feed::from_bytes(data, &ReadOptions::default()).unwrap();
            let mut record = Record::default();
            let mut lines = Vec::new();
            while let Item::Record = reader.next(&mut record).unwrap() {
                lines.push(record.line);
            }
            lines
        };
        assert_eq!(lines(b"a,b\n1,2\n\"x\ny\",3\n4,5\n"), [2, 3, 5]);
        assert_eq!(lines(b"a,b\r\n1,2\r\n\"x\ny\",3\r\n4,5\r\n"), [2, 3, 5]);
    }

    #[test]
    fn windows_1252_is_decoded_and_said_once() {
        let data = b"Color,Note\nCaf\xe9,\xae\nNoir,x\n";
        let (_, rows, warnings) = read_all(data).unwrap();
        assert_eq!(rows[0].as_ref().unwrap()[0].1, "Café");
        assert_eq!(rows[0].as_ref().unwrap()[1].1, "®");
        assert_eq!(
            warnings,
            vec!["not UTF-8 (first at line 2): read as Windows-1252"]
        );
    }

    #[test]
    fn fields_are_decoded_alone_when_only_the_row_reads_as_utf8() {
        // "Ã" and "©" in Windows-1252 are C3 A9: "é" in UTF-8, split by the delimiter.
        let (_, rows, warnings) = read_all(b"a,b\nx\xc3,\xa9y\n").unwrap();
        let fields = rows[0].as_ref().unwrap();
        assert_eq!((fields[0].1.as_str(), fields[1].1.as_str()), ("xÃ", "©y"));
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn a_file_of_utf8_and_other_bytes_is_utf8_and_the_others_are_kept_apart() {
        // The invalid byte before the first valid character, and after it.
        for data in [
            &b"Make,Model\nCitro\xebn,C5\nCitro\xc3\xabn,C4\nTesla,Model \xb3\n"[..],
            b"Make,Model\nCitro\xc3\xabn,C4\nCitro\xebn,C5\nTesla,Model \xb3\n",
        ] {
            let mut reader = crate::feed::from_bytes(data, &ReadOptions::default()).unwrap();
            let mut record = Record::default();
            let mut seen = Vec::new();
            while let Item::Record = reader.next(&mut record).unwrap() {
                let fields: Vec<(u32, &str)> = record.iter().collect();
                seen.push((format!("{fields:?}"), record.undecodable().to_vec()));
            }
            assert!(seen.contains(&("[(0, \"Citroën\"), (1, \"C4\")]".into(), vec![])));
            assert!(seen.contains(&("[(1, \"C5\")]".into(), vec![(0, "Citro\\xebn".to_owned())])));
            assert!(seen.contains(&(
                "[(0, \"Tesla\")]".into(),
                vec![(1, "Model \\xb3".to_owned())]
            )));
            let notes = reader.take_warnings();
            assert_eq!(notes.len(), 1, "{notes:?}");
            assert!(notes[0].starts_with(
                "bytes that are not UTF-8 in a file that is otherwise UTF-8 (first at line"
            ));
        }
    }

    #[test]
    fn multibyte_utf8_is_found_across_chunks() {
        /// Hands out one byte per read.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                let Some((&b, rest)) = self.0.split_first() else {
                    return Ok(0);
                };
                out[0] = b;
                self.0 = rest;
                Ok(1)
            }
        }
        for (data, found) in [
            (&b"plain ascii"[..], false),
            (b"caf\xc3\xa9", true),
            (b"caf\xe9 \xae", false),
            (b"x\xc3,\xa9y", false),
            (b"caf\xe9 then \xe2\x80\x93 a dash", true),
            (b"cut \xe2\x80", false),
        ] {
            assert_eq!(has_multibyte_utf8(data).unwrap(), found, "{data:?}");
            assert_eq!(
                has_multibyte_utf8(Trickle(data)).unwrap(),
                found,
                "{data:?}"
            );
        }
    }

    #[test]
    fn ragged_rows_are_problems_not_the_end() {
        let data = b"a,b,c\n1,2,3\n1,2\n4,5,6,,\n7,8,9\n";
        let (_, rows, _) = read_all(data).unwrap();
        assert_eq!(rows.len(), 4);
        assert_eq!(
            rows[1].as_ref().unwrap_err(),
            &RowProblem {
                line: 3,
                reason: "has 2 fields where the header has 3".into()
            }
        );
        assert!(rows[2].is_ok(), "trailing empty fields are fine");
    }

    /// The file-level error of reading `data` to the end, as text, or None.
    fn cut(data: &[u8], options: ReadOptions) -> Option<String> {
        let err = read_with(data, options).err()?;
        assert!(err.is_incomplete(), "{err}");
        Some(err.to_string())
    }

    fn without_newline() -> ReadOptions {
        ReadOptions {
            ends_without_newline: true,
            ..ReadOptions::default()
        }
    }

    #[test]
    fn a_last_record_without_a_line_break_is_incomplete() {
        let no_break = "line 3: the file ends inside its last record (no line break after it): \
                        it is incomplete, perhaps still being written; if the DMS never ends its \
                        files with a line break, set ends_without_newline = true in the profile";
        let d = ReadOptions::default;
        assert_eq!(cut(b"a,b,c\n1,2,3\n4,5,6", d()).as_deref(), Some(no_break));
        assert_eq!(
            cut(b"a,b,c\r\n1,2,3\r\n4,5,6", d()).as_deref(),
            Some(no_break)
        );
        // An empty last field, quoted or not, is still a field without its line break.
        assert_eq!(cut(b"a,b,c\n1,2,3\n4,5,", d()).as_deref(), Some(no_break));
        assert_eq!(
            cut(b"a,b,c\n1,2,3\n4,5,\"\"", d()).as_deref(),
            Some(no_break)
        );
        assert_eq!(
            cut(b"a,b,c\n1,2,3\n4,5", d()).as_deref(),
            Some(
                "line 3: the last record has 2 of the header's 3 fields and no line break after \
                 it: it is incomplete, perhaps still being written"
            )
        );
        assert_eq!(
            cut(b"a,b,c\n1,\"x\ny\",3\n4,5", d())
                .as_deref()
                .map(|e| &e[..7]),
            Some("line 4:"),
            "lines after a multi-line record"
        );
        assert_eq!(
            cut(b"a,b,c", d()).as_deref(),
            Some(
                "line 1: the file ends inside its header row (no line break after it): it is \
                 incomplete, perhaps still being written; if the DMS never ends its files with a \
                 line break, set ends_without_newline = true in the profile"
            )
        );
    }

    /// Blank lines before the header (empty, or only blanks and delimiters) move it down: its
    /// errors and notes say its own line.
    #[test]
    fn the_header_line_counts_the_blank_lines_before_it() {
        for (data, line) in [
            (&b"\n\na,b,c"[..], 3),
            (b"\r\n\r\na,b,c", 3),
            (b",,\n \n\na,b,c", 4),
            (b"\r\n,,\r\n\"a\nx\",b,c", 3),
        ] {
            let err = cut(data, ReadOptions::default()).unwrap_or_default();
            assert!(
                err.starts_with(&format!("line {line}: the file ends inside its header row")),
                "{:?}: {err}",
                String::from_utf8_lossy(data)
            );
        }
        for (data, name, line) in [
            (&b"\n\nMak\xe9,b\n1,2\n"[..], "Maké", 3),
            (b"\r\n\r\nMak\xe9,b\r\n1,2\r\n", "Maké", 3),
            (b"\n,\n\"Ma\nk\xe9\",b\r1,2\n", "Ma\nké", 3),
        ] {
            let (schema, rows, notes) = read_all(data).unwrap();
            assert_eq!(schema.name(0), name);
            assert_eq!(rows.len(), 1);
            assert_eq!(
                notes,
                [format!(
                    "not UTF-8 (first at line {line}): read as Windows-1252"
                )]
            );
        }
        // Lines after the header keep their numbers.
        let (_, rows, _) = read_all(b"\n\na,b\n1\n").unwrap();
        assert_eq!(rows[0].as_ref().unwrap_err().line, 4);
    }

    #[test]
    fn files_that_end_with_their_line_break_are_complete() {
        for data in [
            &b"a,b,c\n1,2,3\n"[..],
            b"a,b,c\r\n1,2,3\r\n",
            b"a,b,c\r\n1,2,3\r",
            b"a,b,c\n1,2,3\n\n\r\n  \n",
            b"a,b,c\n1,2,3\n \t ",
            b"a,b,c\n1,2,\"x\ny\"\n",
            b"a,b,c\n1,2,\"say \"\"hi\"\"\"\n",
            b"a,b,c\n1,2,\"\"\n",
            b"a,b,c\n",
        ] {
            let read = read_all(data);
            assert!(
                read.is_ok(),
                "{:?}: {}",
                String::from_utf8_lossy(data),
                read.unwrap_err()
            );
        }
        // A short last row with its line break (a trailer row, say) is a row problem only.
        let (_, rows, _) = read_all(b"a,b,c\n1,2,3\nTOTAL,1\n").unwrap();
        assert_eq!(rows[1].as_ref().unwrap_err().line, 3);
    }

    #[test]
    fn a_quote_open_at_the_end_is_a_cut_file() {
        let open = |data: &[u8], options| match read_with(data, options) {
            Err(FeedError::UnclosedQuote { line }) => line,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(data)),
        };
        let d = ReadOptions::default;
        // Every field there and a line break at the end, but inside the quotes.
        assert_eq!(open(b"a,b\n1,\"x\n", d()), 2);
        assert_eq!(open(b"a,b\n1,\"https://x/a.jp", without_newline()), 2);
        assert_eq!(open(b"a,b\n1,\"say \"\"hi\"\"", without_newline()), 2);
        // Cut just after the quote that opens the next record.
        assert_eq!(open(b"a,b\n1,2\n\"", d()), 3);
        assert_eq!(open(b"a,b\r\n1,2\r\n\"", d()), 3);
        // The line where the open quote is, below the record's first.
        assert_eq!(open(b"a,b,c\n1,\"x\ny\",\"cut\nhere", d()), 3);
        assert_eq!(open(b"a,b,c\n1,\"x\ny\",2\n3,4,\"cut\n", d()), 4);
        // A stray quote runs to the end of the file in the same way.
        assert_eq!(open(b"a,b,c\n1,\"2,3\n4,5,6\n7,8,9\n", d()), 2);
    }

    #[test]
    fn a_dms_without_a_final_line_break_has_whole_last_records() {
        let (_, rows, _) = read_with(b"a,b,c\n1,2,3\n4,5,6", without_newline()).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].as_ref().unwrap()[2].1, "6");
        assert!(read_with(b"a,b,c\n1,2,3\n4,5,", without_newline()).is_ok());
        assert!(read_with(b"a,b,c\n1,2,3\n4,5,\"\"", without_newline()).is_ok());
        assert!(read_with(b"a,b,c", without_newline()).is_ok());
        assert!(read_with(b"a,b,c\n1,2,3\n", without_newline()).is_ok());
        assert_eq!(
            cut(b"a,b,c\n1,2,3\n4,5", without_newline()).as_deref(),
            Some(
                "line 3: the last record has 2 of the header's 3 fields: it is incomplete, \
                 perhaps still being written"
            )
        );
    }

    #[test]
    fn an_incomplete_file_can_be_accepted_as_it_is() {
        let accept = ReadOptions {
            accept_incomplete: true,
            ..ReadOptions::default()
        };
        let (_, rows, _) = read_with(b"a,b,c\n1,2,3\n4,5,6", accept.clone()).unwrap();
        assert_eq!(rows[1].as_ref().unwrap()[2].1, "6");
        let (_, rows, _) = read_with(b"a,b,c\n1,2,3\n4,5", accept.clone()).unwrap();
        assert_eq!(
            rows[1].as_ref().unwrap_err().reason,
            "has 2 fields where the header has 3"
        );
        let (_, rows, _) = read_with(b"a,b\n1,\"x\n", accept).unwrap();
        assert_eq!(rows[0].as_ref().unwrap()[1].1, "x\n");
    }

    #[test]
    fn the_end_is_looked_at_in_a_file_larger_than_the_tail_kept() {
        let mut data = b"a,b\n".to_vec();
        let row = [b"1,".as_slice(), &[b'x'; 400], b"\n"].concat();
        while data.len() < 2 * TAIL {
            data.extend(&row);
        }
        assert!(read_all(&data).is_ok());
        data.extend(b"3,\"4\n");
        let err = read_all(&data).unwrap_err();
        assert!(matches!(err, FeedError::UnclosedQuote { .. }), "{err}");
    }

    #[test]
    fn ending_follows_the_quoting_rules() {
        let e = |raw: &[u8]| ending(raw, b',');
        assert_eq!(e(b"1,2\n").open_quote, None);
        assert!(e(b"1,2\n").terminated);
        assert!(!e(b"1,2").terminated);
        assert!(
            e(b"\n1,2\r").terminated,
            "a leading LF is the CRLF before the record"
        );
        assert!(!e(b"\n1,2").terminated);
        assert_eq!(
            e(b"1,a\"b\n").open_quote,
            None,
            "a quote inside a field is text"
        );
        assert_eq!(
            e(b"1,\"a\"b\n").open_quote,
            None,
            "text after a closing quote"
        );
        assert_eq!(
            e(b"1,\"a\"\"\n").open_quote,
            Some(0),
            "an escaped quote, still open"
        );
        assert_eq!(e(b"1,\"a\n\",\"\n\nb").open_quote, Some(1));
    }

    #[test]
    fn duplicate_and_blank_headers() {
        let (schema, _, warnings) = read_all(b"Price,,price\n1,2,3\n").unwrap();
        assert_eq!(schema.name(1), "column 2");
        assert_eq!(schema.name(2), "price");
        assert!(schema.numbered());
        assert!(
            warnings.is_empty(),
            "the mapper compares them: {warnings:?}"
        );
    }

    #[test]
    fn blank_rows_are_skipped_and_empty_fields_left_out() {
        let (_, rows, _) = read_all(b"a,b\n\n,\n1,\n").unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(
            rows[0].as_ref().unwrap(),
            &vec![("a".to_owned(), "1".to_owned())]
        );
    }

    #[test]
    fn a_huge_record_is_refused() {
        let mut data = b"a,b\n1,".to_vec();
        data.extend(std::iter::repeat_n(b'x', 2 * 1024 * 1024));
        data.extend(b"\n");
        let err = read_all(&data).unwrap_err();
        assert!(matches!(err, FeedError::RecordTooLarge { .. }), "{err}");
    }
}
