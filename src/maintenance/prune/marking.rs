//! Reading and writing deletion marks for prune: the plans in the
//! repository with their holders objects, writing a new plan (then its
//! holders: who held a lock right after it became visible), and asking
//! whether a plan's holders still run. The rules are in
//! [`crate::index::marks`] and `repo-format/SPEC.md` section 21.

use crate::backend::Kind;
use crate::error::Result;
use crate::host::{now_secs, process_space, process_start};
use crate::id::Id;
use crate::index::marks::{
    DeletionPlan, Holder, Mark, MarkedPack, PlanHolders, read_mark, write_mark,
};
use crate::lock::{self, LockInfo};
use crate::repository::Repository;
use std::collections::BTreeMap;
use std::time::Duration;

/// A plan found in the repository, with its holders object if written.
pub struct FoundPlan {
    pub id: Id,
    pub plan: DeletionPlan,
    /// The holders object's name and contents.
    pub holders: Option<(Id, PlanHolders)>,
}

/// What `marks/` holds.
#[derive(Default)]
pub struct FoundMarks {
    pub plans: Vec<FoundPlan>,
    /// Holders objects whose plan is gone (a sweep killed before removing
    /// them): nothing depends on them any more.
    pub orphans: Vec<Id>,
    /// Marks that could not be read, named; they are left alone (what they
    /// mark cannot be known).
    pub problems: Vec<String>,
}

/// Every deletion mark in the repository.
pub fn find_marks(repo: &Repository) -> Result<FoundMarks> {
    let mut plans: BTreeMap<Id, FoundPlan> = BTreeMap::new();
    let mut holders: Vec<(Id, PlanHolders)> = Vec::new();
    let mut problems = Vec::new();
    for e in repo.backend().list(Kind::Mark)? {
        let Ok(id) = Id::from_hex(&e.name) else {
            problems.push(format!(
                "{}: not a deletion mark; left alone",
                Kind::Mark.path(&e.name)
            ));
            continue;
        };
        match read_mark(repo.backend(), repo.keys(), &e.name) {
            Ok(Mark::Plan(plan)) => {
                plans.insert(
                    id,
                    FoundPlan {
                        id,
                        plan,
                        holders: None,
                    },
                );
            }
            Ok(Mark::Holders(h)) => holders.push((id, h)),
            Err(err) => problems.push(format!("{err}; left alone")),
        }
    }
    let mut orphans = Vec::new();
    for (id, h) in holders {
        match plans.get_mut(&h.plan) {
            Some(p) => p.holders = Some((id, h)),
            None => orphans.push(id),
        }
    }
    Ok(FoundMarks {
        plans: plans.into_values().collect(),
        orphans,
        problems,
    })
}

/// The identity of a lock's holder.
fn holder_of(i: &LockInfo) -> Holder {
    Holder {
        machine_id: i.machine_id,
        boot_id: i.boot_id,
        pid_ns: i.pid_ns,
        pid: i.pid,
        start_time: i.start_time,
    }
}

/// This process, as its own locks name it.
fn ourselves() -> Holder {
    let space = process_space();
    let pid = std::process::id();
    Holder {
        machine_id: space.machine_id,
        boot_id: space.boot_id,
        pid_ns: space.pid_ns,
        pid,
        start_time: process_start(pid).map_or(0, |(s, _)| s),
    }
}

/// The holders of the live locks other than this process's, and how many
/// live locks could not be read.
pub fn live_holders(repo: &Repository) -> Result<(Vec<Holder>, u32)> {
    let me = ourselves();
    let mut holders = Vec::new();
    let mut unreadable = 0u32;
    let cfg = repo.lock_config()?;
    for a in lock::assess_all(repo.backend(), repo.keys(), &cfg, None)? {
        if a.verdict.is_stale() {
            continue;
        }
        match &a.info {
            Some(i) => {
                let h = holder_of(i);
                if h != me && !holders.contains(&h) {
                    holders.push(h);
                }
            }
            None => unreadable = unreadable.saturating_add(1),
        }
    }
    Ok((holders, unreadable))
}

/// Writes a plan for `packs`, then its holders object (the order is what
/// makes deleting safe: SPEC section 21, rule 3). Returns the plan's id.
pub fn write_plan(repo: &Repository, packs: Vec<MarkedPack>) -> Result<Id> {
    let plan = Mark::Plan(DeletionPlan {
        created: now_secs(),
        packs,
    });
    let id = write_mark(repo.backend(), repo.keys(), &plan)?;
    write_holders(repo, &id)?;
    Ok(id)
}

/// Writes the holders object of plan `plan` (also for a plan whose prune
/// was killed before it wrote one): the live lock holders and leftovers as
/// they are now.
pub fn write_holders(repo: &Repository, plan: &Id) -> Result<Id> {
    let leftovers = repo.backend().leftovers()?;
    let (holders, unreadable_locks) = live_holders(repo)?;
    let h = Mark::Holders(PlanHolders {
        plan: *plan,
        created: now_secs(),
        holders,
        leftovers,
        unreadable_locks,
    });
    write_mark(repo.backend(), repo.keys(), &h)
}

/// How old the holders object `id` is, by the storage's clock where the
/// backend can tell, else by the writer's recorded time against this
/// host's clock.
pub fn holders_age(repo: &Repository, id: &Id, h: &PlanHolders) -> Result<Duration> {
    match repo.backend().age(Kind::Mark, &id.to_hex())? {
        Some(age) => Ok(age),
        None => Ok(Duration::from_secs(
            now_secs().saturating_sub(h.created).max(0) as u64,
        )),
    }
}

/// Why plan `h` must still wait for its holders, if it must.
pub fn still_held(h: &PlanHolders, live: &[Holder], unreadable_live: u32) -> Option<String> {
    let running = h.holders.iter().filter(|x| live.contains(x)).count();
    if running > 0 {
        return Some(format!(
            "{running} run(s) that held a lock when the packs were marked still run"
        ));
    }
    if h.unreadable_locks > 0 && unreadable_live > 0 {
        return Some(format!(
            "{unreadable_live} live lock(s) cannot be read, so their holders are unknown"
        ));
    }
    None
}
