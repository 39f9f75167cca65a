//! The walk of a backup: depth first in byte order of names, building each
//! entry's node from its metadata, reusing the parent snapshot's node for an
//! unchanged file (same size, mtime, ctime and inode) and its tree blob for
//! an unchanged directory, handing changed files to the reading workers
//! ([`super::readers`]) and going on; [`super::assemble`] puts the nodes
//! together in walk order as the files are read and stores trees bottom-up.

use super::BackupOptions;
use super::assemble::{Assembly, DirPrep, Event, PendingFile};
use super::blobs::{SharedSink, ZeroIds};
use super::exclude::Excluder;
use super::parent::ParentTrees;
use super::readers::ReadJob;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::localfs::{self, Anchor, meta::Owners, meta::node_from_metadata};
use crate::pack::BlobType;
use crate::progress::Progress;
use crate::snapshot::Summary;
use crate::tree::{Node, NodeKind, Tree};
use crossbeam_channel::Sender;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// One backup's walk: its options, the parent's trees, the sink new blobs
/// go to, and what it has counted and found so far.
pub(super) struct Archiver<'r, 'p> {
    pub(super) opts: &'r BackupOptions,
    pub(super) blobs: &'p SharedSink<'r>,
    pub(super) parent: ParentTrees<'r>,
    pub(super) owners: Owners,
    pub(super) summary: Summary,
    /// One line per path that could not be read (completely).
    pub(super) warnings: Vec<String>,
    pub(super) progress: &'p dyn Progress,
    pub(super) excluder: Excluder,
    /// The tree of the directory finished last (the root of a walk).
    pub(super) last_tree: Option<Tree>,
    /// Where files to read go (the reading workers).
    pub(super) jobs: Sender<ReadJob>,
    /// The walk's entries waiting to be put together in order.
    pub(super) assembly: Assembly,
    /// For storing trees (never all zeros, so this stays empty).
    pub(super) zeros: ZeroIds,
}

impl Archiver<'_, '_> {
    /// Whether `old` (from the parent snapshot) is the same inode with the
    /// same ctime: then its extended attributes (and a symlink's target)
    /// cannot have changed, since changing them moves the ctime.
    fn unchanged_inode(&self, node: &Node, old: Option<&Node>) -> bool {
        matches!(old, Some(o) if !self.opts.force
            && o.kind == node.kind
            && o.inode == node.inode
            && o.device == node.device
            && o.ctime_ns == node.ctime_ns)
    }

    /// The node for `path` from its metadata and extended attributes, with
    /// the parent snapshot's node for it and whether that is the same,
    /// unchanged inode (then its attributes are reused, not read again).
    fn base_node(
        &mut self,
        path: &Path,
        fs_path: &Path,
        md: &std::fs::Metadata,
    ) -> Result<(Node, Option<Node>, bool)> {
        let name = path
            .file_name()
            .map(|n| n.as_bytes().to_vec())
            .unwrap_or_default();
        let mut node = node_from_metadata(name, md, &mut self.owners, self.opts.with_atime);
        let old = self.parent.node_of(path)?;
        let same = self.unchanged_inode(&node, old.as_ref());
        if node.kind != NodeKind::Socket {
            node.xattrs = match (&old, same) {
                (Some(o), true) => o.xattrs.clone(),
                _ => self.read_xattrs(path, fs_path),
            };
        }
        Ok((node, old, same))
    }

    /// Builds the node for one non-directory entry, or hands the file to
    /// the reading workers; either way it goes into the assembly.
    fn entry_node(&mut self, path: &Path, fs_path: &Path, md: &std::fs::Metadata) -> Result<()> {
        let (mut node, old, same) = self.base_node(path, fs_path, md)?;
        match node.kind {
            // A symlink's target cannot change without a new inode.
            NodeKind::Symlink if same => {
                node.link_target = old
                    .as_ref()
                    .map(|o| o.link_target.clone())
                    .unwrap_or_default();
            }
            NodeKind::Symlink => match std::fs::read_link(fs_path) {
                Ok(t) => node.link_target = t.as_os_str().as_bytes().to_vec(),
                Err(e) => {
                    self.warnings
                        .push(format!("{}: cannot read link: {e}", path.display()));
                    return Ok(());
                }
            },
            NodeKind::File => {
                self.summary.total_files += 1;
                // The parent's chunk list is reused only while every chunk
                // is still in the index: a file whose data was lost is read
                // again (self-healing), never carried into a new snapshot.
                if let Some(o) = &old
                    && !self.opts.force
                    && super::parent::same_file(o, &node)
                    && self.blobs.all_known(&o.content)?
                {
                    node.content = o.content.clone();
                    self.summary.files_unmodified += 1;
                    self.summary.total_bytes += node.size;
                    self.progress.bytes(node.size);
                    self.progress.file_done();
                    return self.push(Event::Ready(node));
                }
                let (reply, rx) = crossbeam_channel::bounded(1);
                let job = ReadJob {
                    path: path.to_path_buf(),
                    file: localfs::open_noatime(fs_path),
                    md: md.clone(),
                    reply,
                };
                if self.jobs.send(job).is_err() {
                    return Err(Error::internal("the reading workers stopped"));
                }
                return self.push(Event::File(PendingFile {
                    node,
                    had_parent: old.is_some(),
                    len_seen: md.len(),
                    rx,
                }));
            }
            _ => {}
        }
        self.push(Event::Ready(node))
    }

    /// What a directory's node needs besides its entries, taken when the
    /// walk leaves it: its metadata, and the parent snapshot's node and tree.
    fn dir_prep(&mut self, path: &Path, fs_path: &Path, md: &std::fs::Metadata) -> Result<DirPrep> {
        let (node, old, _) = self.base_node(path, fs_path, md)?;
        let old_tree = match &old {
            Some(o) if o.kind == NodeKind::Dir => self.parent.tree_of(path)?,
            _ => None,
        };
        Ok(DirPrep {
            node,
            old,
            old_tree,
        })
    }

    pub(super) fn store_tree(&mut self, tree: &Tree) -> Result<Id> {
        let bytes = tree.encode()?;
        self.blobs.store(&mut self.zeros, BlobType::Tree, &bytes)
    }

    /// Backs up one absolute path; returns its node (None if excluded or
    /// unreadable) once everything below it is read and stored.
    pub(super) fn backup_path(&mut self, root: &Path) -> Result<Option<Node>> {
        let md = match root.symlink_metadata() {
            Ok(m) => m,
            Err(e) => {
                self.warnings.push(format!("{}: {e}", root.display()));
                return Ok(None);
            }
        };
        if md.is_dir() {
            self.walk_dir(root, root, &md, md.dev())?;
        } else {
            self.entry_node(root, root, &md)?;
        }
        self.drain()
    }

    /// Backs up directory `path` and everything below it (depth first, in
    /// byte order of names) into the assembly. Excluded entries are pruned
    /// before anything below them is read.
    fn walk_dir(
        &mut self,
        path: &Path,
        fs_path: &Path,
        md: &std::fs::Metadata,
        root_dev: u64,
    ) -> Result<()> {
        self.push(Event::Open)?;
        // Below a path longer than the kernel takes (PATH_MAX), entries are
        // reached through this directory's descriptor: `/proc/self/fd/N/name`.
        let mut anchor: Anchor = None;
        match localfs::list_dir(fs_path) {
            Ok(names) => {
                for name in names {
                    crate::interrupt::check()?;
                    let child = path.join(&name);
                    let child_fs_path =
                        match localfs::child_path(fs_path, &None, &name, &mut anchor) {
                            Ok((p, _)) => p,
                            Err(e) => {
                                self.warnings.push(format!("{}: {e}", child.display()));
                                continue;
                            }
                        };
                    let cmd = match child_fs_path.symlink_metadata() {
                        Ok(m) => m,
                        Err(e) => {
                            // Vanished since the listing, or unreadable.
                            self.warnings.push(format!("{}: {e}", child.display()));
                            continue;
                        }
                    };
                    if self.excluder.excluded(&child, &child_fs_path, cmd.is_dir()) {
                        continue;
                    }
                    if cmd.is_dir() {
                        if self.opts.one_file_system && cmd.dev() != root_dev {
                            continue;
                        }
                        self.walk_dir(&child, &child_fs_path, &cmd, root_dev)?;
                    } else {
                        self.entry_node(&child, &child_fs_path, &cmd)?;
                    }
                }
            }
            Err(e) => self
                .warnings
                .push(format!("{}: cannot read directory: {e}", path.display())),
        }
        let prep = self.dir_prep(path, fs_path, md)?;
        self.push(Event::Close(Box::new(prep)))
    }
}
