//! What every fuzz target does: read all records of one format, map each one.

use lotsync::feed::{self, Format, Item, ReadOptions, Record};
use lotsync::mapper::{Mapper, Profile};

/// Any bytes give records, row problems or one file-level error: never a panic, a hang or
/// unbounded memory.
pub fn read_and_map(data: &[u8], format: Format) {
    let options = ReadOptions {
        format: Some(format),
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
}
