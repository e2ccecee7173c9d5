//! Numbers and lists as DMS exports write them: "$23,995.00", "45,123 mi", "4dr", "3.5L V6",
//! "6-Speed Automatic", "a | b; c". Each parser returns `Ok(None)` for "no value", or `Err` with
//! the reason the text cannot be read.
//!
//! A number is read whole or refused, never in part ([`decimal`]): "1,5" is 1.5 or nothing,
//! never 1. Thousands may be grouped with `,` `.` a space (also no-break and thin) or `'`, and
//! the decimal mark may be `.` or `,`; which is which is read from the number itself. The one
//! form the marks alone leave open, a single `,` or `.` followed by exactly three digits
//! ("21.880"), is settled by the fields lotsync reads: money has cents and odometers tenths,
//! and no field it sends carries thousandths, so those three digits are a group of thousands
//! (21880). A displacement reads the same either way ("1.598" litres, or 1598 cc).

use crate::api::{TransmissionSpeed, TransmissionType};
use std::borrow::Cow;

/// Trims and collapses runs of whitespace to one space.
pub fn clean(s: &str) -> Cow<'_, str> {
    let t = trim(s);
    let mut previous_blank = false;
    let tidy = t.bytes().all(|b| {
        let blank = b <= b' ';
        let fine = !blank || (b == b' ' && !previous_blank);
        previous_blank = blank;
        fine
    });
    if tidy {
        return Cow::Borrowed(t);
    }
    Cow::Owned(t.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// `clean` for text already known to hold no tab, line break or double space.
#[inline]
pub fn clean_tidy(s: &str) -> Cow<'_, str> {
    Cow::Borrowed(trim(s))
}

/// `str::trim`, with the common all-ASCII case first (a U+000B at either end stays, as it
/// always has: `clean` removes it along with the other blanks, `clean_tidy` does not).
#[inline]
pub fn trim(s: &str) -> &str {
    let t = s.trim_ascii();
    match (t.as_bytes().first(), t.as_bytes().last()) {
        (Some(&a), Some(&z)) if a >= 0x80 || z >= 0x80 => t.trim(),
        _ => t,
    }
}

/// Exactly `str::trim`, without decoding characters when both ends are plain ASCII (the
/// parsers below get text that is already trimmed, so this is usually a no-op).
#[inline]
pub fn trim_exact(s: &str) -> &str {
    let t = s.trim_ascii();
    match (t.as_bytes().first(), t.as_bytes().last()) {
        // U+000B is whitespace to `str::trim` but not to `trim_ascii`.
        (Some(&a), Some(&z)) if a >= 0x80 || z >= 0x80 || a == 0x0B || z == 0x0B => t.trim(),
        _ => t,
    }
}

/// A price: "$23,995.00" is 23995; "Call", "0" and "" are no price.
pub fn price(s: &str) -> Result<Option<f64>, String> {
    let t = trim_exact(s);
    if t.is_empty() {
        return Ok(None);
    }
    // Repeated `strip_*fix` rather than `trim_*_matches("USD")`, which sets up a substring
    // searcher on every call; "USD" cannot overlap itself, so the two cut the same.
    let mut t = t;
    while let Some(rest) = t.strip_prefix("USD") {
        t = rest;
    }
    while let Some(rest) = t.strip_suffix("USD") {
        t = rest;
    }
    let mut t = trim_exact(t);
    while let Some(rest) = t.strip_prefix('$') {
        t = rest;
    }
    let t = trim_exact(t);
    let Some(cents) = decimal_cents(t) else {
        let lower = t.to_ascii_lowercase();
        if ["call", "n/a", "tbd", "please", "contact", "ask"]
            .iter()
            .any(|w| lower.contains(w))
        {
            return Ok(None);
        }
        return Err("not a price".into());
    };
    if cents < 0 {
        return Err("a negative price".into());
    }
    if cents == 0 {
        return Ok(None);
    }
    // Whole cents divided once: the nearest double to the price as written.
    Ok(Some(cents as f64 / 100.0))
}

/// The lowest price sent: below it a price is a placeholder or a typo ("0.01", "1").
const PRICE_MIN: u32 = 100;
/// The highest price sent: above it a price is a typo (a stock number in the price column).
const PRICE_MAX: u32 = 10_000_000;

/// A price as [`price`] reads it, and only when plausible: from [`PRICE_MIN`] to
/// [`PRICE_MAX`] (0, like "Call", is no price and no error).
pub fn plausible_price(s: &str) -> Result<Option<f64>, String> {
    let Some(value) = price(s)? else {
        return Ok(None);
    };
    let (side, bound) = if value < f64::from(PRICE_MIN) {
        ("below", PRICE_MIN)
    } else if value > f64::from(PRICE_MAX) {
        ("above", PRICE_MAX)
    } else {
        return Ok(Some(value));
    };
    Err(format!(
        "not a plausible price: {side} {} (plausible: {} to {})",
        grouped(bound),
        grouped(PRICE_MIN),
        grouped(PRICE_MAX)
    ))
}

/// A whole number with its thousands grouped as people write prices: `10,000,000`.
fn grouped(n: u32) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Reads "23,995.50", "23995", and the European "23.995,50" as whole cents ([`decimal`]);
/// None when the text is not one number, or has more than two decimals.
fn decimal_cents(s: &str) -> Option<i64> {
    let (negative, t) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let n = decimal(t).ok()?;
    let cents = match n.fraction_digits {
        0 => 0,
        1 => n.fraction * 10,
        2 => n.fraction,
        _ => return None,
    };
    let value = i64::try_from(n.whole.checked_mul(100)?.checked_add(cents)?).ok()?;
    Some(if negative { -value } else { value })
}

/// A number read whole from its text: `whole` and `fraction / 10^fraction_digits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decimal {
    pub whole: u64,
    pub fraction: u64,
    pub fraction_digits: u32,
}

impl Decimal {
    pub fn value(self) -> f64 {
        self.whole as f64 + self.fraction as f64 / 10f64.powi(self.fraction_digits as i32)
    }
}

/// Characters that only ever group thousands: a space, a no-break space (U+00A0), a narrow
/// no-break space (U+202F), a thin space (U+2009), and the Swiss apostrophes.
fn groups_only(c: char) -> bool {
    matches!(
        c,
        ' ' | '\u{a0}' | '\u{202f}' | '\u{2009}' | '\'' | '\u{2019}'
    )
}

fn is_mark(c: char) -> bool {
    c == ',' || c == '.' || groups_only(c)
}

/// At most this many marks in one number (1,000,000,000,000.00 has five).
const MAX_MARKS: usize = 8;

/// Reads one number whole: digits, thousands grouped by one mark (`,` `.` a space or `'`, each
/// group of three digits after a first of one to three), and at most one decimal mark (`.`
/// or `,`, not the grouping one). Anything else, a mark at either end or two in a row
/// included, is refused: the caller leaves the value out rather than send a part of it. See
/// the module's docs for "21.880".
pub fn decimal(t: &str) -> Result<Decimal, String> {
    const NOT_ONE: &str = "not one number";
    // The marks and the digits between them: runs[i] digits stand before marks[i].
    let mut marks = [' '; MAX_MARKS];
    let mut runs = [0usize; MAX_MARKS + 1];
    let mut n = 0;
    let mut previous_digit = false;
    for c in t.chars() {
        if c.is_ascii_digit() {
            runs[n] += 1;
            previous_digit = true;
        } else if is_mark(c) && previous_digit && n < MAX_MARKS {
            marks[n] = c;
            n += 1;
            previous_digit = false;
        } else {
            return Err(NOT_ONE.into());
        }
    }
    if !previous_digit {
        return Err(NOT_ONE.into());
    }
    let (marks, runs) = (&marks[..n], &runs[..=n]);
    // Which mark, if any, is the decimal one.
    let decimal_at = match marks.last() {
        None => None,
        Some(&last) if groups_only(last) => None,
        Some(&last) => {
            let repeated = marks[..n - 1].contains(&last);
            let other_before = marks[..n - 1].iter().any(|&m| m != last);
            if repeated {
                None
            } else if runs[n] != 3 || other_before || runs[0] > 3 || t.starts_with('0') {
                Some(n - 1)
            } else {
                // "21.880": thousands (see the module's docs).
                None
            }
        }
    };
    let grouping = &marks[..decimal_at.unwrap_or(n)];
    if let Some(&first) = grouping.first() {
        let groups = &runs[..=grouping.len()];
        let well_grouped = grouping.iter().all(|&m| m == first)
            && (1..=3).contains(&groups[0])
            && groups[1..].iter().all(|&g| g == 3);
        if !well_grouped {
            return Err(format!(
                "{NOT_ONE}: its digits are not grouped in thousands"
            ));
        }
    }
    let mut out = Decimal {
        whole: 0,
        fraction: 0,
        fraction_digits: 0,
    };
    let mut in_fraction = false;
    let mut index = 0;
    for c in t.chars() {
        if let Some(d) = c.to_digit(10) {
            let d = u64::from(d);
            let too_big = || "too large a number".to_owned();
            if in_fraction {
                // Digits past the 18th decimal change nothing a field can hold.
                if out.fraction_digits < 18 {
                    out.fraction = out.fraction * 10 + d;
                    out.fraction_digits += 1;
                }
            } else {
                out.whole = out
                    .whole
                    .checked_mul(10)
                    .and_then(|w| w.checked_add(d))
                    .ok_or_else(too_big)?;
            }
        } else {
            in_fraction = decimal_at == Some(index);
            index += 1;
        }
    }
    Ok(out)
}

/// The first number of a text and what follows it: "2.0L" is ("2.0", "L"), "V-6" is ("6",
/// ""); the number's marks are kept for [`decimal`] to judge (a mark is taken only between
/// digits, so "3.5L, V6" ends at the "L").
fn first_token(t: &str) -> Option<(&str, &str)> {
    let start = t.find(|c: char| c.is_ascii_digit())?;
    let rest = &t[start..];
    let mut end = 0;
    let mut chars = rest.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_ascii_digit() {
            end = i + 1;
        } else if is_mark(c) && chars.peek().is_some_and(|&(_, d)| d.is_ascii_digit()) {
            continue;
        } else {
            break;
        }
    }
    Some((&rest[..end], &rest[end..]))
}

/// The unit of an odometer reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistanceUnit {
    Miles,
    Kilometres,
}

impl DistanceUnit {
    pub fn name(self) -> &'static str {
        match self {
            DistanceUnit::Miles => "miles",
            DistanceUnit::Kilometres => "kilometres",
        }
    }
}

/// A unit word as exports write it ("mi", "Miles", "KM", "kilometres"); `Err` for hours and
/// for words lotsync does not know (a reading in an unknown unit is left out, never sent as
/// miles).
pub fn distance_unit(s: &str) -> Result<Option<DistanceUnit>, String> {
    let unit = trim_exact(s).trim_end_matches('.').to_lowercase();
    match unit.as_str() {
        "" => Ok(None),
        "mi" | "mile" | "miles" | "smi" => Ok(Some(DistanceUnit::Miles)),
        "km" | "kms" | "kilometer" | "kilometers" | "kilometre" | "kilometres" => {
            Ok(Some(DistanceUnit::Kilometres))
        }
        "h" | "hr" | "hrs" | "hour" | "hours" => Err("hours, not miles (an hour meter)".into()),
        other => Err(format!("unknown unit {other:?}")),
    }
}

/// An odometer reading and the unit written beside it, if any: "45,123 mi", "96 540 KM",
/// "12k" (thousands). The number is read whole ([`decimal`]).
pub fn distance(s: &str) -> Result<Option<(f64, Option<DistanceUnit>)>, String> {
    let t = trim_exact(s);
    if t.is_empty() {
        return Ok(None);
    }
    // The common plain "45123".
    if t.len() <= 7 && t.bytes().all(|b| b.is_ascii_digit()) {
        let n = t.bytes().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        return Ok(Some((n as f64, None)));
    }
    let (number, unit) = match t.find(|c: char| c.is_alphabetic()) {
        Some(i) => (trim_exact(&t[..i]), &t[i..]),
        None => (t, ""),
    };
    let (factor, unit) = match unit.trim() {
        "k" | "K" => (1000.0, None),
        unit => (1.0, distance_unit(unit)?),
    };
    let number = decimal(number).map_err(|e| format!("not a number of miles ({e})"))?;
    Ok(Some((number.value() * factor, unit)))
}

/// A reading in `unit` as whole miles (the spec's `miles`), refused above 2,000,000.
pub fn to_miles(value: f64, unit: DistanceUnit) -> Result<u64, String> {
    let miles = match unit {
        DistanceUnit::Miles => value,
        DistanceUnit::Kilometres => value * 0.621_371,
    };
    if !miles.is_finite() || miles > 2_000_000.0 {
        return Err("more than 2,000,000 miles".into());
    }
    Ok(miles.round() as u64)
}

/// Makes as dealers write them, the multi-word ones included, for splitting a combined
/// "2019 Land Rover Range Rover Sport" cell. Each is matched as whole words, ignoring case
/// and hyphens ("Mercedes Benz" is "Mercedes-Benz").
const MAKES: &[&str] = &[
    "Acura",
    "Alfa Romeo",
    "Aston Martin",
    "Audi",
    "Bentley",
    "BMW",
    "Buick",
    "Cadillac",
    "Chevrolet",
    "Chrysler",
    "Dodge",
    "Ferrari",
    "Fiat",
    "Fisker",
    "Ford",
    "Genesis",
    "GMC",
    "Honda",
    "Hummer",
    "Hyundai",
    "Infiniti",
    "Isuzu",
    "Jaguar",
    "Jeep",
    "Karma",
    "Kia",
    "Lamborghini",
    "Land Rover",
    "Lexus",
    "Lincoln",
    "Lotus",
    "Lucid",
    "Maserati",
    "Maybach",
    "Mazda",
    "McLaren",
    "Mercedes-Benz",
    "Mercury",
    "MINI",
    "Mitsubishi",
    "Nissan",
    "Oldsmobile",
    "Plymouth",
    "Polestar",
    "Pontiac",
    "Porsche",
    "Ram",
    "Rivian",
    "Rolls-Royce",
    "Saab",
    "Saturn",
    "Scion",
    "smart",
    "Subaru",
    "Suzuki",
    "Tesla",
    "Toyota",
    "Volkswagen",
    "Volvo",
];

/// A combined "year make model" cell, split: "2026 BMW X5" is (2026, "BMW", "X5"), "2019 Land
/// Rover Range Rover Sport" (2019, "Land Rover", "Range Rover Sport"). The make is the one of
/// [`MAKES`] the words after the year start with, as the cell spells it; None when no make
/// of the list is there (an unknown make is never guessed from the first word). The model is
/// the rest, trimmed.
pub fn year_make_model(s: &str, year_max: u16) -> Option<(Option<u16>, String, String)> {
    let t = clean(s);
    let mut words: &str = &t;
    let mut year = None;
    if let Some((first, rest)) = words.split_once(' ') {
        if let Ok(Some(y)) = self::year(first, year_max) {
            year = Some(y);
            words = rest;
        }
    }
    let folded = |w: &str| w.replace('-', " ").to_lowercase();
    let have = folded(words);
    let make = MAKES
        .iter()
        .filter(|m| {
            let m = folded(m);
            have == m || have.starts_with(&format!("{m} "))
        })
        .max_by_key(|m| m.len())?;
    let make_words = make.split([' ', '-']).count();
    let mut parts = words.splitn(make_words + 1, [' ', '-']);
    let spelled: Vec<&str> = parts.by_ref().take(make_words).collect();
    let separator = if make.contains('-') { "-" } else { " " };
    let model = parts.next().unwrap_or("").trim().to_owned();
    Some((year, spelled.join(separator), model))
}

/// A model year between 1900 and `max`.
#[inline]
pub fn year(s: &str, max: u16) -> Result<Option<u16>, String> {
    let t = trim_exact(s);
    if t.is_empty() {
        return Ok(None);
    }
    let year: u16 = t.parse().map_err(|_| "not a four-digit year".to_owned())?;
    if (1900..=max).contains(&year) {
        Ok(Some(year))
    } else {
        Err(format!("outside 1900 to {max}"))
    }
}

/// The first whole number in the text, or a number word ("Four"), within `range`.
pub fn count(s: &str, range: std::ops::RangeInclusive<u8>) -> Result<Option<u8>, String> {
    let t = trim_exact(s);
    if t.is_empty() {
        return Ok(None);
    }
    // The common "4": up to three digits are read as they are (what `first_number` would give).
    let n = if t.len() <= 3 && t.bytes().all(|b| b.is_ascii_digit()) {
        t.bytes().fold(0, |n, d| n * 10 + u64::from(d - b'0'))
    } else {
        let t = t.to_ascii_lowercase();
        match first_token(&t) {
            Some((token, _)) => {
                let n = decimal(token)?;
                if n.fraction != 0 {
                    return Err(format!("{token} is not a whole number"));
                }
                n.whole
            }
            None => number_word(&t).ok_or_else(|| "no number in it".to_owned())?,
        }
    };
    let n = u8::try_from(n).map_err(|_| format!("{n} is out of range"))?;
    if range.contains(&n) {
        Ok(Some(n))
    } else {
        Err(format!(
            "{n} is outside {} to {}",
            range.start(),
            range.end()
        ))
    }
}

fn number_word(t: &str) -> Option<u64> {
    const WORDS: [&str; 12] = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
        "twelve",
    ];
    t.split(|c: char| !c.is_ascii_alphabetic())
        .find_map(|w| WORDS.iter().position(|&n| n == w))
        .map(|i| i as u64 + 1)
}

/// Cylinders: "6", "V6", "V-8", "I4", "4 Cyl", "Six".
pub fn cylinders(s: &str) -> Result<Option<u8>, String> {
    let t = trim_exact(s).to_ascii_lowercase();
    if t.is_empty() || t.contains("electric") {
        return Ok(None);
    }
    count(&t, 1..=16)
}

/// Displacement in litres: "3.5", "2.0L", "5.3 L", "3500cc".
pub fn displacement(s: &str) -> Result<Option<f64>, String> {
    let t = trim_exact(s).to_ascii_lowercase();
    if t.is_empty() || t.contains("electric") {
        return Ok(None);
    }
    let (token, _) = first_token(&t).ok_or_else(|| "no number in it".to_owned())?;
    let n = decimal(token)?.value();
    let litres = if t.contains("cc") || n >= 100.0 {
        n / 1000.0
    } else {
        n
    };
    if (0.5..=10.0).contains(&litres) {
        Ok(Some((litres * 10.0).round() / 10.0))
    } else {
        Err(format!("{litres} litres is not an engine size"))
    }
}

/// An engine description: "3.5L V6" → (3.5, 6); "2.0L I4 Turbo" → (2.0, 4); "Electric" → none.
pub fn engine(s: &str) -> (Option<f64>, Option<u8>) {
    let t = trim_exact(s).to_ascii_lowercase();
    let mut litres = None;
    let mut cylinders = None;
    // A comma between digits is a decimal mark ("1,5L"), elsewhere it separates words
    // ("3.5L,V6").
    let bytes = t.as_bytes();
    let separates = |i: usize, c: char| {
        c.is_whitespace()
            || c == '/'
            || (c == ','
                && !(i > 0
                    && bytes[i - 1].is_ascii_digit()
                    && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)))
    };
    let mut tokens = Vec::new();
    let mut start = 0;
    for (i, c) in t.char_indices() {
        if separates(i, c) {
            tokens.push(&t[start..i]);
            start = i + c.len_utf8();
        }
    }
    tokens.push(&t[start..]);
    for token in tokens {
        let token = token.trim_matches(|c: char| c == '(' || c == ')');
        if litres.is_none() {
            if let Some(n) = token
                .strip_suffix('l')
                .or_else(|| token.strip_suffix("liter"))
                .or_else(|| token.strip_suffix("litre"))
            {
                litres = decimal(n)
                    .ok()
                    .map(Decimal::value)
                    .filter(|l| (0.5..=10.0).contains(l));
            }
        }
        if cylinders.is_none() {
            let layout = token
                .strip_prefix('v')
                .or_else(|| token.strip_prefix('i'))
                .or_else(|| token.strip_prefix('h'))
                .or_else(|| token.strip_prefix('w'))
                .map(|n| n.trim_start_matches('-'));
            let named = token
                .strip_suffix("-cylinder")
                .or_else(|| token.strip_suffix("cyl"));
            if let Some(n) = layout.or(named) {
                cylinders = n.parse::<u8>().ok().filter(|c| (1..=16).contains(c));
            }
        }
    }
    if cylinders.is_none() {
        // "4 Cyl", "6 cylinders": the number stands before the word.
        let words: Vec<&str> = t.split_whitespace().collect();
        for pair in words.windows(2) {
            if pair[1].starts_with("cyl") {
                cylinders = pair[0].parse::<u8>().ok().filter(|c| (1..=16).contains(c));
            }
        }
    }
    (litres, cylinders)
}

/// What a transmission description says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransmissionText {
    pub kind: Option<TransmissionType>,
    pub speed: Option<TransmissionSpeed>,
    /// A gear count the spec has no value for (it lists 4 to 7).
    pub unlisted_speed: Option<u8>,
}

/// "6-Speed Automatic", "Automatic 6-Spd", "CVT", "5-Speed Manual", "8AT".
pub fn transmission(s: &str) -> TransmissionText {
    let t = trim_exact(s).to_ascii_lowercase();
    let words: Vec<&str> = t
        .split(|c: char| {
            c.is_whitespace() || c == '-' || c == ',' || c == '/' || c == '(' || c == ')'
        })
        .filter(|w| !w.is_empty())
        .collect();
    let has = |w: &str| words.contains(&w);
    let manual =
        has("manual") || has("stick") || has("mt") || t.contains("m/t") || t.contains("standard");
    let automatic = has("automatic")
        || has("auto")
        || has("cvt")
        || has("at")
        || t.contains("a/t")
        || has("dct")
        || t.contains("dual clutch")
        || t.contains("dual-clutch")
        || t.contains("tiptronic")
        || t.contains("steptronic")
        || t.contains("powershift");
    // "8at" / "6mt" glued forms.
    let glued = words.iter().find_map(|w| {
        let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let suffix = &w[digits.len()..];
        match (digits.parse::<u8>(), suffix) {
            (Ok(n), "at") => Some((n, Some(TransmissionType::Automatic))),
            (Ok(n), "mt") => Some((n, Some(TransmissionType::Manual))),
            _ => None,
        }
    });
    let kind = match (manual, automatic, glued.and_then(|g| g.1)) {
        (true, false, _) => Some(TransmissionType::Manual),
        (false, true, _) => Some(TransmissionType::Automatic),
        (false, false, glued) => glued,
        (true, true, _) => None,
    };
    let gears = if has("cvt") || t.contains("variable") {
        None
    } else {
        words
            .windows(2)
            .find_map(|w| match w[1] {
                "speed" | "spd" | "sp" | "spds" | "speeds" => w[0].parse::<u8>().ok(),
                _ => None,
            })
            .or_else(|| {
                words.iter().find_map(|w| {
                    w.strip_suffix("speed")
                        .or_else(|| w.strip_suffix("spd"))
                        .and_then(|n| n.parse::<u8>().ok())
                })
            })
            .or(glued.map(|g| g.0))
    };
    let speed = match gears {
        Some(4) => Some(TransmissionSpeed::Four),
        Some(5) => Some(TransmissionSpeed::Five),
        Some(6) => Some(TransmissionSpeed::Six),
        Some(7) => Some(TransmissionSpeed::Seven),
        _ => None,
    };
    TransmissionText {
        kind,
        speed,
        unlisted_speed: gears.filter(|_| speed.is_none()),
    }
}

/// Items kept in a list before de-duplication switches from comparing with each to a set.
const SMALL_LIST: usize = 16;

/// Items of a list field, split on `|`, `;`, `,` and line breaks (and blanks, for URLs),
/// trimmed, without empties or repeats (compared case-insensitively; the first spelling stays).
/// `tidy` says the values hold no tab, line break or double space (`Record::tidy`).
#[cfg(test)]
pub fn list<'a>(
    values: impl Iterator<Item = &'a str>,
    split_on_blanks: bool,
    tidy: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    list_into(values, split_on_blanks, tidy, &mut out);
    out
}

/// [`list`] written over `out`, whose strings are reused: the mapper refills the same payload
/// for every record, so a list of a usual length costs no allocation.
pub fn list_into<'a>(
    values: impl Iterator<Item = &'a str>,
    split_on_blanks: bool,
    tidy: bool,
    out: &mut Vec<String>,
) {
    // Items kept so far: `out[..kept]`; the strings past it are spare buffers.
    let mut kept = 0;
    // Past a few items, the lower-cased items seen so far: comparing each new item with every
    // kept one would be quadratic in a field of thousands (a record may hold 1 MiB).
    let mut seen: Option<foldhash::HashSet<String>> = None;
    for value in values {
        // Every separator is ASCII, so cutting the bytes there keeps each piece valid UTF-8.
        let bytes = value.as_bytes();
        // Most values hold no blank or line break to cut at: one look at the whole value
        // spares a second search per item.
        let other_cuts = match (split_on_blanks, tidy) {
            (true, true) => memchr::memchr(b' ', bytes).is_some(),
            (true, false) => bytes.iter().any(u8::is_ascii_whitespace),
            (false, true) => false,
            (false, false) => memchr::memchr2(b'\n', b'\r', bytes).is_some(),
        };
        let mut start = 0;
        while start <= bytes.len() {
            let rest = &bytes[start..];
            let cut = memchr::memchr3(b'|', b';', b',', rest);
            let cut = if !other_cuts {
                cut
            } else {
                let other = match (split_on_blanks, tidy) {
                    // In a tidy value the only blank is a single space.
                    (true, true) => memchr::memchr(b' ', rest),
                    (true, false) => rest.iter().position(u8::is_ascii_whitespace),
                    (false, _) => memchr::memchr2(b'\n', b'\r', rest),
                };
                match (cut, other) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            };
            let end = cut.map_or(bytes.len(), |c| start + c);
            let piece = &value[start..end];
            let item = if tidy {
                clean_tidy(piece)
            } else {
                clean(piece)
            };
            let new = if item.is_empty() {
                false
            } else if seen.is_none() && kept < SMALL_LIST {
                !out[..kept].iter().any(|o| same_item(o, &item))
            } else {
                seen.get_or_insert_with(|| {
                    out[..kept].iter().map(|o| o.to_ascii_lowercase()).collect()
                })
                .insert(item.to_ascii_lowercase())
            };
            if new {
                match out.get_mut(kept) {
                    Some(spare) => {
                        spare.clear();
                        spare.push_str(&item);
                    }
                    None => out.push(item.into_owned()),
                }
                kept += 1;
            }
            start = end + 1;
        }
    }
    out.truncate(kept);
}

/// Whether two list items are the same, ignoring ASCII case. Items of one list mostly differ
/// near their end (photo URLs numbered 1 to 20 under one prefix and suffix), so the last
/// eight bytes are compared first, in one word.
#[inline]
fn same_item(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && folded_tail(a) == folded_tail(b) && a.eq_ignore_ascii_case(b)
}

/// The last eight bytes (fewer when shorter) with bit 5 set in each: two texts equal but for
/// ASCII case have equal tails (bit 5 is the case bit of a letter; other bytes are equal
/// anyway), so different tails prove the texts different.
#[inline]
fn folded_tail(b: &[u8]) -> u64 {
    let n = b.len().min(8);
    let mut word = [0u8; 8];
    word[..n].copy_from_slice(&b[b.len() - n..]);
    u64::from_le_bytes(word) | 0x2020_2020_2020_2020
}

/// Whether a text is an absolute http(s) URL with a host.
pub fn is_web_url(s: &str) -> bool {
    let b = s.as_bytes();
    // The usual lower-case scheme is one 8-byte compare; any other case is compared as well.
    let https = |p: &[u8]| p == b"https://" || p.eq_ignore_ascii_case(b"https://");
    let rest = if b.len() > 8 && https(&b[..8]) {
        &b[8..]
    } else if b.len() > 7 && b[..7].eq_ignore_ascii_case(b"http://") {
        &b[7..]
    } else {
        return false;
    };
    // The host ends at the first `/`, `?` or `#` and holds no blank: one pass for both, over
    // bytes that are all below 64 (a single bit test each), cheaper than a memchr call on a
    // text this short.
    let host_end = rest
        .iter()
        .position(|&c| matches!(c, b'/' | b'?' | b'#') || c.is_ascii_whitespace())
        .unwrap_or(rest.len());
    host_end > 0 && rest[0] != b':' && !rest.get(host_end).is_some_and(u8::is_ascii_whitespace)
}

/// yes/no words.
/// A calendar date, with or without a time after it: `2026-11-20`, `2026-11-20T14:05:00Z`,
/// `11/20/2026`, `11/20/2026 3:15 PM`, `20.11.2026`, `20261120`. Years 1980 to 2100 only: a
/// placeholder (`00/00/0000`, `1900-01-01`) is no date. `(year, month, day)`.
pub fn calendar_date(s: &str) -> Option<(u16, u8, u8)> {
    let date = s
        .trim()
        .split(|c: char| c.is_whitespace() || c == 'T')
        .next()?;
    let numbers: Vec<&str> = date.split(['-', '/', '.']).collect();
    let parse = |t: &str| t.parse::<u16>().ok();
    let (year, month, day) = match numbers[..] {
        [y, m, d] if y.len() == 4 => (parse(y)?, parse(m)?, parse(d)?),
        // Dots are the day first (20.11.2026); slashes the month first, as US exports write
        // them, unless the first number cannot be a month (20/11/2026).
        [d, m, y] if y.len() == 4 && date.contains('.') => (parse(y)?, parse(m)?, parse(d)?),
        [a, b, y] if y.len() == 4 => match (parse(a)?, parse(b)?) {
            (m, d) if m <= 12 => (parse(y)?, m, d),
            (d, m) => (parse(y)?, m, d),
        },
        [whole] if whole.len() == 8 && whole.bytes().all(|b| b.is_ascii_digit()) => (
            parse(&whole[..4])?,
            parse(&whole[4..6])?,
            parse(&whole[6..])?,
        ),
        _ => return None,
    };
    let days = match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    ((1980..=2100).contains(&year) && (1..=days).contains(&day)).then_some((
        year,
        month as u8,
        day as u8,
    ))
}

pub fn boolean(s: &str) -> Result<Option<bool>, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "" => Ok(None),
        "y" | "yes" | "true" | "1" | "x" | "t" => Ok(Some(true)),
        "n" | "no" | "false" | "0" | "f" => Ok(Some(false)),
        _ => Err("not yes or no".into()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn calendar_dates_whole_or_not_at_all() {
        for (s, want) in [
            ("2026-11-20", (2026, 11, 20)),
            ("2026-11-20T14:05:00Z", (2026, 11, 20)),
            ("11/20/2026", (2026, 11, 20)),
            ("11/20/2026 3:15 PM", (2026, 11, 20)),
            ("20/11/2026", (2026, 11, 20)),
            ("20.11.2026", (2026, 11, 20)),
            ("20261120", (2026, 11, 20)),
            ("2024-02-29", (2024, 2, 29)),
        ] {
            assert_eq!(super::calendar_date(s), Some(want), "{s}");
        }
        for s in [
            "",
            "0",
            "N/A",
            "00/00/0000",
            "1900-01-01",
            "2025-02-29",
            "2026-13-01",
            "13/13/2026",
            "Sold",
            "2026-11",
            "yesterday",
        ] {
            assert_eq!(super::calendar_date(s), None, "{s}");
        }
    }

    use super::*;

    /// Miles: "45,123 mi" is 45123, "12k" 12000; kilometres are converted (the second value says
    /// so). The number is read whole ([`decimal`]), its unit is one lotsync knows, or the value is
    /// refused: "1200 hours" is not miles.
    fn miles(s: &str) -> Result<Option<(u64, bool)>, String> {
        let Some((value, unit)) = distance(s)? else {
            return Ok(None);
        };
        let unit = unit.unwrap_or(DistanceUnit::Miles);
        Ok(Some((
            to_miles(value, unit)?,
            unit == DistanceUnit::Kilometres,
        )))
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(100), "100");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(10_000_000), "10,000,000");
        assert_eq!(grouped(123_456_789), "123,456,789");
    }

    #[test]
    fn prices() {
        assert_eq!(price("$23,995.00"), Ok(Some(23995.0)));
        assert_eq!(price(" 23995 "), Ok(Some(23995.0)));
        assert_eq!(price("$38,450"), Ok(Some(38450.0)));
        assert_eq!(price("19,999.5"), Ok(Some(19999.5)));
        assert_eq!(price("23.995,00"), Ok(Some(23995.0)));
        assert_eq!(price("USD 1,250"), Ok(Some(1250.0)));
        assert_eq!(price("1,250 USD"), Ok(Some(1250.0)));
        assert_eq!(price("USDUSD 99"), Ok(Some(99.0)));
        assert_eq!(price("\u{b}$ 5\u{a0}"), Ok(Some(5.0)));
        for none in ["", "0", "$0.00", "Call", "CALL FOR PRICE", "N/A"] {
            assert_eq!(price(none), Ok(None), "{none}");
        }
        assert!(price("cheap").is_err());
        assert!(price("-5").is_err());
        assert_eq!(price("1,234.5"), Ok(Some(1234.5)));
        assert_eq!(price("99.99"), Ok(Some(99.99)));
        assert!(price("1.2.3x").is_err());
    }

    #[test]
    fn mileage() {
        assert_eq!(miles("45,123"), Ok(Some((45123, false))));
        assert_eq!(miles("45123 mi"), Ok(Some((45123, false))));
        assert_eq!(miles("12 miles"), Ok(Some((12, false))));
        assert_eq!(miles("12k"), Ok(Some((12000, false))));
        assert_eq!(miles("10,000 km"), Ok(Some((6214, true))));
        assert_eq!(miles(""), Ok(None));
        assert!(miles("lots").is_err());
        assert!(miles("12 furlongs").is_err());
    }

    /// Each of these was sent as another number (a prefix, or a group
    /// separator read as a decimal mark).
    #[test]
    fn numbers_are_read_whole_never_as_a_prefix() {
        assert_eq!(displacement("1,5"), Ok(Some(1.5)));
        assert_eq!(displacement("5,7"), Ok(Some(5.7)));
        assert_eq!(engine("1,5L I4"), (Some(1.5), Some(4)));
        assert_eq!(engine("3.5L,V6"), (Some(3.5), Some(6)));
        assert_eq!(engine("V6, 2.0L"), (Some(2.0), Some(6)));
        assert_eq!(miles("21.880"), Ok(Some((21880, false))));
        assert_eq!(miles("100.000"), Ok(Some((100_000, false))));
        assert_eq!(miles("45.123"), Ok(Some((45123, false))));
        assert_eq!(miles("7,5"), Ok(Some((8, false))));
        assert_eq!(miles("96 540 KM"), Ok(Some((59987, true))));
        assert_eq!(miles("96\u{a0}540 km"), Ok(Some((59987, true))));
        assert_eq!(miles("1'234"), Ok(Some((1234, false))));
        assert_eq!(price("$22.689,00"), Ok(Some(22689.0)));
        assert_eq!(price("22 689,50"), Ok(Some(22689.5)));
        // Not a number read whole: refused, never a part of it.
        assert!(count("1,5", 1..=6).is_err());
        assert!(cylinders("3.5L V6").is_err());
        assert!(miles("1.2.3").is_err());
        assert!(miles("1,23,456").is_err());
        assert!(miles("12,5,0").is_err());
        assert!(price("1.2.3").is_err());
        assert!(price("1 2 3").is_err());
        assert!(price("1,234.567").is_err());
        assert!(miles("1200 hours").is_err());
        assert!(displacement("1.5.1").is_err());
    }

    /// A number written in any of the ways exports write it (thousands grouped by each mark or
    /// none, either decimal mark, cents or tenths, currency or unit text around it) is read as
    /// itself or refused: never as another number. 20,000 random cases, seeded.
    #[test]
    fn any_written_form_reads_as_itself_or_is_refused() {
        const GROUPS: [Option<char>; 8] = [
            None,
            Some(','),
            Some('.'),
            Some(' '),
            Some('\u{a0}'),
            Some('\u{202f}'),
            Some('\u{2009}'),
            Some('\''),
        ];
        let mut rng = fastrand::Rng::with_seed(24);
        let mut refused = 0;
        for _ in 0..20_000 {
            let whole: u64 = match rng.u8(0..4) {
                0 => rng.u64(0..1_000),
                1 => rng.u64(0..100_000),
                2 => rng.u64(0..2_000_000),
                _ => rng.u64(0..100_000_000),
            };
            let digits = rng.u32(0..=2);
            let fraction = rng.u64(0..10u64.pow(digits));
            let group = GROUPS[rng.usize(0..GROUPS.len())];
            let mark = if group == Some('.') || (group != Some(',') && rng.bool()) {
                ','
            } else {
                '.'
            };
            let text = written(whole, fraction, digits, group, mark);
            let cents = whole * 100 + fraction * 10u64.pow(2 - digits);
            let as_price = [
                text.clone(),
                format!("${text}"),
                format!("{text} USD"),
                format!("USD {text}"),
            ][rng.usize(0..4)]
            .clone();
            match price(&as_price) {
                Ok(Some(p)) => assert_eq!((p * 100.0).round() as u64, cents, "{as_price:?}"),
                Ok(None) => assert_eq!(cents, 0, "{as_price:?}"),
                Err(_) => refused += 1,
            }
            // Odometers: whole miles or tenths.
            if digits <= 1 && whole <= 2_000_000 {
                let unit = ["", " mi", " miles", "mi"][rng.usize(0..4)];
                let as_miles = format!("{text}{unit}");
                let exact = whole as f64 + fraction as f64 / 10f64.powi(digits as i32);
                match miles(&as_miles) {
                    Ok(Some((m, false))) => {
                        assert_eq!(m, exact.round() as u64, "{as_miles:?}")
                    }
                    Ok(other) => panic!("{as_miles:?} read as {other:?}"),
                    Err(_) => refused += 1,
                }
            }
        }
        // Every form above is one a person reads without doubt: none should be refused.
        assert_eq!(refused, 0);
    }

    /// `whole.fraction` (with `digits` decimals) as an export would write it.
    fn written(whole: u64, fraction: u64, digits: u32, group: Option<char>, mark: char) -> String {
        let plain = whole.to_string();
        let mut out = String::new();
        for (i, d) in plain.chars().enumerate() {
            if let Some(g) = group {
                if i > 0 && (plain.len() - i).is_multiple_of(3) {
                    out.push(g);
                }
            }
            out.push(d);
        }
        if digits > 0 {
            out.push(mark);
            out.push_str(&format!("{fraction:0width$}", width = digits as usize));
        }
        out
    }

    /// Random text of digits and marks: whatever [`decimal`] reads, its digits are all of the
    /// text's digits (a number is never read in part).
    #[test]
    fn a_number_is_read_whole_or_refused() {
        let alphabet: Vec<char> = "0123456789.,' \u{a0}x-".chars().collect();
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..50_000 {
            let len = rng.usize(1..12);
            let text: String = (0..len)
                .map(|_| alphabet[rng.usize(0..alphabet.len())])
                .collect();
            if let Ok(n) = decimal(&text) {
                let digits: String = text.chars().filter(char::is_ascii_digit).collect();
                let read = if n.fraction_digits == 0 {
                    n.whole.to_string()
                } else {
                    format!(
                        "{}{:0width$}",
                        n.whole,
                        n.fraction,
                        width = n.fraction_digits as usize
                    )
                };
                assert_eq!(
                    read.trim_start_matches('0'),
                    digits.trim_start_matches('0'),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn years() {
        assert_eq!(year("2021", 2028), Ok(Some(2021)));
        assert!(year("1899", 2028).is_err());
        assert!(year("2029", 2028).is_err());
        assert!(year("21", 2028).is_err());
        assert_eq!(year(" ", 2028), Ok(None));
    }

    #[test]
    fn doors_seats_cylinders_displacement() {
        assert_eq!(count("4dr", 1..=6), Ok(Some(4)));
        assert_eq!(count("2 Door", 1..=6), Ok(Some(2)));
        assert_eq!(count("Four", 1..=6), Ok(Some(4)));
        assert_eq!(count("Seating for 7", 1..=15), Ok(Some(7)));
        assert!(count("44", 1..=6).is_err());
        assert_eq!(count(" 004 ", 1..=6), Ok(Some(4)));
        assert_eq!(count("300", 1..=6), Err("300 is out of range".into()));
        assert_eq!(count("0300", 1..=6), Err("300 is out of range".into()));
        assert_eq!(cylinders("V6"), Ok(Some(6)));
        assert_eq!(cylinders("V-8"), Ok(Some(8)));
        assert_eq!(cylinders("I4"), Ok(Some(4)));
        assert_eq!(cylinders("4 Cyl"), Ok(Some(4)));
        assert_eq!(cylinders("Electric"), Ok(None));
        assert_eq!(displacement("3.5"), Ok(Some(3.5)));
        assert_eq!(displacement("2.0L"), Ok(Some(2.0)));
        assert_eq!(displacement("5.3 L"), Ok(Some(5.3)));
        assert_eq!(displacement("3500cc"), Ok(Some(3.5)));
        assert!(displacement("big").is_err());
    }

    #[test]
    fn engine_descriptions() {
        assert_eq!(engine("3.5L V6"), (Some(3.5), Some(6)));
        assert_eq!(engine("2.0L I4 Turbo"), (Some(2.0), Some(4)));
        assert_eq!(engine("5.7L V8 HEMI"), (Some(5.7), Some(8)));
        assert_eq!(engine("2.5L 4-Cylinder"), (Some(2.5), Some(4)));
        assert_eq!(engine("4 Cyl 2.4L"), (Some(2.4), Some(4)));
        assert_eq!(engine("Electric"), (None, None));
    }

    #[test]
    fn transmissions() {
        use TransmissionSpeed::*;
        use TransmissionType::*;
        let t = |s| {
            let t = transmission(s);
            (t.kind, t.speed, t.unlisted_speed)
        };
        assert_eq!(t("6-Speed Automatic"), (Some(Automatic), Some(Six), None));
        assert_eq!(t("Automatic 6-Spd"), (Some(Automatic), Some(Six), None));
        assert_eq!(t("5-Speed Manual"), (Some(Manual), Some(Five), None));
        assert_eq!(t("CVT"), (Some(Automatic), None, None));
        assert_eq!(t("10-Speed Automatic"), (Some(Automatic), None, Some(10)));
        assert_eq!(t("8AT"), (Some(Automatic), None, Some(8)));
        assert_eq!(t("6MT"), (Some(Manual), Some(Six), None));
        assert_eq!(t("Automatic"), (Some(Automatic), None, None));
        assert_eq!(
            t("7-Speed Dual Clutch"),
            (Some(Automatic), Some(Seven), None)
        );
        assert_eq!(t("Sequential"), (None, None, None));
    }

    #[test]
    fn lists_split_trim_and_dedupe() {
        let items = list(
            ["Sunroof, Heated Seats |sunroof\nTow;;"].into_iter(),
            false,
            false,
        );
        assert_eq!(items, vec!["Sunroof", "Heated Seats", "Tow"]);
        let tidy = list(
            ["Sunroof, Heated Seats |sunroof;Tow;;"].into_iter(),
            false,
            true,
        );
        assert_eq!(tidy, vec!["Sunroof", "Heated Seats", "Tow"]);
        let urls = list(
            ["https://a/1.jpg https://a/2.jpg|https://a/3.jpg"].into_iter(),
            true,
            true,
        );
        assert_eq!(urls.len(), 3);
    }

    #[test]
    fn a_reused_list_holds_only_the_new_items() {
        let mut items = vec!["x".to_owned(); 5];
        list_into(["B|a|b|C"].into_iter(), false, true, &mut items);
        assert_eq!(items, ["B", "a", "C"]);
        list_into(std::iter::empty(), false, true, &mut items);
        assert!(items.is_empty());
        assert!(same_item("https://a/1.JPG", "HTTPS://a/1.jpg"));
        assert!(!same_item("https://a/1.jpg", "https://a/2.jpg"));
        assert!(!same_item("ab", "abc"));
        assert!(same_item("Heated Seats", "HEATED seats"));
        assert!(
            !same_item("Heated Seats@", "Heated Seats`"),
            "bit 5 alone is not case"
        );
    }

    #[test]
    fn long_lists_are_deduped_alike_and_quickly() {
        let mut text: Vec<String> = (0..50_000).map(|i| format!("Item{i}")).collect();
        text.extend((0..50_000).map(|i| format!("ITEM{i}")));
        text.insert(3, "item1".into());
        let items = list([text.join(",").as_str()].into_iter(), false, true);
        assert_eq!(items.len(), 50_000);
        assert_eq!(items[..3], ["Item0", "Item1", "Item2"]);
        assert_eq!(items[49_999], "Item49999");
    }

    #[test]
    fn web_urls() {
        assert!(is_web_url("https://images.example.com/a/1.jpg"));
        assert!(is_web_url("HTTP://h:8080/x?y=1"));
        assert!(!is_web_url("ftp://h/x"));
        assert!(!is_web_url("https://"));
        assert!(!is_web_url("https:///path"));
        assert!(!is_web_url("images/1.jpg"));
        assert!(is_web_url("HttpS://IMG/1.jpg"));
        assert!(is_web_url("http://x.com#f"));
        assert!(!is_web_url("https://a b/c"));
        assert!(!is_web_url("https://a\u{c}b"));
        assert!(
            is_web_url("https://a/b c"),
            "blanks after the host are not looked at"
        );
        assert!(!is_web_url("https://:80/x"));
    }

    #[test]
    fn trim_exact_is_str_trim() {
        for s in [
            "",
            " ",
            "\u{b}",
            " a ",
            "\u{b}a\u{b}",
            "\u{a0}a\u{2003}",
            "\ta b\r\n",
            "é",
        ] {
            assert_eq!(trim_exact(s), s.trim(), "{s:?}");
        }
    }

    #[test]
    fn whitespace_is_collapsed() {
        assert_eq!(clean("  F-150   XLT\t4x4 "), "F-150 XLT 4x4");
        assert!(matches!(clean("plain"), Cow::Borrowed(_)));
    }
}
