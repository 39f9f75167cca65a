//! `copy`: snapshots from one repository into another, without the source
//! files. Blob IDs are keyed per repository (the ID key and the chunker's
//! gear table derive from each repository's master key), so a file's
//! content is re-chunked with the destination's chunker: its source
//! chunks are read and verified in order, streamed through the
//! destination's chunker, and each new chunk stored unless the
//! destination already has it; trees are rewritten bottom-up with the new
//! IDs (a source tree met twice in one run is rewritten once).
//!
//! When the destination was made with `init --copy-chunker-params
//! --from-repo` (it shares the source's master key, so blob IDs and chunk
//! boundaries agree: [`shares_ids`]), blobs are copied as they are: each
//! one the destination lacks is read, verified and stored again under the
//! same ID (decrypted and re-encrypted with a fresh nonce), and trees keep
//! their IDs.
//!
//! The destination is written as a backup writes it: under a shared lock,
//! through the normal packer (packs, then an index segment), with the
//! snapshot saved last. Packs a killed copy left without a segment are
//! adopted by the next run, as a backup adopts them. A snapshot is skipped
//! when the destination already has one with the same time, host, user
//! and paths (an earlier copy of it, or the original): looked for when the
//! copy starts, and again under the snapshot-changing lock
//! ([`Repository::lock_snapshots`]) that saving the new snapshots takes, so
//! two copies of the same snapshots at once save each of them once.
//!
//! Progress ([`copy_with_progress`]) counts the files of the trees copied
//! (each distinct tree once, as the copy visits them) and their sizes, against
//! totals from a scan of the same trees that runs beside the copy.

use crate::chunker::Chunker;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::pack::BlobType;
use crate::packer::Packer;
use crate::progress::{NoProgress, Progress};
use crate::repository::Repository;
use crate::snapshot::{self, Filter, Snapshot};
use crate::tree::{NodeKind, Tree};
use serde::Serialize;
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Read;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};

/// One snapshot copied.
#[derive(Debug, Clone, Serialize)]
pub struct Copied {
    pub source: String,
    pub target: String,
}

/// One snapshot left alone because the destination has it.
#[derive(Debug, Clone, Serialize)]
pub struct AlreadyThere {
    pub source: String,
    pub target: String,
}

/// What a copy did.
#[derive(Debug, Default, Serialize)]
pub struct CopyReport {
    pub copied: Vec<Copied>,
    pub skipped: Vec<AlreadyThere>,
    /// Blobs the destination did not have.
    pub blobs_added: u64,
    /// Bytes stored for them (after compression).
    pub bytes_added: u64,
    /// Bytes of file content read from the source.
    pub bytes_read: u64,
}

/// The identity of a snapshot across repositories.
fn same_origin(a: &Snapshot, b: &Snapshot) -> bool {
    a.time_ns == b.time_ns
        && a.hostname == b.hostname
        && a.username == b.username
        && a.paths == b.paths
}

/// Copies `snaps` (from `src`) into `dst`, skipping those `dst` has.
pub fn copy(src: &Repository, dst: &Repository, snaps: &[(Id, Snapshot)]) -> Result<CopyReport> {
    copy_with_progress(src, dst, snaps, &NoProgress)
}

/// [`copy`], telling `progress` each file of the trees copied (with its
/// size) and, when it wants them, the totals of a scan beside the copy.
pub fn copy_with_progress(
    src: &Repository,
    dst: &Repository,
    snaps: &[(Id, Snapshot)],
    progress: &dyn Progress,
) -> Result<CopyReport> {
    let _src_lock = src.lock_for_reading()?;
    let lock = dst.lock_shared()?;
    dst.sync_index()?;
    lock.check()?;
    dst.index_orphan_packs()?;
    let (existing, _) = snapshot::list(dst, &Filter::default())?;
    let mut report = CopyReport::default();
    let mut todo = Vec::new();
    for (id, s) in snaps {
        match existing.iter().find(|(_, e)| same_origin(e, s)) {
            Some((eid, _)) => report.skipped.push(AlreadyThere {
                source: id.to_hex(),
                target: eid.to_hex(),
            }),
            None => todo.push((id, s)),
        }
    }
    if todo.is_empty() {
        progress.totals(0, 0, true);
        return Ok(report);
    }
    let mut c = Copier {
        src,
        packer: Packer::with_lock(dst, Some(lock.handle()))?,
        chunker: dst.chunker()?,
        shared: shares_ids(src, dst),
        trees: HashMap::new(),
        buf: Vec::new(),
        bytes_read: 0,
        progress,
        depth: 0,
    };
    let roots: Vec<Id> = todo.iter().map(|(_, s)| s.tree).collect();
    let stop = AtomicBool::new(false);
    let new_snaps = std::thread::scope(|scope| {
        if progress.wants_totals() {
            let (roots, stop) = (&roots, &stop);
            scope.spawn(move || crate::walker::count_files(src, roots, true, stop, progress));
        }
        let copied = c.snapshots(todo);
        // A copy that failed stops the scan; one that finished lets it
        // end (it reads only trees, which the copy read too), so the last
        // totals told are whole.
        if copied.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        copied
    })?;
    report.bytes_read = c.bytes_read;
    let stats = c.packer.finish()?;
    report.blobs_added = stats.blobs_added;
    report.bytes_added = stats.bytes_added_stored;
    // Under the lock no other snapshot-changing command shares (another
    // copy of the same snapshots, a forget), the snapshots the other
    // copy saved while this one copied data are found, and not saved
    // twice. The data copied for them is left for prune.
    let changing = dst.lock_snapshots()?;
    let (existing, _) = snapshot::list(dst, &Filter::default())?;
    for (id, s) in new_snaps {
        lock.check()?;
        changing.check()?;
        if let Some((eid, _)) = existing.iter().find(|(_, e)| same_origin(e, &s)) {
            report.skipped.push(AlreadyThere {
                source: id.to_hex(),
                target: eid.to_hex(),
            });
            continue;
        }
        let nid = snapshot::save(dst, &s)?;
        report.copied.push(Copied {
            source: id.to_hex(),
            target: nid.to_hex(),
        });
    }
    Ok(report)
}

/// Whether `src` and `dst` give every blob the same ID and cut files the
/// same way (the destination was made with `init --copy-chunker-params`):
/// then blobs copy as they are, with the same IDs, and trees unchanged.
pub fn shares_ids(src: &Repository, dst: &Repository) -> bool {
    let probe = b"larder copy: do these repositories share blob IDs?";
    src.keys().blob_id(probe) == dst.keys().blob_id(probe)
        && src.keys().gear() == dst.keys().gear()
        && src.config().chunker == dst.config().chunker
}

/// One copy run's state.
struct Copier<'s, 'd> {
    src: &'s Repository,
    packer: Packer<'d>,
    chunker: Chunker,
    /// The repositories share blob IDs: copy blobs, keep trees.
    shared: bool,
    /// Source tree ID → destination tree ID, for this run.
    trees: HashMap<Id, Id>,
    buf: Vec<u8>,
    bytes_read: u64,
    progress: &'s dyn Progress,
    /// How deep below a snapshot's root the copy is
    /// ([`crate::tree::MAX_DEPTH`]).
    depth: usize,
}

impl Copier<'_, '_> {
    /// Copies the trees of `todo`; returns each snapshot as the
    /// destination will hold it.
    fn snapshots<'a>(
        &mut self,
        todo: Vec<(&'a Id, &'a Snapshot)>,
    ) -> Result<Vec<(&'a Id, Snapshot)>> {
        let mut out = Vec::with_capacity(todo.len());
        for (id, s) in todo {
            crate::interrupt::check()?;
            let mut copy = s.clone();
            copy.tree = self.tree(&s.tree)?;
            copy.parent = None;
            out.push((id, copy));
        }
        Ok(out)
    }

    /// Rewrites source tree `id` (and everything below) into the
    /// destination; returns its destination ID.
    fn tree(&mut self, id: &Id) -> Result<Id> {
        if let Some(d) = self.trees.get(id) {
            return Ok(*d);
        }
        crate::tree::check_depth(self.depth + 1, format!("tree {id}"))?;
        self.depth += 1;
        let copied = self.tree_below(id);
        self.depth -= 1;
        copied
    }

    /// [`Copier::tree`], one level deeper.
    fn tree_below(&mut self, id: &Id) -> Result<Id> {
        crate::interrupt::check()?;
        if self.shared {
            return self.shared_tree(id);
        }
        let mut t: Tree = self.src.load_tree(id)?;
        for n in &mut t.nodes {
            match n.kind {
                NodeKind::Dir => {
                    if let Some(s) = n.subtree {
                        n.subtree = Some(self.tree(&s)?);
                    }
                }
                NodeKind::File => {
                    if !n.content.is_empty() {
                        n.content = self.content(&n.content, &n.name_lossy())?;
                    }
                    self.progress.bytes(n.size);
                    self.progress.file_done();
                }
                _ => {}
            }
        }
        let (nid, _) = self.packer.add(BlobType::Tree, &t.encode()?)?;
        self.trees.insert(*id, nid);
        Ok(nid)
    }

    /// With shared IDs: copies tree `id`, the blobs below it the
    /// destination lacks (each read verified, stored under the same ID),
    /// and the tree blob itself, unchanged.
    fn shared_tree(&mut self, id: &Id) -> Result<Id> {
        let t: Tree = self.src.load_tree(id)?;
        for n in &t.nodes {
            match (n.kind, n.subtree) {
                (NodeKind::Dir, Some(s)) => {
                    self.tree(&s)?;
                }
                (NodeKind::File, _) => {
                    for c in &n.content {
                        self.same_blob(BlobType::Data, c)?;
                    }
                    self.progress.bytes(n.size);
                    self.progress.file_done();
                }
                _ => {}
            }
        }
        self.same_blob(BlobType::Tree, id)?;
        self.trees.insert(*id, *id);
        Ok(*id)
    }

    /// Copies blob `id` unless the destination has it.
    fn same_blob(&mut self, ty: BlobType, id: &Id) -> Result<()> {
        if self.packer.has(id)? {
            return Ok(());
        }
        let plain = self.src.read_blob(id)?;
        self.bytes_read += plain.len() as u64;
        let (got, _) = self.packer.add(ty, &plain)?;
        if got != *id {
            return Err(Error::corrupt(
                format!("blob {id}"),
                "hashes to another ID in the destination, though the repositories share their ID key",
            ));
        }
        Ok(())
    }

    /// Re-chunks a file's content (source chunk IDs `ids`) for the
    /// destination, storing new chunks; returns the destination's IDs.
    fn content(&mut self, ids: &[Id], name: &str) -> Result<Vec<Id>> {
        let failed: Rc<RefCell<Option<Error>>> = Rc::new(RefCell::new(None));
        let mut reader = BlobReader {
            repo: self.src,
            ids: ids.iter(),
            cur: Vec::new(),
            pos: 0,
            failed: failed.clone(),
        };
        let mut out = Vec::new();
        let mut buf = std::mem::take(&mut self.buf);
        let packer = &mut self.packer;
        let r = self.chunker.stream(
            &mut reader,
            &mut buf,
            |c| {
                out.push(packer.add(BlobType::Data, c)?.0);
                Ok(())
            },
            |e| {
                failed
                    .borrow_mut()
                    .take()
                    .unwrap_or_else(|| Error::corrupt(format!("file {name:?} in the source"), e))
            },
        );
        self.buf = buf;
        self.bytes_read += r?;
        Ok(out)
    }
}

/// A file's content read blob by blob from the source, each verified.
struct BlobReader<'a> {
    repo: &'a Repository,
    ids: std::slice::Iter<'a, Id>,
    cur: Vec<u8>,
    pos: usize,
    /// The error behind a failed read, for the caller.
    failed: Rc<RefCell<Option<Error>>>,
}

impl Read for BlobReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.pos == self.cur.len() {
            let Some(id) = self.ids.next() else {
                return Ok(0);
            };
            match self.repo.read_blob(id) {
                Ok(b) => {
                    self.cur = b;
                    self.pos = 0;
                }
                Err(e) => {
                    let msg = e.to_string();
                    *self.failed.borrow_mut() = Some(e);
                    return Err(std::io::Error::other(msg));
                }
            }
        }
        let n = out.len().min(self.cur.len() - self.pos);
        out[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
