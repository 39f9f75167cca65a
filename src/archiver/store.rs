//! The storing stage of the backup pipeline: new blobs arrive on a bounded
//! channel from the walking/reading thread and are compressed, sealed and
//! appended to the pack being filled by one worker thread per core (each
//! with its own zstd context). The workers share the [`Packer`] behind a
//! mutex, held only to append a sealed blob, so no thread hop sits between
//! sealing and packing. The bounded channel keeps memory flat: the reader
//! waits when sealing falls behind.
//!
//! In a repository without a compression dictionary, the workers also
//! sample the first data blobs; the one whose blob completes the sample
//! trains the dictionary and writes it, and data blobs sealed after that
//! use it (see [`crate::dictionary`]).

use crate::dictionary::{self, SAMPLE_BUDGET, Sampler};
use crate::error::{Error, Result};
use crate::id::Id;
use crate::lock::LockHandle;
use crate::pack::BlobType;
use crate::packer::{Packer, PackerStats, seal_blob};
use crate::repository::Repository;
use crossbeam_channel::{Sender, bounded};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// Starts the stage inside `scope`. Send blobs on the returned sender; drop
/// it and join the handle to flush the last pack and index segment.
///
/// One worker per core takes blobs as it becomes free (no batch barrier, so
/// one large chunk never idles the other core) and appends them to the
/// shared packer in whatever order they finish: order within packs does not
/// matter. The first error stops every worker (the sender then fails) and is
/// what the handle returns.
pub fn spawn<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    repo: &'env Repository,
    lock: Option<LockHandle>,
) -> (
    Sender<Vec<StoreItem>>,
    ScopedJoinHandle<'scope, Result<PackerStats>>,
) {
    let (tx, rx) = bounded::<Vec<StoreItem>>(CHANNEL_BATCHES);
    let workers = std::env::var("LARDER_SEAL_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(2)
        .clamp(1, 64);
    let handle = scope.spawn(move || -> Result<PackerStats> {
        let packer = Mutex::new(Packer::with_lock(repo, lock)?);
        let sampler = Sampler::new(sample_budget(repo));
        let sampler = &sampler;
        let failed = AtomicBool::new(false);
        let first_error = std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    let (rx, packer, failed) = (rx.clone(), &packer, &failed);
                    s.spawn(move || -> Result<()> {
                        for item in rx.iter().flatten() {
                            if failed.load(Ordering::Relaxed) {
                                break;
                            }
                            let r = seal_blob(repo, item.ty, item.id, &item.data)
                                .and_then(|b| learn(repo, sampler, &item, b.compression).map(|_| b))
                                .and_then(|b| {
                                    packer
                                        .lock()
                                        .map_err(|_| Error::internal("packer lock poisoned"))?
                                        .add_prepared(b)
                                });
                            if let Err(e) = r {
                                failed.store(true, Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                        Ok(())
                    })
                })
                .collect();
            drop(rx);
            let mut first = None;
            for h in handles {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(Error::internal("a sealing worker panicked")));
                if let (Err(e), None) = (r, &first) {
                    first = Some(e);
                }
            }
            first
        });
        if let Some(e) = first_error {
            return Err(e);
        }
        packer
            .into_inner()
            .map_err(|_| Error::internal("packer lock poisoned"))?
            .finish()
    });
    (tx, handle)
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
/// dictionary (`compression` 1: so none is in use, and the blob is not
/// incompressible data a dictionary cannot help); the blob that completes
/// the sample trains the dictionary here and writes it to the repository.
/// Too little to learn from leaves the run without one.
fn learn(repo: &Repository, sampler: &Sampler, item: &StoreItem, compression: u8) -> Result<()> {
    if item.ty != BlobType::Data || compression != 1 {
        return Ok(());
    }
    if let Some((data, sizes)) = sampler.offer(&item.data)
        && let Some(zstd) = dictionary::train(&data, &sizes)
    {
        repo.add_dictionary(zstd)?;
    }
    Ok(())
}
