//! `larder stats`: snapshot sizes in restic's counting modes, and the
//! repository's totals (`--mode repository`). Also the byte and age
//! formatting other commands' summaries share.

use super::Global;
use super::filter::FilterArgs;
use super::output::{human_bytes, print_json, safe};
use crate::error::{Error, Result};
use crate::maintenance::stats::{self, Mode, RepositoryStats, SnapshotStats};

/// Show how much the snapshots hold and the repository stores.
#[derive(clap::Args, Debug)]
#[command(after_help = "Modes (restic's, plus `repository`):
  restore-size       what restoring the snapshots writes (default)
  files-by-contents  regular files counted once per distinct content
  raw-data           the blobs the snapshots use, each once: stored and plaintext bytes
  blobs-per-file     each distinct file's chunks, counted once per path
  repository         the repository's totals: packs, blobs, compression, dedup, unused

Examples:
  larder stats
  larder stats latest --mode raw-data
  larder stats --host laptop --mode files-by-contents --json
  larder stats --mode repository")]
pub struct Args {
    /// Snapshots to count (ids, prefixes or `latest`; default: all that
    /// pass the filters).
    snapshots: Vec<String>,
    /// Counting mode.
    #[arg(long, default_value = "restore-size", value_name = "MODE")]
    mode: String,
    #[command(flatten)]
    filter: FilterArgs,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    crate::interrupt::install_handlers()?;
    let mode = Mode::parse(&a.mode)?;
    let f = &a.filter;
    let filtered =
        !(a.snapshots.is_empty() && f.hosts.is_empty() && f.tags.is_empty() && f.paths.is_empty());
    if mode == Mode::Repository && filtered {
        return Err(Error::Usage(
            "--mode repository counts every snapshot and the whole index; \
             it takes no snapshot ids, --host, --tag or --path"
                .into(),
        ));
    }
    // The lock comes before the snapshots are picked (see `lock_for_reading`).
    let (repo, _lock) = g.open_for_reading()?;
    if mode == Mode::Repository {
        let t = stats::repository_stats(&repo)?;
        if g.json {
            print_json(&t);
        } else {
            print_repository(&t);
        }
        return Ok(0);
    }
    let (snaps, bad) = crate::snapshot::select(&repo, &a.snapshots, &a.filter.filter())?;
    for e in &bad {
        eprintln!("warning: {}", safe(&e.to_string()));
    }
    let st = stats::snapshot_stats(&repo, &snaps, mode)?;
    if st.missing_blobs > 0 {
        eprintln!(
            "warning: {} blobs the snapshots use are missing from the index and were not \
             counted (run `larder check`)",
            st.missing_blobs
        );
    }
    if g.json {
        print_json(&st);
    } else {
        print_snapshots(mode, &st);
    }
    Ok(0)
}

fn print_snapshots(mode: Mode, st: &SnapshotStats) {
    println!("Stats in {} mode:", mode.name());
    println!("     Snapshots processed:  {}", st.snapshots_count);
    if st.total_blob_count > 0 {
        println!("        Total Blob Count:  {}", st.total_blob_count);
    }
    if st.total_file_count > 0 {
        println!("        Total File Count:  {}", st.total_file_count);
    }
    if st.total_uncompressed_size > 0 {
        println!(
            " Total Uncompressed Size:  {}",
            human_bytes(st.total_uncompressed_size)
        );
    }
    println!("              Total Size:  {}", human_bytes(st.total_size));
    if st.compression_progress > 0.0 {
        println!("    Compression Progress:  {:.2}%", st.compression_progress);
    }
    if st.compression_ratio > 0.0 {
        println!("       Compression Ratio:  {:.2}x", st.compression_ratio);
    }
    if st.compression_space_saving > 0.0 {
        println!(
            "Compression Space Saving:  {:.2}%",
            st.compression_space_saving
        );
    }
}

fn print_repository(t: &RepositoryStats) {
    let b = human_bytes;
    println!("Repository totals:");
    println!("               Snapshots:  {}", t.snapshots);
    println!(
        "                   Packs:  {} ({})",
        t.packs,
        b(t.pack_bytes)
    );
    println!(
        "                   Blobs:  {} ({} trees, {} data)",
        t.blobs, t.tree_blobs, t.data_blobs
    );
    println!("            Stored Bytes:  {}", b(t.stored_bytes));
    println!("      Before Compression:  {}", b(t.uncompressed_bytes));
    println!("       Compression Ratio:  {:.2}x", t.compression_ratio);
    println!(
        "            Restore Size:  {} (all snapshots)",
        b(t.restore_size)
    );
    println!(
        "             Unique Data:  {} (plaintext)",
        b(t.unique_data_size)
    );
    println!("            Dedup Factor:  {:.2}x", t.dedup_factor);
    println!(
        "                    Used:  {} blobs, {}",
        t.used_blobs,
        b(t.used_bytes)
    );
    println!(
        " Unused (awaiting prune):  {} blobs, {}",
        t.unused_blobs,
        b(t.unused_bytes)
    );
    if t.duplicate_blob_copies > 0 {
        println!(
            "        Duplicate Copies:  {}, {}",
            t.duplicate_blob_copies,
            b(t.duplicate_bytes)
        );
    }
    if t.missing_blobs > 0 {
        println!(
            "                 Missing:  {} blobs (run `larder check`)",
            t.missing_blobs
        );
    }
}

/// An age as text: `3 days old`, `5 hours old`, `from just now`.
pub(super) fn age_text(secs: u64) -> String {
    let (n, unit) = match secs {
        0..60 => return "from just now".into(),
        60..3600 => (secs / 60, "minute"),
        3600..86_400 => (secs / 3600, "hour"),
        _ => (secs / 86_400, "day"),
    };
    let s = if n == 1 { "" } else { "s" };
    format!("{n} {unit}{s} old")
}
