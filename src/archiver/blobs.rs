//! Deduplication of new blobs: each chunk or tree is hashed with the keyed
//! ID function, checked against the blobs this run already sent and the
//! index, and only new ones go on to the storing stage, in batches of about
//! 1 MiB so the channel is touched once per batch rather than once per small
//! file. The reading workers share one sink ([`SharedSink`]): each hashes
//! its chunks on its own thread and holds the lock only to check the IDs
//! this run sent and to queue a new one. The index is asked outside that
//! lock, on a connection of the asking thread's own ([`Views`], each a
//! [`ReadView`] with many checks to a read transaction): with a large
//! index a check reads pages from disk or the page cache, and the workers
//! would otherwise take turns. A new chunk of a small file is then sealed
//! by the worker that read it, outside the lock ([`Put::put`]); see
//! [`super::store`].

use super::store::{Put, StoreItem};
use crate::error::{Error, Result};
use crate::id::Id;
use crate::index::ReadView;
use crate::pack::BlobType;
use crate::packer::Segmented;
use crate::repository::Repository;
use crossbeam_channel::Sender;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A batch of new blobs goes to the store once it holds this many bytes
/// or items.
const BATCH_BYTES: usize = 1 << 20;
const BATCH_ITEMS: usize = 64;

/// Page cache of each dedup view, KiB. Two reading workers ask at once,
/// and the walk, storing trees, a third. A check in a large index misses
/// the cache at its leaves however large it is, and most interior pages of
/// a 10-million-blob index do not fit either. The views fill their caches
/// there and nowhere else, so this is what such an index adds to a
/// backup's memory: with 2 MiB each, a cold backup into it peaked at
/// 42,456-43,876 KiB, where one into a fresh repository peaked at
/// 38,660-39,776 KiB; with 1 MiB, at 39,412-42,680 KiB, and it was no
/// slower (`scripts/ab_backup_big.sh`, two invocations of 4 rounds).
const VIEW_CACHE_KIB: u32 = 1024;

/// Where the walk hands its chunks and trees.
pub(super) struct BlobSink<'r> {
    repo: &'r Repository,
    /// The storing stage (None in a dry run).
    store: Option<Sender<Vec<StoreItem>>>,
    /// New blobs not yet handed to the store.
    batch: Vec<StoreItem>,
    batch_bytes: usize,
    /// New blobs sent to the store during this run and not yet listed by
    /// a segment in the index.
    inflight: HashSet<Id>,
    /// The blobs of the segments the store's packer writes, reported once
    /// each is indexed (None in a dry run, which writes none).
    segmented: Option<Arc<Segmented>>,
    /// Plaintext bytes of the new blobs.
    pub(super) added_plain: u64,
}

impl<'r> BlobSink<'r> {
    /// A sink sending new blobs to `store` (or nowhere, in a dry run),
    /// told by `segmented` which of them the index holds since.
    pub(super) fn new(
        repo: &'r Repository,
        store: Option<Sender<Vec<StoreItem>>>,
        segmented: Option<Arc<Segmented>>,
    ) -> Self {
        BlobSink {
            repo,
            store,
            batch: Vec::new(),
            batch_bytes: 0,
            inflight: HashSet::new(),
            segmented,
            added_plain: 0,
        }
    }

    /// Stores blob `id` (the ID of `data`, which the caller found not in
    /// the index) unless this run sent it already. With `inline`, or while
    /// the sealing workers' queue is full, a new blob is only claimed: the
    /// caller must seal it ([`Put::put`]). Returns whether it was claimed,
    /// and whether sent blobs were forgotten (as indexed) meanwhile.
    fn add(&mut self, ty: BlobType, id: Id, data: &[u8], inline: bool) -> Result<(bool, bool)> {
        if self.inflight.contains(&id) {
            return Ok((false, false));
        }
        self.inflight.insert(id);
        self.added_plain += data.len() as u64;
        let forgot = self.forget_segmented()?;
        let claimed = self.queue(ty, id, data, inline)?;
        Ok((claimed, forgot))
    }

    /// Queues new blob `id` for the store, or claims it for the caller to
    /// seal (see [`BlobSink::add`]).
    fn queue(&mut self, ty: BlobType, id: Id, data: &[u8], inline: bool) -> Result<bool> {
        let Some(tx) = &self.store else {
            return Ok(false);
        };
        // Sealed in place: a small file's chunk (no copy), and any blob
        // while the sealing workers are behind, rather than wait for them
        // (so a large file's chunks keep pace with the small files read
        // beside it, and land in the packs written meanwhile).
        if inline || tx.is_full() {
            return Ok(true);
        }
        self.batch_bytes += data.len();
        self.batch.push(StoreItem {
            ty,
            id,
            data: data.to_vec(),
        });
        if self.batch_bytes >= BATCH_BYTES || self.batch.len() >= BATCH_ITEMS {
            self.send_batch()?;
        }
        Ok(false)
    }

    /// For each list of `lists`, whether all its blobs are stored: sent by
    /// this run, or in the index (asked once for all of them, in one read
    /// transaction).
    fn all_known_each(&mut self, lists: &[&[Id]]) -> Result<Vec<bool>> {
        let ask: HashSet<Id> = lists
            .iter()
            .flat_map(|l| l.iter())
            .filter(|id| !self.inflight.contains(id))
            .copied()
            .collect();
        let ask: Vec<Id> = ask.into_iter().collect();
        let found = self.repo.index()?.contained_among(&ask)?;
        Ok(lists
            .iter()
            .map(|l| {
                l.iter()
                    .all(|id| found.contains(id) || self.inflight.contains(id))
            })
            .collect())
    }

    /// Forgets the sent blobs that segments written since list (the
    /// packer reports them once the index cache holds them), and returns
    /// whether it forgot any: keeps memory flat however much a run stores,
    /// without asking the index. The dedup views must then be renewed
    /// before they answer again ([`Views::renew_all`]).
    ///
    /// Before, the set was pruned by asking the index about each of its
    /// blobs once it passed 100,000: a cold backup of a million files of
    /// 1 KiB had 8.7 % of its samples (`perf`) in those questions, and the
    /// set grew to twice what a pruning kept.
    fn forget_segmented(&mut self) -> Result<bool> {
        let Some(segmented) = &self.segmented else {
            return Ok(false);
        };
        let ids = segmented.take()?;
        let before = self.inflight.len();
        for id in &ids {
            self.inflight.remove(id);
        }
        Ok(self.inflight.len() < before)
    }

    /// Hands the pending blobs to the store.
    pub(super) fn send_batch(&mut self) -> Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        self.batch_bytes = 0;
        let batch = std::mem::take(&mut self.batch);
        if let Some(tx) = &self.store
            && tx.send(batch).is_err()
        {
            // The store stage stopped; its error is reported on join.
            return Err(Error::internal("the storing stage stopped"));
        }
        Ok(())
    }

    /// Sends what is pending and closes the channel, so the storing stage
    /// can finish.
    pub(super) fn close(&mut self) -> Result<()> {
        let r = self.send_batch();
        self.store = None;
        r
    }
}

/// The ID of `data`; all-zero chunks (holes, zeroed images) repeat, so
/// each length of them is hashed once (remembered in `zero_ids`).
fn id_of(repo: &Repository, zero_ids: &mut HashMap<usize, Id>, ty: BlobType, data: &[u8]) -> Id {
    let zero = ty == BlobType::Data && data.len() >= 4096 && data.iter().all(|&b| b == 0);
    if !zero {
        return repo.keys().blob_id(data);
    }
    *zero_ids
        .entry(data.len())
        .or_insert_with(|| repo.keys().blob_id(data))
}

/// The index cache as this run's dedup checks see it: one [`ReadView`]
/// per thread asking at once, opened at the first check that finds none
/// free (an unchanged re-backup may make none), and kept for the run.
#[derive(Default)]
pub(super) struct Views {
    idle: Mutex<Vec<(ReadView, u64)>>,
    /// Raised when this run's sent blobs were forgotten as indexed: a view
    /// begun before must be renewed before it answers (it could miss
    /// them, and they would be stored again).
    generation: AtomicU64,
}

impl Views {
    fn idle(&self) -> Result<MutexGuard<'_, Vec<(ReadView, u64)>>> {
        self.idle
            .lock()
            .map_err(|_| Error::internal("the dedup views lock is poisoned"))
    }

    /// Whether the index holds blob `id` (see [`ReadView::contains`]),
    /// asked on a view no other thread is using.
    fn contains(&self, repo: &Repository, id: &Id) -> Result<bool> {
        self.with_view(repo, |view| view.contains(id))
    }

    /// Runs `f` on a view no other thread is using (opened if none is
    /// idle, renewed if this run's sent blobs were forgotten since).
    fn with_view<T>(
        &self,
        repo: &Repository,
        f: impl FnOnce(&mut ReadView) -> Result<T>,
    ) -> Result<T> {
        let generation = self.generation.load(Ordering::Acquire);
        let taken = self.idle()?.pop();
        let (mut view, seen) = match taken {
            Some(v) => v,
            None => (
                repo.index()?.read_view_with_cache(VIEW_CACHE_KIB)?,
                generation,
            ),
        };
        if seen != generation {
            view.renew()?;
        }
        let found = f(&mut view);
        self.idle()?.push((view, generation));
        found
    }

    /// Marks every view as to be renewed before its next answer.
    fn renew_all(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Ends the read transactions of idle views that are old (see
    /// [`ReadView::expire`]): a walk through unchanged directories asks
    /// them nothing, and they must not hold the WAL back meanwhile.
    fn expire_idle(&self) -> Result<()> {
        for (v, _) in self.idle()?.iter_mut() {
            v.expire()?;
        }
        Ok(())
    }
}

/// One sink shared by the walk and the reading workers.
pub(super) struct SharedSink<'r> {
    repo: &'r Repository,
    /// Bytes of chunks a guide proved ([`super::guide`]), counted as stored.
    guided: AtomicU64,
    sink: Mutex<BlobSink<'r>>,
    views: Views,
    /// Where new blobs claimed for sealing in place go (None in a dry run).
    store: Option<&'r dyn Put>,
}

/// A reading worker's own cache of all-zero chunk IDs.
#[derive(Default)]
pub(super) struct ZeroIds(HashMap<usize, Id>);

impl<'r> SharedSink<'r> {
    pub(super) fn new(sink: BlobSink<'r>, store: Option<&'r dyn Put>) -> Self {
        SharedSink {
            repo: sink.repo,
            guided: AtomicU64::new(0),
            sink: Mutex::new(sink),
            views: Views::default(),
            store,
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, BlobSink<'r>>> {
        self.sink
            .lock()
            .map_err(|_| Error::internal("the blob sink lock is poisoned"))
    }

    /// Stores one blob unless it is known; returns its ID. The hash is
    /// computed before the lock is taken, and the index asked outside it
    /// (after the blobs this run sent: a blob forgotten from those is in
    /// the index by then, and the views are renewed to see it). With
    /// `inline`, a new blob is sealed and packed on this thread, after the
    /// lock is released; without, it is copied to the sealing workers.
    pub(super) fn store(
        &self,
        zeros: &mut ZeroIds,
        ty: BlobType,
        data: &[u8],
        inline: bool,
    ) -> Result<Id> {
        let id = id_of(self.repo, &mut zeros.0, ty, data);
        self.store_as(ty, id, data, inline)
    }

    /// [`SharedSink::store`] for a blob whose ID `id` is already known
    /// (the caller hashed `data` with [`SharedSink::blob_id`]).
    pub(super) fn store_as(&self, ty: BlobType, id: Id, data: &[u8], inline: bool) -> Result<Id> {
        // The sink's lock is released at the end of this statement, before
        // the index is asked.
        let sent = self.lock()?.inflight.contains(&id);
        if sent || self.views.contains(self.repo, &id)? {
            return Ok(id);
        }
        let claimed = {
            let mut sink = self.lock()?;
            let (claimed, forgot) = sink.add(ty, id, data, inline)?;
            if forgot {
                // Before the lock is released: a thread that then finds a
                // forgotten blob not sent also finds its view stale.
                self.views.renew_all();
            }
            claimed
        };
        if let (true, Some(store)) = (claimed, self.store) {
            store.put(ty, id, data)?;
        }
        Ok(id)
    }

    /// Counts `n` bytes of chunks a guide proved.
    pub(super) fn note_guided(&self, n: usize) {
        self.guided.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Bytes of chunks a guide proved so far.
    pub(super) fn guided(&self) -> u64 {
        self.guided.load(Ordering::Relaxed)
    }

    /// The repository's ID of blob content `data` (its keyed hash).
    pub(super) fn blob_id(&self, data: &[u8]) -> Id {
        self.repo.keys().blob_id(data)
    }

    /// The plaintext length of each of `ids` as the index has it (`None`
    /// for a blob it does not hold), asked on one view.
    pub(super) fn plain_lens(&self, ids: &[Id]) -> Result<Vec<Option<u32>>> {
        self.views.with_view(self.repo, |view| {
            ids.iter()
                .map(|id| Ok(view.lookup(id)?.map(|loc| loc.entry.plain_len)))
                .collect()
        })
    }

    /// Whether every one of `ids` is stored (see
    /// [`BlobSink::all_known_each`]).
    pub(super) fn all_known(&self, ids: &[Id]) -> Result<bool> {
        Ok(self.all_known_each(&[ids])?.iter().all(|&k| k))
    }

    /// See [`BlobSink::all_known_each`]. The walk asks this at each
    /// directory it compares with its parent, so idle dedup views that
    /// are old end here.
    pub(super) fn all_known_each(&self, lists: &[&[Id]]) -> Result<Vec<bool>> {
        self.views.expire_idle()?;
        self.lock()?.all_known_each(lists)
    }

    /// See [`BlobSink::close`].
    pub(super) fn close(&self) -> Result<()> {
        self.lock()?.close()
    }

    /// Plaintext bytes of the new blobs so far.
    pub(super) fn added_plain(&self) -> Result<u64> {
        Ok(self.lock()?.added_plain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::reader::RENEW;
    use crate::packer::Packer;
    use crate::repository::test_repository;
    use std::time::Instant;

    /// A dedup view answers from its read transaction: a blob indexed
    /// after the view began is found once [`Views::renew_all`] has been
    /// called (as after this run's sent blobs were forgotten as indexed),
    /// and missed before that while the view is younger than [`RENEW`].
    #[test]
    fn dedup_views_see_what_was_indexed_since_after_renew_all() {
        let d = tempfile::tempdir().unwrap();
        let repo = test_repository(d.path());
        let views = Views::default();
        let data = b"a blob that is not in the index yet".repeat(50);
        let id = repo.keys().blob_id(&data);
        let began = Instant::now();
        assert!(!views.contains(&repo, &id).unwrap());
        let mut p = Packer::new(&repo).unwrap();
        assert!(p.add(BlobType::Data, &data).unwrap().1);
        p.finish().unwrap();
        assert!(repo.index().unwrap().contains(&id).unwrap());
        let stale = views.contains(&repo, &id).unwrap();
        if began.elapsed() < RENEW {
            assert!(!stale, "the view answered from a new transaction");
        }
        views.renew_all();
        assert!(views.contains(&repo, &id).unwrap());
        // One view served every question, one thread at a time.
        assert_eq!(views.idle().unwrap().len(), 1);
    }

    /// The sent blobs are forgotten exactly when a segment of the store's
    /// packer lists them, without asking the index, and only then does
    /// `add` say that it forgot some (so the views are renewed). Blobs
    /// still waiting for their segment stay, however many there are.
    #[test]
    fn sent_blobs_are_forgotten_once_a_segment_lists_them() {
        let d = tempfile::tempdir().unwrap();
        let repo = test_repository(d.path());
        let segmented = Arc::new(Segmented::default());
        let mut sink = BlobSink::new(&repo, None, Some(segmented.clone()));
        let data = |n: u32| format!("blob {n}").into_bytes();
        let id = |n: u32| repo.keys().blob_id(&data(n));
        for n in 0..1000 {
            let (_, forgot) = sink.add(BlobType::Data, id(n), &data(n), false).unwrap();
            assert!(!forgot, "no segment was written, so nothing was forgotten");
        }
        assert_eq!(sink.inflight.len(), 1000);
        // A blob sent again is not sent twice.
        assert_eq!(
            sink.add(BlobType::Data, id(7), &data(7), false).unwrap(),
            (false, false)
        );

        // The first 500 go into packs whose segment the packer writes.
        let mut p = Packer::new(&repo).unwrap();
        p.report_segments_to(segmented.clone());
        for n in 0..500 {
            p.add(BlobType::Data, &data(n)).unwrap();
        }
        p.finish().unwrap();
        // A packer that reports nowhere changes nothing here.
        let mut other = Packer::new(&repo).unwrap();
        other.add(BlobType::Data, &data(600)).unwrap();
        other.finish().unwrap();
        assert!(repo.index().unwrap().contains(&id(600)).unwrap());

        let (claimed, forgot) = sink
            .add(BlobType::Data, id(1000), &data(1000), false)
            .unwrap();
        assert!(!claimed, "a dry run's sink claims nothing");
        assert!(forgot, "the segment's blobs were not forgotten");
        assert_eq!(sink.inflight.len(), 501);
        assert!((0..500).all(|n| !sink.inflight.contains(&id(n))));
        assert!((500..=1000).all(|n| sink.inflight.contains(&id(n))));
        assert!((0..500).all(|n| repo.index().unwrap().contains(&id(n)).unwrap()));
        // Reported once: the next blob forgets nothing.
        let (_, forgot) = sink
            .add(BlobType::Data, id(1001), &data(1001), false)
            .unwrap();
        assert!(!forgot);
    }
}
