//! `stats`: how big the snapshots are, in restic's four counting modes, and
//! the repository's totals (larder's own `repository` mode).
//!
//! The modes, over the selected snapshots (restic's meanings):
//! - `restore-size`: what a restore of each snapshot writes: the size of
//!   every file, summed over the snapshots; every entry (file, directory,
//!   symlink, …) is counted, as restic counts them; hard links to one inode
//!   count once per snapshot.
//! - `files-by-contents`: regular files counted once per distinct content
//!   (the same chunk list anywhere, in any snapshot, is one file).
//! - `raw-data`: the blobs (trees and data) the snapshots use, each once:
//!   bytes as stored, and before compression.
//! - `blobs-per-file`: for each file of distinct content, its chunks counted
//!   once per path (a chunk shared by two versions of one file counts once).
//!
//! Every set (trees seen, contents seen, chunks per path, hard links,
//! per-tree sizes) lives in a temporary SQLite database ([`Usage`]'s, with
//! the index cache attached), never in memory: memory stays flat for any
//! repository. Restore sizes are memoised per tree, so a subtree shared by
//! many snapshots is read once (unless it holds hard links, whose counting
//! depends on the snapshot).

use super::usage::Usage;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::repository::Repository;
use crate::snapshot::{self, Filter, Snapshot};
use crate::tree::{Node, NodeKind};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

/// A counting mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    RestoreSize,
    FilesByContents,
    RawData,
    BlobsPerFile,
    /// The repository's totals (all snapshots, the whole index).
    Repository,
}

impl Mode {
    /// Every mode, by name.
    pub const ALL: [(&'static str, Mode); 5] = [
        ("restore-size", Mode::RestoreSize),
        ("files-by-contents", Mode::FilesByContents),
        ("raw-data", Mode::RawData),
        ("blobs-per-file", Mode::BlobsPerFile),
        ("repository", Mode::Repository),
    ];

    /// Parses a mode name.
    pub fn parse(s: &str) -> Result<Mode> {
        Self::ALL
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, m)| *m)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|(n, _)| *n).collect();
                Error::Usage(format!(
                    "unknown --mode {s:?}; use one of {}",
                    names.join(", ")
                ))
            })
    }

    /// The mode's name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("?", |(n, _)| n)
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_f(n: &f64) -> bool {
    *n == 0.0
}

/// The result of the four snapshot modes, in restic's JSON shape.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SnapshotStats {
    pub total_size: u64,
    /// raw-data: the blobs' plaintext bytes (restic counts its ciphertext
    /// overhead here too; larder counts the plaintext).
    #[serde(skip_serializing_if = "is_zero")]
    pub total_uncompressed_size: u64,
    /// raw-data: plaintext / stored bytes over the compressed blobs.
    #[serde(skip_serializing_if = "is_zero_f")]
    pub compression_ratio: f64,
    /// raw-data: the share (%) of plaintext bytes that is in compressed blobs.
    #[serde(skip_serializing_if = "is_zero_f")]
    pub compression_progress: f64,
    /// raw-data: 100 × (1 − stored / plaintext).
    #[serde(skip_serializing_if = "is_zero_f")]
    pub compression_space_saving: f64,
    #[serde(skip_serializing_if = "is_zero")]
    pub total_file_count: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub total_blob_count: u64,
    pub snapshots_count: u64,
    /// Chunks that files name but the index does not hold (the repository
    /// needs `check` and `repair snapshots`); not counted in the sizes.
    #[serde(skip_serializing_if = "is_zero")]
    pub missing_blobs: u64,
}

/// The repository's totals (`--mode repository`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct RepositoryStats {
    pub snapshots: u64,
    /// Packs the index lists, and their bytes in storage.
    pub packs: u64,
    pub pack_bytes: u64,
    /// Distinct blobs, and of them trees and data.
    pub blobs: u64,
    pub tree_blobs: u64,
    pub data_blobs: u64,
    /// Copies beyond the first of blobs stored more than once, and their
    /// stored bytes.
    pub duplicate_blob_copies: u64,
    pub duplicate_bytes: u64,
    /// Bytes of every blob copy as stored (compressed and sealed), and
    /// their plaintext before compression.
    pub stored_bytes: u64,
    pub uncompressed_bytes: u64,
    /// `uncompressed_bytes / stored_bytes`.
    pub compression_ratio: f64,
    /// What restoring every snapshot would write (their restore sizes
    /// summed).
    pub restore_size: u64,
    /// Plaintext bytes of the distinct data blobs the snapshots use.
    pub unique_data_size: u64,
    /// `restore_size / unique_data_size`.
    pub dedup_factor: f64,
    /// Distinct blobs some snapshot uses, and their stored bytes (one copy
    /// each).
    pub used_blobs: u64,
    pub used_bytes: u64,
    /// Distinct blobs no snapshot uses, and the stored bytes of all their
    /// copies: what prune will free (beside duplicates and pack headers).
    pub unused_blobs: u64,
    pub unused_bytes: u64,
    /// Blobs the snapshots use that the index does not hold.
    pub missing_blobs: u64,
}

/// Counts `snaps` in `mode` (one of the four snapshot modes), under a
/// shared lock.
pub fn snapshot_stats(
    repo: &Repository,
    snaps: &[(Id, Snapshot)],
    mode: Mode,
) -> Result<SnapshotStats> {
    let _lock = repo.lock_for_reading()?;
    let mut st = SnapshotStats {
        snapshots_count: snaps.len() as u64,
        ..Default::default()
    };
    match mode {
        Mode::RestoreSize => {
            let scratch = Scratch::new(repo)?;
            for (i, (id, s)) in snaps.iter().enumerate() {
                let label = format!("snapshot {}", id.short());
                let (size, nodes, _) = scratch.restore_size(&s.tree, &label, i as i64, 1)?;
                st.total_size += size;
                st.total_file_count += nodes;
            }
        }
        Mode::FilesByContents | Mode::BlobsPerFile => {
            let mut scratch = Scratch::new(repo)?;
            scratch.count_contents(snaps, mode == Mode::BlobsPerFile, &mut st)?;
        }
        Mode::RawData => raw_data(repo, snaps, &mut st)?,
        Mode::Repository => {
            return Err(Error::Usage(
                "the repository mode is counted by repository_stats".into(),
            ));
        }
    }
    Ok(st)
}

/// raw-data: every blob the snapshots use, once, by SQL over the used set
/// and the index.
fn raw_data(repo: &Repository, snaps: &[(Id, Snapshot)], st: &mut SnapshotStats) -> Result<()> {
    let mut usage = Usage::new(repo)?;
    usage.mark(repo, roots(snaps))?;
    let err = |e| Error::internal(format!("counting used blobs: {e}"));
    let (n, stored, plain, c_stored, c_plain): (i64, i64, i64, i64, i64) = usage
        .conn()
        .query_row(
            "SELECT count(*), coalesce(sum(stored_len), 0), coalesce(sum(plain_len), 0),
                    coalesce(sum(CASE WHEN compression != 0 THEN stored_len END), 0),
                    coalesce(sum(CASE WHEN compression != 0 THEN plain_len END), 0)
             FROM (SELECT b.stored_len, b.plain_len, b.compression, min(b.pack)
                   FROM used u JOIN idx.blobs b ON b.id = u.id GROUP BY u.id)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .map_err(err)?;
    st.total_blob_count = n as u64;
    st.total_size = stored as u64;
    st.total_uncompressed_size = plain as u64;
    if c_stored > 0 {
        st.compression_ratio = c_plain as f64 / c_stored as f64;
    }
    if plain > 0 {
        st.compression_progress = c_plain as f64 / plain as f64 * 100.0;
        st.compression_space_saving = (1.0 - stored as f64 / plain as f64) * 100.0;
    }
    st.missing_blobs = count_missing(usage.conn()).map_err(err)?;
    Ok(())
}

/// Used blobs the index does not hold.
fn count_missing(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row(
        "SELECT count(*) FROM used u WHERE NOT EXISTS (SELECT 1 FROM idx.blobs b WHERE b.id = u.id)",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n as u64)
}

fn roots(snaps: &[(Id, Snapshot)]) -> Vec<(Id, String)> {
    snaps
        .iter()
        .map(|(id, s)| (s.tree, format!("snapshot {}", id.short())))
        .collect()
}

/// The repository's totals over every snapshot and the whole index, under
/// a shared lock.
pub fn repository_stats(repo: &Repository) -> Result<RepositoryStats> {
    let _lock = repo.lock_for_reading()?;
    let (snaps, bad) = snapshot::list(repo, &Filter::default())?;
    if let Some(e) = bad.into_iter().next() {
        // Blobs an unreadable snapshot uses would look unused.
        return Err(Error::corrupt(
            "snapshots",
            format!("{e}; the repository's totals need every snapshot"),
        ));
    }
    let mut t = RepositoryStats {
        snapshots: snaps.len() as u64,
        ..Default::default()
    };
    let mut scratch = Scratch::new(repo)?;
    for (i, (id, s)) in snaps.iter().enumerate() {
        let label = format!("snapshot {}", id.short());
        t.restore_size += scratch.restore_size(&s.tree, &label, i as i64, 1)?.0;
    }
    scratch.usage.mark(repo, roots(&snaps))?;
    index_totals(scratch.conn(), &mut t)
        .map_err(|e| Error::internal(format!("counting the index: {e}")))?;
    t.compression_ratio = ratio(t.uncompressed_bytes, t.stored_bytes);
    t.dedup_factor = ratio(t.restore_size, t.unique_data_size);
    Ok(t)
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// The SQL half of [`repository_stats`]: over `idx` and the used set.
fn index_totals(c: &Connection, t: &mut RepositoryStats) -> rusqlite::Result<()> {
    let q = |sql: &str| -> rusqlite::Result<(u64, u64)> {
        c.query_row(sql, [], |r| {
            Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
        })
    };
    (t.packs, t.pack_bytes) = q("SELECT count(*), coalesce(sum(size), 0) FROM idx.packs")?;
    let (copies, _) = q("SELECT count(*), 0 FROM idx.blobs")?;
    (t.stored_bytes, t.uncompressed_bytes) =
        q("SELECT coalesce(sum(stored_len), 0), coalesce(sum(plain_len), 0) FROM idx.blobs")?;
    (t.tree_blobs, t.data_blobs) = q("SELECT count(CASE WHEN type = 1 THEN 1 END),
                count(CASE WHEN type = 0 THEN 1 END)
         FROM (SELECT id, min(type) AS type FROM idx.blobs GROUP BY id)")?;
    t.blobs = t.tree_blobs + t.data_blobs;
    t.duplicate_blob_copies = copies - t.blobs;
    // Every copy but the one in the lowest-numbered pack.
    (_, t.duplicate_bytes) = q("SELECT 0, coalesce(sum(b.stored_len), 0) FROM idx.blobs b
         WHERE b.pack > (SELECT min(pack) FROM idx.blobs c WHERE c.id = b.id)")?;
    (t.used_blobs, t.used_bytes) = q("SELECT count(*), coalesce(sum(stored_len), 0)
         FROM (SELECT b.stored_len, min(b.pack) FROM used u JOIN idx.blobs b ON b.id = u.id
               GROUP BY u.id)")?;
    (t.unused_blobs, t.unused_bytes) = q(
        "SELECT count(DISTINCT b.id), coalesce(sum(b.stored_len), 0) FROM idx.blobs b
         WHERE NOT EXISTS (SELECT 1 FROM used u WHERE u.id = b.id)",
    )?;
    (_, t.unique_data_size) = q("SELECT 0, coalesce(sum(plain_len), 0)
         FROM (SELECT b.plain_len, min(b.pack) FROM used u JOIN idx.blobs b ON b.id = u.id
               WHERE b.type = 0 GROUP BY u.id)")?;
    t.missing_blobs = count_missing(c)?;
    Ok(())
}

/// The scratch tables of one count, in a [`Usage`] database (whose `used`
/// table serves as the set of trees seen).
struct Scratch<'r> {
    repo: &'r Repository,
    usage: Usage,
}

impl<'r> Scratch<'r> {
    fn new(repo: &'r Repository) -> Result<Scratch<'r>> {
        let usage = Usage::new(repo)?;
        usage
            .conn()
            .execute_batch(
                "CREATE TABLE tree_size(id BLOB PRIMARY KEY, size INTEGER, nodes INTEGER)
                   WITHOUT ROWID;
                 CREATE TABLE links(snap INTEGER, dev INTEGER, ino INTEGER,
                   PRIMARY KEY(snap, dev, ino)) WITHOUT ROWID;
                 CREATE TABLE contents(h BLOB PRIMARY KEY) WITHOUT ROWID;
                 CREATE TABLE file_blobs(path BLOB, blob BLOB, PRIMARY KEY(path, blob))
                   WITHOUT ROWID;
                 CREATE TABLE paths(path BLOB PRIMARY KEY) WITHOUT ROWID;",
            )
            .map_err(|e| Error::internal(format!("stats scratch database: {e}")))?;
        Ok(Scratch { repo, usage })
    }

    fn conn(&self) -> &Connection {
        self.usage.conn()
    }

    /// Inserts into a scratch table; returns whether the row was new.
    fn insert(&self, sql: &str, p: impl rusqlite::Params) -> Result<bool> {
        self.conn()
            .prepare_cached(sql)
            .and_then(|mut st| st.execute(p))
            .map(|n| n > 0)
            .map_err(|e| Error::internal(format!("stats scratch database: {e}")))
    }

    /// The restore size and entry count of tree `id` (reached at `path`)
    /// for snapshot number `snap`, and whether it holds hard links.
    /// (`depth`: of the tree below the snapshot's root, at most
    /// [`crate::tree::MAX_DEPTH`].)
    fn restore_size(
        &self,
        id: &Id,
        path: &str,
        snap: i64,
        depth: usize,
    ) -> Result<(u64, u64, bool)> {
        crate::interrupt::check()?;
        crate::tree::check_depth(depth, format!("tree {id}"))?;
        let memo = self
            .conn()
            .prepare_cached("SELECT size, nodes FROM tree_size WHERE id = ?1")
            .and_then(|mut st| {
                st.query_row(params![id.0], |r| {
                    Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
                })
                .optional()
            })
            .map_err(|e| Error::internal(format!("stats scratch database: {e}")))?;
        if let Some((size, nodes)) = memo {
            return Ok((size, nodes, false));
        }
        let tree = load(self.repo, id, path)?;
        let (mut size, mut nodes, mut links) = (0u64, 0u64, false);
        for n in &tree.nodes {
            nodes += 1;
            if n.kind == NodeKind::Dir || n.links <= 1 {
                size += n.size;
            } else {
                links = true;
                let new = n.inode == 0
                    || self.insert(
                        "INSERT OR IGNORE INTO links(snap, dev, ino) VALUES (?1, ?2, ?3)",
                        params![snap, n.device as i64, n.inode as i64],
                    )?;
                if new {
                    size += n.size;
                }
            }
            if let (NodeKind::Dir, Some(sub)) = (n.kind, n.subtree) {
                let p = format!("{path}/{}", n.name_lossy());
                let (s, c, l) = self.restore_size(&sub, &p, snap, depth + 1)?;
                size += s;
                nodes += c;
                links |= l;
            }
        }
        if !links {
            self.insert(
                "INSERT OR IGNORE INTO tree_size(id, size, nodes) VALUES (?1, ?2, ?3)",
                params![id.0, size as i64, nodes as i64],
            )?;
        }
        Ok((size, nodes, links))
    }

    /// files-by-contents and blobs-per-file: every distinct tree once (a
    /// tree seen before holds no content not yet seen).
    fn count_contents(
        &mut self,
        snaps: &[(Id, Snapshot)],
        per_blob: bool,
        st: &mut SnapshotStats,
    ) -> Result<()> {
        // (tree, its path in the snapshot, the snapshot's index): paths
        // must not name the snapshot, since chunks are counted per path.
        let mut stack: Vec<(Id, String, usize)> = snaps
            .iter()
            .enumerate()
            .map(|(i, (_, s))| (s.tree, String::new(), i))
            .collect();
        while let Some((id, path, i)) = stack.pop() {
            crate::interrupt::check()?;
            if !self.usage.insert(&id)? {
                continue;
            }
            let label = format!("snapshot {}{path}", snaps[i].0.short());
            let tree = load(self.repo, &id, &label)?;
            for n in &tree.nodes {
                let p = format!("{path}/{}", n.name_lossy());
                match (n.kind, n.subtree) {
                    (NodeKind::Dir, Some(sub)) => stack.push((sub, p, i)),
                    (NodeKind::File, _) => self.count_file(n, &p, per_blob, st)?,
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn count_file(
        &self,
        n: &Node,
        path: &str,
        per_blob: bool,
        st: &mut SnapshotStats,
    ) -> Result<()> {
        let mut h = blake3::Hasher::new();
        for c in &n.content {
            h.update(&c.0);
        }
        let content: [u8; 32] = h.finalize().into();
        if !self.insert(
            "INSERT OR IGNORE INTO contents(h) VALUES (?1)",
            params![content],
        )? {
            return Ok(());
        }
        if !per_blob {
            st.total_size += n.size;
            st.total_file_count += 1;
            return Ok(());
        }
        // Paths are keyed by their hash (a label, not a secret).
        let key: [u8; 32] = blake3::hash(path.as_bytes()).into();
        let locs = self.repo.lookup_many(&n.content)?;
        for (c, loc) in n.content.iter().zip(locs) {
            if self.insert(
                "INSERT OR IGNORE INTO paths(path) VALUES (?1)",
                params![key],
            )? {
                st.total_file_count += 1;
            }
            if !self.insert(
                "INSERT OR IGNORE INTO file_blobs(path, blob) VALUES (?1, ?2)",
                params![key, c.0],
            )? {
                continue;
            }
            match loc {
                Some(l) => {
                    st.total_size += l.entry.plain_len as u64;
                    st.total_blob_count += 1;
                }
                None => st.missing_blobs += 1,
            }
        }
        Ok(())
    }
}

/// Loads tree `id`, naming where it was reached on failure.
fn load(repo: &Repository, id: &Id, path: &str) -> Result<crate::tree::Tree> {
    repo.load_tree_checked(id).map_err(|e| match e {
        Error::Interrupted => e,
        e => Error::corrupt(format!("tree {id} at {path}"), e),
    })
}
