//! `lotsync check` on every sample export, compared with the outputs in `tests/golden/`.
//! After a deliberate change, `LOTSYNC_UPDATE_GOLDEN=1 cargo test --test it check_golden::`
//! rewrites them; review the diff before committing it.

use std::path::Path;
use std::process::Command;

/// (golden name, sample, extra arguments)
const CASES: &[(&str, &str, &[&str])] = &[
    ("comma-auto", "dealer-comma.csv", &[]),
    (
        "comma-strict",
        "dealer-comma.csv",
        &["--profile", "strict-comma"],
    ),
    ("semicolon-auto", "dms-semicolon-1252.csv", &[]),
    ("tsv-auto", "export-bom.tsv", &[]),
    ("tsv-lots", "export-bom.tsv", &["--profile", "lots-tsv"]),
    ("elements-auto", "inventory-elements.xml", &[]),
    (
        "elements-profile",
        "inventory-elements.xml",
        &["--profile", "elements-xml"],
    ),
    ("attributes-auto", "inventory-attributes.xml", &[]),
];

fn run(sample: &str, extra: &[&str], format: &str) -> (String, String, i32) {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(env!("CARGO_BIN_EXE_lotsync"))
        .current_dir(root)
        .arg("check")
        .arg(format!("feeds/samples/{sample}"))
        .args(["--location-id", "10", "--format", format])
        .args(extra)
        .output()
        .expect("lotsync runs");
    (
        String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        String::from_utf8(out.stderr).expect("stderr is UTF-8"),
        out.status.code().unwrap_or(-1),
    )
}

fn compare(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("LOTSYNC_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (LOTSYNC_UPDATE_GOLDEN=1 writes it)",
            path.display()
        )
    });
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(e, a)| e != a)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{name} differs from {} at line {}:\n expected: {:?}\n actual:   {:?}",
            path.display(),
            first + 1,
            expected.lines().nth(first),
            actual.lines().nth(first)
        );
    }
}

#[test]
fn text_reports_match_the_golden_files() {
    for (name, sample, extra) in CASES {
        let (stdout, stderr, code) = run(sample, extra, "text");
        assert_eq!(code, 0, "{name}: {stderr}");
        assert_eq!(stderr, "", "{name}");
        compare(&format!("{name}.txt"), &stdout);
    }
}

#[test]
fn ndjson_matches_the_golden_files() {
    for (name, sample, extra) in CASES {
        let (stdout, stderr, code) = run(sample, extra, "ndjson");
        assert_eq!(code, 0, "{name}: {stderr}");
        compare(&format!("{name}.ndjson"), &stdout);
        compare(&format!("{name}.stderr.ndjson"), &stderr);
        // Every line is a POST body: the spec's parameters plus _source (and _sold).
        for line in stdout.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("one JSON object a line");
            assert!(v["vin"].is_string() && v["stock"].is_string() && v["location_id"].is_u64());
            assert!(v["_source"]["line"].is_u64());
            let body: lotsync::api::VehiclePayload =
                serde_json::from_value(v.clone()).expect("a typed payload reads it back");
            assert_eq!(body.vin, v["vin"]);
        }
    }
}

/// The counts a dealer sees, checked against what the samples' EXPECTED.md says they hold.
#[test]
fn every_sample_accepts_the_clean_vehicles_and_names_each_planted_problem() {
    for (name, sample, extra, accepted, rejected) in [
        ("comma", "dealer-comma.csv", &[][..], 11, 3),
        ("semicolon", "dms-semicolon-1252.csv", &[][..], 10, 3),
        (
            "tsv",
            "export-bom.tsv",
            &["--profile", "lots-tsv"][..],
            8,
            4,
        ),
        ("elements", "inventory-elements.xml", &[][..], 8, 3),
        ("attributes", "inventory-attributes.xml", &[][..], 9, 3),
    ] {
        let (stdout, _, code) = run(sample, extra, "text");
        assert_eq!(code, 0);
        let summary = format!("{accepted} accepted, {rejected} rejected");
        assert!(stdout.contains(&summary), "{name}: {stdout}");
        assert!(
            stdout.contains("vin: check digit"),
            "{name}: bad check digit named"
        );
        assert!(
            stdout.contains("stock: missing"),
            "{name}: missing stock named"
        );
        assert!(
            stdout.contains("already in this file"),
            "{name}: duplicate named"
        );
        // The attributes file's paint without a color word, "Granite Crystal Metallic", is
        // gray by paint vocabulary since step 8 (EXPECTED.md).
        if name != "attributes" {
            assert!(
                stdout.contains("exterior_color:"),
                "{name}: unmapped color named"
            );
        }
    }
}
