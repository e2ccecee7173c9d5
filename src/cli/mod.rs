//! The command line: one thin function per subcommand, each wiring library stages together.
//!
//! `anyhow` lives here and only here; the library says how a command's work ended
//! ([`CommandOutcome`]) and [`exit_code`] alone makes it the process's exit code, as
//! `docs/design.md` lists them (`lotsync status` keeps the Nagios plugin's codes of its own).

use lotsync::outcome::CommandOutcome;

pub mod args;
mod check;
mod daemon;
mod deliver;
#[cfg(feature = "sandbox")]
mod demo;
mod logging;
#[cfg(not(feature = "sandbox"))]
mod no_sandbox;
mod plan;
mod reconcile;
#[cfg(feature = "sandbox")]
mod sandbox;
mod setup;
mod stdout;
mod sync;
mod why;

pub use stdout::stdout;

pub use check::{check, CheckArgs, OutputFormat};
pub use daemon::{run, status, validate, RunArgs, StatusArgs, ValidateArgs};
#[cfg(feature = "sandbox")]
pub use demo::{demo, DemoArgs};
#[cfg(not(feature = "sandbox"))]
pub use no_sandbox::{without_sandbox, WithoutSandboxArgs};
pub use plan::{
    plan, release, state_backup, state_export, PlanArgs, ReleaseArgs, StateBackupArgs,
    StateExportArgs,
};
pub use reconcile::{reconcile, ReconcileArgs};
#[cfg(feature = "sandbox")]
pub use sandbox::{sandbox, SandboxArgs};
pub use sync::{sync, SyncArgs};
pub use why::{why, WhyArgs};

/// One problem of one record, as a JSON line (ndjson output of `check` and `plan`).
#[derive(serde::Serialize)]
struct ProblemLine<'a> {
    file: &'a str,
    line: u64,
    severity: &'static str,
    #[serde(flatten)]
    problem: &'a lotsync::mapper::Problem,
}

/// The process's exit code for how a command's work ended: 0 done; 2 bad input or config, a
/// refused state or a fatal answer; 3 done with rejected, refused, held or undelivered
/// vehicles.
pub fn exit_code(outcome: CommandOutcome) -> u8 {
    match outcome {
        CommandOutcome::Done => 0,
        CommandOutcome::NotFound => 1,
        CommandOutcome::Failed => 2,
        CommandOutcome::Incomplete => 3,
    }
}

/// Logs as `LOTSYNC_LOG_FORMAT` says, else to the journal under systemd and as text
/// elsewhere; level from `RUST_LOG`, else `default` (such as `info`).
pub fn init_logging(default: &str) {
    logging::init(default, lotsync::config::LogFormat::Auto);
}

/// Says the error that ends the process, as the logging in place wants it (one journal entry
/// under systemd).
pub fn last_error(message: &str) {
    logging::last_error(message);
}

/// Ctrl-C or SIGTERM.
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
