//! Rebuilding the index from the packs themselves: `repair index`, and the
//! indexing of packs that a killed run left without an index segment.

use super::Repository;
use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::index::{self, IndexPack, IndexSegment};
use serde::Serialize;
use std::collections::HashSet;

impl Repository {
    /// Finds packs that no index segment lists (left by a run that died before
    /// writing its segment), reads their headers and indexes them in new
    /// segments (of at most [`index::SEGMENT_BLOBS`] blobs each, unless one
    /// pack holds more), so their blobs are reused instead of stored again.
    /// Packs a deletion plan lists are left alone.
    pub fn index_orphan_packs(&self) -> Result<usize> {
        // Each listed pack is looked up in the index (in ID order), rather
        // than the index's packs all loaded to compare against: memory and
        // time stay flat however many packs the repository holds.
        let mut listed: Vec<(Id, u64)> = self
            .backend
            .list(Kind::Pack)?
            .into_iter()
            .filter_map(|e| Id::from_hex(&e.name).ok().map(|id| (id, e.size)))
            .collect();
        listed.sort_unstable();
        let ids: Vec<Id> = listed.iter().map(|(id, _)| *id).collect();
        let unlisted = self.index()?.packs_not_listed(&ids)?;
        drop(ids);
        let mut seg = IndexSegment::default();
        let (mut n, mut blobs) = (0, 0);
        for i in unlisted {
            let Some(&(id, size)) = listed.get(i) else {
                continue;
            };
            // A pack a deletion plan lists is on its way out: prune
            // unlisted it on purpose, and it must stay unlisted.
            if self.index()?.is_marked(&id)? {
                continue;
            }
            match self.read_pack_header(&id, size) {
                Ok(entries) => {
                    blobs += entries.len();
                    n += 1;
                    seg.packs.push(IndexPack {
                        id,
                        size,
                        blobs: entries,
                    });
                }
                // A damaged orphan is reported by `check`; skip it here.
                Err(Error::Corrupt { .. }) => continue,
                Err(err) => return Err(err),
            }
            if blobs >= index::SEGMENT_BLOBS {
                self.write_orphans_segment(&mut seg)?;
                blobs = 0;
            }
        }
        self.write_orphans_segment(&mut seg)?;
        Ok(n)
    }

    /// Writes `seg` (emptied) as a new segment and absorbs it; nothing if
    /// it lists no pack.
    fn write_orphans_segment(&self, seg: &mut IndexSegment) -> Result<()> {
        if !seg.packs.is_empty() {
            let seg = std::mem::take(seg);
            let sid = index::write_segment(self.backend.as_ref(), &self.keys, &seg)?;
            self.index()?.absorb(&sid, &seg)?;
        }
        Ok(())
    }

    /// Rebuilds `index/` from pack headers alone (`repair index`): writes new
    /// segments for all readable packs (a new one after 4096 packs or
    /// [`index::SEGMENT_BLOBS`] blobs), then removes the old segments, under
    /// an exclusive lock.
    pub fn repair_index(&self) -> Result<RepairReport> {
        // Old segments are deleted: nobody may be reading them meanwhile.
        let _lock = self.lock_exclusive()?;
        let mut report = RepairReport::default();
        let old = self.backend.list(Kind::Index)?;
        let mut seg = IndexSegment::default();
        let mut seg_blobs = 0;
        let mut written = Vec::new();
        for e in self.backend.list(Kind::Pack)? {
            let Ok(id) = Id::from_hex(&e.name) else {
                report
                    .problems
                    .push(format!("{}: name is not an id", Kind::Pack.path(&e.name)));
                continue;
            };
            match self.read_pack_header(&id, e.size) {
                Ok(blobs) => {
                    report.packs += 1;
                    report.blobs += blobs.len();
                    seg_blobs += blobs.len();
                    seg.packs.push(IndexPack {
                        id,
                        size: e.size,
                        blobs,
                    });
                }
                Err(err) => report.problems.push(err.to_string()),
            }
            if seg.packs.len() >= 4096 || seg_blobs >= index::SEGMENT_BLOBS {
                written.push(index::write_segment(
                    self.backend.as_ref(),
                    &self.keys,
                    &seg,
                )?);
                seg = IndexSegment::default();
                seg_blobs = 0;
            }
        }
        if !seg.packs.is_empty() {
            written.push(index::write_segment(
                self.backend.as_ref(),
                &self.keys,
                &seg,
            )?);
        }
        let keep: HashSet<String> = written.iter().map(Id::to_hex).collect();
        for e in old {
            if !keep.contains(&e.name) {
                self.backend.delete(Kind::Index, &e.name)?;
            }
        }
        self.index()?.clear()?;
        self.sync_index()?;
        Ok(report)
    }
}

/// What `repair index` found.
#[derive(Debug, Default, Serialize)]
pub struct RepairReport {
    pub packs: usize,
    pub blobs: usize,
    pub problems: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::BlobType;
    use crate::packer::Packer;
    use crate::packer::tests::assert_bounded_segments;
    use crate::repository::test_repository;

    /// Packs of small blobs that no segment lists are indexed in segments
    /// of about [`index::SEGMENT_BLOBS`] blobs (not one segment for them
    /// all), and `repair index` rebuilds the index the same way; every
    /// blob is found after each.
    #[test]
    fn orphans_and_repair_write_segments_of_bounded_blobs() {
        let d = tempfile::tempdir().unwrap();
        let repo = test_repository(d.path());
        let mut p = Packer::new(&repo).unwrap();
        let n = 2 * index::SEGMENT_BLOBS + 5000;
        let ids: HashSet<Id> = (0..n as u64)
            .map(|i| p.add(BlobType::Data, &i.to_le_bytes()).unwrap().0)
            .collect();
        p.finish().unwrap();
        let all_found = |repo: &Repository| {
            let idx = repo.index().unwrap();
            ids.iter().all(|id| idx.contains(id).unwrap())
        };

        // The run's segments lost: its packs are orphans.
        for e in repo.backend().list(Kind::Index).unwrap() {
            repo.backend().delete(Kind::Index, &e.name).unwrap();
        }
        repo.index().unwrap().clear().unwrap();
        assert!(!all_found(&repo));
        let packs = repo.backend().list(Kind::Pack).unwrap().len();
        assert_eq!(repo.index_orphan_packs().unwrap(), packs);
        assert_bounded_segments(&repo, &ids);
        assert!(all_found(&repo));

        let report = repo.repair_index().unwrap();
        assert_eq!((report.packs, report.blobs), (packs, n));
        assert_bounded_segments(&repo, &ids);
        assert!(all_found(&repo));
    }
}
