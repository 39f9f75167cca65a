//! Snapshots through `object::open::<Snapshot>`: raw bytes, the bytes as a
//! validly sealed frame, and the bytes as a validly sealed stored body; what
//! decodes is also formatted (its time may be any i64).
#![no_main]

use larder::object::{self, ObjectType};
use larder::snapshot::Snapshot;
use larder_fuzz::{check, keys, seal_frame};
use libfuzzer_sys::fuzz_target;

const WHAT: &str = "fuzz/snapshot";
const TY: ObjectType = ObjectType::Snapshot;

fuzz_target!(|data: &[u8]| {
    let k = keys();
    check(WHAT, &object::open::<Snapshot>(k, TY, WHAT, data));
    check(WHAT, &object::open::<Snapshot>(k, TY, WHAT, &seal_frame(TY, data)));

    let mut frame = (data.len() as u32).to_le_bytes().to_vec();
    frame.push(0);
    frame.extend_from_slice(data);
    let r = object::open::<Snapshot>(k, TY, WHAT, &seal_frame(TY, &frame));
    check(WHAT, &r);
    if let Ok(s) = r {
        let _ = s.time_rfc3339();
        let _ = s.time_local();
        let again = object::seal(k, TY, &s).expect("an accepted snapshot reseals");
        let back: Snapshot = object::open(k, TY, WHAT, &again).expect("and reopens");
        assert_eq!(back, s);
    }
});
