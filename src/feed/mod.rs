//! Streaming readers of DMS export files: CSV (any of `,` `;` tab `|`) and XML.
//!
//! Owns turning bytes into [`Record`]s: fields by name, each with one value or (XML repeated
//! children) several, tagged with the record's source line. A file is never loaded whole: one
//! record at a time, with every record bounded in size ([`RECORD_LIMIT`]) and XML nesting in
//! depth ([`DEPTH_LIMIT`]). A problem with one row is a [`RowProblem`] and reading goes on; a
//! problem with the file as a whole is a [`FeedError`] and reading stops. What the fields mean
//! is the mapper's business, not this module's.

mod csv;
mod tracked;
mod xml;

pub use self::csv::CsvReader;
pub use self::xml::XmlReader;

use crate::text::{shown_path, Escaped};
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// Largest record accepted, in bytes of the source file.
pub const RECORD_LIMIT: u64 = 1024 * 1024;
/// Deepest XML nesting accepted.
pub const DEPTH_LIMIT: usize = 64;

/// Identifies a field name within one file's [`Schema`].
pub type FieldId = u32;

/// The field names of one file: CSV headers in column order, or XML paths in order of first
/// appearance (`VIN`, `Prices/Internet`, `@Stock`, `Photos/Photo`).
#[derive(Debug, Default, Clone)]
pub struct Schema {
    names: Vec<String>,
    numbered: bool,
}

impl Schema {
    /// The names are a CSV header's columns, in order: field id + 1 is the column's number,
    /// by which a profile may name it (`"#7"`).
    pub fn numbered(&self) -> bool {
        self.numbered
    }

    pub fn name(&self, id: FieldId) -> &str {
        self.names.get(id as usize).map_or("", String::as_str)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = (FieldId, &str)> {
        self.names
            .iter()
            .enumerate()
            .map(|(i, n)| (i as FieldId, n.as_str()))
    }

    fn push(&mut self, name: String) -> FieldId {
        self.names.push(name);
        (self.names.len() - 1) as FieldId
    }

    fn find(&self, name: &str) -> Option<FieldId> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| i as FieldId)
    }
}

/// One record of an export. Reused between reads (`FeedReader::next` refills it) so that a
/// large file costs no allocation per record.
#[derive(Debug, Default, Clone)]
pub struct Record {
    /// The source line the record starts on (1-based; a CSV header is line 1).
    pub line: u64,
    /// The record's number in the file (1-based, header not counted).
    pub index: u64,
    text: String,
    /// (field, start, end) into `text`, in source order; a field may repeat (a list).
    fields: Vec<(FieldId, u32, u32)>,
    /// Per field id, 1 + the index in `fields` of its first value (0: none), so that `get`
    /// costs no search.
    first: Vec<u32>,
    /// No value holds a tab, a line break or two spaces in a row: values need trimming only.
    /// Known for a whole CSV row from two vectorized scans; XML records say false.
    pub tidy: bool,
    /// Fields whose bytes are not UTF-8 in a CSV that otherwise is, shown with each such byte
    /// as `\xNN`: left out of the record; the mapper rejects it.
    undecodable: Vec<(FieldId, String)>,
}

impl Record {
    /// The first value of a field, if the record has it.
    pub fn get(&self, id: FieldId) -> Option<&str> {
        let slot = *self.first.get(id as usize)?;
        let &(_, s, e) = self.fields.get(slot.checked_sub(1)? as usize)?;
        Some(&self.text[s as usize..e as usize])
    }

    /// Every value of a field, in source order.
    pub fn all(&self, id: FieldId) -> impl Iterator<Item = &str> {
        self.fields
            .iter()
            .filter(move |(f, _, _)| *f == id)
            .map(|&(_, s, e)| &self.text[s as usize..e as usize])
    }

    /// Every (field, value) in source order.
    pub fn iter(&self) -> impl Iterator<Item = (FieldId, &str)> {
        self.fields
            .iter()
            .map(|&(f, s, e)| (f, &self.text[s as usize..e as usize]))
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Fields left out because their bytes are not UTF-8 (in a file that otherwise is), with
    /// the bytes shown (`\xNN` for each that is not).
    pub fn undecodable(&self) -> &[(FieldId, String)] {
        &self.undecodable
    }

    fn clear(&mut self) {
        self.text.clear();
        self.fields.clear();
        self.first.fill(0);
        self.tidy = false;
        self.undecodable.clear();
    }

    fn push_undecodable(&mut self, id: FieldId, shown: String) {
        self.undecodable.push((id, shown));
    }

    /// Fills a cleared record with one row in a single copy: `text` holds the row's values
    /// back to back and `ranges` yields each column's value in it (column i is field i).
    /// Empty values are left out, as everywhere else.
    fn push_row(&mut self, text: &str, ranges: impl Iterator<Item = std::ops::Range<usize>>) {
        let base = self.text.len();
        self.text.push_str(text);
        for (column, range) in ranges.enumerate() {
            if range.is_empty() {
                continue;
            }
            let (start, end) = (base + range.start, base + range.end);
            self.fields
                .push((column as FieldId, start as u32, end as u32));
            if self.first.len() <= column {
                self.first.resize(column + 1, 0);
            }
            if self.first[column] == 0 {
                self.first[column] = self.fields.len() as u32;
            }
        }
    }

    fn push(&mut self, id: FieldId, value: &str) {
        let start = self.text.len() as u32;
        self.text.push_str(value);
        self.fields.push((id, start, self.text.len() as u32));
        let slot = id as usize;
        if self.first.len() <= slot {
            self.first.resize(slot + 1, 0);
        }
        if self.first[slot] == 0 {
            self.first[slot] = self.fields.len() as u32;
        }
    }
}

/// A row that could not be read as a record; the rest of the file still is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowProblem {
    pub line: u64,
    pub reason: String,
}

/// What a read produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Item {
    /// The record passed in was filled.
    Record,
    /// A row was skipped for this reason.
    Problem(RowProblem),
    /// The file is done.
    End,
}

/// The file as a whole cannot be read; nothing of it should be used.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    #[error("cannot open: {0}")]
    Open(std::io::Error),
    #[error("read failed: {0}")]
    Io(std::io::Error),
    #[error("the file is empty")]
    Empty,
    #[error("{0}, not CSV or XML")]
    NotText(&'static str),
    #[error(
        "a symbolic link to {}, outside {}: lotsync reads only files in the folder itself",
        shown_path(.target), shown_path(.folder)
    )]
    OutsideFolder { target: PathBuf, folder: PathBuf },
    #[error("line {line}: a record larger than {} KiB (the limit); is this really an export?", RECORD_LIMIT / 1024)]
    RecordTooLarge { line: u64 },
    #[error("line {line}: nesting deeper than {DEPTH_LIMIT} elements (the limit)")]
    TooDeep { line: u64 },
    /// XML that ends before its root element closes.
    #[error("line {line}: the file ends in the middle of a record (truncated?)")]
    Truncated { line: u64 },
    /// A CSV quote still open at the end of the file: everything after it was read as one
    /// field, so it always runs to the end.
    #[error("line {line}: a quoted field opened here never closes (unbalanced quote, or the file is truncated)")]
    UnclosedQuote { line: u64 },
    /// A CSV whose last record was cut: no line break after it, or (in a profile with
    /// `ends_without_newline`) fewer fields than the header.
    #[error("line {line}: {reason}")]
    Incomplete { line: u64, reason: String },
    #[error("line {line}: a DOCTYPE with {what} is refused: lotsync expands no entities and loads nothing external")]
    Doctype { line: u64, what: &'static str },
    /// The parser's words, which may quote the file's names.
    #[error("line {line}: {}", Escaped(.reason))]
    Xml { line: u64, reason: String },
    #[error("no {element:?} element: the profile names it as the record, but the file has none")]
    NoRecordElement { element: String },
    #[error("{}", Escaped(.0))]
    Layout(String),
}

impl FeedError {
    /// The file looks cut off at its end, as one still being written does: waiting for it to
    /// change may make it whole. A quote left open always runs to the end of the file; it is
    /// counted here too, since a file cut inside a quoted field looks exactly like that (a
    /// stray quote does too, and a file that never changes is held in the end). So is an
    /// empty file: created, not written yet.
    pub fn is_incomplete(&self) -> bool {
        matches!(
            self,
            FeedError::Incomplete { .. }
                | FeedError::Truncated { .. }
                | FeedError::UnclosedQuote { .. }
                // Nothing written yet: a file created before its writer fills it.
                | FeedError::Empty
        )
    }
}

/// File formats lotsync reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Csv,
    Xml,
}

/// How to read a file; everything is detected when left out.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    pub format: Option<Format>,
    /// CSV delimiter.
    pub delimiter: Option<u8>,
    /// XML record element name.
    pub record_element: Option<String>,
    /// Refuse a symbolic link that points outside this folder.
    pub confine_to: Option<PathBuf>,
    /// CSV: the DMS never ends its last record with a line break, so a last record without
    /// one is complete when it has every field of the header.
    pub ends_without_newline: bool,
    /// CSV: read a file whose last record is cut as it is (an operator released it): that
    /// record is read like any other, a row with too few fields is a row problem, and the end
    /// of the file is not checked.
    pub accept_incomplete: bool,
}

/// A reader of either format, over a file (the default) or any buffered input.
#[derive(Debug)]
// One reader per open file, never stored in bulk: boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum FeedReader<R: BufRead = BufReader<File>> {
    Csv(CsvReader<R>),
    Xml(XmlReader<R>),
}

impl<R: BufRead> FeedReader<R> {
    /// Reads the next record into `record`.
    pub fn next(&mut self, record: &mut Record) -> Result<Item, FeedError> {
        match self {
            FeedReader::Csv(r) => r.next(record),
            FeedReader::Xml(r) => r.next(record),
        }
    }

    pub fn schema(&self) -> &Schema {
        match self {
            FeedReader::Csv(r) => r.schema(),
            FeedReader::Xml(r) => r.schema(),
        }
    }

    /// File-level notes so far (how the encoding was decided); each said once.
    pub fn take_warnings(&mut self) -> Vec<String> {
        match self {
            FeedReader::Csv(r) => r.take_warnings(),
            FeedReader::Xml(r) => r.take_warnings(),
        }
    }

    /// How the file is being read, for people: `CSV, delimiter ';'` or `XML, records <Unit>`.
    pub fn describe(&self) -> String {
        match self {
            FeedReader::Csv(r) => r.describe(),
            FeedReader::Xml(r) => r.describe(),
        }
    }

    pub fn format(&self) -> Format {
        match self {
            FeedReader::Csv(_) => Format::Csv,
            FeedReader::Xml(_) => Format::Xml,
        }
    }
}

/// Opens an export: refuses links out of `confine_to`, sniffs binary data, picks the format.
pub fn open(path: &Path, options: &ReadOptions) -> Result<FeedReader, FeedError> {
    if let Some(folder) = &options.confine_to {
        check_confined(path, folder)?;
    }
    let file = File::open(path).map_err(FeedError::Open)?;
    let size = file.metadata().map_err(FeedError::Open)?.len();
    let input = BufReader::with_capacity(64 * 1024, file);
    // XML detection reads the start of the file once more, through a second handle.
    // So is the whole file, for its encoding, in the rare file that is not all UTF-8.
    let encoding = || csv::Encoding::Undecided(path.to_owned());
    reader_for(input, options, size, encoding, || {
        let file = File::open(path).map_err(FeedError::Open)?;
        xml::detect_record_element(BufReader::new(file))
    })
}

/// A reader over bytes in memory, detected as `open` does (for tests and fuzzing).
pub fn from_bytes<'a>(
    bytes: &'a [u8],
    options: &ReadOptions,
) -> Result<FeedReader<&'a [u8]>, FeedError> {
    reader_for(
        bytes,
        options,
        bytes.len() as u64,
        || csv::Encoding::of_bytes(bytes),
        || xml::detect_record_element(bytes),
    )
}

/// Picks the format (given, or sniffed from the first bytes) and the XML record element
/// (given, or found by `detect_element`); `size` is the input's length, `encoding` how a CSV
/// decides its encoding.
fn reader_for<R: BufRead>(
    mut input: R,
    options: &ReadOptions,
    size: u64,
    encoding: impl FnOnce() -> csv::Encoding,
    detect_element: impl FnOnce() -> Result<xml::RecordElement, FeedError>,
) -> Result<FeedReader<R>, FeedError> {
    let head = input.fill_buf().map_err(FeedError::Io)?;
    if head.is_empty() {
        return Err(FeedError::Empty);
    }
    let format = match options.format {
        Some(format) => format,
        None => sniff(head)?,
    };
    match format {
        Format::Csv => Ok(FeedReader::Csv(CsvReader::new(
            input,
            options,
            size,
            encoding(),
        )?)),
        Format::Xml => Ok(FeedReader::Xml(match &options.record_element {
            Some(e) => XmlReader::new(input, e.clone()),
            None => XmlReader::detected(input, detect_element()?),
        })),
    }
}

/// The format of a file that starts with `head`, as [`open`] detects it.
pub fn format_of(head: &[u8]) -> Result<Format, FeedError> {
    if head.is_empty() {
        return Err(FeedError::Empty);
    }
    sniff(head)
}

/// Binary data is refused by what it looks like; text starting with `<` is XML, other text CSV.
fn sniff(head: &[u8]) -> Result<Format, FeedError> {
    let kind = match head {
        [0x1f, 0x8b, ..] => Some("gzip-compressed data (unpack it first)"),
        [b'P', b'K', 3, 4, ..] => Some("a ZIP archive (unpack it, or save the sheet as CSV)"),
        [0xD0, 0xCF, 0x11, 0xE0, ..] => Some("an old Excel workbook (save it as CSV)"),
        [b'%', b'P', b'D', b'F', ..] => Some("a PDF document"),
        _ => None,
    };
    if let Some(kind) = kind {
        return Err(FeedError::NotText(kind));
    }
    if is_utf16(head) {
        return Err(FeedError::NotText(
            "UTF-16 text, which lotsync does not read (save the export as UTF-8: Excel's \
             \"CSV UTF-8\")",
        ));
    }
    if head.iter().take(8192).any(|&b| b == 0) {
        return Err(FeedError::NotText("binary data (NUL bytes)"));
    }
    let text = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let first = text.iter().find(|b| !b.is_ascii_whitespace());
    Ok(if first == Some(&b'<') {
        Format::Xml
    } else {
        Format::Csv
    })
}

/// UTF-16: its byte-order mark, or (without one) ASCII text with a NUL beside every character.
fn is_utf16(head: &[u8]) -> bool {
    if head.starts_with(&[0xFF, 0xFE]) || head.starts_with(&[0xFE, 0xFF]) {
        return true;
    }
    let sample = &head[..head.len().min(256) & !1];
    if sample.len() < 8 {
        return false;
    }
    let pairs = sample.chunks_exact(2);
    let half_nul = pairs
        .clone()
        .filter(|p| (p[0] == 0) != (p[1] == 0) && (p[0] | p[1]).is_ascii())
        .count();
    half_nul * 10 >= pairs.len() * 9
}

fn check_confined(path: &Path, folder: &Path) -> Result<(), FeedError> {
    let meta = std::fs::symlink_metadata(path).map_err(FeedError::Open)?;
    if !meta.file_type().is_symlink() {
        return Ok(());
    }
    let target = std::fs::canonicalize(path).map_err(FeedError::Open)?;
    let folder = std::fs::canonicalize(folder).map_err(FeedError::Open)?;
    if target.starts_with(&folder) {
        Ok(())
    } else {
        Err(FeedError::OutsideFolder { target, folder })
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Csv => "CSV",
            Format::Xml => "XML",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniff_tells_formats_and_binaries_apart() {
        assert_eq!(sniff(b"VIN,Stock\n").unwrap(), Format::Csv);
        assert_eq!(
            sniff(b"\xEF\xBB\xBF  <?xml version=\"1.0\"?>").unwrap(),
            Format::Xml
        );
        assert!(sniff(&[0x1f, 0x8b, 8, 0])
            .unwrap_err()
            .to_string()
            .contains("gzip"));
        assert!(sniff(b"VIN\0\0\0").unwrap_err().to_string().contains("NUL"));
    }

    #[test]
    fn errors_quoting_the_file_escape_it() {
        let xml = FeedError::Xml {
            line: 3,
            reason: "expected `</VIN>`, found `</a\x1b[31m>`".into(),
        };
        assert_eq!(
            xml.to_string(),
            "line 3: expected `</VIN>`, found `</a\\u{1b}[31m>`"
        );
        let link = FeedError::OutsideFolder {
            target: PathBuf::from("/etc/a\nb"),
            folder: PathBuf::from("/in"),
        };
        assert!(link
            .to_string()
            .starts_with("a symbolic link to /etc/a\\nb, outside /in:"));
        assert_eq!(FeedError::Layout("x\ry".into()).to_string(), "x\\ry");
    }

    #[test]
    fn record_keeps_repeated_fields_in_order() {
        let mut r = Record::default();
        r.push(0, "a");
        r.push(1, "x");
        r.push(0, "b");
        assert_eq!(r.get(0), Some("a"));
        assert_eq!(r.all(0).collect::<Vec<_>>(), vec!["a", "b"]);
        assert_eq!(r.get(2), None);
        r.clear();
        assert!(r.is_empty());
    }
}
