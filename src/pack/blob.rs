//! Single blobs: compressing and sealing one blob for a pack (with a
//! reused zstd context per thread, with or without the repository's
//! dictionary), and opening and verifying one read back.
//! Each blob is sealed with associated data `type | id`, so a blob cannot be
//! swapped for another.

use super::{BlobType, MAX_BLOB_PLAIN, PackEntry};
use crate::crypto::{Keys, SEAL_OVERHEAD};
use crate::dictionary::{DictSource, Dictionary, frame_dict_id, suits};
use crate::error::{Error, Result};
use crate::id::Id;

/// Associated data of a blob: its type byte and ID.
pub fn blob_ad(ty: BlobType, id: &Id) -> [u8; 33] {
    let mut ad = [0u8; 33];
    ad[0] = ty as u8;
    ad[1..].copy_from_slice(&id.0);
    ad
}

/// A blob compressed and sealed, ready to append to a pack.
pub struct PreparedBlob {
    pub ty: BlobType,
    pub id: Id,
    pub plain_len: u32,
    pub compression: u8,
    pub stored: Vec<u8>,
}

/// Compresses (when that helps) and seals one blob. `compressor` is reused
/// by the caller (one per worker thread); `None` stores raw.
pub fn prepare_blob(
    keys: &Keys,
    compressor: Option<&mut zstd::bulk::Compressor<'static>>,
    ty: BlobType,
    id: Id,
    plain: &[u8],
) -> Result<PreparedBlob> {
    prepare_as(keys, compressor.map(|c| (c, 1)), ty, id, plain)
}

thread_local! {
    /// A sealing thread's buffer for the compressed bytes of one blob.
    static COMPRESSED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The largest scratch buffer kept between blobs (a chunk's compress
/// bound; a larger tree blob's buffer is let go).
const SCRATCH_KEPT: usize = 2 << 20;

/// [`prepare_blob`] with the compression code the compressor's output gets:
/// 1 for plain zstd, 2 for zstd with a repository dictionary.
fn prepare_as(
    keys: &Keys,
    compressor: Option<(&mut zstd::bulk::Compressor<'static>, u8)>,
    ty: BlobType,
    id: Id,
    plain: &[u8],
) -> Result<PreparedBlob> {
    if plain.len() > MAX_BLOB_PLAIN as usize {
        return Err(Error::Internal(format!(
            "blob {id} of {} bytes exceeds the {MAX_BLOB_PLAIN}-byte limit",
            plain.len()
        )));
    }
    let ad = blob_ad(ty, &id);
    let mut stored = Vec::new();
    let mut compression = 0u8;
    if let Some((c, code)) = compressor {
        // The compressed bytes go to this thread's scratch buffer, kept
        // between blobs: a buffer allocated and freed per blob had its
        // pages handed back to the kernel and faulted in again each time
        // (a cold backup of the benchmark tree: 95 k page faults before,
        // 75 k after).
        COMPRESSED.with_borrow_mut(|buf| -> Result<()> {
            buf.clear();
            buf.reserve(zstd::zstd_safe::compress_bound(plain.len()));
            if c.compress_to_buffer(plain, buf).is_ok() && buf.len() < plain.len() {
                stored.reserve_exact(buf.len() + SEAL_OVERHEAD);
                keys.seal_into(&ad, buf, &mut stored)?;
                compression = code;
            }
            if buf.capacity() > SCRATCH_KEPT {
                *buf = Vec::new();
            }
            Ok(())
        })?;
    }
    if compression == 0 {
        stored.reserve_exact(plain.len() + SEAL_OVERHEAD);
        keys.seal_into(&ad, plain, &mut stored)?;
    }
    Ok(PreparedBlob {
        ty,
        id,
        plain_len: plain.len() as u32,
        compression,
        stored,
    })
}

/// Names a blob in a pack for errors: `blob ID in PACK-PATH`. Built for
/// every blob opened, it is formatted only when an error names it (a
/// restore formatting each blob's name spent about 1 % of its CPU on it).
pub struct BlobIn<'a> {
    /// The blob's ID.
    pub id: &'a Id,
    /// The pack's path in the repository.
    pub pack: &'a str,
}

impl std::fmt::Display for BlobIn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "blob {} in {}", self.id, self.pack)
    }
}

/// Decrypts, decompresses and verifies one stored blob against its entry.
/// The plaintext is re-hashed with the keyed ID function before it is
/// returned. `dicts` is asked only for a blob compressed with a dictionary.
pub fn open_blob<W: std::fmt::Display + ?Sized>(
    keys: &Keys,
    dicts: &dyn DictSource,
    what: &W,
    e: &PackEntry,
    stored: &[u8],
) -> Result<Vec<u8>> {
    let mut plain = Vec::new();
    open_blob_into(keys, dicts, what, e, stored, &mut plain)?;
    Ok(plain)
}

thread_local! {
    /// An opening thread's buffer for the decrypted (still compressed)
    /// bytes of one blob.
    static OPENED: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// [`open_blob`] into `plain` (its contents replaced). A caller that opens
/// many blobs reuses its buffer, and the decrypted bytes go to a buffer
/// this thread keeps: a restore allocated and faulted in two fresh buffers
/// per blob. On failure `plain` is left empty, so nothing unverified (nor
/// the last blob) can be written by mistake.
pub fn open_blob_into<W: std::fmt::Display + ?Sized>(
    keys: &Keys,
    dicts: &dyn DictSource,
    what: &W,
    e: &PackEntry,
    stored: &[u8],
    plain: &mut Vec<u8>,
) -> Result<()> {
    plain.clear();
    let r = open_blob_body(keys, dicts, what, e, stored, plain);
    if r.is_err() {
        plain.clear();
    }
    r
}

/// The work of [`open_blob_into`]; on failure `plain` may hold part of it.
fn open_blob_body<W: std::fmt::Display + ?Sized>(
    keys: &Keys,
    dicts: &dyn DictSource,
    what: &W,
    e: &PackEntry,
    stored: &[u8],
    plain: &mut Vec<u8>,
) -> Result<()> {
    if e.plain_len > MAX_BLOB_PLAIN {
        return Err(Error::corrupt(what, "declared blob size exceeds the limit"));
    }
    let ad = blob_ad(e.ty, &e.id);
    let len = e.plain_len as usize;
    match e.compression {
        0 => keys.open_into(what, &ad, stored, plain)?,
        1 | 2 => {
            // Taken, not borrowed: nothing here can then find it in use.
            let mut inner = OPENED.take();
            let r = keys
                .open_into(what, &ad, stored, &mut inner)
                .and_then(|()| {
                    if e.compression == 1 {
                        crate::object::decompress_exact_into(what, &inner, len, None, plain)
                    } else {
                        open_with_dictionary(keys, dicts, what, e, &inner, plain)
                    }
                });
            if inner.capacity() <= SCRATCH_KEPT {
                OPENED.set(inner);
            }
            r?
        }
        c => return Err(Error::corrupt(what, format!("unknown compression {c}"))),
    }
    if e.compression == 2 {
        // Checked already: exactly `len` bytes that hash to the ID.
        return Ok(());
    }
    if plain.len() != len {
        return Err(Error::corrupt(
            what,
            "plaintext length differs from the index",
        ));
    }
    if keys.blob_id(plain) != e.id {
        return Err(Error::corrupt(
            what,
            "plaintext does not hash to the blob ID",
        ));
    }
    Ok(())
}

/// Opens a blob compressed with a dictionary into `plain`: the frame names
/// the dictionary by its zstd ID; each dictionary with that ID is tried
/// (two concurrent first backups could have trained two with one ID), and
/// the output of exactly the declared length that hashes to the blob ID
/// wins.
fn open_with_dictionary<W: std::fmt::Display + ?Sized>(
    keys: &Keys,
    dicts: &dyn DictSource,
    what: &W,
    e: &PackEntry,
    frame: &[u8],
    plain: &mut Vec<u8>,
) -> Result<()> {
    let zid = frame_dict_id(frame).ok_or_else(|| {
        Error::corrupt(what, "compressed with a dictionary that it does not name")
    })?;
    let mut set = dicts.dictionaries()?;
    if set.by_zstd_id(zid).next().is_none() {
        set = dicts.refresh_for(zid)?;
    }
    let mut last = None;
    for d in set.by_zstd_id(zid) {
        match d.decompress_exact_into(what, frame, e.plain_len as usize, plain) {
            Ok(()) if keys.blob_id(plain) == e.id => return Ok(()),
            Ok(()) => {
                last = Some(Error::corrupt(
                    what,
                    "plaintext does not hash to the blob ID",
                ))
            }
            Err(err) => last = Some(err),
        }
    }
    plain.clear();
    Err(last.unwrap_or_else(|| {
        Error::corrupt(what, format!("dictionary {zid} is not in the repository"))
    }))
}

/// This thread's zstd contexts: one plain, one with a dictionary.
#[derive(Default)]
struct Contexts {
    plain: Option<(i32, zstd::bulk::Compressor<'static>)>,
    dict: Option<(i32, Id, zstd::bulk::Compressor<'static>)>,
}

thread_local! {
    static COMPRESSOR: std::cell::RefCell<Contexts> = std::cell::RefCell::new(Contexts::default());
}

/// Compresses (data blobs only when `level` is not 0; tree blobs always, at
/// level 3 when `level` is 0) and seals one blob on this thread's reused
/// zstd context. Data blobs are compressed with `dict` when one is given
/// and the dictionary [`suits`] them
/// (`compression = 2`); binary data blobs and tree blobs never are. Safe to
/// call from many threads at once.
pub fn seal_blob(
    keys: &Keys,
    level: i32,
    dict: Option<&Dictionary>,
    ty: BlobType,
    id: Id,
    plain: &[u8],
) -> Result<PreparedBlob> {
    if level == 0 && ty == BlobType::Data {
        return prepare_as(keys, None, ty, id, plain);
    }
    let level = if level == 0 { 3 } else { level };
    COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        match dict.filter(|_| ty == BlobType::Data && suits(plain)) {
            Some(d) => {
                if c.dict
                    .as_ref()
                    .is_none_or(|(l, n, _)| *l != level || *n != d.name())
                {
                    c.dict = Some((level, d.name(), dict_compressor(level, d)?));
                }
                let z = c.dict.as_mut().map(|(_, _, z)| (z, 2));
                prepare_as(keys, z, ty, id, plain)
            }
            None => {
                if c.plain.as_ref().is_none_or(|(l, _)| *l != level) {
                    let z = zstd::bulk::Compressor::new(level)
                        .map_err(|e| Error::internal(format!("zstd level {level}: {e}")))?;
                    c.plain = Some((level, z));
                }
                let z = c.plain.as_mut().map(|(_, z)| (z, 1));
                prepare_as(keys, z, ty, id, plain)
            }
        }
    })
}

/// A compressor with `d` loaded. zstd's `forceAttachDict` makes every frame
/// refer to the dictionary's tables instead of copying them in: on the
/// benchmark tree at level 3, 1.54-1.60 s of CPU against 1.8-2.5 s with
/// copying and 1.66-2.2 s without a dictionary. At level 1 (`auto`) the
/// choice hardly matters: each file of the tree (at most 1 MiB) as one
/// blob took 1.04 s attached, 1.07 s copied, 1.04 s with zstd's own choice
/// and 1.21 s without a dictionary (one core, three rounds each, a
/// dictionary from zstd's default trainer on the same samples).
fn dict_compressor(level: i32, d: &Dictionary) -> Result<zstd::bulk::Compressor<'static>> {
    let fail = |e: std::io::Error| Error::internal(format!("zstd dictionary {}: {e}", d.name()));
    let mut z = zstd::bulk::Compressor::with_dictionary(level, d.bytes()).map_err(fail)?;
    z.set_parameter(zstd::zstd_safe::CParameter::ForceAttachDict(
        zstd::zstd_safe::DictAttachPref::ForceAttach,
    ))
    .map_err(fail)?;
    Ok(z)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::MasterKey;
    use crate::dictionary::{Dictionaries, Dictionary, NoDictionaries};
    use std::sync::Arc;

    fn entry(p: &PreparedBlob, stored: &[u8]) -> PackEntry {
        PackEntry {
            ty: p.ty,
            id: p.id,
            offset: 0,
            stored_len: stored.len() as u32,
            plain_len: p.plain_len,
            compression: p.compression,
        }
    }

    /// A dictionary trained on `samples`, and the set a reader finds it in.
    fn trained(k: &Keys, samples: &[Vec<u8>]) -> (Arc<Dictionary>, Dictionaries) {
        let sizes: Vec<usize> = samples.iter().map(|s| s.len()).collect();
        let zd = crate::dictionary::train(&samples.concat(), &sizes).expect("trains");
        let (name, _) = Dictionary::seal(k, &zd).unwrap();
        let d = Arc::new(Dictionary::from_zstd("d", name, zd).unwrap());
        let dicts = Dictionaries::new(vec![d.clone()]);
        (d, dicts)
    }

    /// One reused plaintext buffer opens blobs of every kind (raw, zstd,
    /// zstd with a dictionary) in any order of sizes, each exactly; a blob
    /// that fails leaves no plaintext to write by mistake.
    #[test]
    fn a_reused_buffer_opens_every_kind_exactly() {
        let k = Keys::derive(&MasterKey::from_bytes([4; 32]));
        let texts = crate::dictionary::tests::corpus(202);
        let text = |n: usize| texts[n].clone();
        let (d, dicts) = trained(&k, &texts[..200]);

        let random: Vec<u8> = (0..50_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let blobs: Vec<(Vec<u8>, Option<&Dictionary>)> = vec![
            (vec![1u8; 200_000], None),
            (text(200), Some(&d)),
            (random, None),
            (b"tiny".to_vec(), None),
            (text(201), None),
        ];
        let mut plain = Vec::new();
        for (data, dict) in &blobs {
            let id = k.blob_id(data);
            let p = seal_blob(&k, 3, *dict, BlobType::Data, id, data).unwrap();
            let e = entry(&p, &p.stored);
            open_blob_into(&k, &dicts, "b", &e, &p.stored, &mut plain).unwrap();
            assert_eq!(&plain, data, "compression {}", p.compression);
        }
        // All three kinds were made.
        let kinds: std::collections::BTreeSet<u8> = blobs
            .iter()
            .map(|(data, dict)| {
                seal_blob(&k, 3, *dict, BlobType::Data, k.blob_id(data), data)
                    .unwrap()
                    .compression
            })
            .collect();
        assert_eq!(kinds, [0, 1, 2].into());

        // A tampered blob of each kind fails and leaves nothing behind.
        for (data, dict) in &blobs {
            let p = seal_blob(&k, 3, *dict, BlobType::Data, k.blob_id(data), data).unwrap();
            let mut bad = p.stored.clone();
            let at = bad.len() / 2;
            bad[at] ^= 1;
            let e = entry(&p, &bad);
            plain = data.clone();
            assert!(open_blob_into(&k, &dicts, "b", &e, &bad, &mut plain).is_err());
            assert!(plain.is_empty(), "compression {}", p.compression);
        }
        // A dictionary blob with no dictionary to open it.
        let p = seal_blob(
            &k,
            3,
            Some(&d),
            BlobType::Data,
            k.blob_id(&blobs[1].0),
            &blobs[1].0,
        )
        .unwrap();
        let e = entry(&p, &p.stored);
        let err = open_blob_into(&k, &NoDictionaries, "b", &e, &p.stored, &mut plain).unwrap_err();
        assert!(err.to_string().contains("not in the repository"), "{err}");
        assert!(plain.is_empty());
    }

    /// Given a dictionary, a text blob is compressed with it and a binary
    /// one (a NUL byte in its first 8 KiB, however small) without, at any
    /// level; a NUL further on leaves the blob text. Tree blobs never use
    /// it. Each opens exactly.
    #[test]
    fn binary_blobs_are_compressed_without_the_dictionary() {
        use crate::dictionary::BINARY_PROBE;
        let k = Keys::derive(&MasterKey::from_bytes([5; 32]));
        let texts = crate::dictionary::tests::corpus(400);
        let (d, dicts) = trained(&k, &texts[..200]);

        let text = texts[200..].concat();
        assert!(text.len() > 2 * BINARY_PROBE && !text.contains(&0));
        let nul_at = |at: usize| {
            let mut t = text.clone();
            t[at] = 0;
            t
        };
        let mut small = texts[200].clone();
        small.insert(3, 0);
        let cases = [
            (text.clone(), BlobType::Data, 2),
            (nul_at(BINARY_PROBE), BlobType::Data, 2),
            (nul_at(BINARY_PROBE - 1), BlobType::Data, 1),
            (nul_at(0), BlobType::Data, 1),
            (small, BlobType::Data, 1),
            (text.clone(), BlobType::Tree, 1),
        ];
        let mut plain = Vec::new();
        for level in [1, 3] {
            for (i, (data, ty, want)) in cases.iter().enumerate() {
                let p = seal_blob(&k, level, Some(&d), *ty, k.blob_id(data), data).unwrap();
                assert_eq!(p.compression, *want, "case {i} at level {level}");
                open_blob_into(
                    &k,
                    &dicts,
                    "b",
                    &entry(&p, &p.stored),
                    &p.stored,
                    &mut plain,
                )
                .unwrap();
                assert!(plain == *data, "case {i} at level {level}");
            }
        }
    }
}
