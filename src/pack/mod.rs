//! Pack files: many encrypted blobs followed by an encrypted header that lists
//! them, so the index can always be rebuilt from packs alone.
//!
//! Layout (see `repo-format/SPEC.md`):
//! `blob* | sealed header | header_len: u32 LE | "LRDRPK" | version: u8 | 0`.
//! Each blob is sealed on its own with associated data `type | id`, so a blob
//! cannot be swapped for another. The header plaintext is a count followed by
//! fixed-size entries. A pack is named by the BLAKE3 hash of its bytes.
//!
//! This module owns the format (entries, header, trailer); [`blob`] seals
//! and opens single blobs, [`writer`] streams blobs into a new pack.

mod blob;
mod writer;

pub use blob::{BlobIn, PreparedBlob, blob_ad, open_blob, open_blob_into, prepare_blob, seal_blob};
pub use writer::{FinishedPack, PackWriter};

use crate::crypto::{Keys, SEAL_OVERHEAD};
use crate::error::{Error, Result};
use crate::id::Id;
use crate::object::FORMAT_VERSION;
use serde::{Deserialize, Serialize};

/// Trailer magic (6 bytes) before the version and a reserved zero byte.
pub const PACK_MAGIC: &[u8; 6] = b"LRDRPK";
/// Bytes after the sealed header: length, magic, version, reserved.
pub const TRAILER_LEN: usize = 4 + 8;
/// Bytes of one header entry.
pub const ENTRY_LEN: usize = 1 + 32 + 8 + 4 + 4 + 1;
/// Largest blob plaintext a reader accepts.
pub const MAX_BLOB_PLAIN: u32 = 64 << 20;
/// Most entries a pack header may list.
pub const MAX_ENTRIES: usize = 1 << 20;

/// What a blob holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum BlobType {
    Data = 0,
    Tree = 1,
}

impl BlobType {
    /// Parses the stored type byte.
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(BlobType::Data),
            1 => Some(BlobType::Tree),
            _ => None,
        }
    }
}

/// One blob's entry in a pack header (and in the index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackEntry {
    pub ty: BlobType,
    pub id: Id,
    pub offset: u64,
    /// Bytes stored in the pack (nonce + ciphertext + tag).
    pub stored_len: u32,
    /// Bytes of the plaintext.
    pub plain_len: u32,
    /// 0 = stored raw, 1 = zstd.
    pub compression: u8,
}

/// The associated data of a pack header sealed by format `version`.
pub(crate) fn header_ad(version: u8) -> [u8; 7] {
    let mut ad = [0u8; 7];
    ad[..6].copy_from_slice(PACK_MAGIC);
    ad[6] = version;
    ad
}

/// Encodes header entries: `count: u32 LE` then `ENTRY_LEN`-byte entries.
pub fn encode_header(entries: &[PackEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + entries.len() * ENTRY_LEN);
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        out.push(e.ty as u8);
        out.extend_from_slice(&e.id.0);
        out.extend_from_slice(&e.offset.to_le_bytes());
        out.extend_from_slice(&e.stored_len.to_le_bytes());
        out.extend_from_slice(&e.plain_len.to_le_bytes());
        out.push(e.compression);
    }
    out
}

/// Decodes and bounds-checks header entries against a pack whose blob area
/// is `data_len` bytes.
pub fn decode_header(what: &str, plain: &[u8], data_len: u64) -> Result<Vec<PackEntry>> {
    if plain.len() < 4 {
        return Err(Error::corrupt(what, "pack header shorter than its count"));
    }
    let n = u32::from_le_bytes([plain[0], plain[1], plain[2], plain[3]]) as usize;
    if n > MAX_ENTRIES || plain.len() != 4 + n * ENTRY_LEN {
        return Err(Error::corrupt(
            what,
            format!(
                "pack header of {} bytes cannot hold {n} entries",
                plain.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(n);
    let mut next_offset = 0u64;
    for i in 0..n {
        let b = &plain[4 + i * ENTRY_LEN..4 + (i + 1) * ENTRY_LEN];
        let ty = BlobType::from_u8(b[0]).ok_or_else(|| {
            Error::corrupt(what, format!("entry {i}: unknown blob type {}", b[0]))
        })?;
        let mut id = [0u8; 32];
        id.copy_from_slice(&b[1..33]);
        let offset = u64::from_le_bytes(
            b[33..41]
                .try_into()
                .map_err(|_| Error::corrupt(what, "entry"))?,
        );
        let stored_len = u32::from_le_bytes(
            b[41..45]
                .try_into()
                .map_err(|_| Error::corrupt(what, "entry"))?,
        );
        let plain_len = u32::from_le_bytes(
            b[45..49]
                .try_into()
                .map_err(|_| Error::corrupt(what, "entry"))?,
        );
        let compression = b[49];
        // Blobs tile the data area exactly, in order, with no gaps.
        if offset != next_offset {
            return Err(Error::corrupt(
                what,
                format!("entry {i} starts at {offset}, expected {next_offset}"),
            ));
        }
        next_offset = match offset.checked_add(stored_len as u64) {
            Some(end) if end <= data_len => end,
            _ => {
                return Err(Error::corrupt(
                    what,
                    format!("entry {i} points outside the pack"),
                ));
            }
        };
        if (stored_len as usize) < SEAL_OVERHEAD || plain_len > MAX_BLOB_PLAIN || compression > 2 {
            return Err(Error::corrupt(
                what,
                format!("entry {i} has impossible sizes"),
            ));
        }
        out.push(PackEntry {
            ty,
            id: Id(id),
            offset,
            stored_len,
            plain_len,
            compression,
        });
    }
    if next_offset != data_len {
        return Err(Error::corrupt(
            what,
            format!(
                "{} bytes between the last blob and the header",
                data_len - next_offset
            ),
        ));
    }
    Ok(out)
}

/// Parses the trailer of a pack of `pack_len` bytes: returns the sealed
/// header's offset and length. A pack of any version this build reads is
/// accepted; [`trailer_version`] says which, for [`open_header_as`].
pub fn parse_trailer(what: &str, pack_len: u64, trailer: &[u8]) -> Result<(u64, u32)> {
    if trailer.len() != TRAILER_LEN || pack_len < TRAILER_LEN as u64 {
        return Err(Error::corrupt(what, "pack shorter than its trailer"));
    }
    if &trailer[4..10] != PACK_MAGIC {
        return Err(Error::corrupt(
            what,
            "not a larder pack (bad trailer magic)",
        ));
    }
    crate::object::check_version(what, FORMAT_VERSION, trailer[10])?;
    if trailer[11] != 0 {
        return Err(Error::corrupt(what, "reserved trailer byte is not zero"));
    }
    let hlen = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    let max_header = (MAX_ENTRIES * ENTRY_LEN + 4 + SEAL_OVERHEAD) as u32;
    if hlen < SEAL_OVERHEAD as u32 + 4
        || hlen > max_header
        || hlen as u64 > pack_len - TRAILER_LEN as u64
    {
        return Err(Error::corrupt(
            what,
            format!("pack header length {hlen} is impossible"),
        ));
    }
    Ok((pack_len - TRAILER_LEN as u64 - hlen as u64, hlen))
}

/// Opens a sealed pack header and decodes its entries.
pub fn open_header(
    keys: &Keys,
    what: &str,
    sealed: &[u8],
    header_offset: u64,
) -> Result<Vec<PackEntry>> {
    open_header_as(keys, what, sealed, header_offset, FORMAT_VERSION)
}

/// The format version of a pack whose trailer [`parse_trailer`] accepted.
pub fn trailer_version(trailer: &[u8]) -> u8 {
    trailer.get(10).copied().unwrap_or(0)
}

/// [`open_header`] of a pack written by format `version` (its trailer's,
/// [`trailer_version`]): the version is part of the header's associated
/// data.
pub fn open_header_as(
    keys: &Keys,
    what: &str,
    sealed: &[u8],
    header_offset: u64,
    version: u8,
) -> Result<Vec<PackEntry>> {
    let plain = keys.open(what, &header_ad(version), sealed)?;
    decode_header(what, &plain, header_offset)
}

/// Reads the entries of a whole pack held in memory.
pub fn read_entries(keys: &Keys, what: &str, pack: &[u8]) -> Result<Vec<PackEntry>> {
    let len = pack.len() as u64;
    if pack.len() < TRAILER_LEN {
        return Err(Error::corrupt(what, "pack shorter than its trailer"));
    }
    let trailer = &pack[pack.len() - TRAILER_LEN..];
    let (off, hlen) = parse_trailer(what, len, trailer)?;
    let sealed = &pack[off as usize..off as usize + hlen as usize];
    open_header_as(keys, what, sealed, off, trailer_version(trailer))
}
