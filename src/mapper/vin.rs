//! VINs: the North American check digit (49 CFR 565) and a compact form for duplicate checks.

use std::borrow::Cow;
use std::hash::{Hash, Hasher};

/// How strictly VINs are checked, per feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VinCheck {
    /// 17 characters, no I, O or Q, check digit at position 9 verified.
    #[default]
    Strict,
    /// 5 to 16 letters and digits: pre-1981 vehicles, trailers, hull numbers. A value of 17
    /// characters is a VIN and is checked as [`VinCheck::Strict`] checks it.
    Lenient,
}

/// Upper-cases and checks a VIN; `Err` says what is wrong in words a dealer understands.
/// A VIN already in capitals is borrowed, not copied.
pub fn check_vin(raw: &str, mode: VinCheck) -> Result<Cow<'_, str>, String> {
    let trimmed = super::parse::trim_exact(raw);
    // Checked before upper-casing (which changes only letters).
    if !trimmed.bytes().all(|b| b.is_ascii_alphanumeric()) {
        if let Some(c) = trimmed.chars().find(|c| !c.is_ascii_alphanumeric()) {
            return Err(format!("{c:?} cannot be part of a VIN"));
        }
    }
    let vin = if trimmed.bytes().any(|b| b.is_ascii_lowercase()) {
        Cow::Owned(trimmed.to_ascii_uppercase())
    } else {
        Cow::Borrowed(trimmed)
    };
    // Seventeen characters are a VIN whatever the feed says: the lenient rule is for the
    // shorter serials of older vehicles, trailers and hulls, never a way past the check digit.
    let mode = if vin.len() == 17 {
        VinCheck::Strict
    } else {
        mode
    };
    match mode {
        VinCheck::Lenient => {
            if (5..=16).contains(&vin.len()) {
                Ok(vin)
            } else {
                Err(format!(
                    "{} characters; a serial needs 5 to 16 (17 are a VIN, checked whole)",
                    vin.len()
                ))
            }
        }
        VinCheck::Strict => {
            if vin.len() != 17 {
                return Err(format!(
                    "{} characters; a VIN has 17 (set vin_check = \"lenient\" for older serials of 5 to 16)",
                    vin.len()
                ));
            }
            if let Some(&c) = vin
                .as_bytes()
                .iter()
                .find(|c| matches!(c, b'I' | b'O' | b'Q'))
            {
                return Err(format!("the letter {} never appears in a VIN", c as char));
            }
            let expected = check_digit(vin.as_bytes());
            let found = vin.as_bytes()[8] as char;
            if found != expected {
                return Err(format!(
                    "check digit (9th character) is {found}, but the other characters give {expected}: a typo?"
                ));
            }
            Ok(vin)
        }
    }
}

/// The check digit (9th character) that a 17-character VIN of digits and letters other than
/// I, O, Q must carry.
pub fn check_digit(vin: &[u8]) -> char {
    const WEIGHTS: [u32; 17] = [8, 7, 6, 5, 4, 3, 2, 10, 0, 9, 8, 7, 6, 5, 4, 3, 2];
    let sum: u32 = vin
        .iter()
        .zip(WEIGHTS)
        .map(|(&c, w)| transliterate(c) * w)
        .sum();
    match sum % 11 {
        10 => 'X',
        n => char::from_digit(n, 10).unwrap_or('?'),
    }
}

fn transliterate(c: u8) -> u32 {
    match c {
        b'0'..=b'9' => u32::from(c - b'0'),
        b'A' | b'J' => 1,
        b'B' | b'K' | b'S' => 2,
        b'C' | b'L' | b'T' => 3,
        b'D' | b'M' | b'U' => 4,
        b'E' | b'N' | b'V' => 5,
        b'F' | b'W' => 6,
        b'G' | b'P' | b'X' => 7,
        b'H' | b'Y' => 8,
        b'R' | b'Z' => 9,
        _ => 0,
    }
}

/// A checked VIN (up to 17 letters and digits) packed into 104 bits, with the line it was first
/// seen on in the 24 bits above; equal and hashed by the VIN alone. A million of them fit in a
/// set of about 36 MB, where a set of Strings would take three times that.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SeenVin(u128);

const VIN_BITS: u32 = 104;
const VIN_MASK: u128 = (1 << VIN_BITS) - 1;

impl SeenVin {
    /// `None` for anything but 1 to 17 ASCII letters and digits.
    pub fn new(vin: &str, line: u64) -> Option<Self> {
        if vin.is_empty() || vin.len() > 17 {
            return None;
        }
        let mut packed: u128 = 0;
        for c in vin.bytes() {
            let digit = match c {
                b'0'..=b'9' => c - b'0' + 1,
                b'A'..=b'Z' => c - b'A' + 11,
                _ => return None,
            };
            packed = packed * 37 + u128::from(digit);
        }
        let line = u128::from(line.min((1 << 24) - 1) as u32);
        Some(SeenVin(packed | (line << VIN_BITS)))
    }

    pub fn line(self) -> u64 {
        (self.0 >> VIN_BITS) as u64
    }
}

impl PartialEq for SeenVin {
    fn eq(&self, other: &Self) -> bool {
        self.0 & VIN_MASK == other.0 & VIN_MASK
    }
}

impl Eq for SeenVin {}

impl Hash for SeenVin {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.0 & VIN_MASK).hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn known_vins_pass_the_check_digit() {
        for vin in [
            "1HGCM82633A004352",
            "1M8GDM9AXKP042788",
            "11111111111111111",
            "5YJ3E1EA2KF317000",
        ] {
            assert_eq!(
                check_vin(vin, VinCheck::Strict),
                Ok(Cow::Borrowed(vin)),
                "{vin}"
            );
        }
        assert_eq!(
            check_vin(" 1hgcm82633a004352 ", VinCheck::Strict),
            Ok(Cow::Owned("1HGCM82633A004352".to_owned()))
        );
    }

    #[test]
    fn bad_vins_say_why() {
        let err = check_vin("1HGCM82643A004352", VinCheck::Strict).unwrap_err();
        assert!(
            err.contains("is 4, but the other characters give 3"),
            "{err}"
        );
        assert!(check_vin("1HGCM8263", VinCheck::Strict)
            .unwrap_err()
            .contains("9 characters"));
        assert!(check_vin("1HGCM82633A00435O", VinCheck::Strict)
            .unwrap_err()
            .contains("letter O"));
        assert!(check_vin("1HGCM-2633A004352", VinCheck::Strict)
            .unwrap_err()
            .contains("'-'"));
    }

    #[test]
    fn lenient_takes_short_serials() {
        assert_eq!(
            check_vin("ab123", VinCheck::Lenient).as_deref(),
            Ok("AB123")
        );
        assert!(check_vin("AB12", VinCheck::Lenient).is_err());
        assert!(check_vin("1HGCM82633A00435", VinCheck::Lenient).is_ok());
    }

    /// A `VIN/Serial` column is read leniently, but 17 characters are a VIN and get
    /// the whole check (a mistyped check digit, or an I, used to pass).
    #[test]
    fn seventeen_characters_are_checked_as_a_vin_even_when_lenient() {
        assert!(check_vin("1HGCM82633A004352", VinCheck::Lenient).is_ok());
        let typo = check_vin("1HGCM82643A004352", VinCheck::Lenient).unwrap_err();
        assert!(typo.contains("check digit"), "{typo}");
        let letter = check_vin("1HGCM82633A00435I", VinCheck::Lenient).unwrap_err();
        assert!(letter.contains("letter I"), "{letter}");
        assert!(check_vin("1HGCM82633A0043521", VinCheck::Lenient).is_err());
    }

    #[test]
    fn seen_vins_compare_by_vin_and_keep_their_line() {
        let mut set = HashSet::new();
        assert!(set.insert(SeenVin::new("1HGCM82633A004352", 2).unwrap()));
        assert!(set.insert(SeenVin::new("1HGCM82633A004353", 3).unwrap()));
        let again = SeenVin::new("1HGCM82633A004352", 9).unwrap();
        assert_eq!(set.get(&again).map(|s| s.line()), Some(2));
        assert!(SeenVin::new("ZZZZZZZZZZZZZZZZZ", u64::MAX).is_some());
        assert!(SeenVin::new("a", 1).is_none());
    }
}
