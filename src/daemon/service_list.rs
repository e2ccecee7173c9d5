//! The service's own list, read before a feed's first diff at a location the state knows no
//! vehicle at (a new install beside a service that already holds the lot, a lot new to
//! lotsync, or a state rebuilt from nothing), so that an empty state never plans blind: see [`crate::diff::Listed`].

use crate::api::{ApiClient, ApiError, Vehicle};
use crate::config::Config;
use crate::diff::Listed;
use crate::reconcile::ListError;
use crate::state::StateError;
use crate::upload::pace::Pace;
use std::collections::HashMap;

/// The list cannot be read; the file waits (nothing is planned blind).
#[derive(Debug, thiserror::Error)]
pub enum ServiceListError {
    #[error(
        "the state knows no vehicle at a location of this feed (organization \
         {organization_id}), so the service's list is read before its first file there, and it \
         cannot be: {error}"
    )]
    List {
        organization_id: u64,
        error: Box<ApiError>,
    },
    /// Given up on (nothing answered for `give_up_after_secs`, or a longer wait asked), or a
    /// list that does not end.
    #[error(
        "the state knows no vehicle at a location of this feed (organization \
         {organization_id}), so the service's list is read before its first file there, and it \
         cannot be: {error}"
    )]
    Unread {
        organization_id: u64,
        error: Box<ListError>,
    },
    #[error(transparent)]
    State(#[from] StateError),
}

/// The service's list for the first file of a feed at a location the state knows no vehicle
/// at (the caller checks that with [`crate::state::State::knows_locations`], and holds no
/// state lock meanwhile if it can: this reads every page). The pages are read at `pace`, the
/// uploader's of the same token (a one-shot command without one builds one from the config,
/// [`Pace::configured`]), each failed page again alone, giving up after
/// `api.give_up_after_secs` without an answer. A VIN listed more than once is left alone, as
/// the reconciliation does: a person sorts it out.
pub async fn read_service_list(
    client: &ApiClient,
    pace: &Pace,
    config: &Config,
) -> Result<Listed, ServiceListError> {
    let org = client.organization_id();
    let read = crate::reconcile::organization_vehicles(client, pace, &config.api)
        .await
        .map_err(|e| match e {
            ListError::Api(error) => ServiceListError::List {
                organization_id: org,
                error,
            },
            other => ServiceListError::Unread {
                organization_id: org,
                error: Box::new(other),
            },
        })?;
    for note in &read.notes {
        tracing::info!(organization_id = org, note = %note, "about the service's list");
    }
    let vehicles = read.vehicles;
    let mut listed: HashMap<String, Vec<Vehicle>> = HashMap::new();
    for vehicle in vehicles {
        if let Some(vin) = crate::reconcile::listed_vin(&vehicle) {
            listed.entry(vin).or_default().push(vehicle);
        }
    }
    let mut doubled = Vec::new();
    let mut by_vin = HashMap::with_capacity(listed.len());
    for (vin, mut found) in listed {
        match found.pop() {
            Some(vehicle) if found.is_empty() => {
                by_vin.insert(vin, vehicle);
            }
            _ => doubled.push(vin),
        }
    }
    tracing::info!(
        organization_id = org,
        vehicles = by_vin.len(),
        pages = read.pages,
        retries = read.retries,
        "the state knows no vehicle at a location of the feed: read the service's list before its first file there"
    );
    if !doubled.is_empty() {
        doubled.sort();
        tracing::warn!(
            vins = %doubled.join(","),
            "the service lists these VINs more than once; they are left alone"
        );
    }
    Ok(Listed { vehicles: by_vin })
}
