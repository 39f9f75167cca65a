//! Pack trailers: `parse_trailer` with an arbitrary pack length, and
//! `read_entries` on the whole input as a pack, raw and with a valid trailer
//! magic spliced in.
//!
//! Input: `pack_len: u64 LE`, then the bytes (the first 12 are the trailer).
#![no_main]

use larder::object::FORMAT_VERSION;
use larder::pack::{self, PACK_MAGIC, TRAILER_LEN};
use larder_fuzz::{check, keys, take_u64};
use libfuzzer_sys::fuzz_target;

const WHAT: &str = "fuzz/pack";

fuzz_target!(|data: &[u8]| {
    let (pack_len, rest) = take_u64(data);
    let trailer = &rest[..rest.len().min(TRAILER_LEN)];
    let r = pack::parse_trailer(WHAT, pack_len, trailer);
    check(WHAT, &r);
    if let Ok((off, hlen)) = r {
        assert_eq!(off + hlen as u64 + TRAILER_LEN as u64, pack_len);
        assert!(hlen as usize >= larder::crypto::SEAL_OVERHEAD + 4);
    }

    check(WHAT, &pack::read_entries(keys(), WHAT, data));

    if data.len() >= TRAILER_LEN {
        let mut pk = data.to_vec();
        let n = pk.len();
        pk[n - 8..n - 2].copy_from_slice(PACK_MAGIC);
        pk[n - 2] = FORMAT_VERSION;
        pk[n - 1] = 0;
        check(WHAT, &pack::read_entries(keys(), WHAT, &pk));
    }
});
