//! Columns recognized by their values, for profiles that let `auto` match (every profile but
//! those with `auto = false`), when no header names them: a column whose values are nearly
//! all 17-character VINs is the VIN; years, photo URL lists and columns whose values name one
//! of the spec's lists (colors, body styles, fuels, drive types, transmissions, new/used,
//! sale status) the same way. A column is used only when at least [`TAKE`] of its sampled
//! values agree, at least [`FEWEST`] were judged, and nothing competes for it; a weaker or
//! contested likeness, and mileages, prices and links (a dealer's export has many columns of
//! plain numbers: cost, invoice, days in stock; and of links: Carfax, window sticker, video),
//! become a note that names the profile line to write, never a silent value.
//!
//! Owns judging sampled values. Not reading the sample (the export file reads it ahead) nor
//! matching headers (the profile's [`Binding`]).

use super::synonyms::{self, Found};
use super::{parse, Binding, Target};
use crate::feed::{FieldId, Record, Schema};

/// Records read ahead of mapping to judge columns by.
pub const SAMPLE: usize = 200;
/// Share of a column's sampled values that must agree for the column to be used.
pub const TAKE: f64 = 0.95;
/// Below this share of fitting values, a column matched by its header is in doubt: the values
/// may put another column, or another field, in its place.
const DOUBT: f64 = 0.1;
/// Below this share a likeness is not worth a note.
const NOTE: f64 = 0.5;
/// Fewest values judged for a likeness to count: a file of one or two vehicles says too
/// little about its columns.
const FEWEST: u32 = 3;
/// Values longer than this are no enum value (an options list naming "Black Wheels").
const ENUM_VALUE_MAX: usize = 40;

/// How well one column's values fit one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Likeness {
    pub target: Target,
    pub field: FieldId,
    /// Values that fit, of `of` non-empty values judged.
    pub agree: u32,
    pub of: u32,
}

impl Likeness {
    pub fn share(&self) -> f64 {
        if self.of == 0 {
            0.0
        } else {
            f64::from(self.agree) / f64::from(self.of)
        }
    }

    /// "40 of 40 sampled values (100%)".
    pub fn shown(&self) -> String {
        format!(
            "{} of {} sampled values ({:.0}%)",
            self.agree,
            self.of,
            (self.share() * 100.0).floor()
        )
    }
}

/// A share of fitting values at which a column a feed's earlier files had recognized by its
/// values is kept for the same field: lower than [`TAKE`], so that a column at 95% one day and
/// 94% the next does not change what every vehicle is sent.
const KEEP: f64 = 0.8;

/// The columns a feed's file had recognized by their values, remembered in the state for the
/// feed's next file with the same header: kept while their values still fit ([`KEEP`]), and a
/// change said in one note.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeptColumns {
    /// The file's column names, in order, joined by a unit separator (U+001F).
    pub header: String,
    /// The field's name ([`Target::name`]) and the column's, as bound by values.
    pub by_values: Vec<(String, String)>,
}

impl KeptColumns {
    /// The header of `schema`, as [`KeptColumns::header`] holds it.
    pub fn header_of(schema: &Schema) -> String {
        let names: Vec<&str> = schema.names().map(|(_, name)| name).collect();
        names.join("\u{1f}")
    }
}

/// What the values of the columns no header names say.
#[derive(Debug, Default)]
pub struct Recognition {
    /// Columns to bind to their field.
    pub taken: Vec<Likeness>,
    /// Likenesses not used, said for people with the profile line that would use them.
    pub notes: Vec<String>,
    /// When no column is the VIN: every column looked at, with its share of VIN-like values,
    /// best first.
    pub vin_candidates: Vec<Likeness>,
    /// Header matches the values contradict, given up for what `taken` puts in their place.
    pub released: Vec<Likeness>,
}

/// The kinds of value a column can be recognized by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Vin,
    Year,
    Miles,
    Price,
    Images,
    Link,
    Color,
    BodyStyle,
    Fuel,
    DriveType,
    Transmission,
    VehicleType,
    InteriorType,
    TitleStatus,
    SaleStatus,
    /// An engine description ("3.5L V6"); only judged on a column named for the engine, never
    /// taken by values alone (a model named "i4" reads as one).
    Engine,
}

impl Kind {
    const ALL: [Kind; 16] = [
        Kind::Vin,
        Kind::Year,
        Kind::Miles,
        Kind::Price,
        Kind::Images,
        Kind::Link,
        Kind::Color,
        Kind::BodyStyle,
        Kind::Fuel,
        Kind::DriveType,
        Kind::Transmission,
        Kind::VehicleType,
        Kind::InteriorType,
        Kind::TitleStatus,
        Kind::SaleStatus,
        Kind::Engine,
    ];

    /// The field a column of this kind named `name` feeds, when `free` says that field has no
    /// column yet.
    fn target(self, name: &str, free: impl Fn(Target) -> bool) -> Option<Target> {
        let one = |t: Target| free(t).then_some(t);
        match self {
            Kind::Vin => one(Target::Vin),
            Kind::Year => one(Target::Year),
            Kind::Miles => one(Target::Miles),
            Kind::Price => [Target::Price, Target::InternetPrice, Target::Msrp]
                .into_iter()
                .all(free)
                .then_some(Target::Price),
            Kind::Images => one(Target::Images),
            Kind::Link => one(Target::Url),
            // The color of a car is its exterior, unless the column's name says interior, or
            // names another part ("Seat Color", "Trim Color": no field of the payload).
            Kind::Color => {
                let lower = name.to_ascii_lowercase();
                let other_part = [
                    "seat",
                    "trim",
                    "upholster",
                    "accent",
                    "stripe",
                    "roof",
                    "wheel",
                    "top",
                    "cloth",
                    "leather",
                ]
                .iter()
                .any(|part| lower.contains(part));
                if lower.starts_with("int") || lower.contains("interior") {
                    one(Target::InteriorColor)
                } else if other_part {
                    None
                } else {
                    one(Target::ExteriorColor)
                }
            }
            Kind::BodyStyle => one(Target::BodyStyle),
            Kind::Fuel => one(Target::Fuel),
            Kind::DriveType => one(Target::DriveType),
            Kind::Transmission => [
                Target::Transmission,
                Target::TransmissionType,
                Target::TransmissionSpeed,
            ]
            .into_iter()
            .all(free)
            .then_some(Target::Transmission),
            Kind::VehicleType => one(Target::Type),
            Kind::InteriorType => one(Target::InteriorType),
            Kind::TitleStatus => one(Target::TitleStatus),
            Kind::SaleStatus => one(Target::Status),
            Kind::Engine => None,
        }
    }

    /// The kind of value a column named for `target` should hold, where values can say
    /// whether its name was right.
    fn held_by(target: Target) -> Option<Kind> {
        Some(match target {
            Target::Year => Kind::Year,
            Target::ExteriorColor | Target::InteriorColor => Kind::Color,
            Target::BodyStyle => Kind::BodyStyle,
            Target::Fuel => Kind::Fuel,
            Target::DriveType => Kind::DriveType,
            Target::Transmission | Target::TransmissionType => Kind::Transmission,
            Target::Type => Kind::VehicleType,
            Target::InteriorType => Kind::InteriorType,
            Target::TitleStatus => Kind::TitleStatus,
            Target::Status => Kind::SaleStatus,
            // Google's vehicle feeds call the fuel `engine` (gasoline, diesel, electric).
            Target::Engine => Kind::Engine,
            _ => return None,
        })
    }

    /// The kind a column kept for `target` is judged by ([`KeptColumns`]): those a column can
    /// be taken for by its values.
    fn kept_as(target: Target) -> Option<Kind> {
        match target {
            Target::Vin => Some(Kind::Vin),
            Target::Images => Some(Kind::Images),
            Target::Url => Some(Kind::Link),
            Target::Engine => None,
            other => Kind::held_by(other),
        }
    }

    /// Only proposed, never used by values alone: plain numbers could be any count or amount,
    /// and a link any page (a Carfax report, a window sticker, a video).
    fn proposed_only(self) -> bool {
        matches!(self, Kind::Miles | Kind::Price | Kind::Link)
    }

    /// Whether a non-empty value fits; None when it says nothing either way (a price of 0).
    fn fits(self, value: &str, year_max: u16) -> Option<bool> {
        let enum_like = |found: bool| {
            Some(value.len() <= ENUM_VALUE_MAX && value.split_whitespace().count() <= 5 && found)
        };
        match self {
            Kind::Vin => Some(looks_like_vin(value)),
            Kind::Year => Some(matches!(parse::year(value, year_max), Ok(Some(_)))),
            Kind::Miles => Some(is_whole_number(value)),
            Kind::Price => {
                let written_as_money = value.contains('$') || has_cents(value);
                match parse::plausible_price(value) {
                    Ok(Some(_)) => Some(written_as_money),
                    Ok(None) => None,
                    Err(_) => Some(false),
                }
            }
            Kind::Images => {
                let items = url_items(value);
                Some(
                    items.iter().all(|u| parse::is_web_url(u))
                        && (items.len() > 1 || items.iter().any(|u| looks_like_image(u))),
                )
            }
            Kind::Link => {
                let items = url_items(value);
                Some(items.len() == 1 && parse::is_web_url(items[0]) && !looks_like_image(items[0]))
            }
            // A value of the list that is unclear ("Black/Red", "2WD") still says the column
            // is of that list.
            Kind::Color => enum_like(!matches!(synonyms::color(value), Found::None)),
            Kind::BodyStyle => enum_like(!matches!(synonyms::body_style(value), Found::None)),
            Kind::Fuel => enum_like(!matches!(synonyms::fuel(value), Found::None)),
            Kind::DriveType => enum_like(!matches!(synonyms::drive_type(value), Found::None)),
            // A word only a transmission uses: "Standard" (a bed) or "Auto" (a department)
            // alone say nothing.
            Kind::Transmission => {
                let read = parse::transmission(value);
                let lower = value.to_ascii_lowercase();
                let own_word = read.speed.is_some()
                    || read.unlisted_speed.is_some()
                    || [
                        "automatic",
                        "manual",
                        "cvt",
                        "a/t",
                        "m/t",
                        "dual clutch",
                        "dct",
                    ]
                    .iter()
                    .any(|w| lower.contains(w));
                enum_like(read.kind.is_some() && own_word)
            }
            // One letter ("N", "Y") is as likely a yes/no flag: it says nothing.
            Kind::VehicleType if value.chars().count() < 2 => None,
            Kind::VehicleType => enum_like(!matches!(synonyms::vehicle_type(value), Found::None)),
            Kind::InteriorType => enum_like(!matches!(synonyms::interior_type(value), Found::None)),
            Kind::TitleStatus => enum_like(!matches!(synonyms::title_status(value), Found::None)),
            // Single letters ("A", "S") are as likely something else.
            Kind::SaleStatus if value.chars().count() < 2 => None,
            Kind::SaleStatus => enum_like(synonyms::sold(value).is_some()),
            Kind::Engine => Some(parse::engine(value) != (None, None)),
        }
    }
}

/// 17 letters and digits, no I, O or Q, both letters and digits: the shape of a VIN, its check
/// digit aside (the mapper checks it record by record, and a typo in one VIN must not hide the
/// column).
fn looks_like_vin(value: &str) -> bool {
    let b = value.trim().as_bytes();
    b.len() == 17
        && b.iter().all(u8::is_ascii_alphanumeric)
        && !b
            .iter()
            .any(|c| matches!(c.to_ascii_uppercase(), b'I' | b'O' | b'Q'))
        && b.iter().any(u8::is_ascii_digit)
        && b.iter().any(u8::is_ascii_alphabetic)
}

/// "48,210", "48210": digits with thousands commas at most.
fn is_whole_number(value: &str) -> bool {
    let t = value.trim();
    !t.is_empty()
        && t.bytes().all(|b| b.is_ascii_digit() || b == b',')
        && t.bytes().next().is_some_and(|b| b.is_ascii_digit())
}

/// "24995.00": a decimal point followed by exactly two digits at the end.
fn has_cents(value: &str) -> bool {
    let t = value.trim().as_bytes();
    t.len() > 3 && t[t.len() - 3] == b'.' && t[t.len() - 2..].iter().all(u8::is_ascii_digit)
}

fn url_items(value: &str) -> Vec<&str> {
    value
        .split(|c: char| c == '|' || c == ',' || c == ';' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .collect()
}

fn looks_like_image(url: &str) -> bool {
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or(url)
        .to_ascii_lowercase();
    [".jpg", ".jpeg", ".png", ".gif", ".webp"]
        .iter()
        .any(|ext| path.ends_with(ext))
}

/// Judges the sampled values of every column the binding leaves unused, for every field that
/// has no column; and of every column matched by its header to a field whose values can be
/// judged: one whose values nearly all say otherwise ([`DOUBT`]) is released when the values
/// put that column, or another column for its field, in its place.
pub fn recognize(
    schema: &Schema,
    records: &[&Record],
    binding: &Binding,
    year_max: u16,
    kept: Option<&KeptColumns>,
) -> Recognition {
    let mut out = Recognition::default();
    let enough = |l: &Likeness| l.of >= FEWEST;
    let column_of = |name: &str| schema.names().find(|(_, n)| *n == name).map(|(id, _)| id);
    // What the feed's earlier files with this header recognized: kept while it still fits.
    let kept = kept.filter(|k| k.header == KeptColumns::header_of(schema));
    let mut kept_taken: Vec<Likeness> = Vec::new();
    for (target_name, column) in kept.iter().flat_map(|k| &k.by_values) {
        let Some(&target) = Target::ALL.iter().find(|t| t.name() == target_name) else {
            continue;
        };
        let (Some(id), Some(kind)) = (column_of(column), Kind::kept_as(target)) else {
            continue;
        };
        if binding.field(target).is_some() || binding.by_target.values().any(|&b| b == id) {
            continue;
        }
        let likeness = judge(kind, target, id, records, year_max);
        if enough(&likeness) && likeness.share() >= KEEP {
            kept_taken.push(likeness);
        } else {
            out.notes.push(format!(
                "column {column:?} was {} by its values in this feed's earlier files; now only \
                 {} fit: it is no longer used for it",
                target.name(),
                likeness.shown()
            ));
        }
    }
    let doubtful: Vec<Likeness> = binding
        .by_header
        .iter()
        .filter_map(|&target| {
            let kind = Kind::held_by(target)?;
            let own = judge(kind, target, binding.field(target)?, records, year_max);
            (enough(&own) && own.share() < DOUBT).then_some(own)
        })
        .collect();
    let free = |t: Target| {
        (binding.field(t).is_none() || doubtful.iter().any(|d| d.target == t))
            && !kept_taken.iter().any(|k| k.target == t)
    };
    let free_columns: Vec<FieldId> = schema
        .names()
        .map(|(id, _)| id)
        .filter(|id| {
            let bound = binding.by_target.values().any(|bound| bound == id)
                && !doubtful.iter().any(|d| d.field == *id);
            !bound
                && !kept_taken.iter().any(|k| k.field == *id)
                && !binding.twins.iter().any(|twin| twin.other == *id)
                && !binding.continued.iter().any(|(_, more)| more == id)
        })
        .collect();
    let profile_line = |target: Target, id: FieldId| {
        format!(
            "[fields] {} = {:?}",
            target.name(),
            name_in_profile(schema, id)
        )
    };
    let column = |id: FieldId| format!("{:?}", schema.name(id));

    // Per kind: the columns whose values fit its field well enough to say so.
    let mut strong: Vec<(Kind, Likeness)> = Vec::new();
    for kind in Kind::ALL {
        for &id in &free_columns {
            let Some(target) = kind.target(schema.name(id), free) else {
                continue;
            };
            let likeness = judge(kind, target, id, records, year_max);
            if kind == Kind::Vin {
                out.vin_candidates.push(likeness);
            }
            if !enough(&likeness) || likeness.share() < NOTE {
                continue;
            }
            if likeness.share() >= TAKE {
                strong.push((kind, likeness));
            } else if !kind.proposed_only() && binding.field(target).is_none() {
                out.notes.push(format!(
                    "column {} looks like {} by its values, but only {} fit (lotsync uses a \
                     column by its values at {:.0}%): if it is, name it in a profile: {}",
                    column(id),
                    target.name(),
                    likeness.shown(),
                    TAKE * 100.0,
                    profile_line(target, id)
                ));
            }
        }
    }
    out.vin_candidates
        .sort_by(|a, b| b.share().total_cmp(&a.share()).then(a.field.cmp(&b.field)));

    // A year column is all whole numbers too: it is no mileage.
    let years: Vec<FieldId> = strong
        .iter()
        .filter(|(k, _)| *k == Kind::Year)
        .map(|(_, l)| l.field)
        .collect();
    strong.retain(|(k, l)| *k != Kind::Miles || !years.contains(&l.field));

    let mut contests: Vec<(Kind, Target)> = Vec::new();
    for &(kind, l) in &strong {
        if !contests.contains(&(kind, l.target)) {
            contests.push((kind, l.target));
        }
    }
    for (kind, target) in contests {
        let fitting: Vec<Likeness> = strong
            .iter()
            .filter(|(k, l)| *k == kind && l.target == target)
            .map(|(_, l)| *l)
            .collect();
        let Some(&first) = fitting.first() else {
            continue;
        };
        let names: Vec<String> = fitting.iter().map(|l| column(l.field)).collect();
        let other_kinds = strong
            .iter()
            .any(|(k, l)| *k != kind && l.field == first.field);
        if kind.proposed_only() {
            let (what, field) = match kind {
                Kind::Miles => ("whole numbers", "the mileage"),
                Kind::Link => ("web links", "the vehicle's page"),
                _ => ("amounts of money", "the price"),
            };
            let (columns, hold, which) = if fitting.len() == 1 {
                ("column", "holds", "it is")
            } else {
                ("columns", "hold", "one is")
            };
            out.notes.push(format!(
                "{columns} {} {hold} {what}; lotsync does not take {} by values alone: if \
                 {which} {field}, name it in a profile: {}",
                names.join(", "),
                first.target.name(),
                profile_line(first.target, first.field)
            ));
        } else if fitting.len() > 1 {
            out.notes.push(format!(
                "columns {} all look like {} by their values; lotsync will not guess which: \
                 name one in a profile: {}",
                names.join(", "),
                first.target.name(),
                profile_line(first.target, first.field)
            ));
        } else if other_kinds {
            out.notes.push(format!(
                "column {} looks like more than one field by its values; lotsync will not \
                 guess which: name it in a profile, e.g. {}",
                column(first.field),
                profile_line(first.target, first.field)
            ));
        } else {
            out.taken.push(first);
        }
    }

    // A doubtful header match gives way only to what the values put in its place.
    for d in doubtful {
        let by_column = out.taken.iter().find(|l| l.field == d.field);
        let by_target = out.taken.iter().find(|l| l.target == d.target);
        let instead = match (by_column, by_target) {
            (None, None) => continue,
            (Some(l), _) => format!("its values say {}: used for that", l.target.name()),
            (None, Some(l)) => format!(
                "column {} is used for it instead by its values",
                column(l.field)
            ),
        };
        out.notes.push(format!(
            "column {} is named like {}, but only {} are one; {instead}",
            column(d.field),
            d.target.name(),
            d.shown()
        ));
        out.released.push(d);
    }
    out.taken.extend(kept_taken);
    // A binding by values that differs from the feed's earlier files is said once.
    if let Some(kept) = kept {
        let now: Vec<(String, String)> = out
            .taken
            .iter()
            .map(|l| (l.target.name().to_owned(), schema.name(l.field).to_owned()))
            .collect();
        for (target, column) in &now {
            if !kept
                .by_values
                .iter()
                .any(|(t, c)| t == target && c == column)
            {
                out.notes.push(format!(
                    "column {column:?} is now used for {target} by its values (this feed's \
                     earlier files with the same header did not use it so)"
                ));
            }
        }
    }
    out
}

/// How a profile names a column so as to mean only it: its header, or `#3` when another
/// column has the same header.
pub fn name_in_profile(schema: &Schema, id: FieldId) -> String {
    let name = schema.name(id);
    let alike = schema
        .names()
        .any(|(other, n)| other != id && n.trim().eq_ignore_ascii_case(name.trim()));
    if alike && schema.numbered() {
        format!("#{}", id + 1)
    } else {
        name.to_owned()
    }
}

fn judge(kind: Kind, target: Target, id: FieldId, records: &[&Record], year_max: u16) -> Likeness {
    let mut likeness = Likeness {
        target,
        field: id,
        agree: 0,
        of: 0,
    };
    for record in records {
        let Some(value) = record.get(id) else {
            continue;
        };
        let value = parse::clean(value);
        if value.is_empty() {
            continue;
        }
        if let Some(fits) = kind.fits(&value, year_max) {
            likeness.of += 1;
            likeness.agree += u32::from(fits);
        }
    }
    likeness
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::{Item, ReadOptions};
    use crate::mapper::Profile;

    /// The recognition of a CSV text's columns, after auto matched what its headers name.
    fn recognized(csv: &str) -> (Schema, Recognition) {
        recognized_kept(csv, None)
    }

    fn recognized_kept(csv: &str, kept: Option<&KeptColumns>) -> (Schema, Recognition) {
        let mut reader = crate::feed::from_bytes(csv.as_bytes(), &ReadOptions::default()).unwrap();
        let mut records = Vec::new();
        loop {
            let mut record = Record::default();
            match reader.next(&mut record).unwrap() {
                Item::Record => records.push(record),
                Item::Problem(p) => panic!("{p:?}"),
                Item::End => break,
            }
        }
        let schema = reader.schema().clone();
        let binding = Binding::new(&Profile::auto(), &schema);
        let records: Vec<&Record> = records.iter().collect();
        let recognition = recognize(&schema, &records, &binding, 2027, kept);
        (schema, recognition)
    }

    fn taken(r: &Recognition, schema: &Schema) -> Vec<(String, &'static str)> {
        r.taken
            .iter()
            .map(|l| (schema.name(l.field).to_owned(), l.target.name()))
            .collect()
    }

    const VINS: [&str; 4] = [
        "1FTFW1E56MFA38127",
        "2T3P1RFV7RW198233",
        "1C4RJFAG8KC318842",
        "5YJ3E1EA8LF617352",
    ];

    #[test]
    fn a_column_of_vins_is_the_vin_and_a_typo_does_not_hide_it() {
        let mut csv = String::from("Unit Key,Stock,Built,Shade,Gallery\n");
        for (i, vin) in VINS.iter().enumerate() {
            // One VIN with a wrong check digit: still the shape of a VIN.
            let vin = if i == 2 { "1C4RJFAG1KC318842" } else { vin };
            csv.push_str(&format!(
                "{vin},S{i},20{:02},Agate Black Metallic,https://x.example/{i}/1.jpg|https://x.example/{i}/2.jpg\n",
                18 + i
            ));
        }
        let (schema, r) = recognized(&csv);
        assert_eq!(
            taken(&r, &schema),
            [
                ("Unit Key".to_owned(), "vin"),
                ("Built".to_owned(), "year"),
                ("Gallery".to_owned(), "images"),
                ("Shade".to_owned(), "exterior_color"),
            ]
        );
        assert!(r.notes.is_empty(), "{:?}", r.notes);
    }

    /// Google's vehicle feeds name the fuel `engine`: a column named for the engine whose
    /// values are fuels is the fuel; one of engine descriptions stays the engine.
    #[test]
    fn an_engine_column_of_fuels_is_the_fuel() {
        let csv = "vin,id,engine,make\n\
                   1FTFW1E56MFA38127,A,gasoline,Ford\n\
                   2T3P1RFV7RW198233,B,hybrid,Toyota\n\
                   1C4RJFAG8KC318842,C,diesel,Jeep\n\
                   5YJ3E1EA2KF317000,D,electric,Tesla\n";
        let (schema, r) = recognized(csv);
        assert_eq!(taken(&r, &schema), [("engine".to_owned(), "fuel")]);
        let released: Vec<&str> = r.released.iter().map(|l| l.target.name()).collect();
        assert_eq!(released, ["engine"]);

        let csv = "VIN,Stock,Engine\n\
                   1FTFW1E56MFA38127,A,3.5L V6\n\
                   2T3P1RFV7RW198233,B,2.5L I4 Hybrid\n\
                   1C4RJFAG8KC318842,C,Gas 3.6L V6\n";
        let (_, r) = recognized(csv);
        assert!(r.taken.is_empty() && r.released.is_empty(), "{r:?}");
    }

    /// A column the feed's earlier file took by its values (95% or more) is
    /// kept for the next file with the same header while at least 80% of its values fit, so a
    /// share of 94% one day changes nothing; below that it is dropped with a note, and a
    /// binding the earlier file did not have is said too.
    #[test]
    fn a_feed_keeps_the_columns_its_values_gave_while_they_fit() {
        let file = |bad: usize| {
            let mut csv = String::from("VIN,Stock,Shade\n");
            for (i, vin) in VINS.iter().cycle().take(20).enumerate() {
                let shade = if i < bad { "Quicksand" } else { "Black" };
                csv.push_str(&format!("{vin},S{i},{shade}\n"));
            }
            csv
        };
        let (schema, first) = recognized(&file(0));
        assert_eq!(
            taken(&first, &schema),
            [("Shade".to_owned(), "exterior_color")]
        );
        let kept = KeptColumns {
            header: KeptColumns::header_of(&schema),
            by_values: vec![("exterior_color".into(), "Shade".into())],
        };
        // 18 of 20 (90%): under TAKE, so alone it would not be taken; kept, it stays.
        let (_, alone) = recognized(&file(2));
        assert!(alone.taken.is_empty(), "{:?}", alone.taken);
        let (schema, next) = recognized_kept(&file(2), Some(&kept));
        assert_eq!(
            taken(&next, &schema),
            [("Shade".to_owned(), "exterior_color")]
        );
        assert!(
            next.notes.iter().all(|n| !n.contains("earlier files")),
            "{:?}",
            next.notes
        );
        // 10 of 20: no longer fits, dropped with a note.
        let (_, gone) = recognized_kept(&file(10), Some(&kept));
        assert!(gone.taken.is_empty(), "{:?}", gone.taken);
        assert!(
            gone.notes
                .iter()
                .any(|n| n.contains("was exterior_color by its values")),
            "{:?}",
            gone.notes
        );
        // An earlier file that bound nothing: the new binding is said.
        let none = KeptColumns {
            header: kept.header.clone(),
            by_values: Vec::new(),
        };
        let (_, new) = recognized_kept(&file(0), Some(&none));
        assert!(
            new.notes
                .iter()
                .any(|n| n.contains("is now used for exterior_color")),
            "{:?}",
            new.notes
        );
    }

    #[test]
    fn a_weak_likeness_is_a_note_with_the_profile_line_never_a_value() {
        let mut csv = String::from("Stock,Ident\n");
        for (i, vin) in VINS.iter().enumerate() {
            csv.push_str(&format!("S{i},{vin}\n"));
        }
        for i in 0..4 {
            csv.push_str(&format!("T{i},PENDING{i}\n"));
        }
        let (_, r) = recognized(&csv);
        assert!(r.taken.is_empty(), "{:?}", r.taken);
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        assert!(
            r.notes[0].contains("4 of 8 sampled values (50%)")
                && r.notes[0].contains(r#"[fields] vin = "Ident""#),
            "{}",
            r.notes[0]
        );
        assert_eq!(r.vin_candidates[0].agree, 4);
    }

    #[test]
    fn two_columns_alike_are_contested_and_neither_is_used() {
        let csv = "VIN,Stock,Shade A,Shade B\n\
                   1FTFW1E56MFA38127,A,Red,Blue\n\
                   2T3P1RFV7RW198233,B,White,Silver\n\
                   1C4RJFAG8KC318842,C,Black,Gray\n";
        let (_, r) = recognized(csv);
        assert!(r.taken.is_empty(), "{:?}", r.taken);
        assert!(
            r.notes[0].contains(r#""Shade A", "Shade B" all look like exterior_color"#),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn mileages_and_prices_are_only_proposed() {
        let csv = "VIN,Stock,Reading,Days,Tag\n\
                   1FTFW1E56MFA38127,A,\"48,210\",12,$24995\n\
                   2T3P1RFV7RW198233,B,1200,40,$31000\n\
                   1C4RJFAG8KC318842,C,88000,3,$9999\n";
        let (_, r) = recognized(csv);
        assert!(r.taken.is_empty(), "{:?}", r.taken);
        assert_eq!(r.notes.len(), 2, "{:?}", r.notes);
        assert!(
            r.notes[0].starts_with(r#"columns "Reading", "Days" hold whole numbers"#),
            "{:?}",
            r.notes
        );
        assert!(r.notes[0].contains(r#"[fields] miles = "Reading""#));
        assert!(r.notes[1].contains(r#"[fields] price = "Tag""#));
    }

    #[test]
    fn a_year_column_is_no_mileage_and_links_are_no_photos_and_only_proposed() {
        let csv = "VIN,Stock,Built,Page,Seat Shade,Bed\n\
                   1FTFW1E56MFA38127,A,2021,https://dealer.example/v/1,Black,Standard\n\
                   2T3P1RFV7RW198233,B,2024,https://dealer.example/v/2,Gray,Standard\n\
                   1C4RJFAG8KC318842,C,2019,https://dealer.example/v/3,Black,Short\n";
        let (schema, r) = recognized(csv);
        assert_eq!(taken(&r, &schema), [("Built".to_owned(), "year")]);
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        assert!(
            r.notes[0].starts_with(r#"column "Page" holds web links"#)
                && r.notes[0].contains(r#"[fields] url = "Page""#),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn one_or_two_vehicles_say_too_little_about_a_column() {
        let csv = "Unit,Stock\n1FTFW1E56MFA38127,A\n2T3P1RFV7RW198233,B\n";
        let (_, r) = recognized(csv);
        assert!(r.taken.is_empty(), "{:?}", r.taken);
        assert_eq!(r.vin_candidates[0].agree, 2, "still named as a candidate");
    }

    #[test]
    fn a_header_match_the_values_contradict_gives_way_to_what_they_say() {
        // AX9 spells new/used "title" and the kind of vehicle "type"; its "interior" is the
        // color, where lotsync's vocabulary says title status, type and material.
        let csv = "vin,stock,title,type,interior,Trim Color\n\
                   1FTFW1E56MFA38127,A,Used,CARS & TRUCKS,Black,Red\n\
                   2T3P1RFV7RW198233,B,New,CARS & TRUCKS,Gray,Blue\n\
                   1C4RJFAG8KC318842,C,Certified Pre-Owned,ATVS,Black,\n";
        let (schema, r) = recognized(csv);
        assert_eq!(
            taken(&r, &schema),
            [
                ("interior".to_owned(), "interior_color"),
                ("title".to_owned(), "type")
            ]
        );
        let released: Vec<(&str, &str)> = r
            .released
            .iter()
            .map(|l| (schema.name(l.field), l.target.name()))
            .collect();
        assert_eq!(
            released,
            [
                ("title", "title_status"),
                ("type", "type"),
                ("interior", "interior_type")
            ]
        );
        assert!(
            r.notes.iter().any(|n| n
                == r#"column "title" is named like title_status, but only 0 of 3 sampled values (0%) are one; its values say type: used for that"#),
            "{:?}",
            r.notes
        );
        // "Trim Color" is a second color, not named interior: not taken for any field.
        assert!(!r.taken.iter().any(|l| schema.name(l.field) == "Trim Color"));
    }

    #[test]
    fn a_header_match_in_doubt_stays_when_nothing_better_is_found() {
        let csv = "VIN,Stock,Body\n\
                   1FTFW1E56MFA38127,A,Utility\n\
                   2T3P1RFV7RW198233,B,Mountain\n\
                   1C4RJFAG8KC318842,C,Trail\n";
        let (_, r) = recognized(csv);
        assert!(r.released.is_empty() && r.taken.is_empty(), "{r:?}");
    }

    #[test]
    fn free_text_that_names_a_color_now_and_then_is_no_color_column() {
        let csv = "VIN,Stock,Notes\n\
                   1FTFW1E56MFA38127,A,Black wheels and a tow package\n\
                   2T3P1RFV7RW198233,B,One owner\n\
                   1C4RJFAG8KC318842,C,Red interior trim\n";
        let (_, r) = recognized(csv);
        assert!(r.taken.is_empty() && r.notes.is_empty(), "{r:?}");
    }
}
