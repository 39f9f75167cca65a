//! The walk of a restore: each tree of the snapshot is loaded in turn,
//! names are checked (no `..`, `/` or NUL), directories are made (really
//! directories: anything else in the way is removed, never followed),
//! existing entries are handled as `--overwrite` says, special files are
//! created on the spot, and regular files are queued in batches that
//! writer threads fill ([`super::files`], two batches at a time) while the
//! walk goes on. Hard links and directory metadata wait for the end.

use super::files::{self, BatchOutcome};
use super::select::Selector;
use super::source::PackSource;
use super::target::{self, DirState, FileJob};
use super::{Destination, Overwrite, RestoreOptions, RestoreReport};
use crate::error::{Error, Result};
use crate::id::Id;
use crate::index::BlobLocation;
use crate::localfs::{self, Anchor};
use crate::progress::{Action, Progress};
use crate::repository::Repository;
use crate::tree::{Node, NodeKind, is_safe_name};
use std::collections::{HashMap, VecDeque};
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::{Scope, ScopedJoinHandle};

/// A batch goes to the writer at this many files or bytes.
const BATCH_FILES: usize = 1024;
const BATCH_BYTES: u64 = 256 << 20;
/// The fewest files a batch holds, however few descriptors are allowed.
const MIN_BATCH_FILES: usize = 16;
/// Descriptors kept for what is not a batch's: the index cache, packs
/// kept open, the walk's directories, the lock, standard streams.
const OTHER_FILES: u64 = 128;
/// Batches written at once. A batch's writer plans its reads in the index
/// on its own thread, and each of its steps (create the files, fill them,
/// finish them) waits for the slowest file of the step before the next
/// begins: a second batch keeps the pool busy meanwhile.
const IN_FLIGHT: usize = 2;

/// A directory whose metadata is applied at the end.
pub(super) struct DirMeta {
    pub(super) path: PathBuf,
    /// How many directories of the snapshot hold it (0 for one directly
    /// in the restored tree's root).
    pub(super) depth: usize,
    /// This run made it with our user and group.
    pub(super) owned: bool,
    pub(super) node: Node,
    pub(super) shown: String,
    pub(super) _anchor: Anchor,
}

/// A hard link to make once every file's content is in place.
pub(super) struct PendingLink {
    /// The first restored path of the inode.
    pub(super) existing: PathBuf,
    pub(super) dest: PathBuf,
    pub(super) shown: String,
    /// Something was at `dest` (it is replaced).
    pub(super) existed: bool,
    pub(super) _anchors: (Anchor, Anchor),
}

/// A tree to walk: its ID, and where it is stored if that was looked up
/// already ([`TreeRestorer::subtree_locations`]; else it is looked up as
/// it is loaded).
#[derive(Clone, Copy)]
pub(super) struct TreeAt {
    pub(super) id: Id,
    pub(super) loc: Option<BlobLocation>,
}

/// The directory a tree is restored into: `path`, valid while `anchor`
/// lives, and its descriptor if the caller opened it already.
pub(super) struct DirAt<'a> {
    pub(super) path: &'a Path,
    pub(super) anchor: Anchor,
    pub(super) fd: Option<File>,
}

/// Where one directory's entries go.
struct DirTarget<'a> {
    path: &'a Path,
    /// The directory's own descriptor (None in a dry run).
    fd: &'a Anchor,
    /// The group of the directory if this run created it (see [`DirState`]).
    fresh: Option<u32>,
}

/// One restore's walk and what it has gathered.
pub(super) struct TreeRestorer<'scope, 'env> {
    pub(super) repo: &'env Repository,
    pub(super) dest: &'env Destination,
    pub(super) opts: &'env RestoreOptions,
    pub(super) source: &'env PackSource<'env>,
    pub(super) progress: &'env dyn Progress,
    pub(super) scope: &'scope Scope<'scope, 'env>,
    /// The batches being written while the walk goes on, oldest first.
    pub(super) pending: VecDeque<ScopedJoinHandle<'scope, Result<BatchOutcome>>>,
    pub(super) selector: Selector,
    pub(super) report: RestoreReport,
    pub(super) batch: Vec<FileJob>,
    pub(super) batch_bytes: u64,
    /// A batch goes to a writer at this many files ([`batch_files`]).
    pub(super) batch_files: usize,
    pub(super) dirs: Vec<DirMeta>,
    /// The depth of the directory being walked ([`DirMeta::depth`] of its
    /// subdirectories).
    pub(super) depth: usize,
    /// (device, inode) of multiply-linked files → first restored path.
    pub(super) hardlinks: HashMap<(u64, u64), (PathBuf, Anchor)>,
    pub(super) links: Vec<PendingLink>,
    /// Makes temporary file names unique within this run.
    pub(super) tmp_counter: u64,
    pub(super) pid: u32,
    /// Directories created only to reach included paths.
    pub(super) unselected_dirs: Vec<(PathBuf, Anchor)>,
    /// For `delete`: the path of the restored tree's root in the snapshot
    /// (empty, or a `SNAPSHOT:SUBPATH`'s subpath) and the snapshot's
    /// backed-up paths, at or below which alone anything is deleted.
    pub(super) delete_within: (String, Vec<String>),
}

impl<'scope, 'env> TreeRestorer<'scope, 'env> {
    /// Records a problem with `rel` (the root shows as `/`).
    fn error(&mut self, rel: &str, e: impl std::fmt::Display) {
        let shown = if rel.is_empty() { "/" } else { rel };
        self.report.errors.push(format!("{shown}: {e}"));
    }

    /// Restores tree `tree` into directory `at`.
    /// `fresh`: the group of that directory if this run created it, so nothing in it
    /// needs checking before it is created (tree names are unique), and a
    /// file made in it gets our user and that group.
    pub(super) fn tree(
        &mut self,
        tree: TreeAt,
        at: DirAt<'_>,
        rel: &str,
        ancestor_included: bool,
        fresh: Option<u32>,
    ) -> Result<()> {
        let loaded = match &tree.loc {
            Some(loc) => self.repo.load_tree_at(&tree.id, loc),
            None => self.repo.load_tree(&tree.id),
        };
        let t = match loaded {
            Ok(t) => t,
            Err(e) => {
                self.error(rel, e);
                return Ok(());
            }
        };
        let DirAt {
            path: dir,
            anchor,
            fd,
        } = at;
        // This directory's descriptor: files are created and named relative
        // to it (no path lookups), and paths beyond PATH_MAX go through it.
        let dirfd: Anchor = if self.opts.dry_run {
            None
        } else {
            match fd.map_or_else(|| localfs::open_dir_path(dir), Ok) {
                Ok(f) => Some(Arc::new(f)),
                Err(e) => {
                    self.error(rel, e);
                    return Ok(());
                }
            }
        };
        // Before anything of this run is in it: what the snapshot's
        // directory does not hold goes (a directory this run made holds
        // nothing yet).
        if self.opts.delete && fresh.is_none() && self.may_delete_in(rel) {
            self.delete_extra(dir, &dirfd, &t.nodes, rel, ancestor_included);
        }
        let target = DirTarget {
            path: dir,
            fd: &dirfd,
            fresh,
        };
        // What of the tree is restored (with whether it is included; None
        // for an unsafe name), decided first, so that the trees of the
        // subdirectories walked are looked up together.
        let mut picked = Vec::with_capacity(t.nodes.len());
        for n in t.nodes {
            let shown = format!("{rel}/{}", n.name_lossy());
            if !is_safe_name(&n.name) {
                picked.push((n, shown, None));
                continue;
            }
            let (visible, included) = self.selector.selected(&shown, ancestor_included);
            // Not walked at all: a directory that cannot hold what is
            // included (a restore of one file skips the rest of the tree).
            let beside =
                n.kind == NodeKind::Dir && !included && !self.selector.may_hold_included(&shown);
            if visible && !beside {
                picked.push((n, shown, Some(included)));
            }
        }
        let walked = |(n, _, inc): &(Node, String, Option<bool>)| {
            (inc.is_some() && n.kind == NodeKind::Dir)
                .then_some(n.subtree)
                .flatten()
        };
        let ids: Vec<Id> = picked.iter().filter_map(walked).collect();
        let mut locs = self.subtree_locations(&ids).into_iter();
        let mut local: Anchor = dirfd.clone();
        for pick in picked {
            crate::interrupt::check()?;
            // Taken for every walked subtree, in order, before anything
            // may skip the node.
            let loc = walked(&pick).and_then(|_| locs.next().flatten());
            let (n, shown, included) = pick;
            let Some(included) = included else {
                self.report.errors.push(format!(
                    "{shown:?}: refusing an unsafe name from the snapshot"
                ));
                continue;
            };
            let name = OsStr::from_bytes(&n.name);
            let (path, path_anchor) = match localfs::child_path(dir, &anchor, name, &mut local) {
                Ok(p) => p,
                Err(e) => {
                    self.error(&shown, e);
                    continue;
                }
            };
            if n.kind == NodeKind::Dir {
                self.dir((path, path_anchor), shown, n, loc, included, &target)?;
            } else if included && let Err(e) = self.entry(&path, path_anchor, &shown, n, &target) {
                self.error(&shown, e);
            }
        }
        Ok(())
    }

    /// Whether `delete` may clear the directory at `rel`: only at or below
    /// a path the snapshot backed up, never in the directories above it
    /// (a restore of `/home/ann` into `/` clears nothing in `/` or `/home`
    /// but what the snapshot holds of `/home/ann`).
    fn may_delete_in(&self, rel: &str) -> bool {
        let (base, roots) = &self.delete_within;
        let full = format!("{}{rel}", base.trim_end_matches('/'));
        let full = if full.is_empty() { "/" } else { full.as_str() };
        roots.iter().any(|p| {
            let p = p.trim_end_matches('/');
            p.is_empty() || full == p || full.starts_with(&format!("{p}/"))
        })
    }

    /// Removes the entries of directory `dir` (its descriptor `dirfd`;
    /// None in a dry run, which only reports) whose names `nodes` lacks and
    /// that the include and exclude patterns select.
    fn delete_extra(
        &mut self,
        dir: &Path,
        dirfd: &Anchor,
        nodes: &[Node],
        rel: &str,
        ancestor_included: bool,
    ) {
        let listed = match dirfd {
            Some(fd) => target::names_in(fd),
            None => match fs::read_dir(dir) {
                Ok(rd) => rd.map(|e| e.map(|e| e.file_name())).collect(),
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
                Err(e) => Err(e),
            },
        };
        let names = match listed {
            Ok(n) => n,
            Err(e) => {
                self.error(
                    rel,
                    format!("cannot list it to delete what the snapshot lacks: {e}"),
                );
                return;
            }
        };
        let held: std::collections::HashSet<&[u8]> =
            nodes.iter().map(|n| n.name.as_slice()).collect();
        for name in names {
            if held.contains(name.as_bytes()) {
                continue;
            }
            let shown = format!("{rel}/{}", name.to_string_lossy());
            if !self.selector.selected(&shown, ancestor_included).1 {
                continue;
            }
            match dirfd {
                Some(fd) => match target::remove_entry(fd, &name) {
                    Ok(()) => {
                        self.progress
                            .tell(Path::new(&shown), false, Action::Deleted, 0);
                        self.report.deleted.push(shown);
                    }
                    Err(e) => self.error(&shown, format!("cannot delete: {e}")),
                },
                None => {
                    self.progress
                        .tell(Path::new(&shown), false, Action::Deleted, 0);
                    self.report.deleted.push(shown);
                }
            }
        }
    }

    /// Where trees `ids` (the subdirectories one tree's walk enters) are
    /// stored, in their order, asked of the index in one read transaction:
    /// a lookup of its own was two queries, each taking and releasing the
    /// index's shared lock. Where the index cannot answer, each tree is
    /// looked up again as it is loaded (which reports the error with its
    /// path).
    fn subtree_locations(&self, ids: &[Id]) -> Vec<Option<BlobLocation>> {
        if ids.is_empty() {
            return Vec::new();
        }
        self.repo
            .lookup_many(ids)
            .unwrap_or_else(|_| vec![None; ids.len()])
    }

    /// Restores directory node `n` at `path` (valid while `anchor` lives)
    /// and what is below it. An included directory is made and gets its
    /// metadata at the end; one that is only on the way to included paths
    /// is made if it has entries and removed again at the end if nothing
    /// was restored in it.
    /// `loc`: where its tree is stored, if looked up already. `parent`:
    /// the directory it is made in (its descriptor is None in a dry run).
    fn dir(
        &mut self,
        (path, anchor): (PathBuf, Anchor),
        shown: String,
        n: Node,
        loc: Option<BlobLocation>,
        included: bool,
        parent: &DirTarget<'_>,
    ) -> Result<()> {
        let name = OsStr::from_bytes(&n.name);
        let parent_fd = parent.fd.as_deref().filter(|_| !self.opts.dry_run);
        let mut created = None;
        if let Some(pfd) = parent_fd.filter(|_| included || n.subtree.is_some()) {
            let in_ours = parent.fresh == Some(self.dest.egid);
            match self.dest.safe_mkdir(pfd, name, &path, in_ours) {
                Ok(c) => created = c,
                Err(e) => {
                    self.error(&shown, e);
                    return Ok(());
                }
            }
        }
        if let Some(s) = n.subtree
            // The root's tree is at depth 1, its subdirectories' at 2.
            && self.depth + 2 > crate::tree::MAX_DEPTH
        {
            // Nothing below is restored, as below an unreadable tree.
            self.error(&shown, crate::tree::too_deep(format!("tree {s}")));
        } else if let Some(s) = n.subtree {
            // Opened relative to the parent, as it was made. If it cannot
            // be, nothing below it is restored; its own metadata still is.
            match parent_fd
                .map(|pfd| localfs::open_dir_at(pfd, name))
                .transpose()
            {
                Ok(fd) => {
                    self.depth += 1;
                    let sub = TreeAt { id: s, loc };
                    let at = DirAt {
                        path: &path,
                        anchor: anchor.clone(),
                        fd,
                    };
                    let walked = self.tree(sub, at, &shown, included, created);
                    self.depth -= 1;
                    walked?;
                }
                Err(e) => self.error(&shown, e),
            }
        }
        if included {
            self.report.dirs += 1;
            // Told once its metadata is set (`finish_dirs`); a dry run sets none.
            if self.opts.dry_run {
                self.progress
                    .tell(Path::new(&shown), true, Action::Restored, 0);
            }
            if !self.opts.dry_run {
                self.dirs.push(DirMeta {
                    path,
                    depth: self.depth,
                    owned: created == Some(self.dest.egid),
                    node: n,
                    shown,
                    _anchor: anchor,
                });
            }
        } else if !self.opts.dry_run {
            self.unselected_dirs.push((path, anchor));
        }
        Ok(())
    }

    /// Decides about an existing entry (see [`Existing`]); with `dry`,
    /// decides only (nothing is removed).
    fn clear_existing(
        &mut self,
        dest: &Path,
        shown: &str,
        n: &Node,
        dry: bool,
    ) -> std::io::Result<Existing> {
        let md = match fs::symlink_metadata(dest) {
            Ok(m) => m,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Existing::Absent),
            Err(e) => return Err(e),
        };
        let ft = md.file_type();
        if ft.is_symlink() {
            // Replaced, never followed.
            if !dry {
                fs::remove_file(dest)?;
            }
            return Ok(Existing::Replaced);
        }
        if ft.is_dir() {
            self.report
                .skipped
                .push(format!("{shown}: a directory is in the way"));
            return Ok(Existing::Kept);
        }
        let mtime = md.mtime() as i128 * 1_000_000_000 + md.mtime_nsec() as i128;
        let same = ft.is_file()
            && n.kind == NodeKind::File
            && md.len() == n.size
            && mtime == n.mtime_ns as i128;
        let replace = match self.opts.overwrite {
            Overwrite::Always => true,
            Overwrite::IfChanged => !same,
            Overwrite::IfNewer => (n.mtime_ns as i128) > mtime,
            Overwrite::Never => false,
        };
        if !replace {
            self.report.skipped.push(format!(
                "{shown}: already exists{}",
                if same { " (unchanged)" } else { "" }
            ));
            self.progress
                .tell(Path::new(shown), false, Action::Unchanged, n.size);
            return Ok(Existing::Kept);
        }
        if !ft.is_file() && !dry {
            fs::remove_file(dest)?;
        }
        Ok(Existing::Replaced)
    }

    /// Restores one non-directory node at `path` in directory `dir`.
    fn entry(
        &mut self,
        path: &Path,
        anchor: Anchor,
        shown: &str,
        n: Node,
        dir: &DirTarget<'_>,
    ) -> Result<()> {
        if n.kind == NodeKind::Socket {
            self.report
                .skipped
                .push(format!("{shown}: sockets are recorded but not restored"));
            return Ok(());
        }
        let dry = self.opts.dry_run;
        // A dry run decides as the real one would, and changes nothing.
        let existed = match dir.fresh {
            Some(_) => false,
            None => match self
                .clear_existing(path, shown, &n, dry)
                .map_err(|e| Error::io(path, e))?
            {
                Existing::Kept => return Ok(()),
                Existing::Absent => false,
                Existing::Replaced => true,
            },
        };
        let action = if existed {
            Action::Updated
        } else {
            Action::Restored
        };
        if dry {
            if n.kind == NodeKind::File {
                self.report.files += 1;
                self.report.bytes += n.size;
                self.progress.bytes(n.size);
                self.progress.file_done();
            }
            self.progress.tell(Path::new(shown), false, action, n.size);
            return Ok(());
        }
        if n.kind == NodeKind::File
            && n.links > 1
            && self.link_to_earlier(path, &anchor, shown, &n, existed)
        {
            return Ok(());
        }
        if n.kind != NodeKind::File {
            target::create_special(path, &n)?;
            self.dest.apply_meta(path, &n)?;
            self.progress.tell(Path::new(shown), false, action, 0);
            return Ok(());
        }
        let fd = dir.fd.clone().ok_or_else(|| {
            Error::internal(format!(
                "{shown}: no descriptor for directory {}",
                dir.path.display()
            ))
        })?;
        let dir_state = DirState {
            fresh: dir.fresh.is_some(),
            owned: dir.fresh == Some(self.dest.egid),
        };
        self.queue_file(path, anchor, shown, n, fd, (dir_state, existed))
    }

    /// For a file with several links: if an earlier path of the same inode
    /// was restored, queues a hard link to it and returns true; otherwise
    /// remembers this path as the inode's first.
    /// `existed`: something was at `path` (the link replaces it).
    fn link_to_earlier(
        &mut self,
        path: &Path,
        anchor: &Anchor,
        shown: &str,
        n: &Node,
        existed: bool,
    ) -> bool {
        let key = (n.device, n.inode);
        if let Some((first, first_anchor)) = self.hardlinks.get(&key) {
            self.links.push(PendingLink {
                existing: first.clone(),
                dest: path.to_path_buf(),
                shown: shown.to_string(),
                existed,
                _anchors: (first_anchor.clone(), anchor.clone()),
            });
            self.report.files += 1;
            self.progress.file_done();
            return true;
        }
        self.hardlinks
            .insert(key, (path.to_path_buf(), anchor.clone()));
        false
    }

    fn queue_file(
        &mut self,
        dest: &Path,
        anchor: Anchor,
        shown: &str,
        n: Node,
        dir: Arc<File>,
        (dir_state, existed): (DirState, bool),
    ) -> Result<()> {
        self.tmp_counter += 1;
        let tmp =
            std::ffi::OsString::from(format!(".larder-restore-{}-{}", self.pid, self.tmp_counter));
        self.batch_bytes += n.size;
        self.batch.push(FileJob {
            dest: dest.to_path_buf(),
            tmp,
            node: n,
            shown: shown.to_string(),
            dir,
            dir_state,
            existed,
            _anchor: anchor,
        });
        if self.batch.len() >= self.batch_files || self.batch_bytes >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Hands the queued files to a writer thread (once fewer than
    /// [`IN_FLIGHT`] batches are being written), so the walk goes on while
    /// content is written.
    pub(super) fn flush(&mut self) -> Result<()> {
        while self.pending.len() >= IN_FLIGHT {
            self.join_oldest()?;
        }
        let jobs = std::mem::take(&mut self.batch);
        self.batch_bytes = 0;
        if jobs.is_empty() {
            return Ok(());
        }
        let (repo, source, dest, progress) = (self.repo, self.source, self.dest, self.progress);
        let verify = self.opts.verify;
        self.pending.push_back(
            self.scope
                .spawn(move || files::write_batch(repo, source, dest, jobs, verify, progress)),
        );
        Ok(())
    }

    /// Waits for every batch being written and adds them to the report.
    pub(super) fn join_pending(&mut self) -> Result<()> {
        while !self.pending.is_empty() {
            self.join_oldest()?;
        }
        Ok(())
    }

    /// Waits for the oldest batch being written and adds it to the report
    /// (so errors are reported in the walk's order).
    fn join_oldest(&mut self) -> Result<()> {
        if let Some(h) = self.pending.pop_front() {
            let out = h
                .join()
                .map_err(|_| Error::internal("a restore writer thread panicked"))??;
            self.report.files += out.files;
            self.report.bytes += out.bytes;
            self.report.verified += out.verified;
            self.report.errors.extend(out.errors);
        }
        Ok(())
    }
}

/// The most descriptors a restore holds at once with `batch_files` files
/// per batch: each batch in flight holds its files and their directories.
pub(super) fn descriptors_held(batch_files: usize) -> u64 {
    OTHER_FILES + 2 * IN_FLIGHT as u64 * batch_files as u64
}

/// Files per batch when the process may hold `allowed` descriptors: a
/// batch being written holds each of its files open, and the directory
/// of each, and [`IN_FLIGHT`] batches are written at once.
pub(super) fn batch_files(allowed: u64) -> usize {
    let per_batch = allowed.saturating_sub(OTHER_FILES) / (2 * IN_FLIGHT as u64);
    usize::try_from(per_batch)
        .unwrap_or(BATCH_FILES)
        .clamp(MIN_BATCH_FILES, BATCH_FILES)
}

/// What a restore found where an entry goes, and did about it.
enum Existing {
    /// Nothing: the entry is written.
    Absent,
    /// Something the overwrite policy lets go: the entry replaces it.
    Replaced,
    /// Something kept: the entry is skipped.
    Kept,
}
