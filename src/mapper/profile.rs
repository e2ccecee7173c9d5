//! Mapping profiles: which column (CSV) or path (XML) feeds which payload field, value maps,
//! lot codes, and how to read the file. `auto` is built in: it recognizes the header spellings
//! DMS exports use; a profile file (`config/profiles/*.toml`) names what auto cannot guess and
//! may leave the rest to it.

use super::infer::{Likeness, Recognition};
use super::parse::DistanceUnit;
use super::target::squash;
use super::target::Target;
use super::vin::VinCheck;
use super::vocabulary;
use crate::feed::{FieldId, Format, ReadOptions, Schema};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A profile file, or the built-in `auto`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Set from the file name when loaded; "auto" for the built-in one.
    #[serde(skip)]
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// csv or xml; detected from the content when left out.
    #[serde(default)]
    pub format: Option<Format>,
    /// CSV delimiter (one character); detected when left out.
    #[serde(default)]
    pub delimiter: Option<String>,
    /// XML: the element that is one vehicle; detected when left out.
    #[serde(default)]
    pub record: Option<String>,
    #[serde(default)]
    pub vin_check: VinCheck,
    /// CSV: the DMS never writes a line break after the last record. Without it, a last record
    /// without one is taken for a file still being written; with it, such a record is whole
    /// when it has every field of the header (a value cut short in the last field cannot be
    /// told, unless it is quoted).
    #[serde(default)]
    pub ends_without_newline: bool,
    /// The date the DMS writes in its file names, such as `"%Y%m%d"` for `inv_20261124.csv`
    /// (`%Y` `%m` `%d`, and `%H` `%M` `%S` when the name has the time; UTC). A full snapshot
    /// is as of that date; without it, or for a name without it, as of its modification time.
    /// A snapshot older than one already applied for its feed and location is not applied.
    #[serde(default)]
    pub name_date: Option<String>,
    /// Match the fields not named in `[fields]` by their header, as the `auto` profile does.
    #[serde(default = "yes")]
    pub auto: bool,
    /// Field → source column (CSV: its header, or `#7` for the 7th column) or path (XML:
    /// `Prices/Internet`, `@VIN`, `Photos/Photo`, `Price[@type=Internet]` for the `<Price>`
    /// whose `type` attribute is `Internet`).
    #[serde(default)]
    pub fields: BTreeMap<Target, String>,
    /// Per field, source value → value to use instead (matched ignoring case and spacing).
    #[serde(default)]
    pub values: BTreeMap<Target, BTreeMap<String, String>>,
    /// Lot code (the `location` field's value) → location_id.
    #[serde(default)]
    pub locations: BTreeMap<String, u64>,
}

fn yes() -> bool {
    true
}

/// A profile that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("no profile {name:?}: looked for {}", .tried.display())]
    NotFound { name: String, tried: PathBuf },
    #[error("profile {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("profile {path}, line {line}")]
    Parse {
        path: String,
        line: usize,
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error("profile {path}: {message}")]
    Invalid { path: String, message: String },
}

impl ProfileError {
    /// The error on one line, for a list of problems (`lotsync validate`): TOML's reason
    /// without the excerpt of the file it shows under it.
    pub fn one_line(&self) -> String {
        match self {
            ProfileError::Parse { source, .. } => format!("{self}: {}", source.message().trim()),
            other => crate::text::Chain(other).to_string().replace('\n', " "),
        }
    }
}

impl Profile {
    /// The built-in profile: every field matched by its header.
    pub fn auto() -> Profile {
        Profile {
            name: "auto".into(),
            description: None,
            format: None,
            delimiter: None,
            record: None,
            vin_check: VinCheck::Strict,
            ends_without_newline: false,
            name_date: None,
            auto: true,
            fields: BTreeMap::new(),
            values: BTreeMap::new(),
            locations: BTreeMap::new(),
        }
    }

    /// `auto`, a path to a `.toml` file, or a name looked up as `{dir}/{name}.toml`.
    pub fn find(name_or_path: &str, dir: &Path) -> Result<Profile, ProfileError> {
        if name_or_path == "auto" {
            return Ok(Profile::auto());
        }
        let as_path = Path::new(name_or_path);
        let path = if name_or_path.ends_with(".toml") || name_or_path.contains('/') {
            as_path.to_owned()
        } else {
            dir.join(format!("{name_or_path}.toml"))
        };
        if !path.is_file() {
            return Err(ProfileError::NotFound {
                name: name_or_path.to_owned(),
                tried: path,
            });
        }
        Profile::load(&path)
    }

    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let shown = path.display().to_string();
        let invalid = |message: String| ProfileError::Invalid {
            path: shown.clone(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
            path: shown.clone(),
            source,
        })?;
        let mut profile: Profile = toml::from_str(&text).map_err(|e| ProfileError::Parse {
            path: shown.clone(),
            line: e.span().map_or(1, |span| {
                1 + text.as_bytes()[..span.start.min(text.len())]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count()
            }),
            source: Box::new(e),
        })?;
        profile.name = path
            .file_stem()
            .map_or_else(|| shown.clone(), |s| s.to_string_lossy().into_owned());
        if let Some(d) = &profile.delimiter {
            if d.len() != 1 {
                return Err(invalid(format!(
                    "delimiter {d:?} must be one character such as \",\", \";\" or \"\\t\""
                )));
            }
        }
        if let Some(pattern) = &profile.name_date {
            crate::clock::check_name_pattern(pattern)
                .map_err(|reason| invalid(format!("name_date = {pattern:?}: {reason}")))?;
        }
        for (target, source) in &profile.fields {
            if column_number(source) == Some(0) {
                return Err(invalid(format!(
                    "fields.{} = {source:?}: columns are numbered from 1",
                    target.name()
                )));
            }
        }
        if !profile.locations.is_empty()
            && !profile.fields.contains_key(&Target::Location)
            && !profile.auto
        {
            return Err(invalid(
                "[locations] needs a column to read the lot code from: fields.location".into(),
            ));
        }
        Ok(profile)
    }

    /// How the feed reader should read files for this profile.
    pub fn read_options(&self) -> ReadOptions {
        ReadOptions {
            format: self.format,
            delimiter: self.delimiter.as_ref().and_then(|d| d.bytes().next()),
            record_element: self.record.clone(),
            confine_to: None,
            ends_without_newline: self.ends_without_newline,
            accept_incomplete: false,
        }
    }
}

/// A profile's `"#7"`: the 7th column of a CSV, counted from 1.
fn column_number(source: &str) -> Option<usize> {
    let digits = source.trim().strip_prefix('#')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A name a profile gives matches a file's name ignoring case and surrounding blanks.
fn names_match(name: &str, source: &str) -> bool {
    name.trim().eq_ignore_ascii_case(source.trim())
}

/// "imageurl" for "imageurl1" or "image0url": a squashed name with digits whose digit-less
/// form names a list field (photos, options).
fn numbered_list_stem(squashed: &str) -> Option<String> {
    if !squashed.bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    let stem: String = squashed.chars().filter(|c| !c.is_ascii_digit()).collect();
    matches!(
        vocabulary::target_of(&stem),
        Some(Target::Images | Target::Options)
    )
    .then_some(stem)
}

/// The names an XML element told apart by an attribute goes by: `Price[@type=Internet]` is
/// looked up as "internetprice" and "priceinternet", and as "internet" because "internet"
/// names a field of the same family as "price"; `Color[@type=Exterior]` as "exteriorcolor"
/// (squashed, as the vocabulary holds them). `Photo[@type=Exterior]` is not "exterior": a
/// color is no photo.
///
/// A group told apart by a code child (`Price[PriceCode=Vehicle Advertised Price]`, STAR's
/// form, see `feed::xml`) is looked up by its kind alone too when the group's name says the
/// kind's family ("vehicleadvertisedprice" under a `Price`, "Exterior" under a `ColorGroup`):
/// its code says what the amount or name is, as a column's header would.
fn kind_forms(name: &str) -> Vec<String> {
    let Some((base, kind, coded)) = kind_of(name) else {
        return Vec::new();
    };
    // A price code is looked up alone: STAR's "List" (its advertised price) is no "List
    // Price" (an MSRP, loosely), so a code lotsync does not know is read as nothing.
    let mut forms = if coded && squash(base).contains("price") {
        Vec::new()
    } else {
        vec![
            squash(&format!("{kind}{base}")),
            squash(&format!("{base}{kind}")),
        ]
    };
    let alone = squash(kind);
    let family = |t: Target| match t {
        Target::Price | Target::InternetPrice | Target::Msrp => 1,
        Target::ExteriorColor | Target::InteriorColor => 2,
        _ => 0,
    };
    let base = squash(base);
    let same_family = if coded {
        vocabulary::target_of(&alone).is_some_and(|t| match family(t) {
            1 => base.contains("price"),
            2 => base.contains("color") || base.contains("colour"),
            _ => false,
        })
    } else {
        vocabulary::target_of(&base)
            .zip(vocabulary::target_of(&alone))
            .is_some_and(|(a, b)| family(a) != 0 && family(a) == family(b))
    };
    if same_family {
        forms.push(alone);
    }
    forms
}

/// `("Price", "Internet", false)` for a last path part `Price[@type=Internet]`, and
/// `("Price", "InternetPrice", true)` for a group told apart by a code child,
/// `Price[PriceCode=InternetPrice]`.
fn kind_of(name: &str) -> Option<(&str, &str, bool)> {
    let last = name.rsplit('/').next().unwrap_or(name);
    let (base, rest) = last.split_once('[')?;
    let coded = !rest.starts_with('@');
    let (_, kind) = rest.trim_end_matches(']').split_once('=')?;
    Some((base, kind, coded))
}

/// Whether a plain XML path has namesakes told apart by an attribute that auto binds
/// (`Price` beside `Price[@type=Internet]`), or lies in a group told apart by a code child
/// (`Pricing/Price/ChargeAmount` beside `Pricing/Price[PriceCode=InternetPrice]`): the plain
/// path is then the mixture of them all.
fn has_bound_kinds(name: &str, names: &[(FieldId, &str)]) -> bool {
    let parent = name.rsplit_once('/').map(|(parent, _)| parent);
    names.iter().any(|&(_, other)| {
        let attribute = other
            .strip_prefix(name)
            .is_some_and(|rest| rest.starts_with("[@"));
        let coded = parent.is_some_and(|parent| {
            other
                .strip_prefix(parent)
                .is_some_and(|rest| rest.starts_with('[') && !rest.contains('/'))
        });
        (attribute || coded)
            && kind_forms(other)
                .iter()
                .any(|form| vocabulary::target_of(form).is_some())
    })
}

/// A second field named like the one that feeds a target: two columns both headed "Price".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Twin {
    pub target: Target,
    /// The field read (the first).
    pub used: FieldId,
    pub other: FieldId,
}

/// Targets whose two columns are read together, field by field: a transmission "Unknown"
/// beside a "6-Speed Automatic" description, a paint name ("Quicksand") beside a generic
/// colour ("Tan").
pub const SECOND_READ: [Target; 3] = [
    Target::Transmission,
    Target::ExteriorColor,
    Target::InteriorColor,
];

/// Which source field feeds which target, for one file.
#[derive(Debug, Clone, Default)]
pub struct Binding {
    pub by_target: BTreeMap<Target, FieldId>,
    /// The same, indexed by target: `field` is on the hot path of every record.
    slots: Vec<Option<FieldId>>,
    /// Targets matched by their header rather than named in the profile.
    pub by_header: Vec<Target>,
    /// Fields the profile names that the file does not have (yet: XML paths appear as read).
    pub missing: Vec<(Target, String)>,
    /// Things a person should know about the matching.
    pub notes: Vec<String>,
    /// Fields named like the one bound to a target (the same name in a profile's terms, or
    /// in auto's), whose values must agree with its values on every record.
    pub twins: Vec<Twin>,
    /// Fields no header named, taken by their values (`mapper::infer`), with how many of
    /// the sampled values agreed.
    pub by_values: Vec<Likeness>,
    /// When no column is the VIN: the columns looked at, best first, with their share of
    /// VIN-like values.
    pub vin_candidates: Vec<Likeness>,
    /// Further numbered columns of a list field ("Image Url 2" after "Image Url 1"), whose
    /// items follow the bound column's.
    pub continued: Vec<(Target, FieldId)>,
    /// The VIN was matched by a header naming a non-road serial ("Serial", "HIN"): read it
    /// leniently whatever the profile's `vin_check`.
    pub serial_vin: bool,
    /// A second column named for a target that [`SECOND_READ`] lists ("TransmissionDescription"
    /// beside "Transmission", "ExteriorGenericColor" beside "ExteriorColor"): read with the
    /// first, field by field, where the first says nothing. For the trim, the plain "Series"
    /// beside "Series Detail": read only where the detail is empty.
    pub seconds: BTreeMap<Target, FieldId>,
    /// The unit the mileage column's own name gives ("Odometer (km)", "Kilometres"), for the
    /// values that name none.
    pub miles_unit: Option<DistanceUnit>,
    /// Colour targets whose bound column is a generic colour ("Generic Color", "Exterior
    /// Generic Color") beside a factory paint name ([`Binding::seconds`]): the dealer's own
    /// colour is used where it is filled, the paint name where it is not.
    pub generic: Vec<Target>,
    /// An XML element of one name found at another depth too (STAR's `VehicleStockString`
    /// on the line item or on its vehicle): read where the bound one is missing.
    pub alternates: Vec<(Target, FieldId)>,
    /// How many schema names were looked at.
    pub(super) seen_names: usize,
}

impl Binding {
    /// Matches the profile against the file's field names.
    pub fn new(profile: &Profile, schema: &Schema) -> Binding {
        let mut binding = Binding::default();
        binding.extend(profile, schema);
        binding
    }

    /// Matches the names added to the schema since the last call (XML paths appear as read).
    /// Of two names alike, the first is bound and the second becomes its [`Twin`]: alike for
    /// a profile is the same name ignoring case, for auto the same letters and digits
    /// ("Stock #" and "STOCK"). Two different spellings auto knows ("Color" and "Ext Color")
    /// are not twins: the first column is used, and a note says so.
    pub fn extend(&mut self, profile: &Profile, schema: &Schema) {
        let new_names: Vec<(FieldId, &str)> = schema.names().skip(self.seen_names).collect();
        self.seen_names = schema.len();
        self.missing.clear();
        for (&target, source) in &profile.fields {
            if let Some(number) = column_number(source) {
                if self.field(target).is_none() {
                    let column = number
                        .checked_sub(1)
                        .filter(|&i| schema.numbered() && i < schema.len());
                    match column {
                        Some(i) => self.set(target, i as FieldId, schema.name(i as FieldId)),
                        None => self.missing.push((target, source.clone())),
                    }
                }
                continue;
            }
            for &(id, name) in &new_names {
                if !names_match(name, source) {
                    continue;
                }
                match self.field(target) {
                    None => self.set(target, id, name),
                    Some(used) => self.twins.push(Twin {
                        target,
                        used,
                        other: id,
                    }),
                }
            }
            if self.field(target).is_none() {
                self.missing.push((target, source.clone()));
            }
        }
        if !profile.auto {
            return;
        }
        for &(id, name) in &new_names {
            if self.by_target.values().any(|&bound| bound == id)
                || self.twins.iter().any(|twin| twin.other == id)
            {
                continue;
            }
            if has_bound_kinds(name, &new_names) {
                continue;
            }
            let whole = squash(name);
            let last = squash(name.rsplit('/').next().unwrap_or(name));
            // The whole name first, then the last path part; a loose name ("Type", "ID")
            // gives way to another of the new names that names its target plainly.
            let others = || {
                new_names
                    .iter()
                    .filter(move |&&(other, _)| other != id)
                    .map(|&(_, n)| n)
            };
            let mut forms = vec![whole.clone(), last.clone()];
            forms.extend(kind_forms(name));
            // A report's "EXT COLOR DESC", "TRANSMISSION DESCRIPTION": the field described.
            forms.extend(
                ["description", "desc"]
                    .iter()
                    .find_map(|suffix| last.strip_suffix(suffix))
                    .filter(|stem| !stem.is_empty())
                    // "Vehicle Description" is a description, not the "Vehicle" cell.
                    .filter(|stem| vocabulary::target_of(stem) != Some(Target::YearMakeModel))
                    .map(str::to_owned),
            );
            // Numbered list columns ("Image Url 1", `image[0].url`, "Photo2") continue one list.
            let numbered = numbered_list_stem(&last);
            forms.extend(numbered.clone());
            let free = |t: &Target| !profile.fields.contains_key(t);
            let matched = forms.iter().find_map(|squashed| {
                let target = vocabulary::target_of(squashed).filter(free)?;
                if !vocabulary::gives_way(squashed, target, others()) {
                    return Some((target, squashed));
                }
                // Giving way, it may mean another field that nothing names plainly.
                let instead = vocabulary::instead(squashed)
                    .filter(free)
                    .filter(|&t| !vocabulary::named_plainly(t, others()))?;
                Some((instead, squashed))
            });
            let Some((target, matched_name)) = matched else {
                continue;
            };
            if let Some(&first) = self.by_target.get(&target) {
                let first_last = squash(schema.name(first).rsplit('/').next().unwrap_or(""));
                if numbered.is_some() && numbered_list_stem(&first_last) == numbered {
                    self.continued.push((target, id));
                    continue;
                }
                // The same element at another depth: one field, wherever a record puts it.
                if first_last == last && name.contains('/') && squash(schema.name(first)) != whole {
                    self.alternates.push((target, id));
                    continue;
                }
                // A code beside its description (STAR's `Model` "CK10543" and
                // `ModelDescription` "Silverado 1500"): the description is the value.
                let described = ["description", "name"]
                    .iter()
                    .any(|suffix| last.strip_suffix(suffix) == Some(first_last.as_str()));
                // (Transmission and the colours read a description with their code instead,
                // and a trim its detail: below.)
                let paired = SECOND_READ.contains(&target) || target == Target::Trim;
                if described && !paired {
                    self.notes.push(format!(
                        "{:?} looks like a code beside its description {name:?}; using {name:?}",
                        schema.name(first),
                    ));
                    self.set(target, id, name);
                    continue;
                }
                if squash(schema.name(first)) == whole {
                    self.twins.push(Twin {
                        target,
                        used: first,
                        other: id,
                    });
                    continue;
                }
                // A trim's "detail" column says more: read first, the other where it is empty.
                if target == Target::Trim
                    && !self.seconds.contains_key(&target)
                    && whole.contains("detail")
                {
                    self.seconds.insert(target, first);
                    self.set(target, id, name);
                    self.notes.push(format!(
                        "{name:?} and {:?} both look like trim; {name:?} is used where it is \
                         filled",
                        schema.name(first),
                    ));
                    continue;
                }
                if target == Target::Trim
                    && !self.seconds.contains_key(&target)
                    && squash(schema.name(first)).contains("detail")
                {
                    self.seconds.insert(target, id);
                    continue;
                }
                let is_generic = |n: &str| squash(n).contains("generic");
                let colour = matches!(target, Target::ExteriorColor | Target::InteriorColor);
                if colour && !self.seconds.contains_key(&target) && is_generic(name) {
                    self.seconds.insert(target, first);
                    self.set(target, id, name);
                    self.generic.push(target);
                    self.notes.push(format!(
                        "{name:?} is a generic colour beside the paint name {:?}: used where \
                         it is filled",
                        schema.name(first)
                    ));
                    continue;
                }
                if colour && !self.seconds.contains_key(&target) && is_generic(schema.name(first)) {
                    self.seconds.insert(target, id);
                    self.generic.push(target);
                    self.notes.push(format!(
                        "{:?} is a generic colour beside the paint name {name:?}: used where \
                         it is filled",
                        schema.name(first)
                    ));
                    continue;
                }
                if SECOND_READ.contains(&target) && !self.seconds.contains_key(&target) {
                    self.seconds.insert(target, id);
                    self.notes.push(format!(
                        "{:?} and {:?} both look like {}; each is used where the other says \
                         nothing, and a value they disagree on is left out",
                        schema.name(first),
                        name,
                        target.name(),
                    ));
                    continue;
                }
                self.notes.push(format!(
                    "{:?} and {:?} both look like {}; using {:?}",
                    schema.name(first),
                    name,
                    target.name(),
                    schema.name(first)
                ));
                continue;
            }
            if target == Target::Location && profile.locations.is_empty() {
                self.notes.push(format!(
                    "{name:?} looks like a lot code, but the profile has no [locations] table: \
                     every vehicle goes to the feed's location"
                ));
                continue;
            }
            self.set(target, id, name);
            self.by_header.push(target);
            if target == Target::Vin && vocabulary::is_serial_header(matched_name) {
                self.serial_vin = true;
            }
        }
        self.unit_attribute(profile, schema);
    }

    /// The unit attribute of the XML element read as the mileage (STAR's
    /// `<DeliveryDistanceMeasure unitCode="kilometer">`), when nothing else says the unit.
    fn unit_attribute(&mut self, profile: &Profile, schema: &Schema) {
        let (Some(miles), None) = (self.field(Target::Miles), self.field(Target::MileageUnit))
        else {
            return;
        };
        if profile.fields.contains_key(&Target::MileageUnit) {
            return;
        }
        let element = schema.name(miles).to_owned();
        let unit = ["unitCode", "unit", "uom", "units"].iter().find_map(|a| {
            schema
                .names()
                .find(|(_, n)| n.strip_prefix(element.as_str()) == Some(&format!("/@{a}")))
                .map(|(id, _)| id)
        });
        if let Some(id) = unit {
            self.set(Target::MileageUnit, id, "");
        }
    }

    /// Takes what the values of the unmatched columns say: binds the columns recognized,
    /// keeps the notes and the VIN candidates.
    pub fn adopt(&mut self, recognition: Recognition) {
        for released in recognition.released {
            if self.field(released.target) == Some(released.field) {
                self.by_target.remove(&released.target);
                self.slots[released.target as usize] = None;
                self.by_header.retain(|t| *t != released.target);
                if released.target == Target::Vin {
                    self.serial_vin = false;
                }
            }
        }
        for likeness in recognition.taken {
            // Taken by its values: the column's name said nothing lotsync knows.
            self.set(likeness.target, likeness.field, "");
            self.by_values.push(likeness);
        }
        self.notes.extend(recognition.notes);
        self.vin_candidates = recognition.vin_candidates;
    }

    fn set(&mut self, target: Target, id: FieldId, name: &str) {
        if target == Target::Miles {
            self.miles_unit = vocabulary::header_unit(name);
        }

        self.by_target.insert(target, id);
        let slot = target as usize;
        if self.slots.len() <= slot {
            self.slots.resize(slot + 1, None);
        }
        self.slots[slot] = Some(id);
    }

    /// The source field of a target.
    pub fn field(&self, target: Target) -> Option<FieldId> {
        self.slots.get(target as usize).copied().flatten()
    }

    /// The field read for a target where its own is missing ([`Binding::alternates`]).
    pub fn alternate(&self, target: Target) -> Option<FieldId> {
        self.alternates
            .iter()
            .find(|(t, _)| *t == target)
            .map(|&(_, id)| id)
    }

    /// `target <- "source"` lines for people, in target order; with the column's number
    /// when another column has a name alike.
    pub fn describe(&self, schema: &Schema) -> Vec<String> {
        self.by_target
            .iter()
            .map(|(target, &id)| {
                let name = schema.name(id);
                let alike = schema.numbered() && {
                    let squashed = squash(name);
                    schema
                        .names()
                        .any(|(other, n)| other != id && squash(n) == squashed)
                };
                let continued = self.continued.iter().filter(|(t, _)| t == target).count();
                let continued = match continued {
                    0 => String::new(),
                    1 => " and the numbered column after it".to_owned(),
                    n => format!(" and the {n} numbered columns after it"),
                };
                let by_values = self
                    .by_values
                    .iter()
                    .find(|l| l.target == *target)
                    .map(|l| format!(" (by its values: {})", l.shown()))
                    .unwrap_or_default();
                if alike {
                    format!(
                        "{} <- {name:?} (column {}){continued}{by_values}",
                        target.name(),
                        id + 1
                    )
                } else {
                    format!("{} <- {name:?}{continued}{by_values}", target.name())
                }
            })
            .collect()
    }

    /// Source fields nothing reads.
    pub fn unused<'a>(&self, schema: &'a Schema) -> Vec<&'a str> {
        schema
            .names()
            .filter(|(id, _)| {
                !self.by_target.values().any(|bound| bound == id)
                    && !self.continued.iter().any(|(_, more)| more == id)
                    && !self.alternates.iter().any(|(_, other)| other == id)
            })
            .map(|(_, name)| name)
            .collect()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::feed::{Item, Record};

    /// The schema of a CSV header line.
    pub(in crate::mapper) fn schema_of(header: &str) -> Schema {
        let data = format!("{header}\n");
        let mut r = crate::feed::from_bytes(data.as_bytes(), &ReadOptions::default()).unwrap();
        let mut rec = Record::default();
        assert_eq!(r.next(&mut rec).unwrap(), Item::End);
        r.schema().clone()
    }

    #[test]
    fn auto_recognizes_dms_header_spellings() {
        for (header, target) in [
            ("VIN", Target::Vin),
            ("Vin Number", Target::Vin),
            ("VIN#", Target::Vin),
            ("Stock", Target::Stock),
            ("Stock #", Target::Stock),
            ("StockNo", Target::Stock),
            ("Stock Number", Target::Stock),
            ("Miles", Target::Miles),
            ("Mileage", Target::Miles),
            ("Odometer", Target::Miles),
            ("Price", Target::Price),
            ("Selling Price", Target::Price),
            ("Internet Price", Target::InternetPrice),
            ("MSRP", Target::Msrp),
            ("Ext. Color", Target::ExteriorColor),
            ("ExteriorColor", Target::ExteriorColor),
            ("Exterior Color", Target::ExteriorColor),
            ("New/Used", Target::Type),
            ("Type", Target::Type),
            ("Condition", Target::Type),
            ("Photo URLs", Target::Images),
            ("ImageList", Target::Images),
            ("Images", Target::Images),
            ("Photos", Target::Images),
            ("Options", Target::Options),
            ("Features", Target::Options),
            ("Body Type", Target::BodyStyle),
            ("Drivetrain", Target::DriveType),
        ] {
            let schema = schema_of(header);
            let binding = Binding::new(&Profile::auto(), &schema);
            assert_eq!(binding.field(target), Some(0), "{header} -> {target:?}");
        }
    }

    #[test]
    fn xml_paths_match_whole_or_by_last_part() {
        let schema = schema_of("@VIN,Prices/Internet,Colors/Interior,Photos/Photo,Options/Option");
        let b = Binding::new(&Profile::auto(), &schema);
        assert_eq!(b.field(Target::Vin), Some(0));
        assert_eq!(b.field(Target::InternetPrice), Some(1));
        assert_eq!(b.field(Target::InteriorColor), Some(2));
        assert_eq!(b.field(Target::Images), Some(3));
        assert_eq!(b.field(Target::Options), Some(4));
    }

    #[test]
    fn xml_elements_told_apart_by_an_attribute_match_by_it() {
        let schema = schema_of(
            "Price,Price[@type=Internet],Price[@type=MSRP],Price[@type=Invoice],Colors/Color[@type=Exterior],Price[@type=Sale],Photos/Photo,Photos/Photo[@type=Exterior]",
        );
        let b = Binding::new(&Profile::auto(), &schema);
        assert_eq!(b.field(Target::InternetPrice), Some(1));
        assert_eq!(b.field(Target::Msrp), Some(2));
        assert_eq!(b.field(Target::ExteriorColor), Some(4));
        assert_eq!(b.field(Target::Price), Some(5), "not the plain mixture");
        assert_eq!(
            b.field(Target::Images),
            Some(6),
            "photos tagged by kind stay one list"
        );
        assert_eq!(
            b.unused(&schema),
            [
                "Price",
                "Price[@type=Invoice]",
                "Photos/Photo[@type=Exterior]"
            ]
        );
    }

    #[test]
    fn named_fields_win_and_the_first_of_two_lookalikes_is_used() {
        let mut profile = Profile::auto();
        profile.fields.insert(Target::Price, "Special".into());
        let schema = schema_of("Price,Special,Color,Ext Color,Lot");
        let b = Binding::new(&profile, &schema);
        assert_eq!(b.field(Target::Price), Some(1));
        assert_eq!(b.field(Target::ExteriorColor), Some(2));
        assert_eq!(b.field(Target::Location), None, "no [locations]: not used");
        assert_eq!(b.notes.len(), 2, "{:?}", b.notes);
        assert_eq!(b.unused(&schema), vec!["Price", "Ext Color", "Lot"]);
    }

    #[test]
    fn fields_named_alike_are_twins_and_other_lookalikes_are_not() {
        let schema = schema_of("Stock #,VIN,Price,STOCK,price,Selling Price,Color,Ext Color");
        let b = Binding::new(&Profile::auto(), &schema);
        assert_eq!(b.field(Target::Stock), Some(0));
        assert_eq!(b.field(Target::Price), Some(2));
        let twin = |target, used, other| Twin {
            target,
            used,
            other,
        };
        assert_eq!(
            b.twins,
            [twin(Target::Stock, 0, 3), twin(Target::Price, 2, 4)]
        );
        // Other spellings: the first column is used, and said.
        assert_eq!(b.field(Target::ExteriorColor), Some(6));
        assert_eq!(b.notes.len(), 2, "{:?}", b.notes);

        // A profile's name matches ignoring case; a number picks one column.
        let mut profile = Profile::auto();
        profile.fields.insert(Target::Price, "PRICE".into());
        let b = Binding::new(&profile, &schema);
        assert_eq!(
            b.twins,
            [twin(Target::Price, 2, 4), twin(Target::Stock, 0, 3)]
        );
        profile.fields.insert(Target::Price, "#5".into());
        profile.fields.insert(Target::Stock, " #4 ".into());
        let b = Binding::new(&profile, &schema);
        assert_eq!(b.field(Target::Price), Some(4));
        assert_eq!(b.field(Target::Stock), Some(3));
        assert!(b.twins.is_empty(), "{:?}", b.twins);
        assert!(b.unused(&schema).contains(&"Price"));
        let described = b.describe(&schema);
        assert!(described.contains(&"stock <- \"STOCK\" (column 4)".to_owned()));
        assert!(described.contains(&"price <- \"price\" (column 5)".to_owned()));
        assert!(described.contains(&"vin <- \"VIN\"".to_owned()));
        profile.fields.insert(Target::Price, "#9".into());
        let b = Binding::new(&profile, &schema);
        assert_eq!(b.missing, [(Target::Price, "#9".to_owned())]);
    }

    #[test]
    fn profile_files_are_checked() {
        let tmp = crate::testing::temp_dir("mapper");
        let dir = tmp.path().to_owned();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("good.toml"),
            "vin_check = \"lenient\"\n[fields]\nvin = \"Serial\"\n[locations]\nMAIN = 10\n",
        )
        .unwrap();
        let p = Profile::find("good", &dir).unwrap();
        assert_eq!(p.name, "good");
        assert_eq!(p.vin_check, VinCheck::Lenient);
        std::fs::write(dir.join("bad.toml"), "[fields]\nvinn = \"x\"\n").unwrap();
        let err = Profile::find("bad", &dir).unwrap_err();
        assert!(matches!(err, ProfileError::Parse { .. }), "{err:?}");
        // The message names the file; TOML's reason is its source, said once in the chain.
        let said = crate::text::Chain(&err).to_string();
        assert!(
            said.starts_with("profile ") && said.contains("vinn"),
            "{said}"
        );
        assert!(!err.to_string().contains("vinn"), "not twice: {said}");
        assert!(
            err.one_line().starts_with(&format!(
                "profile {}, line 2: unknown variant `vinn`, expected one of `vin`",
                dir.join("bad.toml").display()
            )),
            "{}",
            err.one_line()
        );
        std::fs::write(dir.join("zero.toml"), "[fields]\nprice = \"#0\"\n").unwrap();
        let err = Profile::find("zero", &dir).unwrap_err().to_string();
        assert!(
            err.ends_with("fields.price = \"#0\": columns are numbered from 1"),
            "{err}"
        );
        std::fs::write(dir.join("dated.toml"), "name_date = \"inv_%Y%m%d\"\n").unwrap();
        let dated = Profile::find("dated", &dir).unwrap();
        assert_eq!(dated.name_date.as_deref(), Some("inv_%Y%m%d"));
        std::fs::write(dir.join("undated.toml"), "name_date = \"%Y%m\"\n").unwrap();
        let err = Profile::find("undated", &dir).unwrap_err().to_string();
        assert!(
            err.ends_with("name_date = \"%Y%m\": %d is needed (a date is %Y, %m and %d)"),
            "{err}"
        );
        assert!(matches!(
            Profile::find("none", &dir),
            Err(ProfileError::NotFound { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
