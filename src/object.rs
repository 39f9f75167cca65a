//! Sealed repository objects: config, keys, index segments, snapshots,
//! locks, deletion marks and compression dictionaries.
//!
//! Layout (see `repo-format/SPEC.md`):
//! `"LRDR" | kind: u8 | version: u8 | nonce(24) | ciphertext | tag(16)`, where
//! the plaintext is `plain_len: u32 LE | compression: u8 | body` and the body is
//! the postcard encoding of the value, zstd-compressed when `compression` = 1.
//! The six clear bytes are the associated data, so they cannot be altered.

use crate::crypto::Keys;
use crate::error::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Magic bytes that open every larder object.
pub const MAGIC: &[u8; 4] = b"LRDR";
/// The format version this build writes (and the newest it reads).
pub const FORMAT_VERSION: u8 = 5;
/// The oldest format version this build reads. Versions 3 and 4 wrote the
/// same bytes as version 5 for every object they had, but for the version
/// byte itself (repo-format/SPEC.md, section 4), so their objects are read
/// as version 5's; a repository whose config is older than
/// [`FORMAT_VERSION`] is read-only until `migrate` upgrades it.
pub const OLDEST_READ_VERSION: u8 = 3;
/// The version of a migrated repository's config (and of no other
/// object): a repository of version 5 that also holds objects of versions
/// 3 and 4. Larders that read version 5 alone refuse it at its config,
/// instead of failing later on its older objects (repo-format/SPEC.md,
/// section 4).
pub const MIGRATED_VERSION: u8 = 6;
/// Largest decoded body a reader accepts (bounds every allocation).
pub const MAX_OBJECT_PLAIN: usize = 256 << 20;
/// Largest stored sealed object a reader accepts (body limit plus framing).
pub const MAX_OBJECT_STORED: u64 = MAX_OBJECT_PLAIN as u64 + 1024;
/// Bytes of the clear header.
pub const HEADER_LEN: usize = 6;

/// The type byte of each sealed object kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ObjectType {
    Config = b'C',
    Key = b'K',
    Index = b'I',
    Snapshot = b'S',
    Lock = b'L',
    Mark = b'M',
    Dict = b'D',
}

/// Encodes a value as postcard bytes (the canonical encoding).
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    postcard::to_stdvec(value).map_err(|e| Error::internal(format!("encoding failed: {e}")))
}

/// [`encode`], appended to `out` (returned with the bytes after what it
/// held): a buffer reused across values keeps its capacity.
pub fn encode_onto<T: Serialize>(value: &T, out: Vec<u8>) -> Result<Vec<u8>> {
    postcard::to_extend(value, out).map_err(|e| Error::internal(format!("encoding failed: {e}")))
}

/// Decodes postcard bytes, naming `what` on failure; trailing bytes are an error.
pub fn decode<T: DeserializeOwned>(
    what: &(impl std::fmt::Display + ?Sized),
    bytes: &[u8],
) -> Result<T> {
    decode_seed(what, bytes, std::marker::PhantomData::<T>)
}

/// [`decode`] through a serde seed: for a reader that takes a value's
/// parts as they are decoded rather than the whole value.
pub fn decode_seed<'de, S: serde::de::DeserializeSeed<'de>>(
    what: &(impl std::fmt::Display + ?Sized),
    bytes: &'de [u8],
    seed: S,
) -> Result<S::Value> {
    let failed = |e: postcard::Error| Error::corrupt(what, format!("cannot decode: {e}"));
    let mut de = postcard::Deserializer::from_bytes(bytes);
    let v = seed.deserialize(&mut de).map_err(failed)?;
    let rest = de.finalize().map_err(failed)?;
    if !rest.is_empty() {
        return Err(Error::corrupt(
            what,
            format!("{} trailing bytes", rest.len()),
        ));
    }
    Ok(v)
}

/// The first format version that had objects of type `ty`.
pub fn first_version(ty: ObjectType) -> u8 {
    match ty {
        ObjectType::Mark => 4,
        ObjectType::Dict => 5,
        _ => OLDEST_READ_VERSION,
    }
}

/// Checks the clear header: magic, type and version; returns the version
/// (from [`first_version`] of `ty` to [`FORMAT_VERSION`]). Returns an
/// `UnsupportedVersion` error for a newer format, so old binaries say so,
/// and for one older than this build reads.
pub fn check_header(what: &str, ty: ObjectType, bytes: &[u8]) -> Result<u8> {
    if bytes.len() < HEADER_LEN || &bytes[..4] != MAGIC {
        return Err(Error::corrupt(what, "not a larder object (bad magic)"));
    }
    if bytes[4] != ty as u8 {
        return Err(Error::corrupt(
            what,
            format!(
                "object type {:?} where {:?} was expected",
                bytes[4] as char, ty as u8 as char
            ),
        ));
    }
    let newest = match ty {
        ObjectType::Config => MIGRATED_VERSION,
        _ => FORMAT_VERSION,
    };
    let found = check_version(what, newest, bytes[5])?;
    if found < first_version(ty) {
        return Err(Error::corrupt(
            what,
            format!(
                "format version {found} had no such objects (they began in version {})",
                first_version(ty)
            ),
        ));
    }
    Ok(found)
}

/// Checks a format version byte `found` against what this build reads
/// ([`OLDEST_READ_VERSION`] to `newest`); returns it.
pub fn check_version(what: &str, newest: u8, found: u8) -> Result<u8> {
    if !(OLDEST_READ_VERSION..=newest).contains(&found) {
        return Err(Error::UnsupportedVersion {
            object: what.to_string(),
            found: found as u32,
            oldest: OLDEST_READ_VERSION as u32,
            supported: newest as u32,
            hint: version_hint(found),
        });
    }
    Ok(found)
}

/// What to tell a user about an unknown format version.
pub fn version_hint(found: u8) -> &'static str {
    if found > FORMAT_VERSION {
        "upgrade larder to open it"
    } else {
        "it was written by an older larder, whose format this one no longer reads"
    }
}

/// Builds the clear header for `ty`.
pub fn header(ty: ObjectType) -> [u8; HEADER_LEN] {
    header_as(ty, FORMAT_VERSION)
}

/// The clear header for `ty` with format version byte `version`: for the
/// locks a reader writes into a repository not yet migrated, which the
/// larder of that version must read.
pub fn header_as(ty: ObjectType, version: u8) -> [u8; HEADER_LEN] {
    [MAGIC[0], MAGIC[1], MAGIC[2], MAGIC[3], ty as u8, version]
}

/// Serializes, compresses and encrypts `value` as an object of type `ty`.
pub fn seal<T: Serialize>(keys: &Keys, ty: ObjectType, value: &T) -> Result<Vec<u8>> {
    seal_body(keys, ty, &encode(value)?)
}

/// [`seal`] with format version byte `version` in the clear header (see
/// [`header_as`]).
pub fn seal_as<T: Serialize>(
    keys: &Keys,
    ty: ObjectType,
    version: u8,
    value: &T,
) -> Result<Vec<u8>> {
    seal_body_as(keys, ty, version, &encode(value)?)
}

/// [`seal`] of a body already encoded (or, in tests, of any bytes).
pub fn seal_body(keys: &Keys, ty: ObjectType, body: &[u8]) -> Result<Vec<u8>> {
    seal_body_as(keys, ty, FORMAT_VERSION, body)
}

/// [`seal_body`] with format version byte `version`.
pub fn seal_body_as(keys: &Keys, ty: ObjectType, version: u8, body: &[u8]) -> Result<Vec<u8>> {
    if body.len() > MAX_OBJECT_PLAIN {
        return Err(Error::Internal(format!(
            "object of {} bytes exceeds the {MAX_OBJECT_PLAIN}-byte limit",
            body.len()
        )));
    }
    let compressed = zstd::bulk::compress(body, 3)
        .map_err(|e| Error::internal(format!("zstd compression failed: {e}")))?;
    let mut plain = Vec::with_capacity(5 + body.len().min(compressed.len()));
    plain.extend_from_slice(&(body.len() as u32).to_le_bytes());
    if compressed.len() < body.len() {
        plain.push(1);
        plain.extend_from_slice(&compressed);
    } else {
        plain.push(0);
        plain.extend_from_slice(body);
    }
    let hdr = header_as(ty, version);
    let mut out = hdr.to_vec();
    keys.seal_into(&hdr, &plain, &mut out)?;
    Ok(out)
}

/// Authenticates, decrypts, decompresses and decodes an object of type `ty`.
/// `what` names the object in errors.
pub fn open<T: DeserializeOwned>(
    keys: &Keys,
    ty: ObjectType,
    what: &str,
    bytes: &[u8],
) -> Result<T> {
    check_header(what, ty, bytes)?;
    let plain = keys.open(what, &bytes[..HEADER_LEN], &bytes[HEADER_LEN..])?;
    let body = unframe_owned(what, plain)?;
    decode(what, &body)
}

/// [`open`] of bytes it owns: they are decrypted in place, so a large
/// object (an index segment of a quarter million blobs is 11 MB) is held
/// once while it is opened, and then once more while it is decoded.
pub fn open_owned<T: DeserializeOwned>(
    keys: &Keys,
    ty: ObjectType,
    what: &str,
    bytes: Vec<u8>,
) -> Result<T> {
    let body = open_body_owned(keys, ty, what, bytes)?;
    decode(what, &body)
}

/// The body of an object of type `ty` (authenticated, decrypted and
/// decompressed, not decoded), in the allocation of `bytes` where it was
/// stored uncompressed: for readers that decode it piece by piece.
pub fn open_body_owned(keys: &Keys, ty: ObjectType, what: &str, bytes: Vec<u8>) -> Result<Vec<u8>> {
    check_header(what, ty, &bytes)?;
    let plain = keys.open_in_place(what, HEADER_LEN, bytes)?;
    unframe_owned(what, plain)
}

/// [`unframe`] of a body it owns: a stored (uncompressed) body is returned
/// in place rather than copied, and a compressed one is freed once
/// decompressed.
pub fn unframe_owned(what: &str, mut plain: Vec<u8>) -> Result<Vec<u8>> {
    let len = frame_len(what, &plain)?;
    if plain[4] != 0 {
        return unframe(what, &plain);
    }
    stored(what, &plain[5..], len)?;
    plain.drain(..5);
    Ok(plain)
}

/// A stored (uncompressed) body, checked against its declared size.
fn stored<'a>(what: &str, data: &'a [u8], len: usize) -> Result<&'a [u8]> {
    if data.len() != len {
        return Err(Error::corrupt(
            what,
            "stored size does not match declared size",
        ));
    }
    Ok(data)
}

/// The declared size of a framed body, checked against the frame's
/// length and the limit.
fn frame_len(what: &str, plain: &[u8]) -> Result<usize> {
    if plain.len() < 5 {
        return Err(Error::corrupt(
            what,
            "object body shorter than its 5-byte frame",
        ));
    }
    let len = u32::from_le_bytes([plain[0], plain[1], plain[2], plain[3]]) as usize;
    if len > MAX_OBJECT_PLAIN {
        return Err(Error::corrupt(
            what,
            format!("declared size {len} exceeds the limit"),
        ));
    }
    Ok(len)
}

/// Undoes the `plain_len | compression | body` framing with bounded sizes.
pub fn unframe(what: &str, plain: &[u8]) -> Result<Vec<u8>> {
    let len = frame_len(what, plain)?;
    let data = &plain[5..];
    match plain[4] {
        0 => stored(what, data, len).map(<[u8]>::to_vec),
        1 => decompress_exact(what, data, len),
        c => Err(Error::corrupt(what, format!("unknown compression {c}"))),
    }
}

/// Decompresses a zstd frame into exactly `len` bytes, never more.
pub fn decompress_exact(what: &str, data: &[u8], len: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    decompress_exact_into(what, data, len, None, &mut out)?;
    Ok(out)
}

/// [`decompress_exact`] into `out` (its contents replaced; it grows to at
/// most `len`, and a buffer reused across calls saves an allocation and
/// its page faults each time), with a prepared dictionary for frames made
/// with one (see [`crate::dictionary`]).
pub fn decompress_exact_into<W: std::fmt::Display + ?Sized>(
    what: &W,
    data: &[u8],
    len: usize,
    dict: Option<&zstd::zstd_safe::DDict<'_>>,
    out: &mut Vec<u8>,
) -> Result<()> {
    use zstd::zstd_safe::{DCtx, get_error_name};
    thread_local! {
        static DCTX: std::cell::RefCell<Option<DCtx<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    out.clear();
    // A reused buffer may hold more than `len`: a frame that decompresses
    // to more is still caught below (its length differs).
    out.reserve_exact(len);
    // One reused decompression context per thread; the dictionary is
    // given per call, so it never sticks to the context.
    let n = DCTX.with(|cell| {
        let mut cell = cell.borrow_mut();
        let d = match cell.as_mut() {
            Some(d) => d,
            None => cell.insert(
                DCtx::try_create()
                    .ok_or_else(|| Error::internal("zstd: cannot create a context"))?,
            ),
        };
        match dict {
            Some(dict) => d.decompress_using_ddict(&mut *out, data, dict),
            None => d.decompress(&mut *out, data),
        }
        .map_err(|c| Error::corrupt(what, format!("zstd: {}", get_error_name(c))))
    })?;
    if n != len {
        return Err(Error::corrupt(
            what,
            format!("decompressed to {n} bytes, {len} were declared"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::MasterKey;

    /// Decompressing into a reused buffer: the result is exactly the frame,
    /// and a frame longer than declared is refused even when the buffer
    /// has room for all of it (a larger buffer reused from before).
    #[test]
    fn decompress_into_a_reused_buffer_is_exact() {
        let big = vec![7u8; 100_000];
        let small = b"a short text, a short text, a short text".to_vec();
        let zbig = zstd::bulk::compress(&big, 3).unwrap();
        let zsmall = zstd::bulk::compress(&small, 3).unwrap();
        let mut out = Vec::new();
        decompress_exact_into("b", &zbig, big.len(), None, &mut out).unwrap();
        assert_eq!(out, big);
        decompress_exact_into("s", &zsmall, small.len(), None, &mut out).unwrap();
        assert_eq!(out, small);
        assert!(out.capacity() >= big.len());
        let e = decompress_exact_into("s", &zbig, small.len(), None, &mut out).unwrap_err();
        assert!(e.to_string().contains("100000 bytes"), "{e}");
        let e = decompress_exact_into("s", &zsmall, small.len() + 1, None, &mut out).unwrap_err();
        assert!(e.to_string().contains("were declared"), "{e}");
        // A fresh buffer has room for the declared length only.
        assert!(decompress_exact("s", &zbig, 10).is_err());
    }

    /// `open_owned` (which decrypts in place) opens what `open` opens and
    /// refuses what it refuses, with the same error, for a stored and a
    /// compressed body, every cut and a flipped bit in every byte.
    #[test]
    fn open_owned_agrees_with_open() {
        let k = Keys::derive(&MasterKey::from_bytes([3; 32]));
        let random: Vec<u8> = (0..200u32)
            .flat_map(|i| blake3::hash(&i.to_le_bytes()).as_bytes()[..3].to_vec())
            .collect();
        for v in [random, vec![7u8; 600]] {
            let s = seal(&k, ObjectType::Index, &v).unwrap();
            let mut cases: Vec<Vec<u8>> = (0..s.len()).map(|n| s[..n].to_vec()).collect();
            for at in 0..s.len() {
                let mut t = s.clone();
                t[at] ^= 0x10;
                cases.push(t);
            }
            cases.push(s.clone());
            let mut opened = 0;
            for c in cases {
                let want = open::<Vec<u8>>(&k, ObjectType::Index, "index/x", &c);
                let got = open_owned::<Vec<u8>>(&k, ObjectType::Index, "index/x", c);
                match (got, want) {
                    (Ok(a), Ok(b)) => {
                        assert_eq!((&a, &b), (&v, &v));
                        opened += 1;
                    }
                    (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                    (a, b) => panic!("owned {a:?}, borrowed {b:?}"),
                }
            }
            assert_eq!(opened, 1, "only the sealed bytes themselves open");
        }
    }

    #[test]
    fn seal_open_and_type_binding() {
        let k = Keys::derive(&MasterKey::from_bytes([3; 32]));
        let v = vec!["a".to_string(); 100];
        let s = seal(&k, ObjectType::Snapshot, &v).unwrap();
        let back: Vec<String> = open(&k, ObjectType::Snapshot, "s", &s).unwrap();
        assert_eq!(back, v);
        assert!(open::<Vec<String>>(&k, ObjectType::Index, "s", &s).is_err());
        let mut t = s.clone();
        t[4] = ObjectType::Index as u8;
        assert!(open::<Vec<String>>(&k, ObjectType::Index, "s", &t).is_err());
        let mut t = s.clone();
        t[5] = 9;
        assert!(matches!(
            open::<Vec<String>>(&k, ObjectType::Snapshot, "s", &t),
            Err(Error::UnsupportedVersion { found: 9, .. })
        ));
    }
}
