//! `larder tag`: add, remove or set the tags of snapshots (restic's flags).

use super::Global;
use super::filter::FilterArgs;
use super::output::{print_json, safe, warn_vanished};
use crate::error::Result;
use crate::maintenance::tag::{self, TagOptions};
use crate::snapshot::select;

/// Add, remove or replace the tags of snapshots.
///
/// Each changed snapshot is saved anew (a new id) with everything but its
/// tags unchanged, and the old one is removed after that. Without snapshot
/// ids, every snapshot passing --host/--tag/--path is changed. A tag
/// given as `a,b` is two tags.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  larder tag --add keep-forever 1a2b3c4d
  larder tag --remove nightly --add weekly latest
  larder tag --set archived --host oldbox      # every snapshot of host oldbox
  larder tag --set '' 1a2b3c4d                 # no tags at all")]
pub struct Args {
    /// Snapshots to change (ids, prefixes or `latest`; default: all that
    /// pass the filters).
    #[arg(value_name = "SNAPSHOT")]
    snapshots: Vec<String>,
    /// Add this tag (repeatable).
    #[arg(long, value_name = "TAG", value_delimiter = ',')]
    add: Vec<String>,
    /// Remove this tag (repeatable).
    #[arg(long, value_name = "TAG", value_delimiter = ',')]
    remove: Vec<String>,
    /// Replace all tags with these (repeatable; `--set ''` clears them).
    #[arg(long, value_name = "TAG", value_delimiter = ',', conflicts_with_all = ["add", "remove"])]
    set: Vec<String>,
    #[command(flatten)]
    filter: FilterArgs,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    crate::interrupt::install_handlers()?;
    let opts = TagOptions {
        set: (!a.set.is_empty()).then_some(a.set),
        add: a.add,
        remove: a.remove,
    };
    let repo = g.open()?;
    let (snaps, bad) = select(&repo, &a.snapshots, &a.filter.filter())?;
    for e in &bad {
        eprintln!("warning: {}", safe(&e.to_string()));
    }
    let rep = tag::tag(&repo, &snaps, &opts)?;
    if g.json {
        print_json(&rep);
    } else if !g.quiet {
        for c in &rep.changed {
            let new = c.new_snapshot.as_deref().unwrap_or("");
            println!(
                "snapshot {} is now {} with tags [{}] (were [{}]){}",
                &c.snapshot[..8],
                new.get(..8).unwrap_or(new),
                safe(&c.tags_after.join(", ")),
                safe(&c.tags_before.join(", ")),
                if c.reused {
                    " (saved by an earlier run)"
                } else {
                    ""
                }
            );
        }
        println!(
            "modified {} snapshots ({} already as asked)",
            rep.changed.len(),
            rep.unchanged.len()
        );
    }
    Ok(warn_vanished(&rep.vanished))
}
