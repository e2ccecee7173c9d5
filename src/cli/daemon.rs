//! `lotsync run` (the daemon), `lotsync status` and `lotsync validate`, and the way the
//! control commands reach a running daemon (or work on the state when none runs).

use super::plan::ConfigArg;
use super::EXIT_BAD_INPUT;
use crate::config::Config;
use crate::daemon::control::{self, Reply, Request};
use crate::daemon::{status, Daemon, Signal};
use crate::text::shown_path;
use anyhow::Context;
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

/// Arguments of `lotsync status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    #[arg(long, value_enum, default_value_t = StatusFormat::Text)]
    pub format: StatusFormat,
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
fn online(config: &Config, out: &mut impl Write) -> anyhow::Result<u8> {
    let token = config.api.load_token()?;
    let client = crate::api::ApiClient::new(config.api.client_settings(token))?;
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
            Ok(0)
        }
        Err(e) => {
            out.flush()?;
            writeln!(std::io::stderr().lock(), "online: {e}")?;
            Ok(EXIT_BAD_INPUT)
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
pub fn run(args: RunArgs) -> anyhow::Result<u8> {
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
    result.map(|()| 0)
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

/// Asks the daemon the config names; `None` when none runs.
pub(super) fn ask_daemon(
    config: &Config,
    request: &Request,
    timeout: Option<Duration>,
) -> anyhow::Result<Option<Reply>> {
    Ok(control::ask(&config.daemon.socket, request, timeout)?)
}

/// Prints a daemon's answer and returns its exit code.
pub(super) fn print_reply(reply: &Reply) -> anyhow::Result<u8> {
    let mut out = std::io::stdout().lock();
    if reply.exit == EXIT_BAD_INPUT {
        out.flush()?;
        eprintln!("lotsync: {}", reply.text.trim_end());
    } else {
        writeln!(out, "{}", reply.text.trim_end())?;
    }
    Ok(reply.exit)
}

/// `lotsync status`: from the running daemon, else from the state.
pub fn status(args: StatusArgs) -> anyhow::Result<u8> {
    let config = Config::load(&args.config.config)?;
    let asked = std::time::Instant::now();
    let status = loop {
        match ask_daemon(&config, &Request::Status, Some(Duration::from_secs(10)))? {
            Some(Reply {
                status: Some(status),
                ..
            }) => break status,
            Some(reply) => return print_reply(&reply),
            None => {}
        }
        match super::plan::open(&config, crate::state::Holder::Reader("status")) {
            Ok(outbox) => break status::collect(&config, &outbox, None, None, None)?,
            // The daemon is starting (it holds the state, its socket is not up yet): ask it
            // again in a moment.
            Err(e) if starting_daemon(&e) && asked.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e),
        }
    };
    let mut out = std::io::stdout().lock();
    match args.format {
        StatusFormat::Text => write!(out, "{}", status.render())?,
        StatusFormat::Json => writeln!(out, "{}", serde_json::to_string_pretty(&status)?)?,
    }
    Ok(0)
}

/// Whether opening the state failed because `lotsync run` holds it.
fn starting_daemon(error: &anyhow::Error) -> bool {
    matches!(
        error.downcast_ref::<crate::state::StateError>(),
        Some(crate::state::StateError::InUse { command: Some(c), .. }) if c == "run"
    )
}

/// `lotsync validate`: every problem of the config at once; exit 0 or 2.
pub fn validate(args: ValidateArgs) -> anyhow::Result<u8> {
    let path = &args.config.config;
    let problems = crate::config::validate(path);
    let mut out = std::io::stdout().lock();
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
        return Ok(0);
    }
    out.flush()?;
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "{}: {} problem{}:",
        path.display(),
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    )?;
    for p in &problems {
        writeln!(err, "  {p}")?;
    }
    Ok(EXIT_BAD_INPUT)
}
