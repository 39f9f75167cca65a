//! `larder unlock`: removes stale locks, or with `remove_all` every lock,
//! and reports each lock with the reason it was removed or kept.

use super::{LockConfig, LockMode, assess_all};
use crate::backend::{Backend, Kind};
use crate::crypto::Keys;
use crate::error::Result;
use serde::Serialize;

/// What `unlock` did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct UnlockReport {
    pub removed: Vec<UnlockedLock>,
    pub kept: Vec<UnlockedLock>,
}

/// One lock in the report. The holder's fields are None for a lock that
/// could not be read.
#[derive(Clone, Debug, Serialize)]
pub struct UnlockedLock {
    /// The object's name in `locks/`.
    pub id: String,
    pub mode: Option<LockMode>,
    pub hostname: Option<String>,
    pub username: Option<String>,
    pub pid: Option<u32>,
    /// The holder's description ("exclusive lock of pid …").
    pub holder: Option<String>,
    /// Whether the lock was stale.
    pub stale: bool,
    /// Why it was removed or kept.
    pub reason: String,
}

/// Removes every stale lock (every lock with `remove_all`).
pub fn unlock(
    backend: &dyn Backend,
    keys: &Keys,
    cfg: &LockConfig,
    remove_all: bool,
) -> Result<UnlockReport> {
    let mut report = UnlockReport::default();
    for a in assess_all(backend, keys, cfg, None)? {
        let stale = a.verdict.is_stale();
        let mut entry = UnlockedLock {
            id: a.name.clone(),
            mode: a.info.as_ref().map(|i| i.mode),
            hostname: a.info.as_ref().map(|i| i.hostname.clone()),
            username: a.info.as_ref().map(|i| i.username.clone()),
            pid: a.info.as_ref().map(|i| i.pid),
            holder: a.info.as_ref().map(|i| i.describe()),
            stale,
            reason: a.verdict.reason().to_string(),
        };
        if stale || remove_all {
            backend.delete(Kind::Lock, &a.name)?;
            if !stale {
                entry.reason = format!("--remove-all removed a live lock: {}", entry.reason);
            }
            report.removed.push(entry);
        } else {
            report.kept.push(entry);
        }
    }
    Ok(report)
}
