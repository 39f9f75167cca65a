//! `list`: the ids of one kind of repository object, as restic's command
//! of that name prints them for scripts: `snapshots`, `keys`, `locks`,
//! `packs`, `index` (the segments) from the storage's listing, plus
//! larder's `marks` and `dicts`; `blobs` from the index, one `data ID` or
//! `tree ID` line each, streamed (memory stays flat).
//!
//! Every kind but `locks` is listed under a reader's lock, as restic does
//! (listing locks under one would list that lock too).

use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::pack::BlobType;
use crate::repository::Repository;

/// What `list` lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    Objects(Kind),
    Blobs,
}

impl What {
    /// The names restic's `list` takes, and larder's two more.
    pub const NAMES: &'static [&'static str] = &[
        "snapshots",
        "keys",
        "locks",
        "packs",
        "index",
        "blobs",
        "marks",
        "dicts",
    ];

    /// Parses one of [`What::NAMES`].
    pub fn parse(s: &str) -> Result<What> {
        Ok(match s {
            "snapshots" => What::Objects(Kind::Snapshot),
            "keys" => What::Objects(Kind::Key),
            "locks" => What::Objects(Kind::Lock),
            "packs" => What::Objects(Kind::Pack),
            "index" => What::Objects(Kind::Index),
            "marks" => What::Objects(Kind::Mark),
            "dicts" => What::Objects(Kind::Dict),
            "blobs" => What::Blobs,
            _ => {
                return Err(Error::Usage(format!(
                    "list {s:?}: give one of {}",
                    What::NAMES.join(", ")
                )));
            }
        })
    }
}

/// Calls `line` with each line `list WHAT` prints: an object's id, or a
/// blob's type and id.
pub fn list(repo: &Repository, what: What, mut line: impl FnMut(&str) -> Result<()>) -> Result<()> {
    let _lock = match what {
        What::Objects(Kind::Lock) => None,
        _ => repo.lock_for_reading()?,
    };
    match what {
        What::Objects(kind) => {
            let mut names: Vec<String> = repo
                .backend()
                .list(kind)?
                .into_iter()
                .map(|e| e.name)
                .filter(|n| Id::from_hex(n).is_ok())
                .collect();
            names.sort();
            for n in &names {
                line(n)?;
            }
            Ok(())
        }
        What::Blobs => {
            repo.sync_index()?;
            repo.index()?.for_each_blob(|ty, id| {
                let word = match ty {
                    BlobType::Data => "data",
                    BlobType::Tree => "tree",
                };
                line(&format!("{word} {}", id.to_hex()))
            })
        }
    }
}
