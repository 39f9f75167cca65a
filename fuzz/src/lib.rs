//! Helpers shared by the fuzz targets: a fixed test key, sealing helpers that
//! get fuzz input past authentication, and the checks every target applies.
//!
//! Every target asserts the same contract as `tests/it/untrusted.rs`: a
//! parser of repository bytes returns `Ok` or an error naming the object it
//! was given; it never panics, and it never allocates more than its
//! documented bound (libFuzzer's `-malloc_limit_mb` enforces the latter).

use larder::crypto::{Keys, MasterKey};
use larder::object::{self, ObjectType};
use std::sync::OnceLock;

/// The fixed master key of the fuzz targets (never a real repository's).
pub const MASTER: [u8; 32] = [0x42; 32];
/// The passphrase tried on fuzzed key files.
pub const PASS: &str = "fuzz passphrase";

/// Keys derived from [`MASTER`].
pub fn keys() -> &'static Keys {
    static K: OnceLock<Keys> = OnceLock::new();
    K.get_or_init(|| Keys::derive(&MasterKey::from_bytes(MASTER)))
}

/// Seals `plain` (a full `plain_len | compression | body` frame) as an object
/// of type `ty` with the fixed key, so the fuzzer reaches the code behind
/// authentication: what a holder of the key could write.
pub fn seal_frame(ty: ObjectType, plain: &[u8]) -> Vec<u8> {
    let hdr = object::header(ty);
    let mut out = hdr.to_vec();
    keys().seal_into(&hdr, plain, &mut out).expect("sealing cannot fail");
    out
}

/// The associated data of a pack header (`"LRDRPK" | version`).
pub fn pack_header_ad() -> [u8; 7] {
    let mut ad = [0u8; 7];
    ad[..6].copy_from_slice(larder::pack::PACK_MAGIC);
    ad[6] = object::FORMAT_VERSION;
    ad
}

/// Asserts the error contract: an error must name `what`.
pub fn check<T>(what: &str, r: &larder::Result<T>) {
    if let Err(e) = r {
        let msg = e.to_string();
        assert!(msg.contains(what), "error does not name {what:?}: {msg}");
    }
}

/// Reads a little-endian u64 from the front of `data` (zero-padded).
pub fn take_u64(data: &[u8]) -> (u64, &[u8]) {
    let mut b = [0u8; 8];
    let n = data.len().min(8);
    b[..n].copy_from_slice(&data[..n]);
    (u64::from_le_bytes(b), &data[n..])
}

/// A fixed dictionary trained once from made-up pages, so blobs with
/// `compression = 2` that name it reach zstd's decompression with it.
pub fn dictionaries() -> &'static larder::dictionary::Dictionaries {
    use larder::dictionary::{Dictionaries, Dictionary, train};
    static D: OnceLock<Dictionaries> = OnceLock::new();
    D.get_or_init(|| {
        let pages: Vec<Vec<u8>> = (0..200u32)
            .map(|i| format!("<html><body><p>page {i} of the larder fuzz corpus, {}</p></body></html>", i * 7919).into_bytes())
            .collect();
        let sizes: Vec<usize> = pages.iter().map(|p| p.len()).collect();
        let z = train(&pages.concat(), &sizes).expect("the fixed samples train");
        let name = larder::id::Id::of_object(&z);
        let d = Dictionary::from_zstd("fuzz/dictionary", name, z).expect("a trained dictionary opens");
        Dictionaries::new(vec![std::sync::Arc::new(d)])
    })
}
