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
//! their metadata is set through their own descriptor; directories are made
//! and opened relative to their parent's (no path lookups). The trees of a
//! directory's subdirectories are looked up in the index together.
//!
//! The snapshot and the target are untrusted: names are checked (no `..`,
//! `/` or NUL), every directory on the way is verified to be a real
//! directory (a symlink there is removed, never followed), and files are
//! created with `O_NOFOLLOW | O_EXCL`. Nothing is written outside the target.
//!
//! The parts: [`walk`] (the snapshot's trees → directories, special files
//! and batches of regular files), [`select`] (include/exclude, of paths
//! and of extended attributes), [`plan`]
//! (which pack regions to read), [`files`] (reading, verifying and writing
//! a batch), [`target`] (the local filesystem side).

mod files;
mod plan;
mod select;
mod source;
mod target;
mod walk;

use crate::error::{Error, Result};
use crate::progress::{Action, NoProgress, Progress};
use crate::repository::Repository;
use crate::snapshot::Snapshot;
use serde::Serialize;
use source::PackSource;
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use target::Destination;
use walk::TreeRestorer;

/// What to do with a file that already exists in the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overwrite {
    /// Replace it.
    Always,
    /// Replace it unless its size and mtime already match the snapshot.
    IfChanged,
    /// Replace it only if the snapshot's file is newer (its mtime is
    /// later than the existing one's).
    IfNewer,
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
    /// As `include` and `exclude`, matched without regard to case.
    pub iinclude: Vec<String>,
    pub iexclude: Vec<String>,
    pub dry_run: bool,
    pub overwrite: Overwrite,
    pub numeric_owner: bool,
    /// Remove what a directory of the target holds that the snapshot's
    /// directory does not (restic's `--delete`), within what the include
    /// and exclude patterns select, and only at or below the snapshot's
    /// backed-up paths (never in the directories above them).
    pub delete: bool,
    /// Read each file back once written, before it gets its name, and
    /// check every chunk's bytes against its ID (restic's `--verify`).
    pub verify: bool,
    /// Globs on extended attribute names (restic's `--include-xattr`):
    /// set only the attributes one matches (none given: all).
    pub include_xattr: Vec<String>,
    /// Globs on extended attribute names (restic's `--exclude-xattr`): set
    /// all but the attributes one matches. Refused with `include_xattr`.
    pub exclude_xattr: Vec<String>,
}

/// What a restore did.
#[derive(Debug, Default, Serialize)]
pub struct RestoreReport {
    pub files: u64,
    pub dirs: u64,
    pub bytes: u64,
    /// Paths left alone (already present, or not restorable such as sockets).
    pub skipped: Vec<String>,
    /// Paths that failed, with the reason.
    pub errors: Vec<String>,
    /// Paths removed (in a dry run: that would be) because the snapshot
    /// does not hold them (`delete`).
    pub deleted: Vec<String>,
    /// Files read back and found whole (`verify`).
    pub verified: u64,
}

/// Restores `snap` (or its subtree `sub`) into `opts.target`, under a
/// shared lock on the repository.
pub fn restore(
    repo: &Repository,
    snap: &Snapshot,
    sub: Option<&str>,
    opts: &RestoreOptions,
) -> Result<RestoreReport> {
    restore_with_progress(repo, snap, sub, opts, &NoProgress)
}

/// `p` as the walk names paths: `/a/b` (no `.`, empty or trailing parts;
/// empty for the root).
fn normal_path(p: &str) -> String {
    p.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(|c| format!("/{c}"))
        .collect()
}

/// Whether `sub` names the one path of a snapshot that backed up `paths`.
fn only_path(paths: &[String], sub: &str) -> bool {
    let parts = |p: &str| {
        p.split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    matches!(paths, [p] if parts(p) == parts(sub))
}

/// Raises the soft limit on open files (to the hard limit, as restic
/// does) and makes room in the descriptor table for every descriptor a
/// restore holds at once; returns the files per batch that allows. A
/// restore does this itself. A program that calls it first, before it
/// starts any other thread (the CLI does), spares the restore the kernel's
/// waits for a growing descriptor table (see
/// [`target::reserve_descriptors`]).
pub fn prepare_descriptors() -> usize {
    let batch = walk::batch_files(target::open_files_allowed());
    target::reserve_descriptors(walk::descriptors_held(batch));
    batch
}

/// [`restore`], telling `progress` each file restored and the totals
/// (counted by a scan of the snapshot's trees beside the restore; without
/// `--include`/`--exclude` only, where the totals are what will be restored).
pub fn restore_with_progress(
    repo: &Repository,
    snap: &Snapshot,
    sub: Option<&str>,
    opts: &RestoreOptions,
    progress: &dyn Progress,
) -> Result<RestoreReport> {
    let _lock = repo.lock_for_reading()?;
    let root = match sub {
        Some(s) => crate::walker::tree_at(repo, snap.tree, s)?,
        None => snap.tree,
    };
    // Patterns are checked before the target is touched.
    let xattrs = select::XattrSelector::new(&opts.include_xattr, &opts.exclude_xattr)?;
    if !opts.dry_run {
        prepare_target(opts)?;
    }
    let dest = Destination::new(opts.numeric_owner, xattrs);
    let selector =
        select::Selector::new(&opts.include, &opts.iinclude, &opts.exclude, &opts.iexclude)?;
    let filtered = !(opts.include.is_empty()
        && opts.exclude.is_empty()
        && opts.iinclude.is_empty()
        && opts.iexclude.is_empty());
    // What the restore will write, when it is the whole snapshot: no
    // sub-folder, or the snapshot's only backed-up path (the directories
    // above it hold nothing else), and nothing included or excluded.
    let whole = sub.is_none_or(|s| only_path(&snap.paths, s)) && !filtered;
    let source = PackSource::new(repo, whole.then_some(snap.summary.total_bytes));
    let scan_stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        if progress.wants_totals() && !filtered {
            let stop = &scan_stop;
            scope.spawn(move || crate::walker::count_files(repo, &[root], false, stop, progress));
        }
        let mut r = TreeRestorer {
            repo,
            dest: &dest,
            opts,
            source: &source,
            progress,
            scope,
            pending: Default::default(),
            selector,
            report: RestoreReport::default(),
            batch: Vec::new(),
            batch_bytes: 0,
            batch_files: prepare_descriptors(),
            dirs: Vec::new(),
            depth: 0,
            hardlinks: HashMap::new(),
            links: Vec::new(),
            tmp_counter: 0,
            pid: std::process::id(),
            unselected_dirs: Vec::new(),
            delete_within: (
                sub.map(normal_path).unwrap_or_default(),
                snap.paths.iter().map(|p| normal_path(p)).collect(),
            ),
        };
        let root = walk::TreeAt {
            id: root,
            loc: None,
        };
        let at = walk::DirAt {
            path: &opts.target,
            anchor: None,
            fd: None,
        };
        let walked = r.tree(root, at, "", false, None);
        let flushed = r.flush().and_then(|()| r.join_pending());
        scan_stop.store(true, Ordering::Relaxed);
        walked?;
        flushed?;
        finish(&dest, &mut r);
        Ok(r.report)
    })
}

/// Makes sure the target is a directory (a symlink to one is followed: the
/// user named it), creating it if needed.
fn prepare_target(opts: &RestoreOptions) -> Result<()> {
    match fs::symlink_metadata(&opts.target) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(m) if m.file_type().is_symlink() && opts.target.is_dir() => Ok(()),
        Ok(_) => Err(Error::Usage(format!(
            "target {} exists and is not a directory",
            opts.target.display()
        ))),
        Err(_) => fs::create_dir_all(&opts.target).map_err(|e| Error::io(&opts.target, e)),
    }
}

/// What waits for every file's content: hard links, the removal of
/// directories made only on the way to included paths, and directory
/// metadata, deepest first, so writing contents cannot disturb it.
fn finish(dest: &Destination, r: &mut TreeRestorer<'_, '_>) {
    for l in std::mem::take(&mut r.links) {
        match target::make_hardlink(&l.existing, &l.dest) {
            Ok(()) => {
                let action = if l.existed {
                    Action::Updated
                } else {
                    Action::Restored
                };
                r.progress.tell(Path::new(&l.shown), false, action, 0);
            }
            Err(e) => r
                .report
                .errors
                .push(format!("{}: cannot create hard link: {e}", l.shown)),
        }
    }
    // Directories that hold nothing included go again (deepest first;
    // one that is not empty stays).
    for (d, _anchor) in std::mem::take(&mut r.unselected_dirs) {
        let _ = fs::remove_dir(&d);
    }
    let errors = finish_dirs(dest, std::mem::take(&mut r.dirs), r.progress);
    r.report.errors.extend(errors);
}

/// Applies the directories' metadata, deepest first: a directory's mode
/// may take its owner's search permission away, which would shut out
/// every directory below it. Directories of one depth hold none of each
/// other, so each depth's are done in parallel. Returns what failed.
fn finish_dirs(
    dest: &Destination,
    dirs: Vec<walk::DirMeta>,
    progress: &dyn Progress,
) -> Vec<String> {
    use rayon::prelude::*;
    deepest_first(dirs, |d| d.depth)
        .into_iter()
        .flat_map(|level| {
            level
                .par_iter()
                .filter_map(|d| match dest.apply_dir_meta(&d.path, &d.node, d.owned) {
                    Ok(()) => {
                        progress.tell(Path::new(&d.shown), true, Action::Restored, 0);
                        None
                    }
                    Err(e) => Some(format!("{}: {e}", d.shown)),
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `items` grouped by `depth`, the deepest group first, each group in the
/// order of `items`.
fn deepest_first<T>(items: Vec<T>, depth: impl Fn(&T) -> usize) -> Vec<Vec<T>> {
    let mut levels: Vec<Vec<T>> = Vec::new();
    for it in items {
        let k = depth(&it);
        if levels.len() <= k {
            levels.resize_with(k + 1, Vec::new);
        }
        levels[k].push(it);
    }
    levels.reverse();
    levels.retain(|l| !l.is_empty());
    levels
}

#[cfg(test)]
mod tests {
    use super::{deepest_first, only_path, prepare_descriptors, target, walk};

    /// Every directory comes after all that are deeper, so after everything
    /// below it; the walk's order is kept within a depth.
    #[test]
    fn directories_get_metadata_deepest_first() {
        // (depth, name) in the walk's order (each directory after what it holds).
        let walked = vec![(2, "a/b/c"), (1, "a/b"), (1, "a/d"), (0, "a"), (0, "e")];
        let levels = deepest_first(walked, |d| d.0);
        let names: Vec<Vec<&str>> = levels
            .iter()
            .map(|l| l.iter().map(|d| d.1).collect())
            .collect();
        assert_eq!(
            names,
            vec![vec!["a/b/c"], vec!["a/b", "a/d"], vec!["a", "e"]]
        );
        let none: Vec<Vec<(usize, &str)>> = deepest_first(Vec::new(), |d: &(usize, &str)| d.0);
        assert!(none.is_empty());
        // A depth with no directory leaves no empty group.
        let gap = deepest_first(vec![3usize, 0], |d| *d);
        assert_eq!(gap, vec![vec![3], vec![0]]);
    }

    /// This process's descriptor table size (`FDSize` in /proc).
    fn fd_table_size() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("FDSize:")).unwrap();
        line["FDSize:".len()..].trim().parse().unwrap()
    }

    /// Reserving grows the table at once to what is asked (the table never
    /// shrinks, so the test asks for twice what it already has), and a
    /// restore's preparation leaves room for every descriptor it holds.
    #[test]
    fn descriptors_are_reserved_up_front() {
        let allowed = target::open_files_allowed();
        let before = fd_table_size();
        let want = before * 2;
        if want <= allowed {
            target::reserve_descriptors(want);
            assert!(
                fd_table_size() >= want,
                "table of {} for {want} reserved (was {before})",
                fd_table_size()
            );
        }
        let batch = prepare_descriptors();
        let held = walk::descriptors_held(batch);
        if held <= allowed {
            assert!(fd_table_size() >= held, "{} < {held}", fd_table_size());
        }
    }

    #[test]
    fn a_snapshots_only_path_is_all_of_it() {
        let one = vec!["/home/ann/docs".to_string()];
        assert!(only_path(&one, "/home/ann/docs"));
        assert!(only_path(&one, "/home/ann/docs/"));
        assert!(only_path(&one, "home//ann/./docs"));
        assert!(!only_path(&one, "/home/ann"), "a directory above");
        assert!(!only_path(&one, "/home/ann/docs/a"), "a directory below");
        assert!(!only_path(&one, "/home/ann/doc"));
        let two = vec!["/home/ann/docs".to_string(), "/etc".to_string()];
        assert!(!only_path(&two, "/home/ann/docs"), "one of two paths");
    }
}
