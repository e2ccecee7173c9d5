//! `lotsync check`: reads and maps export files and says what would be sent; no state, no
//! network. File names, header names and values come from outside: the text report prints
//! them escaped ([`lotsync::text`]); the ndjson report is JSON, escaped by serde.

use super::ProblemLine;
use lotsync::api::VehiclePayload;
use lotsync::feed::FeedReader;
use lotsync::mapper::{ExportError, ExportFile, Mapped, Mapper, Problem, Profile};
use lotsync::text::{shown_path, Escaped};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

/// Arguments of `lotsync check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Export files (CSV or XML).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Mapping profile: `auto`, a name in --profiles-dir, or a path to a .toml file.
    #[arg(long, default_value = "auto", value_name = "NAME|PATH")]
    pub profile: String,
    /// Where profiles named by --profile live; without it, the config's `profiles_dir`
    /// (--config, else ./config/profiles when there is one, else the installed config's).
    #[arg(long, value_name = "DIR")]
    pub profiles_dir: Option<PathBuf>,
    /// lotsync's config, for its profiles_dir (nothing else of it is used).
    #[arg(long, env = "LOTSYNC_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The location the vehicles belong to; without it a placeholder (0) is used.
    #[arg(long, value_name = "N")]
    pub location_id: Option<u64>,
    /// text: a summary and every problem; ndjson: one POST body per accepted vehicle on
    /// stdout, one JSON line per problem on stderr.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Ndjson,
}

/// The location used when none is given: no real location has id 0.
const PLACEHOLDER_LOCATION: u64 = 0;

/// Runs the check: done when every file could be read, failed when one could not.
pub fn check(args: CheckArgs) -> anyhow::Result<lotsync::outcome::CommandOutcome> {
    let profiles_dir = profiles_dir(&args)?;
    let profile = Profile::find(&args.profile, &profiles_dir)?;
    let location_id = args.location_id.unwrap_or(PLACEHOLDER_LOCATION);
    // Both streams are buffered, and written by threads of their own, so that the kernel
    // copies one buffer into its file while the next is filled: a problem line written to a
    // bare stderr was many small writes, and an export with many warnings spent most of its
    // time in them. Flushed at the end, and before a file's "cannot be read", so that what
    // came before it shows first.
    let mut out = ThreadedWriter::new(super::stdout());
    let mut err = ThreadedWriter::new(std::io::stderr());
    if args.location_id.is_none() {
        let note = format!(
            "no --location-id: vehicles get the placeholder location {PLACEHOLDER_LOCATION}"
        );
        match args.format {
            OutputFormat::Text => writeln!(out, "{note}")?,
            OutputFormat::Ndjson => writeln!(err, "{}", serde_json::json!({ "note": note }))?,
        }
    }
    let mut failed = false;
    for file in &args.files {
        let outcome = check_file(file, &profile, location_id, args.format, &mut out, &mut err);
        if let Err(CheckError::Output(e)) = outcome {
            // What the other stream holds still goes out, before the error is said.
            let _ = err.flush();
            return Err(anyhow::Error::from(e).context("writing the report"));
        }
        if let Err(e) = outcome {
            failed = true;
            out.flush()?;
            err.flush()?;
            match args.format {
                OutputFormat::Text => writeln!(
                    err,
                    "{}: cannot be read: {}",
                    shown_path(file),
                    Escaped(&e.to_string())
                )?,
                OutputFormat::Ndjson => writeln!(
                    err,
                    "{}",
                    serde_json::json!({ "file": file.display().to_string(), "error": e.to_string() })
                )?,
            }
        }
    }
    out.flush()?;
    err.flush()?;
    Ok(match failed {
        true => lotsync::outcome::CommandOutcome::Failed,
        false => lotsync::outcome::CommandOutcome::Done,
    })
}

/// Where `--profile NAME` is looked for: given, or the config's, or the checkout's, or the
/// installed config's.
fn profiles_dir(args: &CheckArgs) -> anyhow::Result<PathBuf> {
    if let Some(dir) = &args.profiles_dir {
        return Ok(dir.clone());
    }
    if let Some(config) = &args.config {
        return Ok(lotsync::config::Config::load(config)?.profiles_dir);
    }
    let checkout = PathBuf::from("config/profiles");
    let installed = Path::new(lotsync::config::DEFAULT_PATH);
    if !checkout.is_dir() && installed.is_file() {
        if let Ok(config) = lotsync::config::Config::load(installed) {
            return Ok(config.profiles_dir);
        }
    }
    Ok(checkout)
}

/// Counts for one file.
#[derive(Debug, Default)]
struct Tally {
    records: u64,
    accepted: u64,
    rejected: u64,
    warnings: u64,
}

/// An accepted record in ndjson mode: the POST body plus where it came from.
#[derive(Serialize)]
struct PayloadLine<'a> {
    #[serde(flatten)]
    payload: &'a VehiclePayload,
    #[serde(rename = "_source")]
    source: Source<'a>,
    #[serde(rename = "_sold", skip_serializing_if = "Option::is_none")]
    sold: Option<bool>,
}

#[derive(Serialize)]
struct Source<'a> {
    file: &'a str,
    line: u64,
}

fn check_file(
    path: &Path,
    profile: &Profile,
    location_id: u64,
    format: OutputFormat,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), CheckError> {
    // In JSON as it always was (serde escapes it); in text, escaped.
    let shown = match format {
        OutputFormat::Text => shown_path(path),
        OutputFormat::Ndjson => path.display().to_string(),
    };
    let mut file = ExportFile::open(path, profile, location_id)?;
    let mut tally = Tally::default();
    let mut rejected: Vec<(u64, Problem)> = Vec::new();
    let mut warnings: Vec<(u64, Problem)> = Vec::new();
    let mut keeps: Vec<(u64, String)> = Vec::new();
    // One payload line at a time, serialized where writing is cheapest (a Vec's own bytes:
    // serde writes a line in dozens of small pieces), then handed to `out` whole.
    let mut line_bytes: Vec<u8> = Vec::with_capacity(1024);
    while let Some(mapped) = file.next_record()? {
        tally.records += 1;
        match mapped {
            Mapped::Accepted(a) => {
                tally.accepted += 1;
                tally.warnings += a.warnings.len() as u64;
                if format == OutputFormat::Ndjson {
                    let line = PayloadLine {
                        payload: &a.payload,
                        source: Source {
                            file: &shown,
                            line: a.line,
                        },
                        sold: a.sold,
                    };
                    line_bytes.clear();
                    serde_json::to_writer(&mut line_bytes, &line).map_err(std::io::Error::from)?;
                    line_bytes.push(b'\n');
                    out.write_all(&line_bytes)?;
                }
                for w in &a.warnings {
                    report(format, &shown, a.line, "warning", w, &mut warnings, err)?;
                }
            }
            Mapped::Rejected(r) => {
                tally.rejected += 1;
                for p in &r.problems {
                    report(format, &shown, r.line, "rejected", p, &mut rejected, err)?;
                }
                if let Some(what) = stands_for(&r) {
                    match format {
                        OutputFormat::Text => keeps.push((r.line, what)),
                        OutputFormat::Ndjson => {
                            let json = serde_json::json!({
                                "file": shown,
                                "line": r.line,
                                "keeps": { "vin": r.vin, "vin_text": r.vin_text, "stock": r.stock },
                            });
                            writeln!(err, "{json}")?;
                        }
                    }
                }
            }
        }
    }
    let notes = file.notes();
    tally.warnings += notes.len() as u64;
    // Said once the text summary is out (it shows which columns were found).
    let empty = tally.records == 0;
    match format {
        OutputFormat::Text => {
            write_summary(
                out,
                &shown,
                file.reader(),
                file.mapper(),
                &tally,
                location_id,
            )?;
            if !rejected.is_empty() {
                writeln!(out, "  rejected:")?;
                for (line, p) in &rejected {
                    writeln!(out, "    {shown}:{line}: {p}")?;
                }
            }
            if !keeps.is_empty() {
                writeln!(
                    out,
                    "  rejected records that keep a vehicle on the lot (check has no state; \
                     `lotsync plan` names the vehicle each keeps):"
                )?;
                for (line, what) in &keeps {
                    writeln!(
                        out,
                        "    {shown}:{line}: keeps on the lot the vehicle the state knows by \
                         {what}: a full snapshot neither sells nor changes it"
                    )?;
                }
            }
            if !warnings.is_empty() {
                writeln!(out, "  warnings:")?;
                for (line, p) in &warnings {
                    writeln!(out, "    {shown}:{line}: {p}")?;
                }
            }
            if !notes.is_empty() {
                writeln!(out, "  about the file:")?;
                for note in &notes {
                    writeln!(out, "    {}", Escaped(note))?;
                }
            }
        }
        OutputFormat::Ndjson => {
            for note in &notes {
                writeln!(
                    err,
                    "{}",
                    serde_json::json!({ "file": shown, "note": note })
                )?;
            }
        }
    }
    match empty {
        true => Err(CheckError::NoRecords),
        false => Ok(()),
    }
}

/// What a rejected record still says of its vehicle, in words (escaped: it comes from
/// outside); None when nothing.
fn stands_for(r: &lotsync::mapper::Rejected) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(vin) = &r.vin {
        parts.push(format!("VIN {}", Escaped(vin)));
    }
    if let Some(text) = &r.vin_text {
        parts.push(format!("a VIN one typo away from {}", Escaped(text)));
    }
    if let Some(stock) = &r.stock {
        parts.push(format!("stock number {} at this location", Escaped(stock)));
    }
    (!parts.is_empty()).then(|| parts.join(" or "))
}

/// In text mode problems are gathered for the summary; in ndjson mode each is a stderr line.
fn report(
    format: OutputFormat,
    file: &str,
    line: u64,
    severity: &'static str,
    problem: &Problem,
    gathered: &mut Vec<(u64, Problem)>,
    err: &mut impl Write,
) -> std::io::Result<()> {
    match format {
        OutputFormat::Text => gathered.push((line, problem.clone())),
        OutputFormat::Ndjson => {
            let json = ProblemLine {
                file,
                line,
                severity,
                problem,
            };
            serde_json::to_writer(&mut *err, &json)?;
            err.write_all(b"\n")?;
        }
    }
    Ok(())
}

fn write_summary(
    out: &mut impl Write,
    shown: &str,
    reader: &FeedReader,
    mapper: &Mapper,
    tally: &Tally,
    location_id: u64,
) -> std::io::Result<()> {
    let profile = mapper.profile();
    writeln!(
        out,
        "{shown}: {}; profile {}",
        reader.describe(),
        Escaped(&profile.name)
    )?;
    let schema = reader.schema();
    // Names are quoted with `{:?}`, which escapes them too.
    writeln!(
        out,
        "  fields: {}",
        mapper.binding().describe(schema).join(", ")
    )?;
    let unused = mapper.binding().unused(schema);
    if !unused.is_empty() {
        let unused: Vec<String> = unused.iter().map(|n| format!("{n:?}")).collect();
        writeln!(out, "  not used: {}", unused.join(", "))?;
    }
    if profile.locations.is_empty() {
        writeln!(out, "  location_id: {location_id}")?;
    } else {
        let codes: Vec<String> = profile
            .locations
            .iter()
            .map(|(code, id)| format!("{} -> {id}", Escaped(code)))
            .collect();
        writeln!(out, "  location_id by lot code: {}", codes.join(", "))?;
    }
    writeln!(
        out,
        "  {} records: {} accepted, {} rejected; {} warnings",
        tally.records, tally.accepted, tally.rejected, tally.warnings
    )
}

#[derive(Debug, thiserror::Error)]
enum CheckError {
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error("cannot write")]
    Output(#[from] std::io::Error),
    /// A header and nothing under it but blank or comma-only lines, or an empty XML root:
    /// no vehicle. The daemon holds such a full snapshot rather than selling the whole lot; a
    /// delta feed's is a day without changes.
    #[error(
        "no vehicle records (at most blank or empty lines under its header, or an empty root \
         element): a full feed's snapshot the daemon holds, a delta feed's day without changes"
    )]
    NoRecords,
}

/// Bytes gathered before a buffer goes to the writing thread.
const BUFFER: usize = 256 * 1024;
/// Buffers handed over and not yet written, at most.
const IN_FLIGHT: usize = 2;

/// A buffered stream whose buffers a thread of its own writes, so that formatting the next
/// lines goes on while the kernel copies the last ones. `flush` returns once everything
/// handed over is written; a write that failed is the error of the next call.
struct ThreadedWriter {
    buf: Vec<u8>,
    to_writer: Option<mpsc::SyncSender<Vec<u8>>>,
    /// Written buffers coming back, emptied: one per buffer handed over.
    written: mpsc::Receiver<Vec<u8>>,
    in_flight: usize,
    writer: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl ThreadedWriter {
    fn new(mut sink: impl Write + Send + 'static) -> ThreadedWriter {
        let (to_writer, buffers) = mpsc::sync_channel::<Vec<u8>>(IN_FLIGHT);
        let (give_back, written) = mpsc::sync_channel(IN_FLIGHT + 1);
        let writer = std::thread::spawn(move || {
            for mut buf in buffers {
                sink.write_all(&buf)?;
                sink.flush()?;
                buf.clear();
                // The other side may be gone (it failed, or is done): nothing to hand back.
                let _ = give_back.send(buf);
            }
            Ok(())
        });
        ThreadedWriter {
            buf: Vec::with_capacity(BUFFER),
            to_writer: Some(to_writer),
            written,
            in_flight: 0,
            writer: Some(writer),
        }
    }

    /// The buffer is full: handed over.
    #[cold]
    #[inline(never)]
    fn full(&mut self) -> std::io::Result<()> {
        self.hand_over(IN_FLIGHT)
    }

    /// Hands the buffer to the writer; waits while too many are in flight.
    fn hand_over(&mut self, limit: usize) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            let spare = Vec::with_capacity(BUFFER);
            let full = std::mem::replace(&mut self.buf, spare);
            let sent = self.to_writer.as_ref().map(|tx| tx.send(full));
            if !matches!(sent, Some(Ok(()))) {
                return Err(self.failure());
            }
            self.in_flight += 1;
        }
        while self.in_flight > limit {
            match self.written.recv() {
                Ok(back) => {
                    self.in_flight -= 1;
                    if back.capacity() >= BUFFER && self.buf.is_empty() {
                        self.buf = back;
                    }
                }
                Err(_) => return Err(self.failure()),
            }
        }
        Ok(())
    }

    /// Why the writer stopped: its own error.
    fn failure(&mut self) -> std::io::Error {
        self.to_writer = None;
        match self.writer.take().map(std::thread::JoinHandle::join) {
            Some(Ok(Err(e))) => e,
            _ => std::io::Error::other("the output's writer stopped"),
        }
    }
}

impl Drop for ThreadedWriter {
    /// What is buffered still goes out, and the writer is waited for: an early return (an
    /// error) must not lose the lines before it.
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            if let Some(tx) = &self.to_writer {
                // A writer already gone has said why to the last call; nothing to add here.
                let _ = tx.send(std::mem::take(&mut self.buf));
            }
        }
        self.to_writer = None;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl Write for ThreadedWriter {
    // serde writes a JSON line in dozens of small pieces: the usual case (append) inlined,
    // the hand-over kept out of line.
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.write_all(bytes)?;
        Ok(bytes.len())
    }

    #[inline]
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= BUFFER {
            self.full()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.hand_over(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A sink whose bytes the test reads back, failing once it holds `fail_after` bytes.
    #[derive(Clone)]
    struct Shared {
        bytes: Arc<Mutex<Vec<u8>>>,
        fail_after: usize,
    }

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let mut bytes = self.bytes.lock().unwrap();
            if bytes.len() >= self.fail_after {
                return Err(std::io::Error::other("disk full"));
            }
            bytes.extend_from_slice(b);
            Ok(b.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn threaded_writer_keeps_every_byte_in_order_and_flush_waits_for_them() {
        let sink = Shared {
            bytes: Arc::default(),
            fail_after: usize::MAX,
        };
        let mut out = ThreadedWriter::new(sink.clone());
        let mut expected = Vec::new();
        for n in 0..100_000u32 {
            let line = format!("line {n}\n");
            out.write_all(line.as_bytes()).unwrap();
            expected.extend_from_slice(line.as_bytes());
        }
        out.flush().unwrap();
        assert_eq!(*sink.bytes.lock().unwrap(), expected);
    }

    #[test]
    fn threaded_writer_dropped_unflushed_still_writes_everything() {
        let sink = Shared {
            bytes: Arc::default(),
            fail_after: usize::MAX,
        };
        let mut out = ThreadedWriter::new(sink.clone());
        let line = [b'y'; 1000];
        for _ in 0..1000 {
            out.write_all(&line).unwrap();
        }
        drop(out);
        assert_eq!(sink.bytes.lock().unwrap().len(), 1_000_000);
    }

    #[test]
    fn threaded_writer_reports_the_writers_error() {
        let sink = Shared {
            bytes: Arc::default(),
            fail_after: 10,
        };
        let mut out = ThreadedWriter::new(sink);
        let mut result = Ok(());
        for _ in 0..10 {
            result = out.write_all(&[b'x'; BUFFER]).and_then(|()| out.flush());
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result.unwrap_err().to_string(), "disk full");
    }
}
