//! Crash safety of the state and the outbox, with real processes and real signals.
//!
//! A child process (this test binary, re-run with `LOTSYNC_CRASH_CHILD` set) plans a long run
//! of full snapshots into a real SQLite state and answers the queued operations as the service
//! would, writing each operation it "sends" to a journal file first (the service's memory,
//! which survives the child). The parent kills it with SIGKILL at random instants, at least
//! 50 times, reopens the state each time and checks:
//! - conservation: every operation ever queued is superseded, answered, or still queued;
//! - the state never records an answer the service did not give;
//! - nothing is both answered in the state and still queued (it would be applied twice);
//! - what the killed run sent without its answer reaching the disk is still queued, and that
//!   is at most the last batch of answers;
//! - one vehicle's operations went out in order;
//!
//! and finally lets a child run to the end and checks the service's view and the state agree
//! with the last snapshot.

mod common;

use lotsync::api::{Amount, Price, PriceSet, VehiclePayload};
use lotsync::diff::{payload_digest, Differ, FileId, Mode, Rules};
use lotsync::mapper::Accepted;
use lotsync::outbox::{Answer, Outbox, FLUSH_EVERY};
use lotsync::state::{Digest, State};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ORG: u64 = 100;
const LOCATION: u64 = 10;
const VINS: u32 = 40;
const ROUNDS: u32 = 400;
/// Operations taken per batch by the child.
const BATCH: usize = 4;
const CHILD_ENV: &str = "LOTSYNC_CRASH_CHILD";

fn vin(i: u32) -> String {
    format!("CRASHVIN{i:09}")
}

/// Round `r`'s snapshot: which vehicles are on the lot, at what price.
fn snapshot(r: u32) -> Vec<VehiclePayload> {
    (0..VINS)
        .filter(|i| !(i + r).is_multiple_of(9))
        .map(|i| {
            let mut p = VehiclePayload::new(LOCATION, format!("S{i}"), vin(i));
            let price = 1000.0 + f64::from((i + r / 3) % 4) * 100.0;
            p.price = Some(Price::Detailed(PriceSet {
                selling: Some(Amount(price)),
                ..PriceSet::default()
            }));
            p
        })
        .collect()
}

fn rules() -> Rules {
    Rules {
        organization_id: ORG,
        feed: "crash".into(),
        mode: Mode::Full,
        sold_after_absent: 1,
        max_sold_fraction: 1.0,
        locations: BTreeSet::from([LOCATION]),
        force: false,
        sibling_feeds: Default::default(),
    }
}

fn round_name(r: u32) -> String {
    format!("round-{r:04}.csv")
}

/// The child: plans every round not yet planned, answering some operations after each. Not a
/// test of its own (ignored, so that no run reports it passed): the crash test starts it in a
/// process of this binary with `--ignored`, and kills it.
#[test]
#[ignore = "the crash test's child process, started by it with --ignored"]
fn crash_child() {
    let dir = std::env::var(CHILD_ENV).expect("started by the crash test, which names the state");
    let dir = PathBuf::from(dir);
    let outbox = Outbox::new(State::open(&dir.join("state")).expect("state opens"));
    let planned: HashSet<String> = outbox
        .state()
        .files()
        .map(|f| f.expect("file record").name)
        .collect();
    let mut journal = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("journal"))
        .expect("journal");
    let run = std::process::id();
    for r in 0..ROUNDS {
        let name = round_name(r);
        if !planned.contains(&name) {
            let cars = snapshot(r);
            let id = FileId {
                name,
                sha256: Digest::of(format!("{cars:?}").as_bytes()).to_string(),
            };
            let mut differ = Differ::new(&outbox, rules(), id).expect("differ");
            for payload in cars {
                let accepted = Accepted {
                    line: 0,
                    payload,
                    sold: None,
                    warnings: Vec::new(),
                };
                differ.accepted(&accepted).expect("diff");
            }
            differ.commit().expect("commit");
        }
        answer(&outbox, &mut journal, run, 24);
    }
    answer(&outbox, &mut journal, run, usize::MAX);
    outbox.flush().expect("flush");
}

/// Sends (journals) and answers up to `max` operations.
fn answer(outbox: &Outbox, journal: &mut std::fs::File, run: u32, max: usize) {
    let mut done = 0;
    while done < max {
        let batch = outbox.take(ORG, BATCH).expect("take");
        if batch.is_empty() {
            return;
        }
        for e in batch {
            let digest =
                e.op.payload()
                    .map_or_else(|| "-".to_owned(), |p| payload_digest(p).to_string());
            let line = format!("{run} {} {} {} {digest}\n", e.seq, e.vin, e.op.name());
            journal.write_all(line.as_bytes()).expect("journal");
            let answer = Answer::Applied {
                service_id: Some(common::service_id(&e.vin)),
                sold: None,
            };
            outbox.acknowledge(e.seq, &answer).expect("acknowledge");
            done += 1;
        }
    }
}

/// One operation the service received.
#[derive(Debug, Clone)]
struct Sent {
    run: u32,
    seq: u64,
    vin: String,
    op: String,
    digest: String,
}

fn journal(dir: &Path) -> Vec<Sent> {
    let text = std::fs::read_to_string(dir.join("journal")).unwrap_or_default();
    text.lines()
        .filter(|l| l.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '-'))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 5, "journal line {l:?}");
            Sent {
                run: f[0].parse().unwrap(),
                seq: f[1].parse().unwrap(),
                vin: f[2].into(),
                op: f[3].into(),
                digest: f[4].into(),
            }
        })
        .collect()
}

fn spawn_child(dir: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("child starts")
}

/// The invariants that must hold whenever the state is reopened. Returns how many operations
/// the last run sent whose answers were lost with it.
fn check(dir: &Path, last_run: Option<u32>) -> usize {
    let outbox = Outbox::new(State::open(&dir.join("state")).expect("state reopens"));
    let sent = journal(dir);
    let sent_seqs: HashSet<u64> = sent.iter().map(|s| s.seq).collect();
    let queued: Vec<_> = outbox.entries().map(|e| e.expect("entry")).collect();
    let queued_seqs: HashSet<u64> = queued.iter().map(|e| e.seq).collect();
    let c = outbox.counters().unwrap();
    assert_eq!(
        c.queued,
        c.superseded + c.acknowledged + c.rejected + queued.len() as u64,
        "conservation: {c:?}, {} queued",
        queued.len()
    );
    let mut acked: HashMap<String, u64> = HashMap::new();
    for v in outbox.state().vehicles() {
        let v = v.unwrap();
        if v.record.acked_seq > 0 {
            assert!(
                sent_seqs.contains(&v.record.acked_seq),
                "{}: the state records answer {} the service never gave",
                v.key.vin,
                v.record.acked_seq
            );
        }
        let in_box = queued.iter().filter(|e| e.vin == v.key.vin).count() as u32;
        assert_eq!(v.record.queued, in_box, "{}: queued count", v.key.vin);
        acked.insert(v.key.vin.clone(), v.record.acked_seq);
    }
    for e in &queued {
        let a = acked.get(&e.vin).copied().unwrap_or(0);
        assert!(
            e.seq > a,
            "{}: operation {} is queued but already answered ({a})",
            e.vin,
            e.seq
        );
    }
    let mut lost_answers = 0;
    if let Some(run) = last_run {
        let mut last_seq: HashMap<&str, u64> = HashMap::new();
        for s in sent.iter().filter(|s| s.run == run) {
            let previous = last_seq.insert(&s.vin, s.seq).unwrap_or(0);
            assert!(
                s.seq > previous,
                "{}: sent out of order in run {run}",
                s.vin
            );
            let a = acked.get(&s.vin).copied().unwrap_or(0);
            if s.seq > a {
                assert!(
                    queued_seqs.contains(&s.seq),
                    "{}: operation {} was sent, its answer is not recorded, and it is \
                     not queued: lost",
                    s.vin,
                    s.seq
                );
                lost_answers += 1;
            }
        }
        assert!(
            lost_answers <= FLUSH_EVERY as usize + BATCH,
            "{lost_answers} answers lost: more than the last batch"
        );
    }
    lost_answers
}

#[test]
fn sigkill_at_random_instants_loses_and_doubles_nothing() {
    let dir = common::TempDir::new("crash");
    let seed = std::env::var("LOTSYNC_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("crash test seed {seed} (LOTSYNC_CRASH_SEED to repeat)");
    let mut rng = fastrand::Rng::with_seed(seed);
    let started = Instant::now();
    let (mut kills, mut resent) = (0, 0);
    // Up to 60 kills in 4 minutes; at least 20 before the child finishes, also on a machine
    // twice as slow as the one this was tuned on (about 50 in 2 minutes there).
    while kills < 60 && started.elapsed() < Duration::from_secs(240) {
        let mut child = spawn_child(dir.path());
        let pid = child.id();
        std::thread::sleep(Duration::from_millis(rng.u64(5..120)));
        if child.try_wait().unwrap().is_some() {
            break; // finished before the kill: the whole run is done
        }
        child.kill().expect("SIGKILL"); // std sends SIGKILL on Unix
        let status = child.wait().unwrap();
        assert!(!status.success());
        kills += 1;
        resent += check(dir.path(), Some(pid));
    }
    assert!(kills >= 20, "only {kills} kills before the child finished");
    // Now let it finish.
    let status = spawn_child(dir.path()).wait().unwrap();
    assert!(status.success(), "the last run finishes");
    check(dir.path(), None);
    // The service's view, replayed from the journal in order, is the last snapshot.
    let mut service: HashMap<String, (String, bool)> = HashMap::new();
    for s in journal(dir.path()) {
        let entry = service.entry(s.vin).or_insert((String::new(), false));
        match s.op.as_str() {
            "create" | "update" => entry.0 = s.digest,
            "sold" => entry.1 = true,
            "in_stock" => entry.1 = false,
            other => panic!("unknown op {other}"),
        }
    }
    let last = snapshot(ROUNDS - 1);
    let outbox = Outbox::new(State::open(&dir.path().join("state")).unwrap());
    assert!(outbox.is_empty());
    for p in &last {
        let (digest, sold) = &service[&p.vin];
        assert_eq!(digest, &payload_digest(p).to_string(), "{}", p.vin);
        assert!(!sold, "{} is on the lot", p.vin);
        let (_, record) = outbox.state().find_vin(ORG, &p.vin).unwrap().unwrap();
        assert_eq!(record.digest, Some(payload_digest(p)));
        assert!(!record.sold);
    }
    let on_lot: HashSet<&str> = last.iter().map(|p| p.vin.as_str()).collect();
    for (vin, (_, sold)) in &service {
        if !on_lot.contains(vin.as_str()) {
            assert!(sold, "{vin} left the lot and is sold on the service");
            let (_, record) = outbox.state().find_vin(ORG, vin).unwrap().unwrap();
            assert!(record.sold, "{vin} is sold in the state");
        }
    }
    eprintln!(
        "{kills} kills; {resent} operations re-sent after a kill; {} sent in all",
        journal(dir.path()).len()
    );
}
