//! One record of an export, field by field, as the mapper read it: for each payload field,
//! the column it came from, the raw value there and the value sent; and what was left out
//! and why. `lotsync why` shows it for the last file that listed a car ("why does it show
//! the old price?").
//!
//! It reads the file again through [`ExportFile`], as the feed read it (its profile, its
//! location, the columns its earlier files recognized), and stops at the record asked for.
//! It does not find the file (the caller knows the archive) nor decide anything.

use super::export::{ExportError, ExportFile};
use super::{KeptColumns, Mapped, Problem, Profile, Target};
use std::path::Path;

/// One record of a file, traced.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordTrace {
    pub line: u64,
    /// Each field a column fed, in payload order.
    pub fields: Vec<FieldTrace>,
    /// The record could not be sent: `problems` say why.
    pub rejected: bool,
    /// Accepted: optional values left out, conversions worth knowing; rejected: why.
    pub problems: Vec<Problem>,
}

/// One payload field of a record: where it came from and what was sent.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldTrace {
    /// What the column feeds (`price`, `exterior_color`, `year_make_model`, …).
    pub field: &'static str,
    /// The column's name in the file (a CSV header, an XML path).
    pub column: String,
    /// The value as written (several values of a list field joined with ` | `).
    pub raw: String,
    /// The payload's values it became, by payload field (none: left out, or rejected).
    pub sent: Vec<(&'static str, serde_json::Value)>,
}

/// Which record to trace: the one at `line` when known, else the last one of `vin`.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    pub line: Option<u64>,
    pub vin: &'a str,
}

/// Reads `path` as its feed reads it and traces the record wanted; None when the file has
/// no such record.
pub fn trace_record(
    path: &Path,
    profile: &Profile,
    location_id: u64,
    kept: Option<KeptColumns>,
    wanted: Wanted<'_>,
) -> Result<Option<RecordTrace>, ExportError> {
    // A released file may end in a cut record: it was read that way.
    let mut export = ExportFile::open_kept(path, profile, location_id, true, kept)?;
    // Without a line: the VIN's first accepted record (the plan uses it; a later one of the
    // same VIN is rejected), else its first rejected one.
    let mut rejected_first = None;
    while let Some(mapped) = export.next_record()? {
        let (line, vin) = match &mapped {
            Mapped::Accepted(a) => (a.line, Some(a.payload.vin.as_str())),
            Mapped::Rejected(r) => (r.line, r.vin.as_deref().or(r.vin_text.as_deref())),
        };
        let hit = match wanted.line {
            Some(wanted_line) => line == wanted_line,
            None => vin == Some(wanted.vin),
        };
        if !hit {
            continue;
        }
        let traced = match mapped {
            Mapped::Accepted(a) => {
                let mut payload = serde_json::to_value(&a.payload).ok();
                if let (Some(serde_json::Value::Object(fields)), Some(sold)) =
                    (&mut payload, a.sold)
                {
                    fields.insert("sold".to_owned(), sold.into());
                }
                let problems = a.warnings.clone();
                RecordTrace {
                    line,
                    fields: fields(&export, payload.as_ref()),
                    rejected: false,
                    problems,
                }
            }
            Mapped::Rejected(r) => {
                let traced = RecordTrace {
                    line,
                    fields: fields(&export, None),
                    rejected: true,
                    problems: r.problems,
                };
                if wanted.line.is_none() {
                    rejected_first.get_or_insert(traced);
                    continue;
                }
                traced
            }
        };
        return Ok(Some(traced));
    }
    Ok(rejected_first)
}

/// Each bound column of the record just read, with the values it became.
fn fields(export: &ExportFile, payload: Option<&serde_json::Value>) -> Vec<FieldTrace> {
    let schema = export.reader().schema();
    let record = export.record();
    let binding = export.mapper().binding();
    let mut out = Vec::new();
    for (&target, &id) in &binding.by_target {
        let mut raw: Vec<&str> = record.all(id).collect();
        for (_, more) in binding.continued.iter().filter(|(t, _)| *t == target) {
            raw.extend(record.all(*more));
        }
        let sent = payload_fields(target)
            .iter()
            .filter_map(|&name| Some((name, sent_value(payload?, name)?)))
            .collect();
        out.push(FieldTrace {
            field: target.name(),
            column: schema.name(id).to_owned(),
            raw: raw.join(" | "),
            sent,
        });
    }
    out
}

/// A payload field's value by its name, `price.selling` for a part of the price object (a
/// bare price is the selling one).
fn sent_value(payload: &serde_json::Value, name: &str) -> Option<serde_json::Value> {
    let Some((field, part)) = name.split_once('.') else {
        return payload.get(name).cloned();
    };
    match payload.get(field)? {
        serde_json::Value::Object(parts) => parts.get(part).cloned(),
        bare if part == "selling" => Some(bare.clone()),
        _ => None,
    }
}

/// The payload fields a target's column feeds (`sold`: what the export says of it; a price's
/// part by its path).
fn payload_fields(target: Target) -> Vec<&'static str> {
    match target {
        Target::Price => vec!["price.selling"],
        Target::InternetPrice => vec!["price.internet"],
        Target::Msrp => vec!["price.msrp"],
        Target::Type | Target::NewFlag => vec!["type"],
        Target::Miles | Target::MileageUnit => vec!["miles"],
        Target::Transmission => vec!["transmission_type", "transmission_speed"],
        Target::Engine => vec!["engine_displacement", "engine_cylinders"],
        Target::YearMakeModel => vec!["year", "make", "model"],
        Target::Location => vec!["location_id"],
        Target::Status => vec!["sold", "active"],
        Target::Certified => vec!["title_status"],
        other => vec![other.name()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPORT: &str = "\
VIN,Stock #,Year,Make,Model,Internet Price,Odometer,Ext Color,Int Color
1HGCM82633A004352,S1,2019,Honda,Accord,\"$21,880\",\"21,880\",Agate Black Metallic,Ebony
1M8GDM9AXKP042788,S2,2020,Ford,F-150,\"$35,000\",1200,Oxford White,Moonbeam Shimmer
1M8GDM9AXKP042788,S2,2020,Ford,F-150,\"$34,500\",1250,Oxford White,Moonbeam Shimmer
";

    fn traced(wanted: Wanted<'_>) -> Option<RecordTrace> {
        let dir = crate::testing::temp_dir("trace");
        let path = dir.path().join("inv.csv");
        std::fs::write(&path, EXPORT).unwrap();
        trace_record(&path, &Profile::auto(), 10, None, wanted).unwrap()
    }

    fn field<'t>(trace: &'t RecordTrace, name: &str) -> &'t FieldTrace {
        trace
            .fields
            .iter()
            .find(|f| f.field == name)
            .unwrap_or_else(|| panic!("no {name} in {trace:#?}"))
    }

    /// Each field says its column, the value as written and what was sent.
    #[test]
    fn a_record_is_traced_field_by_field_from_column_to_payload() {
        let trace = traced(Wanted {
            line: Some(2),
            vin: "",
        })
        .unwrap();
        assert_eq!(trace.line, 2);
        assert!(!trace.rejected);
        let price = field(&trace, "internet_price");
        assert_eq!(price.column, "Internet Price");
        assert_eq!(price.raw, "$21,880");
        assert_eq!(price.sent, [("price.internet", serde_json::json!(21880))]);
        let miles = field(&trace, "miles");
        assert_eq!(
            (miles.column.as_str(), miles.raw.as_str()),
            ("Odometer", "21,880")
        );
        assert_eq!(miles.sent, [("miles", serde_json::json!(21880))]);
        let color = field(&trace, "exterior_color");
        assert_eq!(color.raw, "Agate Black Metallic");
        assert_eq!(color.sent, [("exterior_color", serde_json::json!("Black"))]);
        let vin = field(&trace, "vin");
        assert_eq!(vin.sent, [("vin", serde_json::json!("1HGCM82633A004352"))]);
    }

    /// Without a line, the VIN's first accepted record is the one its file's plan used (a
    /// second one of the VIN is rejected); a value left out is said, and sends nothing.
    #[test]
    fn the_first_accepted_record_of_a_vin_is_traced_with_what_was_left_out() {
        let trace = traced(Wanted {
            line: None,
            vin: "1M8GDM9AXKP042788",
        })
        .unwrap();
        assert_eq!(trace.line, 3);
        assert_eq!(field(&trace, "miles").raw, "1200");
        let interior = field(&trace, "interior_color");
        assert_eq!(interior.raw, "Moonbeam Shimmer");
        assert!(interior.sent.is_empty(), "{interior:?}");
        assert!(
            trace.problems.iter().any(|p| p.field == "interior_color"),
            "{:?}",
            trace.problems
        );
    }

    /// An XML feed laid out as Google's vehicle ads specification gives it (the blind corpus's
    /// `google-vehicle-ads-rss`, its sources in that folder's SOURCE.md): each field's element,
    /// its text as written and what was sent.
    #[test]
    fn a_google_vehicle_ads_item_is_traced_from_its_elements() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fidelity-blind/google-vehicle-ads-rss/vehicle_ads_feed.xml");
        let wanted = Wanted {
            line: None,
            vin: "1GC7CBZ2XMT776470",
        };
        let trace = trace_record(&path, &Profile::auto(), 10, None, wanted)
            .unwrap()
            .unwrap();
        assert!(!trace.rejected, "{trace:#?}");
        let miles = field(&trace, "miles");
        assert!(miles.column.ends_with("mileage"), "{miles:?}");
        assert_eq!(miles.raw, "86,516 miles");
        assert_eq!(miles.sent, [("miles", serde_json::json!(86516))]);
        let price = trace
            .fields
            .iter()
            .find(|f| f.raw == "37,250.00 USD")
            .unwrap_or_else(|| panic!("no price in {trace:#?}"));
        assert!(price.column.ends_with("price"), "{price:?}");
        assert_eq!(price.sent, [("price.selling", serde_json::json!(37250))]);
        let color = field(&trace, "exterior_color");
        assert_eq!(color.raw, "Magnetite Gray");
        assert_eq!(color.sent, [("exterior_color", serde_json::json!("Gray"))]);
    }

    /// Two price columns: each says only the part of the price it fed.
    #[test]
    fn each_price_column_says_its_own_part_of_the_price() {
        let dir = crate::testing::temp_dir("trace-prices");
        let path = dir.path().join("inv.csv");
        std::fs::write(
            &path,
            "VIN,Stock #,Price,Internet Price,MSRP\n1HGCM82633A004352,S1,22000,21000,25000\n",
        )
        .unwrap();
        let wanted = Wanted {
            line: Some(2),
            vin: "",
        };
        let trace = trace_record(&path, &Profile::auto(), 10, None, wanted)
            .unwrap()
            .unwrap();
        for (name, sent, value) in [
            ("price", "price.selling", 22000),
            ("internet_price", "price.internet", 21000),
            ("msrp", "price.msrp", 25000),
        ] {
            let traced = field(&trace, name);
            assert_eq!(
                traced.sent,
                [(sent, serde_json::json!(value))],
                "{trace:#?}"
            );
        }
    }

    #[test]
    fn a_vin_the_file_does_not_list_is_none() {
        let none = traced(Wanted {
            line: None,
            vin: "2HGCM82633A004352",
        });
        assert_eq!(none, None);
    }
}
