//! Strict checks of request bodies, as the service makes them: one 422 message per problem.
//!
//! The allowed values are written here from spec §4.2 on their own, not taken from the client's
//! enums, so that a misspelling in the client cannot be mirrored by the sandbox; a test checks
//! that both agree.

use serde_json::{Map, Value};

pub const VEHICLE_TYPES: &[&str] = &["New", "Used", "Certified"];
pub const BODY_STYLES: &[&str] = &[
    "Truck",
    "Coupe",
    "Sedan",
    "SUV",
    "Convertible",
    "Hatchback",
    "Minivan-Van",
    "Wagon",
    "Limousine",
    "RV",
    "Motorcycle",
    "Snowmobile",
    "ATV-Quad",
    "Trailer",
    "PWC",
    "Other",
];
pub const BODY_TYPES: &[&str] = &["TBD"];
pub const FUELS: &[&str] = &[
    "Biodiesel",
    "Diesel",
    "Electric",
    "FFV-Ethanol",
    "Gas",
    "Hybrid-Electric",
    "Other",
    "CNG",
];
pub const COLORS: &[&str] = &[
    "Black", "Blue", "Brown", "Burgundy", "Gold", "Gray", "Green", "Orange", "Purple", "Red",
    "Silver", "Tan", "Teal", "White", "Yellow", "Khaki", "Beige", "Slate", "Pewter", "Charcoal",
];
pub const INTERIOR_TYPES: &[&str] = &["Leather", "Cloth", "Vinyl"];
pub const TITLE_STATUSES: &[&str] = &["Clear", "Salvage", "Rebuilt", "Parts Only"];
pub const TONNAGES: &[&str] = &[
    "Quarter Ton",
    "Half Ton",
    "Three Quarter Ton",
    "One Ton",
    "One and a Half Ton",
    "Two Ton",
];
pub const TRANSMISSION_TYPES: &[&str] = &["Manual", "Automatic"];
pub const TRANSMISSION_SPEEDS: &[&str] = &["4 Speed", "5 Speed", "6 Speed", "7 Speed"];
pub const DRIVE_TYPES: &[&str] = &["FWD", "RWD", "4x4", "AWD"];

/// Spec §4.2's allowed values, by payload field.
pub const ALLOWED_VALUES: &[(&str, &[&str])] = &[
    ("type", VEHICLE_TYPES),
    ("body_style", BODY_STYLES),
    ("body_type", BODY_TYPES),
    ("fuel", FUELS),
    ("exterior_color", COLORS),
    ("interior_color", COLORS),
    ("interior_type", INTERIOR_TYPES),
    ("title_status", TITLE_STATUSES),
    ("tonnage", TONNAGES),
    ("transmission_type", TRANSMISSION_TYPES),
    ("transmission_speed", TRANSMISSION_SPEEDS),
    ("drive_type", DRIVE_TYPES),
];

const PRICE_KEYS: &[&str] = &["selling", "internet", "msrp", "retail"];

/// A POST /v1/inventory body that passed every check: the fields the §2.1 answer shows. Enum
/// fields hold one of the allowed spellings; `price` is always the object form.
#[derive(Debug, Clone, Default)]
pub struct VehicleBody {
    pub location_id: u64,
    pub stock: String,
    pub vin: String,
    pub active: Option<bool>,
    pub make: Option<String>,
    pub model: Option<String>,
    pub trim: Option<String>,
    pub price: Option<Map<String, Value>>,
    pub miles: Option<u64>,
    pub vehicle_type: Option<String>,
    pub year: Option<u64>,
    pub body_style: Option<String>,
    pub exterior_color: Option<String>,
    pub interior_color: Option<String>,
    pub interior_type: Option<String>,
    pub title_status: Option<String>,
    pub transmission_type: Option<String>,
    pub transmission_speed: Option<String>,
    pub drive_type: Option<String>,
    pub lifted: Option<bool>,
    pub lowered: Option<bool>,
    pub doors: Option<f64>,
    pub seats: Option<u64>,
    pub engine_displacement: Option<f64>,
    pub engine_cylinders: Option<u64>,
    pub options: Vec<String>,
    pub images: Vec<String>,
}

/// Checks a vehicle body; `Err` holds one message per problem. `location_ok` says whether a
/// location belongs to the calling organization.
pub fn vehicle_body(
    body: &Value,
    location_ok: &dyn Fn(u64) -> bool,
) -> Result<VehicleBody, Vec<String>> {
    let Some(map) = body.as_object() else {
        return Err(vec!["The request body must be a JSON object.".into()]);
    };
    let mut c = Checker {
        map,
        problems: Vec::new(),
    };
    let location_id = c.required_integer("location_id");
    if let Some(id) = location_id.filter(|id| !location_ok(*id)) {
        c.problems.push(format!(
            "The selected location_id {id} is invalid for this organization."
        ));
    }
    let stock = c.required_string("stock");
    let vin = c.required_string("vin");
    let v = VehicleBody {
        location_id: location_id.unwrap_or_default(),
        stock: stock.unwrap_or_default(),
        vin: vin.unwrap_or_default(),
        active: c.boolean("active"),
        make: c.string("make"),
        model: c.string("model"),
        trim: c.string("trim"),
        price: c.price(),
        miles: c.integer("miles"),
        vehicle_type: c.choice("type", VEHICLE_TYPES),
        year: c.year(),
        body_style: c.choice("body_style", BODY_STYLES),
        exterior_color: c.choice("exterior_color", COLORS),
        interior_color: c.choice("interior_color", COLORS),
        interior_type: c.choice("interior_type", INTERIOR_TYPES),
        title_status: c.choice("title_status", TITLE_STATUSES),
        transmission_type: c.choice("transmission_type", TRANSMISSION_TYPES),
        transmission_speed: c.choice("transmission_speed", TRANSMISSION_SPEEDS),
        drive_type: c.choice("drive_type", DRIVE_TYPES),
        lifted: c.boolean("lifted"),
        lowered: c.boolean("lowered"),
        doors: c.number("doors"),
        seats: c.integer("seats"),
        engine_displacement: c.number("engine_displacement"),
        engine_cylinders: c.integer("engine_cylinders"),
        options: c.list("options"),
        images: c.list("images"),
    };
    // Checked like the rest, but not part of the §2.1 answer (the raw body keeps them).
    c.string("url");
    c.choice("body_type", BODY_TYPES);
    c.choice("fuel", FUELS);
    c.choice("tonnage", TONNAGES);
    if c.problems.is_empty() {
        Ok(v)
    } else {
        Err(c.problems)
    }
}

/// A notification body that passed the checks.
#[derive(Debug, Clone)]
pub struct NotificationBody {
    pub title: String,
    pub message: String,
    pub level: String,
}

pub fn notification_body(body: &Value) -> Result<NotificationBody, Vec<String>> {
    let Some(map) = body.as_object() else {
        return Err(vec!["The request body must be a JSON object.".into()]);
    };
    let mut c = Checker {
        map,
        problems: Vec::new(),
    };
    let title = c.required_string("title");
    let message = c.required_string("message");
    let level = c.choice("level", &["info", "warning", "error"]);
    match (title, message, c.problems.is_empty()) {
        (Some(title), Some(message), true) => Ok(NotificationBody {
            title,
            message,
            level: level.unwrap_or_else(|| "info".into()),
        }),
        _ => Err(c.problems),
    }
}

struct Checker<'a> {
    map: &'a Map<String, Value>,
    problems: Vec<String>,
}

impl<'a> Checker<'a> {
    /// The value of an optional field; null counts as absent.
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn required_string(&mut self, key: &str) -> Option<String> {
        match self.get(key) {
            None => {
                self.problems.push(format!("The {key} field is required."));
                None
            }
            Some(Value::String(s)) if s.trim().is_empty() => {
                self.problems.push(format!("The {key} field is required."));
                None
            }
            Some(_) => self.string(key),
        }
    }

    fn required_integer(&mut self, key: &str) -> Option<u64> {
        if self.get(key).is_none() {
            self.problems.push(format!("The {key} field is required."));
            return None;
        }
        self.integer(key)
    }

    fn string(&mut self, key: &str) -> Option<String> {
        match self.get(key)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.problems.push(format!(
                    "The {key} must be a string (got {}).",
                    json_type(other)
                ));
                None
            }
        }
    }

    /// A non-negative JSON integer (1.0 is not one).
    fn integer(&mut self, key: &str) -> Option<u64> {
        let v = self.get(key)?;
        match v.as_u64() {
            Some(n) => Some(n),
            None => {
                self.problems.push(format!(
                    "The {key} must be a non-negative integer (got {}).",
                    json_type(v)
                ));
                None
            }
        }
    }

    fn number(&mut self, key: &str) -> Option<f64> {
        let v = self.get(key)?;
        match v.as_f64() {
            Some(n) if n >= 0.0 => Some(n),
            _ => {
                self.problems.push(format!(
                    "The {key} must be a non-negative number (got {}).",
                    json_type(v)
                ));
                None
            }
        }
    }

    fn boolean(&mut self, key: &str) -> Option<bool> {
        let v = self.get(key)?;
        match v.as_bool() {
            Some(b) => Some(b),
            None => {
                self.problems.push(format!(
                    "The {key} field must be true or false (got {}).",
                    json_type(v)
                ));
                None
            }
        }
    }

    /// One of the allowed spellings, exactly (case-sensitive).
    fn choice(&mut self, key: &str, allowed: &[&str]) -> Option<String> {
        let value = self.string(key)?;
        if allowed.contains(&value.as_str()) {
            Some(value)
        } else {
            self.problems.push(format!(
                "The selected {key} {value:?} is invalid; allowed: {}.",
                allowed.join(", ")
            ));
            None
        }
    }

    /// An integer, or (as in the spec's sample request) a string of digits.
    fn year(&mut self) -> Option<u64> {
        let v = self.get("year")?;
        let year = match v {
            Value::String(s) => s.trim().parse::<u64>().ok(),
            other => other.as_u64(),
        };
        if year.is_none() {
            self.problems.push(format!(
                "The year must be an integer (got {}).",
                json_type(v)
            ));
        }
        year
    }

    /// A bare number (the selling price) or an object of named prices; always the object.
    fn price(&mut self) -> Option<Map<String, Value>> {
        match self.get("price")? {
            Value::Number(n) if n.as_f64().is_some_and(|n| n >= 0.0) => {
                let mut map = Map::new();
                map.insert("selling".into(), Value::Number(n.clone()));
                Some(map)
            }
            Value::Object(prices) => {
                let mut map = Map::new();
                for (key, value) in prices {
                    if !PRICE_KEYS.contains(&key.as_str()) || value.is_null() {
                        continue;
                    }
                    match value {
                        Value::Number(n) if n.as_f64().is_some_and(|n| n >= 0.0) => {
                            map.insert(key.clone(), value.clone());
                        }
                        other => self.problems.push(format!(
                            "The price.{key} must be a non-negative number (got {}).",
                            json_type(other)
                        )),
                    }
                }
                Some(map)
            }
            other => {
                self.problems.push(format!(
                    "The price must be a number or an object of prices (got {}).",
                    json_type(other)
                ));
                None
            }
        }
    }

    /// A string of items separated by commas.
    fn list(&mut self, key: &str) -> Vec<String> {
        self.string(key)
            .map(|s| {
                s.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn json_type(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api;
    use serde_json::json;

    fn check(body: Value) -> Result<VehicleBody, Vec<String>> {
        vehicle_body(&body, &|_| true)
    }

    /// The sandbox's tables and the client's enums were written apart from the spec; they agree.
    #[test]
    fn allowed_values_agree_with_the_client_enums() {
        fn spellings<T: std::fmt::Display>(all: &[T]) -> Vec<String> {
            all.iter().map(ToString::to_string).collect()
        }
        assert_eq!(spellings(api::VehicleType::ALL), VEHICLE_TYPES);
        assert_eq!(spellings(api::BodyStyle::ALL), BODY_STYLES);
        assert_eq!(spellings(api::BodyType::ALL), BODY_TYPES);
        assert_eq!(spellings(api::Fuel::ALL), FUELS);
        assert_eq!(spellings(api::Color::ALL), COLORS);
        assert_eq!(spellings(api::InteriorType::ALL), INTERIOR_TYPES);
        assert_eq!(spellings(api::TitleStatus::ALL), TITLE_STATUSES);
        assert_eq!(spellings(api::Tonnage::ALL), TONNAGES);
        assert_eq!(spellings(api::TransmissionType::ALL), TRANSMISSION_TYPES);
        assert_eq!(spellings(api::TransmissionSpeed::ALL), TRANSMISSION_SPEEDS);
        assert_eq!(spellings(api::DriveType::ALL), DRIVE_TYPES);
    }

    #[test]
    fn one_message_per_problem() {
        let problems = check(json!({
            "location_id": "10", "vin": "", "fuel": "Gasoline", "drive_type": "4wd",
            "doors": "four", "price": {"selling": "x", "bonus": 3}
        }))
        .unwrap_err();
        assert_eq!(problems.len(), 7, "{problems:#?}");
        assert!(problems.contains(&"The stock field is required.".to_owned()));
        assert!(problems.contains(&"The vin field is required.".to_owned()));
        assert!(problems
            .iter()
            .any(|p| p.starts_with("The selected fuel \"Gasoline\" is invalid")));
    }

    #[test]
    fn accepts_the_tolerated_forms() {
        let v = check(json!({
            "location_id": 10, "stock": "S1", "vin": "V1", "year": "2020", "price": 19995.5,
            "doors": 4.0, "options": "A, B,,C", "make": null
        }))
        .unwrap();
        assert_eq!(v.year, Some(2020));
        assert_eq!(v.price.unwrap()["selling"], json!(19995.5));
        assert_eq!(v.options, vec!["A", "B", "C"]);
        assert_eq!(v.make, None);
    }

    #[test]
    fn enums_are_case_sensitive() {
        let body = json!({"location_id": 10, "stock": "S", "vin": "V", "body_style": "suv"});
        assert!(vehicle_body(&body, &|_| true).is_err());
    }

    #[test]
    fn a_foreign_location_is_one_more_problem() {
        let problems = vehicle_body(
            &json!({"location_id": 20, "stock": "S", "vin": "", "doors": "x"}),
            &|id| id == 10,
        )
        .unwrap_err();
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(problems
            .contains(&"The selected location_id 20 is invalid for this organization.".to_owned()));
    }

    #[test]
    fn notification_needs_title_and_message() {
        assert_eq!(
            notification_body(&json!({"level": "loud"}))
                .unwrap_err()
                .len(),
            3
        );
        let n = notification_body(&json!({"title": "t", "message": "m"})).unwrap();
        assert_eq!(n.level, "info");
    }
}
