//! The fidelity score: every layout under `tests/fidelity/` read through the real
//! mapper (`Profile::auto()`), each accepted payload serialized as it would be sent and compared
//! with the layout's `expected.toml`. Shared by `tests/fidelity.rs` (which asserts the goals) and
//! `examples/fidelity.rs` (which prints the table).
//!
//! The yardstick is kept apart from the implementation on purpose: the spec's enum lists below are
//! copied from spec §4.2, not taken from `lotsync::api`, and expected values are what a person maps
//! without doubt, not what lotsync happens to produce.
//!
//! A field not right is either MISSING (not sent: the vehicle, or that field of it, left out) or
//! WRONG (sent with another value than expected, or sent at all when the layout lists it in
//! `absent`, or sent with a value its `not` table names). A wrong value is published on
//! the dealer's listing, a missing one is not, so the two are counted apart.

// Each of the two users calls only part of this module.
#![allow(dead_code)]

use lotsync::mapper::{ExportFile, Mapped, Profile};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The goals of the issue.
pub const GOAL_FIELDS: f64 = 0.98;

/// Why a field is not right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissKind {
    /// Not sent: the record was not accepted, or the field was left out.
    Missing,
    /// Sent with a value other than expected, or sent when it must not be.
    Wrong,
}

/// A field expected and not found as expected.
#[derive(Debug, Clone)]
pub struct Miss {
    pub layout: String,
    /// The VIN (or serial) of the vehicle.
    pub vehicle: String,
    pub field: String,
    pub expected: String,
    pub got: String,
    pub kind: MissKind,
}

/// A value of an accepted payload that is not in the spec's list for its field.
#[derive(Debug, Clone)]
pub struct Outside {
    pub layout: String,
    pub vehicle: String,
    pub field: String,
    pub value: String,
}

/// A record the layout says must be refused, and was not.
#[derive(Debug, Clone)]
pub struct MissedRejection {
    pub layout: String,
    pub line: u64,
    pub why: String,
    pub got: String,
}

/// One layout's score.
#[derive(Debug, Default)]
pub struct LayoutScore {
    pub name: String,
    pub fields_right: usize,
    pub fields_expected: usize,
    pub rejections_found: usize,
    pub rejections_required: usize,
    pub accepted: usize,
    /// Fields not right: missing ones and wrong ones (see `Miss::kind`).
    pub misses: Vec<Miss>,
    pub outside: Vec<Outside>,
    pub missed_rejections: Vec<MissedRejection>,
    /// The file as a whole was refused: nothing from it would be sent.
    pub file_error: Option<String>,
}

/// The whole corpus.
#[derive(Debug, Default)]
pub struct Score {
    pub layouts: Vec<LayoutScore>,
}

impl LayoutScore {
    /// Fields sent with a wrong value (or sent when they must not be).
    pub fn wrong(&self) -> usize {
        self.misses
            .iter()
            .filter(|m| m.kind == MissKind::Wrong)
            .count()
    }
    /// Fields expected and not sent.
    pub fn missing(&self) -> usize {
        self.misses
            .iter()
            .filter(|m| m.kind == MissKind::Missing)
            .count()
    }
}

impl Score {
    pub fn fields_right(&self) -> usize {
        self.layouts.iter().map(|l| l.fields_right).sum()
    }
    pub fn fields_expected(&self) -> usize {
        self.layouts.iter().map(|l| l.fields_expected).sum()
    }
    pub fn rejections_found(&self) -> usize {
        self.layouts.iter().map(|l| l.rejections_found).sum()
    }
    pub fn rejections_required(&self) -> usize {
        self.layouts.iter().map(|l| l.rejections_required).sum()
    }
    pub fn outside(&self) -> usize {
        self.layouts.iter().map(|l| l.outside.len()).sum()
    }
    pub fn wrong(&self) -> usize {
        self.layouts.iter().map(|l| l.wrong()).sum()
    }
    pub fn missing(&self) -> usize {
        self.layouts.iter().map(|l| l.missing()).sum()
    }
    pub fn field_ratio(&self) -> f64 {
        ratio(self.fields_right(), self.fields_expected())
    }
    pub fn meets_goals(&self) -> bool {
        self.field_ratio() >= GOAL_FIELDS
            && self.wrong() == 0
            && self.outside() == 0
            && self.rejections_found() == self.rejections_required()
    }

    /// The per-layout table and the totals.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<30} {:>15} {:>7} {:>8} {:>6} {:>8} {:>11}\n",
            "layout", "fields", "%", "missing", "wrong", "outside", "rejections"
        );
        for l in &self.layouts {
            out.push_str(&format!(
                "{:<30} {:>15} {:>6.1}% {:>8} {:>6} {:>8} {:>11}{}\n",
                l.name,
                format!("{}/{}", l.fields_right, l.fields_expected),
                100.0 * ratio(l.fields_right, l.fields_expected),
                l.missing(),
                l.wrong(),
                l.outside.len(),
                format!("{}/{}", l.rejections_found, l.rejections_required),
                l.file_error
                    .as_ref()
                    .map(|e| format!("  FILE REFUSED: {e}"))
                    .unwrap_or_default()
            ));
        }
        out.push_str(&format!(
            "{:<30} {:>15} {:>6.1}% {:>8} {:>6} {:>8} {:>11}\n",
            "total",
            format!("{}/{}", self.fields_right(), self.fields_expected()),
            100.0 * self.field_ratio(),
            self.missing(),
            self.wrong(),
            self.outside(),
            format!("{}/{}", self.rejections_found(), self.rejections_required()),
        ));
        out.push_str(&format!(
            "goals: fields >= {:.0}% of unambiguous, 0 wrong values, 0 values outside the spec's lists, 100% of required rejections: {}\n",
            100.0 * GOAL_FIELDS,
            if self.meets_goals() { "met" } else { "NOT met" }
        ));
        out
    }

    /// Every wrong or missing field, value outside the lists and missed rejection, one a line.
    pub fn problems(&self) -> String {
        let mut out = String::new();
        for l in &self.layouts {
            if let Some(e) = &l.file_error {
                // Every field of a refused file is missing: one line says it all.
                out.push_str(&format!(
                    "{}: file refused, its {} expected fields all missing: {e}\n",
                    l.name,
                    l.misses.len()
                ));
            }
            for m in l.misses.iter().filter(|_| l.file_error.is_none()) {
                out.push_str(&format!(
                    "{} {} {}: {} expected {}, got {}\n",
                    m.layout,
                    m.vehicle,
                    m.field,
                    match m.kind {
                        MissKind::Wrong => "WRONG:",
                        MissKind::Missing => "missing:",
                    },
                    m.expected,
                    m.got
                ));
            }
            for o in &l.outside {
                out.push_str(&format!(
                    "{} {} {}: {:?} is not in the spec's list\n",
                    o.layout, o.vehicle, o.field, o.value
                ));
            }
            for r in &l.missed_rejections {
                out.push_str(&format!(
                    "{} line {}: must be rejected ({}), got {}\n",
                    r.layout, r.line, r.why, r.got
                ));
            }
        }
        out
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

/// `tests/fidelity/` of this crate.
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fidelity")
}

/// Scores every layout (each folder holding an `expected.toml`), in name order.
pub fn score_corpus(dir: &Path) -> Score {
    let mut layouts: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("expected.toml").is_file())
        .collect();
    layouts.sort();
    Score {
        layouts: layouts.iter().map(|p| score_layout(p)).collect(),
    }
}

/// What the mapper made of one file: accepted payloads by VIN, rejections by line.
struct Outcome {
    accepted: Vec<(u64, Value)>,
    rejected: Vec<(u64, Option<String>, String)>,
    error: Option<String>,
}

fn run(path: &Path) -> Outcome {
    let mut out = Outcome {
        accepted: Vec::new(),
        rejected: Vec::new(),
        error: None,
    };
    let profile = Profile::auto();
    let mut file = match ExportFile::open(path, &profile, 1) {
        Ok(f) => f,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    loop {
        match file.next_record() {
            Ok(None) => break,
            Ok(Some(Mapped::Accepted(a))) => {
                let json = serde_json::to_value(&a.payload).expect("a payload serializes");
                out.accepted.push((a.line, json));
            }
            Ok(Some(Mapped::Rejected(r))) => {
                let why: Vec<String> = r
                    .problems
                    .iter()
                    .map(|p| format!("{}: {}", p.field, p.reason))
                    .collect();
                out.rejected.push((r.line, r.vin.clone(), why.join("; ")));
            }
            Err(e) => {
                // A file refused part-way is refused as a whole: nothing of it is sent.
                out.error = Some(e.to_string());
                out.accepted.clear();
                break;
            }
        }
    }
    out
}

/// A bare price is the selling price (spec §4.2): seen as `{"selling": n}` so that either form
/// is scored alike.
fn normalize(mut payload: Value) -> Value {
    if let Some(obj) = payload.as_object_mut() {
        if let Some(p) = obj.get("price").filter(|p| p.is_number()).cloned() {
            let mut set = Map::new();
            set.insert("selling".into(), p);
            obj.insert("price".into(), Value::Object(set));
        }
    }
    payload
}

fn lookup<'a>(payload: &'a Value, path: &str) -> Option<&'a Value> {
    let mut at = payload;
    for part in path.split('.') {
        at = at.get(part)?;
    }
    (!at.is_null()).then_some(at)
}

fn same(expected: &Value, got: &Value) -> bool {
    match (expected, got) {
        (Value::Number(a), Value::Number(b)) => match (a.as_f64(), b.as_f64()) {
            (Some(a), Some(b)) => (a - b).abs() < 1e-9,
            _ => false,
        },
        _ => expected == got,
    }
}

fn show(v: Option<&Value>) -> String {
    match v {
        None => "(absent)".into(),
        Some(v) => v.to_string(),
    }
}

/// Scores one layout folder.
pub fn score_layout(dir: &Path) -> LayoutScore {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = std::fs::read_to_string(dir.join("expected.toml"))
        .unwrap_or_else(|e| panic!("{name}/expected.toml: {e}"));
    let expected: toml::Table =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{name}/expected.toml: {e}"));
    let file = expected
        .get("file")
        .and_then(|f| f.as_str())
        .unwrap_or_else(|| panic!("{name}/expected.toml: no `file`"));
    let outcome = run(&dir.join(file));
    let mut score = LayoutScore {
        name: name.clone(),
        file_error: outcome.error.clone(),
        accepted: outcome.accepted.len(),
        ..LayoutScore::default()
    };

    let mut by_vin: HashMap<String, Value> = HashMap::new();
    for (_, payload) in &outcome.accepted {
        let vin = payload["vin"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_uppercase();
        check_enums(&name, &vin, payload, &mut score.outside);
        by_vin.insert(vin, normalize(payload.clone()));
    }

    let empty = Vec::new();
    let vehicles = expected
        .get("vehicle")
        .and_then(|v| v.as_array())
        .unwrap_or(&empty);
    for vehicle in vehicles {
        let vehicle = vehicle.as_table().expect("[[vehicle]] is a table");
        let vin = vehicle
            .get("vin")
            .and_then(|v| v.as_str())
            .unwrap_or_else(|| panic!("{name}: a vehicle without vin"))
            .to_ascii_uppercase();
        let payload = by_vin.get(&vin);
        let not_there = || match (
            &outcome.error,
            outcome
                .rejected
                .iter()
                .find(|r| r.1.as_deref() == Some(&vin)),
        ) {
            (Some(e), _) => format!("(file refused: {e})"),
            (None, Some(r)) => format!("(record rejected: {})", r.2),
            (None, None) => "(vehicle not in the output)".to_owned(),
        };
        for (field, value) in vehicle {
            if field == "absent" || field == "not" {
                continue;
            }
            score.fields_expected += 1;
            let want = serde_json::to_value(value).expect("toml values convert");
            let got = payload.and_then(|p| lookup(p, field));
            if got.is_some_and(|g| same(&want, g)) {
                score.fields_right += 1;
            } else {
                score.misses.push(Miss {
                    layout: name.clone(),
                    vehicle: vin.clone(),
                    field: field.clone(),
                    expected: want.to_string(),
                    got: if payload.is_some() {
                        show(got)
                    } else {
                        not_there()
                    },
                    kind: if got.is_some() {
                        MissKind::Wrong
                    } else {
                        MissKind::Missing
                    },
                });
            }
        }
        let absent = vehicle
            .get("absent")
            .and_then(|a| a.as_array())
            .unwrap_or(&empty);
        for field in absent {
            let field = field.as_str().expect("absent lists field names");
            score.fields_expected += 1;
            let got = payload.and_then(|p| lookup(p, field));
            if payload.is_some() && got.is_none() {
                score.fields_right += 1;
            } else {
                score.misses.push(Miss {
                    layout: name.clone(),
                    vehicle: vin.clone(),
                    field: field.to_owned(),
                    expected: "(absent)".into(),
                    got: if payload.is_some() {
                        show(got)
                    } else {
                        not_there()
                    },
                    kind: if got.is_some() {
                        MissKind::Wrong
                    } else {
                        MissKind::Missing
                    },
                });
            }
        }
        // `not`: values that would be wrong for a field a person could still map another way
        // (an imitation leather is no `Leather`; whether it is `Vinyl` is open). Such a field is
        // not expected, so it earns nothing when left out; sending a listed value is wrong.
        let empty_table = toml::Table::new();
        let not = vehicle
            .get("not")
            .map(|n| {
                n.as_table()
                    .expect("`not` maps field names to lists of values")
            })
            .unwrap_or(&empty_table);
        for (field, values) in not {
            let values = values
                .as_array()
                .expect("`not` maps field names to lists of values");
            let got = payload.and_then(|p| lookup(p, field));
            let Some(got) = got else { continue };
            for value in values {
                let bad = serde_json::to_value(value).expect("toml values convert");
                if same(&bad, got) {
                    score.misses.push(Miss {
                        layout: name.clone(),
                        vehicle: vin.clone(),
                        field: field.clone(),
                        expected: format!("anything but {bad}"),
                        got: got.to_string(),
                        kind: MissKind::Wrong,
                    });
                }
            }
        }
    }

    let rejects = expected
        .get("reject")
        .and_then(|v| v.as_array())
        .unwrap_or(&empty);
    for reject in rejects {
        let reject = reject.as_table().expect("[[reject]] is a table");
        let line = reject
            .get("line")
            .and_then(|l| l.as_integer())
            .unwrap_or_else(|| panic!("{name}: a reject without line")) as u64;
        let why = reject
            .get("why")
            .and_then(|w| w.as_str())
            .unwrap_or_default()
            .to_owned();
        score.rejections_required += 1;
        let rejected = outcome.rejected.iter().any(|r| r.0 == line);
        let accepted = outcome.accepted.iter().find(|a| a.0 == line);
        if outcome.error.is_none() && rejected && accepted.is_none() {
            score.rejections_found += 1;
        } else {
            score.missed_rejections.push(MissedRejection {
                layout: name.clone(),
                line,
                why,
                got: match (&outcome.error, accepted) {
                    (Some(e), _) => format!("the file refused as a whole ({e})"),
                    (None, Some((_, p))) => format!("accepted as {}", p),
                    (None, None) => "no record at that line".into(),
                },
            });
        }
    }
    score
}

/// Every enum field of an accepted payload against the spec's lists.
fn check_enums(layout: &str, vin: &str, payload: &Value, outside: &mut Vec<Outside>) {
    let Some(obj) = payload.as_object() else {
        return;
    };
    // The sandbox's lists, written from the spec apart from the client's enums.
    for (field, allowed) in lotsync::sandbox::ALLOWED_VALUES {
        if let Some(value) = obj.get(*field) {
            let ok = value.as_str().is_some_and(|s| allowed.contains(&s));
            if !ok {
                outside.push(Outside {
                    layout: layout.to_owned(),
                    vehicle: vin.to_owned(),
                    field: (*field).to_owned(),
                    value: value.to_string(),
                });
            }
        }
    }
}
