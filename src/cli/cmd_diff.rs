//! `larder diff`: what changed between two snapshots, or between a
//! snapshot and a directory on disk (the second argument is taken as a
//! directory when it is one and contains a `/` or is `.`, or when it is one
//! and is not a snapshot reference).

use super::Global;
use super::output::{print_json, safe};
use crate::diff::{self, DiffEntry, DiffStats};
use crate::diff_live::{self, LiveDiffOptions};
use crate::error::Result;
use crate::snapshot::{self, Filter};
use serde::Serialize;

/// Show what changed between two snapshots, or since a snapshot on disk.
///
/// With a directory as the second argument, compares the snapshot's copy
/// of that directory (same absolute path) with the disk, judging files by
/// size, mtime, ctime and inode as the backup's warm scan does.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  larder diff 1a2b3c4d latest\n  \
    larder diff latest /home/me/Documents --metadata\n  \
    larder diff latest ./project --content   # also re-hash files whose metadata matches")]
pub struct Args {
    /// The snapshot to compare from: an id, a unique prefix or `latest`.
    first: String,
    /// A second snapshot, or a directory on disk.
    second: String,
    /// Also list paths whose metadata alone changed.
    #[arg(long)]
    metadata: bool,
    /// Against a directory: re-read and re-hash files whose size matches, to
    /// find content changed behind an unchanged mtime.
    #[arg(long)]
    content: bool,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    target_snapshot: Option<String>,
    /// For a diff against a directory on disk.
    #[serde(skip_serializing_if = "Option::is_none")]
    target_path: Option<String>,
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

/// Whether `second` names a directory on disk rather than a snapshot.
fn is_live_dir(repo: &crate::Repository, second: &str) -> bool {
    let p = std::path::Path::new(second);
    p.is_dir()
        && (second.contains('/')
            || second == "."
            || second == ".."
            || snapshot::resolve(repo, second, &Filter::default()).is_err())
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    // The lock comes before the snapshots are picked (see `lock_for_reading`).
    let (repo, _lock) = g.open_for_reading()?;
    if is_live_dir(&repo, &a.second) {
        return run_live(g, &repo, &a);
    }
    if a.content {
        return Err(crate::Error::Usage(
            "--content applies to a diff against a directory".into(),
        ));
    }
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
            target_snapshot: Some(b_id.to_hex()),
            target_path: None,
            stats: &stats,
        });
    } else if !g.quiet {
        print_stats(&stats, a.metadata);
    }
    Ok(0)
}

/// A diff of snapshot `a.first` against the directory `a.second`.
fn run_live(g: &Global, repo: &crate::Repository, a: &Args) -> Result<i32> {
    let _lock = repo.lock_for_reading()?;
    let (a_id, first) = snapshot::resolve(repo, &a.first, &Filter::default())?;
    let dir = crate::localfs::absolute(std::path::Path::new(&a.second))?;
    let json = g.json;
    if !json && !g.quiet {
        println!(
            "comparing snapshot {} to {}:\n",
            a_id.short(),
            safe(&dir.to_string_lossy())
        );
    }
    let opts = LiveDiffOptions {
        metadata: a.metadata,
        content: a.content,
    };
    let stats = diff_live::diff_live(repo, first.tree, &dir, opts, &mut |e| print_change(json, e))?;
    if json {
        print_json(&Statistics {
            message_type: "statistics",
            source_snapshot: a_id.to_hex(),
            target_snapshot: None,
            target_path: Some(dir.to_string_lossy().into_owned()),
            stats: &stats,
        });
    } else if !g.quiet {
        print_stats(&stats, a.metadata);
    }
    Ok(0)
}
