//! Dictionary objects (`dicts/<id>`) through `dictionary::Dictionary::open`:
//! raw bytes, the bytes as a validly sealed frame, the bytes as a validly
//! sealed stored body (so postcard decoding runs on fuzz input), and the
//! bytes as the zstd dictionary inside a well-formed body (so the
//! dictionary checks run behind authentication); then the bytes as zstd
//! dictionary content through `Dictionary::from_zstd`. What is accepted
//! must hold a bounded dictionary with a non-zero ID, and reseal and
//! reopen to the same dictionary.
#![no_main]

use larder::dictionary::{Dictionary, MAX_DICT_LEN};
use larder::id::Id;
use larder::object::{self, ObjectType};
use larder_fuzz::{check, keys, seal_frame};
use libfuzzer_sys::fuzz_target;

const WHAT: &str = "fuzz/dictionary";
const TY: ObjectType = ObjectType::Dict;

/// Opens `stored` as a dictionary object named by the hash of its bytes
/// (as a reader names one it lists), and checks what is accepted.
fn open(stored: &[u8]) {
    let name = Id::of_object(stored);
    let r = Dictionary::open(keys(), WHAT, name, stored);
    check(WHAT, &r);
    if let Ok(d) = r {
        assert_eq!(d.name(), name);
        accepted(&d);
        let (again_name, again) = Dictionary::seal(keys(), d.bytes())
            .expect("an accepted dictionary reseals");
        assert_eq!(again_name, Id::of_object(&again));
        let back = Dictionary::open(keys(), WHAT, again_name, &again).expect("and reopens");
        assert_eq!(back.bytes(), d.bytes());
        assert_eq!(back.zstd_id(), d.zstd_id());
    }
}

/// What every accepted dictionary satisfies (SPEC.md, "Dictionaries").
fn accepted(d: &Dictionary) {
    let b = d.bytes();
    assert_ne!(d.zstd_id(), 0, "dictionary ID 0 accepted");
    assert!(b.len() >= 8, "dictionary of {} bytes accepted", b.len());
    assert!(b.len() <= MAX_DICT_LEN, "dictionary of {} bytes accepted", b.len());
    assert_eq!(&b[..4], &[0x37, 0xa4, 0x30, 0xec][..], "bad magic accepted");
    assert_eq!(u32::from_le_bytes([b[4], b[5], b[6], b[7]]), d.zstd_id());
}

/// `plain_len | compression 0 | body`: a raw (uncompressed) object frame.
fn raw_frame(body: &[u8]) -> Vec<u8> {
    let mut frame = (body.len() as u32).to_le_bytes().to_vec();
    frame.push(0);
    frame.extend_from_slice(body);
    frame
}

fuzz_target!(|data: &[u8]| {
    open(data);
    open(&seal_frame(TY, data));
    open(&seal_frame(TY, &raw_frame(data)));

    // `DictionaryObject { zstd: data }`: postcard writes a Vec<u8> as its
    // varint length and the bytes, the same as the struct's one field.
    let body = object::encode(&data).expect("encoding cannot fail");
    open(&seal_frame(TY, &raw_frame(&body)));

    let name = Id::of_object(data);
    let r = Dictionary::from_zstd(WHAT, name, data.to_vec());
    check(WHAT, &r);
    if let Ok(d) = r {
        accepted(&d);
        assert_eq!(d.bytes(), data);
        assert_eq!(d.name(), name);
    }
});
