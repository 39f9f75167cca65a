//! A backup's questions to the index on connections of their own: the
//! dedup checks of the chunks it reads, and the walk's lookups of the
//! parent snapshot's trees.
//!
//! A backup asks the cache about every chunk it reads and every directory
//! it compares. On the cache's shared connection each question is its own
//! transaction: SQLite takes and drops the database's read lock (two
//! `fcntl` calls and a look at the WAL index) for every one, and the
//! questions queue behind the packer's writes on the same mutex. A
//! [`ReadView`] opens a second connection and asks its questions inside
//! one read transaction, renewed every [`RENEW`] and whenever the caller
//! asks ([`ReadView::renew`]).
//!
//! Answering from a view up to [`RENEW`] old is safe: a blob the view misses
//! (written meanwhile by another process) is stored once more, which the
//! format allows; a pack marked for deletion after the view began cannot
//! lose a blob the backup relies on, because the backup holds its lock
//! throughout and a deletion plan waits for every lock listed when it was
//! written (SPEC, deletion marks, rules 2-4). The parent snapshot's trees
//! were indexed before the backup began, so a view of any age finds them.
//! While a view is open the WAL cannot be checkpointed past it, so a view
//! older than [`RENEW`] is also ended when the backup stops asking: the
//! walk calls [`ReadView::expire`] on the idle dedup views (one per thread
//! that checks at once) at each directory it compares with its parent, and
//! ends its own view ([`ReadView::renew`]) whenever it waits for a file.

use super::BlobLocation;
use super::cache::{BUSY_TIMEOUT, contains_on, has_base_on, lookup_on, tree_checked_on};
use crate::error::{Error, Result};
use crate::id::Id;
use rusqlite::{Connection, OpenFlags};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long one read transaction answers before it is renewed.
pub const RENEW: Duration = Duration::from_millis(500);

/// A read-only connection to the index cache for one backup's questions
/// (its dedup checks, or the walk's lookups of the parent's trees).
pub struct ReadView {
    conn: Connection,
    path: PathBuf,
    /// When the open read transaction began (None: none is open).
    began: Option<Instant>,
    /// Pack IDs by number, as the open view has them.
    packs: HashMap<i64, Id>,
    /// Whether the open view holds a base (asked at its first miss: a
    /// cache without one answers a miss with one search instead of two).
    base: Option<bool>,
}

impl ReadView {
    /// Opens another connection to the cache database at `path` (the
    /// schema is already there: the cache's own connection made it), with
    /// a page cache of up to `cache_kib` KiB.
    pub(super) fn open(path: &Path, cache_kib: u32) -> Result<ReadView> {
        let sq = |e| Error::sqlite(path, e);
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sq)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sq)?;
        conn.execute_batch(&format!(
            "PRAGMA query_only = 1; PRAGMA cache_size = -{cache_kib};"
        ))
        .map_err(sq)?;
        Ok(ReadView {
            conn,
            path: path.to_path_buf(),
            began: None,
            packs: HashMap::new(),
            base: None,
        })
    }

    /// Whether blob `id` is stored in a pack no deletion plan lists, as the
    /// current view sees it ([`super::Index::contains`] asks the same).
    pub fn contains(&mut self, id: &Id) -> Result<bool> {
        self.begin()?;
        let sq = |e| Error::sqlite(&self.path, e);
        let base = match self.base {
            Some(b) => b,
            None => *self.base.insert(has_base_on(&self.conn).map_err(sq)?),
        };
        contains_on(&self.conn, id, base).map_err(sq)
    }

    /// Where blob `id` is stored, as the current view sees it
    /// ([`super::Index::lookup`] asks the same).
    pub fn lookup(&mut self, id: &Id) -> Result<Option<BlobLocation>> {
        self.begin()?;
        lookup_on(&self.conn, id, &mut self.packs).map_err(|e| Error::sqlite(&self.path, e))
    }

    /// Whether tree `id` is recorded as checked, as the current view sees
    /// it ([`super::Index::tree_checked`]).
    pub fn tree_checked(&mut self, id: &Id) -> Result<bool> {
        self.begin()?;
        tree_checked_on(&self.conn, id).map_err(|e| Error::sqlite(&self.path, e))
    }

    /// Ends the current view: the next question sees the cache as it is
    /// then (after this process's own packer has indexed what it wrote).
    pub fn renew(&mut self) -> Result<()> {
        if self.began.take().is_some() {
            // A pack forgotten meanwhile may leave its number to another,
            // and a base may have come or gone.
            self.packs.clear();
            self.base = None;
            self.conn
                .execute_batch("COMMIT")
                .map_err(|e| Error::sqlite(&self.path, e))?;
        }
        Ok(())
    }

    /// Ends the current view if it is [`RENEW`] old or older.
    pub fn expire(&mut self) -> Result<()> {
        match self.began {
            Some(t) if t.elapsed() >= RENEW => self.renew(),
            _ => Ok(()),
        }
    }

    fn begin(&mut self) -> Result<()> {
        self.expire()?;
        if self.began.is_some() {
            return Ok(());
        }
        self.conn
            .execute_batch("BEGIN")
            .map_err(|e| Error::sqlite(&self.path, e))?;
        self.began = Some(Instant::now());
        Ok(())
    }
}
