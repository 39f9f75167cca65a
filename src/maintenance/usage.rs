//! Which blobs the snapshots use: every tree reachable from a set of
//! snapshot roots and every data blob their files name, kept in a temporary
//! SQLite database beside the index cache (never in a map in memory: memory
//! stays flat however large the repository is). The index cache is attached
//! to it read-only, so questions such as "how much of each pack is used"
//! are answered by SQL over both. Prune, `stats` and `repair snapshots`
//! share it.

use crate::error::{Error, Result};
use crate::id::Id;
use crate::repository::Repository;
use crate::tree::NodeKind;
use rusqlite::{Connection, params};
use std::path::{Path, PathBuf};

/// Rows inserted per transaction while marking.
const BATCH: usize = 50_000;

const INSERT: &str = "INSERT OR IGNORE INTO used(id) VALUES (?1)";

/// Adds `id` to the set through `st` (the prepared [`INSERT`]), committing
/// every [`BATCH`] rows; returns whether it was new.
fn add(
    conn: &Connection,
    st: &mut rusqlite::CachedStatement<'_>,
    pending: &mut usize,
    id: &Id,
) -> rusqlite::Result<bool> {
    let n = st.execute(params![id.0])?;
    *pending += 1;
    if *pending >= BATCH {
        conn.execute_batch("COMMIT; BEGIN")?;
        *pending = 0;
    }
    Ok(n > 0)
}

/// A used-blob set in a temporary database (removed on drop).
pub struct Usage {
    conn: Connection,
    path: PathBuf,
    /// Inserts since the last commit.
    pending: usize,
}

/// What a mark found.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct MarkStats {
    pub snapshots: u64,
    /// Distinct trees visited.
    pub trees: u64,
    /// Distinct data blobs named by files.
    pub data_blobs: u64,
}

impl Usage {
    /// An empty set in a new temporary database in `repo`'s cache
    /// directory, with the index cache attached as `idx`.
    pub fn new(repo: &Repository) -> Result<Usage> {
        let dir = repo.cache_dir();
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut rnd = [0u8; 8];
        crate::crypto::fill_random(&mut rnd)?;
        let path = dir.join(format!("usage-{}.sqlite", hex::encode(rnd)));
        let conn = Connection::open(&path).map_err(|e| Error::sqlite(&path, e))?;
        // SQL over the cache needs every blob as a row.
        let index_path = {
            let mut idx = repo.index()?;
            idx.materialize()?;
            idx.path().to_path_buf()
        };
        let usage = Usage {
            conn,
            path,
            pending: 0,
        };
        usage
            .conn
            .execute_batch(
                "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-8192;
                 PRAGMA temp_store=FILE;
                 CREATE TABLE used(id BLOB PRIMARY KEY) WITHOUT ROWID;",
            )
            .map_err(|e| usage.err(e))?;
        usage.attach_index(&index_path)?;
        usage
            .conn
            .execute_batch("BEGIN")
            .map_err(|e| usage.err(e))?;
        Ok(usage)
    }

    /// Attaches the index cache read-only as `idx`.
    fn attach_index(&self, index: &Path) -> Result<()> {
        // rusqlite opens connections with SQLITE_OPEN_URI, so a URI works.
        let uri = format!(
            "file:{}?mode=ro",
            index
                .display()
                .to_string()
                .replace('%', "%25")
                .replace('?', "%3f")
                .replace('#', "%23")
        );
        self.conn
            .execute("ATTACH DATABASE ?1 AS idx", params![uri])
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn err(&self, e: rusqlite::Error) -> Error {
        Error::sqlite(&self.path, e)
    }

    /// The connection, for queries over `used` and `idx`.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Adds `id`; returns whether it was new.
    pub fn insert(&mut self, id: &Id) -> Result<bool> {
        let mut st = self.conn.prepare_cached(INSERT).map_err(|e| self.err(e))?;
        add(&self.conn, &mut st, &mut self.pending, id).map_err(|e| self.err(e))
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: &Id) -> Result<bool> {
        self.conn
            .prepare_cached("SELECT 1 FROM used WHERE id = ?1")
            .and_then(|mut st| st.exists(params![id.0]))
            .map_err(|e| self.err(e))
    }

    /// Marks everything reachable from the snapshot trees `roots` (each a
    /// tree ID and a label for messages). A tree that cannot be read is an
    /// error: what it references cannot be known, so nothing may be judged
    /// unused.
    pub fn mark(
        &mut self,
        repo: &Repository,
        roots: impl IntoIterator<Item = (Id, String)>,
    ) -> Result<MarkStats> {
        let mut stats = MarkStats::default();
        let mut stack: Vec<(Id, String)> = Vec::new();
        for r in roots {
            stats.snapshots += 1;
            stack.push(r);
        }
        let path_of = self.path.clone();
        let sq = |e| Error::sqlite(&path_of, e);
        let mut st = self.conn.prepare_cached(INSERT).map_err(sq)?;
        while let Some((id, path)) = stack.pop() {
            crate::interrupt::check()?;
            if !add(&self.conn, &mut st, &mut self.pending, &id).map_err(sq)? {
                continue;
            }
            stats.trees += 1;
            let tree = repo.load_tree_checked(&id).map_err(|e| {
                Error::corrupt(
                    format!("tree {id} at {path}"),
                    format!("{e}; what it references cannot be known, so nothing is judged unused"),
                )
            })?;
            for n in &tree.nodes {
                match (n.kind, n.subtree) {
                    (NodeKind::Dir, Some(s)) => {
                        stack.push((s, format!("{path}/{}", n.name_lossy())));
                    }
                    (NodeKind::File, _) => {
                        for c in &n.content {
                            if add(&self.conn, &mut st, &mut self.pending, c).map_err(sq)? {
                                stats.data_blobs += 1;
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        drop(st);
        self.end_reads()?;
        Ok(stats)
    }

    /// Ends the read of the attached index this connection may hold open
    /// (commits the set), so that what the index cache writes from now on
    /// is what the next query sees. The set stays as it is.
    pub fn end_reads(&mut self) -> Result<()> {
        self.conn
            .execute_batch("COMMIT; BEGIN")
            .map_err(|e| self.err(e))?;
        self.pending = 0;
        Ok(())
    }

    /// Number of blobs in the set.
    pub fn len(&self) -> Result<u64> {
        self.conn
            .query_row("SELECT count(*) FROM used", [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(|e| self.err(e))
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
}

impl Drop for Usage {
    fn drop(&mut self) {
        let _ = self.conn.execute_batch("COMMIT");
        for ext in ["", "-journal", "-wal", "-shm"] {
            let mut p = self.path.as_os_str().to_owned();
            p.push(ext);
            let _ = std::fs::remove_file(PathBuf::from(p));
        }
    }
}
