//! The second phase of prune: deleting what earlier prunes marked, once it
//! is safe (SPEC section 21, rule 4). For each plan: its holders object is
//! old enough by the storage's clock, none of its holders still runs, and
//! then, by the snapshots as they are after that was established, each of
//! its packs holds nothing a snapshot needs. Packs that became needed again
//! are kept. Deletion order: index segments without the packs first, then
//! the packs, the leftovers of killed writes, and the marks.

use super::compact::{Compaction, compact};
use super::marking::{FoundMarks, holders_age, live_holders, still_held, write_holders};
use super::usage_map::needed_blobs;
use super::{all_snapshot_roots, human_duration};
use crate::backend::Kind;
use crate::error::Result;
use crate::id::Id;
use crate::lock::LockHandle;
use crate::maintenance::usage::Usage;
use crate::progress::Tally;
use crate::repository::Repository;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// A plan that is not deleted yet, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Waiting {
    pub plan: String,
    pub packs: usize,
    pub bytes: u64,
    pub reason: String,
}

/// What the sweep did (or, in a dry run, would do).
#[derive(Debug, Default, Clone, Serialize)]
pub struct SweepReport {
    /// Plans whose packs were deleted (or kept because needed again).
    pub plans_done: usize,
    pub waiting: Vec<Waiting>,
    pub packs_deleted: usize,
    pub bytes_deleted: u64,
    /// Marked packs that a snapshot written since needs: kept.
    pub packs_rescued: usize,
    pub leftovers_removed: usize,
    pub compaction: Option<Compaction>,
}

/// How a sweep runs: the grace period a plan waits, whether it only says
/// what it would delete, and whether it is the prune's last phase.
#[derive(Clone, Copy, Debug)]
pub struct SweepMode {
    pub grace: Duration,
    pub dry_run: bool,
    /// No phase of the prune comes after this one (for the progress).
    pub last: bool,
}

/// Sweeps the plans in `found` that are due, counting each pack deleted
/// in `tally`.
///
/// `marked` is a used-blob set this run already holds (the one its mark
/// phase filled), or `None` to start an empty one. Either way the sweep
/// marks every snapshot as it is now into it; one already in it costs a
/// single lookup, because a tree in the set had all it references added
/// with it. A snapshot forgotten since leaves its blobs in the set: the
/// set can only be larger than the snapshots need, which keeps packs, never
/// deletes one that is needed.
pub fn sweep(
    repo: &Repository,
    lock: &LockHandle,
    mode: SweepMode,
    found: &FoundMarks,
    tally: &mut Tally,
    marked: Option<Usage>,
) -> Result<SweepReport> {
    let SweepMode {
        grace,
        dry_run,
        last,
    } = mode;
    let mut r = SweepReport::default();
    // Who runs now: known before the snapshots are read (rule 4 b, c).
    let (live, unreadable_live) = live_holders(repo)?;
    let mut due = Vec::new();
    for p in &found.plans {
        let bytes = p.plan.packs.iter().map(|m| m.size).sum();
        let wait = |reason: String| Waiting {
            plan: p.id.to_hex(),
            packs: p.plan.packs.len(),
            bytes,
            reason,
        };
        let Some((hid, h)) = &p.holders else {
            // Its prune was killed between the two objects: complete it.
            if !dry_run {
                lock.check()?;
                write_holders(repo, &p.id)?;
            }
            r.waiting.push(wait(
                "its prune was interrupted; the plan is completed now and waits its grace period"
                    .into(),
            ));
            continue;
        };
        let age = holders_age(repo, hid, h)?;
        if age < grace {
            r.waiting.push(wait(format!(
                "marked {} ago; deleted once {} old",
                human_duration(age),
                human_duration(grace)
            )));
        } else if let Some(reason) = still_held(h, &live, unreadable_live) {
            r.waiting.push(wait(reason));
        } else {
            due.push((p, *hid, h));
        }
    }
    if due.is_empty() {
        if !dry_run {
            remove_marks(repo, lock, &found.orphans)?;
        }
        return Ok(r);
    }
    // What the snapshots need now, including any a holder wrote.
    let mut u = match marked {
        Some(u) => u,
        None => Usage::new(repo)?,
    };
    u.mark(repo, all_snapshot_roots(repo)?)?;
    let mut delete: HashSet<Id> = HashSet::new();
    let mut sizes: HashMap<Id, u64> = HashMap::new();
    for (p, _, _) in &due {
        for m in &p.plan.packs {
            sizes.insert(m.id, m.size);
            // Unused, or already unlisted by an interrupted sweep: 0.
            if needed_blobs(&u, &m.id)? > 0 {
                r.packs_rescued += 1;
            } else {
                delete.insert(m.id);
            }
        }
    }
    r.plans_done = due.len();
    r.packs_deleted = delete.len();
    r.bytes_deleted = delete
        .iter()
        .map(|id| sizes.get(id).copied().unwrap_or(0))
        .sum();
    let leftovers: Vec<&String> = due.iter().flat_map(|(_, _, h)| &h.leftovers).collect();
    r.leftovers_removed = leftovers.len();
    if dry_run {
        return Ok(r);
    }
    drop(u);
    tally.ahead(r.packs_deleted as u64, r.bytes_deleted, last);
    // Rule 5: unlist, then delete.
    r.compaction = Some(compact(repo, lock, &delete)?);
    for id in &delete {
        lock.check()?;
        repo.backend().delete(Kind::Pack, &id.to_hex())?;
        tally.one(sizes.get(id).copied().unwrap_or(0));
    }
    for l in leftovers {
        repo.backend().remove_leftover(l)?;
    }
    let mut marks: Vec<Id> = found.orphans.clone();
    for (p, hid, _) in &due {
        marks.push(*hid);
        marks.push(p.id);
    }
    remove_marks(repo, lock, &marks)?;
    repo.sync_index()?;
    Ok(r)
}

/// Deletes mark objects.
fn remove_marks(repo: &Repository, lock: &LockHandle, marks: &[Id]) -> Result<()> {
    for id in marks {
        lock.check()?;
        repo.backend().delete(Kind::Mark, &id.to_hex())?;
    }
    Ok(())
}
