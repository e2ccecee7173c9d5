//! The vehicles' history, for `lotsync why`: per vehicle, what each file, each answer of the
//! service and each reconciliation did to it.
//!
//! One row per event in the `history` table, keyed by (organization, VIN, time, tag, index):
//! a vehicle's events are one range of it, and a write reads nothing. An operation is one
//! event, written with the
//! service's answer ([`What::QueuedAndAnswered`]): why the plan queued it waits with it in the
//! outbox until then ([`OutboxEntry::queuing`]), and one still waiting, or replaced, is told
//! from its entry ([`queued_event`]). A value holds neither the time nor the operation's
//! number, which its key holds. None is kept longer than `[state] keep_history_days`
//! ([`super::retention`]), and `why` tells a vehicle's newest [`KEEP_EVENTS`]. The outbox
//! writes them inside the transactions that already commit plans, answers and findings
//! ([`append`] on the transaction's connection), so they are exactly as durable as what they tell
//! and cost no flush of their own. An event names its file by the
//! number the file is filed under (`files`), not by name, to stay small. A state from before
//! the history simply has none for its vehicles; one from before an operation was one event
//! (its queueing and its answer two, each with its time) reads back the same.
//!
//! It owns the events' storage and how they read to people ([`Why`]). It does not decide what
//! happened (the diff, the outbox and the reconciliation say so), nor read export files or the
//! service.

use super::{FieldChange, FileRecord, OutboxEntry, Queuing, State, StateError};
use crate::text::Escaped;
use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// Events told per vehicle (the newest).
pub const KEEP_EVENTS: usize = 50;

/// The longest value an event keeps of a changed field (the rest is cut, marked `…`).
const VALUE_CHARS: usize = 60;

/// One thing that happened to a vehicle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// When (Unix seconds, UTC).
    pub at: i64,
    /// The plan it came from: the number its file is filed under in the state.
    #[serde(default, rename = "f", skip_serializing_if = "Option::is_none")]
    pub file_no: Option<u64>,
    #[serde(flatten)]
    pub what: What,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum What {
    /// A plan queued an operation for it: `op` is `create`, `update`, `sold` or `in_stock`
    /// (stored as `c`, `u`, `s`, `i`: see [`op_code`]); `line` the file's line that listed it
    /// (none: left out, or a reconciliation's repair).
    #[serde(rename = "q")]
    Queued {
        #[serde(rename = "s")]
        seq: u64,
        #[serde(rename = "o")]
        op: String,
        #[serde(default, rename = "l", skip_serializing_if = "Option::is_none")]
        line: Option<u64>,
        /// An update: the fields that differ from the payload last acknowledged.
        #[serde(default, rename = "c", skip_serializing_if = "Vec::is_empty")]
        changed: Vec<FieldChange>,
        /// Sold by absence: the files in a row that left it out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        absent: Option<u32>,
        /// The safety guard would have held the file and was overridden.
        #[serde(default, skip_serializing_if = "is_false")]
        forced: bool,
    },
    /// The file would have queued `op`, but the safety guard held it: nothing was queued.
    #[serde(rename = "h")]
    Held {
        op: String,
        #[serde(default, rename = "l", skip_serializing_if = "Option::is_none")]
        line: Option<u64>,
    },
    /// A full snapshot left it out, fewer times in a row than it takes to sell it.
    #[serde(rename = "w")]
    Waiting { absent: u32 },
    /// A full snapshot left it out, but kept it on the lot: a rejected record stands for it
    /// (`by` `vin`, `stock`, `near_vin`), or another location's latest snapshot lists it
    /// (`other_location`; `value` that file).
    #[serde(rename = "p")]
    Protected {
        by: String,
        #[serde(default, rename = "l", skip_serializing_if = "Option::is_none")]
        line: Option<u64>,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        value: String,
    },
    /// Found on the service's own list (the first file of an empty state): adopted.
    Adopted { service_id: u64 },
    /// Its operations not sent yet were replaced by this plan's (superseded).
    Replaced { seqs: Vec<u64> },
    /// An operation and the service's answer to it, stored as one event at the answer (an
    /// operation's queueing waits in the outbox with it: [`OutboxEntry::queuing`]). Read back
    /// as its [`What::Queued`] and [`What::Answered`] ([`expand`]); its `seq` is its key's.
    #[serde(rename = "d")]
    QueuedAndAnswered {
        #[serde(skip)]
        seq: u64,
        #[serde(rename = "o")]
        op: String,
        /// Seconds from its queueing to the answer.
        #[serde(default, rename = "q", skip_serializing_if = "is_zero64")]
        waited: u64,
        #[serde(default, rename = "w", skip_serializing_if = "Queuing::is_empty")]
        queuing: Queuing,
        #[serde(default, rename = "r", skip_serializing_if = "is_false")]
        refused: bool,
        #[serde(default, rename = "h", skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        /// Seconds from its last call to the answer, when not the same second.
        #[serde(default, rename = "t", skip_serializing_if = "Option::is_none")]
        sent_before: Option<u64>,
        #[serde(default, rename = "n", skip_serializing_if = "is_zero")]
        retries: u32,
        #[serde(default, rename = "m", skip_serializing_if = "Vec::is_empty")]
        messages: Vec<String>,
        #[serde(default, rename = "i", skip_serializing_if = "Option::is_none")]
        service_id: Option<u64>,
    },
    /// The service's answer to operation `seq` (as told, and as a state before
    /// [`What::QueuedAndAnswered`] stored it).
    #[serde(rename = "a")]
    Answered {
        #[serde(rename = "s")]
        seq: u64,
        op: String,
        /// Done (else refused).
        ok: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        /// When its last call went out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent: Option<i64>,
        /// Calls repeated after a passing failure.
        #[serde(default, skip_serializing_if = "is_zero")]
        retries: u32,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        messages: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        service_id: Option<u64>,
    },
    /// The reconciliation restored its record from the service's list and an archived export.
    Restored {
        service_id: u64,
        sold: bool,
        file: String,
    },
    /// The reconciliation learned its id from the service's list.
    IdLearned { service_id: u64 },
    /// The reconciliation let its record go: sold, and gone from the service.
    Forgotten,
    /// Its record was let go: sold, with nothing queued, and unchanged for more than `days`
    /// (`[state] keep_sold_days`).
    Expired { days: u32 },
    /// Told again by `reconcile --rebuild` from an archived export: what that file did to it
    /// (`op` as in [`What::Queued`]; `line` none: left out of a full snapshot).
    Rebuilt {
        file: String,
        #[serde(default, rename = "l", skip_serializing_if = "Option::is_none")]
        line: Option<u64>,
        /// Also `kept` (left out, kept on the lot by a rejected record) and `refused` (the
        /// service refused an operation of that file).
        op: String,
        /// `kept`: what matched; `refused`: the service's answer.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        note: String,
    },
}

/// The service's answer to a queued operation, as the outbox hands it to [`answer`].
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// When it was recorded.
    pub at: i64,
    /// Refused (else done).
    pub refused: bool,
    pub status: Option<u16>,
    /// When its last call went out, when another second than `at`.
    pub sent: Option<i64>,
    pub retries: u32,
    pub messages: Vec<String>,
    /// The service's id, for a create.
    pub service_id: Option<u64>,
}

/// How an operation is stored in an event: `create` `c`, `update` `u`, `sold` `s`,
/// `in_stock` `i`.
pub fn op_code(op: &str) -> String {
    match op {
        "create" => "c",
        "update" => "u",
        "sold" => "s",
        "in_stock" => "i",
        other => other,
    }
    .to_owned()
}

/// An operation's name from its stored code (a name stays itself).
pub fn op_name(code: &str) -> &str {
    match code {
        "c" => "create",
        "u" => "update",
        "s" => "sold",
        "i" => "in_stock",
        other => other,
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero64(n: &u64) -> bool {
    *n == 0
}

/// An event as its value in the `history` tree: its time, and an operation's number, are its
/// key's ([`history_key`]). A value written before carries its time too (`at`, ignored).
#[derive(Serialize, Deserialize)]
struct Stored {
    #[serde(default, rename = "f", skip_serializing_if = "Option::is_none")]
    file_no: Option<u64>,
    #[serde(flatten)]
    what: What,
}

impl Event {
    pub fn new(at: i64, file_no: Option<u64>, what: What) -> Event {
        Event { at, file_no, what }
    }
}

/// The fields two payloads differ in, by the names the service knows them by, in its order;
/// the values as JSON, cut.
pub fn changed_fields(
    before: Option<&crate::api::VehiclePayload>,
    after: &crate::api::VehiclePayload,
) -> Vec<FieldChange> {
    let (old, new) = (flat(before), flat(Some(after)));
    let mut names: Vec<&String> = new.keys().chain(old.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|name| old.get(*name) != new.get(*name))
        .map(|name| FieldChange {
            field: name.clone(),
            from: old.get(name).map(short_value),
            to: new.get(name).map(short_value),
        })
        .collect()
}

/// A payload's fields by the names the service knows them by, one level of objects spelled
/// out (`price.selling`).
fn flat(
    payload: Option<&crate::api::VehiclePayload>,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    let mut out = std::collections::BTreeMap::new();
    let Some(Ok(serde_json::Value::Object(map))) = payload.map(serde_json::to_value) else {
        return out;
    };
    for (name, value) in map {
        match value {
            serde_json::Value::Object(inner) => {
                for (part, value) in inner {
                    out.insert(format!("{name}.{part}"), value);
                }
            }
            value => {
                out.insert(name, value);
            }
        }
    }
    out
}

fn short_value(value: &serde_json::Value) -> String {
    let text = match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) => format!("{} items", items.len()),
        other => other.to_string(),
    };
    if text.chars().count() <= VALUE_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(VALUE_CHARS).collect();
    cut.push('…');
    cut
}

/// The first index of a rebuild's events among those of their second (see [`append`]).
const REBUILT_INDEX: u8 = 128;

/// Adds `events` to a vehicle's history inside a transaction: each one a row of its own,
/// inserted without reading anything. `tag` (the operation's sequence number, or the plan's
/// file number) and the index (the event's place among those written together) keep two
/// events of one second apart.
pub(crate) fn append(
    conn: &Connection,
    organization_id: u64,
    vin: &str,
    events: Vec<Event>,
    _now: i64,
) -> Result<(), StateError> {
    let mut stmt = conn.prepare_cached(
        "INSERT OR REPLACE INTO history (organization_id, vin, at, tag, idx, event)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for (index, Event { at, file_no, what }) in events.into_iter().enumerate() {
        let tag = match &what {
            What::Queued { seq, .. }
            | What::Answered { seq, .. }
            | What::QueuedAndAnswered { seq, .. } => *seq,
            _ => file_no.unwrap_or(0),
        };
        // An answer may come within the second its operation was queued: apart by its index.
        // A rebuild's events have neither operation nor file, and neither have the
        // reconciliation's findings, written apart within the same second: the rebuild's take
        // the upper indexes, so that a finding (index 0) does not replace its first event.
        let index = u8::try_from(index).unwrap_or(u8::MAX);
        let index = match what {
            What::Answered { .. } | What::QueuedAndAnswered { .. } => u8::MAX,
            What::Rebuilt { .. } => REBUILT_INDEX.saturating_add(index).min(u8::MAX - 1),
            _ => index.min(REBUILT_INDEX - 1),
        };
        let value = super::records::encode(&Stored { file_no, what }, "history event")?;
        stmt.execute(params![organization_id, vin, at.max(0), tag, index, value])?;
    }
    Ok(())
}

/// Records the service's answer to a queued operation in its vehicle's history, inside a
/// transaction: the operation's one event, its queueing and its answer
/// ([`What::QueuedAndAnswered`]).
pub(crate) fn answer(
    conn: &Connection,
    entry: &OutboxEntry,
    answer: Answer,
    now: i64,
) -> Result<(), StateError> {
    let event = Event::new(
        now,
        entry.file_no,
        What::QueuedAndAnswered {
            seq: entry.seq,
            op: op_code(entry.op.name()),
            waited: u64::try_from(now - entry.queued_at).unwrap_or(0),
            queuing: entry.queuing.clone(),
            refused: answer.refused,
            status: answer.status,
            sent_before: answer.sent.and_then(|sent| u64::try_from(now - sent).ok()),
            retries: answer.retries,
            messages: answer.messages,
            service_id: answer.service_id,
        },
    );
    append(conn, entry.organization_id, &entry.vin, vec![event], now)
}

/// An operation's queueing as its history tells it, from its entry in the outbox (one still
/// waiting, or one a newer plan replaced).
pub fn queued_event(entry: &OutboxEntry) -> Event {
    let what = queued(entry.seq, op_code(entry.op.name()), entry.queuing.clone());
    Event::new(entry.queued_at, entry.file_no, what)
}

/// Operation `seq` queued for the reasons `queuing` tells.
fn queued(seq: u64, op: String, queuing: Queuing) -> What {
    let Queuing {
        line,
        changed,
        absent,
        forced,
    } = queuing;
    What::Queued {
        seq,
        op,
        line,
        changed,
        absent,
        forced,
    }
}

impl State {
    /// A vehicle's history, oldest first (empty when none was recorded); the newest
    /// [`KEEP_EVENTS`] are kept.
    pub fn history(&self, organization_id: u64, vin: &str) -> Result<Vec<Event>, StateError> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached(
            "SELECT at, tag, event FROM history WHERE organization_id = ?1 AND vin = ?2
             ORDER BY at DESC, tag DESC, idx DESC LIMIT ?3",
        )?;
        let mut rows = stmt.query(params![organization_id, vin, KEEP_EVENTS as i64])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let at: i64 = row.get(0)?;
            let tag: u64 = row.get(1)?;
            let Stored { file_no, mut what } =
                super::records::decode(super::text(row, 2)?, "history event")?;
            if let What::QueuedAndAnswered { seq, .. } = &mut what {
                *seq = tag;
            }
            out.push(Event { at, file_no, what });
        }
        out.reverse();
        Ok(out)
    }

    /// The VINs of the organization whose acknowledged payload carries `stock` (compared
    /// trimmed and case-blind, as the diff compares stock numbers).
    pub fn vins_by_stock(
        &self,
        organization_id: u64,
        stock: &str,
    ) -> Result<Vec<String>, StateError> {
        let wanted = stock.trim().to_ascii_uppercase();
        let mut out = Vec::new();
        if wanted.is_empty() {
            return Ok(out);
        }
        let conn = self.reader();
        // Only payloads holding the text are decoded (stock numbers are short and escaped the
        // same way in JSON).
        let mut stmt = conn.prepare_cached(
            "SELECT vin, payload FROM payloads WHERE organization_id = ?1 AND instr(upper(payload), ?2) > 0",
        )?;
        let mut rows = stmt.query(params![organization_id, wanted])?;
        while let Some(row) = rows.next()? {
            let payload: crate::api::VehiclePayload =
                super::records::decode(super::text(row, 1)?, "payload")?;
            if payload.stock.trim().eq_ignore_ascii_case(&wanted) {
                out.push(row.get(0)?);
            }
        }
        Ok(out)
    }

    /// Events in the history (for the figures).
    pub fn history_count(&self) -> usize {
        self.count("history")
    }
}

/// What `lotsync why` answers: every vehicle the question matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Why {
    /// As asked.
    pub query: String,
    pub vehicles: Vec<VehicleWhy>,
    /// When nothing matched: where it was looked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub looked_in: Vec<String>,
}

/// One vehicle's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VehicleWhy {
    pub vin: String,
    /// Where its record is (none: only its history is left).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location_id: Option<u64>,
    /// As the service last acknowledged it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged: Option<Acknowledged>,
    /// Newest first.
    pub events: Vec<Shown>,
    /// Every operation queued for it that its history or the outbox knows, newest first.
    pub operations: Vec<Operation>,
    /// Files of its feed planned after its last event (they changed nothing for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet_since: Option<Quiet>,
    /// The last file lotsync knows listed it, and (filled by whoever can read the file's
    /// archived copy) its record there, field by field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    /// The service's view now (`--online`), and where it differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub online: Option<serde_json::Value>,
}

/// The vehicle as the service last acknowledged it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Acknowledged {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_id: Option<u64>,
    /// Created on the service as far as lotsync knows.
    pub created: bool,
    pub sold: bool,
    /// The fields last acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<crate::api::VehiclePayload>,
    /// The service's last refusal, not re-sent until the file changes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<super::Rejection>,
    /// Full snapshots in a row without it.
    pub absent: u32,
    pub updated_at: i64,
}

/// One event as shown: when, the file, its kind, and a sentence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shown {
    pub at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// What happened: `queued`, `answered`, `held`, `waiting`, `protected`, `adopted`,
    /// `replaced`, `restored`, `id_learned`, `forgotten` or `rebuilt`.
    pub kind: String,
    /// The event as stored, an answer apart from its operation, operations by name.
    pub event: Event,
    pub text: String,
}

/// An event's kind, as `--format json` names it.
fn kind(what: &What) -> &'static str {
    match what {
        What::Queued { .. } => "queued",
        What::Held { .. } => "held",
        What::Waiting { .. } => "waiting",
        What::Protected { .. } => "protected",
        What::Adopted { .. } => "adopted",
        What::Replaced { .. } => "replaced",
        What::Answered { .. } => "answered",
        // Told as its two events ([`expand`]).
        What::QueuedAndAnswered { .. } => "queued_and_answered",
        What::Restored { .. } => "restored",
        What::IdLearned { .. } => "id_learned",
        What::Forgotten => "forgotten",
        What::Expired { .. } => "expired",
        What::Rebuilt { .. } => "rebuilt",
    }
}

/// Puts a vehicle's events oldest first. Times are whole seconds, and the demo (or a busy
/// daemon) plans several files within one: within a second, the file's number orders them
/// (files are numbered as they are taken), a plan's events before the answers to its
/// operations, and what no file did (a reconciliation's findings) after. Keys order a second's
/// events by operation or file number, which are not comparable with each other (a held file
/// 4 came before operation 17 of file 2). The sort is stable: a rebuild's events stay after
/// what it found.
fn oldest_first(history: &mut [Event]) {
    history.sort_by_key(|e| {
        let answer = matches!(e.what, What::Answered { .. });
        (e.at, e.file_no.unwrap_or(u64::MAX), answer)
    });
}

/// The stored events as they are told: an operation's one event as its queueing and its
/// answer, operations by name. An operation queued before its queueing waited in the outbox
/// (a state upgraded with operations in flight) has its queueing stored already: told once.
fn expand(stored: Vec<Event>) -> Vec<Event> {
    let told_queued: std::collections::HashSet<u64> = stored
        .iter()
        .filter_map(|e| match e.what {
            What::Queued { seq, .. } => Some(seq),
            _ => None,
        })
        .collect();
    let mut told = Vec::with_capacity(stored.len() + stored.len() / 2);
    for event in stored {
        let Event { at, file_no, what } = event;
        let what = match what {
            What::QueuedAndAnswered {
                seq,
                op,
                waited,
                queuing,
                refused,
                status,
                sent_before,
                retries,
                messages,
                service_id,
            } => {
                if !told_queued.contains(&seq) {
                    let queued_at = at.saturating_sub(i64::try_from(waited).unwrap_or(i64::MAX));
                    let queued = queued(seq, op.clone(), queuing);
                    told.push(Event::new(queued_at, file_no, queued));
                }
                What::Answered {
                    seq,
                    op,
                    ok: !refused,
                    status,
                    sent: sent_before
                        .map(|before| at.saturating_sub(i64::try_from(before).unwrap_or(0))),
                    retries,
                    messages,
                    service_id,
                }
            }
            what => what,
        };
        told.push(Event::new(at, file_no, what));
    }
    for event in &mut told {
        if let What::Queued { op, .. } | What::Held { op, .. } | What::Answered { op, .. } =
            &mut event.what
        {
            *op = op_name(op).to_owned();
        }
    }
    told
}

/// One operation and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operation {
    pub seq: u64,
    pub op: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub queued_at: i64,
    /// `queued` (still in the outbox), `done`, `refused`, `replaced`, or `unknown` (its
    /// answer is older than the history kept).
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default)]
    pub retries: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<String>,
}

/// The last file that listed a vehicle (a line that changed it, or its location's latest full
/// snapshot), and what its record there held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    pub file: String,
    pub feed: String,
    /// Its content's SHA-256, to find its archived copy.
    pub sha256: String,
    /// When it was planned.
    pub at: i64,
    /// Its line, when a change recorded it (else the record is found by VIN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The record, as its archived copy reads now (none: `note` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<SourceRecord>,
    /// Why the record is not shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One record of an export, field by field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceRecord {
    pub line: u64,
    /// The record could not be sent (`problems` say why).
    #[serde(default, skip_serializing_if = "is_false")]
    pub rejected: bool,
    pub fields: Vec<SourceField>,
    /// Values left out and conversions worth knowing (a rejected record: why).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<SourceProblem>,
}

/// A column of a record, and the payload values it became.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceField {
    /// What the column feeds (`price`, `exterior_color`, `year_make_model`, …).
    pub field: String,
    pub column: String,
    pub raw: String,
    /// Payload field → value sent (empty: left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sent: Vec<(String, serde_json::Value)>,
}

/// A field's value left out, or a record's rejection, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceProblem {
    pub field: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// The files of a feed planned after a vehicle's last event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quiet {
    pub feed: String,
    pub files: u64,
    pub last: String,
    pub at: i64,
}

/// Whom `why` asks about, and what it may look at.
pub struct Question<'a> {
    pub organization_id: u64,
    /// A VIN or a stock number.
    pub query: &'a str,
    /// Only vehicles of this feed: its name and the locations its files speak for.
    pub feed: Option<(&'a str, &'a [u64])>,
    /// The outbox's operations of the organization.
    pub pending: &'a [OutboxEntry],
}

/// Answers `lotsync why` from the state: the vehicles the question matches (its VIN, else its
/// stock number), each with its record, history and operations.
pub fn explain(state: &State, question: &Question) -> Result<Why, StateError> {
    let org = question.organization_id;
    let asked = question.query.trim();
    let vin = asked.to_ascii_uppercase();
    let mut vins: Vec<String> = Vec::new();
    let known_vin = state.find_vin(org, &vin)?.is_some()
        || !state.history(org, &vin)?.is_empty()
        || question.pending.iter().any(|p| p.vin == vin);
    if known_vin {
        vins.push(vin.clone());
    } else {
        vins = state.vins_by_stock(org, asked)?;
        for p in question.pending {
            let stock = p.op.payload().map(|p| p.stock.trim());
            if stock.is_some_and(|s| s.eq_ignore_ascii_case(asked)) && !vins.contains(&p.vin) {
                vins.push(p.vin.clone());
            }
        }
        vins.sort();
    }
    let mut vehicles = Vec::new();
    for vin in vins {
        let shown = vehicle(state, question, &vin)?;
        if let Some((name, locations)) = question.feed {
            let at_feed = shown.location_id.is_some_and(|l| locations.contains(&l));
            let by_feed = shown.events.iter().any(|e| e.feed.as_deref() == Some(name));
            if !at_feed && !by_feed {
                continue;
            }
        }
        vehicles.push(shown);
    }
    let looked_in = if vehicles.is_empty() {
        let mut places = vec![
            format!(
                "the state in {} ({} vehicles of organization {org}): VINs and stock numbers",
                crate::text::shown_path(state.dir()),
                state.vehicle_count()
            ),
            format!(
                "the history ({} events, as many days as [state] keep_history_days keeps)",
                state.history_count()
            ),
            format!("the {} operations in the outbox", question.pending.len()),
        ];
        if let Some((name, _)) = question.feed {
            places.push(format!("only vehicles of feed {}", Escaped(name)));
        }
        places
    } else {
        Vec::new()
    };
    Ok(Why {
        query: asked.to_owned(),
        vehicles,
        looked_in,
    })
}

fn vehicle(state: &State, question: &Question, vin: &str) -> Result<VehicleWhy, StateError> {
    let org = question.organization_id;
    let found = state.find_vin(org, vin)?;
    let acknowledged = match &found {
        Some((key, record)) => Some(Acknowledged {
            service_id: record.service_id,
            created: record.exists(),
            sold: record.sold,
            payload: state.payload(key)?,
            refused: record.rejected.clone(),
            absent: record.absent,
            updated_at: record.updated_at,
        }),
        None => None,
    };
    let mut stored = state.history(org, vin)?;
    // Its operations still in the outbox: their queueing (a state from before
    // `QueuedAndAnswered` has it in the history already).
    for entry in question.pending.iter().filter(|p| p.vin == vin) {
        let told = stored
            .iter()
            .any(|e| matches!(e.what, What::Queued { seq, .. } if seq == entry.seq));
        if !told {
            stored.push(queued_event(entry));
        }
    }
    let mut history = expand(stored);
    oldest_first(&mut history);
    let mut files: std::collections::HashMap<u64, Option<FileRecord>> = Default::default();
    let mut file_of = |no: Option<u64>| -> Result<Option<FileRecord>, StateError> {
        let Some(no) = no else { return Ok(None) };
        if let Some(known) = files.get(&no) {
            return Ok(known.clone());
        }
        let record = state.file(no)?;
        files.insert(no, record.clone());
        Ok(record)
    };
    let mut events = Vec::new();
    let mut operations: Vec<Operation> = Vec::new();
    for event in &history {
        let file = file_of(event.file_no)?;
        let line = match &event.what {
            What::Queued { line, .. }
            | What::Held { line, .. }
            | What::Protected { line, .. }
            | What::Rebuilt { line, .. } => *line,
            _ => None,
        };
        match &event.what {
            What::Queued { seq, op, .. } => operations.push(Operation {
                seq: *seq,
                op: op.clone(),
                file: file.as_ref().map(|f| f.name.clone()),
                queued_at: event.at,
                outcome: "unknown".into(),
                sent: None,
                answered: None,
                status: None,
                retries: 0,
                messages: Vec::new(),
            }),
            What::Answered {
                seq,
                ok,
                status,
                sent,
                retries,
                messages,
                ..
            } => {
                if let Some(o) = operations.iter_mut().find(|o| o.seq == *seq) {
                    o.outcome = if *ok { "done" } else { "refused" }.into();
                    o.sent = *sent;
                    o.answered = Some(event.at);
                    o.status = *status;
                    o.retries = *retries;
                    o.messages = messages.clone();
                }
            }
            What::Replaced { seqs } => {
                for o in operations.iter_mut().filter(|o| seqs.contains(&o.seq)) {
                    o.outcome = "replaced".into();
                    o.answered = Some(event.at);
                }
            }
            _ => {}
        }
        let file_name = match &event.what {
            What::Rebuilt { file, .. } => Some(file.clone()),
            _ => file.as_ref().map(|f| f.name.clone()),
        };
        events.push(Shown {
            at: event.at,
            kind: kind(&event.what).to_owned(),
            text: sentence(event, file.as_ref()),
            file: file_name,
            feed: file.as_ref().map(|f| f.feed.clone()),
            line,
            event: event.clone(),
        });
    }
    for p in question.pending.iter().filter(|p| p.vin == vin) {
        if let Some(o) = operations.iter_mut().find(|o| o.seq == p.seq) {
            o.outcome = "queued".into();
        }
    }
    let quiet_since = quiet(state, &history)?;
    let location_id = found.as_ref().map(|(key, _)| key.location_id);
    let source = last_listed(state, org, vin, location_id, &history)?;
    events.reverse();
    operations.sort_by_key(|o| std::cmp::Reverse(o.seq));
    Ok(VehicleWhy {
        vin: vin.to_owned(),
        location_id: found.map(|(key, _)| key.location_id),
        acknowledged,
        events,
        operations,
        quiet_since,
        source,
        online: None,
    })
}

/// The last file that listed the vehicle as far as the state knows: the newest of the last
/// line an event names (a change, a hold, a rejected record that kept it) and its location's
/// latest full snapshot, when that lists it.
fn last_listed(
    state: &State,
    org: u64,
    vin: &str,
    location_id: Option<u64>,
    history: &[Event],
) -> Result<Option<Source>, StateError> {
    let by_line = history.iter().rev().find_map(|e| match &e.what {
        What::Queued {
            line: Some(line), ..
        }
        | What::Held {
            line: Some(line), ..
        }
        | What::Protected {
            line: Some(line), ..
        } => e.file_no.map(|no| (no, Some(*line))),
        _ => None,
    });
    let listed = match location_id {
        Some(location) => (state.listings(org, location)?.into_iter())
            .filter(|l| l.lists(vin))
            .map(|l| (l.file_no, None))
            .max(),
        None => None,
    };
    // The newest file; of one file, the line its event names (the record is found by it).
    let newest = by_line
        .into_iter()
        .chain(listed)
        .max_by_key(|(no, line)| (*no, line.is_some()));
    let Some((file_no, line)) = newest else {
        return Ok(None);
    };
    Ok(state.file(file_no)?.map(|file| Source {
        file: file.name,
        feed: file.feed,
        sha256: file.sha256,
        at: file.seen_at,
        line,
        record: None,
        note: None,
    }))
}

/// The files of the feed of a vehicle's last file event planned after it.
fn quiet(state: &State, history: &[Event]) -> Result<Option<Quiet>, StateError> {
    let Some(last_no) = history.iter().rev().find_map(|e| e.file_no) else {
        return Ok(None);
    };
    let Some(last) = state.file(last_no)? else {
        return Ok(None);
    };
    let mut quiet: Option<Quiet> = None;
    let mut no = last_no + 1;
    while let Some(file) = state.file(no)? {
        if file.feed == last.feed {
            let q = quiet.get_or_insert(Quiet {
                feed: file.feed.clone(),
                files: 0,
                last: String::new(),
                at: 0,
            });
            q.files += 1;
            q.last = file.name.clone();
            q.at = file.seen_at;
        }
        no += 1;
    }
    Ok(quiet)
}

/// An operation's name as people say it.
fn op_label(op: &str) -> &str {
    match op {
        "sold" => "mark sold",
        "in_stock" => "back in stock",
        other => other,
    }
}

/// The words of an operation, as the README says them.
fn op_words(op: &str) -> &str {
    match op {
        "create" => "create it on the service",
        "update" => "update it",
        "sold" => "mark it sold",
        "in_stock" => "mark it back in stock",
        other => other,
    }
}

/// One event in a sentence for a person (values from outside escaped).
fn sentence(event: &Event, file: Option<&FileRecord>) -> String {
    let reconciling = file.is_some_and(|f| f.feed == crate::plan::RECONCILE_FEED);
    let mut out = String::new();
    let by = match (file, reconciling) {
        (_, true) => "the reconciliation".to_owned(),
        (Some(f), false) => Escaped(&f.name).to_string(),
        (None, false) => match event.file_no {
            Some(no) => format!("file no. {no} (its record is gone)"),
            None => String::new(),
        },
    };
    // Writing to a String cannot fail.
    let _ = match &event.what {
        What::Queued {
            seq,
            op,
            line,
            changed,
            absent,
            forced,
            ..
        } => {
            let guard = if *forced {
                "the safety guard would have held the file and was overridden"
            } else {
                "the safety guard let the file through"
            };
            match (reconciling, op.as_str(), line) {
                (true, "create", _) => write!(
                    out,
                    "{by}: not on the service any more though the lot has it: create it again (operation {seq})"
                ),
                (true, "update", _) => write!(
                    out,
                    "{by}: the service shows other fields than were sent: send them again (operation {seq})"
                ),
                (true, "sold", _) => write!(
                    out,
                    "{by}: the service shows it in stock, lotsync marked it sold: mark it sold again (operation {seq})"
                ),
                (true, _, _) => write!(
                    out,
                    "{by}: the service shows it sold, lotsync left it in stock: mark it back in stock (operation {seq})"
                ),
                (false, "create", Some(l)) => write!(
                    out,
                    "{by} line {l} listed it, new: {} (operation {seq})",
                    op_words(op)
                ),
                (false, "update", Some(l)) => {
                    let _ = write!(out, "{by} line {l} listed it changed");
                    changes(&mut out, changed);
                    write!(out, ": update it (operation {seq})")
                }
                (false, "update", None) => {
                    let _ = write!(
                        out,
                        "{by} left it out, and the latest file of another location lists it: moved there"
                    );
                    changes(&mut out, changed);
                    write!(out, " (operation {seq})")
                }
                (false, "sold", None) => write!(
                    out,
                    "{by} left it out ({} in a row): sold by absence, {guard}; mark it sold (operation {seq})",
                    files_in_a_row(absent.unwrap_or(1))
                ),
                (false, "sold", Some(l)) => write!(
                    out,
                    "{by} line {l} lists it as sold: mark it sold (operation {seq})"
                ),
                (false, "in_stock", Some(l)) => write!(
                    out,
                    "{by} line {l} lists it on the lot again: back in stock (operation {seq})"
                ),
                (false, op, _) => write!(out, "{by}: {} (operation {seq})", op_words(op)),
            }
        }
        What::Held { op, line } => {
            let reason = match file.map(|f| &f.outcome) {
                Some(super::FileOutcome::Held { reason }) => format!(" ({})", Escaped(reason)),
                _ => String::new(),
            };
            match line {
                Some(l) => write!(
                    out,
                    "{by} line {l} would {}, but the safety guard held the file{reason}: nothing was sent",
                    op_words(op)
                ),
                None => write!(
                    out,
                    "{by} left it out and would {}, but the safety guard held the file{reason}: nothing was sent",
                    op_words(op)
                ),
            }
        }
        What::Waiting { absent } => write!(
            out,
            "{by} left it out ({} in a row): not sold yet, a car is sold only after sold_after_absent files without it",
            files_in_a_row(*absent)
        ),
        What::Protected { by: why, line, value } => match why.as_str() {
            "other_location" => write!(
                out,
                "{by} left it out, but the latest file of another location ({}) lists it: not sold",
                Escaped(value)
            ),
            kind => {
                let what = match kind {
                    "stock" => format!("its stock number {}", Escaped(value)),
                    "near_vin" => format!("the VIN {}, one typo away from its own", Escaped(value)),
                    _ => "its VIN".to_owned(),
                };
                write!(
                    out,
                    "{by} left it out, but its rejected record at line {} carries {what}: kept on the lot, not sold, not changed",
                    line.unwrap_or(0)
                )
            }
        },
        What::Adopted { service_id } => write!(
            out,
            "{by}: already on the service (id {service_id}), adopted without sending anything"
        ),
        What::Replaced { seqs } => write!(
            out,
            "{by} replaced its operations not sent yet ({}): superseded by this file's",
            seqs.iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        // Told as its two events ([`expand`]).
        What::QueuedAndAnswered { seq, op, .. } => {
            write!(out, "{by}: {} (operation {seq}), answered", op_words(op))
        }
        What::Answered {
            seq,
            op,
            ok,
            status,
            retries,
            messages,
            service_id,
            ..
        } => {
            let status = status.map_or(String::new(), |s| format!(", HTTP {s}"));
            let retried = match retries {
                0 => String::new(),
                1 => ", after 1 retry".to_owned(),
                n => format!(", after {n} retries"),
            };
            if *ok {
                let id = service_id.map_or(String::new(), |id| format!(", id {id}"));
                write!(
                    out,
                    "the service accepted operation {seq} ({}){id}{status}{retried}",
                    op_words(op)
                )
            } else {
                write!(
                    out,
                    "the service refused operation {seq} ({}){status}{retried}: {}; not sent again until a file changes it",
                    op_words(op),
                    Escaped(&messages.join("; "))
                )
            }
        }
        What::Restored {
            service_id,
            sold,
            file,
        } => write!(
            out,
            "the reconciliation restored its record from the service's list (id {service_id}, {}) with the fields of {}",
            if *sold { "sold" } else { "in stock" },
            Escaped(file)
        ),
        What::IdLearned { service_id } => write!(
            out,
            "the reconciliation learned its id from the service's list: {service_id}"
        ),
        What::Rebuilt {
            file,
            line,
            op,
            note,
        } => {
            let file = Escaped(file);
            let _ = match (op.as_str(), line) {
                ("kept", Some(l)) => write!(
                    out,
                    "{file} left it out, but its rejected record at line {l} stood for it ({}): kept on the lot",
                    Escaped(note)
                ),
                ("kept", None) => write!(
                    out,
                    "{file} left it out, but the latest file of another location ({}) lists it: not sold",
                    Escaped(note)
                ),
                ("refused", _) => write!(out, "{file}: the service {}", Escaped(note)),
                ("create", Some(l)) => write!(out, "{file} line {l} listed it, new: created"),
                ("update", Some(l)) => write!(out, "{file} line {l} listed it changed: updated"),
                ("sold", Some(l)) => write!(out, "{file} line {l} lists it as sold: sold"),
                ("in_stock", Some(l)) => {
                    write!(out, "{file} line {l} lists it on the lot again: back in stock")
                }
                ("sold", None) => write!(out, "{file} left it out: sold by absence"),
                (op, _) => write!(out, "{file}: {}", op_words(op)),
            };
            write!(
                out,
                " (told again from the archive by a rebuild of the state)"
            )
        }
        What::Forgotten => write!(
            out,
            "the reconciliation let its record go: sold, and no longer on the service (a file listing it again creates it again)"
        ),
        What::Expired { days } => write!(
            out,
            "its record was let go: sold and unchanged for more than {days} days ([state] keep_sold_days; a file listing it again creates it again)"
        ),
    };
    out
}

fn files_in_a_row(n: u32) -> String {
    match n {
        1 => "1 file".to_owned(),
        n => format!("{n} files"),
    }
}

fn changes(out: &mut String, changed: &[FieldChange]) {
    if changed.is_empty() {
        return;
    }
    let shown: Vec<String> = changed
        .iter()
        .map(|c| match (&c.from, &c.to) {
            (Some(from), Some(to)) => {
                format!("{} {} → {}", c.field, Escaped(from), Escaped(to))
            }
            (None, Some(to)) => format!("{} now {}", c.field, Escaped(to)),
            (Some(_), None) => format!("{} removed", c.field),
            (None, None) => c.field.clone(),
        })
        .collect();
    let _ = write!(out, " ({})", shown.join("; "));
}

impl Why {
    /// The answer for a person: per vehicle, how the service last acknowledged it, its
    /// history newest first, and its operations. Dates in UTC.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if self.vehicles.is_empty() {
            let _ = writeln!(
                out,
                "lotsync knows no vehicle with VIN or stock number {}. Looked in:",
                Escaped(&self.query)
            );
            for place in &self.looked_in {
                let _ = writeln!(out, "  - {place}");
            }
            return out;
        }
        if self.vehicles.len() > 1 {
            let _ = writeln!(
                out,
                "{} vehicles have stock number {}:\n",
                self.vehicles.len(),
                Escaped(&self.query)
            );
        }
        for (i, v) in self.vehicles.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            v.render(&mut out);
        }
        out
    }
}

fn date(at: i64) -> String {
    crate::clock::utc_unix(at)
}

impl VehicleWhy {
    fn render(&self, out: &mut String) {
        let stock = self
            .acknowledged
            .as_ref()
            .and_then(|a| a.payload.as_ref())
            .map(|p| format!(", stock {}", Escaped(&p.stock)))
            .unwrap_or_default();
        let at = self
            .location_id
            .map(|l| format!(", location {l}"))
            .unwrap_or_default();
        let _ = writeln!(out, "VIN {}{stock}{at}", Escaped(&self.vin));
        match &self.acknowledged {
            None => {
                let _ = writeln!(
                    out,
                    "  Not in the state now: only its history is left (below)."
                );
            }
            Some(a) if !a.created => {
                let _ = writeln!(
                    out,
                    "  Not on the service yet as far as lotsync knows (its creation was not acknowledged)."
                );
            }
            Some(a) => {
                let id = a.service_id.map_or("unknown".to_owned(), |i| i.to_string());
                let _ = writeln!(
                    out,
                    "  On the service, as last acknowledged ({} UTC): id {id}, {}",
                    date(a.updated_at),
                    if a.sold { "sold" } else { "in stock" }
                );
                if let Some(p) = &a.payload {
                    let _ = writeln!(out, "  Fields sent: {}", fields(p));
                }
            }
        }
        if let Some(r) = self.acknowledged.as_ref().and_then(|a| a.refused.as_ref()) {
            let _ = writeln!(
                out,
                "  The service refused its last {} on {} UTC (HTTP {}): {}; not sent again until a file changes it",
                op_words(&r.op),
                date(r.at),
                r.status,
                Escaped(&r.messages.join("; "))
            );
        }
        if let Some(a) = self.acknowledged.as_ref().filter(|a| a.absent > 0) {
            let _ = writeln!(
                out,
                "  Left out of the last {} of its lot in a row.",
                files_in_a_row(a.absent)
            );
        }
        if let Some(online) = &self.online {
            let _ = writeln!(out, "  {}", online_line(online));
        }
        if let Some(source) = &self.source {
            source.render(out);
        }
        let _ = writeln!(out, "History, newest first (UTC):");
        if let Some(q) = &self.quiet_since {
            let _ = writeln!(
                out,
                "  {}  {} later {} of feed {} changed nothing for it (the last: {})",
                date(q.at),
                q.files,
                if q.files == 1 { "file" } else { "files" },
                Escaped(&q.feed),
                Escaped(&q.last)
            );
        }
        if self.events.is_empty() {
            let _ = writeln!(
                out,
                "  (none recorded: the state's history began after its last change, or is older than [state] keep_history_days)"
            );
        }
        for e in &self.events {
            let _ = writeln!(out, "  {}  {}", date(e.at), e.text);
        }
        if !self.operations.is_empty() {
            let _ = writeln!(out, "Operations, newest first:");
        }
        for o in &self.operations {
            let from = o
                .file
                .as_deref()
                .map(|f| format!(" by {}", Escaped(f)))
                .unwrap_or_default();
            let what = match o.outcome.as_str() {
                "queued" => "waiting to be sent".to_owned(),
                "replaced" => "replaced by a newer file before it was sent".to_owned(),
                "unknown" => "no answer recorded".to_owned(),
                outcome => {
                    let verb = if outcome == "done" {
                        "accepted"
                    } else {
                        "refused"
                    };
                    let mut s = format!("{verb} {}", o.answered.map(date).unwrap_or_default());
                    if let Some(status) = o.status {
                        let _ = write!(s, " (HTTP {status})");
                    }
                    if let Some(sent) = o.sent {
                        let _ = write!(s, ", sent {}", date(sent));
                    }
                    let _ = write!(
                        s,
                        ", {}",
                        match o.retries {
                            0 => "no retry".to_owned(),
                            1 => "1 retry".to_owned(),
                            n => format!("{n} retries"),
                        }
                    );
                    s
                }
            };
            let _ = writeln!(
                out,
                "  {} {}, queued {}{from}: {what}",
                o.seq,
                op_label(&o.op),
                date(o.queued_at)
            );
        }
    }
}

impl Source {
    /// Where the fields came from: per column, what it held and what was sent.
    fn render(&self, out: &mut String) {
        let line = match (self.record.as_ref().map(|r| r.line), self.line) {
            (Some(line), _) | (None, Some(line)) => format!(", line {line}"),
            (None, None) => String::new(),
        };
        let _ = writeln!(
            out,
            "The last file that listed it: {} (feed {}){line}, taken {} UTC",
            Escaped(&self.file),
            Escaped(&self.feed),
            date(self.at)
        );
        if let Some(note) = &self.note {
            let _ = writeln!(out, "  Its record cannot be shown: {}", Escaped(note));
        }
        let Some(record) = &self.record else {
            return;
        };
        if record.rejected {
            let _ = writeln!(
                out,
                "  That record was rejected, so nothing of it was sent:"
            );
        }
        for field in &record.fields {
            let had = format!(
                "column \"{}\" had \"{}\"",
                Escaped(&field.column),
                Escaped(&field.raw)
            );
            let became = if record.rejected {
                String::new()
            } else if field.sent.is_empty() {
                match record.problems.iter().find(|p| p.field == field.field) {
                    Some(p) => format!(", left out: {}", Escaped(&p.reason)),
                    None => ", nothing sent".to_owned(),
                }
            } else {
                // `sold` is what the export says of it, sent as a transition, not a field.
                let read_as = field
                    .sent
                    .iter()
                    .find(|(name, _)| name == "sold")
                    .map(|(_, v)| match v.as_bool() {
                        Some(true) => ", read as sold",
                        _ => ", read as on the lot",
                    });
                let sent: Vec<String> = field
                    .sent
                    .iter()
                    .filter(|(name, _)| name != "sold")
                    .map(|(name, value)| format!("{name} {}", short_value(value)))
                    .collect();
                let sent = match sent.is_empty() {
                    true => String::new(),
                    false => format!(", sent {}", Escaped(&sent.join(", "))),
                };
                format!("{}{sent}", read_as.unwrap_or_default())
            };
            let _ = writeln!(out, "  {}: {had}{became}", field.field);
        }
        let shown: Vec<&str> = record.fields.iter().map(|f| f.field.as_str()).collect();
        for p in &record.problems {
            if !record.rejected && shown.contains(&p.field.as_str()) {
                continue; // said on its field's line
            }
            let value = p
                .value
                .as_deref()
                .map(|v| format!(" ({})", Escaped(v)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  {} {}: {}{value}",
                if record.rejected {
                    "rejected:"
                } else {
                    "note:"
                },
                Escaped(&p.field),
                Escaped(&p.reason)
            );
        }
    }
}

/// What `--online` found, in one line: the service's view now and where it differs.
fn online_line(online: &serde_json::Value) -> String {
    if let Some(error) = online.get("error").and_then(|e| e.as_str()) {
        return format!("On the service now: cannot tell: {}", Escaped(error));
    }
    let id = online.get("id").and_then(|v| v.as_u64()).unwrap_or(0);
    let sold = match online.get("sold").and_then(|v| v.as_bool()) {
        Some(true) => "sold",
        Some(false) => "in stock",
        None => "sold or in stock not said",
    };
    let mut drift: Vec<String> = online
        .get("fields_differ")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(|f| Escaped(f).to_string()))
                .collect()
        })
        .unwrap_or_default();
    if online.get("sold_differs").and_then(|v| v.as_bool()) == Some(true) {
        drift.insert(0, "sold or in stock".into());
    }
    let differs = if drift.is_empty() {
        "as lotsync last sent it".to_owned()
    } else {
        format!("differs from what lotsync sent: {}", drift.join(", "))
    };
    format!("On the service now: id {id}, {sold}; {differs}")
}

/// A payload's fields on one line, `name: value`, escaped.
fn fields(payload: &crate::api::VehiclePayload) -> String {
    flat(Some(payload))
        .iter()
        .map(|(k, v)| format!("{k}: {}", Escaped(&short_value(v))))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(at: i64, seq: u64) -> Event {
        Event::new(
            at,
            Some(1),
            What::Queued {
                seq,
                op: "update".into(),
                line: Some(2),
                changed: Vec::new(),
                absent: None,
                forced: false,
            },
        )
    }

    /// Within one second (the demo plans Tuesday's, Wednesday's and Thursday's files in one)
    /// the events read back in the order they happened: by file, a plan's before its answers.
    /// Read back by key, the held Thursday (file 4) came before Tuesday's operation 17.
    #[test]
    fn events_of_one_second_are_told_in_the_order_they_happened() {
        let tmp = crate::testing::temp_dir("history-one-second");
        let state = State::open(&tmp.path().join("state")).unwrap();
        let at = 1_700_000_000;
        let queued = |file_no, seq| Event {
            file_no: Some(file_no),
            ..event(at, seq)
        };
        let answered = |file_no, seq| {
            Event::new(
                at,
                Some(file_no),
                What::Answered {
                    seq,
                    op: "s".into(),
                    ok: true,
                    status: Some(200),
                    sent: None,
                    retries: 0,
                    messages: Vec::new(),
                    service_id: Some(4),
                },
            )
        };
        let held = Event::new(
            at,
            Some(4),
            What::Held {
                op: "s".into(),
                line: None,
            },
        );
        let happened = [
            queued(2, 17),
            answered(2, 17),
            queued(3, 19),
            answered(3, 19),
            held,
        ];
        for e in &happened {
            state
                .transaction(|tx| append(tx.conn(), 1, "VIN1", vec![e.clone()], at))
                .unwrap();
        }
        let mut told = state.history(1, "VIN1").unwrap();
        oldest_first(&mut told);
        let order: Vec<_> = told
            .iter()
            .map(|e| (e.file_no, matches!(e.what, What::Answered { .. })))
            .collect();
        assert_eq!(
            order,
            [
                (Some(2), false),
                (Some(2), true),
                (Some(3), false),
                (Some(3), true),
                (Some(4), false)
            ]
        );
    }

    /// A rebuild's story and the reconciliation's finding of the same second are written
    /// apart, neither with an operation or a file: the finding does not replace the story's
    /// first event (a rebuilt "created" was lost that way when both fell in one second), and
    /// the story is told after what the reconciliation found.
    #[test]
    fn a_rebuilds_events_and_a_finding_of_the_same_second_are_all_kept() {
        let tmp = crate::testing::temp_dir("history-rebuilt");
        let state = State::open(&tmp.path().join("state")).unwrap();
        let at = 1_700_000_000;
        let rebuilt = |file: &str, op: &str| {
            Event::new(
                at,
                None,
                What::Rebuilt {
                    file: file.into(),
                    line: Some(4),
                    op: op.into(),
                    note: String::new(),
                },
            )
        };
        let story = vec![
            rebuilt("day1.csv", "create"),
            rebuilt("day2.csv", "sold"),
            rebuilt("day3.csv", "in_stock"),
        ];
        let found = Event::new(
            at,
            None,
            What::Restored {
                service_id: 8,
                sold: false,
                file: "day3.csv".into(),
            },
        );
        state
            .transaction(|tx| append(tx.conn(), 1, "VIN1", story.clone(), at))
            .unwrap();
        state
            .transaction(|tx| append(tx.conn(), 1, "VIN1", vec![found.clone()], at))
            .unwrap();
        let mut told = state.history(1, "VIN1").unwrap();
        oldest_first(&mut told);
        let mut expected = vec![found];
        expected.extend(story);
        assert_eq!(told, expected);
    }

    /// Each vehicle reads back its own events only (a VIN that starts another's is not it),
    /// the newest kept; what is older than the days kept is let go.
    #[test]
    fn history_is_per_vehicle_and_bounded() {
        let tmp = crate::testing::temp_dir("history");
        let state = State::open(&tmp.path().join("state")).unwrap();
        let now = 1_000 * 24 * 3600;
        let keep_days = i64::from(crate::state::retention::DEFAULT_KEEP_DAYS);
        let old = now - (keep_days + 1) * 24 * 3600;
        state
            .transaction(|tx| {
                let many: Vec<Event> = (0..80).map(|i| event(now - 100 + i, i as u64)).collect();
                append(tx.conn(), 100, "VIN1", many, now)?;
                append(tx.conn(), 100, "VIN12", vec![event(now, 500)], now)?;
                append(tx.conn(), 100, "VIN2", vec![event(old, 600)], now)
            })
            .unwrap();
        let vin1 = state.history(100, "VIN1").unwrap();
        assert_eq!(vin1.len(), KEEP_EVENTS);
        assert_eq!(vin1[0].what, event(0, 30).what, "the oldest 30 not told");
        assert_eq!(state.history(100, "VIN12").unwrap().len(), 1);
        assert_eq!(
            state.history(200, "VIN1").unwrap().len(),
            0,
            "another organization"
        );
        assert_eq!(state.history(100, "VIN2").unwrap().len(), 1);
        assert_eq!(state.prune(now).unwrap().events, 1);
        assert!(state.history(100, "VIN2").unwrap().is_empty());
        assert_eq!(state.history(100, "VIN12").unwrap().len(), 1);
    }

    /// An answered operation is one small value in the tree, read back as its queueing (with
    /// why the plan queued it) and the service's answer, each at its own time.
    #[test]
    fn an_answered_operation_is_one_event_told_as_two() {
        let tmp = crate::testing::temp_dir("history-one-op");
        let state = State::open(&tmp.path().join("state")).unwrap();
        let queued_at = 1_764_115_200;
        let entry = OutboxEntry {
            seq: 98_765,
            organization_id: 100,
            location_id: 10,
            vin: "1HGCM82633A004352".into(),
            op: crate::plan::Op::MarkSold,
            file: "inv.csv".into(),
            file_no: Some(3),
            queued_at,
            queuing: Queuing {
                line: None,
                changed: Vec::new(),
                absent: Some(2),
                forced: true,
            },
        };
        let answered = Answer {
            at: queued_at + 40,
            refused: false,
            status: Some(200),
            sent: Some(queued_at + 38),
            retries: 1,
            messages: Vec::new(),
            service_id: None,
        };
        state
            .transaction(|tx| answer(tx.conn(), &entry, answered.clone(), queued_at + 40))
            .unwrap();
        assert_eq!(state.history_count(), 1, "one row per operation");
        let value: String = state
            .reader()
            .query_row("SELECT event FROM history", [], |row| row.get(0))
            .unwrap();
        assert!(value.len() < 80, "{value}");
        let told = expand(state.history(100, &entry.vin).unwrap());
        assert_eq!(
            told,
            [
                Event::new(
                    queued_at,
                    Some(3),
                    What::Queued {
                        seq: 98_765,
                        op: "sold".into(),
                        line: None,
                        changed: Vec::new(),
                        absent: Some(2),
                        forced: true,
                    }
                ),
                Event::new(
                    queued_at + 40,
                    Some(3),
                    What::Answered {
                        seq: 98_765,
                        op: "sold".into(),
                        ok: true,
                        status: Some(200),
                        sent: Some(queued_at + 38),
                        retries: 1,
                        messages: Vec::new(),
                        service_id: None,
                    }
                )
            ]
        );
    }

    /// A state written before an operation was one event (each event with its time in its
    /// value) reads back the same.
    #[test]
    fn events_stored_with_their_time_read_back() {
        let tmp = crate::testing::temp_dir("history-before");
        let state = State::open(&tmp.path().join("state")).unwrap();
        let at = 1_764_115_200;
        let stored: [(i64, u64, u8, &[u8]); 4] = [
            (
                at,
                17,
                0,
                br#"{"at":1764115200,"f":2,"k":"q","s":17,"o":"u","l":2}"#,
            ),
            (
                at + 5,
                17,
                u8::MAX,
                br#"{"at":1764115205,"f":2,"k":"a","s":17,"op":"u","ok":true,"status":200}"#,
            ),
            // Queued before the upgrade, answered after: its queueing is told once.
            (
                at + 1,
                18,
                0,
                br#"{"at":1764115201,"f":2,"k":"q","s":18,"o":"s"}"#,
            ),
            (
                at + 9,
                18,
                u8::MAX,
                br#"{"f":2,"k":"d","o":"s","q":8,"h":200}"#,
            ),
        ];
        for (at, seq, index, value) in stored {
            state
                .transaction(|tx| -> Result<usize, StateError> {
                    Ok(tx.conn().execute(
                        "INSERT INTO history (organization_id, vin, at, tag, idx, event)
                         VALUES (100, 'VIN1', ?1, ?2, ?3, ?4)",
                        rusqlite::params![at, seq, index, std::str::from_utf8(value).unwrap()],
                    )?)
                })
                .unwrap();
        }
        let mut told = expand(state.history(100, "VIN1").unwrap());
        oldest_first(&mut told);
        let order: Vec<_> = told.iter().map(|e| (e.at - at, kind(&e.what))).collect();
        assert_eq!(
            order,
            [
                (0, "queued"),
                (1, "queued"),
                (5, "answered"),
                (9, "answered")
            ]
        );
        assert_eq!(
            told[0],
            Event {
                file_no: Some(2),
                ..event(at, 17)
            }
        );
        assert!(matches!(
            told[2].what,
            What::Answered {
                seq: 17,
                ok: true,
                status: Some(200),
                ..
            }
        ));
        assert!(matches!(
            told[3].what,
            What::Answered {
                seq: 18,
                status: Some(200),
                ..
            }
        ));
    }

    /// Events read back as written, and small.
    #[test]
    fn events_round_trip_compactly() {
        let e = event(1_764_115_200, 17);
        let bytes = crate::state::records::encode(&e, "event").unwrap();
        assert!(bytes.len() < 70, "{bytes}");
        let back: Event = crate::state::records::decode(bytes.as_bytes(), "event").unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn changed_fields_name_what_differs() {
        let mut a = crate::api::VehiclePayload::new(10, "S1", "VIN1");
        a.miles = Some(10);
        let mut b = a.clone();
        b.miles = Some(12);
        b.make = Some("Honda".into());
        let changed = changed_fields(Some(&a), &b);
        let names: Vec<&str> = changed.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(names, ["make", "miles"]);
        assert_eq!(changed[1].from.as_deref(), Some("10"));
        assert_eq!(changed[1].to.as_deref(), Some("12"));
    }

    /// A value from outside never breaks the line it is shown on.
    #[test]
    fn sentences_escape_outside_values() {
        let e = Event::new(
            0,
            None,
            What::Protected {
                by: "stock".into(),
                line: Some(4),
                value: "24\n117\u{1b}[31m".into(),
            },
        );
        let text = sentence(&e, None);
        assert!(!text.contains('\n') && !text.contains('\u{1b}'), "{text}");
        assert!(text.contains("24\\n117"), "{text}");
    }
}
