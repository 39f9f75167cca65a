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

use super::exclude::DirRules;
use crate::localfs::{self, Anchor, stat::Stat};
use crossbeam_channel::{Receiver, Sender, bounded};
use std::collections::BinaryHeap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::Scope;

/// Subdirectories of one directory asked for ahead of the walk.
pub(super) const WINDOW: usize = 8;

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
    })
}

/// A listing on its way: taken with [`Pending::take`].
pub(super) struct Pending(Receiver<io::Result<Listing>>);

impl Pending {
    /// The listing, waiting for it; listed here if the pool has stopped.
    pub(super) fn take(self, fs_path: &Path, rules: &DirRules) -> io::Result<Listing> {
        self.0.recv().unwrap_or_else(|_| list(fs_path, Some(rules)))
    }
}

struct Request {
    /// The directory's path in the snapshot: the walk's order.
    path: PathBuf,
    fs_path: PathBuf,
    reply: Sender<io::Result<Listing>>,
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
    /// Threads asleep on the condition variable: a request wakes one only
    /// if there is one (a wake-up is a system call; a busy thread takes
    /// the request when it comes back for the next).
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
    /// Starts `threads` listing threads inside `scope`, applying `rules`.
    pub(super) fn spawn<'scope>(
        scope: &'scope Scope<'scope, '_>,
        threads: usize,
        rules: &DirRules,
    ) -> Ahead {
        let shared: Shared = Arc::default();
        for _ in 0..threads {
            let shared = Arc::clone(&shared);
            let rules = rules.clone();
            scope.spawn(move || serve(&shared, &rules));
        }
        Ahead { shared }
    }

    /// Asks for the listing of directory `path`, read through `fs_path`.
    /// Paths that depend on a descriptor of the asking walk
    /// (`/proc/self/fd/…`) are listed by the walk itself: None.
    pub(super) fn ask(&self, path: &Path, fs_path: &Path) -> Option<Pending> {
        if fs_path.starts_with("/proc/self/fd") {
            return None;
        }
        let (reply, rx) = bounded(1);
        let (lock, cv) = &*self.shared;
        let mut q = lock.lock().ok()?;
        q.waiting.push(Request {
            path: path.to_path_buf(),
            fs_path: fs_path.to_path_buf(),
            reply,
        });
        if q.idle > 0 {
            cv.notify_one();
        }
        Some(Pending(rx))
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

/// One listing thread: takes the first request in walk order, lists,
/// answers.
fn serve(shared: &Shared, rules: &DirRules) {
    let (lock, cv) = &**shared;
    loop {
        let req = {
            let Ok(mut q) = lock.lock() else { return };
            loop {
                if q.closed {
                    return;
                }
                if let Some(r) = q.waiting.pop() {
                    break r;
                }
                q.idle += 1;
                q = match cv.wait(q) {
                    Ok(q) => q,
                    Err(_) => return,
                };
                q.idle -= 1;
            }
        };
        // The walk may have stopped waiting (it failed or skipped it).
        let _ = req.reply.send(list(&req.fs_path, Some(rules)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        std::thread::scope(|s| {
            let ahead = Ahead::spawn(s, 2, &DirRules::default());
            let asked: Vec<_> = ["a", "b", "c", "missing"]
                .iter()
                .map(|d| {
                    let p = dir.path().join(d);
                    (p.clone(), ahead.ask(&p, &p).unwrap())
                })
                .collect();
            for (p, pending) in asked {
                let rules = DirRules::default();
                match (pending.take(&p, &rules), list(&p, Some(&rules))) {
                    (Ok(a), Ok(b)) => {
                        assert_eq!(names(&a), names(&b));
                        assert_eq!(names(&a).len(), 2, "{}", p.display());
                        assert_eq!(names(&a)[0].0, "y", "sorted by name");
                    }
                    (Err(a), Err(b)) => assert_eq!(a.kind(), b.kind()),
                    _ => panic!("{}: the pool and the walk disagree", p.display()),
                }
            }
            // A path through a descriptor is left to the walk.
            let fd = Path::new("/proc/self/fd/3/x");
            assert!(ahead.ask(fd, fd).is_none());
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
            let ahead = Ahead::spawn(s, 0, &DirRules::default());
            let _pending: Vec<_> = asked
                .iter()
                .map(|p| ahead.ask(Path::new(p), Path::new(p)))
                .collect();
            let mut q = ahead.shared.0.lock().unwrap();
            std::iter::from_fn(|| q.waiting.pop().map(|r| r.path)).collect()
        });
        let want = ["/a", "/a/b", "/a/b/c", "/a/z", "/ab", "/b", "/b/a", "/c"];
        assert_eq!(served, want.map(PathBuf::from));
    }
}
