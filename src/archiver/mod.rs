//! The backup pipeline: walk → read → chunk → hash → dedup → compress →
//! encrypt → pack, then tree blobs bottom-up and the snapshot object.
//!
//! Warm scans compare each file's size, mtime, ctime and inode with the
//! parent snapshot's node and reuse its chunk list without opening the file;
//! a directory whose entries are all unchanged reuses its tree blob ID. The
//! parent's trees are loaded lazily, one per directory level.

use crate::error::{Error, Result};
use crate::id::Id;
mod sparse;
mod store;

use crate::pack::BlobType;
use crate::repository::Repository;
use crate::snapshot::{self, Filter, Snapshot, Summary};
use crate::tree::{Node, NodeKind, Owners, Tree, Xattr, node_from_metadata};
use crossbeam_channel::Sender;
use globset::{Glob, GlobSet, GlobSetBuilder};
use std::collections::BTreeMap;
use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use store::StoreItem;

/// What to back up and how.
#[derive(Clone, Debug, Default)]
pub struct BackupOptions {
    pub paths: Vec<PathBuf>,
    /// Globs: without a `/` they match a name anywhere, with one the full path.
    pub excludes: Vec<String>,
    pub exclude_if_present: Vec<String>,
    pub exclude_caches: bool,
    pub one_file_system: bool,
    pub tags: Vec<String>,
    pub host: Option<String>,
    pub dry_run: bool,
    pub force: bool,
    pub parent: Option<String>,
    pub with_atime: bool,
}

/// What a backup did.
#[derive(Debug, Default)]
pub struct BackupResult {
    pub snapshot_id: Option<Id>,
    pub parent: Option<Id>,
    pub summary: Summary,
    /// One line per path that could not be read (completely).
    pub warnings: Vec<String>,
}

/// Receives progress as files are processed.
pub trait Progress: Sync {
    /// A file is about to be read.
    fn file(&self, _path: &Path) {}
    /// `n` more bytes were processed (read or skipped as unchanged).
    fn bytes(&self, _n: u64) {}
}

/// No progress output.
pub struct NoProgress;
impl Progress for NoProgress {}

/// A one-line progress display on stderr, redrawn every second.
pub struct TermProgress {
    state: Arc<TermState>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

struct TermState {
    files: AtomicU64,
    bytes: AtomicU64,
    current: Mutex<String>,
    done: AtomicBool,
}

impl TermProgress {
    /// Starts the display (or a silent one when `enabled` is false).
    pub fn new(enabled: bool) -> Self {
        let state = Arc::new(TermState {
            files: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            current: Mutex::new(String::new()),
            done: AtomicBool::new(false),
        });
        let thread = enabled.then(|| {
            let st = state.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                while !st.done.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(250));
                    let secs = start.elapsed().as_secs_f64().max(0.001);
                    let b = st.bytes.load(Ordering::Relaxed);
                    let cur = st.current.lock().map(|c| c.clone()).unwrap_or_default();
                    let cur: String = cur
                        .chars()
                        .rev()
                        .take(50)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    eprint!(
                        "\r\x1b[K[{:>4.0}s] {} files, {:.1} MiB, {:.1} MiB/s  {}",
                        secs,
                        st.files.load(Ordering::Relaxed),
                        b as f64 / 1048576.0,
                        b as f64 / 1048576.0 / secs,
                        cur
                    );
                    let _ = std::io::stderr().flush();
                }
                eprint!("\r\x1b[K");
            })
        });
        TermProgress {
            state,
            thread: Mutex::new(thread),
        }
    }

    /// Stops the display.
    pub fn finish(&self) {
        self.state.done.store(true, Ordering::Relaxed);
        if let Ok(mut t) = self.thread.lock()
            && let Some(t) = t.take()
        {
            let _ = t.join();
        }
    }
}

impl Progress for TermProgress {
    fn file(&self, path: &Path) {
        self.state.files.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut c) = self.state.current.lock() {
            *c = path.display().to_string();
        }
    }
    fn bytes(&self, n: u64) {
        self.state.bytes.fetch_add(n, Ordering::Relaxed);
    }
}

/// Compiled exclude rules.
struct Excluder {
    by_name: GlobSet,
    by_path: GlobSet,
    if_present: Vec<String>,
    caches: bool,
}

const CACHEDIR_SIGNATURE: &[u8] = b"Signature: 8a477f597d28d172789f06886806bc55";

impl Excluder {
    fn new(o: &BackupOptions) -> Result<Self> {
        let mut by_name = GlobSetBuilder::new();
        let mut by_path = GlobSetBuilder::new();
        for pat in &o.excludes {
            let g = globset::GlobBuilder::new(pat)
                .literal_separator(true)
                .build()
                .map_err(|e| Error::Usage(format!("invalid exclude pattern {pat:?}: {e}")))?;
            if pat.contains('/') {
                by_path.add(g);
                // A pattern naming a directory excludes what is beneath it.
                if let Ok(g2) = Glob::new(&format!("{}/**", pat.trim_end_matches('/'))) {
                    by_path.add(g2);
                }
            } else {
                by_name.add(g);
            }
        }
        Ok(Excluder {
            by_name: by_name
                .build()
                .map_err(|e| Error::Usage(format!("exclude patterns: {e}")))?,
            by_path: by_path
                .build()
                .map_err(|e| Error::Usage(format!("exclude patterns: {e}")))?,
            if_present: o.exclude_if_present.clone(),
            caches: o.exclude_caches,
        })
    }

    /// `path` is matched against the patterns; `op` is where to look on disk.
    fn excluded(&self, path: &Path, op: &Path, is_dir: bool) -> bool {
        if let Some(n) = path.file_name()
            && self.by_name.is_match(n)
        {
            return true;
        }
        if self.by_path.is_match(path) {
            return true;
        }
        if is_dir {
            for f in &self.if_present {
                if op.join(f).symlink_metadata().is_ok() {
                    return true;
                }
            }
            if self.caches
                && let Ok(mut f) = File::open(op.join("CACHEDIR.TAG"))
            {
                let mut buf = [0u8; 43];
                if std::io::Read::read_exact(&mut f, &mut buf).is_ok()
                    && buf[..] == *CACHEDIR_SIGNATURE
                {
                    return true;
                }
            }
        }
        false
    }
}

/// Lazily loaded trees of the parent snapshot, one per directory depth.
struct ParentTrees<'r> {
    repo: &'r Repository,
    root: Option<Id>,
    /// `levels[d]` = (absolute dir path of depth d, its old tree).
    levels: Vec<(PathBuf, Option<Arc<Tree>>)>,
}

impl<'r> ParentTrees<'r> {
    fn new(repo: &'r Repository, root: Option<Id>) -> Self {
        ParentTrees {
            repo,
            root,
            levels: Vec::new(),
        }
    }

    /// The parent snapshot's tree of absolute directory `dir`.
    fn tree_of(&mut self, dir: &Path) -> Result<Option<Arc<Tree>>> {
        let Some(root) = self.root else {
            return Ok(None);
        };
        let comps: Vec<&[u8]> = dir
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.as_bytes()),
                _ => None,
            })
            .collect();
        let depth = comps.len();
        if let Some((p, t)) = self.levels.get(depth)
            && p == dir
        {
            return Ok(t.clone());
        }
        let tree = if depth == 0 {
            Some(Arc::new(load_tree(self.repo, &root)?))
        } else {
            let parent = dir.parent().unwrap_or(Path::new("/"));
            match self.tree_of(parent)? {
                Some(pt) => match pt.find(comps[depth - 1]) {
                    Some(n) if n.kind == NodeKind::Dir => match n.subtree {
                        Some(s) => Some(Arc::new(load_tree(self.repo, &s)?)),
                        None => None,
                    },
                    _ => None,
                },
                None => None,
            }
        };
        self.levels.truncate(depth);
        while self.levels.len() < depth {
            self.levels.push((PathBuf::new(), None));
        }
        self.levels.push((dir.to_path_buf(), tree.clone()));
        Ok(tree)
    }

    fn node_of(&mut self, path: &Path) -> Result<Option<Node>> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Ok(None);
        };
        Ok(self
            .tree_of(parent)?
            .and_then(|t| t.find(name.as_bytes()).cloned()))
    }
}

/// Loads and decodes tree blob `id`.
pub fn load_tree(repo: &Repository, id: &Id) -> Result<Tree> {
    let bytes = repo.read_blob(id)?;
    Tree::decode(&format!("tree {id}"), &bytes)
}

/// A batch of new blobs goes to the store once it holds this many bytes
/// or items.
const BATCH_BYTES: usize = 1 << 20;
const BATCH_ITEMS: usize = 64;

struct Run<'r, 'p> {
    repo: &'r Repository,
    opts: &'r BackupOptions,
    /// The storing stage (None in a dry run).
    store: Option<Sender<Vec<StoreItem>>>,
    /// New blobs not yet handed to the store: sent in batches, so the
    /// channel is touched once per batch rather than once per small file.
    batch: Vec<StoreItem>,
    batch_bytes: usize,
    /// New blobs sent to the store during this run.
    inflight: HashSet<Id>,
    /// IDs of all-zero chunks by length.
    zero_ids: std::collections::HashMap<usize, Id>,
    parent: ParentTrees<'r>,
    owners: Owners,
    summary: Summary,
    warnings: Vec<String>,
    progress: &'p dyn Progress,
    chunker: crate::chunker::Chunker,
    buf: Vec<u8>,
    excluder: Arc<Excluder>,
    /// The tree of the directory finished last (the root of a walk).
    last_tree: Option<Tree>,
}

impl Run<'_, '_> {
    /// Stores one blob unless it is known; returns its ID.
    fn store_blob(&mut self, ty: BlobType, data: &[u8]) -> Result<Id> {
        // All-zero chunks (holes, zeroed images) repeat: hash each length once.
        let zero = ty == BlobType::Data && data.len() >= 4096 && data.iter().all(|&b| b == 0);
        let id = match zero
            .then(|| self.zero_ids.get(&data.len()).copied())
            .flatten()
        {
            Some(id) => id,
            None => {
                let id = self.repo.keys().blob_id(data);
                if zero {
                    self.zero_ids.insert(data.len(), id);
                }
                id
            }
        };
        if self.inflight.contains(&id) || self.repo.index()?.contains(&id)? {
            return Ok(id);
        }
        self.inflight.insert(id);
        self.summary.data_added_plain += data.len() as u64;
        if self.inflight.len() > 100_000 {
            // Forget what has reached the index since: keeps memory flat.
            let index = self.repo.index()?;
            let mut keep = HashSet::new();
            for i in self.inflight.drain() {
                if !index.contains(&i)? {
                    keep.insert(i);
                }
            }
            drop(index);
            self.inflight = keep;
        }
        if self.store.is_some() {
            self.batch_bytes += data.len();
            self.batch.push(StoreItem {
                ty,
                id,
                data: data.to_vec(),
            });
            if self.batch_bytes >= BATCH_BYTES || self.batch.len() >= BATCH_ITEMS {
                self.send_batch()?;
            }
        }
        Ok(id)
    }

    /// Hands the pending blobs to the store.
    fn send_batch(&mut self) -> Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        self.batch_bytes = 0;
        let batch = std::mem::take(&mut self.batch);
        if let Some(tx) = &self.store
            && tx.send(batch).is_err()
        {
            // The store stage stopped; its error is reported on join.
            return Err(Error::Usage("the storing stage stopped".into()));
        }
        Ok(())
    }

    /// Reads and stores the content of the regular file at `op`, which the
    /// walk found with metadata `before`. Only `before.len()` bytes are read
    /// (no read to find the end); a file that grew, shrank, was touched or
    /// replaced meanwhile is caught by one fstat after the read.
    fn read_file(
        &mut self,
        path: &Path,
        op: &Path,
        node: &mut Node,
        before: &std::fs::Metadata,
    ) -> Result<std::result::Result<(), String>> {
        let f = match File::options()
            .read(true)
            .custom_flags(libc::O_NOATIME | libc::O_NOFOLLOW)
            .open(op)
        {
            Ok(f) => f,
            // O_NOATIME needs ownership (or CAP_FOWNER); retry without it.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                match File::options()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(op)
                {
                    Ok(f) => f,
                    Err(e) => return Ok(Err(format!("{}: cannot open: {e}", path.display()))),
                }
            }
            Err(e) => return Ok(Err(format!("{}: cannot open: {e}", path.display()))),
        };
        self.progress.file(path);
        let mut content = Vec::new();
        let sparse = before.blocks().saturating_mul(512) < before.len();
        let mut plain_reader = std::io::Read::take(&f, before.len());
        let mut sparse_reader = sparse::SparseReader::new(&f, before.len());
        let reader: &mut dyn std::io::Read = if sparse {
            &mut sparse_reader
        } else {
            &mut plain_reader
        };
        let mut buf = std::mem::take(&mut self.buf);
        let chunker = self.chunker.clone();
        let mut read_err: Option<String> = None;
        let total = chunker.stream(
            reader,
            &mut buf,
            |c| {
                content.push(self.store_blob(BlobType::Data, c)?);
                self.progress.bytes(c.len() as u64);
                Ok(())
            },
            |e| {
                read_err = Some(format!("{}: read failed: {e}", path.display()));
                Error::io(path, e)
            },
        );
        self.buf = buf;
        let total = match total {
            Ok(t) => t,
            Err(e) => {
                return match read_err {
                    Some(msg) => Ok(Err(msg)),
                    None => Err(e),
                };
            }
        };
        self.summary.bytes_read += total;
        node.content = content;
        node.size = total;
        let after = f.metadata().ok();
        let changed = match &after {
            Some(a) => {
                !a.is_file()
                    || a.ino() != before.ino()
                    || a.dev() != before.dev()
                    || a.len() != before.len()
                    || a.mtime() != before.mtime()
                    || a.mtime_nsec() != before.mtime_nsec()
                    || total != before.len()
            }
            None => true,
        };
        if changed {
            return Ok(Err(format!(
                "{}: file changed while it was read (the snapshot holds the {total} bytes read)",
                path.display()
            )));
        }
        Ok(Ok(()))
    }

    /// Every extended attribute of `path` (not following a symlink),
    /// including POSIX ACLs (`system.posix_acl_*`). Failures are reported.
    fn read_xattrs(&mut self, path: &Path, op: &Path) -> Vec<Xattr> {
        let names = match xattr::list(op) {
            Ok(n) => n,
            Err(e) => {
                // Filesystems without xattrs say so; that is not a problem.
                if e.raw_os_error() != Some(libc::ENOTSUP) {
                    self.warnings.push(format!(
                        "{}: cannot list extended attributes: {e}",
                        path.display()
                    ));
                }
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for name in names {
            match xattr::get(op, &name) {
                Ok(Some(value)) => out.push(Xattr {
                    name: name.as_bytes().to_vec(),
                    value,
                }),
                Ok(None) => {}
                Err(e) => self.warnings.push(format!(
                    "{}: cannot read extended attribute {}: {e}",
                    path.display(),
                    name.to_string_lossy()
                )),
            }
        }
        out.sort();
        out
    }

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
        op: &Path,
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
                _ => self.read_xattrs(path, op),
            };
        }
        Ok((node, old, same))
    }

    /// Builds the node for one non-directory entry.
    fn entry_node(
        &mut self,
        path: &Path,
        op: &Path,
        md: &std::fs::Metadata,
    ) -> Result<Option<Node>> {
        let (mut node, old, same) = self.base_node(path, op, md)?;
        match node.kind {
            // A symlink's target cannot change without a new inode.
            NodeKind::Symlink if same => {
                node.link_target = old
                    .as_ref()
                    .map(|o| o.link_target.clone())
                    .unwrap_or_default();
            }
            NodeKind::Symlink => match std::fs::read_link(op) {
                Ok(t) => node.link_target = t.as_os_str().as_bytes().to_vec(),
                Err(e) => {
                    self.warnings
                        .push(format!("{}: cannot read link: {e}", path.display()));
                    return Ok(None);
                }
            },
            NodeKind::File => {
                self.summary.total_files += 1;
                if let Some(o) = &old
                    && !self.opts.force
                    && o.kind == NodeKind::File
                    && o.size == node.size
                    && o.mtime_ns == node.mtime_ns
                    && o.ctime_ns == node.ctime_ns
                    && o.inode == node.inode
                {
                    node.content = o.content.clone();
                    self.summary.files_unmodified += 1;
                    self.summary.total_bytes += node.size;
                    self.progress.bytes(node.size);
                    return Ok(Some(node));
                }
                match self.read_file(path, op, &mut node, md)? {
                    Ok(()) => {}
                    Err(msg) => {
                        self.warnings.push(msg);
                        // A file that changed while read keeps what was read;
                        // one that could not be opened or read is left out.
                        if node.content.is_empty() && node.size > 0 || !path.exists() {
                            self.summary.total_files -= 1;
                            return Ok(None);
                        }
                        if node.content.is_empty() && node.size == 0 && md.len() > 0 {
                            self.summary.total_files -= 1;
                            return Ok(None);
                        }
                    }
                }
                self.summary.total_bytes += node.size;
                if old.is_some() {
                    self.summary.files_changed += 1;
                } else {
                    self.summary.files_new += 1;
                }
            }
            _ => {}
        }
        Ok(Some(node))
    }

    /// Encodes and stores a directory's tree, reusing the parent's blob ID
    /// when the entries are identical.
    fn dir_node(
        &mut self,
        path: &Path,
        op: &Path,
        md: &std::fs::Metadata,
        children: Vec<Node>,
    ) -> Result<Node> {
        let (mut node, old, _) = self.base_node(path, op, md)?;
        let mut tree = Tree { nodes: children };
        tree.canonicalize();
        let old_tree = match &old {
            Some(o) if o.kind == NodeKind::Dir => self.parent.tree_of(path)?,
            _ => None,
        };
        if let (Some(o), Some(ot)) = (&old, &old_tree)
            && **ot == tree
        {
            node.subtree = o.subtree;
            self.summary.dirs_unmodified += 1;
            self.last_tree = Some(tree);
            return Ok(node);
        }
        node.subtree = Some(self.store_tree(&tree)?);
        self.last_tree = Some(tree);
        if old.is_some() {
            self.summary.dirs_changed += 1;
        } else {
            self.summary.dirs_new += 1;
        }
        Ok(node)
    }

    fn store_tree(&mut self, tree: &Tree) -> Result<Id> {
        let bytes = tree.encode()?;
        self.store_blob(BlobType::Tree, &bytes)
    }

    /// Backs up one absolute path; returns its node (None if excluded or unreadable).
    fn backup_path(&mut self, root: &Path) -> Result<Option<Node>> {
        let md = match root.symlink_metadata() {
            Ok(m) => m,
            Err(e) => {
                self.warnings.push(format!("{}: {e}", root.display()));
                return Ok(None);
            }
        };
        if !md.is_dir() {
            return self.entry_node(root, root, &md);
        }
        self.walk_dir(root, root, &md, md.dev()).map(Some)
    }

    /// Backs up directory `path` and everything below it (depth first, in
    /// byte order of names) and returns its node. Excluded entries are
    /// pruned before anything below them is read.
    fn walk_dir(
        &mut self,
        path: &Path,
        op: &Path,
        md: &std::fs::Metadata,
        root_dev: u64,
    ) -> Result<Node> {
        let mut children = Vec::new();
        // Below a path longer than the kernel takes (PATH_MAX), entries are
        // reached through this directory's descriptor: `/proc/self/fd/N/name`.
        let mut hold: Option<File> = None;
        match list_dir(op) {
            Ok(names) => {
                for name in names {
                    let child = path.join(&name);
                    let child_op = match short_child(op, &name, &mut hold) {
                        Ok(p) => p,
                        Err(e) => {
                            self.warnings.push(format!("{}: {e}", child.display()));
                            continue;
                        }
                    };
                    let cmd = match child_op.symlink_metadata() {
                        Ok(m) => m,
                        Err(e) => {
                            // Vanished since the listing, or unreadable.
                            self.warnings.push(format!("{}: {e}", child.display()));
                            continue;
                        }
                    };
                    if self.excluder.excluded(&child, &child_op, cmd.is_dir()) {
                        continue;
                    }
                    let node = if cmd.is_dir() {
                        if self.opts.one_file_system && cmd.dev() != root_dev {
                            continue;
                        }
                        Some(self.walk_dir(&child, &child_op, &cmd, root_dev)?)
                    } else {
                        self.entry_node(&child, &child_op, &cmd)?
                    };
                    if let Some(n) = node {
                        children.push(n);
                    }
                }
            }
            Err(e) => self
                .warnings
                .push(format!("{}: cannot read directory: {e}", path.display())),
        }
        self.dir_node(path, op, md, children)
    }
}

/// Paths at most this long are used as they are; longer ones go through a
/// directory descriptor.
pub(crate) const SHORT_PATH: usize = 3072;

/// An `O_PATH` descriptor of directory `dir` (not following a symlink).
pub(crate) fn open_dir_path(dir: &Path) -> std::io::Result<File> {
    File::options()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)
}

/// A path for `name` inside the directory at `dir` that the kernel accepts:
/// `dir/name` when short enough, else `/proc/self/fd/N/name` with `N` a
/// descriptor of `dir` opened once and kept in `hold`.
pub(crate) fn short_child(
    dir: &Path,
    name: &std::ffi::OsStr,
    hold: &mut Option<File>,
) -> std::io::Result<PathBuf> {
    if dir.as_os_str().len() + name.len() + 1 < SHORT_PATH {
        return Ok(dir.join(name));
    }
    if hold.is_none() {
        *hold = Some(open_dir_path(dir)?);
    }
    let fd = hold
        .as_ref()
        .map(std::os::fd::AsRawFd::as_raw_fd)
        .unwrap_or(-1);
    Ok(PathBuf::from(format!("/proc/self/fd/{fd}")).join(name))
}

/// The names in directory `path`, sorted by bytes. The directory is opened
/// with `O_NOATIME` where permitted, so listing it does not touch its atime.
fn list_dir(path: &Path) -> std::io::Result<Vec<std::ffi::OsString>> {
    use nix::fcntl::OFlag;
    use nix::sys::stat::Mode;
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut dir = match nix::dir::Dir::open(path, flags | OFlag::O_NOATIME, Mode::empty()) {
        Ok(d) => d,
        // O_NOATIME needs ownership (or CAP_FOWNER); retry without it.
        Err(nix::errno::Errno::EPERM) => nix::dir::Dir::open(path, flags, Mode::empty())?,
        Err(e) => return Err(e.into()),
    };
    let mut names = Vec::new();
    for ent in dir.iter() {
        let ent = ent?;
        let name = ent.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(std::ffi::OsStr::from_bytes(name).to_os_string());
        }
    }
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    Ok(names)
}

/// A path as an absolute path without `.`/`..`, not resolving a final symlink.
fn absolute(p: &Path) -> Result<PathBuf> {
    let abs = std::path::absolute(p).map_err(|e| Error::io(p, e))?;
    let mut out = PathBuf::from("/");
    for c in abs.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    Ok(out)
}

/// An intermediate directory above the backed-up paths.
#[derive(Default)]
struct VDir {
    entries: BTreeMap<Vec<u8>, VEntry>,
}

enum VEntry {
    Real(Box<Node>),
    Dir(VDir),
}

/// Runs a backup and writes its snapshot (unless `dry_run`).
pub fn backup(
    repo: &Repository,
    opts: &BackupOptions,
    progress: &dyn Progress,
) -> Result<BackupResult> {
    let start = Instant::now();
    if opts.paths.is_empty() {
        return Err(Error::Usage(
            "nothing to back up: give at least one path".into(),
        ));
    }
    let mut paths: Vec<PathBuf> = opts
        .paths
        .iter()
        .map(|p| absolute(p))
        .collect::<Result<_>>()?;
    paths.sort();
    paths.dedup();
    let path_strings: Vec<String> = paths
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let hostname = opts.host.clone().unwrap_or_else(crate::keys::hostname);

    let parent_id = match &opts.parent {
        Some(r) => Some(snapshot::resolve(repo, r, &Filter::default())?),
        None => {
            let f = Filter {
                hosts: vec![hostname.clone()],
                ..Filter::default()
            };
            let (list, _) = snapshot::list(repo, &f)?;
            list.into_iter().rev().find(|(_, s)| {
                let mut a = s.paths.clone();
                a.sort();
                a == path_strings
            })
        }
    };
    if !opts.dry_run {
        // Packs a killed run left without an index segment are reused.
        repo.index_orphan_packs()?;
    }
    let excluder = Arc::new(Excluder::new(opts)?);
    let chunker = repo.chunker()?;
    let parent_root = if opts.force {
        // --force still records the parent, it just does not trust it.
        None
    } else {
        parent_id.as_ref().map(|(_, s)| s.tree)
    };
    let (root_id, mut summary, warnings, stats) = std::thread::scope(|scope| -> Result<_> {
        let (tx, handle) = if opts.dry_run {
            (None, None)
        } else {
            let (tx, h) = store::spawn(scope, repo);
            (Some(tx), Some(h))
        };
        let mut run = Run {
            repo,
            opts,
            store: tx,
            batch: Vec::new(),
            batch_bytes: 0,
            inflight: HashSet::new(),
            zero_ids: std::collections::HashMap::new(),
            parent: ParentTrees::new(repo, parent_root),
            owners: Owners::default(),
            summary: Summary::default(),
            warnings: Vec::new(),
            progress,
            chunker,
            buf: Vec::new(),
            excluder,
            last_tree: None,
        };
        let walked = walk_paths(&mut run, &paths).and_then(|r| {
            run.send_batch()?;
            Ok(r)
        });
        let Run {
            store,
            summary,
            warnings,
            ..
        } = run;
        drop(store);
        let stats = match handle {
            Some(h) => Some(
                h.join()
                    .map_err(|_| Error::Usage("the storing stage panicked".into()))??,
            ),
            None => None,
        };
        // An error of the store stage explains a failed send: report it first.
        let root_id = walked?;
        Ok((root_id, summary, warnings, stats))
    })?;
    if let Some(st) = stats {
        summary.data_added = st.bytes_added_stored;
        summary.data_added_plain = st.bytes_added_plain;
    }
    summary.duration_ms = start.elapsed().as_millis() as u64;
    let snap = Snapshot {
        time_ns: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0),
        hostname,
        username: crate::keys::username(),
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
        paths: path_strings,
        tags: opts.tags.clone(),
        tree: root_id,
        parent: parent_id.as_ref().map(|(id, _)| *id),
        program_version: crate::PROGRAM_VERSION.to_string(),
        summary: summary.clone(),
    };
    let snapshot_id = if opts.dry_run {
        None
    } else {
        Some(snapshot::save(repo, &snap)?)
    };
    Ok(BackupResult {
        snapshot_id,
        parent: snap.parent,
        summary,
        warnings,
    })
}

/// Backs up every path and stores the root tree; returns its ID.
fn walk_paths(run: &mut Run<'_, '_>, paths: &[PathBuf]) -> Result<Id> {
    let mut top = VDir::default();
    for p in paths {
        let Some(node) = run.backup_path(p)? else {
            continue;
        };
        let comps: Vec<Vec<u8>> = p
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.as_bytes().to_vec()),
                _ => None,
            })
            .collect();
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
fn build_virtual(run: &mut Run<'_, '_>, path: &Path, v: VDir) -> Result<Tree> {
    let mut nodes = Vec::new();
    for (name, e) in v.entries {
        match e {
            VEntry::Real(n) => nodes.push(*n),
            VEntry::Dir(sub) => {
                let p = path.join(std::ffi::OsStr::from_bytes(&name));
                let t = build_virtual(run, &p, sub)?;
                let mut node = match p.symlink_metadata() {
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
