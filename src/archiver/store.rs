//! The storing stage of the backup pipeline: new blobs arrive on a bounded
//! channel from the walking/reading thread, are compressed and sealed in
//! parallel by one worker thread per core (each with its own zstd context),
//! and appended to packs by the packer thread, which owns the [`Packer`]. The bounded
//! channel keeps memory flat: the reader waits when sealing falls behind.

use crate::error::Result;
use crate::id::Id;
use crate::pack::{BlobType, PreparedBlob};
use crate::repository::{PackerStats, Repository};
use crossbeam_channel::{Receiver, Sender, bounded};
use std::thread::{Scope, ScopedJoinHandle};

/// Blobs waiting in the channel (each at most one max-size chunk).
const CHANNEL_ITEMS: usize = 32;

/// One blob to store.
pub struct StoreItem {
    pub ty: BlobType,
    pub id: Id,
    pub data: Vec<u8>,
}

/// Compresses and seals one blob (see [`crate::packer::seal_blob`]).
pub fn prepare(repo: &Repository, item: &StoreItem) -> Result<PreparedBlob> {
    crate::packer::seal_blob(repo, item.ty, item.id, &item.data)
}

/// Starts the stage inside `scope`. Send blobs on the returned sender; drop
/// it and join the handle to flush the last pack and index segment.
///
/// One sealing worker per core takes blobs as it becomes free (no batch
/// barrier, so one large chunk never idles the other core) and hands sealed
/// blobs to the packer thread in whatever order they finish: order within
/// packs does not matter.
pub fn spawn<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    repo: &'env Repository,
) -> (
    Sender<StoreItem>,
    ScopedJoinHandle<'scope, Result<PackerStats>>,
) {
    let (tx, rx) = bounded::<StoreItem>(CHANNEL_ITEMS);
    let (sealed_tx, sealed_rx) = bounded::<Result<PreparedBlob>>(CHANNEL_ITEMS);
    let workers = std::env::var("LARDER_SEAL_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(2)
        .clamp(1, 64);
    for _ in 0..workers {
        let (rx, sealed_tx) = (rx.clone(), sealed_tx.clone());
        scope.spawn(move || {
            for item in rx {
                // A closed channel means the packer failed; stop quietly,
                // the packer's error is what gets reported.
                if sealed_tx.send(prepare(repo, &item)).is_err() {
                    return;
                }
            }
        });
    }
    drop(sealed_tx);
    let handle = scope.spawn(move || pack_loop(repo, sealed_rx));
    (tx, handle)
}

fn pack_loop(repo: &Repository, rx: Receiver<Result<PreparedBlob>>) -> Result<PackerStats> {
    let mut packer = repo.packer()?;
    for b in rx {
        packer.add_prepared(b?)?;
    }
    packer.finish()
}
