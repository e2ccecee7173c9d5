//! `lotsync demo`: the whole pipeline on the sample exports of `feeds/samples/demo/`, against a
//! sandbox in this process on loopback, in a temporary folder. No setup, no network.

use anyhow::Context;
use lotsync::api::{ApiClient, ApiToken};
use lotsync::config::Config;
use lotsync::daemon::{Daemon, Filed, Signal};
use lotsync::inbox::Outcome;
use lotsync::sandbox::{Behaviour, Faults, RunningSandbox};
use lotsync::upload::NOTICE_WAIT;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The cars the demo asks `lotsync why` about at its end: (stock number, why it is asked).
const WHY_ASKED: [(&str, &str); 2] = [
    ("U1010", "sold on Tuesday: Tuesday's export left it out"),
    ("U1005", "the Silverado, back in stock on Wednesday"),
];

/// The longest the demo waits for the daemon to file one export.
const FILE_WAIT: Duration = Duration::from_secs(60);

/// Arguments of `lotsync demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Keep the demo's folder (config, state, inbox with archive, held and reports) and print
    /// where it is, instead of removing it at the end.
    #[arg(long)]
    pub keep: bool,
}

/// The exports a DMS drops over four days, in order, with what each shows.
const EXPORTS: [(&str, &str, &[u8]); 4] = [
    (
        "1-monday-full.csv",
        "Monday: the first full export of the lot",
        include_bytes!("../../feeds/samples/demo/1-monday-full.csv"),
    ),
    (
        "2-tuesday-full.csv",
        "Tuesday: two price cuts, two cars gone (sold), one the DMS marks Sold, one new arrival",
        include_bytes!("../../feeds/samples/demo/2-tuesday-full.csv"),
    ),
    (
        "3-wednesday-full.csv",
        "Wednesday: the Silverado is back on the lot; two records are bad",
        include_bytes!("../../feeds/samples/demo/3-wednesday-full.csv"),
    ),
    (
        "4-thursday-truncated.csv",
        "Thursday: the DMS stopped after four cars (a truncated export)",
        include_bytes!("../../feeds/samples/demo/4-thursday-truncated.csv"),
    ),
];

pub fn demo(args: DemoArgs) -> anyhow::Result<lotsync::outcome::CommandOutcome> {
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(run(args))
}

async fn run(args: DemoArgs) -> anyhow::Result<lotsync::outcome::CommandOutcome> {
    let started = Instant::now();
    // A service that fails now and then: 5% 503s and 3% answers lost after the write.
    let behaviour = Behaviour {
        faults: Faults {
            seed: 42,
            http_503: 0.05,
            ack_lost: 0.03,
            ..Faults::default()
        },
        ..Behaviour::default()
    };
    let sandbox = RunningSandbox::on_loopback(behaviour).await?;
    let dir = std::env::temp_dir().join(format!("lotsync-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config_path = super::sandbox::write_site(&dir, &sandbox.base_url(), "demo-lot")?;
    let config = Arc::new(Config::load(&config_path)?);
    let feed = config.feeds[0].clone();
    // The sandbox's own token: the demo never reads a secret.
    let client = ApiClient::new(config.api.client_settings(ApiToken::new("sandbox-token")))?;
    // The real daemon: watchers, a worker for the feed, the delivery loop, the control socket.
    let (daemon, listener) = Daemon::open(config.clone())?;
    let mut filed = daemon.subscribe();
    let (signals, signalled) = tokio::sync::mpsc::channel(1);
    let running = tokio::spawn(daemon.clone().run(listener, config_path.clone(), signalled));

    let mut out = super::stdout();
    writeln!(out, "lotsync demo: a sandbox of the Vehicle Inventory Service on {} (5% of requests fail with 503, 3% lose their answer)", sandbox.base_url())?;
    writeln!(out,
        "`lotsync run` watches feed \"demo-lot\" (location 10); the DMS drops one export a day into {}",
        feed.inbox.display()
    )?;
    // Two of the days list fewer cars than the day before: without this line the demo seems
    // to hang for those seconds.
    writeln!(out,
        "(a full snapshot with fewer cars than the last one is read once it has stayed unchanged for {} s, in case its DMS still writes it: two of the days pause that long)\n",
        lotsync::daemon::GROWTH_QUIET.as_secs()
    )?;
    for (name, story, bytes) in EXPORTS {
        // As an export tool does: write under a temporary name, then rename into the inbox.
        let part = feed.inbox.join(format!(".{name}.part"));
        std::fs::write(&part, bytes)?;
        std::fs::rename(&part, feed.inbox.join(name))?;
        writeln!(out, "{name}  ({story})")?;
        let Filed { report, path } = loop {
            let next = tokio::time::timeout(FILE_WAIT, filed.recv())
                .await
                .with_context(|| format!("the daemon did not file {name} within {FILE_WAIT:?}"))?
                .context("the daemon stopped")?;
            if next.report.file == name {
                break next;
            }
        };
        writeln!(out, "  {}", report.summary())?;
        for r in &report.rejected_records {
            writeln!(out, "    {r}")?;
        }
        for r in &report.refused {
            writeln!(
                out,
                "    VIN {}: refused ({}): {}",
                r.vin,
                r.status,
                r.messages.join(" ")
            )?;
        }
        if matches!(report.outcome, Outcome::Held { .. }) {
            // Said, not given as a command: the demo's service and folder are gone once it
            // ends, so no release could run against them.
            writeln!(
                out,
                "    at a dealership a person looks at its report, and `lotsync release` with \
                 the file applies it if it is right"
            )?;
        }
        let shown = path.strip_prefix(&dir).unwrap_or(&path);
        writeln!(out, "  -> {} (+ .report.json)\n", shown.display())?;
    }
    // Asked of the running daemon, as `lotsync why` asks it: the car sold on Tuesday and the
    // one back in stock on Wednesday.
    let mut stories = Vec::new();
    for (stock, about) in WHY_ASKED {
        let request = lotsync::daemon::control::Request::Why {
            query: stock.to_owned(),
            feed: None,
        };
        stories.push((stock, about, daemon.answer(request).await.text));
    }
    let stats = daemon.pipeline().uploader().stats().snapshot();
    if let Some(notices) = daemon.pipeline().notices() {
        notices.finish(NOTICE_WAIT).await;
    }
    let _ = signals.send(Signal::Stop).await;
    running.await??;
    drop(daemon);

    let mut inventory = client.list_vehicles().await?.value;
    inventory.sort_by(|a, b| a.stock.cmp(&b.stock));
    writeln!(
        out,
        "The inventory as the service now has it ({} vehicles):",
        inventory.len()
    )?;
    writeln!(
        out,
        "  {:<6} {:<17} {:<36} {:>9}  status",
        "stock", "vin", "vehicle", "price"
    )?;
    for v in &inventory {
        let vehicle = [
            v.year.clone(),
            v.make.clone(),
            v.model.clone(),
            v.trim.clone(),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
        let price = v
            .price
            .as_ref()
            .and_then(|p| p.selling)
            .map_or_else(|| "-".to_owned(), |p| format!("${p:.0}"));
        writeln!(
            out,
            "  {:<6} {:<17} {:<36} {:>9}  {}",
            v.stock.as_deref().unwrap_or("-"),
            v.vin.as_deref().unwrap_or("-"),
            vehicle,
            price,
            if v.is_sold() { "sold" } else { "in stock" }
        )?;
    }
    let notifications = client.list_notifications("inventory").await?.value;
    writeln!(out, "\nNotifications on the service for the dealership:")?;
    for n in &notifications {
        writeln!(
            out,
            "  [{}] {}",
            n.level.as_deref().unwrap_or("info"),
            n.title.as_deref().unwrap_or("")
        )?;
    }
    for (stock, about, story) in &stories {
        writeln!(out, "\n$ lotsync why {stock}    ({about})")?;
        write!(out, "{story}")?;
    }
    writeln!(
        out,
        "\n{} requests, {} of them retries after a failure; {:.1} s in all.",
        stats.requests,
        stats.retries,
        started.elapsed().as_secs_f64()
    )?;
    sandbox.stop().await;
    if args.keep {
        writeln!(
            out,
            "Everything is in {} (config, state, inbox/archive, inbox/held, reports).",
            dir.display()
        )?;
    } else {
        let _ = std::fs::remove_dir_all(&dir);
        writeln!(
            out,
            "(`lotsync demo --keep` keeps the folder with the archive and the reports.)"
        )?;
    }
    Ok(lotsync::outcome::CommandOutcome::Done)
}
