//! `larder repair index`: rebuild the index from the pack headers.
//! `larder repair packs`: salvage the readable blobs of damaged packs.
//! `larder repair snapshots`: new snapshots without what is lost.

use super::Global;
use super::filter::FilterArgs;
use super::output::{print_json, safe, warn_vanished};
use crate::error::Result;
use crate::id::Id;
use crate::maintenance::repair_packs::{self, Outcome, RepairPacksReport};
use crate::maintenance::repair_snapshots::{self, Change, RepairOptions, RepairReport};
use crate::snapshot::Snapshot;
use crate::snapshot::select;

/// Repair repository metadata.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  larder repair index\n  larder repair packs 1a2b3c4d\n  \
    larder repair snapshots --dry-run"
)]
pub struct Args {
    #[command(subcommand)]
    cmd: RepairCmd,
}

#[derive(clap::Subcommand, Debug)]
enum RepairCmd {
    /// Rebuild `index/` from the pack headers.
    #[command(after_help = "Example:\n  larder repair index")]
    Index,
    /// Salvage damaged packs (named by `check --read-data`): the blobs that
    /// still decrypt and hash to their ids are copied into new packs, and
    /// the damaged packs are deleted. A pack found intact is left alone.
    #[command(
        after_help = "What is lost is missing from the index afterwards: a backup of the \
same paths stores it again from the files still on disk, and `larder repair snapshots \
--forget` removes what no file can give back. Takes an exclusive lock.

Examples:
  larder check --read-data
  larder repair packs 1a2b3c4d 5e6f7a8b
  larder backup ~ && larder repair snapshots --forget"
    )]
    Packs(PacksArgs),
    /// Rewrite snapshots whose trees reference missing data: files with a
    /// missing chunk are removed (or cut with --truncate), directories that
    /// cannot be read become empty; the new snapshots are tagged `repaired`.
    #[command(
        after_help = "Run `larder repair index` first, and a backup of the same \
paths (it stores again what is lost and still on disk).

Examples:
  larder repair snapshots --dry-run
  larder repair snapshots --forget
  larder repair snapshots 1a2b3c4d --truncate"
    )]
    Snapshots(SnapshotsArgs),
}

#[derive(clap::Args, Debug)]
struct PacksArgs {
    /// The packs to salvage: ids, or prefixes that name one pack.
    #[arg(required = true, value_name = "PACK")]
    packs: Vec<String>,
}

#[derive(clap::Args, Debug)]
struct SnapshotsArgs {
    /// Snapshots to repair (ids, prefixes or `latest`; default: all that
    /// pass the filters).
    snapshots: Vec<String>,
    /// Keep a damaged file's data up to its first missing chunk (and list
    /// it) instead of removing the file.
    #[arg(long)]
    truncate: bool,
    /// Remove each original snapshot once its repaired one is saved.
    #[arg(long)]
    forget: bool,
    /// Only print what would change.
    #[arg(short = 'n', long)]
    dry_run: bool,
    #[command(flatten)]
    filter: FilterArgs,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    match a.cmd {
        RepairCmd::Index => {
            let repo = g.open()?;
            let rep = repo.repair_index()?;
            for p in &rep.problems {
                eprintln!("warning: {}", safe(p));
            }
            if g.json {
                print_json(&rep);
            } else if !g.quiet {
                println!(
                    "rebuilt index from {} packs ({} blobs)",
                    rep.packs, rep.blobs
                );
            }
            Ok(if rep.problems.is_empty() { 0 } else { 1 })
        }
        RepairCmd::Packs(p) => packs(g, p),
        RepairCmd::Snapshots(s) => snapshots(g, s),
    }
}

fn packs(g: &Global, a: PacksArgs) -> Result<i32> {
    crate::interrupt::install_handlers()?;
    let repo = g.open()?;
    let ids = repo.resolve_packs(&a.packs)?;
    let rep = repair_packs::repair_packs(&repo, &ids)?;
    let lost = rep.lost();
    if g.json {
        print_json(&rep);
    } else if !g.quiet {
        print_packs(&rep);
    }
    if lost > 0 {
        eprintln!(
            "warning: {lost} blob(s) could not be salvaged and are no longer in the index: back \
             up the same paths again (files still on disk are stored again), then run \
             `larder repair snapshots --forget` for what is still missing"
        );
    }
    Ok(0)
}

fn print_packs(rep: &RepairPacksReport) {
    for p in &rep.packs {
        let short = &p.pack[..8.min(p.pack.len())];
        for problem in &p.problems {
            println!("pack {short}: {}", safe(problem));
        }
        match p.outcome {
            Outcome::Intact => println!("pack {short}: every blob verified; left as it is"),
            Outcome::Repaired => println!(
                "pack {short}: {} blob(s) salvaged, {} lost; pack deleted",
                p.salvaged,
                p.lost.len()
            ),
        }
        for b in &p.lost {
            println!("  lost {} blob {}: {}", b.ty, &b.id[..8], safe(&b.reason));
        }
    }
    println!(
        "wrote {} new pack(s) holding {} salvaged blob(s)",
        rep.written.packs_written, rep.written.blobs_added
    );
}

fn snapshots(g: &Global, a: SnapshotsArgs) -> Result<i32> {
    crate::interrupt::install_handlers()?;
    let repo = g.open()?;
    let (snaps, bad) = select(&repo, &a.snapshots, &a.filter.filter())?;
    for e in &bad {
        eprintln!("warning: {}", safe(&e.to_string()));
    }
    let opts = RepairOptions {
        truncate: a.truncate,
        forget: a.forget,
        dry_run: a.dry_run,
    };
    let mut shown: Option<Id> = None;
    let rep = repair_snapshots::repair_snapshots(&repo, &snaps, opts, &mut |sid, change| {
        if g.json {
            print_json(&serde_json::json!({ "snapshot": sid.to_hex(), "change": change }));
            return;
        }
        if shown != Some(*sid) {
            shown = Some(*sid);
            if let Some((_, s)) = snaps.iter().find(|(i, _)| i == sid) {
                println!("\n{}", header(sid, s));
            }
        }
        println!("  {}", safe(&describe(change)));
    })?;
    if g.json {
        print_json(&rep);
    } else if !g.quiet {
        print_summary(&rep);
    }
    Ok(warn_vanished(&rep.vanished))
}

/// `snapshot 1a2b3c4d of [/home/me] at 2024-05-01 10:00:00 by me@laptop`
fn header(id: &Id, s: &Snapshot) -> String {
    safe(&format!(
        "snapshot {} of [{}] at {} by {}@{}",
        id.short(),
        s.paths.join(" "),
        s.time_local(),
        s.username,
        s.hostname
    ))
    .into_owned()
}

fn describe(c: &Change) -> String {
    match c {
        Change::FileRemoved { path, missing_blob } => {
            format!(
                "file {path:?}: removed (data blob {} is missing)",
                &missing_blob[..8]
            )
        }
        Change::FileTruncated {
            path,
            missing_blob,
            size_before,
            size_after,
        } => format!(
            "file {path:?}: truncated from {size_before} to {size_after} bytes \
             (data blob {} is missing)",
            &missing_blob[..8]
        ),
        Change::DirEmptied { path, error } => {
            format!("dir {path:?}: replaced with an empty directory ({error})")
        }
        Change::DirRemoved { path, error } => {
            format!("dir {path:?}: left out, with all below it ({error})")
        }
        Change::RootUnreadable { error } => {
            format!("the root tree cannot be read, nothing is left to save ({error})")
        }
    }
}

fn print_summary(rep: &RepairReport) {
    println!();
    for r in &rep.repaired {
        let old = &r.snapshot[..8];
        match (&r.new_snapshot, rep.dry_run) {
            (_, true) => println!("would repair snapshot {old} ({} changes)", r.changes),
            (Some(n), false) if r.reused => {
                println!(
                    "snapshot {old}: repaired snapshot {} already saved",
                    &n[..8]
                )
            }
            (Some(n), false) => println!("saved new snapshot {} (repairs {old})", &n[..8]),
            (None, false) => println!("snapshot {old}: nothing left to save"),
        }
        if r.forgotten {
            println!("removed old snapshot {old}");
        }
    }
    let n = rep.repaired.len();
    match (n, rep.dry_run) {
        (0, false) => println!("no snapshots were modified ({} checked)", rep.checked),
        (0, true) => println!("no snapshots would be modified ({} checked)", rep.checked),
        (_, false) => println!("modified {n} of {} snapshots", rep.checked),
        (_, true) => println!("would modify {n} of {} snapshots", rep.checked),
    }
}
