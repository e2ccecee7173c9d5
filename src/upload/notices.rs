//! Notifications on the service (`[notifications] application_slug`): one when a file has
//! rejected records or vehicles, one when the safety guard holds a file, one when delivery
//! stops on a fatal error.
//!
//! At most one per file or incident: the key is claimed in the state before sending, so a
//! repeated file or a daemon retrying a bad token does not tell again (a fatal incident is
//! forgotten once delivery works again). Sent in the background, never blocking delivery, with
//! a few short retries and then given up with a warning in the log.
//!
//! After a 401 none is sent until delivery works again: a notification goes with the same
//! token the service just refused, so it could only be refused too (and tell nobody).

use crate::api::{ApiClient, ApiError, NewNotification, NotificationLevel};
use crate::outbox::Outbox;
use crate::text::Chain;
use backon::Retryable;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::task::JoinSet;

/// How long [`Notices::finish`] waits, at most, for notifications still being sent.
pub const NOTICE_WAIT: Duration = Duration::from_secs(15);

/// Attempts per notification.
const ATTEMPTS: usize = 3;

/// Items listed in one notification; the rest are counted.
const MAX_ITEMS: usize = 20;

const FATAL_PREFIX: &str = "fatal/";

/// Sends notifications for one application.
#[derive(Clone)]
pub struct Notices {
    client: ApiClient,
    application: String,
    outbox: Arc<Outbox>,
    sending: Arc<Mutex<JoinSet<()>>>,
    /// The service refused the token (401): nothing is sent with it until delivery works.
    token_refused: Arc<AtomicBool>,
    /// The config lotsync runs with, for the commands a notification gives as advice.
    config_path: Option<std::path::PathBuf>,
}

impl Notices {
    /// `config_path`: the config's file, named in the commands the notifications advise.
    pub fn new(
        client: ApiClient,
        application: String,
        outbox: Arc<Outbox>,
        config_path: Option<std::path::PathBuf>,
    ) -> Notices {
        Notices {
            client,
            application,
            outbox,
            config_path,
            sending: Arc::new(Mutex::new(JoinSet::new())),
            token_refused: Arc::new(AtomicBool::new(false)),
        }
    }

    /// A file whose records or vehicles were rejected. `problems`: one line each.
    pub fn rejected(&self, file: &str, sha256: &str, problems: &[String]) {
        if problems.is_empty() {
            return;
        }
        let title = format!(
            "lotsync: {} problem{} in {file}",
            problems.len(),
            plural(problems.len())
        );
        let message = format!(
            "These vehicles of {file} are not on the website as exported; the rest of the file \
             synced. Fix them in the DMS and export again.\n{}",
            listed(problems)
        );
        self.send(
            format!("file/{sha256}/rejected"),
            title,
            message,
            NotificationLevel::Warning,
        );
    }

    /// A file the safety guard held (or that stayed incomplete), as it is filed in `held/`.
    pub fn held(&self, file: &str, sha256: &str, reasons: &[String]) {
        let title = format!("lotsync held {file}: nothing of it was sent");
        let release = crate::config::command(self.config_path.as_deref(), &["release", file]);
        let message = format!(
            "{}\nIf the export is right, run `{release}`; otherwise export again.",
            reasons.join("\n")
        );
        self.send(
            format!("file/{sha256}/held"),
            title,
            message,
            NotificationLevel::Warning,
        );
    }

    /// A file that could not be read, filed in `failed/` (once per file, as a held one).
    pub fn failed(&self, file: &str, sha256: &str, reason: &str) {
        let title = format!("lotsync could not read {file}: nothing of it was sent");
        let message = format!(
            "{reason}\nThe file is in the feed's failed/ folder with its report. Fix the export \
             and drop it again; the next export is taken as usual."
        );
        self.send(
            format!("file/{sha256}/failed"),
            title,
            message,
            NotificationLevel::Warning,
        );
    }

    /// Delivery stopped on a fatal error (once per kind of error until delivery works again).
    /// Not after a 401: the notification would carry the token just refused.
    pub fn fatal(&self, error: &ApiError) {
        if error.status() == Some(401) {
            if !self.token_refused.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    status = 401,
                    "no notification of the stop: it would be sent with the token the service \
                     refused; notifications resume once delivery works again"
                );
            }
            return;
        }
        let kind = error
            .status()
            .map_or_else(|| "setup".to_owned(), |s| s.to_string());
        self.send(
            format!("{FATAL_PREFIX}{kind}"),
            "lotsync stopped sending vehicles to the website".into(),
            error.to_string(),
            NotificationLevel::Error,
        );
    }

    /// Delivery works again: the next fatal error is told again.
    pub fn incident_over(&self) {
        self.token_refused.store(false, Ordering::Relaxed);
        // The state is written off the async threads.
        let outbox = self.outbox.clone();
        lock(&self.sending).spawn(async move {
            let forgot =
                tokio::task::spawn_blocking(move || outbox.state().forget_notices(FATAL_PREFIX))
                    .await;
            match forgot {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %Chain(&e), "cannot clear the notification record");
                }
                Err(e) => {
                    tracing::warn!(error = %Chain(&e), "cannot clear the notification record");
                }
            }
        });
    }

    /// Waits up to `wait` for the notifications still being sent.
    pub async fn finish(&self, wait: Duration) {
        let mut sending = std::mem::take(&mut *lock(&self.sending));
        let all = async { while sending.join_next().await.is_some() {} };
        if tokio::time::timeout(wait, all).await.is_err() {
            tracing::warn!("gave up waiting for notifications to be sent");
        }
    }

    fn send(&self, key: String, title: String, message: String, level: NotificationLevel) {
        if self.token_refused.load(Ordering::Relaxed) {
            tracing::info!(%key, "notification not sent: the service refused the token (401)");
            return;
        }
        let notification = NewNotification {
            title,
            message,
            level,
        };
        let client = self.client.clone();
        let application = self.application.clone();
        let outbox = self.outbox.clone();
        lock(&self.sending).spawn(async move {
            // Recorded first (off the async threads), so that it is sent once.
            let claimed = {
                let key = key.clone();
                tokio::task::spawn_blocking(move || outbox.state().claim_notice(&key)).await
            };
            match claimed {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => {
                    tracing::debug!(%key, "notification already sent");
                    return;
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %Chain(&e), "cannot record the notification; not sending it");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %Chain(&e), "cannot record the notification; not sending it");
                    return;
                }
            }
            let backoff = backon::ExponentialBuilder::default()
                .with_jitter()
                .with_min_delay(Duration::from_secs(1))
                .with_max_times(ATTEMPTS - 1);
            let sent = (|| client.create_notification(&application, &notification))
                .retry(backoff)
                .when(|e: &ApiError| e.class() == crate::api::ErrorClass::Retryable)
                .await;
            match sent {
                Ok(answer) => tracing::info!(
                    id = answer.value.id,
                    title = %notification.title,
                    "notification sent"
                ),
                Err(error) => tracing::warn!(
                    %error,
                    title = %notification.title,
                    "could not send the notification; not trying again"
                ),
            }
        });
    }
}

fn listed(items: &[String]) -> String {
    let mut out: Vec<String> = items
        .iter()
        .take(MAX_ITEMS)
        .map(|i| format!("- {i}"))
        .collect();
    if items.len() > MAX_ITEMS {
        out.push(format!("… and {} more", items.len() - MAX_ITEMS));
    }
    out.join("\n")
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lists_are_cut_and_counted() {
        let items: Vec<String> = (0..25).map(|i| format!("line {i}")).collect();
        let text = listed(&items);
        assert_eq!(text.lines().count(), MAX_ITEMS + 1);
        assert!(text.ends_with("… and 5 more"), "{text}");
        assert_eq!(listed(&items[..1]), "- line 0");
    }
}
