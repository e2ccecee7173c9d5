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
    /// Also write a ready lotsync site into DIR for the default world: `lotsync.toml` pointing
    /// at this sandbox, its token file, an inbox for location 10; then print the one command
    /// that runs the daemon on it (a first run on a laptop).
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    pub site: Option<PathBuf>,
}

/// A lotsync site in `dir` for the default sandbox world at `base_url`: the token file (the
/// sandbox's well-known token, not a secret, still private as lotsync requires of a token
/// file), the config, the state's folder and one feed `feed` reading `dir/inbox` for location
/// 10. Its config's path.
pub(super) fn write_site(
    dir: &std::path::Path,
    base_url: &str,
    feed: &str,
) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir.join("inbox")).with_context(|| dir.display().to_string())?;
    lotsync::config::write_token_file(&dir.join("token"), "sandbox-token\n")?;
    let config_path = dir.join("lotsync.toml");
    std::fs::write(
        &config_path,
        format!(
            "[api]\nbase_url = \"{base_url}\"\norganization_id = 100\ntoken_file = \"token\"\n\
             max_requests_per_second = 50\n[state]\ndir = \"state\"\n\
             [daemon]\nsocket = \"run/lotsync.sock\"\nsettle_secs = 0.5\n\
             [[feed]]\nname = \"{feed}\"\ninbox = \"inbox\"\nlocation_id = 10\n\
             [notifications]\napplication_slug = \"inventory\"\n"
        ),
    )
    .with_context(|| config_path.display().to_string())?;
    Ok(config_path)
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
    if let Some(dir) = &args.site {
        let dir = std::path::absolute(dir).with_context(|| dir.display().to_string())?;
        let config_path = write_site(&dir, &running.base_url(), "main")?;
        let config = lotsync::config::Config::load(&config_path)?;
        writeln!(
            out,
            "a lotsync site for it is in {}; in another terminal:\n  {}\nthen drop exports \
             into {} (status, plan and why take the same --config)",
            dir.display(),
            config.command(&["run"]),
            dir.join("inbox").display()
        )?;
    }
    out.flush().context("stdout")?;
    tracing::info!(addr = %running.addr(), "sandbox serving; Ctrl-C stops it");
    super::shutdown_signal().await;
    tracing::info!("sandbox stopping");
    running.stop().await;
    Ok(())
}
