//! The service's own wait: a Retry-After (or an empty bucket's `X-RateLimit-Reset`) holds every
//! call of the token until the moment the service named, not only the call it answered.
//!
//! A strict service refuses a token that comes back early, again and with the same deadline,
//! so a request sent inside the window is wasted and may extend it. The window is shared by
//! every clone of a client; the uploader waits it out before each request, and any other call
//! made inside it is refused locally ([`super::ApiError::Waiting`]) without being sent.
//!
//! It does not pace requests (the uploader's `pace` does) nor decide what a refusal means.

use std::time::{Duration, Instant, SystemTime};

/// A wait at least this long is said in the log (shorter ones are routine pacing).
pub const SAID_FROM: Duration = Duration::from_secs(10);

/// Why the service asked to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitReason {
    RetryAfter,
    RateLimitReset,
    /// Nothing remaining until a reset further away than an outage or a maintenance lasts: a
    /// quota spent (per hour, per day).
    Quota,
}

impl WaitReason {
    /// The header that asked, as the log and `status` name it.
    pub fn header(self) -> &'static str {
        match self {
            WaitReason::RetryAfter => "Retry-After",
            WaitReason::RateLimitReset => "X-RateLimit-Reset",
            WaitReason::Quota => QUOTA_HEADER,
        }
    }
}

/// How a quota spent is named where only the header is kept (`status`'s `waiting_for`).
const QUOTA_HEADER: &str = "X-RateLimit-Remaining: 0";

/// The wait said for people, from the header that asked (as `status` keeps it) and its end.
pub fn said(header: &str, until: impl std::fmt::Display) -> String {
    if header == QUOTA_HEADER {
        format!("the service's quota is spent until {until} ({header})")
    } else {
        format!("the service asked to wait until {until} ({header})")
    }
}

/// The current window, when there is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub until: Instant,
    /// The same moment on the wall clock, for people.
    pub until_wall: SystemTime,
    pub reason: WaitReason,
}

impl Window {
    /// `YYYY-MM-DD HH:MM:SS UTC` of the end: a wait of a day or more is as clear as one of a
    /// minute.
    pub fn until_shown(&self) -> String {
        format!("{} UTC", crate::clock::utc_datetime(self.until_wall))
    }
}

/// The window shared by a client's clones.
#[derive(Debug)]
pub struct ServiceWait {
    /// A watch rather than a plain lock: a waiter that subscribed sees a window opened at any
    /// time after, even while it was busy with something else.
    window: tokio::sync::watch::Sender<Option<Window>>,
}

impl Default for ServiceWait {
    fn default() -> Self {
        ServiceWait {
            window: tokio::sync::watch::Sender::new(None),
        }
    }
}

impl ServiceWait {
    /// The service asked to wait `wait` from now. A window only grows: an answer to a request
    /// sent before the service's clock moved on cannot shorten it.
    pub fn hold(&self, wait: Duration, reason: WaitReason) {
        let now = crate::clock::monotonic_now();
        let until = now + wait;
        let new = Window {
            until,
            until_wall: SystemTime::now() + wait,
            reason,
        };
        let mut current = None;
        let grew = self.window.send_if_modified(|window| {
            current = window.filter(|w| w.until > now);
            if current.is_some_and(|w| w.until >= until) {
                return false;
            }
            *window = Some(new);
            true
        });
        if !grew {
            return;
        }
        // Said once per window that is long, not again when it is only pushed a little.
        let said_before = current.is_some_and(|w| until.duration_since(w.until) < SAID_FROM);
        if wait >= SAID_FROM && !said_before {
            tracing::warn!(
                until = %new.until_shown(),
                wait_secs = wait.as_secs(),
                header = reason.header(),
                "the service asked to wait; nothing is sent to it until then"
            );
        } else {
            tracing::debug!(
                wait_ms = wait.as_millis() as u64,
                header = reason.header(),
                "the service asked to wait"
            );
        }
    }

    /// The window, while it lasts.
    pub fn window(&self) -> Option<Window> {
        let window = *self.window.borrow();
        window.filter(|w| w.until > crate::clock::monotonic_now())
    }

    /// Refuses `call` locally while a window is open: [`super::ApiError::Waiting`], with what
    /// is left of it (a call made inside the window is not sent).
    pub fn refuse(&self, call: super::Call) -> Result<super::Call, super::ApiError> {
        match self.window() {
            Some(window) => Err(super::ApiError::Waiting {
                call,
                until: window.until_shown(),
                header: window.reason.header(),
                wait: window
                    .until
                    .saturating_duration_since(crate::clock::monotonic_now()),
            }),
            None => Ok(call),
        }
    }

    /// Returns once no window is open (at once when none is).
    pub async fn open(&self) {
        while let Some(window) = self.window() {
            tokio::time::sleep_until(window.until.into()).await;
        }
    }

    /// A receiver that sees every window opened or grown after this call (for a waiter that
    /// must notice one while it does something else).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Option<Window>> {
        self.window.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_only_grows_and_ends_by_itself() {
        let wait = ServiceWait::default();
        assert!(wait.window().is_none());
        wait.hold(Duration::from_secs(30), WaitReason::RetryAfter);
        let first = wait.window().expect("open");
        wait.hold(Duration::from_secs(1), WaitReason::RateLimitReset);
        assert_eq!(wait.window(), Some(first), "a shorter wait changes nothing");
        wait.hold(Duration::from_secs(60), WaitReason::RetryAfter);
        assert!(wait.window().expect("open").until > first.until);

        let short = ServiceWait::default();
        short.hold(Duration::from_millis(20), WaitReason::RetryAfter);
        std::thread::sleep(Duration::from_millis(30));
        assert!(short.window().is_none(), "over once its time has passed");
    }

    #[test]
    fn the_end_is_shown_as_a_utc_date_and_time() {
        let window = Window {
            until: Instant::now(),
            until_wall: SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_219_199),
            reason: WaitReason::RetryAfter,
        };
        assert_eq!(window.until_shown(), "2026-11-20 23:59:59 UTC");
    }

    #[tokio::test]
    async fn open_waits_out_the_window() {
        let wait = ServiceWait::default();
        wait.hold(Duration::from_millis(50), WaitReason::RetryAfter);
        let started = Instant::now();
        wait.open().await;
        assert!(started.elapsed() >= Duration::from_millis(45));
        assert!(wait.window().is_none());
    }
}
