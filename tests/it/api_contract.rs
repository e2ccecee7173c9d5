//! Contract tests: the real client against the real sandbox over loopback HTTP.

use crate::common;

use common::{
    client, client_for, count, payload, sandbox, sandbox_with, set_behaviour, set_faults, state,
    vehicles,
};
use lotsync::api::{
    Amount, ApiToken, Color, DriveType, ErrorClass, Fuel, NewNotification, NotificationLevel,
    Price, PriceSet, TransmissionSpeed, TransmissionType, VehicleType,
};
use lotsync::sandbox::{Behaviour, Faults, ListShape, RateLimitConfig, SandboxConfig, TokenEntry};
use std::time::Duration;

#[tokio::test]
async fn create_then_modify_answers_201_then_200_with_the_same_id() {
    let sb = sandbox(SandboxConfig::default()).await;
    let api = client(&sb);

    let mut p = payload(1);
    p.year = Some(2021);
    p.make = Some("Ford".into());
    p.model = Some("F-150".into());
    p.trim = Some("XLT".into());
    p.vehicle_type = Some(VehicleType::Used);
    p.miles = Some(45_123);
    p.price = Some(Price::Detailed(PriceSet {
        selling: Some(Amount(38_995.0)),
        internet: Some(Amount(37_995.0)),
        msrp: None,
    }));
    p.exterior_color = Some(Color::White);
    p.drive_type = Some(DriveType::FourByFour);
    p.transmission_type = Some(TransmissionType::Automatic);
    p.transmission_speed = Some(TransmissionSpeed::Six);
    p.fuel = Some(Fuel::Gas);
    p.options = vec!["Tow Package".into(), "Sunroof".into()];
    p.images = vec!["https://img.example/1.jpg".into()];

    let created = api.upsert_vehicle(&p).await.unwrap();
    assert!(created.created(), "first POST creates (201)");
    let v = &created.value;
    assert_eq!(v.vin.as_deref(), Some(p.vin.as_str()));
    assert_eq!(v.name.as_deref(), Some("2021 Ford F-150 XLT"));
    assert_eq!(v.slug.as_deref(), Some("2021-ford-f-150-xlt"));
    assert_eq!(v.year.as_deref(), Some("2021"));
    assert_eq!(v.odometer.as_ref().unwrap().value, Some(45_123.0));
    assert_eq!(v.odometer.as_ref().unwrap().unit.as_deref(), Some("mi"));
    assert_eq!(v.price.as_ref().unwrap().internet, Some(37_995.0));
    assert_eq!(v.exterior.as_ref().unwrap().color.as_deref(), Some("White"));
    assert_eq!(v.drivetrain.as_deref(), Some("4x4"));
    assert_eq!(v.transmission.as_ref().unwrap().speed, Some(6.0));
    assert_eq!(v.options, vec!["Tow Package", "Sunroof"]);
    assert_eq!(v.status.as_deref(), Some("in-stock"));
    assert_eq!(v.active, Some(true));
    assert_eq!(v.image, None, "images are processed after the 201");
    assert_eq!(v.organization.as_ref().unwrap().id, Some(100.0));

    // The same VIN in another case is the same vehicle: modified, same id.
    let mut changed = p.clone();
    changed.vin = p.vin.to_lowercase();
    changed.price = Some(Price::Selling(Amount(35_000.0)));
    let modified = api.upsert_vehicle(&changed).await.unwrap();
    assert!(!modified.created(), "second POST modifies (200)");
    assert_eq!(modified.value.id, created.value.id);
    assert_eq!(
        modified.value.price.as_ref().unwrap().selling,
        Some(35_000.0)
    );

    let fetched = api.get_vehicle(created.value.id).await.unwrap().value;
    assert_eq!(fetched.price.as_ref().unwrap().selling, Some(35_000.0));

    let st = state(&sb).await;
    assert_eq!(vehicles(&st), 1);
    assert_eq!(st["vehicles"][0]["writes"], 2);
    assert_eq!(st["vehicles"][0]["location_id"], 10);
    assert_eq!(st["vehicles"][0]["payload"]["fuel"], "Gas");
    assert_eq!(count(&st, "POST /v1/inventory", "201"), 1);
    assert_eq!(count(&st, "POST /v1/inventory", "200"), 1);
}

#[tokio::test]
async fn images_appear_after_processing() {
    let sb = sandbox_with(Behaviour {
        image_delay_ms: 50,
        ..Behaviour::default()
    })
    .await;
    let api = client(&sb);
    let mut p = payload(2);
    p.images = vec![
        "https://img.example/a.jpg".into(),
        "https://img.example/b.jpg".into(),
    ];
    let id = api.upsert_vehicle(&p).await.unwrap().value.id;
    tokio::time::sleep(Duration::from_millis(120)).await;
    let v = api.get_vehicle(id).await.unwrap().value;
    assert_eq!(v.image.as_deref(), Some("https://img.example/a.jpg"));
}

#[tokio::test]
async fn sold_and_back_in_stock() {
    let sb = sandbox(SandboxConfig::default()).await;
    let api = client(&sb);
    let id = api.upsert_vehicle(&payload(3)).await.unwrap().value.id;

    let sold = api.mark_sold(id).await.unwrap().value;
    assert!(sold.is_sold());
    assert_eq!(sold.status.as_deref(), Some("sold"));
    let sold_at = sold.sold_at.clone().expect("sold_at is set");
    assert_eq!(sold_at.len(), "YYYY-MM-DD HH:MM:SS".len(), "{sold_at}");

    // Lenient by default: a repeated transition is 200 and keeps sold_at.
    let again = api.mark_sold(id).await.unwrap().value;
    assert_eq!(again.sold_at, Some(sold_at));

    // A modify does not change the sold state.
    let modified = api.upsert_vehicle(&payload(3)).await.unwrap().value;
    assert!(modified.is_sold());

    let back = api.mark_in_stock(id).await.unwrap().value;
    assert!(!back.is_sold());
    assert_eq!(back.status.as_deref(), Some("in-stock"));
    assert_eq!(back.sold_at, None);

    let listed = api.list_vehicles().await.unwrap().value;
    assert_eq!(listed.len(), 1);
    assert!(!listed[0].is_sold());
    // create, sold, sold again, modify, in-stock
    assert_eq!(state(&sb).await["vehicles"][0]["writes"], 5);
}

#[tokio::test]
async fn strict_transitions_reject_a_repeat() {
    let sb = sandbox_with(Behaviour {
        strict_transitions: true,
        ..Behaviour::default()
    })
    .await;
    let api = client(&sb);
    let id = api.upsert_vehicle(&payload(4)).await.unwrap().value.id;
    let err = api.mark_in_stock(id).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Rejected);
    assert_eq!(err.status(), Some(422));
    assert_eq!(err.messages(), ["The vehicle is already in stock."]);
    api.mark_sold(id).await.unwrap();
    let err = api.mark_sold(id).await.unwrap_err();
    assert_eq!(err.messages(), ["The vehicle is already sold."]);
}

#[tokio::test]
async fn unknown_or_foreign_vehicle_is_rejected_404() {
    let config = SandboxConfig {
        tokens: vec![
            TokenEntry {
                token: "sandbox-token".into(),
                user: 1,
            },
            TokenEntry {
                token: "other-token".into(),
                user: 2,
            },
        ],
        organizations: vec![
            lotsync::sandbox::OrganizationEntry {
                id: 100,
                name: "Demo Motors".into(),
                users: vec![1],
            },
            lotsync::sandbox::OrganizationEntry {
                id: 200,
                name: "Other Dealer".into(),
                users: vec![2],
            },
        ],
        ..SandboxConfig::default()
    };
    let sb = sandbox(config).await;
    let ours = client(&sb);
    let theirs = client_for(&sb, "other-token", 200);
    let mut p = payload(5);
    p.location_id = 20;
    let their_id = theirs.upsert_vehicle(&p).await.unwrap().value.id;

    for err in [
        ours.get_vehicle(their_id).await.unwrap_err(),
        ours.mark_sold(their_id).await.unwrap_err(),
        ours.mark_in_stock(9_999).await.unwrap_err(),
    ] {
        assert_eq!(err.class(), ErrorClass::Rejected, "{err}");
        assert_eq!(err.status(), Some(404));
    }
    // Same VIN, other organization: a separate vehicle.
    let ours_id = ours.upsert_vehicle(&payload(5)).await.unwrap();
    assert!(ours_id.created());
    assert_ne!(ours_id.value.id, their_id);
    assert_eq!(ours.list_vehicles().await.unwrap().value.len(), 1);
}

/// Lists of 250 vehicles: 3 pages of at most 100 in the paged shapes, one array when bare.
#[tokio::test]
async fn every_list_shape_is_followed_to_the_end() {
    for (shape, pages) in [
        (ListShape::Paginator, 3),
        (ListShape::Resource, 3),
        (ListShape::Bare, 1),
    ] {
        let sb = sandbox_with(Behaviour {
            list_shape: shape,
            ..Behaviour::default()
        })
        .await;
        let api = client(&sb);
        for n in 0..250 {
            api.upsert_vehicle(&payload(n)).await.unwrap();
        }
        let listed = api.list_vehicles().await.unwrap().value;
        let ids: std::collections::BTreeSet<u64> = listed.iter().map(|v| v.id).collect();
        assert_eq!(listed.len(), 250, "{shape:?}");
        assert_eq!(ids.len(), 250, "{shape:?}: no vehicle twice");
        let st = state(&sb).await;
        assert_eq!(count(&st, "GET /v1/inventory", "200"), pages, "{shape:?}");
    }
}

#[tokio::test]
async fn notifications_are_created_listed_and_read() {
    let sb = sandbox_with(Behaviour {
        page_size: 2,
        ..Behaviour::default()
    })
    .await;
    let api = client(&sb);
    let mut ids = Vec::new();
    // 205 of them: three pages of at most 100 in the paginator shape.
    for i in 0..205 {
        let n = api
            .create_notification(
                "inventory",
                &NewNotification {
                    title: format!("File {i} had rejected records"),
                    message: "3 vehicles were rejected; see the report.".into(),
                    level: NotificationLevel::Warning,
                },
            )
            .await
            .unwrap();
        assert!(n.created());
        assert_eq!(n.value.level.as_deref(), Some("warning"));
        assert_eq!(n.value.read_at, None);
        ids.push(n.value.id);
    }
    // Another application's list is separate.
    let other = api.list_notifications("crm").await.unwrap().value;
    assert!(other.is_empty());

    let read = api
        .mark_notification_read("inventory", ids[1])
        .await
        .unwrap();
    assert!(read.value.read_at.is_some());
    let listed = api.list_notifications("inventory").await.unwrap().value;
    assert_eq!(listed.iter().map(|n| n.id).collect::<Vec<_>>(), ids);
    let st = state(&sb).await;
    assert_eq!(
        count(&st, "GET /v1/applications/{app}/notifications", "200"),
        4,
        "one page for crm, three for inventory"
    );
    assert!(listed[1].read_at.is_some());
    assert!(listed[0].read_at.is_none());

    let err = api.mark_notification_read("crm", ids[0]).await.unwrap_err();
    assert_eq!(
        (err.class(), err.status()),
        (ErrorClass::Rejected, Some(404))
    );
}

#[tokio::test]
async fn validation_failures_are_rejected_with_every_message() {
    let sb = sandbox(SandboxConfig::default()).await;
    let api = client(&sb);
    let mut p = payload(6);
    p.location_id = 20; // organization 200's
    p.stock = " ".into();
    let err = api.upsert_vehicle(&p).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Rejected);
    assert_eq!(err.status(), Some(422));
    assert_eq!(
        err.messages(),
        [
            "The selected location_id 20 is invalid for this organization.",
            "The stock field is required."
        ]
    );
    let line = err.to_string();
    assert!(!line.contains('\n'));
    println!("422 reads: {line}");
    assert_eq!(
        line,
        "POST /v1/inventory was rejected (422): The selected location_id 20 is invalid for this \
         organization. The stock field is required."
    );
}

#[tokio::test]
async fn a_bad_token_is_fatal_401() {
    let sb = sandbox(SandboxConfig::default()).await;
    let api = client_for(&sb, "not-a-token", 100);
    let err = api.list_vehicles().await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Fatal);
    assert_eq!(err.status(), Some(401));
    assert_eq!(err.messages(), ["Unauthenticated."]);
    let line = err.to_string();
    println!("401 reads: {line}");
    assert!(!line.contains('\n'));
    assert!(line.contains("did not accept the API token"), "{line}");
    assert!(
        line.contains("API Tokens"),
        "says where to make one: {line}"
    );
    assert!(
        line.contains("api.token_file") && line.contains("systemctl reload lotsync"),
        "says how to recover without a restart: {line}"
    );
}

/// A token rotated while lotsync runs: set on any clone, every clone calls with it from then
/// on. One that cannot be a header is refused and the one in use kept.
#[tokio::test]
async fn a_new_token_reaches_every_clone_of_the_client() {
    let sb = sandbox(SandboxConfig::default()).await;
    let api = client_for(&sb, "revoked-token", 100);
    let worker = api.clone();
    assert_eq!(api.list_vehicles().await.unwrap_err().status(), Some(401));
    assert!(api.token_is(&ApiToken::new("revoked-token")));

    worker.set_token(ApiToken::new("sandbox-token")).unwrap();
    assert!(api.token_is(&ApiToken::new("sandbox-token")));
    assert!(!api.token_is(&ApiToken::new("revoked-token")));
    api.upsert_vehicle(&payload(1)).await.unwrap();
    assert_eq!(worker.list_vehicles().await.unwrap().value.len(), 1);

    let err = api
        .set_token(ApiToken::new("sandbox-token\nX-Other: 1"))
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Fatal);
    assert!(err.to_string().contains("cannot"), "{err}");
    assert!(worker.token_is(&ApiToken::new("sandbox-token")), "kept");
    assert_eq!(api.list_vehicles().await.unwrap().value.len(), 1);
}

#[tokio::test]
async fn no_access_to_the_organization_is_fatal_403_naming_it() {
    let sb = sandbox(SandboxConfig::default()).await;
    let api = client_for(&sb, "sandbox-token", 200);
    let err = api.upsert_vehicle(&payload(7)).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Fatal);
    assert_eq!(err.status(), Some(403));
    assert_eq!(
        err.messages(),
        ["User does not have access to this organization."]
    );
    let line = err.to_string();
    println!("403 reads: {line}");
    assert!(line.contains("organization 200"), "{line}");
    assert!(line.contains("api.organization_id"), "{line}");
    assert!(!line.contains('\n'));
}

#[tokio::test]
async fn rate_limit_answers_429_with_retry_after_and_headers() {
    let sb = sandbox_with(Behaviour {
        rate_limit: Some(RateLimitConfig {
            rate: 0.5,
            burst: 2,
            headers: true,
        }),
        ..Behaviour::default()
    })
    .await;
    let api = client(&sb);
    let first = api.list_vehicles().await.unwrap();
    let limits = first.rate_limit.expect("rate limit headers");
    assert_eq!((limits.limit, limits.remaining), (Some(2), Some(1)));
    api.list_vehicles().await.unwrap();

    let err = api.list_vehicles().await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Retryable);
    assert_eq!(err.status(), Some(429));
    let wait = err.retry_after().expect("Retry-After parsed");
    assert!(
        (Duration::from_secs(1)..=Duration::from_secs(2)).contains(&wait),
        "{wait:?}"
    );
    let limits = err.rate_limit().expect("rate limit headers on the 429");
    assert_eq!(limits.remaining, Some(0));
    let reset = limits.reset.expect("X-RateLimit-Reset read");
    assert!(reset <= Duration::from_secs(3), "{reset:?}");
    let line = err.to_string();
    println!("429 reads: {line}");
    assert!(line.contains("rate limited (429)"), "{line}");
    assert!(line.contains("retry after"), "{line}");
    let st = state(&sb).await;
    assert_eq!(st["rate_limited"], 1);
    assert_eq!(count(&st, "GET /v1/inventory", "429"), 1);
}

#[tokio::test]
async fn server_errors_are_retryable_and_503_carries_retry_after() {
    let sb = sandbox(SandboxConfig::default()).await;
    let api = client(&sb);
    for (faults, status, retry_after) in [
        (
            Faults {
                http_500: 1.0,
                ..Faults::default()
            },
            500,
            None,
        ),
        (
            Faults {
                http_503: 1.0,
                ..Faults::default()
            },
            503,
            Some(Duration::from_secs(1)),
        ),
        (
            Faults {
                http_504: 1.0,
                ..Faults::default()
            },
            504,
            None,
        ),
        (
            Faults {
                http_429: 1.0,
                ..Faults::default()
            },
            429,
            Some(Duration::from_secs(1)),
        ),
    ] {
        set_faults(&sb, faults).await;
        // A 429's Retry-After holds every call of the client until it is over.
        api.service_wait().open().await;
        let err = api.upsert_vehicle(&payload(8)).await.unwrap_err();
        assert_eq!(err.class(), ErrorClass::Retryable, "{err}");
        assert_eq!(err.status(), Some(status));
        assert_eq!(err.retry_after(), retry_after, "{status}");
        if status == 429 {
            let held = api.upsert_vehicle(&payload(8)).await.unwrap_err();
            assert!(
                matches!(held, lotsync::api::ApiError::Waiting { .. }),
                "not sent inside the window: {held}"
            );
        }
    }
    let st = state(&sb).await;
    assert_eq!(vehicles(&st), 0, "nothing applied");
    for fault in ["http_500", "http_503", "http_504", "http_429"] {
        assert_eq!(st["faults"][fault], 1, "{fault}");
    }
}

/// A long Retry-After, enforced: the token is told an hour (which the client, with no quota
/// behind it, waits five minutes of), and a call back within it is refused again for the same
/// moment (counted `early`), whatever the faults say now. The call
/// back comes from another client with the same token (another process, or one restarted),
/// which has not heard the Retry-After.
#[tokio::test]
async fn an_enforced_retry_after_of_an_hour_refuses_a_call_back_within_it() {
    let sb = sandbox_with(Behaviour {
        enforce_retry_after: true,
        faults: Faults {
            http_503: 1.0,
            retry_after_secs: 3600,
            ..Faults::default()
        },
        ..Behaviour::default()
    })
    .await;
    let err = client(&sb).upsert_vehicle(&payload(1)).await.unwrap_err();
    assert_eq!(err.status(), Some(503));
    // An hour that no spent quota backs: the client waits five minutes of it, then tries.
    assert_eq!(err.retry_after(), Some(lotsync::api::TRUSTED_WAIT));
    set_behaviour(
        &sb,
        &Behaviour {
            enforce_retry_after: true,
            ..Behaviour::default()
        },
    )
    .await;
    let err = client(&sb).upsert_vehicle(&payload(1)).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Retryable, "{err}");
    assert_eq!(err.status(), Some(429));
    // The same moment, an hour away, heard the same way.
    assert_eq!(err.retry_after(), Some(lotsync::api::TRUSTED_WAIT));
    let st = state(&sb).await;
    assert_eq!(vehicles(&st), 0, "nothing applied");
    assert_eq!(st["early"], 1);
    assert_eq!(st["faults"]["http_503"], 1);
    assert_eq!(count(&st, "POST /v1/inventory", "429"), 1);
}

#[tokio::test]
async fn a_dropped_connection_is_retryable_and_applies_nothing() {
    let sb = sandbox_with(Behaviour {
        faults: Faults {
            drop: 1.0,
            ..Faults::default()
        },
        ..Behaviour::default()
    })
    .await;
    let api = client(&sb);
    let err = api.upsert_vehicle(&payload(9)).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Retryable, "{err}");
    assert_eq!(err.status(), None);
    let st = state(&sb).await;
    assert_eq!(vehicles(&st), 0);
    assert_eq!(count(&st, "POST /v1/inventory", "dropped"), 1);
}

#[tokio::test]
async fn a_write_whose_answer_was_lost_is_applied_and_safe_to_repeat() {
    let sb = sandbox_with(Behaviour {
        faults: Faults {
            ack_lost: 1.0,
            ..Faults::default()
        },
        ..Behaviour::default()
    })
    .await;
    let api = client(&sb);
    let err = api.upsert_vehicle(&payload(10)).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Retryable, "{err}");
    assert_eq!(err.status(), None, "no answer arrived");

    let st = state(&sb).await;
    assert_eq!(vehicles(&st), 1, "the write happened");
    assert_eq!(st["vehicles"][0]["writes"], 1);
    assert_eq!(count(&st, "POST /v1/inventory", "ack_lost"), 1);
    let id = st["vehicles"][0]["vehicle"]["id"].as_u64().unwrap();

    // Repeating the call once the service answers again modifies the same vehicle.
    set_behaviour(&sb, &Behaviour::default()).await;
    let again = api.upsert_vehicle(&payload(10)).await.unwrap();
    assert!(!again.created());
    assert_eq!(again.value.id, id);
    assert_eq!(vehicles(&state(&sb).await), 1);
}

#[tokio::test]
async fn a_slow_service_times_out_as_retryable() {
    let sb = sandbox_with(Behaviour {
        faults: Faults {
            latency_ms: 1_000,
            ..Faults::default()
        },
        ..Behaviour::default()
    })
    .await;
    let mut settings = lotsync::api::ClientSettings::new(
        sb.base_url(),
        100,
        lotsync::api::ApiToken::new("sandbox-token"),
    );
    settings.timeout = Duration::from_millis(200);
    let api = lotsync::api::ApiClient::new(settings).unwrap();
    let err = api.list_vehicles().await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Retryable);
    assert!(err.to_string().contains("timed out"), "{err}");
}

#[tokio::test]
async fn nothing_listening_is_retryable() {
    let sb = sandbox(SandboxConfig::default()).await;
    let api = client(&sb);
    let host = sb.base_url().trim_start_matches("http://").to_owned();
    sb.stop().await;
    let err = api.list_vehicles().await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Retryable, "{err}");
    assert!(
        err.to_string()
            .contains(&format!("could not connect to {host} (")),
        "{err}"
    );
    assert!(err.to_string().contains("check api.base_url"), "{err}");
}

#[tokio::test]
async fn the_service_counts_requests_in_flight() {
    let sb = sandbox_with(Behaviour {
        faults: Faults {
            latency_ms: 200,
            ..Faults::default()
        },
        ..Behaviour::default()
    })
    .await;
    let api = client(&sb);
    let mut calls = tokio::task::JoinSet::new();
    for n in 0..8 {
        let api = api.clone();
        calls.spawn(async move { api.upsert_vehicle(&payload(100 + n)).await });
    }
    while let Some(result) = calls.join_next().await {
        result.expect("task ran").unwrap();
    }
    let st = state(&sb).await;
    let max = st["max_in_flight"].as_u64().unwrap();
    assert!((6..=8).contains(&max), "max in flight {max}");
    assert_eq!(count(&st, "POST /v1/inventory", "201"), 8);
}

#[tokio::test]
async fn reset_clears_vehicles_and_counters() {
    let sb = sandbox(SandboxConfig::default()).await;
    let api = client(&sb);
    api.upsert_vehicle(&payload(11)).await.unwrap();
    lotsync::api::install_crypto_provider();
    let status = reqwest::Client::new()
        .post(format!("{}/__sandbox/reset", sb.base_url()))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 204);
    let st = state(&sb).await;
    assert_eq!(vehicles(&st), 0);
    assert_eq!(st["total_requests"], 0);
    // Ids restart too: the service is as new.
    assert_eq!(api.upsert_vehicle(&payload(11)).await.unwrap().value.id, 1);
}

/// Headers the spec requires are checked by the sandbox: without them it refuses.
#[tokio::test]
async fn the_sandbox_refuses_requests_without_the_required_headers() {
    let sb = sandbox(SandboxConfig::default()).await;
    lotsync::api::install_crypto_provider();
    let http = reqwest::Client::new();
    let url = format!("{}/v1/inventory", sb.base_url());
    let send = |r: reqwest::RequestBuilder| async move {
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        let body: serde_json::Value = r.json().await.unwrap();
        (status, body)
    };
    let auth = "Bearer sandbox-token";
    let (status, body) = send(
        http.get(&url)
            .header("Authorization", auth)
            .header("Accept", "text/html"),
    )
    .await;
    assert_eq!(status, 406, "Accept without JSON: {body}");
    let (status, _) = send(
        http.get(&url)
            .header("Authorization", auth)
            .header("Accept", "application/json"),
    )
    .await;
    assert_eq!(status, 403, "no organization header");
    let (status, body) = send(
        http.post(&url)
            .header("Authorization", auth)
            .header("Accept", "application/json")
            .header("X-Service-Organization-Id", "100")
            .header("Content-Type", "application/json")
            .body("{not json"),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["errors"]["code"], 400);
    let (status, body) = send(
        http.get(format!("{}/v1/nowhere", sb.base_url()))
            .header("Accept", "application/json"),
    )
    .await;
    assert_eq!(status, 404);
    assert!(body["errors"]["messages"][0].is_string());
}

#[tokio::test]
async fn a_wrong_base_path_is_fatal_and_says_what_to_check() {
    let sb = sandbox(SandboxConfig::default()).await;
    let mut settings = lotsync::api::ClientSettings::new(
        format!("{}/prefix", sb.base_url()),
        100,
        lotsync::api::ApiToken::new("sandbox-token"),
    );
    settings.version = "v2".into();
    let api = lotsync::api::ApiClient::new(settings).unwrap();
    let err = api.list_vehicles().await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Fatal);
    assert!(err.to_string().contains("api.base_url"), "{err}");
}

/// A slug that needs percent-encoding survives into the next-page links.
#[tokio::test]
async fn next_page_links_keep_an_encoded_application_slug() {
    let sb = sandbox(SandboxConfig::default()).await;
    let api = client(&sb);
    for i in 0..150 {
        api.create_notification(
            "dealer apps/inventory",
            &NewNotification {
                title: format!("n{i}"),
                message: "m".into(),
                level: NotificationLevel::Info,
            },
        )
        .await
        .unwrap();
    }
    let listed = api
        .list_notifications("dealer apps/inventory")
        .await
        .unwrap()
        .value;
    assert_eq!(listed.len(), 150);
}

/// The exact keys of the paged shapes, and the rate headers on every answer, errors included,
/// when the service has a limit.
#[tokio::test]
async fn list_shapes_have_their_exact_keys_and_every_answer_its_rate_headers() {
    lotsync::api::install_crypto_provider();
    let http = reqwest::Client::new();
    for (shape, keys) in [
        (
            ListShape::Paginator,
            vec![
                "current_page",
                "data",
                "last_page",
                "next_page_url",
                "per_page",
                "total",
            ],
        ),
        (ListShape::Resource, vec!["data", "links", "meta"]),
    ] {
        let sb = sandbox_with(Behaviour {
            list_shape: shape,
            rate_limit: Some(RateLimitConfig {
                rate: 100.0,
                burst: 50,
                headers: true,
            }),
            ..Behaviour::default()
        })
        .await;
        let api = client(&sb);
        for n in 0..3 {
            api.upsert_vehicle(&payload(n)).await.unwrap();
        }
        let response = http
            .get(format!("{}/v1/inventory?per_page=2", sb.base_url()))
            .header("Authorization", "Bearer sandbox-token")
            .header("X-Service-Organization-Id", "100")
            .send()
            .await
            .unwrap();
        let body: serde_json::Value = response.json().await.unwrap();
        let mut found: Vec<&str> = body
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        found.sort_unstable();
        assert_eq!(found, keys, "{shape:?}");
        if shape == ListShape::Resource {
            let meta: Vec<&String> = body["meta"].as_object().unwrap().keys().collect();
            assert_eq!(meta, ["current_page", "last_page", "per_page", "total"]);
            assert_eq!(body["meta"]["last_page"], 2);
            assert!(body["links"]["next"]
                .as_str()
                .unwrap()
                .ends_with("/v1/inventory?page=2&per_page=2"));
        } else {
            assert_eq!(body["total"], 3);
            assert_eq!(body["last_page"], 2);
        }

        // No token: 401, still with the rate headers.
        let response = http
            .get(format!("{}/v1/inventory", sb.base_url()))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401);
        assert_eq!(response.headers()["x-ratelimit-limit"], "50");
        assert!(response.headers().contains_key("x-ratelimit-remaining"));
        // A 403 counts against the token's bucket and says so.
        let response = http
            .get(format!("{}/v1/inventory", sb.base_url()))
            .header("Authorization", "Bearer sandbox-token")
            .header("X-Service-Organization-Id", "200")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403);
        let remaining: u32 = response.headers()["x-ratelimit-remaining"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(remaining < 50, "{remaining}");
    }
    // Without a limit there are none, as from a service that has none.
    let sb = sandbox(SandboxConfig::default()).await;
    let answer = client(&sb).list_vehicles().await.unwrap();
    assert_eq!(answer.rate_limit, None);
}

/// `html_200`: a portal's sign-in page instead of the service, 200 and nothing applied. The
/// client says the answer is not the service's and what to check.
#[tokio::test]
async fn a_portal_page_with_200_applies_nothing_and_is_fatal() {
    let sb = sandbox_with(Behaviour {
        faults: Faults {
            html_200: 1.0,
            ..Faults::default()
        },
        ..Behaviour::default()
    })
    .await;
    let err = client(&sb).upsert_vehicle(&payload(1)).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Fatal, "{err}");
    let line = err.to_string();
    assert!(line.contains("not JSON"), "{line}");
    assert!(line.contains("api.base_url"), "{line}");
    let st = state(&sb).await;
    assert_eq!(vehicles(&st), 0, "nothing applied");
    assert_eq!(st["faults"]["html_200"], 1);
    assert_eq!(count(&st, "POST /v1/inventory", "200"), 1);
}

/// `html_403`: a firewall's block page, 403 and nothing applied. Not the service's answer (it
/// answers JSON): passing, never "the token's user has no access", and the status and content
/// type are said.
#[tokio::test]
async fn a_firewall_page_with_403_is_passing_and_not_a_diagnosis_of_access() {
    let sb = sandbox_with(Behaviour {
        faults: Faults {
            html_403: 1.0,
            ..Faults::default()
        },
        ..Behaviour::default()
    })
    .await;
    let err = client(&sb).upsert_vehicle(&payload(1)).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Retryable, "{err}");
    assert_eq!(err.status(), Some(403));
    let line = err.to_string();
    assert!(
        line.contains("an answer not from the service (403, text/html)"),
        "{line}"
    );
    assert!(!line.contains("no access"), "{line}");
    let st = state(&sb).await;
    assert_eq!(vehicles(&st), 0, "nothing applied");
    assert_eq!(st["faults"]["html_403"], 1);
}

/// `wrong_vehicle`: vehicle writes are applied, but answered with the organization's vehicle
/// of the lowest id (never the one written); reads are left alone.
#[tokio::test]
async fn a_wrong_vehicle_answer_names_another_vehicle_of_the_organization() {
    let sb = sandbox(SandboxConfig::default()).await;
    let api = client(&sb);
    let first = api.upsert_vehicle(&payload(1)).await.unwrap().value;
    set_faults(
        &sb,
        Faults {
            wrong_vehicle: 1.0,
            ..Faults::default()
        },
    )
    .await;
    // The only vehicle of the organization: it has no other to answer with.
    let again = api.upsert_vehicle(&payload(1)).await.unwrap();
    assert_eq!(again.value.vin.as_deref(), Some(payload(1).vin.as_str()));

    let answer = api.upsert_vehicle(&payload(2)).await.unwrap();
    assert!(answer.created(), "the status is the write's own");
    assert_eq!(answer.value.id, first.id);
    assert_eq!(answer.value.vin.as_deref(), Some(payload(1).vin.as_str()));
    let st = state(&sb).await;
    let vehicles = st["vehicles"].as_array().unwrap();
    assert_eq!(vehicles.len(), 2, "the write was applied");
    let second = vehicles[1]["vehicle"]["id"].as_u64().unwrap();
    assert_eq!(vehicles[1]["vehicle"]["vin"], payload(2).vin.as_str());

    let sold = api.mark_sold(second).await.unwrap().value;
    assert_eq!(sold.id, first.id, "answered with the other vehicle");
    assert!(!sold.is_sold());
    // Reads are not affected: the vehicle itself says it was sold.
    let fetched = api.get_vehicle(second).await.unwrap().value;
    assert_eq!(fetched.id, second);
    assert!(fetched.is_sold());
    let listed = api.list_vehicles().await.unwrap().value;
    assert_eq!(listed.len(), 2);
    assert_eq!(state(&sb).await["faults"]["wrong_vehicle"], 2);
}

/// `pad_answer_kib`: every 2xx answer is followed by that much whitespace, streamed without a
/// Content-Length; still JSON, the same value. Error answers are not padded.
#[tokio::test]
async fn padded_answers_are_the_same_json_followed_by_whitespace() {
    let sb = sandbox(SandboxConfig::default()).await;
    let api = client(&sb);
    let id = api.upsert_vehicle(&payload(1)).await.unwrap().value.id;
    set_faults(
        &sb,
        Faults {
            pad_answer_kib: 100,
            ..Faults::default()
        },
    )
    .await;
    lotsync::api::install_crypto_provider();
    let http = reqwest::Client::new();
    let get = |path: String| {
        http.get(format!("{}{path}", sb.base_url()))
            .header("Authorization", "Bearer sandbox-token")
            .header("X-Service-Organization-Id", "100")
            .send()
    };
    let response = get(format!("/v1/inventory/{id}")).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.content_length(), None, "sent in chunks");
    let body = response.bytes().await.unwrap();
    assert!(body.len() >= 100 * 1024, "{}", body.len());
    let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(value["id"], id);
    assert!(body[body.len() - 100 * 1024..].iter().all(|b| *b == b' '));

    let missing = get("/v1/inventory/999".into()).await.unwrap();
    assert_eq!(missing.status(), 404);
    assert!(
        missing.bytes().await.unwrap().len() < 1024,
        "errors are not padded"
    );
}

/// A client whose answer limits are `answer` and `list_page` bytes.
fn limited_client(
    sb: &lotsync::sandbox::RunningSandbox,
    answer: usize,
    list_page: usize,
) -> lotsync::api::ApiClient {
    let mut settings = lotsync::api::ClientSettings::new(
        sb.base_url(),
        100,
        lotsync::api::ApiToken::new("sandbox-token"),
    );
    settings.max_answer_bytes = answer;
    settings.max_list_page_bytes = list_page;
    lotsync::api::ApiClient::new(settings).unwrap()
}

/// An answer over its limit is refused: by its Content-Length before a byte of it is read,
/// or, sent in chunks, as soon as it passes the limit. Fatal, naming the setting to raise and
/// the address that answered.
#[tokio::test]
async fn answers_over_their_limit_are_refused_naming_the_setting() {
    let sb = sandbox(SandboxConfig::default()).await;
    let mut p = payload(1);
    p.options = (0..40).map(|n| format!("Option number {n}")).collect();
    let id = client(&sb).upsert_vehicle(&p).await.unwrap().value.id;
    for n in 2..60 {
        client(&sb).upsert_vehicle(&payload(n)).await.unwrap();
    }

    // The sandbox's own answers carry a Content-Length.
    let small = limited_client(&sb, 1000, 4096);
    let err = small.get_vehicle(id).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Fatal, "{err}");
    assert_eq!(err.status(), Some(200));
    let line = err.to_string();
    println!("over the limit: {line}");
    assert!(
        line.contains("(its Content-Length), over the 1000 bytes"),
        "{line}"
    );
    assert!(line.contains("api.max_answer_kib"), "{line}");
    assert!(line.contains(&format!("{}/v1/", sb.base_url())), "{line}");
    let err = small.list_vehicles().await.unwrap_err();
    assert!(
        err.to_string()
            .contains("over the 4 KiB lotsync reads for one list page"),
        "{err}"
    );
    assert!(err.to_string().contains("api.max_list_page_kib"), "{err}");

    // Padded answers come in chunks, without a Content-Length.
    set_faults(
        &sb,
        Faults {
            pad_answer_kib: 32,
            ..Faults::default()
        },
    )
    .await;
    let roomy = limited_client(&sb, 16 * 1024, 64 * 1024);
    let err = roomy.get_vehicle(id + 1).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("runs past the 16 KiB lotsync reads for one resource"),
        "{err}"
    );
    // Within the limits the padding is only whitespace: read and used.
    let room = limited_client(&sb, 64 * 1024, 256 * 1024);
    assert_eq!(room.get_vehicle(id).await.unwrap().value.id, id);
    assert_eq!(room.list_vehicles().await.unwrap().value.len(), 59);
}

/// An error answer is read within the limit too; one over it keeps its status's class, without
/// the service's messages.
#[tokio::test]
async fn error_answers_are_bounded_and_keep_their_class() {
    let sb = sandbox(SandboxConfig::default()).await;
    let err = limited_client(&sb, 1024, 4096)
        .get_vehicle(999)
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Rejected);
    assert_eq!(err.messages(), ["Vehicle 999 not found."]);
    let err = limited_client(&sb, 16, 4096)
        .get_vehicle(999)
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Rejected, "{err}");
    assert_eq!(err.status(), Some(404));
    assert!(err.messages().is_empty(), "{err}");
    set_faults(
        &sb,
        Faults {
            http_503: 1.0,
            ..Faults::default()
        },
    )
    .await;
    let err = limited_client(&sb, 16, 4096)
        .list_vehicles()
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Retryable, "{err}");
    assert_eq!(err.retry_after(), Some(Duration::from_secs(1)));
}
