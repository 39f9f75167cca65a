//! Sealed objects (config, index segment, snapshot, lock, deletion mark): `check_header`,
//! `open`, and, behind a valid seal, `unframe`, `decompress_exact`, `decode`.
//!
//! Input: a selector byte (object type, and a declared length for
//! `decompress_exact`), then the object bytes.
#![no_main]

use larder::index::IndexSegment;
use larder::index::marks::Mark;
use larder::lock::LockInfo;
use larder::object::{self, ObjectType};
use larder::repository::Config;
use larder::snapshot::Snapshot;
use larder_fuzz::{check, keys, seal_frame};
use libfuzzer_sys::fuzz_target;

const WHAT: &str = "fuzz/object";
const TYPES: [ObjectType; 5] = [
    ObjectType::Config,
    ObjectType::Index,
    ObjectType::Snapshot,
    ObjectType::Lock,
    ObjectType::Mark,
];

fn open_as(ty: ObjectType, bytes: &[u8]) {
    let k = keys();
    match ty {
        ObjectType::Config => check(WHAT, &object::open::<Config>(k, ty, WHAT, bytes)),
        ObjectType::Index => check(WHAT, &object::open::<IndexSegment>(k, ty, WHAT, bytes)),
        ObjectType::Snapshot => check(WHAT, &object::open::<Snapshot>(k, ty, WHAT, bytes)),
        ObjectType::Lock => check(WHAT, &object::open::<LockInfo>(k, ty, WHAT, bytes)),
        ObjectType::Mark => check(WHAT, &object::open::<Mark>(k, ty, WHAT, bytes)),
        ObjectType::Key | ObjectType::Dict => {}
    }
}

fn decode_as(ty: ObjectType, body: &[u8]) {
    match ty {
        ObjectType::Config => check(WHAT, &object::decode::<Config>(WHAT, body)),
        ObjectType::Index => check(WHAT, &object::decode::<IndexSegment>(WHAT, body)),
        ObjectType::Snapshot => check(WHAT, &object::decode::<Snapshot>(WHAT, body)),
        ObjectType::Lock => check(WHAT, &object::decode::<LockInfo>(WHAT, body)),
        ObjectType::Mark => check(WHAT, &object::decode::<Mark>(WHAT, body)),
        ObjectType::Key | ObjectType::Dict => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let ty = TYPES[(sel % 5) as usize];

    // 1. Raw bytes as read from storage: header checks, then authentication.
    check(WHAT, &object::check_header(WHAT, ty, rest));
    open_as(ty, rest);

    // 2. The bytes as the plaintext frame of a validly sealed object: what a
    //    key holder could write. Exercises unframe, decompression and decode.
    check(WHAT, &object::unframe(WHAT, rest));
    open_as(ty, &seal_frame(ty, rest));

    // 3. The bytes as a zstd frame with a declared length (up to 4 MiB).
    let declared = ((sel as usize) / 5) << 16;
    let r = object::decompress_exact(WHAT, rest, declared);
    check(WHAT, &r);
    if let Ok(out) = &r {
        assert_eq!(out.len(), declared);
    }

    // 4. The bytes as a postcard body.
    decode_as(ty, rest);
});
