//! Where a restore's pack reads come from. On local storage: ranged reads,
//! as the plan cut them. On remote storage, where every request is a round
//! trip, a pack is fetched whole, in one request, when the restore will
//! use much of it, and kept on local disk (unnamed files in the cache
//! directory, [`SPOOL_BYTES`] at most, least recently used out first), so
//! the next batch of files that needs the rest of it reads it there: a full
//! restore fetches each pack once. A small restore (one file from a large
//! snapshot) still reads just the ranges it needs.

use super::plan::PackRead;
use crate::backend::Kind;
use crate::error::Result;
use crate::id::Id;
use crate::repository::Repository;
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Largest pack fetched whole (a pack of the default 16 MiB, with room).
pub(super) const WHOLE_MAX: u64 = 32 << 20;
/// Local disk the kept packs may use.
const SPOOL_BYTES: u64 = 256 << 20;
/// A restore of at least this many bytes fetches every pack whole.
pub(super) const BIG_RESTORE: u64 = 64 << 20;

/// The pack reads of one restore.
pub(super) struct PackSource<'r> {
    repo: &'r Repository,
    /// Present on remote storage.
    spool: Option<Spool>,
    /// Whether the restore is large enough that each pack it touches is
    /// fetched whole at first touch.
    big: bool,
}

/// Bytes read from a pack: `data` starts at offset `base` of the pack.
pub(super) struct Fetched {
    pub(super) data: Vec<u8>,
    pub(super) base: u64,
}

/// The largest read buffer a thread keeps for its next read (a local
/// read is at most 4 MiB: see the plan).
const READ_BUF_KEPT: usize = 8 << 20;

thread_local! {
    /// A thread's buffer for its next ranged read, given back by
    /// [`Fetched::recycle`]: a fresh buffer per read was a page fault per
    /// 4 KiB read.
    static READ_BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

impl Fetched {
    /// Keeps this read's buffer for the thread's next read.
    pub(super) fn recycle(self) {
        if self.data.capacity() <= READ_BUF_KEPT {
            READ_BUF.set(self.data);
        }
    }
}

impl<'r> PackSource<'r> {
    /// Reads for `repo`; `expected_bytes` is what the restore will write,
    /// if known (a whole snapshot's recorded size).
    pub(super) fn new(repo: &'r Repository, expected_bytes: Option<u64>) -> Self {
        let spool = repo
            .backend()
            .connections()
            .map(|_| Spool::new(repo.cache_dir()));
        PackSource {
            repo,
            spool,
            big: expected_bytes.is_some_and(|b| b >= BIG_RESTORE),
        }
    }

    /// Whether the storage is remote (reads are planned one per pack).
    pub(super) fn remote(&self) -> bool {
        self.spool.is_some()
    }

    /// The bytes of read `r`.
    pub(super) fn read(&self, r: &PackRead) -> Result<Fetched> {
        let name = r.pack.to_hex();
        if let Some(sp) = &self.spool {
            if let Some(data) = sp.read(&r.pack, r.start, r.end - r.start) {
                return Ok(Fetched {
                    data,
                    base: r.start,
                });
            }
            if let Some(size) = r.pack_size.filter(|&s| s <= WHOLE_MAX && s >= r.end)
                && sp.wants_whole(&r.pack, r.end - r.start, size, self.big)
            {
                let backend = self.repo.backend();
                return sp.whole(&r.pack, r.start, r.end - r.start, || {
                    backend.read_range(Kind::Pack, &name, 0, size)
                });
            }
        }
        let mut data = READ_BUF.take();
        self.repo.backend().read_range_into(
            Kind::Pack,
            &name,
            r.start,
            r.end - r.start,
            &mut data,
        )?;
        Ok(Fetched {
            data,
            base: r.start,
        })
    }
}

/// Whole packs on local disk.
struct Spool {
    dir: PathBuf,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    packs: HashMap<Id, Kept>,
    bytes: u64,
    tick: u64,
    /// Packs this restore has read from, whole or not.
    touched: HashSet<Id>,
    /// Packs being fetched whole, each with the lock its fetch holds.
    fetching: HashMap<Id, Arc<Mutex<()>>>,
}

struct Kept {
    file: Arc<File>,
    size: u64,
    used: u64,
}

impl Spool {
    fn new(cache_dir: &Path) -> Spool {
        Spool {
            dir: cache_dir.to_path_buf(),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Whether to fetch `pack` (of `size` bytes) whole for a read of
    /// `len` bytes: in a big restore, when the read is a quarter of the
    /// pack or more, or when the pack was read before (the rest of a pack
    /// a batch boundary cut).
    fn wants_whole(&self, pack: &Id, len: u64, size: u64, big: bool) -> bool {
        let Ok(mut g) = self.inner.lock() else {
            return false;
        };
        let before = !g.touched.insert(*pack);
        big || before || len.saturating_mul(4) >= size
    }

    /// Bytes `start..start + len` of `pack`, from all of it fetched by
    /// `fetch` and kept. Two reads of one pack (a batch's blobs with a wide
    /// gap between them) may run at once: the second waits for the first's
    /// fetch and reads the spool, so a pack is fetched once.
    fn whole(
        &self,
        pack: &Id,
        start: u64,
        len: u64,
        fetch: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Fetched> {
        let gate = self.gate(pack);
        let _fetching = gate.lock();
        if let Some(data) = self.read(pack, start, len) {
            return Ok(Fetched { data, base: start });
        }
        let data = fetch();
        if let Ok(d) = &data {
            self.keep(pack, d);
        }
        self.ungate(pack);
        Ok(Fetched {
            data: data?,
            base: 0,
        })
    }

    /// The lock held while `pack` is fetched whole (one per pack until
    /// [`Spool::ungate`]).
    fn gate(&self, pack: &Id) -> Arc<Mutex<()>> {
        match self.inner.lock() {
            Ok(mut g) => g.fetching.entry(*pack).or_default().clone(),
            // A poisoned spool keeps nothing: no fetch to wait for.
            Err(_) => Arc::default(),
        }
    }

    /// `pack`'s whole fetch is over (kept or failed): later reads of it
    /// need no lock.
    fn ungate(&self, pack: &Id) {
        if let Ok(mut g) = self.inner.lock() {
            g.fetching.remove(pack);
        }
    }

    /// `len` bytes at `start` of `pack`, if it is kept.
    fn read(&self, pack: &Id, start: u64, len: u64) -> Option<Vec<u8>> {
        let file = {
            let mut g = self.inner.lock().ok()?;
            g.tick += 1;
            let tick = g.tick;
            let k = g.packs.get_mut(pack)?;
            if start.checked_add(len)? > k.size {
                return None;
            }
            k.used = tick;
            k.file.clone()
        };
        let mut buf = vec![0u8; usize::try_from(len).ok()?];
        file.read_exact_at(&mut buf, start).ok()?;
        Some(buf)
    }

    /// Keeps `data` (all of `pack`) on disk, dropping the least recently
    /// used packs beyond [`SPOOL_BYTES`]. A failure to keep it only means
    /// it is fetched again if needed.
    fn keep(&self, pack: &Id, data: &[u8]) {
        let Ok(file) = self.unnamed_file() else {
            return;
        };
        if (&file).write_all(data).is_err() {
            return;
        }
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        g.tick += 1;
        let size = data.len() as u64;
        let used = g.tick;
        if let Some(old) = g.packs.insert(
            *pack,
            Kept {
                file: Arc::new(file),
                size,
                used,
            },
        ) {
            g.bytes -= old.size;
        }
        g.bytes += size;
        while g.bytes > SPOOL_BYTES {
            let Some(oldest) = g
                .packs
                .iter()
                .min_by_key(|(_, k)| k.used)
                .map(|(id, _)| *id)
            else {
                break;
            };
            if let Some(k) = g.packs.remove(&oldest) {
                g.bytes -= k.size;
            }
        }
    }

    /// A file with no name in the cache directory: it vanishes with its
    /// last descriptor, whatever ends the restore.
    fn unnamed_file(&self) -> std::io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .mode(0o600)
            .open(&self.dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_of_one_pack_at_once_fetch_it_once() {
        let d = tempfile::tempdir().unwrap();
        let sp = Spool::new(d.path());
        let p = Id([5; 32]);
        let pack: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
        let fetches = std::sync::atomic::AtomicUsize::new(0);
        let got: Vec<Fetched> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4u64)
                .map(|i| {
                    let (sp, pack, fetches) = (&sp, &pack, &fetches);
                    s.spawn(move || {
                        sp.whole(&p, i * 1000, 100, || {
                            fetches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            // Slow enough that the others arrive meanwhile.
                            std::thread::sleep(std::time::Duration::from_millis(200));
                            Ok(pack.clone())
                        })
                        .unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(fetches.into_inner(), 1, "fetched once, the others waited");
        for (i, f) in got.iter().enumerate() {
            let start = i * 1000;
            let at = start - f.base as usize;
            assert_eq!(&f.data[at..at + 100], &pack[start..start + 100], "read {i}");
        }
        // A failed fetch is not kept and does not block the next one.
        let q = Id([6; 32]);
        let e = sp.whole(&q, 0, 10, || Err(crate::Error::internal("down")));
        assert!(e.is_err());
        let again = sp.whole(&q, 0, 10, || Ok(pack.clone())).unwrap();
        assert_eq!(&again.data[..10], &pack[..10]);
    }

    #[test]
    fn kept_packs_read_back_and_the_oldest_go_first() {
        let d = tempfile::tempdir().unwrap();
        let sp = Spool::new(d.path());
        let a = Id([1; 32]);
        let b = Id([2; 32]);
        let big = vec![7u8; (SPOOL_BYTES / 2 + 1) as usize];
        sp.keep(&a, &big);
        assert_eq!(sp.read(&a, 10, 5).unwrap(), vec![7u8; 5]);
        assert!(
            sp.read(&a, big.len() as u64 - 2, 5).is_none(),
            "past its end"
        );
        sp.keep(&b, &big);
        assert!(sp.read(&a, 0, 1).is_none(), "a was the least recently used");
        assert_eq!(sp.read(&b, 0, 3).unwrap(), vec![7u8; 3]);
        assert!(
            std::fs::read_dir(d.path()).unwrap().next().is_none(),
            "kept packs have no names"
        );
    }

    #[test]
    fn whole_fetch_rule() {
        let sp = Spool::new(Path::new("/nonexistent"));
        let p = Id([3; 32]);
        assert!(
            !sp.wants_whole(&p, 100, 16 << 20, false),
            "small first read"
        );
        assert!(sp.wants_whole(&p, 100, 16 << 20, false), "read again");
        let q = Id([4; 32]);
        assert!(sp.wants_whole(&q, 4 << 20, 16 << 20, false), "a quarter");
        let r = Id([5; 32]);
        assert!(sp.wants_whole(&r, 1, 16 << 20, true), "big restore");
    }
}
