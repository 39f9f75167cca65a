//! The local SQLite index cache that answers "where is blob X?".
//!
//! The cache is only a cache: deleting it loses nothing, it is rebuilt from
//! `index/` on the next open. It holds exactly what the repository's index
//! segments say and nothing else: a run's new packs enter it only when the
//! run has written the segment that lists them, so no process ever holds
//! state in it that another could delete or miss. Many larder processes
//! share one cache file (SQLite's WAL mode and a busy timeout serialise
//! their writes); each sync is incremental: segments that appeared are
//! absorbed, segments that vanished are forgotten, and a pack is forgotten
//! only when no segment still lists it. A segment that cannot be read is
//! reported and skipped, never fatal. Nothing here keeps a map of every blob
//! in memory: lookups are prepared SQLite queries, inserts run in
//! transactions. New segments are absorbed by [`super::bulk`]: into an
//! empty cache as a base of sorted blocks (the fast first open of a large
//! repository), otherwise as rows inserted in key order.

use super::bulk::{self, Target};
use super::marks::{Mark, read_mark};
use super::segment::{IndexPack, IndexSegment};
use crate::backend::{Backend, Kind};
use crate::crypto::Keys;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::pack::{BlobType, PackEntry};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a blob lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlobLocation {
    pub pack: Id,
    pub entry: PackEntry,
}

/// What one sync did.
#[derive(Debug, Default)]
pub struct SyncReport {
    /// Segments absorbed.
    pub absorbed: usize,
    /// Segments forgotten because they left the repository.
    pub forgotten: usize,
    /// Segments that could not be read, each named with the reason; they
    /// are skipped (and tried again at the next sync).
    pub bad: Vec<String>,
    /// Listed segments found gone when read: a prune's compaction replaced
    /// them meanwhile (it writes the replacement first), so the sync lists
    /// `index/` again rather than miss their packs.
    pub(super) vanished: Vec<Id>,
}

/// How many times one sync lists `index/` again: after listed segments
/// vanished before it could read them (each time means a prune compacted
/// the index meanwhile; a few in a row are already unlikely), and once to
/// confirm that known segments a listing missed are gone.
const RELISTS: usize = 8;

/// The local SQLite index cache.
pub struct Index {
    conn: Connection,
    path: PathBuf,
}

/// The layout version of the cache database (`PRAGMA user_version`). A
/// cache of another version is emptied and rebuilt: it is only a cache.
const CACHE_VERSION: i64 = 5;

/// How long a process waits for another's write to the cache (a rebuild
/// of a large index takes minutes) before giving up.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(600);

/// The connection settings: WAL (readers never wait for a writer), and a
/// page cache of 4 MiB: enough for the upper levels of the B-trees of a
/// ten-million-blob index (the leaves come from the operating system's
/// cache), and small enough that memory does not grow with the index.
const PRAGMAS: &str = "
PRAGMA journal_mode=WAL;
PRAGMA synchronous=NORMAL;
PRAGMA cache_size=-4096;
";

/// The tables. A pack may be listed by several segments (a run that
/// indexed another's orphan pack, a repair, a compaction): `pack_segments`
/// records each listing, and a pack lives as long as one remains. A blob
/// may be stored in several packs: `blobs` has a row per copy.
///
/// `removals` counts the changes that can take a blob out of what
/// [`Index::contains`] answers: a pack forgotten, a pack marked for
/// deletion. Triggers keep the count, whatever statement makes the change
/// (a copy of a blob leaves the cache only with its pack, and is marked
/// only when its pack is). `checked_trees` holds tree blobs whose every
/// blob (a file's chunks, a subdirectory's tree) was in the index at the
/// count recorded beside it: while the count is unchanged, that still
/// holds ([`Index::tree_checked`]).
const SCHEMA: &str = "
DROP TRIGGER IF EXISTS packs_forgotten;
DROP TRIGGER IF EXISTS packs_marked;
DROP TABLE IF EXISTS checked_trees;
DROP TABLE IF EXISTS removals;
DROP TABLE IF EXISTS blobs;
DROP TABLE IF EXISTS blob_base;
DROP INDEX IF EXISTS blob_base_by_first;
DROP TABLE IF EXISTS marked_packs;
DROP TABLE IF EXISTS marks;
DROP TABLE IF EXISTS pack_segments;
DROP TABLE IF EXISTS packs;
DROP TABLE IF EXISTS segments;
CREATE TABLE segments(id BLOB PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE packs(
  num INTEGER PRIMARY KEY,
  id BLOB NOT NULL UNIQUE,
  size INTEGER NOT NULL,
  trees_only INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE pack_segments(
  pack INTEGER NOT NULL,
  segment BLOB NOT NULL,
  PRIMARY KEY(pack, segment)
) WITHOUT ROWID;
CREATE INDEX pack_segments_by_segment ON pack_segments(segment);
CREATE TABLE blobs(
  id BLOB NOT NULL,
  pack INTEGER NOT NULL,
  type INTEGER NOT NULL,
  offset INTEGER NOT NULL,
  stored_len INTEGER NOT NULL,
  plain_len INTEGER NOT NULL,
  compression INTEGER NOT NULL,
  marked INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(id, pack)
) WITHOUT ROWID;
CREATE TABLE blob_base(
  first BLOB NOT NULL,
  n INTEGER NOT NULL,
  rows BLOB NOT NULL
);
CREATE INDEX blob_base_by_first ON blob_base(first);
CREATE TABLE marks(id BLOB PRIMARY KEY, plan INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE marked_packs(
  pack BLOB NOT NULL,
  mark BLOB NOT NULL,
  PRIMARY KEY(pack, mark)
) WITHOUT ROWID;
CREATE INDEX marked_packs_by_mark ON marked_packs(mark);
CREATE TABLE removals(n INTEGER NOT NULL);
INSERT INTO removals(n) VALUES (0);
CREATE TABLE checked_trees(
  removals INTEGER NOT NULL,
  id BLOB NOT NULL,
  PRIMARY KEY(removals, id)
) WITHOUT ROWID;
CREATE TRIGGER packs_forgotten AFTER DELETE ON packs
  BEGIN UPDATE removals SET n = n + 1; END;
CREATE TRIGGER packs_marked AFTER INSERT ON marked_packs
  BEGIN UPDATE removals SET n = n + 1; END;
";

/// The secondary indexes of `blobs` (by pack, and the marked copies by
/// pack). A bulk load into an empty cache drops and rebuilds them.
pub(super) const BLOB_INDEXES: &str = "
CREATE INDEX IF NOT EXISTS blobs_by_pack ON blobs(pack);
CREATE INDEX IF NOT EXISTS blobs_marked ON blobs(pack) WHERE marked = 1;
";

/// Drops what [`BLOB_INDEXES`] creates.
pub(super) const DROP_BLOB_INDEXES: &str =
    "DROP INDEX IF EXISTS blobs_by_pack; DROP INDEX IF EXISTS blobs_marked;";

/// [`Index::lookup`]'s queries of a blob's row: a copy in an unmarked pack,
/// then one in a marked pack.
const LOOKUP_ROW: [&str; 2] = [
    "SELECT pack, type, offset, stored_len, plain_len, compression
     FROM blobs WHERE id = ?1 AND marked = 0 LIMIT 1",
    "SELECT pack, type, offset, stored_len, plain_len, compression
     FROM blobs WHERE id = ?1 AND marked = 1 LIMIT 1",
];

/// New segments at or above which a sync into a cache with no segments
/// stores their blobs as the base's sorted blocks ([`super::bulk`]).
const BASE_FROM: usize = 16;

/// `blobs.marked` follows `marked_packs`: a copy in a pack that a deletion
/// plan lists is marked (backups do not deduplicate against it, readers
/// prefer another copy).
const APPLY_MARKS: &str = "
UPDATE blobs SET marked = 1 WHERE marked = 0 AND pack IN
  (SELECT p.num FROM packs p WHERE p.id IN (SELECT pack FROM marked_packs));
UPDATE blobs SET marked = 0 WHERE marked = 1 AND pack NOT IN
  (SELECT p.num FROM packs p WHERE p.id IN (SELECT pack FROM marked_packs));
";

/// Packs no segment lists any more, and their blobs, go.
const FORGET_UNLISTED: &str = "
DELETE FROM blobs WHERE pack IN
  (SELECT num FROM packs WHERE num NOT IN (SELECT pack FROM pack_segments));
DELETE FROM packs WHERE num NOT IN (SELECT pack FROM pack_segments);
";

impl Index {
    /// Opens (creating if needed) the cache database at `path`. A database
    /// SQLite cannot read is removed and started afresh.
    pub fn open(path: &Path) -> Result<Index> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
        }
        match Self::open_at(path) {
            Ok(i) => Ok(i),
            Err(Error::Sqlite {
                source: rusqlite::Error::SqliteFailure(f, _),
                ..
            }) if matches!(
                f.code,
                rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt
            ) =>
            {
                for ext in ["", "-wal", "-shm"] {
                    let mut p = path.as_os_str().to_owned();
                    p.push(ext);
                    let _ = std::fs::remove_file(PathBuf::from(p));
                }
                Self::open_at(path)
            }
            Err(e) => Err(e),
        }
    }

    fn open_at(path: &Path) -> Result<Index> {
        let conn = Connection::open(path).map_err(|e| Error::sqlite(path, e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| Error::sqlite(path, e))?;
        // Two processes creating the cache at once: switching a new
        // database to WAL can fail as busy without waiting; try again.
        let start = std::time::Instant::now();
        loop {
            match conn.execute_batch(PRAGMAS) {
                Ok(()) => break,
                Err(rusqlite::Error::SqliteFailure(f, _))
                    if f.code == rusqlite::ErrorCode::DatabaseBusy
                        && start.elapsed() < BUSY_TIMEOUT =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(Error::sqlite(path, e)),
            }
        }
        let mut index = Index {
            conn,
            path: path.to_path_buf(),
        };
        index.ensure_schema()?;
        Ok(index)
    }

    /// Creates the tables, or replaces those of another cache version.
    fn ensure_schema(&mut self) -> Result<()> {
        let version =
            |c: &Connection| c.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0));
        if version(&self.conn).map_err(|e| self.err(e))? == CACHE_VERSION {
            return Ok(());
        }
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| Error::sqlite(&path, e))?;
        // Another process may have done it meanwhile.
        if version(&tx).map_err(|e| Error::sqlite(&path, e))? != CACHE_VERSION {
            tx.execute_batch(SCHEMA)
                .and_then(|_| tx.execute_batch(BLOB_INDEXES))
                .map_err(|e| Error::sqlite(&path, e))?;
            tx.execute_batch(&format!("PRAGMA user_version = {CACHE_VERSION}"))
                .map_err(|e| Error::sqlite(&path, e))?;
        }
        tx.commit().map_err(|e| Error::sqlite(&path, e))
    }

    fn err(&self, e: rusqlite::Error) -> Error {
        Error::sqlite(&self.path, e)
    }

    /// Another connection to this cache for a backup's questions, many to
    /// a read transaction (see [`super::ReadView`]), with a page cache of
    /// up to 4 MiB (as the cache's own connection).
    pub fn read_view(&self) -> Result<super::ReadView> {
        self.read_view_with_cache(4096)
    }

    /// [`Index::read_view`] with a page cache of up to `cache_kib` KiB: a
    /// backup's dedup checks use one such view per thread asking.
    pub fn read_view_with_cache(&self, cache_kib: u32) -> Result<super::ReadView> {
        super::ReadView::open(&self.path, cache_kib)
    }

    /// The database file (another connection may attach it read-only, as
    /// prune's usage database does).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Brings the cache up to date with `index/` in the repository: absorbs
    /// new segments first, then forgets vanished ones (so a pack that moved
    /// from a vanished segment to a new one is never missing in between).
    ///
    /// The deletion marks are read **before** `index/` is listed, and marks
    /// that left are forgotten only after. A prune deletes a mark only once
    /// no segment lists its packs any more (SPEC section 21, rule 5), so a
    /// mark seen gone means its packs are gone from the listing that
    /// follows; read the other way round, a sweep in between would leave
    /// its deleted packs indexed and unmarked here, and read from.
    ///
    /// A listed segment that is gone when read was replaced by a prune's
    /// compaction, which writes the segments replacing it before it deletes
    /// it: the sync lists `index/` again and absorbs those (at most
    /// [`RELISTS`] times), so no pack the repository still indexes is
    /// missing from the cache when it returns.
    ///
    /// A known segment is forgotten only when two listings miss it, the
    /// second begun after the first ended. One listing is not enough: a
    /// `readdir` or a page of S3 keys that runs while a prune replaces a
    /// segment need return neither the old segment (deleted meanwhile) nor
    /// its replacement (created meanwhile). The replacement existed before
    /// the old one was deleted, so the second listing holds it and the sync
    /// absorbs it before it forgets the old one. The second listing is made
    /// only when the first misses a known segment (after a prune).
    pub fn sync(&mut self, backend: &dyn Backend, keys: &Keys) -> Result<SyncReport> {
        let mut report = SyncReport::default();
        let (mut marks_changed, marks_gone) = self.absorb_new_marks(backend, keys, &mut report)?;
        // What the cache knew right after the listing: a segment another
        // process absorbs later (a backup's new one) is not taken for gone.
        let (mut listed, mut misnamed) = list_segments(backend)?;
        let mut known = self.known_segments()?;
        // Known segments an earlier listing missed (once one has).
        let mut missed: Option<HashSet<Id>> = None;
        let mut gone = HashSet::new();
        for relist in 0..=RELISTS {
            let mut vanished = Vec::new();
            if listed.iter().any(|n| !known.contains(n)) {
                self.absorb_new(backend, keys, &listed, &mut report)?;
                vanished = std::mem::take(&mut report.vanished);
            }
            if relist == RELISTS {
                report.bad.extend(vanished.iter().map(|id| {
                    format!(
                        "{}: removed while it was being read, again and again (prunes ran meanwhile); skipped",
                        Kind::Index.path(&id.to_hex())
                    )
                }));
                // Forgets only what two listings missed, if two ran.
                if let Some(m) = &missed {
                    gone = m.iter().filter(|n| !listed.contains(n)).copied().collect();
                }
                break;
            }
            if vanished.is_empty() {
                let missing: HashSet<Id> = known.difference(&listed).copied().collect();
                match missed.take() {
                    Some(m) => {
                        gone = m.intersection(&missing).copied().collect();
                        break;
                    }
                    None if missing.is_empty() => break,
                    None => missed = Some(missing),
                }
            }
            (listed, misnamed) = list_segments(backend)?;
            known = self.known_segments()?;
        }
        report.bad.extend(misnamed);
        if !gone.is_empty() {
            let gone: Vec<Id> = gone.into_iter().collect();
            self.forget_segments(&gone)?;
            report.forgotten = gone.len();
        }
        marks_changed |= self.forget_marks(&marks_gone)?;
        if marks_changed || report.absorbed > 0 {
            if self.has_marks()? {
                self.materialize()?;
            }
            self.conn
                .execute_batch(APPLY_MARKS)
                .map_err(|e| self.err(e))?;
        }
        Ok(report)
    }

    /// Absorbs the listed segments the cache does not know, in one
    /// transaction, sorted as one bulk load ([`super::bulk`]). The known
    /// set is read again under the write lock: a process that waited for
    /// another's load does not absorb the same segments twice.
    fn absorb_new(
        &mut self,
        backend: &dyn Backend,
        keys: &Keys,
        listed: &HashSet<Id>,
        report: &mut SyncReport,
    ) -> Result<()> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| Error::sqlite(&path, e))?;
        let known = known_segments(&tx).map_err(|e| Error::sqlite(&path, e))?;
        let mut new: Vec<&Id> = listed.iter().filter(|n| !known.contains(*n)).collect();
        new.sort();
        let target = if known.is_empty() && new.len() >= BASE_FROM {
            Target::Base
        } else {
            Target::Rows
        };
        super::bulk::load(&tx, &path, backend, keys, &new, target, report)?;
        tx.commit().map_err(|e| Error::sqlite(&path, e))
    }

    /// Absorbs the deletion marks in `marks/` that the cache does not know;
    /// returns whether the set of marked packs may have changed, and the
    /// known marks that are no longer listed (for [`Index::forget_marks`]).
    fn absorb_new_marks(
        &mut self,
        backend: &dyn Backend,
        keys: &Keys,
        report: &mut SyncReport,
    ) -> Result<(bool, Vec<String>)> {
        let listed: HashSet<String> = backend
            .list(Kind::Mark)?
            .into_iter()
            .map(|e| e.name)
            .collect();
        let known: HashSet<String> = {
            let mut st = self
                .conn
                .prepare("SELECT id FROM marks")
                .map_err(|e| self.err(e))?;
            let rows = st
                .query_map([], |r| r.get::<_, [u8; 32]>(0))
                .map_err(|e| self.err(e))?;
            rows.map(|r| r.map(|b| Id(b).to_hex()))
                .collect::<rusqlite::Result<_>>()
                .map_err(|e| self.err(e))?
        };
        let mut changed = false;
        let mut new: Vec<&String> = listed.iter().filter(|n| !known.contains(*n)).collect();
        new.sort();
        for name in new {
            let id = match Id::from_hex(name) {
                Ok(id) => id,
                Err(_) => {
                    report.bad.push(format!(
                        "{}: not a deletion mark (its name is not an id); skipped",
                        Kind::Mark.path(name)
                    ));
                    continue;
                }
            };
            match read_mark(backend, keys, name) {
                Ok(mark) => changed |= self.absorb_mark(&id, &mark)?,
                // Removed since it was listed: the prune that wrote it has
                // finished or dropped its plan, so it marks nothing now.
                Err(e) if e.is_not_found() => {}
                Err(e) => report.bad.push(format!("{e}; skipped")),
            }
        }
        let gone = known.into_iter().filter(|n| !listed.contains(n)).collect();
        Ok((changed, gone))
    }

    /// Forgets marks `gone` (their plans are done or dropped); returns
    /// whether there were any.
    fn forget_marks(&mut self, gone: &[String]) -> Result<bool> {
        if gone.is_empty() {
            return Ok(false);
        }
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| Error::sqlite(&path, e))?;
        for name in gone {
            let id = Id::from_hex(name)?;
            tx.execute("DELETE FROM marked_packs WHERE mark = ?1", params![id.0])
                .and_then(|_| tx.execute("DELETE FROM marks WHERE id = ?1", params![id.0]))
                .map_err(|e| Error::sqlite(&path, e))?;
        }
        tx.commit().map_err(|e| Error::sqlite(&path, e))?;
        Ok(true)
    }

    /// Records a deletion mark; returns whether it marks packs.
    fn absorb_mark(&mut self, id: &Id, mark: &Mark) -> Result<bool> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| Error::sqlite(&path, e))?;
        let plan = matches!(mark, Mark::Plan(_));
        tx.execute(
            "INSERT OR IGNORE INTO marks(id, plan) VALUES (?1, ?2)",
            params![id.0, plan],
        )
        .map_err(|e| Error::sqlite(&path, e))?;
        if let Mark::Plan(p) = mark {
            let mut st = tx
                .prepare_cached("INSERT OR IGNORE INTO marked_packs(pack, mark) VALUES (?1, ?2)")
                .map_err(|e| Error::sqlite(&path, e))?;
            for mp in &p.packs {
                st.execute(params![mp.id.0, id.0])
                    .map_err(|e| Error::sqlite(&path, e))?;
            }
        }
        tx.commit().map_err(|e| Error::sqlite(&path, e))?;
        Ok(plan)
    }

    /// The segments that list any of `packs`.
    pub fn segments_listing(&self, packs: &[Id]) -> Result<Vec<Id>> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT s.segment FROM pack_segments s JOIN packs p ON p.num = s.pack
                 WHERE p.id = ?1",
            )
            .map_err(|e| self.err(e))?;
        let mut out = HashSet::new();
        for p in packs {
            let rows = st
                .query_map(params![p.0], |r| r.get::<_, [u8; 32]>(0))
                .map_err(|e| self.err(e))?;
            for r in rows {
                out.insert(Id(r.map_err(|e| self.err(e))?));
            }
        }
        let mut out: Vec<Id> = out.into_iter().collect();
        out.sort();
        Ok(out)
    }

    /// Whether a deletion plan lists pack `pack`.
    pub fn is_marked(&self, pack: &Id) -> Result<bool> {
        self.conn
            .prepare_cached("SELECT 1 FROM marked_packs WHERE pack = ?1")
            .and_then(|mut st| st.exists(params![pack.0]))
            .map_err(|e| self.err(e))
    }

    fn known_segments(&self) -> Result<HashSet<Id>> {
        known_segments(&self.conn).map_err(|e| self.err(e))
    }

    /// Forgets everything.
    pub fn clear(&mut self) -> Result<()> {
        self.conn
            .execute_batch(
                "DELETE FROM blobs; DELETE FROM blob_base; DELETE FROM pack_segments; DELETE FROM packs;
                 DELETE FROM segments; DELETE FROM marked_packs; DELETE FROM marks;",
            )
            .map_err(|e| self.err(e))
    }

    /// Records a segment's packs and blobs as listed by segment `seg_id`, in
    /// one transaction (a reader sees all of it or none). Absorbing a
    /// segment twice changes nothing.
    pub fn absorb(&mut self, seg_id: &Id, seg: &IndexSegment) -> Result<()> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| Error::sqlite(&path, e))?;
        insert_unlisted(&tx, &seg.packs)
            .and_then(|nums| list_under(&tx, &nums, seg_id))
            .map_err(|e| Error::sqlite(&path, e))?;
        tx.commit().map_err(|e| Error::sqlite(&path, e))
    }

    /// [`Index::absorb`] of a segment being written: `write` stores it (and
    /// returns its ID) on another thread while its packs and blobs are
    /// inserted here, in one transaction that lists them under that ID and
    /// commits only once `write` has succeeded. So the cache still holds
    /// nothing a segment in the repository does not list, and the two take
    /// the time of the longer instead of the sum (the end of a backup
    /// waits for both). A failed write leaves the cache as it was; a write
    /// that succeeded before the cache failed leaves a segment the next
    /// sync absorbs.
    pub fn absorb_writing<F>(&mut self, seg: &IndexSegment, write: F) -> Result<Id>
    where
        F: FnOnce() -> Result<Id> + Send,
    {
        let path = self.path.clone();
        let sqlite = |e| Error::sqlite(&path, e);
        let conn = &mut self.conn;
        std::thread::scope(|s| {
            let writer = s.spawn(write);
            let absorbed = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .and_then(|tx| insert_unlisted(&tx, &seg.packs).map(|nums| (tx, nums)));
            let sid = writer
                .join()
                .unwrap_or_else(|_| Err(Error::internal("the index segment writer panicked")))?;
            let (tx, nums) = absorbed.map_err(sqlite)?;
            list_under(&tx, &nums, &sid).map_err(sqlite)?;
            tx.commit().map_err(sqlite)?;
            Ok(sid)
        })
    }

    /// Forgets segments that left the repository, and the packs (with their
    /// blobs) that no remaining segment lists.
    fn forget_segments(&mut self, gone: &[Id]) -> Result<()> {
        self.materialize()?;
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| Error::sqlite(&path, e))?;
        for id in gone {
            tx.execute(
                "DELETE FROM pack_segments WHERE segment = ?1",
                params![id.0],
            )
            .map_err(|e| Error::sqlite(&path, e))?;
            tx.execute("DELETE FROM segments WHERE id = ?1", params![id.0])
                .map_err(|e| Error::sqlite(&path, e))?;
        }
        tx.execute_batch(FORGET_UNLISTED)
            .map_err(|e| Error::sqlite(&path, e))?;
        tx.commit().map_err(|e| Error::sqlite(&path, e))
    }

    /// Whether the cache holds exactly what segment `seg_id` says: every
    /// pack with its size, listed by the segment, and every blob at its
    /// place. (`check` compares each segment it reads with the cache, and
    /// repairs the cache with [`Index::absorb`] where they differ.)
    pub fn agrees_with(&mut self, seg_id: &Id, seg: &IndexSegment) -> Result<bool> {
        self.materialize()?;
        let tx = self.conn.unchecked_transaction().map_err(|e| self.err(e))?;
        let mut listed = tx
            .prepare_cached(
                "SELECT p.size FROM packs p JOIN pack_segments s ON s.pack = p.num
                 WHERE p.id = ?1 AND s.segment = ?2",
            )
            .map_err(|e| self.err(e))?;
        let mut blob = tx
            .prepare_cached(
                "SELECT 1 FROM blobs b JOIN packs p ON p.num = b.pack
                 WHERE b.id = ?1 AND p.id = ?2 AND b.type = ?3 AND b.offset = ?4
                 AND b.stored_len = ?5 AND b.plain_len = ?6 AND b.compression = ?7",
            )
            .map_err(|e| self.err(e))?;
        for p in &seg.packs {
            let size = listed
                .query_row(params![p.id.0, seg_id.0], |r| r.get::<_, i64>(0))
                .optional()
                .map_err(|e| self.err(e))?;
            if size != Some(p.size as i64) {
                return Ok(false);
            }
            for b in &p.blobs {
                let found = blob
                    .exists(params![
                        b.id.0,
                        p.id.0,
                        b.ty as u8,
                        b.offset as i64,
                        b.stored_len as i64,
                        b.plain_len as i64,
                        b.compression
                    ])
                    .map_err(|e| self.err(e))?;
                if !found {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Where blob `id` is stored, if anywhere (one of its copies, one in a
    /// pack no deletion plan lists if there is such a copy).
    ///
    /// Plain primary-key queries only ([`LOOKUP_ROW`], then the pack's ID):
    /// SQLite (built with STAT4) re-prepared on every run a join with the
    /// packs, `ORDER BY marked`, and `marked = ?` with a changing value
    /// (measured with `sqlite3_stmt_status`; the re-prepare was about three
    /// quarters of a lookup's time). `lookup_reuses_its_prepared_statements`
    /// keeps it so.
    pub fn lookup(&self, id: &Id) -> Result<Option<BlobLocation>> {
        self.lookup_in(id, &mut HashMap::new())
    }

    /// [`Index::lookup`], with the pack IDs already found (by pack number)
    /// in `packs`: a run of lookups asks for each pack's ID once, not once
    /// per blob.
    fn lookup_in(&self, id: &Id, packs: &mut HashMap<i64, Id>) -> Result<Option<BlobLocation>> {
        lookup_on(&self.conn, id, packs).map_err(|e| self.err(e))
    }

    /// Whether the cache holds a base (blobs absorbed in bulk, kept as
    /// sorted blocks rather than rows).
    pub fn has_base(&self) -> Result<bool> {
        has_base_on(&self.conn).map_err(|e| self.err(e))
    }

    fn has_marks(&self) -> Result<bool> {
        self.conn
            .prepare_cached("SELECT 1 FROM marked_packs LIMIT 1")
            .and_then(|mut st| st.exists([]))
            .map_err(|e| self.err(e))
    }

    /// Turns the base into rows of `blobs`, for what needs every blob as a
    /// row (SQL over the cache, deletion marks, forgetting packs). Nothing
    /// happens when there is no base. Readers see the base or the rows,
    /// never neither: it is one transaction.
    pub fn materialize(&mut self) -> Result<()> {
        if !self.has_base()? {
            return Ok(());
        }
        let path = self.path.clone();
        let sq = |e| Error::sqlite(&path, e);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sq)?;
        // Another process may have done it while this one waited.
        let still = tx
            .prepare("SELECT 1 FROM blob_base LIMIT 1")
            .and_then(|mut st| st.exists([]))
            .map_err(sq)?;
        if !still {
            return Ok(());
        }
        // The base is most of the cache (what came after it is a few runs'
        // segments): its rows go in without the secondary indexes, which
        // are built again afterwards with one sort each; kept, each row
        // would update them at a random place.
        tx.execute_batch(DROP_BLOB_INDEXES).map_err(sq)?;
        {
            let mut blocks = tx
                .prepare("SELECT rows FROM blob_base ORDER BY first")
                .map_err(sq)?;
            let mut ins = tx.prepare_cached(&insert_blobs_sql(1)).map_err(sq)?;
            let mut rows = blocks.query([]).map_err(sq)?;
            while let Some(r) = rows.next().map_err(sq)? {
                let block = r.get_ref(0).and_then(|v| Ok(v.as_blob()?)).map_err(sq)?;
                for rec in block.chunks_exact(std::mem::size_of::<bulk::Rec>()) {
                    if let Ok(rec) = rec.try_into() {
                        bulk::insert(&mut ins, rec).map_err(sq)?;
                    }
                }
            }
        }
        tx.execute("DELETE FROM blob_base", []).map_err(sq)?;
        tx.execute_batch(BLOB_INDEXES).map_err(sq)?;
        tx.commit().map_err(sq)
    }

    /// Looks up many blobs inside one read transaction (one lock instead of
    /// one per query); the answers are in the order of `ids`.
    pub fn lookup_many(&self, ids: &[Id]) -> Result<Vec<Option<BlobLocation>>> {
        let tx = self.read_transaction()?;
        let mut packs = HashMap::new();
        let out = ids
            .iter()
            .map(|id| self.lookup_in(id, &mut packs))
            .collect::<Result<Vec<_>>>()?;
        self.finish_read(tx)?;
        Ok(out)
    }

    /// A read transaction for a run of queries, or `None` inside one
    /// already open (a [`Index::begin_read`] scope).
    fn read_transaction(&self) -> Result<Option<rusqlite::Transaction<'_>>> {
        if !self.conn.is_autocommit() {
            return Ok(None);
        }
        let tx = self.conn.unchecked_transaction().map_err(|e| self.err(e))?;
        Ok(Some(tx))
    }

    fn finish_read(&self, tx: Option<rusqlite::Transaction<'_>>) -> Result<()> {
        match tx {
            Some(tx) => tx.finish().map_err(|e| self.err(e)),
            None => Ok(()),
        }
    }

    /// Opens a read transaction that the queries after it share until
    /// [`Index::end_read`]: one shared lock of the database for a whole
    /// read-only command (`diff` asks for thousands of blobs one at a
    /// time, and each query alone takes and drops the lock). Readers in
    /// WAL mode do not block writers; this one sees the cache as it was
    /// when the scope began. Does nothing inside a transaction.
    pub fn begin_read(&self) -> Result<bool> {
        if !self.conn.is_autocommit() {
            return Ok(false);
        }
        self.conn.execute_batch("BEGIN").map_err(|e| self.err(e))?;
        Ok(true)
    }

    /// Ends the scope [`Index::begin_read`] opened.
    pub fn end_read(&self) -> Result<()> {
        if self.conn.is_autocommit() {
            return Ok(());
        }
        self.conn.execute_batch("COMMIT").map_err(|e| self.err(e))
    }

    /// Whether blob `id` is stored in a pack that no deletion plan lists:
    /// what a backup may deduplicate against (a blob only marked packs hold
    /// is stored again, so nothing new comes to depend on a marked pack).
    pub fn contains(&self, id: &Id) -> Result<bool> {
        contains_on(&self.conn, id, true).map_err(|e| self.err(e))
    }

    /// The ones of `ids` that the index [`Index::contains`], asked in one
    /// read transaction: a backup checks a whole directory's unchanged files
    /// at once rather than taking the database's read lock once per file.
    pub fn contained_among(&self, ids: &[Id]) -> Result<HashSet<Id>> {
        let mut found = HashSet::new();
        if ids.is_empty() {
            return Ok(found);
        }
        let tx = self.read_transaction()?;
        for id in ids {
            if self.contains(id)? {
                found.insert(*id);
            }
        }
        self.finish_read(tx)?;
        Ok(found)
    }

    /// The positions in `packs` of those that no segment in the cache
    /// lists, in order, asked in one read transaction. Each question reads
    /// only the index of pack IDs (a covering index: no pack's row is
    /// read), and nothing of the index is held in memory: a client's first
    /// backup into a repository of 150 k packs (10 million blobs) asks
    /// this about every pack in it. Given `packs` sorted, the ID index is
    /// read once, in its order.
    pub fn packs_not_listed(&self, packs: &[Id]) -> Result<Vec<usize>> {
        let mut out = Vec::new();
        if packs.is_empty() {
            return Ok(out);
        }
        let tx = self.read_transaction()?;
        {
            let mut st = self
                .conn
                .prepare_cached("SELECT 1 FROM packs WHERE id = ?1")
                .map_err(|e| self.err(e))?;
            for (i, p) in packs.iter().enumerate() {
                if !st.exists(params![p.0]).map_err(|e| self.err(e))? {
                    out.push(i);
                }
            }
        }
        self.finish_read(tx)?;
        Ok(out)
    }

    /// The count of removals (packs forgotten or marked) this cache has
    /// seen: read before a backup's first question to the index, and given
    /// back to [`Index::record_checked_trees`] at its end.
    pub fn removals(&self) -> Result<i64> {
        self.conn
            .prepare_cached("SELECT n FROM removals")
            .and_then(|mut st| st.query_row([], |r| r.get(0)))
            .map_err(|e| self.err(e))
    }

    /// Whether every blob tree `id` refers to directly (its files' chunks,
    /// its subdirectories' trees) is in the index: recorded so by a backup,
    /// and no pack forgotten or marked since. A backup then takes over the
    /// unchanged files of a directory whose parent tree this is without
    /// asking for each chunk.
    pub fn tree_checked(&self, id: &Id) -> Result<bool> {
        tree_checked_on(&self.conn, id).map_err(|e| self.err(e))
    }

    /// Records `trees` as checked ([`Index::tree_checked`]), as of
    /// `removals` (the count read before anything about them was asked):
    /// nothing is recorded if a pack was forgotten or marked since, and
    /// records of earlier counts, which no longer hold, are dropped.
    /// Returns whether it recorded them.
    pub fn record_checked_trees(&mut self, trees: &[Id], removals: i64) -> Result<bool> {
        let path = self.path.clone();
        let sq = |e| Error::sqlite(&path, e);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sq)?;
        let now: i64 = tx
            .query_row("SELECT n FROM removals", [], |r| r.get(0))
            .map_err(sq)?;
        if now != removals {
            return Ok(false);
        }
        // The count only grows: older records are a range of the key.
        tx.execute("DELETE FROM checked_trees WHERE removals < ?1", [now])
            .map_err(sq)?;
        {
            // A tree recorded already (a directory backed up again
            // unchanged) is not written again.
            let mut ins = tx
                .prepare_cached("INSERT OR IGNORE INTO checked_trees(removals, id) VALUES (?1, ?2)")
                .map_err(sq)?;
            for t in trees {
                ins.execute(params![now, t.0]).map_err(sq)?;
            }
        }
        tx.commit().map_err(sq)?;
        Ok(true)
    }

    /// Number of indexed blobs (each copy counted).
    pub fn blob_count(&self) -> Result<u64> {
        self.conn
            .query_row(
                "SELECT (SELECT count(*) FROM blobs) + (SELECT coalesce(sum(n), 0) FROM blob_base)",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as u64)
            .map_err(|e| self.err(e))
    }

    /// Calls `f` with each indexed blob's type and id, once per blob
    /// (copies in several packs count once), in id order; rows stream from
    /// SQLite, so memory stays flat however many blobs there are.
    pub fn for_each_blob(&mut self, mut f: impl FnMut(BlobType, Id) -> Result<()>) -> Result<()> {
        self.materialize()?;
        let mut st = self
            .conn
            .prepare("SELECT DISTINCT id, type FROM blobs ORDER BY id, type")
            .map_err(|e| self.err(e))?;
        let mut rows = st.query([]).map_err(|e| self.err(e))?;
        while let Some(r) = rows.next().map_err(|e| Error::sqlite(&self.path, e))? {
            let id: [u8; 32] = r.get(0).map_err(|e| Error::sqlite(&self.path, e))?;
            let ty: u8 = r.get(1).map_err(|e| Error::sqlite(&self.path, e))?;
            let ty = BlobType::from_u8(ty)
                .ok_or_else(|| Error::corrupt(self.path.display(), "unknown blob type in cache"))?;
            f(ty, Id(id))?;
        }
        Ok(())
    }

    /// Every indexed pack with its recorded size.
    pub fn packs(&self) -> Result<Vec<(Id, u64)>> {
        let mut st = self
            .conn
            .prepare("SELECT id, size FROM packs ORDER BY id")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([], |r| Ok((Id(r.get(0)?), r.get::<_, i64>(1)? as u64)))
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    /// The recorded size of pack `pack`, if the index lists it.
    pub fn pack_size(&self, pack: &Id) -> Result<Option<u64>> {
        let mut st = self
            .conn
            .prepare_cached("SELECT size FROM packs WHERE id = ?1")
            .map_err(|e| self.err(e))?;
        let mut rows = st.query(params![pack.0]).map_err(|e| self.err(e))?;
        match rows.next().map_err(|e| self.err(e))? {
            Some(r) => Ok(Some(r.get::<_, i64>(0).map_err(|e| self.err(e))? as u64)),
            None => Ok(None),
        }
    }

    /// The recorded size of pack `pack` if the index lists it as holding
    /// only tree blobs.
    pub fn tree_pack_size(&self, pack: &Id) -> Result<Option<u64>> {
        self.conn
            .prepare_cached("SELECT size FROM packs WHERE id = ?1 AND trees_only = 1")
            .and_then(|mut st| {
                st.query_row(params![pack.0], |r| r.get::<_, i64>(0))
                    .optional()
            })
            .map(|s| s.map(|s| s as u64))
            .map_err(|e| self.err(e))
    }

    /// The blobs the index places in pack `pack`, by offset.
    pub fn blobs_in_pack(&mut self, pack: &Id) -> Result<Vec<PackEntry>> {
        self.materialize()?;
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT b.id, b.type, b.offset, b.stored_len, b.plain_len, b.compression
                 FROM blobs b JOIN packs p ON p.num = b.pack WHERE p.id = ?1 ORDER BY b.offset",
            )
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map(params![pack.0], |r| {
                Ok((
                    r.get::<_, [u8; 32]>(0)?,
                    r.get::<_, u8>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, u8>(5)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for r in rows {
            let (id, ty, off, sl, pl, c) = r.map_err(|e| self.err(e))?;
            let ty = BlobType::from_u8(ty)
                .ok_or_else(|| Error::corrupt(self.path.display(), "unknown blob type in cache"))?;
            out.push(PackEntry {
                ty,
                id: Id(id),
                offset: off as u64,
                stored_len: sl as u32,
                plain_len: pl as u32,
                compression: c,
            });
        }
        Ok(out)
    }

    /// Which of `ids` the index also places in a pack outside `packs`, one
    /// no deletion plan marks (a copy that stays).
    pub fn copies_elsewhere(&mut self, packs: &HashSet<Id>, ids: &[Id]) -> Result<HashSet<Id>> {
        self.materialize()?;
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT p.id FROM blobs b JOIN packs p ON p.num = b.pack
                 WHERE b.id = ?1 AND b.marked = 0",
            )
            .map_err(|e| self.err(e))?;
        let mut out = HashSet::new();
        for id in ids {
            let holders = st
                .query_map(params![id.0], |r| r.get::<_, [u8; 32]>(0))
                .map_err(|e| self.err(e))?;
            for h in holders {
                if !packs.contains(&Id(h.map_err(|e| self.err(e))?)) {
                    out.insert(*id);
                    break;
                }
            }
        }
        Ok(out)
    }
}

/// The segments a cache (or a transaction on it) has absorbed.
/// The segments in `index/`, and a problem for each name there that is not
/// a segment's.
fn list_segments(backend: &dyn Backend) -> Result<(HashSet<Id>, Vec<String>)> {
    let mut listed = HashSet::new();
    let mut misnamed = Vec::new();
    for e in backend.list(Kind::Index)? {
        match Id::from_hex(&e.name) {
            Ok(id) => {
                listed.insert(id);
            }
            Err(_) => misnamed.push(format!(
                "{}: not an index segment (its name is not an id); skipped",
                Kind::Index.path(&e.name)
            )),
        }
    }
    Ok((listed, misnamed))
}

fn known_segments(c: &Connection) -> rusqlite::Result<HashSet<Id>> {
    let mut st = c.prepare("SELECT id FROM segments")?;
    let rows = st.query_map([], |r| r.get::<_, [u8; 32]>(0))?;
    rows.map(|r| r.map(Id)).collect()
}

/// Records pack `pack` of `size` bytes as listed by segment `seg`; returns
/// its number in the cache.
pub(super) fn insert_pack(
    tx: &rusqlite::Transaction<'_>,
    pack: &IndexPack,
    seg: &Id,
) -> rusqlite::Result<i64> {
    let num = insert_pack_row(tx, pack)?;
    list_pack(tx, num, seg)?;
    Ok(num)
}

/// Inserts pack `pack` (unless there) and returns its number; no segment
/// lists it yet.
fn insert_pack_row(tx: &rusqlite::Transaction<'_>, pack: &IndexPack) -> rusqlite::Result<i64> {
    let trees_only = !pack.blobs.is_empty() && pack.blobs.iter().all(|b| b.ty == BlobType::Tree);
    let added = tx
        .prepare_cached("INSERT OR IGNORE INTO packs(id, size, trees_only) VALUES (?1, ?2, ?3)")?
        .execute(params![pack.id.0, pack.size as i64, trees_only])?;
    let num: i64 = if added == 1 {
        tx.last_insert_rowid()
    } else {
        tx.prepare_cached("SELECT num FROM packs WHERE id = ?1")?
            .query_row(params![pack.id.0], |r| r.get(0))?
    };
    Ok(num)
}

/// Records that segment `seg` lists pack number `num`.
fn list_pack(tx: &rusqlite::Transaction<'_>, num: i64, seg: &Id) -> rusqlite::Result<()> {
    tx.prepare_cached("INSERT OR IGNORE INTO pack_segments(pack, segment) VALUES (?1, ?2)")?
        .execute(params![num, seg.0])?;
    Ok(())
}

/// Records segment `seg` as listing the packs numbered `nums`, and the
/// segment itself as known.
fn list_under(tx: &rusqlite::Transaction<'_>, nums: &[i64], seg: &Id) -> rusqlite::Result<()> {
    for &num in nums {
        list_pack(tx, num, seg)?;
    }
    tx.execute(
        "INSERT OR IGNORE INTO segments(id) VALUES (?1)",
        params![seg.0],
    )?;
    Ok(())
}

/// Inserts packs and their blobs with no segment listing them yet (a
/// caller's transaction lists them with [`list_under`] before it commits);
/// returns the packs' numbers. Blobs go in sorted by ID, so the B-tree is
/// filled in order rather than at random places (much faster once the
/// index is larger than SQLite's page cache). Many rows into an empty
/// table (a repository's first backup, or a cache's first segment) go in
/// without the secondary indexes, which are then built in one sorted pass:
/// 57 k rows took 70 instead of 93 ms.
fn insert_unlisted(
    tx: &rusqlite::Transaction<'_>,
    packs: &[IndexPack],
) -> rusqlite::Result<Vec<i64>> {
    let mut nums = Vec::with_capacity(packs.len());
    let mut rows: Vec<(&PackEntry, i64)> = Vec::new();
    for p in packs {
        let num = insert_pack_row(tx, p)?;
        nums.push(num);
        rows.extend(p.blobs.iter().map(|b| (b, num)));
    }
    rows.sort_by_key(|r| r.0.id);
    let rebuild = rows.len() >= REBUILD_ROWS
        && !tx
            .prepare_cached("SELECT 1 FROM blobs LIMIT 1")?
            .exists([])?;
    if rebuild {
        tx.execute_batch(DROP_BLOB_INDEXES)?;
    }
    // Many rows per statement: one step of the statement per batch instead
    // of one per row (57 k rows into a fresh cache, the end of a first
    // backup: 69-70 ms before, 55-58 ms with batches of 64).
    let mut batches = rows.chunks_exact(INSERT_BATCH);
    if batches.len() > 0 {
        let mut st = tx.prepare_cached(&insert_blobs_sql(INSERT_BATCH))?;
        for batch in &mut batches {
            bind_rows(&mut st, batch)?;
            st.raw_execute()?;
        }
    }
    let rest = batches.remainder();
    if !rest.is_empty() {
        let mut st = tx.prepare_cached(&insert_blobs_sql(1))?;
        for row in rest.chunks(1) {
            bind_rows(&mut st, row)?;
            st.raw_execute()?;
        }
    }
    if rebuild {
        tx.execute_batch(BLOB_INDEXES)?;
    }
    Ok(nums)
}

/// Rows of `blobs` one statement of [`insert_unlisted`] inserts.
const INSERT_BATCH: usize = 64;

/// `INSERT OR IGNORE` of `rows` rows of `blobs` (bound by [`bind_rows`]).
pub(super) fn insert_blobs_sql(rows: usize) -> String {
    let one = "(?,?,?,?,?,?,?)";
    let values = vec![one; rows].join(",");
    format!(
        "INSERT OR IGNORE INTO blobs(id, pack, type, offset, stored_len, plain_len, compression)
         VALUES {values}"
    )
}

/// Binds `rows` (blob, pack number) to [`insert_blobs_sql`] of as many rows.
pub(super) fn bind_rows(
    st: &mut rusqlite::Statement<'_>,
    rows: &[(&PackEntry, i64)],
) -> rusqlite::Result<()> {
    for (i, (b, num)) in rows.iter().enumerate() {
        let at = i * 7;
        st.raw_bind_parameter(at + 1, b.id.0)?;
        st.raw_bind_parameter(at + 2, num)?;
        st.raw_bind_parameter(at + 3, b.ty as u8)?;
        st.raw_bind_parameter(at + 4, b.offset as i64)?;
        st.raw_bind_parameter(at + 5, b.stored_len as i64)?;
        st.raw_bind_parameter(at + 6, b.plain_len as i64)?;
        st.raw_bind_parameter(at + 7, b.compression)?;
    }
    Ok(())
}

/// Fewest rows [`insert_unlisted`] puts into an empty table before
/// building its secondary indexes. Dropping and creating an index changes
/// the schema, which makes every other connection to the cache prepare its
/// statements again; only a large insert is worth that (57 k rows were
/// measured; smaller ones were not, so they keep the plain path).
const REBUILD_ROWS: usize = 4096;

/// Whether blob `id` is in an unmarked pack, asked on `conn` (the cache's
/// own connection, or a backup's [`super::ReadView`]).
/// `base`: whether the cache may hold a base (a view that knows it holds
/// none skips that second search, a backup's every miss).
pub(super) fn contains_on(conn: &Connection, id: &Id, base: bool) -> rusqlite::Result<bool> {
    let mut st = conn.prepare_cached("SELECT 1 FROM blobs WHERE id = ?1 AND marked = 0")?;
    if st.exists(params![id.0])? {
        return Ok(true);
    }
    // The base exists only while no pack is marked.
    Ok(base && base_lookup_on(conn, id)?.is_some())
}

/// Whether the cache holds a base, asked on `conn`.
pub(super) fn has_base_on(conn: &Connection) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM blob_base LIMIT 1")?
        .exists([])
}

/// [`Index::lookup`] asked on `conn`, with the pack IDs already found (by
/// pack number) in `packs`.
pub(super) fn lookup_on(
    conn: &Connection,
    id: &Id,
    packs: &mut HashMap<i64, Id>,
) -> rusqlite::Result<Option<BlobLocation>> {
    // Unmarked rows first, then the base (which exists only while no pack
    // is marked, so a blob found there is in an unmarked pack), then the
    // marked rows: where a new client's first open loaded a base, a
    // restore finds each of its blobs with one miss, not two.
    let [unmarked, marked] = LOOKUP_ROW;
    let found = match row_lookup_on(conn, unmarked, id)? {
        Some(found) => Some(found),
        None => match base_lookup_on(conn, id)? {
            Some(found) => Some(found),
            None => row_lookup_on(conn, marked, id)?,
        },
    };
    let Some((num, entry)) = found else {
        return Ok(None);
    };
    if let Some(pack) = packs.get(&num) {
        return Ok(Some(BlobLocation { pack: *pack, entry }));
    }
    let mut st = conn.prepare_cached("SELECT id FROM packs WHERE num = ?1")?;
    let pack = st
        .query_row(params![num], |r| r.get::<_, [u8; 32]>(0))
        .optional()?;
    Ok(pack.map(|pack| {
        packs.insert(num, Id(pack));
        BlobLocation {
            pack: Id(pack),
            entry,
        }
    }))
}

/// Blob `id` in the rows of `blobs` that query `sql` (one of
/// [`LOOKUP_ROW`]) selects: its pack number and entry.
fn row_lookup_on(
    conn: &Connection,
    sql: &str,
    id: &Id,
) -> rusqlite::Result<Option<(i64, PackEntry)>> {
    let row = conn
        .prepare_cached(sql)?
        .query_row(params![id.0], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, u8>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, u8>(5)?,
            ))
        })
        .optional()?;
    Ok(row.and_then(|(num, ty, off, sl, pl, c)| {
        let ty = BlobType::from_u8(ty)?;
        let entry = PackEntry {
            ty,
            id: *id,
            offset: off as u64,
            stored_len: sl as u32,
            plain_len: pl as u32,
            compression: c,
        };
        Some((num, entry))
    }))
}

/// [`Index::tree_checked`] asked on `conn`.
pub(super) fn tree_checked_on(conn: &Connection, id: &Id) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT 1 FROM checked_trees
         WHERE removals = (SELECT n FROM removals) AND id = ?1",
    )?
    .exists(params![id.0])
}

/// Blob `id` in the base, asked on `conn`: its pack number and entry.
fn base_lookup_on(conn: &Connection, id: &Id) -> rusqlite::Result<Option<(i64, PackEntry)>> {
    let mut st = conn.prepare_cached(
        "SELECT rows FROM blob_base WHERE first <= ?1 ORDER BY first DESC LIMIT 1",
    )?;
    // The block is searched where SQLite holds it (no copy: a backup asks
    // this for every chunk).
    let found = st
        .query_row(params![&bulk::seek_key(id)[..]], |r| {
            let rows = r.get_ref(0)?.as_blob()?;
            Ok(bulk::find_in_block(rows, id).and_then(bulk::decode))
        })
        .optional()?;
    Ok(found.flatten())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::IndexPack;
    use rusqlite::StatementStatus;

    fn id(tag: &str, n: u64) -> Id {
        Id(*blake3::hash(format!("{tag}{n}").as_bytes()).as_bytes())
    }

    /// A segment absorbed while it is written is committed only once the
    /// writer has returned (another connection sees none of it before),
    /// then lists exactly what [`Index::absorb`] would, under the ID the
    /// writer returned.
    #[test]
    fn absorb_writing_commits_after_the_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.sqlite");
        let mut idx = Index::open(&path).unwrap();
        let seg = four_pack_segment();
        let seen = |p: &Path| -> i64 {
            let c = Connection::open(p).unwrap();
            c.query_row("SELECT count(*) FROM blobs", [], |r| r.get(0))
                .unwrap()
        };
        let sid = idx
            .absorb_writing(&seg, || {
                // Time for the inserts to finish (and, were it wrong, to
                // commit) before this looks.
                std::thread::sleep(Duration::from_millis(200));
                assert_eq!(seen(&path), 0, "committed before the write ended");
                Ok(id("segment", 7))
            })
            .unwrap();
        assert_eq!(sid, id("segment", 7));
        assert_eq!(seen(&path), 32);
        assert!(idx.agrees_with(&sid, &seg).unwrap());
        assert_eq!(
            idx.known_segments().unwrap(),
            HashSet::from([id("segment", 7)])
        );
        let loc = idx.lookup(&id("blob", 9)).unwrap().unwrap();
        assert_eq!((loc.pack, loc.entry.offset), (id("pack", 1), 100));
    }

    /// A failed segment write is the error returned and leaves the cache as
    /// it was (no pack, blob or segment of it), free for the next write.
    #[test]
    fn absorb_writing_a_failed_write_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = Index::open(&dir.path().join("index.sqlite")).unwrap();
        let seg = four_pack_segment();
        let err = idx
            .absorb_writing(&seg, || Err(Error::internal("the disk is full")))
            .unwrap_err();
        assert!(err.to_string().contains("the disk is full"), "{err}");
        assert!(idx.lookup(&id("blob", 0)).unwrap().is_none());
        assert!(idx.known_segments().unwrap().is_empty());
        let packs: i64 = idx
            .conn
            .query_row("SELECT count(*) FROM packs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(packs, 0);
        idx.absorb(&id("segment", 0), &seg).unwrap();
        assert!(idx.agrees_with(&id("segment", 0), &seg).unwrap());
    }

    /// A lookup runs prepared statements again without preparing them
    /// again: a query that SQLite re-prepares on each run (as it does with
    /// `ORDER BY marked` here) spends most of a lookup parsing SQL.
    #[test]
    fn lookup_reuses_its_prepared_statements() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = Index::open(&dir.path().join("index.sqlite")).unwrap();
        idx.absorb(&id("segment", 0), &four_pack_segment()).unwrap();
        for n in 0..32u64 {
            let loc = idx.lookup(&id("blob", n)).unwrap().unwrap();
            assert_eq!(loc.pack, id("pack", n / 8));
            assert_eq!(loc.entry.offset, n % 8 * 100);
        }
        assert!(idx.lookup(&id("absent", 0)).unwrap().is_none());
        let unmarked = idx.conn.prepare_cached(LOOKUP_ROW[0]).unwrap();
        assert_eq!(unmarked.get_status(StatementStatus::Run), 33);
        assert_eq!(unmarked.get_status(StatementStatus::RePrepare), 0);
        drop(unmarked);
        let marked = idx.conn.prepare_cached(LOOKUP_ROW[1]).unwrap();
        assert_eq!(
            marked.get_status(StatementStatus::Run),
            1,
            "only for the miss"
        );
        assert_eq!(marked.get_status(StatementStatus::RePrepare), 0);
    }

    /// A run of lookups asks for each pack's ID once: 32 blobs in 4 packs
    /// are 32 blob queries and 4 pack queries, with the same answers as
    /// one lookup at a time.
    #[test]
    fn lookup_many_asks_for_each_pack_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = Index::open(&dir.path().join("index.sqlite")).unwrap();
        idx.absorb(&id("segment", 0), &four_pack_segment()).unwrap();
        let mut ids: Vec<Id> = (0..32u64).map(|n| id("blob", n)).collect();
        ids.push(id("absent", 0));
        let many = idx.lookup_many(&ids).unwrap();
        let pack_query = "SELECT id FROM packs WHERE num = ?1";
        let runs = idx
            .conn
            .prepare_cached(pack_query)
            .unwrap()
            .get_status(StatementStatus::Run);
        assert_eq!(runs, 4, "one pack query per pack");
        for (n, found) in many.iter().enumerate().take(32) {
            let loc = found.unwrap();
            assert_eq!(loc.pack, id("pack", n as u64 / 8));
            assert_eq!(Some(loc), idx.lookup(&ids[n]).unwrap());
        }
        assert!(many[32].is_none());
    }

    /// A read scope shares one transaction among the lookups inside it
    /// (also those that open their own, which then do not), does not stop
    /// another process writing, and sees the cache as it was when it began.
    #[test]
    fn a_read_scope_sees_one_state_and_blocks_no_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.sqlite");
        let mut writer = Index::open(&path).unwrap();
        writer
            .absorb(&id("segment", 0), &one_pack_segment(0))
            .unwrap();
        let reader = Index::open(&path).unwrap();
        assert!(reader.begin_read().unwrap());
        assert!(!reader.begin_read().unwrap(), "already in one");
        assert!(reader.lookup(&id("blob", 0)).unwrap().is_some());
        writer
            .absorb(&id("segment", 1), &one_pack_segment(1))
            .unwrap();
        let both = reader.lookup_many(&[id("blob", 0), id("blob", 1)]).unwrap();
        assert!(both[0].is_some());
        assert!(both[1].is_none(), "written after the scope began");
        assert!(!reader.conn.is_autocommit(), "lookup_many kept the scope");
        reader.end_read().unwrap();
        assert!(reader.conn.is_autocommit());
        assert!(reader.lookup(&id("blob", 1)).unwrap().is_some());
        reader.end_read().unwrap();
    }

    /// A backup's read view answers from one view of the cache: a blob
    /// indexed after the view began is not seen until the view is
    /// renewed (by the caller, or once `RENEW` has passed), and a blob
    /// whose only pack is marked for deletion is never counted as stored.
    #[test]
    fn a_read_view_answers_from_one_view_until_renewed() {
        use super::super::marks::{DeletionPlan, MarkedPack};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.sqlite");
        let mut idx = Index::open(&path).unwrap();
        idx.absorb(&id("segment", 0), &one_pack_segment(0)).unwrap();
        let mut reader = idx.read_view().unwrap();
        assert!(reader.contains(&id("blob", 0)).unwrap());
        assert!(!reader.contains(&id("blob", 1)).unwrap());
        idx.absorb(&id("segment", 1), &one_pack_segment(1)).unwrap();
        assert!(idx.contains(&id("blob", 1)).unwrap());
        assert!(
            !reader.contains(&id("blob", 1)).unwrap(),
            "indexed after the view began"
        );
        reader.renew().unwrap();
        assert!(reader.contains(&id("blob", 1)).unwrap());

        // The view renews itself once it is RENEW old.
        idx.absorb(&id("segment", 2), &one_pack_segment(2)).unwrap();
        assert!(!reader.contains(&id("blob", 2)).unwrap());
        std::thread::sleep(crate::index::reader::RENEW + Duration::from_millis(50));
        assert!(reader.contains(&id("blob", 2)).unwrap());

        // A mark makes the blob unknown to the reader's next view.
        let plan = Mark::Plan(DeletionPlan {
            created: 0,
            packs: vec![MarkedPack {
                id: id("pack", 0),
                size: 1_000,
            }],
        });
        assert!(idx.absorb_mark(&id("mark", 0), &plan).unwrap());
        idx.conn.execute_batch(APPLY_MARKS).unwrap();
        assert!(!idx.contains(&id("blob", 0)).unwrap());
        reader.renew().unwrap();
        assert!(
            !reader.contains(&id("blob", 0)).unwrap(),
            "only in a marked pack"
        );
        assert!(reader.contains(&id("blob", 1)).unwrap());

        // An open view keeps the WAL from being checkpointed past it; an
        // expired one is ended without a question being asked.
        idx.absorb(&id("segment", 4), &one_pack_segment(4)).unwrap();
        let checkpoint = |idx: &Index| {
            idx.conn
                .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                    Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
                })
                .unwrap()
        };
        let (log, done) = checkpoint(&idx);
        assert!(done < log, "the open view pins the WAL: {done} of {log}");
        reader.expire().unwrap();
        let (log, done) = checkpoint(&idx);
        assert!(done < log, "a young view is kept: {done} of {log}");
        std::thread::sleep(crate::index::reader::RENEW + Duration::from_millis(50));
        reader.expire().unwrap();
        let (log, done) = checkpoint(&idx);
        assert_eq!(done, log, "the expired view no longer pins the WAL");

        // The reader never writes: the cache's own connection still can
        // while the reader's view is open.
        idx.absorb(&id("segment", 3), &one_pack_segment(3)).unwrap();
        assert!(idx.contains(&id("blob", 3)).unwrap());
    }

    #[test]
    fn a_read_views_lookups_match_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.sqlite");
        let mut idx = Index::open(&path).unwrap();
        idx.absorb(&id("segment", 0), &four_pack_segment()).unwrap();
        let mut reader = idx.read_view().unwrap();
        for b in [0u64, 7, 8, 31] {
            let want = idx.lookup(&id("blob", b)).unwrap().unwrap();
            let got = reader.lookup(&id("blob", b)).unwrap().unwrap();
            assert_eq!((got.pack, got.entry), (want.pack, want.entry), "blob {b}");
        }
        assert!(reader.lookup(&id("blob", 99)).unwrap().is_none());

        // Trees recorded as checked are seen from the next view on.
        let tree = id("blob", 3);
        assert!(!reader.tree_checked(&tree).unwrap());
        let removals = idx.removals().unwrap();
        assert!(idx.record_checked_trees(&[tree], removals).unwrap());
        assert!(idx.tree_checked(&tree).unwrap());
        assert!(
            !reader.tree_checked(&tree).unwrap(),
            "recorded after the view began"
        );
        reader.renew().unwrap();
        assert!(reader.tree_checked(&tree).unwrap());

        // A blob indexed after the view began is found after a renewal.
        idx.absorb(&id("segment", 1), &one_pack_segment(40))
            .unwrap();
        assert!(reader.lookup(&id("blob", 40)).unwrap().is_none());
        reader.renew().unwrap();
        let got = reader.lookup(&id("blob", 40)).unwrap().unwrap();
        assert_eq!(got.pack, id("pack", 40));
    }

    /// Only the packs no segment lists are named, by their positions in
    /// the question.
    #[test]
    fn packs_not_listed_names_only_the_unknown_packs() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = Index::open(&dir.path().join("index.sqlite")).unwrap();
        idx.absorb(&id("segment", 0), &four_pack_segment()).unwrap();
        let ask = [
            id("pack", 0),
            id("pack", 9),
            id("pack", 3),
            id("pack", 1),
            id("pack", 7),
        ];
        assert_eq!(idx.packs_not_listed(&ask).unwrap(), vec![1, 4]);
        assert!(idx.packs_not_listed(&[]).unwrap().is_empty());
        // Inside a read scope the same answer comes from that scope.
        idx.begin_read().unwrap();
        assert_eq!(idx.packs_not_listed(&ask[1..3]).unwrap(), vec![0]);
        idx.end_read().unwrap();
    }

    /// A read view asks once per view whether the cache holds a base (and
    /// then skips searching it at every miss when it holds none): a base
    /// that arrives after a view's first miss is searched from the next
    /// view on.
    #[test]
    fn a_read_view_searches_a_base_that_arrived_after_its_first_miss() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = Index::open(&dir.path().join("index.sqlite")).unwrap();
        idx.absorb(&id("segment", 0), &one_pack_segment(0)).unwrap();
        let mut reader = idx.read_view().unwrap();
        assert!(reader.contains(&id("blob", 0)).unwrap());
        assert!(!reader.contains(&id("blob", 5)).unwrap());
        // Blob 5, in pack 0, as one block of a base (as a bulk first open
        // stores blobs).
        let num = pack_query(&idx, "SELECT num FROM packs WHERE id = ?1", "pack", 0);
        let rec = super::super::bulk::encode(
            num,
            &PackEntry {
                ty: BlobType::Data,
                id: id("blob", 5),
                offset: 100,
                stored_len: 100,
                plain_len: 200,
                compression: 1,
            },
        );
        idx.conn
            .execute(
                "INSERT INTO blob_base(first, n, rows) VALUES (?1, 1, ?2)",
                params![&rec[..40], &rec[..]],
            )
            .unwrap();
        assert!(idx.contains(&id("blob", 5)).unwrap());
        assert!(
            !reader.contains(&id("blob", 5)).unwrap(),
            "the base came after the view began"
        );
        reader.renew().unwrap();
        assert!(
            reader.contains(&id("blob", 5)).unwrap(),
            "the next view searches the base"
        );
        assert!(!reader.contains(&id("blob", 6)).unwrap());
        assert!(reader.contains(&id("blob", 0)).unwrap());
    }

    /// Rows go in `INSERT_BATCH` to a statement and the rest one by one:
    /// every field of every row lands in its column (each field differs
    /// from row to row), and a pack a second segment lists again is not
    /// inserted twice.
    #[test]
    fn batched_inserts_keep_every_field_of_every_row() {
        let d = tempfile::tempdir().unwrap();
        let mut idx = Index::open(&d.path().join("c.sqlite")).unwrap();
        let pack = |p: u64, blobs: std::ops::Range<u64>| IndexPack {
            id: id("pack", p),
            size: 1_000_000 + p,
            blobs: blobs
                .map(|j| PackEntry {
                    ty: if j % 3 == 0 {
                        BlobType::Tree
                    } else {
                        BlobType::Data
                    },
                    id: id("blob", j),
                    offset: j * 7 + 1,
                    stored_len: 1_000 + j as u32,
                    plain_len: 5_000 + 3 * j as u32,
                    compression: (j % 2) as u8,
                })
                .collect(),
        };
        let n = 2 * INSERT_BATCH as u64 + 5;
        let first = IndexSegment {
            packs: vec![pack(0, 0..10)],
        };
        idx.absorb(&id("seg", 0), &first).unwrap();
        let second = IndexSegment {
            packs: vec![pack(0, 0..10), pack(1, 10..n / 2), pack(2, n / 2..n)],
        };
        idx.absorb(&id("seg", 1), &second).unwrap();
        assert!(idx.agrees_with(&id("seg", 0), &first).unwrap());
        assert!(idx.agrees_with(&id("seg", 1), &second).unwrap());
        assert_eq!(idx.blob_count().unwrap(), n);
        let loc = idx.lookup(&id("blob", n - 1)).unwrap().unwrap();
        assert_eq!(loc.pack, id("pack", 2));
        assert_eq!(Some(&loc.entry), second.packs[2].blobs.last());
    }

    /// Many rows into an empty `blobs` go in without its secondary indexes,
    /// which are built again before the commit; a failed write rolls the
    /// drop back with the rows.
    #[test]
    fn a_large_first_absorb_keeps_the_blob_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = Index::open(&dir.path().join("index.sqlite")).unwrap();
        let seg = data_segment(80, 64);
        const { assert!(80 * 64 >= REBUILD_ROWS) };
        let indexes = |idx: &Index| -> Vec<String> {
            let mut st = idx
                .conn
                .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'blobs' ORDER BY name")
                .unwrap();
            st.query_map([], |r| r.get(0))
                .unwrap()
                .map(|r| r.unwrap())
                .collect()
        };
        let count = |idx: &Index| -> i64 {
            idx.conn
                .query_row("SELECT count(*) FROM blobs", [], |r| r.get(0))
                .unwrap()
        };
        let want = vec!["blobs_by_pack".to_string(), "blobs_marked".to_string()];
        assert_eq!(indexes(&idx), want);

        let failed = idx.absorb_writing(&seg, || Err(Error::internal("no room")));
        assert!(failed.is_err());
        assert_eq!(indexes(&idx), want, "the failed absorb's drop rolled back");
        assert_eq!(count(&idx), 0);

        let sid = idx.absorb_writing(&seg, || Ok(id("segment", 0))).unwrap();
        assert_eq!(indexes(&idx), want);
        assert_eq!(count(&idx), 80 * 64);
        assert!(idx.agrees_with(&sid, &seg).unwrap());
        let plan: String = idx
            .conn
            .query_row(
                "EXPLAIN QUERY PLAN SELECT id FROM blobs WHERE pack = 3",
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("blobs_by_pack"), "{plan}");
        let in_pack = pack_query(
            &idx,
            "SELECT count(*) FROM blobs b JOIN packs p ON p.num = b.pack WHERE p.id = ?1",
            "pack",
            3,
        );
        assert_eq!(in_pack, 64);
        let integrity: String = idx
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(integrity, "ok");
    }

    /// The number `sql` answers about the ID `id(tag, n)`.
    fn pack_query(idx: &Index, sql: &str, tag: &str, n: u64) -> i64 {
        idx.conn
            .query_row(sql, params![id(tag, n).0], |r| r.get(0))
            .unwrap()
    }

    /// Blobs 0..32 in packs 0..4, eight to a pack, 100 bytes apart.
    /// The local backend, with chosen index segments left out of its
    /// listings of `index/` numbered (from 0) in `hide_in`, as a listing
    /// that runs while a prune replaces a segment may leave out both the
    /// old segment (deleted meanwhile) and its replacement (created
    /// meanwhile). Counts those listings.
    struct MissingListings {
        inner: crate::backend::LocalBackend,
        hidden: Vec<String>,
        hide_in: std::ops::Range<usize>,
        lists: std::sync::atomic::AtomicUsize,
    }

    impl MissingListings {
        fn new(root: &Path, hidden: &[Id], hide_in: std::ops::Range<usize>) -> Self {
            MissingListings {
                inner: crate::backend::LocalBackend::new(root),
                hidden: hidden.iter().map(Id::to_hex).collect(),
                hide_in,
                lists: Default::default(),
            }
        }

        fn lists(&self) -> usize {
            self.lists.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    impl Backend for MissingListings {
        fn location(&self) -> String {
            self.inner.location()
        }
        fn create(&self) -> Result<()> {
            self.inner.create()
        }
        fn exists(&self, kind: Kind, name: &str) -> Result<bool> {
            self.inner.exists(kind, name)
        }
        fn list(&self, kind: Kind) -> Result<Vec<crate::backend::Entry>> {
            let mut all = self.inner.list(kind)?;
            if kind == Kind::Index {
                let n = self.lists.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if self.hide_in.contains(&n) {
                    all.retain(|e| !self.hidden.contains(&e.name));
                }
            }
            Ok(all)
        }
        fn read_bounded(&self, kind: Kind, name: &str, max: u64) -> Result<Vec<u8>> {
            self.inner.read_bounded(kind, name, max)
        }
        fn read_range(&self, kind: Kind, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
            self.inner.read_range(kind, name, offset, len)
        }
        fn size(&self, kind: Kind, name: &str) -> Result<u64> {
            self.inner.size(kind, name)
        }
        fn write(&self, kind: Kind, name: &str, data: &[u8]) -> Result<()> {
            self.inner.write(kind, name, data)
        }
        fn delete(&self, kind: Kind, name: &str) -> Result<()> {
            self.inner.delete(kind, name)
        }
        fn replace_config(&self, data: &[u8]) -> Result<()> {
            self.inner.replace_config(data)
        }
    }

    /// A prune replaces a segment (the replacement written, then the old
    /// one deleted) while a sync's listing runs, and the listing misses
    /// both. The sync lists `index/` a second time before it forgets the
    /// old segment, absorbs the replacement from it, and every blob is
    /// still found. A sync that misses nothing lists once. A segment gone
    /// with no replacement is forgotten after the second listing, and one
    /// that only the second listing misses is kept.
    #[test]
    fn a_segment_is_forgotten_only_when_a_second_listing_misses_it_too() {
        use crate::crypto::MasterKey;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        let keys = Keys::derive(&MasterKey::from_bytes([3; 32]));
        let plain = MissingListings::new(&root, &[], 0..0);
        plain.create().unwrap();
        let mut idx = Index::open(&dir.path().join("index.sqlite")).unwrap();
        let seg = four_pack_segment();
        let old = super::super::write_segment(&plain, &keys, &seg).unwrap();
        assert_eq!(idx.sync(&plain, &keys).unwrap().absorbed, 1);
        let all_found = |idx: &Index| {
            (0..32u64).all(|n| {
                idx.lookup(&id("blob", n))
                    .unwrap()
                    .is_some_and(|l| l.pack == id("pack", n / 8))
            })
        };
        assert!(all_found(&idx));

        let new = super::super::write_segment(&plain, &keys, &seg).unwrap();
        assert_ne!(new, old, "a segment sealed again has a new name");
        plain.delete(Kind::Index, &old.to_hex()).unwrap();
        let missing_both = MissingListings::new(&root, &[new], 0..1);
        let report = idx.sync(&missing_both, &keys).unwrap();
        assert!(all_found(&idx), "a blob of the replaced segment is lost");
        assert_eq!(idx.known_segments().unwrap(), HashSet::from([new]));
        assert_eq!(missing_both.lists(), 2, "a second listing");
        assert_eq!((report.absorbed, report.forgotten), (1, 1));
        assert!(report.bad.is_empty(), "{:?}", report.bad);

        // A segment of one pack and one blob, absorbed by a sync that
        // misses nothing and lists once.
        let mut lone = IndexSegment::default();
        lone.packs.push(IndexPack {
            id: id("lone pack", 0),
            size: 1_000,
            blobs: vec![PackEntry {
                ty: BlobType::Data,
                id: id("lone blob", 0),
                offset: 0,
                stored_len: 100,
                plain_len: 100,
                compression: 0,
            }],
        });
        let lone = super::super::write_segment(&plain, &keys, &lone).unwrap();
        let quiet = MissingListings::new(&root, &[], 0..0);
        let report = idx.sync(&quiet, &keys).unwrap();
        assert_eq!(
            (quiet.lists(), report.absorbed, report.forgotten),
            (1, 1, 0)
        );

        // The replacement goes with no replacement of its own; the second
        // listing misses the lone segment, which the first listed: only
        // what both missed is forgotten.
        plain.delete(Kind::Index, &new.to_hex()).unwrap();
        let second_misses = MissingListings::new(&root, &[lone], 1..2);
        let report = idx.sync(&second_misses, &keys).unwrap();
        assert_eq!(idx.known_segments().unwrap(), HashSet::from([lone]));
        assert!(idx.lookup(&id("lone blob", 0)).unwrap().is_some());
        assert!(idx.lookup(&id("blob", 0)).unwrap().is_none());
        assert_eq!((second_misses.lists(), report.forgotten), (2, 1));
    }

    fn four_pack_segment() -> IndexSegment {
        data_segment(4, 8)
    }

    /// Blobs numbered from 0 in `packs` packs numbered from 0, `per` to a
    /// pack, 100 bytes apart.
    fn data_segment(packs: u64, per: u64) -> IndexSegment {
        let mut seg = IndexSegment::default();
        for p in 0..packs {
            seg.packs.push(IndexPack {
                id: id("pack", p),
                size: 10_000,
                blobs: (0..per)
                    .map(|j| PackEntry {
                        ty: BlobType::Data,
                        id: id("blob", p * per + j),
                        offset: j * 100,
                        stored_len: 100,
                        plain_len: 200,
                        compression: 1,
                    })
                    .collect(),
            });
        }
        seg
    }

    fn one_pack_segment(n: u64) -> IndexSegment {
        IndexSegment {
            packs: vec![IndexPack {
                id: id("pack", n),
                size: 1_000,
                blobs: vec![PackEntry {
                    ty: BlobType::Data,
                    id: id("blob", n),
                    offset: 0,
                    stored_len: 100,
                    plain_len: 200,
                    compression: 1,
                }],
            }],
        }
    }

    /// A checked tree stays checked while blobs are only added, and stops
    /// being so when a pack is marked for deletion or forgotten (by
    /// whatever statement), or the cache is cleared.
    #[test]
    fn checked_trees_hold_until_a_pack_is_marked_or_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = Index::open(&dir.path().join("index.sqlite")).unwrap();
        let tree = id("tree", 0);
        idx.absorb(&id("segment", 0), &one_pack_segment(0)).unwrap();
        let r0 = idx.removals().unwrap();
        assert!(!idx.tree_checked(&tree).unwrap(), "nothing recorded yet");
        assert!(idx.record_checked_trees(&[tree], r0).unwrap());
        assert!(idx.tree_checked(&tree).unwrap());
        assert!(!idx.tree_checked(&id("tree", 1)).unwrap());

        // Adding blobs changes nothing.
        idx.absorb(&id("segment", 1), &one_pack_segment(1)).unwrap();
        assert_eq!(idx.removals().unwrap(), r0);
        assert!(idx.tree_checked(&tree).unwrap());

        // A deletion plan marks a pack.
        idx.conn
            .execute(
                "INSERT INTO marked_packs(pack, mark) VALUES (?1, ?2)",
                params![id("pack", 0).0, id("mark", 0).0],
            )
            .unwrap();
        assert!(idx.removals().unwrap() > r0);
        assert!(!idx.tree_checked(&tree).unwrap(), "a pack was marked");
        // A count read before the mark records nothing.
        assert!(!idx.record_checked_trees(&[tree], r0).unwrap());
        assert!(!idx.tree_checked(&tree).unwrap());

        // Recorded again, then a segment (and its pack) forgotten.
        let r1 = idx.removals().unwrap();
        assert!(idx.record_checked_trees(&[tree], r1).unwrap());
        assert!(idx.tree_checked(&tree).unwrap());
        idx.forget_segments(&[id("segment", 1)]).unwrap();
        assert!(idx.lookup(&id("blob", 1)).unwrap().is_none());
        assert!(!idx.tree_checked(&tree).unwrap(), "a pack was forgotten");

        // Recorded again, then the cache cleared.
        let r2 = idx.removals().unwrap();
        assert!(idx.record_checked_trees(&[tree], r2).unwrap());
        idx.clear().unwrap();
        assert!(!idx.tree_checked(&tree).unwrap(), "the cache was cleared");
        // Records of an old count are dropped by the next recording.
        let r3 = idx.removals().unwrap();
        assert!(idx.record_checked_trees(&[id("tree", 1)], r3).unwrap());
        let rows: i64 = idx
            .conn
            .query_row("SELECT count(*) FROM checked_trees", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1);
    }
}
