//! Text that comes from outside (file names, values read from exports, the service's messages)
//! made safe to print: one line, no terminal control codes, no character left out.
//!
//! A file name holding a newline would split one log event into two lines, and an escape code
//! would drive the terminal of whoever reads the log. [`Escaped`] writes such characters as
//! Rust-style escapes (`\n`, `\u{1b}`); [`shown_bytes`] and [`shown_path`] also write bytes that
//! are not UTF-8 as `\xNN`. Control characters never appear raw. Everything else passes through
//! unchanged, backslashes included, so ordinary names (a Windows share's `\\srv\in`) read as
//! they are; the price is that a name holding the two characters `\n` reads like one holding a
//! line break. The output is for people, never parsed back.

use std::fmt;
use std::path::Path;

/// Displays a string with control characters escaped (`\n`, `\r`, `\t`, `\u{1b}`, …) and every
/// other character, backslashes included, as it is.
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

/// Bytes as one printable line: UTF-8 text with control characters escaped (as [`Escaped`]),
/// each byte that is not UTF-8 as `\xNN`.
pub fn shown_bytes(bytes: &[u8]) -> String {
    use fmt::Write;
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        // Writing to a String cannot fail: the results are always Ok.
        let _ = write!(out, "{}", Escaped(chunk.valid()));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// A path as one printable line, as [`shown_bytes`] shows its bytes.
pub fn shown_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    shown_bytes(path.as_os_str().as_bytes())
}

/// `text` as a shell reads it back whole: quoted when it holds spaces or quotes, as is
/// otherwise; for the commands lotsync prints as advice, so that they run as printed.
pub fn shell_quoted(text: &str) -> String {
    shlex::try_quote(text).map_or_else(|_| text.escape_default().to_string(), |q| q.into_owned())
}

/// The last component of a path, shown as [`shown_path`] does.
pub fn shown_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(|| shown_path(path), |n| shown_path(Path::new(n)))
}

/// Displays an error and every `source()` under it, joined by `": "`, as anyhow's `{:#}`
/// does: our error messages leave their source out (so that anyhow does not print it twice),
/// and a log event or a report showing only the top message would lose the cause. A source
/// whose text is already at the end of what was written (an error that still quotes its
/// source, or one that only wraps it) is skipped.
#[derive(Debug, Clone, Copy)]
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut written = self.0.to_string();
        let mut next = self.0.source();
        while let Some(error) = next {
            let text = error.to_string();
            if !text.is_empty() && !written.ends_with(&text) {
                written.push_str(": ");
                written.push_str(&text);
            }
            next = error.source();
        }
        f.write_str(&written)
    }
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

    #[test]
    fn bytes_show_what_is_not_utf8_and_leave_backslashes() {
        assert_eq!(shown_bytes(b"Citro\xebn"), "Citro\\xebn");
        assert_eq!(shown_bytes(b"\xff\ta\\b\xc3"), "\\xff\\ta\\b\\xc3");
        assert_eq!(shown_bytes("Citroën".as_bytes()), "Citroën");
        assert_eq!(Escaped("C:\\in\\new.csv").to_string(), "C:\\in\\new.csv");
    }

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("cannot read config /x.toml")]
        Read(#[source] std::io::Error),
        #[error("still quoting: {0}")]
        Quoting(#[source] std::io::Error),
        #[error(transparent)]
        Wrapped(#[from] Inner),
    }

    #[derive(Debug, thiserror::Error)]
    #[error("feed main")]
    struct Inner(#[source] std::io::Error);

    fn gone() -> std::io::Error {
        std::io::Error::from_raw_os_error(2)
    }

    #[test]
    fn chain_shows_each_source_once() {
        let os = gone().to_string();
        let read = Outer::Read(gone());
        assert_eq!(
            Chain(&read).to_string(),
            format!("cannot read config /x.toml: {os}")
        );
        let quoting = Outer::Quoting(gone());
        assert_eq!(Chain(&quoting).to_string(), format!("still quoting: {os}"));
        let wrapped = Outer::from(Inner(gone()));
        assert_eq!(Chain(&wrapped).to_string(), format!("feed main: {os}"));
        assert_eq!(Chain(&gone()).to_string(), os);
    }
}
