//! Units of `lotsync validate`: every problem named at once, with its line and key path.

use super::*;

const MINIMAL: &str = "[api]\nbase_url = \"https://x\"\norganization_id = 1\n";

/// The keys `section` knows, as the types' derive hands them to an unknown key's refusal.
fn known_keys(section: &str) -> &'static [&'static str] {
    let text = match section {
        "" => format!("zz_not_a_key = 1\n{MINIMAL}"),
        "api" => format!("{MINIMAL}zz_not_a_key = 1\n"),
        "feed" => format!("{MINIMAL}[[feed]]\nzz_not_a_key = 1\n"),
        s => format!("{MINIMAL}[{s}]\nzz_not_a_key = 1\n"),
    };
    let table: toml::Table = toml::from_str(&text).unwrap();
    match read::<Config>(toml::Value::Table(table)) {
        Err(Refusal {
            error: ReadError::Unknown { known, .. },
            ..
        }) => known,
        other => panic!("{section}: {other:?}"),
    }
}

/// lotsync.toml(5) is written by hand: every key lotsync knows has its entry there (`.B
/// key` under the section's heading), and it names none that lotsync does not know.
#[test]
fn the_config_pages_keys_are_the_known_keys() {
    let page = include_str!("../../../packaging/man/lotsync.toml.5");
    let mut documented: Vec<(String, String)> = Vec::new();
    let mut section = None;
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        if let Some(heading) = line.strip_prefix(".SH ") {
            section = match heading.trim_matches('"') {
                "TOP-LEVEL KEYS" => Some(""),
                "[api]" => Some("api"),
                "[state]" => Some("state"),
                "[daemon]" => Some("daemon"),
                "[[feed]]" => Some("feed"),
                "[notifications]" => Some("notifications"),
                _ => None,
            };
        } else if let (Some(section), ".TP") = (section, line) {
            let term = lines.next().unwrap_or_default();
            let key = term.strip_prefix(".B ").unwrap_or(term);
            documented.push((section.to_owned(), key.to_owned()));
        }
    }
    // The keys serde's derive knows, section by section (as an unknown key's problem
    // lists them).
    let sections = ["", "api", "state", "daemon", "feed", "notifications"];
    let mut known: Vec<(String, String)> = Vec::new();
    for section in sections {
        for key in known_keys(section) {
            // The sections themselves have headings, not entries.
            if !(section.is_empty() && sections.contains(key)) {
                known.push((section.to_owned(), key.to_string()));
            }
        }
    }
    known.sort();
    documented.sort();
    assert_eq!(documented, known, "lotsync.toml(5) against the types");
}

/// The example the .deb installs as /etc/lotsync/lotsync.toml uses only keys lotsync
/// knows: an unknown one fails `lotsync validate`, which the units run before every start
/// (`daemon.reconcile_retry_secs` once did).
#[test]
fn the_packaged_example_has_no_unknown_key() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/lotsync.example.toml");
    let unknown: Vec<String> = validate(Path::new(example))
        .into_iter()
        .filter(|p| p.contains("unknown key"))
        .collect();
    assert_eq!(unknown, Vec::<String>::new());
}

#[test]
fn validate_names_a_bad_metrics_value_by_its_key() {
    let tmp = crate::testing::temp_dir("config");
    let dir = tmp.path().to_owned();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("lotsync.toml");
    let config = |metrics: &str| {
        format!(
            "[api]\nbase_url = \"http://127.0.0.1:1\"\norganization_id = 1\n\
                 token_env = \"LOTSYNC_METRICS_TEST_TOKEN\"\n[daemon]\n{metrics}\n"
        )
    };
    std::fs::write(&path, config("metrics = \"0.0.0.0:9187\"")).unwrap();
    let problems = validate(&path);
    let bad: Vec<_> = problems
        .iter()
        .filter(|p| p.contains("daemon.metrics: "))
        .collect();
    assert_eq!(bad.len(), 1, "{problems:?}");
    assert!(
        bad[0].contains("\"0.0.0.0:9187\" is not a loopback address"),
        "{bad:?}"
    );
    let err = Config::load(&path).unwrap_err().to_string();
    assert!(err.contains("daemon.metrics: "), "{err}");
    std::fs::write(&path, config("metrics = \"127.0.0.1:9187\"")).unwrap();
    assert!(
        !validate(&path).iter().any(|p| p.contains("metrics")),
        "{:?}",
        validate(&path)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The metrics served on the control socket's own path would take the place of
/// the socket `lotsync status` talks to (or fail the start as "something answers there").
#[test]
fn validate_refuses_metrics_on_the_control_sockets_path() {
    let tmp = crate::testing::temp_dir("config");
    let dir = tmp.path().to_owned();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("lotsync.toml");
    let config = |socket: &str, metrics: &str| {
        format!(
            "[api]\nbase_url = \"http://127.0.0.1:1\"\norganization_id = 1\n\
                 token_env = \"LOTSYNC_METRICS_TEST_TOKEN\"\n[daemon]\nsocket = \"{socket}\"\n\
                 metrics = \"{metrics}\"\n"
        )
    };
    let metrics_problems = |path: &Path| -> Vec<String> {
        validate(path)
            .into_iter()
            .filter(|p| p.contains("daemon.metrics: "))
            .collect()
    };
    for (socket, metrics) in [
        ("/run/lotsync/lotsync.sock", "/run/lotsync/lotsync.sock"),
        ("/run/lotsync/lotsync.sock", "/run/lotsync//./lotsync.sock"),
        // A relative socket is taken from the config's folder.
        ("lotsync.sock", &format!("{}/lotsync.sock", dir.display())),
    ] {
        std::fs::write(&path, config(socket, metrics)).unwrap();
        let bad = metrics_problems(&path);
        assert_eq!(bad.len(), 1, "socket {socket}, metrics {metrics}: {bad:?}");
        assert!(bad[0].contains("the control socket"), "{bad:?}");
    }
    std::fs::write(
        &path,
        config("/run/lotsync/lotsync.sock", "/run/lotsync/metrics.sock"),
    )
    .unwrap();
    assert_eq!(metrics_problems(&path), Vec::<String>::new());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_value_of_the_wrong_type_is_named_with_its_line_and_the_rest_still_checked() {
    let tmp = crate::testing::temp_dir("config");
    let dir = tmp.path().to_owned();
    std::fs::create_dir_all(dir.join("in-b")).unwrap();
    let path = dir.join("lotsync.toml");
    std::fs::write(
        &path,
        "[api]\nbase_url = \"https://x\"\norganization_id = \"abc\"\ntimeout_secs = \"ten\"\n\
             [state]\ndir = \"state\"\n\
             [[feed]]\nname = \"a\"\ninbox = \"in-a\"\nlocation_id = 1\n\
             [[feed]]\nname = \"b\"\ninbox = \"in-b\"\nlocation_id = \"x\"\n",
    )
    .unwrap();
    let problems = validate(&path);
    let all = problems.join("\n");
    for expected in [
        "line 3: api.organization_id: invalid type: string \"abc\", expected u64",
        "line 4: api.timeout_secs: invalid type: string \"ten\"",
        "line 14: feed[1] (\"b\").location_id: invalid type: string \"x\"",
        // Checked after them: feed a's inbox does not exist.
        "in-a",
    ] {
        assert!(all.contains(expected), "{expected:?} not in:\n{all}");
    }
    assert!(!all.contains("missing field"), "{all}");
    assert_eq!(
        all.matches("location_id").count(),
        1,
        "nothing said of the placeholder: {all}"
    );
}

/// A config with `lines`; its problems, with every placeholder kept quiet.
fn problems_of(lines: &str) -> (Vec<String>, String) {
    let dir = crate::testing::temp_dir("config");
    std::fs::create_dir_all(dir.path().join("in-b")).unwrap();
    let path = dir.path().join("lotsync.toml");
    std::fs::write(&path, lines).unwrap();
    let problems = validate(&path);
    let all = problems.join("\n");
    (problems, all)
}

#[test]
fn a_line_toml_cannot_read_is_named_and_the_rest_still_checked() {
    // Line 2 leaves its string open, line 4 repeats a key, line 8 is a wrong type, line
    // 9 an unknown key, and feed "a"'s inbox is missing.
    let (problems, all) = problems_of(
        "[api]\nbase_url = \"https://x\norganization_id = 100\norganization_id = 101\n\
             token_env = \"LOTSYNC_TEST_TOKEN_UNSET_X\"\n\
             [[feed]]\nname = \"a\"\nlocation_id = \"ten\"\ninbx = \"in-a\"\n\
             [[feed]]\nname = \"b\"\ninbox = \"in-b\"\nlocation_id = 11\n",
    );
    for expected in [
        "line 2: not valid TOML:",
        "line 4: not valid TOML: duplicate key",
        "line 8: feed[0] (\"a\").location_id: invalid type: string \"ten\"",
        "feed[0] (\"a\").inbx: unknown key",
        "LOTSYNC_TEST_TOKEN_UNSET_X",
    ] {
        assert!(all.contains(expected), "{expected:?} not in:\n{all}");
    }
    assert!(!all.contains("missing field"), "{all}");
    assert!(
        !all.contains("base_url"),
        "nothing said of the placeholder: {all}"
    );
    // Feed "a" has no inbox (the key is misspelt): said, and its placeholder is quiet.
    assert!(
        all.contains("line 6: feed[0] (\"a\").inbox: required, not set"),
        "{all}"
    );
    assert_eq!(all.matches("feed[0] (\"a\").inbox").count(), 1, "{all}");
    assert!(problems.iter().all(|p| !p.contains('\n')), "{all}");
}

#[test]
fn a_value_left_open_stops_the_check_at_its_line_and_blames_no_line_after_it() {
    // An array missing a comma (line 8), then valid lines.
    let (problems, all) = problems_of(
            "[api]\nbase_url = \"https://x\"\norganization_id = 100\n\
             [[feed]]\nname = \"a\"\ninbox = \"in-b\"\nextensions = [\"csv\",\n  \"xml\"\n  \"tsv\"]\n\
             location_id = 1\n[[feed]]\nname = \"b\"\ninbox = \"in-b\"\nlocation_id = 2\n",
        );
    assert!(all.contains("line 9: not valid TOML"), "{all}");
    assert!(
        problems
            .last()
            .unwrap()
            .contains("line 9 seems to leave a value open"),
        "{all}"
    );
    for innocent in ["line 10", "line 11", "line 12", "line 8:", "line 7:"] {
        assert!(!all.contains(innocent), "{innocent} blamed: {all}");
    }
    assert_eq!(problems.len(), 2, "{all}");

    // A multi-line string never closed: said once, with nothing after it.
    let (problems, all) = problems_of(
        "[api]\nbase_url = \"https://x\"\norganization_id = 100\n\
             [notifications]\napplication_slug = \"\"\"inventory\n\
             [[feed]]\nname = \"b\"\ninbox = \"in-b\"\nlocation_id = 2\n",
    );
    assert_eq!(problems.len(), 1, "{all}");
    assert!(
        all.starts_with("line 5: not valid TOML: a multi-line string opened here"),
        "{all}"
    );
}

#[test]
fn a_line_left_out_hides_only_its_own_key() {
    // Feed a's name line does not read; feed b has no name at all; a dotted api key does
    // not read.
    let (_, all) = problems_of(
        "api.base_url = \"https://x\napi.organization_id = 100\n\
             [[feed]]\nname = \"a\ninbox = \"in-b\"\nlocation_id = 1\n\
             [[feed]]\ninbox = \"in-b\"\nlocation_id = 2\n",
    );
    assert!(all.contains("line 1: not valid TOML"), "{all}");
    assert!(all.contains("line 4: not valid TOML"), "{all}");
    assert!(all.contains("feed[1].name: required, not set"), "{all}");
    assert!(!all.contains("feed[0].name"), "{all}");
    assert!(!all.contains("base_url: required"), "{all}");

    // A stray word is no header: a missing [api] is still said as such, once (not its
    // keys, which the placeholder table lacks).
    let (problems, all) =
        problems_of("@@@\n[[feed]]\nname = \"b\"\ninbox = \"in-b\"\nlocation_id = 2\n");
    assert!(all.contains("line 1: not valid TOML"), "{all}");
    assert!(
        problems.contains(&"api: required, not set".to_owned()),
        "{all}"
    );
    assert!(!all.contains("api."), "{all}");
}

#[test]
fn a_header_toml_cannot_read_leaves_its_section_out() {
    let (problems, all) = problems_of(
        "[api\nbase_url = \"https://x\"\norganization_id = 100\n\
             [[feed]]\nname = \"b\"\ninbox = \"in-b\"\nlocation_id = 11\ncolour = 1\n",
    );
    assert!(all.contains("line 1: not valid TOML:"), "{all}");
    assert!(
        all.contains("line 8: feed[0] (\"b\").colour: unknown key"),
        "{all}"
    );
    // Not "base_url: unknown key" at the top, where the header's keys would land.
    assert!(!all.contains("base_url"), "{all}");
    assert!(
        problems.last().unwrap().contains("not checked until"),
        "{all}"
    );
}

#[test]
fn validate_names_every_problem_at_once() {
    let tmp = crate::testing::temp_dir("config");
    let dir = tmp.path().to_owned();
    std::fs::create_dir_all(dir.join("in-a")).unwrap();
    let path = dir.join("lotsync.toml");
    std::fs::write(
        &path,
        r#"
            colour = "red"
            [api]
            base_url = "http://inventory.example.com"
            organization_id = 100
            token_file = "missing-token"
            organisation = 2
            [state]
            dir = "state"
            [[feed]]
            name = "a"
            inbox = "in-a"
            location_id = 10
            [[feed]]
            name = "b"
            inbox = "in-b"
            location_id = 10
            profile = "nope"
            "#,
    )
    .unwrap();
    let problems = validate(&path);
    let all = problems.join("\n");
    for expected in [
        "colour: unknown key",
        "api.organisation: unknown key",
        "plain http to another machine",
        "api.token_file",
        "in-b: No such file",
        "feed[1] (\"b\").profile",
    ] {
        assert!(all.contains(expected), "{expected}: {all}");
    }
    assert_eq!(problems.len(), 6, "{all}");
    // Two full feeds on one location are a normal setup: each sells only what it owns.
    assert!(!all.contains("location_id"), "{all}");
    assert!(
        !problems.iter().any(|p| p.contains("  ")),
        "one line each, no runs of blanks: {all}"
    );
    assert!(!all.contains("feed[0] (\"a\").inbox"), "{all}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A config written to a fresh folder (with the inbox `in-b`): its path and the folder.
fn written(text: &str) -> (std::path::PathBuf, tempfile::TempDir) {
    let dir = crate::testing::temp_dir("config");
    std::fs::create_dir_all(dir.path().join("in-b")).unwrap();
    let path = dir.path().join("lotsync.toml");
    std::fs::write(&path, text).unwrap();
    (path, dir)
}

/// An unknown key is named with its key path and line wherever it is: at the top, in a
/// section, in the second `[[feed]]`, a table nested in a section, a key of an inline table;
/// each once, and the other problems are still said. A bad config at start says the same.
#[test]
fn an_unknown_key_anywhere_is_named_with_its_path_and_line() {
    let (path, _dir) = written(
        "colour = \"red\"\n\
         [api]\n\
         base_url = \"https://x\"\n\
         organization_id = 1\n\
         organisation = 2\n\
         token_env = \"LOTSYNC_TEST_TOKEN_UNSET_Y\"\n\
         [daemon.watch]\n\
         every = 1\n\
         [[feed]]\n\
         name = \"a\"\n\
         inbox = \"in-b\"\n\
         location_id = 1\n\
         [[feed]]\n\
         name = \"b\"\n\
         inbox = \"in-b\"\n\
         location_id = 2\n\
         inbx = \"in-c\"\n\
         [notifications]\n\
         application_slug = \"inventory\"\n\
         extra = { deep = 1 }\n",
    );
    let problems = validate(&path);
    let all = problems.join("\n");
    let unknown: Vec<&String> = problems
        .iter()
        .filter(|p| p.contains("unknown key"))
        .collect();
    for expected in [
        "line 1: colour: unknown key (known here: api, state, profiles_dir, feed, \
         notifications, daemon)",
        "line 5: api.organisation: unknown key (known here: base_url, version, organization_id,",
        "line 7: daemon.watch: unknown key (known here: socket, settle_secs,",
        "line 17: feed[1] (\"b\").inbx: unknown key (known here: name, inbox, location_id,",
        "line 20: notifications.extra: unknown key (known here: application_slug)",
    ] {
        assert_eq!(
            unknown.iter().filter(|p| p.starts_with(expected)).count(),
            1,
            "{expected:?} once in:\n{all}"
        );
    }
    assert_eq!(unknown.len(), 5, "{all}");
    // The rest is checked: the token's variable is not set.
    assert!(
        all.contains("LOTSYNC_TEST_TOKEN_UNSET_Y is not set"),
        "{all}"
    );

    let err = Config::load(&path).unwrap_err().to_string();
    assert!(
        err.contains("\n  line 5: api.organisation: unknown key")
            && err.contains("\n  line 17: feed[1] (\"b\").inbx: unknown key"),
        "{err}"
    );
}

/// A value out of its range is refused once, where it is read, with one message naming its
/// line, key and range; `Config::load` says the same.
#[test]
fn a_value_out_of_range_is_refused_once_with_one_message() {
    let (path, _dir) = written(
        "[api]\n\
         base_url = \"https://x\"\n\
         organization_id = 1\n\
         token_env = \"LOTSYNC_TEST_TOKEN_UNSET_Z\"\n\
         [daemon]\n\
         settle_secs = 5000\n\
         [[feed]]\n\
         name = \"b\"\n\
         inbox = \"in-b\"\n\
         location_id = 2\n\
         max_sold_fraction = 1.5\n",
    );
    let problems = validate(&path);
    let all = problems.join("\n");
    for (key, said) in [
        (
            "settle_secs",
            "line 6: daemon.settle_secs: 5000 is not between 0 and 3600 seconds",
        ),
        (
            "max_sold_fraction",
            "line 11: feed[0] (\"b\").max_sold_fraction: 1.5 is not a share between 0 and 1",
        ),
    ] {
        let about: Vec<&String> = problems.iter().filter(|p| p.contains(key)).collect();
        assert_eq!(about, [said], "{all}");
    }
    let err = Config::load(&path).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "config {}:\n  line 6: daemon.settle_secs: 5000 is not between 0 and 3600 \
             seconds\n  line 11: feed[0] (\"b\").max_sold_fraction: 1.5 is not a share between 0 and 1",
            path.display()
        )
    );
}

/// A feed is named by its name as the checks after reading name it, but not by a name that
/// is itself refused (nor by the placeholder put in its place).
#[test]
fn a_feed_is_named_by_its_name_unless_that_is_refused() {
    let (path, _dir) = written(
        "[api]\nbase_url = \"https://x\"\norganization_id = 1\n\
         [[feed]]\nname = \"reconcile\"\ninbox = \"in-b\"\nlocation_id = 1\nwatch = \"inotify\"\n\
         [[feed]]\nname = \"b\"\ninbox = \"in-b\"\nlocation_id = 2\nwatch = \"inotify\"\n",
    );
    let problems = validate(&path);
    let all = problems.join("\n");
    for expected in [
        "line 5: feed[0].name: \"reconcile\" is the name the nightly reconciliation uses",
        "line 8: feed[0].watch: unknown variant `inotify`",
        "line 13: feed[1] (\"b\").watch: unknown variant `inotify`",
    ] {
        assert!(
            problems.iter().any(|p| p.starts_with(expected)),
            "{expected:?} not in:\n{all}"
        );
    }
    assert!(!all.contains("\"?\""), "no placeholder shown: {all}");
}
