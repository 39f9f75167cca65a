//! Repacking: the blobs a partly used pack keeps for the snapshots are
//! read, verified (decrypted and re-hashed, as a restore would) and copied
//! unchanged (same sealed bytes) into new packs, which a new index segment
//! lists; the old pack then holds nothing the snapshots need and can be
//! marked for deletion. A pack whose blob fails verification is not
//! marked: it stays, and `check` will name it.

use super::usage_map::{KeptBlob, kept_blobs};
use crate::backend::Kind;
use crate::error::Result;
use crate::id::Id;
use crate::index::marks::MarkedPack;
use crate::lock::LockHandle;
use crate::maintenance::usage::Usage;
use crate::pack::{self, PreparedBlob};
use crate::packer::{Packer, PackerStats};
use crate::progress::Tally;
use crate::repository::Repository;

/// What a repack did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Repacked {
    /// Packs whose kept blobs are now in new packs.
    pub packs: Vec<Id>,
    pub blobs_copied: u64,
    pub bytes_copied: u64,
    /// Packs left alone because a blob could not be read or verified.
    pub problems: Vec<String>,
    pub written: PackerStats,
}

/// Largest read from a pack while repacking.
const MAX_READ: u64 = 8 << 20;

/// Copies the kept blobs of each of `packs` into new packs, counting each
/// pack read (copied, or kept for a problem) in `tally`.
pub fn repack(
    repo: &Repository,
    u: &Usage,
    lock: &LockHandle,
    packs: &[MarkedPack],
    tally: &mut Tally,
) -> Result<Repacked> {
    let mut out = Repacked::default();
    let mut packer = Packer::with_lock(repo, Some(lock.clone()))?;
    for MarkedPack { id, size } in packs {
        crate::interrupt::check()?;
        let blobs = kept_blobs(u, id)?;
        match read_verified(repo, id, &blobs) {
            Ok(prepared) => {
                for b in prepared {
                    out.blobs_copied += 1;
                    out.bytes_copied += b.stored.len() as u64;
                    packer.add_prepared(b)?;
                }
                out.packs.push(*id);
            }
            Err(e) => out
                .problems
                .push(format!("{e}; pack {id} is kept as it is")),
        }
        tally.one(*size);
    }
    out.written = packer.finish()?;
    Ok(out)
}

/// Reads and verifies `blobs` of pack `id`, in reads of at most
/// [`MAX_READ`] bytes; returns them ready to append to another pack.
fn read_verified(repo: &Repository, id: &Id, blobs: &[KeptBlob]) -> Result<Vec<PreparedBlob>> {
    let name = id.to_hex();
    let what_pack = Kind::Pack.path(&name);
    let mut out = Vec::with_capacity(blobs.len());
    let mut i = 0;
    while i < blobs.len() {
        let start = blobs[i].offset;
        let mut j = i;
        let mut end = start;
        while j < blobs.len()
            && (j == i || blobs[j].offset + blobs[j].stored_len as u64 - start <= MAX_READ)
        {
            end = end.max(blobs[j].offset + blobs[j].stored_len as u64);
            j += 1;
        }
        let data = repo
            .backend()
            .read_range(Kind::Pack, &name, start, end - start)?;
        for b in &blobs[i..j] {
            let at = (b.offset - start) as usize;
            let stored = &data[at..at + b.stored_len as usize];
            let entry = pack::PackEntry {
                ty: b.ty,
                id: b.id,
                offset: b.offset,
                stored_len: b.stored_len,
                plain_len: b.plain_len,
                compression: b.compression,
            };
            pack::open_blob(
                repo.keys(),
                repo,
                &pack::BlobIn {
                    id: &b.id,
                    pack: &what_pack,
                },
                &entry,
                stored,
            )?;
            out.push(PreparedBlob {
                ty: b.ty,
                id: b.id,
                plain_len: b.plain_len,
                compression: b.compression,
                stored: stored.to_vec(),
            });
        }
        i = j;
    }
    Ok(out)
}
