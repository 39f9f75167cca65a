//! Mark objects (`marks/<id>`) through `object::open::<Mark>`: raw
//! bytes, the bytes as a validly sealed frame, and the bytes as a validly
//! sealed stored body (so postcard decoding runs on fuzz input); what
//! decodes must reseal and reopen to the same value.
#![no_main]

use larder::index::marks::Mark;
use larder::object::{self, ObjectType};
use larder_fuzz::{check, keys, seal_frame};
use libfuzzer_sys::fuzz_target;

const WHAT: &str = "fuzz/mark";
const TY: ObjectType = ObjectType::Mark;

fuzz_target!(|data: &[u8]| {
    let k = keys();
    check(WHAT, &object::open::<Mark>(k, TY, WHAT, data));
    check(WHAT, &object::open::<Mark>(k, TY, WHAT, &seal_frame(TY, data)));

    let mut frame = (data.len() as u32).to_le_bytes().to_vec();
    frame.push(0);
    frame.extend_from_slice(data);
    let r = object::open::<Mark>(k, TY, WHAT, &seal_frame(TY, &frame));
    check(WHAT, &r);
    if let Ok(s) = r {
        let again = object::seal(k, TY, &s).expect("an accepted object reseals");
        let back: Mark = object::open(k, TY, WHAT, &again).expect("and reopens");
        assert_eq!(back, s);
    }
});
