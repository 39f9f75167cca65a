//! Planning the reads of one batch of files: every chunk is looked up in
//! the index (in one read transaction), grouped by pack and by offset, so a
//! blob shared by many files is read once, and neighbouring blobs of a pack
//! are coalesced into reads of at most [`MAX_READ`] bytes (on remote
//! storage, where a round trip costs more than the bytes it skips, reads
//! span wider gaps and up to [`REMOTE_MAX_READ`] bytes, so a pack is
//! usually fetched in one request).

use super::source::PackSource;
use super::target::FileJob;
use crate::error::Result;
use crate::id::Id;
use crate::index::BlobLocation;
use crate::repository::Repository;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Two blobs closer than this in a pack are fetched in one read.
const COALESCE_GAP: u64 = 256 << 10;
/// Largest single read from a pack.
const MAX_READ: u64 = 4 << 20;
/// On remote storage: blobs closer than this are fetched in one request.
const REMOTE_COALESCE_GAP: u64 = 8 << 20;
/// On remote storage: the largest single read (a whole pack of the default
/// size, with room to spare).
const REMOTE_MAX_READ: u64 = 32 << 20;

/// One blob to open, and every place it goes: (file index, offset).
pub(super) struct BlobTargets {
    pub(super) loc: BlobLocation,
    pub(super) targets: Vec<(usize, u64)>,
}

/// One read of a pack region and the blobs in it.
pub(super) struct PackRead {
    pub(super) pack: Id,
    pub(super) start: u64,
    pub(super) end: u64,
    /// The pack's recorded size (looked up only for remote storage).
    pub(super) pack_size: Option<u64>,
    pub(super) blobs: Vec<BlobTargets>,
}

/// The first failure of each file of a batch, set from any thread.
pub(super) struct Failures(Vec<Mutex<Option<String>>>);

impl Failures {
    pub(super) fn new(n: usize) -> Self {
        Failures((0..n).map(|_| Mutex::new(None)).collect())
    }

    /// Records `msg` as file `j`'s failure unless it already has one.
    pub(super) fn set(&self, j: usize, msg: String) {
        if let Ok(mut g) = self.0[j].lock()
            && g.is_none()
        {
            *g = Some(msg);
        }
    }

    /// Whether file `j` has not failed.
    pub(super) fn is_ok(&self, j: usize) -> bool {
        self.0[j].lock().map(|g| g.is_none()).unwrap_or(false)
    }

    pub(super) fn into_inner(self) -> Vec<Option<String>> {
        self.0
            .into_iter()
            .map(|m| m.into_inner().ok().flatten())
            .collect()
    }
}

/// Per pack: blob offset → the blob and where it goes.
type PackPlan = BTreeMap<Id, BTreeMap<u64, BlobTargets>>;

/// The reads that fill `jobs`. A file whose chunk is not in the index, or
/// whose chunks do not add up to its size, is marked failed in `failures`.
pub(super) fn plan_reads(
    repo: &Repository,
    source: &PackSource<'_>,
    jobs: &[FileJob],
    failures: &Failures,
) -> Result<Vec<PackRead>> {
    let ids: Vec<Id> = jobs
        .iter()
        .flat_map(|j| j.node.content.iter().copied())
        .collect();
    let locs = repo.lookup_many(&ids)?;
    let mut plan: PackPlan = BTreeMap::new();
    let mut next = locs.into_iter();
    for (j, job) in jobs.iter().enumerate() {
        let mine: Vec<Option<BlobLocation>> = next.by_ref().take(job.node.content.len()).collect();
        let mut off = 0u64;
        for (c, loc) in job.node.content.iter().zip(mine) {
            let Some(loc) = loc else {
                failures.set(j, format!("data blob {c} is missing from the repository"));
                break;
            };
            plan.entry(loc.pack)
                .or_default()
                .entry(loc.entry.offset)
                .or_insert_with(|| BlobTargets {
                    loc,
                    targets: Vec::new(),
                })
                .targets
                .push((j, off));
            off += loc.entry.plain_len as u64;
        }
        if off != job.node.size && failures.is_ok(j) {
            failures.set(
                j,
                format!(
                    "chunks add up to {off} bytes, the file has {}",
                    job.node.size
                ),
            );
        }
    }
    if !source.remote() {
        return Ok(coalesce(plan, COALESCE_GAP, MAX_READ));
    }
    let mut reads = coalesce(plan, REMOTE_COALESCE_GAP, REMOTE_MAX_READ);
    let index = repo.index()?;
    for r in &mut reads {
        r.pack_size = index.pack_size(&r.pack)?;
    }
    Ok(reads)
}

/// Cuts each pack's blobs (in offset order) into reads: a new read starts
/// at a gap wider than `gap` or when a read would pass `max_read` bytes.
fn coalesce(plan: PackPlan, gap: u64, max_read: u64) -> Vec<PackRead> {
    let mut reads = Vec::new();
    for (pack, blobs) in plan {
        let mut cur: Vec<BlobTargets> = Vec::new();
        let (mut start, mut end) = (0u64, 0u64);
        for (_, b) in blobs {
            let e = &b.loc.entry;
            let next_end = e.offset + e.stored_len as u64;
            if !cur.is_empty() && (e.offset > end + gap || next_end - start > max_read) {
                reads.push(PackRead {
                    pack,
                    start,
                    end,
                    pack_size: None,
                    blobs: std::mem::take(&mut cur),
                });
            }
            if cur.is_empty() {
                start = e.offset;
                end = next_end;
            }
            end = end.max(next_end);
            cur.push(b);
        }
        if !cur.is_empty() {
            reads.push(PackRead {
                pack,
                start,
                end,
                pack_size: None,
                blobs: cur,
            });
        }
    }
    reads
}
