//! The outbox's bookkeeping on a real SQLite state in a temporary folder: what `take` hands out
//! (order, one operation per vehicle, per organization), what `give_back` and `acknowledge`
//! do to the queue, the vehicles' records and the counters, and what survives a reopen.

use super::*;
use crate::plan::FileId;
use crate::state::{Counters, Delivered, OpCounts, VehicleKey};

const ORG: u64 = 100;
const OTHER_ORG: u64 = 200;

/// An outbox in a fresh folder (removed when the guard drops), and the state's folder.
fn outbox(name: &str) -> (Outbox, std::path::PathBuf, tempfile::TempDir) {
    let tmp = crate::testing::temp_dir(&format!("outbox-queue-{name}"));
    let dir = tmp.path().join("state");
    let outbox = Outbox::new(State::open(&dir).expect("the state opens"));
    (outbox, dir, tmp)
}

fn payload(location_id: u64, vin: &str, stock: &str) -> VehiclePayload {
    VehiclePayload::new(location_id, stock, vin)
}

/// Commits a plan of `org`'s file `name` holding `ops` (location, VIN, operation), in order;
/// returns the number the file is filed under.
fn commit(outbox: &Outbox, org: u64, name: &str, ops: Vec<(u64, &str, Op)>) -> u64 {
    let file = FileId {
        name: name.into(),
        sha256: format!("sha-{name}"),
    };
    let mut plan = Plan::new(org, "main", file);
    for (location_id, vin, op) in ops {
        let new = matches!(op, Op::Create(_));
        plan.push(location_id, vin, op, new);
    }
    let planning = outbox.planning();
    outbox.commit(&plan, &planning).expect("the plan commits")
}

fn applied(service_id: u64) -> Answer {
    Answer::Applied {
        service_id: Some(service_id),
        sold: None,
    }
}

fn vins(entries: &[Entry]) -> Vec<(&str, &str)> {
    entries
        .iter()
        .map(|e| (e.vin.as_str(), e.op.name()))
        .collect()
}

fn record(outbox: &Outbox, vin: &str) -> (VehicleKey, VehicleRecord) {
    outbox
        .state()
        .find_vin(ORG, vin)
        .expect("the state reads")
        .expect("the vehicle is known")
}

/// Operations ever queued = replaced + answered (either way) + still queued.
fn conserved(outbox: &Outbox) {
    let c = outbox.counters().expect("counters");
    assert_eq!(
        c.queued,
        c.superseded + c.acknowledged + c.rejected + outbox.len() as u64,
        "{c:?} with {} queued",
        outbox.len()
    );
}

/// Oldest first, and of each vehicle only its next operation: the second waits for the first
/// one's answer, whatever `max` allows.
#[test]
fn take_hands_out_the_oldest_first_and_one_per_vehicle() {
    let (outbox, _dir, _tmp) = outbox("order");
    commit(
        &outbox,
        ORG,
        "day1.csv",
        vec![
            (10, "VINA", Op::Create(payload(10, "VINA", "S1"))),
            (10, "VINB", Op::Create(payload(10, "VINB", "S2"))),
            (10, "VINA", Op::MarkSold),
            (10, "VINC", Op::Create(payload(10, "VINC", "S3"))),
        ],
    );
    let first = outbox.take(ORG, 10).unwrap();
    assert_eq!(
        vins(&first),
        [("VINA", "create"), ("VINB", "create"), ("VINC", "create")],
        "VINA's sale waits for its create's answer"
    );
    assert!(
        first.windows(2).all(|w| w[0].seq < w[1].seq),
        "in order of sequence"
    );
    assert!(
        outbox.take(ORG, 10).unwrap().is_empty(),
        "what is in flight is not handed out twice"
    );
    outbox.acknowledge(first[0].seq, &applied(1)).unwrap();
    assert_eq!(vins(&outbox.take(ORG, 10).unwrap()), [("VINA", "sold")]);
}

/// `max` bounds what one take hands out; the rest is handed out by the next.
#[test]
fn take_hands_out_at_most_max() {
    let (outbox, _dir, _tmp) = outbox("max");
    let cars: Vec<String> = (0..5).map(|n| format!("VIN{n}")).collect();
    commit(
        &outbox,
        ORG,
        "day1.csv",
        cars.iter()
            .map(|v| (10, v.as_str(), Op::Create(payload(10, v, "S"))))
            .collect(),
    );
    let first = outbox.take(ORG, 2).unwrap();
    assert_eq!(vins(&first), [("VIN0", "create"), ("VIN1", "create")]);
    let rest = outbox.take(ORG, 10).unwrap();
    assert_eq!(
        vins(&rest),
        [("VIN2", "create"), ("VIN3", "create"), ("VIN4", "create")]
    );
}

/// Another organization's operations are passed over, and never counted against `max`: a
/// state holding two organizations' queues does not starve the one being delivered.
#[test]
fn take_passes_over_another_organizations_operations() {
    let (outbox, _dir, _tmp) = outbox("organizations");
    let theirs: Vec<String> = (0..4).map(|n| format!("THEIRS{n}")).collect();
    commit(
        &outbox,
        OTHER_ORG,
        "theirs.csv",
        theirs
            .iter()
            .map(|v| (20, v.as_str(), Op::Create(payload(20, v, "T"))))
            .collect(),
    );
    commit(
        &outbox,
        ORG,
        "ours.csv",
        vec![
            (10, "OURS1", Op::Create(payload(10, "OURS1", "O1"))),
            (10, "OURS2", Op::Create(payload(10, "OURS2", "O2"))),
        ],
    );
    let ours = outbox.take(ORG, 2).unwrap();
    assert_eq!(vins(&ours), [("OURS1", "create"), ("OURS2", "create")]);
    assert!(ours.iter().all(|e| e.organization_id == ORG));
    let other = outbox.take(OTHER_ORG, 10).unwrap();
    assert_eq!(other.len(), 4);
    assert!(other.iter().all(|e| e.organization_id == OTHER_ORG));
}

/// An operation given back is pending again: the next take hands out the same one (same
/// sequence), before the vehicle's later operations; nothing in the state changed.
#[test]
fn an_operation_given_back_is_handed_out_again_first() {
    let (outbox, _dir, _tmp) = outbox("give-back");
    commit(
        &outbox,
        ORG,
        "day1.csv",
        vec![
            (10, "VINA", Op::Create(payload(10, "VINA", "S1"))),
            (10, "VINA", Op::MarkSold),
        ],
    );
    let taken = outbox.take(ORG, 10).unwrap();
    assert_eq!(vins(&taken), [("VINA", "create")]);
    outbox.give_back(taken[0].seq);
    let again = outbox.take(ORG, 10).unwrap();
    assert_eq!(again, taken, "the same operation, not the sale after it");
    assert_eq!(outbox.len(), 2);
    let (_, rec) = record(&outbox, "VINA");
    assert_eq!(rec.queued, 2);
    assert_eq!(rec.digest, None, "not acknowledged");
    assert_eq!(outbox.counters().unwrap().acknowledged, 0);
}

/// An answer removes its operation and records it on the vehicle and in the counters, and
/// per file (progress): the payload's digest and id on a create, sold on a sale, the count of
/// queued operations down by one.
#[test]
fn an_applied_answer_is_recorded_on_the_vehicle_the_counters_and_the_file() {
    let (outbox, _dir, _tmp) = outbox("applied");
    let p = payload(10, "VINA", "S1");
    let file_no = commit(
        &outbox,
        ORG,
        "day1.csv",
        vec![
            (10, "VINA", Op::Create(p.clone())),
            (10, "VINA", Op::MarkSold),
        ],
    );
    assert_eq!(
        outbox.progress(file_no).unwrap(),
        FileProgress {
            delivered: Delivered::default(),
            queued: OpCounts {
                create: 1,
                sold: 1,
                ..OpCounts::default()
            },
        }
    );
    let create = outbox.take(ORG, 10).unwrap().remove(0);
    outbox.acknowledge(create.seq, &applied(41)).unwrap();
    let (key, rec) = record(&outbox, "VINA");
    assert_eq!(key, VehicleKey::new(ORG, 10, "VINA"));
    assert_eq!(rec.service_id, Some(41));
    assert_eq!(rec.digest, Some(payload_digest(&p)));
    assert_eq!(rec.queued, 1);
    assert_eq!(rec.acked_seq, create.seq);
    assert!(!rec.sold);
    assert_eq!(outbox.state().payload(&key).unwrap(), Some(p));

    let sale = outbox.take(ORG, 10).unwrap().remove(0);
    assert_eq!(sale.op, Op::MarkSold);
    outbox.acknowledge(sale.seq, &applied(41)).unwrap();
    let (_, rec) = record(&outbox, "VINA");
    assert!(rec.sold);
    assert_eq!(rec.queued, 0);
    assert!(outbox.is_empty());
    assert_eq!(
        outbox.progress(file_no).unwrap(),
        FileProgress {
            delivered: Delivered {
                applied: OpCounts {
                    create: 1,
                    sold: 1,
                    ..OpCounts::default()
                },
                refused: 0,
            },
            queued: OpCounts::default(),
        }
    );
    assert_eq!(
        outbox.counters().unwrap(),
        Counters {
            queued: 2,
            acknowledged: 2,
            ..Counters::default()
        }
    );
    conserved(&outbox);
}

/// A refusal is recorded on the vehicle (operation, payload digest, status, messages) and
/// counted refused; the next operation of the vehicle goes out; an applied answer to the same
/// kind of operation later clears the refusal.
#[test]
fn a_refusal_is_recorded_and_cleared_by_a_later_success_of_the_same_kind() {
    let (outbox, _dir, _tmp) = outbox("rejected");
    let bad = payload(10, "VINA", "S1");
    let good = payload(10, "VINA", "S2");
    let file_no = commit(
        &outbox,
        ORG,
        "day1.csv",
        vec![
            (10, "VINA", Op::Create(bad.clone())),
            (10, "VINA", Op::Create(good.clone())),
        ],
    );
    let first = outbox.take(ORG, 10).unwrap().remove(0);
    outbox
        .acknowledge(
            first.seq,
            &Answer::Rejected {
                status: 422,
                messages: vec!["price: required".into()],
            },
        )
        .unwrap();
    let (_, rec) = record(&outbox, "VINA");
    let refusal = rec.rejected.expect("the refusal is on record");
    assert_eq!(refusal.op, "create");
    assert_eq!(refusal.digest, Some(payload_digest(&bad)));
    assert_eq!(refusal.status, 422);
    assert_eq!(refusal.messages, ["price: required"]);
    assert_eq!(rec.digest, None, "a refused create acknowledged nothing");
    assert_eq!(outbox.progress(file_no).unwrap().delivered.refused, 1);

    let second = outbox.take(ORG, 10).unwrap().remove(0);
    assert_eq!(second.op, Op::Create(good.clone()));
    outbox.acknowledge(second.seq, &applied(7)).unwrap();
    let (_, rec) = record(&outbox, "VINA");
    assert_eq!(
        rec.rejected, None,
        "cleared by the create that went through"
    );
    assert_eq!(rec.digest, Some(payload_digest(&good)));
    let c = outbox.counters().unwrap();
    assert_eq!((c.acknowledged, c.rejected), (1, 1));
    conserved(&outbox);
}

/// An answer to an operation that is not queued (answered already) is an error that changes
/// nothing, and what was in flight under that number is let go.
#[test]
fn an_answer_to_an_operation_not_queued_changes_nothing() {
    let (outbox, _dir, _tmp) = outbox("not-queued");
    commit(
        &outbox,
        ORG,
        "day1.csv",
        vec![(10, "VINA", Op::Create(payload(10, "VINA", "S1")))],
    );
    let taken = outbox.take(ORG, 10).unwrap().remove(0);
    outbox.acknowledge(taken.seq, &applied(1)).unwrap();
    let before = record(&outbox, "VINA");
    let again = outbox.acknowledge(taken.seq, &applied(2));
    assert!(
        matches!(again, Err(OutboxError::NotQueued(seq)) if seq == taken.seq),
        "{again:?}"
    );
    assert_eq!(record(&outbox, "VINA"), before);
    assert_eq!(outbox.counters().unwrap().acknowledged, 1);
}

/// An update whose payload names another location moves the vehicle there once applied: its
/// record and payload under the new location, the VIN index pointing there.
#[test]
fn an_applied_update_to_another_location_moves_the_vehicle() {
    let (outbox, _dir, _tmp) = outbox("move");
    commit(
        &outbox,
        ORG,
        "day1.csv",
        vec![(10, "VINA", Op::Create(payload(10, "VINA", "S1")))],
    );
    let create = outbox.take(ORG, 10).unwrap().remove(0);
    outbox.acknowledge(create.seq, &applied(5)).unwrap();
    let moved = payload(11, "VINA", "S1");
    commit(
        &outbox,
        ORG,
        "day2.csv",
        vec![(11, "VINA", Op::Update(moved.clone()))],
    );
    let (key, _) = record(&outbox, "VINA");
    assert_eq!(
        key.location_id, 10,
        "moved only once the service applied it"
    );
    let update = outbox.take(ORG, 10).unwrap().remove(0);
    outbox.acknowledge(update.seq, &applied(5)).unwrap();
    let (key, rec) = record(&outbox, "VINA");
    assert_eq!(key, VehicleKey::new(ORG, 11, "VINA"));
    assert_eq!(rec.service_id, Some(5));
    assert_eq!(outbox.state().payload(&key).unwrap(), Some(moved));
    let old = VehicleKey::new(ORG, 10, "VINA");
    assert_eq!(outbox.state().vehicle(&old).unwrap(), None);
    assert_eq!(outbox.state().payload(&old).unwrap(), None);
}

/// A newer plan replaces what it read pending of a vehicle (counted superseded), keeps what
/// is in flight, and the vehicle's count of queued operations stays true.
#[test]
fn a_newer_plan_replaces_the_pending_operations_it_read() {
    let (outbox, _dir, _tmp) = outbox("supersede");
    let differ = |name: &str, stock: &str| {
        let rules = crate::diff::Rules {
            organization_id: ORG,
            feed: "main".into(),
            mode: crate::diff::Mode::Delta,
            sold_after_absent: 1,
            max_sold_fraction: 1.0,
            locations: [10].into(),
            force: false,
            sibling_feeds: Default::default(),
        };
        let file = FileId {
            name: name.into(),
            sha256: name.into(),
        };
        let mut differ = crate::diff::Differ::new(&outbox, rules, file).unwrap();
        for vin in ["VINA", "VINB"] {
            differ
                .accepted(&crate::mapper::Accepted {
                    line: 2,
                    payload: payload(10, vin, stock),
                    sold: None,
                    warnings: Vec::new(),
                })
                .unwrap();
        }
        differ.commit().unwrap()
    };
    differ("day1.csv", "S1");
    let in_flight = outbox.take(ORG, 1).unwrap().remove(0);
    assert_eq!(in_flight.vin, "VINA");
    differ("day2.csv", "S2");
    let queued: Vec<(String, Op)> = outbox
        .entries()
        .map(|e| e.map(|e| (e.vin, e.op)).unwrap())
        .collect();
    assert_eq!(
        queued,
        [
            ("VINA".to_owned(), Op::Create(payload(10, "VINA", "S1"))),
            ("VINA".to_owned(), Op::Update(payload(10, "VINA", "S2"))),
            ("VINB".to_owned(), Op::Create(payload(10, "VINB", "S2"))),
        ],
        "VINA's create was in flight: kept, the update after it; VINB's replaced"
    );
    assert_eq!(outbox.counters().unwrap().superseded, 1);
    assert_eq!(record(&outbox, "VINA").1.queued, 2);
    assert_eq!(record(&outbox, "VINB").1.queued, 1);
    conserved(&outbox);
    // The history tells the replaced create (from its outbox entry, written when it was
    // replaced) and the one waiting (from the outbox), each with its file and line.
    let why = outbox.why(ORG, "VINB", None).unwrap();
    let told: Vec<_> = why.vehicles[0]
        .events
        .iter()
        .map(|e| (e.kind.as_str(), e.file.as_deref(), e.line))
        .collect();
    assert_eq!(
        told,
        [
            ("queued", Some("day2.csv"), Some(2)),
            ("replaced", Some("day2.csv"), None),
            ("queued", Some("day1.csv"), Some(2)),
        ]
    );
    let outcomes: Vec<_> = why.vehicles[0]
        .operations
        .iter()
        .map(|o| (o.file.as_deref(), o.outcome.as_str()))
        .collect();
    assert_eq!(
        outcomes,
        [(Some("day2.csv"), "queued"), (Some("day1.csv"), "replaced")]
    );
}

/// A held plan files the file and queues nothing; `record_held` files one without a plan.
/// Both take the next file number.
#[test]
fn a_held_plan_files_the_file_and_queues_nothing() {
    let (outbox, _dir, _tmp) = outbox("held");
    let file = FileId {
        name: "day1.csv".into(),
        sha256: "abc".into(),
    };
    let mut plan = Plan::new(ORG, "main", file);
    plan.push(10, "VINA", Op::MarkSold, false);
    plan.verdict = Verdict::Held {
        reasons: vec!["location 10: too many sold".into(), "another".into()],
    };
    let planning = outbox.planning();
    let first = outbox.commit(&plan, &planning).unwrap();
    drop(planning);
    assert!(outbox.is_empty());
    assert_eq!(outbox.state().find_vin(ORG, "VINA").unwrap(), None);
    let filed = outbox.state().file(first).unwrap().expect("filed");
    assert_eq!(
        filed.outcome,
        FileOutcome::Held {
            reason: "location 10: too many sold; another".into()
        }
    );
    assert!(outbox.state().is_held("main", "abc"));
    assert_eq!(
        outbox
            .state()
            .feed("main")
            .unwrap()
            .and_then(|f| f.last_applied),
        None,
        "a held file is not the feed's last applied"
    );
    outbox
        .record_held("main", "day2.csv", "def", "cut in its last record")
        .unwrap();
    let second = outbox.state().held_by_name("main", "day2.csv").unwrap();
    assert_eq!(second.sha256, "def");
    assert_eq!(outbox.state().file(first + 1).unwrap(), Some(second));
    assert_eq!(outbox.counters().unwrap().queued, 0);
}

/// What is queued and answered survives closing the state; what was in flight lives in
/// memory only, so after a reopen (a crash, a restart) every queued operation is pending
/// again, in its order, and the counters are those of before.
#[test]
fn after_a_reopen_the_queue_and_answers_are_there_and_nothing_is_in_flight() {
    let (outbox, dir, _tmp) = outbox("reopen");
    commit(
        &outbox,
        ORG,
        "day1.csv",
        vec![
            (10, "VINA", Op::Create(payload(10, "VINA", "S1"))),
            (10, "VINB", Op::Create(payload(10, "VINB", "S2"))),
            (10, "VINC", Op::Create(payload(10, "VINC", "S3"))),
        ],
    );
    let taken = outbox.take(ORG, 10).unwrap();
    outbox.acknowledge(taken[0].seq, &applied(1)).unwrap();
    outbox.flush().unwrap();
    let counters = outbox.counters().unwrap();
    drop(outbox);

    let outbox = Outbox::new(State::open(&dir).expect("the state opens again"));
    assert_eq!(outbox.counters().unwrap(), counters);
    let again = outbox.take(ORG, 10).unwrap();
    assert_eq!(
        vins(&again),
        [("VINB", "create"), ("VINC", "create")],
        "in flight before the reopen: pending now, VINA's answer kept"
    );
    assert_eq!(
        again.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [taken[1].seq, taken[2].seq]
    );
    let (_, rec) = record(&outbox, "VINA");
    assert_eq!((rec.service_id, rec.queued), (Some(1), 0));
    // The sequence goes on from where it was: a new plan's operations come after.
    commit(
        &outbox,
        ORG,
        "day2.csv",
        vec![(10, "VIND", Op::Create(payload(10, "VIND", "S4")))],
    );
    let newest = outbox.entries().last().unwrap().unwrap();
    assert!(newest.seq > taken[2].seq);
    conserved(&outbox);
}
