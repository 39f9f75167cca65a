//! `check`: verifies a repository's structure (config, keys, index segments,
//! packs against the index, snapshots and every tree they reach) and, with
//! `--read-data`, every blob's bytes, or with `--read-data-subset` a share
//! of the packs taken in rotation (see [`rotation`]). Every problem names
//! the object.

pub mod rotation;

use crate::backend::Kind;
use crate::error::Result;
use crate::id::Id;
use crate::index;
use crate::pack::{self, BlobType};
use crate::repository::Repository;
use crate::snapshot;
use crate::tree::{NodeKind, Tree};
use crate::walker::{self, Visit};
use rayon::prelude::*;
use rotation::{Coverage, DataSubset, VerifyLog};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// What to check beyond structure.
#[derive(Clone, Debug, Default)]
pub struct CheckOptions {
    /// Decrypt and re-hash every blob of every pack.
    pub read_data: bool,
    /// Read only this subset of the packs (implies reading data).
    pub subset: Option<DataSubset>,
}

/// What `check` found.
#[derive(Debug, Default, Serialize)]
pub struct CheckReport {
    pub keys: usize,
    pub index_segments: usize,
    pub packs: usize,
    pub snapshots: usize,
    pub trees: usize,
    pub packs_read: usize,
    pub blobs_read: usize,
    /// Bytes of the packs read (`packs_read` of them).
    pub bytes_read: u64,
    /// When data was read: how much of the repository's data has been
    /// verified so far, this run and earlier ones together.
    pub verified: Option<Coverage>,
    /// What is wrong: each names the object; any makes `check` fail.
    pub problems: Vec<String>,
    /// The packs whose data read found a problem (full ids): what
    /// `repair packs` salvages.
    pub damaged_packs: Vec<String>,
    /// What is worth knowing but not wrong: packs an interrupted backup
    /// left for the next one to index, a local cache that was repaired.
    pub notices: Vec<String>,
}

impl CheckReport {
    /// Whether nothing was found wrong.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Runs the checks, under a shared lock.
pub fn check(repo: &Repository, opts: &CheckOptions) -> Result<CheckReport> {
    check_with_progress(repo, opts, &crate::progress::NoProgress)
}

/// [`check`], telling `progress` the packs whose data is read (one "file"
/// per pack, with its bytes; the totals are known before the first read).
pub fn check_with_progress(
    repo: &Repository,
    opts: &CheckOptions,
    progress: &dyn crate::progress::Progress,
) -> Result<CheckReport> {
    let _lock = repo.lock_for_reading()?;
    let mut r = CheckReport::default();
    // The snapshots are listed before the index is read: a backup writes
    // the segments a snapshot needs before the snapshot, so every listed
    // snapshot's blobs are in what `check_index` reads, even when a backup
    // ends while check runs (repo-format/SPEC.md, section 13). Snapshots
    // written after this listing are the next check's.
    let snapshots = repo.backend().list(Kind::Snapshot)?;
    check_keys(repo, &mut r)?;
    check_dictionaries(repo, &mut r)?;
    check_index(repo, &mut r)?;
    let indexed = check_packs(repo, &mut r)?;
    check_snapshots(repo, snapshots, &mut r)?;
    if opts.read_data || opts.subset.is_some() {
        read_data(repo, &indexed, opts.subset.as_ref(), &mut r, progress)?;
    }
    Ok(r)
}

/// Reads the packs of `subset` (every indexed pack for `None`), recording
/// each one read without a problem in the verification record at once.
fn read_data(
    repo: &Repository,
    indexed: &[(Id, u64)],
    subset: Option<&DataSubset>,
    r: &mut CheckReport,
    progress: &dyn crate::progress::Progress,
) -> Result<()> {
    let log = VerifyLog::open(repo)?;
    log.retain(indexed)?;
    let chosen = rotation::select(indexed, &log.all()?, subset);
    let run = log.next_run()?;
    let total: u64 = chosen.iter().map(|(_, s)| s).sum();
    progress.totals(chosen.len() as u64, total, true);
    // Packs are verified in parallel, a few at a time (each is held whole
    // while it is verified, so memory stays a few packs); what each found
    // is recorded in order.
    let at_once = rayon::current_num_threads().max(1) * 2;
    let mut missing = Vec::new();
    for batch in chosen.chunks(at_once) {
        crate::interrupt::check()?;
        let verdicts: Vec<PackVerdict> = batch
            .par_iter()
            .map(|(id, size)| {
                let v = read_pack_data(repo, id, *size);
                progress.bytes(*size);
                progress.file_done();
                v
            })
            .collect();
        for ((id, size), v) in batch.iter().zip(verdicts) {
            r.blobs_read += v.blobs;
            if v.read {
                r.packs_read += 1;
                r.bytes_read += size;
            }
            if let Some(problem) = v.missing {
                missing.push((*id, problem));
                continue;
            }
            let clean = v.problems.is_empty();
            r.problems.extend(v.problems);
            if !clean {
                r.damaged_packs.push(id.to_hex());
            }
            if clean {
                log.record(id, run, crate::host::now_secs())?;
            }
        }
    }
    let gone = deleted_meanwhile(repo, missing, r)?;
    let indexed: Vec<(Id, u64)> = indexed
        .iter()
        .filter(|(id, _)| !gone.contains(id))
        .copied()
        .collect();
    r.verified = Some(rotation::coverage(
        &indexed,
        &log.all()?,
        crate::host::now_secs(),
    ));
    Ok(())
}

/// Every key file: named by its hash, and parseable.
fn check_keys(repo: &Repository, r: &mut CheckReport) -> Result<()> {
    let be = repo.backend();
    for e in be.list(Kind::Key)? {
        let what = Kind::Key.path(&e.name);
        let read = be.read_bounded(Kind::Key, &e.name, 1 << 20);
        // Removed since the listing (a `key remove` beside): gone, not
        // unreadable.
        if read.as_ref().is_err_and(|e| e.is_not_found()) {
            continue;
        }
        r.keys += 1;
        match read {
            Ok(bytes) => {
                if Id::of_object(&bytes).to_hex() != e.name {
                    r.problems
                        .push(format!("{what}: contents do not hash to the object's name"));
                } else if let Err(err) = crate::keys::parse_key_file(&what, &bytes) {
                    r.problems.push(err.to_string());
                }
            }
            Err(err) => r.problems.push(err.to_string()),
        }
    }
    Ok(())
}

/// Every compression dictionary: named by its hash, and opens (a missing
/// one shows when `--read-data` meets a blob that needs it).
fn check_dictionaries(repo: &Repository, r: &mut CheckReport) -> Result<()> {
    let be = repo.backend();
    for e in be.list(Kind::Dict)? {
        let what = Kind::Dict.path(&e.name);
        match be.read_bounded(Kind::Dict, &e.name, crate::dictionary::MAX_DICT_STORED) {
            Ok(bytes) => {
                let name = Id::of_object(&bytes);
                if name.to_hex() != e.name {
                    r.problems
                        .push(format!("{what}: contents do not hash to the object's name"));
                } else if let Err(err) =
                    crate::dictionary::Dictionary::open(repo.keys(), &what, name, &bytes)
                {
                    r.problems.push(err.to_string());
                }
            }
            Err(err) => r.problems.push(err.to_string()),
        }
    }
    Ok(())
}

/// Every index segment: readable, and held exactly by the local cache
/// (which is repaired where it is not: the repository is the record).
fn check_index(repo: &Repository, r: &mut CheckReport) -> Result<()> {
    let be = repo.backend();
    // The cache may hold segments absorbed earlier; make it match storage.
    repo.sync_index()?;
    for e in be.list(Kind::Index)? {
        let seg = match index::read_segment(be, repo.keys(), &e.name) {
            Ok(s) => s,
            // Replaced by a prune's compaction since the listing, which
            // wrote its replacement first (and the sync above, or the next
            // one, holds that): gone, not unreadable.
            Err(err) if err.is_not_found() => continue,
            Err(err) => {
                r.index_segments += 1;
                r.problems.push(err.to_string());
                continue;
            }
        };
        r.index_segments += 1;
        let Ok(sid) = Id::from_hex(&e.name) else {
            continue;
        };
        let mut cache = repo.index()?;
        if !cache.agrees_with(&sid, &seg)? {
            cache.absorb(&sid, &seg)?;
            r.notices.push(format!(
                "{}: the local index cache disagreed with it and was repaired",
                Kind::Index.path(&e.name)
            ));
        }
    }
    Ok(())
}

/// Every pack in storage against the index: packs no segment lists are a
/// notice (an interrupted backup left them; the next backup indexes them);
/// indexed packs must exist with their recorded size and a header that
/// matches the index. Returns the indexed packs (less those a prune
/// deleted meanwhile, see [`deleted_meanwhile`]).
fn check_packs(repo: &Repository, r: &mut CheckReport) -> Result<Vec<(Id, u64)>> {
    let listed: HashMap<String, u64> = repo
        .backend()
        .list(Kind::Pack)?
        .into_iter()
        .map(|e| (e.name, e.size))
        .collect();
    let indexed = repo.index()?.packs()?;
    let indexed_names: HashSet<String> = indexed.iter().map(|(id, _)| id.to_hex()).collect();
    for (name, size) in &listed {
        if !indexed_names.contains(name) {
            r.notices.push(format!(
                "{}: pack ({size} bytes) is not in any index segment yet (left by an \
                 interrupted backup; the next backup indexes it, or run `larder repair index`)",
                Kind::Pack.path(name)
            ));
        }
    }
    let mut missing = Vec::new();
    for (id, size) in &indexed {
        r.packs += 1;
        let name = id.to_hex();
        let what = Kind::Pack.path(&name);
        match listed.get(&name) {
            None => {
                missing.push((
                    *id,
                    format!("{what}: pack is in the index but missing from storage"),
                ));
                continue;
            }
            Some(s) if s != size => {
                r.problems
                    .push(format!("{what}: size {s} differs from the index's {size}"));
                continue;
            }
            Some(_) => {}
        }
        match repo.read_pack_header(id, *size) {
            Ok(header) => {
                let by_id: HashMap<Id, pack::PackEntry> =
                    header.iter().map(|e| (e.id, *e)).collect();
                for e in repo.index()?.blobs_in_pack(id)? {
                    if by_id.get(&e.id) != Some(&e) {
                        r.problems.push(format!(
                            "{what}: index entry for blob {} does not match the pack header",
                            e.id
                        ));
                    }
                }
            }
            Err(err) if err.is_not_found() => missing.push((*id, err.to_string())),
            Err(err) => r.problems.push(err.to_string()),
        }
    }
    let gone = deleted_meanwhile(repo, missing, r)?;
    r.packs -= gone.len();
    Ok(indexed
        .into_iter()
        .filter(|(id, _)| !gone.contains(id))
        .collect())
}

/// Sorts packs found missing from storage while `check` ran (each with the
/// problem it would be): a pack that no index segment lists any more once
/// the cache is synced again was deleted by a prune meanwhile, which drops
/// a pack from every segment before it deletes it (SPEC section 21, rule
/// 5); it is a notice. One still listed is lost: a problem. Returns the
/// deleted ones.
fn deleted_meanwhile(
    repo: &Repository,
    missing: Vec<(Id, String)>,
    r: &mut CheckReport,
) -> Result<HashSet<Id>> {
    let mut gone = HashSet::new();
    if missing.is_empty() {
        return Ok(gone);
    }
    repo.sync_index()?;
    let index = repo.index()?;
    for (id, problem) in missing {
        if index.pack_size(&id)?.is_some() {
            r.problems.push(problem);
        } else {
            r.notices.push(format!(
                "{}: deleted by a prune while check ran (no index segment lists it now)",
                Kind::Pack.path(&id.to_hex())
            ));
            gone.insert(id);
        }
    }
    Ok(gone)
}

/// What reading one pack found.
#[derive(Default)]
struct PackVerdict {
    /// Whether the pack was read.
    read: bool,
    /// Blobs opened and verified.
    blobs: usize,
    problems: Vec<String>,
    /// Not in storage (the problem that is, unless a prune deleted it
    /// meanwhile: [`deleted_meanwhile`]).
    missing: Option<String>,
}

/// Reads pack `id` whole, bounded by the `size` the index records (a pack
/// of any other size, or not a regular file, is reported and not read):
/// its name must be the hash of its bytes, its header must open, and every
/// blob must decrypt, decompress and hash to its ID.
fn read_pack_data(repo: &Repository, id: &Id, size: u64) -> PackVerdict {
    let mut v = PackVerdict::default();
    let name = id.to_hex();
    let what = Kind::Pack.path(&name);
    let be = repo.backend();
    let bytes = match be.size(Kind::Pack, &name) {
        Ok(s) if s != size => {
            v.problems.push(format!(
                "{what}: not read: its size {s} differs from the index's {size}"
            ));
            return v;
        }
        Ok(_) => be.read_bounded(Kind::Pack, &name, size),
        Err(e) => Err(e),
    };
    let bytes = match bytes {
        Ok(b) => b,
        Err(e) if e.is_not_found() => {
            v.missing = Some(e.to_string());
            return v;
        }
        Err(e) => {
            v.problems.push(e.to_string());
            return v;
        }
    };
    v.read = true;
    if Id::of_object(&bytes) != *id {
        v.problems
            .push(format!("{what}: contents do not hash to the pack's name"));
    }
    let entries = match pack::read_entries(repo.keys(), &what, &bytes) {
        Ok(e) => e,
        Err(e) => {
            v.problems.push(e.to_string());
            return v;
        }
    };
    for e in entries {
        let s = &bytes[e.offset as usize..(e.offset + e.stored_len as u64) as usize];
        v.blobs += 1;
        if let Err(err) = pack::open_blob(
            repo.keys(),
            repo,
            &pack::BlobIn {
                id: &e.id,
                pack: &what,
            },
            &e,
            s,
        ) {
            v.problems.push(err.to_string());
        }
    }
    v
}

/// Loads the snapshots `listed` (one removed since is skipped) and walks
/// their trees once each, checking every node.
fn check_snapshots(
    repo: &Repository,
    listed: Vec<crate::backend::Entry>,
    r: &mut CheckReport,
) -> Result<()> {
    let mut roots = Vec::new();
    for e in listed {
        match snapshot::load(repo, &e.name) {
            Ok(snap) => roots.push((
                snap.tree,
                format!("snapshot {}", &e.name[..8.min(e.name.len())]),
            )),
            // Removed since it was listed (a `forget` beside): not a problem.
            Err(err) if err.is_not_found() => continue,
            Err(err) => r.problems.push(err.to_string()),
        }
        r.snapshots += 1;
    }
    let problems = &mut r.problems;
    r.trees = walker::walk_unique(repo, roots, &mut |v| {
        match v {
            Visit::Unreadable { id, path, error } => {
                problems.push(format!("tree {id} at {path}: {error}"));
            }
            Visit::Tree { id, path, tree } => check_tree_nodes(repo, &id, path, tree, problems)?,
        }
        Ok(())
    })?;
    Ok(())
}

/// Checks one tree's nodes: directories have a subtree, files' chunks are
/// indexed data blobs (looked up together, in one read transaction of the
/// index: one per chunk took and dropped its lock each time).
fn check_tree_nodes(
    repo: &Repository,
    tid: &Id,
    path: &str,
    tree: &Tree,
    problems: &mut Vec<String>,
) -> Result<()> {
    let chunks: Vec<Id> = tree
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::File)
        .flat_map(|n| n.content.iter().copied())
        .collect();
    let mut found = repo.lookup_many(&chunks)?.into_iter();
    let at = |n: &crate::tree::Node| format!("{path}/{}", n.name_lossy());
    for n in &tree.nodes {
        match n.kind {
            NodeKind::Dir if n.subtree.is_none() => {
                problems.push(format!("tree {tid}: directory {} has no subtree", at(n)))
            }
            NodeKind::File => {
                for c in &n.content {
                    match found.next().flatten() {
                        Some(loc) if loc.entry.ty == BlobType::Data => {}
                        _ => problems.push(format!(
                            "{}: data blob {c} is missing from the index",
                            at(n)
                        )),
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}
