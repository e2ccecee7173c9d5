//! A generator of realistic DMS CSV exports, shared by `examples/genfeed.rs` and the `ingest`
//! benchmark: valid VINs (check digit computed), messy prices and miles, manufacturer colors,
//! quoted option lists, several photo URLs.

use std::io::{self, Write};

const MAKES: &[(&str, &str, &str)] = &[
    ("Ford", "F-150", "XLT"),
    ("Honda", "Accord", "EX-L"),
    ("Toyota", "RAV4", "XLE Premium"),
    ("Jeep", "Grand Cherokee", "Limited"),
    ("Chevrolet", "Silverado 1500", "LT Trail Boss"),
    ("Nissan", "Rogue", "SV"),
    ("Subaru", "Outback", "Limited XT"),
    ("Hyundai", "Tucson", "SEL"),
];
const COLORS: &[&str] = &[
    "Oxford White",
    "Agate Black Metallic",
    "Magnetic Gray Metallic",
    "Ruby Red Metallic",
    "Lunar Silver Metallic",
    "Deep Crystal Blue Mica",
];
const BODIES: &[&str] = &[
    "Crew Cab Pickup",
    "4dr Car",
    "Sport Utility",
    "Crossover",
    "Wagon",
];
const DRIVES: &[&str] = &["4WD", "FWD", "AWD", "All Wheel Drive", "Rear Wheel Drive"];
const TRANSMISSIONS: &[&str] = &[
    "6-Speed Automatic",
    "CVT",
    "Automatic 6-Spd",
    "5-Speed Manual",
];
const ENGINES: &[&str] = &["3.5L V6", "2.0L I4 Turbo", "5.7L V8", "2.5L I4"];
const FUELS: &[&str] = &["Gasoline", "Regular Unleaded", "Flex Fuel", "Hybrid"];
const TYPES: &[&str] = &["New", "Used", "Pre-Owned", "CPO"];
const OPTIONS: &[&str] = &[
    "Heated Seats",
    "Navigation System",
    "Tow Package",
    "Sunroof",
    "Apple CarPlay",
    "Blind Spot Monitor",
    "Remote Start",
    "Third Row Seating",
];

pub const HEADER: &str = "VIN,Stock #,Year,Make,Model,Trim,New/Used,Miles,Price,Internet Price,Ext. Color,Int. Color,Body,Drive,Transmission,Engine,Fuel,Doors,Photo URLs,Options,Status\n";

/// A 17-character VIN with a correct check digit, unique per `n`.
pub fn vin(n: u64) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHJKLMNPRSTUVWXYZ";
    let mut chars: Vec<u8> = b"1HGCM82600A000000".to_vec();
    let mut x = n;
    for slot in (11..17).rev().chain([3, 4, 5, 6, 7]) {
        chars[slot] = ALPHABET[(x % ALPHABET.len() as u64) as usize];
        x /= ALPHABET.len() as u64;
    }
    chars[8] = lotsync::mapper::check_digit(&chars) as u8;
    String::from_utf8(chars).expect("ASCII")
}

/// Writes a header and `rows` vehicles.
pub fn write_feed(out: &mut impl Write, rows: u64) -> io::Result<()> {
    out.write_all(HEADER.as_bytes())?;
    for n in 0..rows {
        let pick = |list: &[&'static str], salt: u64| {
            list[((n * 31 + salt * 17) % list.len() as u64) as usize]
        };
        let (make, model, trim) = MAKES[(n % MAKES.len() as u64) as usize];
        let year = 2012 + n % 13;
        let miles = (n * 7919) % 150_000;
        let price = 8_000 + (n * 104_729) % 60_000;
        let photos: Vec<String> = (1..=4)
            .map(|i| format!("https://images.example-dms.com/S{n:07}/{i}.jpg"))
            .collect();
        let options: Vec<&str> = (0..4).map(|i| pick(OPTIONS, i)).collect();
        writeln!(
            out,
            "{},S{n:07},{year},{make},{model},{trim},{},\"{},{:03}\",\"${},{:03}.00\",\"${},{:03}\",{},Black,{},{},{},{},{},4,{},\"{}\",{}",
            vin(n),
            pick(TYPES, 1),
            miles / 1000,
            miles % 1000,
            price / 1000,
            price % 1000,
            (price - 500) / 1000,
            (price - 500) % 1000,
            pick(COLORS, 2),
            pick(BODIES, 3),
            pick(DRIVES, 4),
            pick(TRANSMISSIONS, 5),
            pick(ENGINES, 6),
            pick(FUELS, 7),
            photos.join("|"),
            options.join(", "),
            if n % 50 == 0 { "Sold" } else { "In Stock" },
        )?;
    }
    Ok(())
}
