//! The top of a snapshot's tree: the backed-up absolute paths hang below
//! intermediate directories (`/`, `/home`, …) that are recorded with their
//! real metadata but none of their other entries.
//!
//! A path inside another backed-up path (`a` and `a/mnt`) is backed up
//! first, on its own, and its node is *grafted* into the outer walk at its
//! place ([`Grafts`]): where the walk reaches it, the graft stands in for
//! what the walk would record; where the walk would not reach it (the way
//! down is excluded, on another file system under `-x`, or a symbolic
//! link), the graft hangs below an intermediate directory made at the
//! point the walk stops, as restic does. A named path is never dropped
//! because another named path holds it.

use super::walk::Archiver;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::localfs::{components, meta::node_from_metadata, stat::Stat};
use crate::tree::{Node, NodeKind, Tree};
use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// An intermediate directory above the backed-up paths.
#[derive(Default)]
struct VDir {
    entries: BTreeMap<Vec<u8>, VEntry>,
}

enum VEntry {
    Real(Box<Node>),
    Dir(VDir),
}

/// Backed-up paths inside others, by path, each with its node, waiting for
/// the walk of the path holding it to place it (and leave the map).
pub(super) type Grafts = BTreeMap<PathBuf, Node>;

/// Backs up every path and stores the root tree; returns its ID. Paths
/// inside others go first, the deepest first, so that each walk finds the
/// grafts below it ready.
pub(super) fn walk_paths(run: &mut Archiver<'_, '_>, paths: &[PathBuf]) -> Result<Id> {
    let named: HashSet<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let inside = |p: &Path| p.ancestors().skip(1).any(|a| named.contains(a));
    let mut nested: Vec<&PathBuf> = paths.iter().filter(|p| inside(p)).collect();
    nested.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in nested {
        let node = run.backup_path(p)?;
        if let Some(node) = settle(run, p, node)? {
            run.grafts.insert(p.clone(), node);
        }
    }
    let mut top = VDir::default();
    for p in paths.iter().filter(|p| !inside(p)) {
        let node = run.backup_path(p)?;
        let Some(node) = settle(run, p, node)? else {
            continue;
        };
        let comps: Vec<Vec<u8>> = components(p).into_iter().map(<[u8]>::to_vec).collect();
        let Some((last, dirs)) = comps.split_last() else {
            // Backing up "/" itself: its entries become the root.
            if let Some(t) = run.last_tree.take() {
                for n in t.nodes {
                    top.entries
                        .insert(n.name.clone(), VEntry::Real(Box::new(n)));
                }
            }
            continue;
        };
        insert_virtual(&mut top, dirs, last, node);
    }
    let left = std::mem::take(&mut run.grafts);
    for p in left.keys() {
        // Not expected: every walk places the grafts below it.
        run.warnings.push(format!(
            "{}: backed up, but the walk of the path holding it never came to it; \
             not in the snapshot",
            p.display()
        ));
    }
    let root_tree = build_virtual(run, Path::new("/"), top)?;
    run.store_tree(&root_tree)
}

/// The node of backed-up path `p` once the grafts below it are placed. A
/// directory's walk has placed them. Below a symbolic link, a file or a
/// path that could not be read, they hang in a directory made for `p`
/// with the metadata of what it leads to (restic unrolls such a path into
/// a directory too).
fn settle(run: &mut Archiver<'_, '_>, p: &Path, node: Option<Node>) -> Result<Option<Node>> {
    let walked = node.as_ref().is_some_and(|n| n.kind == NodeKind::Dir);
    if walked || !grafts_below(run, p) {
        return Ok(node);
    }
    graft_node(run, p)
}

/// The node that stands for `at` in the walk of its directory, if grafts
/// lie at or below it: the graft itself, or a directory made for `at`
/// holding the grafts below it. Takes them out of the map.
pub(super) fn graft_node(run: &mut Archiver<'_, '_>, at: &Path) -> Result<Option<Node>> {
    if let Some(node) = run.grafts.remove(at) {
        // Its own walk, or `settle`, placed what lay below it.
        return Ok(Some(node));
    }
    let below: Vec<PathBuf> = run
        .grafts
        .range::<Path, _>((Bound::Excluded(at), Bound::Unbounded))
        .take_while(|(p, _)| p.starts_with(at))
        .map(|(p, _)| p.clone())
        .collect();
    if below.is_empty() {
        return Ok(None);
    }
    let skip = components(at).len();
    let mut v = VDir::default();
    for p in below {
        let Some(node) = run.grafts.remove(&p) else {
            continue;
        };
        let rel: Vec<Vec<u8>> = components(&p)
            .into_iter()
            .skip(skip)
            .map(<[u8]>::to_vec)
            .collect();
        if let Some((last, dirs)) = rel.split_last() {
            insert_virtual(&mut v, dirs, last, node);
        }
    }
    let name = at
        .file_name()
        .map(|n| n.as_bytes().to_vec())
        .unwrap_or_default();
    let tree = build_virtual(run, at, v)?;
    let mut node = virtual_dir_node(run, at, name)?;
    node.subtree = Some(run.store_tree(&tree)?);
    Ok(Some(node))
}

/// Whether grafts wait at or below `at`.
pub(super) fn grafts_at_or_below(run: &Archiver<'_, '_>, at: &Path) -> bool {
    run.grafts.contains_key(at) || grafts_below(run, at)
}

/// Whether grafts wait strictly below `at`.
fn grafts_below(run: &Archiver<'_, '_>, at: &Path) -> bool {
    run.grafts
        .range::<Path, _>((Bound::Excluded(at), Bound::Unbounded))
        .next()
        .is_some_and(|(p, _)| p.starts_with(at))
}

/// The first components below `dir` of the grafts waiting there (each
/// once), as paths.
pub(super) fn graft_points_below(run: &Archiver<'_, '_>, dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for (p, _) in run
        .grafts
        .range::<Path, _>((Bound::Excluded(dir), Bound::Unbounded))
        .take_while(|(p, _)| p.starts_with(dir))
    {
        if let Some(first) = p.strip_prefix(dir).ok().and_then(|r| r.components().next()) {
            let at = dir.join(first);
            if out.last() != Some(&at) {
                out.push(at);
            }
        }
    }
    out
}

/// Places `node` at `dirs/last` below `v`, creating intermediate
/// directories. A path inside one already placed is in it already.
fn insert_virtual(v: &mut VDir, dirs: &[Vec<u8>], last: &[u8], node: Node) {
    match dirs.split_first() {
        None => {
            v.entries
                .insert(last.to_vec(), VEntry::Real(Box::new(node)));
        }
        Some((d, rest)) => {
            let e = v
                .entries
                .entry(d.clone())
                .or_insert_with(|| VEntry::Dir(VDir::default()));
            if let VEntry::Dir(sub) = e {
                insert_virtual(sub, rest, last, node);
            }
        }
    }
}

/// Turns the intermediate directories into trees, with their real metadata.
fn build_virtual(run: &mut Archiver<'_, '_>, path: &Path, v: VDir) -> Result<Tree> {
    let mut nodes = Vec::new();
    for (name, e) in v.entries {
        match e {
            VEntry::Real(n) => nodes.push(*n),
            VEntry::Dir(sub) => {
                let p = path.join(std::ffi::OsStr::from_bytes(&name));
                let t = build_virtual(run, &p, sub)?;
                let mut node = virtual_dir_node(run, &p, name)?;
                node.subtree = Some(run.store_tree(&t)?);
                nodes.push(node);
            }
        }
    }
    let mut t = Tree { nodes };
    t.canonicalize();
    Ok(t)
}

/// An intermediate directory's node, without its subtree: the metadata of
/// the directory at `p`, through a symbolic link if `p` is one (its own
/// mode, `rwxrwxrwx`, would make a world-writable directory on restore).
fn virtual_dir_node(run: &mut Archiver<'_, '_>, p: &Path, name: Vec<u8>) -> Result<Node> {
    let mut md = Stat::lstat(p).map_err(|e| Error::io(p, e))?;
    if !md.is_dir() {
        let dir = std::fs::File::open(p).and_then(|f| Stat::of(&f));
        match dir {
            Ok(d) if d.is_dir() => md = d,
            // Not a directory any way: keep owner and times, not the mode.
            _ => md.mode = libc::S_IFDIR | 0o755,
        }
    }
    let mut node = node_from_metadata(name, &md, &mut run.owners, false);
    node.kind = NodeKind::Dir;
    node.link_target.clear();
    Ok(node)
}
