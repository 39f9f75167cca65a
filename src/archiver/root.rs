//! The top of a snapshot's tree: the backed-up absolute paths hang below
//! intermediate directories (`/`, `/home`, …) that are recorded with their
//! real metadata but none of their other entries.
//!
//! A path inside another backed-up path (`a` and `a/mnt`) is backed up
//! first, on its own, and its node is *grafted* into the outer walk at its
//! place ([`Graft`]): where the walk reaches it, the graft stands in for
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
use std::collections::BTreeMap;
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

/// A backed-up path inside another one: its node, waiting for the outer
/// walk to place it.
pub(super) struct Graft {
    pub(super) path: PathBuf,
    pub(super) node: Node,
    pub(super) placed: bool,
}

/// Backs up every path and stores the root tree; returns its ID. Paths
/// inside others go first, the deepest first, so that each walk finds the
/// grafts below it ready.
pub(super) fn walk_paths(run: &mut Archiver<'_, '_>, paths: &[PathBuf]) -> Result<Id> {
    let inside = |p: &PathBuf| paths.iter().any(|q| q != p && p.starts_with(q));
    let mut nested: Vec<&PathBuf> = paths.iter().filter(|p| inside(p)).collect();
    nested.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in nested {
        let node = run.backup_path(p)?;
        // What this walk placed is inside its node now.
        run.grafts.retain(|g| !g.placed);
        if let Some(node) = node {
            run.grafts.push(Graft {
                path: p.clone(),
                node,
                placed: false,
            });
        }
    }
    let mut top = VDir::default();
    for p in paths.iter().filter(|p| !inside(p)) {
        let Some(node) = run.backup_path(p)? else {
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
    for g in run.grafts.iter().filter(|g| !g.placed) {
        // Not expected: every outer walk places the grafts below it.
        run.warnings.push(format!(
            "{}: backed up, but the walk of the path holding it never came to it; \
             not in the snapshot",
            g.path.display()
        ));
    }
    let root_tree = build_virtual(run, Path::new("/"), top)?;
    run.store_tree(&root_tree)
}

/// The node that stands for `at` in the walk of its directory, if grafts
/// lie at or below it: the graft itself, or a directory made for `at`
/// holding the grafts below it (shallower ones first: one inside another
/// is already in it). Marks them placed.
pub(super) fn graft_node(run: &mut Archiver<'_, '_>, at: &Path) -> Result<Option<Node>> {
    let mut v = VDir::default();
    let mut exact = None;
    let mut below: Vec<usize> = (0..run.grafts.len())
        .filter(|&i| !run.grafts[i].placed && run.grafts[i].path.starts_with(at))
        .collect();
    below.sort_by_key(|&i| run.grafts[i].path.components().count());
    for i in below {
        let g = &mut run.grafts[i];
        g.placed = true;
        let rel: Vec<Vec<u8>> = components(&g.path)
            .into_iter()
            .skip(components(at).len())
            .map(<[u8]>::to_vec)
            .collect();
        match rel.split_last() {
            None => exact = Some(g.node.clone()),
            Some((last, dirs)) => insert_virtual(&mut v, dirs, last, g.node.clone()),
        }
    }
    if exact.is_some() {
        return Ok(exact);
    }
    if v.entries.is_empty() {
        return Ok(None);
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
    run.grafts
        .iter()
        .any(|g| !g.placed && g.path.starts_with(at))
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
