//! `lotsync check`: reads and maps export files and says what would be sent; no state, no
//! network. File names, header names and values come from outside: the text report prints
//! them escaped ([`crate::text`]); the ndjson report is JSON, escaped by serde.

use super::ProblemLine;
use crate::api::VehiclePayload;
use crate::feed::FeedReader;
use crate::mapper::{ExportError, ExportFile, Mapped, Mapper, Problem, Profile};
use crate::text::{shown_path, Escaped};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Arguments of `lotsync check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Export files (CSV or XML).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Mapping profile: `auto`, a name in --profiles-dir, or a path to a .toml file.
    #[arg(long, default_value = "auto", value_name = "NAME|PATH")]
    pub profile: String,
    /// Where profiles named by --profile live.
    #[arg(long, default_value = "config/profiles", value_name = "DIR")]
    pub profiles_dir: PathBuf,
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

/// Runs the check; the exit code is 0 when every file could be read, 2 when one could not.
pub fn check(args: CheckArgs) -> anyhow::Result<u8> {
    let profile = Profile::find(&args.profile, &args.profiles_dir)?;
    let location_id = args.location_id.unwrap_or(PLACEHOLDER_LOCATION);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    // Buffered too: a problem line written to a bare stderr is many small writes, and an
    // export with many warnings spent most of its time in them. Flushed at the end, and
    // before a file's "cannot be read", so that what came before it shows first.
    let mut err = std::io::BufWriter::with_capacity(64 * 1024, std::io::stderr().lock());
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
    Ok(if failed { 2 } else { 0 })
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
                    serde_json::to_writer(&mut *out, &line).map_err(std::io::Error::from)?;
                    out.write_all(b"\n")?;
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
            }
        }
    }
    let notes = file.notes();
    tally.warnings += notes.len() as u64;
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
    Ok(())
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
    #[error("cannot write: {0}")]
    Output(#[from] std::io::Error),
}
