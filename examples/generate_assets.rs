//! The man pages and shell completions the .deb installs, written into a folder:
//! `cargo run --no-default-features --example generate_assets -- --dir target/assets`
//! (`packaging/deb-check` runs it before packing). A program of its own, so that clap_mangen and
//! clap_complete are not in the shipped binary.
//!
//! The pages of the commands are written from the command line's own clap definition
//! (`src/cli/args.rs`, compiled in here as main.rs compiles it), so their options never drift
//! from it, with the sections clap does not know (EXIT STATUS, ENVIRONMENT, FILES, SIGNALS, SEE
//! ALSO) from the tables here; `lotsync.toml(5)`, the config file's page, is written by hand in
//! `packaging/man/` and copied beside them. Built without the `sandbox` feature, as the .deb's
//! binary is, the pages show the command line that binary has. `[package.metadata.deb]` in
//! Cargo.toml takes the files from where it writes them; compressing the man pages is left to
//! cargo-deb.

// The binary's command line, whole: only `args::Args` is used here.
#[allow(dead_code, unused_imports)]
#[path = "../src/cli/mod.rs"]
mod cli;

use anyhow::Context;
use clap::{CommandFactory, Parser};
use clap_complete::Shell;
use clap_mangen::roff::{bold, italic, roman, Inline, Roff};
use std::path::{Path, PathBuf};

/// Writes lotsync's man pages and shell completions (for packaging; see packaging/deb-check).
#[derive(Debug, Parser)]
struct AssetsArgs {
    /// Folder to write into (created if missing): `man/lotsync.1` with a page per subcommand
    /// and `man/lotsync.toml.5`, and `completions/lotsync.bash`, `_lotsync` (zsh) and
    /// `lotsync.fish`.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
}

fn main() -> anyhow::Result<()> {
    generate_assets(AssetsArgs::parse(), cli::args::Args::command())
}

/// The config file's page, `lotsync.toml(5)`.
const CONFIG_PAGE: &str = include_str!("../packaging/man/lotsync.toml.5");

/// Writes the man pages and completions of `cmd` (the whole `lotsync` command line).
fn generate_assets(args: AssetsArgs, cmd: clap::Command) -> anyhow::Result<()> {
    let man = args.dir.join("man");
    let completions = args.dir.join("completions");
    for dir in [&man, &completions] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    write_pages(cmd.clone(), &man)
        .with_context(|| format!("cannot write the man pages into {}", man.display()))?;
    let mut cmd = without_hidden_subcommands(&cmd);
    let name = cmd.get_name().to_string();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd, &name, &completions).with_context(|| {
            format!(
                "cannot write the {shell} completion into {}",
                completions.display()
            )
        })?;
    }
    Ok(())
}

/// One page for lotsync and one per visible subcommand (lotsync-run.1, lotsync-state-export.1),
/// as git does: the first page lists the subcommands, each one's options are on its own page.
/// Then lotsync.toml.5.
fn write_pages(cmd: clap::Command, dir: &Path) -> std::io::Result<()> {
    fn pages(cmd: clap::Command, out: &mut Vec<clap::Command>) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            pages(sub.clone(), out);
        }
        out.push(cmd);
    }
    // Built, the subcommands know their page names (`lotsync-state-export`) and their
    // command lines (`lotsync state export`).
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut all = Vec::new();
    pages(cmd, &mut all);
    for page in all {
        // Every page's footer says the program and its version, not the subcommand's name.
        let man = clap_mangen::Man::new(page.clone())
            .source(format!("lotsync {}", env!("CARGO_PKG_VERSION")))
            .manual("lotsync");
        std::fs::write(dir.join(man.get_filename()), render(&man, &page)?)?;
    }
    std::fs::write(dir.join("lotsync.toml.5"), CONFIG_PAGE)
}

/// A command's page: clap_mangen's title, name, description, options and subcommands, this
/// module's synopsis (with the options' values: `--config FILE`) and the sections after them.
fn render(man: &clap_mangen::Man, cmd: &clap::Command) -> std::io::Result<Vec<u8>> {
    type Piece<'a> = &'a dyn Fn(&mut Vec<u8>) -> std::io::Result<()>;
    let mut synopsis_section = Roff::new();
    synopsis_section.control("SH", ["SYNOPSIS"]);
    synopsis_section.text(synopsis(cmd));
    let has_options = cmd.get_arguments().any(|a| !a.is_hide_set());
    let has_subcommands = cmd.get_subcommands().any(|s| !s.is_hide_set());
    // Only `lotsync` has a version (clap_mangen's section would panic without one).
    let has_version = cmd.get_version().is_some();
    let pieces: [(bool, Piece); 8] = [
        (true, &|w| man.render_title(w)),
        (true, &|w| man.render_name_section(w)),
        (true, &|w| synopsis_section.to_writer(w)),
        (true, &|w| man.render_description_section(w)),
        (has_options, &|w| man.render_options_section(w)),
        (has_subcommands, &|w| man.render_subcommands_section(w)),
        (true, &|w| sections(cmd).to_writer(w)),
        (has_version, &|w| man.render_version_section(w)),
    ];
    // Every render starts with roff's apostrophe preamble; the page needs it once, at its top.
    let preamble = Roff::new().render();
    let mut page = preamble.clone().into_bytes();
    for (wanted, piece) in pieces {
        if wanted {
            let mut rendered = Vec::new();
            piece(&mut rendered)?;
            let body = rendered
                .strip_prefix(preamble.as_bytes())
                .unwrap_or(&rendered);
            page.extend_from_slice(body);
        }
    }
    Ok(page)
}

/// `lotsync status [--config FILE] [--format text|json] ...`: each option with its value, which
/// clap_mangen's synopsis leaves out (`[--config]`).
fn synopsis(cmd: &clap::Command) -> Vec<Inline> {
    let name = cmd.get_bin_name().unwrap_or_else(|| cmd.get_name());
    let mut line = vec![bold(name)];
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let value = value_of(arg);
        line.push(roman(" "));
        if arg.is_positional() {
            let repeated = arg.get_num_args().is_some_and(|n| n.max_values() > 1);
            let text = format!("{value}{}", if repeated { "..." } else { "" });
            if arg.is_required_set() {
                line.push(italic(text));
            } else {
                line.extend([roman("["), italic(text), roman("]")]);
            }
            continue;
        }
        let flag = match (arg.get_long(), arg.get_short()) {
            (Some(long), _) => format!("--{long}"),
            (None, Some(short)) => format!("-{short}"),
            (None, None) => continue,
        };
        if !arg.is_required_set() {
            line.push(roman("["));
        }
        line.push(bold(flag));
        if arg.get_action().takes_values() {
            line.extend([roman(" "), italic(value)]);
        }
        if !arg.is_required_set() {
            line.push(roman("]"));
        }
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        line.extend([roman(" "), italic("COMMAND")]);
    }
    line
}

/// What an argument takes: its possible values (`text|json`), else its value name (`FILE`).
fn value_of(arg: &clap::Arg) -> String {
    let possible: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_owned())
        .collect();
    if !possible.is_empty() && arg.get_action().takes_values() {
        return possible.join("|");
    }
    arg.get_value_names()
        .map(|names| names.join(" "))
        .unwrap_or_else(|| arg.get_id().as_str().to_uppercase())
}

/// One entry of a section: a term in bold and what it means.
type Entry = (&'static str, &'static str);

/// The exit codes every command shares, as the lotsync page lists them.
const EXIT_CODES: &[Entry] = &[
    ("0", "Done."),
    (
        "1",
        "Nothing found: lotsync why of a vehicle the state does not know (see lotsync-why(1)).",
    ),
    (
        "2",
        "Bad input or config, or the state or the service could not be used: the message \
         names the file or key and the reason.",
    ),
    (
        "3",
        "Done, but some vehicles were rejected, held by the safety guard or could not be \
         delivered (sync, reconcile; plan: a file the safety guard would hold). lotsync status \
         exits 0 to 3 as a Nagios plugin does: see lotsync-status(1).",
    ),
];

/// Each page's exit codes (status's are its own text: see [`sections`]).
fn exit_codes(page: &str) -> &'static [Entry] {
    match page {
        "lotsync-run" => &[
            (
                "0",
                "Stopped by SIGTERM or SIGINT, the work in hand finished or left queued.",
            ),
            (
                "2",
                "It could not start (the config, an inbox that does not exist, the state held \
                 by another lotsync, the metrics address taken) or stopped on an error; the \
                 last log line says which.",
            ),
        ],
        "lotsync-validate" => &[
            ("0", "The config and what it points to can be used."),
            ("2", "Problems, each listed on stderr with its key."),
        ],
        "lotsync-check" => &[
            (
                "0",
                "Every file could be read (records with problems are listed, not failures).",
            ),
            (
                "2",
                "A file could not be read, or a profile or argument is wrong.",
            ),
        ],
        "lotsync-plan" => &[
            ("0", "The plan is shown; nothing is sent or queued."),
            ("2", "Bad input or config, or the state could not be read."),
            ("3", "The safety guard would hold a file."),
        ],
        "lotsync-sync" => &[
            ("0", "Every change was delivered."),
            (
                "2",
                "Bad input or config, the state could not be opened, or delivery stopped on a \
                 fatal answer (a refused token).",
            ),
            (
                "3",
                "Some vehicles were rejected, held by the safety guard or could not be \
                 delivered (they stay queued for the next run).",
            ),
        ],
        "lotsync-reconcile" => &[
            ("0", "Every repair was delivered."),
            (
                "2",
                "It could not reconcile (config, state, the service's list).",
            ),
            (
                "3",
                "Some repairs were refused or stay queued; the nightly unit counts this as done.",
            ),
        ],
        "lotsync-release" => &[
            (
                "0",
                "The held file was released: delivered and archived by the daemon, or queued \
                 for its next start.",
            ),
            ("2", "No such held file, or bad config."),
            (
                "3",
                "Released, but some of its vehicles were rejected or are not delivered yet.",
            ),
        ],
        "lotsync-why" => &[
            ("0", "The car is known: its story is printed."),
            (
                "1",
                "lotsync knows no car with that VIN or stock number (where it looked is printed).",
            ),
            (
                "2",
                "Bad config, an unknown feed, or the state could not be read.",
            ),
        ],
        "lotsync-state" | "lotsync-state-export" | "lotsync-state-backup" => &[
            ("0", "Done."),
            (
                "2",
                "The config or the state could not be read, or the backup's file exists.",
            ),
        ],
        _ => EXIT_CODES,
    }
}

/// The environment every command reads.
const ENVIRONMENT: &[Entry] = &[
    (
        "LOTSYNC_LOG_FORMAT",
        "How log lines are written: auto (the journal when systemd connected stderr to it, \
         else text), text, journal or json. Wins over [daemon] log_format.",
    ),
    (
        "RUST_LOG",
        "The log level or a tracing filter (warn, debug, lotsync=debug). Wins over [daemon] \
         log_level.",
    ),
];

/// What the commands that take --config read besides.
const CONFIG_ENVIRONMENT: &[Entry] = &[
    (
        "LOTSYNC_CONFIG",
        "The config file when --config is not given (else /etc/lotsync/lotsync.toml).",
    ),
    (
        "CREDENTIALS_DIRECTORY",
        "Set by systemd (LoadCredential=): with neither api.token_file nor api.token_env in \
         the config, the API token is read from its file api-token. The token is never printed \
         or logged.",
    ),
    (
        "the variable api.token_env names",
        "The API token, when the config names a variable (run by hand, outside systemd).",
    ),
];

/// The files of the commands that take --config, as the package lays them out.
const FILES: &[Entry] = &[
    (
        "/etc/lotsync/lotsync.toml",
        "The config (lotsync.toml(5)); an organization run as lotsync@NAME has \
         /etc/lotsync/NAME.toml.",
    ),
    (
        "/etc/lotsync/api-token",
        "The API token, readable by root only; systemd hands it over as a credential.",
    ),
    (
        "/etc/lotsync/profiles/",
        "The column profiles feeds name; samples in /usr/share/lotsync/profiles/.",
    ),
    (
        "/var/lib/lotsync/",
        "The state ([state] dir): what the service holds, the queue of operations, the held \
         files' plans. Group lotsync may read it.",
    ),
    (
        "/run/lotsync/lotsync.sock",
        "The running daemon's control socket ([daemon] socket), for the user and group lotsync.",
    ),
    (
        "/var/spool/lotsync/FEED/",
        "A feed's inbox, written by the DMS's account as a member of group lotsync-dms; lotsync \
         moves each file into processing/, then archive/ (with its report), held/ or failed/.",
    ),
];

/// Signals the daemon acts on.
const DAEMON_SIGNALS: &[Entry] = &[
    (
        "SIGTERM, SIGINT",
        "Stop: the daemon finishes or puts back what it is doing and exits within 10 seconds; \
         what is not delivered stays queued in the state.",
    ),
    (
        "SIGHUP",
        "Read the config again (systemctl reload runs lotsync validate first). A config that \
         does not load is logged and the daemon keeps the one it has.",
    ),
];

/// Signals a one-shot delivery acts on.
const DELIVERY_SIGNALS: &[Entry] = &[(
    "SIGINT, SIGTERM",
    "Stop delivering: what is not answered stays queued in the state, for the next sync or the \
     daemon (exit 3).",
)];

/// Every section after OPTIONS (or COMMANDS) of `cmd`'s page.
fn sections(cmd: &clap::Command) -> Roff {
    let page = cmd.get_display_name().unwrap_or_else(|| cmd.get_name());
    let takes_config = cmd.get_arguments().any(|a| a.get_id() == "config");
    let mut roff = Roff::new();

    roff.control("SH", ["EXIT STATUS"]);
    match (page, cmd.get_after_help()) {
        // status's codes are its --help's closing text (its one source): kept as written.
        ("lotsync-status", Some(codes)) => {
            roff.control("nf", [] as [&str; 0]);
            for line in codes.to_string().lines() {
                roff.text([roman(line)]);
            }
            roff.control("fi", [] as [&str; 0]);
        }
        _ => entries(&mut roff, exit_codes(page)),
    }

    roff.control("SH", ["ENVIRONMENT"]);
    if takes_config || page == "lotsync" {
        entries(&mut roff, CONFIG_ENVIRONMENT);
    }
    entries(&mut roff, ENVIRONMENT);
    if page == "lotsync-run" {
        entries(
            &mut roff,
            &[(
                "NOTIFY_SOCKET, WATCHDOG_USEC",
                "Set by systemd (Type=notify, WatchdogSec=): the daemon says READY, STATUS and \
                 WATCHDOG there.",
            )],
        );
    }

    if takes_config || page == "lotsync" {
        roff.control("SH", ["FILES"]);
        entries(&mut roff, FILES);
        if matches!(page, "lotsync" | "lotsync-run" | "lotsync-status") {
            entries(
                &mut roff,
                &[(
                    "/usr/share/lotsync/grafana/lotsync.json",
                    "A Grafana dashboard over the daemon's Prometheus metrics ([daemon] metrics).",
                )],
            );
        }
    }

    let signals = match page {
        "lotsync" | "lotsync-run" => DAEMON_SIGNALS,
        "lotsync-sync" | "lotsync-reconcile" => DELIVERY_SIGNALS,
        _ => &[],
    };
    if !signals.is_empty() {
        roff.control("SH", ["SIGNALS"]);
        entries(&mut roff, signals);
    }

    roff.control("SH", ["SEE ALSO"]);
    let mut see = Vec::new();
    for other in see_also(page) {
        if !see.is_empty() {
            see.push(roman(", "));
        }
        let (name, section) = other.split_once('(').unwrap_or((other, ""));
        see.extend([bold(name), roman(format!("({section}"))]);
    }
    roff.text(see);
    roff.control("PP", [] as [&str; 0]);
    roff.text([roman(
        "/usr/share/doc/lotsync/README.md and /usr/share/doc/lotsync/systemd.md (installing, \
         the token, the inboxes and their groups, monitoring).",
    )]);
    roff
}

/// Each page's neighbours.
fn see_also(page: &str) -> Vec<&'static str> {
    let mut pages = match page {
        "lotsync" => vec![
            "lotsync-run(1)",
            "lotsync-status(1)",
            "lotsync-check(1)",
            "lotsync-sync(1)",
        ],
        "lotsync-run" => vec![
            "lotsync-status(1)",
            "lotsync-validate(1)",
            "lotsync-release(1)",
            "lotsync-reconcile(1)",
            "systemctl(1)",
            "journalctl(1)",
        ],
        "lotsync-status" => vec!["lotsync-run(1)", "lotsync-release(1)"],
        "lotsync-validate" => vec!["lotsync-run(1)"],
        "lotsync-check" => vec!["lotsync-plan(1)", "lotsync-sync(1)"],
        "lotsync-plan" => vec!["lotsync-check(1)", "lotsync-sync(1)", "lotsync-release(1)"],
        "lotsync-sync" => vec!["lotsync-plan(1)", "lotsync-run(1)"],
        "lotsync-reconcile" => vec!["lotsync-run(1)", "lotsync-state-export(1)"],
        "lotsync-release" => vec!["lotsync-status(1)", "lotsync-plan(1)"],
        "lotsync-why" => vec!["lotsync-status(1)", "lotsync-reconcile(1)"],
        "lotsync-state" | "lotsync-state-export" | "lotsync-state-backup" => vec![
            "lotsync-state-export(1)",
            "lotsync-state-backup(1)",
            "lotsync-reconcile(1)",
        ],
        _ => vec![],
    };
    pages.retain(|p| !p.starts_with(&format!("{page}(")));
    if page != "lotsync" {
        pages.insert(0, "lotsync(1)");
    }
    if page != "lotsync-check" {
        pages.push("lotsync.toml(5)");
    }
    pages
}

/// `.TP` entries: the term in bold, then what it means.
fn entries(roff: &mut Roff, list: &[Entry]) {
    for (term, meaning) in list {
        roff.control("TP", [] as [&str; 0]);
        roff.text([bold(*term)]);
        roff.text([roman(*meaning)]);
    }
}

/// `cmd` less its hidden subcommands (`demo` and `sandbox` in a build without the sandbox):
/// clap_mangen leaves them out by itself, but clap_complete would offer them. Only what
/// completion reads is kept: the arguments and the visible subcommands, under the name and
/// version args.rs gives `lotsync`.
fn without_hidden_subcommands(cmd: &clap::Command) -> clap::Command {
    clap::Command::new("lotsync")
        .version(env!("CARGO_PKG_VERSION"))
        .args(cmd.get_arguments().cloned())
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_pages_and_completions_without_the_hidden_subcommand() {
        let cmd = clap::Command::new("lotsync")
            .version("1.0")
            .subcommand(clap::Command::new("check").about("Read exports"))
            .subcommand(clap::Command::new("secret").hide(true));
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_owned();
        generate_assets(AssetsArgs { dir: dir.clone() }, cmd).unwrap();

        let read = |path: &str| std::fs::read_to_string(dir.join(path)).unwrap();
        assert!(read("man/lotsync.1").contains("lotsync\\-check(1)"));
        assert!(read("man/lotsync-check.1").contains("Read exports"));
        assert!(!dir.join("man/lotsync-secret.1").exists());
        for file in ["lotsync.bash", "_lotsync", "lotsync.fish"] {
            let completion = read(&format!("completions/{file}"));
            assert!(completion.contains("check"), "{file}");
            assert!(!completion.contains("secret"), "{file}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Before, the pages were clap's stubs, without EXIT STATUS (but status's), ENVIRONMENT,
    /// FILES, SIGNALS or SEE ALSO, no page for the config file, and `[--config]` without its
    /// value in the synopsis.
    #[test]
    fn lotsyncs_pages_have_the_sections_an_admin_looks_for() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_owned();
        let args = AssetsArgs { dir: dir.clone() };
        generate_assets(args, cli::args::Args::command()).unwrap();
        let man = dir.join("man");
        let mut names: Vec<String> = std::fs::read_dir(&man)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert!(names.contains(&"lotsync.toml.5".to_owned()), "{names:?}");
        assert!(
            names.contains(&"lotsync-state-export.1".to_owned()),
            "{names:?}"
        );
        let page = |name: &str| std::fs::read_to_string(man.join(name)).unwrap();
        let heading = |text: &str, section: &str| {
            text.contains(&format!(".SH \"{section}\""))
                || text.contains(&format!(".SH {section}\n"))
        };

        let mut with_config = 0;
        for name in names.iter().filter(|n| n.ends_with(".1")) {
            let text = page(name);
            for section in ["NAME", "SYNOPSIS", "EXIT STATUS", "ENVIRONMENT", "SEE ALSO"] {
                assert!(heading(&text, section), "{name}: no {section}\n{text}");
            }
            assert!(
                text.contains("RUST_LOG") && text.contains("LOTSYNC_LOG_FORMAT"),
                "{name}"
            );
            // One preamble, at the top.
            assert_eq!(text.matches(".ds Aq").count(), 2, "{name}\n{text}");
            // Every page it points to is written, or is another package's.
            for (at, _) in text.match_indices("\\fR(") {
                let before = &text[..at];
                let start = before.rfind("\\fB").map_or(0, |i| i + 3);
                let target = before[start..].replace("\\-", "-");
                let section = &text[at + 4..at + 5];
                let ours = target.starts_with("lotsync");
                assert!(
                    !ours || names.contains(&format!("{target}.{section}")),
                    "{name} points to {target}({section}), which is not written"
                );
            }
            let section = |heading: &str| -> &str {
                let Some(at) = text.find(&format!(".SH {heading}\n")) else {
                    return "";
                };
                let rest = &text[at + 4..];
                &rest[..rest.find(".SH").unwrap_or(rest.len())]
            };
            if section("OPTIONS").contains("\\fB\\-\\-config\\fR") {
                assert!(heading(&text, "FILES"), "{name}: no FILES");
                assert!(text.contains("LOTSYNC_CONFIG"), "{name}");
                assert!(text.contains("CREDENTIALS_DIRECTORY"), "{name}");
                let synopsis = section("SYNOPSIS");
                assert!(
                    synopsis.contains("\\fB\\-\\-config\\fR \\fIFILE\\fR"),
                    "{name}: {synopsis}"
                );
                with_config += 1;
            }
        }
        // run, status, validate, plan, sync, reconcile, release, state export (check takes
        // one too, for its profiles).
        assert!(with_config >= 8, "{with_config} pages with --config");
        let run = page("lotsync-run.1");
        assert!(heading(&run, "SIGNALS") && run.contains("SIGHUP"), "{run}");
        assert!(run.contains("lotsync.toml\\fR(5)"), "{run}");
        let status = page("lotsync-status.1");
        assert!(status.contains("3 UNKNOWN"), "{status}");
        assert!(
            !heading(&status, "EXTRA"),
            "the codes are said once: {status}"
        );
        let sync = page("lotsync-sync.1");
        assert!(heading(&sync, "SIGNALS"), "{sync}");
        let config = page("lotsync.toml.5");
        assert!(config.starts_with(".\\\"") && config.contains(".TH LOTSYNC.TOML 5"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
