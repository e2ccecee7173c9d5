//! What the subcommands that work on a config's state set up: the `--config` argument, the
//! state, the service client, and the way to a running daemon (which owns the state while it
//! runs). It owns no subcommand.

use lotsync::api::ApiClient;
use lotsync::config::Config;
use lotsync::daemon::control::{self, Reply, Request};
use lotsync::outbox::Outbox;
use lotsync::outcome::CommandOutcome;
use lotsync::state::{Holder, State};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// The config file, shared by the commands that use state.
#[derive(Debug, clap::Args)]
pub struct ConfigArg {
    /// lotsync's config file.
    #[arg(
        long,
        env = "LOTSYNC_CONFIG",
        default_value = lotsync::config::DEFAULT_PATH,
        value_name = "FILE"
    )]
    pub config: PathBuf,
}

/// Opens the config's state as `holder`, checking its markers (see
/// [`lotsync::state::identity`]).
pub(super) fn open(config: &Config, holder: Holder) -> anyhow::Result<Outbox> {
    let opening = lotsync::daemon::state_opening(config, holder);
    // The state's errors name its folder and the way out.
    Ok(Outbox::new(State::open_with(&config.state.dir, &opening)?))
}

/// The service client the config names, with its token.
pub(super) fn client_of(config: &Config) -> anyhow::Result<ApiClient> {
    Ok(config.api.client()?)
}

/// Asks the daemon the config names; `None` when none runs.
pub(super) fn ask_daemon(
    config: &Config,
    request: &Request,
    timeout: Option<Duration>,
) -> anyhow::Result<Option<Reply>> {
    Ok(control::ask(&config.daemon.socket, request, timeout)?)
}

/// Prints a daemon's answer and returns how the asked work ended.
pub(super) fn print_reply(reply: &Reply) -> anyhow::Result<CommandOutcome> {
    let mut out = super::stdout();
    if reply.outcome == CommandOutcome::Failed {
        out.flush()?;
        super::last_error(reply.text.trim_end());
    } else {
        // The daemon escapes the names it puts in; each line again, in case one slipped.
        for line in reply.text.trim_end().lines() {
            writeln!(out, "{}", lotsync::text::Escaped(line))?;
        }
    }
    Ok(reply.outcome)
}
