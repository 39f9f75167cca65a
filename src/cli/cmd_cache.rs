//! `larder cache`: list the local cache directories, or remove old ones.

use super::Global;
use super::output::human_bytes;
use super::output::{print_json, safe};
use crate::error::Result;
use crate::repository::cache_dirs::{self, CacheDir};
use std::time::{Duration, SystemTime};

/// List the local cache directories (one per repository), or remove those
/// unused for a while (as restic's `cache`). Needs no repository.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  larder cache\n  larder cache --cleanup --max-age 60")]
pub struct Args {
    /// Remove the caches unused for longer than --max-age (those a running
    /// larder is using are kept).
    #[arg(long)]
    cleanup: bool,
    /// A cache unused for more than this many days is old.
    #[arg(long, value_name = "DAYS", default_value_t = 30)]
    max_age: u64,
    /// Do not add up the size of each cache.
    #[arg(long)]
    no_size: bool,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let root = g.cache_dir();
    let max_age = Duration::from_secs(a.max_age.saturating_mul(86_400));
    if a.cleanup {
        let r = cache_dirs::cleanup(&root, max_age)?;
        if g.json {
            print_json(&r);
        } else if !g.quiet {
            for id in &r.removed {
                println!("removed {}", safe(&root.join(id).display().to_string()));
            }
            for id in &r.in_use {
                println!("kept {} (in use)", &id[..10.min(id.len())]);
            }
            println!(
                "removed {} old cache(s) in {}",
                r.removed.len(),
                safe(&root.display().to_string())
            );
        }
        return Ok(0);
    }
    let dirs = cache_dirs::list(&root, max_age, !a.no_size)?;
    if g.json {
        print_json(&dirs);
        return Ok(0);
    }
    if g.quiet {
        return Ok(0);
    }
    println!(
        "{:<12}{:<14}{:<5}{:>12}",
        "Repo ID", "Last Used", "Old", "Size"
    );
    println!("{}", "-".repeat(43));
    for d in &dirs {
        println!(
            "{:<12}{:<14}{:<5}{:>12}",
            &d.id[..10.min(d.id.len())],
            ago(d),
            if d.old { "yes" } else { "" },
            d.size.map(human_bytes).unwrap_or_default()
        );
    }
    println!("{}", "-".repeat(43));
    let old = dirs.iter().filter(|d| d.old).count();
    println!(
        "{} cache dir(s) in {}, {old} old{}",
        dirs.len(),
        safe(&root.display().to_string()),
        if old > 0 {
            " (`larder cache --cleanup` removes them)"
        } else {
            ""
        }
    );
    Ok(0)
}

/// "today", "1 day ago", "12 days ago".
fn ago(d: &CacheDir) -> String {
    let days = SystemTime::now()
        .duration_since(d.last_used)
        .unwrap_or_default()
        .as_secs()
        / 86_400;
    match days {
        0 => "today".into(),
        1 => "1 day ago".into(),
        n => format!("{n} days ago"),
    }
}
