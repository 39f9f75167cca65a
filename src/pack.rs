//! Pack files: many encrypted blobs followed by an encrypted header that lists
//! them, so the index can always be rebuilt from packs alone.
//!
//! Layout (see `repo-format/SPEC.md`):
//! `blob* | sealed header | header_len: u32 LE | "LRDRPK" | version: u8 | 0`.
//! Each blob is sealed on its own with associated data `type | id`, so a blob
//! cannot be swapped for another. The header plaintext is a count followed by
//! fixed-size entries. A pack is named by the BLAKE3 hash of its bytes.

use crate::backend::Staged;
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
        return Err(Error::Usage(format!(
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

/// Writes prepared blobs into one pack as they come: to a staged backend
/// object (a temporary file for the local backend, so a pack is never held
/// in memory) or, by default, to memory. The pack's name, the BLAKE3 of its
/// bytes, is computed on the way.
pub struct PackWriter {
    out: Staged,
    hasher: blake3::Hasher,
    size: u64,
    entries: Vec<PackEntry>,
}

impl Default for PackWriter {
    fn default() -> Self {
        PackWriter::new(Staged::Memory(Vec::new()))
    }
}

/// A finished pack: its name, its staged bytes and its entries.
pub struct FinishedPack {
    pub id: Id,
    /// The pack, to be committed under `id`.
    pub out: Staged,
    /// Its length in bytes.
    pub size: u64,
    pub entries: Vec<PackEntry>,
}

impl FinishedPack {
    /// The bytes of a pack written to memory (empty for a staged file).
    pub fn bytes(&self) -> &[u8] {
        self.out.bytes().unwrap_or(&[])
    }
}

impl PackWriter {
    /// A writer appending to `out`.
    pub fn new(out: Staged) -> Self {
        PackWriter {
            out,
            hasher: blake3::Hasher::new(),
            size: 0,
            entries: Vec::new(),
        }
    }

    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.out.append(data)?;
        self.hasher.update(data);
        self.size += data.len() as u64;
        Ok(())
    }

    /// Appends a prepared blob.
    pub fn add(&mut self, b: PreparedBlob) -> Result<()> {
        self.append(&b.stored)?;
        self.entries.push(PackEntry {
            ty: b.ty,
            id: b.id,
            offset: self.size - b.stored.len() as u64,
            stored_len: b.stored.len() as u32,
            plain_len: b.plain_len,
            compression: b.compression,
        });
        Ok(())
    }

    /// Bytes of blob data so far.
    pub fn size(&self) -> usize {
        self.size as usize
    }

    /// Number of blobs so far.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no blob was added.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Seals the header, appends the trailer and names the pack.
    pub fn finish(mut self, keys: &Keys) -> Result<FinishedPack> {
        let plain = encode_header(&self.entries);
        let mut tail = Vec::with_capacity(plain.len() + SEAL_OVERHEAD + TRAILER_LEN);
        keys.seal_into(&header_ad(), &plain, &mut tail)?;
        let hlen = tail.len() as u32;
        tail.extend_from_slice(&hlen.to_le_bytes());
        tail.extend_from_slice(PACK_MAGIC);
        tail.push(FORMAT_VERSION);
        tail.push(0);
        self.append(&tail)?;
        Ok(FinishedPack {
            id: Id(*self.hasher.finalize().as_bytes()),
            out: self.out,
            size: self.size,
            entries: self.entries,
        })
    }
}

fn header_ad() -> [u8; 7] {
    let mut ad = [0u8; 7];
    ad[..6].copy_from_slice(PACK_MAGIC);
    ad[6] = FORMAT_VERSION;
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
        if (stored_len as usize) < SEAL_OVERHEAD || plain_len > MAX_BLOB_PLAIN || compression > 1 {
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
/// header's offset and length.
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
    if trailer[10] != FORMAT_VERSION {
        return Err(Error::UnsupportedVersion {
            object: what.to_string(),
            found: trailer[10] as u32,
            supported: FORMAT_VERSION as u32,
            hint: crate::object::version_hint(trailer[10]),
        });
    }
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
    let plain = keys.open(what, &header_ad(), sealed)?;
    decode_header(what, &plain, header_offset)
}

/// Reads the entries of a whole pack held in memory.
pub fn read_entries(keys: &Keys, what: &str, pack: &[u8]) -> Result<Vec<PackEntry>> {
    let len = pack.len() as u64;
    if pack.len() < TRAILER_LEN {
        return Err(Error::corrupt(what, "pack shorter than its trailer"));
    }
    let (off, hlen) = parse_trailer(what, len, &pack[pack.len() - TRAILER_LEN..])?;
    let sealed = &pack[off as usize..off as usize + hlen as usize];
    open_header(keys, what, sealed, off)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::MasterKey;

    #[test]
    fn pack_round_trip() {
        let k = Keys::derive(&MasterKey::from_bytes([5; 32]));
        let mut c = zstd::bulk::Compressor::new(3).unwrap();
        let mut w = PackWriter::default();
        let blobs: Vec<Vec<u8>> = vec![vec![0u8; 5000], b"random-ish".to_vec(), Vec::new()];
        for b in &blobs {
            w.add(prepare_blob(&k, Some(&mut c), BlobType::Data, k.blob_id(b), b).unwrap())
                .unwrap();
        }
        let p = w.finish(&k).unwrap();
        let bytes = p.bytes().to_vec();
        assert_eq!(p.id, Id::of_object(&bytes));
        assert_eq!(p.size, bytes.len() as u64);

        // The same blobs streamed into a staged file of the local backend
        // give a pack named by its bytes, readable once committed (nonces
        // differ, so not the same bytes); an uncommitted one leaves nothing.
        use crate::backend::{Backend, Kind, LocalBackend};
        let dir = tempfile::tempdir().unwrap();
        let be = LocalBackend::new(dir.path());
        be.create().unwrap();
        let mut ws = PackWriter::new(be.stage(Kind::Pack).unwrap());
        for b in &blobs {
            ws.add(prepare_blob(&k, Some(&mut c), BlobType::Data, k.blob_id(b), b).unwrap())
                .unwrap();
        }
        let ps = ws.finish(&k).unwrap();
        assert_eq!(ps.size, p.size);
        assert!(ps.bytes().is_empty());
        let (sid, sentries) = (ps.id, ps.entries.clone());
        be.commit(Kind::Pack, &sid.to_hex(), ps.out).unwrap();
        let streamed = be.read(Kind::Pack, &sid.to_hex()).unwrap();
        assert_eq!(Id::of_object(&streamed), sid);
        assert_eq!(read_entries(&k, "p", &streamed).unwrap(), sentries);
        for (e, b) in sentries.iter().zip(&blobs) {
            let s = &streamed[e.offset as usize..(e.offset + e.stored_len as u64) as usize];
            assert_eq!(&open_blob(&k, "b", e, s).unwrap(), b);
        }
        drop(be.stage(Kind::Pack).unwrap());
        let left: Vec<_> = std::fs::read_dir(dir.path().join("packs"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().starts_with('.'))
            .collect();
        assert!(left.is_empty(), "temporary files left: {left:?}");
        assert_eq!(be.list(Kind::Pack).unwrap().len(), 1);

        let entries = read_entries(&k, "p", &bytes).unwrap();
        assert_eq!(entries, p.entries);
        assert_eq!(entries[0].compression, 1);
        assert_eq!(entries[1].compression, 0);
        for (e, b) in entries.iter().zip(&blobs) {
            let s = &bytes[e.offset as usize..(e.offset + e.stored_len as u64) as usize];
            assert_eq!(&open_blob(&k, "b", e, s).unwrap(), b);
        }
        // Swapping a blob's claimed ID fails authentication.
        let mut e = entries[1];
        e.id = entries[0].id;
        let s = &bytes[e.offset as usize..(e.offset + e.stored_len as u64) as usize];
        assert!(open_blob(&k, "b", &e, s).is_err());
    }
}
