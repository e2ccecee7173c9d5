//! `lotsync demo` and `lotsync sandbox` in a build without the `sandbox` feature (the .deb's):
//! instead of clap's bare "unrecognized subcommand", they say why they are missing and how to
//! get them. It owns nothing else; the real subcommands are `demo.rs` and `sandbox.rs`.

use std::ffi::OsString;

/// Whatever follows `demo` or `sandbox` (options included): taken and left unread, so that
/// `lotsync demo --keep` gets the same answer as `lotsync demo`.
#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
pub struct WithoutSandboxArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<OsString>,
}

/// Says on stderr that `subcommand` (`demo` or `sandbox`) is not in this build and how to run
/// it; exit 2, as for any command line lotsync cannot run.
pub fn without_sandbox(subcommand: &str) -> anyhow::Result<lotsync::outcome::CommandOutcome> {
    eprintln!(
        "lotsync: `lotsync {subcommand}` is not in this build: it runs lotsync's imitation of \
         the Vehicle Inventory Service (the sandbox), which the Debian package leaves out.\n\
         To try it, build lotsync from its source with the sandbox (the default) and run it \
         there: `cargo run --release -- {subcommand}` in a checkout of lotsync."
    );
    Ok(lotsync::outcome::CommandOutcome::Failed)
}
