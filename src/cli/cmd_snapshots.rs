//! `larder snapshots`: list snapshots, as restic's: named ones or all that
//! pass the filters, the last N of each host and path set, in groups.

use super::Global;
use super::filter::{FilterArgs, group_by, group_heading};
use super::output::{print_json, safe};
use crate::error::Result;
use crate::id::Id;
use crate::retention::{self, GroupBy, GroupKey};
use crate::snapshot::{self, Snapshot, Summary};
use serde::Serialize;

/// List snapshots.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  larder snapshots
  larder snapshots latest
  larder snapshots --latest 1 --group-by host
  larder snapshots --host laptop --json
  larder snapshots --compact")]
pub struct Args {
    /// Snapshots to show (ids, unique prefixes of 4+ hex digits or
    /// `latest`); by default, all that pass the filters.
    snapshots: Vec<String>,
    /// Only the last N snapshots of each host and path set (in each group).
    #[arg(long, value_name = "N")]
    latest: Option<usize>,
    /// Show the snapshots in groups with the same host, paths and/or tags
    /// (`host`, `paths`, `tags`, comma-separated). With `--json`, a list of
    /// `{group_key, snapshots}` instead of a list of snapshots.
    #[arg(short = 'g', long, value_name = "GROUP", value_parser = group_by)]
    group_by: Option<GroupBy>,
    /// One short line a snapshot: id, time, host and tags (no paths, no
    /// size).
    #[arg(short = 'c', long)]
    compact: bool,
    #[command(flatten)]
    filter: FilterArgs,
}

/// A group as `--json --group-by` shows it (restic's field names).
#[derive(Serialize)]
struct GroupJson<'a> {
    group_key: &'a GroupKey,
    snapshots: Vec<SnapshotJson<'a>>,
}

/// A snapshot as `--json` shows it (restic's field names).
#[derive(Serialize)]
pub struct SnapshotJson<'a> {
    id: String,
    short_id: String,
    time: String,
    hostname: &'a str,
    username: &'a str,
    paths: &'a [String],
    tags: &'a [String],
    tree: String,
    parent: Option<String>,
    /// The snapshot this one replaces (`tag`, `rewrite`), as restic's.
    #[serde(skip_serializing_if = "Option::is_none")]
    original: Option<String>,
    program_version: &'a str,
    summary: &'a Summary,
}

impl<'a> SnapshotJson<'a> {
    pub fn new(id: &Id, s: &'a Snapshot) -> Self {
        SnapshotJson {
            id: id.to_hex(),
            short_id: id.short(),
            time: s.time_rfc3339(),
            hostname: &s.hostname,
            username: &s.username,
            paths: &s.paths,
            tags: &s.tags,
            tree: s.tree.to_hex(),
            parent: s.parent.map(|p| p.to_hex()),
            original: s.original.map(|p| p.to_hex()),
            program_version: &s.program_version,
            summary: &s.summary,
        }
    }
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let repo = g.open()?;
    let (list, bad) = snapshot::select(&repo, &a.snapshots, &a.filter.filter())?;
    for e in &bad {
        eprintln!("warning: {}", safe(&e.to_string()));
    }
    let groups = retention::group(list, a.group_by.unwrap_or(GroupBy::NONE));
    let groups: Vec<_> = groups
        .into_iter()
        .map(|mut group| {
            if let Some(n) = a.latest {
                group.snapshots = retention::latest(group.snapshots, n);
            }
            group
        })
        .collect();
    let grouped = a.group_by.is_some_and(|by| by != GroupBy::NONE);
    if g.json && grouped {
        let arr: Vec<_> = groups
            .iter()
            .map(|group| GroupJson {
                group_key: &group.key,
                snapshots: as_json(&group.snapshots),
            })
            .collect();
        print_json(&arr);
    } else if g.json {
        let arr: Vec<_> = groups
            .iter()
            .flat_map(|group| as_json(&group.snapshots))
            .collect();
        print_json(&arr);
    } else if groups.is_empty() {
        print_table(&[], a.compact);
    } else {
        for group in &groups {
            let k = &group.key;
            if let Some(heading) = group_heading(&k.hostname, k.tags.as_deref(), k.paths.as_deref())
            {
                println!("{heading}");
            }
            print_table(&group.snapshots, a.compact);
        }
    }
    Ok(0)
}

/// The snapshots as `--json` shows them.
fn as_json(list: &[(Id, Snapshot)]) -> Vec<SnapshotJson<'_>> {
    list.iter()
        .map(|(id, s)| SnapshotJson::new(id, s))
        .collect()
}

/// The snapshots as a table, oldest first, and their count: with their
/// size (the bytes of their files, as the backup counted them; blank for
/// a snapshot no backup wrote, such as a recovery) and paths, or
/// `compact`.
fn print_table(list: &[(Id, Snapshot)], compact: bool) {
    let width = if compact { 66 } else { 90 };
    if compact {
        println!("{:<10} {:<20} {:<16} Tags", "ID", "Time", "Host");
    } else {
        println!(
            "{:<10} {:<20} {:<16} {:<16} {:>11}  Paths",
            "ID", "Time", "Host", "Tags", "Size"
        );
    }
    println!("{}", "-".repeat(width));
    for (id, s) in list {
        let head = format!(
            "{:<10} {:<20} {:<16} {:<16}",
            id.short(),
            s.time_local(),
            safe(&s.hostname),
            safe(&s.tags.join(",")),
        );
        if compact {
            println!("{}", head.trim_end());
            continue;
        }
        let size = if s.summary == Summary::default() {
            String::new()
        } else {
            super::output::human_bytes(s.summary.total_bytes)
        };
        println!("{head} {size:>11}  {}", safe(&s.paths.join(" ")));
    }
    println!("{}", "-".repeat(width));
    println!("{} snapshots", list.len());
}
