//! `lotsync`: parses the command line and runs one subcommand.
#![warn(clippy::unwrap_used)]

mod cli;

use clap::Parser;
use cli::args::{Args, Command, StateCommand};
use lotsync::outcome::CommandOutcome;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(config) = args.command.config() {
        lotsync::config::runs_with(config);
    }
    // The demo tells its own story on stdout, every hold and rejection in it: its log keeps
    // to errors unless RUST_LOG asks (a warning line would say the story's hold again, raw).
    // The daemon takes its level from its config.
    match args.command {
        Command::Run(_) => {}
        #[cfg(feature = "sandbox")]
        Command::Demo(_) => cli::init_logging("error"),
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
        Command::State(StateCommand::Backup(a)) => cli::state_backup(a),
        #[cfg(feature = "sandbox")]
        Command::Sandbox(a) => tokio_runtime()
            .and_then(|rt| rt.block_on(cli::sandbox(a)))
            .map(|()| CommandOutcome::Done),
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
