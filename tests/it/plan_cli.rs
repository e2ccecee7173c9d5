//! `lotsync plan`, `release` and `state export` through the real binary, on a real state.

use crate::common;

use common::{answer_all, TempDir};
use lotsync::config::Config;
use lotsync::diff::{diff_file, DiffOptions};
use lotsync::mapper::Profile;
use lotsync::outbox::Outbox;
use lotsync::state::State;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const HEADER: &str = "VIN,Stock,Year,Make,Model,Price\n";
const CARS: [&str; 4] = [
    "1HGCM82633A004352,A1,2019,Honda,Accord,21000\n",
    "1M8GDM9AXKP042788,A2,2019,Motor Coach,J4500,99000\n",
    "5YJ3E1EA2KF317000,A3,2019,Tesla,Model 3,35000\n",
    "2T3P1RFV7RW198233,A4,2024,Toyota,RAV4,34000\n",
];

struct Store {
    dir: TempDir,
    config: PathBuf,
}

impl Store {
    fn new(name: &str) -> Store {
        let dir = TempDir::new(name);
        std::fs::create_dir_all(dir.path().join("inbox")).unwrap();
        let config = dir.path().join("lotsync.toml");
        std::fs::write(
            &config,
            "[api]\nbase_url = \"http://127.0.0.1:9\"\norganization_id = 100\n\
             token_env = \"LOTSYNC_TEST_UNSET\"\n[state]\ndir = \"state\"\n\
             [[feed]]\nname = \"main\"\ninbox = \"inbox\"\nlocation_id = 10\n",
        )
        .unwrap();
        Store { dir, config }
    }

    fn file(&self, name: &str, cars: &[usize]) -> PathBuf {
        let path = self.dir.path().join("inbox").join(name);
        let mut text = String::from(HEADER);
        for &i in cars {
            text.push_str(CARS[i]);
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    fn run(&self, args: &[&str], file: Option<&Path>) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lotsync"));
        cmd.args(args).arg("--config").arg(&self.config);
        if let Some(f) = file {
            cmd.arg(f);
        }
        let out = cmd.output().expect("lotsync runs");
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        common::advice::check(&printed, &self.config, true, &mut Default::default());
        out
    }

    /// Applies a file as if every operation had been delivered (test-only).
    fn applied(&self, file: &Path) {
        let config = Config::load(&self.config).unwrap();
        let outbox = Outbox::new(State::open(&config.state.dir).unwrap());
        let rules = config.feeds[0].rules(100, &[], false);
        diff_file(
            &outbox,
            rules,
            &Profile::auto(),
            10,
            file,
            DiffOptions::committed(),
        )
        .unwrap();
        answer_all(&outbox);
    }

    fn outbox(&self) -> Outbox {
        let config = Config::load(&self.config).unwrap();
        Outbox::new(State::open(&config.state.dir).unwrap())
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn plan_shows_operations_and_queues_nothing() {
    let store = Store::new("plan-cli");
    let file = store.file("a.csv", &[0, 1, 2, 3]);
    let out = store.run(&["plan"], Some(&file));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("4 create, 0 update, 0 sold"), "{text}");
    assert!(text.contains("create    1HGCM82633A004352"), "{text}");
    let out = store.run(&["plan", "--format", "ndjson"], Some(&file));
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["op"], "create");
    assert_eq!(lines[0]["vin"], "1HGCM82633A004352");
    assert_eq!(lines[0]["location_id"], 10);
    assert_eq!(lines[0]["payload"]["price"]["selling"], 21000);
    let outbox = store.outbox();
    assert!(outbox.is_empty(), "plan queues nothing");
    assert_eq!(outbox.state().vehicle_count(), 0);
    drop(outbox);
    // Delivered: the next plan of a changed file shows only the change and the sale (one of
    // four: at the guard's threshold, not above).
    store.applied(&file);
    let changed = store.file("b.csv", &[]);
    std::fs::write(
        &changed,
        format!(
            "{HEADER}{}{}{}",
            CARS[0],
            CARS[1].replace("99000", "98000"),
            CARS[3]
        ),
    )
    .unwrap();
    let out = store.run(&["plan", "--format", "ndjson"], Some(&changed));
    let ops: Vec<(String, String)> = stdout(&out)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["op"].as_str().unwrap().into(),
                v["vin"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            ("update".into(), "1M8GDM9AXKP042788".into()),
            ("sold".into(), "5YJ3E1EA2KF317000".into())
        ]
    );
    let export = store.run(&["state", "export"], None);
    let vehicles: Vec<serde_json::Value> = stdout(&export)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(vehicles.len(), 4);
    assert!(vehicles
        .iter()
        .all(|v| v["created"] == true && v["sold"] == false));
    assert!(vehicles.iter().any(|v| v["payload"]["stock"] == "A1"));
}

#[test]
fn a_held_file_says_so_and_release_queues_it() {
    let store = Store::new("plan-held");
    store.applied(&store.file("all.csv", &[0, 1, 2, 3]));
    let cut = store.file("cut.csv", &[0]);
    let out = store.run(&["plan"], Some(&cut));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("HELD by the safety guard"), "{text}");
    assert!(
        text.contains("location 10: would mark 3 of 4 in-stock vehicles sold (75%"),
        "{text}"
    );
    assert!(text.contains("lotsync release"), "{text}");
    // The cars it would sell, each named as the operator knows it: stock, vehicle, price.
    let sold_row = text
        .lines()
        .find(|l| l.contains("1M8GDM9AXKP042788"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(sold_row.trim_start().starts_with("sold"), "{sold_row}");
    for word in ["A2", "2019 Motor Coach J4500", "$99000"] {
        assert!(sold_row.contains(word), "{word}: {sold_row}");
    }
    let out = store.run(&["plan", "--format", "ndjson"], Some(&cut));
    let first: serde_json::Value =
        serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
    assert_eq!(first["held"], true);
    assert_eq!(first["guard"][0]["would_sell"], 3);
    // plan records nothing, so release refuses a file no command held yet.
    let out = store.run(&["release"], Some(&cut));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not held"), "{}", stderr(&out));
    // The held outcome as the daemon or sync would record it, then released.
    {
        let outbox = store.outbox();
        let config = Config::load(&store.config).unwrap();
        let rules = config.feeds[0].rules(100, &[], false);
        let held = diff_file(
            &outbox,
            rules,
            &Profile::auto(),
            10,
            &cut,
            DiffOptions::committed(),
        )
        .unwrap();
        assert!(!held.plan.applies());
        assert!(outbox.is_empty());
    }
    let out = store.run(&["release"], Some(&cut));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("3 operations queued"),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("nothing sent yet"));
    assert_eq!(store.outbox().len(), 3);
}

/// Readers (`plan`, `state export`) open the state beside the process that writes it and
/// answer at once; a second writer (`sync`) is told who owns the state.
#[test]
fn readers_answer_beside_the_writer_and_a_second_writer_is_told_who_owns_it() {
    let store = Store::new("plan-lock");
    let file = store.file("a.csv", &[0]);
    let holder = store.outbox();
    let started = std::time::Instant::now();
    let out = store.run(&["plan"], Some(&file));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("create"), "{}", stdout(&out));
    let out = store.run(&["state", "export"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "readers do not wait for the writer: {:?}",
        started.elapsed()
    );
    // With a token, so that the state is what refuses it.
    let out = Command::new(env!("CARGO_BIN_EXE_lotsync"))
        .args(["sync", "--config"])
        .arg(&store.config)
        .arg(&file)
        .env("LOTSYNC_TEST_UNSET", "a-token")
        .output()
        .expect("lotsync runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "state is in use by pid {} (lotsync)",
            std::process::id()
        )),
        "{err}"
    );
    // A one-shot holder has no control commands: the advice is to wait for it.
    assert!(err.contains("wait for it to finish"), "{err}");
    drop(holder);
}

#[test]
fn a_bad_config_names_the_key() {
    let store = Store::new("plan-config");
    std::fs::write(
        &store.config,
        "[api]\nbase_url = \"http://127.0.0.1:9\"\norganization_id = 100\n\
         [[feed]]\nname = \"main\"\ninbox = \"inbox\"\nlocation_id = 10\nmax_sold_fraction = 2\n",
    )
    .unwrap();
    let file = store.file("a.csv", &[0]);
    let out = store.run(&["plan"], Some(&file));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("feed[0] (\"main\").max_sold_fraction: 2 is not a share"),
        "{}",
        stderr(&out)
    );
}
