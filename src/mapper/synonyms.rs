//! DMS words for the spec's enum values: "4WD" → 4x4, "Pre-Owned" → Used, "Agate Black
//! Metallic" → Black. Lookups never guess: a word that could mean two values, or none, gives
//! `None` and the mapper leaves the field out with a warning that says why.

use crate::api::{
    BodyStyle, Color, DriveType, Fuel, InteriorType, TitleStatus, Tonnage, VehicleType,
};

/// Lower-case words separated by single spaces: "Pre-Owned" and "pre owned" meet as "pre owned".
pub fn key(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for word in s
        .split(|c: char| !c.is_alphanumeric() && c != '/' && c != '.')
        .filter(|w| !w.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    out
}

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found<T> {
    One(T),
    /// The text names two different values ("Black/Red", "2WD").
    Ambiguous,
    None,
}

impl<T> Found<T> {
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Found<U> {
        match self {
            Found::One(v) => Found::One(f(v)),
            Found::Ambiguous => Found::Ambiguous,
            Found::None => Found::None,
        }
    }
}

fn exact<T: Copy>(table: &[(&str, T)], k: &str) -> Option<T> {
    table.iter().find(|(w, _)| *w == k).map(|(_, v)| *v)
}

/// Looks the whole text up, then (if `by_words`) each of its words; two different values found
/// among the words is ambiguous.
fn lookup<T: Copy + PartialEq>(table: &[(&str, T)], s: &str, by_words: bool) -> Found<T> {
    let k = key(s);
    if let Some(v) = exact(table, &k) {
        return Found::One(v);
    }
    if !by_words {
        return Found::None;
    }
    let words: Vec<&str> = k.split([' ', '/']).filter(|w| !w.is_empty()).collect();
    let mut found: Option<T> = None;
    // Two-word phrases first ("sport utility"), then single words.
    for n in [3, 2, 1] {
        for w in words.windows(n) {
            if let Some(v) = exact(table, &w.join(" ")) {
                match found {
                    Some(f) if f != v => return Found::Ambiguous,
                    _ => found = Some(v),
                }
            }
        }
        if found.is_some() {
            break;
        }
    }
    found.map_or(Found::None, Found::One)
}

const VEHICLE_TYPES: &[(&str, VehicleType)] = &[
    ("new", VehicleType::New),
    ("n", VehicleType::New),
    ("used", VehicleType::Used),
    ("u", VehicleType::Used),
    ("pre owned", VehicleType::Used),
    ("preowned", VehicleType::Used),
    ("certified", VehicleType::Certified),
    ("cpo", VehicleType::Certified),
    ("c", VehicleType::Certified),
    ("certified pre owned", VehicleType::Certified),
    ("certified preowned", VehicleType::Certified),
    ("certified used", VehicleType::Certified),
];

pub fn vehicle_type(s: &str) -> Found<VehicleType> {
    lookup(VEHICLE_TYPES, s, false)
}

const BODY_STYLES: &[(&str, BodyStyle)] = &[
    ("truck", BodyStyle::Truck),
    ("pickup", BodyStyle::Truck),
    ("pickup truck", BodyStyle::Truck),
    ("crew cab", BodyStyle::Truck),
    ("crew cab pickup", BodyStyle::Truck),
    ("regular cab", BodyStyle::Truck),
    ("extended cab", BodyStyle::Truck),
    ("ext cab", BodyStyle::Truck),
    ("reg cab", BodyStyle::Truck),
    ("double cab", BodyStyle::Truck),
    ("quad cab", BodyStyle::Truck),
    ("access cab", BodyStyle::Truck),
    ("king cab", BodyStyle::Truck),
    ("supercrew", BodyStyle::Truck),
    ("supercab", BodyStyle::Truck),
    ("crewmax", BodyStyle::Truck),
    ("suv", BodyStyle::Suv),
    ("sport utility", BodyStyle::Suv),
    ("sport utility vehicle", BodyStyle::Suv),
    ("crossover", BodyStyle::Suv),
    ("cuv", BodyStyle::Suv),
    ("sedan", BodyStyle::Sedan),
    ("4dr car", BodyStyle::Sedan),
    ("4 door car", BodyStyle::Sedan),
    ("saloon", BodyStyle::Sedan),
    ("coupe", BodyStyle::Coupe),
    ("2dr car", BodyStyle::Coupe),
    ("2 door car", BodyStyle::Coupe),
    ("convertible", BodyStyle::Convertible),
    ("cabriolet", BodyStyle::Convertible),
    ("roadster", BodyStyle::Convertible),
    ("hatchback", BodyStyle::Hatchback),
    ("hatch", BodyStyle::Hatchback),
    ("liftback", BodyStyle::Hatchback),
    ("wagon", BodyStyle::Wagon),
    ("station wagon", BodyStyle::Wagon),
    ("estate", BodyStyle::Wagon),
    ("minivan", BodyStyle::MinivanVan),
    ("mini van", BodyStyle::MinivanVan),
    ("van", BodyStyle::MinivanVan),
    ("passenger van", BodyStyle::MinivanVan),
    ("cargo van", BodyStyle::MinivanVan),
    ("minivan van", BodyStyle::MinivanVan),
    ("limousine", BodyStyle::Limousine),
    ("limo", BodyStyle::Limousine),
    ("rv", BodyStyle::Rv),
    ("motorhome", BodyStyle::Rv),
    ("motor home", BodyStyle::Rv),
    ("motorcycle", BodyStyle::Motorcycle),
    ("scooter", BodyStyle::Motorcycle),
    ("snowmobile", BodyStyle::Snowmobile),
    ("atv", BodyStyle::AtvQuad),
    ("quad", BodyStyle::AtvQuad),
    ("atv quad", BodyStyle::AtvQuad),
    ("trailer", BodyStyle::Trailer),
    ("travel trailer", BodyStyle::Trailer),
    ("fifth wheel", BodyStyle::Trailer),
    ("pwc", BodyStyle::Pwc),
    ("personal watercraft", BodyStyle::Pwc),
    ("jet ski", BodyStyle::Pwc),
    ("jetski", BodyStyle::Pwc),
    ("waverunner", BodyStyle::Pwc),
    // The category words of RV, trailer and powersports dealer systems (Trailer Central's
    // categories, RVIA's motorhome classes, ARI's unit classes; `docs/header-vocabulary.md`,
    // "Value words"). Motorhome classes are RVs; towables keep the trailer the lines above
    // give a travel trailer. The off-highway vehicles (ATV, UTV, side-by-side) have one spec
    // value, ATV-Quad.
    ("class a", BodyStyle::Rv),
    ("class b", BodyStyle::Rv),
    ("class c", BodyStyle::Rv),
    ("class a motorhome", BodyStyle::Rv),
    ("class b motorhome", BodyStyle::Rv),
    ("class c motorhome", BodyStyle::Rv),
    ("camper van", BodyStyle::Rv),
    ("toy hauler", BodyStyle::Trailer),
    ("car hauler", BodyStyle::Trailer),
    ("tow dolly", BodyStyle::Trailer),
    ("pop up camper", BodyStyle::Trailer),
    ("popup camper", BodyStyle::Trailer),
    ("folding camper", BodyStyle::Trailer),
    ("tent camper", BodyStyle::Trailer),
    // A trailer named for what it carries is a trailer, not what it carries.
    ("snowmobile trailer", BodyStyle::Trailer),
    ("motorcycle trailer", BodyStyle::Trailer),
    ("atv trailer", BodyStyle::Trailer),
    ("utv trailer", BodyStyle::Trailer),
    ("pwc trailer", BodyStyle::Trailer),
    ("jet ski trailer", BodyStyle::Trailer),
    ("utv", BodyStyle::AtvQuad),
    ("sxs", BodyStyle::AtvQuad),
    ("side by side", BodyStyle::AtvQuad),
    ("side x side", BodyStyle::AtvQuad),
    ("four wheeler", BodyStyle::AtvQuad),
    ("4 wheeler", BodyStyle::AtvQuad),
    ("snow machine", BodyStyle::Snowmobile),
    ("snowmachine", BodyStyle::Snowmobile),
    ("dirt bike", BodyStyle::Motorcycle),
    ("dirtbike", BodyStyle::Motorcycle),
    ("motorbike", BodyStyle::Motorcycle),
    ("sport bike", BodyStyle::Motorcycle),
    ("street bike", BodyStyle::Motorcycle),
    ("dual sport", BodyStyle::Motorcycle),
    ("trike", BodyStyle::Motorcycle),
    ("moped", BodyStyle::Motorcycle),
    ("other", BodyStyle::Other),
];

/// Kinds of vehicle that are several body styles at once: a "Car" is a sedan, a coupe, a
/// hatchback… (a vehicle-type column's word: eRepairables' Car / Truck / Suv).
const SEVERAL_BODY_STYLES: &[&str] = &["car", "cars", "auto", "automobile", "passenger car"];

/// "Crew Cab Pickup", "4dr Sport Utility", "2dr Car".
pub fn body_style(s: &str) -> Found<BodyStyle> {
    if SEVERAL_BODY_STYLES.contains(&key(s).as_str()) {
        return Found::Ambiguous;
    }
    lookup(BODY_STYLES, s, true)
}

const FUELS: &[(&str, Fuel)] = &[
    ("gas", Fuel::Gas),
    ("gasoline", Fuel::Gas),
    ("petrol", Fuel::Gas),
    ("unleaded", Fuel::Gas),
    ("regular", Fuel::Gas),
    ("regular unleaded", Fuel::Gas),
    ("premium", Fuel::Gas),
    ("premium unleaded", Fuel::Gas),
    ("gasoline fuel", Fuel::Gas),
    // The EPA's words (fueleconomy.gov, `fuelType`).
    ("regular gas", Fuel::Gas),
    ("premium gas", Fuel::Gas),
    ("regular gasoline", Fuel::Gas),
    ("premium gasoline", Fuel::Gas),
    ("midgrade", Fuel::Gas),
    ("midgrade gasoline", Fuel::Gas),
    ("diesel", Fuel::Diesel),
    ("diesel fuel", Fuel::Diesel),
    ("biodiesel", Fuel::Biodiesel),
    ("electric", Fuel::Electric),
    ("ev", Fuel::Electric),
    ("bev", Fuel::Electric),
    ("battery electric", Fuel::Electric),
    ("all electric", Fuel::Electric),
    // Chrome-style fuel system descriptions.
    ("electric fuel system", Fuel::Electric),
    ("gasoline fuel system", Fuel::Gas),
    ("diesel fuel system", Fuel::Diesel),
    ("flex fuel", Fuel::FfvEthanol),
    ("flexfuel", Fuel::FfvEthanol),
    ("flex", Fuel::FfvEthanol),
    ("ffv", Fuel::FfvEthanol),
    ("e85", Fuel::FfvEthanol),
    ("ethanol", Fuel::FfvEthanol),
    ("gasoline/ethanol", Fuel::FfvEthanol),
    ("ffv ethanol", Fuel::FfvEthanol),
    ("hybrid", Fuel::HybridElectric),
    ("hybrid electric", Fuel::HybridElectric),
    ("gas/electric hybrid", Fuel::HybridElectric),
    ("gasoline hybrid", Fuel::HybridElectric),
    ("plug in hybrid", Fuel::HybridElectric),
    ("phev", Fuel::HybridElectric),
    ("hev", Fuel::HybridElectric),
    ("mild hybrid", Fuel::HybridElectric),
    ("cng", Fuel::Cng),
    ("natural gas", Fuel::Cng),
    ("compressed natural gas", Fuel::Cng),
    ("hydrogen", Fuel::Other),
    ("other", Fuel::Other),
];

/// A fuel word ("Regular Unleaded"), or two a vehicle can run on, joined by "/", "or" or
/// "and": gasoline (or diesel) with electricity is a hybrid, gasoline with E85 a flex-fuel
/// vehicle, as the EPA's fuel economy data names them ("Regular Gas and Electricity",
/// "Premium Gas or Electricity", "Gasoline or E85": fueleconomy.gov's web services, field
/// `fuelType`) and as DMS exports write them ("Electric / Unleaded", "E85 / Unleaded"). Any
/// other pair ("Gasoline or natural gas": a bi-fuel, CNG or gas?) is no value.
pub fn fuel(s: &str) -> Found<Fuel> {
    let found = lookup(FUELS, s, false);
    if found != Found::None {
        return found;
    }
    let k = key(s).replace('/', " / ");
    let parts: Vec<&str> = k
        .split(" / ")
        .flat_map(|part| part.split(" or "))
        .flat_map(|part| part.split(" and "))
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .collect();
    let [a, b] = parts[..] else {
        return Found::None;
    };
    // "Electricity" is the EPA's word; "Gas" its short form of gasoline.
    let one = |part: &str| match part {
        "electricity" => Some(Fuel::Electric),
        _ => exact(FUELS, part),
    };
    let (Some(x), Some(y)) = (one(a), one(b)) else {
        return Found::None;
    };
    let pair = |p: Fuel, q: Fuel| (x == p && y == q) || (x == q && y == p);
    if x == y {
        Found::One(x)
    } else if pair(Fuel::Gas, Fuel::Electric) || pair(Fuel::Diesel, Fuel::Electric) {
        Found::One(Fuel::HybridElectric)
    } else if pair(Fuel::Gas, Fuel::FfvEthanol) {
        Found::One(Fuel::FfvEthanol)
    } else {
        Found::Ambiguous
    }
}

const DRIVE_TYPES: &[(&str, DriveType)] = &[
    ("4wd", DriveType::FourByFour),
    ("4x4", DriveType::FourByFour),
    ("four wheel drive", DriveType::FourByFour),
    ("4 wheel drive", DriveType::FourByFour),
    ("awd", DriveType::Awd),
    ("all wheel drive", DriveType::Awd),
    ("fwd", DriveType::Fwd),
    ("front wheel drive", DriveType::Fwd),
    ("rwd", DriveType::Rwd),
    ("rear wheel drive", DriveType::Rwd),
    // Meta's automotive catalog `drivetrain` values (its TWO_WD is front or rear: ambiguous).
    ("four wd", DriveType::FourByFour),
    // Makers' names for their all-wheel-drive systems: Mercedes-Benz 4MATIC, BMW xDrive,
    // Audi quattro, Volkswagen 4MOTION, MINI ALL4, Acura SH-AWD, Subaru Symmetrical AWD,
    // Volvo/Jaguar/Land Rover "AWD". Each is permanent or on-demand all-wheel drive on a car
    // or crossover, with no low range: AWD, not 4x4.
    ("4matic", DriveType::Awd),
    ("xdrive", DriveType::Awd),
    ("quattro", DriveType::Awd),
    ("4motion", DriveType::Awd),
    ("all4", DriveType::Awd),
    ("sh awd", DriveType::Awd),
    ("symmetrical awd", DriveType::Awd),
    ("symmetrical all wheel drive", DriveType::Awd),
];

/// "4WD", "All Wheel Drive"; "2WD" is ambiguous (front or rear?).
pub fn drive_type(s: &str) -> Found<DriveType> {
    let k = key(s);
    if matches!(k.as_str(), "2wd" | "4x2" | "two wheel drive" | "two wd") {
        return Found::Ambiguous;
    }
    lookup(DRIVE_TYPES, s, false)
}

const INTERIOR_TYPES: &[(&str, InteriorType)] = &[
    ("leather", InteriorType::Leather),
    ("nappa", InteriorType::Leather),
    ("cloth", InteriorType::Cloth),
    ("fabric", InteriorType::Cloth),
    ("textile", InteriorType::Cloth),
    ("vinyl", InteriorType::Vinyl),
    // Synthetic leathers are vinyl by another name.
    ("leatherette", InteriorType::Vinyl),
    ("faux leather", InteriorType::Vinyl),
    ("synthetic leather", InteriorType::Vinyl),
    ("simulated leather", InteriorType::Vinyl),
    ("sensatec", InteriorType::Vinyl),
    ("softex", InteriorType::Vinyl),
    ("mb tex", InteriorType::Vinyl),
    ("artico", InteriorType::Vinyl),
    ("v tex", InteriorType::Vinyl),
];

/// "Leather", "Premium Cloth", "Leatherette".
pub fn interior_type(s: &str) -> Found<InteriorType> {
    lookup(INTERIOR_TYPES, s, true)
}

const TITLE_STATUSES: &[(&str, TitleStatus)] = &[
    ("clean", TitleStatus::Clear),
    ("clear", TitleStatus::Clear),
    ("clean title", TitleStatus::Clear),
    ("clear title", TitleStatus::Clear),
    ("salvage", TitleStatus::Salvage),
    ("salvage title", TitleStatus::Salvage),
    ("salvage certificate", TitleStatus::Salvage),
    ("rebuilt", TitleStatus::Rebuilt),
    ("reconstructed", TitleStatus::Rebuilt),
    ("rebuilt title", TitleStatus::Rebuilt),
    ("rebuilt salvage", TitleStatus::Rebuilt),
    ("parts only", TitleStatus::PartsOnly),
    ("parts", TitleStatus::PartsOnly),
    ("non repairable", TitleStatus::PartsOnly),
    ("junk", TitleStatus::PartsOnly),
];

pub fn title_status(s: &str) -> Found<TitleStatus> {
    lookup(TITLE_STATUSES, s, false)
}

const TONNAGES: &[(&str, Tonnage)] = &[
    ("quarter ton", Tonnage::QuarterTon),
    ("1/4 ton", Tonnage::QuarterTon),
    ("half ton", Tonnage::HalfTon),
    ("1/2 ton", Tonnage::HalfTon),
    ("three quarter ton", Tonnage::ThreeQuarterTon),
    ("3/4 ton", Tonnage::ThreeQuarterTon),
    ("one ton", Tonnage::OneTon),
    ("1 ton", Tonnage::OneTon),
    ("one and a half ton", Tonnage::OneAndAHalfTon),
    ("1.5 ton", Tonnage::OneAndAHalfTon),
    ("1 1/2 ton", Tonnage::OneAndAHalfTon),
    ("two ton", Tonnage::TwoTon),
    ("2 ton", Tonnage::TwoTon),
];

pub fn tonnage(s: &str) -> Found<Tonnage> {
    lookup(TONNAGES, s, false)
}

/// Color words. A name holding one of these is that color ("Agate Black Metallic"); a name
/// holding two different ones is ambiguous ("Black/Red", "White Gold"). Phrases name a spec
/// shade that would otherwise clash with its own "gray".
const COLOR_WORDS: &[(&str, Color)] = &[
    ("slate gray", Color::Slate),
    ("slate grey", Color::Slate),
    ("pewter gray", Color::Pewter),
    ("pewter grey", Color::Pewter),
    ("charcoal gray", Color::Charcoal),
    ("charcoal grey", Color::Charcoal),
    ("black", Color::Black),
    ("blue", Color::Blue),
    ("brown", Color::Brown),
    ("burgundy", Color::Burgundy),
    ("maroon", Color::Burgundy),
    ("gold", Color::Gold),
    ("gray", Color::Gray),
    ("grey", Color::Gray),
    ("green", Color::Green),
    ("orange", Color::Orange),
    ("purple", Color::Purple),
    ("violet", Color::Purple),
    ("red", Color::Red),
    ("silver", Color::Silver),
    ("tan", Color::Tan),
    ("teal", Color::Teal),
    ("turquoise", Color::Teal),
    ("white", Color::White),
    ("yellow", Color::Yellow),
    ("khaki", Color::Khaki),
    ("beige", Color::Beige),
    ("slate", Color::Slate),
    ("pewter", Color::Pewter),
    ("charcoal", Color::Charcoal),
];

/// Paint vocabulary: words that name a color when no color word does ("Modern Steel Metallic"
/// is gray, "Lunar Rock" gray, "Ebony" black) and are only a modifier beside one ("Blue Steel" is
/// blue, "Obsidian Blue Pearl" blue, "Midnight Silver" silver). Each is here because the paints
/// sold under it look that color. Finishes (metallic, pearl, mica, crystal, tintcoat, tri-coat)
/// name no color; neither do words whose paints go several ways ("ice": Silver Ice, Toyota's
/// pale Ice Edge; "carbon": Carbon Black, Carbonized Gray).
const PAINT_WORDS: &[(&str, Color)] = &[
    ("lunar rock", Color::Gray),
    ("gun metallic", Color::Gray),
    ("wind chill", Color::White),
    ("go mango", Color::Orange),
    ("ebony", Color::Black),
    ("onyx", Color::Black),
    ("obsidian", Color::Black),
    ("jet", Color::Black),
    ("noir", Color::Black),
    ("midnight", Color::Black),
    ("navy", Color::Blue),
    ("cobalt", Color::Blue),
    ("sapphire", Color::Blue),
    ("blueprint", Color::Blue),
    ("mocha", Color::Brown),
    ("chocolate", Color::Brown),
    ("espresso", Color::Brown),
    ("wine", Color::Burgundy),
    ("graphite", Color::Gray),
    ("gunmetal", Color::Gray),
    ("steel", Color::Gray),
    ("magnetic", Color::Gray),
    ("granite", Color::Gray),
    ("cement", Color::Gray),
    ("emerald", Color::Green),
    ("plum", Color::Purple),
    ("ruby", Color::Red),
    ("crimson", Color::Red),
    ("scarlet", Color::Red),
    ("cherry", Color::Red),
    ("torred", Color::Red),
    ("quicksilver", Color::Silver),
    ("blizzard", Color::White),
    ("snow", Color::White),
    ("frost", Color::White),
];

/// The values `table` names in `words`, left to right, longest phrase first at each word.
fn scan<T: Copy>(table: &[(&str, T)], words: &[&str]) -> Vec<T> {
    let mut found = Vec::new();
    let mut i = 0;
    'words: while i < words.len() {
        for n in (1..=3.min(words.len() - i)).rev() {
            if let Some(v) = exact(table, &words[i..i + n].join(" ")) {
                found.push(v);
                i += n;
                continue 'words;
            }
        }
        i += 1;
    }
    found
}

/// The colors of one part of a name (between slashes), in order: its color words if it has
/// any, else its paint vocabulary.
fn part_colors(part: &str) -> Vec<Color> {
    let words: Vec<&str> = part.split(' ').filter(|w| !w.is_empty()).collect();
    let named = scan(COLOR_WORDS, &words);
    if named.is_empty() {
        scan(PAINT_WORDS, &words)
    } else {
        named
    }
}

/// The friendly color in a manufacturer's color name: "Agate Black Metallic" → Black, "Modern
/// Steel Metallic" → Gray, "Granite Crystal" → Gray; "Black/Red" and "White Gold" are
/// ambiguous; "Hydro Shimmer" names none.
pub fn color(s: &str) -> Found<Color> {
    let mut found: Option<Color> = None;
    for part in key(s).split('/') {
        for c in part_colors(part) {
            match found {
                Some(f) if f != c => return Found::Ambiguous,
                _ => found = Some(c),
            }
        }
    }
    found.map_or(Found::None, Found::One)
}

/// An interior's color, when it has one: "Jet Black", "Premium/Black" (Premium names no
/// color). A two-tone interior ("Black/Red", "Jet Black/Light Ash Gray", "Ebony with Tan
/// Accents") is ambiguous: its first word is not the interior's color, and the spec has no
/// value for two.
pub fn interior_color(s: &str) -> Found<Color> {
    // "with", "w" and "and" join two colors as a slash does.
    let k = key(s);
    let parts: Vec<&str> = k
        .split(' ')
        .map(|w| {
            if matches!(w, "with" | "w" | "and") {
                "/"
            } else {
                w
            }
        })
        .collect();
    let mut found: Option<Color> = None;
    for part in parts.join(" ").split('/') {
        for c in part_colors(part) {
            match found {
                Some(f) if f != c => return Found::Ambiguous,
                _ => found = Some(c),
            }
        }
    }
    found.map_or(Found::None, Found::One)
}

/// The export's own sale status: Some(true) sold, Some(false) listed and not sold, None
/// unknown (ignored with a warning; the vehicle is judged as any listed one).
///
/// The rules for status words: "In Inventory" and "Available" (Meta's
/// `availability`) are on the lot. "Pending" / "Sale Pending" is a deal not yet closed: the
/// vehicle stays listed until the DMS says sold. "On Order" and "In Transit" are vehicles the
/// dealer lists before they arrive: listed, not sold. "Not Available" says neither (it may be
/// sold, in service or held back), so it is unknown.
pub fn sold(s: &str) -> Option<bool> {
    match key(s).as_str() {
        "sold" | "sold pending delivery" | "delivered" | "retailed" | "s" => Some(true),
        "in stock" | "instock" | "available" | "active" | "for sale" | "on lot" | "a" | "i"
        | "stock" | "in inventory" | "inventory" | "pending" | "sale pending" | "pending sale"
        | "on order" | "in transit" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Found::*;

    #[test]
    fn keys_meet_across_spellings() {
        assert_eq!(key(" Pre-Owned "), "pre owned");
        assert_eq!(key("Crew_Cab  Pickup"), "crew cab pickup");
        assert_eq!(key("1/2 Ton"), "1/2 ton");
    }

    #[test]
    fn vehicle_types() {
        for (s, t) in [
            ("N", VehicleType::New),
            ("new", VehicleType::New),
            ("U", VehicleType::Used),
            ("Pre-Owned", VehicleType::Used),
            ("PreOwned", VehicleType::Used),
            ("CPO", VehicleType::Certified),
            ("Certified Pre-Owned", VehicleType::Certified),
        ] {
            assert_eq!(vehicle_type(s), One(t), "{s}");
        }
        assert_eq!(vehicle_type("Demo"), None);
    }

    #[test]
    fn body_styles() {
        for (s, b) in [
            ("Crew Cab Pickup", BodyStyle::Truck),
            ("SuperCrew", BodyStyle::Truck),
            ("Sport Utility", BodyStyle::Suv),
            ("4dr Sport Utility", BodyStyle::Suv),
            ("Crossover", BodyStyle::Suv),
            ("4dr Car", BodyStyle::Sedan),
            ("2dr Car", BodyStyle::Coupe),
            ("Passenger Van", BodyStyle::MinivanVan),
            ("Hatchback", BodyStyle::Hatchback),
            ("Wagon", BodyStyle::Wagon),
            ("SUV", BodyStyle::Suv),
        ] {
            assert_eq!(body_style(s), One(b), "{s}");
        }
        assert_eq!(body_style("Convertible Wagon"), Ambiguous);
        for (s, b) in [
            ("Cargo Trailer", BodyStyle::Trailer),
            ("Enclosed Car Hauler", BodyStyle::Trailer),
            ("Horse Trailer", BodyStyle::Trailer),
            ("Dump Trailer", BodyStyle::Trailer),
            ("Enclosed Snowmobile Trailer", BodyStyle::Trailer),
            ("Class A Motorhome", BodyStyle::Rv),
            ("Class C", BodyStyle::Rv),
            ("Motorhome Class B+", BodyStyle::Rv),
            ("Side-by-Side", BodyStyle::AtvQuad),
            ("Side x Side", BodyStyle::AtvQuad),
            ("UTV", BodyStyle::AtvQuad),
            ("Snowmobile", BodyStyle::Snowmobile),
            ("Dirt Bike", BodyStyle::Motorcycle),
            ("Suv", BodyStyle::Suv),
        ] {
            assert_eq!(body_style(s), One(b), "{s}");
        }
        assert_eq!(body_style("Spaceship"), None);
    }

    #[test]
    fn fuels() {
        for (s, f) in [
            ("Gasoline", Fuel::Gas),
            ("Regular Unleaded", Fuel::Gas),
            ("Flex Fuel", Fuel::FfvEthanol),
            ("E85", Fuel::FfvEthanol),
            ("Hybrid", Fuel::HybridElectric),
            ("Plug-In Hybrid", Fuel::HybridElectric),
            ("Electric", Fuel::Electric),
            ("Diesel", Fuel::Diesel),
            ("Natural Gas", Fuel::Cng),
        ] {
            assert_eq!(fuel(s), One(f), "{s}");
        }
        assert_eq!(fuel("Steam"), None);
    }

    #[test]
    fn two_fuels_one_vehicle_runs_on() {
        for (s, f) in [
            ("Electric / Unleaded", Fuel::HybridElectric),
            ("Unleaded/Electric", Fuel::HybridElectric),
            ("Regular Gas and Electricity", Fuel::HybridElectric),
            ("Premium Gas or Electricity", Fuel::HybridElectric),
            ("Diesel / Electric", Fuel::HybridElectric),
            ("E85 / Unleaded", Fuel::FfvEthanol),
            ("Gasoline or E85", Fuel::FfvEthanol),
            ("Unleaded / Regular Unleaded", Fuel::Gas),
        ] {
            assert_eq!(fuel(s), One(f), "{s}");
        }
        // A bi-fuel (gas or CNG) is neither value; a word lotsync does not know is no pair.
        assert_eq!(fuel("Gasoline or natural gas"), Ambiguous);
        assert_eq!(fuel("Unleaded / Steam"), None);
        assert_eq!(fuel("Gas / Diesel / Electric"), None);
    }

    #[test]
    fn drive_types() {
        for (s, d) in [
            ("4WD", DriveType::FourByFour),
            ("4X4", DriveType::FourByFour),
            ("Four Wheel Drive", DriveType::FourByFour),
            ("Four-Wheel Drive", DriveType::FourByFour),
            ("All Wheel Drive", DriveType::Awd),
            ("AWD", DriveType::Awd),
            ("Front Wheel Drive", DriveType::Fwd),
            ("FWD", DriveType::Fwd),
            ("Rear Wheel Drive", DriveType::Rwd),
        ] {
            assert_eq!(drive_type(s), One(d), "{s}");
        }
        assert_eq!(drive_type("2WD"), Ambiguous);
    }

    #[test]
    fn colors() {
        for (s, c) in [
            ("Oxford White", Color::White),
            ("Agate Black Metallic", Color::Black),
            ("Magnetic Gray Metallic", Color::Gray),
            ("Grey", Color::Gray),
            ("Ruby Red", Color::Red),
            ("Ruby Red Metallic", Color::Red),
            ("Deep Crystal Blue Mica", Color::Blue),
            ("Jet Black", Color::Black),
            ("Ebony", Color::Black),
            ("Blueprint", Color::Blue),
            ("Celestial Silver Metallic", Color::Silver),
            ("White", Color::White),
        ] {
            assert_eq!(color(s), One(c), "{s}");
        }
        assert_eq!(color("Black/Red"), Ambiguous);
        assert_eq!(color("Hydro Shimmer"), None);
        assert_eq!(color("Café Latte Metallic"), None);
        assert_eq!(
            color("Octane Red"),
            One(Color::Red),
            "tan inside a word is not tan"
        );
    }

    #[test]
    fn paint_vocabulary() {
        for (s, c) in [
            ("Modern Steel Metallic", Color::Gray),
            ("Lunar Rock", Color::Gray),
            ("Granite Crystal Metallic", Color::Gray),
            ("Magnetic", Color::Gray),
            ("Blue Steel", Color::Blue),
            ("Steel Gray", Color::Gray),
            ("Obsidian Blue Pearl", Color::Blue),
            ("Midnight Silver Metallic", Color::Silver),
            ("Black Sapphire Metallic", Color::Black),
            ("Slate Gray Metallic", Color::Slate),
            ("Pewter Gray Pearlcoat", Color::Pewter),
        ] {
            assert_eq!(color(s), One(c), "{s}");
        }
        // Finishes name no color, and a word beside a color word does not count against it.
        assert_eq!(color("Crystal White Pearl"), One(Color::White));
        assert_eq!(color("Silver Ice Metallic"), One(Color::Silver));
        assert_eq!(color("Pearl Metallic Tri-Coat"), None);
        assert_eq!(color("Ice Edge"), None);
        assert_eq!(color("Rocky Mountain Pearl"), None);
        assert_eq!(color("White Gold Pearlcoat"), Ambiguous);
        // Two-tone: each side is read on its own, so paint vocabulary still counts.
        assert_eq!(color("Granite Crystal/Bright White"), Ambiguous);
        assert_eq!(color("Lunar Rock/Lunar Rock"), One(Color::Gray));
        assert_eq!(color(""), None);
    }

    /// Every name of paint_names.tsv maps to the color a person would choose for it; all
    /// mismatches are reported at once.
    #[test]
    fn real_paint_names() {
        let table = include_str!("paint_names.tsv");
        let mut rows = 0;
        let mut wrong = Vec::new();
        for (n, line) in table.lines().enumerate() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let cols: Vec<&str> = line.split('\t').collect();
            assert_eq!(cols.len(), 4, "paint_names.tsv:{}: want 4 columns", n + 1);
            let (make, name, want) = (cols[0], cols[1], cols[2]);
            let want = match want {
                "none" => None,
                "ambiguous" => Ambiguous,
                c => One(c
                    .parse::<Color>()
                    .unwrap_or_else(|e| panic!("line {}: {e}", n + 1))),
            };
            let got = color(name);
            if got != want {
                wrong.push(format!(
                    "  {}: {make} {name:?}: want {want:?}, got {got:?}",
                    n + 1
                ));
            }
            rows += 1;
        }
        assert!(
            rows >= 200,
            "paint_names.tsv has {rows} names, want at least 200"
        );
        assert!(
            wrong.is_empty(),
            "{} of {rows} paint names map wrong:\n{}",
            wrong.len(),
            wrong.join("\n")
        );
    }

    /// Drive names from marketing feeds and makers, each documented at the table.
    #[test]
    fn drive_names_from_feeds_and_makers() {
        for (s, d) in [
            ("FOUR_WD", DriveType::FourByFour),
            ("AWD", DriveType::Awd),
            ("4MATIC", DriveType::Awd),
            ("4MATIC+", DriveType::Awd),
            ("xDrive", DriveType::Awd),
            ("quattro", DriveType::Awd),
            ("4MOTION", DriveType::Awd),
            ("ALL4", DriveType::Awd),
            ("SH-AWD", DriveType::Awd),
            ("Symmetrical AWD", DriveType::Awd),
        ] {
            assert_eq!(drive_type(s), One(d), "{s}");
        }
        assert_eq!(drive_type("TWO_WD"), Ambiguous);
        assert_eq!(interior_type("MB-Tex"), One(InteriorType::Vinyl));
    }

    #[test]
    fn status_words_have_a_rule_each() {
        for listed in [
            "In Inventory",
            "Available",
            "AVAILABLE",
            "Pending",
            "On Order",
            "In Transit",
        ] {
            assert_eq!(sold(listed), Some(false), "{listed}");
        }
        assert_eq!(sold("Sold"), Some(true));
        assert_eq!(sold("NOT_AVAILABLE"), Option::None);
    }

    #[test]
    fn interior_colors() {
        // Two-tone interiors: left out, never their first word.
        for s in [
            "Black/Red",
            "Ebony w/ Tan Accents",
            "Ebony with Tan Accents",
            "Graphite and Red",
            "Jet Black/Light Ash Gray",
            "Light Ash Gray/Jet Black",
        ] {
            assert_eq!(interior_color(s), Ambiguous, "{s}");
        }
        for (s, c) in [
            ("Charcoal", Color::Charcoal),
            ("Steel Gray", Color::Gray),
            ("Jet Black", Color::Black),
            ("Beige", Color::Beige),
            ("Premium/Black", Color::Black),
        ] {
            assert_eq!(interior_color(s), One(c), "{s}");
        }
        assert_eq!(interior_color("Macadamia"), None);
        assert_eq!(interior_color(""), None);
    }

    #[test]
    fn interiors_titles_tonnage() {
        assert_eq!(interior_type("Leather"), One(InteriorType::Leather));
        assert_eq!(interior_type("Premium Cloth"), One(InteriorType::Cloth));
        assert_eq!(interior_type("Leatherette"), One(InteriorType::Vinyl));
        assert_eq!(interior_type("Leather/Cloth"), Ambiguous);
        assert_eq!(title_status("Clean"), One(TitleStatus::Clear));
        assert_eq!(title_status("Rebuilt"), One(TitleStatus::Rebuilt));
        assert_eq!(tonnage("1/2 Ton"), One(Tonnage::HalfTon));
        assert_eq!(tonnage("3/4 ton"), One(Tonnage::ThreeQuarterTon));
    }

    #[test]
    fn sale_status() {
        assert_eq!(sold("Sold"), Some(true));
        assert_eq!(sold("In Stock"), Some(false));
        assert_eq!(sold("Available"), Some(false));
        assert_eq!(sold("In Transit"), Some(false));
        assert_eq!(sold("Demo"), Option::None);
    }
}
