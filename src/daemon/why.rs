//! `lotsync why`, answered wherever the state is (the daemon's control socket, or a state
//! opened to read): the state's story of the cars asked about ([`crate::state::history`]),
//! and, for the last file that listed each, its record there field by field, read from the
//! file's archived copy through the feed's profile ([`crate::mapper::trace_record`]).
//!
//! It wires the two; it decides nothing, and moves or writes nothing.

use crate::config::{Config, FeedConfig};
use crate::inbox::FeedFolders;
use crate::mapper::{trace_record, Profile, RecordTrace, Wanted};
use crate::outbox::Outbox;
use crate::plan::FileId;
use crate::state::history::{Source, SourceField, SourceProblem, SourceRecord, Why};
use crate::text::{Chain, Escaped};

/// `lotsync why` over the state `outbox` holds (the daemon's, or one opened to read): the cars
/// `query` (a VIN or a stock number) names, of `feed` when one is named, each with its record
/// in the last file that listed it. An unknown feed or a state that cannot be read is the
/// message returned.
pub fn why(
    config: &Config,
    outbox: &Outbox,
    query: &str,
    feed: Option<&str>,
) -> Result<Why, String> {
    let feed = match feed {
        Some(name) => match config.feeds.iter().find(|f| f.name == name) {
            Some(f) => Some((f.name.as_str(), vec![f.location_id])),
            None => {
                return Err(format!(
                    "no feed named {} in the config (feeds: {})",
                    Escaped(name),
                    config
                        .feeds
                        .iter()
                        .map(|f| Escaped(&f.name).to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        },
        None => None,
    };
    let feed = feed.as_ref().map(|(n, l)| (*n, l.as_slice()));
    let mut answer = outbox
        .why(config.api.organization_id, query, feed)
        .map_err(|e| Chain(&e).to_string())?;
    for vehicle in &mut answer.vehicles {
        if let Some(source) = &mut vehicle.source {
            read_source(config, outbox, &vehicle.vin, source);
        }
    }
    Ok(answer)
}

/// Fills in the vehicle's record in the file `source` names, or the note saying why not.
fn read_source(config: &Config, outbox: &Outbox, vin: &str, source: &mut Source) {
    match traced(config, outbox, vin, source) {
        Ok(record) => source.record = Some(record),
        Err(note) => source.note = Some(note),
    }
}

fn traced(
    config: &Config,
    outbox: &Outbox,
    vin: &str,
    source: &Source,
) -> Result<SourceRecord, String> {
    let Some(feed) = config.feeds.iter().find(|f| f.name == source.feed) else {
        return Err(format!(
            "feed {} is not in the config any more",
            source.feed
        ));
    };
    let Some(path) = archived_copy(feed, &source.file, &source.sha256) else {
        let kept = match config.daemon.archive_days {
            0 => "it keeps every file: this one was moved or removed".to_owned(),
            days => format!("it keeps files {days} days"),
        };
        return Err(format!(
            "its copy is not in the feed's archive {} ({kept})",
            feed.inbox.join("archive").display()
        ));
    };
    let profile =
        Profile::find(&feed.profile, &config.profiles_dir).map_err(|e| Chain(&e).to_string())?;
    // The columns the feed's files recognized by their values, as its plan had them.
    let kept = outbox
        .state()
        .feed(&feed.name)
        .ok()
        .flatten()
        .and_then(|f| f.columns);
    let wanted = Wanted {
        line: source.line,
        vin,
    };
    match trace_record(&path, &profile, feed.location_id, kept, wanted) {
        Ok(Some(trace)) => Ok(shown(trace)),
        Ok(None) => Err(format!(
            "its archived copy {} has no record of it",
            path.display()
        )),
        Err(e) => Err(format!(
            "its archived copy {} cannot be read: {}",
            path.display(),
            Chain(&e)
        )),
    }
}

/// The archived copy of the file dropped as `name` with this content, if the feed's archive
/// still has it (its report names the file as it was dropped: a second file of one name on one
/// day is filed under another).
fn archived_copy(feed: &FeedConfig, name: &str, sha256: &str) -> Option<std::path::PathBuf> {
    let dropped_as = |report: &std::path::Path| -> Option<String> {
        let bytes = std::fs::read(report).ok()?;
        let report: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        report.get("file")?.as_str().map(str::to_owned)
    };
    FeedFolders::new(&feed.inbox)
        .archived_reports()
        .into_iter()
        .filter(|entry| dropped_as(&entry.report).as_deref() == Some(name))
        .map(|entry| entry.export)
        .find(|export| FileId::of_path(export).is_ok_and(|id| id.sha256 == sha256))
}

fn shown(trace: RecordTrace) -> SourceRecord {
    SourceRecord {
        line: trace.line,
        rejected: trace.rejected,
        fields: trace
            .fields
            .into_iter()
            .map(|f| SourceField {
                field: f.field.to_owned(),
                column: f.column,
                raw: f.raw,
                sent: f.sent.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            })
            .collect(),
        problems: trace
            .problems
            .into_iter()
            .map(|p| SourceProblem {
                field: p.field.to_owned(),
                reason: p.reason,
                value: p.value,
            })
            .collect(),
    }
}
