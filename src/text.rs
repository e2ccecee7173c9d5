//! Text that comes from outside (file names, values read from exports, the service's messages)
//! made safe to print: one line, no terminal control codes, nothing lost.
//!
//! A file name holding a newline would split one log event into two lines, and an escape code
//! would drive the terminal of whoever reads the log. [`Escaped`] writes such characters as
//! Rust-style escapes (`\n`, `\u{1b}`); [`shown_path`] also writes the bytes of a name that is
//! not UTF-8 as `\xNN`. Plain text passes through unchanged, so ordinary names read as they are.

use std::fmt;
use std::path::Path;

/// Displays a string with control characters escaped (`\n`, `\r`, `\t`, `\u{1b}`, …) and
/// backslashes doubled only where that keeps an escape unambiguous.
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0;
        if !text.chars().any(needs_escape) {
            return f.write_str(text);
        }
        for c in text.chars() {
            if needs_escape(c) {
                write!(f, "{}", c.escape_default())?;
            } else {
                fmt::Write::write_char(f, c)?;
            }
        }
        Ok(())
    }
}

/// Control characters (C0, DEL, C1) and the Unicode line and paragraph separators: anything
/// that could break a line or move a terminal's cursor.
fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// A path as one printable line: UTF-8 names with control characters escaped, other bytes as
/// `\xNN`.
pub fn shown_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&Escaped(chunk.valid()).to_string());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// The last component of a path, shown as [`shown_path`] does.
pub fn shown_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(|| shown_path(path), |n| shown_path(Path::new(n)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn plain_text_passes_and_controls_are_escaped() {
        assert_eq!(Escaped("monday.csv").to_string(), "monday.csv");
        assert_eq!(Escaped("Agate Black ü").to_string(), "Agate Black ü");
        assert_eq!(
            Escaped("a\nfake=event\r\x1b[31mred\t").to_string(),
            "a\\nfake=event\\r\\u{1b}[31mred\\t"
        );
        assert_eq!(
            Escaped("x\u{2028}y\u{9b}").to_string(),
            "x\\u{2028}y\\u{9b}"
        );
    }

    #[test]
    fn paths_show_bytes_that_are_not_utf8() {
        let name = OsStr::from_bytes(b"inv\xff\xfe\n.csv");
        assert_eq!(shown_path(Path::new(name)), "inv\\xff\\xfe\\n.csv");
        assert_eq!(
            shown_name(&Path::new("/in").join(name)),
            "inv\\xff\\xfe\\n.csv"
        );
        assert_eq!(shown_path(Path::new("/srv/in/a b.csv")), "/srv/in/a b.csv");
    }
}
