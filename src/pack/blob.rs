//! Single blobs: compressing and sealing one blob for a pack (with a
//! reused zstd context per thread), and opening and verifying one read back.
//! Each blob is sealed with associated data `type | id`, so a blob cannot be
//! swapped for another.

use super::{BlobType, MAX_BLOB_PLAIN, PackEntry};
use crate::crypto::{Keys, SEAL_OVERHEAD};
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
    if plain.len() > MAX_BLOB_PLAIN as usize {
        return Err(Error::Internal(format!(
            "blob {id} of {} bytes exceeds the {MAX_BLOB_PLAIN}-byte limit",
            plain.len()
        )));
    }
    let ad = blob_ad(ty, &id);
    let mut stored = Vec::with_capacity(plain.len() + SEAL_OVERHEAD);
    let mut compression = 0u8;
    if let Some(c) = compressor {
        let mut buf = Vec::with_capacity(zstd::zstd_safe::compress_bound(plain.len()));
        if c.compress_to_buffer(plain, &mut buf).is_ok() && buf.len() < plain.len() {
            keys.seal_into(&ad, &buf, &mut stored)?;
            compression = 1;
        }
    }
    if compression == 0 {
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

/// Decrypts, decompresses and verifies one stored blob against its entry.
/// The plaintext is re-hashed with the keyed ID function before it is returned.
pub fn open_blob(keys: &Keys, what: &str, e: &PackEntry, stored: &[u8]) -> Result<Vec<u8>> {
    if e.plain_len > MAX_BLOB_PLAIN {
        return Err(Error::corrupt(what, "declared blob size exceeds the limit"));
    }
    let inner = keys.open(what, &blob_ad(e.ty, &e.id), stored)?;
    let plain = match e.compression {
        0 => inner,
        1 => crate::object::decompress_exact(what, &inner, e.plain_len as usize)?,
        c => return Err(Error::corrupt(what, format!("unknown compression {c}"))),
    };
    if plain.len() != e.plain_len as usize {
        return Err(Error::corrupt(
            what,
            "plaintext length differs from the index",
        ));
    }
    if keys.blob_id(&plain) != e.id {
        return Err(Error::corrupt(
            what,
            "plaintext does not hash to the blob ID",
        ));
    }
    Ok(plain)
}

thread_local! {
    static COMPRESSOR: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { std::cell::RefCell::new(None) };
}

/// Compresses (data blobs only when `level` is not 0; tree blobs always, at
/// level 3 when `level` is 0) and seals one blob on this thread's reused
/// zstd context. Safe to call from many threads at once.
pub fn seal_blob(
    keys: &Keys,
    level: i32,
    ty: BlobType,
    id: Id,
    plain: &[u8],
) -> Result<PreparedBlob> {
    let compress = level != 0 || ty == BlobType::Tree;
    let level = if level == 0 { 3 } else { level };
    COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        if c.as_ref().is_none_or(|(l, _)| *l != level) {
            let z = zstd::bulk::Compressor::new(level)
                .map_err(|e| Error::internal(format!("zstd level {level}: {e}")))?;
            *c = Some((level, z));
        }
        let comp = if compress {
            c.as_mut().map(|(_, z)| z)
        } else {
            None
        };
        prepare_blob(keys, comp, ty, id, plain)
    })
}
