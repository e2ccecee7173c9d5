//! Where log lines go and how they look: text for a person at a terminal, the journal's own
//! protocol under systemd (a priority and a field per value, one entry per event), or JSON
//! lines for a log store. Owns choosing and installing the subscriber; what is logged is each
//! stage's business.

use lotsync::config::LogFormat;
use std::io::{IsTerminal, Write};
use std::sync::OnceLock;
use tracing::Level;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// The environment variable that overrides the format (`auto`, `text`, `journal`, `json`).
pub const FORMAT_VAR: &str = "LOTSYNC_LOG_FORMAT";

/// How logging was set up, for those who write to stderr themselves (the last error).
static INSTALLED: OnceLock<Installed> = OnceLock::new();

/// What [`init`] installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installed {
    Text,
    /// journald's socket.
    Journal,
    /// stderr, which systemd reads into the journal, with a `<N>` priority before each line
    /// (journald's socket could not be reached).
    JournalStream,
    Json,
}

/// Installs the subscriber: level from `RUST_LOG`, else `default_level`; format from
/// `LOTSYNC_LOG_FORMAT`, else `format`. The crate of each line is shown from `debug` on, so
/// that a dependency's lines say whose they are.
pub fn init(default_level: &str, format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let show_target = filter
        .max_level_hint()
        .is_some_and(|level| level >= tracing::level_filters::LevelFilter::DEBUG);
    let from_env = std::env::var(FORMAT_VAR)
        .ok()
        .map(|f| f.parse::<LogFormat>());
    let format = match &from_env {
        Some(Ok(f)) => *f,
        _ => format,
    };
    let installed = match resolve(format) {
        LogFormat::Json => {
            let _ = tracing_subscriber::fmt()
                .json()
                .flatten_event(true)
                .with_current_span(false)
                .with_span_list(false)
                .with_target(show_target)
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .try_init();
            Installed::Json
        }
        LogFormat::Journal => match tracing_journald::layer() {
            Ok(journal) => {
                let journal = journal
                    .with_priority_mappings(journal_priorities())
                    .with_field_prefix(None)
                    .with_syslog_identifier("lotsync".into());
                let _ = tracing_subscriber::registry()
                    .with(filter)
                    .with(journal)
                    .try_init();
                Installed::Journal
            }
            Err(_) => {
                // No socket (a container): the stream systemd reads, each line with its
                // priority and without our time (the journal has its own).
                let _ = tracing_subscriber::fmt()
                    .without_time()
                    .with_ansi(false)
                    .with_level(false)
                    .with_target(show_target)
                    .with_env_filter(filter)
                    .with_writer(PrioritizedStderr)
                    .try_init();
                Installed::JournalStream
            }
        },
        LogFormat::Text | LogFormat::Auto => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal())
                .with_target(show_target)
                .try_init();
            Installed::Text
        }
    };
    let _ = INSTALLED.set(installed);
    if let Some(Err(reason)) = from_env {
        tracing::warn!(variable = FORMAT_VAR, %reason, "not a log format; logging as configured");
    }
}

/// What [`init`] installed; text when it was not called.
pub fn installed() -> Installed {
    INSTALLED.get().copied().unwrap_or(Installed::Text)
}

/// `auto` made definite: the journal when stderr is the stream systemd connected to it.
fn resolve(format: LogFormat) -> LogFormat {
    match format {
        LogFormat::Auto if stderr_is_journal() => LogFormat::Journal,
        LogFormat::Auto => LogFormat::Text,
        other => other,
    }
}

/// systemd sets `JOURNAL_STREAM` to the device and inode of the stream it connected stdout or
/// stderr to; stderr is the journal when they are its own (not inherited by a shell that
/// redirected it).
pub fn stderr_is_journal() -> bool {
    let Ok(stream) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    stderr_identity().is_some_and(|(dev, ino)| journal_stream_is(&stream, dev, ino))
}

/// `JOURNAL_STREAM`'s `device:inode` names this one.
fn journal_stream_is(value: &str, dev: u64, ino: u64) -> bool {
    let Some((d, i)) = value.trim().split_once(':') else {
        return false;
    };
    d.parse::<u64>().ok() == Some(dev) && i.parse::<u64>().ok() == Some(ino)
}

#[cfg(unix)]
fn stderr_identity() -> Option<(u64, u64)> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let fd = std::io::stderr().as_fd().try_clone_to_owned().ok()?;
    let meta = std::fs::File::from(fd).metadata().ok()?;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn stderr_identity() -> Option<(u64, u64)> {
    None
}

/// The syslog priority of each level, the one mapping for the journal's socket and for the
/// `<N>` journald reads at the start of a stderr line: error 3 (err), warn 4 (warning), info
/// 6 (info), debug and trace 7 (debug). (tracing-journald's own default files info at 5,
/// notice, and debug at 6.)
fn priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// [`priority`] for the journal's socket.
fn journal_priorities() -> tracing_journald::PriorityMappings {
    use tracing_journald::Priority;
    tracing_journald::PriorityMappings {
        error: Priority::Error,
        warn: Priority::Warning,
        info: Priority::Informational,
        debug: Priority::Debug,
        trace: Priority::Debug,
    }
}

/// A line that says a problem, for stderr: with the priority `err` first when stderr is
/// the journal (`lotsync validate` as ExecStartPre and ExecReload), so that `journalctl -p
/// err` shows why a start or a reload failed; as it is elsewhere.
pub fn problem_line(text: &str) -> String {
    match stderr_is_journal() {
        true => one_entry(priority(&Level::ERROR), text),
        false => format!("{}\n", text.trim_end_matches('\n')),
    }
}

/// stderr, each event one line with its priority first.
struct PrioritizedStderr;

impl<'a> MakeWriter<'a> for PrioritizedStderr {
    type Writer = PrioritizedLine;

    fn make_writer(&'a self) -> Self::Writer {
        PrioritizedLine {
            priority: 6,
            line: Vec::new(),
        }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        PrioritizedLine {
            priority: priority(meta.level()),
            line: Vec::new(),
        }
    }
}

/// One event, gathered and written as one line when dropped.
struct PrioritizedLine {
    priority: u8,
    line: Vec<u8>,
}

impl Write for PrioritizedLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for PrioritizedLine {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.line);
        let line = one_entry(self.priority, &text);
        // Nowhere to say that stderr failed.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

/// `<N>text` on one line: journald makes an entry of each line, so a line break inside the
/// text is written as `\n`.
pub fn one_entry(priority: u8, text: &str) -> String {
    let text = text.trim_end_matches('\n');
    format!("<{priority}>{}\n", text.replace('\n', "\\n"))
}

/// Says the error that ends the process: to the journal as one entry at priority `err`, else
/// on stderr as it always was.
pub fn last_error(message: &str) {
    match installed() {
        // The cause in the message too: `journalctl -u lotsync` and `systemctl status` show
        // only the message; the field stays for those who filter on it.
        Installed::Journal | Installed::Json => {
            tracing::error!(error = message, "lotsync stopped: {message}")
        }
        Installed::JournalStream => {
            let _ = std::io::stderr()
                .lock()
                .write_all(one_entry(3, &format!("lotsync: {message}")).as_bytes());
        }
        Installed::Text => eprintln!("lotsync: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_stream_names_a_device_and_inode() {
        assert!(journal_stream_is("8:12345", 8, 12345));
        assert!(!journal_stream_is("8:12345", 8, 12346));
        assert!(!journal_stream_is("garbage", 8, 12345));
        assert!(!journal_stream_is("", 0, 0));
    }

    /// One mapping: the journal's socket files each level at the priority the `<N>` prefix
    /// gives it (tracing-journald's default put info at 5 and debug at 6).
    #[test]
    fn the_journal_and_stderr_agree_on_priorities() {
        let journal = journal_priorities();
        for (level, mapped) in [
            (Level::ERROR, journal.error),
            (Level::WARN, journal.warn),
            (Level::INFO, journal.info),
            (Level::DEBUG, journal.debug),
            (Level::TRACE, journal.trace),
        ] {
            // journald's priorities are written as the ASCII digit.
            assert_eq!(mapped as u8 - b'0', priority(&level), "{level}");
        }
        assert_eq!(priority(&Level::INFO), 6);
    }

    #[test]
    fn an_entry_is_one_line_with_its_priority() {
        assert_eq!(one_entry(3, "bad\nconfig\n"), "<3>bad\\nconfig\n");
        assert_eq!(priority(&Level::WARN), 4);
    }

    #[test]
    fn formats_are_read_as_written() {
        assert_eq!("JSON".parse::<LogFormat>(), Ok(LogFormat::Json));
        assert_eq!(" journal ".parse::<LogFormat>(), Ok(LogFormat::Journal));
        assert!("syslog".parse::<LogFormat>().is_err());
    }
}
