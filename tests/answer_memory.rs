//! An answer far larger than any the service sends is refused without being read whole: the
//! process's peak memory barely moves. In a file of its own: VmHWM is the whole process's
//! peak, which no other test thread may raise meanwhile.

mod common;

use common::{client, payload, sandbox_with, set_faults};
use lotsync::api::ErrorClass;
use lotsync::sandbox::{Behaviour, Faults};

/// The process's peak resident set (VmHWM), in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

#[test]
fn a_50_mb_answer_is_refused_without_being_read_whole() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let sb = sandbox_with(Behaviour::default()).await;
        let api = client(&sb);
        let id = api.upsert_vehicle(&payload(1)).await.unwrap().value.id;
        api.get_vehicle(id).await.unwrap();
        api.list_vehicles().await.unwrap();
        set_faults(
            &sb,
            Faults {
                pad_answer_kib: 50 * 1024,
                ..Faults::default()
            },
        )
        .await;

        let before = peak_rss_kib();
        let one = api.get_vehicle(id).await;
        let after_one = peak_rss_kib();
        let list = api.list_vehicles().await.map(|a| a.value.len());
        let after_list = peak_rss_kib();
        println!(
            "peak RSS {before} KiB; +{} KiB after one vehicle, +{} KiB after a list page \
             (each answer padded by 50 MiB)",
            after_one - before,
            after_list - after_one
        );
        let err = one.expect_err("a 50 MiB vehicle is refused");
        assert_eq!(err.class(), ErrorClass::Fatal, "{err}");
        let line = err.to_string();
        assert!(line.contains("api.max_answer_kib"), "{line}");
        assert!(line.contains(&sb.base_url()), "names the base URL: {line}");
        let err = list.expect_err("a 50 MiB list page is refused");
        assert!(err.to_string().contains("api.max_list_page_kib"), "{err}");
        // One vehicle's limit is 256 KiB and a list page's 8 MiB by default: at most that
        // (and a chunk) is held, never the 50 MiB.
        assert!(after_one - before < 2 * 1024, "{} KiB", after_one - before);
        assert!(
            after_list - after_one < (8 + 2) * 1024,
            "{} KiB",
            after_list - after_one
        );
    });
}
