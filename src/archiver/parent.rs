//! The parent snapshot's trees, loaded lazily one per directory depth as the
//! walk goes down, so a warm scan compares each entry with its old node
//! without holding the whole parent tree in memory. Their lookups in the
//! index go to a connection of the walk's own, many to a read transaction
//! (a [`ReadView`]).

use crate::error::{Error, Result};
use crate::id::Id;
use crate::index::ReadView;
use crate::repository::Repository;
use crate::tree::{Node, NodeKind, Tree};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The warm scan's test: whether file `new` (a node from `lstat`) is the
/// same, unchanged file as `old` from the parent snapshot: same size, mtime,
/// ctime and inode. Backup then reuses `old`'s chunks without reading the
/// file; a diff against a live tree takes its content as unchanged.
pub fn same_file(old: &Node, new: &Node) -> bool {
    same_file_ignoring(old, new, Ignore::default())
}

/// Which of a file's fields the change test leaves out: the inode (and so
/// the ctime too, as restic's `--ignore-inode`: on FUSE and some network
/// filesystems inode numbers change from mount to mount) or the ctime
/// alone (`--ignore-ctime`: a tool that rewrites metadata, a `chown -R`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ignore {
    pub inode: bool,
    pub ctime: bool,
}

/// [`same_file`], leaving out what `ignore` says.
pub fn same_file_ignoring(old: &Node, new: &Node, ignore: Ignore) -> bool {
    old.kind == NodeKind::File
        && new.kind == NodeKind::File
        && old.size == new.size
        && old.mtime_ns == new.mtime_ns
        && (ignore.ctime || ignore.inode || old.ctime_ns == new.ctime_ns)
        && (ignore.inode || old.inode == new.inode)
}

/// A node of the parent snapshot, in place: its tree (shared) and its
/// position there. The walk asks for one per entry; a copy of each would
/// cost several allocations.
#[derive(Clone)]
pub(super) struct OldNode {
    tree: Arc<Tree>,
    at: usize,
}

impl std::ops::Deref for OldNode {
    type Target = Node;

    fn deref(&self) -> &Node {
        &self.tree.nodes[self.at]
    }
}

/// `levels[d]` of [`ParentTrees`]: the absolute path of the directory of
/// depth `d`, and its old tree with the tree's ID.
type Level = (PathBuf, Option<(Id, Arc<Tree>)>);

/// Lazily loaded trees of the parent snapshot, one per directory depth.
pub(super) struct ParentTrees<'r> {
    repo: &'r Repository,
    root: Option<Id>,
    levels: Vec<Level>,
    /// Parent trees that could not be loaded: what is below them is read
    /// again as if new.
    pub(super) unreadable: Vec<String>,
    /// The index as the walk's questions see it (opened at the first).
    view: Option<ReadView>,
}

/// How many names absolute path `dir` has (`/` has none), counted without
/// collecting them: asked for each entry the walk comes to.
fn depth_of(dir: &Path) -> usize {
    dir.components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .count()
}

impl<'r> ParentTrees<'r> {
    pub(super) fn new(repo: &'r Repository, root: Option<Id>) -> Self {
        ParentTrees {
            repo,
            root,
            levels: Vec::new(),
            unreadable: Vec::new(),
            view: None,
        }
    }

    /// The repository, when there is a parent snapshot to load trees of.
    pub(super) fn repo(&self) -> Option<&'r Repository> {
        self.root.map(|_| self.repo)
    }

    /// Takes `tree`, loaded ahead of the walk as the parent snapshot's tree
    /// `id` of absolute directory `dir`, if that is the tree the parent has
    /// there (else it is dropped, and [`ParentTrees::tree_of`] loads its
    /// own). Offered as the walk enters `dir`, whose parent directory's
    /// tree is held.
    pub(super) fn offer(&mut self, dir: &Path, id: Id, tree: Arc<Tree>) -> Result<()> {
        let (Some(up), Some(name)) = (dir.parent(), dir.file_name()) else {
            return Ok(());
        };
        let expected = self.tree_of(up)?.and_then(|t| {
            t.find(name.as_bytes())
                .filter(|n| n.kind == NodeKind::Dir)?
                .subtree
        });
        if expected != Some(id) {
            return Ok(());
        }
        let depth = depth_of(dir);
        if matches!(self.levels.get(depth), Some((p, _)) if p == dir) {
            return Ok(());
        }
        self.hold(depth, dir, Some((id, tree)));
        Ok(())
    }

    /// The parent snapshot's tree of absolute directory `dir`.
    pub(super) fn tree_of(&mut self, dir: &Path) -> Result<Option<Arc<Tree>>> {
        Ok(self.tree_with_id(dir)?.map(|(_, t)| t))
    }

    /// The parent snapshot's tree of absolute directory `dir`, with its ID.
    pub(super) fn tree_with_id(&mut self, dir: &Path) -> Result<Option<(Id, Arc<Tree>)>> {
        let Some(root) = self.root else {
            return Ok(None);
        };
        // Asked for each entry of the directory the walk is in: mostly the
        // deepest one held.
        if let Some((p, t)) = self.levels.last()
            && p == dir
        {
            return Ok(t.clone());
        }
        let depth = depth_of(dir);
        if let Some((p, t)) = self.levels.get(depth)
            && p == dir
        {
            return Ok(t.clone());
        }
        let tree = match (depth, dir.parent(), dir.file_name()) {
            (0, _, _) => self.load(&root, dir),
            (_, Some(parent), Some(name)) => match self.tree_of(parent)? {
                Some(pt) => match pt.find(name.as_bytes()) {
                    Some(n) if n.kind == NodeKind::Dir => match n.subtree {
                        Some(s) => self.load(&s, dir),
                        None => None,
                    },
                    _ => None,
                },
                None => None,
            },
            _ => None,
        };
        self.hold(depth, dir, tree.clone());
        Ok(tree)
    }

    /// Holds `tree` as the tree of `dir`, at `depth`; what was held below
    /// that depth is let go.
    fn hold(&mut self, depth: usize, dir: &Path, tree: Option<(Id, Arc<Tree>)>) {
        self.levels.truncate(depth);
        while self.levels.len() < depth {
            self.levels.push((PathBuf::new(), None));
        }
        self.levels.push((dir.to_path_buf(), tree));
    }

    /// Loads the parent's tree `id` of `dir`; one that cannot be loaded is
    /// noted and treated as absent, so its files are read again.
    fn load(&mut self, id: &Id, dir: &Path) -> Option<(Id, Arc<Tree>)> {
        let repo = self.repo;
        let loaded = self.view().and_then(|v| v.lookup(id)).and_then(|loc| {
            let loc = loc.ok_or_else(|| Error::MissingBlob(id.to_hex()))?;
            repo.load_tree_at(id, &loc)
        });
        match loaded {
            Ok(t) => Some((*id, Arc::new(t))),
            Err(e) => {
                self.unreadable.push(format!(
                    "{}: the parent snapshot's tree cannot be read ({e}); its files are read again",
                    dir.display()
                ));
                None
            }
        }
    }

    /// Whether the index has tree `id` recorded as checked
    /// ([`crate::index::Index::tree_checked`]).
    pub(super) fn tree_checked(&mut self, id: &Id) -> Result<bool> {
        self.view()?.tree_checked(id)
    }

    /// Ends the walk's view of the index, if one is open: the next
    /// question begins another.
    pub(super) fn release(&mut self) -> Result<()> {
        match &mut self.view {
            Some(v) => v.renew(),
            None => Ok(()),
        }
    }

    fn view(&mut self) -> Result<&mut ReadView> {
        if self.view.is_none() {
            self.view = Some(self.repo.index()?.read_view()?);
        }
        self.view
            .as_mut()
            .ok_or_else(|| Error::internal("the walk's view of the index is missing"))
    }

    /// The parent snapshot's node of absolute path `path`.
    pub(super) fn node_of(&mut self, path: &Path) -> Result<Option<OldNode>> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Ok(None);
        };
        Ok(self.tree_of(parent)?.and_then(|tree| {
            let at = tree.position(name.as_bytes())?;
            Some(OldNode { tree, at })
        }))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::archiver::{BackupOptions, backup};
    use crate::progress::NoProgress;
    use crate::repository::test_repository;

    /// A repository with one snapshot of `dir/src`, which holds
    /// directories `a` and `b` with a file each: the repository, the
    /// snapshot's root tree and `dir/src`.
    pub(in crate::archiver) fn two_dirs(dir: &Path) -> (Repository, Id, PathBuf) {
        let repo = test_repository(dir);
        let src = dir.join("src");
        for (d, f) in [("a", "x"), ("b", "y")] {
            std::fs::create_dir_all(src.join(d)).unwrap();
            std::fs::write(src.join(d).join(f), f.repeat(100)).unwrap();
        }
        let opts = BackupOptions {
            paths: vec![src.clone()],
            ..BackupOptions::default()
        };
        let snap = backup(&repo, &opts, &NoProgress).unwrap();
        let snap = crate::snapshot::load(&repo, &snap.snapshot_id.unwrap().to_hex()).unwrap();
        (repo, snap.tree, src)
    }

    /// A tree loaded ahead of the walk is taken for the directory whose
    /// tree the parent snapshot names by that ID, as it is, and dropped
    /// for any other, which then gets its own tree.
    #[test]
    fn an_offered_tree_is_taken_only_where_the_parent_has_it() {
        let d = tempfile::tempdir().unwrap();
        let (repo, root, src) = two_dirs(d.path());
        let (a, b) = (src.join("a"), src.join("b"));
        let mut loaded = ParentTrees::new(&repo, Some(root));
        let (a_id, a_tree) = loaded.tree_with_id(&a).unwrap().unwrap();
        let (b_id, _) = loaded.tree_with_id(&b).unwrap().unwrap();
        assert_ne!(a_id, b_id);
        let fake = Arc::new(Tree::default());

        let mut pt = ParentTrees::new(&repo, Some(root));
        pt.tree_of(&src).unwrap().unwrap();
        pt.offer(&a, b_id, fake.clone()).unwrap();
        assert_eq!(*pt.tree_of(&a).unwrap().unwrap(), *a_tree);
        pt.offer(&b, b_id, fake.clone()).unwrap();
        let got = pt.tree_with_id(&b).unwrap().unwrap();
        assert_eq!(got.0, b_id);
        assert!(Arc::ptr_eq(&got.1, &fake), "the offered tree was not taken");
        assert!(pt.unreadable.is_empty());
    }

    /// The change test compares size, mtime, ctime and inode; the ignore
    /// options leave out the inode (and with it the ctime) or the ctime.
    #[test]
    fn the_change_test_leaves_out_what_it_is_told_to() {
        let d = tempfile::tempdir().unwrap();
        let (repo, root, _) = two_dirs(d.path());
        let tree = repo.load_tree(&root).unwrap();
        let mut old = tree.nodes[0].clone();
        old.kind = NodeKind::File;
        let (inode, ctime) = (
            Ignore {
                inode: true,
                ctime: false,
            },
            Ignore {
                inode: false,
                ctime: true,
            },
        );
        let mut new = old.clone();
        assert!(same_file(&old, &new));
        new.inode += 1;
        new.ctime_ns += 1;
        assert!(!same_file(&old, &new));
        assert!(same_file_ignoring(&old, &new, inode));
        assert!(!same_file_ignoring(&old, &new, ctime));
        new.inode = old.inode;
        assert!(same_file_ignoring(&old, &new, ctime));
        for moved in [
            |n: &mut Node| n.size += 1,
            |n: &mut Node| n.mtime_ns += 1,
            |n: &mut Node| n.kind = NodeKind::Symlink,
        ] {
            let mut m = new.clone();
            moved(&mut m);
            let both = Ignore {
                inode: true,
                ctime: true,
            };
            assert!(!same_file_ignoring(&old, &m, both));
        }
    }
}
