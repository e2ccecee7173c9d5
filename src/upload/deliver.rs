//! One operation's delivery: its calls, each paced and bounded, retried until answered, and
//! their answers checked to be about the vehicle the operation is for.
//!
//! An id is bound to a vehicle only when the service said it of that vehicle: a write's answer
//! carrying the VIN (or stock) sent, or, for an answer that names only an id, the vehicle read
//! back by that id (`GET /v1/inventory/{id}`) with the VIN sent, or else the VIN found in a
//! fresh read of the service's list. An id the state holds for another VIN is never bound (it
//! stops delivery, naming both), and a sale or return answered with another VIN stops
//! delivery too: going on could change the wrong car.

use super::{Lane, Shared, UploadStats};
use crate::api::{Answer, ApiError, Call, ErrorClass, Vehicle, VehiclePayload};
use crate::outbox::Entry;
use crate::plan::Op;
use crate::text::{Chain, Escaped};
use backon::Retryable;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// An operation taken from the outbox, with what the state knows that its calls need.
#[derive(Debug)]
pub(super) struct Job {
    pub entry: Entry,
    /// The service's id of the vehicle (sold and in-stock calls need it).
    pub service_id: Option<u64>,
    /// The payload last acknowledged, to learn a missing id by repeating it (create-or-modify).
    pub known_payload: Option<crate::api::VehiclePayload>,
}

/// How an operation ended.
#[derive(Debug)]
pub(super) enum Delivery {
    Applied {
        service_id: Option<u64>,
        sold: Option<bool>,
    },
    Rejected {
        status: u16,
        messages: Vec<String>,
    },
    /// Still failing after every retry; it goes back to the outbox.
    Failed(ApiError),
    /// Nothing will work until the setup is fixed.
    Fatal(ApiError),
}

tokio::task_local! {
    /// The calls of the operation being delivered ([`deliver_counted`]), for its history.
    static CALLS: std::cell::Cell<crate::outbox::Sent>;
}

/// [`deliver`], with how the operation went out: when its last call was sent, the status of
/// the last answer, and the calls repeated after a passing failure.
pub(super) async fn deliver_counted(shared: &Shared, job: &Job) -> (Delivery, crate::outbox::Sent) {
    let calls = std::cell::Cell::new(crate::outbox::Sent::default());
    CALLS
        .scope(calls, async {
            let delivery = deliver(shared, job).await;
            (delivery, CALLS.with(std::cell::Cell::get))
        })
        .await
}

/// Notes on the operation being delivered, if one is ([`deliver_counted`]).
fn note(change: impl FnOnce(&mut crate::outbox::Sent)) {
    let _ = CALLS.try_with(|calls| {
        let mut sent = calls.get();
        change(&mut sent);
        calls.set(sent);
    });
}

pub(super) async fn deliver(shared: &Shared, job: &Job) -> Delivery {
    match run(shared, job).await {
        Ok(delivery) => delivery,
        Err(e) => match e.class() {
            ErrorClass::Rejected => Delivery::Rejected {
                status: e.status().unwrap_or(0),
                messages: e.messages().to_vec(),
            },
            ErrorClass::Retryable => Delivery::Failed(e),
            ErrorClass::Fatal => Delivery::Fatal(e),
        },
    }
}

async fn run(shared: &Shared, job: &Job) -> Result<Delivery, ApiError> {
    let client = &shared.client;
    let sold = match &job.entry.op {
        Op::Create(payload) | Op::Update(payload) => {
            let vehicle = upsert(shared, job, payload).await?;
            return Ok(Delivery::Applied {
                service_id: Some(vehicle.id),
                sold: vehicle.sold_state(),
            });
        }
        Op::MarkSold => true,
        Op::MarkInStock => false,
    };
    let id = match job.service_id {
        Some(id) => id,
        None => match learn_id(shared, job).await? {
            Some(id) => id,
            None => {
                return Ok(Delivery::Rejected {
                    status: 404,
                    messages: vec![format!(
                    "the service has no vehicle with VIN {}; the nightly reconciliation re-creates it if it is in stock, or forgets it if it was sold",
                    job.entry.vin
                )],
                })
            }
        },
    };
    let answered = if sold {
        call(&shared.lane(), || client.mark_sold(id)).await
    } else {
        call(&shared.lane(), || client.mark_in_stock(id)).await
    };
    let applied = Delivery::Applied {
        service_id: Some(id),
        sold: None,
    };
    match answered {
        Ok(answer) if names_another_vin(&job.entry.vin, &answer.value) => {
            let what = if sold { "sale" } else { "return to stock" };
            let answered_vin = answer.value.vin.as_deref().unwrap_or("");
            Err(answer.about_another(
                format!(
                    "the service answered the {what} of VIN {} (id {id}) with VIN {} (id {}): \
                     another car may have been changed",
                    Escaped(&job.entry.vin),
                    Escaped(answered_vin),
                    answer.value.id
                ),
                format!(
                    "check both cars on the service and what answers in front of it (a proxy \
                     or cache); `{}` learns every id from the service's list; the \
                     {what} of {} stays queued",
                    crate::config::advice(&["reconcile"]),
                    Escaped(&job.entry.vin)
                ),
            ))
        }
        Ok(answer) if answer.value.id == id => Ok(applied),
        Ok(answer) => {
            warn_another(job, &answer.value);
            // The answer says nothing about this vehicle: the vehicle itself says whether
            // the transition happened.
            if confirm_transition(shared, id, sold).await? {
                Ok(applied)
            } else {
                Err(answer.unusable(format!(
                    "the service answered with another vehicle (id {}) and vehicle {id} is not \
                     {} yet; the call is sent again",
                    answer.value.id,
                    if sold { "sold" } else { "in stock" }
                )))
            }
        }
        // A transition repeated after its answer was lost may be refused as redundant by a
        // strict service: what counts is whether the vehicle is where it should be. Any
        // failure to tell leaves the refusal as it is.
        Err(refused @ ApiError::Rejected { .. }) => {
            match confirm_transition(shared, id, sold).await {
                Ok(true) => Ok(applied),
                _ => Err(refused),
            }
        }
        Err(e) => Err(e),
    }
}

/// Whether vehicle `id` is sold (`sold`) or in stock as the service holds it now, read from the
/// vehicle itself: for a transition whose own answer cannot tell. A read answered with another
/// vehicle tells nothing either: not confirmed.
async fn confirm_transition(shared: &Shared, id: u64, sold: bool) -> Result<bool, ApiError> {
    let vehicle = call(&shared.lane(), || shared.client.get_vehicle(id))
        .await?
        .value;
    Ok(vehicle.id == id && vehicle.sold_state() == Some(sold))
}

/// POSTs a payload and returns the vehicle the service holds for it. POST is create-or-modify
/// by VIN, so repeating it after a lost answer is safe. The answer is used when it carries the
/// VIN (or stock) sent. One about another vehicle (see [`answer_about`]) is not used: as after
/// a lost answer, the VIN is looked up in a fresh read of the service's list; when the service
/// does not list it, the write is a passing failure and is sent again. One that names only an
/// id (the spec's answer carries the VIN and stock; a proxy or cache may keep only the id) is
/// checked by reading that id back, one request, and looked up in the list when the vehicle
/// read is not the one sent. The id found must not be another VIN's in the state.
async fn upsert(shared: &Shared, job: &Job, payload: &VehiclePayload) -> Result<Vehicle, ApiError> {
    let client = &shared.client;
    let answer = call(&shared.lane(), || client.upsert_vehicle(payload)).await?;
    let vehicle = match answer_about(payload, &answer.value) {
        About::Sent => answer.value.clone(),
        About::Another => {
            warn_another(job, &answer.value);
            find_listed(shared, payload, &answer).await?
        }
        About::Unsaid => match read_back(shared, payload, answer.value.id).await? {
            Some(vehicle) => vehicle,
            None => {
                tracing::warn!(
                    vin = %Escaped(&job.entry.vin),
                    op = job.entry.op.name(),
                    answered_id = answer.value.id,
                    "the service answered with an id only, and that id is not this vehicle; \
                     its id is looked up in the service's list"
                );
                find_listed(shared, payload, &answer).await?
            }
        },
    };
    check_bound(shared, job, vehicle.id, &answer.call).await?;
    Ok(vehicle)
}

/// The vehicle `payload` is for, found by its VIN in a fresh read of the service's list, after
/// `answer` did not say it. Not the run's list (`listed_ids`), which may have been read before
/// this write: a fresh one, kept as the run's. Read under the run's lock, like the first (see
/// `learn_id`): one read of the whole list at a time, and operations waiting to learn an id use
/// this one.
async fn find_listed(
    shared: &Shared,
    payload: &VehiclePayload,
    answer: &Answer<Vehicle>,
) -> Result<Vehicle, ApiError> {
    let mut ids = shared.listed_ids.lock().await;
    let mut list = read_list(shared).await?;
    let vin = payload.vin.trim();
    let found = list.iter().position(|v| {
        v.vin
            .as_deref()
            .is_some_and(|listed| listed.trim().eq_ignore_ascii_case(vin))
    });
    *ids = Some(index(&list));
    match found {
        Some(at) => Ok(list.swap_remove(at)),
        None => Err(answer.unusable(format!(
            "the service answered with another vehicle (id {}) and lists no vehicle with VIN \
             {}; the write is sent again",
            answer.value.id,
            Escaped(&payload.vin)
        ))),
    }
}

/// Vehicle `id` read back, when it is the vehicle `payload` is for (its id and VIN); None
/// when it is another, says no VIN, or cannot be read (the spec does not promise reading one
/// vehicle: a refusal is no answer). A fatal answer stops as everywhere.
async fn read_back(
    shared: &Shared,
    payload: &VehiclePayload,
    id: u64,
) -> Result<Option<Vehicle>, ApiError> {
    match call(&shared.lane(), || shared.client.get_vehicle(id)).await {
        Ok(read) => {
            let vehicle = read.value;
            let same = vehicle.id == id
                && vehicle
                    .vin
                    .as_deref()
                    .is_some_and(|vin| vin.trim().eq_ignore_ascii_case(payload.vin.trim()));
            Ok(same.then_some(vehicle))
        }
        Err(e) if e.class() == ErrorClass::Fatal => Err(e),
        Err(_) => Ok(None),
    }
}

/// Refuses to bind `id` to the job's vehicle when the state holds it for another VIN: the
/// state or the service is wrong about one of the two cars, and a sale of either could reach
/// the other. Delivery stops, naming both, until `lotsync reconcile` learns the ids from the
/// service's list. Without a state to look in (tests of one call), nothing is checked.
async fn check_bound(shared: &Shared, job: &Job, id: u64, call: &Call) -> Result<(), ApiError> {
    let Some(outbox) = &shared.state_ids else {
        return Ok(());
    };
    let vin = key(&job.entry.vin);
    // Ids this drain bound are not all committed yet: they are looked at first.
    let mut bound = shared.bound_ids.lock().await;
    let holder = match bound.get(&id) {
        Some(other) => Some(other.clone()),
        None => {
            let (outbox, org) = (outbox.clone(), job.entry.organization_id);
            let read =
                tokio::task::spawn_blocking(move || outbox.state().vin_of_service_id(org, id))
                    .await
                    .map_err(|e| Chain(&e).to_string())
                    .and_then(|read| read.map_err(|e| Chain(&e).to_string()));
            match read {
                Ok(holder) => holder,
                // Passing, as far as can be told: the operation is sent again later.
                Err(e) => {
                    return Err(ApiError::Retryable {
                        call: call.clone(),
                        status: None,
                        messages: vec![],
                        retry_after: None,
                        rate_limit: None,
                        reason: format!(
                            "the state's vehicle ids cannot be read to check id {id}: {e}"
                        ),
                    })
                }
            }
        }
    };
    match holder {
        Some(other) if key(&other) != vin => Err(ApiError::Fatal {
            call: call.clone(),
            status: None,
            messages: vec![],
            reason: format!(
                "the service gives id {id} for VIN {}, but the state holds id {id} for VIN {}",
                Escaped(&job.entry.vin),
                Escaped(&other)
            ),
            fix: format!(
                "run `{}`, which learns every vehicle's id from the service's \
                 list, and check both cars on the service; the {} of {} stays queued",
                crate::config::advice(&["reconcile"]),
                job.entry.op.name(),
                Escaped(&job.entry.vin)
            ),
        }),
        _ => {
            bound.insert(id, vin);
            Ok(())
        }
    }
}

/// What a write's answer says about the vehicle sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum About {
    /// Its VIN (or, without one, its stock) is the one sent.
    Sent,
    /// Its VIN or its stock differ from those sent (blanks around and case ignored).
    Another,
    /// Neither VIN nor stock: only an id, which says nothing of whose it is.
    Unsaid,
}

fn answer_about(payload: &VehiclePayload, answer: &Vehicle) -> About {
    let same = |sent: &str, answered: Option<&String>| {
        said(answered).map(|answered| answered.eq_ignore_ascii_case(sent.trim()))
    };
    match (
        same(&payload.vin, answer.vin.as_ref()),
        same(&payload.stock, answer.stock.as_ref()),
    ) {
        (Some(false), _) | (_, Some(false)) => About::Another,
        (None, None) => About::Unsaid,
        _ => About::Sent,
    }
}

/// Whether a sale's or return's answer names a VIN other than `vin` (blanks around and case
/// ignored); an answer without a VIN (or a blank one) names none.
fn names_another_vin(vin: &str, answer: &Vehicle) -> bool {
    said(answer.vin.as_ref()).is_some_and(|answered| !answered.eq_ignore_ascii_case(vin.trim()))
}

/// A VIN or stock an answer says, without the blanks around; None when it says none (missing
/// or blank).
fn said(value: Option<&String>) -> Option<&str> {
    value.map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// One warning per answer about another vehicle (a confused proxy or cache, most likely).
fn warn_another(job: &Job, answer: &Vehicle) {
    tracing::warn!(
        vin = %Escaped(&job.entry.vin),
        op = job.entry.op.name(),
        answered_id = answer.id,
        answered_vin = %Escaped(answer.vin.as_deref().unwrap_or("")),
        answered_stock = %Escaped(answer.stock.as_deref().unwrap_or("")),
        "the service answered with another vehicle; the answer is not used"
    );
}

/// The id of a vehicle the state has none for: repeat its last payload (create-or-modify
/// answers with the id) or, with no payload either, find its VIN in the run's copy of the
/// service's list: read by the first operation that needs it, and replaced by a fresh read
/// whenever a write is answered with another vehicle (see [`upsert`]).
async fn learn_id(shared: &Shared, job: &Job) -> Result<Option<u64>, ApiError> {
    let vin = job.entry.vin.as_str();
    if let Some(payload) = &job.known_payload {
        let vehicle = upsert(shared, job, payload).await?;
        tracing::info!(vin = %Escaped(vin), id = vehicle.id, "learned the vehicle's id");
        return Ok(Some(vehicle.id));
    }
    // Held while the list is read: the operations waiting for it read it once between them.
    let mut ids = shared.listed_ids.lock().await;
    if ids.is_none() {
        *ids = Some(index(&read_list(shared).await?));
    }
    let listed = ids.as_ref().and_then(|m| m.get(&key(vin)).copied());
    drop(ids);
    if let Some(id) = listed {
        let list = Call {
            method: "GET",
            path: "/v1/inventory".into(),
        };
        check_bound(shared, job, id, &list).await?;
    }
    Ok(listed)
}

/// The service's whole list, read now.
async fn read_list(shared: &Shared) -> Result<Vec<Vehicle>, ApiError> {
    let client = &shared.client;
    let list = call(&shared.lane(), || client.list_vehicles()).await?.value;
    tracing::info!(
        vehicles = list.len(),
        "read the service's list to find vehicle ids"
    );
    Ok(list)
}

/// VIN (as [`key`]) → id of the vehicles of a list.
fn index(list: &[Vehicle]) -> HashMap<String, u64> {
    list.iter()
        .filter_map(|v| Some((key(v.vin.as_deref()?), v.id)))
        .collect()
}

/// Returns once delivery stops.
async fn stopped(mut stopping: tokio::sync::watch::Receiver<bool>) {
    // An error: the uploader is gone, and its calls with it.
    let _ = stopping.wait_for(|stop| *stop).await;
}

/// A VIN as the service matches it: blanks around and case ignored.
fn key(vin: &str) -> String {
    vin.trim().to_ascii_uppercase()
}

/// One call, retried while the failure is passing: each attempt waits for a free slot (the
/// bound on requests in flight) and for its turn under the rate limit; the waits between
/// attempts hold neither. The rate hears of every answer. Once delivery stops, a call still
/// waiting (for its turn, or between attempts) is not sent ([`ApiError::Stopped`]); one on its
/// way is let finish, so that its answer is kept.
pub(super) async fn call<T, F, Fut>(lane: &Lane<'_>, make: F) -> Result<Answer<T>, ApiError>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Answer<T>, ApiError>>,
{
    let stats: &UploadStats = lane.stats;
    let attempt = || async {
        let waited = async {
            // The semaphore is never closed, so acquiring only waits.
            let slot = lane.slots.acquire().await.ok();
            (slot, lane.pace.ready().await)
        };
        let (_slot, turn) = tokio::select! {
            biased;
            () = stopped(lane.stopping.subscribe()) => return Err(ApiError::Stopped),
            waited = waited => waited,
        };
        if *lane.stopping.borrow() {
            return Err(ApiError::Stopped);
        }
        note(|sent| sent.at = Some(crate::state::now()));
        let result = make().await;
        let status = match &result {
            Ok(answer) => Some(answer.status),
            Err(e) => e.status(),
        };
        note(|sent| sent.status = status.or(sent.status));
        match &result {
            Ok(answer) => lane.pace.answered(turn, true, answer.rate_limit),
            // Not sent: the service's window opened after the turn was given.
            Err(ApiError::Waiting { .. }) => drop(turn),
            Err(e) if e.status() == Some(429) => {
                stats.throttled.fetch_add(1, Ordering::Relaxed);
                lane.pace.throttled(turn, e.rate_limit(), e.retry_after());
            }
            Err(e) if e.class() == ErrorClass::Retryable => lane.pace.failed(turn, e),
            Err(e) => lane.pace.answered(turn, false, e.rate_limit()),
        }
        if !matches!(result, Err(ApiError::Waiting { .. })) {
            stats.requests.fetch_add(1, Ordering::Relaxed);
        }
        result
    };
    let stopping = lane.stopping.subscribe();
    attempt
        .retry(lane.retry.backoff())
        // The wait between attempts ends early when delivery stops (the attempt then is not
        // sent).
        .sleep(move |wait: Duration| {
            let stopping = stopping.clone();
            async move {
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = stopped(stopping) => {}
                }
            }
        })
        .when(|e: &ApiError| e.class() == ErrorClass::Retryable && !*lane.stopping.borrow())
        // Retry-After is the service's own wait: never retry sooner.
        .adjust(|e: &ApiError, wait| wait.map(|w| e.retry_after().map_or(w, |r| r.max(w))))
        .notify(|e: &ApiError, wait| {
            stats.retries.fetch_add(1, Ordering::Relaxed);
            note(|sent| sent.retries += 1);
            tracing::debug!(error = %Chain(e), wait_ms = wait.as_millis() as u64, "retrying");
        })
        .await
}

// Against the sandbox, so with its feature (on by default).
#[cfg(all(test, feature = "sandbox"))]
mod tests {
    use super::*;
    use crate::api::{ApiToken, ClientSettings, VehiclePayload};
    use crate::sandbox::{Behaviour, RunningSandbox};
    use crate::upload::pace::Pace;
    use crate::upload::{RetryPolicy, UploadStats};

    async fn sandbox(behaviour: Behaviour) -> RunningSandbox {
        RunningSandbox::on_loopback(behaviour)
            .await
            .expect("sandbox starts")
    }

    fn shared(sb: &RunningSandbox) -> Shared {
        let settings = ClientSettings::new(sb.base_url(), 100, ApiToken::new("sandbox-token"));
        let client = crate::api::ApiClient::new(settings).expect("client");
        Shared {
            pace: Pace::new(1000.0, None, 1, client.service_wait().clone()),
            client,
            slots: tokio::sync::Semaphore::new(4),
            stats: UploadStats::default(),
            retry: RetryPolicy::default(),
            stopping: tokio::sync::watch::Sender::new(false),
            listed_ids: tokio::sync::Mutex::new(None),
            state_ids: None,
            bound_ids: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    fn job(op: Op, vin: &str, service_id: Option<u64>) -> Job {
        Job {
            entry: Entry {
                seq: 1,
                organization_id: 100,
                location_id: 10,
                vin: vin.into(),
                op,
                file: "f.csv".into(),
                file_no: None,
                queued_at: 0,
                queuing: Default::default(),
            },
            service_id,
            known_payload: None,
        }
    }

    /// With neither id nor payload (a state rebuilt from elsewhere), the VIN is found in the
    /// service's list, read once for the run.
    #[tokio::test]
    async fn an_unknown_id_is_found_by_vin_in_the_list() {
        let sb = sandbox(Behaviour::default()).await;
        let s = shared(&sb);
        for n in 0..30 {
            let p = VehiclePayload::new(10, format!("S{n}"), format!("TESTVIN{n:010}"));
            s.client.upsert_vehicle(&p).await.expect("created");
        }
        let wanted = s
            .client
            .list_vehicles()
            .await
            .expect("list")
            .value
            .into_iter()
            .find(|v| v.vin.as_deref() == Some("TESTVIN0000000017"))
            .expect("listed")
            .id;
        let sold = deliver(&s, &job(Op::MarkSold, "testvin0000000017", None)).await;
        assert!(
            matches!(sold, Delivery::Applied { service_id: Some(id), .. } if id == wanted),
            "{sold:?}"
        );
        let back = deliver(&s, &job(Op::MarkInStock, "TESTVIN0000000017", None)).await;
        assert!(matches!(back, Delivery::Applied { .. }), "{back:?}");
        // The list (one call; the client follows its pages) was read once, then one call per
        // transition.
        assert_eq!(s.stats.requests.load(Ordering::Relaxed), 1 + 2);
        let gone = deliver(&s, &job(Op::MarkSold, "NOSUCHVIN00000000", None)).await;
        assert!(
            matches!(&gone, Delivery::Rejected { status: 404, messages } if messages[0].contains("no vehicle with VIN")),
            "{gone:?}"
        );
    }

    fn wrong_vehicle(wrong_vehicle: f64, latency_ms: u64) -> Behaviour {
        Behaviour {
            faults: crate::sandbox::Faults {
                wrong_vehicle,
                latency_ms,
                ..Default::default()
            },
            ..Behaviour::default()
        }
    }

    async fn sandbox_json(sb: &RunningSandbox, what: &str) -> serde_json::Value {
        reqwest::Client::new()
            .get(format!("{}/__sandbox/{what}", sb.base_url()))
            .send()
            .await
            .expect("the sandbox answers")
            .json()
            .await
            .expect("JSON")
    }

    /// The service's id for a VIN, and whether it is sold, as the sandbox holds them.
    async fn held(sb: &RunningSandbox, vin: &str) -> Option<(u64, bool)> {
        let state = sandbox_json(sb, "state").await;
        state["vehicles"].as_array()?.iter().find_map(|v| {
            (v["vehicle"]["vin"] == vin)
                .then(|| {
                    (
                        v["vehicle"]["id"].as_u64(),
                        v["vehicle"]["status"] == "sold",
                    )
                })
                .and_then(|(id, sold)| Some((id?, sold)))
        })
    }

    fn car(n: u32) -> VehiclePayload {
        VehiclePayload::new(10, format!("S{n}"), format!("TESTVIN{n:010}"))
    }

    /// A create answered with another vehicle (another VIN): that answer's id is not the
    /// vehicle's; the VIN is found in a fresh read of the list, and its id is the one applied.
    #[tokio::test]
    async fn a_write_answered_with_another_vehicle_finds_its_own_by_vin() {
        let sb = sandbox(wrong_vehicle(1.0, 0)).await;
        let s = shared(&sb);
        let first = s
            .client
            .upsert_vehicle(&car(1))
            .await
            .expect("created")
            .value;
        // The run's list, read before the second vehicle existed, must not be trusted.
        *s.listed_ids.lock().await = Some(HashMap::new());
        let p = car(2);
        let done = deliver(&s, &job(Op::Create(p.clone()), &p.vin, None)).await;
        let (id, _) = held(&sb, &p.vin).await.expect("created on the service");
        assert_ne!(id, first.id);
        assert!(
            matches!(done, Delivery::Applied { service_id: Some(applied), .. } if applied == id),
            "{done:?}"
        );
        assert_eq!(
            s.stats.requests.load(Ordering::Relaxed),
            2,
            "the write, then the list"
        );
    }

    #[test]
    fn another_vehicle_is_told_by_its_vin_or_stock() {
        let p = car(2);
        let first: Vehicle =
            serde_json::from_value(serde_json::json!({"id": 1, "vin": car(1).vin, "stock": "S1"}))
                .expect("a vehicle");
        assert_eq!(answer_about(&p, &first), About::Another);
        // An answer with neither VIN nor stock says nothing of whose id it is.
        let bare = crate::api::Vehicle {
            vin: None,
            stock: None,
            ..first.clone()
        };
        assert_eq!(answer_about(&p, &bare), About::Unsaid);
        let blank = crate::api::Vehicle {
            vin: Some(" ".into()),
            stock: Some(String::new()),
            ..first.clone()
        };
        assert_eq!(answer_about(&p, &blank), About::Unsaid);
        assert!(!names_another_vin(&p.vin, &blank));
        let same = crate::api::Vehicle {
            vin: Some(format!(" {} ", p.vin.to_lowercase())),
            stock: Some(p.stock.clone()),
            ..first.clone()
        };
        assert_eq!(answer_about(&p, &same), About::Sent);
        let stock_only = crate::api::Vehicle {
            vin: None,
            ..same.clone()
        };
        assert_eq!(answer_about(&p, &stock_only), About::Sent);
        let other_stock = crate::api::Vehicle {
            stock: Some("S999".into()),
            ..same
        };
        assert_eq!(answer_about(&p, &other_stock), About::Another);
        assert!(names_another_vin(&p.vin, &first));
        assert!(!names_another_vin(&p.vin, &bare));
        assert!(!names_another_vin(&p.vin.to_lowercase(), &other_stock));
    }

    fn id_only(id_only: f64) -> Behaviour {
        Behaviour {
            faults: crate::sandbox::Faults {
                id_only,
                ..Default::default()
            },
            ..Behaviour::default()
        }
    }

    /// A create answered with only another vehicle's id (a proxy keeping only the id): that id
    /// is read back (one GET), found to be another VIN's, and the vehicle's own id is found
    /// in the service's list.
    #[tokio::test]
    async fn a_create_answered_with_only_another_id_is_not_that_id() {
        let sb = sandbox(id_only(1.0)).await;
        let s = shared(&sb);
        let first = s
            .client
            .upsert_vehicle(&car(1))
            .await
            .expect("created")
            .value;
        let p = car(2);
        let done = deliver(&s, &job(Op::Create(p.clone()), &p.vin, None)).await;
        let (id, _) = held(&sb, &p.vin).await.expect("created on the service");
        assert_ne!(id, first.id);
        assert!(
            matches!(done, Delivery::Applied { service_id: Some(applied), .. } if applied == id),
            "{done:?}"
        );
        let state = sandbox_json(&sb, "state").await;
        assert_eq!(state["faults"]["id_only"], 1, "{}", state["faults"]);
        assert_eq!(
            s.stats.requests.load(Ordering::Relaxed),
            3,
            "the write, the GET of the id answered, then the list"
        );
    }

    /// A write answered with another vehicle whose own VIN the service then does not list
    /// (deleted meanwhile, here): nothing is applied, the operation fails as a passing failure
    /// and is sent again.
    #[tokio::test]
    async fn a_write_answered_with_another_vehicle_and_not_listed_is_retried() {
        // Each service request waits 400 ms before it is handled: the vehicle is deleted
        // while the list request waits.
        let sb = sandbox(wrong_vehicle(1.0, 400)).await;
        let s = shared(&sb);
        s.client.upsert_vehicle(&car(1)).await.expect("created");
        let p = car(2);
        let create = job(Op::Create(p.clone()), &p.vin, None);
        let delivering = deliver(&s, &create);
        let deleting = async {
            loop {
                if let Some((id, _)) = held(&sb, &p.vin).await {
                    let deleted = reqwest::Client::new()
                        .delete(format!("{}/__sandbox/vehicles/{id}", sb.base_url()))
                        .send()
                        .await
                        .expect("deleted");
                    assert!(deleted.status().is_success());
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        };
        let (done, ()) = tokio::join!(delivering, deleting);
        match &done {
            Delivery::Failed(e) => {
                assert_eq!(e.class(), ErrorClass::Retryable);
                let line = e.to_string();
                assert!(line.contains("another vehicle"), "{line}");
                assert!(line.contains(&p.vin), "{line}");
            }
            other => panic!("{other:?}"),
        }
        set_behaviour_default(&sb).await;
        let again = deliver(&s, &job(Op::Create(p.clone()), &p.vin, None)).await;
        let (id, _) = held(&sb, &p.vin).await.expect("created again");
        assert!(
            matches!(again, Delivery::Applied { service_id: Some(applied), .. } if applied == id),
            "{again:?}"
        );
    }

    async fn set_behaviour_default(sb: &RunningSandbox) {
        let response = reqwest::Client::new()
            .put(format!("{}/__sandbox/behaviour", sb.base_url()))
            .json(&Behaviour::default())
            .send()
            .await
            .expect("behaviour answers");
        assert!(response.status().is_success());
    }

    /// A sale answered with only another vehicle's id is checked on the vehicle itself (GET of
    /// its id).
    #[tokio::test]
    async fn a_transition_answered_with_another_id_only_is_checked_on_its_own() {
        let sb = sandbox(id_only(1.0)).await;
        let s = shared(&sb);
        s.client.upsert_vehicle(&car(1)).await.expect("created");
        s.client.upsert_vehicle(&car(2)).await.expect("created");
        let (id, _) = held(&sb, &car(2).vin).await.expect("held");
        let sold = deliver(&s, &job(Op::MarkSold, &car(2).vin, Some(id))).await;
        assert!(
            matches!(sold, Delivery::Applied { service_id: Some(applied), .. } if applied == id),
            "{sold:?}"
        );
        assert_eq!(held(&sb, &car(2).vin).await, Some((id, true)));
        let state = sandbox_json(&sb, "state").await;
        assert_eq!(
            state["requests"]["GET /v1/inventory/{id}"]["200"], 1,
            "checked with one GET: {}",
            state["requests"]
        );
    }

    /// A sale answered with another VIN stops delivery (fatal), naming both VINs: the state's
    /// id or what answers in front of the service is wrong, and more sales could reach the
    /// wrong cars.
    #[tokio::test]
    async fn a_transition_answered_with_another_vin_stops_delivery() {
        let sb = sandbox(wrong_vehicle(1.0, 0)).await;
        let s = shared(&sb);
        s.client.upsert_vehicle(&car(1)).await.expect("created");
        s.client.upsert_vehicle(&car(2)).await.expect("created");
        let (id, _) = held(&sb, &car(2).vin).await.expect("held");
        let sold = deliver(&s, &job(Op::MarkSold, &car(2).vin, Some(id))).await;
        match &sold {
            Delivery::Fatal(e) => {
                let line = e.to_string();
                assert!(line.contains(&car(2).vin), "{line}");
                assert!(line.contains(&car(1).vin), "{line}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// A sale whose id is learned by repeating the payload: an answer about another vehicle
    /// must not be the id marked sold (the sale reaches the vehicle's own id; its answer,
    /// about another VIN again, stops delivery).
    #[tokio::test]
    async fn an_id_learned_from_an_answer_about_another_vehicle_is_not_used() {
        let sb = sandbox(wrong_vehicle(1.0, 0)).await;
        let s = shared(&sb);
        s.client.upsert_vehicle(&car(1)).await.expect("created");
        s.client.upsert_vehicle(&car(2)).await.expect("created");
        let (id, _) = held(&sb, &car(2).vin).await.expect("held");
        let mut sale = job(Op::MarkSold, &car(2).vin, None);
        sale.known_payload = Some(car(2));
        let sold = deliver(&s, &sale).await;
        assert!(matches!(sold, Delivery::Fatal(_)), "{sold:?}");
        assert_eq!(held(&sb, &car(2).vin).await, Some((id, true)));
        assert_eq!(
            held(&sb, &car(1).vin).await.map(|(_, sold)| sold),
            Some(false)
        );
    }

    /// A strict service refuses a repeated transition (its first answer was lost): the vehicle
    /// is already where it should be, so the operation counts as applied.
    #[tokio::test]
    async fn a_refused_repeat_of_a_transition_that_happened_is_applied() {
        let sb = sandbox(Behaviour {
            strict_transitions: true,
            ..Behaviour::default()
        })
        .await;
        let s = shared(&sb);
        let p = VehiclePayload::new(10, "S1", "TESTVIN0000000001");
        let id = s.client.upsert_vehicle(&p).await.expect("created").value.id;
        s.client.mark_sold(id).await.expect("sold once");
        let again = deliver(&s, &job(Op::MarkSold, &p.vin, Some(id))).await;
        assert!(matches!(again, Delivery::Applied { .. }), "{again:?}");
        // A refusal that is not about a repeat stays a refusal.
        let missing = deliver(&s, &job(Op::MarkSold, &p.vin, Some(id + 1000))).await;
        assert!(
            matches!(missing, Delivery::Rejected { status: 404, .. }),
            "{missing:?}"
        );
    }
}
