//! The command line's shape: `lotsync`'s subcommands and where each one's arguments are.
//! main.rs runs them; `examples/generate_assets.rs` writes the man pages and completions from
//! the same definition, so that neither drifts from it.

use clap::{Parser, Subcommand};

/// Keeps a dealership's vehicles on the Vehicle Inventory Service in step with its DMS exports.
///
/// Exit codes: 0 done; 1 nothing found (`why` of a vehicle the state does not know); 2 bad
/// input or config (the message names the file and the reason); 3 done, but some vehicles were
/// rejected or could not be delivered. `status` follows the Nagios convention (its help).
#[derive(Debug, Parser)]
#[command(name = "lotsync", version, about, long_about)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The whole pipeline on sample exports against an in-process sandbox: four days of a
    /// dealership in a few seconds, no setup, no network.
    #[cfg(feature = "sandbox")]
    Demo(super::DemoArgs),
    /// The daemon: watch every feed's inbox and keep the service in step (systemd runs it;
    /// SIGTERM stops, SIGHUP reloads the config).
    Run(super::RunArgs),
    /// What the daemon is doing: per feed the last file, files waiting, held and failed, the
    /// outbox, the last error. Without a running daemon, read from the state.
    Status(super::StatusArgs),
    /// Check a config file and what it points to (inboxes, profiles, token); every problem
    /// at once. Exit 2 when there are any.
    Validate(super::ValidateArgs),
    /// Read and map export files and report what would be sent (no state, no network).
    Check(super::CheckArgs),
    /// Show what would be sent for export files, against the stored state (sends nothing,
    /// queues nothing). Exit 3 when the safety guard would hold a file.
    Plan(super::PlanArgs),
    /// Map, diff and deliver export files, then exit with a summary (one shot; `run` is the
    /// daemon). Exit 3 when some vehicles were rejected, held or could not be delivered.
    Sync(super::SyncArgs),
    /// Compare the service's whole list with the state and deliver the repairs (nightly).
    ///
    /// Re-creates deleted vehicles, undoes sold or in-stock drift, re-sends fields edited on
    /// the service and learns missing ids; vehicles lotsync did not create are left alone and
    /// listed. `--rebuild` refills a lost state from the service and the archived exports.
    /// Exit 3 when some repairs were refused or stay queued.
    Reconcile(super::ReconcileArgs),
    /// Send a file the safety guard held, once you know it is right (through the running
    /// daemon, which delivers and archives it; without one, it is queued for the next run).
    Release(super::ReleaseArgs),
    /// Why a car is (or is not) on the website as it is: by VIN or stock number, what each
    /// file, the service's answers and the reconciliation did to it, newest first. Exit 1
    /// when lotsync knows no such car.
    Why(super::WhyArgs),
    /// Inspect the stored state.
    #[command(subcommand)]
    State(StateCommand),
    /// Serve a local imitation of the Vehicle Inventory Service (for tests, demos, trying a feed).
    #[cfg(feature = "sandbox")]
    Sandbox(super::SandboxArgs),
    /// Without the sandbox (the .deb's build), `demo` and `sandbox` say how to get them
    /// rather than clap's "unrecognized subcommand".
    #[cfg(not(feature = "sandbox"))]
    #[command(hide = true)]
    Demo(super::WithoutSandboxArgs),
    #[cfg(not(feature = "sandbox"))]
    #[command(hide = true)]
    Sandbox(super::WithoutSandboxArgs),
}

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// Print every stored vehicle: service id, sold or in stock, last acknowledged payload.
    Export(super::StateExportArgs),
    /// Write a consistent copy of the state to a new file, beside a running daemon.
    Backup(super::StateBackupArgs),
}

impl Command {
    /// The config file the command runs with, for the commands it prints as advice.
    pub fn config(&self) -> Option<&std::path::Path> {
        match self {
            Command::Run(a) => Some(&a.config.config),
            Command::Status(a) => Some(&a.config.config),
            Command::Validate(a) => Some(&a.config.config),
            Command::Check(a) => a.config.as_deref(),
            Command::Plan(a) => Some(&a.config.config),
            Command::Sync(a) => Some(&a.config.config),
            Command::Reconcile(a) => Some(&a.config.config),
            Command::Release(a) => Some(&a.config.config),
            Command::Why(a) => Some(&a.config.config),
            Command::State(StateCommand::Export(a)) => Some(&a.config.config),
            Command::State(StateCommand::Backup(a)) => Some(&a.config.config),
            _ => None,
        }
    }
}
