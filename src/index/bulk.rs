//! Absorbing many index segments at once: the path a new client takes on
//! its first open of a large repository (disaster recovery), where the
//! cache is empty and millions of blobs arrive together.
//!
//! Inserting each segment's blobs in its own order puts every row at a
//! random place of a B-tree far larger than SQLite's page cache, which cost
//! minutes for ten million blobs. Here a second thread reads and decrypts
//! the segments and hands their packs over in batches while this one
//! records them; the blob rows are sorted in bounded runs written to an
//! unnamed temporary file beside the cache, and the runs are then merged
//! and inserted in key order, so the B-tree grows at its right edge.
//! Memory stays bounded: one segment's body and a batch of its packs in
//! flight (a segment is never decoded whole), one run being filled
//! ([`RUN_ROWS`] rows) and a small read buffer per run during the merge.
//!
//! Into a cache that holds no segments yet, the merged rows are not
//! inserted one by one (ten million SQLite rows and their secondary index
//! cost about a minute): they are stored as the *base*, sorted blocks of
//! [`BLOCK_ROWS`] rows, one SQLite row per block keyed by its first row,
//! which a lookup finds with one range query and a binary search. The base
//! answers the lookups of backups and restores; commands that need every
//! blob as its own row (prune, stats, check, forgetting segments, deletion
//! marks) first turn the base into rows ([`super::Index::materialize`]),
//! paying that cost only when they run. Into a cache that already has
//! rows, the merged rows are inserted in key order.

use super::cache::SyncReport;
use super::segment::{IndexPack, for_each_pack, read_segment_body};
use crate::backend::Backend;
use crate::crypto::Keys;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::pack::PackEntry;
use rusqlite::{Transaction, params};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;

/// Bytes of one blob row in a run: id (32), pack number (8, big-endian so
/// that byte order is key order), type (1), offset (8), stored length (4),
/// plain length (4), compression (1).
const REC: usize = 58;

/// Rows sorted in memory before a run is written (about 3.6 MiB).
pub(super) const RUN_ROWS: usize = 64 * 1024;

/// Rows in one block of the base (3,712 bytes: about one SQLite page).
const BLOCK_ROWS: usize = 64;

/// Threads decrypting and decoding segments while the caller's thread
/// records them.
const DECODERS: usize = 1;

/// Blobs per batch of packs handed from a decoder to the recording
/// thread (about 0.5 MiB of entries).
const BATCH_BLOBS: usize = 8192;

/// The memory shared by the read buffers of all runs during the merge.
const MERGE_BUFFER_BYTES: usize = 4 << 20;

pub(super) type Rec = [u8; REC];

/// How merged rows enter the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// As the base's sorted blocks (the cache holds no segments).
    Base,
    /// As rows of `blobs`, inserted in key order.
    Rows,
}

pub(super) fn encode(pack: i64, e: &PackEntry) -> Rec {
    let mut r = [0u8; REC];
    r[..32].copy_from_slice(&e.id.0);
    r[32..40].copy_from_slice(&(pack as u64).to_be_bytes());
    r[40] = e.ty as u8;
    r[41..49].copy_from_slice(&e.offset.to_le_bytes());
    r[49..53].copy_from_slice(&e.stored_len.to_le_bytes());
    r[53..57].copy_from_slice(&e.plain_len.to_le_bytes());
    r[57] = e.compression;
    r
}

/// The pack number and entry one row holds.
pub(super) fn decode(r: &[u8]) -> Option<(i64, PackEntry)> {
    let r: &Rec = r.try_into().ok()?;
    let u64_at = |a: usize| r[a..a + 8].try_into().ok();
    let u32_at = |a: usize| r[a..a + 4].try_into().ok().map(u32::from_le_bytes);
    Some((
        u64::from_be_bytes(u64_at(32)?) as i64,
        PackEntry {
            ty: crate::pack::BlobType::from_u8(r[40])?,
            id: Id(r[..32].try_into().ok()?),
            offset: u64::from_le_bytes(u64_at(41)?),
            stored_len: u32_at(49)?,
            plain_len: u32_at(53)?,
            compression: r[57],
        },
    ))
}

/// The first row of base block `rows` (sorted rows) whose blob is `id`.
pub(super) fn find_in_block<'a>(rows: &'a [u8], id: &Id) -> Option<&'a [u8]> {
    if !rows.len().is_multiple_of(REC) {
        return None;
    }
    let n = rows.len() / REC;
    let row = |i: usize| &rows[i * REC..(i + 1) * REC];
    // The first row whose id is not less than `id`.
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if row(mid)[..32] < id.0[..] {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    (lo < n && row(lo)[..32] == id.0[..]).then(|| row(lo))
}

/// The key a lookup of `id` seeks to: the greatest possible row key of
/// that blob (the block holding it starts at or before it).
pub(super) fn seek_key(id: &Id) -> [u8; 40] {
    let mut k = [0xffu8; 40];
    k[..32].copy_from_slice(&id.0);
    k
}

/// Inserts one row into `blobs` (a statement of
/// [`super::cache::insert_blobs_sql`] of one row); a row that does not
/// decode (it cannot: this module encoded it) is skipped.
pub(super) fn insert(st: &mut rusqlite::CachedStatement<'_>, r: &Rec) -> rusqlite::Result<()> {
    if let Some((pack, e)) = decode(r) {
        super::cache::bind_rows(st, &[(&e, pack)])?;
        st.raw_execute()?;
    }
    Ok(())
}

/// Sorted runs of rows in an unnamed temporary file.
struct Runs {
    dir: std::path::PathBuf,
    file: Option<File>,
    /// (offset, rows) of each run written.
    runs: Vec<(u64, usize)>,
    end: u64,
    /// The run being filled.
    current: Vec<Rec>,
}

impl Runs {
    fn new(dir: &Path) -> Runs {
        Runs {
            dir: dir.to_path_buf(),
            file: None,
            runs: Vec::new(),
            end: 0,
            current: Vec::new(),
        }
    }

    fn push(&mut self, r: Rec) -> Result<()> {
        self.current.push(r);
        if self.current.len() >= RUN_ROWS {
            self.spill()?;
        }
        Ok(())
    }

    /// Sorts the current run and writes it to the temporary file.
    fn spill(&mut self) -> Result<()> {
        if self.current.is_empty() {
            return Ok(());
        }
        self.current.sort_unstable_by_key(key_of);
        if self.file.is_none() {
            self.file = Some(unnamed_file(&self.dir).map_err(|e| Error::io(&self.dir, e))?);
        }
        let Some(f) = self.file.as_mut() else {
            return Ok(());
        };
        let mut w = std::io::BufWriter::with_capacity(1 << 20, &*f);
        for r in &self.current {
            w.write_all(r).map_err(|e| Error::io(&self.dir, e))?;
        }
        w.flush().map_err(|e| Error::io(&self.dir, e))?;
        self.runs.push((self.end, self.current.len()));
        self.end += (self.current.len() * REC) as u64;
        self.current.clear();
        Ok(())
    }

    /// Calls `f` on every row in key order.
    fn merge(mut self, mut f: impl FnMut(&Rec) -> Result<()>) -> Result<()> {
        if self.runs.is_empty() {
            self.current.sort_unstable_by_key(key_of);
            return self.current.iter().try_for_each(f);
        }
        self.spill()?;
        let Some(file) = self.file.as_ref() else {
            return Ok(());
        };
        let per_run = (MERGE_BUFFER_BYTES / self.runs.len() / REC).max(16);
        let mut readers: Vec<RunReader> = self
            .runs
            .iter()
            .map(|&(off, rows)| RunReader::new(off, rows, per_run))
            .collect();
        // The heap orders runs by their current row's key, as integers (no
        // byte-string comparison calls in the hot loop).
        let mut heap = BinaryHeap::with_capacity(readers.len());
        for (i, r) in readers.iter_mut().enumerate() {
            if let Some(rec) = r.peek(file, &self.dir)? {
                heap.push(Reverse((key_of(rec), i)));
            }
        }
        while let Some(Reverse((_, i))) = heap.pop() {
            let r = &mut readers[i];
            if let Some(rec) = r.peek(file, &self.dir)? {
                f(rec)?;
            }
            r.advance();
            if let Some(rec) = r.peek(file, &self.dir)? {
                heap.push(Reverse((key_of(rec), i)));
            }
        }
        Ok(())
    }
}

/// A row's key (blob id, then pack number) as integers that order as the
/// bytes do.
fn key_of(r: &Rec) -> (u128, u128, u64) {
    let at = |a: usize| {
        let mut b = [0u8; 16];
        b.copy_from_slice(&r[a..a + 16]);
        u128::from_be_bytes(b)
    };
    let mut p = [0u8; 8];
    p.copy_from_slice(&r[32..40]);
    (at(0), at(16), u64::from_be_bytes(p))
}

/// Reads one run back through a small buffer, with positioned reads.
struct RunReader {
    next_off: u64,
    left: usize,
    buf: Vec<u8>,
    pos: usize,
    cap_rows: usize,
}

impl RunReader {
    fn new(off: u64, rows: usize, cap_rows: usize) -> RunReader {
        RunReader {
            next_off: off,
            left: rows,
            buf: Vec::new(),
            pos: 0,
            cap_rows,
        }
    }

    /// The current row, reading the next part of the run when the buffer
    /// is used up; `None` at the end of the run.
    fn peek(&mut self, file: &File, dir: &Path) -> Result<Option<&Rec>> {
        if self.pos >= self.buf.len() {
            if self.left == 0 {
                return Ok(None);
            }
            let n = self.left.min(self.cap_rows);
            self.buf.resize(n * REC, 0);
            file.read_exact_at(&mut self.buf, self.next_off)
                .map_err(|e| Error::io(dir, e))?;
            self.next_off += (n * REC) as u64;
            self.left -= n;
            self.pos = 0;
        }
        Ok(self.buf[self.pos..self.pos + REC].try_into().ok())
    }

    /// Moves past the current row.
    fn advance(&mut self) {
        self.pos += REC;
    }
}

/// A file with no name in `dir` (it vanishes with its descriptor); where
/// `O_TMPFILE` is refused, a named file removed at once.
fn unnamed_file(dir: &Path) -> std::io::Result<File> {
    let opts = || {
        let mut o = OpenOptions::new();
        o.read(true).write(true).mode(0o600);
        o
    };
    match opts().custom_flags(libc::O_TMPFILE).open(dir) {
        Ok(f) => Ok(f),
        Err(_) => {
            let p = dir.join(format!(".bulk-{}-{}", std::process::id(), nanos_now()));
            let f = opts().create_new(true).open(&p)?;
            std::fs::remove_file(&p)?;
            Ok(f)
        }
    }
}

/// The time in nanoseconds: with the process id, a name no other run
/// uses at the same moment (the fallback file's name).
fn nanos_now() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Absorbs segments `ids` in the open transaction `tx`: records their packs
/// and the segments, then stores every blob row in key order, as `target`
/// says. Segments that cannot be read are reported in `report.bad` and
/// skipped; those gone since they were listed, in `report.vanished`.
///
/// Each segment is decoded once, its packs recorded as they are decoded.
/// A segment that stops decoding after some of its packs were recorded
/// (its body authenticates, so only a writer holding the key can make
/// one) undoes the load, which is then done again decoding every segment
/// once before recording any of it, so that it skips such a segment whole.
pub(super) fn load(
    tx: &Transaction<'_>,
    db: &Path,
    backend: &dyn Backend,
    keys: &Keys,
    ids: &[&Id],
    target: Target,
    report: &mut SyncReport,
) -> Result<()> {
    let sq = |e| Error::sqlite(db, e);
    let load = Load {
        tx,
        db,
        backend,
        keys,
        ids,
        target,
    };
    tx.execute_batch("SAVEPOINT bulk_load").map_err(sq)?;
    let mut this = SyncReport::default();
    let mut loaded = load.once(false, &mut this)?;
    if loaded == Loaded::PartWay {
        tx.execute_batch("ROLLBACK TO bulk_load").map_err(sq)?;
        this = SyncReport::default();
        loaded = load.once(true, &mut this)?;
    }
    if loaded == Loaded::PartWay {
        return Err(Error::internal(
            "a segment decoded before use failed part way",
        ));
    }
    tx.execute_batch("RELEASE bulk_load").map_err(sq)?;
    report.absorbed += this.absorbed;
    report.bad.append(&mut this.bad);
    report.vanished.append(&mut this.vanished);
    Ok(())
}

/// How one attempt of [`load`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loaded {
    Whole,
    /// A segment failed to decode after some of its packs were recorded.
    PartWay,
}

/// The arguments of one [`load`], shared by its attempts.
struct Load<'l, 't> {
    tx: &'l Transaction<'t>,
    db: &'l Path,
    backend: &'l dyn Backend,
    keys: &'l Keys,
    ids: &'l [&'l Id],
    target: Target,
}

impl Load<'_, '_> {
    /// One attempt of [`load`]; with `decode_first`, each segment is
    /// decoded whole once before its packs are handed over.
    fn once(&self, decode_first: bool, report: &mut SyncReport) -> Result<Loaded> {
        let Load {
            tx,
            db,
            backend,
            keys,
            ids,
            target,
        } = *self;
        let sq = |e| Error::sqlite(db, e);
        let dir = db.parent().unwrap_or(Path::new("."));
        let mut runs = Runs::new(dir);
        let next = AtomicUsize::new(0);
        let loaded = std::thread::scope(|scope| -> Result<Loaded> {
            // Decoders take segments in turn and hand over their packs in
            // batches; dropping the receiver (an error below) stops them.
            let (send, recv) = std::sync::mpsc::sync_channel::<Handed<'_>>(1);
            for _ in 0..DECODERS {
                let (send, next) = (send.clone(), &next);
                scope.spawn(move || {
                    while let Some(id) = ids.get(next.fetch_add(1, Ordering::Relaxed)) {
                        if !hand_over(backend, keys, id, decode_first, &send) {
                            break;
                        }
                    }
                });
            }
            drop(send);
            for handed in recv {
                crate::interrupt::check()?;
                match handed {
                    Handed::Packs(id, packs) => {
                        for p in &packs {
                            let num = super::cache::insert_pack(tx, p, id).map_err(sq)?;
                            for b in &p.blobs {
                                runs.push(encode(num, b))?;
                            }
                        }
                    }
                    Handed::Done(id) => {
                        tx.execute(
                            "INSERT OR IGNORE INTO segments(id) VALUES (?1)",
                            params![id.0],
                        )
                        .map_err(sq)?;
                        report.absorbed += 1;
                    }
                    Handed::PartWay => return Ok(Loaded::PartWay),
                    // Replaced by a compaction since it was listed.
                    Handed::Failed(id, e) if e.is_not_found() => report.vanished.push(*id),
                    Handed::Failed(_, e) => report.bad.push(format!("{e}; skipped")),
                }
            }
            Ok(Loaded::Whole)
        })?;
        if loaded == Loaded::PartWay {
            return Ok(loaded);
        }
        match target {
            Target::Base => write_blocks(tx, runs).map_err(|e| e.with_db(db))?,
            Target::Rows => {
                let mut st = tx
                    .prepare_cached(&super::cache::insert_blobs_sql(1))
                    .map_err(sq)?;
                runs.merge(|r| insert(&mut st, r).map_err(sq))?
            }
        }
        Ok(Loaded::Whole)
    }
}

/// What a decoder hands over for one segment: its packs in batches, then
/// `Done`; or `Failed` before any of its packs; or `PartWay` when it
/// failed after some of them.
enum Handed<'a> {
    Packs(&'a Id, Vec<IndexPack>),
    Done(&'a Id),
    Failed(&'a Id, Error),
    PartWay,
}

/// Reads segment `id` and sends its packs over `send` in batches of about
/// [`BATCH_BLOBS`] blobs, so that neither thread holds a decoded segment
/// (a segment written by an older prune lists a quarter million blobs).
/// With `decode_first`, the body is decoded once before anything is sent,
/// so a segment that does not decode is always `Failed`, never `PartWay`.
/// Returns false once the receiver is gone.
fn hand_over<'a>(
    backend: &dyn Backend,
    keys: &Keys,
    id: &'a Id,
    decode_first: bool,
    send: &SyncSender<Handed<'a>>,
) -> bool {
    let name = id.to_hex();
    let what = crate::backend::Kind::Index.path(&name);
    let body = match read_segment_body(backend, keys, &name).and_then(|body| {
        if decode_first {
            for_each_pack(&what, &body, |_| Ok(()))?;
        }
        Ok(body)
    }) {
        Ok(body) => body,
        Err(e) => return send.send(Handed::Failed(id, e)).is_ok(),
    };
    let mut batch = Vec::new();
    let mut blobs = 0;
    let mut sent_some = false;
    let mut receiver_gone = false;
    let decoded = for_each_pack(&what, &body, |p| {
        blobs += p.blobs.len();
        batch.push(p);
        if blobs >= BATCH_BLOBS {
            blobs = 0;
            if send
                .send(Handed::Packs(id, std::mem::take(&mut batch)))
                .is_err()
            {
                receiver_gone = true;
                return Err(Error::internal("the index reader stopped"));
            }
            sent_some = true;
        }
        Ok(())
    });
    drop(body);
    match decoded {
        _ if receiver_gone => false,
        Err(_) if sent_some => {
            let _ = send.send(Handed::PartWay);
            false
        }
        Err(e) => send.send(Handed::Failed(id, e)).is_ok(),
        Ok(()) => {
            (batch.is_empty() || send.send(Handed::Packs(id, batch)).is_ok())
                && send.send(Handed::Done(id)).is_ok()
        }
    }
}

/// An error of [`write_blocks`]: SQLite's or the temporary file's.
enum BlockError {
    Sql(rusqlite::Error),
    Other(Error),
}

impl BlockError {
    fn with_db(self, db: &Path) -> Error {
        match self {
            BlockError::Sql(e) => Error::sqlite(db, e),
            BlockError::Other(e) => e,
        }
    }
}

/// Stores the merged rows as the base's blocks (a row listed twice, by two
/// segments that list the same pack, is kept once).
fn write_blocks(tx: &Transaction<'_>, runs: Runs) -> std::result::Result<(), BlockError> {
    let mut st = tx
        .prepare_cached("INSERT INTO blob_base(first, n, rows) VALUES (?1, ?2, ?3)")
        .map_err(BlockError::Sql)?;
    let mut block: Vec<u8> = Vec::with_capacity(BLOCK_ROWS * REC);
    let mut last = [0u8; 40];
    let mut have_last = false;
    let mut sql_err = None;
    let mut flush = |block: &mut Vec<u8>| -> rusqlite::Result<()> {
        if !block.is_empty() {
            st.execute(params![
                &block[..40],
                (block.len() / REC) as i64,
                &block[..]
            ])?;
            block.clear();
        }
        Ok(())
    };
    let merged = runs.merge(|r| {
        if have_last && r[..40] == last[..] {
            return Ok(());
        }
        have_last = true;
        last.copy_from_slice(&r[..40]);
        block.extend_from_slice(r);
        if block.len() >= BLOCK_ROWS * REC
            && let Err(e) = flush(&mut block)
        {
            sql_err = Some(e);
            return Err(Error::internal("index cache insert failed"));
        }
        Ok(())
    });
    if let Some(e) = sql_err {
        return Err(BlockError::Sql(e));
    }
    merged.map_err(BlockError::Other)?;
    flush(&mut block).map_err(BlockError::Sql)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::BlobType;

    fn entry(n: u32) -> PackEntry {
        PackEntry {
            ty: BlobType::Data,
            id: Id(*blake3::hash(&n.to_le_bytes()).as_bytes()),
            offset: n as u64 * 7,
            stored_len: n + 40,
            plain_len: n,
            compression: (n % 2) as u8,
        }
    }

    #[test]
    fn runs_merge_into_key_order_across_spills() {
        let d = tempfile::tempdir().unwrap();
        let mut runs = Runs::new(d.path());
        let n = RUN_ROWS * 2 + 1000;
        let mut want: Vec<Rec> = (0..n as u32)
            .map(|i| encode(i as i64 % 5, &entry(i)))
            .collect();
        for r in &want {
            runs.push(*r).unwrap();
        }
        assert_eq!(runs.runs.len(), 2, "two full runs spilled");
        want.sort_unstable();
        let mut got = Vec::with_capacity(n);
        runs.merge(|r| {
            got.push(*r);
            Ok(())
        })
        .unwrap();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "merged rows are every row, in key order");
        assert!(
            std::fs::read_dir(d.path()).unwrap().next().is_none(),
            "the runs' file has no name"
        );
    }

    /// Writes `seg`'s body cut by `cut` bytes as a validly sealed segment
    /// and returns its id.
    fn put_body(b: &dyn Backend, keys: &Keys, seg: &super::super::IndexSegment, cut: usize) -> Id {
        use crate::object::{self, ObjectType};
        let body = object::encode(seg).unwrap();
        let bytes = object::seal_body(keys, ObjectType::Index, &body[..body.len() - cut]).unwrap();
        let id = Id::of_object(&bytes);
        b.write(crate::backend::Kind::Index, &id.to_hex(), &bytes)
            .unwrap();
        id
    }

    /// Packs numbered `first..first + packs`, `per` blobs each.
    fn segment(first: u32, packs: u32, per: u32) -> super::super::IndexSegment {
        super::super::IndexSegment {
            packs: (first..first + packs)
                .map(|p| IndexPack {
                    id: Id(*blake3::hash(format!("pack{p}").as_bytes()).as_bytes()),
                    size: 1 << 20,
                    blobs: (0..per).map(|b| entry(p * 100_000 + b)).collect(),
                })
                .collect(),
        }
    }

    /// Segments larger than a batch arrive whole, in both targets (the
    /// base of a first open, rows of a later sync), and one whose body
    /// decodes part way (sealed with the repository's key, so only its
    /// decoding fails) is skipped whole, even when a batch of its packs
    /// was already recorded: not one of its packs stays recorded.
    #[test]
    fn batches_keep_every_pack_and_a_body_that_fails_part_way_adds_none() {
        use crate::backend::{Backend, LocalBackend};
        use crate::crypto::MasterKey;
        let d = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(d.path().join("repo"));
        b.create().unwrap();
        let keys = Keys::derive(&MasterKey::from_bytes([5; 32]));
        let per = (BATCH_BLOBS / 3 + 7) as u32;
        let mut want = Vec::new();
        let mut bad = Vec::new();
        let mut idx = super::super::Index::open(&d.path().join("index.sqlite")).unwrap();
        for (round, small) in [(0u32, 20u32), (1, 0)] {
            let base = round * 100;
            for s in 0..small {
                let seg = segment(base + 50 + s, 1, 2);
                put_body(&b, &keys, &seg, 0);
                want.push(seg);
            }
            let big = segment(base, 8, per);
            assert!(8 * per as usize > 2 * BATCH_BLOBS);
            put_body(&b, &keys, &big, 0);
            want.push(big);
            // Broken in its last pack: the first before any of its packs
            // is handed over, the second after a batch of them was.
            for (at, packs) in [(20, 3), (30, 4)] {
                let broken = segment(base + at, packs, per);
                bad.push((put_body(&b, &keys, &broken, 1), broken));
            }
            let report = idx.sync(&b, &keys).unwrap();
            assert_eq!(report.absorbed, small as usize + 1, "round {round}");
            // A skipped segment is tried again (and skipped again) by the
            // next sync.
            assert_eq!(report.bad.len(), bad.len(), "{:?}", report.bad);
            for (id, _) in &bad {
                assert!(report.bad.iter().any(|m| m.contains(&id.to_hex())));
            }
        }
        for seg in &want {
            for p in &seg.packs {
                for e in &p.blobs {
                    let at = idx.lookup(&e.id).unwrap().expect("every blob found");
                    assert_eq!((at.pack, &at.entry), (p.id, e));
                }
            }
        }
        let packs = idx.packs().unwrap();
        for (_, seg) in &bad {
            for p in &seg.packs {
                assert!(idx.lookup(&p.blobs[0].id).unwrap().is_none());
                assert!(!packs.iter().any(|(id, _)| *id == p.id), "pack recorded");
            }
        }
        let listed: usize = want.iter().map(|s| s.packs.len()).sum();
        assert_eq!(packs.len(), listed);
        assert_eq!(
            idx.blob_count().unwrap(),
            want.iter()
                .flat_map(|s| &s.packs)
                .map(|p| p.blobs.len() as u64)
                .sum::<u64>()
        );
    }

    #[test]
    fn record_keeps_every_field() {
        let e = entry(123_456);
        let r = encode(0x0102_0304, &e);
        assert_eq!(&r[..32], &e.id.0);
        assert_eq!(&r[32..40], &0x0102_0304u64.to_be_bytes());
        assert_eq!(r[40], e.ty as u8);
        assert_eq!(&r[41..49], &e.offset.to_le_bytes());
        assert_eq!(&r[49..53], &e.stored_len.to_le_bytes());
        assert_eq!(&r[53..57], &e.plain_len.to_le_bytes());
        assert_eq!(r[57], e.compression);
    }
}
