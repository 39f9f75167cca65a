//! Writing one pack: prepared blobs are appended as they come to a staged
//! backend object, then the sealed header and the trailer close it and the
//! pack is named by the BLAKE3 of its bytes, computed on the way.

use super::{PACK_MAGIC, PackEntry, PreparedBlob, TRAILER_LEN, encode_header, header_ad};
use crate::backend::Staged;
use crate::crypto::{Keys, SEAL_OVERHEAD};
use crate::error::Result;
use crate::id::Id;
use crate::object::FORMAT_VERSION;

/// Writes prepared blobs into one pack as they come: to a staged backend
/// object (a temporary file for the local backend, so a pack is never held
/// in memory) or, by default, to memory. The pack's name, the BLAKE3 of its
/// bytes, is computed on the way.
pub struct PackWriter {
    out: Staged,
    /// Bytes not yet appended to a staged file, handed over in blocks of
    /// about [`WRITE_BLOCK`] (empty for a pack staged in memory).
    pending: Vec<u8>,
    hasher: blake3::Hasher,
    size: u64,
    entries: Vec<PackEntry>,
}

/// Bytes gathered before they are appended to a staged file. Appending
/// each blob as it came was one `write` per chunk (57 k in a cold backup of
/// the benchmark tree, for 150 MB of packs).
const WRITE_BLOCK: usize = 256 << 10;

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
            pending: Vec::new(),
            hasher: blake3::Hasher::new(),
            size: 0,
            entries: Vec::new(),
        }
    }

    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.hasher.update(data);
        self.size += data.len() as u64;
        if self.out.bytes().is_some() {
            // In memory already: gathering would only copy it twice.
            return self.out.append(data);
        }
        if self.pending.len() + data.len() > WRITE_BLOCK {
            self.flush()?;
        }
        if data.len() >= WRITE_BLOCK {
            return self.out.append(data);
        }
        if self.pending.capacity() == 0 {
            self.pending.reserve_exact(WRITE_BLOCK);
        }
        self.pending.extend_from_slice(data);
        Ok(())
    }

    /// Appends the gathered bytes to the staged file.
    fn flush(&mut self) -> Result<()> {
        if !self.pending.is_empty() {
            self.out.append(&self.pending)?;
            self.pending.clear();
        }
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
        keys.seal_into(&header_ad(FORMAT_VERSION), &plain, &mut tail)?;
        let hlen = tail.len() as u32;
        tail.extend_from_slice(&hlen.to_le_bytes());
        tail.extend_from_slice(PACK_MAGIC);
        tail.push(FORMAT_VERSION);
        tail.push(0);
        self.append(&tail)?;
        self.flush()?;
        Ok(FinishedPack {
            id: Id(*self.hasher.finalize().as_bytes()),
            out: self.out,
            size: self.size,
            entries: self.entries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::MasterKey;
    use crate::pack::{BlobType, open_blob, prepare_blob, read_entries};

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
        let streamed = be.read_bounded(Kind::Pack, &sid.to_hex(), 1 << 30).unwrap();
        assert_eq!(Id::of_object(&streamed), sid);
        assert_eq!(read_entries(&k, "p", &streamed).unwrap(), sentries);
        for (e, b) in sentries.iter().zip(&blobs) {
            let s = &streamed[e.offset as usize..(e.offset + e.stored_len as u64) as usize];
            assert_eq!(
                &open_blob(&k, &crate::dictionary::NoDictionaries, "b", e, s).unwrap(),
                b
            );
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
            assert_eq!(
                &open_blob(&k, &crate::dictionary::NoDictionaries, "b", e, s).unwrap(),
                b
            );
        }
        // Swapping a blob's claimed ID fails authentication.
        let mut e = entries[1];
        e.id = entries[0].id;
        let s = &bytes[e.offset as usize..(e.offset + e.stored_len as u64) as usize];
        assert!(open_blob(&k, &crate::dictionary::NoDictionaries, "b", &e, s).is_err());
    }

    /// A pack streamed into a staged file is gathered into blocks: blobs
    /// far smaller than a block, ones that cross a block's end and one
    /// larger than a block all land in the file whole and in order, and the
    /// file is exactly the pack its name and size say.
    #[test]
    fn a_staged_pack_holds_every_gathered_byte() {
        use crate::backend::{Backend, Kind, LocalBackend};
        let k = Keys::derive(&MasterKey::from_bytes([6; 32]));
        let dir = tempfile::tempdir().unwrap();
        let be = LocalBackend::new(dir.path());
        be.create().unwrap();
        let mut sizes = vec![1usize, 7, 100, 4096];
        sizes.extend((0..40).map(|i| 13_000 + i * 311));
        sizes.push(WRITE_BLOCK + 12_345);
        sizes.extend([3, WRITE_BLOCK - 40, 9]);
        let blobs: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let mut b = vec![0u8; n];
                let mut xof = blake3::Hasher::new()
                    .update(&i.to_le_bytes())
                    .finalize_xof();
                xof.fill(&mut b);
                b
            })
            .collect();
        let mut w = PackWriter::new(be.stage(Kind::Pack).unwrap());
        for b in &blobs {
            w.add(prepare_blob(&k, None, BlobType::Data, k.blob_id(b), b).unwrap())
                .unwrap();
        }
        let p = w.finish(&k).unwrap();
        let (id, entries, size) = (p.id, p.entries.clone(), p.size);
        be.commit(Kind::Pack, &id.to_hex(), p.out).unwrap();
        let bytes = be.read_bounded(Kind::Pack, &id.to_hex(), 1 << 30).unwrap();
        assert_eq!(bytes.len() as u64, size);
        assert_eq!(Id::of_object(&bytes), id);
        assert_eq!(read_entries(&k, "p", &bytes).unwrap(), entries);
        assert_eq!(entries.len(), blobs.len());
        for (e, b) in entries.iter().zip(&blobs) {
            let s = &bytes[e.offset as usize..(e.offset + e.stored_len as u64) as usize];
            assert_eq!(
                &open_blob(&k, &crate::dictionary::NoDictionaries, "b", e, s).unwrap(),
                b
            );
        }
    }
}
