//! `lotsync why <VIN or stock number>`: one car's story, from the running daemon (which owns
//! the state) or else from the state; with `--online`, the service's view of it now.
//!
//! What the answer holds and how it reads is [`lotsync::state::history`]'s; this wires the
//! question to wherever the state is and prints the answer.

use super::setup::{ask_daemon, client_of, open, ConfigArg};
use anyhow::Context;
use lotsync::config::Config;
use lotsync::daemon::control::Request;
use lotsync::outcome::CommandOutcome;
use lotsync::state::history::Why;
use lotsync::state::{Holder, StateError};
use std::io::Write;
use std::time::{Duration, Instant};

/// Arguments of `lotsync why`.
#[derive(Debug, clap::Args)]
pub struct WhyArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// The car: its VIN, or its stock number (a stock number several cars carry lists each).
    #[arg(value_name = "VIN or STOCK")]
    pub vehicle: String,
    /// Only cars of this feed (its location, or a file of it that changed them).
    #[arg(long, value_name = "NAME")]
    pub feed: Option<String>,
    /// text: for a person, one line per event; json: the whole answer for tools.
    #[arg(long, value_enum, default_value_t = WhyFormat::Text)]
    pub format: WhyFormat,
    /// Also read the car from the service now and say where it differs from what was sent.
    #[arg(long)]
    pub online: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WhyFormat {
    Text,
    Json,
}

/// `lotsync why`: done when the car is known, not found when nothing matches (exit 1), failed
/// on a bad config or an unknown feed.
pub fn why(args: WhyArgs) -> anyhow::Result<CommandOutcome> {
    let config = Config::load(&args.config.config)?;
    let mut answer = match ask(&config, &args)? {
        Ok(why) => why,
        Err(text) => {
            super::last_error(text.trim_end());
            return Ok(CommandOutcome::Failed);
        }
    };
    if args.online {
        online(&config, &mut answer)?;
    }
    let mut out = super::stdout();
    match args.format {
        WhyFormat::Text => write!(out, "{}", answer.render())?,
        WhyFormat::Json => writeln!(out, "{}", serde_json::to_string_pretty(&answer)?)?,
    }
    Ok(if answer.vehicles.is_empty() {
        CommandOutcome::NotFound
    } else {
        CommandOutcome::Done
    })
}

/// The answer from the running daemon, else from the state opened to read; the daemon's
/// message when it could not answer. A daemon starting (it holds the state, its socket is not
/// up yet) is asked again for a few seconds.
fn ask(config: &Config, args: &WhyArgs) -> anyhow::Result<Result<Why, String>> {
    let request = Request::Why {
        query: args.vehicle.clone(),
        feed: args.feed.clone(),
    };
    let asked = Instant::now();
    loop {
        if let Some(reply) = ask_daemon(config, &request, Some(Duration::from_secs(30)))? {
            return Ok(match reply.report {
                Some(report) if reply.outcome != CommandOutcome::Failed => {
                    Ok(serde_json::from_value(report)
                        .context("the daemon's answer to `why` is not understood")?)
                }
                _ => Err(reply.text),
            });
        }
        match open(config, Holder::Reader("why")) {
            Ok(outbox) => {
                let feed = args.feed.as_deref();
                return Ok(lotsync::daemon::why(config, &outbox, &args.vehicle, feed));
            }
            Err(e)
                if asked.elapsed() < Duration::from_secs(10)
                    && matches!(
                        e.downcast_ref::<StateError>(),
                        Some(StateError::InUse { .. })
                    ) =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Reads each car the service knows (by its id) and notes where it differs from what was sent
/// last. A car that cannot be read says why, in its place.
fn online(config: &Config, answer: &mut Why) -> anyhow::Result<()> {
    let client = client_of(config)?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    for vehicle in &mut answer.vehicles {
        let Some(acknowledged) = &vehicle.acknowledged else {
            continue;
        };
        let Some(id) = acknowledged.service_id else {
            vehicle.online = Some(serde_json::json!({
                "error": "lotsync does not know its id on the service",
            }));
            continue;
        };
        let read = runtime.block_on(client.get_vehicle(id));
        vehicle.online = Some(match read {
            Ok(answer) => {
                let now = answer.value;
                let drift = acknowledged
                    .payload
                    .as_ref()
                    .map(|sent| lotsync::diff::field_drift(&now, sent))
                    .unwrap_or_default();
                let sold = now.sold_state();
                serde_json::json!({
                    "id": now.id,
                    "sold": sold,
                    "sold_differs": sold.is_some_and(|s| s != acknowledged.sold),
                    "fields_differ": drift,
                })
            }
            Err(e) => serde_json::json!({ "error": lotsync::text::Chain(&e).to_string() }),
        });
    }
    Ok(())
}
