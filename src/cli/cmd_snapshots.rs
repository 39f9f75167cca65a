//! `larder snapshots`: list snapshots.

use super::Global;
use super::filter::FilterArgs;
use super::output::{print_json, safe};
use crate::error::Result;
use crate::id::Id;
use crate::snapshot::{self, Snapshot, Summary};
use serde::Serialize;

/// List snapshots.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  larder snapshots\n  larder snapshots --host laptop --json")]
pub struct Args {
    #[command(flatten)]
    filter: FilterArgs,
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
    let (list, bad) = snapshot::list(&repo, &a.filter.filter())?;
    for e in &bad {
        eprintln!("warning: {}", safe(&e.to_string()));
    }
    if g.json {
        let arr: Vec<_> = list
            .iter()
            .map(|(id, s)| SnapshotJson::new(id, s))
            .collect();
        print_json(&arr);
        return Ok(0);
    }
    println!(
        "{:<10} {:<20} {:<16} {:<16} paths",
        "ID", "Time", "Host", "Tags"
    );
    println!("{}", "-".repeat(78));
    for (id, s) in &list {
        println!(
            "{:<10} {:<20} {:<16} {:<16} {}",
            id.short(),
            s.time_local(),
            safe(&s.hostname),
            safe(&s.tags.join(",")),
            safe(&s.paths.join(" "))
        );
    }
    println!("{}", "-".repeat(78));
    println!("{} snapshots", list.len());
    Ok(0)
}
