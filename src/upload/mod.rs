//! The uploader: drains the outbox through the service client, as fast as the service allows
//! and no faster, and records every answer back into the state.
//!
//! - Pacing ([`pace`]): one controller per token decides when the next request may go: the
//!   service's Retry-After held for every sender, a rate that adapts to the service
//!   ([`rate`]), and one probe at a time while every request fails ([`outage`]); plus a bound
//!   on requests in flight. Operations waiting between retries hold neither.
//! - Retries (backon): short exponential backoff with jitter per call (the long waits are the
//!   pace's), never sooner than the service's Retry-After; for 429, 5xx, timeouts and dropped
//!   connections. An operation still failing after every attempt goes back to the outbox and
//!   is taken again. When nothing has been answered for [`UploadSettings::give_up_after`] on
//!   the wall clock, or the service asks to wait longer than that, delivery stops and says so.
//! - Rejected answers (400, 404, 422) are recorded on the vehicle and reported; the diff does
//!   not send the same payload again.
//! - Fatal answers (401, 403) stop delivery at once; the outbox keeps every operation not
//!   answered.
//! - Ids: creates are repeated safely (POST is create-or-modify by VIN); a sold or in-stock call
//!   for a vehicle without a known id learns it first (`deliver.rs`).
//!
//! It does not decide what to send (the diff) nor how a call looks on the wire (the client).
//! Notifications of the incidents it meets go through [`Notices`].

mod deliver;
#[cfg(test)]
mod model_tests;
mod notices;
pub mod outage;
pub mod pace;
pub mod rate;

pub use notices::{Notices, NOTICE_WAIT};
pub use pace::{DeliveryCondition, Stopped};

use crate::api::{ApiClient, ApiError};
use crate::config::ApiConfig;
use crate::outbox::{self, Entry, Outbox, OutboxError};
use crate::state::StateError;
use deliver::{Delivery, Job};
use pace::Pace;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// How delivery paces and retries.
#[derive(Debug, Clone)]
pub struct UploadSettings {
    /// The ceiling of the request rate; the uploader adapts below it.
    pub max_requests_per_second: f64,
    /// Requests let through at once after a quiet spell.
    pub burst: u32,
    /// Requests in flight at once.
    pub max_in_flight: u32,
    pub retry: RetryPolicy,
    /// Delivery stops when operations keep failing and nothing has been answered for this long.
    pub give_up_after: Duration,
}

impl UploadSettings {
    pub fn from_config(api: &ApiConfig) -> UploadSettings {
        UploadSettings {
            max_requests_per_second: api.max_requests_per_second,
            burst: api.burst,
            max_in_flight: api.max_in_flight,
            retry: RetryPolicy {
                max_attempts: api.max_attempts,
                ..RetryPolicy::default()
            },
            give_up_after: Duration::from_secs(api.give_up_after_secs),
        }
    }

    /// Operations taken from the outbox at once: those in flight plus those waiting to retry.
    fn window(&self) -> usize {
        (self.max_in_flight as usize * 32).max(256)
    }
}

/// Retries of one operation's call.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// The first wait; each next one doubles, with jitter.
    pub min_delay: Duration,
    pub max_delay: Duration,
    /// Attempts of one call before the operation goes back to the outbox.
    pub max_attempts: u32,
    /// The jitter's seed; None (always, but on the model of the service) draws one per call.
    /// On paused time, a seed makes a run the same every time.
    pub jitter_seed: Option<u64>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            min_delay: Duration::from_millis(50),
            // Short: the pace owns the long waits (the service's Retry-After for every
            // sender, an outage's probes) and sets the rate of all requests, retries included;
            // a long wait per operation only held operations back for failures that were
            // passing, long after the service answered again. At 1 s, the few of 6,000
            // operations that drew four or five random 5xx in a row ended a run 3 s after the
            // rest (at a limit of 200/s, 8% of the rate after the first 10 s).
            max_delay: Duration::from_millis(250),
            max_attempts: 8,
            jitter_seed: None,
        }
    }
}

impl RetryPolicy {
    fn backoff(&self) -> backon::ExponentialBuilder {
        let backoff = backon::ExponentialBuilder::default()
            .with_jitter()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_max_times(self.max_attempts.saturating_sub(1) as usize);
        match self.jitter_seed {
            Some(seed) => backoff.with_jitter_seed(seed),
            None => backoff,
        }
    }
}

/// Delivery cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The setup is wrong (token, organization, address); `queued` operations stay queued.
    #[error("delivery stopped: {error} ({queued} operations stay queued)")]
    Fatal { error: Box<ApiError>, queued: usize },
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    #[error(transparent)]
    State(#[from] StateError),
    /// A blocking task of the delivery (state work off the async threads) did not finish.
    #[error("delivery task failed")]
    Task(#[source] tokio::task::JoinError),
}

/// Counters of a delivery, updated as it goes (read them for progress).
#[derive(Debug, Default)]
pub struct UploadStats {
    /// HTTP requests sent, retries included.
    pub requests: AtomicU64,
    /// Attempts repeated after a passing failure.
    pub retries: AtomicU64,
    /// 429 answers.
    pub throttled: AtomicU64,
    /// Operations answered (applied or rejected).
    pub answered: AtomicU64,
    pub created: AtomicU64,
    pub updated: AtomicU64,
    pub sold: AtomicU64,
    pub in_stock: AtomicU64,
    /// Operations the service refused.
    pub rejected: AtomicU64,
    /// Operations by kind and how their delivery ended (for the metrics).
    answers: [[AtomicU64; OpAnswer::ALL.len()]; OP_KINDS.len()],
}

/// The kinds of operation, as [`crate::plan::Op::name`] says them.
const OP_KINDS: [&str; 4] = ["create", "update", "sold", "in_stock"];

/// With nothing in flight and only operations a plan in progress keeps back, the outbox is
/// looked at again this often.
const KEPT_BACK_LOOK: Duration = Duration::from_millis(100);

/// When delivery stops, the answers of calls on their way are awaited for the client's
/// timeout and this much more (an answer that took the whole timeout, then read).
const LATE: Duration = Duration::from_secs(1);

/// How one operation's delivery ended, as the metrics count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpAnswer {
    /// The service applied it.
    Applied,
    /// The service refused it (400, 404, 422): recorded on the vehicle, not sent again.
    Rejected,
    /// Still failing after every retry: back to the outbox, sent again later.
    Retryable,
    /// A fatal answer (401, 403) stopped delivery; back to the outbox.
    Fatal,
}

impl OpAnswer {
    pub const ALL: [OpAnswer; 4] = [
        OpAnswer::Applied,
        OpAnswer::Rejected,
        OpAnswer::Retryable,
        OpAnswer::Fatal,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OpAnswer::Applied => "applied",
            OpAnswer::Rejected => "rejected",
            OpAnswer::Retryable => "retryable",
            OpAnswer::Fatal => "fatal",
        }
    }
}

/// How many operations of a kind ended with an answer, since the uploader started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpAnswerCount {
    /// `create`, `update`, `sold` or `in_stock`.
    pub kind: &'static str,
    pub answer: OpAnswer,
    pub count: u64,
}

/// A plain copy of [`UploadStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StatsSnapshot {
    pub requests: u64,
    pub retries: u64,
    pub throttled: u64,
    pub answered: u64,
    pub created: u64,
    pub updated: u64,
    pub sold: u64,
    pub in_stock: u64,
    pub rejected: u64,
}

impl UploadStats {
    /// One more operation of `op`'s kind ended with `answer`.
    fn count_answer(&self, op: &crate::plan::Op, answer: OpAnswer) {
        use crate::plan::Op;
        let kind = match op {
            Op::Create(_) => 0,
            Op::Update(_) => 1,
            Op::MarkSold => 2,
            Op::MarkInStock => 3,
        };
        self.answers[kind][answer as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Every kind with every answer (zeros included), in a fixed order.
    pub fn answers(&self) -> Vec<OpAnswerCount> {
        let mut counts = Vec::with_capacity(OP_KINDS.len() * OpAnswer::ALL.len());
        for (kind, row) in OP_KINDS.iter().zip(&self.answers) {
            for (answer, count) in OpAnswer::ALL.iter().zip(row) {
                counts.push(OpAnswerCount {
                    kind,
                    answer: *answer,
                    count: count.load(Ordering::Relaxed),
                });
            }
        }
        counts
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StatsSnapshot {
            requests: get(&self.requests),
            retries: get(&self.retries),
            throttled: get(&self.throttled),
            answered: get(&self.answered),
            created: get(&self.created),
            updated: get(&self.updated),
            sold: get(&self.sold),
            in_stock: get(&self.in_stock),
            rejected: get(&self.rejected),
        }
    }
}

/// An operation the service refused.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RejectedOp {
    pub seq: u64,
    pub location_id: u64,
    pub vin: String,
    pub op: &'static str,
    /// The file that queued it.
    pub file: String,
    /// The number that file is filed under in the state.
    #[serde(skip)]
    pub file_no: Option<u64>,
    pub status: u16,
    pub messages: Vec<String>,
}

impl std::fmt::Display for RejectedOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "VIN {}: the service refused the {} ({}): {}",
            self.vin,
            self.op,
            self.status,
            self.messages.join(" ")
        )
    }
}

/// How a delivery ended (short of a fatal error).
#[derive(Debug, Clone, Default)]
pub struct DrainReport {
    /// Operations the service refused, in the order answered.
    pub rejected: Vec<RejectedOp>,
    /// Operations left in the outbox for this organization.
    pub undelivered: usize,
    /// Why delivery stopped before the outbox was empty.
    pub stopped: Option<String>,
}

/// What the delivery tasks share.
struct Shared {
    client: ApiClient,
    pace: Pace,
    slots: tokio::sync::Semaphore,
    stats: UploadStats,
    retry: RetryPolicy,
    /// True while a drain stops: calls not yet sent stay unsent (see `deliver::call`).
    stopping: tokio::sync::watch::Sender<bool>,
    /// VIN → id from the service's list: read once per run to learn missing ids, and read again
    /// when a write is answered with another vehicle (see `deliver::learn_id`).
    listed_ids: tokio::sync::Mutex<Option<HashMap<String, u64>>>,
    /// The state whose ids are checked before an id is bound to a vehicle (None: no check,
    /// for tests of one call).
    state_ids: Option<Arc<Outbox>>,
    /// id → VIN of the ids this drain bound (not all committed yet); the state is asked for
    /// the others, one id at a time (see `deliver::check_bound`).
    bound_ids: tokio::sync::Mutex<HashMap<u64, String>>,
}

impl Shared {
    fn lane(&self) -> Lane<'_> {
        Lane {
            slots: &self.slots,
            pace: &self.pace,
            stats: &self.stats,
            retry: &self.retry,
            stopping: &self.stopping,
        }
    }
}

/// What every call of a delivery waits on and is counted in: a slot in flight, its turn under
/// the pace, and the retries of passing failures (`deliver::call`).
pub(super) struct Lane<'a> {
    slots: &'a tokio::sync::Semaphore,
    pace: &'a Pace,
    stats: &'a UploadStats,
    retry: &'a RetryPolicy,
    stopping: &'a tokio::sync::watch::Sender<bool>,
}

/// Drains an outbox through a client.
pub struct Uploader {
    shared: Arc<Shared>,
    outbox: Arc<Outbox>,
    settings: UploadSettings,
    notices: Option<Notices>,
    /// Set when delivery stops, cleared when the service answers again (for `status`).
    stopped: std::sync::Mutex<Option<Stopped>>,
}

impl Uploader {
    /// An uploader starting at the rate the last run settled on (or the ceiling).
    pub fn new(
        client: ApiClient,
        outbox: Arc<Outbox>,
        settings: UploadSettings,
    ) -> Result<Uploader, UploadError> {
        let remembered = outbox.state().upload_rate()?;
        let pace = Pace::new(
            settings.max_requests_per_second,
            remembered,
            settings.burst,
            client.service_wait().clone(),
        );
        // A quota the last run found spent holds this one too, until its reset.
        if let Some(until) = outbox.state().quota_until()? {
            let left = crate::clock::UtcTime::now().secs_until(until);
            if left > 0 {
                let wait = Duration::from_secs(left);
                client
                    .service_wait()
                    .hold(wait, crate::api::WaitReason::Quota);
            }
        }
        Ok(Uploader {
            shared: Arc::new(Shared {
                client,
                pace,
                slots: tokio::sync::Semaphore::new(settings.max_in_flight.max(1) as usize),
                stats: UploadStats::default(),
                retry: settings.retry.clone(),
                stopping: tokio::sync::watch::Sender::new(false),
                listed_ids: tokio::sync::Mutex::new(None),
                state_ids: Some(outbox.clone()),
                bound_ids: tokio::sync::Mutex::new(HashMap::new()),
            }),
            outbox,
            settings,
            notices: None,
            stopped: std::sync::Mutex::new(None),
        })
    }

    /// Tell the service's notifications about a fatal stop.
    /// An uploader as the config says (pace, retries), telling people through the service's
    /// notifications when the config has a `[notifications]` section (those are returned
    /// too, for the caller's own notices).
    pub fn configured(
        client: ApiClient,
        outbox: Arc<Outbox>,
        config: &crate::config::Config,
    ) -> Result<(Uploader, Option<Notices>), UploadError> {
        let notices = config.notifications.as_ref().map(|n| {
            let (slug, path) = (n.application_slug.clone(), config.path.clone());
            Notices::new(client.clone(), slug, outbox.clone(), path)
        });
        let mut uploader = Uploader::new(client, outbox, UploadSettings::from_config(&config.api))?;
        if let Some(n) = &notices {
            uploader = uploader.with_notices(n.clone());
        }
        Ok((uploader, notices))
    }

    pub fn with_notices(mut self, notices: Notices) -> Uploader {
        self.notices = Some(notices);
        self
    }

    pub fn stats(&self) -> &UploadStats {
        &self.shared.stats
    }

    /// The service client it delivers through.
    pub fn client(&self) -> &ApiClient {
        &self.shared.client
    }

    /// The pace its requests wait on: reads of the same token (the service's list) wait on it
    /// too, so that reads and writes share one rate, one Retry-After and one outage.
    pub fn pace(&self) -> &Pace {
        &self.shared.pace
    }

    /// Where delivery stands with the service (its wait, an outage, a stop), for `status`.
    pub fn condition(&self) -> DeliveryCondition {
        let mut condition = self.shared.pace.condition();
        condition.stopped = self.lock_stopped().clone();
        condition
    }

    /// Delivery stopped on a fatal answer (the uploader's own, or one a caller met on the
    /// service's list). Since the first stop, until something is delivered again.
    pub fn stopped_by(&self, error: &ApiError) {
        let reason = match error {
            ApiError::Fatal { reason, .. } => reason.clone(),
            other => other.to_string(),
        };
        self.stop(reason, error.status(), true);
    }

    /// A stop by a fatal answer of `status` no longer holds (a 401's token was replaced);
    /// the next delivery tells whether the fix works.
    pub fn forget_stop(&self, status: u16) {
        let mut stopped = self.lock_stopped();
        if stopped.as_ref().is_some_and(|s| s.status == Some(status)) {
            *stopped = None;
        }
    }

    fn stop(&self, reason: String, status: Option<u16>, fatal: bool) {
        let mut stopped = self.lock_stopped();
        let since = stopped
            .as_ref()
            .map_or_else(crate::clock::UtcTime::now, |s| s.since);
        *stopped = Some(Stopped {
            since,
            reason,
            status,
            fatal,
        });
    }

    fn lock_stopped(&self) -> std::sync::MutexGuard<'_, Option<Stopped>> {
        self.stopped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Requests per second the uploader paces at now.
    pub fn rate(&self) -> f64 {
        self.shared.pace.rate()
    }

    /// The rate it settled on: the current one, never above where the service last pushed
    /// back. Remembered in the state for the next run.
    pub fn settled_rate(&self) -> f64 {
        self.shared.pace.settled()
    }

    /// Operations of this organization in the outbox (read through the whole outbox: a
    /// blocking call).
    pub fn queued(&self) -> Result<usize, UploadError> {
        queued_of(&self.outbox, self.shared.client.organization_id())
    }

    /// Delivers until the outbox holds nothing more to send, delivery stalls, or a fatal
    /// answer stops it (the error, with the outbox intact). Dropping the future gives every
    /// operation taken back to the outbox.
    pub async fn drain(&self) -> Result<DrainReport, UploadError> {
        let org = self.shared.client.organization_id();
        let window = self.settings.window();
        let mut taken = Taken {
            outbox: &self.outbox,
            seqs: HashSet::new(),
        };
        let mut tasks: JoinSet<(u64, (Delivery, outbox::Sent))> = JoinSet::new();
        let mut jobs: HashMap<u64, Entry> = HashMap::new();
        let mut report = DrainReport::default();
        let mut last_answer = crate::clock::monotonic_now();
        let mut answered_any = false;
        let mut windows = self.shared.client.service_wait().subscribe();
        // Committed by now: the state answers for them.
        self.shared.bound_ids.lock().await.clear();
        self.shared.stopping.send_replace(false);
        let mut fatal = None;
        loop {
            let deadline = last_answer + self.settings.give_up_after;
            if let Some(why) = self.stop_reason(deadline, last_answer) {
                tracing::debug!(reason = %why, "delivery stops");
                // Waiting as the service asked is not a stop; giving up is.
                if self.shared.client.service_wait().window().is_none() {
                    self.stop(format!("gave up: {why}"), None, false);
                }
                report.stopped = Some(why);
                break;
            }
            if taken.seqs.len() <= window / 2 {
                for job in self.take(org, window - taken.seqs.len()).await? {
                    let seq = job.entry.seq;
                    taken.seqs.insert(seq);
                    jobs.insert(seq, job.entry.clone());
                    let shared = self.shared.clone();
                    tasks
                        .spawn(async move { (seq, deliver::deliver_counted(&shared, &job).await) });
                }
            }
            if tasks.is_empty() {
                if self.outbox.keeps_back() {
                    // Kept back by a plan in progress (its commit may replace them): they go
                    // out once it ends. Waiting for it is not delivery stalling.
                    last_answer = crate::clock::monotonic_now();
                    tokio::select! {
                        () = tokio::time::sleep(KEPT_BACK_LOOK) => {}
                        _ = windows.changed() => {}
                    }
                    continue;
                }
                break; // nothing in flight and nothing more to take
            }
            let joined = tokio::select! {
                joined = tasks.join_next() => joined,
                // Looked at again at the top: the give-up time, or a window of the service.
                () = tokio::time::sleep_until(deadline.into()) => continue,
                // A closed channel cannot happen (the client holds the sender); it would only
                // mean looking again at once.
                _ = windows.changed() => continue,
            };
            let Some(joined) = joined else {
                break;
            };
            let (seq, (delivery, sent)) = joined.map_err(UploadError::Task)?;
            taken.seqs.remove(&seq);
            match self
                .settle(seq, delivery, sent, &mut jobs, &mut report)
                .await?
            {
                Settled::Answered => {
                    last_answer = crate::clock::monotonic_now();
                    answered_any = true;
                }
                Settled::NotAnswered => {}
                Settled::Fatal(error) => {
                    fatal = Some(error);
                    break;
                }
            }
        }
        // Calls still waiting are not sent; calls on their way are let finish and their
        // answers kept (dropped, they would be sent again next time, spending its quota).
        if !tasks.is_empty() {
            self.shared.stopping.send_replace(true);
            let until = crate::clock::monotonic_now() + self.shared.client.timeout() + LATE;
            loop {
                let joined = tokio::select! {
                    joined = tasks.join_next() => joined,
                    () = tokio::time::sleep_until(until.into()) => break,
                };
                let Some(joined) = joined else {
                    break;
                };
                let (seq, (delivery, sent)) = joined.map_err(UploadError::Task)?;
                taken.seqs.remove(&seq);
                match self
                    .settle(seq, delivery, sent, &mut jobs, &mut report)
                    .await?
                {
                    Settled::Answered => answered_any = true,
                    Settled::NotAnswered => {}
                    Settled::Fatal(error) => {
                        fatal.get_or_insert(error);
                    }
                }
            }
            tasks.abort_all();
        }
        drop(taken); // every operation taken and not answered goes back
        if let Some(error) = fatal {
            let (org, rate) = (org, self.settled_rate());
            let queued = self
                .on_outbox(move |outbox| {
                    outbox.flush()?;
                    remember_rate(outbox, rate)?;
                    queued_of(outbox, org)
                })
                .await?;
            // The cause in the message too (the journal's readers show only the message).
            tracing::error!(%error, queued, "delivery stopped: {error}");
            self.stopped_by(&error);
            if let Some(notices) = &self.notices {
                notices.fatal(&error);
            }
            return Err(UploadError::Fatal {
                error: Box::new(error),
                queued,
            });
        }
        let rate = self.settled_rate();
        // A quota spent is kept for the next run and for `status`; forgotten once past.
        let quota = (self.shared.client.service_wait().window())
            .filter(|w| w.reason == crate::api::WaitReason::Quota)
            .map(|w| crate::clock::UtcTime::at(w.until_wall));
        report.undelivered = self
            .on_outbox(move |outbox| {
                outbox.flush_marked()?;
                remember_rate(outbox, rate)?;
                if quota.is_some() || outbox.state().quota_until()?.is_some() {
                    outbox.state().set_quota_until(quota)?;
                }
                queued_of(outbox, org)
            })
            .await?;
        if answered_any {
            *self.lock_stopped() = None;
            if let Some(notices) = &self.notices {
                notices.incident_over();
            }
        }
        Ok(report)
    }

    /// Records what became of one operation: its answer acknowledged (applied or refused),
    /// or the operation given back to the outbox (still failing, not sent, a fatal answer).
    async fn settle(
        &self,
        seq: u64,
        delivery: Delivery,
        sent: outbox::Sent,
        jobs: &mut HashMap<u64, Entry>,
        report: &mut DrainReport,
    ) -> Result<Settled, UploadError> {
        let Some(entry) = jobs.remove(&seq) else {
            return Ok(Settled::NotAnswered);
        };
        match delivery {
            Delivery::Applied { service_id, sold } => {
                let answer = outbox::Answer::Applied { service_id, sold };
                self.acknowledge(seq, answer, sent).await?;
                self.count_applied(&entry);
                Ok(Settled::Answered)
            }
            Delivery::Rejected { status, messages } => {
                tracing::warn!(
                    vin = %entry.vin,
                    op = entry.op.name(),
                    file = %crate::text::Escaped(&entry.file),
                    status,
                    reason = %messages.join(" "),
                    "the service refused the operation"
                );
                let answer = outbox::Answer::Rejected {
                    status,
                    messages: messages.clone(),
                };
                self.acknowledge(seq, answer, sent).await?;
                let stats = &self.shared.stats;
                stats.answered.fetch_add(1, Ordering::Relaxed);
                stats.rejected.fetch_add(1, Ordering::Relaxed);
                stats.count_answer(&entry.op, OpAnswer::Rejected);
                report.rejected.push(RejectedOp {
                    seq,
                    location_id: entry.location_id,
                    vin: entry.vin,
                    op: entry.op.name(),
                    file: entry.file,
                    file_no: entry.file_no,
                    status,
                    messages,
                });
                Ok(Settled::Answered)
            }
            Delivery::Failed(ApiError::Stopped) => {
                self.outbox.give_back(seq); // not sent: delivery stopped
                Ok(Settled::NotAnswered)
            }
            Delivery::Failed(error) => {
                // Said by the pace when every request fails; one operation's retries
                // running out is routine.
                self.outbox.give_back(seq);
                self.shared
                    .stats
                    .count_answer(&entry.op, OpAnswer::Retryable);
                tracing::debug!(vin = %entry.vin, op = entry.op.name(), %error,
                    "still failing after every retry; the operation goes back to the queue");
                Ok(Settled::NotAnswered)
            }
            Delivery::Fatal(error) => {
                self.shared.stats.count_answer(&entry.op, OpAnswer::Fatal);
                // The operation answered with the fatal error goes back too: left marked in
                // flight it would never be sent again until a restart.
                self.outbox.give_back(seq);
                Ok(Settled::Fatal(error))
            }
        }
    }

    /// Outbox and state work (SQLite, fsync) off the async threads: a large plan's commit holds
    /// the state's writer for seconds, and the runtime's threads serve everything else meanwhile
    /// (the watchdog among them).
    async fn on_outbox<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Outbox) -> Result<T, UploadError> + Send + 'static,
    ) -> Result<T, UploadError> {
        let outbox = self.outbox.clone();
        tokio::task::spawn_blocking(move || work(&outbox))
            .await
            .map_err(UploadError::Task)?
    }

    /// Why delivery must stop now, if it must: nothing answered since `last_answer` until
    /// `deadline` (wall clock, whatever the operations are doing), or the service asked to
    /// wait beyond it (waiting that long would only hold the caller; the daemon tries again
    /// when the wait is over, `lotsync sync` exits and says until when).
    fn stop_reason(&self, deadline: Instant, last_answer: Instant) -> Option<String> {
        let now = crate::clock::monotonic_now();
        if let Some(window) = self.shared.client.service_wait().window() {
            if window.until > deadline {
                return Some(crate::api::said(
                    window.reason.header(),
                    window.until_shown(),
                ));
            }
        }
        if now < deadline {
            return None;
        }
        let last_error = self.shared.pace.last_error();
        Some(format!(
            "nothing answered for {} s; last error: {}",
            now.duration_since(last_answer).as_secs(),
            last_error
                .as_deref()
                .unwrap_or("none (requests still waiting for an answer)")
        ))
    }

    /// Takes operations of this organization (others stay for a config that names theirs).
    async fn take(&self, org: u64, max: usize) -> Result<Vec<Job>, UploadError> {
        let outbox = self.outbox.clone();
        // State calls block (and wait while a diff holds the outbox): off the async threads.
        let jobs = tokio::task::spawn_blocking(move || -> Result<Vec<Job>, UploadError> {
            let mut jobs = Vec::new();
            for entry in outbox.take(org, max)? {
                let (mut service_id, mut known_payload) = (None, None);
                if entry.op.payload().is_none() {
                    if let Some((key, record)) = outbox.state().find_vin(org, &entry.vin)? {
                        service_id = record.service_id;
                        if service_id.is_none() {
                            known_payload = outbox.state().payload(&key)?;
                        }
                    }
                }
                jobs.push(Job {
                    entry,
                    service_id,
                    known_payload,
                });
            }
            Ok(jobs)
        })
        .await
        .map_err(UploadError::Task)??;
        Ok(jobs)
    }

    async fn acknowledge(
        &self,
        seq: u64,
        answer: outbox::Answer,
        sent: outbox::Sent,
    ) -> Result<(), UploadError> {
        let outbox = self.outbox.clone();
        tokio::task::spawn_blocking(move || outbox.acknowledge_sent(seq, &answer, sent))
            .await
            .map_err(UploadError::Task)??;
        Ok(())
    }

    fn count_applied(&self, entry: &Entry) {
        use crate::plan::Op;
        let stats = &self.shared.stats;
        stats.answered.fetch_add(1, Ordering::Relaxed);
        stats.count_answer(&entry.op, OpAnswer::Applied);
        let counter = match entry.op {
            Op::Create(_) => &stats.created,
            Op::Update(_) => &stats.updated,
            Op::MarkSold => &stats.sold,
            Op::MarkInStock => &stats.in_stock,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Operations of `org` in the outbox.
fn queued_of(outbox: &Outbox, org: u64) -> Result<usize, UploadError> {
    let mut n = 0;
    for entry in outbox.entries() {
        n += usize::from(entry?.organization_id == org);
    }
    Ok(n)
}

/// The rate delivery settled on, remembered for the next run.
fn remember_rate(outbox: &Outbox, rate: f64) -> Result<(), UploadError> {
    outbox.state().set_upload_rate(rate)?;
    tracing::info!(
        rate = rate::round1(rate),
        "request rate settled (requests/s)"
    );
    Ok(())
}

/// What became of one operation of a drain.
enum Settled {
    /// The service answered it (applied or refused), and the answer is kept.
    Answered,
    /// Back in the outbox: still failing, or not sent.
    NotAnswered,
    /// Back in the outbox, and delivery stops: nothing works until the setup is fixed.
    Fatal(ApiError),
}

/// The operations taken and not yet answered; dropping it gives them back to the outbox.
struct Taken<'a> {
    outbox: &'a Outbox,
    seqs: HashSet<u64>,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        for seq in self.seqs.drain() {
            self.outbox.give_back(seq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Op;

    #[test]
    fn one_operations_retries_wait_a_few_round_trips_not_seconds() {
        // The pace sets the rate of every request, retries included, and owns the long waits:
        // an operation unlucky with random 5xx must not end a run long after the rest. With
        // waits doubling to 1 s, five failures in a row waited 1.55 to 3.1 s.
        use backon::BackoffBuilder;
        for _ in 0..100 {
            let waits: Vec<Duration> = RetryPolicy::default().backoff().build().take(5).collect();
            let total: Duration = waits.iter().sum();
            assert!(total < Duration::from_millis(1700), "{waits:?}");
        }
    }

    #[test]
    fn answers_are_counted_by_kind_and_answer_and_all_are_listed() {
        let stats = UploadStats::default();
        stats.count_answer(&Op::MarkSold, OpAnswer::Rejected);
        stats.count_answer(&Op::MarkSold, OpAnswer::Rejected);
        stats.count_answer(&Op::MarkInStock, OpAnswer::Fatal);
        let answers = stats.answers();
        assert_eq!(
            answers.len(),
            16,
            "every kind with every answer: {answers:?}"
        );
        let count = |kind: &str, answer: OpAnswer| {
            answers
                .iter()
                .find(|a| a.kind == kind && a.answer == answer)
                .map(|a| a.count)
        };
        assert_eq!(count("sold", OpAnswer::Rejected), Some(2));
        assert_eq!(count("in_stock", OpAnswer::Fatal), Some(1));
        assert_eq!(count("sold", OpAnswer::Applied), Some(0));
        assert_eq!(answers.iter().map(|a| a.count).sum::<u64>(), 3);
        // The names are the operations' own.
        let payload = crate::api::VehiclePayload::new(10, "S1", "TESTVIN0000000001");
        assert_eq!(OP_KINDS[0], Op::Create(payload.clone()).name());
        assert_eq!(OP_KINDS[1], Op::Update(payload).name());
        assert_eq!(OP_KINDS[2], Op::MarkSold.name());
        assert_eq!(OP_KINDS[3], Op::MarkInStock.name());
    }
}
