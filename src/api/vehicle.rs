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
    #[serde(default, deserialize_with = "lenient_bool")]
    pub active: Option<bool>,
    /// Retail status; the sandbox says `in-stock` or `sold`.
    #[serde(default, deserialize_with = "lenient_string")]
    pub status: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub title_status: Option<String>,
    #[serde(rename = "type", default, deserialize_with = "lenient_string")]
    pub vehicle_type: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub stock: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub vin: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub slug: Option<String>,
    #[serde(default, deserialize_with = "lenient_price")]
    pub price: Option<PriceInfo>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub year: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub make: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub model: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub trim: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub body_style: Option<String>,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub lifted: Option<bool>,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub lowered: Option<bool>,
    #[serde(default, deserialize_with = "lenient_object")]
    pub exterior: Option<Exterior>,
    #[serde(default, deserialize_with = "lenient_object")]
    pub interior: Option<Interior>,
    #[serde(default, deserialize_with = "lenient_object")]
    pub odometer: Option<Odometer>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub image: Option<String>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub owners: Option<f64>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub doors: Option<f64>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub seats: Option<f64>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub drivetrain: Option<String>,
    #[serde(default, deserialize_with = "lenient_object")]
    pub transmission: Option<Transmission>,
    #[serde(default, deserialize_with = "lenient_object")]
    pub engine: Option<Engine>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub description: Option<String>,
    #[serde(default, deserialize_with = "lenient_list")]
    pub options: Vec<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub stocked_in_at: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub sold_at: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub created_at: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub updated_at: Option<String>,
    #[serde(default, deserialize_with = "lenient_organization")]
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

    /// Sold or in stock, only when the answer says (a status or a sold_at time); the spec's
    /// create answer carries neither, and "not said" must not read as "in stock".
    pub fn sold_state(&self) -> Option<bool> {
        match (self.status.as_deref(), &self.sold_at) {
            (Some(status), _) => Some(status.eq_ignore_ascii_case("sold")),
            (None, Some(_)) => Some(true),
            (None, None) => None,
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
    #[serde(default, deserialize_with = "lenient_string")]
    pub color: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub manufacturer_color: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Interior {
    #[serde(rename = "type", default, deserialize_with = "lenient_string")]
    pub interior_type: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub color: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub manufacturer_color: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Odometer {
    #[serde(default, deserialize_with = "lenient_number")]
    pub value: Option<f64>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub unit: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Transmission {
    #[serde(default, deserialize_with = "lenient_string")]
    pub name: Option<String>,
    #[serde(rename = "type", default, deserialize_with = "lenient_string")]
    pub transmission_type: Option<String>,
    /// The spec says integer but also "free text": "6", 6 and "6 Speed" all read as 6.
    #[serde(default, deserialize_with = "lenient_number")]
    pub speed: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Engine {
    #[serde(default, deserialize_with = "lenient_string")]
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
    #[serde(default, deserialize_with = "lenient_string")]
    pub name: Option<String>,
}

/// A notification as the service answers it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Notification {
    #[serde(deserialize_with = "id_number")]
    pub id: u64,
    #[serde(default, deserialize_with = "lenient_string")]
    pub title: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub message: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub level: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub read_at: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
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

/// An object of the expected shape, or None for anything else (a field of the wrong type is
/// ignored rather than failing the whole vehicle).
fn lenient_object<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    // Only a JSON object: serde would also read a list positionally into a struct.
    Ok(match Value::deserialize(d)? {
        object @ Value::Object(_) => serde_json::from_value(object).ok(),
        _ => None,
    })
}

/// The price object, or a bare number taken as the selling price.
fn lenient_price<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PriceInfo>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => Some(PriceInfo {
            selling: n.as_f64(),
            ..PriceInfo::default()
        }),
        other => lenient_object(other).unwrap_or(None),
    })
}

/// The organization object, or its bare id.
fn lenient_organization<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Organization>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => Some(Organization {
            id: n.as_f64(),
            name: None,
        }),
        other => lenient_object(other).unwrap_or(None),
    })
}

/// true/false, 1/0, or their text; anything else is None.
fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Bool(b) => Some(b),
        Value::Number(n) => n.as_f64().map(|n| n != 0.0),
        Value::String(s) => match s.trim() {
            "1" | "true" => Some(true),
            "0" | "false" => Some(false),
            _ => None,
        },
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
    fn fields_of_an_unexpected_type_are_ignored_not_fatal() {
        let v: Vehicle = serde_json::from_value(json!({
            "id": 1, "active": 1, "lifted": "0", "stock": 1001, "price": 19995,
            "organization": 100, "exterior": "Black", "odometer": [1], "make": {"x": 1}
        }))
        .unwrap();
        assert_eq!(v.active, Some(true));
        assert_eq!(v.lifted, Some(false));
        assert_eq!(v.stock.as_deref(), Some("1001"));
        assert_eq!(v.price.unwrap().selling, Some(19995.0));
        assert_eq!(v.organization.unwrap().id, Some(100.0));
        assert_eq!(v.exterior, None);
        assert_eq!(v.odometer, None);
        assert_eq!(v.make, None);
    }

    #[test]
    fn an_id_that_is_not_a_number_is_an_error() {
        assert!(serde_json::from_value::<Vehicle>(json!({"id": "abc"})).is_err());
        assert!(serde_json::from_value::<Vehicle>(json!({"vin": "X"})).is_err());
    }
}
