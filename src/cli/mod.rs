//! The command line: one thin function per subcommand, each wiring library stages together.
//!
//! `anyhow` lives here and only here; exit codes follow DESIGN.md (0 done, 2 bad input or
//! config, 3 done with rejected or undelivered vehicles).

mod check;
mod daemon;
mod deliver;
mod demo;
mod plan;
mod reconcile;
mod sandbox;
mod sync;

pub use check::{check, CheckArgs, OutputFormat};
pub use daemon::{run, status, validate, RunArgs, StatusArgs, ValidateArgs};
pub use demo::{demo, DemoArgs};
pub use plan::{
    plan, release, state_export, ConfigArg, PlanArgs, ReleaseArgs, StateExportArgs, EXIT_HELD,
};
pub use reconcile::{reconcile, reconcile_direct, ReconcileArgs, ReconcileFormat};
pub use sandbox::{sandbox, SandboxArgs};
pub use sync::{sync, SyncArgs, EXIT_INCOMPLETE};

/// One problem of one record, as a JSON line (ndjson output of `check` and `plan`).
#[derive(serde::Serialize)]
struct ProblemLine<'a> {
    file: &'a str,
    line: u64,
    severity: &'static str,
    #[serde(flatten)]
    problem: &'a crate::mapper::Problem,
}

/// Exit code for bad input or config.
pub const EXIT_BAD_INPUT: u8 = 2;

/// Logs to stderr in a journald-friendly form: no colors unless stderr is a terminal, level
/// from `RUST_LOG`, else `default` (such as `info`).
pub fn init_logging(default: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
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
