//! Diff against a live tree: what changed on disk since a snapshot, without
//! a backup. Each directory on disk is listed and merged (in byte order of
//! names) with the snapshot's tree of the same absolute path. A file's
//! content is taken as unchanged by the warm backup scan's own test
//! ([`crate::archiver::same_file`]: size, mtime, ctime, inode); when its
//! size or mtime differ it is reported changed (`M`); when only its ctime or
//! inode moved, only its metadata is (`U`, with `metadata`). With `content`
//! every file whose size matches is read, cut with the repository's chunker
//! and its chunk IDs compared with the snapshot's, so content rewritten
//! behind an unchanged mtime is found. Entries are reported as
//! [`crate::diff::DiffEntry`]s, like a diff between snapshots, with the
//! snapshot as the old side and the disk as the new one.

use crate::archiver::same_file;
use crate::chunker::Chunker;
use crate::diff::{DiffEntry, DiffStats};
use crate::error::{Error, Result};
use crate::localfs::{self, meta::Owners, meta::node_from_metadata, stat::Stat};
use crate::repository::Repository;
use crate::tree::{Node, NodeKind, Tree, Xattr, check_depth};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Options of a live diff.
#[derive(Clone, Copy, Debug, Default)]
pub struct LiveDiffOptions {
    /// Report paths whose metadata alone changed (`U`).
    pub metadata: bool,
    /// Re-hash files whose size matches, to find content changed behind
    /// unchanged metadata.
    pub content: bool,
}

struct LiveDiffer<'r, 'f> {
    repo: &'r Repository,
    opts: LiveDiffOptions,
    out: &'f mut dyn FnMut(&DiffEntry),
    stats: DiffStats,
    owners: Owners,
    chunker: Chunker,
    buf: Vec<u8>,
    /// The depth of the tree being read, the compared directory's at 1
    /// ([`crate::tree::MAX_DEPTH`]).
    depth: usize,
}

/// Compares directory `dir` on disk (absolute) with the same path in the
/// snapshot tree `root`, calling `out` for each changed path.
pub fn diff_live(
    repo: &Repository,
    root: crate::id::Id,
    dir: &Path,
    opts: LiveDiffOptions,
    out: &mut dyn FnMut(&DiffEntry),
) -> Result<DiffStats> {
    let dir = localfs::absolute(dir)?;
    let old = crate::dump::node_at(repo, root, dir.as_os_str().as_bytes())?;
    let (NodeKind::Dir, Some(sub)) = (old.kind, old.subtree) else {
        return Err(Error::Usage(format!(
            "{} is not a directory in the snapshot",
            dir.display()
        )));
    };
    let mut d = LiveDiffer {
        repo,
        opts,
        out,
        stats: DiffStats::default(),
        owners: Owners::default(),
        chunker: repo.chunker()?,
        buf: Vec::new(),
        depth: 1,
    };
    let tree = d.load(&sub)?;
    d.dir(&dir, &tree)?;
    Ok(d.stats)
}

/// The display path of `n` below `parent` (directories end in `/`).
fn shown(path: &Path, kind: NodeKind) -> String {
    let mut p = path.to_string_lossy().into_owned();
    if kind == NodeKind::Dir {
        p.push('/');
    }
    p
}

impl LiveDiffer<'_, '_> {
    fn load(&mut self, id: &crate::id::Id) -> Result<Tree> {
        self.stats.trees_loaded += 1;
        self.repo.load_tree(id)
    }

    fn emit(&mut self, path: String, modifier: char, changes: Vec<&'static str>) {
        (self.out)(&DiffEntry {
            path,
            modifier,
            changes,
        });
    }

    /// Merges the listing of `dir` with the snapshot's `tree` of it.
    fn dir(&mut self, dir: &Path, tree: &Tree) -> Result<()> {
        let names = localfs::list_dir(dir).map_err(|e| Error::io(dir, e))?;
        let mut old = tree.nodes.iter().peekable();
        for name in names {
            while let Some(o) = old.next_if(|o| o.name.as_slice() < name.as_bytes()) {
                self.whole_old(&dir.join(std::ffi::OsStr::from_bytes(&o.name)), o)?;
            }
            let path = dir.join(&name);
            let Some(new) = self.live_node(&path)? else {
                continue;
            };
            match old.next_if(|o| o.name.as_slice() == name.as_bytes()) {
                Some(o) => self.pair(&path, o, new)?,
                None => self.whole_new(&path, &new)?,
            }
        }
        for o in old {
            self.whole_old(&dir.join(std::ffi::OsStr::from_bytes(&o.name)), o)?;
        }
        Ok(())
    }

    /// The node of `path` from `lstat` (None if it vanished meanwhile).
    fn live_node(&mut self, path: &Path) -> Result<Option<Node>> {
        let md = match Stat::lstat(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(path, e)),
        };
        let name = path
            .file_name()
            .map(|n| n.as_bytes().to_vec())
            .unwrap_or_default();
        Ok(Some(node_from_metadata(name, &md, &mut self.owners, false)))
    }

    /// An entry on both sides.
    fn pair(&mut self, path: &Path, old: &Node, mut new: Node) -> Result<()> {
        let p = shown(path, new.kind);
        if old.kind != new.kind {
            self.emit(p, 'T', Vec::new());
            return Ok(());
        }
        // As the warm scan: the same inode with the same ctime keeps its
        // attributes (and a symlink its target); otherwise they are read.
        let same_inode = old.inode == new.inode && old.ctime_ns == new.ctime_ns;
        if same_inode {
            new.xattrs = old.xattrs.clone();
            new.link_target = old.link_target.clone();
        } else {
            new.xattrs = read_xattrs(path);
            if new.kind == NodeKind::Symlink {
                new.link_target = std::fs::read_link(path)
                    .map_err(|e| Error::io(path, e))?
                    .as_os_str()
                    .as_bytes()
                    .to_vec();
            }
        }
        let changed = match new.kind {
            NodeKind::File => self.file_changed(path, old, &new)?,
            NodeKind::Symlink => old.link_target != new.link_target,
            NodeKind::CharDev | NodeKind::BlockDev => old.rdev != new.rdev,
            _ => false,
        };
        if changed {
            self.emit(p.clone(), 'M', Vec::new());
            if new.kind == NodeKind::File {
                self.stats.files_changed += 1;
            }
        } else if self.opts.metadata {
            let ch = old.metadata_changes(&new);
            if !ch.is_empty() {
                self.stats.metadata_changed += 1;
                self.emit(p, 'U', ch);
            }
        }
        if let (NodeKind::Dir, Some(sub)) = (old.kind, old.subtree) {
            self.depth += 1;
            check_depth(self.depth, format!("tree {sub}"))?;
            let t = self.load(&sub)?;
            self.dir(path, &t)?;
            self.depth -= 1;
        }
        Ok(())
    }

    /// Whether a file's content changed: by the warm scan's metadata test
    /// (size or mtime moved), and with `content` by its chunk IDs.
    fn file_changed(&mut self, path: &Path, old: &Node, new: &Node) -> Result<bool> {
        if old.size != new.size {
            return Ok(true);
        }
        if self.opts.content {
            return Ok(self.chunk_ids(path)? != old.content);
        }
        Ok(!same_file(old, new) && old.mtime_ns != new.mtime_ns)
    }

    /// The chunk IDs the repository would give the file at `path`.
    fn chunk_ids(&mut self, path: &Path) -> Result<Vec<crate::id::Id>> {
        let mut f = localfs::open_noatime(path).map_err(|e| Error::io(path, e))?;
        let keys = self.repo.keys();
        let mut ids = Vec::new();
        let mut buf = std::mem::take(&mut self.buf);
        let r = self.chunker.stream(
            &mut f,
            &mut buf,
            |c| {
                ids.push(keys.blob_id(c));
                Ok(())
            },
            |e| Error::io(path, e),
        );
        self.buf = buf;
        r?;
        Ok(ids)
    }

    /// `new` (on disk only) and everything beneath it, added.
    fn whole_new(&mut self, path: &Path, new: &Node) -> Result<()> {
        self.emit(shown(path, new.kind), '+', Vec::new());
        match new.kind {
            NodeKind::File => self.stats.files_added += 1,
            NodeKind::Dir => {
                self.stats.dirs_added += 1;
                for name in localfs::list_dir(path).map_err(|e| Error::io(path, e))? {
                    let p = path.join(&name);
                    if let Some(n) = self.live_node(&p)? {
                        self.whole_new(&p, &n)?;
                    }
                }
            }
            _ => self.stats.others_added += 1,
        }
        Ok(())
    }

    /// `old` (in the snapshot only) and everything beneath it, removed.
    fn whole_old(&mut self, path: &Path, old: &Node) -> Result<()> {
        self.emit(shown(path, old.kind), '-', Vec::new());
        match old.kind {
            NodeKind::File => self.stats.files_removed += 1,
            NodeKind::Dir => {
                self.stats.dirs_removed += 1;
                if let Some(sub) = old.subtree {
                    self.depth += 1;
                    check_depth(self.depth, format!("tree {sub}"))?;
                    let t = self.load(&sub)?;
                    for n in &t.nodes {
                        self.whole_old(&path.join(std::ffi::OsStr::from_bytes(&n.name)), n)?;
                    }
                    self.depth -= 1;
                }
            }
            _ => self.stats.others_removed += 1,
        }
        Ok(())
    }
}

/// The extended attributes of `path` (none where they cannot be read).
fn read_xattrs(path: &Path) -> Vec<Xattr> {
    let Ok(names) = xattr::list(path) else {
        return Vec::new();
    };
    let mut out: Vec<Xattr> = names
        .filter_map(|n| {
            let value = xattr::get(path, &n).ok().flatten()?;
            Some(Xattr {
                name: n.as_bytes().to_vec(),
                value,
            })
        })
        .collect();
    out.sort();
    out
}
