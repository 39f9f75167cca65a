//! Retention policies of `larder forget`, with restic's semantics: the
//! policy (`--keep-*`, `--keep-within*`, `--keep-tag`), grouping
//! (`--group-by`), the per-group decision with restic's reasons and
//! counters, and the `--json` report. Pure logic: no repository I/O.
//!
//! Reference: restic's current `ExpirePolicy`/`ApplyPolicy` and `forget`
//! (internal/data/snapshot_policy.go, cmd/restic/cmd_forget.go), including
//! the rule (restic ≥ 0.16) that keeps a group's oldest snapshot while
//! counts are left, the `oldest …` reasons, and the refusal to remove every
//! snapshot of a group. Calendar buckets are computed in a given time zone
//! (the system zone in production), so they follow DST; restic uses the
//! offset recorded with each snapshot, which is the same for snapshots taken
//! in that zone.

mod apply;
mod duration;
mod group;
mod policy;
mod report;

pub use apply::{Counters, Decision, apply};
pub use duration::Duration;
pub use group::{Group, GroupBy, GroupKey, group, latest};
pub use policy::{Count, Policy, TagList};
pub use report::{ForgetGroup, KeepReason, SnapshotJson};

use crate::error::{Error, Result};
use crate::id::Id;
use crate::snapshot::Snapshot;
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// The decisions for one group.
#[derive(Clone, Debug)]
pub struct GroupPlan {
    pub key: GroupKey,
    /// The group's snapshots, in input order (`Decision::index` points here).
    pub snapshots: Vec<(Id, Snapshot)>,
    /// One decision per snapshot, newest first.
    pub decisions: Vec<Decision>,
}

impl GroupPlan {
    /// The kept snapshots, newest first.
    pub fn keep(&self) -> impl Iterator<Item = &(Id, Snapshot)> {
        self.pick(true)
    }

    /// The removed snapshots, newest first.
    pub fn remove(&self) -> impl Iterator<Item = &(Id, Snapshot)> {
        self.pick(false)
    }

    fn pick(&self, keep: bool) -> impl Iterator<Item = &(Id, Snapshot)> {
        self.decisions
            .iter()
            .filter(move |d| d.keep == keep)
            .filter_map(|d| self.snapshots.get(d.index))
    }

    /// This group's part of the `--json` report.
    pub fn report<S>(&self, render: impl Fn(&Id, &Snapshot) -> S) -> ForgetGroup<S> {
        ForgetGroup::new(&self.key, &self.snapshots, &self.decisions, render)
    }
}

/// Groups `snapshots` by `by` and applies `policy` to each group, as
/// `forget` does without explicit snapshot ids. Refuses (as restic does) an
/// empty policy unless `remove_all` (restic's `--unsafe-allow-remove-all`:
/// then it removes every snapshot given), and always a policy that would
/// remove every snapshot of a group (possible with `--keep-tag` alone).
pub fn plan(
    policy: &Policy,
    by: GroupBy,
    snapshots: Vec<(Id, Snapshot)>,
    tz: &TimeZone,
    now: Timestamp,
    remove_all: bool,
) -> Result<Vec<GroupPlan>> {
    if policy.is_empty() && !remove_all {
        return Err(Error::Usage(
            "no policy was specified, no snapshots will be removed (give --keep-* options, \
             or name the snapshots to forget)"
                .into(),
        ));
    }
    let mut plans = Vec::new();
    for g in group(snapshots, by) {
        let decisions = apply(policy, &g.snapshots, tz, now);
        if !policy.is_empty() && !decisions.iter().any(|d| d.keep) {
            return Err(Error::Usage(format!(
                "refusing to delete last snapshot of snapshot group \"{}\": the policy ({policy}) \
                 keeps none of its {} snapshots",
                g.key,
                g.snapshots.len()
            )));
        }
        plans.push(GroupPlan {
            key: g.key,
            snapshots: g.snapshots,
            decisions,
        });
    }
    Ok(plans)
}
