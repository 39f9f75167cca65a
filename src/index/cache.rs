//! The local SQLite index cache that answers "where is blob X?".
//!
//! The cache is only a cache: deleting it loses nothing, it is rebuilt from
//! `index/` on the next open. It absorbs new segments and, if any segment it
//! knew has gone, starts over. Nothing here keeps a map of every blob in
//! memory: lookups are prepared SQLite queries, inserts run in transactions.

use super::segment::{IndexPack, IndexSegment, read_segment};
use crate::backend::{Backend, Kind};
use crate::crypto::Keys;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::pack::{BlobType, PackEntry};
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Where a blob lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlobLocation {
    pub pack: Id,
    pub entry: PackEntry,
}

/// The local SQLite index cache.
pub struct Index {
    conn: Connection,
    path: PathBuf,
}

/// The schema, and a page cache of 4 MiB: enough for the upper levels of
/// the B-trees of a ten-million-blob index (the leaves come from the
/// operating system's cache), and small enough that memory does not grow
/// with the index (16 MiB made a large index cost 15 MiB more RSS).
const SCHEMA: &str = "
PRAGMA journal_mode=WAL;
PRAGMA synchronous=NORMAL;
PRAGMA cache_size=-4096;
CREATE TABLE IF NOT EXISTS segments(id BLOB PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS packs(
  num INTEGER PRIMARY KEY,
  id BLOB NOT NULL UNIQUE,
  size INTEGER NOT NULL,
  segment BLOB
);
CREATE TABLE IF NOT EXISTS blobs(
  id BLOB PRIMARY KEY,
  type INTEGER NOT NULL,
  pack INTEGER NOT NULL,
  offset INTEGER NOT NULL,
  stored_len INTEGER NOT NULL,
  plain_len INTEGER NOT NULL,
  compression INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS blobs_by_pack ON blobs(pack);
";

impl Index {
    /// Opens (creating if needed) the cache database at `path`.
    pub fn open(path: &Path) -> Result<Index> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
        }
        let conn = Connection::open(path).map_err(|e| Error::sqlite(path, e))?;
        conn.execute_batch(SCHEMA)
            .map_err(|e| Error::sqlite(path, e))?;
        Ok(Index {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn err(&self, e: rusqlite::Error) -> Error {
        Error::sqlite(&self.path, e)
    }

    /// Brings the cache up to date with `index/` in the repository.
    /// Returns the number of segments absorbed.
    pub fn sync(&mut self, backend: &dyn Backend, keys: &Keys) -> Result<usize> {
        let listed: HashSet<String> = backend
            .list(Kind::Index)?
            .into_iter()
            .map(|e| e.name)
            .collect();
        let known = self.known_segments()?;
        let gone = known.iter().any(|k| !listed.contains(k));
        // Packs never tied to a segment belong to a run that died or to a
        // run in progress; forget them: a segment will bring them back.
        self.conn
            .execute_batch(
                "DELETE FROM blobs WHERE pack IN (SELECT num FROM packs WHERE segment IS NULL);
                 DELETE FROM packs WHERE segment IS NULL;",
            )
            .map_err(|e| self.err(e))?;
        if gone {
            self.clear()?;
        }
        let known = if gone { HashSet::new() } else { known };
        let mut names: Vec<&String> = listed.iter().filter(|n| !known.contains(*n)).collect();
        names.sort();
        for name in &names {
            let seg = read_segment(backend, keys, name)?;
            let id = Id::from_hex(name)
                .map_err(|_| Error::corrupt(Kind::Index.path(name), "name is not an id"))?;
            self.absorb(&id, &seg)?;
        }
        Ok(names.len())
    }

    fn known_segments(&self) -> Result<HashSet<String>> {
        let mut st = self
            .conn
            .prepare("SELECT id FROM segments")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([], |r| r.get::<_, [u8; 32]>(0))
            .map_err(|e| self.err(e))?;
        let mut out = HashSet::new();
        for r in rows {
            out.insert(Id(r.map_err(|e| self.err(e))?).to_hex());
        }
        Ok(out)
    }

    /// Forgets everything.
    pub fn clear(&mut self) -> Result<()> {
        self.conn
            .execute_batch("DELETE FROM blobs; DELETE FROM packs; DELETE FROM segments;")
            .map_err(|e| self.err(e))
    }

    /// Records a segment's packs and blobs as coming from segment `seg_id`.
    pub fn absorb(&mut self, seg_id: &Id, seg: &IndexSegment) -> Result<()> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction()
            .map_err(|e| Error::sqlite(&path, e))?;
        insert_packs(&tx, &seg.packs, Some(seg_id)).map_err(|e| Error::sqlite(&path, e))?;
        tx.execute(
            "INSERT OR IGNORE INTO segments(id) VALUES (?1)",
            params![seg_id.0],
        )
        .map_err(|e| Error::sqlite(&path, e))?;
        tx.commit().map_err(|e| Error::sqlite(&path, e))
    }

    /// Records a freshly written pack that no segment lists yet.
    pub fn add_pending_pack(&mut self, p: &IndexPack) -> Result<()> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction()
            .map_err(|e| Error::sqlite(&path, e))?;
        insert_packs(&tx, std::slice::from_ref(p), None).map_err(|e| Error::sqlite(&path, e))?;
        tx.commit().map_err(|e| Error::sqlite(&path, e))
    }

    /// Marks packs as listed by segment `seg_id` (after it was written).
    pub fn commit_segment(&mut self, seg_id: &Id, packs: &[Id]) -> Result<()> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction()
            .map_err(|e| Error::sqlite(&path, e))?;
        {
            let mut st = tx
                .prepare_cached("UPDATE packs SET segment = ?1 WHERE id = ?2 AND segment IS NULL")
                .map_err(|e| Error::sqlite(&path, e))?;
            for p in packs {
                st.execute(params![seg_id.0, p.0])
                    .map_err(|e| Error::sqlite(&path, e))?;
            }
        }
        tx.execute(
            "INSERT OR IGNORE INTO segments(id) VALUES (?1)",
            params![seg_id.0],
        )
        .map_err(|e| Error::sqlite(&path, e))?;
        tx.commit().map_err(|e| Error::sqlite(&path, e))
    }

    /// Where blob `id` is stored, if anywhere.
    ///
    /// Two primary-key queries rather than one join: SQLite re-prepares the
    /// join on every new parameter value (it is built with STAT4), which
    /// made each lookup about four times slower.
    pub fn lookup(&self, id: &Id) -> Result<Option<BlobLocation>> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT pack, type, offset, stored_len, plain_len, compression
                 FROM blobs WHERE id = ?1",
            )
            .map_err(|e| self.err(e))?;
        let row = st
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
            .optional()
            .map_err(|e| self.err(e))?;
        let Some((num, ty, off, sl, pl, c)) = row else {
            return Ok(None);
        };
        let mut st = self
            .conn
            .prepare_cached("SELECT id FROM packs WHERE num = ?1")
            .map_err(|e| self.err(e))?;
        let pack = st
            .query_row(params![num], |r| r.get::<_, [u8; 32]>(0))
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(pack.and_then(|pack| {
            Some(BlobLocation {
                pack: Id(pack),
                entry: PackEntry {
                    ty: BlobType::from_u8(ty)?,
                    id: *id,
                    offset: off as u64,
                    stored_len: sl as u32,
                    plain_len: pl as u32,
                    compression: c,
                },
            })
        }))
    }

    /// Looks up many blobs inside one read transaction (one lock instead of
    /// one per query); the answers are in the order of `ids`.
    pub fn lookup_many(&self, ids: &[Id]) -> Result<Vec<Option<BlobLocation>>> {
        let tx = self.conn.unchecked_transaction().map_err(|e| self.err(e))?;
        let out = ids
            .iter()
            .map(|id| self.lookup(id))
            .collect::<Result<Vec<_>>>()?;
        tx.finish().map_err(|e| self.err(e))?;
        Ok(out)
    }

    /// Whether blob `id` is indexed.
    pub fn contains(&self, id: &Id) -> Result<bool> {
        let mut st = self
            .conn
            .prepare_cached("SELECT 1 FROM blobs WHERE id = ?1")
            .map_err(|e| self.err(e))?;
        st.exists(params![id.0]).map_err(|e| self.err(e))
    }

    /// Number of indexed blobs.
    pub fn blob_count(&self) -> Result<u64> {
        self.conn
            .query_row("SELECT count(*) FROM blobs", [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(|e| self.err(e))
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

    /// The blobs the index places in pack `pack`, by offset.
    pub fn blobs_in_pack(&self, pack: &Id) -> Result<Vec<PackEntry>> {
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
}

/// Inserts packs and their blobs. Blobs go in sorted by ID, so the B-tree
/// is filled in order rather than at random places (much faster once the
/// index is larger than SQLite's page cache).
fn insert_packs(
    tx: &rusqlite::Transaction<'_>,
    packs: &[IndexPack],
    seg: Option<&Id>,
) -> rusqlite::Result<()> {
    let mut rows: Vec<(&PackEntry, i64)> = Vec::new();
    for p in packs {
        tx.prepare_cached("INSERT OR IGNORE INTO packs(id, size, segment) VALUES (?1, ?2, ?3)")?
            .execute(params![p.id.0, p.size as i64, seg.map(|s| s.0)])?;
        let num: i64 = tx
            .prepare_cached("SELECT num FROM packs WHERE id = ?1")?
            .query_row(params![p.id.0], |r| r.get(0))?;
        rows.extend(p.blobs.iter().map(|b| (b, num)));
    }
    rows.sort_by_key(|r| r.0.id);
    let mut st = tx.prepare_cached(
        "INSERT OR IGNORE INTO blobs(id, type, pack, offset, stored_len, plain_len, compression)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for (b, num) in rows {
        st.execute(params![
            b.id.0,
            b.ty as u8,
            num,
            b.offset as i64,
            b.stored_len as i64,
            b.plain_len as i64,
            b.compression
        ])?;
    }
    Ok(())
}
