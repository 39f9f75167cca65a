//! The storing stage of the backup pipeline: compress, seal and append new
//! blobs to the pack being filled ([`Store`], one [`Packer`] behind a
//! mutex, held only to append a sealed blob).
//!
//! A reading worker that finds a chunk of a small file new seals it on its
//! own thread ([`Put::put`]), straight from its read buffer: no copy, no
//! hop, and the bytes it has just hashed are still in its cache. Chunks of
//! large files and tree blobs are copied into batches on a bounded channel
//! instead, which one sealing worker per core drains ([`spawn`]), so that
//! one large file still keeps every core busy. The bounded channel keeps
//! memory flat: the sender waits when sealing falls behind.
//!
//! In a repository without a compression dictionary, the first data blobs
//! are also sampled; the one whose blob completes the sample trains the
//! dictionary and writes it, and data blobs sealed after that use it (see
//! [`crate::dictionary`]).

use super::blobs::{BlobSink, SharedSink};
use crate::dictionary::{self, SAMPLE_BUDGET, Sampler};
use crate::error::{Error, Result};
use crate::id::Id;
use crate::lock::LockHandle;
use crate::pack::BlobType;
use crate::packer::{Packer, PackerStats, Segmented, seal_blob};
use crate::repository::Repository;
use crossbeam_channel::{Sender, bounded};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{Scope, ScopedJoinHandle};

/// Batches waiting in the channel (each about 1 MiB: see the archiver).
/// Sealing (zstd) is the slowest stage of a cold backup, so the channel
/// stays full: with 8 the backup of the benchmark tree peaked at 51–57 MiB
/// RSS, with 2 at 44–48 MiB, at the same speed (10 interleaved runs each).
const CHANNEL_BATCHES: usize = 2;

/// One blob to store.
pub struct StoreItem {
    pub ty: BlobType,
    pub id: Id,
    pub data: Vec<u8>,
}

/// Where new blobs are sealed and packed, from any thread.
pub struct Store<'r> {
    repo: &'r Repository,
    packer: Mutex<Packer<'r>>,
    sampler: Sampler,
    /// Set by the first failure: the sealing workers stop.
    failed: AtomicBool,
}

impl<'r> Store<'r> {
    /// A store for `repo`, writing under the run's `lock`.
    pub fn new(repo: &'r Repository, lock: Option<LockHandle>) -> Result<Store<'r>> {
        Ok(Store {
            repo,
            packer: Mutex::new(Packer::with_lock(repo, lock)?),
            sampler: Sampler::new(sample_budget(repo)),
            failed: AtomicBool::new(false),
        })
    }

    /// The blobs of the segments the packer writes from now on, reported
    /// as each is indexed ([`crate::packer::Segmented`]).
    pub fn segmented(&self) -> Result<Arc<Segmented>> {
        let to = Arc::new(Segmented::default());
        self.packer
            .lock()
            .map_err(|_| Error::internal("packer lock poisoned"))?
            .report_segments_to(to.clone());
        Ok(to)
    }

    /// Flushes the last pack and index segment; returns what was stored.
    pub fn finish(self) -> Result<PackerStats> {
        self.packer
            .into_inner()
            .map_err(|_| Error::internal("packer lock poisoned"))?
            .finish()
    }
}

/// Sealing and packing one new blob, from any thread: what a [`Store`]
/// does. The blob sink holds it as this trait, borrowed for less than the
/// store's own lifetime, so that the store can be finished once the walk
/// is done.
pub trait Put: Sync {
    /// Compresses and seals blob `id` (the ID of `data`), offers it to the
    /// dictionary's sampler and appends it to the pack being filled. The
    /// caller has made sure no other thread stores the same blob.
    fn put(&self, ty: BlobType, id: Id, data: &[u8]) -> Result<()>;
}

impl Put for Store<'_> {
    fn put(&self, ty: BlobType, id: Id, data: &[u8]) -> Result<()> {
        let r = seal_blob(self.repo, ty, id, data)
            .and_then(|b| learn(self.repo, &self.sampler, ty, data, b.compression).map(|_| b))
            .and_then(|b| {
                self.packer
                    .lock()
                    .map_err(|_| Error::internal("packer lock poisoned"))?
                    .add_prepared(b)
            });
        if r.is_err() {
            self.failed.store(true, Ordering::Relaxed);
        }
        r.map(|_| ())
    }
}

/// Starts the sealing workers inside `scope`, storing into `store`. Send
/// batches on the returned sender; drop it and [`Workers::join`] once all
/// are sent, then [`Store::finish`].
///
/// One worker per core takes blobs as it becomes free (no batch barrier, so
/// one large chunk never idles the other core) and appends them to the
/// shared packer in whatever order they finish: order within packs does not
/// matter. The first error stops every worker (the sender then fails) and is
/// what the join returns.
pub fn spawn<'scope, 'env, 'r: 'env>(
    scope: &'scope Scope<'scope, 'env>,
    store: &'env Store<'r>,
) -> (Sender<Vec<StoreItem>>, Workers<'scope>) {
    let (tx, rx) = bounded::<Vec<StoreItem>>(CHANNEL_BATCHES);
    let workers = std::env::var("LARDER_SEAL_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(2)
        .clamp(1, 64);
    let handles = (0..workers)
        .map(|_| {
            let rx = rx.clone();
            scope.spawn(move || -> Result<()> {
                for item in rx.iter().flatten() {
                    if store.failed.load(Ordering::Relaxed) {
                        break;
                    }
                    store.put(item.ty, item.id, &item.data)?;
                }
                Ok(())
            })
        })
        .collect();
    (tx, Workers(handles))
}

/// The sink a run's blobs go to and the sealing workers of `store` that
/// it feeds (none in a dry run, whose blobs are only hashed and looked
/// up). Drop the sink, then [`Workers::join`], then [`Store::finish`].
pub(super) fn sink_and_workers<'scope, 'env, 'r: 'env>(
    scope: &'scope Scope<'scope, 'env>,
    repo: &'env Repository,
    store: Option<&'env Store<'r>>,
    segmented: Option<Arc<Segmented>>,
) -> (SharedSink<'env>, Option<Workers<'scope>>) {
    let (tx, workers) = match store {
        None => (None, None),
        Some(st) => {
            let (tx, w) = spawn(scope, st);
            (Some(tx), Some(w))
        }
    };
    let sink = SharedSink::new(
        BlobSink::new(repo, tx, segmented),
        store.map(|s| s as &dyn Put),
    );
    (sink, workers)
}

/// The sealing workers of one run.
pub struct Workers<'scope>(Vec<ScopedJoinHandle<'scope, Result<()>>>);

impl Workers<'_> {
    /// Waits for every worker (the sender must be dropped first); the first
    /// error, if any.
    pub fn join(self) -> Result<()> {
        let mut first = Ok(());
        for h in self.0 {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(Error::internal("a sealing worker panicked")));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

/// How many bytes of samples this run collects before training a
/// dictionary: none when data blobs are stored raw; otherwise
/// [`SAMPLE_BUDGET`] (`LARDER_DICT_SAMPLES` overrides it, `0` turning
/// training off: for tests and measurements).
fn sample_budget(repo: &Repository) -> usize {
    if repo.compression_level() == 0 {
        return 0;
    }
    std::env::var("LARDER_DICT_SAMPLES")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(SAMPLE_BUDGET)
}

/// Offers a sealed data blob to the sampler if it was compressed without a
/// dictionary (`compression` 1: the blob is not incompressible data a
/// dictionary cannot help, and either none is in use or the blob is
/// binary, which the sampler refuses, so a run that has a dictionary
/// never trains another); the blob that completes the sample trains the
/// dictionary here and writes it to the repository. Too little to learn
/// from leaves the run without one.
fn learn(
    repo: &Repository,
    sampler: &Sampler,
    ty: BlobType,
    plain: &[u8],
    compression: u8,
) -> Result<()> {
    if ty != BlobType::Data || compression != 1 {
        return Ok(());
    }
    if let Some((data, sizes)) = sampler.offer(plain)
        && let Some(zstd) = dictionary::train(&data, &sizes)
    {
        repo.add_dictionary(zstd)?;
    }
    Ok(())
}
