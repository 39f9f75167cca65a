//! How much of each pack the snapshots use, worked out in SQL over the
//! used-blob set and the attached index cache (memory stays flat). A blob
//! stored in several packs is needed in one of them only, its **keeper**:
//! the copy in an unmarked pack if there is one, else any, the lowest pack
//! number breaking ties. Every other copy counts as unused.

use crate::error::{Error, Result};
use crate::id::Id;
use crate::maintenance::usage::Usage;
use crate::pack::BlobType;
use serde::Serialize;

/// One pack's usage.
#[derive(Clone, Debug, Serialize)]
pub struct PackUsage {
    pub id: Id,
    /// The pack's size in bytes, as the index records it.
    pub size: u64,
    pub blobs: u64,
    /// Stored bytes of all its blobs (its size less the header).
    pub stored_bytes: u64,
    pub used_blobs: u64,
    /// Stored bytes of the blobs it keeps for the snapshots.
    pub used_bytes: u64,
    /// Whether a deletion plan lists it.
    pub marked: bool,
    /// Whether it holds tree blobs only.
    pub trees_only: bool,
}

impl PackUsage {
    /// Stored bytes of blobs in this pack that no snapshot needs here.
    pub fn unused_bytes(&self) -> u64 {
        self.stored_bytes.saturating_sub(self.used_bytes)
    }
}

/// One blob to copy out of a pack being repacked.
#[derive(Clone, Copy, Debug)]
pub struct KeptBlob {
    pub ty: BlobType,
    pub id: Id,
    pub offset: u64,
    pub stored_len: u32,
    pub plain_len: u32,
    pub compression: u8,
}

fn err(e: rusqlite::Error) -> Error {
    Error::internal(format!("prune's usage database: {e}"))
}

/// A copy's rank as its blob's keeper, lowest first: a copy in an unmarked
/// pack before one in a marked pack, then the lower pack number (pack
/// numbers are row IDs, far below 2^40). `t` is the alias of `idx.blobs`.
/// [`choose_keepers`] and [`needed_blobs`] both rank by it.
fn keeper_rank(t: &str) -> String {
    format!("(({t}.marked << 40) | {t}.pack)")
}

/// Chooses each used blob's keeper (table `keeper(id, pack)`): the copy of
/// lowest [`keeper_rank`]. The set and the index's blobs are both read in
/// ID order, so the keepers are found and go in without sorting the whole
/// set. Blobs the index does not list get no keeper.
pub fn choose_keepers(u: &Usage) -> Result<()> {
    u.conn()
        .execute_batch(&format!(
            "DROP TABLE IF EXISTS keeper;
             CREATE TABLE keeper(id BLOB PRIMARY KEY, pack INTEGER NOT NULL) WITHOUT ROWID;
             INSERT INTO keeper(id, pack)
               SELECT u.id, min({rank}) & 1099511627775
               FROM used u JOIN idx.blobs b ON b.id = u.id
               GROUP BY u.id;
             CREATE INDEX keeper_by_pack ON keeper(pack);",
            rank = keeper_rank("b")
        ))
        .map_err(err)
}

/// How many used blobs pack `pack` is the keeper of, by the index as it is
/// now: those it holds with no copy of lower [`keeper_rank`]. The same
/// answer as the pack's `used_blobs` in [`pack_usage`] after
/// [`choose_keepers`], for a sweep that asks about the packs of its plans
/// only (0 for a pack the index no longer lists).
pub fn needed_blobs(u: &Usage, pack: &Id) -> Result<u64> {
    let sql = format!(
        "SELECT count(*) FROM idx.packs p JOIN idx.blobs b ON b.pack = p.num
         WHERE p.id = ?1
           AND EXISTS (SELECT 1 FROM used u WHERE u.id = b.id)
           AND NOT EXISTS (SELECT 1 FROM idx.blobs c WHERE c.id = b.id AND {} < {})",
        keeper_rank("c"),
        keeper_rank("b")
    );
    u.conn()
        .prepare_cached(&sql)
        .and_then(|mut st| st.query_row([pack.0], |r| r.get::<_, i64>(0)))
        .map(|n| n as u64)
        .map_err(err)
}

/// Used blobs the index does not know at all (a damaged repository: run
/// `check`; prune deletes nothing that could hold them).
pub fn missing_used(u: &Usage) -> Result<u64> {
    u.conn()
        .query_row(
            "SELECT count(*) FROM used u WHERE NOT EXISTS (SELECT 1 FROM idx.blobs b WHERE b.id = u.id)",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n as u64)
        .map_err(err)
}

/// Every indexed pack's usage (after [`choose_keepers`]).
pub fn pack_usage(u: &Usage) -> Result<Vec<PackUsage>> {
    let mut st = u
        .conn()
        .prepare(
            "SELECT p.id, p.size, count(b.id), coalesce(sum(b.stored_len), 0),
                    coalesce(sum(k.id IS NOT NULL), 0),
                    coalesce(sum(CASE WHEN k.id IS NOT NULL THEN b.stored_len ELSE 0 END), 0),
                    coalesce(max(b.marked), 0),
                    coalesce(min(b.type), 1)
             FROM idx.packs p
             LEFT JOIN idx.blobs b ON b.pack = p.num
             LEFT JOIN keeper k ON k.id = b.id AND k.pack = b.pack
             GROUP BY p.num",
        )
        .map_err(err)?;
    let rows = st
        .query_map([], |r| {
            Ok(PackUsage {
                id: Id(r.get(0)?),
                size: r.get::<_, i64>(1)? as u64,
                blobs: r.get::<_, i64>(2)? as u64,
                stored_bytes: r.get::<_, i64>(3)? as u64,
                used_blobs: r.get::<_, i64>(4)? as u64,
                used_bytes: r.get::<_, i64>(5)? as u64,
                marked: r.get::<_, i64>(6)? != 0,
                trees_only: r.get::<_, i64>(7)? == BlobType::Tree as i64,
            })
        })
        .map_err(err)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(err)
}

/// The blobs pack `pack` keeps for the snapshots, in pack order.
pub fn kept_blobs(u: &Usage, pack: &Id) -> Result<Vec<KeptBlob>> {
    let mut st = u
        .conn()
        .prepare_cached(
            "SELECT b.id, b.type, b.offset, b.stored_len, b.plain_len, b.compression
             FROM idx.packs p
             JOIN idx.blobs b ON b.pack = p.num
             JOIN keeper k ON k.id = b.id AND k.pack = b.pack
             WHERE p.id = ?1 ORDER BY b.offset",
        )
        .map_err(err)?;
    let rows = st
        .query_map([pack.0], |r| {
            Ok((
                r.get::<_, [u8; 32]>(0)?,
                r.get::<_, u8>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, u8>(5)?,
            ))
        })
        .map_err(err)?;
    let mut out = Vec::new();
    for row in rows {
        let (id, ty, off, sl, pl, c) = row.map_err(err)?;
        let ty = BlobType::from_u8(ty).ok_or_else(|| {
            Error::corrupt(format!("pack {pack}"), "unknown blob type in the index")
        })?;
        out.push(KeptBlob {
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
