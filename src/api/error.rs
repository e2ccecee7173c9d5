//! `ApiError`: what went wrong with a call, already classed as retryable, rejected or fatal.
//!
//! The class is decided here, once, from the HTTP status or the transport failure; callers
//! (uploader, reconciliation, CLI) act on the class and never look at raw statuses. No variant
//! holds the API token or a request header, so neither Display nor Debug can print it.

use super::RateLimit;
use std::fmt;
use std::time::{Duration, SystemTime};

/// What a caller should do about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// Try the same call again later: 429, 500, 502, 503, 504, timeouts, broken connections.
    Retryable,
    /// The request itself is wrong (400, 404 on a resource, 422): never retried as it is.
    Rejected,
    /// Nothing will work until someone fixes the setup (401, 403, wrong address): stop.
    Fatal,
}

/// The call that failed, as `METHOD /path?query`: enough to find it, nothing secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub method: &'static str,
    pub path: String,
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

/// An error from the Vehicle Inventory Service client.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// A passing failure; `retry_after` is the service's own wait when it sent one.
    #[error("{call}: {reason}{}{}.", said(.messages), retry_hint(.retry_after))]
    Retryable {
        call: Call,
        status: Option<u16>,
        messages: Vec<String>,
        retry_after: Option<Duration>,
        /// `X-RateLimit-*` of the answer, when sent (a 429 that says tokens remain is not
        /// about the caller's rate). Boxed to keep every `Result<_, ApiError>` small.
        rate_limit: Option<Box<RateLimit>>,
        reason: String,
    },
    /// The service refused this request as wrong; the messages say why.
    #[error("{call} was rejected ({status}){}.", said(.messages))]
    Rejected {
        call: Call,
        status: u16,
        messages: Vec<String>,
    },
    /// Delivery cannot go on until the setup is fixed; `fix` says what to do.
    #[error("{call}: {reason}{}. To fix: {fix}.", said(.messages))]
    Fatal {
        call: Call,
        status: Option<u16>,
        messages: Vec<String>,
        reason: String,
        fix: String,
    },
    /// Not sent: the service asked this token to wait until `until` (a Retry-After it
    /// gave another call); `wait` is what is left of it. Passing, like the refusal it avoids.
    #[error("{call}: not sent: the service asked to wait until {until} ({header}).")]
    Waiting {
        call: Call,
        until: String,
        header: &'static str,
        wait: Duration,
    },
    /// Not sent: delivery is stopping (a fatal answer, giving up, a long wait of the
    /// service), so requests not yet on their way stay in the outbox. Passing.
    #[error("not sent: delivery stopped")]
    Stopped,
    /// The client could not be set up from its settings (before any call).
    #[error("API client setup: {0}")]
    Setup(String),
}

impl ApiError {
    pub fn class(&self) -> ErrorClass {
        match self {
            ApiError::Retryable { .. } | ApiError::Waiting { .. } | ApiError::Stopped => {
                ErrorClass::Retryable
            }
            ApiError::Rejected { .. } => ErrorClass::Rejected,
            ApiError::Fatal { .. } | ApiError::Setup(_) => ErrorClass::Fatal,
        }
    }

    /// The HTTP status, when the service answered at all.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Retryable { status, .. } | ApiError::Fatal { status, .. } => *status,
            ApiError::Rejected { status, .. } => Some(*status),
            ApiError::Waiting { .. } | ApiError::Stopped | ApiError::Setup(_) => None,
        }
    }

    /// The service's `errors.messages`, in order.
    pub fn messages(&self) -> &[String] {
        match self {
            ApiError::Retryable { messages, .. }
            | ApiError::Rejected { messages, .. }
            | ApiError::Fatal { messages, .. } => messages,
            ApiError::Waiting { .. } | ApiError::Stopped | ApiError::Setup(_) => &[],
        }
    }

    /// The service's Retry-After, when it sent one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ApiError::Retryable { retry_after, .. } => *retry_after,
            ApiError::Waiting { wait, .. } => Some(*wait),
            _ => None,
        }
    }

    /// `X-RateLimit-*` of a retryable answer, when the service sent them.
    pub fn rate_limit(&self) -> Option<RateLimit> {
        match self {
            ApiError::Retryable { rate_limit, .. } => rate_limit.as_deref().copied(),
            _ => None,
        }
    }

    /// Classes an error answer. `resource_call` says whether the URL names one resource by id,
    /// where a 404 means "no such vehicle" rather than "no such endpoint".
    pub(crate) fn from_status(
        call: Call,
        status: u16,
        messages: Vec<String>,
        retry_after: Option<Duration>,
        rate_limit: Option<RateLimit>,
        organization_id: u64,
        resource_call: bool,
    ) -> ApiError {
        let rate_limit = rate_limit.map(Box::new);
        match status {
            401 => ApiError::Fatal {
                call,
                status: Some(status),
                messages,
                reason: "the service did not accept the API token (401)".into(),
                fix: "make a token in the service's account settings under API Tokens and \
                      write it to api.token_file, then run `systemctl reload lotsync` (SIGHUP): \
                      lotsync reads the file again on reload and before it retries, no restart \
                      needed (a token from api.token_env or the systemd credential needs \
                      `systemctl restart lotsync`)"
                    .into(),
            },
            403 => ApiError::Fatal {
                call,
                status: Some(status),
                messages,
                reason: format!(
                    "the token's user has no access to organization {organization_id} (403)"
                ),
                fix: format!(
                    "check api.organization_id ({organization_id}), or ask an administrator of \
                     that organization to give the token's user access"
                ),
            },
            404 if !resource_call => ApiError::Fatal {
                call,
                status: Some(status),
                messages,
                reason: "the service has no such endpoint (404)".into(),
                fix: "check api.base_url and api.version".into(),
            },
            429 => ApiError::Retryable {
                call,
                status: Some(status),
                messages,
                retry_after,
                rate_limit,
                reason: "rate limited (429)".into(),
            },
            // 5xx are the server's trouble and pass, proxies' 52x included; 501 and 505 say the
            // call itself is one the service will never handle (below).
            408 | 500 | 502..=504 | 506..=599 => ApiError::Retryable {
                call,
                status: Some(status),
                messages,
                retry_after,
                rate_limit,
                reason: format!("service unavailable for now ({status})"),
            },
            300..=399 => ApiError::Fatal {
                call,
                status: Some(status),
                messages,
                reason: format!("the service answered with a redirect ({status})"),
                fix: "set api.base_url to the address the service redirects to".into(),
            },
            501 | 505 => ApiError::Fatal {
                call,
                status: Some(status),
                messages,
                reason: format!("the service cannot handle this call ({status})"),
                fix: "check api.base_url and api.version".into(),
            },
            _ => ApiError::Rejected {
                call,
                status,
                messages,
            },
        }
    }
}

/// Reads a Retry-After value: delay-seconds or an HTTP date (RFC 9110 §10.2.3).
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// `: message one. message two` (without a closing full stop, which the caller adds or not).
fn said(messages: &[String]) -> String {
    if messages.is_empty() {
        String::new()
    } else {
        format!(": {}", messages.join(" ").trim_end_matches('.'))
    }
}

fn retry_hint(retry_after: &Option<Duration>) -> String {
    match retry_after {
        Some(d) => format!(" (retry after {}s)", d.as_secs_f64()),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> Call {
        Call {
            method: "POST",
            path: "/v1/inventory".into(),
        }
    }

    #[test]
    fn statuses_fall_into_their_classes() {
        let class = |status, resource| {
            ApiError::from_status(call(), status, vec![], None, None, 100, resource).class()
        };
        for s in [429, 500, 502, 503, 504, 507, 520, 524, 529] {
            assert_eq!(class(s, false), ErrorClass::Retryable, "{s}");
        }
        for s in [400, 422] {
            assert_eq!(class(s, false), ErrorClass::Rejected, "{s}");
        }
        assert_eq!(class(404, true), ErrorClass::Rejected);
        assert_eq!(class(404, false), ErrorClass::Fatal);
        for s in [401, 403, 301, 501] {
            assert_eq!(class(s, false), ErrorClass::Fatal, "{s}");
        }
    }

    #[test]
    fn fatal_messages_say_what_to_fix() {
        let e = ApiError::from_status(
            call(),
            403,
            vec!["User does not have access to this organization.".into()],
            None,
            None,
            200,
            false,
        );
        let text = e.to_string();
        assert!(text.contains("organization 200"), "{text}");
        assert!(text.contains("api.organization_id"), "{text}");
        assert!(!text.contains('\n'));
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(parse_retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(30))
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(parse_retry_after(&past, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
