//! The sandbox's in-memory service: vehicles, notifications and their rules.
//!
//! Owns what a request does once it is let in (create-or-modify by VIN, transitions, lists,
//! notifications) and the §2.1 representation of a vehicle. It knows nothing of HTTP, tokens,
//! rate limits or faults; `routes` does that.

use super::config::{ListShape, SandboxConfig};
use super::validate::{NotificationBody, VehicleBody};
use crate::clock::utc_datetime;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime};

/// A vehicle as the sandbox stores it.
#[derive(Debug, Clone)]
struct StoredVehicle {
    organization_id: u64,
    location_id: u64,
    /// Successful writes (create, modify, sold, in-stock) applied to it.
    writes: u64,
    /// The last accepted body, as sent (for tests: it holds fields §2.1 does not show).
    payload: Value,
    /// §2.1 representation without `image`, which appears once the images are "processed".
    representation: Map<String, Value>,
    first_image: Option<String>,
    image_ready_at: Instant,
    sold: bool,
}

#[derive(Debug, Clone, Serialize)]
struct StoredNotification {
    id: u64,
    user: u64,
    application: String,
    title: String,
    message: String,
    level: String,
    read_at: Option<String>,
    created_at: String,
}

impl StoredNotification {
    fn answer(&self) -> Value {
        json!({
            "id": self.id, "title": self.title, "message": self.message, "level": self.level,
            "read_at": self.read_at, "created_at": self.created_at,
        })
    }
}

/// Why a request could not be done: the status and the service's messages.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub status: u16,
    pub messages: Vec<String>,
}

impl Refusal {
    pub(crate) fn new(status: u16, message: impl Into<String>) -> Self {
        Refusal {
            status,
            messages: vec![message.into()],
        }
    }
}

/// One page of a list request.
#[derive(Debug, Clone, Copy)]
pub struct PageRequest {
    pub page: u64,
    pub per_page: u64,
}

/// Everything the sandbox holds.
#[derive(Debug)]
pub struct World {
    organizations: HashMap<u64, String>,
    /// location id → organization id
    locations: HashMap<u64, u64>,
    vehicles: BTreeMap<u64, StoredVehicle>,
    /// (organization, VIN upper-cased) → vehicle id: POST is create-or-modify by VIN.
    by_vin: HashMap<(u64, String), u64>,
    next_vehicle_id: u64,
    notifications: BTreeMap<u64, StoredNotification>,
    next_notification_id: u64,
}

impl World {
    pub fn new(config: &SandboxConfig) -> Self {
        World {
            organizations: config
                .organizations
                .iter()
                .map(|o| (o.id, o.name.clone()))
                .collect(),
            locations: config
                .locations
                .iter()
                .map(|l| (l.id, l.organization))
                .collect(),
            vehicles: BTreeMap::new(),
            by_vin: HashMap::new(),
            next_vehicle_id: 1,
            notifications: BTreeMap::new(),
            next_notification_id: 1,
        }
    }

    /// POST /v1/inventory: creates (true) or modifies (false) the organization's vehicle with
    /// this VIN; the body was checked already (`validate`, with `has_location`). A modify replaces every field the body can carry; id, created_at, the sold
    /// state and (when the body leaves it out) `active` stay.
    pub fn upsert(
        &mut self,
        organization_id: u64,
        raw: &Value,
        body: VehicleBody,
        image_delay: Duration,
    ) -> (Value, bool) {
        let now = SystemTime::now();
        let stamp = utc_datetime(now);
        let key = (organization_id, body.vin.to_ascii_uppercase());
        let existing = self.by_vin.get(&key).copied();
        let id = existing.unwrap_or_else(|| {
            let id = self.next_vehicle_id;
            self.next_vehicle_id += 1;
            id
        });
        let previous = existing.and_then(|id| self.vehicles.get(&id));
        let sold = previous.is_some_and(|v| v.sold);
        let created_at = previous
            .and_then(|v| v.representation.get("created_at").cloned())
            .unwrap_or_else(|| Value::String(stamp.clone()));
        let sold_at = previous
            .and_then(|v| v.representation.get("sold_at").cloned())
            .unwrap_or(Value::Null);
        let active = body
            .active
            .or_else(|| previous.and_then(|v| v.representation.get("active")?.as_bool()))
            .unwrap_or(true);
        let writes = previous.map_or(0, |v| v.writes) + 1;
        let organization = json!({
            "id": organization_id,
            "name": self.organizations.get(&organization_id).cloned().unwrap_or_default(),
        });

        let mut representation = representation(id, &body, active, organization);
        representation.insert("status".into(), status_of(sold));
        representation.insert("sold_at".into(), sold_at);
        representation.insert("created_at".into(), created_at);
        representation.insert("updated_at".into(), Value::String(stamp.clone()));

        let stored = StoredVehicle {
            organization_id,
            location_id: body.location_id,
            writes,
            payload: raw.clone(),
            first_image: body.images.first().cloned(),
            image_ready_at: Instant::now() + image_delay,
            representation,
            sold,
        };
        let mut answer = Value::Object(stored.representation.clone());
        if existing.is_none() {
            // The create answer carries the organization's timestamps too (§2.1); images are
            // processed later, so `image` is null here.
            answer["organization"]["createdAt"] = Value::String(stamp.clone());
            answer["organization"]["updatedAt"] = Value::String(stamp);
        } else {
            answer["image"] = stored.image();
        }
        self.vehicles.insert(id, stored);
        self.by_vin.insert(key, id);
        (answer, existing.is_none())
    }

    /// Whether a location exists and belongs to the organization.
    pub fn has_location(&self, organization_id: u64, location_id: u64) -> bool {
        self.locations.get(&location_id) == Some(&organization_id)
    }

    /// GET /v1/inventory/{id}.
    pub fn vehicle(&self, organization_id: u64, id: u64) -> Result<Value, Refusal> {
        let v = self.owned(organization_id, id)?;
        Ok(v.answer())
    }

    /// POST …/{id}/sold (`sold` true) or …/{id}/in-stock (false).
    pub fn transition(
        &mut self,
        organization_id: u64,
        id: u64,
        sold: bool,
        strict: bool,
    ) -> Result<Value, Refusal> {
        self.owned(organization_id, id)?;
        let v = self.vehicles.get_mut(&id).ok_or_else(|| not_found(id))?;
        if v.sold == sold {
            if strict {
                let state = if sold { "sold" } else { "in stock" };
                return Err(Refusal::new(
                    422,
                    format!("The vehicle is already {state}."),
                ));
            }
        } else {
            let stamp = utc_datetime(SystemTime::now());
            v.sold = sold;
            v.representation.insert("status".into(), status_of(sold));
            let sold_at = if sold {
                Value::String(stamp.clone())
            } else {
                Value::Null
            };
            v.representation.insert("sold_at".into(), sold_at);
            v.representation
                .insert("updated_at".into(), Value::String(stamp));
        }
        v.writes += 1;
        Ok(v.answer())
    }

    /// The organization's vehicle with the lowest id other than `except`, as GET answers it
    /// (the `wrong_vehicle` fault's answer).
    pub fn other_vehicle(&self, organization_id: u64, except: u64) -> Option<Value> {
        self.vehicles
            .iter()
            .find(|(id, v)| **id != except && v.organization_id == organization_id)
            .map(|(_, v)| v.answer())
    }

    /// GET /v1/inventory: the organization's vehicles by id, in the configured shape.
    pub fn list_vehicles(
        &self,
        organization_id: u64,
        shape: ListShape,
        page: PageRequest,
        page_url: &dyn Fn(u64) -> String,
    ) -> Value {
        let items = self
            .vehicles
            .values()
            .filter(|v| v.organization_id == organization_id);
        // Only the page's vehicles are written out: a page of a large lot costs a page.
        list(items, StoredVehicle::answer, shape, page, page_url)
    }

    /// The `n` lowest ids of an organization's vehicles (the front of its list).
    pub fn first_ids(&self, organization_id: u64, n: u64) -> Vec<u64> {
        self.vehicles
            .iter()
            .filter(|(_, v)| v.organization_id == organization_id)
            .map(|(id, _)| *id)
            .take(n as usize)
            .collect()
    }

    pub fn create_notification(
        &mut self,
        user: u64,
        application: &str,
        body: NotificationBody,
    ) -> Value {
        let id = self.next_notification_id;
        self.next_notification_id += 1;
        let n = StoredNotification {
            id,
            user,
            application: application.to_owned(),
            title: body.title,
            message: body.message,
            level: body.level,
            read_at: None,
            created_at: utc_datetime(SystemTime::now()),
        };
        let answer = n.answer();
        self.notifications.insert(id, n);
        answer
    }

    pub fn list_notifications(
        &self,
        user: u64,
        application: &str,
        shape: ListShape,
        page: PageRequest,
        page_url: &dyn Fn(u64) -> String,
    ) -> Value {
        let items = self
            .notifications
            .values()
            .filter(|n| n.user == user && n.application == application);
        list(items, StoredNotification::answer, shape, page, page_url)
    }

    pub fn read_notification(
        &mut self,
        user: u64,
        application: &str,
        id: u64,
    ) -> Result<Value, Refusal> {
        match self.notifications.get_mut(&id) {
            Some(n) if n.user == user && n.application == application => {
                if n.read_at.is_none() {
                    n.read_at = Some(utc_datetime(SystemTime::now()));
                }
                Ok(n.answer())
            }
            _ => Err(Refusal::new(404, format!("Notification {id} not found."))),
        }
    }

    /// `DELETE /__sandbox/vehicles/{id}`: the vehicle is gone, as if someone deleted it on the
    /// service. A later POST of its VIN creates a new vehicle, with a new id. Answers the
    /// vehicle as it was.
    pub fn remove(&mut self, id: u64) -> Result<Value, Refusal> {
        let v = self.vehicles.remove(&id).ok_or_else(|| not_found(id))?;
        if let Some(vin) = v.representation.get("vin").and_then(Value::as_str) {
            self.by_vin
                .remove(&(v.organization_id, vin.to_ascii_uppercase()));
        }
        Ok(v.answer())
    }

    /// `PATCH /__sandbox/vehicles/{id}`: someone edits the vehicle on the service, outside the
    /// API's rules. `sold` (true or false) moves it as the transitions would; `price` takes a
    /// number (the selling price) or an object of prices; any other field of the §2.1 answer
    /// but id, organization, status, sold_at, image and the timestamps is replaced as given.
    /// The body last sent (`payload` in the state) stays as it was, and `writes` counts only
    /// the API's writes.
    pub fn edit(&mut self, id: u64, patch: &Map<String, Value>) -> Result<Value, Refusal> {
        const FIXED: &[&str] = &[
            "id",
            "organization",
            "status",
            "sold_at",
            "image",
            "created_at",
            "updated_at",
        ];
        let v = self.vehicles.get_mut(&id).ok_or_else(|| not_found(id))?;
        let mut problems = Vec::new();
        for (key, value) in patch {
            match key.as_str() {
                "sold" if !value.is_boolean() => {
                    problems.push("sold must be true or false.".to_owned());
                }
                "price" if !(value.is_number() || value.is_object() || value.is_null()) => {
                    problems.push("price must be a number, an object of prices or null.".into());
                }
                "sold" | "price" => {}
                other if FIXED.contains(&other) || !v.representation.contains_key(other) => {
                    problems.push(format!("{other} cannot be edited."));
                }
                _ => {}
            }
        }
        if !problems.is_empty() {
            return Err(Refusal {
                status: 422,
                messages: problems,
            });
        }
        let stamp = utc_datetime(SystemTime::now());
        for (key, value) in patch {
            match (key.as_str(), value) {
                ("sold", Value::Bool(sold)) => {
                    if v.sold != *sold {
                        v.sold = *sold;
                        let sold_at = if *sold {
                            Value::String(stamp.clone())
                        } else {
                            Value::Null
                        };
                        v.representation.insert("sold_at".into(), sold_at);
                    }
                    v.representation.insert("status".into(), status_of(*sold));
                }
                ("price", Value::Number(n)) => {
                    v.representation
                        .insert("price".into(), json!({"selling": n}));
                }
                (key, value) => {
                    v.representation.insert(key.to_owned(), value.clone());
                }
            }
        }
        v.representation
            .insert("updated_at".into(), Value::String(stamp));
        Ok(v.answer())
    }

    /// Everything, for `GET /__sandbox/state`.
    pub fn snapshot(&self) -> Value {
        let vehicles: Vec<Value> = self
            .vehicles
            .values()
            .map(|v| {
                json!({
                    "organization_id": v.organization_id,
                    "location_id": v.location_id,
                    "writes": v.writes,
                    "vehicle": v.answer(),
                    "payload": v.payload,
                })
            })
            .collect();
        let notifications: Vec<&StoredNotification> = self.notifications.values().collect();
        json!({ "vehicles": vehicles, "notifications": notifications })
    }

    fn owned(&self, organization_id: u64, id: u64) -> Result<&StoredVehicle, Refusal> {
        match self.vehicles.get(&id) {
            Some(v) if v.organization_id == organization_id => Ok(v),
            _ => Err(not_found(id)),
        }
    }
}

impl StoredVehicle {
    fn image(&self) -> Value {
        match &self.first_image {
            Some(url) if Instant::now() >= self.image_ready_at => Value::String(url.clone()),
            _ => Value::Null,
        }
    }

    fn answer(&self) -> Value {
        let mut v = Value::Object(self.representation.clone());
        v["image"] = self.image();
        v
    }
}

fn not_found(id: u64) -> Refusal {
    Refusal::new(404, format!("Vehicle {id} not found."))
}

fn status_of(sold: bool) -> Value {
    Value::String(if sold { "sold" } else { "in-stock" }.into())
}

/// The §2.1 fields that follow from the body (all but status, sold_at and the timestamps).
fn representation(
    id: u64,
    body: &VehicleBody,
    active: bool,
    organization: Value,
) -> Map<String, Value> {
    let year = body.year.map(|y| y.to_string());
    let name = [
        year.as_deref(),
        body.make.as_deref(),
        body.model.as_deref(),
        body.trim.as_deref(),
    ]
    .into_iter()
    .flatten()
    .map(str::trim)
    .filter(|s| !s.is_empty())
    .collect::<Vec<_>>()
    .join(" ");
    let speed = body
        .transmission_speed
        .as_deref()
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok());
    let odometer = body
        .miles
        .map_or(Value::Null, |m| json!({"value": m, "unit": "mi"}));
    let doors = body.doors.map(|d| {
        if d.fract() == 0.0 {
            json!(d as u64)
        } else {
            json!(d)
        }
    });
    let value = json!({
        "id": id,
        "active": active,
        "title_status": body.title_status,
        "type": body.vehicle_type,
        "stock": body.stock,
        "vin": body.vin,
        "name": name,
        "slug": slug(&name),
        "price": body.price,
        "year": year,
        "make": body.make,
        "model": body.model,
        "trim": body.trim,
        "body_style": body.body_style,
        "lifted": body.lifted.unwrap_or(false),
        "lowered": body.lowered.unwrap_or(false),
        "exterior": {"color": body.exterior_color, "manufacturer_color": null},
        "interior": {
            "type": body.interior_type, "color": body.interior_color, "manufacturer_color": null
        },
        "odometer": odometer,
        "image": null,
        "owners": null,
        "doors": doors,
        "seats": body.seats,
        "drivetrain": body.drive_type,
        "transmission": {"name": null, "type": body.transmission_type, "speed": speed},
        "engine": {
            "name": null, "displacement": body.engine_displacement,
            "cylinders": body.engine_cylinders
        },
        "description": null,
        "options": body.options,
        "stocked_in_at": null,
        "organization": organization,
    });
    match value {
        Value::Object(map) => map,
        // json! of an object literal is always an object.
        _ => Map::new(),
    }
}

/// The lower-case URL form of a name: letters and digits, runs of anything else as one `-`.
fn slug(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

/// A list in one of the three shapes. `page_url(n)` is the absolute address of page n.
fn list<T>(
    items: impl Iterator<Item = T> + Clone,
    answer: impl Fn(T) -> Value,
    shape: ListShape,
    page: PageRequest,
    page_url: &dyn Fn(u64) -> String,
) -> Value {
    if shape == ListShape::Bare {
        return Value::Array(items.map(answer).collect());
    }
    let total = items.clone().count() as u64;
    let per_page = page.per_page.max(1);
    let last_page = total.div_ceil(per_page).max(1);
    let current = page.page.max(1);
    let start = ((current - 1).saturating_mul(per_page)).min(total) as usize;
    let data: Vec<Value> = items
        .skip(start)
        .take(per_page as usize)
        .map(answer)
        .collect();
    let next = (current < last_page).then(|| page_url(current + 1));
    match shape {
        ListShape::Paginator => json!({
            "current_page": current, "data": data, "last_page": last_page,
            "next_page_url": next, "per_page": per_page, "total": total,
        }),
        _ => json!({
            "data": data,
            "links": {"next": next},
            "meta": {"current_page": current, "last_page": last_page, "per_page": per_page, "total": total},
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::validate::vehicle_body;
    use super::*;

    fn world() -> World {
        World::new(&SandboxConfig::default())
    }

    fn body(v: Value) -> (Value, VehicleBody) {
        let parsed = vehicle_body(&v, &|_| true).unwrap();
        (v, parsed)
    }

    #[test]
    fn create_then_modify_keeps_the_id() {
        let mut w = world();
        let (raw, b) = body(
            json!({"location_id": 10, "stock": "S1", "vin": "abc123", "year": 2020,
            "make": "Ford", "model": "F-150", "trim": " XLT ", "miles": 12, "price": 100,
            "transmission_speed": "6 Speed", "images": "http://i/1.jpg,http://i/2.jpg"}),
        );
        let (created, is_new) = w.upsert(100, &raw, b, Duration::ZERO);
        assert!(is_new);
        assert_eq!(created["name"], "2020 Ford F-150 XLT");
        assert_eq!(created["slug"], "2020-ford-f-150-xlt");
        assert_eq!(created["odometer"], json!({"value": 12, "unit": "mi"}));
        assert_eq!(created["price"], json!({"selling": 100}));
        assert_eq!(created["transmission"]["speed"], 6);
        assert_eq!(created["image"], Value::Null);
        assert_eq!(created["status"], "in-stock");
        assert!(created["organization"]["createdAt"].is_string());

        let (raw, b) = body(json!({"location_id": 11, "stock": "S1", "vin": "ABC123"}));
        let (modified, is_new) = w.upsert(100, &raw, b, Duration::ZERO);
        assert!(!is_new);
        assert_eq!(modified["id"], created["id"]);
        assert_eq!(modified["make"], Value::Null);
        assert_eq!(modified["image"], Value::Null);
        assert!(modified["organization"].get("createdAt").is_none());
    }

    #[test]
    fn same_vin_in_another_organization_is_another_vehicle() {
        let mut w = world();
        let (raw, b) = body(json!({"location_id": 10, "stock": "S", "vin": "V"}));
        let (a, _) = w.upsert(100, &raw, b, Duration::ZERO);
        let (raw, b) = body(json!({"location_id": 20, "stock": "S", "vin": "V"}));
        let (c, is_new) = w.upsert(200, &raw, b, Duration::ZERO);
        assert!(is_new);
        assert_ne!(a["id"], c["id"]);
    }

    #[test]
    fn locations_belong_to_their_organization() {
        let w = world();
        assert!(w.has_location(100, 10));
        assert!(!w.has_location(100, 20));
        assert!(!w.has_location(100, 99));
    }

    #[test]
    fn transitions_set_sold_at_and_strict_mode_refuses_repeats() {
        let mut w = world();
        let (raw, b) = body(json!({"location_id": 10, "stock": "S", "vin": "V"}));
        let (v, _) = w.upsert(100, &raw, b, Duration::ZERO);
        let id = v["id"].as_u64().unwrap();
        let sold = w.transition(100, id, true, true).unwrap();
        assert_eq!(sold["status"], "sold");
        assert!(sold["sold_at"].is_string());
        assert_eq!(w.transition(100, id, true, true).unwrap_err().status, 422);
        assert_eq!(
            w.transition(100, id, true, false).unwrap()["sold_at"],
            sold["sold_at"]
        );
        let back = w.transition(100, id, false, true).unwrap();
        assert_eq!(back["status"], "in-stock");
        assert_eq!(back["sold_at"], Value::Null);
        assert_eq!(w.transition(200, id, true, false).unwrap_err().status, 404);
        assert_eq!(w.transition(100, 999, true, false).unwrap_err().status, 404);
    }

    #[test]
    fn admin_edits_and_deletes_act_outside_the_api() {
        let mut w = world();
        let (raw, b) = body(json!({"location_id": 10, "stock": "S", "vin": "V1", "price": 100}));
        let (v, _) = w.upsert(100, &raw, b, Duration::ZERO);
        let id = v["id"].as_u64().unwrap();
        let patch = json!({"price": 90, "sold": true, "make": "Fjord"});
        let edited = w.edit(id, patch.as_object().unwrap()).unwrap();
        assert_eq!(edited["price"], json!({"selling": 90}));
        assert_eq!(edited["status"], "sold");
        assert!(edited["sold_at"].is_string());
        assert_eq!(edited["make"], "Fjord");
        let snapshot = w.snapshot();
        assert_eq!(
            snapshot["vehicles"][0]["payload"]["price"], 100,
            "the body sent stays"
        );
        assert_eq!(
            snapshot["vehicles"][0]["writes"], 1,
            "an edit is not an API write"
        );
        let back = w
            .edit(id, json!({"sold": false}).as_object().unwrap())
            .unwrap();
        assert_eq!(back["status"], "in-stock");
        assert_eq!(back["sold_at"], Value::Null);
        let refused = w
            .edit(
                id,
                json!({"id": 5, "colour": "red", "sold": 1})
                    .as_object()
                    .unwrap(),
            )
            .unwrap_err();
        assert_eq!(refused.status, 422);
        assert_eq!(refused.messages.len(), 3, "{:?}", refused.messages);
        assert_eq!(w.edit(999, &Map::new()).unwrap_err().status, 404);

        w.remove(id).unwrap();
        assert_eq!(w.vehicle(100, id).unwrap_err().status, 404);
        assert_eq!(w.remove(id).unwrap_err().status, 404);
        let (raw, b) = body(json!({"location_id": 10, "stock": "S", "vin": "v1"}));
        let (again, created) = w.upsert(100, &raw, b, Duration::ZERO);
        assert!(created, "the VIN is free again");
        assert_ne!(again["id"], v["id"]);
    }

    #[test]
    fn pages_cover_every_item_once() {
        let url = |p: u64| format!("http://h/v1/inventory?page={p}");
        let items = || 0..7;
        let answer = |i: i32| json!({"id": i});
        let page = |p| PageRequest {
            page: p,
            per_page: 3,
        };
        let first = list(items(), answer, ListShape::Paginator, page(1), &url);
        assert_eq!(first["last_page"], 3);
        assert_eq!(first["next_page_url"], "http://h/v1/inventory?page=2");
        let last = list(items(), answer, ListShape::Resource, page(3), &url);
        assert_eq!(last["data"], json!([{"id": 6}]));
        assert_eq!(last["links"]["next"], Value::Null);
        let beyond = list(items(), answer, ListShape::Paginator, page(9), &url);
        assert_eq!(beyond["data"], json!([]));
        let bare = list(items(), answer, ListShape::Bare, page(2), &url);
        assert_eq!(bare.as_array().unwrap().len(), 7);
    }
}
