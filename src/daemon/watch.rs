//! Watching one feed's inbox: which export files are complete, in order of arrival.
//!
//! notify (inotify) says something changed; this module decides what is ready. A file is ready
//! when it was renamed into the inbox (an export tool writing `x.tmp` and renaming it: the
//! rename is atomic, so the file is whole), or when its size and modification time stayed the
//! same for the feed's settle time. A file seen being written (created or modified) is not
//! ready, whatever its age, until the kernel says its writer closed it (close-after-write):
//! a writer pausing right after a line break leaves bytes that look whole. That wait is
//! bounded ([`WatchSettings::close_wait`]); without the close by then, the settle time alone
//! decides, as for a file found by a scan with no event seen (at start) and for `watch =
//! "poll"` feeds (network shares send no events). Each file is handed out once (by inode: a file replaced
//! under the same name is a new file). notify is not a perfect source, so the inbox is also
//! looked at in full: at start, when notify says it dropped events (`Rescan`), every
//! [`SAFETY_RESCAN`], and every poll interval for `watch = "poll"` (network shares send no
//! events). It owns the watching, not the files' moves ([`crate::inbox::FeedFolders`]) nor their
//! processing. notify's `PollWatcher` is not used for `watch = "poll"`: that scan already stats
//! every file each interval, which is all `PollWatcher` would do (on a thread of its own per
//! feed), and the settle time needs the stamps it keeps.

use crate::config::WatchMode;
use crate::inbox::{Arrival, FeedFolders};
use crate::text::{shown_path, Chain};
use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher};
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{mpsc, watch};

/// Even with notify, the whole inbox is looked at this often: a missed event delays a file,
/// it never loses it.
pub const SAFETY_RESCAN: Duration = Duration::from_secs(60);

/// How one feed's inbox is watched.
#[derive(Debug, Clone)]
pub struct WatchSettings {
    pub feed: String,
    pub mode: WatchMode,
    pub poll_interval: Duration,
    pub settle: Duration,
    /// How long a file seen being written waits for its writer to close it before the settle
    /// time alone decides (`incomplete_wait_secs`: as long as a cut file waits).
    pub close_wait: Duration,
}

/// What tells a file changed: its inode (a file replaced under its name is another), size
/// and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    inode: u64,
    size: u64,
    modified: Option<SystemTime>,
}

impl FileStamp {
    /// A file of no bytes.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    pub fn of_meta(meta: &std::fs::Metadata) -> FileStamp {
        FileStamp {
            inode: meta.ino(),
            size: meta.len(),
            modified: meta.modified().ok(),
        }
    }

    /// The file's stamp, None when it is gone.
    pub fn of(path: &Path) -> Option<FileStamp> {
        std::fs::metadata(path).ok().map(|m| FileStamp::of_meta(&m))
    }
}

/// A file seen in the inbox and not handed out yet.
#[derive(Debug, Clone)]
struct Pending {
    stamp: FileStamp,
    stable_since: Instant,
    renamed_in: bool,
    /// Order of first sight, so files go out in order of arrival.
    order: u64,
}

/// Decides which files are complete; no I/O of its own beyond `stat`.
#[derive(Debug)]
pub struct Settler {
    settle: Duration,
    pending: HashMap<PathBuf, Pending>,
    /// Handed out: path → (inode, size, modification time). The same file unchanged at the
    /// same path is not handed out again; changed (a DMS finishing a file the worker found
    /// cut), it settles and is handed out again.
    handed: HashMap<PathBuf, FileStamp>,
    /// Folders and links to outside the inbox already told about (once each, while they
    /// stay).
    warned: HashSet<PathBuf>,
    next_order: u64,
    /// Files seen being written (created, or their data modified) and not closed by their
    /// writer since, with when that was last seen; such a file is not ready before its close
    /// or `close_wait` after.
    open_for_write: HashMap<PathBuf, Instant>,
    close_wait: Duration,
}

impl Settler {
    pub fn new(settle: Duration) -> Settler {
        Settler {
            settle,
            pending: HashMap::new(),
            handed: HashMap::new(),
            warned: HashSet::new(),
            next_order: 0,
            open_for_write: HashMap::new(),
            close_wait: Duration::ZERO,
        }
    }

    /// A settler that waits up to `close_wait` for the writer of a file seen being written
    /// to close it ([`Settler::written`], [`Settler::closed`]).
    pub fn with_close_wait(mut self, close_wait: Duration) -> Settler {
        self.close_wait = close_wait;
        self
    }

    /// The kernel said `path` is being written (created, or its data modified): it is not
    /// ready before its writer closes it, or `close_wait` after this.
    pub fn written(&mut self, path: &Path, now: Instant) {
        self.open_for_write.insert(path.to_owned(), now);
    }

    /// The kernel said the writer of `path` closed it (close-after-write).
    pub fn closed(&mut self, path: &Path) {
        self.open_for_write.remove(path);
    }

    /// When a file seen being written stops waiting for its close: None when it was not
    /// seen being written (or was closed since).
    fn close_due(&self, path: &Path) -> Option<Instant> {
        self.open_for_write
            .get(path)
            .map(|since| *since + self.close_wait)
    }

    /// Looks at one path (after an event or during a scan). `renamed_in`: it was just renamed
    /// into the inbox, so it is complete.
    pub fn look(&mut self, folders: &FeedFolders, path: &Path, renamed_in: bool, now: Instant) {
        let meta = match folders.arrival(path) {
            Ok(Arrival::Export(meta)) => meta,
            Ok(Arrival::OutsideLink) => {
                if self.warned.insert(path.to_owned()) {
                    tracing::warn!(file = %crate::text::shown_name(path), path = %crate::text::shown_path(path), "a link to outside the inbox; left alone");
                }
                return;
            }
            Ok(Arrival::Folder) => {
                if self.warned.insert(path.to_owned()) {
                    tracing::warn!(
                        folder = %shown_path(path),
                        "a folder in the inbox; left alone (lotsync takes export files, not folders)"
                    );
                }
                return;
            }
            Ok(Arrival::Ignored) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.pending.remove(path);
                self.handed.remove(path);
                self.warned.remove(path);
                self.open_for_write.remove(path);
                return;
            }
            Err(e) => {
                tracing::warn!(file = %crate::text::shown_name(path), path = %crate::text::shown_path(path), error = %Chain(&e), "cannot look at a file in the inbox");
                return;
            }
        };
        let stamp = FileStamp::of_meta(&meta);
        if self.handed.get(path) == Some(&stamp) {
            return;
        }
        self.handed.remove(path);
        match self.pending.get_mut(path) {
            Some(p) if p.stamp == stamp => {
                p.renamed_in |= renamed_in;
            }
            Some(p) => {
                // Still being written, or replaced: it settles again from now.
                p.stamp = stamp;
                p.stable_since = now;
                p.renamed_in = renamed_in;
            }
            None => {
                self.next_order += 1;
                self.pending.insert(
                    path.to_owned(),
                    Pending {
                        stamp,
                        stable_since: now,
                        renamed_in,
                        order: self.next_order,
                    },
                );
            }
        }
    }

    /// Looks at every file in the inbox, and forgets files that left it.
    pub fn scan(&mut self, folders: &FeedFolders, now: Instant) -> std::io::Result<()> {
        let present = folders.names()?;
        self.pending.retain(|p, _| present.contains(p));
        self.handed.retain(|p, _| present.contains(p));
        self.warned.retain(|p| present.contains(p));
        self.open_for_write.retain(|p, _| present.contains(p));
        // Oldest first, so files that arrived while nobody watched keep their order.
        let mut present: Vec<(Option<SystemTime>, PathBuf)> = present
            .into_iter()
            .map(|p| (p.symlink_metadata().and_then(|m| m.modified()).ok(), p))
            .collect();
        present.sort();
        for (_, path) in present {
            self.look(folders, &path, false, now);
        }
        Ok(())
    }

    /// Complete files, in order of arrival; each is handed out once.
    pub fn ready(&mut self, now: Instant) -> Vec<PathBuf> {
        let mut ready: Vec<(u64, PathBuf)> = self
            .pending
            .iter()
            .filter(|(path, p)| self.is_complete(path, p, now))
            .map(|(path, p)| (p.order, path.clone()))
            .collect();
        ready.sort();
        ready
            .into_iter()
            .map(|(_, path)| {
                let renamed_in = match self.pending.remove(&path) {
                    Some(p) => {
                        self.handed.insert(path.clone(), p.stamp);
                        p.renamed_in
                    }
                    None => false,
                };
                if self.open_for_write.remove(&path).is_some() && !renamed_in {
                    tracing::warn!(
                        file = %crate::text::shown_name(&path), path = %crate::text::shown_path(&path),
                        waited_secs = self.close_wait.as_secs(),
                        "no close by its writer seen; taken since it stopped changing"
                    );
                }
                path
            })
            .collect()
    }

    /// Whether a pending file is complete: renamed in, or unchanged for the settle time and
    /// not open for writing (as far as the kernel said, within `close_wait`).
    fn is_complete(&self, path: &Path, p: &Pending, now: Instant) -> bool {
        if p.renamed_in {
            return true;
        }
        let settled = now.duration_since(p.stable_since) >= self.settle;
        settled && self.close_due(path).is_none_or(|due| now >= due)
    }

    /// When the next settling file could be ready.
    pub fn next_due(&self) -> Option<Instant> {
        self.pending
            .iter()
            .map(|(path, p)| {
                let settled = p.stable_since + self.settle;
                match self.close_due(path) {
                    Some(due) if !p.renamed_in => settled.max(due),
                    _ => settled,
                }
            })
            .min()
    }
}

/// What notify told, reduced to what the settler needs.
enum Seen {
    Paths {
        paths: Vec<PathBuf>,
        renamed_in: bool,
        writing: Writing,
    },
    Rescan,
}

/// What an event says of a file's writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writing {
    /// Created or its data modified: a writer has it open.
    Open,
    /// Its writer closed it (the kernel's close-after-write).
    Closed,
    /// Nothing about a writer (a rename, its attributes, a read).
    Unsaid,
}

impl Writing {
    fn of(kind: &EventKind) -> Writing {
        match kind {
            EventKind::Create(_) | EventKind::Modify(ModifyKind::Data(_)) => Writing::Open,
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => Writing::Closed,
            _ => Writing::Unsaid,
        }
    }
}

/// Watches one inbox until `stop` turns true, sending complete files to `files` in order of
/// arrival.
pub async fn watch_inbox(
    folders: FeedFolders,
    settings: WatchSettings,
    files: mpsc::Sender<PathBuf>,
    mut stop: watch::Receiver<bool>,
) {
    let feed = settings.feed.clone();
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    // Kept alive for as long as the inbox is watched.
    let watcher = match settings.mode {
        WatchMode::Poll => None,
        WatchMode::Notify => match start_notify(folders.inbox(), seen_tx) {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::error!(
                    feed = %feed,
                    inbox = %shown_path(folders.inbox()),
                    error = %describe_notify_error(&e),
                    "cannot watch the inbox; looking every {} s instead",
                    settings.poll_interval.as_secs_f64()
                );
                None
            }
        },
    };
    let polling = watcher.is_none();
    let every = if polling {
        settings.poll_interval
    } else {
        SAFETY_RESCAN
    };
    let mut settler = Settler::new(settings.settle).with_close_wait(settings.close_wait);
    let mut next_scan = Instant::now();
    loop {
        let now = Instant::now();
        if now >= next_scan {
            // A folder read and a stat per file, over the network for a share: off the async
            // threads, the settler with it.
            let scanned = tokio::task::spawn_blocking({
                let folders = folders.clone();
                move || {
                    let scanned = settler.scan(&folders, now);
                    (settler, scanned)
                }
            })
            .await;
            let scanned = match scanned {
                Ok((back, scanned)) => {
                    settler = back;
                    scanned
                }
                Err(e) => {
                    // The scan panicked (it does not): looked at afresh from a new settler.
                    tracing::error!(feed = %feed, error = %Chain(&e), "the inbox scan failed");
                    settler = Settler::new(settings.settle).with_close_wait(settings.close_wait);
                    Ok(())
                }
            };
            if let Err(e) = scanned {
                tracing::warn!(feed = %feed, inbox = %shown_path(folders.inbox()), error = %Chain(&e), "cannot read the inbox");
            }
            next_scan = now + every;
        }
        for path in settler.ready(Instant::now()) {
            tracing::debug!(feed = %feed, file = %crate::text::shown_name(&path), path = %crate::text::shown_path(&path), "complete");
            if files.send(path).await.is_err() {
                return;
            }
        }
        let wake = settler
            .next_due()
            .map_or(next_scan, |due| due.min(next_scan));
        tokio::select! {
            _ = stop.changed() => return,
            () = tokio::time::sleep_until(wake.into()) => {}
            event = seen.recv(), if !polling => match event {
                Some(Seen::Rescan) => {
                    tracing::info!(feed = %feed, "notify dropped events; looking at the whole inbox");
                    next_scan = Instant::now();
                }
                Some(Seen::Paths { paths, renamed_in, writing }) => {
                    let now = Instant::now();
                    for path in paths {
                        match writing {
                            Writing::Open => settler.written(&path, now),
                            Writing::Closed => settler.closed(&path),
                            Writing::Unsaid => {}
                        }
                        settler.look(&folders, &path, renamed_in, now);
                    }
                }
                None => return,
            },
        }
        if *stop.borrow() {
            return;
        }
    }
}

fn start_notify(
    inbox: &Path,
    seen: mpsc::UnboundedSender<Seen>,
) -> notify::Result<notify::RecommendedWatcher> {
    let inbox_dir = inbox.to_owned();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let seen_now = match event {
            Ok(event) if event.need_rescan() => Seen::Rescan,
            Ok(event) => {
                let renamed_in = matches!(
                    event.kind,
                    EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both))
                );
                let mut paths = event.paths;
                if matches!(
                    event.kind,
                    EventKind::Modify(ModifyKind::Name(RenameMode::Both))
                ) {
                    // [from, to]: the file now is at `to`; `from` is looked at by the other
                    // event of the pair.
                    paths.drain(..paths.len().saturating_sub(1));
                }
                paths.retain(|p| p.parent() == Some(inbox_dir.as_path()));
                if paths.is_empty() {
                    return;
                }
                Seen::Paths {
                    paths,
                    renamed_in,
                    writing: Writing::of(&event.kind),
                }
            }
            Err(e) => {
                tracing::warn!(error = %describe_notify_error(&e), "notify reported an error; looking at the whole inbox");
                Seen::Rescan
            }
        };
        let _ = seen.send(seen_now);
    })?;
    watcher.watch(inbox, RecursiveMode::NonRecursive)?;
    Ok(watcher)
}

/// notify's error, with the sysctl to raise when a kernel limit is the cause.
pub fn describe_notify_error(e: &notify::Error) -> String {
    match &e.kind {
        notify::ErrorKind::MaxFilesWatch => format!(
            "{e}: the inotify watch limit is reached; raise it with \
             `sysctl fs.inotify.max_user_watches=524288` (and in /etc/sysctl.d/ to keep it), \
             or set watch = \"poll\" for this feed"
        ),
        notify::ErrorKind::Io(io) if io.raw_os_error() == Some(24) => format!(
            "{e}: too many inotify instances; raise them with \
             `sysctl fs.inotify.max_user_instances=1024` (and in /etc/sysctl.d/ to keep it), \
             or set watch = \"poll\" for this feed"
        ),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh inbox (removed when the guard drops), its path and its folders.
    fn inbox(name: &str) -> (tempfile::TempDir, PathBuf, FeedFolders) {
        let tmp = crate::testing::temp_dir(&format!("watch-{name}"));
        let dir = tmp.path().to_owned();
        let folders = FeedFolders::new(&dir);
        folders.ensure().unwrap();
        (tmp, dir, folders)
    }

    #[test]
    fn a_file_is_ready_once_it_stopped_changing_and_only_once() {
        let (_tmp, dir, folders) = inbox("settle");
        let settle = Duration::from_secs(2);
        let mut s = Settler::new(settle);
        let t0 = Instant::now();
        std::fs::write(dir.join("a.csv"), "vin\n").unwrap();
        s.look(&folders, &dir.join("a.csv"), false, t0);
        assert!(s.ready(t0 + Duration::from_secs(1)).is_empty());
        // It grows: settling starts again.
        std::fs::write(dir.join("a.csv"), "vin\n1\n").unwrap();
        s.look(
            &folders,
            &dir.join("a.csv"),
            false,
            t0 + Duration::from_secs(1),
        );
        assert!(s.ready(t0 + Duration::from_millis(2500)).is_empty());
        assert_eq!(
            s.next_due(),
            Some(t0 + Duration::from_secs(3)),
            "due settle after the last change"
        );
        assert_eq!(
            s.ready(t0 + Duration::from_secs(3)),
            vec![dir.join("a.csv")]
        );
        // Seen again (a scan, an event): not handed out twice.
        s.scan(&folders, t0 + Duration::from_secs(4)).unwrap();
        assert!(s.ready(t0 + Duration::from_secs(10)).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_rename_into_the_inbox_is_ready_at_once_and_a_replaced_file_is_new() {
        let (_tmp, dir, folders) = inbox("rename");
        let mut s = Settler::new(Duration::from_secs(2));
        let t0 = Instant::now();
        std::fs::write(dir.join("b.csv"), "one").unwrap();
        s.look(&folders, &dir.join("b.csv"), true, t0);
        assert_eq!(s.ready(t0), vec![dir.join("b.csv")]);
        // The DMS replaces it before it was claimed: a new inode, a new file.
        std::fs::write(dir.join("b.csv.tmp"), "two").unwrap();
        std::fs::rename(dir.join("b.csv.tmp"), dir.join("b.csv")).unwrap();
        s.look(&folders, &dir.join("b.csv"), true, t0);
        assert_eq!(s.ready(t0), vec![dir.join("b.csv")]);
        // Partial names are never candidates.
        s.look(&folders, &dir.join("b.csv.tmp"), true, t0);
        std::fs::write(dir.join("c.csv.part"), "x").unwrap();
        s.look(&folders, &dir.join("c.csv.part"), true, t0);
        assert!(s.ready(t0 + Duration::from_secs(5)).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file seen being written is not ready while its writer has it open, however long it
    /// stays unchanged (a pause right after a line break looks whole): only its close, or
    /// `close_wait` without one, lets the settle time decide.
    #[test]
    fn a_file_open_for_writing_waits_for_its_close() {
        let (_tmp, dir, folders) = inbox("open");
        let mut s = Settler::new(Duration::from_secs(2)).with_close_wait(Duration::from_secs(60));
        let t0 = Instant::now();
        let path = dir.join("a.csv");
        std::fs::write(&path, "vin\n1\n").unwrap();
        s.written(&path, t0);
        s.look(&folders, &path, false, t0);
        assert!(s.ready(t0 + Duration::from_secs(30)).is_empty(), "open");
        assert_eq!(s.next_due(), Some(t0 + Duration::from_secs(60)));
        s.closed(&path);
        assert_eq!(s.next_due(), Some(t0 + Duration::from_secs(2)));
        assert_eq!(s.ready(t0 + Duration::from_secs(30)), vec![path.clone()]);

        // No close ever seen: after close_wait, the settle time alone decides.
        let other = dir.join("b.csv");
        std::fs::write(&other, "vin\n2\n").unwrap();
        s.written(&other, t0);
        s.look(&folders, &other, false, t0);
        assert!(s.ready(t0 + Duration::from_secs(59)).is_empty());
        assert_eq!(s.ready(t0 + Duration::from_secs(60)), vec![other.clone()]);

        // A file renamed in is whole, whatever was seen of it before.
        let renamed = dir.join("c.csv");
        std::fs::write(&renamed, "vin\n3\n").unwrap();
        s.written(&renamed, t0);
        s.look(&folders, &renamed, true, t0);
        assert_eq!(s.ready(t0), vec![renamed]);

        // Gone: forgotten.
        let gone = dir.join("d.csv");
        s.written(&gone, t0);
        s.look(&folders, &gone, false, t0);
        assert!(!s.open_for_write.contains_key(&gone));
    }

    #[test]
    fn writes_and_closes_are_told_by_the_events_kind() {
        use notify::event::{CreateKind, DataChange, MetadataKind};
        assert_eq!(
            Writing::of(&EventKind::Create(CreateKind::File)),
            Writing::Open
        );
        assert_eq!(
            Writing::of(&EventKind::Modify(ModifyKind::Data(DataChange::Any))),
            Writing::Open
        );
        assert_eq!(
            Writing::of(&EventKind::Access(AccessKind::Close(AccessMode::Write))),
            Writing::Closed
        );
        assert_eq!(
            Writing::of(&EventKind::Access(AccessKind::Open(AccessMode::Any))),
            Writing::Unsaid
        );
        assert_eq!(
            Writing::of(&EventKind::Modify(ModifyKind::Metadata(MetadataKind::Any))),
            Writing::Unsaid
        );
    }

    #[test]
    fn kernel_limits_name_the_sysctl_to_raise() {
        let watches = describe_notify_error(&notify::Error::new(notify::ErrorKind::MaxFilesWatch));
        assert!(watches.contains("fs.inotify.max_user_watches"), "{watches}");
        let instances =
            describe_notify_error(&notify::Error::io(std::io::Error::from_raw_os_error(24)));
        assert!(
            instances.contains("fs.inotify.max_user_instances"),
            "{instances}"
        );
        assert!(instances.contains("watch = \"poll\""), "{instances}");
    }

    #[test]
    fn files_go_out_in_order_of_arrival() {
        let (_tmp, dir, folders) = inbox("order");
        let mut s = Settler::new(Duration::ZERO);
        let t0 = Instant::now();
        for name in ["z.csv", "a.csv", "m.csv"] {
            std::fs::write(dir.join(name), name).unwrap();
            s.look(&folders, &dir.join(name), false, t0);
        }
        assert_eq!(
            s.ready(t0),
            vec![dir.join("z.csv"), dir.join("a.csv"), dir.join("m.csv")]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
