//! LockInfo objects (`locks/<id>`) through `object::open::<LockInfo>`: raw
//! bytes, the bytes as a validly sealed frame, and the bytes as a validly
//! sealed stored body (so postcard decoding runs on fuzz input); what
//! decodes must reseal and reopen to the same value.
#![no_main]

use larder::lock::LockInfo;
use larder::object::{self, ObjectType};
use larder_fuzz::{check, keys, seal_frame};
use libfuzzer_sys::fuzz_target;

const WHAT: &str = "fuzz/lock";
const TY: ObjectType = ObjectType::Lock;

fuzz_target!(|data: &[u8]| {
    let k = keys();
    check(WHAT, &object::open::<LockInfo>(k, TY, WHAT, data));
    check(WHAT, &object::open::<LockInfo>(k, TY, WHAT, &seal_frame(TY, data)));

    let mut frame = (data.len() as u32).to_le_bytes().to_vec();
    frame.push(0);
    frame.extend_from_slice(data);
    let r = object::open::<LockInfo>(k, TY, WHAT, &seal_frame(TY, &frame));
    check(WHAT, &r);
    if let Ok(s) = r {
        let _ = s.describe();
        let _ = s.space();
        let _ = s.lifetime();
        let again = object::seal(k, TY, &s).expect("an accepted object reseals");
        let back: LockInfo = object::open(k, TY, WHAT, &again).expect("and reopens");
        assert_eq!(back, s);
    }
});
