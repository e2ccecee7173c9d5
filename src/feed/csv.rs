//! CSV exports: delimiter detection, header row, UTF-8 with a Windows-1252 fallback, rows with
//! the wrong number of fields reported, truncation and unclosed quotes detected at the end.

use super::tracked::Tracked;
use super::{FeedError, FieldId, Item, Record, RowProblem, Schema, RECORD_LIMIT};
use std::borrow::Cow;
use std::io::BufRead;

/// The csv crate reads ahead in chunks; the size limit allows for one chunk beyond the record.
const READ_AHEAD: u64 = 64 * 1024;

const DELIMITERS: [u8; 4] = [b',', b';', b'\t', b'|'];

/// Reads a CSV export one record at a time.
#[derive(Debug)]
pub struct CsvReader<R: BufRead> {
    reader: csv::Reader<Tracked<R>>,
    schema: Schema,
    delimiter: u8,
    row: csv::ByteRecord,
    index: u64,
    /// The last row read had the wrong number of fields: (line, had a line break in a field).
    last_row_ragged: Option<(u64, bool)>,
    legacy_encoding_seen: bool,
    warnings: Vec<String>,
    finished: bool,
    /// Added to the csv crate's line numbers: 1 for CRLF files (below).
    line_offset: u64,
    /// The line of the last record read (the header's is 1).
    last_line: u64,
    double_space: memchr::memmem::Finder<'static>,
}

impl<R: BufRead> CsvReader<R> {
    /// Reads the header row; `delimiter` is detected from it when not given.
    pub fn new(mut input: R, delimiter: Option<u8>) -> Result<Self, FeedError> {
        let head = input.fill_buf().map_err(FeedError::Io)?;
        let delimiter = delimiter.unwrap_or_else(|| detect_delimiter(head));
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
            .from_reader(Tracked::new(input, RECORD_LIMIT + READ_AHEAD));
        let mut this = CsvReader {
            reader,
            schema: Schema::default(),
            delimiter,
            row: csv::ByteRecord::new(),
            index: 0,
            last_row_ragged: None,
            legacy_encoding_seen: false,
            warnings: Vec::new(),
            finished: false,
            line_offset: u64::from(crlf),
            last_line: 1,
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
        let mut seen: Vec<(String, usize)> = Vec::new();
        for (i, raw) in self.row.iter().enumerate() {
            let name = decode(raw, 1, &mut self.legacy_encoding_seen, &mut self.warnings);
            let name = name.trim_start_matches('\u{feff}').trim();
            let name = if name.is_empty() {
                format!("column {}", i + 1)
            } else {
                name.to_owned()
            };
            if let Some((_, first)) = seen.iter().find(|(n, _)| n.eq_ignore_ascii_case(&name)) {
                self.warnings.push(format!(
                    "column {:?} appears twice (columns {} and {}); a profile naming it uses column {}",
                    name,
                    first + 1,
                    i + 1,
                    first + 1
                ));
            }
            seen.push((name.clone(), i));
            self.schema.push(name);
        }
        Ok(())
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
            let line = self.row.position().map_or(0, |p| p.line()) + self.line_offset;
            self.last_line = line;
            self.index += 1;
            let columns = self.schema.len();
            let fields = self.row.len();
            // Extra fields that are all empty (a trailing delimiter on every row) are harmless.
            let extra_empty =
                fields > columns && self.row.iter().skip(columns).all(<[u8]>::is_empty);
            if fields != columns && !extra_empty {
                let broken_field = self.row.iter().any(|f| f.contains(&b'\n'));
                self.last_row_ragged = Some((line, broken_field));
                return Ok(Item::Problem(RowProblem {
                    line,
                    reason: format!("has {fields} fields where the header has {columns}"),
                }));
            }
            self.last_row_ragged = None;
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
            // on either side of a delimiter can read as UTF-8 together).
            let bytes = self.row.as_slice();
            record.tidy = memchr::memchr3(b'\t', b'\n', b'\r', bytes).is_none()
                && self.double_space.find(bytes).is_none();
            let whole = std::str::from_utf8(bytes).ok().filter(|all| {
                (0..columns).all(|i| {
                    self.row
                        .range(i)
                        .is_none_or(|r| all.is_char_boundary(r.end))
                })
            });
            if let Some(all) = whole {
                let ranges = (0..columns).map(|i| self.row.range(i).unwrap_or(0..0));
                record.push_row(all, ranges);
                return Ok(Item::Record);
            }
            for i in 0..columns {
                let raw = self.row.get(i).unwrap_or_default();
                if raw.is_empty() {
                    continue;
                }
                let text = decode(
                    raw,
                    line,
                    &mut self.legacy_encoding_seen,
                    &mut self.warnings,
                );
                record.push(i as FieldId, &text);
            }
            return Ok(Item::Record);
        }
    }

    /// At the end: a last row with the wrong number of fields and no final line break is a
    /// truncated file; one holding a line break inside a field is an unclosed quote.
    fn end(&mut self) -> Result<Item, FeedError> {
        if let Some((line, broken_field)) = self.last_row_ragged.take() {
            if broken_field {
                return Err(FeedError::UnclosedQuote { line });
            }
            if !matches!(self.reader.get_ref().last_byte(), Some(b'\n' | b'\r')) {
                return Err(FeedError::Truncated { line });
            }
        }
        Ok(Item::End)
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

/// Text of a field: UTF-8, or else Windows-1252 (said once per file, through `seen`).
fn decode<'a>(
    raw: &'a [u8],
    line: u64,
    seen: &mut bool,
    warnings: &mut Vec<String>,
) -> Cow<'a, str> {
    if let Ok(text) = std::str::from_utf8(raw) {
        return Cow::Borrowed(text);
    }
    if !*seen {
        *seen = true;
        warnings.push(format!(
            "not UTF-8 (first at line {line}): read as Windows-1252"
        ));
    }
    encoding_rs::WINDOWS_1252.decode_without_bom_handling(raw).0
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

    type Rows = Vec<Result<Vec<(String, String)>, RowProblem>>;

    fn read_all(data: &[u8]) -> Result<(Schema, Rows, Vec<String>), FeedError> {
        let mut reader = CsvReader::new(std::io::BufReader::new(data), None)?;
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
            let mut reader = CsvReader::new(std::io::BufReader::new(data), None).unwrap();
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

    #[test]
    fn truncated_last_row_is_a_file_error() {
        let err = read_all(b"a,b,c\n1,2,3\n4,5").unwrap_err();
        assert!(matches!(err, FeedError::Truncated { line: 3 }), "{err}");
        // The same short row followed by a line break is only a ragged row.
        assert!(read_all(b"a,b,c\n1,2,3\n4,5\n").is_ok());
    }

    #[test]
    fn an_unclosed_quote_is_a_file_error() {
        let err = read_all(b"a,b,c\n1,\"2,3\n4,5,6\n7,8,9\n").unwrap_err();
        assert!(matches!(err, FeedError::UnclosedQuote { line: 2 }), "{err}");
    }

    #[test]
    fn duplicate_and_blank_headers() {
        let (schema, _, warnings) = read_all(b"Price,,price\n1,2,3\n").unwrap();
        assert_eq!(schema.name(1), "column 2");
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("appears twice (columns 1 and 3)"));
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
