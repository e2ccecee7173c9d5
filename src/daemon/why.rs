//! `lotsync why`, answered wherever the state is (the daemon's control socket, or a state
//! opened to read): the state's story of the cars asked about ([`crate::state::history`]),
//! and, for the last file that listed each, its record there field by field, read from the
//! file's archived copy through the feed's profile ([`crate::mapper::trace_record`]).
//!
//! It wires the two; it decides nothing, and moves or writes nothing.

use crate::config::Config;
use crate::inbox::FeedFolders;
use crate::mapper::{trace_record, Profile, RecordTrace, Wanted};
use crate::outbox::Outbox;
use crate::plan::FileId;
use crate::state::history::{Source, SourceField, SourceProblem, SourceRecord, Why};
use crate::text::{Chain, Escaped};
use std::path::{Path, PathBuf};

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
            match traced(config, outbox, &vehicle.vin, source) {
                Ok(record) => source.record = Some(record),
                Err(note) => source.note = Some(note),
            }
        }
    }
    Ok(answer)
}

/// The vehicle's record in the file `source` names, read from its archived copy; or the note
/// saying why it cannot be shown.
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
    let Some(path) = archived_copy(&feed.inbox, &source.file, &source.sha256) else {
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
/// still has it. Its report names the file as it was dropped (a second file of one name on one
/// day is filed under another) and its content's hash, so only that copy is read whole, to
/// check it was not changed since.
fn archived_copy(inbox: &Path, name: &str, sha256: &str) -> Option<PathBuf> {
    #[derive(serde::Deserialize)]
    struct Filed {
        file: String,
        sha256: String,
    }
    let filed_as = |report: &Path| -> Option<Filed> {
        serde_json::from_slice(&std::fs::read(report).ok()?).ok()
    };
    FeedFolders::new(inbox)
        .archived_reports()
        .into_iter()
        .filter(|entry| {
            filed_as(&entry.report).is_some_and(|f| f.file == name && f.sha256 == sha256)
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbox::{FileReport, Outcome};

    /// Files `contents` as `name` in the inbox's archive, as `lotsync sync` does; its hash.
    fn archived(inbox: &Path, name: &str, contents: &str) -> (String, PathBuf) {
        let source = inbox.parent().unwrap().join(name);
        std::fs::write(&source, contents).unwrap();
        let sha256 = FileId::of_path(&source).unwrap().sha256;
        let report = FileReport::new("main", name, &sha256, Outcome::Applied);
        let copy = FeedFolders::new(inbox)
            .archive_copy(&source, &report)
            .unwrap();
        (sha256, copy)
    }

    /// A DMS drops the same name every day: the copy with the planned content is the one read,
    /// and a copy changed since it was filed is not taken for it.
    #[test]
    fn the_archived_copy_is_found_by_name_and_content() {
        let dir = crate::testing::temp_dir("why-archive");
        let inbox = dir.path().join("inbox");
        std::fs::create_dir(&inbox).unwrap();
        let (monday, _) = archived(&inbox, "inv.csv", "VIN\nA\n");
        let (tuesday, tuesday_copy) = archived(&inbox, "inv.csv", "VIN\nB\n");
        assert_ne!(monday, tuesday);
        let found = archived_copy(&inbox, "inv.csv", &monday).unwrap();
        assert_eq!(std::fs::read_to_string(found).unwrap(), "VIN\nA\n");
        assert_eq!(
            archived_copy(&inbox, "inv.csv", &tuesday),
            Some(tuesday_copy.clone())
        );
        assert_eq!(archived_copy(&inbox, "other.csv", &monday), None);

        std::fs::write(&tuesday_copy, "VIN\nC\n").unwrap();
        assert_eq!(archived_copy(&inbox, "inv.csv", &tuesday), None);
    }
}
