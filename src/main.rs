//! `lotsync`: parses the command line and runs one subcommand.
#![warn(clippy::unwrap_used)]

mod cli;

use clap::{CommandFactory, Parser, Subcommand};
use lotsync::outcome::CommandOutcome;
use std::process::ExitCode;

/// Keeps a dealership's vehicles on the Vehicle Inventory Service in step with its DMS exports.
///
/// Exit codes: 0 done; 2 bad input or config (the message names the file and the reason);
/// 3 done, but some vehicles were rejected or could not be delivered.
#[derive(Debug, Parser)]
#[command(name = "lotsync", version, about, long_about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The whole pipeline on sample exports against an in-process sandbox: four days of a
    /// dealership in a few seconds, no setup, no network.
    #[cfg(feature = "sandbox")]
    Demo(cli::DemoArgs),
    /// The daemon: watch every feed's inbox and keep the service in step (systemd runs it;
    /// SIGTERM stops, SIGHUP reloads the config).
    Run(cli::RunArgs),
    /// What the daemon is doing: per feed the last file, files waiting, held and failed, the
    /// outbox, the last error. Without a running daemon, read from the state.
    Status(cli::StatusArgs),
    /// Check a config file and what it points to (inboxes, profiles, token); every problem
    /// at once. Exit 2 when there are any.
    Validate(cli::ValidateArgs),
    /// Read and map export files and report what would be sent (no state, no network).
    Check(cli::CheckArgs),
    /// Show what would be sent for export files, against the stored state (sends nothing,
    /// queues nothing). Exit 3 when the safety guard would hold a file.
    Plan(cli::PlanArgs),
    /// Map, diff and deliver export files, then exit with a summary (one shot; `run` is the
    /// daemon). Exit 3 when some vehicles were rejected, held or could not be delivered.
    Sync(cli::SyncArgs),
    /// Compare the service's whole list with the state and deliver the repairs (nightly).
    ///
    /// Re-creates deleted vehicles, undoes sold or in-stock drift, re-sends fields edited on
    /// the service and learns missing ids; vehicles lotsync did not create are left alone and
    /// listed. `--rebuild` refills a lost state from the service and the archived exports.
    /// Exit 3 when some repairs were refused or stay queued.
    Reconcile(cli::ReconcileArgs),
    /// Send a file the safety guard held, once you know it is right (through the running
    /// daemon, which delivers and archives it; without one, it is queued for the next run).
    Release(cli::ReleaseArgs),
    /// Why a car is (or is not) on the website as it is: by VIN or stock number, what each
    /// file, the service's answers and the reconciliation did to it, newest first. Exit 1
    /// when lotsync knows no such car.
    Why(cli::WhyArgs),
    /// Inspect the stored state.
    #[command(subcommand)]
    State(StateCommand),
    /// Serve a local imitation of the Vehicle Inventory Service (for tests, demos, trying a feed).
    #[cfg(feature = "sandbox")]
    Sandbox(cli::SandboxArgs),
    /// Write the man pages and shell completions (for packaging; see packaging/deb-check).
    #[command(hide = true)]
    GenerateAssets(cli::AssetsArgs),
    /// Without the sandbox (the .deb's build), `demo` and `sandbox` say how to get them
    /// rather than clap's "unrecognized subcommand".
    #[cfg(not(feature = "sandbox"))]
    #[command(hide = true)]
    Demo(cli::WithoutSandboxArgs),
    #[cfg(not(feature = "sandbox"))]
    #[command(hide = true)]
    Sandbox(cli::WithoutSandboxArgs),
}

#[derive(Debug, Subcommand)]
enum StateCommand {
    /// Print every stored vehicle: service id, sold or in stock, last acknowledged payload.
    Export(cli::StateExportArgs),
}

fn main() -> ExitCode {
    let args = Args::parse();
    // The demo tells its own story on stdout; its log keeps to warnings unless RUST_LOG asks.
    // The daemon takes its level from its config; it allocates in two glibc heaps, set before
    // its threads start (issue 25 item 7).
    match args.command {
        Command::Run(_) => lotsync::state::memory::limit_arenas(),
        #[cfg(feature = "sandbox")]
        Command::Demo(_) => cli::init_logging("warn"),
        _ => cli::init_logging("info"),
    }
    let outcome = match args.command {
        #[cfg(feature = "sandbox")]
        Command::Demo(a) => cli::demo(a),
        Command::Run(a) => cli::run(a),
        // The Nagios plugin's codes, its own (see `lotsync status --help`).
        Command::Status(a) => match cli::status(a) {
            Ok(code) => return ExitCode::from(code),
            Err(e) => Err(e),
        },
        Command::Validate(a) => cli::validate(a),
        Command::Check(a) => cli::check(a),
        Command::Plan(a) => cli::plan(a),
        Command::Sync(a) => cli::sync(a),
        Command::Reconcile(a) => cli::reconcile(a),
        Command::Release(a) => cli::release(a),
        Command::Why(a) => cli::why(a),
        Command::State(StateCommand::Export(a)) => cli::state_export(a),
        #[cfg(feature = "sandbox")]
        Command::Sandbox(a) => tokio_runtime()
            .and_then(|rt| rt.block_on(cli::sandbox(a)))
            .map(|()| CommandOutcome::Done),
        Command::GenerateAssets(a) => cli::generate_assets(a, Args::command()),
        #[cfg(not(feature = "sandbox"))]
        Command::Demo(_) => cli::without_sandbox("demo"),
        #[cfg(not(feature = "sandbox"))]
        Command::Sandbox(_) => cli::without_sandbox("sandbox"),
    };
    let outcome = outcome.unwrap_or_else(|e| {
        cli::last_error(&format!("{e:#}"));
        CommandOutcome::Failed
    });
    ExitCode::from(cli::exit_code(outcome))
}

#[cfg(feature = "sandbox")]
fn tokio_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Runtime::new()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))
}
