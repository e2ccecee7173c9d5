//! The commands lotsync prints as advice, found in what a process printed, and checked where
//! they were printed. Every process test that runs lotsync through [`super::site::Site`]
//! (`lotsync`, `lotsync_within`, `run`, `status`, the daemon's log) hands the output here, so
//! each advice line of each of those tests is checked against the setup that printed it.
//!
//! A command runs as printed when
//! - the shell can split it into words (its quotes are whole);
//! - it names the site's config with `--config`, when its subcommand reads one: a test's
//!   config is never the default `/etc/lotsync/lotsync.toml`, so without it the command would
//!   fail as printed;
//! - every absolute path it names exists, where the command was printed (but a name lotsync
//!   shows escaped, `\n` or `\u{1b}` for a control character: it never prints one raw, so
//!   such a file's command cannot run as printed, and its name is told as it is escaped);
//! - lotsync's own parser takes its words: the command is run with `--help` after them, and
//!   clap refuses an unknown subcommand or option, or a stray word, before it prints help;
//! - a command that changes nothing (`status`, `plan`, `check`, `why`, `validate`, `state
//!   export`) is run for real, by a shell, as printed, where it was printed: it must not fail
//!   (exit 2; for `status`, a monitoring check, UNKNOWN).
//!
//! A command that changes something (`sync`, `release`, `reconcile`, `run`, `state backup`)
//! is not run here, in the middle of another test: it would change what that test checks.
//! Running those for real, and seeing each do what its sentence says, is
//! `tests/it/advice.rs`'s work, in setups made for it.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// lotsync's subcommands (`lotsync --help`), each with what the checks need: whether it
/// reads the config (printed without `--config`, it reads the default one), and whether it
/// changes nothing (run for real where it was printed; `state` only as `state export`).
const SUBCOMMANDS: &[(&str, Reads, Changes)] = &[
    ("demo", Reads::NoConfig, Changes::Something),
    ("run", Reads::Config, Changes::Something),
    ("status", Reads::Config, Changes::Nothing),
    ("validate", Reads::Config, Changes::Nothing),
    ("check", Reads::NoConfig, Changes::Nothing),
    ("plan", Reads::Config, Changes::Nothing),
    ("sync", Reads::Config, Changes::Something),
    ("reconcile", Reads::Config, Changes::Something),
    ("release", Reads::Config, Changes::Something),
    ("why", Reads::Config, Changes::Nothing),
    ("state", Reads::Config, Changes::Something),
    ("sandbox", Reads::NoConfig, Changes::Something),
];

#[derive(Clone, Copy, PartialEq)]
enum Reads {
    Config,
    NoConfig,
}

#[derive(Clone, Copy, PartialEq)]
enum Changes {
    Nothing,
    Something,
}

/// The subcommand named `word`.
fn subcommand(word: &str) -> Option<(Reads, Changes)> {
    SUBCOMMANDS
        .iter()
        .find(|(name, ..)| *name == word)
        .map(|&(_, reads, changes)| (reads, changes))
}

/// The advice commands in `output`: each backticked span that is a lotsync command, and each
/// bare `lotsync SUBCOMMAND …` outside backticks, read as shell words for as long as they are
/// a command's words (options, their values, paths, quoted words, `&& lotsync …`).
pub fn commands(output: &str) -> Vec<String> {
    // JSON (`status --format json`, a JSON log line): the commands are in its strings.
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(output) {
        let mut strings = Vec::new();
        json_strings(&json, &mut strings);
        return strings.iter().flat_map(|s| commands(s)).collect();
    }
    let mut found = Vec::new();
    for line in output.lines() {
        let json_line = line.trim_start().starts_with('{');
        if json_line && serde_json::from_str::<serde_json::Value>(line).is_ok() {
            found.extend(commands(line));
            continue;
        }
        for (i, piece) in line.split('`').enumerate() {
            if i % 2 == 1 {
                if is_command(piece) {
                    found.push(piece.trim().to_owned());
                }
            } else {
                bare_commands(piece, &mut found);
            }
        }
    }
    found
}

/// Every string in `json`, keys aside.
fn json_strings(json: &serde_json::Value, out: &mut Vec<String>) {
    match json {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| json_strings(v, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| json_strings(v, out)),
        _ => {}
    }
}

/// `lotsync` and one of its subcommands.
fn is_command(text: &str) -> bool {
    let mut words = text.split_whitespace();
    words.next() == Some("lotsync") && words.next().and_then(subcommand).is_some()
}

/// Bare commands in a text outside backticks.
fn bare_commands(text: &str, found: &mut Vec<String>) {
    let mut rest = text;
    while let Some(at) = rest.find("lotsync ") {
        let from = &rest[at..];
        // A word that ends in "lotsync" ("mylotsync ") is not the command.
        let starts_a_word = rest[..at]
            .chars()
            .next_back()
            .is_none_or(|c| c.is_whitespace() || matches!(c, '(' | ':' | '"' | '\''));
        if starts_a_word && is_command(from) {
            let end = command_end(from);
            found.push(
                from[..end]
                    .trim_end_matches([':', ',', '.', ';'])
                    .to_owned(),
            );
            rest = &from[end..];
        } else {
            rest = &from["lotsync ".len()..];
        }
    }
}

/// Where the command at the start of `text` ends: after `lotsync SUBCOMMAND`, words go on
/// while they are options (`-…`), an option's value, paths, quoted words or `state`'s verb,
/// or `&&` and another `lotsync SUBCOMMAND`.
fn command_end(text: &str) -> usize {
    let (words, _) = split_words(text);
    // `lotsync` and its subcommand (`is_command` saw both).
    let mut end = words.get(1).map_or(text.len(), |&(_, end)| end);
    let mut value_next = false;
    let mut i = 2;
    while let Some((word, word_end)) = words.get(i) {
        let quoted = text[end..*word_end].trim_start().starts_with(['\'', '"']);
        if word == "&&" {
            match (words.get(i + 1), words.get(i + 2)) {
                (Some((lotsync, _)), Some((sub, sub_end)))
                    if lotsync == "lotsync" && subcommand(sub).is_some() =>
                {
                    end = *sub_end;
                    i += 3;
                    continue;
                }
                _ => break,
            }
        }
        let state_verb = i >= 2 && words[i - 1].0 == "state" && is_state_verb(word);
        if !(word.starts_with('-') || value_next || word.contains('/') || quoted || state_verb) {
            break;
        }
        // An option's value follows an option that has no `=` and is not a switch.
        value_next = word.starts_with("--") && !word.contains('=') && !is_switch(word);
        end = *word_end;
        i += 1;
    }
    end
}

/// `lotsync state`'s verbs.
fn is_state_verb(word: &str) -> bool {
    matches!(word, "backup" | "export")
}

/// lotsync's options that take no value.
fn is_switch(word: &str) -> bool {
    matches!(
        word,
        "--force" | "--rebuild" | "--create-dirs" | "--keep" | "--online"
    )
}

/// Shell words of `text` (quotes removed) and where each ends in `text`, and whether a quote
/// is left open at the end (its unfinished word is left out).
fn split_words(text: &str) -> (Vec<(String, usize)>, bool) {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut in_word = false;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push((std::mem::take(&mut word), i));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word && quote.is_none() {
        words.push((word, text.len()));
    }
    (words, quote.is_some())
}

/// The shell's words of one command line; None when a quote is left open.
pub fn shell_words(line: &str) -> Option<Vec<String>> {
    let (words, open) = split_words(line);
    (!open).then(|| words.into_iter().map(|(w, _)| w).collect())
}

/// Why `command` does not run as printed for the site whose config is `config`; None when it
/// does. `paths_now`: the paths it names must exist (false for a log read later, when the
/// files it named may have moved on, as the advice said they would).
pub fn fault(command: &str, config: &Path, paths_now: bool) -> Option<String> {
    let Some(words) = shell_words(command) else {
        return Some("a quote is left open".into());
    };
    for part in words.split(|w| w == "&&") {
        let (Some("lotsync"), Some(sub)) = (part.first().map(String::as_str), part.get(1)) else {
            return Some(format!("{part:?} is not a lotsync command"));
        };
        if subcommand(sub).is_some_and(|(reads, _)| reads == Reads::Config) {
            let named = part
                .windows(2)
                .find(|w| w[0] == "--config")
                .map(|w| Path::new(&w[1]));
            if named != Some(config) {
                return Some(format!(
                    "it does not name the config ({}) with --config: as printed it reads the \
                     default one",
                    config.display()
                ));
            }
        }
        if paths_now {
            if let Some(missing) = part.iter().find(|w| {
                w.starts_with('/') && !w.contains('\\') && !Path::new(w.as_str()).exists()
            }) {
                return Some(format!("{missing} does not exist"));
            }
        }
        let parsed = Command::new(env!("CARGO_BIN_EXE_lotsync"))
            .args(&part[1..])
            .arg("--help")
            .output()
            .expect("lotsync runs");
        if !parsed.status.success() {
            return Some(format!(
                "lotsync does not take its words: {}",
                String::from_utf8_lossy(&parsed.stderr).trim()
            ));
        }
    }
    let changes_nothing = words.split(|w| w == "&&").all(|part| {
        let sub = part.get(1).map_or("", String::as_str);
        subcommand(sub).is_some_and(|(_, changes)| changes == Changes::Nothing)
            || (sub == "state" && part.get(2).is_some_and(|v| v == "export"))
    });
    if changes_nothing && paths_now {
        let ran = super::site::run_printed(command);
        let status = words.get(1).is_some_and(|w| w == "status");
        // `status` answers as a monitoring check: CRITICAL (2) is an answer, UNKNOWN (3) is
        // a status that could not be read. The others fail with 2.
        let failed = match ran.status.code() {
            Some(3) => status,
            Some(2) => !status,
            Some(_) => false,
            None => true,
        };
        if failed {
            return Some(format!(
                "run as printed, it failed ({}): {}{}",
                ran.status,
                String::from_utf8_lossy(&ran.stdout).trim(),
                String::from_utf8_lossy(&ran.stderr).trim()
            ));
        }
    }
    None
}

/// Checks every advice command in `output`, once per site (`seen`); fails the test with the
/// command, why, and the output that printed it.
pub fn check(output: &str, config: &Path, paths_now: bool, seen: &mut BTreeSet<String>) {
    for command in commands(output) {
        if !seen.insert(command.clone()) {
            continue;
        }
        if let Some(why) = fault(&command, config, paths_now) {
            panic!(
                "advice that does not run as printed: {command}\n  {why}\nprinted in:\n{output}"
            );
        }
    }
}
