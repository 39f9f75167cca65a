//! `larder prune`: give back the space of data no snapshot uses (two
//! phases: mark now, delete on a later run once nothing can need it),
//! with a terminal line counting the packs repacked and deleted.

use super::Global;
use super::output::{print_json, safe};
use super::progress::{Mode, TermProgress};
use crate::error::Result;
use crate::maintenance::prune::{
    self, Amount, MaxUnused, PruneOptions, PruneReport, SweepReport, parse_size,
};

/// Remove unused data: delete what earlier prunes marked, mark what no
/// snapshot uses now.
#[derive(clap::Args, Debug, Clone)]
#[command(
    after_help = "Examples:\n  larder forget --keep-daily 7 --keep-weekly 4 --prune\n  larder prune\n  \
    larder prune --dry-run --max-unused 10%\n  larder prune --keep-delete 0s   # delete at once (when no backup runs)"
)]
pub struct Args {
    #[command(flatten)]
    pub flags: PruneFlags,
    /// Show what would be marked, repacked and deleted; change nothing.
    #[arg(short = 'n', long)]
    pub dry_run: bool,
}

/// How to prune (shared with `forget --prune`).
#[derive(clap::Args, Debug, Clone)]
pub struct PruneFlags {
    /// Tolerate this much unused data before repacking partly used packs:
    /// a share of the repository after the prune (`5%`), a size (`100M`)
    /// or `unlimited`.
    #[arg(long, default_value = "5%", value_name = "LIMIT")]
    pub max_unused: String,
    /// Repack at most this many bytes of packs per run (`1G`).
    #[arg(long, value_name = "SIZE")]
    pub max_repack_size: Option<String>,
    /// Also merge packs smaller than 80% of the target pack size.
    #[arg(long)]
    pub repack_small: bool,
    /// How long marked data waits before a later prune deletes it (`1d`,
    /// `12h`, `0s` to delete in this run when no backup is running).
    #[arg(long, default_value = "1d", value_name = "DURATION")]
    pub keep_delete: String,
}

impl PruneFlags {
    /// The library's options.
    pub fn options(&self, dry_run: bool) -> Result<PruneOptions> {
        Ok(PruneOptions {
            max_unused: MaxUnused::parse(&self.max_unused)?,
            max_repack_size: self
                .max_repack_size
                .as_deref()
                .map(|s| {
                    parse_size(s)
                        .map_err(|e| crate::Error::Usage(format!("--max-repack-size {s:?}: {e}")))
                })
                .transpose()?,
            repack_small: self.repack_small,
            keep_delete: prune::parse_grace(&self.keep_delete)?,
            dry_run,
        })
    }
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / 1048576.0)
}

fn amount(a: &Amount) -> String {
    format!("{} packs, {}", a.packs, mib(a.bytes))
}

fn print_sweep(s: &SweepReport, dry_run: bool, now: bool) {
    let when = if now {
        "marked just now"
    } else {
        "marked earlier"
    };
    if s.packs_deleted > 0 || s.packs_rescued > 0 {
        println!(
            "{} {} packs ({}) {when}{}",
            if dry_run { "would delete" } else { "deleted" },
            s.packs_deleted,
            mib(s.bytes_deleted),
            if s.packs_rescued > 0 {
                format!("; kept {} that a newer snapshot uses", s.packs_rescued)
            } else {
                String::new()
            }
        );
    }
    if s.leftovers_removed > 0 {
        println!(
            "{} {} leftover(s) of interrupted runs",
            if dry_run { "would remove" } else { "removed" },
            s.leftovers_removed
        );
    }
    for w in &s.waiting {
        println!(
            "waiting: {} packs ({}) of plan {}: {}",
            w.packs,
            mib(w.bytes),
            &w.plan[..8.min(w.plan.len())],
            w.reason
        );
    }
    if let Some(c) = &s.compaction
        && c.segments_written > 0
    {
        println!(
            "index: {} of {} segments rewritten as {}",
            c.segments_replaced, c.segments_before, c.segments_written
        );
    }
}

fn print_report(r: &PruneReport) {
    let m = &r.marked_from;
    println!(
        "{} snapshots use {} trees and {} data blobs",
        m.snapshots, m.trees, m.data_blobs
    );
    print_sweep(&r.sweep, r.dry_run, false);
    println!("repository: {}", amount(&r.total));
    let p = &r.plan;
    let verb = if r.dry_run { "to mark" } else { "marked" };
    println!("  unused, {verb} for deletion: {}", amount(&p.unused));
    println!(
        "  partly used, repacked:      {} (keeping {})",
        amount(&p.repack),
        mib(p.repack_keeps)
    );
    println!(
        "  kept as they are:           {} ({} unused)",
        amount(&p.keep),
        mib(p.keep_unused_bytes)
    );
    if p.already_marked.packs > 0 {
        println!(
            "  marked by earlier runs:     {}",
            amount(&p.already_marked)
        );
    }
    if let Some(i) = &r.immediate {
        print_sweep(i, false, true);
    }
    if r.missing_blobs > 0 {
        println!(
            "warning: {} blobs that snapshots use are not in the index; run `larder check`",
            r.missing_blobs
        );
    }
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let opts = a.flags.options(a.dry_run)?;
    crate::interrupt::install_handlers()?;
    let repo = g.open()?;
    let report = run_prune(g, &repo, &opts)?;
    show(g, &report);
    Ok(0)
}

/// Runs the prune with a terminal line (none with `--json`, `-q` or
/// stderr not a terminal) counting the packs repacked and deleted.
pub fn run_prune(g: &Global, repo: &crate::Repository, opts: &PruneOptions) -> Result<PruneReport> {
    let progress = TermProgress::counting(Mode::pick(false, g.quiet || g.json), false, "packs");
    let report = prune::prune_with_progress(repo, opts, &progress);
    progress.finish();
    report
}

/// Prints a prune's report (warnings, then JSON or the human summary).
pub fn show(g: &Global, report: &PruneReport) {
    for p in &report.problems {
        eprintln!("warning: {}", safe(p));
    }
    if g.json {
        print_json(report);
    } else if !g.quiet {
        print_report(report);
    }
}
