//! `lotsync demo`, the README's first command, as a real process: the four days of sample
//! exports reach the in-process sandbox and the story it prints is the right one.

use std::process::Command;

#[test]
fn the_demo_tells_the_whole_story() {
    let out = Command::new(env!("CARGO_BIN_EXE_lotsync"))
        .arg("demo")
        .output()
        .expect("lotsync runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for line in [
        "12 records: 12 created, 0 updated, 0 sold, 0 back in stock, 0 unchanged",
        "11 records: 1 created, 2 updated, 3 sold, 0 back in stock, 7 unchanged",
        "1 back in stock",
        "2 records rejected",
        "line 15: stock: missing: every vehicle needs a stock number",
        "held, nothing sent: location 10: would mark 7 of 11 in-stock vehicles sold",
        "-> inbox/held/4-thursday-truncated.csv",
        "The inventory as the service now has it (13 vehicles)",
        "lotsync: 3 problems in 3-wednesday-full.csv",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    // The story is not interrupted by log lines, and the hold's reason is said once.
    assert!(
        !stderr.contains("WARN"),
        "log lines in the story:\n{stderr}"
    );
    let files = stdout.split("The inventory as").next().unwrap_or_default();
    assert_eq!(
        files
            .matches("would mark 7 of 11 in-stock vehicles sold")
            .count(),
        1,
        "{files}"
    );
    // The last prices and states as the service holds them.
    let row = |stock: &str| {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(stock))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(row("U1001").contains("$40495") && row("U1001").ends_with("in stock"));
    assert!(row("U1005").ends_with("in stock"), "back in stock");
    assert!(row("U1010").ends_with("sold"));
    assert!(row("U1012").ends_with("sold"), "sold by the DMS's own word");
    assert!(
        !stdout.contains("1HGCV1F37LA020099 "),
        "a rejected record is never sent"
    );
    // It ends by asking `lotsync why` about Tuesday's sold car and Wednesday's returning one.
    let asked = stdout
        .find("$ lotsync why U1010")
        .unwrap_or_else(|| panic!("the demo asks why about U1010:\n{stdout}"));
    let stories = &stdout[asked..];
    for line in [
        "2-tuesday-full.csv left it out (1 file in a row): sold by absence",
        "$ lotsync why U1005",
        "3-wednesday-full.csv line 6 lists it on the lot again: back in stock",
        "4-thursday-truncated.csv left it out and would mark it sold, but the safety guard held the file",
    ] {
        assert!(stories.contains(line), "missing {line:?} in:\n{stories}");
    }
}
