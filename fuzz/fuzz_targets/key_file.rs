//! Key files: `parse_key_file`, and `try_open` with a passphrase and with an
//! X25519 identity, on the raw bytes and behind a valid clear header.
#![no_main]

use larder::keys::{self, Credential, MAX_WORK_FACTOR};
use larder::object::{self, ObjectType};
use larder_fuzz::{PASS, check};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const WHAT: &str = "fuzz/key";

fn creds() -> &'static [Credential; 2] {
    static C: OnceLock<[Credential; 2]> = OnceLock::new();
    C.get_or_init(|| {
        [
            Credential::passphrase(PASS),
            Credential::Identity(Box::new(age::x25519::Identity::generate())),
        ]
    })
}

fn one(bytes: &[u8]) {
    let r = keys::parse_key_file(WHAT, bytes);
    check(WHAT, &r);
    if let Ok((h, ct)) = &r {
        assert!(h.work_factor <= MAX_WORK_FACTOR);
        assert!(ct.len() < bytes.len());
    }
    for c in creds() {
        let r = keys::try_open(WHAT, bytes, c);
        check(WHAT, &r);
    }
}

fuzz_target!(|data: &[u8]| {
    one(data);
    let mut v = object::header(ObjectType::Key).to_vec();
    v.extend_from_slice(data);
    one(&v);
});
