//! The state's side of the reconciliation: the organization's vehicles as the comparison sees
//! them ([`Known`]), and what each record looked like before the service's list was read
//! ([`Versions`]), so that a vehicle whose record changed meanwhile is left to the next run.
//!
//! It reads the state (and refuses a rebuild of a state that is not empty); the comparison is
//! [`super::compare`]'s, and it writes nothing.

use super::ReconcileError;
use crate::api::VehiclePayload;
use crate::outbox::Outbox;
use crate::state::{VehicleKey, VehicleRecord};
use std::collections::HashMap;

/// What each record of the organization looked like before the list was read: (last answered
/// operation, last change, queued operations).
pub(super) type Versions = HashMap<String, (u64, i64, u32)>;

pub(super) fn versions(
    outbox: &Outbox,
    org: u64,
    rebuild: bool,
) -> Result<Versions, ReconcileError> {
    let state = outbox.state();
    if rebuild && (state.vehicle_count() > 0 || !outbox.is_empty()) {
        return Err(ReconcileError::NotEmpty {
            dir: state.dir().to_owned(),
            vehicles: state.vehicle_count(),
            queued: outbox.len(),
        });
    }
    Ok(known_vehicles(outbox, org)?
        .into_iter()
        .map(|k| {
            let r = &k.record;
            (k.key.vin, (r.acked_seq, r.updated_at, r.queued))
        })
        .collect())
}

/// A vehicle of the state, as the comparison sees it.
#[derive(Debug, Clone)]
pub(super) struct Known {
    pub(super) key: VehicleKey,
    pub(super) record: VehicleRecord,
    pub(super) payload: Option<VehiclePayload>,
}

pub(super) fn known_vehicles(outbox: &Outbox, org: u64) -> Result<Vec<Known>, ReconcileError> {
    let mut out = Vec::new();
    for stored in outbox.state().vehicles() {
        let stored = stored?;
        if stored.key.organization_id == org {
            out.push(Known {
                key: stored.key,
                record: stored.record,
                payload: stored.payload,
            });
        }
    }
    Ok(out)
}
