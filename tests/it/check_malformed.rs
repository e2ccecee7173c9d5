//! Malformed exports through the real binary: each gives its documented exit code and message,
//! and none makes lotsync panic. The files are made here, in a fresh folder, so that binary
//! and very large cases need not live in the repository.

use std::path::Path;
use std::process::Command;

const HEADER: &str = "VIN,Stock,Year,Make,Model\n";
const ROW: &str = "1HGCM82633A004352,A1,2019,Honda,Accord\n";

struct Case {
    name: &'static str,
    contents: Vec<u8>,
    exit: i32,
    /// Expected in stderr (exit 2) or stdout (exit 0).
    says: &'static str,
}

fn case(name: &'static str, contents: impl Into<Vec<u8>>, exit: i32, says: &'static str) -> Case {
    Case {
        name,
        contents: contents.into(),
        exit,
        says,
    }
}

fn rows(n: usize) -> String {
    let vins = [
        "1HGCM82633A004352",
        "1M8GDM9AXKP042788",
        "5YJ3E1EA2KF317000",
        "11111111111111111",
    ];
    let mut out = String::from(HEADER);
    for i in 0..n {
        out.push_str(&format!(
            "{},S{i},2019,Honda,Accord\n",
            vins[i % vins.len()]
        ));
    }
    out
}

fn cases() -> Vec<Case> {
    let mut long_line = HEADER.as_bytes().to_vec();
    long_line.extend(b"1HGCM82633A004352,A1,2019,Honda,");
    long_line.extend(std::iter::repeat_n(b'x', 5 * 1024 * 1024));
    long_line.extend(b"\n");

    let mut nul_late = rows(400).into_bytes();
    nul_late.extend(b"1HGCM82633A004352,A\0\0,2019,Honda,Accord\n");

    let mut binary: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
    binary[10] = 0;

    let mut huge_xml = b"<Inventory><Vehicle><VIN>1HGCM82633A004352</VIN><Notes>".to_vec();
    huge_xml.extend(std::iter::repeat_n(b'y', 2 * 1024 * 1024));
    huge_xml.extend(b"</Notes></Vehicle><Vehicle><VIN>2</VIN></Vehicle></Inventory>");

    let deep = format!(
        "<?xml version=\"1.0\"?>{}{}",
        "<a>".repeat(100_000),
        "</a>".repeat(100_000)
    );

    vec![
        case("empty.csv", "", 2, "the file is empty"),
        case("blank-lines.csv", "\n\n  \r\n", 2, "the file is empty"),
        case("header-only.csv", "VIN,Stock\r\n", 2, "no vehicle records"),
        case("header-blanks.csv", "VIN,Stock\r\n\r\n,\r\n \r\n", 2, "no vehicle records"),
        case("binary.csv", binary, 2, "binary data (NUL bytes), not CSV or XML"),
        case("gzip.csv", vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3], 2, "gzip-compressed data"),
        case(
            // Excel's "Unicode Text": UTF-16 with its byte-order mark.
            "utf16.csv",
            [&[0xFF, 0xFE][..], &"VIN,Stock\n1HGCM82633A004352,A1\n".encode_utf16().flat_map(u16::to_le_bytes).collect::<Vec<u8>>()].concat(),
            2,
            "UTF-16 text, which lotsync does not read (save the export as UTF-8",
        ),
        case(
            // The same without the mark.
            "utf16-bare.csv",
            "VIN,Stock\n1HGCM82633A004352,A1\n".encode_utf16().flat_map(u16::to_be_bytes).collect::<Vec<u8>>(),
            2,
            "UTF-16 text",
        ),
        case("zip.csv", b"PK\x03\x04\x14\x00\x00\x00".to_vec(), 2, "a ZIP archive"),
        case("report.pdf", b"%PDF-1.7\n%\xe2\xe3\n".to_vec(), 2, "a PDF document"),
        case(
            "unbalanced-quotes.csv",
            format!("{HEADER}1HGCM82633A004352,\"A1,2019,Honda,Accord\n1M8GDM9AXKP042788,A2,2019,Honda,Accord\n"),
            2,
            "line 2: a quoted field opened here never closes",
        ),
        case(
            "ragged.csv",
            format!("{HEADER}{ROW}1M8GDM9AXKP042788,A2,2019\n5YJ3E1EA2KF317000,A3,2019,Tesla,Model 3,extra\n"),
            0,
            "ragged.csv:3: record: has 3 fields where the header has 5",
        ),
        case("five-mb-line.csv", long_line, 2, "line 2: a record larger than 1024 KiB"),
        case("nul-early.csv", format!("{HEADER}1HGCM\0\0"), 2, "binary data (NUL bytes)"),
        case("nul-late.csv", nul_late, 0, "record: contains a NUL byte"),
        case(
            "invalid-utf8.csv",
            [HEADER.as_bytes(), b"1HGCM82633A004352,A1,2019,Citro\xebn,C5\n"].concat(),
            0,
            "not UTF-8 (first at line 2): read as Windows-1252",
        ),
        case(
            "truncated.csv",
            format!("{HEADER}{ROW}1M8GDM9AXKP042788,A2,20"),
            2,
            "line 3: the last record has 3 of the header's 5 fields and no line break after it: it is incomplete, perhaps still being written",
        ),
        case(
            "no-final-line-break.csv",
            format!("{HEADER}{ROW}1M8GDM9AXKP042788,A2,2019,Honda,Accord"),
            2,
            "line 3: the file ends inside its last record (no line break after it): it is incomplete, perhaps still being written",
        ),
        case(
            // Cut just after a line break inside a quoted last field: every field is there
            // and the file ends with a line break, but the quote is still open.
            "cut-inside-quotes.csv",
            format!("{HEADER}{ROW}1M8GDM9AXKP042788,A2,2019,Honda,\"Accord\nEX"),
            2,
            "line 3: a quoted field opened here never closes",
        ),
        case("cut-after-a-quote.csv", format!("{HEADER}{ROW}\""), 2, "line 3: a quoted field opened here never closes"),
        case("header-cut.csv", "VIN,Stock,Ye", 2, "line 1: the file ends inside its header row (no line break after it)"),
        case(
            "crlf-ending-in-cr.csv",
            format!("{}{}1M8GDM9AXKP042788,A2,2019,Honda,Accord\r", HEADER.replace('\n', "\r\n"), ROW.replace('\n', "\r\n")),
            0,
            "2 records: 2 accepted",
        ),
        case("blank-lines-after.csv", format!("{HEADER}{ROW}\n\r\n  \n  "), 0, "1 records: 1 accepted"),
        case(
            // A trailer row ends with its line break: a short row, not a cut file.
            "trailer-row.csv",
            format!("{HEADER}{ROW}TOTAL,1\n"),
            0,
            "trailer-row.csv:3: record: has 2 fields where the header has 5",
        ),
        case(
            "duplicate-headers.csv",
            "VIN,Stock,Price,Price\n1HGCM82633A004352,A1,23995,23995\n1M8GDM9AXKP042788,A2,100,200\n",
            2,
            "line 3: columns 3 (\"Price\") and 4 (\"Price\") both give price, but differ here (\"100\" and \"200\")",
        ),
        case(
            "duplicate-headers-agree.csv",
            "VIN,Stock,PRICE,Price\n1HGCM82633A004352,A1,23995,23995\n1M8GDM9AXKP042788,A2, 100,100\n",
            0,
            "columns 3 (\"PRICE\") and 4 (\"Price\") both give price and agree on every record: column 3 is used",
        ),
        case(
            "duplicate-vin.csv",
            "VIN,Stock,VIN\n1HGCM82633A004352,A1,1HGCM82633A004352\n1M8GDM9AXKP042788,A2,\n",
            2,
            "line 3: columns 1 (\"VIN\") and 3 (\"VIN\") both give vin, but differ here (\"1M8GDM9AXKP042788\" and \"\")",
        ),
        case(
            // Valid UTF-8 ("ë") and a byte that is not (0xEB) in one file: the record holding
            // it is rejected, whichever comes first, and the file says so once.
            "mixed-encoding.csv",
            [HEADER.as_bytes(), b"1HGCM82633A004352,A1,2019,Citro\xebn,C5\n1M8GDM9AXKP042788,A2,2019,Citro\xc3\xabn,C4\n5YJ3E1EA2KF317000,A3,2019,Tesla,Model \xb3\n"].concat(),
            0,
            "mixed-encoding.csv:2: make: bytes that are not UTF-8 in a file that is otherwise UTF-8 (Citro\\xebn)",
        ),
        case(
            "implausible-price.csv",
            "VIN,Stock,Price,MSRP\n1HGCM82633A004352,A1,0.01,0\n",
            0,
            "implausible-price.csv:2: price: not a plausible price: below 100 (plausible: 100 to 10,000,000); left out (0.01)",
        ),
        case(
            "no-known-headers.csv",
            "Foo,Bar,Baz\n1,2,3\n",
            2,
            "no column for vin: no header lotsync knows for it, and no column whose values are nearly all VINs (looked at \"Foo\" (0% VIN-like), \"Bar\" (0% VIN-like), \"Baz\" (0% VIN-like)); name the VIN's column in a profile",
        ),
        case(
            // Half the values of "Unit" are VINs: named, with the line that would use it, but
            // not used.
            "half-vins.csv",
            "Unit,Stock,Make\n1HGCM82633A004352,A1,Honda\nPENDING,A2,Ford\n1M8GDM9AXKP042788,A3,Ford\nTBD,A4,Kia\n",
            2,
            "looked at \"Unit\" (50% VIN-like)); if \"Unit\" holds the VINs, name it in a profile: [fields] vin = \"Unit\"",
        ),
        case(
            // No header says VIN, but every value of "Unit" is one: it is the VIN.
            "vins-by-value.csv",
            "Unit,Stock,Make\n1HGCM82633A004352,A1,Honda\n1M8GDM9AXKP042788,A3,Ford\n5YJ3E1EA2KF317000,A4,Tesla\n",
            0,
            "vin <- \"Unit\" (by its values: 3 of 3 sampled values (100%))",
        ),
        case(
            "broken.xml",
            "<Inventory><Vehicle><VIN>1HGCM82633A004352</Stock></Vehicle><Vehicle/></Inventory>",
            2,
            "line 1:",
        ),
        case(
            "truncated.xml",
            "<Inventory>\n<Vehicle><VIN>1HGCM82633A004352</VIN><Stock>A1</Stock></Vehicle>\n<Vehicle><VIN>1M8GD",
            2,
            "line 3: the file ends in the middle of a record",
        ),
        case(
            "billion-laughs.xml",
            "<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n <!ENTITY lol \"lol\">\n <!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;\">\n <!ENTITY lol3 \"&lol2;&lol2;&lol2;&lol2;\">\n]>\n<lolz><v><a>&lol3;</a></v><v/></lolz>\n",
            2,
            "a DOCTYPE with entity declarations is refused",
        ),
        case(
            "xxe.xml",
            "<?xml version=\"1.0\"?>\n<!DOCTYPE inv SYSTEM \"file:///etc/passwd\">\n<inv><v><VIN>x</VIN></v><v/></inv>\n",
            2,
            "a DOCTYPE with an external reference is refused",
        ),
        case("deep.xml", deep, 2, "nesting deeper than 64 elements"),
        case("huge-record.xml", huge_xml, 2, "a record larger than 1024 KiB"),
        case(
            "undeclared-entity.xml",
            "<Inventory><Vehicle><VIN>1HGCM82633A004352</VIN><Trim>A&nbsp;B</Trim></Vehicle><Vehicle/></Inventory>",
            2,
            "the entity &nbsp; is not one of XML's own",
        ),
        case(
            "no-records.xml",
            "<Inventory></Inventory>",
            2,
            "no vehicle records",
        ),
    ]
}

fn check(dir: &Path, file: &str) -> (i32, String, String) {
    check_with(dir, &[file, "--location-id", "10"])
}

/// `lotsync check ARGS` in `dir`: exit code, stdout, stderr.
fn check_with(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = lotsync_check(dir, args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn lotsync_check<S: AsRef<std::ffi::OsStr>>(dir: &Path, args: &[S]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lotsync"))
        .current_dir(dir)
        .arg("check")
        .args(args)
        .output()
        .expect("lotsync runs")
}

/// A fresh folder, removed when dropped.
fn fresh_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("lotsync-{name}-"))
        .tempdir()
        .unwrap()
}

/// An export with a header and no vehicle row under it (blank and comma-only lines at most) is
/// an empty feed: ndjson says so on stderr and exits 2, as for any file error, and writes no
/// payload line (the text form prints its summary, then says the same).
#[test]
fn a_header_without_rows_is_refused_in_ndjson_too() {
    let dir_dir = fresh_dir("header-only");
    let dir = dir_dir.path();
    for (name, contents) in [
        ("header.csv", "VIN,Stock,Year\n"),
        ("commas.csv", "VIN,Stock,Year\n\n,,\n ,, \n"),
    ] {
        std::fs::write(dir.join(name), contents).unwrap();
        let args = [name, "--location-id", "10", "--format", "ndjson"];
        let (code, stdout, stderr) = check_with(dir, &args);
        assert_eq!(code, 2, "{name}: stdout {stdout:?} stderr {stderr:?}");
        assert_eq!(stdout, "", "{name}");
        let said: serde_json::Value = serde_json::from_str(stderr.trim()).unwrap();
        assert_eq!(said["file"], name, "{stderr}");
        assert!(
            said["error"]
                .as_str()
                .unwrap()
                .contains("no vehicle records"),
            "{stderr}"
        );
        let (code, stdout, stderr) = check_with(dir, &args[..3]);
        assert_eq!(code, 2, "{name}: {stdout} {stderr}");
        assert!(stdout.contains("0 records"), "{stdout}");
        assert!(stderr.contains("no vehicle records"), "{stderr}");
    }
}

#[test]
fn every_malformed_file_gets_its_exit_code_and_message() {
    let dir_dir = fresh_dir("malformed");
    let dir = dir_dir.path().to_owned();
    let cases = cases();
    assert!(cases.len() >= 20);
    for c in &cases {
        std::fs::write(dir.join(c.name), &c.contents).unwrap();
        let (code, stdout, stderr) = check(&dir, c.name);
        assert!(!stderr.contains("panicked"), "{}: {stderr}", c.name);
        assert_eq!(code, c.exit, "{}: stdout {stdout} stderr {stderr}", c.name);
        let said = if c.exit == 2 { &stderr } else { &stdout };
        assert!(
            said.contains(c.says),
            "{}: expected {:?} in\n{said}",
            c.name,
            c.says
        );
        if c.exit == 2 {
            // One line naming the file and why.
            assert_eq!(stderr.lines().count(), 1, "{}: {stderr}", c.name);
            assert!(
                stderr.starts_with(&format!("{}: cannot be read: ", c.name)),
                "{stderr}"
            );
        }
    }
}

#[test]
fn a_link_out_of_the_folder_is_refused_and_one_inside_is_read() {
    let outside_dir = fresh_dir("outside");
    let outside = outside_dir.path().to_owned();
    let inbox_dir = fresh_dir("inbox");
    let inbox = inbox_dir.path().to_owned();
    std::fs::write(outside.join("secret.csv"), rows(1)).unwrap();
    std::fs::write(inbox.join("real.csv"), rows(1)).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.csv"), inbox.join("link-out.csv")).unwrap();
    std::os::unix::fs::symlink(inbox.join("real.csv"), inbox.join("link-in.csv")).unwrap();

    let (code, _, stderr) = check(&inbox, "link-out.csv");
    assert_eq!(code, 2);
    assert!(stderr.contains("a symbolic link to"), "{stderr}");
    assert!(
        stderr.contains("lotsync reads only files in the folder itself"),
        "{stderr}"
    );
    let (code, stdout, _) = check(&inbox, "link-in.csv");
    assert_eq!(code, 0);
    assert!(stdout.contains("1 accepted"), "{stdout}");
}

/// One unreadable file among good ones: the good ones are still reported, the exit is 2.
#[test]
fn a_bad_file_does_not_hide_the_good_ones() {
    let dir_dir = fresh_dir("mixed");
    let dir = dir_dir.path().to_owned();
    std::fs::write(dir.join("good.csv"), rows(3)).unwrap();
    std::fs::write(dir.join("bad.csv"), "").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lotsync"))
        .current_dir(&dir)
        .args(["check", "bad.csv", "good.csv"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("good.csv: CSV"), "{stdout}");
    assert!(stdout.contains("no --location-id: vehicles get the placeholder location 0"));
}

/// A file cut in the middle of its last record is incomplete; a profile for a DMS that never
/// ends its last line accepts a last record with every field, and still not one cut short.
#[test]
fn a_dms_that_never_ends_its_last_line_is_named_in_its_profile() {
    let dir_dir = fresh_dir("no-final-newline");
    let dir = dir_dir.path().to_owned();
    std::fs::write(
        dir.join("no-newline.toml"),
        "description = \"DMS without a final line break\"\nends_without_newline = true\n",
    )
    .unwrap();
    let whole = format!("{HEADER}{ROW}1M8GDM9AXKP042788,A2,2019,Honda,\"Accord\"");
    std::fs::write(dir.join("whole.csv"), &whole).unwrap();
    std::fs::write(
        dir.join("short.csv"),
        format!("{HEADER}{ROW}1M8GDM9AXKP042788,A2,20"),
    )
    .unwrap();
    std::fs::write(
        dir.join("open-quote.csv"),
        format!("{HEADER}{ROW}1M8GDM9AXKP042788,A2,2019,Honda,\"Acc"),
    )
    .unwrap();
    let profile = ["--profile", "no-newline.toml", "--location-id", "10"];

    let (code, _, stderr) = check_with(&dir, &["whole.csv", "--location-id", "10"]);
    assert_eq!(code, 2, "without the profile key: {stderr}");
    assert!(
        stderr.contains("set ends_without_newline = true in the profile"),
        "{stderr}"
    );

    let (code, stdout, stderr) = check_with(&dir, &[&["whole.csv"][..], &profile].concat());
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("2 records: 2 accepted"), "{stdout}");

    let (code, _, stderr) = check_with(&dir, &[&["short.csv"][..], &profile].concat());
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        "short.csv: cannot be read: line 3: the last record has 3 of the header's 5 fields: \
         it is incomplete, perhaps still being written\n"
    );
    let (code, _, stderr) = check_with(&dir, &[&["open-quote.csv"][..], &profile].concat());
    assert_eq!(code, 2);
    assert!(
        stderr.contains("line 3: a quoted field opened here never closes"),
        "{stderr}"
    );
}

/// Two columns named alike are compared on every record; a profile picks one by its number.
#[test]
fn a_profile_names_one_of_two_same_named_columns_by_number() {
    let dir_dir = fresh_dir("column-number");
    let dir = dir_dir.path().to_owned();
    std::fs::write(
        dir.join("twins.csv"),
        "VIN,Stock,Price,Price\n1HGCM82633A004352,A1,23995,21995\n",
    )
    .unwrap();
    std::fs::write(dir.join("second-price.toml"), "[fields]\nprice = \"#4\"\n").unwrap();

    let (code, _, stderr) = check_with(&dir, &["twins.csv", "--location-id", "10"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains(
            "name the one to use in a profile: [fields] price = \"#3\" or price = \"#4\""
        ),
        "{stderr}"
    );

    let args = [
        "twins.csv",
        "--profile",
        "second-price.toml",
        "--location-id",
        "10",
    ];
    let (code, stdout, stderr) = check_with(&dir, &args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("price <- \"Price\" (column 4)"), "{stdout}");
    let (code, stdout, _) = check_with(&dir, &[&args[..], &["--format", "ndjson"]].concat());
    assert_eq!(code, 0);
    let body: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(body["price"]["selling"], 21995);

    std::fs::write(
        dir.join("no-such-column.toml"),
        "[fields]\nprice = \"#9\"\n",
    )
    .unwrap();
    let args = [
        "twins.csv",
        "--profile",
        "no-such-column.toml",
        "--location-id",
        "10",
    ];
    let (_, stdout, _) = check_with(&dir, &args);
    assert!(
        stdout.contains("the profile reads price from \"#9\", which this file does not have"),
        "{stdout}"
    );
}

/// A file of UTF-8 and bytes that are not: every record holding such bytes is rejected
/// (before or after the first valid character), the others are read as UTF-8, and the file
/// says it once.
#[test]
fn a_mixed_file_rejects_the_records_that_are_not_utf8() {
    let dir_dir = fresh_dir("mixed");
    let dir = dir_dir.path().to_owned();
    std::fs::write(
        dir.join("mixed.csv"),
        [
            HEADER.as_bytes(),
            b"1HGCM82633A004352,A1,2019,Citro\xebn,C5\n",
            b"1M8GDM9AXKP042788,A2,2019,Citro\xc3\xabn,C4\n",
            b"5YJ3E1EA2KF317000,A3,2019,Tesla,Model \xb3\n",
        ]
        .concat(),
    )
    .unwrap();
    let (code, stdout, _) = check_with(&dir, &["mixed.csv", "--location-id", "10"]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("3 records: 1 accepted, 2 rejected"),
        "{stdout}"
    );
    assert!(
        stdout.contains("mixed.csv:4: model: bytes that are not UTF-8 in a file that is otherwise UTF-8 (Model \\xb3)"),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("otherwise UTF-8 (first at line 2)").count(),
        1,
        "{stdout}"
    );
    assert!(!stdout.contains("Windows-1252"), "{stdout}");
    let (_, stdout, stderr) = check_with(
        &dir,
        &["mixed.csv", "--location-id", "10", "--format", "ndjson"],
    );
    let body: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(body["make"], "Citroën");
    // A rejected record still names its vehicle: it stays on the lot.
    assert!(stderr.contains("\"line\":2"), "{stderr}");
}

/// Names and values from the export, and the file's own name, reach the terminal escaped: no
/// control character of theirs is printed raw.
#[test]
fn names_and_values_from_outside_are_escaped_in_the_text_report() {
    let dir_dir = fresh_dir("escapes");
    let dir = dir_dir.path().to_owned();
    let name = "in\nbox\u{1b}[2J.csv";
    std::fs::write(
        dir.join(name),
        [
            b"VIN,Stock,Ext. Color,Fuel,Trim,Notes\x1b[1m\n".as_slice(),
            b"1HGCM82633A004352,A1,Hydro Shimmer\x1b[31m,\"Gas\x07\nline two\",\xc3\xa9,x\n",
            b"1M8GDM9AXKP042788,A2,Blue,Gas,\"EX\nL\xff\",y\n",
        ]
        .concat(),
    )
    .unwrap();
    std::fs::write(dir.join("empty\x1b[31m.csv"), "").unwrap();
    let out = lotsync_check(&dir, &[name, "empty\x1b[31m.csv", "--location-id", "10"]);
    assert_eq!(out.status.code(), Some(2));
    for (what, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let raw: Vec<u8> = bytes
            .iter()
            .copied()
            .filter(|&b| (b < 0x20 && b != b'\n') || b == 0x7f)
            .collect();
        assert!(
            raw.is_empty(),
            "{what} holds {raw:?}:\n{}",
            String::from_utf8_lossy(bytes)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.starts_with("in\\nbox\\u{1b}[2J.csv: CSV"),
        "{stdout}"
    );
    assert!(stdout.contains("(Hydro Shimmer\\u{1b}[31m)"), "{stdout}");
    assert!(stdout.contains("(Gas\\u{7} line two)"), "{stdout}");
    assert!(stdout.contains("(EX\\nL\\xff)"), "{stdout}");
    assert!(stdout.contains("\"Notes\\u{1b}[1m\""), "{stdout}");
    assert_eq!(
        stderr,
        "empty\\u{1b}[31m.csv: cannot be read: the file is empty\n"
    );
}

/// A European spreadsheet save (`;`, BOM, decimal comma, `.` thousands, CRLF) through
/// the real `lotsync check`: every number as written, whole (`1,5` was sent as 1.0, `21.880` as
/// 22 miles, `1,5L I4` as 5.0 litres), and a 17-character VIN under a `VIN/Serial` header gets
/// the check digit (a typo there used to pass).
#[test]
fn a_european_save_reads_every_number_whole() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let file = dir.path().join("bestand.csv");
    let rows = [
        "VIN/Serial;Stock;Year;Make;Model;Odometer;Price;Engine Size;Engine",
        "WBA8E9C510GK64378;E1;2019;BMW;320i;21.880;22.689,00;1,5;1,5L I4",
        "WVWZZZ1K8Z6W12345;E2;2018;Volkswagen;Golf;100.000;9.990,50;5,7;",
        "1FTFW1E590MFA1234;E3;2021;Ford;F-150;7,5;38.950;;3,5L V6",
        "2T1BURHE01JC04321;E4;2018;Toyota;Corolla;45.123;15.000;;",
    ];
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(rows.join("\r\n").into_bytes());
    bytes.extend(b"\r\n");
    std::fs::write(&file, bytes).expect("write the export");
    let out = Command::new(env!("CARGO_BIN_EXE_lotsync"))
        .arg("check")
        .arg(&file)
        .args(["--location-id", "10", "--format", "ndjson"])
        .output()
        .expect("lotsync runs");
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    let stderr = String::from_utf8(out.stderr).expect("stderr is UTF-8");
    let payloads: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one payload a line"))
        .collect();
    let by_stock = |stock: &str| {
        payloads
            .iter()
            .find(|p| p["stock"] == stock)
            .unwrap_or_else(|| panic!("{stock} accepted\n{stdout}\n{stderr}"))
    };
    let e1 = by_stock("E1");
    assert_eq!(e1["miles"], 21880, "{e1}");
    assert_eq!(e1["price"]["selling"], 22689.0, "{e1}");
    assert_eq!(e1["engine_displacement"], 1.5, "{e1}");
    assert_eq!(e1["engine_cylinders"], 4, "{e1}");
    let e2 = by_stock("E2");
    assert_eq!(e2["miles"], 100_000, "{e2}");
    assert_eq!(e2["price"]["selling"], 9990.5, "{e2}");
    assert_eq!(e2["engine_displacement"], 5.7, "{e2}");
    let e3 = by_stock("E3");
    assert_eq!(e3["miles"], 8, "{e3}");
    assert_eq!(e3["price"]["selling"], 38950.0, "{e3}");
    assert_eq!(e3["engine_displacement"], 3.5, "{e3}");
    // E4's check digit is mistyped (0 is right): refused, with the reason.
    assert!(payloads.iter().all(|p| p["stock"] != "E4"), "{stdout}");
    assert!(
        stderr.contains("check digit") && stderr.contains("\"line\":5"),
        "{stderr}"
    );
}
