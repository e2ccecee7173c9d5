//! The state's identity kept outside the database, so that a database that lost its data is noticed
//! instead of being taken for a new, empty state.
//!
//! Every state has a random id, stored in the database. After each plan is committed (and flushed), a
//! small marker is written, fsynced, beside the database (`<state dir>/identity.json`) and in
//! each feed's inbox (`<inbox>/.lotsync-state.json`): the id, how many plans and operations the
//! state had committed, its vehicle count and each feed's last applied file. Plans and
//! operations only ever grow and the markers are written after the commit, so a marker never
//! says more than the database holds. When it does (a truncated or deleted database, a deleted
//! state dir, a state dir that is not the one lotsync used), the state is refused, naming
//! `lotsync reconcile --rebuild`; an inbox whose archive holds an applied export is evidence
//! too (the caller finds it: the inbox layout is the daemon's).
//!
//! It owns the markers, not what the database holds.

use super::{State, StateError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The marker beside the database.
pub const STATE_MARKER: &str = "identity.json";
/// The marker in a feed's inbox (a dot-file: the watcher never takes it for an export).
pub const INBOX_MARKER: &str = ".lotsync-state.json";

/// What a marker says of the state that wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    pub state_id: String,
    pub state_dir: PathBuf,
    /// Plans committed (files planned and reconciliations): never decreases.
    pub plans: u64,
    /// Operations ever queued: never decreases.
    pub operations: u64,
    /// Answers of the service recorded (acknowledged or refused): never decreases.
    #[serde(default)]
    pub answered: u64,
    /// Vehicle records when it was written (for people; records can be forgotten).
    pub vehicles: u64,
    /// Per feed, the file last applied.
    #[serde(default)]
    pub last_applied: BTreeMap<String, MarkedFile>,
    /// UTC.
    pub written_at: String,
}

/// A feed's last applied file, as a marker remembers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MarkedFile {
    pub name: String,
    /// UTC.
    pub at: String,
}

/// A feed whose inbox carries a marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkedInbox {
    pub feed: String,
    pub inbox: PathBuf,
    /// An applied export in the inbox's archive, if any (the daemon's folders know where):
    /// evidence that a state existed, for a state from before the markers.
    pub applied_export: Option<PathBuf>,
    /// The locations its full snapshots speak for ([`super::State::continue_renamed_feeds`]).
    pub locations: std::collections::BTreeSet<u64>,
}

/// What the state holds now, to compare with a marker or to write in one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Progress {
    plans: u64,
    operations: u64,
    answered: u64,
}

impl Progress {
    pub(super) fn of(state: &State) -> Result<Progress, StateError> {
        let counters = state.counters()?;
        Ok(Progress {
            plans: state.meta_u64(super::PLANS_KEY)?.saturating_sub(1),
            operations: state.meta_u64(super::NEXT_SEQ_KEY)?.saturating_sub(1),
            answered: counters.acknowledged + counters.rejected,
        })
    }

    /// Whether the state holds less than a marker says it held.
    fn behind(&self, marker: &Marker) -> bool {
        self.plans < marker.plans
            || self.operations < marker.operations
            || self.answered < marker.answered
    }
}

/// Checks the markers against the state: refused ([`StateError::Lost`]) when one proves the
/// database holds less than lotsync wrote to it, or belongs to another state
/// ([`StateError::OtherState`]). A blank state whose inbox archives hold applied exports is
/// lost too (a state from before the markers).
pub fn verify(state: &State, inboxes: &[MarkedInbox]) -> Result<(), StateError> {
    let id = state.id()?;
    let now = Progress::of(state)?;
    let blank = now.plans == 0 && state.is_blank()?;
    let mut places = vec![(state.dir().join(STATE_MARKER), None)];
    places.extend(
        inboxes
            .iter()
            .map(|i| (i.inbox.join(INBOX_MARKER), Some(i.feed.as_str()))),
    );
    for (path, feed) in places {
        let Some(marker) = read(&path)? else {
            continue;
        };
        let lost = if marker.state_id == id {
            now.behind(&marker)
        } else if blank {
            true
        } else {
            return Err(StateError::OtherState {
                dir: state.dir().to_owned(),
                marker: path,
                marker_dir: marker.state_dir,
            });
        };
        if lost {
            return Err(StateError::Lost {
                dir: state.dir().to_owned(),
                evidence: evidence(&path, feed, &marker, now, state.vehicle_count()),
            });
        }
    }
    if blank {
        for inbox in inboxes {
            if let Some(file) = &inbox.applied_export {
                return Err(StateError::Lost {
                    dir: state.dir().to_owned(),
                    evidence: format!(
                        "the state is empty, but feed {}'s archive holds an applied export ({})",
                        inbox.feed,
                        crate::text::shown_path(file)
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Writes the markers (the state's, and each inbox's whose folder exists), each durably and
/// whole. An inbox marker names only its feed's last applied file. `now` was read before the
/// database was last flushed (see [`State::flush_marked`]).
pub(super) fn write(
    state: &State,
    inboxes: &[MarkedInbox],
    now: Progress,
    vehicles: u64,
) -> Result<(), StateError> {
    let mut last_applied = BTreeMap::new();
    for (feed, record) in state.feeds()? {
        if let Some(applied) = record.last_applied {
            last_applied.insert(
                feed,
                MarkedFile {
                    name: applied.name,
                    at: crate::clock::utc_unix(applied.at),
                },
            );
        }
    }
    let marker = Marker {
        state_id: state.id()?,
        state_dir: std::path::absolute(state.dir()).unwrap_or_else(|_| state.dir().to_owned()),
        plans: now.plans,
        operations: now.operations,
        answered: now.answered,
        vehicles,
        last_applied,
        written_at: crate::clock::utc_datetime(std::time::SystemTime::now()),
    };
    write_marker(&state.dir().join(STATE_MARKER), &marker)?;
    for inbox in inboxes {
        if !inbox.inbox.is_dir() {
            continue;
        }
        let mut own = marker.clone();
        own.last_applied.retain(|feed, _| *feed == inbox.feed);
        write_marker(&inbox.inbox.join(INBOX_MARKER), &own)?;
    }
    Ok(())
}

fn read(path: &Path) -> Result<Option<Marker>, StateError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StateError::Marker {
                path: path.to_owned(),
                source,
            })
        }
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StateError::BadMarker {
            path: path.to_owned(),
            reason: e.to_string(),
        })
}

/// The marker, whole or absent.
fn write_marker(path: &Path, marker: &Marker) -> Result<(), StateError> {
    let mut json = serde_json::to_vec_pretty(marker).map_err(std::io::Error::other);
    if let Ok(json) = &mut json {
        json.push(b'\n');
    }
    json.and_then(|json| super::write_durably(path, &json))
        .map_err(|source| StateError::Marker {
            path: path.to_owned(),
            source,
        })
}

fn evidence(
    path: &Path,
    feed: Option<&str>,
    marker: &Marker,
    now: Progress,
    vehicles: usize,
) -> String {
    use std::fmt::Write as _;
    let mut s = format!(
        "{} says it had planned {}, queued {} and recorded {}, with {}",
        crate::text::shown_path(path),
        counted(marker.plans, "file"),
        counted(marker.operations, "operation"),
        counted(marker.answered, "answer"),
        counted(marker.vehicles, "vehicle"),
    );
    let files: Vec<String> = marker
        .last_applied
        .iter()
        .filter(|(f, _)| feed.is_none_or(|feed| feed == f.as_str()))
        .map(|(f, a)| {
            format!(
                "{} for feed {f} at {} UTC",
                crate::text::Escaped(&a.name),
                a.at
            )
        })
        .collect();
    if !files.is_empty() {
        let _ = write!(s, " (last applied: {})", files.join(", "));
    }
    let _ = write!(
        s,
        "; the database now holds {}, {}, {} and {}",
        counted(now.plans, "planned file"),
        counted(now.operations, "operation"),
        counted(now.answered, "answer"),
        counted(vehicles as u64, "vehicle"),
    );
    s
}

/// `1 file`, `2 files`.
fn counted(n: u64, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Opening;

    /// A fresh folder with an `inbox/` (removed when the guard drops), and its path.
    fn temp(name: &str) -> (tempfile::TempDir, PathBuf) {
        let tmp = crate::testing::temp_dir(&format!("identity-{name}"));
        std::fs::create_dir_all(tmp.path().join("inbox")).unwrap();
        let dir = tmp.path().to_owned();
        (tmp, dir)
    }

    fn opening(dir: &Path) -> Opening {
        Opening {
            markers: Some(vec![MarkedInbox {
                feed: "main".into(),
                inbox: dir.join("inbox"),
                applied_export: None,
                locations: std::collections::BTreeSet::from([10]),
            }]),
            ..Opening::default()
        }
    }

    /// A database that kept its id but lost its latest plans (a copy restored from an older backup)
    /// is refused: the marker says more than it holds.
    #[test]
    fn a_database_holding_less_than_its_marker_is_lost() {
        let (_tmp, dir) = temp("partial");
        let state = State::open_with(&dir.join("state"), &opening(&dir)).unwrap();
        state.write_markers();
        let marker_path = dir.join("inbox").join(INBOX_MARKER);
        let mut marker = read(&marker_path).unwrap().expect("written");
        assert_eq!(marker.state_id, state.id().unwrap());
        drop(state);
        marker.plans = 5;
        marker.operations = 300;
        write_marker(&marker_path, &marker).unwrap();
        let err = State::open_with(&dir.join("state"), &opening(&dir))
            .unwrap_err()
            .to_string();
        assert!(err.contains("has lost data"), "{err}");
        assert!(
            err.contains("planned 5 files, queued 300 operations"),
            "{err}"
        );
        assert!(err.contains("lotsync reconcile --rebuild"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A marker of another state in the inbox: refused when this state holds data of its
    /// own (two configs sharing an inbox), lost when it is blank.
    #[test]
    fn a_marker_of_another_state_is_named() {
        let (_tmp, dir) = temp("other");
        let first = State::open_with(&dir.join("a"), &opening(&dir)).unwrap();
        first.write_markers();
        drop(first);
        let other = Opening {
            verify: false,
            ..opening(&dir)
        };
        let second = State::open_with(&dir.join("b"), &other).unwrap();
        second
            .transaction(|tx| tx.put_vehicle(1, 2, "K", &crate::state::VehicleRecord::default()))
            .unwrap();
        second.flush().unwrap();
        drop(second);
        let err = State::open_with(&dir.join("b"), &opening(&dir))
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not the one that last wrote"), "{err}");
        let err = State::open_with(&dir.join("c"), &opening(&dir))
            .unwrap_err()
            .to_string();
        assert!(err.contains("has lost data"), "a blank state: {err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A blank state beside an inbox whose archive holds an applied export (a state from
    /// before the markers) is lost; a blank state beside a new inbox is simply new.
    #[test]
    fn an_applied_export_in_the_archive_is_evidence() {
        let (_tmp, dir) = temp("archive");
        let reader = Opening {
            holder: crate::state::Holder::Reader("status"),
            ..opening(&dir)
        };
        State::open_with(&dir.join("new"), &reader).expect("a new state");
        let mut with_archive = opening(&dir);
        if let Some(inboxes) = &mut with_archive.markers {
            inboxes[0].applied_export =
                Some(dir.join("inbox/archive/2026-11-01/a.csv.report.json"));
        }
        let err = State::open_with(&dir.join("old"), &with_archive)
            .unwrap_err()
            .to_string();
        assert!(err.contains("archive holds an applied export"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
