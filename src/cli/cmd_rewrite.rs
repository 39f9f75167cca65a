//! `larder rewrite`: new snapshots without excluded paths (restic's flags).

use super::Global;
use super::filter::FilterArgs;
use super::output::{print_json, safe, warn_vanished};
use crate::archiver::with_exclude_files;
use crate::error::Result;
use crate::maintenance::rewrite::{self, RewriteOptions, RewriteReport};
use crate::snapshot::select;
use std::path::PathBuf;

/// Rewrite snapshots to leave out files (a secret, a cache caught by
/// mistake), or to give them another host or time.
///
/// Patterns are those of `backup --exclude`: without `/` a name anywhere,
/// with `/` an absolute path (a directory takes what is beneath it). The
/// new snapshots keep time, host, paths and tags, plus the tag `rewrite`;
/// with --forget the originals are removed instead. Snapshots with nothing
/// to leave out are not touched. Without snapshot ids, every snapshot
/// passing --host/--tag/--path is rewritten. The data leaves the
/// repository at the next `prune`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  larder rewrite --exclude '/home/me/.env' --dry-run
  larder rewrite --exclude '*.key' --exclude-file ~/excludes --forget
  larder rewrite -e /home/me/huge.iso 1a2b3c4d && larder prune
  larder rewrite --host oldname --new-host newname --forget")]
pub struct Args {
    /// Snapshots to rewrite (ids, prefixes or `latest`; default: all that
    /// pass the filters).
    #[arg(value_name = "SNAPSHOT")]
    snapshots: Vec<String>,
    /// Leave out paths matching this glob (repeatable).
    #[arg(short = 'e', long = "exclude", value_name = "PATTERN")]
    excludes: Vec<String>,
    /// Read exclude globs from this file, one a line (repeatable).
    #[arg(long, value_name = "FILE")]
    exclude_file: Vec<PathBuf>,
    /// Give the new snapshots this host (a machine renamed).
    #[arg(long, value_name = "HOST")]
    new_host: Option<String>,
    /// Give the new snapshots this time ("YYYY-MM-DD HH:MM:SS", local, or
    /// RFC 3339 with an offset).
    #[arg(long, value_name = "TIME")]
    new_time: Option<String>,
    /// Remove the original snapshots once the new ones are saved.
    #[arg(long)]
    forget: bool,
    /// Only print what would be left out.
    #[arg(short = 'n', long)]
    dry_run: bool,
    #[command(flatten)]
    filter: FilterArgs,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    crate::interrupt::install_handlers()?;
    let opts = RewriteOptions {
        excludes: with_exclude_files(&a.excludes, &a.exclude_file)?,
        forget: a.forget,
        dry_run: a.dry_run,
        new_host: a.new_host.clone(),
        new_time: a
            .new_time
            .as_deref()
            .map(|t| super::cmd_backup::parse_time(t, &jiff::tz::TimeZone::system()))
            .transpose()?,
    };
    let repo = g.open()?;
    let (snaps, bad) = select(&repo, &a.snapshots, &a.filter.filter())?;
    for e in &bad {
        eprintln!("warning: {}", safe(&e.to_string()));
    }
    let rep = rewrite::rewrite(&repo, &snaps, &opts)?;
    if g.json {
        print_json(&rep);
    } else if !g.quiet {
        print_report(&rep);
    }
    Ok(warn_vanished(&rep.vanished))
}

fn print_report(rep: &RewriteReport) {
    for r in &rep.rewritten {
        let old = &r.snapshot[..8];
        println!("snapshot {old}:");
        for p in &r.removed {
            println!("  excluded {}", safe(p));
        }
        match &r.new_snapshot {
            None => println!("  would save a new snapshot"),
            Some(n) if r.reused => println!("  new snapshot {} already saved", &n[..8]),
            Some(n) => println!("  saved new snapshot {}", &n[..8]),
        }
        if r.forgotten {
            println!("  removed snapshot {old}");
        }
    }
    let n = rep.rewritten.len();
    if rep.dry_run {
        println!("would modify {n} of {} snapshots", rep.checked);
    } else {
        println!(
            "modified {n} of {} snapshots ({} new trees)",
            rep.checked, rep.trees_written
        );
    }
}
