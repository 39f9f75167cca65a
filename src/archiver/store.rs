//! The storing stage of the backup pipeline: new blobs arrive on a bounded
//! channel from the walking/reading thread, are compressed and sealed in
//! parallel on the rayon pool (one zstd context per worker), and appended to
//! packs by this stage's thread, which owns the [`Packer`]. The bounded
//! channel keeps memory flat: the reader waits when sealing falls behind.

use crate::error::{Error, Result};
use crate::id::Id;
use crate::pack::{self, BlobType, PreparedBlob};
use crate::repository::{PackerStats, Repository};
use rayon::prelude::*;
use std::cell::RefCell;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::{Scope, ScopedJoinHandle};

/// Blobs waiting in the channel (each at most one max-size chunk).
const CHANNEL_ITEMS: usize = 32;
/// A batch handed to the pool at once.
const BATCH_ITEMS: usize = 16;
const BATCH_BYTES: usize = 8 << 20;

/// One blob to store.
pub struct StoreItem {
    pub ty: BlobType,
    pub id: Id,
    pub data: Vec<u8>,
}

thread_local! {
    static COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> = const { RefCell::new(None) };
}

/// Compresses (unless level 0 for data) and seals one blob on this thread's
/// reused zstd context.
pub fn prepare(repo: &Repository, item: &StoreItem) -> Result<PreparedBlob> {
    let level = repo.config().compression_level;
    let compress = level != 0 || item.ty == BlobType::Tree;
    let level = if level == 0 { 3 } else { level };
    COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        if c.as_ref().is_none_or(|(l, _)| *l != level) {
            let z = zstd::bulk::Compressor::new(level)
                .map_err(|e| Error::Usage(format!("zstd level {level}: {e}")))?;
            *c = Some((level, z));
        }
        let comp = if compress {
            c.as_mut().map(|(_, z)| z)
        } else {
            None
        };
        pack::prepare_blob(repo.keys(), comp, item.ty, item.id, &item.data)
    })
}

/// Starts the stage inside `scope`. Send blobs on the returned sender; drop
/// it and join the handle to flush the last pack and index segment.
pub fn spawn<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    repo: &'env Repository,
) -> (
    SyncSender<StoreItem>,
    ScopedJoinHandle<'scope, Result<PackerStats>>,
) {
    let (tx, rx) = sync_channel::<StoreItem>(CHANNEL_ITEMS);
    let handle = scope.spawn(move || run(repo, rx));
    (tx, handle)
}

fn run(repo: &Repository, rx: Receiver<StoreItem>) -> Result<PackerStats> {
    let mut packer = repo.packer()?;
    while let Ok(first) = rx.recv() {
        let mut bytes = first.data.len();
        let mut batch = vec![first];
        while batch.len() < BATCH_ITEMS && bytes < BATCH_BYTES {
            match rx.try_recv() {
                Ok(i) => {
                    bytes += i.data.len();
                    batch.push(i);
                }
                Err(_) => break,
            }
        }
        let prepared: Vec<Result<PreparedBlob>> = if batch.len() == 1 {
            vec![prepare(repo, &batch[0])]
        } else {
            batch.par_iter().map(|i| prepare(repo, i)).collect()
        };
        for p in prepared {
            packer.add_prepared(p?)?;
        }
    }
    packer.finish()
}
