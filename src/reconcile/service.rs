//! The service's side of the reconciliation: the organization's vehicles in the service's
//! whole list, read with the uploader's retries, and the VIN a listed vehicle is known by.
//!
//! It reads the list; what is made of it is [`super::compare`]'s (and, before the first diff of
//! an empty state, the daemon's `read_service_list`'s). It writes nothing.

use crate::api::{ApiClient, ApiError, ErrorClass, Vehicle};
use crate::config::ApiConfig;
use crate::text::Chain;
use backon::Retryable;
use std::time::Duration;

/// The organization's vehicles in the service's whole list (a service may list others'),
/// retried as the uploader retries a call (a 429 or a 503 on the 40th page should not cost the
/// night's reconciliation).
pub(crate) async fn organization_vehicles(
    client: &ApiClient,
    api: &ApiConfig,
) -> Result<Vec<Vehicle>, ApiError> {
    let org = client.organization_id();
    let backoff = backon::ExponentialBuilder::default()
        .with_jitter()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(30))
        .with_max_times(api.max_attempts.saturating_sub(1) as usize);
    let answer = (|| client.list_vehicles())
        .retry(backoff)
        .when(|e: &ApiError| e.class() == ErrorClass::Retryable)
        .adjust(|e: &ApiError, wait| wait.map(|w| e.retry_after().map_or(w, |r| r.max(w))))
        .notify(|e: &ApiError, wait| {
            tracing::warn!(error = %Chain(e), wait_ms = wait.as_millis() as u64, "listing the service's vehicles again");
        })
        .await?;
    Ok(answer
        .value
        .into_iter()
        .filter(|v| {
            v.organization
                .as_ref()
                .and_then(|o| o.id)
                .is_none_or(|id| id == org as f64)
        })
        .collect())
}

/// A listed vehicle's VIN as the state keys it (trimmed, upper-cased); None without one.
pub(crate) fn listed_vin(vehicle: &Vehicle) -> Option<String> {
    vehicle
        .vin
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_ascii_uppercase)
}
