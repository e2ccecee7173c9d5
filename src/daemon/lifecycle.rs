//! A file's plan, once for the daemon ([`super::FilePipeline`]) and the one-shot commands
//! (`lotsync plan`, `sync`, `release`): its profile and rules, the service's list when the
//! state knows no vehicle at one of the feed's locations, the diff (committed when asked, a claimed
//! file's report drafted just before), and what became of it ([`Planned`]) with the notices it
//! calls for ([`PlannedFile::tell_held`], [`tell_rejected`]). `sync` and `release` file a copy
//! of what they apply in the feed's archive here too ([`file_copy`], [`settle`]).
//!
//! It owns those steps, not what the diff decides (`crate::diff`), how operations are sent
//! (the uploader), where the daemon moves a file (`super::FilePipeline`), nor what a command
//! prints.

use std::collections::BTreeSet;

use super::{read_service_list, ServiceListError};
use crate::api::ApiClient;
use crate::config::{Config, FeedConfig};
use crate::diff::{diff_file_drafted, DiffError, DiffOptions, FileDiffError, FilePlan, Listed};
use crate::diff::{Rules, Verdict};
use crate::inbox::{Claimed, FeedFolders, FileReport, Outcome};
use crate::mapper::{Profile, ProfileError};
use crate::outbox::Outbox;
use crate::text::{shown_name, shown_path, Chain, Escaped};
use crate::upload::pace::Pace;
use crate::upload::{Notices, RejectedOp};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a plan may go past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Past {
    /// Nothing: the safety guard holds, a cut file is incomplete, an older full snapshot is
    /// superseded (a file arriving, `plan`, `sync`).
    Nothing,
    /// The safety guard, and a cut last record: the file as it is (a release).
    Guard,
    /// Also a newer full snapshot applied since (`release --force`).
    GuardAndNewer,
}

/// Where the service's list comes from, for a feed's first file at a location the state
/// knows no vehicle at (see [`Listed`]).
pub enum Listing<'a> {
    /// Read from the service when the state needs it, at `pace` (the uploader's of the same
    /// token, or [`Pace::configured`] for a one-shot command without one).
    Read {
        client: &'a ApiClient,
        pace: &'a Pace,
    },
    /// Read when the state needs it, with the client the config names (its token read only
    /// then: a command that needs no list runs without one) at the config's pace.
    Configured,
    /// Read already, or given up on (`lotsync plan` plans without it, and says so).
    Given(Option<Listed>),
}

/// One file to plan, and how.
#[derive(Clone, Copy)]
pub struct FileToPlan<'a> {
    pub config: &'a Config,
    pub feed: &'a FeedConfig,
    pub path: &'a Path,
    pub past: Past,
    /// Queue the plan in the outbox (else it is only shown).
    pub commit: bool,
    /// Keep the plan's operations in what comes back (to show them). Otherwise they are
    /// dropped, once counted in the report, where they were made: a large file's are many.
    pub keep_ops: bool,
    /// A claimed file: its report's draft is written beside it just before the commit.
    pub claimed: Option<&'a Claimed>,
}

/// What became of a file planned.
#[derive(Debug)]
pub enum Planned {
    /// Planned: its verdict says applied, held, superseded or already applied (unchanged);
    /// its report, the counts and the records rejected.
    File(Box<PlannedFile>),
    /// Its last record is cut: it waits for a person to release it as it is.
    Incomplete(FileDiffError),
    /// It cannot be read.
    Unreadable(FileDiffError),
}

/// A file's plan and its report as the plan found it (nothing delivered yet).
#[derive(Debug)]
pub struct PlannedFile {
    /// The plan (its operations only when [`FileToPlan::keep_ops`] asked for them).
    pub planned: FilePlan,
    pub report: FileReport,
}

impl PlannedFile {
    pub fn verdict(&self) -> &Verdict {
        &self.planned.plan.verdict
    }

    /// Nothing of the file is queued, though it was read: held by the safety guard, or
    /// older than a snapshot applied since.
    pub fn stopped(&self) -> bool {
        matches!(
            self.verdict(),
            Verdict::Held { .. } | Verdict::Superseded { .. }
        )
    }

    /// Tells a held file, named as it is filed (where `lotsync release` finds it); nothing
    /// for a file of any other verdict, nor without notifications.
    pub fn tell_held(&self, notices: Option<&Notices>, filed_as: &Path) {
        if let Verdict::Held { reasons } = self.verdict() {
            tell_held(notices, filed_as, &self.planned.plan.file.sha256, reasons);
        }
    }
}

/// Planning stopped before the file's verdict (the file itself is fine or unread).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("feed {feed}")]
    Profile {
        feed: String,
        #[source]
        source: ProfileError,
    },
    #[error(transparent)]
    ServiceList(#[from] ServiceListError),
    /// The service's list is needed, and the config's client cannot be made (its token).
    #[error(transparent)]
    Client(#[from] crate::config::ConfigError),
    /// The state or the outbox failed under the diff.
    #[error(transparent)]
    Diff(DiffError),
    /// The blocking task of the plan did not finish.
    #[error("planning task failed")]
    Task(#[source] tokio::task::JoinError),
}

/// A feed's profile and the rules its files are diffed by (the profile's lots included).
pub fn profile_and_rules(
    config: &Config,
    feed: &FeedConfig,
    past: Past,
) -> Result<(Profile, Rules), PlanError> {
    let profile = Profile::find(&feed.profile, &config.profiles_dir).map_err(|source| {
        PlanError::Profile {
            feed: feed.name.clone(),
            source,
        }
    })?;
    let lots: Vec<u64> = profile.locations.values().copied().collect();
    let mut rules = feed.rules(config.api.organization_id, &lots, past != Past::Nothing);
    rules.sibling_feeds = sibling_feeds(config, feed, &rules.locations);
    Ok((profile, rules))
}

/// The config's other feeds that speak for one of `locations` ([`feed_locations`]): two
/// feeds of one lot share the vehicles both list.
fn sibling_feeds(
    config: &Config,
    feed: &FeedConfig,
    locations: &BTreeSet<u64>,
) -> BTreeSet<String> {
    config
        .feeds
        .iter()
        .filter(|other| other.name != feed.name)
        .filter(|other| !feed_locations(config, other).is_disjoint(locations))
        .map(|other| other.name.clone())
        .collect()
}

/// The locations a feed's full snapshots speak for, its profile's lots included; by its
/// `location_id` when its profile cannot be read (it plans nothing until it can).
pub fn feed_locations(config: &Config, feed: &FeedConfig) -> BTreeSet<u64> {
    let lots: Vec<u64> = Profile::find(&feed.profile, &config.profiles_dir)
        .map(|p| p.locations.values().copied().collect())
        .unwrap_or_default();
    feed.locations(&lots)
}

/// The service's list when the feed of `rules` needs it ([`needs_service_list`]; the state
/// read off the async threads, the list read without holding it).
async fn service_list_if_needed(
    outbox: &Arc<Outbox>,
    client: &ApiClient,
    pace: &Pace,
    config: &Config,
    rules: &Rules,
) -> Result<Option<Listed>, PlanError> {
    if !needs_service_list(outbox, rules).await? {
        return Ok(None);
    }
    Ok(Some(read_service_list(client, pace, config).await?))
}

/// The service's list read with the client the config names (its token read now) at the
/// config's pace: for a one-shot command, which has no uploader to share them with.
pub async fn read_configured_service_list(config: &Config) -> Result<Listed, PlanError> {
    let client = config.api.client()?;
    let pace = Pace::configured(&config.api, client.service_wait().clone());
    Ok(read_service_list(&client, &pace, config).await?)
}

/// Whether the feed of `rules` plans its next file against the service's list
/// ([`crate::state::State::needs_service_list`]: its first file, or its first at a location
/// the state knows no vehicle at), read off the async threads.
async fn needs_service_list(outbox: &Arc<Outbox>, rules: &Rules) -> Result<bool, PlanError> {
    let state = outbox.clone();
    let (org, feed) = (rules.organization_id, rules.feed.clone());
    let locations = rules.locations.clone();
    Ok(tokio::task::spawn_blocking(move || {
        state.state().needs_service_list(org, &feed, &locations)
    })
    .await
    .map_err(PlanError::Task)?
    .map_err(ServiceListError::from)?)
}

/// Plans one file: its profile and rules, the service's list when needed (`listing`), then
/// the file read, mapped and diffed off the async threads, and committed when asked (a
/// claimed file's draft written just before). A file that cannot be read, or is cut, is an
/// outcome ([`Planned::Unreadable`], [`Planned::Incomplete`]); the state, the outbox or the
/// service failing under it is the error.
pub async fn plan_file(
    outbox: &Arc<Outbox>,
    file: FileToPlan<'_>,
    listing: Listing<'_>,
) -> Result<Planned, PlanError> {
    let (profile, rules) = profile_and_rules(file.config, file.feed, file.past)?;
    let listed = match listing {
        Listing::Read { client, pace } => {
            service_list_if_needed(outbox, client, pace, file.config, &rules).await?
        }
        Listing::Configured => match needs_service_list(outbox, &rules).await? {
            false => None,
            true => Some(read_configured_service_list(file.config).await?),
        },
        Listing::Given(listed) => listed,
    };
    let options = DiffOptions {
        commit: file.commit,
        listed,
        // A release takes the file as it is, even cut in its last record.
        accept_incomplete: file.past != Past::Nothing,
        accept_older: file.past == Past::GuardAndNewer,
    };
    let (outbox, path, location_id, keep_ops) = (
        outbox.clone(),
        file.path.to_owned(),
        file.feed.location_id,
        file.keep_ops,
    );
    let drafting = file
        .claimed
        .map(|c| (FeedFolders::new(&file.feed.inbox), c.clone()));
    let planned = tokio::task::spawn_blocking(move || {
        let mut planned = diff_file_drafted(
            &outbox,
            rules,
            &profile,
            location_id,
            &path,
            options,
            |plan, found, file_no| match &drafting {
                Some((folders, claimed)) => {
                    let mut draft = FileReport::from_parts(plan, found);
                    draft.file_no = Some(file_no);
                    // True when written: nothing delivered yet, everything queued.
                    draft.in_hand(&draft.just_committed());
                    folders.write_draft(claimed, &draft)
                }
                None => Ok(()),
            },
        )?;
        // The report is made here, and the plan's operations dropped here unless shown.
        let report = FileReport::planned(&planned);
        if !keep_ops {
            planned.plan.ops = Vec::new();
            planned.plan.changes = Default::default();
        }
        Ok(Box::new(PlannedFile { planned, report }))
    })
    .await
    .map_err(PlanError::Task)?;
    match planned {
        Ok(planned) => Ok(Planned::File(planned)),
        Err(FileDiffError::Export(e)) if e.is_incomplete() => {
            Ok(Planned::Incomplete(FileDiffError::Export(e)))
        }
        Err(e @ (FileDiffError::Io(_) | FileDiffError::Export(_))) => Ok(Planned::Unreadable(e)),
        Err(FileDiffError::Diff(e)) => Err(PlanError::Diff(e)),
    }
}

/// Tells a held file (by the safety guard, or incomplete), named as it is filed.
pub fn tell_held(notices: Option<&Notices>, filed_as: &Path, sha256: &str, reasons: &[String]) {
    if let Some(notices) = notices {
        notices.held(&shown_path(filed_as), sha256, reasons);
    }
}

/// Tells a delivered file's problems, when it has any: the records the mapper rejected and
/// the operations the service refused, as its report lists them.
pub fn tell_rejected(notices: Option<&Notices>, report: &FileReport) {
    if let Some(notices) = notices {
        let mut problems: Vec<String> = report
            .rejected_records
            .iter()
            .map(ToString::to_string)
            .collect();
        problems.extend(report.refused.iter().map(ToString::to_string));
        notices.rejected(&report.file, &report.sha256, &problems);
    }
}

/// Files a copy of an export a one-shot command applied in the feed's archive with its
/// report, as the daemon files what it takes, so that `lotsync reconcile --rebuild` reads it
/// too (`sync` and `release` run without a daemon: a running one holds the state). The report
/// says what is queued, delivered so far (nothing yet); [`settle`] writes it again once
/// delivery is known. A file already applied is filed when the archive lacks it (a sync
/// stopped between queuing the file's plan and filing its copy); a held one is not filed. A
/// copy that cannot be made is logged, and the command goes on.
pub fn file_copy(
    outbox: &Outbox,
    feed: &FeedConfig,
    path: &Path,
    planned: &PlannedFile,
) -> Option<(FeedFolders, PathBuf)> {
    let folders = FeedFolders::new(&feed.inbox);
    let mut report = planned.report.clone();
    let shown = shown_path(path);
    let plan = &planned.planned.plan;
    match plan.verdict {
        Verdict::Apply { .. } => {
            if let Some(n) = plan.file_no {
                match outbox.progress(n) {
                    Ok(progress) => report.delivered(&progress, Vec::new()),
                    Err(e) => {
                        tracing::warn!(file = %shown_name(path), path = %shown, error = %Chain(&e), "the archived report keeps the plan's counts")
                    }
                }
            }
        }
        Verdict::AlreadyApplied { .. } => {
            if folders.archive_holds(&plan.file.sha256) {
                return None;
            }
            report.outcome = Outcome::Applied;
            report.notes.push(
                "filed by a later one-shot sync of the same content: the sync that applied it \
                 stopped before filing its copy; its counts are in that sync's summary"
                    .into(),
            );
        }
        // Filed, as the daemon files it: its report names the newer file.
        Verdict::Superseded { .. } => {}
        Verdict::Held { .. } => return None,
    }
    match folders.archive_copy(path, &report) {
        Ok(to) => {
            tracing::info!(feed = %feed.name, file = %shown_name(path), path = %shown, archived = %shown_path(&to), "copy archived");
            Some((folders, to))
        }
        Err(e) => {
            tracing::warn!(feed = %feed.name, file = %shown_name(path), path = %shown, error = %Chain(&e), "no copy archived (a rebuild of the state will not read it)");
            None
        }
    }
}

/// A one-shot command's applied file once delivery is known: the report of its archived
/// copy (`archived`, from [`file_copy`]) says what the service acknowledged and what is still
/// queued, and, when delivery ran (`refused`: what the service refused of every file), its
/// problems are told as the daemon tells them. Nothing for a file of another verdict: nothing
/// of it was delivered now.
pub fn settle(
    outbox: &Outbox,
    planned: &PlannedFile,
    archived: Option<&(FeedFolders, PathBuf)>,
    refused: Option<&[RejectedOp]>,
    notices: Option<&Notices>,
) {
    let plan = &planned.planned.plan;
    if !matches!(plan.verdict, Verdict::Apply { .. }) {
        return;
    }
    let mine: Vec<RejectedOp> = refused
        .unwrap_or_default()
        .iter()
        .filter(|r| r.file_no == plan.file_no)
        .cloned()
        .collect();
    let mut report = planned.report.clone();
    let progress = match plan.file_no.map(|n| outbox.progress(n)) {
        Some(Ok(progress)) => Some(progress),
        Some(Err(e)) => {
            tracing::warn!(file = %Escaped(&plan.file.name), error = %Chain(&e), "the archived report keeps the plan's counts");
            None
        }
        None => Some(Default::default()),
    };
    match &progress {
        Some(progress) => report.delivered(progress, mine),
        None => report.refused = mine,
    }
    if refused.is_some() {
        tell_rejected(notices, &report);
    }
    if let (Some((folders, to)), Some(_)) = (archived, &progress) {
        if let Err(e) = folders.rewrite_report(to, &report) {
            tracing::warn!(file = %Escaped(&plan.file.name), error = %Chain(&e), "the archived report keeps the plan's counts");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbox::Answer;
    use std::time::{Duration, SystemTime};

    /// A site in a fresh folder: a config of organization 100 with the one full feed `main`
    /// (location 10), its state opened, and where exports are written.
    struct Site {
        config: Config,
        outbox: Arc<Outbox>,
        dir: PathBuf,
        _tmp: tempfile::TempDir,
    }

    fn open_site(name: &str, feed: &str) -> Site {
        let tmp = crate::testing::temp_dir(&format!("lifecycle-{name}"));
        let dir = tmp.path().to_owned();
        let path = dir.join("lotsync.toml");
        std::fs::create_dir_all(dir.join("inbox")).unwrap();
        std::fs::write(
            &path,
            format!(
                "[api]\nbase_url = \"http://127.0.0.1:9\"\norganization_id = 100\n\
                 token_env = \"LOTSYNC_UNIT_TOKEN\"\n[state]\ndir = \"state\"\n\
                 [[feed]]\nname = \"main\"\ninbox = \"inbox\"\nlocation_id = 10\n{feed}"
            ),
        )
        .unwrap();
        let config = Config::load(&path).unwrap();
        let outbox = Arc::new(Outbox::new(
            crate::state::State::open(&config.state.dir).unwrap(),
        ));
        Site {
            config,
            outbox,
            dir,
            _tmp: tmp,
        }
    }

    /// A 17-character VIN with a correct check digit, one per `n` (below 33).
    fn vin(n: u8) -> String {
        const ALPHABET: &[u8] = b"0123456789ABCDEFGHJKLMNPRSTUVWXYZ";
        let mut chars = b"1HGCM82600A000000".to_vec();
        chars[16] = ALPHABET[usize::from(n)];
        chars[8] = crate::mapper::check_digit(&chars) as u8;
        String::from_utf8(chars).unwrap()
    }

    impl Site {
        /// An export of these rows (after the header), modified `age` ago.
        fn export(&self, name: &str, rows: &[String], age: Duration) -> PathBuf {
            let mut body = String::from("VIN,Stock,Year,Make,Model\n");
            for row in rows {
                body.push_str(row);
                body.push('\n');
            }
            let path = self.dir.join(name);
            std::fs::write(&path, body).unwrap();
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(SystemTime::now() - age)
                .unwrap();
            path
        }

        fn cars(&self, name: &str, cars: std::ops::Range<u8>, age: Duration) -> PathBuf {
            let rows: Vec<String> = cars
                .map(|n| format!("{},S{n},2020,Honda,Accord", vin(n)))
                .collect();
            self.export(name, &rows, age)
        }

        async fn plan(&self, path: &Path, past: Past, commit: bool, keep_ops: bool) -> Planned {
            let file = FileToPlan {
                config: &self.config,
                feed: &self.config.feeds[0],
                path,
                past,
                commit,
                keep_ops,
                claimed: None,
            };
            // The state knows no vehicle at the feed's location yet: the service holds none.
            let listing = Listing::Given(Some(Listed::default()));
            plan_file(&self.outbox, file, listing).await.unwrap()
        }

        async fn planned(&self, path: &Path, commit: bool) -> PlannedFile {
            match self.plan(path, Past::Nothing, commit, false).await {
                Planned::File(planned) => *planned,
                other => panic!("not planned: {other:?}"),
            }
        }

        /// Every queued operation answered as applied (the vehicles are then in stock).
        fn deliver_all(&self) {
            let taken = self.outbox.take(100, 1000).unwrap();
            for (n, entry) in taken.iter().enumerate() {
                let answer = Answer::Applied {
                    service_id: Some(n as u64 + 1),
                    sold: Some(false),
                };
                self.outbox.acknowledge(entry.seq, &answer).unwrap();
            }
        }
    }

    /// A file planned to be shown keeps its operations; committed, they are queued and
    /// dropped from what comes back, counted in its report first.
    #[tokio::test]
    async fn a_plan_keeps_its_operations_only_when_asked() {
        let site = open_site("ops", "");
        let day1 = site.cars("day1.csv", 0..4, Duration::ZERO);
        let shown = match site.plan(&day1, Past::Nothing, false, true).await {
            Planned::File(planned) => *planned,
            other => panic!("{other:?}"),
        };
        assert_eq!(shown.verdict(), &Verdict::Apply { forced: false });
        assert_eq!(shown.planned.plan.ops.len(), 4);
        assert!(!shown.stopped());
        assert!(site.outbox.is_empty(), "shown, not queued");

        let committed = site.planned(&day1, true).await;
        assert_eq!(committed.verdict(), &Verdict::Apply { forced: false });
        assert!(
            committed.planned.plan.ops.is_empty(),
            "dropped once counted"
        );
        assert_eq!(committed.report.planned.create, 4);
        assert_eq!(committed.report.outcome, Outcome::Applied);
        assert_eq!(site.outbox.len(), 4, "queued");
    }

    /// Every verdict comes back as such: applied, then the same content again (unchanged),
    /// a snapshot that would sell most of the lot (held, stopped), an older snapshot
    /// (superseded, stopped); and the held one released past the guard applies.
    #[tokio::test]
    async fn each_verdict_is_the_outcome_and_held_and_superseded_stop_the_file() {
        let site = open_site("verdicts", "");
        let day1 = site.cars("day1.csv", 0..4, Duration::from_secs(7200));
        assert!(matches!(
            site.planned(&day1, true).await.verdict(),
            Verdict::Apply { .. }
        ));
        site.deliver_all();

        let again = site.planned(&day1, true).await;
        assert!(
            matches!(again.verdict(), Verdict::AlreadyApplied { same_as, .. } if same_as == "day1.csv"),
            "{:?}",
            again.verdict()
        );
        assert!(!again.stopped());

        let day2 = site.cars("day2.csv", 0..1, Duration::ZERO);
        let held = site.planned(&day2, true).await;
        assert!(
            matches!(held.verdict(), Verdict::Held { reasons } if reasons[0].contains("would mark 3 of 4")),
            "{:?}",
            held.verdict()
        );
        assert!(held.stopped());
        assert!(matches!(held.report.outcome, Outcome::Held { .. }));
        assert!(site.outbox.is_empty(), "nothing of a held file is queued");

        let older = site.cars("day0.csv", 0..3, Duration::from_secs(3 * 3600));
        let superseded = site.planned(&older, true).await;
        assert!(
            matches!(superseded.verdict(), Verdict::Superseded { newer, .. } if newer == "day1.csv"),
            "{:?}",
            superseded.verdict()
        );
        assert!(superseded.stopped());

        let released = match site.plan(&day2, Past::Guard, true, false).await {
            Planned::File(planned) => *planned,
            other => panic!("{other:?}"),
        };
        assert_eq!(released.verdict(), &Verdict::Apply { forced: true });
        assert_eq!(released.report.planned.sold, 3);
    }

    /// Records the mapper rejects are in the plan and its report, by line; the rest is
    /// planned.
    #[tokio::test]
    async fn rejected_records_are_in_the_report_by_line() {
        let site = open_site("rejected", "");
        let rows = vec![
            format!("{},S1,2020,Honda,Accord", vin(1)),
            "NOT-A-VIN,S2,2020,Honda,Accord".to_owned(),
        ];
        let file = site.export("mixed.csv", &rows, Duration::ZERO);
        let planned = site.planned(&file, true).await;
        assert_eq!(planned.planned.plan.counts.rejected_records, 1);
        assert_eq!(planned.report.rejected_records.len(), 1);
        assert_eq!(planned.report.rejected_records[0].line, 3);
        assert_eq!(planned.report.planned.create, 1);
    }

    /// A file cut in its last record is incomplete (a release takes it as it is), a file
    /// that is not there unreadable: outcomes, not errors. A profile that cannot be found is
    /// the error, naming the feed.
    #[tokio::test]
    async fn a_cut_file_is_incomplete_a_missing_one_unreadable_and_a_bad_profile_an_error() {
        let site = open_site("unplanned", "");
        let cut = site.dir.join("cut.csv");
        std::fs::write(
            &cut,
            format!("VIN,Stock,Year,Make,Model\n{},S1,2020,Hon", vin(1)),
        )
        .unwrap();
        assert!(matches!(
            site.plan(&cut, Past::Nothing, false, false).await,
            Planned::Incomplete(_)
        ));
        assert!(matches!(
            site.plan(&cut, Past::Guard, false, false).await,
            Planned::File(_)
        ));
        let missing = site.dir.join("missing.csv");
        assert!(matches!(
            site.plan(&missing, Past::Nothing, false, false).await,
            Planned::Unreadable(_)
        ));

        let elsewhere = open_site("no-profile", "profile = \"nowhere\"\n");
        let file = elsewhere.cars("day1.csv", 0..1, Duration::ZERO);
        let file = FileToPlan {
            config: &elsewhere.config,
            feed: &elsewhere.config.feeds[0],
            path: &file,
            past: Past::Nothing,
            commit: false,
            keep_ops: false,
            claimed: None,
        };
        let planned = plan_file(&elsewhere.outbox, file, Listing::Given(None)).await;
        assert!(
            matches!(&planned, Err(PlanError::Profile { feed, .. }) if feed == "main"),
            "{planned:?}"
        );
    }
}
