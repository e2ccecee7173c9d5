//! The service's own list, read before the first diff of an organization the state knows no
//! vehicle of (a new install beside a service that already holds the lot, or a state rebuilt
//! from nothing), so that an empty state never plans blind: see [`crate::diff::Listed`].

use crate::api::{ApiClient, ApiError};
use crate::config::Config;
use crate::diff::Listed;
use crate::mapper::Profile;
use crate::outbox::Outbox;
use crate::state::StateError;
use std::collections::{BTreeSet, HashMap};

/// The list cannot be read; the file waits (nothing is planned blind).
#[derive(Debug, thiserror::Error)]
pub enum ServiceListError {
    #[error(
        "the state knows no vehicle of organization {organization_id}, so the service's list \
         is read before the first file, and it cannot be: {error}"
    )]
    List {
        organization_id: u64,
        error: Box<ApiError>,
    },
    #[error(transparent)]
    State(#[from] StateError),
    #[error("{0}")]
    Other(String),
}

/// The service's list when the state knows no vehicle of the organization; None otherwise.
pub async fn listed_if_state_is_empty(
    client: &ApiClient,
    outbox: &Outbox,
    config: &Config,
) -> Result<Option<Listed>, ServiceListError> {
    let org = client.organization_id();
    // One key looked up: quick enough for an async thread.
    if outbox.state().knows_organization(org)? {
        return Ok(None);
    }
    let vehicles = super::reconcile::list_vehicles(client, &config.api)
        .await
        .map_err(|e| match e {
            super::ReconcileError::List(error) => ServiceListError::List {
                organization_id: org,
                error,
            },
            other => ServiceListError::Other(other.to_string()),
        })?;
    let mut by_vin = HashMap::new();
    let mut doubled = 0;
    for vehicle in vehicles {
        let of_org = vehicle
            .organization
            .as_ref()
            .and_then(|o| o.id)
            .is_none_or(|id| id == org as f64);
        let Some(vin) = vehicle
            .vin
            .as_deref()
            .map(|v| v.trim().to_ascii_uppercase())
        else {
            continue;
        };
        if !of_org || vin.is_empty() {
            continue;
        }
        if by_vin.contains_key(&vin) {
            doubled += 1;
            continue;
        }
        by_vin.insert(vin, vehicle);
    }
    let locations = organization_locations(config);
    let sole_location = (locations.len() == 1)
        .then(|| locations.first().copied())
        .flatten();
    tracing::info!(
        organization_id = org,
        vehicles = by_vin.len(),
        sole_location = ?sole_location,
        "the state knows no vehicle of the organization: read the service's list before its first file"
    );
    if doubled > 0 {
        tracing::warn!(
            vehicles = doubled,
            "the service lists some VINs more than once; the first of each is adopted"
        );
    }
    Ok(Some(Listed {
        vehicles: by_vin,
        sole_location,
    }))
}

/// Every location the config's feeds put vehicles at: their own and their profiles' lots.
fn organization_locations(config: &Config) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    for feed in &config.feeds {
        out.insert(feed.location_id);
        match Profile::find(&feed.profile, &config.profiles_dir) {
            Ok(profile) => out.extend(profile.locations.values().copied()),
            // A profile that cannot be read: its lots are unknown, so no lot is the only one.
            Err(_) => {
                out.insert(u64::MAX);
            }
        }
    }
    out
}
