//! Delivery with progress for the one-shot commands: drains the outbox, showing a bar on a
//! terminal and a log line every few seconds otherwise; Ctrl-C or SIGTERM stops it, leaving
//! what is not answered queued.
//!
//! `lotsync sync` and `lotsync reconcile` use it.

use lotsync::upload::{DrainReport, UploadError, Uploader};
use std::io::IsTerminal;
use std::time::Duration;

/// How often a non-interactive run logs its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Drains the uploader's outbox to the end, or until interrupted (the report then says
/// `stopped: interrupted` and counts what stays queued).
pub(super) async fn deliver(uploader: &Uploader) -> Result<DrainReport, UploadError> {
    let total = uploader.queued()?;
    if total == 0 {
        return uploader.drain().await;
    }
    tracing::info!(
        operations = total,
        rate = lotsync::upload::rate::round1(uploader.rate()),
        "delivering"
    );
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(total as u64);
        // The template is a constant known to be valid; a bad one would only lose the style.
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} operations  {per_sec:>10}  eta {eta}  {msg}",
        ) {
            bar.set_style(style);
        }
        bar
    });
    let drain = uploader.drain();
    tokio::pin!(drain);
    let mut tick = tokio::time::interval(if bar.is_some() {
        Duration::from_millis(200)
    } else {
        PROGRESS_EVERY
    });
    tick.tick().await;
    let shutdown = super::shutdown_signal();
    tokio::pin!(shutdown);
    let result = loop {
        tokio::select! {
            result = &mut drain => break result,
            () = &mut shutdown => {
                tracing::warn!("interrupted; what is not answered stays queued");
                break uploader.queued().map(|undelivered| DrainReport {
                    stopped: Some("interrupted".into()),
                    undelivered,
                    ..DrainReport::default()
                });
            }
            _ = tick.tick() => {
                let s = uploader.stats().snapshot();
                match &bar {
                    Some(bar) => {
                        bar.set_position(s.answered);
                        // What holds delivery up, when something does, else the pace.
                        bar.set_message(uploader.condition().line().unwrap_or_else(|| {
                            format!(
                                "{:.0} req/s max, {} retries, {} 429s",
                                uploader.rate(),
                                s.retries,
                                s.throttled
                            )
                        }));
                    }
                    None => tracing::info!(
                        answered = s.answered,
                        of = total,
                        requests = s.requests,
                        retries = s.retries,
                        throttled = s.throttled,
                        rate = lotsync::upload::rate::round1(uploader.rate()),
                        "delivering"
                    ),
                }
            }
        }
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result
}

/// The summary's lines for how delivery ended: operations the service refused, why delivery
/// stopped, and what stays queued for `next` (the commands that will send it).
pub(super) fn write_drained(
    out: &mut impl std::io::Write,
    drained: &DrainReport,
    next: &str,
) -> std::io::Result<()> {
    for r in &drained.rejected {
        writeln!(
            out,
            "  refused: VIN {} ({}, from {}): {} {}",
            r.vin,
            r.op,
            r.file,
            r.status,
            r.messages.join(" ")
        )?;
    }
    if let Some(why) = &drained.stopped {
        writeln!(out, "  delivery stopped: {why}")?;
    }
    if drained.undelivered > 0 {
        writeln!(
            out,
            "  {} operations stay queued; the next {next} sends them",
            drained.undelivered
        )?;
    }
    Ok(())
}
