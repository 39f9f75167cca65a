//! The backup pipeline: walk → read → chunk → hash → dedup → compress →
//! encrypt → pack, then tree blobs bottom-up and the snapshot object.
//!
//! Warm scans compare each file's size, mtime, ctime and inode with the
//! parent snapshot's node and reuse its chunk list without opening the file;
//! a directory whose entries are all unchanged reuses its tree blob ID. The
//! parent's trees are loaded lazily, one per directory level.
//!
//! The parts, in the order data flows: [`walk`] (the tree walk and its
//! nodes), [`ahead`] (directory listings read ahead of it), [`exclude`]
//! (what is left out), [`parent`] (the parent snapshot's
//! trees), [`readers`] (the workers that read new and changed files while
//! the walk goes on; the paths come from the arguments and
//! [`files_from`]; a stream instead: [`stdin`], perhaps a
//! [`command`]'s output) and [`file`] (reading and chunking one file, a
//! large one by two workers: [`split`]; a changed one cut along its
//! parent's chunks where their bytes are unchanged: [`guide`]),
//! [`blobs`] (hashing and deduplication), [`assemble`] (the walk's nodes
//! put together in walk order as files are read), [`store`] (compress,
//! seal, pack, upload), [`root`] (the directories above the backed-up
//! paths); beside them runs [`scan`] (counting what there is, for progress
//! totals). This file runs them and writes the snapshot.

mod ahead;
mod assemble;
mod blobs;
mod command;
mod exclude;
mod files_from;

pub use command::CommandOutput;
pub use exclude::{Excluder, with_exclude_files};
pub use files_from::{ListForm, Listed, paths_from};
pub use parent::{Ignore, same_file};
pub use stdin::{DEFAULT_NAME as STDIN_NAME, Stream, backup_stream};
mod file;
mod guide;
mod parent;
mod queue;
mod readers;
mod root;
mod runmark;
mod scan;
mod split;
mod stdin;
mod store;
mod walk;

use crate::error::{Error, Result};
use crate::id::Id;
use crate::localfs::{self, meta::Owners};
use crate::lock::{LockGuard, LockHandle};
use crate::packer::PackerStats;
use crate::progress::Progress;
use crate::repository::Repository;
use crate::snapshot::{self, Filter, Snapshot, Summary, TagList};
use blobs::SharedSink;
use parent::ParentTrees;
use runmark::RunMark;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use walk::{Archiver, NewTrees};

/// What to back up and how.
#[derive(Clone, Debug, Default)]
pub struct BackupOptions {
    pub paths: Vec<PathBuf>,
    /// Globs: without a `/` they match a name anywhere, with one the full path.
    pub excludes: Vec<String>,
    /// The same, matched without regard to case (`--iexclude`).
    pub iexcludes: Vec<String>,
    /// Regular files larger than this many bytes are left out.
    pub exclude_larger_than: Option<u64>,
    pub exclude_if_present: Vec<String>,
    pub exclude_caches: bool,
    pub one_file_system: bool,
    pub tags: Vec<String>,
    pub host: Option<String>,
    pub dry_run: bool,
    pub force: bool,
    pub parent: Option<String>,
    pub with_atime: bool,
    /// The snapshot's time in nanoseconds since the Unix epoch (`--time`);
    /// the time the backup ends when `None`.
    pub time: Option<i64>,
    /// Save no snapshot when the tree is the parent's (restic's
    /// `--skip-if-unchanged`): nothing changed since.
    pub skip_if_unchanged: bool,
    /// A file whose inode (and ctime) changed but whose size and mtime
    /// did not is unchanged (`--ignore-inode`).
    pub ignore_inode: bool,
    /// A file whose ctime alone changed is unchanged (`--ignore-ctime`).
    pub ignore_ctime: bool,
    /// No second walk counting what there is (`--no-scan`): progress
    /// shows no totals, percentage or estimate, and the source is read
    /// once less.
    pub no_scan: bool,
    /// Which snapshots count as earlier runs of this backup when the
    /// parent is looked for (`--group-by`; by default `host,paths`: of this
    /// host, holding this backup's paths, as restic; see `find_parent`).
    pub group_by: crate::retention::GroupBy,
    /// How many files are read at once (`--read-concurrency`, 1 to
    /// [`MAX_READ_CONCURRENCY`]); `LARDER_READ_THREADS`, else one per core,
    /// when `None`.
    pub read_concurrency: Option<usize>,
}

/// The most files a backup reads at once (`--read-concurrency`).
pub const MAX_READ_CONCURRENCY: usize = 64;

/// Checks a `--read-concurrency` (or profile `read-concurrency`) value.
pub fn read_concurrency(n: i64) -> std::result::Result<usize, String> {
    match usize::try_from(n) {
        Ok(c) if (1..=MAX_READ_CONCURRENCY).contains(&c) => Ok(c),
        _ => Err(format!(
            "expected a number of files from 1 to {MAX_READ_CONCURRENCY}"
        )),
    }
}

pub use readers::THREAD_NAME as READ_THREAD_NAME;

impl BackupOptions {
    /// What the change test leaves out.
    pub fn ignore(&self) -> Ignore {
        Ignore {
            inode: self.ignore_inode,
            ctime: self.ignore_ctime,
        }
    }
}

/// What a backup did.
#[derive(Debug, Default)]
pub struct BackupResult {
    pub snapshot_id: Option<Id>,
    pub parent: Option<Id>,
    pub summary: Summary,
    /// One line per path that could not be read (completely): the snapshot
    /// is partial (exit code 3).
    pub warnings: Vec<String>,
    /// Things worth saying that do not make the snapshot partial (a parent
    /// tree that could not be read, so files below it were read again).
    pub notices: Vec<String>,
    /// Bytes of changed files stored as chunks of their parent snapshot's,
    /// found where those bytes still were (hashed, not scanned for cuts:
    /// see `guide`). Not recorded in the snapshot.
    pub bytes_guided: u64,
    /// No snapshot was saved because the tree is the parent's
    /// ([`BackupOptions::skip_if_unchanged`]).
    pub skipped: bool,
}

/// What the walk produced: the root tree, its counters and warnings, and
/// what the storing stage stored (None in a dry run).
struct Walked {
    root: Id,
    summary: Summary,
    warnings: Vec<String>,
    notices: Vec<String>,
    stored: Option<PackerStats>,
    /// See [`BackupResult::bytes_guided`].
    guided: u64,
    /// The new snapshot's trees, and the index's count of removals read
    /// before the walk asked it anything.
    trees: NewTrees,
    removals: i64,
}

/// Runs a backup and writes its snapshot (unless `dry_run`). Takes a shared
/// lock on the repository for the run and checks it before every write: a
/// run whose lock was lost stops with [`Error::LockLost`]. A dry run, which
/// writes nothing but reads its parent's trees, takes the lock of a reader
/// ([`Repository::lock_for_reading`], none after `--no-lock`) before it
/// picks the parent, so a prune leaves those trees' packs alone.
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
    let (lock, _read_lock) = if opts.dry_run {
        (None, repo.lock_for_reading()?)
    } else {
        (Some(repo.lock_shared()?), None)
    };
    let mut paths: Vec<PathBuf> = opts
        .paths
        .iter()
        .map(|p| localfs::absolute(p))
        .collect::<Result<_>>()?;
    paths.sort();
    paths.dedup();
    // Nothing to back up at all (the external disk is not mounted) is an
    // error, not an empty snapshot that a retention policy would count.
    if paths.iter().all(|p| p.symlink_metadata().is_err()) {
        let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(Error::Usage(format!(
            "none of the paths to back up exists ({}); no snapshot saved",
            list.join(", ")
        )));
    }
    let path_strings: Vec<String> = paths
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let hostname = opts.host.clone().unwrap_or_else(crate::host::hostname);
    let parent = find_parent(repo, opts, &hostname, &path_strings)?;
    if let Some(l) = &lock {
        // Under the lock: the index as it is now, with every deletion mark
        // (blobs only marked packs hold are not deduplicated against), so
        // a prune that marked packs before this lock existed knows this
        // run cannot depend on them.
        repo.sync_index()?;
        l.check()?;
    }
    let mut mark = lock.as_ref().map(|_| RunMark::begin(repo.cache_dir()));
    if let Some(m) = mark.as_mut().filter(|m| m.look_for_orphans) {
        // Packs a killed run left without an index segment are reused.
        repo.index_orphan_packs()?;
        m.forget_dead();
    }
    // --force still records the parent, it just does not trust it.
    let parent_root = parent.as_ref().filter(|_| !opts.force).map(|(_, s)| s.tree);
    let lock_handle = lock.as_ref().map(LockGuard::handle);
    let walked = run_pipeline(repo, opts, progress, &paths, parent_root, lock_handle)?;
    let mut walked_notices = walked.notices;
    let mut summary = walked.summary;
    if let Some(st) = walked.stored {
        summary.data_added = st.bytes_added_stored;
        summary.data_added_plain = st.bytes_added_plain;
    }
    summary.duration_ms = start.elapsed().as_millis() as u64;
    let snap = Snapshot::by_this_process(
        opts.time.unwrap_or_else(crate::host::now_ns),
        hostname,
        path_strings,
        opts.tags.clone(),
        walked.root,
        parent.as_ref().map(|(id, _)| *id),
        summary.clone(),
    );
    // Nothing changed since the parent: with skip_if_unchanged, no
    // snapshot (what the walk stored, if anything, is indexed already).
    let skipped = lock.is_some()
        && opts.skip_if_unchanged
        && walked.warnings.is_empty()
        && parent.as_ref().is_some_and(|(_, p)| p.tree == walked.root);
    if skipped && let Some(m) = mark.take() {
        m.finish();
    }
    let snapshot_id = match &lock {
        Some(_) if skipped => None,
        None => None,
        Some(l) => {
            l.check()?;
            let id = snapshot::save(repo, &snap)?;
            if let Some(m) = mark {
                m.finish();
            }
            // Every blob the snapshot's trees refer to is in the index now
            // (this run's packs were indexed before it was saved): the next
            // backup takes their files over without asking for each chunk.
            // Only a speed-up: a failure costs the next run its queries.
            let recorded = repo
                .index()
                .and_then(|mut i| i.record_checked_trees(&walked.trees.ids, walked.removals));
            if let Err(e) = recorded {
                walked_notices.push(format!(
                    "the index cache did not record the checked trees: {e}"
                ));
            }
            Some(id)
        }
    };
    // What the first sync of the index skipped, unless the open showed it.
    let mut notices = repo.take_index_problems();
    notices.extend(walked_notices);
    Ok(BackupResult {
        snapshot_id,
        parent: snap.parent,
        summary,
        warnings: walked.warnings,
        notices,
        bytes_guided: walked.guided,
        skipped,
    })
}

/// The parent snapshot: `--parent`, else the latest of the new snapshot's
/// group (`--group-by`, by default `host,paths`), as restic picks it: of
/// this host, holding every path of this backup (and maybe more), and
/// every tag given (and maybe more), for the parts grouped by.
fn find_parent(
    repo: &Repository,
    opts: &BackupOptions,
    hostname: &str,
    paths: &[String],
) -> Result<Option<(Id, Snapshot)>> {
    if let Some(r) = &opts.parent {
        return snapshot::resolve(repo, r, &Filter::default()).map(Some);
    }
    let by = opts.group_by;
    let f = Filter {
        hosts: if by.host {
            vec![hostname.to_string()]
        } else {
            Vec::new()
        },
        paths: if by.paths { paths.to_vec() } else { Vec::new() },
        tags: if by.tags && !opts.tags.is_empty() {
            vec![TagList(opts.tags.clone())]
        } else {
            Vec::new()
        },
        exact: false,
    };
    // `Filter::matches`: the host given, all these paths, all these tags.
    let (list, _) = snapshot::list(repo, &f)?;
    Ok(list.into_iter().next_back())
}

/// Walks `paths` on this thread while the storing stage seals and packs on
/// others; returns once both are done (or the first has failed).
fn run_pipeline(
    repo: &Repository,
    opts: &BackupOptions,
    progress: &dyn Progress,
    paths: &[PathBuf],
    parent_root: Option<Id>,
    lock: Option<LockHandle>,
) -> Result<Walked> {
    let excluder = Excluder::new(opts)?;
    let scan_excluder = Excluder::new(opts)?;
    let chunker = repo.chunker()?;
    let removals = repo.index()?.removals()?;
    let scan_stop = AtomicBool::new(false);
    let store = if opts.dry_run {
        None
    } else {
        Some(store::Store::new(repo, lock)?)
    };
    let segmented = store.as_ref().map(store::Store::segmented).transpose()?;
    let walked = std::thread::scope(|scope| {
        let stop = &scan_stop;
        // The totals for a percentage and an ETA cost a second walk: only
        // when something shows them.
        if progress.wants_totals() && !opts.no_scan {
            scope.spawn(|| {
                let x = &scan_excluder;
                scan::scan(paths, x, opts.one_file_system, stop, progress)
            });
        }
        let (sink, handle) = store::sink_and_workers(scope, repo, store.as_ref(), segmented);
        let (walked, summary, warnings, parent, trees) = walk_with_readers(
            opts,
            progress,
            paths,
            ParentTrees::new(repo, parent_root),
            excluder,
            &chunker,
            &sink,
        );
        scan_stop.store(true, Ordering::Relaxed);
        let added_plain = sink.added_plain();
        let guided = sink.guided();
        drop(sink);
        if let Some(workers) = handle {
            workers.join()?;
        }
        let mut summary = summary;
        summary.data_added_plain = added_plain?;
        Ok((walked, summary, warnings, parent, trees, guided))
    });
    // The last pack and segment are written even after a failed walk, so
    // the next run reuses what this one stored. An error of the store
    // stage explains a failed send: report it first.
    let stored = store.map(store::Store::finish).transpose();
    let (walked, summary, warnings, notices, trees, guided) = walked?;
    let stored = stored?;
    Ok(Walked {
        root: walked?,
        summary,
        warnings,
        notices,
        stored,
        guided,
        trees,
        removals,
    })
}

/// The walk on this thread with the reading workers beside it; closes the
/// sink once everything is read. Returns the root tree's ID (or the first
/// error), the counters, the warnings and the parent trees that could not
/// be read.
fn walk_with_readers<'r>(
    opts: &'r BackupOptions,
    progress: &dyn Progress,
    paths: &[PathBuf],
    parent: ParentTrees<'r>,
    excluder: Excluder,
    chunker: &crate::chunker::Chunker,
    sink: &SharedSink<'r>,
) -> (Result<Id>, Summary, Vec<String>, Vec<String>, NewTrees) {
    let failed = AtomicBool::new(false);
    std::thread::scope(|s| {
        let asked = readers::worker_count(opts.read_concurrency);
        let (jobs, workers) = match readers::spawn(s, asked, sink, chunker, progress, &failed) {
            Ok(started) => started,
            Err(e) => {
                let e = Error::Internal(format!("cannot start the reading threads: {e}"));
                return (
                    Err(e),
                    Summary::default(),
                    Vec::new(),
                    Vec::new(),
                    NewTrees::default(),
                );
            }
        };
        let enter = ahead::Enter {
            excluder: excluder.clone(),
            one_file_system: opts.one_file_system,
        };
        let ahead = ahead::Ahead::spawn(s, workers, &enter, parent.repo());
        let mut a = Archiver {
            opts,
            blobs: sink,
            parent,
            owners: Owners::default(),
            summary: Summary::default(),
            warnings: Vec::new(),
            progress,
            excluder,
            last_tree: None,
            grafts: Default::default(),
            mount_points: Vec::new(),
            jobs,
            split_at: split::SplitAt::new(workers, chunker.params().max),
            assembly: Default::default(),
            zeros: Default::default(),
            ahead,
            trees: NewTrees::default(),
            tree_bytes: Vec::new(),
        };
        let walked = root::walk_paths(&mut a, paths);
        let Archiver {
            summary,
            warnings,
            parent,
            jobs,
            assembly,
            ahead,
            trees,
            ..
        } = a;
        drop(ahead);
        // The workers stop once the queue closes (each after its file);
        // after a failure they skip what is still queued.
        failed.store(walked.is_err(), Ordering::Relaxed);
        drop(jobs);
        drop(assembly);
        let walked = walked.and_then(|r| {
            sink.close()?;
            Ok(r)
        });
        (walked, summary, warnings, parent.unreadable, trees)
    })
}
