//! The daemon's own decisions, on a daemon opened over a real state in a temporary folder
//! (nothing watched or run): which waiting export goes first, which feed a file to release
//! belongs to, what a reconciliation asked of it does when it fails (the next try and its
//! wait), and what it refuses.

use super::*;
use crate::sandbox::RunningSandbox;

/// A config of two feeds (`main` for location 10, `north` for 11) in a fresh folder, for
/// `base_url` with `token`.
fn site(name: &str, base_url: &str, token: &str) -> (tempfile::TempDir, Arc<Config>) {
    let tmp = crate::testing::temp_dir(&format!("daemon-run-{name}"));
    let dir = tmp.path();
    crate::config::write_token_file(&dir.join("token"), token).expect("token file");
    for inbox in ["main", "north"] {
        std::fs::create_dir_all(dir.join(inbox).join("held")).expect("inbox");
    }
    let text = format!(
        "[api]\nbase_url = \"{base_url}\"\norganization_id = 100\ntoken_file = \"{d}/token\"\n\
         max_requests_per_second = 200\nmax_attempts = 1\n\
         [state]\ndir = \"{d}/state\"\n\
         [daemon]\nsocket = \"{d}/lotsync.sock\"\nreconcile_retry_secs = 10\n\
         [[feed]]\nname = \"main\"\ninbox = \"{d}/main\"\nlocation_id = 10\n\
         [[feed]]\nname = \"north\"\ninbox = \"{d}/north\"\nlocation_id = 11\n",
        d = dir.display(),
    );
    let path = dir.join("lotsync.toml");
    std::fs::write(&path, text).expect("config");
    let config = Config::load(&path).expect("the config loads");
    (tmp, Arc::new(config))
}

fn open(config: &Arc<Config>) -> Arc<Daemon> {
    let (daemon, _listener) = Daemon::open(config.clone()).expect("the daemon opens");
    daemon
}

/// A file in `dir` last modified `secs_ago` seconds ago (its as-of time under the `auto`
/// profile, which reads no date from names).
fn export(dir: &Path, name: &str, secs_ago: u64) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, "vin,stock\n").expect("export");
    let file = std::fs::File::options()
        .write(true)
        .open(&path)
        .expect("the export opens");
    file.set_modified(std::time::SystemTime::now() - Duration::from_secs(secs_ago))
        .expect("mtime");
    path
}

/// Of the files waiting, the oldest export goes first whatever order they were handed over
/// in, the first handed over among equals; one that is gone counts oldest.
#[tokio::test]
async fn the_oldest_export_waiting_is_taken_first() {
    let (tmp, config) = site("oldest", "http://127.0.0.1:9", "t");
    let daemon = open(&config);
    let feed = config.feeds[0].clone();
    let inbox = tmp.path().join("main");
    let newest = export(&inbox, "c.csv", 100);
    let older = export(&inbox, "a.csv", 3000);
    let as_old = export(&inbox, "b.csv", 3000);
    let mut waiting = vec![newest.clone(), older.clone(), as_old.clone()];
    assert_eq!(daemon.oldest(&feed, &mut waiting).await, Some(older));
    assert_eq!(daemon.oldest(&feed, &mut waiting).await, Some(as_old));
    assert_eq!(
        daemon.oldest(&feed, &mut waiting).await,
        Some(newest.clone())
    );
    assert_eq!(daemon.oldest(&feed, &mut waiting).await, None);

    let gone = inbox.join("gone.csv");
    let mut waiting = vec![newest.clone(), gone.clone()];
    assert_eq!(daemon.oldest(&feed, &mut waiting).await, Some(gone));
    assert_eq!(waiting, [newest]);
}

/// A file to release belongs to the feed named, else to the feed whose `held/` holds it,
/// else to the one whose inbox it is under; a file of no feed's is refused.
#[test]
fn a_file_to_release_belongs_to_the_feed_named_or_holding_it() {
    let (tmp, config) = site("held-feed", "http://127.0.0.1:9", "t");
    let dir = tmp.path();
    let held = export(&dir.join("north").join("held"), "day1.csv", 0);
    assert_eq!(held_feed(&config, &held, None).unwrap().name, "north");
    assert_eq!(
        held_feed(&config, &held, Some("main")).unwrap().name,
        "main"
    );
    let dropped = export(&dir.join("main"), "day2.csv", 0);
    assert_eq!(held_feed(&config, &dropped, None).unwrap().name, "main");
    let elsewhere = export(dir, "stray.csv", 0);
    assert!(held_feed(&config, &elsewhere, None).is_err());
    assert!(held_feed(&config, &held, Some("nosuchfeed")).is_err());
}

/// A rebuild is refused by a running daemon (its state is in use), with what to do instead.
#[tokio::test]
async fn a_running_daemon_refuses_a_rebuild() {
    let (_tmp, config) = site("rebuild", "http://127.0.0.1:9", "t");
    let daemon = open(&config);
    let reply = daemon
        .answer(control::Request::Reconcile { rebuild: true })
        .await;
    assert_eq!(reply.outcome, crate::outcome::CommandOutcome::Failed);
    assert!(reply.text.contains("stop lotsync first"), "{}", reply.text);
    assert!(daemon.reconcile_retry.lock().unwrap().is_none());
}

/// A reconciliation that fails is tried again after `reconcile_retry_secs`, doubling with
/// each try, and not after the fifth; status says which try failed and when the next comes.
/// One that succeeds clears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_reconciliation_is_tried_again_with_doubling_waits_five_times() {
    let sb = RunningSandbox::on_loopback(Default::default())
        .await
        .expect("sandbox starts");
    // A token the service refuses: the list cannot be read, the run fails at once.
    let (tmp, config) = site("retry", &sb.base_url(), "not-the-token");
    let daemon = open(&config);
    for (tries, wait) in [(1, Some(10)), (2, Some(20)), (4, Some(80)), (5, None)] {
        let before = Instant::now();
        let reply = daemon.reconcile_try(tries).await;
        assert_eq!(
            reply.outcome,
            crate::outcome::CommandOutcome::Failed,
            "{}",
            reply.text
        );
        assert!(
            reply.text.starts_with("reconciliation failed"),
            "{}",
            reply.text
        );
        let next = *daemon.reconcile_retry.lock().unwrap();
        match wait {
            Some(secs) => {
                let (at, next_tries) = next.expect("a retry is set");
                assert_eq!(next_tries, tries + 1);
                let waited = at.duration_since(before);
                assert!(
                    waited >= Duration::from_secs(secs) && waited < Duration::from_secs(secs + 5),
                    "try {tries}: {waited:?}"
                );
            }
            None => assert_eq!(next, None, "no sixth try"),
        }
        let failed = daemon.live.lock().unwrap().reconcile_failed.clone();
        let failed = failed.expect("the failure is in the status");
        assert_eq!(failed.tries, tries);
        assert_eq!(failed.next_try.is_some(), wait.is_some());
    }

    // The right token: the next try succeeds and clears the failure.
    crate::config::write_token_file(&tmp.path().join("token"), "sandbox-token").unwrap();
    assert!(daemon.read_token_again());
    let reply = daemon.reconcile_try(1).await;
    assert_eq!(
        reply.outcome,
        crate::outcome::CommandOutcome::Done,
        "{}",
        reply.text
    );
    assert!(daemon.reconcile_retry.lock().unwrap().is_none());
    let live = daemon.live.lock().unwrap().clone();
    assert!(live.reconcile_failed.is_none());
    assert!(live.last_reconcile.is_some());
}
