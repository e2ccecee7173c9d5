//! Fuzzes the XML reader and the mapper behind it: any bytes give records, row problems or one
//! file-level error, never a panic, a hang or unbounded memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lotsync::feed::{self, Format, Item, ReadOptions, Record};
use lotsync::mapper::{Mapper, Profile};

fuzz_target!(|data: &[u8]| {
    let options = ReadOptions {
        format: Some(Format::Xml),
        ..ReadOptions::default()
    };
    let Ok(mut reader) = feed::from_bytes(data, &options) else {
        return;
    };
    let mut mapper = Mapper::new(Profile::auto(), 10);
    let mut record = Record::default();
    loop {
        match reader.next(&mut record) {
            Ok(Item::Record) => {
                let _ = mapper.map(reader.schema(), &record);
            }
            Ok(Item::Problem(_)) => {}
            Ok(Item::End) | Err(_) => break,
        }
    }
});
