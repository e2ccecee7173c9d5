//! One operation's delivery: its calls, each paced and bounded, retried until answered.

use super::{Shared, UploadStats};
use crate::api::{Answer, ApiError, ErrorClass};
use crate::diff::Op;
use crate::outbox::Entry;
use backon::Retryable;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::Ordering;

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
            // POST is create-or-modify by VIN: repeating it after a lost answer is safe.
            let answer = call(shared, || client.upsert_vehicle(payload)).await?;
            return Ok(Delivery::Applied {
                service_id: Some(answer.value.id),
                sold: answer.value.sold_state(),
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
                    "the service has no vehicle with VIN {}; the nightly `lotsync reconcile` re-creates it if it is in stock, or forgets it if it was sold",
                    job.entry.vin
                )],
                })
            }
        },
    };
    let answered = if sold {
        call(shared, || client.mark_sold(id)).await
    } else {
        call(shared, || client.mark_in_stock(id)).await
    };
    match answered {
        Ok(_) => Ok(Delivery::Applied {
            service_id: Some(id),
            sold: None,
        }),
        Err(refused @ ApiError::Rejected { .. }) => {
            // A transition repeated after its answer was lost may be refused as redundant by a
            // strict service: what counts is whether the vehicle is where it should be.
            match call(shared, || client.get_vehicle(id)).await {
                Ok(v) if v.value.sold_state() == Some(sold) => Ok(Delivery::Applied {
                    service_id: Some(id),
                    sold: None,
                }),
                _ => Err(refused),
            }
        }
        Err(e) => Err(e),
    }
}

/// The id of a vehicle the state has none for: repeat its last payload (create-or-modify
/// answers with the id) or, with no payload either, find its VIN in the service's list (read
/// once per run).
async fn learn_id(shared: &Shared, job: &Job) -> Result<Option<u64>, ApiError> {
    let client = &shared.client;
    let vin = job.entry.vin.as_str();
    if let Some(payload) = &job.known_payload {
        let answer = call(shared, || client.upsert_vehicle(payload)).await?;
        tracing::info!(vin, id = answer.value.id, "learned the vehicle's id");
        return Ok(Some(answer.value.id));
    }
    let mut ids = shared.listed_ids.lock().await;
    if ids.is_none() {
        let list = call(shared, || client.list_vehicles()).await?;
        let map: HashMap<String, u64> = list
            .value
            .iter()
            .filter_map(|v| Some((v.vin.as_deref()?.trim().to_ascii_uppercase(), v.id)))
            .collect();
        tracing::info!(
            vehicles = map.len(),
            "read the service's list to find vehicle ids"
        );
        *ids = Some(map);
    }
    Ok(ids
        .as_ref()
        .and_then(|m| m.get(&vin.to_ascii_uppercase()).copied()))
}

/// One call, retried while the failure is passing: each attempt waits for a free slot (the
/// bound on requests in flight) and for its turn under the rate limit; the waits between
/// attempts hold neither. The rate hears of every answer.
async fn call<T, F, Fut>(shared: &Shared, make: F) -> Result<Answer<T>, ApiError>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Answer<T>, ApiError>>,
{
    let stats: &UploadStats = &shared.stats;
    let attempt = || async {
        // The semaphore is never closed, so acquiring only waits.
        let _slot = shared.slots.acquire().await.ok();
        let sent_at = shared.pace.ready().await;
        stats.requests.fetch_add(1, Ordering::Relaxed);
        let result = make().await;
        match &result {
            Ok(answer) => shared.pace.answered(sent_at, true, answer.rate_limit),
            Err(e) if e.status() == Some(429) => {
                stats.throttled.fetch_add(1, Ordering::Relaxed);
                shared.pace.throttled(sent_at, e.rate_limit());
            }
            Err(e) => shared.pace.answered(sent_at, false, e.rate_limit()),
        }
        result
    };
    attempt
        .retry(shared.retry.backoff())
        .when(|e: &ApiError| e.class() == ErrorClass::Retryable)
        // Retry-After is the service's own wait: never retry sooner.
        .adjust(|e: &ApiError, wait| wait.map(|w| e.retry_after().map_or(w, |r| r.max(w))))
        .notify(|e: &ApiError, wait| {
            stats.retries.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(error = %e, wait_ms = wait.as_millis() as u64, "retrying");
        })
        .await
}

#[cfg(test)]
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
        Shared {
            client: crate::api::ApiClient::new(settings).expect("client"),
            pace: Pace::new(1000.0, None, 1),
            slots: tokio::sync::Semaphore::new(4),
            stats: UploadStats::default(),
            retry: RetryPolicy::default(),
            listed_ids: tokio::sync::Mutex::new(None),
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
                queued_at: 0,
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
