//! The mapper: one export [`Record`] becomes a [`VehiclePayload`] (spec §4.2) plus warnings, or
//! a rejection with its reasons.
//!
//! It normalizes rather than merely validates: whitespace, prices ("$23,995.00"), miles ("45,123
//! mi"), door and cylinder counts, engine and transmission text, and every enum through the
//! synonym tables to the spec's exact spelling. Columns are found by their header
//! (`vocabulary`) or, when none names a field, by their values (`infer`, only when nearly
//! all of them agree). It never guesses: an optional value it cannot map is left out with a
//! warning, and a record without a stock number or a valid VIN, or with a VIN already seen in
//! the file, is rejected (records of one VIN are merged: the first that lists it on the lot
//! is used, one that says sold only while none does). It owns no state beyond one file and
//! does no
//! I/O; the diff engine decides what the payloads mean for the service. An accepted record
//! is lent, not given: the mapper refills one payload per file, so mapping allocates nothing
//! per vehicle, and whoever keeps a payload clones it.

mod export;
mod infer;
mod parse;
mod profile;
mod synonyms;
mod target;
mod trace;
mod vin;
mod vocabulary;

pub use export::{Disagreement, ExportError, ExportFile};
pub use infer::KeptColumns;
use profile::Twin;
pub use profile::{Binding, Profile, ProfileError};
pub use target::Target;
pub use trace::{trace_record, FieldTrace, RecordTrace, Wanted};
pub use vin::{check_digit, check_vin, VinCheck};

use crate::api::{
    Amount, BodyType, Color, Price, PriceSet, SpecEnum, TransmissionSpeed, TransmissionType,
    VehiclePayload, VehicleType,
};
use crate::feed::{Record, Schema};
use crate::text::Escaped;
use foldhash::{HashMap, HashSet};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use synonyms::Found;
use vin::SeenVin;

/// One thing wrong with one field of one record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// The payload field (or `record` for the row as a whole).
    pub field: &'static str,
    pub reason: String,
    /// The source value, as read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl Problem {
    fn new(field: &'static str, reason: impl Into<String>, value: Option<&str>) -> Self {
        Problem {
            field,
            reason: reason.into(),
            value: value.map(str::to_owned),
        }
    }
}

/// `field: reason (value)`, on one line: the value (and a reason quoting the export) comes
/// from outside, so control characters are escaped.
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, Escaped(&self.reason))?;
        if let Some(v) = &self.value {
            write!(f, " ({})", Escaped(v))?;
        }
        Ok(())
    }
}

/// A record that maps to a payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    pub line: u64,
    pub payload: VehiclePayload,
    /// What the export itself says: sold (true), on the lot (false), or nothing.
    pub sold: Option<bool>,
    /// Optional values left out, and conversions worth knowing about.
    pub warnings: Vec<Problem>,
}

/// A record that cannot be sent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rejected {
    pub line: u64,
    /// The VIN when it could be read: a rejected record still shows the vehicle is on the lot.
    pub vin: Option<String>,
    /// The VIN as written (trimmed, upper-cased) when it failed the check: the diff looks for
    /// the known VIN one typo away from it.
    /// Boxed: rare, and it keeps a rejection small enough to return by value.
    pub vin_text: Option<Box<str>>,
    /// The stock number as written: the diff keeps the vehicle the state knows by it.
    pub stock: Option<String>,
    pub location_id: Option<u64>,
    /// What the record's status says (sold, on the lot, or nothing): a record that says sold
    /// is evidence of a sale of its VIN, and keeps nothing on the lot.
    pub sold: Option<bool>,
    pub problems: Vec<Problem>,
}

impl Accepted {
    /// An empty slot for the mapper to fill.
    fn blank() -> Accepted {
        Accepted {
            line: 0,
            payload: VehiclePayload::new(0, String::new(), String::new()),
            sold: None,
            warnings: Vec::new(),
        }
    }
}

/// What one record became. An accepted record is lent from the mapper, which refills the
/// same payload (and its strings) for the next record: reading a file costs no allocation per
/// vehicle. Clone what must outlive the next record, or take the payload out
/// ([`Mapper::take_payload`]).
#[derive(Debug, PartialEq)]
pub enum Mapped<'a> {
    Accepted(&'a Accepted),
    Rejected(Rejected),
}

impl Mapped<'_> {
    /// The accepted record copied out of the mapper, or the rejection.
    pub fn into_result(self) -> Result<Accepted, Rejected> {
        match self {
            Mapped::Accepted(a) => Ok(a.clone()),
            Mapped::Rejected(r) => Err(r),
        }
    }
}

/// Maps the records of one file.
#[derive(Debug)]
pub struct Mapper {
    profile: Profile,
    binding: Binding,
    location_id: u64,
    year_max: u16,
    /// Value maps with their keys normalized, per target.
    values: BTreeMap<Target, BTreeMap<String, String>>,
    /// Lot codes, upper-cased.
    locations: BTreeMap<String, u64>,
    seen: HashSet<SeenVin>,
    /// The VINs of `seen` whose record in use says sold (a later one may list it on the lot).
    sold_seen: HashSet<SeenVin>,
    memo: Memo,
    /// The last accepted record, whose buffers the next one reuses.
    slot: Accepted,
    /// The problems that reject a record, kept for their capacity.
    rejections: Vec<Problem>,
}

/// Entries at most in each memo table: beyond it (a file of endlessly varied free text) values
/// are still looked up, only not remembered.
const MEMO_LIMIT: usize = 4096;

/// What one file's distinct texts were found to mean. DMS values repeat (a few dozen colors,
/// bodies and transmissions over thousands of vehicles), so each is worked out once.
#[derive(Debug, Default)]
struct Memo {
    /// Per target (indexed by `Target as usize`): text → index into the enum's values.
    enums: Vec<HashMap<Box<str>, Found<u8>>>,
    transmissions: HashMap<Box<str>, parse::TransmissionText>,
    engines: HashMap<Box<str>, (Option<f64>, Option<u8>)>,
    statuses: HashMap<Box<str>, Option<bool>>,
}

fn remember<V>(table: &mut HashMap<Box<str>, V>, text: &str, value: V) {
    if table.len() < MEMO_LIMIT {
        table.insert(text.into(), value);
    }
}

impl Mapper {
    /// `location_id` is where vehicles go when the profile routes none by lot code.
    pub fn new(profile: Profile, location_id: u64) -> Mapper {
        let values = profile
            .values
            .iter()
            .map(|(t, map)| {
                let map = map
                    .iter()
                    .map(|(from, to)| (synonyms::key(from), to.clone()))
                    .collect();
                (*t, map)
            })
            .collect();
        let locations = profile
            .locations
            .iter()
            .map(|(code, id)| (code.trim().to_uppercase(), *id))
            .collect();
        Mapper {
            binding: Binding::default(),
            location_id,
            year_max: crate::clock::utc_year(std::time::SystemTime::now()) + 2,
            values,
            locations,
            seen: HashSet::default(),
            sold_seen: HashSet::default(),
            memo: Memo::default(),
            slot: Accepted::blank(),
            rejections: Vec::new(),
            profile,
        }
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The matching of profile fields to the file's columns or paths, as of the last record.
    pub fn binding(&self) -> &Binding {
        &self.binding
    }

    /// Brings the binding up to date with the schema (new XML paths appear as they are read).
    pub fn bind(&mut self, schema: &Schema) {
        if schema.len() != self.binding.seen_names {
            self.binding.extend(&self.profile, schema);
        }
    }

    /// Judges the columns no header named by the values of `sample` (records read ahead of
    /// mapping) and binds those recognized (`infer`); only when the profile lets auto match.
    pub fn recognize(&mut self, schema: &Schema, sample: &[&Record], kept: Option<&KeptColumns>) {
        self.bind(schema);
        if !self.profile.auto {
            return;
        }
        let recognition = infer::recognize(schema, sample, &self.binding, self.year_max, kept);
        self.binding.adopt(recognition);
    }

    /// The columns bound by their values, for the feed's next file ([`KeptColumns`]).
    pub fn kept_columns(&self, schema: &Schema) -> KeptColumns {
        KeptColumns {
            header: KeptColumns::header_of(schema),
            by_values: self
                .binding
                .by_values
                .iter()
                .map(|l| (l.target.name().to_owned(), schema.name(l.field).to_owned()))
                .collect(),
        }
    }

    /// The first pair of fields named alike ([`Binding::twins`]) whose values differ in
    /// `record`, compared as the mapper reads them (trimmed, inner blanks collapsed, blank as
    /// none). No file has them as a rule, so this costs one look at an empty list.
    pub fn disagreement(&self, record: &Record) -> Option<Twin> {
        let values = |id| {
            record
                .all(id)
                .map(parse::clean)
                .filter(|value| !value.is_empty())
        };
        self.binding
            .twins
            .iter()
            .copied()
            .find(|twin| !values(twin.used).eq(values(twin.other)))
    }

    /// The payload of the record just accepted, moved out; `spare` (a payload taken before)
    /// takes its place, and its strings' buffers are refilled by the next record. For a caller
    /// that hands payloads to another thread: no copy, and no allocation once spares come back.
    pub fn take_payload(&mut self, spare: VehiclePayload) -> VehiclePayload {
        std::mem::replace(&mut self.slot.payload, spare)
    }

    /// Maps one record.
    pub fn map(&mut self, schema: &Schema, record: &Record) -> Mapped<'_> {
        self.bind(schema);
        let mut out = std::mem::replace(&mut self.slot, Accepted::blank());
        out.warnings.clear();
        let rejections = std::mem::take(&mut self.rejections);
        let mut one = One {
            mapper: self,
            schema,
            record,
            out,
            rejections,
            vin_text: None,
        };
        let verdict = one.run();
        let One {
            out, rejections, ..
        } = one;
        self.slot = out;
        self.rejections = rejections;
        match verdict {
            Ok(()) => Mapped::Accepted(&self.slot),
            Err(rejected) => Mapped::Rejected(rejected),
        }
    }
}

/// The work on one record.
struct One<'a> {
    mapper: &'a mut Mapper,
    schema: &'a Schema,
    record: &'a Record,
    /// The payload being refilled (warnings included).
    out: Accepted,
    rejections: Vec<Problem>,
    /// The VIN as written, when it failed the check (rare: allocated only then).
    vin_text: Option<String>,
}

/// Puts a text in a reused string.
fn refill(slot: &mut String, text: &str) {
    slot.clear();
    slot.push_str(text);
}

/// Puts an optional text in a reused optional string, keeping its buffer when it has one.
fn refill_option(slot: &mut Option<String>, text: Option<Cow<'_, str>>) {
    match (slot.as_mut(), text) {
        (Some(s), Some(t)) => refill(s, &t),
        (None, Some(t)) => *slot = Some(t.into_owned()),
        (_, None) => *slot = None,
    }
}

impl<'a> One<'a> {
    /// The cleaned text of a target's field, after the profile's value map; None when blank.
    /// It borrows the record, not `self`, so warnings can be added while it is held.
    /// Inlined: called about 30 times a record, and returning the `Cow` through memory from
    /// an out-of-line call cost more than the work itself (perf: 17% of the ingest bench).
    #[inline(always)]
    fn text(&self, target: Target) -> Option<Cow<'a, str>> {
        let record: &'a Record = self.record;
        let raw = self.raw(target)?;
        let cleaned = if record.tidy {
            parse::clean_tidy(raw)
        } else {
            parse::clean(raw)
        };
        if cleaned.is_empty() {
            return None;
        }
        if !self.mapper.values.is_empty() {
            if let Some(map) = self.mapper.values.get(&target) {
                if let Some(to) = map.get(&synonyms::key(&cleaned)) {
                    return Some(Cow::Owned(to.clone()));
                }
            }
        }
        Some(cleaned)
    }

    /// The record's raw value of a target: its field's, or where the record has none, its
    /// alternate's ([`Binding::alternates`]).
    #[inline(always)]
    fn raw(&self, target: Target) -> Option<&'a str> {
        let record: &'a Record = self.record;
        let id = self.mapper.binding.field(target)?;
        match record.get(id) {
            Some(raw) => Some(raw),
            None => record.get(self.mapper.binding.alternate(target)?),
        }
    }

    /// `f` of the target's text, as [`One::text`] gives it; None when blank.
    ///
    /// The usual case, a tidy CSV row and no value map, hands `f` the trimmed value itself.
    /// A `Cow` returned per field went through the stack and stalled on reading back what
    /// had just been written (perf: 6% of the ingest bench); a `&str` argument stays in
    /// registers.
    #[inline(always)]
    fn with_text<R>(&mut self, target: Target, f: impl FnOnce(&mut Self, &str) -> R) -> Option<R> {
        let record: &'a Record = self.record;
        let raw = self.raw(target)?;
        if record.tidy && self.mapper.values.is_empty() {
            let text = parse::trim(raw);
            return if text.is_empty() {
                None
            } else {
                Some(f(self, text))
            };
        }
        let text = self.text(target)?;
        Some(f(self, &text))
    }

    /// The target's text into an optional string of the payload, reusing its buffer.
    #[inline(always)]
    fn fill(&mut self, target: Target, slot: fn(&mut VehiclePayload) -> &mut Option<String>) {
        let filled = self.with_text(target, |one, text| {
            refill_option(slot(&mut one.out.payload), Some(Cow::Borrowed(text)))
        });
        if filled.is_none() {
            *slot(&mut self.out.payload) = None;
        }
    }

    fn warn(&mut self, target: Target, reason: impl Into<String>, value: &str) {
        self.out
            .warnings
            .push(Problem::new(target.name(), reason, Some(value)));
    }

    #[inline(always)]
    fn string(&self, target: Target) -> Option<String> {
        self.text(target).map(Cow::into_owned)
    }

    /// An enum: the spec's exact spelling, else the synonym table (remembered per text).
    fn spec_value<T: SpecEnum>(
        &mut self,
        target: Target,
        synonyms: fn(&str) -> Found<T>,
    ) -> Option<T> {
        self.with_text(target, |one, text| {
            one.spec_value_of(target, text, synonyms)
        })?
    }

    /// [`Self::spec_value`] of a target that may have a second column
    /// ([`Binding::seconds`]): each is used where the other says nothing, and two that name
    /// different values leave the field out with a warning.
    fn spec_value_of_two<T: SpecEnum>(
        &mut self,
        target: Target,
        synonyms: fn(&str) -> Found<T>,
    ) -> Option<T> {
        let Some(second) = self.second_text(target) else {
            return self.spec_value(target, synonyms);
        };
        let first_text = self.text(target);
        let read = |text: &str| match text.parse::<T>() {
            Ok(v) => Some(v),
            Err(_) => match synonyms(text) {
                Found::One(v) => Some(v),
                _ => None,
            },
        };
        let first = first_text.as_deref().and_then(read);
        if first.is_some() && self.mapper.binding.generic.contains(&target) {
            return first; // the dealer's generic colour, over the paint name's words
        }
        let other = read(&second);
        match (first, other) {
            (Some(a), Some(b)) if a != b => {
                let both = format!("{} / {second}", first_text.unwrap_or_default());
                self.warn(
                    target,
                    "its two columns name different values; left out",
                    &both,
                );
                None
            }
            (Some(v), _) | (None, Some(v)) => Some(v),
            (None, None) => self.spec_value(target, synonyms),
        }
    }

    /// The text of a target's second column ([`Binding::seconds`]), if it has one and it is
    /// not empty.
    fn second_text(&self, target: Target) -> Option<String> {
        let id = *self.mapper.binding.seconds.get(&target)?;
        let cleaned = parse::clean(self.record.get(id)?).into_owned();
        (!cleaned.is_empty()).then_some(cleaned)
    }

    fn spec_value_of<T: SpecEnum>(
        &mut self,
        target: Target,
        text: &str,
        synonyms: fn(&str) -> Found<T>,
    ) -> Option<T> {
        let tables = &mut self.mapper.memo.enums;
        if tables.len() <= target as usize {
            tables.resize_with(target as usize + 1, HashMap::default);
        }
        let table = &mut tables[target as usize];
        let found = match table.get(text) {
            Some(found) => *found,
            None => {
                let found = match text.parse::<T>() {
                    Ok(v) => Found::One(v),
                    Err(_) => synonyms(text),
                };
                let found = found.map(|v| T::all().iter().position(|x| *x == v).unwrap_or(0) as u8);
                remember(table, text, found);
                found
            }
        };
        let what = match found {
            Found::One(i) => return T::all().get(usize::from(i)).copied(),
            Found::Ambiguous => "could mean more than one spec value",
            Found::None => "no spec value matches",
        };
        let reason = format!(
            "{what}, left out; a profile can map it under [values.{}]",
            target.name()
        );
        self.warn(target, reason, text);
        None
    }

    /// A parsed number; a value that does not parse is left out with a warning.
    fn number<T>(
        &mut self,
        target: Target,
        parse: impl Fn(&str) -> Result<Option<T>, String>,
    ) -> Option<T> {
        self.with_text(target, |one, text| match parse(text) {
            Ok(v) => v,
            Err(reason) => {
                one.warn(target, format!("{reason}; left out"), text);
                None
            }
        })?
    }

    /// Year, make and model from a combined cell ("2019 Land Rover Range Rover Sport"), for
    /// those no column of their own gave. The model is taken when it is one or two words, or
    /// when the trim column's value ends it and is cut off ("Range Rover Sport HSE" with trim
    /// "HSE"); longer, it may hold the trim, and is left out with a warning.
    fn year_make_model(&mut self) {
        let p = &self.out.payload;
        if p.year.is_some() && p.make.is_some() && p.model.is_some() {
            return;
        }
        let Some(text) = self.text(Target::YearMakeModel) else {
            return;
        };
        let Some((year, make, model)) = parse::year_make_model(&text, self.mapper.year_max) else {
            self.warn(
                Target::YearMakeModel,
                "no make lotsync knows in it; year, make and model left out",
                &text,
            );
            return;
        };
        let without_trim = self.out.payload.trim.as_deref().and_then(|trim| {
            model
                .strip_suffix(trim)
                .filter(|rest| rest.ends_with(' '))
                .map(|rest| rest.trim_end().to_owned())
        });
        let model =
            without_trim.or_else(|| (model.split_whitespace().count() <= 2).then_some(model));
        let p = &mut self.out.payload;
        if p.year.is_none() {
            p.year = year;
        }
        if p.make.is_none() {
            p.make = Some(make);
        }
        if p.model.is_none() {
            match model.filter(|m| !m.is_empty()) {
                Some(m) => p.model = Some(m),
                None => self.warn(
                    Target::YearMakeModel,
                    "cannot tell the model from the trim in it; model left out",
                    &text,
                ),
            }
        }
    }

    /// The odometer in miles. Its unit is the one written beside the number ("96540 KM"), in
    /// the unit column (Meta's `mileage.unit`) or in the column's heading ("Odometer (km)"),
    /// miles when none says; two that disagree, or a unit lotsync does not know (hours
    /// included), leave it out with a warning.
    fn miles(&mut self) -> Option<u64> {
        use parse::DistanceUnit;
        let (value, written) = self.number(Target::Miles, parse::distance)?;
        let text = self.text(Target::Miles).unwrap_or_default();
        let column = match self.with_text(Target::MileageUnit, |_, unit| {
            parse::distance_unit(unit).map_err(|reason| (reason, unit.to_owned()))
        }) {
            Some(Err((reason, unit))) => {
                self.warn(
                    Target::Miles,
                    format!("the unit column says {unit:?}: {reason}; left out"),
                    &text,
                );
                return None;
            }
            Some(Ok(unit)) => unit,
            None => None,
        };
        let heading = self.mapper.binding.miles_unit;
        let said: Vec<(DistanceUnit, &str)> = [
            (written, "the value"),
            (column, "the unit column"),
            (heading, "the column's heading"),
        ]
        .into_iter()
        .filter_map(|(unit, by)| unit.map(|u| (u, by)))
        .collect();
        if let Some(&(first, by)) = said.first() {
            if let Some(&(other, other_by)) = said.iter().find(|(u, _)| *u != first) {
                self.warn(
                    Target::Miles,
                    format!(
                        "{by} says {} but {other_by} says {}; left out",
                        first.name(),
                        other.name()
                    ),
                    &text,
                );
                return None;
            }
        }
        let unit = said.first().map_or(DistanceUnit::Miles, |&(u, _)| u);
        match parse::to_miles(value, unit) {
            Ok(miles) => {
                if unit == DistanceUnit::Kilometres {
                    self.warn(
                        Target::Miles,
                        format!("kilometres converted to {miles} miles"),
                        &text,
                    );
                }
                Some(miles)
            }
            Err(reason) => {
                self.warn(Target::Miles, format!("{reason}; left out"), &text);
                None
            }
        }
    }

    /// Fills `out` from the record, or says why the record cannot be sent.
    fn run(&mut self) -> Result<(), Rejected> {
        let line = self.record.line;
        self.rejections.clear();
        if !self.record.undecodable().is_empty() {
            self.reject_undecodable();
        }
        let vin = self.vin();
        let location_id = self.location();
        let stock = self.with_text(Target::Stock, |one, text| {
            refill(&mut one.out.payload.stock, text);
        });
        if stock.is_none() && !self.undecodable(Target::Stock) {
            self.rejections.push(Problem::new(
                "stock",
                "missing: every vehicle needs a stock number",
                None,
            ));
        }
        // Read before the record is judged: a record that says sold is evidence of a sale even
        // when it cannot be sent, and it decides which of a vehicle's records is used.
        let sold = self.status();
        if vin {
            self.merge_duplicate(line, sold);
        }
        let (Some(()), Some(location_id), true) = (stock, location_id, self.rejections.is_empty())
        else {
            return Err(Rejected {
                line,
                vin: vin.then(|| self.out.payload.vin.clone()),
                vin_text: self.vin_text.take().map(String::into_boxed_str),
                stock: stock.map(|()| self.out.payload.stock.clone()),
                location_id,
                sold,
                problems: self.rejections.drain(..).collect(),
            });
        };

        self.out.line = line;
        self.out.payload.location_id = location_id;
        let year_max = self.mapper.year_max;
        self.out.payload.year = self.number(Target::Year, |s| parse::year(s, year_max));
        self.fill(Target::Make, |p| &mut p.make);
        self.fill(Target::Model, |p| &mut p.model);
        self.fill(Target::Trim, |p| &mut p.trim);
        if self.out.payload.trim.is_none() {
            self.out.payload.trim = self.second_text(Target::Trim);
        }
        self.year_make_model();
        self.out.payload.vehicle_type = self.spec_value(Target::Type, synonyms::vehicle_type);
        // A "New" 1/0 flag says the type where no new/used column does (AutoRevo).
        if self.out.payload.vehicle_type.is_none() {
            self.out.payload.vehicle_type =
                self.number(Target::NewFlag, parse::boolean).map(|new| {
                    if new {
                        VehicleType::New
                    } else {
                        VehicleType::Used
                    }
                });
        }
        // A "Certified"/"CPO" flag makes a used vehicle (or one of no stated type) Certified;
        // a new vehicle stays new.
        let certified = |s: &str| match synonyms::vehicle_type(s) {
            Found::One(VehicleType::Certified) => Ok(Some(true)),
            _ => parse::boolean(s),
        };
        if self.number(Target::Certified, certified) == Some(true)
            && self.out.payload.vehicle_type != Some(VehicleType::New)
        {
            self.out.payload.vehicle_type = Some(VehicleType::Certified);
        }
        self.out.payload.miles = self.miles();
        self.out.payload.price = self.price();
        self.out.payload.exterior_color =
            self.spec_value_of_two::<Color>(Target::ExteriorColor, synonyms::color);
        self.out.payload.interior_color =
            self.spec_value_of_two::<Color>(Target::InteriorColor, synonyms::interior_color);
        self.out.payload.interior_type =
            self.spec_value(Target::InteriorType, synonyms::interior_type);
        self.out.payload.body_style = self.spec_value(Target::BodyStyle, synonyms::body_style);
        self.out.payload.body_type = self.spec_value(Target::BodyType, |s| {
            if synonyms::key(s) == "tbd" {
                Found::One(BodyType::Tbd)
            } else {
                Found::None
            }
        });
        self.out.payload.fuel = self.spec_value(Target::Fuel, synonyms::fuel);
        self.out.payload.title_status =
            self.spec_value(Target::TitleStatus, synonyms::title_status);
        self.out.payload.tonnage = self.spec_value(Target::Tonnage, synonyms::tonnage);
        self.out.payload.drive_type = self.spec_value(Target::DriveType, synonyms::drive_type);
        let (kind, speed) = self.transmission();
        let (displacement, cylinders) = self.engine();
        let p = &mut self.out.payload;
        p.transmission_type = kind;
        p.transmission_speed = speed;
        p.engine_displacement = displacement;
        p.engine_cylinders = cylinders;
        self.out.payload.doors = self.number(Target::Doors, |s| parse::count(s, 1..=6));
        self.out.payload.seats = self.number(Target::Seats, |s| parse::count(s, 1..=15));
        self.out.payload.lifted = self.number(Target::Lifted, parse::boolean);
        self.out.payload.lowered = self.number(Target::Lowered, parse::boolean);
        self.out.payload.active = self.number(Target::Active, parse::boolean);
        let mut options = std::mem::take(&mut self.out.payload.options);
        self.list(Target::Options, false, &mut options);
        self.out.payload.options = options;
        let mut images = std::mem::take(&mut self.out.payload.images);
        self.urls(Target::Images, &mut images);
        self.out.payload.images = images;
        let mut url = Vec::new();
        self.urls(Target::Url, &mut url);
        self.out.payload.url = url.into_iter().next();
        self.out.sold = sold;
        Ok(())
    }

    /// Records of one vehicle in one file are merged: the first that lists it on the lot is
    /// the one used, and one that says sold is used only while no other lists it on the lot
    /// (a sold record before the in-stock one is an old deal, not a sale). A later record is
    /// rejected when an earlier one is used, with the reason; one that replaces an earlier
    /// sold record says so in a warning.
    fn merge_duplicate(&mut self, line: u64, sold: Option<bool>) {
        let vin = &self.out.payload.vin;
        let Some(seen) = SeenVin::new(vin, line) else {
            return;
        };
        // Inserted first: a new VIN, the usual case, costs one probe of the set.
        if self.mapper.seen.insert(seen) {
            if sold == Some(true) {
                self.mapper.sold_seen.insert(seen);
            }
            return;
        }
        let first = self.mapper.seen.get(&seen).map_or(0, |s| s.line());
        let first_sold = self.mapper.sold_seen.contains(&seen);
        let reason = match (first_sold, sold == Some(true)) {
            (true, false) => {
                // This record lists it on the lot: it is the one used from now on.
                self.mapper.seen.replace(seen);
                self.mapper.sold_seen.remove(&seen);
                let vin = vin.clone();
                self.out.warnings.push(Problem::new(
                    "vin",
                    format!(
                        "line {first} says sold, this record lists it on the lot: this record \
                         is the one used (a car a record lists on the lot is not sold)"
                    ),
                    Some(&vin),
                ));
                return;
            }
            (false, true) => format!(
                "already in this file at line {first}, which lists it on the lot: that record \
                 is the one used, and this one's sold is no evidence of a sale"
            ),
            _ => format!("already in this file at line {first}; the first record is the one used"),
        };
        self.rejections.push(Problem::new("vin", reason, Some(vin)));
    }

    /// Checks the VIN into `out`; false (with the reason among the rejections) when it is
    /// missing or not a VIN.
    fn vin(&mut self) -> bool {
        let vin_check = if self.mapper.binding.serial_vin {
            VinCheck::Lenient
        } else {
            self.mapper.profile.vin_check
        };
        let checked = self.with_text(Target::Vin, |one, text| match check_vin(text, vin_check) {
            Ok(vin) => {
                refill(&mut one.out.payload.vin, &vin);
                true
            }
            Err(reason) => {
                one.rejections.push(Problem::new("vin", reason, Some(text)));
                one.vin_text = Some(text.trim().to_ascii_uppercase());
                false
            }
        });
        checked.unwrap_or_else(|| {
            if !self.undecodable(Target::Vin) {
                self.rejections.push(Problem::new(
                    "vin",
                    "missing: every vehicle needs a VIN",
                    None,
                ));
            }
            false
        })
    }

    /// A field whose bytes are not UTF-8, in a file that otherwise is, rejects its record:
    /// no guess at what the bytes meant is sent. The payload field it feeds is named, or the
    /// column when it feeds none.
    fn reject_undecodable(&mut self) {
        const REASON: &str = "bytes that are not UTF-8 in a file that is otherwise UTF-8";
        for (id, shown) in self.record.undecodable() {
            let target = Target::ALL
                .into_iter()
                .find(|&t| self.mapper.binding.field(t) == Some(*id));
            let problem = match target {
                Some(target) => Problem::new(target.name(), REASON, Some(shown)),
                None => Problem::new(
                    "record",
                    format!("column {:?}: {REASON}", self.schema.name(*id)),
                    Some(shown),
                ),
            };
            self.rejections.push(problem);
        }
    }

    /// The target's field was left out of the record for bytes that are not UTF-8.
    fn undecodable(&self, target: Target) -> bool {
        let undecodable = self.record.undecodable();
        !undecodable.is_empty()
            && self
                .mapper
                .binding
                .field(target)
                .is_some_and(|id| undecodable.iter().any(|(f, _)| *f == id))
    }

    /// The record's location: its lot code through `[locations]`, else the feed's location.
    fn location(&mut self) -> Option<u64> {
        if self.mapper.locations.is_empty() {
            return Some(self.mapper.location_id);
        }
        let Some(code) = self.string(Target::Location) else {
            return Some(self.mapper.location_id);
        };
        match self.mapper.locations.get(&code.to_uppercase()) {
            Some(&id) => Some(id),
            None => {
                let known: Vec<&str> = self.mapper.locations.keys().map(String::as_str).collect();
                self.rejections.push(Problem::new(
                    "location",
                    format!(
                        "unknown lot code (known: {}); add it under [locations] in the profile",
                        known.join(", ")
                    ),
                    Some(&code),
                ));
                None
            }
        }
    }

    fn price(&mut self) -> Option<Price> {
        let selling = self.number(Target::Price, parse::plausible_price);
        let internet = self.number(Target::InternetPrice, parse::plausible_price);
        let msrp = self.number(Target::Msrp, parse::plausible_price);
        if selling.is_none() && internet.is_none() && msrp.is_none() {
            return None;
        }
        Some(Price::Detailed(PriceSet {
            selling: selling.map(Amount),
            internet: internet.map(Amount),
            msrp: msrp.map(Amount),
        }))
    }

    /// Type and speed from the transmission text and the dedicated columns (which win).
    fn transmission(&mut self) -> (Option<TransmissionType>, Option<TransmissionSpeed>) {
        let mut kind = None;
        let mut speed = None;
        for target in [
            Target::Transmission,
            Target::TransmissionType,
            Target::TransmissionSpeed,
        ] {
            if let Some(read) =
                self.with_text(target, |one, text| one.transmission_of(target, text))
            {
                kind = read.kind.or(kind);
                speed = read.speed.or(speed);
            }
        }
        // A second transmission column ("TransmissionDescription" beside a "Transmission" of
        // Manual/Automatic/Unknown): each field from the column that says it; a field the two
        // disagree on is left out.
        if let Some(second) = self.second_text(Target::Transmission) {
            let other = parse::transmission(&second);
            fn merged<T: PartialEq>(a: Option<T>, b: Option<T>) -> Result<Option<T>, ()> {
                match (a, b) {
                    (Some(a), Some(b)) if a != b => Err(()),
                    (a, b) => Ok(a.or(b)),
                }
            }
            match (merged(kind, other.kind), merged(speed, other.speed)) {
                (Ok(k), Ok(s)) => (kind, speed) = (k, s),
                _ => {
                    let first = self.text(Target::Transmission).unwrap_or_default();
                    self.warn(
                        Target::Transmission,
                        "its two columns say different transmissions; left out",
                        &format!("{first} / {second}"),
                    );
                    (kind, speed) = (None, None);
                }
            }
        }
        (kind, speed)
    }

    fn transmission_of(&mut self, target: Target, text: &str) -> parse::TransmissionText {
        let bare_speed =
            target == Target::TransmissionSpeed && text.bytes().all(|b| b.is_ascii_digit());
        let read = if bare_speed {
            parse::transmission(&format!("{text} speed"))
        } else if let Some(read) = self.mapper.memo.transmissions.get(text) {
            *read
        } else {
            let read = parse::transmission(text);
            remember(&mut self.mapper.memo.transmissions, text, read);
            read
        };
        if let Some(gears) = read.unlisted_speed {
            self.warn(
                target,
                format!("{gears}-speed is not among the spec's 4 to 7 speeds; speed left out"),
                text,
            );
        } else if read.kind.is_none() && read.speed.is_none() {
            self.warn(
                target,
                "not a transmission lotsync can read; left out",
                text,
            );
        }
        read
    }

    /// Displacement and cylinders from the engine text and the dedicated columns (which win).
    fn engine(&mut self) -> (Option<f64>, Option<u8>) {
        let (mut displacement, mut cylinders) = self
            .with_text(Target::Engine, |one, text| {
                let engines = &mut one.mapper.memo.engines;
                match engines.get(text) {
                    Some(read) => *read,
                    None => {
                        let read = parse::engine(text);
                        remember(engines, text, read);
                        read
                    }
                }
            })
            .unwrap_or((None, None));
        if let Some(d) = self.number(Target::EngineDisplacement, parse::displacement) {
            displacement = Some(d);
        }
        if let Some(c) = self.number(Target::EngineCylinders, parse::cylinders) {
            cylinders = Some(c);
        }
        (displacement, cylinders)
    }

    /// The items of a list field, written over `items`; numbered columns that continue it
    /// ("Image Url 2") add theirs in order.
    fn list(&self, target: Target, split_on_blanks: bool, items: &mut Vec<String>) {
        let binding = &self.mapper.binding;
        match binding.field(target) {
            Some(id) => {
                let more = binding
                    .continued
                    .iter()
                    .filter(move |(t, _)| *t == target)
                    .flat_map(|&(_, more)| self.record.all(more));
                parse::list_into(
                    self.record.all(id).chain(more),
                    split_on_blanks,
                    self.record.tidy,
                    items,
                )
            }
            None => items.clear(),
        }
    }

    /// http(s) URLs, written over `urls`; anything else is left out with a warning.
    fn urls(&mut self, target: Target, urls: &mut Vec<String>) {
        self.list(target, true, urls);
        urls.retain(|item| {
            let web = parse::is_web_url(item);
            if !web {
                self.warn(target, "not an http(s) URL; left out", item);
            }
            web
        });
    }

    /// What the record says of its sale: its status column, else a date in its sale-date
    /// column (sold). A status that says on the lot is kept whatever the date says.
    fn status(&mut self) -> Option<bool> {
        self.status_column().or_else(|| self.sold_date())
    }

    fn sold_date(&mut self) -> Option<bool> {
        self.with_text(Target::SoldDate, |one, text| {
            if parse::calendar_date(text).is_some() {
                Some(true)
            } else {
                one.warn(
                    Target::SoldDate,
                    "not a date; the record is not taken as sold",
                    text,
                );
                None
            }
        })?
    }

    fn status_column(&mut self) -> Option<bool> {
        self.with_text(Target::Status, |one, text| {
            let sold = match one.mapper.memo.statuses.get(text) {
                Some(sold) => *sold,
                None => {
                    let sold = synonyms::sold(text);
                    remember(&mut one.mapper.memo.statuses, text, sold);
                    sold
                }
            };
            if sold.is_none() {
                one.warn(
                    Target::Status,
                    "neither sold nor in stock as far as lotsync can tell; ignored",
                    text,
                );
            }
            sold
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{BodyStyle, DriveType, Fuel, VehicleType};
    use crate::feed::{Item, ReadOptions};

    /// Maps every record of a CSV text with the auto profile at location 10.
    fn map_csv(csv: &str) -> Vec<Result<Accepted, Rejected>> {
        map_csv_with(csv, Profile::auto())
    }

    fn map_csv_with(csv: &str, profile: Profile) -> Vec<Result<Accepted, Rejected>> {
        map_bytes_with(csv.as_bytes(), profile)
    }

    fn map_csv_bytes(csv: &[u8]) -> Vec<Result<Accepted, Rejected>> {
        map_bytes_with(csv, Profile::auto())
    }

    #[test]
    fn a_payload_taken_out_and_replaced_by_a_used_one_changes_nothing_that_follows() {
        // A full record, a sparse one, a different full one, a sparse one again: a spare that
        // still holds another vehicle's values must come out as if it were new.
        let csv =
            "VIN,Stock,Year,Make,Model,Trim,Miles,Price,Color,Body,Drive,Fuel,Photos,Options\n\
                   1HGCM82633A004352,A1,2019,Honda,Accord,EX,12000,21000,Red,Sedan,FWD,Gasoline,\
                   https://x.example/1.jpg|https://x.example/2.jpg,Sunroof;Navigation\n\
                   1FTFW1ET9DFC10312,B2,,,,,,,,,,,,\n\
                   5YJ3E1EA2KF317000,C3,2021,Tesla,Model 3,Long Range,800,45000,White,Sedan,AWD,\
                   Electric,https://x.example/3.jpg,Autopilot\n\
                   WBA3A5C53CF256985,D4,2012,,,,,,,,,,,\n";
        let plain = map_csv(csv);
        let mut reader = crate::feed::from_bytes(csv.as_bytes(), &ReadOptions::default()).unwrap();
        let mut mapper = Mapper::new(Profile::auto(), 10);
        let mut record = Record::default();
        // The spare first handed in is the fullest payload there is.
        let mut spare = plain[2].clone().unwrap().payload;
        let mut taken = Vec::new();
        while let Item::Record = reader.next(&mut record).unwrap() {
            let accepted = mapper.map(reader.schema(), &record).into_result().unwrap();
            let payload = mapper.take_payload(spare);
            assert_eq!(payload, accepted.payload);
            taken.push(Ok::<_, Rejected>(Accepted {
                payload: payload.clone(),
                ..accepted
            }));
            spare = payload;
        }
        assert_eq!(taken.len(), 4);
        assert_eq!(taken, plain);
    }

    fn map_bytes_with(csv: &[u8], profile: Profile) -> Vec<Result<Accepted, Rejected>> {
        let mut reader = crate::feed::from_bytes(csv, &ReadOptions::default()).unwrap();
        let mut mapper = Mapper::new(profile, 10);
        let mut record = Record::default();
        let mut out = Vec::new();
        while let Item::Record = reader.next(&mut record).unwrap() {
            out.push(mapper.map(reader.schema(), &record).into_result());
        }
        out
    }

    fn accepted(m: &Result<Accepted, Rejected>) -> &Accepted {
        match m {
            Ok(a) => a,
            Err(r) => panic!("rejected: {r:?}"),
        }
    }

    fn rejected(m: &Result<Accepted, Rejected>) -> &Rejected {
        match m {
            Err(r) => r,
            Ok(a) => panic!("accepted: {a:?}"),
        }
    }

    /// A STAR 5 vehicle inventory document read with no profile: the VIN wherever the
    /// vehicle holds it, the stock number on the line item or the vehicle, the model's
    /// description over its code, prices by their code (a hidden one and a cost never), the
    /// colours by their item code, the mileage's unit from its attribute.
    #[test]
    fn a_star_vehicle_inventory_reads_by_meaning() {
        let out = map_bytes_with(STAR.as_bytes(), Profile::auto());
        assert_eq!(out.len(), 2);
        let new = &accepted(&out[0]).payload;
        assert_eq!(new.vin, "1GCUDDED1SZ000001");
        assert_eq!(new.stock, "N5012");
        assert_eq!(new.make.as_deref(), Some("Chevrolet"));
        assert_eq!(
            new.model.as_deref(),
            Some("Silverado 1500"),
            "not the code CK10543"
        );
        assert_eq!(new.trim.as_deref(), Some("LT"));
        assert_eq!(new.vehicle_type, Some(VehicleType::New));
        let price = serde_json::to_value(&new.price).unwrap();
        assert_eq!(
            price,
            serde_json::json!({"selling": 49880, "internet": 48880, "msrp": 52100}),
            "the hidden 1.00 and the invoice's 47950 are never a price"
        );
        assert_eq!(new.miles, Some(12));
        assert_eq!(new.exterior_color, Some(Color::White));
        assert_eq!(new.interior_color, Some(Color::Black));
        assert_eq!(new.body_style, Some(BodyStyle::Truck));
        assert_eq!(new.drive_type, Some(DriveType::FourByFour));
        assert_eq!(new.seats, Some(5));
        assert_eq!(accepted(&out[0]).sold, Some(false));
        let used = accepted(&out[1]);
        assert_eq!(
            used.payload.vin, "2T3RWRFV4MW000002",
            "from its identification group"
        );
        assert_eq!(used.payload.stock, "U7788", "from the vehicle");
        assert_eq!(used.payload.vehicle_type, Some(VehicleType::Certified));
        assert_eq!(used.payload.miles, Some(29956), "48210 km");
        assert_eq!(used.sold, Some(true));
    }

    /// The kinds of miss a trailer, RV and powersports dealer's export showed: a sale date
    /// that says sold (where no status says otherwise), category words as body styles (a
    /// "Vehicle Type" column of them too), two fuels, a standard seating column, and a
    /// generic colour preferred to a paint name where it is filled. (A "Vehicle Type" column
    /// of body words is `export`'s test: it is taken by its values.)
    #[test]
    fn sale_dates_category_words_fuels_seating_and_generic_colours() {
        let out = map_csv(
            "VIN,Stock,Year,Make,Model,Body Style,Standard Seating,Fuel,Exterior Color,Generic Color,Status,Sold Date\n\
             1HGCM82633A004352,T1,2023,Haulmark,Transport,Cargo Trailer,,,Underground,Gray,,\n\
             1HGCM82653A004353,T2,2021,Polaris,RZR,Side-by-Side,2,E85 / Unleaded,Sea Glass Pearl,Green,,11/20/2026\n\
             1M8GDM9AXKP042788,T3,2020,Toyota,Prius,Car,5,Electric / Unleaded,Summit White,,In Stock,2026-11-20\n\
             1FTFW1ET9DFC10312,T4,2022,Thor,Four Winds,Class C,,,,,,00/00/0000\n",
        );
        let [trailer, sxs, car, rv] = &out[..] else {
            panic!("four records: {out:?}");
        };
        let (trailer, sxs, car, rv) = (
            accepted(trailer),
            accepted(sxs),
            accepted(car),
            accepted(rv),
        );
        assert_eq!(trailer.payload.body_style, Some(BodyStyle::Trailer));
        assert_eq!(trailer.payload.exterior_color, Some(Color::Gray));
        assert_eq!(trailer.sold, None);
        assert_eq!(sxs.payload.body_style, Some(BodyStyle::AtvQuad));
        assert_eq!(sxs.payload.fuel, Some(Fuel::FfvEthanol));
        assert_eq!(sxs.payload.seats, Some(2));
        assert_eq!(
            sxs.payload.exterior_color,
            Some(Color::Green),
            "the generic colour"
        );
        assert_eq!(sxs.sold, Some(true), "a sale date and no status");
        assert_eq!(car.payload.body_style, None, "a car is several body styles");
        assert_eq!(car.payload.fuel, Some(Fuel::HybridElectric));
        assert_eq!(
            car.payload.exterior_color,
            Some(Color::White),
            "no generic: the paint"
        );
        assert_eq!(
            car.sold,
            Some(false),
            "the status says on the lot, whatever the date"
        );
        assert_eq!(rv.payload.body_style, Some(BodyStyle::Rv));
        assert_eq!(rv.sold, None, "a placeholder is no date");
    }

    /// Price codes lotsync does not know are read as nothing: STAR's "List" (its advertised
    /// price, no "List Price"), and the costs.
    #[test]
    fn a_star_price_code_lotsync_does_not_know_is_no_price() {
        let line = |vin: &str, stock: &str| {
            format!(
                "<VehicleInventoryVehicleLineItem><Vehicle><VehicleID>{vin}</VehicleID></Vehicle>\
                 <VehicleStockString>{stock}</VehicleStockString>\
                 <Pricing><Price><PriceCode>List</PriceCode><ChargeAmount>30000</ChargeAmount></Price></Pricing>\
                 <Pricing><Price><PriceCode>Cost</PriceCode><ChargeAmount>25000</ChargeAmount></Price>\
                 <Price><PriceCode>HoldBackAmount</PriceCode><ChargeAmount>900</ChargeAmount></Price></Pricing>\
                 </VehicleInventoryVehicleLineItem>"
            )
        };
        let xml = format!(
            "<ShowVehicleInventory><ShowVehicleInventoryDataArea><VehicleInventory>\
             <VehicleInventoryInvoice>{}{}</VehicleInventoryInvoice></VehicleInventory>\
             </ShowVehicleInventoryDataArea></ShowVehicleInventory>",
            line("1HGCM82633A004352", "A1"),
            line("1M8GDM9AXKP042788", "A2")
        );
        for mapped in map_bytes_with(xml.as_bytes(), Profile::auto()) {
            let payload = &accepted(&mapped).payload;
            assert_eq!(
                serde_json::to_value(&payload.price).unwrap(),
                serde_json::Value::Null
            );
        }
    }

    const STAR: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<ShowVehicleInventory xmlns="http://www.starstandard.org/STAR/5" xmlns:oagis="http://www.openapplications.org/oagis/9" releaseID="5.11.4" languageCode="en-US">
  <ApplicationArea>
    <Sender><CreatorNameCode>ACME-DMS</CreatorNameCode><SenderNameCode>AD</SenderNameCode><DealerNumberID>D1234</DealerNumberID></Sender>
    <CreationDateTime>2026-11-27T06:00:00Z</CreationDateTime>
    <BODID>6f1c0d2e-0000-4000-8000-000000000001</BODID>
    <Destination><DestinationNameCode>LOTSYNC</DestinationNameCode></Destination>
  </ApplicationArea>
  <ShowVehicleInventoryDataArea>
    <Show/>
    <VehicleInventory>
      <VehicleInventoryHeader><DocumentIdentificationGroup><DocumentIdentification><DocumentID>INV-1</DocumentID></DocumentIdentification></DocumentIdentificationGroup></VehicleInventoryHeader>
      <VehicleInventoryInvoice>
        <VehicleInventoryVehicleLineItem>
          <Vehicle>
            <Model>CK10543</Model><ModelYear>2025</ModelYear><ModelDescription>Silverado 1500</ModelDescription><MakeString>Chevrolet</MakeString>
            <SaleClassCode>New</SaleClassCode><DoorsQuantityNumeric>4</DoorsQuantityNumeric><BodyStyle>Crew Cab Pickup</BodyStyle>
            <TransmissionGroup><TransmissionTypeName>Automatic</TransmissionTypeName></TransmissionGroup>
            <ColorGroup><ColorItemCode>Exterior</ColorItemCode><ColorName>Summit White</ColorName></ColorGroup>
            <ColorGroup><ColorItemCode>Interior</ColorItemCode><ManufacturerColorCode>H0U</ManufacturerColorCode><ColorName>Jet Black</ColorName></ColorGroup>
            <DriveTrain>4WD</DriveTrain><VehiclePassengersNumeric>5</VehiclePassengersNumeric>
            <Engine><GeneralEngineDescription>5.3L V8</GeneralEngineDescription></Engine>
            <VehicleID>1GCUDDED1SZ000001</VehicleID><ManufacturerName>General Motors</ManufacturerName><SeriesName>LT</SeriesName>
          </Vehicle>
          <DeliveryDistanceMeasure unitCode="mile">12</DeliveryDistanceMeasure>
          <VehicleStockString>N5012</VehicleStockString>
          <Pricing><Price><PriceCode>Base MSRP</PriceCode><ChargeAmount currencyID="USD">52100.00</ChargeAmount></Price></Pricing>
          <Pricing><Price><PriceCode>Vehicle Advertised Price</PriceCode><ChargeAmount currencyID="USD">49880.00</ChargeAmount></Price></Pricing>
          <Pricing><Price><PriceCode>InternetPrice</PriceCode><ChargeAmount currencyID="USD">48880.00</ChargeAmount></Price></Pricing>
          <Pricing><PriceHideIndicator>true</PriceHideIndicator><Price><PriceCode>Vehicle Advertised Price</PriceCode><ChargeAmount currencyID="USD">1.00</ChargeAmount></Price></Pricing>
          <Pricing><Price><PriceCode>Total Invoice</PriceCode><ChargeAmount currencyID="USD">47950.00</ChargeAmount></Price></Pricing>
          <VehicleStatusCode>In Stock</VehicleStatusCode>
          <Option><OptionID>Z71</OptionID><OptionName>Off-Road Package</OptionName></Option>
          <ImageAttachmentExtended><URI>https://img.example/N5012-1.jpg</URI><ImagePerspectiveCode>Exterior</ImagePerspectiveCode></ImageAttachmentExtended>
        </VehicleInventoryVehicleLineItem>
        <VehicleInventoryVehicleLineItem>
          <Vehicle>
            <ModelYear>2021</ModelYear><ModelDescription>RAV4</ModelDescription><MakeString>Toyota</MakeString>
            <SaleClassCode>Certified Pre-Owned</SaleClassCode>
            <VehicleIdentificationGroup><VehicleID>2T3RWRFV4MW000002</VehicleID></VehicleIdentificationGroup>
            <VehicleStockString>U7788</VehicleStockString>
          </Vehicle>
          <DeliveryDistanceMeasure unitCode="kilometer">48210</DeliveryDistanceMeasure>
          <Pricing><Price><PriceCode>InternetPrice</PriceCode><ChargeAmount currencyID="USD">33995.00</ChargeAmount></Price></Pricing>
          <VehicleStatusCode>Sold</VehicleStatusCode>
        </VehicleInventoryVehicleLineItem>
      </VehicleInventoryInvoice>
    </VehicleInventory>
  </ShowVehicleInventoryDataArea>
</ShowVehicleInventory>"#;

    #[test]
    fn each_record_refills_the_payload_with_nothing_left_from_the_last() {
        // A full row, a rejected row, then a row with only the key fields: the reused payload
        // must hold exactly what a fresh one would.
        let mut profile = Profile::auto();
        profile.fields.insert(Target::BodyType, "Body Type".into());
        profile.fields.insert(Target::Active, "Active".into());
        let out = map_csv_with(
            "VIN,Stock #,Year,Make,Model,Trim,New/Used,Miles,Price,Internet Price,MSRP,Ext. Color,Int. Color,Interior,Body,Body Type,Drive,Transmission,Engine,Fuel,Title,Tonnage,Doors,Seats,Lifted,Lowered,Active,Photo URLs,Options,URL,Status\n\
             1hgcm82633a004352,A1,2019,Honda,Accord,EX-L,Used,\"45,123\",\"$23,995\",23495,25000,Agate Black Metallic,Ebony,Leather,4dr Car,TBD,FWD,6-Speed Automatic,2.4L I4,Gasoline,Clean,1/2 Ton,4,5,yes,no,yes,https://i/1.jpg|https://i/2.jpg,\"Sunroof, Tow\",https://d/a1,Sold\n\
             1HGCM82633A004353,A2,2019,Honda,Accord,,,,,,,,,,,,,,,,,,,,,,,,,,\n\
             1M8GDM9AXKP042788,A3,,,,,,,,,,,,,,,,,,,,,,,,,,,,,\n",
            profile,
        );
        let full = &accepted(&out[0]).payload;
        let filled = serde_json::to_value(full).unwrap();
        let fields = filled.as_object().unwrap().len();
        assert_eq!(
            fields, 31,
            "every payload field is set by the first row: {filled}"
        );
        assert!(out[1].is_err());
        let bare = accepted(&out[2]);
        assert_eq!(
            bare.payload,
            VehiclePayload::new(10, "A3", "1M8GDM9AXKP042788")
        );
        assert_eq!(bare.line, 4);
        assert_eq!(bare.sold, None);
        assert!(bare.warnings.is_empty());
    }

    #[test]
    fn numbered_photo_columns_make_one_list_and_a_cpo_flag_certifies_used_vehicles() {
        let out = map_csv(
            "VIN,Stock,N/U,CPO,Image Url 1,Image Url 2,Image Url 3\n\
             1HGCM82633A004352,A1,U,Y,https://i.example/1.jpg,,https://i.example/3.jpg\n\
             1M8GDM9AXKP042788,A2,N,Y,https://i.example/4.jpg,https://i.example/5.jpg,\n\
             5YJ3E1EA2KF317000,A3,Used,N,,,\n",
        );
        let a = accepted(&out[0]);
        assert_eq!(
            a.payload.images,
            ["https://i.example/1.jpg", "https://i.example/3.jpg"]
        );
        assert_eq!(a.payload.vehicle_type, Some(VehicleType::Certified));
        let b = accepted(&out[1]);
        assert_eq!(b.payload.images.len(), 2);
        assert_eq!(
            b.payload.vehicle_type,
            Some(VehicleType::New),
            "a new car stays new"
        );
        let c = accepted(&out[2]);
        assert!(c.payload.images.is_empty());
        assert_eq!(c.payload.vehicle_type, Some(VehicleType::Used));
    }

    #[test]
    fn a_messy_row_becomes_a_clean_payload() {
        let out = map_csv(
            "VIN,Stock #,Year,Make,Model,Trim,New/Used,Miles,Price,Internet Price,Ext. Color,Body,Drive,Transmission,Engine,Fuel,Doors,Photo URLs,Options,Status\n\
             1hgcm82633a004352, A1 ,2019,Honda,  Accord ,EX-L  Sport,Pre-Owned,\"45,123 mi\",\"$23,995.00\",Call,Agate Black Metallic,4dr Car,Front Wheel Drive,6-Speed Automatic,2.4L I4,Regular Unleaded,4dr,https://i/1.jpg|https://i/2.jpg|ftp://x/y,\"Sunroof, Heated Seats|Sunroof\",Sold\n",
        );
        let a = accepted(&out[0]);
        let p = &a.payload;
        assert_eq!(p.vin, "1HGCM82633A004352");
        assert_eq!(p.stock, "A1");
        assert_eq!(p.location_id, 10);
        assert_eq!(p.year, Some(2019));
        assert_eq!(p.model.as_deref(), Some("Accord"));
        assert_eq!(p.trim.as_deref(), Some("EX-L Sport"));
        assert_eq!(p.vehicle_type, Some(VehicleType::Used));
        assert_eq!(p.miles, Some(45123));
        assert_eq!(
            p.price,
            Some(Price::Detailed(PriceSet {
                selling: Some(Amount(23995.0)),
                internet: None,
                msrp: None
            }))
        );
        assert_eq!(p.exterior_color, Some(Color::Black));
        assert_eq!(p.body_style, Some(BodyStyle::Sedan));
        assert_eq!(p.drive_type, Some(DriveType::Fwd));
        assert_eq!(p.transmission_type, Some(TransmissionType::Automatic));
        assert_eq!(p.transmission_speed, Some(TransmissionSpeed::Six));
        assert_eq!(p.engine_displacement, Some(2.4));
        assert_eq!(p.engine_cylinders, Some(4));
        assert_eq!(p.fuel, Some(Fuel::Gas));
        assert_eq!(p.doors, Some(4));
        assert_eq!(p.images, vec!["https://i/1.jpg", "https://i/2.jpg"]);
        assert_eq!(p.options, vec!["Sunroof", "Heated Seats"]);
        assert_eq!(a.sold, Some(true));
        assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
        assert_eq!(
            a.warnings[0].to_string(),
            "images: not an http(s) URL; left out (ftp://x/y)"
        );
    }

    #[test]
    fn missing_stock_bad_vin_and_duplicates_are_rejected() {
        let out = map_csv(
            "VIN,Stock\n1HGCM82633A004352,A1\n1HGCM82633A004353,A2\n,A3\n1M8GDM9AXKP042788,\n1hgcm82633a004352,A5\n",
        );
        assert!(out[0].is_ok());
        let r = rejected(&out[1]);
        assert!(
            r.problems[0].reason.contains("check digit"),
            "{:?}",
            r.problems
        );
        assert_eq!(r.vin, None);
        // What it says of its vehicle is kept for the diff (a typo protects the car).
        assert_eq!(r.vin_text.as_deref(), Some("1HGCM82633A004353"));
        assert_eq!(r.stock.as_deref(), Some("A2"));
        assert_eq!(rejected(&out[2]).stock.as_deref(), Some("A3"));
        assert_eq!(rejected(&out[2]).vin_text, None);
        assert_eq!(
            rejected(&out[2]).problems[0].to_string(),
            "vin: missing: every vehicle needs a VIN"
        );
        let r = rejected(&out[3]);
        assert_eq!(
            r.vin.as_deref(),
            Some("1M8GDM9AXKP042788"),
            "the VIN is still known"
        );
        assert_eq!(r.problems[0].field, "stock");
        assert_eq!(
            r.stock, None,
            "no stock number, none remembered from the last record"
        );
        let r = rejected(&out[4]);
        assert_eq!(
            r.problems[0].to_string(),
            "vin: already in this file at line 2; the first record is the one used (1HGCM82633A004352)"
        );
    }

    /// Records of one VIN: the first that lists it on the lot is used, one that says sold
    /// only while none does; a record that says sold is read as such even when rejected.
    #[test]
    fn records_of_one_vin_are_merged_in_favour_of_the_one_on_the_lot() {
        let out = map_csv(
            "VIN,Stock,Status\n1HGCM82633A004352,OLD1,Sold\n1HGCM82633A004352,A1,In Stock\n\
             1HGCM82633A004352,A2,Sold\n1M8GDM9AXKP042788,,Sold\n1M8GDM9AXKP042788,B1,Sold\n",
        );
        assert_eq!(accepted(&out[0]).sold, Some(true));
        let a = accepted(&out[1]);
        assert_eq!((a.payload.stock.as_str(), a.sold), ("A1", Some(false)));
        assert_eq!(
            a.warnings[0].to_string(),
            "vin: line 2 says sold, this record lists it on the lot: this record is the one used \
             (a car a record lists on the lot is not sold) (1HGCM82633A004352)"
        );
        let r = rejected(&out[2]);
        assert_eq!(r.sold, Some(true));
        assert!(
            r.problems[0]
                .reason
                .contains("line 3, which lists it on the lot"),
            "{:?}",
            r.problems
        );
        // Sold without a stock number: rejected, and still read as sold.
        let r = rejected(&out[3]);
        assert_eq!(
            (r.vin.as_deref(), r.sold),
            (Some("1M8GDM9AXKP042788"), Some(true))
        );
        assert!(
            rejected(&out[4]).problems[0]
                .reason
                .contains("the first record is the one used"),
            "{:?}",
            out[4]
        );
    }

    #[test]
    fn unmappable_optional_values_are_left_out_with_warnings() {
        let out = map_csv(
            "VIN,Stock,Ext Color,Drive,Year,Transmission,Fuel\n1HGCM82633A004352,A1,Hydro Shimmer,2WD,1850,10-Speed Automatic,Steam\n",
        );
        let a = accepted(&out[0]);
        assert_eq!(a.payload.exterior_color, None);
        assert_eq!(a.payload.drive_type, None);
        assert_eq!(a.payload.year, None);
        assert_eq!(
            a.payload.transmission_type,
            Some(TransmissionType::Automatic)
        );
        assert_eq!(a.payload.transmission_speed, None);
        let fields: Vec<&str> = a.warnings.iter().map(|w| w.field).collect();
        assert_eq!(
            fields,
            [
                "year",
                "exterior_color",
                "fuel",
                "drive_type",
                "transmission"
            ]
        );
    }

    #[test]
    fn lot_codes_route_records_and_unknown_codes_are_rejected() {
        let mut profile = Profile::auto();
        profile.locations.insert("main".into(), 10);
        profile.locations.insert("EAST".into(), 11);
        let out = map_csv_with(
            "VIN,Stock,Lot\n1HGCM82633A004352,A1,MAIN\n1M8GDM9AXKP042788,A2,east\n5YJ3E1EA2KF317000,A3,NORTH\n11111111111111111,A4,\n",
            profile,
        );
        assert_eq!(accepted(&out[0]).payload.location_id, 10);
        assert_eq!(accepted(&out[1]).payload.location_id, 11);
        let r = rejected(&out[2]);
        assert_eq!(r.vin.as_deref(), Some("5YJ3E1EA2KF317000"));
        assert!(r.problems[0]
            .reason
            .contains("unknown lot code (known: EAST, MAIN)"));
        assert_eq!(
            accepted(&out[3]).payload.location_id,
            10,
            "blank code: the feed's"
        );
    }

    #[test]
    fn value_maps_come_before_synonyms() {
        let mut profile = Profile::auto();
        profile
            .values
            .entry(Target::DriveType)
            .or_default()
            .insert("2wd".into(), "RWD".into());
        profile
            .values
            .entry(Target::ExteriorColor)
            .or_default()
            .insert("Hydro  Shimmer".into(), "Blue".into());
        let out = map_csv_with(
            "VIN,Stock,Drive,Color\n1HGCM82633A004352,A1,2WD,hydro shimmer\n",
            profile,
        );
        let a = accepted(&out[0]);
        assert_eq!(a.payload.drive_type, Some(DriveType::Rwd));
        assert_eq!(a.payload.exterior_color, Some(Color::Blue));
        assert!(a.warnings.is_empty());
    }

    #[test]
    fn a_field_that_is_not_utf8_in_a_utf8_file_rejects_its_record() {
        let out = map_csv_bytes(
            b"VIN,Stock,Make,Notes\n\
              1HGCM82633A004352,\xff1,Citro\xc3\xabn,x\n\
              1M8GDM9AXKP042788,A2,Tesla,\x93hi\x94\n\
              5YJ3E1EA2KF317000,A3,Citro\xc3\xabn,ok\n",
        );
        let r = rejected(&out[0]);
        assert_eq!(
            r.vin.as_deref(),
            Some("1HGCM82633A004352"),
            "still on the lot"
        );
        let shown: Vec<String> = r.problems.iter().map(Problem::to_string).collect();
        assert_eq!(
            shown,
            ["stock: bytes that are not UTF-8 in a file that is otherwise UTF-8 (\\xff1)"],
            "not also \"missing\""
        );
        assert_eq!(
            rejected(&out[1]).problems[0].to_string(),
            "record: column \"Notes\": bytes that are not UTF-8 in a file that is otherwise \
             UTF-8 (\\x93hi\\x94)"
        );
        assert_eq!(accepted(&out[2]).payload.make.as_deref(), Some("Citroën"));
    }

    #[test]
    fn implausible_prices_are_left_out_with_a_warning_and_zero_is_no_price() {
        let out = map_csv(
            "VIN,Stock,Price,Internet Price,MSRP\n\
             1HGCM82633A004352,A1,0.01,1,\"10,000,000.01\"\n\
             1M8GDM9AXKP042788,A2,100,\"$10,000,000\",0\n\
             5YJ3E1EA2KF317000,A3,99.99,$0.00,Call\n",
        );
        let a = accepted(&out[0]);
        assert_eq!(a.payload.price, None);
        let shown: Vec<String> = a.warnings.iter().map(Problem::to_string).collect();
        assert_eq!(
            shown,
            [
                "price: not a plausible price: below 100 (plausible: 100 to 10,000,000); left out (0.01)",
                "internet_price: not a plausible price: below 100 (plausible: 100 to 10,000,000); left out (1)",
                "msrp: not a plausible price: above 10,000,000 (plausible: 100 to 10,000,000); left out (10,000,000.01)",
            ]
        );
        // The bounds themselves are plausible; 0 is "no price", as "Call" is, and said nothing.
        let b = accepted(&out[1]);
        assert_eq!(
            b.payload.price,
            Some(Price::Detailed(PriceSet {
                selling: Some(Amount(100.0)),
                internet: Some(Amount(10_000_000.0)),
                msrp: None
            }))
        );
        assert!(b.warnings.is_empty(), "{:?}", b.warnings);
        let c = accepted(&out[2]);
        assert_eq!(c.payload.price, None);
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert_eq!(c.warnings[0].field, "price");
    }

    /// The odometer's unit from beside the value, its own column (Meta's
    /// `mileage.unit`) or the heading; kilometres become miles, hours and unknown units are
    /// never miles, and two units that disagree leave the value out.
    #[test]
    fn the_odometer_unit_is_honoured_wherever_it_is_written() {
        let meta = map_csv(
            "vin,vehicle_id,mileage.value,mileage.unit\n\
             1HGCM82633A004352,A1,142651,KM\n\
             1M8GDM9AXKP042788,A2,142651,MI\n\
             5YJ3E1EA2KF317000,A3,1200,hours\n\
             1FTFW1E590MFA1234,A4,45000 mi,KM\n\
             2T1BURHE00JC04321,A5,45000,\n",
        );
        let miles = |o: &Result<Accepted, Rejected>| accepted(o).payload.miles;
        assert_eq!(miles(&meta[0]), Some(88639));
        assert_eq!(miles(&meta[1]), Some(142651));
        assert_eq!(miles(&meta[2]), None);
        let why = &accepted(&meta[2]).warnings[0];
        assert!(why.reason.contains("hours"), "{why}");
        assert_eq!(miles(&meta[3]), None);
        let why = &accepted(&meta[3]).warnings[0];
        assert!(
            why.reason.contains("disagree") || why.reason.contains("but"),
            "{why}"
        );
        assert_eq!(miles(&meta[4]), Some(45000));

        let headed = map_csv(
            "VIN,Stock,Odometer (km)\n\
             1HGCM82633A004352,A1,96540\n\
             1M8GDM9AXKP042788,A2,96 540 KM\n\
             5YJ3E1EA2KF317000,A3,60000 mi\n",
        );
        assert_eq!(miles(&headed[0]), Some(59987));
        assert_eq!(miles(&headed[1]), Some(59987));
        assert_eq!(miles(&headed[2]), None);
        let kilometres = map_csv("VIN,Stock,Kilometres\n1HGCM82633A004352,A1,10000\n");
        assert_eq!(miles(&kilometres[0]), Some(6214));
    }

    /// AutoRevo's Standard CSV (feeds.autorevo.com): `New` and `Certified` 1/0
    /// flags give the type; `Transmission` (Manual, Automatic, Unknown) and
    /// `TransmissionDescription` are read field by field, two that disagree leave the field
    /// out; the generic colour is used where it is filled, the factory paint where it is not.
    #[test]
    fn autorevo_flags_and_paired_columns() {
        use crate::api::{TransmissionSpeed, TransmissionType};
        let out = map_csv(
            "DealerID,VIN,Year,Make,Model,StockNumber,New,Certified,ExteriorColor,\
             ExteriorGenericColor,InteriorColor,InteriorGenericColor,Transmission,\
             TransmissionDescription\n\
             77,1HGCM82633A004352,2024,Toyota,Tacoma,A1,1,0,Quicksand,Tan,Boulder,Black,\
             Unknown,6-Speed Automatic\n\
             77,1M8GDM9AXKP042788,2021,BMW,X5,A2,0,1,Agate Black Metallic,Black,Cognac,,\
             Manual,6-Speed Manual\n\
             77,5YJ3E1EA2KF317000,2019,Ford,F-150,A3,0,0,Ingot Silver Metallic,Gray,,,\
             Automatic,6-Speed Manual\n",
        );
        let a = &accepted(&out[0]).payload;
        assert_eq!(a.vehicle_type, Some(VehicleType::New));
        assert_eq!(a.exterior_color, Some(Color::Tan));
        assert_eq!(a.interior_color, Some(Color::Black));
        assert_eq!(a.transmission_type, Some(TransmissionType::Automatic));
        assert_eq!(a.transmission_speed, Some(TransmissionSpeed::Six));
        let b = &accepted(&out[1]).payload;
        assert_eq!(b.vehicle_type, Some(VehicleType::Certified));
        assert_eq!(b.exterior_color, Some(Color::Black));
        assert_eq!(b.transmission_type, Some(TransmissionType::Manual));
        assert_eq!(b.transmission_speed, Some(TransmissionSpeed::Six));
        let c = accepted(&out[2]);
        assert_eq!(c.payload.vehicle_type, Some(VehicleType::Used));
        // Ingot Silver Metallic, and the dealer says Gray: the dealer's word.
        assert_eq!(c.payload.exterior_color, Some(Color::Gray));
        assert_eq!(c.payload.transmission_type, None);
        let said: Vec<&str> = c.warnings.iter().map(|w| w.field).collect();
        assert!(
            !said.contains(&"exterior_color") && said.contains(&"transmission"),
            "{said:?}"
        );
    }

    /// A combined `Vehicle` cell (vAuto) split with the list of makes, multi-word
    /// makes included; a model that may hold the trim is left out, never guessed.
    #[test]
    fn a_combined_vehicle_cell_is_split_by_the_list_of_makes() {
        let out = map_csv(
            "VIN,Stock #,Vehicle,Series\n\
             1HGCM82633A004352,A1,2026 BMW X5,\n\
             1M8GDM9AXKP042788,A2,2019 Land Rover Range Rover Sport HSE,HSE\n\
             5YJ3E1EA2KF317000,A3,2021 Mercedes-Benz GLE-Class,\n\
             1FTFW1E590MFA1234,A4,2019 Land Rover Range Rover Sport,\n\
             2T1BURHE00JC04321,A5,2020 Zastava Yugo GV,\n",
        );
        let ymm = |i: usize| {
            let p = &accepted(&out[i]).payload;
            (p.year, p.make.clone(), p.model.clone())
        };
        let s = |v: &str| Some(v.to_owned());
        assert_eq!(ymm(0), (Some(2026), s("BMW"), s("X5")));
        assert_eq!(
            ymm(1),
            (Some(2019), s("Land Rover"), s("Range Rover Sport"))
        );
        assert_eq!(ymm(2), (Some(2021), s("Mercedes-Benz"), s("GLE-Class")));
        // Three words and no trim to cut: the model may hold the trim.
        assert_eq!(ymm(3), (Some(2019), s("Land Rover"), None));
        // A make lotsync does not know: nothing guessed from the first word.
        assert_eq!(ymm(4), (None, None, None));
        assert_eq!(accepted(&out[4]).warnings[0].field, "year_make_model");
    }

    /// The trim comes from `Series Detail` where it is filled, else `Series`,
    /// whichever comes first in the file.
    #[test]
    fn the_trim_comes_from_series_detail_where_it_is_filled() {
        for csv in [
            "VIN,Stock #,Series,Series Detail\n\
             1HGCM82633A004352,A1,XLT,XLT SuperCrew 5.5' Box\n\
             1M8GDM9AXKP042788,A2,Lariat,\n",
            "VIN,Stock #,Series Detail,Series\n\
             1HGCM82633A004352,A1,XLT SuperCrew 5.5' Box,XLT\n\
             1M8GDM9AXKP042788,A2,,Lariat\n",
        ] {
            let out = map_csv(csv);
            let trim = |i: usize| accepted(&out[i]).payload.trim.clone();
            assert_eq!(trim(0).as_deref(), Some("XLT SuperCrew 5.5' Box"), "{csv}");
            assert_eq!(trim(1).as_deref(), Some("Lariat"), "{csv}");
        }
    }

    #[test]
    fn problems_show_values_escaped() {
        let p = Problem::new("trim", "not \x1b[2Jwell", Some("a\x1b[31m\nb"));
        assert_eq!(p.to_string(), "trim: not \\u{1b}[2Jwell (a\\u{1b}[31m\\nb)");
    }

    #[test]
    fn every_payload_value_is_a_spec_value() {
        // Serialized payloads only ever hold spellings the sandbox's strict tables accept.
        let out = map_csv(
            "VIN,Stock,Type,Body,Fuel,Color,Int Color,Interior,Title,Drive,Transmission\n\
             1HGCM82633A004352,A1,CPO,Crew Cab Pickup,E85,Oxford White,Ebony,Leatherette,Clean,4X4,5-Speed Manual\n",
        );
        let json = serde_json::to_value(&accepted(&out[0]).payload).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "location_id": 10, "stock": "A1", "vin": "1HGCM82633A004352", "type": "Certified",
                "body_style": "Truck", "fuel": "FFV-Ethanol", "exterior_color": "White",
                "interior_color": "Black", "interior_type": "Vinyl", "title_status": "Clear",
                "drive_type": "4x4", "transmission_type": "Manual", "transmission_speed": "5 Speed"
            })
        );
    }
}
