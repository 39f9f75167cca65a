//! Directory listings read ahead of the walk. Listing a directory and
//! `lstat`-ing each entry is most of a warm backup's system time; a small
//! pool of threads makes the listings the walk is about to need while the
//! walk goes on with its own work.
//!
//! The pool walks ahead on its own: with each listing it makes, it asks
//! for the listings of the subdirectories the walk will enter (those the
//! exclude patterns and `--one-file-system` leave in) and hands the walk
//! their pending answers with it. Requests are served in walk order (the
//! smallest path by components first: a depth-first walk in byte order of
//! names needs them in that order), so the pool lists the tree in the
//! order the walk comes to it. It stops once [`AHEAD`] listings, or
//! listings of [`AHEAD_ENTRIES`] entries, wait for the walk, and goes on
//! when the walk has taken them down to half of both. The walk
//! still decides what to enter; a listing it never takes is dropped.
//!
//! When the parent snapshot has a directory, the pool loads its old tree
//! (looked up on an index view of the thread's own, read, opened and
//! decoded) with the listing, and names each subdirectory's old tree from
//! it: the walk, which is the one thread an incremental backup waits for,
//! finds both ready instead of making them between two directories.
//!
//! Asking wakes no one. A wake-up is a system call, and on a virtual
//! machine an interrupt to the other core. The pool sleeps when it has
//! nothing to list or is [`AHEAD`] listings ahead; the walk wakes it when
//! the listing it needs next was not started (and makes that one itself
//! meanwhile, then asks for its subdirectories), or when it has taken
//! half of what the pool listed ahead. Whoever claims a request first
//! lists it.
//!
//! Measured on an unchanged re-backup of cargo's registry sources and the
//! toolchain's libraries (5,840 small directories): a wake-up per request
//! put a `futex` call in 32 % of the walk's samples; woken only at a miss
//! with the walk asking a window of 8 subdirectories ahead, 16 %
//! (`bench/results/2026-12-05-wake`). With the pool walking ahead, that
//! re-backup took 0.15 to 0.18 s against 0.23 to 0.25 s, and the walk
//! found nearly every listing made (`bench/results/2026-12-05-ahead`).

use super::exclude::Excluder;
use crate::id::Id;
use crate::index::ReadView;
use crate::localfs::{self, Anchor, stat::Stat};
use crate::repository::Repository;
use crate::tree::{NodeKind, Tree};
use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded};
use std::collections::BinaryHeap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering as AtomicOrdering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::Scope;

/// Listings the pool makes ahead of the walk (made or being made, and not
/// yet taken) before it stops: bounds the memory they hold.
pub(super) const AHEAD: usize = 64;
/// Entries in the listings made ahead and not yet taken at which the pool
/// stops too (about 145 bytes each): [`AHEAD`] alone bounds listings, not
/// their size. 64 listings of directories of 1,000 files held 9.28M as
/// heaptrack prints it (a backup of a million files of 1 KiB); of
/// directories of 100,000 files, they would hold a hundred times that.
pub(super) const AHEAD_ENTRIES: usize = 16_384;
/// Page cache of a listing thread's view of the index, in KiB (it only
/// looks up tree blobs, one per directory; see `blobs::VIEW_CACHE_KIB`).
const VIEW_CACHE_KIB: u32 = 512;

/// A request no one has claimed yet.
const FREE: u8 = 0;
/// Claimed by a pool thread: it lists the directory and answers.
const POOL: u8 = 1;
/// Claimed by the walk (it lists the directory itself) or given up.
const WALK: u8 = 2;

/// One entry of a listing: its name, and its metadata with its path for
/// the kernel when that is not the directory's joined with the name (a
/// long one, see [`localfs::long_child_path`]), or why they could not be
/// had.
pub(super) struct Entry {
    pub(super) name: OsString,
    pub(super) found: io::Result<(Option<PathBuf>, Stat)>,
}

impl Entry {
    /// The entry's path for the kernel, in directory `fs_path`.
    fn fs_path(&self, fs_path: &Path) -> Option<PathBuf> {
        match self.found.as_ref().ok()? {
            (Some(long), _) => Some(long.clone()),
            (None, _) => Some(localfs::join(fs_path, &self.name)),
        }
    }
}

/// A directory's entries in byte order of names, each with its metadata.
pub(super) struct Listing {
    /// The descriptor long child paths go through (`/proc/self/fd/N/…`),
    /// held while the entries and anything below them are used.
    pub(super) anchor: Anchor,
    pub(super) entries: Vec<Entry>,
    /// The directory is excluded by what it contains
    /// ([`super::exclude::DirRules`]).
    pub(super) excluded: bool,
    /// The parent snapshot's tree of the directory, with its ID, when the
    /// walk named it and it could be loaded (else the walk loads it, and
    /// reports why it cannot).
    pub(super) old_tree: Option<(Id, Arc<Tree>)>,
    /// The listings of its subdirectories that the pool asked for when it
    /// made this one, by name in byte order. None when the walk made it:
    /// the walk then asks for them ([`Ahead::ask`]).
    pub(super) below: Option<Vec<(OsString, Pending)>>,
    /// Its entries, counted ahead while the pool holds it for the walk.
    counted: Option<Counted>,
}

/// Lists directory `fs_path`, applies `excluder`'s rules on what it
/// contains to it (none for a backed-up path itself) and, unless it is
/// excluded, `lstat`s each entry by name in the directory it has open (the
/// kernel looks up one name, not the whole path again).
pub(super) fn list(fs_path: &Path, excluder: Option<&Excluder>) -> io::Result<Listing> {
    let (dir, names) = localfs::open_and_list_dir(fs_path)?;
    let excluded = excluder.is_some_and(|x| x.dir_rules().exclude_listed(fs_path, &names));
    if excluded {
        return Ok(Listing {
            anchor: None,
            entries: Vec::new(),
            excluded,
            old_tree: None,
            below: None,
            counted: None,
        });
    }
    let mut anchor: Anchor = None;
    let entries = names
        .into_iter()
        .map(|name| {
            let found = Stat::at(&dir, &name).and_then(|st| {
                localfs::long_child_path(fs_path, &name, &mut anchor).map(|p| (p, st))
            });
            Entry { name, found }
        })
        .collect();
    Ok(Listing {
        anchor,
        entries,
        excluded,
        old_tree: None,
        below: None,
        counted: None,
    })
}

/// A listing on its way: taken with [`Pending::take`]. Dropped untaken,
/// it is given up (the pool skips it if it has not started it).
pub(super) struct Pending {
    rx: Receiver<io::Result<Listing>>,
    /// Who lists the directory: [`FREE`], [`POOL`] or [`WALK`].
    claim: Arc<AtomicU8>,
    shared: Shared,
    /// Taken: the pool's count of listings ahead is already settled.
    taken: bool,
}

impl Pending {
    /// The listing: the pool's if it is done or under way (waiting for
    /// it then), else made here, after waking the pool for the requests
    /// behind it. Listed here too if the pool has stopped.
    pub(super) fn take(mut self, fs_path: &Path, excluder: &Excluder) -> io::Result<Listing> {
        self.taken = true;
        match self.rx.try_recv() {
            Ok(l) => {
                settle(&self.shared);
                return uncount(l);
            }
            Err(TryRecvError::Disconnected) => {
                if self.claim.swap(WALK, AtomicOrdering::AcqRel) == POOL {
                    settle(&self.shared);
                }
                return list(fs_path, Some(excluder));
            }
            Err(TryRecvError::Empty) => {}
        }
        if self.claim.swap(WALK, AtomicOrdering::AcqRel) != POOL {
            wake(&self.shared);
            return list(fs_path, Some(excluder));
        }
        // The pool is behind: the walk waits, so a sleeping thread can
        // have the core to list what comes next.
        wake(&self.shared);
        let got = self.rx.recv();
        settle(&self.shared);
        got.map_or_else(|_| list(fs_path, Some(excluder)), uncount)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.taken && self.claim.swap(WALK, AtomicOrdering::AcqRel) == POOL {
            settle(&self.shared);
        }
    }
}

/// A listing the walk has taken from the pool: its entries no longer
/// count ahead.
fn uncount(l: io::Result<Listing>) -> io::Result<Listing> {
    l.map(|mut l| {
        l.counted = None;
        l
    })
}

/// The entries of a listing the pool made, counted ahead (in
/// [`Queue::entries`]) from just before it is answered until the walk
/// takes it or it is dropped untaken, wherever that happens.
struct Counted {
    shared: Shared,
    entries: usize,
}

impl Counted {
    fn new(shared: &Shared, entries: usize) -> Counted {
        if let Ok(mut q) = shared.0.lock() {
            q.entries += entries;
        }
        Counted {
            shared: shared.clone(),
            entries,
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        release(&self.shared, 0, self.entries);
    }
}

/// A listing the pool made (or is making) was taken or given up: one
/// fewer ahead.
fn settle(shared: &Shared) {
    release(shared, 1, 0);
}

/// `listings` fewer listings ahead and `entries` fewer entries. The pool,
/// if it stopped at [`AHEAD`] or [`AHEAD_ENTRIES`], is woken once both are
/// down to half.
fn release(shared: &Shared, listings: usize, entries: usize) {
    let resume = {
        let Ok(mut q) = shared.0.lock() else { return };
        let above = q.ahead > AHEAD / 2 || q.entries > AHEAD_ENTRIES / 2;
        q.ahead = q.ahead.saturating_sub(listings);
        q.entries = q.entries.saturating_sub(entries);
        let below = q.ahead <= AHEAD / 2 && q.entries <= AHEAD_ENTRIES / 2;
        above && below && q.idle > 0
    };
    if resume {
        wake(shared);
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
    /// The device of the backed-up path it is below (for
    /// `--one-file-system`).
    root_dev: u64,
    /// The parent snapshot's tree of the directory, to load with it.
    tree: Option<Id>,
    reply: Sender<io::Result<Listing>>,
    /// Who lists the directory: [`FREE`], [`POOL`] or [`WALK`].
    claim: Arc<AtomicU8>,
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
        walk_order(&other.path, &self.path)
    }
}

/// The order the walk comes to two directories in: `Path`'s order (names
/// compared by bytes, component by component) for the paths the walk
/// makes (absolute, no `.`, `..` or repeated separator), found without
/// parsing components: at the first byte that differs, a separator comes
/// before any byte a name can hold. (Comparing components was 1 % of a
/// re-backup's CPU, in the pool's queue.)
fn walk_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    let (a, b) = (a.as_os_str().as_bytes(), b.as_os_str().as_bytes());
    let same = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let rank = |c: u8| if c == b'/' { 0 } else { c };
    match (a.get(same), b.get(same)) {
        (Some(&x), Some(&y)) => rank(x).cmp(&rank(y)),
        _ => a.len().cmp(&b.len()),
    }
}

#[derive(Default)]
struct Queue {
    /// Served first in walk order.
    waiting: BinaryHeap<Request>,
    /// Listings the pool claimed that the walk has not taken or given up.
    ahead: usize,
    /// The entries of those the pool has made (counted as it answers).
    entries: usize,
    /// Threads asleep on the condition variable (woken by the walk, see
    /// [`Pending::take`] and [`settle`]; a busy thread takes the next
    /// request when it comes back for one).
    idle: usize,
    closed: bool,
}

type Shared = Arc<(Mutex<Queue>, Condvar)>;

/// What the pool needs to know of the backup to ask for the listings the
/// walk will want.
#[derive(Clone)]
pub(super) struct Enter {
    /// The exclude patterns and the rules on what a directory contains.
    pub(super) excluder: Excluder,
    /// `--one-file-system`: directories on another device are not entered.
    pub(super) one_file_system: bool,
}

impl Enter {
    /// Whether the walk enters `path`, of metadata `st`, below a backed-up
    /// path on device `root_dev`.
    fn enters(&self, path: &Path, st: &Stat, root_dev: u64) -> bool {
        st.is_dir() && keeps(&self.excluder, self.one_file_system, path, st, root_dev)
    }
}

/// Whether the walk keeps entry `path` of metadata `st`, below a backed-up
/// path on device `root_dev`: no exclude pattern matches it, it is not a
/// file over `--exclude-larger-than` and, with `one_file_system`, it is
/// not a directory on another device.
pub(super) fn keeps(
    excluder: &Excluder,
    one_file_system: bool,
    path: &Path,
    st: &Stat,
    root_dev: u64,
) -> bool {
    !(excluder.matches(path)
        || st.is_file() && excluder.too_large(st.size)
        || st.is_dir() && one_file_system && st.dev != root_dev)
}

/// The pool's handle: asks for listings; dropping it stops the threads
/// (after the listing each is making).
pub(super) struct Ahead {
    shared: Shared,
}

impl Ahead {
    /// Starts `threads` listing threads inside `scope`, which enter what
    /// `enter` says; with `repo`, they also load the parent snapshot's
    /// trees of what they list.
    pub(super) fn spawn<'scope, 'env>(
        scope: &'scope Scope<'scope, 'env>,
        threads: usize,
        enter: &Enter,
        repo: Option<&'env Repository>,
    ) -> Ahead {
        let shared: Shared = Arc::default();
        for _ in 0..threads {
            let shared = Arc::clone(&shared);
            let enter = enter.clone();
            scope.spawn(move || serve(&shared, &enter, repo));
        }
        Ahead { shared }
    }

    /// Asks for the listing of directory `path` (below a backed-up path on
    /// device `root_dev`), read through `fs_path`, and for the parent
    /// snapshot's tree `tree` of it. Paths that depend on a descriptor of
    /// the asking walk (`/proc/self/fd/…`) are listed by the walk itself:
    /// None.
    pub(super) fn ask(
        &self,
        path: &Path,
        fs_path: &Path,
        root_dev: u64,
        tree: Option<Id>,
    ) -> Option<Pending> {
        let mut q = self.shared.0.lock().ok()?;
        queue(&self.shared, &mut q, path, fs_path, root_dev, tree)
    }
}

/// Queues a request (see [`Ahead::ask`]) on `q`, the locked queue of
/// `shared`.
fn queue(
    shared: &Shared,
    q: &mut Queue,
    path: &Path,
    fs_path: &Path,
    root_dev: u64,
    tree: Option<Id>,
) -> Option<Pending> {
    if fs_path.starts_with("/proc/self/fd") {
        return None;
    }
    let (reply, rx) = bounded(1);
    let claim = Arc::new(AtomicU8::new(FREE));
    q.waiting.push(Request {
        path: path.to_path_buf(),
        fs_path: fs_path.to_path_buf(),
        root_dev,
        tree,
        reply,
        claim: Arc::clone(&claim),
    });
    Some(Pending {
        rx,
        claim,
        shared: Arc::clone(shared),
        taken: false,
    })
}

impl Drop for Ahead {
    fn drop(&mut self) {
        let (lock, cv) = &*self.shared;
        let dropped = match lock.lock() {
            Ok(mut q) => {
                q.closed = true;
                std::mem::take(&mut q.waiting)
            }
            Err(_) => BinaryHeap::new(),
        };
        // Outside the lock: what they drop may settle listings of its own.
        drop(dropped);
        cv.notify_all();
    }
}

/// One listing thread: takes the first request in walk order, loads the
/// old tree named, lists, asks for the subdirectories' listings, answers.
fn serve(shared: &Shared, enter: &Enter, repo: Option<&Repository>) {
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
                if q.ahead < AHEAD
                    && q.entries < AHEAD_ENTRIES
                    && let Some(r) = q.waiting.pop()
                {
                    let claimed = r.claim.compare_exchange(
                        FREE,
                        POOL,
                        AtomicOrdering::AcqRel,
                        AtomicOrdering::Acquire,
                    );
                    if claimed.is_err() {
                        continue;
                    }
                    q.ahead += 1;
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
        let listing = list(&req.fs_path, Some(&enter.excluder)).map(|mut l| {
            if !l.excluded {
                let old = old_tree.as_ref().map(|(_, t)| &**t);
                l.below = Some(ask_below(shared, enter, &req, &l.entries, old));
            }
            l.old_tree = old_tree;
            l
        });
        let listing = listing.map(|mut l| {
            l.counted = Some(Counted::new(shared, l.entries.len()));
            l
        });
        // The walk may have stopped waiting (it failed or skipped it).
        let _ = req.reply.send(listing);
    }
}

/// Asks, in one go, for the listings of the subdirectories among
/// `entries` of the directory of `req` that the walk will enter, each
/// with its tree in `old` (the parent snapshot's tree of the directory).
fn ask_below(
    shared: &Shared,
    enter: &Enter,
    req: &Request,
    entries: &[Entry],
    old: Option<&Tree>,
) -> Vec<(OsString, Pending)> {
    let old_sub = |name: &OsStr| {
        old?.find(name.as_bytes())
            .filter(|n| n.kind == NodeKind::Dir)?
            .subtree
    };
    let Ok(mut q) = shared.0.lock() else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|e| {
            let (_, st) = e.found.as_ref().ok()?;
            let path = localfs::join(&req.path, &e.name);
            if !enter.enters(&path, st, req.root_dev) {
                return None;
            }
            let fs_path = e.fs_path(&req.fs_path)?;
            let tree = old_sub(&e.name);
            let p = queue(shared, &mut q, &path, &fs_path, req.root_dev, tree)?;
            Some((e.name.clone(), p))
        })
        .collect()
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

    /// The queue's order is `Path`'s order, also for names with bytes
    /// below the separator's (` `, `!`, `-`, `.`) and for a name that is
    /// another's prefix.
    #[test]
    fn walk_order_is_the_order_of_paths() {
        let paths = [
            "/",
            "/a",
            "/a b",
            "/a!",
            "/a-b",
            "/a.b",
            "/a/b",
            "/a/b/c",
            "/a/b c",
            "/a/b-c",
            "/a/bc",
            "/ab",
            "/ab/c",
            "/b",
            "/a\x7f",
            "/\u{e9}",
            "/a/\u{e9}/x",
        ];
        for a in paths {
            for b in paths {
                let (pa, pb) = (Path::new(a), Path::new(b));
                assert_eq!(walk_order(pa, pb), pa.cmp(pb), "{a:?} against {b:?}");
            }
        }
    }

    /// Waits (at most 10 s) until `cond` holds.
    fn wait_until(what: &str, cond: impl Fn() -> bool) {
        let start = std::time::Instant::now();
        while !cond() {
            assert!(start.elapsed().as_secs() < 10, "never: {what}");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// What the pool enters: every subdirectory, or those `globs` leave.
    fn enter(globs: &[&str]) -> Enter {
        let globs: Vec<String> = globs.iter().map(|g| g.to_string()).collect();
        Enter {
            excluder: Excluder::from_globs(&globs).unwrap(),
            one_file_system: false,
        }
    }

    fn no_rules() -> Excluder {
        Excluder::from_globs(&[]).unwrap()
    }

    /// The pool's counters: listings ahead, threads asleep.
    fn counts(ahead: &Ahead) -> (usize, usize) {
        let q = ahead.shared.0.lock().unwrap();
        (q.ahead, q.idle)
    }

    /// Asks for `root`'s listing behind a first request the walk takes
    /// itself (a directory that does not exist), which wakes the pool: it
    /// then lists `root` and what is below it on its own.
    fn ask_after_a_miss(ahead: &Ahead, root: &Path) -> Pending {
        let first = ahead
            .ask(&root.join("0"), &root.join("0"), 0, None)
            .unwrap();
        let asked = ahead.ask(root, root, 0, None).unwrap();
        assert!(first.take(&root.join("0"), &no_rules()).is_err());
        asked
    }

    fn names_below(l: &Listing) -> Vec<OsString> {
        let below = l.below.as_ref().expect("the pool asked for none below");
        below.iter().map(|(n, _)| n.clone()).collect()
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
        let check = |p: &Path, got: io::Result<Listing>| match (got, list(p, Some(&no_rules()))) {
            (Ok(a), Ok(b)) => {
                assert_eq!(names(&a), names(&b));
                assert_eq!(names(&a).len(), 2, "{}", p.display());
                assert_eq!(names(&a)[0].0, "y", "sorted by name");
            }
            (Err(a), Err(b)) => assert_eq!(a.kind(), b.kind()),
            _ => panic!("{}: the pool and the walk disagree", p.display()),
        };
        std::thread::scope(|s| {
            let ahead = Ahead::spawn(s, 2, &enter(&[]), None);
            wait_until("both threads asleep", || counts(&ahead).1 == 2);
            let mut asked: Vec<_> = ["a", "b", "c", "missing"]
                .iter()
                .map(|d| {
                    let p = dir.path().join(d);
                    (p.clone(), ahead.ask(&p, &p, 0, None).unwrap())
                })
                .collect();
            // Asking woke no one: the first listing the walk takes was not
            // started, so the walk makes it (leaving what is below it to
            // the walk) and wakes the pool for the rest.
            let (p, first) = asked.remove(0);
            assert!(first.rx.is_empty(), "asking woke the pool");
            let made_here = first.take(&p, &no_rules());
            assert!(made_here.as_ref().unwrap().below.is_none());
            check(&p, made_here);
            for (p, pending) in asked {
                wait_until("the pool answers", || !pending.rx.is_empty());
                check(&p, pending.take(&p, &no_rules()));
            }
            // A path through a descriptor is left to the walk.
            let fd = Path::new("/proc/self/fd/3/x");
            assert!(ahead.ask(fd, fd, 0, None).is_none());
        });
    }

    /// The pool lists the tree ahead of the walk on its own: with each
    /// listing it makes, it asks for those of the subdirectories the walk
    /// will enter (not files, not what a pattern excludes), in name order,
    /// and goes on to them before the walk asks for anything.
    #[test]
    fn the_pool_lists_below_what_it_lists() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("top");
        for d in ["b", "a/y", "a/x/deep", "skip/inside"] {
            std::fs::create_dir_all(top.join(d)).unwrap();
        }
        std::fs::write(top.join("f"), b"file").unwrap();
        std::thread::scope(|s| {
            let ahead = Ahead::spawn(s, 1, &enter(&["skip"]), None);
            wait_until("the thread asleep", || counts(&ahead).1 == 1);
            let first = ahead.ask(&dir.path().join("0"), &dir.path().join("0"), 0, None);
            let asked = ahead.ask(&top, &top, 0, None).unwrap();
            // The walk's miss on the first wakes the pool.
            assert!(
                first
                    .unwrap()
                    .take(Path::new("/nonexistent"), &no_rules())
                    .is_err()
            );
            // Everything the walk will enter gets listed: top, a, a/x,
            // a/x/deep, a/y, b.
            wait_until("the pool lists the tree", || counts(&ahead) == (6, 1));
            let got = asked.take(&top, &no_rules()).unwrap();
            assert_eq!(names_below(&got), ["a", "b"]);
            let mut below = got.below.unwrap().into_iter();
            let (_, a) = below.next().unwrap();
            assert!(!a.rx.is_empty(), "a was not listed ahead");
            let a = a.take(&top.join("a"), &no_rules()).unwrap();
            assert_eq!(names_below(&a), ["x", "y"]);
            let (_, x) = a.below.unwrap().into_iter().next().unwrap();
            assert!(!x.rx.is_empty(), "a/x was not listed ahead");
            let x = x.take(&top.join("a/x"), &no_rules()).unwrap();
            assert_eq!(names_below(&x), ["deep"]);
            assert_eq!(x.entries.len(), 1);
            // Taken: top, a and a/x; dropped untaken: b, a/y and a/x/deep
            // (each given up, the count with it).
            drop(below);
            drop(x);
            assert_eq!(counts(&ahead).0, 0);
        });
    }

    /// The pool stops [`AHEAD`] listings ahead of the walk, and goes on
    /// once the walk has taken half of them.
    #[test]
    fn the_pool_stops_ahead_of_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        let n = AHEAD + AHEAD / 2 + 4;
        for i in 0..n {
            std::fs::create_dir(dir.path().join(format!("d{i:04}"))).unwrap();
        }
        let root = dir.path();
        std::thread::scope(|s| {
            let ahead = Ahead::spawn(s, 2, &enter(&[]), None);
            wait_until("both threads asleep", || counts(&ahead).1 == 2);
            let asked = ask_after_a_miss(&ahead, root);
            // The root and the first of its subdirectories, in walk order.
            wait_until("the pool stops", || counts(&ahead) == (AHEAD, 2));
            let got = asked.take(root, &no_rules()).unwrap();
            let below: Vec<Pending> = got.below.unwrap().into_iter().map(|(_, p)| p).collect();
            assert_eq!(below.len(), n);
            let answered = |ps: &[Pending]| ps.iter().filter(|p| !p.rx.is_empty()).count();
            // The root's listing, taken, freed one place: a pool thread
            // that wakes meanwhile (a spurious wakeup) may fill it.
            let first = answered(&below);
            assert!(first == AHEAD - 1 || first == AHEAD, "not bounded: {first}");
            assert!(
                below[..first].iter().all(|p| !p.rx.is_empty()),
                "not in walk order"
            );
            // Taken down to half as many ahead, the pool goes on.
            let taken = first - AHEAD / 2;
            let mut below = below.into_iter();
            for (i, p) in below.by_ref().take(taken).enumerate() {
                let path = root.join(format!("d{i:04}"));
                assert!(p.take(&path, &no_rules()).unwrap().entries.is_empty());
            }
            wait_until("the pool goes on", || counts(&ahead) == (AHEAD, 2));
            let rest: Vec<Pending> = below.collect();
            assert_eq!(answered(&rest), AHEAD);
            assert_eq!(rest.len() - answered(&rest), n - taken - AHEAD);
        });
    }

    /// The pool also stops once the listings it holds for the walk have
    /// [`AHEAD_ENTRIES`] entries, however few listings that is, and goes
    /// on once the walk has taken them down to half.
    #[test]
    fn the_pool_stops_at_its_entries_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let (n, k) = (20, 1100);
        for i in 0..n {
            let d = dir.path().join(format!("d{i:04}"));
            std::fs::create_dir(&d).unwrap();
            for j in 0..k {
                std::fs::File::create(d.join(format!("f{j:04}"))).unwrap();
            }
        }
        let root = dir.path();
        let entries = |ahead: &Ahead| ahead.shared.0.lock().unwrap().entries;
        std::thread::scope(|s| {
            let ahead = Ahead::spawn(s, 2, &enter(&[]), None);
            wait_until("both threads asleep", || counts(&ahead).1 == 2);
            let asked = ask_after_a_miss(&ahead, root);
            wait_until("the pool stops", || {
                counts(&ahead).1 == 2 && entries(&ahead) >= AHEAD_ENTRIES
            });
            let got = asked.take(root, &no_rules()).unwrap();
            let below: Vec<Pending> = got.below.unwrap().into_iter().map(|(_, p)| p).collect();
            let answered = |ps: &[Pending]| ps.iter().filter(|p| !p.rx.is_empty()).count();
            let made = answered(&below);
            // Each thread checks the count before it lists: two may pass it.
            let least = (AHEAD_ENTRIES - n).div_ceil(k);
            assert!(
                (least..=least + 1).contains(&made),
                "{made} listings of {k} entries made ahead"
            );
            assert!(below[..made].iter().all(|p| !p.rx.is_empty()));
            assert_eq!(entries(&ahead), made * k, "the root's entries still count");
            let mut below = below.into_iter();
            let mut taken = 0;
            while entries(&ahead) > AHEAD_ENTRIES / 2 {
                let path = root.join(format!("d{taken:04}"));
                let l = below.next().unwrap().take(&path, &no_rules()).unwrap();
                assert_eq!(l.entries.len(), k);
                taken += 1;
            }
            assert!(taken < made, "took a listing the pool had not made");
            let rest: Vec<Pending> = below.collect();
            wait_until("the pool goes on", || answered(&rest) == rest.len());
            // Given up untaken, their entries no longer count.
            drop(rest);
            assert_eq!((counts(&ahead).0, entries(&ahead)), (0, 0));
        });
    }

    /// A request the walk claimed stays in the queue, marked, so the pool
    /// skips it instead of listing the directory a second time; so does
    /// one the walk gave up.
    #[test]
    fn a_listing_the_walk_makes_itself_is_claimed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("a/f"), b"x").unwrap();
        let a = dir.path().join("a");
        let (b, c) = (dir.path().join("b"), dir.path().join("c"));
        std::thread::scope(|s| {
            let ahead = Ahead::spawn(s, 0, &enter(&[]), None);
            let taken = ahead.ask(&a, &a, 0, None).unwrap();
            let left = ahead.ask(&b, &b, 0, None);
            let given_up = ahead.ask(&c, &c, 0, None);
            let got = taken.take(&a, &no_rules()).unwrap();
            assert_eq!(got.entries.len(), 1);
            drop(given_up);
            let mut q = ahead.shared.0.lock().unwrap();
            let claimed: Vec<(PathBuf, u8)> = std::iter::from_fn(|| q.waiting.pop())
                .map(|r| (r.path, r.claim.load(AtomicOrdering::Acquire)))
                .collect();
            assert_eq!(claimed, [(a.clone(), WALK), (b, FREE), (c, WALK)]);
            assert_eq!(q.ahead, 0);
            drop(q);
            drop(left);
        });
    }

    /// With a repository, the pool loads the parent snapshot's tree the
    /// walk names with a directory and hands it over with the listing; a
    /// tree the repository does not have, or none named, gives the listing
    /// alone. Below a loaded tree, the pool names each subdirectory's
    /// tree from it, and loads those too.
    #[test]
    fn the_pool_loads_the_old_tree_named_with_a_directory() {
        let d = tempfile::tempdir().unwrap();
        let (repo, root, src) = crate::archiver::parent::tests::two_dirs(d.path());
        let (a, b) = (src.join("a"), src.join("b"));
        let mut pt = crate::archiver::parent::ParentTrees::new(&repo, Some(root));
        let (a_id, a_tree) = pt.tree_with_id(&a).unwrap().unwrap();
        let (b_id, b_tree) = pt.tree_with_id(&b).unwrap().unwrap();
        let (src_id, _) = pt.tree_with_id(&src).unwrap().unwrap();
        let rules = no_rules();
        std::thread::scope(|s| {
            let ahead = Ahead::spawn(s, 1, &enter(&[]), Some(&repo));
            wait_until("the thread asleep", || counts(&ahead).1 == 1);
            let first = ahead.ask(&b, &b, 0, None).unwrap();
            let named = ahead.ask(&a, &a, 0, Some(a_id)).unwrap();
            let unknown = ahead.ask(&a, &a, 0, Some(Id([7; 32]))).unwrap();
            let none = ahead.ask(&a, &a, 0, None).unwrap();
            let whole = ahead.ask(&src, &src, 0, Some(src_id)).unwrap();
            // The walk makes the first listing itself and wakes the pool.
            assert!(first.take(&b, &rules).unwrap().old_tree.is_none());
            for p in [&named, &unknown, &none, &whole] {
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
            let whole = whole.take(&src, &rules).unwrap();
            assert_eq!(whole.old_tree.unwrap().0, src_id);
            let below: Vec<_> = whole.below.unwrap().into_iter().collect();
            for ((name, p), (path, id, tree)) in below
                .into_iter()
                .zip([(&a, a_id, &a_tree), (&b, b_id, &b_tree)])
            {
                assert_eq!(Some(name.as_os_str()), path.file_name());
                wait_until("the pool lists below", || !p.rx.is_empty());
                let (got_id, got_tree) = p
                    .take(path, &rules)
                    .unwrap()
                    .old_tree
                    .expect("not named from the tree above");
                assert_eq!((got_id, &*got_tree), (id, &**tree));
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
            let ahead = Ahead::spawn(s, 0, &enter(&[]), None);
            let _pending: Vec<_> = asked
                .iter()
                .map(|p| ahead.ask(Path::new(p), Path::new(p), 0, None))
                .collect();
            let mut q = ahead.shared.0.lock().unwrap();
            std::iter::from_fn(|| q.waiting.pop().map(|r| r.path)).collect()
        });
        let want = ["/a", "/a/b", "/a/b/c", "/a/z", "/ab", "/b", "/b/a", "/c"];
        assert_eq!(served, want.map(PathBuf::from));
    }
}
