//! `repair snapshots`: new snapshots without what is lost. A snapshot whose
//! trees reference blobs the index does not hold is rewritten: a file with
//! a missing chunk is removed (or, with `truncate`, cut before its first
//! missing chunk), a directory whose tree cannot be loaded becomes empty,
//! and each change is reported. The new snapshot keeps the original's time,
//! host, user, paths, parent and summary, and its tags plus `repaired` and
//! `original:<short id>` (the snapshot format has no field for the original,
//! so a tag records it; a snapshot repaired again keeps its first
//! `original:` tag). The original is removed only with `forget`. Snapshots
//! that need no repair are left alone.
//!
//! Safe beside other larder processes: it takes a shared lock (it deletes
//! nothing another process may be reading except, with `forget`, snapshot
//! files, which a running backup has already read) and checks it before
//! every write. The order of writes is tree blobs (packs, then their index
//! segment), then the new snapshots, then the removals. Killed anywhere, the
//! repository is consistent; run again, it finds the new snapshot an earlier
//! run saved (same tree, time, host, paths and tags) and reuses it instead
//! of saving a second one. Which trees were found whole is kept in a
//! temporary on-disk set ([`Usage`]), so memory stays flat.

use super::usage::Usage;
use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::pack::BlobType;
use crate::packer::Packer;
use crate::repository::Repository;
use crate::snapshot::{self, Snapshot};
use crate::tree::{Node, NodeKind, Tree};
use serde::Serialize;

/// The tag every repaired snapshot carries.
pub const REPAIRED_TAG: &str = "repaired";

/// The prefix of the tag naming the snapshot a repaired one replaces.
pub const ORIGINAL_TAG_PREFIX: &str = "original:";

/// How to repair.
#[derive(Clone, Copy, Debug, Default)]
pub struct RepairOptions {
    /// Keep a damaged file's content up to its first missing chunk instead
    /// of removing the file.
    pub truncate: bool,
    /// Remove each original once its repaired snapshot is saved (and
    /// snapshots with nothing left to save).
    pub forget: bool,
    /// Report what would change; write nothing.
    pub dry_run: bool,
}

/// One change to a snapshot's contents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Change {
    /// A file with a missing chunk was left out.
    FileRemoved { path: String, missing_blob: String },
    /// A file was cut before its first missing chunk.
    FileTruncated {
        path: String,
        missing_blob: String,
        size_before: u64,
        size_after: u64,
    },
    /// A directory whose tree could not be loaded is now empty.
    DirEmptied { path: String, error: String },
    /// A directory whose tree lies deeper than readers go
    /// ([`crate::tree::MAX_DEPTH`]) was left out, with all below it.
    DirRemoved { path: String, error: String },
    /// The snapshot's root tree could not be loaded: nothing can be saved.
    RootUnreadable { error: String },
}

/// What happened to one damaged snapshot.
#[derive(Clone, Debug, Serialize)]
pub struct SnapshotRepair {
    pub snapshot: String,
    pub changes: u64,
    /// The repaired snapshot (none on a dry run or when the root is lost).
    pub new_snapshot: Option<String>,
    /// The repaired snapshot had been saved by an earlier, interrupted run.
    pub reused: bool,
    /// The original was removed (`forget`).
    pub forgotten: bool,
}

/// What `repair snapshots` did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RepairReport {
    pub dry_run: bool,
    /// Snapshots examined.
    pub checked: u64,
    /// The snapshots that needed repair (the others were left alone).
    pub repaired: Vec<SnapshotRepair>,
    /// New tree blobs stored.
    pub trees_written: u64,
    /// Chosen snapshots that another process removed (or replaced) before
    /// this one held its lock: left as they are.
    pub vanished: Vec<String>,
}

/// What rewriting one tree gave.
enum Outcome {
    Same,
    New(Id),
    Unreadable(Error),
}

/// One run's state: the set of trees found whole, the packer for new
/// trees, and the listener for changes.
struct Rewriter<'r, 'f> {
    repo: &'r Repository,
    opts: RepairOptions,
    whole: Usage,
    packer: Option<Packer<'r>>,
    empty_tree: Option<Id>,
    on_change: &'f mut dyn FnMut(&Id, &Change),
    snapshot: Id,
    changes: u64,
}

/// Repairs `snaps` (see the module documentation), reporting each change
/// to `on_change` as it is found.
pub fn repair_snapshots(
    repo: &Repository,
    snaps: &[(Id, Snapshot)],
    opts: RepairOptions,
    on_change: &mut dyn FnMut(&Id, &Change),
) -> Result<RepairReport> {
    // A dry run changes nothing: it need not wait for a forget or a tag.
    let guard = if opts.dry_run {
        repo.lock_reader()?
    } else {
        repo.lock_snapshots()?
    };
    let (snaps, vanished) = snapshot::still_listed(repo, snaps)?;
    // The index as it is now, under the lock: a cache synced before it may
    // place a blob in a pack a prune has since repacked and deleted.
    repo.sync_index()?;
    let packer = if opts.dry_run {
        None
    } else {
        Some(Packer::with_lock(repo, Some(guard.handle()))?)
    };
    let mut rw = Rewriter {
        repo,
        opts,
        whole: Usage::new(repo)?,
        packer,
        empty_tree: None,
        on_change,
        snapshot: Id([0; 32]),
        changes: 0,
    };
    let mut report = RepairReport {
        dry_run: opts.dry_run,
        vanished: vanished.iter().map(Id::to_hex).collect(),
        ..Default::default()
    };
    // (original, its repaired form, or none when nothing is left)
    let mut planned: Vec<(Id, Option<Snapshot>, u64)> = Vec::new();
    for (id, snap) in &snaps {
        report.checked += 1;
        rw.snapshot = *id;
        rw.changes = 0;
        match rw.rewrite(&snap.tree, "")? {
            Outcome::Same => {}
            Outcome::New(tree) => planned.push((*id, Some(repaired(id, snap, tree)), rw.changes)),
            Outcome::Unreadable(e) => {
                rw.report(Change::RootUnreadable {
                    error: e.to_string(),
                });
                planned.push((*id, None, rw.changes));
            }
        }
    }
    if let Some(p) = rw.packer.take() {
        report.trees_written = p.finish()?.blobs_added;
    }
    drop(rw);
    for (original, new, changes) in planned {
        report
            .repaired
            .push(save(repo, &guard, opts, original, new, changes)?);
    }
    Ok(report)
}

/// The repaired snapshot: the original with tree `tree` and the tags.
fn repaired(id: &Id, snap: &Snapshot, tree: Id) -> Snapshot {
    let mut s = snap.clone();
    s.tree = tree;
    if !s.tags.iter().any(|t| t == REPAIRED_TAG) {
        s.tags.push(REPAIRED_TAG.to_string());
    }
    if !s.tags.iter().any(|t| t.starts_with(ORIGINAL_TAG_PREFIX)) {
        s.tags.push(format!("{ORIGINAL_TAG_PREFIX}{}", id.short()));
    }
    s
}

/// Saves one repaired snapshot (or finds the one an interrupted run
/// saved), then removes the original with `forget`.
fn save(
    repo: &Repository,
    guard: &crate::lock::LockGuard,
    opts: RepairOptions,
    original: Id,
    new: Option<Snapshot>,
    changes: u64,
) -> Result<SnapshotRepair> {
    let mut out = SnapshotRepair {
        snapshot: original.to_hex(),
        changes,
        new_snapshot: None,
        reused: false,
        forgotten: false,
    };
    if opts.dry_run {
        return Ok(out);
    }
    if let Some(s) = new {
        let (existing, _) = snapshot::list(
            repo,
            &snapshot::Filter {
                tags: vec![snapshot::TagList(s.tags.clone())],
                ..Default::default()
            },
        )?;
        let new_id = match existing.into_iter().find(|(_, e)| *e == s) {
            Some((id, _)) => {
                out.reused = true;
                id
            }
            None => {
                guard.check()?;
                snapshot::save(repo, &s)?
            }
        };
        out.new_snapshot = Some(new_id.to_hex());
    }
    if opts.forget {
        guard.check()?;
        repo.backend().delete(Kind::Snapshot, &original.to_hex())?;
        out.forgotten = true;
    }
    Ok(out)
}

impl Rewriter<'_, '_> {
    fn report(&mut self, c: Change) {
        self.changes += 1;
        (self.on_change)(&self.snapshot, &c);
    }

    /// Rewrites tree `id` (at `path`) without what is missing below it.
    fn rewrite(&mut self, id: &Id, path: &str) -> Result<Outcome> {
        crate::interrupt::check()?;
        // Each level adds a `/` and a name to the path (a crafted name may
        // hold more `/`, which only counts deeper).
        let depth = path.bytes().filter(|b| *b == b'/').count() + 1;
        // Whole where it was met is not whole deeper down, where the
        // depth limit may cut it: remembered with its depth.
        let key = at_depth(id, depth);
        if self.whole.contains(&key)? {
            return Ok(Outcome::Same);
        }
        // A tree nested too deep is cut there, as one that cannot be read.
        let loaded = crate::tree::check_depth(depth, format!("tree {id}"))
            .and_then(|_| self.repo.load_tree_checked(id));
        let tree = match loaded {
            Ok(t) => t,
            Err(e @ (Error::Interrupted | Error::LockLost(_))) => return Err(e),
            Err(e) => return Ok(Outcome::Unreadable(e)),
        };
        let mut changed = false;
        let mut nodes = Vec::with_capacity(tree.nodes.len());
        for n in tree.nodes {
            let p = format!("{path}/{}", n.name_lossy());
            match n.kind {
                NodeKind::File => {
                    if let Some(n) = self.file(n, &p, &mut changed)? {
                        nodes.push(n);
                    }
                }
                NodeKind::Dir => {
                    if let Some(n) = self.dir(n, &p, &mut changed)? {
                        nodes.push(n);
                    }
                }
                _ => nodes.push(n),
            }
        }
        if !changed {
            self.whole.insert(&key)?;
            return Ok(Outcome::Same);
        }
        Ok(Outcome::New(self.store(&Tree { nodes })?))
    }

    /// A file node: kept, cut, or left out (`None`).
    fn file(&mut self, mut n: Node, path: &str, changed: &mut bool) -> Result<Option<Node>> {
        let locs = self.repo.lookup_many(&n.content)?;
        let Some(bad) = locs
            .iter()
            .position(|l| !matches!(l, Some(l) if l.entry.ty == BlobType::Data))
        else {
            return Ok(Some(n));
        };
        *changed = true;
        let missing_blob = n.content[bad].to_hex();
        if !self.opts.truncate {
            self.report(Change::FileRemoved {
                path: path.to_string(),
                missing_blob,
            });
            return Ok(None);
        }
        let kept: u64 = locs[..bad]
            .iter()
            .flatten()
            .map(|l| l.entry.plain_len as u64)
            .sum();
        self.report(Change::FileTruncated {
            path: path.to_string(),
            missing_blob,
            size_before: n.size,
            size_after: kept,
        });
        n.content.truncate(bad);
        n.size = kept;
        Ok(Some(n))
    }

    /// A directory node: its subtree rewritten, or emptied if unreadable.
    fn dir(&mut self, mut n: Node, path: &str, changed: &mut bool) -> Result<Option<Node>> {
        // Its tree's depth: `/a` holds the root's entry `a`, whose tree is
        // at depth 2. Too deep even to be emptied: left out.
        let depth = path.bytes().filter(|b| *b == b'/').count() + 1;
        if let Err(e) = crate::tree::check_depth(depth, format!("directory {path}")) {
            self.report(Change::DirRemoved {
                path: path.to_string(),
                error: e.to_string(),
            });
            *changed = true;
            return Ok(None);
        }
        let outcome = match n.subtree {
            Some(sub) => self.rewrite(&sub, path)?,
            None => Outcome::Unreadable(Error::corrupt(
                format!("directory {path}"),
                "has no subtree",
            )),
        };
        match outcome {
            Outcome::Same => {}
            Outcome::New(t) => {
                n.subtree = Some(t);
                *changed = true;
            }
            Outcome::Unreadable(e) => {
                self.report(Change::DirEmptied {
                    path: path.to_string(),
                    error: e.to_string(),
                });
                n.subtree = Some(self.empty()?);
                *changed = true;
            }
        }
        Ok(Some(n))
    }

    /// The id of the empty tree (stored once).
    fn empty(&mut self) -> Result<Id> {
        if let Some(id) = self.empty_tree {
            return Ok(id);
        }
        let id = self.store(&Tree::default())?;
        self.empty_tree = Some(id);
        Ok(id)
    }

    /// Stores a new tree blob (on a dry run, only computes its id).
    fn store(&mut self, t: &Tree) -> Result<Id> {
        let bytes = t.encode()?;
        match self.packer.as_mut() {
            Some(p) => Ok(p.add(BlobType::Tree, &bytes)?.0),
            None => Ok(self.repo.keys().blob_id(&bytes)),
        }
    }
}

/// The key of tree `id` met at `depth` in the set of whole trees. Not
/// inlined: the hasher's 2 KB would otherwise sit in every frame of the
/// recursive rewrite.
#[inline(never)]
fn at_depth(id: &Id, depth: usize) -> Id {
    let mut h = blake3::Hasher::new();
    h.update(&id.0);
    h.update(&(depth as u64).to_le_bytes());
    Id(*h.finalize().as_bytes())
}
