//! Whether a lock is stale. One lock object at a time:
//!
//! 1. A lock whose holder shares this process's pid space (same machine id,
//!    boot id and pid namespace, see [`ProcessSpace`]) is stale at once when
//!    that pid has exited (or is a zombie) or now belongs to a process with
//!    another start time.
//! 2. Any lock object (readable or not) is stale when it has not been
//!    rewritten for longer than its lifetime (the declared one, at most
//!    [`MAX_LOCK_LIFETIME`]; for an unreadable lock the maximum), its age
//!    measured by the storage's clock alone ([`Backend::age`]). A backend
//!    that cannot say falls back to how long this host has seen the object
//!    (module `seen`, needs [`LockConfig::state_dir`]); without a state
//!    directory such a lock is never stale by age.
//! 3. Otherwise it is live. The times recorded inside a lock are never
//!    compared with any clock.

use super::seen::Observations;
use super::{LockConfig, LockInfo, MAX_LOCK_LIFETIME, human, read_lock};
use crate::backend::{Backend, Kind};
use crate::crypto::Keys;
use crate::error::Result;
use crate::host::{ProcessSpace, ProcessState, boottime, process_space, process_state};
use std::time::Duration;

/// What a lock is, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Live(String),
    Stale(String),
}

impl Verdict {
    pub fn is_stale(&self) -> bool {
        matches!(self, Verdict::Stale(_))
    }

    /// The reason given.
    pub fn reason(&self) -> &str {
        match self {
            Verdict::Live(r) | Verdict::Stale(r) => r,
        }
    }
}

/// One lock object, judged.
#[derive(Clone, Debug)]
pub struct Assessed {
    /// The object's name in `locks/`.
    pub name: String,
    /// Its contents; None if it could not be read or opened (such a lock
    /// never blocks anyone).
    pub info: Option<LockInfo>,
    pub verdict: Verdict,
}

/// Judges every lock in the repository except `ours` (a vanished lock is
/// left out).
pub fn assess_all(
    backend: &dyn Backend,
    keys: &Keys,
    cfg: &LockConfig,
    ours: Option<&str>,
) -> Result<Vec<Assessed>> {
    let mut judge = Judge {
        backend,
        keys,
        cfg,
        here: process_space(),
        seen: None,
    };
    let mut out = Vec::new();
    for e in backend.list(Kind::Lock)? {
        if Some(e.name.as_str()) == ours {
            continue;
        }
        if let Some(a) = judge.assess(&e.name) {
            out.push(a);
        }
    }
    if let Some(seen) = &judge.seen {
        // Failing to save only restarts the watch: staleness comes later.
        let _ = seen.save();
    }
    Ok(out)
}

/// How old a lock object is, and by whose clock.
enum Age {
    Storage(Duration),
    SeenHere(Duration),
    Unknown(String),
}

struct Judge<'a> {
    backend: &'a dyn Backend,
    keys: &'a Keys,
    cfg: &'a LockConfig,
    here: ProcessSpace,
    seen: Option<Observations>,
}

impl Judge<'_> {
    /// Judges lock `name`; None if it no longer exists.
    fn assess(&mut self, name: &str) -> Option<Assessed> {
        let (info, unreadable) = match read_lock(self.backend, self.keys, name) {
            Ok(Some(i)) => (Some(i), None),
            Ok(None) => return None,
            Err(e) => (None, Some(e.to_string())),
        };
        let verdict = match &info {
            Some(i) => self.judge_readable(name, i)?,
            None => {
                let why = unreadable.unwrap_or_default();
                let age = self.age(name)?;
                let v = by_age(&age, MAX_LOCK_LIFETIME, "");
                let prefix = format!("unreadable ({why}), so it blocks nobody; ");
                match v {
                    Verdict::Live(r) => Verdict::Live(prefix + &r),
                    Verdict::Stale(r) => Verdict::Stale(prefix + &r),
                }
            }
        };
        Some(Assessed {
            name: name.to_string(),
            info,
            verdict,
        })
    }

    fn judge_readable(&mut self, name: &str, i: &LockInfo) -> Option<Verdict> {
        let holder = if self.here.shares_pids_with(&i.space()) {
            match process_state(i.pid, i.start_time) {
                ProcessState::Exited => {
                    return Some(Verdict::Stale(format!(
                        "its holder, pid {} on this machine, has exited",
                        i.pid
                    )));
                }
                ProcessState::Reused => {
                    return Some(Verdict::Stale(format!(
                        "pid {} on this machine now belongs to another process \
                         (its start time differs from the holder's)",
                        i.pid
                    )));
                }
                ProcessState::Running => {
                    format!("its holder, pid {} on this machine, is running; ", i.pid)
                }
            }
        } else if i.machine_id == self.here.machine_id && i.machine_id != [0; 16] {
            "held on this machine in another boot or pid namespace, so its pid \
             cannot be checked; "
                .to_string()
        } else {
            "held on another machine; ".to_string()
        };
        let age = self.age(name)?;
        Some(by_age(&age, i.lifetime(), &holder))
    }

    /// The object's age; None if it vanished.
    fn age(&mut self, name: &str) -> Option<Age> {
        match self.backend.age(Kind::Lock, name) {
            Ok(Some(a)) => Some(Age::Storage(a)),
            Ok(None) => Some(self.seen_here(name)),
            Err(e) if e.is_not_found() => None,
            Err(e) => Some(Age::Unknown(format!("its age cannot be read ({e})"))),
        }
    }

    fn seen_here(&mut self, name: &str) -> Age {
        let Some(dir) = &self.cfg.state_dir else {
            return Age::Unknown(
                "the storage cannot tell its age and no state directory is set \
                 to watch it"
                    .into(),
            );
        };
        let boot = self.here.boot_id;
        let seen = self
            .seen
            .get_or_insert_with(|| Observations::load(dir, &boot));
        Age::SeenHere(seen.seen_for(name, boottime()))
    }
}

/// The age rule: stale once older than `lifetime`.
fn by_age(age: &Age, lifetime: Duration, holder: &str) -> Verdict {
    let l = human(lifetime);
    match age {
        Age::Storage(a) if *a > lifetime => Verdict::Stale(format!(
            "{holder}not refreshed for {} by the storage's clock, longer than its lifetime of {l}",
            human(*a)
        )),
        Age::Storage(a) => Verdict::Live(format!(
            "{holder}refreshed {} ago by the storage's clock, within its lifetime of {l}",
            human(*a)
        )),
        Age::SeenHere(a) if *a > lifetime => Verdict::Stale(format!(
            "{holder}seen unchanged by this host for {}, longer than its lifetime of {l}",
            human(*a)
        )),
        Age::SeenHere(a) => Verdict::Live(format!(
            "{holder}seen unchanged by this host for only {} (lifetime {l}; the storage \
             cannot tell its age)",
            human(*a)
        )),
        Age::Unknown(why) => Verdict::Live(format!("{holder}{why}")),
    }
}
