//! Directory listings read ahead of the walk. Listing a directory and
//! `lstat`-ing each entry is most of a warm backup's system time; the walk
//! asks a small pool of threads for the listings of the subdirectories it
//! is about to enter (a few at a time per directory), and goes on with its
//! own work meanwhile. Requests are served in walk order (the smallest
//! path by components first: a depth-first walk in byte order of names
//! needs them in that order), so the directory the walk will wait for next
//! is never queued behind the others. The walk still decides what to enter and
//! what to leave out; a listing it never takes is dropped. Outstanding
//! requests are bounded by that window times the depth of the walk.
//!
//! When the parent snapshot has the directory, the walk names its old tree
//! too, and the pool loads that (looked up on an index view of the
//! thread's own, read, opened and decoded) with the listing: the walk,
//! which is the one thread an incremental backup waits for, then finds it
//! ready instead of loading it between two directories.
//!
//! Asking wakes no one. A wake-up is a system call, and on a virtual
//! machine an interrupt to the other core. Waking a pool thread for each
//! request, an unchanged re-backup of a tree of 5,840 small directories
//! (cargo's registry sources and the toolchain's libraries) had a `futex`
//! call in 32 % of the walk's samples and took 0.29 to 0.34 s; waking the
//! pool as below, 16 % and 0.24 to 0.27 s. The pool
//! works through what is queued and sleeps when it runs dry; the walk
//! wakes it when the listing it needs next was not started, and makes
//! that one itself meanwhile. Whoever claims a request first lists it.

use super::exclude::DirRules;
use crate::id::Id;
use crate::index::ReadView;
use crate::localfs::{self, Anchor, stat::Stat};
use crate::repository::Repository;
use crate::tree::Tree;
use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded};
use std::collections::BinaryHeap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::Scope;

/// Subdirectories of one directory asked for ahead of the walk.
pub(super) const WINDOW: usize = 8;
/// Page cache of a listing thread's view of the index, in KiB (it only
/// looks up tree blobs, one per directory).
const VIEW_CACHE_KIB: u32 = 1024;

/// One entry of a listing: its name, and its path for the kernel with its
/// metadata (or why they could not be had).
pub(super) struct Entry {
    pub(super) name: OsString,
    pub(super) found: io::Result<(PathBuf, Stat)>,
}

/// A directory's entries in byte order of names, each with its metadata.
pub(super) struct Listing {
    /// The descriptor long child paths go through (`/proc/self/fd/N/…`),
    /// held while the entries and anything below them are used.
    pub(super) anchor: Anchor,
    pub(super) entries: Vec<Entry>,
    /// The directory is excluded by what it contains ([`DirRules`]).
    pub(super) excluded: bool,
    /// The parent snapshot's tree of the directory, with its ID, when the
    /// walk named it and it could be loaded (else the walk loads it, and
    /// reports why it cannot).
    pub(super) old_tree: Option<(Id, Arc<Tree>)>,
}

/// Lists directory `fs_path`, applies `rules` to it (from the names it
/// has; none for a backed-up path itself) and, unless it is excluded,
/// `lstat`s each entry by name in the directory it has open (the kernel
/// looks up one name, not the whole path again).
pub(super) fn list(fs_path: &Path, rules: Option<&DirRules>) -> io::Result<Listing> {
    let (dir, names) = localfs::open_and_list_dir(fs_path)?;
    let excluded = rules.is_some_and(|r| r.exclude_listed(fs_path, &names));
    if excluded {
        return Ok(Listing {
            anchor: None,
            entries: Vec::new(),
            excluded,
            old_tree: None,
        });
    }
    let mut anchor: Anchor = None;
    let entries = names
        .into_iter()
        .map(|name| {
            let found = Stat::at(&dir, &name).and_then(|st| {
                localfs::child_path(fs_path, &None, &name, &mut anchor).map(|(p, _)| (p, st))
            });
            Entry { name, found }
        })
        .collect();
    Ok(Listing {
        anchor,
        entries,
        excluded,
        old_tree: None,
    })
}

/// A listing on its way: taken with [`Pending::take`].
pub(super) struct Pending {
    rx: Receiver<io::Result<Listing>>,
    /// Set by whoever lists the directory: a pool thread or the walk.
    claimed: Arc<AtomicBool>,
    shared: Shared,
}

impl Pending {
    /// The listing: the pool's if it is done or under way (waiting for
    /// it then), else made here, after waking the pool for the requests
    /// behind it. Listed here too if the pool has stopped.
    pub(super) fn take(self, fs_path: &Path, rules: &DirRules) -> io::Result<Listing> {
        match self.rx.try_recv() {
            Ok(l) => return l,
            Err(TryRecvError::Disconnected) => return list(fs_path, Some(rules)),
            Err(TryRecvError::Empty) => {}
        }
        if !self.claimed.swap(true, AtomicOrdering::AcqRel) {
            wake(&self.shared);
            return list(fs_path, Some(rules));
        }
        self.rx
            .recv()
            .unwrap_or_else(|_| list(fs_path, Some(rules)))
    }
}

/// Wakes as many sleeping pool threads as there are requests queued. The
/// count includes requests already claimed (the one the walk just took,
/// at least), which can wake a thread for nothing; counting only unclaimed
/// ones was measured and made no difference (re-backup of the second
/// tree, `bench/results/2026-12-05-wake`).
fn wake(shared: &Shared) {
    let (lock, cv) = &**shared;
    if let Ok(q) = lock.lock() {
        for _ in 0..q.idle.min(q.waiting.len()) {
            cv.notify_one();
        }
    }
}

struct Request {
    /// The directory's path in the snapshot: the walk's order.
    path: PathBuf,
    fs_path: PathBuf,
    /// The parent snapshot's tree of the directory, to load with it.
    tree: Option<Id>,
    reply: Sender<io::Result<Listing>>,
    /// Set by whoever lists the directory: a pool thread or the walk.
    claimed: Arc<AtomicBool>,
}

impl PartialEq for Request {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

impl Eq for Request {}

impl PartialOrd for Request {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The heap serves its greatest: the first in walk order.
impl Ord for Request {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.path.cmp(&self.path)
    }
}

#[derive(Default)]
struct Queue {
    /// Served first in walk order.
    waiting: BinaryHeap<Request>,
    /// Threads asleep on the condition variable (woken by the walk, see
    /// [`Pending::take`]; a busy thread takes the next request when it
    /// comes back for one).
    idle: usize,
    closed: bool,
}

type Shared = Arc<(Mutex<Queue>, Condvar)>;

/// The pool's handle: asks for listings; dropping it stops the threads
/// (after the listing each is making).
pub(super) struct Ahead {
    shared: Shared,
}

impl Ahead {
    /// Starts `threads` listing threads inside `scope`, applying `rules`;
    /// with `repo`, they also load the old trees the walk names.
    pub(super) fn spawn<'scope, 'env>(
        scope: &'scope Scope<'scope, 'env>,
        threads: usize,
        rules: &DirRules,
        repo: Option<&'env Repository>,
    ) -> Ahead {
        let shared: Shared = Arc::default();
        for _ in 0..threads {
            let shared = Arc::clone(&shared);
            let rules = rules.clone();
            scope.spawn(move || serve(&shared, &rules, repo));
        }
        Ahead { shared }
    }

    /// Asks for the listing of directory `path`, read through `fs_path`,
    /// and for the parent snapshot's tree `tree` of it. Paths that depend
    /// on a descriptor of the asking walk (`/proc/self/fd/…`) are listed by
    /// the walk itself: None.
    pub(super) fn ask(&self, path: &Path, fs_path: &Path, tree: Option<Id>) -> Option<Pending> {
        if fs_path.starts_with("/proc/self/fd") {
            return None;
        }
        let (reply, rx) = bounded(1);
        let claimed = Arc::new(AtomicBool::new(false));
        let mut q = self.shared.0.lock().ok()?;
        q.waiting.push(Request {
            path: path.to_path_buf(),
            fs_path: fs_path.to_path_buf(),
            tree,
            reply,
            claimed: Arc::clone(&claimed),
        });
        Some(Pending {
            rx,
            claimed,
            shared: Arc::clone(&self.shared),
        })
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        let (lock, cv) = &*self.shared;
        if let Ok(mut q) = lock.lock() {
            q.closed = true;
            q.waiting.clear();
        }
        cv.notify_all();
    }
}

/// One listing thread: takes the first request in walk order, loads the
/// old tree named, lists, answers.
fn serve(shared: &Shared, rules: &DirRules, repo: Option<&Repository>) {
    let (lock, cv) = &**shared;
    let mut view: Option<ReadView> = None;
    // The view's read transaction is open (ended before the thread sleeps:
    // an idle reader would keep the cache's log from being checkpointed).
    let mut reading = false;
    loop {
        let req = {
            let Ok(mut q) = lock.lock() else { return };
            loop {
                if q.closed {
                    return;
                }
                if let Some(r) = q.waiting.pop() {
                    if r.claimed.swap(true, AtomicOrdering::AcqRel) {
                        continue;
                    }
                    break r;
                }
                if reading {
                    drop(q);
                    if let Some(v) = view.as_mut() {
                        let _ = v.renew();
                    }
                    reading = false;
                    q = match lock.lock() {
                        Ok(q) => q,
                        Err(_) => return,
                    };
                    continue;
                }
                q.idle += 1;
                q = match cv.wait(q) {
                    Ok(q) => q,
                    Err(_) => return,
                };
                q.idle -= 1;
            }
        };
        let old_tree = match (repo, req.tree) {
            (Some(repo), Some(id)) => {
                reading = true;
                load_tree(repo, &mut view, &id).map(|t| (id, t))
            }
            _ => None,
        };
        let listing = list(&req.fs_path, Some(rules)).map(|mut l| {
            l.old_tree = old_tree;
            l
        });
        // The walk may have stopped waiting (it failed or skipped it).
        let _ = req.reply.send(listing);
    }
}

/// Tree `id` of the repository, looked up on `view` (opened at the first);
/// None if it cannot be had (the walk then tries, and says why).
fn load_tree(repo: &Repository, view: &mut Option<ReadView>, id: &Id) -> Option<Arc<Tree>> {
    if view.is_none() {
        *view = repo.index().ok()?.read_view_with_cache(VIEW_CACHE_KIB).ok();
    }
    let loc = view.as_mut()?.lookup(id).ok()??;
    repo.load_tree_at(id, &loc).ok().map(Arc::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits (at most 10 s) until `cond` holds.
    fn wait_until(what: &str, cond: impl Fn() -> bool) {
        let start = std::time::Instant::now();
        while !cond() {
            assert!(start.elapsed().as_secs() < 10, "never: {what}");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn listings_from_the_pool_match_listing_in_place() {
        let dir = tempfile::tempdir().unwrap();
        for d in ["b", "a", "c"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
            for f in ["z", "y"] {
                std::fs::write(dir.path().join(d).join(f), d.repeat(3)).unwrap();
            }
        }
        let names = |l: &Listing| -> Vec<(OsString, u64)> {
            l.entries
                .iter()
                .map(|e| (e.name.clone(), e.found.as_ref().unwrap().1.size))
                .collect()
        };
        let check = |p: &Path, got: io::Result<Listing>| {
            let rules = DirRules::default();
            match (got, list(p, Some(&rules))) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(names(&a), names(&b));
                    assert_eq!(names(&a).len(), 2, "{}", p.display());
                    assert_eq!(names(&a)[0].0, "y", "sorted by name");
                }
                (Err(a), Err(b)) => assert_eq!(a.kind(), b.kind()),
                _ => panic!("{}: the pool and the walk disagree", p.display()),
            }
        };
        std::thread::scope(|s| {
            let ahead = Ahead::spawn(s, 2, &DirRules::default(), None);
            let idle = || ahead.shared.0.lock().unwrap().idle;
            wait_until("both threads asleep", || idle() == 2);
            let mut asked: Vec<_> = ["a", "b", "c", "missing"]
                .iter()
                .map(|d| {
                    let p = dir.path().join(d);
                    (p.clone(), ahead.ask(&p, &p, None).unwrap())
                })
                .collect();
            // Asking woke no one: the first listing the walk takes was not
            // started, so the walk makes it and wakes the pool for the rest.
            let (p, first) = asked.remove(0);
            assert!(first.rx.is_empty(), "asking woke the pool");
            check(&p, first.take(&p, &DirRules::default()));
            for (p, pending) in asked {
                wait_until("the pool answers", || !pending.rx.is_empty());
                check(&p, pending.take(&p, &DirRules::default()));
            }
            // A path through a descriptor is left to the walk.
            let fd = Path::new("/proc/self/fd/3/x");
            assert!(ahead.ask(fd, fd, None).is_none());
        });
    }

    /// A request the walk claimed stays in the queue, marked, so the pool
    /// skips it instead of listing the directory a second time.
    #[test]
    fn a_listing_the_walk_makes_itself_is_claimed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("a/f"), b"x").unwrap();
        let a = dir.path().join("a");
        std::thread::scope(|s| {
            let ahead = Ahead::spawn(s, 0, &DirRules::default(), None);
            let taken = ahead.ask(&a, &a, None).unwrap();
            let left = ahead.ask(&dir.path().join("b"), &dir.path().join("b"), None);
            let got = taken.take(&a, &DirRules::default()).unwrap();
            assert_eq!(got.entries.len(), 1);
            let mut q = ahead.shared.0.lock().unwrap();
            let claimed: Vec<(PathBuf, bool)> = std::iter::from_fn(|| q.waiting.pop())
                .map(|r| (r.path, r.claimed.load(AtomicOrdering::Acquire)))
                .collect();
            assert_eq!(claimed, [(a.clone(), true), (dir.path().join("b"), false)]);
            drop(left);
        });
    }

    /// With a repository, the pool loads the parent snapshot's tree the
    /// walk names with a directory and hands it over with the listing; a
    /// tree the repository does not have, or none named, gives the listing
    /// alone.
    #[test]
    fn the_pool_loads_the_old_tree_named_with_a_directory() {
        let d = tempfile::tempdir().unwrap();
        let (repo, root, src) = crate::archiver::parent::tests::two_dirs(d.path());
        let a = src.join("a");
        let mut pt = crate::archiver::parent::ParentTrees::new(&repo, Some(root));
        let (a_id, a_tree) = pt.tree_with_id(&a).unwrap().unwrap();
        let rules = DirRules::default();
        std::thread::scope(|s| {
            let ahead = Ahead::spawn(s, 1, &rules, Some(&repo));
            wait_until("the thread asleep", || {
                ahead.shared.0.lock().unwrap().idle == 1
            });
            let first = ahead.ask(&src, &src, None).unwrap();
            let named = ahead.ask(&a, &a, Some(a_id)).unwrap();
            let unknown = ahead.ask(&a, &a, Some(Id([7; 32]))).unwrap();
            let none = ahead.ask(&a, &a, None).unwrap();
            // The walk makes the first listing itself and wakes the pool.
            assert!(first.take(&src, &rules).unwrap().old_tree.is_none());
            for p in [&named, &unknown, &none] {
                wait_until("the pool answers", || !p.rx.is_empty());
            }
            let got = named.take(&a, &rules).unwrap();
            let (id, tree) = got.old_tree.expect("the named tree was not loaded");
            assert_eq!((id, &*tree), (a_id, &*a_tree));
            assert_eq!(got.entries.len(), 1);
            for p in [unknown, none] {
                let l = p.take(&a, &rules).unwrap();
                assert!(l.old_tree.is_none());
                assert_eq!(l.entries.len(), 1);
            }
        });
    }

    #[test]
    fn requests_are_served_in_walk_order() {
        // Asked in a scrambled order (a pool without threads keeps them
        // all), they come out depth first in byte order of names: the
        // order the walk will need them. Last in, first out would serve
        // the last subdirectory of a batch first.
        let asked = ["/b", "/a/z", "/c", "/a", "/b/a", "/a/b/c", "/a/b", "/ab"];
        let served: Vec<PathBuf> = std::thread::scope(|s| {
            let ahead = Ahead::spawn(s, 0, &DirRules::default(), None);
            let _pending: Vec<_> = asked
                .iter()
                .map(|p| ahead.ask(Path::new(p), Path::new(p), None))
                .collect();
            let mut q = ahead.shared.0.lock().unwrap();
            std::iter::from_fn(|| q.waiting.pop().map(|r| r.path)).collect()
        });
        let want = ["/a", "/a/b", "/a/b/c", "/a/z", "/ab", "/b", "/b/a", "/c"];
        assert_eq!(served, want.map(PathBuf::from));
    }
}
