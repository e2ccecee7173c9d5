//! The create-or-modify request body of POST /v1/inventory (spec §4.2) with every enum typed.
//!
//! Owns the exact spellings the service accepts: a `VehiclePayload` can only carry values from the
//! spec's lists, so nothing built from it can be rejected for a misspelled enum. Turning DMS words
//! into these values is the mapper's job, not this module's.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// Defines a spec enum: variants with their exact spec spelling, `ALL`, `as_str`, `FromStr`
/// (exact, case-sensitive, as the service is), `Display`, and serde through the spelling.
macro_rules! spec_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($variant),+ }

        impl $name {
            /// Every value the spec allows, in the spec's order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The spec's exact spelling.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl SpecEnum for $name {
            fn all() -> &'static [Self] {
                Self::ALL
            }
        }

        impl FromStr for $name {
            type Err = UnknownValue;
            fn from_str(s: &str) -> Result<Self, UnknownValue> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(UnknownValue { field: stringify!($name), value: s.to_owned() }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

/// An enum of spec §4.2: a closed list of exact spellings.
pub trait SpecEnum: Copy + PartialEq + FromStr + fmt::Display + 'static {
    /// Every value, in the spec's order.
    fn all() -> &'static [Self];
}

/// A string that is not one of the spec's values for an enum.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not an allowed {field} value")]
pub struct UnknownValue {
    pub field: &'static str,
    pub value: String,
}

spec_enum!(
    /// `type`: New, Used or Certified.
    VehicleType { New => "New", Used => "Used", Certified => "Certified" }
);

spec_enum!(
    /// `body_style`.
    BodyStyle {
        Truck => "Truck", Coupe => "Coupe", Sedan => "Sedan", Suv => "SUV",
        Convertible => "Convertible", Hatchback => "Hatchback", MinivanVan => "Minivan-Van",
        Wagon => "Wagon", Limousine => "Limousine", Rv => "RV", Motorcycle => "Motorcycle",
        Snowmobile => "Snowmobile", AtvQuad => "ATV-Quad", Trailer => "Trailer", Pwc => "PWC",
        Other => "Other",
    }
);

spec_enum!(
    /// `body_type`: the spec lists only TBD.
    BodyType { Tbd => "TBD" }
);

spec_enum!(
    /// `fuel`.
    Fuel {
        Biodiesel => "Biodiesel", Diesel => "Diesel", Electric => "Electric",
        FfvEthanol => "FFV-Ethanol", Gas => "Gas", HybridElectric => "Hybrid-Electric",
        Other => "Other", Cng => "CNG",
    }
);

spec_enum!(
    /// `exterior_color` and `interior_color`: the friendly colors.
    Color {
        Black => "Black", Blue => "Blue", Brown => "Brown", Burgundy => "Burgundy", Gold => "Gold",
        Gray => "Gray", Green => "Green", Orange => "Orange", Purple => "Purple", Red => "Red",
        Silver => "Silver", Tan => "Tan", Teal => "Teal", White => "White", Yellow => "Yellow",
        Khaki => "Khaki", Beige => "Beige", Slate => "Slate", Pewter => "Pewter",
        Charcoal => "Charcoal",
    }
);

spec_enum!(
    /// `interior_type`.
    InteriorType { Leather => "Leather", Cloth => "Cloth", Vinyl => "Vinyl" }
);

spec_enum!(
    /// `title_status`.
    TitleStatus {
        Clear => "Clear", Salvage => "Salvage", Rebuilt => "Rebuilt", PartsOnly => "Parts Only",
    }
);

spec_enum!(
    /// `tonnage`.
    Tonnage {
        QuarterTon => "Quarter Ton", HalfTon => "Half Ton", ThreeQuarterTon => "Three Quarter Ton",
        OneTon => "One Ton", OneAndAHalfTon => "One and a Half Ton", TwoTon => "Two Ton",
    }
);

spec_enum!(
    /// `transmission_type`.
    TransmissionType { Manual => "Manual", Automatic => "Automatic" }
);

spec_enum!(
    /// `transmission_speed`.
    TransmissionSpeed {
        Four => "4 Speed", Five => "5 Speed", Six => "6 Speed", Seven => "7 Speed",
    }
);

spec_enum!(
    /// `drive_type`.
    DriveType { Fwd => "FWD", Rwd => "RWD", FourByFour => "4x4", Awd => "AWD" }
);

/// A money amount: sent as a JSON integer when whole (as in the spec's samples), else a double.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Amount(pub f64);

impl Serialize for Amount {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_number(self.0, s)
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        f64::deserialize(d).map(Amount)
    }
}

/// Whole numbers as JSON integers, the rest as doubles.
fn serialize_number<S: Serializer>(n: f64, s: S) -> Result<S::Ok, S::Error> {
    // 2^53: beyond it f64 no longer holds every integer, so the cast would not round-trip.
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        s.serialize_i64(n as i64)
    } else {
        s.serialize_f64(n)
    }
}

/// `price`: a bare number is the selling price; the object carries the named prices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Price {
    Selling(Amount),
    Detailed(PriceSet),
}

/// The price object of §4.2.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceSet {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selling: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internet: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msrp: Option<Amount>,
}

/// The body of POST /v1/inventory: the full §4.2 parameter set. Absent fields are left out of
/// the JSON, never sent as null.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VehiclePayload {
    pub location_id: u64,
    pub stock: String,
    pub vin: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub make: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trim: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miles: Option<u64>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub vehicle_type: Option<VehicleType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub year: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_style: Option<BodyStyle>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_type: Option<BodyType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<Fuel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exterior_color: Option<Color>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interior_color: Option<Color>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interior_type: Option<InteriorType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title_status: Option<TitleStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tonnage: Option<Tonnage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transmission_type: Option<TransmissionType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transmission_speed: Option<TransmissionSpeed>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drive_type: Option<DriveType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowered: Option<bool>,
    /// The spec types doors as a double; a door count is whole, so it is sent as an integer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doors: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seats: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_displacement: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_cylinders: Option<u8>,
    /// Sent as one string, separated by commas (§4.2).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "join_commas",
        deserialize_with = "split_commas"
    )]
    pub options: Vec<String>,
    /// Image URLs, sent as one string separated by commas (§4.2).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "join_commas",
        deserialize_with = "split_commas"
    )]
    pub images: Vec<String>,
}

impl VehiclePayload {
    /// A payload with only the required parameters set.
    pub fn new(location_id: u64, stock: impl Into<String>, vin: impl Into<String>) -> Self {
        VehiclePayload {
            location_id,
            stock: stock.into(),
            vin: vin.into(),
            active: None,
            make: None,
            model: None,
            trim: None,
            price: None,
            miles: None,
            vehicle_type: None,
            year: None,
            url: None,
            body_style: None,
            body_type: None,
            fuel: None,
            exterior_color: None,
            interior_color: None,
            interior_type: None,
            title_status: None,
            tonnage: None,
            transmission_type: None,
            transmission_speed: None,
            drive_type: None,
            lifted: None,
            lowered: None,
            doors: None,
            seats: None,
            engine_displacement: None,
            engine_cylinders: None,
            options: Vec::new(),
            images: Vec::new(),
        }
    }
}

fn join_commas<S: Serializer>(items: &[String], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&items.join(","))
}

fn split_commas<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let text = String::deserialize(d)?;
    Ok(text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_round_trip_through_their_exact_spelling() {
        fn check<T: FromStr + Copy + fmt::Display + PartialEq + fmt::Debug>(all: &[T]) {
            for v in all {
                let text = v.to_string();
                let back: T = text.parse().ok().expect("own spelling parses");
                assert_eq!(back, *v);
            }
        }
        check(VehicleType::ALL);
        check(BodyStyle::ALL);
        check(BodyType::ALL);
        check(Fuel::ALL);
        check(Color::ALL);
        check(InteriorType::ALL);
        check(TitleStatus::ALL);
        check(Tonnage::ALL);
        check(TransmissionType::ALL);
        check(TransmissionSpeed::ALL);
        check(DriveType::ALL);
        assert_eq!(Color::ALL.len(), 20);
        assert_eq!(BodyStyle::ALL.len(), 16);
    }

    #[test]
    fn enum_parsing_is_case_sensitive_like_the_service() {
        assert!("suv".parse::<BodyStyle>().is_err());
        assert!("4X4".parse::<DriveType>().is_err());
        assert_eq!("4x4".parse::<DriveType>(), Ok(DriveType::FourByFour));
        let err = "Grey".parse::<Color>().unwrap_err();
        assert_eq!(err.to_string(), "\"Grey\" is not an allowed Color value");
    }

    #[test]
    fn payload_serializes_to_the_spec_body() {
        let mut p = VehiclePayload::new(10, "A123", "1HGCM82633A004352");
        p.vehicle_type = Some(VehicleType::Used);
        p.year = Some(2019);
        p.price = Some(Price::Detailed(PriceSet {
            selling: Some(Amount(23995.0)),
            internet: Some(Amount(22995.5)),
            msrp: None,
        }));
        p.transmission_speed = Some(TransmissionSpeed::Six);
        p.drive_type = Some(DriveType::FourByFour);
        p.options = vec!["Sunroof".into(), "Heated Seats".into()];
        let json = serde_json::to_value(&p).expect("payload serializes");
        assert_eq!(
            json,
            serde_json::json!({
                "location_id": 10, "stock": "A123", "vin": "1HGCM82633A004352",
                "type": "Used", "year": 2019,
                "price": {"selling": 23995, "internet": 22995.5},
                "transmission_speed": "6 Speed", "drive_type": "4x4",
                "options": "Sunroof,Heated Seats"
            })
        );
        let back: VehiclePayload = serde_json::from_value(json).expect("body parses back");
        assert_eq!(back, p);
    }

    #[test]
    fn bare_price_is_a_number() {
        let mut p = VehiclePayload::new(10, "A", "V");
        p.price = Some(Price::Selling(Amount(19999.0)));
        let json = serde_json::to_value(&p).expect("payload serializes");
        assert_eq!(json["price"], serde_json::json!(19999));
    }
}
