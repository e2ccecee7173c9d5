//! The payload fields a source column can feed (`Target`), and the squashed spelling of a
//! header that profiles and the header vocabulary match on. Shared by both; it knows neither.

use serde::Deserialize;

/// What a source field can feed: the payload parameters of spec §4.2, plus free-text fields
/// the mapper splits (transmission, engine), the export's own status and the lot code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    Vin,
    Stock,
    Year,
    Make,
    Model,
    Trim,
    Type,
    Miles,
    Price,
    InternetPrice,
    Msrp,
    ExteriorColor,
    InteriorColor,
    InteriorType,
    BodyStyle,
    BodyType,
    Fuel,
    TitleStatus,
    Tonnage,
    /// "6-Speed Automatic": type and speed together.
    Transmission,
    TransmissionType,
    TransmissionSpeed,
    DriveType,
    /// "3.5L V6": displacement and cylinders together.
    Engine,
    EngineDisplacement,
    EngineCylinders,
    Doors,
    Seats,
    Lifted,
    Lowered,
    Active,
    Options,
    Images,
    Url,
    /// The export's own sold / in-stock status.
    Status,
    /// A lot code, looked up in the profile's `[locations]`.
    Location,
    /// A yes/no "Certified" / "CPO" flag: a used vehicle flagged yes is Certified.
    Certified,
    /// The unit of the mileage column in a column of its own (Meta's `mileage.unit`: MI, KM).
    MileageUnit,
    /// A yes/no "New" flag (AutoRevo's `New`: 1 new, 0 used), read when no new/used column
    /// says the type.
    NewFlag,
    /// Year, make and model in one cell ("2019 Land Rover Range Rover Sport"), read for those
    /// the file has no column of.
    YearMakeModel,
    /// When the unit was sold: a date in it says sold where the status says nothing.
    SoldDate,
}

impl Target {
    pub const ALL: [Target; 41] = [
        Target::Vin,
        Target::Stock,
        Target::Year,
        Target::Make,
        Target::Model,
        Target::Trim,
        Target::Type,
        Target::Miles,
        Target::Price,
        Target::InternetPrice,
        Target::Msrp,
        Target::ExteriorColor,
        Target::InteriorColor,
        Target::InteriorType,
        Target::BodyStyle,
        Target::BodyType,
        Target::Fuel,
        Target::TitleStatus,
        Target::Tonnage,
        Target::Transmission,
        Target::TransmissionType,
        Target::TransmissionSpeed,
        Target::DriveType,
        Target::Engine,
        Target::EngineDisplacement,
        Target::EngineCylinders,
        Target::Doors,
        Target::Seats,
        Target::Lifted,
        Target::Lowered,
        Target::Active,
        Target::Options,
        Target::Images,
        Target::Url,
        Target::Status,
        Target::Location,
        Target::Certified,
        Target::MileageUnit,
        Target::NewFlag,
        Target::YearMakeModel,
        Target::SoldDate,
    ];

    /// The name used in profiles and messages (a payload parameter where there is one).
    pub fn name(self) -> &'static str {
        match self {
            Target::Vin => "vin",
            Target::Stock => "stock",
            Target::Year => "year",
            Target::Make => "make",
            Target::Model => "model",
            Target::Trim => "trim",
            Target::Type => "type",
            Target::Miles => "miles",
            Target::Price => "price",
            Target::InternetPrice => "internet_price",
            Target::Msrp => "msrp",
            Target::ExteriorColor => "exterior_color",
            Target::InteriorColor => "interior_color",
            Target::InteriorType => "interior_type",
            Target::BodyStyle => "body_style",
            Target::BodyType => "body_type",
            Target::Fuel => "fuel",
            Target::TitleStatus => "title_status",
            Target::Tonnage => "tonnage",
            Target::Transmission => "transmission",
            Target::TransmissionType => "transmission_type",
            Target::TransmissionSpeed => "transmission_speed",
            Target::DriveType => "drive_type",
            Target::Engine => "engine",
            Target::EngineDisplacement => "engine_displacement",
            Target::EngineCylinders => "engine_cylinders",
            Target::Doors => "doors",
            Target::Seats => "seats",
            Target::Lifted => "lifted",
            Target::Lowered => "lowered",
            Target::Active => "active",
            Target::Options => "options",
            Target::Images => "images",
            Target::Url => "url",
            Target::Status => "status",
            Target::Location => "location",
            Target::Certified => "certified",
            Target::MileageUnit => "mileage_unit",
            Target::NewFlag => "new",
            Target::YearMakeModel => "year_make_model",
            Target::SoldDate => "sold_date",
        }
    }
}

/// Letters and digits of a header, lower-cased: "Ext. Color" → "extcolor".
pub(super) fn squash(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}
