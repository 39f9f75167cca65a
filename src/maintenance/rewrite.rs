//! `rewrite`: new snapshots whose trees leave out excluded paths, as
//! restic's `rewrite --exclude`, and (`--new-host`, `--new-time`, restic
//! 0.17) whose host or time is another. The globs are `backup --exclude`'s (the
//! archiver's [`Excluder`]: without `/` a name anywhere, with `/` the
//! absolute path, a directory taking what is beneath it). A directory
//! whose contents lose nothing keeps its tree id; only the trees on the way
//! to a removed entry are written anew, through the packer. The new
//! snapshot keeps the original's time, host, user, paths, parent, summary
//! and tags, plus the tag `rewrite` unless `forget` is given, in which case
//! the original is removed once the new one is saved. Snapshots with
//! nothing to exclude are left alone. The excluded data stays in packs
//! until the originals are gone and `prune` runs.
//!
//! Safe beside other larder processes and against being killed, as
//! `repair snapshots` (same order of writes: tree packs and their index
//! segment, then the new snapshots, then the removals, all under the shared
//! lock, checked before each). Run again after a kill, a snapshot equal to
//! the one it would save is found and reused instead of saved twice.

use crate::archiver::Excluder;
use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::lock::LockGuard;
use crate::pack::BlobType;
use crate::packer::Packer;
use crate::repository::Repository;
use crate::snapshot::{self, Snapshot};
use crate::tree::{NodeKind, Tree};
use serde::Serialize;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::rc::Rc;

/// The tag of rewritten snapshots whose originals are kept.
pub const REWRITE_TAG: &str = "rewrite";

/// How to rewrite.
#[derive(Clone, Debug, Default)]
pub struct RewriteOptions {
    /// `backup --exclude` globs (with the lines of any exclude files).
    pub excludes: Vec<String>,
    /// Remove each original once its new snapshot is saved.
    pub forget: bool,
    /// Report what would be removed; write nothing.
    pub dry_run: bool,
    /// Give the new snapshots this host (restic's `--new-host`: a machine
    /// renamed, whose next backups would find no parent).
    pub new_host: Option<String>,
    /// Give the new snapshots this time, in nanoseconds since the Unix
    /// epoch (`--new-time`).
    pub new_time: Option<i64>,
}

/// What happened to one snapshot that had something to exclude.
#[derive(Clone, Debug, Serialize)]
pub struct SnapshotRewrite {
    pub snapshot: String,
    /// The paths left out (a directory stands for what was beneath it).
    pub removed: Vec<String>,
    /// The new snapshot (none on a dry run).
    pub new_snapshot: Option<String>,
    pub new_tree: String,
    /// Saved by an earlier, interrupted run and reused.
    pub reused: bool,
    /// The original was removed (`forget`).
    pub forgotten: bool,
}

/// What `rewrite` did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RewriteReport {
    pub dry_run: bool,
    /// Snapshots examined.
    pub checked: u64,
    /// The snapshots that had something to exclude.
    pub rewritten: Vec<SnapshotRewrite>,
    /// New tree blobs stored.
    pub trees_written: u64,
    /// Chosen snapshots that another process removed (or replaced) before
    /// this one held its lock: left as they are.
    pub vanished: Vec<String>,
}

/// Full paths (raw bytes) left out below a tree.
type Removed = Rc<Vec<Vec<u8>>>;

/// A tree rewritten: its new id (`None`: unchanged) and the full paths
/// removed below it.
#[derive(Clone)]
struct Rewritten {
    new: Option<Id>,
    removed: Removed,
}

struct Rewriter<'r> {
    repo: &'r Repository,
    excluder: Excluder,
    packer: Option<Packer<'r>>,
    /// Keyed by tree id and path: a path glob's answer depends on where.
    memo: HashMap<(Id, Vec<u8>), Rewritten>,
}

/// Rewrites `snaps` (see the module documentation).
pub fn rewrite(
    repo: &Repository,
    snaps: &[(Id, Snapshot)],
    opts: &RewriteOptions,
) -> Result<RewriteReport> {
    if opts.excludes.is_empty() && opts.new_host.is_none() && opts.new_time.is_none() {
        return Err(Error::Usage(
            "nothing to change: give --exclude, --exclude-file, --new-host or --new-time".into(),
        ));
    }
    let excluder = Excluder::from_globs(&opts.excludes)?;
    if opts.forget && !opts.dry_run {
        repo.backend().check_deletable()?;
    }
    // A dry run changes nothing: it need not wait for a forget or a tag.
    let guard = if opts.dry_run {
        repo.lock_reader()?
    } else {
        repo.lock_snapshots()?
    };
    let (snaps, vanished) = snapshot::still_listed(repo, snaps)?;
    let packer = if opts.dry_run {
        None
    } else {
        // Under the lock: the index with every deletion mark, so a tree
        // only a pack marked for deletion holds is written again.
        repo.sync_index()?;
        Some(Packer::with_lock(repo, Some(guard.handle()))?)
    };
    let mut rw = Rewriter {
        repo,
        excluder,
        packer,
        memo: HashMap::new(),
    };
    let mut report = RewriteReport {
        dry_run: opts.dry_run,
        vanished: vanished.iter().map(Id::to_hex).collect(),
        ..Default::default()
    };
    let mut planned: Vec<(Id, Snapshot, Removed)> = Vec::new();
    for (id, snap) in &snaps {
        report.checked += 1;
        let r = if opts.excludes.is_empty() {
            Rewritten {
                new: None,
                removed: Rc::default(),
            }
        } else {
            rw.tree(snap.tree, b"")?
        };
        let host = opts.new_host.as_ref().filter(|h| **h != snap.hostname);
        let time = opts.new_time.filter(|t| *t != snap.time_ns);
        if r.new.is_some() || host.is_some() || time.is_some() {
            let mut s = snap.clone();
            s.tree = r.new.unwrap_or(snap.tree);
            if let Some(h) = host {
                s.hostname = h.clone();
            }
            if let Some(t) = time {
                s.time_ns = t;
            }
            s.original = Some(snap.original.unwrap_or(*id));
            if !opts.forget && !s.tags.iter().any(|t| t == REWRITE_TAG) {
                s.tags.push(REWRITE_TAG.to_string());
            }
            planned.push((*id, s, r.removed));
        }
    }
    if let Some(p) = rw.packer.take() {
        report.trees_written = p.finish()?.blobs_added;
    }
    // Listed once: the snapshots an interrupted run may have saved.
    let (mut existing, _) = if opts.dry_run {
        (Vec::new(), Vec::new())
    } else {
        snapshot::list(repo, &snapshot::Filter::default())?
    };
    for (original, new, removed) in planned {
        let mut out = SnapshotRewrite {
            snapshot: original.to_hex(),
            removed: removed
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect(),
            new_snapshot: None,
            new_tree: new.tree.to_hex(),
            reused: false,
            forgotten: false,
        };
        if !opts.dry_run {
            save(
                repo,
                &guard,
                opts.forget,
                original,
                &new,
                &mut existing,
                &mut out,
            )?;
        }
        report.rewritten.push(out);
    }
    Ok(report)
}

/// Saves one new snapshot (or finds the one an interrupted run saved),
/// then removes the original with `forget`.
fn save(
    repo: &Repository,
    guard: &LockGuard,
    forget: bool,
    original: Id,
    new: &Snapshot,
    existing: &mut Vec<(Id, Snapshot)>,
    out: &mut SnapshotRewrite,
) -> Result<()> {
    let new_id = match existing.iter().find(|(_, e)| e == new) {
        Some((id, _)) => {
            out.reused = true;
            *id
        }
        None => {
            guard.check()?;
            let id = snapshot::save(repo, new)?;
            existing.push((id, new.clone()));
            id
        }
    };
    out.new_snapshot = Some(new_id.to_hex());
    if forget {
        crate::interrupt::check()?;
        guard.check()?;
        repo.backend().delete(Kind::Snapshot, &original.to_hex())?;
        out.forgotten = true;
    }
    Ok(())
}

fn join(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(prefix.len() + 1 + name.len());
    p.extend_from_slice(prefix);
    p.push(b'/');
    p.extend_from_slice(name);
    p
}

impl Rewriter<'_> {
    /// Tree `id` at `path` without the excluded entries.
    fn tree(&mut self, id: Id, path: &[u8]) -> Result<Rewritten> {
        crate::interrupt::check()?;
        let key = (id, path.to_vec());
        if let Some(r) = self.memo.get(&key) {
            return Ok(r.clone());
        }
        let depth = path.iter().filter(|b| **b == b'/').count() + 1;
        crate::tree::check_depth(depth, format!("tree {id}"))?;
        let tree = self.repo.load_tree_checked(&id).map_err(|e| match e {
            Error::MissingBlob(_) | Error::Corrupt { .. } => Error::corrupt(
                format!("tree {} at {}", id.short(), String::from_utf8_lossy(path)),
                format!("{e} (run `larder repair snapshots` first)"),
            ),
            e => e,
        })?;
        let mut removed: Vec<Vec<u8>> = Vec::new();
        let mut changed = false;
        let mut nodes = Vec::with_capacity(tree.nodes.len());
        for mut n in tree.nodes {
            let p = join(path, &n.name);
            if self.excluder.matches(Path::new(OsStr::from_bytes(&p))) {
                removed.push(p);
                changed = true;
                continue;
            }
            if let (NodeKind::Dir, Some(sub)) = (n.kind, n.subtree) {
                let r = self.tree(sub, &p)?;
                removed.extend(r.removed.iter().cloned());
                if let Some(new) = r.new {
                    n.subtree = Some(new);
                    changed = true;
                }
            }
            nodes.push(n);
        }
        let new = if changed {
            Some(self.store(&Tree { nodes })?)
        } else {
            None
        };
        let r = Rewritten {
            new,
            removed: Rc::new(removed),
        };
        self.memo.insert(key, r.clone());
        Ok(r)
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
