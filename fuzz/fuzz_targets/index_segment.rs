//! Index segments through `object::open::<IndexSegment>` (and `open_owned`,
//! which readers of segments use): raw bytes, the bytes
//! as a validly sealed frame, and the bytes as a validly sealed stored body
//! (so postcard decoding of `IndexSegment` runs on fuzz input); and the
//! bytes as a body decoded pack by pack (`index::for_each_pack`, which the
//! first open of a large repository uses), which must accept and reject
//! exactly what the whole decode does.
#![no_main]

use larder::index::{IndexSegment, for_each_pack};
use larder::object::{self, ObjectType};
use larder_fuzz::{check, keys, seal_frame};
use libfuzzer_sys::fuzz_target;

const WHAT: &str = "fuzz/index";
const TY: ObjectType = ObjectType::Index;

fuzz_target!(|data: &[u8]| {
    let k = keys();
    check(WHAT, &object::open::<IndexSegment>(k, TY, WHAT, data));
    check(WHAT, &object::open_owned::<IndexSegment>(k, TY, WHAT, data.to_vec()));
    check(WHAT, &object::open::<IndexSegment>(k, TY, WHAT, &seal_frame(TY, data)));

    let mut packs = Vec::new();
    let streamed = for_each_pack(WHAT, data, |p| {
        packs.push(p);
        Ok(())
    });
    check(WHAT, &streamed);
    match (streamed, object::decode::<IndexSegment>(WHAT, data)) {
        (Ok(()), Ok(seg)) => assert_eq!(packs, seg.packs),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (a, b) => panic!("pack by pack: {a:?}; whole: {b:?}"),
    }

    let mut frame = (data.len() as u32).to_le_bytes().to_vec();
    frame.push(0);
    frame.extend_from_slice(data);
    let r = object::open::<IndexSegment>(k, TY, WHAT, &seal_frame(TY, &frame));
    check(WHAT, &r);
    if let Ok(seg) = r {
        let again = object::seal(k, TY, &seg).expect("an accepted segment reseals");
        let back: IndexSegment = object::open(k, TY, WHAT, &again).expect("and reopens");
        assert_eq!(back, seg);
    }
});
