//! Every command lotsync prints as advice runs as printed: taken from the real binary's own
//! output and run by a shell, against a config that is not the default one and sits in a
//! folder whose name holds a space (so `--config` and the quoting are both needed).

use crate::common;

use common::fleet::Car;
use common::site::{code, run_printed, text, Site};
use common::{sandbox_with, sold, state};
use lotsync::sandbox::Behaviour;

/// The text after `marker` on the first line of `output` that holds it.
fn advice_after<'a>(output: &'a str, marker: &str) -> &'a str {
    let line = output
        .lines()
        .find(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("no advice {marker:?} in:\n{output}"));
    line.split_once(marker).unwrap().1.trim()
}

/// `plan` of a file the guard would hold names the commands that apply it; each runs as
/// printed (`sync` holds it, `release` and `sync` apply it), and `sync`'s own advice is the
/// same release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_advice_of_plan_and_sync_runs_as_printed() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("advice runs as printed", &sb.base_url());
    let cars: Vec<Car> = (0..10).map(Car::new).collect();
    let day1 = site.export("day 1.csv", &cars);
    let out = site.lotsync(&["sync", day1.to_str().unwrap()]).await;
    assert_eq!(code(&out), 0, "{}{}", text(&out.stdout), text(&out.stderr));

    // Eight of ten gone: the safety guard holds it.
    let day2 = site.export("day 2.csv", &cars[..2]);
    let out = site.lotsync(&["plan", day2.to_str().unwrap()]).await;
    assert_eq!(code(&out), 3, "{}{}", text(&out.stdout), text(&out.stderr));
    let planned = text(&out.stdout);
    let advice = advice_after(&planned, "if the file is right: ");
    let (hold, apply) = advice
        .split_once(" (held, as here), then ")
        .unwrap_or_else(|| panic!("{advice}"));
    assert!(hold.contains("--config"), "{hold}");

    let held = run_printed(hold);
    assert_eq!(
        code(&held),
        3,
        "{hold}\n{}{}",
        text(&held.stdout),
        text(&held.stderr)
    );
    assert_eq!(sold(&state(&sb).await), 0, "held: nothing sent");
    assert_eq!(
        advice_after(&text(&held.stdout), "if the file is right: "),
        apply,
        "sync advises the same release"
    );

    let applied = run_printed(apply);
    assert_eq!(
        code(&applied),
        0,
        "{apply}\n{}{}",
        text(&applied.stdout),
        text(&applied.stderr)
    );
    assert_eq!(sold(&state(&sb).await), 8, "released and delivered");
    // The collector saw the advice too (`common::advice`: every Site command's output).
    let checked = site.advice_checked();
    assert!(
        checked
            .iter()
            .any(|c| c.starts_with("lotsync release --config")),
        "{checked:#?}"
    );
}

/// The collector finds the advice in lotsync's sentences: backticked, bare, joined by `&&`,
/// with quoted paths; and leaves out words that are not a command's.
#[test]
fn the_collector_finds_each_advice_command_whole() {
    use common::advice::commands;
    let printed = "held: if the file is right: lotsync sync --config '/s p/lotsync.toml' \
                   '/s p/day 2.csv' (held, as here), then lotsync release --config \
                   '/s p/lotsync.toml' '/s p/day 2.csv' && lotsync sync --config '/s p/lotsync.toml'\n\
                   release: lotsync release --config /s/l.toml /s/held/a.csv\n\
                   queued; `lotsync sync` or the daemon delivers them\n\
                   lotsync held a.csv: nothing of it was sent; or let lotsync run --create-dirs make it\n\
                   lotsync state backup --to /root/x.db";
    assert_eq!(
        commands(printed),
        [
            "lotsync sync --config '/s p/lotsync.toml' '/s p/day 2.csv'",
            "lotsync release --config '/s p/lotsync.toml' '/s p/day 2.csv' && lotsync sync \
             --config '/s p/lotsync.toml'",
            "lotsync release --config /s/l.toml /s/held/a.csv",
            "lotsync sync",
            "lotsync run --create-dirs",
            "lotsync state backup --to /root/x.db",
        ]
    );
    // In JSON (`status --format json`), the commands are read from its strings.
    let json =
        r#"{"feeds": [{"release": "lotsync release --config '/s p/l.toml' /s/held/a.csv"}]}"#;
    assert_eq!(
        commands(json),
        ["lotsync release --config '/s p/l.toml' /s/held/a.csv"]
    );
}

/// What the checker refuses: no `--config` where the command reads one, a path that is not
/// there, a word lotsync does not take, an open quote, a command that changes nothing and
/// fails when run (here `status` of a config without its `[api]`).
#[test]
fn the_checker_refuses_advice_that_cannot_run_as_printed() {
    use common::advice::fault;
    let dir = common::TempDir::new("advice checker");
    let config = dir.path().join("lotsync.toml");
    std::fs::write(&config, "").unwrap();
    // The folder's name holds a space: quoted, as lotsync quotes it.
    let shown = format!("'{}'", config.display());
    let export = dir.path().join("day 1.csv");
    std::fs::write(&export, common::fleet::export(&[Car::new(1)])).unwrap();
    let check = format!("lotsync check '{}'", export.display());
    assert_eq!(fault(&check, &config, true), None);
    for (command, why) in [
        (
            format!("lotsync status --config {shown}"),
            "run as printed, it failed",
        ),
        ("lotsync sync".to_owned(), "does not name the config"),
        (
            format!("lotsync release --config {shown} /no/such.csv"),
            "does not exist",
        ),
        (
            format!("lotsync release --config {shown} --now"),
            "does not take its words",
        ),
        (
            format!("lotsync status --config {shown}'"),
            "quote is left open",
        ),
    ] {
        let fault = fault(&command, &config, true).unwrap_or_default();
        assert!(fault.contains(why), "{command}: {fault:?}");
    }
}
