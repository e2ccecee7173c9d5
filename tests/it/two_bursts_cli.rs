//! A DMS that writes its export in two bursts: `lotsync run` as a real process against the
//! sandbox on loopback. It writes 85% of the file, closes it, and appends the rest 3 s later:
//! the daemon takes the whole file (a full snapshot much smaller than the feed's last waits
//! in case it still grows), nothing is sold and nothing goes to `failed/`.

use crate::common;

use common::fleet::{Car, HEADER};
use common::site::{reports, Site};
use common::{sandbox_with, sold, state};
use lotsync::sandbox::Behaviour;
use std::io::Write;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_written_in_two_bursts_is_taken_whole() {
    let sb = sandbox_with(Behaviour::default()).await;
    let site = Site::new("two-bursts", &sb.base_url());
    let cars: Vec<Car> = (0..100).map(Car::new).collect();
    let day1 = site.export("day1.csv", &cars);
    let out = site.lotsync(&["sync", day1.to_str().unwrap()]).await;
    assert_eq!(common::site::code(&out), 0);
    let inbox = site.inbox();
    let mut daemon = site.start();
    site.wait_listening(&mut daemon).await;

    // The DMS appends as it always does (O_APPEND, creating the file if it is gone).
    // The price of each car changed, so the file has new content; 85 records, closed.
    let line = |c: &Car| {
        let mut c = c.clone();
        c.price += 100;
        c.line()
    };
    let path = inbox.join("day2.csv");
    let mut first = String::from(HEADER);
    cars[..85].iter().for_each(|c| first.push_str(&line(c)));
    std::fs::write(&path, first).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut rest = String::new();
    cars[85..].iter().for_each(|c| rest.push_str(&line(c)));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(rest.as_bytes()).unwrap();
    drop(file);

    site.wait_until(Duration::from_secs(30), "day2.csv archived", || {
        reports(&inbox, "archive")
            .iter()
            .any(|r| r["file"] == "day2.csv")
    })
    .await;
    let report = reports(&inbox, "archive")
        .into_iter()
        .find(|r| r["file"] == "day2.csv")
        .unwrap();
    assert_eq!(report["records"], 100, "read whole: {report:#}");
    assert_eq!(report["counts"]["sold"], 0, "{report:#}");
    assert!(reports(&inbox, "failed").is_empty(), "{}", site.log());
    assert_eq!(sold(&state(&sb).await), 0, "{}", site.log());
}
