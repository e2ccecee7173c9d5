//! Every link between the README and the documents under `docs/` leads somewhere: the file
//! exists, and an `#anchor` names one of its headings (as GitHub spells heading anchors).
//! Images too (`![alt](file)`, `<img src="file">`): the file exists and is the picture its
//! name says (an SVG document, a PNG). Links to the web are not fetched.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn documents(root: &Path) -> Vec<PathBuf> {
    let mut found = vec![
        root.join("README.md"),
        root.join("CHANGELOG.md"),
        root.join("systemd/README.md"),
    ];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The text outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// GitHub's anchor of a heading: lower case, punctuation dropped but `-` and `_`, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .into_iter()
        .filter_map(|line| {
            let hashes = line.len() - line.trim_start_matches('#').len();
            (1..=6)
                .contains(&hashes)
                .then(|| line[hashes..].strip_prefix(' '))
                .flatten()
                .map(anchor)
        })
        .collect()
}

/// The targets of `[text](target)` links and `![alt](image)` images on a line, and of
/// HTML `src="image"` attributes (inline code spans skipped).
fn links(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'`' => in_code = !in_code,
            b's' if !in_code && line[i..].starts_with("src=\"") => {
                if let Some(end) = line[i + 5..].find('"') {
                    out.push(line[i + 5..i + 5 + end].to_owned());
                    i += 5 + end;
                }
            }
            b']' if !in_code && bytes.get(i + 1) == Some(&b'(') => {
                if let Some(end) = line[i + 2..].find(')') {
                    out.push(line[i + 2..i + 2 + end].to_owned());
                    i += 2 + end;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

#[test]
fn every_link_between_the_documents_leads_somewhere() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut broken = Vec::new();
    let (mut checked, mut pictures) = (0, 0);
    for doc in documents(root) {
        let text = std::fs::read_to_string(&doc).expect("a readable document");
        for (n, line) in prose(&text).into_iter().enumerate() {
            for target in links(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                pictures += usize::from(target.ends_with(".svg") || target.ends_with(".png"));
                let (file, fragment) = match target.split_once('#') {
                    Some((file, fragment)) => (file, Some(fragment)),
                    None => (target.as_str(), None),
                };
                let dir = doc.parent().expect("a document is in a folder");
                let path = if file.is_empty() {
                    doc.clone()
                } else {
                    dir.join(file)
                };
                let shown = format!(
                    "{} (prose line {}): {target}",
                    doc.strip_prefix(root).unwrap_or(&doc).display(),
                    n + 1
                );
                if !path.exists() {
                    broken.push(format!("{shown}: no such file"));
                    continue;
                }
                if let Some(wrong) = not_the_picture_named(&path) {
                    broken.push(format!("{shown}: {wrong}"));
                    continue;
                }
                if let Some(fragment) = fragment {
                    let target_text = std::fs::read_to_string(&path).unwrap_or_default();
                    if !anchors(&target_text).contains(fragment) {
                        broken.push(format!("{shown}: no heading with that anchor"));
                    }
                }
            }
        }
    }
    assert!(
        checked >= 20,
        "only {checked} links found: is the parser right?"
    );
    assert!(pictures >= 1, "no picture found: the pace's plot is one");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Why a file named as a picture is not one; None for a picture, or a file of another kind.
fn not_the_picture_named(path: &Path) -> Option<String> {
    let kind = path.extension()?.to_str()?.to_ascii_lowercase();
    let bytes = std::fs::read(path).unwrap_or_default();
    match kind.as_str() {
        "svg" => {
            let text = String::from_utf8_lossy(&bytes);
            let whole =
                text.trim_start().starts_with("<svg") && text.trim_end().ends_with("</svg>");
            (!whole).then(|| "not a whole SVG document".to_owned())
        }
        "png" => (!bytes.starts_with(b"\x89PNG\r\n\x1a\n")).then(|| "not a PNG".to_owned()),
        _ => None,
    }
}

#[test]
fn the_checker_sees_a_broken_link_and_a_good_anchor() {
    assert_eq!(
        links("see [a](b.md#c) and `[x](y)` and [d](e)"),
        ["b.md#c", "e"]
    );
    assert_eq!(
        links(r#"![plot](pace.svg) and <img src="diagram.png" alt="x"> and `<img src="no">`"#),
        ["pace.svg", "diagram.png"]
    );
    let dir = std::env::temp_dir().join(format!("lotsync-docs-links-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (good, cut) = (dir.join("good.svg"), dir.join("cut.svg"));
    std::fs::write(&good, "<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>\n").unwrap();
    std::fs::write(&cut, "<svg xmlns=\"http://www.w3.org/2000/svg\"><line").unwrap();
    assert_eq!(not_the_picture_named(&good), None);
    assert!(not_the_picture_named(&cut).is_some());
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        anchor("Checking an export: `lotsync check`"),
        "checking-an-export-lotsync-check"
    );
    assert!(anchors("# Title\n```\n# not a heading\n```\n## Two words\n").contains("two-words"));
    assert!(!anchors("```\n# not a heading\n```\n").contains("not-a-heading"));
}

/// The README is what a newcomer reads first: what lotsync is, the two commands, install, a
/// first feed, day to day and where the rest is, in at most 120 lines; the history is the
/// changelog's.
#[test]
fn the_readme_is_short_and_names_its_two_commands() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 120, "README.md has {lines} lines; at most 120");
    for command in ["cargo run --release -- demo", "cargo test"] {
        assert!(
            readme.contains(command),
            "README.md does not name `{command}`"
        );
    }
}
