//! A vehicle's identity in the state: the key of its rows in `vehicles` and `payloads`.

/// A vehicle's identity: (organization, location, VIN upper-cased).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VehicleKey {
    pub organization_id: u64,
    pub location_id: u64,
    pub vin: String,
}

impl VehicleKey {
    pub fn new(organization_id: u64, location_id: u64, vin: &str) -> VehicleKey {
        VehicleKey {
            organization_id,
            location_id,
            vin: vin.to_owned(),
        }
    }
}
