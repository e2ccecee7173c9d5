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
use std::sync::{mpsc, Arc};

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
    // copies one buffer into its file while the next is filled (and payload lines are
    // serialized there): a problem line written to a bare stderr was many small writes, and
    // an export with many warnings spent most of its time in them. Flushed at the end, and
    // before a file's "cannot be read", so that what came before it shows first.
    let mut out = Out::new(args.format);
    let mut err = threaded_writer(std::io::stderr());
    if args.location_id.is_none() {
        let note = format!(
            "no --location-id: vehicles get the placeholder location {PLACEHOLDER_LOCATION}"
        );
        match &mut out {
            Out::Text(out) => writeln!(out, "{note}")?,
            Out::Payloads(_) => writeln!(err, "{}", serde_json::json!({ "note": note }))?,
        }
    }
    let mut failed = false;
    for file in &args.files {
        let outcome = check_file(file, &profile, location_id, &mut out, &mut err);
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
    out: &mut Out,
    err: &mut impl Write,
) -> Result<(), CheckError> {
    let format = out.format();
    // In JSON as it always was (serde escapes it); in text, escaped.
    let shown = match format {
        OutputFormat::Text => shown_path(path),
        OutputFormat::Ndjson => path.display().to_string(),
    };
    let shown_shared: Arc<str> = Arc::from(shown.as_str());
    let mut file = ExportFile::open(path, profile, location_id)?;
    let mut tally = Tally::default();
    let mut rejected: Vec<(u64, Problem)> = Vec::new();
    let mut warnings: Vec<(u64, Problem)> = Vec::new();
    let mut keeps: Vec<(u64, String)> = Vec::new();
    while let Some(mapped) = file.next_record()? {
        tally.records += 1;
        match mapped {
            Mapped::Accepted(a) => {
                tally.accepted += 1;
                tally.warnings += a.warnings.len() as u64;
                for w in &a.warnings {
                    report(format, &shown, a.line, "warning", w, &mut warnings, err)?;
                }
                if let Out::Payloads(payloads) = out {
                    let (line, sold) = (a.line, a.sold);
                    let payload = file.take_payload(payloads.spare());
                    payloads.lines.push(PayloadItem {
                        file: Arc::clone(&shown_shared),
                        line,
                        payload,
                        sold,
                    })?;
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
    match out {
        Out::Text(out) => {
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
                     `{}` names the vehicle each keeps):",
                    lotsync::config::advice(&["plan", &shown])
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
        Out::Payloads(_) => {
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
/// Payload lines gathered before a batch goes to the writing thread (about 150 KB of JSON).
const PAYLOADS: usize = 256;
/// Batches handed over and not yet done, at most.
const IN_FLIGHT: usize = 2;

/// An accepted vehicle's line of `--format ndjson`, for the thread that writes them.
struct PayloadItem {
    file: Arc<str>,
    line: u64,
    payload: VehiclePayload,
    sold: Option<bool>,
}

/// `check`'s stdout: the text report, or one JSON line per accepted vehicle.
enum Out {
    Text(Threaded<u8>),
    Payloads(PayloadWriter),
}

/// Payload lines serialized and written by a thread of their own: on a clean export,
/// serializing is about a third of `check`'s work, and on a second core it goes on while the
/// next records are read and mapped. The payloads written come back as spares for the mapper
/// to refill: handing a payload over costs no copy and, once the first come back, no
/// allocation.
struct PayloadWriter {
    lines: Threaded<PayloadItem>,
    spares: mpsc::Receiver<VehiclePayload>,
}

impl PayloadWriter {
    fn new(mut sink: impl Write + Send + 'static) -> PayloadWriter {
        let (give_back, spares) = mpsc::channel();
        let mut bytes: Vec<u8> = Vec::with_capacity(BUFFER);
        let lines = Threaded::new(PAYLOADS, move |items: &mut Vec<PayloadItem>| {
            bytes.clear();
            for item in items.iter() {
                let line = PayloadLine {
                    payload: &item.payload,
                    source: Source {
                        file: &item.file,
                        line: item.line,
                    },
                    sold: item.sold,
                };
                serde_json::to_writer(&mut bytes, &line).map_err(std::io::Error::from)?;
                bytes.push(b'\n');
            }
            sink.write_all(&bytes)?;
            sink.flush()?;
            for item in items.drain(..) {
                // The other side may be done: the spare is then dropped here.
                let _ = give_back.send(item.payload);
            }
            Ok(())
        });
        PayloadWriter { lines, spares }
    }

    /// A written payload to refill, or a new one.
    fn spare(&mut self) -> VehiclePayload {
        self.spares
            .try_recv()
            .unwrap_or_else(|_| VehiclePayload::new(0, String::new(), String::new()))
    }
}

impl Out {
    fn new(format: OutputFormat) -> Out {
        match format {
            OutputFormat::Text => Out::Text(threaded_writer(super::stdout())),
            OutputFormat::Ndjson => Out::Payloads(PayloadWriter::new(super::stdout())),
        }
    }

    fn format(&self) -> OutputFormat {
        match self {
            Out::Text(_) => OutputFormat::Text,
            Out::Payloads(_) => OutputFormat::Ndjson,
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Out::Text(w) => w.flush(),
            Out::Payloads(p) => p.lines.flush(),
        }
    }
}

/// A stream whose bytes a thread of its own writes.
fn threaded_writer(mut sink: impl Write + Send + 'static) -> Threaded<u8> {
    Threaded::new(BUFFER, move |bytes| {
        sink.write_all(bytes)?;
        sink.flush()
    })
}

/// Items gathered here and handed, a batch at a time, to a thread of its own that does
/// `work` on each batch (writes the bytes; serializes and writes the payload lines), so that
/// the next records are read and mapped meanwhile. `flush` returns once every batch handed
/// over is done; a batch that failed is the error of the next call.
struct Threaded<T> {
    batch: Vec<T>,
    /// Items in a full batch.
    full_at: usize,
    to_worker: Option<mpsc::SyncSender<Vec<T>>>,
    /// Done batches coming back, emptied: one per batch handed over.
    done: mpsc::Receiver<Vec<T>>,
    in_flight: usize,
    worker: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl<T: Send + 'static> Threaded<T> {
    fn new(
        full_at: usize,
        mut work: impl FnMut(&mut Vec<T>) -> std::io::Result<()> + Send + 'static,
    ) -> Threaded<T> {
        let (to_worker, batches) = mpsc::sync_channel::<Vec<T>>(IN_FLIGHT);
        let (give_back, done) = mpsc::sync_channel(IN_FLIGHT + 1);
        let worker = std::thread::spawn(move || {
            for mut batch in batches {
                work(&mut batch)?;
                batch.clear();
                // The other side may be gone (it failed, or is done): nothing to hand back.
                let _ = give_back.send(batch);
            }
            Ok(())
        });
        Threaded {
            batch: Vec::with_capacity(full_at),
            full_at,
            to_worker: Some(to_worker),
            done,
            in_flight: 0,
            worker: Some(worker),
        }
    }

    #[inline]
    fn push(&mut self, item: T) -> std::io::Result<()> {
        self.batch.push(item);
        if self.batch.len() >= self.full_at {
            self.full()?;
        }
        Ok(())
    }

    /// The batch is full: handed over.
    #[cold]
    #[inline(never)]
    fn full(&mut self) -> std::io::Result<()> {
        self.hand_over(IN_FLIGHT)
    }

    /// Hands the batch to the worker; waits while more than `limit` are in flight.
    fn hand_over(&mut self, limit: usize) -> std::io::Result<()> {
        if !self.batch.is_empty() {
            let spare = Vec::with_capacity(self.full_at);
            let full = std::mem::replace(&mut self.batch, spare);
            let sent = self.to_worker.as_ref().map(|tx| tx.send(full));
            if !matches!(sent, Some(Ok(()))) {
                return Err(self.failure());
            }
            self.in_flight += 1;
        }
        while self.in_flight > limit {
            match self.done.recv() {
                Ok(back) => {
                    self.in_flight -= 1;
                    if back.capacity() >= self.full_at && self.batch.is_empty() {
                        self.batch = back;
                    }
                }
                Err(_) => return Err(self.failure()),
            }
        }
        Ok(())
    }

    /// Every batch handed over done.
    fn flush(&mut self) -> std::io::Result<()> {
        self.hand_over(0)
    }

    /// Why the worker stopped: its own error.
    fn failure(&mut self) -> std::io::Error {
        self.to_worker = None;
        match self.worker.take().map(std::thread::JoinHandle::join) {
            Some(Ok(Err(e))) => e,
            _ => std::io::Error::other("the output's writer stopped"),
        }
    }
}

impl<T> Drop for Threaded<T> {
    /// What is gathered still goes out, and the worker is waited for: an early return (an
    /// error) must not lose the lines before it.
    fn drop(&mut self) {
        if !self.batch.is_empty() {
            if let Some(tx) = &self.to_worker {
                // A worker already gone has said why to the last call; nothing to add here.
                let _ = tx.send(std::mem::take(&mut self.batch));
            }
        }
        self.to_worker = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

impl Write for Threaded<u8> {
    // serde writes a JSON line in dozens of small pieces: the usual case (append) inlined,
    // the hand-over kept out of line.
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.write_all(bytes)?;
        Ok(bytes.len())
    }

    #[inline]
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.batch.extend_from_slice(bytes);
        if self.batch.len() >= self.full_at {
            self.full()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Threaded::flush(self)
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
        let mut out = threaded_writer(sink.clone());
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
        let mut out = threaded_writer(sink.clone());
        let line = [b'y'; 1000];
        for _ in 0..1000 {
            out.write_all(&line).unwrap();
        }
        drop(out);
        assert_eq!(sink.bytes.lock().unwrap().len(), 1_000_000);
    }

    #[test]
    fn payload_writer_writes_every_line_in_order_and_gives_the_payloads_back() {
        let sink = Shared {
            bytes: Arc::default(),
            fail_after: usize::MAX,
        };
        let mut out = PayloadWriter::new(sink.clone());
        let file: Arc<str> = Arc::from("feed \"a\".csv");
        let mut expected = Vec::new();
        let mut reused = 0;
        for n in 0..1000u64 {
            let mut payload = out.spare();
            reused += usize::from(payload.stock.starts_with('S'));
            payload.stock = format!("S{n}");
            payload.vin = format!("VIN{n}");
            let sold = (n % 3 == 0).then_some(n % 2 == 0);
            let line = PayloadLine {
                payload: &payload,
                source: Source {
                    file: &file,
                    line: n + 2,
                },
                sold,
            };
            serde_json::to_writer(&mut expected, &line).unwrap();
            expected.push(b'\n');
            out.lines
                .push(PayloadItem {
                    file: Arc::clone(&file),
                    line: n + 2,
                    payload,
                    sold,
                })
                .unwrap();
        }
        out.lines.flush().unwrap();
        assert_eq!(
            String::from_utf8(sink.bytes.lock().unwrap().clone()).unwrap(),
            String::from_utf8(expected).unwrap()
        );
        // Once flushed, every payload written has come back as a spare, with its strings
        // (the mapper refills them): taken again already, or waiting.
        let mut waiting = 0;
        while let Ok(spare) = out.spares.try_recv() {
            assert!(spare.stock.starts_with('S'), "{spare:?}");
            waiting += 1;
        }
        assert!(reused > 0);
        assert_eq!(reused + waiting, 1000);
    }

    #[test]
    fn threaded_writer_reports_the_writers_error() {
        let sink = Shared {
            bytes: Arc::default(),
            fail_after: 10,
        };
        let mut out = threaded_writer(sink);
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
