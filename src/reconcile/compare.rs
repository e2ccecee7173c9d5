//! The comparison: the service's list against the state's vehicles (and, for those the state
//! lacks, the archive's listings), into the drift as a table by kind ([`Repairs`]), the findings
//! that need no request, and the repairs as one plan of the pseudo-feed [`RECONCILE_FEED`].
//!
//! Plain: it reads and writes nothing. Reading its inputs is [`super::service`]'s,
//! [`super::known`]'s and [`super::archive`]'s; recording the findings and committing the plan
//! is the outbox's, from [`super::reconcile`].

use super::archive::Listing;
use super::known::{Known, Versions};
use super::listed_vin;
use super::report::{FieldDrift, ForeignVehicle, Skipped};
use crate::api::Vehicle;
use crate::diff::field_drift;
use crate::outbox::Finding;
use crate::plan::{FileId, Op, Plan, PlannedOp, RECONCILE_FEED};
use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

/// What the comparison found, by kind.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Repairs {
    pub(super) recreated: Vec<String>,
    pub(super) sold_fixed: Vec<String>,
    pub(super) in_stock_fixed: Vec<String>,
    pub(super) fields_fixed: Vec<FieldDrift>,
    pub(super) ids_learned: Vec<String>,
    pub(super) restored: Vec<String>,
    pub(super) forgotten: Vec<String>,
    pub(super) foreign: Vec<ForeignVehicle>,
    pub(super) skipped: Skipped,
    pub(super) unchanged: usize,
}

/// The comparison's outcome: findings to record, operations to queue (a plan of the pseudo-feed
/// [`RECONCILE_FEED`], its file given when it is committed), and what they repair.
#[derive(Debug)]
pub(super) struct Comparison {
    pub(super) findings: Vec<Finding>,
    pub(super) repairs: Repairs,
    pub(super) service_vehicles: usize,
    pub(super) notes: Vec<String>,
    repairs_plan: Plan,
}

impl Comparison {
    fn new(org: u64, service_vehicles: usize) -> Comparison {
        Comparison {
            findings: Vec::new(),
            repairs: Repairs::default(),
            service_vehicles,
            notes: Vec::new(),
            repairs_plan: Plan::new(org, RECONCILE_FEED, FileId::default()),
        }
    }

    fn push(&mut self, location_id: u64, vin: &str, op: Op, new_record: bool) {
        self.repairs_plan.push(location_id, vin, op, new_record);
    }

    /// The repairs to queue.
    pub(super) fn ops(&self) -> &[PlannedOp] {
        &self.repairs_plan.ops
    }

    /// The repairs as a plan of the pseudo-feed [`RECONCILE_FEED`] for `file`.
    pub(super) fn plan(&self, file: FileId) -> Plan {
        let mut plan = self.repairs_plan.clone();
        plan.file = file;
        plan.counts.unchanged = self.repairs.unchanged as u64;
        plan
    }
}

/// A plan's file: `name`, and a hash of nothing any export holds, so that the plan is never
/// taken for one already applied.
pub(super) fn plan_file(name: &str) -> FileId {
    use sha2::Digest as _;
    let unique = format!(
        "{name}/{}/{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let sha256 = hex::encode(sha2::Sha256::digest(unique.as_bytes()));
    FileId {
        name: name.to_owned(),
        sha256,
    }
}

/// Compares the service's list with the state's vehicles of `org` (and, for those the state
/// lacks, the archive's listings). Plain: reads and writes nothing.
pub(super) fn compare(
    org: u64,
    service: &[Vehicle],
    known: Vec<Known>,
    before: &Versions,
    archive: &HashMap<String, Listing>,
) -> Comparison {
    let mut out = Comparison::new(org, service.len());
    let mut by_vin: HashMap<String, Vec<&Vehicle>> = HashMap::new();
    for v in service {
        match listed_vin(v) {
            Some(vin) => by_vin.entry(vin).or_default().push(v),
            None => out.repairs.foreign.push(ForeignVehicle {
                vin: String::new(),
                id: v.id,
                location_id: None,
                listed_sold_in: None,
            }),
        }
    }
    let mut known_vins = std::collections::HashSet::new();
    for k in known.into_iter().filter(|k| k.key.organization_id == org) {
        known_vins.insert(k.key.vin.clone());
        judge_known(&mut out, k, before, &by_vin);
    }

    let mut unknown: Vec<(&String, &Vec<&Vehicle>)> = by_vin
        .iter()
        .filter(|(vin, _)| !known_vins.contains(*vin))
        .collect();
    unknown.sort_by(|a, b| a.0.cmp(b.0));
    for (vin, listed) in unknown {
        let [v] = listed.as_slice() else {
            out.notes.push(format!(
                "VIN {vin} is on the service {} times (ids {}): left alone",
                listed.len(),
                ids(listed)
            ));
            out.repairs
                .foreign
                .extend(listed.iter().map(|v| ForeignVehicle {
                    vin: vin.clone(),
                    id: v.id,
                    location_id: archive.get(vin).map(|l| l.payload.location_id),
                    listed_sold_in: None,
                }));
            continue;
        };
        match archive.get(vin) {
            Some(listing) if listing.listed_in_stock => {
                let sold = v.sold_state().unwrap_or(listing.sold);
                out.findings.push(Finding::Restore {
                    vin: vin.clone(),
                    service_id: v.id,
                    sold,
                    payload: Box::new(listing.payload.clone()),
                    file: listing.file.clone(),
                });
                out.repairs.restored.push(vin.clone());
                let drift = field_drift(v, &listing.payload);
                if drift.is_empty() {
                    out.repairs.unchanged += 1;
                } else {
                    let location = listing.payload.location_id;
                    out.push(location, vin, Op::Update(listing.payload.clone()), false);
                    out.repairs.fields_fixed.push(FieldDrift {
                        vin: vin.clone(),
                        fields: drift,
                    });
                }
            }
            listing => out.repairs.foreign.push(ForeignVehicle {
                vin: vin.clone(),
                id: v.id,
                location_id: listing.map(|l| l.payload.location_id),
                listed_sold_in: listing.map(|l| l.file.clone()),
            }),
        }
    }

    // On the lot in a full feed's newest snapshot, known to neither the state nor the service.
    let mut missing: Vec<&Listing> = archive
        .iter()
        .filter(|(vin, l)| {
            l.in_last_snapshot && !known_vins.contains(*vin) && !by_vin.contains_key(*vin)
        })
        .map(|(_, l)| l)
        .collect();
    missing.sort_by(|a, b| a.payload.vin.cmp(&b.payload.vin));
    for listing in missing {
        let p = &listing.payload;
        out.push(p.location_id, &p.vin, Op::Create(p.clone()), true);
        out.repairs.recreated.push(p.vin.clone());
    }
    out.repairs
        .foreign
        .sort_by(|a, b| (&a.vin, a.id).cmp(&(&b.vin, b.id)));
    out
}

/// One vehicle the state knows.
fn judge_known(
    out: &mut Comparison,
    k: Known,
    before: &Versions,
    by_vin: &HashMap<String, Vec<&Vehicle>>,
) {
    let Known {
        key,
        record,
        payload,
    } = k;
    let vin = key.vin.as_str();
    let skipped = &mut out.repairs.skipped;
    if before.get(vin) != Some(&(record.acked_seq, record.updated_at, record.queued)) {
        skipped.changed_meanwhile += 1;
        return;
    }
    if record.queued > 0 {
        skipped.queued += 1;
        return;
    }
    let listed = by_vin.get(vin).map(Vec::as_slice).unwrap_or_default();
    // A sale or return refused because the service lost the vehicle is repaired below like
    // any missing vehicle; other refusals wait for new data.
    let lost_for = record.rejected.as_ref().and_then(|r| {
        (r.status == 404 && listed.is_empty() && matches!(r.op.as_str(), "sold" | "in_stock"))
            .then_some(r.op.as_str())
    });
    if record.rejected.is_some() && lost_for.is_none() {
        skipped.rejected += 1;
        return;
    }
    if !record.exists() {
        skipped.not_created += 1;
        return;
    }
    let v = match listed {
        [] => {
            // Where the DMS wants it: the refused transition's side, else as last acknowledged.
            let sold = lost_for.map_or(record.sold, |op| op == "sold");
            if sold {
                out.findings.push(Finding::Forget {
                    vin: vin.to_owned(),
                });
                out.repairs.forgotten.push(vin.to_owned());
            } else if let Some(payload) = payload {
                out.push(key.location_id, vin, Op::Create(payload), false);
                out.repairs.recreated.push(vin.to_owned());
            } else {
                skipped.no_payload += 1;
            }
            return;
        }
        [v] => *v,
        _ => {
            skipped.duplicate_on_service += 1;
            out.notes.push(format!(
                "VIN {vin} is on the service {} times (ids {}): left alone",
                listed.len(),
                ids(listed)
            ));
            return;
        }
    };
    let mut repaired = false;
    if record.service_id != Some(v.id) {
        out.findings.push(Finding::Id {
            vin: vin.to_owned(),
            service_id: v.id,
        });
        out.repairs.ids_learned.push(vin.to_owned());
        repaired = true;
    }
    match &payload {
        Some(payload) => {
            let drift = field_drift(v, payload);
            if !drift.is_empty() {
                out.push(key.location_id, vin, Op::Update(payload.clone()), false);
                out.repairs.fields_fixed.push(FieldDrift {
                    vin: vin.to_owned(),
                    fields: drift,
                });
                repaired = true;
            }
        }
        None => out.repairs.skipped.no_payload += 1,
    }
    match v.sold_state() {
        Some(sold) if sold != record.sold => {
            if record.sold {
                out.push(key.location_id, vin, Op::MarkSold, false);
                out.repairs.sold_fixed.push(vin.to_owned());
            } else {
                out.push(key.location_id, vin, Op::MarkInStock, false);
                out.repairs.in_stock_fixed.push(vin.to_owned());
            }
            repaired = true;
        }
        _ => {}
    }
    if !repaired {
        out.repairs.unchanged += 1;
    }
}

fn ids(listed: &[&Vehicle]) -> String {
    listed
        .iter()
        .map(|v| v.id.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Amount, Price, VehiclePayload};
    use crate::state::{Digest, Rejection};
    use crate::state::{VehicleKey, VehicleRecord};
    use serde_json::json;

    fn shown(p: &VehiclePayload, id: u64, sold: bool) -> Vehicle {
        serde_json::from_value(json!({
            "id": id, "vin": p.vin, "stock": p.stock, "price": p.price,
            "status": if sold { "sold" } else { "in-stock" },
        }))
        .unwrap()
    }

    fn known(vin: &str, id: Option<u64>, sold: bool) -> Known {
        let mut payload = VehiclePayload::new(10, format!("S-{vin}"), vin);
        payload.price = Some(Price::Selling(Amount(1000.0)));
        Known {
            key: VehicleKey::new(100, 10, vin),
            record: VehicleRecord {
                service_id: id,
                digest: Some(Digest::of(vin.as_bytes())),
                sold,
                acked_seq: 1,
                updated_at: 5,
                ..VehicleRecord::default()
            },
            payload: Some(payload),
        }
    }

    #[test]
    fn a_sale_or_return_refused_for_a_lost_vehicle_is_settled() {
        let refused = |op: &str| Rejection {
            op: op.into(),
            digest: None,
            status: 404,
            messages: vec![],
            at: 0,
        };
        let mut state = vec![
            known("LOSTSALE", Some(1), false),
            known("LOSTRETURN", Some(2), true),
            known("REFUSEDHERE", Some(3), false),
        ];
        state[0].record.rejected = Some(refused("sold"));
        state[1].record.rejected = Some(refused("in_stock"));
        state[2].record.rejected = Some(refused("sold"));
        let before: Versions = state
            .iter()
            .map(|k| (k.key.vin.clone(), (1, 5, 0)))
            .collect();
        // Only the third is still on the service: its refusal waits for new data.
        let service = vec![shown(&state[2].payload.clone().unwrap(), 3, false)];
        let c = compare(100, &service, state, &before, &HashMap::new());
        assert_eq!(c.repairs.forgotten, ["LOSTSALE"], "nothing left to sell");
        assert_eq!(c.repairs.recreated, ["LOSTRETURN"], "back on the lot");
        assert_eq!(c.repairs.skipped.rejected, 1);
    }

    #[test]
    fn compare_queues_each_repair_and_leaves_the_rest_alone() {
        let mut state = vec![
            known("SAME", Some(1), false),
            known("DELETED", Some(2), false),
            known("SOLDHERE", Some(3), true),
            known("SOLDTHERE", Some(4), false),
            known("EDITED", Some(5), false),
            known("NOID", None, false),
            known("GONESOLD", Some(7), true),
            known("QUEUED", Some(8), false),
            known("REFUSED", Some(9), false),
            known("MOVING", Some(10), false),
        ];
        state[7].record.queued = 1;
        state[8].record.rejected = Some(Rejection {
            op: "update".into(),
            digest: None,
            status: 422,
            messages: vec![],
            at: 0,
        });
        let mut before: Versions = state
            .iter()
            .map(|k| (k.key.vin.clone(), (1, 5, k.record.queued)))
            .collect();
        before.insert("MOVING".into(), (0, 4, 1));
        let payload = |k: &Known| k.payload.clone().unwrap();
        let mut edited = payload(&state[4]);
        edited.price = Some(Price::Selling(Amount(900.0)));
        let restorable = VehiclePayload::new(10, "S-R", "RESTORE");
        let recreatable = VehiclePayload::new(10, "S-L", "LISTED");
        let service = vec![
            shown(&payload(&state[0]), 1, false),
            shown(&payload(&state[2]), 3, false),
            shown(&payload(&state[3]), 4, true),
            shown(&edited, 5, false),
            shown(&payload(&state[5]), 6, false),
            shown(&payload(&state[7]), 8, true),
            shown(&payload(&state[8]), 9, true),
            shown(&restorable, 20, true),
            shown(&VehiclePayload::new(10, "F", "FOREIGN"), 21, false),
            shown(&VehiclePayload::new(10, "F", "SOLDONLY"), 22, true),
        ];
        let listing = |p: &VehiclePayload, listed_in_stock, in_last_snapshot| Listing {
            payload: p.clone(),
            sold: false,
            listed_in_stock,
            in_last_snapshot,
            file: "day1.csv".into(),
        };
        let archive = HashMap::from([
            ("RESTORE".to_owned(), listing(&restorable, true, true)),
            ("LISTED".to_owned(), listing(&recreatable, true, true)),
            (
                "SOLDONLY".to_owned(),
                listing(&VehiclePayload::new(12, "F", "SOLDONLY"), false, false),
            ),
        ]);
        let c = compare(100, &service, state, &before, &archive);
        let r = &c.repairs;
        assert_eq!(r.recreated, ["DELETED", "LISTED"]);
        assert_eq!(r.sold_fixed, ["SOLDHERE"]);
        assert_eq!(r.in_stock_fixed, ["SOLDTHERE"]);
        assert_eq!(
            r.fields_fixed,
            [FieldDrift {
                vin: "EDITED".into(),
                fields: vec!["price.selling"]
            }]
        );
        assert_eq!(r.ids_learned, ["NOID"]);
        assert_eq!(r.forgotten, ["GONESOLD"]);
        assert_eq!(r.restored, ["RESTORE"]);
        assert_eq!(r.unchanged, 2, "SAME and RESTORE");
        let foreign: Vec<(&str, u64, Option<u64>)> = r
            .foreign
            .iter()
            .map(|f| (f.vin.as_str(), f.id, f.location_id))
            .collect();
        assert_eq!(foreign, [("FOREIGN", 21, None), ("SOLDONLY", 22, Some(12))]);
        assert_eq!(
            r.skipped,
            Skipped {
                queued: 1,
                rejected: 1,
                changed_meanwhile: 1,
                ..Skipped::default()
            }
        );
        let ops: Vec<(&str, &str)> = c
            .ops()
            .iter()
            .map(|o| (o.vin.as_str(), o.op.name()))
            .collect();
        assert_eq!(
            ops,
            [
                ("DELETED", "create"),
                ("SOLDHERE", "sold"),
                ("SOLDTHERE", "in_stock"),
                ("EDITED", "update"),
                ("LISTED", "create"),
            ]
        );
        let plan = c.plan(plan_file("reconcile-x"));
        assert!(plan.changes["LISTED"].new_record && !plan.changes["DELETED"].new_record);
        assert_eq!(
            c.findings,
            [
                Finding::Id {
                    vin: "NOID".into(),
                    service_id: 6
                },
                Finding::Forget {
                    vin: "GONESOLD".into()
                },
                Finding::Restore {
                    vin: "RESTORE".into(),
                    service_id: 20,
                    sold: true,
                    payload: Box::new(restorable),
                    file: "day1.csv".into()
                },
            ]
        );
        assert_eq!(
            (plan.organization_id, plan.feed.as_str()),
            (100, RECONCILE_FEED)
        );
        assert_eq!((plan.counts.create, plan.counts.update), (2, 1));
        assert_ne!(plan.file.sha256, plan_file("reconcile-x").sha256);
    }
}
