//! The walk of a backup: depth first in byte order of names, building each
//! entry's node from its metadata, reusing the parent snapshot's node for an
//! unchanged file (same size, mtime, ctime and inode) and its tree blob for
//! an unchanged directory, handing changed files to the reading workers
//! ([`super::readers`]) and going on; [`super::assemble`] puts the nodes
//! together in walk order as the files are read and stores trees bottom-up.

use super::BackupOptions;
use super::ahead::{self, Ahead, Entry, Listing, Pending};
use super::assemble::{Assembly, DirPrep, Event, PendingFile};
use super::blobs::{SharedSink, ZeroIds};
use super::exclude::Excluder;
use super::guide::Prior;
use super::parent::{OldNode, ParentTrees};
use super::readers::{Job, ReadJob};
use super::split::{self, HelpJob, Split, SplitAt};
use crate::error::{Error, Result};
use crate::id::Id;
use crate::localfs::{self, meta::Owners, meta::node_from_metadata, stat::Stat};
use crate::pack::BlobType;
use crate::progress::{Action, Progress};
use crate::snapshot::Summary;
use crate::tree::{Node, NodeKind, Tree};
use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How the walk comes to a directory.
enum Via {
    /// It is a backed-up path.
    Root,
    /// It is an entry of the directory above. `known`: the parent
    /// snapshot's tree blob of it is in the index; `listing`: its listing,
    /// if it was asked for ahead.
    Entry {
        known: bool,
        listing: Option<Pending>,
    },
}

/// Which entries of the parent snapshot's tree of a directory have all
/// their blobs in the index. Asked only about a name together with the
/// parent's node of that name.
enum KnownHere {
    /// All of them: the tree is recorded as checked.
    All,
    /// The names found so.
    Names(HashSet<Vec<u8>>),
}

impl KnownHere {
    fn contains(&self, name: &[u8]) -> bool {
        match self {
            KnownHere::All => true,
            KnownHere::Names(n) => n.contains(name),
        }
    }
}

/// The trees of the snapshot a backup makes (stored or taken over from the
/// parent), recorded as checked in the index once the snapshot is saved:
/// every blob they refer to is then in the index. At most [`Self::LIMIT`]
/// are kept (32 bytes each): a larger tree records only its first ones.
#[derive(Default)]
pub(super) struct NewTrees {
    pub(super) ids: Vec<Id>,
}

impl NewTrees {
    const LIMIT: usize = 1 << 20;

    pub(super) fn note(&mut self, id: Id) {
        if self.ids.len() < Self::LIMIT {
            self.ids.push(id);
        }
    }
}

/// An entry of a directory that the walk goes on to.
struct Step {
    name: OsString,
    path: PathBuf,
    /// Its path for the kernel, when that is not `path`.
    fs_path: Option<PathBuf>,
    md: Stat,
}

impl Step {
    /// Its path for the kernel.
    fn fs_path(&self) -> &Path {
        self.fs_path.as_deref().unwrap_or(&self.path)
    }
}

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
    /// Backed-up paths inside the ones walked next ([`super::root`]).
    pub(super) grafts: super::root::Grafts,
    /// The mount points `-x` found in the directory being listed.
    pub(super) mount_points: Vec<(OsString, PathBuf, Stat)>,
    /// Where files to read go (the reading workers).
    pub(super) jobs: super::readers::Jobs,
    /// Which files two workers read.
    pub(super) split_at: SplitAt,
    /// The walk's entries waiting to be put together in order.
    pub(super) assembly: Assembly,
    /// For storing trees (never all zeros, so this stays empty).
    pub(super) zeros: ZeroIds,
    /// The threads that list directories ahead of the walk.
    pub(super) ahead: Ahead,
    /// The trees of the new snapshot.
    pub(super) trees: NewTrees,
    /// The last tree stored, encoded (a buffer reused from tree to tree,
    /// up to [`crate::tree::BUFFER_KEPT`]).
    pub(super) tree_bytes: Vec<u8>,
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
    /// A regular file's attributes are left to [`Archiver::entry_node`],
    /// which reads them through the file once it has it open.
    fn base_node(
        &mut self,
        path: &Path,
        fs_path: &Path,
        md: &Stat,
    ) -> Result<(Node, Option<OldNode>, bool)> {
        let name = path
            .file_name()
            .map(|n| n.as_bytes().to_vec())
            .unwrap_or_default();
        let mut node = node_from_metadata(name, md, &mut self.owners, self.opts.with_atime);
        let old = self.parent.node_of(path)?;
        let same = self.unchanged_inode(&node, old.as_deref());
        match (&old, same, node.kind) {
            (_, _, NodeKind::Socket) => {}
            (Some(o), true, _) => node.xattrs = o.xattrs.clone(),
            (_, _, NodeKind::File) => {}
            _ => node.xattrs = self.read_xattrs(path, fs_path, None),
        }
        Ok((node, old, same))
    }

    /// Builds the node for one non-directory entry, or hands the file to
    /// the reading workers; either way it goes into the assembly.
    /// `known`: the parent's node of this name has all its chunks in the
    /// index (asked for the whole directory at once, see
    /// [`Archiver::known_in_parent`]).
    fn entry_node(&mut self, path: &Path, fs_path: &Path, md: &Stat, known: bool) -> Result<()> {
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
                    && super::parent::same_file_ignoring(o, &node, self.opts.ignore())
                    && (known || self.blobs.all_known(&o.content)?)
                {
                    if !same {
                        node.xattrs = self.read_xattrs(path, fs_path, None);
                    }
                    node.content = o.content.clone();
                    self.summary.files_unmodified += 1;
                    self.summary.total_bytes += node.size;
                    self.progress.bytes(node.size);
                    self.progress.file_done();
                    self.progress
                        .tell(path, false, Action::Unchanged, node.size);
                    return self.push(Event::Ready(node));
                }
                let (reply, rx) = crossbeam_channel::bounded(1);
                let file = localfs::open_noatime(fs_path);
                // Through the open file: listing by path made the kernel
                // walk the whole path again (3 % of a cold backup's CPU).
                // A file that cannot be opened is reported by its reader.
                if !same && let Ok(f) = &file {
                    node.xattrs = self.read_xattrs(path, fs_path, Some(f));
                }
                // With `--force` the parent is not trusted, not even as a
                // guide to where the file's chunks are cut.
                let prior = old
                    .as_ref()
                    .filter(|_| !self.opts.force)
                    .and_then(Prior::new);
                let help = match &file {
                    Ok(f) if self.split_at.splits(md.size, md.is_sparse()) => {
                        split::reopen(f).ok().map(|file| HelpJob {
                            file,
                            size: md.size,
                            split: Split::new(md.size, &self.split_at),
                            prior: prior.clone(),
                        })
                    }
                    _ => None,
                };
                let job = ReadJob {
                    path: path.to_path_buf(),
                    file,
                    md: *md,
                    reply,
                    split: help.as_ref().map(|h| h.split.clone()),
                    prior,
                };
                let sent = self.jobs.send(Job::Read(job)).is_ok()
                    && help.is_none_or(|h| self.jobs.send(Job::Help(h)).is_ok());
                if !sent {
                    return Err(Error::internal("the reading workers stopped"));
                }
                return self.push(Event::File(PendingFile {
                    path: self.told(path),
                    node,
                    had_parent: old.is_some(),
                    len_seen: md.size,
                    rx,
                }));
            }
            _ => {}
        }
        self.push(Event::Ready(node))
    }

    /// `path`, kept for [`Progress::tell`] when the progress shows each
    /// entry (`-vv`); else nothing to allocate.
    fn told(&self, path: &Path) -> Option<PathBuf> {
        self.progress.wants_entries().then(|| path.to_path_buf())
    }

    /// What a directory's node needs besides its entries, taken when the
    /// walk leaves it: its metadata, and the parent snapshot's node and tree
    /// (`known`: that node's tree blob is in the index).
    fn dir_prep(&mut self, path: &Path, fs_path: &Path, md: &Stat, known: bool) -> Result<DirPrep> {
        let (node, old, _) = self.base_node(path, fs_path, md)?;
        let old_tree = match &old {
            Some(o) if o.kind == NodeKind::Dir => self.parent.tree_of(path)?,
            _ => None,
        };
        Ok(DirPrep {
            path: self.told(path),
            node,
            old,
            old_tree,
            subtree_known: known,
        })
    }

    /// The names in the parent snapshot's tree of `dir` whose blobs are all
    /// in the index (a file's chunks, a directory's tree blob): all of them
    /// if the index has that tree recorded as checked
    /// ([`crate::index::Index::tree_checked`], one query), else asked in one
    /// read transaction for the whole directory. An unchanged file is then
    /// taken over without a query of its own.
    fn known_in_parent(&mut self, dir: &Path) -> Result<KnownHere> {
        if self.opts.force {
            return Ok(KnownHere::Names(HashSet::new()));
        }
        let Some((tree_id, tree)) = self.parent.tree_with_id(dir)? else {
            return Ok(KnownHere::Names(HashSet::new()));
        };
        if self.parent.tree_checked(&tree_id)? {
            return Ok(KnownHere::All);
        }
        let nodes: Vec<&Node> = tree
            .nodes
            .iter()
            .filter(|n| n.kind == NodeKind::File || n.subtree.is_some())
            .collect();
        let lists: Vec<&[Id]> = nodes
            .iter()
            .map(|n| match &n.subtree {
                Some(sub) if n.kind == NodeKind::Dir => std::slice::from_ref(sub),
                _ => n.content.as_slice(),
            })
            .collect();
        let known = self.blobs.all_known_each(&lists)?;
        Ok(KnownHere::Names(
            nodes
                .iter()
                .zip(known)
                .filter(|(_, k)| *k)
                .map(|(n, _)| n.name.clone())
                .collect(),
        ))
    }

    pub(super) fn store_tree(&mut self, tree: &Tree) -> Result<Id> {
        tree.encode_into(&mut self.tree_bytes)?;
        let id = self
            .blobs
            .store(&mut self.zeros, BlobType::Tree, &self.tree_bytes, false)?;
        if self.tree_bytes.capacity() > crate::tree::BUFFER_KEPT {
            // A large directory's buffer is not held to the end of the walk.
            self.tree_bytes = Vec::new();
        }
        self.trees.note(id);
        Ok(id)
    }

    /// Backs up one absolute path; returns its node (None if excluded or
    /// unreadable) once everything below it is read and stored.
    pub(super) fn backup_path(&mut self, root: &Path) -> Result<Option<Node>> {
        let md = match Stat::lstat(root) {
            Ok(m) => m,
            Err(e) => {
                self.warnings.push(format!("{}: {e}", root.display()));
                return Ok(None);
            }
        };
        if md.is_dir() {
            self.walk_dir(root, root, &md, md.dev, Via::Root)?;
        } else {
            self.entry_node(root, root, &md, false)?;
        }
        self.drain()
    }

    /// Backs up directory `path` and everything below it (depth first, in
    /// byte order of names) into the assembly. Excluded entries are pruned
    /// before anything below them is read; a directory excluded by what it
    /// contains (a marker file, a cache tag: seen in its listing) adds
    /// nothing, unless it is a backed-up path itself.
    fn walk_dir(
        &mut self,
        path: &Path,
        fs_path: &Path,
        md: &Stat,
        root_dev: u64,
        via: Via,
    ) -> Result<()> {
        let (root, known, listing) = match via {
            Via::Root => (true, false, None),
            Via::Entry { known, listing } => (false, known, listing),
        };
        let mut listing = match listing {
            Some(p) => p.take(fs_path, &self.excluder),
            None => ahead::list(fs_path, (!root).then_some(&self.excluder)),
        };
        if !root && matches!(&listing, Ok(l) if l.excluded) {
            // Excluded by what it holds; but a backed-up path below it is
            // kept, in a directory made for it.
            if let Some(node) = super::root::graft_node(self, path)? {
                self.push(Event::Ready(node))?;
            }
            return Ok(());
        }
        // Its tree would lie deeper than readers go: left out (even empty,
        // it would be a tree too deep), and warned about.
        if path.components().count() > crate::tree::MAX_DEPTH {
            self.warnings.push(format!(
                "{}: left out: directories nested more than {} levels deep",
                path.display(),
                crate::tree::MAX_DEPTH
            ));
            return Ok(());
        }
        if let Ok(l) = &mut listing
            && let Some((id, tree)) = l.old_tree.take()
        {
            self.parent.offer(path, id, tree)?;
        }
        let known_here = self.known_in_parent(path)?;
        self.push(Event::Open)?;
        let mut mount_points = Vec::new();
        match listing {
            Ok(listing) => {
                // Paths below a long one go through this descriptor: it
                // stays open until the walk leaves the directory.
                let Listing {
                    anchor,
                    entries,
                    below,
                    ..
                } = listing;
                let steps = self.steps(path, fs_path, entries, root_dev);
                mount_points = std::mem::take(&mut self.mount_points);
                // The subdirectories' listings: asked for by the pool with
                // this one, or here when the walk made it.
                let below = match below {
                    Some(b) => b,
                    None => self.ask_below(path, &steps, root_dev)?,
                };
                let mut below = below.into_iter().peekable();
                for st in &steps {
                    crate::interrupt::check()?;
                    let file_known = known_here.contains(st.name.as_bytes());
                    if self.grafted(st)? {
                        continue;
                    }
                    if st.md.is_dir() {
                        // Both in byte order of names; one the walk does
                        // not enter is given up.
                        let pending = loop {
                            match below.peek() {
                                Some((n, _)) if *n < st.name => drop(below.next()),
                                Some((n, _)) if *n == st.name => {
                                    break below.next().map(|(_, p)| p);
                                }
                                _ => break None,
                            }
                        };
                        let via = Via::Entry {
                            known: file_known,
                            listing: pending,
                        };
                        self.walk_dir(&st.path, st.fs_path(), &st.md, root_dev, via)?;
                    } else {
                        self.entry_node(&st.path, st.fs_path(), &st.md, file_known)?;
                    }
                }
                drop(below);
                drop(anchor);
            }
            Err(e) => self
                .warnings
                .push(format!("{}: cannot read directory: {e}", path.display())),
        }
        self.place_left_out(path, mount_points)?;
        drop(known_here);
        let prep = self.dir_prep(path, fs_path, md, known)?;
        self.push(Event::Close(Box::new(prep)))
    }

    /// Whether a backed-up path named inside the walk's one stands in for
    /// entry `st` (pushed): one at the entry itself, or one below an entry
    /// the walk does not enter (hung below a directory made for it).
    fn grafted(&mut self, st: &Step) -> Result<bool> {
        let grafted = !self.grafts.is_empty()
            && (self.grafts.contains_key(&st.path) || !st.md.is_dir())
            && super::root::grafts_at_or_below(self, &st.path);
        if grafted && let Some(node) = super::root::graft_node(self, &st.path)? {
            self.push(Event::Ready(node))?;
        }
        Ok(grafted)
    }

    /// What directory `path` holds beside the entries the walk went to:
    /// `-x`'s `mount_points`, as empty directories (one where a backed-up
    /// path waits is that path's place), then the backed-up paths below
    /// entries the walk left out (by name, on another file system, or all
    /// of them: the directory was unreadable).
    fn place_left_out(
        &mut self,
        path: &Path,
        mount_points: Vec<(OsString, PathBuf, Stat)>,
    ) -> Result<()> {
        for (name, at, st) in mount_points {
            if super::root::grafts_at_or_below(self, &at) {
                continue;
            }
            let mut node = node_from_metadata(
                name.as_bytes().to_vec(),
                &st,
                &mut self.owners,
                self.opts.with_atime,
            );
            node.subtree = Some(self.store_tree(&Tree::default())?);
            self.push(Event::Ready(node))?;
        }
        for at in super::root::graft_points_below(self, path) {
            if let Some(node) = super::root::graft_node(self, &at)? {
                self.push(Event::Ready(node))?;
            }
        }
        Ok(())
    }

    /// Asks the pool for the listings of the subdirectories among `steps`
    /// of directory `path`, a listing the walk made itself, each with the
    /// parent snapshot's tree of it.
    fn ask_below(
        &mut self,
        path: &Path,
        steps: &[Step],
        root_dev: u64,
    ) -> Result<Vec<(OsString, Pending)>> {
        let old_here = self.parent.tree_of(path)?;
        let old_sub = |name: &std::ffi::OsStr| {
            old_here
                .as_ref()?
                .find(name.as_bytes())
                .filter(|n| n.kind == NodeKind::Dir)?
                .subtree
        };
        Ok(steps
            .iter()
            .filter(|s| s.md.is_dir())
            .filter_map(|d| {
                let p = self
                    .ahead
                    .ask(&d.path, d.fs_path(), root_dev, old_sub(&d.name))?;
                Some((d.name.clone(), p))
            })
            .collect())
    }

    /// The entries of directory `path` the walk goes on to, in order: those
    /// that could not be found are warned about, excluded ones left out,
    /// and with `--one-file-system` so are directories on other devices.
    fn steps(
        &mut self,
        path: &Path,
        fs_path: &Path,
        entries: Vec<Entry>,
        root_dev: u64,
    ) -> Vec<Step> {
        let mut steps = Vec::with_capacity(entries.len());
        for e in entries {
            let child = localfs::join(path, &e.name);
            let (long, cmd) = match e.found {
                Ok(found) => found,
                Err(err) => {
                    // Vanished since the listing, or unreadable.
                    self.warnings.push(format!("{}: {err}", child.display()));
                    continue;
                }
            };
            // A mount point under `-x`: kept as an empty directory, as
            // restic keeps it (a restored system has its `/proc`), unless
            // a pattern excludes it.
            if self.opts.one_file_system
                && cmd.is_dir()
                && cmd.dev != root_dev
                && !self.excluder.matches(&child)
            {
                self.mount_points.push((e.name, child, cmd));
                continue;
            }
            // What a directory contains is looked at when it is listed.
            if !ahead::keeps(
                &self.excluder,
                self.opts.one_file_system,
                &child,
                &cmd,
                root_dev,
            ) {
                continue;
            }
            let fs_path = match long {
                Some(p) => Some(p),
                None if fs_path == path => None,
                None => Some(localfs::join(fs_path, &e.name)),
            };
            steps.push(Step {
                name: e.name,
                path: child,
                fs_path,
                md: cmd,
            });
        }
        steps
    }
}
