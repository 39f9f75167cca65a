//! Deduplication of new blobs: each chunk or tree is hashed with the keyed
//! ID function, checked against the blobs this run already sent and the
//! index, and only new ones go on to the storing stage, in batches of about
//! 1 MiB so the channel is touched once per batch rather than once per small
//! file. The reading workers share one sink ([`SharedSink`]): each hashes
//! its chunks on its own thread and holds the lock only to check and queue
//! the ID. The checks go to the index cache on a connection of their own
//! ([`ReadView`]), many to a read transaction. A new chunk of a small
//! file is then sealed by the worker that read it, outside the lock
//! ([`Put::put`]); see [`super::store`].

use super::store::{Put, StoreItem};
use crate::error::{Error, Result};
use crate::id::Id;
use crate::index::ReadView;
use crate::pack::BlobType;
use crate::repository::Repository;
use crossbeam_channel::Sender;
use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

/// A batch of new blobs goes to the store once it holds this many bytes
/// or items.
const BATCH_BYTES: usize = 1 << 20;
const BATCH_ITEMS: usize = 64;

/// Blobs remembered as sent before the set is pruned against the index.
const INFLIGHT_LIMIT: usize = 100_000;

/// Where the walk hands its chunks and trees.
pub(super) struct BlobSink<'r> {
    repo: &'r Repository,
    /// The storing stage (None in a dry run).
    store: Option<Sender<Vec<StoreItem>>>,
    /// New blobs not yet handed to the store.
    batch: Vec<StoreItem>,
    batch_bytes: usize,
    /// New blobs sent to the store during this run.
    inflight: HashSet<Id>,
    /// The index cache, as this run's dedup checks see it (opened at the
    /// first check: an unchanged re-backup may make none).
    reader: Option<ReadView>,
    /// Plaintext bytes of the new blobs.
    pub(super) added_plain: u64,
}

impl<'r> BlobSink<'r> {
    /// A sink sending new blobs to `store` (or nowhere, in a dry run).
    pub(super) fn new(repo: &'r Repository, store: Option<Sender<Vec<StoreItem>>>) -> Self {
        BlobSink {
            repo,
            store,
            batch: Vec::new(),
            batch_bytes: 0,
            inflight: HashSet::new(),
            reader: None,
            added_plain: 0,
        }
    }

    /// Stores blob `id` (the ID of `data`) unless it is known. With
    /// `inline`, or while the sealing workers' queue is full, a new blob is
    /// only claimed: the caller must seal it ([`Put::put`]); returns
    /// whether it was.
    fn add(&mut self, ty: BlobType, id: Id, data: &[u8], inline: bool) -> Result<bool> {
        if self.inflight.contains(&id) || self.indexed(&id)? {
            return Ok(false);
        }
        self.inflight.insert(id);
        self.added_plain += data.len() as u64;
        if self.inflight.len() > INFLIGHT_LIMIT {
            self.forget_indexed()?;
        }
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
        // A walk through unchanged directories asks the reader nothing:
        // its view, if old, is ended here rather than left open.
        if let Some(r) = &mut self.reader {
            r.expire()?;
        }
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

    /// Forgets the sent blobs that have reached the index since: keeps
    /// memory flat however much a run stores.
    fn forget_indexed(&mut self) -> Result<()> {
        let index = self.repo.index()?;
        let mut keep = HashSet::new();
        for i in self.inflight.drain() {
            if !index.contains(&i)? {
                keep.insert(i);
            }
        }
        drop(index);
        self.inflight = keep;
        // The blobs just forgotten are in the index: the next check must
        // see it as it is now.
        match &mut self.reader {
            Some(r) => r.renew(),
            None => Ok(()),
        }
    }

    /// Whether the index holds blob `id` (see [`ReadView::contains`]).
    fn indexed(&mut self, id: &Id) -> Result<bool> {
        let reader = match &mut self.reader {
            Some(r) => r,
            None => self.reader.insert(self.repo.index()?.read_view()?),
        };
        reader.contains(id)
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

/// One sink shared by the walk and the reading workers.
pub(super) struct SharedSink<'r> {
    repo: &'r Repository,
    sink: Mutex<BlobSink<'r>>,
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
            sink: Mutex::new(sink),
            store,
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, BlobSink<'r>>> {
        self.sink
            .lock()
            .map_err(|_| Error::internal("the blob sink lock is poisoned"))
    }

    /// Stores one blob unless it is known; returns its ID. The hash is
    /// computed before the lock is taken. With `inline`, a new blob is
    /// sealed and packed on this thread, after the lock is released;
    /// without, it is copied to the sealing workers.
    pub(super) fn store(
        &self,
        zeros: &mut ZeroIds,
        ty: BlobType,
        data: &[u8],
        inline: bool,
    ) -> Result<Id> {
        let id = id_of(self.repo, &mut zeros.0, ty, data);
        let claimed = self.lock()?.add(ty, id, data, inline)?;
        if let (true, Some(store)) = (claimed, self.store) {
            store.put(ty, id, data)?;
        }
        Ok(id)
    }

    /// Whether every one of `ids` is stored (see
    /// [`BlobSink::all_known_each`]).
    pub(super) fn all_known(&self, ids: &[Id]) -> Result<bool> {
        Ok(self.all_known_each(&[ids])?.iter().all(|&k| k))
    }

    /// See [`BlobSink::all_known_each`].
    pub(super) fn all_known_each(&self, lists: &[&[Id]]) -> Result<Vec<bool>> {
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
