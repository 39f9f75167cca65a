//! Which packs `check --read-data-subset` reads, and the record of when
//! each pack's data was last verified.
//!
//! The record is a small SQLite database of its own in the repository's
//! cache directory (`check-verified.sqlite`: pack id, the run that verified
//! it, and when). It is only a record: losing it means the rotation starts
//! over (every pack counts as never verified), which is safe. A pack is
//! recorded as soon as it has been read without a problem, so a check that
//! is interrupted keeps what it verified; a pack with a problem is not
//! recorded and stays first in line.
//!
//! The subsets, as restic's `--read-data-subset`:
//! - `N%`: about N % of the packs (rounded up, at least one), those verified
//!   longest ago first, never verified ones before all others (ties by pack
//!   id). A nightly `5%` reads every pack within 20 nights, as long as the
//!   repository grows by less than 5 % of its packs a night.
//! - `SIZE` (`500M`, `2G`; K, M, G, T are powers of 1024): packs in the same
//!   order until at least SIZE bytes are selected (at least one pack).
//! - `n/t`: restic's fixed slice, by pack id: the packs whose first id byte
//!   modulo `t` is `n - 1` (1 ≤ n ≤ t ≤ 256). The slices 1/t … t/t
//!   partition the packs.

use crate::error::{Error, Result};
use crate::id::Id;
use crate::repository::Repository;
use rusqlite::{Connection, params};
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest `t` of `n/t`: the slice is taken from the first byte of
/// the pack id, so more slices than 256 would leave some empty (restic's
/// limit too).
pub const MAX_SLICES: u32 = 256;

/// The file name of the verification record in the repository's cache
/// directory.
pub const RECORD_FILE: &str = "check-verified.sqlite";

/// Which packs to read.
#[derive(Clone, Debug, PartialEq)]
pub enum DataSubset {
    /// This percentage (0 < p ≤ 100) of the packs, oldest verification first.
    Percent(f64),
    /// At least this many bytes of packs, oldest verification first.
    Bytes(u64),
    /// restic's slice `n` of `t`, by pack id.
    Slice { n: u32, t: u32 },
}

impl DataSubset {
    /// Parses `10%`, `2.5%`, `1/5` or `500M` (K, M, G, T: powers of 1024;
    /// a plain number is bytes).
    pub fn parse(s: &str) -> Result<DataSubset> {
        let bad = |why: &str| {
            Error::Usage(format!(
                "invalid --read-data-subset {s:?}: {why}; use N% (e.g. 5%), n/t (e.g. 1/5) or a size (e.g. 500M)"
            ))
        };
        let t = s.trim();
        if let Some(p) = t.strip_suffix('%') {
            let p: f64 = p.trim().parse().map_err(|_| bad("not a number"))?;
            if !(p > 0.0 && p <= 100.0) {
                return Err(bad("the percentage must be above 0 and at most 100"));
            }
            return Ok(DataSubset::Percent(p));
        }
        if let Some((n, d)) = t.split_once('/') {
            let n: u32 = n.trim().parse().map_err(|_| bad("n is not a number"))?;
            let d: u32 = d.trim().parse().map_err(|_| bad("t is not a number"))?;
            if n == 0 || d == 0 || n > d {
                return Err(bad("n and t must be positive, with n ≤ t"));
            }
            if d > MAX_SLICES {
                return Err(bad(&format!("t must be at most {MAX_SLICES}")));
            }
            return Ok(DataSubset::Slice { n, t: d });
        }
        let (digits, mult) = match t.char_indices().last() {
            Some((i, c)) if c.is_ascii_alphabetic() => {
                let shift = match c.to_ascii_uppercase() {
                    'K' => 10,
                    'M' => 20,
                    'G' => 30,
                    'T' => 40,
                    _ => return Err(bad("unknown size unit")),
                };
                (&t[..i], 1u64 << shift)
            }
            _ => (t, 1),
        };
        let n: u64 = digits.trim().parse().map_err(|_| bad("not a number"))?;
        match n.checked_mul(mult) {
            Some(0) => Err(bad("the size must be above 0")),
            Some(b) => Ok(DataSubset::Bytes(b)),
            None => Err(bad("the size is too large")),
        }
    }

    /// Whether the percentage or size is taken in rotation (oldest first);
    /// slices are fixed.
    pub fn rotates(&self) -> bool {
        !matches!(self, DataSubset::Slice { .. })
    }
}

impl std::fmt::Display for DataSubset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataSubset::Percent(p) => write!(f, "{p}%"),
            DataSubset::Bytes(b) => write!(f, "{b} bytes"),
            DataSubset::Slice { n, t } => write!(f, "{n}/{t}"),
        }
    }
}

/// When a pack was last verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The check run that verified it (runs are numbered upwards).
    pub run: i64,
    /// Seconds since the Unix epoch.
    pub time: i64,
}

/// How much of the repository's data has been verified, over the packs the
/// index lists now.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Coverage {
    pub packs_total: u64,
    pub bytes_total: u64,
    pub packs_verified: u64,
    pub bytes_verified: u64,
    /// Packs never verified (or not since the record was lost).
    pub packs_never_verified: u64,
    /// When the least recently verified of the verified packs was verified
    /// (RFC 3339), and how many seconds ago.
    pub oldest_verification: Option<String>,
    pub oldest_verification_age_secs: Option<u64>,
}

/// The verification record (see the module documentation).
pub struct VerifyLog {
    conn: Connection,
    path: PathBuf,
}

impl VerifyLog {
    /// Opens (creating if needed) `repo`'s record. A file SQLite cannot
    /// read is replaced: the record is only a record.
    pub fn open(repo: &Repository) -> Result<VerifyLog> {
        let dir = repo.cache_dir();
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join(RECORD_FILE);
        match Self::open_at(&path) {
            Ok(l) => Ok(l),
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
                Self::open_at(&path)
            }
            Err(e) => Err(e),
        }
    }

    fn open_at(path: &Path) -> Result<VerifyLog> {
        let err = |e| Error::sqlite(path, e);
        let conn = Connection::open(path).map_err(err)?;
        conn.busy_timeout(Duration::from_secs(120)).map_err(err)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
             CREATE TABLE IF NOT EXISTS verified(
               pack BLOB PRIMARY KEY,
               run INTEGER NOT NULL,
               time INTEGER NOT NULL
             ) WITHOUT ROWID;",
        )
        .map_err(err)?;
        Ok(VerifyLog {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn err(&self, e: rusqlite::Error) -> Error {
        Error::sqlite(&self.path, e)
    }

    /// Every recorded pack with its last verification (including packs
    /// the index no longer lists).
    pub fn all(&self) -> Result<HashMap<Id, Verified>> {
        let mut st = self
            .conn
            .prepare("SELECT pack, run, time FROM verified")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, [u8; 32]>(0)?,
                    Verified {
                        run: r.get(1)?,
                        time: r.get(2)?,
                    },
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out = HashMap::new();
        for r in rows {
            let (id, v) = r.map_err(|e| self.err(e))?;
            out.insert(Id(id), v);
        }
        Ok(out)
    }

    /// A number for a new run, above every recorded one.
    pub fn next_run(&self) -> Result<i64> {
        self.conn
            .query_row("SELECT coalesce(max(run), 0) + 1 FROM verified", [], |r| {
                r.get(0)
            })
            .map_err(|e| self.err(e))
    }

    /// Records that `pack` was verified by `run` at `time`.
    pub fn record(&self, pack: &Id, run: i64, time: i64) -> Result<()> {
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO verified(pack, run, time) VALUES (?1, ?2, ?3)")
            .and_then(|mut st| st.execute(params![pack.0, run, time]))
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Forgets packs that are not in `current` (deleted by prune), so the
    /// record does not grow forever.
    pub fn retain(&self, current: &[(Id, u64)]) -> Result<()> {
        let keep: std::collections::HashSet<Id> = current.iter().map(|(id, _)| *id).collect();
        let gone: Vec<Id> = self
            .all()?
            .into_keys()
            .filter(|id| !keep.contains(id))
            .collect();
        if gone.is_empty() {
            return Ok(());
        }
        let tx = self.conn.unchecked_transaction().map_err(|e| self.err(e))?;
        for id in &gone {
            tx.execute("DELETE FROM verified WHERE pack = ?1", params![id.0])
                .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))
    }
}

/// The packs of `packs` (id, size) to read for `subset` (all for `None`),
/// given when each was last verified. Rotating subsets take the packs in
/// order of last verification: never verified first, then by run, ties by
/// pack id.
pub fn select(
    packs: &[(Id, u64)],
    verified: &HashMap<Id, Verified>,
    subset: Option<&DataSubset>,
) -> Vec<(Id, u64)> {
    let Some(subset) = subset else {
        return packs.to_vec();
    };
    if let DataSubset::Slice { n, t } = *subset {
        return packs
            .iter()
            .filter(|(id, _)| u32::from(id.0[0]) % t == n - 1)
            .copied()
            .collect();
    }
    let mut order: Vec<(Id, u64)> = packs.to_vec();
    order.sort_by_key(|(id, _)| (verified.get(id).map(|v| (v.run, v.time)), *id));
    match *subset {
        DataSubset::Percent(p) => {
            // (The epsilon keeps 7% of 100 packs at 7 whatever the rounding.)
            let k = (packs.len() as f64 * p / 100.0 - 1e-9).ceil() as usize;
            order.truncate(k.clamp(1, packs.len().max(1)));
        }
        DataSubset::Bytes(want) => {
            let mut sum = 0u64;
            let mut k = 0;
            while k < order.len() && (k == 0 || sum < want) {
                sum = sum.saturating_add(order[k].1);
                k += 1;
            }
            order.truncate(k);
        }
        DataSubset::Slice { .. } => {}
    }
    order
}

/// How much of `packs` has been verified, as of `now` (Unix seconds).
pub fn coverage(packs: &[(Id, u64)], verified: &HashMap<Id, Verified>, now: i64) -> Coverage {
    let mut c = Coverage::default();
    let mut oldest: Option<i64> = None;
    for (id, size) in packs {
        c.packs_total += 1;
        c.bytes_total += size;
        match verified.get(id) {
            Some(v) => {
                c.packs_verified += 1;
                c.bytes_verified += size;
                oldest = Some(oldest.map_or(v.time, |o| o.min(v.time)));
            }
            None => c.packs_never_verified += 1,
        }
    }
    if let Some(t) = oldest {
        c.oldest_verification = jiff::Timestamp::from_second(t)
            .ok()
            .map(|ts| ts.to_string());
        c.oldest_verification_age_secs = Some(now.saturating_sub(t).max(0) as u64);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(first: u8, rest: u8) -> Id {
        let mut b = [rest; 32];
        b[0] = first;
        Id(b)
    }

    #[test]
    fn parses_restics_forms_and_refuses_the_rest() {
        assert_eq!(DataSubset::parse("5%").unwrap(), DataSubset::Percent(5.0));
        assert_eq!(DataSubset::parse("2.5%").unwrap(), DataSubset::Percent(2.5));
        assert_eq!(
            DataSubset::parse("2/7").unwrap(),
            DataSubset::Slice { n: 2, t: 7 }
        );
        assert_eq!(DataSubset::parse("3M").unwrap(), DataSubset::Bytes(3 << 20));
        assert_eq!(DataSubset::parse("1g").unwrap(), DataSubset::Bytes(1 << 30));
        assert_eq!(DataSubset::parse("4096").unwrap(), DataSubset::Bytes(4096));
        for bad in [
            "0%",
            "101%",
            "x%",
            "0/3",
            "4/3",
            "1/257",
            "1/0",
            "",
            "5Q",
            "0M",
            "-1%",
            "99999999999T",
        ] {
            let e = DataSubset::parse(bad).unwrap_err();
            assert!(matches!(e, Error::Usage(_)), "{bad}: {e}");
            assert!(e.to_string().contains("--read-data-subset"), "{e}");
        }
    }

    #[test]
    fn percentages_round_up_and_take_the_longest_unverified_first() {
        let packs: Vec<(Id, u64)> = (0..10u8).map(|i| (id(i, i), 100)).collect();
        let mut v = HashMap::new();
        // Packs 0..5 verified in runs 1..5 (pack 4 most recently).
        for i in 0..5u8 {
            v.insert(
                id(i, i),
                Verified {
                    run: i as i64 + 1,
                    time: 1000 + i as i64,
                },
            );
        }
        let got = select(&packs, &v, Some(&DataSubset::Percent(25.0)));
        // ceil(2.5) = 3 packs: the never-verified ones, by id.
        let want: Vec<Id> = (5..8u8).map(|i| id(i, i)).collect();
        assert_eq!(got.iter().map(|p| p.0).collect::<Vec<_>>(), want);
        let got = select(&packs, &v, Some(&DataSubset::Percent(70.0)));
        // 5 never verified, then the two verified longest ago.
        let want: Vec<Id> = [5, 6, 7, 8, 9, 0, 1].iter().map(|&i| id(i, i)).collect();
        assert_eq!(got.iter().map(|p| p.0).collect::<Vec<_>>(), want);
        // Never fewer than one pack.
        assert_eq!(
            select(&packs, &v, Some(&DataSubset::Percent(0.01))).len(),
            1
        );
        // A size: packs until the bytes are reached.
        assert_eq!(select(&packs, &v, Some(&DataSubset::Bytes(250))).len(), 3);
        assert_eq!(select(&packs, &v, Some(&DataSubset::Bytes(1))).len(), 1);
        assert_eq!(
            select(&packs, &v, Some(&DataSubset::Bytes(1 << 40))).len(),
            10
        );
        assert!(select(&[], &v, Some(&DataSubset::Percent(5.0))).is_empty());
    }

    #[test]
    fn slices_follow_restics_rule_on_the_first_id_byte() {
        let packs: Vec<(Id, u64)> = (0..=255u8).map(|i| (id(i, 7), 1)).collect();
        let v = HashMap::new();
        let s = select(&packs, &v, Some(&DataSubset::Slice { n: 2, t: 5 }));
        assert!(!s.is_empty());
        for (p, _) in &s {
            assert_eq!(p.0[0] % 5, 1);
        }
        let total: usize = (1..=5)
            .map(|n| select(&packs, &v, Some(&DataSubset::Slice { n, t: 5 })).len())
            .sum();
        assert_eq!(total, 256);
    }

    #[test]
    fn coverage_counts_only_current_packs() {
        let packs = vec![(id(1, 1), 10), (id(2, 2), 30), (id(3, 3), 60)];
        let mut v = HashMap::new();
        v.insert(id(1, 1), Verified { run: 1, time: 500 });
        v.insert(id(3, 3), Verified { run: 2, time: 800 });
        v.insert(id(9, 9), Verified { run: 1, time: 100 }); // pruned since
        let c = coverage(&packs, &v, 1000);
        assert_eq!((c.packs_total, c.bytes_total), (3, 100));
        assert_eq!((c.packs_verified, c.bytes_verified), (2, 70));
        assert_eq!(c.packs_never_verified, 1);
        assert_eq!(c.oldest_verification_age_secs, Some(500));
    }
}
