//! One export file read and mapped, record by record: the loop every command shares (`check`,
//! `plan`, `sync`, the daemon). A row the reader cannot split becomes a rejection like any
//! other; only what stops the whole file is an [`ExportError`].

use super::{infer, parse, KeptColumns, Mapped, Mapper, Problem, Profile, Rejected, Target, Twin};
use crate::api::VehiclePayload;
use crate::feed::{self, FeedError, FeedReader, Item, Record, RowProblem};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

/// The file as a whole cannot be read or mapped.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Feed(#[from] FeedError),
    /// Neither the profile nor `auto` finds the VIN or stock field.
    #[error("{0}")]
    NoKeyFields(String),
    /// Two fields named alike both feed one payload field and their values differ: which is
    /// right cannot be told, so the file is not read.
    #[error(transparent)]
    ColumnsDisagree(Box<Disagreement>),
}

/// Two fields named alike that feed `field` differ on the record at `line`.
#[derive(Debug, thiserror::Error)]
#[error(
    "line {line}: {fields} both give {field}, but differ here ({:?} and {:?}): lotsync will \
     not guess which is right; name the one to use in a profile: [fields] {field} = {:?} or \
     {field} = {:?}",
    .values.0, .values.1, .names.0, .names.1
)]
pub struct Disagreement {
    pub line: u64,
    pub field: &'static str,
    /// Both, for people: `columns 3 ("Price") and 4 ("Price")` or `"@VIN" and "VIN"`.
    pub fields: String,
    pub values: (String, String),
    /// How a profile names each: `#3` (CSV) or the XML path.
    pub names: (String, String),
}

impl ExportError {
    /// The file looks cut off at its end, as one still being written does
    /// ([`FeedError::is_incomplete`]): wait for it to change rather than fail it, and once an
    /// operator releases it, read it with [`ExportFile::open_with`] accepting it as it is.
    pub fn is_incomplete(&self) -> bool {
        match self {
            ExportError::Feed(e) => e.is_incomplete(),
            ExportError::NoKeyFields(_) | ExportError::ColumnsDisagree(_) => false,
        }
    }
}

/// An export file being read and mapped.
pub struct ExportFile {
    reader: FeedReader,
    mapper: Mapper,
    record: Record,
    checked_fields: bool,
    /// What the reader gave for the first records, read ahead to judge columns by their
    /// values ([`Mapper::recognize`]); served before the reader is asked again.
    ahead: VecDeque<Ahead>,
    /// The read-ahead was done (once per file).
    sampled: bool,
    /// What the feed's earlier files recognized by values ([`KeptColumns`]).
    kept: Option<KeptColumns>,
}

/// One item read ahead.
enum Ahead {
    Record(Record),
    Problem(RowProblem),
    End,
    /// Reading stopped here; the error is given when its turn comes, as it would have been.
    Failed(FeedError),
}

impl ExportFile {
    /// Opens a file for a profile; symlinks may not lead out of the file's own folder.
    pub fn open(path: &Path, profile: &Profile, location_id: u64) -> Result<Self, ExportError> {
        ExportFile::open_with(path, profile, location_id, false)
    }

    /// [`ExportFile::open`], and with `accept_incomplete` a file whose last record is cut
    /// (an operator released it) is read as it is: that record is read like any other, or
    /// rejected when it has too few fields, instead of the file being
    /// [incomplete](ExportError::is_incomplete). XML cut before its root closes is refused
    /// all the same: nothing after the cut can be told apart from a broken file.
    pub fn open_with(
        path: &Path,
        profile: &Profile,
        location_id: u64,
        accept_incomplete: bool,
    ) -> Result<Self, ExportError> {
        ExportFile::open_kept(path, profile, location_id, accept_incomplete, None)
    }

    /// [`ExportFile::open_with`], keeping the columns the feed's earlier files recognized by
    /// their values while they still fit ([`KeptColumns`]).
    pub fn open_kept(
        path: &Path,
        profile: &Profile,
        location_id: u64,
        accept_incomplete: bool,
        kept: Option<KeptColumns>,
    ) -> Result<Self, ExportError> {
        let mut options = profile.read_options();
        options.accept_incomplete = accept_incomplete;
        options.confine_to = path.parent().map(|p| {
            if p.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                p.to_owned()
            }
        });
        let reader = feed::open(path, &options)?;
        let mut file = ExportFile {
            reader,
            mapper: Mapper::new(profile.clone(), location_id),
            record: Record::default(),
            checked_fields: false,
            ahead: VecDeque::new(),
            sampled: false,
            kept,
        };
        // A CSV header is known before the first record: a file without key fields fails
        // before anything is mapped (its first records are read to judge the columns no
        // header names). XML paths appear as records are read.
        if matches!(file.reader, FeedReader::Csv(_)) {
            file.sample();
            if let Err(e) = file.require_key_fields() {
                // A file cut short may lack only the records that would show its VIN column:
                // wait for the rest rather than fail it.
                return Err(file.incomplete_ahead().unwrap_or(e));
            }
        }
        Ok(file)
    }

    /// Why a file looks cut at its end (a DMS still writing it), so the daemon can wait for it
    /// before taking it; None when it looks whole, or has other problems (the real read
    /// reports those). Judged from its last bytes, not read twice: a CSV whose last byte is no
    /// line break, an XML whose last byte that is not blank is no `>`, an empty file (created,
    /// not written yet). A CSV of a profile
    /// whose DMS ends its files without a line break is read to its end instead. A file cut
    /// just after a line break (inside a quoted field) passes here, and the real read finds it
    /// incomplete.
    pub fn looks_cut(path: &Path, profile: &Profile) -> Option<String> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = std::fs::File::open(path).ok()?;
        let mut head = [0u8; 512];
        let n = file.read(&mut head).ok()?;
        if n == 0 {
            // Created, not written yet: it waits like a half-written file (an export that is
            // really empty is held in the end, as one that stays cut is).
            return Some(
                "the file is empty: it is incomplete, perhaps still being written".to_owned(),
            );
        }
        let format = match profile.format {
            Some(format) => format,
            None => feed::format_of(&head[..n]).ok()?,
        };
        if format == feed::Format::Csv && profile.ends_without_newline {
            return Self::read_to_end_cut(path, profile);
        }
        let len = file.metadata().ok()?.len();
        let from = len.saturating_sub(64);
        file.seek(SeekFrom::Start(from)).ok()?;
        let mut tail = Vec::with_capacity(64);
        file.read_to_end(&mut tail).ok()?;
        match format {
            feed::Format::Csv => (!matches!(tail.last(), None | Some(b'\n' | b'\r'))).then(|| {
                "the file ends without a line break after its last record: it is incomplete, \
                 perhaps still being written"
                    .to_owned()
            }),
            feed::Format::Xml => {
                let last = tail.iter().rev().find(|b| !b.is_ascii_whitespace());
                (last.is_some_and(|b| *b != b'>')).then(|| {
                    "the file ends inside an element: it is incomplete, perhaps still being \
                     written"
                        .to_owned()
                })
            }
        }
    }

    /// [`ExportFile::looks_cut`] by reading the whole file (without mapping it).
    fn read_to_end_cut(path: &Path, profile: &Profile) -> Option<String> {
        let mut file = match ExportFile::open(path, profile, 0) {
            Ok(file) => file,
            Err(e) if e.is_incomplete() => return Some(e.to_string()),
            Err(_) => return None,
        };
        loop {
            match file.next_item() {
                Ok(Item::End) => return None,
                Ok(_) => {}
                Err(e) if e.is_incomplete() => return Some(e.to_string()),
                Err(_) => return None,
            }
        }
    }

    /// Reads the first [`infer::SAMPLE`] records ahead and lets the mapper judge the columns
    /// no header names by their values. Once per file; what stops the reading is kept for its
    /// turn.
    fn sample(&mut self) {
        if self.sampled {
            return;
        }
        self.sampled = true;
        if !self.mapper.profile().auto {
            self.mapper.bind(self.reader.schema());
            return;
        }
        let mut read = 0;
        // Rows that are problems count too, so that a file of nothing else is not held whole.
        while read < infer::SAMPLE && self.ahead.len() < 4 * infer::SAMPLE {
            let mut record = Record::default();
            match self.reader.next(&mut record) {
                Ok(Item::Record) => {
                    read += 1;
                    self.ahead.push_back(Ahead::Record(record));
                }
                Ok(Item::Problem(p)) => self.ahead.push_back(Ahead::Problem(p)),
                Ok(Item::End) => {
                    self.ahead.push_back(Ahead::End);
                    break;
                }
                Err(e) => {
                    self.ahead.push_back(Ahead::Failed(e));
                    break;
                }
            }
        }
        let records: Vec<&Record> = self
            .ahead
            .iter()
            .filter_map(|item| match item {
                Ahead::Record(record) => Some(record),
                _ => None,
            })
            .collect();
        self.mapper
            .recognize(self.reader.schema(), &records, self.kept.as_ref());
    }

    /// The error that stopped the read-ahead, when it says the file is incomplete.
    fn incomplete_ahead(&mut self) -> Option<ExportError> {
        let at = self
            .ahead
            .iter()
            .position(|item| matches!(item, Ahead::Failed(e) if e.is_incomplete()))?;
        match self.ahead.remove(at) {
            Some(Ahead::Failed(e)) => Some(ExportError::Feed(e)),
            _ => None,
        }
    }

    /// The next item: read ahead, or from the reader.
    fn next_item(&mut self) -> Result<Item, FeedError> {
        match self.ahead.pop_front() {
            None => self.reader.next(&mut self.record),
            Some(Ahead::Record(record)) => {
                self.record = record;
                Ok(Item::Record)
            }
            Some(Ahead::Problem(p)) => Ok(Item::Problem(p)),
            Some(Ahead::End) => Ok(Item::End),
            Some(Ahead::Failed(e)) => Err(e),
        }
    }

    /// The next record, mapped; None at the end of the file.
    pub fn next_record(&mut self) -> Result<Option<Mapped<'_>>, ExportError> {
        self.sample();
        let mapped = match self.next_item()? {
            Item::End => {
                // An XML document without a record (`<Inventory/>`) shows no field to check.
                let no_record =
                    matches!(self.reader, FeedReader::Xml(_)) && self.reader.schema().is_empty();
                if !no_record {
                    self.require_key_fields()?;
                }
                return Ok(None);
            }
            Item::Problem(p) => Mapped::Rejected(Rejected {
                line: p.line,
                problems: vec![Problem {
                    field: "record",
                    reason: p.reason,
                    value: None,
                }],
                ..Rejected::default()
            }),
            Item::Record => {
                self.mapper.bind(self.reader.schema());
                self.require_key_fields()?;
                if let Some(twin) = self.mapper.disagreement(&self.record) {
                    return Err(self.disagreement(twin));
                }
                self.mapper.map(self.reader.schema(), &self.record)
            }
        };
        Ok(Some(mapped))
    }

    pub fn reader(&self) -> &FeedReader {
        &self.reader
    }

    /// The record just read, as written (its fields by the reader's schema).
    pub fn record(&self) -> &Record {
        &self.record
    }

    pub fn mapper(&self) -> &Mapper {
        &self.mapper
    }

    /// The payload of the record just accepted, moved out ([`Mapper::take_payload`]).
    pub fn take_payload(&mut self, spare: VehiclePayload) -> VehiclePayload {
        self.mapper.take_payload(spare)
    }

    /// The columns this file bound by their values, for the feed's next file.
    pub fn kept_columns(&self) -> KeptColumns {
        self.mapper.kept_columns(self.reader.schema())
    }

    /// What is worth knowing about the file as a whole: the reader's warnings (encoding, …),
    /// how fields were bound, fields the profile names that the file lacks.
    pub fn notes(&mut self) -> Vec<String> {
        let mut notes = self.reader.take_warnings();
        let binding = self.mapper.binding();
        notes.extend(binding.notes.iter().cloned());
        for (target, source) in &binding.missing {
            notes.push(format!(
                "the profile reads {} from {source:?}, which this file does not have",
                target.name()
            ));
        }
        // Twins that differed stopped the file: these agreed on every record read.
        for twin in &binding.twins {
            notes.push(format!(
                "{} both give {} and agree on every record: {} is used",
                self.both(*twin),
                twin.target.name(),
                self.one(twin.used)
            ));
        }
        notes
    }

    /// Two fields for people: `columns 3 ("Price") and 4 ("Price")` in a CSV, `"@VIN" and
    /// "VIN"` in XML.
    fn both(&self, twin: Twin) -> String {
        let schema = self.reader.schema();
        let (a, b) = (schema.name(twin.used), schema.name(twin.other));
        if schema.numbered() {
            format!(
                "columns {} ({a:?}) and {} ({b:?})",
                twin.used + 1,
                twin.other + 1
            )
        } else {
            format!("{a:?} and {b:?}")
        }
    }

    /// One field for people: `column 3` or `"@VIN"`.
    fn one(&self, id: crate::feed::FieldId) -> String {
        let schema = self.reader.schema();
        if schema.numbered() {
            format!("column {}", id + 1)
        } else {
            format!("{:?}", schema.name(id))
        }
    }

    /// How a profile names a field so as to mean only it: `#3`, or the XML path.
    fn name_in_profile(&self, id: crate::feed::FieldId) -> String {
        let schema = self.reader.schema();
        if schema.numbered() {
            format!("#{}", id + 1)
        } else {
            schema.name(id).to_owned()
        }
    }

    fn disagreement(&self, twin: Twin) -> ExportError {
        let value = |id| {
            self.record
                .get(id)
                .map(|v| parse::clean(v).into_owned())
                .unwrap_or_default()
        };
        ExportError::ColumnsDisagree(Box::new(Disagreement {
            line: self.record.line,
            field: twin.target.name(),
            fields: self.both(twin),
            values: (value(twin.used), value(twin.other)),
            names: (
                self.name_in_profile(twin.used),
                self.name_in_profile(twin.other),
            ),
        }))
    }

    /// A file in which neither the profile nor auto finds a VIN or stock field cannot be
    /// mapped. Checked once, as soon as the fields are known. The message names the columns
    /// looked at and the profile line that would fix it.
    fn require_key_fields(&mut self) -> Result<(), ExportError> {
        if self.checked_fields {
            return Ok(());
        }
        self.checked_fields = true;
        let binding = self.mapper.binding();
        let schema = self.reader.schema();
        let mut problems = Vec::new();
        if binding.field(Target::Vin).is_none() {
            problems.push(self.no_vin_column());
        }
        if binding.field(Target::Stock).is_none() {
            let names: Vec<String> = binding
                .unused(schema)
                .iter()
                .take(12)
                .map(|n| format!("{n:?}"))
                .collect();
            problems.push(format!(
                "no column for stock: no header lotsync knows for it among {}; name the stock \
                 number's column in a profile: [fields] stock = \"...\"",
                if names.is_empty() {
                    "no fields at all".to_owned()
                } else {
                    names.join(", ")
                }
            ));
        }
        if problems.is_empty() {
            return Ok(());
        }
        Err(ExportError::NoKeyFields(problems.join("; and ")))
    }

    /// Why no column is the VIN: the columns looked at, by their share of VIN-like values, and
    /// the profile line for the likeliest.
    fn no_vin_column(&self) -> String {
        let schema = self.reader.schema();
        let candidates = &self.mapper.binding().vin_candidates;
        if schema.is_empty() {
            return "no column for vin: the file has no fields at all".to_owned();
        }
        if !self.mapper.profile().auto {
            return "no column for vin: the profile names none and matches no others (auto = \
                    false); name it: [fields] vin = \"...\""
                .to_owned();
        }
        let looked_at: Vec<String> = candidates
            .iter()
            .take(8)
            .map(|l| {
                format!(
                    "{:?} {}",
                    schema.name(l.field),
                    if l.of == 0 {
                        "(empty)".to_owned()
                    } else {
                        format!("({:.0}% VIN-like)", (l.share() * 100.0).floor())
                    }
                )
            })
            .collect();
        let more = candidates.len().saturating_sub(looked_at.len());
        let best = candidates.first().filter(|l| l.agree > 0);
        let fix = match best {
            Some(l) => format!(
                "if {:?} holds the VINs, name it in a profile: [fields] vin = {:?}",
                schema.name(l.field),
                infer::name_in_profile(schema, l.field)
            ),
            None => "name the VIN's column in a profile: [fields] vin = \"...\" (and \
                     vin_check = \"lenient\" for serials that are not 17-character VINs)"
                .to_owned(),
        };
        format!(
            "no column for vin: no header lotsync knows for it, and no column whose values are \
             nearly all VINs (looked at {}{}); {fix}",
            if looked_at.is_empty() {
                "no columns: every one feeds another field".to_owned()
            } else {
                looked_at.join(", ")
            },
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file holding `contents` in a fresh folder (removed when the guard drops).
    fn temp_file(name: &str, contents: &str) -> (tempfile::TempDir, PathBuf) {
        let tmp = crate::testing::temp_dir("export");
        let path = tmp.path().join(name);
        std::fs::write(&path, contents).unwrap();
        (tmp, path)
    }

    /// Reads a whole file: records read, or the error that stopped it.
    fn read(file: Result<ExportFile, ExportError>) -> Result<usize, ExportError> {
        let mut file = file?;
        let mut n = 0;
        while file.next_record()?.is_some() {
            n += 1;
        }
        Ok(n)
    }

    #[test]
    fn a_cut_file_is_incomplete_until_accepted_as_it_is() {
        // Names differ from the other tests': they run at once in one folder.
        let (_tmp, path) = temp_file(
            "incomplete.csv",
            "VIN,Stock\n1HGCM82633A004352,A1\n1M8GDM9AXKP042788,A",
        );
        let auto = Profile::auto();
        let err = read(ExportFile::open(&path, &auto, 10)).unwrap_err();
        assert!(err.is_incomplete(), "{err}");
        assert_eq!(
            read(ExportFile::open_with(&path, &auto, 10, true)).unwrap(),
            2
        );

        let (_tmp, path) = temp_file("no-fields.csv", "Foo,Bar\n1,2\n");
        let err = read(ExportFile::open(&path, &auto, 10)).unwrap_err();
        assert!(!err.is_incomplete(), "{err}");
        let (_tmp, path) = temp_file(
            "cut.xml",
            "<Inventory><Vehicle><VIN>1HGCM82633A004352</VIN><Stock>A1</Stock></Vehicle><Veh",
        );
        let err = read(ExportFile::open_with(&path, &auto, 10, true)).unwrap_err();
        assert!(err.is_incomplete(), "{err}");
    }

    /// A "Vehicle Type" column of body words (Trailer, RV, Car, Suv) is no new/used column:
    /// its values make it the body style.
    #[test]
    fn a_vehicle_type_column_of_body_words_is_the_body_style() {
        let (_tmp, path) = temp_file(
            "vehicle-type.csv",
            "VIN,Stock,Vehicle Type\n1HGCM82633A004352,A1,Trailer\n1M8GDM9AXKP042788,A2,RV\n\
             1FTFW1ET9DFC10312,A3,Car\n1HGCM82653A004353,A4,Suv\n",
        );
        let mut file = ExportFile::open(&path, &Profile::auto(), 10).unwrap();
        let mut styles = Vec::new();
        while let Some(mapped) = file.next_record().unwrap() {
            let accepted = mapped.into_result().unwrap();
            assert_eq!(accepted.payload.vehicle_type, None);
            styles.push(accepted.payload.body_style);
        }
        use crate::api::BodyStyle;
        assert_eq!(
            styles,
            [
                Some(BodyStyle::Trailer),
                Some(BodyStyle::Rv),
                None,
                Some(BodyStyle::Suv)
            ]
        );
    }

    #[test]
    fn xml_fields_named_alike_are_compared_and_named_by_path() {
        let vehicle = |attribute: &str, element: &str| {
            format!("<Vehicle VIN=\"{attribute}\"><VIN>{element}</VIN><Stock>A</Stock></Vehicle>")
        };
        let auto = Profile::auto();
        let agree = format!(
            "<Inventory>{}{}</Inventory>\n",
            vehicle("1HGCM82633A004352", "1HGCM82633A004352"),
            vehicle("1M8GDM9AXKP042788", " 1M8GDM9AXKP042788 ")
        );
        let (_tmp, path) = temp_file("agree.xml", &agree);
        let mut file = ExportFile::open(&path, &auto, 10).unwrap();
        while file.next_record().unwrap().is_some() {}
        assert!(file.notes().contains(
            &"\"@VIN\" and \"VIN\" both give vin and agree on every record: \"@VIN\" is used"
                .to_owned()
        ));
        let differ = format!(
            "<Inventory>{}\n{}</Inventory>\n",
            vehicle("1HGCM82633A004352", "1HGCM82633A004352"),
            vehicle("1M8GDM9AXKP042788", "5YJ3E1EA2KF317000")
        );
        let (_tmp, path) = temp_file("differ.xml", &differ);
        let err = read(ExportFile::open(&path, &auto, 10)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 2: \"@VIN\" and \"VIN\" both give vin, but differ here (\"1M8GDM9AXKP042788\" \
             and \"5YJ3E1EA2KF317000\"): lotsync will not guess which is right; name the one to \
             use in a profile: [fields] vin = \"@VIN\" or vin = \"VIN\""
        );
        let mut named = Profile::auto();
        named.fields.insert(Target::Vin, "VIN".into());
        assert_eq!(read(ExportFile::open(&path, &named, 10)).unwrap(), 2);
    }

    /// A file cut before any record shows its VIN column is incomplete, not refused: only its
    /// values would have named the column.
    #[test]
    fn a_file_cut_before_its_vins_show_is_incomplete() {
        let auto = Profile::auto();
        let (_tmp, path) = temp_file("cut-before-vins.csv", "Unit,Stock\n\"1HGCM82633A004352\n");
        let err = read(ExportFile::open(&path, &auto, 10)).unwrap_err();
        assert!(err.is_incomplete(), "{err}");
        let mut lenient = Profile::auto();
        lenient.ends_without_newline = true;
        let (_tmp, path) = temp_file("cut-in-a-vin.csv", "Unit,Stock,Make\n1HGCM82633A00");
        assert!(ExportFile::looks_cut(&path, &lenient).is_some());
    }

    /// A file cut at its end, or empty, looks cut from its last bytes; a whole one, or one
    /// whose other problems (no VIN column, binary data) the real read reports, does not.
    #[test]
    fn a_file_looks_cut_from_its_last_bytes() {
        let auto = Profile::auto();
        let cut = |name: &str, text: &str| ExportFile::looks_cut(&temp_file(name, text).1, &auto);
        assert!(cut("cut.csv", "VIN,Stock\n1HGCM82633A004352,A1")
            .is_some_and(|r| r.contains("without a line break")));
        assert_eq!(
            cut("whole.csv", "VIN,Stock\n1HGCM82633A004352,A1\r\n"),
            None
        );
        assert_eq!(cut("nokeys.csv", "Make,Model\nFord,F-150\n"), None);
        // Created, not written yet: it waits like a half-written file.
        assert!(cut("empty.csv", "").is_some_and(|r| r.contains("empty")));
        assert!(cut("cut.xml", "<Inventory><Vehicle><VIN>1HG").is_some());
        assert_eq!(
            cut("whole.xml", "<Inventory><Vehicle/></Inventory>\n"),
            None
        );
        let mut lenient = Profile::auto();
        lenient.ends_without_newline = true;
        let (_tmp, path) = temp_file("unterminated.csv", "VIN,Stock\n1HGCM82633A004352,A1");
        assert_eq!(ExportFile::looks_cut(&path, &lenient), None);
        let (_tmp, path) = temp_file("short.csv", "VIN,Stock,Make\n1HGCM82633A004352,A1");
        assert!(
            ExportFile::looks_cut(&path, &lenient).is_some(),
            "fewer fields: still cut"
        );
    }
}
