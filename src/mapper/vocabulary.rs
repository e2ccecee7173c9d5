//! The header vocabulary of the `auto` profile: which column names (CSV headers, XML element
//! and attribute names, feed attribute names) mean which [`Target`], grouped by the source the
//! spelling was taken from, and which of them name a non-road serial (read leniently).
//!
//! It owns the data and the lookup by squashed name only. Which column a name is tried on,
//! twins, notes and profile-named fields are [`Binding`](super::Binding)'s; what a value means
//! is `synonyms.rs`'s. Where each source is documented is recorded in
//! `docs/header-vocabulary.md`.

use super::target::{squash, Target};
use std::collections::HashMap;
use std::sync::OnceLock;

/// Where a set of header spellings comes from.
#[derive(Debug)]
pub struct Source {
    // Read by people and the tests, not the lookup: the record of where spellings come from.
    #[allow(dead_code)]
    pub name: &'static str,
    /// The page a person can check the spellings against, or why there is none.
    #[allow(dead_code)]
    pub documented_at: &'static str,
    /// Headers as the source spells them, and the target each one feeds.
    pub headers: &'static [(&'static str, Target)],
}

/// The sources, each spelling as written there; lookup is by the squashed form.
///
/// The same squashed name means one target in every source (`no_name_means_two_targets`
/// checks it). Where sources disagree, the choice and its reason:
///
/// - "Type" is new/used in the DMS exports lotsync has seen and in lotsync's existing
///   spellings, but the kind of vehicle in AX9 (`type`: ATVs, BOAT, …), in EVO POS and
///   Dockmaster (Motorcycle; Boat/Motor/Trailer), and ARI calls its Class "also Type". It
///   stays [`Target::Type`], as a [loose](LOOSE) name: a plainer new/used column in the same
///   file ("New/Used", "NU", `state_of_vehicle`) is used instead.
/// - "Condition" is new/used for Google, Trailer Central and DX1, but wear (Excellent, Good,
///   Fair) for Meta and ARI. The same: [`Target::Type`], loose.
/// - "ID" / `vehicle_id`: Google documents `id` as the dealer's stock number; Meta's
///   `vehicle_id` is a unique item id that may be the VIN. Both feed [`Target::Stock`],
///   loose, so a real stock-number column wins.
/// - "Title" is the title brand in lotsync's existing spellings but a headline for Meta,
///   TikTok and Trailer Central, and new/used in AX9. It stays [`Target::TitleStatus`] so
///   nothing that mapped before stops mapping; a headline only earns a warning per record
///   (the value is not a title status and is left out).
/// - "Interior" is the material (cloth, leather) in lotsync's existing spellings and in the
///   vAuto report CarDescribe documents, but the colour in AX9: it stays
///   [`Target::InteriorType`].
/// - "List Price" is the MSRP (the manufacturer's list price) in lotsync's existing spellings,
///   but beside a plain MSRP column it can only be the price asked: loose, and then
///   [`Target::Price`] unless a plain price column is there too.
/// - "Engine #" (DX1's engine serial number) squashes to "engine", the engine description:
///   left as [`Target::Engine`]; a serial is not a displacement and is left out with a
///   warning.
pub const SOURCES: &[Source] = &[
    Source {
        name: "lotsync's existing spellings",
        documented_at: "not from a published document: the spellings the auto profile knew \
                        before this vocabulary, gathered from DMS exports seen in the field",
        headers: EXISTING,
    },
    Source {
        name: "Google vehicle listings / vehicle ads feed",
        documented_at: "https://developers.google.com/vehicle-listings/reference/feed-specification \
                        (Feed specification); https://support.google.com/merchants/answer/11190480 \
                        (vehicle ads Content API attributes)",
        headers: &[
            ("vin", Target::Vin),
            ("id", Target::Stock),
            ("store_code", Target::Location),
            ("price", Target::Price),
            ("vehicle_msrp", Target::Msrp),
            ("condition", Target::Type),
            ("certified_pre_owned", Target::Certified),
            ("certified_pre-owned", Target::Certified),
            ("make", Target::Make),
            ("model", Target::Model),
            ("trim", Target::Trim),
            ("year", Target::Year),
            ("mileage", Target::Miles),
            ("exterior_color", Target::ExteriorColor),
            ("image_link", Target::Images),
            ("link", Target::Url),
        ],
    },
    Source {
        name: "Meta (Facebook) automotive inventory catalog",
        documented_at: "https://developers.facebook.com/docs/marketing-api/auto-ads/reference \
                        (Reference: supported feed formats and fields); \
                        https://developers.facebook.com/docs/marketing-api/dynamic-ads-auto/auto-catalog",
        headers: &[
            ("vehicle_id", Target::Stock),
            ("vin", Target::Vin),
            ("make", Target::Make),
            ("model", Target::Model),
            ("year", Target::Year),
            ("mileage.value", Target::Miles),
            ("mileage.unit", Target::MileageUnit),
            ("image[0].url", Target::Images),
            ("transmission", Target::Transmission),
            ("fuel_type", Target::Fuel),
            ("body_style", Target::BodyStyle),
            ("drivetrain", Target::DriveType),
            ("price", Target::Price),
            ("sale_price", Target::Price),
            ("exterior_color", Target::ExteriorColor),
            ("interior_color", Target::InteriorColor),
            ("availability", Target::Status),
            ("state_of_vehicle", Target::Type),
            ("condition", Target::Type),
            ("url", Target::Url),
            ("features", Target::Options),
        ],
    },
    Source {
        name: "Trailer Central bulk inventory upload (trailer and RV dealers)",
        documented_at: "https://support.trailercentral.com/hc/en-us/articles/1500007717062-Inventory-Fields \
                        (Inventory Fields: valid column titles)",
        headers: &[
            ("stock", Target::Stock),
            ("stock #", Target::Stock),
            ("stock nr", Target::Stock),
            ("stock number", Target::Stock),
            ("year", Target::Year),
            ("manufacturer", Target::Make),
            ("make", Target::Make),
            ("model", Target::Model),
            ("price", Target::Price),
            ("selling price", Target::Price),
            ("condition", Target::Type),
        ],
    },
    Source {
        name: "vAuto custom inventory report, as CarDescribe asks dealers to set it up",
        documented_at: "https://cardescribe.com/setup.html (third party; vAuto publishes no \
                        export layout)",
        headers: &[
            ("Stock #", Target::Stock),
            ("Vehicle", Target::YearMakeModel),
            ("Series", Target::Trim),
            ("Series Detail", Target::Trim),
            ("Drivetrain Type", Target::DriveType),
            ("Color", Target::ExteriorColor),
            ("Interior", Target::InteriorType),
            ("Interior Color", Target::InteriorColor),
            ("Transmission", Target::Transmission),
            ("VIN", Target::Vin),
            ("Odometer", Target::Miles),
            ("Certified", Target::Certified),
            ("Selected Vehicle Equip", Target::Options),
        ],
    },
    Source {
        name: "Reynolds & Reynolds bike inventory report, as a third party maps it",
        documented_at: "https://training.morethanrewards.com/help/reynolds-and-reynolds-field-mapping---bike-inventory \
                        (third party; Reynolds publishes no export layout)",
        headers: &[
            ("StockNumber", Target::Stock),
            ("NewUsed", Target::Type),
            ("BikeYear", Target::Year),
            ("Make", Target::Make),
            ("Model", Target::Model),
            ("VIN", Target::Vin),
            ("Color", Target::ExteriorColor),
            ("Odometer", Target::Miles),
            ("Location", Target::Location),
            // Spelled so in the report.
            ("Conditon", Target::Type),
            ("MSRP", Target::Msrp),
            ("UnitStatus", Target::Status),
        ],
    },
    Source {
        name: "ARI Endeavor unit inventory CSV upload (powersports, marine, ag and lawn)",
        documented_at: "https://arinet.atlassian.net/wiki/spaces/EH/pages/58130556 \
                        (Unit Inventory .CSV Upload Required and Optional Fields)",
        headers: &[
            ("Make", Target::Make),
            ("Model", Target::Model),
            ("Year", Target::Year),
            // The kind of unit (ATV, Motorcycle, Snowmobile, PWC, Boat): "also called Type".
            ("Class", Target::BodyStyle),
            ("Style", Target::BodyStyle),
            ("VIN/Serial Number", Target::Vin),
            ("Condition", Target::Type),
            ("New/Used", Target::Type),
            ("Primary Color", Target::ExteriorColor),
            ("Stock Number", Target::Stock),
        ],
    },
    Source {
        name: "DX1 major unit receiving (powersports)",
        documented_at: "https://help.dx1app.com/en/support/solutions/articles/35000027583 \
                        (screen labels; DX1 publishes no export layout)",
        headers: &[
            ("Condition", Target::Type),
            ("VIN Number", Target::Vin),
            ("Stock Number", Target::Stock),
            ("Odometer", Target::Miles),
        ],
    },
    Source {
        name: "Lot Wizard inventory report and export fields",
        documented_at: "https://lotwizard.com/help/inventory-report-fields.html \
                        (Inventory Report Fields)",
        headers: &[
            ("NU", Target::Type),
            ("Color", Target::ExteriorColor),
            ("Cylinders", Target::EngineCylinders),
        ],
    },
    Source {
        name: "AX9 data exchange (Autoxloo / LocalAutos)",
        documented_at: "https://www.localautos.co/data-exchange.html (Import/Export Requirements (AX9))",
        headers: &[
            ("stock", Target::Stock),
            ("vin", Target::Vin),
            ("year", Target::Year),
            ("make", Target::Make),
            ("model", Target::Model),
            ("trim", Target::Trim),
            ("body", Target::BodyStyle),
            ("mileage", Target::Miles),
            ("price_current", Target::Price),
            ("InternetPrice", Target::InternetPrice),
            ("MSRP", Target::Msrp),
            ("exterior", Target::ExteriorColor),
            ("doors", Target::Doors),
            ("engine", Target::Engine),
            ("transmission", Target::Transmission),
            ("drive_type", Target::DriveType),
            ("fuel_type", Target::Fuel),
        ],
    },
    Source {
        name: "Marine and powersports serial columns",
        documented_at: "not from a published export layout: Dockmaster's boat inventory screen \
                        (https://portal.dockmaster.com/docs/dockmaster-desktop/sales-management/sm-inventory/boat-inventory-maintenance) \
                        names a Serial Number; the 12-character HIN is the US Coast Guard's; the \
                        other spellings are common ones",
        headers: &[
            ("Serial", Target::Vin),
            ("Serial #", Target::Vin),
            ("Serial No.", Target::Vin),
            ("Serial Number", Target::Vin),
            ("VIN/Serial", Target::Vin),
            ("HIN", Target::Vin),
            ("HIN #", Target::Vin),
            ("Hull ID", Target::Vin),
            ("Hull ID #", Target::Vin),
            ("Hull Number", Target::Vin),
            ("Hull Identification Number", Target::Vin),
        ],
    },
    Source {
        name: "Common DMS spellings (CDK, Reynolds & Reynolds, Dealertrack, DealerSocket, \
               HomeNet, Frazer, DealerCenter, Autosoft, Lightspeed)",
        documented_at: "not from a published document: these vendors do not publish their \
                        export layouts; abbreviations and flag forms seen in dealer exports",
        headers: &[
            ("N/U", Target::Type),
            ("New Used", Target::Type),
            // When a unit was sold: a date there is a sale where the status says nothing.
            ("Sold Date", Target::SoldDate),
            ("Date Sold", Target::SoldDate),
            ("Sold On", Target::SoldDate),
            ("Sale Date", Target::SoldDate),
            ("Date of Sale", Target::SoldDate),
            ("Deal Date", Target::SoldDate),
            // A data provider's standard seating (its maximum is another figure).
            ("Standard Seating", Target::Seats),
            ("Std Seating", Target::Seats),
            ("Standard Seating Capacity", Target::Seats),
            // A generic colour beside the factory paint name: preferred where filled.
            ("Generic Color", Target::ExteriorColor),
            ("Generic Colour", Target::ExteriorColor),
            ("Generic Exterior Color", Target::ExteriorColor),
            ("Exterior Color Generic", Target::ExteriorColor),
            ("Ext Color Generic", Target::ExteriorColor),
            ("Generic Interior Color", Target::InteriorColor),
            ("Interior Color Generic", Target::InteriorColor),
            ("Int Color Generic", Target::InteriorColor),
            ("Stk #", Target::Stock),
            ("Odom", Target::Miles),
            ("Mfr", Target::Make),
            ("Ext. Colour", Target::ExteriorColor),
            ("Int. Color", Target::InteriorColor),
            ("Int. Colour", Target::InteriorColor),
            ("Cert", Target::Certified),
            ("Cert Y/N", Target::Certified),
            ("Certified Y/N", Target::Certified),
            ("CPO Y/N", Target::Certified),
            ("CPO Flag", Target::Certified),
            ("Is CPO", Target::Certified),
            ("Trans Type", Target::Transmission),
            ("Eng Desc", Target::Engine),
            ("Mdl", Target::Model),
            ("Ext Clr", Target::ExteriorColor),
            ("Int Clr", Target::InteriorColor),
            ("Drv", Target::DriveType),
        ],
    },
    Source {
        name: "AutoRevo Standard CSV Import Specification",
        documented_at: "https://feeds.autorevo.com (Field Definitions: required and optional \
                        fields)",
        headers: &[
            ("StockNumber", Target::Stock),
            ("Mileage", Target::Miles),
            ("WebPrice", Target::InternetPrice),
            ("RetailPrice", Target::Price),
            ("ExteriorColor", Target::ExteriorColor),
            ("ExteriorGenericColor", Target::ExteriorColor),
            ("InteriorColor", Target::InteriorColor),
            ("InteriorGenericColor", Target::InteriorColor),
            ("InteriorType", Target::InteriorType),
            ("Cylinders", Target::EngineCylinders),
            ("Transmission", Target::Transmission),
            ("TransmissionDescription", Target::Transmission),
            ("DriveTrain", Target::DriveType),
            ("New", Target::NewFlag),
            ("Certified", Target::Certified),
            ("Doors", Target::Doors),
            ("Photos", Target::Images),
            ("ImageURLs", Target::Images),
            ("Engine", Target::Engine),
            ("Body", Target::BodyStyle),
        ],
    },
    Source {
        name: "year, make and model in one cell",
        documented_at: "not from a published document: the combined form LTVwiz's feed \
                        requirements allow (https://ltvwiz.com/feed-specs: \"Year, Make, Model, \
                        Trim (can be combined or separate fields)\") and vAuto's Vehicle column",
        headers: &[
            ("Year Make Model", Target::YearMakeModel),
            ("Year/Make/Model", Target::YearMakeModel),
            ("YMM", Target::YearMakeModel),
            ("Vehicle Name", Target::YearMakeModel),
        ],
    },
    Source {
        name: "the odometer's unit in the heading, or in a column of its own",
        documented_at: "not from a published document: spreadsheet headings that name their \
                        unit (\"Odometer (km)\", \"Kilometres\"), and unit columns beside the \
                        reading as Meta's mileage.value / mileage.unit pair has them",
        headers: &[
            ("Odometer (km)", Target::Miles),
            ("Odometer km", Target::Miles),
            ("Odometer (mi)", Target::Miles),
            ("Mileage (km)", Target::Miles),
            ("Mileage km", Target::Miles),
            ("Mileage (mi)", Target::Miles),
            ("Miles (mi)", Target::Miles),
            ("Kilometres", Target::Miles),
            ("Kilometers", Target::Miles),
            ("Kilometrage", Target::Miles),
            ("KM", Target::Miles),
            ("Kms", Target::Miles),
            ("Odometer Unit", Target::MileageUnit),
            ("Odometer Units", Target::MileageUnit),
            ("Odometer UOM", Target::MileageUnit),
            ("Mileage Unit", Target::MileageUnit),
            ("Mileage Units", Target::MileageUnit),
            ("Mileage UOM", Target::MileageUnit),
            ("Distance Unit", Target::MileageUnit),
        ],
    },
    Source {
        name: "Hoot Interactive AutoWeb feed",
        documented_at: "https://hootinteractive.atlassian.net/wiki/spaces/HD/pages/285900801/AutoWeb",
        headers: &[
            ("Dealer Stock", Target::Stock),
            ("Destination URL", Target::Url),
            // "Vehicle Status" is new, used or certified here, but sold / in stock in the
            // exports lotsync knew: left to the values (a column of New/Used is the type).
            ("Image URLs", Target::Images),
            ("Exterior Color", Target::ExteriorColor),
            ("Number of Doors", Target::Doors),
        ],
    },
    Source {
        name: "STAR 5 vehicle inventory BOD (ShowVehicleInventory)",
        documented_at: "https://docs.starstandard.org/guidelines/STAR5134/VehicleInventory/ch06s27.html \
                        (STAR's implementation guideline, Vehicle Inventory chapter) and the \
                        schema's element definitions (ShowVehicleInventory.xsd, rendered at \
                        https://schemas.liquid-technologies.com/STAR/5.11.4/vehicleinventory.html); \
                        price codes: PriceEnumeratedType in CodeLists.xsd \
                        (https://schemas.liquid-technologies.com/STAR/5.3.4/priceenumeratedtype.html)",
        headers: &[
            // The VIN is the vehicle's `VehicleID` (a bare "VehicleID" is a loose stock
            // number elsewhere: Meta's `vehicle_id`), or one of its identification group's.
            ("Vehicle/VehicleID", Target::Vin),
            ("Vehicle/VehicleIdentificationGroup/VehicleID", Target::Vin),
            ("VehicleStockString", Target::Stock),
            ("MakeString", Target::Make),
            ("SeriesName", Target::Trim),
            ("SaleClassCode", Target::Type),
            ("TransmissionTypeName", Target::Transmission),
            ("GeneralEngineDescription", Target::Engine),
            ("NumberOfEngineCylindersNumeric", Target::EngineCylinders),
            ("FuelTypeCode", Target::Fuel),
            ("DoorsQuantityNumeric", Target::Doors),
            ("VehiclePassengersNumeric", Target::Seats),
            ("DeliveryDistanceMeasure", Target::Miles),
            ("VehicleStatusCode", Target::Status),
            ("OptionName", Target::Options),
            ("ImageAttachmentExtended/URI", Target::Images),
            // Price codes (a `Price` told apart by its `PriceCode`): the advertised price, the
            // internet price and the manufacturer's suggested prices. Invoice, cost, holdback,
            // pack and wholesale codes name nothing and are never read.
            ("Vehicle Advertised Price", Target::Price),
            ("Base MSRP", Target::Msrp),
            ("Standard MSRP", Target::Msrp),
            // Colours (a `ColorGroup` told apart by its `ColorItemCode`).
            ("Exterior ColorGroup", Target::ExteriorColor),
            ("Interior ColorGroup", Target::InteriorColor),
        ],
    },
    Source {
        name: "TruckRadar feed formats (trucks and trailers)",
        documented_at: "https://truckradar.ai/dealers/docs/feed-formats (Feed Formats) and \
                        https://truckradar.ai/dealers/docs/inventory (Inventory API)",
        headers: &[
            ("new_or_used", Target::Type),
            ("odometer_miles", Target::Miles),
            ("fuel_type", Target::Fuel),
            ("transmission_type", Target::Transmission),
        ],
    },
    Source {
        name: "eRepairables data import format (repairable and salvage vehicles)",
        documented_at: "https://erepairables.com/en-US/developers (Data Import Format: fields \
                        by position, pipe-delimited)",
        headers: &[
            ("Vehicle Make", Target::Make),
            ("Vehicle Model", Target::Model),
            ("Vehicle Year", Target::Year),
            ("Vehicle Price", Target::Price),
            ("Title Status", Target::TitleStatus),
            ("Odometer", Target::Miles),
            ("VIN #", Target::Vin),
            ("Your Stock Number", Target::Stock),
            ("External Link", Target::Url),
        ],
    },
];

/// The spellings `auto` knew before this vocabulary, kept so nothing that mapped stops
/// mapping.
const EXISTING: &[(&str, Target)] = &[
    ("VIN", Target::Vin),
    ("VIN Number", Target::Vin),
    ("VIN No", Target::Vin),
    ("Vehicle VIN", Target::Vin),
    ("Vehicle Identification Number", Target::Vin),
    ("Serial Number", Target::Vin),
    ("Stock", Target::Stock),
    ("Stock Number", Target::Stock),
    ("Stock No", Target::Stock),
    ("Stock Num", Target::Stock),
    ("Stock Nbr", Target::Stock),
    ("Stk", Target::Stock),
    ("Stk No", Target::Stock),
    ("Stock Nr", Target::Stock),
    ("Year", Target::Year),
    ("Yr", Target::Year),
    ("Model Year", Target::Year),
    ("Vehicle Year", Target::Year),
    ("Make", Target::Make),
    ("Manufacturer", Target::Make),
    ("Brand", Target::Make),
    ("Make Name", Target::Make),
    ("Model", Target::Model),
    ("Model Name", Target::Model),
    ("Trim", Target::Trim),
    ("Series", Target::Trim),
    ("Trim Level", Target::Trim),
    ("Trim Name", Target::Trim),
    ("Type", Target::Type),
    ("New/Used", Target::Type),
    ("New or Used", Target::Type),
    ("Condition", Target::Type),
    ("Vehicle Condition", Target::Type),
    ("Stock Type", Target::Type),
    ("Inventory Type", Target::Type),
    ("Vehicle Type", Target::Type),
    ("Miles", Target::Miles),
    ("Mileage", Target::Miles),
    ("Odometer", Target::Miles),
    ("Odometer Reading", Target::Miles),
    ("Odo", Target::Miles),
    ("Price", Target::Price),
    ("Selling Price", Target::Price),
    ("Sale Price", Target::Price),
    ("Asking Price", Target::Price),
    ("Our Price", Target::Price),
    ("Retail Price", Target::Price),
    ("Retail", Target::Price),
    ("Prices/Retail", Target::Price),
    ("Prices/Selling", Target::Price),
    ("Selling", Target::Price),
    ("Internet Price", Target::InternetPrice),
    ("Web Price", Target::InternetPrice),
    ("Online Price", Target::InternetPrice),
    ("E-Price", Target::InternetPrice),
    ("Internet Special", Target::InternetPrice),
    ("Internet", Target::InternetPrice),
    ("Prices/Internet", Target::InternetPrice),
    ("MSRP", Target::Msrp),
    ("List Price", Target::Msrp),
    ("Sticker Price", Target::Msrp),
    ("Prices/MSRP", Target::Msrp),
    ("Exterior Color", Target::ExteriorColor),
    ("Ext Color", Target::ExteriorColor),
    ("Color", Target::ExteriorColor),
    ("Colour", Target::ExteriorColor),
    ("Exterior Colour", Target::ExteriorColor),
    ("Ext Colour", Target::ExteriorColor),
    ("Colors/Exterior", Target::ExteriorColor),
    ("Color/Exterior", Target::ExteriorColor),
    ("Interior Color", Target::InteriorColor),
    ("Int Color", Target::InteriorColor),
    ("Interior Colour", Target::InteriorColor),
    ("Int Colour", Target::InteriorColor),
    ("Colors/Interior", Target::InteriorColor),
    ("Color/Interior", Target::InteriorColor),
    ("Interior", Target::InteriorType),
    ("Interior Type", Target::InteriorType),
    ("Upholstery", Target::InteriorType),
    ("Seat Trim", Target::InteriorType),
    ("Interior Material", Target::InteriorType),
    ("Seat Material", Target::InteriorType),
    ("Body", Target::BodyStyle),
    ("Body Style", Target::BodyStyle),
    ("Body Type", Target::BodyStyle),
    ("Style", Target::BodyStyle),
    ("Vehicle Style", Target::BodyStyle),
    ("Fuel", Target::Fuel),
    ("Fuel Type", Target::Fuel),
    ("Engine Fuel", Target::Fuel),
    ("Title", Target::TitleStatus),
    ("Title Status", Target::TitleStatus),
    ("Title Brand", Target::TitleStatus),
    ("Title Type", Target::TitleStatus),
    ("Tonnage", Target::Tonnage),
    ("Tons", Target::Tonnage),
    ("Transmission", Target::Transmission),
    ("Trans", Target::Transmission),
    ("Transmission Description", Target::Transmission),
    ("Trans Desc", Target::Transmission),
    ("Transmission Type", Target::Transmission),
    ("Gearbox", Target::Transmission),
    ("Transmission Speed", Target::TransmissionSpeed),
    ("Speeds", Target::TransmissionSpeed),
    ("Gears", Target::TransmissionSpeed),
    ("Drive", Target::DriveType),
    ("Drive Type", Target::DriveType),
    ("Drivetrain", Target::DriveType),
    ("Drive Wheels", Target::DriveType),
    ("Drivetrain Type", Target::DriveType),
    ("Engine", Target::Engine),
    ("Engine Description", Target::Engine),
    ("Engine Desc", Target::Engine),
    ("Motor", Target::Engine),
    ("Displacement", Target::EngineDisplacement),
    ("Engine Displacement", Target::EngineDisplacement),
    ("Engine Size", Target::EngineDisplacement),
    ("Liters", Target::EngineDisplacement),
    ("Litres", Target::EngineDisplacement),
    ("Cylinders", Target::EngineCylinders),
    ("Cyl", Target::EngineCylinders),
    ("Engine Cylinders", Target::EngineCylinders),
    ("Number of Cylinders", Target::EngineCylinders),
    ("Doors", Target::Doors),
    ("Number of Doors", Target::Doors),
    ("Door Count", Target::Doors),
    ("Num Doors", Target::Doors),
    ("Seats", Target::Seats),
    ("Seating", Target::Seats),
    ("Seating Capacity", Target::Seats),
    ("Passengers", Target::Seats),
    ("Passenger Capacity", Target::Seats),
    ("Lifted", Target::Lifted),
    ("Lowered", Target::Lowered),
    ("Options", Target::Options),
    ("Features", Target::Options),
    ("Equipment", Target::Options),
    ("Option List", Target::Options),
    ("Installed Options", Target::Options),
    ("Feature List", Target::Options),
    ("Options/Option", Target::Options),
    ("Features/Feature", Target::Options),
    ("Images", Target::Images),
    ("Photos", Target::Images),
    ("Photo URLs", Target::Images),
    ("Image List", Target::Images),
    ("Image URLs", Target::Images),
    ("Pictures", Target::Images),
    ("Picture URLs", Target::Images),
    ("Photo", Target::Images),
    ("Image", Target::Images),
    ("Image URL", Target::Images),
    ("Photo URL", Target::Images),
    ("Photos/Photo", Target::Images),
    ("Images/Image", Target::Images),
    ("Pictures/Picture", Target::Images),
    ("URL", Target::Url),
    ("VDP URL", Target::Url),
    ("Detail URL", Target::Url),
    ("Vehicle URL", Target::Url),
    ("Link", Target::Url),
    ("Website", Target::Url),
    ("VDP", Target::Url),
    ("Status", Target::Status),
    ("Vehicle Status", Target::Status),
    ("Inventory Status", Target::Status),
    ("Sale Status", Target::Status),
    ("Availability", Target::Status),
    ("Lot", Target::Location),
    ("Location", Target::Location),
    ("Lot Code", Target::Location),
    ("Location Code", Target::Location),
    ("Store", Target::Location),
    ("Store Code", Target::Location),
    ("Dealer Code", Target::Location),
    ("Lot Location", Target::Location),
    ("Certified", Target::Certified),
    ("CPO", Target::Certified),
    ("Is Certified", Target::Certified),
    ("Certified Pre-Owned", Target::Certified),
];

/// Names that mean their target only when no other column of the file names it plainly
/// (squashed). See [`SOURCES`] for why each is loose.
pub const LOOSE: &[&str] = &[
    "type",
    "vehicletype",
    "condition",
    "conditon",
    "id",
    "vehicleid",
    "listprice",
];

/// Loose names that mean another field when they give way: "List Price" is the MSRP, but
/// beside a plain MSRP column it is the price asked (squashed).
const INSTEAD: &[(&str, Target)] = &[("listprice", Target::Price)];

/// Columns that hold a VIN or, for boats, trailers and off-road units, a serial or hull ID
/// that is no 17-character VIN.
pub const SERIAL_HEADERS: &[&str] = &[
    "Serial",
    "Serial #",
    "Serial No.",
    "Serial Number",
    "VIN/Serial",
    "VIN/Serial Number",
    "HIN",
    "HIN #",
    "Hull ID",
    "Hull ID #",
    "Hull Number",
    "Hull Identification Number",
];

fn lookup() -> &'static HashMap<String, Target> {
    static TABLE: OnceLock<HashMap<String, Target>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = HashMap::new();
        for source in SOURCES {
            for &(header, target) in source.headers {
                // A conflict keeps the first source's meaning; the tests fail on any.
                table.entry(squash(header)).or_insert(target);
            }
        }
        table
    })
}

/// The target a header names, from its squashed form (ascii letters and digits, lower case).
pub fn target_of(squashed: &str) -> Option<Target> {
    lookup().get(squashed).copied()
}

/// Whether a name is [loose](LOOSE): it gives way to a plainer one for the same target.
fn is_loose(squashed: &str) -> bool {
    LOOSE.contains(&squashed)
}

/// Whether the column named `squashed` gives way to one of `others` (whole names, XML paths
/// tried whole and by their last part) that names `target` plainly: "Type" to "New/Used",
/// Meta's `condition` to `state_of_vehicle`, Google's `id` to "Stock #".
pub fn gives_way<'a>(
    squashed: &str,
    target: Target,
    others: impl IntoIterator<Item = &'a str>,
) -> bool {
    is_loose(squashed) && named_plainly(target, others)
}

/// Whether one of `names` names `target` with a name that is not loose.
pub fn named_plainly<'a>(target: Target, names: impl IntoIterator<Item = &'a str>) -> bool {
    names.into_iter().any(|name| {
        let whole = squash(name);
        let last = squash(name.rsplit('/').next().unwrap_or(name));
        [whole, last]
            .iter()
            .any(|n| !is_loose(n) && target_of(n) == Some(target))
    })
}

/// What a loose name that [gives way](gives_way) means instead, if anything.
pub fn instead(squashed: &str) -> Option<Target> {
    INSTEAD
        .iter()
        .find(|(name, _)| *name == squashed)
        .map(|&(_, target)| target)
}

/// The unit a mileage column's name gives: "Odometer (km)", "Kilometres", "Mileage (mi)".
pub fn header_unit(name: &str) -> Option<super::parse::DistanceUnit> {
    use super::parse::DistanceUnit;
    let last = squash(name.rsplit('/').next().unwrap_or(name));
    if last.contains("kilomet") || last.ends_with("km") || last.ends_with("kms") {
        Some(DistanceUnit::Kilometres)
    } else if last.ends_with("mi") || last.ends_with("miles") {
        Some(DistanceUnit::Miles)
    } else {
        None
    }
}

/// A VIN column named for non-road serials ("Serial", "Serial #", "HIN", "Hull ID"): read
/// leniently.
pub fn is_serial_header(squashed: &str) -> bool {
    SERIAL_HEADERS
        .iter()
        .any(|header| squash(header) == squashed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::{Item, ReadOptions, Record};
    use crate::mapper::profile::tests::schema_of;
    use crate::mapper::{Binding, Mapper, Profile, VinCheck};

    /// Binds a header row with `auto` (and a `[locations]` table, so lot codes bind) and
    /// checks where every column lands (`None`: nowhere).
    fn assert_lands(header: &str, expected: &[(&str, Option<Target>)]) {
        let schema = schema_of(header);
        let mut profile = Profile::auto();
        profile.locations.insert("MAIN".into(), 10);
        let binding = Binding::new(&profile, &schema);
        assert_eq!(schema.len(), expected.len(), "one expectation per column");
        for (id, name) in schema.names() {
            let landed = binding
                .by_target
                .iter()
                .find(|&(_, &bound)| bound == id)
                .map(|(&t, _)| t);
            let (expected_name, want) = expected[id as usize];
            assert_eq!(name, expected_name);
            assert_eq!(landed, want, "{name:?}: notes {:?}", binding.notes);
        }
    }

    #[test]
    fn no_name_means_two_targets() {
        let mut seen: HashMap<String, (Target, &str)> = HashMap::new();
        for source in SOURCES {
            for &(header, target) in source.headers {
                let squashed = squash(header);
                assert!(!squashed.is_empty(), "{header:?} in {}", source.name);
                if let Some(&(first, first_source)) = seen.get(&squashed) {
                    assert_eq!(
                        first, target,
                        "{header:?} ({squashed}) is {first:?} in {first_source} but {target:?} in {}",
                        source.name
                    );
                }
                seen.insert(squashed, (target, source.name));
            }
        }
    }

    #[test]
    fn every_source_says_where_it_is_documented() {
        for source in SOURCES {
            assert!(!source.name.is_empty());
            assert!(
                source.documented_at.starts_with("https://")
                    || source.documented_at.starts_with("not from a published"),
                "{}: {}",
                source.name,
                source.documented_at
            );
        }
    }

    #[test]
    fn loose_and_serial_names_are_in_the_vocabulary() {
        for name in LOOSE {
            assert!(target_of(name).is_some(), "{name}");
        }
        for header in SERIAL_HEADERS {
            assert_eq!(target_of(&squash(header)), Some(Target::Vin), "{header}");
            assert!(is_serial_header(&squash(header)));
        }
        assert!(!is_serial_header("vin"));
        assert!(!is_serial_header("vinnumber"));
    }

    #[test]
    fn the_spellings_auto_knew_before_still_map() {
        // The table `Target::synonyms()` held, squashed.
        let before: &[(Target, &[&str])] = &[
            (
                Target::Vin,
                &[
                    "vin",
                    "vinnumber",
                    "vinno",
                    "vehiclevin",
                    "vehicleidentificationnumber",
                    "serialnumber",
                ],
            ),
            (
                Target::Stock,
                &[
                    "stock",
                    "stocknumber",
                    "stockno",
                    "stocknum",
                    "stocknbr",
                    "stk",
                    "stkno",
                    "stocknr",
                ],
            ),
            (Target::Year, &["year", "yr", "modelyear", "vehicleyear"]),
            (Target::Make, &["make", "manufacturer", "brand", "makename"]),
            (Target::Model, &["model", "modelname"]),
            (Target::Trim, &["trim", "series", "trimlevel", "trimname"]),
            (
                Target::Type,
                &[
                    "type",
                    "newused",
                    "neworused",
                    "condition",
                    "vehiclecondition",
                    "stocktype",
                    "inventorytype",
                    "vehicletype",
                ],
            ),
            (
                Target::Miles,
                &["miles", "mileage", "odometer", "odometerreading", "odo"],
            ),
            (
                Target::Price,
                &[
                    "price",
                    "sellingprice",
                    "saleprice",
                    "askingprice",
                    "ourprice",
                    "retailprice",
                    "retail",
                    "pricesretail",
                    "pricesselling",
                    "selling",
                ],
            ),
            (
                Target::InternetPrice,
                &[
                    "internetprice",
                    "webprice",
                    "onlineprice",
                    "eprice",
                    "internetspecial",
                    "internet",
                    "pricesinternet",
                ],
            ),
            (
                Target::Msrp,
                &["msrp", "listprice", "stickerprice", "pricesmsrp"],
            ),
            (
                Target::ExteriorColor,
                &[
                    "exteriorcolor",
                    "extcolor",
                    "color",
                    "colour",
                    "exteriorcolour",
                    "extcolour",
                    "colorsexterior",
                    "colorexterior",
                ],
            ),
            (
                Target::InteriorColor,
                &[
                    "interiorcolor",
                    "intcolor",
                    "interiorcolour",
                    "intcolour",
                    "colorsinterior",
                    "colorinterior",
                ],
            ),
            (
                Target::InteriorType,
                &[
                    "interior",
                    "interiortype",
                    "upholstery",
                    "seattrim",
                    "interiormaterial",
                    "seatmaterial",
                ],
            ),
            (
                Target::BodyStyle,
                &["body", "bodystyle", "bodytype", "style", "vehiclestyle"],
            ),
            (Target::Fuel, &["fuel", "fueltype", "enginefuel"]),
            (
                Target::TitleStatus,
                &["title", "titlestatus", "titlebrand", "titletype"],
            ),
            (Target::Tonnage, &["tonnage", "tons"]),
            (
                Target::Transmission,
                &[
                    "transmission",
                    "trans",
                    "transmissiondescription",
                    "transdesc",
                    "transmissiontype",
                    "gearbox",
                ],
            ),
            (
                Target::TransmissionSpeed,
                &["transmissionspeed", "speeds", "gears"],
            ),
            (
                Target::DriveType,
                &[
                    "drive",
                    "drivetype",
                    "drivetrain",
                    "drivewheels",
                    "drivetraintype",
                ],
            ),
            (
                Target::Engine,
                &["engine", "enginedescription", "enginedesc", "motor"],
            ),
            (
                Target::EngineDisplacement,
                &[
                    "displacement",
                    "enginedisplacement",
                    "enginesize",
                    "liters",
                    "litres",
                ],
            ),
            (
                Target::EngineCylinders,
                &["cylinders", "cyl", "enginecylinders", "numberofcylinders"],
            ),
            (
                Target::Doors,
                &["doors", "numberofdoors", "doorcount", "numdoors"],
            ),
            (
                Target::Seats,
                &[
                    "seats",
                    "seating",
                    "seatingcapacity",
                    "passengers",
                    "passengercapacity",
                ],
            ),
            (Target::Lifted, &["lifted"]),
            (Target::Lowered, &["lowered"]),
            (
                Target::Options,
                &[
                    "options",
                    "features",
                    "equipment",
                    "optionlist",
                    "installedoptions",
                    "featurelist",
                    "optionsoption",
                    "featuresfeature",
                ],
            ),
            (
                Target::Images,
                &[
                    "images",
                    "photos",
                    "photourls",
                    "imagelist",
                    "imageurls",
                    "pictures",
                    "pictureurls",
                    "photo",
                    "image",
                    "imageurl",
                    "photourl",
                    "photosphoto",
                    "imagesimage",
                    "picturespicture",
                ],
            ),
            (
                Target::Url,
                &[
                    "url",
                    "vdpurl",
                    "detailurl",
                    "vehicleurl",
                    "link",
                    "website",
                    "vdp",
                ],
            ),
            (
                Target::Status,
                &[
                    "status",
                    "vehiclestatus",
                    "inventorystatus",
                    "salestatus",
                    "availability",
                ],
            ),
            (
                Target::Location,
                &[
                    "lot",
                    "location",
                    "lotcode",
                    "locationcode",
                    "store",
                    "storecode",
                    "dealercode",
                    "lotlocation",
                ],
            ),
            (
                Target::Certified,
                &["certified", "cpo", "iscertified", "certifiedpreowned"],
            ),
        ];
        for &(target, names) in before {
            for name in names {
                assert_eq!(target_of(name), Some(target), "{name}");
            }
        }
    }

    #[test]
    fn lotsyncs_existing_spellings_headers() {
        assert_lands(
            "Vin,Stock Number,Model Year,Make,Model,Trim,Type,Mileage,Price,Exterior Color,Body Type,Drivetrain,Lot",
            &[
                ("Vin", Some(Target::Vin)),
                ("Stock Number", Some(Target::Stock)),
                ("Model Year", Some(Target::Year)),
                ("Make", Some(Target::Make)),
                ("Model", Some(Target::Model)),
                ("Trim", Some(Target::Trim)),
                ("Type", Some(Target::Type)),
                ("Mileage", Some(Target::Miles)),
                ("Price", Some(Target::Price)),
                ("Exterior Color", Some(Target::ExteriorColor)),
                ("Body Type", Some(Target::BodyStyle)),
                ("Drivetrain", Some(Target::DriveType)),
                ("Lot", Some(Target::Location)),
            ],
        );
    }

    #[test]
    fn google_vehicle_ads_headers() {
        assert_lands(
            "vin,id,store_code,dealership_name,dealership_address,image_link,link,price,\
             vehicle_msrp,condition,certified_pre_owned,make,model,trim,year,mileage,exterior_color",
            &[
                ("vin", Some(Target::Vin)),
                ("id", Some(Target::Stock)),
                ("store_code", Some(Target::Location)),
                ("dealership_name", None),
                ("dealership_address", None),
                ("image_link", Some(Target::Images)),
                ("link", Some(Target::Url)),
                ("price", Some(Target::Price)),
                ("vehicle_msrp", Some(Target::Msrp)),
                ("condition", Some(Target::Type)),
                ("certified_pre_owned", Some(Target::Certified)),
                ("make", Some(Target::Make)),
                ("model", Some(Target::Model)),
                ("trim", Some(Target::Trim)),
                ("year", Some(Target::Year)),
                ("mileage", Some(Target::Miles)),
                ("exterior_color", Some(Target::ExteriorColor)),
            ],
        );
    }

    #[test]
    fn autorevo_standard_csv_headers() {
        // The field definitions of feeds.autorevo.com, required then optional.
        assert_lands(
            "DealerID,VIN,Year,Make,Model,Mileage,WebPrice,RetailPrice,ExteriorColor,\
             InteriorColor,Cylinders,Transmission,New,Doors,StockNumber,Trim,Body,Certified,\
             Description,Options,Photos,ExteriorGenericColor,InteriorGenericColor,InteriorType,\
             DriveTrain,TransmissionDescription,Engine,PurchaseCost,InvoicePrice,DealerComment1",
            &[
                ("DealerID", None),
                ("VIN", Some(Target::Vin)),
                ("Year", Some(Target::Year)),
                ("Make", Some(Target::Make)),
                ("Model", Some(Target::Model)),
                ("Mileage", Some(Target::Miles)),
                ("WebPrice", Some(Target::InternetPrice)),
                ("RetailPrice", Some(Target::Price)),
                // The paint names: read where the generic colours are empty.
                ("ExteriorColor", None),
                ("InteriorColor", None),
                ("Cylinders", Some(Target::EngineCylinders)),
                ("Transmission", Some(Target::Transmission)),
                ("New", Some(Target::NewFlag)),
                ("Doors", Some(Target::Doors)),
                ("StockNumber", Some(Target::Stock)),
                ("Trim", Some(Target::Trim)),
                ("Body", Some(Target::BodyStyle)),
                ("Certified", Some(Target::Certified)),
                ("Description", None),
                ("Options", Some(Target::Options)),
                ("Photos", Some(Target::Images)),
                // The dealer's generic colours: used where filled.
                ("ExteriorGenericColor", Some(Target::ExteriorColor)),
                ("InteriorGenericColor", Some(Target::InteriorColor)),
                ("InteriorType", Some(Target::InteriorType)),
                ("DriveTrain", Some(Target::DriveType)),
                ("TransmissionDescription", None),
                ("Engine", Some(Target::Engine)),
                ("PurchaseCost", None),
                ("InvoicePrice", None),
                ("DealerComment1", None),
            ],
        );
    }

    #[test]
    fn meta_automotive_catalog_headers() {
        // The column order of Meta's sample TSV.
        assert_lands(
            "vehicle_id,title,description,url,make,model,year,mileage.value,mileage.unit,\
             image[0].url,image[0].tag[0],transmission,fuel_type,body_style,drivetrain,vin,\
             condition,price,address,exterior_color,sale_price,availability,date_first_on_lot,\
             state_of_vehicle,latitude,longitude",
            &[
                ("vehicle_id", Some(Target::Stock)),
                // A headline here; kept as title status (see SOURCES).
                ("title", Some(Target::TitleStatus)),
                ("description", None),
                ("url", Some(Target::Url)),
                ("make", Some(Target::Make)),
                ("model", Some(Target::Model)),
                ("year", Some(Target::Year)),
                ("mileage.value", Some(Target::Miles)),
                ("mileage.unit", Some(Target::MileageUnit)),
                ("image[0].url", Some(Target::Images)),
                ("image[0].tag[0]", None),
                ("transmission", Some(Target::Transmission)),
                ("fuel_type", Some(Target::Fuel)),
                ("body_style", Some(Target::BodyStyle)),
                ("drivetrain", Some(Target::DriveType)),
                ("vin", Some(Target::Vin)),
                // Wear (EXCELLENT): gives way to state_of_vehicle.
                ("condition", None),
                ("price", Some(Target::Price)),
                ("address", None),
                ("exterior_color", Some(Target::ExteriorColor)),
                // Also a price: the first column is used, with a note.
                ("sale_price", None),
                ("availability", Some(Target::Status)),
                ("date_first_on_lot", None),
                ("state_of_vehicle", Some(Target::Type)),
                ("latitude", None),
                ("longitude", None),
            ],
        );
    }

    #[test]
    fn trailer_central_headers() {
        assert_lands(
            "stock #,title,year,manufacturer,model,price,condition,description",
            &[
                ("stock #", Some(Target::Stock)),
                ("title", Some(Target::TitleStatus)),
                ("year", Some(Target::Year)),
                ("manufacturer", Some(Target::Make)),
                ("model", Some(Target::Model)),
                ("price", Some(Target::Price)),
                ("condition", Some(Target::Type)),
                ("description", None),
            ],
        );
    }

    #[test]
    fn vauto_report_headers() {
        assert_lands(
            "Stock #,Vehicle,Series,Series Detail,Drivetrain Type,Color,Interior,Interior Color,\
             Transmission,VIN,Odometer,Certified,Selected Vehicle Equip",
            &[
                ("Stock #", Some(Target::Stock)),
                ("Vehicle", Some(Target::YearMakeModel)),
                ("Series", None),
                // Read first when filled, "Series" where it is empty.
                ("Series Detail", Some(Target::Trim)),
                ("Drivetrain Type", Some(Target::DriveType)),
                ("Color", Some(Target::ExteriorColor)),
                ("Interior", Some(Target::InteriorType)),
                ("Interior Color", Some(Target::InteriorColor)),
                ("Transmission", Some(Target::Transmission)),
                ("VIN", Some(Target::Vin)),
                ("Odometer", Some(Target::Miles)),
                ("Certified", Some(Target::Certified)),
                ("Selected Vehicle Equip", Some(Target::Options)),
            ],
        );
    }

    #[test]
    fn reynolds_bike_inventory_headers() {
        assert_lands(
            "StockNumber,NewUsed,BikeYear,Make,Model,VIN,Color,Odometer,BikeKey,Location,\
             Conditon,InvoiceDate,ReceivedDate,Freight,DSRP,MSRP,PartsInstalled,OnHoldNumber,UnitStatus",
            &[
                ("StockNumber", Some(Target::Stock)),
                ("NewUsed", Some(Target::Type)),
                ("BikeYear", Some(Target::Year)),
                ("Make", Some(Target::Make)),
                ("Model", Some(Target::Model)),
                ("VIN", Some(Target::Vin)),
                ("Color", Some(Target::ExteriorColor)),
                ("Odometer", Some(Target::Miles)),
                ("BikeKey", None),
                ("Location", Some(Target::Location)),
                // Loose, and NewUsed already holds new/used.
                ("Conditon", None),
                ("InvoiceDate", None),
                ("ReceivedDate", None),
                ("Freight", None),
                ("DSRP", None),
                ("MSRP", Some(Target::Msrp)),
                ("PartsInstalled", None),
                ("OnHoldNumber", None),
                ("UnitStatus", Some(Target::Status)),
            ],
        );
    }

    #[test]
    fn ari_unit_upload_headers() {
        assert_lands(
            "Unique ID,Class,Make,Model,Year,Style,VIN/Serial Number,Condition,Description,\
             New/Used,Primary Color,Trim Color,Stock Number",
            &[
                ("Unique ID", None),
                ("Class", Some(Target::BodyStyle)),
                ("Make", Some(Target::Make)),
                ("Model", Some(Target::Model)),
                ("Year", Some(Target::Year)),
                // A second body-style column: Class, first, is used (a note says so).
                ("Style", None),
                ("VIN/Serial Number", Some(Target::Vin)),
                // Wear (Excellent, Good): gives way to New/Used.
                ("Condition", None),
                ("Description", None),
                ("New/Used", Some(Target::Type)),
                ("Primary Color", Some(Target::ExteriorColor)),
                ("Trim Color", None),
                ("Stock Number", Some(Target::Stock)),
            ],
        );
        let schema = schema_of("VIN/Serial Number,Stock Number");
        assert!(Binding::new(&Profile::auto(), &schema).serial_vin);
    }

    #[test]
    fn dx1_major_unit_headers() {
        assert_lands(
            "Condition,Stock Number,Year,Make,Model,VIN Number,Odometer",
            &[
                ("Condition", Some(Target::Type)),
                ("Stock Number", Some(Target::Stock)),
                ("Year", Some(Target::Year)),
                ("Make", Some(Target::Make)),
                ("Model", Some(Target::Model)),
                ("VIN Number", Some(Target::Vin)),
                ("Odometer", Some(Target::Miles)),
            ],
        );
    }

    #[test]
    fn lot_wizard_headers() {
        assert_lands(
            "Stock,VIN,NU,Color,Cylinders,Axles,Chassis",
            &[
                ("Stock", Some(Target::Stock)),
                ("VIN", Some(Target::Vin)),
                ("NU", Some(Target::Type)),
                ("Color", Some(Target::ExteriorColor)),
                ("Cylinders", Some(Target::EngineCylinders)),
                ("Axles", None),
                ("Chassis", None),
            ],
        );
    }

    #[test]
    fn ax9_data_exchange_headers() {
        assert_lands(
            "stock,title,vin,year,make,model,trim,free_text,type,body,mileage,price_current,\
             price_wholesale,price_cost,InternetPrice,MSRP,BookValue,exterior,interior,doors,\
             engine,transmission,drive_type,fuel_type",
            &[
                ("stock", Some(Target::Stock)),
                // New/Used/Certified here; kept as title status (see SOURCES).
                ("title", Some(Target::TitleStatus)),
                ("vin", Some(Target::Vin)),
                ("year", Some(Target::Year)),
                ("make", Some(Target::Make)),
                ("model", Some(Target::Model)),
                ("trim", Some(Target::Trim)),
                ("free_text", None),
                // The kind of vehicle here; loose, with nothing plainer to give way to.
                ("type", Some(Target::Type)),
                ("body", Some(Target::BodyStyle)),
                ("mileage", Some(Target::Miles)),
                ("price_current", Some(Target::Price)),
                ("price_wholesale", None),
                ("price_cost", None),
                ("InternetPrice", Some(Target::InternetPrice)),
                ("MSRP", Some(Target::Msrp)),
                ("BookValue", None),
                ("exterior", Some(Target::ExteriorColor)),
                // The colour here; kept as the material (see SOURCES).
                ("interior", Some(Target::InteriorType)),
                ("doors", Some(Target::Doors)),
                ("engine", Some(Target::Engine)),
                ("transmission", Some(Target::Transmission)),
                ("drive_type", Some(Target::DriveType)),
                ("fuel_type", Some(Target::Fuel)),
            ],
        );
    }

    #[test]
    fn hoot_autoweb_headers() {
        assert_lands(
            "Dealer ID,VIN,Dealer Stock,Destination URL,Vehicle Status,Image URLs,Year,\
             Exterior Color,Number of Doors",
            &[
                ("Dealer ID", None),
                ("VIN", Some(Target::Vin)),
                ("Dealer Stock", Some(Target::Stock)),
                ("Destination URL", Some(Target::Url)),
                // Sold / in stock by its name; the values put it right (see `infer`).
                ("Vehicle Status", Some(Target::Status)),
                ("Image URLs", Some(Target::Images)),
                ("Year", Some(Target::Year)),
                ("Exterior Color", Some(Target::ExteriorColor)),
                ("Number of Doors", Some(Target::Doors)),
            ],
        );
    }

    #[test]
    fn truckradar_headers() {
        assert_lands(
            "stock_number,vin,new_or_used,odometer_miles,fuel_type,transmission_type",
            &[
                ("stock_number", Some(Target::Stock)),
                ("vin", Some(Target::Vin)),
                ("new_or_used", Some(Target::Type)),
                ("odometer_miles", Some(Target::Miles)),
                ("fuel_type", Some(Target::Fuel)),
                ("transmission_type", Some(Target::Transmission)),
            ],
        );
    }

    #[test]
    fn erepairables_import_headers() {
        assert_lands(
            "Vehicle Make|Vehicle Model|Vehicle Type|Vehicle Condition|Vehicle Year|Vehicle Price|\
             Vehicle Description|Title Status|Odometer|VIN #|Your Stock Number|Expiration date|\
             External Link|Image Url 1",
            &[
                ("Vehicle Make", Some(Target::Make)),
                ("Vehicle Model", Some(Target::Model)),
                // Car, Truck, Suv: loose new/used, giving way to "Vehicle Condition".
                ("Vehicle Type", None),
                // Repaired, Damaged, Flood: damage, not new/used, but named as new/used is
                // elsewhere; its values say no (a warning per record).
                ("Vehicle Condition", Some(Target::Type)),
                ("Vehicle Year", Some(Target::Year)),
                ("Vehicle Price", Some(Target::Price)),
                ("Vehicle Description", None),
                ("Title Status", Some(Target::TitleStatus)),
                ("Odometer", Some(Target::Miles)),
                ("VIN #", Some(Target::Vin)),
                ("Your Stock Number", Some(Target::Stock)),
                ("Expiration date", None),
                ("External Link", Some(Target::Url)),
                ("Image Url 1", Some(Target::Images)),
            ],
        );
    }

    #[test]
    fn marine_serial_headers() {
        for header in SERIAL_HEADERS {
            let schema = schema_of(&format!("Stock #,\"{header}\""));
            let binding = Binding::new(&Profile::auto(), &schema);
            assert_eq!(binding.field(Target::Vin), Some(1), "{header}");
            assert!(binding.serial_vin, "{header}");
        }
        let schema = schema_of("Stock #,VIN");
        assert!(!Binding::new(&Profile::auto(), &schema).serial_vin);
    }

    #[test]
    fn common_dms_spellings_headers() {
        assert_lands(
            "Stk #,N/U,Cert,Odom,Mfr,Model,Ext. Colour,Int. Color,Trans Type,Eng Desc,VIN",
            &[
                ("Stk #", Some(Target::Stock)),
                ("N/U", Some(Target::Type)),
                ("Cert", Some(Target::Certified)),
                ("Odom", Some(Target::Miles)),
                ("Mfr", Some(Target::Make)),
                ("Model", Some(Target::Model)),
                ("Ext. Colour", Some(Target::ExteriorColor)),
                ("Int. Color", Some(Target::InteriorColor)),
                ("Trans Type", Some(Target::Transmission)),
                ("Eng Desc", Some(Target::Engine)),
                ("VIN", Some(Target::Vin)),
            ],
        );
    }

    #[test]
    fn a_loose_name_gives_way_to_a_plain_one_whichever_comes_first() {
        for header in ["Type,Stock #,New/Used,VIN", "New/Used,Stock #,Type,VIN"] {
            let schema = schema_of(header);
            let binding = Binding::new(&Profile::auto(), &schema);
            let new_used = schema
                .names()
                .find(|&(_, n)| n == "New/Used")
                .map(|(id, _)| id);
            assert_eq!(binding.field(Target::Type), new_used, "{header}");
        }
        let schema = schema_of("id,Stock #,vin");
        assert_eq!(
            Binding::new(&Profile::auto(), &schema).field(Target::Stock),
            Some(1)
        );
    }

    fn map_csv(csv: &str, profile: Profile) -> Vec<Result<String, Vec<String>>> {
        let mut reader = crate::feed::from_bytes(csv.as_bytes(), &ReadOptions::default()).unwrap();
        let mut mapper = Mapper::new(profile, 10);
        let mut record = Record::default();
        let mut out = Vec::new();
        while let Item::Record = reader.next(&mut record).unwrap() {
            out.push(match mapper.map(reader.schema(), &record).into_result() {
                Ok(a) => Ok(a.payload.vin.clone()),
                Err(r) => Err(r.problems.iter().map(ToString::to_string).collect()),
            });
        }
        out
    }

    #[test]
    fn a_hull_id_in_a_hin_or_serial_column_is_read_leniently() {
        for header in ["HIN", "Serial Number", "Hull ID #"] {
            let csv = format!("Stock #,{header},Year,Make\nB100,abc12345d404,2004,Sea Ray\n");
            assert_eq!(
                map_csv(&csv, Profile::auto()),
                [Ok("ABC12345D404".to_owned())],
                "{header}"
            );
        }
        // A VIN column stays strict, as the profile says.
        let out = map_csv("Stock #,VIN\nB100,ABC12345D404\n", Profile::auto());
        assert!(matches!(&out[..], [Err(_)]), "{out:?}");
        // A profile that names the column keeps its own vin_check.
        let mut profile = Profile::auto();
        profile.fields.insert(Target::Vin, "HIN".into());
        assert_eq!(profile.vin_check, VinCheck::Strict);
        let out = map_csv("Stock #,HIN\nB100,ABC12345D404\n", profile);
        assert!(matches!(&out[..], [Err(_)]), "{out:?}");
    }
}
