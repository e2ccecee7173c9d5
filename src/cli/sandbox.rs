//! `lotsync sandbox`: serves the service imitation until interrupted.

use anyhow::Context;
use lotsync::sandbox::{RunningSandbox, SandboxConfig};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Arguments of `lotsync sandbox`.
#[derive(Debug, clap::Args)]
pub struct SandboxArgs {
    /// Address to listen on; port 0 picks a free port (printed once bound).
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Sandbox config (tokens, organizations, locations, behaviour); without it the default
    /// world is served: token `sandbox-token`, organization 100 with locations 10 and 11.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

pub async fn sandbox(args: SandboxArgs) -> anyhow::Result<()> {
    let config = match &args.config {
        Some(path) => SandboxConfig::load(path)?,
        None => SandboxConfig::default(),
    };
    let world = config.describe();
    let running = RunningSandbox::start(config, args.listen).await?;
    let mut out = super::stdout();
    writeln!(out, "{world}")?;
    writeln!(out, "listening on {}", running.base_url())?;
    out.flush().context("stdout")?;
    tracing::info!(addr = %running.addr(), "sandbox serving; Ctrl-C stops it");
    super::shutdown_signal().await;
    tracing::info!("sandbox stopping");
    running.stop().await;
    Ok(())
}
