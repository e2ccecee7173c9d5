//! What the service answers: the vehicle representation of spec §2.1 and notifications.
//!
//! These types are deliberately tolerant: every field but the id may be missing, unknown fields
//! are ignored, and numbers that the spec's samples sometimes send as strings (year, speeds)
//! are read either way. They are never sent back; requests use `VehiclePayload`.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A vehicle as the service represents it (§2.1).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Vehicle {
    #[serde(deserialize_with = "id_number")]
    pub id: u64,
    #[serde(default)]
    pub active: Option<bool>,
    /// Retail status; the sandbox says `in-stock` or `sold`.
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub title_status: Option<String>,
    #[serde(rename = "type", default)]
    pub vehicle_type: Option<String>,
    #[serde(default)]
    pub stock: Option<String>,
    #[serde(default)]
    pub vin: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub slug: Option<String>,
    #[serde(default)]
    pub price: Option<PriceInfo>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub year: Option<String>,
    #[serde(default)]
    pub make: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub trim: Option<String>,
    #[serde(default)]
    pub body_style: Option<String>,
    #[serde(default)]
    pub lifted: Option<bool>,
    #[serde(default)]
    pub lowered: Option<bool>,
    #[serde(default)]
    pub exterior: Option<Exterior>,
    #[serde(default)]
    pub interior: Option<Interior>,
    #[serde(default)]
    pub odometer: Option<Odometer>,
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub owners: Option<f64>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub doors: Option<f64>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub seats: Option<f64>,
    #[serde(default)]
    pub drivetrain: Option<String>,
    #[serde(default)]
    pub transmission: Option<Transmission>,
    #[serde(default)]
    pub engine: Option<Engine>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default, deserialize_with = "lenient_list")]
    pub options: Vec<String>,
    #[serde(default)]
    pub stocked_in_at: Option<String>,
    #[serde(default)]
    pub sold_at: Option<String>,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub updated_at: Option<String>,
    #[serde(default)]
    pub organization: Option<Organization>,
}

impl Vehicle {
    /// Sold as the service sees it: status `sold`, or a sold_at time when no status is given.
    pub fn is_sold(&self) -> bool {
        match self.status.as_deref() {
            Some(status) => status.eq_ignore_ascii_case("sold"),
            None => self.sold_at.is_some(),
        }
    }
}

/// The price object of §2.1; every key optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct PriceInfo {
    #[serde(default, deserialize_with = "lenient_number")]
    pub selling: Option<f64>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub internet: Option<f64>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub retail: Option<f64>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub msrp: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Exterior {
    #[serde(default)]
    pub color: Option<String>,
    #[serde(default)]
    pub manufacturer_color: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Interior {
    #[serde(rename = "type", default)]
    pub interior_type: Option<String>,
    #[serde(default)]
    pub color: Option<String>,
    #[serde(default)]
    pub manufacturer_color: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Odometer {
    #[serde(default, deserialize_with = "lenient_number")]
    pub value: Option<f64>,
    #[serde(default)]
    pub unit: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Transmission {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(rename = "type", default)]
    pub transmission_type: Option<String>,
    /// The spec says integer but also "free text": "6", 6 and "6 Speed" all read as 6.
    #[serde(default, deserialize_with = "lenient_number")]
    pub speed: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Engine {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub displacement: Option<f64>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub cylinders: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Organization {
    #[serde(default, deserialize_with = "lenient_number")]
    pub id: Option<f64>,
    #[serde(default)]
    pub name: Option<String>,
}

/// A notification as the service answers it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Notification {
    #[serde(deserialize_with = "id_number")]
    pub id: u64,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub level: Option<String>,
    #[serde(default)]
    pub read_at: Option<String>,
    #[serde(default)]
    pub created_at: Option<String>,
}

/// The body of a notification to create.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NewNotification {
    pub title: String,
    pub message: String,
    pub level: NotificationLevel,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NotificationLevel {
    Info,
    Warning,
    Error,
}

/// An id as an integer or a string of digits.
fn id_number<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match Value::deserialize(d)? {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| serde::de::Error::custom(format!("id {n} is not a whole number"))),
        Value::String(s) => s
            .trim()
            .parse()
            .map_err(|_| serde::de::Error::custom(format!("id {s:?} is not a number"))),
        other => Err(serde::de::Error::custom(format!(
            "id {other} is not a number"
        ))),
    }
}

/// A number, a string starting with one ("6 Speed", "2.0L"), or null; anything else is None.
fn lenient_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            let s = s.trim();
            let end = s
                .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
                .unwrap_or(s.len());
            s[..end].parse().ok()
        }
        _ => None,
    })
}

/// A string or a number given as text; null and other shapes are None.
fn lenient_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
}

/// A JSON array of strings, or one string separated by commas.
fn lenient_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Array(items) => items
            .into_iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s),
                Value::Null => None,
                other => Some(other.to_string()),
            })
            .collect(),
        Value::String(s) => s
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tolerates_missing_and_extra_fields() {
        let v: Vehicle = serde_json::from_value(json!({"id": 7, "surprise": {"a": 1}})).unwrap();
        assert_eq!(v.id, 7);
        assert_eq!(v.vin, None);
        assert!(v.options.is_empty());
        assert!(!v.is_sold());
    }

    #[test]
    fn reads_numbers_the_samples_send_as_text() {
        let v: Vehicle = serde_json::from_value(json!({
            "id": "12", "year": 2021, "transmission": {"type": "Automatic", "speed": "6 Speed"},
            "engine": {"displacement": "3.5", "cylinders": 6}, "options": "A, B,,C",
            "status": "sold", "organization": {"id": 100, "name": "Demo", "createdAt": "x"}
        }))
        .unwrap();
        assert_eq!(v.id, 12);
        assert_eq!(v.year.as_deref(), Some("2021"));
        assert_eq!(v.transmission.as_ref().unwrap().speed, Some(6.0));
        assert_eq!(v.engine.as_ref().unwrap().displacement, Some(3.5));
        assert_eq!(v.options, vec!["A", "B", "C"]);
        assert!(v.is_sold());
    }

    #[test]
    fn an_id_that_is_not_a_number_is_an_error() {
        assert!(serde_json::from_value::<Vehicle>(json!({"id": "abc"})).is_err());
        assert!(serde_json::from_value::<Vehicle>(json!({"vin": "X"})).is_err());
    }
}
