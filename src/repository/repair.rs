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
    /// writing its segment), reads their headers and indexes them in a new
    /// segment, so their blobs are reused instead of stored again. Packs a
    /// deletion plan lists are left alone.
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
                Ok(blobs) => seg.packs.push(IndexPack { id, size, blobs }),
                // A damaged orphan is reported by `check`; skip it here.
                Err(Error::Corrupt { .. }) => continue,
                Err(err) => return Err(err),
            }
        }
        let n = seg.packs.len();
        if n > 0 {
            let sid = index::write_segment(self.backend.as_ref(), &self.keys, &seg)?;
            self.index()?.absorb(&sid, &seg)?;
        }
        Ok(n)
    }

    /// Rebuilds `index/` from pack headers alone (`repair index`): writes one
    /// new segment for all readable packs, then removes the old segments,
    /// under an exclusive lock.
    pub fn repair_index(&self) -> Result<RepairReport> {
        // Old segments are deleted: nobody may be reading them meanwhile.
        let _lock = self.lock_exclusive()?;
        let mut report = RepairReport::default();
        let old = self.backend.list(Kind::Index)?;
        let mut seg = IndexSegment::default();
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
                    seg.packs.push(IndexPack {
                        id,
                        size: e.size,
                        blobs,
                    });
                }
                Err(err) => report.problems.push(err.to_string()),
            }
            if seg.packs.len() >= 4096 {
                written.push(index::write_segment(
                    self.backend.as_ref(),
                    &self.keys,
                    &seg,
                )?);
                seg = IndexSegment::default();
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
