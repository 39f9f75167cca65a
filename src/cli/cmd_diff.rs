//! `larder diff`: what changed between two snapshots.

use super::Global;
use super::output::{print_json, safe};
use crate::diff::{self, DiffEntry, DiffStats};
use crate::error::Result;
use crate::snapshot::{self, Filter};
use serde::Serialize;

/// Show what changed between two snapshots.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  larder diff 1a2b3c4d latest")]
pub struct Args {
    first: String,
    second: String,
    /// Also list paths whose metadata alone changed.
    #[arg(long)]
    metadata: bool,
}

/// One changed path as `--json` shows it.
#[derive(Serialize)]
struct Change<'a> {
    message_type: &'static str,
    path: &'a str,
    modifier: String,
    changes: &'a [&'static str],
}

/// The closing statistics as `--json` shows them.
#[derive(Serialize)]
struct Statistics<'a> {
    message_type: &'static str,
    source_snapshot: String,
    target_snapshot: String,
    #[serde(flatten)]
    stats: &'a DiffStats,
}

fn print_change(json: bool, e: &DiffEntry) {
    if json {
        print_json(&Change {
            message_type: "change",
            path: &e.path,
            modifier: e.modifier.to_string(),
            changes: &e.changes,
        });
    } else if e.changes.is_empty() {
        println!("{:<5}{}", e.modifier, safe(&e.path));
    } else {
        println!(
            "{:<5}{} ({})",
            e.modifier,
            safe(&e.path),
            e.changes.join(", ")
        );
    }
}

fn print_stats(stats: &DiffStats, metadata: bool) {
    println!();
    println!(
        "Files:       {:>6} new, {:>6} removed, {:>6} changed",
        stats.files_added, stats.files_removed, stats.files_changed
    );
    println!(
        "Dirs:        {:>6} new, {:>6} removed",
        stats.dirs_added, stats.dirs_removed
    );
    println!(
        "Others:      {:>6} new, {:>6} removed",
        stats.others_added, stats.others_removed
    );
    if metadata {
        println!("Metadata:    {:>6} changed", stats.metadata_changed);
    }
    println!(
        "Data Blobs:  {:>6} new, {:>6} removed",
        stats.blobs_added, stats.blobs_removed
    );
    println!("Added:   {} bytes", stats.bytes_added);
    println!("Removed: {} bytes", stats.bytes_removed);
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let repo = g.open()?;
    let (a_id, first) = snapshot::resolve(&repo, &a.first, &Filter::default())?;
    let (b_id, second) = snapshot::resolve(&repo, &a.second, &Filter::default())?;
    let json = g.json;
    if !json && !g.quiet {
        println!("comparing snapshot {} to {}:\n", a_id.short(), b_id.short());
    }
    let stats = diff::diff(&repo, first.tree, second.tree, a.metadata, &mut |e| {
        print_change(json, e)
    })?;
    if json {
        print_json(&Statistics {
            message_type: "statistics",
            source_snapshot: a_id.to_hex(),
            target_snapshot: b_id.to_hex(),
            stats: &stats,
        });
    } else if !g.quiet {
        print_stats(&stats, a.metadata);
    }
    Ok(0)
}
