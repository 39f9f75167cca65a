//! `repair packs`: salvaging damaged packs, as restic's command of that
//! name. `check --read-data` names a pack whose bytes went bad (a flipped
//! bit on disk, a truncated upload); without this, such a pack stays for
//! ever: prune keeps a pack it cannot verify, and the index keeps telling
//! backups that its lost blobs are stored, so they are never stored again.
//!
//! For each pack named, every blob it holds (by the index, and by its own
//! header when that still opens) is read, decrypted and re-hashed; the ones
//! that verify are copied unchanged into new packs (listed by a new index
//! segment), and the damaged pack is then dropped from the index and
//! deleted. A pack in which everything verifies is left as it is. What is
//! lost is then missing from the index, so the next backup of the same
//! paths stores it again from the files still on disk (the backup reuses an
//! unchanged file's chunks only when the index knows all of them), and
//! `repair snapshots` removes what no file on disk can give back.
//!
//! It runs under an exclusive lock (it deletes a pack that readers may be
//! reading), and first indexes the packs a killed run left unindexed, so a
//! blob another pack already holds is not copied again. Crash order: the copies are written and indexed first; then a
//! deletion plan naming the damaged packs (SPEC section 21), so that from
//! then on an unlisted damaged pack is never indexed again as an orphan;
//! then the index segments are rewritten without them; then they are
//! deleted, and the plan last. A run killed at any point leaves either the
//! damaged packs still listed (run it again) or a plan that the next prune
//! completes.

use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::index::marks::{DeletionPlan, Mark, MarkedPack, write_mark};
use crate::maintenance::prune::compact::compact;
use crate::pack::{self, PackEntry, PreparedBlob};
use crate::packer::{Packer, PackerStats};
use crate::repository::Repository;
use serde::Serialize;
use std::collections::HashSet;

/// The largest pack read whole: the format's pack size limit (1 GiB)
/// with room for the blob that crossed it.
const MAX_PACK_READ: u64 = 2 << 30;

/// What became of one pack.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every blob verified and the header matches the index: left alone.
    Intact,
    /// Its readable blobs were copied and the pack deleted.
    Repaired,
}

/// One pack's repair.
#[derive(Clone, Debug, Serialize)]
pub struct PackRepair {
    pub pack: String,
    pub outcome: Outcome,
    /// Blobs that verified: copied into new packs (unless another pack
    /// already holds a copy).
    pub salvaged: u64,
    /// Blobs that did not verify (or could not be found in the pack):
    /// each with its type and what was wrong.
    pub lost: Vec<LostBlob>,
    /// What was wrong with the pack itself (its name, header, or storage).
    pub problems: Vec<String>,
}

/// A blob that could not be salvaged.
#[derive(Clone, Debug, Serialize)]
pub struct LostBlob {
    pub id: String,
    #[serde(rename = "type")]
    pub ty: &'static str,
    pub reason: String,
}

/// What `repair packs` did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RepairPacksReport {
    pub packs: Vec<PackRepair>,
    /// The new packs the salvaged blobs went into.
    pub written: PackerStats,
}

impl RepairPacksReport {
    /// Blobs lost over all packs.
    pub fn lost(&self) -> usize {
        self.packs.iter().map(|p| p.lost.len()).sum()
    }
}

/// Salvages `packs` (see the module documentation).
pub fn repair_packs(repo: &Repository, packs: &[Id]) -> Result<RepairPacksReport> {
    let guard = repo.lock_exclusive()?;
    let lock = guard.handle();
    repo.sync_index()?;
    // Packs a killed run (this command's too) wrote but did not index:
    // indexed now, so a blob they hold is not copied again.
    repo.index_orphan_packs()?;
    let mut report = RepairPacksReport::default();
    let mut packer = Packer::with_lock(repo, Some(lock.clone()))?;
    let mut drop: Vec<MarkedPack> = Vec::new();
    // A copy in another pack named here is no copy: that pack may go too.
    let named: HashSet<Id> = packs.iter().copied().collect();
    for id in packs {
        crate::interrupt::check()?;
        let (r, salvaged, size) = examine(repo, id, &named)?;
        if r.outcome == Outcome::Repaired {
            for b in salvaged {
                packer.add_prepared(b)?;
            }
            drop.push(MarkedPack { id: *id, size });
        }
        report.packs.push(r);
    }
    // The copies are in packs and indexed before anything is removed.
    report.written = packer.finish()?;
    if drop.is_empty() {
        return Ok(report);
    }
    lock.check()?;
    let plan = write_mark(
        repo.backend(),
        repo.keys(),
        &Mark::Plan(DeletionPlan {
            created: crate::host::now_secs(),
            packs: drop.clone(),
        }),
    )?;
    repo.sync_index()?;
    let ids: HashSet<Id> = drop.iter().map(|m| m.id).collect();
    let compaction = compact(repo, &lock, &ids)?;
    if !compaction.unreadable.is_empty() {
        // A segment that still lists the packs stays: deleting them now
        // would leave the index naming blobs that are gone. The plan
        // stays too, so no later open indexes them as orphans.
        return Err(Error::corrupt(
            "index",
            format!(
                "segments that could not be read still list the packs: {}; \
                 run `larder repair index`, then this command again",
                compaction.unreadable.join("; ")
            ),
        ));
    }
    for m in &drop {
        lock.check()?;
        match repo.backend().delete(Kind::Pack, &m.id.to_hex()) {
            Err(e) if !e.is_not_found() => return Err(e),
            _ => {}
        }
    }
    lock.check()?;
    repo.backend().delete(Kind::Mark, &plan.to_hex())?;
    repo.sync_index()?;
    Ok(report)
}

/// Reads pack `id` and verifies each of its blobs: what it found, the
/// blobs that verified (ready to copy, unless a pack not in `named` holds
/// them too), and the pack's size.
fn examine(
    repo: &Repository,
    id: &Id,
    named: &HashSet<Id>,
) -> Result<(PackRepair, Vec<PreparedBlob>, u64)> {
    let name = id.to_hex();
    let what = Kind::Pack.path(&name);
    let mut r = PackRepair {
        pack: name.clone(),
        outcome: Outcome::Repaired,
        salvaged: 0,
        lost: Vec::new(),
        problems: Vec::new(),
    };
    let indexed: Vec<PackEntry> = repo.index()?.blobs_in_pack(id)?;
    let index_size = repo.index()?.pack_size(id)?;
    let bytes = match repo.backend().size(Kind::Pack, &name) {
        Ok(s) if s > MAX_PACK_READ => {
            return Err(Error::corrupt(
                &what,
                format!("{s} bytes, more than any pack holds; not read"),
            ));
        }
        Ok(s) => match repo.backend().read_bounded(Kind::Pack, &name, s) {
            Ok(b) => Some(b),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e),
        },
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e),
    };
    let Some(bytes) = bytes else {
        r.problems
            .push(format!("{what}: missing from storage; its blobs are lost"));
        for e in &indexed {
            r.lost.push(lost(e, "its pack is missing".into()));
        }
        return Ok((r, Vec::new(), index_size.unwrap_or(0)));
    };
    let size = bytes.len() as u64;
    if index_size.is_some_and(|s| s != size) {
        r.problems.push(format!(
            "{what}: size {size} differs from the index's {}",
            index_size.unwrap_or(0)
        ));
    }
    if Id::of_object(&bytes) != *id {
        r.problems
            .push(format!("{what}: contents do not hash to the pack's name"));
    }
    // The blobs to try: the index's entries, and the header's where it
    // opens (a pack the index does not list has only those).
    let mut entries = indexed.clone();
    match pack::read_entries(repo.keys(), &what, &bytes) {
        Ok(header) => {
            let listed: HashSet<Id> = indexed.iter().map(|e| e.id).collect();
            if !indexed.is_empty() && header.len() != indexed.len()
                || header
                    .iter()
                    .any(|e| !indexed.is_empty() && !indexed.contains(e))
            {
                r.problems.push(format!(
                    "{what}: the header differs from the index's entries"
                ));
            }
            entries.extend(header.into_iter().filter(|e| !listed.contains(&e.id)));
        }
        Err(e) => r.problems.push(e.to_string()),
    }
    let mut salvaged = Vec::new();
    for e in &entries {
        let end = e.offset.checked_add(e.stored_len as u64);
        let Some(stored) = end
            .filter(|&end| end <= size)
            .map(|end| &bytes[e.offset as usize..end as usize])
        else {
            r.lost
                .push(lost(e, "lies beyond the end of the pack".into()));
            continue;
        };
        let at = pack::BlobIn {
            id: &e.id,
            pack: &what,
        };
        match pack::open_blob(repo.keys(), repo, &at, e, stored) {
            Ok(_) => salvaged.push(PreparedBlob {
                ty: e.ty,
                id: e.id,
                plain_len: e.plain_len,
                compression: e.compression,
                stored: stored.to_vec(),
            }),
            Err(err) => r.lost.push(lost(e, err.to_string())),
        }
    }
    r.salvaged = salvaged.len() as u64;
    if r.problems.is_empty() && r.lost.is_empty() {
        r.outcome = Outcome::Intact;
        salvaged.clear();
    }
    // A blob another pack also holds (an earlier run's copy, killed before
    // it deleted this pack) is not copied again.
    let ids: Vec<Id> = salvaged.iter().map(|b| b.id).collect();
    let elsewhere = repo.index()?.copies_elsewhere(named, &ids)?;
    salvaged.retain(|b| !elsewhere.contains(&b.id));
    Ok((r, salvaged, size))
}

fn lost(e: &PackEntry, reason: String) -> LostBlob {
    LostBlob {
        id: e.id.to_hex(),
        ty: match e.ty {
            pack::BlobType::Data => "data",
            pack::BlobType::Tree => "tree",
        },
        reason,
    }
}
