//! Writing new blobs: the [`Packer`] fills packs with sealed blobs,
//! deduplicating against the index and the pack being filled, hands each
//! finished pack to an upload thread (so the next pack fills while the
//! previous one is written and fsynced), and writes an index segment every
//! few packs so a run that dies leaves its uploaded data reusable. A segment
//! lists every pack its run uploaded, and only packs whose upload has
//! completed: packs, then segment, then snapshot. The shared index cache
//! learns of new packs only from the segment, after it is written.
//!
//! Tree blobs go into packs of their own (a second pack being filled), so
//! a client with an empty cache that needs a snapshot's trees (a second
//! machine's first backup or restore from remote storage) fetches them a
//! whole pack at a time rather than a request per directory.

use crate::backend::{Backend, Kind};
use crate::error::{Error, Result};
use crate::id::Id;
use crate::index::{self, IndexPack, IndexSegment};
use crate::lock::LockHandle;
use crate::pack::{self, BlobType, FinishedPack, PackWriter, PreparedBlob};
use crate::repository::Repository;
use crossbeam_channel::{Receiver, Sender, bounded};
use serde::Serialize;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The IDs of the blobs listed by the segments a [`Packer`] has written
/// since they were last taken, each reported once its segment is in the
/// index cache ([`Packer::report_segments_to`]). A backup forgets them from
/// the blobs it has sent: from then on the index answers for them.
#[derive(Default)]
pub struct Segmented {
    ids: Mutex<Vec<Id>>,
    /// Whether `ids` may hold any: [`Segmented::take`] asks this first,
    /// without the lock, at every new blob.
    pending: AtomicBool,
}

impl Segmented {
    fn push(&self, seg: &IndexSegment) -> Result<()> {
        let mut ids = self
            .ids
            .lock()
            .map_err(|_| Error::internal("the segmented blobs lock is poisoned"))?;
        ids.extend(seg.packs.iter().flat_map(|p| p.blobs.iter().map(|b| b.id)));
        self.pending.store(true, Ordering::Release);
        Ok(())
    }

    /// The IDs reported since the last call (none, without locking, when
    /// there are none).
    pub fn take(&self) -> Result<Vec<Id>> {
        if !self.pending.swap(false, Ordering::AcqRel) {
            return Ok(Vec::new());
        }
        let mut ids = self
            .ids
            .lock()
            .map_err(|_| Error::internal("the segmented blobs lock is poisoned"))?;
        Ok(std::mem::take(&mut *ids))
    }
}

/// Counters kept by a [`Packer`].
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct PackerStats {
    pub blobs_added: u64,
    pub bytes_added_plain: u64,
    pub bytes_added_stored: u64,
    pub packs_written: u64,
}

/// Compresses and seals one blob at the level this run writes with
/// ([`Repository::compression_level`]), data blobs with the repository's
/// dictionary when it has one ([`Repository::write_dictionary`]; see
/// [`pack::seal_blob`]). Safe to call from many threads at once.
pub fn seal_blob(repo: &Repository, ty: BlobType, id: Id, plain: &[u8]) -> Result<PreparedBlob> {
    let dict = match ty {
        BlobType::Data => repo.write_dictionary()?,
        BlobType::Tree => None,
    };
    pack::seal_blob(
        repo.keys(),
        repo.compression_level(),
        dict.as_deref(),
        ty,
        id,
        plain,
    )
}

/// An index segment is written after this many packs (1 GiB at the
/// default pack size), once it would list [`index::SEGMENT_BLOBS`] blobs
/// (packs of small files hold tens of thousands each, and every blob of
/// the packs not yet in a segment is held in memory), or once the oldest
/// pack it would list has waited [`SEGMENT_WAIT`]. Few segments mean few
/// requests and few files for every later open to absorb; a run killed
/// before its segment loses nothing either way: its packs are indexed by
/// the next backup (see `archiver::runmark`).
const PACKS_PER_SEGMENT: usize = 64;
/// The longest an uploaded pack waits for its segment.
const SEGMENT_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Finished packs that may wait for their fsync while the next one fills.
const UPLOAD_QUEUE: usize = 6;

/// Packs made durable at the same time: a pack's fsync can wait on a busy
/// disk for a long time, and several in flight share the filesystem's
/// journal commits instead of queueing behind each other.
const UPLOAD_THREADS: usize = 3;

/// The upload threads: make packs durable and report each one when it is.
struct Uploader {
    tx: Option<Sender<FinishedPack>>,
    done: Receiver<Result<IndexPack>>,
    threads: Vec<JoinHandle<()>>,
    in_flight: usize,
}

impl Uploader {
    fn spawn(backend: Arc<dyn Backend>, lock: Option<LockHandle>) -> Uploader {
        // Packs are written to temporary files as they fill; here they wait
        // to be fsynced and named. A few may queue while the disk catches
        // up (each costs a file descriptor, not memory).
        let (tx, rx) = bounded::<FinishedPack>(UPLOAD_QUEUE);
        // At most UPLOAD_QUEUE + UPLOAD_THREADS results are ever pending.
        let (done_tx, done) = crossbeam_channel::unbounded::<Result<IndexPack>>();
        // A remote backend uploads as many packs at once as it has
        // connections; a local one as many as share the journal well.
        let n = backend.connections().unwrap_or(UPLOAD_THREADS).max(1);
        let threads = (0..n)
            .map(|_| {
                let (rx, done_tx, backend) = (rx.clone(), done_tx.clone(), backend.clone());
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for p in rx {
                        // A run that lost its lock writes nothing more.
                        let r = check_lock(&lock)
                            .and_then(|()| backend.commit(Kind::Pack, &p.id.to_hex(), p.out))
                            .map(|()| IndexPack {
                                id: p.id,
                                size: p.size,
                                blobs: p.entries,
                            });
                        if done_tx.send(r).is_err() {
                            return;
                        }
                    }
                })
            })
            .collect();
        Uploader {
            tx: Some(tx),
            done,
            threads,
            in_flight: 0,
        }
    }
}

impl Drop for Uploader {
    fn drop(&mut self) {
        drop(self.tx.take());
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Writes new blobs into packs.
pub struct Packer<'r> {
    repo: &'r Repository,
    writer: PackWriter,
    /// The pack of tree blobs being filled.
    tree_writer: PackWriter,
    /// Blobs in the pack being filled, being uploaded, or uploaded but not
    /// yet listed by a segment.
    in_pack: HashSet<Id>,
    unsegmented: Vec<IndexPack>,
    /// When the first pack of `unsegmented` was uploaded.
    unsegmented_since: Option<std::time::Instant>,
    uploader: Uploader,
    /// The run's repository lock, checked before every write.
    lock: Option<LockHandle>,
    /// Where the blobs of each segment written are reported, if anywhere.
    segmented: Option<Arc<Segmented>>,
    /// What this packer stored.
    pub stats: PackerStats,
}

/// Fails once the run's lock is lost (see [`LockHandle::check`]).
fn check_lock(lock: &Option<LockHandle>) -> Result<()> {
    lock.as_ref().map_or(Ok(()), LockHandle::check)
}

impl<'r> Packer<'r> {
    /// A packer for `repo`, with its upload threads, for a caller that
    /// holds no lock (tests, tools).
    pub fn new(repo: &'r Repository) -> Result<Packer<'r>> {
        Self::with_lock(repo, None)
    }

    /// A packer that checks the run's `lock` before every pack and segment
    /// it writes, and stops with [`crate::Error::LockLost`] once it is lost.
    pub fn with_lock(repo: &'r Repository, lock: Option<LockHandle>) -> Result<Packer<'r>> {
        Ok(Packer {
            repo,
            writer: PackWriter::new(repo.backend().stage(Kind::Pack)?),
            tree_writer: PackWriter::new(repo.backend().stage(Kind::Pack)?),
            in_pack: HashSet::new(),
            unsegmented: Vec::new(),
            unsegmented_since: None,
            uploader: Uploader::spawn(repo.backend_arc(), lock.clone()),
            lock,
            segmented: None,
            stats: PackerStats::default(),
        })
    }

    /// From now on, reports to `to` the blobs of every segment this packer
    /// writes, once the index cache holds it.
    pub fn report_segments_to(&mut self, to: Arc<Segmented>) {
        self.segmented = Some(to);
    }

    /// Whether blob `id` is already stored or queued.
    pub fn has(&self, id: &Id) -> Result<bool> {
        Ok(self.in_pack.contains(id) || self.repo.index()?.contains(id)?)
    }

    /// Stores `plain` as a blob of type `ty` unless it is already there.
    /// Returns its ID and whether it was new.
    pub fn add(&mut self, ty: BlobType, plain: &[u8]) -> Result<(Id, bool)> {
        let id = self.repo.keys().blob_id(plain);
        if self.has(&id)? {
            return Ok((id, false));
        }
        self.add_prepared(seal_blob(self.repo, ty, id, plain)?)?;
        Ok((id, true))
    }

    /// Appends a blob prepared elsewhere (by a worker), skipping one already
    /// in a pack of this packer. The caller has checked the index (the
    /// archiver does, before it compresses anything), so this does not ask
    /// SQLite again.
    pub fn add_prepared(&mut self, b: PreparedBlob) -> Result<bool> {
        if self.in_pack.contains(&b.id) {
            return Ok(false);
        }
        self.stats.blobs_added += 1;
        self.stats.bytes_added_plain += b.plain_len as u64;
        self.stats.bytes_added_stored += b.stored.len() as u64;
        self.in_pack.insert(b.id);
        let tree = b.ty == BlobType::Tree;
        if tree {
            self.repo.keep_tree(&b.id, &b.stored);
        }
        let w = if tree {
            &mut self.tree_writer
        } else {
            &mut self.writer
        };
        w.add(b)?;
        if w.size() >= self.repo.pack_size() as usize {
            self.flush_one(tree)?;
        }
        Ok(true)
    }

    /// Seals the packs being filled and hands them to the upload thread.
    pub fn flush_pack(&mut self) -> Result<()> {
        self.flush_one(false)?;
        self.flush_one(true)
    }

    /// Seals the data pack (or with `tree`, the tree pack) being filled
    /// and hands it to the upload thread.
    fn flush_one(&mut self, tree: bool) -> Result<()> {
        let slot = if tree {
            &mut self.tree_writer
        } else {
            &mut self.writer
        };
        if slot.is_empty() {
            return Ok(());
        }
        let next = PackWriter::new(self.repo.backend().stage(Kind::Pack)?);
        let w = std::mem::replace(slot, next);
        let p = w.finish(self.repo.keys())?;
        let header = p.size - p.entries.iter().map(|e| e.stored_len as u64).sum::<u64>();
        self.stats.bytes_added_stored += header;
        let tx = self
            .uploader
            .tx
            .as_ref()
            .ok_or_else(|| Error::internal("the pack uploader has stopped"))?;
        if tx.send(p).is_err() {
            // The uploader ended: its error is waiting in `done`.
            self.collect(true)?;
            return Err(Error::internal("the pack uploader has stopped"));
        }
        self.uploader.in_flight += 1;
        // Its blobs stay in `in_pack` until a segment lists them.
        self.collect(false)
    }

    /// Records packs whose upload finished (waiting for all if `all`).
    fn collect(&mut self, all: bool) -> Result<()> {
        while self.uploader.in_flight > 0 {
            let r = if all {
                match self.uploader.done.recv() {
                    Ok(r) => r,
                    Err(_) => return Err(Error::internal("the pack uploader has stopped")),
                }
            } else {
                match self.uploader.done.try_recv() {
                    Ok(r) => r,
                    Err(_) => return Ok(()),
                }
            };
            self.uploader.in_flight -= 1;
            let ip = r?;
            self.unsegmented.push(ip);
            self.stats.packs_written += 1;
            let since = *self
                .unsegmented_since
                .get_or_insert_with(std::time::Instant::now);
            if self.unsegmented.len() >= PACKS_PER_SEGMENT
                || self
                    .unsegmented
                    .iter()
                    .map(|p| p.blobs.len())
                    .sum::<usize>()
                    >= index::SEGMENT_BLOBS
                || since.elapsed() >= SEGMENT_WAIT
            {
                self.flush_segment()?;
            }
        }
        Ok(())
    }

    /// Writes an index segment for the uploaded packs not yet in one and
    /// records it in the index cache, the two at once; the cache's
    /// transaction commits once the segment is written
    /// ([`crate::index::Index::absorb_writing`]). Until then their blobs are
    /// known only to this packer (`in_pack`): the shared cache holds nothing
    /// a segment does not list.
    pub fn flush_segment(&mut self) -> Result<()> {
        if let Some(seg) = self.write_segment()? {
            for p in &seg.packs {
                for b in &p.blobs {
                    self.in_pack.remove(&b.id);
                }
            }
        }
        Ok(())
    }

    /// [`Packer::flush_segment`] without forgetting its blobs in `in_pack`
    /// (the caller does, or the packer is finished); the segment written,
    /// if there was anything to write.
    fn write_segment(&mut self) -> Result<Option<IndexSegment>> {
        if self.unsegmented.is_empty() {
            return Ok(None);
        }
        let seg = IndexSegment {
            packs: std::mem::take(&mut self.unsegmented),
        };
        self.unsegmented_since = None;
        check_lock(&self.lock)?;
        let (backend, keys) = (self.repo.backend(), self.repo.keys());
        self.repo
            .index()?
            .absorb_writing(&seg, || index::write_segment(backend, keys, &seg))?;
        if let Some(to) = &self.segmented {
            to.push(&seg)?;
        }
        Ok(Some(seg))
    }

    /// Flushes everything: the open pack, every upload, then the segment.
    pub fn finish(mut self) -> Result<PackerStats> {
        self.flush_pack()?;
        self.collect(true)?;
        // The packer ends here: which blobs its segments list no longer
        // matters (a first backup would remove every blob it stored).
        self.write_segment()?;
        Ok(self.stats)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::repository::test_repository;

    /// Asserts that the segments in `repo` list exactly `ids`, each blob
    /// once, in at least two segments, each with fewer than
    /// [`index::SEGMENT_BLOBS`] blobs plus its largest pack's, and all but
    /// one (the last written) with at least [`index::SEGMENT_BLOBS`].
    pub(crate) fn assert_bounded_segments(repo: &Repository, ids: &HashSet<Id>) {
        let mut sizes = Vec::new();
        let mut listed = HashSet::new();
        for e in repo.backend().list(Kind::Index).unwrap() {
            let seg = index::read_segment(repo.backend(), repo.keys(), &e.name).unwrap();
            let blobs: usize = seg.packs.iter().map(|p| p.blobs.len()).sum();
            let largest_pack = seg.packs.iter().map(|p| p.blobs.len()).max().unwrap();
            sizes.push((blobs, largest_pack));
            for b in seg.packs.iter().flat_map(|p| &p.blobs) {
                assert!(listed.insert(b.id), "a blob listed twice");
            }
        }
        assert!(listed == *ids, "the segments list exactly the blobs added");
        assert!(sizes.len() >= 2, "{sizes:?}");
        let short = sizes.iter().filter(|s| s.0 < index::SEGMENT_BLOBS).count();
        assert!(short <= 1, "{sizes:?}");
        assert!(
            sizes
                .iter()
                .all(|&(blobs, largest)| blobs < index::SEGMENT_BLOBS + largest),
            "{sizes:?}"
        );
    }

    /// Packs of small blobs end their segment at [`index::SEGMENT_BLOBS`]
    /// blobs, not at [`PACKS_PER_SEGMENT`] packs. With segments ended by
    /// packs alone, a backup of many small files held every blob of up to
    /// 64 packs in memory until its segment was written.
    #[test]
    fn small_blobs_end_a_segment_at_its_blob_limit() {
        let d = tempfile::tempdir().unwrap();
        let repo = test_repository(d.path());
        let mut p = Packer::new(&repo).unwrap();
        let segmented = Arc::new(Segmented::default());
        p.report_segments_to(segmented.clone());
        let n = 2 * index::SEGMENT_BLOBS + 5000;
        let mut ids = HashSet::new();
        let mut reported = Vec::new();
        for i in 0..n as u64 {
            let (id, new) = p.add(BlobType::Data, &i.to_le_bytes()).unwrap();
            assert!(new);
            ids.insert(id);
            // Reported once the index holds them, while the run goes on.
            let now = segmented.take().unwrap();
            assert!(
                now.iter()
                    .all(|id| repo.index().unwrap().contains(id).unwrap())
            );
            reported.extend(now);
        }
        assert!(
            reported.len() >= index::SEGMENT_BLOBS,
            "{} blobs reported before the end",
            reported.len()
        );
        let stats = p.finish().unwrap();
        reported.extend(segmented.take().unwrap());
        assert_eq!(reported.len(), n, "a blob reported twice or never");
        assert_eq!(reported.into_iter().collect::<HashSet<_>>(), ids);
        assert!(
            stats.packs_written < PACKS_PER_SEGMENT as u64,
            "{} packs: the pack count would end a segment",
            stats.packs_written
        );
        assert_bounded_segments(&repo, &ids);
    }
}
