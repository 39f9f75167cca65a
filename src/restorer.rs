//! Restore: recreates a snapshot's tree under a target directory.
//!
//! Files are planned in batches and their chunks grouped by pack, so each
//! pack region is read once; blobs are decrypted, decompressed and re-hashed
//! against their IDs in parallel and written with positioned writes,
//! skipping all-zero chunks so sparse files stay sparse (a file with a hole
//! is sized at the end). A file is filled unnamed (`O_TMPFILE`) in a
//! directory this run created and linked in when complete; elsewhere it is
//! filled under a temporary name and renamed into place. Either way an
//! interrupted restore never leaves a partial file under a real name.
//! Files are created and named relative to their directory's descriptor and
//! their metadata is set through their own descriptor (no path lookups).
//!
//! The snapshot and the target are untrusted: names are checked (no `..`,
//! `/` or NUL), every directory on the way is verified to be a real
//! directory (a symlink there is removed, never followed), and files are
//! created with `O_NOFOLLOW | O_EXCL`. Nothing is written outside the target.

use crate::error::{Error, Result};
use crate::id::Id;
use crate::index::BlobLocation;
use crate::pack;
use crate::repository::Repository;
use crate::snapshot::Snapshot;
use crate::tree::{Node, NodeKind, is_safe_name};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What to do with a file that already exists in the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Overwrite {
    /// Replace it.
    Always,
    /// Replace it unless its size and mtime already match the snapshot.
    IfChanged,
    /// Leave it and report it as skipped (the default: a restore never
    /// destroys data that is not in the snapshot unless asked to).
    Never,
}

/// Restore options.
#[derive(Clone, Debug)]
pub struct RestoreOptions {
    pub target: PathBuf,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub dry_run: bool,
    pub overwrite: Overwrite,
    pub numeric_owner: bool,
}

/// What a restore did.
#[derive(Debug, Default)]
pub struct RestoreReport {
    pub files: u64,
    pub dirs: u64,
    pub bytes: u64,
    /// Paths left alone (already present, or not restorable such as sockets).
    pub skipped: Vec<String>,
    /// Paths that failed, with the reason.
    pub errors: Vec<String>,
}

const BATCH_FILES: usize = 1024;
const BATCH_BYTES: u64 = 256 << 20;
/// Two blobs closer than this in a pack are fetched in one read.
const COALESCE_GAP: u64 = 256 << 10;
/// Largest single read from a pack.
const MAX_READ: u64 = 4 << 20;

/// One read of a pack region: pack, start, end and the blobs in it.
type PackRead = (Id, u64, u64, Vec<(BlobLocation, Vec<(usize, u64)>)>);

/// Per pack: blob offset → (location, every (file, offset) that needs it).
type PackPlan = BTreeMap<Id, BTreeMap<u64, (BlobLocation, Vec<(usize, u64)>)>>;

/// A directory descriptor that a `/proc/self/fd/N/...` path depends on
/// (None for an ordinary path). See [`crate::archiver`]'s `short_child`.
type Hold = Option<Arc<File>>;

struct FileJob {
    /// The path (for messages).
    dest: PathBuf,
    /// The temporary name in `dir`, where a file is filled unless it can be
    /// made unnamed.
    tmp: std::ffi::OsString,
    node: Node,
    /// The path shown in messages.
    shown: String,
    /// The directory the file goes in, opened once.
    dir: Arc<File>,
    made: Made,
    /// Keeps `dest` valid.
    _hold: Hold,
}

/// What is known of the directory a file is created in.
#[derive(Clone, Copy)]
struct Made {
    /// This run created it: nothing in it is in the way.
    fresh: bool,
    /// A file created in it gets our user and group (no chown needed).
    owned: bool,
}

/// What the batch writer needs, shared with its thread.
struct Ctx<'r> {
    repo: &'r Repository,
    opts: &'r RestoreOptions,
    is_root: bool,
    /// Whether `O_TMPFILE` works here (cleared at the first refusal).
    tmpfile: AtomicBool,
    /// The process umask, if known.
    umask: Option<u32>,
    euid: u32,
    egid: u32,
    names: NameCache,
}

/// What one written batch adds to the report.
#[derive(Default)]
struct BatchOutcome {
    files: u64,
    bytes: u64,
    errors: Vec<String>,
}

struct Restorer<'scope, 'env> {
    ctx: &'env Ctx<'env>,
    repo: &'env Repository,
    opts: &'env RestoreOptions,
    scope: &'scope std::thread::Scope<'scope, 'env>,
    /// The batch being written while the walk goes on.
    pending: Option<std::thread::ScopedJoinHandle<'scope, Result<BatchOutcome>>>,
    include: Option<GlobSet>,
    exclude: GlobSet,
    report: RestoreReport,
    batch: Vec<FileJob>,
    batch_bytes: u64,
    dirs: Vec<(PathBuf, Node, Hold, String)>,
    /// (device, inode) of multiply-linked files → first restored path.
    hardlinks: HashMap<(u64, u64), (PathBuf, Hold)>,
    /// Hard links to create after all content is written.
    links: Vec<(PathBuf, PathBuf, String, Hold, Hold)>,
    /// Makes temporary file names unique within this run.
    tmp_counter: u64,
    pid: u32,
    /// Directories created only to reach included paths.
    unselected_dirs: Vec<(PathBuf, Hold)>,
}

/// user/group name → id lookups, cached (each lookup reads the passwd or
/// group database).
#[derive(Default)]
struct NameCache {
    users: Mutex<HashMap<String, Option<u32>>>,
    groups: Mutex<HashMap<String, Option<u32>>>,
}

impl NameCache {
    fn uid(&self, name: &str) -> Option<u32> {
        Self::cached(&self.users, name, |n| {
            nix::unistd::User::from_name(n)
                .ok()
                .flatten()
                .map(|u| u.uid.as_raw())
        })
    }

    fn gid(&self, name: &str) -> Option<u32> {
        Self::cached(&self.groups, name, |n| {
            nix::unistd::Group::from_name(n)
                .ok()
                .flatten()
                .map(|g| g.gid.as_raw())
        })
    }

    /// `lookup(name)`, asked once per name (an empty name is never looked up).
    fn cached(
        map: &Mutex<HashMap<String, Option<u32>>>,
        name: &str,
        lookup: impl FnOnce(&str) -> Option<u32>,
    ) -> Option<u32> {
        if name.is_empty() {
            return None;
        }
        let mut m = map.lock().ok()?;
        *m.entry(name.to_string()).or_insert_with(|| lookup(name))
    }
}

fn globset(pats: &[String]) -> Result<GlobSet> {
    let mut b = GlobSetBuilder::new();
    for p in pats {
        let g = GlobBuilder::new(p)
            .literal_separator(true)
            .build()
            .map_err(|e| Error::Usage(format!("invalid pattern {p:?}: {e}")))?;
        b.add(g);
        if !p.contains('/') {
            // A bare name matches that name anywhere.
            if let Ok(g) = GlobBuilder::new(&format!("**/{p}"))
                .literal_separator(true)
                .build()
            {
                b.add(g);
            }
        }
    }
    b.build()
        .map_err(|e| Error::Usage(format!("patterns: {e}")))
}

/// Restores `snap` (or its subtree `sub`) into `opts.target`.
pub fn restore(
    repo: &Repository,
    snap: &Snapshot,
    sub: Option<&str>,
    opts: &RestoreOptions,
) -> Result<RestoreReport> {
    let root = match sub {
        Some(s) => crate::diff::tree_at(repo, snap.tree, s)?,
        None => snap.tree,
    };
    if !opts.dry_run {
        match fs::symlink_metadata(&opts.target) {
            Ok(m) if m.is_dir() => {}
            Ok(m) if m.file_type().is_symlink() && opts.target.is_dir() => {}
            Ok(_) => {
                return Err(Error::Usage(format!(
                    "target {} exists and is not a directory",
                    opts.target.display()
                )));
            }
            Err(_) => fs::create_dir_all(&opts.target).map_err(|e| Error::io(&opts.target, e))?,
        }
    }
    let ctx = Ctx {
        repo,
        opts,
        is_root: nix::unistd::geteuid().is_root(),
        tmpfile: AtomicBool::new(true),
        umask: read_umask(),
        euid: nix::unistd::geteuid().as_raw(),
        egid: nix::unistd::getegid().as_raw(),
        names: NameCache::default(),
    };
    let include = if opts.include.is_empty() {
        None
    } else {
        Some(globset(&opts.include)?)
    };
    let exclude = globset(&opts.exclude)?;
    std::thread::scope(|scope| {
        let mut r = Restorer {
            ctx: &ctx,
            repo,
            opts,
            scope,
            pending: None,
            include,
            exclude,
            report: RestoreReport::default(),
            batch: Vec::new(),
            batch_bytes: 0,
            dirs: Vec::new(),
            hardlinks: HashMap::new(),
            links: Vec::new(),
            tmp_counter: 0,
            pid: std::process::id(),
            unselected_dirs: Vec::new(),
        };
        let walked = r.tree(&root, &opts.target.clone(), None, "", false, None);
        let flushed = r.flush().and_then(|()| r.join_pending());
        walked?;
        flushed?;
        for (existing, dest, shown, _h1, _h2) in std::mem::take(&mut r.links) {
            if let Err(e) = make_hardlink(&existing, &dest) {
                r.report
                    .errors
                    .push(format!("{shown}: cannot create hard link: {e}"));
            }
        }
        // Directories that hold nothing included go again (deepest first;
        // one that is not empty stays).
        for (d, _hold) in std::mem::take(&mut r.unselected_dirs) {
            let _ = fs::remove_dir(&d);
        }
        // Directory metadata last, deepest first, so writing contents cannot disturb it.
        for (path, node, _hold, shown) in std::mem::take(&mut r.dirs).into_iter().rev() {
            if let Err(e) = ctx.apply_meta(&path, &node) {
                r.report.errors.push(format!("{shown}: {e}"));
            }
        }
        Ok(r.report)
    })
}

impl Restorer<'_, '_> {
    fn selected(&self, rel: &str, ancestor_included: bool) -> (bool, bool) {
        let excluded =
            self.exclude.is_match(rel) || self.exclude.is_match(rel.trim_start_matches('/'));
        if excluded {
            return (false, false);
        }
        let included = ancestor_included
            || match &self.include {
                None => true,
                Some(g) => g.is_match(rel) || g.is_match(rel.trim_start_matches('/')),
            };
        (true, included)
    }

    /// Restores tree `id` into `dir` (a path valid while `hold` lives).
    /// `fresh`: the group of `dir` if this run created it, so nothing in it
    /// needs checking before it is created (tree names are unique), and a
    /// file made in it gets our user and that group.
    fn tree(
        &mut self,
        id: &Id,
        dir: &Path,
        hold: Hold,
        rel: &str,
        ancestor_included: bool,
        fresh: Option<u32>,
    ) -> Result<()> {
        let t = match crate::diff::load_tree(self.repo, id) {
            Ok(t) => t,
            Err(e) => {
                self.report
                    .errors
                    .push(format!("{}: {e}", if rel.is_empty() { "/" } else { rel }));
                return Ok(());
            }
        };
        // This directory's descriptor: files are created and named relative
        // to it (no path lookups), and paths beyond PATH_MAX go through it.
        let dirfd: Hold = if self.opts.dry_run {
            None
        } else {
            match crate::archiver::open_dir_path(dir) {
                Ok(f) => Some(Arc::new(f)),
                Err(e) => {
                    let shown = if rel.is_empty() { "/" } else { rel };
                    self.report.errors.push(format!("{shown}: {e}"));
                    return Ok(());
                }
            }
        };
        let mut local: Hold = dirfd.clone();
        for n in t.nodes {
            let shown = format!("{rel}/{}", n.name_lossy());
            if !is_safe_name(&n.name) {
                self.report.errors.push(format!(
                    "{shown:?}: refusing an unsafe name from the snapshot"
                ));
                continue;
            }
            let (visible, included) = self.selected(&shown, ancestor_included);
            if !visible {
                continue;
            }
            // Beyond PATH_MAX, go through this directory's descriptor.
            let (dest, dest_hold) = if dir.as_os_str().len() + n.name.len() + 1
                < crate::archiver::SHORT_PATH
            {
                (dir.join(OsStr::from_bytes(&n.name)), hold.clone())
            } else {
                if local.is_none() {
                    match crate::archiver::open_dir_path(dir) {
                        Ok(f) => local = Some(Arc::new(f)),
                        Err(e) => {
                            self.report.errors.push(format!("{shown}: {e}"));
                            continue;
                        }
                    }
                }
                let fd = local
                    .as_ref()
                    .map(|f| std::os::fd::AsRawFd::as_raw_fd(f.as_ref()))
                    .unwrap_or(-1);
                (
                    PathBuf::from(format!("/proc/self/fd/{fd}")).join(OsStr::from_bytes(&n.name)),
                    local.clone(),
                )
            };
            if n.kind == NodeKind::Dir {
                let mut created = None;
                if included && !self.opts.dry_run {
                    match safe_mkdir(&dest) {
                        Ok(c) => created = c,
                        Err(e) => {
                            self.report.errors.push(format!("{shown}: {e}"));
                            continue;
                        }
                    }
                }
                if let Some(s) = n.subtree {
                    if !included && !self.opts.dry_run {
                        // Create it only if something below is included.
                        match safe_mkdir(&dest) {
                            Ok(c) => created = c,
                            Err(e) => {
                                self.report.errors.push(format!("{shown}: {e}"));
                                continue;
                            }
                        }
                    }
                    self.tree(&s, &dest, dest_hold.clone(), &shown, included, created)?;
                }
                if included {
                    self.report.dirs += 1;
                    if !self.opts.dry_run {
                        self.dirs.push((dest, n, dest_hold, shown.clone()));
                    }
                } else if !self.opts.dry_run {
                    // Removed at the end if nothing below was restored.
                    self.unselected_dirs.push((dest, dest_hold));
                }
                continue;
            }
            if !included {
                continue;
            }
            if let Err(e) = self.entry(&dest, dest_hold, &shown, n, fresh, &dirfd) {
                self.report.errors.push(format!("{shown}: {e}"));
            }
        }
        Ok(())
    }

    /// Decides about an existing entry; returns false to skip the node.
    fn clear_existing(&mut self, dest: &Path, shown: &str, n: &Node) -> std::io::Result<bool> {
        let md = match fs::symlink_metadata(dest) {
            Ok(m) => m,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(true),
            Err(e) => return Err(e),
        };
        let ft = md.file_type();
        if ft.is_symlink() {
            // Replaced, never followed.
            fs::remove_file(dest)?;
            return Ok(true);
        }
        if ft.is_dir() {
            self.report
                .skipped
                .push(format!("{shown}: a directory is in the way"));
            return Ok(false);
        }
        let same = ft.is_file()
            && n.kind == NodeKind::File
            && md.len() == n.size
            && md.mtime() as i128 * 1_000_000_000 + md.mtime_nsec() as i128 == n.mtime_ns as i128;
        let replace = match self.opts.overwrite {
            Overwrite::Always => true,
            Overwrite::IfChanged => !same,
            Overwrite::Never => false,
        };
        if !replace {
            self.report.skipped.push(format!(
                "{shown}: already exists{}",
                if same { " (unchanged)" } else { "" }
            ));
            return Ok(false);
        }
        if !ft.is_file() {
            fs::remove_file(dest)?;
        }
        Ok(true)
    }

    fn entry(
        &mut self,
        dest: &Path,
        hold: Hold,
        shown: &str,
        n: Node,
        fresh: Option<u32>,
        dirfd: &Hold,
    ) -> Result<()> {
        if n.kind == NodeKind::Socket {
            self.report
                .skipped
                .push(format!("{shown}: sockets are recorded but not restored"));
            return Ok(());
        }
        if self.opts.dry_run {
            if n.kind == NodeKind::File {
                self.report.files += 1;
                self.report.bytes += n.size;
            }
            return Ok(());
        }
        if fresh.is_none()
            && !self
                .clear_existing(dest, shown, &n)
                .map_err(|e| Error::io(dest, e))?
        {
            return Ok(());
        }
        if n.kind == NodeKind::File && n.links > 1 {
            let key = (n.device, n.inode);
            if let Some((first, first_hold)) = self.hardlinks.get(&key) {
                self.links.push((
                    first.clone(),
                    dest.to_path_buf(),
                    shown.to_string(),
                    first_hold.clone(),
                    hold,
                ));
                self.report.files += 1;
                return Ok(());
            }
            self.hardlinks
                .insert(key, (dest.to_path_buf(), hold.clone()));
        }
        match n.kind {
            NodeKind::File => {
                let dir = dirfd
                    .clone()
                    .ok_or_else(|| Error::Usage(format!("{shown}: no directory descriptor")))?;
                let made = Made {
                    fresh: fresh.is_some(),
                    owned: fresh == Some(self.ctx.egid),
                };
                self.queue_file(dest, hold, shown, n, dir, made)?
            }
            NodeKind::Symlink => {
                std::os::unix::fs::symlink(OsStr::from_bytes(&n.link_target), dest)
                    .map_err(|e| Error::io(dest, e))?;
                self.ctx.apply_meta(dest, &n)?;
            }
            NodeKind::Fifo => {
                nix::unistd::mkfifo(dest, nix::sys::stat::Mode::from_bits_truncate(0o600))
                    .map_err(|e| Error::io(dest, e.into()))?;
                self.ctx.apply_meta(dest, &n)?;
            }
            NodeKind::CharDev | NodeKind::BlockDev => {
                let kind = if n.kind == NodeKind::CharDev {
                    nix::sys::stat::SFlag::S_IFCHR
                } else {
                    nix::sys::stat::SFlag::S_IFBLK
                };
                nix::sys::stat::mknod(
                    dest,
                    kind,
                    nix::sys::stat::Mode::from_bits_truncate(0o600),
                    n.rdev as _,
                )
                .map_err(|e| Error::io(dest, e.into()))?;
                self.ctx.apply_meta(dest, &n)?;
            }
            NodeKind::Dir | NodeKind::Socket => {}
        }
        Ok(())
    }

    fn queue_file(
        &mut self,
        dest: &Path,
        hold: Hold,
        shown: &str,
        n: Node,
        dir: Arc<File>,
        made: Made,
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
            made,
            _hold: hold,
        });
        if self.batch.len() >= BATCH_FILES || self.batch_bytes >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Hands the queued files to a writer thread (after the previous batch
    /// is done), so the walk goes on while content is written.
    fn flush(&mut self) -> Result<()> {
        self.join_pending()?;
        let jobs = std::mem::take(&mut self.batch);
        self.batch_bytes = 0;
        if jobs.is_empty() {
            return Ok(());
        }
        let ctx = self.ctx;
        self.pending = Some(self.scope.spawn(move || ctx.write_batch(jobs)));
        Ok(())
    }

    /// Waits for the batch being written and adds it to the report.
    fn join_pending(&mut self) -> Result<()> {
        if let Some(h) = self.pending.take() {
            let out = h
                .join()
                .map_err(|_| Error::Usage("a restore writer thread panicked".into()))??;
            self.report.files += out.files;
            self.report.bytes += out.bytes;
            self.report.errors.extend(out.errors);
        }
        Ok(())
    }
}

impl Ctx<'_> {
    /// Writes the content of `jobs`, pack by pack, then their metadata.
    fn write_batch(&self, jobs: Vec<FileJob>) -> Result<BatchOutcome> {
        let mut report = BatchOutcome::default();
        let failed: Vec<Mutex<Option<String>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
        // Every chunk of the batch is looked up in one read transaction.
        let ids: Vec<Id> = jobs
            .iter()
            .flat_map(|j| j.node.content.iter().copied())
            .collect();
        let locs = self.repo.lookup_many(&ids)?;
        // pack → blob offset → (location, targets)
        let mut plan: PackPlan = BTreeMap::new();
        let mut next = locs.into_iter();
        for (j, job) in jobs.iter().enumerate() {
            let mine: Vec<Option<BlobLocation>> =
                next.by_ref().take(job.node.content.len()).collect();
            let mut off = 0u64;
            for (c, loc) in job.node.content.iter().zip(mine) {
                match loc {
                    Some(loc) => {
                        off += loc.entry.plain_len as u64;
                        let at = off - loc.entry.plain_len as u64;
                        plan.entry(loc.pack)
                            .or_default()
                            .entry(loc.entry.offset)
                            .or_insert_with(|| (loc, Vec::new()))
                            .1
                            .push((j, at));
                    }
                    None => {
                        set_failed(
                            &failed[j],
                            format!("data blob {c} is missing from the repository"),
                        );
                        break;
                    }
                }
            }
            if off != job.node.size && lock_is_none(&failed[j]) {
                set_failed(
                    &failed[j],
                    format!(
                        "chunks add up to {off} bytes, the file has {}",
                        job.node.size
                    ),
                );
            }
        }
        // Create the temporary files in parallel. A file is sized (made
        // sparse) only if a hole is left in it.
        let files: Vec<Option<(File, bool)>> = jobs
            .par_iter()
            .zip(&failed)
            .map(|(job, fail)| {
                if !lock_is_none(fail) {
                    return None;
                }
                match self.create(job) {
                    Ok(f) => Some(f),
                    Err(e) => {
                        set_failed(fail, format!("cannot create the file: {e}"));
                        None
                    }
                }
            })
            .collect();
        let holes: Vec<AtomicBool> = jobs.iter().map(|_| AtomicBool::new(false)).collect();
        let repo = self.repo;
        // Cut each pack's blobs into coalesced reads, then read, decrypt,
        // verify and write the reads in parallel.
        let mut reads: Vec<PackRead> = Vec::new();
        for (pack_id, blobs) in plan {
            let mut cur: Vec<(BlobLocation, Vec<(usize, u64)>)> = Vec::new();
            let (mut start, mut end) = (0u64, 0u64);
            for (_, (loc, targets)) in blobs {
                let e = &loc.entry;
                let next_end = e.offset + e.stored_len as u64;
                if !cur.is_empty() && (e.offset > end + COALESCE_GAP || next_end - start > MAX_READ)
                {
                    reads.push((pack_id, start, end, std::mem::take(&mut cur)));
                }
                if cur.is_empty() {
                    start = e.offset;
                    end = next_end;
                }
                end = end.max(next_end);
                cur.push((loc, targets));
            }
            if !cur.is_empty() {
                reads.push((pack_id, start, end, cur));
            }
        }
        reads
            .into_par_iter()
            .for_each(|(pack_id, start, end, blobs)| {
                let name = pack_id.to_hex();
                let data = repo.backend().read_range(
                    crate::backend::Kind::Pack,
                    &name,
                    start,
                    end - start,
                );
                // Blobs of one read are opened in parallel too: a batch of
                // small files is often a single read.
                blobs.par_iter().for_each(|(loc, targets)| {
                    let result = data.as_ref().map_err(|e| e.to_string()).and_then(|d| {
                        let e = &loc.entry;
                        let s = &d[(e.offset - start) as usize
                            ..(e.offset - start + e.stored_len as u64) as usize];
                        pack::open_blob(
                            repo.keys(),
                            &format!(
                                "blob {} in {}",
                                e.id,
                                crate::backend::Kind::Pack.path(&name)
                            ),
                            e,
                            s,
                        )
                        .map_err(|e| e.to_string())
                    });
                    match result {
                        Ok(plain) => {
                            let zero = plain.iter().all(|&b| b == 0);
                            for &(j, off) in targets {
                                if zero {
                                    // A hole: the file is sized at the end.
                                    holes[j].store(true, Ordering::Relaxed);
                                    continue;
                                }
                                if !lock_is_none(&failed[j]) {
                                    continue;
                                }
                                let Some((f, _)) = &files[j] else { continue };
                                if let Err(e) = f.write_all_at(&plain, off) {
                                    set_failed(&failed[j], format!("write failed: {e}"));
                                }
                            }
                        }
                        Err(msg) => {
                            for &(j, _) in targets {
                                set_failed(&failed[j], msg.clone());
                            }
                        }
                    }
                });
            });
        // Size, metadata (through the open descriptor) and the final rename,
        // in parallel; the report in order.
        let outcomes: Vec<(Option<String>, std::result::Result<(), String>)> = jobs
            .par_iter()
            .zip(failed)
            .zip(files)
            .zip(holes)
            .map(|(((job, fail), file), hole)| {
                let shown = &job.shown;
                let fail = fail.into_inner().ok().flatten();
                let (Some((file, unnamed)), None) = (file, &fail) else {
                    remove_tmp(job);
                    let msg = fail.unwrap_or_else(|| "cannot create the file".into());
                    return (None, Err(format!("{shown}: {msg}")));
                };
                let sized = if hole.into_inner() {
                    file.set_len(job.node.size)
                        .map_err(|e| Error::io(&job.dest, e))
                } else {
                    Ok(())
                };
                // Metadata the target refuses is reported; the content is
                // still put in place.
                let (partial, res) = match sized.and_then(|()| {
                    self.apply_file_meta(&file, &job.dest, &job.node, job.made.owned)
                }) {
                    Ok(()) => (None, Ok(())),
                    Err(Error::Partial(msg)) => (Some(format!("{shown}: {msg}")), Ok(())),
                    Err(e) => (None, Err(e)),
                };
                let res = res.and_then(|()| {
                    put_in_place(job, &file, unnamed).map_err(|e| Error::io(&job.dest, e))
                });
                drop(file);
                if res.is_err() && !unnamed {
                    remove_tmp(job);
                }
                (partial, res.map_err(|e| format!("{shown}: {e}")))
            })
            .collect();
        for (job, (partial, res)) in jobs.iter().zip(outcomes) {
            if let Some(p) = partial {
                report.errors.push(p);
            }
            match res {
                Ok(()) => {
                    report.files += 1;
                    report.bytes += job.node.size;
                }
                Err(e) => report.errors.push(e),
            }
        }
        Ok(report)
    }

    /// Creates the file `job` is filled into: unnamed (`O_TMPFILE`) in a
    /// directory this run created, so nothing shows until it is linked in
    /// complete and an interrupted restore leaves nothing behind; otherwise
    /// (or where the filesystem cannot) under its temporary name. Returns
    /// the file and whether it is unnamed.
    fn create(&self, job: &FileJob) -> std::io::Result<(File, bool)> {
        use nix::fcntl::{OFlag, openat};
        use nix::sys::stat::Mode;
        let mode = Mode::from_bits_truncate(self.create_mode(&job.node));
        if job.made.fresh && self.tmpfile.load(Ordering::Relaxed) {
            match openat(
                job.dir.as_ref(),
                ".",
                OFlag::O_TMPFILE | OFlag::O_WRONLY | OFlag::O_CLOEXEC,
                mode,
            ) {
                Ok(fd) => return Ok((File::from(fd), true)),
                // Not supported by this filesystem (or kernel).
                Err(nix::errno::Errno::EOPNOTSUPP | nix::errno::Errno::EISDIR) => {
                    self.tmpfile.store(false, Ordering::Relaxed)
                }
                Err(e) => return Err(e.into()),
            }
        }
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = openat(job.dir.as_ref(), job.tmp.as_os_str(), flags, mode)?;
        Ok((File::from(fd), false))
    }

    /// The permission bits a restored file is created with: its own when
    /// the umask keeps them all (so no chmod is needed after), otherwise
    /// owner-only until they are set.
    fn create_mode(&self, n: &Node) -> u32 {
        let perm = n.mode & 0o777;
        match self.umask {
            Some(m) if perm & m == 0 => perm,
            _ => 0o600,
        }
    }

    /// The owner to give `n`, and whether to set it: always as root,
    /// otherwise only when it differs from what files are created with (a
    /// refusal is then reported, not hidden).
    fn owner(&self, n: &Node) -> (nix::unistd::Uid, nix::unistd::Gid, bool) {
        let (mut uid, mut gid) = (n.uid, n.gid);
        if !self.opts.numeric_owner {
            if let Some(u) = self.names.uid(&n.user) {
                uid = u;
            }
            if let Some(g) = self.names.gid(&n.group) {
                gid = g;
            }
        }
        let set = self.is_root || uid != self.euid || gid != self.egid;
        (
            nix::unistd::Uid::from_raw(uid),
            nix::unistd::Gid::from_raw(gid),
            set,
        )
    }

    /// Metadata of a regular file being restored, through its descriptor
    /// (no path lookups); `path` names it in messages. `owned`: it was
    /// created with our user and group.
    fn apply_file_meta(&self, f: &File, path: &Path, n: &Node, owned: bool) -> Result<()> {
        self.set_meta(MetaTarget::File(f, path), n, owned)
    }

    /// Ownership (as root), mode (not for symlinks) and times, without
    /// following a symlink at `path`.
    fn apply_meta(&self, path: &Path, n: &Node) -> Result<()> {
        self.set_meta(MetaTarget::Path(path), n, false)
    }

    /// Owner, mode (not for symlinks), extended attributes and times, in
    /// that order (a chown clears set-id bits, so the mode comes after it).
    /// What the target refuses is collected into one `Error::Partial`.
    fn set_meta(&self, at: MetaTarget<'_>, n: &Node, owned: bool) -> Result<()> {
        use nix::fcntl::{AT_FDCWD, AtFlags};
        use nix::sys::stat::UtimensatFlags;
        use nix::sys::time::TimeSpec;
        use std::os::unix::fs::PermissionsExt;
        use xattr::FileExt as _;
        let path = match at {
            MetaTarget::Path(p) | MetaTarget::File(_, p) => p,
        };
        let mut problems = Vec::new();
        let (uid, gid, set) = self.owner(n);
        let has_owner = owned && uid.as_raw() == self.euid && gid.as_raw() == self.egid;
        if set && !has_owner {
            let r = match at {
                MetaTarget::File(f, _) => nix::unistd::fchown(f, Some(uid), Some(gid)),
                MetaTarget::Path(p) => nix::unistd::fchownat(
                    AT_FDCWD,
                    p,
                    Some(uid),
                    Some(gid),
                    AtFlags::AT_SYMLINK_NOFOLLOW,
                ),
            };
            if let Err(e) = r {
                problems.push(format!("cannot set owner {uid}:{gid}: {e}"));
            }
        }
        // A file created with its final mode by its final owner needs no chmod.
        if n.kind != NodeKind::Symlink && (self.create_mode(n) != n.mode & 0o7777 || !has_owner) {
            let perm = fs::Permissions::from_mode(n.mode);
            match at {
                MetaTarget::File(f, _) => f.set_permissions(perm),
                MetaTarget::Path(p) => fs::set_permissions(p, perm),
            }
            .map_err(|e| Error::io(path, e))?;
        }
        for x in &n.xattrs {
            let name = OsStr::from_bytes(&x.name);
            let r = match at {
                MetaTarget::File(f, _) => f.set_xattr(name, &x.value),
                MetaTarget::Path(p) => xattr::set(p, name, &x.value),
            };
            if let Err(e) = r {
                problems.push(format!(
                    "cannot set extended attribute {}: {e}",
                    name.to_string_lossy()
                ));
            }
        }
        let ts =
            |ns: i64| TimeSpec::new(ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
        let (atime, mtime) = (
            n.atime_ns.map(ts).unwrap_or(TimeSpec::UTIME_OMIT),
            ts(n.mtime_ns),
        );
        match at {
            MetaTarget::File(f, _) => nix::sys::stat::futimens(f, &atime, &mtime),
            MetaTarget::Path(p) => nix::sys::stat::utimensat(
                AT_FDCWD,
                p,
                &atime,
                &mtime,
                UtimensatFlags::NoFollowSymlink,
            ),
        }
        .map_err(|e| Error::io(path, e.into()))?;
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Partial(problems.join("; ")))
        }
    }
}

/// Where [`Ctx::set_meta`] applies metadata: a path (never following a
/// symlink there), or the open descriptor of a file being restored (with
/// its path for messages).
#[derive(Clone, Copy)]
enum MetaTarget<'a> {
    Path(&'a Path),
    File(&'a File, &'a Path),
}

/// Gives a filled file its name: links an unnamed file in, or renames the
/// temporary name over the destination.
fn put_in_place(job: &FileJob, file: &File, unnamed: bool) -> std::io::Result<()> {
    use nix::fcntl::{AT_FDCWD, AtFlags};
    use std::os::fd::AsRawFd;
    let name = job
        .dest
        .file_name()
        .ok_or_else(|| std::io::Error::from(ErrorKind::InvalidInput))?;
    if !unnamed {
        return nix::fcntl::renameat(
            job.dir.as_ref(),
            job.tmp.as_os_str(),
            job.dir.as_ref(),
            name,
        )
        .map_err(Into::into);
    }
    // Linking a descriptor itself needs CAP_DAC_READ_SEARCH; its
    // /proc/self/fd link works for everyone.
    match nix::unistd::linkat(file, "", job.dir.as_ref(), name, AtFlags::AT_EMPTY_PATH) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::ENOENT | nix::errno::Errno::EPERM) => {
            let proc = format!("/proc/self/fd/{}", file.as_raw_fd());
            nix::unistd::linkat(
                AT_FDCWD,
                proc.as_str(),
                job.dir.as_ref(),
                name,
                AtFlags::AT_SYMLINK_FOLLOW,
            )
            .map_err(Into::into)
        }
        Err(e) => Err(e.into()),
    }
}

/// Removes the temporary name of a file that is not restored.
fn remove_tmp(job: &FileJob) {
    let _ = nix::unistd::unlinkat(
        job.dir.as_ref(),
        job.tmp.as_os_str(),
        nix::unistd::UnlinkatFlags::NoRemoveDir,
    );
}

/// The process umask, read from /proc (reading it with umask(2) would
/// briefly change it for every thread).
fn read_umask() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Umask:"))?;
    u32::from_str_radix(line.trim_start_matches("Umask:").trim(), 8).ok()
}

/// Replaces whatever is at `dest` with a hard link to `existing`.
fn make_hardlink(existing: &Path, dest: &Path) -> std::io::Result<()> {
    match fs::symlink_metadata(dest) {
        Ok(_) => fs::remove_file(dest)?,
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    fs::hard_link(existing, dest)
}

fn set_failed(m: &Mutex<Option<String>>, msg: String) {
    if let Ok(mut g) = m.lock()
        && g.is_none()
    {
        *g = Some(msg);
    }
}

fn lock_is_none(m: &Mutex<Option<String>>) -> bool {
    m.lock().map(|g| g.is_none()).unwrap_or(false)
}

/// Makes `path` a real directory: an existing directory is kept, anything
/// else there (a symlink, a file) is removed first, never followed. Returns
/// the new directory's group if it was created now and inherited no
/// default ACL (which, not the umask, would then decide the modes of files
/// created in it).
fn safe_mkdir(path: &Path) -> std::io::Result<Option<u32>> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => return Ok(None),
        Ok(_) => fs::remove_file(path)?,
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    fs::create_dir(path)?;
    // Owner-only until its own metadata is applied at the end.
    fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
    if matches!(xattr::get(path, "system.posix_acl_default"), Ok(None)) {
        Ok(Some(fs::symlink_metadata(path)?.gid()))
    } else {
        Ok(None)
    }
}
