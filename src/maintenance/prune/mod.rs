//! `prune`: gives back the space of data no snapshot uses, without ever
//! stopping a backup or risking a kept snapshot.
//!
//! A run does two things. First it **sweeps** ([`sweep`]): it deletes the
//! packs that earlier runs marked, once that is safe (SPEC section 21).
//! Then it **marks** (this file): it finds, in SQL over the used-blob set
//! and the index ([`usage_map`]), the packs no snapshot needs and the partly
//! used ones worth repacking; it copies what the latter keep into new packs
//! ([`repack`]), and writes a deletion plan for both kinds ([`marking`]).
//! Deletions also compact the index ([`compact`]). With `--keep-delete 0s`
//! a run sweeps its own plan at once (when no backup that could use the
//! data is running). Prune holds a maintenance lock: backups run beside
//! it, another prune or `repair index` does not.
//!
//! Progress ([`prune_with_progress`]) counts packs: each one repacked and
//! each one deleted, against a total known from the plans (the sweep's
//! due plans, then this run's mark plan).

pub(crate) mod compact;
mod marking;
mod repack;
mod sweep;
mod usage_map;

pub use compact::Compaction;
pub use repack::Repacked;
pub use sweep::{SweepReport, Waiting};
pub use usage_map::PackUsage;

use crate::error::{Error, Result};
use crate::id::Id;
use crate::index::marks::MarkedPack;
use crate::maintenance::usage::{MarkStats, Usage};
use crate::progress::{NoProgress, Progress, Tally};
use crate::repository::Repository;
use crate::snapshot::{self, Filter};
use serde::Serialize;
use std::collections::HashSet;
use std::time::Duration;

/// How much unused data prune tolerates before it repacks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MaxUnused {
    /// A share of the repository's size, in percent.
    Percent(f64),
    Bytes(u64),
    Unlimited,
}

impl MaxUnused {
    /// Parses restic's syntax: `5%`, `100M`, `unlimited`.
    pub fn parse(s: &str) -> Result<MaxUnused> {
        let t = s.trim();
        if t == "unlimited" {
            return Ok(MaxUnused::Unlimited);
        }
        if let Some(p) = t.strip_suffix('%') {
            return p
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|p| (0.0..=100.0).contains(p))
                .map(MaxUnused::Percent)
                .ok_or_else(|| {
                    Error::Usage(format!("--max-unused {s:?}: a percentage is 0% to 100%"))
                });
        }
        parse_size(t)
            .map(MaxUnused::Bytes)
            .map_err(|e| Error::Usage(format!("--max-unused {s:?}: {e}")))
    }

    /// The unused bytes allowed beside `used` bytes of used data, as
    /// restic counts it: a percentage is of the repository after the prune
    /// (used + unused), so `p %` allows `used × p / (100 − p)` unused bytes.
    fn allowed_beside(self, used: u64) -> u64 {
        match self {
            MaxUnused::Percent(p) if p >= 100.0 => u64::MAX,
            MaxUnused::Percent(p) => (used as f64 * p / (100.0 - p)) as u64,
            MaxUnused::Bytes(b) => b,
            MaxUnused::Unlimited => u64::MAX,
        }
    }
}

/// A size as restic writes it: `1024`, `100b`, `64k`, `100M`, `2G`, `1T`
/// (binary multiples; `b` is bytes).
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_lowercase() {
                'b' => 1,
                'k' => 1 << 10,
                'm' => 1 << 20,
                'g' => 1 << 30,
                't' => 1 << 40,
                _ => return Err(format!("unknown unit {c:?}; use b, k, M, G or T")),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{s:?} is not a size such as 100M"))
}

/// A grace period such as `1d`, `12h`, `30m`, `0s`, `2w`.
pub fn parse_grace(s: &str) -> Result<Duration> {
    let t = s.trim();
    let bad = || {
        Error::Usage(format!(
            "--keep-delete {s:?}: use a duration such as 1d, 12h, 30m or 0s"
        ))
    };
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(secs).map(Duration::from_secs).ok_or_else(bad)
}

/// `90s`, `12m`, `5h`, `2d` for messages.
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 86_400 && s.is_multiple_of(86_400) {
        return format!("{}d", s / 86_400);
    }
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// What to prune and how.
#[derive(Clone, Debug)]
pub struct PruneOptions {
    pub max_unused: MaxUnused,
    /// Repack at most this many bytes of packs (None: no limit).
    pub max_repack_size: Option<u64>,
    /// Also merge packs smaller than 80% of the target pack size.
    pub repack_small: bool,
    /// How long marked data waits before it is deleted.
    pub keep_delete: Duration,
    pub dry_run: bool,
}

impl Default for PruneOptions {
    fn default() -> Self {
        PruneOptions {
            max_unused: MaxUnused::Percent(5.0),
            max_repack_size: None,
            repack_small: false,
            keep_delete: Duration::from_secs(86_400),
            dry_run: false,
        }
    }
}

/// Packs and bytes.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct Amount {
    pub packs: usize,
    pub bytes: u64,
}

impl Amount {
    fn add(&mut self, bytes: u64) {
        self.packs += 1;
        self.bytes += bytes;
    }
}

/// The plan of this run's mark phase.
#[derive(Debug, Default, Clone, Serialize)]
pub struct MarkPlan {
    /// Packs no snapshot needs: marked for deletion.
    pub unused: Amount,
    /// Partly used packs to repack, and the bytes they keep (copied).
    pub repack: Amount,
    pub repack_keeps: u64,
    /// Packs that stay, and the unused bytes left in them.
    pub keep: Amount,
    pub keep_unused_bytes: u64,
    /// Packs marked by earlier runs, not yet deleted.
    pub already_marked: Amount,
}

/// What a prune did (or, in a dry run, would do).
#[derive(Debug, Default, Clone, Serialize)]
pub struct PruneReport {
    pub dry_run: bool,
    pub marked_from: MarkStats,
    /// Blobs snapshots use that the index does not know (a damaged
    /// repository: run `check`).
    pub missing_blobs: u64,
    /// The repository's packs before this run.
    pub total: Amount,
    pub sweep: SweepReport,
    pub plan: MarkPlan,
    pub repacked: Option<Repacked>,
    /// The deletion plan written by this run.
    pub plan_id: Option<String>,
    /// A sweep right after marking (`--keep-delete 0s`).
    pub immediate: Option<SweepReport>,
    pub problems: Vec<String>,
}

/// Every snapshot's root tree, labelled (the index is read again before
/// its next use, by [`snapshot::list`]); an unreadable snapshot stops
/// prune (what it uses cannot be known).
pub(crate) fn all_snapshot_roots(repo: &Repository) -> Result<Vec<(Id, String)>> {
    let (list, bad) = snapshot::list(repo, &Filter::default())?;
    if let Some(e) = bad.into_iter().next() {
        return Err(Error::corrupt(
            "snapshots",
            format!(
                "{e}; prune cannot know what it uses, so it deletes nothing (run `larder check`)"
            ),
        ));
    }
    Ok(list
        .into_iter()
        .map(|(id, s)| (s.tree, format!("snapshot {}", id.short())))
        .collect())
}

/// Runs a prune.
pub fn prune(repo: &Repository, opts: &PruneOptions) -> Result<PruneReport> {
    prune_with_progress(repo, opts, &NoProgress)
}

/// [`prune`], telling `progress` each pack repacked or deleted (one "file"
/// per pack, with its size); a dry run tells nothing.
pub fn prune_with_progress(
    repo: &Repository,
    opts: &PruneOptions,
    progress: &dyn Progress,
) -> Result<PruneReport> {
    // An append-only repository refuses deletions: say so before anything.
    if !opts.dry_run {
        repo.backend().check_deletable()?;
    }
    let guard = repo.lock_maintenance()?;
    let lock = guard.handle();
    repo.sync_index()?;
    let mut report = PruneReport {
        dry_run: opts.dry_run,
        ..PruneReport::default()
    };
    let found = marking::find_marks(repo)?;
    report.problems.extend(found.problems.iter().cloned());
    let mut tally = Tally::new(progress);
    let mode = sweep::SweepMode {
        grace: opts.keep_delete,
        dry_run: opts.dry_run,
        last: false,
    };
    report.sweep = sweep::sweep(repo, &lock, mode, &found, &mut tally, None)?;

    let mut u = Usage::new(repo)?;
    report.marked_from = u.mark(repo, all_snapshot_roots(repo)?)?;
    usage_map::choose_keepers(&u)?;
    report.missing_blobs = usage_map::missing_used(&u)?;
    let packs = usage_map::pack_usage(&u)?;
    for p in &packs {
        report.total.add(p.size);
    }
    let (plan, to_delete, to_repack) = decide(repo, &packs, opts);
    report.plan = plan;
    if opts.dry_run {
        return Ok(report);
    }
    // Ahead: the repacks, then (deleting at once) what the plan marks.
    let sum = |v: &[MarkedPack]| v.iter().map(|m| m.size).sum::<u64>();
    let (mut n, mut bytes) = (to_repack.len(), sum(&to_repack));
    if opts.keep_delete.is_zero() {
        n += to_delete.len() + to_repack.len();
        bytes += sum(&to_delete) + sum(&to_repack);
    }
    tally.ahead(n as u64, bytes, true);
    let mut marked: Vec<MarkedPack> = to_delete;
    if !to_repack.is_empty() {
        let r = repack::repack(repo, &u, &lock, &to_repack, &mut tally)?;
        let done: HashSet<Id> = r.packs.iter().copied().collect();
        marked.extend(to_repack.into_iter().filter(|m| done.contains(&m.id)));
        report.problems.extend(r.problems.iter().cloned());
        report.repacked = Some(r);
    }
    // The set goes on to this run's own sweep; until then it holds no
    // snapshot of the index open while the plan goes in.
    u.end_reads()?;
    if !marked.is_empty() || has_new_leftovers(repo, &found)? {
        lock.check()?;
        report.plan_id = Some(marking::write_plan(repo, marked)?.to_hex());
        repo.sync_index()?;
    }
    // With no grace period, this run also deletes what it just marked, and
    // what its first sweep left waiting: a plan whose holders it has just
    // written (its prune was killed between the two objects) is due now.
    let left_waiting = !report.sweep.waiting.is_empty();
    if opts.keep_delete.is_zero() && (report.plan_id.is_some() || left_waiting) {
        let found = marking::find_marks(repo)?;
        let mode = sweep::SweepMode {
            dry_run: false,
            last: true,
            ..mode
        };
        report.immediate = Some(sweep::sweep(
            repo,
            &lock,
            mode,
            &found,
            &mut tally,
            Some(u),
        )?);
    } else if report.sweep.compaction.is_none() {
        let c = compact::compact(repo, &lock, &HashSet::new())?;
        if c.segments_written > 0 {
            report.sweep.compaction = Some(c);
        }
    }
    tally.finish();
    Ok(report)
}

/// Whether there are leftovers no pending plan lists yet.
fn has_new_leftovers(repo: &Repository, found: &marking::FoundMarks) -> Result<bool> {
    let listed: HashSet<&String> = found
        .plans
        .iter()
        .filter_map(|p| p.holders.as_ref())
        .flat_map(|(_, h)| &h.leftovers)
        .collect();
    Ok(repo
        .backend()
        .leftovers()?
        .iter()
        .any(|l| !listed.contains(l)))
}

/// Sorts packs into unused (to mark), repack and keep.
fn decide(
    repo: &Repository,
    packs: &[PackUsage],
    opts: &PruneOptions,
) -> (MarkPlan, Vec<MarkedPack>, Vec<MarkedPack>) {
    let mut plan = MarkPlan::default();
    let mut unused = Vec::new();
    let mut partly: Vec<&PackUsage> = Vec::new();
    for p in packs {
        if p.marked {
            plan.already_marked.add(p.size);
        } else if p.used_blobs == 0 {
            plan.unused.add(p.size);
            unused.push(MarkedPack {
                id: p.id,
                size: p.size,
            });
        } else {
            partly.push(p);
        }
    }
    // restic's rule: repack the most wasteful packs until the unused data
    // left is within --max-unused of the repository's size after the prune.
    partly.sort_by(|a, b| {
        let fa = a.unused_bytes() as f64 / a.size.max(1) as f64;
        let fb = b.unused_bytes() as f64 / b.size.max(1) as f64;
        fb.total_cmp(&fa).then(a.id.cmp(&b.id))
    });
    let mut unused_left: u64 = partly.iter().map(|p| p.unused_bytes()).sum();
    let used: u64 = partly.iter().map(|p| p.used_bytes).sum();
    let limit = opts.max_unused.allowed_beside(used);
    let budget = opts.max_repack_size.unwrap_or(u64::MAX);
    let small = (repo.pack_size() as u64) * 4 / 5;
    let mut repack = Vec::new();
    let mut spent = 0u64;
    let mut smalls = 0usize;
    for p in &partly {
        let wasteful = unused_left > limit && p.unused_bytes() > 0;
        let tiny = opts.repack_small && p.size < small;
        if (wasteful || tiny) && spent.saturating_add(p.size) <= budget {
            spent += p.size;
            unused_left -= p.unused_bytes();
            smalls += usize::from(!wasteful);
            plan.repack.add(p.size);
            plan.repack_keeps += p.used_bytes;
            repack.push(MarkedPack {
                id: p.id,
                size: p.size,
            });
        } else {
            plan.keep.add(p.size);
            plan.keep_unused_bytes += p.unused_bytes();
        }
    }
    // One small pack alone gains nothing from being rewritten.
    if smalls == 1 && plan.repack.packs == 1 {
        plan.keep.add(plan.repack.bytes);
        plan.repack = Amount::default();
        plan.repack_keeps = 0;
        repack.clear();
    }
    (plan, unused, repack)
}

#[cfg(test)]
mod tests {
    use super::{MaxUnused, PruneOptions};

    #[test]
    fn max_unused_is_a_share_of_the_repository_after_the_prune() {
        // 5 % of what remains: 95 bytes used allow 5 unused (5 of 100).
        assert_eq!(MaxUnused::Percent(5.0).allowed_beside(95), 5);
        assert_eq!(MaxUnused::Percent(50.0).allowed_beside(1000), 1000);
        assert_eq!(MaxUnused::Percent(0.0).allowed_beside(1000), 0);
        assert_eq!(MaxUnused::Percent(100.0).allowed_beside(1), u64::MAX);
        assert_eq!(MaxUnused::Bytes(7).allowed_beside(1 << 40), 7);
        assert_eq!(MaxUnused::Unlimited.allowed_beside(0), u64::MAX);
    }

    /// restic's sizes: a number, with `b` for bytes or a binary multiple,
    /// either case; anything else is refused, naming the unit.
    #[test]
    fn sizes_parse_as_restics() {
        use super::parse_size;
        for (s, n) in [
            ("1024", 1024),
            ("100b", 100),
            ("100B", 100),
            ("64k", 64 << 10),
            ("100M", 100 << 20),
            ("2g", 2 << 30),
            ("1T", 1 << 40),
        ] {
            assert_eq!(parse_size(s), Ok(n), "{s}");
        }
        assert!(
            parse_size("5x")
                .unwrap_err()
                .contains("use b, k, M, G or T")
        );
        assert!(parse_size("k").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    use crate::archiver::{BackupOptions, backup};
    use crate::maintenance::usage::Usage;
    use crate::progress::NoProgress;
    use crate::repository::Repository;

    /// A repository with small packs and two snapshots of 24 incompressible
    /// files, every other one gone in the second; the first is forgotten
    /// and a prune with the default grace period has repacked and marked
    /// (nothing deleted yet). Returns the forgotten snapshot, to be saved
    /// again by a test that needs it.
    fn pruned_but_not_swept(d: &std::path::Path) -> (Repository, crate::snapshot::Snapshot) {
        use crate::maintenance::forget::{ForgetOptions, forget};

        let repo = crate::repository::test_repository(d);
        let src = d.join("src");
        std::fs::create_dir(&src).unwrap();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..24 {
            let data: Vec<u8> = (0..40_000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            std::fs::write(src.join(format!("f{i:02}")), data).unwrap();
        }
        let bopts = BackupOptions {
            paths: vec![src.clone()],
            ..BackupOptions::default()
        };
        let first = backup(&repo, &bopts, &NoProgress).unwrap();
        let first = first.snapshot_id.unwrap().to_hex();
        let old = crate::snapshot::load(&repo, &first).unwrap();
        for i in (0..24).step_by(2) {
            std::fs::remove_file(src.join(format!("f{i:02}"))).unwrap();
        }
        backup(&repo, &bopts, &NoProgress).unwrap();
        let f = ForgetOptions {
            snapshots: vec![first],
            ..ForgetOptions::default()
        };
        forget(&repo, &f).unwrap();
        let popts = PruneOptions {
            max_unused: MaxUnused::Percent(0.0),
            ..PruneOptions::default()
        };
        let r = super::prune(&repo, &popts).unwrap();
        assert!(r.repacked.is_some() && r.plan_id.is_some(), "{r:?}");
        (repo, old)
    }

    /// A sweep asks each pack of its plans how many used blobs it keeps
    /// ([`super::usage_map::needed_blobs`]) instead of working out every
    /// pack's usage: both must agree on every pack, here in a repository
    /// whose prune has repacked (the kept blobs of the marked packs have a
    /// second copy in an unmarked one) and not yet deleted.
    #[test]
    fn a_plan_pack_is_needed_exactly_when_its_usage_says_so() {
        use super::usage_map::{choose_keepers, needed_blobs, pack_usage};

        let d = tempfile::tempdir().unwrap();
        let (repo, _) = pruned_but_not_swept(d.path());
        let mut u = Usage::new(&repo).unwrap();
        u.mark(&repo, super::all_snapshot_roots(&repo).unwrap())
            .unwrap();
        choose_keepers(&u).unwrap();
        let packs = pack_usage(&u).unwrap();
        let (mut marked_unneeded, mut needed) = (0, 0);
        for p in &packs {
            let n = needed_blobs(&u, &p.id).unwrap();
            assert_eq!(n, p.used_blobs, "pack {}: {p:?}", p.id);
            // The prune copied every used blob of the packs it marked into
            // an unmarked one, which ranks first: no marked pack keeps any.
            assert!(!p.marked || n == 0, "marked pack {} is needed: {p:?}", p.id);
            marked_unneeded += usize::from(p.marked && n == 0);
            needed += usize::from(n > 0);
        }
        // The repacked packs hold copies of used blobs, yet need none.
        assert!(marked_unneeded > 0 && needed > 0, "{packs:?}");
        assert_eq!(needed_blobs(&u, &crate::id::Id([7; 32])).unwrap(), 0);
    }

    /// The sweep of a prune with no grace period takes over the set its
    /// mark phase filled. A snapshot saved after that mark (here the
    /// forgotten one, saved again) must still keep the marked packs it
    /// needs, exactly as a sweep with a set of its own decides.
    #[test]
    fn a_reused_set_still_sees_a_snapshot_saved_after_it() {
        use super::marking::find_marks;
        use super::sweep::{SweepMode, sweep};
        use crate::progress::Tally;

        let d = tempfile::tempdir().unwrap();
        let (repo, old) = pruned_but_not_swept(d.path());
        let lock = repo.lock_maintenance().unwrap();
        let mode = SweepMode {
            grace: std::time::Duration::ZERO,
            dry_run: true,
            last: true,
        };
        let run = |marked: Option<Usage>| {
            let found = find_marks(&repo).unwrap();
            let mut tally = Tally::new(&NoProgress);
            sweep(&repo, &lock.handle(), mode, &found, &mut tally, marked).unwrap()
        };
        let marked_now = || {
            let mut u = Usage::new(&repo).unwrap();
            u.mark(&repo, super::all_snapshot_roots(&repo).unwrap())
                .unwrap();
            u
        };
        // Before: every marked pack can go.
        let before = run(Some(marked_now()));
        assert!(before.packs_deleted > 0, "{before:?}");
        assert_eq!(before.packs_rescued, 0, "{before:?}");

        let earlier = marked_now();
        crate::snapshot::save(&repo, &old).unwrap();
        let reused = run(Some(earlier));
        let fresh = run(None);
        assert!(reused.packs_rescued > 0, "{reused:?}");
        assert_eq!(
            (reused.packs_rescued, reused.packs_deleted),
            (fresh.packs_rescued, fresh.packs_deleted)
        );
    }
}
