//! Key files: `parse_key_file`, and `try_open` with a passphrase and with an
//! X25519 identity, on the raw bytes and behind a valid clear header.
//!
//! What the reader accepts is checked against the bounds of SPEC.md section 7
//! (written out here): a passphrase key's scrypt parameters have
//! 1 <= log2 N <= 40, r >= 1, p >= 1, memory 128 * r * N <= 256 MiB and work
//! N * r * p <= 2^26, and its body is exactly 104 bytes. The passphrase is
//! only tried on accepted headers of at most `AFFORDABLE_WORK`: the bound
//! allows up to 2^26 (tens of seconds), which would trip `-timeout=10`
//! without being a bug.
#![no_main]

use larder::keys::{self, Credential, KeyKind};
use larder::object::{self, ObjectType};
use larder_fuzz::{PASS, check};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const WHAT: &str = "fuzz/key";
const PASS_BODY_LEN: usize = 104;
const MAX_SCRYPT_MEMORY: u64 = 256 << 20;
const MAX_SCRYPT_WORK: u64 = 1 << 26;
/// N * r * p; the default key is 2^20.
const AFFORDABLE_WORK: u64 = 1 << 18;

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
    let mut affordable = true;
    if let Ok((h, body)) = &r {
        assert!(body.len() < bytes.len());
        if h.kind == KeyKind::Passphrase {
            let (n, r, p) = (h.work_factor, h.scrypt_r as u64, h.scrypt_p as u64);
            assert!((1..=40).contains(&n) && r >= 1 && p >= 1, "{h:?}");
            let big_n = 1u64 << n;
            assert!(128 * r * big_n <= MAX_SCRYPT_MEMORY, "{h:?}");
            assert!(big_n * r * p <= MAX_SCRYPT_WORK, "{h:?}");
            assert_eq!(body.len(), PASS_BODY_LEN);
            affordable = big_n * r * p <= AFFORDABLE_WORK;
        }
    }
    for c in creds() {
        if matches!(c, Credential::Passphrase(_)) && !affordable {
            continue;
        }
        let r = keys::try_open(WHAT, bytes, c);
        check(WHAT, &r);
        assert!(!matches!(r, Ok(Some(_))), "fuzz input opened");
    }
}

fuzz_target!(|data: &[u8]| {
    one(data);
    let mut v = object::header(ObjectType::Key).to_vec();
    v.extend_from_slice(data);
    one(&v);
});
