//! `lotsync validate`: every problem of a config file at once, each with its line and key
//! path: the lines TOML cannot read, unknown keys, keys not set, values of the wrong type or
//! out of range, what holds between values, and what the config points to on this machine.
//! [`Config::load`](super::Config::load) reads values the same way (without the machine).
//!
//! A refusal of the reader ([`super::read`]) is named, then set aside so that the rest is
//! read too: an unknown key is removed, a missing or refused value gets a placeholder of a
//! type the key takes (or, refused in every type, is removed for its default), and nothing
//! said of a placeholder reaches the list. Lines come from toml's spans, never from an
//! error's text.

use super::read::{read, KeyPath, ReadError, Refusal, Step};
use super::Config;
use std::path::Path;
use toml::de::{DeTable, DeValue};

/// A config's refusals stop being read after this many placeholders (a file that is not
/// lotsync's config at all).
const MOST_SET_ASIDE: usize = 50;

/// Every problem of a config file, at once: syntax, unknown keys, values, and what it points
/// to on this machine (inboxes, profiles, the token, folders). Empty: the config is usable.
/// The messages never hold the token.
pub fn validate(path: &Path) -> Vec<String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => return vec![format!("cannot read {}: {e}", path.display())],
    };
    // A line TOML cannot read is named and left out, so that the rest is checked too.
    let Readable {
        table,
        mut problems,
        left_out,
        text: read_text,
    } = match readable(&text) {
        Ok(readable) => readable,
        Err(problems) => return problems,
    };
    let lines = Lines::of(&read_text);
    let checked = Checked::read(table, &lines, &left_out, &super::config_dir(path));
    problems.extend(checked.problems.iter().cloned());
    if let Some(config) = &checked.config {
        problems.extend(
            config
                .machine_problems()
                .into_iter()
                .filter(|p| checked.own(p)),
        );
    }
    problems
}

/// A config read and checked but for the machine: the config (placeholders standing in for
/// what was set aside) unless the rest could not be read, and the problems, in the order
/// found.
pub(super) struct Checked {
    pub(super) config: Option<Config>,
    pub(super) problems: Vec<String>,
    /// Where placeholders stand (or values were removed for their defaults).
    set_aside: Vec<KeyPath>,
}

impl Checked {
    /// Reads `table` (the parts of the text TOML could read; `left_out` what it could not),
    /// takes relative paths from `base`, and checks what holds between values.
    pub(super) fn read(
        table: toml::Table,
        lines: &Lines<'_>,
        left_out: &[LeftOut],
        base: &Path,
    ) -> Checked {
        let mut checked = read_values(toml::Value::Table(table), lines, left_out);
        if let Some(config) = &mut checked.config {
            config.resolve_paths(base);
            let between = config.problems();
            let own: Vec<String> = between.into_iter().filter(|p| checked.own(p)).collect();
            checked.problems.extend(own);
        }
        checked
    }

    /// Whether a problem is the user's, not said of a placeholder: it names no key that was
    /// set aside.
    fn own(&self, problem: &str) -> bool {
        !self.set_aside.iter().any(|at| {
            let (table, key) = at.table_and_key();
            problem.contains(&table) && problem.contains(&key)
        })
    }
}

/// Reads the values, naming each refusal and setting it aside, until the config reads.
fn read_values(mut root: toml::Value, lines: &Lines<'_>, left_out: &[LeftOut]) -> Checked {
    let header_left_out = left_out.iter().any(|l| matches!(l, LeftOut::Header));
    let mut checked = Checked {
        config: None,
        problems: Vec::new(),
        set_aside: Vec::new(),
    };
    // The reader meets keys in the order of their names; they are said in the file's.
    let mut said: Vec<Said> = Vec::new();
    // A key found missing while a section's header was left out may be one of its keys:
    // not said, and the rest not checked.
    let mut unsure = false;
    let read_through = loop {
        if checked.set_aside.len() > MOST_SET_ASIDE {
            break false;
        }
        let Refusal { at, error } = match read::<Config>(root.clone()) {
            Ok(config) => {
                checked.config = Some(config);
                break true;
            }
            Err(refusal) => refusal,
        };
        match &error {
            ReadError::Unknown { key, .. } => {
                // serde_path_to_error has the key in the path when it read it.
                let key_at = match at.0.last() {
                    Some(Step::Key(last)) if last == key => at.clone(),
                    _ => at.child(key),
                };
                said.push(lines.said(&key_at, &shown(&root, &key_at, &checked.set_aside), &error));
                if remove(&mut root, &key_at).is_none() {
                    break false;
                }
            }
            ReadError::Missing(key) => {
                let key_at = at.child(key);
                let hidden = left_out.iter().any(|l| l.hides(&key_at))
                    || checked.set_aside.iter().any(|s| key_at.within(s));
                if !hidden && header_left_out {
                    unsure = true;
                } else if !hidden {
                    said.push(lines.said(&at, &shown(&root, &key_at, &checked.set_aside), &error));
                }
                if !put_placeholder(&mut root, &key_at) {
                    break false;
                }
                checked.set_aside.push(key_at);
            }
            ReadError::Value(_) => {
                said.push(lines.said(&at, &shown(&root, &at, &checked.set_aside), &error));
                if !put_placeholder(&mut root, &at) && remove(&mut root, &at).is_none() {
                    break false;
                }
                checked.set_aside.push(at);
            }
        }
    };
    said.sort_by_key(|s| s.line.unwrap_or(usize::MAX));
    checked.problems.extend(said.into_iter().map(|s| s.text));
    if unsure {
        checked.config = None;
        let n = left_out.len();
        checked.problems.push(format!(
            "the rest is not checked until the line{} TOML cannot read {} fixed",
            if n == 1 { "" } else { "s" },
            if n == 1 { "is" } else { "are" }
        ));
    } else if !read_through && checked.problems.is_empty() {
        // Gave up on a refusal not said (a key hidden by a line left out): the load must
        // not take it for a config without problems.
        checked
            .problems
            .push("the config cannot be read as lotsync's".into());
    }
    checked
}

/// `at` as a problem names it: a feed (an item of an array of tables) with its name, as the
/// checks after reading name it (`feed[1] ("main").location_id`), unless the name is what is
/// refused or a placeholder.
fn shown(root: &toml::Value, at: &KeyPath, set_aside: &[KeyPath]) -> String {
    let mut shown = String::new();
    let mut value = Some(root);
    for (n, step) in at.0.iter().enumerate() {
        value = value.and_then(|v| match step {
            Step::Key(key) => v.get(key.as_str()),
            Step::Index(i) => v.get(*i),
        });
        match step {
            Step::Key(key) if n == 0 => shown.push_str(key),
            Step::Key(key) => {
                shown.push('.');
                shown.push_str(key);
            }
            Step::Index(i) => {
                shown.push_str(&format!("[{i}]"));
                let name_at = KeyPath(at.0[..=n].to_vec()).child("name");
                let named = name_at != *at && !set_aside.iter().any(|s| name_at.within(s));
                let name = value
                    .and_then(|v| v.get("name"))
                    .and_then(toml::Value::as_str);
                if let (true, Some(name)) = (named, name) {
                    shown.push_str(&format!(" ({name:?})"));
                }
            }
        }
    }
    shown
}

/// The slot at `at`: the value at a key or an index.
fn slot<'v>(root: &'v mut toml::Value, at: &[Step]) -> Option<&'v mut toml::Value> {
    at.iter().try_fold(root, |value, step| match step {
        Step::Key(key) => value.as_table_mut()?.get_mut(key),
        Step::Index(i) => value.as_array_mut()?.get_mut(*i),
    })
}

/// Puts `value` at `at` (a key, added or replaced; an index, replaced).
fn put(root: &mut toml::Value, at: &KeyPath, value: toml::Value) -> Option<()> {
    let (last, parent) = at.0.split_last()?;
    let parent = slot(root, parent)?;
    match last {
        Step::Key(key) => {
            parent.as_table_mut()?.insert(key.clone(), value);
        }
        Step::Index(i) => *parent.as_array_mut()?.get_mut(*i)? = value,
    }
    Some(())
}

/// Removes the key at `at` (an array's item stays: the indexes after it would move).
fn remove(root: &mut toml::Value, at: &KeyPath) -> Option<toml::Value> {
    let (Step::Key(key), parent) = at.0.split_last()? else {
        return None;
    };
    slot(root, parent)?.as_table_mut()?.remove(key)
}

/// Puts at `at` the first placeholder the config takes there (one of each TOML type, each
/// within every range); false when it takes none.
fn put_placeholder(root: &mut toml::Value, at: &KeyPath) -> bool {
    let placeholders = [
        toml::Value::Integer(1),
        toml::Value::Float(1.0),
        toml::Value::String("?".into()),
        toml::Value::Boolean(false),
        toml::Value::Table(toml::Table::new()),
        toml::Value::Array(Vec::new()),
    ];
    for placeholder in placeholders {
        let mut trial = root.clone();
        if put(&mut trial, at, placeholder).is_none() {
            return false;
        }
        let taken = match read::<Config>(trial.clone()) {
            Ok(_) => true,
            // Refused itself; a refusal elsewhere (inside it: a placeholder table's keys) is
            // the next one's.
            Err(Refusal {
                at: refused,
                error: ReadError::Value(_),
            }) => refused != *at,
            Err(_) => true,
        };
        if taken {
            *root = trial;
            return true;
        }
    }
    false
}

/// Lines of keys and values, from the spans toml keeps.
pub(super) struct Lines<'t> {
    text: &'t str,
    /// None when the text is not TOML (then nothing is read from it either).
    root: Option<toml::Spanned<DeTable<'t>>>,
}

impl<'t> Lines<'t> {
    pub(super) fn of(text: &'t str) -> Lines<'t> {
        Lines {
            text,
            root: DeTable::parse(text).ok(),
        }
    }

    /// The line (from 1) where the key at `at` is written, or its item in an array; None
    /// for the whole file or a key not in the text (a placeholder's).
    pub(super) fn line(&self, at: &KeyPath) -> Option<usize> {
        let mut table = Some(self.root.as_ref()?.get_ref());
        let mut items: Option<&[toml::Spanned<DeValue<'t>>]> = None;
        let mut span = None;
        for step in &at.0 {
            let value = match step {
                Step::Key(key) => {
                    let (k, value) = table?.iter().find(|(k, _)| k.get_ref() == key)?;
                    span = Some(k.span());
                    value
                }
                Step::Index(i) => {
                    let item = items?.get(*i)?;
                    span = Some(item.span());
                    item
                }
            };
            (table, items) = match value.get_ref() {
                DeValue::Table(t) => (Some(t), None),
                DeValue::Array(a) => (None, Some(&a[..])),
                _ => (None, None),
            };
        }
        let start = span?.start.min(self.text.len());
        Some(self.text[..start].matches('\n').count() + 1)
    }

    /// A problem: `line N: key: reason`, the line `line_at`'s (the key's, or for a key not
    /// set its table's), without it when there is none.
    fn said(&self, line_at: &KeyPath, at: &str, error: &ReadError) -> Said {
        let line = self.line(line_at);
        let text = match line {
            Some(line) => format!("line {line}: {at}: {error}"),
            None => format!("{at}: {error}"),
        };
        Said { line, text }
    }
}

/// A refusal as said, with its line (None: after every line).
struct Said {
    line: Option<usize>,
    text: String,
}

/// The part of a config TOML can read: each line it cannot is named with TOML's reason and
/// left out (a section header with its whole section), up to 20 of them.
struct Readable {
    table: toml::Table,
    problems: Vec<String>,
    left_out: Vec<LeftOut>,
    /// The text read: the lines left out blank, the others where they were.
    text: String,
}

/// A line TOML could not read, left out of the checks.
pub(super) enum LeftOut {
    /// A section's header, left out with its whole section.
    Header,
    /// A `key = value` line: where the key would have been.
    Key(KeyPath),
    /// Anything else (a stray word, an array's item).
    Other,
}

impl LeftOut {
    /// What line `at` of `lines` sets, as a key path.
    fn key_line(lines: &[&str], at: usize) -> LeftOut {
        let Some(key) = lines[at]
            .split_once('=')
            .map(|(k, _)| k.trim().trim_matches('"'))
            .filter(|k| !k.is_empty() && !k.contains(char::is_whitespace))
        else {
            return LeftOut::Other;
        };
        let mut section: Vec<Step> = Vec::new();
        let mut seen: std::collections::HashMap<&str, usize> = Default::default();
        for line in &lines[..at] {
            let line = line.trim();
            if let Some((name, _)) = line.strip_prefix("[[").and_then(|r| r.split_once("]]")) {
                let n = seen.entry(name.trim()).or_default();
                section = vec![Step::Key(name.trim().to_owned()), Step::Index(*n)];
                *n += 1;
            } else if let Some((name, _)) = line.strip_prefix('[').and_then(|r| r.split_once(']')) {
                section = name
                    .split('.')
                    .map(|k| Step::Key(k.trim().to_owned()))
                    .collect();
            }
        }
        // A dotted key (`api.base_url = …`) is its tables'.
        section.extend(key.split('.').map(|k| Step::Key(k.trim().to_owned())));
        LeftOut::Key(KeyPath(section))
    }

    /// Whether it is where `at` (a key found missing) would have been.
    fn hides(&self, at: &KeyPath) -> bool {
        matches!(self, LeftOut::Key(key) if key == at)
    }
}

/// Parses `text`, leaving out each line TOML cannot read (see [`Readable`]). Err: the problems
/// found when the rest cannot be told apart: a value left open (a string, an array) runs on
/// into the lines after it, which are then no problems of their own.
fn readable(text: &str) -> Result<Readable, Vec<String>> {
    let mut lines: Vec<&str> = text.lines().collect();
    let mut problems = Vec::new();
    let mut left_out = Vec::new();
    // The last line left out for its own sake (not with a header's section).
    let mut last: Option<usize> = None;
    loop {
        let joined = lines.join("\n");
        let e = match toml::from_str::<toml::Table>(&joined) {
            Ok(table) => {
                return Ok(Readable {
                    table,
                    problems,
                    left_out,
                    text: joined,
                })
            }
            Err(e) => e,
        };
        let reason = e.message().trim().replace('\n', " ");
        let at = e
            .span()
            .map(|span| joined[..span.start.min(joined.len())].matches('\n').count());
        let Some(at) = at else {
            problems.push(format!("not valid TOML: {reason}"));
            return Err(problems);
        };
        // Right after the line left out, before it, or on a line already left out: what that
        // line opened is still open, and nothing after it can be told apart.
        let runs_on = last.is_some_and(|last| at <= last + 1)
            || lines.get(at).is_none_or(|l| l.trim().is_empty());
        if let (true, Some(last)) = (runs_on, last) {
            problems.push(format!(
                "the rest is not checked: line {} seems to leave a value open (a string, an \
                 array) that runs on below it",
                last + 1
            ));
            return Err(problems);
        }
        if let Some(opened) = open_multi_line_string(&lines[..(at + 1).min(lines.len())]) {
            // Said where the file ends; named where it was opened.
            problems.push(format!(
                "line {}: not valid TOML: a multi-line string opened here is not closed \
                 ({reason}); the rest is not checked",
                opened + 1
            ));
            return Err(problems);
        }
        problems.push(format!("line {}: not valid TOML: {reason}", at + 1));
        if runs_on || problems.len() >= 20 {
            return Err(problems);
        }
        if lines[at].trim_start().starts_with('[') {
            // A header that does not read: its keys would land in the section before it.
            let end = (at + 1..lines.len())
                .find(|&n| lines[n].trim_start().starts_with('['))
                .unwrap_or(lines.len());
            lines[at..end].fill("");
            left_out.push(LeftOut::Header);
            last = None;
        } else {
            left_out.push(LeftOut::key_line(&lines, at));
            lines[at] = "";
            last = Some(at);
        }
    }
}

/// The line (from 0) that opens a multi-line string `lines` never close: the last with the
/// quotes of a kind written an odd number of times.
fn open_multi_line_string(lines: &[&str]) -> Option<usize> {
    ["\"\"\"", "'''"].iter().find_map(|quotes| {
        let written: usize = lines.iter().map(|l| l.matches(quotes).count()).sum();
        (written % 2 == 1)
            .then(|| lines.iter().rposition(|l| l.contains(quotes)))
            .flatten()
    })
}

#[cfg(test)]
mod tests;
