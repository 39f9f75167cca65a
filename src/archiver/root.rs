//! The top of a snapshot's tree: the backed-up absolute paths hang below
//! intermediate directories (`/`, `/home`, …) that are recorded with their
//! real metadata but none of their other entries.

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

/// Backs up every path and stores the root tree; returns its ID.
pub(super) fn walk_paths(run: &mut Archiver<'_, '_>, paths: &[PathBuf]) -> Result<Id> {
    let mut top = VDir::default();
    for p in paths {
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
    let root_tree = build_virtual(run, Path::new("/"), top)?;
    run.store_tree(&root_tree)
}

/// Places `node` at `dirs/last` below `v`, creating intermediate
/// directories. A path inside another backed-up path is already covered.
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
                let mut node = match Stat::lstat(&p) {
                    Ok(md) => node_from_metadata(name.clone(), &md, &mut run.owners, false),
                    Err(e) => return Err(Error::io(&p, e)),
                };
                node.kind = NodeKind::Dir;
                node.subtree = Some(run.store_tree(&t)?);
                nodes.push(node);
            }
        }
    }
    let mut t = Tree { nodes };
    t.canonicalize();
    Ok(t)
}
