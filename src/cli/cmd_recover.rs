//! `larder recover`: save a snapshot of the trees no snapshot reaches.

use super::Global;
use super::output::{print_json, safe};
use crate::error::Result;
use crate::maintenance::recover::{RECOVER_PATH, recover};

/// Recover data no snapshot references any more (after a `forget` of the
/// wrong snapshots, before a prune): save one snapshot, path `/recover`,
/// holding a directory for each lost tree, named by its short id.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  larder recover --dry-run\n  larder recover\n  \
    larder restore <ID>:/<TREE> --target ~/recovered"
)]
pub struct Args {
    /// Only say which trees are lost; save nothing (takes no exclusive lock).
    #[arg(short = 'n', long)]
    dry_run: bool,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    crate::interrupt::install_handlers()?;
    let repo = g.open()?;
    let report = recover(&repo, a.dry_run)?;
    for u in &report.unreadable {
        eprintln!("warning: left out: {}", safe(u));
    }
    if report.missing_blobs > 0 {
        eprintln!(
            "warning: {} blob(s) below the lost trees are no longer in the repository (a prune \
             deleted them); run `larder repair snapshots` to save the recovered snapshot without them",
            report.missing_blobs
        );
    }
    if g.json {
        print_json(&report);
    } else if !g.quiet {
        println!(
            "read {} trees: {} lost (no snapshot or tree references them)",
            report.trees,
            report.lost.len()
        );
        for t in &report.lost {
            println!("  {}", &t[..8.min(t.len())]);
        }
        match (&report.snapshot_id, report.lost.is_empty()) {
            (_, true) => println!("nothing to recover"),
            (Some(id), false) => println!(
                "snapshot {} saved: each lost tree is a directory under {RECOVER_PATH}; \
                 restore one with `larder restore {}:/TREE --target DIR`",
                &id[..8],
                &id[..8]
            ),
            (None, false) => println!("dry run: no snapshot saved"),
        }
    }
    let partial = !report.unreadable.is_empty() || report.missing_blobs > 0;
    Ok(if partial { 3 } else { 0 })
}
