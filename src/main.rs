//! `lotsync`: parses the command line and runs one subcommand.
#![warn(clippy::unwrap_used)]

use clap::{Parser, Subcommand};
use lotsync::cli;
use std::process::ExitCode;

/// Keeps a dealership's vehicles on the Vehicle Inventory Service in step with its DMS exports.
#[derive(Debug, Parser)]
#[command(name = "lotsync", version, about, long_about = None)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve a local imitation of the Vehicle Inventory Service (for tests, demos, trying a feed).
    Sandbox(cli::SandboxArgs),
}

fn main() -> ExitCode {
    let args = Args::parse();
    cli::init_logging();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lotsync: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match args.command {
            Command::Sandbox(a) => cli::sandbox(a).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lotsync: {e:#}");
            ExitCode::from(cli::EXIT_BAD_INPUT)
        }
    }
}
