//! A dealership on disk for process tests: a config (organization 100, one full feed `main`
//! reading `inbox/` for location 10, a control socket), its state dir, and `lotsync` commands
//! run against it as real processes.

use super::fleet::{export, Car};
use super::TempDir;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Site {
    pub dir: TempDir,
    pub config: PathBuf,
    /// The advice commands already checked ([`super::advice`]).
    advice: Mutex<BTreeSet<String>>,
}

impl Site {
    /// `rate` requests/s at most; `api` is appended to `[api]`, `daemon` to `[daemon]`;
    /// `feeds` replaces the one feed.
    pub fn with(
        name: &str,
        base_url: &str,
        rate: u32,
        api: &str,
        daemon: &str,
        feeds: &str,
    ) -> Site {
        let dir = TempDir::new(name);
        let config = dir.path().join("lotsync.toml");
        let site = Site {
            dir,
            config,
            advice: Mutex::default(),
        };
        site.write_config(base_url, rate, api, daemon, feeds);
        site
    }

    /// The usual site: one full feed `main` on `inbox/`, location 10, 1,000 requests/s.
    pub fn new(name: &str, base_url: &str) -> Site {
        Site::with(name, base_url, 1000, "", "", super::MAIN_FEED)
    }

    pub fn write_config(&self, base_url: &str, rate: u32, api: &str, daemon: &str, feeds: &str) {
        std::fs::create_dir_all(self.inbox()).unwrap();
        std::fs::write(
            &self.config,
            format!(
                "{}[daemon]\nsocket = \"run/lotsync.sock\"\nsettle_secs = 0.3\n{daemon}\n{feeds}\n",
                super::site_config(base_url, rate, api)
            ),
        )
        .unwrap();
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn inbox(&self) -> PathBuf {
        self.dir.path().join("inbox")
    }

    /// The daemon's control socket, as the config names it.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("run/lotsync.sock")
    }

    /// The inbox folder `name` (created).
    pub fn feed_inbox(&self, name: &str) -> PathBuf {
        let inbox = self.dir.path().join(name);
        std::fs::create_dir_all(&inbox).unwrap();
        inbox
    }

    /// An export of `cars` beside the config (not in the inbox).
    pub fn export(&self, name: &str, cars: &[Car]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, export(cars)).unwrap();
        path
    }

    /// `lotsync ARGS --config …`, with the sandbox's token in `LOTSYNC_TEST_TOKEN`.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lotsync"));
        cmd.args(args)
            .arg("--config")
            .arg(&self.config)
            .env("LOTSYNC_TEST_TOKEN", "sandbox-token")
            .env("RUST_LOG", "info");
        cmd
    }

    /// Runs a command to its end, off the runtime that serves the sandbox; the advice it
    /// prints is checked ([`Site::heed`]).
    pub async fn lotsync(&self, args: &[&str]) -> Output {
        let mut cmd = self.command(args);
        let out = tokio::task::spawn_blocking(move || cmd.output().expect("lotsync runs"))
            .await
            .unwrap();
        self.heed(&out);
        out
    }

    /// Checks that every command `out` prints as advice runs as printed for this site
    /// ([`super::advice`]), each once.
    pub fn heed(&self, out: &Output) {
        let printed = format!("{}{}", text(&out.stdout), text(&out.stderr));
        self.heed_text(&printed, true);
    }

    fn heed_text(&self, printed: &str, paths_now: bool) {
        let mut seen = self.advice.lock().unwrap_or_else(|e| e.into_inner());
        super::advice::check(printed, &self.config, paths_now, &mut seen);
    }

    /// The advice commands checked so far.
    pub fn advice_checked(&self) -> Vec<String> {
        let seen = self.advice.lock().unwrap_or_else(|e| e.into_inner());
        seen.iter().cloned().collect()
    }

    /// Runs a command that should end by itself within `within`; killed (and the test failed)
    /// if it does not.
    pub async fn lotsync_within(&self, args: &[&str], within: Duration) -> Output {
        let mut cmd = self.command(args);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = cmd.spawn().expect("lotsync runs");
        let pid = child.id();
        let waited = tokio::task::spawn_blocking(move || child.wait_with_output());
        match tokio::time::timeout(within, waited).await {
            Ok(out) => {
                let out = out.unwrap().expect("lotsync output");
                self.heed(&out);
                out
            }
            Err(_) => {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                panic!("lotsync {args:?} still running after {within:?}");
            }
        }
    }

    /// Makes the config read its token from the file `token` beside it (instead of
    /// `LOTSYNC_TEST_TOKEN`) and writes `token` there; returns the file's path, to rotate it.
    pub fn use_token_file(&self, token: &str) -> PathBuf {
        let config = std::fs::read_to_string(&self.config).unwrap().replace(
            "token_env = \"LOTSYNC_TEST_TOKEN\"",
            "token_file = \"token\"",
        );
        std::fs::write(&self.config, config).unwrap();
        let path = self.path().join("token");
        lotsync::config::write_token_file(&path, token).unwrap();
        path
    }

    /// Starts `lotsync run`, logging to `daemon.log`.
    pub fn start(&self) -> Daemon {
        self.start_with_env(&[])
    }

    /// Starts `lotsync run` with more (or other) environment variables, such as another
    /// `LOTSYNC_TEST_TOKEN`; logging to `daemon.log`.
    pub fn start_with_env(&self, env: &[(&str, &str)]) -> Daemon {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("daemon.log"))
            .unwrap();
        let child = self
            .command(&["run"])
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("lotsync runs");
        Daemon { child }
    }

    /// `lotsync status --format json`: its figures, whatever its verdict (OK, WARNING or
    /// CRITICAL; UNKNOWN, it could not be read, fails the test).
    pub async fn status(&self) -> serde_json::Value {
        self.status_check().await.1
    }

    /// `lotsync status --format json`: its exit code (0 to 2) and its figures.
    pub async fn status_check(&self) -> (i32, serde_json::Value) {
        let out = self.lotsync(&["status", "--format", "json"]).await;
        let status: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
        assert!(
            (0..=2).contains(&code(&out)),
            "{status:#}\n{}",
            text(&out.stderr)
        );
        assert_eq!(status["check"]["code"], code(&out), "{status:#}");
        (code(&out), status)
    }

    /// Waits until `daemon` listens on its control socket; fails with the log if it exits
    /// first or does not listen within 20 s.
    pub async fn wait_listening(&self, daemon: &mut Daemon) {
        let socket = self.socket();
        let start = Instant::now();
        while !socket.exists() {
            if let Some(status) = daemon.child.try_wait().unwrap() {
                panic!(
                    "the daemon exited ({status}) before it listened\nlog:\n{}",
                    self.log()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the daemon does not listen after 20 s\nlog:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The daemon's log; its advice is checked (the files it names may have moved on since).
    pub fn log(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default();
        self.heed_text(&log, false);
        log
    }

    /// Polls `done` until it holds; fails with the daemon's log after `within`.
    pub async fn wait_until(&self, within: Duration, what: &str, mut done: impl FnMut() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(
                start.elapsed() < within,
                "{what}: not within {within:?}\nlog:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A `lotsync run` process, killed if the test ends first.
pub struct Daemon {
    pub child: Child,
}

impl Daemon {
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{signal}");
    }

    /// Waits for the process to end; its exit code and how long it took.
    pub async fn exit(mut self, within: Duration) -> (Option<i32>, Duration) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status.code(), start.elapsed());
            }
            assert!(start.elapsed() < within, "still running after {within:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Drops a complete file the way export tools do: written aside, renamed in.
pub fn drop_file(inbox: &Path, name: &str, contents: &[u8]) -> PathBuf {
    let tmp = inbox.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, contents).unwrap();
    let to = inbox.join(name);
    std::fs::rename(&tmp, &to).unwrap();
    to
}

/// The reports under a feed's folder (`archive`, `held` or `failed`), parsed.
pub fn reports(inbox: &Path, folder: &str) -> Vec<serde_json::Value> {
    let mut found = Vec::new();
    let mut dirs = vec![inbox.join(folder)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.to_string_lossy().ends_with(".report.json") {
                // A report is written before its file is moved; read it whole.
                if let Ok(v) = serde_json::from_slice(&std::fs::read(&path).unwrap()) {
                    found.push(v);
                }
            }
        }
    }
    found
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A process's exit code; -1 when a signal ended it.
pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// Runs `lotsync ARGS FILES` for `site` to the end and returns (exit code, stdout, stderr).
pub async fn run(site: &Site, args: &[&str], files: &[&Path]) -> (i32, String, String) {
    let mut cmd = site.command(args);
    cmd.args(files);
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("lotsync runs"))
        .await
        .unwrap();
    site.heed(&out);
    (code(&out), text(&out.stdout), text(&out.stderr))
}

/// The sandbox's vehicle with this VIN, in its state (`common::state`).
pub fn vehicle<'a>(st: &'a serde_json::Value, vin: &str) -> &'a serde_json::Value {
    st["vehicles"]
        .as_array()
        .and_then(|all| all.iter().find(|v| v["vehicle"]["vin"] == vin))
        .unwrap_or_else(|| panic!("the sandbox holds {vin}: {st:#}"))
}

/// Runs one command line lotsync printed as advice, as a shell would: this build's `lotsync`
/// first on the PATH, the sandbox's token in the environment the test configs name.
pub fn run_printed(line: &str) -> Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_lotsync"))
        .parent()
        .expect("the binary is in a folder")
        .to_owned();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("sh")
        .args(["-c", line])
        .env("PATH", path)
        .env("LOTSYNC_TEST_TOKEN", "sandbox-token")
        .output()
        .expect("sh runs")
}
