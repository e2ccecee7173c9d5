//! Byte keys of the state's trees: big-endian numbers, so sled's order is numeric order and a
//! location's vehicles are one prefix.

use super::StateError;

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

    /// The key in the `vehicles` and `payloads` trees.
    pub fn bytes(&self) -> Vec<u8> {
        vehicle_key(self.organization_id, self.location_id, &self.vin)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<VehicleKey, StateError> {
        if bytes.len() < 16 {
            return Err(StateError::Decode {
                what: "vehicle key",
                source: format!("{} bytes, expected at least 16", bytes.len()).into(),
            });
        }
        let organization_id = super::decode_u64(&bytes[..8], "vehicle key")?;
        let location_id = super::decode_u64(&bytes[8..16], "vehicle key")?;
        let vin = String::from_utf8_lossy(&bytes[16..]).into_owned();
        Ok(VehicleKey {
            organization_id,
            location_id,
            vin,
        })
    }
}

pub fn vehicle_key(organization_id: u64, location_id: u64, vin: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(16 + vin.len());
    key.extend_from_slice(&organization_id.to_be_bytes());
    key.extend_from_slice(&location_id.to_be_bytes());
    key.extend_from_slice(vin.as_bytes());
    key
}

/// The prefix of every vehicle at a location.
pub fn location_prefix(organization_id: u64, location_id: u64) -> [u8; 16] {
    let mut key = [0; 16];
    key[..8].copy_from_slice(&organization_id.to_be_bytes());
    key[8..].copy_from_slice(&location_id.to_be_bytes());
    key
}

/// The `queue` index key: (organization, VIN, seq), the VIN length-prefixed so one VIN's
/// prefix never matches another's.
pub(crate) fn queue_key(organization_id: u64, vin: &str, seq: u64) -> Vec<u8> {
    let mut key = queue_prefix(organization_id, vin);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The prefix of every `queue` key of one vehicle.
pub(crate) fn queue_prefix(organization_id: u64, vin: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(8 + 1 + vin.len() + 8);
    key.extend_from_slice(&organization_id.to_be_bytes());
    key.push(u8::try_from(vin.len()).unwrap_or(u8::MAX));
    key.extend_from_slice(vin.as_bytes());
    key
}

/// The key in the `vins` index: (organization, VIN).
pub fn vin_key(organization_id: u64, vin: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(8 + vin.len());
    key.extend_from_slice(&organization_id.to_be_bytes());
    key.extend_from_slice(vin.as_bytes());
    key
}

/// The key of one event in the `history` tree: (time, organization, VIN length, VIN, tag,
/// index). Time first, so new events go to the tree's end (a write touches its last pages,
/// not one page per vehicle across the tree) and the events too old to keep are one range at
/// its start; `tag` (the operation's sequence number, or the plan's file number) and `index`
/// (the event's place among those written together) keep two events of one second apart.
pub fn history_key(at: i64, organization_id: u64, vin: &str, tag: u64, index: u8) -> Vec<u8> {
    let vehicle = history_vehicle(organization_id, vin);
    let mut key = Vec::with_capacity(8 + vehicle.len() + 9);
    key.extend_from_slice(&(at.max(0) as u64).to_be_bytes());
    key.extend_from_slice(&vehicle);
    key.extend_from_slice(&tag.to_be_bytes());
    key.push(index);
    key
}

/// The vehicle's part of a history key: (organization, VIN length, VIN).
pub fn history_vehicle(organization_id: u64, vin: &str) -> Vec<u8> {
    let mut part = Vec::with_capacity(9 + vin.len());
    part.extend_from_slice(&organization_id.to_be_bytes());
    part.push(u8::try_from(vin.len()).unwrap_or(u8::MAX));
    part.extend_from_slice(vin.as_bytes());
    part
}

/// A history key's time and tag (see [`history_key`]); zero for a part a short key lacks.
pub fn history_key_parts(key: &[u8]) -> (i64, u64) {
    let at = key.first_chunk::<8>().map_or(0, |b| u64::from_be_bytes(*b));
    let tag = key
        .len()
        .checked_sub(9)
        .and_then(|start| key.get(start..start + 8))
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0, u64::from_be_bytes);
    (i64::try_from(at).unwrap_or(i64::MAX), tag)
}

/// Whether a history key is one of this vehicle's (`vehicle` from [`history_vehicle`]).
pub fn is_history_of(key: &[u8], vehicle: &[u8]) -> bool {
    key.len() == 8 + vehicle.len() + 9 && key.get(8..8 + vehicle.len()) == Some(vehicle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_sort_by_location() {
        let key = VehicleKey::new(100, 10, "1HGCM82633A004352");
        assert_eq!(VehicleKey::from_bytes(&key.bytes()).unwrap(), key);
        assert!(vehicle_key(100, 9, "Z") < vehicle_key(100, 10, "A"));
        assert!(key.bytes().starts_with(&location_prefix(100, 10)));
    }

    #[test]
    fn a_history_key_gives_back_its_time_and_tag() {
        let key = history_key(1_764_115_200, 100, "1HGCM82633A004352", 4711, 255);
        assert_eq!(history_key_parts(&key), (1_764_115_200, 4711));
        assert!(is_history_of(
            &key,
            &history_vehicle(100, "1HGCM82633A004352")
        ));
    }
}
