//! Parse + map of a whole export, as `lotsync check` does before writing anything, and the
//! floor it is measured against (a raw scan): shared by the `ingest` benchmark and
//! `examples/check_bench.rs`, so that both time the same things.

use lotsync::feed::{self, Item, ReadOptions, Record};
use lotsync::mapper::{Mapped, Mapper, Profile};
use std::hint::black_box;
use std::path::Path;

/// Reads, detects, decodes and maps every record of `path`; the number accepted.
pub fn parse_and_map(path: &Path) -> u64 {
    let mut reader = feed::open(path, &ReadOptions::default()).expect("the generated export opens");
    let mut mapper = Mapper::new(Profile::auto(), 10);
    let mut record = Record::default();
    let mut accepted = 0;
    loop {
        match reader
            .next(&mut record)
            .expect("the generated export reads")
        {
            Item::End => return accepted,
            Item::Problem(_) => {}
            Item::Record => {
                if let Mapped::Accepted(a) = mapper.map(reader.schema(), &record) {
                    black_box(&a.payload);
                    accepted += 1;
                }
            }
        }
    }
}

/// The floor: the csv crate reading every record as bytes, nothing else.
pub fn raw_scan(path: &Path) -> u64 {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_path(path)
        .expect("open");
    let mut record = csv::ByteRecord::new();
    let mut n = 0;
    while reader.read_byte_record(&mut record).expect("read") {
        n += record.len() as u64;
    }
    n
}
