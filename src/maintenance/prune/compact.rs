//! Index compaction: every readable index segment is rewritten into a few
//! large ones (leaving out packs being deleted), and only then are the old
//! segments removed, so the union of the segments never loses a pack that
//! stays. Segments written meanwhile by running backups are not touched.
//! A repository after a thousand backups opens as fast as after ten.

use crate::backend::Kind;
use crate::error::Result;
use crate::id::Id;
use crate::index::{IndexSegment, SEGMENT_BLOBS, read_segment, write_segment};
use crate::lock::LockHandle;
use crate::repository::Repository;
use std::collections::HashSet;

// A new segment is written once it lists [`SEGMENT_BLOBS`] blobs. Their
// ids alone (32 random bytes each, which do not compress) fill
// [`SMALL_SEGMENT`], so a full segment is never merged again by the next
// compaction.
const _: () = assert!(SEGMENT_BLOBS * 32 >= SMALL_SEGMENT as usize);

/// What a compaction did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Compaction {
    pub segments_before: usize,
    /// Segments rewritten (and deleted).
    pub segments_replaced: usize,
    pub segments_written: usize,
    /// Packs left out (being deleted).
    pub packs_dropped: usize,
    /// Segments that could not be read and were left alone.
    pub unreadable: Vec<String>,
}

/// Segments smaller than this (bytes) are merged into larger ones.
const SMALL_SEGMENT: u64 = 2 << 20;

/// Rewrites the segments that list a pack in `drop` (leaving it out) and,
/// when there are several, the small ones (merged), then deletes them.
/// Memory holds one output segment and the set of pack ids.
pub fn compact(repo: &Repository, lock: &LockHandle, drop: &HashSet<Id>) -> Result<Compaction> {
    let listed = repo.backend().list(Kind::Index)?;
    let dropped: Vec<Id> = drop.iter().copied().collect();
    let touching: HashSet<String> = repo
        .index()?
        .segments_listing(&dropped)?
        .iter()
        .map(Id::to_hex)
        .collect();
    let small = listed.iter().filter(|e| e.size < SMALL_SEGMENT).count();
    let old: Vec<_> = listed
        .iter()
        .filter(|e| touching.contains(&e.name) || (small > 1 && e.size < SMALL_SEGMENT))
        .collect();
    let mut report = Compaction {
        segments_before: listed.len(),
        ..Compaction::default()
    };
    let mut seen: HashSet<Id> = HashSet::new();
    let mut replaced = Vec::new();
    let mut out = IndexSegment::default();
    let mut out_blobs = 0usize;
    for e in old {
        crate::interrupt::check()?;
        let seg = match read_segment(repo.backend(), repo.keys(), &e.name) {
            Ok(s) => s,
            Err(err) => {
                report.unreadable.push(err.to_string());
                continue;
            }
        };
        replaced.push(e.name.clone());
        for p in seg.packs {
            if drop.contains(&p.id) {
                report.packs_dropped += 1;
                continue;
            }
            if !seen.insert(p.id) {
                continue;
            }
            out_blobs += p.blobs.len();
            out.packs.push(p);
            if out_blobs >= SEGMENT_BLOBS {
                flush(repo, lock, &mut out, &mut report)?;
                out_blobs = 0;
            }
        }
    }
    flush(repo, lock, &mut out, &mut report)?;
    // Every pack that stays is listed by a new segment now.
    report.segments_replaced = replaced.len();
    for name in replaced {
        lock.check()?;
        repo.backend().delete(Kind::Index, &name)?;
    }
    repo.sync_index()?;
    Ok(report)
}

fn flush(
    repo: &Repository,
    lock: &LockHandle,
    out: &mut IndexSegment,
    report: &mut Compaction,
) -> Result<()> {
    if out.packs.is_empty() {
        return Ok(());
    }
    lock.check()?;
    let seg = IndexSegment {
        packs: std::mem::take(&mut out.packs),
    };
    write_segment(repo.backend(), repo.keys(), &seg)?;
    report.segments_written += 1;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::{Keys, MasterKey};
    use crate::index::IndexPack;
    use crate::pack::{BlobType, PackEntry};

    /// A full segment as compaction writes it (packs of 16 blobs of about
    /// a megabyte, random ids) is stored in more than [`SMALL_SEGMENT`]
    /// bytes, so the next compaction leaves it alone, and in less than
    /// 4 MiB, which bounds what a reader holds while decoding it.
    #[test]
    fn a_full_segment_is_not_small_and_stays_bounded() {
        let keys = Keys::derive(&MasterKey::from_bytes([7; 32]));
        let mut seg = IndexSegment::default();
        let mut blobs = 0;
        while blobs < SEGMENT_BLOBS {
            let mut entries = Vec::new();
            let mut offset = 0u64;
            for _ in 0..16 {
                let plain_len = 700_000 + (blobs as u32 % 900_000);
                entries.push(PackEntry {
                    ty: BlobType::Data,
                    id: crate::crypto::random_id().unwrap(),
                    offset,
                    stored_len: plain_len / 2 + 40,
                    plain_len,
                    compression: 1,
                });
                offset += u64::from(plain_len / 2 + 40);
                blobs += 1;
            }
            seg.packs.push(IndexPack {
                id: crate::crypto::random_id().unwrap(),
                size: offset,
                blobs: entries,
            });
        }
        let stored = crate::object::seal(&keys, crate::object::ObjectType::Index, &seg)
            .unwrap()
            .len();
        assert!(stored as u64 > SMALL_SEGMENT, "{stored} bytes");
        assert!(stored < 4 << 20, "{stored} bytes");
    }
}
