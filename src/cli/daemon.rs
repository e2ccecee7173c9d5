//! `lotsync run` (the daemon), `lotsync status` and `lotsync validate`, and the way the
//! control commands reach a running daemon (or work on the state when none runs).

use super::setup::{ask_daemon, open, ConfigArg};
use anyhow::Context;
use lotsync::config::Config;
use lotsync::daemon::control::{Reply, Request};
use lotsync::daemon::{status, Daemon, Signal};
use lotsync::outcome::CommandOutcome;
use lotsync::text::shown_path;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `lotsync run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Create the feeds' inboxes that do not exist, instead of refusing to start (the
    /// package's tmpfiles unit creates its own).
    #[arg(long)]
    pub create_dirs: bool,
}

/// What the exit codes of `lotsync status` mean (the Nagios plugin convention).
const STATUS_EXIT_CODES: &str = "\
Exit codes (Nagios plugin convention; the first line says why, e.g.
`LOTSYNC CRITICAL - delivery stopped: the service did not accept the API token (401) since 06:12 UTC`):
  0 OK        nothing below
  1 WARNING   a file held by the safety guard; the service asked to wait, or fails every
              request (delivery slowed, not stopped); a feed's or the daemon's last error;
              no file yet for a feed (without a daemon)
  2 CRITICAL  no daemon runs while operations are queued or files wait in an inbox, and
              one is meant to (the config has [daemon], or its unit is enabled); delivery stopped (the service refused the token: 401/403, or another fatal
              answer; or delivery gave up after give_up_after_secs); a file in failed/;
              a feed's newest delivered file taken longer ago than --stale-after (with a
              daemon and no file yet: lotsync started longer ago than that)
  3 UNKNOWN   the status cannot be read (config, state, daemon's answer), or no daemon
              runs and the state has no file yet";

/// Arguments of `lotsync status`.
#[derive(Debug, clap::Args)]
#[command(after_help = STATUS_EXIT_CODES)]
pub struct StatusArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// `text`: a one-line verdict, then the details; `json`: the details with every time in
    /// RFC 3339 (UTC) and the verdict under `check`.
    #[arg(long, value_enum, default_value_t = StatusFormat::Text)]
    pub format: StatusFormat,
    /// CRITICAL when a feed's newest delivered file was taken longer ago than this
    /// (`93600`, `90m`, `26h`, `2d`, `1d2h`; plain numbers are seconds). The default lets a
    /// nightly export be a few hours late.
    #[arg(long, value_name = "DURATION", default_value = "26h", value_parser = duration_arg)]
    pub stale_after: Duration,
}

/// Arguments of `lotsync validate`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// Also ask the service once (one authenticated list request of one vehicle): proves the
    /// URL, the token and the organization.
    #[arg(long)]
    pub online: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatusFormat {
    Text,
    Json,
}

/// `validate --online`: one list request with the config's token; exit 2 when refused or
/// unreachable, with the service's reason and what to check.
fn online(config: &Config, out: &mut impl Write) -> anyhow::Result<CommandOutcome> {
    let client = config.api.client()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match runtime.block_on(client.probe()) {
        Ok(answer) => {
            writeln!(
                out,
                "online: {} answered {}: the service takes the token for organization {} ({})",
                answer.call,
                answer.status,
                config.api.organization_id,
                if answer.value {
                    "it has vehicles"
                } else {
                    "it has no vehicle yet"
                }
            )?;
            Ok(CommandOutcome::Done)
        }
        Err(e) => {
            out.flush()?;
            std::io::stderr()
                .lock()
                .write_all(super::logging::problem_line(&format!("online: {e}")).as_bytes())?;
            Ok(CommandOutcome::Failed)
        }
    }
}

/// Every feed's inbox is there, or is created when asked: a missing one is a wrong path more
/// often than a folder to make, and one made by lotsync may not be where the DMS writes.
fn inboxes_exist(config: &Config, create: bool) -> anyhow::Result<()> {
    let mut missing = Vec::new();
    for feed in &config.feeds {
        if feed.inbox.is_dir() {
            continue;
        }
        if create {
            std::fs::create_dir_all(&feed.inbox).with_context(|| {
                format!(
                    "feed {}: cannot create the inbox {}",
                    feed.name,
                    shown_path(&feed.inbox)
                )
            })?;
            tracing::info!(feed = %feed.name, inbox = %feed.inbox.display(), "inbox created");
        } else {
            missing.push(format!("feed {}: {}", feed.name, shown_path(&feed.inbox)));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "no such inbox: {}; create it (writable by lotsync's user), or start with \
         --create-dirs to have lotsync create it",
        missing.join(", ")
    )
}

/// `lotsync run`: until SIGTERM or Ctrl-C (exit 0); SIGHUP reloads the config. Exit 2 when
/// it cannot start (the message says why).
pub fn run(args: RunArgs) -> anyhow::Result<CommandOutcome> {
    let path = args.config.config;
    let config = Config::load(&path);
    // The config's log level, unless RUST_LOG says otherwise; a config that cannot be read is
    // said at the default level.
    match &config {
        Ok(c) => super::logging::init(&c.daemon.log_level, c.daemon.log_format),
        Err(_) => super::init_logging("info"),
    }
    let config = Arc::new(config?);
    inboxes_exist(&config, args.create_dirs)?;
    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(async {
        // Listening for signals before anything else: a SIGTERM during the start (while the
        // state opens) stops the daemon cleanly once it is up, instead of killing it.
        let listening = Signals::listen()?;
        let (daemon, listener) = Daemon::open(config)?;
        let (signals_tx, signals) = tokio::sync::mpsc::channel(4);
        tokio::spawn(listening.forward(signals_tx));
        daemon.run(listener, path, signals).await?;
        anyhow::Ok(())
    });
    // Work still on the blocking pool (a plan being committed) is atomic: it may be left.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result.map(|()| CommandOutcome::Done)
}

/// SIGTERM and SIGINT stop, SIGHUP reloads.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Starts listening (from here on the signals no longer end the process).
    fn listen() -> anyhow::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        let listen = |kind| signal(kind).context("cannot listen for signals");
        Ok(Signals {
            term: listen(SignalKind::terminate())?,
            int: listen(SignalKind::interrupt())?,
            hup: listen(SignalKind::hangup())?,
        })
    }

    async fn forward(mut self, to: tokio::sync::mpsc::Sender<Signal>) {
        loop {
            let signal = tokio::select! {
                _ = self.term.recv() => Signal::Stop,
                _ = self.int.recv() => Signal::Stop,
                _ = self.hup.recv() => Signal::Reload,
            };
            if to.send(signal).await.is_err() {
                return;
            }
        }
    }
}

/// `lotsync status`: from the running daemon, else from the state, with a verdict for a
/// monitoring system first and as the exit code (see [`STATUS_EXIT_CODES`]). Whatever stops
/// it from reading the status is UNKNOWN (3), said on stdout too, where monitoring reads.
pub fn status(args: StatusArgs) -> anyhow::Result<u8> {
    let format = args.format;
    let read = read_status(&args);
    let mut out = super::stdout();
    let (status, check) = match read {
        Ok(Ok(status)) => {
            let check = status.check(lotsync::clock::UtcTime::now(), args.stale_after);
            (status, check)
        }
        Ok(Err(reply)) => {
            let check = status::Check::new(
                status::UNKNOWN,
                &one_line(&format!("the daemon: {}", reply.text)),
            );
            return unknown(&mut out, format, &check, &reply.text);
        }
        Err(e) => {
            let check = status::Check::new(status::UNKNOWN, &one_line(&format!("{e:#}")));
            return unknown(&mut out, format, &check, &format!("{e:#}"));
        }
    };
    match format {
        StatusFormat::Text => write!(out, "{}\n{}", check.summary, status.render())?,
        StatusFormat::Json => {
            let shown = StatusShown {
                status: &status,
                check: &check,
            };
            writeln!(out, "{}", serde_json::to_string_pretty(&shown)?)?;
        }
    }
    Ok(check.code)
}

/// The status as JSON: its figures and the verdict.
#[derive(serde::Serialize)]
struct StatusShown<'a> {
    #[serde(flatten)]
    status: &'a status::DaemonStatus,
    check: &'a status::Check,
}

/// A status that cannot be read: the verdict on stdout, the whole message on stderr.
fn unknown(
    out: &mut impl Write,
    format: StatusFormat,
    check: &status::Check,
    message: &str,
) -> anyhow::Result<u8> {
    match format {
        StatusFormat::Text => writeln!(out, "{}", check.summary)?,
        StatusFormat::Json => writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "check": check }))?
        )?,
    }
    out.flush()?;
    eprintln!("lotsync: {}", message.trim_end());
    Ok(check.code)
}

/// The first line of a message, for a one-line summary.
fn one_line(text: &str) -> String {
    text.trim().lines().next().unwrap_or_default().to_owned()
}

/// The status from the running daemon, else from the state; the daemon's answer when it
/// could not give one.
fn read_status(args: &StatusArgs) -> anyhow::Result<Result<status::DaemonStatus, Reply>> {
    let config = Config::load(&args.config.config)?;
    let asked = std::time::Instant::now();
    let status = loop {
        match ask_daemon(&config, &Request::Status, Some(Duration::from_secs(10)))? {
            Some(Reply {
                status: Some(status),
                ..
            }) => break status,
            Some(reply) => return Ok(Err(reply)),
            None => {}
        }
        match open(&config, lotsync::state::Holder::Reader("status")) {
            Ok(outbox) => {
                // A quota the last delivery found spent, until its reset.
                let quota = (outbox.state().quota_until()?)
                    .filter(|until| *until > lotsync::clock::UtcTime::now());
                let delivery = quota.map(|until| lotsync::upload::DeliveryCondition {
                    waiting_until: Some(until),
                    waiting_for: Some(lotsync::api::WaitReason::Quota.header().to_owned()),
                    ..Default::default()
                });
                let mut status = status::collect(&config, &outbox, None, None, delivery)?;
                // Nothing answered: is a daemon meant to serve this state?
                status.daemon_expected |= status::unit_enabled(
                    &args.config.config,
                    std::path::Path::new("/etc/systemd/system"),
                );
                break status;
            }
            // The daemon is starting (it holds the state, its socket is not up yet): ask it
            // again in a moment.
            Err(e) if starting_daemon(&e) && asked.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e),
        }
    };
    Ok(Ok(status))
}

/// A duration as people write it: `93600` (seconds), `90s`, `90m`, `26h`, `2d`, `1d2h`.
fn duration_arg(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    match text.parse::<u64>() {
        Ok(secs) => Ok(Duration::from_secs(secs)),
        Err(_) => humantime::parse_duration(text).map_err(|_| {
            format!("{text:?} is not a duration: write seconds (93600) or a number with a unit (26h, 90m, 1d2h)")
        }),
    }
}

/// Whether opening the state failed because `lotsync run` holds it.
fn starting_daemon(error: &anyhow::Error) -> bool {
    matches!(
        error.downcast_ref::<lotsync::state::StateError>(),
        Some(lotsync::state::StateError::InUse { command: Some(c), .. }) if c == "run"
    )
}

/// `lotsync validate`: every problem of the config at once; done or failed.
pub fn validate(args: ValidateArgs) -> anyhow::Result<CommandOutcome> {
    let path = &args.config.config;
    let problems = lotsync::config::validate(path);
    let mut out = super::stdout();
    if problems.is_empty() {
        let config = Config::load(path)?;
        writeln!(
            out,
            "{}: valid ({} feed{}, service {}, organization {})",
            path.display(),
            config.feeds.len(),
            if config.feeds.len() == 1 { "" } else { "s" },
            config.api.base_url,
            config.api.organization_id
        )?;
        if args.online {
            return online(&config, &mut out);
        }
        return Ok(CommandOutcome::Done);
    }
    out.flush()?;
    // At priority err under systemd (ExecStartPre, ExecReload): `journalctl -p err` shows them.
    let line = super::logging::problem_line;
    let mut err = std::io::stderr().lock();
    err.write_all(
        line(&format!(
            "{}: {} problem{}:",
            shown_path(path),
            problems.len(),
            if problems.len() == 1 { "" } else { "s" }
        ))
        .as_bytes(),
    )?;
    for p in &problems {
        err.write_all(line(&format!("  {p}")).as_bytes())?;
    }
    Ok(CommandOutcome::Failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_after_reads_humane_durations() {
        for (text, secs) in [
            ("93600", 93_600),
            ("90s", 90),
            ("90m", 5400),
            ("26h", 93_600),
            ("2d", 172_800),
            ("1d2h", 93_600),
            ("1.5h", 5400),
            ("90min", 5400),
        ] {
            assert_eq!(duration_arg(text), Ok(Duration::from_secs(secs)), "{text}");
        }
        for bad in ["", "h", "26x", "26h5", "-3"] {
            assert!(duration_arg(bad).is_err(), "{bad}");
        }
    }
}
