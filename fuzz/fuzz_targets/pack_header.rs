//! Pack headers: `decode_header` and `open_header` on raw bytes, then a whole
//! pack whose validly sealed header holds the fuzz bytes, read with
//! `read_entries`, and every entry it yields opened with `open_blob` (and
//! `open_blob_into` a reused buffer).
//!
//! Input: `data_len: u64 LE` (blob area size for `decode_header`), a 16-bit
//! blob area length, the blob area, then the header plaintext.
#![no_main]

use larder::pack::{self, PACK_MAGIC, TRAILER_LEN};
use larder::object::FORMAT_VERSION;
use larder_fuzz::{check, keys, pack_header_ad, take_u64, dictionaries};
use libfuzzer_sys::fuzz_target;

const WHAT: &str = "fuzz/pack";

fuzz_target!(|data: &[u8]| {
    let k = keys();
    let (data_len, rest) = take_u64(data);

    // 1. The header plaintext decoder on its own.
    let r = pack::decode_header(WHAT, rest, data_len);
    check(WHAT, &r);
    if let Ok(entries) = &r {
        assert!(entries.len() <= pack::MAX_ENTRIES);
        for e in entries {
            assert!(e.offset.checked_add(e.stored_len as u64).is_some_and(|end| end <= data_len));
            assert!(e.plain_len <= pack::MAX_BLOB_PLAIN && e.compression <= 1);
        }
    }

    // 2. Raw bytes as a sealed header: authentication must fail cleanly.
    check(WHAT, &pack::open_header(k, WHAT, rest, data_len));
    // ... and as a header of each older version this larder reads.
    let version = larder::object::OLDEST_READ_VERSION + (data_len % 3) as u8;
    check(WHAT, &pack::open_header_as(k, WHAT, rest, data_len, version));

    // 3. A whole pack around the bytes, header sealed with the right key.
    if rest.len() < 2 {
        return;
    }
    let area = (u16::from_le_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2);
    let (blobs, plain) = rest[2..].split_at(area);
    let mut pk = blobs.to_vec();
    let before = pk.len();
    k.seal_into(&pack_header_ad(), plain, &mut pk).unwrap();
    let hlen = (pk.len() - before) as u32;
    pk.extend_from_slice(&hlen.to_le_bytes());
    pk.extend_from_slice(PACK_MAGIC);
    pk.push(FORMAT_VERSION);
    pk.push(0);
    let r = pack::read_entries(k, WHAT, &pk);
    check(WHAT, &r);
    let Ok(entries) = r else { return };
    assert!(pk.len() >= TRAILER_LEN);
    for e in &entries {
        let stored = &pk[e.offset as usize..(e.offset + e.stored_len as u64) as usize];
        // As stored (authentication fails unless the fuzzer forged a tag).
        check(WHAT, &pack::open_blob(k, dictionaries(), WHAT, e, stored));
        // Resealed under the entry's own type and ID: decompression and the
        // plaintext hash check run on fuzz bytes.
        let resealed = k.seal(&pack::blob_ad(e.ty, &e.id), stored).unwrap();
        let r = pack::open_blob(k, dictionaries(), WHAT, e, &resealed);
        check(WHAT, &r);
        // Into a reused buffer larger than any blob (as a restore's is):
        // the same answer, and nothing left behind on failure.
        let mut reused = vec![0xa5u8; 1 << 21];
        let ri = pack::open_blob_into(k, dictionaries(), WHAT, e, &resealed, &mut reused);
        check(WHAT, &ri);
        match &r {
            Ok(p) => assert_eq!(&reused, p),
            Err(_) => assert!(ri.is_err() && reused.is_empty()),
        }
        if let Ok(p) = r {
            assert_eq!(p.len(), e.plain_len as usize);
            assert_eq!(k.blob_id(&p), e.id);
        }
    }
});
