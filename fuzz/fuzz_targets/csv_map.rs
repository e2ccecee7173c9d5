//! Fuzzes the CSV reader and the mapper behind it.
#![no_main]

#[path = "drive.rs"]
mod drive;

libfuzzer_sys::fuzz_target!(|data: &[u8]| drive::read_and_map(data, lotsync::feed::Format::Csv));
