//! Deletion marks (`marks/<id>`): prune's record, in the repository, of
//! the packs it means to delete. Deleting happens in two phases. A prune
//! writes a [`DeletionPlan`] (the packs no snapshot uses), then lists the
//! live locks and writes [`PlanHolders`]: who might have been backing up
//! against those packs when they were marked, and the leftovers of
//! interrupted writes seen then. From the moment a plan exists, backups
//! do not deduplicate against blobs that only marked packs hold (they store
//! such data again), so nothing written after the plan can come to depend
//! on it. A later prune deletes a plan's packs once its holders object is
//! older than the grace period by the storage's clock, none of its holders
//! still runs, and no snapshot (written meanwhile by one of them) uses the
//! pack; a pack that became used again is kept. See `repo-format/SPEC.md`.

use crate::backend::{Backend, Kind};
use crate::crypto::Keys;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::object::{self, ObjectType};
use serde::{Deserialize, Serialize};

/// A deletion mark: a plan, or the holders of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mark {
    Plan(DeletionPlan),
    Holders(PlanHolders),
}

/// Packs to delete once nothing can use them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletionPlan {
    /// Seconds since the Unix epoch by the writer's clock (shown only).
    pub created: i64,
    pub packs: Vec<MarkedPack>,
}

/// One pack of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkedPack {
    pub id: Id,
    pub size: u64,
}

/// Who held a lock when plan `plan` was written, and the leftovers of
/// interrupted writes present then.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanHolders {
    pub plan: Id,
    /// Seconds since the Unix epoch by the writer's clock (shown only).
    pub created: i64,
    pub holders: Vec<Holder>,
    /// Backend leftover names (see `Backend::leftovers`).
    pub leftovers: Vec<String>,
    /// Live locks that could not be read when the plan was written: their
    /// holders are unknown, so the plan waits until no unreadable live lock
    /// remains.
    pub unreadable_locks: u32,
}

/// A lock holder, as identified in its lock (see `lock::LockInfo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub machine_id: [u8; 16],
    pub boot_id: [u8; 16],
    pub pid_ns: u64,
    pub pid: u32,
    pub start_time: u64,
}

/// Writes a mark; returns its id (the BLAKE3 of its bytes).
pub fn write_mark(backend: &dyn Backend, keys: &Keys, mark: &Mark) -> Result<Id> {
    let bytes = object::seal(keys, ObjectType::Mark, mark)?;
    let id = Id::of_object(&bytes);
    backend.write(Kind::Mark, &id.to_hex(), &bytes)?;
    Ok(id)
}

/// Reads, verifies (name = hash of bytes) and decrypts one mark.
pub fn read_mark(backend: &dyn Backend, keys: &Keys, name: &str) -> Result<Mark> {
    let what = Kind::Mark.path(name);
    let bytes = backend.read_bounded(Kind::Mark, name, object::MAX_OBJECT_STORED)?;
    if Id::of_object(&bytes).to_hex() != name {
        return Err(Error::corrupt(
            &what,
            "contents do not hash to the object's name",
        ));
    }
    object::open(keys, ObjectType::Mark, &what, &bytes)
}
