//! The backup pipeline: walk → read → chunk → hash → dedup → compress →
//! encrypt → pack, then tree blobs bottom-up and the snapshot object.
//!
//! Warm scans compare each file's size, mtime, ctime and inode with the
//! parent snapshot's node and reuse its chunk list without opening the file;
//! a directory whose entries are all unchanged reuses its tree blob ID. The
//! parent's trees are loaded lazily, one per directory level.

use crate::error::{Error, Result};
use crate::id::Id;
use crate::pack::{self, BlobType, PreparedBlob};
use crate::repository::{Packer, Repository};
use crate::snapshot::{self, Filter, Snapshot, Summary};
use crate::tree::{Node, NodeKind, Owners, Tree, node_from_metadata};
use globset::{Glob, GlobSet, GlobSetBuilder};
use rayon::prelude::*;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

    fn excluded(&self, path: &Path, is_dir: bool) -> bool {
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
                if path.join(f).symlink_metadata().is_ok() {
                    return true;
                }
            }
            if self.caches
                && let Ok(mut f) = File::open(path.join("CACHEDIR.TAG"))
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

thread_local! {
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
}

/// Bytes of chunks gathered before hashing and sealing them in parallel.
const BATCH_BYTES: usize = 16 << 20;

struct Run<'r, 'p> {
    repo: &'r Repository,
    opts: &'r BackupOptions,
    packer: Option<Packer<'r>>,
    parent: ParentTrees<'r>,
    owners: Owners,
    summary: Summary,
    warnings: Vec<String>,
    progress: &'p dyn Progress,
    chunker: crate::chunker::Chunker,
    buf: Vec<u8>,
    excluder: Arc<Excluder>,
}

impl Run<'_, '_> {
    /// Stores a batch of chunks: hash in parallel, skip known ones, seal the
    /// new ones in parallel, then hand them to the packer in order.
    fn store_chunks(&mut self, chunks: &[Vec<u8>]) -> Result<Vec<Id>> {
        let keys = self.repo.keys();
        let ids: Vec<Id> = chunks.par_iter().map(|c| keys.blob_id(c)).collect();
        let mut todo = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            let known = match &self.packer {
                Some(p) => p.has(id)?,
                None => self.repo.index()?.contains(id)?,
            };
            if !known && !ids[..i].contains(id) {
                todo.push(i);
            }
        }
        if let Some(p) = &mut self.packer {
            let level = self.repo.config().compression_level;
            let prepared: Vec<Result<PreparedBlob>> =
                todo.par_iter()
                    .map(|&i| {
                        COMPRESSOR.with(|c| {
                            let mut c = c.borrow_mut();
                            if c.is_none() {
                                *c = Some(zstd::bulk::Compressor::new(level).map_err(|e| {
                                    Error::Usage(format!("zstd level {level}: {e}"))
                                })?);
                            }
                            pack::prepare_blob(
                                keys,
                                if level != 0 { c.as_mut() } else { None },
                                BlobType::Data,
                                ids[i],
                                &chunks[i],
                            )
                        })
                    })
                    .collect();
            for b in prepared {
                p.add_prepared(b?)?;
            }
        } else {
            for &i in &todo {
                self.summary.data_added_plain += chunks[i].len() as u64;
            }
        }
        Ok(ids)
    }

    fn read_file(
        &mut self,
        path: &Path,
        node: &mut Node,
    ) -> Result<std::result::Result<(), String>> {
        let f = match File::options()
            .read(true)
            .custom_flags(libc::O_NOATIME | libc::O_NOFOLLOW)
            .open(path)
        {
            Ok(f) => f,
            // O_NOATIME needs ownership (or CAP_FOWNER); retry without it.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                match File::options()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(path)
                {
                    Ok(f) => f,
                    Err(e) => return Ok(Err(format!("{}: cannot open: {e}", path.display()))),
                }
            }
            Err(e) => return Ok(Err(format!("{}: cannot open: {e}", path.display()))),
        };
        let before = match f.metadata() {
            Ok(m) => m,
            Err(e) => return Ok(Err(format!("{}: cannot stat: {e}", path.display()))),
        };
        if !before.is_file() {
            return Ok(Err(format!("{}: no longer a regular file", path.display())));
        }
        self.progress.file(path);
        let mut content = Vec::new();
        let mut batch: Vec<Vec<u8>> = Vec::new();
        let mut batch_bytes = 0usize;
        let mut reader = &f;
        let mut buf = std::mem::take(&mut self.buf);
        let chunker = self.chunker.clone();
        let mut read_err: Option<String> = None;
        let total = chunker.stream(
            &mut reader,
            &mut buf,
            |c| {
                batch_bytes += c.len();
                batch.push(c.to_vec());
                if batch_bytes >= BATCH_BYTES {
                    let b = std::mem::take(&mut batch);
                    batch_bytes = 0;
                    self.progress.bytes(b.iter().map(|c| c.len() as u64).sum());
                    content.extend(self.store_chunks(&b)?);
                }
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
        if !batch.is_empty() {
            self.progress
                .bytes(batch.iter().map(|c| c.len() as u64).sum());
            content.extend(self.store_chunks(&batch)?);
        }
        self.summary.bytes_read += total;
        node.content = content;
        node.size = total;
        let after = f.metadata().ok();
        let changed = match &after {
            Some(a) => {
                a.len() != before.len()
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

    /// Builds the node for one non-directory entry.
    fn entry_node(&mut self, path: &Path, md: &std::fs::Metadata) -> Result<Option<Node>> {
        let name = path
            .file_name()
            .map(|n| n.as_bytes().to_vec())
            .unwrap_or_default();
        let mut node = node_from_metadata(name, md, &mut self.owners, self.opts.with_atime);
        match node.kind {
            NodeKind::Symlink => match std::fs::read_link(path) {
                Ok(t) => node.link_target = t.as_os_str().as_bytes().to_vec(),
                Err(e) => {
                    self.warnings
                        .push(format!("{}: cannot read link: {e}", path.display()));
                    return Ok(None);
                }
            },
            NodeKind::File => {
                let old = self.parent.node_of(path)?;
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
                match self.read_file(path, &mut node)? {
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
        md: &std::fs::Metadata,
        children: Vec<Node>,
    ) -> Result<Node> {
        let name = path
            .file_name()
            .map(|n| n.as_bytes().to_vec())
            .unwrap_or_default();
        let mut node = node_from_metadata(name, md, &mut self.owners, self.opts.with_atime);
        let mut tree = Tree { nodes: children };
        tree.canonicalize();
        let old = self.parent.node_of(path)?;
        let old_tree = match &old {
            Some(o) if o.kind == NodeKind::Dir => self.parent.tree_of(path)?,
            _ => None,
        };
        if let (Some(o), Some(ot)) = (&old, &old_tree)
            && **ot == tree
        {
            node.subtree = o.subtree;
            self.summary.dirs_unmodified += 1;
            return Ok(node);
        }
        node.subtree = Some(self.store_tree(&tree)?);
        if old.is_some() {
            self.summary.dirs_changed += 1;
        } else {
            self.summary.dirs_new += 1;
        }
        Ok(node)
    }

    fn store_tree(&mut self, tree: &Tree) -> Result<Id> {
        let bytes = tree.encode()?;
        match &mut self.packer {
            Some(p) => Ok(p.add(BlobType::Tree, &bytes)?.0),
            None => Ok(self.repo.keys().blob_id(&bytes)),
        }
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
            return self.entry_node(root, &md);
        }
        let walker = walkdir::WalkDir::new(root)
            .follow_links(false)
            .same_file_system(self.opts.one_file_system)
            .sort_by(|a, b| a.file_name().as_bytes().cmp(b.file_name().as_bytes()))
            .contents_first(true);
        let excluder = self.excluder.clone();
        let mut levels: Vec<Vec<Node>> = Vec::new();
        let mut root_node = None;
        let mut it = walker.into_iter().filter_entry(|e| {
            e.depth() == 0 || !excluder.excluded(e.path(), e.file_type().is_dir())
        });
        loop {
            let ent = match it.next() {
                None => break,
                Some(Ok(e)) => e,
                Some(Err(e)) => {
                    let p = e
                        .path()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default();
                    let msg = e
                        .io_error()
                        .map(|io| io.to_string())
                        .unwrap_or_else(|| e.to_string());
                    self.warnings.push(format!("{p}: {msg}"));
                    continue;
                }
            };
            let d = ent.depth();
            let md = match ent.metadata() {
                Ok(m) => m,
                Err(e) => {
                    self.warnings.push(format!("{}: {e}", ent.path().display()));
                    continue;
                }
            };
            while levels.len() <= d + 1 {
                levels.push(Vec::new());
            }
            let node = if ent.file_type().is_dir() {
                let children = std::mem::take(&mut levels[d + 1]);
                Some(self.dir_node(ent.path(), &md, children)?)
            } else {
                self.entry_node(ent.path(), &md)?
            };
            if let Some(n) = node {
                if d == 0 {
                    root_node = Some(n);
                } else {
                    levels[d].push(n);
                }
            }
        }
        Ok(root_node)
    }
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
    let mut run = Run {
        repo,
        opts,
        packer: if opts.dry_run {
            None
        } else {
            Some(repo.packer()?)
        },
        parent: ParentTrees::new(
            repo,
            if opts.force {
                None
            } else {
                parent_id.as_ref().map(|(_, s)| s.tree)
            },
        ),
        owners: Owners::default(),
        summary: Summary::default(),
        warnings: Vec::new(),
        progress,
        chunker: repo.chunker()?,
        buf: Vec::new(),
        excluder: Arc::new(Excluder::new(opts)?),
    };
    if opts.force {
        // --force still records the parent, it just does not trust it.
        run.parent.root = None;
    }

    let mut top = VDir::default();
    for p in &paths {
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
            if let Some(s) = node.subtree {
                for n in load_tree(repo, &s)?.nodes {
                    top.entries
                        .insert(n.name.clone(), VEntry::Real(Box::new(n)));
                }
            }
            continue;
        };
        insert_virtual(&mut top, dirs, last, node);
    }
    let root_tree = build_virtual(&mut run, Path::new("/"), top)?;
    let root_id = run.store_tree(&root_tree)?;

    let Run {
        packer,
        mut summary,
        warnings,
        ..
    } = run;
    if let Some(p) = packer {
        let st = p.finish()?;
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
