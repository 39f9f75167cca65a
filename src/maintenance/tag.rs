//! `tag`: changing the tags of snapshots, as restic's `tag` (`--add`,
//! `--remove`, `--set`). A snapshot object is immutable (its name is the
//! hash of its bytes), so each changed snapshot is saved anew with the new
//! tags and everything else as it was (same tree, time, host, paths,
//! parent, summary), and the old object is removed only after the new one
//! is written. The snapshot format has no field for the id it replaces
//! (restic's `original`), and the tags are exactly what was asked for, so
//! the replaced id is only reported, not recorded.
//!
//! Safe beside other larder processes: as `forget`, it holds the shared
//! lock and checks it before every write and removal (a running backup has
//! already read the snapshots it uses). Killed between the save and the
//! removal, both objects exist; run again, the same change finds the saved
//! one (equal in every field) and removes the old one without saving a
//! third.

use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::interrupt;
use crate::repository::Repository;
use crate::snapshot::{self, Filter, Snapshot};
use serde::Serialize;

/// The change to make. `set` replaces the tags; `add` and `remove` edit
/// them (they cannot be combined with `set`).
#[derive(Clone, Debug, Default)]
pub struct TagOptions {
    pub set: Option<Vec<String>>,
    pub add: Vec<String>,
    pub remove: Vec<String>,
}

/// What happened to one snapshot.
#[derive(Clone, Debug, Serialize)]
pub struct TagChange {
    pub snapshot: String,
    /// The replacement (`None` when the tags were already as asked).
    pub new_snapshot: Option<String>,
    pub tags_before: Vec<String>,
    pub tags_after: Vec<String>,
    /// The replacement had been saved by an earlier, interrupted run.
    pub reused: bool,
}

/// What `tag` did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TagReport {
    pub changed: Vec<TagChange>,
    /// Snapshots whose tags were already as asked.
    pub unchanged: Vec<String>,
    /// Chosen snapshots that another process removed (or replaced) before
    /// this one held its lock: left as they are.
    pub vanished: Vec<String>,
}

impl TagOptions {
    fn validate(&self) -> Result<()> {
        if self.set.is_some() && !(self.add.is_empty() && self.remove.is_empty()) {
            return Err(Error::Usage(
                "--set cannot be combined with --add or --remove".into(),
            ));
        }
        if self.set.is_none() && self.add.is_empty() && self.remove.is_empty() {
            return Err(Error::Usage(
                "nothing to do: give --set, --add or --remove".into(),
            ));
        }
        Ok(())
    }

    /// The tags `old` becomes: order kept, additions appended, no duplicates.
    pub fn apply(&self, old: &[String]) -> Vec<String> {
        let base: Vec<String> = match &self.set {
            Some(s) => s.iter().filter(|t| !t.is_empty()).cloned().collect(),
            None => old.to_vec(),
        };
        let mut out: Vec<String> = Vec::new();
        for t in base.into_iter().chain(self.add.iter().cloned()) {
            if !self.remove.contains(&t) && !out.contains(&t) {
                out.push(t);
            }
        }
        out
    }
}

/// Changes the tags of `snaps` (see the module documentation).
pub fn tag(repo: &Repository, snaps: &[(Id, Snapshot)], opts: &TagOptions) -> Result<TagReport> {
    opts.validate()?;
    repo.backend().check_deletable()?;
    let lock = repo.lock_snapshots()?;
    let mut report = TagReport::default();
    let (snaps, vanished) = snapshot::still_listed(repo, snaps)?;
    report.vanished = vanished.iter().map(Id::to_hex).collect();
    // Listed once: the snapshots an interrupted run may have saved.
    let (mut existing, _) = snapshot::list(repo, &Filter::default())?;
    for (id, snap) in &snaps {
        interrupt::check()?;
        let tags = opts.apply(&snap.tags);
        if tags == snap.tags {
            report.unchanged.push(id.to_hex());
            continue;
        }
        let mut new = snap.clone();
        new.tags = tags.clone();
        // restic's `original`: the first snapshot of a chain of changes.
        new.original = Some(snap.original.unwrap_or(*id));
        let (new_id, reused) = match existing.iter().find(|(_, e)| *e == new) {
            Some((eid, _)) => (*eid, true),
            None => {
                lock.check()?;
                let nid = snapshot::save(repo, &new)?;
                existing.push((nid, new.clone()));
                (nid, false)
            }
        };
        lock.check()?;
        // Run again, a failed removal is finished: the saved one is reused.
        repo.backend().delete(Kind::Snapshot, &id.to_hex())?;
        report.changed.push(TagChange {
            snapshot: id.to_hex(),
            new_snapshot: Some(new_id.to_hex()),
            tags_before: snap.tags.clone(),
            tags_after: tags,
            reused,
        });
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn add_remove_set() {
        let old = v(&["a", "b"]);
        let add = TagOptions {
            add: v(&["c", "a"]),
            remove: v(&["b"]),
            ..Default::default()
        };
        assert_eq!(add.apply(&old), v(&["a", "c"]));
        let set = TagOptions {
            set: Some(v(&["x", "x", ""])),
            ..Default::default()
        };
        assert_eq!(set.apply(&old), v(&["x"]));
        let both = TagOptions {
            set: Some(v(&["x"])),
            add: v(&["y"]),
            ..Default::default()
        };
        assert!(both.validate().is_err());
        assert!(TagOptions::default().validate().is_err());
    }
}
