//! `recover`: a snapshot of the trees no snapshot reaches any more, as
//! restic's command of that name. After a `forget` of the wrong snapshots
//! (or snapshot objects lost some other way), their data stays in the
//! repository until a prune; `recover` finds each tree that neither a
//! snapshot nor another tree references (a lost snapshot's root, or what
//! lies below a tree that can no longer be read) and saves one snapshot,
//! path `/recover`, whose root holds a directory for each, named by the
//! tree's short id. `restore SNAPSHOT:/ID` then gives a lost tree back.
//!
//! Which trees are referenced is kept in a temporary on-disk set
//! ([`Usage`]), so memory stays flat; the tree ids come from the index
//! cache attached to it. A tree that cannot be read is reported and left
//! out (what it references counts as unreferenced, so it is recovered one
//! level down). Blobs below a lost tree that a prune has deleted are
//! counted and reported; the snapshot is saved all the same (what is left
//! of the data is the user's), and `repair snapshots` makes it whole.
//!
//! It takes an exclusive lock (a dry run, a reader's): a backup running
//! beside it would have trees no snapshot references *yet*, and a prune
//! beside it could delete a lost tree's packs between the search and the
//! save. Once its snapshot is saved, the next prune keeps the packs it
//! uses, marked or not (SPEC 21, rule 4 (c)). Its root tree is the same
//! for the same lost trees (the entries carry no time), and a root of that
//! shape found lost (a run killed before its snapshot was saved) stands
//! for its entries: run again, it saves the snapshot it would have saved.

use super::usage::Usage;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::pack::BlobType;
use crate::packer::Packer;
use crate::repository::Repository;
use crate::snapshot::{self, Snapshot, Summary};
use crate::tree::{Node, NodeKind, Tree};
use rusqlite::params;
use serde::Serialize;

/// The one path of a recovery snapshot.
pub const RECOVER_PATH: &str = "/recover";

/// Tree ids read from the index at once.
const PAGE: i64 = 1_000;

/// What `recover` found and did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RecoverReport {
    pub dry_run: bool,
    /// Tree blobs the index holds, each read once.
    pub trees: u64,
    /// The trees nothing references (full hex ids, sorted).
    pub lost: Vec<String>,
    /// Trees that could not be read, each with the reason: left out.
    pub unreadable: Vec<String>,
    /// Blobs below the lost trees that the repository no longer holds
    /// (a prune deleted them): the snapshot is saved all the same, and
    /// `repair snapshots` then makes it whole.
    pub missing_blobs: u64,
    /// The snapshot saved (none on a dry run or with nothing lost).
    pub snapshot_id: Option<String>,
}

/// Finds the trees no snapshot reaches and, unless `dry_run`, saves a
/// snapshot holding them (see the module documentation).
pub fn recover(repo: &Repository, dry_run: bool) -> Result<RecoverReport> {
    let guard = if dry_run {
        None
    } else {
        Some(repo.lock_exclusive()?)
    };
    let _read_lock = if dry_run {
        repo.lock_for_reading()?
    } else {
        None
    };
    // Under the lock: every segment written before it.
    repo.sync_index()?;
    let mut referenced = Usage::new(repo)?;
    let (snaps, _) = snapshot::list(repo, &snapshot::Filter::default())?;
    for (_, s) in &snaps {
        referenced.insert(&s.tree)?;
    }
    let mut report = RecoverReport {
        dry_run,
        ..RecoverReport::default()
    };
    let mut unreadable_ids = Vec::new();
    let mut after: Option<Id> = None;
    loop {
        let page = tree_ids_after(&referenced, after, false)?;
        let Some(last) = page.last() else { break };
        after = Some(*last);
        for id in page {
            crate::interrupt::check()?;
            report.trees += 1;
            match repo.load_tree_checked(&id) {
                Ok(tree) => {
                    for n in &tree.nodes {
                        if let (NodeKind::Dir, Some(sub)) = (n.kind, n.subtree) {
                            referenced.insert(&sub)?;
                        }
                    }
                }
                Err(e) => {
                    report.unreadable.push(format!("tree {id}: {e}"));
                    unreadable_ids.push(id);
                }
            }
        }
    }
    referenced.end_reads()?;
    let mut lost = Vec::new();
    let mut after = None;
    loop {
        let page = tree_ids_after(&referenced, after, true)?;
        let Some(last) = page.last() else { break };
        after = Some(*last);
        lost.extend(page.into_iter().filter(|id| !unreadable_ids.contains(id)));
    }
    let lost = expand_earlier_roots(repo, lost)?;
    report.lost = lost.iter().map(Id::to_hex).collect();
    drop(referenced);
    report.missing_blobs = missing_below(repo, &lost)?;
    let Some(guard) = guard else {
        return Ok(report);
    };
    if lost.is_empty() {
        return Ok(report);
    }
    let root = root_tree(&lost);
    let mut packer = Packer::with_lock(repo, Some(guard.handle()))?;
    let (tree_id, _) = packer.add(BlobType::Tree, &root.encode()?)?;
    packer.finish()?;
    let snap = Snapshot::by_this_process(
        crate::host::now_ns(),
        crate::host::hostname(),
        vec![RECOVER_PATH.to_string()],
        Vec::new(),
        tree_id,
        None,
        Summary::default(),
    );
    crate::interrupt::check()?;
    guard.check()?;
    report.snapshot_id = Some(snapshot::save(repo, &snap)?.to_hex());
    Ok(report)
}

/// Up to [`PAGE`] distinct tree ids from the index after `after`, in
/// order: all of them, or (`lost`) those not in `referenced`.
fn tree_ids_after(referenced: &Usage, after: Option<Id>, lost: bool) -> Result<Vec<Id>> {
    let sql = format!(
        "SELECT DISTINCT b.id FROM idx.blobs b WHERE b.type = ?1 AND b.id > ?2 {} \
         ORDER BY b.id LIMIT ?3",
        if lost {
            "AND NOT EXISTS (SELECT 1 FROM used u WHERE u.id = b.id)"
        } else {
            ""
        }
    );
    let from = after.map_or(Vec::new(), |a| a.0.to_vec());
    let conn = referenced.conn();
    let sq = |e| Error::internal(format!("listing the index's trees: {e}"));
    let mut st = conn.prepare_cached(&sql).map_err(sq)?;
    let rows = st
        .query_map(params![BlobType::Tree as u8, from, PAGE], |r| {
            r.get::<_, [u8; 32]>(0)
        })
        .map_err(sq)?;
    rows.map(|r| r.map(Id).map_err(sq)).collect()
}

/// How many blobs below `roots` (trees, and the data their files name)
/// the index does not hold, or cannot be read as trees; each tree is
/// visited once (an on-disk set).
fn missing_below(repo: &Repository, roots: &[Id]) -> Result<u64> {
    let mut visited = Usage::new(repo)?;
    let mut missing = 0;
    let mut stack = roots.to_vec();
    while let Some(id) = stack.pop() {
        crate::interrupt::check()?;
        if !visited.insert(&id)? {
            continue;
        }
        let Ok(tree) = repo.load_tree_checked(&id) else {
            missing += 1;
            continue;
        };
        for n in tree.nodes {
            match (n.kind, n.subtree) {
                (NodeKind::Dir, Some(sub)) => stack.push(sub),
                (NodeKind::File, _) => {
                    for c in &n.content {
                        if repo.lookup(c)?.is_none() {
                            missing += 1;
                        }
                    }
                }
                _ => {}
            }
        }
    }
    Ok(missing)
}

/// Whether `tree` has the shape of a recovery root: every entry a
/// directory named by its subtree's short or full id.
fn is_recovery_root(tree: &Tree) -> bool {
    !tree.nodes.is_empty()
        && tree.nodes.iter().all(|n| match (n.kind, n.subtree) {
            (NodeKind::Dir, Some(sub)) => {
                n.name == sub.short().as_bytes() || n.name == sub.to_hex().as_bytes()
            }
            _ => false,
        })
}

/// The lost trees, each recovery root among them (an earlier, killed
/// run's) replaced by its entries; sorted, without repeats.
fn expand_earlier_roots(repo: &Repository, lost: Vec<Id>) -> Result<Vec<Id>> {
    let mut out = Vec::new();
    let mut stack = lost;
    while let Some(id) = stack.pop() {
        match repo.load_tree_checked(&id) {
            Ok(t) if is_recovery_root(&t) => {
                stack.extend(t.nodes.iter().filter_map(|n| n.subtree));
            }
            _ => out.push(id),
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The root of a recovery snapshot: a directory per lost tree, named by
/// its short id (the full id if two short ids are alike), with no times,
/// so the same lost trees give the same root.
fn root_tree(lost: &[Id]) -> Tree {
    let mut shorts: Vec<String> = lost.iter().map(Id::short).collect();
    shorts.sort();
    shorts.dedup();
    let full = shorts.len() < lost.len();
    let nodes = lost
        .iter()
        .map(|id| Node {
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
            user: crate::host::username().into(),
            subtree: Some(*id),
            ..Node::made_up(
                if full { id.to_hex() } else { id.short() }.into_bytes(),
                NodeKind::Dir,
                0o755,
            )
        })
        .collect();
    let mut t = Tree { nodes };
    t.canonicalize();
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(b: u8) -> Id {
        Id([b; 32])
    }

    #[test]
    fn a_root_names_each_lost_tree_and_is_the_same_each_time() {
        let lost = [id(1), id(2)];
        let t = root_tree(&lost);
        let names: Vec<String> = t.nodes.iter().map(Node::name_lossy).collect();
        assert_eq!(names, [id(1).short(), id(2).short()]);
        assert!(is_recovery_root(&t));
        assert_eq!(t.encode().unwrap(), root_tree(&lost).encode().unwrap());
        // Alike short ids: full ids instead.
        let mut a = [0u8; 32];
        a[31] = 1;
        let t = root_tree(&[Id([0; 32]), Id(a)]);
        assert_eq!(t.nodes[1].name, Id(a).to_hex().into_bytes());
        assert!(is_recovery_root(&t));
    }

    #[test]
    fn a_users_directory_is_not_taken_for_a_recovery_root() {
        let mut t = root_tree(&[id(3)]);
        t.nodes[0].name = b"Documents".to_vec();
        assert!(!is_recovery_root(&t));
        assert!(!is_recovery_root(&Tree { nodes: Vec::new() }));
        let mut f = root_tree(&[id(4)]);
        f.nodes[0].kind = NodeKind::File;
        assert!(!is_recovery_root(&f));
    }
}
