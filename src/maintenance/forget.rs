//! `forget`: removing snapshot objects, either the ones a retention policy
//! does not keep (applied to each group of snapshots, see
//! [`crate::retention`]) or the ones named explicitly (ids, unique
//! prefixes of at least 4 hex digits, `latest`).
//!
//! Only snapshot objects are deleted; the trees and data they reference
//! stay until a prune. That is safe beside running backups (a backup whose
//! parent snapshot is forgotten still finds every blob it deduplicates
//! against), so forget holds the repository's *shared* lock and checks it
//! before every deletion. Each deletion removes one whole object, so a
//! killed forget leaves every snapshot either there or gone.
//!
//! As restic's `forget`: named snapshots are removed exactly, and the
//! policy is then not applied (a policy given with names is ignored, with
//! a notice); the `--host/--tag/--path` filter narrows the listing the
//! policy sees and which snapshot is `latest`, never a named id. A policy
//! that keeps nothing, or nothing of some group, is refused before anything
//! is removed. Snapshot objects that cannot be read are reported as
//! problems and never removed by a policy; named explicitly, they are
//! removed like any other.

use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::interrupt;
use crate::lock::LockGuard;
use crate::repository::Repository;
use crate::retention::{self, ForgetGroup, GroupBy, Policy, SnapshotJson};
use crate::snapshot::{self, Filter, Snapshot};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::Serialize;

/// What to forget and how.
#[derive(Clone, Debug)]
pub struct ForgetOptions {
    /// Snapshots to remove: full ids, unique prefixes (4+ hex digits) or
    /// `latest`. When any is given, exactly these are removed and
    /// `policy` is not applied.
    pub snapshots: Vec<String>,
    /// The retention policy applied to each group when no snapshot is named.
    pub policy: Policy,
    pub group_by: GroupBy,
    /// Which snapshots the policy considers (and `latest` means).
    pub filter: Filter,
    /// Decide and report, but remove nothing (and take no lock).
    pub dry_run: bool,
    /// The zone of the policy's calendar buckets and of the report's times.
    pub tz: TimeZone,
    /// Now, for `--keep-within*`: snapshots after it are in the future.
    /// `None` (the default) takes the clock when the snapshots are listed,
    /// after any wait for the lock, as restic does: a backup that ended
    /// during the wait is then not in the future.
    pub now: Option<Timestamp>,
    /// restic's `--unsafe-allow-remove-all`: an empty policy removes every
    /// snapshot the filter selects (refused without a filter).
    pub remove_all: bool,
}

impl Default for ForgetOptions {
    /// No names, an empty policy, grouping by host and paths, the system
    /// time zone and the time of the listing.
    fn default() -> Self {
        ForgetOptions {
            snapshots: Vec::new(),
            policy: Policy::default(),
            group_by: GroupBy::default(),
            filter: Filter::default(),
            dry_run: false,
            tz: TimeZone::system(),
            now: None,
            remove_all: false,
        }
    }
}

/// One snapshot in the report: restic's JSON fields, and its time in the
/// report's zone for tables (not serialized).
#[derive(Clone, Debug, Serialize)]
pub struct ForgetSnapshot {
    #[serde(flatten)]
    pub json: SnapshotJson,
    /// `YYYY-MM-DD HH:MM:SS` in the options' zone.
    #[serde(skip)]
    pub local_time: String,
}

impl ForgetSnapshot {
    fn new(id: &Id, snap: &Snapshot, tz: &TimeZone) -> Self {
        let local_time = Timestamp::from_nanosecond(i128::from(snap.time_ns))
            .map(|t| {
                t.to_zoned(tz.clone())
                    .strftime("%Y-%m-%d %H:%M:%S")
                    .to_string()
            })
            .unwrap_or_else(|_| snap.time_ns.to_string());
        ForgetSnapshot {
            json: SnapshotJson::new(id, snap, tz),
            local_time,
        }
    }
}

/// What a forget did (or, in a dry run, would do).
#[derive(Clone, Debug, Serialize)]
pub struct ForgetReport {
    pub dry_run: bool,
    /// restic's description of the policy applied (`keep 4 daily
    /// snapshots`); `None` when snapshots were named.
    pub policy: Option<String>,
    /// With a policy, one entry per group (restic's `--json` shape). With
    /// named snapshots, one group without a key whose `remove` lists them.
    pub groups: Vec<ForgetGroup<ForgetSnapshot>>,
    /// Snapshot ids removed (in a dry run: to be removed), oldest first.
    pub removed: Vec<String>,
    /// Named snapshot objects that could not be read, removed as named.
    pub removed_unreadable: Vec<String>,
    /// Unreadable snapshots, references that matched nothing, deletions
    /// that failed. Nothing listed here was removed.
    pub problems: Vec<String>,
    /// Things worth saying that are not problems.
    pub notices: Vec<String>,
}

/// A snapshot object chosen for removal.
struct Doomed {
    id: Id,
    /// `None` for a named object that could not be read.
    time_ns: Option<i64>,
}

/// Runs `forget` on `repo` with `opts`: chooses the snapshots to remove,
/// then (unless a dry run) removes them, under the lock of commands that
/// change snapshots (taken before they are chosen).
pub fn forget(repo: &Repository, opts: &ForgetOptions) -> Result<ForgetReport> {
    // An append-only repository refuses deletions: say so before anything.
    if !opts.dry_run {
        repo.backend().check_deletable()?;
    }
    let lock = if opts.dry_run {
        None
    } else {
        Some(repo.lock_snapshots()?)
    };
    let mut report = ForgetReport {
        dry_run: opts.dry_run,
        policy: None,
        groups: Vec::new(),
        removed: Vec::new(),
        removed_unreadable: Vec::new(),
        problems: Vec::new(),
        notices: Vec::new(),
    };
    let mut doomed = if opts.snapshots.is_empty() {
        by_policy(repo, opts, &mut report)?
    } else {
        by_name(repo, opts, &mut report)?
    };
    // Oldest first; unreadable ones (no time) last.
    doomed.sort_by_key(|d| (d.time_ns.is_none(), d.time_ns, d.id));
    remove(repo, lock.as_ref(), doomed, &mut report)?;
    Ok(report)
}

/// Applies the policy to each group of the filtered snapshots.
fn by_policy(
    repo: &Repository,
    opts: &ForgetOptions,
    report: &mut ForgetReport,
) -> Result<Vec<Doomed>> {
    if opts.remove_all && opts.policy.is_empty() && opts.filter.is_empty() {
        return Err(Error::Usage(
            "--unsafe-allow-remove-all removes every snapshot the filters select: give \
             --host, --tag or --path (it is refused without one, as restic does)"
                .into(),
        ));
    }
    let (list, unreadable) = snapshot::list(repo, &opts.filter)?;
    report.problems.extend(unreadable.iter().map(|e| {
        format!("{e} (an unreadable snapshot is never removed by a policy; name it to remove it)")
    }));
    let plans = retention::plan(
        &opts.policy,
        opts.group_by,
        list,
        &opts.tz,
        opts.now.unwrap_or_else(Timestamp::now),
        opts.remove_all,
    )?;
    report.policy = Some(opts.policy.to_string());
    let mut doomed = Vec::new();
    for plan in &plans {
        report
            .groups
            .push(plan.report(|id, s| ForgetSnapshot::new(id, s, &opts.tz)));
        doomed.extend(plan.remove().map(|(id, s)| Doomed {
            id: *id,
            time_ns: Some(s.time_ns),
        }));
    }
    Ok(doomed)
}

/// Resolves the named snapshots; the policy is not applied.
fn by_name(
    repo: &Repository,
    opts: &ForgetOptions,
    report: &mut ForgetReport,
) -> Result<Vec<Doomed>> {
    if !opts.policy.is_empty() {
        report.notices.push(format!(
            "snapshots were named, so the policy ({}) is not applied: only the named snapshots are removed",
            opts.policy
        ));
    }
    let names: Vec<String> = repo
        .backend()
        .list(Kind::Snapshot)?
        .into_iter()
        .map(|e| e.name)
        .filter(|n| Id::from_hex(n).is_ok())
        .collect();
    let mut readable: Vec<(Id, Snapshot)> = Vec::new();
    let mut doomed: Vec<Doomed> = Vec::new();
    for reference in &opts.snapshots {
        let found = match resolve(repo, reference, &opts.filter, &names) {
            Ok(f) => f,
            Err(e) => {
                report.problems.push(e.to_string());
                continue;
            }
        };
        let id = match &found {
            Found::Readable(id, _) | Found::Unreadable(id, _) => *id,
        };
        if doomed.iter().any(|d| d.id == id) {
            continue;
        }
        match found {
            Found::Readable(id, snap) => {
                doomed.push(Doomed {
                    id,
                    time_ns: Some(snap.time_ns),
                });
                readable.push((id, *snap));
            }
            // Removed since it was listed, by another `forget` beside.
            Found::Unreadable(id, e) if e.is_not_found() => {
                report.notices.push(format!(
                    "snapshot {} was removed meanwhile by another process",
                    id.short()
                ));
            }
            Found::Unreadable(id, e) => {
                let verb = if opts.dry_run { "would be" } else { "is" };
                report.notices.push(format!(
                    "snapshot {} cannot be read ({e}); named, it {verb} removed all the same",
                    id.short()
                ));
                doomed.push(Doomed { id, time_ns: None });
            }
        }
    }
    // Newest first, as the policy's lists.
    readable.sort_by(|a, b| b.1.time_ns.cmp(&a.1.time_ns).then(b.0.cmp(&a.0)));
    if !readable.is_empty() {
        report.groups.push(ForgetGroup {
            tags: None,
            host: String::new(),
            paths: None,
            keep: Vec::new(),
            remove: readable
                .iter()
                .map(|(id, s)| ForgetSnapshot::new(id, s, &opts.tz))
                .collect(),
            reasons: Vec::new(),
        });
    }
    Ok(doomed)
}

/// What a reference names.
enum Found {
    Readable(Id, Box<Snapshot>),
    Unreadable(Id, Error),
}

/// Resolves one reference against the snapshot object `names`: `latest`
/// (the newest readable snapshot passing `filter`), or a full id or
/// unique prefix of at least 4 hex digits (whatever the filter).
fn resolve(repo: &Repository, reference: &str, filter: &Filter, names: &[String]) -> Result<Found> {
    if reference == "latest" {
        let (list, _) = snapshot::list(repo, filter)?;
        return match list.into_iter().last() {
            Some((id, snap)) => Ok(Found::Readable(id, Box::new(snap))),
            None => Err(Error::NoSnapshot(
                "no snapshot matches `latest` with the given filters".into(),
            )),
        };
    }
    if reference.len() < 4 || !reference.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::NoSnapshot(format!(
            "{reference:?} is not a snapshot id, a prefix of at least 4 hex digits, or `latest`"
        )));
    }
    let prefix = reference.to_ascii_lowercase();
    let matching: Vec<&String> = names.iter().filter(|n| n.starts_with(&prefix)).collect();
    match matching.as_slice() {
        [one] => {
            let id = Id::from_hex(one)?;
            Ok(match snapshot::load(repo, one) {
                Ok(snap) => Found::Readable(id, Box::new(snap)),
                Err(e) => Found::Unreadable(id, e),
            })
        }
        [] => Err(Error::NoSnapshot(format!("no snapshot {reference}"))),
        _ => Err(Error::NoSnapshot(format!(
            "snapshot prefix {reference} is ambiguous ({} matches)",
            matching.len()
        ))),
    }
}

/// Removes the doomed snapshot objects (unless a dry run), checking the
/// lock and for an interruption before each.
fn remove(
    repo: &Repository,
    lock: Option<&LockGuard>,
    doomed: Vec<Doomed>,
    report: &mut ForgetReport,
) -> Result<()> {
    for d in doomed {
        let name = d.id.to_hex();
        let list = if d.time_ns.is_some() {
            &mut report.removed
        } else {
            &mut report.removed_unreadable
        };
        // No lock: a dry run, which removes nothing.
        let Some(lock) = lock else {
            list.push(name);
            continue;
        };
        interrupt::check()?;
        lock.check()?;
        match repo.backend().delete(Kind::Snapshot, &name) {
            Ok(()) => list.push(name),
            Err(e) => report
                .problems
                .push(format!("snapshot {} was not removed: {e}", d.id.short())),
        }
    }
    Ok(())
}
